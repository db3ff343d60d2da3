import CV4L2
public import VideoCapture
import Foundation
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// A streaming V4L2 camera: the format applied (`V4L2StreamFormat`: S_FMT/S_PARM, read back with G_FMT/G_PARM),
/// the driver's buffers (`V4L2BufferSet`), and a dedicated thread that polls with a timeout, dequeues, stamps and
/// hands each frame on. The stream keeps the thread, the drops, the timestamps and the hand-off; it never asks
/// which buffer API the device speaks.
///
/// Single-planar and multi-planar devices (`V4L2_CAP_VIDEO_CAPTURE_MPLANE`) stream alike: a single-planar
/// buffer is a group of one plane. A single-buffer format (`YUYV`, `NV12`, `YU12`, …) has one plane; a
/// separate-plane format (`NM12`, `YM12`, …) is delivered as one frame whose planes point into the separate
/// mappings (no copy). A plane shorter than its format needs, or longer than its buffer, makes the frame a short
/// buffer (dropped and counted).
///
/// **Frame lifetime contract** (the same for every backend, see `VideoFrame`). A delivered frame borrows the
/// driver's mmap'd buffer, read-only: no pixel is copied. The buffer goes back to the driver once every
/// `VideoFrame` referencing it is gone; the capture thread re-queues it on its next wake-up (at most
/// `pollTimeoutMs` later). Each held frame is one buffer the driver cannot fill: when the buffer just
/// dequeued was the last one the driver had (none queued, none free), the frame is copied into one of
/// `copyBuffers` private buffers allocated at start, so the driver never starves. When consumers also hold
/// every copy, the frame is dropped with reason `.buffersHeld`. Copies are counted (`CaptureStatistics.copied`);
/// nothing is allocated per frame. After `stop()`, frames still held stay valid; their mapping is released
/// with the last reference.
///
/// One driver breaks the contract the zero-copy rests on: v4l2loopback's writer fills its buffers round-robin
/// whether or not its reader still holds them, so a held frame would change under its consumer (seen in the VM
/// test: a recording's first frame, held while the file was set up, became the IDR four frames later, recorded
/// twice). From that driver (`VIDIOC_QUERYCAP` driver "v4l2 loopback") every frame is copied at dequeue, into
/// `bufferCount + copyBuffers` private buffers: one pass over its bytes, counted in `copied`.
public final class V4L2Stream: CaptureStream, @unchecked Sendable {
    // @unchecked: after init, the mutable members below are touched only by the capture thread, except
    // `stopFlag` (atomic) and `thread` (set once in init; its join is a Mutex).
    /// Buffers and timeouts of a stream; out-of-range values are clamped by the initializer.
    public struct Configuration: Sendable {
        /// Buffers requested from the driver (2...32; the driver may grant more). Few buffers keep latency low.
        public var bufferCount: Int = 4
        /// Private buffers for frames copied out of driver memory when consumers hold the others.
        public var copyBuffers: Int = 2
        /// How long the capture thread waits for a frame before it checks for a stop and returns released buffers, in
        /// milliseconds (at least 1).
        public var pollTimeoutMs: Int32 = 100
        /// No frame for this long: restart the stream once, then fail with `.timeout`.
        public var noFrameTimeoutNs: Int64 = 3_000_000_000
        /// Export every capture buffer as DMA-BUF (`VIDIOC_EXPBUF`) at start and hand its descriptors on each frame
        /// (`VideoFrameBuffer.dmaBuf`), for zero-copy consumers. Off by default; a driver that cannot export
        /// makes the start fail with an error naming `VIDIOC_EXPBUF`.
        public var exportDMABuf = false
        /// With `exportDMABuf`, the formats whose buffers are exported (the ones a consumer imports: a hardware
        /// encoder's `YU12`, `NV12`); empty, every format. A stream in another format exports nothing.
        public var exportedFormats: [PixelFormat] = []
        /// Whether a stream in `format` exports its buffers.
        public func exports(_ format: PixelFormat) -> Bool { exportDMABuf && (exportedFormats.isEmpty || exportedFormats.contains(format)) }
        /// Settings with `bufferCount` clamped to 2...32, `copyBuffers` to 0...8 and `pollTimeoutMs` to at least 1.
        public init(bufferCount: Int = 4, copyBuffers: Int = 2, pollTimeoutMs: Int32 = 100, noFrameTimeoutNs: Int64 = 3_000_000_000) {
            self.bufferCount = max(2, min(32, bufferCount))
            self.copyBuffers = max(0, min(8, copyBuffers))
            self.pollTimeoutMs = max(1, pollTimeoutMs)
            self.noFrameTimeoutNs = noFrameTimeoutNs
        }
    }

