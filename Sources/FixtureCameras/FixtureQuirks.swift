public import VideoCapture

/// A lasting way a fixture camera's driver bends negotiation, as real ones do: negotiation must survive each
/// (docs/cameras.md, "Quirks negotiation survives", gives the reports each imitates and what the package does):
/// - `rate@FOURCC:WxH=FPS`: that mode streams at `FPS` although it lists (and applies) more — a UVC webcam with
///   exposure priority halving its rate in a dim room;
/// - `round@WxH=WxH`: `VIDIOC_S_FMT` with the first size gives the second (1920x1080 set, 1920x1088 given: a
///   driver whose buffers are a whole number of 16-line macroblocks);
/// - `ignores-frame-interval`: `VIDIOC_S_PARM` is ignored; the mode streams at its highest listed rate;
/// - `streamon-fails@FOURCC:WxH`: the mode is listed, and `VIDIOC_STREAMON` fails on it with EIO (a format a
///   camera's firmware lists but never sends).
/// Declared in a fixture file (the JSON `quirks` array, or `Quirk:` lines in a listing), on that camera only.
public enum FixtureQuirk: Sendable, Hashable, CustomStringConvertible {
    /// The mode streams at `fps` (what it applies stays the listed rate).
    case deliversRate(PixelFormat, FrameSize, Fraction)
    /// `S_FMT` with the first size applies the second.
    case roundsSize(FrameSize, FrameSize)
    /// `S_PARM` changes nothing: every mode streams at its highest listed rate.
    case ignoresFrameInterval
    /// `STREAMON` fails with EIO on this mode.
    case failsAtStreamOn(PixelFormat, FrameSize)

    /// The text form (`rate@MJPG:1280x720=15`, `round@1920x1080=1920x1088`, `ignores-frame-interval`,
    /// `streamon-fails@YUYV:1920x1080`); a refusal names the text and the forms expected.
    public init(parsing text: String) throws(CaptureError) {
        let t = text[...].trimmingSpaces
        func bad(_ why: String) -> CaptureError {
            CaptureError(
                .invalidArgument,
                "fixture quirk \"\(t.prefix(64))\": \(why) (expected rate@FOURCC:WxH=FPS, round@WxH=WxH, ignores-frame-interval or streamon-fails@FOURCC:WxH)"
            )
        }
        func mode(_ s: Substring) throws(CaptureError) -> (PixelFormat, FrameSize) {
            let parts = s.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let format = PixelFormat(fourcc: String(parts[0])), let size = FrameSize(parsing: parts[1]) else {
                throw bad("a mode is FOURCC:WxH")
            }
            return (format, size)
        }
        if t == "ignores-frame-interval" {
            self = .ignoresFrameInterval
        } else if t.hasPrefix("rate@") {
            let parts = t.dropFirst(5).split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2, let fps = Double(parts[1]), fps.isFinite, fps >= 0.1, fps <= 1000, let rate = Fraction(approximating: fps) else {
                throw bad("the rate is =FPS, 0.1...1000")
            }
            let (f, s) = try mode(parts[0])
            self = .deliversRate(f, s, rate)
        } else if t.hasPrefix("round@") {
            let parts = t.dropFirst(6).split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2, let a = FrameSize(parsing: parts[0]), let b = FrameSize(parsing: parts[1]) else {
                throw bad("the sizes are WxH=WxH")
            }
            self = .roundsSize(a, b)
        } else if t.hasPrefix("streamon-fails@") {
            let (f, s) = try mode(t.dropFirst("streamon-fails@".count))
            self = .failsAtStreamOn(f, s)
        } else {
            throw bad("unknown quirk")
        }
    }

    /// The text form.
    public var description: String {
        switch self {
        case .deliversRate(let f, let s, let r): "rate@\(f):\(s)=\(r)"
        case .roundsSize(let a, let b): "round@\(a)=\(b)"
        case .ignoresFrameInterval: "ignores-frame-interval"
        case .failsAtStreamOn(let f, let s): "streamon-fails@\(f):\(s)"
        }
    }
}

extension Array where Element == FixtureQuirk {
    /// The size `S_FMT` gives for `size`.
    func applied(_ size: FrameSize) -> FrameSize {
        for case .roundsSize(let asked, let given) in self where asked == size { return given }
        return size
    }
    /// The rate the mode streams at, when a quirk says it is not the applied one.
    func delivered(_ format: PixelFormat, _ size: FrameSize) -> Fraction? {
        for case .deliversRate(let f, let s, let r) in self where f == format && s == size { return r }
        return nil
    }
    /// True when `STREAMON` fails on the mode.
    func failsAtStreamOn(_ format: PixelFormat, _ size: FrameSize) -> Bool {
        contains { if case .failsAtStreamOn(let f, let s) = $0 { f == format && s == size } else { false } }
    }
    var ignoresFrameInterval: Bool { contains(.ignoresFrameInterval) }
}
