/// The send-side estimator's loss-based controller (draft-ietf-rmcat-gcc §6), over windows of 250 ms and at least
/// 10 reported packets: above 10 % loss the rate goes down by half the loss (and, above a quarter, to what the path
/// delivered in the window: a link stepping down is followed at once instead of after several halvings); below
/// 2 % it grows by 5 % from the current estimate. Part of `SendSideBandwidthEstimator`.
struct LossBasedController: Sendable {
    /// The controller's rate, bit/s.
    var rate: Int
    /// The loss fraction of the last window (0…1).
    private(set) var fraction = 0.0
    private var window = (startUs: Int64?.none, lost: 0, total: 0)
    /// What arrived in the window: bytes, first and last arrival (µs): under heavy loss, the rate the path delivered.
    private var arrivals = (bytes: 0, firstUs: Int64.max, lastUs: Int64.min)

    /// A controller starting at `rate` (bit/s).
    init(rate: Int) { self.rate = rate }

    /// A reported packet: `lost`, or it arrived.
    mutating func reported(lost: Bool) {
        window.total += 1
        if lost { window.lost += 1 }
    }

    /// A reported packet of `bytes` arrived at `arrivalUs`.
    mutating func arrived(bytes: Int, arrivalUs: Int64) {
        arrivals.bytes += bytes
        arrivals.firstUs = min(arrivals.firstUs, arrivalUs)
        arrivals.lastUs = max(arrivals.lastUs, arrivalUs)
    }

    /// After a feedback at `nowUs`: a window of 250 ms and 10 packets or more sets the loss fraction and the rate
    /// (from the `estimate` and the `delayBasedRate`), within `bounds`, and starts the next window.
    mutating func update(nowUs: Int64, estimate: Int, delayBasedRate: Int, bounds: (min: Int, max: Int)) {
        let start = window.startUs ?? nowUs
        window.startUs = start
        guard nowUs - start >= 250_000, window.total >= 10 else { return }
        fraction = Double(window.lost) / Double(window.total)
        if fraction > 0.1 {
            rate = Int(Double(min(rate, estimate)) * (1 - 0.5 * fraction))
            // Heavy loss on a path that suddenly carries less (a link stepping down): what it delivered in the
            // window is the better bound, reached at once instead of after several halvings.
            let a = arrivals
            if fraction > 0.25, a.lastUs - a.firstUs >= 100_000 {
                let delivered = Int(Int64(a.bytes) * 8_000_000 / (a.lastUs - a.firstUs))
                rate = min(rate, delivered)
            }
        } else if fraction < 0.02 {
            // Grow from the current estimate, so it never sits far above the delay-based rate.
            rate = Int(Double(max(estimate, min(rate, delayBasedRate))) * 1.05) + 1000
        }
        rate = min(max(rate, bounds.min), bounds.max)
        window = (nowUs, 0, 0)
        arrivals = (0, .max, .min)
    }
}
