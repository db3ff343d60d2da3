import Testing
@testable import RTP
import SystemIO

/// The pure pieces of RTPSender (#19): the session's clock, counts and sender-report figures, the
/// retransmission history and its budget, the RTCP responder's rules.
@Suite struct RTPSessionTests {
    @Test func timestampsFollowCaptureTimeFromTheOffset() {
        var s = RTPSession(ssrc: 7, rtxSSRC: 8, timestampOffset: 1000, rtxSequence: 65535)
        #expect(s.timestamp(forCaptureNs: 5_000_000_000) == 1000) // the first frame: the offset
        #expect(s.timestamp(forCaptureNs: 5_033_333_333) == 1000 + 2999) // 33.3 ms: 2999.99 ticks, floored
        #expect(s.timestamp(forCaptureNs: 6_000_000_000) == 1000 + 90_000)
        #expect(s.nextRTXSequence() == 65535)
        #expect(s.nextRTXSequence() == 0) // wraps
    }

    @Test func senderReportExtrapolatesFromTheLastFrame() {
        var s = RTPSession(ssrc: 7, rtxSSRC: 8, timestampOffset: UInt32.max - 10)
        #expect(s.senderReport(ntp: 1 << 32, nowNs: 0) == nil) // nothing sent yet: no report
        let ts = s.timestamp(forCaptureNs: 2_000_000_000)
        s.packetSent(bytes: 1000)
        s.packetSent(bytes: 200)
        s.frameSent(rtp: ts, captureNs: 2_000_000_000)
        #expect(s.firstCaptureNs == 2_000_000_000 && s.framesSent == 1)
        let ntp: UInt64 = 0x1234_5678_9abc_def0
        let sr = s.senderReport(ntp: ntp, nowNs: 2_500_000_000) // half a second after the frame
        #expect(sr?.rtp == (UInt32.max - 10) &+ 45_000) // wraps at 2³²
        #expect(sr?.packets == 2 && sr?.octets == 1200)
        #expect(s.lastSRNTPMiddle == 0x5678_9abc)
    }

    @Test func ntpAndRoundTrip() {
        #expect(RTPSession.ntp(seconds: 0, nanoseconds: 500_000_000) == (UInt64(2_208_988_800) << 32 | 1 << 31))
        #expect(RTPSession.ntpMiddle(0x1111_2222_3333_4444) == 0x2222_3333)
        // Sent at LSR, held 1 s (65536) by the receiver, back 0.25 s after it sent: 250 ms.
        #expect(RTPSession.roundTripMs(ntpMiddle: 100_000 + 65536 + 16384, lastSR: 100_000, delaySinceLastSR: 65536) == 250)
        #expect(RTPSession.roundTripMs(ntpMiddle: 5, lastSR: 0, delaySinceLastSR: 0) == nil) // no SR echoed
        #expect(RTPSession.roundTripMs(ntpMiddle: 100, lastSR: 200, delaySinceLastSR: 0) == nil) // negative
    }

    @Test func lossSimulationIsSeeded() {
        var a = LossSimulator(rate: 0.3, seed: 42), b = LossSimulator(rate: 0.3, seed: 42)
        let da = (0..<1000).map { _ in a.drops() }, db = (0..<1000).map { _ in b.drops() }
        #expect(da == db)
        #expect((200...400).contains(da.filter { $0 }.count))
        var none = LossSimulator(rate: 0, seed: 1)
        #expect(!(0..<100).contains { _ in none.drops() })
    }
}

@Suite struct RetransmissionHistoryTests {
    static func packet(_ seq: UInt16, size: Int = 100) -> [UInt8] {
        var p = [UInt8](repeating: UInt8(truncatingIfNeeded: seq), count: size)
        p[0] = 0x80
        p.storeBigEndian(seq, at: 2)
        return p
    }

    @Test func findsBySequenceAndForgetsOverwritten() {
        var h = RetransmissionHistory(packets: 20, packetCapacity: 1300, share: 1, allowance: 1 << 20)
        #expect(h.capacity == 32) // a power of two
        for seq in UInt16(65530)...65535 { Self.packet(seq).withUnsafeBytes { h.record($0, at: 0) } }
        for seq in UInt16(0)..<30 { Self.packet(seq).withUnsafeBytes { h.record($0, at: 0) } } // 36 packets: the first 4 are gone
        guard case .resend(let slot) = h.claim(29, extraBytes: 0, rttNs: 0, at: 1) else {
            Issue.record("29 not found")
            return
        }
        #expect(Array(h.packet(at: slot)) == Self.packet(29))
        #expect(h.claim(65531, extraBytes: 0, rttNs: 0, at: 1) == .ignored) // overwritten by 27
        #expect(h.claim(65534, extraBytes: 0, rttNs: 0, at: 1) != .ignored) // still there
        #expect(h.claim(500, extraBytes: 0, rttNs: 0, at: 1) == .ignored) // never sent
    }

