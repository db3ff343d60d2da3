import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing
import FixtureCameras
import CapturePipeline

/// The capture session as a library runs it (no process): every picture comes from the `VideoSource`.
@Suite struct PipelineTests {
    /// A camera mounted at 90° (the fixture iPhone): the source applies the rotation and the encoder is made for
    /// the first picture it gets, so it is never rebuilt at frame 1, and ffprobe sees every frame upright.
    @Test func aRotatedCameraIsEncodedUprightFromTheFirstFrame() async throws {
        var config = CaptureSession.Configuration()
        config.device = "fixture:iphone"
        config.size = FrameSize(width: 640, height: 480)
        config.frames = 30
        config.fast = true
        config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
        let session = try CaptureSession(config)
        session.sourceOptions = VideoSource.Options(applyRotation: true)
        let path = work + "/rotated.h264"
        let settings = EncodeStage.baseSettings(for: session.selection, bitrateKbps: 800, maxBitrateKbps: nil)
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: 2, outputs: [try AnnexBFileOutput(path: path)])
        let report = try await session.run(stages: [encode])
        #expect(report.failure == nil && report.processed == 30, "\(report.summaryText)")
        #expect(!report.summaryText.contains("reconfigured"), "\(report.summaryText)")
        let camera = session.applied.size
        #expect(camera.width > camera.height, "the fixture camera is landscape: \(camera)")
        let r = try sh("ffprobe", ["-v", "error", "-f", "h264", "-show_entries", "frame=width,height", "-of", "csv=p=0", path])
        let sizes = r.out.split(separator: "\n").map(String.init)
        #expect(sizes.count == 30 && Set(sizes) == ["\(camera.height & ~1),\(camera.width & ~1)"], "\(Set(sizes)) \(r.err)")
        #expect(report.summaryText.contains("encoded at \(camera.height & ~1)x\(camera.width & ~1)"), "\(report.summaryText)")
    }
}

/// The library never stands in a test pattern for a missing camera (#35): a session that names no camera on a
/// machine without one fails, naming the way out.
@Test(.enabled(if: !FileManager.default.fileExists(atPath: "/dev/video0"), "needs a machine without cameras"))
func aSessionWithoutACameraFailsInsteadOfFakingOne() throws {
    var config = CaptureSession.Configuration()
    config.providers = [FixtureCameraProvider()] // the built-in cameras are there, and none is a real one
    config.frames = 3
    let e = #expect(throws: CaptureError.self) { _ = try CaptureSession(config) }
    #expect(e?.code == .unknownDevice && e?.message.contains("no camera found") == true && e?.message.contains("fixture:uvc-webcam") == true)
}

/// A stage that wants no picture until the capture has gone on unwatched for a while, then counts pictures.
private final class LateViewerStage: PictureStage, @unchecked Sendable {
    // @unchecked: touched by the session's loop only (one task), read by the test after the run.
    var pictures = 0
    var unwatchedFrames: () -> Int = { 0 }
    let wantAfterUnwatched: Int
    init(wantAfterUnwatched: Int) { self.wantAfterUnwatched = wantAfterUnwatched }
    private var wanted = false
    var wantsPictures: Bool {
        if !wanted && unwatchedFrames() >= wantAfterUnwatched { wanted = true }
        return wanted
    }
    /// Pictures taken since it wanted them (the first frame reaches every stage before the session knows).
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws { if wanted { pictures += 1 } }
    func end() throws {}
}

