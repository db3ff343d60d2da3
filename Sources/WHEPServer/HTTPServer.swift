import Foundation
import NIOCore
import NIOPosix
import NIOHTTP1
public import NIOSSL
import Synchronization
public import VideoCaptureCommons

/// Open connections, overall, per client address and per network (/24 for IPv4, /64 for IPv6), and the refusal
/// counters. A connection is evictable while it has no request in progress, or only one that is not
/// authenticated (no head yet, a refused head, a public page): when a limit is reached, a new connection evicts
/// the one of the same address (or network, or the whole server) that has been evictable longest, so that
/// connections held open by others cannot lock real clients out. A connection whose request carried the token
/// is never evicted; it is bounded by the request timeout.
final class ConnectionTracker: Sendable {
    private struct Member {
        let channel: any Channel
        let address: String, network: String
        /// Since when it has been evictable (monotonic ns); nil while an authenticated request is in progress.
        var evictableSince: Int64?
    }
    private struct State {
        var members: [ObjectIdentifier: Member] = [:]
        var perAddress: [String: Int] = [:]
        var perNetwork: [String: Int] = [:]
    }
    private let state = Mutex(State())
    /// Where refusals are counted (the endpoint's counters, shown by /stats), and whose limits apply.
    let endpoint: WHEPEndpoint
    var policy: ServerPolicy { endpoint.policy }
    init(endpoint: WHEPEndpoint) { self.endpoint = endpoint }

    enum Admission { case admitted, tooMany, tooManyFromAddress, tooManyFromNetwork }

    func admit(_ channel: any Channel, from address: String) -> Admission {
        let network = ServeSecurity.network(of: address)
        let (admission, evict) = state.withLock { s -> (Admission, (any Channel)?) in
            // The oldest evictable connection among those `where` picks.
            func oldest(_ where: (Member) -> Bool) -> ObjectIdentifier? {
                var best: (ObjectIdentifier, Int64)?
                for (id, m) in s.members {
                    guard let since = m.evictableSince, `where`(m) else { continue }
                    if best == nil || since < best!.1 { best = (id, since) }
                }
                return best?.0
            }
            var victim: ObjectIdentifier?
            if s.perAddress[address, default: 0] >= policy.maxConnectionsPerAddress {
                guard let v = oldest({ $0.address == address }) else {
                    endpoint.count { $0.perAddressConnectionLimit += 1 }
                    return (.tooManyFromAddress, nil)
                }
                victim = v
            } else if s.perNetwork[network, default: 0] >= policy.maxConnectionsPerNetwork {
                guard let v = oldest({ $0.network == network }) else {
                    endpoint.count { $0.perNetworkConnectionLimit += 1 }
                    return (.tooManyFromNetwork, nil)
                }
                victim = v
            } else if s.members.count >= policy.maxConnections {
                guard let v = oldest({ _ in true }) else {
                    endpoint.count { $0.connectionLimit += 1 }
                    return (.tooMany, nil)
                }
                victim = v
            }
            var evicted: (any Channel)?
            if let victim, let m = Self.remove(victim, from: &s) {
                endpoint.count { $0.evicted += 1 }
                evicted = m.channel
            }
            s.members[ObjectIdentifier(channel)] = Member(
                channel: channel, address: address, network: network, evictableSince: monotonicNanoseconds())
            s.perAddress[address, default: 0] += 1
            s.perNetwork[network, default: 0] += 1
            return (.admitted, evicted)
        }
        evict?.close(promise: nil)
        return admission
    }

    private static func remove(_ id: ObjectIdentifier, from s: inout State) -> Member? {
        guard let m = s.members.removeValue(forKey: id) else { return nil }
        let a = s.perAddress[m.address, default: 1] - 1
        s.perAddress[m.address] = a > 0 ? a : nil
        let n = s.perNetwork[m.network, default: 1] - 1
        s.perNetwork[m.network] = n > 0 ? n : nil
        return m
    }

    /// `channel` closed (a connection evicted was counted out when it was evicted).
    func release(_ channel: any Channel) { _ = state.withLock { Self.remove(ObjectIdentifier(channel), from: &$0) } }
    /// An authenticated request has begun on `channel`: it is not evicted until it is answered.
    func busy(_ channel: any Channel) { state.withLock { $0.members[ObjectIdentifier(channel)]?.evictableSince = nil } }
    /// `channel` waits for its next request, or its request is not authenticated: it may be evicted.
    func waiting(_ channel: any Channel) {
        state.withLock { s in
            let id = ObjectIdentifier(channel)
            if s.members[id] != nil && s.members[id]?.evictableSince == nil { s.members[id]?.evictableSince = monotonicNanoseconds() }
        }
    }
    var openConnections: Int { state.withLock { $0.members.count } }
}

/// The HTTP/1.1 host of a `WHEPEndpoint` on SwiftNIO (optionally TLS through NIOSSL), with the connection
/// limits of its policy: the policy's checks on each request's head (a refusal before any body is read),
/// connections overall, per address and per network (the one evictable longest, i.e. without a request that
/// carries the token, evicted when a limit is reached), request heads of at most `maxHeadBytes`, a complete
/// request within the request timeout, offers of at most 64 KiB.
public final class HTTPServer: Sendable {
    /// The port listened on (the one the system picked for port 0).
    public let port: Int
    let tracker: ConnectionTracker
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    private init(port: Int, tracker: ConnectionTracker, group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.port = port
        self.tracker = tracker
        self.group = group
        self.channel = channel
    }

