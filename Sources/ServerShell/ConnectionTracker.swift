package import NIOCore
import Synchronization

/// A connection the shell admitted, as the tracker sees it: its channel, the address it counts against, and
/// whether (and since when) it may be closed to make room for a newcomer.
package protocol TrackedConnection: AnyObject, Sendable {
    /// The connection's channel (closed when the connection is evicted).
    var channel: any Channel { get }
    /// The client's address, as counted against the per-address limit.
    var address: String { get }
    /// Since when (monotonic ns) the connection may be closed for a newcomer; nil while it must not be. The
    /// one evictable longest goes first.
    var evictableSinceNs: Int64? { get }
}

/// The connection limits a server applies at admission, read afresh for each new connection.
package struct ConnectionLimits: Sendable, Equatable {
    /// Open connections in all.
    package var maxConnections: Int
    /// Open connections from one client address.
    package var maxConnectionsPerAddress: Int
    /// Open connections from one network (`network(address)`), or nil for no per-network limit.
    package var maxConnectionsPerNetwork: Int?
    /// Over the per-address or per-network limit, whether the newcomer evicts the connection of that address
    /// (or network) evictable longest (true), or is refused outright (false). Over the overall limit the one
    /// evictable longest of all is always evicted when there is one.
    package var evictsWithinAddress: Bool

    /// Limits of `maxConnections` in all and `maxConnectionsPerAddress` per address, `maxConnectionsPerNetwork`
    /// per network (nil: none); `evictsWithinAddress` as above.
    package init(maxConnections: Int, maxConnectionsPerAddress: Int, maxConnectionsPerNetwork: Int? = nil, evictsWithinAddress: Bool) {
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.maxConnectionsPerNetwork = maxConnectionsPerNetwork
        self.evictsWithinAddress = evictsWithinAddress
    }
}

/// Why a new connection was refused.
package enum AdmissionRefusal: Sendable, Equatable {
    /// The server has `maxConnections` open and none of them may be evicted.
    case full
    /// The client's address has `maxConnectionsPerAddress` open (and none of them may be evicted, where that is allowed).
    case address
    /// The client's network has `maxConnectionsPerNetwork` open (and none of them may be evicted).
    case network
}

/// What admission did besides admitting, for a server's counters.
package enum AdmissionEvent: Sendable, Equatable {
    /// A newcomer was refused, for this reason.
    case refused(AdmissionRefusal)
    /// An open connection was closed to make room for a newcomer.
    case evicted
}

/// Open connections, overall, per client address and per network, against `ConnectionLimits`: admits a
/// newcomer, evicts the connection evictable longest to make room for it when a limit is reached (within the
/// limit's address or network), or refuses it. Thread-safe; `release` when a connection closes.
package final class ConnectionTracker<Connection: TrackedConnection>: Sendable {
    private struct Member {
        let connection: Connection
        let network: String
    }
    private struct State {
        var members: [ObjectIdentifier: Member] = [:]
        var perAddress: [String: Int] = [:]
        var perNetwork: [String: Int] = [:]
    }
    private let state = Mutex(State())
    private let limits: @Sendable () -> ConnectionLimits
    private let network: @Sendable (String) -> String
    private let events: @Sendable (AdmissionEvent) -> Void

    /// A tracker applying `limits()` (read at each admission), counting addresses in `network(address)` for the
    /// per-network limit, and telling `events` of each refusal and eviction.
    package init(
        limits: @escaping @Sendable () -> ConnectionLimits, network: @escaping @Sendable (String) -> String = { $0 },
        events: @escaping @Sendable (AdmissionEvent) -> Void = { _ in }
    ) {
        self.limits = limits
        self.network = network
        self.events = events
    }

    /// Admits `connection` (counted until `release`), possibly evicting another (whose channel is closed), or
    /// refuses it (not counted).
    package func admit(_ connection: Connection) -> AdmissionRefusal? {
        let limits = limits()
        let address = connection.address
        let network = limits.maxConnectionsPerNetwork == nil ? address : self.network(address)
        let (refusal, victim) = state.withLock { s -> (AdmissionRefusal?, Connection?) in
            // The member evictable longest among those `where` picks.
            func oldest(_ where: (Member) -> Bool) -> ObjectIdentifier? {
                var best: (ObjectIdentifier, Int64)?
                for (id, m) in s.members {
                    guard let since = m.connection.evictableSinceNs, `where`(m) else { continue }
                    if best == nil || since < best!.1 { best = (id, since) }
                }
                return best?.0
            }
            var victim: ObjectIdentifier?
            if s.perAddress[address, default: 0] >= limits.maxConnectionsPerAddress {
                guard limits.evictsWithinAddress, let v = oldest({ $0.connection.address == address }) else { return (.address, nil) }
                victim = v
            } else if let perNetwork = limits.maxConnectionsPerNetwork, s.perNetwork[network, default: 0] >= perNetwork {
                guard limits.evictsWithinAddress, let v = oldest({ $0.network == network }) else { return (.network, nil) }
                victim = v
            } else if s.members.count >= limits.maxConnections {
                guard let v = oldest({ _ in true }) else { return (.full, nil) }
                victim = v
            }
            let evicted = victim.flatMap { Self.remove($0, from: &s) }?.connection
            s.members[ObjectIdentifier(connection)] = Member(connection: connection, network: network)
            s.perAddress[address, default: 0] += 1
            s.perNetwork[network, default: 0] += 1
            return (nil, evicted)
        }
        if let refusal { events(.refused(refusal)) }
        if let victim {
            events(.evicted)
            victim.channel.close(promise: nil)
        }
        return refusal
    }

    private static func remove(_ id: ObjectIdentifier, from s: inout State) -> Member? {
        guard let m = s.members.removeValue(forKey: id) else { return nil }
        let a = s.perAddress[m.connection.address, default: 1] - 1
        s.perAddress[m.connection.address] = a > 0 ? a : nil
        let n = s.perNetwork[m.network, default: 1] - 1
        s.perNetwork[m.network] = n > 0 ? n : nil
        return m
    }

    /// `connection` closed (one evicted was counted out when it was evicted).
    package func release(_ connection: Connection) { _ = state.withLock { Self.remove(ObjectIdentifier(connection), from: &$0) } }

    /// The connections open now.
    package var openConnections: Int { state.withLock { $0.members.count } }

    /// Every connection open now (to close them, or to look at them).
    package var connections: [Connection] { state.withLock { $0.members.values.map(\.connection) } }
}
