#if canImport(Glibc)
    package import Glibc
#endif
import Synchronization

/// An IPv4 or IPv6 socket address (address and port), as the kernel takes it.
package struct SocketAddress: Sendable {
    package var storage: sockaddr_storage
    package var length: socklen_t

    /// An empty address (length 0), to be filled by `recvfrom`.
    package init() {
        storage = sockaddr_storage()
        length = 0
    }

    /// `host` as a numeric IPv4 or IPv6 address (no name lookup) with `port`; nil for anything else.
    package init?(host: String, port: Int) {
        guard (0...65535).contains(port) else { return nil }
        storage = sockaddr_storage()
        var a4 = in_addr(), a6 = in6_addr()
        if inet_pton(AF_INET, host, &a4) == 1 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = in_port_t(UInt16(port).bigEndian)
            sin.sin_addr = a4
            length = Self.store(sin, in: &storage)
        } else if inet_pton(AF_INET6, host, &a6) == 1 {
            var sin = sockaddr_in6()
            sin.sin6_family = sa_family_t(AF_INET6)
            sin.sin6_port = in_port_t(UInt16(port).bigEndian)
            sin.sin6_addr = a6
            length = Self.store(sin, in: &storage)
        } else {
            return nil
        }
    }

    /// Writes `address` (a `sockaddr_in` or `sockaddr_in6`) at the start of `storage`; returns its length.
    private static func store<Address>(_ address: Address, in storage: inout sockaddr_storage) -> socklen_t {
        withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: Address.self) }
        return socklen_t(MemoryLayout<Address>.size)
    }

    package var family: Int32 { Int32(storage.ss_family) }

    /// The port (host byte order); setting it keeps the address.
    package var port: UInt16 {
        get { parts.port }
        set {
            let f = family
            withUnsafeMutableBytes(of: &storage) { raw in
                if f == AF_INET6 {
                    raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port = in_port_t(newValue.bigEndian)
                } else {
                    raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port = in_port_t(newValue.bigEndian)
                }
            }
        }
    }

    /// The address bytes and port. An IPv4 peer on a dual-stack socket (::ffff:a.b.c.d) is an IPv4 address to
    /// STUN, to feedback checks and to people.
    package var parts: (host: [UInt8], port: UInt16) {
        var a = storage
        let family = self.family
        return withUnsafeBytes(of: &a) { raw in
            if family == AF_INET6 {
                let s = raw.load(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: s.sin6_addr) { Array($0) }
                if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                    return (Array(bytes[12..<16]), UInt16(bigEndian: s.sin6_port))
                }
                return (bytes, UInt16(bigEndian: s.sin6_port))
            }
            let s = raw.load(as: sockaddr_in.self)
            return (withUnsafeBytes(of: s.sin_addr) { Array($0) }, UInt16(bigEndian: s.sin_port))
        }
    }

    /// Same family, address and port.
    package func isSame(as other: SocketAddress) -> Bool {
        storage.ss_family == other.storage.ss_family && parts == other.parts
    }

    /// "a.b.c.d" or the IPv6 text, without the port.
    package var hostText: String {
        let bytes = parts.host
        return bytes.count == 4 ? bytes.map(String.init).joined(separator: ".") : SocketAddress.text(ipv6: bytes)
    }

    /// "a.b.c.d:port" or "[v6]:port".
    package var text: String {
        let (bytes, port) = parts
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") + ":\(port)" }
        return "[" + SocketAddress.text(ipv6: bytes) + "]:\(port)"
    }

    /// inet_ntop of 16 address bytes.
    static func text(ipv6 bytes: [UInt8]) -> String {
        var buf = [CChar](repeating: 0, count: 64)
        var copy = bytes
        inet_ntop(AF_INET6, &copy, &buf, 64)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A non-blocking UDP socket (IPv4 or IPv6), closed once by `close()` or when released. Sends and receives
/// never wait; `waitUntilReadable` does, with a timeout. Safe to use from several threads (the kernel
/// serialises datagrams); closing while another thread uses it is the owner's to prevent.
package final class UDPSocket: Sendable {
    package let descriptor: Int32
    private let closed = Atomic<Bool>(false)

    /// A UDP socket of `family` (AF_INET or AF_INET6), close-on-exec.
    package init(family: Int32) throws(SystemError) {
        descriptor = try SystemCall.retrying("socket") { Glibc.socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
    }

    deinit { close() }

    /// Closes the socket (idempotent; never retried: Linux frees the descriptor even on EINTR).
    package func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Glibc.close(descriptor)
    }

    package func bind(_ address: SocketAddress) throws(SystemError) {
        var a = address
        _ = try SystemCall.retrying("bind") {
            withUnsafePointer(to: &a.storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(descriptor, $0, a.length) } }
        }
    }

    /// connect(2): fixes the destination (and so the local address the kernel routes from).
    package func connect(_ address: SocketAddress) throws(SystemError) {
        var a = address
        _ = try SystemCall.retrying("connect") {
            withUnsafePointer(to: &a.storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, a.length) } }
        }
    }

    /// setsockopt(2) with an Int32 value (SO_RCVBUF, SO_SNDBUF, …).
    package func setOption(level: Int32, _ name: Int32, _ value: Int32) throws(SystemError) {
        var v = value
        _ = try SystemCall.retrying("setsockopt") { setsockopt(descriptor, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// getsockopt(2) of an Int32 value.
    package func option(level: Int32, _ name: Int32) throws(SystemError) -> Int32 {
        var v: Int32 = 0
        var n = socklen_t(MemoryLayout<Int32>.size)
        _ = try SystemCall.retrying("getsockopt") { getsockopt(descriptor, level, name, &v, &n) }
        return v
    }

    /// The address the socket is bound to (getsockname).
    package func localAddress() throws(SystemError) -> SocketAddress {
        var a = SocketAddress()
        a.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try SystemCall.retrying("getsockname") {
            withUnsafeMutablePointer(to: &a.storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &a.length) }
            }
        }
        return a
    }

    /// Sends one datagram without waiting. Returns 0 or errno (EAGAIN: the send buffer is full).
    package func send(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) -> Int32 {
        var a = address
        return SystemCall.errno {
            withUnsafePointer(to: &a.storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, a.length)
                }
            }
        }
    }

    /// Receives one queued datagram into `buffer` without waiting: its length and sender, or nil when none is
    /// queued (or the socket failed; the next poll says so again).
    package func receive(into buffer: UnsafeMutableRawBufferPointer, from sender: inout SocketAddress) -> Int? {
        sender.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let n =
            (try? SystemCall.retrying("recvfrom") {
                withUnsafeMutablePointer(to: &sender.storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT), $0, &sender.length)
                    }
                }
            }) ?? -1
        return n >= 0 ? n : nil
    }

    /// Waits up to `timeoutMs` for a datagram (poll). True when one is queued (or the socket has an error to
    /// report); false on timeout. A signal ends the wait early (false), as a timeout would.
    package func waitUntilReadable(timeoutMs: Int32) -> Bool {
        var fds = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&fds, 1, timeoutMs) > 0
    }

    /// The local address the kernel would send from toward `destination` (a routing lookup by connecting a
    /// UDP socket; nothing is sent), port 0; nil when there is no route.
    package static func localAddress(toward destination: SocketAddress) -> SocketAddress? {
        guard let probe = try? UDPSocket(family: destination.family) else { return nil }
        defer { probe.close() }
        guard (try? probe.connect(destination)) != nil, var local = try? probe.localAddress() else { return nil }
        local.port = 0
        return local
    }
}

