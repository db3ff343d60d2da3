package import VideoCapture
import CJPEGCodec
import CLibYUV

/// A libjpeg(-turbo) decompressor kept across frames (Sources/CJPEGCodec): its per-image memory comes
/// from an arena reset after every image, so MJPEG decoding allocates nothing once the first frame of a
/// size has been decoded. The JPEG's size comes from the same decode (no second header parse).
final class MJPEGDecoder {
    private let handle: OpaquePointer?

    init() { handle = svc_jpeg_decoder_create() }
    deinit { svc_jpeg_decoder_destroy(handle) }

    /// Times the arena grew (once per new size; steady state adds none).
    var arenaGrowths: Int { handle.map { Int(svc_jpeg_decoder_growths($0)) } ?? 0 }

    /// Keeps the reduced inverse DCT to SSE2 (it uses AVX2 where the CPU has it): the pictures are the same byte
    /// for byte, and the tests hold them to that.
    func useSSE2Only() { handle.map { svc_jpeg_decoder_set_simd($0, 1) } }

    /// Decodes `count` bytes of JPEG at `data` (a picture of `size`) into `dst`, which has that size divided by
    /// `scaleDenominator` (1, 2, 4 or 8; rounded up): a reduced inverse DCT decodes and downscales in one pass.
    /// Returns false when the JPEG's colour space or sampling is one this decoder does not map (the caller may
    /// fall back).
    func decode(
        _ data: UnsafePointer<UInt8>, count: Int, format: PixelFormat, size: FrameSize, scaleDenominator: Int = 1, into dst: I420Buffer
    ) throws(ProcessingError) -> Bool {
        guard let handle else { throw ProcessingError(.decodeFailed, "libjpeg: cannot create a decompressor (out of memory)") }
        var jw: Int32 = 0, jh: Int32 = 0
        let rc = svc_jpeg_decode_i420(
            handle, data, UInt(count), Int32(size.width), Int32(size.height), Int32(scaleDenominator), &jw, &jh,
            dst.mutableDataY, Int32(dst.strideY), dst.mutableDataU, Int32(dst.strideU), dst.mutableDataV, Int32(dst.strideV))
        switch Int(rc) {
        case Int(SVC_JPEG_OK): return true
        case Int(SVC_JPEG_UNSUPPORTED): return false
        case Int(SVC_JPEG_SIZE_MISMATCH):
            throw ProcessingError(.decodeFailed, "JPEG is \(jw)x\(jh), the stream says \(size.width)x\(size.height)")
        case Int(SVC_JPEG_NO_MEMORY):
            throw ProcessingError(.decodeFailed, "\(format) frame of \(count) bytes: out of memory for the decoder's scratch rows")
        default:
            let why = String(cString: svc_jpeg_decoder_message(handle))
            throw ProcessingError(.decodeFailed, "\(format) frame of \(count) bytes is not a decodable JPEG\(why.isEmpty ? "" : ": \(why)")")
        }
    }
}

/// Encodes strips of an I420 picture (up to 16 rows) as baseline 4:2:0 JPEGs with standard Huffman tables
/// and a restart marker every `restartMCUs` MCUs, into caller memory, with a libjpeg compressor kept across
/// calls (no allocation per strip in steady state). Fixture cameras splice the strips' restart intervals
/// into whole MJPEG frames and re-encode only the tiles whose pixels changed.
package final class JPEGStripEncoder {
    private let handle: OpaquePointer?
    package let quality: Int

    package init(quality: Int = 85) {
        self.quality = max(1, min(100, quality))
        handle = svc_jpeg_encoder_create(Int32(self.quality))
    }
    deinit { svc_jpeg_encoder_destroy(handle) }

    package var arenaGrowths: Int { handle.map { Int(svc_jpeg_encoder_growths($0)) } ?? 0 }

    /// A safe capacity for a strip of `width` x 16 (raw 4:2:0 size twice over plus headers).
    package static func stripCapacity(width: Int) -> Int { ((width + 15) & ~15) * 16 * 3 + 4096 }

    /// Encodes rows `row ..< row + rows` (rows ≤ 16), columns `x ..< x + width` of `src` (x even) into `out`;
    /// returns the JPEG's length.
    package func encodeStrip(
        _ src: I420Buffer, x: Int, row: Int, width: Int, rows: Int, restartMCUs: Int,
        into out: UnsafeMutablePointer<UInt8>, capacity: Int
    ) throws(ProcessingError) -> Int {
        guard let handle else { throw ProcessingError(.ioFailed, "libjpeg: cannot create a compressor (out of memory)") }
        guard rows >= 1, rows <= 16, width >= 1, x >= 0, x % 2 == 0, row % 2 == 0, x + width <= src.width, row + rows <= src.height,
            restartMCUs >= 1, restartMCUs <= 65535
        else {
            throw ProcessingError(.invalidArgument, "JPEG strip \(width)x\(rows) at (\(x), \(row)) does not fit a \(src.width)x\(src.height) picture")
        }
        let n = svc_jpeg_encode_strip(
            handle, src.dataY + row * src.strideY + x, Int32(src.strideY),
            src.dataU + (row / 2) * src.strideU + x / 2, Int32(src.strideU),
            src.dataV + (row / 2) * src.strideV + x / 2, Int32(src.strideV),
            Int32(width), Int32(rows), Int32(restartMCUs), out, UInt(capacity))
        guard n > 0 else {
            throw ProcessingError(
                .ioFailed, "libjpeg could not encode a \(width)x\(rows) strip: \(String(cString: svc_jpeg_encoder_message(handle)))")
        }
        return Int(n)
    }
}

