// Issue 36: fragmented MP4 recordings judged by ffprobe, GStreamer, mkvmerge and mediainfo; raw H.264 with VUI timing.
import Foundation
import Testing
import VideoCapture
import VideoProcessing
@testable import H264
import Recording

/// Encodes `times.count` pattern frames (key frame every `keyint`) and writes them with their capture times.
private func recordMP4(
    _ path: String, times: [Int64], width: Int = 320, height: Int = 240, keyint: Int = 30, rotation: VideoRotation = .rotation0,
    colorSpace: VideoColorSpace = .unspecified, options: FragmentedMP4Writer.Options = .init(), close: Bool = true
) throws -> FragmentedMP4Writer {
    try? FileManager.default.removeItem(atPath: path)
    var s = H264Encoder.Settings(width: width, height: height)
    s.keyFrameInterval = keyint
    s.colorSpace = colorSpace
    let encoder = try H264Encoder(settings: s)
    let source = PatternSource(width: width, height: height, count: 16)
    let writer = try FragmentedMP4Writer(path: path, options: options)
    var out = EncodedFrame()
    for (i, t) in times.enumerated() {
        try encoder.encode(source[i], timestampNs: t, into: &out)
        out.rotation = rotation
        try writer.write(out)
    }
    if close { try writer.close() }
    return writer
}

/// ffprobe's packet presentation times (seconds) of the video stream.
private func packetTimes(_ path: String) throws -> [Double] {
    let (rc, out, err) = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time", "-of", "csv=p=0", path])
    #expect(rc == 0, "\(err)")
    return out.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
}

