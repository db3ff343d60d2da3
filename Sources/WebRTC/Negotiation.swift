public import RTP

/// What we take from a browser's (or any WHEP client's) SDP offer: its ICE credentials and DTLS fingerprint,
/// the video section we answer, and the H.264 payload type we send with. Errors say what the offer lacked.
public struct WebRTCOffer: Sendable {
    /// The offer's `a=ice-ufrag` (4–256 characters): the username fragment its STUN checks carry.
    public var iceUfrag: String
    /// The offer's `a=ice-pwd` (22–256 characters).
    public var icePassword: String
    /// sha-256 fingerprint of the peer's DTLS certificate, "AB:CD:…".
    public var fingerprint: String
    /// Index of the m= section we send video in, and its mid.
    public var videoIndex: Int
    /// The video section's `a=mid`, if it has one (echoed in the answer and its BUNDLE group).
    public var mid: String?
    /// The offer's H.264 payload type we send with: packetization-mode 1, the profile closest to Constrained
    /// Baseline.
    public var payloadType: UInt8
    /// The offer's profile-level-id for that payload type (echoed in the answer).
    public var profileLevelID: String
    /// The offer's RTX payload type for `payloadType` (RFC 4588, `apt=`), if it has one.
    public var rtxPayloadType: UInt8?
    /// The id the offer gives the video-orientation header extension (`a=extmap:ID urn:3gpp:video-orientation`,
    /// 3GPP TS 26.114), if it offers it with an id of the one-byte form (1…14): the receiver then turns the
    /// picture itself, and a rotated camera can be sent unrotated.
    public var videoOrientationExtensionID: UInt8?
    /// The URI of the video-orientation header extension.
    public static let videoOrientationURI = "urn:3gpp:video-orientation"
    /// The id the offer gives the transport-wide sequence number extension, if it offers it (one-byte form) and
    /// asks for transport feedback (`a=rtcp-fb:PT transport-cc`) on the chosen payload type.
    public var transportWideCCExtensionID: UInt8?
    /// The URI of the transport-wide sequence number extension.
    public static let transportWideCCURI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    /// The id the offer gives the absolute capture time extension (one-byte form), if it offers it. Chromium
    /// lists it only when the page asks (`RTCRtpTransceiver.setHeaderExtensionsToNegotiate`); with it,
    /// `requestVideoFrameCallback`'s `captureTime` and the receiver's synchronization sources carry each frame's
    /// capture time.
    public var absoluteCaptureTimeExtensionID: UInt8?
    /// The URI of the absolute capture time extension.
    public static let absoluteCaptureTimeURI = "http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time"
    /// The id the offer gives the playout delay extension (one-byte form), if it offers it (Chromium does).
    public var playoutDelayExtensionID: UInt8?
    /// The URI of the playout delay extension.
    public static let playoutDelayURI = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"
    /// The whole offer as parsed.
    public var description: SDPDescription

    /// profile-level-id values Constrained Baseline streams decode under, best first: Constrained Baseline,
    /// Baseline, Main with constraint_set1, Constrained High (OpenH264 writes Constrained Baseline).
    static func compatibility(_ plid: String) -> Int? {
        guard let (profile, constraints) = profileAndConstraints(plid) else { return nil }
        switch profile {
        case 0x42: return constraints & 0x40 != 0 ? 0 : 1
        case 0x4d: return 2 // a Main decoder decodes Constrained Baseline
        case 0x64: return constraints & 0x0c == 0x0c ? 3 : 4
        default: return nil
        }
    }

