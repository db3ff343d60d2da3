import Foundation
import Testing
import TestSupport
@testable import WebRTC
import RTP

@Suite struct STUNTests {
    /// RFC 5769 §2.1 sample request (username "evtj:h6vY", password "VOkJxbRl1RmTxUk/WvJxBt").
    static let sampleRequest: [UInt8] = [
        0x00, 0x01, 0x00, 0x58, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae,
        0x80, 0x22, 0x00, 0x10, 0x53, 0x54, 0x55, 0x4e, 0x20, 0x74, 0x65, 0x73, 0x74, 0x20, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74,
        0x00, 0x24, 0x00, 0x04, 0x6e, 0x00, 0x01, 0xff, 0x80, 0x29, 0x00, 0x08, 0x93, 0x2f, 0xf9, 0xb1, 0x51, 0x26, 0x3b, 0x36,
        0x00, 0x06, 0x00, 0x09, 0x65, 0x76, 0x74, 0x6a, 0x3a, 0x68, 0x36, 0x76, 0x59, 0x20, 0x20, 0x20, 0x00, 0x08, 0x00, 0x14,
        0x9a, 0xea, 0xa7, 0x0c, 0xbf, 0xd8, 0xcb, 0x56, 0x78, 0x1e, 0xf2, 0xb5, 0xb2, 0xd3, 0xf2, 0x49, 0xc1, 0xb5, 0x71, 0xa2,
        0x80, 0x28, 0x00, 0x04, 0xe5, 0x7a, 0x3b, 0xcf,
    ]

    @Test func rfc5769RequestAuthenticates() {
        let r = Self.sampleRequest.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt") }
        guard case .request(let req) = r else {
            Issue.record("\(r)")
            return
        }
        #expect(req.username == "evtj:h6vY")
        #expect(req.priority == 0x6e0001ff)
        #expect(req.iceControlling == false && req.useCandidate == false)
        let wrong = Self.sampleRequest.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: "wrong-password-of-22-chars") }
        #expect(wrong == .ignored("STUN MESSAGE-INTEGRITY does not match our ice-pwd"))
        var flipped = Self.sampleRequest
        flipped[30] ^= 1
        let bad = flipped.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt") }
        #expect(bad == .ignored("STUN FINGERPRINT mismatch"))
    }

    /// RFC 5769 §2.2: the sample IPv4 response's XOR-MAPPED-ADDRESS (192.0.2.1:32853) and its integrity/fingerprint
    /// structure; our response must carry the same attribute bytes for the same transaction and address.
    @Test func responseCarriesXorMappedAddressIntegrityAndFingerprint() {
        guard
            case .request(let req) = Self.sampleRequest.withUnsafeBytes({
                STUN.parseRequest($0, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt")
            })
        else {
            Issue.record("parse")
            return
        }
        let m = STUN.successResponse(to: req, address: [192, 0, 2, 1], port: 32853, localPassword: "VOkJxbRl1RmTxUk/WvJxBt")
        #expect(Array(m[0..<2]) == [0x01, 0x01])
        #expect(Array(m[20..<32]) == [0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43])
        #expect(Int(m[2]) << 8 | Int(m[3]) == m.count - 20)
        // Integrity: HMAC over the message up to the attribute, with the length counting it.
        var covered = Array(m[0..<32])
        covered[3] = UInt8(32 - 20 + 24)
        #expect(Array(m[36..<56]) == STUN.hmacSHA1(key: Array("VOkJxbRl1RmTxUk/WvJxBt".utf8), covered))
        let crc = STUN.crc32(m[0..<56]) ^ 0x5354_554e
        #expect(Array(m[56..<64]) == [0x80, 0x28, 0, 4, UInt8(crc >> 24), UInt8((crc >> 16) & 0xff), UInt8((crc >> 8) & 0xff), UInt8(crc & 0xff)])
    }

    @Test func malformedSTUNIsIgnoredNeverTraps() {
        var rng = SystemRandomNumberGenerator()
        for n in 0..<2000 {
            var m = Self.sampleRequest
            let k = Int.random(in: 0..<m.count, using: &rng)
            m[k] = UInt8.random(in: 0...255, using: &rng)
            if n % 3 == 0 { m = Array(m.prefix(Int.random(in: 0...m.count, using: &rng))) }
            _ = m.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt") }
        }
    }
}

