import Foundation
import Testing
import VideoCapture
import CapturePipeline
import FixtureCameras
import H264

/// The session's and the encoder recipe's `validate()`: the error names the setting, the value and the range.
@Suite struct ConfigurationValidationTests {
    private func refusal(_ change: (inout CaptureSession.Configuration) -> Void) -> PipelineError? {
        var c = CaptureSession.Configuration()
        change(&c)
        do {
            try c.validate()
            return nil
        } catch { return error }
    }

    private func refusal(_ recipe: EncodeStage.Configuration, frameRate: Double = 30) -> PipelineError? {
        do {
            try recipe.validate(frameRate: frameRate)
            return nil
        } catch { return error }
    }

    @Test func sessionSettings() {
        #expect(refusal { _ in } == nil)
        let size = refusal { $0.size = FrameSize(width: 100_000, height: 2) }
        #expect(size?.code == .invalidConfiguration && size?.setting == "size" && size?.message.hasPrefix("size: size 100000x2 is too large") == true)
        #expect(refusal { $0.frames = 0 }?.message == "frames must be 1...100000000, got 0")
        #expect(refusal { $0.durationNs = nanoseconds(seconds: .infinity) }?.setting == "durationNs")
        #expect(refusal { $0.durationNs = -1 }?.message.hasPrefix("durationNs must be above 0 and at most 2678400 seconds") == true)
        #expect(refusal { ($0.frames, $0.durationNs) = (10, 1_000_000_000) }?.message == "frames and durationNs: give one, not both")
        #expect(refusal { $0.idleReleaseNs = 10_000_000 }?.message == "idleReleaseNs must be 0.1...86400.0 seconds, got 0.01")
    }

    /// A refusal as a program with options of its own says it: the refused setting first, the other settings named
    /// in the message (not substrings of words) renamed, the value and range kept.
    @Test func refusalsNameTheProgramsOptions() {
        let max = refusal(.init(bitrateKbps: 1500, maxBitrateKbps: 100))
        let names = ["maxBitrateKbps": "--max-bitrate", "bitrateKbps": "--bitrate"]
        let text = max?.message(calling: { names[$0] ?? optionName(forSetting: $0) }, others: { names[$0] })
        #expect(text?.hasPrefix("--max-bitrate must be 1500...") == true && text?.contains("at least --bitrate") == true, "\(text ?? "-")")
        #expect(
            refusal { $0.idleReleaseNs = 10_000_000 }?.message(calling: optionName(forSetting:), others: { _ in nil })
                == "--idle-release must be 0.1...86400.0 seconds, got 0.01")
        #expect(
            optionName(forSetting: "maxViewersPerAddress") == "--max-viewers-per-address"
                && optionName(forSetting: "requestTimeoutNs") == "--request-timeout")
    }

    @Test func encoderRecipe() {
        #expect(refusal(EncodeStage.Configuration()) == nil)
        #expect(refusal(.init(bitrateKbps: 0))?.message == "bitrateKbps must be 10...100000 kbps, got 0")
        let max = refusal(.init(bitrateKbps: 1500, maxBitrateKbps: 9_999_999_999_999_999))
        #expect(
            max?.setting == "maxBitrateKbps"
                && max?.message == "maxBitrateKbps must be 1500...200000 kbps (at least bitrateKbps), got 9999999999999999")
        #expect(
            refusal(.init(keyFrameInterval: .seconds(.infinity)))?.message == "keyIntervalSeconds must be above 0 and at most 400 seconds, got inf")
        #expect(refusal(.init(keyFrameInterval: .frames(.max)))?.setting == "keyFrameInterval")
        var threads = EncodeStage.Configuration()
        threads.threads = 9
        #expect(refusal(threads)?.message == "threads must be 1...4, got 9")
        let slices = refusal(.init(sliceMode: .maxNALSize(100)))
        #expect(slices?.setting == "sliceMode" && slices?.message == "sliceMode: max NAL size 100 is out of range: 420...65535 bytes")
        #expect(refusal(.init(keyFrameInterval: .seconds(400)), frameRate: .infinity) == nil, "400 s at 240 fps fits")
    }

    @Test func secondsBecomeNanosecondsWithoutTrapping() {
        #expect(nanoseconds(seconds: 1.5) == 1_500_000_000)
        #expect(nanoseconds(seconds: .infinity) == .max && nanoseconds(seconds: -1e300) == .min && nanoseconds(seconds: .nan) == .min)
    }

    /// One frame of a fixture camera, encoded: its SPS and PPS are what an encoder of the same settings makes.
    @Test func encodedParameterSetsComeFromTheFirstKeyFrame() async throws {
        var config = CaptureSession.Configuration()
        (config.device, config.size, config.frames, config.fast) = ("fixture:vivid", FrameSize(width: 320, height: 180), 1, true)
        config.providers = [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))]
        let session = try CaptureSession(config)
        let settings = try EncodeStage.Configuration().settings(for: session.selection)
        let ps = try await session.encodedParameterSets(settings: settings, keyIntervalSeconds: 2)
        #expect(ps.sps.first.map { $0 & 0x1F } == 7 && ps.pps.first.map { $0 & 0x1F } == 8, "\(ps)")
    }

    @Test func aFrameTraceIsWrittenAsCSV() throws {
        let path = NSTemporaryDirectory() + "/trace-\(getpid()).csv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try FrameTrace(capacity: 4).writeCSV(to: path)
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("sequence,capture_ms,"))
        #expect(throws: (any Error).self) { try FrameTrace(capacity: 4).writeCSV(to: "/nonexistent-dir/trace.csv") }
    }

    /// A trace made for a run has room for its frames: the count given, else its duration at its rate (5 s at
    /// most 240 fps by default), with 64 to spare.
    @Test func aFrameTraceHasRoomForTheRun() {
        var c = CaptureSession.Configuration()
        #expect(FrameTrace(for: c).capacity == 5 * 30 + 64)
        (c.durationNs, c.fpsLimit) = (10_000_000_000, 1000)
        #expect(FrameTrace(for: c).capacity == 10 * 240 + 64)
        (c.frames, c.durationNs) = (300, nil)
        #expect(FrameTrace(for: c).capacity == 300)
        // A library takes any numbers: a run of a year, a negative one, a frame count past what memory holds.
        (c.frames, c.durationNs) = (nil, 365 * 86_400 * 1_000_000_000)
        #expect(FrameTrace(for: c).capacity == FrameTrace.maxCapacity)
        c.durationNs = -1_000_000_000
        #expect(FrameTrace(for: c).capacity == 64)
        c.frames = .max
        #expect(FrameTrace(for: c).capacity == FrameTrace.maxCapacity)
    }

    @Test func snapshotNamesAreNumberedBeforeTheExtension() {
        let name = SnapshotStage.numbered("/tmp/shot.png")
        #expect(name(0) == "/tmp/shot.png" && name(30) == "/tmp/shot-000030.png")
        #expect(SnapshotStage.numbered("out/clip-snapshot.jpg")(7) == "out/clip-snapshot-000007.jpg")
    }
}
