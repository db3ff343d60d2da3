import Foundation
import CapturePipeline

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, in nanoseconds.
public func realtimeMinusMonotonicNs() -> Int64 {
    var r = timespec(), m = timespec()
    clock_gettime(CLOCK_REALTIME, &r); clock_gettime(CLOCK_MONOTONIC, &m)
    return (Int64(r.tv_sec) - Int64(m.tv_sec)) * 1_000_000_000 + (Int64(r.tv_nsec) - Int64(m.tv_nsec))
}

/// HOST:PORT for --listen (IPv6 in brackets); port 0 lets the system pick.
public struct ListenAddress: Sendable {
    public var host: String, port: Int
    public var isWildcard: Bool { host == "0.0.0.0" || host == "::" }
    public init?(_ s: String) {
        guard let (h, p) = parseHostPort(s, ports: 0...65535) else { return nil }
        host = h; port = p
    }
}

/// IPv4 addresses of the interfaces that are up (loopback last), for candidates when listening on 0.0.0.0.
public func interfaceAddresses() -> [String] {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0, let first = list else { return ["127.0.0.1"] }
    defer { freeifaddrs(list) }
    var out: [String] = [], loop: [String] = []
    var p: UnsafeMutablePointer<ifaddrs>? = first
    while let i = p {
        defer { p = i.pointee.ifa_next }
        guard let a = i.pointee.ifa_addr, Int32(a.pointee.sa_family) == AF_INET, i.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
        var buf = [CChar](repeating: 0, count: 64)
        var sin = UnsafeRawPointer(a).load(as: sockaddr_in.self)
        inet_ntop(AF_INET, &sin.sin_addr, &buf, 64)
        let s = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if i.pointee.ifa_flags & UInt32(IFF_LOOPBACK) != 0 { loop.append(s) } else { out.append(s) }
    }
    return out + loop
}

