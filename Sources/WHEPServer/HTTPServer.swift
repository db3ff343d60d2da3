import Foundation
import NIOCore
import NIOPosix
import NIOHTTP1
public import NIOSSL
import Synchronization
import ServerShell
public import VideoCaptureCommons

/// One HTTP connection, as the shell's tracker sees it. It is evictable while it has no request in progress, or
/// only one that is not authenticated (no head yet, a refused head, a public page): when a limit is reached, a
/// new connection evicts the one of the same address (or network, or the whole server) that has been evictable
/// longest, so that connections held open by others cannot lock real clients out. A connection whose request
/// carried the token is never evicted; it is bounded by the request timeout.
final class HTTPConnection: TrackedConnection {
    let channel: any Channel
    let address: String
    /// Since when it has been evictable (monotonic ns); -1 while an authenticated request is in progress.
    private let since = Atomic<Int64>(monotonicNanoseconds())
    init(channel: any Channel, address: String) {
        self.channel = channel
        self.address = address
    }
    var evictableSinceNs: Int64? {
        let s = since.load(ordering: .relaxed)
        return s < 0 ? nil : s
    }
    /// An authenticated request has begun: the connection is not evicted until it is answered.
    func busy() { since.store(-1, ordering: .relaxed) }
    /// The connection waits for its next request, or its request is not authenticated: it may be evicted.
    func waiting() { _ = since.compareExchange(expected: -1, desired: monotonicNanoseconds(), ordering: .relaxed) }
}

/// The HTTP/1.1 host of a `WHEPEndpoint` on SwiftNIO (optionally TLS through NIOSSL), with the connection
/// limits of its policy: the policy's checks on each request's head (a refusal before any body is read),
/// connections overall, per address and per network (the one evictable longest, i.e. without a request that
/// carries the token, evicted when a limit is reached), request heads of at most `maxHeadBytes`, a complete
/// request within the request timeout, offers of at most 64 KiB. The listening, admission and stop are
/// ServerShell's `TCPServerShell`, as for RTSP.
public final class HTTPServer: Sendable {
    /// The port listened on (the one the system picked for port 0).
    public var port: Int { shell.port }
    let shell: TCPServerShell<HTTPConnection>

    private init(shell: TCPServerShell<HTTPConnection>) { self.shell = shell }

    /// Listens on `host:port` (a busy port or a foreign address fails here, naming it) and serves `endpoint`.
    /// `routes` are the app's own: asked first for every request that passed the endpoint's Host, Origin and
    /// token checks; nil passes the request on to the endpoint.
    public static func start(
        host: String, port: Int, endpoint: WHEPEndpoint, tls: NIOSSLContext?,
        routes: (@Sendable (WHEPRequest) -> WHEPResponse?)? = nil
    ) async throws(ServerError) -> HTTPServer {
        let tracker = ConnectionTracker<HTTPConnection>(
            limits: {
                let p = endpoint.policy
                return ConnectionLimits(
                    maxConnections: p.maxConnections, maxConnectionsPerAddress: p.maxConnectionsPerAddress,
                    maxConnectionsPerNetwork: p.maxConnectionsPerNetwork, evictsWithinAddress: true)
            },
            network: { ServeSecurity.network(of: $0) },
            events: { event in
                switch event {
                case .evicted: endpoint.count { $0.evicted += 1 }
                case .refused(.address): endpoint.count { $0.perAddressConnectionLimit += 1 }
                case .refused(.network): endpoint.count { $0.perNetworkConnectionLimit += 1 }
                case .refused(.full): endpoint.count { $0.connectionLimit += 1 }
                }
            })
        endpoint.countConnections { tracker.openConnections }
        do throws(ListenError) {
            let shell = try await TCPServerShell.start(
                host: host, port: port, options: ShellOptions(backlog: 1024), tracker: tracker,
                connection: { HTTPConnection(channel: $0, address: $1) },
                // Over a limit: a plain-HTTP client is told why; then the connection is closed.
                refusal: { tls != nil ? nil : refusalResponse($0) },
                configure: { connection, pipeline in
                    let shared = SharedConnectionState()
                    if let tls {
                        try pipeline.addHandler(PlainHTTPOnTLSPort(endpoint: endpoint))
                        try pipeline.addHandler(NIOSSLServerHandler(context: tls))
                    }
                    try pipeline.addHandler(HeadGuard(shared: shared, endpoint: endpoint))
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(WHEPHandler(endpoint: endpoint, routes: routes, connection: connection, shared: shared))
                })
            return HTTPServer(shell: shell)
        } catch {
            switch error {
            case .addressInUse:
                throw ServerError(
                    .cannotListen,
                    "cannot listen on \(host):\(port): the port is in use (another server on it?); pick another port, or port 0 for any free one"
                )
            case .addressNotAvailable: throw ServerError(.cannotListen, "cannot listen on \(host):\(port): no interface has that address")
            case .other(let why): throw ServerError(.cannotListen, "cannot listen on \(host):\(port): \(why)")
            }
        }
    }

