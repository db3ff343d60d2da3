import Foundation
import Metrics
import MetricsTestKit
import Testing
import TestSupport
import VideoCapture
import FixtureCameras
import CapturePipeline
import VideoProcessing
import H264

/// The process's metrics backend for these tests (swift-metrics is bootstrapped once per process; no other test
/// target bootstraps it).
let testMetrics: TestMetrics = {
    let m = TestMetrics()
    MetricsSystem.bootstrap(m)
    return m
}()

@Suite struct MetricsTests {
    /// Two sessions in one process (#38: they used to add into one `capture_frames_total`) count apart: every
    /// metric carries the camera, and the app's own dimensions after it.
    @Test func twoSessionsInOneProcessCountApart() async throws {
        let metrics = testMetrics
        /// One session, made and run in its own task; returns what it processed and its metrics' dimensions.
        @Sendable func session(_ device: String, frames: Int, tag: String) async throws -> (processed: Int, dimensions: [(String, String)]) {
            var config = CaptureSession.Configuration()
            config.device = device
            config.size = FrameSize(width: 320, height: 240)
            config.frames = frames
            config.fast = true
            config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
            config.metricsDimensions = [("session", tag)]
            let session = try CaptureSession(config)
            let settings = EncodeStage.baseSettings(for: session.selection, bitrateKbps: 300, maxBitrateKbps: nil)
            let out = try AnnexBFileOutput(path: work + "/metrics-\(tag).h264")
            let report = try await session.run(stages: [EncodeStage(settings: settings, keyIntervalSeconds: 1, outputs: [out])])
            return (report.processed, session.metricsDimensions)
        }
        async let ra = session("fixture:vivid", frames: 24, tag: "a")
        async let rb = session("fixture:uvc-webcam", frames: 17, tag: "b")
        let (a, b) = try await (ra, rb)
        #expect(a.processed == 24 && b.processed == 17)
        #expect(a.dimensions.map(\.0) == ["camera", "session"] && a.dimensions[0].1 == "fixture:vivid", "\(a.dimensions)")
        for (d, n) in [(a.dimensions, 24), (b.dimensions, 17)] {
            #expect(try metrics.expectCounter("capture_frames_total", d).totalValue == Int64(n), "\(d)")
            #expect(try metrics.expectCounter("encoder_frames_total", d).totalValue == Int64(n), "\(d)")
            #expect(try metrics.expectCounter("encoder_key_frames_total", d).totalValue >= 1, "\(d)")
            #expect(try metrics.expectTimer("capture_conversion_seconds", d).values.count == n, "\(d)")
            #expect(try metrics.expectGauge("encoder_target_bitrate_bps", d).lastValue == 300_000, "\(d)")
        }
        // Nothing was counted without the camera.
        #expect(metrics.counters(label: "capture_frames_total").allSatisfy { c in c.dimensions.contains { $0.0 == "camera" } })
    }

    /// #48: a camera lost and back is counted (`capture_camera_losses_total`, `capture_camera_recoveries_total`)
    /// and its time away recorded (`capture_camera_away_seconds`), with the session's dimensions.
    @Test func aLostCameraIsCountedWithItsTimeAway() async throws {
        let metrics = testMetrics
        var options = FixtureCameraProvider.Options()
        options.faults = [FixtureFault(.unplug, atFrame: 5, seconds: 0.4)]
        var config = CaptureSession.Configuration(providers: [FixtureCameraProvider(options: options)])
        (config.device, config.size, config.frames) = ("fixture:uvc-webcam", FrameSize(width: 320, height: 240), 15)
        (config.onCameraLoss, config.metricsDimensions) = (.wait(giveUpAfterNs: nil), [("session", "lost-and-back")])
        let session = try CaptureSession(config)
        let settings = EncodeStage.baseSettings(for: session.selection, bitrateKbps: 300, maxBitrateKbps: nil)
        let out = try AnnexBFileOutput(path: work + "/metrics-lost.h264")
        let report = try await session.run(stages: [EncodeStage(settings: settings, keyIntervalSeconds: 1, outputs: [out])])
        #expect(report.failure == nil && report.processed == 15, "\(report.summaryText)")
        let d = session.metricsDimensions
        #expect(try metrics.expectCounter("capture_camera_losses_total", d).totalValue == 1)
        #expect(try metrics.expectCounter("capture_camera_recoveries_total", d).totalValue == 1)
        let away = try metrics.expectTimer("capture_camera_away_seconds", d).values
        #expect(away.count == 1 && (away.first ?? 0) >= 400_000_000, "\(away)")
    }

    /// The capture → `VideoSource` → encoder path (the RTC article's, without a session; #38: it recorded
    /// nothing) records what it is asked to: the source's frames, conversions and drops, the encoder's frames,
    /// bytes, key frames and target bitrate, each with the app's dimensions.
    @Test func theRTCPathRecordsWithItsDimensions() async throws {
        let metrics = testMetrics
        let d = [("camera", "fixture:vivid"), ("path", "rtc-article")]
        let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
        let camera = try capturer.device("fixture:vivid")
        var options = VideoSource.Options()
        options.metricsDimensions = d
        let source = VideoSource(capturer: capturer, options: options)
        let frames = source.frames(waitsForConsumer: true)
        let applied = try await capturer.startCapture(device: camera, targetSize: FrameSize(width: 320, height: 240), fpsLimit: 30)
        let encoder = try H264Encoder(
            settings: .init(width: applied.size.width & ~1, height: applied.size.height & ~1), metricsDimensions: d)
        let firstTarget = encoder.settings.targetBitrate
        var encoded = EncodedFrame(), bytes = 0, keyFrames = 0, n = 0
        for try await frame in frames {
            guard let picture = I420Buffer(frame.buffer) else { continue }
            try encoder.encode(picture, timestampNs: frame.timestampNs, into: &encoded)
            n += 1
            bytes += encoded.size
            if encoded.isKeyFrame { keyFrames += 1 }
            if n == 12 { try encoder.setRates(bitrate: 250_000, fps: 30) } // applied at frame 13
            if n == 20 { break }
        }
        try await capturer.stopCapture()
        source.detach() // no frame after this: the counters are final
        let stats = source.statistics
        #expect(try metrics.expectCounter("encoder_frames_total", d).totalValue == 20)
        #expect(try metrics.expectCounter("encoder_bytes_total", d).totalValue == Int64(bytes) && bytes > 0)
        #expect(try metrics.expectCounter("encoder_key_frames_total", d).totalValue == Int64(keyFrames) && keyFrames >= 1)
        #expect(try metrics.expectTimer("encoder_encode_seconds", d).values.count == 20)
        let target = try metrics.expectGauge("encoder_target_bitrate_bps", d)
        #expect(target.values.first == Double(firstTarget) && target.lastValue == 250_000, "\(target.values)")
        #expect(stats.inputFrames >= 20)
        #expect(try metrics.expectCounter("capture_frames_total", d).totalValue == Int64(stats.inputFrames))
        #expect(try metrics.expectTimer("capture_conversion_seconds", d).values.count == stats.conversions)
        let drops = stats.dropped[.late, default: 0] + stats.dropped[.starvation, default: 0]
        #expect(try metrics.expectCounter("capture_frames_dropped_total", d).totalValue == Int64(drops))
    }
}
