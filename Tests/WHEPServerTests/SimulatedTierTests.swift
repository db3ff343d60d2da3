import CapturePipeline
import Testing
import VideoCapture
import RTPTestSupport
@testable import WHEPServer

/// One viewer's place on the encode tiers of a 1280x720 broadcast at 2.25 Mbit/s (720p 600…2250 kbit/s, 360p
/// 150…700, 180p 30…200), judged by the real `TierPolicy` at each estimate its `RTPSender` reports: a
/// `LinkSimulation.mediaCap`. `beside`: another viewer holds the full tier at its maximum (its link is wide). A move
/// takes effect at once (the simulated encoder starts the new tier with a key frame).
final class TierLadder: @unchecked Sendable {
    // @unchecked: used only on the simulation's thread.
    static let tiers = EncodeTier.plan(for: FrameSize(width: 1280, height: 720), maxCount: 3, targetBitrate: 2_250_000, maxBitrate: 2_250_000)
    private var seat = TierSeat()
    private let others: [TierSeat]
    /// Each move: when (seconds) and to which tier.
    private(set) var moves: [(t: Double, tier: Int)] = []
    init(beside: Bool) { others = beside ? [TierSeat(estimate: 5_000_000, tier: 0)] : [] }

    /// The viewer's media cap for `estimate` at `nowUs`: its tier's maximum, after `TierPolicy` judged it.
    func cap(_ estimate: Int, _ nowUs: Int64) -> Int {
        seat.estimate = estimate
        if TierPolicy.choose(&seat, others: others, tiers: Self.tiers, now: nowUs * 1000), let t = seat.pendingTier {
            (seat.tier, seat.pendingTier, seat.tierSinceNs) = (t, nil, nowUs * 1000)
            moves.append((Double(nowUs) / 1e6, t))
        }
        return Self.tiers[seat.tier].maxBitrate
    }
}

/// The production sender behind a simulated token bucket (#39, #47), its viewer placed by `TierPolicy`.
@Suite struct SimulatedTierTests {
    @Test func theLadderIsTheBroadcastsTiers() {
        #expect(TierLadder.tiers.map(\.maxBitrate) == [2_250_000, 700_000, 200_000])
        #expect(TierLadder.tiers.map(\.minBitrate) == [600_000, 150_000, 30_000])
    }

    /// A viewer B starting beside a viewer on the full tier (#39's link test, simulated): placed by its 1 Mbit/s
    /// start on 360p (up to 700 kbit/s), its media at half the start until the first delivery window. Behind the
    /// 5 kB bucket at most 5 packets drop in its first 5 s (16 with media at the whole start); behind the 64 kB
    /// bucket none, and no packet queues over half a second (1.03 s with media at the whole start). A viewer alone
    /// on a wide link keeps the full tier from its first estimate and passes 2.25 Mbit/s within 2 s.
    @Test func aViewerBesideAFullTierStartsWithoutOverfillingItsLink() {
        var figures: [String] = []
        for (burst, latency) in [(5_000, 200), (64_000, 400)] {
            let sim = LinkSimulation(link: TokenBucketLink(rateBps: 400_000, burstBytes: burst, latencyMs: latency), startBps: 1_000_000)
            (sim.encoderFill, sim.keyIntervalUs) = (0.9, 2_000_000) // the link test's noisy picture fills its rate
            let ladder = TierLadder(beside: true)
            sim.mediaCap = { e, now in ladder.cap(e, now) }
            sim.run(until: 10_000_000)
            let drops = sim.link.dropTimesUs.filter { $0 < 5_000_000 }.count
            let deepest = sim.queueTrace.filter { $0.sendUs < 5_000_000 }.map(\.delayUs).max() ?? 0
            figures.append("\(burst / 1000) kB: \(drops) drops, queue ≤ \(deepest / 1000) ms, moves \(ladder.moves)")
            if burst == 5_000 { #expect(drops <= 5, "\(figures)") } else { #expect(drops == 0 && deepest <= 500_000, "\(figures)") }
        }
        let wide = LinkSimulation(link: TokenBucketLink(rateBps: 5_000_000, burstBytes: 5_000, latencyMs: 200), startBps: 1_000_000)
        wide.encoderFill = 0.9
        let alone = TierLadder(beside: false)
        wide.mediaCap = { e, now in alone.cap(e, now) }
        wide.run(until: 5_000_000)
        let up = wide.trace.first { $0.estimate >= 2_250_000 }?.t
        print(
            "start beside a full tier, behind tbf 400kbit: \(figures.joined(separator: "; ")); alone on 5 Mbit/s: moves \(alone.moves), 2.25 Mbit/s at \(up ?? -1) s"
        )
        #expect(alone.moves.isEmpty && (up ?? 99) <= 2, "\(alone.moves) \(wide.trace.prefix(40).map(\.estimate))")
    }
}
