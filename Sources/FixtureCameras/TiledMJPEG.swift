import VideoCapture
import VideoProcessing

/// Writes a fixture camera's MJPEG frames re-encoding only what changed.
///
/// A frame is one baseline 4:2:0 JPEG with a restart interval: every MCU row (16 picture rows) is cut into
/// tiles of `restartMCUs` MCUs, each an independently coded segment (DC prediction restarts at every RSTn
/// marker). The writer keeps every tile's encoded bytes; per frame it re-encodes the tiles that the
/// renderer's dirty rectangles touch (one libjpeg call per MCU row, over the span of its dirty tiles,
/// split at that strip's own restart markers) and splices all tiles into the frame with the RSTn markers
/// renumbered. The frame counter and the square change every frame; the bars are encoded once.
///
/// With noise the renderer cycles through `phases` noise fields; the writer keeps one set of tiles per field
/// (mapped memory: only the bytes the tiles use become resident), so a noisy frame re-encodes only the tiles
/// whose clean content changed since that field was last encoded, not the whole picture.
final class TiledMJPEGWriter {
    /// Noise fields a fixture's MJPEG cycles through (the renderer's `noisePhases`).
    static let phases = 4
    let width: Int, height: Int
    let restartMCUs: Int
    private let tileWidth: Int, tilesPerRow: Int, strips: Int, tileCount: Int
    private let slot: Int
    private let encoder = JPEGStripEncoder(quality: 85)
    private var header: [UInt8] = []
    /// Per field: every tile's bytes (`slot` apart) and length, and the content version they encode.
    private let stores: [FrameStorage]
    private var lengths: [[Int]]
    private var encodedVersion: [[Int]]
    /// Each tile's content version: raised whenever its clean picture changes.
    private var version: [Int]
    private let strip: UnsafeMutablePointer<UInt8>
    private let stripCapacity: Int
    private var primed = false

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        let mcus = (width + 15) / 16
        // The longest tile (≤ 8 MCUs) that divides the row: restart intervals never straddle rows.
        restartMCUs = (1...min(8, mcus)).last { mcus % $0 == 0 } ?? 1
        tileWidth = restartMCUs * 16
        tilesPerRow = mcus / restartMCUs
        strips = (height + 15) / 16
        tileCount = tilesPerRow * strips
        slot = restartMCUs * 384 * 3 + 256 // a tile's raw 4:2:0 bytes three times over: more than any encoding
        let storeBytes = tileCount * slot
        stores = (0..<TiledMJPEGWriter.phases).map { _ in FrameStorage(pooledCapacity: storeBytes) }
        lengths = Array(repeating: Array(repeating: 0, count: tileCount), count: TiledMJPEGWriter.phases)
        encodedVersion = Array(repeating: Array(repeating: -1, count: tileCount), count: TiledMJPEGWriter.phases)
        version = Array(repeating: 0, count: tileCount)
        stripCapacity = JPEGStripEncoder.stripCapacity(width: width)
        strip = .allocate(capacity: stripCapacity)
    }
    deinit { strip.deallocate() }

    /// The worst-case frame size.
    var capacity: Int { 1024 + tileCount * (slot + 2) }

    /// Encodes the renderer's current picture into `out`; returns the JPEG's length.
    func write(_ renderer: PatternRenderer, into out: UnsafeMutablePointer<UInt8>, capacity: Int) throws(ProcessingError) -> Int {
        let picture = renderer.output
        // Which field's tiles this frame uses (0 without noise). Noise without fields is fresh every frame: no tile
        // can be reused then.
        let phase = renderer.noisePhase.map { min(max($0, 0), Self.phases - 1) } ?? 0
        if !primed || renderer.cleanEverythingChanged || (renderer.noise != nil && renderer.noisePhase == nil) {
            for i in version.indices { version[i] += 1 }
        } else {
            for r in renderer.dirty { markDirty(r) }
        }
        let tiles = stores[phase].mutableBaseAddress.assumingMemoryBound(to: UInt8.self)
        for s in 0..<strips {
            var first = -1, last = -1
            for t in 0..<tilesPerRow where encodedVersion[phase][s * tilesPerRow + t] != version[s * tilesPerRow + t] {
                if first < 0 { first = t }
                last = t
            }
            guard first >= 0 else { continue }
            let x = first * tileWidth
            let w = min(width, (last + 1) * tileWidth) - x
            let rows = min(16, height - s * 16)
            let n = try encoder.encodeStrip(
                picture, x: x, row: s * 16, width: w, rows: rows, restartMCUs: restartMCUs,
                into: strip, capacity: stripCapacity)
            if header.isEmpty { header = try frameHeader(strip, n) }
            try split(strip, n, into: s * tilesPerRow + first, count: last - first + 1, tiles: tiles, phase: phase)
            for t in first...last { encodedVersion[phase][s * tilesPerRow + t] = version[s * tilesPerRow + t] }
        }
        primed = true
        // Header, tiles with RSTn between them, EOI.
        var used = header.count
        guard used + 2 <= capacity else { throw ProcessingError(.shortBuffer, "MJPEG frame does not fit \(capacity) bytes") }
        header.withUnsafeBufferPointer { out.update(from: $0.baseAddress!, count: $0.count) }
        for t in 0..<tileCount {
            let n = lengths[phase][t]
            guard used + n + 4 <= capacity else { throw ProcessingError(.shortBuffer, "MJPEG frame does not fit \(capacity) bytes") }
            (out + used).update(from: tiles + t * slot, count: n)
            used += n
            if t < tileCount - 1 {
                out[used] = 0xFF
                out[used + 1] = 0xD0 + UInt8(t & 7)
                used += 2
            }
        }
        out[used] = 0xFF
        out[used + 1] = 0xD9
        return used + 2
    }

    private func markDirty(_ r: TestPattern.Rect) {
        guard r.w > 0, r.h > 0 else { return }
        let s0 = max(0, r.y / 16), s1 = min(strips - 1, (r.y + r.h - 1) / 16)
        let t0 = max(0, r.x / tileWidth), t1 = min(tilesPerRow - 1, (r.x + r.w - 1) / tileWidth)
        guard s0 <= s1, t0 <= t1 else { return }
        for s in s0...s1 { for t in t0...t1 { version[s * tilesPerRow + t] += 1 } }
    }

    /// The first strip's headers up to and including SOS, with the frame's height in SOF0.
    private func frameHeader(_ p: UnsafeMutablePointer<UInt8>, _ n: Int) throws(ProcessingError) -> [UInt8] {
        guard let sos = scanStart(p, n) else { throw ProcessingError(.ioFailed, "libjpeg wrote a strip without a scan") }
        var h = Array(UnsafeBufferPointer(start: p, count: sos))
        var i = 2
        while i + 8 < h.count {
            guard h[i] == 0xFF else { break }
            let len = Int(h[i + 2]) << 8 | Int(h[i + 3])
            if h[i + 1] == 0xC0 {
                h[i + 5] = UInt8(height >> 8)
                h[i + 6] = UInt8(height & 0xFF)
                h[i + 7] = UInt8(width >> 8)
                h[i + 8] = UInt8(width & 0xFF)
                return h
            }
            i += 2 + len
        }
        throw ProcessingError(.ioFailed, "libjpeg wrote a strip without a baseline frame header")
    }

    /// Offset of the first entropy-coded byte (just past the SOS segment).
    private func scanStart(_ p: UnsafeMutablePointer<UInt8>, _ n: Int) -> Int? {
        var i = 2
        while i + 4 <= n {
            guard p[i] == 0xFF else { return nil }
            let len = Int(p[i + 2]) << 8 | Int(p[i + 3])
            if p[i + 1] == 0xDA { return i + 2 + len }
            i += 2 + len
        }
        return nil
    }

    /// Stores a strip's restart intervals as tiles `first ..< first + count`.
    private func split(
        _ p: UnsafeMutablePointer<UInt8>, _ n: Int, into first: Int, count: Int,
        tiles: UnsafeMutablePointer<UInt8>, phase: Int
    ) throws(ProcessingError) {
        guard let start = scanStart(p, n) else { throw ProcessingError(.ioFailed, "libjpeg wrote a strip without a scan") }
        var segStart = start, k = 0, i = start
        while i + 1 < n {
            // In entropy-coded data a 0xFF byte is always followed by 0x00 (stuffing) or a marker.
            if p[i] == 0xFF, p[i + 1] != 0x00 {
                let m = p[i + 1]
                let isRST = m >= 0xD0 && m <= 0xD7
                guard isRST || m == 0xD9 else { throw ProcessingError(.ioFailed, "unexpected JPEG marker \(m) in a strip") }
                guard k < count, i - segStart <= slot else { throw ProcessingError(.ioFailed, "JPEG strip has more restart intervals than tiles") }
                (tiles + (first + k) * slot).update(from: p + segStart, count: i - segStart)
                lengths[phase][first + k] = i - segStart
                k += 1
                if m == 0xD9 { break }
                i += 2
                segStart = i
                continue
            }
            i += 1
        }
        guard k == count else { throw ProcessingError(.ioFailed, "JPEG strip held \(k) restart intervals, expected \(count)") }
    }
}
