import Foundation
@testable import RTP

/// A link shaped as `tc qdisc … tbf rate R burst B latency L` shapes it, on a simulated clock (µs): a token bucket
/// of `burstBytes` refilled at `rateBps`, in front of a FIFO that holds at most `queueLimitBytes` (tbf's limit:
/// rate × latency + burst), then `propagationUs` to the receiver. A packet the bucket covers leaves at line rate
/// (1 Gbit/s): a refilled bucket lets a burst through as if there were no limit, which is what fools estimators.
struct TokenBucketLink {
    /// The token rate, bit/s (change it with `setRate`).
    private(set) var rateBps: Int
    let burstBytes: Int
    let queueLimitBytes: Int
    let propagationUs: Int64
    /// Packets delivered and dropped (the queue was full), and when each drop happened (µs).
    private(set) var delivered = 0, dropped = 0
    private(set) var dropTimesUs: [Int64] = []
    private var tokens: Double
    private var tokensAtUs: Int64 = 0
    private var lastDepartureUs: Int64 = 0
    /// Packets still in the queue: when each leaves, and its size.
    private var backlog: [(departUs: Int64, bytes: Int)] = []
    private var backlogHead = 0, backlogBytes = 0

    /// tbf's parameters: the queue limit is `latencyMs` of the rate plus the burst, as tc computes it.
    init(rateBps: Int, burstBytes: Int, latencyMs: Int, propagationUs: Int64 = 20_000) {
        self.rateBps = rateBps
        self.burstBytes = burstBytes
        queueLimitBytes = rateBps / 8 * latencyMs / 1000 + burstBytes
        self.propagationUs = propagationUs
        tokens = Double(burstBytes)
    }

