import Foundation
import Testing
import RTP
import TestSupport

/// A bottleneck link, simulated: packets leave the sender in 5 ms bursts per frame (30 fps, the estimate's worth
/// each), queue behind a token bucket of `capacity(t)` bit/s with 20 ms of propagation each way, are dropped
/// when the queue holds more than 300 ms (and with probability `loss`), and the receiver sends transport
/// feedback every 50 ms. Returns the estimate every 100 ms.
func simulate(
    seconds: Double, start: Int = 1_000_000, capacity: (Double) -> Double, loss: Double = 0, seed: UInt64 = 7,
    estimator: inout SendSideBandwidthEstimator
) -> [(t: Double, estimate: Int, usage: SendSideBandwidthEstimator.Usage)] {
    var rng = SplitMix(seed: seed)
    var seq: UInt16 = 0, reported: UInt16 = 0
    var inFlight: [(seq: UInt16, arrivalUs: Int64?)] = [] // not yet reported, in order
    var linkFreeUs: Int64 = 0
    var pendingFeedback: [(atUs: Int64, fb: TransportFeedback)] = []
    var out: [(Double, Int, SendSideBandwidthEstimator.Usage)] = []
    let endUs = Int64(seconds * 1e6)
    var nextFrameUs: Int64 = 0, nextFeedbackUs: Int64 = 50_000, nextSampleUs: Int64 = 0
    var count: UInt8 = 0
    var now: Int64 = 0
    while now < endUs {
        now = min(nextFrameUs, nextFeedbackUs, nextSampleUs, pendingFeedback.first?.atUs ?? .max)
        if let f = pendingFeedback.first, f.atUs == now {
            pendingFeedback.removeFirst()
            estimator.feedback(f.fb, nowUs: now)
            continue
        }
        if now == nextSampleUs {
            out.append((Double(now) / 1e6, estimator.estimate, estimator.usage))
            nextSampleUs += 100_000
            continue
        }
        if now == nextFrameUs {
            nextFrameUs += 33_333
            let bytes = max(1200, estimator.estimate / 8 / 30)
            let packets = (bytes + 1199) / 1200
            for k in 0..<packets {
                let sendUs = now + Int64(k) * 5_000 / Int64(packets)
                estimator.packetSent(sequence: seq, timeUs: sendUs, bytes: 1200)
                let c = capacity(Double(sendUs) / 1e6)
                let serviceUs = Int64(1200.0 * 8 / c * 1e6)
                let queueUs = max(0, linkFreeUs - (sendUs + 20_000))
                var arrival: Int64? = nil
                if queueUs <= 300_000 && rng.unit() >= loss {
                    linkFreeUs = max(linkFreeUs, sendUs + 20_000) + serviceUs
                    arrival = linkFreeUs
                }
                inFlight.append((seq, arrival))
                seq &+= 1
            }
            continue
        }
        // Feedback at `now`: everything up to the last packet that has arrived by now.
        nextFeedbackUs += 50_000
        guard let last = inFlight.lastIndex(where: { ($0.arrivalUs ?? .max) <= now }) else { continue }
        let covered = inFlight[...last]
        inFlight.removeFirst(last + 1)
        let fb = TransportFeedback(
            senderSSRC: 1, mediaSSRC: 2, baseSequence: reported, feedbackCount: count, arrivals: covered.map { $0.arrivalUs })
        count &+= 1
        reported &+= UInt16(covered.count)
        // Through the wire format, as a receiver would send it.
        let bytes = fb.serialized()
        let parsed = bytes.withUnsafeBytes { TransportFeedback($0) }!
        pendingFeedback.append((now + 20_000, parsed))
    }
    return out
}

@Suite struct BandwidthEstimatorTests {
    @Test func feedbackRoundTripsThroughItsWireFormat() throws {
        let arrivals: [Int64?] = [1_000_000, nil, 1_000_250, 1_063_750, 1_000_500, nil, nil, 2_500_000]
        let fb = TransportFeedback(senderSSRC: 7, mediaSSRC: 9, baseSequence: 65_533, feedbackCount: 200, arrivals: arrivals)
        let bytes = fb.serialized()
        #expect(bytes.count % 4 == 0 && bytes[0] == 0x8f && bytes[1] == 205)
        let parsed = try #require(bytes.withUnsafeBytes { TransportFeedback($0) })
        // Times come back to 250 µs, relative to the 64 ms reference: the differences are what matter.
        let back = parsed.arrivals.map { $0.map { $0 - parsed.arrivals[0]! } }
        #expect(back == arrivals.map { $0.map { $0 - 1_000_000 } }, "\(back)")
        #expect(parsed.baseSequence == 65_533 && parsed.feedbackCount == 200 && parsed.senderSSRC == 7 && parsed.mediaSSRC == 9)
    }

