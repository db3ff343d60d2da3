import Foundation
import VideoCaptureCommons
import VideoCapture // VideoRotation: the frame's rotation for the video-orientation extension
public import H264
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// Sends one H.264 stream as RTP over UDP and runs its RTCP: sender reports about once a second, receiver
/// reports (loss, jitter, RTT), PLI/FIR (→ the key-frame handler, at most one per `keyFrameRequestInterval`),
/// generic NACK (→ retransmission from a bounded history, as RTX per RFC 4588 when `rtxPayloadType` is set) and
/// REMB (→ the bitrate handler; see `setFeedbackHandlers`). Feedback is read on a dedicated thread; `send` is for one producer thread.
///
/// Made of parts that each do one thing: an `RTPSession` (SSRCs, clock, counts, sender-report figures), a
/// `RetransmissionHistory` (packets by sequence number, with a budget), an `RTCPResponder` (what each RTCP
/// packet asks for), congestion control (`CongestionController`: transport-wide numbers, the send-side estimator,
/// probes; the `Pacer`'s `PacingController`), and a transport (`UDPTransport`'s own sockets, or the owner's
/// `RTPTransport`). Every RTP packet leaves through one exit, `emit`; every reading of time is the injected
/// `SenderClock`'s.
public final class RTPSender: @unchecked Sendable {
    // @unchecked: everything is immutable after init or inside `shared` (a Mutex), except `packetizer` and
    // `lastSRNs`, which only the one sending thread touches (as `send` and `sendSenderReportIfDue` require),
    // and `feedbackThread`, set once in init and only read after it.

    /// The configuration the sender was made with.
    public let configuration: Configuration
    /// The media stream's SSRC (random).
    public let ssrc: UInt32
    /// The retransmission stream's SSRC (random; used when `rtxPayloadType` is set).
    public let rtxSSRC: UInt32
    /// The RTP timestamp of the first frame.
    public let rtpTimestampOffset: UInt32
    /// The local port receivers send RTCP to (0 over an owner's transport).
    public let localRTCPPort: Int
    /// The local addresses of the sender's own RTP and RTCP sockets ("host:port"), nil over an owner's transport.
    package var localAddresses: (rtp: String, rtcp: String)? { udp?.localAddresses }

    /// What the sending thread, the pacing thread and the feedback side share.
    struct Shared {
        var session: RTPSession
        var history: RetransmissionHistory
        var responder: RTCPResponder
        var loss: LossSimulator
        var stats = Statistics()
        var onKeyFrame: (@Sendable () -> Void)?
        var onREMB: (@Sendable (UInt64) -> Void)?
        var congestion: CongestionController
        /// Whether the owner says the link is limited.
        var linkLimited = false
        /// When the last NACK came (monotonic ns).
        var lastNACKNs: Int64?
    }
    let shared: Mutex<Shared>
    /// Every reading of time (the monotonic clock, or a test's simulated one).
    let clock: any SenderClock
    let transport: any RTPTransport
    /// The sockets when this sender owns them (then it runs the feedback thread too).
    let udp: UDPTransport?
    private(set) var feedbackThread: WorkerThread?
    let closed = Atomic<Bool>(false)
    /// Sending thread only.
    private var packetizer: H264Packetizer
    /// With `pacingFactor`: the queue and its thread.
    private(set) var pacer: Pacer?
    /// The pacing thread's copy of the packet it sends, and the sending thread's (one it sends itself).
    private var pacedPacket = [UInt8](), unqueuedPacket = [UInt8]()
    var lastSRNs: Int64?

    /// A sender with UDP sockets of its own and a feedback thread ("rtp-feedback") that reads receivers' RTCP
    /// and sends sender reports. Call `close()` when done (the thread holds the sender until then).
    public init(configuration c: Configuration) throws(RTPError) {
        try c.checkExtensions()
        let udp = try UDPTransport(c)
        self.udp = udp
        transport = udp
        localRTCPPort = udp.localRTCPPort
        configuration = c
        clock = MonotonicClock()
        let (state, packetizer) = RTPSender.setUp(c)
        shared = Mutex(state)
        self.packetizer = packetizer
        (ssrc, rtxSSRC, rtpTimestampOffset) = shared.withLock { ($0.session.ssrc, $0.session.rtxSSRC, $0.session.timestampOffset) }
        feedbackThread = WorkerThread(name: "rtp-feedback") { [self] stop in feedbackLoop(udp, stop) }
        startPacer(loop: .shared)
    }

