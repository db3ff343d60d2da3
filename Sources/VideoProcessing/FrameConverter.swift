public import VideoCapture
import CLibYUV

/// Turns camera frames of any negotiable pixel format into I420 with libyuv, cropping, rotating,
/// mirroring and scaling on the way, into pooled buffers (no pixel-buffer allocation in steady state).
///
/// Passes over the pixels: one for the common case (convert, or crop+convert); one more for each of
/// rotate, mirror and scale when asked (libyuv rotates I420 and NV12 sources while converting).
/// An unrotated I420 source with an even stride is passed through without a copy, and so is a whole `YM12`
/// frame (I420 with its planes in separate buffers). The other separate-plane formats of multi-planar cameras
/// (`NM12`, `NM21`, `YM21`, `NM16`, `NM61`, `YM16`) are read from their separate planes in the same single pass
/// as their single-buffer twins (`NV12ToI420` with the Y and UV planes from two buffers, `I420Copy`, `I422ToI420`).
///
/// Not thread-safe: use one converter per pipeline thread.
public final class FrameConverter {
    /// What to do to the picture on the way to I420, applied in this order: crop, rotate, mirror, scale.
    public struct Options: Sendable, Hashable {
        /// The part of the source to keep, in source pixels (before rotation); nil keeps the whole frame.
        /// Offsets are rounded down to even values for the subsampled chroma; a rectangle outside the frame throws
        /// `ProcessingError` with code `invalidArgument`.
        public var crop: CropRect?
        /// Rotation to apply to the pixels (WebRTC's `rotation_applied`); `.rotation0` leaves it as metadata.
        public var rotation: VideoRotation
        /// Mirror left to right after rotating (a front camera's preview).
        public var mirror: Bool
        /// Final size, after crop and rotation.
        public var scale: FrameSize?
        /// Options with every step off by default: no crop, no rotation, no mirror, the size the other steps give.
        public init(crop: CropRect? = nil, rotation: VideoRotation = .rotation0, mirror: Bool = false, scale: FrameSize? = nil) {
            self.crop = crop
            self.rotation = rotation
            self.mirror = mirror
            self.scale = scale
        }
    }

    private let pools = PoolSet()
    /// A converter with empty pools; buffers are allocated on first use per output size.
    public init() {}

    /// Memory for the final picture of a conversion, when the caller has some (a frame tap's ring slot, so that
    /// the picture is written once, where its readers read it): asked with the output's width and height, nil for a
    /// buffer of the converter's own pools. Pictures on the way (before a rotation, mirror or scale) always use the
    /// pools; a picture passed through unconverted is not asked for.
    package var destination: (@Sendable (_ width: Int, _ height: Int) -> I420Buffer?)?

    /// The buffer for a step's output: the caller's `destination` for the last step, else a pooled one.
    private func output(width: Int, height: Int, last: Bool) -> I420Buffer {
        if last, let d = destination?(width, height) { return d }
        return pools.acquire(width: width, height: height)
    }

    /// Buffers allocated so far by this converter's pools (stays flat in steady state).
    public var allocatedBufferCount: Int { pools.allocatedCount }

    /// Converts a frame; with `applyRotation`, the frame's own rotation is applied to the pixels and the
    /// result has rotation 0 (else the rotation is carried as metadata).
    public func convert(_ frame: VideoFrame, applyRotation: Bool = false, options: Options = .init()) throws(ProcessingError) -> VideoFrame {
        var opts = options
        if applyRotation {
            opts.rotation = VideoRotation(degrees: frame.rotation.degrees + options.rotation.degrees) ?? .rotation0
        }
        let out = try convert(frame.buffer, options: opts)
        let rot: VideoRotation = applyRotation ? .rotation0 : frame.rotation
        return VideoFrame(
            buffer: out.buffer, rotation: rot, timestampNs: frame.timestampNs, sequence: frame.sequence,
            colorSpace: frame.colorSpace.convertedToI420(from: frame.buffer.pixelFormat))
    }

