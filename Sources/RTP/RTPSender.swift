import Foundation
import VideoCapture
public import H264
import Synchronization
#if canImport(Glibc)
package import Glibc   // socketAddressParts takes a sockaddr_storage (WebRTC shares it)
#endif

/// Where an `RTPSender` puts its packets when it does not own UDP sockets (a WebRTC transport that protects them
/// with SRTP and sends them on its ICE-selected path). Called from the sending thread and the owner's feedback
/// thread: implementations lock. Returns 0 or an errno.
public protocol RTPTransport: AnyObject, Sendable {
    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32
}

/// An RTP session that cannot start or send: its code says which kind, the message what and where.
public struct RTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// A port, address or rate out of range (nothing was opened).
        public static let invalidConfiguration = Code(rawValue: "invalid configuration")
        /// A socket could not be made or bound (errno says why).
        public static let socketFailed = Code(rawValue: "socket failed")
        /// Sending failed (errno says why).
        public static let sendFailed = Code(rawValue: "send failed")
    }
    public var code: Code
    public var message: String
    public var errno: Int32?
    public init(_ code: Code, _ message: String, errno: Int32? = nil) { self.code = code; self.message = message; self.errno = errno }
    public var description: String { message + (errno.map { " (errno \($0): \(String(cString: strerror($0))))" } ?? "") }
}

