import Glibc
import SystemIO

/// Memory that holds one frame's pixels: either allocated by us (freed on deinit) or borrowed from a
/// driver (an mmap'd V4L2 buffer) and handed back through `release` when the last frame referencing it goes.
///
/// The class is the unit of lifetime: a frame keeps its storage alive; pools reuse a storage once they hold
/// the only reference to it (`isKnownUniquelyReferenced`), so steady-state capture allocates nothing.
///
/// Consumers get read-only access (`baseAddress`); writing is for the producers inside this package
/// (`mutableBaseAddress`), and for memory we own (`writableBaseAddress`): driver memory is never writable.
public final class FrameStorage: @unchecked Sendable {
    // @unchecked: the pointer is written only by the producer before the storage is shared (or after the
    // pool has proven it holds the only reference); consumers only read. That is the frame contract.
    package let mutableBaseAddress: UnsafeMutableRawPointer
    /// The usable size in bytes.
    public let capacity: Int
    private let release: (@Sendable () -> Void)?
    /// True for memory borrowed from a driver (an mmap'd V4L2 buffer): read-only for everyone.
    public var isBorrowed: Bool { release != nil }
    /// The bytes, read-only.
    public var baseAddress: UnsafeRawPointer { UnsafeRawPointer(mutableBaseAddress) }
    /// The bytes for writing, when this storage is ours (nil for driver memory).
    public var writableBaseAddress: UnsafeMutableRawPointer? { isBorrowed ? nil : mutableBaseAddress }

    /// Allocates `capacity` bytes, 64-byte aligned (what libyuv's SIMD paths like).
    public init(capacity: Int) {
        self.capacity = capacity
        self.mutableBaseAddress = UnsafeMutableRawPointer.allocate(byteCount: Swift.max(capacity, 1), alignment: 64)
        self.release = nil
    }

    /// Allocates `capacity` bytes for a long-lived pooled buffer (zero-filled, page-aligned). A frame-sized one
    /// (≥ 128 KiB) is mapped from the kernel and unmapped on deinit, not taken from the allocator: the buffers
    /// of a pool are made on a stream's thread at each start or switch, and glibc would serve them from that
    /// thread's arena (its mmap threshold rises to the size of the last freed buffer), where a long-running
    /// process that switches cameras keeps them resident as fragments (measured: +44 MB after 200 switches).
    /// Per-frame allocations must not use this (each mapping costs page faults); pools reuse it for every frame.
    public init(pooledCapacity capacity: Int) {
        self.capacity = capacity
        let length = FrameStorage.mappedLength(capacity)
        if let m = MemoryMap.anonymous(length: length) {
            self.mutableBaseAddress = m
            self.mapped = length
        } else {
            self.mutableBaseAddress = UnsafeMutableRawPointer.allocate(byteCount: Swift.max(capacity, 1), alignment: 64)
        }
        self.release = nil
    }

    /// Wraps memory someone else owns; `release` runs when the storage is destroyed.
    public init(borrowing base: UnsafeMutableRawPointer, capacity: Int, release: @escaping @Sendable () -> Void) {
        self.mutableBaseAddress = base
        self.capacity = capacity
        self.release = release
    }

    /// Bytes mapped for a pooled storage of `capacity` (whole pages), or 0 where the allocator serves it.
    static func mappedLength(_ capacity: Int) -> Int {
        guard capacity >= 128 * 1024, capacity <= Int.max - 65536 else { return 0 }
        let page = 4096
        return (capacity + page - 1) / page * page
    }

    /// Bytes of the mapping (0 for allocator or borrowed memory).
    private var mapped = 0

    deinit {
        if let release {
            release()
        } else if mapped > 0 {
            MemoryMap.unmap(mutableBaseAddress, length: mapped)
        } else {
            mutableBaseAddress.deallocate()
        }
    }
}

