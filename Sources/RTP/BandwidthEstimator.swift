/// A send-side bandwidth estimate for one receiver, in the spirit of Google congestion control
/// (draft-ietf-rmcat-gcc): every sent packet is remembered by its transport-wide sequence number; transport
/// feedback says when each arrived. A delay-based controller (a trendline of the one-way delay variation
/// between groups of packets, an adaptive overuse threshold, AIMD: +8 %/s while the path is not loaded, down to
/// 85 % of the delivered rate on overuse) and a loss-based one (down by half the loss above 10 %, and to the rate
/// the path delivered when more than a quarter is lost, over 250 ms windows; +5 % below 2 %)
/// each propose a rate; the estimate is the lower, within `Configuration`'s bounds. A queue the trend cannot see,
/// because it stands instead of growing, holds the delay-based rate while the last reported packet queued over
/// 100 ms: behind a 400 kbit/s link with 200 ms of queue, +8 %/s on a standing queue of 150-240 ms had taken the
/// media to the queue's limit, where each key frame lost packets.
///
/// Probing: a sender whose traffic is below what the path may carry learns nothing from it (the estimate
/// follows what is acknowledged). `startProbe(nowUs:)` says when to send a probe cluster (packets tagged with its
/// id in `packetSent`, about 200 ms of twice the estimate). A cluster is judged, as libwebrtc's probe estimator
/// judges one, only when at least 5 of its packets and 80 % of them were reported; its rate is the lower of its send
/// rate and the rate it arrived at over its whole duration (from the first packet's send to the last one's arrival,
/// less the path's base delay, the last packet's bytes left out), and a cluster that arrived at under 90 % of its
/// send rate saturated the path: it reads as 95 % of its arrival rate. A result of at least 90 % of the target
/// raises the estimate to 90 % of it; a shorter one that lost nothing raises it to 90 % of the result when that is
/// over 1.1 × the estimate the probe started from (`probesRaisedShort`; the probe still counts as failed). Probes
/// stop at the maximum; they start only while the path is neither overused nor draining a queue, loses nothing,
/// and the last packet reported queued 25 ms at most (a probe on top of a queue overfills a full link and delays
/// the frames behind it); after a failure the next waits 2 s, then 4 s while they keep failing, 8 s after one that
/// lost packets; but a probe that failed while the media queued on the path is followed at once when no packet has
/// queued for a second since (the limit was lifted; `probesOnClearedQueue`).
///
/// A token bucket (`tc tbf`, a cheap router, a cellular link) lets a refilled burst through at line rate: a probe
/// no larger than the bucket arrives as fast as it left, whatever the link's rate. Hence 200 ms of probe (a 5 kB
/// bucket on a 400 kbit/s link passes only the first 100 ms of a probe at twice its rate), and hence the rule that
/// a raise holds only if the rate acknowledged after it confirms it: every window of at least 300 ms of arrivals,
/// the rate the path delivered is compared with the rate its packets were sent at (the lost ones included); when
/// it delivered under 85 % of it and less than the estimate, the estimate goes down to 95 % of what it delivered
/// (`deliveryCaps`), the bound that also takes over when a short queue drops. A probe's raise capped so within 2 s
/// counts as a failed probe; the next probe (libwebrtc's further probing, a lifted limit climbed in round trips)
/// waits for a window sent after the raise that confirms it, 3 s at most.
///
/// Packet trains: each key frame's first packets leave back to back (one send time); a train of at least 5 packets
/// and 4000 bytes is measured by the rate its bytes after the first arrived at (over at least the feedback's 250 µs).
/// A train never raises the estimate: a refilled bucket passes one at line rate (55-97 Mbit/s measured behind a
/// 400 kbit/s `tbf`), so a train at 3 × the estimate or more only calls a probe (after 0.5 s, and not before half
/// the wait the last failure set), which the rules above judge.
///
/// One part per concern, each tested on its own: `DelayBasedController`, `LossBasedController`, `DeliveryMonitor`
/// (acknowledged and delivered rates, queue delay) and `ProbeResults` (probes and trains); this type keeps the sent
/// packets, feeds each report to them and combines their rates. No allocation per packet or feedback entry (fixed
/// rings); not thread-safe: the owner serialises calls.
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
        /// The estimate before any feedback: `startBitrate` within the bounds.
        public var startEstimate: Int { min(max(startBitrate, minBitrate), maxBitrate) }
        /// What media may use before the path is measured (`mediaRate`): half the start, at least the minimum.
        public var startMediaRate: Int { min(startEstimate, max(minBitrate, startBitrate / 2)) }
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
    public var delayBasedRate: Int { delay.rate }
    /// The loss-based controller's rate, bit/s.
    public var lossBasedRate: Int { loss.rate }
    /// What the last feedback's delay trend said.
    public var usage: Usage { delay.usage }
    /// The rate the receiver acknowledged over the last window, bit/s (nil before enough feedback).
    public var acknowledgedRate: Int? { delivery.acknowledgedRate }
    /// The loss fraction of the last loss window (0…1).
    public var lossFraction: Double { loss.fraction }
    /// Feedback messages taken, and packets they reported (received, lost).
    public private(set) var feedbacks = 0, packetsReported = 0, packetsLost = 0
    /// Probe clusters sent.
    public var probes: Int { probe.probes }
    /// Probe clusters whose result raised the estimate.
    public var probesRaised: Int { probe.probesRaised }
    /// The last probe result (bit/s).
    public var lastProbeResult: Int? { probe.lastProbeResult }
    /// Packet trains fast enough to call a probe (they raise nothing themselves).
    public var trainsRaised: Int { probe.trainsRaised }
    /// The last train's arrival rate (bit/s).
    public var lastTrainRate: Int? { probe.lastTrainRate }
    /// Packet trains measured (5 packets and 4000 bytes or more, sent at one instant).
    public var trainsMeasured: Int { probe.trainsMeasured }
    /// Times the estimate was brought down to what the path delivered (it delivered under 85 % of what was sent
    /// over 300 ms or more).
    public private(set) var deliveryCaps = 0
    /// The last delivered rate measured (bit/s).
    public var deliveredRate: Int? { delivery.deliveredRate }
    /// How long the last reported packet queued on the path: its one-way delay over the lowest of the last 5-10 s
    /// (µs; send and arrival clocks differ by a constant, which cancels). Shown, not acted on: measured, holding
    /// probes back while it was over 25 ms made the 5 → 0.5 → 5 Mbit/s step up take 3.1-6.1 s instead of 3.1-4.1.
    public var queueDelayUs: Int64 { delivery.queueDelayUs }
    /// Probes that lost packets (after each, the next waited the longest).
    public var probesLost: Int { probe.probesLost }
    /// Probes whose raise the delivered rate then capped (counted in `probesRaised` too, and as failures).
    public var probesCapped: Int { probe.probesCapped }
    /// Probes that fell short of their target but measured over 1.1 × the estimate they started from, which then
    /// went up to 90 % of what they measured (failures all the same: the next waits).
    public var probesRaisedShort: Int { probe.probesRaisedShort }
    /// Probes started early because the path's queue vanished after failed ones (a lifted limit).
    public var probesOnClearedQueue: Int { probe.probesOnClearedQueue }

    // The concerns: the delay trend, the loss windows, what the path delivers, the probes and trains.
    private var delay: DelayBasedController
    private var loss: LossBasedController
    private var delivery = DeliveryMonitor()
    private var probe = ProbeResults()

    // Sent packets by transport-wide sequence number (unwrapped), in a ring.
    private static let historySize = 8192
    private var sentSequence: [Int64]
    private var sentTimeUs: [Int64]
    private var sentBytes: [Int32]
    private var sentCluster: [UInt8]
    private var lastSent: Int64 = -1

    /// Probes (and the probes trains call) stop once the estimate reaches this share of the maximum (95 %): a
    /// tier running at its maximum is joined at the same share of it (a viewer's estimate stops climbing there).
    public static let probeCeilingPercent = 95
    /// A packet that queued longer than this counts as queued (5 ms: a 1200-byte packet takes 19-24 ms on a
    /// 400-500 kbit/s link, 2 ms on 5 Mbit/s).
    static let queuedUs: Int64 = 5_000
    /// A probe starts only when the last reported packet queued this long at most.
    static let probeQueueUs: Int64 = 25_000
    /// Over this much queue the delay-based rate does not grow.
    static let standingQueueUs: Int64 = 100_000
    /// How long the queue must stay under `queuedUs` before it calls a probe early.
    static let clearedQueueUs: Int64 = 1_000_000

    /// What media may be sent at (bit/s): the estimate, except while what the path delivers is not yet measured
    /// (before the first 300 ms delivery window): then at most half the configured start. The start is a guess,
    /// and media at the whole guess overfilled a small link before the first feedback could say so (behind
    /// 400 kbit/s with a 5 kB bucket, simulated with the tier ladder: 16 packets dropped in the first 5 s at a
    /// 1 Mbit/s start, 3 at half of it). The estimate stays the guess (a viewer is placed by it); the first window
    /// bounds it to 1.5 × what it delivered (when the media used at least half this rate), and probes from then on
    /// find a wider path.
    public var mediaRate: Int {
        deliveredRate != nil ? estimate : min(estimate, configuration.startMediaRate)
    }

    /// An estimator at `configuration.startBitrate`.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        let start = configuration.startEstimate
        estimate = start
        delay = DelayBasedController(rate: start)
        loss = LossBasedController(rate: start)
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
        sentCluster[i] = probe.sent(cluster: probeCluster, timeUs: timeUs, bytes: bytes) ? probeCluster : 0
    }
    /// A probe cluster to send now, if one is due: its id (for `packetSent`) and how many bytes to send in about
    /// 200 ms (twice the estimate, at most the maximum; the media sent meanwhile counts). Nil when the estimate is
    /// at the maximum, the path is overused or losing, the media queues over 25 ms on it, a probe ran recently, or
    /// what the path delivers is not yet measured (the first 300 ms of feedback).
    public mutating func startProbe(nowUs: Int64) -> (cluster: UInt8, bytes: Int)? {
        // The conditions and the measurements behind them: `ProbeResults.start`.
        let pathAllows =
            deliveredRate != nil && usage == .normal && lossFraction < 0.02 && queueDelayUs <= Self.probeQueueUs
            && estimate < configuration.maxBitrate * Self.probeCeilingPercent / 100
        return probe.start(nowUs: nowUs, pathAllows: pathAllows, estimate: estimate, maxBitrate: configuration.maxBitrate)
    }

    /// The probe cluster's packets are all sent.
    public mutating func endProbe() { probe.end() }

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
            let (sendUs, bytes) = (sentTimeUs[i], Int(sentBytes[i]))
            packetsReported += 1
            loss.reported(lost: arrival == nil)
            delivery.reported(bytes: bytes, sendUs: sendUs)
            guard let arrival else {
                packetsLost += 1
                continue
            }
            delivery.arrived(bytes: bytes, arrivalUs: arrival)
            let path = ProbeResults.Path(
                estimate: estimate, usage: usage, lossFraction: lossFraction,
                ceiling: configuration.maxBitrate * Self.probeCeilingPercent / 100)
            probe.trainSample(sendUs: sendUs, arrivalUs: arrival, bytes: bytes, nowUs: nowUs, path: path)
            loss.arrived(bytes: bytes, arrivalUs: arrival)
            delay.sample(sendUs: sendUs, arrivalUs: arrival)
            delivery.queueSample(sendUs: sendUs, arrivalUs: arrival)
            if queueDelayUs > Self.queuedUs { probe.queued(nowUs: nowUs) }
            if sentCluster[i] != 0 { probe.arrived(cluster: sentCluster[i], bytes: bytes, arrivalUs: arrival) }
        }
        loss.update(nowUs: nowUs, estimate: estimate, delayBasedRate: delay.rate, bounds: bounds)
        delay.update(nowUs: nowUs, queueDelayUs: queueDelayUs, acknowledgedRate: acknowledgedRate, bounds: bounds)
        estimate = clamp(min(delay.rate, loss.rate))
        boundByDelivery(nowUs)
        if let result = probe.finish(nowUs: nowUs, usage: usage, baseDelayUs: delivery.baseDelayUs) { raise(toNinetyPercentOf: result) }
        return estimate
    }

    /// Every 300 ms or more of reported packets (by arrival and by send time): what the path delivered against
    /// what was sent. Under 85 % of it, and under the estimate, the estimate drops to 95 % of what was delivered,
    /// and a probe that raised it within 2 s failed after all; a window sent wholly after a probe's raise that
    /// shows no such shortfall confirms it (the next probe may start). The first window also bounds the start's
    /// guess to 1.5 × what it delivered when the media used at least half of what it was allowed (`mediaRate`).
    private mutating func boundByDelivery(_ nowUs: Int64) {
        let allowed = mediaRate
        guard let w = delivery.closeWindow() else { return }
        if w.first, w.sent * 2 >= Int64(allowed), w.delivered * 3 / 2 < estimate {
            // The start was a guess, and media went at half of it: when it used at least half of that, the path has
            // shown what it carries at that rate, and a guess over 1.5 × it is not founded (a probe at twice 2 × a
            // start's delivery lost packets behind a 5 kB bucket). A quiet picture's few packets say nothing of the
            // path (they would have moved a 640x480 viewer off its full tier at once): the guess stands. Probes,
            // from now on, find a wider path.
            lower(to: w.delivered * 3 / 2)
        }
        if Int64(w.delivered) * 100 < w.sent * 85, w.delivered < estimate {
            deliveryCaps += 1
            lower(to: w.delivered * 95 / 100)
            probe.deliveryCapped(nowUs: nowUs)
        } else {
            probe.deliveryConfirmed(firstSendUs: w.firstSendUs, nowUs: nowUs)
        }
    }

    /// Both controllers (and so the estimate) up to 90 % of a probe's `result`, at least.
    private mutating func raise(toNinetyPercentOf result: Int) {
        let raised = clamp(result * 9 / 10)
        delay.rate = max(delay.rate, raised)
        loss.rate = max(loss.rate, raised)
        estimate = clamp(min(delay.rate, loss.rate))
    }

    /// Both controllers (and so the estimate) down to `bound` at most.
    private mutating func lower(to bound: Int) {
        let bound = clamp(bound)
        delay.rate = min(delay.rate, bound)
        loss.rate = min(loss.rate, bound)
        estimate = clamp(min(delay.rate, loss.rate))
    }

    private var bounds: (min: Int, max: Int) { (configuration.minBitrate, configuration.maxBitrate) }
    private func clamp(_ r: Int) -> Int { min(max(r, configuration.minBitrate), configuration.maxBitrate) }
}
