import NIOCore
import NIOPosix
import Synchronization
import TestSupport

let work = scratchDirectory("whep-server-tests")

/// A TCP client on SwiftNIO for the shell's tests: what it received, and waits on its events (bytes arriving, the
/// server closing the connection) bounded by a generous time, never a sleep.
final class TestClient: Sendable {
    /// What arrived so far, whether the connection closed, and who waits for what.
    struct State {
        var bytes: [UInt8] = []
        var closed = false
        var waiters: [(id: Int, until: @Sendable (State) -> Bool, promise: EventLoopPromise<Bool>)] = []
        var nextID = 0
    }
    let state = Mutex(State())
    let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// The text received so far.
    var text: String { String(decoding: state.withLock { $0.bytes }, as: UTF8.self) }

    /// Connects to 127.0.0.1:`port` (from `from`, another loopback address, when given).
    static func connect(port: Int, from: String? = nil, group: any EventLoopGroup) async throws -> TestClient {
        let inbox = Inbox()
        var bootstrap = ClientBootstrap(group: group).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(inbox) }
        }
        if let from { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: from, port: 0)) }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
        let client = TestClient(channel: channel)
        // On the loop, so that bytes that came before the client existed keep their place.
        try await channel.eventLoop.submit {
            inbox.client.withLock { $0 = client }
            inbox.flush()
        }.get()
        return client
    }

    /// Sends `text`.
    func send(_ text: String) async throws { try await channel.writeAndFlush(ByteBuffer(string: text)).get() }

    /// Whether `until` held of what arrived within `seconds` (checked at each event, not polled).
    func wait(seconds: Int64 = 30, until: @escaping @Sendable (State) -> Bool) async throws -> Bool {
        let loop = channel.eventLoop
        let waiting: (Int, EventLoopPromise<Bool>)? = state.withLock { s in
            if until(s) { return nil }
            let promise = loop.makePromise(of: Bool.self)
            s.nextID += 1
            s.waiters.append((s.nextID, until, promise))
            return (s.nextID, promise)
        }
        guard let (id, promise) = waiting else { return true }
        channel.eventLoop.scheduleTask(in: .seconds(seconds)) { [self] in
            let expired = state.withLock { s in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return false }
                s.waiters.remove(at: i)
                return true
            }
            if expired { promise.succeed(false) }
        }
        return try await promise.futureResult.get()
    }

    /// Whether the server closed the connection within `seconds`.
    func closed(within seconds: Int64 = 30) async throws -> Bool { try await wait(seconds: seconds) { $0.closed } }

    /// Whether `text` arrived within `seconds`.
    func received(_ text: String, within seconds: Int64 = 30) async throws -> Bool {
        try await wait(seconds: seconds) { String(decoding: $0.bytes, as: UTF8.self).contains(text) }
    }

    /// Records an event (run on the channel's loop) and wakes the waiters it satisfies.
    fileprivate func update(_ change: (inout State) -> Void) {
        let woken = state.withLock { s -> [EventLoopPromise<Bool>] in
            change(&s)
            let now = s
            let ready = s.waiters.filter { $0.until(now) }
            s.waiters.removeAll { w in ready.contains { $0.id == w.id } }
            return ready.map(\.promise)
        }
        for p in woken { p.succeed(true) }
    }

    /// Closes the connection.
    func close() async { try? await channel.close() }
}

/// The client's handler: bytes and the close go to its `TestClient` (held back until the client exists).
private final class Inbox: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let client = Mutex<TestClient?>(nil)
    private let early = Mutex<(bytes: [UInt8], closed: Bool)>(([], false))

    func flush() {
        guard let c = client.withLock({ $0 }) else { return }
        let (bytes, closed) = early.withLock { e in
            defer { e = ([], false) }
            return e
        }
        c.update {
            $0.bytes += bytes
            $0.closed = $0.closed || closed
        }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = Array(unwrapInboundIn(data).readableBytesView)
        if let c = client.withLock({ $0 }) { c.update { $0.bytes += bytes } } else { early.withLock { $0.bytes += bytes } }
    }
    func channelInactive(context: ChannelHandlerContext) {
        if let c = client.withLock({ $0 }) { c.update { $0.closed = true } } else { early.withLock { $0.closed = true } }
        context.fireChannelInactive()
    }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
}
