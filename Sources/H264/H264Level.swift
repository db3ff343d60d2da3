/// An H.264 level (ITU-T H.264 Annex A, table A-1): the largest frame (`maxFrameSize`, in 16x16 macroblocks) and the
/// largest macroblock rate (`maxMacroblockRate`, macroblocks per second) a stream of that level may have.
///
/// A hardware encoder checks its level against the size and frame rate before it starts (bcm2835-codec refuses to
/// start otherwise), so the level is derived from what is encoded: the smallest that fits.
///
/// ```swift
/// import H264
///
/// let level = H264Level.smallest(width: 1920, height: 1080, fps: 30) // 4.0
/// ```
public struct H264Level: Sendable, Equatable, CustomStringConvertible {
    /// The level's name: "1", "1b", "1.1" … "6.2".
    public let name: String
    /// The position in table A-1 (1 is 0, 1b is 1 … 6.2 is 19), which is also the value of V4L2's
    /// `V4L2_CID_MPEG_VIDEO_H264_LEVEL` menu.
    public let index: Int
    /// MaxMBPS: macroblocks per second.
    public let maxMacroblockRate: Int
    /// MaxFS: macroblocks per frame.
    public let maxFrameSize: Int
    /// The level's name.
    public var description: String { name }

    /// Table A-1, in order.
    public static let all: [H264Level] = [
        ("1", 1485, 99), ("1b", 1485, 99), ("1.1", 3000, 396), ("1.2", 6000, 396), ("1.3", 11880, 396), ("2", 11880, 396),
        ("2.1", 19800, 792), ("2.2", 20250, 1620), ("3", 40500, 1620), ("3.1", 108_000, 3600), ("3.2", 216_000, 5120),
        ("4", 245_760, 8192), ("4.1", 245_760, 8192), ("4.2", 522_240, 8704), ("5", 589_824, 22080), ("5.1", 983_040, 36864),
        ("5.2", 2_073_600, 36864), ("6", 4_177_920, 139_264), ("6.1", 8_355_840, 139_264), ("6.2", 16_711_680, 139_264),
    ].enumerated().map { H264Level(name: $1.0, index: $0, maxMacroblockRate: $1.1, maxFrameSize: $1.2) }

    /// True when a `width`x`height` stream at `fps` fits the level: its macroblocks per frame within MaxFS, per
    /// second within MaxMBPS, and each side within √(8 × MaxFS) macroblocks (A.3.1 f and g).
    public func fits(width: Int, height: Int, fps: Double) -> Bool {
        let w = (width + 15) / 16, h = (height + 15) / 16
        let side = Int((8 * Double(maxFrameSize)).squareRoot())
        return w * h <= maxFrameSize && w <= side && h <= side && Double(w * h) * fps <= Double(maxMacroblockRate) + 0.5
    }

    /// The smallest level a `width`x`height` stream at `fps` fits (1b is skipped: it is a baseline-only variant
    /// of 1), or nil when even 6.2 is too small.
    public static func smallest(width: Int, height: Int, fps: Double) -> H264Level? {
        all.first { $0.name != "1b" && $0.fits(width: width, height: height, fps: fps) }
    }
}
