import Foundation
import Testing
@testable import RTSPServer
import TestSupport

/// The RTSP fixtures, the fuzzer's seeds (and every crash it ever found), are regression inputs here too.
let rtspCorpus = URL(fileURLWithPath: fixturesRoot).appendingPathComponent("rtsp")

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite struct RTSPParserTests {
    let describe = "DESCRIBE rtsp://127.0.0.1:8554/camera RTSP/1.0\r\nCSeq: 2\r\nUser-Agent: Lavf60.16.100\r\nAccept: application/sdp\r\n\r\n"

    @Test func aCompleteRequestIsReadWithItsHeadersAndLength() throws {
        let b = bytes(describe + "OPTIONS")
        guard case .request(let r, let consumed) = try RTSPParser.parse(b) else {
            Issue.record("not a request")
            return
        }
        #expect(consumed == describe.utf8.count)
        #expect(r.method == "DESCRIBE" && r.uri == "rtsp://127.0.0.1:8554/camera" && r.cseq == 2)
        #expect(r.header("accept") == "application/sdp" && r.header("USER-AGENT") == "Lavf60.16.100")
        #expect(r.path == "/camera" && r.body.isEmpty)
    }

    @Test func limitingRequestsLimitsTheirLinesToo() {
        var small = RTSPParser.Limits()
        small.limitRequests(toBytes: 1024)
        #expect(small == RTSPParser.Limits(maxRequestBytes: 1024, maxLineLength: 1024))
        var large = RTSPParser.Limits()
        large.limitRequests(toBytes: 65_536)
        #expect(large == RTSPParser.Limits(maxRequestBytes: 65_536, maxLineLength: 4096))
    }

    @Test func everyPrefixOfARequestIsIncomplete() throws {
        let b = bytes(describe)
        for n in 0..<b.count { #expect(try RTSPParser.parse(Array(b[..<n])) == .incomplete, "prefix \(n)") }
    }

    @Test func aBodyIsReadToItsContentLength() throws {
        let text = "SET_PARAMETER rtsp://h/camera RTSP/1.0\nCSeq: 7\nContent-Length: 5\n\nhello GET"
        guard case .request(let r, let consumed) = try RTSPParser.parse(bytes(text)) else {
            Issue.record("not a request")
            return
        }
        #expect(r.body == bytes("hello") && r.cseq == 7)
        #expect(consumed == text.utf8.count - 4) // bare LF line ends are accepted
        #expect(try RTSPParser.parse(bytes("SET_PARAMETER * RTSP/1.0\r\nCSeq: 1\r\nContent-Length: 5\r\n\r\nhel")) == .incomplete)
    }

    @Test func interleavedFramesAreSplitOff() throws {
        let frame: [UInt8] = [0x24, 1, 0, 3, 0xaa, 0xbb, 0xcc, 0x24]
        #expect(try RTSPParser.parse(frame) == .interleaved(channel: 1, payload: 4..<7, consumed: 7))
        #expect(try RTSPParser.parse(Array(frame[..<5])) == .incomplete)
        #expect(try RTSPParser.parse([0x24, 0]) == .incomplete)
    }

    @Test func emptyLinesBeforeARequestAreSkipped() throws {
        let b = bytes("\r\n\r\n" + describe)
        guard case .request(_, let consumed) = try RTSPParser.parse(b) else {
            Issue.record("not a request")
            return
        }
        #expect(consumed == b.count)
    }

    struct Bad: CustomTestStringConvertible, Sendable {
        let name: String, text: [UInt8], status: Int, code: RTSPParseError.Code, says: String
        var testDescription: String { name }
    }
    static let bad: [Bad] = {
        let longURI = "OPTIONS rtsp://h/" + String(repeating: "a", count: 5000) + " RTSP/1.0\r\nCSeq: 1\r\n\r\n"
        let longHeader = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX-Long: " + String(repeating: "b", count: 5000) + "\r\n\r\n"
        let manyHeaders = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n" + (0..<70).map { "X-\($0): y\r\n" }.joined() + "\r\n"
        let hugeHead = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n" + (0..<60).map { "X-\($0): \(String(repeating: "c", count: 400))\r\n" }.joined()
        return [
            Bad(name: "no CSeq", text: bytes("OPTIONS * RTSP/1.0\r\n\r\n"), status: 400, code: .missingCSeq, says: "no CSeq"),
            Bad(
                name: "CSeq not a number", text: bytes("OPTIONS * RTSP/1.0\r\nCSeq: -1\r\n\r\n"), status: 400, code: .missingCSeq,
                says: "not a number"),
            Bad(
                name: "CSeq too long", text: bytes("OPTIONS * RTSP/1.0\r\nCSeq: 99999999999999999999999\r\n\r\n"), status: 400, code: .missingCSeq,
                says: "not a number"),
            Bad(name: "two CSeqs", text: bytes("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nCSeq: 2\r\n\r\n"), status: 400, code: .missingCSeq, says: "2 CSeq"),
            Bad(name: "two words", text: bytes("OPTIONS RTSP/1.0\r\nCSeq: 1\r\n\r\n"), status: 400, code: .malformed, says: "METHOD URI RTSP/1.0"),
            Bad(name: "RTSP 2.0", text: bytes("OPTIONS * RTSP/2.0\r\nCSeq: 1\r\n\r\n"), status: 505, code: .unsupportedVersion, says: "RTSP/2.0"),
            Bad(name: "HTTP", text: bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), status: 505, code: .unsupportedVersion, says: "HTTP/1.1"),
            Bad(name: "method with a separator", text: bytes("OPT(IONS * RTSP/1.0\r\n"), status: 400, code: .malformed, says: "method"),
            Bad(
                name: "binary garbage", text: [0x16, 0x03, 0x01, 0x00, 0xff, 0x20, 0x41, 0x20, 0x42, 0x0a], status: 400, code: .malformed,
                says: "method"),
            Bad(name: "URI too long", text: bytes(longURI), status: 414, code: .tooLarge, says: "request line is longer"),
            Bad(name: "header too long", text: bytes(longHeader), status: 400, code: .tooLarge, says: "header line 2 is longer"),
            Bad(name: "too many headers", text: bytes(manyHeaders), status: 400, code: .tooLarge, says: "more than 64 header"),
            Bad(name: "head too large", text: bytes(hugeHead), status: 413, code: .tooLarge, says: "longer than 16384"),
            Bad(
                name: "body too large", text: bytes("SET_PARAMETER * RTSP/1.0\r\nCSeq: 3\r\nContent-Length: 100000\r\n\r\n"), status: 413,
                code: .tooLarge, says: "larger than 4096"),
            Bad(
                name: "Content-Length not a number", text: bytes("SET_PARAMETER * RTSP/1.0\r\nCSeq: 3\r\nContent-Length: 1e3\r\n\r\n"),
                status: 400, code: .malformed, says: "Content-Length"),
            Bad(
                name: "folded header", text: bytes("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n continued\r\n\r\n"), status: 400, code: .malformed,
                says: "folded"),
            Bad(name: "no colon", text: bytes("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nNoColon\r\n\r\n"), status: 400, code: .malformed, says: "no ':'"),
            Bad(
                name: "control character", text: bytes("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX: a\u{1}b\r\n\r\n"), status: 400, code: .malformed,
                says: "control"),
        ]
    }()

    @Test(arguments: bad) func malformedRequestsAreRefusedWithTheRightStatus(_ c: Bad) {
        do {
            let r = try RTSPParser.parse(c.text)
            Issue.record("parsed as \(r)")
        } catch {
            #expect(error.status == c.status, "\(error.message)")
            #expect(error.code == c.code, "\(error.message)")
            #expect(error.message.contains(c.says), "\(error.message)")
        }
    }

    @Test func theCSeqIsKeptForErrorsAfterItWasRead() {
        #expect(throws: RTSPParseError.self) { try RTSPParser.parse(bytes("SET_PARAMETER * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: x\r\n\r\n")) }
        do { _ = try RTSPParser.parse(bytes("SET_PARAMETER * RTSP/1.0\r\nCSeq: 9\r\nContent-Length: x\r\n\r\n")) } catch { #expect(error.cseq == 9) }
    }

    @Test func garbageFailsBeforeTheHeadIsComplete() {
        // A request line that cannot be valid is refused as soon as its line is there: nobody waits for more.
        #expect(throws: RTSPParseError.self) { try RTSPParser.parse(bytes("HELLO WORLD\r\n")) }
    }

    @Test func pathsComeFromAbsoluteURIsAndPaths() {
        func path(_ uri: String) -> String? { RTSPRequest(method: "X", uri: uri, headers: [], cseq: 1).path }
        #expect(path("rtsp://127.0.0.1:8554/camera/") == "/camera")
        #expect(path("rtsp://user@[::1]:8554/camera/trackID=0?x=1") == "/camera/trackID=0")
        #expect(path("RTSP://host") == "/")
        #expect(path("/camera") == "/camera")
        #expect(path("*") == "*")
        #expect(path("camera") == nil)
    }

    /// Random bytes, and random mutations of valid requests, never trap and never take more than they were given.
    @Test func randomInputNeverTraps() {
        var g = SplitMix(seed: 22)
        let seeds = [
            bytes(describe), bytes("SETUP rtsp://h/camera/trackID=0 RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast;client_port=5000-5001\r\n\r\n"),
        ]
        for i in 0..<20_000 {
            var b: [UInt8]
            if i % 2 == 0 {
                b = (0..<Int(g.next() % 300)).map { _ in UInt8(truncatingIfNeeded: g.next()) }
            } else {
                b = seeds[i / 2 % 2]
                for _ in 0..<(1 + g.next() % 4) where !b.isEmpty { b[Int(g.next() % UInt64(b.count))] = UInt8(truncatingIfNeeded: g.next()) }
            }
            switch try? RTSPParser.parse(b) {
            case .request(_, let n)?, .interleaved(_, _, let n)?: #expect(n <= b.count)
            default: break
            }
        }
    }

    @Test func theFuzzCorpusParsesWithoutTrapping() throws {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: rtspCorpus.path)) ?? []
        #expect(files.count >= 5, "seeds in \(rtspCorpus.path)")
        for f in files {
            let b = [UInt8](try Data(contentsOf: rtspCorpus.appendingPathComponent(f)))
            _ = try? RTSPParser.parse(b)
        }
    }
}

