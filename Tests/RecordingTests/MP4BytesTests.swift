// Issue 47: the fragmented writer rewritten on the box writer writes the bytes the writer in H264 wrote.
import Foundation
import Testing
import VideoCapture
import H264
@testable import Recording

/// The access units of the fixture x264 stream (SPS PPS SEI IDR, P, SPS PPS IDR), each with 4-byte start codes;
/// with `profile`, its SPS says that profile (100: High, whose avcC has the extra fields).
func fixtureAccessUnits(profile: UInt8? = nil) throws -> [EncodedFrame] {
    let stream = readBytes(fixturesRoot + "/h264/seed-x264-64x48.h264")
    var frames: [EncodedFrame] = []
    var frame = EncodedFrame()
    for u in try AnnexB.split(stream) {
        var bytes = Array(stream[u.offset..<(u.offset + u.length)])
        if u.type == .sps, let profile { bytes[1] = profile }
        frame.data += [0, 0, 0, 1]
        frame.nalUnits.append(NALUnit(type: u.type, offset: frame.data.count, length: bytes.count))
        frame.data += bytes
        if u.type == .idr || u.type == .slice {
            frame.isKeyFrame = u.type == .idr
            frames.append(frame)
            frame = EncodedFrame()
        }
    }
    return frames
}

/// A recording of `count` frames from `units` (the first, then P frames with a key frame every `keyint`), at a
/// variable rate from an arbitrary start.
func fixtureRecording(_ units: [EncodedFrame], count: Int, keyint: Int, rotation: VideoRotation) -> [EncodedFrame] {
    var t: Int64 = 123_456_789_000
    return (0..<count).map { i in
        var f = i == 0 ? units[0] : i % keyint == 0 ? units[2] : units[1]
        f.timestampNs = t
        f.rotation = rotation
        t += i % 7 == 3 ? 133_333_333 : 33_333_333
        return f
    }
}

/// FNV-1a over a file's bytes.
func fnv1a(_ bytes: [UInt8]) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in bytes {
        h ^= UInt64(b)
        h = h &* 0x100_0000_01b3
    }
    return h
}

/// A recording of the fixture's frames, and what the writer in H264 wrote for it before the move (#47): its
/// size and FNV-1a, recorded when a copy of that writer, run beside the new one in this test, wrote the same bytes.
struct MP4Case: Sendable, CustomStringConvertible {
    var name: String
    var profile: UInt8?
    var count: Int
    var keyint: Int
    var rotation: VideoRotation
    var fragmentNs: Int64
    var next: Int64?
    var size: Int
    var fnv: UInt64
    var description: String { name }

    static let all = [
        MP4Case(
            name: "x264, rotated 90, 0.5 s fragments", profile: nil, count: 100, keyint: 40, rotation: .rotation90, fragmentNs: 500_000_000,
            size: 18177, fnv: 0x859b_b676_75f8_4c42),
        MP4Case(
            name: "High avcC, rotated 270, joined to a next segment", profile: 100, count: 61, keyint: 30, rotation: .rotation270,
            fragmentNs: 1_000_000_000, next: 123_456_789_000 + 3_000_000_000, size: 12224, fnv: 0x1e55_af9c_7937_0ed3),
        MP4Case(
            name: "one frame", profile: nil, count: 1, keyint: 30, rotation: .rotation180, fragmentNs: 1_000_000_000, size: 2342,
            fnv: 0xb1d7_982e_9405_3d40),
    ]

    func write(_ path: String) throws -> [UInt8] {
        try? FileManager.default.removeItem(atPath: path)
        var options = FragmentedMP4Writer.Options()
        options.fragmentDurationNs = fragmentNs
        options.creationTime = 1_700_000_000
        let w = try FragmentedMP4Writer(path: path, options: options)
        for f in fixtureRecording(try fixtureAccessUnits(profile: profile), count: count, keyint: keyint, rotation: rotation) { try w.write(f) }
        try w.close(nextTimestampNs: next)
        return readBytes(path)
    }
}

/// The writer on the box writer writes, byte for byte, what the writer in H264 wrote: rotations, fragments cut by
/// key frames and by duration, the High profile's avcC fields, a last frame joined to the next segment, one frame.
@Test(arguments: MP4Case.all)
func theWriterWritesTheBytesItWroteInH264(_ c: MP4Case) throws {
    let bytes = try c.write(scratch + "/bytes-\(c.count)-\(c.keyint).mp4")
    #expect(bytes.count == c.size && fnv1a(bytes) == c.fnv, "\(c): \(bytes.count) bytes, fnv1a 0x\(String(fnv1a(bytes), radix: 16))")
}

/// Every box's size is patched when it ends, children included; a full box carries version and flags.
@Test func theBoxWriterPatchesEverySizeAtTheEnd() {
    var b = MP4BoxWriter()
    b.box("moov") { b in
        b.fullBox("mvex", version: 1, flags: 0x0203) { b in b.u32(7) }
        b.box("trak") { b in b.zeros(5) }
    }
    #expect(b.bytes.count == 8 + 16 + 13)
    #expect(Array(b.bytes[0..<8]) == [0, 0, 0, 37] + Array("moov".utf8))
    #expect(Array(b.bytes[8..<24]) == [0, 0, 0, 16] + Array("mvex".utf8) + [1, 0, 2, 3, 0, 0, 0, 7])
    #expect(Array(b.bytes[24..<32]) == [0, 0, 0, 13] + Array("trak".utf8))
    var fragment = MP4FragmentSamples()
    fragment.sizes = [100, 50]
    fragment.keys = [true, false]
    fragment.times = [0, 3000]
    fragment.end = 6000
    b.removeAll()
    b.moof(sequence: 1, fragment)
    let moofSize = b.bytes.count
    #expect(Array(b.bytes[0..<4]) == MP4BoxWriter.bigEndian(UInt64(moofSize)).suffix(4))
    b.mdatHeader(payload: 150)
    #expect(Array(b.bytes[moofSize...]) == [0, 0, 0, 158] + Array("mdat".utf8))
}
