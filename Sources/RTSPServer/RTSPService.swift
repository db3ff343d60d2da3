public import CapturePipeline
public import Logging
import H264
import VideoCapture
import VideoCaptureCommons

/// A capture session served over RTSP, set up in one call: the SDP's parameter sets, the hub (its UDP ports
/// bound, its connections kept within the descriptor limit), the stage (the encode, or the camera's own H.264,
/// and a recording of what is served if one is asked for) and the ``RTSPListener``, listening before the camera
/// starts (a busy port fails at once, with nothing captured). What `camcap rtsp` runs.
///
/// ```swift
/// let service = try await RTSPService.start(session: session, configuration: RTSPService.Configuration(port: 0))
/// print(service.announcement) // serving rtsp://127.0.0.1:PORT/camera  (UDP media ports …; no authentication)
/// let report = try await session.run(stages: [service.stage])
/// await service.stop()
/// ```
///
/// Not `Sendable`: the stage belongs to the session that runs it. The hub is, and may be used anywhere.
public struct RTSPService {
    /// Where to listen and what to serve.
    public struct Configuration: Sendable {
        /// The IPv4 or IPv6 address to listen on; the UDP media ports are bound there too (`0.0.0.0` or `::`: every
        /// interface).
        public var host: String
        /// The TCP port; 0 picks a free one (``RTSPService/port`` says which).
        public var port: Int
        /// The hub: the stream's path, the UDP port, timeouts, limits and the authenticator. The service binds its
        /// UDP ports on `host` and lowers `maxConnections` to what the descriptor limit leaves room for.
        public var hub: RTSPHub.Configuration
        /// The encoder recipe (bitrates, key frames, slices within `hub.maxPayload`:
        /// `EncodeStage.Configuration.slices(fitting:)`).
        public var encoder: EncodeStage.Configuration
        /// Also record what is served to this file (the camera then runs without clients too); its frame rate,
        /// when not given, is the camera's.
        public var recording: RecordingOutput.Configuration?

        /// A service on `host`:`port` with the hub's defaults (`/camera`, any UDP port pair, no authentication)
        /// and slices that fit its payload budget.
        public init(host: String = "127.0.0.1", port: Int = 8554, hub: RTSPHub.Configuration = .init(), encoder: EncodeStage.Configuration? = nil) {
            self.host = host
            self.port = port
            self.hub = hub
            self.encoder = encoder ?? EncodeStage.Configuration(sliceMode: EncodeStage.Configuration.slices(fitting: hub.maxPayload))
        }

        /// Checks `host` (an IPv4 or IPv6 address) and `port` (0...65535), then the hub
        /// (`RTSPHub.Configuration.validate()`, its authenticator included), whose `RTSPError` is passed on, the
        /// encoder recipe and the recording (`PipelineError`). A refusal of this type's own settings is an
        /// `RTSPError` with code `invalidConfiguration` naming the setting.
        public func validate() throws {
            try RTSPError.refuse([
                ("host", ListenAddress.isAddress(host) ? nil : "host must be an IPv4 or IPv6 address, got \"\(host.prefix(80))\""),
                ("port", SettingCheck.range("port", port, 0...65535)),
            ])
            try hub.validate()
            try encoder.validate()
            try recording?.validate()
        }
    }

    /// The clients' hub (sessions, figures, events).
    public let hub: RTSPHub
    /// The stage to run in the session.
    public let stage: any PictureStage
    /// The RTSP listener.
    public let listener: RTSPListener
    /// The stream's URL, `rtsp://HOST:PORT/PATH` (a wildcard address: the first interface's IPv4 address).
    public let url: String
    /// What to tell the user once the camera runs: the URL, the UDP media ports and how clients authenticate.
    public let announcement: String

    /// The port listened on (the one picked, for port 0).
    public var port: Int { listener.port }

    /// Builds the hub and the stage for `session`'s selection and starts listening, before the camera starts.
    /// `events` hears every session event (set up, playing, ended) from the start. Throws the encoder's
    /// `PipelineError` (the camera's mode), an `RTSPError` (a port taken) or the recording's error; check the
    /// configuration first with `Configuration.validate()`.
    public static func start(
        session: CaptureSession, configuration c: Configuration, events: (@Sendable (RTSPEvent) -> Void)? = nil,
        logger: Logger = Logger(label: "swift-video-capture.rtsp", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> RTSPService {
        let address = ListenAddress(host: c.host, port: c.port)
        let settings = try c.encoder.settings(for: session.selection), keySeconds = c.encoder.keyIntervalSeconds
        let parameterSets = try RTSPHub.parameterSets(for: session, settings: settings, keyIntervalSeconds: keySeconds)
        var hubConfiguration = c.hub
        hubConfiguration.udpHost = c.host
        hubConfiguration.maxConnections = min(c.hub.maxConnections, connectionsWithinDescriptorLimit(viewers: c.hub.maxSessions))
        let hub = try RTSPHub(configuration: hubConfiguration, parameterSets: parameterSets, logger: logger)
        if let events { hub.onEvent(events) }
        let recording: RecordingOutput?
        do {
            recording = try c.recording.map {
                var r = $0
                r.frameRate = r.frameRate ?? session.selection.fps
                return try RecordingOutput(r)
            }
        } catch {
            hub.closeAll(reason: "the server did not start")
            throw error
        }
        // The encode (or the camera's own H.264), key frames, the wake-up, upright pixels.
        let stage = hub.stage(for: session, settings: settings, keyIntervalSeconds: keySeconds, alsoTo: recording.map { [$0] } ?? [])
        c.encoder.applyBackend(to: stage)
        let listener: RTSPListener
        do { listener = try await RTSPListener.start(host: address.host, port: address.port, hub: hub) } catch {
            hub.closeAll(reason: "the server did not start")
            throw error
        }
        let url = "rtsp://\(address.urlHost(address.isWildcard ? upIPv4InterfaceAddresses() : [])):\(listener.port)\(c.hub.path)"
        let announcement =
            "serving \(url)  (UDP media ports \(hub.udpPorts.rtp)-\(hub.udpPorts.rtcp); "
            + (c.hub.authenticator.map { "Digest authentication, user \($0.user))" } ?? "no authentication)")
        return RTSPService(hub: hub, stage: stage, listener: listener, url: url, announcement: announcement)
    }

    /// Ends every session (clients get an RTCP BYE) with `reason`, then stops listening.
    public func stop(reason: String = "the server stopped") async {
        hub.closeAll(reason: reason)
        await listener.stop()
    }
}
