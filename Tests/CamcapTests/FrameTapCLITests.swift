// Issue 50 (frame tap): `camcap … --tap NAME` publishes the converted frames in shared memory; the Python reader
// shipped in Examples/FrameTap reads them. Judges: the SHA-256 of every frame the reader got against camcap's own
// Y4M dump of the same frame (matched by sequence number), and a reader stopped mid-run that sees its gap while
// capture's frame count is unaffected.
import Foundation
import Testing
import TestSupport
import VideoProcessing

let frameTapPython = repo + "/Examples/FrameTap/frametap.py"
let numpyAvailable = (try? runTool("/usr/bin/python3", ["-c", "import numpy"]).code) == 0

/// The SHA-256 of every frame of a Y4M file (its planes, as the tap's reader hashes them), by Python's hashlib.
private func y4mFrameHashes(_ path: String) throws -> [String] {
    let script = """
        import hashlib, sys
        data = open(sys.argv[1], 'rb').read()
        head, rest = data.split(b'\\n', 1)
        fields = {f[:1]: f[1:] for f in head.split(b' ')[1:]}
        w, h = int(fields[b'W']), int(fields[b'H'])
        size = w * h + 2 * ((w + 1) // 2) * ((h + 1) // 2)
        i = 0
        while i < len(rest):
            assert rest[i:i + 6] == b'FRAME\\n', rest[i:i + 6]
            i += 6
            print(hashlib.sha256(rest[i:i + size]).hexdigest())
            i += size
        """
    let r = try runTool("/usr/bin/python3", ["-c", script, path])
    #expect(r.code == 0, "\(r.err)")
    return r.out.split(separator: "\n").map(String.init)
}

/// The reader's lines: sequence, timestamp, width, height, missed, SHA-256, the camera's sequence number.
private struct TapLine {
    var sequence: Int, timestamp: Int64, width: Int, height: Int, missed: Int, hash: String, cameraSequence: Int
    init?(_ line: Substring) {
        let f = line.split(separator: " ")
        guard f.count == 7, let s = Int(f[0]), let t = Int64(f[1]), let w = Int(f[2]), let h = Int(f[3]), let m = Int(f[4]), let c = Int(f[6])
        else { return nil }
        (sequence, timestamp, width, height, missed, hash, cameraSequence) = (s, t, w, h, m, String(f[5]), c)
    }
}

/// A process's resident memory in KiB (/proc/PID/status VmRSS), 0 if it cannot be read.
private func residentKiB(_ pid: Int32) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

private func tapLines(_ path: String) -> [TapLine] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap(TapLine.init)
}

/// Starts the Python reader on `socket`, its lines to `out`, and returns once it is ready: it says so on standard
/// error when its imports are done and it polls for the socket. A camcap started after that misses none of its frames
/// (CI saw readers started alongside camcap still importing numpy while 36 of 60 frames went by).
private func startReader(_ socket: String, out: String, views: Bool = false) throws -> Process {
    let err = out + ".err"
    _ = FileManager.default.createFile(atPath: err, contents: nil)
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    p.arguments = [frameTapPython, socket, "--out", out, "--timeout", "60"] + (views ? ["--views"] : [])
    p.standardError = FileHandle(forWritingAtPath: err)
    try p.run()
    let ready = waitUntil(timeout: 60) {
        ((try? String(contentsOfFile: err, encoding: .utf8)) ?? "").contains("frametap: waiting for a tap at") || !p.isRunning
    }
    #expect(ready && p.isRunning, "the reader is ready: \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
    return p
}

