/// A V4L2 pixel format, identified by its FourCC (`v4l2_fourcc(a, b, c, d)`, bit 31 set for big-endian variants).
///
/// An open set, like swift-system's `Errno`: any FourCC can be represented; the ones this package knows
/// have a static member, a name, frame-size arithmetic and a place in the conversion-cost order.
public struct PixelFormat: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The FourCC as V4L2 stores it: the four characters little-endian, bit 31 for big-endian variants.
    public var rawValue: UInt32
    /// A format from its raw V4L2 value; any value is accepted (unknown codes print as their FourCC).
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `PixelFormat(fourcc: "YUYV")`; a `-BE` suffix (as v4l2-ctl prints it) sets the big-endian bit.
    /// Returns nil unless the code is four printable ASCII characters (plus the optional suffix; trailing spaces
    /// may be left out, as in "Y16") that name a format this package knows (``isKnown``: every format it
    /// converts, H.264, and the other V4L2 formats it has a name for). `PixelFormat(fourcc: "ZZZZ")` is nil; a
    /// driver's code of its own is still represented, by `init(rawValue:)`.
    public init?(fourcc: String) {
        guard let code = Self.code(spelling: fourcc), Self.knownNames[code] != nil else { return nil }
        self = code
    }

    /// The code `fourcc` spells, known or not: nil unless it is four printable ASCII characters (plus `-BE`).
    private static func code(spelling fourcc: String) -> PixelFormat? {
        var text = Substring(fourcc)
        var bigEndian = false
        if text.hasSuffix("-BE") {
            bigEndian = true
            text = text.dropLast(3)
        }
        var bytes = Array(text.utf8)
        // v4l2-ctl and users often drop the trailing spaces of codes like "Y16 ".
        guard !bytes.isEmpty, bytes.count <= 4, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
        while bytes.count < 4 { bytes.append(0x20) }
        let raw = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
        return PixelFormat(rawValue: bigEndian ? raw | 1 << 31 : raw)
    }

    /// The FourCC as V4L2 prints it, without padding spaces (`"MJPG"`, `"Y16-BE"`).
    public var fourcc: String {
        let v = rawValue & 0x7fff_ffff
        var s = String(decoding: [UInt8(v & 0xff), UInt8(v >> 8 & 0xff), UInt8(v >> 16 & 0xff), UInt8(v >> 24 & 0xff)], as: UTF8.self)
        while s.hasSuffix(" ") { s.removeLast() }
        return rawValue & (1 << 31) != 0 ? s + "-BE" : s
    }

    public var description: String { fourcc }
    public static func < (a: PixelFormat, b: PixelFormat) -> Bool { a.rawValue < b.rawValue }

    private static func code(_ s: StaticString) -> PixelFormat {
        let p = s.utf8Start
        return PixelFormat(rawValue: UInt32(p[0]) | UInt32(p[1]) << 8 | UInt32(p[2]) << 16 | UInt32(p[3]) << 24)
    }

    // 4:2:0 and 4:2:2 / 4:4:4 YUV
    /// `YU12`: planar 4:2:0, Y then U then V (I420, what the converters and the encoder work in).
    public static let i420 = code("YU12")
    /// `NV12`: 4:2:0, a Y plane then one plane of interleaved U and V.
    public static let nv12 = code("NV12")
    /// `YV12`: planar 4:2:0 like I420, with V before U.
    public static let yv12 = code("YV12")
    /// `NV21`: 4:2:0, a Y plane then interleaved V and U.
    public static let nv21 = code("NV21")
    /// `YUYV`: packed 4:2:2, Y0 U Y1 V per pixel pair (the common uncompressed webcam format).
    public static let yuyv = code("YUYV")
    /// `UYVY`: packed 4:2:2, U Y0 V Y1 per pixel pair.
    public static let uyvy = code("UYVY")
    /// `YVYU`: packed 4:2:2, Y0 V Y1 U per pixel pair.
    public static let yvyu = code("YVYU")
    /// `VYUY`: packed 4:2:2, V Y0 U Y1 per pixel pair.
    public static let vyuy = code("VYUY")
    /// `422P`: planar 4:2:2, chroma planes at half width and full height.
    public static let yuv422p = code("422P")
    /// `NV16`: 4:2:2, a Y plane then interleaved U and V at half width, full height.
    public static let nv16 = code("NV16")
    /// `NV61`: 4:2:2, a Y plane then interleaved V and U at half width, full height.
    public static let nv61 = code("NV61")
    /// `NV24`: 4:4:4, a Y plane then interleaved U and V at full resolution.
    public static let nv24 = code("NV24")
    /// `NV42`: 4:4:4, a Y plane then interleaved V and U at full resolution.
    public static let nv42 = code("NV42")
    // The same layouts with each plane in its own memory buffer (multi-planar V4L2 devices only).
    /// `YM12` (`V4L2_PIX_FMT_YUV420M`): I420 with Y, U and V in three separate buffers.
    public static let yuv420m = code("YM12")
    /// `YM21` (`V4L2_PIX_FMT_YVU420M`): YV12 with Y, V and U in three separate buffers.
    public static let yvu420m = code("YM21")
    /// `NM12` (`V4L2_PIX_FMT_NV12M`): NV12 with the Y plane and the UV plane in two separate buffers.
    public static let nv12m = code("NM12")
    /// `NM21` (`V4L2_PIX_FMT_NV21M`): NV21 with the Y plane and the VU plane in two separate buffers.
    public static let nv21m = code("NM21")
    /// `YM16` (`V4L2_PIX_FMT_YUV422M`): planar 4:2:2 (`422P`) with Y, U and V in three separate buffers.
    public static let yuv422m = code("YM16")
    /// `NM16` (`V4L2_PIX_FMT_NV16M`): NV16 with the Y plane and the UV plane in two separate buffers.
    public static let nv16m = code("NM16")
    /// `NM61` (`V4L2_PIX_FMT_NV61M`): NV61 with the Y plane and the VU plane in two separate buffers.
    public static let nv61m = code("NM61")
    // 32-bit RGB, as V4L2 names them; the comment gives the byte order in memory.
    /// `BGR4`: 32-bit RGB, bytes in memory B G R X (V4L2 deprecates the name: the alpha byte is undefined).
    public static let bgr32 = code("BGR4")
    /// `RGB4`: 32-bit RGB, bytes in memory X R G B (V4L2 deprecates the name: the alpha byte is undefined).
    public static let rgb32 = code("RGB4")
    /// `AR24`: 32-bit RGB, bytes in memory B G R A.
    public static let abgr32 = code("AR24")
    /// `XR24`: 32-bit RGB, bytes in memory B G R X.
    public static let xbgr32 = code("XR24")
    /// `BA24`: 32-bit RGB, bytes in memory A R G B.
    public static let argb32 = code("BA24")
    /// `BX24`: 32-bit RGB, bytes in memory X R G B.
    public static let xrgb32 = code("BX24")
    /// `AB24`: 32-bit RGB, bytes in memory R G B A.
    public static let rgba32 = code("AB24")
    /// `XB24`: 32-bit RGB, bytes in memory R G B X.
    public static let rgbx32 = code("XB24")
    /// `RA24`: 32-bit RGB, bytes in memory A B G R.
    public static let bgra32 = code("RA24")
    /// `RX24`: 32-bit RGB, bytes in memory X B G R.
    public static let bgrx32 = code("RX24")
    // 24-bit and 16-bit RGB
    /// `RGB3`: 24-bit RGB, bytes in memory R G B.
    public static let rgb24 = code("RGB3")
    /// `BGR3`: 24-bit RGB, bytes in memory B G R.
    public static let bgr24 = code("BGR3")
    /// `RGBP`: 16-bit RGB 5-6-5, little-endian.
    public static let rgb565 = code("RGBP")
    // Compressed and grey
    /// `MJPG`: Motion-JPEG, one JPEG per frame (how most webcams deliver HD at full frame rate).
    public static let mjpeg = code("MJPG")
    /// `JPEG`: JFIF JPEG frames (a few drivers use it for the same thing as `MJPG`).
    public static let jpeg = code("JPEG")
    /// `GREY`: 8-bit luma only (converted with neutral chroma).
    public static let grey = code("GREY")
    /// `H264`: H.264 elementary stream from a camera that encodes itself: negotiated when asked for (a
    /// pixel-format preference) or when the camera offers nothing convertible; its frames are passed through.
    public static let h264 = code("H264")
    /// `HEVC`: H.265 elementary stream; listed, never negotiated (not convertible).
    public static let hevc = code("HEVC")

    /// The place in the conversion-cost order that breaks negotiation ties (``FormatSelector``, rule 4): lower is cheaper.
    /// `nil` means we cannot convert the format to I420, so it is never a candidate.
    public var conversionCost: Int? {
        switch self {
        // A separate-plane format converts at the cost of its single-buffer twin; it ranks right after it, so a
        // device that offers both gets the single-buffer one.
        case .i420: 0
        case .yuv420m: 1
        case .nv12: 2
        case .nv12m: 3
        case .yv12: 4
        case .yvu420m: 5
        case .nv21: 6
        case .nv21m: 7
        case .yuyv: 8
        case .uyvy: 9
        case .yvyu: 10
        case .vyuy: 11
        case .yuv422p: 12
        case .yuv422m: 13
        case .nv16: 14
        case .nv16m: 15
        case .nv61: 16
        case .nv61m: 17
        case .nv24: 18
        case .nv42: 19
        case .bgr32, .rgb32, .abgr32, .xbgr32, .argb32, .xrgb32, .rgba32, .rgbx32, .bgra32, .bgrx32: 20
        case .rgb24, .bgr24: 21
        case .rgb565: 22
        case .mjpeg: 23
        case .jpeg: 24
        case .grey: 25
        default: nil
        }
    }

    /// Whether the converters can turn this format into I420, so negotiation may pick it.
    public var isConvertibleToI420: Bool { conversionCost != nil }
    /// Whether frames of this format are a compressed bitstream (MJPEG, JPEG, H.264, HEVC, VP8/9, MPEG): no stride,
    /// and `bytesUsed` varies per frame.
    public var isCompressed: Bool { Self.compressed.contains(self) }
    /// True for the uncompressed Y'CbCr layouts (planar, semi-planar and packed 4:2:0, 4:2:2, 4:4:4), whose
    /// samples a conversion to I420 moves without changing.
    public var isYCbCr: Bool { Self.yCbCr.contains(self) }
    private static let yCbCr: Set<PixelFormat> = [
        .i420, .nv12, .yv12, .nv21, .yuyv, .uyvy, .yvyu, .vyuy, .yuv422p, .nv16, .nv61, .nv24, .nv42,
        .yuv420m, .yvu420m, .nv12m, .nv21m, .yuv422m, .nv16m, .nv61m,
    ]

    /// Every format we can convert, in conversion-cost order.
    public static let convertible: [PixelFormat] = [
        .i420, .yuv420m, .nv12, .nv12m, .yv12, .yvu420m, .nv21, .nv21m, .yuyv, .uyvy, .yvyu, .vyuy, .yuv422p, .yuv422m,
        .nv16, .nv16m, .nv61, .nv61m, .nv24, .nv42,
        .bgr32, .rgb32, .abgr32, .xbgr32, .argb32, .xrgb32, .rgba32, .rgbx32, .bgra32, .bgrx32,
        .rgb24, .bgr24, .rgb565, .mjpeg, .jpeg, .grey,
    ]

    private static let compressed: Set<PixelFormat> = [
        .mjpeg, .jpeg, .h264, .hevc, code("VP80"), code("VP90"), code("MPG2"), code("MPG4"), code("H263"),
    ]

    /// A human name (V4L2's description where we know it).
    public var name: String { Self.knownNames[self] ?? "unknown (\(fourcc))" }
    /// Whether ``name`` is a real description rather than the "unknown" placeholder.
    public var isKnown: Bool { Self.knownNames[self] != nil }

    /// Bytes per pixel of the first plane for packed/planar uncompressed formats (the `bytesperline` unit).
    public var bytesPerPixel: Int? {
        switch self {
        case .i420, .yv12, .nv12, .nv21, .yuv422p, .nv16, .nv61, .nv24, .nv42, .grey: 1
        case .yuv420m, .yvu420m, .nv12m, .nv21m, .yuv422m, .nv16m, .nv61m: 1
        case .yuyv, .uyvy, .yvyu, .vyuy, .rgb565: 2
        case .rgb24, .bgr24: 3
        case .bgr32, .rgb32, .abgr32, .xbgr32, .argb32, .xrgb32, .rgba32, .rgbx32, .bgra32, .bgrx32: 4
        default: nil
        }
    }

    /// The minimum `bytesperline` for a width (nil for compressed or unknown formats).
    public func minimumStride(width: Int) -> Int? {
        guard let bpp = bytesPerPixel, width > 0 else { return nil }
        // Packed 4:2:2 stores pixel pairs: an odd width still needs the whole last pair.
        switch self {
        case .yuyv, .uyvy, .yvyu, .vyuy: return ((width + 1) & ~1) * 2
        default: return width * bpp
        }
    }

    /// Bytes one frame needs with the given first-plane stride (V4L2 single-planar layout: chroma planes
    /// follow the luma plane, their stride derived from the luma stride; for a separate-plane format such as
    /// `NM12`, the bytes of all its planes together, as its single-buffer twin). Nil for compressed formats.
    public func frameSize(width: Int, height: Int, stride: Int? = nil) -> Int? {
        guard width > 0, height > 0, let minStride = minimumStride(width: width) else { return nil }
        let s = stride ?? minStride
        guard s >= minStride else { return nil }
        let ch = (height + 1) / 2
        switch singleBufferEquivalent {
        case .i420, .yv12: return s * height + 2 * ((s + 1) / 2) * ch
        case .nv12, .nv21: return s * height + ((s + 1) / 2) * 2 * ch
        case .yuv422p: return s * height + 2 * ((s + 1) / 2) * height
        case .nv16, .nv61: return s * height + ((s + 1) / 2) * 2 * height
        case .nv24, .nv42: return s * height + 2 * s * height
        default: return s * height
        }
    }
}

