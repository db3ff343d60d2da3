import Foundation
public import VideoCaptureCommons
import VideoCapture // VideoRotation: the frame's rotation for the video-orientation extension
public import H264
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// Where an `RTPSender` puts its packets when it does not own UDP sockets (a WebRTC transport that protects them
/// with SRTP and sends them on its ICE-selected path). Called from the sending thread and the owner's feedback
/// thread: implementations lock. Returns 0 or an errno.
public protocol RTPTransport: AnyObject, Sendable {
    /// Sends one RTP packet (it may be protected first); returns 0 on success or an errno. The bytes are valid
    /// only during the call.
    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32
    /// Sends one compound RTCP packet; returns 0 on success or an errno. The bytes are valid only during the call.
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32
}

/// An RTP session that cannot start or send: its code says which kind, the message what and where.
public struct RTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The codes: `invalidConfiguration`, `socketFailed`, `sendFailed`.
    public typealias Code = ErrorCode<RTPError>
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence for people, naming the address, port or value at fault.
    public var message: String
    /// The system's error number when a socket call failed.
    public var errno: Int32?
    /// The configuration member refused by `Configuration.validate()` ("dropRate"); the message then starts
    /// with it.
    public var setting: String?
    /// An error with `code`, a human-readable `message`, the failing call's `errno` and the setting at fault, if any.
    public init(_ code: Code, _ message: String, errno: Int32? = nil, setting: String? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
        self.setting = setting
    }
    /// The message, followed by the errno and its text when there is one.
    public var description: String { message + (errno.map { " (errno \($0): \(String(cString: strerror($0))))" } ?? "") }
}

