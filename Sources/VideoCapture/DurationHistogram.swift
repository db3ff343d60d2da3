/// Durations in 50 µs buckets up to 500 ms, for percentiles of conversion, encode and latency times.
/// Fixed memory (allocated once in `init`): adding a value never allocates.
public struct DurationHistogram: Sendable {
    private var buckets = [Int](repeating: 0, count: 10_001)
    /// How many durations were added since the start or the last ``reset()``.
    public private(set) var count = 0
    /// An empty histogram (its buckets are allocated here, once).
    public init() {}

    /// Adds one duration in nanoseconds (negative counts as 0, beyond 500 ms as 500 ms).
    public mutating func add(_ ns: Int64) {
        let i = ns <= 0 ? 0 : Int(min(ns / 50_000, Int64(buckets.count - 1)))
        buckets[i] += 1
        count += 1
    }

    /// The `p`-th percentile (0...1) in milliseconds, at the middle of its bucket; 0 when empty.
    public func percentileMs(_ p: Double) -> Double {
        guard count > 0 else { return 0 }
        let rank = max(1, min(count, Int((Double(count) * min(max(p, 0), 1)).rounded(.up))))
        var seen = 0
        for (i, n) in buckets.enumerated() {
            seen += n
            if seen >= rank { return Double(i) * 0.05 + 0.025 }
        }
        return Double(buckets.count) * 0.05
    }

    /// Empties the histogram without freeing its buckets.
    public mutating func reset() {
        for i in buckets.indices { buckets[i] = 0 }
        count = 0
    }
}
