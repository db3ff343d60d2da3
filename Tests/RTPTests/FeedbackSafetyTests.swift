import Foundation
import Testing
import Synchronization
@testable import RTP
import H264
import VideoCapture

/// A UDP socket on a loopback address of the test's choosing (127.0.0.2 plays a stranger: every 127/8 address
/// is local on Linux).
final class UDPPeer: Sendable {
    let socket: Int32
    let port: UInt16
    init(host: String = "127.0.0.1", port: UInt16 = 0) throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr(host)
        a.sin_port = port.bigEndian
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 else {
            let e = errno
            close(fd)
            throw RTPError(.socketFailed, "cannot bind \(host):\(port)", errno: e)
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        var size: Int32 = 8 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        socket = fd
        self.port = UInt16(bigEndian: a.sin_port)
    }
    deinit { close(socket) }
    func send(_ bytes: [UInt8], to port: Int, host: String = "127.0.0.1") {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr(host)
        a.sin_port = UInt16(port).bigEndian
        _ = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(socket, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }
    /// Reads everything that arrives until `done()` holds and nothing came for 100 ms; returns the RTP bytes and
    /// packets (RTCP, such as sender reports, is not counted).
    func drain(until done: () -> Bool) -> (bytes: Int, packets: Int) {
        var b = [UInt8](repeating: 0, count: 2048)
        var bytes = 0, packets = 0
        while true {
            let n = b.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                if !(192...223).contains(b[1]) {
                    bytes += n
                    packets += 1
                }
            } else if done() {
                return (bytes, packets)
            }
        }
    }
}

/// A P frame of `packets` slices of 1000 bytes (one RTP packet each).
func pFrame(packets: Int) -> EncodedFrame {
    var f = EncodedFrame()
    for _ in 0..<packets {
        f.data += [0, 0, 0, 1]
        f.nalUnits.append(NALUnit(type: .slice, offset: f.data.count, length: 1000))
        f.data += [0x41] + [UInt8](repeating: 7, count: 999)
    }
    return f
}

/// Waits (on the sender's own counters, an event) until `condition` holds, at most 10 s.
func waitFor(_ condition: () -> Bool) -> Bool { waitUntil(timeout: 10, every: 0.002, condition) }

