import H264
import VideoCapture

/// ISO BMFF boxes (ISO/IEC 14496-12, and -15 for `avc1`/`avcC`) written into a byte buffer: one function per box
/// the recordings write. A box is begun (its size field left at zero), its body written, and ended, which patches
/// the size: no box size is computed by hand. Container boxes take their children as a closure.
///
/// The buffer is kept between uses (`removeAll()` keeps its capacity), so a writer that reuses one allocates
/// nothing per fragment once it has grown.
struct MP4BoxWriter {
    /// The bytes written so far.
    var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// Empties the buffer, keeping its storage.
    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    // MARK: Begin and end

    /// A box begun and not yet ended: where its size field is.
    struct OpenBox {
        let start: Int
    }

    /// Begins a box of `type`: a zero size (patched by `end`) and the four-character type.
    mutating func begin(_ type: String) -> OpenBox {
        let box = OpenBox(start: bytes.count)
        u32(0)
        fourCC(type)
        return box
    }
    /// Begins a full box: the header, then version and flags.
    mutating func begin(_ type: String, version: UInt8, flags: UInt32) -> OpenBox {
        let box = begin(type)
        u32(UInt32(version) << 24 | flags)
        return box
    }
    /// Ends `box`: its size becomes every byte from its start to here.
    mutating func end(_ box: OpenBox) { set32(at: box.start, UInt32(bytes.count - box.start)) }

    /// A box whose body `body` writes; returns what `body` returns (a field's offset, to be written later).
    @discardableResult
    mutating func box<T>(_ type: String, _ body: (inout MP4BoxWriter) -> T) -> T {
        let open = begin(type)
        defer { end(open) }
        return body(&self)
    }
    /// A full box (version and flags) whose body `body` writes; returns what `body` returns.
    @discardableResult
    mutating func fullBox<T>(_ type: String, version: UInt8 = 0, flags: UInt32 = 0, _ body: (inout MP4BoxWriter) -> T) -> T {
        let open = begin(type, version: version, flags: flags)
        defer { end(open) }
        return body(&self)
    }

    /// The version-1 header fields of mvhd and mdhd: creation and modification time, the timescale, and a zero
    /// duration written when the recording ends; returns where the duration is.
    mutating func times(created: UInt64, timescale: UInt32) -> Int {
        u64(created)
        u64(created)
        u32(timescale)
        defer { u64(0) }
        return bytes.count
    }

    // MARK: Fields (big-endian)

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) {
        bytes.append(UInt8(v >> 8))
        bytes.append(UInt8(v & 0xff))
    }
    mutating func u32(_ v: UInt32) {
        bytes.append(UInt8(v >> 24))
        bytes.append(UInt8(v >> 16 & 0xff))
        bytes.append(UInt8(v >> 8 & 0xff))
        bytes.append(UInt8(v & 0xff))
    }
    mutating func u64(_ v: UInt64) {
        u32(UInt32(v >> 32))
        u32(UInt32(v & 0xffff_ffff))
    }
    mutating func fourCC(_ type: String) { bytes.append(contentsOf: type.utf8) }
    mutating func zeros(_ n: Int) { bytes.append(contentsOf: repeatElement(0, count: n)) }
    mutating func append<S: Sequence<UInt8>>(_ s: S) { bytes.append(contentsOf: s) }
    /// Overwrites the 32-bit field at `offset` (a field whose value is known only later).
    mutating func set32(at offset: Int, _ v: UInt32) {
        bytes[offset] = UInt8(v >> 24)
        bytes[offset + 1] = UInt8(v >> 16 & 0xff)
        bytes[offset + 2] = UInt8(v >> 8 & 0xff)
        bytes[offset + 3] = UInt8(v & 0xff)
    }
    /// `v` as the 8 big-endian bytes of a 64-bit field (for a field rewritten in the file).
    static func bigEndian(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * $0)) } }
}

/// The one video track a recording has: what `moov` describes.
struct MP4VideoTrack {
    /// Creation and modification time, in seconds since 1904 (the format's epoch).
    var created: UInt64
    /// The first key frame's parameter sets (without start codes) and what its SPS says.
    var sps: [UInt8]
    var pps: [UInt8]
    var parameters: SequenceParameterSet
    /// The display rotation (the track header's matrix).
    var rotation: VideoRotation
}

