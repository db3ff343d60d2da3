import CV4L2
public import VideoCapture
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A streaming V4L2 camera: S_FMT/S_PARM, read back with G_FMT/G_PARM, mmap buffers, a dedicated thread
/// that polls with a timeout and dequeues.
///
/// **Frame lifetime contract.** A delivered frame borrows the driver's mmap'd buffer: no pixel is copied.
/// The buffer goes back to the driver once every `VideoFrame` referencing it is gone; the capture thread
/// re-queues it on its next wake-up (at most `pollTimeoutMs` later). Consumers may hold frames as long as
/// they like, but each held frame is one buffer the driver cannot fill: when only one buffer would be left
/// queued, the newest frame is copied into a private buffer instead, so the driver never starves.
/// After `stop()`, frames still held stay valid; their mapping is released with the last reference.
public final class V4L2Stream: CaptureStream, @unchecked Sendable {
    // @unchecked: after init, the mutable members below are touched only by the capture thread, except
    // `stopRequested` (atomic) and `thread` (set once in init; its join is a Mutex).
    public struct Configuration: Sendable {
        public var bufferCount: Int = 4
        public var pollTimeoutMs: Int32 = 100
        /// No frame for this long: restart the stream once, then fail with `.timeout`.
        public var noFrameTimeoutNs: Int64 = 3_000_000_000
        public init(bufferCount: Int = 4, pollTimeoutMs: Int32 = 100, noFrameTimeoutNs: Int64 = 3_000_000_000) {
            self.bufferCount = max(2, bufferCount); self.pollTimeoutMs = pollTimeoutMs; self.noFrameTimeoutNs = noFrameTimeoutNs
        }
    }

    public let applied: AppliedFormat
    public let path: String
    private let node: V4L2Node
    private let io: V4L2IO
    private let configuration: Configuration
    private let sink: FrameSink
    private let sizeImage: Int
    private var slots: [FrameStorage] = []
    private var queued: [Bool] = []
    private var copies: [FrameStorage] = []
    private let mappedCount = MapCounter()
    private let stopRequested = Atomic<Bool>(false)
    private var thread: CaptureThread?
    private var lastTimestamp: Int64 = .min
    private var lastSequence: UInt32?
    private var released = false

