public import VideoCapture
import VideoProcessing

/// The fixture cameras' picture: 75% colour bars, a white square that moves one step per frame, and the
/// frame number drawn in large digits (so a decoded frame tells which capture it was).
///
/// The pattern is drawn in the quantization range its frames are labelled with: limited range (black 16, white
/// 235, chroma 16...240) for raw Y'CbCr and RGB frames, full range (black 0, white 255, chroma 0...255) for
/// MJPEG, whose JPEGs are full range by definition (JFIF), and for a Y'CbCr camera whose fixture declares
/// `"range": "full"`. The full-range colours are the limited ones expanded: Y' = (Y − 16) × 255 / 219,
/// C = (C − 128) × 255 / 224 + 128, rounded.
public enum TestPattern {
    /// BT.601 limited-range YUV of the 75% bars: white, yellow, cyan, green, magenta, red, blue, black.
    public static let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
        (180, 128, 128), (162, 44, 142), (131, 156, 44), (112, 72, 58),
        (84, 184, 198), (65, 100, 212), (35, 212, 114), (16, 128, 128),
    ]

    /// The same bars in BT.601 full range (what the MJPEG fixture cameras' JPEGs carry): white 191, black 0.
    public static let fullRangeBars: [(y: UInt8, u: UInt8, v: UInt8)] = bars.map {
        (fullRangeLuma($0.y), fullRangeChroma($0.u), fullRangeChroma($0.v))
    }

    /// A limited-range luma value expanded to full range: (Y − 16) × 255 / 219, rounded and clamped to 0...255.
    public static func fullRangeLuma(_ y: UInt8) -> UInt8 { FullRange.luma(y) }

    /// A limited-range chroma value expanded to full range: (C − 128) × 255 / 224 + 128, rounded and clamped.
    public static func fullRangeChroma(_ c: UInt8) -> UInt8 { FullRange.chroma(c) }

    /// The colours the pattern is drawn with in one quantization range.
    struct Palette {
        let bars: [(y: UInt8, u: UInt8, v: UInt8)]
        /// Luma of the counter's box.
        let black: UInt8
        /// Luma of the moving square and of the digits.
        let white: UInt8
        static let limited = Palette(bars: TestPattern.bars, black: 16, white: 235)
        static let full = Palette(bars: TestPattern.fullRangeBars, black: 0, white: 255)
        static func of(fullRange: Bool) -> Palette { fullRange ? .full : .limited }
    }

    /// Draws frame `index` into `dst`; `noise` adds sensor-like luma noise of that amplitude, different
    /// every frame (from a precomputed table, the same the fixture cameras use). `range` `.full` draws the
    /// full-range colours (what an MJPEG fixture camera encodes); anything else the limited-range ones.
    public static func render(frame index: UInt64, into dst: I420Buffer, noise: Int = 0, range: VideoColorSpace.Range = .limited) {
        let palette = Palette.of(fullRange: range == .full)
        drawBars(into: dst, palette: palette)
        let layout = Layout(width: dst.width, height: dst.height)
        if let sq = layout.square(frame: index) { fill(dst, sq, y: palette.white, u: 128, v: 128) }
        if let box = layout.counterBox {
            fill(dst, box, y: palette.black, u: 128, v: 128)
            for i in 0..<6 {
                drawDigit(layout.digit(of: index, at: i), cell: layout.digitCell(i), scale: layout.scale, luma: palette.white, into: dst)
            }
        }
        if noise > 0 { NoiseTable(amplitude: noise, planeBytes: dst.strideY * dst.height).apply(frame: index, to: dst, from: dst) }
    }

    /// Where the moving parts are for a picture size.
    struct Layout {
        let width: Int, height: Int
        let scale: Int
        let side: Int
        let counterBox: Rect?
        init(width w: Int, height h: Int) {
            width = w
            height = h
            scale = max(1, h / 60)
            side = max(2, h / 8) & ~1
            let digitW = 4 * scale, digitH = 5 * scale, gap = scale
            let boxW = 6 * (digitW + gap) + gap, boxH = digitH + 2 * gap
            let bx = 2 * scale & ~1, by = max(0, h - boxH - 2 * scale) & ~1
            counterBox = boxW + bx <= w && boxH + by <= h ? Rect(x: bx, y: by, w: boxW, h: boxH) : nil
        }
        /// The moving square: one eighth of the height, sweeping left to right 4 pixels a frame.
        func square(frame index: UInt64) -> Rect? {
            guard side < width && side < height else { return nil }
            let travel = max(1, width - side)
            let x0 = Int((index &* 4) % UInt64(travel)) & ~1
            return Rect(x: x0, y: (height - side) / 2 & ~1, w: side, h: side)
        }
        /// Digit `i` (0 = most significant of 6) of the frame number.
        func digit(of index: UInt64, at i: Int) -> Int {
            var n = index
            for _ in 0..<(5 - i) { n /= 10 }
            return Int(n % 10)
        }
        func digitCell(_ i: Int) -> Rect {
            let box = counterBox!
            return Rect(x: box.x + scale + i * (5 * scale), y: box.y + scale, w: 4 * scale, h: 5 * scale)
        }
    }

    struct Rect: Equatable {
        var x: Int, y: Int, w: Int, h: Int
        func intersects(_ o: Rect) -> Bool { x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h }
    }

    /// Bars over the whole picture, padding columns included (JPEG encoders read whole blocks).
    static func drawBars(into dst: I420Buffer, palette: Palette) {
        let w = dst.width, h = dst.height
        let cw = dst.chromaWidth, chh = dst.chromaHeight
        let bars = palette.bars
        for x in 0..<dst.strideY { dst.mutableDataY[x] = bars[min(7, min(x, w - 1) * 8 / w)].y }
        for x in 0..<dst.strideU {
            let b = bars[min(7, (2 * min(x, cw - 1)) * 8 / w)]
            dst.mutableDataU[x] = b.u
            dst.mutableDataV[x] = b.v
        }
        for r in 1..<max(h, 1) { (dst.mutableDataY + r * dst.strideY).update(from: dst.mutableDataY, count: dst.strideY) }
        for r in 1..<max(chh, 1) {
            (dst.mutableDataU + r * dst.strideU).update(from: dst.mutableDataU, count: dst.strideU)
            (dst.mutableDataV + r * dst.strideV).update(from: dst.mutableDataV, count: dst.strideV)
        }
    }

    static func drawDigit(_ digit: Int, cell: Rect, scale: Int, luma: UInt8, into dst: I420Buffer) {
        let glyph = font[digit]
        for gy in 0..<5 {
            for gx in 0..<3 where glyph[gy] & (4 >> gx) != 0 {
                for py in 0..<scale {
                    let row = dst.mutableDataY + (cell.y + gy * scale + py) * dst.strideY + cell.x + gx * scale
                    row.update(repeating: luma, count: scale)
                }
            }
        }
    }

    static func fill(_ d: I420Buffer, _ r: Rect, y luma: UInt8, u: UInt8, v: UInt8) {
        let x1 = min(d.width, r.x + r.w), y1 = min(d.height, r.y + r.h)
        guard r.x < x1, r.y < y1 else { return }
        for row in r.y..<y1 { (d.mutableDataY + row * d.strideY + r.x).update(repeating: luma, count: x1 - r.x) }
        for row in (r.y / 2)..<((y1 + 1) / 2) {
            (d.mutableDataU + row * d.strideU + r.x / 2).update(repeating: u, count: (x1 + 1) / 2 - r.x / 2)
            (d.mutableDataV + row * d.strideV + r.x / 2).update(repeating: v, count: (x1 + 1) / 2 - r.x / 2)
        }
    }

    /// Copies a rectangle (even origin) of `src` over `dst`, both planes' chroma included.
    static func copy(_ r: Rect, from src: I420Buffer, to d: I420Buffer) {
        let x1 = min(d.width, r.x + r.w), y1 = min(d.height, r.y + r.h)
        guard r.x < x1, r.y < y1 else { return }
        for row in r.y..<y1 { (d.mutableDataY + row * d.strideY + r.x).update(from: src.dataY + row * src.strideY + r.x, count: x1 - r.x) }
        let cx = r.x / 2, cn = (x1 + 1) / 2 - cx
        for row in (r.y / 2)..<((y1 + 1) / 2) {
            (d.mutableDataU + row * d.strideU + cx).update(from: src.dataU + row * src.strideU + cx, count: cn)
            (d.mutableDataV + row * d.strideV + cx).update(from: src.dataV + row * src.strideV + cx, count: cn)
        }
    }

    /// 3x5 digit glyphs, one row per entry, bit 2 = left column.
    static let font: [[UInt8]] = [
        [7, 5, 5, 5, 7], [2, 6, 2, 2, 7], [7, 1, 7, 4, 7], [7, 1, 7, 1, 7], [5, 5, 7, 1, 1],
        [7, 4, 7, 1, 7], [7, 4, 7, 5, 7], [7, 1, 1, 1, 1], [7, 5, 7, 5, 7], [7, 5, 7, 1, 7],
    ]
}

