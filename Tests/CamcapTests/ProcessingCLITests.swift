// Issue 50 (processing stages whose output goes on): `--process time` draws each frame's capture time, and what
// `record` wrote and what a Chromium viewer of `serve` decoded carry it. Judges: ffmpeg's decode of the recording
// read back glyph by glyph against ffprobe's timestamps, and the viewer's own picture (a canvas of its video).
import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing

/// The overlay read from a grey picture of `width` x `height` given as bytes (a decoded frame, a canvas region).
private func shown(_ luma: [UInt8], width: Int, height: Int) -> Int64? {
    luma.withUnsafeBufferPointer { TimeOverlay.read(luma: $0.baseAddress!, stride: width, width: width, height: height) }
}

@Suite(.serialized, .timeLimit(.minutes(3))) struct ProcessingCLITests {
    /// Every decoded picture shows the capture time of its frame: the shown times advance exactly as the MP4's
    /// timestamps do (which are the capture timestamps), to the millisecond.
    @Test func aRecordingCarriesTheOverlayWithTheCaptureTimestamps() throws {
        let out = work + "/overlay.mp4"
        let rec = try sh(camcap, ["record", "-d", "fixture:vivid", "-s", "640x480", "--frames", "40", "--process", "time", "-o", out, "-q"])
        #expect(rec.code == 0, "\(rec.err)")
        #expect(rec.out.contains("processing:") && rec.out.contains("time overlay: 40 pictures, dropped 0 (backpressure wait)"), "\(rec.out)")
        let pts = try sh("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "frame=pts_time", "-of", "csv=p=0", out]).out
            .split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        // One picture per frame (passthrough): to a constant rate, ffmpeg would repeat a picture where the
        // capture dropped a frame on a loaded machine.
        let grey = try sh(
            "ffmpeg", ["-v", "error", "-y", "-i", out, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "gray", out + ".gray"])
        #expect(grey.code == 0, "\(grey.err)")
        let bytes = [UInt8](FileManager.default.contents(atPath: out + ".gray") ?? Data())
        let size = 640 * 480
        #expect(pts.count == 40 && bytes.count == 40 * size, "\(pts.count) timestamps, \(bytes.count) bytes")
        let times = (0..<min(pts.count, bytes.count / size)).map { i in shown(Array(bytes[(i * size)..<((i + 1) * size)]), width: 640, height: 480) }
        #expect(times.allSatisfy { $0 != nil }, "every decoded picture shows a time: \(times)")
        guard let t0 = times.first ?? nil, let p0 = pts.first else { return }
        for (i, t) in times.enumerated() {
            guard let t else { continue }
            let shownMs = Double(t - t0), stampedMs = (pts[i] - p0) * 1000
            // Both are the capture time: the overlay truncated to the millisecond, the MP4 at 90 kHz.
            #expect(abs(shownMs - stampedMs) <= 1.5, "picture \(i): shows +\(shownMs) ms, stamped +\(stampedMs) ms")
        }
    }

    /// A crop is what the encoder gets: the recording is the region's size.
    @Test func aCropIsRecordedAtTheRegionsSize() throws {
        let out = work + "/crop.mp4"
        let rec = try sh(
            camcap, ["record", "-d", "fixture:vivid", "-s", "640x480", "--frames", "20", "--process", "crop=320x240+160+120", "-o", out, "-q"])
        #expect(rec.code == 0, "\(rec.err)")
        let p = try sh("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", out])
        #expect(p.out.trimmingCharacters(in: .whitespacesAndNewlines) == "320,240,20", "\(p.out) \(p.err)")
        // A bad spec is a usage error naming it.
        let bad = try sh(camcap, ["record", "-d", "fixture:vivid", "--frames", "5", "--process", "crop=320x240", "-o", work + "/bad.mp4"])
        #expect(bad.code != 0 && bad.err.contains("processing \"crop=320x240\": expected time or crop=WxH+X+Y[:WxH]"), "\(bad.err)")
        #expect(!FileManager.default.fileExists(atPath: work + "/bad.mp4"))
        // A region outside the camera's picture fails at the first picture, naming both.
        let outside = try sh(
            camcap,
            ["record", "-d", "fixture:vivid", "-s", "640x480", "--frames", "5", "--process", "crop=320x240+400+0", "-o", work + "/outside.mp4"])
        #expect(outside.code == 1 && outside.err.contains("crop region 320x240+400+0 is outside the 640x480 picture"), "\(outside.err)")
    }

    /// What a Chromium viewer of `serve --process time` shows is the overlay, with a capture time on this machine's
    /// monotonic clock between the server's start and the page's report.
    @Test(.enabled(if: chromiumAvailable)) func aChromiumViewerSeesTheOverlay() throws {
        let before = monotonicMs()
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "640x480", "--process", "time", "--listen", "127.0.0.1:0"], name: "serve-overlay")
        defer { _ = server.stop() }
        let box = TimeOverlay.box(forHeight: 480)
        let (w, h) = (box.x + box.width + 8, box.y + box.height + 8)
        let b = try chromium(server.pageURL, frames: 30, extra: ["--luma-region", "\(w),\(h)"])
        let after = monotonicMs()
        #expect(b["ok"] as? Bool == true, "\(b)")
        let region = b["lumaRegion"] as? [String: Any]
        let luma = ((region?["luma"] as? [NSNumber]) ?? []).map { UInt8(clamping: $0.intValue) }
        #expect(int(region, "width") == 640 && int(region, "height") == 480 && luma.count == w * h, "\(String(describing: region?["width"]))")
        guard luma.count == w * h else { return }
        // The region pasted into a 640x480 picture (the overlay's layout depends on the height).
        var picture = [UInt8](repeating: 0, count: 640 * 480)
        for r in 0..<h { for x in 0..<w { picture[r * 640 + x] = luma[r * w + x] } }
        let t = shown(picture, width: 640, height: 480)
        #expect(t != nil, "the viewer's picture shows the overlay")
        if let t { #expect(t >= before && t <= after, "shown capture time \(t) ms, the server ran from \(before) ms to \(after) ms") }
    }
}

