public import CapturePipeline
public import Logging
public import WebRTC
import NIOSSL
import VideoCaptureCommons

/// A capture session served to browsers over WHEP, set up in one call: the DTLS identity, the broadcast (viewer
/// hub and encodes: ``WHEPBroadcast``), the host names the server answers to, the policy kept within the
/// descriptor limit, TLS (certificate files or a self-signed certificate) and the ``HTTPServer``, listening
/// before the camera starts (a busy port fails at once, with nothing captured). What `camcap serve` runs.
///
/// ```swift
/// let service = try await WHEPService.start(session: session, configuration: WHEPService.Configuration(port: 0, policy: policy))
/// print(service.announcement) // serving http://127.0.0.1:PORT/#token=…
/// let report = try await session.run(stages: service.stages)
/// await service.stop()
/// ```
///
/// Not `Sendable`: the stage belongs to the session that runs it (as ``WHEPBroadcast``'s). The hub is, and
/// may be used anywhere.
public struct WHEPService {
    /// Where to listen and what to serve: the address, the viewers' peer settings and limits, the encodes, the
    /// policy, the SRTP profiles and TLS.
    public struct Configuration: Sendable {
        /// The IPv4 or IPv6 address to listen on (HTTP; the viewers' UDP sockets bind there too); `0.0.0.0` or `::`
        /// for every interface.
        public var host: String
        /// The TCP port; 0 picks a free one (``WHEPService/port`` says which).
        public var port: Int
        /// Who may watch and how much of the server they may use. The service adds to its `hostNames` the names
        /// a browser reaches it by (the listen and candidate addresses, every interface's for a wildcard address,
        /// `localhost` for loopback: `ServeSecurity.hostNames`), sets `tls`, and lowers `maxConnections` to what
        /// the descriptor limit leaves room for (`ServeSecurity.connectionsWithinDescriptorLimit(viewers:)`).
        public var policy: ServerPolicy
        /// Where the token came from, for the announcement ("--token", "random"); nil says nothing.
        public var tokenSource: String?
        /// The viewers' peers. The service binds them to `host`; with no `candidateHosts`, their candidate is
        /// `host`, or for a wildcard address every interface's IPv4 address (`interfaceAddresses()`).
        public var peer: WebRTCPeer.Configuration
        /// Viewers connected and connecting, in all and per client address.
        public var limits: ViewerHub.Limits
        /// What to encode (tiers, the recipe) and how the viewers steer it.
        public var broadcast: WHEPBroadcast.Configuration
        /// The SRTP profiles offered, preferred first (at least one).
        public var srtpProfiles: [SRTPProfile]
        /// HTTP, HTTPS with a certificate and key read from PEM files, or HTTPS with a certificate made at start.
        public var tls: TLS
        /// Stills and MJPEG (`GET /snapshot.jpg`, `GET /stream.mjpeg`: a ``JPEGFeed``); nil (the default): none.
        /// Not for a camera whose own H.264 passes through (it gives no pictures): the service then has none.
        public var stills: JPEGFeed.Configuration?

        /// How the server speaks HTTP.
        public enum TLS: Sendable, Equatable {
            /// Plain HTTP.
            case none
            /// HTTPS with the certificate chain and the private key of these PEM files (`ServeSecurity.tlsContext`).
            case files(certificate: String, key: String)
            /// HTTPS with a self-signed certificate made at start for the server's names; the announcement gives
            /// its fingerprints (`ServeSecurity.selfSignedContext`).
            case selfSigned
        }

        /// A service on `host`:`port` under `policy`, with the default peers (the send-side estimate bounded by
        /// the encoder: `WHEPBroadcast.Configuration.sendSideEstimation`), limits, three tiers, both SRTP profiles
        /// and plain HTTP.
        public init(
            host: String = "127.0.0.1", port: Int = 8080, policy: ServerPolicy, broadcast: WHEPBroadcast.Configuration = .init(),
            tls: TLS = .none
        ) {
            self.host = host
            self.port = port
            self.policy = policy
            self.broadcast = broadcast
            self.tls = tls
            self.peer = WebRTCPeer.Configuration(bindHost: host, candidateHosts: [])
            self.peer.sendSideEstimation = broadcast.sendSideEstimation
            self.limits = ViewerHub.Limits()
            self.srtpProfiles = [.aeadAes128Gcm, .aes128CmSha1_80]
        }

        /// Checks everything before anything is bound or captured: `host` (an IPv4 or IPv6 address), `port`
        /// (0...65535), `srtpProfiles` (not empty), then the peers (`WebRTCPeer.Configuration.validate()`, with
        /// the candidates given), the limits, the policy and the broadcast at `frameRate`
        /// (`WHEPBroadcast.Configuration.validate(frameRate:)`), whose errors are passed on. A refusal of this
        /// type's own settings is a `ServerError` with code `invalidConfiguration` naming the setting.
        public func validate(frameRate: Double = 30) throws {
            try ServerError.refuse([
                ("host", ListenAddress.isAddress(host) ? nil : "host must be an IPv4 or IPv6 address, got \"\(host.prefix(80))\""),
                ("port", SettingCheck.range("port", port, 0...65535)),
                ("srtpProfiles", srtpProfiles.isEmpty ? "srtpProfiles must name at least one profile" : nil),
            ])
            try peer.validate()
            try limits.validate()
            try policy.validate()
            try broadcast.validate(frameRate: frameRate)
            try stills?.validate()
        }
    }