/// Where the planes of a frame sit in its storage.
public struct PlaneLayout: Sendable, Equatable {
    /// How many planes the format has: 1 (packed), 2 (a luma plane and an interleaved chroma plane) or 3.
    public var count: Int
    /// Byte offset of each plane from the payload's start (0 for planes the format lacks).
    public var offsets: (Int, Int, Int)
    /// Bytes per line of each plane (0 for planes the format lacks).
    public var strides: (Int, Int, Int)
    /// A layout of `count` planes (producers inside this package: wrapped and multi-planar buffers).
    package init(count: Int, offsets: (Int, Int, Int), strides: (Int, Int, Int)) {
        self.count = count
        self.offsets = offsets
        self.strides = strides
    }
    public static func == (a: PlaneLayout, b: PlaneLayout) -> Bool {
        a.count == b.count && a.offsets == b.offsets && a.strides == b.strides
    }
}

/// A frame's pixels: format, size, first-plane stride and the bytes (V4L2 single-planar layout: for
/// planar formats the chroma planes follow the luma plane and their stride is derived from `stride`).
///
/// A frame from a multi-planar camera in a separate-plane format (`NM12`, `YM12`, …) has its planes in separate
/// driver buffers: its ``planes`` then place each plane (offsets from the first plane's start, each plane's own
/// stride), ``bytes`` and ``bytesUsed`` cover the first plane only, and the storage keeps every plane alive.
public struct VideoFrameBuffer: Sendable {
    /// How the bytes encode the pixels.
    public let pixelFormat: PixelFormat
    /// In pixels.
    public let width: Int
    /// In pixels.
    public let height: Int
    /// Bytes per line of the first plane; 0 for compressed formats.
    public let stride: Int
    /// Bytes of payload (for MJPEG: the JPEG's length).
    public let bytesUsed: Int
    /// The memory holding the payload; a frame keeps it alive (for driver memory: keeps the buffer from the driver).
    public let storage: FrameStorage
    /// Offset of the payload in the storage.
    public let offset: Int

    /// The driver buffer holding this frame, exported as DMA-BUF file descriptors for a zero-copy consumer (a
    /// hardware encoder, a GPU importer): set on frames from a V4L2 camera started with
    /// `V4L2Stream.Configuration.exportDMABuf`, nil otherwise (and nil on a frame that was copied out of driver
    /// memory because consumers held every buffer).
    public package(set) var dmaBuf: DMABuf?

    /// Planes placed by their owner (`I420Buffer(wrapping:)`, a multi-planar V4L2 buffer): offsets from the first
    /// plane, each with its own stride; nil for the V4L2 single-planar layout derived from `stride`.
    package let explicitPlanes: PlaneLayout?

    /// A buffer over `storage`. The payload (`offset`, `bytesUsed`) must lie within the storage (a precondition);
    /// the size and stride are not checked against the format (``requiredBytes`` tells what it needs).
    public init(
        pixelFormat: PixelFormat, width: Int, height: Int, stride: Int, bytesUsed: Int,
        storage: FrameStorage, offset: Int = 0
    ) {
        precondition(offset >= 0 && offset + bytesUsed <= storage.capacity, "frame payload outside its storage")
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.stride = stride
        self.bytesUsed = bytesUsed
        self.storage = storage
        self.offset = offset
        self.explicitPlanes = nil
    }

    /// An I420 buffer whose planes sit where their owner put them (checked by `I420Buffer(wrapping:)`).
    package init(i420Width width: Int, height: Int, planes: PlaneLayout, storage: FrameStorage) {
        self.init(pixelFormat: .i420, width: width, height: height, planes: planes, firstPlaneBytes: storage.capacity, storage: storage)
    }

    /// A buffer whose planes sit where their producer put them, each with its own stride (a multi-planar V4L2
    /// buffer: one memory buffer per plane, `NM12`, `YM12`, …). The first plane starts at `offset` in `storage`
    /// and holds `firstPlaneBytes`; the other planes are at `planes.offsets` from it (anywhere in memory: the
    /// storage's release keeps them all alive). The producer has checked every plane's extent.
    package init(
        pixelFormat: PixelFormat, width: Int, height: Int, planes: PlaneLayout, firstPlaneBytes: Int, storage: FrameStorage, offset: Int = 0
    ) {
        precondition(offset >= 0 && offset + firstPlaneBytes <= storage.capacity, "frame payload outside its storage")
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.stride = planes.strides.0
        self.bytesUsed = firstPlaneBytes
        self.storage = storage
        self.offset = offset
        self.explicitPlanes = planes
    }

