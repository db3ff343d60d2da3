public import H264
public import VideoCapture
public import VideoProcessing

/// Writes H.264 into a fragmented MP4 file (ISO/IEC 14496-12 and -15): the recording format every player opens
/// (ffmpeg, GStreamer, VLC, browsers' `<video>`), with the frames' capture times as presentation times.
///
/// Layout: `ftyp`, then `moov` (one video track: `avc1` with `avcC` and, when the SPS states colour, `colr`
/// nclx; the display rotation in the track header's matrix; `mvex`), written as soon as the first key frame
/// arrives; then one `moof` + `mdat` fragment per key-frame interval, or per `Options.fragmentDurationNs` of
/// capture time when key frames are further apart. Each fragment reaches the kernel (`write(2)`) as soon as it is
/// complete, so a process killed at any moment, or a disk that fills, leaves a file that plays up to its last
/// complete fragment; the fragment being gathered is the most that is lost. `close()` adds an `mfra` index and
/// writes the duration into `mvhd`, `tkhd`, `mdhd` and `mehd`.
///
/// Timing: presentation times are the frames' `timestampNs` relative to the first frame written, in a 90 kHz
/// timescale (rounded per frame, never accumulated, so a variable frame rate is exact to 1/90000 s); a frame's
/// duration is the gap to the next frame, the last one's the gap before it. Timestamps must increase.
///
/// Parameter sets: the first key frame's SPS and PPS go into `avcC`; every IDR also keeps them in band (as a
/// remux by ffmpeg does), so a stream whose size changes (adaptation) decodes through the change. Frames before
/// the first key frame are dropped (counted in `framesDroppedBeforeKeyFrame`): a recording starts decodable.
///
/// Memory: one fragment at most (its `mdat` bytes and sample table, reused from fragment to fragment): no
/// allocation per frame once the buffers have grown to a fragment's size.
public final class FragmentedMP4Writer {
    /// How fragments are cut and what the file says about itself.
    public struct Options: Sendable {
        /// The longest fragment, in capture time: a fragment also ends at every key frame. What a crash can lose
        /// is at most one fragment. Default 1 s; 100 ms…60 s.
        public var fragmentDurationNs: Int64 = 1_000_000_000
        /// The duration given to the last frame when there is no gap before it to copy (a one-frame recording):
        /// default 1/30 s.
        public var lastFrameDurationNs: Int64 = 33_333_333
        /// The creation time written into the headers, in seconds since 1970 (default: now).
        public var creationTime: Int64?
        /// Defaults: fragments of at most 1 s, a key frame cutting each.
        public init() {}
    }

    private let file: OutputFile
    private let options: Options
    /// Frames in fragments handed to the kernel or buffered for it.
    public private(set) var framesWritten = 0
    /// Key frames among `framesWritten`.
    public private(set) var keyFramesWritten = 0
    /// Fragments written.
    public private(set) var fragmentsWritten = 0
    /// Frames handed to `write` before the first key frame with parameter sets: not written (undecodable).
    public private(set) var framesDroppedBeforeKeyFrame = 0
    /// Frames whose fragment the kernel has accepted: what a reader of the file sees now.
    public private(set) var framesOnDisk = 0
    /// Capture time of the first frame written (the zero of the file's timeline); nil before it.
    public private(set) var firstTimestampNs: Int64?
    /// Capture time of the last frame written.
    public private(set) var lastTimestampNs: Int64?
    /// The picture size from the first key frame's SPS (nil before it).
    public private(set) var size: FrameSize?

    // The fragment being gathered: length-prefixed NAL units, and per sample its size, key flag and time (90 kHz,
    // from the first frame).
    private var mdat: [UInt8] = []
    private var samples = MP4FragmentSamples()
    private var box = MP4BoxWriter() // moof + the mdat header being built
    private var fragmentIndex: [(time: Int64, offset: Int64)] = []
    private var lastTime90: Int64 = -1
    private var lastDuration90: Int64 = 0
    private var fragmentStartNs: Int64 = 0
    private var offset: Int64 = 0
    private var sps: [UInt8] = []
    private var pps: [UInt8] = []
    private var durationFields = MP4DurationFields()
    private var closed = false
    /// A write failed: the file ends at its last complete fragment and nothing more is written.
    private var failed = false