extension PixelFormat {
    /// How many separate memory buffers a frame of this format occupies: 2 for `NM12`, `NM21`, `NM16`, `NM61`,
    /// 3 for `YM12`, `YM21`, `YM16`, 1 for every other format (the planes of `NV12` or `YU12` follow each other in
    /// one buffer). Multi-planar V4L2 devices report it as `num_planes`.
    public var memoryPlaneCount: Int {
        switch self {
        case .nv12m, .nv21m, .nv16m, .nv61m: 2
        case .yuv420m, .yvu420m, .yuv422m: 3
        default: 1
        }
    }

    /// The single-buffer format with the same samples in the same plane order (`NM12` → `NV12`, `YM12` → `YU12`,
    /// `YM16` → `422P`); the format itself for every other one.
    public var singleBufferEquivalent: PixelFormat {
        switch self {
        case .yuv420m: .i420
        case .yvu420m: .yv12
        case .nv12m: .nv12
        case .nv21m: .nv21
        case .yuv422m: .yuv422p
        case .nv16m: .nv16
        case .nv61m: .nv61
        default: self
        }
    }

    /// For memory plane `index` of a separate-plane format (see ``memoryPlaneCount``): the least bytes per line
    /// and the number of lines at this size. Plane 0 of any other uncompressed format is the whole frame
    /// (its minimum stride, `height` lines). Nil for a plane the format does not have or a compressed format.
    package func memoryPlane(_ index: Int, width: Int, height: Int) -> (minimumStride: Int, rows: Int)? {
        guard index >= 0, index < memoryPlaneCount, let s0 = minimumStride(width: width), height > 0 else { return nil }
        if index == 0 { return (s0, height) }
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        switch self {
        case .nv12m, .nv21m: return (2 * cw, ch)
        case .nv16m, .nv61m: return (2 * cw, height)
        case .yuv420m, .yvu420m: return (cw, ch)
        case .yuv422m: return (cw, height)
        default: return nil
        }
    }
}

