import Foundation
import CapturePipeline
import SystemIO

/// HOST:PORT for --listen (IPv6 in brackets); port 0 lets the system pick.
package struct ListenAddress: Sendable {
    package var host: String, port: Int
    package var isWildcard: Bool { host == "0.0.0.0" || host == "::" }
    /// The host for a URL to this address: a wildcard is none, so the first of `candidates` (else 127.0.0.1); an
    /// IPv6 address in brackets.
    package func urlHost(_ candidates: [String]) -> String {
        let host = isWildcard ? (candidates.first ?? "127.0.0.1") : host
        return host.contains(":") ? "[\(host)]" : host
    }
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