    /// Whether a receiver offering `plid` decodes a stream of profile `stream` (both profile-level-ids), best
    /// first (the same profile before a larger one that contains it); nil when it cannot. A Constrained Baseline
    /// stream (the encoder's, or a camera's with constraint_set1) fits what `compatibility(_:)` lists; a
    /// Baseline stream needs a Baseline receiver; Main fits Main and High; High fits High, Constrained High only
    /// a stream that is Constrained High too. Levels are not compared (receivers decode above their level,
    /// and `level-asymmetry-allowed` is in every answer).
    static func compatibility(_ plid: String, stream: String) -> Int? {
        guard let (sProfile, sConstraints) = profileAndConstraints(stream) else { return nil }
        if sProfile == 0x42 && sConstraints & 0x40 != 0 { return compatibility(plid) }
        guard let (profile, constraints) = profileAndConstraints(plid) else { return nil }
        switch (sProfile, profile) {
        case (0x42, 0x42): return constraints & 0x40 != 0 ? nil : 0 // a Constrained Baseline decoder lacks FMO/ASO
        case (0x4d, 0x4d): return 0
        case (0x4d, 0x64): return constraints & 0x0c == 0x0c ? nil : 1
        case (0x64, 0x64): return constraints & 0x0c == 0x0c && sConstraints & 0x0c != 0x0c ? nil : 0
        default: return nil
        }
    }

    /// profile_idc and the constraint flags of a profile-level-id (6 hex digits), nil for anything else.
    private static func profileAndConstraints(_ plid: String) -> (profile: UInt32, constraints: UInt32)? {
        guard plid.utf8.count == 6, let v = UInt32(plid.lowercased(), radix: 16) else { return nil }
        return (v >> 16, (v >> 8) & 0xff)
    }

