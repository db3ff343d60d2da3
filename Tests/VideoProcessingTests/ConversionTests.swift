import Foundation
import Testing
import VideoCapture
@testable import VideoProcessing

/// A pixel format and how ffmpeg reads the same bytes. Formats ffmpeg lacks (YV12, VYUY, NV61) are fed to
/// it as their sibling with the chroma order swapped in the bytes: the conversion itself stays ffmpeg's.
struct FormatCase: Sendable, CustomTestStringConvertible {
    let fourcc: String
    let ffmpeg: String
    let swap: Swap
    let minPSNR: Double
    enum Swap: Sendable { case none, planarUV, packedUV, semiplanarToPlanar(vFirst: Bool) }
    var testDescription: String { fourcc }
}

// Tolerances: YUV repacking is exact except 4:2:2/4:4:4 → 4:2:0 chroma filtering (ours point-samples or
// averages, ffmpeg's swscale filters); RGB → YUV differs in rounding and chroma downsampling filters.
let formatCases: [FormatCase] = [
    .init(fourcc: "YU12", ffmpeg: "yuv420p", swap: .none, minPSNR: 99),
    .init(fourcc: "YV12", ffmpeg: "yuv420p", swap: .planarUV, minPSNR: 99),
    .init(fourcc: "NV12", ffmpeg: "nv12", swap: .none, minPSNR: 99),
    .init(fourcc: "NV21", ffmpeg: "nv21", swap: .none, minPSNR: 99),
    .init(fourcc: "YUYV", ffmpeg: "yuyv422", swap: .none, minPSNR: 45),
    .init(fourcc: "UYVY", ffmpeg: "uyvy422", swap: .none, minPSNR: 45),
    .init(fourcc: "YVYU", ffmpeg: "yvyu422", swap: .none, minPSNR: 45),
    .init(fourcc: "VYUY", ffmpeg: "uyvy422", swap: .packedUV, minPSNR: 45),
    .init(fourcc: "422P", ffmpeg: "yuv422p", swap: .none, minPSNR: 45),
    .init(fourcc: "NV16", ffmpeg: "yuv422p", swap: .semiplanarToPlanar(vFirst: false), minPSNR: 45),
    .init(fourcc: "NV61", ffmpeg: "yuv422p", swap: .semiplanarToPlanar(vFirst: true), minPSNR: 45),
    .init(fourcc: "NV24", ffmpeg: "nv24", swap: .none, minPSNR: 38),
    .init(fourcc: "NV42", ffmpeg: "nv42", swap: .none, minPSNR: 38),
    .init(fourcc: "BGR4", ffmpeg: "bgr0", swap: .none, minPSNR: 33),
    .init(fourcc: "AR24", ffmpeg: "bgra", swap: .none, minPSNR: 33),
    .init(fourcc: "XR24", ffmpeg: "bgr0", swap: .none, minPSNR: 33),
    .init(fourcc: "RGB4", ffmpeg: "0rgb", swap: .none, minPSNR: 33),
    .init(fourcc: "BA24", ffmpeg: "argb", swap: .none, minPSNR: 33),
    .init(fourcc: "BX24", ffmpeg: "0rgb", swap: .none, minPSNR: 33),
    .init(fourcc: "AB24", ffmpeg: "rgba", swap: .none, minPSNR: 33),
    .init(fourcc: "XB24", ffmpeg: "rgb0", swap: .none, minPSNR: 33),
    .init(fourcc: "RA24", ffmpeg: "abgr", swap: .none, minPSNR: 33),
    .init(fourcc: "RX24", ffmpeg: "0bgr", swap: .none, minPSNR: 33),
    .init(fourcc: "RGB3", ffmpeg: "rgb24", swap: .none, minPSNR: 33),
    .init(fourcc: "BGR3", ffmpeg: "bgr24", swap: .none, minPSNR: 33),
    .init(fourcc: "RGBP", ffmpeg: "rgb565le", swap: .none, minPSNR: 30),
    .init(fourcc: "GREY", ffmpeg: "gray", swap: .none, minPSNR: 99),
]

