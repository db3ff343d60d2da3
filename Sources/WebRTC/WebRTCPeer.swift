import Foundation
import VideoCapture
public import RTP
public import H264
#if canImport(Glibc)
import Glibc
#endif

/// One WebRTC viewer: an ICE-lite agent, a DTLS server and SRTP on one UDP socket (BUNDLE, rtcp-mux), demuxed
/// by first byte (RFC 7983: 0–3 STUN, 20–63 DTLS, 128–191 RTP/RTCP), and an `RTPSender` whose packets it
/// protects. A thread of its own answers STUN checks, runs the handshake, unprotects RTCP feedback (NACK → the
/// sender retransmits, PLI/FIR and REMB → the callbacks) and sends sender reports. The peer ends on `close()`,
/// a DTLS close_notify, a failed handshake, or when consent checks stop for `consentTimeout` (a closed tab).
public final class WebRTCPeer: RTPTransport, @unchecked Sendable {
    // @unchecked: `io` guards the socket, the remote address, the outbound SRTP session and the send buffer;
    // DTLS, the inbound session and the ICE state are touched only by the peer's thread; callbacks are set
    // before `start()`.
    public struct Configuration: Sendable {
        /// The address the UDP socket binds to (0.0.0.0 / :: for all) and the candidates the answer lists.
        public var bindHost: String
        public var candidateHosts: [String]
        public var maxPayload = 1200
        public var dropRate = 0.0
        public var dropSeed: UInt64 = 1
        public var keyFrameRequestIntervalNs: Int64 = 300_000_000
        /// No authenticated STUN check for this long: the viewer is gone (RFC 7675 uses 30 s).
        public var consentTimeoutNs: Int64 = 30_000_000_000
        /// No completed ICE check and DTLS handshake this long after the answer: given up, and its slot freed.
        public var connectTimeoutNs: Int64 = 8_000_000_000
        /// Retransmit as RTX (RFC 4588) when the offer has an RTX payload type for the chosen H.264 one.
        public var useRTX = true
        public init(bindHost: String, candidateHosts: [String]) { self.bindHost = bindHost; self.candidateHosts = candidateHosts }
    }

    public struct Statistics: Sendable {
        public var rtp: RTPSender.Statistics
        public var state: String
        public var srtpProfile: String?
        public var stunRequests: Int
        public var stunIgnored: Int
        public var srtcpErrors: Int
        /// DTLS records dropped (malformed, or after the handshake of another epoch, too short or refused).
        public var dtlsRecordsDropped: Int
        public var framesSkippedBeforeKeyFrame: Int
        public var remote: String?
    }

    public let id: String
    public let answer: String
    public let offer: WebRTCOffer
    public let localPort: Int
    public let sender: RTPSender
    /// Called on the peer's thread once DTLS is up and SRTP keys are set (ask the encoder for a key frame).
    public var onConnected: (@Sendable () -> Void)?
    /// Called once, on the peer's thread, when the peer has ended and freed its socket; with the reason.
    public var onClosed: (@Sendable (String) -> Void)?

    private let configuration: Configuration
    private let localUfrag: String, localPassword: String
    private let socket: Int32
    private let dtls: DTLSAssociation
    private let io = NSLock()
    // Under `io`:
    private var open = true
    private var remote = sockaddr_storage()
    private var remoteLength: socklen_t = 0
    private var outbound: SRTPSession?
    private var sendBuffer: [UInt8]
    private var waitingForKeyFrame = true
    private var skipped = 0
    // Peer thread only (read under `io` for statistics):
    private var inbound: SRTPSession?
    private var profile: SRTPProfile?
    private var validated: [sockaddr_storage] = []
    private var stunRequests = 0, stunIgnored = 0, srtcpErrors = 0, dtlsDropped = 0
    private var stateText = "checking"
    private var lastConsentNs: Int64
    private let createdNs: Int64
    private var stop = false
    private var closeReason = "closed by the server"
    // Not the Thread object: it keeps its closure (and so this peer) after it ends, a cycle that leaked each viewer.
    private var started = false
    private let finished = DispatchSemaphore(value: 0)
    private var threadID: pthread_t?