/// One address of a network interface.
package struct InterfaceAddress: Sendable, Equatable {
    package var name: String
    /// AF_INET or AF_INET6.
    package var family: Int32
    /// Numeric text ("192.168.1.2", "fe80::1").
    package var address: String
    package var isUp: Bool
    package var isLoopback: Bool
    /// The IPv4 broadcast address of the interface's network ("192.168.1.255"), if it has one.
    package var broadcast: String? = nil
}

/// The IPv4 and IPv6 addresses of the system's interfaces (getifaddrs); nil when they cannot be listed.
package func networkInterfaceAddresses() -> [InterfaceAddress]? {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0, let first = list else { return nil }
    defer { freeifaddrs(list) }
    var out: [InterfaceAddress] = []
    var p: UnsafeMutablePointer<ifaddrs>? = first
    while let i = p {
        defer { p = i.pointee.ifa_next }
        guard let a = i.pointee.ifa_addr else { continue }
        let family = Int32(a.pointee.sa_family)
        var buf = [CChar](repeating: 0, count: 64)
        if family == AF_INET {
            var sin = UnsafeRawPointer(a).load(as: sockaddr_in.self)
            inet_ntop(AF_INET, &sin.sin_addr, &buf, 64)
        } else if family == AF_INET6 {
            var sin = UnsafeRawPointer(a).load(as: sockaddr_in6.self)
            inet_ntop(AF_INET6, &sin.sin6_addr, &buf, 64)
        } else {
            continue
        }
        let flags = i.pointee.ifa_flags
        var broadcast: String?
        if family == AF_INET, flags & UInt32(IFF_BROADCAST) != 0, let b = i.pointee.ifa_ifu.ifu_broadaddr, Int32(b.pointee.sa_family) == AF_INET {
            var sin = UnsafeRawPointer(b).load(as: sockaddr_in.self)
            var text = [CChar](repeating: 0, count: 64)
            inet_ntop(AF_INET, &sin.sin_addr, &text, 64)
            broadcast = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        out.append(
            InterfaceAddress(
                name: String(cString: i.pointee.ifa_name), family: family,
                address: String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                isUp: flags & UInt32(IFF_UP) != 0, isLoopback: flags & UInt32(IFF_LOOPBACK) != 0, broadcast: broadcast))
    }
    return out
}

/// poll(2) over many UDP sockets (one thread serving many connections), its descriptor array kept between calls:
/// no allocation once it has grown to the number of sockets.
package struct SocketPoll {
    private var fds: [pollfd] = []
    package init() {}

    /// Waits up to `timeoutMs` until one of `sockets` is readable (or has an error); `isReadable(i)` then says
    /// which. Interrupted by a signal: returns as if nothing were readable.
    package mutating func wait(_ sockets: [UDPSocket], timeoutMs: Int32) {
        fds.removeAll(keepingCapacity: true)
        for s in sockets { fds.append(pollfd(fd: s.descriptor, events: Int16(POLLIN), revents: 0)) }
        if poll(&fds, nfds_t(fds.count), timeoutMs) <= 0 {
            for i in fds.indices { fds[i].revents = 0 }
        }
    }

    /// Whether socket `i` of the last `wait` has something to read (or an error to collect).
    package func isReadable(_ i: Int) -> Bool { i < fds.count && fds[i].revents != 0 }
}
