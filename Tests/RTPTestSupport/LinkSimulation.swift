import Synchronization
import H264
import TestSupport
public import RTP

/// A link shaped as `tc qdisc … tbf rate R burst B latency L` shapes it, on a simulated clock (µs): a token bucket
/// of `burstBytes` refilled at `rateBps`, in front of a FIFO that holds at most `queueLimitBytes` (tbf's limit:
/// rate × latency + burst), then `propagationUs` to the receiver. A packet the bucket covers leaves at line rate
/// (1 Gbit/s): a refilled bucket lets a burst through as if there were no limit, which is what fools estimators.
public struct TokenBucketLink: Sendable {
    /// The token rate, bit/s (change it with `setRate`).
    public private(set) var rateBps: Int
    /// The bucket's depth and the queue's limit (bytes), and the delay after the queue (µs).
    public let burstBytes: Int, queueLimitBytes: Int, propagationUs: Int64
    /// Packets delivered and dropped (the queue was full), and when each drop happened (µs).
    public private(set) var delivered = 0, dropped = 0
    /// When each drop happened (µs).
    public private(set) var dropTimesUs: [Int64] = []
    private var tokens: Double
    private var tokensAtUs: Int64 = 0
    private var lastDepartureUs: Int64 = 0
    /// Packets still in the queue: when each leaves, and its size.
    private var backlog: [(departUs: Int64, bytes: Int)] = []
    private var backlogHead = 0, backlogBytes = 0

    /// tbf's parameters: the queue limit is `latencyMs` of the rate plus the burst, as tc computes it.
    public init(rateBps: Int, burstBytes: Int, latencyMs: Int, propagationUs: Int64 = 20_000) {
        self.rateBps = rateBps
        self.burstBytes = burstBytes
        queueLimitBytes = rateBps / 8 * latencyMs / 1000 + burstBytes
        self.propagationUs = propagationUs
        tokens = Double(burstBytes)
    }

    /// From `atUs` on the bucket fills at `bps` (the queue limit stays).
    public mutating func setRate(_ bps: Int, atUs: Int64) {
        refill(to: max(atUs, tokensAtUs))
        rateBps = bps
    }

    private mutating func refill(to t: Int64) {
        guard t > tokensAtUs else { return }
        tokens = min(Double(burstBytes), tokens + Double(t - tokensAtUs) * Double(rateBps) / 8e6)
        tokensAtUs = t
    }

    /// A packet of `bytes` handed to the link at `atUs`: when it reaches the receiver, or nil when the queue
    /// dropped it.
    public mutating func send(bytes: Int, atUs: Int64) -> Int64? {
        while backlogHead < backlog.count && backlog[backlogHead].departUs <= atUs {
            backlogBytes -= backlog[backlogHead].bytes
            backlogHead += 1
        }
        if backlogHead > 1024 {
            backlog.removeFirst(backlogHead)
            backlogHead = 0
        }
        guard backlogBytes + bytes <= queueLimitBytes else {
            dropped += 1
            dropTimesUs.append(atUs)
            return nil
        }
        let start = max(atUs, lastDepartureUs)
        refill(to: start)
        var depart = start
        if tokens < Double(bytes) {
            depart += Int64((Double(bytes) - tokens) * 8e6 / Double(rateBps)) + 1
            refill(to: depart)
        }
        tokens -= Double(bytes)
        depart += Int64(bytes * 8 / 1000) // line rate, 1 Gbit/s
        lastDepartureUs = depart
        backlog.append((depart, bytes))
        backlogBytes += bytes
        delivered += 1
        return depart + propagationUs
    }
}

/// A clock the simulation sets: the sender and its pacer read it instead of the monotonic clock.
public final class SimulatedClock: SenderClock {
    private let now = Atomic<Int64>(0)
    /// A clock at 0.
    public init() {}
    /// Now (ns).
    public var nowNs: Int64 { now.load(ordering: .relaxed) }
    /// A fixed offset: the simulation's NTP times start in 1970.
    public var realtimeMinusMonotonicNs: Int64 { 0 }
    /// Moves the clock to `ns`.
    public func set(_ ns: Int64) { now.store(ns, ordering: .relaxed) }
}