@Suite(.serialized, .timeLimit(.minutes(2))) struct FeedbackSafetyTests {
    /// RTCP from an address that is not the receiver's changes nothing: no retransmission, no key frame, no
    /// bitrate; it is counted. The receiver's own REMB of 0 is raised to the floor.
    @Test func feedbackFromAStrangerIsDroppedAndCounted() throws {
        let receiver = try UDPPeer()
        var c = RTPSender.Configuration(host: "127.0.0.1", port: Int(receiver.port))
        c.rtcpPort = Int(receiver.port) // the receiver's reports come from its one socket
        let sender = try RTPSender(configuration: c)
        defer { sender.close() }
        let keyFrames = Atomic<Int>(0), estimates = Mutex<[UInt64]>([])
        sender.setFeedbackHandlers(
            keyFrameRequest: { keyFrames.add(1, ordering: .relaxed) },
            bitrateEstimate: { bps in estimates.withLock { $0.append(bps) } })
        var t: Int64 = 1_000_000_000
        for _ in 0..<10 {
            try sender.send(pFrame(packets: 4).stamped(t))
            t += 33_333_333
        }
        let sent = receiver.drain { sender.statistics.packetsSent == 40 }
        #expect(sent.packets >= 40)

        let stranger = try UDPPeer(host: "127.0.0.2")
        let allSequences = (0..<UInt16(40)).map { sender.nextSequenceNumber &- 40 &+ $0 } // every packet sent
        var datagrams = 0
        for i in 0..<300 {
            let packet: [UInt8]
            switch i % 3 {
            case 0: packet = RTCPWriter.pli(sender: 7, media: sender.ssrc)
            case 1: packet = RTCPWriter.nack(sender: 7, media: sender.ssrc, lost: allSequences)
            default: packet = RTCPWriter.remb(sender: 7, bitrate: 0, ssrcs: [sender.ssrc])
            }
            stranger.send(packet, to: sender.localRTCPPort)
            datagrams += 1
            // In batches, each waited for: the feedback socket's buffer is small by design (a storm queues little).
            if datagrams % 20 == 0 { #expect(waitFor { sender.statistics.rtcpFromStrangers == datagrams }, "\(sender.statistics)") }
        }
        let extra = receiver.drain { true }
        let s = sender.statistics
        #expect(extra.bytes == 0 && s.retransmissions == 0 && s.retransmittedBytes == 0)
        #expect(s.keyFrameRequests == 0 && keyFrames.load(ordering: .relaxed) == 0 && s.nacksReceived == 0)
        #expect(s.rembBitrate == nil && estimates.withLock { $0.isEmpty })
        print(
            "FIGURE stranger RTCP to stream: \(datagrams) datagrams (PLI, NACK of 40 packets, REMB 0) → \(extra.bytes) extra bytes, \(s.keyFrameRequests) key-frame requests, REMB ignored; \(s.rtcpFromStrangers) counted as strangers'"
        )

        // The receiver itself: a REMB of 0 is raised to the floor, never 0.
        receiver.send(RTCPWriter.remb(sender: 9, bitrate: 0, ssrcs: [sender.ssrc]), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.rembBitrate != nil })
        #expect(sender.statistics.rembBitrate == c.minimumBitrateEstimate && estimates.withLock { $0 } == [c.minimumBitrateEstimate])
    }

    /// RTCP from another port of the receiver's own host (another program there) is a stranger's too: a PLI
    /// flood asks for no key frame and a REMB of 0 sets no bitrate. The sockets are bound on loopback, the
    /// interface that reaches the receiver, not on every interface.
    @Test func feedbackFromAnotherPortOfTheReceiversHostIsDropped() throws {
        let receiver = try UDPPeer()
        var c = RTPSender.Configuration(host: "127.0.0.1", port: Int(receiver.port))
        c.rtcpPort = Int(receiver.port) + 1
        let sender = try RTPSender(configuration: c)
        defer { sender.close() }
        let bound = sender.localAddresses
        #expect(bound?.rtp.hasPrefix("127.0.0.1:") == true && bound?.rtcp.hasPrefix("127.0.0.1:") == true, "\(String(describing: bound))")
        let keyFrames = Atomic<Int>(0), estimates = Mutex<[UInt64]>([])
        sender.setFeedbackHandlers(
            keyFrameRequest: { keyFrames.add(1, ordering: .relaxed) },
            bitrateEstimate: { bps in estimates.withLock { $0.append(bps) } })
        try sender.send(pFrame(packets: 2).stamped(1_000_000_000))
        let neighbour = try UDPPeer() // same address, another port
        var datagrams = 0
        for i in 0..<200 {
            neighbour.send(
                i % 2 == 0 ? RTCPWriter.pli(sender: 7, media: sender.ssrc) : RTCPWriter.remb(sender: 7, bitrate: 0, ssrcs: [sender.ssrc]),
                to: sender.localRTCPPort)
            datagrams += 1
            if datagrams % 20 == 0 { #expect(waitFor { sender.statistics.rtcpFromStrangers == datagrams }, "\(sender.statistics)") }
        }
        let s = sender.statistics
        #expect(s.keyFrameRequests == 0 && keyFrames.load(ordering: .relaxed) == 0 && s.rembBitrate == nil && estimates.withLock { $0.isEmpty })
        print(
            "FIGURE RTCP from another port of the receiver's host: \(datagrams) datagrams (PLI, REMB 0) → \(s.keyFrameRequests) key-frame requests, REMB \(s.rembBitrate.map { "\($0)" } ?? "ignored"); \(s.rtcpFromStrangers) counted as strangers'; sockets bound to \(bound?.rtp ?? "-") and \(bound?.rtcp ?? "-")"
        )
        // From the receiver's RTCP port it is obeyed.
        let rtcp = try UDPPeer(port: UInt16(c.rtcpPort!))
        rtcp.send(RTCPWriter.pli(sender: 9, media: sender.ssrc), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.keyFrameRequests == 1 })
    }

    /// A NACK storm from the real receiver (every packet of the history, thousands of times a second) while
    /// the stream runs: each packet is resent at most once per RTT and retransmissions stay within their share,
    /// so what reaches the receiver stays under 1.5 × the media.
    @Test func aNackStormKeepsTheSendRateUnderOneAndAHalfTimesTheMedia() throws {
        let receiver = try UDPPeer()
        var c = RTPSender.Configuration(host: "127.0.0.1", port: Int(receiver.port))
        c.rtcpPort = Int(receiver.port)
        let sender = try RTPSender(configuration: c)
        defer { sender.close() }
        let stop = Atomic<Bool>(false), storms = Atomic<Int>(0)
        // The newest sequence number the receiver has seen: the storm NACKs the 200 packets up to it, as a real
        // receiver (or a replay of its feedback) would.
        let newest = Atomic<Int>(-1)
        let storm = Thread { [sender] in
            // The receiver's own socket (the sender obeys only the receiver's address and ports).
            let s = receiver
            while !stop.load(ordering: .relaxed) {
                let top = newest.load(ordering: .relaxed)
                if top < 0 {
                    usleep(1_000)
                    continue
                }
                let lost = (0..<UInt16(200)).map { UInt16(top) &- 199 &+ $0 }
                s.send(RTCPWriter.nack(sender: 9, media: sender.ssrc, lost: lost), to: sender.localRTCPPort)
                storms.add(1, ordering: .relaxed)
                if storms.load(ordering: .relaxed) % 20 == 0 { usleep(1_000) }
            }
        }
        storm.start()
        let received = Atomic<Int>(0), receiving = Atomic<Bool>(true)
        let reader = Thread { [receiver] in
            var b = [UInt8](repeating: 0, count: 2048)
            while receiving.load(ordering: .relaxed) {
                let n = b.withUnsafeMutableBytes { recv(receiver.socket, $0.baseAddress, $0.count, 0) }
                if n > 0 && !(192...223).contains(b[1]) {
                    received.add(n, ordering: .relaxed)
                    newest.store(Int(b[2]) << 8 | Int(b[3]), ordering: .relaxed) // (a resend moves it back a little: harmless)
                }
            }
        }
        reader.start()
        // 3 s of a 30 fps stream of 6-packet frames (about 1.5 Mbit/s).
        var t: Int64 = 1_000_000_000
        let start = Date()
        for i in 0..<90 {
            try sender.send(pFrame(packets: 6).stamped(t))
            t += 33_333_333
            let due = start.addingTimeInterval(Double(i + 1) / 30)
            let wait = due.timeIntervalSinceNow
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
        }
        stop.store(true, ordering: .relaxed)
        while !storm.isFinished { usleep(1_000) }
        let s = sender.statistics
        _ = waitFor { sender.statistics.nacksReceived == s.nacksReceived }
        receiving.store(false, ordering: .relaxed)
        while !reader.isFinished { usleep(1_000) }
        let total = received.load(ordering: .relaxed), media = s.bytesSent
        let ratio = Double(total) / Double(media)
        print(
            "FIGURE NACK storm from the receiver: \(storms.load(ordering: .relaxed)) NACKs of 200 packets in \(fmt(Date().timeIntervalSince(start))) s; media \(media) bytes, received \(total) bytes (× \(fmt(ratio))); \(s.retransmissions) resent, \(s.nacksIgnored) ignored (stale or within an RTT), \(s.retransmissionsOverBudget) over budget"
        )
        #expect(s.nacksReceived > 100, "the storm reached the sender: \(s)")
        #expect(s.retransmissions > 0, "a NACK is still answered within the budget")
        #expect(ratio <= 1.5, "sent × \(ratio) the media")
        #expect(Double(s.retransmittedBytes) <= c.retransmissionShare * Double(media) + Double(4 * (c.maxPayload + 14)))
    }

    /// A packet already resent is not resent again within an RTT; a NACK for a packet no longer in the
    /// history is ignored.
    @Test func duplicateAndStaleNacksAreIgnored() throws {
        final class Null: RTPTransport, @unchecked Sendable {
            let sent = Atomic<Int>(0)
            func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 {
                sent.add(1, ordering: .relaxed)
                return 0
            }
            func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { 0 }
        }
        let transport = Null()
        var c = RTPSender.Configuration(host: "peer", port: 1)
        c.historySize = 64
        let sender = try RTPSender(configuration: c, transport: transport)
        var t: Int64 = 1_000_000_000
        for _ in 0..<40 {
            try sender.send(pFrame(packets: 6).stamped(t))
            t += 33_333_333
        }
        // The newest packets' sequence numbers: the sender's state gives the next one.
        let next = sender.nextSequenceNumber
        let recent = next &- 3, old = next &- 200
        let nack = RTCPWriter.nack(sender: 1, media: sender.ssrc, lost: [recent])
        let before = transport.sent.load(ordering: .relaxed)
        nack.withUnsafeBytes { sender.handleRTCP($0) }
        nack.withUnsafeBytes { sender.handleRTCP($0) } // the same NACK again, at once
        RTCPWriter.nack(sender: 1, media: sender.ssrc, lost: [old]).withUnsafeBytes { sender.handleRTCP($0) }
        let s = sender.statistics
        #expect(transport.sent.load(ordering: .relaxed) - before == 1 && s.retransmissions == 1, "\(s)")
        #expect(s.nacksIgnored == 2, "\(s)")
    }
}

