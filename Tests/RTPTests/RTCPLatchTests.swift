import Testing
import Synchronization
@testable import RTP

/// A compound RTCP packet as a receiver sends it (RFC 3550 §6.1): an RR from `sender` with one report block about
/// `about` (highest sequence `highest`), then `feedback` (a NACK, a PLI…).
func receiverReport(from sender: UInt32, about: UInt32, highest: UInt32 = 0, then feedback: [UInt8] = []) -> [UInt8] {
    let words = [sender, about, 0, highest, 0, 0, 0] // SSRC; block: SSRC, lost, highest, jitter, LSR, DLSR
    return [0x81, 201, 0, 7] + words.flatMap { withUnsafeBytes(of: $0.bigEndian, Array.init) } + feedback
}

/// A receiver that reports from a port of its own (GStreamer's unbound `udpsink`) is latched by its first compound
/// RTCP that names our SSRC; after it, no other port of its host is, and a compound that does not name our SSRC,
/// a lone PLI or a malformed one latches nothing.
extension FeedbackSafetyTests {
    /// A sender to a receiver at `receiver.port` (RTCP port + 1), with `frames` frames of 4 packets sent and drained.
    func latchingSender(_ receiver: UDPPeer, frames: Int = 5, feedbackFrom: [String] = []) throws -> RTPSender {
        var c = RTPSender.Configuration(host: "127.0.0.1", port: Int(receiver.port))
        c.feedbackFrom = feedbackFrom
        let sender = try RTPSender(configuration: c)
        var t: Int64 = 1_000_000_000
        for _ in 0..<frames {
            try sender.send(pFrame(packets: 4).stamped(t))
            t += 33_333_333
        }
        _ = receiver.drain { sender.statistics.packetsSent == 4 * frames }
        return sender
    }

    @Test func aReceiverReportingFromAThirdPortIsLatchedAndItsNACKAnswered() throws {
        let receiver = try UDPPeer()
        let sender = try latchingSender(receiver)
        defer { sender.close() }
        let keyFrames = Atomic<Int>(0)
        sender.setFeedbackHandlers(keyFrameRequest: { keyFrames.add(1, ordering: .relaxed) }, bitrateEstimate: { _ in })
        let lost = sender.nextSequenceNumber &- 3
        let reporter = try UDPPeer() // the receiver's RTCP socket: same address, a port of its own
        reporter.send(
            receiverReport(from: 9, about: sender.ssrc, highest: UInt32(lost), then: RTCPWriter.nack(sender: 9, media: sender.ssrc, lost: [lost])),
            to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.retransmissions == 1 }, "\(sender.statistics)")
        var s = sender.statistics
        #expect(s.rtcpLatchedPort == Int(reporter.port) && s.receiverReports == 1 && s.nacksReceived == 1 && s.rtcpFromStrangers == 0, "\(s)")
        let resent = receiver.drain { true }
        #expect(resent.packets == 1, "the NACKed packet reached the receiver")

        // Latched: a lone PLI from that port is obeyed too.
        reporter.send(RTCPWriter.pli(sender: 9, media: sender.ssrc), to: sender.localRTCPPort)
        #expect(waitFor { keyFrames.load(ordering: .relaxed) == 1 })

        // Another port of the same host, even with a compound naming our SSRC, is a stranger: counted, unread,
        // and the latch stays where it is.
        let neighbour = try UDPPeer()
        for i in 1...20 {
            neighbour.send(
                receiverReport(from: 7, about: sender.ssrc, then: RTCPWriter.nack(sender: 7, media: sender.ssrc, lost: [lost &- 1])),
                to: sender.localRTCPPort)
            neighbour.send(RTCPWriter.pli(sender: 7, media: sender.ssrc), to: sender.localRTCPPort)
            #expect(waitFor { sender.statistics.rtcpFromStrangers == 2 * i }, "\(sender.statistics)")
        }
        s = sender.statistics
        #expect(s.rtcpLatchedPort == Int(reporter.port) && s.retransmissions == 1 && s.nacksReceived == 1 && s.keyFrameRequests == 1, "\(s)")
        #expect(receiver.drain { true }.packets == 0 && keyFrames.load(ordering: .relaxed) == 1)