    /// A frame read in place from a buffer another library placed (libcamera's requests, PipeWire's buffers): plane
    /// `i` starts `starts.i` bytes into `storage`, `strides.i` bytes a row. One plane is the single-buffer layout;
    /// more are placed from the first (their offsets may point anywhere the storage's release keeps alive). The
    /// producer has checked that each plane's whole rows lie in its memory.
    package init(
        pixelFormat: PixelFormat, size: FrameSize, planeCount: Int, firstPlaneRows: Int, starts: (Int, Int, Int), strides: (Int, Int, Int),
        storage: FrameStorage
    ) {
        if planeCount == 1 {
            self.init(
                pixelFormat: pixelFormat, width: size.width, height: size.height, stride: strides.0, bytesUsed: strides.0 * firstPlaneRows,
                storage: storage, offset: starts.0)
        } else {
            let layout = PlaneLayout(count: planeCount, offsets: (0, starts.1 - starts.0, starts.2 - starts.0), strides: strides)
            self.init(
                pixelFormat: pixelFormat, width: size.width, height: size.height, planes: layout, firstPlaneBytes: strides.0 * firstPlaneRows,
                storage: storage, offset: starts.0)
        }
    }

    /// Width and height.
    public var size: FrameSize { FrameSize(width: width, height: height) }
    /// The payload's first byte, read-only; valid while this buffer (or a copy of it) exists.
    public var baseAddress: UnsafeRawPointer { UnsafeRawPointer(storage.baseAddress + offset) }
    /// The payload, read-only; valid while this buffer (or a copy of it) exists.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: baseAddress, count: bytesUsed) }

    /// The bytes the format needs at this size and stride (nil for compressed formats; for wrapped planes, the
    /// first plane's bytes: each plane's extent was checked when it was wrapped).
    public var requiredBytes: Int? {
        explicitPlanes != nil ? bytesUsed : pixelFormat.frameSize(width: width, height: height, stride: stride)
    }

    /// Plane offsets and strides: where their producer put them, else under the V4L2 single-planar rules (a
    /// separate-plane format such as `NM12` laid out in one buffer follows its single-buffer twin, `NV12`).
    public var planes: PlaneLayout {
        if let explicitPlanes { return explicitPlanes }
        let s = stride, h = height, ch = (h + 1) / 2, cs = (s + 1) / 2
        switch pixelFormat.singleBufferEquivalent {
        case .i420, .yv12: return PlaneLayout(count: 3, offsets: (0, s * h, s * h + cs * ch), strides: (s, cs, cs))
        case .yuv422p: return PlaneLayout(count: 3, offsets: (0, s * h, s * h + cs * h), strides: (s, cs, cs))
        case .nv12, .nv21, .nv16, .nv61: return PlaneLayout(count: 2, offsets: (0, s * h, 0), strides: (s, cs * 2, 0))
        case .nv24, .nv42: return PlaneLayout(count: 2, offsets: (0, s * h, 0), strides: (s, s * 2, 0))
        default: return PlaneLayout(count: 1, offsets: (0, 0, 0), strides: (s, 0, 0))
        }
    }

    /// Copies the payload into new storage (for consumers that must keep a frame beyond the capture contract).
    /// Planes placed in separate memory are copied one after the other into the one new storage.
    public func copy() -> VideoFrameBuffer {
        if let p = explicitPlanes { return copyPlanes(p) }
        let s = FrameStorage(capacity: bytesUsed)
        s.mutableBaseAddress.copyMemory(from: baseAddress, byteCount: bytesUsed)
        return VideoFrameBuffer(pixelFormat: pixelFormat, width: width, height: height, stride: stride, bytesUsed: bytesUsed, storage: s)
    }

