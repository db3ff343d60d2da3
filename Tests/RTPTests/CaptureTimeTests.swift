import Foundation
import Synchronization
import Testing
import VideoCapture
import H264
@testable import RTP

/// The absolute capture time and playout delay extensions: what the first packet of a frame carries, that the
/// other packets do not, that the block fits the budget with every extension at once, and that a retransmission
/// keeps them.
@Suite struct CaptureTimeTests {
    @Test func theFirstPacketCarriesTheCaptureTimeAndPlayoutDelayAndTheBlockFitsTheBudget() throws {
        var p = H264Packetizer(maxPayload: 1200)
        let frame = accessUnit([(.sps, 12), (.pps, 4), (.idr, 5000)])
        let ntp: UInt64 = 0xE9A1_B2C3_8000_0001
        let captureTime = try #require(RTPHeaderExtensionElement.absoluteCaptureTime(id: 13, ntp: ntp))
        let delay = try #require(PlayoutDelay(minMs: 0, maxMs: 120))
        let playout = try #require(RTPHeaderExtensionElement.playoutDelay(id: 5, delay))
        let cvo = RTPHeaderExtensionElement.videoOrientation(id: 3, rotationDegrees: 90)
        var packets: [[UInt8]] = []
        p.packetize(
            frame.data, nalUnits: frame.nalUnits, timestamp: 9, markerExtension: cvo, transportSequence: (4, 100),
            firstPacketExtensions: (captureTime, playout)
        ) { packets.append(Array($0)) }
        #expect(packets.count >= 5)
        func element(_ id: UInt8, _ packet: [UInt8]) -> [UInt8]? { packet.withUnsafeBytes { RTPHeader.oneByteExtension(id: id, in: $0) } }
        // abs-capture-time: 8 bytes, the NTP time big-endian; playout-delay: 12-bit min and max in 10 ms units.
        #expect(element(13, packets[0]) == [0xE9, 0xA1, 0xB2, 0xC3, 0x80, 0, 0, 1])
        #expect(element(5, packets[0]) == [0, 0, 12])
        #expect(packets.dropFirst().allSatisfy { element(13, $0) == nil && element(5, $0) == nil })
        #expect(packets.enumerated().allSatisfy { element(4, $1) == [0, UInt8(100 + $0)] }, "transport-wide numbers on every packet")
        #expect(element(3, packets.last!) == [1])
        #expect(packets.allSatisfy { ($0.withUnsafeBytes { RTPHeader($0) }?.payloadLength ?? 0) <= 1200 }, "the payload budget is unchanged")
        var d = H264Depacketizer()
        var au: [UInt8]?
        for pk in packets { if let a = pk.withUnsafeBytes({ d.push($0) }) { au = a.accessUnit } }
        #expect(au == expectedAnnexB(frame))
        // A one-packet frame carries all four elements: 3 + 9 + 4 + 2 bytes, 4 of block header, padded to 24.
        var single: [UInt8] = []
        let small = accessUnit([(.slice, 40)])
        p.packetize(
            small.data, nalUnits: small.nalUnits, timestamp: 1, markerExtension: cvo, transportSequence: (4, 7),
            firstPacketExtensions: (captureTime, playout)
        ) { single = Array($0) }
        let header = try #require(single.withUnsafeBytes { RTPHeader($0) })
        #expect(header.payloadOffset == 12 + 24 && H264Packetizer.maxExtensionSize == 32 && header.payloadLength == 40)
        #expect(element(13, single) != nil && element(5, single) != nil && element(4, single) == [0, 7] && element(3, single) == [1])
        // Out of range: nothing.
        #expect(PlayoutDelay(minMs: 50, maxMs: 10) == nil && PlayoutDelay(minMs: -1, maxMs: 10) == nil && PlayoutDelay(minMs: 0, maxMs: 40960) == nil)
        let max = try #require(PlayoutDelay(minMs: 40950, maxMs: 40950))
        #expect(RTPHeaderExtensionElement.playoutDelay(id: 1, max)?.value == 0xFFF_FFF)
    }

