import CLibCameraShim
import Synchronization
import SystemIO
public import VideoCapture
import VideoCaptureCommons
#if canImport(Glibc)
    import Glibc
#endif

/// A running libcamera stream: one stream of the provider's role, its completed requests read on a thread of its
/// own. A frame is libcamera's buffer itself, read in place (its window when the provider crops): its request is
/// queued again once the last consumer lets the frame go, as long as two requests stay with libcamera; beyond that
/// (or with `zeroCopy` off) the buffer is copied once into a private one and its request queued at once.
///
/// Frames carry libcamera's `SensorTimestamp` (CLOCK_MONOTONIC ns; the buffer's timestamp where a pipeline gives
/// none) and its sequence numbers; gaps in the sequence are reported as `.driverDropped`; buffers libcamera
/// flags as failed, or shorter than the format needs, are dropped and counted.
///
/// The stream ends with `.disconnected` when the camera is removed, and with `.timeout` when no frame comes for
/// the configured time.
public final class LibCameraStream: CaptureStream, @unchecked Sendable {
    // @unchecked: after init, `receiver` is used only by the stream's thread; `handle` guards its wake-up and its
    // close with its lock.
    /// The format and size delivered (libcamera's adjusted size, or the request when cropping), the stride of the
    /// frames handed on and the requested rate.
    public let applied: AppliedFormat
    /// The size libcamera configured the camera with (what it adjusted the request to).
    public let configuredSize: FrameSize
    /// The device (`libcamera:ID`).
    public let device: String
    private let handle: LibCameraStreamHandle
    private let receiver: LibCameraFrameReceiver
    private let stopFlag = StopFlag()
    private var thread: WorkerThread?
    private let sink: FrameSink
    private let noFrameTimeoutNs: Int64

    init(
        device: String, cameraID: String, drm: UInt32, pixelFormat: PixelFormat, size: FrameSize, crop: FrameSize?, fps: Fraction,
        configuration: LibCameraProvider.Configuration, sink: FrameSink
    ) throws(CaptureError) {
        self.device = device
        self.sink = sink
        self.noFrameTimeoutNs = configuration.noFrameTimeoutNs
        if let problem = CaptureLimits.problem(with: size) { throw CaptureError(.invalidArgument, "\(device): \(problem)", device: device) }
        // A frame duration in µs for the rate asked, where it is a sane one (libcamera ignores it without FrameDurationLimits).
        var durationUs: Int64 = 0
        if fps.numerator > 0, fps.denominator > 0, fps.numerator <= CaptureLimits.maxFractionTerm, fps.denominator <= CaptureLimits.maxFractionTerm {
            durationUs = Int64(fps.denominator) * 1_000_000 / Int64(fps.numerator)
        }
        var config = lcs_config()
        var code: Int32 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard
            let pointer = lcs_stream_open(
                cameraID, configuration.role.code, drm, UInt32(size.width), UInt32(size.height), UInt32(configuration.cameraBuffers), durationUs,
                &config, &code, &error, error.count)
        else {
            let text = LibCameraProvider.text(error)
            let kind: CaptureError.Code =
                code == -ENODEV ? .unknownDevice : code == -EBUSY ? .deviceBusy : code == -EINVAL ? .unsupportedFormat : .streamFailed
            throw CaptureError(kind, text, errno: Int32(clamping: -Int(code)), device: device, operation: "libcamera start")
        }
        let handle = LibCameraStreamHandle(pointer)
        let got = FrameSize(width: Int(config.width), height: Int(config.height))
        let out = crop ?? got
        let origin = LibCameraFormats.cropOrigin(requested: out, adjusted: got)
        guard LibCameraFormats.pixelFormat(drmFourcc: config.drm_fourcc) == pixelFormat, CaptureLimits.problem(with: got) == nil,
            let origin, let planes = pixelFormat.planeShapes(width: out.width, height: out.height),
            let sourceStride = Int(exactly: config.stride), sourceStride >= planes[0].rowBytes
        else {
            handle.close()
            throw CaptureError(
                .unsupportedFormat, "\(device): libcamera configured \(got) (stride \(config.stride)), which cannot give \(pixelFormat) \(out)",
                device: device, operation: "configure")
        }
        var lend: (@Sendable () -> (@Sendable () -> Void)?)?
        if configuration.zeroCopy { lend = { handle.retainMappings() } }
        let receiver = LibCameraFrameReceiver(
            device: device, sink: sink, pixelFormat: pixelFormat, size: out, planes: planes, sourceSize: got, sourceStride: sourceStride,
            origin: origin, buffers: configuration.frameBuffers, slots: Int(config.buffers), lend: lend)
        self.applied = AppliedFormat(pixelFormat: pixelFormat, size: out, stride: receiver.stride, fps: fps)
        self.configuredSize = got
        self.handle = handle
        self.receiver = receiver
        thread = WorkerThread(name: "libcamera", stopFlag: stopFlag, wake: { handle.wake() }) { [self] _ in run() }
    }