/// Sends one H.264 stream as RTP over UDP and runs its RTCP: sender reports about once a second, receiver
/// reports (loss, jitter, RTT), PLI/FIR (→ the key-frame handler, at most one per `keyFrameRequestInterval`),
/// generic NACK (→ retransmission from a bounded history, as RTX per RFC 4588 when `rtxPayloadType` is set) and
/// REMB (→ the bitrate handler; see `setFeedbackHandlers`). Feedback is read on a dedicated thread; `send` is for one producer thread.
///
/// Made of parts that each do one thing: an `RTPSession` (SSRCs, clock, counts, sender-report figures), a
/// `RetransmissionHistory` (packets by sequence number, with a budget), an `RTCPResponder` (what each RTCP
/// packet asks for), and a transport (`UDPTransport`'s own sockets, or the owner's `RTPTransport`).
public final class RTPSender: @unchecked Sendable {
    // @unchecked: everything is immutable after init or inside `shared` (a Mutex), except `packetizer` and
    // `lastSRNs`, which only the one sending thread touches (as `send` and `sendSenderReportIfDue` require),
    // and `feedbackThread`, set once in init and only read after it.
    /// Where and how to send; only `host` and `port` have no default.
    public struct Configuration: Sendable {
        /// The receiver's IPv4 or IPv6 address, as a literal (names are not resolved).
        public var host: String
        /// The receiver's RTP port, 1–65535.
        public var port: Int
        /// Where RTCP goes (default port + 1); with `rtcpMux` RTP and RTCP share `port`.
        public var rtcpPort: Int?
        /// Send RTCP on the RTP port (RFC 5761), as WebRTC does.
        public var rtcpMux = false
        /// Local port for our RTCP socket (receivers send their reports there); 0 picks one.
        public var localRTCPPort = 0
        /// RTP payload bytes per packet (see `H264Packetizer.maxPayload`).
        public var maxPayload = 1200
        /// The H.264 payload type announced in the SDP.
        public var payloadType: UInt8 = 96
        /// The RTX payload type (RFC 4588) for retransmissions on a stream of their own; nil resends on the media
        /// stream as it was.
        public var rtxPayloadType: UInt8?
        /// The id negotiated for the video-orientation header extension (`a=extmap:ID urn:3gpp:video-orientation`,
        /// 1…14): the last packet of every frame then carries the frame's `EncodedFrame.rotation` for the receiver
        /// to apply. nil sends no extension (the pixels must then be upright).
        public var videoOrientationExtensionID: UInt8?
        /// The id negotiated for the absolute capture time extension
        /// (`http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time`, 1…14): the first packet of every frame
        /// then carries its capture time (`EncodedFrame.timestampNs`) on the wall clock, as NTP, so the receiver
        /// can tell how old what it shows is. nil sends none.
        public var absoluteCaptureTimeExtensionID: UInt8?
        /// The id negotiated for the playout delay extension (`http://www.webrtc.org/experiments/rtp-hdrext/playout-delay`,
        /// 1…14); with `playoutDelay`, the first packet of every frame carries those bounds.
        public var playoutDelayExtensionID: UInt8?
        /// The playout delay the receiver is asked for (with `playoutDelayExtensionID`); nil sends none, and the
        /// receiver chooses its own.
        public var playoutDelay: PlayoutDelay?
        /// With `playoutDelay`: the bounds sent instead while the link is congested: the send-side estimator saw
        /// overuse or more than 2 % loss, or a NACK came, within `congestionHoldNs`, or the owner said the link is
        /// limited (`setLinkLimited(_:)`: a viewer on a lower encode tier). A low-latency delay (min 0, max ≤ 500 ms:
        /// Chromium renders each frame as soon as it is decoded) leaves no jitter buffer to absorb a late frame on a
        /// tight link; `PlayoutDelay.receiverDefault` gives the receiver its own buffer back. nil: `playoutDelay` always.
        public var congestedPlayoutDelay: PlayoutDelay?
        /// How long after the last sign of congestion the link counts as congested (10 s, in nanoseconds).
        public var congestionHoldNs: Int64 = 10_000_000_000
        /// The ids negotiated for the `urn:ietf:params:rtp-hdrext:sdes:mid` and `…:sdes:rtp-stream-id` header
        /// extensions (RFC 8852, 1…14) and the values every packet carries with them (`mid`, `rid`: 1…3 rid
        /// characters): a simulcast layer (RFC 8853), which an SFU such as Janus tells from the others by its rid.
        /// nil: not sent.
        public var midExtensionID: UInt8?, ridExtensionID: UInt8?
        /// The media section's mid, carried with `midExtensionID`.
        public var mid: String?
        /// The layer's rid, carried with `ridExtensionID`.
        public var rid: String?
        /// The id negotiated for `urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id` (1…14): RTX packets then
        /// carry the rid as the repaired stream's instead of as their own (their rid element is renamed), so the SFU
        /// maps the RTX SSRC to the layer it repairs. nil: RTX copies the media packet's extensions as they are.
        public var repairedRIDExtensionID: UInt8?
        /// The media SSRC, when it must be known before the sender exists (an offer that lists it); nil: random.
        public var ssrc: UInt32?
        /// The RTX SSRC, likewise; nil: random.
        public var rtxSSRC: UInt32?
        /// The id negotiated for the transport-wide sequence number extension (1…14): every packet (and
        /// retransmission) carries one, the receiver's transport feedback drives a `SendSideBandwidthEstimator`,
        /// and its estimate goes to the bitrate handler as REMB's does. nil: no send-side estimation.
        public var transportWideCCExtensionID: UInt8?
        /// The estimator's bounds and start (with `transportWideCCExtensionID`).
        public var sendSideEstimation = SendSideBandwidthEstimator.Configuration()
        /// Packets kept for retransmission (about 1 s of 2 Mbit/s video).
        public var historySize = 512
        /// NACKs for packets sent before the last key frame go unserved (`Statistics.nacksBeforeKeyFrame`). Right
        /// for a receiver that decodes from a complete key frame and drops the older incomplete frames (libwebrtc,
        /// Chromium): resending them only delays the key frame on a loaded link. Wrong for one with an in-order
        /// jitter buffer (GStreamer's rtpjitterbuffer, ffmpeg): it holds everything behind a missing packet until
        /// its latency deadline, and a packet never resent costs frames (measured with GStreamer, 1 % loss, a key
        /// frame every 17 frames: 229–266 of 300 decoded with the rule, see StreamTests). Off by default;
        /// `WebRTCPeer` turns it on.
        public var keyFrameSupersedesEarlierPackets = false
        /// Drop outgoing packets with this probability (loss simulation for tests; seeded, reproducible).
        public var dropRate = 0.0
        /// The seed of the loss simulation's random numbers (the same seed drops the same packets).
        public var dropSeed: UInt64 = 1
        /// PLI/FIR requests closer together than this (nanoseconds; 300 ms by default) are counted but not passed on.
        public var keyFrameRequestIntervalNs: Int64 = 300_000_000
        /// The CNAME sent in the SDES of each sender report.
        public var cname = "swift-video-capture"
        /// Besides the receiver's own sockets (the destination address from its RTP or RTCP port), where RTCP is
        /// obeyed from: an address (any port: a receiver that reports from another address of its own), or
        /// `ADDRESS:PORT` / `[V6]:PORT` (that port only: a receiver that reports from a socket of its own).
        /// Left empty, one port of the destination address is latched (`Statistics.rtcpLatchedPort`): the first to
        /// send a compound RTCP packet (an SR or RR first) that names this stream's SSRC in a report block or as the
        /// media source of a NACK, PLI or FIR: a receiver reporting from a random port (GStreamer's unbound
        /// `udpsink`). No port is latched after it; the receiver's own ports stay trusted. A program on the
        /// receiver's host that knows the SSRC and reports first would take the latch: where that matters, name
        /// the receiver's sources here, and nothing is latched. Feedback from anywhere else, other ports of the
        /// receiver's host included, is dropped and counted (`Statistics.rtcpFromStrangers`). Only for a sender
        /// that owns its sockets.
        public var feedbackFrom: [String] = []
        /// Retransmissions may use at most this share of the media bitrate (over a sliding second), so that
        /// whatever the NACK rate the sender sends at most (1 + share) × its media bitrate. 0.45 keeps the total
        /// under 1.5 × with what the transport adds to each packet (RTX's 2 bytes, SRTP's tag).
        public var retransmissionShare = 0.45
        /// Pace media packets at this multiple of the bandwidth estimate (the send-side one with transport-cc, else
        /// the receiver's REMB; 2.5 as libwebrtc), from the pacing thread, instead of sending each frame as one burst;
        /// nil sends at once. Until an estimate is known packets go out at once.
        public var pacingFactor: Double?
        /// A receiver's bandwidth estimate (REMB) is raised to this many bit/s before it is handed on: one REMB
        /// of 0 must not silence the stream.
        public var minimumBitrateEstimate: UInt64 = 50_000
        /// A configuration for `host`:`port` with the defaults above.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    /// Counters since the sender was made, read with `RTPSender.statistics` (a snapshot, from any thread).
    public struct Statistics: Sendable, Equatable {
        /// Media packets and bytes (first transmissions; retransmissions are counted apart).
        public var packetsSent = 0
        /// Bytes of those packets, RTP headers included.
        public var bytesSent = 0
        /// Access units sent.
        public var framesSent = 0
        /// Packets the loss simulation (`Configuration.dropRate`) did not send.
        public var packetsDroppedBySimulation = 0
        /// Packets resent for NACKs.
        public var retransmissions = 0
        /// Generic NACK messages about this stream received.
        public var nacksReceived = 0
        /// PLI and FIR messages about this stream received.
        public var keyFrameRequests = 0
        /// Requests passed to the key-frame handler (the others came within `keyFrameRequestIntervalNs`).
        public var keyFrameRequestsHonoured = 0
        /// Report blocks about our stream received (in RRs or SRs).
        public var receiverReports = 0
        /// Sender reports sent.
        public var senderReports = 0
        /// Round-trip time from the last receiver report that answered a sender report.
        public var rttMs: Double?
        /// The loss the last receiver report gave, 0…1.
        public var fractionLost: Double?
        /// The interarrival jitter the last receiver report gave, milliseconds.
        public var jitterMs: Double?
        /// The last REMB estimate received, bits per second (after raising it to `minimumBitrateEstimate`).
        public var rembBitrate: UInt64?
        /// Transport-wide congestion control feedback messages received.
        public var transportFeedbacks = 0
        /// The send-side estimate from that feedback (`SendSideBandwidthEstimator`), bits per second.
        public var sendSideEstimate: UInt64?
        /// What media may use of it now (`SendSideBandwidthEstimator.mediaRate`: less than the estimate only while
        /// the path's delivery is not yet measured), bits per second.
        public var sendSideMediaRate: UInt64?
        /// What the estimator's delay trend says: "normal", "overusing" or "underusing".
        public var delayUsage: String?
        /// The loss the estimator measured over its last window (0…1).
        public var transportLoss: Double?
        /// RTCP datagrams that could not be parsed.
        public var rtcpErrors = 0
        /// RTCP datagrams from addresses other than the receiver's (dropped unread).
        public var rtcpFromStrangers = 0
        /// The port of the destination's address that RTCP was latched to: the first port other than the receiver's
        /// RTP and RTCP ports to send a compound RTCP packet naming this stream (see `Configuration.feedbackFrom`);
        /// nil: none was.
        public var rtcpLatchedPort: Int?
        /// Bytes sent as retransmissions.
        public var retransmittedBytes = 0
        /// NACKed packets not resent: no longer in the history, or already resent within the last RTT.
        public var nacksIgnored = 0
        /// NACKed packets not resent because retransmissions had used their share of the bitrate.
        public var retransmissionsOverBudget = 0
        /// Probe clusters sent (send-side estimation with RTX), the RTX packets they added, and the clusters whose
        /// result raised the estimate.
        public var probes = 0, probePackets = 0, probesRaised = 0
        /// Probes that lost packets (the estimator then waits its longest before the next).
        public var probesLost = 0
        /// Probes started early because the path's queue vanished after failed ones (the estimator's
        /// `probesOnClearedQueue`).
        public var probesOnClearedQueue = 0
        /// Probes whose raise the delivered rate after it then capped (a token bucket's burst passed them), and the
        /// times the estimate was brought down to what the path delivered (the estimator's `probesCapped` and
        /// `deliveryCaps`).
        public var probesCapped = 0, deliveryCaps = 0
        /// Probes short of their target whose result still raised the estimate (the estimator's `probesRaisedShort`).
        public var probesRaisedShort = 0
        /// Packet trains (a key frame's first packets, sent back to back) that arrived fast enough to call a probe
        /// (they raise nothing themselves).
        public var trainsRaised = 0
        /// Packet trains measured (the estimator's `trainsMeasured`).
        public var trainsMeasured = 0
        /// The arrival rate of the last packet train of 5 packets or more (bit/s).
        public var lastTrainRate: UInt64?
        /// The last probe cluster's measured rate, bit/s (nil: none judged yet, or too few of its packets reported).
        public var lastProbeResult: UInt64?
        /// How long the last reported packet queued on the path (µs; the send-side estimator's `queueDelayUs`).
        public var queueDelayUs: Int64 = 0
        /// Packets still in the pacer's queue when a key frame came, not sent (the key frame replaces them).
        public var packetsDroppedBeforeKeyFrame = 0
        /// Capture time (monotonic ns) of the first frame sent: RTP time `rtpTimestampOffset` (receivers map
        /// RTP timestamps back to capture times with it).
        public var firstCaptureNs: Int64?
        /// The playout delay the last frame carried (nil: none).
        public var playoutDelaySent: PlayoutDelay?
        /// How many times the playout delay sent changed between `Configuration.playoutDelay` and
        /// `congestedPlayoutDelay`.
        public var playoutDelayChanges = 0
        /// Signs of congestion seen (overuse or loss over 2 % in a transport feedback, or a NACK).
        public var congestionSignals = 0
        /// NACKed packets not resent because a key frame was sent after them (the receiver decodes from it).
        public var nacksBeforeKeyFrame = 0
    }

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

