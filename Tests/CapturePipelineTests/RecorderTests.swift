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

    /// `applyRotation` turns the session's pixels upright; a camera's own H.264, recorded as it comes, refuses it
    /// (and the other settings that need pictures) naming the setting.
    @Test func theContainerIsTheOneGivenElseTheExtensions() {
        #expect(RecordingOutput.Configuration(path: "clip.mp4").container == .mp4)
        #expect(RecordingOutput.Configuration(path: "clip.mp4", container: .h264).container == .h264)
        #expect(RecordingOutput.Configuration(path: "clip.bin", container: nil).container == .h264)
    }

    @Test func applyRotationNeedsPictures() throws {
        var c = Recorder.Configuration(output: RecordingOutput.Configuration(path: work + "/upright.mp4"))
        c.applyRotation = true
        let session = try Self.session()
        _ = try Recorder(session: session, configuration: c)
        #expect(session.sourceOptions.applyRotation)
        var h264 = CaptureSession.Configuration()
        (h264.device, h264.size, h264.pixelFormats, h264.frames) = ("fixture:h264-webcam", FrameSize(width: 640, height: 480), [.h264], 1)
        h264.providers = [FixtureCameraProvider()]
        let passthrough = try CaptureSession(h264)
        #expect(refusedSetting(c, { _ in }) { _ = try Recorder(session: passthrough, configuration: $0) } == "applyRotation")
        #expect(refusedSetting(c, { $0.applyRotation = false }) { _ = try Recorder(session: passthrough, configuration: $0) } == nil)
        #expect(!passthrough.sourceOptions.applyRotation)
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
