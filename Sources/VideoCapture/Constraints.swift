import Foundation

/// Constraints as a browser's `getUserMedia` states them (W3C Media Capture and Streams: `MediaTrackConstraints`,
/// "SelectSettings" and the fitness distance), for negotiation: `width`, `height`, `aspectRatio` and `frameRate`
/// with `min`/`max`/`exact`/`ideal`, ordered pixel-format preferences, `resizeMode` (`none`, or `crop-and-scale`
/// by this package's scaler) and `advanced` sets. Parsed from the JSON a web app would pass
/// (`{"width": {"ideal": 1280}, "frameRate": {"min": 24, "ideal": 30}}`; a bare number is an ideal).
public struct VideoConstraints: Sendable, Equatable {
    /// One numeric constraint: required bounds (`min`, `max`, `exact`) and a wish (`ideal`).
    public struct Range: Sendable, Equatable {
        /// The required lowest value.
        public var min: Double?
        /// The required highest value.
        public var max: Double?
        /// The required value.
        public var exact: Double?
        /// The value wished for: modes nearer to it are fitter.
        public var ideal: Double?
        /// No constraint.
        public init(min: Double? = nil, max: Double? = nil, exact: Double? = nil, ideal: Double? = nil) {
            (self.min, self.max, self.exact, self.ideal) = (min, max, exact, ideal)
        }
        /// True when `v` meets the required bounds (exact within 1e-6 relative, as rates like 30000/1001 need).
        public func admits(_ v: Double) -> Bool {
            if let e = exact, abs(v - e) > Swift.max(1e-6, abs(e) * 1e-6) { return false }
            if let m = min, v < m - 1e-9 { return false }
            if let m = max, v > m + 1e-9 { return false }
            return true
        }
        /// The W3C fitness distance of `v` to `ideal`: 0 without one, else |v − ideal| / max(|v|, |ideal|).
        public func distance(_ v: Double) -> Double {
            guard let i = ideal, v != i else { return 0 }
            return abs(v - i) / Swift.max(abs(v), abs(i))
        }
        /// The value a mode should come closest to: `exact`, else `ideal`, else `max` or `min`.
        var wanted: Double? { exact ?? ideal ?? max ?? min }
        var isEmpty: Bool { min == nil && max == nil && exact == nil && ideal == nil }
    }
    /// How a mode may reach the size asked for: the camera's own sizes only, or any smaller size made by cropping and
    /// scaling one of them (this package's scaler, once per frame).
    public enum ResizeMode: String, Sendable, Equatable {
        /// The camera's sizes as they are.
        case none
        /// A smaller picture cropped and scaled from a camera size (the output size is the constraints').
        case cropAndScale = "crop-and-scale"
    }
    /// The picture's width in pixels (after `crop-and-scale`, the output's).
    public var width = Range()
    /// The picture's height in pixels.
    public var height = Range()
    /// Width ÷ height.
    public var aspectRatio = Range()
    /// Frames per second.
    public var frameRate = Range()
    /// Pixel formats in order of preference (a required set when `pixelFormatsRequired`).
    public var pixelFormats: [PixelFormat] = []
    /// True when only `pixelFormats` may be chosen (`{"exact": […]}`).
    public var pixelFormatsRequired = false
    /// Whether a smaller size may be cropped and scaled from a camera size (`none` by default).
    public var resizeMode = ResizeMode.none
    /// Further sets, tried in order, each kept only when some mode meets it (W3C `advanced`).
    public var advanced: [VideoConstraints] = []

    /// No constraint: every mode is as fit as every other (the package's rule then decides).
    public init() {}

    /// Parses the JSON of `MediaTrackConstraints` for video. A refusal names the member and what was wrong:
    /// `invalidArgument`, "constraints: width.min must be a number, found \"big\"".
    public init(json text: String) throws(CaptureError) {
        guard text.utf8.count <= 64 * 1024 else { throw Self.refuse("the JSON is \(text.utf8.count) bytes; at most 65536") }
        let root: Any
        do { root = try JSONSerialization.jsonObject(with: Data(text.utf8)) } catch {
            throw Self.refuse("not JSON: \(String(describing: error).prefix(120))")
        }
        guard let object = root as? [String: Any] else { throw Self.refuse("expected a JSON object such as {\"width\": {\"ideal\": 1280}}") }
        try self.init(object: object, advanced: true)
    }

