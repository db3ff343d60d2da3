import CV4L2
public import VideoCapture
import Foundation
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// A streaming V4L2 camera: S_FMT/S_PARM, read back with G_FMT/G_PARM, mmap buffers, a dedicated thread
/// that polls with a timeout and dequeues.
///
/// Single-planar and multi-planar devices (`V4L2_CAP_VIDEO_CAPTURE_MPLANE`) stream alike: on a multi-planar one
/// the format is `pix_mp` (one `bytesperline`/`sizeimage` per plane), each buffer carries an array of
/// `v4l2_plane`s and each plane is mapped on its own. A single-buffer format (`YUYV`, `NV12`, `YU12`, …) has one
/// plane and is delivered as on a single-planar device; a separate-plane format (`NM12`, `YM12`, …) is delivered
/// as one frame whose planes point into the separate mappings (no copy). A plane shorter than its format needs,
/// or longer than its buffer, makes the frame a short buffer (dropped and counted), as on single-planar devices.
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
    private let io: V4L2IO
    private let configuration: Configuration
    private let sink: FrameSink
    private let sizeImage: Int
    /// How buffers are described to the driver (single-planar, or multi-planar with its plane array).
    private let kind: BufferKind
    /// Multi-planar: each plane's stride and the bytes its format needs (set once by `applyFormat`).
    private let planeFormats: [PlaneFormat]
    /// Multi-planar: each buffer's planes (address and mapped length), `kind.planeCount` per buffer.
    private var planeMaps: [PlaneMap] = []
    private var slots: [FrameStorage] = []
    private var queued: [Bool] = []
    private var copies: [FrameStorage] = []
    /// The driver rewrites buffers its reader holds (v4l2loopback): every frame is copied at dequeue.
    private let copiesEveryFrame: Bool
    private let mappedCount = MapCounter()
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
    /// Each ring buffer's DMA-BUF export (`Configuration.exportDMABuf`), by buffer index; empty when not asked.
    private var exported: [DMABuf?] = []
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
        self.io = node.io
        var ring: [FrameStorage] = []
        var started = false
        let counter = mappedCount
        let planeArray = UnsafeMutablePointer<v4l2_plane>.allocate(capacity: Int(CV4L2_VIDEO_MAX_PLANES))
        planeArray.initialize(repeating: v4l2_plane(), count: Int(CV4L2_VIDEO_MAX_PLANES))
        var type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        defer {
            if !started { // nothing left open on a failed start
                V4L2Stream.teardown(node, type: type, buffers: &ring, counter: counter)
                planeArray.deallocate()
            }
        }
        let caps = try node.capabilities()
        guard caps.isVideoCapture else {
            throw CaptureError(.notACaptureDevice, "\(path) (\(caps.card)) is not a streaming video capture device", device: path)
        }
        type = caps.bufferType
        copiesEveryFrame = caps.driver == V4L2Stream.driverRewritingHeldBuffers
        let (applied, sizeImage, planeFormats) =
            caps.isMultiPlanar ? try V4L2Stream.applyMultiPlanarFormat(node, request) : try V4L2Stream.applyFormat(node, request)
        self.applied = applied
        self.sizeImage = sizeImage
        self.planeFormats = planeFormats
        let kind = BufferKind(type: type, planeCount: planeFormats.count, planes: caps.isMultiPlanar ? planeArray : nil)
        self.kind = kind
        self.rotation =
            rotationOverride ?? node.property(.cameraSensorRotation).flatMap(VideoRotation.init(sensorRotationCounterClockwise:)) ?? .rotation0
        self.canForceKeyFrame = applied.pixelFormat == .h264 && ((try? node.control(.forceKeyFrame)) ?? nil) != nil
        self.bitrateControl =
            applied.pixelFormat == .h264 ? ((try? node.control(.videoBitrate)) ?? nil).flatMap { $0.isReadOnly || $0.maximum <= 0 ? nil : $0 } : nil
        var maps: [PlaneMap] = []
        var exports: [DMABuf?] = []
        ring = try V4L2Stream.mapBuffers(
            node, kind: kind, planeFormats: planeFormats, count: configuration.bufferCount, counter: counter, maps: &maps,
            export: configuration.exportDMABuf, exports: &exports)
        for i in ring.indices {
            var b = kind.descriptor(i)
            try io.ioctl(node.fd, .queueBuffer, &b, "\(i)")
        }
        var on = Int32(type)
        try io.ioctl(node.fd, .streamOn, &on)
        slots = ring
        exported = exports
        planeMaps = maps
        queued = Array(repeating: true, count: ring.count)
        let copyCount = configuration.copyBuffers + (copiesEveryFrame ? configuration.bufferCount : 0)
        copies = (0..<copyCount).map { _ in FrameStorage(pooledCapacity: sizeImage) }
        started = true
        ring = []
        thread = WorkerThread(name: "v4l2-capture", stopFlag: stopFlag) { [self] _ in run() }
    }

    /// The largest plane count a driver may report (`VIDEO_MAX_PLANES`).
    static let maxPlanes = Int(CV4L2_VIDEO_MAX_PLANES)

    /// S_FMT/S_PARM, read back with G_FMT/G_PARM: what the driver really applied, and its buffer size.
    private static func applyFormat(_ node: V4L2Node, _ request: StreamRequest) throws(CaptureError) -> (AppliedFormat, Int, [PlaneFormat]) {
        let io = node.io, fd = node.fd, path = node.path
        guard let w = UInt32(exactly: request.size.width), let h = UInt32(exactly: request.size.height) else {
            throw CaptureError(.invalidArgument, "size \(request.size) is out of range for V4L2", device: path)
        }
        var fmt = v4l2_format()
        fmt.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        fmt.fmt.pix.width = w
        fmt.fmt.pix.height = h
        fmt.fmt.pix.pixelformat = request.pixelFormat.rawValue
        fmt.fmt.pix.field = CV4L2_FIELD_ANY
        try io.ioctl(fd, .setFormat, &fmt, "\(request.pixelFormat) \(request.size)")
        var got = v4l2_format()
        got.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE
        try io.ioctl(fd, .getFormat, &got)
        let pf = PixelFormat(rawValue: got.fmt.pix.pixelformat)
        guard pf == request.pixelFormat else {
            throw CaptureError(.unsupportedFormat, "\(path) applied \(pf) instead of the requested \(request.pixelFormat)", device: path)
        }
        let size = FrameSize(width: Int(got.fmt.pix.width), height: Int(got.fmt.pix.height))
        let stride = pf.isCompressed ? 0 : Int(got.fmt.pix.bytesperline)
        let fps = applyRate(node, request, type: CV4L2_BUF_TYPE_VIDEO_CAPTURE)
        let color = VideoColorSpace(
            v4l2Colorspace: got.fmt.pix.colorspace, transfer: got.fmt.pix.xfer_func, encoding: got.fmt.pix.ycbcr_enc,
            quantization: got.fmt.pix.quantization, pixelFormat: pf)
        return (AppliedFormat(pixelFormat: pf, size: size, stride: stride, fps: fps, colorSpace: color), Int(got.fmt.pix.sizeimage), [])
    }

    /// Frame rate: S_PARM then G_PARM (the driver may round). V4L2 speaks in time per frame, the inverse of
    /// fps: 30 fps is timeperframe 1/30, so numerator and denominator swap in both directions.
    private static func applyRate(_ node: V4L2Node, _ request: StreamRequest, type: UInt32) -> Fraction {
        let io = node.io, fd = node.fd
        var parm = v4l2_streamparm()
        parm.type = type
        parm.parm.capture.timeperframe.numerator = UInt32(clamping: request.fps.denominator)
        parm.parm.capture.timeperframe.denominator = UInt32(clamping: request.fps.numerator)
        var fps = request.fps
        if io.errnoOf(fd, .setParm, &parm) == nil {
            var g = v4l2_streamparm()
            g.type = type
            if io.errnoOf(fd, .getParm, &g) == nil {
                let tpf = g.parm.capture.timeperframe
                if tpf.numerator > 0 && tpf.denominator > 0 { fps = Fraction(Int64(tpf.denominator), Int64(tpf.numerator)) }
            }
        }
        return fps
    }

    /// The multi-planar S_FMT/G_FMT (`fmt.pix_mp`) and S_PARM/G_PARM: what the driver applied, the bytes of all
    /// planes together (the size of a private copy), and each plane's stride and needed bytes. A reply that
    /// cannot describe the format (no planes, more than `VIDEO_MAX_PLANES`, another plane count than the format
    /// has, a plane's stride or size too small for its lines) is an error naming the device and the value.
    private static func applyMultiPlanarFormat(
        _ node: V4L2Node, _ request: StreamRequest
    ) throws(CaptureError) -> (AppliedFormat, Int, [PlaneFormat]) {
        let io = node.io, fd = node.fd, path = node.path
        guard let w = UInt32(exactly: request.size.width), let h = UInt32(exactly: request.size.height) else {
            throw CaptureError(.invalidArgument, "size \(request.size) is out of range for V4L2", device: path)
        }
        var fmt = v4l2_format()
        fmt.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        fmt.fmt.pix_mp.width = w
        fmt.fmt.pix_mp.height = h
        fmt.fmt.pix_mp.pixelformat = request.pixelFormat.rawValue
        fmt.fmt.pix_mp.field = CV4L2_FIELD_ANY
        fmt.fmt.pix_mp.num_planes = UInt8(request.pixelFormat.memoryPlaneCount)
        try io.ioctl(fd, .setFormat, &fmt, "\(request.pixelFormat) \(request.size) (multi-planar)")
        var got = v4l2_format()
        got.type = CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        try io.ioctl(fd, .getFormat, &got, "(multi-planar)")
        let mp = got.fmt.pix_mp
        let pf = PixelFormat(rawValue: mp.pixelformat)
        guard pf == request.pixelFormat else {
            throw CaptureError(.unsupportedFormat, "\(path) applied \(pf) instead of the requested \(request.pixelFormat)", device: path)
        }
        let size = FrameSize(width: Int(mp.width), height: Int(mp.height))
        let n = Int(mp.num_planes)
        guard (1...maxPlanes).contains(n) else {
            throw CaptureError(
                .streamFailed, "\(path) reported num_planes \(n) for \(pf) \(size) in VIDIOC_G_FMT (1...\(maxPlanes) expected)", device: path)
        }
        guard n == pf.memoryPlaneCount else {
            throw CaptureError(
                .streamFailed, "\(path) reported num_planes \(n) for \(pf) \(size), a format of \(pf.memoryPlaneCount) plane(s)", device: path)
        }
        var planes: [PlaneFormat] = []
        var total = 0
        for p in 0..<n {
            let pl = withUnsafeBytes(of: mp.plane_fmt) {
                $0.loadUnaligned(fromByteOffset: p * MemoryLayout<v4l2_plane_pix_format>.stride, as: v4l2_plane_pix_format.self)
            }
            let stride = Int(pl.bytesperline), sizeImage = Int(pl.sizeimage)
            var need = 1
            if !pf.isCompressed {
                guard let geometry = pf.memoryPlane(p, width: size.width, height: size.height), stride >= geometry.minimumStride else {
                    throw CaptureError(
                        .streamFailed,
                        "\(path) reported bytesperline \(stride) for plane \(p) of \(pf) \(size), below the \(pf.memoryPlane(p, width: size.width, height: size.height)?.minimumStride ?? 0) its lines need",
                        device: path)
                }
                need = n == 1 ? (pf.frameSize(width: size.width, height: size.height, stride: stride) ?? 1) : stride * geometry.rows
            }
            guard sizeImage >= need else {
                throw CaptureError(
                    .streamFailed,
                    "\(path) reported sizeimage \(sizeImage) for plane \(p) of \(pf) \(size), smaller than the \(need) bytes of its \(stride)-byte lines",
                    device: path)
            }
            planes.append(PlaneFormat(stride: stride, needed: need))
            total += sizeImage
        }
        let fps = applyRate(node, request, type: CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE)
        let color = VideoColorSpace(
            v4l2Colorspace: mp.colorspace, transfer: UInt32(mp.xfer_func), encoding: UInt32(mp.ycbcr_enc),
            quantization: UInt32(mp.quantization), pixelFormat: pf)
        let stride = pf.isCompressed ? 0 : planes[0].stride
        return (AppliedFormat(pixelFormat: pf, size: size, stride: stride, fps: fps, colorSpace: color), total, planes)
    }

    /// REQBUFS, then QUERYBUF + mmap each buffer (each plane of it on a multi-planar device); each buffer's
    /// mappings are unmapped when its last frame goes.
    private static func mapBuffers(
        _ node: V4L2Node, kind: BufferKind, planeFormats: [PlaneFormat], count: Int, counter: MapCounter, maps: inout [PlaneMap],
        export: Bool, exports: inout [DMABuf?]
    ) throws(CaptureError) -> [FrameStorage] {
        let io = node.io, fd = node.fd, kernel = io.kernel
        var rb = v4l2_requestbuffers()
        rb.count = UInt32(count)
        rb.type = kind.type
        rb.memory = CV4L2_MEMORY_MMAP
        try io.ioctl(fd, .requestBuffers, &rb, "\(count)")
        guard rb.count >= 2 else {
            throw CaptureError(.streamFailed, "\(node.path) granted only \(rb.count) buffer(s); at least 2 are needed", device: node.path)
        }
        var ring: [FrameStorage] = []
        for i in 0..<Int(rb.count) {
            var b = kind.descriptor(i)
            try io.ioctl(fd, .queryBuffer, &b, "\(i)")
            if let planes = kind.planes {
                let lengths = planeFormats.indices.map { Int(planes[$0].length) }
                let dma = export ? try exportBuffer(node, kind: kind, index: i, lengths: lengths) : nil
                ring.append(
                    try mapPlanes(node, index: i, planes: planes, planeFormats: planeFormats, counter: counter, maps: &maps, exported: dma))
                exports.append(dma)
                continue
            }
            let length = Int(b.length)
            let dma = export ? try exportBuffer(node, kind: kind, index: i, lengths: [length]) : nil
            let (p, e) = kernel.mmap(fd, length: length, offset: Int64(b.m.offset))
            guard let p else {
                for plane in dma?.planes ?? [] { kernel.close(plane.fd) }
                throw io.error(Errno(e), "mmap of buffer \(i)")
            }
            counter.value.add(1, ordering: .relaxed)
            let address = UInt(bitPattern: p)
            ring.append(
                FrameStorage(borrowing: p, capacity: length) {
                    kernel.munmap(UnsafeMutableRawPointer(bitPattern: address)!, length: length)
                    for plane in dma?.planes ?? [] { kernel.close(plane.fd) } // the export lives as long as the mapping
                    counter.value.subtract(1, ordering: .relaxed)
                })
            exports.append(dma)
        }
        return ring
    }

    /// Exports buffer `index`'s memory planes as DMA-BUF descriptors (`VIDIOC_EXPBUF`, read-only, close-on-exec).
    /// On a failure, those exported so far are closed and the error names the buffer, the plane and the errno.
    private static func exportBuffer(_ node: V4L2Node, kind: BufferKind, index i: Int, lengths: [Int]) throws(CaptureError) -> DMABuf {
        var planes: [DMABuf.Plane] = []
        for (p, length) in lengths.enumerated() {
            var x = v4l2_exportbuffer()
            x.type = kind.type
            x.index = UInt32(i)
            x.plane = UInt32(p)
            x.flags = CV4L2_EXPBUF_FLAGS
            if let e = node.io.errnoOf(node.fd, .exportBuffer, &x) {
                for q in planes { node.io.kernel.close(q.fd) }
                throw CaptureError(
                    .streamFailed,
                    "\(node.path): VIDIOC_EXPBUF of buffer \(i) plane \(p) failed (\(e)): the driver cannot export its buffers as DMA-BUF; start without exportDMABuf",
                    device: node.path)
            }
            planes.append(DMABuf.Plane(fd: x.fd, length: length))
        }
        return DMABuf(planes: planes)
    }

    /// Maps every plane of multi-planar buffer `index` (QUERYBUF already filled `planes`): one storage for the
    /// buffer, whose release unmaps all its planes. A plane shorter than its format needs is an error naming it.
    private static func mapPlanes(
        _ node: V4L2Node, index i: Int, planes: UnsafeMutablePointer<v4l2_plane>, planeFormats: [PlaneFormat], counter: MapCounter,
        maps: inout [PlaneMap], exported: DMABuf?
    ) throws(CaptureError) -> FrameStorage {
        let io = node.io, fd = node.fd, kernel = io.kernel
        var mapped: [(address: UInt, length: Int)] = []
        var done = false
        defer {
            if !done {
                for m in mapped { kernel.munmap(UnsafeMutableRawPointer(bitPattern: m.address)!, length: m.length) }
                for plane in exported?.planes ?? [] { kernel.close(plane.fd) }
            }
        }
        for p in planeFormats.indices {
            let length = Int(planes[p].length)
            guard length >= planeFormats[p].needed else {
                throw CaptureError(
                    .streamFailed,
                    "\(node.path) buffer \(i) plane \(p) is \(length) bytes (VIDIOC_QUERYBUF length), smaller than the \(planeFormats[p].needed) bytes the format claims",
                    device: node.path)
            }
            let (ptr, e) = kernel.mmap(fd, length: length, offset: Int64(planes[p].m.mem_offset))
            guard let ptr else { throw io.error(Errno(e), "mmap of buffer \(i) plane \(p)") }
            mapped.append((UInt(bitPattern: ptr), length))
        }
        done = true
        for m in mapped { maps.append(PlaneMap(address: m.address, length: m.length)) }
        counter.value.add(1, ordering: .relaxed)
        let all = mapped
        return FrameStorage(borrowing: UnsafeMutableRawPointer(bitPattern: all[0].address)!, capacity: all[0].length) {
            for m in all { kernel.munmap(UnsafeMutableRawPointer(bitPattern: m.address)!, length: m.length) }
            for plane in exported?.planes ?? [] { kernel.close(plane.fd) } // the export lives as long as the mapping
            counter.value.subtract(1, ordering: .relaxed)
        }
    }

    /// STREAMOFF, drop our references to the buffers (unmapping those no consumer holds), REQBUFS(0) once
    /// nothing is mapped any more, close. Closing with mappings still held is safe: the kernel frees them at
    /// munmap.
    private static func teardown(_ node: V4L2Node, type: UInt32, buffers: inout [FrameStorage], counter: MapCounter) {
        guard node.fd >= 0 else { return }
        var off = Int32(type)
        _ = node.io.errnoOf(node.fd, .streamOff, &off)
        buffers.removeAll()
        if counter.value.load(ordering: .relaxed) == 0 {
            var rb = v4l2_requestbuffers()
            rb.count = 0
            rb.type = type
            rb.memory = CV4L2_MEMORY_MMAP
            _ = node.io.errnoOf(node.fd, .requestBuffers, &rb)
        }
        node.close()
    }

    /// The `VIDIOC_QUERYCAP` driver name of v4l2loopback, whose writer rewrites buffers its reader still holds.
    static let driverRewritingHeldBuffers = "v4l2 loopback"

    /// Buffers currently mapped (also those held by consumers after stop).
    public var mappedBuffers: Int { mappedCount.value.load(ordering: .relaxed) }

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
            if let e = requeueFree() {
                fail(e)
                return
            }
            if keyFrameRequested.exchange(false, ordering: .acquiringAndReleasing) {
                // A refusal (EBUSY, EACCES) costs only the request: the camera's next scheduled IDR still comes.
                _ = try? node.setControl(.forceKeyFrame, to: .integer(0))
            }
            let bitrate = bitrateRequested.exchange(0, ordering: .acquiringAndReleasing)
            if bitrate > 0 { _ = try? node.setControl(.videoBitrate, to: .integer(Int64(bitrate))) }
            let r = io.kernel.poll(node.fd, timeoutMs: configuration.pollTimeoutMs)
            if r < 0 {
                fail(io.error(Errno(-r), "poll", phase: .streaming))
                return
            }
            if r == 0 {
                if monotonicNanoseconds() - lastFrameAt > configuration.noFrameTimeoutNs {
                    if restarted {
                        fail(
                            CaptureError(
                                .timeout,
                                "\(path) delivered no frame for \(configuration.noFrameTimeoutNs / 1_000_000) ms, even after restarting the stream",
                                device: path))
                        return
                    }
                    restarted = true
                    if let e = restartStream() {
                        fail(e)
                        return
                    }
                    lastFrameAt = monotonicNanoseconds()
                }
                continue
            }
            var b = kind.descriptor()
            if let e = io.errnoOf(node.fd, .dequeueBuffer, &b) {
                if e.rawValue == EAGAIN { continue }
                fail(io.error(e, "VIDIOC_DQBUF", phase: .streaming))
                return
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
        if b.flags & CV4L2_BUF_FLAG_ERROR != 0 {
            sink.dropped(.corruptBuffer, 1)
            return
        }
        // The payload: where it starts in the buffer and its bytes (one plane, or the first of several).
        var start = 0, used = Int(b.bytesused)
        var layout: PlaneLayout?
        if let planes = kind.planes {
            guard let payload = multiPlanarPayload(planes, index: index) else {
                sink.dropped(.shortBuffer, 1)
                return
            }
            (start, used, layout) = payload
        } else {
            let needed = applied.pixelFormat.frameSize(width: applied.size.width, height: applied.size.height, stride: applied.stride) ?? 1
            if used < needed || used > slots[index].capacity {
                sink.dropped(.shortBuffer, 1)
                return
            }
        }

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

        var storage = slots[index]
        // Keep a buffer with the driver: when none is queued and none is free to queue, copy this frame into a
        // private buffer so this one goes straight back; with every copy held too, drop the frame. From a driver
        // that rewrites held buffers, always.
        let stillQueued = queued.contains(true)
        let free = (0..<slots.count).contains { $0 != index && !queued[$0] && isKnownUniquelyReferenced(&slots[$0]) }
        if copiesEveryFrame || (!stillQueued && !free) {
            let copySize = layout == nil ? used : planeFormats.dropFirst().reduce(used) { $0 + $1.needed }
            guard let c = freeCopy(copySize) else {
                sink.dropped(.buffersHeld, 1)
                return
            }
            storage = c
            if let l = layout {
                layout = copyPlanes(l, from: slots[index].baseAddress + start, firstPlaneBytes: used, into: c)
            } else {
                storage.mutableBaseAddress.copyMemory(from: slots[index].baseAddress + start, byteCount: used)
            }
            start = 0
            sink.copied()
        }
        var buffer =
            if let layout {
                VideoFrameBuffer(
                    pixelFormat: applied.pixelFormat, width: applied.size.width, height: applied.size.height, planes: layout,
                    firstPlaneBytes: used, storage: storage, offset: start)
            } else {
                VideoFrameBuffer(
                    pixelFormat: applied.pixelFormat, width: applied.size.width, height: applied.size.height,
                    stride: applied.stride, bytesUsed: used, storage: storage, offset: start)
            }
        if !exported.isEmpty, storage === slots[index] { buffer.dmaBuf = exported[index] } // not on a private copy
        var frame = VideoFrame(buffer: buffer, rotation: rotation, timestampNs: ts, sequence: UInt64(b.sequence), colorSpace: applied.colorSpace)
        if applied.pixelFormat == .h264 {
            // The driver's flag when it sets one (KEYFRAME, or PFRAME/BFRAME for the others); a driver that flags
            // nothing (v4l2loopback, many UVC cameras): the access unit's own NAL types.
            let typeFlags = b.flags & (CV4L2_BUF_FLAG_KEYFRAME | CV4L2_BUF_FLAG_PFRAME | CV4L2_BUF_FLAG_BFRAME)
            frame.isKeyFrame =
                typeFlags != 0
                ? typeFlags & CV4L2_BUF_FLAG_KEYFRAME != 0
                : V4L2Stream.containsIDR(UnsafeRawBufferPointer(start: storage.baseAddress + start, count: used))
        }
        sink.frame(frame)
    }

    /// True when the Annex-B access unit has an IDR slice (NAL type 5) before any other slice (type 1): it scans
    /// start codes only up to the first slice, so the cost is the bytes of the parameter sets and SEI before it.
    /// Bytes that are not Annex-B (garbage, a truncated unit) give false; the passthrough stage judges them.
    static func containsIDR(_ au: UnsafeRawBufferPointer) -> Bool {
        let n = au.count
        var i = 0
        while i + 3 < n {
            if au[i] == 0 && au[i + 1] == 0 && au[i + 2] == 1 {
                let type = au[i + 3] & 0x1f
                if type == 5 { return true }
                if type == 1 { return false }
                i += 3
            } else {
                i += 1
            }
        }
        return false
    }

    /// A dequeued multi-planar buffer's payload: the first plane's start in its mapping and its bytes, and for a
    /// separate-plane format where every plane's payload sits relative to the first. Nil (a short buffer) when a
    /// plane's `data_offset`/`bytesused` do not fit its mapping or leave fewer bytes than the format needs.
    private func multiPlanarPayload(_ planes: UnsafeMutablePointer<v4l2_plane>, index: Int) -> (Int, Int, PlaneLayout?)? {
        let n = planeFormats.count
        var offsets = (0, 0, 0), strides = (0, 0, 0)
        var first = (start: 0, used: 0, address: 0)
        for p in 0..<n {
            let map = planeMaps[index * n + p]
            let used = Int(planes[p].bytesused), dataOffset = Int(planes[p].data_offset)
            guard dataOffset <= used, used <= map.length, used - dataOffset >= planeFormats[p].needed else { return nil }
            let address = Int(bitPattern: map.address) &+ dataOffset
            if p == 0 {
                first = (dataOffset, used - dataOffset, address)
            } else if p == 1 {
                offsets.1 = address &- first.address
                strides.1 = planeFormats[p].stride
            } else if p == 2 {
                offsets.2 = address &- first.address
                strides.2 = planeFormats[p].stride
            }
        }
        strides.0 = planeFormats[0].stride
        return (first.start, first.used, n > 1 ? PlaneLayout(count: n, offsets: offsets, strides: strides) : nil)
    }

    /// Copies separate planes one after the other into a private buffer; the layout of the copy.
    private func copyPlanes(_ l: PlaneLayout, from first: UnsafeRawPointer, firstPlaneBytes: Int, into c: FrameStorage) -> PlaneLayout {
        let dst = c.mutableBaseAddress
        dst.copyMemory(from: first, byteCount: firstPlaneBytes)
        var at = firstPlaneBytes
        var offsets = (0, 0, 0)
        if l.count > 1 {
            offsets.1 = at
            dst.advanced(by: at).copyMemory(from: first.advanced(by: l.offsets.1), byteCount: planeFormats[1].needed)
            at += planeFormats[1].needed
        }
        if l.count > 2 {
            offsets.2 = at
            dst.advanced(by: at).copyMemory(from: first.advanced(by: l.offsets.2), byteCount: planeFormats[2].needed)
        }
        return PlaneLayout(count: l.count, offsets: offsets, strides: l.strides)
    }

    /// A copy buffer no consumer holds, or nil.
    private func freeCopy(_ size: Int) -> FrameStorage? {
        for i in copies.indices where copies[i].capacity >= size && isKnownUniquelyReferenced(&copies[i]) { return copies[i] }
        return nil
    }

    /// Re-queues every buffer no consumer holds any more.
    private func requeueFree() -> CaptureError? {
        for i in slots.indices where !queued[i] && isKnownUniquelyReferenced(&slots[i]) {
            var b = kind.descriptor(i)
            if let e = io.errnoOf(node.fd, .queueBuffer, &b) { return io.error(e, "VIDIOC_QBUF of buffer \(i)", phase: .streaming) }
            queued[i] = true
        }
        return nil
    }

    private func restartStream() -> CaptureError? {
        var t = Int32(kind.type)
        _ = io.errnoOf(node.fd, .streamOff, &t)
        for i in queued.indices { queued[i] = false } // STREAMOFF returns every buffer to us
        if let e = requeueFree() { return e }
        return io.errnoOf(node.fd, .streamOn, &t).map { io.error($0, "VIDIOC_STREAMON (restart)", phase: .streaming) }
    }

    private func release() {
        guard !released else { return }
        released = true
        copies.removeAll()
        var ring = slots
        slots.removeAll()
        V4L2Stream.teardown(node, type: kind.type, buffers: &ring, counter: mappedCount)
        kind.planes?.deallocate() // the capture thread, its only user, is ending
    }

    private func fail(_ error: CaptureError) {
        release()
        sink.failed(error)
    }
}