    @Test func runLengthAndOneBitChunksAreRead() throws {
        // base 100, 20 packets: a run of 6 received (small), a 1-bit vector of 14 (alternating), deltas of 1 tick.
        var m: [UInt8] = [0x8f, 205, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 100, 0, 20, 0, 0, 1, 0]
        m += [0x20, 0x06] // run length chunk: symbol 1, run 6
        m += [0xAA, 0xAA] // 1-bit vector: 1 0 1 0 1 0 1 0 1 0 1 0 1 0
        m += [UInt8](repeating: 4, count: 6 + 7) // 13 received, each 1 ms after the previous
        while m.count % 4 != 0 { m.append(0) }
        m[3] = UInt8(m.count / 4 - 1)
        let fb = try #require(m.withUnsafeBytes { TransportFeedback($0) })
        #expect(fb.arrivals.count == 20 && fb.arrivals.compactMap { $0 }.count == 13)
        #expect(fb.arrivals[0] == 64_000 + 1_000 && fb.arrivals[5] == 64_000 + 6_000 && fb.arrivals[7] == nil)
        // Every truncation and byte flip: nil or a well-formed value, never a trap.
        for n in 0..<m.count { _ = Array(m.prefix(n)).withUnsafeBytes { TransportFeedback($0) } }
        for i in 0..<m.count {
            for v: UInt8 in [0, 0x7f, 0x80, 0xff] {
                var x = m
                x[i] = v
                _ = x.withUnsafeBytes { TransportFeedback($0) }
            }
        }
    }

    /// An open 5 Mbit/s path: the estimate climbs (about 8 % a second) and never sees overuse.
    @Test func anOpenPathLetsTheEstimateGrow() {
        var e = SendSideBandwidthEstimator()
        let trace = simulate(seconds: 10, capacity: { _ in 5_000_000 }, estimator: &e)
        #expect(trace.allSatisfy { $0.usage != .overusing }, "\(trace.filter { $0.usage == .overusing }.map(\.t))")
        #expect(e.estimate > 1_700_000, "\(e.estimate)")
        #expect(e.packetsLost == 0 && e.feedbacks > 150)
    }

    /// The link drops from 5 Mbit/s to 500 kbit/s: overuse is seen and the estimate goes under the new capacity
    /// within 3 s, then stays near it without collapsing.
    @Test func aCapacityDropIsFollowedWithinSeconds() {
        var e = SendSideBandwidthEstimator(configuration: .init(startBitrate: 2_000_000))
        let trace = simulate(seconds: 20, capacity: { $0 < 5 ? 5_000_000 : 500_000 }, estimator: &e)
        let after = trace.filter { $0.t >= 5 }
        let under = after.first { $0.estimate <= 550_000 }
        #expect(under.map { $0.t - 5 } ?? 99 <= 3, "\(after.prefix(40).map { "\($0.t): \($0.estimate / 1000)" })")
        #expect(after.contains { $0.usage == .overusing })
        let late = trace.filter { $0.t >= 12 }.map(\.estimate)
        #expect(late.allSatisfy { (200_000...650_000).contains($0) }, "\(late)")
        print(
            "capacity 5 → 0.5 Mbit/s: under 550 kbit/s after \(under.map { $0.t - 5 } ?? -1) s; from 12 s \(late.min()! / 1000)…\(late.max()! / 1000) kbit/s"
        )
    }

    /// 20 % random loss on an open path: the loss-based rate takes the estimate down.
    @Test func heavyLossLowersTheEstimate() {
        var e = SendSideBandwidthEstimator()
        let trace = simulate(seconds: 6, capacity: { _ in 50_000_000 }, loss: 0.2, estimator: &e)
        // The last 250 ms window holds a dozen packets at the lowered rate: its fraction is coarse (0.1 is 1 of 10).
        let lost = Double(e.packetsLost) / Double(max(1, e.packetsReported))
        #expect(
            lost > 0.15 && e.lossFraction >= 0.05 && e.estimate < 500_000,
            "\(e.estimate) loss \(lost), last window \(e.lossFraction) \(trace.map(\.estimate))")
    }
}

