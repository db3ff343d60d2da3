public import VideoCaptureCommons

/// One RTSP 1.0 request (RFC 2326 §6) as the parser read it.
public struct RTSPRequest: Sendable, Equatable {
    /// The method, as sent (RTSP methods are case-sensitive: `OPTIONS`, `DESCRIBE`, `SETUP`, `PLAY`…).
    public var method: String
    /// The request URI (`rtsp://host:port/path`, or `*` for OPTIONS).
    public var uri: String
    /// The header fields in order, names as sent (`header(_:)` looks one up without regard to case).
    public var headers: [RTSPHeader]
    /// The body (`Content-Length` bytes; empty without one).
    public var body: [UInt8]
    /// The `CSeq` header's value, 0…999 999 999 (every request must carry one).
    public var cseq: Int

    /// A request with these parts.
    public init(method: String, uri: String, headers: [RTSPHeader], body: [UInt8] = [], cseq: Int) {
        self.method = method
        self.uri = uri
        self.headers = headers
        self.body = body
        self.cseq = cseq
    }

    /// The value of the first header named `name` (compared without regard to case), or nil.
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }

    /// The path of the request URI: `/camera/trackID=0` for `rtsp://host:8554/camera/trackID=0?x=1` (query
    /// dropped, no trailing `/`); `*` for `*`; nil when the URI is neither absolute `rtsp://` nor a path.
    public var path: String? {
        if uri == "*" { return "*" }
        var rest = Substring(uri)
        let lower = uri.lowercased()
        if lower.hasPrefix("rtsp://") || lower.hasPrefix("rtsps://") || lower.hasPrefix("rtspu://") {
            rest = rest.dropFirst(lower.hasPrefix("rtsp://") ? 7 : 8)
            guard let slash = rest.firstIndex(of: "/") else { return "/" }
            rest = rest[slash...]
        } else if !uri.hasPrefix("/") {
            return nil
        }
        if let q = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<q] }
        while rest.count > 1 && rest.hasSuffix("/") { rest = rest.dropLast() }
        return String(rest)
    }
}

/// One header field: its name (as sent) and value (without surrounding white space).
public struct RTSPHeader: Sendable, Equatable {
    /// The field name, e.g. `CSeq`.
    public var name: String
    /// The field value, trimmed.
    public var value: String
    /// A header field.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// What the parser found at the start of the bytes it was given.
public enum RTSPParseResult: Sendable, Equatable {
    /// Not a whole message yet: read more (the limits are checked on what is there).
    case incomplete
    /// A complete request, which took the first `consumed` bytes.
    case request(RTSPRequest, consumed: Int)
    /// An interleaved binary frame (RFC 2326 §10.12: `$`, channel, 16-bit length, data): its channel and where
    /// its data lies in the bytes given; it took the first `consumed` bytes.
    case interleaved(channel: UInt8, payload: Range<Int>, consumed: Int)
}

/// A request the parser refused: what was wrong, in words, and the status to answer with. After one the
/// connection cannot be resynchronised: answer, then close it.
public struct RTSPParseError: CodedError {
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence naming the line, header or limit at fault.
    public var message: String
    /// The RTSP status to answer with: 400, 413, 414 or 505.
    public var status: Int
    /// The request's CSeq when it could be read (the answer carries it), else nil.
    public var cseq: Int?
    /// An error with `code`, a `message`, the `status` to answer with and the CSeq if known.
    public init(_ code: Code, _ message: String, status: Int, cseq: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.cseq = cseq
    }
}

/// The codes of `RTSPParseError`.
extension ErrorCode where Domain == RTSPParseError {
    /// The bytes are not an RTSP request: a bad request line, header line or number (400).
    public static var malformed: Self { Self(rawValue: "malformed") }
    /// A limit of `RTSPParser.Limits` was passed: the request, a line, the header count or the body (413/414/400).
    public static var tooLarge: Self { Self(rawValue: "too large") }
    /// The request has no CSeq header, or one that is not a number 0…999999999 (400).
    public static var missingCSeq: Self { Self(rawValue: "missing CSeq") }
    /// The version is not RTSP/1.0 (505).
    public static var unsupportedVersion: Self { Self(rawValue: "unsupported version") }
}

/// The RTSP 1.0 request parser: a pure function over bytes, bounded by `Limits`. It never traps and never
/// reads past what it is given; every number is range-checked before it is used.
public enum RTSPParser {
    /// The bounds a request must fit in.
    public struct Limits: Sendable, Equatable {
        /// The request line, the headers and the body together, in bytes.
        public var maxRequestBytes = 16_384
        /// Any one line (the request line or a header), in bytes without its line end.
        public var maxLineLength = 4096
        /// Header fields in one request.
        public var maxHeaders = 64
        /// The body (`Content-Length`), in bytes.
        public var maxBodyBytes = 4096
        /// The defaults: 16 KiB per request, 4 KiB per line, 64 headers, a 4 KiB body.
        public init(maxRequestBytes: Int = 16_384, maxLineLength: Int = 4096, maxHeaders: Int = 64, maxBodyBytes: Int = 4096) {
            self.maxRequestBytes = maxRequestBytes
            self.maxLineLength = maxLineLength
            self.maxHeaders = maxHeaders
            self.maxBodyBytes = maxBodyBytes
        }

