import CPipeWire
public import VideoCapture
import VideoCaptureCommons
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// A capture stream from a PipeWire camera node: a `pw_stream` consumer linked to the node (by the session
/// manager, with `target.object`), on a thread of its own that runs the stream's PipeWire loop.
///
/// From a client's stream (a virtual camera), a frame is read in place: it is PipeWire's buffer itself (the stream
/// maps each buffer's memfd or DMA-BUF when PipeWire adds it), placed by its chunk's offset and row stride (which
/// may exceed the width: padded rows), and the buffer goes back to PipeWire once the last consumer lets the frame
/// go; the mapping outlives the stream while a frame still reads it. Two buffers always stay with PipeWire: a frame
/// that would leave fewer, a buffer of memory the stream could not map, every frame of a node of PipeWire's device
/// monitors (which reuses a buffer at its next cycle whatever its consumers hold) and every frame with
/// ``PipeWireCameraProvider/Configuration/zeroCopy`` off are copied once, in the V4L2 single-buffer layout with rows of the width (``applied``'s stride), into one of a few
/// private buffers (``PipeWireCameraProvider/Configuration/frameBuffers``) reused for every frame, and the buffer
/// goes back at once. A frame's timestamp is the buffer's `spa_meta_header` pts when it is on
/// the monotonic clock, after the previous one and not in the future, else the monotonic clock on arrival. Gaps
/// in the header's sequence numbers are reported as `.driverDropped`; buffers flagged corrupt,
/// or shorter than the format needs, are dropped and counted.
///
/// The stream ends with `.disconnected` when its node leaves PipeWire, its link goes away or
/// the connection breaks, with `.streamFailed` when PipeWire reports a stream error, and with
/// `.timeout` when no buffer comes for the configured time.
public final class PipeWireStream: CaptureStream, @unchecked Sendable {
    // @unchecked: after init, `receiver` and `handle`'s loop are used only by the stream's thread; `handle` guards
    // the wake-up and the close with its lock, `stopFlag` is atomic.
    /// The format, size and rate PipeWire negotiated; the stride is that of the frames handed on (rows of the width).
    public let applied: AppliedFormat
    /// The device (`pipewire:NAME`).
    public let device: String
    private let handle: StreamHandle
    private let receiver: FrameReceiver
    private let stopFlag = StopFlag()
    private var thread: WorkerThread?
    private let sink: FrameSink
    private let noFrameTimeoutNs: Int64

    /// A stream of `node`, over `connection` (the camera portal's PipeWire connection, which the stream takes) or
    /// the configuration's socket when nil; its frames read in place when `readInPlace` (a node that keeps the
    /// buffers its consumers hold).
    init(
        device: String, node: String, request: StreamRequest, configuration: PipeWireCameraProvider.Configuration, connection: Int32? = nil,
        readInPlace: Bool, sink: FrameSink
    ) throws(CaptureError) {
        self.device = device
        self.sink = sink
        self.noFrameTimeoutNs = configuration.noFrameTimeoutNs
        var req: cpw_request
        do { req = try PipeWireFormats.request(request, device: device) } catch {
            if let connection { try? FileDescriptor(rawValue: connection).close() }
            throw error
        }
        let receiver = FrameReceiver(device: device, sink: sink)
        var result = cpw_applied()
        var code: Int32 = 0
        var error = [CChar](repeating: 0, count: 512)
        let context = Unmanaged.passUnretained(receiver).toOpaque()
        let timeout = Int32(configuration.startTimeoutMs)
        let opened =
            connection.map { cpw_stream_open_fd($0, node, &req, pipeWireBuffer, context, timeout, &result, &code, &error, error.count) }
            ?? cpw_stream_open(configuration.remote, node, &req, pipeWireBuffer, context, timeout, &result, &code, &error, error.count)
        guard let pointer = opened else {
            let text = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw Self.openError(code: code, text: text, device: device, request: request)
        }
        let handle = StreamHandle(pointer)
        let pf = PixelFormat(rawValue: result.fourcc)
        let size = FrameSize(width: Int(result.width), height: Int(result.height))
        guard result.fourcc != 0, CaptureLimits.problem(with: size) == nil else {
            handle.close()
            throw CaptureError(
                .unsupportedFormat, "\(device) agreed on a format this package cannot take (\(pf) \(size))", device: device,
                operation: "SPA_PARAM_Format")
        }
        let fps =
            result.rate_num > 0 && result.rate_den > 0
            ? Fraction(exactly: Int64(result.rate_num), Int64(result.rate_den)) ?? request.fps : request.fps
        let lend: (() -> (@Sendable () -> Void)?)? = readInPlace ? { handle.retainMappings() } : nil
        let layout = receiver.configure(
            pixelFormat: pf, size: size, buffers: configuration.frameBuffers, slots: Int(result.n_buffers), lend: lend)
        self.applied = AppliedFormat(pixelFormat: pf, size: size, stride: layout.stride, fps: fps)
        self.handle = handle
        self.receiver = receiver
        receiver.delivering = true
        thread = WorkerThread(name: "pipewire", stopFlag: stopFlag, wake: { handle.wake() }) { [self] _ in run() }
    }