@Suite struct RTSPTransportTests {
    @Test(arguments: [
        ("RTP/AVP;unicast;client_port=5000-5001", RTSPTransportRequest.udp(rtpPort: 5000, rtcpPort: 5001)),
        ("RTP/AVP/UDP;unicast;client_port=6000", .udp(rtpPort: 6000, rtcpPort: 6001)),
        ("RTP/AVP/TCP;unicast;interleaved=0-1", .interleaved(rtpChannel: 0, rtcpChannel: 1)),
        ("RTP/AVP/TCP;unicast", .interleaved(rtpChannel: 0, rtcpChannel: 1)),
        ("RTP/AVP/TCP;unicast;interleaved=4-5;mode=\"PLAY\"", .interleaved(rtpChannel: 4, rtcpChannel: 5)),
        ("RTP/AVP;multicast,RTP/AVP;unicast;client_port=7000-7001", .udp(rtpPort: 7000, rtcpPort: 7001)),
    ])
    func supportedTransportsAreRead(_ header: String, _ expected: RTSPTransportRequest) throws {
        #expect(try RTSPTransportRequest.parse(header).get() == expected)
    }

    @Test(arguments: [
        ("RTP/AVP;unicast", 461, "client_port"),
        ("RTP/AVP;multicast", 461, "multicast"),
        ("RAW/RAW/UDP;unicast;client_port=5000-5001", 461, "not offered"),
        ("RTP/AVP;unicast;client_port=0-1", 400, "client_port"),
        ("RTP/AVP;unicast;client_port=70000-70001", 400, "client_port"),
        ("RTP/AVP;unicast;client_port=65535", 400, "client_port"),
        ("RTP/AVP;unicast;client_port=5000-x", 400, "client_port"),
        ("RTP/AVP;unicast;client_port=99999999999999999999-1", 400, "client_port"),
        ("RTP/AVP/TCP;interleaved=256-257", 400, "interleaved"),
        ("RTP/AVP/TCP;interleaved=3-3", 400, "differ"),
        ("RTP/AVP;unicast;client_port=5000-5001;mode=record", 461, "only plays"),
        ("", 400, "empty"),
    ])
    func badTransportsAreRefusedWithAReason(_ header: String, _ status: Int, _ says: String) {
        switch RTSPTransportRequest.parse(header) {
        case .success(let t): Issue.record("accepted as \(t)")
        case .failure(let r):
            #expect(r.status == status, "\(r.message)")
            #expect(r.message.contains(says), "\(r.message)")
        }
    }
}

