import Foundation
import Testing
import TestSupport
@testable import RTSPServer

/// A blocking TCP client on loopback for the listener's tests: each read waits for bytes or the close, at most 30 s.
final class TestTCP {
    let fd: Int32
    private(set) var received: [UInt8] = []
    private(set) var closed = false
    var text: String { String(decoding: received, as: UTF8.self) }

    init(port: Int) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = withLoopbackAddress(port: port) { connect(fd, $0, $1) }
    }
    deinit { close(fd) }

    func send(_ s: String) { _ = Array(s.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }

    /// Reads until `done` holds of the text, the server closes, or a read waits 30 s.
    @discardableResult func read(until done: (String) -> Bool = { _ in false }) -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !done(text) && !closed {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                received += buffer[0..<n]
            } else if n == 0 || errno == ECONNRESET {
                closed = true
            } else {
                break // the 30 s passed
            }
        }
        return text
    }
}

/// `RTSPListener` on the shared TCP server shell (#38): its connection limits as an RTSP client meets them.
@Suite(.timeLimit(.minutes(2))) struct RTSPListenerTests {
    static func options(_ cseq: Int) -> String { "OPTIONS rtsp://127.0.0.1/camera RTSP/1.0\r\nCSeq: \(cseq)\r\n\r\n" }

    static func listener(_ change: (inout RTSPHub.Configuration) -> Void) async throws -> (RTSPListener, RTSPHub) {
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        change(&c)
        let hub = try RTSPHub(configuration: c, parameterSets: ([0x67, 0x42, 0xc0, 0x1f], [0x68, 0xce]))
        return (try await RTSPListener.start(host: "127.0.0.1", port: 0, hub: hub), hub)
    }

    @Test func aConnectionOverTheAddressLimitGets503AndIsClosed() async throws {
        let (listener, hub) = try await Self.listener { $0.maxConnectionsPerAddress = 1 }
        let first = TestTCP(port: listener.port)
        first.send(Self.options(1))
        #expect(first.read { $0.contains("\r\n\r\n") }.hasPrefix("RTSP/1.0 200"), "\(first.text)")
        let second = TestTCP(port: listener.port)
        second.read()
        #expect(
            second.closed && second.text.hasPrefix("RTSP/1.0 503") && second.text.contains("too many connections from your address"), "\(second.text)"
        )
        #expect(hub.refusals.perAddressConnectionLimit == 1 && hub.refusals.evicted == 0, "\(hub.refusals)")
        first.send(Self.options(2))
        #expect(first.read { $0.contains("CSeq: 2") }.contains("CSeq: 2") && !first.closed, "the first connection stays: \(first.text)")
        await listener.stop()
        hub.closeAll(reason: "the test ended")
    }

    @Test func aFullServerClosesTheIdleConnectionForANewcomer() async throws {
        let (listener, hub) = try await Self.listener { $0.maxConnections = 1 }
        let idle = TestTCP(port: listener.port)
        idle.send(Self.options(1)) // OPTIONS is not progress: the connection stays evictable
        #expect(idle.read { $0.contains("\r\n\r\n") }.hasPrefix("RTSP/1.0 200"), "\(idle.text)")
        let newcomer = TestTCP(port: listener.port)
        idle.read()
        #expect(idle.closed, "the idle connection is closed for the newcomer")
        newcomer.send(Self.options(1))
        #expect(newcomer.read { $0.contains("\r\n\r\n") }.hasPrefix("RTSP/1.0 200") && !newcomer.closed, "\(newcomer.text)")
        #expect(hub.refusals.evicted == 1 && hub.refusals.connectionLimit == 0, "\(hub.refusals)")
        await listener.stop()
        hub.closeAll(reason: "the test ended")
    }
}
