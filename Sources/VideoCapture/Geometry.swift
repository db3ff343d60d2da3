/// Width × height in pixels.
public struct FrameSize: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) { self.width = width; self.height = height }
    public var description: String { "\(width)x\(height)" }

    /// Parses `1280x720` (also `1280X720`); nil unless both numbers are positive.
    public init?(parsing text: some StringProtocol) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        self.init(width: w, height: h)
    }
}

/// An exact rational number, used for frame intervals (seconds) and frame rates (frames per second),
/// as V4L2 does with `struct v4l2_fract`.
public struct Fraction: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let numerator: Int64
    public let denominator: Int64

    public init(_ numerator: Int64, _ denominator: Int64 = 1) {
        precondition(denominator != 0, "Fraction with a zero denominator")
        var n = numerator, d = denominator
        if d < 0 { n = -n; d = -d }
        let g = Fraction.gcd(Swift.abs(n), d)
        self.numerator = g > 1 ? n / g : n
        self.denominator = g > 1 ? d / g : d
    }

    /// The nearest fraction with a denominator of at most 1000 (`12.5` → 25/2, `29.97` → 2997/100).
    public init(approximating value: Double) {
        self.init(Int64((value * 1000).rounded()), 1000)
    }

    static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var a = a, b = b
        while b != 0 { (a, b) = (b, a % b) }
        return Swift.max(a, 1)
    }

    public var doubleValue: Double { Double(numerator) / Double(denominator) }
    public var reciprocal: Fraction { Fraction(denominator, numerator) }
    public var isPositive: Bool { numerator > 0 }

    public static func < (a: Fraction, b: Fraction) -> Bool {
        a.numerator.multipliedFullWidth(by: b.denominator) < b.numerator.multipliedFullWidth(by: a.denominator)
    }
    public static func + (a: Fraction, b: Fraction) -> Fraction {
        Fraction(a.numerator * b.denominator + b.numerator * a.denominator, a.denominator * b.denominator)
    }
    public static func - (a: Fraction, b: Fraction) -> Fraction {
        Fraction(a.numerator * b.denominator - b.numerator * a.denominator, a.denominator * b.denominator)
    }
    public static func * (a: Fraction, k: Int64) -> Fraction { Fraction(a.numerator * k, a.denominator) }
    /// How many whole `b`s fit in `a` (floor), for non-negative values.
    public static func wholeSteps(_ a: Fraction, _ b: Fraction) -> Int64 {
        (a.numerator * b.denominator) / (b.numerator * a.denominator)
    }

    /// `30`, `12.5`, `29.97`: the shortest decimal that round-trips to three decimals (JSON friendly).
    public var description: String {
        if denominator == 1 { return String(numerator) }
        var s = String(format3(doubleValue))
        while s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }
}

/// `v` with exactly three decimals (`0.033`, `30.000`), as v4l2-ctl prints intervals and rates.
package func format3(_ v: Double) -> String {
    let scaled = Int64((v * 1000).rounded())
    let whole = scaled / 1000, frac = Swift.abs(scaled % 1000)
    let f = String(frac)
    return "\(scaled < 0 && whole == 0 ? "-" : "")\(whole).\(String(repeating: "0", count: 3 - f.count))\(f)"
}

/// The sizes one format entry offers (V4L2 `VIDIOC_ENUM_FRAMESIZES`).
public enum FrameSizeRange: Hashable, Sendable, CustomStringConvertible {
    case discrete(FrameSize)
    case stepwise(min: FrameSize, max: FrameSize, step: FrameSize)
    case continuous(min: FrameSize, max: FrameSize)

    /// The size this range offers for a target: the target clamped into the range, snapped to the step grid
    /// (to the nearest grid point; halfway goes to the smaller one).
    public func closest(to target: FrameSize) -> FrameSize {
        switch self {
        case .discrete(let s): return s
        case .continuous(let lo, let hi):
            return FrameSize(width: Swift.min(Swift.max(target.width, lo.width), hi.width),
                             height: Swift.min(Swift.max(target.height, lo.height), hi.height))
        case .stepwise(let lo, let hi, let step):
            func snap(_ v: Int, _ lo: Int, _ hi: Int, _ step: Int) -> Int {
                let c = Swift.min(Swift.max(v, lo), hi)
                guard step > 1 else { return c }
                let k = (c - lo) / step
                let down = lo + k * step, up = down + step
                return (up <= hi && up - c < c - down) ? up : down
            }
            return FrameSize(width: snap(target.width, lo.width, hi.width, step.width),
                             height: snap(target.height, lo.height, hi.height, step.height))
        }
    }

    public func contains(_ s: FrameSize) -> Bool {
        switch self {
        case .discrete(let d): return d == s
        case .continuous(let lo, let hi):
            return (lo.width...hi.width).contains(s.width) && (lo.height...hi.height).contains(s.height)
        case .stepwise(let lo, let hi, let st):
            return (lo.width...hi.width).contains(s.width) && (lo.height...hi.height).contains(s.height)
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
    case discrete([Fraction])
    case stepwise(min: Fraction, max: Fraction, step: Fraction)
    case continuous(min: Fraction, max: Fraction)

    /// Every rate offered, for display: discrete rates, or the (min, max) of a range.
    public var rateBounds: (min: Fraction, max: Fraction)? {
        switch self {
        case .discrete(let list):
            guard let lo = list.max(), let hi = list.min() else { return nil }
            return (lo.reciprocal, hi.reciprocal)
        case .stepwise(let a, let b, _), .continuous(let a, let b):
            return (b.reciprocal, a.reciprocal)
        }
    }

    /// Negotiation rule 3 for one size: the highest rate ≤ `limit`; if every rate is above it, the lowest.
    public func bestRate(limit: Fraction) -> Fraction? {
        switch self {
        case .discrete(let intervals):
            let rates = intervals.filter(\.isPositive).map(\.reciprocal)
            if let best = rates.filter({ $0 <= limit }).max() { return best }
            return rates.min()
        case .continuous(let lo, let hi):
            // Any interval in [lo, hi]: the rate is the limit clamped into [1/hi, 1/lo].
            let maxRate = lo.reciprocal, minRate = hi.reciprocal
            if maxRate <= limit { return maxRate }
            if minRate > limit { return minRate }
            return limit
        case .stepwise(let lo, let hi, let step):
            let target = limit.reciprocal   // the smallest interval within the limit
            if lo >= target { return lo.reciprocal }
            let steps = Fraction.wholeSteps(hi - lo, step)
            let last = lo + step * steps
            if last < target { return last.reciprocal }  // every rate above the limit: the lowest
            var k = Fraction.wholeSteps(target - lo, step)
            if lo + step * k < target { k += 1 }
            return (lo + step * k).reciprocal
        }
    }
}

/// The orientation of a frame's pixels relative to upright, as WebRTC's `RTCVideoRotation`.
public enum VideoRotation: Int, Sendable, CaseIterable, Codable, CustomStringConvertible {
    case rotation0 = 0, rotation90 = 90, rotation180 = 180, rotation270 = 270
    public init?(degrees: Int) { self.init(rawValue: ((degrees % 360) + 360) % 360) }
    public var degrees: Int { rawValue }
    public var swapsDimensions: Bool { self == .rotation90 || self == .rotation270 }
    public var description: String { "\(rawValue)°" }
}
