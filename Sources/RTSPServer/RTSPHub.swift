import Foundation
import Synchronization
public import Logging
public import VideoCaptureCommons
import VideoCapture // PixelFormat: whether the camera delivers H.264 itself (pass-through)
public import H264
import VideoProcessing
import RTP
public import CapturePipeline
import NIOCore
import SystemIO

/// An RTSP 1.0 server's core (RFC 2326): the session table, the methods (OPTIONS, DESCRIBE, SETUP over UDP or
/// TCP interleaved, PLAY, PAUSE, TEARDOWN, GET_PARAMETER), Digest authentication, and an encoded output that
/// fans one encode out to every playing client, each through its own `RTPSender` (RTCP: sender reports,
/// receiver reports, NACK, PLI). The network host is `RTSPListener`.
///
/// The encoder rests while nobody plays (`wantsFrames`); a client that starts playing asks for a key frame, and
/// gets nothing before one (with SPS/PPS). UDP sessions end at their timeout without a request or RTCP from the
/// client; TCP sessions last as long as their connection (as in GStreamer's rtsp-server and MediaMTX), and a
/// TCP client too slow to take the stream has frames dropped (counted) and is disconnected after
/// `Configuration.slowClientTimeoutNs` of it. A session not played within `Configuration.setupTimeoutNs` of
/// its SETUP ends. A session belongs to where it was made: a TCP session to its connection, a UDP session to
/// its client's address; a request naming it from anywhere else gets 454, as for a session that does not exist.
/// With an authenticator, wrong answers are checked within `Configuration.authenticationBudget`.
public final class RTSPHub: EncodedOutput, Sendable {
    /// The server's settings.
    public struct Configuration: Sendable {
        /// The stream's path: `rtsp://HOST:PORT/camera` for `/camera`.
        public var path = "/camera"
        /// The address the shared UDP media ports are bound on (the RTSP listener's address).
        public var udpHost = "127.0.0.1"
        /// The RTP port of the shared UDP pair (RTCP on the next one); 0 picks a free even port.
        public var udpPort = 0
        /// A UDP session without a request or RTCP from its client for this long ends (60 s, announced as
        /// `Session: ID;timeout=60`).
        public var sessionTimeoutNs: Int64 = 60_000_000_000
        /// A session (UDP or TCP) that has not been played this long after its SETUP ends (6 s): SETUPs never
        /// played cannot hold the sessions.
        public var setupTimeoutNs: Int64 = 6_000_000_000
        /// Sessions at once (503 beyond it), and per client address.
        public var maxSessions = 16, maxSessionsPerAddress = 8
        /// RTSP connections at once (503 beyond it), and per client address.
        public var maxConnections = 64, maxConnectionsPerAddress = 16
        /// A request must be complete this long after its first byte arrived, else the connection is closed.
        public var requestTimeoutNs: Int64 = 10_000_000_000
        /// A connection with no session and no request for this long is closed.
        public var idleTimeoutNs: Int64 = 60_000_000_000
        /// The request parser's bounds.
        public var parserLimits = RTSPParser.Limits()
        /// RTP payload bytes per packet.
        public var maxPayload = 1200
        /// Bytes a TCP client may have waiting to be written before its frames are dropped.
        public var maxQueuedBytes = 1 << 20
        /// A TCP client whose frames have been dropped for this long (it does not read) is disconnected.
        public var slowClientTimeoutNs: Int64 = 10_000_000_000
        /// Digest authentication; nil lets anyone who reaches the port watch.
        public var authenticator: DigestAuthenticator?
        /// How many wrong Digest answers are checked, per address and in all, and how they are slowed down.
        public var authenticationBudget = AuthenticationBudget()
        /// The defaults above.
        public init() {}
    }

    /// The shortest time between two key frames requested for clients (300 ms, in nanoseconds).
    public static let keyFrameIntervalNs: Int64 = 300_000_000
    /// The methods this server answers, as OPTIONS lists them.
    public static let methods = "OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER"

    /// The configuration the hub was made with.
    public let configuration: Configuration
    /// The shared UDP media ports (RTP, RTCP).
    public var udpPorts: (rtp: Int, rtcp: Int) { (ports.rtpPort, ports.rtcpPort) }