    static func openError(code: Int32, text: String, device: String, request: StreamRequest) -> CaptureError {
        switch -Int(code) {
        case Int(ENOENT): return CaptureError(.unknownDevice, text, device: device, operation: "pw_stream_connect")
        case Int(ECONNREFUSED): return CaptureError(.disconnected, text, device: device, operation: "connect")
        case Int(ENOTCONN): return CaptureError(.disconnected, text, device: device, operation: "pw_stream_connect")
        case Int(ETIMEDOUT): return CaptureError(.streamFailed, "\(text) (asked for \(request))", device: device, operation: "pw_stream_connect")
        default:
            // A stream error while negotiating is PipeWire's "no more input formats" or "error negotiating format".
            let format = text.contains("format")
            return CaptureError(
                format ? .unsupportedFormat : .streamFailed, format ? "\(text) (asked for \(request))" : text, device: device,
                operation: "pw_stream_connect")
        }
    }

    /// Disconnects from PipeWire and ends the stream's thread; returns when that is done. Frames still held stay
    /// valid (a frame read in place keeps the stream's mapping of its buffer). Idempotent, from any thread (also from
    /// a frame callback).
    public func stop() {
        if let thread { thread.stop() } else { stopFlag.set() }
    }

    private func run() {
        while !stopFlag.isSet {
            let status = handle.iterate(timeoutMs: 100)
            if Int(status) != CPW_STATUS_RUNNING { return fail(statusError(status)) }
            // Buffers whose frames every consumer has let go: back to PipeWire (one it removed meanwhile is gone).
            receiver.returned { slot in handle.requeue(slot) }
            if monotonicNanoseconds() - receiver.lastBufferAt > noFrameTimeoutNs {
                let ms = noFrameTimeoutNs / 1_000_000
                return fail(CaptureError(.timeout, "\(device) delivered no frame for \(ms) ms", device: device))
            }
        }
        handle.close()
    }

    private func statusError(_ status: Int32) -> CaptureError {
        let text = handle.statusText()
        switch Int(status) {
        case CPW_STATUS_ERROR: return CaptureError(.streamFailed, text, device: device, operation: "pw_stream")
        default: return CaptureError(.disconnected, text, device: device, operation: "pw_stream")
        }
    }

    private func fail(_ error: CaptureError) {
        handle.close()
        sink.failed(error)
    }
}

