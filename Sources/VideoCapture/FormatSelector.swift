/// The outcome of negotiation: which format entry, the exact size and the frame rate to ask for.
public struct FormatSelection: Hashable, Sendable, CustomStringConvertible {
    /// The format entry chosen, as the device listed it.
    public var format: CaptureFormat
    /// The exact size to ask for: the entry's size, or the target snapped into its range.
    public var size: FrameSize
    /// The frame rate to ask for, in frames per second.
    public var fps: Fraction
    /// The chosen entry's pixel format.
    public var pixelFormat: PixelFormat { format.pixelFormat }
    /// What its frames carry: pictures, or the camera's own access units.
    public var frameKind: FrameKind { pixelFormat.frameKind }
    public var description: String { "\(pixelFormat) \(size) @ \(fps) fps" }
}

/// Format negotiation, the rules ``CameraVideoCapturer/startCapture(device:targetSize:fpsLimit:)`` and `camcap select` apply:
/// 1. candidates: every (format, size) whose pixel format converts to I420; a stepwise/continuous range
///    contributes the target clamped and snapped into it;
/// 2. keep the smallest |w−W| + |h−H|;
/// 3. per candidate, the highest rate ≤ limit (else the lowest; no listed rates: the limit); rates within
///    the limit beat rates above it; highest within, lowest above;
/// 4. ties: the cheapest conversion (`PixelFormat.conversionCost`), then the first listed.
public enum FormatSelector {
    /// The frame-rate limit when none is given: 30 fps, as WebRTC's `kFramerateLimit`.
    public static let defaultFpsLimit = 30
    /// The highest frame-rate limit negotiation takes: 1000 fps.
    public static let maxFpsLimit = Fraction(1000)

    /// Nil when negotiation takes `fpsLimit` (above 0, at most ``maxFpsLimit``), else what is wrong with it:
    /// "must be above 0 and at most 1000, got 5000", to follow the name of the setting. `shown` is the value as
    /// the user wrote it (the text parsed), else the fraction. The one check of every negotiation entry point
    /// (`CameraVideoCapturer.selectFormat`, `startCapture`, `switchDevice`) and of the pipeline's text parser.
    public static func problem(withFpsLimit fpsLimit: Fraction, shown: String? = nil) -> String? {
        fpsLimit.isPositive && fpsLimit <= maxFpsLimit ? nil : "must be above 0 and at most \(maxFpsLimit), got \(shown ?? "\(fpsLimit)")"
    }

    /// Nil when negotiation can take every format of `pixelFormats` (one this package converts to I420, or H.264,
    /// a camera's own stream passed through), else what is wrong with the first that it cannot take, naming it:
    /// an unknown FourCC ("ZZZZ is not a pixel format this package knows"), or a format that cannot be converted
    /// ("BA81 (8-bit Bayer BGBG/GRGR) cannot be converted to I420"). The one check of the capturer's
    /// `selectFormat` and of the pipeline's text parser.
    public static func problem(withPixelFormats pixelFormats: [PixelFormat]) -> String? {
        let wanted = "ask for one converted to I420 (YUYV, NV12, MJPG, … — `PixelFormat.convertible`) or H264"
        for f in pixelFormats where !(f.isConvertibleToI420 || f == .h264) {
            guard f.isKnown else { return "\(f.fourcc) is not a pixel format this package knows: \(wanted)" }
            return "\(f.fourcc) (\(f.name)) cannot be converted to I420: \(wanted)"
        }
        return nil
    }

    /// Applies the rules to a device's formats; nil when none of them converts to I420. Never traps: a limit below
    /// 1 fps counts as 1, and a target beyond 32 bits a side is clamped.
    public static func select(from formats: [CaptureFormat], target: FrameSize, fpsLimit: Int = defaultFpsLimit) -> FormatSelection? {
        select(from: formats, target: target, fpsLimit: Fraction(Int64(Swift.max(1, Swift.min(fpsLimit, Int(UInt32.max))))))
    }