/// Packet trains (#21, #39): a key frame's first packets, sent at one instant, arrive at the bottleneck's rate, or
/// at line rate through a refilled token bucket. So a train raises nothing: far above the estimate it only calls a
/// probe sooner (after 0.5 s, and not before half the wait a failed probe set); at about the estimate (a full
/// link) it calls nothing.
@Suite struct PacketTrainTests {
    /// After a failed probe (the next due 2 s later), `frames` frames of 5 × 1200-byte packets 100 ms apart, each
    /// train arriving over `trainUs`, and their feedback. Returns the estimator and when the probe failed.
    static func run(trainUs: Int64, frames: Int) -> (SendSideBandwidthEstimator, failedAt: Int64) {
        var (e, seq) = ProbeScheduleTests.started()
        _ = ProbeScheduleTests.probe(&e, seq: &seq, atUs: 100_000, slowdown: 4) // short of its target: 300 → 410 kbit/s
        let failedAt: Int64 = 100_000 + 100_000 + 240_000
        for f in 0..<frames {
            let sendUs = failedAt + 100_000 + Int64(f) * 100_000
            var arrivals: [Int64?] = []
            let base = seq
            for k in 0..<5 {
                e.packetSent(sequence: seq, timeUs: sendUs, bytes: 1200)
                arrivals.append(sendUs + 20_000 + Int64(k) * trainUs / 4)
                seq &+= 1
            }
            e.feedback(
                TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: base, feedbackCount: UInt8(f), arrivals: arrivals),
                nowUs: sendUs + 60_000 + trainUs)
        }
        return (e, failedAt)
    }

    @Test func aFastTrainCallsAProbeAndRaisesNothing() {
        // 4800 bytes after the first in 1 ms: 38 Mbit/s, far above 410 kbit/s (a lifted limit, or a bucket's burst).
        let (open, failedAt) = Self.run(trainUs: 1_000, frames: 3)
        var o = open
        #expect(open.trainsRaised == 1 && open.estimate < 450_000, "\(open.estimate) after \(open.trainsRaised) trains")
        #expect((open.lastTrainRate ?? 0) > 30_000_000)
        #expect(open.trainsMeasured == 2, "the third frame's train ends only when another packet comes")
        // The probe it called: half the failed probe's 2 s wait after it, not the whole.
        #expect(o.startProbe(nowUs: failedAt + 1_050_000) != nil, "usage \(open.usage)")
        // The same trains over 80 ms: 480 kbit/s, 1.2 × the estimate: a full link, no probe called.
        var (full, _) = Self.run(trainUs: 80_000, frames: 3)
        #expect(full.trainsRaised == 0 && full.estimate < 450_000, "\(full.estimate)")
        #expect((full.lastTrainRate ?? 0) > 400_000 && (full.lastTrainRate ?? 0) < 600_000)
        #expect(full.startProbe(nowUs: failedAt + 1_050_000) == nil)
    }
}

