public import H264
public import VideoCapture
public import VideoProcessing

/// Writes an Annex-B `.h264` elementary stream that `ffplay -f h264` plays from any IDR: every IDR access
/// unit is preceded by SPS and PPS (the last ones seen are inserted when an encoder leaves them out).
///
/// A raw stream has no timestamps: players take the rate from the SPS's VUI `timing_info`, or assume 25 fps.
/// With `frameRate` set, every SPS written states that rate (see `SequenceParameterSet.withTiming`), so
/// `ffplay capture.h264` plays a 30 fps capture at 30. A variable rate (a camera in low light, adaptation) is not
/// representable here: record to MP4 (`FragmentedMP4Writer`) for exact times.
///
/// The file is buffered (64 KiB); `flushPolicy` says when the buffer also goes to the kernel between fills:
/// recordings flush once a second of capture time (`FlushPolicy.recording`), so a crash loses at most about a second.
public final class AnnexBWriter {
    /// When the writer hands its buffer to the kernel, besides a full buffer, `flush()` and `close()`.
    public enum FlushPolicy: Sendable, Equatable {
        /// Only then: the owner flushes.
        case whenFull
        /// Also after a frame that comes at least this many nanoseconds of capture time after the last flush
        /// (counted from the first frame written): a crash loses at most about that much of the recording.
        case everyCaptureInterval(nanoseconds: Int64)
        /// What recordings use (`camcap record`, `RecordingOutput`, `AnnexBFileOutput`): once a second of capture.
        public static let recording = FlushPolicy.everyCaptureInterval(nanoseconds: 1_000_000_000)
    }

    private let file: OutputFile
    /// The rate each SPS states (VUI timing); nil writes the SPS as the encoder made it.
    public let frameRate: Fraction?
    /// When the buffer goes to the kernel between fills.
    public let flushPolicy: FlushPolicy
    /// Capture time of the last flush by the policy (the first frame's, before any).
    private var lastFlushNs: Int64?
    private var sps: [UInt8]?
    /// The last SPS as received, to rewrite only a new one (an SPS comes with every key frame).
    private var receivedSPS: [UInt8] = []
    private var pps: [UInt8]?
    /// Frames handed to `write` (some may still be buffered: see `framesOnDisk`).
    public private(set) var framesWritten = 0
    /// Frames handed to `write(_:)` that contained an IDR.
    public private(set) var keyFramesWritten = 0
    private static let startCode: [UInt8] = [0, 0, 0, 1]
    /// End offsets of frames still (partly) in the buffer, oldest first; capacity reserved once.
    private var pendingFrameEnds: [Int64] = []
    private var framesFlushed = 0
    private var offset: Int64 = 0

    /// Opens and locks `path` at once without truncating it (see `OutputFile`), so an unwritable or busy path
    /// fails before capture starts and an existing file is untouched until the first frames are flushed.
    public convenience init(path: String, frameRate: Fraction? = nil, flushPolicy: FlushPolicy = .whenFull) throws(H264Error) {
        let file: OutputFile
        do { file = try OutputFile(path: path) } catch { throw H264Error(writing: error) }
        self.init(file: file, frameRate: frameRate, flushPolicy: flushPolicy)
    }
    /// Writes into a file opened (and locked) earlier; with `frameRate`, each SPS states that rate.
    public init(file: OutputFile, frameRate: Fraction? = nil, flushPolicy: FlushPolicy = .whenFull) {
        self.file = file
        self.frameRate = frameRate.flatMap { $0.numerator > 0 ? $0 : nil }
        self.flushPolicy = flushPolicy
        pendingFrameEnds.reserveCapacity(1024)
    }
    /// The path of the file written.
    public var path: String { file.path }
    /// Bytes the kernel accepted (not counting what is still buffered).
    public var bytesWritten: Int64 { file.bytesWritten }
    /// Frames whose every byte the kernel accepted: what a reader of the file sees now.
    public var framesOnDisk: Int {
        let onDisk = file.bytesWritten
        return framesFlushed + pendingFrameEnds.prefix { $0 <= onDisk }.count
    }

