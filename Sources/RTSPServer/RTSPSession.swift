import Foundation
import Synchronization
import VideoCaptureCommons
import H264
import RTP
import NIOCore
import SystemIO

/// One client's session: its sender and transport, and what the encoder's thread, the event loop and the RTCP
/// thread share about it (under a lock).
final class RTSPSessionHandle: Sendable {
    enum Kind: Sendable {
        case udp(UDPClientTransport, rtpPort: Int, rtcpPort: Int)
        case tcp(InterleavedTransport)
        var transport: any RTPTransport {
            switch self {
            case .udp(let t, _, _): t
            case .tcp(let t): t
            }
        }
    }
    private struct State {
        var playing = false
        var ended = false
        var lastActivityNs = monotonicNanoseconds()
        var waitingForKeyFrame = true
        var framesDropped = 0
        var skipped = 0
        var congestedSinceNs: Int64?
        var nextSequence: UInt16
        var played = false
    }
    let id: String
    let number: Int
    let client: String
    let kind: Kind
    let sender: RTPSender
    let setupURI: String
    /// When SETUP made it (monotonic ns): a session not played soon after ends.
    let createdNs = monotonicNanoseconds()
    private let weakConnection: WeakConnection
    private let state: Mutex<State>
    var connection: RTSPConnection? { weakConnection.value }

    init(id: String, number: Int, client: String, connection: RTSPConnection, kind: Kind, sender: RTPSender, setupURI: String) {
        self.id = id
        self.number = number
        self.client = client
        self.kind = kind
        self.sender = sender
        self.setupURI = setupURI
        weakConnection = WeakConnection(connection)
        state = Mutex(State(nextSequence: sender.nextSequenceNumber))
    }

    var isTCP: Bool {
        if case .tcp = kind { return true }
        return false
    }
    var isPlaying: Bool { state.withLock { $0.playing } }
    /// Whether PLAY has started it at least once.
    var hasPlayed: Bool { state.withLock { $0.played } }
    var lastActivityNs: Int64 { state.withLock { $0.lastActivityNs } }
    var congestedSinceNs: Int64? { state.withLock { $0.congestedSinceNs } }
    func touch() { state.withLock { $0.lastActivityNs = monotonicNanoseconds() } }

    /// Starts or pauses; for PLAY, the RTP-Info figures: the next sequence number and the RTP time of the next frame.
    @discardableResult
    func setPlaying(_ on: Bool) -> (UInt16, UInt32) {
        let st = sender.statistics
        return state.withLock { s in
            // A session that starts (or resumes) waits for a key frame; a PLAY while it plays changes nothing.
            if on && !s.playing { s.waitingForKeyFrame = true }
            s.playing = on && !s.ended
            if s.playing { s.played = true }
            var rtptime = sender.rtpTimestampOffset
            if let first = st.firstCaptureNs {
                let elapsed = max(0, monotonicNanoseconds() - first) / 1000
                rtptime = rtptime &+ UInt32(truncatingIfNeeded: elapsed * 9 / 100)
            }
            return (s.nextSequence, rtptime)
        }
    }

    func sendsRTCP(from a: SystemIO.SocketAddress) -> Bool {
        guard case .udp(let t, _, _) = kind else { return false }
        return a.isSame(as: t.rtcpAddress)
    }
    func sendsRTP(from a: SystemIO.SocketAddress) -> Bool {
        guard case .udp(let t, _, _) = kind else { return false }
        return a.isSame(as: t.rtpAddress)
    }

    enum Delivery { case sent, dropped, needsKeyFrame }
    /// Sends `frame` unless the client waits for a key frame or its TCP connection is congested (the encoder's
    /// thread only).
    func deliver(_ frame: EncodedFrame, now: Int64) -> Delivery {
        var tcp: InterleavedTransport?
        if case .tcp(let t) = kind { tcp = t }
        let congested = tcp?.isCongested ?? false
        let decision = state.withLock { s -> Delivery? in
            guard s.playing && !s.ended else { return .dropped }
            if congested {
                s.framesDropped += 1
                s.waitingForKeyFrame = true // the stream resumes at a key frame
                if s.congestedSinceNs == nil { s.congestedSinceNs = now }
                return .dropped
            }
            s.congestedSinceNs = nil
            if s.waitingForKeyFrame {
                guard frame.isKeyFrame else {
                    s.skipped += 1
                    return .needsKeyFrame
                }
                s.waitingForKeyFrame = false
            }
            return nil
        }
        if let decision { return decision }
        tcp?.beginFrame(bytes: frame.data.count)
        try? sender.send(frame)
        tcp?.endFrame()
        let next = sender.nextSequenceNumber
        state.withLock { $0.nextSequence = next }
        return .sent
    }

