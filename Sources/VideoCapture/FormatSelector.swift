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
        var best: Candidate?
        for format in formats {
            guard case .success(let candidate) = Self.candidate(format, target: target, limit: limit, pixelFormats: pixelFormats) else { continue }
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

    /// A format entry as negotiation weighs it: the mode it would give, its distance from the target, whether its
    /// rate is within the limit, and its cost (the pixel formats' rank first when they were asked for).
    typealias Candidate = (selection: FormatSelection, distance: Int, within: Bool, cost: Int)

    /// `format` as a candidate, or why it is none.
    private static func candidate(_ format: CaptureFormat, target: FrameSize, limit: Fraction, pixelFormats: [PixelFormat]) -> Result<
        Candidate, Refusal
    > {
        // H.264 from the camera is a candidate only when asked for (it is passed through, not converted).
        let passThrough = format.pixelFormat == .h264 && pixelFormats.contains(.h264)
        guard var cost = format.pixelFormat.conversionCost ?? (passThrough ? 0 : nil) else {
            return .failure(
                Refusal(
                    format.pixelFormat == .h264
                        ? "the camera's own H.264 is a candidate only when asked for (pixel formats: H264)"
                        : "\(format.pixelFormat) (\(format.pixelFormat.name)) cannot be converted to I420"))
        }
        if !pixelFormats.isEmpty {
            // Only the formats asked for; their order ranks them before any conversion cost.
            guard let rank = pixelFormats.firstIndex(of: format.pixelFormat) else {
                return .failure(Refusal("not among the pixel formats asked for (\(pixelFormats.map(\.fourcc).joined(separator: ", ")))"))
            }
            cost = rank * 1_000_000 + cost
        }
        let size = format.size.closest(to: target)
        let distance = gap(size.width, target.width).addingReportingOverflow(gap(size.height, target.height))
        guard !distance.overflow, distance.partialValue <= UInt(Int.max) else { return .failure(Refusal("its size is beyond any target")) }
        let fps = format.intervals?.bestRate(limit: limit) ?? limit
        return .success((FormatSelection(format: format, size: size, fps: fps), Int(distance.partialValue), fps <= limit, cost))
    }
    private struct Refusal: Error {
        let why: String
        init(_ why: String) { self.why = why }
    }

    /// Why each of a device's format entries was kept or rejected by `select(from:target:fpsLimit:pixelFormats:)`,
    /// in the device's order: the chosen one, and for every other the first rule it lost on against the chosen one
    /// ("farther from 1280x720: 640x480 is 880 off, the chosen 0"), or why it was no candidate at all ("BA81 (8-bit
    /// Bayer) cannot be converted to I420"). The same rules as `select`, applied by the same code.
    public static func explain(from formats: [CaptureFormat], target: FrameSize, fpsLimit: Fraction, pixelFormats: [PixelFormat] = [])
        -> [FormatVerdict]
    {
        let chosen = select(from: formats, target: target, fpsLimit: fpsLimit, pixelFormats: pixelFormats)
        let floor = Fraction(1, 1000), ceiling = Fraction(Int64(UInt32.max))
        let limit = fpsLimit < floor ? floor : fpsLimit > ceiling ? ceiling : fpsLimit
        let asked = chosen?.pixelFormat == .h264 && !pixelFormats.contains(.h264) ? [PixelFormat.h264] : pixelFormats
        let winner = chosen.flatMap { c in
            formats.lazy.compactMap { f -> Candidate? in
                guard case .success(let k) = Self.candidate(f, target: target, limit: limit, pixelFormats: asked), k.selection == c else {
                    return nil
                }
                return k
            }.first
        }
        var seenWinner = false
        return formats.map { f in
            switch Self.candidate(f, target: target, limit: limit, pixelFormats: asked) {
            case .failure(let r): return FormatVerdict(format: f, mode: nil, chosen: false, reason: r.why)
            case .success(let k):
                guard let w = winner else { return FormatVerdict(format: f, mode: k.selection, chosen: false, reason: "no candidate was chosen") }
                if k.selection == w.selection && !seenWinner {
                    seenWinner = true
                    return FormatVerdict(format: f, mode: k.selection, chosen: true, reason: "chosen")
                }
                return FormatVerdict(format: f, mode: k.selection, chosen: false, reason: Self.lost(k, to: w, target: target, limit: limit))
            }
        }
    }

    /// The first rule on which `a` loses to the chosen `w`, in words.
    private static func lost(_ a: Candidate, to w: Candidate, target: FrameSize, limit: Fraction) -> String {
        if a.distance != w.distance {
            return "farther from \(target): \(a.selection.size) is \(a.distance) off, the chosen \(w.selection.size) is \(w.distance) off"
        }
        if a.within != w.within { return "\(a.selection.fps) fps is above the limit of \(limit), the chosen \(w.selection.fps) fps is within it" }
        if a.selection.fps != w.selection.fps {
            return a.within
                ? "a lower rate within the limit: \(a.selection.fps) fps, the chosen \(w.selection.fps)"
                : "a higher rate above the limit: \(a.selection.fps) fps, the chosen \(w.selection.fps)"
        }
        if a.cost != w.cost {
            return a.cost >= 1_000_000 || w.cost >= 1_000_000
                ? "later in the pixel formats asked for than \(w.selection.pixelFormat)"
                : "a costlier conversion to I420 than \(w.selection.pixelFormat)"
        }
        return "an equal mode listed after the chosen one"
    }

    private static func isBetter(_ a: Candidate, than b: Candidate) -> Bool {
        if a.distance != b.distance { return a.distance < b.distance }
        if a.within != b.within { return a.within }
        if a.selection.fps != b.selection.fps {
            return a.within ? a.selection.fps > b.selection.fps : a.selection.fps < b.selection.fps
        }
        return a.cost < b.cost // equal cost: the first listed stays
    }
}

/// One format entry's fate in negotiation (`FormatSelector.explain`): the mode it would give, whether it was chosen,
/// and why or why not.
public struct FormatVerdict: Sendable, Hashable, CustomStringConvertible {
    /// The entry as the device lists it.
    public var format: CaptureFormat
    /// The size and rate it would stream at (nil when it was no candidate).
    public var mode: FormatSelection?
    /// True for the entry negotiation picked.
    public var chosen: Bool
    /// "chosen", the first rule it lost on against the chosen one, or why it was no candidate.
    public var reason: String
    /// `MJPG 1920x1080 @ 30 fps: farther from 1280x720: …`.
    public var description: String { "\(mode.map { "\($0)" } ?? "\(format.pixelFormat) \(format.size)"): \(reason)" }
}
