/// Congestion control for one sender, as a unit (send-side, transport-cc): the one stamper of transport-wide
/// sequence numbers, the `SendSideBandwidthEstimator` its feedback feeds, the `ProbeScheduler`, and the signs of
/// congestion that set the playout delay. The sender calls it at its single exit (`packetLeaving`), at each frame
/// (`frameStarts`, `frameSent`, `frameDone`) and with each transport feedback (`feedback`); the pacer's queue and
/// budget are `PacingController`'s. A value on time passed in: not thread-safe (the sender keeps it under its
/// lock); the link-simulation tests run it, inside the production sender, on a simulated clock.
package struct CongestionController: Sendable {
    /// What leaves the sender's exit.
    package enum Departure: Sendable {
        /// A media packet (its first transmission): part of the probe cluster being sent, if any.
        case media
        /// A probe packet (an RTX copy) of the cluster being sent.
        case probe
        /// A retransmission for a NACK: a packet of its own to congestion control, in no cluster.
        case retransmission
    }

    /// Numbers the packets (nil without transport-cc).
    package private(set) var stamper: TransportSequenceStamper?
    /// The send-side estimate from transport feedback.
    package private(set) var estimator: SendSideBandwidthEstimator
    /// When probe packets go out.
    package private(set) var prober: ProbeScheduler
    /// Whether probe clusters are sent: transport-cc with RTX, whose copies make the probe packets.
    package let probing: Bool
    /// The controller's own counts (the estimator's are read at each snapshot, `fill`).
    private var probes = 0, probePackets = 0, congestionSignals = 0, packetsDroppedBeforeKeyFrame = 0
    /// The last sign of congestion (monotonic ns).
    private var lastCongestionNs: Int64 = .min / 2
    /// The estimate last reported to the owner: bit/s, the media rate then, and when (ns).
    private var lastEstimateReported: (bps: Int, media: Int, atNs: Int64) = (0, 0, .min / 2)

    /// Congestion control for packets carrying the transport-wide number under `extensionID` (nil: none, and then
    /// no estimate), probing when `probing` (RTX is negotiated), each probe spread over `probeFrames` frames.
    package init(extensionID: UInt8?, probing: Bool, probeFrames: Int, estimation: SendSideBandwidthEstimator.Configuration) {
        stamper = extensionID.map { TransportSequenceStamper(extensionID: $0) }
        self.probing = extensionID != nil && probing
        prober = ProbeScheduler(frames: probeFrames)
        estimator = SendSideBandwidthEstimator(configuration: estimation)
    }

    /// The estimate (bit/s): the pacing rate follows it.
    package var estimate: Int { estimator.estimate }

    /// The sender's single exit, for every RTP packet as it leaves at `nowNs`: the next transport-wide number
    /// written into `packet`, the estimator told (media and probe packets tagged with the cluster being sent).
    package mutating func packetLeaving(_ packet: inout [UInt8], as kind: Departure, nowNs: Int64) {
        if let n = stamper?.stamp(&packet) {
            let cluster = kind == .retransmission ? 0 : prober.clusterID
            estimator.packetSent(sequence: n, timeUs: nowNs / 1000, bytes: packet.count, probeCluster: cluster)
        }
        if kind == .probe {
            probePackets += 1
            prober.probePacketSent(bytes: packet.count)
        }
    }

    /// A frame starts at `nowNs`: a probe cluster the estimator has due starts with it when it may carry one
    /// (`mayProbe`: not a key frame, nothing queued). Returns the cluster being sent (0: none).
    package mutating func frameStarts(mayProbe: Bool, nowNs: Int64) -> UInt8 {
        guard stamper != nil else { return 0 }
        if prober.frameStarts(mayStart: probing && mayProbe, estimator: &estimator, nowUs: nowNs / 1000) { probes += 1 }
        return prober.clusterID
    }

    /// The frame's own packets left (`bytes` of them): the probe packets to add now, if any (none when `skip`).
    package mutating func frameSent(bytes: Int, skip: Bool) -> ProbeScheduler.Request? { prober.frameSent(bytes: bytes, skip: skip) }

    /// The frame's probe packets left (or it was `skipped`): a complete cluster is ended for the estimator.
    package mutating func frameDone(skipped: Bool) {
        if prober.frameDone(skipped: skipped) { estimator.endProbe() }
    }

    /// Takes a transport feedback at `nowNs`. Overuse or over 2 % loss is a sign of congestion. Returns the estimate
    /// (bit/s) for the owner when it moved by 5 %, when the path's delivery was first measured (the media rate is
    /// the whole estimate from then on), or 500 ms after the last report; else nil.
    package mutating func feedback(_ fb: TransportFeedback, nowNs now: Int64) -> UInt64? {
        let e = estimator.feedback(fb, nowUs: now / 1000)
        if estimator.usage == .overusing || estimator.lossFraction > 0.02 { congestionSignal(atNs: now) }
        let media = estimator.mediaRate
        let last = lastEstimateReported
        guard abs(e - last.bps) * 20 >= last.bps || (media == e) != (last.media == last.bps) || now - last.atNs >= 500_000_000 else {
            return nil
        }
        lastEstimateReported = (e, media, now)
        return UInt64(e)
    }

    /// A sign of congestion at `nowNs` (a NACK, or one a feedback showed).
    package mutating func congestionSignal(atNs now: Int64) {
        lastCongestionNs = now
        congestionSignals += 1
    }

    /// Whether a sign of congestion came within `holdNs` before `nowNs`.
    package func congested(atNs now: Int64, holdNs: Int64) -> Bool { now - lastCongestionNs < holdNs }

    /// `n` queued packets were dropped for a key frame.
    package mutating func droppedBeforeKeyFrame(_ n: Int) { packetsDroppedBeforeKeyFrame += n }

    /// The figures into `c` (all but `transportFeedbacks`, which the RTCP responder counts).
    package func fill(_ c: inout CongestionStatistics) {
        let e = estimator, measured = e.feedbacks > 0
        c.sendSideEstimate = measured ? UInt64(e.estimate) : nil
        c.sendSideMediaRate = measured ? UInt64(e.mediaRate) : nil
        c.delayUsage = measured ? e.usage.rawValue : nil
        c.transportLoss = measured ? e.lossFraction : nil
        (c.probes, c.probePackets, c.probesRaised, c.probesLost) = (probes, probePackets, e.probesRaised, e.probesLost)
        (c.probesOnClearedQueue, c.probesCapped, c.deliveryCaps) = (e.probesOnClearedQueue, e.probesCapped, e.deliveryCaps)
        (c.probesRaisedShort, c.trainsRaised, c.trainsMeasured) = (e.probesRaisedShort, e.trainsRaised, e.trainsMeasured)
        (c.lastTrainRate, c.lastProbeResult) = (e.lastTrainRate.map { UInt64($0) }, e.lastProbeResult.map { UInt64($0) })
        c.queueDelayUs = e.queueDelayUs
        (c.congestionSignals, c.packetsDroppedBeforeKeyFrame) = (congestionSignals, packetsDroppedBeforeKeyFrame)
    }
}