    /// RFC 4566 token characters, 1...max of them.
    static func isToken(_ mid: String, max: Int) -> Bool {
        let allowed = Set("!#$%&'*+-.^_`{|}~".utf8)
        return (1...max).contains(mid.utf8.count)
            && mid.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || allowed.contains($0) }
    }

    /// Reads an offer (at most 64 KiB of SDP). Throws `WebRTCError` with code `invalidOffer` for anything that
    /// could never connect (no video section, no ICE credentials or sha-256 fingerprint, not DTLS-SRTP, a setup
    /// other than actpass or active, a video section that does not receive, a bad mid) and `unsupportedCodec`
    /// when no H.264 payload type fits.
    ///
    /// `stream` is the profile-level-id of what will be sent when it is not our encoder's Constrained
    /// Baseline (a camera's own H.264 passed through): the payload type chosen is one whose profile decodes it,
    /// and an offer without one is refused (`unsupportedCodec`) naming both.
    public init(_ sdp: String, stream: String? = nil) throws(WebRTCError) {
        guard sdp.utf8.count <= 64 * 1024 else {
            throw WebRTCError("the offer is \(sdp.utf8.count) bytes; at most 64 KiB are accepted", code: .invalidOffer)
        }
        let d: SDPDescription
        do throws(SDPParseError) { d = try SDP.parse(sdp) } catch { throw WebRTCError("the offer is not a valid SDP: \(error)", code: .invalidOffer) }
        description = d
        guard let vi = d.media.firstIndex(where: { $0.kind == "video" && $0.port != 0 }) else {
            throw WebRTCError("the offer has no video section (m=video): add a video transceiver (recvonly)", code: .invalidOffer)
        }
        videoIndex = vi
        let m = d.media[vi]
        func attr(_ name: String) -> String? { m.values(name).first ?? d.sessionAttributes.first { $0.0 == name }?.1 }
        guard let ufrag = attr("ice-ufrag"), let pwd = attr("ice-pwd"), (4...256).contains(ufrag.count), (22...256).contains(pwd.count) else {
            throw WebRTCError(
                "the offer has no usable ICE credentials (a=ice-ufrag of 4...256 and a=ice-pwd of 22...256 characters)", code: .invalidOffer)
        }
        // RFC 8839 §5.4: ice-char is ALPHA / DIGIT / "+" / "/". The ufrag goes into STUN USERNAME ("a:b") and the answer.
        func isIceChars(_ s: String) -> Bool {
            s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2b || $0 == 0x2f }
        }
        guard isIceChars(ufrag) else {
            throw WebRTCError("the offer's a=ice-ufrag is not 4...256 ice-chars (A-Z a-z 0-9 + /, RFC 8839)", code: .invalidOffer)
        }
        guard isIceChars(pwd) else {
            throw WebRTCError("the offer's a=ice-pwd is not 22...256 ice-chars (A-Z a-z 0-9 + /, RFC 8839)", code: .invalidOffer)
        }
        iceUfrag = ufrag
        icePassword = pwd
        let fps = (m.values("fingerprint") + d.sessionAttributes.filter { $0.0 == "fingerprint" }.map(\.1))
        guard let fp = fps.first(where: { $0.lowercased().hasPrefix("sha-256 ") }) else {
            throw WebRTCError("the offer has no a=fingerprint:sha-256 (DTLS-SRTP needs it)", code: .invalidOffer)
        }
        fingerprint = String(fp.dropFirst(8)).trimmingSpaces.uppercased()
        let hexBytes = fingerprint.split(separator: ":", omittingEmptySubsequences: false)
        guard fingerprint.count == 95, hexBytes.count == 32, hexBytes.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isHexDigit) }) else {
            throw WebRTCError(
                "a=fingerprint:sha-256 \"\(fingerprint.prefix(100).filter { $0.isASCII && !$0.isNewline })\" is not 32 hex bytes separated by colons",
                code: .invalidOffer)
        }
        // What could never connect is refused now, not after a slot was held for it.
        guard m.proto.uppercased().hasPrefix("UDP/TLS/RTP/SAVP") else {
            throw WebRTCError(
                "the offer's video section uses \"\(m.proto.prefix(40).filter { $0.isASCII && !$0.isNewline })\": this server sends DTLS-SRTP only (UDP/TLS/RTP/SAVPF)",
                code: .invalidOffer)
        }
        let setup = (m.values("setup").first ?? d.sessionAttributes.first { $0.0 == "setup" }?.1 ?? "actpass").trimmingSpaces.lowercased()
        guard setup == "actpass" || setup == "active" else {
            throw WebRTCError(
                "the offer has a=setup:\(setup.prefix(20).filter { $0.isASCII && !$0.isNewline }): this server is the DTLS server (setup:passive), so the offer must be actpass or active",
                code: .invalidOffer)
        }
        // Every mid is echoed into the answer: RFC 5888 token characters, at most 16 (RFC 8843's RTP MID limit).
        for section in d.media {
            // Rejected sections are echoed too (m=KIND 0 PROTO …): their kind and transport must be plain tokens.
            guard WebRTCOffer.isToken(section.kind, max: 32), WebRTCOffer.isToken(String(section.proto.map { $0 == "/" ? "." : $0 }), max: 64) else {
                throw WebRTCError("an m= line of the offer has a kind or transport that is not a plain token", code: .invalidOffer)
            }
            for mid in section.values("mid") where !WebRTCOffer.isToken(mid, max: 16) {
                throw WebRTCError("an a=mid of \(mid.utf8.count) bytes is not 1...16 token characters (RFC 5888, RFC 8843)", code: .invalidOffer)
            }
        }
        if m.values("sendonly").count > 0 || m.values("inactive").count > 0 {
            throw WebRTCError(
                "the offer's video section is \(m.values("sendonly").isEmpty ? "inactive" : "sendonly"): it must receive (recvonly or sendrecv)",
                code: .invalidOffer)
        }
        mid = m.values("mid").first
        // H.264 payload types with their fmtp parameters.
        var codecs: [String] = []
        var h264: [(pt: UInt8, plid: String, mode: Int, rank: Int?)] = []
        for rtpmap in m.values("rtpmap") {
            let f = rtpmap.split(separator: " ", maxSplits: 1)
            guard f.count == 2, let pt = UInt8(f[0]), pt < 128, m.payloadTypes.contains(pt) else { continue }
            let name = f[1].split(separator: "/").first.map(String.init) ?? ""
            if !["rtx", "red", "ulpfec", "flexfec-03"].contains(name.lowercased()) { codecs.append(name) }
            guard name.uppercased() == "H264", f[1].hasSuffix("/90000") else { continue }
            var params: [String: String] = [:]
            for fmtp in m.values("fmtp") where fmtp.hasPrefix("\(pt) ") {
                for kv in fmtp.dropFirst("\(pt) ".count).split(separator: ";") {
                    let p = kv.split(separator: "=", maxSplits: 1)
                    if p.count == 2 { params[String(p[0]).trimmingSpaces.lowercased()] = String(p[1]).trimmingSpaces }
                }
            }
            let plid = params["profile-level-id"] ?? "420010" // RFC 6184 §8.1 default: Baseline, level 1.0
            let mode = Int(params["packetization-mode"] ?? "0") ?? -1
            h264.append((pt, plid, mode, stream.map { Self.compatibility(plid, stream: $0) } ?? Self.compatibility(plid)))
        }
        let usable = h264.filter { $0.mode == 1 && $0.rank != nil }.sorted { $0.rank! < $1.rank! }
        guard let best = usable.first else {
            if h264.isEmpty {
                throw WebRTCError(
                    "the offer has no H.264 (it offers \(codecs.isEmpty ? "no codec" : Array(Set(codecs)).sorted().joined(separator: ", "))): this server sends H.264 only",
                    code: .unsupportedCodec)
            }
            if let stream {
                throw WebRTCError(
                    "the offer's H.264 cannot decode the stream sent (the camera's own H.264, profile-level-id \(stream), passed through): it needs packetization-mode=1 and a profile that decodes it; offered "
                        + h264.map { "\($0.pt): \($0.plid) mode \($0.mode)" }.joined(separator: ", "), code: .unsupportedCodec)
            }
            throw WebRTCError(
                "the offer's H.264 is not usable: it needs packetization-mode=1 with a Constrained Baseline compatible profile-level-id (42e0xx, 4200xx, 4d4xxx, 640cxx); offered "
                    + h264.map { "\($0.pt): \($0.plid) mode \($0.mode)" }.joined(separator: ", "), code: .unsupportedCodec)
        }
        payloadType = best.pt
        profileLevelID = best.plid.lowercased()
        rtxPayloadType =
            m.values("fmtp").compactMap { fmtp -> UInt8? in
                let f = fmtp.split(separator: " ", maxSplits: 1)
                guard f.count == 2, let pt = UInt8(f[0]), pt < 128, m.payloadTypes.contains(pt), String(f[1]).trimmingSpaces == "apt=\(best.pt)",
                    m.values("rtpmap").contains(where: { $0.lowercased().hasPrefix("\(pt) rtx/90000") })
                else { return nil }
                return pt
            }.first
        videoOrientationExtensionID = WebRTCOffer.extensionID(WebRTCOffer.videoOrientationURI, in: m)
        absoluteCaptureTimeExtensionID = WebRTCOffer.extensionID(WebRTCOffer.absoluteCaptureTimeURI, in: m)
        playoutDelayExtensionID = WebRTCOffer.extensionID(WebRTCOffer.playoutDelayURI, in: m)
        let pt = best.pt
        let feedback = m.values("rtcp-fb").contains { $0.lowercased() == "\(pt) transport-cc" || $0.lowercased() == "* transport-cc" }
        transportWideCCExtensionID = feedback ? WebRTCOffer.extensionID(WebRTCOffer.transportWideCCURI, in: m) : nil
    }

    /// The id `m` gives the extension `uri` (a=extmap:ID[/direction] URI [attributes], RFC 8285 §5), if it is of the
    /// one-byte form (1…14) and its direction receives.
    static func extensionID(_ uri: String, in m: SDPDescription.Media) -> UInt8? {
        m.values("extmap").compactMap { value -> UInt8? in
            let f = value.split(separator: " ")
            guard f.count >= 2, String(f[1]) == uri else { return nil }
            let idAndDirection = f[0].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let first = idAndDirection.first, let id = UInt8(first), (1...14).contains(id) else { return nil }
            if idAndDirection.count == 2, !["recvonly", "sendrecv"].contains(idAndDirection[1].lowercased()) { return nil }
            return id
        }.first
    }

    /// The answer: ice-lite, our credentials and fingerprint, setup:passive (the peer is the DTLS client), one host
    /// candidate, BUNDLE on the video section with rtcp-mux, the chosen H.264 payload type with rtcp-fb nack, nack
    /// pli, ccm fir and goog-remb, and our SSRC. Other sections are rejected (port 0).
    /// With `rtxSSRC`, retransmissions are negotiated as RTX (the offer's RTX payload type, `a=ssrc-group:FID`).
    /// With `videoOrientation` and an offer that has the extension, the answer accepts it (`a=extmap` with the
    /// offer's id); with `transportWideCC`, the transport-wide sequence number extension and transport feedback;
    /// with `absoluteCaptureTime` and `playoutDelay`, those extensions when offered.
    public func answer(
        iceUfrag: String, icePassword: String, fingerprint: String, hosts: [String], port: Int, ssrc: UInt32, rtxSSRC: UInt32? = nil,
        videoOrientation: Bool = false, transportWideCC: Bool = false, absoluteCaptureTime: Bool = false, playoutDelay: Bool = false,
        cname: String = "swift-video-capture",
        sessionID: UInt64 = .random(in: 1...UInt64(Int64.max))
    ) -> String {
        let host = hosts.first ?? "127.0.0.1"
        let ip = host.contains(":") ? "IP6" : "IP4"
        var l = ["v=0", "o=- \(sessionID) 2 IN \(ip) \(host)", "s=-", "t=0 0"]
        if let mid { l.append("a=group:BUNDLE \(mid)") }
        l += ["a=ice-lite", "a=msid-semantic: WMS swift-video-capture"]
        for (i, m) in description.media.enumerated() {
            guard i == videoIndex else {
                l.append("m=\(m.kind) 0 \(m.proto) \(m.kind == "application" ? "webrtc-datachannel" : String(m.payloadTypes.first ?? 0))")
                l.append("c=IN \(ip) \(host)")
                if let mid = m.values("mid").first { l.append("a=mid:\(mid)") }
                l.append("a=inactive")
                continue
            }
            let pt = payloadType
            let rtx = rtxSSRC != nil ? rtxPayloadType : nil
            l += [
                "m=video \(port) UDP/TLS/RTP/SAVPF \(pt)\(rtx.map { " \($0)" } ?? "")",
                "c=IN \(ip) \(host)",
                "a=rtcp:\(port) IN \(ip) \(host)",
                "a=ice-ufrag:\(iceUfrag)",
                "a=ice-pwd:\(icePassword)",
                "a=fingerprint:sha-256 \(fingerprint)",
                "a=setup:passive",
            ]
            if let mid { l.append("a=mid:\(mid)") }
            l += [
                "a=sendonly",
                "a=rtcp-mux",
                "a=rtpmap:\(pt) H264/90000",
                "a=rtcp-fb:\(pt) nack",
                "a=rtcp-fb:\(pt) nack pli",
                "a=rtcp-fb:\(pt) ccm fir",
                "a=rtcp-fb:\(pt) goog-remb",
                "a=fmtp:\(pt) level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=\(profileLevelID)",
            ]
            if let rtx, let rtxSSRC {
                l += ["a=rtpmap:\(rtx) rtx/90000", "a=fmtp:\(rtx) apt=\(pt)", "a=ssrc-group:FID \(ssrc) \(rtxSSRC)"]
            }
            if videoOrientation, let id = videoOrientationExtensionID { l.append("a=extmap:\(id) \(WebRTCOffer.videoOrientationURI)") }
            if absoluteCaptureTime, let id = absoluteCaptureTimeExtensionID { l.append("a=extmap:\(id) \(WebRTCOffer.absoluteCaptureTimeURI)") }
            if playoutDelay, let id = playoutDelayExtensionID { l.append("a=extmap:\(id) \(WebRTCOffer.playoutDelayURI)") }
            if transportWideCC, let id = transportWideCCExtensionID {
                l += ["a=extmap:\(id) \(WebRTCOffer.transportWideCCURI)", "a=rtcp-fb:\(pt) transport-cc"]
            }
            l += ["a=msid:swift-video-capture video", "a=ssrc:\(ssrc) cname:\(cname)", "a=ssrc:\(ssrc) msid:swift-video-capture video"]
            if let rtx = rtxSSRC, self.rtxPayloadType != nil {
                l += ["a=ssrc:\(rtx) cname:\(cname)", "a=ssrc:\(rtx) msid:swift-video-capture video"]
            }
            for (k, h) in hosts.enumerated() {
                l.append("a=candidate:\(k + 1) 1 udp \(2130706431 - k) \(h) \(port) typ host")
            }
            l.append("a=end-of-candidates")
        }
        return l.joined(separator: "\r\n") + "\r\n"
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
