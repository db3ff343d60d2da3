import Foundation
import Testing
import TestSupport
import Synchronization
@_spi(Fuzzing) @testable import WebRTC
import RTP
import H264

/// The test plays the browser in-process: ICE (a STUN Binding request with our credentials), a DTLS client
/// (OpenSSL, through the same shim) and SRTP, against a real `WebRTCPeer` on loopback.
final class FakeBrowser {
    let socket: Int32
    let port: UInt16
    var remote = sockaddr_in()
    init() throws {
        let s = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) } }
        // A receive gives up after 1 s: loops that collect until the datagrams stop would otherwise end early when
        // the peer's thread is held up for a moment (its tests run in parallel with a NACK storm, on 2 cores).
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        socket = s
        port = UInt16(bigEndian: a.sin_port)
    }
    /// A browser that has passed the peer's ICE check (an authenticated Binding request, answered).
    convenience init(checkedInTo peer: WebRTCPeer) throws {
        try self.init()
        let video = try SDP.parse(peer.answer).media[0]
        target(peer.localPort)
        send(FakeBrowser.bindingRequest(username: "\(video.values("ice-ufrag")[0]):kaYF", password: video.values("ice-pwd")[0]))
        _ = receive()
    }
    deinit { close(socket) }
    func target(_ port: Int) {
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        remote.sin_port = UInt16(port).bigEndian
    }
    func send(_ bytes: [UInt8]) {
        var r = remote
        _ = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &r) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(socket, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }
    /// The next datagram (nil after 200 ms).
    /// Runs the DTLS handshake as the client until it is connected or failed (or the deadline passes).
    func handshake(_ dtls: DTLSAssociation, until deadline: Date) -> DTLSAssociation.State {
        var state = dtls.tick()
        dtls.drain { send(Array($0)) }
        while state != .connected && Date() < deadline {
            if let d = receive() { state = d.withUnsafeBytes { dtls.feed($0) } } else { state = dtls.tick() }
            dtls.drain { send(Array($0)) }
            if case .failed = state { break }
        }
        return state
    }

    func receive() -> [UInt8]? {
        var b = [UInt8](repeating: 0, count: 4096)
        let n = b.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(b[0..<n]) : nil
    }
    /// The next datagram within `timeoutMs` (poll), or nil.
    func receive(timeoutMs: Int32) -> [UInt8]? {
        var p = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, timeoutMs) > 0 else { return nil }
        var b = [UInt8](repeating: 0, count: 4096)
        let n = b.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        return n > 0 ? Array(b[0..<n]) : nil
    }

    /// A Binding request as a controlling ICE agent sends it (USE-CANDIDATE, ICE-CONTROLLING), authenticated.
    static func bindingRequest(username: String, password: String) -> [UInt8] {
        var m: [UInt8] = [0x00, 0x01, 0, 0, 0x21, 0x12, 0xA4, 0x42] + (0..<12).map { _ in UInt8.random(in: 0...255) }
        func attr(_ t: UInt16, _ v: [UInt8]) {
            m += [UInt8(t >> 8), UInt8(t & 0xff), UInt8(v.count >> 8), UInt8(v.count & 0xff)] + v
            while m.count % 4 != 0 { m.append(0) }
        }
        func setLength(_ n: Int) {
            m[2] = UInt8(n >> 8)
            m[3] = UInt8(n & 0xff)
        }
        attr(0x0006, Array(username.utf8))
        attr(0x0025, [])
        attr(0x802A, [1, 2, 3, 4, 5, 6, 7, 8])
        setLength(m.count - 20 + 24)
        attr(0x0008, STUN.hmacSHA1(key: Array(password.utf8), m))
        setLength(m.count - 20 + 8)
        let crc = STUN.crc32(m) ^ 0x5354_554e
        attr(0x8028, [UInt8(crc >> 24), UInt8((crc >> 16) & 0xff), UInt8((crc >> 8) & 0xff), UInt8(crc & 0xff)])
        return m
    }
}

