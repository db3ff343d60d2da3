import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing
import FixtureCameras
import CapturePipeline

/// `Recorder`, the stages `camcap record` runs, in process on a fixture camera.
@Suite struct RecorderTests {
    static func session(_ device: String = "fixture:uvc-webcam", frames: Int = 10) throws -> CaptureSession {
        var c = CaptureSession.Configuration()
        (c.device, c.size, c.frames, c.fast) = (device, FrameSize(width: 320, height: 240), frames, true)
        c.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
        return try CaptureSession(c)
    }

    @Test func aRecordingWithAPreviewAndSnapshotsWritesThemAll() async throws {
        let path = work + "/recorder.mp4"
        var c = Recorder.Configuration(output: RecordingOutput.Configuration(path: path), encoder: EncodeStage.Configuration(bitrateKbps: 300))
        (c.previewPath, c.snapshotEvery) = (work + "/recorder.y4m", 5)
        try c.validate()
        let session = try Self.session()
        let recorder = try Recorder(session: session, configuration: c)
        #expect(recorder.stages.count == 3 && recorder.stages.first is EncodeStage)
        #expect((recorder.stages.first as? EncodeStage)?.usesEncoderThread == true, "a fast session encodes on a thread of its own")
        let report = try await session.run(stages: recorder.stages)
        #expect(report.failure == nil && report.processed == 10, "\(report.summaryText)")
        #expect(recorder.file.configuration.frameRate == session.selection.fps, "the camera's frame rate when none is given")
        let frames = try sh("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        #expect(frames.out.trimmingCharacters(in: .whitespacesAndNewlines) == "10", "\(frames.out) \(frames.err)")
        #expect(FileManager.default.fileExists(atPath: work + "/recorder.y4m"))
        #expect(
            FileManager.default.fileExists(atPath: work + "/recorder-snapshot-000005.jpg"),
            "\((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? [])")
    }

    @Test func aBadConfigurationIsRefusedNamingTheSetting() {
        func refusal(_ change: (inout Recorder.Configuration) -> Void) -> String? {
            refusedSetting(Recorder.Configuration(output: RecordingOutput.Configuration(path: work + "/refused.mp4")), change) { try $0.validate() }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.snapshotEvery = 0 } == "snapshotEvery")
        #expect(refusal { $0.encoder.bitrateKbps = 1 } == "bitrateKbps")
        #expect(refusal { $0.output.keep = 3 } == "keeping 3 files needs segments (a segment length)")
    }
}
