public import VideoCapture

/// H.264 NAL unit types (ITU-T H.264 table 7-1; the ones seed 000 lists).
public enum NALUnitType: UInt8, Sendable, CustomStringConvertible {
    /// Types 0–8: unspecified, a slice of a non-IDR picture, data partitions A–C, a slice of an IDR picture,
    /// supplemental enhancement information, sequence and picture parameter sets.
    case unspecified = 0, slice = 1, sliceDataA = 2, sliceDataB = 3, sliceDataC = 4, idr = 5, sei = 6, sps = 7, pps = 8
    /// Types 9–13: access unit delimiter, end of sequence, end of stream, filler data, SPS extension.
    case accessUnitDelimiter = 9, endOfSequence = 10, endOfStream = 11, filler = 12, spsExtension = 13
    /// Types 14, 15, 19 and 20: SVC/MVC prefix, subset SPS, an auxiliary slice, a slice extension.
    case prefix = 14, subsetSPS = 15, auxiliarySlice = 19, sliceExtension = 20
    /// Any type not listed above (reserved or unspecified values); not a value H.264 defines.
    case reserved = 255

    /// The type in a NAL header byte (its low five bits); `.reserved` for a value without a case.
    public init(header: UInt8) { self = NALUnitType(rawValue: header & 0x1f) ?? .reserved }
    /// A short name for logs: `SPS`, `PPS`, `IDR slice`, `non-IDR slice`, `SEI`, `AUD`, else `NAL type N`.
    public var description: String {
        switch self {
        case .slice: "non-IDR slice"
        case .idr: "IDR slice"
        case .sei: "SEI"
        case .sps: "SPS"
        case .pps: "PPS"
        case .accessUnitDelimiter: "AUD"
        default: "NAL type \(rawValue)"
        }
    }
}

/// One NAL unit inside a byte buffer: where its payload (header byte first, no start code) sits.
public struct NALUnit: Sendable, Equatable {
    /// The unit's type, from its header byte.
    public var type: NALUnitType
    /// Offset of the NAL header byte in the buffer.
    public var offset: Int
    /// Length of the NAL unit (header + payload), without start code.
    public var length: Int
    /// A unit of `type` whose header byte is at `offset` and that is `length` bytes long (header included).
    public init(type: NALUnitType, offset: Int, length: Int) {
        self.type = type
        self.offset = offset
        self.length = length
    }
}

/// Annex-B (start-code delimited) and AVCC (length-prefixed) H.264 framing.
public enum AnnexB {
    /// Splits an Annex-B stream at its 3- and 4-byte start codes. The stream must begin with a start code;
    /// zero-length units (two start codes in a row) are an error.
    public static func split(_ bytes: UnsafeRawBufferPointer) throws(H264Error) -> [NALUnit] {
        var units: [NALUnit] = []
        try split(bytes, into: &units)
        return units
    }

    /// Splits an Annex-B stream held in an array (see `split(_:)` for a raw buffer); offsets are indexes into
    /// `data`. Throws `malformedBitstream` with the offset at fault.
    public static func split(_ data: [UInt8]) throws(H264Error) -> [NALUnit] {
        let r: Result<[NALUnit], H264Error> = data.withUnsafeBytes { b in
            do throws(H264Error) { return .success(try split(b)) } catch { return .failure(error) }
        }
        return try r.get()
    }

    /// As `split`, reusing `units`' storage (no allocation in steady state).
    public static func split(_ bytes: UnsafeRawBufferPointer, into units: inout [NALUnit]) throws(H264Error) {
        units.removeAll(keepingCapacity: true)
        let n = bytes.count
        guard n > 0 else { return }
        guard let first = nextStartCode(bytes, from: 0), first.position == 0 || bytes[0..<first.position].allSatisfy({ $0 == 0 }) else {
            throw H264Error("Annex-B stream does not begin with a start code", offset: 0)
        }
        var start = first.position + first.length
        while true {
            let next = nextStartCode(bytes, from: start)
            var end = next?.position ?? n
            // Trailing zero bytes before a start code belong to neither unit (trailing_zero_8bits).
            while end > start && bytes[end - 1] == 0 && next != nil { end -= 1 }
            guard end > start else { throw H264Error("zero-length NAL unit", offset: start) }
            let header = bytes[start]
            guard header & 0x80 == 0 else { throw H264Error("forbidden_zero_bit set in NAL header 0x\(String(header, radix: 16))", offset: start) }
            units.append(NALUnit(type: NALUnitType(header: header), offset: start, length: end - start))
            guard let next else { break }
            start = next.position + next.length
            if start >= n { throw H264Error("start code at the end of the stream with no NAL unit after it", offset: next.position) }
        }
    }

