// Issue 35: `--pixel-format` and fractional `--fps-limit` on the commands; nonsense refused by name; the CLI's
// fallback camera said on its start line.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct FormatRequestCLITests {
    /// `select` and `record` take the pixel format asked for (YUYV over the MJPEG the rules prefer at 720p).
    @Test func aPixelFormatCanBeAskedFor() throws {
        let s = try sh(camcap, ["select", "-d", "fixture:uvc-webcam", "-s", "1280x720", "--pixel-format", "YUYV", "--json"])
        #expect(s.out == "{\"pixelFormat\": \"YUYV\", \"width\": 1280, \"height\": 720, \"fps\": 10}\n", "\(s.out)\(s.err)")
        let both = try sh(camcap, ["select", "-d", "fixture:uvc-webcam", "-s", "640x480", "--pixel-format", "MJPG,YUYV", "--json"])
        #expect(both.out.hasPrefix("{\"pixelFormat\": \"MJPG\""), "\(both.out)")
        let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "--pixel-format", "YUYV", "--fast", "--frames", "10", "-o", "yuyv.mp4"])
        #expect(r.code == 0 && r.out.contains("format:       YUYV 1280x720 @ 10 fps"), "\(r.out)\(r.err)")
        #expect(try packetCount(work + "/yuyv.mp4") == 10)
    }

    /// A fractional limit: vivid lists 12.5 fps at 720p among higher rates; 12.5 picks it, 29.97 and 30 the
    /// rate within each, and the recording's times step by the rate negotiated.
    @Test func fractionalFrameRateLimits() throws {
        let a = try sh(camcap, ["select", "-d", "fixture:vivid", "-s", "640x360", "--fps-limit", "12.5", "--json"])
        #expect(a.code == 0 && a.out.contains("\"fps\": 12.5"), "\(a.out)\(a.err)")
        let b = try sh(camcap, ["select", "-d", "fixture:vivid", "-s", "640x360", "--fps-limit", "30000/1001", "--json"])
        let c = try sh(camcap, ["select", "-d", "fixture:vivid", "-s", "640x360", "--fps-limit", "29.97", "--json"])
        #expect(b.code == 0 && b.out == c.out && !b.out.contains("\"fps\": 30}"), "a 29.97 limit is below 30: \(b.out) \(c.out)")
        let r = try sh(
            camcap, ["record", "-d", "fixture:vivid", "-s", "640x360", "--fps-limit", "12.5", "--fast", "--frames", "5", "-o", "v125.mp4"])
        #expect(r.code == 0 && r.out.contains("@ 12.5 fps"), "\(r.out)\(r.err)")
    }

    /// A multi-planar fixture (an SoC camera offering NV12M and YUV420M, planes in separate buffers on a real one):
    /// negotiation picks YM12 as it picks YU12, NM12 when asked, and both record and decode without a VM.
    @Test func aMultiPlanarFixtureNegotiatesAndRecords() throws {
        let a = try sh(camcap, ["select", "-d", "fixture:soc-mplane", "-s", "1280x720", "--json"])
        #expect(a.out == "{\"pixelFormat\": \"YM12\", \"width\": 1280, \"height\": 720, \"fps\": 30}\n", "\(a.out)\(a.err)")
        for format in ["NM12", "YM12"] {
            let r = try sh(
                camcap,
                [
                    "record", "-d", "fixture:soc-mplane", "-s", "1280x720", "--pixel-format", format, "--fast", "--frames", "30", "-o",
                    "mplane-\(format).mp4",
                ])
            #expect(r.code == 0 && r.out.contains("format:       \(format) 1280x720 @ 30 fps"), "\(r.out)\(r.err)")
            let p = try sh(
                "ffprobe",
                [
                    "-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0",
                    work + "/mplane-\(format).mp4",
                ])
            #expect(p.out.trimmingCharacters(in: .whitespacesAndNewlines) == "1280,720,30", "\(format): \(p.out)\(p.err)")
        }
    }

    /// Nonsense gets an error naming the option and the value, before any camera starts.
    @Test func nonsenseRequestsAreNamed() throws {
        for (args, message) in [
            (["--fps-limit", "0"], "--fps-limit must be above 0 and at most 1000, got 0"),
            (["--fps-limit=-12.5"], "--fps-limit must be above 0 and at most 1000, got -12.5"),
            (["--fps-limit", "fast"], "--fps-limit expects a rate such as 30, 12.5, 29.97 or 30000/1001, got \"fast\""),
            (["--fps-limit", "1/0"], "got \"1/0\""),
            (["-s", "0x0"], "0x0"),
            (["--pixel-format", "YUV"], "\"YUV\" is not a FourCC"),
            (["--pixel-format", "BA81"], "BA81 (8-bit Bayer BGBG/GRGR) cannot be converted to I420"),
            (["--pixel-format", "H264"], "offers none of the pixel formats asked for (H264); it offers: MJPG, YUYV"),
            (["--pixel-format", "NV12"], "offers none of the pixel formats asked for (NV12); it offers: MJPG, YUYV"),
        ] {
            let r = try sh(camcap, ["record", "-d", "fixture:uvc-webcam", "--frames", "3", "-o", "nonsense.mp4"] + args)
            #expect(r.code != 0 && r.err.contains(message), "\(args): \(r.err)")
            #expect(!FileManager.default.fileExists(atPath: work + "/nonsense.mp4"))
        }
    }

    /// With no camera named and none present, camcap falls back to the built-in fixture webcam and says so; the
    /// library has no such fallback (VideoCaptureTests and PipelineTests check it).
    @Test(.enabled(if: !FileManager.default.fileExists(atPath: "/dev/video0"), "a machine with a camera records from it"))
    func theFallbackCameraIsAnnounced() throws {
        let r = try sh(camcap, ["record", "--frames", "3", "-o", "fallback.mp4"])
        #expect(
            r.code == 0 && r.err.contains("recording fixture:uvc-webcam (fixture:uvc-webcam) (no camera found: the built-in fixture webcam)"),
            "\(r.err)")
    }
}

private func packetCount(_ path: String) throws -> Int {
    let r = try sh("ffprobe", ["-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", path])
    return Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}