/// The one walk over a STUN message's attributes (`STUN.Message.walk`) that parseRequest and parseResponse share.
@Suite struct STUNAttributeWalkTests {
    /// The attributes `walk` visits in `m`, and why it found the message malformed (nil: well formed).
    static func walk(_ m: [UInt8]) -> (attributes: [STUN.Attribute], stopped: String?) {
        m.withUnsafeBytes { p in
            guard let message = STUN.Message(p) else { return ([], "not STUN") }
            var seen: [STUN.Attribute] = []
            let walked = message.walk { seen.append($0) }
            if case .malformed(let reason) = walked { return (seen, reason) }
            return (seen, nil)
        }
    }

    /// A message of `type` with the given attributes, each padded to 4 bytes, and the header's length counting them.
    static func message(type: UInt16 = 0x0001, _ attributes: [(UInt16, [UInt8])]) -> [UInt8] {
        var m: [UInt8] = [UInt8(type >> 8), UInt8(type & 0xff), 0, 0, 0x21, 0x12, 0xA4, 0x42] + [UInt8](repeating: 7, count: 12)
        for (t, v) in attributes {
            m += [UInt8(t >> 8), UInt8(t & 0xff), UInt8(v.count >> 8), UInt8(v.count & 0xff)] + v
            while m.count % 4 != 0 { m.append(0) }
        }
        m[2] = UInt8((m.count - 20) >> 8)
        m[3] = UInt8((m.count - 20) & 0xff)
        return m
    }