    private struct State {
        var sessions: [String: RTSPSessionHandle] = [:]
        var order: [String] = []
        /// Playing sessions, rebuilt on change (the encoder's thread only retains it: nothing allocated per frame).
        var playing: [RTSPSessionHandle] = []
        var total = 0, left = 0
        var closed = false
        var lastKeyFrameNs: Int64 = .min / 2
        var lastEnded: String?
        /// The last sessions that ended, with why (at most 64).
        var ended: [(RTSPSessionStatistics, String)] = []
        var refusals = RTSPRefusals()
        var parameterSets: (sps: [UInt8], pps: [UInt8])?
    }
    private let state: Mutex<State>
    let ports: UDPPorts
    private let keyFramePending = Atomic<Bool>(false)
    private let encoder = Mutex<EncoderControl?>(nil)
    private let arrival = Mutex<(@Sendable () -> Void)?>(nil)
    private let eventHandler = Mutex<(@Sendable (RTSPEvent) -> Void)?>(nil)
    private let housekeeping = Mutex<WorkerThread?>(nil)
    private let logger: Logger
    private let sessionIDs = Mutex(SystemRandomNumberGenerator())
    let throttle: AuthThrottle

    /// A hub whose UDP ports are bound now (a busy port fails here). `parameterSets` are the SPS and PPS the
    /// SDP announces until the encoder's first key frame gives its own (`parameterSets(for:)` makes them from
    /// the encoder settings). Runs a thread ("rtsp-rtcp") for RTCP, sender reports and session timeouts until
    /// `closeAll`/`end`.
    public init(
        configuration: Configuration, parameterSets: (sps: [UInt8], pps: [UInt8])?,
        logger: Logger = Logger(label: "swift-video-capture.rtsp", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(RTSPError) {
        let c = configuration
        guard c.path.hasPrefix("/"), c.path.utf8.count <= 200, !c.path.contains("?"), !c.path.contains(" ") else {
            throw RTSPError(.invalidConfiguration, "the path \"\(c.path.prefix(80))\" must start with / and have no spaces or '?'")
        }
        guard c.sessionTimeoutNs >= 1_000_000_000, c.maxSessions >= 1, c.maxSessionsPerAddress >= 1, c.maxConnections >= 1,
            c.maxConnectionsPerAddress >= 1, (100...65_000).contains(c.maxPayload), c.maxQueuedBytes >= 65_536,
            c.requestTimeoutNs > 0, c.idleTimeoutNs > 0, c.slowClientTimeoutNs > 0, c.setupTimeoutNs > 0,
            c.authenticationBudget.perAddressBurst >= 1, c.authenticationBudget.globalBurst >= 1,
            c.authenticationBudget.perAddressPerSecond > 0, c.authenticationBudget.globalPerSecond > 0,
            c.authenticationBudget.failuresPerConnection >= 1, c.authenticationBudget.maxAddresses >= 1
        else { throw RTSPError(.invalidConfiguration, "a limit of the RTSP configuration is out of range") }
        self.configuration = c
        throttle = AuthThrottle(c.authenticationBudget)
        ports = try UDPPorts(host: c.udpHost, port: c.udpPort)
        var s = State()
        s.parameterSets = parameterSets
        state = Mutex(s)
        self.logger = logger
        let thread = WorkerThread(name: "rtsp-rtcp") { [self] stop in housekeepingLoop(stop) }
        housekeeping.withLock { $0 = thread }
    }

    /// SPS and PPS of an encoder made with `settings` (the same settings always give the same ones): what the
    /// SDP announces before the first frame is encoded (`H264Encoder.parameterSets(for:)`).
    public static func parameterSets(for settings: H264Encoder.Settings) throws -> (sps: [UInt8], pps: [UInt8]) {
        try H264Encoder.parameterSets(for: settings)
    }

    /// The SPS and PPS the SDP announces for `session`'s stream before its first frame is encoded (the encoder
    /// rests until a client plays): an encoder with `settings`, at the planned frame rate and key interval, gives
    /// the same ones, and the first real key frame replaces them if they differ. For a camera that delivers H.264
    /// they stand in until its first key frame (clients decode from the SPS/PPS before every IDR), made at a frame
    /// rate within the encoder's 1...240 fps whatever the camera's (a 0.001 fps time-lapse camera is not refused).
    public static func parameterSets(
        for session: CaptureSession, settings: H264Encoder.Settings, keyIntervalSeconds: Double?
    ) throws -> (sps: [UInt8], pps: [UInt8]) {
        var s = EncodeStage.settings(settings, keyIntervalSeconds: keyIntervalSeconds, for: session.selection.planned)
        if session.selection.frameKind == .accessUnit { s.maxFrameRate = min(240, max(1, s.maxFrameRate.isFinite ? s.maxFrameRate : 30)) }
        return try H264Encoder.parameterSets(for: s)
    }

    /// Key-frame requests (a client starting to play, PLI/FIR) go to `encode`.
    public func connect(_ encode: EncodeStage) { encoder.withLock { $0 = encode.control } }
    /// Clients' key-frame requests go to a camera whose own H.264 is passed through (`PassthroughStage`).
    public func connect(_ passthrough: PassthroughStage) { encoder.withLock { $0 = passthrough.control } }
    /// Calls `action` when a client sets up a session: give it `CaptureSession.wakeAction` so that a camera
    /// released while nobody watched starts again.
    public func whenClientsArrive(_ action: @escaping @Sendable () -> Void) { arrival.withLock { $0 = action } }

    /// The stage that feeds this hub (and `alsoTo`, a recording) from `session`, wired in one call: an
    /// `EncodeStage` with `settings` (checked: `EncodeStage.Configuration.settings(for:)`), or for a camera that
    /// delivers H.264 a `PassthroughStage` of its own access units; key-frame requests go to it, a client's
    /// arrival wakes a camera released for idleness, and the camera's rotation is applied to the pixels (RTSP
    /// players have no rotation metadata). Call before the camera starts, once.
    public func stage(
        for session: CaptureSession, settings: H264Encoder.Settings, keyIntervalSeconds: Double?, alsoTo outputs: [any EncodedOutput] = []
    ) -> any PictureStage {
        let stage: any PictureStage
        if session.selection.frameKind == .accessUnit { // the camera's own access units to every client: no encoder
            let passthrough = PassthroughStage(outputs: [self] + outputs)
            connect(passthrough)
            stage = passthrough
        } else {
            let encode = EncodeStage(settings: settings, keyIntervalSeconds: keyIntervalSeconds, outputs: [self] + outputs)
            connect(encode)
            stage = encode
        }
        whenClientsArrive(session.wakeAction)
        session.sourceOptions.applyRotation = true
        return stage
    }
    /// Calls `handler` for every session event (set up, playing, ended), from the thread where it happened.
    public func onEvent(_ handler: @escaping @Sendable (RTSPEvent) -> Void) { eventHandler.withLock { $0 = handler } }

    /// Every current session's figures, oldest first.
    public var sessions: [RTSPSessionStatistics] {
        let all = state.withLock { s in s.order.compactMap { s.sessions[$0] } }
        return all.map { $0.statistics() }
    }
    /// Sessions in all since the start, and how many have ended.
    public var totals: (sessions: Int, ended: Int) { state.withLock { ($0.total, $0.left) } }
    /// The last sessions that ended (at most 64), oldest first, with the reason each ended.
    public var endedSessions: [(session: RTSPSessionStatistics, reason: String)] { state.withLock { $0.ended.map { ($0.0, $0.1) } } }
    /// What was refused, by reason.
    public var refusals: RTSPRefusals { state.withLock { $0.refusals } }
    func count(_ change: (inout RTSPRefusals) -> Void) { state.withLock { change(&$0.refusals) } }

    // MARK: Requests

    /// Answers one request that arrived on `connection` (the listener's event-loop thread).
    func handle(_ r: RTSPRequest, on connection: RTSPConnection) -> RTSPResponse {
        let response = route(r, on: connection)
        // 401s and the session limits' 503s are counted by their own reasons.
        if response.status >= 400 && response.status != 401 && response.status != 503 { count { $0.invalid += 1 } }
        return response
    }

    private func route(_ r: RTSPRequest, on connection: RTSPConnection) -> RTSPResponse {
        let session = r.header("Session").map { RTSPHub.sessionID($0) }
        // A session is found only from where it was made: its own connection (TCP), or its client's address
        // (UDP: a client may send its keep-alives and TEARDOWN on another connection). Elsewhere it is unknown.
        let known = session.flatMap { id in state.withLock { $0.sessions[id] } }.flatMap { s in
            s.isTCP ? (s.connection === connection ? s : nil) : (s.client == connection.client ? s : nil)
        }
        if let auth = configuration.authenticator, r.method != "OPTIONS" {
            if let refusal = authenticate(r, auth, known: known, on: connection) { return refusal }
        }
        if let require = r.header("Require") {
            return .error(551, "no option is supported", headers: [RTSPHeader("Unsupported", String(require.prefix(200)))])
        }
        if session != nil && known == nil && r.method != "OPTIONS" && r.method != "SETUP" {
            return .error(454, "no such session (it ended, timed out, or was never set up)")
        }
        known?.touch()
        let path = r.path
        let trackPath = configuration.path + "/trackID=0"
        func ours(_ allowTrack: Bool) -> Bool { path == configuration.path || (allowTrack && path == trackPath) }
        switch r.method {
        case "OPTIONS":
            return RTSPResponse(status: 200, headers: [RTSPHeader("Public", RTSPHub.methods)] + sessionHeader(known))
        case "DESCRIBE":
            guard ours(false) else {
                return .error(404, "no stream at \(String((path ?? r.uri).prefix(100))); the stream is at \(configuration.path)")
            }
            if let accept = r.header("Accept"), !accept.lowercased().contains("application/sdp") && !accept.contains("*/*") {
                return .error(406, "the description is application/sdp")
            }
            guard let sdp = describe(uri: r.uri) else { return .error(503, "the stream is not ready yet") }
            connection.described.store(true, ordering: .relaxed)
            var base = String(r.uri.prefix { $0 != "?" })
            if !base.hasSuffix("/") { base += "/" }
            return RTSPResponse(
                status: 200, headers: [RTSPHeader("Content-Base", base), RTSPHeader("Content-Type", "application/sdp")], body: sdp)
        case "SETUP":
            guard ours(true) else { return .error(404, "no stream at \(String((path ?? r.uri).prefix(100))); SETUP \(configuration.path)/trackID=0") }
            return setUp(r, on: connection, existing: session, known: known)
        case "PLAY":
            guard let known else { return .error(454, "PLAY needs the Session header that SETUP gave (SETUP first)") }
            guard ours(true) else { return .error(404, "no stream at \(String((path ?? r.uri).prefix(100)))") }
            return play(known)
        case "PAUSE":
            guard let known else { return .error(454, "PAUSE needs the Session header that SETUP gave") }
            known.setPlaying(false)
            rebuildPlaying()
            return RTSPResponse(status: 200, headers: sessionHeader(known))
        case "TEARDOWN":
            guard let known else { return .error(454, "TEARDOWN needs the Session header that SETUP gave") }
            end(known, reason: "the client sent TEARDOWN")
            return RTSPResponse(status: 200, headers: sessionHeader(known))
        case "GET_PARAMETER", "SET_PARAMETER":
            if r.method == "SET_PARAMETER" && !r.body.isEmpty { return .error(451, "no parameter can be set") }
            return RTSPResponse(status: 200, headers: sessionHeader(known))
        case "ANNOUNCE", "RECORD", "REDIRECT":
            return .error(405, "this server only plays its camera", headers: [RTSPHeader("Allow", RTSPHub.methods)])
        default:
            return .error(501, "\(r.method.prefix(32)) is not an RTSP method this server knows", headers: [RTSPHeader("Public", RTSPHub.methods)])
        }
    }

    /// nil when `r` may go on; else the 401 (delayed after several wrong answers in a row, closing the
    /// connection after a burst of them) or, over the failure budget, a 503 given without checking.
    private func authenticate(_ r: RTSPRequest, _ auth: DigestAuthenticator, known: RTSPSessionHandle?, on connection: RTSPConnection)
        -> RTSPResponse?
    {
        let client = connection.client
        let header = r.header("Authorization")
        if header != nil {
            let (allowed, retry) = throttle.mayCheck(client)
            if !allowed {
                count { $0.authenticationThrottled += 1 }
                logger.debug("authentication throttled", metadata: ["client": "\(client)"])
                return .error(
                    503, "too many wrong passwords; try again in \(retry) s", closes: true, headers: [RTSPHeader("Retry-After", "\(retry)")])
            }
        }
        switch auth.verify(header, method: r.method, uri: r.uri, client: client, connection: connection.number) {
        case .authorized:
            throttle.succeeded(client)
            connection.failuresInARow = 0
            return nil
        case .stale where known.map({ $0.connection === connection }) ?? false: return nil // an authenticated connection's keep-alive
        case .stale:
            return .error(
                401, "the nonce has expired",
                headers: [RTSPHeader("WWW-Authenticate", auth.challenge(stale: true, client: client, connection: connection.number))])
        case .missing:
            count { $0.unauthorized += 1 }
            return .error(
                401, "authentication required",
                headers: [RTSPHeader("WWW-Authenticate", auth.challenge(client: client, connection: connection.number))])
        case .refused(let why):
            count { $0.unauthorized += 1 }
            logger.debug("unauthorized", metadata: ["client": "\(client)", "why": "\(why)"])
            let delay = throttle.failed(client)
            connection.failuresInARow += 1
            let closes = connection.failuresInARow >= configuration.authenticationBudget.failuresPerConnection
            var response = RTSPResponse.error(
                401, "authentication required", closes: closes,
                headers: [RTSPHeader("WWW-Authenticate", auth.challenge(client: client, connection: connection.number))])
            response.delayNs = delay
            if delay > 0 { count { $0.authenticationDelayed += 1 } }
            return response
        }
    }

    /// The session id of a `Session` header (`ID;timeout=60` → `ID`), at most 64 characters.
    static func sessionID(_ header: String) -> String {
        String(header.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).prefix(64))
    }

    private func sessionHeader(_ s: RTSPSessionHandle?) -> [RTSPHeader] {
        guard let s else { return [] }
        return [RTSPHeader("Session", "\(s.id);timeout=\(configuration.sessionTimeoutNs / 1_000_000_000)")]
    }

    /// The SDP of the stream (RFC 2326 Appendix C): aggregate control, one H.264 track `trackID=0`, fmtp from
    /// the real SPS/PPS.
    func describe(uri: String) -> String? {
        guard let ps = state.withLock({ $0.parameterSets }) else { return nil }
        let plid = SDP.profileLevelID(sps: ps.sps[...]) ?? "42e01f"
        let sprop = Data(ps.sps).base64EncodedString() + "," + Data(ps.pps).base64EncodedString()
        let lines = [
            "v=0",
            "o=- \(UInt32.random(in: 1...UInt32.max)) 1 IN IP4 0.0.0.0",
            "s=swift-video-capture",
            "c=IN IP4 0.0.0.0",
            "t=0 0",
            "a=tool:swift-video-capture",
            "a=range:npt=0-",
            "a=control:*",
            "m=video 0 RTP/AVP 96",
            "a=rtpmap:96 H264/90000",
            "a=fmtp:96 packetization-mode=1;profile-level-id=\(plid);sprop-parameter-sets=\(sprop)",
            "a=control:trackID=0",
        ]
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    private func setUp(_ r: RTSPRequest, on connection: RTSPConnection, existing: String?, known: RTSPSessionHandle?) -> RTSPResponse {
        guard connection.described.load(ordering: .relaxed) else {
            return .error(455, "SETUP before DESCRIBE: DESCRIBE \(configuration.path) first (its SDP names the track to set up)")
        }
        if existing != nil { return known != nil ? .error(459, "this session has its one stream already") : .error(454, "no such session") }
        guard let header = r.header("Transport") else { return .error(400, "SETUP needs a Transport header") }
        let transport: RTSPTransportRequest
        switch RTSPTransportRequest.parse(header) {
        case .success(let t): transport = t
        case .failure(let refusal):
            return .error(refusal.status, refusal.message, headers: [RTSPHeader("Transport", "RTP/AVP;unicast,RTP/AVP/TCP;unicast;interleaved=0-1")])
        }
        // Limits first: nothing is made for a client that will be refused.
        let refusal = state.withLock { s -> RTSPResponse? in
            if s.closed { return .error(503, "the server is stopping") }
            if s.sessions.count >= configuration.maxSessions {
                s.refusals.sessionLimit += 1
                return .error(503, "the server has \(s.sessions.count) sessions, its limit; try again later")
            }
            let mine = s.sessions.values.filter { $0.client == connection.client }.count
            if mine >= configuration.maxSessionsPerAddress {
                s.refusals.perAddressSessionLimit += 1
                return .error(503, "your address has \(mine) sessions, the limit per address")
            }
            return nil
        }
        if let refusal { return refusal }
        let kind: RTSPSessionHandle.Kind
        let transportLine: String
        switch transport {
        case .udp(let rtpPort, let rtcpPort):
            guard var rtp = SystemIO.SocketAddress(host: connection.client, port: rtpPort), ports.family == rtp.family else {
                return .error(461, "UDP to \(connection.client) is not possible from this server's address; use TCP")
            }
            var rtcp = rtp
            rtp.port = UInt16(rtpPort)
            rtcp.port = UInt16(rtcpPort)
            kind = .udp(UDPClientTransport(ports: ports, rtp: rtp, rtcp: rtcp), rtpPort: rtpPort, rtcpPort: rtcpPort)
            transportLine = "RTP/AVP;unicast;client_port=\(rtpPort)-\(rtcpPort);server_port=\(ports.rtpPort)-\(ports.rtcpPort)"
        case .interleaved(let a, let b):
            guard connection.claim(channels: [a, b]) else {
                return .error(461, "interleaved channels \(a)-\(b) are taken on this connection")
            }
            kind = .tcp(
                InterleavedTransport(channel: connection.channel, rtpChannel: a, rtcpChannel: b, maxQueuedBytes: configuration.maxQueuedBytes))
            transportLine = "RTP/AVP/TCP;unicast;interleaved=\(a)-\(b)"
        }
        var rtp = RTPSender.Configuration(host: connection.client, port: 5004)
        rtp.maxPayload = configuration.maxPayload
        let sender: RTPSender
        do throws(RTPError) { sender = try RTPSender(configuration: rtp, transport: kind.transport) } catch {
            return .error(500, "cannot make the RTP sender: \(error.message)")
        }
        sender.setFeedbackHandlers(keyFrameRequest: { [weak self] in self?.requestKeyFrame() })
        let id = sessionIDs.withLock { g in (0..<2).map { _ in hex(g.next()) }.joined() }
        let handle = state.withLock { s -> RTSPSessionHandle in
            s.total += 1
            let h = RTSPSessionHandle(
                id: id, number: s.total, client: connection.client, connection: connection, kind: kind, sender: sender, setupURI: r.uri)
            s.sessions[id] = h
            s.order.append(id)
            return h
        }
        connection.add(handle)
        logger.debug("session set up", metadata: ["session": "\(handle.number)", "client": "\(connection.client)", "transport": "\(transportLine)"])
        emit(.setUp, handle)
        arrival.withLock { $0 }?()
        return RTSPResponse(
            status: 200,
            headers: [RTSPHeader("Transport", transportLine + ";ssrc=\(hex8(sender.ssrc));mode=play")] + sessionHeader(handle))
    }

    private func play(_ s: RTSPSessionHandle) -> RTSPResponse {
        let (seq, rtptime) = s.setPlaying(true)
        rebuildPlaying()
        requestKeyFrame()
        emit(.playing, s)
        var url = s.setupURI
        if url.hasPrefix("/") { url = "rtsp://\(configuration.udpHost)" + url }
        return RTSPResponse(
            status: 200,
            headers: [RTSPHeader("Range", "npt=0.000-"), RTSPHeader("RTP-Info", "url=\(url);seq=\(seq);rtptime=\(rtptime)")] + sessionHeader(s))
    }

    private func rebuildPlaying() {
        state.withLock { s in s.playing = s.order.compactMap { s.sessions[$0] }.filter { $0.isPlaying } }
    }

    private func emit(_ kind: RTSPEvent.Kind, _ s: RTSPSessionHandle, reason: String? = nil) {
        let handler = eventHandler.withLock { $0 }
        handler?(RTSPEvent(kind: kind, session: s.statistics(), reason: reason))
    }

    /// Ends `s` (once): out of the table, a last sender report and BYE, its transport closed.
    func end(_ s: RTSPSessionHandle, reason: String, closeConnection: Bool = false) {
        let removed = state.withLock { st -> Bool in
            guard st.sessions.removeValue(forKey: s.id) != nil else { return false }
            st.order.removeAll { $0 == s.id }
            st.playing.removeAll { $0 === s }
            st.left += 1
            st.lastEnded = reason
            return true
        }
        guard removed else { return }
        s.finish()
        let final = s.statistics()
        state.withLock { st in
            st.ended.append((final, reason))
            if st.ended.count > 64 { st.ended.removeFirst() }
        }
        s.connection?.remove(s)
        if closeConnection, case .tcp(let t) = s.kind { t.channel.close(promise: nil) }
        logger.debug("session ended", metadata: ["session": "\(s.number)", "reason": "\(reason)"])
        emit(.ended, s, reason: reason)
    }

    /// The connection closed: its TCP sessions end; its UDP sessions stay until TEARDOWN or their timeout.
    func closed(_ connection: RTSPConnection) {
        for s in connection.sessions where s.isTCP { end(s, reason: "its connection closed") }
        connection.detach()
    }

    /// Interleaved data from a client: RTCP on a session's RTCP channel is handled; anything else is ignored.
    func interleaved(channel: UInt8, _ bytes: UnsafeRawBufferPointer, on connection: RTSPConnection) {
        for s in connection.sessions {
            guard case .tcp(let t) = s.kind else { continue }
            if t.rtcpChannel == channel {
                s.touch()
                s.sender.handleRTCP(bytes)
                return
            }
            if t.rtpChannel == channel { return }
        }
    }

    /// Ends every session with `reason` and admits no more; stops the RTCP thread and closes the UDP ports.
    public func closeAll(reason: String) {
        let all = state.withLock { s -> [RTSPSessionHandle] in
            s.closed = true
            return s.order.compactMap { s.sessions[$0] }
        }
        for s in all { end(s, reason: reason) }
        housekeeping.withLock { t -> WorkerThread? in
            defer { t = nil }
            return t
        }?.stop()
        ports.close()
    }

    // MARK: The RTCP thread

    private func housekeepingLoop(_ stop: StopFlag) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        var from = SystemIO.SocketAddress()
        while !stop.isSet {
            let readable = ports.rtcp.waitUntilReadable(timeoutMs: 100)
            let all = state.withLock { s in s.order.compactMap { s.sessions[$0] } }
            if readable {
                var n = 0
                while n < 256, let got = ports.rtcp.receive(into: buffer, from: &from) {
                    n += 1
                    if let s = all.first(where: { $0.sendsRTCP(from: from) }) {
                        s.touch()
                        s.sender.handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                    } else {
                        count { $0.rtcpFromStrangers += 1 }
                    }
                }
            }
            // Packets a client sends to our RTP port (NAT punching: ffmpeg, GStreamer) show it is there.
            var n = 0
            while n < 256, ports.rtp.receive(into: buffer, from: &from) != nil {
                n += 1
                all.first { $0.sendsRTP(from: from) }?.touch()
            }
            let now = monotonicNanoseconds()
            for s in all {
                if s.isPlaying { s.sender.sendSenderReportIfDue() }
                if !s.hasPlayed, now - s.createdNs > configuration.setupTimeoutNs {
                    end(s, reason: "timed out: not played within \(Double(configuration.setupTimeoutNs / 100_000_000) / 10) s of its SETUP")
                } else if !s.isTCP, now - s.lastActivityNs > configuration.sessionTimeoutNs {
                    end(s, reason: "timed out: no request or RTCP from the client for \(configuration.sessionTimeoutNs / 1_000_000_000) s")
                }
                if s.isTCP, let since = s.congestedSinceNs, now - since > configuration.slowClientTimeoutNs {
                    end(
                        s, reason: "too slow: it did not read the stream for \(configuration.slowClientTimeoutNs / 1_000_000_000) s",
                        closeConnection: true)
                }
            }
        }
    }

    // MARK: EncodedOutput (the encoder's thread)

    private func requestKeyFrame() { keyFramePending.store(true, ordering: .releasing) }

    /// Nobody plays: the encoder rests (a client that starts playing asks for a key frame anyway).
    public var wantsFrames: Bool { state.withLock { !$0.playing.isEmpty } }
    /// True: playing clients get the slate while the camera is away (they would otherwise time out).
    public var takesPlaceholders: Bool { true }
    /// Sessions set up or playing: while there are none, a session may release the camera.
    public var hasAudience: Bool { state.withLock { !$0.sessions.isEmpty } }
    /// The hub only locks its own state and writes to sockets or the event loop: the encoder's thread may write.
    public var acceptsWritesFromEncoderThread: Bool { true }

    /// Sends one access unit to every playing client, first asking the encoder for a key frame if a client wants
    /// one and the last was long enough ago. A key frame's SPS/PPS become the SDP's. Never throws.
    public func write(_ frame: EncodedFrame) throws {
        let now = monotonicNanoseconds()
        if keyFramePending.load(ordering: .acquiring) {
            let due = state.withLock { s -> Bool in
                guard now - s.lastKeyFrameNs >= RTSPHub.keyFrameIntervalNs else { return false }
                s.lastKeyFrameNs = now
                return true
            }
            if due {
                keyFramePending.store(false, ordering: .releasing)
                encoder.withLock { $0 }?.requestKeyFrame()
            }
        }
        if frame.isKeyFrame {
            let known = state.withLock { s in
                s.lastKeyFrameNs = max(s.lastKeyFrameNs, now)
                return s.parameterSets
            }
            if let ps = RTPSender.parameterSets(of: frame), known.map({ $0.sps != ps.sps || $0.pps != ps.pps }) ?? true {
                state.withLock { $0.parameterSets = ps }
            }
        }
        guard !frame.isSkipped, !frame.data.isEmpty else { return }
        let playing = state.withLock { $0.playing }
        for s in playing {
            switch s.deliver(frame, now: now) {
            case .sent, .dropped: break
            case .needsKeyFrame: requestKeyFrame()
            }
        }
    }
    /// Ends every session (the run is over).
    public func end() throws { closeAll(reason: "the server stopped") }
    /// Ends every session (the run failed before it started).
    public func discard() { closeAll(reason: "the server stopped") }

    /// Sessions now and in all, for the progress line, and the highest RTT and loss the clients report.
    public var progress: String? {
        let s = state.withLock { ($0.sessions.count, $0.playing.count, $0.total) }
        let all = sessions
        let rtt = all.compactMap(\.rttMs).max(), loss = all.compactMap(\.fractionLost).max()
        let dropped = all.reduce(0) { $0 + $1.framesDropped }
        return "rtsp clients \(s.1) playing, \(s.0) sessions (\(s.2) in all)"
            + (rtt.map { "  rtt ≤\(String(format: "%.1f", $0)) ms" } ?? "") + (loss.map { "  loss ≤\(String(format: "%.1f", $0 * 100))%" } ?? "")
            + (dropped > 0 ? "  \(dropped) frames dropped for slow clients" : "")
    }
    /// The `rtsp` line (sessions in all, ended, why the last one ended), one `rtsp client N` line per session
    /// (current, then the last ended ones) and the `rtsp refused` line.
    public var report: OutputReport {
        let s = state.withLock { ($0.total, $0.left, $0.lastEnded, $0.refusals) }
        let r = s.3
        let current = sessions.map { ($0, "") }, ended = endedSessions.map { ($0.session, $0.reason) }
        let clients = (ended + current).sorted { $0.0.number < $1.0.number }.map { (st, reason) -> (String, String) in
            ("rtsp client \(st.number)", RTSPHub.describe(st) + (reason.isEmpty ? "" : "; ended: \(reason)"))
        }
        return .lines(
            [("rtsp", "\(s.0) sessions in all, \(s.1) ended" + (s.2.map { "; last: \($0)" } ?? ""))] + clients + [
                (
                    "rtsp refused",
                    "\(r.unauthorized) unauthorized, \(r.malformed) malformed, \(r.invalid) invalid, \(r.timeouts) timeouts, "
                        + "\(r.connectionLimit + r.perAddressConnectionLimit) over the connection limits, \(r.sessionLimit + r.perAddressSessionLimit) over the session limits, "
                        + "\(r.evicted) idle connections closed for newcomers, \(r.authenticationDelayed) wrong passwords answered late, \(r.authenticationThrottled) refused unchecked over the failure budget"
                )
            ])
    }
}

extension RTSPHub {
    /// One line about a session: client, transport, frames and packets sent, drops, RTT, loss, jitter.
    public static func describe(_ s: RTSPSessionStatistics) -> String {
        func f(_ v: Double) -> String { String(format: "%.1f", v) }
        return "\(s.client) \(s.transport) \(s.ports), \(s.framesSent) frames, \(s.packetsSent) packets, \(s.bytesSent) bytes"
            + (s.framesDropped > 0 ? ", \(s.framesDropped) dropped (slow)" : "")
            + ", \(s.senderReports) sender reports, \(s.receiverReports) receiver reports, rtt \(s.rttMs.map { f($0) + " ms" } ?? "-"), loss \(s.fractionLost.map { f($0 * 100) + "%" } ?? "-"), jitter \(s.jitterMs.map { f($0) + " ms" } ?? "-")"
    }
}

func hex(_ v: UInt64) -> String {
    let t = String(v, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 16 - t.count)) + t
}
func hex8(_ v: UInt32) -> String {
    let t = String(v, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 8 - t.count)) + t
}