    /// Stops the camera, releases it and ends the stream's thread; returns when that is done. Frames still held
    /// stay valid (their buffers are ours). Idempotent, from any thread (also from a frame callback).
    public func stop() {
        if let thread { thread.stop() } else { stopFlag.set() }
    }

    private func run() {
        var frame = lcs_frame()
        while !stopFlag.isSet {
            let r = handle.next(timeoutMs: 100, frame: &frame)
            if r < 0 {
                return fail(
                    CaptureError(
                        .disconnected, "\(device) was removed (the camera or its device node went away)", device: device, operation: "libcamera"))
            }
            var gone = false
            if r > 0, !receiver.receive(frame, stopped: stopFlag.isSet) { gone = handle.requeue(frame.slot) == -ENODEV }
            // Requests whose frames every consumer has let go: back to libcamera.
            receiver.returned { slot in if !gone { gone = handle.requeue(slot) == -ENODEV } }
            if gone {
                return fail(
                    CaptureError(.disconnected, "\(device) was removed (a request could not be queued)", device: device, operation: "libcamera"))
            }
            if r == 0, monotonicNanoseconds() - receiver.lastBufferAt > noFrameTimeoutNs {
                let ms = noFrameTimeoutNs / 1_000_000
                return fail(CaptureError(.timeout, "\(device) delivered no frame for \(ms) ms", device: device))
            }
        }
        handle.close()
    }

    private func fail(_ error: CaptureError) {
        handle.close()
        sink.failed(error)
    }
}

/// The C stream and the lock that keeps a wake-up from another thread away from its close.
private final class LibCameraStreamHandle: Sendable {
    /// The `lcs_stream *` as its address (0 once closed).
    private let state: Mutex<UInt>
    init(_ pointer: OpaquePointer) { state = Mutex(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pointer)))) }
    private var pointer: OpaquePointer? { OpaquePointer(bitPattern: state.withLock { $0 }) }
    /// Waits for a completed request (the stream's thread only, which alone closes).
    func next(timeoutMs: Int32, frame: inout lcs_frame) -> Int32 {
        guard let p = pointer else { return -Int32(LCS_STATUS_STOPPED) }
        return lcs_stream_next(p, timeoutMs, &frame)
    }
    func requeue(_ slot: UInt32) -> Int32 {
        guard let p = pointer else { return 0 }
        return lcs_stream_requeue(p, slot)
    }
    func wake() { state.withLock { if let p = OpaquePointer(bitPattern: $0) { lcs_stream_wake(p) } } }
    /// A reference to the stream's buffer mappings and its release (nil once closed): a frame read in place keeps
    /// libcamera's memory mapped through it.
    func retainMappings() -> (@Sendable () -> Void)? {
        guard let p = pointer, let m = lcs_stream_mappings(p) else { return nil }
        let address = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(m)))
        return { lcs_mappings_release(OpaquePointer(bitPattern: address)) }
    }
    func close() {
        state.withLock { address in
            if let p = OpaquePointer(bitPattern: address) { lcs_stream_close(p) }
            address = 0
        }
    }
}

