import NIOCore
import Synchronization
import SystemIO
import RTP
import VideoCaptureCommons
#if canImport(Glibc)
    import Glibc
#endif

/// The server's UDP port pair (RTP on an even port, RTCP on the next), shared by every UDP client as
/// GStreamer's rtsp-server and MediaMTX do: media leaves from `server_port`, and receiver reports arrive there
/// and are matched to a session by their source address.
final class UDPPorts: Sendable {
    let rtp: UDPSocket
    let rtcp: UDPSocket
    let rtpPort: Int
    let rtcpPort: Int
    let family: Int32

    /// Binds `host`:`port` and `port + 1`; port 0 picks a free even port whose successor is free too.
    init(host: String, port: Int) throws(RTSPError) {
        guard port == 0 || (1...65534).contains(port) else { throw RTSPError(.invalidConfiguration, "the UDP port \(port) is not 0 or 1...65534") }
        guard let probe = SystemIO.SocketAddress(host: host, port: 0) else {
            throw RTSPError(.invalidConfiguration, "cannot bind UDP on \"\(host.prefix(64))\": give an IPv4 or IPv6 address")
        }
        family = probe.family
        var lastErrno: Int32 = 0
        for _ in 0..<(port == 0 ? 64 : 1) {
            do throws(SystemError) {
                let a = try UDPSocket(family: probe.family), b = try UDPSocket(family: probe.family)
                var first = probe
                first.port = UInt16(port)
                try a.bind(first)
                let p = Int(try a.localAddress().port)
                guard p % 2 == 0 || port != 0, p < 65535 else {
                    a.close()
                    b.close()
                    continue
                }
                var second = probe
                second.port = UInt16(p + 1)
                do throws(SystemError) { try b.bind(second) } catch {
                    a.close()
                    b.close()
                    lastErrno = error.errno
                    if port != 0 { break }
                    continue
                }
                try? b.setOption(level: SOL_SOCKET, SO_RCVBUF, 256 * 1024)
                rtp = a
                rtcp = b
                rtpPort = p
                rtcpPort = p + 1
                return
            } catch {
                lastErrno = error.errno
                if port != 0 { break }
            }
        }
        throw RTSPError(
            .cannotListen,
            "cannot bind the UDP ports \(port == 0 ? "(an even/odd pair)" : "\(port)-\(port + 1)") on \(host): \(String(cString: strerror(lastErrno)))"
        )
    }

    func close() {
        rtp.close()
        rtcp.close()
    }
}

/// RTP and RTCP of one UDP client, sent from the shared ports to its `client_port` pair.
final class UDPClientTransport: RTPTransport {
    let ports: UDPPorts
    let rtpAddress: SystemIO.SocketAddress
    let rtcpAddress: SystemIO.SocketAddress
    private let closed = Atomic<Bool>(false)

    init(ports: UDPPorts, rtp: SystemIO.SocketAddress, rtcp: SystemIO.SocketAddress) {
        self.ports = ports
        rtpAddress = rtp
        rtcpAddress = rtcp
    }

    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 {
        closed.load(ordering: .acquiring) ? 0 : ports.rtp.send(packet, to: rtpAddress)
    }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 {
        closed.load(ordering: .acquiring) ? 0 : ports.rtcp.send(packet, to: rtcpAddress)
    }
    func close() { closed.store(true, ordering: .releasing) }
}

/// RTP and RTCP of one TCP client, interleaved on its RTSP connection (RFC 2326 §10.12: `$`, the channel, a
/// 16-bit length, the packet). The packets of one frame are gathered into one buffer and written at once.
/// Bounded: bytes handed to the connection but not yet written are counted, and `isCongested` says when a
/// frame should be dropped instead (a slow client never blocks the encoder).
final class InterleavedTransport: RTPTransport {
    let channel: any Channel
    let rtpChannel: UInt8
    let rtcpChannel: UInt8
    let maxQueuedBytes: Int
    /// Bytes passed to the event loop and not yet in the channel's own buffer.
    private let queued = Atomic<Int>(0)
    private let collecting = Mutex<ByteBuffer?>(nil)
    private let allocator = ByteBufferAllocator()
    private let closed = Atomic<Bool>(false)

    init(channel: any Channel, rtpChannel: UInt8, rtcpChannel: UInt8, maxQueuedBytes: Int) {
        self.channel = channel
        self.rtpChannel = rtpChannel
        self.rtcpChannel = rtcpChannel
        self.maxQueuedBytes = maxQueuedBytes
    }

    /// True while the connection's send buffer is over its high-water mark or too much waits to be written.
    var isCongested: Bool { !channel.isWritable || queued.load(ordering: .relaxed) > maxQueuedBytes }

    /// The next packets (one frame's) gather in one buffer until `endFrame`.
    func beginFrame(bytes: Int) {
        let b = allocator.buffer(capacity: bytes + bytes / 16 + 64)
        collecting.withLock { $0 = b }
    }
    /// Writes what `beginFrame` gathered.
    func endFrame() {
        if let b = collecting.withLock({ c -> ByteBuffer? in
            defer { c = nil }
            return c
        }), b.readableBytes > 0 {
            enqueue(b)
        }
    }

    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 { frame(rtpChannel, packet) }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { frame(rtcpChannel, packet) }

    private func frame(_ ch: UInt8, _ packet: UnsafeRawBufferPointer) -> Int32 {
        guard packet.count <= 65535, !closed.load(ordering: .acquiring) else { return 0 }
        let header: (UInt8, UInt8, UInt8, UInt8) = (0x24, ch, UInt8(packet.count >> 8), UInt8(packet.count & 0xff))
        let appended = collecting.withLock { c -> Bool in
            guard c != nil, ch == rtpChannel else { return false }
            c!.writeMultipleIntegers(header.0, header.1, header.2, header.3)
            c!.writeBytes(packet)
            return true
        }
        if !appended {
            var b = allocator.buffer(capacity: packet.count + 4)
            b.writeMultipleIntegers(header.0, header.1, header.2, header.3)
            b.writeBytes(packet)
            enqueue(b)
        }
        return 0
    }

    private func enqueue(_ b: ByteBuffer) {
        let n = b.readableBytes
        queued.add(n, ordering: .relaxed)
        channel.eventLoop.execute { [self] in
            queued.subtract(n, ordering: .relaxed)
            channel.writeAndFlush(b, promise: nil)
        }
    }

    func close() { closed.store(true, ordering: .releasing) }
}
