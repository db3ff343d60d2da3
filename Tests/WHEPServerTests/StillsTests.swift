import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TestSupport
import VideoCapture
import WebRTC
import WHEPServer

/// Stills and MJPEG over HTTP (#50): a `JPEGFeed` behind an `HTTPServer`, fed pictures by the test (no camera), on an
/// injected clock for the cache window. Requests go over real TCP; JPEGs are judged by ffprobe and ffmpeg.
@Suite(.serialized, .timeLimit(.minutes(3))) struct StillsTests {
    static let token = "stills-test-token-0123456789"
    static let auth = "Authorization: Bearer \(token)\r\n"

    /// A clock the test moves.
    final class TestClock: Sendable {
        let ns = Mutex<Int64>(1_000_000_000)
        func advance(seconds: Double) { ns.withLock { $0 += Int64(seconds * 1e9) } }
        var read: @Sendable () -> Int64 { { [self] in self.ns.withLock { $0 } } }
    }

    /// A server with a feed of 320x240 pictures at 30 fps.
    final class Rig: Sendable {
        let server: HTTPServer
        let feed: JPEGFeed
        let clock: TestClock
        let hub: ViewerHub
        var port: Int { server.port }
        let sequence = Mutex<UInt64>(0)

        init(server: HTTPServer, feed: JPEGFeed, clock: TestClock, hub: ViewerHub) {
            self.server = server
            self.feed = feed
            self.clock = clock
            self.hub = hub
        }

        static func start(_ change: (inout JPEGFeed.Configuration) -> Void = { _ in }) async throws -> Rig {
            let clock = TestClock()
            var c = JPEGFeed.Configuration()
            change(&c)
            let feed = JPEGFeed(configuration: c, pictureSize: FrameSize(width: 320, height: 240), frameRate: 30, clock: clock.read)
            let hub = ViewerHub(
                identity: try DTLSIdentity(), configuration: WebRTCPeer.Configuration(bindHost: "127.0.0.1", candidateHosts: ["127.0.0.1"]))
            let policy = try ServerPolicy(token: token, hostNames: ["127.0.0.1"])
            let endpoint = WHEPEndpoint(hub: hub, policy: policy, stills: feed)
            let server = try await HTTPServer.start(host: "127.0.0.1", port: 0, endpoint: endpoint, tls: nil)
            return Rig(server: server, feed: feed, clock: clock, hub: hub)
        }

        func stop() async {
            hub.closeAll(reason: "the test ended")
            await server.stop()
        }

        /// A picture whose luma is `luma` everywhere (or noise, seeded by `noise`), through the feed's stage.
        /// `brightBottom`: the lower half at 235 and the upper at `luma` (to see which way a picture was turned).
        func push(
            luma: UInt8, timestampNs: Int64, size: FrameSize = FrameSize(width: 320, height: 240), noise: UInt64? = nil,
            rotation: VideoRotation = .rotation0, brightBottom: Bool = false
        ) throws {
            let picture = I420Buffer(width: size.width, height: size.height)
            let planes = try #require(picture.writablePlanes)
            var rng = SplitMix(seed: noise ?? 0)
            for row in 0..<size.height {
                let value = brightBottom && row >= size.height / 2 ? 235 : luma
                for x in 0..<size.width { planes.y[row * picture.strideY + x] = noise == nil ? value : UInt8(truncatingIfNeeded: rng.next()) }
            }
            for row in 0..<picture.chromaHeight {
                for x in 0..<picture.chromaWidth {
                    planes.u[row * picture.strideU + x] = 128
                    planes.v[row * picture.strideV + x] = 128
                }
            }
            let n = sequence.withLock { s in
                s += 1
                return s
            }
            try feed.stage.consume(picture, frame: VideoFrame(buffer: picture.buffer, rotation: rotation, timestampNs: timestampNs, sequence: n))
        }
    }

    /// A response read off the wire: status, headers, body (Content-Length or chunked).
    struct Reply {
        var status = -1
        var head = ""
        var body: [UInt8] = []
        var text: String { String(decoding: body, as: UTF8.self) }

        init(_ bytes: [UInt8]) {
            guard let end = Reply.find([13, 10, 13, 10], in: bytes, from: 0) else { return }
            head = String(decoding: bytes[..<end], as: UTF8.self)
            status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? -1
            let rest = Array(bytes[(end + 4)...])
            body = head.lowercased().contains("transfer-encoding: chunked") ? Reply.dechunk(rest) : rest
        }

        static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
            guard bytes.count >= needle.count, from <= bytes.count - needle.count else { return nil }
            for i in from...(bytes.count - needle.count) where bytes[i] == needle[0] && Array(bytes[i..<(i + needle.count)]) == needle {
                return i
            }
            return nil
        }

        /// The body of a chunked transfer, as far as it arrived.
        static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [], i = 0
            while let lineEnd = find([13, 10], in: bytes, from: i) {
                guard let size = Int(String(decoding: bytes[i..<lineEnd], as: UTF8.self), radix: 16), size > 0 else { break }
                let start = lineEnd + 2
                guard start + size <= bytes.count else {
                    out += bytes[start...]
                    break
                }
                out += bytes[start..<(start + size)]
                i = start + size + 2
            }
            return out
        }

        /// The JPEGs of a multipart body (each part's Content-Length bytes after its blank line).
        var parts: [[UInt8]] {
            var out: [[UInt8]] = [], i = 0
            while let start = Reply.find(Array("--\(MJPEGClient.boundary)\r\n".utf8), in: body, from: i),
                let blank = Reply.find([13, 10, 13, 10], in: body, from: start)
            {
                let headers = String(decoding: body[start..<blank], as: UTF8.self).lowercased()
                guard let line = headers.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let n = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)), blank + 4 + n <= body.count
                else { break }
                out.append(Array(body[(blank + 4)..<(blank + 4 + n)]))
                i = blank + 4 + n
            }
            return out
        }
    }

    static func get(_ port: Int, _ target: String, headers: String = auth) async throws -> TestClient {
        let c = try await TestClient.connect(port: port, group: MultiThreadedEventLoopGroup.singleton)
        try await c.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(headers)Connection: close\r\n\r\n")
        return c
    }

    static func reply(_ c: TestClient) -> Reply { Reply(c.state.withLock { $0.bytes }) }

    /// Width, height and mean luma of a JPEG, by ffprobe and ffmpeg; `left` and `right`: of its left and right halves.
    static func judge(_ jpeg: [UInt8], _ name: String) throws -> (width: Int, height: Int, luma: Double, left: Double, right: Double) {
        let path = work + "/" + name + ".jpg"
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let probe = try runTool("ffprobe", ["-v", "error", "-show_entries", "stream=width,height,codec_name", "-of", "csv=p=0", path])
        let fields = probe.out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",")
        #expect(probe.code == 0 && fields.first == "mjpeg", "\(probe.out) \(probe.err)")
        let gray = path + ".gray"
        let decode = try runTool("ffmpeg", ["-v", "error", "-y", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", gray])
        #expect(decode.code == 0, "\(decode.err)")
        let pixels = [UInt8](try Data(contentsOf: URL(fileURLWithPath: gray)))
        let mean = pixels.isEmpty ? -1 : Double(pixels.reduce(0) { $0 + Int($1) }) / Double(pixels.count)
        let (w, h) = (fields.count > 1 ? Int(fields[1]) ?? -1 : -1, fields.count > 2 ? Int(fields[2]) ?? -1 : -1)
        var halves = (0, 0)
        if w > 0, h > 0, pixels.count == w * h {
            for (i, p) in pixels.enumerated() {
                if i % w < w / 2 { halves.0 += Int(p) } else { halves.1 += Int(p) }
            }
        }
        let half = Double(max(1, w * h / 2))
        return (w, h, mean, Double(halves.0) / half, Double(halves.1) / half)
    }

    @Test func aSnapshotIsTheNextFrameAtTheSizeAsked() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        #expect(!rig.feed.wantsPictures, "nobody asked: the stage wants no pictures")
        let c = try await Self.get(rig.port, "/snapshot.jpg?width=160&height=120")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures }, "the request waits for a frame")
        try rig.push(luma: 200, timestampNs: 1_000_000_000)
        #expect(try await c.closed())
        let r = Self.reply(c)
        #expect(r.status == 200 && r.head.lowercased().contains("content-type: image/jpeg"), "\(r.head)")
        let j = try Self.judge(r.body, "snapshot-160x120")
        #expect(j.width == 160 && j.height == 120, "\(j)")
        #expect(abs(j.luma - 200) < 3, "\(j)")
        // One side asked: the other follows the picture's 4:3.
        let one = try await Self.get(rig.port, "/snapshot.jpg?width=64")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures })
        rig.clock.advance(seconds: 2)
        try rig.push(luma: 100, timestampNs: 1_100_000_000)
        #expect(try await one.closed())
        let k = try Self.judge(Self.reply(one).body, "snapshot-64")
        #expect(k.width == 64 && k.height == 48, "\(k)")
        #expect(!rig.feed.wantsPictures, "answered: the stage wants no more pictures")
    }

    /// A picture whose rotation is carried as metadata (every WHEP viewer turns it) is turned upright for stills.
    @Test func aRotatedPictureIsServedUpright() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        let c = try await Self.get(rig.port, "/snapshot.jpg")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures })
        // Captured 320x240 with its bright half at the bottom, to be turned 90° clockwise: upright, 240x320 with the
        // bright half on the left.
        try rig.push(luma: 20, timestampNs: 1_000_000_000, rotation: .rotation90, brightBottom: true)
        #expect(try await c.closed())
        let j = try Self.judge(Self.reply(c).body, "rotated")
        #expect(j.width == 240 && j.height == 320 && j.left > j.right + 100, "\(j)")
        // Sizes are then bounded by the upright picture: 240 wide at most.
        let wide = try await Self.get(rig.port, "/snapshot.jpg?width=320&height=240")
        #expect(try await wide.closed())
        #expect(Self.reply(wide).text == "width must be 16...240 (the picture's width), got 320\n", "\(Self.reply(wide).text)")
    }

    @Test func stillsAreRefusedWithoutTheTokenFromForeignOriginsAndForBadSizes() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        for target in ["/snapshot.jpg", "/stream.mjpeg"] {
            let anonymous = try await Self.get(rig.port, target, headers: "")
            #expect(try await anonymous.closed())
            #expect(Self.reply(anonymous).status == 401, "\(Self.reply(anonymous).head)")
            let wrong = try await Self.get(rig.port, target + "?token=not-the-token-0123456789", headers: "")
            #expect(try await wrong.closed())
            #expect(Self.reply(wrong).status == 401 && Self.reply(wrong).text.contains("not this server's"), "\(Self.reply(wrong).text)")
            let foreign = try await Self.get(rig.port, target, headers: Self.auth + "Origin: https://evil.example\r\n")
            #expect(try await foreign.closed())
            #expect(Self.reply(foreign).status == 403 && Self.reply(foreign).text.contains("evil.example"), "\(Self.reply(foreign).text)")
        }
        let bad: [(String, String)] = [
            ("/snapshot.jpg?width=abc", "width must be a whole number of pixels, got \"abc\""),
            ("/snapshot.jpg?width=161&height=120", "width must be even (4:2:0), got 161"),
            ("/snapshot.jpg?height=4000", "height must be 16...240 (the picture's height), got 4000"),
            ("/snapshot.jpg?width=8", "width must be 16...320 (the picture's width), got 8"),
            ("/snapshot.jpg?width=-2", "width must be a whole number of pixels, got \"-2\""),
            ("/stream.mjpeg?fps=90", "fps must be 0.1...30.0 (the camera's rate), got 90"),
            ("/stream.mjpeg?fps=nan", "fps must be a number of frames per second, got \"nan\""),
            ("/stream.mjpeg?width=99999999", "width must be a whole number of pixels, got \"99999999\""),
        ]
        for (target, message) in bad {
            let c = try await Self.get(rig.port, target)
            #expect(try await c.closed())
            let r = Self.reply(c)
            #expect(r.status == 400 && r.text == message + "\n", "\(target): \(r.status) \(r.text)")
        }
        #expect(rig.feed.statistics.mjpegClients == 0 && !rig.feed.wantsPictures)
        // The token in the query (what an <img> can carry) is taken.
        let query = try await Self.get(rig.port, "/snapshot.jpg?token=\(Self.token)&width=32&height=24", headers: "")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures })
        try rig.push(luma: 60, timestampNs: 5_000_000_000)
        #expect(try await query.closed())
        #expect(Self.reply(query).status == 200, "\(Self.reply(query).head)")
    }

    @Test func theCacheWindowServesTheSameBytesThenANewFrame() async throws {
        let rig = try await Rig.start { $0.cacheWindowNs = 1_000_000_000 }
        defer { Task { await rig.stop() } }
        let first = try await Self.get(rig.port, "/snapshot.jpg?width=96&height=72")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures })
        try rig.push(luma: 50, timestampNs: 1_000_000_000)
        #expect(try await first.closed())
        let a = Self.reply(first).body
        // Within the window: the same bytes at once; the stage wants no picture for it.
        rig.clock.advance(seconds: 0.5)
        let second = try await Self.get(rig.port, "/snapshot.jpg?width=96&height=72")
        #expect(try await second.closed())
        #expect(Self.reply(second).status == 200 && Self.reply(second).body == a)
        #expect(!rig.feed.wantsPictures)
        // Another size is not in the cache: it waits.
        let other = try await Self.get(rig.port, "/snapshot.jpg?width=48&height=36")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures })
        try rig.push(luma: 90, timestampNs: 1_033_000_000)
        #expect(try await other.closed())
        #expect(try Self.judge(Self.reply(other).body, "other").width == 48)
        // Past the window: a new frame.
        rig.clock.advance(seconds: 0.6)
        let third = try await Self.get(rig.port, "/snapshot.jpg?width=96&height=72")
        #expect(await waitUntil(timeout: 20) { rig.feed.wantsPictures })
        try rig.push(luma: 150, timestampNs: 1_066_000_000)
        #expect(try await third.closed())
        let b = Self.reply(third).body
        #expect(b != a)
        let (ja, jb) = (try Self.judge(a, "cache-a"), try Self.judge(b, "cache-b"))
        #expect(abs(ja.luma - 50) < 3 && abs(jb.luma - 150) < 3, "\(ja) \(jb)")
        let s = rig.feed.statistics
        #expect(s.snapshots == 4 && s.snapshotsCached == 1 && s.encodes == 3, "\(s)")
    }

    @Test func mjpegClientsGetOnePartPerDueFrameAndTheLimitRefusesTheNext() async throws {
        let rig = try await Rig.start {
            $0.maxClients = 2
            $0.maxClientsPerAddress = 2
        }
        defer { Task { await rig.stop() } }
        let a = try await Self.get(rig.port, "/stream.mjpeg?fps=10&width=160&height=120")
        let b = try await Self.get(rig.port, "/stream.mjpeg?fps=10&width=160&height=120")
        #expect(try await a.received("multipart/x-mixed-replace; boundary=\(MJPEGClient.boundary)"), "\(a.text)")
        #expect(try await b.received("\r\n\r\n"))
        #expect(rig.feed.statistics.mjpegClients == 2)
        let third = try await Self.get(rig.port, "/stream.mjpeg")
        #expect(try await third.closed())
        #expect(Self.reply(third).status == 503 && Self.reply(third).text == "already 2 MJPEG clients; try again when one leaves\n")
        // Frames at 30 fps; the clients asked for 10: every third frame is a part, encoded once for both.
        var ts: Int64 = 0
        for i in 0..<12 {
            try rig.push(luma: UInt8(40 + 12 * i), timestampNs: ts)
            ts += 33_333_333
            if i % 3 == 0 {
                let want = i / 3 + 1
                for c in [a, b] { #expect(try await c.wait { Reply($0.bytes).parts.count >= want }) }
            }
        }
        for (n, c) in [a, b].enumerated() {
            let parts = Self.reply(c).parts
            #expect(parts.count == 4, "client \(n): \(parts.count) parts")
            var last = -1.0
            for (i, p) in parts.enumerated() {
                let j = try Self.judge(p, "mjpeg-\(n)-\(i)")
                #expect(j.width == 160 && j.height == 120 && j.luma > last + 20, "part \(i): \(j)")
                last = j.luma
            }
        }
        let s = rig.feed.statistics
        #expect(s.encodes == 4 && s.mjpegFrames == 8 && s.mjpegRefused == 1, "\(s)")
        await a.close()
        #expect(await waitUntil(timeout: 20) { rig.feed.statistics.mjpegClients == 1 })
        await b.close()
        #expect(await waitUntil(timeout: 20) { rig.feed.statistics.mjpegClients == 0 && !rig.feed.wantsPictures })
    }

    @Test func aClientThatStopsReadingIsDisconnectedAndDoesNotHoldOthersBack() async throws {
        let rig = try await Rig.start {
            $0.stallTimeoutNs = 500_000_000
            $0.maxClientsPerAddress = 4
        }
        defer { Task { await rig.stop() } }
        // A client that sends its request and never reads (autoRead off, a small receive buffer).
        let stuck = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(ChannelOptions.autoRead, value: false)
            .channelOption(ChannelOptions.socketOption(.so_rcvbuf), value: 4096)
            .connect(host: "127.0.0.1", port: rig.port).get()
        try await stuck.writeAndFlush(
            ByteBuffer(string: "GET /stream.mjpeg?fps=30&width=320&height=240 HTTP/1.1\r\nHost: 127.0.0.1\r\n\(Self.auth)\r\n")
        ).get()
        let reader = try await Self.get(rig.port, "/stream.mjpeg?fps=30&width=320&height=240")
        #expect(await waitUntil(timeout: 20) { rig.feed.statistics.mjpegClients == 2 })
        // Noise frames (large JPEGs) until the stuck client is dropped; the reader gets every one meanwhile.
        var ts: Int64 = 0, pushed = 0
        let deadline = Date().addingTimeInterval(60)
        while rig.feed.statistics.mjpegStalled == 0 && Date() < deadline {
            try rig.push(luma: 0, timestampNs: ts, noise: UInt64(pushed + 1))
            ts += 34_000_000
            pushed += 1
            let want = pushed
            #expect(try await reader.wait { Reply($0.bytes).parts.count >= want }, "the reader got part \(want)")
        }
        let s = rig.feed.statistics
        print(
            "FIGURE an MJPEG client that stopped reading: disconnected after \(pushed) noise frames (stall timeout 0.5 s), \(s.mjpegSkipped) parts skipped for it; the reader got all \(pushed)"
        )
        #expect(s.mjpegStalled == 1 && s.mjpegClients == 1 && s.mjpegSkipped > 0, "\(s) after \(pushed) frames")
        // Bounded: what the stuck client was sent is at most what fits in its socket and one part in flight.
        #expect(pushed < 2000, "\(pushed)")
        try? await stuck.close()
        await reader.close()
    }
}
