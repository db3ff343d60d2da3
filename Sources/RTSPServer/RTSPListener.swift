import Foundation
import NIOCore
import NIOPosix
import ServerShell
import Synchronization
public import VideoCaptureCommons

/// The TCP host of an `RTSPHub` on SwiftNIO: RTSP requests in, responses and interleaved media out, under the
/// hub's connection limits, request timeout and idle timeout. Over the per-address limit a connection gets 503
/// and is closed; when the server is full, the connection idle longest (no request but OPTIONS that made
/// progress) without a playing session is closed to make room, and only when every connection plays is the
/// newcomer refused.
public final class RTSPListener: Sendable {
    /// The port listened on (the one the system picked for port 0).
    public var port: Int { shell.port }
    private let shell: TCPServerShell<RTSPConnection>

    private init(shell: TCPServerShell<RTSPConnection>) { self.shell = shell }

    /// Listens on `host:port` (a busy port or a foreign address fails here, naming it) and serves `hub`.
    public static func start(host: String, port: Int, hub: RTSPHub) async throws(RTSPError) -> RTSPListener {
        let tracker = ConnectionTracker<RTSPConnection>(
            limits: {
                let c = hub.configuration
                return ConnectionLimits(
                    maxConnections: c.maxConnections, maxConnectionsPerAddress: c.maxConnectionsPerAddress, evictsWithinAddress: false)
            },
            events: { event in
                switch event {
                case .evicted: hub.count { $0.evicted += 1 }
                case .refused(.full): hub.count { $0.connectionLimit += 1 }
                case .refused(.address), .refused(.network): hub.count { $0.perAddressConnectionLimit += 1 }
                }
            })
        do throws(ListenError) {
            let shell = try await TCPServerShell.start(
                host: host, port: port,
                options: ShellOptions(backlog: 64, writeBufferHighMark: max(65_536, hub.configuration.maxQueuedBytes), noDelay: true),
                tracker: tracker,
                connection: { RTSPConnection(client: $1, channel: $0) },
                refusal: { why in
                    let text =
                        why == .full ? "the server has too many connections; try again later" : "too many connections from your address"
                    return RTSPResponse.error(503, text, closes: true).serialized(cseq: nil)
                },
                configure: { connection, pipeline in try pipeline.addHandler(RTSPHandler(hub: hub, connection: connection)) })
            return RTSPListener(shell: shell)
        } catch {
            switch error {
            case .addressInUse:
                throw RTSPError(
                    .cannotListen,
                    "cannot listen on \(host):\(port): the port is in use (another server on it?); pick another port, or port 0 for any free one")
            case .addressNotAvailable: throw RTSPError(.cannotListen, "cannot listen on \(host):\(port): no interface has that address")
            case .other(let why): throw RTSPError(.cannotListen, "cannot listen on \(host):\(port): \(why)")
            }
        }
    }

    /// Closes the listening socket and every connection.
    public func stop() async { await shell.stop() }
}

/// An RTSP connection as the shell's tracker sees it: when the server is full, the one idle longest (no progress
/// since, `lastProgressNs`) without a playing session is closed for a newcomer; one that plays never is.
extension RTSPConnection: TrackedConnection {
    var address: String { client }
    var evictableSinceNs: Int64? { hasPlayingSession ? nil : lastProgressNs.load(ordering: .relaxed) }
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
    private var requestDeadline = ConnectionDeadline()
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
        requestDeadline.cancel()
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
            requestDeadline.cancel()
        } else if !requestDeadline.isArmed {
            let hub = self.hub
            requestDeadline.arm(connection.channel, in: hub.configuration.requestTimeoutNs) { hub.count { $0.timeouts += 1 } }
        }
    }

    /// Writes `response` after its delay, reading nothing meanwhile, then goes on with what waits.
    private func hold(_ context: ChannelHandlerContext, _ response: RTSPResponse, cseq: Int) {
        paused = true
        requestDeadline.cancel()
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
