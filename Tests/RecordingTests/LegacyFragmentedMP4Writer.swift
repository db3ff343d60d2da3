// TEMPORARY: the writer as it was in H264 before the move, to prove the new one writes the same bytes.
import VideoCapture
import VideoProcessing
import H264

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
final class LegacyFragmentedMP4Writer {
    /// How fragments are cut and what the file says about itself.
    struct Options: Sendable {
        /// The longest fragment, in capture time: a fragment also ends at every key frame. What a crash can lose
        /// is at most one fragment. Default 1 s; 100 ms…60 s.
        var fragmentDurationNs: Int64 = 1_000_000_000
        /// The duration given to the last frame when there is no gap before it to copy (a one-frame recording):
        /// default 1/30 s.
        var lastFrameDurationNs: Int64 = 33_333_333
        /// The creation time written into the headers, in seconds since 1970 (default: now).
        var creationTime: Int64?
        /// Defaults: fragments of at most 1 s, a key frame cutting each.
        init() {}
    }

    private let file: OutputFile
    private let options: Options
    /// Frames in fragments handed to the kernel or buffered for it.
    private(set) var framesWritten = 0
    /// Key frames among `framesWritten`.
    private(set) var keyFramesWritten = 0
    /// Fragments written.
    private(set) var fragmentsWritten = 0
    /// Frames handed to `write` before the first key frame with parameter sets: not written (undecodable).
    private(set) var framesDroppedBeforeKeyFrame = 0
    /// Frames whose fragment the kernel has accepted: what a reader of the file sees now.
    private(set) var framesOnDisk = 0
    /// Capture time of the first frame written (the zero of the file's timeline); nil before it.
    private(set) var firstTimestampNs: Int64?
    /// Capture time of the last frame written.
    private(set) var lastTimestampNs: Int64?
    /// The picture size from the first key frame's SPS (nil before it).
    private(set) var size: FrameSize?

    // The fragment being gathered: length-prefixed NAL units, and per sample its size, key flag and time.
    private var mdat: [UInt8] = []
    private var sampleSizes: [UInt32] = []
    private var sampleKey: [Bool] = []
    private var sampleTimes: [Int64] = [] // 90 kHz, from the first frame
    private var box: [UInt8] = [] // moof being built
    private var fragmentIndex: [(time: Int64, offset: Int64)] = []
    private var lastTime90: Int64 = -1
    private var lastDuration90: Int64 = 0
    private var fragmentStartNs: Int64 = 0
    private var offset: Int64 = 0
    private var sps: [UInt8] = []
    private var pps: [UInt8] = []
    private var durationFieldOffsets: (mvhd: Int64, tkhd: Int64, mdhd: Int64, mehd: Int64) = (0, 0, 0, 0)
    private var closed = false
    /// A write failed: the file ends at its last complete fragment and nothing more is written.
    private var failed = false

    /// Opens and locks `path` at once without truncating it (see `OutputFile`): an unwritable or busy path fails
    /// before capture starts, and an existing file is untouched until the first fragment is written.
    convenience init(path: String, options: Options = Options()) throws(H264Error) {
        let file: OutputFile
        do { file = try OutputFile(path: path) } catch { throw H264Error(.writeFailed, "\(error)") }
        try self.init(file: file, options: options)
    }

    /// Writes into a file opened (and locked) earlier. Throws `invalidSettings` for options out of range.
    init(file: OutputFile, options: Options = Options()) throws(H264Error) {
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
        sampleSizes.reserveCapacity(512)
        sampleKey.reserveCapacity(512)
        sampleTimes.reserveCapacity(512)
        box.reserveCapacity(512 * 12 + 256)
        fragmentIndex.reserveCapacity(4096)
    }

    /// The path of the file written.
    var path: String { file.path }
    /// Bytes the kernel accepted.
    var bytesWritten: Int64 { file.bytesWritten }
    /// The recording's length so far: from the first frame to the end of the last one, in nanoseconds.
    var durationNs: Int64 {
        guard lastTime90 >= 0 else { return 0 }
        return (lastTime90 + max(lastDuration90, 1)) * 100_000 / 9
    }

