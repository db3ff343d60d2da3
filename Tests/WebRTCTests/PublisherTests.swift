import Foundation
import Testing
import TestSupport
import Synchronization
@testable import WebRTC
import RTP
import H264

/// The test plays a WHIP server in-process (a full-ICE or ICE-lite agent that answers checks, a DTLS server
/// or client, SRTP), against a real `WebRTCPublisher` on loopback.
final class FakeServer {
    let udp: FakeBrowser
    let identity: DTLSIdentity
    let ufrag = "srvU", password = "server-password-0123456789"

    init(dtlsClient: Bool) throws {
        udp = try FakeBrowser()
        identity = try DTLSIdentity(profiles: [.aeadAes128Gcm, .aes128CmSha1_80], client: dtlsClient)
    }

    /// An answer to `offer` (its payload types kept) with our credentials, one candidate and `setup`.
    func answer(to offer: String, setup: String, candidatePort: Int? = nil) throws -> String {
        let video = try #require(try SDP.parse(offer).media.first)
        let extmap = video.values("extmap").first.map { "a=extmap:\($0)" }
        return [
            "v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0",
            "m=video 9 UDP/TLS/RTP/SAVPF \(video.payloadTypes.map(String.init).joined(separator: " "))", "c=IN IP4 127.0.0.1",
            "a=ice-ufrag:\(ufrag)", "a=ice-pwd:\(password)", "a=fingerprint:sha-256 \(identity.fingerprint)", "a=setup:\(setup)", "a=mid:0",
            "a=recvonly", "a=rtcp-mux", "a=rtpmap:96 H264/90000", "a=fmtp:96 packetization-mode=1;profile-level-id=42e01f",
            "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96",
            "a=candidate:1 1 udp 2015363327 127.0.0.1 \(candidatePort ?? Int(udp.port)) typ host",
            "a=candidate:2 1 tcp 1015363327 127.0.0.1 9 typ host tcptype active",
        ].compactMap { $0 }.joined(separator: "\r\n") + "\r\n" + (extmap.map { $0 + "\r\n" } ?? "")
    }
}

extension FakeServer {
    /// Answers the publisher's ICE checks (each one shown to `check`) and runs DTLS in the identity's role until
    /// connected (10 s at most); returns the association and its SRTP sessions (to the publisher, from it).
    func connect(
        publisherPort: Int, publisherFingerprint: String, check: (STUN.BindingRequest) -> Void = { _ in }
    ) throws -> (DTLSAssociation, SRTPSession, SRTPSession) {
        udp.target(publisherPort)
        let dtls = try DTLSAssociation(identity: identity, peerFingerprint: publisherFingerprint)
        var state = dtls.tick()
        dtls.drain { udp.send(Array($0)) }
        let deadline = Date().addingTimeInterval(10)
        while state != .connected && Date() < deadline {
            guard let d = udp.receive() else {
                state = dtls.tick()
                dtls.drain { udp.send(Array($0)) }
                continue
            }
            if case .request(let r) = d.withUnsafeBytes({ STUN.parseRequest($0, localUfrag: ufrag, localPassword: password) }) {
                check(r)
                udp.send(STUN.successResponse(to: r, address: [127, 0, 0, 1], port: UInt16(publisherPort), localPassword: password))
            } else if (20...63).contains(d[0]) {
                state = d.withUnsafeBytes { dtls.feed($0) }
            }
            dtls.drain { udp.send(Array($0)) }
            if case .failed(let e) = state { Issue.record("DTLS: \(e)") }
        }
        #expect(state == .connected)
        let (_, toPublisher, fromPublisher) = try dtls.srtpSessions()
        return (dtls, toPublisher, fromPublisher)
    }

    /// The next RTP packet from the publisher, unprotected (STUN, DTLS and RTCP skipped); nil when none comes.
    func receiveRTP(_ session: SRTPSession) -> [UInt8]? {
        while let d = udp.receive() {
            guard d[0] >= 128 && d[0] <= 191, !(192...223).contains(d[1]) else { continue }
            var p = d + [UInt8](repeating: 0, count: 64)
            if let n = p.withUnsafeMutableBytes({ session.unprotect($0, length: d.count, rtcp: false) }) { return Array(p[0..<n]) }
        }
        return nil
    }

