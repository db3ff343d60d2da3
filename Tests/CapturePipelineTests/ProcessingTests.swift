import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing
import FixtureCameras
import CapturePipeline

// Processing stages (#50): a processor's output is what the stages after it get, with the capture timestamp
// unchanged; stages before it get the camera's picture; late pictures are dropped under `.drop`.

/// Reads the overlay of every picture it gets, beside the frame's timestamp and size.
private final class OverlayReader: PictureStage, @unchecked Sendable {
    // @unchecked: touched by the session's loop only, read by the test after the run.
    var seen: [(shown: Int64?, timestampNs: Int64, size: FrameSize)] = []
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        let shown = TimeOverlay.read(luma: picture.dataY, stride: picture.strideY, width: picture.width, height: picture.height)
        seen.append((shown, frame.timestampNs, FrameSize(width: picture.width, height: picture.height)))
    }
    func end() throws {}
}

private func session(frames: Int) throws -> CaptureSession {
    var config = CaptureSession.Configuration()
    (config.device, config.size, config.frames, config.fast) = ("fixture:vivid", FrameSize(width: 640, height: 480), frames, true)
    config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
    return try CaptureSession(config)
}

@Test func theStagesAfterAProcessorGetItsPictureAndTheFramesOwnTimestamp() async throws {
    let s = try session(frames: 20)
    let (before, after, crop) = (OverlayReader(), OverlayReader(), OverlayReader())
    let overlay = ProcessStage(TimeOverlay())
    let cropStage = ProcessStage(try RegionCrop(region: CropRect(x: 0, y: 0, width: 320, height: 240)))
    let report = try await s.run(stages: [before, overlay, after, cropStage, crop])
    #expect(report.failure == nil && report.processed == 20, "\(report.summaryText)")
    #expect(before.seen.count == 20 && after.seen.count == 20 && crop.seen.count == 20)
    // Before the processor: the camera's picture, without the overlay.
    #expect(before.seen.allSatisfy { $0.shown == nil && $0.size == FrameSize(width: 640, height: 480) })
    // After it: the overlay, showing the timestamp the frame still carries.
    for (i, f) in after.seen.enumerated() {
        #expect(f.shown == f.timestampNs / 1_000_000, "picture \(i): shows \(String(describing: f.shown)), frame at \(f.timestampNs) ns")
        #expect(f.timestampNs == before.seen[i].timestampNs)
    }
    // After the crop (the top left quarter, where the overlay is): 320x240, the overlay read again at that size?
    // The box is sized for the height it was drawn at (480), so it is still whole in the quarter.
    #expect(crop.seen.allSatisfy { $0.size == FrameSize(width: 320, height: 240) })
    #expect(report.summaryText.contains("processing:   time overlay: 20 pictures, dropped 0 (backpressure wait), p50"), "\(report.summaryText)")
    #expect(report.summaryText.contains("processing:   crop 320x240+0+0: 20 pictures, dropped 0 (backpressure wait)"), "\(report.summaryText)")
    #expect(report.summaryText.contains("output 320x240"), "\(report.summaryText)")
}

/// A processor that records what it was given.
private final class Counting: PictureProcessor {
    let name = "counting"
    var calls = 0
    func process(_ picture: I420Buffer, frame: VideoFrame) throws -> I420Buffer {
        calls += 1
        return picture
    }
}

@Test func dropBackpressureSkipsPicturesAlreadyLateOnTheCaptureClock() throws {
    // The clock is the test's: each picture is "now" minus its age.
    final class Clock: @unchecked Sendable { var now: Int64 = 10_000_000_000 }
    let clock = Clock()
    let counting = Counting()
    let stage = ProcessStage(counting, backpressure: .drop(olderThanNs: 100_000_000), clock: { clock.now })
    let picture = I420Buffer(width: 64, height: 48)
    var passed = 0
    for ageMs: Int64 in [0, 50, 100, 101, 400, 20] {
        let frame = VideoFrame(buffer: picture.buffer, timestampNs: clock.now - ageMs * 1_000_000, sequence: 0)
        if try stage.apply(picture, frame: frame) != nil { passed += 1 }
    }
    #expect(passed == 4 && counting.calls == 4 && stage.statistics.dropped == 2 && stage.statistics.processed == 4)
    #expect(stage.report.framesText == "processing dropped 2")
    // Waiting: every picture, however old.
    let waiting = ProcessStage(Counting(), backpressure: .wait, clock: { clock.now })
    let old = VideoFrame(buffer: picture.buffer, timestampNs: 0, sequence: 0)
    #expect(try waiting.apply(picture, frame: old) != nil && waiting.statistics.dropped == 0)
}

@Test func processingSpecsParseOrNameWhatIsWrong() throws {
    #expect(try ProcessingSpec.parse("time") == .time)
    #expect(try ProcessingSpec.parse("crop=640x360+320+180") == .crop(CropRect(x: 320, y: 180, width: 640, height: 360), nil))
    #expect(
        try ProcessingSpec.parse("crop=320x240+0+0:640x480")
            == .crop(CropRect(x: 0, y: 0, width: 320, height: 240), FrameSize(width: 640, height: 480)))
    #expect(try ProcessingSpec.parse("crop=320x240+0+0:640x480").description == "crop=320x240+0+0:640x480")
    for bad in ["blur", "crop=", "crop=640x360", "crop=640x360+1", "crop=640x360+a+0", "crop=10x10+0+0:big", "crop=1x1+0+0", "crop=10x10+0+0:1:2"] {
        let e = #expect(throws: PipelineError.self) { try ProcessingSpec.parse(bad) }
        #expect(e?.message.contains("processing \"\(bad)\"") == true, "\(String(describing: e?.message))")
    }
    #expect(try ProcessingBackpressure.parse("drop") == .drop(olderThanNs: 100_000_000))
    #expect(try ProcessingBackpressure.parse("drop:250") == .drop(olderThanNs: 250_000_000))
    for bad in ["drop:0", "drop:-1", "drop:99999999999999999999", "later"] {
        let e = #expect(throws: PipelineError.self) { try ProcessingBackpressure.parse(bad) }
        #expect(e?.message.contains("backpressure \"\(bad)\"") == true)
    }
}

@Test func aProcessorRefusesACameraThatDeliversItsOwnH264() throws {
    var config = CaptureSession.Configuration()
    (config.device, config.frames, config.fast, config.pixelFormats) = ("fixture:h264-webcam", 5, true, [.h264])
    config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
    let s = try CaptureSession(config)
    let e = #expect(throws: PipelineError.self) { try ProcessStage(TimeOverlay()).check(s) }
    #expect(e?.message.contains("ProcessStage takes pictures") == true, "\(String(describing: e?.message))")
}
