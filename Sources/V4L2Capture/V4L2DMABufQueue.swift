import CV4L2
import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// A queue of `V4L2_MEMORY_DMABUF` slots (a memory-to-memory encoder's OUTPUT queue fed with a camera's exported
/// buffers): REQBUFS with DMA-BUF memory, QBUF of a buffer's descriptors (`m.fd`, or `planes[].m.fd` on a
/// multi-planar queue) with each plane's bytes used and length, DQBUF, STREAMON/OFF and the teardown. Nothing is
/// mapped: the memory is the exporter's, and stays in use by the device from QBUF until the slot is dequeued.
///
/// A descriptor goes back to the slot it used last when that slot is free, so the driver keeps its import (vb2
/// re-imports only when a slot's descriptor changes).
///
/// Not thread-safe: it belongs to the encoding thread.
final class V4L2DMABufQueue {
    let node: V4L2Node
    let type: UInt32
    /// Memory planes per buffer (1 for a single-planar queue).
    let planeCount: Int
    /// True while the device has the slot.
    private(set) var queued: [Bool]
    /// The first plane's descriptor each slot was last queued with (-1: never).
    private var lastFD: [Int32]
    private let planeArray: UnsafeMutablePointer<v4l2_plane>?
    private var released = false

    /// REQBUFS `count` slots of DMA-BUF memory on `type`; an error names the count and the errno.
    init(node: V4L2Node, type: UInt32, planeCount: Int, count: Int) throws(CaptureError) {
        self.node = node
        self.type = type
        self.planeCount = planeCount
        planeArray = V4L2BufferSet.planeArray(for: type)
        var rb = v4l2_requestbuffers()
        rb.count = UInt32(clamping: count)
        rb.type = type
        rb.memory = V4L2_MEMORY_DMABUF.rawValue
        do { try node.io.ioctl(node.fd, .requestBuffers, &rb, "\(count) (DMA-BUF import)") } catch {
            planeArray?.deallocate()
            throw error
        }
        let granted = max(1, Int(rb.count))
        queued = Array(repeating: false, count: granted)
        lastFD = Array(repeating: -1, count: granted)
    }

    var count: Int { queued.count }

    private func descriptor(_ index: Int = 0) -> v4l2_buffer {
        var b = v4l2_buffer()
        b.index = UInt32(index)
        b.type = type
        b.memory = V4L2_MEMORY_DMABUF.rawValue
        if let planeArray {
            planeArray.update(repeating: v4l2_plane(), count: V4L2StreamFormat.maxPlanes)
            b.m.planes = planeArray
            b.length = UInt32(planeCount)
        }
        return b
    }

    /// A free slot, the one last queued with `fd` when it is free; nil when the device holds every slot.
    func freeSlot(for fd: Int32) -> Int? {
        if let i = lastFD.firstIndex(of: fd), !queued[i] { return i }
        return queued.indices.first { !queued[$0] && lastFD[$0] == -1 } ?? queued.firstIndex(of: false)
    }

    /// QBUF of slot `i` with `dmaBuf`'s planes (each with `bytesUsed[p]` of payload) and `timestamp`. Returns the
    /// errno.
    func queue(_ i: Int, _ dmaBuf: DMABuf, bytesUsed: [Int], timestamp: timeval) -> Errno? {
        var b = descriptor(i)
        b.timestamp = timestamp
        if let planeArray {
            for p in 0..<planeCount {
                planeArray[p].m.fd = dmaBuf.planes[p].fd
                planeArray[p].bytesused = UInt32(clamping: bytesUsed[p])
                planeArray[p].length = UInt32(clamping: dmaBuf.planes[p].length)
            }
        } else {
            b.m.fd = dmaBuf.planes[0].fd
            b.bytesused = UInt32(clamping: bytesUsed[0])
            b.length = UInt32(clamping: dmaBuf.planes[0].length)
        }
        if let e = node.io.errnoOf(node.fd, .queueBuffer, &b) { return e }
        queued[i] = true
        lastFD[i] = dmaBuf.planes[0].fd
        return nil
    }

    /// DQBUF: the slot the device gave back, or the errno (EAGAIN when none is ready).
    func dequeue() -> Result<Int, Errno> {
        var b = descriptor()
        if let e = node.io.errnoOf(node.fd, .dequeueBuffer, &b) { return .failure(e) }
        let i = Int(b.index)
        guard i < queued.count else { return .failure(Errno(EAGAIN)) }
        queued[i] = false
        return .success(i)
    }

    /// STREAMON.
    func streamOn(phase: V4L2Phase = .setup, _ detail: String = "") -> CaptureError? {
        var t = Int32(type)
        return node.io.errnoOf(node.fd, .streamOn, &t).map { node.io.error($0, "VIDIOC_STREAMON \(detail)", phase: phase) }
    }

    /// STREAMOFF (the device gives every slot back, and drops its imports), then REQBUFS(0). Idempotent.
    func release() {
        guard !released else { return }
        released = true
        var t = Int32(type)
        _ = node.io.errnoOf(node.fd, .streamOff, &t)
        for i in queued.indices { queued[i] = false }
        var rb = v4l2_requestbuffers()
        rb.count = 0
        rb.type = type
        rb.memory = V4L2_MEMORY_DMABUF.rawValue
        _ = node.io.errnoOf(node.fd, .requestBuffers, &rb)
        planeArray?.deallocate()
    }
}