    /// A `YM12` buffer as I420 with its planes where they are (no copy): what the converter passes through.
    package func asI420Planes() -> VideoFrameBuffer {
        VideoFrameBuffer(
            pixelFormat: .i420, width: width, height: height, planes: planes, firstPlaneBytes: bytesUsed, storage: storage, offset: offset)
    }

    /// Lines of plane `i` (chroma of 4:2:0 layouts has half the lines, rounded up).
    private func planeRows(_ i: Int) -> Int {
        guard i > 0 else { return height }
        switch pixelFormat.singleBufferEquivalent {
        case .i420, .yv12, .nv12, .nv21: return (height + 1) / 2
        default: return height
        }
    }

    private func copyPlanes(_ p: PlaneLayout) -> VideoFrameBuffer {
        let strides = [p.strides.0, p.strides.1, p.strides.2], offsets = [p.offsets.0, p.offsets.1, p.offsets.2]
        let sizes = (0..<3).map { $0 < p.count ? strides[$0] * planeRows($0) : 0 }
        let first = max(bytesUsed, sizes[0])
        let s = FrameStorage(capacity: first + sizes[1] + sizes[2])
        let src = storage.baseAddress + offset
        s.mutableBaseAddress.copyMemory(from: src, byteCount: bytesUsed)
        s.mutableBaseAddress.advanced(by: first).copyMemory(from: src.advanced(by: offsets[1]), byteCount: sizes[1])
        s.mutableBaseAddress.advanced(by: first + sizes[1]).copyMemory(from: src.advanced(by: offsets[2]), byteCount: sizes[2])
        let layout = PlaneLayout(count: p.count, offsets: (0, p.count > 1 ? first : 0, p.count > 2 ? first + sizes[1] : 0), strides: p.strides)
        return VideoFrameBuffer(pixelFormat: pixelFormat, width: width, height: height, planes: layout, firstPlaneBytes: bytesUsed, storage: s)
    }
}

/// One plane of a raw format in the V4L2 single-buffer layout: its lines and the bytes of pixels in each.
package struct PlaneShape: Sendable, Equatable {
    /// Lines of the plane.
    package var rows: Int
    /// Bytes of pixels in each line (no padding).
    package var rowBytes: Int
    /// A plane of `rows` lines of `rowBytes` bytes.
    package init(rows: Int, rowBytes: Int) {
        self.rows = rows
        self.rowBytes = rowBytes
    }
}

extension PixelFormat {
    /// The planes of this raw format at a size, under the V4L2 single-buffer rules ``VideoFrameBuffer/planes``
    /// follows (chroma at half width and, for 4:2:0, half height, rounded up); nil for compressed formats and
    /// formats without a layout here. At an even width and height it also gives the byte and row offsets of a point
    /// (`planeShapes(width: x, height: y)`). For the providers that copy frames out of another library's buffers.
    package func planeShapes(width w: Int, height h: Int) -> [PlaneShape]? {
        let (cw, ch) = ((w + 1) / 2, (h + 1) / 2)
        switch singleBufferEquivalent {
        case .yuyv, .uyvy, .yvyu, .vyuy: return [PlaneShape(rows: h, rowBytes: cw * 4)]
        case .i420, .yv12: return [PlaneShape(rows: h, rowBytes: w), PlaneShape(rows: ch, rowBytes: cw), PlaneShape(rows: ch, rowBytes: cw)]
        case .yuv422p: return [PlaneShape(rows: h, rowBytes: w), PlaneShape(rows: h, rowBytes: cw), PlaneShape(rows: h, rowBytes: cw)]
        case .nv12, .nv21: return [PlaneShape(rows: h, rowBytes: w), PlaneShape(rows: ch, rowBytes: cw * 2)]
        case .nv16, .nv61: return [PlaneShape(rows: h, rowBytes: w), PlaneShape(rows: h, rowBytes: cw * 2)]
        case .nv24, .nv42: return [PlaneShape(rows: h, rowBytes: w), PlaneShape(rows: h, rowBytes: w * 2)]
        default:
            guard let bpp = bytesPerPixel, memoryPlaneCount == 1 else { return nil }
            return [PlaneShape(rows: h, rowBytes: w * bpp)]
        }
    }

