public import VideoCaptureCommons
import SystemIO

/// RTCP (RFC 3550, RFC 4585, RFC 5104, draft-alvestrand-rmcat-remb): what a sender builds and what it parses.
public enum RTCPPacket: Sendable, Equatable {
    /// A report block of an SR or RR about one source.
    public struct ReportBlock: Sendable, Equatable {
        /// The source the block reports on.
        public var ssrc: UInt32
        /// Fraction of packets lost since the last report, in 1/256.
        public var fractionLost: UInt8
        /// Packets lost since the start (24-bit signed on the wire; negative when duplicates outnumber losses).
        public var cumulativeLost: Int32
        /// The extended highest sequence number received: wrap count in the upper 16 bits.
        public var highestSequence: UInt32
        /// Interarrival jitter in RTP timestamp units.
        public var jitter: UInt32
        /// Middle 32 bits of the NTP time of the last SR received, and the delay since (1/65536 s).
        public var lastSR: UInt32
        /// The delay since that SR was received, in 1/65536 s (0 if none was).
        public var delaySinceLastSR: UInt32
    }
    /// SR (PT 200): the sender's NTP time and the RTP time of the same instant, its packet and byte counts,
    /// and report blocks about the streams it receives.
    case senderReport(ssrc: UInt32, ntp: UInt64, rtpTimestamp: UInt32, packets: UInt32, octets: UInt32, reports: [ReportBlock])
    /// RR (PT 201): a receiver's report blocks (loss, jitter, the last SR seen).
    case receiverReport(ssrc: UInt32, reports: [ReportBlock])
    /// Picture Loss Indication (PT 206, FMT 1): `sender` asks the source `media` for a key frame.
    case pli(sender: UInt32, media: UInt32)
    /// Full Intra Request (PT 206, FMT 4): a key-frame request with its command sequence number (a repeat has
    /// the same number).
    case fir(sender: UInt32, media: UInt32, sequence: UInt8)
    /// Generic NACK (PT 205, FMT 1): the sequence numbers of the packets `sender` is missing from `media`.
    case nack(sender: UInt32, media: UInt32, lost: [UInt16])
    /// REMB (PT 206, FMT 15): a receiver's estimate of the bitrate it can take, bits per second, for the streams
    /// in `ssrcs`.
    case remb(sender: UInt32, bitrate: UInt64, ssrcs: [UInt32])
    /// Transport-wide congestion control feedback (RTPFB, FMT 15): which packets arrived, and when.
    case transportFeedback(TransportFeedback)
    /// Any other packet type, kept by type (SDES, BYE, APP, transport-cc…).
    case other(type: UInt8, format: UInt8)
}

/// Why an RTCP packet could not be parsed, with the byte offset at fault.
public struct RTCPParseError: CodedError {
    /// What was wrong, e.g. "sender report of 12 bytes".
    public var message: String
    /// Byte offset in the compound packet of the RTCP packet at fault.
    public var offset: Int
    /// The message and the offset in one sentence.
    public var description: String { "malformed RTCP: \(message) (at byte \(offset))" }
    /// What kind of failure this is: always `malformed`.
    public var code: Code { .malformed }
}

extension ErrorCode where Domain == RTCPParseError {
    /// A length, count or version that does not fit the packet.
    public static var malformed: Self { Self(rawValue: "malformed") }
}

extension RTCPPacket {
    /// Parses a compound RTCP packet. Every length is checked: malformed input is an error, never a trap.
    public static func parseCompound(_ p: UnsafeRawBufferPointer) throws(RTCPParseError) -> [RTCPPacket] {
        var out: [RTCPPacket] = []
        var o = 0
        guard p.count >= 4 else { throw RTCPParseError(message: "shorter than an RTCP header", offset: 0) }
        while o < p.count {
            guard o + 4 <= p.count else { throw RTCPParseError(message: "truncated header", offset: o) }
            guard p[o] >> 6 == 2 else { throw RTCPParseError(message: "version \(p[o] >> 6), expected 2", offset: o) }
            let count = Int(p[o] & 0x1f), type = p[o + 1]
            let length = ((Int(p[o + 2]) << 8 | Int(p[o + 3])) + 1) * 4
            guard o + length <= p.count else { throw RTCPParseError(message: "length \(length) past the end (\(p.count - o) left)", offset: o) }
            if type == TransportFeedback.packetType && count == Int(TransportFeedback.format) {
                guard let fb = TransportFeedback(UnsafeRawBufferPointer(rebasing: p[o..<(o + length)])) else {
                    throw RTCPParseError(message: "malformed transport feedback", offset: o)
                }
                out.append(.transportFeedback(fb))
                o += length
                continue
            }
            let body = UnsafeRawBufferPointer(rebasing: p[(o + 4)..<(o + length)])
            out.append(try parseOne(type: type, count: count, body, at: o))
            o += length
        }
        return out
    }

