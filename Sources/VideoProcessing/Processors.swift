public import VideoCapture

/// Turns one picture into another: an overlay, a mask, a crop. A `ProcessStage` (CapturePipeline) runs it on
/// every picture, and what it returns is what the stages after it get (the encoders, and so what `record`,
/// `serve`, `rtsp` and `publish` deliver). The frame's capture timestamp is never the processor's: it carries
/// through unchanged.
///
/// Called on the pipeline's task, one picture at a time. The returned picture may be the input itself (a
/// processor that changed nothing) or one of the processor's own buffers: never write into the input, which
/// other stages (a frame tap, per-viewer scalers) share. Keep a pool (`I420BufferPool`) so that steady state
/// allocates nothing.
public protocol PictureProcessor: AnyObject {
    /// A short name for the summary and the stats ("time overlay", "crop 320x240+160+120").
    var name: String { get }
    /// The processed picture for `frame` (whose `buffer` is `picture`'s). A thrown error stops the run.
    func process(_ picture: I420Buffer, frame: VideoFrame) throws -> I420Buffer
}

/// Keeps one region of the picture (and optionally scales it): a digital crop of the camera's view. The region is
/// in the picture's pixels; offsets are made even (chroma is subsampled). A region outside the picture is an
/// error naming both, at the first picture.
public final class RegionCrop: PictureProcessor {
    /// The region kept.
    public let region: CropRect
    /// The size the region is scaled to; nil keeps its own size (made even).
    public let outputSize: FrameSize?
    private let converter = FrameConverter()

    /// A crop of `region`, scaled to `outputSize` when given. Sizes must be 2...16384 a side.
    public init(region: CropRect, outputSize: FrameSize? = nil) throws(ProcessingError) {
        guard (2...16384).contains(region.width), (2...16384).contains(region.height), region.x >= 0, region.y >= 0,
            region.x <= 16384, region.y <= 16384
        else {
            throw ProcessingError(
                .invalidArgument, "crop region \(region): sizes must be 2...16384, offsets 0...16384")
        }
        if let o = outputSize, !(2...16384).contains(o.width) || !(2...16384).contains(o.height) {
            throw ProcessingError(.invalidArgument, "crop output size \(o): width and height must be 2...16384")
        }
        self.region = region
        self.outputSize = outputSize
    }

    /// "crop WxH+X+Y" (and "→ WxH" when scaled).
    public var name: String {
        "crop \(region)" + (outputSize.map { " → \($0)" } ?? "")
    }

    /// The region, converted once (libyuv) into the converter's pooled buffers.
    public func process(_ picture: I420Buffer, frame: VideoFrame) throws -> I420Buffer {
        guard region.x + region.width <= picture.width, region.y + region.height <= picture.height else {
            throw ProcessingError(
                .invalidArgument,
                "crop region \(region) is outside the \(picture.width)x\(picture.height) picture"
            )
        }
        let size = outputSize ?? FrameSize(width: region.width & ~1, height: region.height & ~1)
        return try converter.convert(picture.buffer, options: FrameConverter.Options(crop: region, scale: size))
    }
}

/// Writes the frame's capture time on the picture: seconds on the capture clock (`VideoFrame.timestampNs`, the
/// monotonic clock), to the millisecond, in white digits on a dark box at the top left. What a recording or a
/// viewer then shows is the time the camera took that picture, so that glass-to-glass delays and dropped frames
/// can be read off the picture itself.
///
/// The picture is copied into a pooled buffer first (the input is shared); the digits are a built-in 5x7 font,
/// scaled to the picture (`scale`: pixels per font dot). Allocates nothing per frame.
public final class TimeOverlay: PictureProcessor {
    /// "time overlay".
    public let name = "time overlay"
    private var pool: I420BufferPool?
    /// Where the box starts (pixels from the top left corner).
    public static let origin = (x: 8, y: 8)

    /// A time overlay.
    public init() {}

    /// Pixels per font dot for a picture `height` tall: 1 below 120 lines, then one more per 120 lines (4 at
    /// 480, 6 at 720), up to 8.
    public static func scale(forHeight height: Int) -> Int { max(1, min(8, height / 120)) }