/// Swaps chroma in a copy of the bytes so ffmpeg can read a format it lacks.
func swapped(_ bytes: [UInt8], _ swap: FormatCase.Swap, w: Int, h: Int) -> [UInt8] {
    var b = bytes
    switch swap {
    case .none: break
    case .planarUV:
        let y = w * h, c = ((w + 1) / 2) * ((h + 1) / 2)
        b.replaceSubrange(y..<(y + c), with: bytes[(y + c)..<(y + 2 * c)])
        b.replaceSubrange((y + c)..<(y + 2 * c), with: bytes[y..<(y + c)])
    case .packedUV: stride(from: 0, to: b.count - 3, by: 4).forEach { b.swapAt($0, $0 + 2) }
    case .semiplanarToPlanar(let vFirst):
        // 4:2:2 semi-planar (ffmpeg cannot read nv16) → planar yuv422p: a pure repacking of the bytes.
        let cw = (w + 1) / 2
        var u = [UInt8](), v = [UInt8]()
        for r in 0..<h {
            for x in 0..<cw {
                let a = bytes[w * h + r * 2 * cw + 2 * x], c = bytes[w * h + r * 2 * cw + 2 * x + 1]
                u.append(vFirst ? c : a)
                v.append(vFirst ? a : c)
            }
        }
        b = Array(bytes[0..<(w * h)]) + u + v
    }
    return b
}

@Test(
    "every format converts to I420 like ffmpeg does", arguments: formatCases, [FrameSize(width: 320, height: 180), FrameSize(width: 162, height: 90)])
func conversionMatchesFFmpeg(_ c: FormatCase, _ size: FrameSize) throws {
    let pf = PixelFormat(fourcc: c.fourcc)!
    let (w, h) = (size.width, size.height)
    let source = pattern(w, h)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: pf, width: w, height: h))
    let frame = try FormatWriter().write(source, as: pf, into: storage)
    let ours = try FrameConverter().convert(frame)
    let raw = scratchDir + "/\(c.fourcc)-\(w)x\(h).raw"
    writeFile(raw, UnsafeRawBufferPointer(rebasing: frame.bytes[...]))
    let packed = swapped(readBytes(raw), c.swap, w: w, h: h)
    _ = FileManager.default.createFile(atPath: raw, contents: Data(packed))
    if pf == .grey {
        // V4L2 GREY is the luma plane as is (limited range, as vivid emits it); ffmpeg's gray → yuv420p
        // would rescale it as full range, so compare with ffmpeg's luma unchanged and expect neutral chroma.
        let luma = try ffmpegToYUV420(["-f", "rawvideo", "-pix_fmt", "gray", "-s", "\(w)x\(h)"], raw, outFmt: "gray")
        #expect(luma.count == w * h)
        var same = true
        for r in 0..<h where luma.count == w * h { for x in 0..<w where ours.dataY[r * ours.strideY + x] != luma[r * w + x] { same = false } }
        #expect(same, "GREY luma differs from ffmpeg's")
        #expect(
            (0..<ours.chromaHeight).allSatisfy { r in
                (0..<ours.chromaWidth).allSatisfy { ours.dataU[r * ours.strideU + $0] == 128 && ours.dataV[r * ours.strideV + $0] == 128 }
            })
        return
    }
    let ref = try ffmpegToYUV420(["-f", "rawvideo", "-pix_fmt", c.ffmpeg, "-s", "\(w)x\(h)"], raw)
    let reference = i420(fromPacked: ref, width: w, height: h)
    let q = psnr(ours, reference)
    #expect(q >= c.minPSNR, "\(c.fourcc) \(w)x\(h): PSNR \(q) dB against ffmpeg")
    // And the round trip through the format keeps the picture (the writer is not the reference).
    #expect(psnr(ours, source) >= min(c.minPSNR, 30), "\(c.fourcc) round trip PSNR \(psnr(ours, source))")
}

@Test func oddSizesAndWideStridesConvert() throws {
    // YUYV 161x91 in rows padded to 400 bytes: the padding must not leak into the picture.
    let (w, h, stride) = (161, 91, 400)
    let src = pattern(w, h)
    let packed = FrameStorage(capacity: FormatWriter.capacity(for: .yuyv, width: w, height: h))
    let tight = try FormatWriter().write(src, as: .yuyv, into: packed)
    let padded = FrameStorage(capacity: stride * h)
    for r in 0..<h {
        (padded.mutableBaseAddress + r * stride).copyMemory(from: tight.baseAddress + r * tight.stride, byteCount: tight.stride)
        (padded.mutableBaseAddress + r * stride + tight.stride).initializeMemory(as: UInt8.self, repeating: 0xEE, count: stride - tight.stride)
    }
    let paddedFrame = VideoFrameBuffer(pixelFormat: .yuyv, width: w, height: h, stride: stride, bytesUsed: stride * h, storage: padded)
    let a = try FrameConverter().convert(paddedFrame), b = try FrameConverter().convert(tight)
    #expect(psnr(a, b) >= 99)
    #expect(a.width == 161 && a.height == 91 && a.chromaWidth == 81)
}

