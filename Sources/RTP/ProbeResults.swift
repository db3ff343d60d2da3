/// The send-side estimator's probes and packet trains: when the next probe cluster may start, what each cluster's
/// packets measured, and what a result does (see `SendSideBandwidthEstimator` for the rules and the measurements
/// behind them). A cluster is judged, as libwebrtc's probe estimator judges one, only when at least 5 of its
/// packets and 80 % of them were reported; its rate is the lower of its send rate and the rate it arrived at over
/// its whole duration (from the first send to the last arrival, less the path's base delay, the last packet's bytes
/// left out), and one that arrived under 90 % of its send rate saturated the path: it reads as 95 % of its arrival
/// rate. A packet train (a key frame's first packets, sent at one instant) only calls a probe. Part of
/// `SendSideBandwidthEstimator`, which applies the raises this returns.
struct ProbeResults: Sendable {
    /// The cluster being sent or waited for.
    struct Cluster: Sendable {
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

    /// What the path and the estimate say when a probe or a train is weighed.
    struct Path: Sendable {
        var estimate: Int, usage: SendSideBandwidthEstimator.Usage, lossFraction: Double, ceiling: Int
    }

    private(set) var cluster: Cluster?
    private var nextClusterID: UInt8 = 1
    private(set) var nextProbeUs: Int64 = .min
    /// Probes that failed in a row (the wait after a failure doubles with each).
    private var probeFailures = 0
    /// The last failed probe lost packets (the next waits 8 s).
    private var lastProbeLost = false
    /// Probe clusters sent, those whose result raised the estimate, and the last result (bit/s).
    private(set) var probes = 0, probesRaised = 0, lastProbeResult: Int?
    /// Probes that lost packets, whose raise delivery then capped, and short ones that raised all the same.
    private(set) var probesLost = 0, probesCapped = 0, probesRaisedShort = 0
    /// When the last probe ended (judged), and when the last one raised the estimate (µs).
    private(set) var lastProbeEndUs: Int64 = .min / 2, lastProbeRaiseUs: Int64 = .min / 2
    /// A probe's raise not yet confirmed by a delivery window sent after it.
    private(set) var awaitingConfirmation = false
    /// When a reported packet last queued more than `queuedUs` on the path (the sender's clock, at its feedback).
    private var lastQueuedUs: Int64 = .min / 2
    /// The last probe started on its schedule while the media queued on the path (within `clearedQueueUs` before
    /// it: the path was the bottleneck then). If it failed without losing packets, the queue's vanishing may call
    /// the next probe early; an early probe never sets it, so early probes never follow each other.
    private var probeStartedOnQueue = false
    /// Probes started early because the path's queue vanished after failed ones (a lifted limit).
    private(set) var probesOnClearedQueue = 0
    // Packet trains: the packets sent at one instant (a frame), as they arrive.
    private var train = (sendUs: Int64(0), firstArrivalUs: Int64(0), lastArrivalUs: Int64(0), firstBytes: 0, bytes: 0, packets: 0, open: false)
    private var lastTrainRaiseUs: Int64 = .min / 2
    /// Packet trains fast enough to call a probe, trains measured, and the last train's arrival rate (bit/s).
    private(set) var trainsRaised = 0, trainsMeasured = 0, lastTrainRate: Int?