    /// The broadcast: the viewer hub and the encode (``stage``, run it in the session).
    public let broadcast: WHEPBroadcast
    /// The HTTP server (WHEP, the player page, /stats, /metrics, the app's routes).
    public let server: HTTPServer
    /// The policy the endpoint applies: the configuration's, with the host names, TLS and the connection limit set.
    public let policy: ServerPolicy
    /// The server's base URL, `http[s]://HOST:PORT/` (a wildcard address: the first candidate address).
    public let url: String
    /// What to tell the user once the camera runs, one line each: the URL to open (the token in its fragment,
    /// which a browser never sends), the WHEP endpoint and how it authenticates; the tiers, or the camera's own
    /// H.264 passed through; the TLS certificate; a note when the descriptor limit lowered the connections.
    public let announcement: String

    /// Stills and MJPEG, when the configuration asked for them (and the camera gives pictures).
    public let stills: JPEGFeed?
    /// The viewers.
    public var hub: ViewerHub { broadcast.hub }
    /// The broadcast's stage (the encode); run ``stages`` to have the stills too.
    public var stage: any PictureStage { broadcast.stage }
    /// The stages to run in the session: the broadcast's, then the stills' (with `Configuration.stills`).
    public var stages: [any PictureStage] { [broadcast.stage] + (stills.map { [$0.stage] } ?? []) }
    /// The port listened on (the one picked, for port 0).
    public var port: Int { server.port }

    /// Builds the broadcast for `session`'s selection and starts the HTTP server, before the camera starts. Gives
    /// `metrics` (Prometheus text) at GET /metrics and tries `routes` (the app's own, behind the policy) before
    /// WHEP's. Throws a `ServerError` (the port taken, the TLS files, the DTLS certificate: code `tls`) or the
    /// broadcast's `PipelineError`; check the configuration first with `Configuration.validate(frameRate:)`.
    public static func start(
        session: CaptureSession, configuration c: Configuration, metrics: (@Sendable () -> String)? = nil,
        routes: (@Sendable (WHEPRequest) -> WHEPResponse?)? = nil,
        logger: Logger = Logger(label: "swift-video-capture.whep", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> WHEPService {
        let address = ListenAddress(host: c.host, port: c.port)
        let identity: DTLSIdentity
        do { identity = try DTLSIdentity(profiles: c.srtpProfiles) } catch { throw ServerError(.tls, "cannot create the DTLS certificate: \(error)") }
        let interfaces = address.isWildcard ? interfaceAddresses() : []
        let hosts = c.peer.candidateHosts.isEmpty ? (address.isWildcard ? interfaces : [address.host]) : c.peer.candidateHosts
        var peer = c.peer
        (peer.bindHost, peer.candidateHosts) = (c.host, hosts)
        let broadcast = try WHEPBroadcast(
            session: session, identity: identity, peer: peer, limits: c.limits, configuration: c.broadcast, logger: logger)
        let names = ServeSecurity.hostNames(
            listening: address.host, isWildcard: address.isWildcard, candidates: hosts, interfaces: interfaces, extra: Array(c.policy.hostNames))
        var policy = c.policy
        policy.hostNames = names
        policy.maxConnections = min(
            c.policy.maxConnections, ServeSecurity.connectionsWithinDescriptorLimit(viewers: c.limits.maxViewers + c.limits.maxPending))
        let tls: (context: NIOSSLContext, description: String)?
        switch c.tls {
        case .none: tls = nil
        case .files(let certificate, let key): tls = try ServeSecurity.tlsContext(certificate: certificate, key: key)
        case .selfSigned: tls = try ServeSecurity.selfSignedContext(names: names.sorted())
        }
        policy.tls = tls != nil
        let stills = broadcast.passesThrough ? nil : c.stills.map { JPEGFeed(session: session, configuration: $0) }
        let endpoint = WHEPEndpoint(hub: broadcast.hub, policy: policy, metrics: metrics, stills: stills)
        let server = try await HTTPServer.start(host: address.host, port: address.port, endpoint: endpoint, tls: tls?.context, routes: routes)
        let url = "\(tls == nil ? "http" : "https")://\(address.urlHost(hosts)):\(server.port)/"
        let token = policy.token
        var lines = [
            "serving \(url)\(token.map { "#token=\($0)" } ?? "")  (WHEP: \(url)whep"
                + (token != nil ? ", Authorization: Bearer TOKEN; token: \(c.tokenSource ?? "given"))" : ", no authentication)")
        ]
        if broadcast.passesThrough {
            lines.append("passing the camera's own H.264 through (\(session.selection)): one tier, no encoder")
        } else if !broadcast.tiers.isEmpty {
            lines.append("tiers: " + broadcast.tiers.map(\.description).joined(separator: ", "))
        }
        if stills != nil {
            lines.append("stills: \(url)snapshot.jpg and \(url)stream.mjpeg (the token as Authorization: Bearer, or ?token=)")
        }
        if let tls { lines.append(tls.description) }
        if policy.maxConnections < c.policy.maxConnections {
            lines.append("note: at most \(policy.maxConnections) HTTP connections (the descriptor limit, ulimit -n, leaves room for no more)")
        }
        return WHEPService(
            broadcast: broadcast, server: server, policy: policy, url: url, announcement: lines.joined(separator: "\n"), stills: stills)
    }

    /// Tells every viewer (RTCP BYE, DTLS close_notify) with `reason`, then stops the server.
    public func stop(reason: String = "the server stopped") async {
        broadcast.hub.closeAll(reason: reason)
        await server.stop()
    }
}
