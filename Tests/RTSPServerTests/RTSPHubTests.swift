import Foundation
import NIOEmbedded
import Testing
import H264
import RTP
import VideoCapture
import TestSupport
@testable import RTSPServer

/// A UDP socket on loopback for the test's client side: bound to a free port, receives with a timeout.
final class TestUDP {
    let fd: Int32
    let port: Int
    init() {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var n = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &n) } }
        self.fd = fd
        port = Int(UInt16(bigEndian: a.sin_port))
    }
    deinit { close(fd) }
    /// The next datagram, or nil after the timeout.
    func receive() -> [UInt8]? {
        var b = [UInt8](repeating: 0, count: 2048)
        let n = b.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(b[0..<n]) : nil
    }
    /// Datagrams already queued, without waiting.
    func drain() -> [[UInt8]] {
        var out: [[UInt8]] = []
        var b = [UInt8](repeating: 0, count: 2048)
        while true {
            let n = b.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard n > 0 else { return out }
            out.append(Array(b[0..<n]))
        }
    }
}

/// The hub without the network host: requests handed to it as the listener would, frames written as the encoder
/// would, media received on the test's own UDP sockets.
@Suite(.serialized) struct RTSPHubTests {
    let url = "rtsp://127.0.0.1:8554/camera"

    func request(_ method: String, _ uri: String, cseq: Int, _ headers: [RTSPHeader] = []) -> RTSPRequest {
        RTSPRequest(method: method, uri: uri, headers: headers + [RTSPHeader("CSeq", "\(cseq)")], cseq: cseq)
    }

    /// Frames from a real encoder: key frame first, then `count - 1` others.
    func frames(_ count: Int) throws -> [EncodedFrame] {
        let encoder = try H264Encoder(settings: .init(width: 320, height: 180))
        defer { encoder.close() }
        let picture = I420Buffer(width: 320, height: 180)
        return try (0..<count).map { i in try encoder.encode(picture, timestampNs: Int64(i) * 33_333_333) }
    }

    @Test func aUDPClientGetsAKeyFrameFirstAndNothingAfterTeardown() throws {
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        let encoded = try frames(4)
        let sps = try #require(RTPSenderParameterSets.of(encoded[0]))
        let hub = try RTSPHub(configuration: c, parameterSets: sps)
        defer { hub.closeAll(reason: "the test ended") }
        let connection = RTSPConnection(client: "127.0.0.1", channel: EmbeddedChannel())
        let rtp = TestUDP(), rtcp = TestUDP()

        let describe = hub.handle(request("DESCRIBE", url, cseq: 1), on: connection)
        #expect(describe.status == 200 && describe.headers.contains(RTSPHeader("Content-Base", url + "/")))
        #expect(describe.body.contains("m=video 0 RTP/AVP 96\r\n") && describe.body.contains("a=control:trackID=0"))
        #expect(describe.body.contains("packetization-mode=1;profile-level-id=") && describe.body.contains("sprop-parameter-sets="))

        let setup = hub.handle(
            request("SETUP", url + "/trackID=0", cseq: 2, [RTSPHeader("Transport", "RTP/AVP;unicast;client_port=\(rtp.port)-\(rtcp.port)")]),
            on: connection)
        #expect(setup.status == 200)
        let transport = setup.headers.first { $0.name == "Transport" }?.value ?? ""
        #expect(
            transport.hasPrefix("RTP/AVP;unicast;client_port=\(rtp.port)-\(rtcp.port);server_port=\(hub.udpPorts.rtp)-\(hub.udpPorts.rtcp);ssrc="))
        let session = String(setup.headers.first { $0.name == "Session" }?.value.prefix { $0 != ";" } ?? "")
        #expect(session.count == 32 && hub.hasAudience && !hub.wantsFrames, "set up, not playing: the encoder rests")

        // Not playing yet: nothing is sent.
        try hub.write(encoded[0])
        #expect(rtp.drain().isEmpty)