    /// The next 00 00 01 (or 00 00 00 01) at or after `from` (the package's one scanner, `AnnexBScan`).
    static func nextStartCode(_ b: UnsafeRawBufferPointer, from: Int) -> (position: Int, length: Int)? {
        AnnexBScan.nextStartCode(b, from: from)
    }

    /// Annex-B → AVCC: each unit prefixed by its length in `lengthSize` bytes (4 by default) big-endian.
    public static func toAVCC(_ annexB: [UInt8], lengthSize: Int = 4) throws(H264Error) -> [UInt8] {
        guard [1, 2, 4].contains(lengthSize) else { throw H264Error("AVCC length size must be 1, 2 or 4, got \(lengthSize)", offset: 0) }
        let units = try split(annexB)
        var out = [UInt8]()
        out.reserveCapacity(annexB.count)
        for u in units {
            guard lengthSize == 4 || u.length < 1 << (8 * lengthSize) else {
                throw H264Error("NAL unit of \(u.length) bytes does not fit a \(lengthSize)-byte length", offset: u.offset)
            }
            for k in (0..<lengthSize).reversed() { out.append(UInt8(truncatingIfNeeded: u.length >> (8 * k))) }
            out.append(contentsOf: annexB[u.offset..<(u.offset + u.length)])
        }
        return out
    }

    /// AVCC → Annex-B with 4-byte start codes. Lengths past the end, zero lengths and truncated prefixes are errors.
    public static func fromAVCC(_ avcc: [UInt8], lengthSize: Int = 4) throws(H264Error) -> [UInt8] {
        guard [1, 2, 4].contains(lengthSize) else { throw H264Error("AVCC length size must be 1, 2 or 4, got \(lengthSize)", offset: 0) }
        var out = [UInt8]()
        out.reserveCapacity(avcc.count + 16)
        var i = 0
        while i < avcc.count {
            guard i + lengthSize <= avcc.count else { throw H264Error("truncated \(lengthSize)-byte length prefix", offset: i) }
            var len = 0
            for k in 0..<lengthSize { len = len << 8 | Int(avcc[i + k]) }
            i += lengthSize
            guard len > 0 else { throw H264Error("zero-length NAL unit", offset: i - lengthSize) }
            guard len <= avcc.count - i else {
                throw H264Error("NAL length \(len) runs past the end (\(avcc.count - i) bytes left)", offset: i - lengthSize)
            }
            out += [0, 0, 0, 1]
            out.append(contentsOf: avcc[i..<(i + len)])
            i += len
        }
        return out
    }
}

/// The fields of a sequence parameter set that tell what a stream is.
public struct SequenceParameterSet: Sendable, Equatable {
    /// `profile_idc`: 66 Baseline, 77 Main, 100 High…
    public var profileIdc: Int
    /// The byte of `constraint_set0_flag`…`constraint_set5_flag` and reserved bits, most significant first
    /// (0x40 is `constraint_set1_flag`, which makes Baseline "Constrained Baseline").
    public var constraintFlags: Int
    /// `level_idc`: the level times ten (31 is level 3.1).
    public var levelIdc: Int
    /// The decoded picture width in pixels, after the frame cropping.
    public var width: Int
    /// The decoded picture height in pixels, after the frame cropping.
    public var height: Int
    /// `chroma_format_idc`: 1 is 4:2:0 (the only value outside the High profiles), 0 monochrome, 2 4:2:2, 3 4:4:4.
    public var chromaFormat = 1
    /// `bit_depth_luma_minus8 + 8`.
    public var bitDepthLuma = 8
    /// `bit_depth_chroma_minus8 + 8`.
    public var bitDepthChroma = 8
    /// The VUI's `video_signal_type` when present: the range flag and the colour code points (2, "unspecified",
    /// when the SPS has no `colour_description`); nil when the SPS says nothing about colour.
    public var videoSignal: VideoSignal?
    /// The VUI's `timing_info` when present: `time_scale / (2 × num_units_in_tick)` frames a second.
    public var timing: Timing?