@Test func mjpegDecodesLikeFFmpeg() throws {
    let (w, h) = (640, 480)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: w, height: h))
    let jpeg = try FormatWriter().write(pattern(w, h), as: .mjpeg, into: storage)
    let path = scratchDir + "/frame.jpg"
    writeFile(path, UnsafeRawBufferPointer(rebasing: jpeg.bytes[...]))
    let ours = try FrameConverter().convert(jpeg)
    // JPEG YCbCr is full range: compare without a range conversion.
    let reference = i420(fromPacked: try ffmpegToYUV420([], path, outFmt: "yuvj420p"), width: w, height: h)
    #expect(psnr(ours, reference) >= 45)
}

/// MJPEG to a half, a quarter or an eighth of its size a side (or in between, or cropped to another aspect, or
/// turned): the reduced inverse DCT decodes and downscales in one pass, and the picture matches both ffmpeg's full
/// decode scaled with an area filter and our own full decode scaled afterwards.
@Test(arguments: [(640, 360, false), (320, 180, false), (160, 90, false), (480, 270, false), (360, 640, true)])
func mjpegDecodesReducedForSmallerOutputs(_ tw: Int, _ th: Int, _ turned: Bool) throws {
    let (w, h) = (1280, 720)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: w, height: h))
    let jpeg = try FormatWriter().write(pattern(w, h), as: .mjpeg, into: storage)
    let path = scratchDir + "/reduced-\(tw)x\(th).jpg"
    writeFile(path, UnsafeRawBufferPointer(rebasing: jpeg.bytes[...]))
    let options = FrameConverter.Options(rotation: turned ? .rotation90 : .rotation0, scale: FrameSize(width: tw, height: th))
    let ours = try FrameConverter().convert(jpeg, options: options)
    #expect(ours.width == tw && ours.height == th)
    let full = try FrameConverter().convert(jpeg)
    let viaFull = try FrameConverter().convert(full.buffer, options: options)
    #expect(psnr(ours, viaFull) >= 38, "\(tw)x\(th): \(psnr(ours, viaFull)) dB against the full decode scaled")
    let filter = (turned ? "transpose=clock," : "") + "scale=\(tw):\(th):flags=area"
    let reference = i420(fromPacked: try ffmpegToYUV420([], path, outFmt: "yuvj420p", filter: filter), width: tw, height: th)
    #expect(psnr(ours, reference) >= 40, "\(tw)x\(th): \(psnr(ours, reference)) dB against ffmpeg")
    // A 4:3 JPEG cropped to 16:9 on the way (centre band), to a quarter of the band's size a side.
    let (w2, h2) = (640, 480)
    let storage2 = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: w2, height: h2))
    let jpeg2 = try FormatWriter().write(pattern(w2, h2), as: .mjpeg, into: storage2)
    let cropped = FrameConverter.Options(crop: CropRect(x: 0, y: 60, width: 640, height: 360), scale: FrameSize(width: 160, height: 90))
    let a = try FrameConverter().convert(jpeg2, options: cropped)
    let b = try FrameConverter().convert(try FrameConverter().convert(jpeg2).buffer, options: cropped)
    #expect(a.width == 160 && a.height == 90 && psnr(a, b) >= 30, "cropped: \(psnr(a, b)) dB")
    // A size that does not divide: 250x142 at 1/8 decodes to 32x18, the asked 31x17 is cut from it (FuzzMJPEG).
    let storage3 = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: 250, height: 142))
    let jpeg3 = try FormatWriter().write(pattern(250, 142), as: .mjpeg, into: storage3)
    let small = try FrameConverter().convert(jpeg3, options: .init(scale: FrameSize(width: 31, height: 17)))
    #expect(small.width == 31 && small.height == 17, "\(small.width)x\(small.height)")
}