private func probeValue(_ path: String, _ entries: String) throws -> String {
    let (rc, out, err) = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", entries, "-of", "default=nw=1:nk=1", path])
    #expect(rc == 0, "\(err)")
    return out.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Frames an independent decoder gets out of the file, and what it said on stderr.
private func decodedFrames(_ path: String) throws -> (frames: Int, errors: String) {
    let (_, out, err) = try run(
        "ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
    return (Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1, err)
}

/// A variable frame rate (a camera in low light, dropped frames) comes out exact: every presentation time is the
/// capture time (relative to the first) within 1 ms, and the duration ends one frame after the last.
@Test func mp4PresentationTimesAreTheCaptureTimes() throws {
    let p = scratch + "/vfr.mp4"
    // 30 fps, then 15, a dropped frame, then 10 fps, starting at an arbitrary monotonic time.
    var times: [Int64] = []
    var t: Int64 = 987_654_321_000
    for i in 0..<90 {
        times.append(t)
        t += i < 30 ? 33_333_333 : i < 60 ? (i == 45 ? 133_333_333 : 66_666_667) : 100_000_000
    }
    let w = try recordMP4(p, times: times)
    #expect(w.framesWritten == 90 && w.fragmentsWritten >= 3)
    let pts = try packetTimes(p)
    #expect(pts.count == 90)
    let worst = zip(pts, times).map { abs($0 - Double($1 - times[0]) / 1e9) }.max() ?? 1
    #expect(worst < 0.001, "largest |pts - capture time| \(worst * 1000) ms")
    let expectedEnd = Double(times[89] - times[0] + 100_000_000) / 1e9
    let duration = Double(try probeValue(p, "format=duration")) ?? 0
    #expect(abs(duration - expectedEnd) < 0.002, "duration \(duration) s, expected \(expectedEnd)")
    let decoded = try decodedFrames(p)
    #expect(decoded.frames == 90 && decoded.errors.isEmpty, "\(decoded)")
    print("mp4: 90 frames at 30/15/10 fps, largest |pts - capture| \(String(format: "%.3f", worst * 1000)) ms, duration \(duration) s")
}

/// The structure as other demuxers read it: GStreamer's qtdemux decodes every frame, mkvmerge identifies the
/// track, mediainfo reads the frame count, the rotation and the colour; ffprobe sees the display matrix and colr.
@Test func mp4StructureSatisfiesOtherDemuxers() throws {
    let p = scratch + "/rotated.mp4"
    let times = (0..<60).map { Int64($0) * 33_333_333 }
    let bt601 = VideoColorSpace(primaries: .smpte170m, transfer: .smpte170m, matrix: .smpte170m, range: .full)
    _ = try recordMP4(p, times: times, width: 320, height: 240, rotation: .rotation90, colorSpace: bt601)
    // ffprobe: display matrix rotation (ffmpeg reports a clockwise display turn as -90), colour from colr/SPS.
    let side = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", p])
    #expect(side.1.contains("\"rotation\": -90"), "\(side.1)")
    #expect(side.1.contains("\"color_range\": \"pc\"") && side.1.contains("\"color_primaries\": \"smpte170m\""), "\(side.1)")
    // GStreamer: qtdemux + avdec_h264 decode all 60 (raw I420 bytes counted).
    let raw = scratch + "/rotated-gst.yuv"
    try? FileManager.default.removeItem(atPath: raw)
    let gst = try run(
        "gst-launch-1.0",
        [
            "-q", "filesrc", "location=\(p)", "!", "qtdemux", "!", "h264parse", "!", "avdec_h264", "!", "video/x-raw,format=I420", "!", "filesink",
            "location=\(raw)",
        ])
    #expect(gst.0 == 0, "\(gst.2)")
    let rawSize = (try? FileManager.default.attributesOfItem(atPath: raw)[.size] as? Int) ?? 0
    #expect(rawSize == 60 * 320 * 240 * 3 / 2, "GStreamer decoded \(rawSize / (320 * 240 * 3 / 2)) frames")
    // mkvmerge: an MP4 with one AVC video track.
    let mkv = try run("mkvmerge", ["-i", p])
    #expect(mkv.0 == 0 && mkv.1.contains("QuickTime/MP4") && mkv.1.contains("video (AVC/H.264/MPEG-4p10)"), "\(mkv.1)\(mkv.2)")
    // mediainfo: frame count, rotation, colour range.
    let info = try run("mediainfo", ["--Output=JSON", p])
    #expect(info.0 == 0)
    let json = info.1.replacingOccurrences(of: " ", with: "")
    #expect(
        json.contains("\"FrameCount\":\"60\"") && json.contains("\"Rotation\":\"90.000\"") && json.contains("\"colour_range\":\"Full\""), "\(info.1)")
}

/// A process killed at any moment leaves the file as it was at some byte: every prefix of a recording plays up
/// to its last complete fragment (no frame of a complete fragment lost, nothing undecodable shown).
@Test func everyTruncationPlaysToItsLastCompleteFragment() throws {
    let p = scratch + "/crash-source.mp4"
    let times = (0..<150).map { Int64($0) * 33_333_333 }
    var options = FragmentedMP4Writer.Options()
    options.fragmentDurationNs = 500_000_000 // key frames every 30 frames, fragments of 15
    _ = try recordMP4(p, times: times, keyint: 30, options: options)
    let bytes = fileBytes(p)
    // The fragments' ends, from the file's own boxes (moof + mdat pairs), and the frames each holds.
    let layout = mp4Layout(bytes)
    let ends = layout.fragments, initEnd = layout.headerEnd
    #expect(ends.count == 10 && ends.last?.frames == 150, "\(ends)")
    // Cut points: inside the header, at each fragment's end, and at random points inside fragments.
    var rng = SystemRandomNumberGenerator()
    var cuts = [initEnd, initEnd + 3] + ends.map(\.end)
    for _ in 0..<12 { cuts.append(Int.random(in: (initEnd + 1)..<bytes.count, using: &rng)) }
    var lines: [String] = []
    for cut in cuts {
        let q = scratch + "/crash-cut.mp4"
        // The writer's state at that byte: the fragment being written is still a `free` box (its type is
        // rewritten to `moof` only once all of it is in).
        var state = bytes
        let starts = [initEnd] + ends.map(\.end)
        if let open = starts.last(where: { $0 < cut }), !ends.contains(where: { $0.end == cut }), open + 8 <= state.count {
            state.replaceSubrange((open + 4)..<(open + 8), with: Array("free".utf8))
        }
        writeFile(q, state, count: cut)
        let expected = ends.last { $0.end <= cut }?.frames ?? 0
        let got = try decodedFrames(q)
        // No frame at all: ffprobe finds no stream to count (-1); a file cut in its header is not playable.
        #expect(
            got.frames == expected || (expected == 0 && got.frames == -1),
            "cut at \(cut) of \(bytes.count) bytes: decoded \(got.frames), complete fragments hold \(expected)")
        lines.append("\(cut):\(got.frames)/\(expected)")
    }
    print("mp4 truncations (byte:decoded/in complete fragments): \(lines.joined(separator: " "))")
}

