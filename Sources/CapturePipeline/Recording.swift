import Foundation
public import H264
public import Recording
public import VideoCapture
import Synchronization
import VideoProcessing

/// A recording of encoded frames to files: one file or a ring of segments, as fragmented MP4 or raw Annex-B
/// H.264. What `camcap record` and `stream --output` write; an app adds it to an `EncodeStage`'s outputs.
///
/// What a crash (SIGKILL, power loss after the kernel wrote back, a full disk) can lose:
/// - **MP4**: at most the fragment being gathered, one key-frame interval or `fragmentSeconds` of capture
///   (default 1 s), whichever is shorter. Every complete fragment is in the kernel's hands as soon as it ends, and
///   the file plays up to it; only the `mfra` index and the duration fields written at a clean end are missing.
/// - **Annex-B**: at most about one second of capture (it is flushed once a second of capture time, and whenever
///   its 64 KiB buffer fills); a frame cut in the middle is skipped by decoders.
/// - **Segments**: each closed segment is complete (synced to the disk when it closed); only the open one is at
///   risk, as above.
public final class RecordingOutput: EncodedOutput {
    /// The file format.
    public enum Container: String, Sendable, CaseIterable {
        /// ISO BMFF fragmented MP4 (`FragmentedMP4Writer`): timestamps, rotation, colour; every player.
        case mp4
        /// A raw Annex-B H.264 elementary stream (`AnnexBWriter`), with the nominal rate in the SPS.
        case h264

        /// The container a file name asks for: `.mp4`, `.m4v` and `.mov` are MP4, anything else Annex-B.
        public init(forPath path: String) {
            switch (path as NSString).pathExtension.lowercased() {
            case "mp4", "m4v", "mov": self = .mp4
            default: self = .h264
            }
        }
    }

    /// What to write and how to cut it.
    public struct Configuration: Sendable {
        /// The output path. With segments it is a pattern: strftime's `%Y %m %d %H %M %S …` are replaced by the
        /// local time at which the segment starts; a pattern without `%` gets `-NNN` (the segment's number) before
        /// its extension. Segment files are created exclusively: a name on disk is never reused (a numbered ring
        /// continues after the highest number on disk, a taken strftime name gets `_001`, `_002` …), and the
        /// directories below the pattern's first `%` are made as needed (see `SegmentRing` in docs/record.md).
        public var path: String
        /// The file format (default: from the path's extension).
        public var container: Container
        /// The camera's nominal frame rate: written into the SPS of an Annex-B file (VUI timing).
        public var frameRate: Fraction?
        /// Start a new file at the first key frame this long after the current one started (a key frame is asked
        /// of the encoder when it is due); nil: one file.
        public var segmentSeconds: Double?
        /// Keep at most this many segment files, deleting the oldest this recording wrote; nil keeps all.
        public var keep: Int?
        /// Which files `keep` counts and deletes: this run's (default), or the whole ring of the pattern on disk,
        /// earlier runs' files first.
        public var keepScope: KeepScope = .run
        /// The longest MP4 fragment (seconds of capture); a key frame also ends one.
        public var fragmentSeconds: Double = 1

        /// One file at `path`, in `container` (nil: the format from the extension).
        public init(path: String, frameRate: Fraction? = nil, container: Container? = nil) {
            self.path = path
            self.container = container ?? Container(forPath: path)
            self.frameRate = frameRate
        }

        /// Refuses values that cannot work, naming them: `invalidArgument`.
        public func validate() throws(PipelineError) {
            if segmentSeconds != nil && path == OutputFile.standardOutput {
                throw PipelineError(.invalidConfiguration, "segments need a file pattern: standard output (-) is one stream")
            }
            if let s = segmentSeconds, !(s.isFinite && s >= 0.5 && s <= 86_400) {
                throw PipelineError(.invalidConfiguration, "segment length \(s) s is out of range: 0.5...86400 s")
            }
            if let k = keep {
                guard segmentSeconds != nil else {
                    throw PipelineError(.invalidConfiguration, "keeping \(k) files needs segments (a segment length)")
                }
                guard (1...100_000).contains(k) else { throw PipelineError(.invalidConfiguration, "keep \(k) is out of range: 1...100000 files") }
            } else if keepScope != .run {
                throw PipelineError(.invalidConfiguration, "keep scope \(keepScope.rawValue) needs a number of files to keep")
            }
            guard fragmentSeconds.isFinite, (0.1...60).contains(fragmentSeconds) else {
                throw PipelineError(.invalidConfiguration, "fragment length \(fragmentSeconds) s is out of range: 0.1...60 s")
            }
            guard !path.isEmpty else { throw PipelineError(.invalidConfiguration, "the output path is empty") }
        }
    }