/// The reduced inverse DCT's AVX2 and SSE2 kernels give the same picture byte for byte, at 1/2 and 1/4, for luma
/// and for chroma (flat and textured blocks), and that picture is each block's average of the full decode to
/// within what the dropped high frequencies carry.
@Test func reducedIDCTKernelsAgree() throws {
    let (w, h) = (1280, 720)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: w, height: h))
    let jpeg = try FormatWriter().write(pattern(w, h), as: .mjpeg, into: storage)
    for denominator in [2, 4] {
        let size = FrameSize(width: w / denominator, height: h / denominator)
        let wide = I420Buffer(width: size.width, height: size.height), narrow = I420Buffer(width: size.width, height: size.height)
        let a = MJPEGDecoder(), b = MJPEGDecoder()
        b.useSSE2Only()
        let data = jpeg.baseAddress.assumingMemoryBound(to: UInt8.self), full = FrameSize(width: w, height: h)
        let decodedA = try a.decode(data, count: jpeg.bytesUsed, format: .mjpeg, size: full, scaleDenominator: denominator, into: wide)
        let decodedB = try b.decode(data, count: jpeg.bytesUsed, format: .mjpeg, size: full, scaleDenominator: denominator, into: narrow)
        #expect(decodedA && decodedB)
        #expect(psnr(wide, narrow) >= 99, "1/\(denominator): AVX2 and SSE2 differ (\(psnr(wide, narrow)) dB)")
        let averaged = try FrameConverter().convert(try FrameConverter().convert(jpeg).buffer, options: .init(scale: size))
        #expect(psnr(wide, averaged) >= 40, "1/\(denominator): \(psnr(wide, averaged)) dB against the full decode averaged")
    }
}

@Test func mjpegWithoutHuffmanTablesDecodes() throws {
    // Webcams' MJPEG often omits DHT (the standard tables are implied). Strip it and decode.
    let (w, h) = (320, 240)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: w, height: h))
    let jpeg = try FormatWriter().write(pattern(w, h), as: .mjpeg, into: storage)
    var bytes = Array(jpeg.bytes)
    var i = 2, removed = 0
    while i + 4 < bytes.count, bytes[i] == 0xFF, bytes[i + 1] != 0xDA {
        let len = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
        if bytes[i + 1] == 0xC4 {
            bytes.removeSubrange(i..<(i + 2 + len))
            removed += 1
        } else {
            i += 2 + len
        }
    }
    #expect(removed > 0, "the encoder wrote DHT segments to strip")
    let s2 = FrameStorage(capacity: bytes.count)
    s2.mutableBaseAddress.copyMemory(from: bytes, byteCount: bytes.count)
    let stripped = VideoFrameBuffer(pixelFormat: .mjpeg, width: w, height: h, stride: 0, bytesUsed: bytes.count, storage: s2)
    let a = try FrameConverter().convert(stripped), b = try FrameConverter().convert(jpeg)
    #expect(psnr(a, b) >= 99)
}

// MARK: - Crop, rotate, mirror, scale against ffmpeg's filters

struct GeometryCase: Sendable, CustomTestStringConvertible {
    let name: String, options: FrameConverter.Options, filter: String, out: FrameSize, minPSNR: Double
    var testDescription: String { name }
}

let geometryCases: [GeometryCase] = [
    .init(name: "rotate 90", options: .init(rotation: .rotation90), filter: "transpose=clock", out: FrameSize(width: 180, height: 320), minPSNR: 99),
    .init(name: "rotate 180", options: .init(rotation: .rotation180), filter: "hflip,vflip", out: FrameSize(width: 320, height: 180), minPSNR: 99),
    .init(
        name: "rotate 270", options: .init(rotation: .rotation270), filter: "transpose=cclock", out: FrameSize(width: 180, height: 320), minPSNR: 99),
    .init(name: "mirror", options: .init(mirror: true), filter: "hflip", out: FrameSize(width: 320, height: 180), minPSNR: 99),
    .init(
        name: "crop", options: .init(crop: CropRect(x: 40, y: 20, width: 200, height: 120)), filter: "crop=200:120:40:20",
        out: FrameSize(width: 200, height: 120), minPSNR: 99),
    .init(
        name: "crop + rotate 90", options: .init(crop: CropRect(x: 40, y: 20, width: 200, height: 120), rotation: .rotation90),
        filter: "crop=200:120:40:20,transpose=clock", out: FrameSize(width: 120, height: 200), minPSNR: 99),
    .init(
        name: "scale down", options: .init(scale: FrameSize(width: 160, height: 90)), filter: "scale=160:90:flags=area",
        out: FrameSize(width: 160, height: 90), minPSNR: 30),
    .init(
        name: "scale up", options: .init(scale: FrameSize(width: 640, height: 360)), filter: "scale=640:360:flags=bilinear",
        out: FrameSize(width: 640, height: 360), minPSNR: 30),
]

