/// Start codes in an Annex-B H.264 stream: the one scanner shared by the codec (`H264.AnnexB` splits on it) and
/// the capture backends (a camera's own H.264 is judged key or not on it). Bounds-checked: any bytes, no trap.
package enum AnnexBScan {
    /// The next `00 00 01` (or `00 00 00 01`) at or after `from`: its position and its length (3 or 4).
    package static func nextStartCode(_ b: UnsafeRawBufferPointer, from: Int) -> (position: Int, length: Int)? {
        var i = max(from, 0)
        let n = b.count
        while i + 2 < n {
            if b[i + 2] > 1 {
                i += 3
                continue
            }
            if b[i] == 0 && b[i + 1] == 0 && b[i + 2] == 1 {
                if i > from && b[i - 1] == 0 { return (i - 1, 4) }
                return (i, 3)
            }
            i += 1
        }
        return nil
    }

    /// True when the access unit has an IDR slice (NAL type 5) before any other slice (type 1). It reads NAL
    /// headers only up to the first slice, so the cost is the bytes of the parameter sets and SEI before it.
    /// Bytes that are not Annex-B (garbage, a truncated unit) give false.
    package static func hasIDRSlice(_ au: UnsafeRawBufferPointer) -> Bool {
        var from = 0
        while let code = nextStartCode(au, from: from) {
            let header = code.position + code.length
            guard header < au.count else { return false }
            switch au[header] & 0x1f {
            case 5: return true
            case 1: return false
            default: from = header
            }
        }
        return false
    }
}