    /// Converts one buffer to I420.
    public func convert(_ src: VideoFrameBuffer, options: Options = .init()) throws(ProcessingError) -> I420Buffer {
        try validate(src)
        let crop = try cropRect(for: src, options.crop)
        if let reduced = try decodeJPEGReduced(src, crop: crop, options: options) { return reduced }
        var current: I420Buffer
        let layout = src.pixelFormat.singleBufferEquivalent
        let whole = crop == CropRect(x: 0, y: 0, width: src.width, height: src.height)
        let isWholeI420 = layout == .i420 && whole
        let turned =
            options.rotation.swapsDimensions ? FrameSize(width: crop.height, height: crop.width) : FrameSize(width: crop.width, height: crop.height)
        // Whether a scale follows the rotation and mirror (the last step writes into `destination`).
        let scales = options.scale.map { $0 != turned } ?? false
        if options.rotation != .rotation0 && (layout == .i420 || layout == .yv12 || layout == .nv12) {
            // libyuv rotates these while reading them: one pass.
            current = output(width: turned.width, height: turned.height, last: !options.mirror && !scales)
            try rotateDirect(src, crop: crop, rotation: options.rotation, into: current)
        } else {
            if isWholeI420, let passthrough = I420Buffer(src.pixelFormat == .i420 ? src : src.asI420Planes()) {
                current = passthrough
            } else {
                current = output(width: crop.width, height: crop.height, last: options.rotation == .rotation0 && !options.mirror && !scales)
                try convertPlain(src, crop: crop, into: current)
            }
            current = rotated(current, options.rotation, last: !options.mirror && !scales)
        }
        if options.mirror { current = mirrored(current, last: !scales) }
        if let target = options.scale, target != FrameSize(width: current.width, height: current.height) {
            guard target.width > 0, target.height > 0, target.width <= 16384, target.height <= 16384 else {
                throw ProcessingError(.invalidSize, "scale size \(target) must be positive and at most 16384x16384")
            }
            let s = output(width: target.width, height: target.height, last: true)
            _ = I420Scale(
                current.dataY, Int32(current.strideY), current.dataU, Int32(current.strideU), current.dataV, Int32(current.strideV),
                Int32(current.width), Int32(current.height),
                s.mutableDataY, Int32(s.strideY), s.mutableDataU, Int32(s.strideU), s.mutableDataV, Int32(s.strideV),
                Int32(target.width), Int32(target.height), kFilterBox)
            current = s
        }
        return current
    }

    // MARK: - Validation

    private func validate(_ src: VideoFrameBuffer) throws(ProcessingError) {
        guard src.width > 0, src.height > 0 else {
            throw ProcessingError(.invalidSize, "frame size \(src.width)x\(src.height) must be positive")
        }
        guard src.pixelFormat.isConvertibleToI420 else {
            throw ProcessingError(
                .unsupportedFormat,
                "cannot convert \(src.pixelFormat) (\(src.pixelFormat.name)) to I420; convertible: \(PixelFormat.convertible.map(\.fourcc).joined(separator: " "))"
            )
        }
        if src.pixelFormat.isCompressed {
            guard src.bytesUsed >= 4 else {
                throw ProcessingError(.shortBuffer, "\(src.pixelFormat) frame of \(src.bytesUsed) bytes is too short to be a JPEG")
            }
            return
        }
        let minStride = src.pixelFormat.minimumStride(width: src.width)!
        guard src.stride >= minStride else {
            throw ProcessingError(
                .invalidArgument, "\(src.pixelFormat) stride \(src.stride) is below the minimum \(minStride) for width \(src.width)")
        }
        if let p = src.explicitPlanes, src.pixelFormat.memoryPlaneCount > 1 {
            // Separate planes: each one's own stride (their extents were checked by the producer).
            let strides = [p.strides.0, p.strides.1, p.strides.2]
            for i in 1..<src.pixelFormat.memoryPlaneCount {
                let least = src.pixelFormat.memoryPlane(i, width: src.width, height: src.height)!.minimumStride
                guard i < p.count, strides[i] >= least else {
                    throw ProcessingError(
                        .invalidArgument,
                        "\(src.pixelFormat) plane \(i) stride \(i < p.count ? strides[i] : 0) is below the minimum \(least) for width \(src.width)")
                }
            }
        }
        let need = src.requiredBytes!
        guard src.bytesUsed >= need else {
            throw ProcessingError(
                .shortBuffer,
                "\(src.pixelFormat) \(src.width)x\(src.height) stride \(src.stride) needs \(need) bytes, the buffer has \(src.bytesUsed)")
        }
    }