    @Test func notResentAgainWithinAnRTT() {
        var h = RetransmissionHistory(packets: 16, packetCapacity: 1300, share: 1, allowance: 1 << 20)
        Self.packet(9).withUnsafeBytes { h.record($0, at: 0) }
        #expect(h.claim(9, extraBytes: 0, rttNs: 100_000_000, at: 1_000) != .ignored)
        #expect(h.claim(9, extraBytes: 0, rttNs: 100_000_000, at: 50_000_000) == .ignored) // the NACK crossed the resend
        #expect(h.claim(9, extraBytes: 0, rttNs: 100_000_000, at: 100_001_000) != .ignored)
    }

    @Test func budgetIsAShareOfTheMediaOfTheLastSecond() {
        // 10 packets of 1000 bytes of media: 45 % is 4500 bytes of retransmission (the allowance is lower).
        var h = RetransmissionHistory(packets: 16, packetCapacity: 1300, share: 0.45, allowance: 2000)
        for seq in UInt16(0)..<10 { Self.packet(seq, size: 1000).withUnsafeBytes { h.record($0, at: 0) } }
        let decisions = (UInt16(0)..<10).map { h.claim($0, extraBytes: 2, rttNs: 0, at: 0) }
        #expect(decisions.filter { if case .resend = $0 { true } else { false } }.count == 4) // 4 × 1002 ≤ 4500
        #expect(decisions[4] == .overBudget)
        // A second later the window has moved on: only the 2000-byte allowance is left (two 1000-byte packets).
        #expect(h.claim(5, extraBytes: 0, rttNs: 0, at: 1_100_000_000) != .overBudget)
        #expect(h.claim(6, extraBytes: 0, rttNs: 0, at: 1_100_000_000) != .overBudget)
        #expect(h.claim(7, extraBytes: 0, rttNs: 0, at: 1_100_000_000) == .overBudget)
    }

    /// The last key frame's packets are resent with the budget spent (every later frame needs them); packets before
    /// it are superseded, packets after it keep to the budget.
    @Test func theLastKeyFramesPacketsAreResentOverBudget() {
        var h = RetransmissionHistory(packets: 32, packetCapacity: 1300, share: 0.1, allowance: 1000)
        for seq in UInt16(0)..<10 { Self.packet(seq, size: 1000).withUnsafeBytes { h.record($0, at: 0) } }
        h.keyFrameStarts(at: 10)
        for seq in UInt16(10)..<16 { Self.packet(seq, size: 1000).withUnsafeBytes { h.record($0, at: 0) } }
        h.keyFrameEnds(count: 6)
        Self.packet(16, size: 1000).withUnsafeBytes { h.record($0, at: 0) }
        // 17000 bytes of media: a budget of 1700, one packet.
        #expect(h.claim(16, extraBytes: 0, rttNs: 0, at: 0) != .overBudget)
        #expect(h.claim(16, extraBytes: 0, rttNs: 0, at: 0) == .overBudget) // spent (and resendable again: no RTT)
        let keyFrame = (UInt16(10)..<16).map { h.claim($0, extraBytes: 0, rttNs: 0, at: 0) }
        #expect(keyFrame.allSatisfy { if case .resend = $0 { true } else { false } }, "\(keyFrame)")
        #expect(h.claim(3, extraBytes: 0, rttNs: 0, at: 0) == .superseded)
        #expect(h.claim(16, extraBytes: 0, rttNs: 0, at: 0) == .overBudget)
    }
}

@Suite struct RTCPResponderTests {
    @Test func rulesPerPacket() {
        var r = RTCPResponder(ssrc: 5, keyFrameRequestIntervalNs: 300_000_000, minimumBitrateEstimate: 50_000)
        var stats = RTPSender.Statistics()
        #expect(r.respond(to: .pli(sender: 1, media: 5), now: 0, ntpMiddle: 0, stats: &stats) == .keyFrame)
        #expect(r.respond(to: .pli(sender: 1, media: 5), now: 100_000_000, ntpMiddle: 0, stats: &stats) == .none) // rate limited
        #expect(r.respond(to: .pli(sender: 1, media: 6), now: 400_000_000, ntpMiddle: 0, stats: &stats) == .none) // another stream
        #expect(r.respond(to: .pli(sender: 1, media: 0), now: 400_000_000, ntpMiddle: 0, stats: &stats) == .keyFrame)
        #expect(stats.keyFrameRequests == 3 && stats.keyFrameRequestsHonoured == 2)
        #expect(r.respond(to: .remb(sender: 1, bitrate: 0, ssrcs: [5]), now: 0, ntpMiddle: 0, stats: &stats) == .bitrate(50_000))
        #expect(r.respond(to: .nack(sender: 1, media: 5, lost: [3, 4]), now: 0, ntpMiddle: 0, stats: &stats) == .retransmit([3, 4]))
        #expect(r.respond(to: .nack(sender: 1, media: 9, lost: [3]), now: 0, ntpMiddle: 0, stats: &stats) == .none)
        #expect(stats.nacksReceived == 1 && stats.rembBitrate == 50_000)
    }
}
