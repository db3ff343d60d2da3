import Foundation
import RTP
import H264
import Synchronization
import SystemIO
import VideoCaptureCommons

/// One WebRTC connection's transport, whichever side we play: one UDP socket (BUNDLE, rtcp-mux) demuxed by first
/// byte (RFC 7983: 0–3 STUN, 20–63 DTLS, 128–191 RTP/RTCP), a DTLS association whose keying material makes the
/// SRTP sessions (the outbound one handed to the `SRTPTransport` the `RTPSender` sends through), inbound SRTCP
/// unprotected into the sender (NACK, PLI/FIR, REMB, receiver reports), sender reports when due, and on the way
/// out an RTCP BYE and a DTLS close_notify. One thread runs every transport's socket (`TransportLoop`): 16
/// viewers cost one thread, not 16.
///
/// What differs between a WHEP viewer and a WHIP publisher is ICE, which is the `ICEAgent` handed to `start`:
/// the ICE-lite responder (`WebRTCPeer`) or the controlling agent with its consent checks (`WebRTCPublisher`).
final class DTLSSRTPTransport: Sendable {
    /// Where the connection is.
    enum State: String, Sendable {
        /// Made, not started (a publisher before `start`).
        case new
        /// ICE: no pair selected yet.
        case checking
        /// A pair is selected; the DTLS handshake runs.
        case dtls
        /// DTLS is up and SRTP keys are set: media flows.
        case connected
        /// Ended; the socket is closed.
        case closed
    }

    /// What the ICE agent counts (read with the connection's statistics).
    struct ICECounters: Sendable {
        /// Authenticated Binding requests of the remote agent we answered.
        var requestsAnswered = 0
        /// STUN messages not answered (not for us, unauthenticated, malformed).
        var ignored = 0
        /// Binding requests we sent, and success responses to them.
        var checksSent = 0, checksAnswered = 0
    }

    /// A snapshot of the transport's side of the statistics.
    struct Snapshot: Sendable {
        var state: State
        var profile: SRTPProfile?
        var ice: ICECounters
        var srtcpErrors: Int
        var dtlsRecordsDropped: Int
        var framesSkippedBeforeKeyFrame: Int
        var remote: String?
    }

    /// The sending side: the socket, the selected remote and SRTP protection (what the `RTPSender` sends through).
    let srtp: SRTPTransport
    var socket: UDPSocket { srtp.socket }

    private struct Status {
        var started = false, stop = false
        var reason: String
        var state: State
        var profile: SRTPProfile?
        var ice = ICECounters()
        var srtcpErrors = 0, dtlsDropped = 0
        /// The senders (streams) that have sent their first key frame: each stream starts with one.
        var keyFramed: [ObjectIdentifier] = []
        var skipped = 0
    }
    private let status: Mutex<Status>
    private let loop: TransportLoop

    /// A transport on `socket` in `state`, ending for `closeReason` unless something else ends it first.
    init(socket: UDPSocket, maxPacket: Int, state: State, closeReason: String, loop: TransportLoop = .shared) {
        srtp = SRTPTransport(socket: socket, maxPacket: maxPacket)
        status = Mutex(Status(reason: closeReason, state: state))
        self.loop = loop
    }

    /// What the transport's thread runs with: made before `start` and used by that thread alone.
    struct Session {
        let dtls: DTLSAssociation
        let ice: any ICEAgent
        let sender: RTPSender
        let handlers: WebRTCPeer.Handlers
        /// Who is at the other end, in close reasons ("viewer", "server").
        let remoteName: String
        /// When the connection began, and how long ICE and DTLS may take from then.
        let connectSinceNs: Int64, connectTimeoutNs: Int64
        /// The close reason when DTLS is not up in time ("no DTLS connection within 10 s").
        let connectTimeoutReason: String
        /// Further senders on the same transport (a publisher's other simulcast layers): each takes the RTCP (and
        /// acts on what concerns its SSRCs), sends its reports and its BYE.
        var layers: [RTPSender] = []
        /// `sender` and `layers`.
        var senders: [RTPSender] { [sender] + layers }
    }

    /// True the first time only: the caller then starts the transport (later `start`s do nothing).
    func claimStart() -> Bool {
        status.withLock { s -> Bool in
            defer { s.started = true }
            return !s.started
        }
    }