    /// Copies one plane: `shape.rows` rows of `shape.rowBytes` bytes, `srcStride` apart at `src`, to `dstStride`
    /// apart at `dst` (one copy when both sides are packed rows). The caller has checked both extents.
    package static func copyPlane(
        _ shape: PlaneShape, from src: UnsafeRawPointer, stride srcStride: Int, to dst: UnsafeMutableRawPointer, stride dstStride: Int
    ) {
        if srcStride == dstStride && dstStride == shape.rowBytes {
            dst.copyMemory(from: src, byteCount: shape.rowBytes * shape.rows)
            return
        }
        var y = 0
        while y < shape.rows {
            (dst + y * dstStride).copyMemory(from: src + y * srcStride, byteCount: shape.rowBytes)
            y += 1
        }
    }

    /// The stride of plane `i` in one data block whose first plane's rows are `stride` apart (the same rules).
    package func planeStride(_ i: Int, firstStride s: Int) -> Int {
        guard i > 0 else { return s }
        switch singleBufferEquivalent {
        case .i420, .yv12, .yuv422p: return (s + 1) / 2
        case .nv12, .nv21, .nv16, .nv61: return (s + 1) / 2 * 2
        case .nv24, .nv42: return s * 2
        default: return s
        }
    }
}

/// An owned I420 (YU12) picture: three planes, chroma at half resolution (rounded up).
/// Its luma stride is even, so it follows the same layout rules as a V4L2 `YU12` buffer.
public struct I420Buffer: Sendable {
    /// The picture as a frame buffer (format `.i420`), for APIs that take any buffer.
    public let buffer: VideoFrameBuffer

    /// A new buffer with luma rows padded to 32 bytes.
    public init(width: Int, height: Int) {
        precondition(width > 0 && height > 0, "I420Buffer needs a positive size")
        self.init(width: width, height: height, fitting: FrameStorage(capacity: I420Buffer.byteCount(width: width, height: height)))
    }

    /// Wraps an existing YU12 buffer (its stride must be even), or planes wrapped by `init(wrapping:)`.
    public init?(_ buffer: VideoFrameBuffer) {
        guard buffer.pixelFormat == .i420 else { return nil }
        if buffer.explicitPlanes != nil {
            self.buffer = buffer
            return
        }
        guard buffer.stride % 2 == 0, let need = buffer.requiredBytes, buffer.bytesUsed >= need else { return nil }
        self.buffer = buffer
    }

    /// A size outside 1...16384 a side is an error naming it.
    private static func checkSize(width: Int, height: Int) throws(CaptureError) {
        guard (1...16384).contains(width), (1...16384).contains(height) else {
            throw CaptureError(.invalidArgument, "an I420 picture of \(width)x\(height): width and height must be 1...16384")
        }
    }