    /// A cluster to send now at `nowUs`, if one is due and `pathAllows` it (see `SendSideBandwidthEstimator.startProbe`):
    /// its id and bytes (about 200 ms of twice the `estimate`, at most `maxBitrate`, at least 6 packets).
    mutating func start(nowUs: Int64, pathAllows: Bool, estimate: Int, maxBitrate: Int) -> (cluster: UInt8, bytes: Int)? {
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
        // Not before the path's delivery is measured (the first 300 ms window, the estimator's `boundByDelivery`): until then the
        // estimate is only the configured start, and twice it for 200 ms overfilled a small link at once (1 Mbit/s
        // behind 400 kbit/s with a 5 kB bucket: 38 packets dropped in the first half second, 7 with the wait).
        let failedOnQueue = probeFailures > 0 && probeStartedOnQueue
        let clearedUs = SendSideBandwidthEstimator.clearedQueueUs
        let queueCleared = failedOnQueue && nowUs - lastQueuedUs >= clearedUs && nowUs - lastProbeEndUs >= clearedUs
        guard cluster == nil, nowUs >= nextProbeUs || queueCleared, pathAllows else { return nil }
        let early = nowUs < nextProbeUs
        if early { probesOnClearedQueue += 1 }
        probeStartedOnQueue = !early && nowUs - lastQueuedUs < clearedUs
        let target = min(estimate * 2, maxBitrate)
        let id = nextClusterID
        nextClusterID = nextClusterID == 255 ? 1 : nextClusterID + 1
        cluster = Cluster(id: id, targetRate: target, startEstimate: estimate, startedUs: nowUs)
        probes += 1
        return (id, max(6 * 1200, target / 40)) // 200 ms of the target rate, at least 6 packets
    }

    /// The cluster's packets are all sent.
    mutating func end() { cluster?.sending = false }

    /// A packet of `bytes` sent at `timeUs` for cluster `id`: true when it counts for the cluster being sent.
    mutating func sent(cluster id: UInt8, timeUs: Int64, bytes: Int) -> Bool {
        guard id != 0, var c = cluster, c.id == id, c.sending else { return false }
        c.packets += 1
        c.firstSendUs = min(c.firstSendUs, timeUs)
        if timeUs >= c.lastSendUs {
            c.lastSendUs = timeUs
            c.lastBytes = bytes
        }
        cluster = c
        return true
    }

    /// A reported packet of cluster `id`, of `bytes`, arrived at `arrivalUs`.
    mutating func arrived(cluster id: UInt8, bytes: Int, arrivalUs: Int64) {
        guard var c = cluster, c.id == id else { return }
        c.reported += 1
        c.bytes += bytes
        c.firstArrivalUs = min(c.firstArrivalUs, arrivalUs)
        if arrivalUs >= c.lastArrivalUs {
            c.lastArrivalUs = arrivalUs
            c.lastArrivalBytes = bytes
        }
        cluster = c
    }

    /// A reported packet queued over `SendSideBandwidthEstimator.queuedUs` (at the feedback of `nowUs`).
    mutating func queued(nowUs: Int64) { lastQueuedUs = nowUs }

    /// Once the cluster is sent and reported (or a second has passed), its result at `nowUs`, judged against the
    /// path's `usage` and base delay (`baseDelayUs`): the rate to raise the estimate to 90 % of (a clear success, at
    /// least 90 % of the target; or, short of it, a result over 1.1 × the estimate the probe started from, nothing
    /// lost), or nil. A failure sets the wait before the next probe.
    mutating func finish(nowUs: Int64, usage: SendSideBandwidthEstimator.Usage, baseDelayUs base: Int64) -> Int? {
        guard let c = cluster, !c.sending else { return nil }
        let complete = c.packets > 0 && c.reported * 10 >= c.packets * 9
        guard complete || nowUs - c.startedUs >= 1_000_000 else { return nil }
        cluster = nil
        lastProbeEndUs = nowUs
        var result: Int?
        // libwebrtc's minimums: 5 packets and 80 % of them reported.
        if c.reported >= 5, c.reported * 5 >= c.packets * 4, c.lastArrivalUs > c.firstArrivalUs, c.lastSendUs >= c.firstSendUs {
            let sendSpan = max(c.lastSendUs - c.firstSendUs, 1000) // a burst: at least 1 ms
            let send = Int64(c.bytes - c.lastBytes) * 8_000_000 / sendSpan
            // The whole duration: from the first send until the last packet was there, on the path's clock (the
            // base one-way delay taken off); without a base yet, the arrival span.
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
            lastProbeRaiseUs = nowUs
            // The path carried what was asked: the next probe, twice as large, once the rate acknowledged after
            // this raise confirms it (`confirmed`; 3 s at most), so that a token bucket's burst that passed the
            // probe whole is found out before it is built on.
            awaitingConfirmation = true
            nextProbeUs = nowUs + 3_000_000
            probeFailures = 0
            return result
        }
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
        var raise: Int?
        if !lost, let result, usage != .overusing, result * 9 / 10 > c.startEstimate * 11 / 10 {
            probesRaisedShort += 1
            lastProbeRaiseUs = nowUs
            raise = result
        }
        failed(nowUs: nowUs, longest: lost)
        return raise
    }

