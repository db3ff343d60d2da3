import Foundation
import Testing
import TestSupport

/// `camcap serve` running in the background: started, waited for (the "serving http://…" line, an event), and
/// stopped with SIGINT (camcap's own signal handling; it ends cleanly and prints its summary).
final class ServeProcess {
    let process = Process()
    let errPath: String, outPath: String
    /// The server's base URL ("http://127.0.0.1:PORT/"), the URL it printed to open (with "#token=…"), and the token.
    private(set) var url = ""
    private(set) var pageURL = ""
    private(set) var token: String?

    /// `launcher`: a command that runs camcap (e.g. prlimit with a descriptor limit).
    /// `running`: the line that says the camera runs ("serving fixture" for the built-in cameras).
    init(_ args: [String], name: String, launcher: [String] = [], environment: [String: String] = [:], running: String = "serving fixture") throws {
        errPath = work + "/\(name).err"
        outPath = work + "/\(name).out"
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: launcher.first ?? camcap)
        process.arguments = launcher.dropFirst() + (launcher.isEmpty ? [] : [camcap]) + ["serve"] + args
        process.standardError = FileHandle(forWritingAtPath: errPath)
        process.standardOutput = FileHandle(forWritingAtPath: outPath)
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        try process.run()
        let end = Date().addingTimeInterval(30)
        while Date() < end && process.isRunning {
            if let line = err.split(separator: "\n").first(where: { $0.hasPrefix("serving http://") || $0.hasPrefix("serving https://") }) {
                pageURL = String(line.split(separator: " ")[1])
                let parts = pageURL.split(separator: "#", maxSplits: 1)
                url = String(parts[0])
                token = parts.count == 2 && parts[1].hasPrefix("token=") ? String(parts[1].dropFirst(6)) : nil
                if err.contains(running) { return } // the camera is running too
            }
            usleep(20_000)
        }
    }

    var err: String { ServeProcess.read(errPath) }
    var out: String { ServeProcess.read(outPath) }
    /// A file another process is still writing (String(contentsOfFile:) leaks under ASan on a growing file).
    static func read(_ path: String) -> String {
        guard let h = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? h.close() }
        return String(decoding: (try? h.readToEnd()) ?? Data(), as: UTF8.self)
    }
    var pid: Int32 { process.processIdentifier }

    /// Open file descriptors of the server (/proc/PID/fd).
    var fdCount: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1 }
    /// Open descriptors other than HTTP connections (accepted TCP sockets): what viewers hold (UDP sockets) and
    /// the process itself. A browser's keep-alive connection stays open until the server's request timeout
    /// closes it, so counting it would make a leak check depend on timing.
    var descriptorsBesidesHTTP: Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        var connections = Set<String>()
        for table in ["tcp", "tcp6"] {
            for line in ServeProcess.read("/proc/\(pid)/net/\(table)").split(separator: "\n").dropFirst() {
                let f = line.split(separator: " ")
                if f.count > 9 && f[3] != "0A" { connections.insert(String(f[9])) } // 0A: LISTEN
            }
        }
        return fds.filter { fd in
            guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"), link.hasPrefix("socket:[") else {
                return true
            }
            return !connections.contains(String(link.dropFirst(8).dropLast()))
        }.count
    }
    /// `descriptorsBesidesHTTP` once it has come back to `n`, or what it is after 15 s (a loaded CI box took over 5).
    func descriptors(settlingAt n: Int) -> Int {
        waitUntil(timeout: 15, every: 0.05) { descriptorsBesidesHTTP == n }
        return descriptorsBesidesHTTP
    }
    var rssKiB: Int {
        let status = ServeProcess.read("/proc/\(pid)/status")
        return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? -1
    }

    /// SIGINT, then the exit status (SIGKILL after 20 s: a hang is a failure, reported as status 137).
    func stop() -> Int32 {
        if process.isRunning { kill(pid, SIGINT) }
        waitUntil(timeout: 20, every: 0.02) { !process.isRunning }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            return 137
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// curl with the server's token (and -k for its self-signed certificate).
    func curl(_ args: [String]) throws -> ToolResult {
        let auth = token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []
        return try runTool("curl", ["-sS", "-k", "--max-time", "10"] + auth + args)
    }

    func stats() throws -> [String: Any] {
        let r = try curl([url + "stats"])
        return (try JSONSerialization.jsonObject(with: Data(r.out.utf8))) as? [String: Any] ?? [:]
    }
}

let browserScript = repo + "/Scripts/webrtc-browser.py"