    /// The NTP time of a monotonic instant is the wall clock's: the same mapping sender reports use.
    @Test func captureTimesMapToTheWallClockAsSenderReportsDo() {
        // 1 s after the Unix epoch + 0.5 s; NTP counts from 1900 (2 208 988 800 s earlier).
        #expect(RTPSession.ntp(monotonicNs: 500_000_000, realtimeMinusMonotonicNs: 1_000_000_000) == (UInt64(2_208_988_801) << 32 | UInt64(1) << 31))
        #expect(RTPSession.ntp(monotonicNs: 7, realtimeMinusMonotonicNs: -7) == UInt64(2_208_988_800) << 32)
        // Now, on this machine: within a few ms of CLOCK_REALTIME.
        let ntp = RTPSession.ntp(monotonicNs: monotonicNanoseconds(), realtimeMinusMonotonicNs: realtimeMinusMonotonicNs())
        let unix = Double(ntp >> 32) - 2_208_988_800 + Double(ntp & 0xffff_ffff) / 4_294_967_296
        #expect(abs(unix - Date().timeIntervalSince1970) < 0.5)
    }

    /// Through a sender: the first packet of each frame carries the capture time of that frame (its
    /// `timestampNs` on the wall clock) and the playout delay; an RTX retransmission of it carries them too.
    @Test func theSenderStampsEachFrameAndRetransmissionsKeepTheStamp() throws {
        let transport = RecordingTransport()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.absoluteCaptureTimeExtensionID = 13
        c.playoutDelayExtensionID = 5
        c.playoutDelay = PlayoutDelay(minMs: 0, maxMs: 0)
        c.rtxPayloadType = 97
        let sender = try RTPSender(configuration: c, transport: transport)
        let start = monotonicNanoseconds() - 100_000_000
        for i in 0..<3 { try sender.send(pFrame(packets: 3).stamped(start + Int64(i) * 33_333_333)) }
        let sent = transport.packets.withLock { $0 }
        #expect(sent.count == 9)
        func element(_ id: UInt8, _ packet: [UInt8]) -> [UInt8]? { packet.withUnsafeBytes { RTPHeader.oneByteExtension(id: id, in: $0) } }
        func ntp(_ b: [UInt8]) -> UInt64 { b.reduce(0) { $0 << 8 | UInt64($1) } }
        let stamps = (0..<3).map { element(13, sent[3 * $0]).map(ntp) ?? 0 }
        #expect((0..<9).allSatisfy { ($0 % 3 == 0) == (element(13, sent[$0]) != nil) && ($0 % 3 == 0) == (element(5, sent[$0]) == [0, 0, 0]) })
        // 33.33 ms apart in NTP units (2^32 per second), within rounding.
        for (a, b) in zip(stamps, stamps.dropFirst()) {
            let ms = Double(b &- a) * 1000 / 4_294_967_296
            #expect(abs(ms - 33.333) < 0.01, "\(ms) ms")
        }
        let expected = RTPSession.ntp(monotonicNs: start, realtimeMinusMonotonicNs: realtimeMinusMonotonicNs())
        #expect(abs(Double(Int64(bitPattern: stamps[0] &- expected))) * 1000 / 4_294_967_296 < 50, "the capture instant, not the send time")
        // NACK the second frame's first packet: the RTX copy keeps both elements.
        let seq = try #require(sent[3].withUnsafeBytes { RTPHeader($0) }).sequence
        RTCPWriter.nack(sender: 1, media: sender.ssrc, lost: [seq]).withUnsafeBytes { sender.handleRTCP($0) }
        let rtx = try #require(transport.packets.withLock { $0.count == 10 ? $0.last : nil })
        #expect(rtx[1] & 0x7f == 97 && element(13, rtx) == element(13, sent[3]) && element(5, rtx) == [0, 0, 0])
    }
}

/// Adaptive playout delay (#21): low-latency bounds while the link is clear, the receiver's own jitter buffer
/// while it is congested (a NACK, overuse, loss) or limited (a lower tier), back once it is clear again.
@Suite struct AdaptivePlayoutDelayTests {
    /// The playout-delay element of the first packet of the last frame sent (3 packets a frame).
    static func lastDelay(_ t: RecordingTransport) -> [UInt8]? {
        t.packets.withLock { p in p.count >= 3 ? p[p.count - 3].withUnsafeBytes { RTPHeader.oneByteExtension(id: 5, in: $0) } : nil }
    }

    static func sender(holdNs: Int64) throws -> (RTPSender, RecordingTransport) {
        let t = RecordingTransport()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.playoutDelayExtensionID = 5
        c.playoutDelay = .lowLatency
        c.congestedPlayoutDelay = .receiverDefault
        c.congestionHoldNs = holdNs
        return (try RTPSender(configuration: c, transport: t), t)
    }