@Test("crop/rotate/mirror/scale match ffmpeg's filters", arguments: geometryCases, ["YU12", "NV12", "YUYV"])
func geometryMatchesFFmpeg(_ g: GeometryCase, _ code: String) throws {
    let pf = PixelFormat(fourcc: code)!
    let src = pattern(320, 180)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: pf, width: 320, height: 180))
    let frame = try FormatWriter().write(src, as: pf, into: storage)
    let ours = try FrameConverter().convert(frame, options: g.options)
    #expect(ours.width == g.out.width && ours.height == g.out.height)
    // The reference: ffmpeg applies the filter to the same picture as I420.
    let i420Storage = FrameStorage(capacity: FormatWriter.capacity(for: .i420, width: 320, height: 180))
    let asI420 = try FrameConverter().convert(frame)
    let packed = try FormatWriter().write(asI420, as: .i420, into: i420Storage)
    let raw = scratchDir + "/geom-\(code)-\(g.name.replacingOccurrences(of: " ", with: "_")).yuv"
    writeFile(raw, UnsafeRawBufferPointer(rebasing: packed.bytes[...]))
    let ref = i420(
        fromPacked: try ffmpegToYUV420(["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "320x180"], raw, filter: g.filter), width: g.out.width,
        height: g.out.height)
    let q = psnr(ours, ref)
    #expect(q >= g.minPSNR, "\(g.name) from \(code): PSNR \(q)")
}

@Test func frameRotationCanBeAppliedOrCarried() throws {
    let src = pattern(64, 32)
    let frame = VideoFrame(buffer: src.buffer, rotation: .rotation90, timestampNs: 5, sequence: 1)
    let conv = FrameConverter()
    let carried = try conv.convert(frame)
    #expect(carried.rotation == .rotation90 && carried.width == 64)
    let applied = try conv.convert(frame, applyRotation: true)
    #expect(applied.rotation == .rotation0 && applied.width == 32 && applied.height == 64 && applied.timestampNs == 5)
}

// MARK: - Bad input

@Test func shortBufferIsAnErrorNotAReadPastTheEnd() throws {
    let s = FrameStorage(capacity: 100)
    let f = VideoFrameBuffer(pixelFormat: .yuyv, width: 640, height: 480, stride: 1280, bytesUsed: 100, storage: s)
    let e = #expect(throws: ProcessingError.self) { try FrameConverter().convert(f) }
    #expect(e?.code == .shortBuffer)
    #expect(e?.message.contains("needs 614400 bytes") == true)
}

@Test func undecodableJPEGIsAnError() throws {
    let garbage: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + (0..<500).map { UInt8(truncatingIfNeeded: $0 &* 37) }
    let s = FrameStorage(capacity: garbage.count)
    s.mutableBaseAddress.copyMemory(from: garbage, byteCount: garbage.count)
    let f = VideoFrameBuffer(pixelFormat: .mjpeg, width: 640, height: 480, stride: 0, bytesUsed: garbage.count, storage: s)
    let e = #expect(throws: ProcessingError.self) { try FrameConverter().convert(f) }
    #expect(e?.code == .decodeFailed)
}

@Test func truncatedJPEGIsAnErrorOrAPicture() throws {
    // A JPEG cut in half: libjpeg may fill the rest grey; either way no crash and a right-sized result.
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .mjpeg, width: 320, height: 240))
    let jpeg = try FormatWriter().write(pattern(320, 240), as: .mjpeg, into: storage)
    let cut = VideoFrameBuffer(pixelFormat: .mjpeg, width: 320, height: 240, stride: 0, bytesUsed: jpeg.bytesUsed / 2, storage: storage)
    do {
        let p = try FrameConverter().convert(cut)
        #expect(p.width == 320)
    } catch { #expect(error.code == .decodeFailed) }
}