/// Nobody wants a picture (#38: `serve` without viewers decoded MJPEG at 79–95 ms of CPU a second until the idle
/// release): the camera's frames are dequeued and nothing more — no decode, no conversion — until a stage wants
/// pictures again, and then they come from the next frame.
@Test func framesNobodyWantsAreNotConverted() async throws {
    var config = CaptureSession.Configuration()
    config.device = "fixture:uvc-webcam" // MJPEG: every conversion is a decode
    config.size = FrameSize(width: 640, height: 480)
    config.fast = true
    config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
    config.idleReleaseNs = 600_000_000_000 // released only after 10 minutes: never in this test
    let session = try CaptureSession(config)
    let stage = LateViewerStage(wantAfterUnwatched: 40)
    let source = { session.source }
    stage.unwatchedFrames = { source()?.statistics.inputFrames ?? 0 }
    let stopper = StopAfterPictures(stage: stage, session: session, count: 10)
    let report = try await session.run(stages: [stage, stopper])
    let stats = try #require(stopper.statistics, "\(report.summaryText)")
    // The first frame was converted (the stage said no only after it), then the frames up to the 40th went by
    // unconverted; the conversions are those pictures and the frames the source made ahead of the loop: its ring
    // of 2 (`bufferingNewest: 2`) plus the one in progress, once before the pause reached it and once at the stop.
    let ahead = 2 + 1
    #expect(stage.pictures >= 10, "\(report.summaryText)")
    #expect(stats.inputFrames - stats.conversions >= 40 - 1 - ahead, "\(stats)")
    #expect(stats.conversions <= 1 + ahead + stage.pictures + ahead, "\(stats)")
    print(
        "FIGURE pictures paused: \(stats.inputFrames) frames dequeued, \(stats.conversions) converted, \(stage.pictures) pictures after a stage wanted them"
    )
}

/// Stops the session once `stage` has had `count` pictures.
private final class StopAfterPictures: PictureStage, @unchecked Sendable {
    let stage: LateViewerStage, count: Int
    weak var session: CaptureSession?
    /// The source's statistics when it stopped the session.
    var statistics: VideoSource.Statistics?
    init(stage: LateViewerStage, session: CaptureSession, count: Int) {
        self.stage = stage
        self.session = session
        self.count = count
    }
    var wantsPictures: Bool { false }
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        guard stage.pictures >= count, statistics == nil else { return }
        statistics = session?.source?.statistics
        session?.stop()
    }
    func end() throws {}
}

/// A run as a command-line program makes it: the stop signals are watched while it runs (none came), and what
/// is to happen afterwards (a server's stop) happens once, after the session's end.
@Test func aRunStoppingOnSignalsStopsWhatFollowsItOnce() async throws {
    var config = CaptureSession.Configuration()
    (config.device, config.size, config.frames, config.fast) = ("fixture:uvc-webcam", FrameSize(width: 320, height: 240), 3, true)
    config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
    let session = try CaptureSession(config)
    let stage = CountStage(), stops = Stops()
    let (report, signals) = try await session.runStoppingOnSignals(stages: [stage]) { stops.framesSeen.append(stage.count) }
    #expect(report.failure == nil && report.processed == 3 && stops.framesSeen == [3], "\(report.summaryText) \(stops.framesSeen)")
    #expect(signals?.received == false)
}

/// The frames counted each time the run's `afterwards` ran.
private final class Stops { var framesSeen: [Int] = [] }

/// A stage nobody watches through (a server without viewers): it never wants a picture.
private final class NobodyWatching: PictureStage {
    var wantsPictures: Bool { false }
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {}
    func end() throws {}
}

/// #53: the duration counts the time the camera is released for idleness, so a server with a time limit ends with
/// nobody watching (it used to run forever once the camera was released), and without a failure: the camera did
/// deliver, nobody wanted a picture.
@Test(.timeLimit(.minutes(2))) func theDurationEndsARunWhoseCameraIsReleased() async throws {
    var config = CaptureSession.Configuration(providers: [FixtureCameraProvider()])
    (config.device, config.size) = ("fixture:uvc-webcam", FrameSize(width: 320, height: 240))
    (config.durationNs, config.idleReleaseNs) = (1_500_000_000, 300_000_000)
    let session = try CaptureSession(config)
    let started = monotonicNanoseconds()
    let report = try await session.run(stages: [NobodyWatching()])
    let seconds = Double(monotonicNanoseconds() - started) / 1e9
    #expect(report.failure == nil, "\(report.summaryText) \(String(describing: report.failure))")
    // It ends (before #53 it never did once the camera was released: the time limit fails it), not before its 1.5 s.
    #expect(seconds >= 1.4, "a 1.5 s run with its camera released after 0.3 s took \(seconds) s")
    #expect(report.summary.contains { $0.0 == "camera" && $0.1.hasPrefix("released 1 times") }, "\(report.summaryText)")
}
