/// What an RTP sender knows about its stream, with no I/O: the SSRCs, the media clock (capture time → 90 kHz
/// RTP time from a random offset), what was sent, the RTX sequence, and the figures of sender reports and the
/// round-trip time they give (RFC 3550 §6.4). `RTPSender` keeps one under its lock; tests drive it directly.
package struct RTPSession: Sendable {
    package let ssrc: UInt32
    package let rtxSSRC: UInt32
    /// The RTP timestamp of the first frame.
    package var timestampOffset: UInt32 { clock.offset }
    private var clock: RTPClock
    /// The last frame sent: its RTP time and capture time (sender reports extrapolate from it).
    package private(set) var lastRTP: UInt32 = 0
    package private(set) var lastCaptureNs: Int64?
    /// Capture time of the first frame sent (RTP time `timestampOffset`).
    package private(set) var firstCaptureNs: Int64?
    package private(set) var packetsSent = 0
    package private(set) var bytesSent = 0
    package private(set) var framesSent = 0
    /// The middle 32 bits of the last sender report's NTP time (a receiver echoes them as LSR).
    package private(set) var lastSRNTPMiddle: UInt32 = 0
    package private(set) var rtxSequence: UInt16

    package init(
        ssrc: UInt32 = .random(in: 1...UInt32.max), rtxSSRC: UInt32 = .random(in: 1...UInt32.max),
        timestampOffset: UInt32 = .random(in: 0...UInt32.max), rtxSequence: UInt16 = .random(in: 0...UInt16.max)
    ) {
        self.ssrc = ssrc
        self.rtxSSRC = rtxSSRC
        clock = RTPClock(offset: timestampOffset)
        self.rtxSequence = rtxSequence
    }

    /// The RTP time of a frame captured at `captureNs` (monotonic ns).
    package mutating func timestamp(forCaptureNs captureNs: Int64) -> UInt32 { clock.timestamp(forCaptureNs: captureNs) }

    /// Counts one media packet (first transmission) of `bytes`.
    package mutating func packetSent(bytes: Int) {
        packetsSent += 1
        bytesSent += bytes
    }

    /// Records a whole frame sent at RTP time `rtp`, captured at `captureNs`.
    package mutating func frameSent(rtp: UInt32, captureNs: Int64) {
        framesSent += 1
        lastRTP = rtp
        lastCaptureNs = captureNs
        if firstCaptureNs == nil { firstCaptureNs = captureNs }
    }

    /// The next RTX sequence number (RFC 4588: the RTX stream numbers its packets on its own).
    package mutating func nextRTXSequence() -> UInt16 {
        defer { rtxSequence &+= 1 }
        return rtxSequence
    }

    /// A sender report's figures at wall-clock `ntp` and monotonic `nowNs`: the RTP time that corresponds to
    /// now on the sampling clock (extrapolated from the last frame), and the packet and octet counts (mod 2³²).
    /// Nil before the first frame (a report then would carry no usable timing). Remembers `ntp` for RTT.
    package mutating func senderReport(ntp: UInt64, nowNs: Int64) -> (rtp: UInt32, packets: UInt32, octets: UInt32)? {
        guard let last = lastCaptureNs else { return nil }
        let delta = nowNs - last
        let rtp = lastRTP &+ UInt32(truncatingIfNeeded: delta / 1_000_000_000 * 90_000 + delta % 1_000_000_000 * 90_000 / 1_000_000_000)
        lastSRNTPMiddle = RTPSession.ntpMiddle(ntp)
        return (rtp, UInt32(truncatingIfNeeded: packetsSent), UInt32(truncatingIfNeeded: bytesSent))
    }

    /// The round-trip time in ms that a report block gives when it arrives at `ntpMiddle` (the middle 32 bits
    /// of the NTP time): now − LSR − DLSR, in 1/65536 s. Nil without an LSR or for a figure outside 0...10 s.
    package static func roundTripMs(ntpMiddle: UInt32, lastSR: UInt32, delaySinceLastSR: UInt32) -> Double? {
        guard lastSR != 0 else { return nil }
        let rtt = Int64(ntpMiddle &- lastSR &- delaySinceLastSR)
        guard rtt >= 0 && rtt < 65536 * 10 else { return nil }
        return Double(rtt) * 1000 / 65536
    }

    /// NTP time (seconds since 1900 in the high 32 bits, the fraction in the low 32) of a wall-clock time.
    package static func ntp(seconds: Int, nanoseconds: Int) -> UInt64 {
        let s = UInt64(seconds) &+ 2_208_988_800
        let fraction = (UInt64(nanoseconds) << 32) / 1_000_000_000
        return s << 32 | fraction
    }

    /// NTP time of the monotonic instant `ns` (CLOCK_MONOTONIC nanoseconds, as capture times are), given the
    /// wall clock's lead over the monotonic one (`realtimeMinusMonotonicNs()`): the one mapping that sender
    /// reports and the absolute capture time extension share.
    package static func ntp(monotonicNs ns: Int64, realtimeMinusMonotonicNs offset: Int64) -> UInt64 {
        let wall = ns &+ offset
        let s = wall / 1_000_000_000, rest = wall % 1_000_000_000
        return rest < 0 ? ntp(seconds: Int(s - 1), nanoseconds: Int(rest + 1_000_000_000)) : ntp(seconds: Int(s), nanoseconds: Int(rest))
    }

    /// The middle 32 bits of an NTP time (the compact form RTCP's LSR and DLSR use).
    package static func ntpMiddle(_ ntp: UInt64) -> UInt32 { UInt32((ntp >> 16) & 0xffff_ffff) }
}

/// Seeded packet loss for tests (xorshift: reproducible for a seed).
package struct LossSimulator: Sendable {
    package let rate: Double
    private var random: UInt64
    package init(rate: Double, seed: UInt64) {
        self.rate = rate
        random = seed | 1
    }
    /// Whether the next packet is dropped.
    package mutating func drops() -> Bool {
        guard rate > 0 else { return false }
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return Double(random >> 11) / Double(1 << 53) < rate
    }
}