    /// Another library's I420 picture, wrapped without a copy: three planes anywhere in memory, each with its
    /// own stride (WebRTC's `I420Buffer::Wrap`, a decoder's output, an `AVFrame`). `release` runs when the last
    /// frame that holds the planes is gone; until then the memory must stay valid and unchanged. Read-only:
    /// `writablePlanes` is nil. The encoder and the converter read the planes in place.
    ///
    /// Throws for a size outside 1...16384, a luma stride below the width or a chroma stride below half of it
    /// (rounded up), or a stride above 1 MiB; the error names the value.
    public init(
        wrapping planes: (y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>),
        strides: (y: Int, u: Int, v: Int), width: Int, height: Int, release: @escaping @Sendable () -> Void
    ) throws(CaptureError) {
        try I420Buffer.checkSize(width: width, height: height)
        let cw = (width + 1) / 2
        for (name, stride, least) in [("luma", strides.y, width), ("U", strides.u, cw), ("V", strides.v, cw)] {
            guard stride >= least, stride <= 1 << 20 else {
                throw CaptureError(.invalidArgument, "\(name) stride \(stride) for a \(width)x\(height) I420 picture must be \(least)...\(1 << 20)")
            }
        }
        let y = Int(bitPattern: planes.y)
        let layout = PlaneLayout(
            count: 3, offsets: (0, Int(bitPattern: planes.u) &- y, Int(bitPattern: planes.v) &- y), strides: (strides.y, strides.u, strides.v))
        let storage = FrameStorage(borrowing: UnsafeMutableRawPointer(mutating: planes.y), capacity: strides.y * height, release: release)
        self.buffer = VideoFrameBuffer(i420Width: width, height: height, planes: layout, storage: storage)
    }

    /// The luma stride a new buffer of this width gets: the width rounded up to 32 bytes.
    public static func stride(forWidth w: Int) -> Int { (w + 31) & ~31 }
    /// Bytes a new buffer of this size needs (three planes, the luma stride from ``stride(forWidth:)``).
    public static func byteCount(width: Int, height: Int) -> Int {
        PixelFormat.i420.frameSize(width: width, height: height, stride: stride(forWidth: width))!
    }

    /// Wraps storage of at least `byteCount(width:height:)` bytes; smaller storage, or a size that is not
    /// positive or above 16384 a side, is an error naming both (never a trap).
    public init(width: Int, height: Int, storage: FrameStorage) throws(CaptureError) {
        try I420Buffer.checkSize(width: width, height: height)
        let bytes = I420Buffer.byteCount(width: width, height: height)
        guard storage.capacity >= bytes else {
            throw CaptureError(
                .invalidArgument, "storage of \(storage.capacity) bytes is too small for a \(width)x\(height) I420 picture (\(bytes) bytes)")
        }
        self.init(width: width, height: height, fitting: storage)
    }

    /// Wraps storage the caller made for this size (a pool's own buffers).
    package init(width: Int, height: Int, fitting storage: FrameStorage) {
        let bytes = I420Buffer.byteCount(width: width, height: height)
        self.buffer = VideoFrameBuffer(
            pixelFormat: .i420, width: width, height: height,
            stride: I420Buffer.stride(forWidth: width), bytesUsed: bytes, storage: storage)
    }

    /// In pixels.
    public var width: Int { buffer.width }
    /// In pixels.
    public var height: Int { buffer.height }
    /// Width of the U and V planes: half the width, rounded up.
    public var chromaWidth: Int { (width + 1) / 2 }
    /// Height of the U and V planes: half the height, rounded up.
    public var chromaHeight: Int { (height + 1) / 2 }
    /// Bytes per line of the Y plane.
    public var strideY: Int { buffer.stride }
    /// Bytes per line of the U plane (half the luma stride; the owner's for wrapped planes).
    public var strideU: Int { buffer.explicitPlanes?.strides.1 ?? buffer.stride / 2 }
    /// Bytes per line of the V plane (half the luma stride; the owner's for wrapped planes).
    public var strideV: Int { buffer.explicitPlanes?.strides.2 ?? buffer.stride / 2 }
    /// The planes, read-only (a pass-through I420 frame may be driver memory).
    public var dataY: UnsafePointer<UInt8> { UnsafePointer(planePointer(0)) }
    /// The U plane, read-only.
    public var dataU: UnsafePointer<UInt8> { UnsafePointer(planePointer(1)) }
    /// The V plane, read-only.
    public var dataV: UnsafePointer<UInt8> { UnsafePointer(planePointer(2)) }
    /// The planes for writing, for this package's producers (pools, converters, fixture cameras).
    package var mutableDataY: UnsafeMutablePointer<UInt8> { planePointer(0) }
    package var mutableDataU: UnsafeMutablePointer<UInt8> { planePointer(1) }
    package var mutableDataV: UnsafeMutablePointer<UInt8> { planePointer(2) }
    /// The planes for writing when the buffer is ours (made with `init(width:height:)` or from a pool); nil for
    /// an I420 frame that wraps driver memory, which is read-only.
    public var writablePlanes: (y: UnsafeMutablePointer<UInt8>, u: UnsafeMutablePointer<UInt8>, v: UnsafeMutablePointer<UInt8>)? {
        buffer.storage.isBorrowed ? nil : (planePointer(0), planePointer(1), planePointer(2))
    }

