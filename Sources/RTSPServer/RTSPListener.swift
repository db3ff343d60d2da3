import Foundation
import NIOCore
import NIOPosix
import Synchronization
import VideoCaptureCommons

/// The TCP host of an `RTSPHub` on SwiftNIO: RTSP requests in, responses and interleaved media out, under the
/// hub's connection limits, request timeout and idle timeout. Over the per-address limit a connection gets 503
/// and is closed; when the server is full, the connection idle longest (no request but OPTIONS that made
/// progress) without a playing session is closed to make room, and only when every connection plays is the
/// newcomer refused.
public final class RTSPListener: Sendable {
    /// The port listened on (the one the system picked for port 0).
    public let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.port = port
        self.group = group
        self.channel = channel
    }

    /// Listens on `host:port` (a busy port or a foreign address fails here, naming it) and serves `hub`.
    public static func start(host: String, port: Int, hub: RTSPHub) async throws(RTSPError) -> RTSPListener {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let tracker = ConnectionCounter(hub: hub)
        let high = max(65_536, hub.configuration.maxQueuedBytes)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.writeBufferWaterMark, value: .init(low: high / 2, high: high))
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let address = channel.remoteAddress?.ipAddress ?? "?"
                    let connection = RTSPConnection(client: address, channel: channel)
                    if let refusal = tracker.admit(connection) {
                        try channel.pipeline.syncOperations.addHandler(RefuseHandler(text: refusal))
                        return
                    }
                    channel.closeFuture.whenComplete { _ in tracker.release(connection) }
                    try channel.pipeline.syncOperations.addHandler(RTSPHandler(hub: hub, connection: connection))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return RTSPListener(port: channel.localAddress?.port ?? port, group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            if let e = error as? IOError, e.errnoCode == EADDRINUSE {
                throw RTSPError(.cannotListen, "cannot listen on \(host):\(port): the port is in use; pick another with --listen \(host):PORT")
            }
            if let e = error as? IOError, e.errnoCode == EADDRNOTAVAIL {
                throw RTSPError(.cannotListen, "cannot listen on \(host):\(port): no interface has that address")
            }
            throw RTSPError(.cannotListen, "cannot listen on \(host):\(port): \(error)")
        }
    }

    /// Closes the listening socket and every connection.
    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// Open connections overall and per address, against the hub's limits; when full, the one to close for a
/// newcomer.
final class ConnectionCounter: Sendable {
    private struct State {
        var open: [ObjectIdentifier: RTSPConnection] = [:]
        var perAddress: [String: Int] = [:]
    }
    private let counts = Mutex(State())
    let hub: RTSPHub
    init(hub: RTSPHub) { self.hub = hub }

    /// nil when admitted (counted), else the refusal's text. A full server makes room by closing the connection
    /// idle longest that has no playing session.
    func admit(_ connection: RTSPConnection) -> String? {
        let c = hub.configuration
        let address = connection.client
        var victim: RTSPConnection?
        let verdict = counts.withLock { s -> Int in
            if s.perAddress[address, default: 0] >= c.maxConnectionsPerAddress { return 2 }
            if s.open.count >= c.maxConnections {
                guard
                    let v = s.open.values.filter({ !$0.hasPlayingSession }).min(by: {
                        $0.lastProgressNs.load(ordering: .relaxed) < $1.lastProgressNs.load(ordering: .relaxed)
                    })
                else { return 1 }
                s.open[ObjectIdentifier(v)] = nil
                let n = s.perAddress[v.client, default: 1] - 1
                s.perAddress[v.client] = n > 0 ? n : nil
                victim = v
            }
            s.open[ObjectIdentifier(connection)] = connection
            s.perAddress[address, default: 0] += 1
            return 0
        }
        if let victim {
            hub.count { $0.evicted += 1 }
            victim.channel.close(promise: nil)
        }
        switch verdict {
        case 1:
            hub.count { $0.connectionLimit += 1 }
            return "the server has too many connections; try again later"
        case 2:
            hub.count { $0.perAddressConnectionLimit += 1 }
            return "too many connections from your address"
        default: return nil
        }
    }
    func release(_ connection: RTSPConnection) {
        counts.withLock { s in
            guard s.open.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return } // evicted: already released
            let n = s.perAddress[connection.client, default: 1] - 1
            s.perAddress[connection.client] = n > 0 ? n : nil
        }
    }
}

