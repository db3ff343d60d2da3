import Foundation
import VideoCaptureCommons
public import RTP
public import H264
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// One WebRTC viewer: an ICE-lite agent, a DTLS server and SRTP on one UDP socket (BUNDLE, rtcp-mux), demuxed
/// by first byte (RFC 7983: 0–3 STUN, 20–63 DTLS, 128–191 RTP/RTCP), and an `RTPSender` whose packets it
/// protects. A thread of its own answers STUN checks, runs the handshake, unprotects RTCP feedback (NACK → the
/// sender retransmits, PLI/FIR and REMB → the callbacks) and sends sender reports. The peer ends on `close()`,
/// a DTLS close_notify, a failed handshake, or when consent checks stop for `consentTimeout` (a closed tab).
///
/// Made of parts: a `DTLSSRTPTransport` (the socket and its thread: demux, DTLS, SRTP, inbound SRTCP into the
/// sender, BYE and close_notify; shared with `WebRTCPublisher`), its ICE agent here an `ICELiteResponder`, and the
/// `RTPSender` whose packets the transport protects.
public final class WebRTCPeer: Sendable {
    /// Where the peer listens and how it sends; only the addresses have no default.
    public struct Configuration: Sendable {
        /// The address the UDP socket binds to (0.0.0.0 / :: for all) and the candidates the answer lists.
        public var bindHost: String
        /// The addresses put in the answer as host candidates: where the browser sends its checks (and so the media
        /// path). Each is a literal IPv4 or IPv6 address of this machine.
        public var candidateHosts: [String]
        /// RTP payload bytes per packet (SRTP and the UDP/IP headers come on top).
        public var maxPayload = 1200
        /// Drop outgoing packets with this probability, 0…1 (loss simulation for tests).
        public var dropRate = 0.0
        /// The seed of the loss simulation (the same seed drops the same packets).
        public var dropSeed: UInt64 = 1
        /// PLI/FIR requests closer together than this (nanoseconds) are not passed to `Handlers.keyFrameRequest`.
        public var keyFrameRequestIntervalNs: Int64 = 300_000_000
        /// No authenticated STUN check for this long: the viewer is gone (RFC 7675 uses 30 s).
        public var consentTimeoutNs: Int64 = 30_000_000_000
        /// No completed ICE check and DTLS handshake this long after the answer: given up, and its slot freed.
        public var connectTimeoutNs: Int64 = 8_000_000_000
        /// Retransmit as RTX (RFC 4588) when the offer has an RTX payload type for the chosen H.264 one.
        public var useRTX = true
        /// Accept the video-orientation header extension when the offer has it: each frame's rotation then
        /// travels with it (`EncodedFrame.rotation`) and the receiver turns the picture. False answers without it
        /// (send upright pixels to such a peer).
        public var useVideoOrientation = true
        /// Accept transport-wide congestion control when the offer has it: every packet carries a transport-wide
        /// sequence number, the viewer's transport feedback drives a send-side estimate (`Handlers.bitrateEstimate`
        /// gets it, as it gets REMB), and Chromium stops sending REMB. False: REMB only.
        public var useTransportWideCC = false
        /// Accept the absolute capture time extension when the offer has it: the first packet of every frame
        /// carries its capture time (wall clock, NTP), and the viewer can show how old the picture is.
        public var useAbsoluteCaptureTime = true
        /// Ask the viewer for this playout delay (the playout-delay extension, when the offer has it): min 0 lets
        /// Chromium render a frame as soon as it is decoded instead of holding it in its jitter buffer. nil
        /// (the default) answers without the extension, and the viewer chooses.
        public var playoutDelay: PlayoutDelay?
        /// With `playoutDelay`: the bounds asked for instead while the viewer's link is congested (overuse, loss,
        /// NACKs within the last 10 s) or limited (`RTPSender.setLinkLimited(_:)`: a lower encode tier); see
        /// `RTPSender.Configuration.congestedPlayoutDelay`. nil: `playoutDelay` always.
        public var congestedPlayoutDelay: PlayoutDelay?
        /// The send-side estimator's bounds and start.
        public var sendSideEstimation = SendSideBandwidthEstimator.Configuration()
        /// Pace each frame's packets at this multiple of the viewer's estimate (`RTPSender.Configuration.pacingFactor`;
        /// 2.5 as libwebrtc); nil (the default) sends each frame as one burst. Measured on token-bucket links, pacing
        /// at 2.5 × our estimate gave more freezes than none (see docs/serve.md), so it is opt-in.
        public var pacingFactor: Double?
        /// A configuration with the defaults: 30 s consent timeout, 8 s to connect, RTX when offered.
        public init(bindHost: String, candidateHosts: [String]) {
            self.bindHost = bindHost
            self.candidateHosts = candidateHosts
        }
    }

