public import VideoCaptureCommons
import H264

/// The SDP a receiver opens for our stream (RFC 4566, RFC 6184 §8), and a minimal reader for an answer.
public struct SDPDescription: Sendable, Equatable {
    /// One `m=` section.
    public struct Media: Sendable, Equatable {
        /// The media type: `video`, `audio`, `application`.
        public var kind: String
        /// The port of the `m=` line (0 for a rejected section).
        public var port: Int
        /// The transport protocol, e.g. `RTP/AVP` or `UDP/TLS/RTP/SAVPF`.
        public var proto: String
        /// The payload types of the `m=` line, in order of preference.
        public var payloadTypes: [UInt8]
        /// `a=` lines of this media section, in order, as (name, value) — value is "" for flags.
        public var attributes: [(String, String)]
        /// Equal when every field and every attribute, in order, is.
        public static func == (a: Media, b: Media) -> Bool {
            a.kind == b.kind && a.port == b.port && a.proto == b.proto && a.payloadTypes == b.payloadTypes
                && a.attributes.map { "\($0.0):\($0.1)" } == b.attributes.map { "\($0.0):\($0.1)" }
        }
        /// Values of every `a=name:` line.
        public func values(_ name: String) -> [String] { attributes.filter { $0.0 == name }.map(\.1) }
    }
    /// `a=` lines before the first `m=` line, as (name, value); value is "" for flags.
    public var sessionAttributes: [(String, String)]
    /// The media sections, in order.
    public var media: [Media]
    /// Equal when the session attributes and every media section are.
    public static func == (a: SDPDescription, b: SDPDescription) -> Bool {
        a.media == b.media && a.sessionAttributes.map { "\($0.0):\($0.1)" } == b.sessionAttributes.map { "\($0.0):\($0.1)" }
    }
}

/// Why a session description could not be read, with the line at fault.
public struct SDPParseError: CodedError {
    /// The line at fault, from 1.
    public var line: Int
    /// What was wrong with it.
    public var message: String
    /// The line number and the message in one sentence.
    public var description: String { "SDP line \(line): \(message)" }
    /// What kind of failure this is: always `malformed`.
    public var code: Code { .malformed }
}

extension ErrorCode where Domain == SDPParseError {
    /// A line that is not `x=value`, or a value out of range.
    public static var malformed: Self { Self(rawValue: "malformed") }
}

/// Session descriptions for plain RTP: the offer a player opens for our stream, and the parts of an SDP the
/// package reads.
public enum SDP {
    /// `profile-level-id` from an SPS NAL unit: profile_idc, constraint flags, level_idc as 6 hex digits
    /// (Constrained Baseline level 3.1 is `42e01f`).
    public static func profileLevelID(sps: ArraySlice<UInt8>) -> String? {
        guard sps.count >= 4, NALUnitType(header: sps[sps.startIndex]) == .sps else { return nil }
        let b = Array(sps.dropFirst().prefix(3))
        return b.map { byte in
            let h = String(byte, radix: 16)
            return h.count == 1 ? "0" + h : h
        }.joined()
    }