/// A Chromium viewer in the background that watches `frames` frames, prints its first report, and stays until
/// the file `hold` exists (then prints its last one). Returns once the first report is out (or after 60 s).
func heldViewer(_ pageURL: String, frames: Int, name: String, extra: [String] = []) throws -> (Process, hold: String, out: String) {
    let hold = work + "/hold-\(name)-\(getpid())", out = work + "/\(name).out"
    try? FileManager.default.removeItem(atPath: hold)
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    p.arguments = [browserScript, pageURL, "--frames", String(frames), "--hold", hold] + extra
    _ = FileManager.default.createFile(atPath: out, contents: nil)
    p.standardOutput = FileHandle(forWritingAtPath: out)
    p.standardError = FileHandle(forWritingAtPath: work + "/\(name).err")
    try p.run()
    waitUntil(timeout: 60, every: 0.05) { ServeProcess.read(out).contains("\n") }
    return (p, hold, out)
}

/// Runs the headless Chromium client and returns its JSON report.
func chromium(_ url: String, frames: Int = 300, extra: [String] = []) throws -> [String: Any] {
    let r = try runTool("/usr/bin/python3", [browserScript, url, "--frames", String(frames), "--timeout", "60"] + extra)
    let line = r.out.split(separator: "\n").last.map(String.init) ?? ""
    guard let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
        Issue.record("browser script (exit \(r.code)) printed no JSON: \(r.out.suffix(800)) \(r.err.suffix(1500))")
        return [:]
    }
    return json
}

func int(_ d: [String: Any]?, _ k: String) -> Int { (d?[k] as? NSNumber)?.intValue ?? -1 }

