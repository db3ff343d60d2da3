/// What the path delivers, for the send-side estimator: the rate the receiver acknowledged (over 250 ms of
/// arrivals, averaged with the last), how long the last reported packet queued (its one-way delay over the lowest
/// of the last 5-10 s; send and arrival clocks differ by a constant, which cancels), and windows of at least 300 ms
/// (by arrival and by send time) of what was sent against what arrived, which `SendSideBandwidthEstimator` turns
/// into its delivery bound. Part of `SendSideBandwidthEstimator`.
struct DeliveryMonitor: Sendable {
    /// A window's figures: bytes sent (lost ones included) and arrived, and their send and arrival spans (µs).
    struct Window: Sendable {
        var sentBytes = 0, firstSendUs = Int64.max, lastSendUs = Int64.min
        var arrivedBytes = 0, firstArrivalUs = Int64.max, lastArrivalUs = Int64.min
    }

    /// A closed window: the rate its packets were sent at and the rate the path delivered (bit/s), when its first
    /// packet was sent, and whether it was the first window.
    struct Measured: Sendable {
        var sent: Int64, delivered: Int, firstSendUs: Int64, first: Bool
    }

    /// The rate the receiver acknowledged over the last window, bit/s (nil before 250 ms of arrivals).
    private(set) var acknowledgedRate: Int?
    /// The last delivered rate measured (bit/s; nil before the first 300 ms window).
    private(set) var deliveredRate: Int?
    /// How long the last reported packet queued on the path (µs).
    private(set) var queueDelayUs: Int64 = 0
    private var window = Window()
    private var ackWindow = (startUs: Int64?.none, bytes: 0, lastUs: Int64(0))
    // The lowest one-way delay (arrival - send) in the current and the previous 5 s window.
    private var oneWay = (currentMin: Int64.max, previousMin: Int64.max, windowStartUs: Int64.min / 2)

    /// The lowest one-way delay of the last 5-10 s (µs; `.max` before any arrival): the path's base delay.
    var baseDelayUs: Int64 { min(oneWay.currentMin, oneWay.previousMin) }

    /// A reported packet of `bytes`, sent at `sendUs` (arrived or lost).
    mutating func reported(bytes: Int, sendUs: Int64) {
        window.sentBytes += bytes
        window.firstSendUs = min(window.firstSendUs, sendUs)
        window.lastSendUs = max(window.lastSendUs, sendUs)
    }

    /// A reported packet of `bytes` arrived at `arrivalUs`: the window's arrivals and the acknowledged rate.
    mutating func arrived(bytes: Int, arrivalUs: Int64) {
        window.arrivedBytes += bytes
        window.firstArrivalUs = min(window.firstArrivalUs, arrivalUs)
        window.lastArrivalUs = max(window.lastArrivalUs, arrivalUs)
        let start = ackWindow.startUs ?? arrivalUs
        ackWindow.startUs = start
        ackWindow.bytes += bytes
        ackWindow.lastUs = max(ackWindow.lastUs, arrivalUs)
        let span = ackWindow.lastUs - start
        guard span >= 250_000 else { return }
        let rate = Int(Int64(ackWindow.bytes) * 8 * 1_000_000 / span)
        acknowledgedRate = acknowledgedRate.map { ($0 + rate) / 2 } ?? rate
        ackWindow = (arrivalUs, 0, arrivalUs)
    }

    /// The packet's one-way delay against the lowest of the last 5-10 s: how long it queued (`queueDelayUs`).
    mutating func queueSample(sendUs: Int64, arrivalUs: Int64) {
        let (d, overflow) = arrivalUs.subtractingReportingOverflow(sendUs)
        guard !overflow else { return }
        if arrivalUs &- oneWay.windowStartUs >= 5_000_000 || arrivalUs < oneWay.windowStartUs {
            oneWay = (.max, oneWay.currentMin, arrivalUs)
        }
        oneWay.currentMin = min(oneWay.currentMin, d)
        let base = min(oneWay.currentMin, oneWay.previousMin)
        queueDelayUs = d > base ? (d &- base) : 0
    }

    /// When the window spans 300 ms or more of arrivals and of sends: its figures (and `deliveredRate` from them);
    /// the next window starts empty. Else nil.
    mutating func closeWindow() -> Measured? {
        let d = window
        // A window with no arrival (or no send) yet has no span: its bounds are still .max and .min, whose difference
        // overflowed (a feedback that reported only lost packets, or none of ours, trapped the estimator).
        guard d.firstArrivalUs != .max, d.firstSendUs != .max, d.lastArrivalUs - d.firstArrivalUs >= 300_000, d.lastSendUs - d.firstSendUs >= 300_000
        else { return nil }
        window = Window()
        let sent = Int64(d.sentBytes) * 8_000_000 / (d.lastSendUs - d.firstSendUs)
        let delivered = Int(clamping: Int64(d.arrivedBytes) * 8_000_000 / (d.lastArrivalUs - d.firstArrivalUs))
        let first = deliveredRate == nil
        deliveredRate = delivered
        return Measured(sent: sent, delivered: delivered, firstSendUs: d.firstSendUs, first: first)
    }
}
