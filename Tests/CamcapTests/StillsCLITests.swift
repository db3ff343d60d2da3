import Foundation
import Testing
import TestSupport

/// `camcap serve`'s stills (#50): /snapshot.jpg judged by ffprobe, /stream.mjpeg shown by headless Chromium in an
/// `<img>` (the 1,000 MJPEG clients are in SecurityTests).
@Suite(.serialized, .timeLimit(.minutes(4))) struct StillsCLITests {
    @Test func aSnapshotComesAtTheSizeAskedBehindTheToken() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "--listen", "127.0.0.1:0", "--snapshot-cache", "30"], name: "serve-snapshot")
        defer { _ = server.stop() }
        #expect(server.err.contains("stills: \(server.url)snapshot.jpg"), "\(server.err)")
        let token = try #require(server.token)
        let file = work + "/snapshot-320x180.jpg"
        let got = try server.curl(["-o", file, "-w", "%{http_code} %{content_type}", server.url + "snapshot.jpg?width=320&height=180"])
        #expect(got.out == "200 image/jpeg", "\(got.out) \(got.err)")
        let probe = try runTool("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", file])
        #expect(probe.out.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,320,180", "\(probe.out) \(probe.err)")
        // Within the cache window (30 s here): the same bytes, and the token works as ?token= too (an <img>'s way).
        let again = work + "/snapshot-again.jpg"
        let viaQuery = try runTool(
            "curl", ["-sS", "-o", again, "-w", "%{http_code}", server.url + "snapshot.jpg?width=320&height=180&token=\(token)"])
        #expect(viaQuery.out == "200")
        #expect(FileManager.default.contents(atPath: again) == FileManager.default.contents(atPath: file))
        // Refusals: no token, a foreign origin, a bad size (named).
        let anonymous = try runTool("curl", ["-sS", "-w", "\n%{http_code}", server.url + "snapshot.jpg"])
        #expect(anonymous.out.hasSuffix("401"), "\(anonymous.out)")
        let foreign = try server.curl(["-w", "\n%{http_code}", "-H", "Origin: https://evil.example", server.url + "stream.mjpeg"])
        #expect(foreign.out.hasSuffix("403"), "\(foreign.out)")
        let odd = try server.curl(["-w", "\n%{http_code}", server.url + "snapshot.jpg?width=321"])
        #expect(odd.out == "width must be even (4:2:0), got 321\n\n400", "\(odd.out)")
        let stats = try server.stats()
        let stills = stats["stills"] as? [String: Any]
        #expect(int(stills, "snapshots") == 2 && int(stills, "snapshotsCached") == 1 && int(stills, "encodes") == 1, "\(String(describing: stills))")
        let metrics = try server.curl([server.url + "metrics"]).out
        #expect(metrics.contains("whep_snapshots_total 2") && metrics.contains("# HELP whep_snapshots_total"), "\(metrics.prefix(400))")
        let help = try runTool(camcap, ["serve", "--help"]).out
        for option in ["--snapshot-cache", "--mjpeg-clients", "--mjpeg-fps", "/snapshot.jpg", "/stream.mjpeg"] {
            #expect(help.contains(option), "serve --help teaches \(option)")
        }
    }

    @Test func badStillsOptionsAreRefusedByName() throws {
        let r = try runTool(camcap, ["serve", "-d", "fixture:vivid", "--listen", "127.0.0.1:0", "--snapshot-cache", "99"])
        #expect(r.code != 0 && r.err.contains("--snapshot-cache must be 0.0...60.0 seconds, got 99.0"), "\(r.err)")
        let f = try runTool(camcap, ["serve", "-d", "fixture:vivid", "--listen", "127.0.0.1:0", "--mjpeg-fps", "0"])
        #expect(f.code != 0 && f.err.contains("--mjpeg-fps must be 0.1...240, got 0.0"), "\(f.err)")
    }

    /// `<img src=/stream.mjpeg>` in headless Chromium: the picture has the size asked and changes from frame to
    /// frame; the server counts the parts it sent.
    @Test(.enabled(if: chromiumAvailable)) func chromiumShowsTheMJPEGStream() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "--listen", "127.0.0.1:0"], name: "serve-mjpeg-chromium")
        defer { _ = server.stop() }
        let token = try #require(server.token)
        let page = server.url + "mjpeg.html#token=\(token)&fps=10&width=320&height=180"
        let r = try runTool("/usr/bin/python3", [repo + "/Scripts/mjpeg-browser.py", page, "--changes", "10", "--timeout", "60"])
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data((r.out.split(separator: "\n").last ?? "").utf8)) as? [String: Any],
            "\(r.out) \(r.err.suffix(800))")
        let stills = try server.stats()["stills"] as? [String: Any]
        print("FIGURE Chromium <img src=/stream.mjpeg> at 10 fps: \(report); server \(String(describing: stills))")
        #expect(report["error"] is NSNull, "\(report)")
        #expect(int(report, "width") == 320 && int(report, "height") == 180, "\(report)")
        #expect(int(report, "changes") >= 10, "\(report)")
        #expect(int(stills, "mjpegFrames") >= 10 && int(stills, "mjpegClientsTotal") == 1, "\(String(describing: stills))")
    }
}