@Suite struct DigestTests {
    @Test func md5MatchesRFC1321() {
        #expect(MD5.hex([]) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(MD5.hex(bytes("abc")) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(MD5.hex(bytes("The quick brown fox jumps over the lazy dog")) == "9e107d9d372bb6826bd81d3542a419d6")
        #expect(MD5.hex(bytes(String(repeating: "1234567890", count: 8))) == "57edf4a22be3c955ac49da2e2107b67a")
    }

    /// What a client computes from a challenge (RFC 2617 §3.2.2, without and with qop).
    func answer(_ challenge: String, user: String, password: String, method: String, uri: String, qop: Bool = false) -> String {
        let p = DigestAuthenticator.parameters(challenge.dropFirst(7))!
        let realm = p["realm"]!, nonce = p["nonce"]!
        let ha1 = MD5.hex(bytes("\(user):\(realm):\(password)")), ha2 = MD5.hex(bytes("\(method):\(uri)"))
        if qop {
            let response = MD5.hex(bytes("\(ha1):\(nonce):00000001:abcdef:auth:\(ha2)"))
            return
                "Digest username=\"\(user)\", realm=\"\(realm)\", nonce=\"\(nonce)\", uri=\"\(uri)\", response=\"\(response)\", qop=auth, nc=00000001, cnonce=\"abcdef\""
        }
        let response = MD5.hex(bytes("\(ha1):\(nonce):\(ha2)"))
        return "Digest username=\"\(user)\", realm=\"\(realm)\", nonce=\"\(nonce)\", uri=\"\(uri)\", response=\"\(response)\""
    }