    private func cropRect(for src: VideoFrameBuffer, _ crop: CropRect?) throws(ProcessingError) -> CropRect {
        guard var c = crop else { return CropRect(x: 0, y: 0, width: src.width, height: src.height) }
        guard c.width > 0, c.height > 0, c.x >= 0, c.y >= 0, c.x + c.width <= src.width, c.y + c.height <= src.height else {
            throw ProcessingError(.invalidArgument, "crop \(c) does not fit in the \(src.width)x\(src.height) frame")
        }
        // Chroma is subsampled: crop origins snap to even pixels.
        c.x &= ~1
        c.y &= ~1
        return c
    }

    // MARK: - Conversion without rotation

    private func convertPlain(_ src: VideoFrameBuffer, crop c: CropRect, into d: I420Buffer) throws(ProcessingError) {
        let base = src.baseAddress.assumingMemoryBound(to: UInt8.self)
        let p = src.planes
        let s0 = src.stride
        let w = Int32(c.width), h = Int32(c.height)
        let dy = d.mutableDataY, du = d.mutableDataU, dv = d.mutableDataV
        let dsy = Int32(d.strideY), dsu = Int32(d.strideU), dsv = Int32(d.strideV)
        let bpp = src.pixelFormat.bytesPerPixel ?? 1
        // First-plane pointer at the crop origin.
        let y0 = base + p.offsets.0 + c.y * s0 + c.x * bpp
        var rc: Int32 = 0
        // A separate-plane format (NM12, YM12, …) is its single-buffer twin with planes placed by `p`.
        let layout = src.pixelFormat.singleBufferEquivalent
        switch layout {
        case .i420, .yv12:
            let cs = p.strides.1, cs2 = p.strides.2 // equal but for wrapped or separate planes
            let u = base + p.offsets.1 + (c.y / 2) * cs + c.x / 2, v = base + p.offsets.2 + (c.y / 2) * cs2 + c.x / 2
            let (su, sv) = layout == .i420 ? (u, v) : (v, u)
            let (ssu, ssv) = layout == .i420 ? (cs, cs2) : (cs2, cs)
            rc = I420Copy(y0, Int32(s0), su, Int32(ssu), sv, Int32(ssv), dy, dsy, du, dsu, dv, dsv, w, h)
        case .nv12, .nv21, .nv16, .nv61:
            // 4:2:2 semi-planar: every other chroma row, by doubling the chroma stride.
            let rowStep = (layout == .nv16 || layout == .nv61) ? 2 : 1
            let cs = p.strides.1
            let uvRow = (layout == .nv16 || layout == .nv61) ? c.y : c.y / 2
            let uv = base + p.offsets.1 + uvRow * cs + c.x
            if layout == .nv12 || layout == .nv16 {
                rc = NV12ToI420(y0, Int32(s0), uv, Int32(cs * rowStep), dy, dsy, du, dsu, dv, dsv, w, h)
            } else {
                rc = NV21ToI420(y0, Int32(s0), uv, Int32(cs * rowStep), dy, dsy, du, dsu, dv, dsv, w, h)
            }
        case .nv24, .nv42:
            CopyPlane(y0, Int32(s0), dy, dsy, w, h)
            let cs = p.strides.1
            let uvBase = base + p.offsets.1 + c.y * cs + c.x * 2
            let (first, second) = src.pixelFormat == .nv24 ? (du, dv) : (dv, du)
            let cw = (c.width + 1) / 2, ch = (c.height + 1) / 2
            for r in 0..<ch {
                let row = uvBase + (2 * r) * cs
                let o1 = first + r * Int(dsu), o2 = second + r * Int(dsv)
                for x in 0..<cw {
                    o1[x] = row[4 * x]
                    o2[x] = row[4 * x + 1]
                }
            }
        case .yuyv, .yvyu:
            let (a, b) = src.pixelFormat == .yuyv ? (du, dv) : (dv, du)
            rc = YUY2ToI420(y0, Int32(s0), dy, dsy, a, dsu, b, dsv, w, h)
        case .uyvy, .vyuy:
            let (a, b) = src.pixelFormat == .uyvy ? (du, dv) : (dv, du)
            rc = UYVYToI420(y0, Int32(s0), dy, dsy, a, dsu, b, dsv, w, h)
        case .yuv422p:
            let cs = p.strides.1, cs2 = p.strides.2
            let u = base + p.offsets.1 + c.y * cs + c.x / 2, v = base + p.offsets.2 + c.y * cs2 + c.x / 2
            rc = I422ToI420(y0, Int32(s0), u, Int32(cs), v, Int32(cs2), dy, dsy, du, dsu, dv, dsv, w, h)
        case .bgr32, .abgr32, .xbgr32: // B G R A in memory = libyuv ARGB
            rc = ARGBToI420(y0, Int32(s0), dy, dsy, du, dsu, dv, dsv, w, h)
        case .rgb32, .argb32, .xrgb32: // A R G B in memory = libyuv BGRA
            rc = BGRAToI420(y0, Int32(s0), dy, dsy, du, dsu, dv, dsv, w, h)
        case .rgba32, .rgbx32: // R G B A in memory = libyuv ABGR
            rc = ABGRToI420(y0, Int32(s0), dy, dsy, du, dsu, dv, dsv, w, h)
        case .bgra32, .bgrx32: // A B G R in memory = libyuv RGBA
            rc = RGBAToI420(y0, Int32(s0), dy, dsy, du, dsu, dv, dsv, w, h)
        case .rgb24, .bgr24, .rgb565:
            // libyuv's RAW/RGB24/RGB565ToI420 malloc a row buffer on every call; going through a two-row
            // ARGB scratch we own keeps the single pass and allocates nothing per frame.
            rc = viaARGBRows(src.pixelFormat, y0, s0, c.width, c.height, d)
        case .grey:
            rc = I400ToI420(y0, Int32(s0), dy, dsy, du, dsu, dv, dsv, w, h)
        case .mjpeg, .jpeg:
            try decodeJPEG(src, crop: c, into: d)
        default:
            throw ProcessingError(.unsupportedFormat, "no conversion from \(src.pixelFormat) to I420")
        }
        if rc != 0 { throw ProcessingError(.invalidArgument, "libyuv refused \(src.pixelFormat) \(src.width)x\(src.height) (code \(rc))") }
    }

