import CapturePipeline
import FixtureCameras
import NIOPosix
import Testing
import TestSupport
import VideoCapture
import VideoCaptureCommons
import WebRTC
import WHEPServer

/// `WHEPService`, the set-up `camcap serve` runs, in process: started on a free loopback port (the camera never
/// runs), its URL and announcement, its policy, an HTTP exchange, its refusals, its stop.
@Suite struct WHEPServiceTests {
    static let token = "0123456789abcdef0123"

    /// A session on the fixture webcam, never run.
    static func session() throws -> CaptureSession {
        var c = CaptureSession.Configuration()
        (c.device, c.size, c.frames) = ("fixture:uvc-webcam", FrameSize(width: 1280, height: 720), 1)
        c.providers = [FixtureCameraProvider()]
        return try CaptureSession(c)
    }

    @Test func aServiceOnAFreePortServesItsURLAndStops() async throws {
        var c = WHEPService.Configuration(host: "127.0.0.1", port: 0, policy: try ServerPolicy(token: Self.token))
        c.tokenSource = "the test"
        // The library suites run in parallel on 2 cores: a task can wait its turn for longer than the default 10 s
        // a connection gets to send its request (one run here saw "I/O on closed channel" after 32 s).
        c.policy.requestTimeoutNs = 120_000_000_000
        try c.validate()
        let service = try await WHEPService.start(session: try Self.session(), configuration: c, metrics: { "# metrics\n" })
        #expect(service.port > 0)
        #expect(service.url == "http://127.0.0.1:\(service.port)/")
        let lines = service.announcement.split(separator: "\n").map(String.init)
        #expect(
            lines.first
                == "serving http://127.0.0.1:\(service.port)/#token=\(Self.token)  (WHEP: http://127.0.0.1:\(service.port)/whep, Authorization: Bearer TOKEN; token: the test)",
            "\(lines)")
        #expect(lines.contains { $0.hasPrefix("tiers: 1280x720") }, "three tiers of 1280x720: \(lines)")
        #expect(service.policy.hostNames == ["127.0.0.1", "localhost"], "the listen address and localhost: \(service.policy.hostNames)")
        #expect(!service.policy.tls && service.policy.maxConnections <= 256)
        #expect(service.hub.viewerCount == 0)

        let client = try await TestClient.connect(port: service.port, group: MultiThreadedEventLoopGroup.singleton)
        try await client.send("GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try await client.received("HTTP/1.1 401"), "the token is asked for: \(client.text)")
        let page = try await TestClient.connect(port: service.port, group: MultiThreadedEventLoopGroup.singleton)
        try await page.send("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
        #expect(try await page.received("# metrics"), "the metrics given: \(page.text)")

        await service.stop()
        let again = try? await TestClient.connect(port: service.port, group: MultiThreadedEventLoopGroup.singleton)
        #expect(again == nil, "still listening after stop()")
    }

    @Test func noTokenAndASelfSignedCertificateAreAnnounced() async throws {
        let c = WHEPService.Configuration(host: "127.0.0.1", port: 0, policy: try ServerPolicy(token: nil), tls: .selfSigned)
        let service = try await WHEPService.start(session: try Self.session(), configuration: c)
        #expect(service.url == "https://127.0.0.1:\(service.port)/" && service.policy.tls)
        let lines = service.announcement.split(separator: "\n")
        #expect(lines.first?.hasSuffix("(WHEP: https://127.0.0.1:\(service.port)/whep, no authentication)") == true, "\(lines)")
        #expect(lines.contains { $0.contains("self-signed") }, "the certificate's fingerprints: \(lines)")
        await service.stop()
    }

    @Test func aBadConfigurationIsRefusedNamingTheSetting() throws {
        let policy = try ServerPolicy(token: Self.token)
        func refusal(_ change: (inout WHEPService.Configuration) -> Void) -> String? {
            refusedSetting(WHEPService.Configuration(policy: policy), change) { try $0.validate() }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.host = "camera.local" } == "host")
        #expect(refusal { $0.port = 70_000 } == "port")
        #expect(refusal { $0.srtpProfiles = [] } == "srtpProfiles")
        #expect(refusal { $0.peer.dropRate = 2 } == "dropRate")
        #expect(refusal { $0.limits.maxViewers = 0 } == "maxViewers")
        #expect(refusal { $0.policy.maxConnections = 0 } == "maxConnections")
        #expect(refusal { $0.broadcast.tiers = 4 } == "tiers")
        #expect(refusal { $0.broadcast.encoder.bitrateKbps = 0 } == "bitrateKbps")
    }

    @Test func aTakenPortFailsBeforeTheCameraStarts() async throws {
        let first = try await WHEPService.start(
            session: try Self.session(), configuration: WHEPService.Configuration(port: 0, policy: try ServerPolicy(token: nil)))
        let taken = WHEPService.Configuration(port: first.port, policy: try ServerPolicy(token: nil))
        await #expect(throws: ServerError.self) { _ = try await WHEPService.start(session: try Self.session(), configuration: taken) }
        await first.stop()
    }
}