    @Test func clearLimitedAndCongestedLinks() throws {
        let lowLatency: [UInt8] = [0x00, 0x00, 0x32] // 0 and 50 × 10 ms
        let relaxed: [UInt8] = [0x00, 0x03, 0xE8] // 0 and 1000 × 10 ms
        let (s, t) = try Self.sender(holdNs: 3_600_000_000_000)
        var ts = monotonicNanoseconds()
        func send() throws {
            ts += 33_333_333
            try s.send(pFrame(packets: 3).stamped(ts))
        }
        try send()
        #expect(Self.lastDelay(t) == lowLatency, "a clear link: low latency")
        s.setLinkLimited(true)
        try send()
        #expect(Self.lastDelay(t) == relaxed, "a limited link (lower tier): the receiver's buffer")
        s.setLinkLimited(false)
        try send()
        #expect(Self.lastDelay(t) == lowLatency, "clear again")
        let seq = try #require(t.packets.withLock { $0.last }.flatMap { p in p.withUnsafeBytes { RTPHeader($0) } }).sequence
        RTCPWriter.nack(sender: 1, media: s.ssrc, lost: [seq]).withUnsafeBytes { s.handleRTCP($0) }
        try send()
        #expect(Self.lastDelay(t) == relaxed, "a NACK: congested for the hold time")
        let st = s.statistics
        #expect(st.playoutDelaySent == .receiverDefault && st.playoutDelayChanges == 3 && st.congestion.congestionSignals == 1, "\(st)")

        // With a hold shorter than a frame, the next frame after the NACK is low latency again.
        let (s2, t2) = try Self.sender(holdNs: 1)
        try s2.send(pFrame(packets: 3).stamped(ts))
        let seq2 = try #require(t2.packets.withLock { $0.last }.flatMap { p in p.withUnsafeBytes { RTPHeader($0) } }).sequence
        RTCPWriter.nack(sender: 1, media: s2.ssrc, lost: [seq2]).withUnsafeBytes { s2.handleRTCP($0) }
        try s2.send(pFrame(packets: 3).stamped(ts + 33_333_333))
        #expect(Self.lastDelay(t2) == lowLatency && s2.statistics.congestion.congestionSignals == 1)
    }

    /// Without `congestedPlayoutDelay` the asked bounds go on every frame, congested or not (`--playout-delay MIN:MAX`).
    @Test func fixedBoundsIgnoreCongestion() throws {
        let t = RecordingTransport()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.playoutDelayExtensionID = 5
        c.playoutDelay = PlayoutDelay(minMs: 0, maxMs: 100)
        let s = try RTPSender(configuration: c, transport: t)
        s.setLinkLimited(true)
        try s.send(pFrame(packets: 3).stamped(monotonicNanoseconds()))
        #expect(Self.lastDelay(t) == [0x00, 0x00, 0x0A])
    }
}

/// A key frame supersedes what was sent before it (#21) for a receiver that decodes from it (a browser: on a tier
/// move or a loaded link older packets would only delay the key frame): NACKs for them are not served, the key
/// frame's own packets and later ones are. For a receiver with an in-order jitter buffer (GStreamer; the default)
/// they are still served.
@Suite struct SupersededRetransmissionTests {
    @Test(arguments: [true, false]) func nacksForPacketsBeforeTheLastKeyFrame(superseded: Bool) throws {
        let t = RecordingTransport()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.keyFrameSupersedesEarlierPackets = superseded
        let s = try RTPSender(configuration: c, transport: t)
        var ts = monotonicNanoseconds()
        try s.send(pFrame(packets: 3).stamped(ts))
        let before = try #require(t.packets.withLock { $0[1] }.withUnsafeBytes { RTPHeader($0) }).sequence
        RTCPWriter.nack(sender: 1, media: s.ssrc, lost: [before]).withUnsafeBytes { s.handleRTCP($0) }
        #expect(s.statistics.retransmissions == 1, "no key frame since: served")
        var key = pFrame(packets: 3)
        key.isKeyFrame = true
        ts += 33_333_333
        try s.send(key.stamped(ts))
        let keyPacket = try #require(t.packets.withLock { $0[$0.count - 2] }.withUnsafeBytes { RTPHeader($0) }).sequence
        RTCPWriter.nack(sender: 1, media: s.ssrc, lost: [before &+ 1, keyPacket]).withUnsafeBytes { s.handleRTCP($0) }
        let st = s.statistics
        if superseded {
            #expect(st.retransmissions == 2 && st.nacksBeforeKeyFrame == 1, "\(st)")
        } else {
            #expect(st.retransmissions == 3 && st.nacksBeforeKeyFrame == 0, "\(st)")
        }
        #expect(t.packets.withLock { $0.last }.flatMap { p in p.withUnsafeBytes { RTPHeader($0) } }?.sequence == keyPacket)
    }
}

