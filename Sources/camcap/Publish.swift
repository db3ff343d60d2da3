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

    /// The publisher's settings: payload budget, timeouts, consent checks (the orientation extension: `WHIPPublication`).
    private var configuration: WHIPOutput.Configuration {
        var c = WHIPOutput.Configuration()
        (c.publisher.maxPayload, c.publisher.connectTimeoutNs) = (encoding.mtu, nanoseconds(seconds: connectTimeout))
        c.publisher.setConsentTimeout(nanoseconds(seconds: consentTimeout))
        return c
    }

    func execute() async throws {
        let secret = try WHIPClient.token(
            given: auth.token, file: auth.tokenFile, fallback: ProcessInfo.processInfo.environment["CAMCAP_WHIP_TOKEN"])
        let backend = try encoding.encoder.backend(for: "publish")
        let pipeline = try capture.session(untilStopped: true), client = try WHIPClient(endpoint: whip, token: secret)
        let publication = try WHIPPublication.start(
            session: pipeline, client: client, configuration: configuration, encoder: encoding.recipe(backend: backend),
            rotationAsMetadata: !rotatePixels,
            simulcast: simulcast ? "--simulcast" : nil, logger: cliLogger)
        try await capture.run(pipeline, "publishing", stages: [publication.stage], announce: publication.announcement)
    }
}
