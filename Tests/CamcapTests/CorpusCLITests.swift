// Issue 49: `camcap select --corpus DIR` negotiates on every camera of a folder and prints one row each.
import Foundation
import Testing
import TestSupport

@Suite struct CorpusCLITests {
    let corpus = fixturesRoot + "/corpus"

    @Test func selectCorpusPrintsOneRowPerCamera() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus).filter { $0.hasSuffix(".txt") || $0.hasSuffix(".json") }
        let r = try sh(camcap, ["select", "--corpus", corpus, "--size", "1280x720", "--fps-limit", "30"])
        #expect(r.code == 0, "\(r.err)")
        let rows = r.out.split(separator: "\n")
        #expect(rows.count == files.count + 1, "a header and one row per camera: \(rows.count) rows for \(files.count) files")
        #expect(rows.first?.hasPrefix("CAMERA") == true)
        // The MS2109 HDMI dongle gives 720p30 only in MJPEG; the Jetson IMX219 has nothing convertible.
        #expect(
            rows.contains { $0.hasPrefix("ms2109-usb-hdmi-dongle ") && $0.contains("MJPG 1280x720@30") && $0.hasSuffix("decode JPEG") }, "\(r.out)")
        #expect(rows.contains { $0.hasPrefix("jetson-imx219-rg10 ") && $0.contains("no convertible format (RG10)") }, "\(r.out)")
        let json = try sh(camcap, ["select", "--corpus", corpus, "--size", "640x480", "--json"])
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [[String: Any]])
        #expect(parsed.count == files.count)
        #expect(parsed.contains { $0["camera"] as? String == "laptop-ir-grey-640x360" && $0["pixelFormat"] as? String == "GREY" })
    }

    /// The policies side by side: one column each, the cells that differ from default marked, the count per policy
    /// at the end; the JSON says the same per camera and policy.
    @Test func selectCorpusPutsThePoliciesSideBySide() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus).filter { $0.hasSuffix(".txt") || $0.hasSuffix(".json") }
        let r = try sh(camcap, ["select", "--corpus", corpus, "-s", "1280x720", "--policy", "all"])
        #expect(r.code == 0, "\(r.err)")
        let rows = r.out.split(separator: "\n").map(String.init)
        #expect(rows.count == files.count + 2, "a header, one row per camera and the counts: \(rows.count) rows for \(files.count) files")
        #expect(
            rows.first?.split(separator: " ").map(String.init) == ["CAMERA", "default", "libwebrtc", "chromium", "gstreamer", "ffmpeg", "ardcapture"])
        // The C920: YUYV 720p is 10 fps, MJPG 30; libwebrtc and Chromium put MJPEG first above VGA, GStreamer's raw caps,
        // ffmpeg's table and ARDCaptureController (the closest size, the last equal one) take YUYV.
        let c920 = try #require(rows.first { $0.hasPrefix("logitech-c920-no-h264 ") }, "\(r.out)")
        let cells = c920.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        #expect(cells.count == 7, "\(c920)")
        #expect(
            Array(cells.dropFirst()) == Array(repeating: "MJPG 1280x720@30", count: 3) + Array(repeating: "YUYV 1280x720@10 *", count: 3), "\(c920)")
        let last = try #require(rows.last)
        #expect(last.hasPrefix("(* differs from default) ") && last.contains(" of \(files.count) cameras differ: libwebrtc "), "\(last)")

        let json = try sh(camcap, ["select", "--corpus", corpus, "-s", "1280x720", "--policy", "gstreamer,ffmpeg", "--json"])
        #expect(json.code == 0, "\(json.err)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let cameras = try #require(parsed["cameras"] as? [[String: Any]])
        #expect(cameras.count == files.count)
        let entry = try #require(cameras.first { $0["camera"] as? String == "logitech-c920-no-h264" })
        #expect(entry["differs"] as? [String] == ["gstreamer", "ffmpeg"], "\(entry)")
        let policies = try #require(entry["policies"] as? [[String: Any]])
        #expect(policies.map { $0["policy"] as? String } == ["gstreamer", "ffmpeg"])
        let selection = try #require(policies.first?["selection"] as? [String: Any])
        #expect(
            selection["pixelFormat"] as? String == "YUYV" && selection["width"] as? Int == 1280 && selection["fps"] as? Double == 10, "\(selection)")
        let differing = try #require(parsed["differing"] as? [String: Int])
        #expect(Set(differing.keys) == ["gstreamer", "ffmpeg"] && differing.values.allSatisfy { $0 > 0 && $0 <= files.count }, "\(differing)")
    }

    @Test func selectCorpusTakesConstraintsAndRefusesAmbiguousRequests() throws {
        let c = try sh(camcap, ["select", "--corpus", corpus, "--constraints", "{\"width\": {\"exact\": 3840}, \"height\": {\"exact\": 2160}}"])
        #expect(c.code == 0, "\(c.err)")
        #expect(c.out.contains("overconstrained"), "a camera without 4K is a row saying so: \(c.out)")
        let both = try sh(camcap, ["select", "--corpus", corpus, "-d", "fixture:vivid", "-s", "640x480"])
        #expect(both.code != 0 && both.err.contains("--device or --corpus"), "\(both.err)")
        let explain = try sh(camcap, ["select", "--corpus", corpus, "-s", "640x480", "--explain"])
        #expect(explain.code != 0 && explain.err.contains("--explain"), "\(explain.err)")
        let missing = try sh(camcap, ["select", "--corpus", corpus + "/nope", "-s", "640x480"])
        #expect(missing.code == 1 && missing.err.contains("/nope"), "\(missing.err)")
    }
}