    /// The format, size, stride and rate the driver set (read back with `VIDIOC_G_FMT` and `VIDIOC_G_PARM`).
    public let applied: AppliedFormat
    /// The device node (`/dev/video0`).
    public let path: String
    /// Carried on every frame: the override, else the driver's `V4L2_CID_CAMERA_SENSOR_ROTATION` (turned
    /// clockwise), else none.
    public let rotation: VideoRotation
    private let node: V4L2Node
    private let configuration: Configuration
    private let sink: FrameSink
    private let format: V4L2StreamFormat
    /// The driver's buffers (one buffer model for single- and multi-planar devices).
    private let buffers: V4L2BufferSet
    private var copies: [FrameStorage] = []
    /// The driver rewrites buffers its reader holds (v4l2loopback): every frame is copied at dequeue.
    private let copiesEveryFrame: Bool
    /// The capture thread's stop flag (WorkerThread's protocol: set, then join; the loop polls with a timeout).
    private let stopFlag = StopFlag()
    private var thread: WorkerThread?
    private var lastTimestamp: Int64 = .min
    private var lastSequence: UInt32?
    private var sawSecondFrame = false
    private var released = false
    /// An H.264 camera with `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME` (queried once at start).
    private let canForceKeyFrame: Bool
    /// Set by `requestKeyFrame()` (any thread); the capture thread presses the button on its next wake-up, so the
    /// descriptor is only ever used by the thread that closes it.
    private let keyFrameRequested = Atomic<Bool>(false)
    /// An H.264 camera's `V4L2_CID_MPEG_VIDEO_BITRATE` as queried at start (its range), and the value asked by
    /// `requestBitrate(_:)` that the capture thread sets on its next wake-up (0: none pending).
    private let bitrateControl: CameraControl?
    private let bitrateRequested = Atomic<Int>(0)

    init(
        path: String, request: StreamRequest, kernel: any V4L2Kernel, configuration: Configuration,
        rotationOverride: VideoRotation? = nil, sink: FrameSink
    ) throws(CaptureError) {
        self.path = path
        self.configuration = configuration
        self.sink = sink
        let node = try V4L2Node(path: path, kernel: kernel)
        self.node = node
        var buffers: V4L2BufferSet?
        var started = false
        defer {
            if !started { // nothing left open on a failed start
                buffers?.release()
                node.close()
            }
        }
        let caps = try node.capabilities()
        guard caps.isVideoCapture else {
            throw CaptureError(.notACaptureDevice, "\(path) (\(caps.card)) is not a streaming video capture device", device: path)
        }
        copiesEveryFrame = caps.driver == V4L2Stream.driverRewritingHeldBuffers
        if node.hasDVTimings() { _ = try node.detectedSignal(lock: true) } // a receiver locks what it detects first
        _ = node.subscribeSourceChanges() // POLLPRI then says the source changed; a driver without events never does
        let format = try V4L2StreamFormat.apply(node, request, type: caps.bufferType)
        self.format = format
        self.applied = format.applied
        self.rotation =
            rotationOverride ?? node.property(.cameraSensorRotation).flatMap(VideoRotation.init(sensorRotationCounterClockwise:)) ?? .rotation0
        let h264 = format.applied.pixelFormat == .h264
        self.canForceKeyFrame = h264 && ((try? node.control(.forceKeyFrame)) ?? nil) != nil
        self.bitrateControl = h264 ? ((try? node.control(.videoBitrate)) ?? nil).flatMap { $0.isReadOnly || $0.maximum <= 0 ? nil : $0 } : nil
        let set = try V4L2BufferSet(
            node: node, type: caps.bufferType, planeFormats: format.planes, count: configuration.bufferCount,
            exportDMABuf: configuration.exports(format.applied.pixelFormat))
        buffers = set
        self.buffers = set
        if let e = set.queueFree(phase: .setup) ?? set.streamOn() { throw e }
        let copyCount = configuration.copyBuffers + (copiesEveryFrame ? configuration.bufferCount : 0)
        copies = (0..<copyCount).map { _ in FrameStorage(pooledCapacity: format.sizeImage) }
        started = true
        thread = WorkerThread(name: "v4l2-capture", stopFlag: stopFlag) { [self] _ in run() }
    }

    /// The `VIDIOC_QUERYCAP` driver name of v4l2loopback, whose writer rewrites buffers its reader still holds.
    static let driverRewritingHeldBuffers = "v4l2 loopback"

    /// Buffers currently mapped (also those held by consumers after stop).
    public var mappedBuffers: Int { buffers.counter.value.load(ordering: .relaxed) }

