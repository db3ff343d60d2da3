import Foundation
import VideoCaptureCommons
public import H264
public import RTP
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// A server's candidate from an answer's `a=candidate` line (UDP, component 1, a literal address).
public struct ICECandidate: Sendable, Equatable, CustomStringConvertible {
    /// The candidate's IPv4 or IPv6 address.
    public var host: String
    /// Its UDP port, 1…65535.
    public var port: Int
    /// Its ICE priority (higher is tried first).
    public var priority: UInt32
    /// `host`, `srflx`, `prflx` or `relay`.
    public var type: String
    /// "host:port (type)", IPv6 in brackets.
    public var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port) (\(type))" }

    /// Why ICE checks must not go to `host` (a numeric IPv4 or IPv6 address), in words, or nil when it is a unicast
    /// host address they may go to. Refused: not an IP address; unspecified (0.0.0.0/8, ::); multicast
    /// (224.0.0.0/4, ff00::/8); the broadcast 255.255.255.255 and the rest of the reserved 240.0.0.0/4; the
    /// broadcast address of a network of this system's interfaces (192.168.1.255 on a /24); IPv4-compatible IPv6
    /// (::a.b.c.d, deprecated); and each of these written as IPv4-mapped IPv6 (::ffff:a.b.c.d). Loopback,
    /// private, link-local and global unicast addresses pass.
    public static func whyNotUnicast(_ host: String) -> String? {
        whyNotUnicast(host, broadcasts: localBroadcasts())
    }

    /// The same with the broadcast addresses of the local networks given ("a.b.c.d").
    package static func whyNotUnicast(_ host: String, broadcasts: Set<String>) -> String? {
        guard let address = SocketAddress(host: host, port: 0) else { return "not an IP address" }
        let b = address.parts.host
        if b.count == 4 {
            switch b[0] {
            case 0: return "unspecified (0.0.0.0/8)"
            case 224...239: return "multicast (224.0.0.0/4)"
            case 240...255: return b.allSatisfy { $0 == 255 } ? "broadcast (255.255.255.255)" : "reserved (240.0.0.0/4)"
            default: return broadcasts.contains(address.hostText) ? "the broadcast address of a local network" : nil
            }
        }
        if b.allSatisfy({ $0 == 0 }) { return "unspecified (::)" }
        if b[0] == 0xff { return "multicast (ff00::/8)" }
        if b[0..<12].allSatisfy({ $0 == 0 }) && !(b[12..<15].allSatisfy { $0 == 0 } && b[15] == 1) {
            return "IPv4-compatible IPv6 (::/96, deprecated)"
        }
        return nil
    }

    /// The IPv4 broadcast addresses of this system's interfaces.
    static func localBroadcasts() -> Set<String> {
        let interfaces: [InterfaceAddress] = networkInterfaceAddresses() ?? []
        return Set(interfaces.compactMap { $0.broadcast })
    }
}

/// What a WHIP server's (or any answerer's) SDP answer to our sendonly offer says: its ICE credentials,
/// candidates and DTLS fingerprint, which DTLS side we play, and what it accepted of our offer. Errors say what
/// the answer lacked.
public struct WebRTCAnswer: Sendable {
    /// The answer's `a=ice-ufrag`.
    public var iceUfrag: String
    /// The answer's `a=ice-pwd`.
    public var icePassword: String
    /// sha-256 fingerprint of the server's DTLS certificate, "AB:CD:…".
    public var fingerprint: String
    /// The server's UDP candidates of component 1, highest priority first (mDNS names and TCP are skipped, and
    /// so are addresses that are not unicast hosts: `ignoredCandidates`). At most 16.
    public var candidates: [ICECandidate]
    /// The answer's UDP candidates whose address is not a unicast host (multicast, broadcast, unspecified,
    /// reserved: `ICECandidate.whyNotUnicast(_:)`), each with the reason: no check is ever sent to them. At most 16
    /// are listed; `ignoredCandidateCount` counts them all.
    public var ignoredCandidates: [(candidate: ICECandidate, reason: String)] = []
    /// How many of the answer's candidates were ignored for not being unicast hosts.
    public var ignoredCandidateCount = 0
    /// True when the answer says `a=setup:passive` (we are the DTLS client, as WHIP servers usually answer);
    /// false for `a=setup:active` (the server connects to us).
    public var weAreDTLSClient: Bool
    /// The server is an ICE-lite agent (`a=ice-lite`).
    public var iceLite: Bool
    /// Our RTX payload type, if the answer kept it.
    public var rtxPayloadType: UInt8?
    /// Our video-orientation extension id, if the answer accepted it.
    public var videoOrientationExtensionID: UInt8?
    /// The rids the answer receives (RFC 8853: `a=rid:ID recv` lines named in `a=simulcast:recv`, `~` paused ones
    /// left out), in the answer's order; empty when it has no `a=simulcast` (it takes one stream).
    public var simulcastRIDs: [String] = []
    /// Our ids of the `sdes:mid`, `sdes:rtp-stream-id` and `sdes:repaired-rtp-stream-id` extensions, if the
    /// answer accepted them.
    public var midExtensionID: UInt8?, ridExtensionID: UInt8?, repairedRIDExtensionID: UInt8?
    /// The whole answer as parsed.
    public var description: SDPDescription