    /// Closes the listening socket and every connection.
    public func stop() async { await shell.stop() }

    /// A connection over a limit: 503 (all connections) or 429 (this address's or network's), then closed.
    static func refusalResponse(_ refusal: AdmissionRefusal) -> [UInt8] {
        let text =
            switch refusal {
            case .address: "too many connections from your address\n"
            case .network: "too many connections from your network\n"
            case .full: "the server has too many connections; try again later\n"
            }
        let head = refusal == .full ? "503 Service Unavailable" : "429 Too Many Requests"
        return Array(
            "HTTP/1.1 \(head)\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\nRetry-After: 5\r\nConnection: close\r\n\r\n\(text)"
                .utf8)
    }
}

/// What the byte-level guard and the HTTP handler of one connection share (both run on its event loop).
private final class SharedConnectionState {
    /// Bytes of the request head so far, while one is awaited; the last four bytes seen (for CR LF CR LF).
    var awaitingHead = true, headBytes = 0, tail: UInt32 = 0
    /// Input is thrown away: the connection has been answered and closes soon.
    var discarding = false

    /// The next request's head is awaited.
    func expectHead() {
        awaitingHead = true
        headBytes = 0
        tail = 0
    }

    /// Closes `channel` once the client has read the answer: input is thrown away until the client closes, or
    /// for at most a second (closing with unread input would reset the connection, and the client could lose
    /// the answer with it).
    func linger(_ context: ChannelHandlerContext) {
        guard !discarding else { return }
        discarding = true
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop) // used on its own event loop only
        context.eventLoop.scheduleTask(in: .seconds(1)) { bound.value.close(promise: nil) }
    }
}

/// Plain HTTP sent to the HTTPS port: a TLS connection starts with a handshake record (0x16); anything else gets a
/// plain-text 400 saying the port speaks HTTPS, then the connection is closed. Removed after the first bytes.
private final class PlainHTTPOnTLSPort: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let endpoint: WHEPEndpoint
    init(endpoint: WHEPEndpoint) { self.endpoint = endpoint }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        guard let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self), first != 0x16 else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        endpoint.count { $0.plainHTTPOnTLS += 1 }
        let text = "this port speaks HTTPS: use https:// in the URL\n"
        var b = context.channel.allocator.buffer(capacity: 200)
        b.writeString(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\nConnection: close\r\n\r\n\(text)")
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop) // the future completes on the same loop
        context.writeAndFlush(wrapOutboundOut(b)).whenComplete { _ in bound.value.close(promise: nil) }
    }
}

/// The request head's size, before the HTTP decoder: past `ServerPolicy.maxHeadBytes` the client gets 431 naming
/// the limit and the connection is closed. Also throws input away once the connection is being closed.
private final class HeadGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let shared: SharedConnectionState
    let endpoint: WHEPEndpoint
    init(shared: SharedConnectionState, endpoint: WHEPEndpoint) {
        self.shared = shared
        self.endpoint = endpoint
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !shared.discarding else { return }
        if shared.awaitingHead {
            let limit = endpoint.policy.maxHeadBytes
            let over = unwrapInboundIn(data).withUnsafeReadableBytes { bytes -> Bool in
                for byte in bytes {
                    shared.tail = shared.tail << 8 | UInt32(byte)
                    shared.headBytes += 1
                    if shared.tail == 0x0d0a_0d0a {
                        shared.awaitingHead = false // the rest is the body (or the next request, not counted)
                        return false
                    }
                    if shared.headBytes > limit { return true }
                }
                return false
            }
            if over {
                endpoint.count { $0.headTooLarge += 1 }
                let text = "the request head is larger than \(limit) bytes (\(limit / 1024) KiB), this server's limit\n"
                var b = context.channel.allocator.buffer(capacity: 300)
                b.writeString(
                    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\nConnection: close\r\n\r\n\(text)"
                )
                context.writeAndFlush(wrapOutboundOut(b), promise: nil)
                shared.linger(context)
                return
            }
        }
        context.fireChannelRead(data)
    }
}