    private func rotateDirect(_ src: VideoFrameBuffer, crop c: CropRect, rotation: VideoRotation, into d: I420Buffer) throws(ProcessingError) {
        let base = src.baseAddress.assumingMemoryBound(to: UInt8.self)
        let p = src.planes, s0 = src.stride
        let y0 = base + p.offsets.0 + c.y * s0 + c.x
        let mode = RotationMode(rawValue: UInt32(rotation.rawValue))
        let layout = src.pixelFormat.singleBufferEquivalent
        let rc: Int32
        if layout == .nv12 {
            let uv = base + p.offsets.1 + (c.y / 2) * p.strides.1 + c.x
            rc = NV12ToI420Rotate(
                y0, Int32(s0), uv, Int32(p.strides.1), d.mutableDataY, Int32(d.strideY), d.mutableDataU, Int32(d.strideU),
                d.mutableDataV, Int32(d.strideV), Int32(c.width), Int32(c.height), mode)
        } else {
            let cs = p.strides.1, cs2 = p.strides.2 // equal but for wrapped or separate planes
            let u = base + p.offsets.1 + (c.y / 2) * cs + c.x / 2, v = base + p.offsets.2 + (c.y / 2) * cs2 + c.x / 2
            let (su, sv) = layout == .i420 ? (u, v) : (v, u)
            let (ssu, ssv) = layout == .i420 ? (cs, cs2) : (cs2, cs)
            rc = I420Rotate(
                y0, Int32(s0), su, Int32(ssu), sv, Int32(ssv), d.mutableDataY, Int32(d.strideY), d.mutableDataU, Int32(d.strideU),
                d.mutableDataV, Int32(d.strideV), Int32(c.width), Int32(c.height), mode)
        }
        if rc != 0 { throw ProcessingError(.invalidArgument, "libyuv could not rotate \(src.pixelFormat) \(c.width)x\(c.height) by \(rotation)") }
    }