    /// Whether `bytes` is a compound RTCP packet as RFC 3550 §6.1 has it (well-formed, its first packet an SR or
    /// RR) that names `ssrc`: a report block about it, or a NACK, PLI or FIR whose media source it is. What a
    /// receiver's first reports look like, and what latches its RTCP port (`FeedbackFilter`); a lone PLI or REMB
    /// (RFC 5506 reduced size) does not.
    package static func compound(_ bytes: UnsafeRawBufferPointer, names ssrc: UInt32) -> Bool {
        guard bytes.count >= 2, bytes[1] == 200 || bytes[1] == 201, let packets = try? parseCompound(bytes) else { return false }
        return packets.contains { p in
            switch p {
            case .senderReport(_, _, _, _, _, let reports), .receiverReport(_, let reports): reports.contains { $0.ssrc == ssrc }
            case .nack(_, let media, _), .pli(_, let media), .fir(_, let media, _): media == ssrc
            default: false
            }
        }
    }

    private static func blocks(_ b: UnsafeRawBufferPointer, from: Int, count: Int, at o: Int) throws(RTCPParseError) -> [ReportBlock] {
        guard from + 24 * count <= b.count else { throw RTCPParseError(message: "\(count) report blocks do not fit", offset: o) }
        return (0..<count).map { k in
            let i = from + 24 * k
            let lostRaw = Int32(bitPattern: (b.bigEndianUInt32(at: i + 4) & 0x00ff_ffff) << 8) >> 8 // 24-bit signed
            return ReportBlock(
                ssrc: b.bigEndianUInt32(at: i), fractionLost: b[i + 4], cumulativeLost: lostRaw, highestSequence: b.bigEndianUInt32(at: i + 8),
                jitter: b.bigEndianUInt32(at: i + 12), lastSR: b.bigEndianUInt32(at: i + 16), delaySinceLastSR: b.bigEndianUInt32(at: i + 20))
        }
    }

    private static func parseOne(type: UInt8, count: Int, _ b: UnsafeRawBufferPointer, at o: Int) throws(RTCPParseError) -> RTCPPacket {
        switch type {
        case 200: // SR
            guard b.count >= 24 else { throw RTCPParseError(message: "sender report of \(b.count) bytes", offset: o) }
            let ntp = UInt64(b.bigEndianUInt32(at: 4)) << 32 | UInt64(b.bigEndianUInt32(at: 8))
            return .senderReport(
                ssrc: b.bigEndianUInt32(at: 0), ntp: ntp, rtpTimestamp: b.bigEndianUInt32(at: 12), packets: b.bigEndianUInt32(at: 16),
                octets: b.bigEndianUInt32(at: 20),
                reports: try blocks(b, from: 24, count: count, at: o))
        case 201: // RR
            guard b.count >= 4 else { throw RTCPParseError(message: "receiver report of \(b.count) bytes", offset: o) }
            return .receiverReport(ssrc: b.bigEndianUInt32(at: 0), reports: try blocks(b, from: 4, count: count, at: o))
        case 205, 206: // transport / payload-specific feedback
            guard b.count >= 8 else { throw RTCPParseError(message: "feedback message of \(b.count) bytes", offset: o) }
            let sender = b.bigEndianUInt32(at: 0), media = b.bigEndianUInt32(at: 4)
            if type == 205 && count == 1 { // generic NACK: (PID, BLP)*
                var lost: [UInt16] = []
                var i = 8
                while i + 4 <= b.count {
                    let pid = b.bigEndianUInt16(at: i), blp = b.bigEndianUInt16(at: i + 2)
                    lost.append(pid)
                    for bit in 0..<16 where blp & (1 << bit) != 0 { lost.append(pid &+ UInt16(bit + 1)) }
                    i += 4
                }
                return .nack(sender: sender, media: media, lost: lost)
            }
            if type == 206 && count == 1 { return .pli(sender: sender, media: media) }
            if type == 206 && count == 4 {
                guard b.count >= 16 else { throw RTCPParseError(message: "FIR without an entry", offset: o) }
                return .fir(sender: sender, media: b.bigEndianUInt32(at: 8), sequence: b[12])
            }
            if type == 206 && count == 15 && b.count >= 16 && b[8] == 0x52 && b[9] == 0x45 && b[10] == 0x4d && b[11] == 0x42 { // "REMB"
                let n = Int(b[12]), exp = Int(b[13] >> 2)
                let mantissa = UInt64(b[13] & 0x03) << 16 | UInt64(b[14]) << 8 | UInt64(b[15])
                guard 16 + 4 * n <= b.count else { throw RTCPParseError(message: "REMB lists \(n) SSRCs that do not fit", offset: o) }
                let bitrate = exp > 45 ? UInt64.max : mantissa << UInt64(exp)
                return .remb(sender: sender, bitrate: bitrate, ssrcs: (0..<n).map { b.bigEndianUInt32(at: 16 + 4 * $0) })
            }
            return .other(type: type, format: UInt8(count))
        default:
            return .other(type: type, format: UInt8(count))
        }
    }
}