func fmt(_ v: Double) -> String { String(format: "%.2f", v) }

/// After the last frame the sender still serves NACKs while they come (a receiver asks for the last frames'
/// losses up to an RTCP interval later), and stops a quiet time after the last one it could serve.
@Suite(.serialized, .timeLimit(.minutes(1))) struct FeedbackDrainTests {
    @Test func nacksAfterTheLastFrameAreServedUntilTheReceiverIsQuiet() throws {
        let receiver = try UDPPeer()
        var c = RTPSender.Configuration(host: "127.0.0.1", port: Int(receiver.port))
        c.rtcpPort = Int(receiver.port)
        let sender = try RTPSender(configuration: c)
        defer { sender.close() }
        try sender.send(pFrame(packets: 4).stamped(1_000_000_000))
        _ = receiver.drain { sender.statistics.packetsSent == 4 }
        let last = sender.nextSequenceNumber &- 1

        // No receiver has sent RTCP: nothing to wait for (a quiet time of 20 s would fail the time limit).
        sender.drainFeedback(quietNs: 20_000_000_000, maxNs: 30_000_000_000)

        // The receiver is heard from (a NACK of the first packet), then NACKs the last packet while the sender
        // drains: served, and the drain lasts until a quiet time after that NACK, not the whole maximum.
        receiver.send(RTCPWriter.nack(sender: 9, media: sender.ssrc, lost: [last &- 3]), to: sender.localRTCPPort)
        #expect(waitFor { sender.statistics.retransmissions == 1 })
        _ = receiver.drain { true }
        let finished = Atomic<Bool>(false), returnedNs = Atomic<Int64>(0)
        let drain = Thread {
            sender.drainFeedback(quietNs: 3_000_000_000, maxNs: 20_000_000_000)
            returnedNs.store(monotonicNanoseconds(), ordering: .relaxed)
            finished.store(true, ordering: .releasing)
        }
        drain.start()
        let nackSentNs = monotonicNanoseconds()
        receiver.send(RTCPWriter.nack(sender: 9, media: sender.ssrc, lost: [last]), to: sender.localRTCPPort)
        var resent: UInt16?
        var b = [UInt8](repeating: 0, count: 2048)
        for _ in 0..<50 where resent == nil { // 100 ms receive timeout each: 5 s at most
            let n = b.withUnsafeMutableBytes { recv(receiver.socket, $0.baseAddress, $0.count, 0) }
            if n >= 12, !(192...223).contains(b[1]) { resent = UInt16(b[2]) << 8 | UInt16(b[3]) }
        }
        #expect(resent == last, "the NACKed packet is resent")
        let stillDraining = !finished.load(ordering: .acquiring)
        #expect(stillDraining, "still draining when the retransmission arrived")
        #expect(waitUntil(timeout: 15, every: 0.01) { finished.load(ordering: .acquiring) }, "the drain ends")
        let afterNACK = Double(returnedNs.load(ordering: .relaxed) - nackSentNs) / 1e9
        print("FIGURE drain: NACK served while draining; drain ended \(String(format: "%.2f", afterNACK)) s after it (quiet 3 s, max 20 s)")
        #expect(afterNACK >= 3.0 && afterNACK < 15, "quiet time counted from the NACK: \(afterNACK) s")
        #expect(sender.statistics.retransmissions == 2)
    }
}

