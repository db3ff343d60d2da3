import Foundation
import NIOCore
import NIOPosix
import NIOHTTP1
public import NIOSSL
import Synchronization
public import VideoCapture

/// Open connections, overall and per client address, and the refusal counters. When every connection is
/// taken, a new one evicts the one that has waited longest without a request in progress (an idle or slowloris
/// connection), so that connections held open by others cannot lock real clients out.
final class ConnectionTracker: Sendable {
    private struct State {
        var open = 0
        var perAddress: [String: Int] = [:]
        /// Connections with no request in progress, and since when (monotonic ns).
        var waiting: [ObjectIdentifier: (channel: any Channel, sinceNs: Int64)] = [:]
    }
    private let state = Mutex(State())
    /// Where refusals are counted (the endpoint's counters, shown by /stats), and whose limits apply.
    let endpoint: WHEPEndpoint
    var policy: ServerPolicy { endpoint.policy }
    init(endpoint: WHEPEndpoint) { self.endpoint = endpoint }

    enum Admission { case admitted, tooMany, tooManyFromAddress }
    func admit(_ channel: any Channel, from address: String) -> Admission {
        let (admission, evict) = state.withLock { s -> (Admission, (any Channel)?) in
            if s.perAddress[address, default: 0] >= policy.maxConnectionsPerAddress {
                endpoint.count { $0.perAddressConnectionLimit += 1 }
                return (.tooManyFromAddress, nil)
            }
            var victim: (any Channel)?
            if s.open >= policy.maxConnections {
                guard let oldest = s.waiting.min(by: { $0.value.sinceNs < $1.value.sinceNs }) else {
                    endpoint.count { $0.connectionLimit += 1 }
                    return (.tooMany, nil)
                }
                s.waiting.removeValue(forKey: oldest.key)
                endpoint.count { $0.evicted += 1 }
                victim = oldest.value.channel
            }
            s.open += 1
            s.perAddress[address, default: 0] += 1
            s.waiting[ObjectIdentifier(channel)] = (channel, monotonicNanoseconds())
            return (.admitted, victim)
        }
        evict?.close(promise: nil)
        return admission
    }
    func release(_ channel: any Channel, from address: String) {
        state.withLock { s in
            s.open -= 1
            let n = s.perAddress[address, default: 1] - 1
            s.perAddress[address] = n > 0 ? n : nil
            s.waiting.removeValue(forKey: ObjectIdentifier(channel))
        }
    }
    /// A request has begun on `channel` (it is not evicted until it is answered).
    func busy(_ channel: any Channel) { _ = state.withLock { $0.waiting.removeValue(forKey: ObjectIdentifier(channel)) } }
    /// `channel` waits for its next request.
    func waiting(_ channel: any Channel) { state.withLock { $0.waiting[ObjectIdentifier(channel)] = (channel, monotonicNanoseconds()) } }
    var openConnections: Int { state.withLock { $0.open } }
}

/// The HTTP/1.1 host of a `WHEPEndpoint` on SwiftNIO (optionally TLS through NIOSSL), with the connection
/// limits of its policy: connections overall and per address (the longest-waiting idle one evicted when all
/// are taken), a complete request within the request timeout, offers of at most 64 KiB.
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
            .serverChannelOption(ChannelOptions.backlog, value: 128)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let address = channel.remoteAddress?.ipAddress ?? "?"
                    let admission = tracker.admit(channel, from: address)
                    guard case .admitted = admission else {
                        // Over a limit: a plain-HTTP client is told why; then the connection is closed.
                        try channel.pipeline.syncOperations.addHandler(RefuseHandler(tls: tls != nil, tooMany: admission == .tooMany))
                        return
                    }
                    channel.closeFuture.whenComplete { _ in tracker.release(channel, from: address) }
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        WHEPHandler(endpoint: endpoint, routes: routes, tracker: tracker, address: address))
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

/// A connection over a limit: 503 (all connections) or 429 (this address's), then closed.
private final class RefuseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let tls: Bool, tooMany: Bool
    init(tls: Bool, tooMany: Bool) {
        self.tls = tls
        self.tooMany = tooMany
    }
    func channelActive(context: ChannelHandlerContext) {
        guard !tls else {
            context.close(promise: nil)
            return
        }
        let text = tooMany ? "the server has too many connections; try again later\n" : "too many connections from your address\n"
        let head = tooMany ? "503 Service Unavailable" : "429 Too Many Requests"
        var b = context.channel.allocator.buffer(capacity: 200)
        b.writeString(
            "HTTP/1.1 \(head)\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\nRetry-After: 5\r\nConnection: close\r\n\r\n\(text)"
        )
        context.writeAndFlush(NIOAny(b)).whenComplete { _ in context.close(promise: nil) }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// One connection: HTTP/1.1 requests in, the endpoint's responses out, under the request timeout.
private final class WHEPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: WHEPEndpoint
    private let routes: (@Sendable (WHEPRequest) -> WHEPResponse?)?
    private let tracker: ConnectionTracker
    private let address: String
    private var policy: ServerPolicy { tracker.policy }
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var deadline: Scheduled<Void>?

    init(endpoint: WHEPEndpoint, routes: (@Sendable (WHEPRequest) -> WHEPResponse?)?, tracker: ConnectionTracker, address: String) {
        self.endpoint = endpoint
        self.routes = routes
        self.tracker = tracker
        self.address = address
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
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.removeAll(keepingCapacity: true)
            tooLarge = false
            tracker.busy(context.channel)
            // RFC 9110 §10.1.1: a client waiting for 100 Continue gets it (or the final answer, when that is a refusal).
            if h.headers.first(name: "Expect")?.lowercased() == "100-continue" {
                if let refusal = endpoint.check(request(h)) {
                    self.head = nil
                    respond(context, h, refusal, close: true)
                    return
                }
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: h.version, status: .continue))), promise: nil)
            }
        case .body(var b):
            guard head != nil else { return }
            if body.count + b.readableBytes > WHEPEndpoint.maxBody {
                tooLarge = true
                return
            }
            if let bytes = b.readBytes(length: b.readableBytes) { body += bytes }
        case .end:
            guard let head else { return }
            self.head = nil
            deadline?.cancel()
            deadline = nil
            let r = request(head, body: body)
            let response = tooLarge ? endpoint.tooLarge(r) : endpoint.handle(r, routes: routes)
            respond(context, head, response, close: tooLarge)
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
        if keepAlive {
            arm(context)
            tracker.waiting(context.channel)
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