    /// The rules with a fractional limit (29.97 is `Fraction(30000, 1001)`: see `Fraction(rate:)`) and, when
    /// `pixelFormats` is not empty, only those pixel formats as candidates, preferred in their order where the
    /// rules tie (before the conversion cost). Nil when no candidate remains. A limit below 1/1000 fps counts as
    /// that; the capturer's `selectFormat` refuses nonsense before it gets here.
    public static func select(from formats: [CaptureFormat], target: FrameSize, fpsLimit: Fraction, pixelFormats: [PixelFormat] = [])
        -> FormatSelection?
    {
        // Out-of-range arguments are clamped, never trap: a limit below 1/1000 fps is that, above 2^32 fps is
        // 2^32, and a target beyond any size V4L2 can describe (32 bits) is that size.
        let floor = Fraction(1, 1000), ceiling = Fraction(Int64(UInt32.max))
        let limit = fpsLimit < floor ? floor : fpsLimit > ceiling ? ceiling : fpsLimit
        let bound = Int(UInt32.max)
        let target = FrameSize(width: Swift.min(Swift.max(target.width, 0), bound), height: Swift.min(Swift.max(target.height, 0), bound))
        var best: (selection: FormatSelection, distance: Int, within: Bool, cost: Int)?
        for format in formats {
            // H.264 from the camera is a candidate only when asked for (it is passed through, not converted).
            let passThrough = format.pixelFormat == .h264 && pixelFormats.contains(.h264)
            guard var cost = format.pixelFormat.conversionCost ?? (passThrough ? 0 : nil) else { continue }
            if !pixelFormats.isEmpty {
                // Only the formats asked for; their order ranks them before any conversion cost.
                guard let rank = pixelFormats.firstIndex(of: format.pixelFormat) else { continue }
                cost = rank * 1_000_000 + cost
            }
            let size = format.size.closest(to: target)
            let distance = gap(size.width, target.width).addingReportingOverflow(gap(size.height, target.height))
            guard !distance.overflow, distance.partialValue <= UInt(Int.max) else { continue }
            let fps = format.intervals?.bestRate(limit: limit) ?? limit
            let within = fps <= limit
            let candidate = (FormatSelection(format: format, size: size, fps: fps), Int(distance.partialValue), within, cost)
            guard let current = best else {
                best = candidate
                continue
            }
            if isBetter(candidate, than: current) { best = candidate }
        }
        // A camera that offers nothing convertible but H.264 (an encoder in front of a sensor): its own stream.
        if best == nil && pixelFormats.isEmpty && formats.contains(where: { $0.pixelFormat == .h264 }) {
            return select(from: formats, target: target, fpsLimit: fpsLimit, pixelFormats: [.h264])
        }
        return best?.selection
    }

    /// The modes to try, in order, when a device refuses to stream `selection` for want of bandwidth (`VIDIOC_STREAMON`
    /// fails with ENOSPC, as on a USB bus another camera shares): the same size as MJPEG (a compressed stream needs a
    /// fraction of the bus), then each lower rate the device lists at that size, the selected format's first, then
    /// MJPEG's. Never the mode itself, nor anything for a camera's own H.264 (its stream is not swapped for
    /// pictures); at most 16.
    public static func fallbacks(after selection: FormatSelection, from formats: [CaptureFormat]) -> [FormatSelection] {
        guard selection.pixelFormat != .h264 else { return [] }
        let entry = { (pf: PixelFormat) in formats.first { $0.pixelFormat == pf && $0.size.contains(selection.size) } }
        var out: [FormatSelection] = []
        func add(_ format: CaptureFormat, _ fps: Fraction) {
            let s = FormatSelection(format: format, size: selection.size, fps: fps)
            if s != selection && !out.contains(s) && out.count < 16 { out.append(s) }
        }
        let mjpeg = selection.pixelFormat == .mjpeg ? nil : entry(.mjpeg)
        if let mjpeg { add(mjpeg, mjpeg.intervals?.bestRate(limit: selection.fps) ?? selection.fps) }
        for format in [entry(selection.pixelFormat) ?? selection.format] + (mjpeg.map { [$0] } ?? []) {
            var current = selection.fps
            // Each next rate is the best just below the last one (a thousandth below it), until none is lower.
            while let below = justBelow(current), let next = format.intervals?.bestRate(limit: below), next < current {
                add(format, next)
                current = next
            }
        }
        return out
    }

    /// `rate` × 999/1000, nil when that overflows.
    private static func justBelow(_ rate: Fraction) -> Fraction? {
        let n = rate.numerator.multipliedReportingOverflow(by: 999), d = rate.denominator.multipliedReportingOverflow(by: 1000)
        return n.overflow || d.overflow ? nil : Fraction(exactly: n.partialValue, d.partialValue)
    }

    /// |a − b| without overflow (the true difference of two Ints always fits in a UInt).
    private static func gap(_ a: Int, _ b: Int) -> UInt { a >= b ? UInt(bitPattern: a &- b) : UInt(bitPattern: b &- a) }

    private static func isBetter(
        _ a: (selection: FormatSelection, distance: Int, within: Bool, cost: Int),
        than b: (selection: FormatSelection, distance: Int, within: Bool, cost: Int)
    ) -> Bool {
        if a.distance != b.distance { return a.distance < b.distance }
        if a.within != b.within { return a.within }
        if a.selection.fps != b.selection.fps {
            return a.within ? a.selection.fps > b.selection.fps : a.selection.fps < b.selection.fps
        }
        return a.cost < b.cost // equal cost: the first listed stays
    }
}