        /// Requests of at most `bytes` (`maxRequestBytes`), no one line longer (`maxLineLength` lowered to it).
        public mutating func limitRequests(toBytes bytes: Int) {
            maxRequestBytes = bytes
            maxLineLength = min(maxLineLength, bytes)
        }
    }

    /// Parses the message at the start of `bytes`: a complete request, an interleaved frame, or `incomplete`.
    /// Empty lines before a request are skipped (counted in `consumed`). Throws what is wrong once the bytes
    /// cannot be the start of a valid request within `limits`.
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(RTSPParseError) -> RTSPParseResult {
        var result: Result<RTSPParseResult, RTSPParseError> = .success(.incomplete)
        bytes.withUnsafeBytes { raw in
            do throws(RTSPParseError) { result = .success(try parse(raw, limits: limits)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    /// Parses the message at the start of `bytes` (see the array form).
    public static func parse(_ bytes: UnsafeRawBufferPointer, limits: Limits = Limits()) throws(RTSPParseError) -> RTSPParseResult {
        let n = bytes.count
        guard n > 0 else { return .incomplete }
        if bytes[0] == 0x24 { // '$': interleaved binary data
            guard n >= 4 else { return .incomplete }
            let length = Int(bytes[2]) << 8 | Int(bytes[3])
            guard n >= 4 + length else { return .incomplete }
            return .interleaved(channel: bytes[1], payload: 4..<(4 + length), consumed: 4 + length)
        }
        // Empty lines between messages are allowed (RFC 2326 §4 and RFC 7230 §3.5).
        var start = 0
        while start < n && (bytes[start] == 0x0d || bytes[start] == 0x0a) {
            start += 1
            guard start <= limits.maxLineLength else {
                throw RTSPParseError(.malformed, "more than \(limits.maxLineLength) empty lines", status: 400)
            }
        }
        if start == n { return .incomplete }
        // Split into lines (CRLF or a bare LF) until the empty line that ends the head.
        var lines: [(Int, Int)] = [] // start, end (without the line end)
        var lineStart = start, i = start, headEnd = -1
        while i < n {
            if i - start >= limits.maxRequestBytes {
                throw RTSPParseError(.tooLarge, "the request head is longer than \(limits.maxRequestBytes) bytes", status: 413)
            }
            if bytes[i] == 0x0a {
                var end = i
                if end > lineStart && bytes[end - 1] == 0x0d { end -= 1 }
                if end == lineStart {
                    headEnd = i + 1
                    break
                }
                lines.append((lineStart, end))
                if lines.count > limits.maxHeaders + 1 {
                    throw RTSPParseError(.tooLarge, "more than \(limits.maxHeaders) header fields", status: 400)
                }
                lineStart = i + 1
            } else if i - lineStart >= limits.maxLineLength {
                let what = lines.isEmpty ? "the request line" : "header line \(lines.count)"
                throw RTSPParseError(.tooLarge, "\(what) is longer than \(limits.maxLineLength) bytes", status: lines.isEmpty ? 414 : 400)
            }
            i += 1
        }
        // Before the head is complete, the request line is checked as soon as it is there (garbage fails early).
        if headEnd < 0 {
            if let first = lines.first { _ = try requestLine(bytes, first) }
            return .incomplete
        }
        guard let first = lines.first else { return .incomplete }
        let (method, uri) = try requestLine(bytes, first)
        var headers: [RTSPHeader] = []
        headers.reserveCapacity(lines.count - 1)
        for (k, line) in lines.dropFirst().enumerated() {
            headers.append(try header(bytes, line, number: k + 1))
        }
        // CSeq first: later errors carry it.
        let cseqValues = headers.filter { $0.name.lowercased() == "cseq" }
        guard cseqValues.count == 1, let cseq = number(cseqValues[0].value, maxDigits: 9) else {
            throw RTSPParseError(
                .missingCSeq,
                cseqValues.isEmpty
                    ? "the request has no CSeq header"
                    : cseqValues.count > 1
                        ? "the request has \(cseqValues.count) CSeq headers"
                        : "CSeq \"\(cseqValues[0].value.prefix(40))\" is not a number 0...999999999",
                status: 400)
        }
        var length = 0
        let lengths = headers.filter { $0.name.lowercased() == "content-length" }
        if let l = lengths.first {
            guard lengths.allSatisfy({ $0.value == l.value }), let v = number(l.value, maxDigits: 9) else {
                throw RTSPParseError(.malformed, "Content-Length \"\(l.value.prefix(40))\" is not one number", status: 400, cseq: cseq)
            }
            guard v <= limits.maxBodyBytes else {
                throw RTSPParseError(.tooLarge, "the body (\(v) bytes) is larger than \(limits.maxBodyBytes) bytes", status: 413, cseq: cseq)
            }
            length = v
        }
        guard headEnd - start + length <= limits.maxRequestBytes else {
            throw RTSPParseError(.tooLarge, "the request is larger than \(limits.maxRequestBytes) bytes", status: 413, cseq: cseq)
        }
        guard n - headEnd >= length else { return .incomplete }
        let body = length == 0 ? [] : Array(bytes[headEnd..<(headEnd + length)])
        return .request(RTSPRequest(method: method, uri: uri, headers: headers, body: body, cseq: cseq), consumed: headEnd + length)
    }

    /// A token character (RFC 2616 §2.2): visible ASCII except separators.
    static func isToken(_ c: UInt8) -> Bool {
        guard c > 0x20 && c < 0x7f else { return false }
        return !"()<>@,;:\\\"/[]?={}".utf8.contains(c)
    }

    /// "METHOD URI RTSP/1.0" → method and URI.
    static func requestLine(_ b: UnsafeRawBufferPointer, _ line: (Int, Int)) throws(RTSPParseError) -> (String, String) {
        let bytes = b[line.0..<line.1]
        let parts = bytes.split(separator: 0x20, omittingEmptySubsequences: false)
        let shown = String(decoding: bytes.prefix(60), as: UTF8.self).filter { $0.isASCII && !$0.isNewline }
        guard parts.count == 3 else {
            throw RTSPParseError(.malformed, "the request line \"\(shown)\" is not 'METHOD URI RTSP/1.0'", status: 400)
        }
        let m = parts[0], u = parts[1], v = parts[2]
        guard (1...32).contains(m.count), m.allSatisfy(isToken) else {
            throw RTSPParseError(.malformed, "the method in \"\(shown)\" is not a token of 1...32 characters", status: 400)
        }
        guard !u.isEmpty, u.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw RTSPParseError(.malformed, "the URI in \"\(shown)\" is empty or has characters outside visible ASCII", status: 400)
        }
        let version = String(decoding: v, as: UTF8.self)
        guard version == "RTSP/1.0" else {
            if version.hasPrefix("RTSP/") || version.hasPrefix("HTTP/") {
                throw RTSPParseError(.unsupportedVersion, "version \(version.prefix(12)) is not supported: this server speaks RTSP/1.0", status: 505)
            }
            throw RTSPParseError(.malformed, "the request line \"\(shown)\" does not end in RTSP/1.0", status: 400)
        }
        return (String(decoding: m, as: UTF8.self), String(decoding: u, as: UTF8.self))
    }

    /// "Name: value" → a header (value trimmed of spaces and tabs); control characters are refused.
    static func header(_ b: UnsafeRawBufferPointer, _ line: (Int, Int), number: Int) throws(RTSPParseError) -> RTSPHeader {
        let bytes = b[line.0..<line.1]
        guard let colon = bytes.firstIndex(of: 0x3a) else {
            if let f = bytes.first, f == 0x20 || f == 0x09 {
                throw RTSPParseError(.malformed, "header line \(number) is a folded continuation line (not accepted)", status: 400)
            }
            throw RTSPParseError(.malformed, "header line \(number) has no ':'", status: 400)
        }
        let name = bytes[bytes.startIndex..<colon]
        guard !name.isEmpty, name.count <= 64, name.allSatisfy(isToken) else {
            throw RTSPParseError(.malformed, "header line \(number) has no valid field name (a token of 1...64 characters)", status: 400)
        }
        var value = bytes[(colon + 1)...]
        while let f = value.first, f == 0x20 || f == 0x09 { value = value.dropFirst() }
        while let l = value.last, l == 0x20 || l == 0x09 { value = value.dropLast() }
        guard value.allSatisfy({ $0 >= 0x20 && $0 != 0x7f || $0 == 0x09 }) else {
            throw RTSPParseError(.malformed, "header \(String(decoding: name, as: UTF8.self)) has a control character", status: 400)
        }
        return RTSPHeader(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    /// A decimal number of 1…`maxDigits` digits and nothing else, or nil (no overflow possible below 19 digits).
    static func number<S: StringProtocol>(_ s: S, maxDigits: Int) -> Int? {
        let u = s.utf8
        guard (1...min(maxDigits, 18)).contains(u.count), u.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return u.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }
}