    /// Reads an answer to an offer of H.264 as `payloadType` (and RTX as `rtxPayloadType`). Throws
    /// `WebRTCError` (code `invalidOffer`) when it has no accepted video section, ICE credentials, sha-256
    /// fingerprint, usable candidate or H.264, or a setup we cannot play. At most 64 KiB.
    public init(_ sdp: String, payloadType: UInt8, rtxPayloadType: UInt8?) throws(WebRTCError) {
        guard sdp.utf8.count <= 64 * 1024 else {
            throw WebRTCError("the answer is \(sdp.utf8.count) bytes; at most 64 KiB are accepted", code: .invalidOffer)
        }
        let d: SDPDescription
        do throws(SDPParseError) { d = try SDP.parse(sdp) } catch {
            throw WebRTCError("the answer is not a valid SDP: \(error)", code: .invalidOffer)
        }
        description = d
        guard let m = d.media.first(where: { $0.kind == "video" }) else {
            throw WebRTCError("the answer has no video section (m=video)", code: .invalidOffer)
        }
        guard m.port != 0 else {
            throw WebRTCError("the answer rejects the video (m=video 0): the server takes no H.264 from us", code: .invalidOffer)
        }
        func attr(_ name: String) -> String? { m.values(name).first ?? d.sessionAttributes.first { $0.0 == name }?.1 }
        guard let ufrag = attr("ice-ufrag"), let pwd = attr("ice-pwd"), (4...256).contains(ufrag.count), (22...256).contains(pwd.count) else {
            throw WebRTCError(
                "the answer has no usable ICE credentials (a=ice-ufrag of 4...256, a=ice-pwd of 22...256 characters)", code: .invalidOffer)
        }
        iceUfrag = ufrag
        icePassword = pwd
        iceLite = d.sessionAttributes.contains { $0.0 == "ice-lite" }
        let fps = m.values("fingerprint") + d.sessionAttributes.filter { $0.0 == "fingerprint" }.map(\.1)
        guard let fp = fps.first(where: { $0.lowercased().hasPrefix("sha-256 ") }) else {
            throw WebRTCError("the answer has no a=fingerprint:sha-256", code: .invalidOffer)
        }
        fingerprint = String(fp.dropFirst(8)).trimmingSpaces.uppercased()
        let hex = fingerprint.split(separator: ":", omittingEmptySubsequences: false)
        guard fingerprint.count == 95, hex.count == 32, hex.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
            throw WebRTCError("the answer's sha-256 fingerprint is not 32 hex bytes separated by colons", code: .invalidOffer)
        }
        let setup = (attr("setup") ?? "active").trimmingSpaces.lowercased()
        switch setup {
        case "passive": weAreDTLSClient = true
        case "active": weAreDTLSClient = false
        default:
            throw WebRTCError(
                "the answer has a=setup:\(setup.prefix(20).filter { $0.isASCII && !$0.isNewline }): an answer must be active or passive",
                code: .invalidOffer)
        }
        guard m.payloadTypes.contains(payloadType) else {
            throw WebRTCError(
                "the answer does not accept our H.264 (payload type \(payloadType)); it lists \(m.payloadTypes.map(String.init).joined(separator: " "))",
                code: .unsupportedCodec)
        }
        self.rtxPayloadType = rtxPayloadType.flatMap { m.payloadTypes.contains($0) ? $0 : nil }
        // The server receives our stream: an extmap it marks sendonly or inactive is not accepted.
        videoOrientationExtensionID = WebRTCOffer.extensionID(WebRTCOffer.videoOrientationURI, in: m)
        midExtensionID = WebRTCOffer.extensionID(WebRTCPublisher.midURI, in: m)
        ridExtensionID = WebRTCOffer.extensionID(WebRTCPublisher.ridURI, in: m)
        repairedRIDExtensionID = WebRTCOffer.extensionID(WebRTCPublisher.repairedRIDURI, in: m)
        // a=simulcast:recv f;h;q (alternatives after commas: the first is taken) and a=rid:f recv.
        let receiving = Set(
            m.values("rid").compactMap { v -> String? in
                let f = v.split(separator: " ")
                return f.count >= 2 && f[1].lowercased() == "recv" ? String(f[0]) : nil
            })
        if let simulcast = m.values("simulcast").first {
            let f = simulcast.split(separator: " ")
            if f.count >= 2, f[0].lowercased() == "recv" {
                simulcastRIDs = f[1].split(separator: ";").compactMap { $0.split(separator: ",").first.map(String.init) }
                    .filter { !$0.hasPrefix("~") && receiving.contains($0) }
            }
        }
        // a=candidate:foundation component transport priority address port typ type …
        var found: [ICECandidate] = []
        let broadcasts = ICECandidate.localBroadcasts()
        for c in m.values("candidate") + d.sessionAttributes.filter({ $0.0 == "candidate" }).map(\.1) {
            let f = c.split(separator: " ")
            guard f.count >= 8, f[1] == "1", f[2].lowercased() == "udp", let priority = UInt32(f[3]), let port = Int(f[5]),
                (1...65535).contains(port),
                f[6] == "typ", SocketAddress(host: String(f[4]), port: port) != nil
            else { continue }
            let candidate = ICECandidate(host: String(f[4]), port: port, priority: priority, type: String(f[7].prefix(16)))
            // Multicast, broadcast, unspecified: no check may go there (the answer would aim our packets at others).
            if let why = ICECandidate.whyNotUnicast(candidate.host, broadcasts: broadcasts) {
                ignoredCandidateCount += 1
                if ignoredCandidates.count < 16 { ignoredCandidates.append((candidate, why)) }
                continue
            }
            if found.count < 16 { found.append(candidate) }
        }
        guard !found.isEmpty else {
            let ignored =
                ignoredCandidateCount == 0
                ? ""
                : "; \(ignoredCandidateCount) not unicast ignored: "
                    + ignoredCandidates.prefix(4).map { "\($0.candidate.host.prefix(46)) (\($0.reason))" }.joined(separator: ", ")
            throw WebRTCError(
                "the answer has no UDP candidate with a unicast IP address (a=candidate … udp … typ …); trickled candidates are not read"
                    + ignored,
                code: .invalidOffer)
        }
        candidates = found.sorted { $0.priority > $1.priority }
    }
}