    private init(object: [String: Any], advanced allowAdvanced: Bool) throws(CaptureError) {
        let known: Set<String> = ["width", "height", "aspectRatio", "frameRate", "pixelFormat", "resizeMode", "advanced"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw Self.refuse("unknown member \"\(unknown.prefix(40))\" (known: \(known.sorted().joined(separator: ", ")))")
        }
        // In an advanced set a bare value is exact (W3C); at the top, an ideal.
        width = try Self.range(object["width"], "width", bareIsExact: !allowAdvanced, limit: Double(CaptureLimits.maxDimension))
        height = try Self.range(object["height"], "height", bareIsExact: !allowAdvanced, limit: Double(CaptureLimits.maxDimension))
        aspectRatio = try Self.range(object["aspectRatio"], "aspectRatio", bareIsExact: !allowAdvanced, limit: 1000)
        frameRate = try Self.range(object["frameRate"], "frameRate", bareIsExact: !allowAdvanced, limit: 1000)
        if let p = object["pixelFormat"] {
            (pixelFormats, pixelFormatsRequired) = try Self.formats(p)
        }
        if let r = object["resizeMode"] {
            guard let s = r as? String, let mode = ResizeMode(rawValue: s) else {
                throw Self.refuse("resizeMode must be \"none\" or \"crop-and-scale\", found \(String(describing: r).prefix(40))")
            }
            resizeMode = mode
        }
        if let a = object["advanced"] {
            guard allowAdvanced, let sets = a as? [Any], sets.count <= 32 else {
                throw Self.refuse("advanced must be an array of at most 32 constraint sets (and only at the top)")
            }
            for set in sets {
                guard let o = set as? [String: Any] else { throw Self.refuse("each advanced set must be an object") }
                advanced.append(try VideoConstraints(object: o, advanced: false))
            }
        }
    }

    private static func refuse(_ why: String) -> CaptureError { CaptureError(.invalidArgument, "constraints: \(why)") }

    private static func number(_ v: Any, _ what: String, limit: Double) throws(CaptureError) -> Double {
        guard let n = v as? NSNumber, String(cString: n.objCType) != "c", n.doubleValue.isFinite else { // "c": a JSON true or false
            throw refuse("\(what) must be a number, found \(String(describing: v).prefix(40))")
        }
        guard n.doubleValue >= 0 && n.doubleValue <= limit else {
            throw refuse("\(what) must be 0...\(Int(limit)), found \(n.doubleValue)")
        }
        return n.doubleValue
    }

    private static func range(_ v: Any?, _ name: String, bareIsExact: Bool, limit: Double) throws(CaptureError) -> Range {
        guard let v else { return Range() }
        if let o = v as? [String: Any] {
            var r = Range()
            for (key, value) in o {
                let x = try number(value, "\(name).\(key)", limit: limit)
                switch key {
                case "min": r.min = x
                case "max": r.max = x
                case "exact": r.exact = x
                case "ideal": r.ideal = x
                default: throw refuse("\(name) has an unknown member \"\(key.prefix(20))\" (min, max, exact, ideal)")
                }
            }
            if let a = r.min, let b = r.max, a > b { throw refuse("\(name).min \(a) is above \(name).max \(b)") }
            return r
        }
        let x = try number(v, name, limit: limit)
        return bareIsExact ? Range(exact: x) : Range(ideal: x)
    }

    private static func formats(_ v: Any) throws(CaptureError) -> ([PixelFormat], Bool) {
        func list(_ x: Any) throws(CaptureError) -> [PixelFormat] {
            let items = (x as? [Any]) ?? [x]
            var out: [PixelFormat] = []
            for item in items.prefix(32) {
                guard let s = item as? String, let f = PixelFormat(fourcc: s) else {
                    throw refuse("pixelFormat must be FourCCs such as \"MJPG\" or [\"NV12\", \"YUYV\"], found \(String(describing: item).prefix(40))")
                }
                out.append(f)
            }
            return out
        }
        if let o = v as? [String: Any] {
            if let e = o["exact"] { return (try list(e), true) }
            if let i = o["ideal"] { return (try list(i), false) }
            throw refuse("pixelFormat takes exact or ideal")
        }
        return (try list(v), false)
    }

    /// Nil when `mode` (its size as output, its rate) meets every required bound, else the first constraint it
    /// fails ("width", "frameRate", …).
    func failed(width w: Int, height h: Int, fps: Double, pixelFormat: PixelFormat) -> String? {
        if !width.admits(Double(w)) { return "width" }
        if !height.admits(Double(h)) { return "height" }
        if h > 0, !aspectRatio.admits(Double(w) / Double(h)) { return "aspectRatio" }
        if !frameRate.admits(fps) { return "frameRate" }
        if pixelFormatsRequired && !pixelFormats.contains(pixelFormat) { return "pixelFormat" }
        return nil
    }