/// Sensor-like luma noise from a precomputed table: uniform in [-amplitude, amplitude], split into a
/// positive and a negative byte table so a frame's noise is two saturating SIMD passes (libyuv's ARGBAdd
/// and ARGBSubtract over the luma plane), each frame starting at its own offset into the tables.
final class NoiseTable {
    let amplitude: Int
    private let planeBytes: Int
    private let span = 1 << 16
    private let plus: UnsafeMutablePointer<UInt8>
    private let minus: UnsafeMutablePointer<UInt8>

    init(amplitude: Int, planeBytes: Int) {
        self.amplitude = max(1, min(64, amplitude))
        self.planeBytes = planeBytes
        let n = planeBytes + span
        plus = .allocate(capacity: n)
        minus = .allocate(capacity: n)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let range = UInt64(2 * self.amplitude + 1)
        for i in 0..<n {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            let v = Int(state % range) - self.amplitude
            plus[i] = UInt8(max(0, v))
            minus[i] = UInt8(max(0, -v))
        }
    }
    deinit {
        plus.deallocate()
        minus.deallocate()
    }

    /// Where frame (or phase) `index` starts in the tables: a multiple of 4 bytes, spread by a hash.
    static func offset(_ index: UInt64, span: Int) -> Int {
        var mix = index &* 0x9E37_79B9_7F4A_7C15
        mix ^= mix >> 29
        return Int(mix % UInt64(span / 4)) * 4
    }