    /// The session is over: a last sender report and a BYE, then the transport sends nothing more.
    func finish() {
        state.withLock {
            $0.ended = true
            $0.playing = false
        }
        sender.close()
        switch kind {
        case .udp(let t, _, _): t.close()
        case .tcp(let t): t.close()
        }
    }

    func statistics() -> RTSPSessionStatistics {
        let r = sender.statistics
        let s = state.withLock { $0 }
        let (transport, ports): (String, String)
        switch kind {
        case .udp(_, let a, let b): (transport, ports) = ("udp", "\(a)-\(b)")
        case .tcp(let t): (transport, ports) = ("tcp", "\(t.rtpChannel)-\(t.rtcpChannel)")
        }
        return RTSPSessionStatistics(
            number: number, client: client, transport: transport, ports: ports, state: s.ended ? "ended" : s.playing ? "playing" : "ready",
            framesSent: r.framesSent, packetsSent: r.packetsSent, bytesSent: r.bytesSent, framesDropped: s.framesDropped,
            framesSkippedBeforeKeyFrame: s.skipped, receiverReports: r.receiverReports, rttMs: r.rttMs, fractionLost: r.fractionLost,
            jitterMs: r.jitterMs, senderReports: r.senderReports, keyFrameRequests: r.keyFrameRequests, nacks: r.nacksReceived,
            retransmissions: r.retransmissions,
            rtcpErrors: r.rtcpErrors, idleSeconds: Double(monotonicNanoseconds() - s.lastActivityNs) / 1e9)
    }
}

/// A weak reference to a connection (a UDP session outlives the connection that made it).
final class WeakConnection: @unchecked Sendable {
    // @unchecked: `value` is only read and written under `lock`.
    private weak var _value: RTSPConnection?
    private let lock = Mutex(())
    init(_ c: RTSPConnection) { _value = c }
    var value: RTSPConnection? { lock.withLock { _ in _value } }
}

/// One RTSP connection as the hub sees it: the client's address, the channel (TCP sessions' media goes on it),
/// whether DESCRIBE was answered on it, its sessions and the interleaved channels they use.
final class RTSPConnection: Sendable {
    let client: String
    let channel: any Channel
    /// The connection's number, unique in the process: Digest nonces are bound to it (answers without `qop` are
    /// good only on the connection that got the nonce).
    let number: UInt64
    private static let numbers = Atomic<UInt64>(0)
    let described = Atomic<Bool>(false)
    /// The idle timer's generation: a timer that fires after a newer one was armed does nothing.
    let idleGeneration = Atomic<Int>(0)
    /// When the connection last made progress (monotonic ns): a request other than OPTIONS that was not
    /// refused. The longest idle without a playing session is closed for a newcomer when the server is full.
    let lastProgressNs = Atomic<Int64>(monotonicNanoseconds())
    private let failures = Atomic<Int>(0)
    /// Wrong Digest answers in a row on this connection.
    var failuresInARow: Int {
        get { failures.load(ordering: .relaxed) }
        set { failures.store(newValue, ordering: .relaxed) }
    }
    private let owned = Mutex<(sessions: [RTSPSessionHandle], channels: Set<UInt8>)>(([], []))

    init(client: String, channel: any Channel) {
        self.client = client
        self.channel = channel
        number = RTSPConnection.numbers.add(1, ordering: .relaxed).newValue
    }

    var sessions: [RTSPSessionHandle] { owned.withLock { $0.sessions } }
    var hasSessions: Bool { owned.withLock { !$0.sessions.isEmpty } }
    /// Whether a session of this connection plays (such a connection is never closed for a newcomer).
    var hasPlayingSession: Bool { owned.withLock { $0.sessions.contains { $0.isPlaying } } }
    func claim(channels: [UInt8]) -> Bool {
        owned.withLock { o in
            guard channels.allSatisfy({ !o.channels.contains($0) }) else { return false }
            o.channels.formUnion(channels)
            return true
        }
    }
    func add(_ s: RTSPSessionHandle) { owned.withLock { $0.sessions.append(s) } }
    func remove(_ s: RTSPSessionHandle) {
        owned.withLock { o in
            o.sessions.removeAll { $0 === s }
            if case .tcp(let t) = s.kind {
                o.channels.remove(t.rtpChannel)
                o.channels.remove(t.rtcpChannel)
            }
        }
    }
    func detach() { owned.withLock { $0 = ([], []) } }
}
