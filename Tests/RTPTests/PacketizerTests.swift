import Foundation
import Testing
import VideoCapture
import FixtureCameras
import H264
@testable import RTP
@_exported import TestSupport

let scratch = scratchDirectory("rtp-tests")

/// Encoded frames of the fixture pattern (noisy, so frames are large enough to fragment).
func encodedFrames(_ count: Int, width: Int = 640, height: Int = 480, bitrate: Int = 2_000_000, keyInterval: Int = 60) throws -> [EncodedFrame] {
    var settings = H264Encoder.Settings(width: width, height: height)
    settings.targetBitrate = bitrate
    settings.keyFrameInterval = keyInterval
    let encoder = try H264Encoder(settings: settings)
    defer { encoder.close() }
    let picture = I420Buffer(width: width, height: height)
    return try (0..<count).map { i in
        TestPattern.render(frame: UInt64(i), into: picture, noise: 6)
        return try encoder.encode(picture, timestampNs: Int64(i) * 33_333_333)
    }
}

/// An access unit of made-up NAL units of the given types and lengths (header byte + filler).
func accessUnit(_ units: [(NALUnitType, Int)]) -> EncodedFrame {
    var f = EncodedFrame()
    for (type, length) in units {
        f.data += [0, 0, 0, 1]
        f.nalUnits.append(NALUnit(type: type, offset: f.data.count, length: length))
        f.data.append(0x60 | type.rawValue)
        f.data += (1..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }
    }
    return f
}

struct Packet {
    var header: RTPHeader
    var bytes: [UInt8]
    var payload: ArraySlice<UInt8> { bytes[header.payloadOffset..<(header.payloadOffset + header.payloadLength)] }
}

func packetize(_ f: EncodedFrame, _ p: inout H264Packetizer, timestamp: UInt32 = 1000) -> [Packet] {
    var out: [Packet] = []
    p.packetize(f.data, nalUnits: f.nalUnits, timestamp: timestamp) { raw in
        out.append(Packet(header: RTPHeader(raw)!, bytes: Array(raw)))
    }
    return out
}

/// Annex-B with 4-byte start codes of the NAL units a receiver gets (AUD/SEI/filler dropped).
func expectedAnnexB(_ f: EncodedFrame) -> [UInt8] {
    var out: [UInt8] = []
    for n in f.nalUnits where ![.accessUnitDelimiter, .sei, .filler].contains(n.type) {
        out += [0, 0, 0, 1]
        out += f.data[n.offset..<(n.offset + n.length)]
    }
    return out
}

@Suite struct PacketizerTests {
    @Test func aNALOfExactlyTheBudgetIsOnePacketAndOneMoreByteIsTwoFragments() {
        var p = H264Packetizer(maxPayload: 1200)
        let exact = packetize(accessUnit([(.slice, 1200)]), &p)
        #expect(exact.count == 1 && exact[0].bytes.count == 1212 && exact[0].payload.first! & 0x1f == 1)
        let over = packetize(accessUnit([(.slice, 1201)]), &p)
        #expect(over.count == 2)
        #expect(over.allSatisfy { $0.bytes.count <= 1212 && $0.payload.first! & 0x1f == 28 })
        #expect(over[0].payload[over[0].payload.startIndex + 1] & 0xc0 == 0x80, "S bit on the first fragment")
        #expect(over[1].payload[over[1].payload.startIndex + 1] & 0xc0 == 0x40, "E bit on the last fragment")
    }