/// Encodes whole I420 pictures as baseline 4:2:0 JPEGs (stills and MJPEG over HTTP), scaled on the way to the
/// size asked (libyuv's box filter) into a pooled picture, with one libjpeg compressor and one output buffer kept
/// across calls: only the returned bytes are allocated per picture.
package final class JPEGPictureEncoder {
    private let handle: OpaquePointer?
    package let quality: Int
    private var pools = PoolSet()
    private var scratch: [UInt8] = []

    /// An encoder at `quality` (clamped to 1...100).
    package init(quality: Int = 80) {
        self.quality = max(1, min(100, quality))
        handle = svc_jpeg_encoder_create(Int32(self.quality))
    }
    deinit { svc_jpeg_encoder_destroy(handle) }

    /// `picture` turned upright by `rotation` (a picture whose rotation is carried as metadata), scaled to `size`
    /// (each side 2...16384; the picture itself is copied when the size is its own, so that the compressor reads
    /// padded rows only) and encoded: the JPEG's bytes.
    package func encode(_ source: I420Buffer, size: FrameSize, rotation: VideoRotation = .rotation0) throws(ProcessingError) -> [UInt8] {
        guard let handle else { throw ProcessingError(.ioFailed, "libjpeg: cannot create a compressor (out of memory)") }
        guard (2...16384).contains(size.width), (2...16384).contains(size.height) else {
            throw ProcessingError(.invalidSize, "a JPEG of \(size.width)x\(size.height): each side must be 2...16384")
        }
        var picture = source
        if rotation != .rotation0 {
            let (w, h) = rotation.swapsDimensions ? (source.height, source.width) : (source.width, source.height)
            picture = pools.acquire(width: w, height: h)
            _ = I420Rotate(
                source.dataY, Int32(source.strideY), source.dataU, Int32(source.strideU), source.dataV, Int32(source.strideV),
                picture.mutableDataY, Int32(picture.strideY), picture.mutableDataU, Int32(picture.strideU), picture.mutableDataV,
                Int32(picture.strideV), Int32(source.width), Int32(source.height), RotationMode(rawValue: UInt32(rotation.rawValue)))
        }
        let s = pools.acquire(width: size.width, height: size.height)
        _ = I420Scale(
            picture.dataY, Int32(picture.strideY), picture.dataU, Int32(picture.strideU), picture.dataV, Int32(picture.strideV),
            Int32(picture.width), Int32(picture.height),
            s.mutableDataY, Int32(s.strideY), s.mutableDataU, Int32(s.strideU), s.mutableDataV, Int32(s.strideV),
            Int32(size.width), Int32(size.height), kFilterBox)
        let capacity = Int(svc_jpeg_picture_capacity(Int32(size.width), Int32(size.height)))
        if scratch.count < capacity { scratch = [UInt8](repeating: 0, count: capacity) }
        let n = scratch.withUnsafeMutableBufferPointer { out in
            svc_jpeg_encode_picture(
                handle, s.dataY, Int32(s.strideY), s.dataU, Int32(s.strideU), s.dataV, Int32(s.strideV), Int32(size.width), Int32(size.height),
                out.baseAddress, UInt(capacity))
        }
        guard n > 0 else {
            throw ProcessingError(
                .ioFailed, "libjpeg could not encode a \(size.width)x\(size.height) picture: \(String(cString: svc_jpeg_encoder_message(handle)))")
        }
        return Array(scratch[0..<Int(n)])
    }
}