    /// One file being written.
    private enum Sink {
        case mp4(FragmentedMP4Writer)
        case annexB(AnnexBWriter)

        /// Path, frames and bytes, whatever the format.
        var file: any RecordingFile {
            switch self {
            case .mp4(let w): w
            case .annexB(let w): w
            }
        }
    }

    /// A segment written and closed (module `Recording`).
    public typealias Segment = RecordedSegment
    /// Which files `keep` counts and deletes (module `Recording`).
    public typealias KeepScope = SegmentKeepScope

    /// The configuration given.
    public let configuration: Configuration
    private var sink: Sink
    /// The files' names, the segments closed and the deletion of old ones.
    private var ring: SegmentRing
    private var segmentStartNs: Int64?
    private var recordingStartNs: Int64?
    private var keyFrameAsked = false
    private var lastTimestampNs: Int64?
    /// The progress figures, published by the writing thread for the progress line (another thread).
    private let published = Mutex((segment: 1, fragments: 0))
    /// The last segments closed (with `segmentSeconds`), oldest first: at most `keep` or 100, whichever is more,
    /// so that a ring's memory stays the same over any length (`segmentsWritten` counts them all).
    public var segments: [Segment] { Array(ring.segments) }
    /// Segments closed so far, all of them.
    public var segmentsWritten: Int { ring.written }
    /// Called (on the writing thread) when a segment is due and the next key frame should come now. The stage
    /// the output is given to sets it (`connect(keyFrames:)`: `EncodeStage`, `PassthroughStage`); set it yourself
    /// only to feed the output from something else.
    public var keyFrameNeeded: (@Sendable () -> Void)?

    /// Asks `control` for the key frame a new segment starts with, unless `keyFrameNeeded` is already set: what
    /// `EncodeStage` and `PassthroughStage` call for their outputs, so segments are `segmentSeconds` long whatever
    /// the key-frame interval.
    public func connect(keyFrames control: EncoderControl) {
        if keyFrameNeeded == nil { keyFrameNeeded = { control.requestKeyFrame() } }
    }
    /// Written by one thread at a time (the encoder's, or the pipeline's).
    public var acceptsWritesFromEncoderThread: Bool { true }

    /// Checks the configuration and claims the first file at once (see `OutputFile`): an unwritable or busy
    /// path throws before the camera starts.
    public init(_ configuration: Configuration) throws {
        try configuration.validate()
        self.configuration = configuration
        ring = SegmentRing(
            pattern: configuration.path, segmented: configuration.segmentSeconds != nil, keep: configuration.keep, scope: configuration.keepScope)
        sink = try Self.open(configuration, ring: &ring)
    }

    /// The path of the file being written now.
    public var currentPath: String { sink.file.path }

    /// The ring's next file (created exclusively for a segment) with the writer of the container.
    private static func open(_ configuration: Configuration, ring: inout SegmentRing) throws -> Sink {
        let file: OutputFile
        do { file = try ring.nextFile() } catch { throw H264Error(writing: error) }
        switch configuration.container {
        case .mp4:
            var options = FragmentedMP4Writer.Options()
            options.fragmentDurationNs = Int64(configuration.fragmentSeconds * 1e9)
            return .mp4(try FragmentedMP4Writer(file: file, options: options))
        case .h264:
            return .annexB(AnnexBWriter(file: file, frameRate: configuration.frameRate, flushPolicy: .recording))
        }
    }