        let play = hub.handle(request("PLAY", url + "/", cseq: 3, [RTSPHeader("Session", session)]), on: connection)
        #expect(play.status == 200 && hub.wantsFrames)
        // A delta frame first: the client waits for a key frame.
        try hub.write(encoded[1])
        #expect(rtp.drain().isEmpty)
        try hub.write(encoded[0])
        let first = try #require(rtp.receive())
        #expect(first[1] & 0x7f == 96 && first[12] & 0x1f == 24, "STAP-A (SPS+PPS) first")
        let info = play.headers.first { $0.name == "RTP-Info" }?.value ?? ""
        #expect(info.contains("seq=\(Int(first[2]) << 8 | Int(first[3]));"), "\(info)")
        try hub.write(encoded[2])
        try hub.write(encoded[3])
        let rest = rtp.drain()
        #expect(rest.count >= 2, "two more frames (the small IDR travels in the STAP-A with SPS and PPS)")

        let stats = try #require(hub.sessions.first)
        #expect(stats.transport == "udp" && stats.state == "playing" && stats.framesSent == 3 && stats.framesSkippedBeforeKeyFrame == 1)

        let teardown = hub.handle(request("TEARDOWN", url + "/", cseq: 4, [RTSPHeader("Session", session)]), on: connection)
        #expect(teardown.status == 200 && !hub.wantsFrames && !hub.hasAudience)
        let bye = try #require(rtcp.receive(), "a last sender report and a BYE on the RTCP port")
        #expect(bye[1] == 200, "SR")
        try hub.write(encoded[0])
        #expect(rtp.drain().isEmpty)
        #expect(hub.endedSessions.first?.reason == "the client sent TEARDOWN")
        #expect(hub.handle(request("PLAY", url, cseq: 5, [RTSPHeader("Session", session)]), on: connection).status == 454)
    }

    @Test func digestIsAskedOfEveryMethodButOptions() throws {
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        c.authenticator = DigestAuthenticator(user: "u", password: "p")
        let hub = try RTSPHub(configuration: c, parameterSets: ([0x67, 0x42, 0xc0, 0x1f], [0x68, 0xce]))
        defer { hub.closeAll(reason: "the test ended") }
        let connection = RTSPConnection(client: "127.0.0.1", channel: EmbeddedChannel())
        #expect(hub.handle(request("OPTIONS", url, cseq: 1), on: connection).status == 200)
        for (i, m) in ["DESCRIBE", "SETUP", "PLAY", "GET_PARAMETER", "TEARDOWN"].enumerated() {
            let r = hub.handle(request(m, url, cseq: i + 2), on: connection)
            #expect(r.status == 401 && r.headers.contains { $0.name == "WWW-Authenticate" && $0.value.hasPrefix("Digest realm=") }, "\(m)")
        }
        #expect(hub.refusals.unauthorized == 5)
    }

    /// A session id is known only where the session was made: a TCP session on its connection, a UDP session
    /// from its client's address. Elsewhere PAUSE and TEARDOWN get 454, as for a session that does not exist.
    @Test func aSessionIsKnownOnlyOnItsConnectionOrFromItsAddress() throws {
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        let hub = try RTSPHub(configuration: c, parameterSets: ([0x67, 0x42, 0xc0, 0x1f], [0x68, 0xce]))
        defer { hub.closeAll(reason: "the test ended") }
        func setUp(_ connection: RTSPConnection, _ transport: String) -> String {
            _ = hub.handle(request("DESCRIBE", url, cseq: 1), on: connection)
            let r = hub.handle(request("SETUP", url + "/trackID=0", cseq: 2, [RTSPHeader("Transport", transport)]), on: connection)
            return r.headers.first { $0.name == "Session" }.map { RTSPHub.sessionID($0.value) } ?? ""
        }
        let owner = RTSPConnection(client: "127.0.0.1", channel: EmbeddedChannel())
        let tcp = setUp(owner, "RTP/AVP/TCP;unicast;interleaved=0-1")
        let udp = setUp(owner, "RTP/AVP;unicast;client_port=40000-40001")
        #expect(!tcp.isEmpty && !udp.isEmpty)
        let sameAddress = RTSPConnection(client: "127.0.0.1", channel: EmbeddedChannel())
        let stranger = RTSPConnection(client: "127.0.0.2", channel: EmbeddedChannel())
        for c in [sameAddress, stranger] { _ = hub.handle(request("DESCRIBE", url, cseq: 1), on: c) } // SETUP may come next
        for (id, who) in [(tcp, sameAddress), (tcp, stranger), (udp, stranger)] {
            for (i, m) in ["PAUSE", "TEARDOWN", "PLAY", "GET_PARAMETER"].enumerated() {
                #expect(hub.handle(request(m, url, cseq: 10 + i, [RTSPHeader("Session", id)]), on: who).status == 454, "\(m) from \(who.client)")
            }
            #expect(
                hub.handle(
                    request(
                        "SETUP", url + "/trackID=0", cseq: 20, [RTSPHeader("Session", id), RTSPHeader("Transport", "RTP/AVP/TCP;interleaved=2-3")]),
                    on: who
                )
                .status == 454)
        }
        #expect(hub.sessions.count == 2, "both sessions are still there")
        // The UDP session's own address may use it from another connection; the TCP one only on its own.
        #expect(hub.handle(request("TEARDOWN", url, cseq: 30, [RTSPHeader("Session", udp)]), on: sameAddress).status == 200)
        #expect(hub.handle(request("TEARDOWN", url, cseq: 31, [RTSPHeader("Session", tcp)]), on: owner).status == 200)
        #expect(hub.sessions.isEmpty)
    }

    /// A session that is never played ends at the setup timeout, also after its connection closed.
    @Test func aSessionNeverPlayedEndsAtTheSetupTimeout() throws {
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        c.setupTimeoutNs = 1_000_000_000
        let hub = try RTSPHub(configuration: c, parameterSets: ([0x67, 0x42, 0xc0, 0x1f], [0x68, 0xce]))
        defer { hub.closeAll(reason: "the test ended") }
        var connection: RTSPConnection? = RTSPConnection(client: "127.0.0.1", channel: EmbeddedChannel())
        _ = hub.handle(request("DESCRIBE", url, cseq: 1), on: connection!)
        let r = hub.handle(
            request("SETUP", url + "/trackID=0", cseq: 2, [RTSPHeader("Transport", "RTP/AVP;unicast;client_port=40000-40001")]), on: connection!)
        #expect(r.status == 200)
        hub.closed(connection!)
        connection = nil
        let start = Date()
        let ended = waitUntil(timeout: 10, every: 0.01) { hub.sessions.isEmpty }
        #expect(
            ended && hub.endedSessions.first?.reason.hasPrefix("timed out: not played within 1.0 s") == true, "\(hub.endedSessions.map(\.reason))")
        print(
            "FIGURE a UDP session never played (setup timeout 1 s) ended \(String(format: "%.2f", Date().timeIntervalSince(start))) s after its connection closed"
        )
    }

    @Test func theSessionLimitsRefuseWith503AndTheUDPPortsAreAPair() throws {
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        c.maxSessions = 2
        c.maxSessionsPerAddress = 1
        let hub = try RTSPHub(configuration: c, parameterSets: ([0x67, 0x42, 0xc0, 0x1f], [0x68, 0xce]))
        defer { hub.closeAll(reason: "the test ended") }
        #expect(hub.udpPorts.rtp % 2 == 0 && hub.udpPorts.rtcp == hub.udpPorts.rtp + 1)
        func setUp(from client: String) -> Int {
            let connection = RTSPConnection(client: client, channel: EmbeddedChannel())
            _ = hub.handle(request("DESCRIBE", url, cseq: 1), on: connection)
            return hub.handle(
                request("SETUP", url + "/trackID=0", cseq: 2, [RTSPHeader("Transport", "RTP/AVP;unicast;client_port=40000-40001")]), on: connection
            ).status
        }
        #expect(setUp(from: "127.0.0.1") == 200)
        #expect(setUp(from: "127.0.0.1") == 503, "per address")
        #expect(setUp(from: "127.0.0.2") == 200)
        #expect(setUp(from: "127.0.0.3") == 503, "overall")
        #expect(hub.refusals.perAddressSessionLimit == 1 && hub.refusals.sessionLimit == 1)
    }
}