    /// A sender over `transport` (no sockets, no thread of its own): the owner hands received RTCP to
    /// `handleRTCP` and calls `sendSenderReportIfDue` about every 100 ms. `host`/`port` of the configuration
    /// only name the peer in messages. With `pacingFactor`, the process's pacing thread sends the media packets.
    public convenience init(configuration c: Configuration, transport: any RTPTransport) throws(RTPError) {
        try self.init(configuration: c, transport: transport, clock: MonotonicClock(), pacerLoop: .shared)
    }

    /// A sender over `transport` on `clock`, its pacer on `pacerLoop` (a loop without a thread and a simulated
    /// clock: the link-simulation tests, which drive it).
    package init(configuration c: Configuration, transport: any RTPTransport, clock: any SenderClock, pacerLoop: PacerLoop) throws(RTPError) {
        guard (0.0...1.0).contains(c.dropRate) else { throw RTPError(.invalidConfiguration, "drop rate \(c.dropRate) is not 0...1") }
        try c.checkExtensions()
        configuration = c
        self.transport = transport
        self.clock = clock
        udp = nil
        localRTCPPort = 0
        let (state, packetizer) = RTPSender.setUp(c)
        shared = Mutex(state)
        self.packetizer = packetizer
        (ssrc, rtxSSRC, rtpTimestampOffset) = shared.withLock { ($0.session.ssrc, $0.session.rtxSSRC, $0.session.timestampOffset) }
        startPacer(loop: pacerLoop)
    }

    /// What both initialisers set up the same way: random timestamp offset and SSRCs, the packetizer, the
    /// retransmission history (allocated once) and congestion control.
    private static func setUp(_ c: Configuration) -> (Shared, H264Packetizer) {
        let session = RTPSession(ssrc: c.ssrc ?? .random(in: 1...UInt32.max), rtxSSRC: c.rtxSSRC ?? .random(in: 1...UInt32.max))
        let packetizer = H264Packetizer(maxPayload: c.maxPayload, state: RTPStreamState(payloadType: c.payloadType, ssrc: session.ssrc))
        let history = RetransmissionHistory(
            packets: c.historySize, packetCapacity: c.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2,
            share: c.retransmissionShare, allowance: 2 * (c.maxPayload + 14), keyFrameSupersedesEarlierPackets: c.keyFrameSupersedesEarlierPackets)
        let responder = RTCPResponder(
            ssrc: session.ssrc, keyFrameRequestIntervalNs: c.keyFrameRequestIntervalNs,
            minimumBitrateEstimate: c.minimumBitrateEstimate)
        let congestion = CongestionController(
            extensionID: c.transportWideCCExtensionID, probing: c.rtxPayloadType != nil, probeFrames: probeFrames,
            estimation: c.sendSideEstimation)
        return (
            Shared(
                session: session, history: history, responder: responder, loss: LossSimulator(rate: c.dropRate, seed: c.dropSeed),
                congestion: congestion), packetizer
        )
    }

    /// With `pacingFactor`, the pacer (its rate from the start estimate with transport-cc; else from the first REMB).
    private func startPacer(loop: PacerLoop) {
        guard let factor = configuration.pacingFactor, factor > 0 else { return }
        let capacity = shared.withLock { $0.history.capacity } / 2
        pacedPacket.reserveCapacity(configuration.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2)
        unqueuedPacket.reserveCapacity(pacedPacket.capacity)
        let p = Pacer(capacity: capacity, maxPacket: configuration.maxPayload + 40, clock: clock, loop: loop) { [weak self] seq in
            self?.sendPaced(seq)
        }
        if configuration.transportWideCCExtensionID != nil {
            p.setRate(Int(Double(shared.withLock { $0.congestion.estimate }) * factor))
        }
        pacer = p
    }