    private var argbRows: UnsafeMutablePointer<UInt8>?
    private var argbRowsWidth = 0

    private func viaARGBRows(_ pf: PixelFormat, _ src: UnsafePointer<UInt8>, _ stride: Int, _ w: Int, _ h: Int, _ d: I420Buffer) -> Int32 {
        if argbRowsWidth < w {
            argbRows?.deallocate()
            argbRows = .allocate(capacity: w * 4 * 2)
            argbRowsWidth = w
        }
        let scratch = argbRows!
        let argbStride = Int32(w * 4)
        var row = 0
        while row < h {
            let n = min(2, h - row)
            let s = src + row * stride
            switch pf {
            case .rgb24: _ = RAWToARGB(s, Int32(stride), scratch, argbStride, Int32(w), Int32(n))
            case .bgr24: _ = RGB24ToARGB(s, Int32(stride), scratch, argbStride, Int32(w), Int32(n))
            default: _ = RGB565ToARGB(s, Int32(stride), scratch, argbStride, Int32(w), Int32(n))
            }
            let rc = ARGBToI420(
                scratch, argbStride, d.mutableDataY + row * d.strideY, Int32(d.strideY),
                d.mutableDataU + (row / 2) * d.strideU, Int32(d.strideU), d.mutableDataV + (row / 2) * d.strideV, Int32(d.strideV),
                Int32(w), Int32(n))
            if rc != 0 { return rc }
            row += 2
        }
        return 0
    }

    deinit { argbRows?.deallocate() }

    // MARK: - JPEG

    /// MJPEG to a size at most half the camera's a side (adaptation, a smaller tier): the JPEG is decoded at
    /// 1/2, 1/4 or 1/8 scale by a reduced inverse DCT (the largest reduction that still gives at least the asked
    /// size), and only what is left is scaled, instead of decoding every pixel and scaling it down. Crop,
    /// rotation and mirror apply after. Nil when it does not apply (not a JPEG, no scale, less than half).
    private func decodeJPEGReduced(_ src: VideoFrameBuffer, crop: CropRect, options: Options) throws(ProcessingError) -> I420Buffer? {
        guard src.pixelFormat == .mjpeg || src.pixelFormat == .jpeg, let target = options.scale, target.width > 0, target.height > 0,
            target.width <= 16384, target.height <= 16384
        else { return nil }
        // The asked size before rotation, against the crop it comes from.
        let (tw, th) = options.rotation.swapsDimensions ? (target.height, target.width) : (target.width, target.height)
        var denominator = 8
        // The largest reduction that keeps at least the asked size and puts the crop's origin on an even sample of
        // the reduced picture (else the crop would move by a reduced row or column).
        while denominator > 1
            && (crop.width / denominator < tw || crop.height / denominator < th || crop.x % (2 * denominator) != 0
                || crop.y % (2 * denominator) != 0)
        {
            denominator /= 2
        }
        guard denominator > 1 else { return nil }
        let decoded = pools.acquire(width: (src.width + denominator - 1) / denominator, height: (src.height + denominator - 1) / denominator)
        let data = src.baseAddress.assumingMemoryBound(to: UInt8.self)
        guard
            try jpegDecoder.decode(
                data, count: src.bytesUsed, format: src.pixelFormat, size: FrameSize(width: src.width, height: src.height),
                scaleDenominator: denominator, into: decoded)
        else { return nil } // a layout the decoder does not map: the full-size path (libyuv) takes it
        // The crop in the reduced picture (even origin, inside it), then one scale to the asked size.
        let cx = crop.x / denominator, cy = crop.y / denominator
        let cw = max(2, min(decoded.width - cx, crop.width / denominator)), ch = max(2, min(decoded.height - cy, crop.height / denominator))
        var current = decoded
        // The reduced picture is used as it is only when it is exactly the asked size (rounding up may add a row or
        // a column beyond the crop: 250x142 at 1/8 decodes to 32x18 for an asked 31x17).
        if decoded.width != tw || decoded.height != th || cx != 0 || cy != 0 {
            let s = output(width: tw, height: th, last: options.rotation == .rotation0 && !options.mirror)
            _ = I420Scale(
                decoded.dataY + cy * decoded.strideY + cx, Int32(decoded.strideY),
                decoded.dataU + (cy / 2) * decoded.strideU + cx / 2, Int32(decoded.strideU),
                decoded.dataV + (cy / 2) * decoded.strideV + cx / 2, Int32(decoded.strideV), Int32(cw), Int32(ch),
                s.mutableDataY, Int32(s.strideY), s.mutableDataU, Int32(s.strideU), s.mutableDataV, Int32(s.strideV),
                Int32(tw), Int32(th), kFilterBox)
            current = s
        }
        current = rotated(current, options.rotation, last: !options.mirror)
        return options.mirror ? mirrored(current, last: true) : current
    }

