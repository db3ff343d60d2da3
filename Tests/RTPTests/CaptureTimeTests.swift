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
        #expect(header.payloadOffset == 12 + 24 && H264Packetizer.maxExtensionSize == 24 && header.payloadLength == 40)
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
        final class Recorder: RTPTransport, @unchecked Sendable {
            // @unchecked: `packets` is only touched under its Mutex.
            let packets = Mutex<[[UInt8]]>([])
            func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 {
                packets.withLock { $0.append(Array(packet)) }
                return 0
            }
            func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { 0 }
        }
        let transport = Recorder()
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