/// Where `moov`'s duration fields are (offsets in the header), to be written when the recording ends.
struct MP4DurationFields {
    var mvhd = 0, tkhd = 0, mdhd = 0, mehd = 0
}

// MARK: The header: ftyp and moov

extension MP4BoxWriter {
    /// The track ID of the one track.
    static let trackID: UInt32 = 1
    /// The media timescale: 90 kHz, as RTP's video clock.
    static let timescale: UInt32 = 90_000

    mutating func ftyp() {
        box("ftyp") { b in
            b.fourCC("isom")
            b.u32(0x200)
            for brand in ["isom", "iso2", "iso5", "iso6", "avc1", "mp41"] { b.fourCC(brand) }
        }
    }

    /// moov: mvhd, the track and mvex. Returns where the duration fields are.
    mutating func moov(_ track: MP4VideoTrack) -> MP4DurationFields {
        box("moov") { b in
            var fields = MP4DurationFields()
            fields.mvhd = b.mvhd(created: track.created)
            (fields.tkhd, fields.mdhd) = b.trak(track)
            fields.mehd = b.mvex()
            return fields
        }
    }

    /// mvhd (version 1), in a millisecond timescale; returns where its duration is.
    mutating func mvhd(created: UInt64) -> Int {
        fullBox("mvhd", version: 1) { b in
            let duration = b.times(created: created, timescale: 1000) // movie timescale: ms
            b.u32(0x0001_0000) // rate 1.0
            b.u16(0x0100) // volume 1.0
            b.zeros(10)
            b.matrix(.rotation0, width: 0, height: 0)
            b.zeros(24)
            b.u32(Self.trackID + 1) // next_track_ID
            return duration
        }
    }

    /// trak: tkhd and mdia; returns where tkhd's and mdhd's durations are.
    mutating func trak(_ track: MP4VideoTrack) -> (tkhd: Int, mdhd: Int) {
        box("trak") { b in
            let tkhd = b.tkhd(created: track.created, rotation: track.rotation, width: track.parameters.width, height: track.parameters.height)
            return (tkhd, b.mdia(track))
        }
    }

    /// tkhd (version 1; enabled, in the movie) with the display matrix; returns where its duration is.
    mutating func tkhd(created: UInt64, rotation: VideoRotation, width: Int, height: Int) -> Int {
        fullBox("tkhd", version: 1, flags: 0x3) { b in
            b.u64(created)
            b.u64(created)
            b.u32(Self.trackID)
            b.u32(0)
            let duration = b.bytes.count
            b.u64(0)
            b.zeros(8)
            b.u16(0) // layer
            b.u16(0) // alternate_group
            b.u16(0) // volume (video)
            b.u16(0)
            b.matrix(rotation, width: width, height: height)
            b.u32(UInt32(width) << 16)
            b.u32(UInt32(height) << 16)
            return duration
        }
    }

    /// mdia: mdhd, hdlr and minf; returns where mdhd's duration is.
    mutating func mdia(_ track: MP4VideoTrack) -> Int {
        box("mdia") { b in
            let duration = b.mdhd(created: track.created)
            b.hdlr()
            b.minf(track)
            return duration
        }
    }

    /// mdhd (version 1) in the 90 kHz timescale, language "und"; returns where its duration is.
    mutating func mdhd(created: UInt64) -> Int {
        fullBox("mdhd", version: 1) { b in
            let duration = b.times(created: created, timescale: Self.timescale)
            b.u16(0x55c4) // language "und"
            b.u16(0)
            return duration
        }
    }

    /// hdlr: a video handler.
    mutating func hdlr() {
        fullBox("hdlr") { b in
            b.u32(0)
            b.fourCC("vide")
            b.zeros(12)
            b.fourCC("VideoHandler")
            b.u8(0)
        }
    }

    /// minf: vmhd, dinf and stbl.
    mutating func minf(_ track: MP4VideoTrack) {
        box("minf") { b in
            b.vmhd()
            b.dinf()
            b.stbl(track)
        }
    }

    mutating func vmhd() { fullBox("vmhd", flags: 1) { b in b.zeros(8) } }