    /// Hands the session `take` gives to the loop's thread (nil: closed before it started, so nothing runs).
    /// Call after `claimStart()` returned true.
    func start(_ take: @Sendable () -> SessionHandOver?) {
        guard let handOver = take() else { return }
        loop.add(self, handOver)
    }

    /// Ends the connection for `reason` (unless it already ends for another): the thread sends an RTCP BYE and a
    /// DTLS close_notify when connected and closes the socket; waited for unless called on it. A transport
    /// never started closes its socket here. Idempotent. Returns whether it had been started.
    @discardableResult func close(reason: String) -> Bool {
        let running = status.withLock { s -> Bool in
            if !s.stop {
                s.stop = true
                s.reason = reason
            }
            return s.started
        }
        guard running else {
            srtp.shutDown()
            status.withLock { $0.state = .closed }
            return false
        }
        loop.waitUntilEnded(self) // returns at once on the loop's thread: it ends on its next pass
        return true
    }

    /// Ends the loop for `reason`, unless it already ends for another.
    func finish(_ reason: String) {
        status.withLock { s in
            if !s.stop {
                s.stop = true
                s.reason = reason
            }
        }
    }

    /// True while DTLS is up and SRTP keys are set (media can flow).
    var isConnected: Bool { srtp.isConnected }

    var snapshot: Snapshot {
        let remote = srtp.remoteText
        return status.withLock { s in
            Snapshot(
                state: s.state, profile: s.profile, ice: s.ice, srtcpErrors: s.srtcpErrors, dtlsRecordsDropped: s.dtlsDropped,
                framesSkippedBeforeKeyFrame: s.skipped, remote: remote)
        }
    }

    /// Counts what the ICE agent did, and moves `checking` to `dtls` when `selected`.
    func recordICE(selected: Bool = false, _ count: (inout ICECounters) -> Void) {
        status.withLock { s in
            count(&s.ice)
            if selected && s.state == .checking { s.state = .dtls }
        }
    }

    /// Sends one access unit through `sender` (from the encoder's thread): nothing before the connection is up, and
    /// the first frame sent is a key frame.
    func send(_ frame: EncodedFrame, through sender: RTPSender) {
        guard srtp.isConnected else { return }
        let id = ObjectIdentifier(sender)
        let ready = status.withLock { s -> Bool in
            if !s.keyFramed.contains(id) {
                guard frame.isKeyFrame else {
                    s.skipped += 1
                    return false
                }
                s.keyFramed.append(id)
            }
            return true
        }
        if ready { try? sender.send(frame) }
    }

    // MARK: The transport's thread

    /// Where a started transport is, for the loop's thread alone.
    final class Running {
        let transport: DTLSSRTPTransport
        let session: Session
        let link: Link
        var lastTickNs: Int64 = 0
        var begun = false
        init(_ transport: DTLSSRTPTransport, _ session: Session) {
            self.transport = transport
            self.session = session
            link = Link(transport: transport, dtls: session.dtls)
        }
    }

    /// The loop took the transport on.
    fileprivate func begin() {
        status.withLock { if $0.state == .new { $0.state = .checking } }
    }

