public import VideoCapture
import CLibYUV
import CTurboJPEG

/// Writes an I420 picture out in another pixel format: what fixture cameras use to produce frames in the
/// format a device negotiated, and what encoders (NV12) and snapshots (RGB) need. JPEG via libjpeg-turbo.
///
/// Y'CbCr outputs keep the samples as they are. RGB outputs are converted with the picture's matrix and range
/// (`colorSpace`: BT.601, BT.709 or BT.2020, limited or full range; limited-range BT.601 by default), so black and
/// white come out as 0 and 255 either way. MJPEG/JPEG outputs also keep the samples: JPEG (JFIF) is full-range
/// BT.601 by definition, so give them a full-range picture (`SnapshotWriter` converts one that is not).
public final class FormatWriter {
    private var jpegHandle: tjhandle?
    /// JPEG quality, 1–100, for MJPEG/JPEG output (libjpeg-turbo's scale; 85 by default).
    public var jpegQuality: Int32 = 85

    /// A writer; the JPEG compressor is created on the first JPEG written. Not thread-safe: one per thread.
    public init() {}
    deinit { if let jpegHandle { tjDestroy(jpegHandle) } }

    /// The capacity a frame of this format and size needs (for MJPEG: the worst-case JPEG size).
    public static func capacity(for format: PixelFormat, width: Int, height: Int) -> Int {
        if format.isCompressed { return Int(tjBufSize(Int32(width), Int32(height), Int32(TJSAMP_420.rawValue))) }
        return format.frameSize(width: width, height: height, stride: format.minimumStride(width: width)) ?? 0
    }

    /// Writes `src` as `format` into `storage` (tightly packed rows); returns the bytes used. `colorSpace` describes
    /// `src`: its matrix and range choose the Y'CbCr → RGB conversion for RGB formats (other formats ignore it).
    public func write(
        _ src: I420Buffer, as format: PixelFormat, into storage: FrameStorage, colorSpace: VideoColorSpace = .bt601
    ) throws(ProcessingError) -> VideoFrameBuffer {
        let w = src.width, h = src.height
        let need = Self.capacity(for: format, width: w, height: h)
        guard need > 0 else { throw ProcessingError(.unsupportedFormat, "cannot write I420 as \(format)") }
        guard storage.capacity >= need else {
            throw ProcessingError(.shortBuffer, "\(format) \(w)x\(h) needs \(need) bytes, storage has \(storage.capacity)")
        }
        let stride = format.minimumStride(width: w) ?? 0
        let out = storage.mutableBaseAddress.assumingMemoryBound(to: UInt8.self)
        let sy = src.dataY, su = src.dataU, sv = src.dataV
        let ssy = Int32(src.strideY), ssu = Int32(src.strideU), ssv = Int32(src.strideV)
        let W = Int32(w), H = Int32(h), S = Int32(stride)
        let ch = (h + 1) / 2, cs = (stride + 1) / 2
        var used = need
        // A separate-plane format (NM12, YM12, …) is written in its single-buffer twin's layout, planes one after the
        // other (its `planes` follow the twin's when nothing places them).
        let layout = format.singleBufferEquivalent
        switch layout {
        case .i420, .yv12:
            let u = out + stride * h, v = u + cs * ch
            let (du, dv) = layout == .i420 ? (u, v) : (v, u)
            _ = I420Copy(sy, ssy, su, ssu, sv, ssv, out, S, du, Int32(cs), dv, Int32(cs), W, H)
        case .nv12: _ = I420ToNV12(sy, ssy, su, ssu, sv, ssv, out, S, out + stride * h, Int32(cs * 2), W, H)
        case .nv21: _ = I420ToNV21(sy, ssy, su, ssu, sv, ssv, out, S, out + stride * h, Int32(cs * 2), W, H)
        case .yuyv: _ = I420ToYUY2(sy, ssy, su, ssu, sv, ssv, out, S, W, H)
        case .yvyu: _ = I420ToYUY2(sy, ssy, sv, ssv, su, ssu, out, S, W, H)
        case .uyvy: _ = I420ToUYVY(sy, ssy, su, ssu, sv, ssv, out, S, W, H)
        case .vyuy: _ = I420ToUYVY(sy, ssy, sv, ssv, su, ssu, out, S, W, H)
        case .yuv422p:
            let u = out + stride * h, v = u + cs * h
            _ = I420ToI422(sy, ssy, su, ssu, sv, ssv, out, S, u, Int32(cs), v, Int32(cs), W, H)
        case .nv16, .nv61, .nv24, .nv42:
            CopyPlane(sy, ssy, out, S, W, H)
            let full = layout == .nv24 || layout == .nv42
            let (a, b) = (layout == .nv16 || layout == .nv24) ? (su, sv) : (sv, su)
            let uvStride = full ? stride * 2 : cs * 2
            let cw = full ? w : (w + 1) / 2
            for r in 0..<h {
                let row = out + stride * h + r * uvStride
                let ar = a + (r / 2) * Int(ssu), br = b + (r / 2) * Int(ssv)
                for x in 0..<cw {
                    let sx = full ? x / 2 : x
                    row[2 * x] = ar[sx]
                    row[2 * x + 1] = br[sx]
                }
            }
        // RGB: libyuv's constants for the picture's matrix and range; with U and V exchanged (and the mirrored
        // constants) the same row functions write R first, as libyuv's I420ToABGR and I420ToRAW do.
        case .bgr32, .abgr32, .xbgr32: _ = I420ToARGBMatrix(sy, ssy, su, ssu, sv, ssv, out, S, RGBConstants.yuv(colorSpace), W, H)
        case .rgba32, .rgbx32: _ = I420ToARGBMatrix(sy, ssy, sv, ssv, su, ssu, out, S, RGBConstants.yvu(colorSpace), W, H)
        case .rgb32, .argb32, .xrgb32:
            _ = I420ToARGBMatrix(sy, ssy, su, ssu, sv, ssv, out, S, RGBConstants.yuv(colorSpace), W, H)
            _ = ARGBToBGRA(out, S, out, S, W, H) // B G R A → A R G B in memory
        case .bgra32, .bgrx32:
            _ = I420ToARGBMatrix(sy, ssy, su, ssu, sv, ssv, out, S, RGBConstants.yuv(colorSpace), W, H)
            _ = ARGBToRGBA(out, S, out, S, W, H) // B G R A → A B G R in memory
        case .rgb24: _ = I420ToRGB24Matrix(sy, ssy, sv, ssv, su, ssu, out, S, RGBConstants.yvu(colorSpace), W, H)
        case .bgr24: _ = I420ToRGB24Matrix(sy, ssy, su, ssu, sv, ssv, out, S, RGBConstants.yuv(colorSpace), W, H)
        case .rgb565: _ = I420ToRGB565Matrix(sy, ssy, su, ssu, sv, ssv, out, S, RGBConstants.yuv(colorSpace), W, H)
        case .grey: CopyPlane(sy, ssy, out, S, W, H)
        case .mjpeg, .jpeg:
            used = try encodeJPEG(src, into: out, capacity: storage.capacity)
        default:
            throw ProcessingError(.unsupportedFormat, "cannot write I420 as \(format)")
        }
        return VideoFrameBuffer(pixelFormat: format, width: w, height: h, stride: stride, bytesUsed: used, storage: storage)
    }