/// The sending side of WebRTC for one connection we initiate (a WHIP publisher, RFC 9725): our sendonly H.264
/// offer, then, given the answer, full ICE as the controlling agent (checks to every server candidate, the first
/// that answers nominated; consent checks every 5 s, RFC 7675), DTLS as the client or the server as the answer
/// says, and SRTP with RTCP feedback (PLI/FIR → `Handlers.keyFrameRequest`, NACK → retransmission, REMB →
/// `Handlers.bitrateEstimate`). One UDP socket (BUNDLE, rtcp-mux); a thread of its own after `start`.
///
/// Made of the same `DTLSSRTPTransport` as `WebRTCPeer` (demux, DTLS, SRTP, SRTCP, BYE and close_notify), with
/// a `ControllingICEAgent` as its ICE side.
public final class WebRTCPublisher: Sendable {
    /// How the publisher binds, what it offers and how long it waits.
    public struct Configuration: Sendable {
        /// The address the UDP socket binds to (0.0.0.0 or :: for any).
        public var bindHost = "0.0.0.0"
        /// Our host candidates in the offer; empty: the address the system routes the server through (given to
        /// `init`) or 127.0.0.1.
        public var candidateHosts: [String] = []
        /// RTP payload bytes per packet.
        public var maxPayload = 1200
        /// Our H.264 payload type.
        public var payloadType: UInt8 = 96
        /// Our RTX payload type (RFC 4588), nil for none.
        public var rtxPayloadType: UInt8? = 97
        /// The profile-level-id offered (Constrained Baseline 3.1 by default, what OpenH264 writes).
        public var profileLevelID = "42e01f"
        /// Offer the video-orientation extension with this id (nil: not offered; rotate the pixels then).
        public var videoOrientationExtensionID: UInt8? = 3
        /// No ICE and DTLS connection this long after `start`: the publisher ends (`Handlers.closed`).
        public var connectTimeoutNs: Int64 = 10_000_000_000
        /// No answer to our consent checks for this long: the server is gone (RFC 7675: 30 s).
        public var consentTimeoutNs: Int64 = 30_000_000_000
        /// Seconds between consent checks once connected (RFC 7675: 5 s, ± 20 %).
        public var consentIntervalNs: Int64 = 5_000_000_000