private func fileBytes(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

private func writeFile(_ path: String, _ bytes: [UInt8], count: Int) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes[0..<count]))
}

/// A size change mid-recording (adaptation): the new parameter sets travel in band, and every frame of both
/// sizes decodes in ffmpeg and GStreamer.
@Test func aSizeChangeMidRecordingDecodesThrough() throws {
    let p = scratch + "/resize.mp4"
    try? FileManager.default.removeItem(atPath: p)
    let writer = try FragmentedMP4Writer(path: p)
    var s = H264Encoder.Settings(width: 320, height: 240)
    s.keyFrameInterval = 30
    let encoder = try H264Encoder(settings: s)
    let big = PatternSource(width: 320, height: 240, count: 4), small = PatternSource(width: 160, height: 120, count: 4)
    var out = EncodedFrame()
    for i in 0..<40 {
        try encoder.encode(i < 20 ? big[i] : small[i], timestampNs: Int64(i) * 33_333_333, into: &out)
        try writer.write(out)
    }
    try writer.close()
    let (rc, out2, err) = try run("ffprobe", ["-v", "error", "-show_frames", "-show_entries", "frame=width,height", "-of", "csv=p=0", p])
    #expect(rc == 0 && err.isEmpty, "\(err)")
    let sizes = out2.split(separator: "\n").map(String.init)
    #expect(sizes.count == 40 && sizes.prefix(20).allSatisfy { $0 == "320,240" } && sizes.suffix(20).allSatisfy { $0 == "160,120" }, "\(sizes)")
    let gst = try run("gst-launch-1.0", ["-q", "filesrc", "location=\(p)", "!", "qtdemux", "!", "h264parse", "!", "avdec_h264", "!", "fakesink"])
    #expect(gst.0 == 0, "\(gst.2)")
}

/// Frames before the first key frame are dropped (the file starts decodable); bad input is refused by name.
@Test func mp4RefusesWhatWouldNotPlay() throws {
    let p = scratch + "/refuse.mp4"
    try? FileManager.default.removeItem(atPath: p)
    let w = try FragmentedMP4Writer(path: p)
    var f = EncodedFrame()
    f.data = [0, 0, 0, 1, 0x41, 1, 2, 3]
    f.nalUnits = [NALUnit(type: .slice, offset: 4, length: 4)]
    try w.write(f)
    #expect(w.framesDroppedBeforeKeyFrame == 1 && w.framesWritten == 0)
    var bad = EncodedFrame()
    bad.data = [0, 0, 0, 1, 0x65]
    bad.nalUnits = [NALUnit(type: .idr, offset: 4, length: 40)]
    let e = #expect(throws: H264Error.self) { try w.write(bad) }
    #expect(e?.message.contains("outside the frame") == true)
    // Timestamps that go back are refused with both values.
    var s = H264Encoder.Settings(width: 64, height: 64)
    s.keyFrameInterval = 10
    let enc = try H264Encoder(settings: s)
    var out = EncodedFrame()
    try enc.encode(I420Buffer(width: 64, height: 64), timestampNs: 1_000_000, into: &out)
    try w.write(out)
    try enc.encode(I420Buffer(width: 64, height: 64), timestampNs: 500_000, into: &out)
    let back = #expect(throws: H264Error.self) { try w.write(out) }
    #expect(back?.message.contains("500000 ns after 1000000 ns") == true, "\(back?.message ?? "")")
    try w.close()
    var o = FragmentedMP4Writer.Options()
    o.fragmentDurationNs = 0
    #expect(throws: H264Error.self) { _ = try FragmentedMP4Writer(path: scratch + "/never.mp4", options: o) }
    #expect(!FileManager.default.fileExists(atPath: scratch + "/never.mp4"))
}