/// Probing (#21, #39): a probe the path carries is followed by a larger one once the rate acknowledged after it
/// confirms the raise (a lifted limit is climbed in round trips; a token bucket's burst that passed the probe is
/// found out and the raise capped); a probe it does not carry waits 2 s, then 4 s with each failure in a row.
@Suite struct ProbeScheduleTests {
    /// One probe cluster from `startProbe`: its bytes in 1200-byte packets (7 at least) sent over 60 ms from
    /// `atUs`, arriving `slowdown` times as far apart, and the feedback for them. Returns whether a probe was due.
    static func probe(_ e: inout SendSideBandwidthEstimator, seq: inout UInt16, atUs: Int64, slowdown: Int64, lose: Int = 0) -> Bool {
        guard let p = e.startProbe(nowUs: atUs) else { return false }
        let n = max(7, p.bytes / 1200 + 1)
        let gap = Int64(60_000 / (n - 1))
        let base = seq
        var arrivals: [Int64?] = []
        for k in 0..<n {
            e.packetSent(sequence: seq, timeUs: atUs + Int64(k) * gap, bytes: 1200, probeCluster: p.cluster)
            arrivals.append(k >= n - lose ? nil : atUs + 20_000 + Int64(k) * gap * slowdown)
            seq &+= 1
        }
        e.endProbe()
        e.feedback(
            TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: base, feedbackCount: 0, arrivals: arrivals),
            nowUs: atUs + 100_000 + 60_000 * slowdown)
        return true
    }

    /// One packet at `atUs` that arrives without queueing (20 ms, as the first did), and its feedback: the
    /// path's queue has drained.
    static func drained(_ e: inout SendSideBandwidthEstimator, seq: inout UInt16, atUs: Int64) {
        e.packetSent(sequence: seq, timeUs: atUs, bytes: 400)
        e.feedback(
            TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: seq, feedbackCount: 0, arrivals: [atUs + 20_000]), nowUs: atUs + 40_000)
        seq &+= 1
    }

    /// An estimator at 300 kbit/s whose path has delivered a window of media (0.4 s before 0, at 300 kbit/s: probes
    /// start once what the path delivers is measured) and that has had a feedback message since.
    static func started() -> (SendSideBandwidthEstimator, UInt16) {
        var e = SendSideBandwidthEstimator(configuration: .init(minBitrate: 50_000, maxBitrate: 20_000_000, startBitrate: 300_000))
        var seq: UInt16 = 0
        steady(&e, seq: &seq, fromUs: -450_000, toUs: -40_000, bps: 300_000, deliveredBps: 300_000)
        e.packetSent(sequence: seq, timeUs: 0, bytes: 1200)
        e.feedback(TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: seq, feedbackCount: 0, arrivals: [20_000]), nowUs: 50_000)
        return (e, seq &+ 1)
    }

    /// Packets of 1200 bytes at `bps` from `fromUs` to `toUs`, arriving after 20 ms spaced at `deliveredBps` (a
    /// standing queue when slower), with feedback every 50 ms.
    static func steady(_ e: inout SendSideBandwidthEstimator, seq: inout UInt16, fromUs: Int64, toUs: Int64, bps: Int, deliveredBps: Int) {
        let gap = Int64(1200 * 8 * 1_000_000 / bps), arrivalGap = Int64(1200 * 8 * 1_000_000 / deliveredBps)
        var t = fromUs, k: Int64 = 0, base = seq
        var arrivals: [Int64?] = []
        while t < toUs {
            e.packetSent(sequence: seq, timeUs: t, bytes: 1200)
            arrivals.append(fromUs + 20_000 + k * arrivalGap)
            seq &+= 1
            k += 1
            t += gap
            if arrivals.count * Int(gap) >= 50_000 {
                e.feedback(
                    TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: base, feedbackCount: 0, arrivals: arrivals),
                    nowUs: max(t, arrivals.last!! + 20_000))
                base = seq
                arrivals = []
            }
        }
    }

    @Test func aCarriedProbeIsFollowedOnceDeliveryConfirmsItAndAFailedOneWaits() {
        // Carried: the probe's bytes over 60 ms both ways, above its 600 kbit/s target: raised to 90 % of it.
        var (e, seq) = Self.started()
        #expect(Self.probe(&e, seq: &seq, atUs: 100_000, slowdown: 1))
        #expect(e.probesRaised == 1 && e.estimate >= 700_000, "\(e.estimate)")
        let raised = e.estimate
        #expect(e.startProbe(nowUs: 300_000) == nil, "the next waits for the rate acknowledged after the raise")
        // The path delivers what is sent at the raised rate for 400 ms: confirmed, the next probe starts at once.
        Self.steady(&e, seq: &seq, fromUs: 300_000, toUs: 800_000, bps: raised, deliveredBps: raised)
        #expect(Self.probe(&e, seq: &seq, atUs: 900_000, slowdown: 1), "confirmed: usage \(e.usage), delivered \(e.deliveredRate ?? -1)")
        #expect(e.probesRaised == 2 && e.estimate > raised, "\(e.estimate)")

        // Carried, but a token bucket's burst passed it: what follows at the raised rate arrives at 300 kbit/s.
        // The estimate goes down to what was delivered, and the probe counts as failed (the next in 2 s).
        var (c, cseq) = Self.started()
        #expect(Self.probe(&c, seq: &cseq, atUs: 100_000, slowdown: 1))
        let capped = c.estimate
        Self.steady(&c, seq: &cseq, fromUs: 300_000, toUs: 800_000, bps: capped, deliveredBps: 300_000)
        #expect(c.probesCapped == 1 && c.deliveryCaps >= 1 && c.estimate <= 300_000, "\(capped) → \(c.estimate)")
        #expect(c.startProbe(nowUs: 1_500_000) == nil)

        // Not carried: the packets arrive 6 times as far apart as they left (about 300 kbit/s, the estimate): nothing
        // raised, the next probe 2 s
        // later, then 4 s.
        var (f, fseq) = Self.started()
        #expect(Self.probe(&f, seq: &fseq, atUs: 100_000, slowdown: 6))
        #expect(f.probesRaised == 0 && f.estimate <= 330_000, "\(f.estimate)")
        let failedAt: Int64 = 100_000 + 100_000 + 360_000
        #expect(f.queueDelayUs > 100_000, "the slow probe queued: \(f.queueDelayUs)")
        Self.drained(&f, seq: &fseq, atUs: failedAt + 1_000_000)
        #expect(f.queueDelayUs == 0)
        #expect(f.startProbe(nowUs: failedAt + 1_900_000) == nil)
        #expect(Self.probe(&f, seq: &fseq, atUs: failedAt + 2_000_000, slowdown: 6))
        let second = failedAt + 2_000_000 + 100_000 + 360_000
        Self.drained(&f, seq: &fseq, atUs: second + 1_000_000)
        #expect(f.startProbe(nowUs: second + 3_900_000) == nil)
        #expect(f.startProbe(nowUs: second + 4_000_000) != nil || f.usage != .normal, "usage \(f.usage)")
        print(
            "probes: carried → \(raised / 1000) then \(e.estimate / 1000) kbit/s; passed by a bucket → \(capped / 1000) then \(c.estimate / 1000) kbit/s; not carried → \(f.estimate / 1000) kbit/s, \(f.probes) probes"
        )
    }

    /// A probe that lost packets overfilled the path's queue (on a full 400 kbit/s link the frames behind it lost
    /// theirs: a freeze each time): the next one waits the longest, 8 s, not 2.
    @Test func aProbeThatLostPacketsWaitsTheLongest() {
        var (f, seq) = Self.started()
        #expect(Self.probe(&f, seq: &seq, atUs: 100_000, slowdown: 4, lose: 2))
        // Clean packets every 20 ms; the incomplete cluster is judged a second after it started (1.1 s).
        var t: Int64 = 200_000
        func until(_ end: Int64) {
            while t < end {
                Self.drained(&f, seq: &seq, atUs: t)
                t += 20_000
            }
        }
        until(1_100_000)
        #expect(f.probesLost == 1 && f.probesRaised == 0, "lost \(f.probesLost)")
        until(9_000_000)
        #expect(f.startProbe(nowUs: 9_000_000) == nil, "a doubling wait would have allowed one at 3.1 s")
        until(9_200_000)
        #expect(f.startProbe(nowUs: 9_200_000) != nil, "8 s after the lossy probe; usage \(f.usage), loss \(f.lossFraction)")
    }
}

