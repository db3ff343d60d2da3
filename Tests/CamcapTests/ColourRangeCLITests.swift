// Issue 36, colour range, from outside: what `record` and `preview --snapshot` write from a full-range camera (the
// MJPEG fixture: JPEG is full range) and from a limited-range one (vivid's YU12), read back by ffprobe and ffmpeg.
import Foundation
import Testing
import TestSupport

/// Raw bytes ffmpeg decodes `path` to (`pixFmt` rawvideo; `inputArgs` before `-i`).
private func ffmpegRaw(_ inputArgs: [String], _ path: String, _ pixFmt: String) throws -> [UInt8] {
    let out = path + "." + pixFmt
    let r = try sh("ffmpeg", ["-v", "error", "-y"] + inputArgs + ["-i", path, "-f", "rawvideo", "-pix_fmt", pixFmt, out])
    #expect(r.code == 0, "ffmpeg: \(r.err)")
    return [UInt8](FileManager.default.contents(atPath: out) ?? Data())
}

/// Black, the 75 % white bar and full white (the moving square, on the middle row) in one picture's luma or one
/// channel of it: the black bar's centre (right), the white bar's centre (left), the brightest sample of the middle row.
private func levels(_ plane: [UInt8], width w: Int, height h: Int, step: Int = 1, offset: Int = 0) -> (black: Int, bar: Int, white: Int) {
    func at(_ x: Int, _ y: Int) -> Int { Int(plane[(y * w + x) * step + offset]) }
    let white = (0..<w).map { at($0, h / 2) }.max() ?? -1
    return (at(w - w / 16, 40), at(w / 16, 40), white)
}

@Suite(.serialized) struct ColourRangeCLITests {
    /// The webcam fixture streams MJPEG at 1280x720 (full range, as JPEG is) and YUYV at 640x480 (limited range).
    @Test(arguments: [
        ("1280x720", "MJPG", "full", "yuvj420p,pc", [0, 191, 255]), ("640x480", "YUYV", "limited", "yuv420p,tv", [16, 180, 235]),
    ])
    func recordingsAreLabelledWithTheRangeTheirPixelsHave(_ size: String, _ format: String, _ range: String, _ probed: String, _ want: [Int]) throws {
        let out = work + "/range-\(format).h264"
        let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "-s", size, "--frames", "10", "--fast", "-o", out])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out.contains("\(format) \(size)") && r.out.contains("/\(range)"), "the summary says \(format), \(range) range: \(r.out)")
        let p = try sh("ffprobe", ["-v", "error", "-f", "h264", "-show_entries", "stream=pix_fmt,color_range", "-of", "csv=p=0", out])
        #expect(p.out.trimmingCharacters(in: .whitespacesAndNewlines) == probed, "ffprobe: \(p.out) \(p.err)")
        // The decoded samples in the stream's own range (no conversion), last frame.
        let (w, h) = (Int(size.split(separator: "x")[0])!, Int(size.split(separator: "x")[1])!)
        let yuv = try ffmpegRaw(["-f", "h264"], out, probed.hasPrefix("yuvj") ? "yuvj420p" : "yuv420p")
        let frameBytes = w * h * 3 / 2
        try #require(yuv.count >= frameBytes && yuv.count % frameBytes == 0, "\(yuv.count) bytes")
        let last = Array(yuv[(yuv.count - frameBytes)..<(yuv.count - frameBytes + w * h)])
        let l = levels(last, width: w, height: h)
        print(
            "FIGURE fixture:uvc-webcam \(format) \(size) recorded as H.264 (\(probed)), decoded by ffmpeg: black \(l.black), 75% bar \(l.bar), white \(l.white)"
        )
        #expect(
            abs(l.black - want[0]) <= 3 && abs(l.bar - want[1]) <= 3 && abs(l.white - want[2]) <= 3,
            "black \(l.black), 75% bar \(l.bar), white \(l.white): want \(want) (\(range) range)")
    }

    @Test(arguments: ["png", "jpg"])
    func snapshotsOfFullAndLimitedRangeCamerasShowTheSameLevels(_ ext: String) throws {
        // The webcam's MJPEG (full range: black 0, white 255), its YUYV and vivid's YU12 (limited: 16, 235) draw the
        // same bars: a snapshot of any of them must show black 0, the 75 % bar 191 and white 255 in RGB.
        for (device, w, h, format, range) in [
            ("fixture:uvc-webcam", 1280, 720, "MJPG", "full"), ("fixture:uvc-webcam", 640, 480, "YUYV", "limited"),
            ("fixture:vivid", 640, 360, "YU12", "limited"),
        ] {
            let snap = work + "/range-\(format).\(ext)"
            let r = try sh(camcap, ["preview", "-d", device, "-s", "\(w)x\(h)", "--frames", "3", "--fast", "--snapshot", snap])
            #expect(r.code == 0, "\(r.err)")
            #expect(r.out.contains("\(format) \(w)x\(h)") && r.out.contains("/\(range)"), "\(device) gives \(format), \(range) range: \(r.out)")
            let rgb = try ffmpegRaw([], snap, "rgb24")
            try #require(rgb.count == w * h * 3, "\(rgb.count) bytes")
            let tolerance = ext == "png" ? 2 : 3
            for channel in 0..<3 {
                let l = levels(rgb, width: w, height: h, step: 3, offset: channel)
                if channel == 0 {
                    print("FIGURE \(device) \(format) (\(range) range) → \(ext), ffmpeg's RGB: black \(l.black), 75% bar \(l.bar), white \(l.white)")
                }
                #expect(
                    l.black <= tolerance && abs(l.bar - 191) <= tolerance && l.white >= 255 - tolerance,
                    "\(device) \(format) → \(ext), channel \(channel): black \(l.black), 75% bar \(l.bar), white \(l.white)")
            }
        }
    }
}