extension FeedbackSafetyTests {
    /// A REMB with the largest exponent says more bit/s than a UInt64 holds: the sender takes 10 Gbit/s at most
    /// (what /stats shows as rembBps and the rate control is given).
    @Test func aHugeREMBIsClampedWhereItEnters() throws {
        // Mantissa 0x3ffff, exponent 63: 2^81 bit/s as written on the wire.
        var packet = RTCPWriter.remb(sender: 9, bitrate: 1, ssrcs: [42])
        packet[17] = 63 << 2 | 0x03
        packet[18] = 0xff
        packet[19] = 0xff
        let parsed = try packet.withUnsafeBytes { p throws(RTCPParseError) in try RTCPPacket.parseCompound(p) }
        var responder = RTCPResponder(ssrc: 42, keyFrameRequestIntervalNs: 0, minimumBitrateEstimate: 50_000)
        var stats = RTPSender.Statistics()
        let action = try #require(parsed.first.map { responder.respond(to: $0, now: 0, ntpMiddle: 0, stats: &stats) })
        guard case .bitrate(let bps) = action else {
            Issue.record("\(action)")
            return
        }
        print("FIGURE REMB of mantissa 0x3ffff exponent 63 parsed as \(parsed) → taken as \(bps) bit/s")
        #expect(bps == 10_000_000_000 && stats.rembBitrate == 10_000_000_000)
    }
}
