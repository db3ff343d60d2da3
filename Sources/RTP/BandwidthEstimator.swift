/// A send-side bandwidth estimate for one receiver, in the spirit of Google congestion control
/// (draft-ietf-rmcat-gcc): every sent packet is remembered by its transport-wide sequence number; transport
/// feedback says when each arrived. A delay-based controller (a trendline of the one-way delay variation
/// between groups of packets, an adaptive overuse threshold, AIMD: +8 %/s while the path is not loaded, down to
/// 85 % of the delivered rate on overuse) and a loss-based one (down by half the loss above 10 %, and to the rate
/// the path delivered when more than a quarter is lost, over 250 ms windows; +5 % below 2 %)
/// each propose a rate; the estimate is the lower, within `Configuration`'s bounds.
///
/// Probing: a sender whose traffic is below what the path may carry learns nothing from it (the estimate
/// follows what is acknowledged). `startProbe(nowUs:)` says when to send a probe cluster (packets tagged with its
/// id in `packetSent`, about 100 ms of twice the estimate); when the feedback for it is in, the rate it arrived at
/// (the lower of its send and receive rates) raises the estimate to 90 % of it when it is at least 1.8 × the
/// estimate the probe started from. Probes stop at the maximum; after a success the next starts at once (from the
/// raised estimate: libwebrtc's further probing, a lifted limit climbed in round trips); after a failure the next
/// waits 2 s, twice as long after each failure in a row (8 s at most), unless a packet train raised the estimate
/// meanwhile. They start only while the path is neither overused nor draining a queue and loses nothing (a probe
/// on top of a queue overfills a full link and delays the frames behind it: measured, probes every 2 s, also while
/// queues drained, froze a viewer behind 400 kbit/s 8 times in 45 s, none without probes; probes every 2 s only
/// on a quiet path still made 1-6 freezes a minute, the doubling wait 0-3).
///
/// Packet trains: each frame's packets leave back to back (one send time); the rate at which a train of at least
/// 3 packets and 3000 bytes arrives is the path's bottleneck rate. A train that arrives at 3 × the estimate or more
/// shows a path much wider than the estimate (a link whose limit was lifted) and raises the estimate to 90 % of
/// twice the estimate (at most every 500 ms), and a probe follows within 0.5 s to find how much more there is:
/// a free probe, costing nothing on a link that is full. A token
/// bucket lets a train's first bytes through at line rate, which makes a full link's trains look up to about 2 ×
/// its rate: hence 3 ×.
///
/// No allocation per packet or feedback entry (fixed rings); not thread-safe: the owner serialises calls.
public struct SendSideBandwidthEstimator: Sendable {
    /// Bounds and the starting point.
    public struct Configuration: Sendable {
        /// The estimate never goes below this (bit/s).
        public var minBitrate = 50_000
        /// Nor above this (bit/s).
        public var maxBitrate = 20_000_000
        /// The estimate before any feedback (bit/s).
        public var startBitrate = 1_000_000
        /// Bounds and start as given.
        public init(minBitrate: Int = 50_000, maxBitrate: Int = 20_000_000, startBitrate: Int = 1_000_000) {
            self.minBitrate = minBitrate
            self.maxBitrate = maxBitrate
            self.startBitrate = startBitrate
        }
    }

    /// What the delay trend says about the path.
    public enum Usage: String, Sendable {
        /// Queues are stable: the rate may grow.
        case normal
        /// Queues grow: the rate must drop.
        case overusing
        /// Queues drain: hold the rate until they are empty.
        case underusing
    }

