public import VideoCaptureCommons
#if canImport(Glibc)
    import Glibc
#endif

/// Where an `RTPSender` puts its packets when it does not own UDP sockets (a WebRTC transport that protects them
/// with SRTP and sends them on its ICE-selected path). Called from the sending thread and the owner's feedback
/// thread: implementations lock. Returns 0 or an errno.
public protocol RTPTransport: AnyObject, Sendable {
    /// Sends one RTP packet (it may be protected first); returns 0 on success or an errno. The bytes are valid
    /// only during the call.
    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32
    /// Sends one compound RTCP packet; returns 0 on success or an errno. The bytes are valid only during the call.
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32
}

/// An RTP session that cannot start or send: its code says which kind, the message what and where.
public struct RTPError: CodedError {
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence for people, naming the address, port or value at fault.
    public var message: String
    /// The system's error number when a socket call failed.
    public var errno: Int32?
    /// The configuration member refused by `Configuration.validate()` ("dropRate"); the message then starts
    /// with it.
    public var setting: String?
    /// An error with `code`, a human-readable `message`, the failing call's `errno` and the setting at fault, if any.
    public init(_ code: Code, _ message: String, errno: Int32? = nil, setting: String? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
        self.setting = setting
    }
    /// The message, followed by the errno and its text when there is one.
    public var description: String { message + (errno.map { " (errno \($0): \(String(cString: strerror($0))))" } ?? "") }
}