    @Test func aLargeIDRIsFragmentedWithinTheMTUAndOnlyTheLastPacketHasTheMarker() {
        var p = H264Packetizer(maxPayload: 1200)
        let idr = 200 * 1024
        let packets = packetize(accessUnit([(.sps, 12), (.pps, 4), (.idr, idr)]), &p, timestamp: 42)
        let fragments = (idr - 1 + 1197) / 1198
        #expect(packets.count == 1 + fragments, "one STAP-A, then \(fragments) FU-A")
        #expect(packets[0].payload.first! & 0x1f == 24, "SPS and PPS share a STAP-A")
        #expect(packets.allSatisfy { $0.bytes.count <= 1212 && $0.header.timestamp == 42 })
        #expect(packets.dropLast().allSatisfy { !$0.header.marker } && packets.last!.header.marker)
        let seqs = packets.map(\.header.sequence)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $1 == $0 &+ 1 })
    }

    @Test func theMarkerPacketAloneCarriesTheVideoOrientationExtensionAndThePayloadIsIntact() throws {
        var p = H264Packetizer(maxPayload: 1200)
        let frame = accessUnit([(.sps, 12), (.pps, 4), (.idr, 5000)])
        for degrees in [0, 90, 180, 270] {
            let cvo = try #require(RTPHeaderExtensionElement.videoOrientation(id: 3, rotationDegrees: degrees))
            var packets: [Packet] = []
            p.packetize(frame.data, nalUnits: frame.nalUnits, timestamp: 9, markerExtension: cvo) { raw in
                packets.append(Packet(header: RTPHeader(raw)!, bytes: Array(raw)))
            }
            let values = packets.map { $0.bytes.withUnsafeBytes { RTPHeader.oneByteExtension(id: 3, in: $0) } }
            #expect(values.dropLast().allSatisfy { $0 == nil } && values.last == [UInt8(degrees / 90)], "\(degrees): \(values)")
            #expect(RTPHeaderExtensionElement.rotationDegrees(videoOrientation: values.last!![0]) == degrees)
            let last = try #require(packets.last)
            // X bit, profile 0xBEDE, one word: id 3, length 1 (L = 0), the byte, two bytes of padding.
            #expect(last.bytes[0] == 0x90 && Array(last.bytes[12..<20]) == [0xBE, 0xDE, 0, 1, 0x30, UInt8(degrees / 90), 0, 0])
            #expect(last.header.payloadOffset == 20 && last.header.marker && packets.dropLast().allSatisfy { $0.bytes[0] == 0x80 })
            #expect(packets.allSatisfy { $0.header.payloadLength <= 1200 }, "the payload budget is unchanged")
            var d = H264Depacketizer()
            var au: [UInt8]?
            for pk in packets { if let a = pk.bytes.withUnsafeBytes({ d.push($0) }) { au = a.accessUnit } }
            #expect(au == expectedAnnexB(frame))
        }
        // Elements of every length 1...8 round-trip; out-of-range ids and lengths are refused.
        for length in 1...8 {
            let e = try #require(RTPHeaderExtensionElement(id: 14, value: 0x0102_0304_0506_0708, length: length))
            var bytes: [UInt8] = []
            p.packetize(accessUnit([(.slice, 40)]).data, nalUnits: accessUnit([(.slice, 40)]).nalUnits, timestamp: 1, markerExtension: e) {
                bytes = Array($0)
            }
            #expect(bytes.withUnsafeBytes { RTPHeader.oneByteExtension(id: 14, in: $0) } == Array([1, 2, 3, 4, 5, 6, 7, 8].suffix(length)))
            #expect(bytes.count <= 12 + H264Packetizer.maxExtensionSize + 1 + 40)
        }
        #expect(RTPHeaderExtensionElement(id: 0, value: 0, length: 1) == nil && RTPHeaderExtensionElement(id: 15, value: 0, length: 1) == nil)
        #expect(RTPHeaderExtensionElement(id: 1, value: 0, length: 0) == nil && RTPHeaderExtensionElement(id: 1, value: 0, length: 9) == nil)
        // Reading never traps on a malformed block: every truncation and byte flip of a packet with an extension.
        var packet: [UInt8] = []
        p.packetize(
            accessUnit([(.slice, 30)]).data, nalUnits: accessUnit([(.slice, 30)]).nalUnits, timestamp: 1,
            markerExtension: RTPHeaderExtensionElement.videoOrientation(id: 5, rotationDegrees: 270)
        ) { packet = Array($0) }
        for n in 0...24 { _ = Array(packet.prefix(n)).withUnsafeBytes { RTPHeader.oneByteExtension(id: 5, in: $0) } }
        for i in 0..<24 {
            for v: UInt8 in [0, 0x0f, 0xf0, 0xff] {
                var m = packet
                m[i] = v
                _ = m.withUnsafeBytes { RTPHeader.oneByteExtension(id: 5, in: $0) }
            }
        }
    }

    @Test func sequenceNumbersWrapAt65536AndTimestampsAt2To32() {
        var p = H264Packetizer(maxPayload: 1200, state: RTPStreamState(payloadType: 96, ssrc: 7, sequence: 65534))
        let packets = packetize(accessUnit([(.idr, 5000)]), &p)
        #expect(packets.map(\.header.sequence) == [65534, 65535, 0, 1, 2])
        var clock = RTPClock(offset: UInt32.max - 2999) // 3000 ticks before the wrap
        #expect(clock.timestamp(forCaptureNs: 5_000_000_000) == UInt32.max - 2999)
        #expect(clock.timestamp(forCaptureNs: 5_000_000_000 + 33_333_333) == UInt32.max) // 2999 ticks later
        let wrapped: UInt32 = 3000 // 6000 ticks after UInt32.max - 2999
        #expect(clock.timestamp(forCaptureNs: 5_000_000_000 + 66_666_667) == wrapped)
    }

    @Test func the90kHzClockHasNoDriftAcrossDropsAndRateChanges() {
        var clock = RTPClock(offset: 0)
        _ = clock.timestamp(forCaptureNs: 1_000)
        // 30 fps for an hour: exactly 3000 ticks a frame, whatever the rounding of each step.
        #expect(clock.timestamp(forCaptureNs: 1_000 + 108_000 * 1_000_000_000 / 30) == 108_000 * 3000)
        // A dropped frame: two periods. A switch to 15 fps: 6000 ticks a frame from there.
        #expect(clock.timestamp(forCaptureNs: 1_000 + 2 * 33_333_333) == 5999)
        #expect(clock.timestamp(forCaptureNs: 1_000 + 1_000_000_000 + 66_666_667) == 90_000 + 6000)
        // A capture clock ten days in: no overflow.
        #expect(clock.timestamp(forCaptureNs: 1_000 + 864_000 * 1_000_000_000) == UInt32(truncatingIfNeeded: Int64(864_000) * 90_000))
    }

    @Test func smallNALUnitsShareASTAPAAndAUDAndSEIAreDropped() {
        var p = H264Packetizer(maxPayload: 1200)
        let packets = packetize(accessUnit([(.accessUnitDelimiter, 2), (.sei, 20), (.sps, 15), (.pps, 4), (.idr, 300)]), &p)
        #expect(packets.count == 1, "SPS, PPS and a small IDR fit one STAP-A")
        #expect(packets[0].payload.first! & 0x1f == 24 && packets[0].header.marker)
        var d = H264Depacketizer()
        let au = packets[0].bytes.withUnsafeBytes { d.push($0) }
        #expect(au?.accessUnit == expectedAnnexB(accessUnit([(.sps, 15), (.pps, 4), (.idr, 300)])))
    }

    @Test func theDepacketizerRestoresEveryAccessUnitByteForByteAndFFmpegDecodesThem() throws {
        let frames = try encodedFrames(60)
        var p = H264Packetizer(maxPayload: 1200)
        var d = H264Depacketizer()
        var clock = RTPClock()
        var stream: [UInt8] = []
        var restored = 0
        for (i, f) in frames.enumerated() {
            var done: [UInt8]?
            p.packetize(f.data, nalUnits: f.nalUnits, timestamp: clock.timestamp(forCaptureNs: Int64(i) * 33_333_333)) { raw in
                if let au = d.push(raw) { done = au.accessUnit }
            }
            #expect(done == expectedAnnexB(f), "frame \(i)")
            if let done {
                stream += done
                restored += 1
            }
        }
        #expect(restored == 60 && d.lostPackets == 0 && d.droppedAccessUnits == 0)
        let path = scratch + "/depacketized.h264"
        _ = FileManager.default.createFile(atPath: path, contents: Data(stream))
        let (rc, out, err) = try run(
            "ffprobe", ["-v", "error", "-f", "h264", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height", "-of", "csv=p=0", path])
        #expect(rc == 0, "\(err)")
        #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "640,480,60")
    }

    @Test func aLostPacketDropsItsAccessUnitAndIsCounted() throws {
        let frames = try encodedFrames(3)
        var p = H264Packetizer(maxPayload: 1200)
        var d = H264Depacketizer()
        var delivered = 0
        for (i, f) in frames.enumerated() {
            let packets = packetize(f, &p, timestamp: UInt32(i * 3000))
            for (k, pk) in packets.enumerated() where !(i == 1 && k == 1) { // lose one packet of frame 1
                if pk.bytes.withUnsafeBytes({ d.push($0) }) != nil { delivered += 1 }
            }
        }
        #expect(delivered == 2 && d.lostPackets == 1 && d.droppedAccessUnits == 1)
    }
}