    /// The delivery after a raise capped it (`SendSideBandwidthEstimator`'s delivery bound at `nowUs`): a probe
    /// that raised the estimate within 2 s, or whose raise awaits confirmation, failed after all.
    mutating func deliveryCapped(nowUs: Int64) {
        guard awaitingConfirmation || nowUs - lastProbeRaiseUs < 2_000_000 else { return }
        probesCapped += 1
        failed(nowUs: nowUs, longest: false)
    }

    /// A delivery window sent from `firstSendUs` on showed no shortfall: one sent wholly after a raise confirms it,
    /// and the next probe may start.
    mutating func deliveryConfirmed(firstSendUs: Int64, nowUs: Int64) {
        guard awaitingConfirmation, firstSendUs >= lastProbeRaiseUs else { return }
        awaitingConfirmation = false
        nextProbeUs = nowUs
    }

    /// The wait after a failed probe: 2 s, then 4 s for each further failure in a row; 8 s after one that lost
    /// packets (`longest`).
    private mutating func failed(nowUs: Int64, longest: Bool) {
        probeFailures = min(probeFailures + 1, 8)
        lastProbeLost = longest
        nextProbeUs = nowUs + waitUs
        awaitingConfirmation = false
    }

    private var waitUs: Int64 {
        if probeFailures == 0 { return 0 }
        // A lossy probe, or a second failure in a row whose last probe started on its schedule while the media
        // queued (a full link: behind 400 kbit/s none of 70 such probes raised the estimate, and some froze the
        // viewer): 8 s. A lifted limit is found sooner by the queue's vanishing (`clearedQueueUs`).
        if lastProbeLost || (probeStartedOnQueue && probeFailures >= 2) { return 8_000_000 }
        return min(4_000_000, 2_000_000 << (probeFailures - 1))
    }

    // MARK: Packet trains

    /// One received packet, in the order of the feedback: packets sent at the same instant form a train.
    mutating func trainSample(sendUs: Int64, arrivalUs: Int64, bytes: Int, nowUs: Int64, path: Path) {
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
        if train.open { finishTrain(nowUs, path) }
        train = (sendUs, arrivalUs, arrivalUs, bytes, bytes, 1, true)
    }

    /// A complete train of 5 packets and 4000 bytes or more: its arrival rate (the bytes after the first over the
    /// arrival span, at least the feedback's 250 µs resolution). Far above the estimate it calls a probe (after
    /// 0.5 s, and not before half the wait the last failed probe set): it raises nothing itself, since a token
    /// bucket's refilled burst passes a train at line rate.
    private mutating func finishTrain(_ nowUs: Int64, _ path: Path) {
        guard train.packets >= 5, train.bytes >= 4000 else { return }
        let span = max(train.lastArrivalUs - train.firstArrivalUs, 250)
        let rate = Int(clamping: Int64(train.bytes - train.firstBytes) * 8_000_000 / span)
        lastTrainRate = rate
        trainsMeasured += 1
        guard rate / 3 >= path.estimate, path.usage != .overusing, path.lossFraction < 0.02, !awaitingConfirmation, cluster == nil,
            nowUs - lastTrainRaiseUs >= 500_000, path.estimate < path.ceiling
        else { return }
        let due = max(nowUs + 500_000, lastProbeEndUs + waitUs / 2)
        guard due < nextProbeUs else { return }
        lastTrainRaiseUs = nowUs
        trainsRaised += 1
        nextProbeUs = due
    }
}