/// The production `RTPSender` (transport-cc, RTX, pacing at 2.5 × the estimate: a WebRTC viewer's configuration)
/// on a `SimulatedClock`, its pacer on a loop without a thread, its packets onto a `TokenBucketLink`. The test plays
/// the encoder and the receiver: 30 frames a second of the encoder's rate (`encoderFill` of the rate the sender
/// last reported, within `maxMediaBps` or the viewer's tier, `mediaCap`), a key frame every `keyIntervalUs` (4 × a
/// frame's bytes); transport feedback every 50 ms (the highest arrived packet and every one before it) back over
/// the same propagation delay, through the wire format into `handleRTCP`. Everything between (numbering, probes,
/// the key frame's train, the pacer, the estimator) is the shipped code's.
public final class LinkSimulation: @unchecked Sendable {
    // @unchecked: one thread runs the simulation (`run`); the sender calls back into it synchronously.
    /// The link, as the simulation left it.
    public private(set) var link: TokenBucketLink
    /// The sender under test.
    public private(set) var sender: RTPSender!
    /// The encoder's ceiling (bit/s), and its key-frame interval (µs).
    public var maxMediaBps = 4_000_000, keyIntervalUs: Int64 = 3_000_000
    /// What the encoder makes of its target: a quiet scene undershoots it (0.6), leaving the link idle and the
    /// token bucket full; each frame varies by ±30 % around it.
    public var encoderFill = 0.6
    /// The cap a viewer's tier puts on its media, from its estimate (default `maxMediaBps`), at each report; a
    /// change is a tier move, which starts with a key frame.
    public var mediaCap: ((_ estimate: Int, _ nowUs: Int64) -> Int)?
    /// The queue delay every packet met on the link (µs), as (send time, delay).
    public private(set) var queueTrace: [(sendUs: Int64, delayUs: Int64)] = []
    /// The estimate every 50 ms: (seconds, bit/s).
    public private(set) var trace: [(t: Double, estimate: Int)] = []
    /// Simulated time, µs.
    public private(set) var nowUs: Int64 = 0
    /// Bytes a packet takes on the link besides its RTP bytes: IPv4 and UDP headers and SRTP's tag.
    public static let linkOverhead = 38

    private let clock = SimulatedClock()
    private let loop = PacerLoop(threaded: false)
    private let startBps: Int
    private var rng = SplitMix(seed: 39)
    private var encoderBps: Int
    private var lastCap = 0
    /// Sent, not yet reported: transport-wide sequence and arrival time (nil: dropped).
    private var inFlight: [(seq: UInt16, arrivalUs: Int64?)] = []
    private var pendingFeedback: [(atUs: Int64, bytes: [UInt8])] = []
    private var feedbackCount: UInt8 = 0
    private var nextFrameUs: Int64 = 0, nextKeyUs: Int64 = 0, nextFeedbackUs: Int64 = 50_000, nextSampleUs: Int64 = 0
    private var frameIndex: Int64 = 0
    private static let twccID: UInt8 = 3

    /// A sender starting at `startBps` behind `link`.
    public init(link: TokenBucketLink, startBps: Int = 1_000_000) {
        self.link = link
        self.startBps = startBps
        var c = RTPSender.Configuration(host: "192.0.2.1", port: 5004)
        c.rtxPayloadType = 97
        c.transportWideCCExtensionID = Self.twccID
        c.sendSideEstimation = .init(minBitrate: 50_000, maxBitrate: 20_000_000, startBitrate: startBps)
        c.pacingFactor = 2.5
        c.keyFrameSupersedesEarlierPackets = true
        encoderBps = c.sendSideEstimation.startMediaRate
        sender = try! RTPSender(configuration: c, transport: Wire(self), clock: clock, pacerLoop: loop)
        sender.setFeedbackHandlers(keyFrameRequest: nil) { [weak self] bps in self?.reported(Int(clamping: bps)) }
    }

    // The sender's pacer leaves its loop (its last packets go nowhere: the simulation is over).
    deinit { sender.close() }

    /// The sender's congestion figures now.
    public var congestion: CongestionStatistics { sender.statistics.congestion }

    /// Runs until `endUs`, calling `schedule` before each event (to change the link's rate).
    public func run(until endUs: Int64, schedule: (inout TokenBucketLink, Int64) -> Void = { _, _ in }) {
        var paceAt: Int64? = nil
        while nowUs < endUs {
            let t = max(nowUs, min(nextFrameUs, nextFeedbackUs, nextSampleUs, pendingFeedback.first?.atUs ?? .max, paceAt ?? .max))
            nowUs = t
            clock.set(t * 1000)
            schedule(&link, t)
            if let f = pendingFeedback.first, f.atUs == t {
                pendingFeedback.removeFirst()
                f.bytes.withUnsafeBytes { sender.handleRTCP($0) }
            } else if t == nextSampleUs {
                trace.append((Double(t) / 1e6, congestion.sendSideEstimate.map { Int($0) } ?? startBps))
                nextSampleUs += 50_000
            } else if t == nextFrameUs {
                frame()
                nextFrameUs += 33_333
            } else if t == nextFeedbackUs {
                sendFeedback()
                nextFeedbackUs += 50_000
            }
            paceAt = loop.service().map { t + $0 / 1000 + 1 } // the pacer's round: what is due leaves now
        }
    }

