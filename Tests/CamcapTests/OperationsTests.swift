import Foundation
import Testing
import TestSupport

/// The operations side of `serve`: GET /metrics (Prometheus text, checked by Prometheus's own `promtool`) and
/// the library's logging (swift-log), seen through camcap's CAMCAP_LOG.
@Suite(.serialized, .timeLimit(.minutes(4))) struct OperationsTests {
    static let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// The samples of a Prometheus text, by series ("name" or "name{labels}"); a labelled series also adds into
    /// its bare name (`capture_frames_total` sums `capture_frames_total{camera="…"}`).
    func samples(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else { continue }
            let series = String(line[..<space])
            out[series] = v
            if let brace = series.firstIndex(of: "{") { out[String(series[..<brace]), default: 0] += v }
        }
        return out
    }

    func scrape(_ server: ServeProcess) throws -> (text: String, samples: [String: Double]) {
        let r = try server.curl(["-D", "-", server.url + "metrics"])
        #expect(r.out.contains("200 OK") && r.out.lowercased().contains("content-type: text/plain; version=0.0.4"), "\(r.out.prefix(300))")
        let body = r.out.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (body, samples(body))
    }

    /// `promtool check metrics`: the text parses as Prometheus's exposition format and passes its lint (help
    /// text, counter names, units).
    func promtoolAccepts(_ text: String) throws {
        guard let promtool = Self.promtool else {
            Issue.record("promtool is not installed (Debian's prometheus package)")
            return
        }
        let path = work + "/metrics-\(getpid()).txt"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runTool("/bin/sh", ["-c", "\(promtool) check metrics < \(path)"])
        #expect(r.code == 0 && r.out.isEmpty && r.err.isEmpty, "promtool: exit \(r.code) \(r.out) \(r.err)")
    }

    /// Polls the metrics until `ready` holds for them (an event: a counter reached), at most 30 s.
    func scrape(_ server: ServeProcess, until ready: ([String: Double]) -> Bool) throws -> (text: String, samples: [String: Double]) {
        var last: (text: String, samples: [String: Double]) = ("", [:])
        try waitUntil(timeout: 30, every: 0.2) {
            last = try scrape(server)
            return ready(last.samples)
        }
        return last
    }

    @Test(.enabled(if: chromiumAvailable)) func metricsArePrometheusTextAndFollowFramesAndViewers() throws {
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "640x360", "--listen", "127.0.0.1:0"], name: "serve-metrics",
            environment: ["CAMCAP_LOG": "debug"])
        defer { _ = server.stop() }
        #expect(!server.url.isEmpty, "\(server.err)")
        // Nobody watching: frames are captured (dequeued) and neither converted nor encoded (#38: the first frame
        // only, before the session knew). Every capture and encoder series carries its camera.
        let idle = try scrape(server) { ($0["capture_frames_total"] ?? 0) >= 30 }
        try promtoolAccepts(idle.text)
        #expect(idle.samples["whep_viewers"] == 0 && idle.samples["encoder_frames_total"] == 0, "\(idle.samples)")
        #expect((idle.samples["capture_conversion_seconds_count"] ?? 99) <= 2, "\(idle.samples)")
        #expect(idle.samples["capture_frames_total{camera=\"fixture:vivid\"}"] != nil, "\(idle.text.prefix(1500))")
        #expect(idle.samples["encoder_frames_total{camera=\"fixture:vivid\"}"] != nil, "\(idle.text.prefix(1500))")
        // Without the token: 401, counted.
        let anonymous = try runTool("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", server.url + "metrics"])
        #expect(anonymous.out == "401")
        let refused = try scrape(server).samples["whep_refused_total{reason=\"unauthorized\"}"]
        #expect(
            refused == (idle.samples["whep_refused_total{reason=\"unauthorized\"}"] ?? 0) + 1,
            "the refusal is counted: \(String(describing: refused))")

        // A viewer: the encoder runs, the viewer's series appear and move.
        let (viewer, hold, _) = try heldViewer(server.pageURL, frames: 60, name: "viewer-metrics")
        defer { if viewer.isRunning { kill(viewer.processIdentifier, SIGKILL) } }
        let watched = try scrape(server) {
            ($0["whep_viewer_bytes_sent_total{viewer=\"1\"}"] ?? 0) > 0 && $0["whep_viewer_rtt_seconds{viewer=\"1\"}"] != nil
        }
        try promtoolAccepts(watched.text)
        let w = watched.samples
        #expect(w["whep_viewers"] == 1 && w["whep_viewers_joined_total"] == 1, "\(w)")
        #expect((w["encoder_frames_total"] ?? 0) >= 60 && (w["encoder_key_frames_total"] ?? 0) >= 1, "\(w)")
        // One encode time per encoded frame (a scrape may fall between the two updates of one frame).
        #expect(abs((w["encoder_encode_seconds_count"] ?? -9) - (w["encoder_frames_total"] ?? 0)) <= 1, "\(w)")
        #expect((w["encoder_bytes_total"] ?? 0) > 10_000 && (w["capture_frames_total"] ?? 0) > (idle.samples["capture_frames_total"] ?? 0))
        let rtt = w["whep_viewer_rtt_seconds{viewer=\"1\"}"] ?? -1
        // Loopback, but the first samples come while Chromium starts, on a loaded box: a bound that refuses garbage.
        #expect(rtt >= 0 && rtt < 1, "rtt on loopback \(rtt) s")

        // The viewer leaves: its series go, the counters keep it.
        _ = FileManager.default.createFile(atPath: hold, contents: Data())
        viewer.waitUntilExit()
        let after = try scrape(server) { $0["whep_viewers_left_total"] == 1 }
        try promtoolAccepts(after.text)
        #expect(after.samples["whep_viewers"] == 0 && after.samples["whep_viewers_left_total"] == 1, "\(after.samples)")
        #expect(!after.text.contains("viewer=\"1\""), "the departed viewer's series are removed")
        print(
            "FIGURE /metrics: \(after.text.split(separator: "\n").filter { !$0.hasPrefix("#") }.count) samples; idle \(Int(idle.samples["capture_frames_total"] ?? 0)) frames captured, 0 encoded; with a viewer rtt \(String(format: "%.2f", rtt * 1000)) ms, \(Int(w["whep_viewer_bytes_sent_total{viewer=\"1\"}"] ?? 0)) bytes sent"
        )

        #expect(server.stop() == 0, "\(server.err)")
        // The library's logging, switched on by the app (camcap: CAMCAP_LOG=debug): a viewer's arrival and departure.
        #expect(server.err.contains("viewer joined") && server.err.contains("viewer left"), "\(server.err.suffix(2000))")
        #expect(server.err.contains("capture started") && server.err.contains("capture stopped"))
    }

    @Test func loggingIsSilentUnlessTheAppAsks() throws {
        let port = 46_000 + Int(getpid() % 1000)
        let args = ["stream", "-d", "fixture:vivid", "-s", "320x240", "--frames", "30", "--fast", "--to", "127.0.0.1:\(port)"]
        let quiet = try runTool(camcap, args)
        #expect(quiet.code == 0, "\(quiet.err)")
        for text in ["capture started", "stream started", "stream stopped", "capture stopped"] { #expect(!quiet.err.contains(text), "\(quiet.err)") }
        let logged = try runTool(camcap, args, environment: ProcessInfo.processInfo.environment.merging(["CAMCAP_LOG": "debug"]) { $1 })
        #expect(logged.code == 0, "\(logged.err)")
        let lines = logged.err.split(separator: "\n")
        for text in ["capture started", "stream started", "stream stopped", "capture stopped"] {
            #expect(lines.contains { $0.contains("debug") && $0.contains(text) }, "\(text): \(logged.err.suffix(1500))")
        }
    }

    /// Nobody watching: after --idle-release the camera is released (its thread ends, no frame is captured, the
    /// process rests), a viewer starts it again (the first frame's delay is printed), and when the viewer has
    /// left it is released again.
    @Test(.enabled(if: chromiumAvailable)) func anUnwatchedCameraIsReleasedAndAViewerStartsItAgain() throws {
        let server = try ServeProcess(
            ["-d", "fixture:uvc-webcam", "-s", "1280x720", "--listen", "127.0.0.1:0", "--idle-release", "1"], name: "serve-idle")
        #expect(!server.url.isEmpty, "\(server.err)")
        func threads() -> [String] {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.pid)/task")) ?? []
            return tasks.map { ServeProcess.read("/proc/\(server.pid)/task/\($0)/comm").trimmingCharacters(in: .whitespacesAndNewlines) }
        }
        func cpuTicks() -> Int {
            let f = ServeProcess.read("/proc/\(server.pid)/stat").split(separator: ")").last?.split(separator: " ") ?? []
            return f.count > 13 ? (Int(f[11]) ?? 0) + (Int(f[12]) ?? 0) : -1 // utime + stime, after the command name
        }
        let runningTicks = cpuTicks(), runningAt = Date()
        #expect(waitUntil(timeout: 30, every: 0.05) { server.err.contains("camera released") }, "\(server.err)")
        let ranFor = Date().timeIntervalSince(runningAt), ranTicks = cpuTicks() - runningTicks
        #expect(waitUntil(timeout: 10, every: 0.05) { !threads().contains("fixture-camera") }, "the camera's thread ended: \(threads())")
        let released = try scrape(server).samples["capture_frames_total"] ?? -1
        #expect(try scrape(server).samples["capture_frames_total"] == released, "no frame is captured while released")
        // A viewer arrives: the camera starts again and the viewer plays from a key frame, then leaves.
        let b = try chromium(server.pageURL, frames: 60)
        #expect(b["ok"] as? Bool == true && int(b, "framesDecoded") >= 55, "\(b)")
        let restart = server.err.split(separator: "\n").first { $0.contains("camera restarted for a viewer") }.map(String.init) ?? ""
        #expect(restart.contains("first frame after"), "\(server.err)")
        // The viewer left: the camera is released again.
        #expect(
            waitUntil(timeout: 30, every: 0.05) { server.err.components(separatedBy: "camera released").count - 1 >= 2 }, "\(server.err)")
        #expect(server.stop() == 0, "\(server.err)")
        #expect(server.out.contains("camera:") && server.out.contains("released 2 times"), "\(server.out)")
        let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
        print(
            "FIGURE idle release: 720p MJPEG fixture without viewers \(String(format: "%.0f", Double(ranTicks) / hz / ranFor * 1000)) ms CPU/s "
                + "until the release (camera thread gone, capture_frames_total still); \(restart.trimmingCharacters(in: .whitespaces))")
    }
}