    /// Protects `rtcp` with `session` and sends it to the publisher.
    func sendRTCP(_ session: SRTPSession, _ rtcp: [UInt8]) {
        var p = rtcp + [UInt8](repeating: 0, count: SRTPSession.overhead)
        let n = p.withUnsafeMutableBytes { session.protect($0, length: rtcp.count, rtcp: true) }
        udp.send(Array(p[0..<(n ?? 0)]))
    }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct PublisherTests {
    @Test(arguments: ["passive", "active"]) func iceDtlsSrtpMediaAndFeedbackAgainstAServer(_ setup: String) throws {
        let server = try FakeServer(dtlsClient: setup == "active")
        var c = WebRTCPublisher.Configuration()
        c.bindHost = "127.0.0.1"
        let publisherIdentity = try DTLSIdentity.eitherRole()
        let publisher = try WebRTCPublisher(identity: publisherIdentity, configuration: c, server: "127.0.0.1")
        defer { publisher.close() }
        // The offer: sendonly H.264 mode 1 with RTX, actpass, our candidate, the video-orientation extension.
        let offer = try #require(try SDP.parse(publisher.offer).media.first)
        for line in ["sendonly", "rtcp-mux"] { #expect(offer.values(line) == [""], "\(line)") }
        #expect(offer.values("setup") == ["actpass"] && offer.payloadTypes == [96, 97])
        #expect(offer.values("fmtp").contains("96 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"))
        #expect(offer.values("extmap") == ["3 urn:3gpp:video-orientation"])
        let candidate = try #require(offer.values("candidate").first)
        #expect(candidate.hasPrefix("1 1 udp ") && candidate.contains(" 127.0.0.1 \(offer.port) typ host"), "\(candidate)")

        try publisher.accept(answer: try server.answer(to: publisher.offer, setup: setup))
        #expect(publisher.answer?.weAreDTLSClient == (setup == "passive") && publisher.answer?.candidates.count == 1, "TCP skipped")
        #expect(publisher.receivesRotation && publisher.answer?.rtxPayloadType == 97)
        let connected = Box(false), keyRequests = Box(0), closed = Box<String?>(nil)
        try publisher.start(
            WebRTCPublisher.Handlers(
                connected: { connected.value.withLock { $0 = true } },
                keyFrameRequest: { keyRequests.value.withLock { $0 += 1 } },
                closed: { reason in closed.value.withLock { $0 = reason } }))

        // ICE: every check of the publisher carries USE-CANDIDATE and ICE-CONTROLLING, keyed with our password;
        // then DTLS, in the role the answer gave us.
        var checks = 0
        let (dtls, toPublisher, fromPublisher) = try server.connect(publisherPort: offer.port, publisherFingerprint: publisherIdentity.fingerprint) {
            request in
            #expect(request.useCandidate && request.iceControlling && request.username.hasSuffix(":") == false)
            checks += 1
        }
        #expect(checks >= 1)
        waitUntil(timeout: 10, every: 0.005) { connected.value.withLock { $0 } }
        #expect(publisher.isConnected && publisher.statistics.state == "connected")

        // Media: a delta frame before any key frame is held back; the key frame goes out, turned 90°.
        var delta = EncodedFrame()
        delta.data = [0, 0, 0, 1, 0x41, 1, 2, 3]
        delta.nalUnits = [NALUnit(type: .slice, offset: 4, length: 4)]
        publisher.send(delta)
        var frame = keyFrame(size: 3000)
        frame.rotation = .rotation90
        publisher.send(frame.stamped(1_000_000_000))
        var packets: [[UInt8]] = []
        while packets.count < 4, let p = server.receiveRTP(fromPublisher) { packets.append(p) }
        #expect(packets.count == 4 && packets.allSatisfy { $0[1] & 0x7f == 96 })
        #expect(packets.first.map { $0[12] & 0x1f } == 24, "a key frame first (STAP-A with SPS and PPS), the delta frame was not sent")
        #expect(packets.last.map { p in p.withUnsafeBytes { RTPHeader.oneByteExtension(id: 3, in: $0) } } == [1], "rotation 90°")
        let ssrc = packets[0][8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        #expect(publisher.offer.contains("a=ssrc:\(ssrc) cname:swift-video-capture"), "the SSRC the offer announced")

        // PLI from the server → a key-frame request.
        server.sendRTCP(toPublisher, RTCPWriter.pli(sender: 1, media: ssrc))
        waitUntil(timeout: 10, every: 0.005) { keyRequests.value.withLock { $0 } > 0 }
        #expect(keyRequests.value.withLock { $0 } == 1)

        // Close: BYE and close_notify reach the server.
        publisher.close(reason: "test")
        var sawClose = false
        while let d = server.udp.receive() {
            if (20...63).contains(d[0]), d.withUnsafeBytes({ dtls.feed($0) }) == .closed { sawClose = true }
        }
        #expect(sawClose && closed.value.withLock { $0 } == "test")
    }

    /// A publisher on loopback that gives up after 1 s without an ICE connection.
    static func publisherWithA1sConnectTimeout() throws -> WebRTCPublisher {
        var c = WebRTCPublisher.Configuration()
        c.bindHost = "127.0.0.1"
        c.connectTimeoutNs = 1_000_000_000
        return try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: c)
    }

    /// Accepts `answer`, starts, and waits (10 s at most) for the publisher to end; the reason it gives.
    static func runUntilClosed(_ publisher: WebRTCPublisher, answer: String) throws -> String {
        try publisher.accept(answer: answer)
        let closed = Box<String?>(nil)
        try publisher.start(WebRTCPublisher.Handlers(closed: { reason in closed.value.withLock { $0 = reason } }))
        waitUntil(timeout: 10, every: 0.01) { closed.value.withLock { $0 } != nil }
        return closed.value.withLock { $0 } ?? ""
    }

    /// A server that never answers: the publisher gives up at its connect timeout, naming the candidates.
    @Test func silentCandidatesEndThePublisherAtItsConnectTimeout() throws {
        let server = try FakeServer(dtlsClient: false)
        let publisher = try PublisherTests.publisherWithA1sConnectTimeout()
        let reason = try PublisherTests.runUntilClosed(publisher, answer: try server.answer(to: publisher.offer, setup: "passive"))
        #expect(reason.hasPrefix("no ICE connection within 1 s") && reason.contains("127.0.0.1:\(server.udp.port) (host)"), "\(reason)")
        #expect(publisher.statistics.checksSent >= 5 && publisher.statistics.checksAnswered == 0)
    }

    /// Issue #53: addresses ICE checks must never go to (the answer would aim our packets at others), and unicast
    /// ones they may.
    @Test func candidateAddressesThatAreNotUnicastHostsAreRefused() {
        let broadcasts: Set<String> = ["192.168.1.255"]
        func why(_ host: String) -> String? { ICECandidate.whyNotUnicast(host, broadcasts: broadcasts) }
        let refused: [(String, String)] = [
            ("224.0.0.1", "multicast (224.0.0.0/4)"), ("239.255.255.250", "multicast (224.0.0.0/4)"),
            ("255.255.255.255", "broadcast (255.255.255.255)"), ("0.0.0.0", "unspecified (0.0.0.0/8)"), ("0.1.2.3", "unspecified (0.0.0.0/8)"),
            ("240.0.0.0", "reserved (240.0.0.0/4)"), ("250.1.2.3", "reserved (240.0.0.0/4)"), ("255.255.255.254", "reserved (240.0.0.0/4)"),
            ("192.168.1.255", "the broadcast address of a local network"), ("::", "unspecified (::)"), ("ff02::1", "multicast (ff00::/8)"),
            ("ff0e::101", "multicast (ff00::/8)"), ("::ffff:224.0.0.1", "multicast (224.0.0.0/4)"),
            ("::ffff:255.255.255.255", "broadcast (255.255.255.255)"), ("::ffff:0.0.0.0", "unspecified (0.0.0.0/8)"),
            ("::10.1.2.3", "IPv4-compatible IPv6 (::/96, deprecated)"), ("example.org", "not an IP address"),
        ]
        for (host, reason) in refused { #expect(why(host) == reason, "\(host)") }
        for host in [
            "127.0.0.1", "10.0.0.5", "192.168.1.254", "192.168.2.255", "172.16.0.1", "169.254.3.4", "100.64.0.1", "8.8.8.8", "223.255.255.254",
            "::1", "fe80::1", "2001:db8::1", "fd00::5", "::ffff:10.0.0.5", "64:ff9b::808:808",
        ] {
            #expect(why(host) == nil, "\(host): \(why(host) ?? "")")
        }
        // Without a list given, the system's interfaces' broadcast addresses are used; loopback stays unicast.
        #expect(ICECandidate.whyNotUnicast("127.0.0.1") == nil && ICECandidate.whyNotUnicast("224.0.0.1") != nil)
    }

    /// An answer whose best candidates are multicast, broadcast or unspecified: they are ignored and counted, every
    /// check the publisher sends goes to the one unicast candidate (the library's own count of checks sent equals
    /// the datagrams that candidate received), and an answer with nothing else is refused with the reason.
    @Test func weirdCandidatesAreIgnoredCountedAndGetNoCheck() throws {
        let server = try FakeServer(dtlsClient: false)
        let publisher = try PublisherTests.publisherWithA1sConnectTimeout()
        let weird = ["224.0.0.1", "255.255.255.255", "0.0.0.0", "240.0.0.1", "ff02::1", "::", "::ffff:224.0.0.1"]
        let lines = weird.enumerated().map { "a=candidate:\($0.offset + 3) 1 udp \(2_130_706_431 - $0.offset) \($0.element) 40404 typ host\r\n" }
        let answer = try server.answer(to: publisher.offer, setup: "passive") + lines.joined()
        let parsed = try WebRTCAnswer(answer, payloadType: 96, rtxPayloadType: 97)
        #expect(parsed.candidates.map(\.host) == ["127.0.0.1"])
        #expect(parsed.ignoredCandidateCount == weird.count && parsed.ignoredCandidates.map(\.candidate.host) == weird)
        #expect(parsed.ignoredCandidates.first?.reason == "multicast (224.0.0.0/4)")
        // Nothing but weird candidates: refused, saying why.
        let onlyWeird = answer.replacingOccurrences(of: "a=candidate:1 1 udp 2015363327 127.0.0.1 \(server.udp.port) typ host\r\n", with: "")
        do {
            _ = try WebRTCAnswer(onlyWeird, payloadType: 96, rtxPayloadType: 97)
            Issue.record("an answer with only weird candidates was accepted")
        } catch {
            #expect(
                error.message.contains("no UDP candidate with a unicast IP address")
                    && error.message.contains("7 not unicast ignored: 224.0.0.1 (multicast"), "\(error.message)")
        }

        // The real candidate never answers: the publisher checks every 100 ms until its 1 s connect timeout.
        let reason = try PublisherTests.runUntilClosed(publisher, answer: answer)
        #expect(reason.hasPrefix("no ICE connection within 1 s") && !reason.contains("224.0.0.1"), "\(reason)")
        var received = 0
        while server.udp.receive(timeoutMs: 0) != nil { received += 1 }
        let s = publisher.statistics
        #expect(s.candidatesIgnored == weird.count)
        #expect(s.checksSent >= 5 && s.checksSent == received, "\(s.checksSent) checks sent, \(received) received by the one unicast candidate")
        print(
            "FIGURE weird candidates (library): \(s.candidatesIgnored) ignored; \(s.checksSent) checks sent, all \(received) to the unicast candidate"
        )
    }

    @Test func answersThatCannotConnectAreRefusedWithTheReason() throws {
        let server = try FakeServer(dtlsClient: false)
        let publisher = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole())
        defer { publisher.close() }
        let good = try server.answer(to: publisher.offer, setup: "passive")
        func refusal(_ answer: String) -> String {
            do {
                _ = try WebRTCAnswer(answer, payloadType: 96, rtxPayloadType: 97)
                return "accepted"
            } catch { return error.message }
        }
        #expect(refusal(good) == "accepted")
        #expect(refusal(good.replacingOccurrences(of: "a=setup:passive", with: "a=setup:actpass")).contains("must be active or passive"))
        #expect(refusal(good.replacingOccurrences(of: "m=video 9", with: "m=video 0")).contains("rejects the video"))
        #expect(refusal(good.replacingOccurrences(of: "udp 2015363327", with: "tcp 2015363327")).contains("no UDP candidate"))
        #expect(
            refusal(good.replacingOccurrences(of: "127.0.0.1 \(server.udp.port)", with: "abc.local \(server.udp.port)")).contains("no UDP candidate"))
        #expect(refusal(good.replacingOccurrences(of: "SAVPF 96 97", with: "SAVPF 100")).contains("does not accept our H.264"))
        #expect(refusal(good.replacingOccurrences(of: "a=fingerprint:sha-256", with: "a=fingerprint:sha-1")).contains("sha-256"))
        #expect(refusal(String(repeating: "x", count: 70_000)).contains("64 KiB"))
        // Without RTX in the answer, retransmissions go on the media stream; a bad candidate port is skipped.
        let noRTX = try WebRTCAnswer(good.replacingOccurrences(of: "SAVPF 96 97", with: "SAVPF 96"), payloadType: 96, rtxPayloadType: 97)
        #expect(noRTX.rtxPayloadType == nil)
        #expect(refusal(good.replacingOccurrences(of: "127.0.0.1 \(server.udp.port) typ", with: "127.0.0.1 70000 typ")).contains("no UDP candidate"))
    }
}
