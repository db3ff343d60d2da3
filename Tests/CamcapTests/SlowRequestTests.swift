import Foundation
import Synchronization
import Testing
import TestSupport

/// Holders of `camcap serve`'s connections without the token, as issue #37's attacker ran them: each connection
/// from one of `addresses` sends a `POST /whep` head declaring a 100000-byte body and then a body byte every 2 s
/// (every third one a head that never ends: a header line every 2 s), and connects again whenever the server
/// closes it. A thread of its own runs them all with poll(2).
final class SlowHolders: @unchecked Sendable {
    let port: Int, count: Int, addresses: [String]
    /// Connections made, and answers read (the first line of each), by status code.
    let connects = Atomic<Int>(0)
    let statuses = Mutex<[String: Int]>([:])
    private let stopped = Atomic<Bool>(false)
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)

    init(port: Int, count: Int, addresses: [String]) {
        self.port = port
        self.count = count
        self.addresses = addresses
    }

    private struct Slot {
        var fd: Int32 = -1
        var sentHead = false
        var lastTrickle = Date.distantPast
    }

    private func open(_ i: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(addresses[i % addresses.count])
        _ = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = UInt16(port).bigEndian
        _ = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        connects.add(1, ordering: .relaxed)
        return fd
    }

    func start() {
        let t = Thread { [self] in
            run()
            done.signal()
        }
        thread = t
        t.start()
    }

    /// Ends the holders and waits for their thread (again: returns at once).
    func stop() {
        guard thread != nil, !stopped.exchange(true, ordering: .relaxed) else { return }
        done.wait()
    }

    private func run() {
        var slots = (0..<count).map { Slot(fd: open($0)) }
        let head = "POST /whep HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/sdp\r\nContent-Length: 100000\r\n\r\n"
        let slowHead = "POST /whep HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .relaxed) {
            var fds = slots.map { pollfd(fd: $0.fd, events: Int16(POLLIN) | ($0.sentHead ? 0 : Int16(POLLOUT)), revents: 0) }
            _ = poll(&fds, nfds_t(fds.count), 100)
            let now = Date()
            for i in slots.indices {
                var closed = false
                let ev = fds[i].revents
                if ev & Int16(POLLOUT) != 0 && !slots[i].sentHead {
                    let text = i % 3 == 2 ? slowHead : head
                    closed = text.withCString { send(slots[i].fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } < 0
                    slots[i].sentHead = true
                    slots[i].lastTrickle = now
                }
                if ev & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    let n = buffer.withUnsafeMutableBytes { recv(slots[i].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if n > 0 {
                        let text = String(decoding: buffer[0..<min(n, 12)], as: UTF8.self)
                        if text.hasPrefix("HTTP/1.1 ") { statuses.withLock { $0[String(text.dropFirst(9).prefix(3)), default: 0] += 1 } }
                    } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                        closed = true
                    }
                }
                if !closed && slots[i].sentHead && now.timeIntervalSince(slots[i].lastTrickle) >= 2 {
                    let text = i % 3 == 2 ? "X-Slow: 1\r\n" : "x"
                    closed = text.withCString { send(slots[i].fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } < 0 && errno != EAGAIN
                    slots[i].lastTrickle = now
                }
                if closed {
                    close(slots[i].fd)
                    slots[i] = Slot(fd: open(i))
                }
            }
        }
        for s in slots { close(s.fd) }
    }
}

/// "STATUS LINE \"body\"" of an HTTP answer, for a figure.
private func answerLine(_ text: String) -> String {
    let parts = text.components(separatedBy: "\r\n\r\n")
    let status = parts[0].components(separatedBy: "\r\n")[0]
    return "\(status) \"\(parts.dropFirst().joined().trimmingCharacters(in: .whitespacesAndNewlines))\""
}

