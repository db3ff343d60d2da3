/// How a frame's sample values map to colours: the primaries, the transfer function, the Y'CbCr matrix and the
/// range, with the code points of H.264's VUI (ISO/IEC 23091-2), which is what an encoder writes and what
/// `ffprobe` reports (`color_primaries`, `color_transfer`, `color_space`, `color_range`).
///
/// Cameras report theirs through V4L2 (`colorspace`, `xfer_func`, `ycbcr_enc`, `quantization`; see
/// ``init(v4l2Colorspace:transfer:encoding:quantization:pixelFormat:)``); a fixture camera states its own. A
/// conversion keeps the description of a Y'CbCr source and sets the one of its own output for JPEG and RGB
/// sources (see ``convertedToI420(from:)``).
public struct VideoColorSpace: Hashable, Sendable, CustomStringConvertible {
    /// The chromaticities of the red, green and blue primaries and the white point.
    public enum Primaries: UInt8, Sendable, CaseIterable {
        /// ITU-R BT.709, also sRGB's primaries.
        case bt709 = 1
        /// Not known.
        case unspecified = 2
        /// ITU-R BT.470 system B/G (PAL).
        case bt470bg = 5
        /// SMPTE 170M (NTSC, BT.601 525).
        case smpte170m = 6
        /// SMPTE 240M (early HDTV).
        case smpte240m = 7
        /// ITU-R BT.2020 (UHD, wide gamut).
        case bt2020 = 9
        /// DCI-P3 (SMPTE 431-2).
        case smpte431 = 11
    }

    /// The opto-electronic transfer function (gamma).
    public enum Transfer: UInt8, Sendable, CaseIterable {
        /// ITU-R BT.709 (HD video).
        case bt709 = 1
        /// Not known.
        case unspecified = 2
        /// SMPTE 170M (SD video; the same curve as BT.709).
        case smpte170m = 6
        /// SMPTE 240M.
        case smpte240m = 7
        /// No transfer function: linear light (V4L2's `NONE`).
        case linear = 8
        /// IEC 61966-2-1: sRGB (and JPEG).
        case srgb = 13
        /// SMPTE ST 2084 (PQ).
        case smpte2084 = 16
    }

    /// The matrix from R'G'B' to Y'CbCr.
    public enum Matrix: UInt8, Sendable, CaseIterable {
        /// R'G'B' samples, no Y'CbCr matrix (RGB formats).
        case rgb = 0
        /// ITU-R BT.709.
        case bt709 = 1
        /// Not known.
        case unspecified = 2
        /// BT.601 (625 lines); the same matrix as `smpte170m`.
        case bt470bg = 5
        /// BT.601 (525 lines): what JPEG and most webcams use.
        case smpte170m = 6
        /// SMPTE 240M.
        case smpte240m = 7
        /// ITU-R BT.2020, non-constant luminance.
        case bt2020NonConstant = 9
        /// ITU-R BT.2020, constant luminance.
        case bt2020Constant = 10
    }

    /// Whether luma spans 16...235 (limited, "TV", H.264 `video_full_range_flag` 0) or 0...255 (full, "PC").
    public enum Range: Sendable, Hashable {
        /// Luma 16...235, chroma 16...240.
        case limited
        /// Every code value 0...255 (JPEG).
        case full
        /// Not known (an encoder then writes limited range).
        case unspecified
    }

    /// The colour primaries.
    public var primaries: Primaries
    /// The transfer function.
    public var transfer: Transfer
    /// The Y'CbCr matrix.
    public var matrix: Matrix
    /// The sample range.
    public var range: Range

    /// A description with every part given.
    public init(primaries: Primaries, transfer: Transfer, matrix: Matrix, range: Range) {
        self.primaries = primaries
        self.transfer = transfer
        self.matrix = matrix
        self.range = range
    }

