import Testing
import CapturePipeline
import FixtureCameras
import VideoCapture
import WebRTC
import WHIPClient

/// The publisher's settings and its token, checked before anything is sent.
@Suite struct ConfigurationValidationTests {
    @Test func timeoutsNameTheSettingAndRange() throws {
        var c = WHIPOutput.Configuration()
        try c.validate()
        c.publisher.connectTimeoutNs = 200_000_000_000
        #expect {
            try c.validate()
        } throws: { error in
            let e = error as? WebRTCError
            return e?.code == .invalidConfiguration && e?.setting == "connectTimeoutNs"
                && e?.message == "connectTimeoutNs must be 1.0...120.0 seconds, got 200.0"
        }
        c.publisher.connectTimeoutNs = 10_000_000_000
        c.publisher.consentTimeoutNs = 0
        #expect {
            try c.validate()
        } throws: { error in
            (error as? WebRTCError)?.setting == "consentTimeoutNs"
        }
    }

    @Test func consentIsCheckedOftenEnoughForItsTimeout() {
        var c = WebRTCPublisher.Configuration()
        c.setConsentTimeout(8_000_000_000)
        #expect(c.consentTimeoutNs == 8_000_000_000 && c.consentIntervalNs == 2_000_000_000)
        c.setConsentTimeout(60_000_000_000)
        #expect(c.consentTimeoutNs == 60_000_000_000 && c.consentIntervalNs == 5_000_000_000)
    }

    @Test func theTokenIsGivenReadOrFallenBackTo() throws {
        #expect(try WHIPClient.token(given: nil, file: nil, fallback: nil) == nil)
        #expect(try WHIPClient.token(given: "T0K", file: nil, fallback: "other") == "T0K")
        #expect(try WHIPClient.token(given: nil, file: nil, fallback: "env") == "env")
        for bad in ["", "two words", String(repeating: "x", count: 1025)] {
            #expect {
                try WHIPClient.token(given: bad, file: nil, fallback: nil)
            } throws: { error in
                (error as? WHIPError)?.code == .invalidConfiguration && (error as? WHIPError)?.message.contains("1...1024 characters") == true
            }
        }
        #expect {
            try WHIPClient.token(given: nil, file: "/nonexistent/token", fallback: nil)
        } throws: { error in
            (error as? WHIPError)?.message.contains("cannot read the token file /nonexistent/token") == true
        }
    }

    /// The stage for a session: an encode (pixels upright unless the rotation stays metadata), or the camera's
    /// own H.264 passed through.
    @Test func theStageFollowsTheCamerasFormat() throws {
        for (device, formats, encodes) in [("fixture:vivid", [PixelFormat](), true), ("fixture:h264-webcam", [.h264], false)] {
            var config = CaptureSession.Configuration()
            (config.device, config.size, config.pixelFormats, config.frames) = (device, FrameSize(width: 640, height: 480), formats, 1)
            config.providers = [FixtureCameraProvider()]
            let session = try CaptureSession(config)
            let output = try WHIPOutput(client: try WHIPClient(endpoint: "http://127.0.0.1:9/whip", token: nil))
            let settings = try EncodeStage.Configuration().settings(for: session.selection)
            let stage = output.stage(for: session, settings: settings, keyIntervalSeconds: 2)
            #expect((stage is EncodeStage) == encodes && (stage is PassthroughStage) == !encodes, "\(device)")
            #expect(session.sourceOptions.applyRotation == encodes, "\(device)")
        }
    }
}

/// A camera that delivers H.264 is published as it comes: nothing is sent before its first SPS (no server is
/// reached here), one layer however simulcast was asked for, and the announcement says both.
@Test func aCamerasOwnH264IsPublishedOnceItsSPSIsKnown() throws {
    var config = CaptureSession.Configuration()
    (config.device, config.pixelFormats, config.frames) = ("fixture:h264-webcam", [.h264], 1)
    config.providers = [FixtureCameraProvider()]
    let session = try CaptureSession(config)
    let client = try WHIPClient(endpoint: "http://127.0.0.1:9/whip", token: nil)
    let publication = try WHIPPublication.start(session: session, client: client, simulcast: "--simulcast")
    #expect(publication.stage is PassthroughStage && publication.tiers.isEmpty && publication.output.resource == nil)
    #expect(publication.announcement.hasPrefix("publishing to http://127.0.0.1:9/whip: passing the camera's own H.264 through"))
    #expect(publication.announcement.hasSuffix("; --simulcast: one layer (the camera's H.264 is not re-encoded into tiers)"))
}