/// Sends one H.264 stream as RTP over UDP and runs its RTCP: sender reports about once a second, receiver
/// reports (loss, jitter, RTT), PLI/FIR (→ `onKeyFrameRequest`, at most one per `keyFrameRequestInterval`),
/// generic NACK (→ retransmission from a bounded history, as RTX per RFC 4588 when `rtxPayloadType` is set) and
/// REMB (→ `onBitrateEstimate`). Feedback is read on a dedicated thread; `send` is for one producer thread.
public final class RTPSender: @unchecked Sendable {
    // @unchecked: sockets and configuration are immutable after init; `shared` is a Mutex; the packetizer,
    // clock and history are touched only by the sending thread (history also under `shared` for NACK).
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// Where RTCP goes (default port + 1); with `rtcpMux` RTP and RTCP share `port`.
        public var rtcpPort: Int?
        public var rtcpMux = false
        /// Local port for our RTCP socket (receivers send their reports there); 0 picks one.
        public var localRTCPPort = 0
        public var maxPayload = 1200
        public var payloadType: UInt8 = 96
        public var rtxPayloadType: UInt8?
        /// Packets kept for retransmission (about 1 s of 2 Mbit/s video).
        public var historySize = 512
        /// Drop outgoing packets with this probability (loss simulation for tests; seeded, reproducible).
        public var dropRate = 0.0
        public var dropSeed: UInt64 = 1
        public var keyFrameRequestIntervalNs: Int64 = 300_000_000
        public var cname = "swift-video-capture"
        /// Besides the destination host, the addresses whose RTCP is obeyed (a receiver that reports from
        /// another address of its own). Feedback from any other address is dropped and counted
        /// (`Statistics.rtcpFromStrangers`). Only for a sender that owns its sockets.
        public var feedbackFrom: [String] = []
        /// Retransmissions may use at most this share of the media bitrate (over a sliding second), so that
        /// whatever the NACK rate the sender sends at most (1 + share) × its media bitrate. 0.45 keeps the total
        /// under 1.5 × with what the transport adds to each packet (RTX's 2 bytes, SRTP's tag).
        public var retransmissionShare = 0.45
        /// A receiver's bandwidth estimate (REMB) is raised to this many bit/s before it is handed on: one REMB
        /// of 0 must not silence the stream.
        public var minimumBitrateEstimate: UInt64 = 50_000
        public init(host: String, port: Int) { self.host = host; self.port = port }
    }

    public struct Statistics: Sendable, Equatable {
        /// Media packets and bytes (first transmissions; retransmissions are counted apart).
        public var packetsSent = 0
        public var bytesSent = 0
        public var framesSent = 0
        public var packetsDroppedBySimulation = 0
        public var retransmissions = 0
        public var nacksReceived = 0
        public var keyFrameRequests = 0
        public var keyFrameRequestsHonoured = 0
        public var receiverReports = 0
        public var senderReports = 0
        /// Round-trip time from the last receiver report that answered a sender report.
        public var rttMs: Double?
        public var fractionLost: Double?
        public var jitterMs: Double?
        public var rembBitrate: UInt64?
        public var rtcpErrors = 0
        /// RTCP datagrams from addresses other than the receiver's (dropped unread).
        public var rtcpFromStrangers = 0
        /// Bytes sent as retransmissions.
        public var retransmittedBytes = 0
        /// NACKed packets not resent: no longer in the history, or already resent within the last RTT.
        public var nacksIgnored = 0
        /// NACKed packets not resent because retransmissions had used their share of the bitrate.
        public var retransmissionsOverBudget = 0
        /// Capture time (monotonic ns) of the first frame sent: RTP time `rtpTimestampOffset` (receivers map
        /// RTP timestamps back to capture times with it).
        public var firstCaptureNs: Int64?
    }

    public let configuration: Configuration
    public let ssrc: UInt32
    public let rtxSSRC: UInt32
    /// Called (on the feedback thread) for PLI/FIR, rate-limited.
    public var onKeyFrameRequest: (@Sendable () -> Void)? {
        get { shared.withLock { $0.onKeyFrame } } set { shared.withLock { $0.onKeyFrame = newValue } }
    }
    /// Called (on the feedback thread) with a receiver's REMB estimate in bit/s.
    public var onBitrateEstimate: (@Sendable (UInt64) -> Void)? {
        get { shared.withLock { $0.onREMB } } set { shared.withLock { $0.onREMB = newValue } }
    }

    /// The last packets sent, indexed by sequence number (slot = sequence & mask: consecutive numbers never
    /// collide), with when each was last resent (`.min`: never).
    private struct History {
        var slots: [[UInt8]]
        var lengths: [Int]
        var sequences: [UInt16]
        var resentNs: [Int64]
        var mask: Int
    }
    /// Bytes per 100 ms over the last second, for media and for retransmissions (the retransmission budget).
    struct RateWindow {
        private var media = [Int](repeating: 0, count: 10), resent = [Int](repeating: 0, count: 10)
        private var slot: Int64 = 0
        private mutating func advance(_ now: Int64) {
            let s = now / 100_000_000
            if s - slot >= 10 { for i in 0..<10 { media[i] = 0; resent[i] = 0 } }
            else { var k = slot; while k < s { k += 1; media[Int(k % 10)] = 0; resent[Int(k % 10)] = 0 } }
            slot = max(slot, s)
        }
        mutating func addMedia(_ bytes: Int, at now: Int64) { advance(now); media[Int(slot % 10)] += bytes }
        /// Whether `bytes` more of retransmission stay within `share` of the media sent in the last second (at
        /// least `allowance`, so a low-rate stream can still repair a loss); counts them if so.
        mutating func spend(_ bytes: Int, share: Double, allowance: Int, at now: Int64) -> Bool {
            advance(now)
            let budget = max(Int(Double(media.reduce(0, +)) * share), allowance)
            guard resent.reduce(0, +) + bytes <= budget else { return false }
            resent[Int(slot % 10)] += bytes
            return true
        }
    }
    private struct Shared {
        var stats = Statistics()
        var history: History
        var lastRTP: UInt32 = 0
        var lastCaptureNs: Int64?
        var lastSRNTPMiddle: UInt32 = 0
        var lastKeyFrameRequestNs: Int64 = .min / 2
        var rtxSequence: UInt16 = .random(in: 0...UInt16.max)
        var rates = RateWindow()
        var onKeyFrame: (@Sendable () -> Void)?
        var onREMB: (@Sendable (UInt64) -> Void)?
    }

    private let transport: (any RTPTransport)?
    private let rtpSocket: Int32
    private let rtcpSocket: Int32
    private let rtpAddress: sockaddr_storage
    private let rtcpAddress: sockaddr_storage
    private let addressLength: socklen_t
    /// The addresses (bytes, no port) whose RTCP is read: the destination's and `feedbackFrom`.
    private let trustedFeedback: [[UInt8]]
    private var packetizer: H264Packetizer
    private var clock: RTPClock
    /// The RTP timestamp of the first frame.
    public let rtpTimestampOffset: UInt32
    private var random: UInt64
    private let shared: Mutex<Shared>
    private let stopRequested = Atomic<Bool>(false)
    /// Whether the feedback thread runs (not the Thread object: it keeps its closure, and so this sender,
    /// after it ends — a cycle that leaked every sender).
    private let hasThread: Bool
    private let finished = DispatchSemaphore(value: 0)

    /// The local port receivers send RTCP to.
    public let localRTCPPort: Int

    public init(configuration c: Configuration) throws(RTPError) {
        configuration = c
        guard (1...65535).contains(c.port) else { throw RTPError(.invalidConfiguration, "RTP port \(c.port) is not 1...65535") }
        let rtcpPort = c.rtcpMux ? c.port : (c.rtcpPort ?? c.port + 1)
        guard (1...65535).contains(rtcpPort) else { throw RTPError(.invalidConfiguration, "RTCP port \(rtcpPort) is not 1...65535") }
        guard (0.0...1.0).contains(c.dropRate) else { throw RTPError(.invalidConfiguration, "drop rate \(c.dropRate) is not 0...1") }
        guard let a = RTPSender.address(c.host, c.port), let r = RTPSender.address(c.host, rtcpPort) else {
            throw RTPError(.invalidConfiguration, "cannot resolve \(c.host): give an IPv4 or IPv6 address")
        }
        rtpAddress = a.0; rtcpAddress = r.0; addressLength = a.1
        let family = Int32(a.0.ss_family)
        var trusted = [socketAddressParts(a.0).host]
        for h in c.feedbackFrom {
            guard let f = RTPSender.address(h, 0) else { throw RTPError(.invalidConfiguration, "cannot take feedback from \"\(h.prefix(64))\": give an IPv4 or IPv6 address") }
            trusted.append(socketAddressParts(f.0).host)
        }
        trustedFeedback = trusted
        let s1 = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s1 >= 0 else { throw RTPError(.socketFailed, "cannot create a UDP socket", errno: errno) }
        let s2 = c.rtcpMux ? s1 : socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s2 >= 0 else { let e = errno; Glibc.close(s1); throw RTPError(.socketFailed, "cannot create a UDP socket", errno: e) }
        // Bind our RTCP socket (receivers answer to its address) on the interface that reaches the destination,
        // not on every interface: a stream to 127.0.0.1 listens on loopback only.
        var local = RTPSender.localAddress(toward: a.0, length: addressLength) ?? sockaddr_storage()
        var localLength = addressLength
        if family == AF_INET {
            withUnsafeMutableBytes(of: &local) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET); sin.pointee.sin_port = in_port_t(UInt16(c.localRTCPPort).bigEndian)
            }
        } else {
            withUnsafeMutableBytes(of: &local) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin.pointee.sin6_family = sa_family_t(AF_INET6); sin.pointee.sin6_port = in_port_t(UInt16(c.localRTCPPort).bigEndian)
            }
        }
        var small: Int32 = 64 * 1024   // feedback is small: a storm queues little, so it stops when the storm does
        _ = setsockopt(s2, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s2, $0, localLength) } }
        guard bound == 0 else {
            let e = errno; Glibc.close(s1); if s2 != s1 { Glibc.close(s2) }
            throw RTPError(.socketFailed, "cannot listen for RTCP on port \(c.localRTCPPort)\(e == EADDRINUSE ? ": the port is in use" : "")", errno: e)
        }
        _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s2, $0, &localLength) } }
        localRTCPPort = withUnsafeBytes(of: &local) { raw in
            Int(UInt16(bigEndian: family == AF_INET ? raw.load(as: sockaddr_in.self).sin_port : raw.load(as: sockaddr_in6.self).sin6_port))
        }
        rtpSocket = s1; rtcpSocket = s2; transport = nil
        let stream = StreamSetup(c)
        rtpTimestampOffset = stream.timestampOffset; clock = stream.clock; packetizer = stream.packetizer
        ssrc = stream.packetizer.state.ssrc; rtxSSRC = stream.rtxSSRC; random = c.dropSeed | 1
        shared = Mutex(Shared(history: stream.history))
        hasThread = true
        let t = Thread { [self] in feedbackLoop(); finished.signal() }
        t.name = "rtp-feedback"
        t.start()
    }

    /// What both initialisers set up the same way: random timestamp offset and SSRCs, the packetizer, and the
    /// retransmission history (allocated once).
    private struct StreamSetup {
        let timestampOffset = UInt32.random(in: 0...UInt32.max)
        let clock: RTPClock
        let packetizer: H264Packetizer
        let rtxSSRC = UInt32.random(in: 1...UInt32.max)
        let history: History
        init(_ c: Configuration) {
            clock = RTPClock(offset: timestampOffset)
            packetizer = H264Packetizer(maxPayload: c.maxPayload, state: RTPStreamState(payloadType: c.payloadType))
            var size = 16
            while size < min(8192, c.historySize) { size *= 2 }   // a power of two: slot = sequence & mask
            let slot = c.maxPayload + H264Packetizer.headerSize + 2
            history = History(slots: (0..<size).map { _ in [UInt8](repeating: 0, count: slot) },
                              lengths: [Int](repeating: 0, count: size), sequences: [UInt16](repeating: 0, count: size),
                              resentNs: [Int64](repeating: .min, count: size), mask: size - 1)
        }
    }

    /// A sender over `transport` (no sockets, no thread of its own): the owner hands received RTCP to
    /// `handleRTCP` and calls `sendSenderReportIfDue` about every 100 ms. `host`/`port` of the configuration
    /// only name the peer in messages.
    public init(configuration c: Configuration, transport: any RTPTransport) throws(RTPError) {
        configuration = c
        guard (0.0...1.0).contains(c.dropRate) else { throw RTPError(.invalidConfiguration, "drop rate \(c.dropRate) is not 0...1") }
        self.transport = transport
        trustedFeedback = []   // the owner authenticates what it hands to handleRTCP
        rtpSocket = -1; rtcpSocket = -1; hasThread = false
        rtpAddress = sockaddr_storage(); rtcpAddress = sockaddr_storage(); addressLength = 0
        localRTCPPort = 0
        let stream = StreamSetup(c)
        rtpTimestampOffset = stream.timestampOffset; clock = stream.clock; packetizer = stream.packetizer
        ssrc = stream.packetizer.state.ssrc; rtxSSRC = stream.rtxSSRC; random = c.dropSeed | 1
        shared = Mutex(Shared(history: stream.history))
    }

    private var lastSRNs: Int64?
    /// Sends a sender report when a second has passed since the last one (the first right after the first
    /// frame). For senders over a transport; call from one thread.
    public func sendSenderReportIfDue() {
        let now = monotonicNanoseconds()
        if lastSRNs.map({ now - $0 >= 1_000_000_000 }) ?? true, sendSenderReport() { lastSRNs = now }
    }

    deinit { close() }

    /// Stops the feedback thread and closes the sockets (idempotent).
    public func close() {
        guard !stopRequested.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if hasThread { finished.wait() }
        sendSenderReport(bye: true)   // a last report and a BYE: receivers end the stream cleanly
        if rtpSocket >= 0 { Glibc.close(rtpSocket) }
        if rtcpSocket >= 0 && rtcpSocket != rtpSocket { Glibc.close(rtcpSocket) }
    }

    public var statistics: Statistics { shared.withLock { $0.stats } }

    /// The sequence number the next media packet gets (read it on the sending thread, or when it is idle).
    public var nextSequenceNumber: UInt16 { packetizer.state.sequence }

    /// SPS and PPS of a key frame, for the SDP's fmtp.
    public static func parameterSets(of frame: EncodedFrame) -> (sps: [UInt8], pps: [UInt8])? {
        guard let s = frame.nalUnits.first(where: { $0.type == .sps }), let p = frame.nalUnits.first(where: { $0.type == .pps }) else { return nil }
        return (Array(frame.data[s.offset..<(s.offset + s.length)]), Array(frame.data[p.offset..<(p.offset + p.length)]))
    }

    /// Packetizes and sends one encoded access unit captured at `captureNs` (monotonic ns).
    public func send(_ frame: EncodedFrame, captureNs: Int64) throws(RTPError) {
        let ts = clock.timestamp(forCaptureNs: captureNs)
        var failure: Int32 = 0
        let now = monotonicNanoseconds()
        packetizer.packetize(frame.data, nalUnits: frame.nalUnits, timestamp: ts) { packet in
            let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
            shared.withLock { s in
                let i = Int(seq) & s.history.mask
                s.history.slots[i].withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: packet.baseAddress!, byteCount: packet.count) }
                s.history.lengths[i] = packet.count; s.history.sequences[i] = seq; s.history.resentNs[i] = .min
                s.rates.addMedia(packet.count, at: now)
            }
            if configuration.dropRate > 0 && nextRandom() < configuration.dropRate {
                shared.withLock { $0.stats.packetsDroppedBySimulation += 1 }
                return
            }
            let e = transport?.sendRTP(packet) ?? transmit(rtpSocket, packet, to: rtpAddress)
            if e != 0 && e != ECONNREFUSED { failure = e }
            shared.withLock { $0.stats.packetsSent += 1; $0.stats.bytesSent += packet.count }
        }
        shared.withLock { s in
            s.stats.framesSent += 1; s.lastRTP = ts; s.lastCaptureNs = captureNs
            if s.stats.firstCaptureNs == nil { s.stats.firstCaptureNs = captureNs }
        }
        if failure != 0 { throw RTPError(.sendFailed, "sending RTP to \(configuration.host):\(configuration.port) failed", errno: failure) }
    }

    private func nextRandom() -> Double {
        random ^= random << 13; random ^= random >> 7; random ^= random << 17
        return Double(random >> 11) / Double(1 << 53)
    }

    private func transmit(_ socket: Int32, _ bytes: UnsafeRawBufferPointer, to address: sockaddr_storage) -> Int32 {
        var a = address
        let n = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(socket, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, addressLength)
        } }
        return n < 0 ? errno : 0
    }

    // MARK: RTCP

    private static func ntpNow() -> UInt64 {
        var t = timespec(); clock_gettime(CLOCK_REALTIME, &t)
        let seconds = UInt64(t.tv_sec) &+ 2_208_988_800
        let fraction = (UInt64(t.tv_nsec) << 32) / 1_000_000_000
        return seconds << 32 | fraction
    }

    @discardableResult
    private func sendSenderReport(bye: Bool = false) -> Bool {
        let ntp = RTPSender.ntpNow(), now = monotonicNanoseconds()
        let (rtp, packets, octets, ready) = shared.withLock { s -> (UInt32, UInt32, UInt32, Bool) in
            guard let last = s.lastCaptureNs else { return (0, 0, 0, false) }
            // The RTP time that corresponds to "now" on the sampling clock, extrapolated from the last frame.
            let delta = now - last
            let rtp = s.lastRTP &+ UInt32(truncatingIfNeeded: delta / 1_000_000_000 * 90_000 + delta % 1_000_000_000 * 90_000 / 1_000_000_000)
            s.lastSRNTPMiddle = UInt32((ntp >> 16) & 0xffff_ffff)
            s.stats.senderReports += 1
            return (rtp, UInt32(truncatingIfNeeded: s.stats.packetsSent), UInt32(truncatingIfNeeded: s.stats.bytesSent), true)
        }
        guard ready else { return false }
        var sr = RTCPWriter.senderReport(ssrc: ssrc, ntp: ntp, rtpTimestamp: rtp, packets: packets, octets: octets, cname: configuration.cname)
        if bye { sr += RTCPWriter.bye(ssrc: ssrc) }
        sr.withUnsafeBytes { _ = transport?.sendRTCP($0) ?? transmit(rtcpSocket, $0, to: rtcpAddress) }
        return true
    }

    private func feedbackLoop() {
        var buffer = [UInt8](repeating: 0, count: 2048)
        // The first SR goes out as soon as a frame was sent (a receiver's first report can then carry LSR and
        // give an RTT), the next ones every second.
        var lastSR: Int64? = nil
        while !stopRequested.load(ordering: .acquiring) {
            let now = monotonicNanoseconds()
            if lastSR.map({ now - $0 >= 1_000_000_000 }) ?? true, sendSenderReport() { lastSR = now }
            var fds = [pollfd(fd: rtcpSocket, events: Int16(POLLIN), revents: 0)]
            let r = poll(&fds, 1, 100)
            if r <= 0 { continue }
            // Everything queued, each datagram checked against the receiver's address before it is parsed.
            while true {
                var from = sockaddr_storage()
                var fromLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
                let n = buffer.withUnsafeMutableBytes { b in
                    withUnsafeMutablePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(rtcpSocket, b.baseAddress, b.count, Int32(MSG_DONTWAIT), $0, &fromLength)
                    } }
                }
                guard n > 0 else { break }
                let source = socketAddressParts(from).host
                guard trustedFeedback.contains(source) else { shared.withLock { $0.stats.rtcpFromStrangers += 1 }; continue }
                buffer.withUnsafeBytes { raw in handleRTCP(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
            }
        }
    }

    /// Handles one compound RTCP packet from a receiver (public for tests and fuzzing).
    public func handleRTCP(_ bytes: UnsafeRawBufferPointer) {
        // With rtcp-mux, RTP and RTCP share a port: RTCP packet types are 192...223 (RFC 5761).
        guard bytes.count >= 2, (192...223).contains(bytes[1]) else { return }
        let packets: [RTCPPacket]
        do throws(RTCPParseError) { packets = try RTCPPacket.parseCompound(bytes) }
        catch { shared.withLock { $0.stats.rtcpErrors += 1 }; return }
        for p in packets {
            switch p {
            case .receiverReport(_, let reports), .senderReport(_, _, _, _, _, let reports):
                guard let block = reports.first(where: { $0.ssrc == ssrc }) else { continue }
                let ntpMiddle = UInt32((RTPSender.ntpNow() >> 16) & 0xffff_ffff)
                shared.withLock { s in
                    s.stats.receiverReports += 1
                    s.stats.fractionLost = Double(block.fractionLost) / 256
                    s.stats.jitterMs = Double(block.jitter) / 90
                    if block.lastSR != 0 {
                        let rtt = Int64(ntpMiddle &- block.lastSR &- block.delaySinceLastSR)
                        if rtt >= 0 && rtt < 65536 * 10 { s.stats.rttMs = Double(rtt) * 1000 / 65536 }
                    }
                }
            case .pli(_, let media), .fir(_, let media, _):
                guard media == ssrc || media == 0 else { continue }
                let now = monotonicNanoseconds()
                let callback = shared.withLock { s -> (@Sendable () -> Void)? in
                    s.stats.keyFrameRequests += 1
                    guard now - s.lastKeyFrameRequestNs >= configuration.keyFrameRequestIntervalNs else { return nil }
                    s.lastKeyFrameRequestNs = now
                    s.stats.keyFrameRequestsHonoured += 1
                    return s.onKeyFrame
                }
                callback?()
            case .nack(_, let media, let lost):
                guard media == ssrc else { continue }
                shared.withLock { $0.stats.nacksReceived += 1 }
                let now = monotonicNanoseconds()
                for seq in lost where !retransmit(seq, now: now) { break }   // over budget: the rest of this NACK too
            case .remb(_, let reported, _):
                let bitrate = max(reported, configuration.minimumBitrateEstimate)
                let callback = shared.withLock { s -> (@Sendable (UInt64) -> Void)? in s.stats.rembBitrate = bitrate; return s.onREMB }
                callback?(bitrate)
            case .other:
                continue
            }
        }
    }

    /// Resends one NACKed packet if it is still in the history, was not resent within the last RTT, and the
    /// retransmission budget allows it. Returns false when the budget is spent (the caller stops there).
    private func retransmit(_ seq: UInt16, now: Int64) -> Bool {
        var packet = [UInt8](); packet.reserveCapacity(configuration.maxPayload + 16)
        let (found, withinBudget) = shared.withLock { s -> (Bool, Bool) in
            let i = Int(seq) & s.history.mask
            // Stale (overwritten or never sent) or already resent less than an RTT ago (this NACK crossed the
            // retransmission): libwebrtc's rules. The RTT is the measured one, 5...500 ms, 100 ms before a measurement.
            let rttNs = Int64(min(500, max(5, s.stats.rttMs ?? 100)) * 1_000_000)
            let resent = s.history.resentNs[i]
            guard s.history.sequences[i] == seq, s.history.lengths[i] > 0, resent == .min || now - resent >= rttNs else {
                s.stats.nacksIgnored += 1; return (false, true)
            }
            let length = s.history.lengths[i] + (configuration.rtxPayloadType != nil ? 2 : 0)
            guard s.rates.spend(length, share: configuration.retransmissionShare, allowance: 2 * (configuration.maxPayload + 14), at: now) else {
                s.stats.retransmissionsOverBudget += 1; return (false, false)
            }
            s.history.resentNs[i] = now
            let original = s.history.slots[i][0..<s.history.lengths[i]]
            if let rtxPT = configuration.rtxPayloadType {
                // RFC 4588: own SSRC, payload type and sequence; the payload starts with the original sequence number.
                packet.append(contentsOf: original.prefix(12))
                packet[1] = (packet[1] & 0x80) | (rtxPT & 0x7f)
                packet[2] = UInt8(s.rtxSequence >> 8); packet[3] = UInt8(s.rtxSequence & 0xff); s.rtxSequence &+= 1
                packet[8] = UInt8(rtxSSRC >> 24); packet[9] = UInt8((rtxSSRC >> 16) & 0xff); packet[10] = UInt8((rtxSSRC >> 8) & 0xff); packet[11] = UInt8(rtxSSRC & 0xff)
                packet += [UInt8(seq >> 8), UInt8(seq & 0xff)]
                packet.append(contentsOf: original.dropFirst(12))
            } else {
                packet.append(contentsOf: original)
            }
            s.stats.retransmissions += 1
            s.stats.retransmittedBytes += packet.count
            return (true, true)
        }
        if found { packet.withUnsafeBytes { _ = transport?.sendRTP($0) ?? transmit(rtpSocket, $0, to: rtpAddress) } }
        return withinBudget
    }

    /// The local address the kernel would send from toward `destination` (a routing lookup by connecting a
    /// UDP socket; nothing is sent). Port 0.
    private static func localAddress(toward destination: sockaddr_storage, length: socklen_t) -> sockaddr_storage? {
        var d = destination
        let fd = socket(Int32(d.ss_family), Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        let c = withUnsafePointer(to: &d) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) } }
        guard c == 0 else { return nil }
        var local = sockaddr_storage()
        var n = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let g = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &n) } }
        return g == 0 ? local : nil
    }

    private static func address(_ host: String, _ port: Int) -> (sockaddr_storage, socklen_t)? {
        var storage = sockaddr_storage()
        var a4 = in_addr()
        if inet_pton(AF_INET, host, &a4) == 1 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET); sin.pointee.sin_port = in_port_t(UInt16(port).bigEndian); sin.pointee.sin_addr = a4
            }
            return (storage, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
        var a6 = in6_addr()
        if inet_pton(AF_INET6, host, &a6) == 1 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin.pointee.sin6_family = sa_family_t(AF_INET6); sin.pointee.sin6_port = in_port_t(UInt16(port).bigEndian); sin.pointee.sin6_addr = a6
            }
            return (storage, socklen_t(MemoryLayout<sockaddr_in6>.size))
        }
        return nil
    }
}

/// The address bytes and port of a socket address. An IPv4 peer on a dual-stack socket (::ffff:a.b.c.d) is an
/// IPv4 address to STUN, to feedback checks and to people.
package func socketAddressParts(_ a: sockaddr_storage) -> (host: [UInt8], port: UInt16) {
    var a = a
    let family = Int32(a.ss_family)
    return withUnsafeBytes(of: &a) { raw in
        if family == AF_INET6 {
            let s = raw.load(as: sockaddr_in6.self)
            let bytes = withUnsafeBytes(of: s.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                return (Array(bytes[12..<16]), UInt16(bigEndian: s.sin6_port))
            }
            return (bytes, UInt16(bigEndian: s.sin6_port))
        }
        let s = raw.load(as: sockaddr_in.self)
        return (withUnsafeBytes(of: s.sin_addr) { Array($0) }, UInt16(bigEndian: s.sin_port))
    }
}