    /// Opens and locks `path` at once without truncating it (see `OutputFile`): an unwritable or busy path fails
    /// before capture starts, and an existing file is untouched until the first fragment is written.
    public convenience init(path: String, options: Options = Options()) throws(H264Error) {
        let file: OutputFile
        do { file = try OutputFile(path: path) } catch { throw H264Error(writing: error) }
        try self.init(file: file, options: options)
    }

    /// Writes into a file opened (and locked) earlier. Throws `invalidSettings` for options out of range.
    public init(file: OutputFile, options: Options = Options()) throws(H264Error) {
        guard (100_000_000...60_000_000_000).contains(options.fragmentDurationNs) else {
            throw H264Error(
                .invalidSettings, "fragment duration \(options.fragmentDurationNs) ns is out of range: 0.1...60 s", setting: "fragmentDurationNs")
        }
        guard (1_000_000...10_000_000_000).contains(options.lastFrameDurationNs) else {
            throw H264Error(
                .invalidSettings, "last frame duration \(options.lastFrameDurationNs) ns is out of range: 1 ms...10 s", setting: "lastFrameDurationNs"
            )
        }
        self.file = file
        self.options = options
        mdat.reserveCapacity(1 << 20)
        samples.sizes.reserveCapacity(512)
        samples.keys.reserveCapacity(512)
        samples.times.reserveCapacity(512)
        box = MP4BoxWriter(capacity: 512 * 12 + 256)
        fragmentIndex.reserveCapacity(4096)
    }

    /// The path of the file written.
    public var path: String { file.path }
    /// Bytes the kernel accepted.
    public var bytesWritten: Int64 { file.bytesWritten }
    /// The recording's length so far: from the first frame to the end of the last one, in nanoseconds.
    public var durationNs: Int64 {
        guard lastTime90 >= 0 else { return 0 }
        return (lastTime90 + max(lastDuration90, 1)) * 100_000 / 9
    }

    /// Appends one access unit. Frames before the first key frame that carries (or follows) SPS and PPS are
    /// dropped; a key frame, or a fragment reaching `fragmentDurationNs`, writes the fragment gathered so far.
    /// Throws `malformedBitstream` for an SPS that does not parse or a timestamp that does not increase,
    /// `writeFailed` when the file cannot be written (what was written before stays playable).
    public func write(_ frame: EncodedFrame) throws(H264Error) {
        guard !closed else { throw H264Error(.writeFailed, "\(file.path) is already closed") }
        guard !failed else { throw H264Error(.writeFailed, "\(file.path) failed earlier: it ends at its last complete fragment") }
        guard !frame.isSkipped, !frame.nalUnits.isEmpty else { return }
        var hasIDR = false
        for u in frame.nalUnits {
            guard u.offset >= 0, u.length > 0, u.offset <= frame.data.count - u.length else {
                throw H264Error("NAL unit at \(u.offset) (\(u.length) bytes) lies outside the frame's \(frame.data.count) bytes", offset: u.offset)
            }
            switch u.type {
            case .idr: hasIDR = true
            // Kept (storage reused) for the sample entry: the first ones seen before the first key frame.
            case .sps where firstTimestampNs == nil: Self.keep(frame.data[u.offset..<(u.offset + u.length)], in: &sps)
            case .pps where firstTimestampNs == nil: Self.keep(frame.data[u.offset..<(u.offset + u.length)], in: &pps)
            default: break
            }
        }
        if firstTimestampNs == nil {
            guard hasIDR, !sps.isEmpty, !pps.isEmpty else {
                framesDroppedBeforeKeyFrame += 1
                return
            }
            try begin(frame)
        }
        let first = firstTimestampNs ?? frame.timestampNs
        guard frame.timestampNs > (lastTimestampNs ?? Int64.min) else {
            throw H264Error(
                "frame timestamps must increase: \(frame.timestampNs) ns after \(lastTimestampNs ?? 0) ns (\(file.path), frame \(framesWritten + 1))",
                offset: 0)
        }
        let (elapsed, overflow) = frame.timestampNs.subtractingReportingOverflow(first)
        guard !overflow, elapsed < Int64.max / 9 else {
            throw H264Error("frame timestamp \(frame.timestampNs) ns is too far from the first (\(first) ns)", offset: 0)
        }
        // 90 kHz, rounded from the first frame's time (no accumulated error); at least one tick after the last.
        let t90 = max((elapsed * 9 + 50_000) / 100_000, lastTime90 + 1)
        if samples.count > 0 && (hasIDR || frame.timestampNs - fragmentStartNs >= options.fragmentDurationNs) {
            try writeFragment(nextTime90: t90)
        }
        if samples.count == 0 { fragmentStartNs = frame.timestampNs }
        let before = mdat.count
        for u in frame.nalUnits {
            let n = UInt32(u.length)
            mdat.append(UInt8(n >> 24))
            mdat.append(UInt8(n >> 16 & 0xff))
            mdat.append(UInt8(n >> 8 & 0xff))
            mdat.append(UInt8(n & 0xff))
            mdat.append(contentsOf: frame.data[u.offset..<(u.offset + u.length)])
        }
        samples.sizes.append(UInt32(mdat.count - before))
        samples.keys.append(hasIDR)
        samples.times.append(t90)
        if lastTime90 >= 0 { lastDuration90 = t90 - lastTime90 }
        lastTime90 = t90
        lastTimestampNs = frame.timestampNs
        framesWritten += 1
        if hasIDR { keyFramesWritten += 1 }
    }