extension ProbeScheduleTests {
    /// Media packets of `bytes` (1000: 800 kbit/s) every 10 ms from `fromUs` to `toUs`, each queueing `queuedUs` on
    /// the path (20 ms base delay), with feedback every 50 ms.
    static func media(_ e: inout SendSideBandwidthEstimator, seq: inout UInt16, fromUs: Int64, toUs: Int64, queuedUs: Int64, bytes: Int = 1000) {
        var t = fromUs, base = seq
        var arrivals: [Int64?] = []
        while t < toUs {
            e.packetSent(sequence: seq, timeUs: t, bytes: bytes)
            arrivals.append(t + 20_000 + queuedUs)
            seq &+= 1
            t += 10_000
            if arrivals.count == 5 {
                e.feedback(
                    TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: base, feedbackCount: 0, arrivals: arrivals),
                    nowUs: t + 20_000 + queuedUs)
                base = seq
                arrivals = []
            }
        }
    }

    /// A probe that fails while the media queues on the path (the path is the bottleneck) waits 2 s as any; but
    /// when the queue then vanishes for a second (a lifted limit: 15-160 ms behind 500 kbit/s, 0.2 ms at 5 Mbit/s),
    /// the next probe starts at once. One early probe at most: if it fails too, the next waits its turn.
    @Test func aQueueThatVanishesAfterAFailedProbeCallsTheNextAtOnce() {
        var (e, seq) = Self.started()
        Self.media(&e, seq: &seq, fromUs: 100_000, toUs: 1_000_000, queuedUs: 0)
        Self.media(&e, seq: &seq, fromUs: 1_000_000, toUs: 3_000_000, queuedUs: 20_000) // a standing queue (under the 25 ms a probe may start on)
        #expect(e.queueDelayUs >= 15_000 && e.usage == .normal, "queue \(e.queueDelayUs) µs, \(e.usage)")
        #expect(Self.probe(&e, seq: &seq, atUs: 3_000_000, slowdown: 6), "usage \(e.usage)")
        #expect(e.probesRaised == 0)
        let failedAt: Int64 = 3_000_000 + 100_000 + 360_000
        // The queue stands: the usual 2 s.
        var standing = e, standingSeq = seq
        Self.media(&standing, seq: &standingSeq, fromUs: failedAt, toUs: failedAt + 1_900_000, queuedUs: 20_000)
        #expect(standing.startProbe(nowUs: failedAt + 1_900_000) == nil)
        // The queue vanishes: a probe 1 s after the last queued packet's feedback, not 2 s after the failure.
        Self.media(&e, seq: &seq, fromUs: failedAt, toUs: failedAt + 1_500_000, queuedUs: 0)
        #expect(e.queueDelayUs < 5_000)
        #expect(Self.probe(&e, seq: &seq, atUs: failedAt + 1_500_000, slowdown: 6), "usage \(e.usage)")
        #expect(e.probesOnClearedQueue == 1)
        // That early probe failed too: no second early one, the next after the 4 s wait.
        let secondFailedAt = failedAt + 1_500_000 + 460_000
        Self.media(&e, seq: &seq, fromUs: secondFailedAt, toUs: secondFailedAt + 3_900_000, queuedUs: 0)
        #expect(e.startProbe(nowUs: secondFailedAt + 3_900_000) == nil)
        Self.media(&e, seq: &seq, fromUs: secondFailedAt + 3_900_000, toUs: secondFailedAt + 4_100_000, queuedUs: 0)
        #expect(e.startProbe(nowUs: secondFailedAt + 4_100_000) != nil, "usage \(e.usage)")
        #expect(e.probesOnClearedQueue == 1)
    }

    /// After a second failure in a row, the last probe started while the media itself queued (a full link), the
    /// next waits 8 s, not 4 s: behind 400 kbit/s none of 70 such probes raised the estimate, and some froze the viewer. The first
    /// failure still waits 2 s.
    @Test func probesThatKeepFailingOnAFullLinkWait8Seconds() {
        var (e, seq) = Self.started()
        Self.media(&e, seq: &seq, fromUs: 100_000, toUs: 1_000_000, queuedUs: 0)
        Self.media(&e, seq: &seq, fromUs: 1_000_000, toUs: 3_000_000, queuedUs: 20_000) // the media queues (under the 25 ms a probe may start on)
        #expect(Self.probe(&e, seq: &seq, atUs: 3_000_000, slowdown: 6))
        let firstFailedAt: Int64 = 3_000_000 + 100_000 + 360_000
        Self.media(&e, seq: &seq, fromUs: firstFailedAt, toUs: firstFailedAt + 2_000_000, queuedUs: 20_000)
        #expect(Self.probe(&e, seq: &seq, atUs: firstFailedAt + 2_000_000, slowdown: 6), "2 s after the first failure")
        #expect(e.probesRaised == 0 && e.probesLost == 0)
        let secondFailedAt = firstFailedAt + 2_000_000 + 460_000
        Self.media(&e, seq: &seq, fromUs: secondFailedAt, toUs: secondFailedAt + 7_900_000, queuedUs: 20_000)
        #expect(e.startProbe(nowUs: secondFailedAt + 4_100_000) == nil, "not after 4 s")
        #expect(e.startProbe(nowUs: secondFailedAt + 7_900_000) == nil)
        Self.media(&e, seq: &seq, fromUs: secondFailedAt + 7_900_000, toUs: secondFailedAt + 8_100_000, queuedUs: 20_000)
        #expect(e.startProbe(nowUs: secondFailedAt + 8_100_000) != nil, "usage \(e.usage)")
    }

    /// The start is a guess (#39): media gets half of it until the first delivery window measures the path, then the
    /// whole estimate; the estimate itself (what probes double) stays the configured start.
    @Test func mediaGetsHalfTheStartUntilThePathIsMeasured() {
        var e = SendSideBandwidthEstimator(configuration: .init(minBitrate: 50_000, maxBitrate: 20_000_000, startBitrate: 1_000_000))
        #expect(e.estimate == 1_000_000 && e.mediaRate == 500_000 && e.deliveredRate == nil)
        var seq: UInt16 = 0
        Self.steady(&e, seq: &seq, fromUs: 0, toUs: 200_000, bps: 1_000_000, deliveredBps: 1_000_000)
        #expect(e.deliveredRate == nil && e.mediaRate == min(e.estimate, 500_000), "\(e.estimate) \(e.mediaRate)")
        Self.steady(&e, seq: &seq, fromUs: 200_000, toUs: 600_000, bps: 1_000_000, deliveredBps: 1_000_000)
        #expect(e.deliveredRate != nil && e.mediaRate == e.estimate && e.estimate >= 900_000, "\(e.estimate) \(e.mediaRate)")
        // The first window bounds the guess to 1.5 × what it delivered when the media used at least half its rate
        // (here 500 kbit/s delivered, a little more over the arrival span: about 790 kbit/s), not when a quiet picture sent a trickle (100 kbit/s: the guess
        // stands, and a 640x480 viewer keeps its full tier).
        var filled = SendSideBandwidthEstimator(configuration: .init(startBitrate: 1_000_000)), quiet = filled
        var s1: UInt16 = 0, s2: UInt16 = 0
        Self.steady(&filled, seq: &s1, fromUs: 0, toUs: 500_000, bps: 500_000, deliveredBps: 500_000)
        Self.steady(&quiet, seq: &s2, fromUs: 0, toUs: 500_000, bps: 100_000, deliveredBps: 100_000)
        #expect(filled.deliveredRate != nil && (700_000...850_000).contains(filled.estimate), "\(filled.estimate)")
        #expect(quiet.deliveredRate != nil && quiet.estimate >= 1_000_000, "\(quiet.estimate)")
        // A start under twice the minimum: media at the minimum.
        let low = SendSideBandwidthEstimator(configuration: .init(minBitrate: 50_000, maxBitrate: 1_000_000, startBitrate: 80_000))
        #expect(low.mediaRate == 50_000)
    }
}