/// Scripts/test.sh sets WEBRTC_PEERS_REQUIRED=1 (it installs Chromium and aiortc first): then a missing peer is a
/// failure, not a skip. A bare `swift test` skips what is not installed.
let peersRequired = ProcessInfo.processInfo.environment["WEBRTC_PEERS_REQUIRED"] == "1"
let chromiumAvailable =
    peersRequired
    || (FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver"))

@Suite(.serialized, .timeLimit(.minutes(4))) struct ServeTests {
    @Test(.enabled(if: chromiumAvailable)) func chromiumDecodesTheStreamAtTheSentSize() throws {
        // 720p30 from the MJPEG webcam fixture (decoded, converted, encoded): the glass-to-glass case.
        let server = try ServeProcess(
            ["-d", "fixture:uvc-webcam", "-s", "1280x720", "--noise", "4", "--listen", "127.0.0.1:0"], name: "serve-chromium")
        #expect(!server.url.isEmpty, "\(server.err)")
        let b = try chromium(server.pageURL)
        #expect(b["ok"] as? Bool == true, "\(b)")
        let last = b["last"] as? [String: Any], sent = int(b, "framesSent"), decoded = int(b, "framesDecoded")
        #expect(sent >= 300 && decoded >= 280, "decoded \(decoded) of \(sent)")
        #expect(int(last, "frameWidth") == 1280 && int(last, "frameHeight") == 720, "\(String(describing: last))")
        // Capture → browser, per frame (requestVideoFrameCallback's RTP timestamp mapped to its capture time).
        let latency = b["latency"] as? [String: Any]
        #expect(int(latency, "frames") >= 250, "\(String(describing: latency))")
        let p95 = (latency?["receiveP95Ms"] as? Double) ?? -1
        // A real-time bound with room for a debug build on a loaded box (an idle one sees a p95 of 14–19 ms,
        // MEASUREMENTS.md; a CI run 145 ms); a stream that queued up would be past it within seconds.
        #expect(p95 > 0 && p95 < 500, "capture to browser receive p95 \(p95) ms")
        print("chromium 720p30: decoded \(decoded) of \(sent), latency \(String(describing: latency))")
        // At most one freeze in the 10 s watched, the project's bound for a browser on a loaded 2-core box (a CI run
        // with three builds beside it saw 5 short ones, 1.6 s in all, with no packet lost); a broken stream freezes
        // at every key-frame interval.
        #expect(int(last, "freezeCount") <= 1, "\(String(describing: last))")
        #expect((last?["srtpCipher"] as? String)?.isEmpty == false)
        let server2 = b["lastServer"] as? [String: Any]
        #expect(
            int(server2, "receiverReports") > 0 && (server2?["rttMs"] as? Double ?? -1) >= 0, "RTCP from the browser: \(String(describing: server2))")
        // The page sent DELETE: the viewer is gone.
        let stats = try server.stats()
        #expect(int(stats, "left") == 1 && (stats["viewers"] as? [Any])?.isEmpty == true, "\(stats)")
        #expect(server.stop() == 0, "\(server.err)")
        #expect(server.out.contains("1 in all, 1 left"), "\(server.out)")
    }

    /// #48: a camera unplugged for 5 s while a browser watches is waited for (`serve`'s default), and its source then
    /// changes size: the same peer connection and viewer resource throughout, and the browser decodes what is sent on
    /// both sides of the gap and at the new size.
    @Test(.enabled(if: chromiumAvailable)) func aBrowserViewerStaysThroughAnUnplugAndASizeChange() throws {
        let server = try ServeProcess(
            [
                "-d", "fixture:uvc-webcam", "-s", "640x480", "--fixture-fault", "unplug@300+5", "--fixture-fault", "resize@370:320x240",
                "--listen", "127.0.0.1:0",
            ], name: "serve-unplug")
        #expect(!server.url.isEmpty, "\(server.err)")
        // 480 frames after the first decoded one: the window spans the unplug (the camera's frame 300, 10 s after it
        // started: time for a browser to start on a loaded box, CI's 2 cores), 70 frames after the camera is back, the
        // change to 320x240 and at least 110 frames after it.
        let b = try chromium(server.pageURL, frames: 480)
        #expect(b["ok"] as? Bool == true, "the viewer stayed (the script fails when the server loses it): \(b)")
        let sent = int(b, "framesSent"), decoded = int(b, "framesDecoded"), last = b["last"] as? [String: Any]
        #expect(sent >= 480 && decoded >= 450, "decoded \(decoded) of \(sent) across the unplug and the size change")
        #expect(int(last, "frameWidth") == 320 && int(last, "frameHeight") == 240, "decoding at the new size: \(String(describing: last))")
        let err = server.err
        #expect(err.contains("camera lost: fixture:uvc-webcam was unplugged at frame 300") && err.contains("camera back after"), "\(err)")
        #expect(err.contains("source changed: YUYV 640x480 @ 30 fps → YUYV 320x240 @ 30 fps"), "\(err)")
        let watching = err.range(of: "viewers 1 (1 in all)"), lost = err.range(of: "camera lost")
        #expect(watching != nil && lost != nil && watching!.lowerBound < lost!.lowerBound, "the camera went while the viewer watched: \(err)")
        let stats = try server.stats()
        #expect(int(stats, "left") == 1, "one viewer, who left by DELETE at the end: \(stats)")
        let camera = stats["camera"] as? [String: Any]
        #expect(
            camera?["state"] as? String == "streaming" && int(camera, "losses") == 1 && int(camera, "recoveries") == 1
                && int(camera, "sourceChanges") == 1 && (camera?["lastEvent"] as? String)?.hasPrefix("source changed") == true,
            "/stats camera: \(String(describing: camera))")
        #expect(server.stop() == 0, "\(server.err)")
        #expect(server.out.contains("lost 1 time (disconnected 1), back 1,") && server.out.contains("1 in all, 1 left"), "\(server.out)")
    }

    /// What a person sees: capture → display in Chromium at 720p30, per frame, from the capture times the
    /// abs-capture-time extension carries (requestVideoFrameCallback's captureTime) against the frame's receive
    /// and expected display times; with serve's default playout delay (auto: 0:500 while the link is clear, as on
    /// loopback) and without one (off). The bounds only refuse garbage (no
    /// capture times, negative or absurd figures): CI is a loaded 2-core machine; Benchmarks/RESULTS.md has
    /// the figures.
    @Test(.enabled(if: chromiumAvailable), arguments: [nil, "off"]) func captureToDisplayLatencyFromTheCaptureTimeExtension(playoutDelay: String?)
        throws
    {
        let server = try ServeProcess(
            ["-d", "fixture:uvc-webcam", "-s", "1280x720", "--listen", "127.0.0.1:0"] + (playoutDelay.map { ["--playout-delay", $0] } ?? []),
            name: "serve-latency")
        #expect(!server.url.isEmpty, "\(server.err)")
        let b = try chromium(server.pageURL)
        #expect(b["ok"] as? Bool == true, "\(b)")
        let viewer = b["lastServer"] as? [String: Any]
        #expect(viewer?["captureTime"] as? Bool == true, "the page negotiates abs-capture-time: \(String(describing: viewer))")
        #expect((viewer?["playoutDelay"] as? String) == (playoutDelay == nil ? "0:500" : ""), "\(String(describing: viewer))")
        // auto: what the last frame asked for, and how often it switched (a loaded machine can show congestion).
        let sent = (viewer?["playoutDelaySent"] as? String) ?? "", changes = int(viewer, "playoutDelayChanges")
        if playoutDelay == nil { #expect(sent == "0:500" || sent == "0:10000", "\(String(describing: viewer))") } else { #expect(sent == "") }
        let c = b["captureTime"] as? [String: Any]
        let frames = int(c, "frames"), stamped = int(c, "withCaptureTime")
        func ms(_ k: String) -> Double { (c?[k] as? Double) ?? -1 }
        print(
            "chromium 720p30 capture → display (playout delay \(playoutDelay ?? "auto, the default: last sent \(sent), \(changes) switches")): \(stamped) of \(frames) frames;"
                + " display p50 \(ms("displayP50Ms")) p95 \(ms("displayP95Ms")) p99 \(ms("displayP99Ms")) ms;"
                + " received p50 \(ms("receiveP50Ms")) p95 \(ms("receiveP95Ms")) p99 \(ms("receiveP99Ms")) ms")
        #expect(frames >= 250 && stamped * 10 >= frames * 9, "capture times on \(stamped) of \(frames) frames")
        #expect(ms("displayP50Ms") > 0 && ms("displayP50Ms") < 500, "\(String(describing: c))")
        #expect(ms("receiveP50Ms") > 0 && ms("receiveP50Ms") <= ms("displayP50Ms"), "\(String(describing: c))")
        #expect(ms("displayP95Ms") >= ms("displayP50Ms") && ms("displayP99Ms") < 2000, "\(String(describing: c))")
        // The page's overlay figure is the same measure (the median of the last frames).
        let overlay = b["overlayLatency"] as? [String: Any]
        #expect(((overlay?["displayMs"] as? Double) ?? -1) > 0, "\(String(describing: overlay))")
        #expect(server.stop() == 0, "\(server.err)")
    }

    /// A camera turned 90° (the iPhone fixture: landscape sensor, portrait picture) reaches Chromium as captured,
    /// its rotation in the video-orientation extension (no rotation pass): getStats' frame is 640x480, the video
    /// element 480x640, and the picture upright (the bars' white end at the top, as when the pixels are rotated).
    @Test(.enabled(if: chromiumAvailable)) func rotatedCameraArrivesUpright() throws {
        // Also the other SRTP profile: AES_CM_128_HMAC_SHA1_80 only.
        let server = try ServeProcess(["-d", "fixture:iphone", "-s", "640x480", "--listen", "127.0.0.1:0", "--srtp", "cm"], name: "serve-rotated")
        // The page leaves like a closed tab (navigation: pagehide sends DELETE).
        let b = try chromium(server.pageURL, frames: 30, extra: ["--navigate-away", "--picture"])
        let last = b["last"] as? [String: Any], picture = b["picture"] as? [String: Any]
        #expect(b["ok"] as? Bool == true, "\(b)")
        #expect(last?["srtpCipher"] as? String == "SRTP_AES128_CM_HMAC_SHA1_80", "\(String(describing: last?["srtpCipher"]))")
        var stats: [String: Any] = [:]
        try waitUntil(timeout: 10, every: 0.05) {
            stats = try server.stats()
            return int(stats, "left") >= 1
        }
        #expect(int(stats, "left") == 1, "the closed page's viewer is freed: \(stats)")
        #expect((b["lastServer"] as? [String: Any])?["videoOrientation"] as? Bool == true, "negotiated")
        #expect(int(last, "frameWidth") == 640 && int(last, "frameHeight") == 480, "sent as captured: \(String(describing: last))")
        #expect(int(picture, "videoWidth") == 480 && int(picture, "videoHeight") == 640, "shown portrait: \(String(describing: picture))")
        #expect(int(picture, "top") > int(picture, "bottom") + 80, "upright: white bars at the top \(String(describing: picture))")
        print("rotated camera, video-orientation: sent \(int(last, "frameWidth"))x\(int(last, "frameHeight")), shown \(String(describing: picture))")
        #expect(server.stop() == 0)
        // A leaving page sends DELETE (pagehide) and closes its peer connection (DTLS close_notify): whichever
        // reaches the server first ends the viewer (under load the close_notify can win; both free it).
        #expect(
            server.out.contains("last: the viewer sent DELETE") || server.out.contains("last: the viewer closed the connection (DTLS close_notify)"),
            "\(server.out)")
    }

    /// One encode serves everyone: while a viewer without the video-orientation extension (aiortc) watches too,
    /// the pixels are rotated for all (aiortc decodes portrait frames, Chromium still shows an upright picture);
    /// when it leaves, the frames go out as captured again. With --rotate-pixels the extension is not negotiated.
    @Test(.enabled(if: chromiumAvailable && (aiortcPython != nil || peersRequired))) func aViewerWithoutTheExtensionGetsEveryoneRotatedPixels()
        throws
    {
        // One encode (--tiers 1): what is checked is the rotation each viewer gets, not the tier its estimate earns
        // (CI saw Chromium's estimate dip under load while aiortc watched, move it to 320x240, and the 1 s after
        // aiortc left was too short to climb back).
        let server = try ServeProcess(
            ["-d", "fixture:iphone", "-s", "640x480", "--tiers", "1", "--listen", "127.0.0.1:0"], name: "serve-rotated-mixed")
        defer { _ = server.stop() }
        let (browser, hold, out) = try heldViewer(server.pageURL, frames: 30, name: "rotated-chromium", extra: ["--picture"])
        defer { browser.terminate() }
        let first = try #require(
            try? JSONSerialization.jsonObject(with: Data(ServeProcess.read(out).split(separator: "\n")[0].utf8)) as? [String: Any])
        #expect(int(first["last"] as? [String: Any], "frameWidth") == 640, "alone: sent as captured \(first)")
        let r = try runTool(
            try aiortc(), [repo + "/Scripts/webrtc-aiortc.py", server.pageURL, "--frames", "30", "--out", work + "/rotated-aiortc.y4m"])
        let line = r.out.split(separator: "\n").last.map(String.init) ?? ""
        let a = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(r.out) \(r.err.suffix(1500))")
        #expect(a["ok"] as? Bool == true && int(a, "width") == 480 && int(a, "height") == 640, "aiortc gets upright pixels: \(a)")
        #expect((a["server"] as? [String: Any])?["videoOrientation"] as? Bool == false)
        // aiortc has left: 30 more frames to Chromium, then its last figures.
        let resource = first["resource"] as? String
        func sent() throws -> Int {
            ((try server.stats()["viewers"] as? [[String: Any]]) ?? []).first { $0["resource"] as? String == resource }.map { int($0, "framesSent") }
                ?? -1
        }
        let mark = try sent()
        try waitUntil(timeout: 30, every: 0.05) { try sent() >= mark + 30 }
        _ = FileManager.default.createFile(atPath: hold, contents: nil)
        browser.waitUntilExit()
        let lines = ServeProcess.read(out).split(separator: "\n")
        let end = try #require(lines.count >= 2 ? try? JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any] : nil, "\(lines)")
        let after = end["afterHold"] as? [String: Any]
        #expect(int(after, "frameWidth") == 640 && int(after, "frameHeight") == 480, "back to as captured: \(String(describing: after))")
        #expect(int(after, "videoWidth") == 480 && int(after, "videoHeight") == 640)
        // The switches are key frames, not freezes: at most one in the run, the bound for a browser on a loaded box.
        #expect(int(after, "freezeCount") <= 1, "the switches are key frames, not freezes: \(String(describing: after))")
        print(
            "mixed viewers: Chromium alone 640x480 + extension, with aiortc \(int(a, "width"))x\(int(a, "height")) pixels, after it left \(int(after, "frameWidth"))x\(int(after, "frameHeight"))"
        )
        // --rotate-pixels: Chromium's offer has the extension, the answer does not (other extensions stay).
        let forced = try ServeProcess(
            ["-d", "fixture:iphone", "-s", "640x480", "--listen", "127.0.0.1:0", "--rotate-pixels"], name: "serve-rotate-pixels")
        defer { _ = forced.stop() }
        let post = try forced.curl(["-X", "POST", "-H", "Content-Type: application/sdp", "--data-binary", chromiumOffer, forced.url + "whep"])
        #expect(post.out.contains("m=video") && !post.out.contains("urn:3gpp:video-orientation"), "\(post.out.prefix(300)) \(post.err)")
        #expect(forced.stop() == 0)
    }

    /// With --congestion-control transport-cc, Chromium sends transport-wide feedback instead of REMB, and each
    /// viewer's estimate is ours (SendSideBandwidthEstimator): on loopback the path is never overused.
    @Test(.enabled(if: chromiumAvailable)) func chromiumSendsTransportFeedbackForTheSendSideEstimate() throws {
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "640x360", "--listen", "127.0.0.1:0", "--congestion-control", "transport-cc"], name: "serve-twcc")
        let b = try chromium(server.pageURL, frames: 150)
        #expect(b["ok"] as? Bool == true, "\(b)")
        let last = b["lastServer"] as? [String: Any]
        let sent = int(b, "framesSent"), decoded = int(b, "framesDecoded")
        #expect(sent >= 150 && decoded * 100 >= sent * 95, "decoded \(decoded) of \(sent)")
        #expect(last?["transportCC"] as? Bool == true && int(last, "transportFeedbacks") >= 20, "\(String(describing: last))")
        let estimate = int(last, "sendSideEstimateBps")
        #expect((50_000...2_250_000).contains(estimate) && last?["delayUsage"] as? String != "overusing", "\(String(describing: last))")
        #expect(int(b["last"] as? [String: Any], "freezeCount") == 0)
        print("transport-cc: \(int(last, "transportFeedbacks")) feedback messages, estimate \(estimate / 1000) kbit/s, \(last?["delayUsage"] ?? "")")
        #expect(server.stop() == 0)
    }

    @Test(.enabled(if: chromiumAvailable)) func lossIsRepairedWithNackAndPli() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "640x360", "--listen", "127.0.0.1:0", "--drop-rate", "0.02"], name: "serve-loss")
        let b = try chromium(server.pageURL)
        #expect(b["ok"] as? Bool == true, "\(b)")
        let last = b["last"] as? [String: Any], srv = b["lastServer"] as? [String: Any]
        let sent = int(b, "framesSent"), decoded = int(b, "framesDecoded")
        #expect(int(srv, "packetsDropped") > 0, "\(String(describing: srv))")
        #expect(
            int(last, "nackCount") > 0 && int(srv, "nacks") > 0 && int(srv, "retransmissions") > 0,
            "browser \(String(describing: last)) server \(String(describing: srv))")
        #expect(int(last, "retransmittedPacketsReceived") > 0, "RTX reached the browser: \(String(describing: last))")
        #expect(decoded >= sent * 9 / 10, "decoding goes on: \(decoded) of \(sent)")
        print(
            "2% loss: decoded \(decoded) of \(sent); browser nack \(int(last, "nackCount")) retransmitted received \(int(last, "retransmittedPacketsReceived")) pli \(int(last, "pliCount")) freezes \(int(last, "freezeCount")); server dropped \(int(srv, "packetsDropped")) nacks \(int(srv, "nacks")) retransmitted \(int(srv, "retransmissions")) key-frame requests \(int(srv, "keyFrameRequests"))"
        )
        #expect(server.stop() == 0)
    }

    @Test(.enabled(if: chromiumAvailable)) func twoViewersThenOneLeaves() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "640x360", "--listen", "127.0.0.1:0"], name: "serve-two")
        // Viewer A stays until `hold` exists; viewer B comes, watches 150 frames and leaves.
        let (a, hold, aOut) = try heldViewer(server.pageURL, frames: 60, name: "viewer-a", extra: ["--expect-close"])
        defer { if a.isRunning { kill(a.processIdentifier, SIGKILL) } }
        let fdsAlone = server.descriptorsBesidesHTTP, rssAlone = server.rssKiB
        let b = try chromium(server.pageURL, frames: 150)
        #expect(b["ok"] as? Bool == true, "\(b)")
        #expect(int(b, "framesDecoded") >= 140, "viewer B: \(b)")
        let stats = try server.stats()
        #expect((stats["viewers"] as? [Any])?.count == 1 && int(stats, "left") == 1, "\(stats)")
        let fdsAfter = server.descriptors(settlingAt: fdsAlone), rssAfter = server.rssKiB
        // At most as many as with A alone: right after A's start the count can still hold a descriptor of A's
        // set-up that closes later (a CI run counted 15 with A alone, 14 after B left).
        #expect(fdsAfter <= fdsAlone, "descriptors with A alone \(fdsAlone), after B left \(fdsAfter)")
        // Ctrl-C with viewer A still watching: the server ends cleanly and tells A (RTCP BYE, DTLS close_notify).
        #expect(server.stop() == 0, "\(server.err)")
        #expect(server.out.contains("2 in all, 2 left"), "\(server.out)")
        _ = FileManager.default.createFile(atPath: hold, contents: Data())
        a.waitUntilExit()
        let lines = ServeProcess.read(aOut).split(separator: "\n")
        let first = try lines.first.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let final = try lines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let before = int(first?["last"] as? [String: Any], "framesDecoded"), after = int(final?["afterHold"] as? [String: Any], "framesDecoded")
        #expect(after - before >= 140, "viewer A went on while B came and left: \(before) → \(after)")
        #expect(int(final?["afterHold"] as? [String: Any], "freezeCount") == 0)
        // Chromium marks the DTLS transport closed on our close_notify (its connectionState only follows ICE).
        let stateAfterStop = (final?["afterHold"] as? [String: Any])?["dtlsState"] as? String
        #expect(stateAfterStop == "closed", "viewer A's DTLS transport after the server stopped: \(String(describing: stateAfterStop))")
        print("two viewers: fds \(fdsAlone) → \(fdsAfter), RSS \(rssAlone) → \(rssAfter) KiB; A after Ctrl-C: \(stateAfterStop ?? "-")")
    }

    @Test func offerWithoutH264IsRefusedAndBadRequestsAreClear() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0"], name: "serve-errors")
        defer { _ = server.stop() }
        let vp8 =
            [
                "v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0", "m=video 9 UDP/TLS/RTP/SAVPF 96 97",
                "c=IN IP4 0.0.0.0", "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuvwx",
                "a=fingerprint:sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"), "a=setup:actpass", "a=mid:0",
                "a=recvonly", "a=rtcp-mux", "a=rtpmap:96 VP8/90000", "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96",
            ].joined(separator: "\r\n") + "\r\n"
        let r = try server.curl([
            "-o", "-", "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/sdp", "--data-binary", vp8, server.url + "whep",
        ])
        #expect(r.out.hasSuffix("406") && r.out.contains("no H.264") && r.out.contains("VP8"), "\(r.out)")
        let mode0 = vp8.replacingOccurrences(of: "VP8/90000", with: "H264/90000") + "a=fmtp:96 packetization-mode=0;profile-level-id=42e01f\r\n"
        let r0 = try server.curl([
            "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/sdp", "--data-binary", mode0, server.url + "whep",
        ])
        #expect(r0.out.hasSuffix("406") && r0.out.contains("packetization-mode=1"), "\(r0.out)")
        let garbage = try server.curl([
            "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/sdp", "--data-binary", "hello", server.url + "whep",
        ])
        #expect(garbage.out.hasSuffix("400") && garbage.out.contains("not a valid SDP"), "\(garbage.out)")
        let del = try server.curl(["-w", "\n%{http_code}", "-X", "DELETE", server.url + "whep/nonexistent"])
        #expect(del.out.hasSuffix("404"), "\(del.out)")
        let page = try server.curl([server.url])
        #expect(page.out.contains("RTCPeerConnection") && page.out.contains("/whep"))
        // Nobody watched: the encoder rested the whole time.
        #expect(server.stop() == 0)
        #expect(server.out.contains("encoded 0, skipped 0, not encoded (nobody watching)"), "\(server.out)")
    }

    @Test func busyPortIsAClearErrorBeforeTheCameraStarts() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0"], name: "serve-port")
        defer { _ = server.stop() }
        let port = server.url.split(separator: ":").last.map { String($0.dropLast()) } ?? ""
        let r = try sh(camcap, ["serve", "-d", "fixture:vivid", "--listen", "127.0.0.1:\(port)"])
        #expect(r.code == 1)
        #expect(r.err.contains("cannot listen on 127.0.0.1:\(port): the port is in use"), "\(r.err)")
        #expect(!r.err.contains("serving fixture"), "the camera must not start: \(r.err)")
        let bad = try sh(camcap, ["serve", "--listen", "localhost:99999"])
        #expect(bad.code != 0 && bad.err.contains("--listen must be HOST:PORT"), "\(bad.err)")
    }
}

