import CV4L2
import Foundation
import Testing
import TestSupport
import VideoCapture
@testable import V4L2Capture

/// A folder with `video0` in it, standing in for /dev.
func fakeDev() -> String {
    let d = FileManager.default.temporaryDirectory.appendingPathComponent("fakedev-\(UUID().uuidString)").path
    try? FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
    _ = FileManager.default.createFile(atPath: d + "/video0", contents: nil)
    _ = FileManager.default.createFile(atPath: d + "/media0", contents: nil)
    return d
}

final class Sink: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    let lock = NSLock()
    /// Frames kept (holding their buffers) only with `hold`; `seen` keeps what every frame said.
    var frames: [VideoFrame] = []
    var seen: [(stride: Int, bytesUsed: Int, timestampNs: Int64)] = []
    let hold: Bool
    init(hold: Bool = false) { self.hold = hold }
    var drops: [FrameDropReason: Int] = [:]
    var error: CaptureError?
    var copied = 0
    var sink: FrameSink {
        FrameSink(
            frame: { f in
                self.lock.withLock {
                    self.seen.append((f.buffer.stride, f.buffer.bytesUsed, f.timestampNs))
                    if self.hold { self.frames.append(f) }
                }
            },
            dropped: { r, n in self.lock.withLock { self.drops[r, default: 0] += n } },
            failed: { e in self.lock.withLock { self.error = e } },
            copied: { self.lock.withLock { self.copied += 1 } })
    }
    func wait(_ timeout: Double = 5, _ cond: (Sink) -> Bool) -> Bool {
        waitUntil(timeout: timeout, every: 0.005) { lock.withLock { cond(self) } }
    }
}

/// The fake's script is finite: a no-frame timeout that cannot fire on a loaded machine (only the stall test sets one).
let fakeStreamConfig = V4L2Stream.Configuration(pollTimeoutMs: 20, noFrameTimeoutNs: 600_000_000_000)