        /// Sets `consentTimeoutNs` and checks often enough for it: every quarter of it, at most every 5 s
        /// (`consentIntervalNs`), so that a few lost checks do not end the connection.
        public mutating func setConsentTimeout(_ ns: Int64) {
            consentTimeoutNs = ns
            consentIntervalNs = min(5_000_000_000, ns / 4)
        }
        /// PLI/FIR closer together than this are merged (per layer).
        public var keyFrameRequestIntervalNs: Int64 = 300_000_000
        /// Simulcast (RFC 8853): the layers' rids, the largest picture first (1…3 of them, each 1…3 letters,
        /// digits, `-` or `_`), e.g. `["f", "h", "q"]` for full, half and quarter size; empty (the default) offers
        /// one stream. The offer then has `a=rid:ID send` per layer, `a=simulcast:send f;h;q`, the `sdes:mid`,
        /// `sdes:rtp-stream-id` and `sdes:repaired-rtp-stream-id` extensions (`simulcastExtensionIDs`), and no
        /// SSRC lines: each layer has its own SSRC (and RTX SSRC) and every packet carries its rid, from which the
        /// SFU learns the SSRCs. Janus takes the first rid as its highest substream (its default `rid_order`
        /// "hml", Chromium's order), the last as substream 0.
        public var simulcastRIDs: [String] = []
        /// The ids offered for the mid, rid and repaired-rid extensions with `simulcastRIDs` (1…14, distinct, not
        /// `videoOrientationExtensionID`).
        public var simulcastExtensionIDs: (mid: UInt8, rid: UInt8, repairedRID: UInt8) = (4, 10, 11)
        /// The defaults.
        public init() {}
    }

    /// The URI of the `sdes:mid` header extension (RFC 8843): the media section a packet belongs to.
    public static let midURI = "urn:ietf:params:rtp-hdrext:sdes:mid"
    /// The URI of the `sdes:rtp-stream-id` header extension (RFC 8852): a simulcast layer's rid.
    public static let ridURI = "urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id"
    /// The URI of the `sdes:repaired-rtp-stream-id` header extension (RFC 8852): the rid an RTX packet repairs.
    public static let repairedRIDURI = "urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id"

    /// A snapshot of the connection, read with `statistics`.
    public struct Statistics: Sendable {
        /// What the RTP sender counted (packets, NACKs, retransmissions, RTT, REMB…), once an answer was accepted;
        /// with simulcast the first layer's (each layer's: `sender(layer:)`).
        public var rtp: RTPSender.Statistics?
        /// "new", "checking", "dtls", "connected" or "closed".
        public var state: String
        /// The server address ICE selected, if any.
        public var remote: String?
        /// The negotiated SRTP profile's name, once connected.
        public var srtpProfile: String?
        /// Binding requests we sent, and success responses we got.
        public var checksSent = 0, checksAnswered = 0
        /// The server's own Binding requests we answered.
        public var checksReceived = 0
        /// The answer's candidates ignored for not being unicast hosts (multicast, broadcast, unspecified,
        /// reserved): no check went to them.
        public var candidatesIgnored = 0
    }

    /// Called from the transport loop's thread.
    public typealias Handlers = WebRTCPeer.Handlers

    /// Our SDP offer (sendonly H.264), to POST to the WHIP endpoint.
    public let offer: String
    private let configuration: Configuration
    private let identity: DTLSIdentity
    private let localUfrag: String, localPassword: String
    private let transport: DTLSSRTPTransport
    /// Each offered layer's SSRC and RTX SSRC (one for a single stream), in the order of `simulcastRIDs`.
    private let ssrcs: [(ssrc: UInt32, rtx: UInt32)]
    /// Set by `accept(answer:)`: the answer and one sender per layer sent (the offered layers the answer
    /// receives), with each sender's index among the offered layers.
    private let negotiated = Mutex<(answer: WebRTCAnswer, senders: [(layer: Int, sender: RTPSender)], simulcast: Bool)?>(nil)

