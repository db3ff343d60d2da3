import RTP
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// A WebRTC connection's way out, the sending half of a `DTLSSRTPTransport`: its one UDP socket (BUNDLE,
/// rtcp-mux), the remote address ICE selected, and the outbound SRTP session that protects what the `RTPSender`
/// sends. Sending is safe from any thread (the encoder's, the transport's); nothing goes out before a remote is
/// selected, and RTP/RTCP not before SRTP keys.
final class SRTPTransport: RTPTransport {
    let socket: UDPSocket
    private struct State {
        var open = true
        var remote: SocketAddress?
        var outbound: SRTPSession?
        /// One packet, protected in place (allocated once).
        var buffer: [UInt8]
    }
    private let state: Mutex<State>

    init(socket: UDPSocket, maxPacket: Int) {
        self.socket = socket
        state = Mutex(State(buffer: [UInt8](repeating: 0, count: maxPacket + SRTPSession.overhead)))
    }

    func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 { protectAndSend(packet, rtcp: false) }
    func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { protectAndSend(packet, rtcp: true) }

    private func protectAndSend(_ packet: UnsafeRawBufferPointer, rtcp: Bool) -> Int32 {
        state.withLock { s -> Int32 in
            guard s.open, let outbound = s.outbound, let remote = s.remote else { return 0 }
            guard packet.count + SRTPSession.overhead <= s.buffer.count else { return EMSGSIZE }
            return s.buffer.withUnsafeMutableBytes { b -> Int32 in
                b.baseAddress!.copyMemory(from: packet.baseAddress!, byteCount: packet.count)
                guard let n = outbound.protect(b, length: packet.count, rtcp: rtcp) else { return EINVAL }
                return socket.send(UnsafeRawBufferPointer(rebasing: b[0..<n]), to: remote)
            }
        }
    }

    /// Hands `produce` a way to send datagrams (DTLS records) to the selected remote; without one they are
    /// produced and dropped.
    func sendSelected(_ produce: ((UnsafeRawBufferPointer) -> Void) -> Void) {
        state.withLock { s in
            guard let remote = s.remote else {
                produce { _ in }
                return
            }
            produce { _ = socket.send($0, to: remote) }
        }
    }

    /// A successful check from `address`: selects it when nominated or when nothing is selected yet. Returns
    /// whether it is the selected one now.
    func select(_ address: SocketAddress, nominated: Bool) -> Bool {
        state.withLock { s in
            guard nominated || s.remote == nil else { return false }
            s.remote = address
            return true
        }
    }

    /// DTLS is up: RTP and RTCP go out protected by `outbound` from now on.
    func connect(_ outbound: SRTPSession) { state.withLock { $0.outbound = outbound } }

    var isConnected: Bool { state.withLock { $0.open && $0.outbound != nil } }

    /// The selected remote as text, if any.
    var remoteText: String? { state.withLock { $0.remote?.text } }

    /// Stops sending and closes the socket (idempotent).
    func shutDown() {
        state.withLock { s in
            s.open = false
            s.outbound = nil
        }
        socket.close()
    }
}
