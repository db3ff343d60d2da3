/// Width × height in pixels.
public struct FrameSize: Hashable, Sendable, Codable, CustomStringConvertible {
    /// In pixels.
    public var width: Int
    /// In pixels.
    public var height: Int
    /// A size; nothing is checked here (``CaptureLimits/problem(with:)`` checks outside input).
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
    public var description: String { "\(width)x\(height)" }

    /// Parses `1280x720` (also `1280X720`); nil unless both numbers are positive.
    public init?(parsing text: some StringProtocol) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        self.init(width: w, height: h)
    }
}

/// The largest frames anything here accepts from outside input (fixture files, drivers' listings, the CLI):
/// V4L2 carries sizes as `__u32` and intervals as two `__u32`; H.264 level 6.2 tops out at 8192x4320
/// (139,264 macroblocks), and a frame must fit in memory a few times over. Values beyond these are refused
/// with an error where they are parsed, so no arithmetic downstream can overflow.
public enum CaptureLimits {
    /// Width and height: 1...16384 pixels.
    public static let maxDimension = 16384
    /// Pixels per frame: at most 64 Mi (8192x8192; 256 MiB as 32-bit RGB).
    public static let maxPixels = 1 << 26
    /// Frame rates 0.001...1,000,000 fps (intervals 1 µs...1000 s).
    public static let minRate = 0.001
    /// The highest frame rate accepted, in frames per second.
    public static let maxRate = 1_000_000.0
    /// Numerators and denominators of rates and intervals: as in `struct v4l2_fract`, at most 2³²−1.
    public static let maxFractionTerm = Int64(UInt32.max)

    /// Nil when `size` is within the limits, else what is wrong with it.
    public static func problem(with size: FrameSize) -> String? {
        guard size.width >= 1, size.height >= 1 else { return "size \(size) must be positive" }
        guard size.width <= maxDimension, size.height <= maxDimension else {
            return "size \(size) is too large: width and height are at most \(maxDimension)"
        }
        guard size.width * size.height <= maxPixels else {
            return "size \(size) is too large: at most \(maxPixels) pixels (8192x8192) per frame"
        }
        return nil
    }

    /// Nil when `rate` (frames per second) is within the limits and has terms a `v4l2_fract` holds.
    public static func problem(withRate rate: Fraction) -> String? {
        guard rate.numerator > 0 else { return "frame rate \(rate) must be positive" }
        guard rate.numerator <= maxFractionTerm, rate.denominator <= maxFractionTerm else {
            return "frame rate \(rate.numerator)/\(rate.denominator) has a term above \(maxFractionTerm)"
        }
        let v = rate.doubleValue
        guard v >= minRate, v <= maxRate else { return "frame rate \(rate) fps is out of range: \(minRate)...\(Int(maxRate)) fps" }
        return nil
    }
}

