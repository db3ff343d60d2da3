package import SystemIO

/// What a sender does about one RTCP packet from a receiver, decided under the sender's lock and done after it.
package enum RTCPAction: Sendable, Equatable {
    case none
    /// PLI/FIR, not within the rate limit of the last one honoured: ask the encoder for a key frame.
    case keyFrame
    /// REMB, raised to the minimum: hand the estimate on.
    case bitrate(UInt64)
    /// Generic NACK: resend these packets from the history (stop at the first over budget).
    case retransmit([UInt16])
    case transportFeedback(TransportFeedback)
}

/// The RTCP rules of a sender (no I/O): receiver reports → loss, jitter and RTT into the statistics;
/// PLI/FIR → a key frame at most once per `keyFrameRequestIntervalNs`; NACK → retransmissions; REMB →
/// a bitrate no lower than `minimumBitrateEstimate` and no higher than `maximumBitrateEstimate`. Feedback about
/// other SSRCs is skipped.
package struct RTCPResponder: Sendable {
    /// The largest REMB taken (10 Gbit/s): its 18-bit mantissa and 6-bit exponent can say up to 2^81 bit/s,
    /// which would overflow whatever is computed from it.
    package static let maximumBitrateEstimate: UInt64 = 10_000_000_000
    package let ssrc: UInt32
    package let keyFrameRequestIntervalNs: Int64
    package let minimumBitrateEstimate: UInt64
    private var lastKeyFrameRequestNs: Int64 = .min / 2

    package init(ssrc: UInt32, keyFrameRequestIntervalNs: Int64, minimumBitrateEstimate: UInt64) {
        self.ssrc = ssrc
        self.keyFrameRequestIntervalNs = keyFrameRequestIntervalNs
        self.minimumBitrateEstimate = minimumBitrateEstimate
    }

    /// Applies one packet, which arrived at monotonic `now` and NTP middle time `ntpMiddle`, to `stats`, and
    /// says what remains to be done.
    package mutating func respond(to packet: RTCPPacket, now: Int64, ntpMiddle: UInt32, stats: inout RTPSender.Statistics) -> RTCPAction {
        switch packet {
        case .receiverReport(_, let reports), .senderReport(_, _, _, _, _, let reports):
            guard let block = reports.first(where: { $0.ssrc == ssrc }) else { return .none }
            stats.receiverReports += 1
            stats.fractionLost = Double(block.fractionLost) / 256
            stats.jitterMs = Double(block.jitter) / 90
            if let rtt = RTPSession.roundTripMs(ntpMiddle: ntpMiddle, lastSR: block.lastSR, delaySinceLastSR: block.delaySinceLastSR) {
                stats.rttMs = rtt
            }
            return .none
        case .pli(_, let media), .fir(_, let media, _):
            guard media == ssrc || media == 0 else { return .none }
            stats.keyFrameRequests += 1
            guard now - lastKeyFrameRequestNs >= keyFrameRequestIntervalNs else { return .none }
            lastKeyFrameRequestNs = now
            stats.keyFrameRequestsHonoured += 1
            return .keyFrame
        case .nack(_, let media, let lost):
            guard media == ssrc else { return .none }
            stats.nacksReceived += 1
            return .retransmit(lost)
        case .remb(_, let reported, _):
            let bitrate = min(max(reported, minimumBitrateEstimate), RTCPResponder.maximumBitrateEstimate)
            stats.rembBitrate = bitrate
            return .bitrate(bitrate)
        case .transportFeedback(let fb):
            stats.congestion.transportFeedbacks += 1
            return .transportFeedback(fb)
        case .other:
            return .none
        }
    }
}

/// Whose RTCP a sender with its own sockets obeys: the receiver's own sockets (the destination's address with
/// its RTP or RTCP port), the addresses the owner named (any port, or one port), and one latched port: the first
/// other port of the destination's address whose datagram is a compound RTCP packet naming our SSRC
/// (`RTCPPacket.compound(_:names:)`), as symmetric-RTP servers latch: a receiver that reports from a socket of
/// its own (GStreamer's unbound `udpsink`). Once a port is latched no other can be (another program on the
/// receiver's host stays a stranger); the receiver's RTP and RTCP ports stay obeyed. Without a `destination` (the
/// transport gives none when the owner named sources) nothing is latched. Everything else is a stranger's, dropped
/// unread.
package struct FeedbackFilter: Sendable {
    /// What to do with one datagram.
    package enum Verdict: Sendable, Equatable {
        /// From a trusted source: handle it.
        case accepted
        /// The first compound RTCP naming our SSRC from another port of the destination: that port is trusted from
        /// now on (this datagram included).
        case latched(port: UInt16)
        /// A stranger's: drop it unread.
        case stranger
    }
    /// Sources trusted by address and port (the receiver's own sockets).
    private let exact: [(host: [UInt8], port: UInt16)]
    /// Sources trusted by address alone, whatever their port (addresses the owner named).
    private let hosts: [[UInt8]]
    /// The destination's address: the only one whose RTCP can latch a port.
    private let destination: [UInt8]?
    /// The port latched, once one was.
    package private(set) var latched: UInt16?
    /// A filter trusting `exact` (address and port), `anyPort` (address), and one latched port of `destination`.
    package init(exact: [SocketAddress], anyPort: [SocketAddress] = [], destination: SocketAddress? = nil) {
        self.exact = exact.map { $0.parts }
        hosts = anyPort.map { $0.parts.host }
        self.destination = destination?.parts.host
    }
    /// Whether `source` is trusted now (by address and port, by address, or the latched port).
    package func accepts(_ source: SocketAddress) -> Bool {
        let p = source.parts
        return exact.contains { $0.host == p.host && $0.port == p.port } || hosts.contains(p.host)
            || (p.host == destination && p.port == latched)
    }
    /// Judges `datagram` from `source` for a sender of `ssrc`, latching its port when it is the first compound RTCP
    /// naming `ssrc` from the destination's address.
    package mutating func judge(_ source: SocketAddress, _ datagram: UnsafeRawBufferPointer, ssrc: UInt32) -> Verdict {
        if accepts(source) { return .accepted }
        let p = source.parts
        guard latched == nil, p.host == destination, RTCPPacket.compound(datagram, names: ssrc) else { return .stranger }
        latched = p.port
        return .latched(port: p.port)
    }
}