    /// What the sending thread and the feedback side share.
    private struct Shared {
        var session: RTPSession
        var history: RetransmissionHistory
        var responder: RTCPResponder
        var loss: LossSimulator
        var stats = Statistics()
        var onKeyFrame: (@Sendable () -> Void)?
        var onREMB: (@Sendable (UInt64) -> Void)?
        /// The next transport-wide sequence number, and the estimator its feedback feeds.
        var transportSequence: UInt16 = 0
        var estimator: SendSideBandwidthEstimator
        var lastEstimateReported: (bps: Int, media: Int, atNs: Int64) = (0, 0, .min / 2)
        /// The probe cluster being sent: its id, the padding bytes still to send and the frames left to send them
        /// after (a probe is spread over three frames, the frames' own packets counted in it), the frames skipped.
        var probe: (id: UInt8, bytes: Int, frames: Int, skipped: Int)?
        /// The last sign of congestion (monotonic ns), and whether the owner says the link is limited.
        var lastCongestionNs: Int64 = .min / 2
        var linkLimited = false
        /// When the last NACK came (monotonic ns).
        var lastNACKNs: Int64?
    }
    private let shared: Mutex<Shared>
    /// Without a pacer, a frame's packets are numbered for transport-cc from the frame's first number on
    /// (first + k, in the packetizer), so nothing else may take a number while they are sent: retransmissions (the
    /// RTCP thread) wait for the frame. With a pacer every packet takes its number as it leaves.
    private let frameNumbering = NSLock()
    /// Whether `frameNumbering` is taken: transport-cc without a pacer.
    private var numbersWholeFrames: Bool { configuration.transportWideCCExtensionID != nil && pacer == nil }
    private let transport: any RTPTransport
    /// The sockets when this sender owns them (then it runs the feedback thread too).
    private let udp: UDPTransport?
    private var feedbackThread: WorkerThread?
    private let closed = Atomic<Bool>(false)
    /// Sending thread only.
    private var packetizer: H264Packetizer
    /// With `pacingFactor`: the queue and its thread.
    private var pacer: Pacer?
    /// The pacing thread's copy of the packet it sends, and the sending thread's (a packet the full queue refused).
    private var pacedPacket = [UInt8](), unqueuedPacket = [UInt8]()
    private var lastSRNs: Int64?