    /// The colour description an SPS carries (ISO/IEC 23091-2 code points, as written in an MP4 `colr` box).
    public struct VideoSignal: Sendable, Equatable {
        /// `video_full_range_flag`.
        public var fullRange: Bool
        /// `colour_primaries`.
        public var primaries: Int
        /// `transfer_characteristics`.
        public var transfer: Int
        /// `matrix_coefficients`.
        public var matrix: Int
    }
    /// The VUI's timing: `num_units_in_tick`, `time_scale` and `fixed_frame_rate_flag`.
    public struct Timing: Sendable, Equatable {
        /// `num_units_in_tick`.
        public var unitsInTick: UInt32
        /// `time_scale`.
        public var timeScale: UInt32
        /// `fixed_frame_rate_flag`.
        public var fixedFrameRate: Bool
        /// The frame rate this timing states (`time_scale / (2 × num_units_in_tick)`).
        public var framesPerSecond: Double { unitsInTick == 0 ? 0 : Double(timeScale) / (2 * Double(unitsInTick)) }
    }
    /// Bit positions in the RBSP (header byte excluded) for `withTiming`: where the VUI's timing section (or the
    /// VUI flag, without a VUI) starts and ends.
    private var timingSpan = TimingSpan(start: 0, end: 0, hasVUI: false)
    private struct TimingSpan: Sendable, Equatable {
        var start: Int, end: Int, hasVUI: Bool
    }

    /// The profile's name: "Constrained Baseline", "Baseline", "Main", "High", or "profile N" for others.
    public var profileName: String {
        switch profileIdc {
        case 66: constraintFlags & 0x40 != 0 ? "Constrained Baseline" : "Baseline"
        case 77: "Main"
        case 100: "High"
        default: "profile \(profileIdc)"
        }
    }

