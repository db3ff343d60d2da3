import Foundation
import Glibc
import Testing
import VideoCapture
import WHIPClient

/// A one-shot HTTP server on 127.0.0.1: answers the first request with `response` and closes.
///
/// The listening descriptor belongs to the server's thread, which closes it: `deinit` only shuts it down while it is
/// still open (that wakes an `accept` in progress, and one not begun yet fails at once). Closed by `deinit` instead,
/// its number could be reused by the next test's server before this thread got to `accept` on a loaded machine, and
/// this thread would then take that server's connection and answer it with its own response (seen in CI: an empty
/// one, "closed the connection without an answer").
private final class OneAnswerServer: @unchecked Sendable {
    /// The listening descriptor, open until the thread closes it; a lock orders that against `deinit`'s shutdown, so
    /// neither touches a number that may already be another socket's.
    private final class Listener: @unchecked Sendable {
        let fd: Int32
        private let lock = NSLock()
        private var open = true
        init(_ fd: Int32) { self.fd = fd }
        func close() {
            lock.withLock {
                if open {
                    open = false
                    _ = Glibc.close(fd)
                }
            }
        }
        func shutDown() { lock.withLock { if open { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) } } }
    }
    let port: UInt16
    private let listener: Listener
    private let thread: Thread

    init(response: String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 4) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        port = UInt16(bigEndian: a.sin_port)
        let listener = Listener(fd)
        self.listener = listener
        thread = Thread {
            defer { listener.close() }
            var c: Int32
            repeat { c = accept(listener.fd, nil, nil) } while c < 0 && errno == EINTR
            guard c >= 0 else { return }
            // The whole request, its body included: closing with unread bytes sends a reset, which can reach the
            // client before the answer does (seen in CI: "closed the connection without an answer").
            var buf = [UInt8](repeating: 0, count: 65536)
            var request = [UInt8]()
            func complete() -> Bool {
                guard let end = request.firstRange(of: Array("\r\n\r\n".utf8)) else { return false }
                let head = String(decoding: request[..<end.lowerBound], as: UTF8.self).lowercased()
                let length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                return request.count - end.upperBound >= length
            }
            while !complete() {
                let n = read(c, &buf, buf.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                request += buf[0..<n]
            }
            _ = response.withCString { write(c, $0, strlen($0)) }
            shutdown(c, Int32(SHUT_WR))
            close(c)
        }
        thread.start()
    }
    deinit { listener.shutDown() }
}

/// Every WHIP failure has a code to switch on (#38), besides its message and status.
@Suite struct WHIPErrorCodeTests {
    @Test func aBadEndpointIsAnInvalidConfiguration() {
        let e = #expect(throws: WHIPError.self) { try WHIPClient(endpoint: "ftp://example.com/whip", token: nil) }
        #expect(e?.code == .invalidConfiguration && e?.message.contains("http:// or https://") == true, "\(String(describing: e))")
    }

    @Test func aServerThatRefusesIsRefusedWithItsStatus() throws {
        let server = try OneAnswerServer(response: "HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\nConnection: close\r\n\r\nno token\n")
        let client = try WHIPClient(endpoint: "http://127.0.0.1:\(server.port)/whip", token: "x")
        // The server is kept until the answer is in: released after its last use (`port`), its deinit would close
        // the listener under a connection still waiting to be accepted ("closed the connection without an answer").
        let e = withExtendedLifetime(server) { #expect(throws: WHIPError.self) { try client.publish(offer: "v=0\r\n") } }
        #expect(e?.code == .refused && e?.status == 403 && e?.message.contains("403") == true, "\(String(describing: e))")
    }

    @Test func aServerWithoutLocationGivesABadAnswer() throws {
        let server = try OneAnswerServer(
            response: "HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 5\r\nConnection: close\r\n\r\nv=0\r\n")
        let client = try WHIPClient(endpoint: "http://127.0.0.1:\(server.port)/whip", token: nil)
        let e = withExtendedLifetime(server) { #expect(throws: WHIPError.self) { try client.publish(offer: "v=0\r\n") } }
        #expect(e?.code == .badAnswer && e?.message.contains("Location") == true, "\(String(describing: e))")
    }

    @Test func nobodyListeningIsUnreachable() throws {
        // A port just released: nothing listens there.
        let port = try { () throws -> UInt16 in
            let s = try OneAnswerServer(response: "")
            return s.port
        }()
        var client = try WHIPClient(endpoint: "http://127.0.0.1:\(port)/whip", token: nil)
        client.timeout = 5
        let e = #expect(throws: WHIPError.self) { try client.publish(offer: "v=0\r\n") }
        #expect(e?.code == .unreachable && e?.status == nil, "\(String(describing: e))")
    }
}