    /// The bounds.
    public let configuration: Configuration
    /// The current estimate, bit/s.
    public private(set) var estimate: Int
    /// The delay-based controller's rate, bit/s.
    public private(set) var delayBasedRate: Int
    /// The loss-based controller's rate, bit/s.
    public private(set) var lossBasedRate: Int
    /// What the last feedback's delay trend said.
    public private(set) var usage = Usage.normal
    /// The rate the receiver acknowledged over the last window, bit/s (nil before enough feedback).
    public private(set) var acknowledgedRate: Int?
    /// The loss fraction of the last loss window (0…1).
    public private(set) var lossFraction = 0.0
    /// Feedback messages taken, and packets they reported (received, lost).
    public private(set) var feedbacks = 0, packetsReported = 0, packetsLost = 0
    /// Probe clusters sent, those whose result raised the estimate, and the last result (bit/s).
    public private(set) var probes = 0, probesRaised = 0, lastProbeResult: Int?
    /// Packet trains that raised the estimate, and the last train's arrival rate (bit/s).
    public private(set) var trainsRaised = 0, lastTrainRate: Int?
    /// Packet trains measured (3 packets and 3000 bytes or more, sent at one instant).
    public private(set) var trainsMeasured = 0
    /// How long the last reported packet queued on the path: its one-way delay over the lowest of the last 5-10 s
    /// (µs; send and arrival clocks differ by a constant, which cancels). Shown, not acted on: measured, holding
    /// probes back while it was over 25 ms made the 5 → 0.5 → 5 Mbit/s step up take 3.1-6.1 s instead of 3.1-4.1.
    public private(set) var queueDelayUs: Int64 = 0

    // Sent packets by transport-wide sequence number (unwrapped), in a ring.
    private static let historySize = 8192
    private var sentSequence: [Int64]
    private var sentTimeUs: [Int64]
    private var sentBytes: [Int32]
    private var sentCluster: [UInt8]
    private var lastSent: Int64 = -1

    // Probing: the cluster being sent or waited for, and when the next may start.
    private struct Cluster {
        var id: UInt8
        var targetRate: Int
        /// The estimate when the probe started.
        var startEstimate: Int
        var startedUs: Int64
        var sending = true
        var packets = 0, reported = 0
        var firstSendUs = Int64.max, lastSendUs = Int64.min, firstArrivalUs = Int64.max, lastArrivalUs = Int64.min
        var bytes = 0, firstBytes = 0, lastBytes = 0
    }
    private var cluster: Cluster?
    private var nextClusterID: UInt8 = 1
    private var nextProbeUs: Int64 = .min
    /// Probes that failed in a row (the wait after a failure doubles with each).
    private var probeFailures = 0
    /// Probes that lost packets (after each, the next waited the longest).
    public private(set) var probesLost = 0

    // The lowest one-way delay (arrival - send) in the current and the previous 5 s window.
    private var oneWay = (currentMin: Int64.max, previousMin: Int64.max, windowStartUs: Int64.min / 2)

    // Packet trains: the packets sent at one instant (a frame), as they arrive.
    private var train = (sendUs: Int64(0), firstArrivalUs: Int64(0), lastArrivalUs: Int64(0), firstBytes: 0, bytes: 0, packets: 0, open: false)
    private var lastTrainRaiseUs: Int64 = .min / 2

    // Delay-based: packet groups (5 ms of send time), the trendline, the threshold, AIMD.
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

    // Acknowledged rate and loss windows.
    private var ackWindow = (startUs: Int64?.none, bytes: 0, lastUs: Int64(0))
    private var lossWindow = (startUs: Int64?.none, lost: 0, total: 0)
    /// What arrived in the loss window: bytes, first and last arrival (µs): under heavy loss, the rate the path delivered.
    private var lossWindowArrivals = (bytes: 0, firstUs: Int64.max, lastUs: Int64.min)
    private var lastLossUpdateUs: Int64 = .min / 2