/// The C stream and the lock that keeps a wake-up from another thread away from its close.
private final class StreamHandle: Sendable {
    /// The `cpw_stream *` as its address (0 once closed), read and cleared under the lock.
    private let state: Mutex<UInt>
    init(_ pointer: OpaquePointer) { state = Mutex(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pointer)))) }
    private var pointer: OpaquePointer? { OpaquePointer(bitPattern: state.withLock { $0 }) }
    /// Runs the loop once (the stream's thread only).
    func iterate(timeoutMs: Int32) -> Int32 {
        // The pointer is read under the lock but the loop runs outside it: only this thread closes it.
        guard let p = pointer else { return Int32(CPW_STATUS_DISCONNECTED) }
        return cpw_stream_iterate(p, timeoutMs)
    }
    func statusText() -> String {
        guard let p = pointer else { return "the stream was closed" }
        var text = [CChar](repeating: 0, count: 512)
        _ = cpw_stream_status(p, &text, text.count)
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
    func wake() { state.withLock { if let p = OpaquePointer(bitPattern: $0) { cpw_stream_wake(p) } } }
    /// Gives a kept buffer back to PipeWire (the stream's thread only).
    func requeue(_ slot: Int32) {
        guard let p = pointer else { return }
        _ = cpw_stream_requeue(p, slot)
    }
    /// A reference to the stream's buffer mappings and its release (nil once closed): a frame read in place keeps
    /// its buffer's memory mapped with it, also after the stream is closed.
    func retainMappings() -> (@Sendable () -> Void)? {
        guard let p = pointer, let m = cpw_stream_mappings(p) else { return nil }
        let address = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(m)))
        return { cpw_mappings_release(OpaquePointer(bitPattern: address)) }
    }
    func close() {
        state.withLock { address in
            if let p = OpaquePointer(bitPattern: address) { cpw_stream_close(p) }
            address = 0
        }
    }
}

/// The C callback: the context is the stream's `FrameReceiver`, alive as long as the C stream.
private let pipeWireBuffer: cpw_buffer_callback = { context, buffer in
    guard let context, let buffer else { return 0 }
    return Unmanaged<FrameReceiver>.fromOpaque(context).takeUnretainedValue().receive(buffer.pointee) ? 1 : 0
}

/// Turns PipeWire buffers into frames: checks each against the format, lends it (a kept buffer read in place) or
/// copies it into a free private buffer, stamps and numbers it. Used on the stream's thread only (and on the
/// opening thread before that one starts).
private final class FrameReceiver: @unchecked Sendable {
    let device: String
    let sink: FrameSink
    /// Off until the stream has started: a buffer that comes while it starts is not handed on.
    var delivering = false
    var lastBufferAt = monotonicNanoseconds()
    private var pixelFormat = PixelFormat.i420
    private var size = FrameSize(width: 1, height: 1)
    /// The raw format's planes; nil for a compressed format.
    private var planes: [PlaneShape]?
    private var stride = 0
    private var frameBytes = 0
    private var storages: [FrameStorage] = []
    private var lastTimestamp: Int64 = .min
    private var lastSequence: UInt64?
    private var count: UInt64 = 0
    /// Takes a reference to the stream's mappings and gives its release (nil: every frame is copied).
    private var lend: (() -> (@Sendable () -> Void)?)?
    /// PipeWire's buffers lent to frames; two always stay with PipeWire.
    private var loans = BufferLoans(slots: 0)

    init(device: String, sink: FrameSink) {
        self.device = device
        self.sink = sink
    }

    /// Sets the format, allocates the private buffers and, with `lend`, lends PipeWire's `slots` buffers; the
    /// stride of copied frames.
    func configure(
        pixelFormat: PixelFormat, size: FrameSize, buffers: Int, slots: Int = 0, lend: (() -> (@Sendable () -> Void)?)? = nil
    ) -> (stride: Int, frameBytes: Int) {
        self.lend = lend
        loans = BufferLoans(slots: slots)
        self.pixelFormat = pixelFormat
        self.size = size
        planes = pixelFormat.planeShapes(width: size.width, height: size.height)
        if let planes {
            stride = planes[0].rowBytes
            frameBytes = planes.indices.reduce(0) { $0 + pixelFormat.planeStride($1, firstStride: stride) * planes[$1].rows }
        } else {
            // Compressed: as much as an uncompressed 32-bit frame, which no JPEG or H.264 frame of the size exceeds.
            stride = 0
            frameBytes = size.width * size.height * 4
        }
        storages = (0..<buffers).map { _ in FrameStorage(pooledCapacity: frameBytes) }
        lastBufferAt = monotonicNanoseconds()
        return (stride, frameBytes)
    }

    private func plane(_ b: cpw_buffer, _ i: Int) -> cpw_plane {
        withUnsafeBytes(of: b.planes) { $0.load(fromByteOffset: i * MemoryLayout<cpw_plane>.stride, as: cpw_plane.self) }
    }

