import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing
import FixtureCameras
import CapturePipeline

// Negotiation quirks (#49): each fixture in Fixtures/quirks imitates a real report (named in the file), and the
// session survives it with a documented reaction (docs/cameras.md, "Quirks negotiation survives").

/// Counts the pictures it gets and keeps the last one's size.
private final class Sizes: PictureStage, @unchecked Sendable {
    // @unchecked: touched by the session's loop only, read by the test after the run.
    var count = 0
    var sizes: Set<FrameSize> = []
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        count += 1
        sizes.insert(FrameSize(width: picture.width, height: picture.height))
    }
    func end() throws {}
}

private func quirky(_ name: String, size: FrameSize, fps: Fraction = 30, fast: Bool = true, frames: Int? = 10, seconds: Double? = nil) throws
    -> CaptureSession
{
    var config = CaptureSession.Configuration()
    (config.device, config.size, config.fpsLimit, config.fast) = (fixturesRoot + "/quirks/\(name).txt", size, fps, fast)
    (config.frames, config.durationNs) = (frames, seconds.map { Int64($0 * 1e9) })
    config.providers = [FixtureCameraProvider(options: .init(pacing: fast ? .asFastAsConsumed : .realTime))]
    return try CaptureSession(config)
}

@Test func aSizeTheDriverRoundsUpIsCroppedBackAndSaid() async throws {
    let s = try quirky("macroblock-rounding", size: FrameSize(width: 1920, height: 1080))
    let stage = Sizes()
    let report = try await s.run(stages: [stage])
    #expect(report.failure == nil && stage.count == 10, "\(report.summaryText)")
    #expect(s.applied.size == FrameSize(width: 1920, height: 1088) && s.roundedSize == FrameSize(width: 1920, height: 1088))
    #expect(stage.sizes == [FrameSize(width: 1920, height: 1080)], "the pictures are the size asked: \(stage.sizes)")
    #expect(
        report.summaryText.contains("the driver gave 1920x1088 for 1920x1080 (VIDIOC_S_FMT rounded it up): pictures cropped back to 1920x1080"),
        "\(report.summaryText)")
    // A size the driver keeps is not cropped, nor said.
    let plain = try quirky("macroblock-rounding", size: FrameSize(width: 1280, height: 720))
    let r2 = try await plain.run(stages: [Sizes()])
    #expect(plain.roundedSize == nil && !r2.summaryText.contains("rounded"), "\(r2.summaryText)")
}

@Test func aRateTheCameraIgnoresIsSaid() async throws {
    let s = try quirky("fixed-rate", size: FrameSize(width: 640, height: 480), fps: 5)
    let report = try await s.run(stages: [Sizes()])
    #expect(report.failure == nil, "\(report.summaryText)")
    #expect(s.selection.fps == Fraction(5) && s.applied.fps == Fraction(30))
    #expect(report.summaryText.contains("asked 5.00 fps, the camera applied 30.00 fps (VIDIOC_S_PARM)"), "\(report.summaryText)")
}

@Test func aListedRateTheCameraDoesNotKeepIsMeasuredAndSaid() async throws {
    // Real time, 2.5 s of frame timestamps: the camera applies 30 and sends 15.
    let s = try quirky("dim-room-webcam", size: FrameSize(width: 1280, height: 720), fast: false, frames: nil, seconds: 2.5)
    let stage = Sizes()
    let report = try await s.run(stages: [stage])
    #expect(report.failure == nil, "\(report.summaryText)")
    #expect(s.applied.fps == Fraction(30) && (36...39).contains(stage.count), "\(stage.count) pictures in 2.5 s at 15 fps")
    #expect(report.summaryText.contains("the camera delivered 15.00 fps of the 30.00 it applied"), "\(report.summaryText)")
    // A camera that keeps its rate says nothing of it.
    let good = try quirky("dim-room-webcam", size: FrameSize(width: 640, height: 480), fast: false, frames: nil, seconds: 2.2)
    let r2 = try await good.run(stages: [Sizes()])
    #expect(!r2.summaryText.contains("delivered"), "\(r2.summaryText)")
}

@Test func aListedModeThatFailsAtStreamOnFallsBackToTheNextMode() async throws {
    let s = try quirky("listed-never-sent", size: FrameSize(width: 1920, height: 1080), fps: 5)
    #expect(s.selection.pixelFormat == .yuyv, "negotiation picks the listed YUYV at 5 fps: \(s.selection)")
    let stream = s.events
    let events = Task {
        var out: [String] = []
        for await e in stream { if case .fallback = e { out.append("\(e)") } }
        return out
    }
    let stage = Sizes()
    let report = try await s.run(stages: [stage])
    let fallbacks = await events.value
    #expect(report.failure == nil && stage.count == 10, "\(report.summaryText)")
    #expect(s.selection.pixelFormat == .mjpeg && s.selection.size == FrameSize(width: 1920, height: 1080), "\(s.selection)")
    #expect(fallbacks.count == 1 && fallbacks.first?.contains("a listed mode the camera never sends") == true, "\(fallbacks)")
}

@Test func quirksParseOrNameWhatIsWrong() throws {
    #expect(try FixtureQuirk(parsing: "rate@MJPG:1280x720=15") == .deliversRate(.mjpeg, FrameSize(width: 1280, height: 720), Fraction(15)))
    #expect(try FixtureQuirk(parsing: " round@1920x1080=1920x1088 ").description == "round@1920x1080=1920x1088")
    #expect(try FixtureQuirk(parsing: "ignores-frame-interval") == .ignoresFrameInterval)
    #expect(try FixtureQuirk(parsing: "streamon-fails@YUYV:1920x1080") == .failsAtStreamOn(.yuyv, FrameSize(width: 1920, height: 1080)))
    for bad in ["rate@MJPG:1280x720=0", "rate@MJPG=15", "round@1920x1080", "streamon-fails@YUYV", "wobble", "rate@MJPG:1280x720=nan"] {
        let e = #expect(throws: CaptureError.self) { try FixtureQuirk(parsing: bad) }
        #expect(e?.message.contains("fixture quirk \"\(bad)\"") == true, "\(String(describing: e?.message))")
    }
    // In a listing: a bad quirk names the file and the line.
    let text = "Quirk: wobble\nioctl: VIDIOC_ENUM_FMT\n\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\n"
    let e = #expect(throws: FixtureParseError.self) { try CameraDescription.parse(text, file: "cam.txt") }
    #expect(e.map { "\($0)" }?.contains("cam.txt:1") == true, "\(String(describing: e))")
    let d = try CameraDescription.parse(try String(contentsOfFile: fixturesRoot + "/quirks/fixed-rate.txt", encoding: .utf8), file: "fixed-rate.txt")
    #expect(d.quirks == [.ignoresFrameInterval] && d.name == "Fixed Rate Camera")
}