        // The receiver's own RTCP port (RTP port + 1) stays obeyed after the latch.
        let own = try UDPPeer(port: receiver.port + 1)
        own.send(receiverReport(from: 9, about: sender.ssrc), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.receiverReports == 2 }, "\(sender.statistics)")
        print(
            "FIGURE RTCP latch: reports from port \(reporter.port) latched (\(s.retransmissions) NACKed packet resent), 40 datagrams from port \(neighbour.port) of the same host after it dropped (\(s.rtcpFromStrangers) strangers'), the receiver's RTCP port still obeyed"
        )
    }

    @Test func onlyACompoundThatNamesOurSSRCLatches() throws {
        let receiver = try UDPPeer()
        let sender = try latchingSender(receiver)
        defer { sender.close() }
        let other = sender.ssrc &+ 1, lost = sender.nextSequenceNumber &- 2
        let reporter = try UDPPeer()
        let refused: [(String, [UInt8])] = [
            ("a report about another stream", receiverReport(from: 9, about: other)),
            ("a NACK for another stream", receiverReport(from: 9, about: other, then: RTCPWriter.nack(sender: 9, media: other, lost: [lost]))),
            ("a lone PLI (not compound)", RTCPWriter.pli(sender: 9, media: sender.ssrc)),
            ("a lone NACK (not compound)", RTCPWriter.nack(sender: 9, media: sender.ssrc, lost: [lost])),
            ("a REMB listing our SSRC", RTCPWriter.remb(sender: 9, bitrate: 0, ssrcs: [sender.ssrc])),
            ("an RR whose length runs past the end", Array(receiverReport(from: 9, about: sender.ssrc).dropLast(4))),
            ("an RR then a truncated NACK", receiverReport(from: 9, about: sender.ssrc) + [0x81, 205, 0, 3, 0, 0]),
            ("RTP", [0x80, 96, 0, 1] + [UInt8](repeating: 0, count: 12)),
        ]
        for (k, (what, datagram)) in refused.enumerated() {
            reporter.send(datagram, to: sender.localRTCPPort)
            #expect(waitFor { sender.statistics.rtcpFromStrangers == k + 1 }, "\(what): \(sender.statistics)")
            #expect(sender.statistics.rtcpLatchedPort == nil, "\(what) latched")
        }
        // Another address is never latched, whatever it sends.
        let stranger = try UDPPeer(host: "127.0.0.2")
        stranger.send(receiverReport(from: 9, about: sender.ssrc), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.rtcpFromStrangers == refused.count + 1 })
        var s = sender.statistics
        #expect(s.rtcpLatchedPort == nil && s.retransmissions == 0 && s.receiverReports == 0 && s.rembBitrate == nil, "\(s)")
        // The same port's first report about our stream latches it.
        reporter.send(receiverReport(from: 9, about: sender.ssrc), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.receiverReports == 1 })
        s = sender.statistics
        #expect(s.rtcpLatchedPort == Int(reporter.port) && s.rtcpFromStrangers == refused.count + 1, "\(s)")
    }

    /// With `feedbackFrom` naming the receiver's sources, nothing is latched.
    @Test func namedSourcesTurnTheLatchOff() throws {
        let receiver = try UDPPeer()
        let sender = try latchingSender(receiver, feedbackFrom: ["127.0.0.1:\(receiver.port + 2)"])
        defer { sender.close() }
        let reporter = try UDPPeer()
        reporter.send(receiverReport(from: 9, about: sender.ssrc), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.rtcpFromStrangers == 1 })
        #expect(sender.statistics.rtcpLatchedPort == nil && sender.statistics.receiverReports == 0)
    }

    /// The latch's check reads only what is there: every prefix and every single-byte change of a valid compound is
    /// judged without a trap, and only the whole, unchanged RR names the SSRC.
    @Test func theLatchCheckIsBoundsChecked() {
        let ssrc: UInt32 = 0x1234_5678
        let valid = receiverReport(from: 9, about: ssrc, then: RTCPWriter.nack(sender: 9, media: ssrc, lost: [1, 2, 40]))
        let named = { (b: [UInt8]) in b.withUnsafeBytes { RTCPPacket.compound($0, names: ssrc) } }
        #expect(named(valid) && named(receiverReport(from: 9, about: ssrc)))
        #expect(named(receiverReport(from: 9, about: 1, then: RTCPWriter.pli(sender: 9, media: ssrc))))
        #expect(!named(receiverReport(from: 9, about: 1)) && !named([]) && !named([0x81]))
        let prefixes = (0..<valid.count).filter { named(Array(valid.prefix($0))) }
        #expect(prefixes == [32], "only the RR alone (32 bytes) of its prefixes: \(prefixes)")
        var changed = 0
        for i in valid.indices {
            for v: UInt8 in [0, 0xff, valid[i] ^ 0x80] {
                var b = valid
                b[i] = v
                if named(b) { changed += 1 }
            }
        }
        #expect(changed > 0) // changes to the parts that are not checked (counts, NACK bits) keep it named
    }
}