    /// Handles every datagram waiting on the socket (the loop saw it readable).
    fileprivate func receiveAll(_ r: Running, into buffer: UnsafeMutableRawBufferPointer) {
        var from = SocketAddress()
        while !status.withLock({ $0.stop }), let n = socket.receive(into: buffer, from: &from), n > 0 {
            handle(r.session, r.link, UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), from: from)
        }
    }

    /// The steps due every 50 ms (ICE, DTLS's timers or sender reports, consent); false once the connection
    /// ends.
    fileprivate func tick(_ r: Running, now: Int64) -> Bool {
        if status.withLock({ $0.stop }) { return false }
        guard now - r.lastTickNs >= 50_000_000 else { return true }
        r.lastTickNs = now
        let session = r.session, link = r.link
        switch session.ice.beforeDTLS(now: now, link) {
        case .proceed: break
        case .wait: return true
        case .end(let reason):
            finish(reason)
            return false
        }
        if link.inbound == nil {
            if case .failed(let e) = link.dtls.tick() {
                finish("DTLS failed: \(e)")
                return false
            }
            link.flushDTLS()
            if now - session.connectSinceNs > session.connectTimeoutNs {
                finish(session.connectTimeoutReason)
                return false
            }
        } else {
            for sender in session.senders { sender.sendSenderReportIfDue() }
        }
        if let reason = session.ice.afterDTLS(now: now, link) {
            finish(reason)
            return false
        }
        return !status.withLock { $0.stop }
    }

    /// The way out: a last sender report, a BYE and close_notify when connected; the socket closed; `closed`
    /// called with the reason.
    fileprivate func end(_ r: Running) {
        if srtp.isConnected {
            for sender in r.session.senders { sender.close() } // a last sender report and a BYE
            r.link.dtls.close() // close_notify
            r.link.flushDTLS()
        }
        srtp.shutDown()
        let reason = status.withLock { s -> String in
            s.state = .closed
            return s.reason
        }
        r.session.handlers.closed?(reason)
    }

    private func handle(_ session: Session, _ link: Link, _ p: UnsafeMutableRawBufferPointer, from: SocketAddress) {
        switch p[0] {
        case 0...3:
            session.ice.receiveSTUN(UnsafeRawBufferPointer(p), from: from, link)
        case 20...63:
            guard link.isValidated(from) else { return }
            let state = link.dtls.feed(UnsafeRawBufferPointer(p))
            let dropped = link.dtls.droppedRecords
            status.withLock { $0.dtlsDropped = dropped }
            link.flushDTLS()
            switch state {
            case .handshaking: break
            case .connected:
                guard link.inbound == nil else { return }
                do throws(WebRTCError) {
                    let (profile, outbound, inbound) = try link.dtls.srtpSessions()
                    link.inbound = inbound
                    srtp.connect(outbound)
                    status.withLock {
                        $0.profile = profile
                        $0.state = .connected
                    }
                    session.handlers.connected?()
                } catch { finish("\(error)") }
            case .closed: finish("the \(session.remoteName) closed the connection (DTLS close_notify)")
            case .failed(let e): finish("DTLS failed: \(e)")
            }
        case 128...191:
            guard let inbound = link.inbound, p.count >= 8, link.isValidated(from) else { return }
            guard (192...223).contains(p[1]) else { return } // RTP from the other end: not expected (we only send)
            guard let n = inbound.unprotect(p, length: p.count, rtcp: true) else {
                status.withLock { $0.srtcpErrors += 1 }
                return
            }
            // Each sender acts on the feedback about its own SSRCs (PLI, FIR, NACK, reports).
            session.sender.handleRTCP(UnsafeRawBufferPointer(rebasing: p[0..<n]))
            for layer in session.layers { layer.handleRTCP(UnsafeRawBufferPointer(rebasing: p[0..<n])) }
        default:
            return
        }
    }

    /// The state only the transport's thread touches: DTLS, the inbound SRTP session and the addresses ICE
    /// validated (DTLS and SRTCP from any other address are dropped). The ICE agent works through it.
    final class Link {
        unowned let transport: DTLSSRTPTransport
        let dtls: DTLSAssociation
        var inbound: SRTPSession?
        private(set) var validated: [SocketAddress] = []

        init(transport: DTLSSRTPTransport, dtls: DTLSAssociation) {
            self.transport = transport
            self.dtls = dtls
        }

        func isValidated(_ a: SocketAddress) -> Bool { validated.contains { $0.isSame(as: a) } }

        /// Remembers `a` as validated by ICE: up to 16 addresses, unless `always` (the selected pair).
        func validate(_ a: SocketAddress, always: Bool = false) {
            if !isValidated(a) && (always || validated.count < 16) { validated.append(a) }
        }

        /// Sends a datagram (a STUN message) to `address`.
        func send(_ bytes: [UInt8], to address: SocketAddress) {
            _ = bytes.withUnsafeBytes { transport.socket.send($0, to: address) }
        }

        /// A successful check from `address`: selects it when nominated or when nothing is selected yet. Returns
        /// whether it is the selected one now.
        func select(_ address: SocketAddress, nominated: Bool) -> Bool { transport.srtp.select(address, nominated: nominated) }

        /// Sends what DTLS has to send to the selected remote.
        func flushDTLS() { transport.srtp.sendSelected(dtls.drain) }
    }
}