/// The path's queue delay (#21, `/stats` queueDelayMs): a packet's one-way delay over the lowest one of the last
/// 5-10 s.
@Suite struct QueueDelayTests {
    @Test func aStandingQueueIsMeasured() {
        var (e, seq) = ProbeScheduleTests.started()
        // Packets 10 ms apart for 3 s; from 1 s on each arrives 100 ms later than the first ones did (a queue
        // that built and stands).
        var fbCount: UInt8 = 1
        for k in 0..<300 {
            let sendUs = 100_000 + Int64(k) * 10_000
            let queued: Int64 = sendUs >= 1_100_000 ? 100_000 : 0
            e.packetSent(sequence: seq, timeUs: sendUs, bytes: 400)
            e.feedback(
                TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: seq, feedbackCount: fbCount, arrivals: [sendUs + 20_000 + queued]),
                nowUs: sendUs + 40_000 + queued)
            seq &+= 1
            fbCount &+= 1
            if k == 90 {
                #expect(e.queueDelayUs == 0, "\(e.queueDelayUs)")
            }
        }
        #expect(e.queueDelayUs == 100_000, "\(e.queueDelayUs)")
        // The queue drains: the next packet arrives 20 ms after it left again.
        ProbeScheduleTests.drained(&e, seq: &seq, atUs: 3_200_000)
        #expect(e.queueDelayUs == 0, "\(e.queueDelayUs)")
    }
}

