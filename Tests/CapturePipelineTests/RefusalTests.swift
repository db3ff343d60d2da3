// Issue 54: an app's mistakes are refused by name, before the camera starts. Each test calls the API the way an
// app does (a configuration, a session, stages, `run`) and checks the typed error and its message.
import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing
import FixtureCameras
import CapturePipeline
import H264

/// A session of a built-in fixture camera at 320x240, as fast as consumed.
func fixtureSession(_ device: String, pixelFormats: [PixelFormat] = [], frames: Int = 5) throws -> CaptureSession {
    var c = CaptureSession.Configuration(providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))])
    (c.device, c.size, c.pixelFormats, c.frames, c.fast) = (device, FrameSize(width: 320, height: 240), pixelFormats, frames, true)
    return try CaptureSession(c)
}

/// What `CaptureSession(configuration)` throws for a configuration changed by `change` (nil: it threw nothing).
func sessionRefusal(_ change: (inout CaptureSession.Configuration) -> Void) -> Error? {
    var c = CaptureSession.Configuration(providers: [FixtureCameraProvider()])
    (c.device, c.size, c.frames) = ("fixture:uvc-webcam", FrameSize(width: 320, height: 240), 5)
    change(&c)
    do {
        _ = try CaptureSession(c)
        return nil
    } catch { return error }
}

@Suite struct RefusalTests {
    /// `frames` of 0 or below used to run one frame: the session's initialiser validates its configuration.
    @Test(arguments: [-5, 0]) func aFrameCountBelowOneIsRefused(_ frames: Int) {
        let e = sessionRefusal { $0.frames = frames } as? PipelineError
        #expect(e?.code == .invalidConfiguration && e?.setting == "frames")
        #expect(e?.message == "frames must be 1...100000000, got \(frames)", "\(String(describing: e))")
    }

    /// A negative `durationNs` used to return at once with no frame.
    @Test func aNegativeDurationIsRefused() {
        let e = sessionRefusal { ($0.frames, $0.durationNs) = (nil, -1) } as? PipelineError
        #expect(e?.code == .invalidConfiguration && e?.setting == "durationNs")
        #expect(e?.message.hasPrefix("durationNs must be above 0 and at most 2678400 seconds") == true, "\(String(describing: e))")
    }

