import Foundation
import Testing
import TestSupport

/// Attacks on `camcap rtsp` (issue #37): connections and sessions held by strangers, Digest guessing and
/// replay, sessions used from elsewhere, an address off loopback without a word. Each prints its figure
/// ("FIGURE …"). Other loopback addresses (127.0.0.2…) play other hosts: every 127/8 address is local on Linux.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RTSPAbuseTests {
    /// 64 connections from 4 addresses that send OPTIONS every second (the connection limit, 16 per address)
    /// do not keep a real client out: the one idle longest is closed for it. OPTIONS keeps none of them open:
    /// all are closed at the idle timeout (10 s).
    @Test func optionsHoldersCannotKeepARealClientOut() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180", "--idle-timeout", "10"], name: "rtsp-holders")
        defer { _ = server.stop() }
        var holders: [RawRTSP] = []
        for a in 2...5 {
            for _ in 0..<16 {
                let h = try RawRTSP(port: server.port, from: "127.0.0.\(a)")
                #expect(h.request("OPTIONS", "*", cseq: 1)?.status == 200)
                holders.append(h)
            }
        }
        let opened = Date()
        // One more from a holder's address is over its own limit.
        let extra = try RawRTSP(port: server.port, from: "127.0.0.2")
        #expect(extra.response()?.status == 503)
        // The holders keep sending OPTIONS, once a second, in the background.
        let stop = Atomic3(), all = Holders(holders)
        let keeper = Thread {
            var cseq = 2
            while !stop.isSet {
                for h in all.list { h.send("OPTIONS * RTSP/1.0\r\nCSeq: \(cseq)\r\n\r\n") }
                cseq += 1
                usleep(1_000_000)
            }
        }
        keeper.start()
        let started = Date()
        let got = try ffmpegPull(server.url, transport: "tcp", frames: 30, name: "rtsp-beside-holders")
        let playedIn = Date().timeIntervalSince(started)
        #expect(got.count >= 29, "the real client decoded \(got.count) of 30 beside 64 holders: \(got.log)")
        // Every holder is closed at the idle timeout (10 s after it opened), OPTIONS or not.
        var allClosed: Double?
        if waitUntil(timeout: 30, every: 0.05, { holders.allSatisfy { $0.isClosed } }) { allClosed = Date().timeIntervalSince(opened) }
        stop.set()
        while !keeper.isFinished { usleep(10_000) }
        #expect(allClosed != nil && allClosed! < 25, "holders closed \(String(describing: allClosed)) s after they opened")
        #expect(server.stop() == 0)
        let refused = server.out.split(separator: "\n").first { $0.hasPrefix("rtsp refused:") } ?? ""
        let evicted =
            refused.range(of: " idle connections closed for newcomers").map { refused[..<$0.lowerBound].split(separator: " ").last ?? "?" } ?? "?"
        print(
            "FIGURE 64 OPTIONS holders from 4 addresses (OPTIONS every 1 s): ffmpeg decoded \(got.count) of 30 frames in \(String(format: "%.1f", playedIn)) s; \(evicted) holders closed for it; all holders closed \(allClosed.map { String(format: "%.1f", $0) } ?? "-") s after they opened (idle timeout 10 s)"
        )
        #expect(evicted != "0" && evicted != "?", "\(refused)")
    }

    /// 16 UDP SETUPs never played (the session limit), their connections closed: all gone within the setup
    /// timeout (6 s by default), and a real client plays after them. A session id is known only where it was
    /// made: another address's PAUSE and TEARDOWN with it get 454 and change nothing.
    @Test func setupsNeverPlayedAreGoneWithinSecondsAndSessionsAreBoundToTheirOwner() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180"], name: "rtsp-setups")
        defer { _ = server.stop() }
        var port = 41_000 + Int(getpid() % 500) * 40
        for i in 0..<16 {
            let c = try RawRTSP(port: server.port, from: "127.0.0.\(2 + i / 8)")
            #expect(c.request("DESCRIBE", server.url, cseq: 1)?.status == 200)
            let r = c.request("SETUP", server.url + "/trackID=0", cseq: 2, ["Transport: RTP/AVP;unicast;client_port=\(port)-\(port + 1)"])
            #expect(r?.status == 200, "SETUP \(i)")
            port += 2
        }
        let lastSetUp = Date()
        // All sessions are held: one more is refused.
        let more = try RawRTSP(port: server.port)
        #expect(more.request("DESCRIBE", server.url, cseq: 1)?.status == 200)
        #expect(more.request("SETUP", server.url + "/trackID=0", cseq: 2, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])?.status == 503)
        // Their connections are gone (closed when the RawRTSP objects went); the sessions end at the setup timeout.
        let ended = server.waitForLine(containing: "rtsp: client 16 ended", timeout: 30)
        let gone = Date().timeIntervalSince(lastSetUp)
        #expect(
            waitUntil(timeout: 30, every: 0.05) { server.err.components(separatedBy: "ended: timed out: not played within 6.0 s").count - 1 == 16 })
        #expect(ended != nil && gone <= 10, "the 16 never-played sessions were gone \(gone) s after the last SETUP")
        print(
            "FIGURE 16 UDP SETUPs never played (the session limit): all gone \(String(format: "%.1f", gone)) s after the last SETUP (setup timeout 6 s)"
        )

        // A real client's TCP session; a stranger who knows its id cannot PAUSE or TEARDOWN it.
        let owner = try RawRTSP(port: server.port)
        #expect(owner.request("DESCRIBE", server.url, cseq: 1)?.status == 200)
        let setUp = owner.request("SETUP", server.url + "/trackID=0", cseq: 2, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
        let session = String(setUp?.header("Session")?.prefix { $0 != ";" } ?? "")
        #expect(owner.request("PLAY", server.url, cseq: 3, ["Session: \(session)"])?.status == 200)
        #expect(owner.waitForInterleaved(10))
        let stranger = try RawRTSP(port: server.port, from: "127.0.0.9")
        let pause = stranger.request("PAUSE", server.url, cseq: 1, ["Session: \(session)"])?.status
        let teardown = stranger.request("TEARDOWN", server.url, cseq: 2, ["Session: \(session)"])?.status
        let sameHost = try RawRTSP(port: server.port) // the same address, another connection
        let sameHostTeardown = sameHost.request("TEARDOWN", server.url, cseq: 1, ["Session: \(session)"])?.status
        #expect(pause == 454 && teardown == 454 && sameHostTeardown == 454)
        let before = owner.interleavedFrames
        #expect(owner.waitForInterleaved(before + 20), "the owner's stream goes on")
        #expect(owner.request("TEARDOWN", server.url, cseq: 4, ["Session: \(session)"])?.status == 200)
        print(
            "FIGURE another client's session id: PAUSE \(pause ?? -1), TEARDOWN \(teardown ?? -1) from another address, TEARDOWN \(sameHostTeardown ?? -1) from another connection of the same address; the owner's stream went on"
        )
        #expect(server.stop() == 0)
    }

    /// Digest guessing is slowed down and then refused: wrong answers are checked at most about 6 a second per
    /// address (a burst of 5, then 1 a second) and 60 in all (40, then 20 a second); a 401 burst closes the
    /// connection. A captured answer does not replay from another address, an answer for another URI or with
    /// a used nc is refused, and the right password still works from a new address after the storm.
    @Test func digestGuessingIsThrottledAndAnswersDoNotReplay() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--user", "admin"], name: "rtsp-guessing", environment: ["CAMCAP_RTSP_PASSWORD": "right pw"])
        defer { _ = server.stop() }
        let url = server.url

        // Replay, uri and nc, before the storm.
        let a = try RawRTSP(port: server.port, from: "127.0.0.30")
        let challengeA = a.request("DESCRIBE", url, cseq: 1)?.header("WWW-Authenticate") ?? ""
        #expect(challengeA.contains("qop=\"auth\""), "\(challengeA)")
        let answerA = try digestAnswer(challengeA, user: "admin", password: "right pw", method: "DESCRIBE", uri: url)
        #expect(a.request("DESCRIBE", url, cseq: 2, ["Authorization: \(answerA)"])?.status == 200)
        let b = try RawRTSP(port: server.port, from: "127.0.0.31")
        let replayed = b.request("DESCRIBE", url, cseq: 1, ["Authorization: \(answerA)"])?.status
        let otherURI = try digestAnswer(challengeA, user: "admin", password: "right pw", method: "DESCRIBE", uri: url + "/trackID=0")
        let wrongURI = a.request("DESCRIBE", url, cseq: 3, ["Authorization: \(otherURI)"])?.status
        let counted = try digestAnswer(challengeA, user: "admin", password: "right pw", method: "DESCRIBE", uri: url, nc: 1)
        let a2 = try RawRTSP(port: server.port, from: "127.0.0.30") // a 401 may have closed the first connection
        let first = a2.request("DESCRIBE", url, cseq: 1, ["Authorization: \(counted)"])?.status
        let again = a2.request("DESCRIBE", url, cseq: 2, ["Authorization: \(counted)"])?.status
        #expect(replayed == 401 && wrongURI == 401 && first == 200 && again == 401, "\([replayed, wrongURI, first, again])")
        print(
            "FIGURE Digest replay: the answer captured from 127.0.0.30 → \(replayed ?? -1) from 127.0.0.31; an answer for another uri → \(wrongURI ?? -1); nc 1 → \(first ?? -1), nc 1 again → \(again ?? -1)"
        )

        // The storm: 20 addresses, each guessing as fast as the server answers (pipelined, reconnecting when
        // closed), for 4 s.
        let addresses = (10..<30).map { "127.0.0.\($0)" }
        let checked = Mutex3(), seconds = 4.0
        let group = DispatchGroup()
        let port = server.port
        let stormStart = Date()
        for (i, address) in addresses.enumerated() {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var wrong = 0, refused = 0
                guard let c = try? RawRTSP(port: port, from: address),
                    let challenge = c.request("DESCRIBE", url, cseq: 1)?.header("WWW-Authenticate"),
                    let nonce = challenge.components(separatedBy: "nonce=\"").dropFirst().first?.prefix(while: { $0 != "\"" })
                else { return checked.set(i, (-1, "no challenge")) }
                let deadline = Date().addingTimeInterval(seconds)
                var cseq = 2
                while Date() < deadline {
                    guard let conn = try? RawRTSP(port: port, from: address) else { break }
                    // 10 guesses at once on the connection; read answers until it closes.
                    for _ in 0..<10 {
                        let guess = String(format: "%08x%08x%08x%08x", UInt32.random(in: 0...UInt32.max), cseq, cseq, cseq)
                        conn.send(
                            "DESCRIBE \(url) RTSP/1.0\r\nCSeq: \(cseq)\r\nAuthorization: Digest username=\"admin\", realm=\"camcap\", nonce=\"\(nonce)\", uri=\"\(url)\", response=\"\(guess)\"\r\n\r\n"
                        )
                        cseq += 1
                    }
                    var refusedNow = false
                    while Date() < deadline.addingTimeInterval(3), let r = conn.response() {
                        if r.status == 401 {
                            wrong += 1
                        } else if r.status == 503 {
                            refused += 1
                            refusedNow = true
                        }
                    }
                    if refusedNow { usleep(50_000) } // polls 20 times a second while refused
                }
                checked.set(i, (wrong, "\(refused)"))
            }
        }
        group.wait()
        let elapsed = Date().timeIntervalSince(stormStart)
        let perAddress = addresses.indices.map { checked.get($0).0 }
        let refusedUnchecked = addresses.indices.map { Int(checked.get($0).1) ?? 0 }.reduce(0, +)
        let total = perAddress.reduce(0, +)
        let maxRate = Double(perAddress.max() ?? 0) / elapsed, totalRate = Double(total) / elapsed
        #expect(perAddress.allSatisfy { $0 >= 1 }, "\(perAddress)")
        #expect(maxRate <= 10, "an address had \(maxRate) wrong answers checked a second")
        #expect(totalRate <= 100, "\(totalRate) wrong answers checked a second in all")

        // The right password from a new address, as soon as the global budget has a token again.
        let after = Date()
        var status: Int?
        waitUntil(timeout: 15, every: 0.1) {
            guard let c = try? RawRTSP(port: port, from: "127.0.0.40"),
                let challenge = c.request("DESCRIBE", url, cseq: 1)?.header("WWW-Authenticate"),
                let answer = try? digestAnswer(challenge, user: "admin", password: "right pw", method: "DESCRIBE", uri: url)
            else { return false }
            status = c.request("DESCRIBE", url, cseq: 2, ["Authorization: \(answer)"])?.status
            return status == 200
        }
        #expect(status == 200)
        print(
            "FIGURE Digest guessing from 20 addresses for \(String(format: "%.1f", elapsed)) s (10 pipelined guesses per connection): \(total) wrong answers checked (\(String(format: "%.1f", totalRate))/s in all, at most \(String(format: "%.1f", maxRate))/s from one address: \(perAddress.map(String.init).joined(separator: " "))), \(refusedUnchecked) refused unchecked (503); the right password from a new address: \(status ?? -1) \(String(format: "%.1f", Date().timeIntervalSince(after))) s after the storm"
        )
        #expect(server.stop() == 0)
        #expect(server.out.contains("refused unchecked over the failure budget"), "\(server.out)")
    }

    /// An address off loopback needs --user or an explicit --no-auth (as `serve` needs a token or --no-auth).
    /// Issue #53: an answer without qop (RFC 2069, what live555 and GStreamer send) numbers nothing, so a sniffer who
    /// shares the client's address (NAT, the same host) could replay its DESCRIBE, SETUP and PLAY on a new
    /// connection. They are good only on the connection their nonce was issued on: the replay gets 401 every time,
    /// while the client's own connection plays on and its keep-alives (the same headers again) are accepted.
    @Test func anAnswerWithoutQopDoesNotReplayOnANewConnectionFromTheSameAddress() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--user", "admin"], name: "rtsp-noqop-replay", environment: ["CAMCAP_RTSP_PASSWORD": "right pw"])
        defer { _ = server.stop() }
        let url = server.url, track = server.url + "/trackID=0", from = "127.0.0.40"
        let client = try RawRTSP(port: server.port, from: from)
        let challenge = client.request("DESCRIBE", url, cseq: 1)?.header("WWW-Authenticate") ?? ""
        func auth(_ method: String, _ uri: String) throws -> String {
            "Authorization: " + (try digestAnswer(challenge, user: "admin", password: "right pw", method: method, uri: uri))
        }
        let describe = try auth("DESCRIBE", url), setup = try auth("SETUP", track), play = try auth("PLAY", url)
        let keepAlive = try auth("GET_PARAMETER", url)
        #expect(client.request("DESCRIBE", url, cseq: 2, [describe])?.status == 200)
        let setUp = client.request("SETUP", track, cseq: 3, [setup, "Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
        let session = String(setUp?.header("Session")?.prefix { $0 != ";" } ?? "")
        #expect(setUp?.status == 200 && !session.isEmpty, "\(setUp?.headers ?? [:])")
        #expect(client.request("PLAY", url, cseq: 4, [play, "Session: \(session)"])?.status == 200)
        #expect(client.waitForInterleaved(10))

        // The sniffer, from the same address on a new connection, replays the exchange header for header.
        let sniffer = try RawRTSP(port: server.port, from: from)
        let replayedDescribe = sniffer.request("DESCRIBE", url, cseq: 2, [describe])?.status
        let replayedSetup = sniffer.request("SETUP", track, cseq: 3, [setup, "Transport: RTP/AVP/TCP;unicast;interleaved=2-3"])?.status
        let replayedPlay = sniffer.request("PLAY", url, cseq: 4, [play, "Session: \(session)"])?.status
        #expect(replayedDescribe == 401 && replayedSetup == 401 && replayedPlay == 401, "\([replayedDescribe, replayedSetup, replayedPlay])")
        #expect(sniffer.interleavedFrames == 0)

        // The client's own connection: its keep-alive, the same headers again, is accepted, and the stream goes on.
        #expect(client.request("GET_PARAMETER", url, cseq: 5, [keepAlive, "Session: \(session)"])?.status == 200)
        #expect(client.request("GET_PARAMETER", url, cseq: 6, [keepAlive, "Session: \(session)"])?.status == 200)
        let before = client.interleavedFrames
        #expect(client.waitForInterleaved(before + 10), "the client's stream goes on")
        #expect(client.request("TEARDOWN", url, cseq: 7, [try auth("TEARDOWN", url), "Session: \(session)"])?.status == 200)
        #expect(server.stop() == 0)
        print(
            "FIGURE a no-qop Digest exchange replayed on a new connection from the same address: DESCRIBE \(replayedDescribe ?? -1), SETUP \(replayedSetup ?? -1), PLAY \(replayedPlay ?? -1); the client's own keep-alives 200, its stream went on"
        )
    }

    @Test func anAddressOffLoopbackNeedsUserOrNoAuth() throws {
        let refused = try sh(camcap, ["rtsp", "-d", "fixture:vivid", "--listen", "0.0.0.0:0", "--frames", "1"])
        #expect(refused.code != 0 && refused.err.contains("give --user") && refused.err.contains("--no-auth"), "\(refused.err)")
        let both = try runTool(camcap, ["rtsp", "--listen", "0.0.0.0:0", "--no-auth", "--user", "u"], environment: ["CAMCAP_RTSP_PASSWORD": "p"])
        #expect(both.code != 0 && both.err.contains("--no-auth cannot go with --user"), "\(both.err)")
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180", "--listen", "0.0.0.0:0", "--no-auth"], name: "rtsp-noauth")
        defer { _ = server.stop() }
        #expect(server.err.contains("note: --no-auth: anyone who can reach 0.0.0.0:0 can watch"), "\(server.err)")
        #expect(server.stop() == 0)
        print(
            "FIGURE rtsp --listen 0.0.0.0:0 without --user: refused (\(refused.err.split(separator: "\n").first ?? "")); with --no-auth it serves and says so"
        )
    }
}

