// Issue 53: a segment ring survives restarts (no file of an earlier run is reused, overwritten or deleted) and
// midnight (the dated directories of `%Y%m%d/%H/` are made as the names roll over, no frame lost).
import Foundation
import Testing
import TestSupport

/// Frames ffprobe decodes in `path` (-1 when it cannot read it).
private func decodedFrames(_ path: String) throws -> Int {
    let r = try sh(
        "ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
    return r.code == 0 ? Int(r.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 : -1
}

/// Every regular file below `dir` (relative paths) with its bytes.
private func contents(below dir: String) -> [String: Data] {
    var files: [String: Data] = [:]
    let e = FileManager.default.enumerator(atPath: dir)
    while let name = e?.nextObject() as? String {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir + "/" + name, isDirectory: &isDir), !isDir.boolValue {
            files[name] = FileManager.default.contents(atPath: dir + "/" + name)
        }
    }
    return files
}

/// The summary's `segment:` lines: path and frame range.
private func listedSegments(_ out: String) -> [(path: String, first: Int, last: Int)] {
    out.split(separator: "\n").compactMap { line in
        guard line.hasPrefix("segment:"), let colon = line.range(of: ": frames ") else { return nil }
        let path = line.dropFirst("segment:".count)[..<colon.lowerBound].trimmingCharacters(in: .whitespaces)
        let range = line[colon.upperBound...].prefix { $0 != "," }.components(separatedBy: "...")
        guard range.count == 2, let a = Int(range[0]), let b = Int(range[1]) else { return nil }
        return (path, a, b)
    }
}

@Suite(.serialized) struct SegmentRestartTests {
    /// The same pattern recorded 5 times (numbered and strftime names, with and without `--keep`): every earlier
    /// file is still there byte for byte, every new file decodes (ffprobe) and sorts after the earlier ones. Then
    /// `--keep-scope pattern` trims the ring on disk, earlier runs' files first.
    @Test(arguments: [
        ("numbered", "ring.mp4", false), ("numbered-keep", "ring.mp4", true), ("dated", "cam-%Y%m%d-%H%M.mp4", false),
        ("dated-keep", "cam-%Y%m%d-%H%M.mp4", true),
    ])
    func aRestartedRingKeepsEveryEarlierFile(name: String, pattern: String, keep: Bool) throws {
        let dir = work + "/restart-" + name
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var before: [String: Data] = [:]
        for run in 1...5 {
            let r = try sh(
                camcap,
                [
                    "record", "-d", "fixture:uvc-webcam", "-s", "160x120", "--fast", "--duration", "1.4", "--segment-seconds", "0.5",
                    "-o", dir + "/" + pattern, "-q",
                ] + (keep ? ["--keep", "2"] : []))
            #expect(r.code == 0, "run \(run): \(r.err)")
            let after = contents(below: dir)
            for (file, bytes) in before { #expect(after[file] == bytes, "run \(run) changed or deleted \(file) of an earlier run") }
            let new = after.keys.filter { before[$0] == nil }.sorted()
            #expect(new.count == (keep ? 2 : 3), "run \(run) left \(new)")
            for file in new {
                #expect(try decodedFrames(dir + "/" + file) > 0, "run \(run): \(file) does not decode")
                #expect(before.keys.allSatisfy { $0 < file }, "run \(run): \(file) sorts before an earlier run's file")
            }
            before = after
        }
        guard keep else { return }
        let r = try sh(
            camcap,
            [
                "record", "-d", "fixture:uvc-webcam", "-s", "160x120", "--fast", "--duration", "1.4", "--segment-seconds", "0.5",
                "-o", dir + "/" + pattern, "-q", "--keep", "3", "--keep-scope", "pattern",
            ])
        #expect(r.code == 0 && r.out.contains("(and 10 of earlier runs)"), "\(r.out) \(r.err)")
        let left = contents(below: dir).keys.sorted()
        #expect(left.count == 3 && left.first.map { before[$0] == nil } == true, "\(left)")
    }

    /// A camera lost before its first frame: the run fails saying that nothing was written (not that what was
    /// written is playable), and leaves no empty file for a next run to meet.
    @Test func aRunWithoutAFrameIsNotCalledPlayable() throws {
        let out = work + "/no-frame.mp4"
        let r = try sh(
            camcap, ["record", "-d", "fixture:uvc-webcam", "--fast", "--frames", "10", "--fixture-disconnect-after", "0", "-o", out, "-q"])
        #expect(r.code == 1 && r.err.contains("capture failed after 0 frames") && r.err.contains("nothing was written to \(out)"), "\(r.err)")
        #expect(!r.err.contains("playable") && !FileManager.default.fileExists(atPath: out), "\(r.err)")
    }

    /// A recording across a midnight (TZ set so that the local time is 23:59:55 when it is launched: a loaded
    /// machine may take seconds to start it) with
    /// `-o '%Y%m%d/%H/cam-%M%S.mp4'`: the new day's directories are made at the rollover, the run goes on, and the
    /// segments hold every frame encoded, numbered without a gap (each file decodes to its listed frames).
    @Test func aRecordingCrossesMidnightIntoNewDirectories() throws {
        let dir = work + "/midnight"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let utc = Int(Date().timeIntervalSince1970) % 86_400
        let offset = ((86_400 - 5 - utc) % 86_400 + 86_400) % 86_400 // local = UTC + offset is 23:59:55 now
        let (sign, magnitude) = offset <= 43_200 ? ("-", offset) : ("+", 86_400 - offset) // POSIX: east is negative
        let tz = String(format: "XXX%@%02d:%02d:%02d", sign, magnitude / 3600, magnitude / 60 % 60, magnitude % 60)
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = tz
        let r = try runTool(
            camcap,
            [
                "record", "-d", "fixture:uvc-webcam", "-s", "160x120", "--duration", "8", "--segment-seconds", "1",
                "-o", dir + "/%Y%m%d/%H/cam-%M%S.mp4", "-q",
            ], in: work, environment: environment)
        #expect(r.code == 0, "TZ=\(tz): \(r.err)")
        let files = contents(below: dir).keys.sorted()
        let days = Set(files.map { $0.prefix(8) })
        #expect(
            days.count == 2 && files.contains { $0.dropFirst(8).hasPrefix("/23/") } && files.contains { $0.dropFirst(8).hasPrefix("/00/") },
            "TZ=\(tz): \(files)")
        let listed = listedSegments(r.out)
        #expect(listed.count == files.count && listed.first?.first == 0, "\(r.out)")
        var next = 0
        for s in listed {
            #expect(s.first == next, "\(s.path) starts at frame \(s.first), not \(next)")
            #expect(try decodedFrames(s.path) == s.last - s.first + 1, "\(s.path)")
            next = s.last + 1
        }
        // Every frame encoded is in a segment (a frame a loaded machine drops before the encoder is not a boundary's).
        let encoded = summaryValue(r.out, "encoded") ?? -1
        #expect(next == encoded && encoded >= 150, "the segments hold \(next) frames, \(encoded) were encoded: \(r.out)")
    }
}