    /// dst's luma = src's luma + this frame's noise (src may be dst). The planes' strides must match
    /// and be multiples of 4 (I420Buffer's are).
    func apply(frame index: UInt64, to dst: I420Buffer, from src: I420Buffer) {
        let stride = dst.strideY, h = dst.height
        precondition(stride == src.strideY && stride % 4 == 0 && stride * h <= planeBytes, "noise table does not fit the picture")
        // A multiple of 4 bytes, so the four "ARGB" channels each see fresh noise.
        let offset = NoiseTable.offset(index, span: span)
        PlaneOps.addSaturating(src.dataY, stride, plus + offset, stride, dst.mutableDataY, stride, width: stride, height: h)
        PlaneOps.subtractSaturating(dst.mutableDataY, stride, minus + offset, stride, dst.mutableDataY, stride, width: stride, height: h)
    }
}

/// The test pattern drawn frame after frame, changing only what moves: the square's old and new places and
/// the digits of the counter that changed. The bars are drawn once per size. `dirty` lists the rectangles
/// that changed in the last `advance` (for encoders that re-encode only those); with noise, every pixel changes.
final class PatternRenderer {
    let width: Int, height: Int
    let noise: NoiseTable?
    /// With `noisePhases`, the noise cycles through that many fields (frame N gets field N mod phases), so an
    /// encoder that caches per field (the MJPEG tiles) re-encodes only what moved; else every frame has its own.
    let noisePhases: Int?
    /// The noise field of the last frame (nil without noise or without phases).
    private(set) var noisePhase: Int?
    /// True when the clean picture changed everywhere in the last `advance` (first frame, picture controls),
    /// as opposed to `everythingChanged`, which noise sets on every frame.
    private(set) var cleanEverythingChanged = true
    private let layout: TestPattern.Layout
    /// The colours drawn: full range for frames labelled full range (MJPEG), else limited.
    private let palette: TestPattern.Palette
    private let background: I420Buffer
    /// The clean picture of the last frame.
    let picture: I420Buffer
    private let noisy: I420Buffer?
    private var lastSquare: TestPattern.Rect?
    private var lastDigits: [Int] = [-1, -1, -1, -1, -1, -1]
    private(set) var dirty: [TestPattern.Rect] = []
    private(set) var everythingChanged = true
    /// The picture controls to apply (brightness, contrast, flips, a solid test pattern); set before `advance`.
    var settings = PictureSettings()
    private var lastSettings = PictureSettings()
    private let adjuster: PictureAdjuster
    private var adjusted: I420Buffer?