    private static func keep(_ bytes: ArraySlice<UInt8>, in stored: inout [UInt8]) {
        stored.removeAll(keepingCapacity: true)
        stored.append(contentsOf: bytes)
    }

    /// Writes the fragment gathered (its last frame lasting until `nextTime90`).
    private func writeFragment(nextTime90: Int64) throws(H264Error) {
        let count = samples.count
        guard count > 0 else { return }
        guard mdat.count <= Int(UInt32.max) - 8 else {
            throw H264Error(.writeFailed, "a fragment of \(mdat.count) bytes is too large for one mdat box (\(file.path))")
        }
        samples.end = nextTime90
        box.removeAll()
        box.moof(sequence: UInt32(truncatingIfNeeded: fragmentsWritten + 1), samples)
        box.mdatHeader(payload: mdat.count)
        try commit(&box.bytes, then: mdat)
        fragmentIndex.append((samples.times[0], offset))
        offset += Int64(box.bytes.count + mdat.count)
        fragmentsWritten += 1
        framesOnDisk += count
        lastDuration90 = nextTime90 - samples.times[count - 1]
        mdat.removeAll(keepingCapacity: true)
        samples.sizes.removeAll(keepingCapacity: true)
        samples.keys.removeAll(keepingCapacity: true)
        samples.times.removeAll(keepingCapacity: true)
    }

    /// Hands a unit (a fragment, the index) to the kernel so that a reader never meets half of it. On a file it
    /// is written as a `free` box, and turned into what it is (its 4-byte type rewritten) only once every byte is
    /// in: a process killed mid-write leaves a `free` box that demuxers skip (ffmpeg refuses a whole file whose
    /// last `moof` is cut short). A write that fails (a full disk) cuts the file back to the unit's start and
    /// leaves the writer failed: what was written before stays playable, and nothing more is written.
    private func commit(_ head: inout [UInt8], then body: [UInt8]) throws(H264Error) {
        let rewrite = file.isRewritable
        for i in 0..<4 { typeScratch[i] = head[4 + i] } // storage reused: nothing allocated per fragment
        let type = typeScratch
        if rewrite { for i in 0..<4 { head[4 + i] = Self.freeType[i] } }
        do {
            try file.write(head)
            try file.write(body)
            try file.flush()
            if rewrite { try file.overwrite(at: offset + 4, type) }
        } catch {
            failed = true
            try? file.truncate(to: offset)
            throw H264Error(writing: error)
        }
    }
    private static let freeType: [UInt8] = Array("free".utf8)
    private var typeScratch: [UInt8] = [0, 0, 0, 0]