    /// dinf with one dref entry: the media is in this file.
    mutating func dinf() {
        box("dinf") { b in
            b.fullBox("dref") { b in
                b.u32(1)
                b.fullBox("url ", flags: 1) { _ in } // the media is in this file
            }
        }
    }

    /// stbl: the sample description and empty sample tables (the samples are in the fragments).
    mutating func stbl(_ track: MP4VideoTrack) {
        box("stbl") { b in
            b.stsd(track)
            for empty in ["stts", "stsc", "stco"] { b.fullBox(empty) { b in b.u32(0) } }
            b.fullBox("stsz") { b in
                b.u32(0)
                b.u32(0)
            }
        }
    }

    /// stsd with one avc1 sample entry.
    mutating func stsd(_ track: MP4VideoTrack) {
        fullBox("stsd") { b in
            b.u32(1)
            b.avc1(track)
        }
    }

    /// avc1: the visual sample entry, its avcC and, when the SPS states colour, colr.
    mutating func avc1(_ track: MP4VideoTrack) {
        let p = track.parameters
        box("avc1") { b in
            b.zeros(6)
            b.u16(1) // data_reference_index
            b.zeros(16)
            b.u16(UInt16(p.width))
            b.u16(UInt16(p.height))
            b.u32(0x0048_0000) // 72 dpi
            b.u32(0x0048_0000)
            b.u32(0)
            b.u16(1) // frame_count
            let name = "swift-video-capture".utf8 // compressorname: a Pascal string in 32 bytes
            b.u8(UInt8(name.count))
            b.append(name)
            b.zeros(31 - name.count)
            b.u16(0x0018) // depth
            b.u16(0xffff) // pre_defined -1
            b.avcC(sps: track.sps, pps: track.pps, parameters: p)
            if let signal = p.videoSignal { b.colr(signal) }
        }
    }

    /// avcC: the decoder configuration (4-byte NAL lengths, one SPS, one PPS; the High profiles' extra fields).
    mutating func avcC(sps: [UInt8], pps: [UInt8], parameters p: SequenceParameterSet) {
        box("avcC") { b in
            b.u8(1) // configurationVersion
            b.append(sps[1...3]) // profile, constraints, level
            b.u8(0xff) // lengthSizeMinusOne = 3
            b.u8(0xe1) // one SPS
            b.u16(UInt16(sps.count))
            b.append(sps)
            b.u8(1) // one PPS
            b.u16(UInt16(pps.count))
            b.append(pps)
            if [100, 110, 122, 144].contains(p.profileIdc) { // ISO/IEC 14496-15 5.3.3.1.2: the High profiles' fields
                b.u8(0xfc | UInt8(p.chromaFormat & 3))
                b.u8(0xf8 | UInt8((p.bitDepthLuma - 8) & 7))
                b.u8(0xf8 | UInt8((p.bitDepthChroma - 8) & 7))
                b.u8(0) // no SPS extensions
            }
        }
    }

    /// colr (nclx): the SPS's colour description, repeated for players that read only the container.
    mutating func colr(_ signal: SequenceParameterSet.VideoSignal) {
        box("colr") { b in
            b.fourCC("nclx")
            b.u16(UInt16(signal.primaries))
            b.u16(UInt16(signal.transfer))
            b.u16(UInt16(signal.matrix))
            b.u8(signal.fullRange ? 0x80 : 0)
        }
    }

    /// mvex: mehd and trex; returns where mehd's duration is.
    mutating func mvex() -> Int {
        box("mvex") { b in
            let duration = b.mehd()
            b.trex()
            return duration
        }
    }

    /// mehd (version 1); returns where its duration is.
    mutating func mehd() -> Int {
        fullBox("mehd", version: 1) { b in
            defer { b.u64(0) }
            return b.bytes.count
        }
    }

    /// trex: the track's fragment defaults (sample description 1, the rest given per sample).
    mutating func trex() {
        fullBox("trex") { b in
            b.u32(Self.trackID)
            b.u32(1) // default_sample_description_index
            b.zeros(12)
        }
    }