    /// A snapshot of one viewer's connection, read with `WebRTCPeer.statistics`.
    public struct Statistics: Sendable {
        /// The RTP sender's counters (packets, retransmissions, receiver reports, REMB).
        public var rtp: RTPSender.Statistics
        /// Where the connection is: `checking` (ICE), `dtls` (handshake), `connected`, or `closed`.
        public var state: String
        /// The negotiated SRTP profile's name, once the handshake is done.
        public var srtpProfile: String?
        /// Authenticated STUN Binding requests answered.
        public var stunRequests: Int
        /// STUN messages not answered (not for us, unauthenticated, malformed).
        public var stunIgnored: Int
        /// Inbound SRTCP packets that failed authentication or replay checks (dropped).
        public var srtcpErrors: Int
        /// DTLS records dropped (malformed, or after the handshake of another epoch, too short or refused).
        public var dtlsRecordsDropped: Int
        /// Frames not sent because the viewer had not had a key frame yet.
        public var framesSkippedBeforeKeyFrame: Int
        /// The viewer's selected address and port (`1.2.3.4:5678`, `[::1]:5678`), once an ICE check chose it.
        public var remote: String?
    }

    /// What the peer calls, each on the transport loop's thread (one for every peer and publisher; or the feedback path): `connected` once DTLS is up and
    /// SRTP keys are set (ask the encoder for a key frame); `keyFrameRequest` for the viewer's PLI/FIR (rate
    /// limited); `bitrateEstimate` with its REMB in bit/s; `closed` once, with the reason, when the peer has
    /// ended and freed its socket.
    public struct Handlers: Sendable {
        /// DTLS and SRTP are up: ask the encoder for a key frame.
        public var connected: (@Sendable () -> Void)?
        /// The viewer sent a PLI or FIR (rate limited by `keyFrameRequestIntervalNs`).
        public var keyFrameRequest: (@Sendable () -> Void)?
        /// The viewer's REMB estimate, bits per second.
        public var bitrateEstimate: (@Sendable (UInt64) -> Void)?
        /// The peer has ended, with the reason in words; called once.
        public var closed: (@Sendable (String) -> Void)?
        /// Handlers, each optional.
        public init(
            connected: (@Sendable () -> Void)? = nil, keyFrameRequest: (@Sendable () -> Void)? = nil,
            bitrateEstimate: (@Sendable (UInt64) -> Void)? = nil, closed: (@Sendable (String) -> Void)? = nil
        ) {
            self.connected = connected
            self.keyFrameRequest = keyFrameRequest
            self.bitrateEstimate = bitrateEstimate
            self.closed = closed
        }
    }

    /// A random identifier of 16 URL-safe characters (a WHEP resource's name).
    public let id: String
    /// The SDP answer for the offer, to return to the viewer.
    public let answer: String
    /// True when the video-orientation extension was negotiated: the viewer turns each picture as its frame's
    /// rotation says, so rotated pictures may be sent as they were captured. False: send upright pixels.
    public let receivesRotation: Bool
    /// True when transport-wide congestion control was negotiated (the estimate is ours, from its feedback).
    public let usesTransportWideCC: Bool
    /// True when the absolute capture time extension was negotiated (each frame's capture time travels with it).
    public let sendsCaptureTime: Bool
    /// The playout delay the viewer is asked for, when the playout-delay extension was negotiated.
    public let playoutDelay: PlayoutDelay?
    /// The viewer's offer, as parsed.
    public let offer: WebRTCOffer
    /// The UDP port the peer's socket is bound to (in the answer's candidates).
    public let localPort: Int
    /// The RTP sender whose packets this peer protects and sends; read its statistics or parameters here, but
    /// send through `send(_:)`.
    public let sender: RTPSender

    private let configuration: Configuration
    /// Internal for tests (a measure of its sending path).
    let transport: DTLSSRTPTransport
    /// The DTLS association and the ICE-lite responder until the transport loop takes them (dropped for a peer closed
    /// before it started).
    private let pending: Mutex<PendingLoop?>

