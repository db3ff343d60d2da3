// The WHIP client's HTTP/1.1: one request per connection over SwiftNIO (epoll: waiting costs no CPU), the
// answer read as it arrives and bounded (its headers by NIO's decoder, its body here), one deadline for it all.
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// An origin (RFC 6454): scheme, host and port, the default port filled in. Two URLs share a token only when
/// their origins are equal.
struct Origin: Equatable, Sendable, CustomStringConvertible {
    var scheme: String
    var host: String
    var port: Int

    init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", var host = url.host?.lowercased(), !host.isEmpty
        else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.scheme = scheme
        self.host = host
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    /// The host as it goes in a URL or a Host header (an IPv6 address in brackets).
    var hostForURL: String { host.contains(":") ? "[\(host)]" : host }

    /// scheme://host[:port], the port left out when it is the scheme's default.
    var description: String {
        "\(scheme)://\(hostForURL)" + (port == (scheme == "https" ? 443 : 80) ? "" : ":\(port)")
    }
}

/// What an HTTP server answered: the status line and headers, and as much of the body as the limit allows.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// Set when the body was larger than the limit (reading stopped there and the connection was closed):
    /// what the server sent or announced, in words.
    var overflow: String?

    /// The first header named `name` (case-insensitive).
    func header(_ name: String) -> String? {
        let n = name.lowercased()
        return headers.first { $0.name.lowercased() == n }?.value
    }

    /// The start of the body, printable: control characters and invalid UTF-8 replaced.
    func bodyStart(_ count: Int = 300) -> String {
        String(decoding: body.prefix(count), as: UTF8.self).map {
            $0.isNewline || $0 == "\t" ? " " : ($0.isASCII && $0.asciiValue! < 0x20 ? "?" : $0)
        }
        .reduce(into: "") { $0.append($1) }.trimmingCharacters(in: .whitespaces)
    }
}

/// Why an exchange failed before an answer (or part of one) arrived.
struct HTTPExchangeError: Error, Sendable {
    var message: String
}

enum HTTPExchange {
    /// The largest header block we read (NIO's decoder refuses more).
    static let headerLimit = 16 * 1024
    /// The most informational (1xx) responses read before the answer: more ends the exchange with an error (a
    /// server streaming `103 Early Hints` would otherwise keep us parsing until the timeout).
    static let informationalLimit = 8
    /// The most bytes of informational responses (their status lines and headers, as counted by
    /// `AnswerReader.headBytes`) read before the answer, in all.
    static let informationalBytesLimit = 16 * 1024

    /// The TLS context for https endpoints: the system's trust store, the host name checked. Made once.
    private static let tls: Result<NIOSSLContext, HTTPExchangeError> = {
        do { return .success(try NIOSSLContext(configuration: TLSConfiguration.makeClientConfiguration())) } catch {
            return .failure(HTTPExchangeError(message: "cannot set up TLS: \(error)"))
        }
    }()

    /// Sends `method` to `url` on a new connection and waits (blocking this thread on a condition, never
    /// spinning) for the answer, at most `timeout` seconds in all. The body is read up to `limit` bytes: a
    /// larger one (announced or sent) stops the reading and closes the connection; the answer says so in
    /// `overflow`. No redirect is followed here.
    static func send(
        _ method: HTTPMethod, _ url: URL, headers extra: [(String, String)], body: [UInt8]?, limit: Int, timeout: Double
    ) throws(HTTPExchangeError) -> HTTPAnswer {
        guard let origin = Origin(url) else { throw HTTPExchangeError(message: "not an http(s) URL with a host") }
        let tlsContext: NIOSSLContext?
        if origin.scheme == "https" {
            switch tls {
            case .success(let c): tlsContext = c
            case .failure(let e): throw e
            }
        } else {
            tlsContext = nil
        }
        let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        var target = components?.percentEncodedPath ?? "/"
        if target.isEmpty { target = "/" }
        if let q = components?.percentEncodedQuery { target += "?" + q }

        var request = HTTPRequestHead(version: .http1_1, method: method, uri: target)
        request.headers.add(
            name: "Host", value: origin.port == (origin.scheme == "https" ? 443 : 80) ? origin.hostForURL : "\(origin.hostForURL):\(origin.port)")
        request.headers.add(name: "User-Agent", value: "swift-video-capture-whip")
        request.headers.add(name: "Connection", value: "close")
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Length", value: String(body.count))
        } else if method == .POST || method == .PUT {
            request.headers.add(name: "Content-Length", value: "0")
        }
        let head = request

