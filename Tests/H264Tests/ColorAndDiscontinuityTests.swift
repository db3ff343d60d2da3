import Foundation
import Testing
import VideoCapture
import H264
import Recording

/// ffprobe's per-frame key flag and colour description of an H.264 file, in decode order.
private func frameColours(_ path: String) throws -> [(key: Bool, range: String, matrix: String, primaries: String, transfer: String)] {
    let (rc, out, err) = try run(
        "ffprobe",
        [
            "-v", "error", "-f", "h264", "-show_frames", "-show_entries",
            "frame=key_frame,color_range,color_space,color_primaries,color_transfer", "-of", "csv=p=0", path,
        ])
    #expect(rc == 0, "\(err)")
    return out.split(separator: "\n").map { line in
        let f = line.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingCharacters(in: .whitespaces) }
        return (f.first == "1", f.count > 1 ? f[1] : "", f.count > 2 ? f[2] : "", f.count > 3 ? f[3] : "", f.count > 4 ? f[4] : "")
    }
}

@Test func encoderWritesTheFramesColourDescriptionAndStartsAnIDRWhenItChanges() throws {
    let source = PatternSource(width: 320, height: 240, count: 4)
    var settings = H264Encoder.Settings(width: 320, height: 240)
    settings.keyFrameInterval = 1000
    let enc = try H264Encoder(settings: settings)
    let path = scratch + "/colour.h264"
    let writer = try AnnexBWriter(path: path)
    let hd = VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .full)
    var out = EncodedFrame()
    for i in 0..<20 {
        var frame = VideoFrame(
            buffer: source[i].buffer, timestampNs: Int64(i) * 33_333_333, sequence: UInt64(i), colorSpace: i < 10 ? hd : .webcam)
        frame.isDiscontinuity = i == 15 // a camera switch at the same size and colours
        try enc.encode(frame, into: &out)
        try writer.write(out)
    }
    try writer.close()
    let frames = try frameColours(path)
    try #require(frames.count == 20, "ffprobe decoded \(frames.count) of 20 frames")
    #expect(frames[0].range == "pc" && frames[0].matrix == "bt709" && frames[0].primaries == "bt709" && frames[0].transfer == "bt709")
    #expect(frames[9].range == "pc")
    #expect(frames[10].range == "tv" && frames[10].matrix == "smpte170m" && frames[10].transfer == "iec61966-2-1")
    #expect(frames[19].range == "tv")
    // IDRs: the first frame, the colour change and the discontinuity; nothing else (interval 1000).
    #expect(frames.indices.filter { frames[$0].key } == [0, 10, 15])
    #expect(enc.statistics.reconfigurations == 1)
}

@Test func unspecifiedColoursWriteNoDescriptionAndOtherFormatsAreRefused() throws {
    let source = PatternSource(width: 160, height: 120, count: 1)
    let enc = try H264Encoder(settings: H264Encoder.Settings(width: 160, height: 120))
    let path = scratch + "/uncoloured.h264"
    let writer = try AnnexBWriter(path: path)
    var out = EncodedFrame()
    try enc.encode(VideoFrame(buffer: source[0].buffer, rotation: .rotation270, timestampNs: 0, sequence: 0), into: &out)
    #expect(out.rotation == .rotation270, "the frame's rotation is carried for the receiver")
    try writer.write(out)
    try writer.close()
    try enc.encode(source[0], timestampNs: 1, into: &out)
    #expect(out.rotation == .rotation0, "a bare picture is upright")
    let frames = try frameColours(path)
    #expect(frames.count == 1 && frames[0].range == "unknown" && frames[0].matrix == "unknown", "\(frames)")
    let yuyv = VideoFrameBuffer(
        pixelFormat: .yuyv, width: 160, height: 120, stride: 320, bytesUsed: 320 * 120, storage: FrameStorage(capacity: 320 * 120))
    #expect(throws: H264Error.self) { try enc.encode(VideoFrame(buffer: yuyv, timestampNs: 1, sequence: 1), into: &out) }
}