/// aiortc, in the virtual environment Scripts/install-deps.sh makes (AIORTC_PYTHON overrides).
let aiortcPython: String? = {
    let candidates = [
        ProcessInfo.processInfo.environment["AIORTC_PYTHON"],
        NSHomeDirectory() + "/.cache/swift-video-capture/aiortc/bin/python",
    ].compactMap { $0 }
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
}()

func aiortc() throws -> String {
    try #require(aiortcPython, "no aiortc: Scripts/install-deps.sh test makes ~/.cache/swift-video-capture/aiortc")
}

@Suite(.serialized, .timeLimit(.minutes(3))) struct AiortcTests {
    /// aiortc decodes ≥ 95% of the frames; matched to the encoder's input by RTP timestamp, PSNR ≥ 33 dB; and
    /// the capture-to-decoded latency on loopback.
    @Test(.enabled(if: aiortcPython != nil || peersRequired)) func aiortcDecodesAndMatchesTheInput() throws {
        let input = work + "/aiortc-input.y4m", decoded = work + "/aiortc-decoded.y4m"
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "640x360", "--listen", "127.0.0.1:0", "--noise", "4", "--dump-input", input], name: "serve-aiortc")
        let r = try runTool(try aiortc(), [repo + "/Scripts/webrtc-aiortc.py", server.pageURL, "--frames", "300", "--out", decoded])
        #expect(server.stop() == 0, "\(server.err)")
        let line = r.out.split(separator: "\n").last.map(String.init) ?? ""
        let j = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(r.out) \(r.err.suffix(1500))")
        #expect(j["ok"] as? Bool == true, "\(j)")
        let srv = j["server"] as? [String: Any]
        let sent = int(srv, "framesSent"), got = int(j, "framesDecoded")
        #expect(got >= 301 && got * 100 >= sent * 95, "aiortc decoded \(got) of \(sent)")
        #expect(int(j, "width") == 640 && int(j, "height") == 360)
        let c = try runTool(
            "/usr/bin/python3",
            [repo + "/Scripts/webrtc-compare.py", decoded, input, String(int(srv, "rtpTimestampOffset")), String(int(srv, "firstCaptureNs"))])
        let m = try #require(try JSONSerialization.jsonObject(with: Data(c.out.utf8)) as? [String: Any], "\(c.out) \(c.err)")
        #expect(int(m, "matched") >= 290, "\(m)")
        let psnr = (m["psnrAverage"] as? Double) ?? -1
        #expect(psnr >= 33, "PSNR \(psnr) dB: \(m)")
        print("aiortc: decoded \(got) of \(sent), \(m)")
        #expect(int(m, "latencyP95Ms") > 0)
        try? FileManager.default.removeItem(atPath: input)
        try? FileManager.default.removeItem(atPath: decoded)
    }
}

