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
    /// Packet trains fast enough to call a probe (they raise nothing themselves), and the last train's arrival
    /// rate (bit/s).
    public private(set) var trainsRaised = 0, lastTrainRate: Int?
    /// Packet trains measured (5 packets and 4000 bytes or more, sent at one instant).
    public private(set) var trainsMeasured = 0
    /// Times the estimate was brought down to what the path delivered (it delivered under 85 % of what was sent
    /// over 300 ms or more), and the last delivered rate measured (bit/s).
    public private(set) var deliveryCaps = 0, deliveredRate: Int?
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
        var bytes = 0, lastBytes = 0, lastArrivalBytes = 0
    }
    private var cluster: Cluster?
    private var nextClusterID: UInt8 = 1
    private var nextProbeUs: Int64 = .min
    /// Probes that failed in a row (the wait after a failure doubles with each).
    private var probeFailures = 0
    /// The last failed probe lost packets (the next waits 8 s).
    private var lastProbeLost = false
    /// Probes that lost packets (after each, the next waited the longest).
    public private(set) var probesLost = 0
    /// Probes whose raise the delivered rate then capped (counted in `probesRaised` too, and as failures).
    public private(set) var probesCapped = 0
    /// Probes that fell short of their target but measured over 1.1 × the estimate they started from, which then
    /// went up to 90 % of what they measured (failures all the same: the next waits).
    public private(set) var probesRaisedShort = 0
    /// When the last probe ended (judged), and when the last one raised the estimate (µs).
    private var lastProbeEndUs: Int64 = .min / 2
    private var lastProbeRaiseUs: Int64 = .min / 2
    /// A probe's raise not yet confirmed by a delivery window sent after it.
    private var awaitingConfirmation = false
    /// When a reported packet last queued more than `queuedUs` on the path (the sender's clock, at its feedback).
    private var lastQueuedUs: Int64 = .min / 2
    /// The last probe started on its schedule while the media queued on the path (within `clearedQueueUs` before
    /// it: the path was the bottleneck then). If it failed without losing packets, the queue's vanishing may call
    /// the next probe early; an early probe never sets it, so early probes never follow each other.
    private var probeStartedOnQueue = false
    /// Probes started early because the path's queue vanished after failed ones (a lifted limit).
    public private(set) var probesOnClearedQueue = 0
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

    // What the path delivered against what was sent, over windows of at least 300 ms.
    private var delivery = DeliveryWindow()
    private struct DeliveryWindow {
        var sentBytes = 0, firstSendUs = Int64.max, lastSendUs = Int64.min
        var arrivedBytes = 0, firstArrivalUs = Int64.max, lastArrivalUs = Int64.min
    }

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
    /// 200 ms (twice the estimate, at most the maximum; the media sent meanwhile counts). Nil when the estimate is
    /// at the maximum, the path is overused or losing, the media queues over 25 ms on it, a probe ran recently, or
    /// what the path delivers is not yet measured (the first 300 ms of feedback).
    public mutating func startProbe(nowUs: Int64) -> (cluster: UInt8, bytes: Int)? {
        // Not while queues grow, nor while they drain (underusing): a probe on top of a queue overfills a full link
        // (measured: allowing probes while underusing froze a viewer behind 400 kbit/s 6-8 times a minute). A path
        // that widened shows in the packet trains.
        // A path on which the media queued while probes failed, and now queues nothing for a second, has widened
        // (a lifted limit: 15-160 ms of queue behind 500 kbit/s, 0.2 ms once it is 5 Mbit/s): probe at once instead
        // of after the 2-4 s wait.
        // Not after an early one, and only when the media queued before the probe (a probe queues on any path it
        // overfills: that says nothing of a change). After one that lost packets too: a probe sent as a 500 kbit/s
        // limit was lifted lost packets to the change, and the 8 s wait then made the step up take 11 s.
        // Not while the media itself queues over 25 ms: on a full link with a short queue (400 kbit/s, 5 kB of bucket,
        // 200 ms) probes started on 100-200 ms of queue lost packets and froze the viewer (three of six freezes in
        // one strict run); the probe waits for a frame whose feedback shows the queue emptied.
        // Not before the path's delivery is measured (the first 300 ms window, `boundByDelivery`): until then the
        // estimate is only the configured start, and twice it for 200 ms overfilled a small link at once (1 Mbit/s
        // behind 400 kbit/s with a 5 kB bucket: 38 packets dropped in the first half second, 7 with the wait).
        let failedOnQueue = probeFailures > 0 && probeStartedOnQueue
        let queueCleared =
            failedOnQueue && nowUs - lastQueuedUs >= Self.clearedQueueUs && nowUs - lastProbeEndUs >= Self.clearedQueueUs
        guard cluster == nil, nowUs >= nextProbeUs || queueCleared, deliveredRate != nil, usage == .normal, lossFraction < 0.02,
            queueDelayUs <= Self.probeQueueUs,
            estimate < configuration.maxBitrate * Self.probeCeilingPercent / 100
        else { return nil }
        let early = nowUs < nextProbeUs
        if early { probesOnClearedQueue += 1 }
        probeStartedOnQueue = !early && nowUs - lastQueuedUs < Self.clearedQueueUs
        let target = min(estimate * 2, configuration.maxBitrate)
        let id = nextClusterID
        nextClusterID = nextClusterID == 255 ? 1 : nextClusterID + 1
        cluster = Cluster(id: id, targetRate: target, startEstimate: estimate, startedUs: nowUs)
        probes += 1
        return (id, max(6 * 1200, target / 40)) // 200 ms of the target rate, at least 6 packets
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
            delivery.sentBytes += Int(sentBytes[i])
            delivery.firstSendUs = min(delivery.firstSendUs, sentTimeUs[i])
            delivery.lastSendUs = max(delivery.lastSendUs, sentTimeUs[i])
            guard let arrival else {
                packetsLost += 1
                lossWindow.lost += 1
                continue
            }
            delivery.arrivedBytes += Int(sentBytes[i])
            delivery.firstArrivalUs = min(delivery.firstArrivalUs, arrival)
            delivery.lastArrivalUs = max(delivery.lastArrivalUs, arrival)
            acknowledge(bytes: Int(sentBytes[i]), arrivalUs: arrival)
            trainSample(sendUs: sentTimeUs[i], arrivalUs: arrival, bytes: Int(sentBytes[i]), nowUs: nowUs)
            lossWindowArrivals.bytes += Int(sentBytes[i])
            lossWindowArrivals.firstUs = min(lossWindowArrivals.firstUs, arrival)
            lossWindowArrivals.lastUs = max(lossWindowArrivals.lastUs, arrival)
            delaySample(sendUs: sentTimeUs[i], arrivalUs: arrival)
            queueSample(sendUs: sentTimeUs[i], arrivalUs: arrival)
            if queueDelayUs > Self.queuedUs { lastQueuedUs = nowUs }
            if sentCluster[i] != 0, var c = cluster, c.id == sentCluster[i] {
                c.reported += 1
                c.bytes += Int(sentBytes[i])
                c.firstArrivalUs = min(c.firstArrivalUs, arrival)
                if arrival >= c.lastArrivalUs {
                    c.lastArrivalUs = arrival
                    c.lastArrivalBytes = Int(sentBytes[i])
                }
                cluster = c
            }
        }
        updateLoss(nowUs)
        updateRate(nowUs)
        boundByDelivery(nowUs)
        finishProbe(nowUs)
        return estimate
    }

    /// Once the cluster is sent and reported (or a second has passed), its rate: the lower of its send rate (bytes
    /// less the last packet's over the send span) and its delivery rate (bytes less the last arrival's, from the
    /// first send to the last arrival less the path's base delay); under 90 % of the send rate, 95 % of the delivery
    /// rate. A result of 90 % of the target raises both controllers to 90 % of it.
    private mutating func finishProbe(_ nowUs: Int64) {
        guard let c = cluster, !c.sending else { return }
        let complete = c.packets > 0 && c.reported * 10 >= c.packets * 9
        guard complete || nowUs - c.startedUs >= 1_000_000 else { return }
        cluster = nil
        lastProbeEndUs = nowUs
        var result: Int?
        // libwebrtc's minimums: 5 packets and 80 % of them reported.
        if c.reported >= 5, c.reported * 5 >= c.packets * 4, c.lastArrivalUs > c.firstArrivalUs, c.lastSendUs >= c.firstSendUs {
            let sendSpan = max(c.lastSendUs - c.firstSendUs, 1000) // a burst: at least 1 ms
            let send = Int64(c.bytes - c.lastBytes) * 8_000_000 / sendSpan
            // The whole duration: from the first send until the last packet was there, on the path's clock (the
            // base one-way delay taken off); without a base yet, the arrival span.
            let base = min(oneWay.currentMin, oneWay.previousMin)
            var span = c.lastArrivalUs - c.firstArrivalUs
            if base != .max { span = max(span, c.lastArrivalUs &- base &- c.firstSendUs) }
            let receive = Int64(c.bytes - c.lastArrivalBytes) * 8_000_000 / max(span, 250)
            var rate = min(receive, send)
            if receive * 10 < send * 9 { rate = receive * 95 / 100 } // the path was full: what it delivered
            result = Int(clamping: min(rate, Int64(c.targetRate) * 3 / 2))
        }
        lastProbeResult = result
        // Only a clear success counts (90 % of twice the estimate the probe started from; 1.5 × let a viewer behind
        // 400 kbit/s raise itself into overuse and freeze). Judged against the start: a rise meanwhile must not turn
        // the probe that confirms it into a failure.
        if let result, result * 10 >= c.targetRate * 9, usage != .overusing {
            probesRaised += 1
            raise(toNinetyPercentOf: result, nowUs)
            // The path carried what was asked: the next probe, twice as large, once the rate acknowledged after
            // this raise confirms it (`boundByDelivery`; 3 s at most), so that a token bucket's burst that passed
            // the probe whole is found out before it is built on.
            awaitingConfirmation = true
            nextProbeUs = nowUs + 3_000_000
            probeFailures = 0
        } else {
            // 2 s, then 4 s: probes every 2 s on a full 400 kbit/s link froze its viewer 1-6 times a minute (a
            // doubling wait: 0-3; those probes' raises were not yet capped by the delivery after them, and 8 s made
            // a lifted limit wait up to 8 s for its first probe). A probe that lost packets overfilled the path's
            // queue (the frames behind it lost theirs too: each such probe was a freeze): 8 s.
            let lost = c.packets > 0 && !complete // judged after the second: under 90 % of it arrived
            if lost { probesLost += 1 }
            // Short of its target, a probe still measured the path (the lower of its send and arrival rates, 95 %
            // of the arrival rate when it filled the path: never more than the path carried). When 90 % of that is
            // more than 1.1 × the estimate it started from, and nothing was lost, the estimate goes up to it, as
            // libwebrtc takes a probe's result: behind 400 kbit/s a viewer on 320x180, whose encoder sent 100 of
            // its 200 kbit/s (the estimate held at 1.5 × that), saw its probes at twice 165 kbit/s measure 184-270
            // and fail one by one, and stayed on 320x180 for the whole minute while 640x360 needed 195.
            if !lost, let result, usage != .overusing, result * 9 / 10 > c.startEstimate * 11 / 10 {
                probesRaisedShort += 1
                raise(toNinetyPercentOf: result, nowUs)
            }
            probeFailed(nowUs, longest: lost)
        }
    }

    /// Both controllers (and so the estimate) up to 90 % of a probe's `result`, at least; the raise's time noted (a
    /// delivery shortfall within 2 s caps it, `boundByDelivery`).
    private mutating func raise(toNinetyPercentOf result: Int, _ nowUs: Int64) {
        let raised = clamp(result * 9 / 10)
        delayBasedRate = max(delayBasedRate, raised)
        lossBasedRate = max(lossBasedRate, raised)
        estimate = clamp(min(delayBasedRate, lossBasedRate))
        lastProbeRaiseUs = nowUs
    }

    /// Both controllers (and so the estimate) down to `bound` at most.
    private mutating func lower(to bound: Int) {
        let bound = clamp(bound)
        delayBasedRate = min(delayBasedRate, bound)
        lossBasedRate = min(lossBasedRate, bound)
        estimate = clamp(min(delayBasedRate, lossBasedRate))
    }

    /// The wait after a failed probe: 2 s, then 4 s for each further failure in a row; 8 s after one that lost
    /// packets (`longest`).
    private mutating func probeFailed(_ nowUs: Int64, longest: Bool) {
        probeFailures = min(probeFailures + 1, 8)
        lastProbeLost = longest
        nextProbeUs = nowUs + probeWaitUs
        awaitingConfirmation = false
    }

    private var probeWaitUs: Int64 {
        if probeFailures == 0 { return 0 }
        // A lossy probe, or a second failure in a row whose last probe started on its schedule while the media
        // queued (a full link: behind 400 kbit/s none of 70 such probes raised the estimate, and some froze the
        // viewer): 8 s. A lifted limit is found sooner by the queue's vanishing (`clearedQueueUs`).
        if lastProbeLost || (probeStartedOnQueue && probeFailures >= 2) { return 8_000_000 }
        return min(4_000_000, 2_000_000 << (probeFailures - 1))
    }

    // MARK: Delivery

    /// Every 300 ms or more of reported packets (by arrival and by send time): what the path delivered against
    /// what was sent. Under 85 % of it, and under the estimate, the estimate drops to 95 % of what was delivered,
    /// and a probe that raised it within 2 s failed after all; a window sent wholly after a probe's raise that
    /// shows no such shortfall confirms it (the next probe may start). The first window also bounds the start's
    /// guess to 1.5 × what it delivered when the media used at least half of what it was allowed (`mediaRate`).
    private mutating func boundByDelivery(_ nowUs: Int64) {
        let d = delivery
        guard d.lastArrivalUs - d.firstArrivalUs >= 300_000, d.lastSendUs - d.firstSendUs >= 300_000 else { return }
        delivery = DeliveryWindow()
        let sent = Int64(d.sentBytes) * 8_000_000 / (d.lastSendUs - d.firstSendUs)
        let delivered = Int(clamping: Int64(d.arrivedBytes) * 8_000_000 / (d.lastArrivalUs - d.firstArrivalUs))
        let (first, allowed) = (deliveredRate == nil, mediaRate)
        deliveredRate = delivered
        if first, sent * 2 >= Int64(allowed), delivered * 3 / 2 < estimate {
            // The start was a guess, and media went at half of it: when it used at least half of that, the path has
            // shown what it carries at that rate, and a guess over 1.5 × it is not founded (a probe at twice 2 × a
            // start's delivery lost packets behind a 5 kB bucket). A quiet picture's few packets say nothing of the
            // path (they would have moved a 640x480 viewer off its full tier at once): the guess stands. Probes,
            // from now on, find a wider path.
            lower(to: delivered * 3 / 2)
        }
        if Int64(delivered) * 100 < sent * 85, delivered < estimate {
            deliveryCaps += 1
            lower(to: delivered * 95 / 100)
            if awaitingConfirmation || nowUs - lastProbeRaiseUs < 2_000_000 {
                probesCapped += 1
                probeFailed(nowUs, longest: false)
            }
        } else if awaitingConfirmation, d.firstSendUs >= lastProbeRaiseUs {
            awaitingConfirmation = false
            nextProbeUs = nowUs
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

    /// A complete train of 5 packets and 4000 bytes or more: its arrival rate (the bytes after the first over the
    /// arrival span, at least the feedback's 250 µs resolution). Far above the estimate it calls a probe (after
    /// 0.5 s, and not before half the wait the last failed probe set): it raises nothing itself, since a token
    /// bucket's refilled burst passes a train at line rate.
    private mutating func finishTrain(_ nowUs: Int64) {
        guard train.packets >= 5, train.bytes >= 4000 else { return }
        let span = max(train.lastArrivalUs - train.firstArrivalUs, 250)
        let rate = Int(clamping: Int64(train.bytes - train.firstBytes) * 8_000_000 / span)
        lastTrainRate = rate
        trainsMeasured += 1
        guard rate / 3 >= estimate, usage != .overusing, lossFraction < 0.02, !awaitingConfirmation, cluster == nil,
            nowUs - lastTrainRaiseUs >= 500_000, estimate < configuration.maxBitrate * Self.probeCeilingPercent / 100
        else { return }
        let due = max(nowUs + 500_000, lastProbeEndUs + probeWaitUs / 2)
        guard due < nextProbeUs else { return }
        lastTrainRaiseUs = nowUs
        trainsRaised += 1
        nextProbeUs = due
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
            guard queueDelayUs <= Self.standingQueueUs else { break } // a standing queue: hold
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