    @Test func rightCredentialsPassAndWrongOnesDoNot() {
        let auth = DigestAuthenticator(user: "admin", password: "s3cret", realm: "cam", nonceLifetimeNs: 60_000_000_000)
        let now: Int64 = 1_000_000_000_000
        let me = "127.0.0.1"
        let challenge = auth.challenge(stale: false, client: me, connection: 1, nowNs: now)
        #expect(challenge.hasPrefix("Digest realm=\"cam\", nonce=\"") && challenge.contains("algorithm=MD5") && !challenge.contains("stale"))
        #expect(challenge.contains("qop=\"auth\""))
        let uri = "rtsp://127.0.0.1:8554/camera"
        func verify(_ h: String?, _ m: String = "DESCRIBE", uri u: String = uri, client: String = me, at t: Int64 = now)
            -> DigestAuthenticator.Verdict
        {
            auth.verify(h, method: m, uri: u, client: client, connection: 1, nowNs: t)
        }
        let good = answer(challenge, user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri)
        #expect(verify(good, at: now + 1_000) == .authorized)
        #expect(verify(answer(challenge, user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri, qop: true)) == .authorized)
        #expect(verify(answer(challenge, user: "admin", password: "wrong", method: "DESCRIBE", uri: uri)) != .authorized)
        #expect(verify(answer(challenge, user: "root", password: "s3cret", method: "DESCRIBE", uri: uri)) != .authorized)
        #expect(verify(good, "SETUP") != .authorized, "the method is part of the hash")
        #expect(verify(nil) == .missing)
        #expect(verify("Basic YWRtaW46czNjcmV0") != .authorized)
        // A nonce from another server (another secret) is not ours, however well the response is computed.
        let other = DigestAuthenticator(user: "admin", password: "s3cret", realm: "cam")
        let foreign = answer(
            other.challenge(stale: false, client: me, connection: 1, nowNs: now), user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri)
        #expect(verify(foreign) == .refused("not a nonce given to this address"))
    }

