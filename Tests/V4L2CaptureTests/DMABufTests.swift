import CV4L2
import Foundation
import Synchronization
import Testing
import TestSupport
import VideoCapture
@testable import V4L2Capture

/// DMA-BUF export (`V4L2Stream.Configuration.exportDMABuf`) against the fake kernel: one descriptor per buffer and
/// memory plane, asked once at start (none per frame), handed on every frame of driver memory, closed with the
/// buffer's mapping; a driver that cannot export fails the start by name. The bytes behind a real export are
/// compared with the frame's on vivid in the VM (`vivid-check`).
@Suite(.serialized, .timeLimit(.minutes(1))) struct DMABufTests {
    var exporting: V4L2Stream.Configuration {
        var c = fakeStreamConfig
        c.exportDMABuf = true
        return c
    }

    @Test func everyBufferIsExportedOnceAndEveryFrameCarriesItsOwn() throws {
        let k = FakeKernel()
        k.push((0..<12).map { _ in goodFrame() })
        let seen = Mutex<[Int32]>([])
        let sink = FrameSink(
            frame: { f in seen.withLock { $0.append(f.buffer.dmaBuf?.planes.first?.fd ?? -1) } }, dropped: { _, _ in }, failed: { _ in },
            copied: {})
        let dev = fakeDev()
        let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: exporting)
        let device = try #require(try provider.device(for: dev + "/video0"))
        let stream = try #require(
            try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 640, height: 480), fps: Fraction(30)),
                sink: sink) as? V4L2Stream)
        #expect(waitUntil(timeout: 5, every: 0.005) { seen.withLock { $0.count == 12 } })
        let exports = k.callLog.filter { $0.hasPrefix("EXPBUF") }
        #expect(exports.count == fakeStreamConfig.bufferCount, "one export per buffer, at start only: \(exports)")
        let fds = seen.withLock { $0 }
        #expect(fds.allSatisfy { $0 > 0 } && Set(fds).count == exports.count, "each frame carries its buffer's descriptor: \(fds)")
        let open = k.openCount
        stream.stop()
        #expect(k.openCount == 0 && open >= 1 + exports.count, "the device and \(exports.count) exports were open; after stop \(k.openCount)")
    }

    @Test func separatePlanesAreExportedPlaneByPlane() throws {
        let k = FakeKernel()
        k.push((0..<3).map { _ in goodFrame() })
        let s = Sink(hold: true)
        let stream = try startMultiPlanar(k, s, .nv12m, config: exporting)
        #expect(s.wait { $0.frames.count == 3 })
        let planes = s.lock.withLock { s.frames.map { $0.buffer.dmaBuf?.planes.count ?? 0 } }
        #expect(planes == [2, 2, 2], "NM12: two memory planes each: \(planes)")
        #expect(k.callLog.filter { $0.hasPrefix("EXPBUF") }.count == fakeStreamConfig.bufferCount * 2)
        s.lock.withLock { s.frames.removeAll() }
        stream.stop()
        #expect(k.openCount == 0)
    }

    @Test func onlyTheListedFormatsAreExported() throws {
        var c = exporting
        c.exportedFormats = [.i420, .nv12] // what a hardware encoder imports: a YUYV stream exports nothing
        let k = FakeKernel()
        k.push([goodFrame()])
        let s = Sink(hold: true)
        let stream = try startStream(k, s, config: c)
        #expect(s.wait { $0.frames.count == 1 })
        #expect(s.lock.withLock { s.frames[0].buffer.dmaBuf == nil } && !k.callLog.contains { $0.hasPrefix("EXPBUF") }, "\(k.callLog)")
        s.lock.withLock { s.frames.removeAll() }
        stream.stop()
        #expect(c.exports(.nv12) && !c.exports(.yuyv) && exporting.exports(.yuyv) && !fakeStreamConfig.exports(.i420))
    }

    @Test func aDriverThatCannotExportFailsTheStartByNameAndLeavesNothingOpen() throws {
        let k = FakeKernel()
        k.exportsDMABuf = false
        let s = Sink()
        do {
            let stream = try startStream(k, s, config: exporting)
            stream.stop()
            Issue.record("started without an export")
        } catch let e as CaptureError {
            #expect(e.message.contains("VIDIOC_EXPBUF of buffer 0 plane 0") && e.message.contains("exportDMABuf"), "\(e)")
        }
        #expect(k.openCount == 0 && k.mapped.isEmpty)
        // Off (the default): no export is asked and frames carry none.
        let k2 = FakeKernel()
        k2.push([goodFrame()])
        let s2 = Sink(hold: true)
        let plain = try startStream(k2, s2)
        #expect(s2.wait { $0.frames.count == 1 })
        #expect(s2.lock.withLock { s2.frames[0].buffer.dmaBuf == nil } && !k2.callLog.contains { $0.hasPrefix("EXPBUF") })
        s2.lock.withLock { s2.frames.removeAll() }
        plain.stop()
    }
}