    private static func keep(_ bytes: ArraySlice<UInt8>, in stored: inout [UInt8]?) {
        if stored == nil { stored = [] }
        stored!.removeAll(keepingCapacity: true)
        stored!.append(contentsOf: bytes)
    }

    /// Appends one encoded frame's NAL units with 4-byte start codes, putting the last SPS and PPS seen before
    /// an IDR that lacks them, then flushes when `flushPolicy` says so. Skipped and empty frames are ignored.
    /// Throws `writeFailed` when the file cannot be written, or for an IDR before any SPS/PPS has been seen (the
    /// stream would not decode).
    public func write(_ frame: EncodedFrame) throws(H264Error) {
        guard !frame.isSkipped, !frame.nalUnits.isEmpty else { return }
        let hasIDR = frame.nalUnits.contains { $0.type == .idr }
        var sawSPS = false, sawPPS = false
        for u in frame.nalUnits {
            let bytes = frame.data[u.offset..<(u.offset + u.length)]
            switch u.type {
            // Kept in place (their storage reused): a key frame every few seconds allocates nothing.
            case .sps:
                sawSPS = true
                guard let frameRate else {
                    Self.keep(bytes, in: &sps)
                    break
                }
                if sps == nil || !receivedSPS.elementsEqual(bytes) { // a new SPS: rewritten once, then reused
                    receivedSPS.removeAll(keepingCapacity: true)
                    receivedSPS.append(contentsOf: bytes)
                    sps = try SequenceParameterSet.withTiming(bytes, framesPerSecond: frameRate)
                }
                try unit(sps![...])
                continue
            case .pps:
                Self.keep(bytes, in: &pps)
                sawPPS = true
            case .idr where !(sawSPS && sawPPS):
                guard let sps, let pps else {
                    throw H264Error(.writeFailed, "IDR frame without SPS/PPS and none seen before: the stream would not be decodable (\(file.path))")
                }
                try unit(sps[...])
                try unit(pps[...])
                sawSPS = true
                sawPPS = true
            default: break
            }
            try unit(bytes)
        }
        framesWritten += 1
        if hasIDR { keyFramesWritten += 1 }
        settle()
        if pendingFrameEnds.count == pendingFrameEnds.capacity { try flush() }
        pendingFrameEnds.append(offset)
        settle()
        try flushIfDue(at: frame.timestampNs)
    }

    /// The one flush policy: the first frame starts the count; a frame `interval` or more after the last flush
    /// flushes.
    private func flushIfDue(at timestampNs: Int64) throws(H264Error) {
        guard case .everyCaptureInterval(let interval) = flushPolicy else { return }
        guard let last = lastFlushNs else {
            lastFlushNs = timestampNs
            return
        }
        if timestampNs - last >= interval {
            try flush()
            lastFlushNs = timestampNs
        }
    }

    /// Moves frames the kernel has fully accepted out of the pending list.
    private func settle() {
        let onDisk = file.bytesWritten
        var k = 0
        while k < pendingFrameEnds.count && pendingFrameEnds[k] <= onDisk { k += 1 }
        if k > 0 {
            pendingFrameEnds.removeFirst(k)
            framesFlushed += k
        }
    }

    private func unit(_ bytes: ArraySlice<UInt8>) throws(H264Error) {
        do {
            try file.write(Self.startCode)
            try file.write(bytes)
        } catch { throw H264Error(writing: error) }
        offset += Int64(Self.startCode.count + bytes.count)
    }

    /// Flushes to the kernel (called periodically, so an interrupted recording keeps what it wrote).
    public func flush() throws(H264Error) {
        defer { settle() }
        do { try file.flush() } catch { throw H264Error(writing: error) }
    }
    /// Flushes, syncs and closes; afterwards `bytesWritten` and `framesOnDisk` are final.
    public func close() throws(H264Error) {
        defer { settle() }
        do { try file.close() } catch { throw H264Error(writing: error) }
    }
    /// Gives the file up (see `OutputFile.discard()`): for a start that failed before anything was written.
    public func discard() { file.discard() }
}
