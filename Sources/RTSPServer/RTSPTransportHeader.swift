/// What a client asks for in SETUP's `Transport` header (RFC 2326 §12.39), the one alternative this server
/// can give: RTP over UDP unicast to the client's ports, or RTP interleaved on the RTSP connection.
public enum RTSPTransportRequest: Sendable, Equatable {
    /// `RTP/AVP[/UDP];unicast;client_port=RTP-RTCP`: the client's RTP and RTCP ports (1…65535).
    case udp(rtpPort: Int, rtcpPort: Int)
    /// `RTP/AVP/TCP;interleaved=RTP-RTCP`: the channels (0…255) RTP and RTCP travel on.
    case interleaved(rtpChannel: UInt8, rtcpChannel: UInt8)

    /// Why a Transport header cannot be served, in words (the answer is 461 Unsupported Transport, or 400).
    public struct Refusal: Error, Sendable, Equatable {
        /// The status to answer with: 400 (malformed) or 461 (understood, but not offered here).
        public var status: Int
        /// What was wrong, naming the field.
        public var message: String
    }

    /// The first alternative of `header` (comma-separated, in the client's order of preference) that this
    /// server offers; otherwise why not (the reason for the first alternative). Every number is range-checked.
    public static func parse(_ header: String) -> Result<RTSPTransportRequest, Refusal> {
        guard header.utf8.count <= 1024 else { return .failure(Refusal(status: 400, message: "the Transport header is longer than 1024 bytes")) }
        var firstRefusal: Refusal?
        for alternative in header.split(separator: ",").prefix(16) {
            switch parseOne(alternative) {
            case .success(let t): return .success(t)
            case .failure(let r): firstRefusal = firstRefusal ?? r
            }
        }
        return .failure(firstRefusal ?? Refusal(status: 400, message: "the Transport header is empty"))
    }

    static func parseOne(_ spec: Substring) -> Result<RTSPTransportRequest, Refusal> {
        let fields = spec.split(separator: ";").map { $0.trimmingSpaces }
        guard let profile = fields.first?.uppercased(), !profile.isEmpty else {
            return .failure(Refusal(status: 400, message: "a Transport alternative is empty"))
        }
        let tcp: Bool
        switch profile {
        case "RTP/AVP", "RTP/AVP/UDP", "RTP/AVPF", "RTP/AVPF/UDP": tcp = false
        case "RTP/AVP/TCP", "RTP/AVPF/TCP": tcp = true
        default:
            return .failure(Refusal(status: 461, message: "transport \(profile.prefix(40)) is not offered: use RTP/AVP (UDP) or RTP/AVP/TCP"))
        }
        var clientPorts: (Int, Int)?
        var channels: (Int, Int)?
        for f in fields.dropFirst() {
            let kv = f.split(separator: "=", maxSplits: 1)
            let key = kv.first.map { $0.lowercased() } ?? ""
            let value = kv.count > 1 ? kv[1] : ""
            switch key {
            case "multicast":
                return .failure(Refusal(status: 461, message: "multicast is not offered: use unicast UDP or TCP"))
            case "mode":
                let mode = value.trimming("\"").uppercased()
                guard mode == "PLAY" else {
                    return .failure(Refusal(status: 461, message: "mode \(mode.prefix(20)) is not offered: this server only plays"))
                }
            case "client_port":
                guard let p = pair(value, in: 1...65535) else {
                    return .failure(Refusal(status: 400, message: "client_port \"\(value.prefix(30))\" is not PORT or PORT-PORT within 1...65535"))
                }
                clientPorts = p
            case "interleaved":
                guard let c = pair(value, in: 0...255) else {
                    return .failure(
                        Refusal(status: 400, message: "interleaved \"\(value.prefix(30))\" is not CHANNEL or CHANNEL-CHANNEL within 0...255"))
                }
                channels = c
            default: continue // unicast, ssrc, ttl, destination (ignored: media goes to the client's own address)
            }
        }
        if tcp {
            let c = channels ?? (0, 1)
            guard c.0 != c.1 else { return .failure(Refusal(status: 400, message: "interleaved channels must differ")) }
            return .success(.interleaved(rtpChannel: UInt8(c.0), rtcpChannel: UInt8(c.1)))
        }
        guard let p = clientPorts else { return .failure(Refusal(status: 461, message: "UDP needs client_port=RTP-RTCP")) }
        return .success(.udp(rtpPort: p.0, rtcpPort: p.1))
    }

    /// "A-B" or "A" (then B = A + 1) with both in `range`, else nil.
    static func pair(_ s: Substring, in range: ClosedRange<Int>) -> (Int, Int)? {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let a = RTSPParser.number(parts[0], maxDigits: 5), range.contains(a) else { return nil }
        if parts.count == 1 {
            guard a < range.upperBound else { return nil }
            return (a, a + 1)
        }
        guard let b = RTSPParser.number(parts[1], maxDigits: 5), range.contains(b) else { return nil }
        return (a, b)
    }
}

/// An RTSP response: status, headers and body (the CSeq is added when it is written).
public struct RTSPResponse: Sendable, Equatable {
    /// The status code (200, 401, 454…).
    public var status: Int
    /// Header fields besides CSeq, in order.
    public var headers: [RTSPHeader]
    /// The body (an SDP for DESCRIBE, a sentence for errors).
    public var body: String
    /// Close the connection once this response is written (after a request that could not be parsed).
    public var closesConnection: Bool
    /// Hold the response back this long (nanoseconds) before it is written, reading nothing more from the
    /// connection meanwhile: a 401 after several wrong passwords in a row.
    public var delayNs: Int64 = 0

    /// A response with these parts.
    public init(status: Int, headers: [RTSPHeader] = [], body: String = "", closesConnection: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.closesConnection = closesConnection
    }

    /// An error response whose body says why (text/plain).
    public static func error(_ status: Int, _ why: String, closes: Bool = false, headers: [RTSPHeader] = []) -> RTSPResponse {
        RTSPResponse(status: status, headers: headers + [RTSPHeader("Content-Type", "text/plain")], body: why + "\n", closesConnection: closes)
    }

    /// The reason phrase of `status` (RFC 2326 §7.1.1).
    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 408: "Request Timeout"
        case 413: "Request Entity Too Large"
        case 414: "Request-URI Too Large"
        case 451: "Parameter Not Understood"
        case 453: "Not Enough Bandwidth"
        case 454: "Session Not Found"
        case 455: "Method Not Valid in This State"
        case 459: "Aggregate Operation Not Allowed"
        case 461: "Unsupported Transport"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "RTSP Version Not Supported"
        case 551: "Option Not Supported"
        default: "Status"
        }
    }

    /// The response as bytes: status line, CSeq (when known), Server, the headers, Content-Length and the body.
    public func serialized(cseq: Int?, server: String = "swift-video-capture") -> [UInt8] {
        var text = "RTSP/1.0 \(status) \(RTSPResponse.reason(status))\r\n"
        if let cseq { text += "CSeq: \(cseq)\r\n" }
        text += "Server: \(server)\r\n"
        for h in headers { text += "\(h.name): \(h.value)\r\n" }
        let body = Array(self.body.utf8)
        if !body.isEmpty { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
    func trimming(_ chars: String) -> String {
        var s = self
        while let f = s.first, chars.contains(f) { s = s.dropFirst() }
        while let l = s.last, chars.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