    @Test func everyAttributeIsVisitedWithItsValueAndOddLengthsSkipTheirPadding() {
        let (attributes, stopped) = Self.walk(STUNTests.sampleRequest)
        #expect(stopped == nil)
        #expect(attributes.map(\.type) == [0x8022, 0x0024, 0x8029, 0x0006, 0x0008, 0x8028])
        #expect(attributes.map(\.offset) == [20, 40, 48, 60, 76, 100])
        // USERNAME "evtj:h6vY" is 9 bytes: its 3 bytes of padding are not part of the value and are stepped over.
        #expect(attributes[3].value == 64..<73)
        #expect(attributes[3].length == 9)
        #expect(attributes[5].value == 104..<108)

        let odd = Self.message([(0x0006, Array("abcde".utf8)), (0x0025, []), (0x0024, [0, 0, 0, 1])])
        let walked = Self.walk(odd)
        #expect(walked.stopped == nil)
        #expect(
            walked.attributes == [
                STUN.Attribute(type: 0x0006, offset: 20, value: 24..<29), STUN.Attribute(type: 0x0025, offset: 32, value: 36..<36),
                STUN.Attribute(type: 0x0024, offset: 36, value: 40..<44),
            ])
    }

    @Test func aTruncatedMessageIsRefusedBeforeAnyAttribute() {
        let cut = Array(STUNTests.sampleRequest.prefix(100))
        let walked = Self.walk(cut)
        #expect(walked.attributes.isEmpty)
        #expect(walked.stopped == "STUN length 88 does not fit 100 bytes")
        #expect(Self.walk(Array(STUNTests.sampleRequest.prefix(19))).stopped == "not STUN")
        let request = cut.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt") }
        #expect(request == .ignored("STUN length 88 does not fit 100 bytes"))
        var response = Self.message(type: 0x0101, [(0x0020, [0, 1, 0, 0, 0, 0, 0, 0])])
        response.removeLast(2)
        #expect(response.withUnsafeBytes { STUN.parseResponse($0, remotePassword: "p") } == .ignored("STUN length 12 does not fit 30 bytes"))
    }

    @Test func aLengthThatCountsAnOddValueButNotItsPaddingIsRefused() {
        // "abcde" counted without its 3 bytes of padding: 9, not a multiple of 4.
        var m = Self.message([(0x0006, Array("abcde".utf8))])
        m[3] = 9
        #expect(Self.walk(m).stopped == "STUN length 9 does not fit 32 bytes")
        #expect(Self.walk(Array(m.prefix(29))).stopped == "STUN length 9 does not fit 29 bytes")
    }

    @Test func anAttributeWhoseLengthRunsPastTheEndIsRefused() {
        var m = STUNTests.sampleRequest
        m[62...63] = [0x00, 0x30] // USERNAME of 48 bytes: past the message's 108
        let walked = Self.walk(m)
        #expect(walked.stopped == "STUN attribute 0x6 of 48 bytes overruns the message")
        #expect(walked.attributes.map(\.type) == [0x8022, 0x0024, 0x8029]) // the ones before it were visited
        #expect(
            m.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: "VOkJxbRl1RmTxUk/WvJxBt") }
                == .ignored("STUN attribute 0x6 of 48 bytes overruns the message"))
        // The last attribute's value one byte past the end (inside the datagram, outside the message).
        var last = STUNTests.sampleRequest + [0, 0, 0, 0]
        last[103] = 5
        #expect(Self.walk(last).stopped == "STUN attribute 0x8028 of 5 bytes overruns the message")
        // The same in a response.
        var response = Self.message(type: 0x0101, [(0x0009, [0, 0, 4, 87]), (0x0008, [UInt8](repeating: 0, count: 20))])
        response[22...23] = [0xff, 0xfc]
        #expect(
            response.withUnsafeBytes { STUN.parseResponse($0, remotePassword: "p") }
                == .ignored("STUN attribute 0x9 of 65532 bytes overruns the message"))
    }

    @Test func onlyFingerprintMayFollowMessageIntegrityInRequestsAndResponses() {
        let password = "VOkJxbRl1RmTxUk/WvJxBt"
        guard case .request(let req) = STUNTests.sampleRequest.withUnsafeBytes({ STUN.parseRequest($0, localUfrag: "evtj", localPassword: password) })
        else {
            Issue.record("the RFC 5769 request did not parse")
            return
        }
        let response = STUN.successResponse(to: req, address: [192, 0, 2, 1], port: 32853, localPassword: password)
        #expect(response.withUnsafeBytes { STUN.parseResponse($0, remotePassword: password) } == .success(transactionID: req.transactionID))
        var renamed = response
        renamed[56...57] = [0x80, 0x22] // FINGERPRINT's place taken by SOFTWARE
        #expect(renamed.withUnsafeBytes { STUN.parseResponse($0, remotePassword: password) } == .ignored("STUN attribute after MESSAGE-INTEGRITY"))
        var request = STUNTests.sampleRequest
        request[100...101] = [0x80, 0x22]
        #expect(
            request.withUnsafeBytes { STUN.parseRequest($0, localUfrag: "evtj", localPassword: password) }
                == .ignored("STUN attribute after MESSAGE-INTEGRITY"))
        // A second MESSAGE-INTEGRITY is an attribute after the first.
        let twice = Self.message(type: 0x0101, [(0x0008, [UInt8](repeating: 0, count: 20)), (0x0008, [UInt8](repeating: 0, count: 20))])
        #expect(Self.walk(twice).stopped == "STUN attribute after MESSAGE-INTEGRITY")
    }

    @Test func theWalkFindsMessageIntegrityAndChecksFingerprintAndTheirSizes() {
        STUNTests.sampleRequest.withUnsafeBytes { p in #expect(STUN.Message(p)?.walk { _ in } == .wellFormed(integrityAt: 76)) }
        let none = Self.message([(0x0006, Array("abcde".utf8))])
        none.withUnsafeBytes { p in #expect(STUN.Message(p)?.walk { _ in } == .wellFormed(integrityAt: nil)) }
        var badFingerprint = STUNTests.sampleRequest
        badFingerprint[107] ^= 1
        #expect(Self.walk(badFingerprint).stopped == "STUN FINGERPRINT mismatch")
        let shortIntegrity = Self.message([(0x0008, [UInt8](repeating: 0, count: 16))])
        #expect(Self.walk(shortIntegrity).stopped == "MESSAGE-INTEGRITY of 16 bytes")
        let longFingerprint = Self.message([(0x8028, [0, 0, 0, 0, 0])])
        #expect(Self.walk(longFingerprint).stopped == "FINGERPRINT of 5 bytes")
        #expect(
            longFingerprint.withUnsafeBytes { STUN.parseResponse($0, remotePassword: "p") }
                == .ignored("STUN message type 0x1 is not a Binding response"))
        let response = Self.message(type: 0x0101, [(0x8028, [0, 0, 0, 0, 0])])
        #expect(response.withUnsafeBytes { STUN.parseResponse($0, remotePassword: "p") } == .ignored("FINGERPRINT of 5 bytes"))
    }

    @Test func randomBytesNeverTrapAndEveryValueLiesInsideTheMessage() {
        var rng = SystemRandomNumberGenerator()
        for n in 0..<3000 {
            var m = n % 2 == 0 ? STUNTests.sampleRequest : Self.message([(0x0006, Array("abcde".utf8)), (0x0025, [])])
            for _ in 0..<(1 + n % 3) { m[Int.random(in: 0..<m.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            m[4...7] = [0x21, 0x12, 0xA4, 0x42]
            m[0] &= 3
            if n % 5 == 0 { m = Array(m.prefix(Int.random(in: 20...m.count, using: &rng))) }
            let (attributes, stopped) = Self.walk(m)
            let end = 20 + Int(m[2]) << 8 + Int(m[3])
            for a in attributes {
                #expect(a.offset >= 20 && a.value.lowerBound == a.offset + 4 && a.value.upperBound <= end && end <= m.count)
            }
            if stopped == nil { #expect(end <= m.count && end % 4 == 0) }
            _ = m.withUnsafeBytes { STUN.parseResponse($0, remotePassword: "p") }
        }
    }
}

@Suite struct SRTPTests {
    @Test(arguments: [SRTPProfile.aes128CmSha1_80, .aeadAes128Gcm])
    func protectThenUnprotectRoundTrips(_ profile: SRTPProfile) throws {
        let key = (0..<(profile == .aes128CmSha1_80 ? 30 : 28)).map { UInt8($0 * 7 & 0xff) }
        let out = try SRTPSession(profile: profile, key: key, outbound: true)
        let inb = try SRTPSession(profile: profile, key: key, outbound: false)
        var packet = [UInt8](repeating: 0, count: 1300)
        let plain: [UInt8] = [0x80, 0x60, 0x12, 0x34, 0, 0, 0x10, 0, 0xde, 0xad, 0xbe, 0xef] + (0..<1000).map { UInt8($0 & 0xff) }
        packet.replaceSubrange(0..<plain.count, with: plain)
        let n = try #require(packet.withUnsafeMutableBytes { out.protect($0, length: plain.count, rtcp: false) })
        #expect(n > plain.count && Array(packet[12..<plain.count]) != Array(plain[12...]))
        let back = try #require(packet.withUnsafeMutableBytes { inb.unprotect($0, length: n, rtcp: false) })
        #expect(back == plain.count && Array(packet[0..<back]) == plain)
        // A retransmission of the same sequence number is allowed on the sending side (allow_repeat_tx).
        packet.replaceSubrange(0..<plain.count, with: plain)
        #expect(packet.withUnsafeMutableBytes { out.protect($0, length: plain.count, rtcp: false) } != nil)
        // A tampered packet fails authentication.
        packet.replaceSubrange(0..<plain.count, with: plain)
        plain.withUnsafeBytes { _ in }
        var p2 = [UInt8](repeating: 0, count: 1300)
        p2.replaceSubrange(0..<plain.count, with: plain)
        p2[3] = 0x35
        let n2 = try #require(p2.withUnsafeMutableBytes { out.protect($0, length: plain.count, rtcp: false) })
        p2[40] ^= 1
        #expect(p2.withUnsafeMutableBytes { inb.unprotect($0, length: n2, rtcp: false) } == nil)
    }

    @Test func identityHasAP256FingerprintAndWrongKeysAreRefused() throws {
        let id = try DTLSIdentity()
        #expect(id.fingerprint.count == 95 && id.fingerprint.split(separator: ":").count == 32)
        #expect(try DTLSIdentity().fingerprint != id.fingerprint)
        #expect(throws: WebRTCError.self) { try SRTPSession(profile: .aes128CmSha1_80, key: [1, 2, 3], outbound: true) }
    }
}

@Suite struct NegotiationTests {
    @Test func chromiumOfferPicksConstrainedBaselineModeOne() throws {
        let o = try WebRTCOffer(chromiumOffer)
        #expect(o.payloadType == 108 && o.profileLevelID == "42e01f" && o.rtxPayloadType == 109)
        #expect(o.iceUfrag == "kaYF" && o.icePassword == "Xzc2seJp3ohNAVb89pZhZ3eY" && o.mid == "0")
        #expect(o.fingerprint.hasPrefix("5A:BA:85:3B") && o.fingerprint.count == 95)
        let a = o.answer(
            iceUfrag: "abcd", icePassword: String(repeating: "p", count: 24), fingerprint: "AA:BB", hosts: ["127.0.0.1"],
            port: 40000, ssrc: 1234, rtxSSRC: 5678)
        for line in [
            "a=group:BUNDLE 0", "a=ice-lite", "m=video 40000 UDP/TLS/RTP/SAVPF 108 109", "a=setup:passive", "a=mid:0",
            "a=rtcp-mux", "a=sendonly", "a=rtpmap:108 H264/90000", "a=rtcp-fb:108 nack pli", "a=rtcp-fb:108 goog-remb",
            "a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", "a=fmtp:109 apt=108",
            "a=ssrc-group:FID 1234 5678", "a=candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host", "a=fingerprint:sha-256 AA:BB",
        ] {
            #expect(a.contains(line + "\r\n"), "answer lacks \(line)")
        }
        #expect(try SDP.parse(a).media.count == 1)
    }

    @Test func theVideoOrientationExtensionIsAcceptedOnlyWhenOfferedWithAOneByteIdThatReceives() throws {
        let id = { (line: String) throws -> UInt8? in
            try WebRTCOffer(chromiumOffer.replacingOccurrences(of: "a=extmap:3 urn:3gpp:video-orientation", with: line)).videoOrientationExtensionID
        }
        #expect(try WebRTCOffer(chromiumOffer).videoOrientationExtensionID == 3)
        #expect(try id("a=extmap:14/recvonly urn:3gpp:video-orientation") == 14)
        #expect(try id("a=extmap:7/sendrecv urn:3gpp:video-orientation") == 7)
        // Not offered, a direction that does not receive, ids of the two-byte form or none: no extension.
        for line in [
            "a=extmap:12 urn:example:other", "a=extmap:3/sendonly urn:3gpp:video-orientation", "a=extmap:3/inactive urn:3gpp:video-orientation",
            "a=extmap:15 urn:3gpp:video-orientation", "a=extmap:0 urn:3gpp:video-orientation", "a=extmap:300 urn:3gpp:video-orientation",
            "a=extmap:/ urn:3gpp:video-orientation", "a=extmap:/recvonly urn:3gpp:video-orientation", "a=extmap:urn:3gpp:video-orientation",
        ] {
            #expect(try id(line) == nil, "\(line)")
        }
        let o = try WebRTCOffer(chromiumOffer)
        func answer(_ orientation: Bool) -> String {
            o.answer(
                iceUfrag: "abcd", icePassword: String(repeating: "p", count: 24), fingerprint: "AA:BB", hosts: ["127.0.0.1"], port: 40000,
                ssrc: 1, videoOrientation: orientation)
        }
        #expect(answer(true).contains("a=extmap:3 urn:3gpp:video-orientation\r\n") && !answer(false).contains("extmap"))
        // A peer told not to use it answers without it, and says so.
        var c = WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"])
        c.useVideoOrientation = false
        let peer = try WebRTCPeer(offer: o, identity: try DTLSIdentity(), configuration: c)
        defer { peer.close() }
        #expect(!peer.receivesRotation && !peer.answer.contains("extmap"))
    }

    /// A camera's own H.264 passed through is answered with a payload type whose profile decodes it (Chromium 156
    /// offers Baseline, Constrained Baseline, Main and High 4:4:4 Predictive); a High stream it cannot take is
    /// refused naming the stream's profile, never sent to a decoder that would show garbage.
    @Test func aPassedThroughStreamGetsAPayloadTypeThatDecodesIt() throws {
        #expect(try WebRTCOffer(chromiumOffer).payloadType == 108) // our encoder: Constrained Baseline
        #expect(try WebRTCOffer(chromiumOffer, stream: "42e01f").payloadType == 108)
        #expect(try WebRTCOffer(chromiumOffer, stream: "42c028").payloadType == 108)
        #expect(try WebRTCOffer(chromiumOffer, stream: "420028").payloadType == 102) // Baseline (FMO/ASO) needs a Baseline receiver
        #expect(try WebRTCOffer(chromiumOffer, stream: "4d0028").payloadType == 116)
        #expect(try WebRTCOffer(chromiumOffer, stream: "4d0028").profileLevelID == "4d001f")
        do {
            _ = try WebRTCOffer(chromiumOffer, stream: "640028")
            Issue.record("a High stream was answered for an offer without High")
        } catch {
            #expect(error.code == .unsupportedCodec && error.message.contains("640028") && error.message.contains("116: 4d001f"), "\(error)")
        }
        let high = chromiumOffer.replacingOccurrences(of: "profile-level-id=4d001f", with: "profile-level-id=640c1f")
        #expect(throws: WebRTCError.self) { try WebRTCOffer(high, stream: "640028") } // Constrained High cannot take High
        let highFull = chromiumOffer.replacingOccurrences(of: "profile-level-id=4d001f", with: "profile-level-id=64001f")
        #expect(try WebRTCOffer(highFull, stream: "640028").payloadType == 116)
        #expect(try WebRTCOffer(highFull, stream: "4d0028").payloadType == 116) // a High decoder decodes Main
        #expect(throws: WebRTCError.self) { try WebRTCOffer(chromiumOffer, stream: "zz") }
    }

    @Test func offersWithoutUsableH264AreRefusedWithTheReason() {
        let noH264 = chromiumOffer.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).filter { !$0.contains("H264") }.joined(separator: "\r\n")
        #expect(throws: WebRTCError.self) { try WebRTCOffer(noH264) }
        do { _ = try WebRTCOffer(noH264) } catch {
            #expect(error.message.contains("no H.264") && error.message.contains("VP8") && error.message.contains("AV1"), "\(error)")
        }
        let modeZero = chromiumOffer.replacingOccurrences(of: "packetization-mode=1", with: "packetization-mode=0")
        do {
            _ = try WebRTCOffer(modeZero)
            Issue.record("accepted")
        } catch { #expect(error.message.contains("packetization-mode=1"), "\(error)") }
        let sendonly = chromiumOffer.replacingOccurrences(of: "a=recvonly", with: "a=sendonly")
        do {
            _ = try WebRTCOffer(sendonly)
            Issue.record("accepted")
        } catch { #expect(error.message.contains("sendonly")) }
        let noFingerprint = chromiumOffer.replacingOccurrences(of: "a=fingerprint:", with: "a=x-fingerprint:")
        do {
            _ = try WebRTCOffer(noFingerprint)
            Issue.record("accepted")
        } catch { #expect(error.message.contains("fingerprint")) }
        do {
            _ = try WebRTCOffer("v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n")
            Issue.record("accepted")
        } catch { #expect(error.message.contains("no video")) }
        do {
            _ = try WebRTCOffer(String(repeating: "a", count: 70_000))
            Issue.record("accepted")
        } catch { #expect(error.message.contains("64 KiB")) }
    }

    /// An offer with audio and a data channel besides the video: only the video is answered (and bundled).
    @Test func otherSectionsAreRejectedWithPortZero() throws {
        let lines = chromiumOffer.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).map(String.init)
        let video = Array(lines.drop { !$0.hasPrefix("m=video") })
        let session = Array(lines.prefix { !$0.hasPrefix("m=") }).map { $0 == "a=group:BUNDLE 0" ? "a=group:BUNDLE a 0 d" : $0 }
        let audio = ["m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 0.0.0.0", "a=mid:a", "a=recvonly", "a=rtpmap:111 opus/48000/2"]
        let data = ["m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0", "a=mid:d", "a=sctp-port:5000"]
        let o = try WebRTCOffer((session + audio + video + data).joined(separator: "\r\n") + "\r\n")
        #expect(o.videoIndex == 1 && o.mid == "0")
        let a = try SDP.parse(
            o.answer(iceUfrag: "abcd", icePassword: String(repeating: "p", count: 24), fingerprint: "AA", hosts: ["127.0.0.1"], port: 5, ssrc: 9))
        #expect(a.media.map(\.kind) == ["audio", "video", "application"])
        #expect(a.media.map(\.port) == [0, 5, 0])
        #expect(a.media[0].values("mid") == ["a"] && a.media[2].values("mid") == ["d"])
        #expect(a.sessionAttributes.contains { $0.0 == "group" && $0.1 == "BUNDLE 0" })
    }

    @Test func mutatedOffersNeverTrap() {
        var rng = SystemRandomNumberGenerator()
        let bytes = Array(chromiumOffer.utf8)
        for _ in 0..<300 {
            var b = bytes
            for _ in 0..<8 { b[Int.random(in: 0..<b.count, using: &rng)] = UInt8.random(in: 0...127, using: &rng) }
            if let o = try? WebRTCOffer(String(decoding: b, as: UTF8.self)) {
                _ = o.answer(iceUfrag: "abcd", icePassword: "pppppppppppppppppppppppp", fingerprint: "AA", hosts: ["::1"], port: 1, ssrc: 1)
            }
        }
    }
}

/// The absolute capture time and playout delay extensions: taken from the offer (Chromium offers abs-capture-time
/// only when the page asks), answered when the peer is configured to use them, and reported by the peer.
@Suite struct CaptureTimeNegotiationTests {
    static let withCaptureTime = chromiumOffer.replacingOccurrences(
        of: "a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id",
        with: "a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id\r\na=extmap:13 \(WebRTCOffer.absoluteCaptureTimeURI)")

    @Test func bothExtensionsAreAnsweredWhenOfferedAndConfigured() throws {
        let plain = try WebRTCOffer(chromiumOffer)
        #expect(plain.absoluteCaptureTimeExtensionID == nil && plain.playoutDelayExtensionID == 5)
        let o = try WebRTCOffer(CaptureTimeNegotiationTests.withCaptureTime)
        #expect(o.absoluteCaptureTimeExtensionID == 13 && o.playoutDelayExtensionID == 5)
        var c = WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"])
        // Defaults: the capture time when offered, no playout delay.
        let byDefault = try WebRTCPeer(offer: o, identity: try DTLSIdentity(), configuration: c)
        defer { byDefault.close() }
        #expect(byDefault.sendsCaptureTime && byDefault.playoutDelay == nil)
        #expect(byDefault.answer.contains("a=extmap:13 \(WebRTCOffer.absoluteCaptureTimeURI)\r\n") && !byDefault.answer.contains("playout-delay"))
        #expect(byDefault.sender.configuration.absoluteCaptureTimeExtensionID == 13 && byDefault.sender.configuration.playoutDelay == nil)
        c.playoutDelay = PlayoutDelay(minMs: 0, maxMs: 100)
        c.useAbsoluteCaptureTime = false
        let delayed = try WebRTCPeer(offer: o, identity: try DTLSIdentity(), configuration: c)
        defer { delayed.close() }
        #expect(!delayed.sendsCaptureTime && delayed.playoutDelay == PlayoutDelay(minMs: 0, maxMs: 100))
        #expect(delayed.answer.contains("a=extmap:5 \(WebRTCOffer.playoutDelayURI)\r\n") && !delayed.answer.contains("abs-capture-time"))
        #expect(delayed.sender.configuration.playoutDelayExtensionID == 5)
        // Not offered: not answered, whatever the configuration.
        c.useAbsoluteCaptureTime = true
        let without = chromiumOffer.replacingOccurrences(of: "a=extmap:5 \(WebRTCOffer.playoutDelayURI)\r\n", with: "")
        let none = try WebRTCPeer(offer: try WebRTCOffer(without), identity: try DTLSIdentity(), configuration: c)
        defer { none.close() }
        #expect(!none.sendsCaptureTime && none.playoutDelay == nil && !none.answer.contains("abs-capture") && !none.answer.contains("playout"))
    }
}
