import Foundation
import Testing
import TestSupport

/// A UDP receiver on 127.0.0.1 that collects RTP on a thread of its own: packets, bytes, the frames that
/// carry an IDR slice, the SSRC, the first SPS and PPS. `stop()` ends it and closes the socket.
final class RTPCollector: @unchecked Sendable {
    // @unchecked: the counters are only touched under `lock`; `fd` is set once.
    let fd: Int32
    let port: Int
    /// The RTCP port (`port` + 1), held as a real receiver holds it: otherwise a socket of the test's attacker could
    /// be given it as an ephemeral port by chance, and its RTCP would then come from the receiver's own port.
    private let rtcpFD: Int32
    private let lock = NSLock()
    private var packets = 0, bytes = 0, idrTimestamps = Set<UInt32>(), ssrcValue: UInt32?
    private var spsValue: [UInt8]?, ppsValue: [UInt8]?
    private var stopped = false
    private var thread: Thread?

    /// Listens on 127.0.0.1:`port` (a free port when 0).
    init(port: Int = 0) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var n = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &n) } }
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var size: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        self.fd = fd
        self.port = Int(UInt16(bigEndian: a.sin_port))
        rtcpFD = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        a.sin_port = in_port_t(UInt16(self.port + 1).bigEndian)
        _ = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(rtcpFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let t = Thread { [self] in loop() }
        thread = t
        t.start()
    }
    private func loop() {
        var b = [UInt8](repeating: 0, count: 2048)
        while !lock.withLock({ stopped }) {
            let n = b.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n >= 13, b[0] >> 6 == 2, !(192...223).contains(b[1]) else { continue }
            let cc = Int(b[0] & 0x0f), hasExtension = b[0] & 0x10 != 0
            var o = 12 + 4 * cc
            if hasExtension, o + 4 <= n { o += 4 + 4 * (Int(b[o + 2]) << 8 | Int(b[o + 3])) }
            guard o < n else { continue }
            let ts = b[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let ssrc = b[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let type = b[o] & 0x1f
            var idr = type == 5
            if type == 28, o + 1 < n { idr = b[o + 1] & 0x1f == 5 && b[o + 1] & 0x80 != 0 } // FU-A start of an IDR slice
            // SPS and PPS travel alone or in a STAP-A (type 24: 16-bit sizes, each followed by its NAL unit).
            var units: [[UInt8]] = []
            if type == 7 || type == 8 { units.append(Array(b[o..<n])) }
            if type == 24 {
                var i = o + 1
                while i + 2 <= n {
                    let size = Int(b[i]) << 8 | Int(b[i + 1])
                    guard size > 0, i + 2 + size <= n else { break }
                    units.append(Array(b[(i + 2)..<(i + 2 + size)]))
                    i += 2 + size
                }
            }
            lock.withLock {
                for u in units where u[0] & 0x1f == 7 && spsValue == nil { spsValue = u }
                for u in units where u[0] & 0x1f == 8 && ppsValue == nil { ppsValue = u }
                packets += 1
                bytes += n
                ssrcValue = ssrc
                if idr { idrTimestamps.insert(ts) }
            }
        }
    }

    /// Packets, bytes, key frames (distinct RTP times with an IDR slice) and the SSRC so far.
    var figures: (packets: Int, bytes: Int, keyFrames: Int, ssrc: UInt32?) { lock.withLock { (packets, bytes, idrTimestamps.count, ssrcValue) } }

    /// The first SPS and PPS the stream carried.
    var parameterSets: (sps: [UInt8]?, pps: [UInt8]?) { lock.withLock { (spsValue, ppsValue) } }

    func stop() {
        lock.withLock { stopped = true }
        while thread?.isFinished == false { usleep(10_000) }
        thread = nil // the thread's closure held self
        close(fd)
        close(rtcpFD)
    }
}

/// Attacks on `camcap stream` (issue #37) and what it writes: RTCP from another port of the receiver's host,
/// an SDP written beforehand, a full disk.
@Suite(.serialized, .timeLimit(.minutes(3))) struct StreamSecurityTests {
    /// One 5 s stream (150 frames at 30 fps, a key frame every 2 s); with `attack`, a PLI and a REMB of 0 from
    /// another port of the receiver's host every 5 ms once the stream flows. Returns the receiver's figures and
    /// camcap's output.
    func run(attack: Bool, rtcpPort: Int) throws -> (figures: (packets: Int, bytes: Int, keyFrames: Int, ssrc: UInt32?), out: String, sent: Int) {
        let receiver = RTPCollector()
        defer { receiver.stop() }
        let stop = Atomic3(), sent = Mutex3()
        let attacker = Thread {
            // Once the stream flows (an event: the receiver has its SSRC), the neighbour floods.
            guard waitUntil(timeout: 30, every: 0.005, { receiver.figures.ssrc != nil || stop.isSet }), let ssrc = receiver.figures.ssrc else {
                return
            }
            var n = 0
            let pli: [UInt8] = [0x81, 206, 0, 2, 0, 0, 0, 9] + withUnsafeBytes(of: ssrc.bigEndian, Array.init)
            var remb0 = remb(0)
            remb0.replaceSubrange(20..<24, with: withUnsafeBytes(of: ssrc.bigEndian, Array.init))
            while !stop.isSet {
                sendUDP(pli, to: rtcpPort)
                sendUDP(remb0, to: rtcpPort)
                n += 2
                usleep(5_000)
            }
            sent.set(0, (n, ""))
        }
        if attack { attacker.start() }
        let r = try sh(
            camcap,
            [
                "stream", "-d", "fixture:vivid", "-s", "640x360", "--to", "127.0.0.1:\(receiver.port)", "--rtcp-port", "\(rtcpPort)", "--frames",
                "150", "-q",
            ])
        stop.set()
        if attack { while !attacker.isFinished { usleep(10_000) } }
        #expect(r.code == 0, "\(r.err)")
        var last = -1 // the last packets in flight: until the count stands still
        _ = waitUntil(timeout: 5, every: 0.2) {
            let now = receiver.figures.packets
            defer { last = now }
            return now == last
        }
        return (receiver.figures, r.out, attack ? sent.get(0).0 : 0)
    }

    /// PLI and REMB from another port of the receiver's host change nothing: the same key frames and rate as
    /// without them (RTCP is obeyed only from the receiver's own ports).
    @Test func rtcpFromAnotherPortOfTheReceiversHostChangesNothing() throws {
        let quiet = try run(attack: false, rtcpPort: basePort + 15)
        let attacked = try run(attack: true, rtcpPort: basePort + 17)
        let feedback = attacked.out.split(separator: "\n").first { $0.hasPrefix("feedback:") } ?? ""
        let kbps = { (out: String) -> Int in
            let line = out.split(separator: "\n").first { $0.hasPrefix("bitrate:") } ?? ""
            return Int(line.dropFirst("bitrate:".count).trimmingCharacters(in: .whitespaces).prefix { $0.isNumber }) ?? -1
        }
        let (q, a) = (quiet.figures, attacked.figures)
        print(
            "FIGURE stream, PLI + REMB 0 from another port of the receiver's host every 5 ms (\(attacked.sent) datagrams): key frames \(q.keyFrames) → \(a.keyFrames) in 150 frames, received \(q.bytes) → \(a.bytes) bytes, average \(kbps(quiet.out)) → \(kbps(attacked.out)) kbps; \(feedback)"
        )
        #expect(attacked.sent > 100, "the flood ran")
        #expect(feedback.contains("0 key-frame requests") && feedback.contains("REMB -"), "\(feedback)")
        #expect(a.keyFrames <= q.keyFrames + 1 && a.keyFrames <= 4, "key frames \(q.keyFrames) → \(a.keyFrames)")
        #expect(Double(a.bytes) >= 0.75 * Double(q.bytes), "bytes \(q.bytes) → \(a.bytes)")
        #expect(!attacked.out.contains("last "), "the bitrate target never changed: \(attacked.out)")
    }

    /// `--sdp-only` writes the SDP of the stream that follows: the same SSRC (derived from --to, or --ssrc) and
    /// the same SPS/PPS, colour description included, as the stream carries (the receiver reads them off the wire).
    @Test func theSDPWrittenBeforehandDescribesTheStream() throws {
        let port = basePort + 19, sdp = work + "/before.sdp"
        for ssrcArgs in [[String](), ["--ssrc", "3735928559"]] {
            let w = try sh(
                camcap, ["stream", "-d", "fixture:vivid", "-s", "640x360", "--to", "127.0.0.1:\(port)", "--sdp", sdp, "--sdp-only"] + ssrcArgs)
            #expect(w.code == 0, "\(w.err)")
            let text = try String(contentsOfFile: sdp, encoding: .utf8)
            let announced = text.components(separatedBy: "a=ssrc:").dropFirst().first.map { String($0.prefix { $0.isNumber }) } ?? ""
            let sprop =
                text.components(separatedBy: "sprop-parameter-sets=").dropFirst().first.map { String($0.prefix { !$0.isNewline && $0 != ";" }) } ?? ""
            let receiver = RTPCollector(port: port)
            let r = try sh(
                camcap, ["stream", "-d", "fixture:vivid", "-s", "640x360", "--to", "127.0.0.1:\(port)", "--frames", "30", "-q"] + ssrcArgs)
            #expect(r.code == 0, "\(r.err)")
            _ = waitUntil(timeout: 5, every: 0.01) { receiver.parameterSets.pps != nil }
            receiver.stop()
            let used = receiver.figures.ssrc.map(String.init) ?? "?"
            let ps = receiver.parameterSets
            let streamed = Data(ps.sps ?? []).base64EncodedString() + "," + Data(ps.pps ?? []).base64EncodedString()
            print(
                "FIGURE --sdp-only \(ssrcArgs.joined(separator: " ")): a=ssrc:\(announced), the stream's SSRC \(used); sprop \(sprop) vs the stream's \(streamed)"
            )
            #expect(!announced.isEmpty && announced != "0" && announced == used)
            #expect(sprop == streamed, "the SDP's SPS/PPS are the stream's")
            if !ssrcArgs.isEmpty { #expect(announced == "3735928559") }
        }
    }

    /// A recording that could not write a byte (/dev/full) says that nothing was written, not that what was
    /// written is playable.
    @Test func aRecordingThatWroteNothingSaysSo() throws {
        let r = try sh(
            camcap,
            ["stream", "-d", "fixture:vivid", "-s", "320x180", "--to", "127.0.0.1:\(basePort + 19)", "--frames", "60", "--output", "/dev/full", "-q"])
        #expect(r.code != 0 && r.err.contains("nothing was written to /dev/full") && !r.err.contains("playable"), "\(r.err)")
        let rec = try sh(
            camcap, ["record", "-d", "fixture:vivid", "-s", "320x180", "--frames", "60", "-o", "/dev/full", "--container", "h264", "-q"])
        #expect(rec.code != 0 && rec.err.contains("nothing was written to /dev/full") && !rec.err.contains("playable"), "\(rec.err)")
        print("FIGURE /dev/full: stream --output → \(r.err.split(separator: "\n").last ?? ""); record → \(rec.err.split(separator: "\n").last ?? "")")
    }
}