    /// A sender with UDP sockets of its own and a feedback thread ("rtp-feedback") that reads receivers' RTCP
    /// and sends sender reports. Call `close()` when done (the thread holds the sender until then).
    public init(configuration c: Configuration) throws(RTPError) {
        try RTPSender.checkExtensions(c)
        let udp = try UDPTransport(c)
        self.udp = udp
        transport = udp
        localRTCPPort = udp.localRTCPPort
        configuration = c
        let (state, packetizer) = RTPSender.setUp(c)
        shared = Mutex(state)
        self.packetizer = packetizer
        (ssrc, rtxSSRC, rtpTimestampOffset) = shared.withLock { ($0.session.ssrc, $0.session.rtxSSRC, $0.session.timestampOffset) }
        feedbackThread = WorkerThread(name: "rtp-feedback") { [self] stop in feedbackLoop(udp, stop) }
        startPacer()
    }

    /// With `pacingFactor`, the pacer (its rate from the start estimate with transport-cc; else from the first REMB).
    private func startPacer() {
        guard let factor = configuration.pacingFactor, factor > 0 else { return }
        let capacity = shared.withLock { $0.history.capacity } / 2
        pacedPacket.reserveCapacity(configuration.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2)
        unqueuedPacket.reserveCapacity(pacedPacket.capacity)
        let p = Pacer(capacity: capacity, maxPacket: configuration.maxPayload + 40) { [weak self] seq in self?.sendPaced(seq) }
        if configuration.transportWideCCExtensionID != nil {
            p.setRate(Int(Double(shared.withLock { $0.estimator.estimate }) * factor))
        }
        pacer = p
    }

    private func pace(_ estimate: UInt64) {
        guard let pacer, let factor = configuration.pacingFactor else { return }
        pacer.setRate(Int(clamping: UInt64(Double(min(estimate, 1 << 40)) * factor)))
    }

    /// Sends queued media packet `seq` (the pacing thread, `PacerLoop`).
    private func sendPaced(_ seq: UInt16) { sendStored(seq, through: &pacedPacket) }

    /// Sends media packet `seq` from the history through `buffer`, with the next transport-wide number written in
    /// now: with pacing, numbers follow the order packets leave in, retransmissions and probes included (the
    /// estimator's delay groups assume it).
    private func sendStored(_ seq: UInt16, through buffer: inout [UInt8], at time: Int64? = nil) {
        let now = time ?? monotonicNanoseconds()
        let send = shared.withLock { s -> Bool in
            guard let original = s.history.recent(seq) else { return false }
            buffer.removeAll(keepingCapacity: true)
            buffer.append(contentsOf: original)
            if let id = configuration.transportWideCCExtensionID,
                let at = buffer.withUnsafeBytes({ RTPHeader.oneByteExtensionOffset(id: id, in: $0) }), at + 2 <= buffer.count
            {
                let n = s.transportSequence
                s.transportSequence &+= 1
                buffer[at] = UInt8(n >> 8)
                buffer[at + 1] = UInt8(n & 0xff)
                s.estimator.packetSent(sequence: n, timeUs: now / 1000, bytes: buffer.count, probeCluster: s.probe?.id ?? 0)
            }
            guard !s.loss.drops() else {
                s.stats.packetsDroppedBySimulation += 1
                return false
            }
            return true
        }
        guard send else { return }
        buffer.withUnsafeBytes { _ = transport.sendRTP($0) }
        shared.withLock { $0.session.packetSent(bytes: buffer.count) }
    }