/// One connection: HTTP/1.1 requests in, the endpoint's responses out, under the request timeout. A request is
/// checked on its head (Host, Origin, token, the declared body size): a refusal is sent at once, before any body
/// is read, and the connection is closed. Only a request that carries the token makes the connection unevictable.
private final class WHEPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: WHEPEndpoint
    private let routes: (@Sendable (WHEPRequest) -> WHEPResponse?)?
    private let connection: HTTPConnection
    private let shared: SharedConnectionState
    private var policy: ServerPolicy { endpoint.policy }
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var deadline = ConnectionDeadline()

    init(
        endpoint: WHEPEndpoint, routes: (@Sendable (WHEPRequest) -> WHEPResponse?)?, connection: HTTPConnection,
        shared: SharedConnectionState
    ) {
        self.endpoint = endpoint
        self.routes = routes
        self.connection = connection
        self.shared = shared
    }

    /// A complete request within the request timeout, from now.
    private func arm(_ context: ChannelHandlerContext) {
        let endpoint = self.endpoint
        deadline.arm(context.channel, in: policy.requestTimeoutNs) { endpoint.count { $0.timeouts += 1 } }
    }
    func handlerAdded(context: ChannelHandlerContext) { arm(context) }
    func handlerRemoved(context: ChannelHandlerContext) { deadline.cancel() }

    private func request(_ h: HTTPRequestHead, body: [UInt8] = []) -> WHEPRequest {
        WHEPRequest(method: h.method.rawValue, uri: h.uri, headers: h.headers.map { ($0.name, $0.value) }, body: body, client: connection.address)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !shared.discarding else { return }
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.removeAll(keepingCapacity: true)
            // Host, Origin and token on the head alone: a refusal goes out before any body is read.
            if let refusal = endpoint.check(request(h)) {
                self.head = nil
                respond(context, h, refusal, close: true)
                return
            }
            let declared = h.headers.first(name: "Content-Length").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            if let declared, declared > WHEPEndpoint.maxBody {
                self.head = nil
                respond(context, h, endpoint.tooLarge(request(h)), close: true)
                return
            }
            // Only a request with the token holds its connection against eviction (with no token configured,
            // every request that passed the checks does). The stills are never open: having passed the checks,
            // they carried the token (perhaps as ?token=).
            let path = h.uri.split(separator: "?", maxSplits: 1).first ?? ""
            if policy.token == nil || policy.authorizes(h.headers.first(name: "Authorization")) || path == "/snapshot.jpg"
                || path == "/stream.mjpeg"
            {
                connection.busy()
            }
            // RFC 9110 §10.1.1: a client waiting for 100 Continue gets it.
            if h.headers.first(name: "Expect")?.lowercased() == "100-continue" {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: h.version, status: .continue))), promise: nil)
            }
        case .body(var b):
            guard let h = head else { return }
            if body.count + b.readableBytes > WHEPEndpoint.maxBody {
                self.head = nil
                respond(context, h, endpoint.tooLarge(request(h)), close: true)
                return
            }
            if let bytes = b.readBytes(length: b.readableBytes) { body += bytes }
        case .end:
            guard let head else { return }
            self.head = nil
            deadline.cancel()
            shared.expectHead()
            switch endpoint.reply(to: request(head, body: body), routes: routes) {
            case .response(let response): respond(context, head, response, close: false)
            case .snapshot(let pending): wait(context, head, pending)
            case .stream(let response, let client): stream(context, head, response, client)
            }
        }
    }

    // MARK: Stills

    /// The snapshot waiting for its frame, and the MJPEG client of this connection, if any.
    private var pending: PendingSnapshot?
    private var client: MJPEGClient?
    /// Since when the MJPEG client has had a part ready that the connection could not take (monotonic ns).
    private var stalledSince: Int64?

    /// Answers when the frame is encoded, or with 503 after the feed's snapshot timeout.
    private func wait(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ pending: PendingSnapshot) {
        self.pending = pending
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop) // used on its own event loop only
        let timeout = context.eventLoop.scheduleTask(in: .nanoseconds(pending.timeoutNs)) {
            let (handler, context) = bound.value
            guard handler.pending === pending, let refusal = pending.cancel(timedOut: true) else { return }
            handler.pending = nil
            handler.respond(context, head, refusal, close: false)
        }
        let loop = context.eventLoop
        pending.whenReady { response in
            loop.execute {
                let (handler, context) = bound.value
                timeout.cancel()
                guard handler.pending === pending else { return }
                handler.pending = nil
                handler.respond(context, head, response, close: false)
            }
        }
    }

    /// The MJPEG response: its head, then each part the client offers while the connection takes more; a client
    /// that takes nothing for the feed's stall timeout is disconnected (its parts are skipped meanwhile, never queued).
    private func stream(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ response: WHEPResponse, _ client: MJPEGClient) {
        self.client = client
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        headers.add(name: "Connection", value: "close")
        context.writeAndFlush(
            wrapOutboundOut(
                .head(HTTPResponseHead(version: request.version, status: HTTPResponseStatus(statusCode: response.status), headers: headers))),
            promise: nil)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop) // used on its own event loop only
        let loop = context.eventLoop
        client.whenReady { loop.execute { bound.value.0.pump(bound.value.1) } }
    }

    /// Writes the client's waiting part when the connection can take it; ends the response when the feed ended.
    private func pump(_ context: ChannelHandlerContext) {
        guard let client, context.channel.isActive else { return }
        if !context.channel.isWritable {
            let now = monotonicNanoseconds()
            let since = stalledSince ?? now
            stalledSince = since
            if now - since > endpoint.stills.map({ $0.configuration.stallTimeoutNs }) ?? 10_000_000_000 {
                self.client = nil
                client.close(stalled: true)
                context.close(promise: nil)
            }
            return
        }
        stalledSince = nil
        if let part = client.take() {
            var buffer = context.channel.allocator.buffer(capacity: part.count)
            buffer.writeBytes(part)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        } else if client.isFinished {
            self.client = nil
            client.close()
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in bound.value.close(promise: nil) }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if client != nil && context.channel.isWritable { pump(context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        client?.close()
        client = nil
        if let pending {
            _ = pending.cancel(timedOut: false)
            self.pending = nil
        }
        context.fireChannelInactive()
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ response: WHEPResponse, close: Bool) {
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        let bytes = response.bodyBytes
        headers.add(name: "Content-Length", value: String(bytes.count))
        let keepAlive = request.isKeepAlive && !close
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        connection.waiting()
        if keepAlive {
            arm(context)
        } else if close {
            // Answered before its body was read: the rest of the body is thrown away until the client closes.
            let bound = NIOLoopBound((shared, context), eventLoop: context.eventLoop) // completes on the same loop
            done.whenComplete { _ in bound.value.0.linger(bound.value.1) }
        } else {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}

/// Why the server could not start, or a file it was given is unusable: a code, a sentence for people naming the
/// address, file or option at fault, and the configuration member refused by a `validate()` ("maxViewers"), if
/// one is.
public typealias ServerError = CodedSettingError<ServerFailure>

/// The domain of `ServerError`: its codes are `ErrorCode<ServerError>`'s.
public enum ServerFailure {}

/// The codes of `ServerError`.
extension ErrorCode where Domain == ServerError {
    /// The address cannot be listened on (in use, not ours).
    public static var cannotListen: Self { Self(rawValue: "cannot listen") }
    /// A token, certificate or key file that cannot be read or is not what it should be.
    public static var badFile: Self { Self(rawValue: "bad file") }
    /// A bearer token that is not valid RFC 6750 syntax (too short, a character outside b64token).
    public static var badToken: Self { Self(rawValue: "bad token") }
    /// The TLS context could not be made.
    public static var tls: Self { Self(rawValue: "tls") }
    /// A configuration value is out of its range (`validate()`); `setting` names it.
    public static var invalidConfiguration: Self { Self(rawValue: "invalid configuration") }
}
