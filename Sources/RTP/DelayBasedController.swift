/// The send-side estimator's delay-based controller (draft-ietf-rmcat-gcc §5): reported packets grouped by 5 ms of
/// send time, the one-way delay variation between groups smoothed into a trendline (least squares over the last
/// 20), an adaptive threshold (faster up than down, 6…600) that calls the path overused, underused or normal, and
/// an AIMD rate: +8 %/s while normal and no queue stands over 100 ms, down to 85 % of the acknowledged rate on
/// overuse (at most every 200 ms), held while queues drain. Part of `SendSideBandwidthEstimator`.
struct DelayBasedController: Sendable {
    /// The controller's rate, bit/s.
    var rate: Int
    /// What the last group comparison said about the path.
    private(set) var usage = SendSideBandwidthEstimator.Usage.normal

    // Packet groups (5 ms of send time), the trendline, the threshold, AIMD.
    private var group = (firstSendUs: Int64(0), lastSendUs: Int64(0), lastArrivalUs: Int64(0), open: false)
    private var previousGroup: (lastSendUs: Int64, lastArrivalUs: Int64)?
    private var firstArrivalUs: Int64?
    private var accumulatedDelayMs = 0.0, smoothedDelayMs = 0.0
    private var trend = Ring(capacity: 20)
    private var deltaCount = 0
    private var threshold = 12.5
    private var lastThresholdUpdateUs: Int64?
    private var overuseStartUs: Int64?, previousTrend = 0.0
    private var lastRateUpdateUs: Int64?
    private var lastDecreaseUs: Int64 = .min / 2

    /// A controller starting at `rate` (bit/s).
    init(rate: Int) { self.rate = rate }

    /// One received packet, sent at `sendUs` (the sender's clock) and arrived at `arrivalUs` (the receiver's).
    mutating func sample(sendUs: Int64, arrivalUs: Int64) {
        if firstArrivalUs == nil { firstArrivalUs = arrivalUs }
        if !group.open {
            group = (sendUs, sendUs, arrivalUs, true)
            return
        }
        if sendUs - group.firstSendUs <= 5_000 { // the same burst
            group.lastSendUs = max(group.lastSendUs, sendUs)
            group.lastArrivalUs = max(group.lastArrivalUs, arrivalUs)
            return
        }
        // A group is complete: compare it with the one before.
        if let previous = previousGroup {
            let sendDelta = Double(group.lastSendUs - previous.lastSendUs) / 1000
            let arrivalDelta = Double(group.lastArrivalUs - previous.lastArrivalUs) / 1000
            if sendDelta > 0 { trendline(arrivalDelta - sendDelta, arrivalMs: Double(group.lastArrivalUs - (firstArrivalUs ?? 0)) / 1000) }
        }
        previousGroup = (group.lastSendUs, group.lastArrivalUs)
        group = (sendUs, sendUs, arrivalUs, true)
    }

    private mutating func trendline(_ variationMs: Double, arrivalMs: Double) {
        deltaCount = min(deltaCount + 1, 1000)
        accumulatedDelayMs += variationMs
        smoothedDelayMs = 0.9 * smoothedDelayMs + 0.1 * accumulatedDelayMs
        trend.append((arrivalMs, smoothedDelayMs))
        guard trend.count >= 2 else { return }
        // Least-squares slope of smoothed delay over arrival time.
        var sx = 0.0, sy = 0.0
        for i in 0..<trend.count {
            sx += trend[i].0
            sy += trend[i].1
        }
        let mx = sx / Double(trend.count), my = sy / Double(trend.count)
        var num = 0.0, den = 0.0
        for i in 0..<trend.count {
            num += (trend[i].0 - mx) * (trend[i].1 - my)
            den += (trend[i].0 - mx) * (trend[i].0 - mx)
        }
        let slope = den > 0 ? num / den : 0
        detect(Double(min(deltaCount, 60)) * slope * 4, nowMs: arrivalMs)
    }

    private mutating func detect(_ modified: Double, nowMs: Double) {
        let nowUs = Int64(nowMs * 1000)
        if modified > threshold {
            let start = overuseStartUs ?? nowUs
            overuseStartUs = start
            if nowUs - start >= 10_000 && modified >= previousTrend { usage = .overusing }
        } else if modified < -threshold {
            overuseStartUs = nil
            usage = .underusing
        } else {
            overuseStartUs = nil
            usage = .normal
        }
        previousTrend = modified
        // The threshold follows the trend (faster up than down), 6…600.
        let last = lastThresholdUpdateUs ?? nowUs
        lastThresholdUpdateUs = nowUs
        let magnitude = abs(modified)
        guard magnitude - threshold <= 15 else { return } // a spike: not a new normal
        let k = magnitude < threshold ? 0.039 : 0.0087
        threshold += k * (magnitude - threshold) * Double(min(nowUs - last, 100_000)) / 1000
        threshold = min(600, max(6, threshold))
    }

    /// The rate after a feedback at `nowUs`: down on overuse (from `acknowledgedRate`), held while underusing or
    /// while the last packet queued over `SendSideBandwidthEstimator.standingQueueUs` (`queueDelayUs`), else up by
    /// 8 %/s but not far beyond what the receiver acknowledged; within `bounds`.
    mutating func update(nowUs: Int64, queueDelayUs: Int64, acknowledgedRate: Int?, bounds: (min: Int, max: Int)) {
        let dt = Double(min(max(nowUs - (lastRateUpdateUs ?? nowUs), 0), 1_000_000)) / 1e6
        lastRateUpdateUs = nowUs
        switch usage {
        case .overusing:
            if nowUs - lastDecreaseUs >= 200_000 {
                let base = acknowledgedRate ?? rate
                rate = Int(0.85 * Double(base))
                lastDecreaseUs = nowUs
            }
        case .underusing: break // hold while queues drain
        case .normal:
            guard queueDelayUs <= SendSideBandwidthEstimator.standingQueueUs else { break } // a standing queue: hold
            var next = Int(Double(rate) * Self.pow108(dt))
            // Not far beyond what the receiver gets: an application-limited sender would otherwise run away.
            if let ack = acknowledgedRate { next = min(next, max(rate, ack * 3 / 2 + 10_000)) }
            rate = next
        }
        rate = min(max(rate, bounds.min), bounds.max)
    }

    /// 1.08 to the power of `seconds` (multiplicative increase of 8 % per second).
    static func pow108(_ seconds: Double) -> Double {
        // exp(seconds · ln 1.08), by a short series: seconds is 0…1.
        let x = seconds * 0.076_961_041_136_128_32
        return 1 + x + x * x / 2 + x * x * x / 6
    }
}

/// A fixed ring of (x, y) pairs: the trendline's window.
struct Ring: Sendable {
    private var items: [(Double, Double)]
    private var head = 0
    private(set) var count = 0
    init(capacity: Int) { items = Array(repeating: (0, 0), count: capacity) }
    mutating func append(_ item: (Double, Double)) {
        items[(head + count) % items.count] = item
        if count < items.count { count += 1 } else { head = (head + 1) % items.count }
    }
    subscript(i: Int) -> (Double, Double) { items[(head + i) % items.count] }
}