    /// A sender over `transport` (no sockets, no thread of its own): the owner hands received RTCP to
    /// `handleRTCP` and calls `sendSenderReportIfDue` about every 100 ms. `host`/`port` of the configuration
    /// only name the peer in messages. With `pacingFactor`, the process's pacing thread sends the media packets.
    public init(configuration c: Configuration, transport: any RTPTransport) throws(RTPError) {
        guard (0.0...1.0).contains(c.dropRate) else { throw RTPError(.invalidConfiguration, "drop rate \(c.dropRate) is not 0...1") }
        try RTPSender.checkExtensions(c)
        configuration = c
        self.transport = transport
        udp = nil
        localRTCPPort = 0
        let (state, packetizer) = RTPSender.setUp(c)
        shared = Mutex(state)
        self.packetizer = packetizer
        (ssrc, rtxSSRC, rtpTimestampOffset) = shared.withLock { ($0.session.ssrc, $0.session.rtxSSRC, $0.session.timestampOffset) }
        startPacer()
    }

    /// Header extension ids must fit the one-byte form (RFC 8285: 1…14).
    private static func checkExtensions(_ c: Configuration) throws(RTPError) {
        let ids = [
            ("video-orientation", c.videoOrientationExtensionID), ("transport-wide-cc", c.transportWideCCExtensionID),
            ("abs-capture-time", c.absoluteCaptureTimeExtensionID), ("playout-delay", c.playoutDelayExtensionID),
            ("sdes:mid", c.midExtensionID), ("sdes:rtp-stream-id", c.ridExtensionID), ("sdes:repaired-rtp-stream-id", c.repairedRIDExtensionID),
        ]
        for (name, id) in ids {
            if let id, !(1...14).contains(id) {
                throw RTPError(.invalidConfiguration, "\(name) extension id \(id) is not 1...14 (RFC 8285 one-byte form)")
            }
        }
        let used = ids.compactMap(\.1)
        if Set(used).count != used.count { throw RTPError(.invalidConfiguration, "two header extensions share an id: \(used)") }
        for (name, id, value) in [("mid", c.midExtensionID, c.mid), ("rid", c.ridExtensionID, c.rid)] where id != nil {
            guard let value, RTPHeaderExtensionElement.sdes(id: 1, value) != nil else {
                throw RTPError(
                    .invalidConfiguration, "the \(name) sent with its extension must be 1...3 letters, digits, - or _, got \(value ?? "none")")
            }
        }
    }

