public import VideoCapture
public import VideoProcessing
import SystemIO

/// What a `ProcessStage` does with a picture that is already late when its turn comes.
public enum ProcessingBackpressure: Sendable, Equatable, CustomStringConvertible {
    /// Every picture is processed, however long it takes: the pipeline waits, and the camera's frames that
    /// pile up meanwhile are dropped at the capturer as for any slow stage (a file gets every picture the
    /// pipeline took).
    case wait
    /// A picture whose capture time is more than `olderThanNs` before the moment processing would start is
    /// dropped, not processed (nor given to the stages after it): what is delivered stays current behind a
    /// processor that is sometimes slower than the camera. Counted as `dropped`.
    case drop(olderThanNs: Int64)

    /// `wait`, or `drop after N ms`.
    public var description: String {
        switch self {
        case .wait: "wait"
        case .drop(let ns): "drop after \(ns / 1_000_000) ms"
        }
    }

    /// Parses `wait`, `drop` (100 ms) or `drop:MS` (1...60000 ms); an error names the value.
    public static func parse(_ text: String) throws(PipelineError) -> ProcessingBackpressure {
        if text == "wait" { return .wait }
        if text == "drop" { return .drop(olderThanNs: 100_000_000) }
        if text.hasPrefix("drop:"), let ms = Int(text.dropFirst(5)), (1...60_000).contains(ms) {
            return .drop(olderThanNs: Int64(ms) * 1_000_000)
        }
        throw PipelineError(.invalidConfiguration, "backpressure \"\(text)\": expected wait, drop or drop:MS (MS 1...60000)")
    }
}

/// Runs a `PictureProcessor` on every picture: the stages after it in `CaptureSession.run(stages:)` get its
/// output instead of the camera's picture (stages before it get the camera's). So `[ProcessStage(overlay),
/// encode]` records, serves or streams the processed picture, with the frame's capture timestamp unchanged.
///
/// Its latency per picture (from the start of `process` to its return) is kept as a histogram and reported in
/// the summary's `processing` line and `statistics`. With `backpressure: .drop(…)`, pictures already late are
/// skipped (see `ProcessingBackpressure`).
public final class ProcessStage: PictureStage {
    /// The processor this stage runs.
    public let processor: any PictureProcessor
    /// What happens to late pictures.
    public let backpressure: ProcessingBackpressure
    private let clock: @Sendable () -> Int64
    /// What the stage did so far.
    public struct Statistics: Sendable {
        /// Pictures processed.
        public var processed = 0
        /// Pictures dropped by the backpressure policy (not processed, not passed on).
        public var dropped = 0
        /// Time in the processor per picture.
        public var latency = DurationHistogram()
        /// The size of the last output.
        public var lastOutputSize: FrameSize?
    }
    /// What the stage did so far (read on the pipeline's task, or after the run).
    public private(set) var statistics = Statistics()

    /// A stage running `processor`. `clock` is the capture clock (monotonic nanoseconds, what
    /// `VideoFrame.timestampNs` counts on; nil: the system's): tests give their own.
    public init(
        _ processor: any PictureProcessor, backpressure: ProcessingBackpressure = .wait,
        clock: (@Sendable () -> Int64)? = nil
    ) {
        self.processor = processor
        self.backpressure = backpressure
        self.clock = clock ?? { monotonicNanoseconds() }
    }

    /// The processed picture, or nil when the backpressure policy dropped it.
    public func apply(_ picture: I420Buffer, frame: VideoFrame) throws -> I420Buffer? {
        let start = clock()
        if case .drop(let limit) = backpressure, start &- frame.timestampNs > limit {
            statistics.dropped += 1
            return nil
        }
        let out = try processor.process(picture, frame: frame)
        statistics.latency.add(max(0, clock() &- start))
        statistics.processed += 1
        statistics.lastOutputSize = FrameSize(width: out.width, height: out.height)
        return out
    }

    /// Processes the picture and forgets the output (the session calls `apply` instead, to pass it on).
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws { _ = try apply(picture, frame: frame) }
    /// Nothing to close.
    public func end() throws {}
    /// The processor, what it did with late pictures, and its statistics (the summary's `processing` line, and
    /// "processing dropped N" on its `frames:` line when the policy dropped pictures).
    public var report: StageReport {
        .processing(ProcessingReport(processor: processor.name, backpressure: backpressure, statistics: statistics))
    }
}

/// A processor named in text (camcap's `--process`): `time` (`TimeOverlay`) or `crop=WxH+X+Y[:WxH]`
/// (`RegionCrop`, the region and optionally the size it is scaled to).
public enum ProcessingSpec: Sendable, Equatable, CustomStringConvertible {
    /// The capture time drawn on the picture.
    case time
    /// A region kept, optionally scaled.
    case crop(CropRect, FrameSize?)

    /// Parses `time` or `crop=WxH+X+Y[:WxH]`; an error names the text and what was expected.
    public static func parse(_ text: String) throws(PipelineError) -> ProcessingSpec {
        if text == "time" { return .time }
        let bad = PipelineError(
            .invalidConfiguration, "processing \"\(text)\": expected time or crop=WxH+X+Y[:WxH] (e.g. crop=640x360+320+180, crop=320x240+0+0:640x480)"
        )
        guard text.hasPrefix("crop=") else { throw bad }
        let parts = text.dropFirst(5).split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count) else { throw bad }
        let geometry = parts[0].split(separator: "+", omittingEmptySubsequences: false)
        guard geometry.count == 3, let size = FrameSize(parsing: String(geometry[0])), let x = Int(geometry[1]), let y = Int(geometry[2]) else {
            throw bad
        }
        var scaled: FrameSize?
        if parts.count == 2 {
            guard let s = FrameSize(parsing: String(parts[1])) else { throw bad }
            scaled = s
        }
        let spec = ProcessingSpec.crop(CropRect(x: x, y: y, width: size.width, height: size.height), scaled)
        do { _ = try spec.makeProcessor() } catch { throw PipelineError(.invalidConfiguration, "processing \"\(text)\": \(error.message)") }
        return spec
    }

    /// The processor (a new one: processors keep state).
    public func makeProcessor() throws(ProcessingError) -> any PictureProcessor {
        switch self {
        case .time: TimeOverlay()
        case .crop(let r, let s): try RegionCrop(region: r, outputSize: s)
        }
    }

    /// `time`, or `crop=WxH+X+Y[:WxH]`.
    public var description: String {
        switch self {
        case .time: "time"
        case .crop(let r, let s): "crop=\(r)" + (s.map { ":\($0)" } ?? "")
        }
    }
}
