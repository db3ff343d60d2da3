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
