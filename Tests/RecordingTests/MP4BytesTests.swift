// Issue 47: the fragmented writer rewritten on the box writer writes the bytes the writer in H264 wrote.
import Foundation
import Testing
import VideoCapture
import H264
import Recording

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

struct MP4Case: Sendable, CustomStringConvertible {
    var name: String
    var profile: UInt8?
    var count: Int
    var keyint: Int
    var rotation: VideoRotation
    var fragmentNs: Int64
    var next: Int64?
    var description: String { name }

    static let all = [
        MP4Case(name: "x264, rotated 90, 0.5 s fragments", profile: nil, count: 100, keyint: 40, rotation: .rotation90, fragmentNs: 500_000_000),
        MP4Case(
            name: "High avcC, rotated 270, joined to a next segment", profile: 100, count: 61, keyint: 30, rotation: .rotation270,
            fragmentNs: 1_000_000_000, next: 123_456_789_000 + 3_000_000_000),
        MP4Case(name: "one frame", profile: nil, count: 1, keyint: 30, rotation: .rotation180, fragmentNs: 1_000_000_000),
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

    func writeLegacy(_ path: String) throws -> [UInt8] {
        try? FileManager.default.removeItem(atPath: path)
        var options = LegacyFragmentedMP4Writer.Options()
        options.fragmentDurationNs = fragmentNs
        options.creationTime = 1_700_000_000
        let w = try LegacyFragmentedMP4Writer(path: path, options: options)
        for f in fixtureRecording(try fixtureAccessUnits(profile: profile), count: count, keyint: keyint, rotation: rotation) { try w.write(f) }
        try w.close(nextTimestampNs: next)
        return readBytes(path)
    }
}

/// TEMPORARY (with LegacyFragmentedMP4Writer.swift): the new writer's file equals the old writer's, byte for byte.
@Test(arguments: MP4Case.all)
func theNewWriterWritesTheOldWritersBytes(_ c: MP4Case) throws {
    let new = try c.write(scratch + "/bytes-new.mp4"), old = try c.writeLegacy(scratch + "/bytes-old.mp4")
    #expect(new.count > 500 && new == old, "\(c): \(new.count) vs \(old.count) bytes")
    print("MP4BYTES \(c.name): \(new.count) bytes, fnv1a 0x\(String(fnv1a(new), radix: 16))")
}

/// TEMPORARY: the encoder's frames (Constrained Baseline, a BT.709 colour description: colr), frames before the
/// first key frame dropped, key frames cutting fragments, an empty recording.
@Test func theNewWriterWritesTheOldWritersBytesForTheEncodersFrames() throws {
    var s = H264Encoder.Settings(width: 320, height: 240)
    s.keyFrameInterval = 30
    s.colorSpace = .bt709
    let encoder = try H264Encoder(settings: s)
    let source = PatternSource(width: 320, height: 240, count: 16)
    var frames: [EncodedFrame] = []
    var out = EncodedFrame()
    for i in 0..<75 {
        try encoder.encode(source[i], timestampNs: 5_000_000_000 + Int64(i) * 33_366_667, into: &out)
        out.rotation = .rotation180
        frames.append(out)
    }
    frames.removeFirst() // starts with a P frame: dropped
    for slice in [frames[...], frames[0..<10]] {
        var options = FragmentedMP4Writer.Options()
        options.creationTime = 1_600_000_000
        var legacyOptions = LegacyFragmentedMP4Writer.Options()
        legacyOptions.creationTime = 1_600_000_000
        let pn = scratch + "/enc-new.mp4", po = scratch + "/enc-old.mp4"
        for p in [pn, po] { try? FileManager.default.removeItem(atPath: p) }
        let n = try FragmentedMP4Writer(path: pn, options: options), o = try LegacyFragmentedMP4Writer(path: po, options: legacyOptions)
        for f in slice {
            try n.write(f)
            try o.write(f)
        }
        try n.close()
        try o.close()
        #expect(readBytes(pn) == readBytes(po), "\(slice.count) frames: \(readBytes(pn).count) vs \(readBytes(po).count)")
        #expect(n.framesDroppedBeforeKeyFrame == o.framesDroppedBeforeKeyFrame && n.fragmentsWritten == o.fragmentsWritten)
    }
}