    /// Appends one access unit. Frames before the first key frame that carries (or follows) SPS and PPS are
    /// dropped; a key frame, or a fragment reaching `fragmentDurationNs`, writes the fragment gathered so far.
    /// Throws `malformedBitstream` for an SPS that does not parse or a timestamp that does not increase,
    /// `writeFailed` when the file cannot be written (what was written before stays playable).
    func write(_ frame: EncodedFrame) throws(H264Error) {
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
        if !sampleTimes.isEmpty && (hasIDR || frame.timestampNs - fragmentStartNs >= options.fragmentDurationNs) {
            try writeFragment(nextTime90: t90)
        }
        if sampleTimes.isEmpty { fragmentStartNs = frame.timestampNs }
        let before = mdat.count
        for u in frame.nalUnits {
            let n = UInt32(u.length)
            mdat.append(UInt8(n >> 24))
            mdat.append(UInt8(n >> 16 & 0xff))
            mdat.append(UInt8(n >> 8 & 0xff))
            mdat.append(UInt8(n & 0xff))
            mdat.append(contentsOf: frame.data[u.offset..<(u.offset + u.length)])
        }
        sampleSizes.append(UInt32(mdat.count - before))
        sampleKey.append(hasIDR)
        sampleTimes.append(t90)
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
        let count = sampleTimes.count
        guard count > 0 else { return }
        box.removeAll(keepingCapacity: true)
        let moof = begin(&box, "moof")
        let mfhd = fullBox(&box, "mfhd", version: 0, flags: 0)
        put32(&box, UInt32(truncatingIfNeeded: fragmentsWritten + 1))
        end(&box, mfhd)
        let traf = begin(&box, "traf")
        let tfhd = fullBox(&box, "tfhd", version: 0, flags: 0x020000) // default-base-is-moof
        put32(&box, 1)
        end(&box, tfhd)
        let tfdt = fullBox(&box, "tfdt", version: 1, flags: 0)
        put64(&box, UInt64(sampleTimes[0]))
        end(&box, tfdt)
        // data-offset, sample duration, size and flags present.
        let trun = fullBox(&box, "trun", version: 0, flags: 0x000001 | 0x000100 | 0x000200 | 0x000400)
        put32(&box, UInt32(count))
        let dataOffsetAt = box.count
        put32(&box, 0)
        for i in 0..<count {
            let next = i + 1 < count ? sampleTimes[i + 1] : nextTime90
            put32(&box, UInt32(clamping: next - sampleTimes[i]))
            put32(&box, sampleSizes[i])
            // A sync sample depends on nothing; the others depend on earlier ones and are not sync samples.
            put32(&box, sampleKey[i] ? 0x0200_0000 : 0x0101_0000)
        }
        end(&box, trun)
        end(&box, traf)
        end(&box, moof)
        let moofSize = box.count
        set32(&box, at: dataOffsetAt, UInt32(moofSize + 8))
        let mdatSize = UInt64(mdat.count) + 8
        guard mdatSize <= UInt64(UInt32.max) else {
            throw H264Error(.writeFailed, "a fragment of \(mdat.count) bytes is too large for one mdat box (\(file.path))")
        }
        put32(&box, UInt32(mdatSize))
        putType(&box, "mdat")
        try commit(&box, then: mdat)
        fragmentIndex.append((sampleTimes[0], offset))
        offset += Int64(box.count + mdat.count)
        fragmentsWritten += 1
        framesOnDisk += count
        lastDuration90 = nextTime90 - sampleTimes[count - 1]
        mdat.removeAll(keepingCapacity: true)
        sampleSizes.removeAll(keepingCapacity: true)
        sampleKey.removeAll(keepingCapacity: true)
        sampleTimes.removeAll(keepingCapacity: true)
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
            throw H264Error(.writeFailed, "\(error)")
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
        let created = UInt64(clamping: now + 2_082_844_800)
        var b: [UInt8] = []
        b.reserveCapacity(1024 + sps.count + pps.count)
        let ftyp = begin(&b, "ftyp")
        putType(&b, "isom")
        put32(&b, 0x200)
        for brand in ["isom", "iso2", "iso5", "iso6", "avc1", "mp41"] { putType(&b, brand) }
        end(&b, ftyp)
        let moov = begin(&b, "moov")
        let mvhd = fullBox(&b, "mvhd", version: 1, flags: 0)
        put64(&b, created)
        put64(&b, created)
        put32(&b, 1000) // movie timescale: ms
        let mvhdDuration = b.count
        put64(&b, 0)
        put32(&b, 0x0001_0000) // rate 1.0
        put16(&b, 0x0100) // volume 1.0
        putZeros(&b, 10)
        putMatrix(&b, .rotation0, width: 0, height: 0)
        putZeros(&b, 24)
        put32(&b, 2) // next_track_ID
        end(&b, mvhd)
        let trak = begin(&b, "trak")
        let tkhd = fullBox(&b, "tkhd", version: 1, flags: 0x3) // enabled, in the movie
        put64(&b, created)
        put64(&b, created)
        put32(&b, 1) // track_ID
        put32(&b, 0)
        let tkhdDuration = b.count
        put64(&b, 0)
        putZeros(&b, 8)
        put16(&b, 0) // layer
        put16(&b, 0) // alternate_group
        put16(&b, 0) // volume (video)
        put16(&b, 0)
        putMatrix(&b, frame.rotation, width: parsed.width, height: parsed.height)
        put32(&b, UInt32(parsed.width) << 16)
        put32(&b, UInt32(parsed.height) << 16)
        end(&b, tkhd)
        let mdia = begin(&b, "mdia")
        let mdhd = fullBox(&b, "mdhd", version: 1, flags: 0)
        put64(&b, created)
        put64(&b, created)
        put32(&b, 90_000)
        let mdhdDuration = b.count
        put64(&b, 0)
        put16(&b, 0x55c4) // language "und"
        put16(&b, 0)
        end(&b, mdhd)
        let hdlr = fullBox(&b, "hdlr", version: 0, flags: 0)
        put32(&b, 0)
        putType(&b, "vide")
        putZeros(&b, 12)
        b.append(contentsOf: Array("VideoHandler".utf8) + [0])
        end(&b, hdlr)
        let minf = begin(&b, "minf")
        let vmhd = fullBox(&b, "vmhd", version: 0, flags: 1)
        putZeros(&b, 8)
        end(&b, vmhd)
        let dinf = begin(&b, "dinf")
        let dref = fullBox(&b, "dref", version: 0, flags: 0)
        put32(&b, 1)
        let url = fullBox(&b, "url ", version: 0, flags: 1) // the media is in this file
        end(&b, url)
        end(&b, dref)
        end(&b, dinf)
        let stbl = begin(&b, "stbl")
        let stsd = fullBox(&b, "stsd", version: 0, flags: 0)
        put32(&b, 1)
        let avc1 = begin(&b, "avc1")
        putZeros(&b, 6)
        put16(&b, 1) // data_reference_index
        putZeros(&b, 16)
        put16(&b, UInt16(parsed.width))
        put16(&b, UInt16(parsed.height))
        put32(&b, 0x0048_0000) // 72 dpi
        put32(&b, 0x0048_0000)
        put32(&b, 0)
        put16(&b, 1) // frame_count
        var name = Array("swift-video-capture".utf8)
        name.insert(UInt8(name.count), at: 0)
        b.append(contentsOf: name + [UInt8](repeating: 0, count: 32 - name.count))
        put16(&b, 0x0018) // depth
        put16(&b, 0xffff) // pre_defined -1
        let avcC = begin(&b, "avcC")
        b.append(1) // configurationVersion
        b.append(sps[1])
        b.append(sps[2])
        b.append(sps[3])
        b.append(0xff) // lengthSizeMinusOne = 3
        b.append(0xe1) // one SPS
        put16(&b, UInt16(sps.count))
        b.append(contentsOf: sps)
        b.append(1) // one PPS
        put16(&b, UInt16(pps.count))
        b.append(contentsOf: pps)
        if [100, 110, 122, 144].contains(parsed.profileIdc) { // ISO/IEC 14496-15 5.3.3.1.2: the High profiles' fields
            b.append(0xfc | UInt8(parsed.chromaFormat & 3))
            b.append(0xf8 | UInt8((parsed.bitDepthLuma - 8) & 7))
            b.append(0xf8 | UInt8((parsed.bitDepthChroma - 8) & 7))
            b.append(0) // no SPS extensions
        }
        end(&b, avcC)
        if let signal = parsed.videoSignal {
            let colr = begin(&b, "colr")
            putType(&b, "nclx")
            put16(&b, UInt16(signal.primaries))
            put16(&b, UInt16(signal.transfer))
            put16(&b, UInt16(signal.matrix))
            b.append(signal.fullRange ? 0x80 : 0)
            end(&b, colr)
        }
        end(&b, avc1)
        end(&b, stsd)
        for empty in ["stts", "stsc", "stco"] {
            let e = fullBox(&b, empty, version: 0, flags: 0)
            put32(&b, 0)
            end(&b, e)
        }
        let stsz = fullBox(&b, "stsz", version: 0, flags: 0)
        put32(&b, 0)
        put32(&b, 0)
        end(&b, stsz)
        end(&b, stbl)
        end(&b, minf)
        end(&b, mdia)
        end(&b, trak)
        let mvex = begin(&b, "mvex")
        let mehd = fullBox(&b, "mehd", version: 1, flags: 0)
        let mehdDuration = b.count
        put64(&b, 0)
        end(&b, mehd)
        let trex = fullBox(&b, "trex", version: 0, flags: 0)
        put32(&b, 1) // track_ID
        put32(&b, 1) // default_sample_description_index
        putZeros(&b, 12)
        end(&b, trex)
        end(&b, mvex)
        end(&b, moov)
        durationFieldOffsets = (Int64(mvhdDuration), Int64(tkhdDuration), Int64(mdhdDuration), Int64(mehdDuration))
        do {
            try file.write(b)
            try file.flush()
        } catch {
            failed = true
            throw H264Error(.writeFailed, "\(error)")
        }
        offset = Int64(b.count)
    }