    /// ftyp + moov for the first key frame's parameter sets and rotation, written at once.
    private func begin(_ frame: EncodedFrame) throws(H264Error) {
        let parsed = try SequenceParameterSet(nal: sps[...])
        guard sps.count <= 0xffff, pps.count <= 0xffff, sps.count >= 4 else {
            throw H264Error("parameter sets too large or too short for avcC (SPS \(sps.count), PPS \(pps.count) bytes)", offset: 0)
        }
        size = FrameSize(width: parsed.width, height: parsed.height)
        firstTimestampNs = frame.timestampNs
        // Seconds since 1904 (the format's epoch).
        let now = options.creationTime ?? (monotonicNanoseconds() + realtimeMinusMonotonicNs()) / 1_000_000_000
        let track = MP4VideoTrack(created: UInt64(clamping: now + 2_082_844_800), sps: sps, pps: pps, parameters: parsed, rotation: frame.rotation)
        var header = MP4BoxWriter(capacity: 1024 + sps.count + pps.count)
        header.ftyp()
        durationFields = header.moov(track)
        do {
            try file.write(header.bytes)
            try file.flush()
        } catch {
            failed = true
            throw H264Error(writing: error)
        }
        offset = Int64(header.bytes.count)
    }

    /// Writes the last fragment, the `mfra` index and the durations, then syncs and closes the file. The last
    /// frame lasts until `nextTimestampNs` when given (the next segment's first frame: segments then join without
    /// a gap), else as long as the frame before it. A recording with no key frame written is closed empty.
    public func close(nextTimestampNs: Int64? = nil) throws(H264Error) {
        guard !closed else { return }
        closed = true
        do {
            if let first = firstTimestampNs, !failed {
                let last = samples.times.last ?? lastTime90
                var gap = lastDuration90 > 0 ? lastDuration90 : max(1, (options.lastFrameDurationNs * 9 + 50_000) / 100_000)
                if let next = nextTimestampNs, let lastNs = lastTimestampNs, next > lastNs, next - first < Int64.max / 9 {
                    gap = max(1, ((next - first) * 9 + 50_000) / 100_000 - last)
                }
                if samples.count > 0 { try writeFragment(nextTime90: last + gap) }
                try writeIndex()
                try file.flush()
                let total90 = lastTime90 + lastDuration90
                let media = MP4BoxWriter.bigEndian(UInt64(max(0, total90)))
                try file.overwrite(at: Int64(durationFields.mdhd), media)
                try file.overwrite(at: Int64(durationFields.mehd), media)
                let movie = MP4BoxWriter.bigEndian(UInt64(max(0, (total90 + 45) / 90))) // ms
                try file.overwrite(at: Int64(durationFields.mvhd), movie)
                try file.overwrite(at: Int64(durationFields.tkhd), movie)
            }
            try file.close()
        } catch let error as H264Error {
            try? file.close() // what was written is kept (the failed unit was cut off)
            throw error
        } catch let error as ProcessingError {
            try? file.close()
            throw H264Error(writing: error)
        } catch {
            try? file.close()
            throw H264Error(.writeFailed, "\(file.path): \(error)")
        }
    }

    /// Gives the file up (see `OutputFile.discard()`): for a start that failed before anything was written.
    public func discard() {
        closed = true
        file.discard()
    }

    /// The `mfra` index, handed to the kernel as a fragment is.
    private func writeIndex() throws(H264Error) {
        var index = MP4BoxWriter(capacity: 64 + fragmentIndex.count * 19)
        index.mfra(fragmentIndex)
        try commit(&index.bytes, then: [])
        offset += Int64(index.bytes.count)
    }
}