    /// The display matrix (16.16 fixed point, the last column 2.30) that turns a width×height picture clockwise
    /// by `rotation` (the matrices ffmpeg writes and reads back as its display rotation).
    mutating func matrix(_ rotation: VideoRotation, width: Int, height: Int) {
        let one: Int64 = 0x1_0000
        let w = Int64(width) << 16, h = Int64(height) << 16
        let m: (Int64, Int64, Int64, Int64, Int64, Int64) =
            switch rotation {
            case .rotation0: (one, 0, 0, one, 0, 0)
            case .rotation90: (0, one, -one, 0, h, 0)
            case .rotation180: (-one, 0, 0, -one, w, h)
            case .rotation270: (0, -one, one, 0, 0, w)
            }
        for v in [m.0, m.1, 0, m.2, m.3, 0, m.4, m.5, 0x4000_0000] { u32(UInt32(truncatingIfNeeded: v)) }
    }
}

// MARK: Fragments: moof and mdat

/// The samples of one fragment, as the fragmented writer gathers them.
struct MP4FragmentSamples {
    /// Each sample's size in bytes (its length-prefixed NAL units).
    var sizes: [UInt32] = []
    /// Each sample's key flag (an IDR).
    var keys: [Bool] = []
    /// Each sample's presentation time, in the 90 kHz timescale.
    var times: [Int64] = []
    /// When the last sample ends (the next sample's time).
    var end: Int64 = 0

    var count: Int { times.count }
}

extension MP4BoxWriter {
    /// moof for fragment number `sequence` whose `mdat` follows it at once: mfhd and traf. Its trun's data
    /// offset points past the `mdat` header.
    mutating func moof(sequence: UInt32, _ samples: MP4FragmentSamples) {
        let moof = begin("moof")
        mfhd(sequence: sequence)
        let dataOffset = traf(samples)
        end(moof)
        set32(at: dataOffset, UInt32(bytes.count - moof.start + 8))
    }

    mutating func mfhd(sequence: UInt32) { fullBox("mfhd") { b in b.u32(sequence) } }

    /// traf: tfhd, tfdt and trun; returns where trun's data offset is.
    mutating func traf(_ samples: MP4FragmentSamples) -> Int {
        box("traf") { b in
            b.tfhd()
            b.tfdt(baseTime: UInt64(samples.times[0]))
            return b.trun(samples)
        }
    }

    /// tfhd: default-base-is-moof (data offsets count from the moof).
    mutating func tfhd() { fullBox("tfhd", flags: 0x020000) { b in b.u32(Self.trackID) } }

    /// tfdt (version 1): the fragment's first decode time.
    mutating func tfdt(baseTime: UInt64) { fullBox("tfdt", version: 1) { b in b.u64(baseTime) } }

    /// trun with data offset, and each sample's duration, size and flags; returns where the data offset is.
    mutating func trun(_ samples: MP4FragmentSamples) -> Int {
        fullBox("trun", flags: 0x000001 | 0x000100 | 0x000200 | 0x000400) { b in
            let count = samples.count
            b.u32(UInt32(count))
            let dataOffset = b.bytes.count
            b.u32(0)
            for i in 0..<count {
                let next = i + 1 < count ? samples.times[i + 1] : samples.end
                b.u32(UInt32(clamping: next - samples.times[i]))
                b.u32(samples.sizes[i])
                // A sync sample depends on nothing; the others depend on earlier ones and are not sync samples.
                b.u32(samples.keys[i] ? 0x0200_0000 : 0x0101_0000)
            }
            return dataOffset
        }
    }

    /// The header of an `mdat` whose `payload` bytes are written after this buffer (kept apart, not copied).
    mutating func mdatHeader(payload: Int) {
        u32(UInt32(payload + 8))
        fourCC("mdat")
    }

    // MARK: The index: mfra

    /// mfra: a tfra entry per fragment (its time and moof offset), and the mfro that lets a reader find it.
    mutating func mfra(_ fragments: [(time: Int64, offset: Int64)]) {
        let mfra = begin("mfra")
        fullBox("tfra", version: 1) { b in
            b.u32(Self.trackID)
            b.u32(0) // 1-byte traf, trun and sample numbers
            b.u32(UInt32(clamping: fragments.count))
            for entry in fragments {
                b.u64(UInt64(entry.time))
                b.u64(UInt64(entry.offset))
                b.append([1, 1, 1])
            }
        }
        fullBox("mfro") { b in b.u32(UInt32(b.bytes.count - mfra.start + 4)) } // mfra's size, this field included
        end(mfra)
    }
}
