import Foundation
package import NIOCore
import NIOPosix

/// Why a shell could not listen.
package enum ListenError: Error, Sendable, Equatable {
    /// The port is in use (EADDRINUSE).
    case addressInUse
    /// No interface has the address (EADDRNOTAVAIL).
    case addressNotAvailable
    /// Anything else, described.
    case other(String)
}

/// The socket options of a shell's listening socket and of the connections it accepts.
package struct ShellOptions: Sendable {
    /// The listen backlog.
    package var backlog: Int32
    /// The high mark of each connection's write buffer (the low mark is half of it); nil keeps NIO's default.
    package var writeBufferHighMark: Int?
    /// Whether connections set TCP_NODELAY.
    package var noDelay: Bool

    /// Options with `backlog`, `writeBufferHighMark` (nil: NIO's default) and `noDelay`.
    package init(backlog: Int32, writeBufferHighMark: Int? = nil, noDelay: Bool = false) {
        self.backlog = backlog
        self.writeBufferHighMark = writeBufferHighMark
        self.noDelay = noDelay
    }
}

/// One TCP server on SwiftNIO, whatever its protocol: the listening socket (SO_REUSEADDR, one event-loop
/// thread), admission of each connection against a `ConnectionTracker` (admitted, admitted after evicting
/// another, or refused with the protocol's refusal bytes and closed), release of each admitted connection when it
/// closes, and the stop protocol (stop accepting, close every connection, wait for the event loop to end). The
/// protocol is what `configure` puts in each admitted connection's pipeline.
package final class TCPServerShell<Connection: TrackedConnection>: Sendable {
    /// The port listened on (the one the system picked for port 0).
    package let port: Int
    /// The open connections and the limits they are admitted under.
    package let tracker: ConnectionTracker<Connection>
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    private init(port: Int, tracker: ConnectionTracker<Connection>, group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.port = port
        self.tracker = tracker
        self.group = group
        self.channel = channel
    }

    /// Listens on `host:port` and serves each accepted connection: `connection` makes its record from its
    /// channel and the client's address, `tracker` admits it, then `configure` sets up its pipeline (on its event
    /// loop); a refused one gets `refusal(why)` (nil: closed at once, e.g. on a TLS port) and is closed.
    package static func start(
        host: String, port: Int, options: ShellOptions, tracker: ConnectionTracker<Connection>,
        connection: @escaping @Sendable (_ channel: any Channel, _ address: String) -> Connection,
        refusal: @escaping @Sendable (AdmissionRefusal) -> [UInt8]?,
        configure: @escaping @Sendable (Connection, ChannelPipeline.SynchronousOperations) throws -> Void
    ) async throws(ListenError) -> TCPServerShell {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: options.backlog)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
        if let high = options.writeBufferHighMark {
            bootstrap = bootstrap.childChannelOption(ChannelOptions.writeBufferWaterMark, value: .init(low: high / 2, high: high))
        }
        if options.noDelay { bootstrap = bootstrap.childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1) }
        bootstrap = bootstrap.childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let address = channel.remoteAddress?.ipAddress ?? "?"
                let admitted = connection(channel, address)
                if let why = tracker.admit(admitted) {
                    try channel.pipeline.syncOperations.addHandler(RefuseHandler(bytes: refusal(why)))
                    return
                }
                channel.closeFuture.whenComplete { _ in tracker.release(admitted) }
                try configure(admitted, channel.pipeline.syncOperations)
            }
        }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return TCPServerShell(port: channel.localAddress?.port ?? port, tracker: tracker, group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            if let e = error as? IOError, e.errnoCode == EADDRINUSE { throw .addressInUse }
            if let e = error as? IOError, e.errnoCode == EADDRNOTAVAIL { throw .addressNotAvailable }
            throw .other("\(error)")
        }
    }

    /// Stops accepting, closes every connection and waits until the event loop has ended.
    package func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// A connection over a limit: the refusal's bytes (if any), then closed.
private final class RefuseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let bytes: [UInt8]?
    init(bytes: [UInt8]?) { self.bytes = bytes }
    func channelActive(context: ChannelHandlerContext) {
        guard let bytes else {
            context.close(promise: nil)
            return
        }
        var b = context.channel.allocator.buffer(capacity: bytes.count)
        b.writeBytes(bytes)
        let channel = context.channel
        context.writeAndFlush(NIOAny(b)).whenComplete { _ in channel.close(promise: nil) }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// A deadline on one connection: when it passes, `expired` runs and the channel is closed. Armed again, the
/// old deadline is cancelled. Used on the connection's event loop only.
package struct ConnectionDeadline {
    private var scheduled: Scheduled<Void>?

    /// No deadline yet.
    package init() {}

    /// Whether a deadline is set.
    package var isArmed: Bool { scheduled != nil }

    /// Closes `channel` `nanoseconds` from now (after `expired`), unless cancelled or armed again first.
    package mutating func arm(_ channel: any Channel, in nanoseconds: Int64, expired: @escaping @Sendable () -> Void) {
        scheduled?.cancel()
        scheduled = channel.eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) {
            expired()
            channel.close(promise: nil)
        }
    }

    /// No deadline.
    package mutating func cancel() {
        scheduled?.cancel()
        scheduled = nil
    }
}