/// An exact rational number, used for frame intervals (seconds) and frame rates (frames per second),
/// as V4L2 does with `struct v4l2_fract`. Always reduced, the denominator always positive.
///
/// Arithmetic is checked: `adding`, `subtracting`, `multiplied(by:)` and `wholeSteps` return nil when the
/// result does not fit in 64 bits, never trap. Build fractions from outside input with `init?(exactly:_:)`,
/// which returns nil for a zero denominator instead of trapping.
public struct Fraction: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// The numerator, in lowest terms.
    public let numerator: Int64
    /// The denominator, in lowest terms; always positive.
    public let denominator: Int64

    /// `numerator/denominator` reduced; nil when the denominator is zero (or a term is `Int64.min`).
    public init?(exactly numerator: Int64, _ denominator: Int64 = 1) {
        self.init(wide: Int128(numerator), Int128(denominator))
    }

    /// A fraction from constants in code. A zero denominator is a programming error (it traps); use
    /// `init?(exactly:_:)` for values read from outside.
    public init(_ numerator: Int64, _ denominator: Int64 = 1) {
        guard let f = Fraction(exactly: numerator, denominator) else {
            preconditionFailure("Fraction \(numerator)/\(denominator): zero denominator or out of range")
        }
        self = f
    }

    /// Reduces a 128-bit quotient; nil for a zero denominator or a result that does not fit in 64 bits.
    init?(wide n: Int128, _ d: Int128) {
        guard d != 0 else { return nil }
        var n = n, d = d
        if d < 0 {
            n = -n
            d = -d
        }
        var a = n.magnitude, b = d.magnitude
        while b != 0 { (a, b) = (b, a % b) }
        let g = Int128(Swift.max(a, 1))
        n /= g
        d /= g
        guard let nn = Int64(exactly: n), let dd = Int64(exactly: d), nn != .min else { return nil }
        numerator = nn
        denominator = dd
    }

    /// The nearest fraction with a denominator of at most 1000 (`12.5` → 25/2, `29.97` → 2997/100); nil for
    /// values that are not finite or beyond ±9e15.
    public init?(approximating value: Double) {
        let scaled = (value * 1000).rounded()
        guard scaled.isFinite, Swift.abs(scaled) < 9e18, let n = Int64(exactly: scaled) else { return nil }
        self.init(exactly: n, 1000)
    }

    /// A frame rate as a person writes it: `30`, `12.5`, `30000/1001`, or a rounded decimal of a 1000/1001 rate
    /// (`29.97`, `59.94`, `23.976`, `119.88`), which means that rate exactly (30000/1001), as cameras list it. Nil
    /// for anything else (text, a zero denominator, more than 9 decimals, values beyond 2^40); the sign is kept,
    /// so a caller can refuse a rate ≤ 0 by name.
    public init?(rate text: String) {
        var t = Substring(text)
        while t.first == " " { t.removeFirst() }
        while t.last == " " { t.removeLast() }
        if let slash = t.firstIndex(of: "/") {
            guard let n = Int64(t[..<slash]), let d = Int64(t[t.index(after: slash)...]), Swift.abs(n) < 1 << 40, d > 0, d < 1 << 40 else {
                return nil
            }
            self.init(exactly: n, d)
            return
        }
        let parts = t.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let negative = t.hasPrefix("-")
        let whole = parts[0].hasPrefix("-") || parts[0].hasPrefix("+") ? parts[0].dropFirst() : parts[0]
        guard !whole.isEmpty || parts.count == 2, whole.allSatisfy(\.isASCII), whole.allSatisfy(\.isNumber), whole.count <= 12 else { return nil }
        let decimals = parts.count == 2 ? parts[1] : ""
        guard decimals.count <= 9, decimals.allSatisfy({ $0.isASCII && $0.isNumber }), !(whole.isEmpty && decimals.isEmpty) else { return nil }
        var scale: Int64 = 1
        for _ in 0..<decimals.count { scale *= 10 }
        guard let w = Int64(whole.isEmpty ? "0" : String(whole)), let f = Int64(decimals.isEmpty ? "0" : String(decimals)), w < 1 << 40 else {
            return nil
        }
        let magnitude = w * scale + f
        // 29.97 → 30000/1001: a decimal that is k·1000/1001 rounded to its own decimals means that rate.
        if decimals.count >= 2, magnitude > 0 {
            let k = (Int128(magnitude) * 1001 + Int128(scale) * 500) / (Int128(scale) * 1000) // nearest whole rate
            let ntsc = k * 1000 * Int128(scale), rounded = (ntsc * 2 + 1001) / (2 * 1001)
            if k > 0, rounded == Int128(magnitude), k * 1000 % 1001 != 0 {
                self.init(wide: (negative ? -1 : 1) * k * 1000, 1001)
                return
            }
        }
        self.init(exactly: negative ? -magnitude : magnitude, scale)
    }

    /// A whole number written in code (`config.fpsLimit = 30`).
    public init(integerLiteral value: Int64) { self.init(value, 1) }

    /// The value as a `Double` (for display and statistics, not for comparisons).
    public var doubleValue: Double { Double(numerator) / Double(denominator) }
    /// 1/x. Traps for zero, which no parser lets through (intervals and rates are checked to be positive).
    public var reciprocal: Fraction {
        guard let r = Fraction(exactly: denominator, numerator) else { preconditionFailure("reciprocal of zero") }
        return r
    }
    /// Whether the value is above zero.
    public var isPositive: Bool { numerator > 0 }

    public static func < (a: Fraction, b: Fraction) -> Bool {
        a.numerator.multipliedFullWidth(by: b.denominator) < b.numerator.multipliedFullWidth(by: a.denominator)
    }
    /// a + b, nil on overflow.
    public func adding(_ b: Fraction) -> Fraction? {
        Fraction(
            wide: Int128(numerator) * Int128(b.denominator) + Int128(b.numerator) * Int128(denominator),
            Int128(denominator) * Int128(b.denominator))
    }
    /// a − b, nil on overflow.
    public func subtracting(_ b: Fraction) -> Fraction? {
        Fraction(
            wide: Int128(numerator) * Int128(b.denominator) - Int128(b.numerator) * Int128(denominator),
            Int128(denominator) * Int128(b.denominator))
    }
    /// a × k, nil on overflow.
    public func multiplied(by k: Int64) -> Fraction? {
        Fraction(wide: Int128(numerator) * Int128(k), Int128(denominator))
    }
    /// How many whole `b`s fit in `a` (floor) for non-negative `a` and positive `b`; nil otherwise or on overflow.
    public static func wholeSteps(_ a: Fraction, _ b: Fraction) -> Int64? {
        guard a.numerator >= 0, b.numerator > 0 else { return nil }
        return Int64(exactly: (Int128(a.numerator) * Int128(b.denominator)) / (Int128(b.numerator) * Int128(a.denominator)))
    }

    /// `30`, `12.5`, `29.97`: the shortest decimal that round-trips to three decimals (JSON friendly).
    public var description: String {
        if denominator == 1 { return String(numerator) }
        var s = String(threeDecimals(doubleValue))
        guard s.contains(".") else { return s }
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }
}