    private func planePointer(_ i: Int) -> UnsafeMutablePointer<UInt8> {
        let p = buffer.planes
        let off = i == 0 ? p.offsets.0 : i == 1 ? p.offsets.1 : p.offsets.2
        return (buffer.storage.mutableBaseAddress + buffer.offset + off).assumingMemoryBound(to: UInt8.self)
    }

    /// The picture as tightly packed planes (what ffmpeg's `-pix_fmt yuv420p` rawvideo holds).
    public func packedBytes() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(width * height + 2 * chromaWidth * chromaHeight)
        func rows(_ p: UnsafePointer<UInt8>, _ stride: Int, _ w: Int, _ h: Int) {
            for r in 0..<h { out.append(contentsOf: UnsafeBufferPointer(start: p + r * stride, count: w)) }
        }
        rows(dataY, strideY, width, height)
        rows(dataU, strideU, chromaWidth, chromaHeight)
        rows(dataV, strideV, chromaWidth, chromaHeight)
        return out
    }
}

/// One captured picture, as WebRTC's `RTCVideoFrame`: pixels, the rotation needed to show it upright,
/// a capture timestamp in monotonic nanoseconds (strictly increasing per capturer) and a sequence number.
///
/// **Frame lifetime.** A frame from a camera borrows the driver's buffer (read-only, no copy); the buffer goes
/// back to the driver once no frame references it. Holding frames is allowed, but each one held is a buffer the
/// driver cannot fill: when it would be left with none, the next frame is copied into one of the stream's few
/// private buffers (``CaptureStatistics/copied``), and when those are held too it is dropped as
/// ``FrameDropReason/buffersHeld``. Frames held after a stop stay valid. To keep one for long, copy it
/// (`frame.buffer.copy()`) or convert it.
public struct VideoFrame: Sendable {
    /// The pixels, in the format the camera delivered (often borrowed driver memory: see "Frame lifetime").
    public var buffer: VideoFrameBuffer
    /// Clockwise rotation that shows the picture upright (from the driver's sensor rotation, a fixture's
    /// `rotation` or a ``SensorOverride``); the pixels themselves are not rotated.
    public var rotation: VideoRotation
    /// Capture time in nanoseconds of the monotonic clock (`CLOCK_MONOTONIC`); strictly increasing per capturer,
    /// across device switches too.
    public var timestampNs: Int64
    /// The frame's number from the capturer: 0 for the first frame it received, then one more per frame, across
    /// starts and switches. A gap means frames were lost: dropped after capture, or made by the camera and lost
    /// before it (the driver's drops, corrupt or short buffers), each counted once.
    public var sequence: UInt64
    /// How the samples map to colours (primaries, transfer, matrix, range): the driver's or the fixture's
    /// description of the stream, kept or set by conversions, written by the encoder into the SPS.
    public var colorSpace: VideoColorSpace
    /// The first frame after a capture start or a camera switch: the picture does not follow from the frames
    /// before it, so an encoder starts an IDR here (`H264Encoder.encode(_:into:)` does). A conversion keeps the
    /// mark; a frame that a rate gate drops passes it on to the next one delivered.
    public var isDiscontinuity = false
    /// A frame a `VideoSource` passed on without converting it, because nobody wanted a picture (its owner paused
    /// pictures): the buffer is the camera's as captured; only the timestamp counts.
    package var isUnconverted = false
    /// The camera's exported buffer (it carries ``VideoFrameBuffer/dmaBuf``) that this picture was converted from,
    /// format only (no crop, scale, rotation or mirror): a zero-copy consumer that takes the camera's format (a
    /// hardware encoder importing `NV12`) queues it instead of the converted picture. nil unless the camera exports
    /// its buffers (`V4L2Stream.Configuration.exportDMABuf`) and the picture needed a conversion; a frame carrying
    /// it keeps the camera's buffer from the driver while it exists.
    public package(set) var capturedBuffer: VideoFrameBuffer?
    /// For an encoded frame (``isEncoded``): the access unit is a key frame (an IDR: decodable on its own), as the
    /// camera flagged it or its NAL units say. False for raw pictures.
    public var isKeyFrame = false
    /// What the frame carries (its pixel format's `PixelFormat.frameKind`): a picture, or an access unit.
    public var kind: FrameKind { buffer.pixelFormat.frameKind }
    /// True when the buffer holds an encoded access unit (`kind == .accessUnit`: Annex-B NAL units from a camera
    /// that encodes itself) instead of pixels: `buffer.bytes` is the access unit, `isKeyFrame` tells an IDR.
    /// Such frames are passed through, not converted.
    public var isEncoded: Bool { kind == .accessUnit }
    /// A frame from its parts (the capturer renumbers `sequence` and keeps timestamps increasing).
    public init(
        buffer: VideoFrameBuffer, rotation: VideoRotation = .rotation0, timestampNs: Int64, sequence: UInt64,
        colorSpace: VideoColorSpace = .unspecified
    ) {
        self.buffer = buffer
        self.rotation = rotation
        self.timestampNs = timestampNs
        self.sequence = sequence
        self.colorSpace = colorSpace
    }
    /// The buffer's width in pixels (before rotation).
    public var width: Int { buffer.width }
    /// The buffer's height in pixels (before rotation).
    public var height: Int { buffer.height }
}

