import CV4L2
import Foundation
import Testing
import TestSupport
import VideoCapture
@testable import V4L2Capture

/// A camera that encodes H.264 itself (a UVC H.264 camera, v4l2loopback fed with H.264): its buffers are access
/// units, `bytesused` long; the key-frame flag comes from the driver or, when it flags nothing, from the NAL types.
@Suite(.serialized, .timeLimit(.minutes(1))) struct H264CameraTests {
    static let sps: [UInt8] = [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1e, 0xda, 0x02, 0x80, 0xbf, 0xe5]
    static let pps: [UInt8] = [0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80]
    static let idr: [UInt8] = sps + pps + [0, 0, 0, 1, 0x65, 0x88, 0x84, 0x21, 0xa0]
    static let nonIDR: [UInt8] = [0, 0, 0, 1, 0x41, 0x9a, 0x02, 0x04]

    func start(_ k: FakeKernel, _ s: Sink) throws -> V4L2Stream {
        let dev = fakeDev()
        let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: fakeStreamConfig)
        let device = try #require(try provider.device(for: dev + "/video0"))
        return try #require(
            try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: .h264, size: FrameSize(width: 640, height: 360), fps: Fraction(30)),
                sink: s.sink) as? V4L2Stream)
    }

    static let key = CV4L2_BUF_FLAG_KEYFRAME | monotonicFlag, p = CV4L2_BUF_FLAG_PFRAME | monotonicFlag

    @Test func theDriversKeyFrameFlagOrElseTheNALTypesMarkKeyFrames() throws {
        let k = FakeKernel()
        // Flagged by the driver: the flag wins even where the bytes would say otherwise (a driver knows its encoder).
        // Unflagged: an IDR (type 5) after SPS/PPS is a key frame, a type-1 slice is not.
        let units: [([UInt8], UInt32, Bool)] = [
            (Self.idr, Self.key, true), (Self.nonIDR, Self.p, false), (Self.nonIDR, Self.key, true), (Self.idr, Self.p, false),
            (Self.idr, monotonicFlag, true), (Self.nonIDR, monotonicFlag, false),
        ]
        k.configure { $0.payloads = units.map(\.0) }
        k.push(units.map { .frame(bytesUsed: nil, flags: $0.1, timestampNs: nil, sequence: nil) })
        // What each frame said, copied out (holding six frames would hold every buffer and copy: a drop).
        final class Seen: @unchecked Sendable { // @unchecked: guarded by `lock`
            let lock = NSLock()
            var frames: [(key: Bool, encoded: Bool, bytes: [UInt8])] = []
        }
        let seen = Seen()
        let s = Sink()
        let sink = FrameSink(
            frame: { f in seen.lock.withLock { seen.frames.append((f.isKeyFrame, f.isEncoded, Array(f.buffer.bytes))) } }, dropped: s.sink.dropped,
            failed: s.sink.failed, copied: s.sink.copied)
        let dev = fakeDev()
        let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: fakeStreamConfig)
        let device = try #require(try provider.device(for: dev + "/video0"))
        let stream = try #require(
            try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: .h264, size: FrameSize(width: 640, height: 360), fps: Fraction(30)),
                sink: sink) as? V4L2Stream)
        #expect(waitUntil(timeout: 5, every: 0.005) { seen.lock.withLock { seen.frames.count } == units.count })
        stream.stop()
        let frames = seen.lock.withLock { seen.frames }
        #expect(frames.map(\.key) == units.map(\.2))
        #expect(frames.allSatisfy { $0.encoded })
        #expect(frames.map(\.bytes) == units.map(\.0), "bytesused is the access unit: its bytes, no more")
        #expect(stream.applied.pixelFormat == .h264 && stream.applied.stride == 0)
        // The fake says Rec. 709, full range: coded YCbCr, so a 709 matrix (never the RGB "matrix" of a non-YCbCr fourcc).
        #expect(stream.applied.colorSpace.matrix == .bt709 && stream.applied.colorSpace.range == .full, "\(stream.applied.colorSpace)")
    }

    @Test func emptyOversizedAndGarbageBuffersAreCountedOrPassedOnNeverACrash() throws {
        let k = FakeKernel()
        let garbage: [UInt8] = [0xff, 0x00, 0x00, 0x01] + Array(repeating: 0x5a, count: 40)
        let truncated: [UInt8] = [0, 0, 1] // a start code and nothing after it
        k.configure { $0.payloads = [[], garbage, truncated, Self.idr] }
        k.push([
            .frame(bytesUsed: 0, flags: monotonicFlag, timestampNs: nil, sequence: nil), // empty: a short buffer
            .frame(bytesUsed: nil, flags: monotonicFlag, timestampNs: nil, sequence: nil), // garbage: passed on, not a key frame
            .frame(bytesUsed: nil, flags: monotonicFlag, timestampNs: nil, sequence: nil), // truncated: passed on
            .frame(bytesUsed: 1 << 30, flags: monotonicFlag, timestampNs: nil, sequence: nil), // longer than its buffer
            .frame(bytesUsed: nil, flags: monotonicFlag | CV4L2_BUF_FLAG_ERROR, timestampNs: nil, sequence: nil),
            goodFrame(),
        ])
        let s = Sink(hold: true)
        let stream = try start(k, s)
        #expect(s.wait { $0.frames.count == 3 && $0.drops.values.reduce(0, +) == 3 })
        stream.stop()
        let (frames, drops, error) = s.lock.withLock { (s.frames, s.drops, s.error) }
        #expect(error == nil)
        #expect(drops[.shortBuffer] == 2 && drops[.corruptBuffer] == 1, "\(drops)")
        #expect(frames.map { Array($0.buffer.bytes) }.prefix(2) == [garbage, truncated])
        #expect(frames.map(\.isKeyFrame).prefix(2) == [false, false])
    }

    /// v4l2loopback's writer fills its buffers round-robin whether or not its reader still holds them: a frame held
    /// zero-copy changes under its consumer (the VM test recorded an IDR twice, in place of the frame held four
    /// frames before it). From that driver every frame is copied at dequeue; a frame held while the writer laps the
    /// ring keeps its own bytes. The same fake under another driver name shows the damage the copy prevents.
    @Test(arguments: [true, false]) func aLoopbackWriterCannotChangeAHeldFrame(namedLoopback: Bool) throws {
        let k = FakeKernel()
        // Six access units of one length, each its own bytes; four driver buffers, so the fifth and sixth land in
        // the first two.
        let units = (0..<6).map { i in Self.nonIDR + [UInt8(0x10 + i)] }
        k.configure {
            $0.driverName = namedLoopback ? V4L2Stream.driverRewritingHeldBuffers : "fake"
            $0.ignoresOwnership = true
            $0.payloads = units
        }
        k.push(units.map { _ in goodFrame() })
        let s = Sink(hold: true)
        let stream = try start(k, s)
        #expect(s.wait { $0.frames.count + $0.drops.values.reduce(0, +) == units.count })
        stream.stop()
        let (frames, drops, copied) = s.lock.withLock { (s.frames, s.drops, s.copied) }
        let held = frames.map { Array($0.buffer.bytes) }
        if namedLoopback {
            #expect(held == units, "every held frame keeps the access unit it was dequeued with")
            #expect(copied == units.count && drops.isEmpty, "copied \(copied), drops \(drops)")
        } else {
            // Zero-copy until the ring ran out: the first frame now shows the fifth one's bytes.
            #expect(held.count == units.count && held[0] == units[4] && held[1] == units[5], "\(held.map { $0.last ?? 0 })")
        }
    }

    /// v4l2loopback resets its buffers' sequence to 0 at REQBUFS and can hand a new reader one of them first, then
    /// its running count: not hundreds of driver drops. A gap after that is one.
    @Test func aFirstFrameNumberedZeroThenTheDriversCountIsNoDrop() throws {
        let k = FakeKernel()
        k.push([goodFrame(seq: 0), goodFrame(seq: 281), goodFrame(seq: 282), goodFrame(seq: 285)])
        let s = Sink()
        let stream = try startStream(k, s)
        #expect(s.wait { $0.seen.count == 4 })
        stream.stop()
        #expect(s.lock.withLock { s.drops } == [.driverDropped: 2])
    }

    @Test func aKeyFrameRequestPressesTheForceKeyFrameButtonWhereItExists() throws {
        let k = FakeKernel()
        k.configure {
            $0.controls.append(FakeKernel.Control(id: CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME, type: 4, name: "Force Key Frame", flags: 0x240))
            $0.controls.sort { $0.id < $1.id }
        }
        k.push((0..<200).map { _ in goodFrame() })
        let s = Sink()
        let stream = try start(k, s)
        #expect(stream.requestKeyFrame())
        #expect(k.waitForCalls("S_EXT_CTRLS force_key_frame=0"), "\(k.callLog.suffix(5))")
        stream.stop()
        #expect(!stream.requestKeyFrame(), "a stopped stream cannot be asked")
        #expect(k.callLog.filter { $0.hasPrefix("S_EXT_CTRLS force_key_frame") }.count == 1)
    }

    /// A bitrate request sets V4L2_CID_MPEG_VIDEO_BITRATE from the capture thread, clamped to the control's range
    /// and rounded to its step; without the control (or on a stopped stream) it is refused.
    @Test func aBitrateRequestSetsTheBitrateControlWithinItsRange() throws {
        let k = FakeKernel()
        k.configure {
            $0.controls.append(
                FakeKernel.Control(
                    id: CV4L2_CID_MPEG_VIDEO_BITRATE, type: 1, name: "Video Bitrate", min: 100_000, max: 8_000_000, step: 1000, def: 2_000_000,
                    value: 2_000_000))
            $0.controls.sort { $0.id < $1.id }
        }
        k.push((0..<400).map { _ in goodFrame() })
        let s = Sink()
        let stream = try start(k, s)
        #expect(stream.requestBitrate(50_000))
        #expect(k.waitForCalls("S_EXT_CTRLS video_bitrate=100000"), "below the range: its minimum. \(k.callLog.suffix(5))")
        #expect(stream.requestBitrate(1_234_567))
        #expect(k.waitForCalls("S_EXT_CTRLS video_bitrate=1235000"), "rounded to the step: \(k.callLog.suffix(5))")
        #expect(stream.requestBitrate(Int.max))
        #expect(k.waitForCalls("S_EXT_CTRLS video_bitrate=8000000"), "above the range: its maximum. \(k.callLog.suffix(5))")
        stream.stop()
        #expect(!stream.requestBitrate(1_000_000), "a stopped stream cannot be asked")

        let k2 = FakeKernel()
        k2.push((0..<5).map { _ in goodFrame() })
        let s2 = Sink()
        let none = try start(k2, s2)
        #expect(!none.requestBitrate(1_000_000), "no V4L2_CID_MPEG_VIDEO_BITRATE: false")
        none.stop()
    }

    @Test func withoutTheControlOrForRawFramesARequestIsRefused() throws {
        let k = FakeKernel()
        k.push((0..<5).map { _ in goodFrame() })
        let s = Sink()
        let stream = try start(k, s)
        #expect(!stream.requestKeyFrame(), "no V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME: false")
        stream.stop()

        let k2 = FakeKernel()
        k2.configure { $0.controls.append(FakeKernel.Control(id: CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME, type: 4, name: "Force Key Frame")) }
        let s2 = Sink()
        let raw = try startStream(k2, s2)
        #expect(!raw.requestKeyFrame(), "a raw (YUYV) stream has no key frames to force")
        raw.stop()
        #expect(!k2.callLog.contains { $0.hasPrefix("S_EXT_CTRLS") })
    }
}
