import Foundation
import Testing
import TestSupport

/// `camcap serve`'s stills (#50): /snapshot.jpg judged by ffprobe, /stream.mjpeg shown by headless Chromium in an
/// `<img>`, and 1,000 MJPEG clients at once against its limits.
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

    /// 1,000 MJPEG clients that never read, from ten addresses: at most --mjpeg-clients streams at once, the rest
    /// refused (503/429, by the MJPEG limit or the connection limits); the server keeps answering snapshots, its
    /// descriptors stay within the connection limit, and the streams end when their clients leave.
    @Test func aThousandMJPEGClientsMeetTheLimits() throws {
        let server = try ServeProcess(
            ["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0", "--mjpeg-clients", "8"], name: "serve-mjpeg-flood")
        defer { _ = server.stop() }
        let port = try #require(URL(string: server.url)?.port)
        let token = try #require(server.token)
        let request = "GET /stream.mjpeg?fps=1&width=32&height=24&token=\(token) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        var open: [Int32] = []
        var refused = 0, streams = 0, maxFds = 0, maxClients = 0
        func drain(_ fd: Int32) {
            var b = [UInt8](repeating: 0, count: 256)
            let n = b.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard n > 12 else { return }
            let status = String(decoding: b[9..<12], as: UTF8.self)
            if status == "503" || status == "429" { refused += 1 } else if status == "200" { streams += 1 }
        }
        for i in 0..<1000 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr("127.0.0.\(10 + i % 10)")
            _ = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            a.sin_port = UInt16(port).bigEndian
            let c = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if c == 0 { _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }
            open.append(fd)
            // At most 300 held by this process at once (its own descriptor limit); the oldest are read and closed.
            if open.count > 300 {
                let fd = open.removeFirst()
                drain(fd)
                close(fd)
            }
            if i % 100 == 99 {
                maxFds = max(maxFds, server.fdCount)
                let stills = try server.stats()["stills"] as? [String: Any]
                maxClients = max(maxClients, int(stills, "mjpegClients"))
            }
        }
        // While 300 are still held: a snapshot is answered.
        let snap = try server.curl(["-o", "/dev/null", "-w", "%{http_code}", server.url + "snapshot.jpg?width=64&height=48"])
        for fd in open {
            drain(fd)
            close(fd)
        }
        let stills = try server.stats()["stills"] as? [String: Any]
        let refusals = try server.stats()["refused"] as? [String: Any]
        print(
            "FIGURE 1000 MJPEG clients (never reading), --mjpeg-clients 8: \(streams) streams seen, \(refused) refused (503/429) seen by the clients; at most \(maxClients) MJPEG clients and \(maxFds) descriptors at the server; stills \(String(describing: stills)); refused \(String(describing: refusals))"
        )
        #expect(snap.out == "200", "a snapshot during the flood: \(snap.out) \(snap.err)")
        #expect(maxClients <= 8 && int(stills, "mjpegClientsTotal") >= 8, "\(String(describing: stills))")
        #expect(
            int(stills, "mjpegRefused") + int(refusals, "connectionLimit") + int(refusals, "perAddressConnectionLimit")
                + int(refusals, "perNetworkConnectionLimit") + int(refusals, "evicted") > 0)
        #expect(maxFds < 400, "\(maxFds) descriptors")
        #expect(
            waitUntil(timeout: 20) { (try? server.stats()["stills"] as? [String: Any]).map { int($0, "mjpegClients") } == 0 },
            "the streams ended with their clients")
        #expect(server.process.isRunning)
    }
}