/// The one writer of transport-wide sequence numbers (draft-holmer-rmcat-transport-wide-cc-extensions): every
/// packet that leaves the sender, media, probe or retransmission, takes the next one as it leaves, so that numbers
/// follow the order packets leave in (the estimator's delay groups assume it).
package struct TransportSequenceStamper: Sendable {
    /// The negotiated extension id (1…14).
    package let extensionID: UInt8
    /// The number the next packet takes.
    package private(set) var next: UInt16 = 0

    /// A stamper for the extension under `extensionID`, from 0.
    package init(extensionID: UInt8) { self.extensionID = extensionID }

    /// Writes the next number into `packet`'s transport-wide extension and returns it; nil (no number taken) when
    /// the packet carries no such extension.
    package mutating func stamp(_ packet: inout [UInt8]) -> UInt16? {
        guard let at = packet.withUnsafeBytes({ RTPHeader.oneByteExtensionOffset(id: extensionID, in: $0) }), at + 2 <= packet.count
        else { return nil }
        let n = next
        next &+= 1
        packet[at] = UInt8(n >> 8)
        packet[at + 1] = UInt8(n & 0xff)
        return n
    }
}

/// What congestion control did for one sender, read with `RTPSender.statistics.congestion` (a snapshot): the
/// send-side estimate and what led to it (transport feedback, probes, packet trains, the path's queue), and the
/// signs of congestion that set the playout delay.
public struct CongestionStatistics: Sendable, Equatable {
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
    /// Signs of congestion seen (overuse or loss over 2 % in a transport feedback, or a NACK).
    public var congestionSignals = 0
    /// No feedback yet: every count 0, every figure nil.
    public init() {}
}