    /// From `atUs` on the bucket fills at `bps` (the queue limit stays).
    mutating func setRate(_ bps: Int, atUs: Int64) {
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
    mutating func send(bytes: Int, atUs: Int64) -> Int64? {
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

/// A sender as `RTPSender` sends with transport-cc, RTX and a pacer, on a simulated clock against a
/// `TokenBucketLink`: 30 frames a second of the encoder's rate (`encoderFill` of the estimate, within `maxMediaBps`; a key frame
/// every `keyIntervalUs`, 4 × a frame's bytes, its first `RTPSender.keyFrameTrainPackets` packets at once), the
/// rest paced by a `PacingBudget` at 2.5 × the estimate; probe clusters from the estimator spread over `probeFrames`
/// as RTX copies sent at once; transport feedback from the receiver every 50 ms (the highest arrived packet and
/// every one before it), back over the same propagation delay, into the `SendSideBandwidthEstimator`.
struct LinkSimulation {
    var link: TokenBucketLink
    var estimator: SendSideBandwidthEstimator
    var maxMediaBps = 4_000_000
    var keyIntervalUs: Int64 = 3_000_000
    var packetBytes = 1200
    /// What the encoder makes of its target: a quiet scene undershoots it (0.6), leaving the link idle and the
    /// token bucket full; each frame varies by ±30 % around it.
    var encoderFill = 0.6
    /// The cap a viewer's tier puts on its media, from its estimate (`TierLadder`; default `maxMediaBps`), at each
    /// report; a change is a tier move, which starts with a key frame.
    var mediaCap: ((_ estimate: Int, _ nowUs: Int64) -> Int)?
    /// The queue delay every packet met on the link (µs), as (send time, delay).
    private(set) var queueTrace: [(sendUs: Int64, delayUs: Int64)] = []
    private var rng = SplitMix(seed: 39)
    /// The frames a probe is spread over (`RTPSender.probeFrames`).
    var probeFrames = RTPSender.probeFrames
    /// The estimate every 50 ms: (seconds, bit/s).
    private(set) var trace: [(t: Double, estimate: Int)] = []
    /// Simulated time, µs.
    private(set) var nowUs: Int64 = 0
    /// Probe clusters started.
    private(set) var probes = 0

    private var encoderBps: Int
    private var lastCap = 0
    private var lastReport = (bps: 0, atUs: Int64(0))
    private var budget = PacingBudget(maxPacket: 1240)
    private var queue: [Int] = [] // paced packets' sizes
    private var queueHead = 0, queuedBytes = 0
    private var transportSequence: UInt16 = 0
    /// Sent, not yet reported: sequence and arrival time (nil: dropped).
    private var inFlight: [(seq: UInt16, arrivalUs: Int64?)] = []
    private var pendingFeedback: [(atUs: Int64, fb: TransportFeedback)] = []
    private var feedbackCount: UInt8 = 0
    private var nextFrameUs: Int64 = 0, nextKeyUs: Int64 = 0, nextFeedbackUs: Int64 = 50_000, nextSampleUs: Int64 = 0
    private var probe: (id: UInt8, bytes: Int, frames: Int, skipped: Int)?

    init(link: TokenBucketLink, startBps: Int = 1_000_000) {
        self.link = link
        estimator = SendSideBandwidthEstimator(configuration: .init(minBitrate: 50_000, maxBitrate: 20_000_000, startBitrate: startBps))
        encoderBps = estimator.mediaRate
        budget.rateBps = startBps * 5 / 2
    }

    /// Runs until `endUs`, calling `schedule` before each event (to change the link's rate).
    mutating func run(until endUs: Int64, schedule: (inout TokenBucketLink, Int64) -> Void = { _, _ in }) {
        while nowUs < endUs {
            let paceAt = queueHead < queue.count ? nowUs + (budget.waitNs(queuedBytes: queuedBytes).map { $0 / 1000 + 1 } ?? 0) : Int64.max
            let t = min(nextFrameUs, nextFeedbackUs, nextSampleUs, pendingFeedback.first?.atUs ?? .max, max(paceAt, nowUs))
            nowUs = t
            schedule(&link, t)
            budget.refill(atNs: t * 1000, queuedBytes: queuedBytes)
            if let f = pendingFeedback.first, f.atUs == t {
                pendingFeedback.removeFirst()
                takeFeedback(f.fb)
            } else if t == nextSampleUs {
                trace.append((Double(t) / 1e6, estimator.estimate))
                nextSampleUs += 50_000
            } else if t == nextFrameUs {
                frame()
                nextFrameUs += 33_333
            } else if t == nextFeedbackUs {
                sendFeedback()
                nextFeedbackUs += 50_000
            } else if queueHead < queue.count, budget.waitNs(queuedBytes: queuedBytes) == nil {
                let bytes = queue[queueHead]
                queueHead += 1
                queuedBytes -= bytes
                budget.charge(bytes)
                transmit(bytes, cluster: probe?.id ?? 0)
                if queueHead == queue.count {
                    queue.removeAll(keepingCapacity: true)
                    queueHead = 0
                }
            }
        }
    }

    /// One packet onto the link now, numbered and remembered as the estimator is told.
    private mutating func transmit(_ bytes: Int, cluster: UInt8) {
        estimator.packetSent(sequence: transportSequence, timeUs: nowUs, bytes: bytes, probeCluster: cluster)
        let arrival = link.send(bytes: bytes, atUs: nowUs)
        if let arrival { queueTrace.append((nowUs, arrival - nowUs - link.propagationUs)) }
        inFlight.append((transportSequence, arrival))
        transportSequence &+= 1
    }

    private mutating func frame() {
        let key = nowUs >= nextKeyUs
        if key { nextKeyUs = nowUs + keyIntervalUs }
        let quiet = !key && queueHead == queue.count
        if quiet, probe == nil, let p = estimator.startProbe(nowUs: nowUs) {
            probe = (p.cluster, p.bytes, probeFrames, 0)
            probes += 1
        }
        if key { // what is queued of earlier frames goes unsent
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
            queuedBytes = 0
        }
        var bytes = Int(Double(max(200, encoderBps / 8 / 30) * (key ? 4 : 1)) * encoderFill * (0.7 + 0.6 * rng.unit()))
        var train = key ? RTPSender.keyFrameTrainPackets : 0
        let frameBytes = bytes
        while bytes > 0 {
            let size = min(bytes, packetBytes) + 40
            bytes -= size - 40
            if train > 0 {
                train -= 1
                budget.charge(size)
                transmit(size, cluster: probe?.id ?? 0)
            } else {
                queue.append(size)
                queuedBytes += size
            }
        }
        guard var p = probe else { return }
        if quiet {
            var sent = 0
            let quota = p.bytes / max(1, p.frames) - frameBytes
            p.bytes -= min(p.bytes, frameBytes)
            while sent < quota {
                let size = packetBytes + 44
                budget.charge(size)
                transmit(size, cluster: p.id)
                sent += size
            }
            p.bytes -= min(p.bytes, sent)
            p.frames -= 1
        } else {
            p.skipped += 1
        }
        if p.frames <= 0 || p.skipped >= 10 {
            estimator.endProbe()
            probe = nil
        } else {
            probe = p
        }
    }

    /// The receiver's feedback: every packet up to the highest one arrived by now.
    private mutating func sendFeedback() {
        guard let last = inFlight.lastIndex(where: { ($0.arrivalUs ?? .max) <= nowUs }) else { return }
        let covered = inFlight[...last]
        let fb = TransportFeedback(
            senderSSRC: 1, mediaSSRC: 2, baseSequence: covered.first!.seq, feedbackCount: feedbackCount, arrivals: covered.map(\.arrivalUs))
        inFlight.removeFirst(last + 1)
        feedbackCount &+= 1
        // Through the wire format, as a receiver sends it (arrival times at 250 µs).
        let parsed = fb.serialized().withUnsafeBytes { TransportFeedback($0) }!
        pendingFeedback.append((nowUs + link.propagationUs, parsed))
    }

    /// Feedback in: the estimate, the pacing rate and (moved by 5 %, or every 500 ms) the encoder's rate (the
    /// estimator's media rate, as `RTPSender` reports it).
    private mutating func takeFeedback(_ fb: TransportFeedback) {
        let full = estimator.feedback(fb, nowUs: nowUs)
        budget.rateBps = full * 5 / 2
        let e = estimator.mediaRate
        if abs(e - lastReport.bps) * 20 >= lastReport.bps || nowUs - lastReport.atUs >= 500_000 {
            lastReport = (e, nowUs)
            let cap = mediaCap?(full, nowUs) ?? maxMediaBps
            if cap != lastCap { // a tier move: the new tier starts with a key frame
                if lastCap != 0 { nextKeyUs = nowUs }
                lastCap = cap
            }
            encoderBps = min(e, cap)
        }
    }
}

/// Figures of a trace between two times (seconds).
struct TraceFigures: CustomStringConvertible {
    var max = 0, median = 0
    /// The longest stretch above `over`, and all the time above it (seconds).
    var longestAbove = 0.0, totalAbove = 0.0
    init(_ trace: [(t: Double, estimate: Int)], from: Double, to: Double, over: Int) {
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
    var description: String {
        "max \(max / 1000) kbit/s, median \(median / 1000) kbit/s, above the bound \(String(format: "%.2f", totalAbove)) s (longest \(String(format: "%.2f", longestAbove)) s)"
    }
}

/// The tier ladder of a 1280x720 broadcast as `TierPolicy` runs it for one viewer (720p up to 2250 kbit/s, 360p up to
/// 700, 180p up to 200): a `LinkSimulation.mediaCap` placing the viewer by its estimate. `beside`: another viewer holds
/// the full tier at its maximum (the viewer never joins it); else the viewer is alone and stays on 720p down to
/// 690 kbit/s (1.15 × its 600 kbit/s minimum).
final class TierLadder: @unchecked Sendable {
    private(set) var tier = 0
    /// Each move: when (seconds) and to which tier.
    private(set) var moves: [(t: Double, tier: Int)] = []
    private var since: Int64 = 0, upSince: Int64?
    private let caps = [2_250_000, 700_000, 200_000]
    private let beside: Bool
    init(beside: Bool) { self.beside = beside }

    /// The viewer's media cap for `estimate` at `nowUs` (down at once, up after 0.5 s of room and 2 s on a tier).
    func cap(_ estimate: Int, _ nowUs: Int64) -> Int {
        let e = Double(estimate)
        var target = tier
        if tier == 0 && (beside || e < 690_000) {
            target = e >= 172_500 ? 1 : 2
        } else if tier == 1 && e < 172_500 {
            target = 2
        } else if (tier == 2 && e >= 195_000) || (!beside && tier == 1 && e >= 780_000) {
            let s = upSince ?? nowUs
            upSince = s
            if nowUs - s >= 500_000 && nowUs - since >= 2_000_000 { target = tier - 1 }
        } else {
            upSince = nil
        }
        if target != tier {
            (tier, since, upSince) = (target, nowUs, nil)
            moves.append((Double(nowUs) / 1e6, target))
        }
        return caps[tier]
    }
}