/// The one thread that runs every `DTLSSRTPTransport` of the process: it polls their sockets together (20 ms at
/// most), handles what arrived, runs each one's 50 ms steps, ends the ones that finished, and ends itself when the
/// last one has (the next transport starts it again).
final class TransportLoop: @unchecked Sendable {
    // @unchecked: `members` and `thread` are guarded by `condition`; the rest is the loop thread's own.
    /// The process's loop.
    static let shared = TransportLoop()
    private let condition = NSCondition()
    private var members: [DTLSSRTPTransport.Running] = []
    private var thread: WorkerThread?

    /// The number of loop threads running (0 or 1): what the thread-count tests read.
    var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return thread == nil ? 0 : 1
    }

    fileprivate func add(_ transport: DTLSSRTPTransport, _ handOver: SessionHandOver) {
        let running = DTLSSRTPTransport.Running(transport, handOver.session)
        condition.lock()
        defer { condition.unlock() }
        members.append(running)
        if thread == nil { thread = WorkerThread(name: "webrtc-loop") { [self] _ in run() } }
    }

    /// Waits until `transport` has ended (its `closed` handler has run), unless called on the loop's thread.
    fileprivate func waitUntilEnded(_ transport: DTLSSRTPTransport) {
        condition.lock()
        defer { condition.unlock() }
        guard thread?.isCurrent != true else { return }
        while members.contains(where: { $0.transport === transport }) { condition.wait() }
    }

    private func run() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        defer { buffer.deallocate() }
        var poll = SocketPoll()
        var current: [DTLSSRTPTransport.Running] = [], sockets: [UDPSocket] = [], ended: [DTLSSRTPTransport.Running] = []
        while true {
            condition.lock()
            if members.isEmpty {
                thread = nil // the last transport ended; the next starts a new thread
                condition.unlock()
                return
            }
            current.removeAll(keepingCapacity: true)
            current.append(contentsOf: members)
            condition.unlock()
            sockets.removeAll(keepingCapacity: true)
            for r in current {
                if !r.begun {
                    r.begun = true
                    r.transport.begin()
                }
                sockets.append(r.transport.socket)
            }
            poll.wait(sockets, timeoutMs: 20)
            ended.removeAll(keepingCapacity: true)
            for (i, r) in current.enumerated() {
                if poll.isReadable(i) { r.transport.receiveAll(r, into: buffer) }
                if !r.transport.tick(r, now: monotonicNanoseconds()) { ended.append(r) }
            }
            guard !ended.isEmpty else { continue }
            for r in ended { r.transport.end(r) }
            condition.lock()
            members.removeAll { m in ended.contains { $0 === m } }
            condition.broadcast() // `waitUntilEnded` callers
            condition.unlock()
        }
    }
}

/// What the transport's loop does next after asking the ICE agent, every 50 ms.
enum ICEStep {
    /// Go on: DTLS's timers (or sender reports once connected), then `afterDTLS`.
    case proceed
    /// Nothing more this tick (no pair selected yet).
    case wait
    /// End the connection for this reason.
    case end(String)
}

/// The ICE side of a `DTLSSRTPTransport`: an ICE-lite responder or a controlling agent. Called on the transport's
/// thread only.
protocol ICEAgent: AnyObject {
    /// A datagram whose first byte is 0…3 (STUN) from `from`.
    func receiveSTUN(_ p: UnsafeRawBufferPointer, from: SocketAddress, _ link: DTLSSRTPTransport.Link)
    /// Every 50 ms, before DTLS's timers.
    func beforeDTLS(now: Int64, _ link: DTLSSRTPTransport.Link) -> ICEStep
    /// Every 50 ms, after DTLS's timers: consent. A reason ends the connection.
    func afterDTLS(now: Int64, _ link: DTLSSRTPTransport.Link) -> String?
}

/// Carries a session from the caller to the one thread that uses it.
// @unchecked: the session (OpenSSL's DTLS state, the ICE agent's) is not thread-safe, but only one thread ever
// uses it: it is made, handed over without being touched again, and taken out exactly once, by the transport's
// thread (or dropped, for a connection closed before it started).
struct SessionHandOver: @unchecked Sendable {
    let session: DTLSSRTPTransport.Session
}