    /// `fullRange` draws the pattern in full range (black 0, white 255): for frames labelled full range, such as
    /// MJPEG's JPEGs; else in limited range (black 16, white 235).
    init(width: Int, height: Int, noise: Int, noisePhases: Int? = nil, fullRange: Bool = false) {
        self.width = width
        self.height = height
        self.noisePhases = noisePhases.map { max(1, $0) }
        palette = TestPattern.Palette.of(fullRange: fullRange)
        adjuster = PictureAdjuster(width: width, height: height, fullRange: fullRange)
        layout = TestPattern.Layout(width: width, height: height)
        background = I420Buffer(
            width: width, height: height, fitting: FrameStorage(pooledCapacity: I420Buffer.byteCount(width: width, height: height)))
        TestPattern.drawBars(into: background, palette: palette)
        picture = I420Buffer(width: width, height: height, fitting: FrameStorage(pooledCapacity: I420Buffer.byteCount(width: width, height: height)))
        picture.buffer.storage.mutableBaseAddress.copyMemory(
            from: background.buffer.storage.baseAddress, byteCount: I420Buffer.byteCount(width: width, height: height))
        if noise > 0 {
            self.noise = NoiseTable(amplitude: noise, planeBytes: picture.strideY * height)
            noisy = I420Buffer(
                width: width, height: height, fitting: FrameStorage(pooledCapacity: I420Buffer.byteCount(width: width, height: height)))
        } else {
            self.noise = nil
            noisy = nil
        }
        dirty.reserveCapacity(16)
        if let box = layout.counterBox { TestPattern.fill(picture, box, y: palette.black, u: 128, v: 128) }
    }

    /// The picture to send: the clean one, or its noisy copy.
    var output: I420Buffer { adjusted ?? noisy ?? picture }

    /// Draws frame `index` (any index; frames may be skipped).
    func advance(to index: UInt64) {
        dirty.removeAll(keepingCapacity: true)
        let square = layout.square(frame: index)
        var touchesBox = false
        if square != lastSquare {
            if let old = lastSquare {
                TestPattern.copy(old, from: background, to: picture)
                dirty.append(old)
            }
            if let sq = square {
                TestPattern.fill(picture, sq, y: palette.white, u: 128, v: 128)
                dirty.append(sq)
            }
            if let box = layout.counterBox {
                touchesBox = (lastSquare.map { $0.intersects(box) } ?? false) || (square.map { $0.intersects(box) } ?? false)
            }
            lastSquare = square
        }
        if let box = layout.counterBox {
            if touchesBox {
                TestPattern.fill(picture, box, y: palette.black, u: 128, v: 128)
                dirty.append(box)
            }
            for i in 0..<6 {
                let d = layout.digit(of: index, at: i)
                guard d != lastDigits[i] || touchesBox else { continue }
                let cell = layout.digitCell(i)
                if !touchesBox {
                    TestPattern.fill(picture, cell, y: palette.black, u: 128, v: 128)
                    dirty.append(cell)
                }
                TestPattern.drawDigit(d, cell: cell, scale: layout.scale, luma: palette.white, into: picture)
                lastDigits[i] = d
            }
        }
        if let noise, let noisy {
            // Chroma is clean: copy it; luma = picture + noise.
            let cs = picture.strideU
            PlaneOps.copy(picture.dataU, cs, noisy.mutableDataU, cs, width: cs, height: picture.chromaHeight)
            PlaneOps.copy(picture.dataV, cs, noisy.mutableDataV, cs, width: cs, height: picture.chromaHeight)
            if let phases = noisePhases {
                let phase = Int(index % UInt64(phases))
                noisePhase = phase
                noise.apply(frame: UInt64(phase), to: noisy, from: picture)
            } else {
                noise.apply(frame: index, to: noisy, from: picture)
            }
            everythingChanged = true
        } else {
            everythingChanged = false
        }
        cleanEverythingChanged = firstFrame
        // Picture controls: applied to a copy, so the incremental drawing above stays valid.
        if settings.isIdentity {
            adjusted = nil
            if lastSettings != settings {
                everythingChanged = true
                cleanEverythingChanged = true
            }
        } else {
            adjusted = adjuster.apply(settings, to: noisy ?? picture)
            everythingChanged = true
            cleanEverythingChanged = true
        }
        lastSettings = settings
        firstFrame = false
    }
    private var firstFrame = true
}