        let group = MultiThreadedEventLoopGroup.singleton
        let loop = group.next()
        let promise = loop.makePromise(of: HTTPAnswer.self)
        let timeoutMs = Int64(max(0.001, timeout) * 1000)
        let serverName = origin.host.contains(":") || origin.host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : origin.host
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(.milliseconds(timeoutMs))
            .channelInitializer { channel in
                do {
                    let sync = channel.pipeline.syncOperations
                    if let tlsContext { try sync.addHandler(try NIOSSLClientHandler(context: tlsContext, serverHostname: serverName)) }
                    var limits = NIOHTTPDecoderLimitConfiguration()
                    limits.maxHeaderListSize = headerLimit
                    limits.maxHeaderFieldSize = headerLimit
                    limits.maxHeaderFieldCount = 200
                    // addHTTPClientHandlers, with informational responses forwarded: NIO would drop them silently,
                    // however many a server sends, and they are counted here.
                    let decoder = HTTPResponseDecoder(
                        leftOverBytesStrategy: .dropBytes, informationalResponseStrategy: .forward, limitConfiguration: limits)
                    try sync.addHandlers([HTTPRequestEncoder(), ByteToMessageHandler(decoder), NIOHTTPRequestHeadersValidator()])
                    try sync.addHandler(AnswerReader(limit: limit, promise: promise))
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
        let timer = loop.scheduleTask(in: .milliseconds(timeoutMs)) {
            promise.fail(HTTPExchangeError(message: "no answer within \(formatSeconds(timeout)) s"))
        }
        let connected = bootstrap.connect(host: origin.host, port: origin.port)
        connected.whenComplete { result in
            switch result {
            case .success(let channel):
                promise.futureResult.whenComplete { _ in channel.close(promise: nil) }
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                if let body, !body.isEmpty {
                    channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
                }
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            case .failure(let error):
                promise.fail(HTTPExchangeError(message: "cannot connect to \(origin): \(describe(error))"))
            }
        }
        do {
            let answer = try promise.futureResult.wait()
            timer.cancel()
            return answer
        } catch let e as HTTPExchangeError {
            timer.cancel()
            throw e
        } catch {
            timer.cancel()
            throw HTTPExchangeError(message: describe(error))
        }
    }

    static func describe(_ error: any Error) -> String {
        if let e = error as? HTTPExchangeError { return e.message }
        if let e = error as? NIOConnectionError {
            if let first = e.connectionErrors.first { return describe(first.error) }
            if let dns = e.dnsAError ?? e.dnsAAAAError { return "cannot resolve \(e.host): \(dns)" }
            return "cannot resolve \(e.host)"
        }
        if let e = error as? IOError { return e.description }
        if let e = error as? ChannelError, case .connectTimeout = e { return "no connection within the timeout" }
        if let e = error as? NIOSSLError {
            let text = "\(e)"
            return text.contains("CERTIFICATE_VERIFY_FAILED")
                ? "the server's TLS certificate is not trusted (CERTIFICATE_VERIFY_FAILED)" : "TLS failed: \(text.prefix(300))"
        }
        if let e = error as? HTTPParserError {
            return e == .headerOverflow ? "the answer's headers are larger than \(headerLimit) bytes" : "not a valid HTTP answer (\(e))"
        }
        return "\(error)"
    }

    static func formatSeconds(_ s: Double) -> String { s == s.rounded() ? String(Int(s)) : String(format: "%.1f", s) }
}

/// Collects one response: its head, and its body up to `limit` bytes; completes the promise once (at the end,
/// at the limit, on an error or when the connection closes).
private final class AnswerReader: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let limit: Int
    private let promise: EventLoopPromise<HTTPAnswer>
    private var answer: HTTPAnswer?
    private var received = 0
    private var done = false
    /// Informational (1xx) responses read so far, and their bytes.
    private var informational = 0, informationalBytes = 0

    init(limit: Int, promise: EventLoopPromise<HTTPAnswer>) {
        self.limit = limit
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            // 1xx (100 Continue, 103 Early Hints) is not the answer: wait for the next head, a few of them at most.
            if (100...199).contains(head.status.code) {
                informational += 1
                informationalBytes += AnswerReader.headBytes(head)
                if informational > HTTPExchange.informationalLimit || informationalBytes > HTTPExchange.informationalBytesLimit {
                    let what =
                        informational > HTTPExchange.informationalLimit
                        ? "more than \(HTTPExchange.informationalLimit) informational (1xx) responses"
                        : "more than \(HTTPExchange.informationalBytesLimit) bytes of informational (1xx) responses (\(informational) of them)"
                    finish(context, .failure(HTTPExchangeError(message: "the server sent \(what) before its answer (the last: \(head.status.code))")))
                }
                return
            }
            var a = HTTPAnswer(status: Int(head.status.code), headers: head.headers.map { ($0.name, $0.value) }, body: [])
            if let announced = head.headers.first(name: "content-length").flatMap({ Int($0) }), announced > limit {
                a.overflow = "it announced \(announced) bytes (Content-Length); at most \(limit) are read"
                finish(context, .success(a))
                return
            }
            answer = a
        case .body(let buffer):
            guard answer != nil else { return }
            received += buffer.readableBytes
            if received > limit {
                answer?.overflow = "it sent more than \(limit) bytes (\(received) when reading stopped)"
                if let a = answer { finish(context, .success(a)) }
                return
            }
            answer?.body.append(contentsOf: buffer.readableBytesView)
        case .end:
            if let a = answer { finish(context, .success(a)) }
        }
    }

    /// The bytes a response head took on the wire, near enough: its status line and each header line with its
    /// CRLF, and the blank line.
    static func headBytes(_ head: HTTPResponseHead) -> Int {
        head.headers.reduce(17 + head.status.reasonPhrase.utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + 2
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(context, .failure(HTTPExchangeError(message: HTTPExchange.describe(error))))
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(
            context,
            .failure(
                HTTPExchangeError(
                    message: answer == nil
                        ? "the server closed the connection without an answer" : "the server closed the connection in the middle of its answer")))
        context.fireChannelInactive()
    }

    private func finish(_ context: ChannelHandlerContext, _ result: Result<HTTPAnswer, HTTPExchangeError>) {
        guard !done else { return }
        done = true
        switch result {
        case .success(let a): promise.succeed(a)
        case .failure(let e): promise.fail(e)
        }
        context.close(promise: nil)
    }
}