/// Connections handed to another thread (each is used by one thread at a time).
final class Holders: @unchecked Sendable {
    // @unchecked: the keeper thread only sends on them while the test thread only reads their state.
    let list: [RawRTSP]
    init(_ list: [RawRTSP]) { self.list = list }
}

/// A flag set once, read from another thread.
final class Atomic3: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// A Digest answer to `challenge` (without qop, or with qop=auth and `nc`), hashed by Python's hashlib.
func digestAnswer(_ challenge: String, user: String, password: String, method: String, uri: String, nc: Int? = nil) throws -> String {
    func field(_ name: String) -> String {
        guard let r = challenge.range(of: name + "=\"") else { return "" }
        return String(challenge[r.upperBound...].prefix { $0 != "\"" })
    }
    let realm = field("realm"), nonce = field("nonce")
    let count = nc.map { String(format: "%08x", $0) } ?? ""
    let py =
        "import hashlib,sys; h=lambda s: hashlib.md5(s.encode()).hexdigest(); u,r,p,n,m,i,c=sys.argv[1:]; "
        + "a=h(u+':'+r+':'+p); b=h(m+':'+i); print(h(a+':'+n+':'+c+':0a4f113b:auth:'+b) if c else h(a+':'+n+':'+b))"
    let response = try sh("python3", ["-c", py, user, realm, password, nonce, method, uri, count]).out.trimmingCharacters(in: .whitespacesAndNewlines)
    return "Digest username=\"\(user)\", realm=\"\(realm)\", nonce=\"\(nonce)\", uri=\"\(uri)\", response=\"\(response)\""
        + (nc == nil ? "" : ", qop=auth, nc=\(count), cnonce=\"0a4f113b\"")
}