/// `v` with exactly three decimals (`0.033`, `30.000`), as v4l2-ctl prints intervals and rates. Values
/// beyond ±9e15 (never a real rate or interval) print in exponent form rather than trap.
package func threeDecimals(_ v: Double) -> String {
    let r = (v * 1000).rounded()
    guard r.isFinite, Swift.abs(r) < 9e18, let scaled = Int64(exactly: r) else { return "\(v)" }
    let whole = scaled / 1000, frac = Swift.abs(scaled % 1000)
    let f = String(frac)
    return "\(scaled < 0 && whole == 0 ? "-" : "")\(whole).\(String(repeating: "0", count: 3 - f.count))\(f)"
}

/// The sizes one format entry offers (V4L2 `VIDIOC_ENUM_FRAMESIZES`).
public enum FrameSizeRange: Hashable, Sendable, CustomStringConvertible {
    /// One size.
    case discrete(FrameSize)
    /// Every size from `min` to `max` whose width and height are `min` plus a multiple of `step`.
    case stepwise(min: FrameSize, max: FrameSize, step: FrameSize)
    /// Every size from `min` to `max`.
    case continuous(min: FrameSize, max: FrameSize)

    /// The size this range offers for a target: the target clamped into the range, snapped to the step grid
    /// (to the nearest grid point; halfway goes to the smaller one).
    public func closest(to target: FrameSize) -> FrameSize {
        switch self {
        case .discrete(let s): return s
        case .continuous(let lo, let hi):
            return FrameSize(
                width: Swift.min(Swift.max(target.width, lo.width), hi.width),
                height: Swift.min(Swift.max(target.height, lo.height), hi.height))
        case .stepwise(let lo, let hi, let step):
            func snap(_ v: Int, _ lo: Int, _ hi: Int, _ step: Int) -> Int {
                guard lo <= hi else { return lo }
                let c = Swift.min(Swift.max(v, lo), hi)
                guard step > 1 else { return c }
                // No overflow for any values: down ≤ c ≤ hi, and "up" is only formed when it is ≤ hi.
                let down = c - (c - lo) % step
                guard hi - down >= step else { return down }
                return step - (c - down) < c - down ? down + step : down
            }
            return FrameSize(
                width: snap(target.width, lo.width, hi.width, step.width),
                height: snap(target.height, lo.height, hi.height, step.height))
        }
    }

    /// Whether the range offers exactly this size (on a stepwise range: on its grid).
    public func contains(_ s: FrameSize) -> Bool {
        switch self {
        case .discrete(let d): return d == s
        case .continuous(let lo, let hi):
            return lo.width <= s.width && s.width <= hi.width && lo.height <= s.height && s.height <= hi.height
        case .stepwise(let lo, let hi, let st):
            return lo.width <= s.width && s.width <= hi.width && lo.height <= s.height && s.height <= hi.height
                && (s.width - lo.width) % Swift.max(st.width, 1) == 0 && (s.height - lo.height) % Swift.max(st.height, 1) == 0
        }
    }

    public var description: String {
        switch self {
        case .discrete(let s): "Discrete \(s)"
        case .stepwise(let a, let b, let st): "Stepwise \(a) - \(b) with step \(st.width)/\(st.height)"
        case .continuous(let a, let b): "Continuous \(a) - \(b)"
        }
    }
}