    /// Binds a UDP socket and builds the answer for `offer`; nothing runs until `start(_:)`. Throws `WebRTCError`
    /// (code `local`) when the socket or the DTLS association cannot be made.
    public init(offer: WebRTCOffer, identity: DTLSIdentity, configuration c: Configuration) throws(WebRTCError) {
        self.offer = offer
        configuration = c
        id = iceToken(16).replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "+", with: "-")
        let localUfrag = iceToken(8).replacingOccurrences(of: "/", with: "x").replacingOccurrences(of: "+", with: "y")
        let localPassword = iceToken(24)
        let dtls = try DTLSAssociation(identity: identity, peerFingerprint: offer.fingerprint)
        let socket = try WebRTCPeer.bind(c.bindHost)
        transport = DTLSSRTPTransport(socket: socket, maxPacket: c.maxPayload + 64, state: .checking, closeReason: "closed by the server")
        localPort = Int((try? socket.localAddress())?.port ?? 0)
        var rc = RTPSender.Configuration(host: "peer", port: localPort)
        rc.maxPayload = c.maxPayload
        rc.payloadType = offer.payloadType
        rc.rtcpMux = true
        rc.dropRate = c.dropRate
        rc.dropSeed = c.dropSeed
        rc.keyFrameRequestIntervalNs = c.keyFrameRequestIntervalNs
        rc.keyFrameSupersedesEarlierPackets = true // browsers decode from a complete key frame
        rc.cname = "swift-video-capture"
        rc.rtxPayloadType = c.useRTX ? offer.rtxPayloadType : nil
        rc.videoOrientationExtensionID = c.useVideoOrientation ? offer.videoOrientationExtensionID : nil
        receivesRotation = rc.videoOrientationExtensionID != nil
        rc.transportWideCCExtensionID = c.useTransportWideCC ? offer.transportWideCCExtensionID : nil
        rc.sendSideEstimation = c.sendSideEstimation
        rc.pacingFactor = c.pacingFactor
        usesTransportWideCC = rc.transportWideCCExtensionID != nil
        rc.absoluteCaptureTimeExtensionID = c.useAbsoluteCaptureTime ? offer.absoluteCaptureTimeExtensionID : nil
        sendsCaptureTime = rc.absoluteCaptureTimeExtensionID != nil
        rc.playoutDelayExtensionID = c.playoutDelay != nil ? offer.playoutDelayExtensionID : nil
        rc.playoutDelay = rc.playoutDelayExtensionID != nil ? c.playoutDelay : nil
        rc.congestedPlayoutDelay = c.congestedPlayoutDelay
        playoutDelay = rc.playoutDelay
        do throws(RTPError) { sender = try RTPSender(configuration: rc, transport: transport.srtp) } catch {
            socket.close()
            throw WebRTCError("cannot create the RTP sender: \(error)")
        }
        answer = offer.answer(
            iceUfrag: localUfrag, icePassword: localPassword, fingerprint: identity.fingerprint,
            hosts: c.candidateHosts, port: localPort, ssrc: sender.ssrc,
            rtxSSRC: rc.rtxPayloadType != nil ? sender.rtxSSRC : nil, videoOrientation: receivesRotation,
            transportWideCC: usesTransportWideCC, absoluteCaptureTime: sendsCaptureTime, playoutDelay: playoutDelay != nil)
        let ice = ICELiteResponder(localUfrag: localUfrag, localPassword: localPassword, consentTimeoutNs: c.consentTimeoutNs)
        pending = Mutex(PendingLoop(dtls: dtls, ice: ice))
    }

    /// Hands the peer to the transport loop (one thread for every peer); `handlers` are called from then on. Call once (later calls do nothing).
    public func start(_ handlers: Handlers = Handlers()) {
        guard transport.claimStart() else { return }
        sender.setFeedbackHandlers(keyFrameRequest: handlers.keyFrameRequest, bitrateEstimate: handlers.bitrateEstimate)
        transport.start { [self] in
            guard let loop = pending.withLock({ $0.take() }) else { return nil } // closed before it started
            let timeout = configuration.connectTimeoutNs
            return SessionHandOver(
                session: .init(
                    dtls: loop.dtls, ice: loop.ice, sender: sender, handlers: handlers, remoteName: "viewer", connectSinceNs: loop.ice.createdNs,
                    connectTimeoutNs: timeout, connectTimeoutReason: "no ICE/DTLS connection within \(timeout / 1_000_000_000) s"))
        }
    }

    deinit { close() }

    /// Ends the peer: RTCP BYE and DTLS close_notify when connected, then the socket is closed. Waits until it has
    /// ended (unless called on the transport loop's thread, from a handler: it ends on the loop's next pass).
    /// Idempotent.
    public func close(reason: String = "closed by the server") {
        if !transport.close(reason: reason) { pending.withLock { $0 = nil } } // never started: its DTLS state goes now
    }

    /// True while DTLS is up and SRTP keys are set (media can flow).
    public var isConnected: Bool { transport.isConnected }

    /// A snapshot of the connection's counters; safe from any thread.
    public var statistics: Statistics {
        let t = transport.snapshot
        return Statistics(
            rtp: sender.statistics, state: t.state.rawValue, srtpProfile: t.profile?.name, stunRequests: t.ice.requestsAnswered,
            stunIgnored: t.ice.ignored, srtcpErrors: t.srtcpErrors, dtlsRecordsDropped: t.dtlsRecordsDropped,
            framesSkippedBeforeKeyFrame: t.framesSkippedBeforeKeyFrame, remote: t.remote)
    }

    /// Sends one encoded access unit (from the encoder's thread). Nothing goes out before the connection is up,
    /// and the first frame a viewer gets is a key frame.
    public func send(_ frame: EncodedFrame) { transport.send(frame, through: sender) }

    // MARK: Sockets

    static func bind(_ host: String) throws(WebRTCError) -> UDPSocket {
        guard let address = SocketAddress(host: host, port: 0) else {
            throw WebRTCError("cannot bind UDP to \"\(host.prefix(64))\": give an IPv4 or IPv6 address")
        }
        let socket: UDPSocket
        do throws(SystemError) { socket = try UDPSocket(family: address.family) } catch {
            throw WebRTCError("cannot create a UDP socket: \(error.reason)")
        }
        try? socket.setOption(level: SOL_SOCKET, SO_SNDBUF, 1 << 20)
        do throws(SystemError) { try socket.bind(address) } catch {
            socket.close()
            throw WebRTCError("cannot bind a UDP socket on \(host): \(error.reason)")
        }
        return socket
    }
}

