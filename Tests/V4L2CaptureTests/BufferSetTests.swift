import CV4L2
import Testing
import VideoCapture
@testable import V4L2Capture

/// The buffer model on its own (no stream, no thread): the format applier and `V4L2BufferSet` against the fake
/// kernel, single-planar as a group of one plane, multi-planar plane by plane, DMA-BUF exports, and what a
/// malformed reply leaves behind (nothing).
@Suite(.serialized) struct BufferSetTests {
    let request = StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 640, height: 480), fps: Fraction(30))
    let single = CV4L2_BUF_TYPE_VIDEO_CAPTURE
    let multi = CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE

    @Test func aSinglePlanarBufferIsAGroupOfOnePlane() throws {
        let k = FakeKernel()
        let node = try V4L2Node(path: "/dev/video0", kernel: k)
        let format = try V4L2StreamFormat.apply(node, request, type: single)
        #expect(format.planes == [PlaneFormat(stride: 1344, needed: 1344 * 480)] && format.sizeImage == 1344 * 480)
        #expect(format.applied.stride == 1344 && format.applied.fps == Fraction(30))
        let set = try V4L2BufferSet(node: node, type: single, planeFormats: format.planes, count: 3, exportDMABuf: true)
        #expect(set.count == 3 && k.mappedCount == 3)
        #expect(set.exports.map { $0?.planes.count } == [1, 1, 1] && k.openCount == 4, "one export per buffer, beside the device")
        #expect(set.queueFree() == nil && set.streamOn() == nil && set.queued == [true, true, true])
        k.push([goodFrame(), .frame(bytesUsed: 100, flags: monotonicFlag, timestampNs: nil, sequence: nil)])
        let first = try set.dequeue().get()
        #expect(first.index == 0 && first.payload?.start == 0 && first.payload?.used == 1344 * 480 && first.payload?.layout == nil)
        #expect(set.queued == [false, true, true] && set.isFree(0))
        let short = try set.dequeue().get()
        #expect(short.index == 1 && short.payload == nil, "100 bytes of a 640x480 YUYV frame: a short buffer")
        #expect(set.dequeue().failure?.rawValue == EAGAIN, "nothing ready")
        // A consumer's reference keeps a buffer from being queued again.
        let held = set.storages[0]
        #expect(!set.isFree(0) && set.queueFree() == nil && set.queued == [false, true, true])
        set.release()
        #expect(k.mappedCount == 1 && !k.callLog.contains("REQBUFS 0"), "a held buffer stays mapped; no REQBUFS(0) while it is")
        #expect(held.capacity == 1344 * 480)
        _ = consume held
        #expect(k.mappedCount == 0 && k.openCount == 1, "the last reference unmaps the buffer and closes its export")
        node.close()
        #expect(k.openCount == 0)
    }

    @Test func separatePlanesAreMappedAndReportedPlaneByPlane() throws {
        let k = FakeKernel()
        k.multiPlanar = true
        k.dataOffset = 128
        let node = try V4L2Node(path: "/dev/video0", kernel: k)
        let format = try V4L2StreamFormat.apply(node, StreamRequest(pixelFormat: .nv12m, size: request.size, fps: Fraction(30)), type: multi)
        #expect(format.planes == [PlaneFormat(stride: 704, needed: 704 * 480), PlaneFormat(stride: 704, needed: 704 * 240)])
        let set = try V4L2BufferSet(node: node, type: multi, planeFormats: format.planes, count: 2, exportDMABuf: true)
        #expect(k.mappedCount == 4 && set.exports.map { $0?.planes.count } == [2, 2])
        #expect(set.queueFree() == nil && set.streamOn() == nil)
        k.push([goodFrame(), goodFrame()])
        for n in 0..<2 {
            let b = try set.dequeue().get()
            let p = try #require(b.payload)
            let l = try #require(p.layout)
            #expect(b.index == n && p.start == 128 && p.used == 704 * 480 && l.count == 2 && l.strides.0 == 704 && l.strides.1 == 704)
            let first = set.storages[n].baseAddress + p.start
            #expect(first.load(fromByteOffset: p.used - 1, as: UInt8.self) == FakeKernel.fill(buffer: n, plane: 0))
            #expect(first.load(fromByteOffset: l.offsets.1, as: UInt8.self) == FakeKernel.fill(buffer: n, plane: 1))
            #expect(first.load(fromByteOffset: l.offsets.1 + 704 * 240 - 1, as: UInt8.self) == FakeKernel.fill(buffer: n, plane: 1))
        }
        // A plane that claims more than its buffer: no payload.
        #expect(set.queueFree() == nil)
        k.configure { $0.bytesUsedExcess = 1 }
        k.push([goodFrame()])
        #expect(try set.dequeue().get().payload == nil)
        set.release()
        node.close()
        #expect(k.mappedCount == 0 && k.openCount == 0 && k.callLog.contains("REQBUFS 0"))
    }

    @Test func aSinglePlanarStrideTooShortForItsLinesIsRefusedByName() throws {
        let k = FakeKernel()
        k.extraStride = -2 // 1278 bytes for 640 YUYV pixels that need 1280
        let node = try V4L2Node(path: "/dev/video0", kernel: k)
        #expect {
            try V4L2StreamFormat.apply(node, request, type: single)
        } throws: {
            "\($0)".contains("bytesperline 1278 for plane 0 of YUYV 640x480, below the 1280")
        }
    }

    @Test func aFailedMappingLeavesNothingMappedOrExportedAndHandsTheBuffersBack() throws {
        let k = FakeKernel()
        k.multiPlanar = true
        let node = try V4L2Node(path: "/dev/video0", kernel: k)
        let format = try V4L2StreamFormat.apply(node, StreamRequest(pixelFormat: .nv12m, size: request.size, fps: Fraction(30)), type: multi)
        k.planeLengthShortfall = 100
        #expect {
            _ = try V4L2BufferSet(node: node, type: multi, planeFormats: format.planes, count: 4, exportDMABuf: true)
        } throws: {
            "\($0)".contains("buffer 0 plane 1 is \(704 * 240 - 100) bytes")
        }
        #expect(k.mappedCount == 0 && k.openCount == 1 && k.callLog.last == "REQBUFS 0", "\(k.callLog)")
        k.planeLengthShortfall = 0
        k.exportsDMABuf = false
        #expect {
            _ = try V4L2BufferSet(node: node, type: multi, planeFormats: format.planes, count: 4, exportDMABuf: true)
        } throws: {
            "\($0)".contains("VIDIOC_EXPBUF of buffer 0 plane 0")
        }
        #expect(k.mappedCount == 0 && k.openCount == 1)
        node.close()
    }
}
