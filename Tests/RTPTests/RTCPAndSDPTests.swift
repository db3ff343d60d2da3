import Foundation
import Testing
import RTP
import TestSupport

/// The fixtures (Fixtures/rtcp, Fixtures/sdp): the fuzzers' seeds and the crashes they found are regression inputs here too.
let fixtures = URL(fileURLWithPath: fixturesRoot)

func parse(_ bytes: [UInt8]) throws(RTCPParseError) -> [RTCPPacket] {
    let result = bytes.withUnsafeBytes { p in Result { () throws(RTCPParseError) -> [RTCPPacket] in try RTCPPacket.parseCompound(p) } }
    return try result.get()
}

@Suite struct RTCPTests {
    func seed(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: fixtures.appendingPathComponent("rtcp/\(name).bin"))) }

    @Test func compoundPacketsParseIntoTheirParts() throws {
        let sr = try parse(try seed("sr-sdes"))
        #expect(sr.count == 2)
        guard case .senderReport(let ssrc, _, let rtp, let packets, let octets, let reports)? = sr.first else {
            Issue.record("\(sr)")
            return
        }
        #expect(ssrc == 0x11223344 && rtp == 1234 && packets == 10 && octets == 1000 && reports.isEmpty)
        #expect(sr.last == .other(type: 202, format: 1))
        let rr = try parse(try seed("rr-pli"))
        guard case .receiverReport(_, let blocks)? = rr.first, let b = blocks.first else {
            Issue.record("\(rr)")
            return
        }
        #expect(
            b.ssrc == 0x11223344 && b.fractionLost == 10 && b.cumulativeLost == 5 && b.jitter == 20 && b.lastSR == 0x12345678
                && b.delaySinceLastSR == 65536)
        #expect(rr.last == .pli(sender: 1, media: 0x11223344))
        #expect(try parse(try seed("nack")) == [.nack(sender: 1, media: 0x11223344, lost: [100, 101, 103])])
        guard case .remb(_, let bitrate, let ssrcs)? = try parse(try seed("remb")).first else {
            Issue.record("no REMB")
            return
        }
        #expect(bitrate == 0x21234 << 2 && ssrcs == [0x11223344])
        // What our writer builds, we read back.
        let ours =
            RTCPWriter.senderReport(ssrc: 7, ntp: 0xE000_0000_8000_0000, rtpTimestamp: 90_000, packets: 3, octets: 3600, cname: "camcap")
            + RTCPWriter.bye(ssrc: 7)
        let back = try parse(ours)
        #expect(
            back.count == 3
                && back.first == .senderReport(ssrc: 7, ntp: 0xE000_0000_8000_0000, rtpTimestamp: 90_000, packets: 3, octets: 3600, reports: []))
        #expect(back.last == .other(type: 203, format: 1))
        #expect(try parse(RTCPWriter.pli(sender: 5, media: 6)) == [.pli(sender: 5, media: 6)])
        #expect(try parse(RTCPWriter.nack(sender: 5, media: 6, lost: [65535, 0, 3, 40])) == [.nack(sender: 5, media: 6, lost: [0, 3, 40, 65535])])
    }

    @Test func malformedPacketsAreErrorsThatSayWhere() throws {
        let good = try seed("rr-pli")
        let cases: [([UInt8], String)] = [
            ([], "shorter than an RTCP header"),
            (Array(good.prefix(10)), "past the end"),
            ([0x40] + good.dropFirst(), "version 1"),
            (good + [0x80, 201], "truncated header"),
            ([0x81, 201, 0, 1, 0, 0, 0, 1], "report blocks do not fit"), // claims a block, has none
        ]
        for (bytes, words) in cases {
            do {
                _ = try parse(bytes)
                Issue.record("accepted \(bytes.prefix(16))")
            } catch { #expect(error.description.contains(words), "\(error)") }
        }
    }

    @Test func theSenderCountsMalformedFeedbackAndActsOnTheRest() throws {
        let sender = try RTPSender(configuration: .init(host: "127.0.0.1", port: 9))
        defer { sender.close() }
        let requested = RequestCounter()
        sender.setFeedbackHandlers(keyFrameRequest: { requested.add() })
        [UInt8]([0x81, 201, 0, 7, 1, 2]).withUnsafeBytes { sender.handleRTCP($0) } // length past the end
        let pli = RTCPWriter.pli(sender: 1, media: sender.ssrc)
        pli.withUnsafeBytes { sender.handleRTCP($0) }
        #expect(sender.statistics.rtcpErrors == 1 && sender.statistics.keyFrameRequests == 1 && requested.count == 1)
    }
}

final class RequestCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.withLock { n += 1 } }
    var count: Int { lock.withLock { n } }
}

@Suite struct SDPTests {
    @Test func ourOfferAndAChromiumOfferParse() throws {
        let offer = try String(contentsOf: fixtures.appendingPathComponent("sdp/offer.sdp"), encoding: .utf8)
        let d = try SDP.parse(offer)
        let m = try #require(d.media.first)
        #expect(m.kind == "video" && m.payloadTypes == [96] && m.values("rtpmap") == ["96 H264/90000"])
        #expect(m.values("fmtp").first?.contains("packetization-mode=1") == true && m.values("rtcp-fb").contains("96 nack pli"))
        let chromium = try SDP.parse(try String(contentsOf: fixtures.appendingPathComponent("sdp/chromium-offer.sdp"), encoding: .utf8))
        let v = try #require(chromium.media.first)
        #expect(v.payloadTypes == [96, 97, 102, 103] && v.values("rtpmap").contains("102 H264/90000"))
        #expect(v.values("fmtp").contains("102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"))
        #expect(v.values("ice-ufrag") == ["abcd"] && v.values("setup") == ["actpass"])
    }

    @Test func badDescriptionsNameTheLine() throws {
        for (text, line, words) in [
            ("v=1\n", 1, "version 1"), ("v=0\nm=video\n", 2, "media line"), ("v=0\r\nhello\r\n", 2, "expected 'x=…'"),
            ("s=-\n", 1, "no v=0"), ("v=0\nm=video / UDP/TLS/RTP/SAVPF 96\n", 2, "media line"),
            ("v=0\nm=video 99999 RTP/AVP 96\n", 2, "media line"),
        ] {
            do {
                _ = try SDP.parse(text)
                Issue.record("accepted \(text)")
            } catch { #expect(error.line == line && error.message.contains(words), "\(error)") }
        }
    }

    /// Every input the fuzzer ever crashed on (kept in Fixtures/sdp) now parses or fails cleanly.
    @Test func fuzzCrashesAreFixed() throws {
        let dir = fixtures.appendingPathComponent("sdp")
        let crashes = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("crash-") }
        #expect(!crashes.isEmpty)
        for c in crashes {
            let text = String(decoding: try Data(contentsOf: dir.appendingPathComponent(c)), as: UTF8.self)
            _ = try? SDP.parse(text)
        }
    }
}