    /// A frame-rate limit above 1000 is refused by every negotiation entry point, as by the text parser: the
    /// capturer's `selectFormat` and `startCapture` (the camera does not start) and the session.
    @Test func aFrameRateLimitAbove1000IsRefusedByEveryEntryPoint() async throws {
        let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
        let camera = try capturer.device("fixture:uvc-webcam")
        let size = FrameSize(width: 640, height: 480), expected = "frame-rate limit must be above 0 and at most 1000, got 5000"
        let selected = #expect(throws: CaptureError.self) {
            _ = try capturer.selectFormat(for: camera, targetSize: size, fpsLimit: Fraction(5000))
        }
        #expect(selected?.code == .invalidArgument && selected?.message == expected, "\(String(describing: selected))")
        let intLimit = #expect(throws: CaptureError.self) { _ = try capturer.selectFormat(for: camera, targetSize: size, fpsLimit: 5000) }
        #expect(intLimit?.message == expected)
        await #expect(throws: CaptureError(.invalidArgument, expected, device: "fixture:uvc-webcam")) {
            _ = try await capturer.startCapture(device: camera, targetSize: size, fpsLimit: Fraction(5000))
        }
        #expect(!capturer.isRunning)
        let session = sessionRefusal { $0.fpsLimit = Fraction(5000) } as? PipelineError
        #expect(session?.setting == "fpsLimit" && session?.message == "fpsLimit must be above 0 and at most 1000, got 5000")
        // The text parser says the same, quoting the text.
        #expect(throws: PipelineError.self) { _ = try CaptureSession.Configuration.fpsLimit(parsing: "5000") }
        #expect(Fraction(1000) == FormatSelector.maxFpsLimit && FormatSelector.problem(withFpsLimit: 1000) == nil)
    }

    /// Bayer asked of a camera that offers it: the refusal says it cannot be converted, not that the camera lacks it.
    @Test func aFormatThatCannotBeConvertedSaysSo() throws {
        let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
        let camera = try capturer.device("fixture:continuous")
        let bayer = try #require(PixelFormat(fourcc: "BA81"))
        #expect(try capturer.supportedFormats(for: camera).contains { $0.pixelFormat == bayer }, "the camera offers BA81")
        let e = #expect(throws: CaptureError.self) {
            _ = try capturer.selectFormat(for: camera, targetSize: FrameSize(width: 640, height: 480), fpsLimit: Fraction(30), pixelFormats: [bayer])
        }
        #expect(e?.code == .invalidArgument, "\(String(describing: e))")
        #expect(e?.message.contains("BA81 (8-bit Bayer BGBG/GRGR) cannot be converted to I420") == true, "\(String(describing: e))")
        #expect(e?.message.contains("offers none") == false)
        let session = sessionRefusal { ($0.device, $0.pixelFormats) = ("fixture:continuous", [bayer]) } as? PipelineError
        #expect(session?.setting == "pixelFormats" && session?.message.contains("BA81 (8-bit Bayer BGBG/GRGR) cannot be converted to I420") == true)
    }

    /// An `EncodeStage` on a camera's own H.264 used to report "encoded 0": `run` refuses it before the camera
    /// starts, naming the stage and the format, and its file is not left behind.
    @Test func anEncodeStageRefusesACamerasOwnH264() async throws {
        let session = try fixtureSession("fixture:h264-webcam", pixelFormats: [.h264])
        let path = work + "/refused-encode.mp4"
        let output = try RecordingOutput(RecordingOutput.Configuration(path: path))
        let encode = EncodeStage(
            settings: EncodeStage.baseSettings(for: session.selection, bitrateKbps: 500, maxBitrateKbps: nil), keyIntervalSeconds: 2,
            outputs: [output])
        let e = await #expect(throws: PipelineError.self) { _ = try await session.run(stages: [encode]) }
        #expect(e?.code == .invalidConfiguration, "\(String(describing: e))")
        #expect(
            e?.message.hasPrefix("EncodeStage takes pictures, and fixture:h264-webcam delivers its own H.264 (H264)") == true,
            "\(String(describing: e))")
        #expect(session.applied.size == FrameSize(width: 0, height: 0), "the camera never started")
        #expect(!FileManager.default.fileExists(atPath: path), "nothing is left behind")
    }

    /// A `PassthroughStage` on an MJPG camera used to report "passed through 0".
    @Test func aPassthroughStageRefusesPictures() async throws {
        let session = try fixtureSession("fixture:uvc-webcam", pixelFormats: [.mjpeg])
        let sink = try RecordingOutput(RecordingOutput.Configuration(path: work + "/refused-passthrough.h264"))
        let e = await #expect(throws: PipelineError.self) { _ = try await session.run(stages: [PassthroughStage(outputs: [sink])]) }
        #expect(e?.code == .invalidConfiguration, "\(String(describing: e))")
        #expect(
            e?.message.hasPrefix("PassthroughStage takes a camera's own H.264, and fixture:uvc-webcam delivers pictures (MJPG)") == true,
            "\(String(describing: e))")
        #expect(session.applied.size == FrameSize(width: 0, height: 0), "the camera never started")
    }

    /// A stage of an app's own that takes pictures gets none from a camera's own H.264: refused the same way.
    @Test func anAppsPictureStageRefusesACamerasOwnH264() async throws {
        let session = try fixtureSession("fixture:h264-webcam", pixelFormats: [.h264])
        let e = await #expect(throws: PipelineError.self) { _ = try await session.run(stages: [PicturesOnly()]) }
        #expect(
            e?.message.hasPrefix("PicturesOnly takes pictures, and fixture:h264-webcam delivers its own H.264") == true, "\(String(describing: e))")
    }

    /// An unknown FourCC is no pixel format (`PixelFormat(fourcc:)` is nil), and a code made from its raw value is
    /// refused by negotiation by name; the formats the package knows still parse.
    @Test func anUnknownFourCCIsRefused() {
        #expect(PixelFormat(fourcc: "ZZZZ") == nil)
        #expect(PixelFormat(fourcc: "YUYV") == .yuyv && PixelFormat(fourcc: "BA81")?.isKnown == true && PixelFormat(fourcc: "Y16-BE") != nil)
        let zzzz = PixelFormat(rawValue: 0x5a5a_5a5a)
        #expect(zzzz.fourcc == "ZZZZ")
        let e = sessionRefusal { $0.pixelFormats = [zzzz] } as? PipelineError
        #expect(e?.setting == "pixelFormats" && e?.message.hasPrefix("pixelFormats: ZZZZ is not a pixel format this package knows") == true)
        let parsed = #expect(throws: PipelineError.self) { _ = try CaptureSession.Configuration.pixelFormats(parsing: "ZZZZ") }
        #expect(parsed?.message.contains("\"ZZZZ\" is not a FourCC this package knows") == true, "\(String(describing: parsed))")
    }

    /// A fixture file that is not there is named, not "unknown device".
    @Test func aMissingFixtureFileIsNamed() {
        let path = work + "/no-such-camera.json"
        let e = sessionRefusal { $0.device = path } as? CaptureError
        #expect(e?.code == .unknownDevice && e?.device == path, "\(String(describing: e))")
        #expect(e?.message.hasPrefix("no fixture file at \(path): the file does not exist") == true, "\(String(describing: e))")
    }

    /// A session (or capturer) without providers says that none is configured, not that no camera was found.
    @Test func noProviderIsNamedAsSuch() {
        for device in [nil, "fixture:uvc-webcam"] {
            var c = CaptureSession.Configuration()
            (c.device, c.frames) = (device, 5)
            let e = #expect(throws: CaptureError.self) { _ = try CaptureSession(c) }
            #expect(e?.code == .unknownDevice && e?.message.hasPrefix("no camera provider is configured") == true, "\(String(describing: e))")
            #expect(e?.message.contains("no camera found") == false)
        }
        let e = #expect(throws: CaptureError.self) { _ = try CameraVideoCapturer(providers: []).device("/dev/video0") }
        #expect(e?.message.hasPrefix("no camera provider is configured, so \"/dev/video0\" cannot be opened") == true, "\(String(describing: e))")
    }

    /// A hand-built `RecordingOutput` with 1 s segments inside an `EncodeStage` with a 2 s key-frame interval: the
    /// stage connects the output to its encoder's key-frame control, so every segment is 1 s long (ffprobe).
    @Test func handBuiltSegmentsFollowSegmentSecondsWhateverTheKeyInterval() async throws {
        let session = try fixtureSession("fixture:uvc-webcam", frames: 150) // 5 s at 30 fps
        let dir = work + "/hand-built-segments"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var config = RecordingOutput.Configuration(path: dir + "/seg.mp4")
        config.segmentSeconds = 1
        let output = try RecordingOutput(config)
        let encode = EncodeStage(
            settings: EncodeStage.baseSettings(for: session.selection, bitrateKbps: 300, maxBitrateKbps: nil), keyIntervalSeconds: 2,
            outputs: [output])
        let report = try await session.run(stages: [encode])
        #expect(report.failure == nil && report.processed == 150, "\(report.summaryText)")
        #expect(session.selection.fps == Fraction(30))
        let files = output.segments.map(\.path) // the last one closed by the end of the run
        #expect(files.count == 5, "\(files)")
        for (i, file) in files.enumerated() {
            let r = try sh(
                "ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames:format=duration", "-of", "default=nw=1", file])
            let fields = Dictionary(
                r.out.split(separator: "\n").compactMap { line -> (String, String)? in
                    let kv = line.split(separator: "=", maxSplits: 1)
                    return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
                }, uniquingKeysWith: { a, _ in a })
            let frames = Int(fields["nb_read_frames"] ?? "") ?? -1, seconds = Double(fields["duration"] ?? "") ?? -1
            #expect(frames == 30, "\(file): \(frames) frames, \(r.out) \(r.err)")
            #expect(abs(seconds - 1) < 0.05, "segment \(i) lasts \(seconds) s, not 1 s (\(file))")
        }
    }
}

/// A stage of an app's own that takes pictures only.
private final class PicturesOnly: PictureStage {
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {}
    func end() throws {}
}