    /// One packet onto the link now (the sender's transport).
    fileprivate func transmit(_ packet: UnsafeRawBufferPointer) {
        guard let at = RTPHeader.oneByteExtensionOffset(id: Self.twccID, in: packet), at + 2 <= packet.count else { return }
        let seq = UInt16(packet[at]) << 8 | UInt16(packet[at + 1])
        let arrival = link.send(bytes: packet.count + Self.linkOverhead, atUs: nowUs)
        if let arrival { queueTrace.append((nowUs, arrival - nowUs - link.propagationUs)) }
        inFlight.append((seq, arrival))
    }

    /// The encoder's next access unit: one slice NAL of the frame's size (an IDR one at a key frame).
    private func frame() {
        let key = nowUs >= nextKeyUs
        if key { nextKeyUs = nowUs + keyIntervalUs }
        let bytes = Int(Double(max(200, encoderBps / 8 / 30) * (key ? 4 : 1)) * encoderFill * (0.7 + 0.6 * rng.unit()))
        var f = EncodedFrame()
        f.data = [0, 0, 0, 1, key ? 0x65 : 0x41] + [UInt8](repeating: 0xa5, count: max(1, bytes - 1))
        f.nalUnits = [NALUnit(type: key ? .idr : .slice, offset: 4, length: f.data.count - 4)]
        f.isKeyFrame = key
        f.timestampNs = frameIndex * 33_333_333
        frameIndex += 1
        try? sender.send(f)
    }

    /// The receiver's feedback: every packet up to the highest one arrived by now, through the wire format.
    private func sendFeedback() {
        guard let last = inFlight.lastIndex(where: { ($0.arrivalUs ?? .max) <= nowUs }) else { return }
        let covered = inFlight[...last]
        let fb = TransportFeedback(
            senderSSRC: 1, mediaSSRC: sender.ssrc, baseSequence: covered.first!.seq, feedbackCount: feedbackCount,
            arrivals: covered.map(\.arrivalUs))
        inFlight.removeFirst(last + 1)
        feedbackCount &+= 1
        pendingFeedback.append((nowUs + link.propagationUs, fb.serialized()))
    }

    /// The sender reported its estimate (moved by 5 %, or 500 ms on): the encoder follows the media rate, within the
    /// viewer's tier (a move starts with a key frame).
    private func reported(_ estimate: Int) {
        let media = congestion.sendSideMediaRate.map { Int($0) } ?? estimate
        let cap = mediaCap?(estimate, nowUs) ?? maxMediaBps
        if cap != lastCap {
            if lastCap != 0 { nextKeyUs = nowUs }
            lastCap = cap
        }
        encoderBps = min(media, cap)
    }
}

/// The sender's transport in the simulation: each RTP packet onto the link.
private final class Wire: RTPTransport, @unchecked Sendable {
    // @unchecked: used only on the simulation's thread.
    weak var simulation: LinkSimulation?
    init(_ simulation: LinkSimulation) { self.simulation = simulation }
    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 {
        simulation?.transmit(packet)
        return 0
    }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { 0 }
}

/// Figures of a trace between two times (seconds).
public struct TraceFigures: CustomStringConvertible, Sendable {
    /// The highest and the median estimate (bit/s).
    public var max = 0, median = 0
    /// The longest stretch above `over`, and all the time above it (seconds).
    public var longestAbove = 0.0, totalAbove = 0.0
    /// The figures of `trace` from `from` to `to`, against `over`.
    public init(_ trace: [(t: Double, estimate: Int)], from: Double, to: Double, over: Int) {
        let part = trace.filter { $0.t >= from && $0.t < to }
        let sorted = part.map(\.estimate).sorted()
        max = sorted.last ?? 0
        median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        var start: Double?
        for s in part {
            if s.estimate > over {
                totalAbove += 0.05
                start = start ?? s.t
                longestAbove = Swift.max(longestAbove, s.t - start!)
            } else {
                start = nil
            }
        }
    }
    /// The figures in kbit/s and seconds.
    public var description: String {
        "max \(max / 1000) kbit/s, median \(median / 1000) kbit/s, above the bound \(seconds(totalAbove)) s (longest \(seconds(longestAbove)) s)"
    }
    private func seconds(_ s: Double) -> String { "\(Double(Int((s * 100).rounded())) / 100)" }
}
