import Testing
@testable import RTP

/// Congestion control's parts, each on its own (#47): the estimator's concerns (delay, loss, delivery, probe results),
/// the probe scheduler, the transport-wide stamper and the pacing controller, on time passed in.
@Suite struct CongestionUnitTests {
    static let bounds = (min: 50_000, max: 20_000_000)

    @Test func theDelayTrendCallsAGrowingQueueOveruseAndTheRateDropsTo85PercentOfTheAcknowledgedRate() {
        var flat = DelayBasedController(rate: 1_000_000)
        var growing = DelayBasedController(rate: 1_000_000)
        for k in 0..<100 { // a packet every 10 ms (each its own group); on `growing` each arrives 2 ms later than the last
            let send = Int64(k) * 10_000
            flat.sample(sendUs: send, arrivalUs: send + 20_000)
            growing.sample(sendUs: send, arrivalUs: send + 20_000 + Int64(k) * 2_000)
        }
        #expect(flat.usage == .normal)
        #expect(growing.usage == .overusing)
        growing.update(nowUs: 1_000_000, queueDelayUs: 0, acknowledgedRate: 600_000, bounds: Self.bounds)
        #expect(growing.rate == 510_000, "85 % of what the receiver acknowledged")
        // Normal, no standing queue: +8 %/s, within 1.5 × the acknowledged rate (+10 kbit/s).
        flat.update(nowUs: 0, queueDelayUs: 0, acknowledgedRate: nil, bounds: Self.bounds)
        flat.update(nowUs: 1_000_000, queueDelayUs: 0, acknowledgedRate: nil, bounds: Self.bounds)
        #expect((1_079_000...1_081_000).contains(flat.rate), "\(flat.rate)")
        flat.update(nowUs: 2_000_000, queueDelayUs: 150_000, acknowledgedRate: nil, bounds: Self.bounds)
        #expect((1_079_000...1_081_000).contains(flat.rate), "a standing queue holds the rate")
    }

    @Test func lossOver10PercentHalvesItAndUnder2PercentAdds5() {
        var loss = LossBasedController(rate: 1_000_000)
        loss.update(nowUs: 0, estimate: 1_000_000, delayBasedRate: 1_000_000, bounds: Self.bounds) // the window opens
        for k in 0..<20 {
            loss.reported(lost: k % 5 == 0)
            if k % 5 != 0 { loss.arrived(bytes: 1000, arrivalUs: Int64(k) * 10_000) }
        }
        loss.update(nowUs: 100_000, estimate: 1_000_000, delayBasedRate: 1_000_000, bounds: Self.bounds)
        #expect(loss.fraction == 0 && loss.rate == 1_000_000, "the window is shorter than 250 ms")
        loss.update(nowUs: 250_000, estimate: 1_000_000, delayBasedRate: 1_000_000, bounds: Self.bounds)
        #expect(loss.fraction == 0.2 && loss.rate == 900_000, "down by half the loss")
        for _ in 0..<20 { loss.reported(lost: false) }
        loss.update(nowUs: 500_000, estimate: 900_000, delayBasedRate: 2_000_000, bounds: Self.bounds)
        #expect(loss.fraction == 0 && loss.rate == 946_000, "up 5 % from the estimate (+1 kbit/s)")
    }

    @Test func deliveryIsMeasuredOver300MillisecondsAndTheQueueAgainstTheLowestDelay() {
        var d = DeliveryMonitor()
        // 1000 bytes every 10 ms (800 kbit/s sent); the path delivers every other packet's time: 400 kbit/s.
        for k in 0..<40 {
            let send = Int64(k) * 10_000
            d.reported(bytes: 1000, sendUs: send)
            d.arrived(bytes: 1000, arrivalUs: 20_000 + Int64(k) * 20_000)
            d.queueSample(sendUs: send, arrivalUs: 20_000 + Int64(k) * 20_000)
        }
        #expect(d.baseDelayUs == 20_000 && d.queueDelayUs == 390_000, "the last packet queued 390 ms")
        let w = d.closeWindow()
        #expect(w?.first == true && w.map { abs($0.delivered - 410_256) < 1_000 } == true, "\(String(describing: w))")
        #expect(w.map { abs(Int($0.sent) - 820_512) < 1_000 } == true, "\(String(describing: w))")
        let again = d.closeWindow()
        #expect(d.deliveredRate == w?.delivered && again == nil, "the next window starts empty")
        #expect(d.acknowledgedRate != nil)
    }

