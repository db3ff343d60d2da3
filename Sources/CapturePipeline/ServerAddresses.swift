import Foundation
import SystemIO

/// HOST:PORT a server listens on (IPv6 in brackets); port 0 lets the system pick. The servers' (WHEP, RTSP)
/// address, beside `parseHostPort` and `StreamTarget`.
package struct ListenAddress: Sendable, CustomStringConvertible {
    package var host: String, port: Int
    /// HOST:PORT, an IPv6 host in brackets.
    package var description: String { bracketedHost(host) + ":\(port)" }
    package var isWildcard: Bool { host == "0.0.0.0" || host == "::" }
    /// The host for a URL to this address: a wildcard is none, so the first of `candidates` (else 127.0.0.1); an
    /// IPv6 address in brackets.
    package func urlHost(_ candidates: [String]) -> String {
        bracketedHost(isWildcard ? (candidates.first ?? "127.0.0.1") : host)
    }
    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    package init?(_ s: String) {
        guard let (h, p) = parseHostPort(s, ports: 0...65535) else { return nil }
        host = h
        port = p
    }
    /// True for a numeric IPv4 or IPv6 address (no brackets), what a server may listen on.
    package static func isAddress(_ host: String) -> Bool { ListenAddress(host.contains(":") ? "[\(host)]:0" : host + ":0") != nil }
}

/// A host as it goes before ":PORT" or into a URL: an IPv6 address in brackets, anything else as it is.
package func bracketedHost(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

/// IPv4 addresses of the interfaces that are up (loopback last), for candidates and URLs when listening on 0.0.0.0.
package func upIPv4InterfaceAddresses() -> [String] {
    guard let list = networkInterfaceAddresses() else { return ["127.0.0.1"] }
    let all = list.filter { $0.family == AF_INET && $0.isUp }
    return all.filter { !$0.isLoopback }.map(\.address) + all.filter(\.isLoopback).map(\.address)
}

/// Connections that fit under the descriptor limit (RLIMIT_NOFILE) beside the camera, `viewers` sockets and the
/// process's own: accepting past the limit would make accept fail (EMFILE) and the server stall.
package func connectionsWithinDescriptorLimit(viewers: Int) -> Int {
    guard let limit = try? ResourceLimits.openFiles() else { return 256 }
    let soft = Int(clamping: min(limit.soft, 1 << 20))
    return max(8, soft - 64 - viewers)
}