extension PixelFormat {
    // Names for every FourCC a fixture may use: the vivid driver's full list, the YUV/RGB formats above,
    // and the compressed and Bayer formats common on UVC cameras.
    static let knownNames: [PixelFormat: String] = {
        let table: [(String, String)] = [
            ("YU12", "Planar YUV 4:2:0"), ("YV12", "Planar YVU 4:2:0"), ("NV12", "Y/UV 4:2:0"), ("NV21", "Y/VU 4:2:0"),
            ("YUYV", "YUYV 4:2:2"), ("UYVY", "UYVY 4:2:2"), ("YVYU", "YVYU 4:2:2"), ("VYUY", "VYUY 4:2:2"),
            ("422P", "Planar YUV 4:2:2"), ("NV16", "Y/UV 4:2:2"), ("NV61", "Y/VU 4:2:2"), ("NV24", "Y/UV 4:4:4"),
            ("NV42", "Y/VU 4:4:4"), ("YM12", "Planar YUV 4:2:0 (N-C)"), ("NM12", "Y/UV 4:2:0 (N-C)"),
            ("YM21", "Planar YVU 4:2:0 (N-C)"), ("NM21", "Y/VU 4:2:0 (N-C)"), ("YM16", "Planar YUV 4:2:2 (N-C)"),
            ("NM16", "Y/UV 4:2:2 (N-C)"), ("NM61", "Y/VU 4:2:2 (N-C)"), ("YM61", "Planar YVU 4:2:2 (N-C)"), ("YM24", "Planar YUV 4:4:4 (N-C)"),
            ("YM42", "Planar YVU 4:4:4 (N-C)"), ("M420", "YUV 4:2:0 (M420)"),
            ("YUVO", "16-bit A/XYUV 1-5-5-5"), ("YUVP", "16-bit YUV 5-6-5"), ("Y444", "16-bit A/XYUV 4-4-4-4"),
            ("YUV4", "32-bit A/XYUV 8-8-8-8"), ("AYUV", "32-bit AYUV 8-8-8-8"), ("XYUV", "32-bit XYUV 8-8-8-8"),
            ("VUYA", "32-bit VUYA 8-8-8-8"), ("VUYX", "32-bit VUYX 8-8-8-8"), ("YUVA", "32-bit YUVA 8-8-8-8"),
            ("YUVX", "32-bit YUVX 8-8-8-8"), ("GREY", "8-bit Greyscale"), ("Y10 ", "10-bit Greyscale"),
            ("Y12 ", "12-bit Greyscale"), ("Y16 ", "16-bit Greyscale"), ("Y16 -BE", "16-bit Greyscale BE"),
            ("RGB1", "8-bit RGB 3-3-2"), ("RGBP", "16-bit RGB 5-6-5"), ("RGBR", "16-bit RGB 5-6-5 BE"),
            ("R444", "16-bit A/XRGB 4-4-4-4"), ("XR12", "16-bit XRGB 4-4-4-4"), ("AR12", "16-bit ARGB 4-4-4-4"),
            ("RX12", "16-bit RGBX 4-4-4-4"), ("RA12", "16-bit RGBA 4-4-4-4"), ("XB12", "16-bit XBGR 4-4-4-4"),
            ("AB12", "16-bit ABGR 4-4-4-4"), ("BX12", "16-bit BGRX 4-4-4-4"), ("GA12", "16-bit BGRA 4-4-4-4"),
            ("RGBO", "16-bit A/XRGB 1-5-5-5"), ("XR15", "16-bit XRGB 1-5-5-5"), ("AR15", "16-bit ARGB 1-5-5-5"),
            ("RX15", "16-bit RGBX 5-5-5-1"), ("RA15", "16-bit RGBA 5-5-5-1"), ("XB15", "16-bit XBGR 1-5-5-5"),
            ("AB15", "16-bit ABGR 1-5-5-5"), ("BX15", "16-bit BGRX 5-5-5-1"), ("BA15", "16-bit BGRA 5-5-5-1"),
            ("RGBQ", "16-bit A/XRGB 1-5-5-5 BE"), ("XR15-BE", "16-bit XRGB 1-5-5-5 BE"), ("AR15-BE", "16-bit ARGB 1-5-5-5 BE"),
            ("RGB3", "24-bit RGB 8-8-8"), ("BGR3", "24-bit BGR 8-8-8"), ("BGRH", "18-bit BGRX 6-6-6-14"),
            ("RGB4", "32-bit A/XRGB 8-8-8-8"), ("BGR4", "32-bit BGRA/X 8-8-8-8"), ("BX24", "32-bit XRGB 8-8-8-8"),
            ("XR24", "32-bit BGRX 8-8-8-8"), ("BA24", "32-bit ARGB 8-8-8-8"), ("AR24", "32-bit BGRA 8-8-8-8"),
            ("XB24", "32-bit RGBX 8-8-8-8"), ("RX24", "32-bit XBGR 8-8-8-8"), ("AB24", "32-bit RGBA 8-8-8-8"),
            ("RA24", "32-bit ABGR 8-8-8-8"),
            ("BA81", "8-bit Bayer BGBG/GRGR"), ("GBRG", "8-bit Bayer GBGB/RGRG"), ("GRBG", "8-bit Bayer GRGR/BGBG"),
            ("RGGB", "8-bit Bayer RGRG/GBGB"), ("BG10", "10-bit Bayer BGBG/GRGR"), ("GB10", "10-bit Bayer GBGB/RGRG"),
            ("BA10", "10-bit Bayer GRGR/BGBG"), ("RG10", "10-bit Bayer RGRG/GBGB"), ("BG12", "12-bit Bayer BGBG/GRGR"),
            ("GB12", "12-bit Bayer GBGB/RGRG"), ("BA12", "12-bit Bayer GRGR/BGBG"), ("RG12", "12-bit Bayer RGRG/GBGB"),
            ("BYR2", "16-bit Bayer BGBG/GRGR"), ("GB16", "16-bit Bayer GBGB/RGRG"), ("GR16", "16-bit Bayer GRGR/BGBG"),
            ("RG16", "16-bit Bayer RGRG/GBGB"), ("HSV3", "24-bit HSV 8-8-8"), ("HSV4", "32-bit XHSV 8-8-8-8"),
            ("MJPG", "Motion-JPEG"), ("JPEG", "JFIF JPEG"), ("H264", "H.264"), ("HEVC", "HEVC"), ("VP80", "VP8"),
            ("VP90", "VP9"), ("MPG2", "MPEG-2 ES"), ("MPG4", "MPEG-4 part 2 ES"), ("H263", "H.263"),
            ("Z16 ", "16-bit Depth"), ("Y8I ", "Interleaved 8-bit Greyscale"), ("INZI", "Planar 10:16 Greyscale Depth"),
            // What CSI receivers (Raspberry Pi unicam) list: MIPI-packed Bayer and greyscale, 14-bit Bayer.
            ("BG14", "14-bit Bayer BGBG/GRGR"), ("GB14", "14-bit Bayer GBGB/RGRG"), ("GR14", "14-bit Bayer GRGR/BGBG"),
            ("RG14", "14-bit Bayer RGRG/GBGB"), ("pBAA", "10-bit Bayer BGBG/GRGR Packed"), ("pGAA", "10-bit Bayer GBGB/RGRG Packed"),
            ("pgAA", "10-bit Bayer GRGR/BGBG Packed"), ("pRAA", "10-bit Bayer RGRG/GBGB Packed"), ("pBCC", "12-bit Bayer BGBG/GRGR Packed"),
            ("pGCC", "12-bit Bayer GBGB/RGRG Packed"), ("pgCC", "12-bit Bayer GRGR/BGBG Packed"), ("pRCC", "12-bit Bayer RGRG/GBGB Packed"),
            ("pBEE", "14-bit Bayer BGBG/GRGR Packed"), ("pGEE", "14-bit Bayer GBGB/RGRG Packed"), ("pgEE", "14-bit Bayer GRGR/BGBG Packed"),
            ("pREE", "14-bit Bayer RGRG/GBGB Packed"), ("Y14 ", "14-bit Greyscale"), ("Y10P", "10-bit Greyscale (MIPI Packed)"),
            ("Y12P", "12-bit Greyscale (MIPI Packed)"), ("Y14P", "14-bit Greyscale (MIPI Packed)"),
            // Rockchip's ISP (rkisp, vendor kernels) lists its frame-buffer-compressed output.
            ("FBCG", "Rockchip fbc gain"),
        ]
        var d: [PixelFormat: String] = [:]
        for (code, name) in table { d[PixelFormat.code(spelling: code)!] = name }
        return d
    }()
}