/// `mc_count` of an LD_PRELOADed malloc counter (Scripts/malloc-count.c), if one is loaded.
let rtspMallocCounter: (@Sendable () -> Int)? = {
    guard let sym = dlsym(dlopen(nil, RTLD_NOW), "mc_count") else { return nil }
    let f = unsafeBitCast(sym, to: (@convention(c) () -> Int).self)
    return { f() }
}()

extension RTSPHubTests {
    /// Allocations per frame of the fan-out to UDP clients, measured when a malloc counter is loaded:
    ///   gcc -O2 -shared -fPIC -o /tmp/libmc.so Scripts/malloc-count.c
    ///   LD_PRELOAD=/tmp/libmc.so .build/debug/swift-video-capturePackageTests.xctest --testing-library swift-testing --filter mallocs
    /// The hub adds nothing per frame and client to what each client's `RTPSender.send` allocates itself (measured:
    /// the packetizer's, 1–2 per frame).
    @Test(.enabled(if: rtspMallocCounter != nil)) func mallocsPerFrameOfTheFanOut() throws {
        let count = rtspMallocCounter!
        var c = RTSPHub.Configuration()
        c.udpHost = "127.0.0.1"
        let encoded = try frames(2)
        let hub = try RTSPHub(configuration: c, parameterSets: RTPSenderParameterSets.of(encoded[0]))
        defer { hub.closeAll(reason: "the test ended") }
        var sockets: [TestUDP] = []
        var connections: [RTSPConnection] = []
        func addClient() {
            let connection = RTSPConnection(client: "127.0.0.1", channel: EmbeddedChannel())
            connections.append(connection)
            let rtp = TestUDP()
            sockets.append(rtp)
            _ = hub.handle(request("DESCRIBE", url, cseq: 1), on: connection)
            let setup = hub.handle(
                request("SETUP", url + "/trackID=0", cseq: 2, [RTSPHeader("Transport", "RTP/AVP;unicast;client_port=\(rtp.port)-\(rtp.port + 1)")]),
                on: connection)
            let session = String(setup.headers.first { $0.name == "Session" }?.value.prefix { $0 != ";" } ?? "")
            _ = hub.handle(request("PLAY", url, cseq: 3, [RTSPHeader("Session", session)]), on: connection)
        }
        var t: Int64 = 1_000_000_000
        var delta = encoded[1]
        /// (through the hub, through each client's sender directly), per frame.
        func measure(clients: Int) throws -> (hub: Double, senders: Double) {
            while sockets.count < clients { addClient() }
            var key = encoded[0]
            key.timestampNs = t
            try hub.write(key)
            for _ in 0..<30 {
                t += 33_333_333
                delta.timestampNs = t
                try hub.write(delta)
            }
            for s in sockets { _ = s.drain() }
            let before = count()
            for _ in 0..<100 {
                t += 33_333_333
                delta.timestampNs = t
                try hub.write(delta)
            }
            let throughHub = Double(count() - before) / 100
            for s in sockets { _ = s.drain() }
            let senders = connections.flatMap(\.sessions).map(\.sender)
            let b = count()
            for _ in 0..<100 {
                t += 33_333_333
                delta.timestampNs = t
                for s in senders { try s.send(delta) }
            }
            let direct = Double(count() - b) / 100
            for s in sockets { _ = s.drain() }
            return (throughHub, direct)
        }
        let none = try measure(clients: 0), one = try measure(clients: 1), three = try measure(clients: 3)
        print(
            "MEASURE rtsp fan-out mallocs per frame (through the hub / the senders alone): no client \(none.hub), 1 UDP client \(one.hub) / \(one.senders), 3 UDP clients \(three.hub) / \(three.senders)"
        )
        #expect(none.hub < 0.1, "nobody playing: nothing allocated (0.01: the RTCP thread once in the window)")
        #expect(one.hub <= one.senders + 0.1 && three.hub <= three.senders + 0.1, "the hub adds nothing per client")
    }
}

/// SPS and PPS of a key frame (what the CLI gets from `RTSPHub.parameterSets(for:)`).
enum RTPSenderParameterSets {
    static func of(_ frame: EncodedFrame) -> (sps: [UInt8], pps: [UInt8])? {
        guard let s = frame.nalUnits.first(where: { $0.type == .sps }), let p = frame.nalUnits.first(where: { $0.type == .pps }) else { return nil }
        return (Array(frame.data[s.offset..<(s.offset + s.length)]), Array(frame.data[p.offset..<(p.offset + p.length)]))
    }
}
