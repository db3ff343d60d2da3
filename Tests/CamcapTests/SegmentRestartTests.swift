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

    /// (#53) What a SIGKILL leaves of the open segment (0 bytes, or the MP4 header without a fragment) is reported by
    /// the next run in the ring, never counted as one of its files: `--keep 2 --keep-scope pattern` deletes the two
    /// good files of the earlier run and leaves the two leftovers as they are; the new segments continue after them.
    /// Then a real SIGKILL: the next run names its leftover, or finds none when every fragment was complete.
    @Test func leftoversOfAKilledRunAreReportedAndNotCountedAsTheRings() throws {
        let dir = work + "/restart-leftovers"
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let args = [
            "record", "-d", "fixture:uvc-webcam", "-s", "160x120", "--fast", "--frames", "60", "--segment-seconds", "1", "-o", dir + "/ring.mp4",
        ]
        let first = try sh(camcap, args + ["-q"])
        #expect(first.code == 0, "\(first.err)")
        // ring-002: ring-001's bytes before its first moof (ftyp + moov); ring-003: empty.
        let good = try #require(FileManager.default.contents(atPath: dir + "/ring-001.mp4"))
        let moof = try #require(good.range(of: Data("moof".utf8))).lowerBound - 4
        let header = good.prefix(upTo: moof)
        #expect(FileManager.default.createFile(atPath: dir + "/ring-002.mp4", contents: header))
        #expect(FileManager.default.createFile(atPath: dir + "/ring-003.mp4", contents: Data()))
        let second = try sh(camcap, args + ["--keep", "2", "--keep-scope", "pattern"])
        #expect(second.code == 0, "\(second.err)")
        let leftover =
            "leftover:     2 earlier files of this ring hold no frame (cut short by a kill or a power loss: not playable, left as they are, not counted among the ring's files): \(dir)/ring-002.mp4 (\(header.count) bytes, header only), \(dir)/ring-003.mp4 (0 bytes)"
        #expect(second.out.contains(leftover), "\(second.out)")
        #expect(second.out.contains("2 written (fragmented MP4), 2 kept, 0 deleted (and 2 of earlier runs), 60 frames"), "\(second.out)")
        let left = contents(below: dir)
        #expect(left.keys.sorted() == ["ring-002.mp4", "ring-003.mp4", "ring-004.mp4", "ring-005.mp4"], "\(left.keys.sorted())")
        #expect(left["ring-002.mp4"] == header && left["ring-003.mp4"] == Data())
        #expect(try decodedFrames(dir + "/ring-004.mp4") == 30 && decodedFrames(dir + "/ring-005.mp4") == 30)

        // A real SIGKILL of a running record (real time: a frame every 1/30 s), once its second segment is open.
        let killed = Process()
        killed.executableURL = URL(fileURLWithPath: camcap)
        killed.arguments = [
            "record", "-d", "fixture:uvc-webcam", "-s", "160x120", "--duration", "60", "--segment-seconds", "1", "-o", dir + "/ring.mp4", "-q",
        ]
        killed.standardOutput = FileHandle.nullDevice
        killed.standardError = FileHandle.nullDevice
        try killed.run()
        _ = waitUntil(timeout: 60, every: 0.02) { FileManager.default.fileExists(atPath: dir + "/ring-007.mp4") || !killed.isRunning }
        kill(killed.processIdentifier, SIGKILL)
        killed.waitUntilExit()
        let open = dir + "/ring-007.mp4"
        let size = (try? FileManager.default.attributesOfItem(atPath: open)[.size] as? Int) ?? -1
        let third = try sh(camcap, args)
        #expect(third.code == 0, "\(third.err)")
        let frames = try decodedFrames(open)
        let named = third.out.contains("\(open) (")
        #expect(named == (frames <= 0), "ring-007 (\(size) bytes when killed, \(frames) frames decoded): \(third.out)")
        #expect(third.out.contains("leftover:     \(frames <= 0 ? 3 : 2) earlier files"), "\(third.out)")
        let line = third.out.split(separator: "\n").first { $0.hasPrefix("leftover:") } ?? "none"
        print("FIGURE SIGKILL left ring-007.mp4 with \(size) bytes, \(frames) frames decoded; the next run says: \(line)")
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
