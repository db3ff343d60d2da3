import FixtureCameras
import Foundation
import H264
import Testing
import TestSupport
import VideoCapture
import CapturePipeline

/// The production session and `EncodeStage` with a fixture camera, encoding through `ResilientEncoder` around the
/// simulated bcm2835-codec (`FixtureM2MDevice`, its polls not waiting): stalls are recovered or end in OpenH264,
/// the frames keep coming, and the summary says what happened.
@Suite struct HardwareEncoderSessionTests {
    static func run(stalls: Int, frames: Int) async throws -> (CaptureSession.Report, FixtureM2MDevice, String) {
        var config = CaptureSession.Configuration()
        config.device = "fixture:uvc-webcam"
        config.size = FrameSize(width: 640, height: 480)
        config.frames = frames
        config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
        let session = try CaptureSession(config)
        let device = try FixtureM2MDevice(name: "bcm2835", options: .init(stallAfter: 20, stalls: stalls)) { _ in }
        let path = work + "/m2m-\(stalls).h264"
        let settings = EncodeStage.baseSettings(for: session.selection, bitrateKbps: 800, maxBitrateKbps: nil)
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: 2, outputs: [try AnnexBFileOutput(path: path)])
        let primary = device.factory(timeoutMs: 1000)
        let name = device.summaryName
        encode.makeEncoder = { s, control in
            try ResilientEncoder(settings: s, control: control, configuration: .init(name: name), primary: primary)
        }
        let report = try await session.run(stages: [encode])
        return (report, device, path)
    }

    @Test func aStallIsRecoveredAndTheRecordingIsWhole() async throws {
        let (report, device, path) = try await Self.run(stalls: 1, frames: 60)
        #expect(report.failure == nil && report.processed == 60, "\(report.summaryText)")
        #expect(report.summaryText.contains("failed once (/dev/video11: no coded frame within 1000 ms"), "\(report.summaryText)")
        #expect(report.summaryText.contains("restarted once"), "\(report.summaryText)")
        #expect(device.opens == 2 && device.leakedBytes == 0 && device.cmaBytes == 0)
        let r = try sh("ffprobe", ["-v", "error", "-f", "h264", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        #expect(r.out.trimmingCharacters(in: .whitespacesAndNewlines) == "60", "\(r.out) \(r.err)")
    }

    @Test func threeStallsFallBackToOpenH264AndTheSummarySaysSo() async throws {
        let (report, device, path) = try await Self.run(stalls: 3, frames: 90)
        #expect(report.failure == nil && report.processed == 90, "\(report.summaryText)")
        #expect(
            report.summaryText.contains("v4l2m2m fixture:bcm2835 (/dev/video11) failed 3 times (/dev/video11: no coded frame within 1000 ms"),
            "\(report.summaryText)")
        #expect(report.summaryText.contains("fell back to OpenH264"), "\(report.summaryText)")
        #expect(device.opens == 3 && device.leakedBytes == 0)
        let r = try sh("ffprobe", ["-v", "error", "-f", "h264", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        #expect(r.out.trimmingCharacters(in: .whitespacesAndNewlines) == "90", "\(r.out) \(r.err)")
    }
}