/// Wrapping storage as an I420 picture checks it: short storage or a bad size is an error naming both, not a trap.
@Test func wrappingShortStorageIsAnError() throws {
    let short = #expect(throws: CaptureError.self) { try I420Buffer(width: 64, height: 64, storage: FrameStorage(capacity: 100)) }
    #expect(short?.code == .invalidArgument && short?.message.contains("100 bytes is too small for a 64x64") == true, "\(String(describing: short))")
    #expect(throws: CaptureError.self) { try I420Buffer(width: 0, height: 64, storage: FrameStorage(capacity: 100_000)) }
    let fits = try I420Buffer(width: 64, height: 64, storage: FrameStorage(capacity: I420Buffer.byteCount(width: 64, height: 64)))
    #expect(fits.width == 64 && fits.chromaHeight == 32)
}

@Test func zeroSizeAndUnsupportedFormatsAreErrors() throws {
    let s = FrameStorage(capacity: 64)
    let zero = VideoFrameBuffer(pixelFormat: .i420, width: 0, height: 10, stride: 0, bytesUsed: 0, storage: s)
    #expect(throws: ProcessingError.self) { try FrameConverter().convert(zero) }
    let bayer = VideoFrameBuffer(pixelFormat: PixelFormat(fourcc: "BA81")!, width: 8, height: 8, stride: 8, bytesUsed: 64, storage: s)
    let e = #expect(throws: ProcessingError.self) { try FrameConverter().convert(bayer) }
    #expect(e?.code == .unsupportedFormat)
    #expect(e?.message.contains("BA81") == true)
    let badCrop = pattern(64, 64).buffer
    #expect(throws: ProcessingError.self) {
        try FrameConverter().convert(badCrop, options: .init(crop: CropRect(x: 60, y: 0, width: 10, height: 10)))
    }
}

@Test func unwritableOutputsFailWithThePath() {
    let e = #expect(throws: ProcessingError.self) { _ = try Y4MWriter(path: "/nonexistent-dir/out.y4m", width: 64, height: 64, fps: Fraction(30)) }
    #expect(e?.message.contains("/nonexistent-dir/out.y4m") == true)
    #expect(throws: ProcessingError.self) { try SnapshotWriter.write(pattern(16, 16), to: "/nonexistent-dir/snap.png") }
    #expect(throws: ProcessingError.self) { try SnapshotWriter.write(pattern(16, 16), to: scratchDir + "/snap.bmp") }
}

@Test func fullDiskIsAnError() throws {
    // /dev/full fails every write with ENOSPC.
    let w = try Y4MWriter(path: "/dev/full", width: 640, height: 480, fps: Fraction(30))
    let e = #expect(throws: ProcessingError.self) {
        for _ in 0..<20 { try w.write(pattern(640, 480)) }
        try w.close()
    }
    #expect(e?.message.contains("/dev/full") == true)
}

// MARK: - Pool, writers

@Test func steadyStateConversionReusesPooledBuffers() throws {
    let conv = FrameConverter()
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: .yuyv, width: 320, height: 240))
    let frame = try FormatWriter().write(pattern(320, 240), as: .yuyv, into: storage)
    for _ in 0..<100 { _ = try conv.convert(frame, options: .init(rotation: .rotation90, scale: FrameSize(width: 120, height: 160))) }
    // convert + rotate + scale: three pooled buffers, allocated once.
    #expect(conv.allocatedBufferCount <= 3)
}

@Test func y4mIsReadByFFprobe() throws {
    let path = scratchDir + "/out.y4m"
    let w = try Y4MWriter(path: path, width: 162, height: 90, fps: Fraction(25))
    for i in 0..<7 { try w.write(pattern(162, 90, frame: UInt64(i))) }
    try w.close()
    let (rc, out, _) = try run(
        "ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames,r_frame_rate", "-of", "csv=p=0", path])
    #expect(rc == 0)
    #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "162,90,25/1,7")
}

@Test(arguments: ["png", "jpg"])
func snapshotsDecodeToThePicture(_ ext: String) throws {
    let src = pattern(96, 64)
    let path = scratchDir + "/snap.\(ext)"
    try SnapshotWriter.write(src, to: path)
    let (rc, out, _) = try run("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", path])
    #expect(rc == 0)
    #expect(out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(ext == "png" ? "png" : "mjpeg"),96,64")
    // Decode with ffmpeg back to YUV and compare with the source picture: the PNG's RGB back to limited range, the
    // JPEG's own samples with the source expanded to full range (JFIF is full range; the pattern's full-range colours
    // are its limited ones expanded).
    let back = i420(
        fromPacked: try ffmpegToYUV420(["-f", ext == "png" ? "png_pipe" : "jpeg_pipe"], path, outFmt: ext == "png" ? "yuv420p" : "yuvj420p"),
        width: 96, height: 64)
    let expected = ext == "png" ? src : pattern(96, 64, range: .full)
    #expect(psnr(back, expected) >= 28, "PSNR \(psnr(back, expected))")
}

