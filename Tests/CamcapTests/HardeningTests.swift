// Issue 11 from the command line: hostile arguments and files give a clear error (exit 1 or 64, never a
// signal), nothing is destroyed when a start fails, and a second writer of the same file is refused.
import Foundation
import Testing
import TestSupport

private func write(_ name: String, _ text: String) -> String {
    let p = work + "/" + name
    try? FileManager.default.removeItem(atPath: p)
    _ = FileManager.default.createFile(atPath: p, contents: Data(text.utf8))
    return p
}

@Suite(.serialized) struct HardeningTests {
    @Test func hugeArgumentsAreRangeErrorsNotTraps() throws {
        let cases: [([String], String)] = [
            (
                ["select", "-d", "fixture:vivid", "-s", "9223372036854775807x9223372036854775807"],
                "--size: size 9223372036854775807x9223372036854775807 is too large: width and height are at most 16384"
            ),
            (["select", "-d", "fixture:vivid", "-s", "16384x16384"], "at most 67108864 pixels"),
            (
                ["record", "-d", "fixture:vivid", "--max-bitrate", "9999999999999999", "--frames", "5"],
                "--max-bitrate must be 1500...200000 kbps (at least --bitrate), got 9999999999999999"
            ),
            (
                ["record", "-d", "fixture:vivid", "--keyint-seconds", "inf", "--frames", "5"],
                "--keyint-seconds must be above 0 and at most 400 seconds, got inf"
            ),
            (
                ["record", "-d", "fixture:vivid", "--keyint-seconds", "1e300", "--frames", "5"],
                "--keyint-seconds must be above 0 and at most 400 seconds, got 1e+300"
            ),
            (["record", "-d", "fixture:vivid", "--keyint", "9223372036854775807", "--frames", "5"], "--keyint must be 1...100000"),
            (
                ["record", "-d", "fixture:vivid", "-s", "1280x720", "--max-nal-size", "200", "--frames", "5"],
                "--max-nal-size: max NAL size 200 is out of range: 420...65535 bytes"
            ),
            (
                ["record", "-d", "fixture:vivid", "--max-nal-size", "100", "--frames", "5"],
                "--max-nal-size: max NAL size 100 is out of range: 420...65535 bytes"
            ),
            (
                ["record", "-d", "fixture:vivid", "--max-nal-size", "9223372036854775807", "--frames", "5"],
                "max NAL size 9223372036854775807 is out of range"
            ),
            (["record", "-d", "fixture:vivid", "--duration", "inf"], "--duration"),
            (["record", "-d", "fixture:vivid", "--threads", "9223372036854775807", "--frames", "5"], "--threads must be 1...4"),
            (["preview", "-d", "fixture:vivid", "--scale", "100000x2", "--frames", "5"], "--scale: size 100000x2 is too large"),
        ]
        for (args, message) in cases {
            let r = try sh(camcap, args)
            #expect(r.code == 64 || r.code == 1, "\(args): exit \(r.code) \(r.err)")
            #expect(r.err.contains(message), "\(args): \(r.err)")
            #expect(!r.err.contains("recording fixture") && !r.err.contains("preview fixture"), "the camera must not start: \(args)")
        }
    }

    @Test func crashFixturesAreErrorsWithFileAndLine() throws {
        // Every crash input of the issue (kept in Fixtures/v4l2 and Fixtures/json) through `select` and `formats`.
        for folder in ["v4l2", "json"] {
            let dir = fixturesRoot + "/" + folder
            for f in try FileManager.default.contentsOfDirectory(atPath: dir).sorted() where f.hasPrefix("crash-") {
                let path = dir + "/" + f
                for cmd in [["select", "-d", path, "-s", "640x480"], ["formats", "-d", path]] {
                    let r = try sh(camcap, cmd)
                    #expect(r.code == 1, "\(cmd): exit \(r.code)")
                    #expect(r.err.hasPrefix("camcap: error: \(path):"), "\(cmd): \(r.err.prefix(300))")
                    #expect(r.err.count < 400, "short message: \(r.err.prefix(300))")
                }
            }
        }
    }