    init(path: String, request: StreamRequest, kernel: any V4L2Kernel, configuration: Configuration, sink: FrameSink) throws(CaptureError) {
        self.path = path
        self.configuration = configuration
        self.sink = sink
        let node = try V4L2Node(path: path, kernel: kernel)
        let io = node.io
        self.node = node
        self.io = io
        let fd = node.fd
        var setupOK = false
        var slotsMade: [FrameStorage] = []
        defer {
            if !setupOK {
                // Nothing left open on a failed start.
                var off = Int32(CV4L2_BUF_TYPE_VIDEO_CAPTURE)
                _ = io.call(fd, CV4L2_VIDIOC_STREAMOFF, &off)
                slotsMade.removeAll()
                var rb = v4l2_requestbuffers(); rb.count = 0; rb.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; rb.memory = CV4L2_MEMORY_MMAP
                _ = io.call(fd, CV4L2_VIDIOC_REQBUFS, &rb)
                node.close()
            }
        }
        let caps = try node.capabilities()
        guard caps.isVideoCapture else {
            throw CaptureError(.notACaptureDevice, "\(path) (\(caps.card)) is not a streaming video capture device", device: path)
        }
        // Format: ask, then read back what the driver applied.
        var fmt = v4l2_format()
        fmt.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        fmt.fmt.pix.width = UInt32(request.size.width); fmt.fmt.pix.height = UInt32(request.size.height)
        fmt.fmt.pix.pixelformat = request.pixelFormat.rawValue
        fmt.fmt.pix.field = CV4L2_FIELD_ANY
        try io.check(fd, CV4L2_VIDIOC_S_FMT, "VIDIOC_S_FMT \(request.pixelFormat) \(request.size)", &fmt)
        var got = v4l2_format(); got.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        try io.check(fd, CV4L2_VIDIOC_G_FMT, "VIDIOC_G_FMT", &got)
        let pf = PixelFormat(rawValue: got.fmt.pix.pixelformat)
        guard pf == request.pixelFormat else {
            throw CaptureError(.unsupportedFormat, "\(path) applied \(pf) instead of the requested \(request.pixelFormat)", device: path)
        }
        let size = FrameSize(width: Int(got.fmt.pix.width), height: Int(got.fmt.pix.height))
        let stride = pf.isCompressed ? 0 : Int(got.fmt.pix.bytesperline)
        sizeImage = Int(got.fmt.pix.sizeimage)
        // Frame rate: S_PARM then G_PARM (the driver may round).
        var parm = v4l2_streamparm(); parm.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        parm.parm.capture.timeperframe.numerator = UInt32(clamping: request.fps.denominator)
        parm.parm.capture.timeperframe.denominator = UInt32(clamping: request.fps.numerator)
        var fps = request.fps
        if io.call(fd, CV4L2_VIDIOC_S_PARM, &parm) == 0 {
            var g = v4l2_streamparm(); g.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
            if io.call(fd, CV4L2_VIDIOC_G_PARM, &g) == 0 {
                let tpf = g.parm.capture.timeperframe
                if tpf.numerator > 0 && tpf.denominator > 0 { fps = Fraction(Int64(tpf.denominator), Int64(tpf.numerator)) }
            }
        }
        applied = AppliedFormat(pixelFormat: pf, size: size, stride: stride, fps: fps)

        // Buffers: REQBUFS, QUERYBUF + mmap each, QBUF all, STREAMON.
        var rb = v4l2_requestbuffers()
        rb.count = UInt32(configuration.bufferCount); rb.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; rb.memory = CV4L2_MEMORY_MMAP
        try io.check(fd, CV4L2_VIDIOC_REQBUFS, "VIDIOC_REQBUFS \(configuration.bufferCount)", &rb)
        guard rb.count >= 2 else { throw CaptureError(.streamFailed, "\(path) granted only \(rb.count) buffer(s); at least 2 are needed", device: path) }
        let counter = mappedCount
        for i in 0..<Int(rb.count) {
            var b = v4l2_buffer(); b.index = UInt32(i); b.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; b.memory = CV4L2_MEMORY_MMAP
            try io.check(fd, CV4L2_VIDIOC_QUERYBUF, "VIDIOC_QUERYBUF \(i)", &b)
            let length = Int(b.length)
            let (p, e) = kernel.mmap(fd, length: length, offset: Int64(b.m.offset))
            guard let p else { throw io.error(e, "mmap of buffer \(i)") }
            counter.value.add(1, ordering: .relaxed)
            let address = UInt(bitPattern: p)
            slotsMade.append(FrameStorage(borrowing: p, capacity: length) {
                kernel.munmap(UnsafeMutableRawPointer(bitPattern: address)!, length: length)
                counter.value.subtract(1, ordering: .relaxed)
            })
        }
        for i in 0..<slotsMade.count {
            var b = v4l2_buffer(); b.index = UInt32(i); b.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; b.memory = CV4L2_MEMORY_MMAP
            try io.check(fd, CV4L2_VIDIOC_QBUF, "VIDIOC_QBUF \(i)", &b)
        }
        var on = Int32(CV4L2_BUF_TYPE_VIDEO_CAPTURE)
        try io.check(fd, CV4L2_VIDIOC_STREAMON, "VIDIOC_STREAMON", &on)
        slots = slotsMade
        queued = Array(repeating: true, count: slotsMade.count)
        slotsMade = []
        setupOK = true
        thread = CaptureThread(name: "v4l2-capture") { [self] in run() }
    }