/// A connection over a limit: 503, then closed.
private final class RefuseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let text: String
    init(text: String) { self.text = text }
    func channelActive(context: ChannelHandlerContext) {
        let bytes = RTSPResponse.error(503, text, closes: true).serialized(cseq: nil)
        var b = context.channel.allocator.buffer(capacity: bytes.count)
        b.writeBytes(bytes)
        let channel = context.channel
        context.writeAndFlush(NIOAny(b)).whenComplete { _ in channel.close(promise: nil) }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// One RTSP connection: bytes in, parsed into requests (answered by the hub) and interleaved frames (RTCP for
/// the hub), responses out. A request must be complete within the request timeout of its first byte; a
/// connection without a session is closed after the idle timeout without progress (OPTIONS, refused requests
/// and keep-alives that name no session are not progress). A response the hub holds back (a 401 after several
/// wrong passwords) is written after its delay, and nothing more is read or answered on the connection meanwhile.
private final class RTSPHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let hub: RTSPHub
    private let connection: RTSPConnection
    private var pending: [UInt8] = []
    private var requestDeadline: Scheduled<Void>?
    private var closing = false
    /// A held-back response is waiting: requests that came after it wait too.
    private var paused = false

    init(hub: RTSPHub, connection: RTSPConnection) {
        self.hub = hub
        self.connection = connection
        pending.reserveCapacity(4096)
    }

    func handlerAdded(context: ChannelHandlerContext) { armIdle(context) }
    func handlerRemoved(context: ChannelHandlerContext) {
        closing = true
        requestDeadline?.cancel()
        requestDeadline = nil
        connection.idleGeneration.add(1, ordering: .relaxed) // any idle timer left does nothing
    }
    func channelInactive(context: ChannelHandlerContext) {
        hub.closed(connection)
        context.fireChannelInactive()
    }

    private func armIdle(_ context: ChannelHandlerContext) {
        let generation = connection.idleGeneration.add(1, ordering: .relaxed).newValue
        RTSPHandler.scheduleIdle(hub, connection, generation)
    }

    /// Closes the connection after the idle timeout unless it made progress meanwhile (a newer generation) or it
    /// has sessions (then it waits again).
    private static func scheduleIdle(_ hub: RTSPHub, _ connection: RTSPConnection, _ generation: Int) {
        let channel = connection.channel
        channel.eventLoop.scheduleTask(in: .nanoseconds(hub.configuration.idleTimeoutNs)) {
            guard connection.idleGeneration.load(ordering: .relaxed) == generation else { return }
            if connection.hasSessions {
                scheduleIdle(hub, connection, generation)
            } else {
                hub.count { $0.timeouts += 1 }
                channel.close(promise: nil)
            }
        }
    }

    /// Whether answering `request` with `response` was progress: a request other than OPTIONS that was not
    /// refused, and a keep-alive only if it named a session.
    private static func isProgress(_ request: RTSPRequest, _ response: RTSPResponse) -> Bool {
        guard response.status < 400 else { return false }
        switch request.method {
        case "OPTIONS", "GET_PARAMETER", "SET_PARAMETER": return request.header("Session") != nil && request.method != "OPTIONS"
        default: return true
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        var buffer = unwrapInboundIn(data)
        if let bytes = buffer.readBytes(length: buffer.readableBytes) { pending += bytes }
        process(context)
    }

    /// Answers the complete requests waiting in `pending`, up to one whose answer is held back.
    private func process(_ context: ChannelHandlerContext) {
        guard !closing, !paused else { return }
        var consumedTotal = 0
        var failure: RTSPParseError?
        var progress = false
        var held: (response: RTSPResponse, cseq: Int)?
        let limits = hub.configuration.parserLimits
        pending.withUnsafeBytes { all in
            while consumedTotal < all.count {
                let rest = UnsafeRawBufferPointer(rebasing: all[consumedTotal...])
                let result: RTSPParseResult
                do throws(RTSPParseError) { result = try RTSPParser.parse(rest, limits: limits) } catch {
                    failure = error
                    return
                }
                switch result {
                case .incomplete: return
                case .interleaved(let channel, let payload, let consumed):
                    hub.interleaved(channel: channel, UnsafeRawBufferPointer(rebasing: rest[payload]), on: connection)
                    consumedTotal += consumed
                case .request(let request, let consumed):
                    consumedTotal += consumed
                    let response = hub.handle(request, on: connection)
                    if RTSPHandler.isProgress(request, response) { progress = true }
                    if response.delayNs > 0 {
                        held = (response, request.cseq)
                        return
                    }
                    respond(context, response.serialized(cseq: request.cseq))
                    if response.closesConnection {
                        failure = nil
                        closing = true
                        return
                    }
                }
            }
        }
        if consumedTotal > 0 { pending.removeFirst(consumedTotal) }
        if let failure {
            hub.count { $0.malformed += 1 }
            closing = true
            let response = RTSPResponse.error(failure.status, failure.message, closes: true)
            respond(context, response.serialized(cseq: failure.cseq))
        }
        if closing {
            context.flush()
            context.close(promise: nil)
            return
        }
        context.flush()
        if progress {
            connection.lastProgressNs.store(monotonicNanoseconds(), ordering: .relaxed)
            armIdle(context)
        }
        if let held {
            hold(context, held.response, cseq: held.cseq)
            return
        }
        // A client that sends requests but does not read the answers (or the media) stops being read until its
        // connection can take writes again: what waits for it stays bounded by the write buffer's high mark.
        if !context.channel.isWritable { try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false) }
        // A partial request must be completed within the request timeout of its first byte.
        if pending.isEmpty {
            requestDeadline?.cancel()
            requestDeadline = nil
        } else if requestDeadline == nil {
            let hub = self.hub, channel = connection.channel
            requestDeadline = context.eventLoop.scheduleTask(in: .nanoseconds(hub.configuration.requestTimeoutNs)) {
                hub.count { $0.timeouts += 1 }
                channel.close(promise: nil)
            }
        }
    }

    /// Writes `response` after its delay, reading nothing meanwhile, then goes on with what waits.
    private func hold(_ context: ChannelHandlerContext, _ response: RTSPResponse, cseq: Int) {
        paused = true
        requestDeadline?.cancel()
        requestDeadline = nil
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: .nanoseconds(response.delayNs)) {
            let (handler, context) = bound.value
            handler.paused = false
            guard !handler.closing else { return }
            handler.respond(context, response.serialized(cseq: cseq))
            if response.closesConnection {
                handler.closing = true
                context.flush()
                context.close(promise: nil)
                return
            }
            context.flush()
            if context.channel.isWritable {
                try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
                context.read()
            }
            handler.process(context)
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        var b = context.channel.allocator.buffer(capacity: bytes.count)
        b.writeBytes(bytes)
        context.write(wrapOutboundOut(b), promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable && !paused {
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}
