import Foundation
import NIOCore
import NIOEmbedded
import NIOPosix
import ServerShell
import Synchronization
import Testing
import TestSupport
import WebRTC
import WHEPServer

/// A connection whose evictability the test fixes.
private final class Fixed: TrackedConnection {
    let channel: any Channel
    let address: String
    let evictableSinceNs: Int64?
    init(_ address: String, since: Int64? = nil, channel: any Channel = EmbeddedChannel()) {
        self.channel = channel
        self.address = address
        self.evictableSinceNs = since
    }
    /// Whether its channel was closed (an eviction), once `watched`.
    let closedFlag = Atomic<Bool>(false)
    /// Whether its channel was closed (the embedded loop run first, for the close's callbacks).
    var isClosed: Bool {
        (channel as? EmbeddedChannel)?.embeddedEventLoop.run()
        return closedFlag.load(ordering: .relaxed)
    }
}

/// Records what a tracker tells of refusals and evictions.
private final class Events: Sendable {
    let list = Mutex<[AdmissionEvent]>([])
    var all: [AdmissionEvent] { list.withLock { $0 } }
    func record(_ e: AdmissionEvent) { list.withLock { $0.append(e) } }
}

/// The one TCP server shell under `HTTPServer` and `RTSPListener` (#38): admission against the limits (refusal,
/// eviction of the connection evictable longest), the refusal sent before closing, a connection's deadline, the
/// stop; then the same limits through `HTTPServer` as a WHEP client meets them. Waits are on events (bytes
/// arriving, a close) bounded by 30 s, never sleeps: they hold on a loaded 2-core machine.
@Suite(.timeLimit(.minutes(2))) struct ServerShellTests {
    static func network(_ a: String) -> String { String(a.split(separator: ".").prefix(3).joined(separator: ".")) }

    /// Watches `c`'s channel close.
    private static func watched(_ c: Fixed) -> Fixed {
        c.channel.closeFuture.whenComplete { _ in c.closedFlag.store(true, ordering: .relaxed) }
        return c
    }

    @Test func theTrackerRefusesOverEachLimitAndSaysWhich() {
        let events = Events()
        let tracker = ConnectionTracker<Fixed>(
            limits: { ConnectionLimits(maxConnections: 3, maxConnectionsPerAddress: 2, maxConnectionsPerNetwork: 2, evictsWithinAddress: true) },
            network: Self.network, events: events.record)
        let a1 = Fixed("10.0.0.1"), a2 = Fixed("10.0.0.1")
        #expect(tracker.admit(a1) == nil && tracker.admit(a2) == nil)
        #expect(tracker.admit(Fixed("10.0.0.1")) == .address, "a third from one address, none evictable")
        #expect(tracker.admit(Fixed("10.0.0.2")) == .network, "a third from one /24")
        let b = Fixed("10.0.1.1")
        #expect(tracker.admit(b) == nil && tracker.openConnections == 3)
        let late = Fixed("10.0.2.1")
        #expect(tracker.admit(late) == .full)
        tracker.release(b)
        tracker.release(b) // twice: counted out once
        #expect(tracker.openConnections == 2)
        #expect(tracker.admit(late) == nil, "room again after a release")
        #expect(events.all == [.refused(.address), .refused(.network), .refused(.full)])
    }

    @Test func theTrackerEvictsTheConnectionEvictableLongest() {
        let events = Events()
        let tracker = ConnectionTracker<Fixed>(
            limits: { ConnectionLimits(maxConnections: 3, maxConnectionsPerAddress: 8, evictsWithinAddress: true) }, events: events.record)
        let newer = Self.watched(Fixed("a", since: 300)), older = Self.watched(Fixed("b", since: 100)), busy = Self.watched(Fixed("c"))
        for c in [newer, older, busy] { #expect(tracker.admit(c) == nil) }
        #expect(tracker.admit(Fixed("d")) == nil && older.isClosed, "the one evictable longest goes first")
        #expect(tracker.admit(Fixed("e")) == nil && newer.isClosed)
        #expect(tracker.admit(Fixed("f")) == .full, "none evictable is left")
        #expect(!busy.isClosed && tracker.openConnections == 3)
        tracker.release(older) // its close comes after the eviction: nothing more to count out
        #expect(tracker.openConnections == 3)
        #expect(events.all == [.evicted, .evicted, .refused(.full)])
    }

    /// RTSP's rule: over the per-address limit the newcomer is refused even when that address has an evictable
    /// connection; only a full server evicts.
    @Test func withoutEvictionWithinAnAddressTheNewcomerIsRefused() {
        let tracker = ConnectionTracker<Fixed>(limits: {
            ConnectionLimits(maxConnections: 2, maxConnectionsPerAddress: 1, evictsWithinAddress: false)
        })
        let idle = Self.watched(Fixed("a", since: 1))
        #expect(tracker.admit(idle) == nil)
        #expect(tracker.admit(Fixed("a")) == .address && !idle.isClosed)
        #expect(tracker.admit(Fixed("b")) == nil)
        #expect(tracker.admit(Fixed("c")) == nil && idle.isClosed, "a full server evicts")
    }

    /// A shell whose connections are never evictable, greet the client with "hello\n" and, with `deadlineNs`,
    /// are closed that long after they open.
    private static func shell(
        maxConnections: Int, deadlineNs: Int64? = nil, expired: Events = Events()
    ) async throws -> TCPServerShell<Fixed> {
        let tracker = ConnectionTracker<Fixed>(limits: {
            ConnectionLimits(maxConnections: maxConnections, maxConnectionsPerAddress: 16, evictsWithinAddress: false)
        })
        return try await TCPServerShell.start(
            host: "127.0.0.1", port: 0, options: ShellOptions(backlog: 16), tracker: tracker,
            connection: { Fixed($1, channel: $0) }, refusal: { Array("refused: \($0)\n".utf8) },
            configure: { _, pipeline in try pipeline.addHandler(Greeter(deadlineNs: deadlineNs, expired: expired)) })
    }

    @Test func aConnectionOverTheLimitGetsTheRefusalAndIsClosed() async throws {
        let server = try await Self.shell(maxConnections: 2)
        let group = MultiThreadedEventLoopGroup.singleton
        let a = try await TestClient.connect(port: server.port, group: group), b = try await TestClient.connect(port: server.port, group: group)
        let greetedA = try await a.received("hello\n"), greetedB = try await b.received("hello\n")
        #expect(greetedA && greetedB)
        let c = try await TestClient.connect(port: server.port, group: group)
        #expect(try await c.closed(), "the refused connection is closed")
        #expect(c.text == "refused: full\n")
        #expect(server.tracker.openConnections == 2)
        await a.close()
        #expect(await waitUntil(timeout: 30) { server.tracker.openConnections == 1 }, "a closed connection is counted out")
        let d = try await TestClient.connect(port: server.port, group: group)
        #expect(try await d.received("hello\n"), "room again: \(d.text)")
        await server.stop()
    }

    @Test func anIdleConnectionIsClosedAtItsDeadline() async throws {
        let expired = Events()
        let server = try await Self.shell(maxConnections: 4, deadlineNs: 300_000_000, expired: expired)
        let start = ContinuousClock.now
        let a = try await TestClient.connect(port: server.port, group: MultiThreadedEventLoopGroup.singleton)
        #expect(try await a.closed(), "still open 30 s on")
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(300), "closed before its deadline: \(elapsed)")
        #expect(expired.all.count == 1)
        #expect(await waitUntil(timeout: 30) { server.tracker.openConnections == 0 })
        await server.stop()
    }

    @Test func stopClosesEveryConnection() async throws {
        let server = try await Self.shell(maxConnections: 4)
        let group = MultiThreadedEventLoopGroup.singleton
        let a = try await TestClient.connect(port: server.port, group: group), b = try await TestClient.connect(port: server.port, group: group)
        let greetedA = try await a.received("hello\n"), greetedB = try await b.received("hello\n")
        #expect(greetedA && greetedB)
        await server.stop()
        let closedA = try await a.closed(), closedB = try await b.closed()
        #expect(closedA && closedB)
    }

    @Test func aBusyPortIsNamedAsSuch() async throws {
        let server = try await Self.shell(maxConnections: 1)
        do {
            _ = try await TCPServerShell.start(
                host: "127.0.0.1", port: server.port, options: ShellOptions(backlog: 1),
                tracker: ConnectionTracker<Fixed>(limits: {
                    ConnectionLimits(maxConnections: 1, maxConnectionsPerAddress: 1, evictsWithinAddress: false)
                }), connection: { Fixed($1, channel: $0) }, refusal: { _ in nil }, configure: { _, _ in })
            Issue.record("listened twice on \(server.port)")
        } catch { #expect(error == .addressInUse) }
        await server.stop()
    }

    // MARK: - The limits through HTTPServer

    /// An HTTPServer on 127.0.0.1 without a token, with `change` made to its policy.
    private static func whep(_ change: (inout ServerPolicy) -> Void) async throws -> (HTTPServer, WHEPEndpoint) {
        let hub = ViewerHub(
            identity: try DTLSIdentity(), configuration: WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        var policy = try ServerPolicy(token: nil, hostNames: ["127.0.0.1"])
        change(&policy)
        let endpoint = WHEPEndpoint(hub: hub, policy: policy)
        return (try await HTTPServer.start(host: "127.0.0.1", port: 0, endpoint: endpoint, tls: nil), endpoint)
    }

    /// A request in progress that holds its connection (no token configured: every request that passed the checks
    /// does); the server's 100 Continue says its head was taken.
    private static func holding(_ port: Int) async throws -> TestClient {
        let c = try await TestClient.connect(port: port, group: MultiThreadedEventLoopGroup.singleton)
        try await c.send(
            "POST /whep HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/sdp\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
        #expect(try await c.received("HTTP/1.1 100 Continue"), "\(c.text)")
        return c
    }

    @Test func whepConnectionsOverALimitGet429Or503() async throws {
        for (perAddress, total, status, text) in [
            (1, 8, "429 Too Many Requests", "too many connections from your address"),
            (8, 1, "503 Service Unavailable", "the server has too many connections; try again later"),
        ] {
            let (server, endpoint) = try await Self.whep {
                $0.maxConnectionsPerAddress = perAddress
                $0.maxConnections = total
                $0.requestTimeoutNs = 600_000_000_000 // the holder's request never completes; it must outlive the test
            }
            let holder = try await Self.holding(server.port)
            let refused = try await TestClient.connect(port: server.port, group: MultiThreadedEventLoopGroup.singleton)
            #expect(try await refused.closed(), "\(refused.text)")
            #expect(
                refused.text.hasPrefix("HTTP/1.1 \(status)\r\n") && refused.text.contains("Retry-After: 5")
                    && refused.text.hasSuffix("\r\n\r\n\(text)\n"), "\(refused.text)")
            let r = endpoint.refused
            #expect(r.evicted == 0 && r.perAddressConnectionLimit == (perAddress == 1 ? 1 : 0) && r.connectionLimit == (total == 1 ? 1 : 0), "\(r)")
            let holderClosed = try await holder.closed(within: 0)
            #expect(!holderClosed, "the holder keeps its connection")
            await server.stop()
        }
    }

    @Test func anIdleWHEPConnectionIsEvictedForANewcomer() async throws {
        let (server, endpoint) = try await Self.whep { $0.maxConnectionsPerAddress = 1 }
        let group = MultiThreadedEventLoopGroup.singleton
        let idle = try await TestClient.connect(port: server.port, group: group)
        let newcomer = try await TestClient.connect(port: server.port, group: group)
        #expect(try await idle.closed(), "the idle connection is evicted")
        #expect(idle.text.isEmpty)
        try await newcomer.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try await newcomer.received("HTTP/1.1 200 OK"), "\(newcomer.text.prefix(200))")
        #expect(endpoint.refused.evicted == 1 && endpoint.refused.perAddressConnectionLimit == 0, "\(endpoint.refused)")
        await server.stop()
    }

    @Test func aSlowWHEPRequestIsClosedAtTheRequestTimeout() async throws {
        let (server, endpoint) = try await Self.whep { $0.requestTimeoutNs = 500_000_000 }
        let start = ContinuousClock.now
        let slow = try await TestClient.connect(port: server.port, group: MultiThreadedEventLoopGroup.singleton)
        // On a loaded machine the timeout may close the connection before this write gets out: that is the
        // outcome under test too (the elapsed time below still proves it was the timeout).
        do { try await slow.send("GET / HTTP/1.1\r\nHost: 127.0") } catch {}
        #expect(try await slow.closed(), "still open 30 s on")
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(500), "closed before the request timeout: \(elapsed)")
        #expect(endpoint.refused.timeouts == 1 && slow.text.isEmpty, "\(endpoint.refused) \(slow.text)")
        await server.stop()
    }
}

/// Greets a connection, and closes it `deadlineNs` after it opens (recording the expiry in `expired`).
private final class Greeter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let deadlineNs: Int64?
    let expired: Events
    var deadline = ConnectionDeadline()
    init(deadlineNs: Int64?, expired: Events) {
        self.deadlineNs = deadlineNs
        self.expired = expired
    }
    func handlerAdded(context: ChannelHandlerContext) {
        if let deadlineNs {
            let expired = self.expired
            deadline.arm(context.channel, in: deadlineNs) { expired.record(.evicted) }
        }
    }
    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(NIOAny(ByteBuffer(string: "hello\n")), promise: nil)
        context.fireChannelActive()
    }
    func handlerRemoved(context: ChannelHandlerContext) { deadline.cancel() }
}