/// A transport that keeps every RTP packet sent (RTCP is dropped).
final class RecordingTransport: RTPTransport, @unchecked Sendable {
    // @unchecked: `packets` is only touched under its Mutex.
    let packets = Mutex<[[UInt8]]>([])
    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 {
        packets.withLock { $0.append(Array(packet)) }
        return 0
    }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { 0 }
}

/// With pacing and transport-cc (#21), a key frame's first packets leave at once, as a packet train (paced frames
/// are no trains, and a low tier's frames are too small to be), and the rest follow from the pacer.
@Suite struct PacedKeyFrameTrainTests {
    @Test func aKeyFramesFirstPacketsLeaveAtOnceAndTheRestArePaced() throws {
        let t = RecordingTransport()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.transportWideCCExtensionID = 3
        c.pacingFactor = 1
        c.sendSideEstimation = .init(minBitrate: 50_000, maxBitrate: 1_000_000, startBitrate: 100_000)
        let s = try RTPSender(configuration: c, transport: t)
        defer { s.close() }
        var key = pFrame(packets: 10)
        key.isKeyFrame = true
        try s.send(key.stamped(monotonicNanoseconds()))
        // At 100 kbit/s a 1000-byte packet takes 80 ms: at once, only the train (and a packet of the pacer's budget).
        let atOnce = t.packets.withLock { $0.count }
        #expect(atOnce >= RTPSender.keyFrameTrainPackets && atOnce < 10, "\(atOnce) of 10 at once")
        #expect(waitFor { t.packets.withLock { $0.count } == 10 }, "the rest through the pacer")
    }
}

/// Without pacing, a frame's packets are numbered for transport-cc from its first number on; retransmissions for
/// NACKs come from another thread (the RTCP one) and must not take a number in the middle of a frame (#21: a
/// number sent twice makes the feedback for one of the packets look like the other's).
@Suite struct TransportNumberTests {
    @Test func retransmissionsFromAnotherThreadNeverReuseAFramesNumbers() throws {
        let t = RecordingTransport()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.transportWideCCExtensionID = 3
        c.rtxPayloadType = 97
        c.retransmissionShare = 1
        let s = try RTPSender(configuration: c, transport: t)
        defer { s.close() }
        let sending = Atomic<Bool>(true)
        let nacker = Thread {
            var k: UInt16 = 0
            while sending.load(ordering: .acquiring) {
                // NACK a packet a little behind the newest one (each is resent once per RTT, so walk along).
                let newest = s.nextSequenceNumber
                RTCPWriter.nack(sender: 1, media: s.ssrc, lost: [newest &- 1 &- (k % 8)]).withUnsafeBytes { s.handleRTCP($0) }
                k &+= 1
            }
        }
        nacker.start()
        let start = monotonicNanoseconds()
        for i in 0..<400 { try s.send(pFrame(packets: 8).stamped(start + Int64(i) * 33_333_333)) }
        sending.store(false, ordering: .releasing)
        while !nacker.isFinished { usleep(1000) }
        let numbers = t.packets.withLock { $0 }.compactMap { p in
            p.withUnsafeBytes { RTPHeader.oneByteExtension(id: 3, in: $0) }.map { UInt16($0[0]) << 8 | UInt16($0[1]) }
        }
        let retransmissions = s.statistics.retransmissions
        #expect(retransmissions > 0 && numbers.count == 400 * 8 + retransmissions, "\(numbers.count) numbered, \(retransmissions) resent")
        // Numbers wrap at 65536; 3200 + resends stay far below it, so each must be unique.
        #expect(Set(numbers).count == numbers.count, "\(numbers.count - Set(numbers).count) numbers sent twice, \(retransmissions) resent")
    }
}