/// Turns completed requests into frames: checks each against the format, lends its buffer (the crop window) or
/// copies it into a free private buffer, stamps and numbers it. Used on the stream's thread only.
final class LibCameraFrameReceiver: @unchecked Sendable {
    let device: String
    let sink: FrameSink
    var lastBufferAt = monotonicNanoseconds()
    let pixelFormat: PixelFormat
    let size: FrameSize
    let planes: [PlaneShape]
    /// Per plane: the bytes and rows the crop window starts at.
    let offsets: [PlaneShape]
    let sourceSize: FrameSize
    let sourceStride: Int
    let sourcePlanes: [PlaneShape]
    let stride: Int
    let frameBytes: Int
    private var storages: [FrameStorage]
    private var lastTimestamp: Int64 = .min
    private var lastSequence: UInt64?
    /// Takes a reference to libcamera's mappings and gives its release (nil: every frame is copied).
    private let lend: (@Sendable () -> (@Sendable () -> Void)?)?
    /// libcamera's requests lent to frames; two always stay with libcamera (a frame that would leave fewer is
    /// copied).
    private var loans: BufferLoans

    init(
        device: String, sink: FrameSink, pixelFormat: PixelFormat, size: FrameSize, planes: [PlaneShape], sourceSize: FrameSize,
        sourceStride: Int, origin: (x: Int, y: Int), buffers: Int, slots: Int = 0, lend: (@Sendable () -> (@Sendable () -> Void)?)? = nil
    ) {
        self.lend = lend
        loans = BufferLoans(slots: slots)
        self.device = device
        self.sink = sink
        self.pixelFormat = pixelFormat
        self.size = size
        self.planes = planes
        self.offsets = pixelFormat.planeShapes(width: origin.x, height: origin.y) ?? planes.map { _ in .init(rows: 0, rowBytes: 0) }
        self.sourceSize = sourceSize
        self.sourceStride = sourceStride
        self.sourcePlanes = pixelFormat.planeShapes(width: sourceSize.width, height: sourceSize.height) ?? planes
        let stride = planes[0].rowBytes
        let bytes = planes.indices.reduce(0) { $0 + pixelFormat.planeStride($1, firstStride: stride) * planes[$1].rows }
        self.stride = stride
        frameBytes = bytes
        storages = (0..<buffers).map { _ in FrameStorage(pooledCapacity: bytes) }
    }

    private func plane(_ f: lcs_frame, _ i: Int) -> lcs_plane {
        withUnsafeBytes(of: f.planes) { $0.load(fromByteOffset: i * MemoryLayout<lcs_plane>.stride, as: lcs_plane.self) }
    }

    /// Hands a completed request on as a frame. True when the frame is its buffer, lent: the request is queued
    /// again by ``returned(_:)`` once consumers let the frame go; false: queue it now.
    @discardableResult
    func receive(_ f: lcs_frame, stopped: Bool) -> Bool {
        let now = monotonicNanoseconds()
        lastBufferAt = now
        // A frame after stop() (from a frame callback) is not handed on.
        guard !stopped else { return false }
        if let last = lastSequence, f.sequence > last &+ 1, f.sequence &- last < 1 << 20 {
            sink.dropped(.driverDropped, Int(f.sequence &- last &- 1))
        }
        lastSequence = f.sequence
        guard f.status == 0 else {
            sink.dropped(.corruptBuffer, 1)
            return false
        }
        let n = min(Int(f.n_planes), Int(LCS_MAX_PLANES))
        guard n > 0 else {
            sink.dropped(.shortBuffer, 1)
            return false
        }
        let slot = Int(f.slot)
        if lend != nil, loans.canLend(slot), let buffer = borrow(f, count: n, slot: slot) {
            loans.lend(slot)
            sink.frame(VideoFrame(buffer: buffer, timestampNs: stamp(f, now), sequence: f.sequence))
            return true
        }
        copyOut(f, count: n, now: now)
        return false
    }

    /// Calls `requeue` with each lent slot whose frame every consumer has let go (once each).
    func returned(_ requeue: (UInt32) -> Void) {
        loans.returned { requeue(UInt32($0)) }
    }

    /// The frame's timestamp: libcamera's when it is sane (not ahead of now, under a second old), else now; always
    /// after the last one.
    private func stamp(_ f: lcs_frame, _ now: Int64) -> Int64 {
        var ts = now
        if f.timestamp_ns > 0, f.timestamp_ns <= now, now - f.timestamp_ns < 1_000_000_000 { ts = f.timestamp_ns }
        if ts <= lastTimestamp { ts = lastTimestamp + 1 }
        lastTimestamp = ts
        return ts
    }