    /// For an H.264 camera: asks for a key frame with `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME` (a button control),
    /// pressed by the capture thread on its next wake-up (within a frame, at most `pollTimeoutMs`). False, and
    /// nothing done, when the camera does not deliver H.264, has no such control, or the stream has stopped.
    public func requestKeyFrame() -> Bool {
        guard canForceKeyFrame, !stopFlag.isSet else { return false }
        keyFrameRequested.store(true, ordering: .releasing)
        return true
    }

    /// For an H.264 camera: asks for a target bitrate with `V4L2_CID_MPEG_VIDEO_BITRATE`, clamped to the control's
    /// range and set by the capture thread on its next wake-up (the last request wins). False, and nothing done,
    /// when the camera has no such control or the stream has stopped.
    public func requestBitrate(_ bitsPerSecond: Int) -> Bool {
        guard let c = bitrateControl, !stopFlag.isSet else { return false }
        let v = Int(clamping: c.rounded(min(max(Int64(bitsPerSecond), max(c.minimum, 1)), c.maximum)))
        bitrateRequested.store(max(v, 1), ordering: .releasing)
        return true
    }

    /// Stops streaming (`STREAMOFF`), ends the capture thread and closes the device; returns when that is done.
    /// Buffers still held by frames stay mapped until their last frame goes. Idempotent, from any thread.
    public func stop() {
        if let thread { thread.stop() } else { stopFlag.set() }
    }

    // MARK: - Capture thread

    private func run() {
        var lastFrameAt = monotonicNanoseconds()
        var restarted = false
        while !stopFlag.isSet {
            if let e = buffers.queueFree() { return fail(e) }
            if keyFrameRequested.exchange(false, ordering: .acquiringAndReleasing) {
                // A refusal (EBUSY, EACCES) costs only the request: the camera's next scheduled IDR still comes.
                _ = try? node.setControl(.forceKeyFrame, to: .integer(0))
            }
            let bitrate = bitrateRequested.exchange(0, ordering: .acquiringAndReleasing)
            if bitrate > 0 { _ = try? node.setControl(.videoBitrate, to: .integer(Int64(bitrate))) }
            let r = node.io.kernel.poll(node.fd, timeoutMs: configuration.pollTimeoutMs)
            if r < 0 { return fail(node.io.error(Errno(-r), "poll", phase: .streaming)) }
            if r == 0 {
                if monotonicNanoseconds() - lastFrameAt > configuration.noFrameTimeoutNs {
                    if restarted {
                        let ms = configuration.noFrameTimeoutNs / 1_000_000
                        return fail(
                            CaptureError(.timeout, "\(path) delivered no frame for \(ms) ms, even after restarting the stream", device: path))
                    }
                    restarted = true
                    buffers.streamOff() // every buffer comes back to us
                    if let e = buffers.queueFree() ?? buffers.streamOn(phase: .streaming, "(restart)") { return fail(e) }
                    lastFrameAt = monotonicNanoseconds()
                }
                continue
            }
            if Int16(truncatingIfNeeded: r) & Int16(POLLPRI) != 0, node.sourceChanged() {
                return fail(CaptureError(.sourceChanged, "the source of \(path) changed (V4L2_EVENT_SOURCE_CHANGE)", device: path))
            }
            if Int16(truncatingIfNeeded: r) & ~Int16(POLLPRI) == 0 { continue } // an event, no buffer
            switch buffers.dequeue() {
            case .failure(let e) where e.rawValue == EAGAIN: continue
            case .failure(let e): return fail(node.io.error(e, "VIDIOC_DQBUF", phase: .streaming))
            case .success(let b):
                lastFrameAt = monotonicNanoseconds()
                restarted = false
                handle(b)
            }
        }
        release()
    }

