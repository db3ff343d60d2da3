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
    /// The header extensions of the access unit being packetized.
    private struct Extensions {
        var marker: RTPHeaderExtensionElement?
        /// Elements for the first packet of the access unit only (cleared once it is written).
        var first: (RTPHeaderExtensionElement?, RTPHeaderExtensionElement?) = (nil, nil)
        var transportID: UInt8?
        var transportNext: UInt16 = 0
        /// Elements for every packet (the mid and the rid of a simulcast layer).
        var every: (RTPHeaderExtensionElement?, RTPHeaderExtensionElement?) = (nil, nil)
    }
    private var extensions = Extensions()

    /// The size of the RTP header this packetizer writes: the fixed header, no CSRC, no extension.
    public static let headerSize = 12
    /// The most a header extension adds to a packet (RFC 8285 one-byte form: 4 bytes of header, the transport-wide
    /// sequence number (1 + 2 bytes), the absolute capture time (1 + 8), the playout delay (1 + 3) and the
    /// video orientation (1 + 1), and the elements of every packet (a simulcast layer's mid and rid, 1 + 3 bytes
    /// each at most), padded to 32 bits): room kept in every buffer that holds a packet. With 1200 bytes of payload
    /// a packet is then at most 1244 bytes of RTP (1262 with SRTP's tag and RTX's 2 bytes).
    public static let maxExtensionSize = 32

    /// A packetizer for packets of at most `maxPayload` payload bytes (clamped to 16…65000), with its buffer
    /// allocated once.
    public init(maxPayload: Int = 1200, state: RTPStreamState = RTPStreamState()) {
        self.maxPayload = max(16, min(65_000, maxPayload))
        self.state = state
        buffer = [UInt8](repeating: 0, count: self.maxPayload + H264Packetizer.headerSize + H264Packetizer.maxExtensionSize)
        pending.reserveCapacity(16)
    }

    /// Packetizes one access unit (Annex-B bytes and their NAL units, as `EncodedFrame` holds them).
    /// `emit(packet)` gets each packet. `markerExtension`, if any, is carried by the last packet (the one with the
    /// marker bit) as an RFC 8285 one-byte header extension: where the video-orientation extension goes (3GPP TS
    /// 26.114). With `transportSequence` (the negotiated id and the first number), every packet carries a
    /// transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-extensions), the k-th packet
    /// `first &+ k`. `firstPacketExtensions` (at most 1 + 8 and 1 + 3 bytes: the absolute capture time and the
    /// playout delay) go on the first packet only, as libwebrtc sends them. `everyPacketExtensions` (at most 1 + 3
    /// bytes each: the `sdes:mid` and `sdes:rtp-stream-id` of a simulcast layer, RFC 8852) go on every packet.
    /// Returns the number of packets.
    @discardableResult
    public mutating func packetize(
        _ data: [UInt8], nalUnits: [NALUnit], timestamp: UInt32, markerExtension: RTPHeaderExtensionElement? = nil,
        transportSequence: (id: UInt8, first: UInt16)? = nil,
        firstPacketExtensions: (RTPHeaderExtensionElement?, RTPHeaderExtensionElement?) = (nil, nil),
        everyPacketExtensions: (RTPHeaderExtensionElement?, RTPHeaderExtensionElement?) = (nil, nil),
        emit: (UnsafeRawBufferPointer) -> Void
    ) -> Int {
        extensions = Extensions(
            marker: markerExtension, first: firstPacketExtensions, transportID: transportSequence?.id,
            transportNext: transportSequence?.first ?? 0, every: everyPacketExtensions)
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

    /// Writes the RTP header (with the transport-wide sequence number on every packet, the first-packet elements
    /// on the first and `marker` on the marker packet, as one-byte extension elements), advances the sequence
    /// number and returns the header's length.
    private static func header(
        _ p: UnsafeMutablePointer<UInt8>, _ state: inout RTPStreamState, timestamp: UInt32, marker: Bool, _ ex: inout Extensions
    ) -> Int {
        let markerElement = marker ? ex.marker : nil
        let transport = ex.transportID.flatMap { RTPHeaderExtensionElement(id: $0, value: UInt64(ex.transportNext), length: 2) }
        if transport != nil { ex.transportNext &+= 1 }
        let (first0, first1) = ex.first
        ex.first = (nil, nil)
        let (every0, every1) = ex.every
        let any = markerElement != nil || transport != nil || first0 != nil || first1 != nil || every0 != nil || every1 != nil
        p[0] = any ? 0x90 : 0x80
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
        guard any else { return 12 }
        return 12 + RTPHeaderExtensionElement.writeBlock(transport, first0, first1, markerElement, every0, every1, to: p + 12)
    }

    private mutating func writeSingle(_ data: [UInt8], _ n: NALUnit, timestamp: UInt32, marker: Bool, emit: (UnsafeRawBufferPointer) -> Void) {
        var st = state
        var ex = extensions
        buffer.withUnsafeMutableBufferPointer { b in
            let h = H264Packetizer.header(b.baseAddress!, &st, timestamp: timestamp, marker: marker, &ex)
            data.withUnsafeBufferPointer { d in (b.baseAddress! + h).update(from: d.baseAddress! + n.offset, count: n.length) }
            emit(UnsafeRawBufferPointer(start: b.baseAddress, count: h + n.length))
        }
        state = st
        extensions = ex
    }

    private mutating func writeSTAPA(
        _ data: [UInt8], _ units: ArraySlice<NALUnit>, timestamp: UInt32, marker: Bool, emit: (UnsafeRawBufferPointer) -> Void
    ) {
        var st = state
        var ex = extensions
        buffer.withUnsafeMutableBufferPointer { b in
            let h = H264Packetizer.header(b.baseAddress!, &st, timestamp: timestamp, marker: marker, &ex)
            // STAP-A header: F = OR of the units' F bits, NRI = their maximum, type 24.
            var f: UInt8 = 0, nri: UInt8 = 0
            data.withUnsafeBufferPointer { d in
                for u in units {
                    f |= d[u.offset] & 0x80
                    nri = max(nri, d[u.offset] & 0x60)
                }
            }
            b[h] = f | nri | 24
            var o = h + 1
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
        extensions = ex
    }

    private mutating func writeFUA(_ data: [UInt8], _ n: NALUnit, timestamp: UInt32, marker: Bool, emit: (UnsafeRawBufferPointer) -> Void) -> Int {
        var st = state
        var packets = 0
        var ex = extensions
        buffer.withUnsafeMutableBufferPointer { b in
            data.withUnsafeBufferPointer { d in
                let nalHeader = d[n.offset]
                let chunk = maxPayload - 2
                var pos = 1 // the NAL header byte is carried in the FU indicator/header, not as payload
                while pos < n.length {
                    let take = min(chunk, n.length - pos)
                    let end = pos + take == n.length
                    let h = H264Packetizer.header(b.baseAddress!, &st, timestamp: timestamp, marker: marker && end, &ex)
                    b[h] = (nalHeader & 0xe0) | 28 // FU indicator: F, NRI, type 28
                    b[h + 1] = (pos == 1 ? 0x80 : 0) | (end ? 0x40 : 0) | (nalHeader & 0x1f) // FU header: S, E, type
                    (b.baseAddress! + h + 2).update(from: d.baseAddress! + n.offset + pos, count: take)
                    emit(UnsafeRawBufferPointer(start: b.baseAddress, count: h + 2 + take))
                    pos += take
                    packets += 1
                }
            }
        }
        state = st
        extensions = ex
        return packets
    }
}

/// One element of an RFC 8285 one-byte RTP header extension: an id negotiated in the SDP (`a=extmap:ID URI`,
/// 1…14) and 1…8 bytes of data, kept inline (no allocation per packet).
public struct RTPHeaderExtensionElement: Sendable, Hashable {
    /// The negotiated id, 1…14.
    public let id: UInt8
    /// The data bytes, big-endian in the low `length` bytes.
    public let value: UInt64
    /// How many data bytes, 1…8.
    public let length: Int

    /// An element of `length` bytes (the low bytes of `value`, most significant first); nil for an id outside
    /// 1…14 or a length outside 1…8.
    public init?(id: UInt8, value: UInt64, length: Int) {
        guard (1...14).contains(id), (1...8).contains(length) else { return nil }
        self.id = id
        self.value = value
        self.length = length
    }

    /// The video-orientation element (3GPP TS 26.114 §7.4.5, "CVO"; what WebRTC calls
    /// `urn:3gpp:video-orientation`): one byte, `0 0 0 0 C F R1 R0`, with R1R0 the clockwise rotation the receiver
    /// applies (0, 90, 180, 270 degrees as 0…3), camera C = 0 (front/unknown), flip F = 0.
    public static func videoOrientation(id: UInt8, rotationDegrees: Int) -> RTPHeaderExtensionElement? {
        let quarter = ((rotationDegrees % 360 + 360) % 360) / 90
        return RTPHeaderExtensionElement(id: id, value: UInt64(quarter & 3), length: 1)
    }

    /// The absolute capture time element (`http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time`, its
    /// shortened 8-byte form): when the frame was captured, as a 64-bit NTP time (UQ32.32 seconds since 1900)
    /// on the sender's wall clock. No estimated capture clock offset (the sender is the capturer).
    public static func absoluteCaptureTime(id: UInt8, ntp: UInt64) -> RTPHeaderExtensionElement? {
        RTPHeaderExtensionElement(id: id, value: ntp, length: 8)
    }

    /// The playout delay element (`http://www.webrtc.org/experiments/rtp-hdrext/playout-delay`): 3 bytes, the
    /// minimum and maximum delay the receiver should hold frames for, 12 bits each in units of 10 ms.
    public static func playoutDelay(id: UInt8, _ delay: PlayoutDelay) -> RTPHeaderExtensionElement? {
        RTPHeaderExtensionElement(id: id, value: UInt64(delay.minMs / 10) << 12 | UInt64(delay.maxMs / 10), length: 3)
    }

    /// An RTCP SDES item as a header extension (RFC 8852: `urn:ietf:params:rtp-hdrext:sdes:mid`,
    /// `…:sdes:rtp-stream-id`, `…:sdes:repaired-rtp-stream-id`): the text's bytes. nil unless 1…3 bytes of
    /// RFC 8851 rid characters (letters, digits, `-`, `_`): what the packetizer keeps room for.
    public static func sdes(id: UInt8, _ text: String) -> RTPHeaderExtensionElement? {
        let bytes = Array(text.utf8)
        guard (1...3).contains(bytes.count),
            bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d || $0 == 0x5f })
        else { return nil }
        return RTPHeaderExtensionElement(id: id, value: bytes.reduce(0) { $0 << 8 | UInt64($1) }, length: bytes.count)
    }

    /// The rotation in degrees that a video-orientation byte asks for (its R1R0 bits).
    public static func rotationDegrees(videoOrientation byte: UInt8) -> Int { Int(byte & 3) * 90 }

    /// Writes the element (its header byte and data) at `p`; returns its size.
    func write(to p: UnsafeMutablePointer<UInt8>) -> Int {
        p[0] = id << 4 | UInt8(length - 1)
        for i in 0..<length { p[1 + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(length - 1 - i))) }
        return 1 + length
    }

    /// Writes an extension block (profile 0xBEDE, its length in words, the elements, zero padding) at `p`;
    /// returns its size (a multiple of 4, at most `H264Packetizer.maxExtensionSize` for the elements the
    /// packetizer passes).
    static func writeBlock(
        _ a: RTPHeaderExtensionElement?, _ b: RTPHeaderExtensionElement?, _ c: RTPHeaderExtensionElement? = nil,
        _ d: RTPHeaderExtensionElement? = nil, _ e: RTPHeaderExtensionElement? = nil, _ f: RTPHeaderExtensionElement? = nil,
        to p: UnsafeMutablePointer<UInt8>
    ) -> Int {
        var o = 4
        if let a { o += a.write(to: p + o) }
        if let b { o += b.write(to: p + o) }
        if let c { o += c.write(to: p + o) }
        if let d { o += d.write(to: p + o) }
        if let e { o += e.write(to: p + o) }
        if let f { o += f.write(to: p + o) }
        let words = (o - 4 + 3) / 4
        p[0] = 0xBE
        p[1] = 0xDE
        p[2] = 0
        p[3] = UInt8(words)
        while o < 4 + 4 * words {
            p[o] = 0
            o += 1
        }
        return o
    }
}