@Suite(.serialized, .timeLimit(.minutes(3))) struct FrameTapCLITests {
    /// Every frame two Python readers got at once (one copying each frame out, one hashing views of the ring) is,
    /// byte for byte, the frame camcap wrote to its Y4M under the same number.
    @Test(.enabled(if: numpyAvailable)) func thePythonReadersGetTheFramesCamcapWrote() throws {
        let socket = work + "/tap-judge.sock", y4m = work + "/tap-judge.y4m"
        let outs = [work + "/tap-judge-copy.txt", work + "/tap-judge-views.txt"]
        for out in outs { try? FileManager.default.removeItem(atPath: out) }
        let readers = [try startReader(socket, out: outs[0]), try startReader(socket, out: outs[1], views: true)]
        defer { for reader in readers where reader.isRunning { reader.terminate() } }
        // Real time (30 fps): the readers, polling every 2 ms with 10 slots, keep up. YUYV is converted, straight into
        // the ring's slots: the tap copies none of the 60 pictures (the YU12 of the next test is copied once each).
        let r = try sh(
            camcap,
            ["preview", "-d", "fixture:vivid", "-s", "320x180", "--pixel-format", "YUYV", "--frames", "60", "--tap", socket, "--y4m", y4m, "-q"])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out.contains("tap:") && r.out.contains("\(socket) (60 frames published, 2 readers, 0 copied)"), "\(r.out)")
        for reader in readers {
            reader.waitUntilExit() // the run's end retires the ring: the reader drains it and ends
            #expect(reader.terminationStatus == 0)
        }
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket file is removed at the end")
        let reference = try y4mFrameHashes(y4m)
        #expect(reference.count == 60)
        for (out, kind) in zip(outs, ["copying", "hashing views"]) {
            let lines = tapLines(out)
            #expect(lines.count >= 45, "the reader \(kind) got \(lines.count) of 60 frames")
            for l in lines {
                #expect((1...60).contains(l.sequence) && l.width == 320 && l.height == 180)
                guard (1...reference.count).contains(l.sequence) else { continue }
                #expect(l.hash == reference[l.sequence - 1], "frame \(l.sequence) (\(kind)): the tap's bytes differ from the Y4M's")
            }
            // Numbers and capture times go up, and the gaps are the frames reported missed.
            for (a, b) in zip(lines, lines.dropFirst()) {
                #expect(b.sequence > a.sequence && b.timestamp > a.timestamp)
                #expect(b.missed == b.sequence - a.sequence - 1, "frames \(a.sequence)…\(b.sequence) (\(kind)): \(b.missed) reported missed")
            }
        }
    }

    /// A reader stopped (SIGSTOP) for 10 s of capture sees its gap when it resumes; capture goes on at its pace:
    /// every frame written, the intervals at which pictures leave the pipeline as before the stop (their p95 is
    /// printed), and its memory flat.
    @Test(.enabled(if: numpyAvailable)) func aStoppedReaderSeesItsGapAndCaptureIsUnaffected() async throws {
        let socket = work + "/tap-stall.sock", out = work + "/tap-stall.txt", y4m = work + "/tap-stall.y4m"
        let trace = work + "/tap-stall.csv"
        try? FileManager.default.removeItem(atPath: out)
        let reader = try startReader(socket, out: out)
        defer { if reader.isRunning { reader.terminate() } }
        let run = Process()
        run.executableURL = URL(fileURLWithPath: camcap)
        // Capture runs until this test has seen what it needs and sends SIGINT (events, not a frame budget: CI saw a
        // fixed 150 and then 300 frames end before a slow-starting reader and the watcher were in). YU12 passes
        // through unconverted: the tap copies each picture once.
        run.arguments = [
            "record", "-d", "fixture:vivid", "-s", "320x180", "--frames", "9000", "--tap", socket, "--preview", y4m, "--frame-trace", trace,
            "-o", work + "/tap-stall.h264", "-q",
        ]
        let summary = Pipe()
        run.standardOutput = summary
        run.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try run.run()
        defer { if run.isRunning { run.terminate() } }
        // Capture is watched through the tap itself, connected as soon as the socket is there.
        var watcher: FrameTapReader?
        #expect(
            await waitUntil(timeout: 60) {
                watcher = try? FrameTapReader(socketPath: socket)
                return watcher != nil
            }, "the tap's socket appears")
        guard let watcher else { return }
        // 10 s of capture with the reader reading, then 10 s with it stopped.
        #expect(await waitUntil(timeout: 90) { (tapLines(out).last?.cameraSequence ?? 0) >= 310 }, "the reader reads")
        kill(reader.processIdentifier, SIGSTOP)
        let stopped = tapLines(out).last!
        let rssAtStop = residentKiB(run.processIdentifier)
        #expect(await waitUntil(timeout: 90) { watcher.latestSequence >= UInt64(stopped.sequence + 300) })
        let rssAfterStall = residentKiB(run.processIdentifier)
        kill(reader.processIdentifier, SIGCONT)
        // Let it read past the gap, then end the run.
        #expect(await waitUntil(timeout: 60) { (tapLines(out).last?.sequence ?? 0) > stopped.sequence + 300 }, "the reader resumes")
        watcher.close()
        kill(run.processIdentifier, SIGINT)
        let report = String(decoding: summary.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        reader.waitUntilExit()
        #expect(run.terminationStatus == 0, "\(report)")
        let published = report.firstMatch(of: /\((\d+) frames published/).flatMap { Int($0.1) } ?? -1
        #expect(published > stopped.sequence + 300, "\(report)")
        #expect(report.contains(" readers, \(published) copied)"), "YU12 passes through unconverted: copied once: \(report)")
        #expect(try y4mFrameHashes(y4m).count == published, "every frame was written while the reader was stopped")
        #expect(report.contains("encoded \(published)"), "\(report)")
        #expect(rssAfterStall - rssAtStop < 4096, "memory during the stall: \(rssAtStop) KiB → \(rssAfterStall) KiB")
        // When each picture left the pipeline (capture time + capture-to-output latency), 300 frames before the stop
        // against the 300 of the stall.
        let rows = ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").split(separator: "\n").dropFirst().compactMap {
            line -> (Int, Double)? in
            let f = line.split(separator: ",")
            guard f.count > 9, let n = Int(f[0]), let c = Double(f[1]), let l = Double(f[9]) else { return nil }
            return (n, c + l / 1000)
        }
        func p95(_ range: ClosedRange<Int>) -> Double {
            let t = rows.filter { range.contains($0.0) }.map(\.1)
            let gaps = zip(t.dropFirst(), t).map { $0 - $1 }.sorted()
            return gaps.isEmpty ? .infinity : gaps[min(gaps.count - 1, gaps.count * 95 / 100)]
        }
        let before = p95((stopped.cameraSequence - 300)...stopped.cameraSequence)
        let during = p95(stopped.cameraSequence...(stopped.cameraSequence + 300))
        // The figure (p95 within 5 %) is for an idle machine (MEASUREMENTS.md); on a loaded CI box the two
        // windows' scheduling differs by more than that. A reader that held capture up would show as intervals of
        // the stall's length, or frames missing from the file.
        #expect(during <= max(before, 1000.0 / 30) * 1.5, "interval p95 \(before) ms before the stop, \(during) ms while the reader was stopped")
        print("tap stall: output interval p95 \(before) ms before, \(during) ms during a 10 s reader stop; RSS \(rssAtStop) → \(rssAfterStall) KiB")
        let lines = tapLines(out)
        let gap = lines.first { $0.sequence > stopped.sequence + 8 && $0.missed > 0 }
        #expect(gap != nil, "after the stop the reader reports the frames it missed")
        if let gap { #expect(gap.missed >= 250, "frame \(gap.sequence): \(gap.missed) missed") }
        // Whatever it got after the gap is still the frame camcap wrote.
        let reference = try y4mFrameHashes(y4m)
        for l in lines where (1...reference.count).contains(l.sequence) { #expect(l.hash == reference[l.sequence - 1], "frame \(l.sequence)") }
    }

    /// Two Python readers and a Chromium viewer of `serve` on one camera at once: every frame a reader got is, byte
    /// for byte, the fixture camera's picture of the same number (camcap's own Y4M of it, as fast as consumed), while
    /// the viewer decodes at the camera's rate. The readers never slow the encoder's input: pictures are converted
    /// into the ring (none copied).
    @Test(.enabled(if: numpyAvailable && chromiumAvailable)) func twoReadersAndAViewerShareOneCamera() throws {
        let socket = work + "/tap-serve.sock"
        let outs = [work + "/tap-serve-copy.txt", work + "/tap-serve-views.txt"]
        for out in outs { try? FileManager.default.removeItem(atPath: out) }
        let readers = [try startReader(socket, out: outs[0]), try startReader(socket, out: outs[1], views: true)]
        defer { for reader in readers where reader.isRunning { reader.terminate() } }
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--pixel-format", "YUYV", "--tap", socket, "--listen", "127.0.0.1:0"], name: "serve-tap")
        defer { _ = server.stop() }
        let b = try chromium(server.pageURL, frames: 150)
        #expect(server.stop() == 0, "\(server.err)")
        for reader in readers { reader.waitUntilExit() }
        #expect(b["ok"] as? Bool == true, "\(b)")
        let last = b["last"] as? [String: Any], sent = int(b, "framesSent"), decoded = int(b, "framesDecoded")
        #expect(sent >= 150 && decoded >= 140, "the viewer decoded \(decoded) of \(sent)")
        #expect(((last?["framesPerSecond"] as? NSNumber)?.doubleValue ?? 0) >= 25, "the viewer's rate: \(String(describing: last))")
        #expect(int(last, "freezeCount") <= 1, "\(String(describing: last))")
        let summary = server.err + server.out
        #expect(summary.contains("2 readers, 0 copied)"), "\(summary.suffix(1500))")
        let lines = outs.map(tapLines)
        let highest = lines.joined().map(\.cameraSequence).max() ?? 0
        let ref = work + "/tap-serve-ref.y4m"
        let r = try sh(
            camcap,
            ["preview", "-d", "fixture:vivid", "-s", "320x180", "--pixel-format", "YUYV", "--fast", "--frames", "\(highest + 1)", "--y4m", ref, "-q"])
        #expect(r.code == 0, "\(r.err)")
        let reference = try y4mFrameHashes(ref)
        for (got, kind) in zip(lines, ["copying", "hashing views"]) {
            // The viewer watched 150 frames (5 s): the readers were there for all of them.
            #expect(got.count >= 150, "the reader \(kind) got \(got.count) frames")
            let missed = got.dropFirst().reduce(0) { $0 + $1.missed }
            #expect(missed <= got.count / 50, "the reader \(kind) missed \(missed) of \(got.count)")
            for l in got where l.cameraSequence < reference.count {
                #expect(l.hash == reference[l.cameraSequence], "camera frame \(l.cameraSequence) (\(kind)): the tap's bytes differ")
            }
        }
    }

    /// The C header compiles (C11) and puts every field where the Swift writer puts it.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/gcc"))) func theCHeaderMatchesTheLayout() throws {
        let checks = [
            ("header", "magic", 0), ("header", "version", 4), ("header", "header_size", 8), ("header", "slot_count", 12),
            ("header", "slot_size", 16), ("header", "slot_header_size", 24), ("header", "generation", 28), ("header", "latest_sequence", 32),
            ("header", "flags", 40), ("header", "writer_pid", 44), ("header", "total_size", 48), ("header", "max_data_size", 56),
            ("slot", "seqlock", 0), ("slot", "sequence", 8), ("slot", "timestamp_ns", 16), ("slot", "camera_sequence", 24), ("slot", "width", 32),
            ("slot", "height", 36), ("slot", "stride_y", 40), ("slot", "stride_u", 44), ("slot", "stride_v", 48), ("slot", "rotation", 52),
            ("slot", "offset_y", 56), ("slot", "offset_u", 60), ("slot", "offset_v", 64), ("slot", "flags", 68), ("slot", "data_size", 72),
        ]
        let source =
            "#include <stddef.h>\n#include \"\(repo)/Examples/FrameTap/frametap.h\"\n"
            + checks.map { "_Static_assert(offsetof(struct frametap_\($0.0), \($0.1)) == \($0.2), \"\($0.1)\");" }.joined(separator: "\n")
            + "\nint main(void) { return FRAMETAP_MAGIC == 0x50415443u && FRAMETAP_VERSION == 1u ? 0 : 1; }\n"
        let file = work + "/frametap-layout.c"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        let cc = try sh("/usr/bin/gcc", ["-std=c11", "-Wall", "-Werror", "-o", work + "/frametap-layout", file])
        #expect(cc.code == 0, "\(cc.err)")
        #expect(try sh(work + "/frametap-layout", []).code == 0)
    }

    /// A second camcap on a tap that is running is refused before its camera starts, naming the socket.
    @Test func aRunningTapIsRefused() throws {
        let socket = work + "/tap-busy.sock"
        let tap = try FrameTap(socketPath: socket)
        defer { tap.close() }
        let y4m = work + "/tap-busy.y4m"
        let r = try sh(camcap, ["preview", "-d", "fixture:vivid", "-s", "320x180", "--frames", "5", "--tap", socket, "--y4m", y4m, "-q"])
        #expect(r.code != 0)
        #expect(r.err.contains("frame tap \(socket): another tap is running there"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: y4m), "nothing was written")
        let bad = try sh(camcap, ["preview", "-d", "fixture:vivid", "--tap", "no spaces", "-q"])
        #expect(bad.code != 0 && bad.err.contains("frame tap name"), "\(bad.err)")
    }
}
