import CapturePipeline
import FixtureCameras
import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoCaptureCommons
import RTSPServer

/// `RTSPService`, the set-up `camcap rtsp` runs, in process: started on a free loopback port (the camera never
/// runs), its URL and announcement, a request answered, its refusals, its stop.
@Suite struct RTSPServiceTests {
    /// A session on the fixture webcam, never run.
    static func session() throws -> CaptureSession {
        var c = CaptureSession.Configuration()
        (c.device, c.size, c.frames) = ("fixture:uvc-webcam", FrameSize(width: 640, height: 360), 1)
        c.providers = [FixtureCameraProvider()]
        return try CaptureSession(c)
    }

    @Test func aServiceOnAFreePortAnnouncesItsURLAndStops() async throws {
        let c = RTSPService.Configuration(host: "127.0.0.1", port: 0)
        try c.validate()
        let service = try await RTSPService.start(session: try Self.session(), configuration: c)
        #expect(service.port > 0)
        #expect(service.url == "rtsp://127.0.0.1:\(service.port)/camera")
        let ports = service.hub.udpPorts
        #expect(service.announcement == "serving \(service.url)  (UDP media ports \(ports.rtp)-\(ports.rtcp); no authentication)")
        #expect(ports.rtcp == ports.rtp + 1)
        let client = TestTCP(port: service.port)
        client.send("DESCRIBE \(service.url) RTSP/1.0\r\nCSeq: 2\r\nAccept: application/sdp\r\n\r\n")
        let answer = client.read { $0.contains("a=control") }
        #expect(answer.hasPrefix("RTSP/1.0 200") && answer.contains("H264/90000"), "the SDP: \(answer)")
        await service.stop()
        let late = TestTCP(port: service.port)
        late.send("OPTIONS \(service.url) RTSP/1.0\r\nCSeq: 1\r\n\r\n")
        #expect(late.read().isEmpty, "still listening after stop()")
    }

    @Test func anAuthenticatorIsAnnouncedAndAsked() async throws {
        var c = RTSPService.Configuration(host: "127.0.0.1", port: 0)
        c.hub.path = "/porch"
        c.hub.authenticator = DigestAuthenticator(user: "alice", password: "secret")
        let service = try await RTSPService.start(session: try Self.session(), configuration: c)
        #expect(service.url.hasSuffix("/porch"))
        #expect(service.announcement.hasSuffix("; Digest authentication, user alice)"), "\(service.announcement)")
        let client = TestTCP(port: service.port)
        client.send("DESCRIBE \(service.url) RTSP/1.0\r\nCSeq: 2\r\n\r\n")
        #expect(client.read { $0.contains("\r\n\r\n") }.hasPrefix("RTSP/1.0 401"), "\(client.text)")
        await service.stop()
    }

    @Test func aBadConfigurationIsRefusedNamingTheSetting() {
        func refusal(_ change: (inout RTSPService.Configuration) -> Void) -> String? {
            refusedSetting(RTSPService.Configuration(), change) { try $0.validate() }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.host = "camera.local" } == "host")
        #expect(refusal { $0.port = 65_536 } == "port")
        #expect(refusal { $0.hub.path = "camera" } == "path")
        #expect(refusal { $0.hub.maxSessions = 0 } == "maxSessions")
        #expect(refusal { $0.encoder.bitrateKbps = 5 } == "bitrateKbps")
        #expect(refusal { $0.hub.authenticator = DigestAuthenticator(user: "a", password: "b", nonceLifetimeNs: 0) } == "nonceLifetimeNs")
        #expect(refusal { $0.recording = RecordingOutput.Configuration(path: "") } == "the output path is empty")
    }

    @Test func aTakenPortFailsBeforeTheCameraStarts() async throws {
        let first = try await RTSPService.start(session: try Self.session(), configuration: RTSPService.Configuration(port: 0))
        await #expect(throws: RTSPError.self) {
            _ = try await RTSPService.start(session: try Self.session(), configuration: RTSPService.Configuration(port: first.port))
        }
        await first.stop()
    }
}