    /// A plain-RTP offer for one H.264 stream (what `ffplay -protocol_whitelist file,udp,rtp stream.sdp` opens):
    /// `m=video`, rtpmap 96 H264/90000, fmtp from the real SPS/PPS (profile-level-id, packetization-mode=1,
    /// sprop-parameter-sets), rtcp-fb nack / nack pli / ccm fir / goog-remb, RTX when `rtxPayloadType` is set, and
    /// the video-orientation header extension (`a=extmap:ID urn:3gpp:video-orientation`) when
    /// `videoOrientationExtensionID` is set.
    public static func offer(
        host: String, port: Int, sps: [UInt8], pps: [UInt8], payloadType: UInt8 = 96,
        rtxPayloadType: UInt8? = nil, ssrc: UInt32, rtxSSRC: UInt32? = nil, rtcpMux: Bool = false,
        videoOrientationExtensionID: UInt8? = nil, sessionID: UInt64 = UInt64.random(in: 1...UInt64(Int64.max))
    ) -> String {
        let plid = profileLevelID(sps: sps[...]) ?? "42e01f"
        let sprop = base64(sps) + "," + base64(pps)
        let ip4 = host.contains(":") ? "IP6" : "IP4"
        var l = [
            "v=0",
            "o=- \(sessionID) 1 IN \(ip4) \(host)",
            "s=swift-video-capture",
            "c=IN \(ip4) \(host)",
            "t=0 0",
            "m=video \(port) RTP/AVPF \(payloadType)\(rtxPayloadType.map { " \($0)" } ?? "")",
            "a=rtpmap:\(payloadType) H264/90000",
            "a=fmtp:\(payloadType) level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=\(plid);sprop-parameter-sets=\(sprop)",
            "a=rtcp-fb:\(payloadType) nack",
            "a=rtcp-fb:\(payloadType) nack pli",
            "a=rtcp-fb:\(payloadType) ccm fir",
            "a=rtcp-fb:\(payloadType) goog-remb",
        ]
        if let rtx = rtxPayloadType {
            l += ["a=rtpmap:\(rtx) rtx/90000", "a=fmtp:\(rtx) apt=\(payloadType)"]
        }
        if let id = videoOrientationExtensionID { l.append("a=extmap:\(id) urn:3gpp:video-orientation") }
        l.append(rtcpMux ? "a=rtcp-mux" : "a=rtcp:\(port + 1)")
        if let rtxSSRC { l.append("a=ssrc-group:FID \(ssrc) \(rtxSSRC)") }
        l.append("a=ssrc:\(ssrc) cname:swift-video-capture")
        if let rtxSSRC { l.append("a=ssrc:\(rtxSSRC) cname:swift-video-capture") }
        l.append("a=sendonly")
        return l.joined(separator: "\r\n") + "\r\n"
    }

    /// Reads a session description: `m=` sections with their payload types and `a=` attributes. Errors name
    /// the line. Unknown lines are kept out of the way, as RFC 4566 asks.
    public static func parse(_ text: String) throws(SDPParseError) -> SDPDescription {
        var session: [(String, String)] = []
        var media: [SDPDescription.Media] = []
        var sawVersion = false
        for (i, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\r\n" || $0 == "\n" }).enumerated() {
            // "\r\n" is one Character in Swift (a grapheme cluster): split on it as well as on a bare "\n".
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            if line.isEmpty { continue }
            guard line.count >= 2, line[line.index(after: line.startIndex)] == "=" else {
                throw SDPParseError(line: i + 1, message: "expected 'x=…', found \"\(line.prefix(60))\"")
            }
            let key = line.first!, value = String(line.dropFirst(2))
            switch key {
            case "v":
                guard value == "0" else { throw SDPParseError(line: i + 1, message: "version \(value.prefix(20)), expected 0") }
                sawVersion = true
            case "m":
                let f = value.split(separator: " ")
                guard f.count >= 4, let port = Int(f[1].prefix { $0 != "/" }), (0...65535).contains(port) else {
                    throw SDPParseError(line: i + 1, message: "media line \"\(value.prefix(60))\" is not 'kind port proto formats'")
                }
                let pts = f[3...].compactMap { UInt8($0) }.filter { $0 < 128 }
                media.append(.init(kind: String(f[0]), port: port, proto: String(f[2]), payloadTypes: pts, attributes: []))
            case "a":
                let parts = value.split(separator: ":", maxSplits: 1)
                let attr = (String(parts.first ?? ""), parts.count > 1 ? String(parts[1]) : "")
                if media.isEmpty { session.append(attr) } else { media[media.count - 1].attributes.append(attr) }
            default:
                continue
            }
        }
        guard sawVersion else { throw SDPParseError(line: 1, message: "no v=0 line: not an SDP") }
        return SDPDescription(sessionAttributes: session, media: media)
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out = [UInt8]()
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(table[Int(b0 >> 2)])
            out.append(table[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? table[Int((b1 & 0xf) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? table[Int(b2 & 0x3f)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
