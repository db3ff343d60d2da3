import ArgumentParser
import Foundation
import VideoCapture
import WHIPClient

struct Publish: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish the camera to a media server over WebRTC (WHIP, RFC 9725): Janus, or any WHIP server.",
        discussion: """
            camcap POSTs a sendonly H.264 offer to the WHIP endpoint of a media server (an SFU such as Janus behind simple-whip-server), \
            which fans out to the viewers; it acts on the server's RTCP, publishes again with backoff when the connection ends by itself, \
            and DELETEs its resource on exit.
              camcap publish -d /dev/video0 --whip http://127.0.0.1:7080/whip/endpoint/camera --token SECRET
            The token comes from --token-file, CAMCAP_WHIP_TOKEN or --token (visible in ps). Guide: docs/publish.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(help: "The WHIP endpoint URL (http:// or https://).") var whip: String
    @OptionGroup var auth: TokenOptions // default: $CAMCAP_WHIP_TOKEN
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Seconds to wait for ICE and DTLS after the answer.") var connectTimeout: Double = 10
    @Option(help: .hidden) var consentTimeout: Double = 30 // tests: seconds without an answered consent check before publishing again
    @Flag(help: "Rotate the pixels of a rotated camera even when the server accepts the video-orientation extension.") var rotatePixels = false
    @Flag(help: "Encode up to 3 tiers (full, half, quarter size) and publish as simulcast layers (RFC 8853, rids f, h, q).") var simulcast = false

    func validate() throws {
        do throws(WHIPError) { _ = try WHIPClient(endpoint: whip, token: nil) } catch { throw ValidationError("--whip: \(error)") }
        try validating { try configuration.validate() }
    }

    /// The publisher's settings: payload budget, timeouts, consent checks, the orientation extension.
    private var configuration: WHIPOutput.Configuration {
        var c = WHIPOutput.Configuration()
        (c.publisher.maxPayload, c.publisher.connectTimeoutNs) = (encoding.mtu, nanoseconds(seconds: connectTimeout))
        c.publisher.consentTimeoutNs = nanoseconds(seconds: consentTimeout)
        c.publisher.consentIntervalNs = min(5_000_000_000, c.publisher.consentTimeoutNs / 4)
        if rotatePixels { c.publisher.videoOrientationExtensionID = nil }
        return c
    }

    func execute() async throws {
        let secret = try WHIPClient.token(
            given: auth.token, file: auth.tokenFile, fallback: ProcessInfo.processInfo.environment["CAMCAP_WHIP_TOKEN"])
        let pipeline = try capture.session(untilStopped: true), recipe = encoding.recipe
        let (settings, passthrough) = (try recipe.settings(for: pipeline.selection), pipeline.selection.pixelFormat == .h264)
        var c = configuration
        let tiers = simulcast && !passthrough ? c.offerSimulcast(for: settings) : []
        let output = try WHIPOutput(client: try WHIPClient(endpoint: whip, token: secret), configuration: c, logger: cliLogger)
        let stage = output.stage(
            for: pipeline, settings: settings, keyIntervalSeconds: recipe.keyIntervalSeconds, rotationAsMetadata: !rotatePixels, tiers: tiers)
        var announce = "publishing to \(whip): passing the camera's own H.264 through (\(pipeline.selection)); the offer goes with its first SPS"
        if simulcast && passthrough { announce += "; --simulcast: one layer (the camera's H.264 is not re-encoded into tiers)" }
        if !passthrough { // the offer and answer before the camera starts: a wrong URL, token or server fails at once
            try output.connect()
            announce = "publishing to \(output.resource?.absoluteString ?? whip)"
            if tiers.count > 1, let publisher = output.publisher {
                let layers = publisher.sentLayers.map { "\(c.publisher.simulcastRIDs[$0]) \(tiers[$0].size)" }.joined(separator: ", ")
                let refused = "; the server refused simulcast: the full layer alone (\(tiers[0].size))"
                announce += publisher.isSimulcast ? "; simulcast layers \(layers)" : refused
            } else if simulcast {
                announce += "; --simulcast: one layer (a \(settings.width)x\(settings.height) picture gets one tier, as WebRTC's table)"
            }
        }
        try await capture.run(pipeline, "publishing", stages: [stage], announce: announce, serving: true)
    }
}
