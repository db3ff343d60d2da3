import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import H264
import WebRTC
import CapturePipeline
import WHEPServer
import WHIPClient

struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish the camera to a media server over WebRTC (WHIP, RFC 9725): Janus, or any WHIP server.",
        discussion: """
            One camcap per camera publishes once; the server (an SFU such as Janus behind simple-whip-server, or any \
            WHIP endpoint) fans out to the viewers. camcap POSTs a sendonly H.264 offer, runs ICE (controlling), DTLS \
            and SRTP, and acts on the server's RTCP (PLI/FIR: a key frame, NACK: a retransmission, REMB: the bitrate). \
            When the connection ends by itself it publishes again with backoff (1, 2, 4 … 30 s; back to 1 s after 10 s \
            of media); on exit it DELETEs its resource. The token goes to the endpoint's origin only (no redirect \
            elsewhere or to http, no DELETE on another origin); the answer is read up to 64 KiB.
              camcap publish -d /dev/video0 --whip http://127.0.0.1:7080/whip/endpoint/camera --token SECRET
            --simulcast encodes up to 3 tiers (full, half, quarter size) and publishes them as simulcast layers (RFC 8853, \
            rids f, h, q); the SFU gives each viewer a layer (Janus: substream 2, 1, 0).
            The token comes from --token-file, CAMCAP_WHIP_TOKEN or --token (visible in ps). Guide: docs/publish.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(help: "The WHIP endpoint URL (http:// or https://).") var whip: String
    @Option(help: "The bearer token (visible to other users in ps; prefer --token-file or $CAMCAP_WHIP_TOKEN).") var token: String?
    @Option(help: "Read the bearer token from this file.") var tokenFile: String?
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Seconds to wait for ICE and DTLS after the answer.") var connectTimeout: Double = 10
    @Option(help: .hidden) var consentTimeout: Double = 30 // tests: seconds without an answered consent check before publishing again
    @Flag(help: "Rotate the pixels of a rotated camera even when the server accepts the video-orientation extension.")
    var rotatePixels = false
    @Flag(
        help: ArgumentHelp(
            "Simulcast (RFC 8853): encode up to 3 tiers (full, half and quarter size; fewer for small pictures, as WebRTC's table and serve --tiers) and publish each as a layer (rids f, h, q); the SFU gives each viewer the layer it asks for (Janus: configure substream 2, 1, 0). Every layer the server takes is encoded while connected. The camera's own H.264 stays one layer."
        ))
    var simulcast = false

    func validate() throws {
        try capture.validateCommon()
        try CLIRange.capture(capture)
        try encoding.check(capture)
        guard consentTimeout.isFinite, (1...3600).contains(consentTimeout) else {
            throw ValidationError("--consent-timeout must be 1...3600 s, got \(consentTimeout)")
        }
        guard connectTimeout.isFinite, (1...120).contains(connectTimeout) else {
            throw ValidationError("--connect-timeout must be 1...120 seconds, got \(connectTimeout)")
        }
        if token != nil && tokenFile != nil { throw ValidationError("give the token once: --token or --token-file") }
        do throws(WHIPError) { _ = try WHIPClient(endpoint: whip, token: nil) } catch { throw ValidationError("--whip: \(error)") }
    }

    func run() async throws {
        do { try await publish() } catch { fail(error) }
    }

    private func publish() async throws {
        var secret = token
        if let tokenFile {
            secret = try ServeSecurity.readSmallFile(tokenFile, what: "token file", limit: 4096).trimmingCharacters(in: .whitespacesAndNewlines)
        } else if secret == nil {
            secret = ProcessInfo.processInfo.environment["CAMCAP_WHIP_TOKEN"]
        }
        if let s = secret, s.isEmpty || s.utf8.count > 1024 || s.contains(where: { $0.isNewline || $0 == " " }) {
            throw CLIError("the WHIP token must be 1...1024 characters without spaces or line breaks")
        }
        let pipeline = try CaptureSession(capture.configuration(untilStopped: true))
        let passthrough = pipeline.selection.pixelFormat == .h264 // the camera's own H.264 goes to the server as it is
        let recipe = encoding.recipe
        let settings = try recipe.settings(for: pipeline.selection)
        var whipConfiguration = WHIPOutput.Configuration()
        whipConfiguration.publisher.maxPayload = encoding.mtu
        whipConfiguration.publisher.connectTimeoutNs = Int64(connectTimeout * 1e9)
        whipConfiguration.publisher.consentTimeoutNs = Int64(consentTimeout * 1e9)
        whipConfiguration.publisher.consentIntervalNs = min(5_000_000_000, Int64(consentTimeout * 1e9) / 4)
        if rotatePixels { whipConfiguration.publisher.videoOrientationExtensionID = nil }
        let plan = EncodeTier.plan(
            for: FrameSize(width: settings.width, height: settings.height), maxCount: 3, targetBitrate: settings.targetBitrate,
            maxBitrate: settings.effectiveMaxBitrate)
        let layered = simulcast && !passthrough && plan.count > 1
        if layered { whipConfiguration.publisher.simulcastRIDs = Array(["f", "h", "q"].prefix(plan.count)) }
        let output = try WHIPOutput(client: try WHIPClient(endpoint: whip, token: secret), configuration: whipConfiguration, logger: cliLogger)
        if passthrough {
            // The offer carries the camera's profile-level-id: it goes once the camera's first SPS is seen.
            let stage = PassthroughStage(outputs: [output])
            output.connect(stage, maxBitrate: settings.effectiveMaxBitrate)
            let announce = AnnounceStage(
                line: "publishing to \(whip): passing the camera's own H.264 through (\(pipeline.selection)); the offer goes with its first SPS"
                    + (simulcast ? "; --simulcast: one layer (the camera's H.264 is not re-encoded into tiers)" : ""))
            try await pipeline.runCommand("publishing", quiet: capture.quiet, stages: [announce, stage], namedDevice: capture.device, serving: true)
            return
        }
        pipeline.sourceOptions = VideoSource.Options(applyRotation: true)
        let stage: any PictureStage
        if layered {
            // The layers' pictures are upright (one rotation for every tier), the extension not steered.
            let tiered = TieredEncodeStage(
                tiers: plan, settings: settings, keyIntervalSeconds: recipe.keyIntervalSeconds, outputs: output.layerOutputs(plan.count))
            output.connect(tiered)
            stage = tiered
        } else {
            let encode = EncodeStage(settings: settings, keyIntervalSeconds: recipe.keyIntervalSeconds, outputs: [output])
            output.connect(encode, rotation: rotatePixels ? nil : pipeline.outputRequests)
            stage = encode
        }
        // The offer and answer before the camera starts: a wrong URL, token or server fails at once.
        try output.connect()
        var line = "publishing to \(output.resource?.absoluteString ?? whip)"
        if layered {
            let sent = output.publisher?.sentLayers ?? []
            line +=
                output.publisher?.isSimulcast == true
                ? "; simulcast layers " + sent.map { "\(whipConfiguration.publisher.simulcastRIDs[$0]) \(plan[$0].size)" }.joined(separator: ", ")
                : "; the server refused simulcast: the full layer alone (\(plan[0].size))"
        } else if simulcast {
            line += "; --simulcast: one layer (a \(settings.width)x\(settings.height) picture gets one tier, as WebRTC's table)"
        }
        let announce = AnnounceStage(line: line)
        try await pipeline.runCommand("publishing", quiet: capture.quiet, stages: [announce, stage], namedDevice: capture.device, serving: true)
    }
}