    /// Appends the frame to the current file; at a key frame past the segment length, closes it and starts the
    /// next one (the key frame opens the new file).
    public func write(_ frame: EncodedFrame) throws {
        guard !frame.isSkipped, !frame.nalUnits.isEmpty else { return }
        if recordingStartNs == nil { recordingStartNs = frame.timestampNs }
        if let seconds = configuration.segmentSeconds, let start = segmentStartNs, sink.file.framesWritten > 0 {
            // Due within a millisecond (a 30 fps clock reaches 2 s at 1999.99998 ms); the key frame is asked for
            // one frame early, so that the frame that falls due is one.
            let elapsed = Double(frame.timestampNs - start), length = seconds * 1e9 - 1e6
            if frame.isKeyFrame && (elapsed >= length || startsAnotherSize(frame)) {
                try nextSegment(at: frame.timestampNs)
            } else if elapsed + Double(frame.timestampNs - (lastTimestampNs ?? frame.timestampNs)) >= length && !keyFrameAsked {
                keyFrameAsked = true
                keyFrameNeeded?()
            }
        }
        lastTimestampNs = frame.timestampNs
        let before = sink.file.framesWritten
        switch sink {
        case .mp4(let w): try w.write(frame)
        case .annexB(let w): try w.write(frame) // flushed once a second of capture (`FlushPolicy.recording`)
        }
        if segmentStartNs == nil && sink.file.framesWritten > before { segmentStartNs = frame.timestampNs }
        if case .mp4(let w) = sink {
            let fragments = w.fragmentsWritten, segment = ring.written + 1
            published.withLock { $0 = (segment, fragments) }
        }
    }

    /// True for a key frame of another picture size than the open MP4 segment's (the camera's source changed, or the
    /// output adapted): a segmented recording then starts a new segment, whose header says the new size, so that a
    /// player that trusts the header (a browser's MSE) follows too. One file keeps the new SPS in band instead.
    private func startsAnotherSize(_ frame: EncodedFrame) -> Bool {
        guard case .mp4(let w) = sink, let current = w.size, let sps = frame.parameterSets?.sps,
            let parsed = try? SequenceParameterSet(nal: sps[...])
        else { return false }
        return parsed.width != current.width || parsed.height != current.height
    }

    private func nextSegment(at timestampNs: Int64) throws {
        let closing = sink
        try close(closing, next: timestampNs)
        closeSegment(closing)
        sink = try Self.open(configuration, ring: &ring)
        segmentStartNs = nil
        keyFrameAsked = false
        try prune(open: 1)
    }

    private func closeSegment(_ closed: Sink) {
        ring.closed(path: closed.file.path, frames: closed.file.framesWritten, startNs: (segmentStartNs ?? 0) - (recordingStartNs ?? 0))
    }

    /// Deletes the oldest segments so that at most `keep` files exist, `open` of them still being written.
    private func prune(open: Int) throws {
        do { try ring.prune(open: open) } catch { throw PipelineError(.outputFailed, error.reason) }
    }

    private func close(_ sink: Sink, next: Int64?) throws {
        switch sink {
        case .mp4(let w): try w.close(nextTimestampNs: next)
        case .annexB(let w): try w.close()
        }
    }

    /// Closes the current file (finishing an MP4 with its index and durations) and records it as a segment.
    public func end() throws {
        try close(sink, next: nil)
        if configuration.segmentSeconds != nil {
            closeSegment(sink)
            try prune(open: 0)
        }
    }

    /// Gives the current file up (nothing was encoded); closed segments stay.
    public func discard() { sink.file.discard() }

    /// Fragments written to the current MP4 file, and the segment being written.
    public var progress: String? {
        var parts: [String] = []
        let (segment, fragments) = published.withLock { $0 }
        if configuration.segmentSeconds != nil { parts.append("segment \(segment)") }
        if configuration.container == .mp4 { parts.append("\(fragments) fragments") }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// The file being written while no byte has reached it.
    public var unwrittenFile: String? { ring.written == 0 && sink.file.bytesWritten == 0 ? sink.file.path : nil }
    /// The file written (one file), or the ring's segments and the earlier runs' files of the ring that hold no frame
    /// (0 bytes or an MP4 header only, what a SIGKILL leaves), never counted as segments.
    public var recordingReport: RecordingReport {
        var r = RecordingReport(container: configuration.container, path: sink.file.path)
        (r.bytes, r.framesOnDisk) = (sink.file.bytesWritten, sink.file.framesOnDisk)
        if case .mp4(let w) = sink { r.mp4 = (w.fragmentsWritten, w.durationNs, w.framesDroppedBeforeKeyFrame) }
        guard configuration.segmentSeconds != nil else { return r }
        var ring = RecordingReport.Ring()
        (ring.written, ring.deleted, ring.deletedEarlier, ring.frames) = (
            self.ring.written, self.ring.deleted, self.ring.deletedEarlier, self.ring.framesBefore
        )
        ring.segments = Array(self.ring.segments)
        (ring.emptyLeftovers, ring.namedLeftovers) = self.ring.emptyLeftovers
        r.ring = ring
        return r
    }
    /// `.recording(recordingReport)`.
    public var report: OutputReport { .recording(recordingReport) }
}