    /// Writes the last fragment, the `mfra` index and the durations, then syncs and closes the file. The last
    /// frame lasts until `nextTimestampNs` when given (the next segment's first frame: segments then join without
    /// a gap), else as long as the frame before it. A recording with no key frame written is closed empty.
    func close(nextTimestampNs: Int64? = nil) throws(H264Error) {
        guard !closed else { return }
        closed = true
        do {
            if let first = firstTimestampNs, !failed {
                let last = sampleTimes.last ?? lastTime90
                var gap = lastDuration90 > 0 ? lastDuration90 : max(1, (options.lastFrameDurationNs * 9 + 50_000) / 100_000)
                if let next = nextTimestampNs, let lastNs = lastTimestampNs, next > lastNs, next - first < Int64.max / 9 {
                    gap = max(1, ((next - first) * 9 + 50_000) / 100_000 - last)
                }
                if !sampleTimes.isEmpty { try writeFragment(nextTime90: last + gap) }
                try writeIndex()
                try file.flush()
                let total90 = lastTime90 + lastDuration90
                var field: [UInt8] = []
                put64(&field, UInt64(max(0, total90)))
                try file.overwrite(at: durationFieldOffsets.mdhd, field)
                try file.overwrite(at: durationFieldOffsets.mehd, field)
                field.removeAll()
                put64(&field, UInt64(max(0, (total90 + 45) / 90)))
                try file.overwrite(at: durationFieldOffsets.mvhd, field)
                try file.overwrite(at: durationFieldOffsets.tkhd, field)
            }
            try file.close()
        } catch let error as H264Error {
            try? file.close() // what was written is kept (the failed unit was cut off)
            throw error
        } catch let error as ProcessingError {
            try? file.close()
            throw H264Error(.writeFailed, "\(error)")
        } catch {
            try? file.close()
            throw H264Error(.writeFailed, "\(file.path): \(error)")
        }
    }