    /// Binds the socket and writes the offer. `server` (the WHIP endpoint's host, if an IP address) picks our
    /// candidate address: the one the system routes toward it. Throws `WebRTCError` when the socket cannot be made.
    /// Throws (code `local`) for simulcast rids or extension ids that cannot be offered.
    public init(identity: DTLSIdentity, configuration c: Configuration = Configuration(), server: String? = nil) throws(WebRTCError) {
        try WebRTCPublisher.check(c)
        configuration = c
        self.identity = identity
        localUfrag = iceToken(8).replacingOccurrences(of: "/", with: "x").replacingOccurrences(of: "+", with: "y")
        localPassword = iceToken(24)
        let socket = try WebRTCPeer.bind(c.bindHost)
        transport = DTLSSRTPTransport(socket: socket, maxPacket: c.maxPayload + 64, state: .new, closeReason: "closed by the publisher")
        let port = Int((try? socket.localAddress())?.port ?? 0)
        var drawn: [(ssrc: UInt32, rtx: UInt32)] = []
        var used = Set<UInt32>()
        while drawn.count < max(1, c.simulcastRIDs.count) {
            let a = UInt32.random(in: 1...UInt32.max), b = UInt32.random(in: 1...UInt32.max)
            guard a != b, !used.contains(a), !used.contains(b) else { continue }
            used.formUnion([a, b])
            drawn.append((a, b))
        }
        ssrcs = drawn
        var hosts = c.candidateHosts
        if hosts.isEmpty {
            let routed = server.flatMap { SocketAddress(host: $0, port: 9) }.flatMap { UDPSocket.localAddress(toward: $0) }
            hosts = [routed?.hostText ?? "127.0.0.1"]
        }
        offer = WebRTCPublisher.offer(
            c, ufrag: localUfrag, password: localPassword, fingerprint: identity.fingerprint, hosts: hosts, port: port, ssrc: drawn[0].ssrc,
            rtxSSRC: drawn[0].rtx)
    }

    /// What a configuration must hold for its offer to be valid.
    static func check(_ c: Configuration) throws(WebRTCError) {
        guard !c.simulcastRIDs.isEmpty else { return }
        guard c.simulcastRIDs.count <= 3, Set(c.simulcastRIDs).count == c.simulcastRIDs.count,
            c.simulcastRIDs.allSatisfy({ RTPHeaderExtensionElement.sdes(id: 1, $0) != nil })
        else {
            throw WebRTCError(
                "simulcast needs 1...3 distinct rids of 1...3 letters, digits, - or _; got \(c.simulcastRIDs)", code: .local)
        }
        let e = c.simulcastExtensionIDs
        let ids = [e.mid, e.rid, e.repairedRID] + (c.videoOrientationExtensionID.map { [$0] } ?? [])
        guard ids.allSatisfy({ (1...14).contains($0) }), Set(ids).count == ids.count else {
            throw WebRTCError("the simulcast extension ids \(ids) must be distinct and 1...14", code: .local)
        }
    }

    static func offer(
        _ c: Configuration, ufrag: String, password: String, fingerprint: String, hosts: [String], port: Int, ssrc: UInt32, rtxSSRC: UInt32
    ) -> String {
        let simulcast = !c.simulcastRIDs.isEmpty
        let host = hosts.first ?? "127.0.0.1"
        let ip = host.contains(":") ? "IP6" : "IP4"
        let pt = c.payloadType
        var l = [
            "v=0", "o=- \(UInt64.random(in: 1...UInt64(Int64.max))) 2 IN \(ip) \(host)", "s=-", "t=0 0", "a=group:BUNDLE 0",
            "a=msid-semantic: WMS swift-video-capture",
            "m=video \(port) UDP/TLS/RTP/SAVPF \(pt)\(c.rtxPayloadType.map { " \($0)" } ?? "")",
            "c=IN \(ip) \(host)", "a=rtcp:\(port) IN \(ip) \(host)",
            "a=ice-ufrag:\(ufrag)", "a=ice-pwd:\(password)", "a=fingerprint:sha-256 \(fingerprint)", "a=setup:actpass", "a=mid:0",
        ]
        if let id = c.videoOrientationExtensionID { l.append("a=extmap:\(id) \(WebRTCOffer.videoOrientationURI)") }
        if simulcast {
            let e = c.simulcastExtensionIDs
            l += ["a=extmap:\(e.mid) \(midURI)", "a=extmap:\(e.rid) \(ridURI)", "a=extmap:\(e.repairedRID) \(repairedRIDURI)"]
        }
        l += [
            "a=sendonly", "a=msid:swift-video-capture video", "a=rtcp-mux", "a=rtpmap:\(pt) H264/90000", "a=rtcp-fb:\(pt) nack",
            "a=rtcp-fb:\(pt) nack pli",
            "a=rtcp-fb:\(pt) ccm fir", "a=rtcp-fb:\(pt) goog-remb",
            "a=fmtp:\(pt) level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=\(c.profileLevelID)",
        ]
        if let rtx = c.rtxPayloadType { l += ["a=rtpmap:\(rtx) rtx/90000", "a=fmtp:\(rtx) apt=\(pt)"] }
        if simulcast {
            // No SSRC lines (as Chromium's rid simulcast): the SFU maps each SSRC by the rid its packets carry.
            l += c.simulcastRIDs.map { "a=rid:\($0) send" }
            l.append("a=simulcast:send \(c.simulcastRIDs.joined(separator: ";"))")
        } else {
            if c.rtxPayloadType != nil { l.append("a=ssrc-group:FID \(ssrc) \(rtxSSRC)") }
            l += ["a=ssrc:\(ssrc) cname:swift-video-capture", "a=ssrc:\(ssrc) msid:swift-video-capture video"]
            if c.rtxPayloadType != nil { l += ["a=ssrc:\(rtxSSRC) cname:swift-video-capture", "a=ssrc:\(rtxSSRC) msid:swift-video-capture video"] }
        }
        for (k, h) in hosts.enumerated() {
            l.append("a=candidate:\(k + 1) 1 udp \(2_130_706_431 - UInt32(k)) \(h) \(port) typ host")
        }
        l.append("a=end-of-candidates")
        return l.joined(separator: "\r\n") + "\r\n"
    }

