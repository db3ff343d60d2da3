import Foundation
import Testing
import VideoCapture
import FixtureCameras
import CapturePipeline

/// The stages' typed reports (#47): a run's `Report.stages` holds each stage's figures, in the order of the stages,
/// and the summary's stage lines are written from exactly those figures.
@Suite struct StageReportTests {
    @Test func aRunReportsEachStagesFiguresAndTheSummaryIsWrittenFromThem() async throws {
        var config = CaptureSession.Configuration(providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))])
        (config.device, config.size, config.frames, config.fast) = ("fixture:uvc-webcam", FrameSize(width: 320, height: 240), 30, true)
        let session = try CaptureSession(config)
        let settings = EncodeStage.baseSettings(for: session.selection, bitrateKbps: 300, maxBitrateKbps: nil)
        let (h264, y4m) = (work + "/stage-report.h264", work + "/stage-report.y4m")
        let stages: [any PictureStage] = [
            EncodeStage(settings: settings, keyIntervalSeconds: 1, outputs: [try AnnexBFileOutput(path: h264)]), try Y4MStage(path: y4m),
        ]
        let report = try await session.run(stages: stages)
        #expect(report.failure == nil && report.processed == 30, "\(report.summaryText)")
        #expect(report.stages.count == 2)

        guard case .encode(let e) = report.stages.first, case .annexB(let path, let bytes, let onDisk) = e.outputs.first else {
            Issue.record("not an encode report with an Annex-B output: \(report.stages)")
            return
        }
        #expect(e.encoded + e.skipped == 30 && e.keyFrames >= 1 && e.targetKbps == 300 && e.outputs.count == 1, "\(e)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: h264)[.size] as? Int)
        #expect(path == h264 && bytes == Int64(size) && onDisk == e.encoded, "\(path) \(bytes) \(onDisk), file \(size) bytes")
        guard case .y4m(let y4mPath, let frames) = report.stages.last else {
            Issue.record("not a y4m report: \(report.stages)")
            return
        }
        #expect(y4mPath == y4m && frames == 30)

        let lines = Dictionary(report.summary.map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a })
        #expect(lines["frames"]?.hasSuffix(", encoded \(e.encoded), skipped \(e.skipped)") == true, "\(report.summaryText)")
        #expect(lines["key frames"]?.hasPrefix("\(e.keyFrames) (interval ") == true, "\(report.summaryText)")
        #expect(lines["output"] == "\(h264) (\(bytes) bytes, \(onDisk) frames on disk)", "\(report.summaryText)")
        #expect(lines["y4m"] == "\(y4m) (30 frames)", "\(report.summaryText)")
    }

    /// A stage of an app's own states its lines and its part of the `frames:` line; they join the summary as given.
    @Test func anAppsStageStatesItsOwnLines() async throws {
        final class Tally: PictureStage {
            var count = 0
            func consume(_ picture: I420Buffer, frame: VideoFrame) throws { count += 1 }
            func end() throws {}
            var report: StageReport { .lines(frames: "tallied \(count)", [("tally", "\(count) pictures")]) }
        }
        var config = CaptureSession.Configuration(providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))])
        (config.device, config.size, config.frames, config.fast) = ("fixture:uvc-webcam", FrameSize(width: 320, height: 240), 12, true)
        let report = try await CaptureSession(config).run(stages: [Tally()])
        #expect(report.summary.contains { $0.0 == "frames" && $0.1.hasSuffix(", tallied 12") }, "\(report.summaryText)")
        #expect(report.summary.last.map { $0.0 == "tally" && $0.1 == "12 pictures" } == true, "\(report.summaryText)")
    }
}