/// The frame intervals offered for one size (V4L2 `VIDIOC_ENUM_FRAMEINTERVALS`); intervals in seconds.
public enum FrameIntervals: Hashable, Sendable {
    /// These intervals (a 30 fps rate is the interval 1/30).
    case discrete([Fraction])
    /// Every interval from `min` to `max` that is `min` plus a multiple of `step`.
    case stepwise(min: Fraction, max: Fraction, step: Fraction)
    /// Every interval from `min` to `max`.
    case continuous(min: Fraction, max: Fraction)

    /// Every rate offered, for display: discrete rates, or the (min, max) of a range.
    public var rateBounds: (min: Fraction, max: Fraction)? {
        switch self {
        case .discrete(let list):
            let positive = list.filter(\.isPositive)
            guard let lo = positive.max(), let hi = positive.min() else { return nil }
            return (lo.reciprocal, hi.reciprocal)
        case .stepwise(let a, let b, _), .continuous(let a, let b):
            guard a.isPositive, a <= b else { return nil }
            return (b.reciprocal, a.reciprocal)
        }
    }

    /// Negotiation rule 3 for one size: the highest rate ≤ `limit`; if every rate is above it, the lowest.
    /// Nil when nothing usable is offered (no positive interval, a range upside down, a limit ≤ 0).
    public func bestRate(limit: Fraction) -> Fraction? {
        guard limit.isPositive else { return nil }
        switch self {
        case .discrete(let intervals):
            let rates = intervals.filter(\.isPositive).map(\.reciprocal)
            if let best = rates.filter({ $0 <= limit }).max() { return best }
            return rates.min()
        case .continuous(let lo, let hi):
            return Self.continuousRate(lo, hi, limit)
        case .stepwise(let lo, let hi, let step):
            guard lo.isPositive, lo <= hi else { return nil }
            let target = limit.reciprocal // the smallest interval within the limit
            if lo >= target { return lo.reciprocal }
            // Checked arithmetic: a grid too fine to compute exactly is taken as a continuous range.
            guard step.isPositive, let span = hi.subtracting(lo), let steps = Fraction.wholeSteps(span, step),
                let lastOffset = step.multiplied(by: steps), let last = lo.adding(lastOffset)
            else {
                return Self.continuousRate(lo, hi, limit)
            }
            if last < target { return last.reciprocal } // every rate above the limit: the lowest
            guard let gap = target.subtracting(lo), var k = Fraction.wholeSteps(gap, step),
                var candidate = step.multiplied(by: k).flatMap(lo.adding)
            else { return Self.continuousRate(lo, hi, limit) }
            if candidate < target {
                k += 1
                guard let next = step.multiplied(by: k).flatMap(lo.adding) else { return Self.continuousRate(lo, hi, limit) }
                candidate = next
            }
            return candidate.reciprocal
        }
    }

    /// Any interval in [lo, hi]: the rate is the limit clamped into [1/hi, 1/lo].
    private static func continuousRate(_ lo: Fraction, _ hi: Fraction, _ limit: Fraction) -> Fraction? {
        guard lo.isPositive, lo <= hi else { return nil }
        let maxRate = lo.reciprocal, minRate = hi.reciprocal
        if maxRate <= limit { return maxRate }
        if minRate > limit { return minRate }
        return limit
    }
}

/// The orientation of a frame's pixels relative to upright, as WebRTC's `RTCVideoRotation`.
public enum VideoRotation: Int, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// Upright as captured.
    case rotation0 = 0
    /// To be turned 90° clockwise to be upright.
    case rotation90 = 90
    /// Upside down.
    case rotation180 = 180
    /// To be turned 270° clockwise (90° counter-clockwise) to be upright.
    case rotation270 = 270
    /// The rotation for any multiple of 90 degrees, negative or beyond 360 too (`-90` is `.rotation270`);
    /// nil for other angles.
    public init?(degrees: Int) { self.init(rawValue: ((degrees % 360) + 360) % 360) }
    /// Clockwise degrees: 0, 90, 180 or 270.
    public var degrees: Int { rawValue }
    /// True for 90 and 270: the upright picture's width is the frame's height.
    public var swapsDimensions: Bool { self == .rotation90 || self == .rotation270 }
    public var description: String { "\(rawValue)°" }
}

extension Fraction: JSONNumber {
    /// Its decimal form (`description`): a JSON number.
    package var jsonNumber: String { description }
}