extension ProbeScheduleTests {
    /// A probe waits for the media's own queue to empty (#39): on a full link with a short queue (400 kbit/s behind
    /// 5 kB of bucket and 200 ms), a probe started on top of 100-200 ms of media froze the viewer (three of six
    /// freezes in one strict run). Over 25 ms of queue, no probe, whatever the schedule says; under it, the probe due.
    @Test func aProbeWaitsForTheMediasQueueToEmpty() {
        var (e, seq) = Self.started()
        Self.media(&e, seq: &seq, fromUs: 100_000, toUs: 1_000_000, queuedUs: 0)
        Self.media(&e, seq: &seq, fromUs: 1_000_000, toUs: 3_000_000, queuedUs: 60_000) // the media queues 60 ms
        #expect(e.queueDelayUs >= 50_000 && e.usage == .normal && e.lossFraction == 0, "queue \(e.queueDelayUs) µs, \(e.usage)")
        #expect(e.startProbe(nowUs: 3_000_000) == nil, "a probe on top of 60 ms of queue")
        Self.media(&e, seq: &seq, fromUs: 3_000_000, toUs: 3_500_000, queuedUs: 20_000)
        #expect(e.queueDelayUs <= 25_000)
        #expect(Self.probe(&e, seq: &seq, atUs: 3_500_000, slowdown: 1), "usage \(e.usage)")
    }