    /// A feedback that reports only packets never sent (or only lost ones) leaves the delivery window without a
    /// span: measuring it overflowed and trapped (found by the test above, #47).
    @Test func aFeedbackAboutNoPacketOfOursIsHarmless() {
        var e = SendSideBandwidthEstimator()
        for k in 0..<10 { e.packetSent(sequence: UInt16(k), timeUs: Int64(k) * 10_000, bytes: 1200) }
        let strange = TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 30_000, feedbackCount: 0, arrivals: [100_000, 110_000])
        #expect(e.feedback(strange, nowUs: 200_000) == SendSideBandwidthEstimator.Configuration().startEstimate)
        let lost = TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 0, feedbackCount: 1, arrivals: [nil, nil])
        e.feedback(lost, nowUs: 250_000)
        #expect(e.packetsLost == 2 && e.deliveredRate == nil)
    }

    @Test func aProbeThatArrivesAtItsTargetRaisesAndOneThatLosesPacketsWaitsTheLongest() {
        var p = ProbeResults()
        let refused = p.start(nowUs: 0, pathAllows: false, estimate: 500_000, maxBitrate: 20_000_000)
        #expect(refused == nil)
        let c = p.start(nowUs: 0, pathAllows: true, estimate: 500_000, maxBitrate: 20_000_000)
        #expect(c?.bytes == 25_000, "200 ms of twice the estimate")
        // 10 packets of 1200 bytes over 90 ms, sent and arrived at the same pace: 960 kbit/s (the last packet left out), over 90 % of 1 Mbit/s.
        for k in 0..<10 {
            let counted = p.sent(cluster: c!.cluster, timeUs: Int64(k) * 10_000, bytes: 1200)
            #expect(counted)
        }
        p.end()
        for k in 0..<10 { p.arrived(cluster: c!.cluster, bytes: 1200, arrivalUs: 20_000 + Int64(k) * 10_000) }
        let raise = p.finish(nowUs: 200_000, usage: .normal, baseDelayUs: 20_000)
        #expect(raise == 960_000 && p.probesRaised == 1 && p.awaitingConfirmation)
        let early = p.start(nowUs: 1_000_000, pathAllows: true, estimate: 960_000, maxBitrate: 20_000_000)
        #expect(early == nil, "waits for confirmation")
        p.deliveryConfirmed(firstSendUs: 300_000, nowUs: 1_000_000)
        let next = p.start(nowUs: 1_000_000, pathAllows: true, estimate: 960_000, maxBitrate: 20_000_000)
        #expect(next != nil)
        // Half its packets lost: judged after a second, a lossy failure; the next waits 8 s.
        for k in 0..<10 { _ = p.sent(cluster: next!.cluster, timeUs: 1_000_000 + Int64(k) * 10_000, bytes: 1200) }
        p.end()
        for k in 0..<5 { p.arrived(cluster: next!.cluster, bytes: 1200, arrivalUs: 1_020_000 + Int64(k) * 10_000) }
        let unjudged = p.finish(nowUs: 1_500_000, usage: .normal, baseDelayUs: 20_000)
        #expect(unjudged == nil && p.cluster != nil, "not yet judged")
        let lossy = p.finish(nowUs: 2_000_000, usage: .normal, baseDelayUs: 20_000)
        #expect(lossy == nil && p.probesLost == 1)
        let tooSoon = p.start(nowUs: 9_999_999, pathAllows: true, estimate: 960_000, maxBitrate: 20_000_000)
        let after8s = p.start(nowUs: 10_000_000, pathAllows: true, estimate: 960_000, maxBitrate: 20_000_000)
        #expect(tooSoon == nil && after8s != nil)
    }

    @Test func theProbeSchedulerSpreadsAClusterOverSixFramesAndGivesUpAfterTenSkipped() {
        var estimator = SendSideBandwidthEstimator()
        var s = ProbeScheduler(frames: 6)
        let unmeasured = s.frameStarts(mayStart: true, estimator: &estimator, nowUs: 0)
        #expect(!unmeasured, "nothing due before a delivery window")
        s = ProbeScheduler(frames: 6)
        var e = SendSideBandwidthEstimator(configuration: .init(startBitrate: 1_000_000))
        e = Self.measured(e) // a first delivery window: probes may start
        let started = s.frameStarts(mayStart: true, estimator: &e, nowUs: 1_000_000)
        #expect(started && s.clusterID != 0)
        let total = s.cluster!.bytes
        let request = s.frameSent(bytes: 1_000, skip: false)
        #expect(request == ProbeScheduler.Request(cluster: s.clusterID, bytes: total / 6 - 1_000))
        s.probePacketSent(bytes: request!.bytes)
        let ended = s.frameDone(skipped: false)
        #expect(!ended && s.cluster?.frames == 5)
        for _ in 0..<9 {
            let (none, done) = (s.frameSent(bytes: 1_000, skip: true), s.frameDone(skipped: true))
            #expect(none == nil && !done)
        }
        let last = s.frameDone(skipped: true)
        #expect(last && s.cluster == nil, "10 frames skipped: the cluster ends as it is")
    }

    /// `e` after a second of 300 kbit/s media on a 20 ms path (every packet reported): its path is measured.
    static func measured(_ e: SendSideBandwidthEstimator) -> SendSideBandwidthEstimator {
        var e = e
        for k in 0..<25 { e.packetSent(sequence: UInt16(k), timeUs: Int64(k) * 40_000, bytes: 1_500) }
        let arrivals = (0..<25).map { Int64?(Int64($0) * 40_000 + 20_000) }
        e.feedback(TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 0, feedbackCount: 0, arrivals: arrivals), nowUs: 1_000_000)
        return e
    }

    @Test func theStamperNumbersPacketsInTheOrderTheyLeaveAndSkipsPacketsWithoutTheExtension() {
        var stamper = TransportSequenceStamper(extensionID: 3)
        var packet: [UInt8] = [0x90, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xBE, 0xDE, 0, 1, 3 << 4 | 1, 0, 0, 0, 0xAA]
        var plain: [UInt8] = [0x80, 96, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0xAA]
        let numbers = (stamper.stamp(&packet), stamper.stamp(&plain), stamper.stamp(&packet))
        #expect(numbers.0 == 0 && numbers.1 == nil && numbers.2 == 1)
        #expect(packet[17] == 0 && packet[18] == 1 && stamper.next == 2)
    }

    @Test func thePacingControllerReleasesPacketsAtItsRateOnTheTimeGiven() {
        var p = PacingController(capacity: 4, maxPacket: 1250)
        let unpaced = p.enqueue(1, bytes: 1250, nowNs: 0)
        #expect(!unpaced, "unpaced: sent by the caller")
        p.rateBps = 1_000_000 // a 1250-byte packet every 10 ms
        let queued = (2...5).map { p.enqueue(UInt16($0), bytes: 1250, nowNs: 0) }
        let full = p.enqueue(6, bytes: 1250, nowNs: 0)
        #expect(queued == [true, true, true, true] && !full, "full")
        var sent: [UInt16] = [], now: Int64 = 0
        while p.count > 0 {
            let (packet, wait) = p.next(nowNs: now)
            if let packet { sent.append(packet) } else { now += wait ?? 0 }
        }
        #expect(sent == [2, 3, 4, 5] && now >= 20_000_000 && now <= 50_000_000, "\(now)")
    }
}
