import Foundation
import Testing
import TestSupport
import VideoCapture
import VideoProcessing
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
    config.frames = 3
    let e = #expect(throws: CaptureError.self) { _ = try CaptureSession(config) }
    #expect(e?.code == .unknownDevice && e?.message.contains("no camera found") == true && e?.message.contains("fixture:uvc-webcam") == true)
}