extension AiortcTests {
    /// Viewers that come and go free everything: descriptors, threads and memory (a retain cycle once kept each
    /// viewer's 600 KB retransmission history alive).
    @Test(.enabled(if: aiortcPython != nil || peersRequired)) func viewersComingAndGoingLeaveNothingBehind() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0"], name: "serve-churn")
        defer { _ = server.stop() }
        func viewer() throws {
            let r = try runTool(try aiortc(), [repo + "/Scripts/webrtc-aiortc.py", server.pageURL, "--frames", "20", "--out", work + "/churn.y4m"])
            #expect(r.out.contains("\"ok\": true"), "\(r.out) \(r.err.suffix(500))")
        }
        try viewer()
        let fds = server.descriptorsBesidesHTTP, rss = server.rssKiB
        for _ in 0..<5 { try viewer() }
        let stats = try server.stats()
        #expect(int(stats, "total") == 6 && int(stats, "left") == 6, "\(stats)")
        #expect(server.descriptors(settlingAt: fds) == fds, "descriptors \(fds) → \(server.descriptorsBesidesHTTP)")
        // (Under a sanitizer its allocator's RSS says nothing about ours: Scripts/sanitize.sh sets these.)
        let sanitized = ["TSAN_OPTIONS", "ASAN_OPTIONS"].contains { ProcessInfo.processInfo.environment[$0] != nil }
        #expect(sanitized || server.rssKiB - rss < 1024, "RSS \(rss) → \(server.rssKiB) KiB after 5 more viewers")
        print("churn: 5 more viewers: fds \(fds) → \(server.descriptorsBesidesHTTP), RSS \(rss) → \(server.rssKiB) KiB")
    }
}