/// CLOCK_MONOTONIC in milliseconds: the clock of the capture timestamps (the server runs on this machine).
private func monotonicMs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// `camcap trace record` then `-d fixture:trace:FILE` (#49): the replayed pictures are the camera's, byte for byte
/// (the Y4M of the replay equals the Y4M of the camera itself), and a trace that is not one is named.
@Suite(.serialized, .timeLimit(.minutes(2))) struct TraceCLITests {
    @Test func aRecordedTraceReplaysTheSamePictures() throws {
        let trace = work + "/vivid.camtrace"
        // As fast as consumed, all three: in real time a loaded machine drops frames (the recorder's, the previews'),
        // and a frame missing on either side is a different file, not a different picture.
        let rec = try sh(camcap, ["trace", "record", "-d", "fixture:vivid", "-s", "320x240", "--frames", "20", "--fast", "-o", trace, "-q"])
        let recorded = rec.out.firstMatch(of: /\((\d+) frames, 0 losses; replay: -d fixture:trace:/).flatMap { Int($0.1) } ?? 0
        #expect(rec.code == 0 && recorded >= 20, "\(rec.out) \(rec.err)")
        let direct = try sh(
            camcap, ["preview", "-d", "fixture:vivid", "-s", "320x240", "--frames", "15", "--fast", "--y4m", work + "/direct.y4m", "-q"])
        let replay = try sh(
            camcap, ["preview", "-d", "fixture:trace:" + trace, "-s", "320x240", "--frames", "15", "--fast", "--y4m", work + "/replay.y4m", "-q"])
        #expect(direct.code == 0 && replay.code == 0, "\(direct.err) \(replay.err)")
        let (a, b) = (FileManager.default.contents(atPath: work + "/direct.y4m"), FileManager.default.contents(atPath: work + "/replay.y4m"))
        #expect(a != nil && a == b, "the replay's 15 pictures are the camera's (\(a?.count ?? 0) and \(b?.count ?? 0) bytes)")
        // Another mode than the one recorded is refused, naming what the trace holds.
        let other = try sh(camcap, ["preview", "-d", "fixture:trace:" + trace, "-s", "640x480", "--frames", "5", "-q"])
        #expect(other.code == 1 && other.err.contains("replays") && other.err.contains("what it recorded"), "\(other.err)")
        let bogus = work + "/bogus.camtrace"
        _ = FileManager.default.createFile(atPath: bogus, contents: Data("hello".utf8))
        let bad = try sh(camcap, ["preview", "-d", "fixture:trace:" + bogus, "--frames", "5", "-q"])
        #expect(bad.code != 0 && bad.err.contains("bogus.camtrace") && bad.err.contains("not a camera trace"), "\(bad.err)")
    }
}