final class Box<T: Sendable>: Sendable {
    let value: Mutex<T>
    init(_ v: T) { value = Mutex(v) }
}

/// An IDR access unit of `size` bytes after SPS and PPS (enough for FU-A fragments).
func keyFrame(size: Int) -> EncodedFrame {
    var f = EncodedFrame()
    let sps: [UInt8] = [0x67, 0x42, 0xe0, 0x1f, 0x8c, 0x8d, 0x40], pps: [UInt8] = [0x68, 0xce, 0x3c, 0x80]
    let idr: [UInt8] = [0x65] + (0..<(size - 1)).map { UInt8($0 & 0xff) }
    for nal in [sps, pps, idr] {
        f.data += [0, 0, 0, 1]
        f.nalUnits.append(NALUnit(type: NALUnitType(header: nal[0]), offset: f.data.count, length: nal.count))
        f.data += nal
    }
    f.isKeyFrame = true
    return f
}

@Suite(.timeLimit(.minutes(1))) struct PeerTests {
    @Test func stunDtlsSrtpMediaNackPliAndClose() throws {
        let serverIdentity = try DTLSIdentity()
        let clientIdentity = try DTLSIdentity(profiles: [.aeadAes128Gcm, .aes128CmSha1_80], client: true)
        let text = chromiumOffer.replacingOccurrences(
            of: "5A:BA:85:3B:19:7E:27:E2:E0:A7:07:46:61:EA:75:0C:68:6E:FE:CC:EF:9C:7C:F8:2E:0E:F1:15:8B:11:73:80", with: clientIdentity.fingerprint)
        let offer = try WebRTCOffer(text)
        let peer = try WebRTCPeer(offer: offer, identity: serverIdentity, configuration: .init(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        let connected = Box(false), keyRequests = Box(0), closed = Box<String?>(nil)
        peer.start(
            WebRTCPeer.Handlers(
                connected: { connected.value.withLock { $0 = true } },
                keyFrameRequest: { keyRequests.value.withLock { $0 += 1 } },
                closed: { reason in closed.value.withLock { $0 = reason } }))
        let answer = try SDP.parse(peer.answer)
        let video = try #require(answer.media.first)
        let ufrag = try #require(video.values("ice-ufrag").first), pwd = try #require(video.values("ice-pwd").first)
        #expect(video.port == peer.localPort && video.values("setup") == ["passive"])
        // Chromium offers the video-orientation extension as id 3: accepted with that id.
        #expect(video.values("extmap") == ["3 urn:3gpp:video-orientation"] && peer.receivesRotation)

        let browser = try FakeBrowser()
        browser.target(peer.localPort)
        // ICE: an unauthenticated check is ignored, an authenticated one answered with our address.
        browser.send(FakeBrowser.bindingRequest(username: "\(ufrag):kaYF", password: "wrong-password-wrong-pw"))
        #expect(browser.receive() == nil)
        browser.send(FakeBrowser.bindingRequest(username: "\(ufrag):kaYF", password: pwd))
        let response = try #require(browser.receive())
        #expect(Array(response[0..<2]) == [0x01, 0x01])
        let xport = (UInt16(response[26]) << 8 | UInt16(response[27])) ^ 0x2112
        #expect(Array(response[20..<22]) == [0x00, 0x20] && xport == browser.port, "XOR-MAPPED-ADDRESS names our port")

        // DTLS: we are the client; the peer checks our certificate against the offer's fingerprint.
        let dtls = try DTLSAssociation(identity: clientIdentity, peerFingerprint: serverIdentity.fingerprint)
        let deadline = Date().addingTimeInterval(10)
        let state = browser.handshake(dtls, until: deadline)
        if case .failed(let e) = state {
            Issue.record("DTLS: \(e)")
            return
        }
        #expect(state == .connected)
        let (profile, toPeer, fromPeer) = try dtls.srtpSessions()
        #expect(profile == .aeadAes128Gcm)
        waitUntil(timeout: 10, every: 0.005) { connected.value.withLock { $0 } }
        #expect(peer.isConnected)

        // Media: a key frame of 3000 bytes → STAP-A (SPS+PPS) and FU-A fragments, SRTP-protected; a camera turned
        // 90° clockwise: the last packet carries the rotation (video-orientation, R1R0 = 1).
        var frame = keyFrame(size: 3000)
        frame.rotation = .rotation90
        peer.send(frame.stamped(1_000_000_000))
        var packets: [[UInt8]] = []
        while let d = browser.receive() {
            guard d[0] >= 128 && d[0] <= 191, !(192...223).contains(d[1]) else { continue } // RTP only (SR may come too)
            var p = d + [UInt8](repeating: 0, count: 64)
            let n = p.withUnsafeMutableBytes { fromPeer.unprotect($0, length: d.count, rtcp: false) }
            packets.append(Array(p[0..<(n ?? 0)]))
            if packets.count == 4 { break }
        }
        #expect(packets.count == 4 && packets.allSatisfy { !$0.isEmpty }, "\(packets.map(\.count))")
        #expect(packets.allSatisfy { $0[1] & 0x7f == offer.payloadType })
        #expect(packets.last.map { $0[1] & 0x80 != 0 } == true, "marker on the last packet")
        #expect(packets.first.map { $0[12] & 0x1f } == 24, "STAP-A first")
        let orientation = packets.map { p in p.withUnsafeBytes { RTPHeader.oneByteExtension(id: 3, in: $0) } }
        #expect(orientation.dropLast().allSatisfy { $0 == nil } && orientation.last == [1], "\(orientation)")
        let ssrc = packets[0][8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        #expect(ssrc == peer.sender.ssrc)

        // NACK for the last packet → an RTX retransmission (payload type 109, its own SSRC, the header extension
        // kept, the OSN first in the payload after it).
        let lost = packets[3]
        let lostSeq = UInt16(lost[2]) << 8 | UInt16(lost[3])
        func sendRTCP(_ plain: [UInt8]) {
            var p = plain + [UInt8](repeating: 0, count: SRTPSession.overhead)
            let n = p.withUnsafeMutableBytes { toPeer.protect($0, length: plain.count, rtcp: true) }
            browser.send(Array(p[0..<(n ?? 0)]))
        }
        sendRTCP(RTCPWriter.nack(sender: 1, media: ssrc, lost: [lostSeq]))
        var rtx: [UInt8]?
        while rtx == nil, let d = browser.receive() {
            guard !(192...223).contains(d[1]) else { continue }
            var p = d + [UInt8](repeating: 0, count: 64)
            if let n = p.withUnsafeMutableBytes({ fromPeer.unprotect($0, length: d.count, rtcp: false) }) { rtx = Array(p[0..<n]) }
        }
        let st = peer.statistics
        let r = try #require(
            rtx, "nacks \(st.rtp.nacksReceived) rtx \(st.rtp.retransmissions) rtcpErrors \(st.rtp.rtcpErrors) srtcpErrors \(st.srtcpErrors)")
        let h = try #require(r.withUnsafeBytes { RTPHeader($0) }), original = try #require(lost.withUnsafeBytes { RTPHeader($0) })
        #expect(original.payloadOffset == 20 && h.payloadOffset == 20, "12 + 8 bytes of extension")
        #expect(r[1] & 0x7f == 109 && UInt16(r[20]) << 8 | UInt16(r[21]) == lostSeq)
        #expect(r.withUnsafeBytes { RTPHeader.oneByteExtension(id: 3, in: $0) } == [1])
        #expect(Array(r[22...]) == Array(lost[20...]), "the original payload after the OSN")
        // PLI → the key-frame callback (rate-limited by the sender).
        sendRTCP(RTCPWriter.pli(sender: 1, media: ssrc))
        waitUntil(timeout: 10, every: 0.005) { keyRequests.value.withLock { $0 } != 0 }
        #expect(keyRequests.value.withLock { $0 } == 1)
        #expect(peer.statistics.rtp.nacksReceived == 1 && peer.statistics.rtp.retransmissions == 1)

        // Close: the browser gets an SRTCP BYE and a DTLS close_notify; the socket is gone.
        peer.close(reason: "test")
        var sawBye = false, sawClose = false
        while let d = browser.receive() {
            if (20...63).contains(d[0]) {
                if d.withUnsafeBytes({ dtls.feed($0) }) == .closed { sawClose = true }
            } else if (192...223).contains(d[1]) {
                var p = d + [UInt8](repeating: 0, count: 64)
                if let n = p.withUnsafeMutableBytes({ fromPeer.unprotect($0, length: d.count, rtcp: true) }),
                    let rtcp = try? p.withUnsafeBytes({ try RTCPPacket.parseCompound(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }),
                    rtcp.contains(where: {
                        if case .other(203, _) = $0 { return true }
                        return false
                    })
                {
                    sawBye = true
                }
            }
        }
        #expect(sawBye && sawClose, "BYE \(sawBye), close_notify \(sawClose)")
        #expect(closed.value.withLock { $0 } == "test")
        #expect(!peer.isConnected)
    }

    /// Sixteen viewers on one thread (#38: each had a socket thread and a pacing thread, 32 for 16): every
    /// viewer's ICE, DTLS, paced media and close run on the process's one transport loop and one pacing thread.
    @Test func sixteenViewersShareOneLoopAndOnePacer() throws {
        func threads(_ name: String) -> Int {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            return tasks.filter { t in
                let comm = (try? String(contentsOfFile: "/proc/self/task/\(t)/comm", encoding: .utf8)) ?? ""
                return comm.trimmingCharacters(in: .whitespacesAndNewlines) == name
            }.count
        }
        let serverIdentity = try DTLSIdentity()
        let clientIdentity = try DTLSIdentity(profiles: [.aeadAes128Gcm, .aes128CmSha1_80], client: true)
        let offer = try WebRTCOffer(
            chromiumOffer.replacingOccurrences(
                of: "5A:BA:85:3B:19:7E:27:E2:E0:A7:07:46:61:EA:75:0C:68:6E:FE:CC:EF:9C:7C:F8:2E:0E:F1:15:8B:11:73:80",
                with: clientIdentity.fingerprint))
        var configuration = WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"])
        configuration.pacingFactor = 2.5 // paced from the start estimate
        configuration.useTransportWideCC = true
        var viewers: [(peer: WebRTCPeer, browser: FakeBrowser, fromPeer: SRTPSession, closed: Box<String?>)] = []
        for i in 0..<16 {
            let peer = try WebRTCPeer(offer: offer, identity: serverIdentity, configuration: configuration)
            let closed = Box<String?>(nil)
            peer.start(WebRTCPeer.Handlers(closed: { reason in closed.value.withLock { $0 = reason } }))
            let browser = try FakeBrowser(checkedInTo: peer)
            let dtls = try DTLSAssociation(identity: clientIdentity, peerFingerprint: serverIdentity.fingerprint)
            let state = browser.handshake(dtls, until: Date().addingTimeInterval(20))
            #expect(state == .connected, "viewer \(i): \(state)")
            let (_, _, fromPeer) = try dtls.srtpSessions()
            #expect(waitUntil(timeout: 20, every: 0.005) { peer.isConnected }, "viewer \(i)")
            viewers.append((peer, browser, fromPeer, closed))
        }
        let loops = threads("webrtc-loop"), pacers = threads("rtp-pacer"), perViewer = threads("webrtc-peer")
        // Other tests of this process may hold peers too: they share the same two threads.
        #expect(loops == 1 && pacers <= 1 && perViewer == 0, "webrtc-loop \(loops), rtp-pacer \(pacers), webrtc-peer \(perViewer)")
        // Media reaches every viewer: a key frame to each, its packets read back and unprotected.
        for (i, v) in viewers.enumerated() {
            v.peer.send(keyFrame(size: 3000).stamped(1_000_000_000))
            var media = 0
            while media < 4, let d = v.browser.receive() {
                guard d[0] >= 128 && d[0] <= 191, !(192...223).contains(d[1]) else { continue }
                var p = d + [UInt8](repeating: 0, count: 64)
                if p.withUnsafeMutableBytes({ v.fromPeer.unprotect($0, length: d.count, rtcp: false) }) != nil { media += 1 }
            }
            #expect(media == 4, "viewer \(i) got \(media) of 4 packets")
        }
        for (i, v) in viewers.enumerated() {
            v.peer.close(reason: "test \(i)")
            #expect(v.closed.value.withLock { $0 } == "test \(i)", "close returns after the viewer's closed handler ran")
        }
        print("FIGURE threads at 16 viewers: webrtc-loop \(loops), rtp-pacer \(pacers), per-viewer threads \(perViewer) (before: 16 + 16)")
    }

    /// Allocations per frame on the send path, measured when an LD_PRELOAD malloc counter exporting `mc_count`
    /// is loaded (see Scripts/malloc-count.c; skipped otherwise):
    ///   LD_PRELOAD=/tmp/libmc.so .build/debug/swift-video-capturePackageTests.xctest --testing-library swift-testing --filter mallocs
    @Test(.enabled(if: mallocCounter != nil)) func mallocsPerFrameOnTheSendPath() throws {
        let c = try ConnectedPeer()
        let m = peerSendMallocs(peer: c.peer, browser: c.browser, count: mallocCounter!, srtp: c.fromPeer)
        print("MEASURE mallocs per 6-packet frame through the peer: \(m.0); a bare srtp_protect of 6 packets: \(m.1)")
        c.peer.close()
    }
}

/// Mallocs per frame of `peer.send` (a 6-packet P frame), and how many of them a bare srtp_protect of the same
/// packets costs (libsrtp and its ciphers: NSS in Debian's libsrtp2, not OpenSSL).
func peerSendMallocs(peer: WebRTCPeer, browser: FakeBrowser, count: () -> Int, srtp: SRTPSession) -> (Double, Double) {
    let f = pFrame6()
    var t: Int64 = 2_000_000_000
    peer.send(keyFrame(size: 3000).stamped(t))
    t += 33_333_333 // a viewer's first frame is a key frame
    for _ in 0..<20 {
        peer.send(f.stamped(t))
        t += 33_333_333
        while browser.receive() != nil {}
    }
    let before = count()
    for _ in 0..<100 {
        peer.send(f.stamped(t))
        t += 33_333_333
    }
    let total = Double(count() - before) / 100
    while browser.receive() != nil {}
    let out = try! SRTPSession(profile: .aeadAes128Gcm, key: [UInt8](repeating: 1, count: 28), outbound: true)
    var pkt = [UInt8](repeating: 0, count: 1400)
    pkt[0] = 0x80
    pkt[11] = 9
    let b2 = count()
    for i in 0..<600 {
        pkt[2] = UInt8(i >> 8)
        pkt[3] = UInt8(i & 0xff)
        _ = pkt.withUnsafeMutableBytes { out.protect($0, length: 1012, rtcp: false) }
    }
    let bare = Double(count() - b2) / 100
    let b3 = count()
    for i in 0..<600 {
        pkt[2] = UInt8(i >> 8)
        pkt[3] = UInt8(i & 0xff)
        _ = pkt.withUnsafeBytes { peer.transport.srtp.sendRTP(UnsafeRawBufferPointer(rebasing: $0[0..<1012])) }
    }
    print("MEASURE peer.transport.sendRTP per 6 packets: \(Double(count() - b3) / 100)")
    final class Null: RTPTransport, @unchecked Sendable {
        func sendRTP(_ packet: UnsafeRawBufferPointer) -> Int32 { 0 }
        func sendRTCP(_ packet: UnsafeRawBufferPointer) -> Int32 { 0 }
    }
    let sender = try! RTPSender(configuration: .init(host: "x", port: 1), transport: Null())
    for _ in 0..<20 {
        try? sender.send(f.stamped(t))
        t += 1000
    }
    let b4 = count()
    for _ in 0..<100 {
        try? sender.send(f.stamped(t))
        t += 1000
    }
    print("MEASURE RTPSender.send (null transport) per frame: \(Double(count() - b4) / 100)")
    var pz = H264Packetizer()
    let b5 = count()
    for _ in 0..<100 { pz.packetize(f.data, nalUnits: f.nalUnits, timestamp: 1) { _ in } }
    print("MEASURE packetizer per frame: \(Double(count() - b5) / 100)")
    return (total, bare)
}

/// `mc_count` from an LD_PRELOAD malloc counter, if one is loaded.
let mallocCounter: (@Sendable () -> Int)? = {
    guard let sym = dlsym(dlopen(nil, RTLD_NOW), "mc_count") else { return nil }
    let f = unsafeBitCast(sym, to: (@convention(c) () -> Int).self)
    return { f() }
}()

/// A peer connected to a FakeBrowser over real sockets: ICE check, DTLS handshake, SRTP sessions.
struct ConnectedPeer {
    let peer: WebRTCPeer
    let browser: FakeBrowser
    let dtls: DTLSAssociation
    let toPeer: SRTPSession, fromPeer: SRTPSession
    let closed: Box<String?>

    init() throws {
        let serverIdentity = try DTLSIdentity()
        let clientIdentity = try DTLSIdentity(profiles: [.aeadAes128Gcm], client: true)
        let text = chromiumOffer.replacingOccurrences(
            of: "5A:BA:85:3B:19:7E:27:E2:E0:A7:07:46:61:EA:75:0C:68:6E:FE:CC:EF:9C:7C:F8:2E:0E:F1:15:8B:11:73:80", with: clientIdentity.fingerprint)
        peer = try WebRTCPeer(
            offer: try WebRTCOffer(text), identity: serverIdentity, configuration: .init(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        let closed = Box<String?>(nil)
        self.closed = closed
        peer.start(WebRTCPeer.Handlers(closed: { reason in closed.value.withLock { $0 = reason } }))
        browser = try FakeBrowser(checkedInTo: peer)
        dtls = try DTLSAssociation(identity: clientIdentity, peerFingerprint: serverIdentity.fingerprint)
        let deadline = Date().addingTimeInterval(10)
        _ = browser.handshake(dtls, until: deadline)
        let started = peer
        waitUntil(timeout: max(0, deadline.timeIntervalSinceNow), every: 0.002) { started.isConnected }
        (_, toPeer, fromPeer) = try dtls.srtpSessions()
    }

    /// Sends a key frame and returns how many RTP packets of it the browser could decrypt.
    func mediaArrives() -> Int {
        peer.send(keyFrame(size: 3000).stamped(monotonicTestNs()))
        var packets = 0
        while let d = browser.receive() {
            guard d[0] >= 128 && d[0] <= 191, !(192...223).contains(d[1]) else { continue }
            var p = d + [UInt8](repeating: 0, count: 64)
            if p.withUnsafeMutableBytes({ fromPeer.unprotect($0, length: d.count, rtcp: false) }) != nil { packets += 1 }
            if packets == 4 { break }
        }
        return packets
    }

    func sendRTCP(_ plain: [UInt8]) {
        var p = plain + [UInt8](repeating: 0, count: SRTPSession.overhead)
        let n = p.withUnsafeMutableBytes { toPeer.protect($0, length: plain.count, rtcp: true) }
        browser.send(Array(p[0..<(n ?? 0)]))
    }
}

func monotonicTestNs() -> Int64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec)
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct PeerAbuseTests {
    /// RFC 6347 §4.1.2.7: after the handshake, records that fail to parse or decrypt are dropped, never fatal.
    /// Each of these, sent from the viewer's own address, leaves it playing; its close_notify still works.
    @Test func malformedDTLSRecordsLeaveTheViewerPlaying() throws {
        let c = try ConnectedPeer()
        #expect(c.peer.isConnected && c.mediaArrives() == 4)
        func record(type: UInt8 = 23, version: [UInt8] = [0xfe, 0xfd], epoch: UInt16 = 1, body: [UInt8]) -> [UInt8] {
            [type] + version + [UInt8(epoch >> 8), UInt8(epoch & 0xff), 0, 0, 0, 0, 0, 99, UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
        }
        let attacks: [(String, [UInt8])] = [
            ("29-byte epoch-1 record (shorter than the cipher's overhead)", record(body: [UInt8](repeating: 0xab, count: 16))),
            ("epoch-1 record of garbage (fails to decrypt)", record(body: (0..<64).map { UInt8($0 * 7 & 0xff) })),
            ("epoch-1 alert of garbage", record(type: 21, body: [UInt8](repeating: 1, count: 40))),
            ("epoch-0 handshake record after the handshake", record(type: 22, epoch: 0, body: [1, 0, 0, 12] + [UInt8](repeating: 0, count: 20))),
            ("epoch-2 record", record(epoch: 2, body: [UInt8](repeating: 3, count: 48))),
            ("unknown version", record(version: [0x03, 0x03], body: [UInt8](repeating: 4, count: 48))),
            ("length past the datagram", Array(record(body: [UInt8](repeating: 5, count: 48)).prefix(30))),
            ("a 5-byte header fragment", [23, 0xfe, 0xfd, 0, 1]),
            ("unknown content type", record(type: 60, body: [UInt8](repeating: 6, count: 48))),
        ]
        for (name, bytes) in attacks {
            let dropped = c.peer.statistics.dtlsRecordsDropped
            c.browser.send(bytes)
            let arrived = c.mediaArrives()
            let st = c.peer.statistics
            #expect(
                c.peer.isConnected && arrived == 4 && c.closed.value.withLock({ $0 }) == nil,
                "after \(name): connected \(c.peer.isConnected), \(arrived) packets, \(String(describing: c.closed.value.withLock { $0 }))")
            #expect(st.dtlsRecordsDropped >= dropped, "\(name)")
        }
        print(
            "FIGURE \(attacks.count) kinds of malformed DTLS records to a connected viewer: it kept playing; \(c.peer.statistics.dtlsRecordsDropped) records dropped"
        )
        // DTLS itself still works: the browser's close_notify ends the viewer.
        c.dtls.close()
        c.dtls.drain { c.browser.send(Array($0)) }
        waitUntil(timeout: 5, every: 0.002) { c.closed.value.withLock { $0 } != nil }
        #expect(c.closed.value.withLock { $0 }?.contains("close_notify") == true, "\(String(describing: c.closed.value.withLock { $0 }))")
    }

    /// A viewer's own NACK storm: what it receives stays under 1.5 × the media.
    @Test func aViewersNackStormIsBudgeted() throws {
        let c = try ConnectedPeer()
        #expect(c.mediaArrives() == 4)
        var t = monotonicTestNs()
        var media = 0, resent = 0, nacks = 0
        let mediaType = c.peer.offer.payloadType
        // Both measured where they arrive (SRTP overhead on each): the payload type tells media from RTX.
        func count(_ d: [UInt8]) {
            guard d[0] >= 128 && d[0] <= 191, !(192...223).contains(d[1]) else { return }
            if d[1] & 0x7f == mediaType { media += d.count } else { resent += d.count }
        }
        let frame = pFrame6()
        let start = Date()
        for i in 0..<60 {
            c.peer.send(frame.stamped(t))
            t += 33_333_333
            // NACK everything sent so far, 20 times per frame.
            for _ in 0..<20 {
                c.sendRTCP(
                    RTCPWriter.nack(
                        sender: 1, media: c.peer.sender.ssrc, lost: (0..<UInt16(120)).map { c.peer.sender.nextSequenceNumber &- 120 &+ $0 }))
                nacks += 1
            }
            while let d = c.browser.receive(timeoutMs: 1) { count(d) }
            let due = start.addingTimeInterval(Double(i + 1) / 30).timeIntervalSinceNow
            if due > 0 { usleep(UInt32(due * 1e6)) }
        }
        while let d = c.browser.receive(timeoutMs: 100) { count(d) }
        let s = c.peer.sender.statistics
        let ratio = Double(media + resent) / Double(media)
        print(
            "FIGURE a viewer's NACK storm (\(nacks) NACKs of 120 packets in 2 s): it received \(media) bytes of media and \(resent) of retransmissions (total × \(String(format: "%.2f", ratio)) the media); \(s.retransmissions) resent, \(s.nacksIgnored) ignored, \(s.retransmissionsOverBudget) over budget"
        )
        #expect(s.nacksReceived > 500 && s.retransmissions > 0, "\(s)")
        #expect(ratio <= 1.5, "× \(ratio)")
        c.peer.close()
    }

    /// The DTLS certificate is not the offer's: the handshake ends at once with a bad_certificate alert, and
    /// the viewer is freed.
    @Test func fingerprintMismatchGetsAnAlertAndFreesTheViewer() throws {
        let serverIdentity = try DTLSIdentity()
        let clientIdentity = try DTLSIdentity(profiles: [.aes128CmSha1_80], client: true)
        let peer = try WebRTCPeer(
            offer: try WebRTCOffer(chromiumOffer), identity: serverIdentity,
            configuration: .init(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
        let closed = Box<String?>(nil)
        peer.start(WebRTCPeer.Handlers(closed: { reason in closed.value.withLock { $0 = reason } }))
        let browser = try FakeBrowser(checkedInTo: peer)
        let dtls = try DTLSAssociation(identity: clientIdentity, peerFingerprint: serverIdentity.fingerprint)
        _ = dtls.tick()
        dtls.drain { browser.send(Array($0)) }
        var alert: [UInt8]?
        var clientState = DTLSAssociation.State.handshaking
        let deadline = Date().addingTimeInterval(10)
        while alert == nil && Date() < deadline {
            guard let d = browser.receive() else {
                _ = dtls.tick()
                dtls.drain { browser.send(Array($0)) }
                continue
            }
            if d.first == 21 { alert = d } // an alert record (epoch 0: in the clear)
            clientState = d.withUnsafeBytes { dtls.feed($0) }
            dtls.drain { browser.send(Array($0)) }
        }
        let a = try #require(alert, "no alert from the server")
        #expect(a.count >= 15 && a[13] == 2 && a[14] == 42, "a fatal bad_certificate (42) alert: \(Array(a.prefix(16)))")
        if case .failed = clientState {} else { Issue.record("the client's handshake ends with the alert: \(clientState)") }
        waitUntil(timeout: 5, every: 0.002) { closed.value.withLock { $0 } != nil }
        #expect(closed.value.withLock { $0 }?.contains("does not match the fingerprint") == true)
    }
}

extension PeerAbuseTests {
    /// The fuzz target's harness really holds a connected association (else fuzzing it would prove nothing),
    /// and the forged records of the test above leave it connected there too.
    @Test func theDTLSFuzzHarnessHoldsAConnectedAssociation() throws {
        let h = try DTLSDatagramHarness()
        #expect(h.isConnected)
        let short: [UInt8] = [23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 99, 0, 16] + [UInt8](repeating: 0xab, count: 16)
        let garbage: [UInt8] = [23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 99, 0, 64] + (0..<64).map { UInt8($0 * 7 & 0xff) }
        for d in [short, garbage, [22, 0xfe, 0xfd, 0, 0], Array(garbage.prefix(30))] {
            d.withUnsafeBytes { h.feed($0) }
            #expect(h.isConnected, "\(d.prefix(16))")
        }
    }
}

func pFrame6() -> EncodedFrame {
    var f = EncodedFrame()
    for _ in 0..<6 {
        f.data += [0, 0, 0, 1]
        f.nalUnits.append(NALUnit(type: .slice, offset: f.data.count, length: 1000))
        f.data += [0x41] + [UInt8](repeating: 7, count: 999)
    }
    return f
}