    /// The W3C fitness distance of a mode: the sum over the ideals (a preferred pixel format's rank counts as a
    /// small distance).
    func fitness(width w: Int, height h: Int, fps: Double, pixelFormat: PixelFormat) -> Double {
        var d = width.distance(Double(w)) + height.distance(Double(h)) + frameRate.distance(fps)
        if h > 0 { d += aspectRatio.distance(Double(w) / Double(h)) }
        if !pixelFormats.isEmpty { d += pixelFormats.firstIndex(of: pixelFormat).map { Double($0) * 0.001 } ?? 0.5 }
        return d
    }

    /// The output size the constraints ask of a camera size under `crop-and-scale` (nil: the camera size as it
    /// is): `exact`, else `ideal`, else `max` of width and height, each at most the camera's, the missing one from
    /// the asked aspect ratio or the camera's; even (I420).
    func scaledSize(from native: FrameSize) -> FrameSize? {
        guard resizeMode == .cropAndScale, native.width > 0, native.height > 0 else { return nil }
        let ratio = aspectRatio.wanted ?? Double(native.width) / Double(native.height)
        var w = width.wanted.map { Swift.min($0, Double(native.width)) }
        var h = height.wanted.map { Swift.min($0, Double(native.height)) }
        if w == nil, let h0 = h { w = Swift.min(h0 * ratio, Double(native.width)) }
        if h == nil, let w0 = w { h = Swift.min(w0 / ratio, Double(native.height)) }
        guard let fw = w, let fh = h, fw >= 2, fh >= 2 else { return nil }
        let size = FrameSize(width: Int(fw) & ~1, height: Int(fh) & ~1)
        return size == native ? nil : size
    }
}

/// A mode chosen under constraints: what to ask the camera for, and the size to deliver (cropped and scaled) when
/// the constraints' `resizeMode` is `crop-and-scale` and they asked for less than the camera's size.
public struct ConstrainedSelection: Sendable, Hashable, CustomStringConvertible {
    /// The camera mode.
    public var selection: FormatSelection
    /// The picture size delivered after cropping and scaling; nil: the camera's.
    public var outputSize: FrameSize?
    /// The fitness distance (0: every ideal met).
    public var fitness: Double
    /// `MJPG 1280x720 @ 30 fps`, with `→ 640x360 (crop-and-scale)` when scaled.
    public var description: String { "\(selection)" + (outputSize.map { " → \($0) (crop-and-scale)" } ?? "") }
}

/// Why no mode of a camera meets the constraints: the constraint that no mode meets (`OverconstrainedError`'s
/// `constraint`), with the camera's nearest values.
public struct OverconstrainedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The constraint no mode can meet: "width", "height", "aspectRatio", "frameRate" or "pixelFormat".
    public var constraint: String
    /// A sentence naming it and what the camera has.
    public var message: String
    /// The message.
    public var description: String { message }
}