    /// The pacing rate from a bandwidth estimate (bit/s): `pacingFactor` × it.
    func pace(_ estimate: UInt64) {
        guard let pacer, let factor = configuration.pacingFactor else { return }
        pacer.setRate(Int(clamping: UInt64(Double(min(estimate, 1 << 40)) * factor)))
    }

    /// Sends queued media packet `seq` (the pacing thread, `PacerLoop`).
    private func sendPaced(_ seq: UInt16) { sendStored(seq, through: &pacedPacket) }

    /// Sends media packet `seq` from the history through `buffer` (at `time`, else now); returns 0 or the errno.
    @discardableResult
    private func sendStored(_ seq: UInt16, through buffer: inout [UInt8], at time: Int64? = nil) -> Int32 {
        let now = time ?? clock.nowNs
        let found = shared.withLock { s -> Bool in
            guard let original = s.history.recent(seq) else { return false }
            buffer.removeAll(keepingCapacity: true)
            buffer.append(contentsOf: original)
            return true
        }
        return found ? emit(&buffer, as: .media, at: now) : 0
    }

    /// The sender's one exit for RTP, for media, probe packets and retransmissions alike: congestion control numbers
    /// the packet and notes it (`CongestionController.packetLeaving`: with pacing, numbers then follow the order
    /// packets leave in, as the estimator's delay groups assume), the loss simulation may drop a media packet, the
    /// transport sends it; what leaves outside the pacer's queue (probes, retransmissions) is charged to its budget.
    /// Returns 0 or the transport's errno.
    @discardableResult
    func emit(_ packet: inout [UInt8], as kind: CongestionController.Departure, at now: Int64) -> Int32 {
        let send = shared.withLock { s -> Bool in
            s.congestion.packetLeaving(&packet, as: kind, nowNs: now)
            guard kind == .media, s.loss.drops() else { return true }
            s.stats.packetsDroppedBySimulation += 1
            return false
        }
        guard send else { return 0 }
        let e = packet.withUnsafeBytes { transport.sendRTP($0) }
        if kind == .media {
            shared.withLock { $0.session.packetSent(bytes: packet.count) }
        } else {
            pacer?.sent(packet.count)
        }
        return e
    }

    /// Sets what is called for feedback, replacing earlier handlers: `keyFrameRequest` for PLI/FIR (rate
    /// limited), `bitrateEstimate` with a receiver's REMB estimate in bit/s. Both are called on the feedback
    /// thread (the owner's, over a transport). Set them before the first frame.
    public func setFeedbackHandlers(keyFrameRequest: (@Sendable () -> Void)?, bitrateEstimate: (@Sendable (UInt64) -> Void)? = nil) {
        shared.withLock {
            $0.onKeyFrame = keyFrameRequest
            $0.onREMB = bitrateEstimate
        }
    }

    deinit { close() }

