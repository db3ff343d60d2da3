import CLibCameraShim
public import VideoCapture

/// libcamera's formats in this package's terms: DRM fourccs as V4L2 pixel formats, stream formats as
/// `CaptureFormat`s, and what to do with a size libcamera adjusted.
public enum LibCameraFormats {
    /// DRM fourcc → V4L2 pixel format (both are four characters, but the RGB orders differ: DRM names the
    /// components of a little-endian word from its top, V4L2 names the bytes in memory).
    private static let drmToV4L2: [(drm: String, v4l2: PixelFormat)] = [
        ("YUYV", .yuyv), ("UYVY", .uyvy), ("YVYU", .yvyu), ("VYUY", .vyuy),
        ("NV12", .nv12), ("NV21", .nv21), ("NV16", .nv16), ("NV61", .nv61), ("NV24", .nv24), ("NV42", .nv42),
        ("YU12", .i420), ("YV12", .yv12), ("YU16", .yuv422p),
        // RGB888 is B,G,R in memory (V4L2 BGR3); BGR888 is R,G,B (V4L2 RGB3).
        ("RG24", .bgr24), ("BG24", .rgb24),
        // XRGB8888: B,G,R,X in memory (V4L2 XR24); XBGR8888: R,G,B,X (V4L2 XB24); and their alpha forms.
        ("XR24", .xbgr32), ("AR24", .abgr32), ("XB24", .rgbx32), ("AB24", .rgba32),
        // BGRX8888: X,R,G,B in memory (V4L2 BX24), BGRA8888 likewise (V4L2 BA24).
        ("BX24", .xrgb32), ("BA24", .argb32),
        ("RG16", .rgb565), ("R8  ", .grey), ("MJPG", .mjpeg),
    ]

    /// The four characters as a fourcc (`a | b << 8 | c << 16 | d << 24`, as DRM and V4L2 both write them).
    static func code(_ s: String) -> UInt32 {
        s.utf8.prefix(4).enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
    }

    /// The V4L2 pixel format of a DRM fourcc (with its modifier: only linear, 0, layouts are mapped); nil for
    /// formats this package has no layout for (Bayer and packed CSI-2 raw formats among them).
    public static func pixelFormat(drmFourcc: UInt32, modifier: UInt64 = 0) -> PixelFormat? {
        guard modifier == 0 else { return nil }
        return drmToV4L2.first { code($0.drm) == drmFourcc }?.v4l2
    }

    /// The DRM fourcc of a V4L2 pixel format; nil when libcamera has none for it.
    public static func drmFourcc(of pixelFormat: PixelFormat) -> UInt32? {
        drmToV4L2.first { $0.v4l2 == pixelFormat }.map { code($0.drm) }
    }

    /// A stream format entry as formats: each listed size on its own, else the range; nil entries (formats
    /// without a mapping, sizes out of range) are left out.
    static func captureFormats(_ f: lcs_format, intervals: FrameIntervals?) -> [CaptureFormat] {
        guard let pf = pixelFormat(drmFourcc: f.drm_fourcc, modifier: f.modifier) else { return [] }
        var out: [CaptureFormat] = []
        if let widths = f.widths, let heights = f.heights, f.n_sizes > 0 {
            for i in 0..<min(f.n_sizes, 256) {
                let size = FrameSize(width: Int(widths[i]), height: Int(heights[i]))
                if CaptureLimits.problem(with: size) == nil {
                    out.append(CaptureFormat(pixelFormat: pf, size: .discrete(size), intervals: intervals))
                }
            }
            return out
        }
        let lo = FrameSize(width: max(Int(f.min_width), 1), height: max(Int(f.min_height), 1))
        let hi = FrameSize(width: min(Int(f.max_width), CaptureLimits.maxDimension), height: min(Int(f.max_height), CaptureLimits.maxDimension))
        guard CaptureLimits.problem(with: lo) == nil, hi.width >= lo.width, hi.height >= lo.height else { return [] }
        let step = FrameSize(width: max(Int(f.step_width), 1), height: max(Int(f.step_height), 1))
        let size: FrameSizeRange =
            lo == hi ? .discrete(lo) : step.width == 1 && step.height == 1 ? .continuous(min: lo, max: hi) : .stepwise(min: lo, max: hi, step: step)
        return [CaptureFormat(pixelFormat: pf, size: size, intervals: intervals)]
    }

    /// FrameDurationLimits (microseconds per frame) as frame intervals; nil without them (any rate is assumed).
    static func intervals(minUs: Int64, maxUs: Int64) -> FrameIntervals? {
        // At most an hour per frame and at least a microsecond: the interval fractions stay small.
        guard minUs > 0, maxUs >= minUs, maxUs <= 3_600_000_000,
            let shortest = Fraction(exactly: minUs, 1_000_000), let longest = Fraction(exactly: maxUs, 1_000_000)
        else { return nil }
        return shortest == longest ? .discrete([shortest]) : .continuous(min: shortest, max: longest)
    }

    /// What to do when libcamera adjusts the requested size (vimc under 0.0.3 makes 640x480 636x480).
    public enum SizeAdjustment: String, Sendable, CaseIterable {
        /// Deliver the size libcamera applied (``LibCameraStream/applied`` reports it): every pixel the camera
        /// makes, none invented. The default.
        case accept
        /// Deliver exactly the requested size: libcamera is asked for the smallest size it makes that covers the
        /// request, and frames are cropped to the request around their centre. Fails with `.unsupportedFormat`
        /// when libcamera makes no such size.
        case crop
    }

    /// Where a frame of `adjusted` size is cropped to `requested` (centred, on even pixels so that subsampled
    /// chroma stays aligned); nil when `adjusted` does not cover `requested`. Zero when they are equal.
    public static func cropOrigin(requested: FrameSize, adjusted: FrameSize) -> (x: Int, y: Int)? {
        guard adjusted.width >= requested.width, adjusted.height >= requested.height else { return nil }
        return ((adjusted.width - requested.width) / 2 & ~1, (adjusted.height - requested.height) / 2 & ~1)
    }

    /// The sizes to ask libcamera for, in turn, until one it adjusts to covers `requested`: the request, then
    /// grown by what libcamera took off (at least 2 pixels), step by step.
    public static func coveringCandidates(requested: FrameSize, firstAdjusted: FrameSize, attempts: Int = 6) -> [FrameSize] {
        let dw = requested.width > firstAdjusted.width ? max(requested.width - firstAdjusted.width, 2) : 0
        let dh = requested.height > firstAdjusted.height ? max(requested.height - firstAdjusted.height, 2) : 0
        guard dw > 0 || dh > 0 else { return [] }
        return (1...max(attempts, 1)).compactMap { k in
            let s = FrameSize(width: requested.width + dw * k, height: requested.height + dh * k)
            return CaptureLimits.problem(with: s) == nil ? s : nil
        }
    }
}