/// A V4L2 capture buffer exported with `VIDIOC_EXPBUF`: one read-only DMA-BUF file descriptor per memory plane
/// (one for single-planar formats and single-buffer multi-planar ones such as `NV12`; two or three for `NM12`,
/// `YM12`, …). The frame's payload lies in them exactly as in the frame's mapped bytes (the first plane's at
/// ``VideoFrameBuffer/offset``).
///
/// The descriptors belong to the stream's buffer: they stay open while the frame (or any copy of its buffer)
/// exists and are closed with the buffer's mapping. A consumer that keeps one longer `dup`s it. Mapping one
/// (`mmap(…, PROT_READ, MAP_SHARED, fd, 0)`) gives the same bytes the frame shows.
public struct DMABuf: Sendable, Equatable {
    /// One memory plane: its descriptor and the buffer's length in bytes.
    public struct Plane: Sendable, Equatable {
        /// The DMA-BUF file descriptor (`O_CLOEXEC`, read-only).
        public let fd: Int32
        /// The length of the plane's buffer, bytes (what a mapping of the descriptor covers).
        public let length: Int
        /// A plane of `length` bytes behind `fd`.
        public init(fd: Int32, length: Int) {
            self.fd = fd
            self.length = length
        }
    }
    /// The memory planes, in the format's plane order.
    public let planes: [Plane]
    /// An exported buffer of `planes`.
    public init(planes: [Plane]) { self.planes = planes }
}

/// What a frame carries, asked in one place (`PixelFormat.frameKind`) instead of comparing pixel formats: pixels to
/// convert, or a coded access unit passed on as the camera made it.
public enum FrameKind: Sendable, Hashable {
    /// Pixels (raw or MJPEG): converted to I420, then processed and encoded.
    case picture
    /// A camera's own coded access unit (H.264, Annex-B): passed through, never decoded or converted.
    case accessUnit
}

extension PixelFormat {
    /// The kind of frame this format delivers: `.accessUnit` for a camera's own H.264, `.picture` for the rest.
    public var frameKind: FrameKind { self == .h264 ? .accessUnit : .picture }
}