func startStream(_ k: FakeKernel, _ s: Sink, config: V4L2Stream.Configuration = fakeStreamConfig) throws -> V4L2Stream {
    let dev = fakeDev()
    let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: config)
    let device = try #require(try provider.device(for: dev + "/video0"))
    return try #require(
        try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 640, height: 480), fps: Fraction(30)), sink: s.sink)
            as? V4L2Stream)
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct V4L2Tests {
    @Test func enumeratesNativeFormatsWithSizesAndIntervals() throws {
        let k = FakeKernel()
        let dev = fakeDev()
        let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev)
        let devices = provider.devices()
        #expect(devices.count == 1)
        #expect(devices.first?.name == "Fake Cam" && devices.first?.driver == "fake" && devices.first?.uniqueID == "v4l2:usb-fake-1")
        let formats = try provider.formats(of: devices[0])
        #expect(formats.map(\.pixelFormat) == [.yuyv, .yuyv, .mjpeg], "emulated RGB3 is not offered")
        #expect(formats[0].intervals == .discrete([Fraction(1, 30), Fraction(1, 15)]))
        #expect(
            formats[2].size
                == .stepwise(min: FrameSize(width: 160, height: 120), max: FrameSize(width: 1920, height: 1080), step: FrameSize(width: 8, height: 8))
        )
        #expect(k.openCount == 0, "enumeration closes what it opens")
    }

    @Test func streamsWithTheAppliedFormatAndWideStride() throws {
        let k = FakeKernel()
        k.push((0..<10).map { _ in goodFrame() })
        let s = Sink()
        let stream = try startStream(k, s)
        #expect(
            stream.applied
                == AppliedFormat(
                    pixelFormat: .yuyv, size: FrameSize(width: 640, height: 480), stride: 1344, fps: Fraction(30),
                    colorSpace: VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .full)))
        #expect(s.wait { $0.seen.count == 10 })
        let f = s.lock.withLock { s.seen }
        stream.stop()
        #expect(f.allSatisfy { $0.0 == 1344 && $0.1 == 1344 * 480 })
        #expect(zip(f, f.dropFirst()).allSatisfy { $0.2 < $1.2 })
        #expect(k.mappedCount == 0 && k.openCount == 0)
        let log = k.callLog.filter { $0 != "QBUF" && $0 != "munmap" }
        #expect(Array(log.suffix(3)) == ["STREAMOFF", "REQBUFS 0", "close"])
    }

    @Test func shortAndCorruptBuffersAreDroppedAndCaptureGoesOn() throws {
        let k = FakeKernel()
        k.push([
            goodFrame(), .frame(bytesUsed: 1000, flags: monotonicFlag, timestampNs: nil, sequence: nil),
            .frame(bytesUsed: nil, flags: monotonicFlag | CV4L2_BUF_FLAG_ERROR, timestampNs: nil, sequence: nil), goodFrame(), goodFrame(),
        ])
        let s = Sink()
        let stream = try startStream(k, s)
        #expect(s.wait { $0.seen.count == 3 })
        stream.stop()
        #expect(s.drops[.shortBuffer] == 1 && s.drops[.corruptBuffer] == 1)
        #expect(s.error == nil)
    }

    @Test func eintrIsRetried() throws {
        let k = FakeKernel()
        k.push([.eintr, goodFrame(), .eintr, .eintr, goodFrame()])
        let s = Sink()
        let stream = try startStream(k, s)
        #expect(s.wait { $0.seen.count == 2 })
        stream.stop()
        #expect(s.error == nil)
    }

    @Test func enodevMidStreamDisconnectsAndFreesEverything() throws {
        let k = FakeKernel()
        k.push([goodFrame(), goodFrame(), .error(ENODEV)])
        let s = Sink(hold: true)
        let stream = try startStream(k, s)
        #expect(s.wait { $0.error != nil })
        #expect(s.error?.code == .disconnected)
        #expect(s.error?.errno == ENODEV)
        // Frames the sink still holds keep their buffers mapped until released.
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0)
        #expect(k.openCount == 0)
        stream.stop() // idempotent after a failure
    }

    @Test func heldFramesStayValidAfterStopAndUnmapOnRelease() throws {
        let k = FakeKernel()
        k.push([goodFrame(), goodFrame()])
        let s = Sink(hold: true)
        let stream = try startStream(k, s)
        #expect(s.wait { $0.frames.count == 2 })
        stream.stop()
        #expect(k.mappedCount == 2, "held frames keep their mapping")
        #expect(k.openCount == 0)
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0)
    }

    @Test func badTimestampsAreReplacedAndDeliveredStrictlyIncreasing() throws {
        let k = FakeKernel()
        let now = monotonicNanoseconds()
        k.push([
            goodFrame(now - 30_000_000), goodFrame(now - 60_000_000), goodFrame(now - 60_000_000),
            goodFrame(now + 10_000_000_000), .frame(bytesUsed: nil, flags: 0, timestampNs: 5, sequence: nil), goodFrame(),
        ])
        let s = Sink()
        let stream = try startStream(k, s)
        #expect(s.wait { $0.seen.count == 6 })
        stream.stop()
        let ts = s.lock.withLock { s.seen.map(\.timestampNs) }
        #expect(ts[0] == (now - 30_000_000) / 1000 * 1000, "a sane monotonic buffer timestamp is used as is")
        #expect(zip(ts, ts.dropFirst()).allSatisfy { $0 < $1 }, "\(ts)")
        #expect(ts[3] < now + 1_000_000_000, "a timestamp in the future is not used")
    }

    @Test func sequenceGapsAreCountedAsDriverDrops() throws {
        let k = FakeKernel()
        k.push([goodFrame(seq: 1), goodFrame(seq: 2), goodFrame(seq: 5), goodFrame(seq: 6), goodFrame(seq: 10)])
        let s = Sink()
        let stream = try startStream(k, s)
        #expect(s.wait { $0.seen.count == 5 })
        stream.stop()
        #expect(s.drops[.driverDropped] == 5)
    }

    /// Frames the driver lost leave a gap in the capturer's sequence (a camera's own H.264 passed through must see
    /// the break and wait for a key frame; the VM caught one sent across it).
    @Test func driverDropsAreGapsInTheCapturersSequence() async throws {
        let k = FakeKernel()
        k.push([goodFrame(seq: 1), goodFrame(seq: 2), goodFrame(seq: 5), goodFrame(seq: 6)])
        let dev = fakeDev()
        let capturer = CameraVideoCapturer(
            providers: [V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: fakeStreamConfig)],
            configuration: .init(maxPendingFrames: 8))
        let stream = capturer.frames(bufferingNewest: 8)
        try await capturer.startCapture(device: try capturer.device(dev + "/video0"), targetSize: FrameSize(width: 640, height: 480))
        var it = stream.makeAsyncIterator(), sequences: [UInt64] = []
        while sequences.count < 4, let f = try await it.next() { sequences.append(f.sequence) }
        try await capturer.stopCapture()
        #expect(sequences == [0, 1, 4, 5], "the driver lost its frames 3 and 4: \(sequences)")
        #expect(capturer.statistics.dropped[.driverDropped] == 2)
    }

    @Test func busyDeviceIsAClearError() throws {
        let k = FakeKernel()
        k.fail(CV4L2_VIDIOC_S_FMT, with: EBUSY)
        let s = Sink()
        do {
            _ = try startStream(k, s)
            Issue.record("started")
        } catch let e as CaptureError {
            #expect(e.code == .deviceBusy)
            #expect(e.message.contains("video0 is busy"))
        }
        #expect(k.openCount == 0 && k.mappedCount == 0)
        let k2 = FakeKernel()
        k2.openErrno = EACCES
        do {
            _ = try startStream(k2, Sink())
            Issue.record("started")
        } catch let e as CaptureError { #expect(e.code == .permissionDenied) }
    }

    @Test(arguments: [CV4L2_VIDIOC_STREAMON, CV4L2_VIDIOC_REQBUFS, CV4L2_VIDIOC_QBUF])
    func setupFailuresLeaveNothingOpen(_ request: UInt) throws {
        let k = FakeKernel()
        k.fail(request, with: EIO)
        do {
            _ = try startStream(k, Sink())
            Issue.record("started")
        } catch let e as CaptureError {
            #expect(e.errno == EIO)
            #expect(e.message.contains("failed on"))
        }
        #expect(k.openCount == 0 && k.mappedCount == 0)
    }

    @Test func qbufFailureMidStreamStopsCapture() throws {
        let k = FakeKernel()
        k.push([goodFrame(), goodFrame(), goodFrame()])
        let s = Sink(hold: true) // the buffers come back (QBUF) only when the test lets go of them
        let stream = try startStream(k, s)
        #expect(s.wait { $0.seen.count >= 1 })
        k.fail(CV4L2_VIDIOC_QBUF, with: EINVAL)
        s.lock.withLock { s.frames.removeAll() } // release buffers so they are re-queued
        #expect(s.wait { $0.error != nil })
        #expect(s.error?.code == .streamFailed)
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0 && k.openCount == 0)
        stream.stop()
    }

    @Test func aStalledStreamIsRestartedOnceThenFails() throws {
        let k = FakeKernel()
        let s = Sink()
        let stream = try startStream(k, s, config: .init(pollTimeoutMs: 20, noFrameTimeoutNs: 150_000_000))
        #expect(s.wait { $0.error != nil })
        #expect(s.error?.code == .timeout)
        #expect(k.callLog.filter { $0 == "STREAMON" }.count == 2, "one restart")
        #expect(k.openCount == 0 && k.mappedCount == 0)
        stream.stop()
    }

    @Test func consumersHoldingBuffersGetBoundedCopiesThenCountedDrops() throws {
        let k = FakeKernel()
        k.push((0..<12).map { _ in goodFrame() })
        let s = Sink(hold: true) // keeps every frame it gets
        let stream = try startStream(k, s, config: .init(bufferCount: 4, copyBuffers: 2, pollTimeoutMs: 20, noFrameTimeoutNs: 600_000_000_000))
        // 3 frames borrow driver buffers (one stays with the driver), 2 are copies, the other 7 are dropped
        // with their reason: memory stays bounded and the driver never starves.
        #expect(s.wait { $0.seen.count + $0.drops[.buffersHeld, default: 0] == 12 })
        #expect(k.scriptEmpty)
        stream.stop()
        #expect(s.error == nil)
        #expect(s.frames.count == 5 && s.copied == 2 && s.drops[.buffersHeld] == 7, "\(s.frames.count) \(s.copied) \(s.drops)")
        s.lock.withLock { s.frames.removeAll() }
        #expect(k.mappedCount == 0 && k.openCount == 0)
    }

    @Test func aReleasedCapturerStopsUnmapsAndClosesTheDevice() async throws {
        let k = FakeKernel()
        k.push((0..<5).map { _ in goodFrame() })
        let dev = fakeDev()
        var capturer: CameraVideoCapturer? = CameraVideoCapturer(providers: [
            V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: fakeStreamConfig)
        ])
        let device = try capturer!.device(dev + "/video0")
        let stream = capturer!.frames()
        try await capturer!.startCapture(device: device, targetSize: FrameSize(width: 640, height: 480))
        var it = stream.makeAsyncIterator()
        #expect(try await it.next() != nil) // streaming
        #expect(k.openCount == 1 && k.mappedCount == 4)
        let closes = k.callLog.filter { $0 == "close" }.count
        capturer = nil // released without stopCapture() (the last reference may be dropped on the delivery thread)
        #expect(k.waitForCalls("STREAMOFF"), "STREAMOFF")
        #expect(k.waitForCalls("close", count: closes + 1), "closed")
        var buffered = 0
        while try await it.next() != nil { buffered += 1 } // what was already queued for us, then the end
        #expect(buffered <= 2, "the stream ends with its capturer")
        // The last frame in flight on the delivery thread is released when its callback returns.
        #expect(k.waitForCalls("munmap", count: 4), "every buffer unmapped")
        #expect(k.mappedCount == 0 && k.openCount == 0, "mapped \(k.mappedCount), open \(k.openCount)")
    }

    @Test func hotplugReportsCamerasAppearingAndGoingButNotOtherNodes() async throws {
        let dir = fakeDev()
        // video7 is a camera; video8 stands for UVC's metadata node (answers QUERYCAP without video capture).
        let monitor = try HotplugMonitor(directory: dir, isCamera: { $0.hasSuffix("/video7") })
        _ = FileManager.default.createFile(atPath: dir + "/video8", contents: nil)
        _ = FileManager.default.createFile(atPath: dir + "/video7", contents: nil)
        _ = FileManager.default.createFile(atPath: dir + "/not-a-camera", contents: nil)
        try FileManager.default.removeItem(atPath: dir + "/video8")
        try FileManager.default.removeItem(atPath: dir + "/video7")
        var events: [DeviceEvent] = []
        for await e in monitor.events {
            events.append(e)
            if events.count == 2 { break }
        }
        monitor.stop()
        monitor.stop() // a second stop returns at once
        #expect(events == [.connected(path: dir + "/video7"), .disconnected(path: dir + "/video7")])
        var rest: [DeviceEvent] = []
        for await e in monitor.events { rest.append(e) } // finished by stop()
        #expect(rest.isEmpty)
    }

    @Test func aDeviceEventIsALineOfTheListing() {
        #expect(
            DeviceEvent.connected(path: "/dev/video2").line { $0 == "/dev/video2" ? "UVC Camera" : nil } == "connected:    /dev/video2\tUVC Camera")
        #expect(DeviceEvent.connected(path: "/dev/video3").line { _ in nil } == "connected:    /dev/video3\t?")
        #expect(DeviceEvent.disconnected(path: "/dev/video2").line { _ in "unused" } == "disconnected: /dev/video2")
    }

    @Test func aReleasedHotplugMonitorClosesItsDescriptors() throws {
        // Counts this process's inotify descriptors (other suites open files and pipes in parallel; only the
        // hot-plug tests of this serialized suite make inotify ones).
        func inotifyFDs() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == "anon_inode:inotify"
            }.count
        }
        let before = try inotifyFDs()
        var monitor: HotplugMonitor? = try HotplugMonitor(directory: fakeDev(), isCamera: { _ in false })
        #expect(try inotifyFDs() == before + 1)
        monitor = nil
        for _ in 0..<20 { _ = try HotplugMonitor(directory: fakeDev(), isCamera: { _ in false }) }
        #expect(try inotifyFDs() == before, "released monitors must close their inotify descriptor")
        _ = monitor
    }
}