    private func handle(_ b: V4L2BufferSet.Dequeued) {
        // Driver-side drops: gaps in the sequence numbers. A jump of a million or more is not a gap but a
        // driver that restarted its counter (or wrapped): not reported as drops.
        // Nor is a jump from a first frame numbered 0: v4l2loopback resets every buffer's sequence to 0 at VIDIOC_REQBUFS
        // and may hand a reader one written before it started, then its running count (frames before the reader).
        let firstFromZero = lastSequence == 0 && !sawSecondFrame
        if lastSequence != nil { sawSecondFrame = true }
        if let last = lastSequence, b.sequence > last &+ 1, b.sequence &- last < 1 << 20, !firstFromZero {
            sink.dropped(.driverDropped, Int(b.sequence &- last &- 1))
        }
        lastSequence = b.sequence
        if b.flags & CV4L2_BUF_FLAG_ERROR != 0 { return sink.dropped(.corruptBuffer, 1) }
        guard let payload = b.payload else { return sink.dropped(.shortBuffer, 1) }
        var (start, used, layout) = (payload.start, payload.used, payload.layout)

        // Timestamp: the buffer's, when it is on the monotonic clock, after the previous one, not in the future
        // and less than 1 s old (older means a driver bug or a stale buffer: a frame is never that late in a
        // queue of a few buffers). Otherwise the clock at dequeue, which is at most one frame period late:
        // acceptable for pacing and A/V sync, and always increasing.
        let now = monotonicNanoseconds()
        var ts = now
        if b.flags & CV4L2_BUF_FLAG_TIMESTAMP_MASK == CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC {
            let bts = Int64(b.timestamp.tv_sec) * 1_000_000_000 + Int64(b.timestamp.tv_usec) * 1_000
            if bts > lastTimestamp && bts <= now && now - bts < 1_000_000_000 { ts = bts }
        }
        if ts <= lastTimestamp { ts = lastTimestamp + 1 }
        lastTimestamp = ts

        let index = b.index
        var storage = buffers.storages[index]
        // Keep a buffer with the driver: when none is queued and none is free to queue, copy this frame into a
        // private buffer so this one goes straight back; with every copy held too, drop the frame. From a driver
        // that rewrites held buffers, always.
        let stillQueued = buffers.queued.contains(true)
        let free = (0..<buffers.count).contains { $0 != index && buffers.isFree($0) }
        if copiesEveryFrame || (!stillQueued && !free) {
            let copySize = layout == nil ? used : format.planes.dropFirst().reduce(used) { $0 + $1.needed }
            guard let c = freeCopy(copySize) else { return sink.dropped(.buffersHeld, 1) }
            if let l = layout {
                layout = copyPlanes(l, from: storage.baseAddress + start, firstPlaneBytes: used, into: c)
            } else {
                c.mutableBaseAddress.copyMemory(from: storage.baseAddress + start, byteCount: used)
            }
            storage = c
            start = 0
            sink.copied()
        }
        let (pf, size) = (applied.pixelFormat, applied.size)
        var buffer =
            if let layout {
                VideoFrameBuffer(
                    pixelFormat: pf, width: size.width, height: size.height, planes: layout, firstPlaneBytes: used, storage: storage,
                    offset: start)
            } else {
                VideoFrameBuffer(
                    pixelFormat: pf, width: size.width, height: size.height, stride: applied.stride, bytesUsed: used, storage: storage,
                    offset: start)
            }
        if !buffers.exports.isEmpty, storage === buffers.storages[index] { buffer.dmaBuf = buffers.exports[index] } // not on a copy
        var frame = VideoFrame(buffer: buffer, rotation: rotation, timestampNs: ts, sequence: UInt64(b.sequence), colorSpace: applied.colorSpace)
        if pf == .h264 {
            // The driver's flag when it sets one (KEYFRAME, or PFRAME/BFRAME for the others); a driver that flags
            // nothing (v4l2loopback, many UVC cameras): the access unit's own NAL types.
            let typeFlags = b.flags & (CV4L2_BUF_FLAG_KEYFRAME | CV4L2_BUF_FLAG_PFRAME | CV4L2_BUF_FLAG_BFRAME)
            frame.isKeyFrame =
                typeFlags != 0
                ? typeFlags & CV4L2_BUF_FLAG_KEYFRAME != 0
                : AnnexBScan.hasIDRSlice(UnsafeRawBufferPointer(start: storage.baseAddress + start, count: used))
        }
        sink.frame(frame)
    }

    /// Copies separate planes one after the other into a private buffer; the layout of the copy.
    private func copyPlanes(_ l: PlaneLayout, from first: UnsafeRawPointer, firstPlaneBytes: Int, into c: FrameStorage) -> PlaneLayout {
        let dst = c.mutableBaseAddress
        dst.copyMemory(from: first, byteCount: firstPlaneBytes)
        var at = firstPlaneBytes
        var offsets = (0, 0, 0)
        if l.count > 1 {
            offsets.1 = at
            dst.advanced(by: at).copyMemory(from: first.advanced(by: l.offsets.1), byteCount: format.planes[1].needed)
            at += format.planes[1].needed
        }
        if l.count > 2 {
            offsets.2 = at
            dst.advanced(by: at).copyMemory(from: first.advanced(by: l.offsets.2), byteCount: format.planes[2].needed)
        }
        return PlaneLayout(count: l.count, offsets: offsets, strides: l.strides)
    }

    /// A copy buffer no consumer holds, or nil.
    private func freeCopy(_ size: Int) -> FrameStorage? {
        for i in copies.indices where copies[i].capacity >= size && isKnownUniquelyReferenced(&copies[i]) { return copies[i] }
        return nil
    }

    private func release() {
        guard !released else { return }
        released = true
        copies.removeAll()
        buffers.release()
        node.close()
    }

    private func fail(_ error: CaptureError) {
        release()
        sink.failed(error)
    }
}
