import Foundation
import WebRTC
public import CapturePipeline
public import Logging
import H264
import VideoCapture

/// A capture session published to a WHIP server, set up in one call: the encoder's settings for the camera's
/// mode, the simulcast tiers when asked for (a picture large enough for more than one), the ``WHIPOutput`` and its
/// stage, and for an encode the first offer and answer, before the camera starts (a wrong URL, token or server
/// fails at once; a camera's own H.264 is published once its first SPS is known). What `camcap publish` runs.
///
/// ```swift
/// let client = try WHIPClient(endpoint: "http://127.0.0.1:7080/whip/endpoint/camera", token: token)
/// let publication = try WHIPPublication.start(session: session, client: client)
/// print(publication.announcement) // publishing to http://127.0.0.1:7080/whip/endpoint/camera/…
/// let report = try await session.run(stages: [publication.stage])
/// ```
///
/// Not `Sendable`: the stage belongs to the session that runs it. The output is, and may be used anywhere.
public struct WHIPPublication {
    /// The output publishing the encode (its publisher, resource and summary).
    public let output: WHIPOutput
    /// The stage to run in the session.
    public let stage: any PictureStage
    /// The simulcast tiers encoded (none: one stream).
    public let tiers: [EncodeTier]
    /// What to tell the user: where it publishes, and the layers the server took (or why there is one).
    public let announcement: String

    /// Makes the output and the stage for `session`'s selection with `encoder` and, unless the camera delivers
    /// H.264, publishes once (`WHIPOutput.connect()`). `simulcast` asks for simulcast under the name it goes by
    /// in the announcement where one layer is all there is ("--simulcast"); nil: one stream. The pixels are turned
    /// upright unless `rotationAsMetadata` (the rotation then stays metadata while the server accepts the
    /// video-orientation extension; without it the offer has no such extension). Throws the encoder's `PipelineError` (the camera's mode), the output's
    /// `WebRTCError` or the `WHIPError` of the first attempt.
    public static func start(
        session: CaptureSession, client: WHIPClient, configuration: WHIPOutput.Configuration = .init(),
        encoder: EncodeStage.Configuration = .init(), rotationAsMetadata: Bool = true, simulcast: String? = nil,
        logger: Logger = Logger(label: "swift-video-capture.whip", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws -> WHIPPublication {
        let (settings, passthrough) = (try encoder.settings(for: session.selection), session.selection.frameKind == .accessUnit)
        var c = configuration
        if !rotationAsMetadata { c.publisher.videoOrientationExtensionID = nil } // upright pixels: no extension offered
        let tiers = simulcast != nil && !passthrough ? c.offerSimulcast(for: settings) : []
        let output = try WHIPOutput(client: client, configuration: c, logger: logger)
        let stage = output.stage(
            for: session, settings: settings, keyIntervalSeconds: encoder.keyIntervalSeconds, rotationAsMetadata: rotationAsMetadata, tiers: tiers)
        encoder.applyBackend(to: stage)
        let endpoint = client.endpoint.absoluteString
        var announcement =
            "publishing to \(endpoint): passing the camera's own H.264 through (\(session.selection)); the offer goes with its first SPS"
        if let simulcast, passthrough { announcement += "; \(simulcast): one layer (the camera's H.264 is not re-encoded into tiers)" }
        if !passthrough { // the offer and answer before the camera starts
            try output.connect()
            announcement = "publishing to \(output.resource.map(WHIPClient.shown) ?? WHIPClient.shown(endpoint))"
            if tiers.count > 1, let publisher = output.publisher {
                let layers = publisher.sentLayers.map { "\(c.publisher.simulcastRIDs[$0]) \(tiers[$0].size)" }.joined(separator: ", ")
                let refused = "; the server refused simulcast: the full layer alone (\(tiers[0].size))"
                announcement += publisher.isSimulcast ? "; simulcast layers \(layers)" : refused
            } else if let simulcast {
                announcement += "; \(simulcast): one layer (a \(settings.width)x\(settings.height) picture gets one tier, as WebRTC's table)"
            }
        }
        return WHIPPublication(output: output, stage: stage, tiers: tiers, announcement: announcement)
    }
}
