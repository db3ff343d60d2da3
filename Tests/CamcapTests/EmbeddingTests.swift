import Foundation
import Testing
import TestSupport
import WebRTC
import WHEPServer

/// The library without the CLI: the examples an app starts from, and the WHEP endpoint driven directly (the
/// framework-neutral core any HTTP server can call).
@Suite(.serialized, .timeLimit(.minutes(3))) struct EmbeddingTests {
    static func example(_ name: String) -> String { URL(fileURLWithPath: camcap).deletingLastPathComponent().appendingPathComponent(name).path }

    /// The WHEP article's code (ReadmeTests checks it is this example's file) built and watched: Chromium gets the
    /// full 1280x720 picture and decodes what it is sent, and the app's own route answers behind the token. The
    /// article once wired one encode adapting to REMB, and Chromium got 320x180 at 10 fps for good (#39).
    @Test(.enabled(if: chromiumAvailable)) func theArticlesServerGivesChromiumTheFullPictureAndServesItsOwnRoute() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.example("embedded-whep-example"))
        p.arguments = ["fixture:uvc-webcam", "120"] // the MJPEG webcam at 1280x720: decoded, converted, encoded
        let out = work + "/embedded.out", err = work + "/embedded.err"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        p.standardOutput = FileHandle(forWritingAtPath: out)
        p.standardError = FileHandle(forWritingAtPath: err)
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        var url = ""
        waitUntil(timeout: 30, every: 0.02) { // the printed line is the event
            url = ServeProcess.read(out).split(separator: "\n").first { $0.hasPrefix("open ") }.map { String($0.dropFirst(5)) } ?? ""
            return !url.isEmpty || !p.isRunning
        }
        try #require(!url.isEmpty, "\(ServeProcess.read(err))")
        let base = String(url.split(separator: "#")[0]), token = String(url.split(separator: "=").last ?? "")
        #expect(try runTool("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "health"]).out == "401")
        let health = try runTool("curl", ["-sS", "--max-time", "10", "-H", "Authorization: Bearer \(token)", base + "health"])
        #expect(health.out == "{\"viewers\": 0}\n", "\(health.out) \(health.err)")
        // 150 frames sent to the viewer after its first decoded one (about 5 s at 30 fps); the script waits on the
        // server's count, then lets the browser decode what is in flight.
        let b = try chromium(url, frames: 150)
        #expect(b["ok"] as? Bool == true, "\(b)")
        let last = b["last"] as? [String: Any], viewer = b["lastServer"] as? [String: Any]
        let sent = int(b, "framesSent"), decoded = int(b, "framesDecoded")
        let size = "\(int(last, "frameWidth"))x\(int(last, "frameHeight"))"
        print(
            "embedded-whep-example in Chromium: \(size), decoded \(decoded) of \(sent) sent, tier \(int(viewer, "tier")),"
                + " tier moves \(int(viewer, "tierMoves")), freezes \(int(last, "freezeCount"))")
        #expect(size == "1280x720", "the full picture: \(String(describing: last)) \(String(describing: viewer))")
        #expect(sent >= 150 && decoded * 100 >= sent * 95, "decoded \(decoded) of \(sent)")
        kill(p.processIdentifier, SIGINT)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(ServeProcess.read(err))")
        #expect(ServeProcess.read(out).contains("viewers:"), "the example printed its summary: \(ServeProcess.read(out))")
    }

    @Test func theFrameConsumerGetsTheFramesItAskedFor() throws {
        let r = try runTool(Self.example("frame-consumer-example"), ["fixture:vivid", "6"])
        #expect(r.code == 0, "\(r.err)")
        let frames = r.out.split(separator: "\n").filter { $0.hasPrefix("frame ") }
        #expect(frames.count == 6 && frames.allSatisfy { $0.contains(": 320x180 at ") }, "\(r.out)")
    }

    /// The endpoint with no HTTP server at all: requests in, responses out, with the policy applied.
    @Test func theEndpointIsDrivenWithoutAnHTTPServer() throws {
        let hub = ViewerHub(
            identity: try DTLSIdentity(), configuration: WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        let endpoint = WHEPEndpoint(hub: hub, policy: try ServerPolicy(token: "0123456789abcdef0123", hostNames: ["127.0.0.1"]))
        func req(_ method: String, _ uri: String, _ headers: [(String, String)] = [], body: String = "") -> WHEPResponse {
            endpoint.handle(
                WHEPRequest(
                    method: method, uri: uri, headers: [("Host", "127.0.0.1:8080")] + headers.map { (name: $0.0, value: $0.1) },
                    body: Array(body.utf8), client: "127.0.0.1"),
                routes: { $0.path == "/mine" ? WHEPResponse(status: 200, headers: [], body: "mine") : nil })
        }
        let auth = [("Authorization", "Bearer 0123456789abcdef0123")]
        #expect(req("GET", "/").status == 200)
        // An embedding app's 401 names neither camcap nor its URL (#38): the realm is the policy's, "WHEP" by default.
        let refused = req("GET", "/stats")
        let challenge = refused.headers.first { $0.name == "WWW-Authenticate" }?.value
        #expect(refused.status == 401 && challenge == "Bearer realm=\"WHEP\"" && !refused.body.contains("camcap"), "\(refused)")
        #expect(req("GET", "/mine").status == 401, "the app's routes are behind the same token")
        #expect(req("GET", "/mine", auth).body == "mine")
        #expect(req("GET", "/metrics", auth).status == 404, "no registry given")
        let offer = req("POST", "/whep", auth + [("Content-Type", "application/sdp")], body: "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n")
        #expect(offer.status == 400 || offer.status == 406, "\(offer.status) \(offer.body)")
        let foreign = endpoint.handle(WHEPRequest(method: "GET", uri: "/", headers: [("Host", "evil.example")], client: "127.0.0.1"))
        #expect(foreign.status == 403)
        var named = try ServerPolicy(token: "0123456789abcdef0123", hostNames: ["127.0.0.1"])
        named.realm = "Porch \"cam\"\n"
        named.tokenHint = "see the app's settings"
        let porch = WHEPEndpoint(hub: hub, policy: named).handle(
            WHEPRequest(method: "GET", uri: "/stats", headers: [("Host", "127.0.0.1")], client: "127.0.0.1"))
        #expect(porch.headers.contains { $0.name == "WWW-Authenticate" && $0.value == "Bearer realm=\"Porch cam\"" }, "\(porch)")
        #expect(porch.body == "this server needs Authorization: Bearer TOKEN (see the app's settings)\n")
        #expect(endpoint.refused.unauthorized == 2 && endpoint.refused.foreignHost == 1 && endpoint.refused.badOffer == 1, "\(endpoint.refused)")
    }
}
