import Foundation
import Testing
import TestSupport

/// `camcap controls` and `--control`/`--power-line` on the capture commands, on fixture cameras.
@Suite(.serialized) struct ControlsCLITests {
    @Test func listsVividsControlsAsV4L2CtlDoes() throws {
        let r = try sh(camcap, ["controls", "-d", "fixture:vivid"])
        #expect(r.code == 0, "\(r.err)")
        // The built-in fixture holds vivid's real `v4l2-ctl --list-ctrls-menus`; the listing reproduces it (the
        // v4l2-ctl of that dump printed the then-new dynamic-array flag as hex).
        let text = try String(contentsOfFile: fixturesRoot + "/cameras/vivid.txt", encoding: .utf8)
        let section = try #require(text.components(separatedBy: "===CTRLS\n").last?.components(separatedBy: "===END").first)
        #expect(r.out == section.replacingOccurrences(of: "has-payload, 0x00000800", with: "has-payload, dynamic-array"))
        #expect(r.out.contains("           power_line_frequency") == false, "vivid has no power-line control")
    }

    @Test func jsonIsValidAndComplete() throws {
        let r = try sh(camcap, ["controls", "-d", "fixture:uvc-webcam", "--json"])
        #expect(r.code == 0, "\(r.err)")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]])
        #expect(list.count == 17)
        let plf = try #require(list.first { $0["name"] as? String == "power_line_frequency" })
        #expect(plf["id"] as? String == "0x00980918" && plf["type"] as? String == "menu" && plf["value"] as? Int == 2)
        #expect((plf["menu"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["Disabled", "50 Hz", "60 Hz"])
        let wb = try #require(list.first { $0["name"] as? String == "white_balance_temperature" })
        #expect(wb["flags"] as? [String] == ["inactive"])
    }

    @Test func setPrintsWhatWasAppliedAndGetReads() throws {
        let r = try sh(
            camcap,
            [
                "controls", "-d", "fixture:uvc-webcam", "--set", "power_line_frequency=1", "--set", "brightness=140",
                "--set", "pan_absolute=5000", "--set", "auto_exposure=Manual Mode", "--set", "exposure_absolute=300",
                "--get", "exposure_time_absolute", "--get", "0x00980900",
            ])
        #expect(r.code == 0, "\(r.err)")
        #expect(
            r.out == """
                power_line_frequency: 1 (50 Hz)
                brightness: 140
                pan_absolute: 3600
                auto_exposure: 1 (Manual Mode)
                exposure_time_absolute: 300
                exposure_time_absolute: 300
                brightness: 140

                """)
    }

    @Test(arguments: [
        (["--set", "brightness=300"], "300 is out of range for control brightness of fixture:vivid: expected 0...255"),
        (["--set", "gain=5"], "control gain of fixture:vivid is inactive"),
        (["--set", "read_only_integer_32_bits=1"], "control read_only_integer_32_bits of fixture:vivid is read-only"),
        (["--set", "zoom=2"], "fixture:vivid has no control \"zoom\""),
        (["--set", "menu=Menu Item 2"], "\"Menu Item 2\" is not a valid value for control menu of fixture:vivid"),
        (["--get", "nope"], "fixture:vivid has no control \"nope\""),
    ])
    func refusedSetsAreErrorsNamingControlAndValue(_ args: [String], _ message: String) throws {
        let r = try sh(camcap, ["controls", "-d", "fixture:vivid"] + args)
        #expect(r.code == 1 && r.err.contains(message) && r.out.isEmpty, "\(r.code) \(r.err)")
    }

    @Test func badArgumentsAreUsageErrors() throws {
        var r = try sh(camcap, ["controls", "-d", "fixture:vivid", "--set", "brightness"])
        #expect(r.code == 64 && r.err.contains("--set expects NAME=VALUE"), "\(r.err)")
        r = try sh(camcap, ["record", "-d", "fixture:vivid", "--frames", "3", "--power-line", "70"])
        #expect(r.code == 64 && r.err.contains("--power-line must be 50, 60, auto or off, got \"70\""), "\(r.err)")
        r = try sh(camcap, ["preview", "-d", "fixture:vivid", "--frames", "3", "--control", "brightness"])
        #expect(r.code == 64 && r.err.contains("--control expects NAME=VALUE"), "\(r.err)")
    }

    /// Y4M frames' luma planes.
    func y4mLuma(_ path: String) throws -> [[UInt8]] {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let header = try #require(data.firstIndex(of: 0x0a))
        let words = String(decoding: data[..<header], as: UTF8.self).split(separator: " ")
        let w = try #require(words.first { $0.hasPrefix("W") }.flatMap { Int($0.dropFirst()) })
        let h = try #require(words.first { $0.hasPrefix("H") }.flatMap { Int($0.dropFirst()) })
        var frames: [[UInt8]] = []
        var i = header + 1
        while i < data.count, let nl = data[i...].firstIndex(of: 0x0a) {
            let start = nl + 1
            guard start + w * h * 3 / 2 <= data.count else { break }
            frames.append(Array(data[start..<start + w * h]))
            i = start + w * h * 3 / 2
        }
        return frames
    }

    @Test func startControlsShowFromTheFirstFrame() throws {
        let out = work + "/white.y4m"
        let r = try sh(
            camcap,
            [
                "preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "3", "--fast", "-q", "--y4m", out,
                "--control", "test_pattern=100% White", "--power-line", "50",
            ])
        #expect(r.code == 0, "\(r.err)")
        let frames = try y4mLuma(out)
        #expect(frames.count == 3)
        #expect(frames.allSatisfy { $0.allSatisfy { abs(Int($0) - 235) <= 1 } }, "every pixel white from the first frame")
        let bad = try sh(
            camcap, ["record", "-d", "fixture:vivid", "--frames", "3", "--fast", "-o", work + "/never.h264", "--control", "brightness=999"])
        #expect(bad.code == 1 && bad.err.contains("999 is out of range for control brightness"), "\(bad.err)")
        #expect(!FileManager.default.fileExists(atPath: work + "/never.h264"), "nothing written when the start fails")
    }
}