/// How the stream's buffers are described: the single-planar buffer type, or the multi-planar one with the
/// stream's `v4l2_plane` array (`VIDEO_MAX_PLANES` entries, reused by every QUERYBUF/QBUF/DQBUF: no allocation
/// per frame).
struct BufferKind {
    let type: UInt32
    /// Planes per buffer on a multi-planar device (`num_planes`), 0 on a single-planar one.
    let planeCount: Int
    let planes: UnsafeMutablePointer<v4l2_plane>?

    /// A `v4l2_buffer` naming mmap buffer `index` of the capture queue (the one way the stream builds one).
    func descriptor(_ index: Int = 0) -> v4l2_buffer {
        var b = v4l2_buffer()
        b.index = UInt32(index)
        b.type = type
        b.memory = CV4L2_MEMORY_MMAP
        if let planes {
            planes.update(repeating: v4l2_plane(), count: V4L2Stream.maxPlanes)
            b.m.planes = planes
            b.length = UInt32(planeCount)
        }
        return b
    }
}

/// One plane of a multi-planar format: its stride and the bytes its format needs.
struct PlaneFormat {
    let stride: Int
    let needed: Int
}

/// One mapped plane of a multi-planar buffer.
struct PlaneMap {
    let address: UInt
    let length: Int
}

/// Counts live mappings; shared with each buffer's release closure.
final class MapCounter: Sendable {
    let value = Atomic<Int>(0)
}
