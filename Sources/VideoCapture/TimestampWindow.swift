/// Frames per second and bits per second over the last second of timestamps (fixed rings of 256 entries:
/// no allocation per frame). Used by the source (input/output fps) and the encoder (bitrate).
package struct TimestampWindow: Sendable {
    private var times = [Int64](repeating: 0, count: 256)
    private var sizes = [Int](repeating: 0, count: 256)
    private var head = 0, count = 0, bytes = 0
    package init() {}

    package mutating func add(_ ts: Int64, bytes n: Int = 0) {
        if count == times.count {
            bytes -= sizes[head]
            head = (head + 1) % times.count
            count -= 1
        }
        let i = (head + count) % times.count
        times[i] = ts
        sizes[i] = n
        count += 1
        bytes += n
        while count > 1 && ts - times[head] >= 1_000_000_000 {
            bytes -= sizes[head]
            head = (head + 1) % times.count
            count -= 1
        }
    }

    private var span: Int64 { times[(head + count - 1) % times.count] - times[head] }

    package var fps: Double {
        guard count > 1, span > 0 else { return 0 }
        return Double(count - 1) * 1e9 / Double(span)
    }

    /// The bytes of all frames in the window over their span plus one frame interval.
    package var bitsPerSecond: Double {
        guard count > 1 else { return 0 }
        let perFrame = Double(span) / Double(count - 1)
        return Double(bytes) * 8 * 1e9 / (Double(span) + perFrame)
    }
}