extension AiortcTests {
    /// A viewer that vanishes (no DELETE, no close_notify) is dropped when its STUN consent checks stop.
    @Test(.enabled(if: aiortcPython != nil || peersRequired)) func vanishedViewerIsDroppedWhenConsentExpires() throws {
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0", "--consent-timeout", "3"], name: "serve-vanish")
        defer { _ = server.stop() }
        let fds = server.descriptorsBesidesHTTP
        let r = try runTool(
            try aiortc(), [repo + "/Scripts/webrtc-aiortc.py", server.pageURL, "--frames", "20", "--out", work + "/vanish.y4m", "--abandon"])
        #expect(r.out.contains("\"abandoned\""), "\(r.out) \(r.err.suffix(500))")
        var stats: [String: Any] = [:]
        try waitUntil(timeout: 15, every: 0.1) {
            stats = try server.stats()
            return int(stats, "left") >= 1
        }
        #expect(int(stats, "left") == 1 && (stats["viewers"] as? [Any])?.isEmpty == true, "\(stats)")
        #expect(server.descriptors(settlingAt: fds) == fds, "descriptors \(fds) → \(server.descriptorsBesidesHTTP)")
        #expect(server.stop() == 0)
        #expect(server.out.contains("consent expired"), "\(server.out)")
    }
}

extension AiortcTests {
    /// A peer whose DTLS certificate is not the one its offer's fingerprint names gets no media: the handshake is
    /// refused and the viewer freed.
    @Test(.enabled(if: aiortcPython != nil || peersRequired)) func wrongDTLSFingerprintIsRefused() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0"], name: "serve-fingerprint")
        let r = try runTool(
            try aiortc(),
            [
                repo + "/Scripts/webrtc-aiortc.py", server.pageURL, "--frames", "5", "--out", work + "/fp.y4m",
                "--tamper-fingerprint", "--timeout", "5",
            ])
        #expect(r.out.contains("\"ok\": false"), "aiortc must not get frames: \(r.out)")
        var stats: [String: Any] = [:]
        try waitUntil(timeout: 10, every: 0.1) {
            stats = try server.stats()
            return int(stats, "left") >= 1
        }
        #expect(int(stats, "left") == 1, "\(stats)")
        #expect(server.stop() == 0)
        #expect(server.out.contains("does not match the fingerprint in its offer"), "\(server.out)")
    }
}
