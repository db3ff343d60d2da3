// Issue 36, colour range: the MJPEG fixture camera's frames are labelled full range (JPEG's own), so its JPEGs
// carry full-range samples: black 0 and white 255 as ffmpeg decodes them, not limited range's 16 and 235.
import Foundation
import Testing
import VideoCapture
import VideoProcessing
@testable import FixtureCameras

@Test func mjpegFixtureJPEGsCarryTheFullRangeTheyAreLabelledWith() async throws {
    let (w, h) = (640, 480)
    let frames = try await fixtureFrames("fixture:uvc-webcam", "MJPG", FrameSize(width: w, height: h), count: 3)
    let last = try #require(frames.last)
    #expect(last.colorSpace.range == .full, "MJPEG frames are labelled full range: \(last.colorSpace)")
    let path = scratchDir + "/fixture-range-\(w)x\(h).jpg"
    writeFile(path, UnsafeRawBufferPointer(rebasing: last.buffer.bytes[...]))
    let (rc, probed, _) = try run("ffprobe", ["-v", "error", "-show_entries", "stream=pix_fmt,color_range", "-of", "csv=p=0", path])
    #expect(rc == 0 && probed.trimmingCharacters(in: .whitespacesAndNewlines) == "yuvj420p,pc", "ffprobe: \(probed)")
    // ffmpeg's decode: the JPEG's own samples (yuvj420p) and its own RGB conversion of them.
    let yuv = try ffmpegToYUV420([], path, outFmt: "yuvj420p")
    let rgb = try ffmpegToYUV420([], path, outFmt: "rgb24")
    try #require(yuv.count >= w * h && rgb.count == w * h * 3)
    let layout = TestPattern.Layout(width: w, height: h)
    let square = try #require(layout.square(frame: last.sequence)), box = try #require(layout.counterBox)
    // Centres of the white (75 %) bar, the black bar, the moving square (100 % white), the counter's box (black,
    // left of its first digit).
    let points: [(name: String, x: Int, y: Int, luma: Int)] = [
        ("75% white bar", w / 16, 40, Int(TestPattern.fullRangeBars[0].y)), ("black bar", w - w / 16, 40, 0),
        ("square", square.x + square.w / 2, square.y + square.h / 2, 255), ("counter box", box.x + layout.scale / 2, box.y + box.h / 2, 0),
    ]
    var figures: [String] = []
    for p in points {
        let y = Int(yuv[p.y * w + p.x])
        let o = (p.y * w + p.x) * 3
        let (r, g, b) = (Int(rgb[o]), Int(rgb[o + 1]), Int(rgb[o + 2]))
        figures.append("\(p.name) Y' \(y) RGB \(r),\(g),\(b)")
        #expect(abs(y - p.luma) <= 2, "\(p.name): ffmpeg decodes Y' \(y), want \(p.luma) (full range)")
        #expect([r, g, b].allSatisfy { abs($0 - p.luma) <= 3 }, "\(p.name): ffmpeg's RGB \(r),\(g),\(b), want \(p.luma)")
    }
    print("FIGURE MJPEG fixture \(w)x\(h) frame \(last.sequence) as ffmpeg decodes it: \(figures.joined(separator: "; "))")
    #expect(TestPattern.fullRangeBars[0].y == 191 && TestPattern.fullRangeBars[7].y == 0, "75% white 180 → 191, black 16 → 0")
}

@Test func rawFixtureFramesStayLimitedRange() async throws {
    // The same pattern from a raw Y'CbCr camera is limited range, as its frames say: black 16, 75 % white 180.
    let frames = try await fixtureFrames("fixture:vivid", "YUYV", FrameSize(width: 640, height: 360), count: 2)
    let last = try #require(frames.last)
    #expect(last.colorSpace.range == .limited)
    let picture = try FrameConverter().convert(last.buffer)
    #expect(picture.dataY[20 * picture.strideY + 40] == 180 && picture.dataY[20 * picture.strideY + 600] == 16)
}

@Test func fullRangeControlsKeepTheirMeaning() {
    // Contrast is around black (0 in full range) and a solid colour is the limited one expanded.
    var s = PictureSettings()
    s.contrastNum = 1
    s.contrastDen = 2
    let full = PatternRenderer(width: 64, height: 32, noise: 0, fullRange: true)
    full.settings = s
    full.advance(to: 0)
    let out = full.output
    #expect(out.dataY[2] == 95, "191 at half contrast around 0: 95 (limited range would give 16 + 82 = 98), got \(out.dataY[2])")
    #expect(out.dataY[62] == 0, "black stays 0")
    s = PictureSettings()
    s.solid = 0x51_5a_f0 // vivid's 100 % red, limited range
    full.settings = s
    full.advance(to: 1)
    #expect(full.output.dataY[0] == TestPattern.fullRangeLuma(0x51) && full.output.dataV[0] == 255, "red expanded: Y' 76, Cr 255")
}
