public import H264

/// RFC 3550 fixed header fields of an outgoing stream: payload type, SSRC and the running sequence number.
public struct RTPStreamState: Sendable {
    /// The payload type, 0–127 (96 is the usual dynamic one for H.264).
    public var payloadType: UInt8
    /// The stream's synchronisation source.
    public var ssrc: UInt32
    /// The sequence number of the next packet; it wraps at 2¹⁶.
    public var sequence: UInt16
    /// A stream state with a random SSRC and starting sequence number unless given (RFC 3550 asks for random
    /// ones).
    public init(payloadType: UInt8 = 96, ssrc: UInt32 = .random(in: 1...UInt32.max), sequence: UInt16 = .random(in: 0...UInt16.max)) {
        self.payloadType = payloadType
        self.ssrc = ssrc
        self.sequence = sequence
    }
}

/// Capture time (monotonic ns) → 90 kHz RTP time: from the first frame's capture time, in integer arithmetic
/// (no accumulated rounding, no drift), correct across dropped frames and frame-rate changes; wraps at 2³².
public struct RTPClock: Sendable {
    /// The RTP timestamp of the first frame (random by default, as RFC 3550 asks).
    public let offset: UInt32
    /// The capture time of the first frame, monotonic nanoseconds; nil until the first call.
    public private(set) var originNs: Int64?
    /// A clock whose first frame gets the RTP time `offset`.
    public init(offset: UInt32 = .random(in: 0...UInt32.max)) { self.offset = offset }

    /// The 90 kHz RTP time of a frame captured at `ns` (monotonic nanoseconds). The first call fixes the origin;
    /// earlier capture times go backwards from `offset`, wrapping.
    public mutating func timestamp(forCaptureNs ns: Int64) -> UInt32 {
        let origin = originNs ?? ns
        originNs = origin
        let delta = ns &- origin
        // delta · 90000 / 1e9 without overflow for any Int64 delta: split into whole seconds and the rest.
        let seconds = delta / 1_000_000_000, rest = delta % 1_000_000_000
        let ticks = seconds &* 90_000 &+ rest * 90_000 / 1_000_000_000
        return offset &+ UInt32(truncatingIfNeeded: ticks)
    }
}

/// RFC 6184 packetization-mode 1 for one H.264 stream: a NAL unit that fits the payload budget goes alone
/// (single NAL unit packet); runs of small ones (SPS + PPS before an IDR) share a STAP-A; larger ones are cut
/// into FU-A fragments (S/E bits, the NAL's NRI kept). AUD, SEI and filler NAL units are dropped. The marker bit
/// is set on the last packet of each access unit; every packet of an access unit carries its timestamp.
///
/// Packets are built in one buffer allocated at init and handed to `emit` one at a time (no allocation per
/// frame); `emit` must copy what it keeps (`RTPSender` copies into its retransmission history).
public struct H264Packetizer: Sendable {
    /// Bytes of RTP payload per packet (the RTP header comes on top): 1200 leaves room for SRTP and extensions.
    public let maxPayload: Int
    /// Payload type, SSRC and the next sequence number; advanced by each packet built.
    public var state: RTPStreamState
    private var buffer: [UInt8]
    private var pending: [NALUnit] = []

    /// The size of the RTP header this packetizer writes: the fixed header, no CSRC, no extension.
    public static let headerSize = 12

    /// A packetizer for packets of at most `maxPayload` payload bytes (clamped to 16…65000), with its buffer
    /// allocated once.
    public init(maxPayload: Int = 1200, state: RTPStreamState = RTPStreamState()) {
        self.maxPayload = max(16, min(65_000, maxPayload))
        self.state = state
        buffer = [UInt8](repeating: 0, count: self.maxPayload + H264Packetizer.headerSize)
        pending.reserveCapacity(16)
    }

    /// Packetizes one access unit (Annex-B bytes and their NAL units, as `EncodedFrame` holds them).
    /// `emit(packet, isLast)` gets each packet. Returns the number of packets.
    @discardableResult
    public mutating func packetize(
        _ data: [UInt8], nalUnits: [NALUnit], timestamp: UInt32,
        emit: (UnsafeRawBufferPointer) -> Void
    ) -> Int {
        pending.removeAll(keepingCapacity: true)
        for n in nalUnits where n.length > 0 && n.offset >= 0 && n.offset + n.length <= data.count {
            switch n.type {
            case .accessUnitDelimiter, .sei, .filler: continue
            default: pending.append(n)
            }
        }
        guard !pending.isEmpty else { return 0 }
        var count = 0
        var i = 0
        while i < pending.count {
            // A run of NAL units that fit one STAP-A together (at least two), else one unit.
            var j = i, size = 1
            while j < pending.count, pending[j].length <= maxPayload - 3, size + 2 + pending[j].length <= maxPayload {
                size += 2 + pending[j].length
                j += 1
            }
            if j - i >= 2 {
                let last = j == pending.count
                writeSTAPA(data, pending[i..<j], timestamp: timestamp, marker: last, emit: emit)
                count += 1
                i = j
                continue
            }
            let n = pending[i]
            let last = i == pending.count - 1
            if n.length <= maxPayload {
                writeSingle(data, n, timestamp: timestamp, marker: last, emit: emit)
                count += 1
            } else {
                count += writeFUA(data, n, timestamp: timestamp, marker: last, emit: emit)
            }
            i += 1
        }
        return count
    }