    /// A queue that stands over 100 ms holds the estimate (#39): the delay trend sees no growth in a queue that
    /// stands, and +8 %/s on 150-240 ms of it took a viewer behind 400 kbit/s with 200 ms of queue to the queue's
    /// limit, where each key frame lost packets. The same media without the queue keeps growing.
    @Test func aStandingQueueHoldsTheEstimate() {
        var (held, s1) = Self.started()
        var (free, s2) = (held, s1)
        // 300 kbit/s of media, at the estimate: first with no queue, then 150 ms of it (it forms, then stands).
        Self.media(&held, seq: &s1, fromUs: 100_000, toUs: 1_000_000, queuedUs: 0, bytes: 375)
        Self.media(&free, seq: &s2, fromUs: 100_000, toUs: 1_000_000, queuedUs: 0, bytes: 375)
        Self.media(&held, seq: &s1, fromUs: 1_000_000, toUs: 2_000_000, queuedUs: 150_000, bytes: 375)
        Self.media(&free, seq: &s2, fromUs: 1_000_000, toUs: 2_000_000, queuedUs: 0, bytes: 375)
        let (heldAt2, freeAt2) = (held.estimate, free.estimate)
        Self.media(&held, seq: &s1, fromUs: 2_000_000, toUs: 4_000_000, queuedUs: 150_000, bytes: 375)
        Self.media(&free, seq: &s2, fromUs: 2_000_000, toUs: 4_000_000, queuedUs: 0, bytes: 375)
        #expect(held.usage == .normal && held.queueDelayUs >= 140_000, "\(held.usage) \(held.queueDelayUs)")
        #expect(held.estimate <= heldAt2, "\(heldAt2) → \(held.estimate)")
        #expect(free.estimate > freeAt2, "\(freeAt2) → \(free.estimate)")
        print(
            "a standing 150 ms queue: \(heldAt2 / 1000) → \(held.estimate / 1000) kbit/s over 2 s; without it \(freeAt2 / 1000) → \(free.estimate / 1000) kbit/s"
        )
    }
}

extension ProbeScheduleTests {
    /// A probe short of its target still measured the path (#39): 90 % of its result, when that is over 1.1 × the
    /// estimate it started from and nothing was lost, becomes the estimate; the probe counts as failed (the next
    /// waits 2 s). Behind 400 kbit/s a viewer on 320x180 (its encoder at 100 of 200 kbit/s, the estimate held at
    /// 1.5 × that) saw its probes at twice 165 kbit/s measure 184-270 and fail, and stayed on 320x180 all minute.
    @Test func aProbeShortOfItsTargetRaisesTheEstimateToWhatItMeasured() {
        // Sent at 1.9 Mbit/s over 60 ms, arriving 4 times as far apart: 456 kbit/s measured of its 600 target.
        var (e, seq) = Self.started()
        #expect(Self.probe(&e, seq: &seq, atUs: 100_000, slowdown: 4))
        let result = e.lastProbeResult ?? 0
        #expect(result < 540_000 && e.probesRaised == 0 && e.probesRaisedShort == 1, "\(result)")
        #expect(e.estimate >= result * 9 / 10 - 1000 && e.estimate <= result, "\(e.estimate) of \(result)")
        let failedAt: Int64 = 100_000 + 100_000 + 240_000
        #expect(e.startProbe(nowUs: failedAt + 1_900_000) == nil, "a failure all the same: the next after 2 s")
        // Measured under 1.1 × the start (6 times as far apart: about 300 kbit/s): nothing raised. Lost packets:
        // nothing.
        var (slow, s2) = Self.started()
        #expect(Self.probe(&slow, seq: &s2, atUs: 100_000, slowdown: 6))
        #expect(slow.probesRaisedShort == 0 && slow.estimate <= 330_000, "\(slow.estimate)")
        var (lossy, s3) = Self.started()
        #expect(Self.probe(&lossy, seq: &s3, atUs: 100_000, slowdown: 4, lose: 2))
        #expect(lossy.probesRaisedShort == 0 && lossy.estimate <= 330_000, "\(lossy.estimate)")
        print("a probe short of its 600 kbit/s target: measured \(result / 1000) kbit/s, estimate 300 → \(e.estimate / 1000)")
    }
}

extension ProbeScheduleTests {
    /// A queue that vanishes calls the next probe early after a probe that lost packets too (#39): a probe sent as a
    /// 500 kbit/s limit was lifted lost packets to the change, and its 8 s wait made the step up take 11 s.
    @Test func aQueueThatVanishesCallsAProbeAfterALossyOneToo() {
        var (e, seq) = Self.started()
        Self.media(&e, seq: &seq, fromUs: 100_000, toUs: 1_000_000, queuedUs: 0)
        Self.media(&e, seq: &seq, fromUs: 1_000_000, toUs: 3_000_000, queuedUs: 20_000) // the media queues
        #expect(Self.probe(&e, seq: &seq, atUs: 3_000_000, slowdown: 4, lose: 12))
        // The limit lifted: nothing queues from here on; the lossy probe is judged a second after it started.
        Self.media(&e, seq: &seq, fromUs: 3_400_000, toUs: 5_500_000, queuedUs: 0)
        #expect(e.probesLost == 1 && e.probesRaisedShort == 0)
        #expect(e.startProbe(nowUs: 5_500_000) != nil, "usage \(e.usage), loss \(e.lossFraction): the 8 s wait otherwise")
        #expect(e.probesOnClearedQueue == 1)
    }
}