    /// Takes the server's answer: its credentials, candidates and fingerprint, our DTLS role, what it kept of our
    /// offer. Call once, before `start`. Throws `WebRTCError` for an answer that cannot connect.
    public func accept(answer text: String) throws(WebRTCError) {
        let answer = try WebRTCAnswer(text, payloadType: configuration.payloadType, rtxPayloadType: configuration.rtxPayloadType)
        let (layers, simulcast) = WebRTCPublisher.layers(offered: configuration.simulcastRIDs, answer: answer)
        var senders: [(Int, RTPSender)] = []
        for layer in layers {
            var rc = RTPSender.Configuration(host: "server", port: 9)
            rc.maxPayload = configuration.maxPayload
            rc.payloadType = configuration.payloadType
            rc.rtcpMux = true
            rc.keyFrameRequestIntervalNs = configuration.keyFrameRequestIntervalNs
            rc.cname = "swift-video-capture"
            rc.rtxPayloadType = answer.rtxPayloadType
            rc.videoOrientationExtensionID = answer.videoOrientationExtensionID
            rc.ssrc = ssrcs[layer].ssrc
            rc.rtxSSRC = ssrcs[layer].rtx
            if simulcast {
                rc.midExtensionID = answer.midExtensionID
                rc.mid = "0"
                rc.ridExtensionID = answer.ridExtensionID
                rc.rid = configuration.simulcastRIDs[layer]
                rc.repairedRIDExtensionID = answer.repairedRIDExtensionID
            }
            do throws(RTPError) { senders.append((layer, try RTPSender(configuration: rc, transport: transport.srtp))) } catch {
                throw WebRTCError("cannot create the RTP sender: \(error)")
            }
        }
        negotiated.withLock { $0 = (answer, senders, simulcast) }
    }

    /// The offered layers (indices into `offered`) an answer takes: those it receives, in our order, when it has
    /// simulcast and accepted the mid and rid extensions (without them an SFU cannot tell the layers apart);
    /// else the first (the largest) alone.
    static func layers(offered: [String], answer: WebRTCAnswer) -> (layers: [Int], simulcast: Bool) {
        guard !offered.isEmpty, answer.midExtensionID != nil, answer.ridExtensionID != nil else { return ([0], false) }
        let taken = offered.indices.filter { answer.simulcastRIDs.contains(offered[$0]) }
        return taken.isEmpty ? ([0], false) : (taken, true)
    }

    /// The simulcast layers sent, as indices into `Configuration.simulcastRIDs` (largest first), once an answer was
    /// accepted: every offered layer the answer receives. `[0]` when simulcast was not offered or the answer
    /// dropped it (no `a=simulcast`, or the mid or rid extension refused): the largest layer alone, as one stream.
    public var sentLayers: [Int] { negotiated.withLock { $0?.senders.map(\.layer) } ?? [] }

