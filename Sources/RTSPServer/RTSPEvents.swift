public import VideoCaptureCommons

/// Why an RTSP server could not start: a code, a sentence for people naming the address, port or value at fault,
/// and the configuration member refused by a `validate()` ("maxSessions"), if one is.
public typealias RTSPError = CodedSettingError<RTSPFailure>

/// The domain of `RTSPError`: its codes are `ErrorCode<RTSPError>`'s.
public enum RTSPFailure {}

/// The codes of `RTSPError`.
extension ErrorCode where Domain == RTSPError {
    /// The TCP or UDP address cannot be bound (in use, not ours).
    public static var cannotListen: Self { Self(rawValue: "cannot listen") }
    /// A value of the configuration is out of range.
    public static var invalidConfiguration: Self { Self(rawValue: "invalid configuration") }
}

/// What happened to a client's session, for the app to show (the library never prints).
public struct RTSPEvent: Sendable, CustomStringConvertible {
    /// The kinds of event.
    public enum Kind: Sendable, Equatable {
        /// SETUP made the session.
        case setUp
        /// PLAY started the stream.
        case playing
        /// The session ended; `reason` says why (TEARDOWN, timeout, connection closed, too slow, server stopped).
        case ended
    }
    /// What happened.
    public var kind: Kind
    /// The session as it was then.
    public var session: RTSPSessionStatistics
    /// Why the session ended (for `.ended`).
    public var reason: String?
    /// The event as a line for a log: "rtsp: client 2 from 192.0.2.1 set up (udp 5000-5001)", "rtsp: client 2
    /// playing", "rtsp: client 2 ended: REASON (N frames sent)".
    public var description: String {
        let s = session
        return switch kind {
        case .setUp: "rtsp: client \(s.number) from \(s.client) set up (\(s.transport) \(s.ports))"
        case .playing: "rtsp: client \(s.number) playing"
        case .ended: "rtsp: client \(s.number) ended: \(reason ?? "?") (\(s.framesSent) frames sent)"
        }
    }
}

/// One client session's figures (a snapshot).
public struct RTSPSessionStatistics: Sendable {
    /// The session's number, 1 for the first since the server started (its id is a secret and not shown).
    public var number: Int
    /// The client's IP address.
    public var client: String
    /// `udp` or `tcp` (interleaved).
    public var transport: String
    /// The client's ports (UDP) or the interleaved channels (TCP), e.g. `5000-5001`.
    public var ports: String
    /// `ready` (set up), `playing`, or `ended`.
    public var state: String
    /// Frames, packets and bytes sent to this client.
    public var framesSent: Int, packetsSent: Int, bytesSent: Int
    /// Frames not sent because the client's TCP connection was congested (slow client).
    public var framesDropped: Int
    /// Frames not sent while the client waited for its first key frame (or the next one after drops).
    public var framesSkippedBeforeKeyFrame: Int
    /// Receiver-report blocks about our stream, and what the last one said: RTT (ms), loss (0…1), jitter (ms).
    public var receiverReports: Int, rttMs: Double?, fractionLost: Double?, jitterMs: Double?
    /// Sender reports sent to this client.
    public var senderReports: Int
    /// PLI/FIR from this client.
    public var keyFrameRequests: Int
    /// NACKs from this client and the packets resent for them.
    public var nacks: Int, retransmissions: Int
    /// RTCP packets from this client that could not be parsed.
    public var rtcpErrors: Int
    /// Seconds since the client last showed it is there (a request naming the session, or RTCP).
    public var idleSeconds: Double
}

/// Requests the server refused, by reason.
public struct RTSPRefusals: Sendable, Equatable {
    /// 401s: no or wrong credentials, a nonce given to another address, a replayed `nc`, a wrong `uri` (stale
    /// nonces are not counted).
    public var unauthorized = 0
    /// Requests that could not be parsed (400, 413, 414, 505), and requests refused as invalid in their state
    /// or with a bad Transport (454, 455, 459, 461, 404, 405, 501).
    public var malformed = 0, invalid = 0
    /// Connections closed for not completing a request in time, or idle without a session.
    public var timeouts = 0
    /// Connections refused over the overall or per-address limit.
    public var connectionLimit = 0, perAddressConnectionLimit = 0
    /// SETUPs refused over the session limits (503).
    public var sessionLimit = 0, perAddressSessionLimit = 0
    /// RTCP datagrams on the shared port from addresses that are no client's.
    public var rtcpFromStrangers = 0
    /// Connections closed to make room for a newcomer when the server was full (idle longest, none playing).
    public var evicted = 0
    /// Digest answers refused unchecked (503) because their address, or all addresses together, had used up
    /// the failure budget (`AuthenticationBudget`).
    public var authenticationThrottled = 0
    /// 401s held back after several wrong answers in a row from an address.
    public var authenticationDelayed = 0
}
