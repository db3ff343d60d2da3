import SystemIO

/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01): an RTCP
/// RTPFB message (PT 205, FMT 15) in which the receiver lists, for a run of transport-wide sequence numbers,
/// which packets arrived and when (250 µs resolution). The sender compares arrival with send times: that is
/// send-side bandwidth estimation (`SendSideBandwidthEstimator`).
public struct TransportFeedback: Sendable, Equatable {
    /// The feedback's sender and media SSRCs.
    public var senderSSRC: UInt32, mediaSSRC: UInt32
    /// The first transport-wide sequence number the feedback covers.
    public var baseSequence: UInt16
    /// The receiver's feedback counter (wraps at 256).
    public var feedbackCount: UInt8
    /// One entry per covered sequence number, in order: its arrival time in microseconds on the receiver's
    /// clock (reference time plus deltas), or nil when it did not arrive.
    public var arrivals: [Int64?]

    /// The RTCP packet type and format of transport feedback.
    public static let packetType: UInt8 = 205, format: UInt8 = 15

    /// A feedback message with its fields.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, baseSequence: UInt16, feedbackCount: UInt8, arrivals: [Int64?]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.baseSequence = baseSequence
        self.feedbackCount = feedbackCount
        self.arrivals = arrivals
    }

    /// Parses one RTCP packet (its header included). nil for anything that is not well-formed transport
    /// feedback: every count and length is checked against the packet, nothing traps.
    public init?(_ p: UnsafeRawBufferPointer) {
        guard p.count >= 20, p[0] >> 6 == 2, p[0] & 0x1f == TransportFeedback.format, p[1] == TransportFeedback.packetType else { return nil }
        let length = (Int(p.bigEndianUInt16(at: 2)) + 1) * 4
        guard length <= p.count, length >= 20 else { return nil }
        var end = length
        if p[0] & 0x20 != 0 { // padding
            let pad = Int(p[length - 1])
            guard pad >= 1, pad <= length - 20 else { return nil }
            end -= pad
        }
        senderSSRC = p.bigEndianUInt32(at: 4)
        mediaSSRC = p.bigEndianUInt32(at: 8)
        baseSequence = p.bigEndianUInt16(at: 12)
        let count = Int(p.bigEndianUInt16(at: 14))
        // 24-bit signed reference time in multiples of 64 ms.
        var reference = Int64(p[16]) << 16 | Int64(p[17]) << 8 | Int64(p[18])
        if reference & 0x80_0000 != 0 { reference -= 1 << 24 }
        feedbackCount = p[19]
        guard count > 0 else { return nil }
        // Packet chunks until `count` statuses: 0 not received, 1 small delta, 2 large or negative delta.
        var statuses: [UInt8] = []
        statuses.reserveCapacity(count)
        var o = 20
        while statuses.count < count {
            guard o + 2 <= end else { return nil }
            let chunk = p.bigEndianUInt16(at: o)
            o += 2
            if chunk & 0x8000 == 0 {
                let symbol = UInt8((chunk >> 13) & 3), run = Int(chunk & 0x1fff)
                guard symbol != 3 else { return nil }
                statuses.append(contentsOf: repeatElement(symbol, count: min(run, count - statuses.count)))
            } else if chunk & 0x4000 == 0 {
                for i in 0..<14 where statuses.count < count { statuses.append(UInt8((chunk >> (13 - i)) & 1)) }
            } else {
                for i in 0..<7 where statuses.count < count {
                    let symbol = UInt8((chunk >> (12 - 2 * i)) & 3)
                    guard symbol != 3 else { return nil }
                    statuses.append(symbol)
                }
            }
        }
        // Receive deltas, in 250 µs units: one byte for small, two (signed) for large.
        var time = reference * 64_000
        var arrivals: [Int64?] = []
        arrivals.reserveCapacity(count)
        for s in statuses {
            switch s {
            case 1:
                guard o + 1 <= end else { return nil }
                time += Int64(p[o]) * 250
                o += 1
                arrivals.append(time)
            case 2:
                guard o + 2 <= end else { return nil }
                time += Int64(Int16(bitPattern: p.bigEndianUInt16(at: o))) * 250
                o += 2
                arrivals.append(time)
            default: arrivals.append(nil)
            }
        }
        self.arrivals = arrivals
    }

    /// The message as RTCP bytes (two-bit status vectors throughout, padded to 32 bits): what a receiver sends.
    /// Arrival times are rounded down to 250 µs; the reference time is the first arrival's 64 ms multiple.
    public func serialized() -> [UInt8] {
        let firstArrival = arrivals.lazy.compactMap { $0 }.first ?? 0
        let reference = firstArrival >= 0 ? firstArrival / 64_000 : (firstArrival - 63_999) / 64_000
        var statuses: [UInt8] = [], deltas: [UInt8] = []
        var time = reference * 64_000
        for a in arrivals {
            guard let a else {
                statuses.append(0)
                continue
            }
            let ticks = (a - time) / 250
            if (0...255).contains(ticks) {
                statuses.append(1)
                deltas.append(UInt8(ticks))
            } else {
                statuses.append(2)
                let clamped = Int16(clamping: ticks)
                deltas += [UInt8(truncatingIfNeeded: clamped >> 8), UInt8(truncatingIfNeeded: clamped)]
            }
            time += ticks * 250
        }
        var m: [UInt8] = [0x80 | TransportFeedback.format, TransportFeedback.packetType, 0, 0]
        m += bigEndianBytes(senderSSRC) + bigEndianBytes(mediaSSRC)
        m += [UInt8(baseSequence >> 8), UInt8(baseSequence & 0xff), UInt8(statuses.count >> 8 & 0xff), UInt8(statuses.count & 0xff)]
        let r = UInt32(truncatingIfNeeded: reference) & 0xff_ffff
        m += [UInt8(r >> 16), UInt8((r >> 8) & 0xff), UInt8(r & 0xff), feedbackCount]
        var i = 0
        while i < statuses.count {
            var chunk: UInt16 = 0xC000
            for k in 0..<7 where i + k < statuses.count { chunk |= UInt16(statuses[i + k]) << UInt16(12 - 2 * k) }
            m += [UInt8(chunk >> 8), UInt8(chunk & 0xff)]
            i += 7
        }
        m += deltas
        while m.count % 4 != 0 { m.append(0) }
        let words = m.count / 4 - 1
        m[2] = UInt8(words >> 8)
        m[3] = UInt8(words & 0xff)
        return m
    }
}