/// Builds the RTCP packets a sender sends.
public enum RTCPWriter {
    /// A sender report (no report blocks) followed by an SDES CNAME: the compound packet RFC 3550 asks for.
    public static func senderReport(ssrc: UInt32, ntp: UInt64, rtpTimestamp: UInt32, packets: UInt32, octets: UInt32, cname: String) -> [UInt8] {
        var p: [UInt8] = [0x80, 200, 0, 6]
        p.appendBigEndian(ssrc)
        p.appendBigEndian(UInt32(ntp >> 32))
        p.appendBigEndian(UInt32(ntp & 0xffff_ffff))
        p.appendBigEndian(rtpTimestamp)
        p.appendBigEndian(packets)
        p.appendBigEndian(octets)
        let name = Array(cname.utf8.prefix(255))
        var item: [UInt8] = [1, UInt8(name.count)] + name + [0]
        while item.count % 4 != 0 { item.append(0) } // items end on a 32-bit boundary
        let words = (8 + item.count) / 4 - 1 // header + SSRC + items, in 32-bit words, minus one
        p += [0x81, 202, UInt8(words >> 8), UInt8(words & 0xff)]
        p.appendBigEndian(ssrc)
        p += item
        return p
    }

    /// A PLI (RFC 4585 §6.3.1) from `sender` about `media`: what a receiver sends to ask for a key frame.
    public static func pli(sender: UInt32, media: UInt32) -> [UInt8] {
        [0x81, 206, 0, 2] + bigEndianBytes(sender) + bigEndianBytes(media)
    }

    /// A generic NACK (RFC 4585 §6.2.1) for the lost sequence numbers (packed into PID+BLP pairs).
    public static func nack(sender: UInt32, media: UInt32, lost: [UInt16]) -> [UInt8] {
        var fci: [UInt8] = []
        var i = 0
        let sorted = Array(Set(lost)).sorted()
        while i < sorted.count {
            let pid = sorted[i]
            var blp: UInt16 = 0
            i += 1
            while i < sorted.count, sorted[i] &- pid <= 16, sorted[i] != pid {
                blp |= 1 << (sorted[i] &- pid &- 1)
                i += 1
            }
            fci += [UInt8(pid >> 8), UInt8(pid & 0xff), UInt8(blp >> 8), UInt8(blp & 0xff)]
        }
        let words = 2 + fci.count / 4
        return [0x81, 205, UInt8(words >> 8), UInt8(words & 0xff)] + bigEndianBytes(sender) + bigEndianBytes(media) + fci
    }

    /// A REMB (draft-alvestrand-rmcat-remb): a receiver's estimate of `bitrate` bit/s for the streams `ssrcs`.
    public static func remb(sender: UInt32, bitrate: UInt64, ssrcs: [UInt32]) -> [UInt8] {
        var exponent: UInt64 = 0
        while bitrate >> exponent > 0x3ffff && exponent < 63 { exponent += 1 }
        let mantissa = UInt32(truncatingIfNeeded: min(bitrate >> exponent, 0x3ffff))
        let list = ssrcs.prefix(255)
        let words = 4 + list.count
        return [0x8f, 206, UInt8(words >> 8), UInt8(words & 0xff)] + bigEndianBytes(sender) + bigEndianBytes(0) + Array("REMB".utf8)
            + [UInt8(list.count), UInt8(exponent << 2) | UInt8((mantissa >> 16) & 0x3), UInt8((mantissa >> 8) & 0xff), UInt8(mantissa & 0xff)]
            + list.flatMap(bigEndianBytes)
    }

    /// A BYE for `ssrc` (appended to a report: the receiver learns the stream has ended).
    public static func bye(ssrc: UInt32) -> [UInt8] {
        [0x81, 203, 0, 1] + bigEndianBytes(ssrc)
    }
}
