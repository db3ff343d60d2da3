import Foundation
import CapturePipeline
import SystemIO

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, in nanoseconds.
package func realtimeMinusMonotonicNs() -> Int64 {
    var r = timespec(), m = timespec()
    clock_gettime(CLOCK_REALTIME, &r)
    clock_gettime(CLOCK_MONOTONIC, &m)
    return (Int64(r.tv_sec) - Int64(m.tv_sec)) * 1_000_000_000 + (Int64(r.tv_nsec) - Int64(m.tv_nsec))
}

/// HOST:PORT for --listen (IPv6 in brackets); port 0 lets the system pick.
package struct ListenAddress: Sendable {
    package var host: String, port: Int
    package var isWildcard: Bool { host == "0.0.0.0" || host == "::" }
    package init?(_ s: String) {
        guard let (h, p) = parseHostPort(s, ports: 0...65535) else { return nil }
        host = h
        port = p
    }
}

/// IPv4 addresses of the interfaces that are up (loopback last), for candidates when listening on 0.0.0.0.
public func interfaceAddresses() -> [String] {
    guard let list = networkInterfaceAddresses() else { return ["127.0.0.1"] }
    let all = list.filter { $0.family == AF_INET && $0.isUp }
    return all.filter { !$0.isLoopback }.map(\.address) + all.filter(\.isLoopback).map(\.address)
}