    /// A captured answer does not work from another address, for another URI, or again with the same nc.
    @Test func aNonceIsBoundToItsClientItsURIAndItsCount() {
        let auth = DigestAuthenticator(user: "admin", password: "s3cret", realm: "cam", nonceLifetimeNs: 60_000_000_000)
        let now: Int64 = 1_000_000_000_000
        let uri = "rtsp://127.0.0.1:8554/camera"
        let challenge = auth.challenge(stale: false, client: "127.0.0.1", connection: 1, nowNs: now)
        let plain = answer(challenge, user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri)
        #expect(auth.verify(plain, method: "DESCRIBE", uri: uri, client: "127.0.0.1", connection: 1, nowNs: now) == .authorized)
        #expect(
            auth.verify(plain, method: "DESCRIBE", uri: uri, client: "127.0.0.9", connection: 1, nowNs: now)
                == .refused("not a nonce given to this address"))
        #expect(
            auth.verify(plain, method: "DESCRIBE", uri: "rtsp://127.0.0.1:8554/other", client: "127.0.0.1", connection: 1, nowNs: now)
                == .refused("the uri answered for is not the request's"))
        // The path alone names the same resource.
        let byPath = answer(challenge, user: "admin", password: "s3cret", method: "DESCRIBE", uri: "/camera")
        #expect(auth.verify(byPath, method: "DESCRIBE", uri: uri, client: "127.0.0.1", connection: 1, nowNs: now) == .authorized)
        let counted = answer(challenge, user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri, qop: true)
        #expect(auth.verify(counted, method: "DESCRIBE", uri: uri, client: "127.0.0.1", connection: 1, nowNs: now) == .authorized)
        #expect(
            auth.verify(counted, method: "DESCRIBE", uri: uri, client: "127.0.0.1", connection: 1, nowNs: now)
                == .refused("nc 1 was used before with this nonce (a replay)"))
    }

    /// An answer without qop (RFC 2069: live555, GStreamer) counts nothing, so it is good only on the connection its
    /// nonce was issued on: replayed on a new connection from the same address it is refused. With qop, nc guards
    /// against replays and the nonce serves any connection from its address.
    @Test func anAnswerWithoutQopIsBoundToTheConnectionOfItsNonce() {
        let auth = DigestAuthenticator(user: "admin", password: "s3cret", realm: "cam", nonceLifetimeNs: 60_000_000_000)
        let now: Int64 = 1_000_000_000_000
        let uri = "rtsp://127.0.0.1:8554/camera", me = "127.0.0.1"
        let challenge = auth.challenge(stale: false, client: me, connection: 7, nowNs: now)
        for method in ["DESCRIBE", "SETUP", "PLAY"] {
            let plain = answer(challenge, user: "admin", password: "s3cret", method: method, uri: uri)
            // Again and again on its own connection (keep-alives repeat the same headers)…
            #expect(auth.verify(plain, method: method, uri: uri, client: me, connection: 7, nowNs: now) == .authorized)
            #expect(auth.verify(plain, method: method, uri: uri, client: me, connection: 7, nowNs: now + 1) == .authorized)
            // …but never on another one, even from the same address.
            #expect(
                auth.verify(plain, method: method, uri: uri, client: me, connection: 8, nowNs: now)
                    == .refused("an answer without qop on another connection than its nonce's (a replay)"))
        }
        // The connection's number is under the keyed hash: rewriting it in the nonce makes it not ours.
        let p = DigestAuthenticator.parameters(challenge.dropFirst(7))!
        let nonce = p["nonce"]!
        let moved = String(nonce.prefix(16)) + "0000000000000008" + String(nonce.dropFirst(32))
        let forged = answer(challenge.replacingOccurrences(of: nonce, with: moved), user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri)
        #expect(
            auth.verify(forged, method: "DESCRIBE", uri: uri, client: me, connection: 8, nowNs: now) == .refused("not a nonce given to this address"))
        // With qop the nonce is not bound to its connection (the count is): a new connection may use it once per nc.
        let counted = answer(challenge, user: "admin", password: "s3cret", method: "DESCRIBE", uri: uri, qop: true)
        #expect(auth.verify(counted, method: "DESCRIBE", uri: uri, client: me, connection: 9, nowNs: now) == .authorized)
        #expect(auth.verify(counted, method: "DESCRIBE", uri: uri, client: me, connection: 10, nowNs: now) != .authorized)
    }

    @Test func anExpiredNonceIsStaleAndTheNewChallengeSaysSo() {
        let auth = DigestAuthenticator(user: "u", password: "p", nonceLifetimeNs: 5_000_000_000)
        let now: Int64 = 50_000_000_000
        let c = "10.0.0.1", uri = "rtsp://h/camera/"
        let a = answer(auth.challenge(stale: false, client: c, connection: 1, nowNs: now), user: "u", password: "p", method: "PLAY", uri: uri)
        #expect(auth.verify(a, method: "PLAY", uri: uri, client: c, connection: 1, nowNs: now + 4_000_000_000) == .authorized)
        #expect(auth.verify(a, method: "PLAY", uri: uri, client: c, connection: 1, nowNs: now + 6_000_000_000) == .stale)
        #expect(auth.challenge(stale: true, client: c, connection: 1, nowNs: now).hasSuffix("stale=true"))
        // Wrong credentials with an old nonce are refused, not called stale (no retry is invited).
        let wrong = answer(auth.challenge(stale: false, client: c, connection: 1, nowNs: now), user: "u", password: "x", method: "PLAY", uri: uri)
        #expect(auth.verify(wrong, method: "PLAY", uri: uri, client: c, connection: 1, nowNs: now + 6_000_000_000) != .stale)
    }

    @Test func malformedAuthorizationHeadersAreRefusedWithoutTrapping() {
        let auth = DigestAuthenticator(user: "u", password: "p")
        for h in [
            "Digest", "Digest ", "Digest username", "Digest username=\"u", "Digest a=1, a=2",
            "Digest nonce=\"zz\", username=u, realm=r, uri=x, response=y",
            "Digest " + String(repeating: "x=1, ", count: 100), "digest username=\"\\", String(repeating: "A", count: 5000),
        ] {
            #expect(auth.verify(h, method: "DESCRIBE", uri: "x", client: "127.0.0.1", connection: 1) != .authorized, "\(h.prefix(40))")
        }
    }

    @Test func hmacMD5MatchesRFC2202() {
        #expect(MD5.hmacHex(key: [UInt8](repeating: 0x0b, count: 16), bytes("Hi There")) == "9294727a3638bb1c13f48ef8158bfc9d")
        #expect(MD5.hmacHex(key: bytes("Jefe"), bytes("what do ya want for nothing?")) == "750c783e6ab0b503eaa86e310a5db738")
    }

    /// The failure budgets: an address's wrong answers are checked at most its burst plus its rate; all
    /// addresses' at most the global burst plus its rate; the later 401s of a run are delayed.
    @Test func theFailureBudgetsLimitTheGuessesCheckedPerAddressAndInAll() {
        var b = AuthenticationBudget()
        b.perAddressBurst = 5
        b.perAddressPerSecond = 1
        b.globalBurst = 40
        b.globalPerSecond = 20
        let t0: Int64 = 1_000_000_000_000
        let throttle = AuthThrottle(b, nowNs: t0)
        var checked = 0, delays: [Int64] = []
        // One address guessing as fast as it can for 10 s (every millisecond).
        for ms in 0..<10_000 {
            let now = t0 + Int64(ms) * 1_000_000
            if throttle.mayCheck("10.0.0.1", nowNs: now).allowed {
                checked += 1
                delays.append(throttle.failed("10.0.0.1", nowNs: now))
            }
        }
        #expect(checked <= 5 + 10 + 1, "\(checked) checked in 10 s")
        #expect(delays.prefix(2).allSatisfy { $0 == 0 } && delays[2] == 250_000_000 && delays.last == 2_000_000_000, "\(delays)")
        // 200 addresses at once, 5 s: at most 40 + 20 × 5 in all.
        var all = 0
        for ms in stride(from: 0, to: 5_000, by: 5) {
            for a in 0..<200 {
                let now = t0 + 20_000_000_000 + Int64(ms) * 1_000_000
                if throttle.mayCheck("10.1.0.\(a)", nowNs: now).allowed {
                    all += 1
                    _ = throttle.failed("10.1.0.\(a)", nowNs: now)
                }
            }
        }
        #expect(all <= 40 + 20 * 5 + 2, "\(all) checked in 5 s from 200 addresses")
        // A new address after the storm, once the global budget has a token again.
        #expect(throttle.mayCheck("10.2.0.1", nowNs: t0 + 40_000_000_000).allowed)
        print(
            "FIGURE Digest budget (unit): one address guessing every ms for 10 s: \(checked) checked; 200 addresses for 5 s: \(all) checked (\(all / 5)/s)"
        )
    }
}

@Suite struct RTSPResponseTests {
    @Test func responsesCarryCSeqServerAndLength() {
        let r = RTSPResponse(status: 454, headers: [RTSPHeader("Session", "X")], body: "gone\n")
        let text = String(decoding: r.serialized(cseq: 5), as: UTF8.self)
        #expect(text == "RTSP/1.0 454 Session Not Found\r\nCSeq: 5\r\nServer: swift-video-capture\r\nSession: X\r\nContent-Length: 5\r\n\r\ngone\n")
    }
}