    /// The picture turned by `rotation` into a pooled buffer (itself for `.rotation0`).
    private func rotated(_ b: I420Buffer, _ rotation: VideoRotation, last: Bool) -> I420Buffer {
        guard rotation != .rotation0 else { return b }
        let (w, h) = rotation.swapsDimensions ? (b.height, b.width) : (b.width, b.height)
        let r = output(width: w, height: h, last: last)
        _ = I420Rotate(
            b.dataY, Int32(b.strideY), b.dataU, Int32(b.strideU), b.dataV, Int32(b.strideV),
            r.mutableDataY, Int32(r.strideY), r.mutableDataU, Int32(r.strideU), r.mutableDataV, Int32(r.strideV),
            Int32(b.width), Int32(b.height), RotationMode(rawValue: UInt32(rotation.rawValue)))
        return r
    }

    /// The picture mirrored left to right into a pooled buffer.
    private func mirrored(_ b: I420Buffer, last: Bool) -> I420Buffer {
        let m = output(width: b.width, height: b.height, last: last)
        _ = I420Mirror(
            b.dataY, Int32(b.strideY), b.dataU, Int32(b.strideU), b.dataV, Int32(b.strideV),
            m.mutableDataY, Int32(m.strideY), m.mutableDataU, Int32(m.strideU), m.mutableDataV, Int32(m.strideV), Int32(m.width), Int32(m.height))
        return m
    }

    private var jpegScratch: I420BufferPool?
    private lazy var jpegDecoder = MJPEGDecoder()

    /// Decodes with the persistent decoder (size checked in the same decode); JPEG layouts it does not map
    /// to I420 go through libyuv's decoder, as before.
    private func decodeJPEG(_ src: VideoFrameBuffer, crop c: CropRect, into d: I420Buffer) throws(ProcessingError) {
        let data = src.baseAddress.assumingMemoryBound(to: UInt8.self)
        let full = c == CropRect(x: 0, y: 0, width: src.width, height: src.height)
        let target: I420Buffer
        if full {
            target = d
        } else {
            if jpegScratch?.width != src.width || jpegScratch?.height != src.height {
                jpegScratch = I420BufferPool(width: src.width, height: src.height, maxBuffers: 1)
            }
            target = jpegScratch!.acquire()
        }
        if try !jpegDecoder.decode(
            data, count: src.bytesUsed, format: src.pixelFormat, size: FrameSize(width: src.width, height: src.height), into: target)
        {
            let w = Int32(src.width), h = Int32(src.height)
            let rc = MJPGToI420(
                data, src.bytesUsed, target.mutableDataY, Int32(target.strideY), target.mutableDataU, Int32(target.strideU),
                target.mutableDataV, Int32(target.strideV), w, h, w, h)
            guard rc == 0 else {
                throw ProcessingError(
                    .decodeFailed,
                    "\(src.pixelFormat) frame of \(src.bytesUsed) bytes has a JPEG layout that does not decode to I420 (libyuv code \(rc))")
            }
        }
        if !full {
            _ = I420Copy(
                target.mutableDataY + c.y * target.strideY + c.x, Int32(target.strideY),
                target.mutableDataU + (c.y / 2) * target.strideU + c.x / 2, Int32(target.strideU),
                target.mutableDataV + (c.y / 2) * target.strideV + c.x / 2, Int32(target.strideV),
                d.mutableDataY, Int32(d.strideY), d.mutableDataU, Int32(d.strideU), d.mutableDataV, Int32(d.strideV), Int32(c.width), Int32(c.height))
        }
    }
}
