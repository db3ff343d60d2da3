public import CapturePipeline
public import H264
public import Logging
public import WebRTC
public import RTP
public import VideoCapture
import VideoProcessing

/// A capture session broadcast to WHEP viewers, wired in one call: the viewer hub, the encode (tiers as WebRTC
/// simulcast, one shared encode, or a camera's own H.264 passed through), the hub's hold on it (key-frame requests,
/// each viewer's estimate), the camera's wake-up when a viewer arrives and the rotation steering.
///
/// Make it before the camera starts, run ``stage`` in the session and serve ``hub`` (``WHEPEndpoint``):
///
/// ```swift
/// let broadcast = try WHEPBroadcast(session: session, identity: try DTLSIdentity(), peer: peer)
/// let endpoint = WHEPEndpoint(hub: broadcast.hub, policy: policy)
/// let report = try await session.run(stages: [broadcast.stage])
/// ```
///
/// Not `Sendable`: the stage belongs to the session that runs it. The hub is, and may be used anywhere.
public struct WHEPBroadcast {
    /// What to encode, and how the viewers steer it.
    public struct Configuration: Sendable {
        /// The encoder recipe (bitrates, key frames, slices: `EncodeStage.Configuration.slices(fitting:)` with the
        /// peers' `maxPayload`); of the full tier when there are several.
        public var encoder: EncodeStage.Configuration
        /// Encode tiers at most (1...3: full, half and quarter size, fewer for small pictures; `EncodeTier.plan`),
        /// each viewer on the largest its own link carries. 1: one encode, following the lowest viewer's estimate.
        public var tiers: Int
        /// With one encode: the lowest viewer's estimate also lowers the size and frame rate (WebRTC's balanced
        /// steps, through the session's `outputRequests`), and raises them when it recovers.
        public var adaptsToBandwidth: Bool
        /// The camera's rotation goes as metadata (the video-orientation extension) while every viewer takes it
        /// (`ViewerHub.steerRotation`); false: the pixels are always turned upright.
        public var rotationAsMetadata: Bool

        /// Three tiers of `encoder`, rotation as metadata where viewers take it, no size adaptation.
        public init(
            encoder: EncodeStage.Configuration = EncodeStage.Configuration(sliceMode: .maxNALSize(1200)), tiers: Int = 3,
            adaptsToBandwidth: Bool = false, rotationAsMetadata: Bool = true
        ) {
            self.encoder = encoder
            self.tiers = tiers
            self.adaptsToBandwidth = adaptsToBandwidth
            self.rotationAsMetadata = rotationAsMetadata
        }

        /// Bounds for the viewers' send-side estimate (`WebRTCPeer.Configuration.sendSideEstimation`) that fit
        /// this encoder: from 50 kbit/s up to its highest bitrate (`maxBitrateKbps`, else 1.5 × the target),
        /// starting at the target or 1 Mbit/s, whichever is lower.
        public var sendSideEstimation: SendSideBandwidthEstimator.Configuration {
            let (bitrate, maxBitrate) = (encoder.bitrateKbps, encoder.maxBitrateKbps)
            return SendSideBandwidthEstimator.Configuration(
                minBitrate: 50_000, maxBitrate: (maxBitrate ?? bitrate * 3 / 2) * 1000, startBitrate: min(bitrate, 1000) * 1000)
        }
    }

    /// The viewers: the endpoint's hub, and the encode's output.
    public let hub: ViewerHub
    /// The stage to run in the session: a `TieredEncodeStage`, an `EncodeStage` or, for a camera that delivers
    /// H.264, a `PassthroughStage`.
    public let stage: any PictureStage
    /// The encoder settings for the session's selection (the full tier's).
    public let settings: H264Encoder.Settings
    /// The tiers encoded (more than one), else empty: one encode, or the camera's own H.264.
    public let tiers: [EncodeTier]
    /// The camera delivers H.264, passed through to every viewer without an encoder (one tier, the camera's
    /// size; its rotation only as metadata).
    public let passesThrough: Bool

    /// Builds the hub and the encode for `session`'s selection, connects them, has arriving viewers wake a camera
    /// released for idleness (`CaptureSession.wakeAction`) and sets the session's `sourceOptions.applyRotation`
    /// (upright pixels, unless the viewers steer the rotation or the camera's H.264 passes through). Throws
    /// `invalidConfiguration` when the encoder cannot take the camera's mode or `tiers` is not 1...3.
    public init(
        session: CaptureSession, identity: DTLSIdentity, peer: WebRTCPeer.Configuration, limits: ViewerHub.Limits = ViewerHub.Limits(),
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "swift-video-capture.whep", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(PipelineError) {
        guard (1...3).contains(configuration.tiers) else {
            throw PipelineError(.invalidConfiguration, "tiers must be 1...3, got \(configuration.tiers)")
        }
        let settings = try configuration.encoder.settings(for: session.selection)
        let keySeconds = configuration.encoder.keyIntervalSeconds
        let hub = ViewerHub(identity: identity, configuration: peer, limits: limits, logger: logger)
        let passesThrough = session.selection.frameKind == .accessUnit
        let plan = EncodeTier.plan(
            for: FrameSize(width: settings.width, height: settings.height), maxCount: configuration.tiers,
            targetBitrate: settings.targetBitrate, maxBitrate: settings.effectiveMaxBitrate)
        if passesThrough {
            let passthrough = PassthroughStage(outputs: [hub])
            hub.connect(passthrough, maxBitrate: settings.effectiveMaxBitrate)
            stage = passthrough
        } else if plan.count > 1 {
            let tiered = TieredEncodeStage(
                tiers: plan, settings: settings, keyIntervalSeconds: keySeconds, outputs: hub.tierOutputs(plan.count),
                firstTier: { [hub] in hub.tierToEncodeFirst })
            hub.connect(tiered)
            stage = tiered
        } else {
            let single = EncodeStage(settings: settings, keyIntervalSeconds: keySeconds, outputs: [hub])
            hub.connect(single, adapting: configuration.adaptsToBandwidth ? session.outputRequests : nil)
            stage = single
        }
        configuration.encoder.applyBackend(to: stage)
        hub.whenViewersArrive(session.wakeAction) // a camera released for want of viewers starts again
        hub.showCamera(session.health) // /stats says whether the camera streams, is away or has no signal
        // The camera's rotation is applied to the pixels (WebRTC's rotation_applied) unless every viewer takes it as
        // metadata (the video-orientation extension): the hub decides as viewers come and go.
        session.sourceOptions.applyRotation = !passesThrough
        if configuration.rotationAsMetadata && !passesThrough { hub.steerRotation(session.outputRequests) }
        self.hub = hub
        self.settings = settings
        self.tiers = passesThrough || plan.count < 2 ? [] : plan
        self.passesThrough = passesThrough
    }
}