    /// Buffers currently mapped (also those held by consumers after stop).
    public var mappedBuffers: Int { mappedCount.value.load(ordering: .relaxed) }

    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        thread?.join()
    }

    // MARK: - Capture thread

    private func run() {
        var lastFrameAt = monotonicNanoseconds()
        var restarted = false
        while !stopRequested.load(ordering: .acquiring) {
            if let e = requeueFree() { fail(e); return }
            let r = io.kernel.poll(node.fd, timeoutMs: configuration.pollTimeoutMs)
            if r < 0 {
                if -r == EINTR { continue }
                fail(io.error(-r, "poll")); return
            }
            if r == 0 {
                if monotonicNanoseconds() - lastFrameAt > configuration.noFrameTimeoutNs {
                    if restarted {
                        fail(CaptureError(.timeout, "\(path) delivered no frame for \(configuration.noFrameTimeoutNs / 1_000_000) ms, even after restarting the stream", device: path))
                        return
                    }
                    restarted = true
                    if let e = restartStream() { fail(e); return }
                    lastFrameAt = monotonicNanoseconds()
                }
                continue
            }
            var b = v4l2_buffer(); b.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; b.memory = CV4L2_MEMORY_MMAP
            let e = io.call(node.fd, CV4L2_VIDIOC_DQBUF, &b)
            if e == EAGAIN { continue }
            if e != 0 {
                let err = (e == EIO || e == ENODEV || e == ENXIO || e == EPIPE)
                    ? CaptureError(.disconnected, "\(path) disconnected or failed mid-stream (VIDIOC_DQBUF)", errno: e, device: path)
                    : io.error(e, "VIDIOC_DQBUF")
                fail(err); return
            }
            let index = Int(b.index)
            guard index < slots.count else { continue }
            queued[index] = false
            lastFrameAt = monotonicNanoseconds()
            restarted = false
            handle(b, index: index)
        }
        release()
    }

    private func handle(_ b: v4l2_buffer, index: Int) {
        // Driver-side drops: gaps in the sequence numbers.
        if let last = lastSequence, b.sequence > last &+ 1, b.sequence &- last < 1 << 20 {
            sink.dropped(.driverDropped, Int(b.sequence &- last &- 1))
        }
        lastSequence = b.sequence
        if b.flags & CV4L2_BUF_FLAG_ERROR != 0 { sink.dropped(.corruptBuffer, 1); return }
        let used = Int(b.bytesused)
        let needed = applied.pixelFormat.frameSize(width: applied.size.width, height: applied.size.height, stride: applied.stride) ?? 1
        if used < needed || used > slots[index].capacity { sink.dropped(.shortBuffer, 1); return }

        // Timestamp: the buffer's, when monotonic and sane; else the clock at dequeue.
        let now = monotonicNanoseconds()
        var ts = now
        if b.flags & CV4L2_BUF_FLAG_TIMESTAMP_MASK == CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC {
            let bts = Int64(b.timestamp.tv_sec) * 1_000_000_000 + Int64(b.timestamp.tv_usec) * 1_000
            if bts > lastTimestamp && bts <= now && now - bts < 1_000_000_000 { ts = bts }
        }
        if ts <= lastTimestamp { ts = lastTimestamp + 1 }
        lastTimestamp = ts

        var storage = slots[index]
        // Keep at least one buffer with the driver: copy when this was the last one queued.
        let stillQueued = queued.lazy.filter { $0 }.count
        let free = (0..<slots.count).contains { $0 != index && !queued[$0] && isKnownUniquelyReferenced(&slots[$0]) }
        if stillQueued == 0 && !free {
            storage = copyStorage(used)
            storage.baseAddress.copyMemory(from: slots[index].baseAddress, byteCount: used)
        }
        let buffer = VideoFrameBuffer(pixelFormat: applied.pixelFormat, width: applied.size.width, height: applied.size.height,
                                      stride: applied.stride, bytesUsed: used, storage: storage)
        sink.frame(VideoFrame(buffer: buffer, timestampNs: ts, sequence: UInt64(b.sequence)))
    }

    private func copyStorage(_ size: Int) -> FrameStorage {
        for i in copies.indices where copies[i].capacity >= size && isKnownUniquelyReferenced(&copies[i]) { return copies[i] }
        let s = FrameStorage(capacity: max(size, sizeImage))
        if copies.count < 2 { copies.append(s) }
        return s
    }

    /// Re-queues every buffer no consumer holds any more.
    private func requeueFree() -> CaptureError? {
        for i in slots.indices where !queued[i] && isKnownUniquelyReferenced(&slots[i]) {
            var b = v4l2_buffer(); b.index = UInt32(i); b.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; b.memory = CV4L2_MEMORY_MMAP
            let e = io.call(node.fd, CV4L2_VIDIOC_QBUF, &b)
            if e != 0 {
                if e == ENODEV || e == EIO { return CaptureError(.disconnected, "\(path) disconnected (VIDIOC_QBUF)", errno: e, device: path) }
                return CaptureError(.streamFailed, "VIDIOC_QBUF of buffer \(i) failed on \(path); capture stopped", errno: e, device: path)
            }
            queued[i] = true
        }
        return nil
    }

    private func restartStream() -> CaptureError? {
        var t = Int32(CV4L2_BUF_TYPE_VIDEO_CAPTURE)
        _ = io.call(node.fd, CV4L2_VIDIOC_STREAMOFF, &t)
        for i in queued.indices { queued[i] = false }   // STREAMOFF returns every buffer to us
        if let e = requeueFree() { return e }
        let e = io.call(node.fd, CV4L2_VIDIOC_STREAMON, &t)
        return e == 0 ? nil : io.error(e, "VIDIOC_STREAMON (restart)")
    }

    /// STREAMOFF, unmap what no consumer holds, REQBUFS(0) once nothing is mapped, close.
    private func release() {
        guard !released else { return }
        released = true
        var t = Int32(CV4L2_BUF_TYPE_VIDEO_CAPTURE)
        _ = io.call(node.fd, CV4L2_VIDIOC_STREAMOFF, &t)
        slots.removeAll()
        copies.removeAll()
        if mappedCount.value.load(ordering: .relaxed) == 0 {
            var rb = v4l2_requestbuffers(); rb.count = 0; rb.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE; rb.memory = CV4L2_MEMORY_MMAP
            _ = io.call(node.fd, CV4L2_VIDIOC_REQBUFS, &rb)
        }
        // Closing with mappings still held by consumers is safe: the kernel frees them at munmap.
        node.close()
    }

    private func fail(_ error: CaptureError) {
        release()
        sink.failed(error)
    }
}

/// Counts live mappings; shared with each buffer's release closure.
final class MapCounter: Sendable {
    let value = Atomic<Int>(0)
}