    /// Slot `slot`'s buffer as the frame's: the window of each plane where libcamera put it, by libcamera's
    /// strides (nil when it cannot be: a plane outside its block, a cropped format in several planes, no mapping).
    private func borrow(_ f: lcs_frame, count n: Int, slot: Int) -> VideoFrameBuffer? {
        let first = plane(f, 0)
        guard let base = first.data, planes.count == 1 || (offsets[0].rows == 0 && offsets[0].rowBytes == 0) else { return nil }
        let separate = n >= planes.count
        // Each plane's window start from `base` (a separate plane's block may lie anywhere), its stride, its end.
        var starts = (0, 0, 0), strides = (0, 0, 0)
        var inBlock = 0
        var i = 0
        while i < planes.count {
            let p = planes[i], o = offsets[i]
            let d = separate ? plane(f, i) : first
            guard let data = d.data else { return nil }
            let srcStride = pixelFormat.planeStride(i, firstStride: sourceStride)
            let block = separate ? 0 : inBlock
            let start = block + o.rows * srcStride + o.rowBytes
            // Whole rows of the stride, inside the plane's block (every term below 2^32: no overflow).
            guard p.rows > 0, o.rowBytes + p.rowBytes <= srcStride, start + srcStride * p.rows <= Int(d.length) else { return nil }
            let from = (separate ? base.distance(to: data) : 0) + start
            switch i {
            case 0: (starts.0, strides.0) = (from, srcStride)
            case 1: (starts.1, strides.1) = (from, srcStride)
            default: (starts.2, strides.2) = (from, srcStride)
            }
            inBlock += srcStride * sourcePlanes[i].rows
            i += 1
        }
        guard let lend, let storage = loans.storage(slot, base: UnsafeRawPointer(base), capacity: Int(first.length), retain: lend) else {
            return nil
        }
        return VideoFrameBuffer(
            pixelFormat: pixelFormat, size: size, planeCount: planes.count, firstPlaneRows: planes[0].rows, starts: starts, strides: strides,
            storage: storage)
    }

    /// Copies the frame into a free private buffer and hands it on (dropped as `.buffersHeld` when none is free).
    private func copyOut(_ f: lcs_frame, count n: Int, now: Int64) {
        var free = -1
        var i = 0
        while i < storages.count && free < 0 {
            if isKnownUniquelyReferenced(&storages[i]) { free = i }
            i += 1
        }
        guard free >= 0 else { return sink.dropped(.buffersHeld, 1) }
        let storage = storages[free]
        guard copy(f, count: n, into: storage.mutableBaseAddress) else { return sink.dropped(.shortBuffer, 1) }
        let buffer = VideoFrameBuffer(
            pixelFormat: pixelFormat, width: size.width, height: size.height, stride: stride, bytesUsed: frameBytes, storage: storage)
        sink.frame(VideoFrame(buffer: buffer, timestampNs: stamp(f, now), sequence: f.sequence))
    }

    /// Copies each plane's window row by row into the single-buffer layout with rows of the width. libcamera gives
    /// a plane per data block (planes may share one dmabuf at offsets); one block holding every plane is read
    /// under the V4L2 single-buffer rules. False when a plane reaches outside its block.
    private func copy(_ f: lcs_frame, count n: Int, into dst: UnsafeMutableRawPointer) -> Bool {
        let separate = n >= planes.count
        var inBlock = 0
        var out = 0
        var i = 0
        while i < planes.count {
            let p = planes[i], o = offsets[i]
            let sourceRows = sourcePlanes[i].rows
            defer { i += 1 }
            let d = separate ? plane(f, i) : plane(f, 0)
            guard let data = d.data else { return false }
            let length = Int(d.length)
            let srcStride = pixelFormat.planeStride(i, firstStride: sourceStride)
            let start = (separate ? 0 : inBlock) + o.rows * srcStride + o.rowBytes
            // Every term is below 2^32 and rows are at most 16384: no overflow in 64 bits.
            guard p.rows > 0, o.rowBytes + p.rowBytes <= srcStride, start + srcStride * (p.rows - 1) + p.rowBytes <= length else { return false }
            let outStride = pixelFormat.planeStride(i, firstStride: stride)
            PixelFormat.copyPlane(p, from: UnsafeRawPointer(data) + start, stride: srcStride, to: dst + out, stride: outStride)
            out += outStride * p.rows
            inBlock += srcStride * sourceRows
        }
        return true
    }
}