    /// Encodes a 4:2:0 baseline JPEG (what webcams' MJPEG looks like) into preallocated memory. The samples are
    /// written as they are, and a JPEG decoder reads them as full-range BT.601 (JFIF): `src` should be full range.
    public func encodeJPEG(_ src: I420Buffer, into out: UnsafeMutablePointer<UInt8>, capacity: Int) throws(ProcessingError) -> Int {
        if jpegHandle == nil { jpegHandle = tjInitCompress() }
        guard let handle = jpegHandle else { throw ProcessingError(.ioFailed, "libjpeg-turbo: cannot create a compressor") }
        var planes: [UnsafePointer<UInt8>?] = [UnsafePointer(src.dataY), UnsafePointer(src.dataU), UnsafePointer(src.dataV)]
        var strides: [Int32] = [Int32(src.strideY), Int32(src.strideU), Int32(src.strideV)]
        var dst: UnsafeMutablePointer<UInt8>? = out
        var size = UInt(capacity)
        let rc = tjCompressFromYUVPlanes(
            handle, &planes, Int32(src.width), &strides, Int32(src.height), Int32(TJSAMP_420.rawValue),
            &dst, &size, jpegQuality, Int32(TJFLAG_NOREALLOC))
        guard rc == 0 else {
            throw ProcessingError(.ioFailed, "libjpeg-turbo: \(String(cString: tjGetErrorStr2(handle)))")
        }
        return Int(size)
    }

    /// Encodes packed R, G, B rows (`pitch` bytes apart) as a 4:2:0 baseline JPEG: libjpeg-turbo converts them to
    /// full-range BT.601 Y'CbCr, as JFIF says.
    func encodeJPEG(
        rgb: UnsafePointer<UInt8>, width: Int, height: Int, pitch: Int, into out: UnsafeMutablePointer<UInt8>, capacity: Int
    ) throws(ProcessingError) -> Int {
        if jpegHandle == nil { jpegHandle = tjInitCompress() }
        guard let handle = jpegHandle else { throw ProcessingError(.ioFailed, "libjpeg-turbo: cannot create a compressor") }
        var dst: UnsafeMutablePointer<UInt8>? = out
        var size = UInt(capacity)
        let rc = tjCompress2(
            handle, rgb, Int32(width), Int32(pitch), Int32(height), Int32(TJPF_RGB.rawValue), &dst, &size, Int32(TJSAMP_420.rawValue),
            jpegQuality, Int32(TJFLAG_NOREALLOC))
        guard rc == 0 else {
            throw ProcessingError(.ioFailed, "libjpeg-turbo: \(String(cString: tjGetErrorStr2(handle)))")
        }
        return Int(size)
    }
}

/// libyuv's Y'CbCr → RGB constants for a picture's colour description: its matrix (BT.709, BT.2020, else BT.601)
/// and its range (full: Y' 0...255; limited or unspecified: 16...235).
enum RGBConstants {
    /// The matrix libyuv has constants for: 0 BT.601 (also for unspecified, SMPTE 170M, BT.470BG), 1 BT.709, 2 BT.2020.
    static func matrix(_ c: VideoColorSpace) -> Int32 {
        switch c.matrix {
        case .bt709: return 1
        case .bt2020NonConstant, .bt2020Constant: return 2
        default: return 0
        }
    }
    /// For the U and V planes in their order: rows written B, G, R in memory (libyuv's ARGB, RGB24, RGB565).
    static func yuv(_ c: VideoColorSpace) -> UnsafePointer<YuvConstants> {
        svc_yuv_constants(matrix(c), c.range == .full ? 1 : 0, 0)
    }
    /// For the V and U planes exchanged: rows written R, G, B in memory (libyuv's ABGR, RAW).
    static func yvu(_ c: VideoColorSpace) -> UnsafePointer<YuvConstants> {
        svc_yuv_constants(matrix(c), c.range == .full ? 1 : 0, 1)
    }
}