    @Test func specialFilesAsFixturesFailAtOnce() throws {
        let fifo = work + "/cam.fifo"
        try? FileManager.default.removeItem(atPath: fifo)
        #expect(mkfifo(fifo, 0o600) == 0)
        let f = try sh(camcap, ["formats", "-d", fifo])
        #expect(f.code == 1 && f.err.contains("\(fifo):0: a FIFO (named pipe), not a fixture file"), "\(f.err)")
        let link = work + "/zero.txt"
        try? FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/dev/zero")
        for p in [link, "//dev/zero"] {
            let z = try sh(camcap, ["select", "-d", p, "-s", "640x480"])
            #expect(z.code == 1 && z.err.contains("\(p):0: a character device, not a fixture file"), "\(z.err)")
        }
        let big = work + "/newlines.txt"
        _ = FileManager.default.createFile(atPath: big, contents: Data(repeating: 0x0a, count: 10_000_000))
        let b = try sh(camcap, ["formats", "-d", big])
        #expect(b.code == 1 && b.err.contains("fixture files are limited to 4194304 bytes (4 MiB)"), "\(b.err)")
    }

    @Test func formatsJSONIsValidWithControlCharacters() throws {
        let path = write(
            "evil.json",
            """
            {"name": "cam\\u0001\\u001b[31m", "formats": [{"pixelFormat": "YUYV", "description": "evil\\n\\u0007\\"q\\\\ \\u2028",
              "sizes": [{"width": 640, "height": 480, "fps": [30, "30000/1001"]}]}]}
            """)
        let r = try sh(camcap, ["formats", "-d", path, "--json"])
        #expect(r.code == 0, "\(r.err)")
        let parsed = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [[String: Any]]
        #expect(parsed?.first?["description"] as? String == "evil\n\u{07}\"q\\ \u{2028}")
        #expect(parsed?.first?["fps"] as? [Double] == [30, 29.97])
        #expect(!r.out.contains("\u{07}") && !r.out.contains("\u{1B}"))
        let crlf = write("crlf.txt", "\t[0]: 'YUYV' (YUYV 4:2:2)\r\n\t\tSize: Discrete 640x480\r\n\t\t\tInterval: Discrete 0.033s (30.000 fps)\r\n")
        let c = try sh(camcap, ["select", "-d", crlf, "-s", "640x480", "--json"])
        #expect(c.out == "{\"pixelFormat\": \"YUYV\", \"width\": 640, \"height\": 480, \"fps\": 30}\n", "\(c.err)")
        let bom = write(
            "bom.json",
            "\u{FEFF}{\"name\": \"b\", \"formats\": [{\"pixelFormat\": \"NV12\", \"sizes\": [{\"width\": 320, \"height\": 240, \"fps\": [15]}]}]}")
        let b = try sh(camcap, ["select", "-d", bom, "-s", "640x480", "--json"])
        #expect(b.out == "{\"pixelFormat\": \"NV12\", \"width\": 320, \"height\": 240, \"fps\": 15}\n", "\(b.err)")
    }

    @Test func aFailedStartDestroysNothing() throws {
        let keep = write("keep.h264", "precious recording")
        for args in [
            ["record", "-d", "fixture:nope", "-o", keep, "--frames", "5"],
            ["record", "-d", "fixture:vivid", "-o", keep, "--bitrate", "0", "--frames", "5"],
            ["record", "-d", "fixture:vivid", "-o", keep, "--max-nal-size", "70000", "--frames", "5"],
            ["record", "-d", "fixture:vivid", "-o", keep, "--keyint-seconds", "inf"],
        ] {
            let r = try sh(camcap, args)
            #expect(r.code != 0, "\(args)")
            #expect(FileManager.default.contents(atPath: keep) == Data("precious recording".utf8), "\(args) destroyed the file: \(r.err)")
        }
        let fresh = work + "/fresh.h264"
        try? FileManager.default.removeItem(atPath: fresh)
        let r = try sh(camcap, ["record", "-d", "fixture:nope", "-o", fresh, "--frames", "5"])
        #expect(r.code == 1 && r.err.contains("unknown fixture camera"))
        #expect(!FileManager.default.fileExists(atPath: fresh), "no empty file left behind")
    }