/// Issue #37's attacks on `camcap serve`'s HTTP side, each printing its figure ("FIGURE …").
@Suite(.serialized, .timeLimit(.minutes(4))) struct SlowRequestTests {
    /// 300 slow holders from 10 addresses (127.0.0.2…11) without the token: the token is checked on the head
    /// (401 at once), their connections stay evictable, and so 8 of 8 real viewers (from 127.0.0.21…28, the same
    /// /24) join and /stats with the token answers 40 of 40.
    @Test func slowHoldersWithoutTheTokenCannotEmptyTheServer() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0"], name: "serve-holders")
        defer { _ = server.stop() }
        let port = try #require(URL(string: server.url)?.port)
        let holders = SlowHolders(port: port, count: 300, addresses: (2...11).map { "127.0.0.\($0)" })
        holders.start()
        defer { holders.stop() }
        // The attack in full force: every holder has been answered or closed and came back at least once.
        #expect(waitUntil(timeout: 60, every: 0.05) { holders.connects.load(ordering: .relaxed) >= 600 }, "holders connected")
        let offer = work + "/offer-holders-\(getpid()).sdp"
        try validOffer().write(toFile: offer, atomically: true, encoding: .utf8)
        var joined = 0, codes: [String] = []
        for i in 0..<8 {
            let r = try server.curl([
                "-o", "/dev/null", "-w", "%{http_code}", "--interface", "127.0.0.\(21 + i)", "-X", "POST", "-H", "Content-Type: application/sdp",
                "--data-binary", "@" + offer, server.url + "whep",
            ])
            codes.append(r.out)
            if r.out == "201" { joined += 1 }
        }
        var answered = 0, slowest = 0.0
        for _ in 0..<40 {
            let r = try server.curl(["-o", "/dev/null", "-w", "%{http_code} %{time_total}", server.url + "stats"])
            let parts = r.out.split(separator: " ")
            if parts.first == "200" { answered += 1 }
            slowest = max(slowest, Double(parts.last ?? "") ?? 99)
        }
        let connects = holders.connects.load(ordering: .relaxed)
        holders.stop()
        let stats = try server.stats()
        let refused = stats["refused"] as? [String: Any]
        print(
            "FIGURE 300 slow holders without the token from 10 addresses (\(connects) connections made, answers \(holders.statuses.withLock { $0 })): real viewers joined \(joined) of 8 (\(codes.joined(separator: " "))); /stats with the token answered \(answered) of 40, slowest \(String(format: "%.2f", slowest)) s; refused \(String(describing: refused))"
        )
        #expect(joined == 8, "\(codes)")
        #expect(answered == 40)
        #expect(int(refused, "unauthorized") >= 300 && int(refused, "evicted") > 0, "\(String(describing: refused))")
    }

    /// HTTPS is TLS 1.2 or 1.3 with AEAD suites: openssl's TLS 1.0, 1.1 and a CBC suite on 1.2 are refused by the
    /// server (the client offers them: security level 0), TLS 1.2 with an AEAD suite and TLS 1.3 connect; plain
    /// HTTP to the port gets a 400 saying it speaks HTTPS.
    @Test func httpsIsTLS12AtLeastWithAEADSuitesOnly() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0", "--tls-self-signed"], name: "serve-tls")
        defer { _ = server.stop() }
        let port = try #require(URL(string: server.url)?.port)
        func handshake(_ options: String) throws -> (ok: Bool, text: String) {
            let r = try runTool(
                "/bin/sh", ["-c", "openssl s_client -connect 127.0.0.1:\(port) -servername localhost \(options) </dev/null 2>&1"])
            let lines = r.out.split(separator: "\n")
            let cipher = lines.first { $0.contains("Cipher is") }, alert = lines.first { $0.contains("alert") || $0.contains("error:") }
            // "…:tlsv1 alert protocol version:…" → "tlsv1 alert protocol version"
            let said = alert.map { $0.split(separator: ":").first { $0.contains("alert") } ?? $0 }
            let ok = r.code == 0 && cipher != nil && !r.out.contains("Cipher is (NONE)")
            return (ok, String(ok ? cipher ?? "" : said ?? cipher ?? "").trimmingCharacters(in: .whitespaces))
        }
        var rows: [String] = []
        for (name, options) in [
            ("TLS 1.0", "-tls1 -cipher DEFAULT@SECLEVEL=0"), ("TLS 1.1", "-tls1_1 -cipher DEFAULT@SECLEVEL=0"),
            ("TLS 1.2 CBC-SHA1", "-tls1_2 -cipher 'AES128-SHA:ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:AES256-SHA@SECLEVEL=0'"),
        ] {
            let h = try handshake(options)
            rows.append("\(name): \(h.ok ? "CONNECTED" : "refused") (\(h.text))")
            #expect(!h.ok, "\(name) must fail: \(h.text)")
            // The server refused it (an alert from it), not the client's own configuration.
            #expect(h.text.contains("alert") || h.text.contains("no shared cipher") || h.text.contains("unsupported protocol"), "\(name): \(h.text)")
        }
        for (name, options) in [("TLS 1.2 AEAD", "-tls1_2"), ("TLS 1.3", "-tls1_3")] {
            let h = try handshake(options)
            rows.append("\(name): \(h.ok ? "connected" : "REFUSED") (\(h.text))")
            #expect(h.ok, "\(name) must connect: \(h.text)")
            #expect(h.text.contains("GCM") || h.text.contains("CHACHA20"), "\(name): \(h.text)")
        }
        let plain = try runTool("curl", ["-sS", "-i", "--max-time", "10", "http://127.0.0.1:\(port)/stats"])
        rows.append("plain HTTP: \(answerLine(plain.out))")
        #expect(plain.out.hasPrefix("HTTP/1.1 400") && plain.out.contains("this port speaks HTTPS"), "\(plain.out) \(plain.err)")
        print("FIGURE serve --tls-self-signed: " + rows.joined(separator: "; "))
    }

    /// The small ones: an a=ice-ufrag outside RFC 8839's ice-char is 400 naming it; a 2 MB request head is 431
    /// naming the limit, and the connection is closed.
    @Test func badUfragsAndHugeHeadsAreRefusedByName() throws {
        let server = try ServeProcess(["-d", "fixture:vivid", "-s", "320x240", "--listen", "127.0.0.1:0"], name: "serve-small")
        defer { _ = server.stop() }
        let port = try #require(URL(string: server.url)?.port)
        var rows: [String] = []
        for (name, ufrag) in [("colon", "ab:cd"), ("non-ASCII", "abcdé"), ("space", "ab cd")] {
            let path = work + "/offer-ufrag-\(getpid()).sdp"
            try validOffer().replacingOccurrences(of: "a=ice-ufrag:abcd", with: "a=ice-ufrag:" + ufrag).write(
                toFile: path, atomically: true, encoding: .utf8)
            let r = try server.curl([
                "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/sdp", "--data-binary", "@" + path, server.url + "whep",
            ])
            rows.append("ufrag with \(name): \(r.out.split(separator: "\n").last ?? "")")
            #expect(r.out.hasSuffix("400") && r.out.contains("a=ice-ufrag"), "\(name): \(r.out)")
        }
        // 2 MB of one header: the answer comes while the client is still sending, and the connection ends.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = UInt16(port).bigEndian
        let c = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(c == 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array(
            ("GET /stats HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(server.token ?? "")\r\nX-Big: "
                + String(repeating: "a", count: 2 << 20) + "\r\n\r\n").utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        var answer: [UInt8] = [], closed = false
        var b = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = b.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 {
                closed = n == 0 || errno == ECONNRESET
                break
            }
            answer += b[0..<n]
        }
        let text = String(decoding: answer, as: UTF8.self)
        rows.append("2 MB head: \(answerLine(text)) (\(sent) bytes sent), closed: \(closed)")
        #expect(text.hasPrefix("HTTP/1.1 431") && text.contains("16 KiB") && closed, "\(text)")
        #expect(try server.curl(["-o", "/dev/null", "-w", "%{http_code}", server.url + "stats"]).out == "200", "the server answers on")
        print("FIGURE small serve items: " + rows.joined(separator: "; "))
    }
}