    /// The 5x7 glyphs, one row per byte (bit 4 is the leftmost dot), for "0"..."9", "." and " ".
    package static let glyphs: [Character: [UInt8]] = [
        "0": [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], "1": [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        "2": [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], "3": [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        "4": [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], "5": [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        "6": [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], "7": [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        "8": [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], "9": [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        ".": [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C], " ": [0, 0, 0, 0, 0, 0, 0],
    ]
    /// Glyph rows in a fixed order for the per-frame path (index = digit; 10 = ".", 11 = " ").
    private static let table: [[UInt8]] = (0...9).map { glyphs[Character(String($0))]! } + [glyphs["."]!, glyphs[" "]!]
    /// Characters drawn: 10 for whole seconds (right-aligned, blank-padded), ".", 3 for milliseconds.
    public static let characters = 14

    /// The characters the overlay shows for a timestamp: whole seconds right-aligned in 10 characters, ".", then
    /// milliseconds (truncated). Timestamps below zero show as 0.
    public static func text(timestampNs: Int64) -> String {
        var cells = [Int](repeating: 11, count: characters)
        fill(&cells, timestampNs: timestampNs)
        return String(cells.map { $0 == 10 ? "." : $0 == 11 ? " " : Character(String($0)) })
    }
    private static func fill(_ cells: inout [Int], timestampNs: Int64) {
        let ms = max(0, timestampNs) / 1_000_000
        var secs = ms / 1000, frac = ms % 1000
        for i in stride(from: characters - 1, through: characters - 3, by: -1) {
            cells[i] = Int(frac % 10)
            frac /= 10
        }
        cells[characters - 4] = 10
        var i = characters - 5
        repeat {
            cells[i] = Int(secs % 10)
            secs /= 10
            i -= 1
        } while secs > 0 && i >= 0
        while i >= 0 {
            cells[i] = 11
            i -= 1
        }
    }
    private var cells = [Int](repeating: 11, count: TimeOverlay.characters)

    /// The box and its digits, in the picture's pixels: where a reader of the picture finds them.
    public static func box(forHeight height: Int) -> (x: Int, y: Int, width: Int, height: Int, scale: Int) {
        let s = scale(forHeight: height)
        return (origin.x, origin.y, (characters * 6 + 1) * s, 9 * s, s)
    }

    /// Reads the time back from a picture that carries the overlay (a decoded recording, a viewer's frame): its
    /// luma plane, `width` x `height` at `stride`. Each dot is sampled at its centre, and each character is the
    /// glyph nearest to what was seen (at most 3 of its 35 dots off, what a lossy encode may blur). Returns the
    /// milliseconds shown, nil when no overlay is there.
    public static func read(luma: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int) -> Int64? {
        let b = box(forHeight: height), s = b.scale
        guard stride >= width, b.x + b.width <= width, b.y + b.height <= height else { return nil }
        var value: Int64 = 0, digits = 0, point = false
        for i in 0..<characters {
            let cx = b.x + s + i * 6 * s, cy = b.y + s
            var seen = [UInt8](repeating: 0, count: 7)
            for ry in 0..<7 {
                for dx in 0..<5 where luma[(cy + ry * s + s / 2) * stride + cx + dx * s + s / 2] > 128 { seen[ry] |= 0x10 >> dx }
            }
            var best = (index: -1, distance: Int.max)
            for (index, rows) in table.enumerated() {
                let d = zip(rows, seen).reduce(0) { $0 + ($1.0 ^ $1.1).nonzeroBitCount }
                if d < best.distance { best = (index, d) }
            }
            guard best.distance <= 3 else { return nil }
            switch best.index {
            case 11: if digits > 0 || point { return nil } // blanks only before the first digit
            case 10:
                if point || digits == 0 { return nil }
                point = true
            default:
                value = value * 10 + Int64(best.index)
                digits += 1
            }
        }
        return point && digits >= 4 ? value : nil
    }

    /// A copy of the picture with the time drawn on it (a picture too small for the box is returned unchanged).
    public func process(_ picture: I420Buffer, frame: VideoFrame) throws -> I420Buffer {
        let b = TimeOverlay.box(forHeight: picture.height)
        guard b.x + b.width <= picture.width, b.y + b.height <= picture.height else { return picture }
        if pool?.width != picture.width || pool?.height != picture.height {
            pool = I420BufferPool(width: picture.width, height: picture.height, maxBuffers: 4)
        }
        let out = pool!.acquire()
        guard let dst = out.writablePlanes else { return picture }
        PlaneOps.copy(picture.dataY, picture.strideY, dst.y, out.strideY, width: picture.width, height: picture.height)
        PlaneOps.copy(picture.dataU, picture.strideU, dst.u, out.strideU, width: picture.chromaWidth, height: picture.chromaHeight)
        PlaneOps.copy(picture.dataV, picture.strideV, dst.v, out.strideV, width: picture.chromaWidth, height: picture.chromaHeight)
        // The box: dark luma, neutral chroma (even-aligned so chroma covers it exactly).
        let x0 = b.x & ~1, y0 = b.y & ~1, w = (b.width + 1) & ~1, h = (b.height + 1) & ~1
        for r in y0..<(y0 + h) { (dst.y + r * out.strideY + x0).update(repeating: 16, count: w) }
        for r in (y0 / 2)..<((y0 + h) / 2) {
            (dst.u + r * out.strideU + x0 / 2).update(repeating: 128, count: w / 2)
            (dst.v + r * out.strideV + x0 / 2).update(repeating: 128, count: w / 2)
        }
        TimeOverlay.fill(&cells, timestampNs: frame.timestampNs)
        let s = b.scale
        for (i, cell) in cells.enumerated() {
            let rows = TimeOverlay.table[cell]
            let cx = b.x + s + i * 6 * s, cy = b.y + s
            for (ry, bits) in rows.enumerated() where bits != 0 {
                for dx in 0..<5 where bits & (0x10 >> dx) != 0 {
                    for py in 0..<s { (dst.y + (cy + ry * s + py) * out.strideY + cx + dx * s).update(repeating: 235, count: s) }
                }
            }
        }
        return out
    }
}