    @Test func aSecondRecordingOfTheSameFileIsRefused() throws {
        let out = work + "/same.h264"
        try? FileManager.default.removeItem(atPath: out)
        // The first recording runs until interrupted; the second starts once the first has printed its start line.
        let first = Process()
        first.executableURL = URL(fileURLWithPath: camcap)
        first.arguments = ["record", "-d", "fixture:vivid", "-s", "320x180", "--duration", "60", "-o", out]
        first.currentDirectoryURL = URL(fileURLWithPath: work)
        let err = Pipe(), stdout = Pipe()
        first.standardError = err
        first.standardOutput = stdout
        try first.run()
        var seen = ""
        while !seen.contains("recording fixture:vivid") {
            let d = err.fileHandleForReading.availableData
            if d.isEmpty { break }
            seen += String(decoding: d, as: UTF8.self)
        }
        #expect(seen.contains("recording fixture:vivid"), "\(seen)")
        let second = try sh(camcap, ["record", "-d", "fixture:vivid", "-s", "320x180", "--frames", "10", "-o", out])
        #expect(second.code == 1)
        #expect(
            second.err.contains("\(out) is being written by another writer (it holds the file's lock): refusing to write it at the same time"),
            "\(second.err)")
        #expect(!second.err.contains("recording fixture"), "the second camera must not start")
        first.interrupt()
        let summary = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        _ = err.fileHandleForReading.readDataToEndOfFile()
        first.waitUntilExit()
        #expect(first.terminationStatus == 0)
        let encoded = try #require(summaryValue(summary, "encoded"), "\(summary)")
        let (frames, size) = try probeFrames(out)
        #expect(frames == encoded && size == "320x180", "the first recording is intact")
    }

    @Test func previewWritesThroughLinksAndReportsFullDisks() throws {
        let full = try sh(camcap, ["preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "10", "--fast", "--y4m", "/dev/full", "-q"])
        #expect(full.code == 1)
        #expect(full.err.contains("/dev/full") && full.err.contains("No space left on device"), "\(full.err)")
        let target = write("target.y4m", "old")
        let link = work + "/link.y4m"
        try? FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let r = try sh(camcap, ["preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "6", "--fast", "--y4m", link, "-q"])
        #expect(r.code == 0, "\(r.err)")
        #expect((try FileManager.default.attributesOfItem(atPath: link))[.type] as? FileAttributeType == .typeSymbolicLink, "the link was replaced")
        let p = try sh("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", target])
        #expect(p.out.trimmingCharacters(in: .whitespacesAndNewlines) == "320,180,6")
    }

    /// A mode the encoder cannot take is refused after negotiation, before the camera starts or any output is
    /// touched (an existing file keeps its bytes).
    @Test func aCameraModeTheEncoderCannotTakeFailsBeforeTheStart() throws {
        let fixture = work + "/tiny.txt", out = work + "/tiny-keep.h264"
        try
            "ioctl: VIDIOC_ENUM_FMT\n\tType: Video Capture\n\n\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 8x8\n\t\t\tInterval: Discrete 0.033s (30.000 fps)\n"
            .write(toFile: fixture, atomically: true, encoding: .utf8)
        try "keep".write(toFile: out, atomically: true, encoding: .utf8)
        for command in [["record", "-o", out], ["stream", "--to", "127.0.0.1:9", "--output", out]] {
            let r = try sh(camcap, [command[0], "-d", fixture] + command.dropFirst())
            #expect(
                r.code == 1 && r.err.contains("YUYV 8x8 @ 30 fps cannot be encoded") && r.err.contains("width 16...4096"), "\(command[0]): \(r.err)")
            #expect(try String(contentsOfFile: out, encoding: .utf8) == "keep")
        }
    }
}
