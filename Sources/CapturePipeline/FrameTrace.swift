import VideoCapture
import VideoProcessing

/// Per-frame stage times of a real-time capture session, for finding where a latency tail comes from (camcap
/// `record --frame-trace FILE` writes it as CSV). The rows are allocated up front: recording a frame allocates
/// nothing; frames beyond `capacity` are counted in `overflow`, not kept.
///
/// For each frame processed: when it was captured, how long its conversion took (on the capturer's delivery
/// thread), how long it waited before the session's loop took it, how long the stages took on the loop's thread
/// in wall time and in that thread's CPU time (the difference is time the thread waited for a core), how long
/// the encoder took and the rest of the stages (writing), the frame's type and its encoded size.
public final class FrameTrace {
    /// One frame. Times are nanoseconds; `captureNs` is on the capture clock (CLOCK_MONOTONIC).
    public struct Row: Sendable, Equatable {
        /// The frame's sequence number (the capturer's).
        public var sequence: UInt64 = 0
        /// The frame's capture timestamp.
        public var captureNs: Int64 = 0
        /// The conversion to I420 (delivery thread), 0 when not measured.
        public var convertNs: Int64 = 0
        /// From capture to the loop taking the frame, less the conversion: hand-offs and queueing.
        public var waitNs: Int64 = 0
        /// The stages, wall time on the loop's thread.
        public var stagesNs: Int64 = 0
        /// The loop thread's CPU time over the stages.
        public var stagesCPUNs: Int64 = 0
        /// The encoder's own time (`EncodedFrame.encodeNs`), 0 without an inline encoder.
        public var encodeNs: Int64 = 0
        /// Capture to the end of the stages.
        public var latencyNs: Int64 = 0
        /// "I" (key frame), "P", "skip", or "-" (no inline encoder); short literals, stored inline (no allocation).
        public var frameType = "-"
        /// Bytes of H.264 the frame became.
        public var bytes = 0
        /// Creates an empty row.
        public init() {}
    }

    /// The frames recorded, in order.
    public private(set) var rows: [Row]
    /// Frames processed after the rows were full.
    public private(set) var overflow = 0
    /// How many rows fit.
    public let capacity: Int

    /// The most rows a trace keeps (1,048,576: about 100 MB, 9.7 hours at 30 fps); later frames count in `overflow`.
    public static let maxCapacity = 1 << 20

    /// A trace that keeps up to `capacity` frames (at least 1, at most `maxCapacity`), allocated now.
    public init(capacity: Int) {
        self.capacity = min(max(1, capacity), FrameTrace.maxCapacity)
        rows = []
        rows.reserveCapacity(self.capacity)
    }

    /// A trace with room for every frame of a run of `configuration`, allocated before the start: its `frames`,
    /// else its duration (5 s when not given) at its frame-rate limit (at most 240 fps), with 64 to spare.
    public convenience init(for configuration: CaptureSession.Configuration) {
        let seconds = Double(configuration.durationNs ?? 5_000_000_000) / 1e9
        // Within 0...maxCapacity before the conversion (a negative or huge duration or rate traps nothing; a
        // `Fraction`'s denominator is never 0, so no NaN).
        let frames = min(max(seconds * min(configuration.fpsLimit.doubleValue, 240), 0), Double(FrameTrace.maxCapacity))
        self.init(capacity: configuration.frames ?? Int(frames) + 64)
    }

    func record(_ row: Row) {
        if rows.count < capacity { rows.append(row) } else { overflow += 1 }
    }

    /// Writes `csv()` to the file at `path` (created or replaced).
    public func writeCSV(to path: String) throws {
        let file = try OutputFile(path: path)
        try file.write(Array(csv().utf8))
        try file.close()
    }

    /// The rows as CSV with a header line; times in microseconds, the capture time from the first frame.
    public func csv() -> String {
        var out = "sequence,capture_ms,convert_us,wait_us,stages_us,stages_cpu_us,offcpu_us,encode_us,other_us,latency_us,work_us,type,bytes\n"
        let first = rows.first?.captureNs ?? 0
        func us(_ ns: Int64) -> String { fmt(Double(ns) / 1000, 1) }
        for r in rows {
            let fields = [
                "\(r.sequence)", fmt(Double(r.captureNs - first) / 1e6, 3), us(r.convertNs), us(r.waitNs), us(r.stagesNs), us(r.stagesCPUNs),
                us(r.stagesNs - r.stagesCPUNs), us(r.encodeNs), us(r.stagesNs - r.encodeNs), us(r.latencyNs), us(r.convertNs + r.stagesNs),
                r.frameType, "\(r.bytes)",
            ]
            out += fields.joined(separator: ",") + "\n"
        }
        return out
    }
}