    /// An estimator at `configuration.startBitrate`.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let start = min(max(configuration.startBitrate, configuration.minBitrate), configuration.maxBitrate)
        estimate = start
        delayBasedRate = start
        lossBasedRate = start
        sentSequence = [Int64](repeating: -1, count: SendSideBandwidthEstimator.historySize)
        sentTimeUs = [Int64](repeating: 0, count: SendSideBandwidthEstimator.historySize)
        sentBytes = [Int32](repeating: 0, count: SendSideBandwidthEstimator.historySize)
        sentCluster = [UInt8](repeating: 0, count: SendSideBandwidthEstimator.historySize)
    }

    /// Remembers a packet sent with transport-wide sequence number `sequence` at `timeUs` (the sender's
    /// monotonic clock, µs), `bytes` on the wire.
    /// `probeCluster` (from `startProbe`) marks a packet of a probe cluster (0: none).
    public mutating func packetSent(sequence: UInt16, timeUs: Int64, bytes: Int, probeCluster: UInt8 = 0) {
        let s = unwrap(sequence)
        lastSent = max(lastSent, s)
        let i = Int(s & Int64(SendSideBandwidthEstimator.historySize - 1))
        sentSequence[i] = s
        sentTimeUs[i] = timeUs
        sentBytes[i] = Int32(clamping: bytes)
        sentCluster[i] = 0
        if probeCluster != 0, var c = cluster, c.id == probeCluster, c.sending {
            sentCluster[i] = probeCluster
            c.packets += 1
            c.firstSendUs = min(c.firstSendUs, timeUs)
            if timeUs >= c.lastSendUs {
                c.lastSendUs = timeUs
                c.lastBytes = bytes
            }
            cluster = c
        }
    }

    /// A probe cluster to send now, if one is due: its id (for `packetSent`) and how many bytes to send in about
    /// 100 ms (twice the estimate, at most the maximum; the media sent meanwhile counts). Nil when the estimate is
    /// at the maximum, the path is overused or losing, or a probe ran recently.
    public mutating func startProbe(nowUs: Int64) -> (cluster: UInt8, bytes: Int)? {
        // Not while queues grow, nor while they drain (underusing): a probe on top of a queue overfills a full link
        // (measured: allowing probes while underusing froze a viewer behind 400 kbit/s 6-8 times a minute). A path
        // that widened shows in the packet trains.
        guard cluster == nil, nowUs >= nextProbeUs, feedbacks > 0, usage == .normal, lossFraction < 0.02,
            estimate < configuration.maxBitrate * 95 / 100
        else { return nil }
        let target = min(estimate * 2, configuration.maxBitrate)
        let id = nextClusterID
        nextClusterID = nextClusterID == 255 ? 1 : nextClusterID + 1
        cluster = Cluster(id: id, targetRate: target, startEstimate: estimate, startedUs: nowUs)
        probes += 1
        return (id, max(6 * 1200, target / 80)) // 100 ms of the target rate, at least 6 packets
    }

    /// The probe cluster's packets are all sent.
    public mutating func endProbe() { cluster?.sending = false }

    /// The unwrapped sequence number nearest the last one sent.
    private func unwrap(_ sequence: UInt16) -> Int64 {
        guard lastSent >= 0 else { return Int64(sequence) }
        let delta = Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: lastSent)))
        return max(0, lastSent + delta)
    }

    /// Takes one transport feedback message received at `nowUs` and returns the new estimate (bit/s).
    @discardableResult
    public mutating func feedback(_ fb: TransportFeedback, nowUs: Int64) -> Int {
        feedbacks += 1
        var s = unwrap(fb.baseSequence)
        for arrival in fb.arrivals {
            defer { s += 1 }
            let i = Int(s & Int64(SendSideBandwidthEstimator.historySize - 1))
            guard sentSequence[i] == s else { continue } // not ours, or too old
            packetsReported += 1
            lossWindow.total += 1
            guard let arrival else {
                packetsLost += 1
                lossWindow.lost += 1
                continue
            }
            acknowledge(bytes: Int(sentBytes[i]), arrivalUs: arrival)
            trainSample(sendUs: sentTimeUs[i], arrivalUs: arrival, bytes: Int(sentBytes[i]), nowUs: nowUs)
            lossWindowArrivals.bytes += Int(sentBytes[i])
            lossWindowArrivals.firstUs = min(lossWindowArrivals.firstUs, arrival)
            lossWindowArrivals.lastUs = max(lossWindowArrivals.lastUs, arrival)
            delaySample(sendUs: sentTimeUs[i], arrivalUs: arrival)
            queueSample(sendUs: sentTimeUs[i], arrivalUs: arrival)
            if sentCluster[i] != 0, var c = cluster, c.id == sentCluster[i] {
                c.reported += 1
                c.bytes += Int(sentBytes[i])
                if arrival < c.firstArrivalUs {
                    c.firstArrivalUs = arrival
                    c.firstBytes = Int(sentBytes[i])
                }
                c.lastArrivalUs = max(c.lastArrivalUs, arrival)
                cluster = c
            }
        }
        updateLoss(nowUs)
        updateRate(nowUs)
        finishProbe(nowUs)
        return estimate
    }

    /// Once the cluster is sent and reported (or a second has passed), its rate: bytes over the send span (less
    /// the last packet) and over the arrival span (less the first), the lower of the two. A result above the
    /// estimate raises both controllers to it.
    private mutating func finishProbe(_ nowUs: Int64) {
        guard let c = cluster, !c.sending else { return }
        let complete = c.packets > 0 && c.reported * 10 >= c.packets * 9
        guard complete || nowUs - c.startedUs >= 1_000_000 else { return }
        cluster = nil
        var result: Int?
        if c.reported >= 4, c.lastArrivalUs > c.firstArrivalUs, c.lastSendUs >= c.firstSendUs {
            let receive = Int64(c.bytes - c.firstBytes) * 8_000_000 / (c.lastArrivalUs - c.firstArrivalUs)
            let sendSpan = max(c.lastSendUs - c.firstSendUs, 1000) // a burst: at least 1 ms
            let send = Int64(c.bytes - c.lastBytes) * 8_000_000 / sendSpan
            result = Int(clamping: min(receive, send, Int64(c.targetRate) * 3 / 2))
        }
        lastProbeResult = result
        // Only a clear success counts (1.8 × the estimate; 1.5 × let a viewer behind 400 kbit/s raise itself into
        // overuse and freeze): a limited link's token bucket lets the first
        // bytes of a probe through at line rate, which makes a small overestimate look like room.
        // Judged against the estimate the probe started from (half its target): a packet train that raised the
        // estimate meanwhile must not turn the probe that confirms it into a failure.
        if let result, result * 10 >= c.targetRate * 9, usage != .overusing {
            probesRaised += 1
            let raised = clamp(result * 9 / 10)
            delayBasedRate = max(delayBasedRate, raised)
            lossBasedRate = max(lossBasedRate, raised)
            estimate = clamp(min(delayBasedRate, lossBasedRate))
            // The path carried what was asked: ask for twice as much at the next frame (libwebrtc's further
            // probing), so that a lifted limit is climbed in a few round trips instead of a step every 0.5 s.
            nextProbeUs = nowUs
            probeFailures = 0
        } else {
            // 2 s, doubling to 8 s: probes every 2 s on a full 400 kbit/s link froze its viewer 1-6 times a minute
            // (the doubling wait: 0-3). A probe that lost packets overfilled the path's queue (the frames behind it
            // lost theirs too: each such probe was a freeze): the longest wait at once.
            let lost = c.packets > 0 && !complete // judged after the second: under 90 % of it arrived
            if lost { probesLost += 1 }
            probeFailures = lost ? 8 : min(probeFailures + 1, 8)
            nextProbeUs =
                estimate * 2 >= c.startEstimate * 3
                ? nowUs // a train raised it meanwhile: probe from there
                : nowUs + min(8_000_000, 2_000_000 << (probeFailures - 1))
        }
    }

    // MARK: Queue delay

    /// The packet's one-way delay against the lowest of the last 5-10 s: how long it queued.
    private mutating func queueSample(sendUs: Int64, arrivalUs: Int64) {
        let (d, overflow) = arrivalUs.subtractingReportingOverflow(sendUs)
        guard !overflow else { return }
        if arrivalUs &- oneWay.windowStartUs >= 5_000_000 || arrivalUs < oneWay.windowStartUs {
            oneWay = (.max, oneWay.currentMin, arrivalUs)
        }
        oneWay.currentMin = min(oneWay.currentMin, d)
        let base = min(oneWay.currentMin, oneWay.previousMin)
        queueDelayUs = d > base ? (d &- base) : 0
    }

    // MARK: Packet trains

    /// One received packet, in the order of the feedback: packets sent at the same instant form a train.
    private mutating func trainSample(sendUs: Int64, arrivalUs: Int64, bytes: Int, nowUs: Int64) {
        if train.open && sendUs == train.sendUs {
            train.packets += 1
            train.bytes += bytes
            if arrivalUs < train.firstArrivalUs {
                train.firstArrivalUs = arrivalUs
                train.firstBytes = bytes
            }
            train.lastArrivalUs = max(train.lastArrivalUs, arrivalUs)
            return
        }
        if train.open { finishTrain(nowUs) }
        train = (sendUs, arrivalUs, arrivalUs, bytes, bytes, 1, true)
    }

    /// A complete train: its arrival rate (the bytes after the first over the arrival span, at least the
    /// feedback's 250 µs resolution); far above the estimate, it raises the estimate.
    private mutating func finishTrain(_ nowUs: Int64) {
        guard train.packets >= 3, train.bytes >= 3000 else { return }
        let span = max(train.lastArrivalUs - train.firstArrivalUs, 250)
        let rate = Int(clamping: Int64(train.bytes - train.firstBytes) * 8_000_000 / span)
        lastTrainRate = rate
        trainsMeasured += 1
        guard rate / 3 >= estimate, usage != .overusing, lossFraction < 0.02, nowUs - lastTrainRaiseUs >= 500_000 else { return }
        // Twice the estimate at most: measured, raising as far as a probe would (2.7 ×) made the step from 0.5 back to
        // 5 Mbit/s take 9.1 s instead of 2.1-5.1 (the larger tier's first frames overran the raise and it fell back).
        let raised = clamp(estimate * 2 * 9 / 10)
        guard raised > estimate else { return }
        lastTrainRaiseUs = nowUs
        trainsRaised += 1
        probeFailures = 0
        nextProbeUs = min(nextProbeUs, nowUs + 500_000) // room shown: a probe soon finds how much
        delayBasedRate = max(delayBasedRate, raised)
        lossBasedRate = max(lossBasedRate, raised)
        estimate = clamp(min(delayBasedRate, lossBasedRate))
    }

    // MARK: Acknowledged rate

    private mutating func acknowledge(bytes: Int, arrivalUs: Int64) {
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

    // MARK: Delay

    private mutating func delaySample(sendUs: Int64, arrivalUs: Int64) {
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

    // MARK: Rates

    private mutating func updateRate(_ nowUs: Int64) {
        let dt = Double(min(max(nowUs - (lastRateUpdateUs ?? nowUs), 0), 1_000_000)) / 1e6
        lastRateUpdateUs = nowUs
        switch usage {
        case .overusing:
            if nowUs - lastDecreaseUs >= 200_000 {
                let base = acknowledgedRate ?? delayBasedRate
                delayBasedRate = Int(0.85 * Double(base))
                lastDecreaseUs = nowUs
            }
        case .underusing: break // hold while queues drain
        case .normal:
            var next = Int(Double(delayBasedRate) * pow108(dt))
            // Not far beyond what the receiver gets: an application-limited sender would otherwise run away.
            if let ack = acknowledgedRate { next = min(next, max(delayBasedRate, ack * 3 / 2 + 10_000)) }
            delayBasedRate = next
        }
        delayBasedRate = clamp(delayBasedRate)
        estimate = clamp(min(delayBasedRate, lossBasedRate))
    }

    private mutating func updateLoss(_ nowUs: Int64) {
        let start = lossWindow.startUs ?? nowUs
        lossWindow.startUs = start
        guard nowUs - start >= 250_000, lossWindow.total >= 10 else { return }
        lossFraction = Double(lossWindow.lost) / Double(lossWindow.total)
        if lossFraction > 0.1 {
            lossBasedRate = Int(Double(min(lossBasedRate, estimate)) * (1 - 0.5 * lossFraction))
            // Heavy loss on a path that suddenly carries less (a link stepping down): what it delivered in the
            // window is the better bound, reached at once instead of after several halvings.
            let a = lossWindowArrivals
            if lossFraction > 0.25, a.lastUs - a.firstUs >= 100_000 {
                let delivered = Int(Int64(a.bytes) * 8_000_000 / (a.lastUs - a.firstUs))
                lossBasedRate = min(lossBasedRate, delivered)
            }
        } else if lossFraction < 0.02 {
            // Grow from the current estimate, so it never sits far above the delay-based rate.
            lossBasedRate = Int(Double(max(estimate, min(lossBasedRate, delayBasedRate))) * 1.05) + 1000
        }
        lossBasedRate = clamp(lossBasedRate)
        lossWindow = (nowUs, 0, 0)
        lossWindowArrivals = (0, .max, .min)
    }

    private func clamp(_ r: Int) -> Int { min(max(r, configuration.minBitrate), configuration.maxBitrate) }

    /// 1.08 to the power of `seconds` (multiplicative increase of 8 % per second).
    private func pow108(_ seconds: Double) -> Double {
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
