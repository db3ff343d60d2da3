import CPipeWire
import VideoCapture

/// PipeWire's formats in this package's terms: EnumFormat entries as `CaptureFormat`s, a `StreamRequest` as the
/// format to connect with, and the plane shapes a buffer is copied out by.
enum PipeWireFormats {
    /// An EnumFormat entry as a format; nil for one without a fourcc we know, or with sizes out of range.
    static func captureFormat(_ f: cpw_format) -> CaptureFormat? {
        guard f.fourcc != 0 else { return nil }
        let pf = PixelFormat(rawValue: f.fourcc)
        let lo = FrameSize(width: Int(f.width), height: Int(f.height))
        guard CaptureLimits.problem(with: lo) == nil else { return nil }
        let size: FrameSizeRange
        if f.size_kind == UInt32(CPW_SIZE_RANGE) {
            let hi = FrameSize(width: min(Int(f.max_width), CaptureLimits.maxDimension), height: min(Int(f.max_height), CaptureLimits.maxDimension))
            guard hi.width >= lo.width, hi.height >= lo.height else { return nil }
            let step = FrameSize(width: max(Int(f.step_width), 1), height: max(Int(f.step_height), 1))
            size = step.width == 1 && step.height == 1 ? .continuous(min: lo, max: hi) : .stepwise(min: lo, max: hi, step: step)
        } else {
            size = .discrete(lo)
        }
        return CaptureFormat(pixelFormat: pf, size: size, intervals: intervals(f))
    }

    /// The rates as frame intervals (seconds per frame, the inverse of a rate); nil when the entry gives none.
    static func intervals(_ f: cpw_format) -> FrameIntervals? {
        let count = min(Int(f.n_rates), Int(CPW_MAX_RATES))
        let rates: [(num: UInt32, den: UInt32)] = withUnsafeBytes(of: f.rate_num) { nums in
            withUnsafeBytes(of: f.rate_den) { dens in
                (0..<count).map { (nums.load(fromByteOffset: $0 * 4, as: UInt32.self), dens.load(fromByteOffset: $0 * 4, as: UInt32.self)) }
            }
        }
        switch Int(f.rate_kind) {
        case CPW_RATES_LIST:
            // A rate of n/d frames per second is an interval of d/n seconds; 0/1 ("variable") is left out.
            let list = rates.compactMap { r -> Fraction? in r.num > 0 && r.den > 0 ? Fraction(exactly: Int64(r.den), Int64(r.num)) : nil }
            return list.isEmpty ? nil : .discrete(list)
        case CPW_RATES_RANGE where rates.count == 2:
            let (slow, fast) = (rates[0], rates[1])
            guard fast.num > 0, fast.den > 0, let shortest = Fraction(exactly: Int64(fast.den), Int64(fast.num)) else { return nil }
            // A range from 0 fps (any rate up to the maximum) is offered down to 1 fps.
            let longest = slow.num > 0 && slow.den > 0 ? Fraction(exactly: Int64(slow.den), Int64(slow.num)) ?? 1 : 1
            return longest >= shortest ? .continuous(min: shortest, max: longest) : .discrete([shortest])
        default:
            return nil
        }
    }

    /// The connection's format for a request, or why there is none.
    static func request(_ r: StreamRequest, device: String) throws(CaptureError) -> cpw_request {
        let subtype = cpw_subtype_of_fourcc(r.pixelFormat.rawValue)
        guard subtype != UInt32(CPW_SUBTYPE_OTHER) else {
            throw CaptureError(.unsupportedFormat, "PipeWire has no format for \(r.pixelFormat) (\(device))", device: device)
        }
        if let problem = CaptureLimits.problem(with: r.size) { throw CaptureError(.invalidArgument, "\(device): \(problem)", device: device) }
        guard r.fps.numerator > 0, r.fps.denominator > 0, r.fps.numerator <= CaptureLimits.maxFractionTerm,
            r.fps.denominator <= CaptureLimits.maxFractionTerm
        else { throw CaptureError(.invalidArgument, "\(device): the rate \(r.fps) fps is out of range", device: device) }
        return cpw_request(
            subtype: subtype, spa_format: cpw_spa_format_of_fourcc(r.pixelFormat.rawValue), width: UInt32(r.size.width),
            height: UInt32(r.size.height), rate_num: UInt32(r.fps.numerator), rate_den: UInt32(r.fps.denominator))
    }
}