    public init(offer: WebRTCOffer, identity: DTLSIdentity, configuration c: Configuration) throws(WebRTCError) {
        self.offer = offer
        configuration = c
        id = iceToken(16).replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "+", with: "-")
        localUfrag = iceToken(8).replacingOccurrences(of: "/", with: "x").replacingOccurrences(of: "+", with: "y")
        localPassword = iceToken(24)
        dtls = try DTLSAssociation(identity: identity, peerFingerprint: offer.fingerprint)
        let (fd, port) = try WebRTCPeer.bind(c.bindHost)
        socket = fd; localPort = port
        sendBuffer = [UInt8](repeating: 0, count: c.maxPayload + 64 + SRTPSession.overhead)
        var rc = RTPSender.Configuration(host: "peer", port: port)
        rc.maxPayload = c.maxPayload
        rc.payloadType = offer.payloadType
        rc.rtcpMux = true
        rc.dropRate = c.dropRate; rc.dropSeed = c.dropSeed
        rc.keyFrameRequestIntervalNs = c.keyFrameRequestIntervalNs
        rc.cname = "camcap"
        rc.rtxPayloadType = c.useRTX ? offer.rtxPayloadType : nil
        createdNs = monotonicNanoseconds()
        lastConsentNs = createdNs
        let placeholder = PendingTransport()
        do throws(RTPError) { sender = try RTPSender(configuration: rc, transport: placeholder) }
        catch { Glibc.close(fd); throw WebRTCError("cannot create the RTP sender: \(error)") }
        answer = offer.answer(iceUfrag: localUfrag, icePassword: localPassword, fingerprint: identity.fingerprint,
                              hosts: c.candidateHosts, port: port, ssrc: sender.ssrc,
                              rtxSSRC: rc.rtxPayloadType != nil ? sender.rtxSSRC : nil)
        placeholder.target = self
    }

    /// Starts the peer's thread (after the callbacks are set).
    public func start() {
        let t = Thread { [self] in
            io.withLock { threadID = pthread_self() }
            run()
            finished.signal()
        }
        t.name = "webrtc-peer"
        io.withLock { started = true }
        t.start()
    }

    deinit { close() }

    /// Ends the peer: RTCP BYE and DTLS close_notify when connected, then the socket is closed. Waits for the
    /// peer's thread (unless called on it). Idempotent.
    public func close(reason: String = "closed by the server") {
        let (cleaned, running, thread) = io.withLock { () -> (Bool, Bool, pthread_t?) in
            if !stop { stop = true; closeReason = reason }
            return (!open, started, threadID)
        }
        guard running else { if !cleaned { cleanUp() }; return }   // never started
        if let t = thread, pthread_equal(t, pthread_self()) != 0 { return }   // on the peer's thread: it ends next
        finished.wait(); finished.signal()
    }

    public var isConnected: Bool { io.withLock { outbound != nil && open } }

    public var statistics: Statistics {
        io.withLock {
            Statistics(rtp: sender.statistics, state: stateText, srtpProfile: profile?.name, stunRequests: stunRequests, stunIgnored: stunIgnored,
                       srtcpErrors: srtcpErrors, dtlsRecordsDropped: dtlsDropped, framesSkippedBeforeKeyFrame: skipped, remote: remoteLength > 0 ? WebRTCPeer.text(remote) : nil)
        }
    }

    /// Sends one encoded access unit (from the encoder's thread). Nothing goes out before the connection is up,
    /// and the first frame a viewer gets is a key frame.
    public func send(_ frame: EncodedFrame, captureNs: Int64) {
        let ready = io.withLock { () -> Bool in
            guard open, outbound != nil else { return false }
            if waitingForKeyFrame {
                guard frame.isKeyFrame else { skipped += 1; return false }
                waitingForKeyFrame = false
            }
            return true
        }
        if ready { try? sender.send(frame, captureNs: captureNs) }
    }

    // MARK: RTPTransport

    public func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 { protectAndSend(packet, rtcp: false) }
    public func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { protectAndSend(packet, rtcp: true) }

    private func protectAndSend(_ packet: UnsafeRawBufferPointer, rtcp: Bool) -> Int32 {
        io.lock(); defer { io.unlock() }
        guard open, let outbound, remoteLength > 0 else { return 0 }
        guard packet.count + SRTPSession.overhead <= sendBuffer.count else { return EMSGSIZE }
        return sendBuffer.withUnsafeMutableBytes { b -> Int32 in
            b.baseAddress!.copyMemory(from: packet.baseAddress!, byteCount: packet.count)
            guard let n = outbound.protect(b, length: packet.count, rtcp: rtcp) else { return EINVAL }
            return transmit(UnsafeRawBufferPointer(rebasing: b[0..<n]))
        }
    }

    /// sendto the selected remote; call under `io`.
    private func transmit(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        var a = remote
        let n = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, remoteLength)
        } }
        return n < 0 ? errno : 0
    }

    private func sendTo(_ bytes: UnsafeRawBufferPointer, _ address: sockaddr_storage, _ length: socklen_t) {
        var a = address
        _ = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, length)
        } }
    }

    // MARK: The peer's thread

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var from = sockaddr_storage()
        var lastTick: Int64 = 0
        while !io.withLock({ stop }) {
            var fds = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let r = poll(&fds, 1, 20)
            if r > 0 {
                while true {
                    var fromLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    let n = buffer.withUnsafeMutableBytes { b in
                        withUnsafeMutablePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            recvfrom(socket, b.baseAddress, b.count, Int32(MSG_DONTWAIT), $0, &fromLength)
                        } }
                    }
                    if n <= 0 { break }
                    buffer.withUnsafeMutableBytes { handle(UnsafeMutableRawBufferPointer(rebasing: $0[0..<n]), from: from, fromLength) }
                }
            }
            let now = monotonicNanoseconds()
            if now - lastTick >= 50_000_000 {
                lastTick = now
                if inbound == nil {
                    if case .failed(let e) = dtls.tick() { finish("DTLS failed: \(e)"); break }
                    flushDTLS()
                    if now - createdNs > configuration.connectTimeoutNs { finish("no ICE/DTLS connection within \(configuration.connectTimeoutNs / 1_000_000_000) s"); break }
                } else {
                    sender.sendSenderReportIfDue()
                }
                if now - lastConsentNs > configuration.consentTimeoutNs { finish("consent expired (no STUN check for \(configuration.consentTimeoutNs / 1_000_000_000) s)"); break }
            }
        }
        cleanUp()
    }

    private func finish(_ reason: String) {
        io.withLock { if !stop { stop = true; closeReason = reason } }
    }

    private func cleanUp() {
        let connected = io.withLock { outbound != nil }
        if connected {
            sender.close()       // a last sender report and a BYE
            dtls.close()         // close_notify
            flushDTLS()
        }
        let reason = io.withLock { () -> String in
            open = false
            outbound = nil
            stateText = "closed"
            Glibc.close(socket)
            return closeReason
        }
        inbound = nil
        onClosed?(reason)
    }

    private func flushDTLS() {
        io.lock(); defer { io.unlock() }
        guard remoteLength > 0 else { dtls.drain { _ in }; return }
        dtls.drain { _ = transmit($0) }
    }

    private func isValidated(_ a: sockaddr_storage, _ length: socklen_t) -> Bool {
        validated.contains { WebRTCPeer.same($0, a) }
    }

    private func handle(_ p: UnsafeMutableRawBufferPointer, from: sockaddr_storage, _ fromLength: socklen_t) {
        let first = p[0]
        switch first {
        case 0...3:
            switch STUN.parseRequest(UnsafeRawBufferPointer(p), localUfrag: localUfrag, localPassword: localPassword) {
            case .ignored:
                io.withLock { stunIgnored += 1 }
            case .request(let request):
                let (address, port) = socketAddressParts(from)
                let response = STUN.successResponse(to: request, address: address, port: port, localPassword: localPassword)
                response.withUnsafeBytes { sendTo($0, from, fromLength) }
                lastConsentNs = monotonicNanoseconds()
                if !isValidated(from, fromLength) && validated.count < 16 { validated.append(from) }
                io.withLock {
                    stunRequests += 1
                    // ICE-lite: the controlling agent's nomination (USE-CANDIDATE) selects the pair; until then
                    // the first valid check's address is used.
                    if request.useCandidate || remoteLength == 0 {
                        remote = from; remoteLength = fromLength
                        if stateText == "checking" { stateText = "dtls" }
                    }
                }
            }
        case 20...63:
            guard isValidated(from, fromLength) else { return }
            let state = dtls.feed(UnsafeRawBufferPointer(p))
            let dropped = dtls.droppedRecords
            io.withLock { dtlsDropped = dropped }
            flushDTLS()
            switch state {
            case .handshaking: break
            case .connected:
                guard inbound == nil else { return }
                do throws(WebRTCError) {
                    let (profile, out, inb) = try dtls.srtpSessions()
                    inbound = inb
                    io.withLock { self.profile = profile; outbound = out; stateText = "connected" }
                    onConnected?()
                } catch { finish("\(error)") }
            case .closed: finish("the viewer closed the connection (DTLS close_notify)")
            case .failed(let e): finish("DTLS failed: \(e)")
            }
        case 128...191:
            guard let inbound, p.count >= 8, isValidated(from, fromLength) else { return }
            guard (192...223).contains(p[1]) else { return }   // RTP from the viewer: not expected (recvonly)
            guard let n = inbound.unprotect(p, length: p.count, rtcp: true) else { io.withLock { srtcpErrors += 1 }; return }
            sender.handleRTCP(UnsafeRawBufferPointer(rebasing: p[0..<n]))
        default:
            return
        }
    }

    // MARK: Sockets

    static func bind(_ host: String) throws(WebRTCError) -> (Int32, Int) {
        var storage = sockaddr_storage()
        var length: socklen_t
        var a4 = in_addr(), a6 = in6_addr()
        let family: Int32
        if inet_pton(AF_INET, host, &a4) == 1 {
            family = AF_INET; length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET); sin.pointee.sin_addr = a4
            }
        } else if inet_pton(AF_INET6, host, &a6) == 1 {
            family = AF_INET6; length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin.pointee.sin6_family = sa_family_t(AF_INET6); sin.pointee.sin6_addr = a6
            }
        } else {
            throw WebRTCError("cannot bind UDP to \"\(host.prefix(64))\": give an IPv4 or IPv6 address")
        }
        let fd = Glibc.socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw WebRTCError("cannot create a UDP socket: \(String(cString: strerror(errno)))") }
        var size: Int32 = 1 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let r = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) } }
        guard r == 0 else {
            let e = errno; Glibc.close(fd)
            throw WebRTCError("cannot bind a UDP socket on \(host): \(String(cString: strerror(e)))")
        }
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, Int(socketAddressParts(storage).port))
    }

    static func same(_ a: sockaddr_storage, _ b: sockaddr_storage) -> Bool {
        a.ss_family == b.ss_family && socketAddressParts(a) == socketAddressParts(b)
    }

    static func text(_ a: sockaddr_storage) -> String {
        let (bytes, port) = socketAddressParts(a)
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") + ":\(port)" }
        var buf = [CChar](repeating: 0, count: 64)
        var copy = bytes
        inet_ntop(AF_INET6, &copy, &buf, 64)
        return "[" + cString(buf) + "]:\(port)"
    }
}

/// The sender is created before the peer exists; this forwards to it once it does.
private final class PendingTransport: RTPTransport, @unchecked Sendable {
    weak var target: WebRTCPeer?
    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 { target?.sendRTP(packet) ?? 0 }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { target?.sendRTCP(packet) ?? 0 }
}