/// Raw H.264 gets the negotiated rate into the SPS (VUI timing_info): ffprobe's r_frame_rate shows it, for whole,
/// fractional and NTSC rates, and the rest of the SPS (size, colour) is unchanged.
@Test(arguments: [(Fraction(30), "30/1"), (Fraction(25, 2), "25/2"), (Fraction(30000, 1001), "30000/1001")])
func annexBStatesItsFrameRate(_ rate: Fraction, _ expected: String) throws {
    let p = scratch + "/timing-\(rate.numerator)-\(rate.denominator).h264"
    try? FileManager.default.removeItem(atPath: p)
    let w = try AnnexBWriter(path: p, frameRate: rate)
    var s = H264Encoder.Settings(width: 320, height: 180)
    s.keyFrameInterval = 10
    s.colorSpace = VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .limited)
    let enc = try H264Encoder(settings: s)
    let source = PatternSource(width: 320, height: 180, count: 4)
    var out = EncodedFrame()
    for i in 0..<25 {
        try enc.encode(source[i], timestampNs: Int64(i) * 33_333_333, into: &out)
        try w.write(out)
    }
    try w.close()
    let (rc, o, err) = try run(
        "ffprobe",
        ["-v", "error", "-count_frames", "-show_entries", "stream=r_frame_rate,width,height,color_primaries,nb_read_frames", "-of", "csv=p=0", p])
    #expect(rc == 0 && err.isEmpty, "\(err)")
    #expect(o.trimmingCharacters(in: .whitespacesAndNewlines) == "320,180,bt709,\(expected),25", "\(o)")
    // The SPS read back states the rate, and a rewrite of a rewritten SPS changes nothing more.
    let units = try AnnexB.split(fileBytes(p))
    let data = fileBytes(p)
    let sps = units.first { $0.type == .sps }!
    let nal = data[sps.offset..<(sps.offset + sps.length)]
    let parsed = try SequenceParameterSet(nal: nal)
    #expect(parsed.timing == .init(unitsInTick: UInt32(rate.denominator), timeScale: UInt32(rate.numerator * 2), fixedFrameRate: false))
    #expect(parsed.width == 320 && parsed.height == 180 && parsed.videoSignal?.primaries == 1)
    #expect(try SequenceParameterSet.withTiming(nal, framesPerSecond: rate) == Array(nal))
}

/// The rewrite refuses an SPS it cannot parse, and rates that do not fit, by name; every truncation of a real
/// SPS is an error, never a trap.
@Test func timingRewriteRefusesBadInput() throws {
    var s = H264Encoder.Settings(width: 64, height: 64)
    s.keyFrameInterval = 1
    let f = try H264Encoder(settings: s).encode(I420Buffer(width: 64, height: 64), timestampNs: 0)
    let u = f.nalUnits.first { $0.type == .sps }!
    let nal = f.data[u.offset..<(u.offset + u.length)]
    for n in 1..<nal.count { _ = try? SequenceParameterSet.withTiming(nal.prefix(n), framesPerSecond: Fraction(30)) }
    #expect(throws: H264Error.self) { _ = try SequenceParameterSet.withTiming(nal, framesPerSecond: Fraction(Int64(UInt32.max), 1)) }
    #expect(throws: H264Error.self) { _ = try SequenceParameterSet.withTiming([0x68, 1, 2][...], framesPerSecond: Fraction(30)) }
}
