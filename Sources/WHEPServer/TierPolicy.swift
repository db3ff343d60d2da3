import CapturePipeline
import RTP

/// Where one viewer stands among the encode tiers: its estimate, its tier and the one it moves to.
struct TierSeat: Sendable, Equatable {
    /// The viewer's bandwidth estimate (REMB or send-side), bit/s; nil before the first.
    var estimate: Int?
    /// What its media may use now: less than the estimate while the send-side estimator has not yet measured the
    /// path (`SendSideBandwidthEstimator.mediaRate`); nil: the estimate.
    var mediaRate: Int?
    /// The tier it gets (0: full size), and the one it moves to at that tier's next key frame.
    var tier = 0
    var pendingTier: Int?
    /// When it last changed tier, and since when its estimate has allowed the next larger one (ns).
    var tierSinceNs: Int64 = 0
    var upSinceNs: Int64?
    /// When the viewer was admitted (ns): its first `startGraceNs` move up without the dwell.
    var joinedNs: Int64 = 0
    /// The tier it counts for: the one it moves to, or the one it is on.
    var destination: Int { pendingTier ?? tier }
}

/// The tier rules (#39): tier moves never lower anyone else's picture.
///
/// - A tier's rate is the lowest estimate among the viewers on it (or moving to it), within the tier's maximum.
/// - A viewer joins a larger tier only when its estimate covers what that tier runs at now: the rate its viewers
///   carry (or, on a tier nobody watches, `upHeadroom` × its minimum), for `upHoldNs`, `dwellNs` after its last
///   move. (The old rule, 1.3 × the tier's minimum, let a viewer at 0.8 Mbit/s join a tier running at 2.5 and
///   drag it down: measured, the other viewer's bitrate fell to 50-70 % for 1-2 s.)
/// - A tier that runs at its maximum (its viewers' links are wider) is joined at `ceilingShare` of that maximum:
///   the send-side estimator stops probing at 95 % of its own maximum (the full tier's), so an estimate can settle
///   just under the ceiling and never reach it (measured in CI: B's estimate sat at 2224 kbit/s against the full
///   tier's 2250 for the 15 s after its limit was lifted, and B stayed on 640x360). Joining then lowers the
///   others by at most 5 %.
/// - A move up waits `dwellNs` after the last move, except in a viewer's first `startGraceNs`.
/// - A viewer stays on its tier while its estimate is `stayHeadroom` × the tier's minimum and at least
///   `shareFloor` of what the tier's other viewers carry; under either it moves down at once, to the largest
///   smaller tier it can stay on. So a viewer pulls a tier it shares down by at most 10 %; on the smallest tier,
///   or alone on its tier, there is nowhere to go and the tier follows it.
enum TierPolicy {
    /// Up: the estimate over this much of the larger tier's minimum when nobody is on it (1.3).
    static let upHeadroom = 1.3
    /// Stay: the estimate over this much of the tier's minimum (1.15): an estimate just over it is usually still
    /// falling, and a link that carries only the minimum has no room for a key frame.
    static let stayHeadroom = 1.15
    /// Stay: the estimate at least this share of what the tier's other viewers carry (0.9).
    static let shareFloor = 0.9
    /// How long the estimate must allow the larger tier before a move up (0.5 s).
    static let upHoldNs: Int64 = 500_000_000
    /// Up onto a tier that runs at its maximum: the estimate over this share of that maximum (0.95, where the
    /// estimator's probing stops).
    static let ceilingShare = Double(SendSideBandwidthEstimator.probeCeilingPercent) / 100
    /// The shortest stay on a tier before a move up (2 s); moves down are not held back.
    static let dwellNs: Int64 = 2_000_000_000
    /// A viewer's first 4 s: its moves up wait only `upHoldNs`, not the dwell. Its first estimates are the start's
    /// guess and what its first 300 ms delivered of the shared tier's encode (not its path): a viewer on an open link
    /// placed on 320x180 that way, its estimate at 2.25 Mbit/s within a second, took 4.5 s to climb back to 1280x720.
    static let startGraceNs: Int64 = 4_000_000_000

    /// What tier `t` runs at for `seats` (those counting for it): their lowest estimate, within its maximum; nil
    /// when none of them has an estimate.
    static func carriedRate(_ t: Int, tiers: [EncodeTier], seats: [TierSeat]) -> Int? {
        let lowest = seats.lazy.filter { $0.destination == t }.compactMap(\.estimate).min()
        return lowest.map { min($0, tiers[t].maxBitrate) }
    }

    /// Each tier's rate: the lowest estimate among the seats counting for it, each within its media rate (nil:
    /// nobody with an estimate).
    static func rates(count tierCount: Int, seats: [TierSeat]) -> [Int?] {
        let count = max(1, tierCount)
        var lowest = [Int?](repeating: nil, count: count)
        for s in seats {
            guard let e = s.estimate.map({ min($0, s.mediaRate ?? $0) }) else { continue }
            let t = min(count - 1, s.destination)
            lowest[t] = min(lowest[t] ?? .max, e)
        }
        return lowest
    }

    /// Moves `seat` down at once when it cannot stay on its tier, or up one tier when its estimate has covered the
    /// larger tier's rate for long enough (`others`: every other viewer). True when its pending tier changed.
    static func choose(_ seat: inout TierSeat, others: [TierSeat], tiers: [EncodeTier], now: Int64) -> Bool {
        guard tiers.count > 1, let estimate = seat.estimate else { return false }
        let current = seat.destination
        let e = Double(estimate)
        func canStay(_ t: Int) -> Bool {
            guard e >= Double(tiers[t].minBitrate) * stayHeadroom else { return false }
            guard let carried = carriedRate(t, tiers: tiers, seats: others) else { return true }
            return e >= Double(carried) * shareFloor
        }
        func canJoin(_ t: Int) -> Bool {
            var carried = carriedRate(t, tiers: tiers, seats: others).map(Double.init) ?? 0
            if carried >= Double(tiers[t].maxBitrate) { carried = Double(tiers[t].maxBitrate) * ceilingShare }
            return e >= max(Double(tiers[t].minBitrate) * upHeadroom, carried)
        }
        var target: Int?
        if !canStay(current), current + 1 < tiers.count {
            var t = current + 1
            while t + 1 < tiers.count && !canStay(t) { t += 1 }
            target = t
        } else if current > 0, canJoin(current - 1) {
            let since = seat.upSinceNs ?? now
            seat.upSinceNs = since
            let dwelt = now - seat.tierSinceNs >= dwellNs || now - seat.joinedNs < startGraceNs
            if now - since >= upHoldNs && dwelt { target = current - 1 }
        } else {
            seat.upSinceNs = nil
        }
        guard let target else { return false }
        seat.upSinceNs = nil
        seat.pendingTier = target == seat.tier ? nil : target
        return true
    }
}