    /// Writes the 12-byte RTP header and advances the sequence number.
    private static func header(_ p: UnsafeMutablePointer<UInt8>, _ state: inout RTPStreamState, timestamp: UInt32, marker: Bool) {
        p[0] = 0x80
        p[1] = (marker ? 0x80 : 0) | (state.payloadType & 0x7f)
        p[2] = UInt8(state.sequence >> 8)
        p[3] = UInt8(state.sequence & 0xff)
        p[4] = UInt8(timestamp >> 24)
        p[5] = UInt8((timestamp >> 16) & 0xff)
        p[6] = UInt8((timestamp >> 8) & 0xff)
        p[7] = UInt8(timestamp & 0xff)
        p[8] = UInt8(state.ssrc >> 24)
        p[9] = UInt8((state.ssrc >> 16) & 0xff)
        p[10] = UInt8((state.ssrc >> 8) & 0xff)
        p[11] = UInt8(state.ssrc & 0xff)
        state.sequence &+= 1
    }

    private mutating func writeSingle(_ data: [UInt8], _ n: NALUnit, timestamp: UInt32, marker: Bool, emit: (UnsafeRawBufferPointer) -> Void) {
        var st = state
        buffer.withUnsafeMutableBufferPointer { b in
            H264Packetizer.header(b.baseAddress!, &st, timestamp: timestamp, marker: marker)
            data.withUnsafeBufferPointer { d in (b.baseAddress! + 12).update(from: d.baseAddress! + n.offset, count: n.length) }
            emit(UnsafeRawBufferPointer(start: b.baseAddress, count: 12 + n.length))
        }
        state = st
    }

    private mutating func writeSTAPA(
        _ data: [UInt8], _ units: ArraySlice<NALUnit>, timestamp: UInt32, marker: Bool, emit: (UnsafeRawBufferPointer) -> Void
    ) {
        var st = state
        buffer.withUnsafeMutableBufferPointer { b in
            H264Packetizer.header(b.baseAddress!, &st, timestamp: timestamp, marker: marker)
            // STAP-A header: F = OR of the units' F bits, NRI = their maximum, type 24.
            var f: UInt8 = 0, nri: UInt8 = 0
            data.withUnsafeBufferPointer { d in
                for u in units {
                    f |= d[u.offset] & 0x80
                    nri = max(nri, d[u.offset] & 0x60)
                }
            }
            b[12] = f | nri | 24
            var o = 13
            data.withUnsafeBufferPointer { d in
                for u in units {
                    b[o] = UInt8(u.length >> 8)
                    b[o + 1] = UInt8(u.length & 0xff)
                    o += 2
                    (b.baseAddress! + o).update(from: d.baseAddress! + u.offset, count: u.length)
                    o += u.length
                }
            }
            emit(UnsafeRawBufferPointer(start: b.baseAddress, count: o))
        }
        state = st
    }

    private mutating func writeFUA(_ data: [UInt8], _ n: NALUnit, timestamp: UInt32, marker: Bool, emit: (UnsafeRawBufferPointer) -> Void) -> Int {
        var st = state
        var packets = 0
        buffer.withUnsafeMutableBufferPointer { b in
            data.withUnsafeBufferPointer { d in
                let nalHeader = d[n.offset]
                let chunk = maxPayload - 2
                var pos = 1 // the NAL header byte is carried in the FU indicator/header, not as payload
                while pos < n.length {
                    let take = min(chunk, n.length - pos)
                    let end = pos + take == n.length
                    H264Packetizer.header(b.baseAddress!, &st, timestamp: timestamp, marker: marker && end)
                    b[12] = (nalHeader & 0xe0) | 28 // FU indicator: F, NRI, type 28
                    b[13] = (pos == 1 ? 0x80 : 0) | (end ? 0x40 : 0) | (nalHeader & 0x1f) // FU header: S, E, type
                    (b.baseAddress! + 14).update(from: d.baseAddress! + n.offset + pos, count: take)
                    emit(UnsafeRawBufferPointer(start: b.baseAddress, count: 14 + take))
                    pos += take
                    packets += 1
                }
            }
        }
        state = st
        return packets
    }
}
