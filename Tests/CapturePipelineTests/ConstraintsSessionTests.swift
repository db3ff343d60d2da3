// Issue 49: a session negotiated from constraints: a crop-and-scale answer records at the asked size (ffprobe), and a
// camera that cannot meet them is refused by `init` naming the constraint, before anything is opened.
import Foundation
import Testing
import TestSupport
import VideoCapture
import FixtureCameras
import VideoProcessing
import CapturePipeline

@Suite(.serialized, .timeLimit(.minutes(1))) struct ConstraintsSessionTests {
    @Test func aCropAndScaleAnswerIsRecordedAtTheAskedSize() async throws {
        var c = CaptureSession.Configuration(providers: [FixtureCameraProvider()])
        (c.device, c.frames) = ("fixture:uvc-webcam", 20)
        c.constraints = try VideoConstraints(json: #"{"width": {"exact": 640}, "height": {"exact": 360}, "resizeMode": "crop-and-scale"}"#)
        let session = try CaptureSession(c)
        #expect(session.selection.description == "YUYV 640x480 @ 30 fps" && session.constrainedSize == FrameSize(width: 640, height: 360))
        let path = work + "/constrained.mp4"
        try? FileManager.default.removeItem(atPath: path)
        let stage = EncodeStage(
            settings: EncodeStage.baseSettings(for: session.selection, bitrateKbps: 300, maxBitrateKbps: nil), keyIntervalSeconds: 1,
            outputs: [try RecordingOutput(RecordingOutput.Configuration(path: path))])
        let report = try await session.run(stages: [stage])
        #expect(report.failure == nil && report.processed == 20, "\(report.summaryText)")
        let probed = try sh(
            "ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", path])
        #expect(probed.out.trimmingCharacters(in: .whitespacesAndNewlines) == "640,360,20", "\(probed.out)")
    }

    @Test func unmeetableConstraintsAreRefusedBeforeTheCameraStarts() throws {
        var c = CaptureSession.Configuration(providers: [FixtureCameraProvider()])
        c.device = "fixture:uvc-webcam"
        c.constraints = try VideoConstraints(json: #"{"frameRate": {"exact": 90}}"#)
        let error = #expect(throws: OverconstrainedError.self) { try CaptureSession(c) }
        #expect(error?.constraint == "frameRate", "\(String(describing: error))")
    }
}