    /// True when simulcast was offered and the answer took it: its layers (`sentLayers`, one or more) carry their
    /// rids.
    public var isSimulcast: Bool { negotiated.withLock { $0?.simulcast } ?? false }

    /// The answer accepted, if any.
    public var answer: WebRTCAnswer? { negotiated.withLock { $0?.answer } }

    /// True when the server turns the picture itself (it accepted the video-orientation extension): rotated
    /// pictures may be sent as captured.
    public var receivesRotation: Bool { negotiated.withLock { $0?.answer.videoOrientationExtensionID != nil } }

    /// Starts ICE, DTLS and then media on the transport loop's thread (one for every peer and publisher); `handlers` are called from it. Throws when no
    /// answer was accepted. Call once.
    ///
    /// With simulcast, `layerKeyFrameRequest` is called with the layer (an index into
    /// `Configuration.simulcastRIDs`) whose SSRC the server's PLI or FIR names, so only that layer's encoder makes a
    /// key frame; without it, `handlers.keyFrameRequest` is called for every layer's. The server's REMB (one
    /// estimate for all the layers) goes to `handlers.bitrateEstimate` once.
    public func start(_ handlers: Handlers = Handlers(), layerKeyFrameRequest: (@Sendable (_ layer: Int) -> Void)? = nil) throws(WebRTCError) {
        guard let (answer, senders, _) = negotiated.withLock({ $0 }), let sender = senders.first?.sender else {
            throw WebRTCError("start: no answer was accepted")
        }
        guard transport.claimStart() else { return }
        let dtls = try DTLSAssociation(identity: identity, peerFingerprint: answer.fingerprint, client: answer.weAreDTLSClient)
        for (k, (layer, s)) in senders.enumerated() {
            var keyFrame = handlers.keyFrameRequest
            if let request = layerKeyFrameRequest { keyFrame = { @Sendable in request(layer) } }
            s.setFeedbackHandlers(keyFrameRequest: keyFrame, bitrateEstimate: k == 0 ? handlers.bitrateEstimate : nil)
        }
        let c = configuration
        let ice = ControllingICEAgent(answer: answer, localUfrag: localUfrag, localPassword: localPassword, configuration: c)
        let handOver = SessionHandOver(
            session: .init(
                dtls: dtls, ice: ice, sender: sender, handlers: handlers, remoteName: "server", connectSinceNs: ice.startedNs,
                connectTimeoutNs: c.connectTimeoutNs, connectTimeoutReason: "no DTLS connection within \(c.connectTimeoutNs / 1_000_000_000) s",
                layers: senders.dropFirst().map(\.sender)))
        transport.start { handOver }
    }

    /// Ends the connection: RTCP BYE and DTLS close_notify when connected, then the socket closes. Waits until it has
    /// ended (unless called from a handler, on the loop's thread). Idempotent.
    public func close(reason: String = "closed by the publisher") { transport.close(reason: reason) }

    deinit { close() }

    /// True while DTLS is up and SRTP keys are set.
    public var isConnected: Bool { transport.isConnected }

    /// A snapshot of the counters; any thread.
    public var statistics: Statistics {
        let rtp = negotiated.withLock { $0?.senders.first?.sender }?.statistics
        let t = transport.snapshot
        return Statistics(
            rtp: rtp, state: t.state.rawValue, remote: t.remote, srtpProfile: t.profile?.name, checksSent: t.ice.checksSent,
            checksAnswered: t.ice.checksAnswered, checksReceived: t.ice.requestsAnswered,
            candidatesIgnored: negotiated.withLock { $0?.answer.ignoredCandidateCount } ?? 0)
    }

    /// The sender (its SSRC and RTP clock), once an answer was accepted: the largest layer's with simulcast.
    public var sender: RTPSender? { negotiated.withLock { $0?.senders.first?.sender } }

    /// The sender of simulcast layer `layer` (an index into `Configuration.simulcastRIDs`), if it is sent.
    public func sender(layer: Int) -> RTPSender? { negotiated.withLock { $0?.senders.first { $0.layer == layer }?.sender } }

    /// Sends one access unit of `layer` (an index into `Configuration.simulcastRIDs`; 0 without simulcast) from the
    /// encoder's thread; nothing before the connection is up, nothing for a layer not sent (`sentLayers`), and each
    /// layer's first frame sent is a key frame.
    public func send(_ frame: EncodedFrame, layer: Int = 0) {
        guard let sender = sender(layer: layer) else { return }
        transport.send(frame, through: sender)
    }
}