    /// Listens on `host:port` (a busy port or a foreign address fails here, naming it) and serves `endpoint`.
    /// `routes` are the app's own: asked first for every request that passed the endpoint's Host, Origin and
    /// token checks; nil passes the request on to the endpoint.
    public static func start(
        host: String, port: Int, endpoint: WHEPEndpoint, tls: NIOSSLContext?,
        routes: (@Sendable (WHEPRequest) -> WHEPResponse?)? = nil
    ) async throws(ServerError) -> HTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let tracker = ConnectionTracker(endpoint: endpoint)
        endpoint.countConnections { tracker.openConnections }
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 1024)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let address = channel.remoteAddress?.ipAddress ?? "?"
                    let admission = tracker.admit(channel, from: address)
                    guard case .admitted = admission else {
                        // Over a limit: a plain-HTTP client is told why; then the connection is closed.
                        try channel.pipeline.syncOperations.addHandler(RefuseHandler(tls: tls != nil, admission: admission))
                        return
                    }
                    channel.closeFuture.whenComplete { _ in tracker.release(channel) }
                    let shared = SharedConnectionState()
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(PlainHTTPOnTLSPort(endpoint: endpoint))
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    }
                    try channel.pipeline.syncOperations.addHandler(HeadGuard(shared: shared, endpoint: endpoint))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        WHEPHandler(endpoint: endpoint, routes: routes, tracker: tracker, address: address, shared: shared))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return HTTPServer(port: channel.localAddress?.port ?? port, tracker: tracker, group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            if let e = error as? IOError, e.errnoCode == EADDRINUSE {
                throw ServerError(
                    .cannotListen,
                    "cannot listen on \(host):\(port): the port is in use (another camcap serve?); pick another with --listen \(host):PORT, or port 0 for any free one"
                )
            }
            if let e = error as? IOError, e.errnoCode == EADDRNOTAVAIL {
                throw ServerError(.cannotListen, "cannot listen on \(host):\(port): no interface has that address")
            }
            throw ServerError(.cannotListen, "cannot listen on \(host):\(port): \(error)")
        }
    }

    /// Closes the listening socket and every connection.
    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// A connection over a limit: 503 (all connections) or 429 (this address's or network's), then closed.
private final class RefuseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let tls: Bool, admission: ConnectionTracker.Admission
    init(tls: Bool, admission: ConnectionTracker.Admission) {
        self.tls = tls
        self.admission = admission
    }
    func channelActive(context: ChannelHandlerContext) {
        guard !tls else {
            context.close(promise: nil)
            return
        }
        let text =
            switch admission {
            case .tooManyFromAddress: "too many connections from your address\n"
            case .tooManyFromNetwork: "too many connections from your network\n"
            default: "the server has too many connections; try again later\n"
            }
        let head = admission == .tooMany ? "503 Service Unavailable" : "429 Too Many Requests"
        var b = context.channel.allocator.buffer(capacity: 200)
        b.writeString(
            "HTTP/1.1 \(head)\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\nRetry-After: 5\r\nConnection: close\r\n\r\n\(text)"
        )
        context.writeAndFlush(NIOAny(b)).whenComplete { _ in context.close(promise: nil) }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
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
        context.eventLoop.scheduleTask(in: .seconds(1)) { [context] in context.close(promise: nil) }
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
        context.writeAndFlush(wrapOutboundOut(b)).whenComplete { [context] _ in context.close(promise: nil) }
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
    private let tracker: ConnectionTracker
    private let address: String
    private let shared: SharedConnectionState
    private var policy: ServerPolicy { tracker.policy }
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var deadline: Scheduled<Void>?

    init(
        endpoint: WHEPEndpoint, routes: (@Sendable (WHEPRequest) -> WHEPResponse?)?, tracker: ConnectionTracker, address: String,
        shared: SharedConnectionState
    ) {
        self.endpoint = endpoint
        self.routes = routes
        self.tracker = tracker
        self.address = address
        self.shared = shared
    }

    /// A complete request within the request timeout, from now.
    private func arm(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let endpoint = self.endpoint
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(policy.requestTimeoutNs)) { [context] in
            endpoint.count { $0.timeouts += 1 }
            context.close(promise: nil)
        }
    }
    func handlerAdded(context: ChannelHandlerContext) { arm(context) }
    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    private func request(_ h: HTTPRequestHead, body: [UInt8] = []) -> WHEPRequest {
        WHEPRequest(method: h.method.rawValue, uri: h.uri, headers: h.headers.map { ($0.name, $0.value) }, body: body, client: address)
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
            // every request that passed the checks does).
            if policy.token == nil || policy.authorizes(h.headers.first(name: "Authorization")) { tracker.busy(context.channel) }
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
            deadline?.cancel()
            deadline = nil
            shared.expectHead()
            respond(context, head, endpoint.handle(request(head, body: body), routes: routes), close: false)
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ response: WHEPResponse, close: Bool) {
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        let bytes = Array(response.body.utf8)
        headers.add(name: "Content-Length", value: String(bytes.count))
        let keepAlive = request.isKeepAlive && !close
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        tracker.waiting(context.channel)
        if keepAlive {
            arm(context)
        } else if close {
            // Answered before its body was read: the rest of the body is thrown away until the client closes.
            done.whenComplete { [shared, context] _ in shared.linger(context) }
        } else {
            done.whenComplete { [context] _ in context.close(promise: nil) }
        }
    }
}

/// Why the server could not start, or a file it was given is unusable.
public struct ServerError: CodedError {
    /// The codes: `cannotListen`, `badFile`, `badToken`, `tls`.
    public typealias Code = ErrorCode<ServerError>
    /// What kind of failure this is, to switch on.
    public var code: Code
    /// A sentence for people, naming the address, file or option at fault.
    public var message: String
    /// An error with `code` and a human-readable `message`.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

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
}
