import SystemIO

/// A parsed RTP header (RFC 3550 §5.1) and where the payload sits in the packet.
public struct RTPHeader: Sendable, Equatable {
    /// The marker bit: for H.264, set on the last packet of an access unit.
    public var marker: Bool
    /// The payload type, 0–127.
    public var payloadType: UInt8
    /// The sequence number (wraps at 2¹⁶).
    public var sequence: UInt16
    /// The RTP timestamp (90 kHz for video).
    public var timestamp: UInt32
    /// The synchronisation source: which stream the packet belongs to.
    public var ssrc: UInt32
    /// Where the payload starts in the packet: after the fixed header, the CSRCs and any header extension.
    public var payloadOffset: Int
    /// The payload's length in bytes, padding excluded.
    public var payloadLength: Int

    /// Parses the fixed header, CSRCs, an extension and padding; nil for anything malformed (never traps).
    public init?(_ p: UnsafeRawBufferPointer) {
        guard p.count >= 12, p[0] >> 6 == 2 else { return nil }
        let csrc = Int(p[0] & 0x0f)
        var off = 12 + 4 * csrc
        guard off <= p.count else { return nil }
        if p[0] & 0x10 != 0 {
            guard off + 4 <= p.count else { return nil }
            let words = Int(p[off + 2]) << 8 | Int(p[off + 3])
            off += 4 + 4 * words
            guard off <= p.count else { return nil }
        }
        var end = p.count
        if p[0] & 0x20 != 0 {
            let pad = Int(p[p.count - 1])
            guard pad >= 1, off + pad <= end else { return nil }
            end -= pad
        }
        marker = p[1] & 0x80 != 0
        payloadType = p[1] & 0x7f
        sequence = p.bigEndianUInt16(at: 2)
        timestamp = p.bigEndianUInt32(at: 4)
        ssrc = p.bigEndianUInt32(at: 8)
        payloadOffset = off
        payloadLength = end - off
    }

    /// The data of the RFC 8285 one-byte header extension element `id` in `packet`, if it carries one (nil for no
    /// extension, another profile than 0xBEDE, or a malformed block; never traps).
    public static func oneByteExtension(id: UInt8, in p: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let at = oneByteExtensionOffset(id: id, in: p) else { return nil }
        return Array(p[at..<(at + Int(p[at - 1] & 0x0f) + 1)])
    }

    /// Where the data of one-byte extension element `id` starts in `packet` (its length is the low nibble of the
    /// byte before), if it carries one; never traps.
    public static func oneByteExtensionOffset(id: UInt8, in p: UnsafeRawBufferPointer) -> Int? {
        guard p.count >= 12, p[0] & 0x10 != 0 else { return nil }
        let start = 12 + 4 * Int(p[0] & 0x0f)
        guard start + 4 <= p.count, p[start] == 0xBE, p[start + 1] == 0xDE else { return nil }
        let end = start + 4 + 4 * (Int(p[start + 2]) << 8 | Int(p[start + 3]))
        guard end <= p.count else { return nil }
        var i = start + 4
        while i < end {
            let b = p[i]
            if b == 0 { // padding
                i += 1
                continue
            }
            let elementID = b >> 4, length = Int(b & 0x0f) + 1
            guard elementID != 15, i + 1 + length <= end else { return nil } // 15: stop parsing (RFC 8285 §4.2)
            if elementID == id { return i + 1 }
            i += 1 + length
        }
        return nil
    }
}

/// The inverse of `H264Packetizer` (RFC 6184 mode 1): single NAL unit packets, STAP-A and FU-A back into
/// Annex-B access units (4-byte start codes). A gap in sequence numbers loses the access unit it falls in: it
/// is dropped whole and counted (`lostPackets`, `droppedAccessUnits`), the next one starts clean.
public struct H264Depacketizer: Sendable {
    /// Packets missing from the sequence numbers seen.
    public private(set) var lostPackets = 0
    /// Access units discarded because a packet of theirs was missing or malformed.
    public private(set) var droppedAccessUnits = 0
    /// Packets that were not valid RTP or H.264 payloads (ignored).
    public private(set) var malformedPackets = 0
    private var current: [UInt8] = []
    private var currentTimestamp: UInt32?
    private var damaged = false
    private var lastSequence: UInt16?
    private var inFragment = false

    /// A depacketizer waiting for its first packet; any sequence number may start the stream.
    public init() { current.reserveCapacity(1 << 16) }

    /// Feeds one RTP packet; returns a completed access unit (Annex-B) and its RTP timestamp when the packet
    /// ends one (marker bit), else nil.
    public mutating func push(_ packet: UnsafeRawBufferPointer) -> (accessUnit: [UInt8], timestamp: UInt32)? {
        guard let h = RTPHeader(packet) else {
            malformedPackets += 1
            return nil
        }
        if let last = lastSequence, h.sequence != last &+ 1 {
            let gap = Int(h.sequence &- last &- 1)
            if gap > 0 && gap < 0x8000 {
                lostPackets += gap
                damaged = true
                inFragment = false
            } else {
                return nil
            } // late or duplicate: ignored
        }
        lastSequence = h.sequence
        if let ts = currentTimestamp, ts != h.timestamp {
            // A new access unit began before the previous one's marker: that one is incomplete.
            if !current.isEmpty { droppedAccessUnits += 1 }
            current.removeAll(keepingCapacity: true)
            damaged = false
            inFragment = false
        }
        if damaged && currentTimestamp != h.timestamp { damaged = false }
        currentTimestamp = h.timestamp
        let payload = UnsafeRawBufferPointer(rebasing: packet[h.payloadOffset..<(h.payloadOffset + h.payloadLength)])
        if !append(payload) {
            malformedPackets += 1
            damaged = true
        }
        guard h.marker else { return nil }
        defer {
            current.removeAll(keepingCapacity: true)
            currentTimestamp = nil
            damaged = false
            inFragment = false
        }
        if damaged || current.isEmpty {
            droppedAccessUnits += 1
            return nil
        }
        return (current, h.timestamp)
    }

    private mutating func startCode() { current.append(contentsOf: [0, 0, 0, 1] as [UInt8]) }

    private mutating func append(_ p: UnsafeRawBufferPointer) -> Bool {
        guard let first = p.first else { return false }
        switch first & 0x1f {
        case 1...23:
            startCode()
            current.append(contentsOf: p)
        case 24: // STAP-A: (16-bit size, NAL unit)*
            var o = 1
            while o < p.count {
                guard o + 2 <= p.count else { return false }
                let size = Int(p[o]) << 8 | Int(p[o + 1])
                o += 2
                guard size > 0, o + size <= p.count else { return false }
                startCode()
                current.append(contentsOf: UnsafeRawBufferPointer(rebasing: p[o..<(o + size)]))
                o += size
            }
        case 28: // FU-A
            guard p.count >= 2 else { return false }
            let fu = p[1]
            if fu & 0x80 != 0 {
                startCode()
                current.append((first & 0xe0) | (fu & 0x1f))
                inFragment = true
            } else if !inFragment {
                return false // a middle or end fragment without its start
            }
            current.append(contentsOf: UnsafeRawBufferPointer(rebasing: p[2...]))
            if fu & 0x40 != 0 { inFragment = false }
        default:
            return false // STAP-B, MTAP, FU-B: not in packetization-mode 1
        }
        return true
    }
}