// MARK: - MJPEG layouts (the persistent decoder maps 4:2:0, 4:2:2, 4:4:4 and greyscale to I420)

/// PSNR of the two chroma planes only (dB).
func chromaPSNR(_ a: I420Buffer, _ b: I420Buffer) -> Double {
    var sum = 0.0
    for (pa, sa, pb, sb) in [(a.dataU, a.strideU, b.dataU, b.strideU), (a.dataV, a.strideV, b.dataV, b.strideV)] {
        for y in 0..<a.chromaHeight {
            for x in 0..<a.chromaWidth {
                let d = Double(pa[y * sa + x]) - Double(pb[y * sb + x])
                sum += d * d
            }
        }
    }
    let mse = sum / Double(2 * a.chromaWidth * a.chromaHeight)
    return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
}

/// At 1/8, a 4:2:2 or 4:4:4 JPEG whose blocks are one row of 8x8 (a camera's 2x1 or 1x1 sampling, as libjpeg and
/// GStreamer's jpegenc write them; ffmpeg writes 2x2/1x2) gives one chroma row per iMCU row where I420 wants one per
/// two: both are averaged (they were once taken one of two). Horizontal chroma stripes 8 rows high show it: each
/// I420 chroma row at 1/8 covers one stripe of each colour.
@Test(arguments: [("y42b", "yuv422p"), ("y444", "yuv444p")])
func mjpegChromaRowsPairAtAnEighth(_ gst: String, _ planar: String) throws {
    let (w, h) = (256, 128)
    let src = pattern(w, h)
    for y in 0..<src.chromaHeight {
        for x in 0..<src.chromaWidth {
            src.mutableDataU[y * src.strideU + x] = (y / 4) % 2 == 0 ? 60 : 190 // 8 picture rows a stripe
            src.mutableDataV[y * src.strideV + x] = (y / 4) % 2 == 0 ? 200 : 70
        }
    }
    let raw = scratchDir + "/stripes-\(gst).yuv", planarRaw = scratchDir + "/stripes-\(gst).raw", jpg = scratchDir + "/stripes-\(gst).jpg"
    src.packedBytes().withUnsafeBytes { writeFile(raw, $0) }
    let (rc1, _, err1) = try run(
        "ffmpeg",
        ["-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "\(w)x\(h)", "-i", raw, "-f", "rawvideo", "-pix_fmt", planar, planarRaw])
    #expect(rc1 == 0, "ffmpeg: \(err1)")
    let (rc2, _, err2) = try run(
        "gst-launch-1.0",
        [
            "-q", "filesrc", "location=\(planarRaw)", "!", "rawvideoparse", "width=\(w)", "height=\(h)", "format=\(gst)", "framerate=1/1", "!",
            "jpegenc",
            "!", "filesink", "location=\(jpg)",
        ])
    #expect(rc2 == 0, "gst-launch: \(err2)")
    let bytes = readBytes(jpg)
    // The JPEG's own sampling: luma 2x1 (4:2:2) or 1x1 (4:4:4), chroma 1x1, as the test means.
    let sof = bytes.indices.dropLast().first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 }
    #expect(sof.map { bytes[$0 + 11] } == (gst == "y42b" ? 0x21 : 0x11) && sof.map { bytes[$0 + 14] } == 0x11)
    let s = FrameStorage(capacity: bytes.count)
    s.mutableBaseAddress.copyMemory(from: bytes, byteCount: bytes.count)
    let frame = VideoFrameBuffer(pixelFormat: .mjpeg, width: w, height: h, stride: 0, bytesUsed: bytes.count, storage: s)
    let size = FrameSize(width: w / 8, height: h / 8)
    let reduced = try FrameConverter().convert(frame, options: .init(scale: size))
    let boxed = try FrameConverter().convert(try FrameConverter().convert(frame).buffer, options: .init(scale: size))
    let q = chromaPSNR(reduced, boxed)
    #expect(q >= 35, "\(gst) at 1/8: chroma \(q) dB against the full decode box-scaled")
}

@Test(
    "ffmpeg's JPEGs of every common sampling decode like ffmpeg decodes them",
    arguments: [
        ("yuvj420p", 320, 240), ("yuvj422p", 320, 240), ("yuvj444p", 320, 240), ("gray", 320, 240),
        ("yuvj420p", 318, 178), ("yuvj422p", 250, 142),
    ])
func mjpegSamplingsDecode(_ pix: String, _ w: Int, _ h: Int) throws {
    // One source file per case: the cases run in parallel, and four share a size (one rewriting the file while
    // another's ffmpeg read it gave that one an empty picture).
    let raw = scratchDir + "/src-\(pix)-\(w)x\(h).yuv"
    let src = pattern(w, h, frame: 42)
    src.packedBytes().withUnsafeBytes { writeFile(raw, $0) }
    let jpg = scratchDir + "/sampling-\(pix)-\(w)x\(h).jpg"
    let (rc, _, err) = try run(
        "ffmpeg",
        [
            "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "\(w)x\(h)", "-i", raw,
            "-pix_fmt", pix, "-q:v", "2", "-frames:v", "1", jpg,
        ])
    #expect(rc == 0, "ffmpeg: \(err)")
    let bytes = readBytes(jpg)
    let s = FrameStorage(capacity: bytes.count)
    s.mutableBaseAddress.copyMemory(from: bytes, byteCount: bytes.count)
    let frame = VideoFrameBuffer(pixelFormat: .mjpeg, width: w, height: h, stride: 0, bytesUsed: bytes.count, storage: s)
    let converter = FrameConverter()
    let ours = try converter.convert(frame)
    let again = try converter.convert(frame) // the same decoder, a second image: same picture
    #expect(psnr(ours, again) >= 99)
    let reference = i420(fromPacked: try ffmpegToYUV420(["-f", "jpeg_pipe"], jpg, outFmt: "yuvj420p"), width: w, height: h)
    let q = psnr(ours, reference)
    #expect(q >= 38, "\(pix) \(w)x\(h): PSNR \(q) against ffmpeg's decode")
    // Decoded at 1/2 and 1/4 by the reduced inverse DCT (ours for luma, and for chroma where libjpeg would give it
    // at twice the I420 size: 4:2:0 and 4:4:4). The judge is the source picture downscaled by ffmpeg's lanczos:
    // dropping each block's high frequencies is a sharper low-pass than averaging the full decode (libjpeg's own
    // reduced IDCT, and the box filter after a full decode), and comes out at least as close to it (measured: 41.0-
    // 41.8 against 40.5-41.5 dB at 1/2, 36.6-37.2 against 32.9-33.1 dB at 1/4, for 320x240).
    for d in [2, 4] {
        let size = FrameSize(width: (w / d) & ~1, height: (h / d) & ~1)
        let reduced = try converter.convert(frame, options: .init(scale: size))
        let boxed = try FrameConverter().convert(ours.buffer, options: .init(scale: size))
        let lanczos = i420(
            fromPacked: try ffmpegToYUV420(
                ["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "\(w)x\(h)"], raw, outFmt: "yuvj420p",
                filter: "scale=\(size.width):\(size.height):flags=lanczos"), width: size.width, height: size.height)
        let (qr, qb) = (psnr(reduced, lanczos), psnr(boxed, lanczos))
        #expect(qr >= 28, "\(pix) \(w)x\(h) at 1/\(d): \(qr) dB against the source scaled by lanczos")
        if w % (8 * d) == 0 && h % (8 * d) == 0 { // no rescale after the reduced decode
            #expect(qr >= qb - 0.5, "\(pix) \(w)x\(h) at 1/\(d): \(qr) dB against lanczos, the full decode box-scaled \(qb)")
        }
    }
    // A frame whose JPEG is another size than the stream says is an error that names both sizes.
    let wrong = VideoFrameBuffer(pixelFormat: .mjpeg, width: w + 2, height: h, stride: 0, bytesUsed: bytes.count, storage: s)
    let e = #expect(throws: ProcessingError.self) { try converter.convert(wrong) }
    #expect(e?.message.contains("JPEG is \(w)x\(h)") == true)
}