    /// Stops the feedback thread and closes the sockets (idempotent).
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pacer?.stop() // what is queued goes out first
        feedbackThread?.stop()
        sendSenderReport(bye: true) // a last report and a BYE: receivers end the stream cleanly
        udp?.close()
    }

    /// A snapshot of the counters; safe from any thread.
    public var statistics: Statistics {
        shared.withLock { s in
            var stats = s.stats
            stats.packetsSent = s.session.packetsSent
            stats.bytesSent = s.session.bytesSent
            stats.framesSent = s.session.framesSent
            stats.firstCaptureNs = s.session.firstCaptureNs
            s.congestion.fill(&stats.congestion)
            return stats
        }
    }

    /// Says whether the link to the receiver is limited (a viewer moved to a lower encode tier because its estimate
    /// does not carry the full one): while it is, frames carry `Configuration.congestedPlayoutDelay`.
    public func setLinkLimited(_ limited: Bool) { shared.withLock { $0.linkLimited = limited } }

    /// The playout-delay element the next frame carries at `now`: the configured bounds, or the congested ones while
    /// the link is limited or showed congestion within `congestionHoldNs`; nil without the extension.
    private func playoutDelayElement(now: Int64) -> RTPHeaderExtensionElement? {
        guard let id = configuration.playoutDelayExtensionID, let asked = configuration.playoutDelay else { return nil }
        guard let relaxed = configuration.congestedPlayoutDelay else { return RTPHeaderExtensionElement.playoutDelay(id: id, asked) }
        let delay = shared.withLock { s in
            let congested = s.linkLimited || s.congestion.congested(atNs: now, holdNs: configuration.congestionHoldNs)
            let delay = congested ? relaxed : asked
            if s.stats.playoutDelaySent != nil && s.stats.playoutDelaySent != delay { s.stats.playoutDelayChanges += 1 }
            s.stats.playoutDelaySent = delay
            return delay
        }
        return RTPHeaderExtensionElement.playoutDelay(id: id, delay)
    }

    /// With pacing and transport-cc, the packets of a key frame sent at once, as a packet train (5: about 4.8 KB,
    /// which a token bucket's burst does not pass whole, so that a full link's train arrives at about twice its
    /// rate, not at line rate).
    public static let keyFrameTrainPackets = 5

    /// The frames a probe cluster is spread over (6: about 200 ms at 30 fps, the cluster's length: longer than a
    /// 5 kB token bucket's burst lasts at twice a 400 kbit/s link's rate, so the bucket cannot pass it whole).
    public static let probeFrames = 6

    /// The sequence number the next media packet gets (read it on the sending thread, or when it is idle).
    public var nextSequenceNumber: UInt16 { packetizer.state.sequence }

    /// SPS and PPS of a key frame, for the SDP's fmtp.
    public static func parameterSets(of frame: EncodedFrame) -> (sps: [UInt8], pps: [UInt8])? { frame.parameterSets }

    /// Packetizes and sends one encoded access unit; its RTP time comes from its capture time (`timestampNs`,
    /// monotonic ns).
    public func send(_ frame: EncodedFrame) throws(RTPError) {
        let captureNs = frame.timestampNs
        let ts = shared.withLock { $0.session.timestamp(forCaptureNs: captureNs) }
        var failure: Int32 = 0
        let now = clock.nowNs
        let orientation = configuration.videoOrientationExtensionID.flatMap {
            RTPHeaderExtensionElement.videoOrientation(id: $0, rotationDegrees: frame.rotation.degrees)
        }
        // The capture time on the wall clock (NTP), and the playout delay the receiver is asked for, on each
        // frame's first packet.
        let captureTime = configuration.absoluteCaptureTimeExtensionID.flatMap {
            RTPHeaderExtensionElement.absoluteCaptureTime(id: $0, ntp: ntp(monotonicNs: captureNs))
        }
        let playoutDelay = playoutDelayElement(now: now)
        let every = (
            configuration.midExtensionID.flatMap { id in configuration.mid.flatMap { RTPHeaderExtensionElement.sdes(id: id, $0) } },
            configuration.ridExtensionID.flatMap { id in configuration.rid.flatMap { RTPHeaderExtensionElement.sdes(id: id, $0) } }
        )
        let twcc = configuration.transportWideCCExtensionID
        // Probing (transport-cc with RTX): a cluster starts at a frame and covers it and the next ones
        // (`probeFrames`), with RTX copies of recent packets added after each.
        // Not at a key frame nor while the pacer still holds packets: a probe on top of a key frame's burst
        // overfills a full link's queue (measured with probes every 2 s, a viewer behind 400 kbit/s: 1-6 freezes a
        // minute without this rule over 5 runs, 1-4 with it over 6).
        let quiet = !frame.isKeyFrame && (pacer?.queued ?? 0) == 0
        let cluster = shared.withLock { $0.congestion.frameStarts(mayProbe: quiet, nowNs: now) }
        // A key frame makes earlier frames useless: what is still queued of them goes unsent (the key frame goes
        // out now instead of after them), and NACKs for their packets are no longer served.
        if frame.isKeyFrame {
            let first = packetizer.state.sequence
            let dropped = pacer.map { $0.queued > 0 ? $0.dropQueued() : 0 } ?? 0
            shared.withLock { s in
                s.history.keyFrameStarts(at: first)
                s.congestion.droppedBeforeKeyFrame(dropped)
            }
        }
        // A key frame's first packets leave back to back, one send time: a packet train whose arrival rate shows
        // a link that widened (its frames are paced, and a low tier's frames are too small to be trains).
        var train = frame.isKeyFrame && twcc != nil ? RTPSender.keyFrameTrainPackets : 0
        var frameBytes = 0
        // The packetizer writes the transport-wide extension; its number is the exit's (`emit`).
        let count = packetizer.packetize(
            frame.data, nalUnits: frame.nalUnits, timestamp: ts, markerExtension: orientation, transportSequence: twcc.map { ($0, 0) },
            firstPacketExtensions: (captureTime, playoutDelay), everyPacketExtensions: every
        ) { packet in
            shared.withLock { $0.history.record(packet, at: now) }
            frameBytes += packet.count
            let seq = packet.bigEndianUInt16(at: 2)
            guard let pacer else {
                let e = sendStored(seq, through: &unqueuedPacket, at: now)
                if e != 0 && e != ECONNREFUSED { failure = e }
                return
            }
            if train > 0 {
                train -= 1
                sendStored(seq, through: &unqueuedPacket, at: now)
                pacer.sent(packet.count)
            } else if !pacer.enqueue(seq, bytes: packet.count) {
                sendStored(seq, through: &unqueuedPacket) // else the pacer sends it
            }
        }
        shared.withLock { s in
            if frame.isKeyFrame { s.history.keyFrameEnds(count: count) }
            s.session.frameSent(rtp: ts, captureNs: captureNs)
        }
        if cluster != 0 {
            sendProbePackets(newest: packetizer.state.sequence &- 1, available: count, frameBytes: frameBytes, now: now, skip: !quiet)
        }
        if failure != 0 { throw RTPError(.sendFailed, "sending RTP to \(configuration.host):\(configuration.port) failed", errno: failure) }
    }

    /// This frame's share of the probe cluster (`ProbeScheduler`): RTX copies of the newest packets (up to
    /// `available` of them, then round again) for what its own `frameBytes` left of its share. With `skip` (a key
    /// frame, or packets still queued) the share waits for a later frame.
    private func sendProbePackets(newest: UInt16, available: Int, frameBytes: Int, now: Int64, skip: Bool) {
        if let request = shared.withLock({ $0.congestion.frameSent(bytes: frameBytes, skip: skip) }) {
            var packet = [UInt8]()
            packet.reserveCapacity(configuration.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2)
            var sent = 0, k = 0
            while sent < request.bytes && k < 64 {
                let seq = newest &- UInt16(truncatingIfNeeded: k % max(1, available))
                let made = shared.withLock { s -> Bool in
                    guard let original = s.history.recent(seq) else { return false }
                    packet.removeAll(keepingCapacity: true)
                    rtxCopy(of: original, sequence: seq, into: &packet, s: &s)
                    return true
                }
                guard made else { break }
                emit(&packet, as: .probe, at: now)
                sent += packet.count
                k += 1
            }
        }
        shared.withLock { $0.congestion.frameDone(skipped: skip) }
    }

    /// An RTX packet (RFC 4588) carrying `original` (media packet `sequence`): the RTX SSRC, payload type and
    /// sequence, the header extension kept, the original sequence number before the payload.
    func rtxCopy(of original: ArraySlice<UInt8>, sequence seq: UInt16, into packet: inout [UInt8], s: inout Shared) {
        let headerLength = original.withUnsafeBytes { RTPHeader($0)?.payloadOffset } ?? 12
        packet.append(contentsOf: original.prefix(headerLength))
        packet[1] = (packet[1] & 0x80) | ((configuration.rtxPayloadType ?? 0) & 0x7f)
        packet.storeBigEndian(s.session.nextRTXSequence(), at: 2)
        packet.storeBigEndian(rtxSSRC, at: 8)
        // The layer's rid becomes the repaired stream's (RFC 8852 §3.2): the same bytes under the other id.
        if let rid = configuration.ridExtensionID, let repaired = configuration.repairedRIDExtensionID,
            let at = packet.withUnsafeBytes({ RTPHeader.oneByteExtensionOffset(id: rid, in: $0) })
        {
            packet[at - 1] = repaired << 4 | (packet[at - 1] & 0x0f)
        }
        packet.appendBigEndian(seq)
        packet.append(contentsOf: original.dropFirst(headerLength))
    }
}