extension RTPSender {
    /// Where and how to send; only `host` and `port` have no default.
    public struct Configuration: Sendable {
        /// The receiver's IPv4 or IPv6 address, as a literal (names are not resolved).
        public var host: String
        /// The receiver's RTP port, 1–65535.
        public var port: Int
        /// Where RTCP goes (default port + 1); with `rtcpMux` RTP and RTCP share `port`.
        public var rtcpPort: Int?
        /// Send RTCP on the RTP port (RFC 5761), as WebRTC does.
        public var rtcpMux = false
        /// Local port for our RTCP socket (receivers send their reports there); 0 picks one.
        public var localRTCPPort = 0
        /// RTP payload bytes per packet (see `H264Packetizer.maxPayload`).
        public var maxPayload = 1200
        /// The H.264 payload type announced in the SDP.
        public var payloadType: UInt8 = 96
        /// The RTX payload type (RFC 4588) for retransmissions on a stream of their own; nil resends on the media
        /// stream as it was.
        public var rtxPayloadType: UInt8?
        /// The id negotiated for the video-orientation header extension (`a=extmap:ID urn:3gpp:video-orientation`,
        /// 1…14): the last packet of every frame then carries the frame's `EncodedFrame.rotation` for the receiver
        /// to apply. nil sends no extension (the pixels must then be upright).
        public var videoOrientationExtensionID: UInt8?
        /// The id negotiated for the absolute capture time extension
        /// (`http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time`, 1…14): the first packet of every frame
        /// then carries its capture time (`EncodedFrame.timestampNs`) on the wall clock, as NTP, so the receiver
        /// can tell how old what it shows is. nil sends none.
        public var absoluteCaptureTimeExtensionID: UInt8?
        /// The id negotiated for the playout delay extension (`http://www.webrtc.org/experiments/rtp-hdrext/playout-delay`,
        /// 1…14); with `playoutDelay`, the first packet of every frame carries those bounds.
        public var playoutDelayExtensionID: UInt8?
        /// The playout delay the receiver is asked for (with `playoutDelayExtensionID`); nil sends none, and the
        /// receiver chooses its own.
        public var playoutDelay: PlayoutDelay?
        /// With `playoutDelay`: the bounds sent instead while the link is congested: the send-side estimator saw
        /// overuse or more than 2 % loss, or a NACK came, within `congestionHoldNs`, or the owner said the link is
        /// limited (`setLinkLimited(_:)`: a viewer on a lower encode tier). A low-latency delay (min 0, max ≤ 500 ms:
        /// Chromium renders each frame as soon as it is decoded) leaves no jitter buffer to absorb a late frame on a
        /// tight link; `PlayoutDelay.receiverDefault` gives the receiver its own buffer back. nil: `playoutDelay` always.
        public var congestedPlayoutDelay: PlayoutDelay?
        /// How long after the last sign of congestion the link counts as congested (10 s, in nanoseconds).
        public var congestionHoldNs: Int64 = 10_000_000_000
        /// The ids negotiated for the `urn:ietf:params:rtp-hdrext:sdes:mid` and `…:sdes:rtp-stream-id` header
        /// extensions (RFC 8852, 1…14) and the values every packet carries with them (`mid`, `rid`: 1…3 rid
        /// characters): a simulcast layer (RFC 8853), which an SFU such as Janus tells from the others by its rid.
        /// nil: not sent.
        public var midExtensionID: UInt8?, ridExtensionID: UInt8?
        /// The media section's mid, carried with `midExtensionID`.
        public var mid: String?
        /// The layer's rid, carried with `ridExtensionID`.
        public var rid: String?
        /// The id negotiated for `urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id` (1…14): RTX packets then
        /// carry the rid as the repaired stream's instead of as their own (their rid element is renamed), so the SFU
        /// maps the RTX SSRC to the layer it repairs. nil: RTX copies the media packet's extensions as they are.
        public var repairedRIDExtensionID: UInt8?
        /// The media SSRC, when it must be known before the sender exists (an offer that lists it); nil: random.
        public var ssrc: UInt32?
        /// The RTX SSRC, likewise; nil: random.
        public var rtxSSRC: UInt32?
        /// The id negotiated for the transport-wide sequence number extension (1…14): every packet (and
        /// retransmission) carries one, the receiver's transport feedback drives a `SendSideBandwidthEstimator`,
        /// and its estimate goes to the bitrate handler as REMB's does. nil: no send-side estimation.
        public var transportWideCCExtensionID: UInt8?
        /// The estimator's bounds and start (with `transportWideCCExtensionID`).
        public var sendSideEstimation = SendSideBandwidthEstimator.Configuration()
        /// Packets kept for retransmission (about 1 s of 2 Mbit/s video).
        public var historySize = 512
        /// NACKs for packets sent before the last key frame go unserved (`Statistics.nacksBeforeKeyFrame`). Right
        /// for a receiver that decodes from a complete key frame and drops the older incomplete frames (libwebrtc,
        /// Chromium): resending them only delays the key frame on a loaded link. Wrong for one with an in-order
        /// jitter buffer (GStreamer's rtpjitterbuffer, ffmpeg): it holds everything behind a missing packet until
        /// its latency deadline, and a packet never resent costs frames (measured with GStreamer, 1 % loss, a key
        /// frame every 17 frames: 229–266 of 300 decoded with the rule, see StreamTests). Off by default;
        /// `WebRTCPeer` turns it on.
        public var keyFrameSupersedesEarlierPackets = false
        /// Drop outgoing packets with this probability (loss simulation for tests; seeded, reproducible).
        public var dropRate = 0.0
        /// The seed of the loss simulation's random numbers (the same seed drops the same packets).
        public var dropSeed: UInt64 = 1
        /// PLI/FIR requests closer together than this (nanoseconds; 300 ms by default) are counted but not passed on.
        public var keyFrameRequestIntervalNs: Int64 = 300_000_000
        /// The CNAME sent in the SDES of each sender report.
        public var cname = "swift-video-capture"
        /// Besides the receiver's own sockets (the destination address from its RTP or RTCP port), where RTCP is
        /// obeyed from: an address (any port: a receiver that reports from another address of its own), or
        /// `ADDRESS:PORT` / `[V6]:PORT` (that port only: a receiver that reports from a socket of its own).
        /// Left empty, one port of the destination address is latched (`Statistics.rtcpLatchedPort`): the first to
        /// send a compound RTCP packet (an SR or RR first) that names this stream's SSRC in a report block or as the
        /// media source of a NACK, PLI or FIR: a receiver reporting from a random port (GStreamer's unbound
        /// `udpsink`). No port is latched after it; the receiver's own ports stay trusted. A program on the
        /// receiver's host that knows the SSRC and reports first would take the latch: where that matters, name
        /// the receiver's sources here, and nothing is latched. Feedback from anywhere else, other ports of the
        /// receiver's host included, is dropped and counted (`Statistics.rtcpFromStrangers`). Only for a sender
        /// that owns its sockets.
        public var feedbackFrom: [String] = []
        /// Retransmissions may use at most this share of the media bitrate (over a sliding second), so that
        /// whatever the NACK rate the sender sends at most (1 + share) × its media bitrate. 0.45 keeps the total
        /// under 1.5 × with what the transport adds to each packet (RTX's 2 bytes, SRTP's tag).
        public var retransmissionShare = 0.45
        /// Pace media packets at this multiple of the bandwidth estimate (the send-side one with transport-cc, else
        /// the receiver's REMB; 2.5 as libwebrtc), from the pacing thread, instead of sending each frame as one burst;
        /// nil sends at once. Until an estimate is known packets go out at once.
        public var pacingFactor: Double?
        /// A receiver's bandwidth estimate (REMB) is raised to this many bit/s before it is handed on: one REMB
        /// of 0 must not silence the stream.
        public var minimumBitrateEstimate: UInt64 = 50_000
        /// A configuration for `host`:`port` with the defaults above.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    /// Counters since the sender was made, read with `RTPSender.statistics` (a snapshot, from any thread).
    public struct Statistics: Sendable, Equatable {
        /// Media packets and bytes (first transmissions; retransmissions are counted apart).
        public var packetsSent = 0
        /// Bytes of those packets, RTP headers included.
        public var bytesSent = 0
        /// Access units sent.
        public var framesSent = 0
        /// Packets the loss simulation (`Configuration.dropRate`) did not send.
        public var packetsDroppedBySimulation = 0
        /// Packets resent for NACKs.
        public var retransmissions = 0
        /// Generic NACK messages about this stream received.
        public var nacksReceived = 0
        /// PLI and FIR messages about this stream received.
        public var keyFrameRequests = 0
        /// Requests passed to the key-frame handler (the others came within `keyFrameRequestIntervalNs`).
        public var keyFrameRequestsHonoured = 0
        /// Report blocks about our stream received (in RRs or SRs).
        public var receiverReports = 0
        /// Sender reports sent.
        public var senderReports = 0
        /// Round-trip time from the last receiver report that answered a sender report.
        public var rttMs: Double?
        /// The loss the last receiver report gave, 0…1.
        public var fractionLost: Double?
        /// The interarrival jitter the last receiver report gave, milliseconds.
        public var jitterMs: Double?
        /// The last REMB estimate received, bits per second (after raising it to `minimumBitrateEstimate`).
        public var rembBitrate: UInt64?
        /// RTCP datagrams that could not be parsed.
        public var rtcpErrors = 0
        /// RTCP datagrams from addresses other than the receiver's (dropped unread).
        public var rtcpFromStrangers = 0
        /// The port of the destination's address that RTCP was latched to: the first port other than the receiver's
        /// RTP and RTCP ports to send a compound RTCP packet naming this stream (see `Configuration.feedbackFrom`);
        /// nil: none was.
        public var rtcpLatchedPort: Int?
        /// Bytes sent as retransmissions.
        public var retransmittedBytes = 0
        /// NACKed packets not resent: no longer in the history, or already resent within the last RTT.
        public var nacksIgnored = 0
        /// NACKed packets not resent because retransmissions had used their share of the bitrate.
        public var retransmissionsOverBudget = 0
        /// Capture time (monotonic ns) of the first frame sent: RTP time `rtpTimestampOffset` (receivers map
        /// RTP timestamps back to capture times with it).
        public var firstCaptureNs: Int64?
        /// The playout delay the last frame carried (nil: none).
        public var playoutDelaySent: PlayoutDelay?
        /// How many times the playout delay sent changed between `Configuration.playoutDelay` and
        /// `congestedPlayoutDelay`.
        public var playoutDelayChanges = 0
        /// NACKed packets not resent because a key frame was sent after them (the receiver decodes from it).
        public var nacksBeforeKeyFrame = 0
        /// Congestion control: the send-side estimate, probes, trains, pacing (`CongestionStatistics`).
        public var congestion = CongestionStatistics()
    }
}

extension RTPSender.Configuration {
    /// Header extension ids must fit the one-byte form (RFC 8285: 1…14), each its own, and a mid or rid sent must
    /// be 1…3 rid characters.
    func checkExtensions() throws(RTPError) {
        let ids = [
            ("video-orientation", videoOrientationExtensionID), ("transport-wide-cc", transportWideCCExtensionID),
            ("abs-capture-time", absoluteCaptureTimeExtensionID), ("playout-delay", playoutDelayExtensionID),
            ("sdes:mid", midExtensionID), ("sdes:rtp-stream-id", ridExtensionID), ("sdes:repaired-rtp-stream-id", repairedRIDExtensionID),
        ]
        for (name, id) in ids {
            if let id, !(1...14).contains(id) {
                throw RTPError(.invalidConfiguration, "\(name) extension id \(id) is not 1...14 (RFC 8285 one-byte form)")
            }
        }
        let used = ids.compactMap(\.1)
        if Set(used).count != used.count { throw RTPError(.invalidConfiguration, "two header extensions share an id: \(used)") }
        for (name, id, value) in [("mid", midExtensionID, mid), ("rid", ridExtensionID, rid)] where id != nil {
            guard let value, RTPHeaderExtensionElement.sdes(id: 1, value) != nil else {
                throw RTPError(
                    .invalidConfiguration, "the \(name) sent with its extension must be 1...3 letters, digits, - or _, got \(value ?? "none")")
            }
        }
    }
}

/// The codes of `RTPError`.
extension ErrorCode where Domain == RTPError {
    /// A port, address or rate out of range (nothing was opened).
    public static var invalidConfiguration: Self { Self(rawValue: "invalid configuration") }
    /// A socket could not be made or bound (errno says why).
    public static var socketFailed: Self { Self(rawValue: "socket failed") }
    /// Sending failed (errno says why).
    public static var sendFailed: Self { Self(rawValue: "send failed") }
}
