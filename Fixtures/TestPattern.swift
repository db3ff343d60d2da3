public import VideoCapture

/// The fixture cameras' picture: 75% colour bars, a white square that moves one step per frame, and the
/// frame number drawn in large digits (so a decoded frame tells which capture it was).
public enum TestPattern {
    /// BT.601 limited-range YUV of the 75% bars: white, yellow, cyan, green, magenta, red, blue, black.
    public static let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
        (180, 128, 128), (162, 44, 142), (131, 156, 44), (112, 72, 58),
        (84, 184, 198), (65, 100, 212), (35, 212, 114), (16, 128, 128),
    ]

    /// Draws frame `index` into `dst`.
    public static func render(frame index: UInt64, into dst: I420Buffer, noise: Int = 0) {
        draw(frame: index, into: dst)
        guard noise > 0 else { return }
        // Per-frame pseudo-random luma noise (xorshift), like a sensor's.
        var state = index &* 0x9E37_79B9_7F4A_7C15 | 1
        let amplitude = UInt64(2 * noise + 1)
        for r in 0..<dst.height {
            let row = dst.dataY + r * dst.strideY
            for x in 0..<dst.width {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                let v = Int(row[x]) + Int(state % amplitude) - noise
                row[x] = UInt8(clamping: v)
            }
        }
    }

    private static func draw(frame index: UInt64, into dst: I420Buffer) {
        let w = dst.width, h = dst.height
        let cw = dst.chromaWidth, chh = dst.chromaHeight
        // Bars: fill the first row of each plane, then copy it down.
        for x in 0..<w { dst.dataY[x] = bars[min(7, x * 8 / w)].y }
        for x in 0..<cw {
            let b = bars[min(7, (2 * x) * 8 / w)]
            dst.dataU[x] = b.u; dst.dataV[x] = b.v
        }
        for r in 1..<max(h, 1) { (dst.dataY + r * dst.strideY).update(from: dst.dataY, count: w) }
        for r in 1..<max(chh, 1) {
            (dst.dataU + r * dst.strideU).update(from: dst.dataU, count: cw)
            (dst.dataV + r * dst.strideV).update(from: dst.dataV, count: cw)
        }
        // Moving square: one eighth of the height, sweeping left to right.
        let side = max(2, h / 8) & ~1
        if side < w && side < h {
            let travel = max(1, w - side)
            let x0 = Int((index &* 4) % UInt64(travel)) & ~1
            let y0 = (h - side) / 2 & ~1
            fill(dst, x: x0, y: y0, w: side, h: side, y: 235, u: 128, v: 128)
        }
        // Frame counter: 6 digits, bottom left, on a black box.
        let scale = max(1, h / 60)
        let digitW = 4 * scale, digitH = 5 * scale, gap = scale
        let boxW = 6 * (digitW + gap) + gap, boxH = digitH + 2 * gap
        let bx = 2 * scale & ~1, by = max(0, h - boxH - 2 * scale) & ~1
        guard boxW + bx <= w, boxH + by <= h else { return }
        fill(dst, x: bx, y: by, w: boxW, h: boxH, y: 16, u: 128, v: 128)
        var n = index
        for i in (0..<6).reversed() {
            let digit = Int(n % 10); n /= 10
            let ox = bx + gap + i * (digitW + gap), oy = by + gap
            let glyph = font[digit]
            for gy in 0..<5 {
                for gx in 0..<3 where glyph[gy] & (4 >> gx) != 0 {
                    for py in 0..<scale {
                        let row = dst.dataY + (oy + gy * scale + py) * dst.strideY + ox + gx * scale
                        row.update(repeating: 235, count: scale)
                    }
                }
            }
        }
    }

    private static func fill(_ d: I420Buffer, x: Int, y: Int, w: Int, h: Int, y luma: UInt8, u: UInt8, v: UInt8) {
        let x1 = min(d.width, x + w), y1 = min(d.height, y + h)
        guard x < x1, y < y1 else { return }
        for r in y..<y1 { (d.dataY + r * d.strideY + x).update(repeating: luma, count: x1 - x) }
        for r in (y / 2)..<((y1 + 1) / 2) {
            (d.dataU + r * d.strideU + x / 2).update(repeating: u, count: (x1 + 1) / 2 - x / 2)
            (d.dataV + r * d.strideV + x / 2).update(repeating: v, count: (x1 + 1) / 2 - x / 2)
        }
    }

    /// 3x5 digit glyphs, one row per entry, bit 2 = left column.
    private static let font: [[UInt8]] = [
        [7, 5, 5, 5, 7], [2, 6, 2, 2, 7], [7, 1, 7, 4, 7], [7, 1, 7, 1, 7], [5, 5, 7, 1, 1],
        [7, 4, 7, 1, 7], [7, 4, 7, 5, 7], [7, 1, 1, 1, 1], [7, 5, 7, 5, 7], [7, 5, 7, 1, 7],
    ]
}
