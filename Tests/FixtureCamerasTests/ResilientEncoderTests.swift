import FixtureCameras
import H264
import Testing
import V4L2Capture
import VideoCapture

/// The watchdog (`ResilientEncoder`) around the production `V4L2M2MEncoder` on the simulated bcm2835-codec, on a
/// simulated clock: a camera frame every 33.3 ms, and a poll that finds nothing ready moves the clock by its timeout.
@Suite("ResilientEncoder: stalls of the simulated bcm2835 are recovered, and repeated ones fall back to OpenH264")
struct ResilientEncoderTests {
    struct Run {
        var delivered: [(frame: Int, atNs: Int64, key: Bool)] = []
        var submittedAt: [Int64] = []
        /// Pauses between consecutive outputs longer than three frame intervals.
        var gaps: [Int64] {
            zip(delivered, delivered.dropFirst()).map { $1.atNs - $0.atNs }.filter { $0 > 100_000_000 }
        }
    }

    static let frameNs: Int64 = 33_333_333

    /// Runs `frames` pictures through the encoder, each submitted one frame interval after the previous one returned.
    static func run(_ e: ResilientEncoder, clock: SimulatedClock, frames: Int, before: (Int) throws -> Void = { _ in }) throws -> Run {
        var r = Run()
        var out = EncodedFrame()
        for n in 0..<frames {
            clock.advance(frameNs)
            try before(n)
            r.submittedAt.append(clock.now)
            try e.encode(picture(n % 7), timestampNs: clock.now, into: &out)
            if !out.isSkipped { r.delivered.append((n, clock.now, out.isKeyFrame)) }
        }
        return r
    }

    static func make(_ device: FixtureM2MDevice, clock: SimulatedClock, control: EncoderControl = EncoderControl()) throws -> ResilientEncoder {
        try ResilientEncoder(
            settings: settings(), control: control, configuration: .init(name: device.summaryName), now: clock.reader,
            primary: device.factory(timeoutMs: 1000))
    }

    @Test("a stall after frame 100 is recovered within 2 s: a new encoder, a key frame first, one gap, no frame lost, no CMA leaked")
    func stallRecovered() throws {
        let clock = SimulatedClock()
        let device = try bcm2835("stall-after=100", clock: clock)
        let e = try Self.make(device, clock: clock)
        let r = try Self.run(e, clock: clock, frames: 300)
        #expect(r.delivered.count == 300, "every picture was encoded, the stalled one again on the new encoder")
        let stalled = r.delivered[100]
        #expect(stalled.frame == 100 && stalled.key, "the first frame of the new encoder is a key frame")
        let recovery = stalled.atNs - r.submittedAt[100]
        #expect(recovery < 2_000_000_000)
        #expect(r.gaps.count == 1, "\(r.gaps)")
        #expect(e.events.map(\.kind) == ["failed", "restarted"])
        #expect(e.note == "v4l2m2m fixture:bcm2835 (/dev/video11) failed once (no output for 1.0 s); restarted once")
        #expect(e.statistics.frames == 300 && e.statistics.watchdog == e.note && e.control.statistics.watchdog == e.note)
        #expect(device.opens == 2 && device.leakedBytes == 0)
        e.close()
        #expect(device.cmaBytes == 0)
        print("stall recovered in \(Double(recovery) / 1e6) ms; gaps \(r.gaps.map { Double($0) / 1e6 }) ms")
    }

    @Test("three stalls: OpenH264 for the rest of the run, the note says so, frames keep flowing, requests reach it")
    func fallback() throws {
        let clock = SimulatedClock()
        let device = try bcm2835("stall-after=100&stalls=3", clock: clock)
        let control = EncoderControl()
        let e = try Self.make(device, clock: clock, control: control)
        let r = try Self.run(e, clock: clock, frames: 400) { n in
            if n == 350 { try control.setBitrate(400_000) }
            if n == 360 { control.requestKeyFrame() }
        }
        #expect(r.delivered.count == 400)
        #expect(e.events.map(\.kind) == ["failed", "restarted", "failed", "restarted", "failed", "fell back"])
        #expect(e.fellBack && e.failures == 3)
        #expect(e.note == "v4l2m2m fixture:bcm2835 (/dev/video11) failed 3 times (no output for 1.0 s); fell back to OpenH264")
        #expect(r.gaps.count == 3, "one freeze per stall: \(r.gaps)")
        #expect(r.delivered.filter(\.key).map(\.frame).contains(360), "a key frame asked of the fallback is made")
        #expect(e.statistics.targetBitrate == 400_000, "a bitrate asked reaches the fallback")
        #expect(device.opens == 3 && device.leakedBytes == 0 && device.cmaBytes == 0)
    }

    @Test("the bitrate last asked carries over to the restarted encoder")
    func bitrateCarriesOver() throws {
        let clock = SimulatedClock()
        let device = try bcm2835("stall-after=10", clock: clock)
        let control = EncoderControl()
        let e = try Self.make(device, clock: clock, control: control)
        _ = try Self.run(e, clock: clock, frames: 20) { n in if n == 5 { try control.setBitrate(700_000) } }
        #expect(device.events.filter { $0.hasPrefix("Video Bitrate") } == ["Video Bitrate=1000000", "Video Bitrate=700000", "Video Bitrate=700000"])
    }

    @Test("an encoder that cannot be made at all counts as failures, then the fallback runs")
    func unopenable() throws {
        let clock = SimulatedClock()
        let e = try ResilientEncoder(
            settings: settings(), control: EncoderControl(), configuration: .init(name: "v4l2m2m /dev/video11"), now: clock.reader,
            primary: { _, _ in throw CaptureError(.unknownDevice, "/dev/video11 does not exist") })
        #expect(e.fellBack && e.failures == 3)
        #expect(e.note == "v4l2m2m /dev/video11 failed 3 times (/dev/video11 does not exist); fell back to OpenH264")
        var out = EncodedFrame()
        try e.encode(picture(0), timestampNs: 0, into: &out)
        #expect(out.isKeyFrame)
    }
}

extension ResilientEncoder.Event {
    var kind: String {
        switch self {
        case .failed: "failed"
        case .restarted: "restarted"
        case .fellBack: "fell back"
        case .copying: "copying"
        }
    }
}