    /// Gives the file up (see `OutputFile.discard()`): for a start that failed before anything was written.
    func discard() {
        closed = true
        file.discard()
    }

    /// mfra: a tfra entry per fragment (its time and moof offset) and the mfro that lets a reader find it.
    private func writeIndex() throws(H264Error) {
        var b: [UInt8] = []
        b.reserveCapacity(64 + fragmentIndex.count * 19)
        let mfra = begin(&b, "mfra")
        let tfra = fullBox(&b, "tfra", version: 1, flags: 0)
        put32(&b, 1) // track_ID
        put32(&b, 0) // 1-byte traf, trun and sample numbers
        put32(&b, UInt32(clamping: fragmentIndex.count))
        for entry in fragmentIndex {
            put64(&b, UInt64(entry.time))
            put64(&b, UInt64(entry.offset))
            b.append(contentsOf: [1, 1, 1])
        }
        end(&b, tfra)
        let mfro = fullBox(&b, "mfro", version: 0, flags: 0)
        put32(&b, UInt32(b.count + 4)) // the size of mfra, this field included
        end(&b, mfro)
        end(&b, mfra)
        try commit(&b, then: [])
        offset += Int64(b.count)
    }

    // Box writing: a box's size is patched when it ends.
    private func begin(_ b: inout [UInt8], _ type: String) -> Int {
        let at = b.count
        put32(&b, 0)
        putType(&b, type)
        return at
    }
    private func fullBox(_ b: inout [UInt8], _ type: String, version: UInt8, flags: UInt32) -> Int {
        let at = begin(&b, type)
        put32(&b, UInt32(version) << 24 | flags)
        return at
    }
    private func end(_ b: inout [UInt8], _ at: Int) { set32(&b, at: at, UInt32(b.count - at)) }
    private func put16(_ b: inout [UInt8], _ v: UInt16) {
        b.append(UInt8(v >> 8))
        b.append(UInt8(v & 0xff))
    }
    private func put32(_ b: inout [UInt8], _ v: UInt32) {
        b.append(UInt8(v >> 24))
        b.append(UInt8(v >> 16 & 0xff))
        b.append(UInt8(v >> 8 & 0xff))
        b.append(UInt8(v & 0xff))
    }
    private func put64(_ b: inout [UInt8], _ v: UInt64) {
        put32(&b, UInt32(v >> 32))
        put32(&b, UInt32(v & 0xffff_ffff))
    }
    private func set32(_ b: inout [UInt8], at: Int, _ v: UInt32) {
        b[at] = UInt8(v >> 24)
        b[at + 1] = UInt8(v >> 16 & 0xff)
        b[at + 2] = UInt8(v >> 8 & 0xff)
        b[at + 3] = UInt8(v & 0xff)
    }
    private func putType(_ b: inout [UInt8], _ type: String) { b.append(contentsOf: type.utf8) }
    private func putZeros(_ b: inout [UInt8], _ n: Int) { b.append(contentsOf: repeatElement(0, count: n)) }
    /// The display matrix (16.16 fixed point, the last column 2.30) that turns a width×height picture clockwise
    /// by `rotation` (the matrices ffmpeg writes and reads back as its display rotation).
    private func putMatrix(_ b: inout [UInt8], _ rotation: VideoRotation, width: Int, height: Int) {
        let one: Int64 = 0x1_0000
        let w = Int64(width) << 16, h = Int64(height) << 16
        let m: (Int64, Int64, Int64, Int64, Int64, Int64) =
            switch rotation {
            case .rotation0: (one, 0, 0, one, 0, 0)
            case .rotation90: (0, one, -one, 0, h, 0)
            case .rotation180: (-one, 0, 0, -one, w, h)
            case .rotation270: (0, -one, one, 0, 0, w)
            }
        for v in [m.0, m.1, 0, m.2, m.3, 0, m.4, m.5, 0x4000_0000] { put32(&b, UInt32(truncatingIfNeeded: v)) }
    }
}
