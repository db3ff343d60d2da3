import Foundation
import Testing
import TestSupport
import WebRTC
import WHEPServer

/// The library without the CLI: the examples an app starts from (the WHEP endpoint driven directly is in
/// WHEPServerTests' EndpointTests).
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
}