    /// What both initialisers set up the same way: random timestamp offset and SSRCs, the packetizer, and the
    /// retransmission history (allocated once).
    private static func setUp(_ c: Configuration) -> (Shared, H264Packetizer) {
        let session = RTPSession(ssrc: c.ssrc ?? .random(in: 1...UInt32.max), rtxSSRC: c.rtxSSRC ?? .random(in: 1...UInt32.max))
        let packetizer = H264Packetizer(maxPayload: c.maxPayload, state: RTPStreamState(payloadType: c.payloadType, ssrc: session.ssrc))
        let history = RetransmissionHistory(
            packets: c.historySize, packetCapacity: c.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2,
            share: c.retransmissionShare, allowance: 2 * (c.maxPayload + 14), keyFrameSupersedesEarlierPackets: c.keyFrameSupersedesEarlierPackets)
        let responder = RTCPResponder(
            ssrc: session.ssrc, keyFrameRequestIntervalNs: c.keyFrameRequestIntervalNs,
            minimumBitrateEstimate: c.minimumBitrateEstimate)
        return (
            Shared(
                session: session, history: history, responder: responder, loss: LossSimulator(rate: c.dropRate, seed: c.dropSeed),
                estimator: SendSideBandwidthEstimator(configuration: c.sendSideEstimation)), packetizer
        )
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

    /// Sends a sender report when a second has passed since the last one (the first right after the first
    /// frame). For senders over a transport; call from one thread.
    public func sendSenderReportIfDue() {
        let now = monotonicNanoseconds()
        if lastSRNs.map({ now - $0 >= 1_000_000_000 }) ?? true, sendSenderReport() { lastSRNs = now }
    }

    deinit { close() }

    /// After the last frame, before `close()`: keeps serving NACKs until none has come for `quietNs` (and at most
    /// `maxNs` in all), so that a receiver can still repair the last frames. Its NACK for a loss comes up to an
    /// RTCP interval later (GStreamer's: about 0.3 s), and an unrepaired loss near the end costs every frame after
    /// it (no key frame follows): measured with GStreamer at 1 % loss, 17 of 300 frames in 2 of 3 runs. Returns at
    /// once when no receiver has sent RTCP, or over an owner's transport (the owner reads its feedback).
    public func drainFeedback(quietNs: Int64 = 500_000_000, maxNs: Int64 = 2_000_000_000) {
        guard feedbackThread != nil, !closed.load(ordering: .acquiring) else { return }
        let start = monotonicNanoseconds()
        while true {
            let (heard, lastNACK) = shared.withLock { s in
                (s.stats.receiverReports > 0 || s.stats.nacksReceived > 0 || s.stats.keyFrameRequests > 0, s.lastNACKNs)
            }
            guard heard else { return }
            let now = monotonicNanoseconds()
            if now - max(start, lastNACK ?? start) >= quietNs || now - start >= maxNs { return }
            Sleep.for(nanoseconds: 10_000_000) // the feedback thread serves the NACKs meanwhile
        }
    }

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
            let congested = s.linkLimited || now - s.lastCongestionNs < configuration.congestionHoldNs
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
        let now = monotonicNanoseconds()
        let orientation = configuration.videoOrientationExtensionID.flatMap {
            RTPHeaderExtensionElement.videoOrientation(id: $0, rotationDegrees: frame.rotation.degrees)
        }
        // The capture time on the wall clock (NTP), and the playout delay the receiver is asked for, on each
        // frame's first packet.
        let captureTime = configuration.absoluteCaptureTimeExtensionID.flatMap {
            RTPHeaderExtensionElement.absoluteCaptureTime(id: $0, ntp: RTPSender.ntp(monotonicNs: captureNs))
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
        let probing = twcc != nil && configuration.rtxPayloadType != nil
        let quiet = !frame.isKeyFrame && (pacer?.queued ?? 0) == 0
        let numbering = numbersWholeFrames
        if numbering { frameNumbering.lock() }
        defer { if numbering { frameNumbering.unlock() } }
        let mayStartProbe = probing && quiet
        let (firstTransport, cluster) =
            twcc == nil
            ? (0, UInt8(0))
            : shared.withLock { s -> (UInt16, UInt8) in
                if mayStartProbe, s.probe == nil, let p = s.estimator.startProbe(nowUs: now / 1000) {
                    // The frames' own bytes count: the copies make up the rest, frame by frame (an encoder that
                    // undershoots its target gets more copies, so that the cluster reaches its rate).
                    s.probe = (p.cluster, p.bytes, RTPSender.probeFrames, 0)
                    s.stats.probes += 1
                    s.stats.probesOnClearedQueue = s.estimator.probesOnClearedQueue
                }
                return (s.transportSequence, s.probe?.id ?? 0)
            }
        // A key frame makes earlier frames useless: what is still queued of them goes unsent (the key frame goes
        // out now instead of after them), and NACKs for their packets are no longer served.
        if frame.isKeyFrame {
            let first = packetizer.state.sequence
            let dropped = pacer.map { $0.queued > 0 ? $0.dropQueued() : 0 } ?? 0
            shared.withLock { s in
                s.history.keyFrameStarts(at: first)
                s.stats.packetsDroppedBeforeKeyFrame += dropped
            }
        }
        // A key frame's first packets leave back to back, one send time: a packet train whose arrival rate shows
        // a link that widened (its frames are paced, and a low tier's frames are too small to be trains).
        var train = frame.isKeyFrame && twcc != nil ? RTPSender.keyFrameTrainPackets : 0
        var k: UInt16 = 0
        var frameBytes = 0
        let count = packetizer.packetize(
            frame.data, nalUnits: frame.nalUnits, timestamp: ts, markerExtension: orientation, transportSequence: twcc.map { ($0, firstTransport) },
            firstPacketExtensions: (captureTime, playoutDelay), everyPacketExtensions: every
        ) { packet in
            shared.withLock { $0.history.record(packet, at: now) }
            frameBytes += packet.count
            defer { k &+= 1 }
            if let pacer {
                let seq = packet.bigEndianUInt16(at: 2)
                if train > 0 {
                    train -= 1
                    sendStored(seq, through: &unqueuedPacket, at: now)
                    pacer.sent(packet.count)
                } else if !pacer.enqueue(seq, bytes: packet.count) {
                    sendStored(seq, through: &unqueuedPacket) // else the pacer sends it
                }
                return
            }
            let dropped = shared.withLock { s -> Bool in
                if twcc != nil {
                    s.estimator.packetSent(sequence: firstTransport &+ k, timeUs: now / 1000, bytes: packet.count, probeCluster: cluster)
                }
                guard s.loss.drops() else { return false }
                s.stats.packetsDroppedBySimulation += 1
                return true
            }
            if dropped { return }
            let e = transport.sendRTP(packet)
            if e != 0 && e != ECONNREFUSED { failure = e }
            shared.withLock { $0.session.packetSent(bytes: packet.count) }
        }
        shared.withLock { s in
            if frame.isKeyFrame { s.history.keyFrameEnds(count: count) }
            s.session.frameSent(rtp: ts, captureNs: captureNs)
            if twcc != nil && pacer == nil { s.transportSequence = firstTransport &+ UInt16(truncatingIfNeeded: count) }
        }
        if cluster != 0 {
            sendProbePackets(newest: packetizer.state.sequence &- 1, available: count, frameBytes: frameBytes, now: now, skip: !quiet)
        }
        if failure != 0 { throw RTPError(.sendFailed, "sending RTP to \(configuration.host):\(configuration.port) failed", errno: failure) }
    }

    /// This frame's share of the probe cluster: its own `frameBytes` and RTX copies of the newest packets (up to
    /// `available` of them, then round again) for the rest, tagged with the cluster; after `probeFrames` frames the
    /// cluster is complete. With `skip` (a key frame, or packets still queued) the share waits for a later frame;
    /// after 10 frames the cluster ends as it is.
    private func sendProbePackets(newest: UInt16, available: Int, frameBytes: Int, now: Int64, skip: Bool) {
        if !skip,
            let quota = shared.withLock({ s -> Int? in
                guard var p = s.probe else { return nil }
                let share = p.bytes / max(1, p.frames)
                p.bytes -= min(p.bytes, frameBytes)
                s.probe = p
                return share - frameBytes
            }), quota > 0
        {
            sendProbeShare(quota, newest: newest, available: available, now: now)
        }
        shared.withLock { s in
            guard var p = s.probe else { return }
            if skip { p.skipped += 1 } else { p.frames -= 1 }
            if p.frames <= 0 || p.skipped >= 10 {
                s.estimator.endProbe()
                s.probe = nil
            } else {
                s.probe = p
            }
        }
    }

    /// About `quota` bytes of RTX copies of the newest packets, tagged with the probe cluster.
    private func sendProbeShare(_ quota: Int, newest: UInt16, available: Int, now: Int64) {
        var packet = [UInt8]()
        packet.reserveCapacity(configuration.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2)
        var sent = 0, k = 0
        while sent < quota && k < 64 {
            let made = shared.withLock { s -> Bool in
                guard var p = s.probe else { return false }
                let seq = newest &- UInt16(truncatingIfNeeded: k % max(1, available))
                guard let original = s.history.recent(seq) else { return false }
                packet.removeAll(keepingCapacity: true)
                rtxCopy(of: original, sequence: seq, into: &packet, s: &s)
                let n = s.transportSequence
                s.transportSequence &+= 1
                if let id = configuration.transportWideCCExtensionID,
                    let at = packet.withUnsafeBytes({ RTPHeader.oneByteExtensionOffset(id: id, in: $0) }), at + 2 <= packet.count
                {
                    packet[at] = UInt8(n >> 8)
                    packet[at + 1] = UInt8(n & 0xff)
                }
                s.estimator.packetSent(sequence: n, timeUs: now / 1000, bytes: packet.count, probeCluster: p.id)
                p.bytes -= min(p.bytes, packet.count)
                s.stats.probePackets += 1
                s.probe = p
                return true
            }
            guard made else { break }
            packet.withUnsafeBytes { _ = transport.sendRTP($0) }
            pacer?.sent(packet.count)
            sent += packet.count
            k += 1
        }
    }

    /// An RTX packet (RFC 4588) carrying `original` (media packet `sequence`): the RTX SSRC, payload type and
    /// sequence, the header extension kept, the original sequence number before the payload.
    private func rtxCopy(of original: ArraySlice<UInt8>, sequence seq: UInt16, into packet: inout [UInt8], s: inout Shared) {
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

    // MARK: RTCP

    /// The NTP time of monotonic instant `ns` on this machine's wall clock.
    private static func ntp(monotonicNs ns: Int64) -> UInt64 {
        RTPSession.ntp(monotonicNs: ns, realtimeMinusMonotonicNs: realtimeMinusMonotonicNs())
    }

    private static func ntpNow() -> UInt64 { ntp(monotonicNs: monotonicNanoseconds()) }

    @discardableResult
    private func sendSenderReport(bye: Bool = false) -> Bool {
        let now = monotonicNanoseconds(), ntp = RTPSender.ntp(monotonicNs: now)
        let figures = shared.withLock { s -> (rtp: UInt32, packets: UInt32, octets: UInt32)? in
            guard let f = s.session.senderReport(ntp: ntp, nowNs: now) else { return nil }
            s.stats.senderReports += 1
            return f
        }
        guard let figures else { return false }
        var sr = RTCPWriter.senderReport(
            ssrc: ssrc, ntp: ntp, rtpTimestamp: figures.rtp, packets: figures.packets, octets: figures.octets, cname: configuration.cname)
        if bye { sr += RTCPWriter.bye(ssrc: ssrc) }
        sr.withUnsafeBytes { _ = transport.sendRTCP($0) }
        return true
    }

    private func feedbackLoop(_ udp: UDPTransport, _ stop: StopFlag) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        // The first SR goes out as soon as a frame was sent (a receiver's first report can then carry LSR and
        // give an RTT), the next ones every second.
        var lastSR: Int64? = nil
        while !stop.isSet {
            let now = monotonicNanoseconds()
            if lastSR.map({ now - $0 >= 1_000_000_000 }) ?? true, sendSenderReport() { lastSR = now }
            udp.receiveFeedback(
                into: buffer, timeoutMs: 100, ssrc: ssrc, handle: { handleRTCP($0) },
                latched: { port in shared.withLock { $0.stats.rtcpLatchedPort = port } },
                stranger: { shared.withLock { $0.stats.rtcpFromStrangers += 1 } })
        }
    }

    /// Handles one compound RTCP packet from a receiver (public for tests and fuzzing).
    public func handleRTCP(_ bytes: UnsafeRawBufferPointer) {
        // With rtcp-mux, RTP and RTCP share a port: RTCP packet types are 192...223 (RFC 5761).
        guard bytes.count >= 2, (192...223).contains(bytes[1]) else { return }
        let packets: [RTCPPacket]
        do throws(RTCPParseError) { packets = try RTCPPacket.parseCompound(bytes) } catch {
            shared.withLock { $0.stats.rtcpErrors += 1 }
            return
        }
        for p in packets {
            let now = monotonicNanoseconds()
            let ntpMiddle = RTPSession.ntpMiddle(RTPSender.ntpNow())
            let (action, onKeyFrame, onREMB) = shared.withLock { s in
                (s.responder.respond(to: p, now: now, ntpMiddle: ntpMiddle, stats: &s.stats), s.onKeyFrame, s.onREMB)
            }
            switch action {
            case .none: continue
            case .keyFrame: onKeyFrame?()
            case .bitrate(let bps):
                if configuration.transportWideCCExtensionID == nil { pace(bps) }
                onREMB?(bps)
            case .retransmit(let lost):
                shared.withLock { s in
                    s.lastCongestionNs = now // the receiver lost packets
                    s.stats.congestionSignals += 1
                }
                for seq in lost where !retransmit(seq, now: now) { break } // over budget: the rest of this NACK too
            case .transportFeedback(let fb):
                // The estimate goes to the bitrate handler when it moved by 5 %, when the path's delivery was first
                // measured (the media rate is the whole estimate from then on), or every 500 ms.
                let report = shared.withLock { s -> UInt64? in
                    let e = s.estimator.feedback(fb, nowUs: now / 1000)
                    s.stats.sendSideEstimate = UInt64(e)
                    s.stats.probesRaised = s.estimator.probesRaised
                    s.stats.probesLost = s.estimator.probesLost
                    s.stats.probesCapped = s.estimator.probesCapped
                    s.stats.deliveryCaps = s.estimator.deliveryCaps
                    s.stats.probesRaisedShort = s.estimator.probesRaisedShort
                    s.stats.trainsRaised = s.estimator.trainsRaised
                    s.stats.trainsMeasured = s.estimator.trainsMeasured
                    s.stats.lastTrainRate = s.estimator.lastTrainRate.map { UInt64($0) }
                    s.stats.lastProbeResult = s.estimator.lastProbeResult.map { UInt64($0) }
                    s.stats.queueDelayUs = s.estimator.queueDelayUs
                    s.stats.delayUsage = s.estimator.usage.rawValue
                    s.stats.transportLoss = s.estimator.lossFraction
                    if s.estimator.usage == .overusing || s.estimator.lossFraction > 0.02 {
                        s.lastCongestionNs = now
                        s.stats.congestionSignals += 1
                    }
                    let media = s.estimator.mediaRate
                    s.stats.sendSideMediaRate = UInt64(media)
                    let last = s.lastEstimateReported
                    guard abs(e - last.bps) * 20 >= last.bps || (media == e) != (last.media == last.bps) || now - last.atNs >= 500_000_000 else {
                        return nil
                    }
                    s.lastEstimateReported = (e, media, now)
                    return UInt64(e)
                }
                pace(shared.withLock { UInt64($0.estimator.estimate) })
                if let report { shared.withLock { $0.onREMB }?(report) }
            }
        }
    }

    /// Resends one NACKed packet if the history allows it (see `RetransmissionHistory.claim`), as RTX (RFC
    /// 4588) when configured. Returns false when the budget is spent (the caller stops there).
    private func retransmit(_ seq: UInt16, now: Int64) -> Bool {
        let numbering = numbersWholeFrames
        if numbering { frameNumbering.lock() }
        defer { if numbering { frameNumbering.unlock() } }
        var packet = [UInt8]()
        packet.reserveCapacity(configuration.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize + 2)
        let rtxPT = configuration.rtxPayloadType
        let (found, withinBudget) = shared.withLock { s -> (Bool, Bool) in
            // The RTT is the measured one, 5...500 ms, 100 ms before a measurement.
            let rttNs = Int64(min(500, max(5, s.stats.rttMs ?? 100)) * 1_000_000)
            switch s.history.claim(seq, extraBytes: rtxPT != nil ? 2 : 0, rttNs: rttNs, at: now) {
            case .ignored:
                s.stats.nacksIgnored += 1
                return (false, true)
            case .overBudget:
                s.stats.retransmissionsOverBudget += 1
                return (false, false)
            case .superseded:
                s.stats.nacksBeforeKeyFrame += 1
                return (false, true)
            case .resend(let slot):
                s.lastNACKNs = now // a NACK this sender could serve (not one for a packet never sent)
                let original = s.history.packet(at: slot)
                if rtxPT != nil {
                    rtxCopy(of: original, sequence: seq, into: &packet, s: &s)
                } else {
                    packet.append(contentsOf: original)
                }
                // A retransmission is a packet of its own to congestion control: a new transport-wide number.
                if let id = configuration.transportWideCCExtensionID,
                    let at = packet.withUnsafeBytes({ RTPHeader.oneByteExtensionOffset(id: id, in: $0) }), at + 2 <= packet.count
                {
                    let n = s.transportSequence
                    s.transportSequence &+= 1
                    packet[at] = UInt8(n >> 8)
                    packet[at + 1] = UInt8(n & 0xff)
                    s.estimator.packetSent(sequence: n, timeUs: now / 1000, bytes: packet.count)
                }
                s.stats.retransmissions += 1
                s.stats.retransmittedBytes += packet.count
                return (true, true)
            }
        }
        if found {
            packet.withUnsafeBytes { _ = transport.sendRTP($0) }
            pacer?.sent(packet.count)
        }
        return withinBudget
    }
}

/// The codes of `RTPError`.
extension ErrorCode where Domain == RTPError {
    /// A port, address or rate out of range (nothing was opened).
    public static var invalidConfiguration: Self { Self(rawValue: "invalid configuration") }
    /// A socket could not be made or bound (errno says why).
    public static var socketFailed: Self { Self(rawValue: "socket failed") }
    /// Sending failed (errno says why).
    public static var sendFailed: Self { Self(rawValue: "send failed") }
}