extension FormatSelector {
    /// W3C SelectSettings over a device's modes: every (format, size, rate) the device offers (ranges at the
    /// constraints' values and at their ends), with `crop-and-scale` also each smaller size cut from them; the modes
    /// that meet every required bound; then each `advanced` set that some of them meet; then the smallest fitness
    /// distance; ties go to this package's rule (`select`: closest size, highest rate within `fpsLimit`, cheapest
    /// conversion, first listed), so that constraints without a frame rate get the usual 30 fps. Throws
    /// `OverconstrainedError` naming the constraint that no mode meets.
    public static func select(from formats: [CaptureFormat], constraints c: VideoConstraints, fpsLimit: Fraction = 30) throws(OverconstrainedError)
        -> ConstrainedSelection
    {
        var modes: [ConstrainedSelection] = []
        let target = FrameSize(width: Int(c.width.wanted ?? 1280), height: Int(c.height.wanted ?? 720))
        for f in formats where f.pixelFormat.isConvertibleToI420 || (f.pixelFormat == .h264 && c.pixelFormats.contains(.h264)) {
            var sizes: [FrameSize] = [f.size.closest(to: target)]
            if case .stepwise(let lo, let hi, _) = f.size { sizes += [lo, hi] }
            if case .continuous(let lo, let hi) = f.size { sizes += [lo, hi] }
            for size in Set(sizes) {
                // (crop-and-scale) the mode scaled to what the constraints ask, and the mode as the camera gives it.
                let outputs: [FrameSize?] = (c.scaledSize(from: size).map { $0 == size ? [] : [$0] } ?? []) + [nil]
                var rates: Set<Fraction> = []
                switch f.intervals {
                case .discrete(let list)?: rates = Set(list.filter(\.isPositive).map(\.reciprocal))
                case let i?:
                    for v in [c.frameRate.exact, c.frameRate.ideal, c.frameRate.max, c.frameRate.min, fpsLimit.doubleValue].compactMap({ $0 }) {
                        if let limit = Fraction(approximating: Swift.max(v, 0.001)), let r = i.bestRate(limit: limit) { rates.insert(r) }
                    }
                    if let b = i.rateBounds { rates.formUnion([b.min, b.max]) }
                case nil: rates = [Fraction(approximating: c.frameRate.wanted ?? 30) ?? 30]
                }
                for fps in rates {
                    let sel = FormatSelection(format: f, size: size, fps: fps)
                    for scaled in outputs {
                        let o = scaled ?? size
                        let fitness = c.fitness(width: o.width, height: o.height, fps: fps.doubleValue, pixelFormat: f.pixelFormat)
                        modes.append(ConstrainedSelection(selection: sel, outputSize: scaled, fitness: fitness))
                    }
                }
            }
        }
        func output(_ m: ConstrainedSelection) -> FrameSize { m.outputSize ?? m.selection.size }
        func meets(_ set: VideoConstraints, _ m: ConstrainedSelection) -> Bool {
            set.failed(width: output(m).width, height: output(m).height, fps: m.selection.fps.doubleValue, pixelFormat: m.selection.pixelFormat)
                == nil
        }
        var kept = modes.filter { meets(c, $0) }
        guard !kept.isEmpty else { throw overconstrained(c, modes) }
        for set in c.advanced {
            let narrower = kept.filter { meets(set, $0) }
            if !narrower.isEmpty { kept = narrower }
        }
        let best = kept.map(\.fitness).min()!
        let fittest = kept.filter { $0.fitness <= best + 1e-12 }
        // Ties: the package's rule over the tied modes' entries (their own sizes and rates), then the first listed.
        let entries = fittest.map { FormatSelection(format: $0.selection.format, size: $0.selection.size, fps: $0.selection.fps) }
        let ruled = select(
            from: entries.map { CaptureFormat(pixelFormat: $0.pixelFormat, size: .discrete($0.size), intervals: .discrete([$0.fps.reciprocal])) },
            target: target, fpsLimit: fpsLimit)
        return fittest.first { m in
            ruled.map { m.selection.pixelFormat == $0.pixelFormat && m.selection.size == $0.size && m.selection.fps == $0.fps } ?? false
        }
            ?? fittest[0]
    }

    /// The constraint no mode meets on its own (else the first of the combination), with what the camera has.
    private static func overconstrained(_ c: VideoConstraints, _ modes: [ConstrainedSelection]) -> OverconstrainedError {
        let names = ["width", "height", "aspectRatio", "frameRate", "pixelFormat"]
        func alone(_ name: String) -> Bool {
            !modes.contains { m in
                let o = m.outputSize ?? m.selection.size
                return c.failed(width: o.width, height: o.height, fps: m.selection.fps.doubleValue, pixelFormat: m.selection.pixelFormat) != name
            }
        }
        let widths = modes.map { ($0.outputSize ?? $0.selection.size).width }, rates = modes.map(\.selection.fps.doubleValue)
        if modes.isEmpty {
            return OverconstrainedError(constraint: "pixelFormat", message: "no mode of the camera can be converted or passed through")
        }
        let name =
            names.first(where: alone) ?? names.first { n in
                modes.contains { m in
                    let o = m.outputSize ?? m.selection.size
                    return c.failed(width: o.width, height: o.height, fps: m.selection.fps.doubleValue, pixelFormat: m.selection.pixelFormat) == n
                }
            } ?? "width"
        let has: String
        switch name {
        case "width": has = "widths \(widths.min()!)...\(widths.max()!)"
        case "frameRate": has = "rates \(fmtRate(rates.min()!))...\(fmtRate(rates.max()!)) fps"
        case "pixelFormat": has = "formats \(Set(modes.map(\.selection.pixelFormat.fourcc)).sorted().joined(separator: ", "))"
        default: has = "sizes \(Set(modes.map { "\($0.outputSize ?? $0.selection.size)" }).sorted().prefix(8).joined(separator: ", "))"
        }
        return OverconstrainedError(constraint: name, message: "overconstrained: no mode of the camera meets \(name) (it has \(has))")
    }

    private static func fmtRate(_ r: Double) -> String { r == r.rounded() ? "\(Int(r))" : String(format: "%.3g", r) }
}