    /// Hands a buffer on as a frame. True when the frame is the buffer itself, kept: it goes back to PipeWire by
    /// ``returned(_:)`` once consumers let the frame go; false: PipeWire may have it back now.
    func receive(_ b: cpw_buffer) -> Bool {
        guard delivering else { return false }
        let now = monotonicNanoseconds()
        lastBufferAt = now
        if b.has_header != 0 {
            // A gap in the producer's numbers: frames it made that never came. A jump of a million or more is a
            // producer that restarted its count, not a gap.
            if let last = lastSequence, b.seq > last &+ 1, b.seq &- last < 1 << 20 { sink.dropped(.driverDropped, Int(b.seq &- last &- 1)) }
            lastSequence = b.seq
        }
        let n = min(Int(b.n_planes), Int(CPW_MAX_PLANES))
        guard n > 0 else {
            sink.dropped(.shortBuffer, 1)
            return false
        }
        var i = 0
        while i < n {
            if plane(b, i).corrupted != 0 {
                sink.dropped(.corruptBuffer, 1)
                return false
            }
            i += 1
        }
        var ts = now
        if b.has_header != 0, b.pts > lastTimestamp, b.pts <= now, now - b.pts < 1_000_000_000 { ts = b.pts }
        if ts <= lastTimestamp { ts = lastTimestamp + 1 }
        let slot = Int(b.slot)
        if lend != nil, loans.canLend(slot), let buffer = borrow(b, count: n, slot: slot) {
            loans.lend(slot)
            deliver(buffer, ts, b)
            return true
        }
        copyOut(b, count: n, ts: ts)
        return false
    }

    /// Calls `requeue` with each lent slot whose frame every consumer has let go (once each).
    func returned(_ requeue: (Int32) -> Void) {
        loans.returned { requeue(Int32($0)) }
    }

    /// Stamps, numbers and hands on a frame.
    private func deliver(_ buffer: VideoFrameBuffer, _ ts: Int64, _ b: cpw_buffer) {
        lastTimestamp = ts
        var frame = VideoFrame(buffer: buffer, timestampNs: ts, sequence: b.has_header != 0 ? b.seq : count)
        if pixelFormat == .h264 { frame.isKeyFrame = AnnexBScan.hasIDRSlice(buffer.bytes) }
        count &+= 1
        sink.frame(frame)
    }

    /// Slot `slot`'s buffer as the frame's, where the chunks put each plane (nil when it cannot be: a compressed
    /// format, a plane whose rows do not lie whole in its block, no mapping).
    private func borrow(_ b: cpw_buffer, count n: Int, slot: Int) -> VideoFrameBuffer? {
        let first = plane(b, 0)
        guard let base = first.data, first.maxsize > 0 else { return nil }
        // A compressed frame (MJPEG, H.264) is copied: its bytes are few next to a picture's, and decoding it is the
        // pass over its pixels.
        guard let planes else { return nil }
        var starts = (0, 0, 0), strides = (0, 0, 0)
        let placed = walkPlanes(b, planes: planes, count: n) { i, p, at in
            // Whole rows of the stride, inside the plane's block (every term below 2^32: no overflow).
            guard at.start + at.stride * p.rows <= at.blockSize else { return false }
            let from = base.distance(to: at.data) + at.start
            switch i {
            case 0: (starts.0, strides.0) = (from, at.stride)
            case 1: (starts.1, strides.1) = (from, at.stride)
            default: (starts.2, strides.2) = (from, at.stride)
            }
            return true
        }
        guard placed else { return nil }
        guard let lend, let s = loans.storage(slot, base: UnsafeRawPointer(base), capacity: Int(first.maxsize), retain: lend) else { return nil }
        return VideoFrameBuffer(
            pixelFormat: pixelFormat, size: size, planeCount: planes.count, firstPlaneRows: planes[0].rows, starts: starts, strides: strides,
            storage: s)
    }