/// ICE-lite (RFC 8445 §2.5), the viewer's side of ICE: answers the browser's authenticated checks, takes the
/// address of the first (or the nominated) one as the selected pair, and ends the connection when the checks,
/// which are also consent (RFC 7675), stop for `consentTimeoutNs`. Used by the transport loop's thread only.
final class ICELiteResponder: ICEAgent {
    let localUfrag: String, localPassword: String
    let consentTimeoutNs: Int64
    /// When the peer was made: ICE and DTLS must connect within the connect timeout from here.
    let createdNs: Int64
    private var lastConsentNs: Int64

    init(localUfrag: String, localPassword: String, consentTimeoutNs: Int64) {
        self.localUfrag = localUfrag
        self.localPassword = localPassword
        self.consentTimeoutNs = consentTimeoutNs
        createdNs = monotonicNanoseconds()
        lastConsentNs = createdNs
    }

    func receiveSTUN(_ p: UnsafeRawBufferPointer, from: SocketAddress, _ link: DTLSSRTPTransport.Link) {
        switch STUN.parseRequest(p, localUfrag: localUfrag, localPassword: localPassword) {
        case .ignored:
            link.transport.recordICE { $0.ignored += 1 }
        case .request(let request):
            let (address, port) = from.parts
            link.send(STUN.successResponse(to: request, address: address, port: port, localPassword: localPassword), to: from)
            lastConsentNs = monotonicNanoseconds()
            link.validate(from)
            // ICE-lite: the controlling agent's nomination (USE-CANDIDATE) selects the pair; until then the
            // first valid check's address is used.
            let selected = link.select(from, nominated: request.useCandidate)
            link.transport.recordICE(selected: selected) { $0.requestsAnswered += 1 }
        }
    }

    func beforeDTLS(now: Int64, _ link: DTLSSRTPTransport.Link) -> ICEStep { .proceed }

    func afterDTLS(now: Int64, _ link: DTLSSRTPTransport.Link) -> String? {
        guard now - lastConsentNs > consentTimeoutNs else { return nil }
        return "consent expired (no STUN check for \(consentTimeoutNs / 1_000_000_000) s)"
    }
}

/// Carries the DTLS association and the ICE agent made in `init` to the transport loop.
// @unchecked: neither (OpenSSL's DTLS state, the agent's) is thread-safe, but only one thread ever uses them: `init`
// makes them and puts them in the `pending` Mutex without touching them again, and the transport loop takes them
// out once (or `close` drops them, for a peer never started).
private struct PendingLoop: @unchecked Sendable {
    let dtls: DTLSAssociation
    let ice: ICELiteResponder
}