/// The bounds of a receiver's playout delay (the playout-delay RTP header extension): how long it holds a frame
/// between receiving and showing it, from `minMs` to `maxMs`. Min 0 asks a WebRTC receiver to render as soon as
/// a frame is decoded, its jitter buffer allowing; max 0 makes libwebrtc render at once, without smoothing.
public struct PlayoutDelay: Sendable, Hashable, CustomStringConvertible {
    /// The least delay, milliseconds (a multiple of 10, 0…40950).
    public let minMs: Int
    /// The most delay, milliseconds (a multiple of 10, minMs…40950).
    public let maxMs: Int
    /// Bounds of `minMs`…`maxMs` milliseconds, rounded down to 10 ms; nil unless 0 ≤ min ≤ max ≤ 40950.
    public init?(minMs: Int, maxMs: Int) {
        guard 0 <= minMs, minMs <= maxMs, maxMs <= 40_950 else { return nil }
        self.minMs = minMs / 10 * 10
        self.maxMs = maxMs / 10 * 10
    }
    /// Bounds from "MIN:MAX" in milliseconds (`description`'s form, "0:500"); nil when malformed or not
    /// 0 ≤ min ≤ max ≤ 40950.
    public init?(parsing text: String) {
        let f = text.split(separator: ":", omittingEmptySubsequences: false)
        guard f.count == 2, let lo = Int(f[0]), let hi = Int(f[1]) else { return nil }
        self.init(minMs: lo, maxMs: hi)
    }
    /// "MIN:MAX" in milliseconds.
    public var description: String { "\(minMs):\(maxMs)" }
    /// 0:500: libwebrtc's low-latency rendering (min 0, max at most 500 ms): each frame is shown as soon as it is
    /// decoded, with no jitter buffer to wait in.
    public static let lowLatency = PlayoutDelay(minMs: 0, maxMs: 500)!
    /// 0:10000: what a libwebrtc receiver uses when nobody asks (its own jitter buffer, up to 10 s): sent to take
    /// back an earlier low-latency request (a receiver keeps the last bounds it was sent).
    public static let receiverDefault = PlayoutDelay(minMs: 0, maxMs: 10_000)!
}
