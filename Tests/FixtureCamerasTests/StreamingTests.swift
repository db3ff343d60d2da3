import Testing
import VideoCapture
import FixtureCameras

/// Fixture cameras through the public capture API.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct StreamingTests {
    @Test("fixture cameras stream real frames in the negotiated format", arguments: ["YUYV", "NV12", "MJPG", "RGB3", "AR24", "GREY", "NV24"])
    func fixtureFramesHaveTheRightShape(_ code: String) async throws {
        let capturer = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(maxPendingFrames: 2, alwaysDiscardsLateFrames: false))
        let device = try capturer.device(code == "MJPG" ? "fixture:uvc-webcam" : "fixture:vivid")
        let pf = PixelFormat(fourcc: code)!
        let size = code == "MJPG" ? FrameSize(width: 640, height: 480) : FrameSize(width: 640, height: 360)
        let format = try #require(try capturer.supportedFormats(for: device).first { $0.pixelFormat == pf && $0.size == .discrete(size) })
        let stream = capturer.frames()
        let applied = try await capturer.startCapture(device: device, format: format, size: size, fps: Fraction(30))
        #expect(applied.pixelFormat == pf)
        var frame: VideoFrame?
        for try await f in stream {
            frame = f
            break
        }
        try await capturer.stopCapture()
        let buf = try #require(frame?.buffer)
        #expect(buf.pixelFormat == pf && buf.size == size)
        if pf == .mjpeg {
            #expect(buf.bytes[0] == 0xFF && buf.bytes[1] == 0xD8, "a real JPEG (SOI marker)")
            #expect(buf.bytes[buf.bytesUsed - 2] == 0xFF && buf.bytes[buf.bytesUsed - 1] == 0xD9)
        } else {
            #expect(buf.bytesUsed == pf.frameSize(width: size.width, height: size.height))
        }
    }
}