    /// Parses an SPS NAL unit (header byte included).
    public init(nal: ArraySlice<UInt8>) throws(H264Error) {
        guard let first = nal.first, NALUnitType(header: first) == .sps else { throw H264Error("not an SPS NAL unit", offset: 0) }
        var r = BitReader(Self.rbsp(nal.dropFirst()))
        profileIdc = try r.bits(8)
        constraintFlags = try r.bits(8)
        levelIdc = try r.bits(8)
        _ = try r.ue() // seq_parameter_set_id
        var chromaFormat = 1
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profileIdc) {
            chromaFormat = try r.ue()
            guard chromaFormat <= 3 else { throw H264Error("SPS: invalid chroma_format_idc \(chromaFormat)", offset: 0) }
            if chromaFormat == 3 { _ = try r.bits(1) }
            let lumaDepth = try r.ue() + 8, chromaDepth = try r.ue() + 8
            guard lumaDepth <= 14, chromaDepth <= 14 else {
                throw H264Error("SPS: invalid bit depth \(lumaDepth)/\(chromaDepth)", offset: 0)
            }
            bitDepthLuma = lumaDepth
            bitDepthChroma = chromaDepth
            _ = try r.bits(1)
            if try r.bits(1) == 1 { // seq_scaling_matrix_present_flag
                for i in 0..<(chromaFormat != 3 ? 8 : 12) where try r.bits(1) == 1 {
                    var last = 8, next = 8
                    for _ in 0..<(i < 6 ? 16 : 64) where next != 0 {
                        next = (last + (try r.se()) + 256) % 256
                        last = next == 0 ? last : next
                    }
                }
            }
        }
        _ = try r.ue() // log2_max_frame_num_minus4
        let pocType = try r.ue()
        if pocType == 0 {
            _ = try r.ue()
        } else if pocType == 1 {
            _ = try r.bits(1)
            _ = try r.se()
            _ = try r.se()
            let n = try r.ue()
            guard n < 256 else { throw H264Error("SPS: implausible num_ref_frames_in_pic_order_cnt_cycle \(n)", offset: 0) }
            for _ in 0..<n { _ = try r.se() }
        }
        _ = try r.ue()
        _ = try r.bits(1)
        let wMbs = try r.ue() + 1, hMapUnits = try r.ue() + 1
        let frameMbsOnly = try r.bits(1)
        if frameMbsOnly == 0 { _ = try r.bits(1) }
        _ = try r.bits(1)
        var w = wMbs * 16, h = (2 - frameMbsOnly) * hMapUnits * 16
        if try r.bits(1) == 1 { // frame_cropping_flag
            let l = try r.ue(), rr = try r.ue(), t = try r.ue(), b = try r.ue()
            let cx = chromaFormat == 0 || chromaFormat == 3 ? 1 : 2
            let cy = (chromaFormat == 1 ? 2 : 1) * (2 - frameMbsOnly)
            w -= cx * (l + rr)
            h -= cy * (t + b)
        }
        guard w > 0, h > 0, w <= 16384, h <= 16384 else { throw H264Error("SPS gives an implausible size \(w)x\(h)", offset: 0) }
        width = w
        height = h
        self.chromaFormat = chromaFormat
        let vuiFlag = r.bit
        guard r.bit < r.data.count * 8, try r.bits(1) == 1 else { // vui_parameters_present_flag (absent: truncated SPS)
            timingSpan = TimingSpan(start: vuiFlag, end: min(vuiFlag + 1, r.data.count * 8), hasVUI: false)
            return
        }
        if try r.bits(1) == 1, try r.bits(8) == 255 { _ = try r.bits(32) } // aspect_ratio_info (sar_width, sar_height)
        if try r.bits(1) == 1 { _ = try r.bits(1) } // overscan
        if try r.bits(1) == 1 { // video_signal_type
            _ = try r.bits(3) // video_format
            let full = try r.bits(1) == 1
            var codes = (2, 2, 2)
            if try r.bits(1) == 1 { codes = (try r.bits(8), try r.bits(8), try r.bits(8)) }
            videoSignal = VideoSignal(fullRange: full, primaries: codes.0, transfer: codes.1, matrix: codes.2)
        }
        if try r.bits(1) == 1 { // chroma_loc_info
            _ = try r.ue()
            _ = try r.ue()
        }
        let timingStart = r.bit
        if try r.bits(1) == 1 {
            let units = UInt32(try r.bits(32)), scale = UInt32(try r.bits(32))
            timing = Timing(unitsInTick: units, timeScale: scale, fixedFrameRate: try r.bits(1) == 1)
        }
        timingSpan = TimingSpan(start: timingStart, end: r.bit, hasVUI: true)
    }

    /// The RBSP of a NAL unit's payload: emulation-prevention bytes (00 00 03 → 00 00) removed.
    static func rbsp(_ payload: ArraySlice<UInt8>) -> [UInt8] {
        var rbsp: [UInt8] = []
        rbsp.reserveCapacity(payload.count)
        var zeros = 0
        for b in payload {
            if zeros >= 2 && b == 3 {
                zeros = 0
                continue
            }
            rbsp.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return rbsp
    }

    /// The SPS NAL unit `nal` (header byte included) with VUI `timing_info` stating `framesPerSecond`
    /// (`num_units_in_tick` = its denominator, `time_scale` = twice its numerator, `fixed_frame_rate_flag` 0: a
    /// camera's rate varies), so that a player of a raw `.h264` stream knows its rate (`ffprobe` shows it as
    /// `r_frame_rate`). A VUI that exists keeps everything else; an SPS without one gets a VUI with timing only.
    /// Throws `malformedBitstream` for an SPS that does not parse, `invalidSettings` for a rate whose terms do
    /// not fit the fields (32 bits, the numerator doubled).
    public static func withTiming(_ nal: ArraySlice<UInt8>, framesPerSecond: Fraction) throws(H264Error) -> [UInt8] {
        let sps = try SequenceParameterSet(nal: nal)
        guard framesPerSecond.numerator > 0, framesPerSecond.numerator <= Int64(UInt32.max / 2),
            framesPerSecond.denominator <= Int64(UInt32.max)
        else { throw H264Error(.invalidSettings, "frame rate \(framesPerSecond) cannot be written as H.264 VUI timing (terms up to 2147483647)") }
        let source = rbsp(nal.dropFirst())
        var reader = BitReader(source)
        // The RBSP's stop bit: the last set bit.
        guard let lastByte = source.lastIndex(where: { $0 != 0 }) else { throw H264Error("SPS has no stop bit", offset: 0) }
        let stopBit = lastByte * 8 + 7 - source[lastByte].trailingZeroBitCount
        let span = sps.timingSpan
        guard span.end <= stopBit else { throw H264Error("SPS is truncated before its VUI timing", offset: 0) }
        var w = BitWriter()
        w.reserve(source.count + 12)
        reader.bit = 0
        w.copy(from: &reader, count: span.start)
        if !span.hasVUI {
            w.put(1, 1) // vui_parameters_present_flag
            w.put(0, 4) // no aspect ratio, overscan, video signal or chroma location
        }
        w.put(1, 1)
        w.put(Int(framesPerSecond.denominator), 32)
        w.put(Int(framesPerSecond.numerator) * 2, 32)
        w.put(0, 1) // fixed_frame_rate_flag
        if !span.hasVUI { w.put(0, 5) } // no NAL/VCL HRD, no pic_struct, no bitstream restriction
        reader.bit = span.end
        w.copy(from: &reader, count: stopBit + 1 - reader.bit) // the rest, up to and with the stop bit
        var out: [UInt8] = [nal[nal.startIndex]]
        out.reserveCapacity(w.bytes.count + w.bytes.count / 64 + 4)
        var zeros = 0
        for b in w.bytes { // emulation prevention: no 00 00 0x (x ≤ 3) inside the payload
            if zeros >= 2 && b <= 3 {
                out.append(3)
                zeros = 0
            }
            out.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return out
    }
}

/// Writes bits most significant first, for rewriting parameter sets.
struct BitWriter {
    var bytes: [UInt8] = []
    private var used = 8 // bits used in the last byte
    mutating func reserve(_ n: Int) { bytes.reserveCapacity(n) }
    mutating func put(_ value: Int, _ count: Int) {
        for i in stride(from: count - 1, through: 0, by: -1) {
            if used == 8 {
                bytes.append(0)
                used = 0
            }
            if (value >> i) & 1 == 1 { bytes[bytes.count - 1] |= 0x80 >> UInt8(used) }
            used += 1
        }
    }
    mutating func copy(from r: inout BitReader, count: Int) {
        for _ in 0..<max(0, count) { put((try? r.bits(1)) ?? 0, 1) }
    }
}

struct BitReader {
    let data: [UInt8]
    var bit = 0
    init(_ d: [UInt8]) { data = d }
    mutating func bits(_ n: Int) throws(H264Error) -> Int {
        var v = 0
        for _ in 0..<n {
            guard bit / 8 < data.count else { throw H264Error("SPS truncated", offset: bit / 8) }
            v = v << 1 | Int(data[bit / 8] >> (7 - UInt8(bit % 8)) & 1)
            bit += 1
        }
        return v
    }
    mutating func ue() throws(H264Error) -> Int {
        var zeros = 0
        while try bits(1) == 0 {
            zeros += 1
            guard zeros < 32 else { throw H264Error("SPS: invalid Exp-Golomb code", offset: bit / 8) }
        }
        return (1 << zeros) - 1 + (try bits(zeros))
    }
    mutating func se() throws(H264Error) -> Int {
        let k = try ue()
        return k % 2 == 1 ? (k + 1) / 2 : -(k / 2)
    }
}