/// Full ICE as the controlling agent (RFC 8445), the publisher's side: checks to every server candidate every
/// 100 ms, each nominating (aggressive nomination), the first pair that answers selected (and the DTLS client's
/// first flight sent to it); the server's own checks answered; then consent checks (RFC 7675) every
/// `consentIntervalNs` on the selected pair, and the end when none is answered for `consentTimeoutNs`. Used by the
/// publisher's thread only.
final class ControllingICEAgent: ICEAgent {
    let answer: WebRTCAnswer
    let localUfrag: String, localPassword: String
    let configuration: WebRTCPublisher.Configuration
    let tieBreaker = UInt64.random(in: 0...UInt64.max)
    /// When the publisher started: ICE and DTLS must connect within the connect timeout from here.
    let startedNs = monotonicNanoseconds()
    private var selected: SocketAddress?
    private var pending: [(id: [UInt8], address: SocketAddress, sentNs: Int64)] = []
    private var lastChecksNs: Int64 = 0
    private var lastResponseNs = monotonicNanoseconds()

    init(answer: WebRTCAnswer, localUfrag: String, localPassword: String, configuration: WebRTCPublisher.Configuration) {
        self.answer = answer
        self.localUfrag = localUfrag
        self.localPassword = localPassword
        self.configuration = configuration
    }

    func beforeDTLS(now: Int64, _ link: DTLSSRTPTransport.Link) -> ICEStep {
        guard selected == nil else { return .proceed }
        if now - startedNs > configuration.connectTimeoutNs {
            return .end(
                "no ICE connection within \(configuration.connectTimeoutNs / 1_000_000_000) s: none of the server's candidates answered (\(answer.candidates.map(\.description).joined(separator: ", ")))"
            )
        }
        if now - lastChecksNs >= 100_000_000 { // every candidate, every 100 ms, nominated (aggressive)
            lastChecksNs = now
            for c in answer.candidates { if let a = SocketAddress(host: c.host, port: c.port) { check(a, now, link) } }
        }
        return .wait
    }

    func afterDTLS(now: Int64, _ link: DTLSSRTPTransport.Link) -> String? {
        if let selected, now - lastChecksNs >= configuration.consentIntervalNs {
            lastChecksNs = now
            check(selected, now, link)
        }
        guard now - lastResponseNs > configuration.consentTimeoutNs else { return nil }
        return "consent expired: the server answered no check for \(configuration.consentTimeoutNs / 1_000_000_000) s"
    }

    /// One Binding request to `address` (nominating), remembered by its transaction ID.
    private func check(_ address: SocketAddress, _ now: Int64, _ link: DTLSSRTPTransport.Link) {
        let id = randomBytes(12)
        let request = STUN.bindingRequest(
            transactionID: id, localUfrag: localUfrag, remoteUfrag: answer.iceUfrag, remotePassword: answer.icePassword,
            priority: 1_853_817_087, tieBreaker: tieBreaker, nominate: true)
        pending.append((id, address, now))
        if pending.count > 64 { pending.removeFirst(pending.count - 64) }
        link.send(request, to: address)
        link.transport.recordICE { $0.checksSent += 1 }
    }

    func receiveSTUN(_ p: UnsafeRawBufferPointer, from: SocketAddress, _ link: DTLSSRTPTransport.Link) {
        if p.count >= 2, p[0] == 0, p[1] == 1 { // the server's own check (full ICE): answered
            guard case .request(let request) = STUN.parseRequest(p, localUfrag: localUfrag, localPassword: localPassword) else { return }
            let (address, port) = from.parts
            link.send(STUN.successResponse(to: request, address: address, port: port, localPassword: localPassword), to: from)
            link.validate(from)
            link.transport.recordICE { $0.requestsAnswered += 1 }
            return
        }
        let id: [UInt8]
        switch STUN.parseResponse(p, remotePassword: answer.icePassword) {
        case .success(let t): id = t
        case .error, .ignored: return
        }
        guard let i = pending.firstIndex(where: { $0.id == id && $0.address.isSame(as: from) }) else { return }
        pending.remove(at: i)
        lastResponseNs = monotonicNanoseconds()
        guard selected == nil else {
            link.transport.recordICE { $0.checksAnswered += 1 }
            return
        }
        // The first pair that answers is nominated (USE-CANDIDATE went with every check) and used.
        selected = from
        link.validate(from, always: true)
        _ = link.select(from, nominated: true)
        link.transport.recordICE(selected: true) { $0.checksAnswered += 1 }
        _ = link.dtls.tick() // the DTLS client's ClientHello
        link.flushDTLS()
    }
}