    /// Copies the buffer into a free private buffer and hands it on (dropped as `.buffersHeld` when none is free).
    private func copyOut(_ b: cpw_buffer, count n: Int, ts: Int64) {
        // A buffer no consumer holds (plain loops: nothing allocated per frame, also unoptimized).
        var free = -1
        var i = 0
        while i < storages.count && free < 0 {
            if isKnownUniquelyReferenced(&storages[i]) { free = i }
            i += 1
        }
        guard free >= 0 else { return sink.dropped(.buffersHeld, 1) }
        let storage = storages[free]
        let used: Int
        if let planes {
            guard copyRaw(b, planes: planes, count: n, into: storage.mutableBaseAddress) else { return sink.dropped(.shortBuffer, 1) }
            used = frameBytes
        } else {
            guard let u = copyCompressed(plane(b, 0), into: storage.mutableBaseAddress) else { return sink.dropped(.shortBuffer, 1) }
            used = u
        }
        let buffer = VideoFrameBuffer(
            pixelFormat: pixelFormat, width: size.width, height: size.height, stride: stride, bytesUsed: used, storage: storage)
        deliver(buffer, ts, b)
    }

    /// Where each plane of a buffer lies: its data block, the block's size, its row stride and the byte it starts
    /// at. Planes come in one data block per plane (as libcamera gives planar formats), or all in the first block
    /// (the V4L2 single-buffer layout from the chunk's offset and stride). Calls `body` with each plane in order
    /// (every row stride at least a row, every plane's start in its block) and stops at the first false; false
    /// when a plane has no data or `body` said false.
    private func walkPlanes(
        _ b: cpw_buffer, planes: [PlaneShape], count n: Int,
        _ body: (Int, PlaneShape, (data: UnsafePointer<UInt8>, blockSize: Int, stride: Int, start: Int)) -> Bool
    ) -> Bool {
        let separate = planes.count > 1 && n >= planes.count
        let first = plane(b, 0)
        let firstStride = first.stride == 0 ? planes[0].rowBytes : Int(first.stride)
        var inBlock = 0 // where the plane starts in a shared block, from the chunk's offset
        var i = 0
        while i < planes.count {
            let p = planes[i]
            let d = separate ? plane(b, i) : first
            guard let data = d.data, d.maxsize > 0 else { return false }
            let blockSize = Int(d.maxsize)
            let sourceStride =
                separate ? (d.stride == 0 ? p.rowBytes : Int(d.stride)) : pixelFormat.planeStride(i, firstStride: firstStride)
            guard p.rows > 0, sourceStride >= p.rowBytes else { return false }
            let start = Int(d.offset) % blockSize + (separate ? 0 : inBlock)
            guard body(i, p, (data, blockSize, sourceStride, start)) else { return false }
            inBlock += sourceStride * p.rows
            i += 1
        }
        return true
    }

    /// Copies the planes row by row (each source row is `stride` apart, each copy is `rowBytes` long) into the
    /// single-buffer layout with rows of the width. False when a plane lies outside its data block or its stride
    /// is shorter than a row.
    private func copyRaw(_ b: cpw_buffer, planes: [PlaneShape], count n: Int, into dst: UnsafeMutableRawPointer) -> Bool {
        var out = 0
        return walkPlanes(b, planes: planes, count: n) { i, p, at in
            // Every term is below 2^32 and rows are at most 16384: no overflow in 64 bits.
            guard at.start + at.stride * (p.rows - 1) + p.rowBytes <= at.blockSize else { return false }
            let outStride = pixelFormat.planeStride(i, firstStride: stride)
            PixelFormat.copyPlane(p, from: UnsafeRawPointer(at.data) + at.start, stride: at.stride, to: dst + out, stride: outStride)
            out += outStride * p.rows
            return true
        }
    }

    /// Copies a compressed frame (the chunk's bytes); its length, or nil when it is empty or outside its block.
    private func copyCompressed(_ d: cpw_plane, into dst: UnsafeMutableRawPointer) -> Int? {
        guard let data = d.data, d.maxsize > 0, d.size > 0 else { return nil }
        let maxsize = Int(d.maxsize), start = Int(d.offset) % maxsize, size = Int(d.size)
        guard start + size <= maxsize, size <= frameBytes else { return nil }
        dst.copyMemory(from: UnsafeRawPointer(data) + start, byteCount: size)
        return size
    }
}
