import SystemIO
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// RTP and RTCP over UDP sockets of their own (through SystemIO), both bound on the interface that reaches the
/// destination: media to `host:port`, RTCP to the RTCP port (or the same with rtcp-mux) from the socket where
/// the receiver's feedback arrives, obeyed only from the receiver's own ports and the sources named in
/// `feedbackFrom`, or when none are named also from the one port of the destination latched by its first
/// reports (`FeedbackFilter`).
final class UDPTransport: RTPTransport {
    private let rtpSocket: UDPSocket
    private let rtcpSocket: UDPSocket
    private let rtpAddress: SocketAddress
    private let rtcpAddress: SocketAddress
    /// Read and latched on the feedback thread only (a lock for `Sendable`).
    private let filter: Mutex<FeedbackFilter>
    /// The local port receivers send RTCP to.
    let localRTCPPort: Int

    init(_ c: RTPSender.Configuration) throws(RTPError) {
        guard (1...65535).contains(c.port) else { throw RTPError(.invalidConfiguration, "RTP port \(c.port) is not 1...65535") }
        let rtcpPort = c.rtcpMux ? c.port : (c.rtcpPort ?? c.port + 1)
        guard (1...65535).contains(rtcpPort) else { throw RTPError(.invalidConfiguration, "RTCP port \(rtcpPort) is not 1...65535") }
        guard (0.0...1.0).contains(c.dropRate) else { throw RTPError(.invalidConfiguration, "drop rate \(c.dropRate) is not 0...1") }
        guard let a = SocketAddress(host: c.host, port: c.port), let r = SocketAddress(host: c.host, port: rtcpPort) else {
            throw RTPError(.invalidConfiguration, "cannot resolve \(c.host): give an IPv4 or IPv6 address")
        }
        var trusted: [SocketAddress] = [], exact = [a, r]
        for h in c.feedbackFrom {
            if let f = SocketAddress(host: h, port: 0) {
                trusted.append(f)
            } else if let (host, port) = UDPTransport.hostAndPort(h), let f = SocketAddress(host: host, port: port) {
                exact.append(f)
            } else {
                throw RTPError(
                    .invalidConfiguration, "cannot take feedback from \"\(h.prefix(64))\": give an IPv4 or IPv6 address, or ADDRESS:PORT")
            }
        }
        // The receiver's RTCP comes from its RTCP port (or its one socket, the RTP port), or from a socket of its
        // own, latched by its first reports unless the owner named its sources; any other port of its host is
        // another program's.
        filter = Mutex(FeedbackFilter(exact: exact, anyPort: trusted, destination: c.feedbackFrom.isEmpty ? a : nil))
        rtpAddress = a
        rtcpAddress = r
        let s1: UDPSocket, s2: UDPSocket
        do throws(SystemError) {
            s1 = try UDPSocket(family: a.family)
            s2 = c.rtcpMux ? s1 : try UDPSocket(family: a.family)
        } catch { throw RTPError(.socketFailed, "cannot create a UDP socket", errno: error.errno) }
        // Bind our RTCP socket (receivers answer to its address) on the interface that reaches the destination,
        // not on every interface: a stream to 127.0.0.1 listens on loopback only.
        var local = UDPSocket.localAddress(toward: a) ?? SocketAddress(host: a.family == AF_INET ? "0.0.0.0" : "::", port: 0)!
        local.port = UInt16(c.localRTCPPort)
        try? s2.setOption(level: SOL_SOCKET, SO_RCVBUF, 64 * 1024) // feedback is small: a storm queues little, so it stops when the storm does
        do throws(SystemError) { try s2.bind(local) } catch {
            throw RTPError(
                .socketFailed, "cannot listen for RTCP on port \(c.localRTCPPort)\(error.errno == EADDRINUSE ? ": the port is in use" : "")",
                errno: error.errno)
        }
        if !c.rtcpMux {
            // The RTP socket on the same interface (any port): not on every interface, where anything sent to
            // its port from anywhere would reach it.
            var media = local
            media.port = 0
            do throws(SystemError) { try s1.bind(media) } catch {
                throw RTPError(.socketFailed, "cannot bind the RTP socket to \(media.hostText)", errno: error.errno)
            }
        }
        localRTCPPort = Int((try? s2.localAddress())?.port ?? local.port)
        rtpSocket = s1
        rtcpSocket = s2
    }

    /// `HOST:PORT` or `[V6]:PORT` → its parts (the port 1…65535); nil otherwise.
    static func hostAndPort(_ s: String) -> (String, Int)? {
        guard let parts = splitHostPort(s), let p = Int(parts.port), (1...65535).contains(p), !parts.host.isEmpty else { return nil }
        return (String(parts.host), p)
    }

    /// The local addresses of the RTP and RTCP sockets ("host:port"; tests).
    var localAddresses: (rtp: String, rtcp: String) {
        func text(_ s: UDPSocket) -> String {
            guard let a = try? s.localAddress() else { return "?" }
            return "\(a.hostText):\(a.port)"
        }
        return (text(rtpSocket), text(rtcpSocket))
    }

    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 { rtpSocket.send(packet, to: rtpAddress) }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { rtcpSocket.send(packet, to: rtcpAddress) }

    /// Waits up to `timeoutMs` for feedback, then hands every queued datagram from a trusted address to
    /// `handle` (each checked before it is parsed), tells `latched` the port the first reports about `ssrc` from
    /// another port of the destination latched (before handing that datagram on), and counts the others with
    /// `stranger`.
    func receiveFeedback(
        into buffer: UnsafeMutableRawBufferPointer, timeoutMs: Int32, ssrc: UInt32,
        handle: (UnsafeRawBufferPointer) -> Void, latched: (Int) -> Void, stranger: () -> Void
    ) {
        guard rtcpSocket.waitUntilReadable(timeoutMs: timeoutMs) else { return }
        var from = SocketAddress()
        while let n = rtcpSocket.receive(into: buffer, from: &from), n > 0 {
            let datagram = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            switch filter.withLock({ $0.judge(from, datagram, ssrc: ssrc) }) {
            case .stranger:
                stranger()
                continue
            case .latched(let port): latched(Int(port))
            case .accepted: break
            }
            handle(datagram)
        }
    }

    func close() {
        rtpSocket.close()
        rtcpSocket.close()
    }
}

/// `HOST:PORT` or `[V6]:PORT` split into the host (without brackets) and the port's text, neither checked; nil
/// when there is no such split (no colon, or more than one outside brackets).
package func splitHostPort(_ s: String) -> (host: Substring, port: Substring)? {
    if s.hasPrefix("["), let close = s.firstIndex(of: "]"), s[close...].hasPrefix("]:") {
        return (s[s.index(after: s.startIndex)..<close], s[s.index(close, offsetBy: 2)...])
    }
    if let colon = s.firstIndex(of: ":"), s.lastIndex(of: ":") == colon {
        return (s[..<colon], s[s.index(after: colon)...])
    }
    return nil
}
