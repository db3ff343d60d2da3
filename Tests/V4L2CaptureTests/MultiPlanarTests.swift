import CV4L2
import Foundation
import Testing
import TestSupport
import VideoCapture
@testable import V4L2Capture

/// A multi-planar fake device (NM12 with two planes, YUYV with one) and a stream of `pf` from it.
func startMultiPlanar(
    _ k: FakeKernel, _ s: Sink, _ pf: PixelFormat = .nv12m, config: V4L2Stream.Configuration = fakeStreamConfig
) throws -> V4L2Stream {
    k.multiPlanar = true
    let dev = fakeDev()
    let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: config)
    let device = try #require(try provider.device(for: dev + "/video0"))
    return try #require(
        try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: pf, size: FrameSize(width: 640, height: 480), fps: Fraction(30)), sink: s.sink)
            as? V4L2Stream)
}

/// The byte at (`row`, `column`) of plane `p` of a frame.
func byte(_ b: VideoFrameBuffer, plane p: Int, row: Int, column: Int) -> UInt8 {
    let l = b.planes
    let offset = p == 0 ? l.offsets.0 : p == 1 ? l.offsets.1 : l.offsets.2
    let stride = p == 0 ? l.strides.0 : p == 1 ? l.strides.1 : l.strides.2
    return b.baseAddress.load(fromByteOffset: offset + row * stride + column, as: UInt8.self)
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct MultiPlanarTests {
    @Test func aMultiPlanarDeviceIsListedAndItsFormatsEnumerateWithTheMultiPlanarType() throws {
        let k = FakeKernel()
        k.multiPlanar = true // ENUM_FMT answers only V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        let provider = V4L2DeviceProvider(kernel: k, devDirectory: fakeDev())
        let devices = provider.devices()
        #expect(devices.map(\.name) == ["Fake SoC Cam"])
        let formats = try provider.formats(of: try #require(devices.first))
        #expect(formats.map(\.pixelFormat) == [.nv12m, .yuyv])
        let selected = FormatSelector.select(from: formats, target: FrameSize(width: 640, height: 480))
        #expect(selected?.pixelFormat == .nv12m, "NM12 converts as cheaply as NV12: it beats YUYV")
        #expect(k.openCount == 0)
    }

    @Test func nm12StreamsWithEachPlaneFromItsOwnMapping() throws {
        let k = FakeKernel()
        k.push((0..<3).map { _ in goodFrame() })
        let s = Sink(hold: true)
        let stream = try startMultiPlanar(k, s)
        #expect(stream.applied.pixelFormat == .nv12m && stream.applied.stride == 640 + 64 && stream.applied.fps == Fraction(30))
        #expect(s.wait { $0.frames.count == 3 })
        #expect(k.mappedCount == 8, "4 buffers of 2 planes, each plane mapped")
        for (n, f) in s.lock.withLock({ s.frames }).enumerated() {
            let b = f.buffer
            #expect(b.pixelFormat == .nv12m && b.planes.count == 2 && b.planes.strides.0 == 704 && b.planes.strides.1 == 704)
            #expect(b.bytesUsed == 704 * 480, "bytesUsed covers the first plane")
            // Buffers are queued 0, 1, 2, 3: frame n is buffer n, its planes filled with their own bytes.
            #expect(byte(b, plane: 0, row: 479, column: 639) == FakeKernel.fill(buffer: n, plane: 0))
            #expect(byte(b, plane: 1, row: 0, column: 0) == FakeKernel.fill(buffer: n, plane: 1))
            #expect(byte(b, plane: 1, row: 239, column: 639) == FakeKernel.fill(buffer: n, plane: 1))
            // A copy keeps both planes.
            let c = b.copy()
            #expect(byte(c, plane: 1, row: 239, column: 639) == FakeKernel.fill(buffer: n, plane: 1) && !c.storage.isBorrowed)
        }
        stream.stop()
        #expect(k.mappedCount == 6, "held frames keep their buffers (both planes) mapped after stop")
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0 && k.openCount == 0)
        #expect(s.error == nil && s.drops.isEmpty)
    }

    @Test func aSingleBufferFormatThroughTheMultiPlanarAPIIsOnePlaneAsOnSinglePlanarDevices() throws {
        let k = FakeKernel()
        k.dataOffset = 256
        k.push((0..<3).map { _ in goodFrame() })
        let s = Sink(hold: true)
        let stream = try startMultiPlanar(k, s, .yuyv)
        #expect(s.wait { $0.frames.count == 3 })
        stream.stop()
        do {
            let f = s.lock.withLock { s.frames }
            #expect(f.count == 3 && f.allSatisfy { $0.buffer.pixelFormat == .yuyv && $0.buffer.stride == 1344 && $0.buffer.bytesUsed == 1344 * 480 })
            #expect(f.allSatisfy { $0.buffer.offset == 256 }, "the payload starts after the plane's data_offset")
            #expect(f.enumerated().allSatisfy { $1.buffer.bytes.last == FakeKernel.fill(buffer: $0, plane: 0) })
        }
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0 && k.openCount == 0)
        let log = k.callLog.filter { $0 != "QBUF" && $0 != "munmap" }
        #expect(Array(log.suffix(2)) == ["STREAMOFF", "close"], "held frames at stop: no REQBUFS(0) while they are mapped")
    }

    @Test func shortOrOverlongPlanesAreBadFramesAndCaptureGoesOn() throws {
        let k = FakeKernel()
        k.push([goodFrame(), .frame(bytesUsed: 1000, flags: monotonicFlag, timestampNs: nil, sequence: nil), goodFrame()])
        let s = Sink()
        let stream = try startMultiPlanar(k, s)
        #expect(s.wait { $0.seen.count == 2 })
        #expect(s.lock.withLock { s.drops[.shortBuffer] } == 1)
        k.configure { $0.bytesUsedExcess = 1 } // plane 1 claims one byte more than its buffer holds
        k.push([goodFrame(), goodFrame()])
        #expect(s.wait { $0.drops[.shortBuffer, default: 0] == 3 })
        k.configure { $0.bytesUsedExcess = 0 }
        k.push([goodFrame()])
        #expect(s.wait { $0.seen.count == 3 })
        stream.stop()
        #expect(s.error == nil)
        #expect(k.mappedCount == 0 && k.openCount == 0)
    }

    @Test func consumersHoldingBuffersGetCopiesOfEveryPlane() throws {
        let k = FakeKernel()
        k.push((0..<8).map { _ in goodFrame() })
        let s = Sink(hold: true)
        let stream = try startMultiPlanar(k, s, config: .init(bufferCount: 4, copyBuffers: 2, pollTimeoutMs: 20, noFrameTimeoutNs: 600_000_000_000))
        #expect(s.wait { $0.seen.count + $0.drops[.buffersHeld, default: 0] == 8 })
        stream.stop()
        #expect(s.frames.count == 5 && s.copied == 2 && s.drops[.buffersHeld] == 3, "\(s.frames.count) \(s.copied) \(s.drops)")
        // The copies hold both planes of the buffer they came from (buffer 3: the one the driver had last).
        for f in s.lock.withLock({ s.frames }).suffix(2) {
            #expect(!f.buffer.storage.isBorrowed)
            #expect(byte(f.buffer, plane: 0, row: 479, column: 639) == FakeKernel.fill(buffer: 3, plane: 0))
            #expect(byte(f.buffer, plane: 1, row: 239, column: 639) == FakeKernel.fill(buffer: 3, plane: 1))
        }
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0 && k.openCount == 0)
    }

    /// Replies a driver should never give: a clear error naming the device and the value, nothing left open.
    @Test(
        arguments: [
            (0, 0, "num_planes 0"), (9, 0, "num_planes 9"), (1, 0, "num_planes 1 for NM12"), (nil, 100, "plane 1 is"),
        ] as [(Int?, Int, String)])
    func malformedMultiPlanarRepliesAreClearErrors(planes: Int?, shortfall: Int, expected: String) throws {
        let k = FakeKernel()
        k.reportedPlanes = planes
        k.planeLengthShortfall = shortfall
        let s = Sink()
        do {
            _ = try startMultiPlanar(k, s)
            Issue.record("started with a malformed reply")
        } catch let e as CaptureError {
            #expect(e.message.contains(expected) && e.message.contains("/video0"), "\(e)")
            if shortfall > 0 { #expect(e.message.contains("\(704 * 240 - shortfall) bytes"), "\(e)") }
        }
        #expect(k.mappedCount == 0 && k.openCount == 0)
    }
}
