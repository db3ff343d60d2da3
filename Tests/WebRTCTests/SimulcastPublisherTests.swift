import Foundation
import Testing
import TestSupport
import Synchronization
@testable import WebRTC
import RTP
import H264

/// Simulcast (RFC 8853) from `WebRTCPublisher` to an in-process SFU: the offer's lines, one SSRC and rid per layer
/// on the wire, RTCP per layer (PLI → that layer's key frame, NACK → that layer's RTX with the repaired rid), and
/// the single-layer fallback when the answer drops simulcast.
@Suite(.serialized, .timeLimit(.minutes(1))) struct SimulcastPublisherTests {
    static func configuration() -> WebRTCPublisher.Configuration {
        var c = WebRTCPublisher.Configuration()
        c.bindHost = "127.0.0.1"
        c.simulcastRIDs = ["f", "h", "q"]
        return c
    }

    /// An SFU's answer to a simulcast offer, as Janus writes it: our extmaps kept, `a=rid:ID recv` per layer and
    /// `a=simulcast:recv` (without them: `simulcast: false`).
    static func answer(
        _ server: FakeServer, to offer: String, simulcast: Bool, rids: [String] = ["f", "h", "q"], sdesExtensions: Bool = true
    ) throws -> String {
        let video = try #require(try SDP.parse(offer).media.first)
        var l = [
            "v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0",
            "m=video 9 UDP/TLS/RTP/SAVPF 96 97", "c=IN IP4 127.0.0.1",
            "a=ice-ufrag:\(server.ufrag)", "a=ice-pwd:\(server.password)", "a=fingerprint:sha-256 \(server.identity.fingerprint)",
            "a=setup:passive", "a=mid:0", "a=recvonly", "a=rtcp-mux", "a=rtpmap:96 H264/90000",
            "a=fmtp:96 packetization-mode=1;profile-level-id=42e01f", "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96",
            "a=candidate:1 1 udp 2015363327 127.0.0.1 \(server.udp.port) typ host",
        ]
        l += video.values("extmap").filter { (simulcast && sdesExtensions) || $0.hasSuffix("video-orientation") }.map { "a=extmap:\($0)" }
        if simulcast {
            l += rids.map { "a=rid:\($0) recv" }
            l.append("a=simulcast:recv \(rids.joined(separator: ";"))")
        }
        return l.joined(separator: "\r\n") + "\r\n"
    }

    @Test func theOfferHasARidPerLayerTheSimulcastLineAndTheSDESExtensionsButNoSSRCs() throws {
        let publisher = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: Self.configuration(), server: "127.0.0.1")
        defer { publisher.close() }
        let m = try #require(try SDP.parse(publisher.offer).media.first)
        #expect(m.values("rid") == ["f send", "h send", "q send"])
        #expect(m.values("simulcast") == ["send f;h;q"])
        #expect(
            m.values("extmap") == [
                "3 urn:3gpp:video-orientation", "4 urn:ietf:params:rtp-hdrext:sdes:mid", "10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id",
                "11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id",
            ])
        #expect(m.values("ssrc").isEmpty && m.values("ssrc-group").isEmpty, "the SFU learns the SSRCs from the rids")
        #expect(m.payloadTypes == [96, 97] && m.values("fmtp").contains("97 apt=96") && m.values("sendonly") == [""])
        // Rids an SFU could not take are refused before anything is offered.
        var bad = Self.configuration()
        bad.simulcastRIDs = ["full", "h"]
        #expect(throws: WebRTCError.self) { _ = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: bad) }
        bad.simulcastRIDs = ["f", "f"]
        #expect(throws: WebRTCError.self) { _ = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: bad) }
    }

    @Test func anAnswerWithoutSimulcastLeavesTheFullLayerAlone() throws {
        let server = try FakeServer(dtlsClient: false)
        let publisher = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: Self.configuration(), server: "127.0.0.1")
        defer { publisher.close() }
        try publisher.accept(answer: try Self.answer(server, to: publisher.offer, simulcast: false))
        #expect(publisher.answer?.simulcastRIDs == [] && publisher.sentLayers == [0] && !publisher.isSimulcast)
        #expect(publisher.sender(layer: 1) == nil && publisher.sender(layer: 2) == nil)
        #expect(publisher.sender(layer: 0)?.configuration.rid == nil, "one plain stream: no rid on its packets")
        // An answer with a=simulcast that refuses the rid and mid extensions: the SFU could not tell the layers
        // apart, so the full layer goes alone.
        let refused = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: Self.configuration(), server: "127.0.0.1")
        defer { refused.close() }
        try refused.accept(answer: try Self.answer(server, to: refused.offer, simulcast: true, sdesExtensions: false))
        #expect(refused.answer?.simulcastRIDs == ["f", "h", "q"] && refused.sentLayers == [0] && !refused.isSimulcast)
        // An answer that keeps two of the three rids: those two are sent, in our order.
        let two = try WebRTCPublisher(identity: try DTLSIdentity.eitherRole(), configuration: Self.configuration(), server: "127.0.0.1")
        defer { two.close() }
        try two.accept(answer: try Self.answer(server, to: two.offer, simulcast: true, rids: ["q", "f"]))
        #expect(two.sentLayers == [0, 2] && two.isSimulcast && two.sender(layer: 2)?.configuration.rid == "q")
    }

    @Test func eachLayerHasItsSSRCAndRidAndItsOwnKeyFramesAndRetransmissions() throws {
        let server = try FakeServer(dtlsClient: false)
        let identity = try DTLSIdentity.eitherRole()
        let publisher = try WebRTCPublisher(identity: identity, configuration: Self.configuration(), server: "127.0.0.1")
        defer { publisher.close() }
        let offerPort = try #require(try SDP.parse(publisher.offer).media.first).port
        try publisher.accept(answer: try Self.answer(server, to: publisher.offer, simulcast: true))
        #expect(publisher.sentLayers == [0, 1, 2] && publisher.isSimulcast)
        let connected = Box(false), requests = Box<[Int]>([]), unlayered = Box(0)
        try publisher.start(
            WebRTCPublisher.Handlers(
                connected: { connected.value.withLock { $0 = true } }, keyFrameRequest: { unlayered.value.withLock { $0 += 1 } }),
            layerKeyFrameRequest: { layer in requests.value.withLock { $0.append(layer) } })
        let (_, toPublisher, fromPublisher) = try server.connect(publisherPort: offerPort, publisherFingerprint: identity.fingerprint)
        waitUntil(timeout: 10, every: 0.005) { connected.value.withLock { $0 } }

        // A key frame on each layer: every packet carries mid 0 and its layer's rid, on the layer's own SSRC.
        for layer in 0..<3 { publisher.send(keyFrame(size: 1500).stamped(1_000_000_000), layer: layer) }
        var packets: [[UInt8]] = []
        while packets.count < 9, let p = server.receiveRTP(fromPublisher) { packets.append(p) }
        #expect(packets.count == 9, "three packets (STAP-A, two FU-A) per layer")
        var ridBySSRC: [UInt32: String] = [:]
        for p in packets {
            let ssrc = p[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let rid = p.withUnsafeBytes { RTPHeader.oneByteExtension(id: 10, in: $0) }.map { String(decoding: $0, as: UTF8.self) }
            let mid = p.withUnsafeBytes { RTPHeader.oneByteExtension(id: 4, in: $0) }
            #expect(mid == Array("0".utf8) && rid != nil)
            #expect(ridBySSRC[ssrc] == nil || ridBySSRC[ssrc] == rid, "one rid per SSRC")
            ridBySSRC[ssrc] = rid
        }
        #expect(Set(ridBySSRC.values) == ["f", "h", "q"] && ridBySSRC.count == 3)
        for layer in 0..<3 { #expect(ridBySSRC[try #require(publisher.sender(layer: layer)).ssrc] == ["f", "h", "q"][layer]) }

        // PLI on the half layer's SSRC: a key frame for that layer only.
        let half = try #require(publisher.sender(layer: 1)).ssrc
        server.sendRTCP(toPublisher, RTCPWriter.pli(sender: 1, media: half))
        waitUntil(timeout: 10, every: 0.005) { !requests.value.withLock { $0 }.isEmpty }
        #expect(requests.value.withLock { $0 } == [1] && unlayered.value.withLock { $0 } == 0)

        // NACK on the quarter layer's first packet: its RTX SSRC resends it, with the rid as the repaired one.
        let quarter = try #require(publisher.sender(layer: 2))
        let first = try #require(packets.first { $0[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } == quarter.ssrc })
        let seq = UInt16(first[2]) << 8 | UInt16(first[3])
        server.sendRTCP(toPublisher, RTCPWriter.nack(sender: 1, media: quarter.ssrc, lost: [seq]))
        var rtx: [UInt8]?
        while rtx == nil, let p = server.receiveRTP(fromPublisher) { if p[1] & 0x7f == 97 { rtx = p } }
        let r = try #require(rtx)
        #expect(r[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } == quarter.rtxSSRC)
        #expect(r.withUnsafeBytes { RTPHeader.oneByteExtension(id: 11, in: $0) } == Array("q".utf8), "repaired-rtp-stream-id q")
        #expect(r.withUnsafeBytes { RTPHeader.oneByteExtension(id: 10, in: $0) } == nil, "no rtp-stream-id on RTX")
        #expect(quarter.statistics.retransmissions == 1 && publisher.sender(layer: 0)?.statistics.retransmissions == 0)
    }
}