    /// Nothing known: an encoder writes no colour description for it.
    public static let unspecified = VideoColorSpace(primaries: .unspecified, transfer: .unspecified, matrix: .unspecified, range: .unspecified)
    /// What a webcam streaming raw Y'CbCr usually is, and V4L2's sRGB default for such formats: BT.709 primaries,
    /// the sRGB transfer, the BT.601 matrix, limited range.
    public static let webcam = VideoColorSpace(primaries: .bt709, transfer: .srgb, matrix: .smpte170m, range: .limited)
    /// JPEG (JFIF) and so every MJPEG frame: sRGB primaries and transfer, the BT.601 matrix, full range.
    public static let jpeg = VideoColorSpace(primaries: .bt709, transfer: .srgb, matrix: .smpte170m, range: .full)
    /// HD video (ITU-R BT.709), limited range.
    public static let bt709 = VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .limited)
    /// SD video (BT.601, 525 lines), limited range.
    public static let bt601 = VideoColorSpace(primaries: .smpte170m, transfer: .smpte170m, matrix: .smpte170m, range: .limited)

    /// True when anything is known (an encoder then writes a video signal description).
    public var isSpecified: Bool { self != .unspecified }

    /// `"bt709/srgb/smpte170m/limited"`: ffprobe's names, primaries/transfer/matrix/range.
    public var description: String {
        let r: String
        switch range {
        case .limited: r = "limited"
        case .full: r = "full"
        case .unspecified: r = "unspecified"
        }
        return "\(primaries)/\(transfer == .srgb ? "iec61966-2-1" : "\(transfer)")/\(matrix)/\(r)"
    }

    /// The description of an I420 picture converted from a frame described by `source` in `pixelFormat`:
    /// Y'CbCr sources keep theirs (a conversion between Y'CbCr layouts does not touch the values); JPEG
    /// decodes to its own full-range BT.601 samples; RGB, Bayer and grey sources are converted with libyuv's
    /// BT.601 limited-range matrix, keeping their primaries and transfer.
    public func convertedToI420(from pixelFormat: PixelFormat) -> VideoColorSpace {
        switch pixelFormat {
        case .mjpeg, .jpeg:
            var c = VideoColorSpace.jpeg
            if primaries != .unspecified { c.primaries = primaries }
            if transfer != .unspecified { c.transfer = transfer }
            return c
        case _ where pixelFormat.isYCbCr:
            return self
        default:
            return VideoColorSpace(primaries: primaries, transfer: transfer, matrix: .smpte170m, range: .limited)
        }
    }

    /// The description V4L2 gives in `struct v4l2_pix_format` (`colorspace`, `xfer_func`, `ycbcr_enc`,
    /// `quantization`), with the kernel's rules for the `DEFAULT` (0) values (`V4L2_MAP_*_DEFAULT`). Values the
    /// kernel does not define give `unspecified` parts, never an error.
    public init(v4l2Colorspace colorspace: UInt32, transfer: UInt32, encoding: UInt32, quantization: UInt32, pixelFormat: PixelFormat) {
        // enum v4l2_colorspace
        let smpte170m: UInt32 = 1, smpte240m: UInt32 = 2, rec709: UInt32 = 3, bt878: UInt32 = 4, m470: UInt32 = 5,
            bg470: UInt32 = 6, jpeg: UInt32 = 7, srgb: UInt32 = 8, oprgb: UInt32 = 9, bt2020: UInt32 = 10, raw: UInt32 = 11,
            dciP3: UInt32 = 12
        switch colorspace {
        case smpte170m, bt878: primaries = .smpte170m
        case smpte240m: primaries = .smpte240m
        case rec709, jpeg, srgb: primaries = .bt709
        case m470, bg470: primaries = .bt470bg
        case bt2020: primaries = .bt2020
        case dciP3: primaries = .smpte431
        default: primaries = .unspecified // DEFAULT (0) without a format to infer from, oprgb, raw, unknown
        }
        // enum v4l2_xfer_func; DEFAULT maps from the colour space.
        var xfer = transfer
        if xfer == 0 {
            switch colorspace {
            case oprgb: xfer = 3
            case smpte240m: xfer = 4
            case dciP3: xfer = 6
            case raw: xfer = 5
            case srgb, jpeg: xfer = 2
            case 0: xfer = 0
            default: xfer = 1
            }
        }
        switch xfer {
        case 1: self.transfer = colorspace == smpte170m || colorspace == bt878 ? .smpte170m : .bt709
        case 2: self.transfer = .srgb
        case 4: self.transfer = .smpte240m
        case 5: self.transfer = .linear
        case 7: self.transfer = .smpte2084
        default: self.transfer = .unspecified // oprgb, DCI-P3's own, unknown
        }
        // enum v4l2_ycbcr_encoding; DEFAULT maps from the colour space.
        var enc = encoding
        if enc == 0 {
            switch colorspace {
            case rec709, dciP3: enc = 2
            case bt2020: enc = 6
            case smpte240m: enc = 8
            case 0: enc = 0
            default: enc = 1
            }
        }
        // A camera's own JPEG or H.264/HEVC is coded YCbCr: a matrix, never RGB.
        let coded = pixelFormat == .mjpeg || pixelFormat == .jpeg || pixelFormat == .h264 || pixelFormat == .hevc
        if !pixelFormat.isYCbCr && !coded {
            matrix = .rgb
        } else {
            switch enc {
            case 1, 3, 5: matrix = .smpte170m // 601, xv601, sYCC (601 matrix)
            case 2, 4: matrix = .bt709 // 709, xv709
            case 6: matrix = .bt2020NonConstant
            case 7: matrix = .bt2020Constant
            case 8: matrix = .smpte240m
            default: matrix = .unspecified
            }
        }
        // enum v4l2_quantization; DEFAULT: full for RGB and for the JPEG colour space, limited otherwise.
        switch quantization {
        case 1: range = .full
        case 2: range = .limited
        default:
            if colorspace == 0 && pixelFormat.isYCbCr {
                range = .unspecified
            } else {
                // H.264/HEVC are limited range unless their VUI says otherwise (video_full_range_flag 0).
                let video = pixelFormat == .h264 || pixelFormat == .hevc
                range = (!pixelFormat.isYCbCr && !video) || colorspace == jpeg ? .full : .limited
            }
        }
    }
}
