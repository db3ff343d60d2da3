import Foundation
import Testing
import TestSupport

/// `camcap rtsp` running in the background: started, waited for (its "serving rtsp://…" line and the camera's
/// start line: events), and stopped with SIGINT (it ends cleanly and prints its summary).
final class RTSPProcess {
    let process = Process()
    let errPath: String, outPath: String
    /// The URL it printed ("rtsp://127.0.0.1:PORT/camera") and its port.
    private(set) var url = ""
    private(set) var port = 0

    /// `running`: the line that says the camera runs ("serving fixture" for the built-in cameras).
    init(_ args: [String], name: String, environment: [String: String] = [:], running: String = "serving fixture") throws {
        errPath = work + "/\(name).err"
        outPath = work + "/\(name).out"
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: camcap)
        process.arguments = ["rtsp", "--listen", "127.0.0.1:0"] + args
        process.standardError = FileHandle(forWritingAtPath: errPath)
        process.standardOutput = FileHandle(forWritingAtPath: outPath)
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        try process.run()
        waitUntil(timeout: 60, every: 0.02) {
            guard let line = err.split(separator: "\n").first(where: { $0.hasPrefix("serving rtsp://") }) else { return !process.isRunning }
            url = String(line.split(separator: " ")[1])
            port = Int(url.split(separator: ":").last?.prefix { $0.isNumber } ?? "") ?? 0
            return err.contains(running) || !process.isRunning // the camera runs too
        }
    }

    var err: String { ServeProcess.read(errPath) }
    var out: String { ServeProcess.read(outPath) }

    /// Waits (up to `timeout` s) until stderr has a line containing `text`; the line, or nil.
    @discardableResult
    func waitForLine(containing text: String, timeout: Double = 60) -> String? {
        var found: String?
        waitUntil(timeout: timeout, every: 0.02) {
            found = err.split(separator: "\n").first { $0.contains(text) }.map(String.init)
            return found != nil
        }
        return found
    }

    /// SIGINT, then the exit status (SIGKILL after 30 s: a hang is a failure, reported as 137).
    func stop() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGINT) }
        waitUntil(timeout: 30, every: 0.02) { !process.isRunning }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return 137
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// The summary's `rtsp client N:` lines.
    var clientLines: [String] { out.split(separator: "\n").filter { $0.hasPrefix("rtsp client ") }.map(String.init) }
}

/// A plain TCP client that speaks RTSP by hand (for the requests no real client sends).
final class RawRTSP {
    let fd: Int32
    private var pending: [UInt8] = []

    /// Connects to 127.0.0.1:`port`, from `from` (another loopback address: every 127/8 address is local on
    /// Linux) when given.
    init(port: Int, receiveBuffer: Int32? = nil, from: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if let from {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(from)
            let b = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard b == 0 else { throw CocoaError(.fileReadUnknown) }
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard r == 0 else { throw CocoaError(.fileReadUnknown) }
    }
    deinit { close(fd) }

    /// Whether the server has closed the connection (EOF or reset), without waiting.
    var isClosed: Bool {
        var b: UInt8 = 0
        let n = recv(fd, &b, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if n == 0 { return true }
        if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        // Data waits (a response): read it, then look again.
        _ = response()
        return self.isClosed
    }

    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    func send(_ text: String) { send(Array(text.utf8)) }

    /// Reads more bytes (nil at EOF, a reset or the 30 s timeout).
    private func fill() -> Bool {
        var b = [UInt8](repeating: 0, count: 65536)
        let n = b.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        pending += b[0..<n]
        return true
    }

    struct Response {
        var status: Int, headers: [String: String], body: String
        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// The next response (interleaved frames before it are skipped and counted); nil if the connection closed.
    func response() -> Response? {
        while true {
            while pending.first == 0x24 {
                guard pending.count >= 4 else { break }
                let n = 4 + (Int(pending[2]) << 8 | Int(pending[3]))
                guard pending.count >= n else { break }
                take(n)
            }
            if pending.first != 0x24, let end = findHeadEnd() {
                let head = String(decoding: pending[..<end], as: UTF8.self)
                var headers: [String: String] = [:]
                let lines = head.components(separatedBy: "\r\n")
                for l in lines.dropFirst() {
                    if let c = l.firstIndex(of: ":") {
                        headers[l[..<c].lowercased()] = l[l.index(after: c)...].trimmingCharacters(in: .whitespaces)
                    }
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                while pending.count < end + 4 + length { guard fill() else { return nil } }
                let body = String(decoding: pending[(end + 4)..<(end + 4 + length)], as: UTF8.self)
                pending.removeFirst(end + 4 + length)
                let status = Int(lines[0].split(separator: " ").dropFirst().first ?? "") ?? -1
                return Response(status: status, headers: headers, body: body)
            }
            guard fill() else { return nil }
        }
    }
    var interleavedFrames = 0
    /// The first interleaved packet on each channel, and how many came on each.
    var firstOnChannel: [UInt8: [UInt8]] = [:]
    var countOnChannel: [UInt8: Int] = [:]
    private func take(_ n: Int) {
        let channel = pending[1]
        if firstOnChannel[channel] == nil { firstOnChannel[channel] = Array(pending[4..<n]) }
        countOnChannel[channel, default: 0] += 1
        pending.removeFirst(n)
        interleavedFrames += 1
    }

    /// Reads until `n` interleaved frames have arrived (false if the connection closed or 30 s passed without data).
    func waitForInterleaved(_ n: Int) -> Bool {
        while interleavedFrames < n {
            while pending.first == 0x24, pending.count >= 4, pending.count >= 4 + (Int(pending[2]) << 8 | Int(pending[3])) {
                take(4 + (Int(pending[2]) << 8 | Int(pending[3])))
            }
            if interleavedFrames >= n { break }
            guard fill() else { return false }
        }
        return true
    }

    private func findHeadEnd() -> Int? {
        guard pending.count >= 4 else { return nil }
        for i in 0...(pending.count - 4) where pending[i] == 13 && pending[i + 1] == 10 && pending[i + 2] == 13 && pending[i + 3] == 10 { return i }
        return nil
    }

    /// Sends a request and returns its response.
    func request(_ method: String, _ uri: String, cseq: Int, _ headers: [String] = []) -> Response? {
        send("\(method) \(uri) RTSP/1.0\r\nCSeq: \(cseq)\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n")
        return response()
    }

    /// True once the server has closed the connection (EOF or reset) within 30 s; anything still coming is read first.
    var closedByServer: Bool {
        while fill() {}
        return true
    }
}

/// ffmpeg pulling `frames` frames from `url` over `transport`, as framemd5 lines; returns the decoded frames and their sizes.
func ffmpegPull(_ url: String, transport: String, frames: Int, name: String, extra: [String] = []) throws -> (
    count: Int, sizes: Set<String>, log: String
) {
    let md5 = work + "/\(name).framemd5"
    let r = try sh(
        "timeout",
        ["120", "ffmpeg", "-y", "-v", "error", "-rtsp_transport", transport, "-i", url] + extra + ["-frames:v", "\(frames)", "-f", "framemd5", md5])
    let lines = ((try? String(contentsOfFile: md5, encoding: .utf8)) ?? "").split(separator: "\n").filter { !$0.hasPrefix("#") }
    // framemd5: stream, dts, pts, duration, size, md5; an I420 640x360 frame is 345600 bytes.
    let sizes = Set(lines.compactMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.dropFirst(4).first })
    return (lines.count, sizes, "exit \(r.code): \(r.err.suffix(600))")
}

/// GStreamer's rtspsrc decoding `frames` frames into a fakesink that reports each buffer (-v): the buffers of
/// `frameBytes` bytes it got.
func gstreamerPull(_ url: String, transport: String, frames: Int, frameBytes: Int, extra: [String] = []) throws -> (count: Int, log: String) {
    let r = try sh(
        "timeout",
        [
            "120", "gst-launch-1.0", "-v", "rtspsrc", "location=\(url)", "protocols=\(transport)", "latency=500",
        ] + extra + [
            "!", "rtph264depay", "!", "h264parse", "!", "avdec_h264", "!", "video/x-raw,format=I420", "!", "fakesink", "silent=false",
            "num-buffers=\(frames)", "sync=false",
        ])
    let count = r.out.components(separatedBy: "(\(frameBytes) bytes,").count - 1
    return (count, "exit \(r.code): \(r.err.suffix(600)) \(r.out.suffix(300))")
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct RTSPTests {
    @Test func ffmpegDecodesTheStreamOverUDPAndOverTCP() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "640x360"], name: "rtsp-ffmpeg")
        defer { _ = server.stop() }
        #expect(server.url.hasPrefix("rtsp://127.0.0.1:") && server.url.hasSuffix("/camera"), "\(server.err)")
        for transport in ["udp", "tcp"] {
            let got = try ffmpegPull(server.url, transport: transport, frames: 300, name: "rtsp-\(transport)")
            print("ffmpeg over \(transport): \(got.count) of 300 frames, sizes \(got.sizes)")
            #expect(got.count >= 294, "ffmpeg over \(transport) decoded \(got.count) of 300: \(got.log)")
            #expect(got.sizes == ["345600"], "640x360 I420: \(got.sizes)")
        }
        #expect(server.stop() == 0)
        let clients = server.clientLines
        #expect(clients.count == 2, "\(server.out)")
        #expect(clients.first?.contains("udp") == true && clients.last?.contains("tcp 0-1") == true, "\(clients)")
        #expect(clients.allSatisfy { $0.contains("ended: the client sent TEARDOWN") }, "\(clients)")
        #expect(server.err.contains("rtsp: client 1 playing") && server.err.contains("rtsp: client 2 playing"))
    }

    /// #48: a camera unplugged for 5 s while ffmpeg plays is waited for (`rtsp`'s default), and its source then changes
    /// size: the client keeps its one session and decodes every frame it asked for, from both sides of the gap and at
    /// both sizes (ffmpeg's `-autoscale 0`: the frames as decoded, not scaled to the first size); the server exits 0.
    @Test func aClientKeepsItsSessionWhileTheCameraIsUnpluggedAndBackAndChangesSize() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--fixture-fault", "unplug@300+5", "--fixture-fault", "resize@390:640x360"], name: "rtsp-heal")
        defer { _ = server.stop() }
        // The unplug comes 10 s after the start (time for ffmpeg to start playing on a loaded box); 450 frames from
        // wherever ffmpeg starts reach past the size change at 390.
        let got = try ffmpegPull(server.url, transport: "tcp", frames: 450, name: "rtsp-heal", extra: ["-autoscale", "0"])
        #expect(got.count >= 441 && got.sizes == ["86400", "345600"], "ffmpeg decoded \(got.count) of 450 through the unplug: \(got.log)")
        let err = server.err
        let playing = err.range(of: "rtsp: client 1 playing"), lost = err.range(of: "camera lost: fixture:vivid was unplugged at frame 300")
        #expect(playing != nil && lost != nil && playing!.lowerBound < lost!.lowerBound, "the camera went while the client played: \(err)")
        #expect(err.contains("camera back after"), "\(err)")
        #expect(err.contains("source changed: YU12 320x180 @ 30 fps → YU12 640x360 @ 30 fps"), "\(err)")
        #expect(server.stop() == 0, "\(server.err)")
        #expect(server.clientLines.count == 1, "one session throughout: \(server.out)")
        #expect(server.out.contains("lost 1 time (disconnected 1), back 1,"), "\(server.out)")
    }

    @Test func gstreamerDecodesOverTCPAndUDPAndItsReceiverReportsGiveTheRoundTripTime() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "640x360", "--noise", "4"], name: "rtsp-gst")
        defer { _ = server.stop() }
        for transport in ["tcp", "udp"] {
            let got = try gstreamerPull(server.url, transport: transport, frames: 300, frameBytes: 345_600)
            print("GStreamer over \(transport): \(got.count) of 300 frames")
            #expect(got.count >= 294, "GStreamer over \(transport) decoded \(got.count) of 300: \(got.log)")
        }
        #expect(server.stop() == 0)
        let clients = server.clientLines
        #expect(clients.count == 2, "\(server.out)")
        // rtpbin reports every few seconds, over the interleaved channel 1 and to the UDP RTCP port.
        for c in clients { #expect(!c.contains(" 0 receiver reports") && !c.contains("rtt -"), "\(c)") }
    }

    @Test func threeClientsAtOnceShareOneEncode() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "640x360"], name: "rtsp-three")
        defer { _ = server.stop() }
        let results = Mutex3(), url = server.url
        let group = DispatchGroup()
        for i in 0..<3 { // three threads of their own (concurrentPerform would run only as many as there are cores)
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                let r: (Int, String)
                switch i {
                case 0: r = (try? ffmpegPull(url, transport: "udp", frames: 300, name: "three-udp")).map { ($0.count, $0.log) } ?? (-1, "")
                case 1: r = (try? ffmpegPull(url, transport: "tcp", frames: 300, name: "three-tcp")).map { ($0.count, $0.log) } ?? (-1, "")
                default: r = (try? gstreamerPull(url, transport: "tcp", frames: 300, frameBytes: 345_600)) ?? (-1, "")
                }
                results.set(i, r)
            }
        }
        group.wait()
        for (i, name) in ["ffmpeg udp", "ffmpeg tcp", "GStreamer tcp"].enumerated() {
            let r = results.get(i)
            print("three at once: \(name) \(r.0) of 300")
            #expect(r.0 >= 294, "\(name) decoded \(r.0) of 300: \(r.1)")
        }
        #expect(server.stop() == 0)
        #expect(server.clientLines.count == 3, "\(server.out)")
        // One encode for all: the encoder's frame count is about the capture's, not three times it.
        let encoded = summaryValue(server.out, "encoded") ?? 0, captured = summaryValue(server.out, "captured") ?? 0
        #expect(encoded > 0 && encoded <= captured, "\(server.out)")
    }

    @Test func aUDPClientThatVanishesIsDroppedAtItsSessionTimeoutWhileOneThatKeepsAliveStays() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "640x360", "--session-timeout", "3"], name: "rtsp-timeout")
        defer { _ = server.stop() }
        let doomed = try startReceiver(
            "ffmpeg", ["-v", "error", "-rtsp_transport", "udp", "-i", server.url, "-f", "null", "-"], log: work + "/rtsp-doomed.log")
        defer { stopReceiver(doomed) }
        #expect(server.waitForLine(containing: "rtsp: client 1 playing") != nil, "\(server.err)")
        // A second UDP client plays for 10 s, longer than the timeout: its keep-alives (GET_PARAMETER every
        // timeout/2 s, in whole seconds) keep it.
        let keeper = DispatchQueue.global()
        let kept = Mutex3(), url = server.url
        let done = DispatchSemaphore(value: 0)
        keeper.async {
            let r = (try? ffmpegPull(url, transport: "udp", frames: 300, name: "rtsp-keeper")).map { ($0.count, $0.log) } ?? (-1, "")
            kept.set(0, r)
            done.signal()
        }
        #expect(server.waitForLine(containing: "rtsp: client 2 playing") != nil, "\(server.err)")
        kill(doomed.processIdentifier, SIGKILL) // no TEARDOWN, no more RTCP or keep-alives
        let killed = Date()
        let line = server.waitForLine(containing: "rtsp: client 1 ended", timeout: 60)
        let after = Date().timeIntervalSince(killed)
        print("vanished client: \(line ?? "-") after \(String(format: "%.1f", after)) s")
        #expect(line?.contains("timed out: no request or RTCP from the client for 3 s") == true, "\(server.err)")
        // 3 s from its last sign of life (ffmpeg keeps alive every timeout/2 in whole seconds: 1 s before the kill at most) plus the
        // 100 ms check; a loaded box adds some.
        #expect(after >= 1.0 && after < 10, "dropped \(after) s after the kill")
        done.wait()
        let k = kept.get(0)
        #expect(k.0 >= 294, "the client that kept alive decoded \(k.0) of 300: \(k.1)")
        #expect(server.waitForLine(containing: "rtsp: client 2 ended: the client sent TEARDOWN", timeout: 30) != nil, "\(server.err)")
    }

    @Test func digestAuthenticationRefusesWrongCredentialsAndAdmitsRightOnes() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "640x360", "--user", "admin"], name: "rtsp-auth", environment: ["CAMCAP_RTSP_PASSWORD": "s3cret pw"])
        defer { _ = server.stop() }
        #expect(server.err.contains("Digest authentication, user admin"), "\(server.err)")
        // Without credentials: 401 with a Digest challenge (OPTIONS stays open: clients ask it first).
        let raw = try RawRTSP(port: server.port)
        #expect(raw.request("OPTIONS", server.url, cseq: 1)?.status == 200)
        let refused = raw.request("DESCRIBE", server.url, cseq: 2)
        #expect(refused?.status == 401)
        let challenge = refused?.header("WWW-Authenticate") ?? ""
        #expect(challenge.hasPrefix("Digest realm=\"camcap\", nonce=\"") && challenge.contains("algorithm=MD5"), "\(challenge)")
        // Wrong password: ffmpeg gives up with 401.
        let host = server.url.dropFirst("rtsp://".count)
        let wrong = try sh("timeout", ["60", "ffprobe", "-v", "error", "-rtsp_transport", "tcp", "rtsp://admin:nope@\(host)"])
        #expect(wrong.code != 0 && wrong.err.contains("401"), "\(wrong.err)")
        // The right one (URL-encoded space): ffmpeg decodes.
        let right = try ffmpegPull("rtsp://admin:s3cret%20pw@\(host)", transport: "tcp", frames: 90, name: "rtsp-auth-ok")
        #expect(right.count >= 88, "\(right.log)")
        // GStreamer's Digest too.
        let gst = try gstreamerPull(server.url, transport: "tcp", frames: 90, frameBytes: 345_600, extra: ["user-id=admin", "user-pw=s3cret pw"])
        #expect(gst.count >= 88, "\(gst.log)")
        #expect(server.stop() == 0)
        #expect(server.out.contains("rtsp refused:") && !server.out.contains("rtsp refused:  0 unauthorized"), "\(server.out)")
        #expect(server.clientLines.count == 2, "\(server.out)")
    }

    /// A Digest answer to `challenge` (RFC 2617 without qop, as live555 and GStreamer send it), hashed by Python's hashlib.
    func digest(_ challenge: String, user: String, password: String, method: String, uri: String) throws -> String {
        func field(_ name: String) -> String {
            guard let r = challenge.range(of: name + "=\"") else { return "" }
            return String(challenge[r.upperBound...].prefix { $0 != "\"" })
        }
        let realm = field("realm"), nonce = field("nonce")
        let py =
            "import hashlib,sys; h=lambda s: hashlib.md5(s.encode()).hexdigest(); u,r,p,n,m,i=sys.argv[1:]; "
            + "print(h(h(u+':'+r+':'+p)+':'+n+':'+h(m+':'+i)))"
        let response = try sh("python3", ["-c", py, user, realm, password, nonce, method, uri]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        return "Digest username=\"\(user)\", realm=\"\(realm)\", nonce=\"\(nonce)\", uri=\"\(uri)\", response=\"\(response)\""
    }

    @Test func anExpiredNonceIsAnsweredStaleAndAFreshOneIsAccepted() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--user", "cam", "--nonce-lifetime", "3"], name: "rtsp-stale",
            environment: ["CAMCAP_RTSP_PASSWORD": "pw"])
        defer { _ = server.stop() }
        let c = try RawRTSP(port: server.port)
        let challenge = c.request("DESCRIBE", server.url, cseq: 1)?.header("WWW-Authenticate") ?? ""
        let credentials = try digest(challenge, user: "cam", password: "pw", method: "DESCRIBE", uri: server.url)
        #expect(c.request("DESCRIBE", server.url, cseq: 2, ["Authorization: \(credentials)"])?.status == 200)
        // The same credentials until the nonce expires (an event the server reports: 401 with stale=true).
        var cseq = 3
        var stale: RawRTSP.Response?
        waitUntil(timeout: 30, every: 0.1) {
            cseq += 1
            let r = c.request("DESCRIBE", server.url, cseq: cseq, ["Authorization: \(credentials)"])
            if r?.status != 200 { stale = r }
            return r?.status != 200
        }
        #expect(stale?.status == 401 && stale?.header("WWW-Authenticate")?.hasSuffix("stale=true") == true, "\(stale?.headers ?? [:])")
        let fresh = try digest(stale?.header("WWW-Authenticate") ?? "", user: "cam", password: "pw", method: "DESCRIBE", uri: server.url)
        #expect(c.request("DESCRIBE", server.url, cseq: cseq + 1, ["Authorization: \(fresh)"])?.status == 200)
        // A wrong password is never called stale.
        let wrong = try digest(challenge, user: "cam", password: "nope", method: "DESCRIBE", uri: server.url)
        let refused = c.request("DESCRIBE", server.url, cseq: cseq + 2, ["Authorization: \(wrong)"])
        #expect(refused?.status == 401 && refused?.header("WWW-Authenticate")?.contains("stale") == false)
        #expect(server.stop() == 0)
    }

    @Test func malformedRequestsGetTheRightStatusAndNeverHangTheServer() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "640x360", "--request-timeout", "1", "--max-clients", "1", "--max-connections-per-address", "6"],
            name: "rtsp-malformed")
        defer { _ = server.stop() }
        let url = server.url
        let a = try RawRTSP(port: server.port)
        #expect(a.request("FOO", url, cseq: 1)?.status == 501, "an unknown method")
        #expect(a.request("RECORD", url, cseq: 2)?.status == 405, "a method this server does not allow")
        #expect(a.request("DESCRIBE", "rtsp://127.0.0.1/elsewhere", cseq: 3)?.status == 404)
        #expect(
            a.request("SETUP", url + "/trackID=0", cseq: 4, ["Transport: RTP/AVP;unicast;client_port=5000-5001"])?.status == 455,
            "SETUP before DESCRIBE")
        #expect(a.request("PLAY", url, cseq: 5)?.status == 454, "PLAY without SETUP")
        #expect(a.request("PLAY", url, cseq: 6, ["Session: 0123456789ABCDEF"])?.status == 454, "PLAY with an unknown session")
        // go2rtc asks for the ONVIF backchannel first; without one that is 551, and it asks again without.
        let backchannel = a.request("DESCRIBE", url, cseq: 7, ["Require: www.onvif.org/ver20/backchannel"])
        #expect(backchannel?.status == 551 && backchannel?.header("Unsupported") == "www.onvif.org/ver20/backchannel")
        let sdp = a.request("DESCRIBE", url, cseq: 7)
        #expect(sdp?.status == 200 && sdp?.header("Content-Type") == "application/sdp")
        #expect(sdp?.body.contains("a=control:trackID=0") == true && sdp?.body.contains("sprop-parameter-sets=") == true, "\(sdp?.body ?? "")")
        #expect(sdp?.body.contains("profile-level-id=42") == true && sdp?.header("Content-Base") == url + "/")
        #expect(a.request("SETUP", url + "/trackID=0", cseq: 8, ["Transport: RTP/AVP;multicast"])?.status == 461, "multicast")
        #expect(a.request("SETUP", url + "/trackID=0", cseq: 9, ["Transport: RTP/AVP;unicast;client_port=99999-100000"])?.status == 400)
        #expect(a.request("SETUP", url + "/trackID=0", cseq: 10)?.status == 400, "no Transport")
        let setup = a.request("SETUP", url + "/trackID=0", cseq: 11, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
        #expect(setup?.status == 200 && setup?.header("Transport")?.hasPrefix("RTP/AVP/TCP;unicast;interleaved=0-1;ssrc=") == true)
        #expect(setup?.header("Session")?.hasSuffix(";timeout=60") == true, "\(setup?.headers ?? [:])")
        // The session limit (--max-clients 1): a second SETUP elsewhere is refused.
        let b = try RawRTSP(port: server.port)
        #expect(b.request("DESCRIBE", url, cseq: 1)?.status == 200)
        #expect(b.request("SETUP", url + "/trackID=0", cseq: 2, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])?.status == 503)
        // PLAY, then interleaved frames on unknown channels are ignored; RTSP after them still works.
        let session = String(setup?.header("Session")?.prefix { $0 != ";" } ?? "")
        let play = a.request("PLAY", url, cseq: 12, ["Session: \(session)"])
        #expect(play?.status == 200 && play?.header("RTP-Info")?.contains(";seq=") == true && play?.header("RTP-Info")?.contains(";rtptime=") == true)
        #expect(a.waitForInterleaved(40), "media arrives interleaved")
        // The client's first packet is SPS+PPS in a STAP-A (a key frame follows), numbered and timed as RTP-Info said.
        let first = a.firstOnChannel[0] ?? []
        #expect(first.count > 16 && first[12] & 0x1f == 24 && first[15] & 0x1f == 7, "STAP-A with the SPS first: \(first.prefix(16))")
        let info = play?.header("RTP-Info") ?? ""
        if first.count >= 12 {
            let seq = Int(first[2]) << 8 | Int(first[3])
            let ts = first[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            #expect(info.contains(";seq=\(seq);") && info.hasSuffix(";rtptime=\(ts)"), "\(info) vs seq \(seq) ts \(ts)")
        }
        #expect(a.countOnChannel[1, default: 0] >= 1, "a sender report on the RTCP channel")
        #expect(a.request("PAUSE", url, cseq: 14, ["Session: \(session)"])?.status == 200)
        let again = a.request("PLAY", url, cseq: 15, ["Session: \(session)"])
        #expect(again?.status == 200 && again?.header("RTP-Info")?.contains(";seq=") == true)
        a.send([0x24, 9, 0, 4, 1, 2, 3, 4, 0x24, 1, 0, 2, 0xff, 0xff])
        #expect(a.request("GET_PARAMETER", url, cseq: 13, ["Session: \(session)"])?.status == 200)
        #expect(a.request("SETUP", url + "/trackID=0", cseq: 16, ["Session: \(session)", "Transport: RTP/AVP/TCP;interleaved=2-3"])?.status == 459)
        // Garbage that is no request: 400 and the connection is closed (its TCP session ends with it).
        a.send([0x00, 0x01, 0x02, 0x20, 0x6a, 0x75, 0x6e, 0x6b, 0x20, 0x0d, 0x0a])
        var last: RawRTSP.Response?
        while let r = a.response() { last = r }
        #expect(last?.status == 400 && last?.body.contains("method") == true, "\(last?.body ?? "-")")
        #expect(server.waitForLine(containing: "rtsp: client 1 ended: its connection closed") != nil, "\(server.err)")
        // Missing CSeq, a huge header, a version we do not speak: each answered, then closed.
        for (bytes, status) in [
            ("OPTIONS * RTSP/1.0\r\n\r\n", 400), ("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX: " + String(repeating: "x", count: 20_000) + "\r\n\r\n", 400),
            ("OPTIONS * RTSP/2.0\r\nCSeq: 1\r\n\r\n", 505),
        ] {
            let c = try RawRTSP(port: server.port)
            c.send(bytes)
            #expect(c.response()?.status == status, "\(bytes.prefix(40))")
            #expect(c.closedByServer)
        }
        // A request that never completes is cut off at the request timeout (1 s): the server closes it.
        let slow = try RawRTSP(port: server.port)
        slow.send("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n")
        let started = Date()
        #expect(slow.response() == nil && Date().timeIntervalSince(started) < 20, "closed at the request timeout")
        // After all that the server serves: a real client decodes.
        let got = try ffmpegPull(url, transport: "tcp", frames: 60, name: "rtsp-after-abuse")
        #expect(got.count >= 58, "\(got.log)")
        #expect(server.stop() == 0, "\(server.err.suffix(500))")
        #expect(server.out.contains("rtsp refused:") && server.out.contains("4 malformed") && server.out.contains("1 timeouts"), "\(server.out)")
    }

    @Test func aTCPClientThatDoesNotReadLosesFramesAndIsCutOffWithoutHoldingUpTheOthers() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "640x360", "--noise", "8", "--bitrate", "3000", "--slow-client-timeout", "2"], name: "rtsp-slow")
        defer { _ = server.stop() }
        // A client with a 4 KiB receive buffer that plays over TCP and then reads nothing.
        let stuck = try RawRTSP(port: server.port, receiveBuffer: 4096)
        #expect(stuck.request("DESCRIBE", server.url, cseq: 1)?.status == 200)
        let setup = stuck.request("SETUP", server.url + "/trackID=0", cseq: 2, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
        let session = String(setup?.header("Session")?.prefix { $0 != ";" } ?? "")
        #expect(stuck.request("PLAY", server.url, cseq: 3, ["Session: \(session)"])?.status == 200)
        // Meanwhile ffmpeg over UDP gets every frame: the encoder is never held up by the stuck connection.
        let got = try ffmpegPull(server.url, transport: "udp", frames: 300, name: "rtsp-beside-slow")
        print("beside a stuck TCP client: ffmpeg over udp \(got.count) of 300")
        #expect(got.count >= 294, "\(got.log)")
        let line = server.waitForLine(containing: "rtsp: client 1 ended", timeout: 90)
        #expect(line?.contains("too slow: it did not read the stream for 2 s") == true, "\(server.err)")
        #expect(stuck.closedByServer)
        #expect(server.stop() == 0)
        let stuckLine = server.clientLines.first { $0.hasPrefix("rtsp client 1:") } ?? ""
        print(stuckLine)
        #expect(stuckLine.contains("dropped (slow)"), "\(server.out)")
    }

    @Test func theCameraIsReleasedWithoutClientsAndRestartsForTheNextOne() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180", "--idle-release", "0.5"], name: "rtsp-idle")
        defer { _ = server.stop() }
        #expect(server.waitForLine(containing: "camera released") != nil, "\(server.err)")
        let got = try ffmpegPull(server.url, transport: "tcp", frames: 60, name: "rtsp-after-release")
        #expect(got.count >= 59 && got.sizes == ["86400"], "\(got.log) \(got.sizes)")
        #expect(server.waitForLine(containing: "camera restarted") != nil, "\(server.err)")
        #expect(server.stop() == 0)
    }

    @Test func anIdleConnectionIsClosedButOneWithASessionStaysUntilTheSessionEnds() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--idle-timeout", "1", "--session-timeout", "4"], name: "rtsp-idle-conn")
        defer { _ = server.stop() }
        let idle = try RawRTSP(port: server.port)
        #expect(idle.request("OPTIONS", "*", cseq: 1)?.status == 200)
        let start = Date()
        #expect(idle.closedByServer)
        let idleClosed = Date().timeIntervalSince(start)
        #expect(idleClosed >= 0.9 && idleClosed < 20, "closed \(idleClosed) s after its last request")
        // A UDP session (set up, never played, no keep-alive) holds its connection past the idle timeout until the
        // session's own timeout ends it; then the idle connection is closed too.
        let held = try RawRTSP(port: server.port)
        #expect(held.request("DESCRIBE", server.url, cseq: 1)?.status == 200)
        let setUp = held.request("SETUP", server.url + "/trackID=0", cseq: 2, ["Transport: RTP/AVP;unicast;client_port=40000-40001"])
        #expect(setUp?.status == 200)
        let since = Date()
        #expect(held.closedByServer)
        let heldFor = Date().timeIntervalSince(since)
        print("idle connection closed after \(String(format: "%.1f", idleClosed)) s; with a session after \(String(format: "%.1f", heldFor)) s")
        #expect(heldFor >= 3.5, "the session kept its connection \(heldFor) s")
        #expect(server.waitForLine(containing: "rtsp: client 1 ended: timed out") != nil, "\(server.err)")
        #expect(server.stop() == 0)
        #expect(server.out.contains(" 2 timeouts"), "\(server.out)")
    }

    @Test func aClientThatSendsRequestsButReadsNoAnswersIsNoLongerRead() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180"], name: "rtsp-pipelined")
        defer { _ = server.stop() }
        func rssKiB() -> Int {
            let status = ServeProcess.read("/proc/\(server.process.processIdentifier)/status")
            return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ")[1]) } ?? -1
        }
        let rssBefore = rssKiB()
        let flood = try RawRTSP(port: server.port, receiveBuffer: 4096)
        // OPTIONS after OPTIONS, never reading: once the answers fill what the server lets wait for this connection
        // (its 1 MiB write buffer), the server stops reading and our sends would block.
        let chunk = Array((0..<100).map { "OPTIONS * RTSP/1.0\r\nCSeq: \($0)\r\n\r\n" }.joined().utf8)
        var sent = 0, blockedFor = 0
        while sent < 64 << 20 && blockedFor < 200 {
            let n = chunk.withUnsafeBytes { Glibc.send(flood.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
                blockedFor = 0
            } else {
                blockedFor += 1 // would block: wait a little for the server to read more, if it still does
                usleep(10_000)
            }
        }
        let grown = rssKiB() - rssBefore
        print("requests sent before the server stopped reading: \(sent / 1024) KiB; the server grew by \(grown) KiB")
        #expect(sent < 32 << 20, "the server kept reading \(sent >> 20) MiB of requests whose answers nobody read")
        #expect(grown < 24 * 1024, "answers nobody reads pile up: the server grew by \(grown) KiB")
        // Others are served meanwhile.
        let other = try RawRTSP(port: server.port)
        #expect(other.request("OPTIONS", "*", cseq: 1)?.status == 200)
        #expect(server.stop() == 0)
    }

    @Test func ffmpegDecodesOverIPv6() throws {
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180", "--listen", "[::1]:0"], name: "rtsp-ipv6")
        defer { _ = server.stop() }
        #expect(server.url.hasPrefix("rtsp://[::1]:"), "\(server.err)")
        for transport in ["udp", "tcp"] {
            let got = try ffmpegPull(server.url, transport: transport, frames: 60, name: "rtsp-ipv6-\(transport)")
            #expect(got.count >= 59 && got.sizes == ["86400"], "over IPv6 \(transport): \(got.log)")
        }
        #expect(server.stop() == 0)
        #expect(server.clientLines.count == 2 && server.clientLines.allSatisfy { $0.contains("::1 ") }, "\(server.out)")
    }

    @Test func connectionsOverTheLimitGet503() throws {
        let server = try RTSPProcess(
            ["-d", "fixture:vivid", "-s", "320x180", "--max-connections-per-address", "2", "--max-request-bytes", "2048"], name: "rtsp-connlimit")
        defer { _ = server.stop() }
        let a = try RawRTSP(port: server.port), b = try RawRTSP(port: server.port)
        #expect(a.request("OPTIONS", "*", cseq: 1)?.status == 200 && b.request("OPTIONS", "*", cseq: 1)?.status == 200)
        let c = try RawRTSP(port: server.port)
        let refused = c.response()
        #expect(refused?.status == 503 && refused?.body.contains("too many connections from your address") == true)
        #expect(c.closedByServer)
        // --max-request-bytes 2048: a 3 KB request is 413, and its connection closed.
        b.send("OPTIONS * RTSP/1.0\r\nCSeq: 2\r\n" + (0..<30).map { "X-\($0): \(String(repeating: "y", count: 90))\r\n" }.joined() + "\r\n")
        let tooLarge = b.response()
        #expect(tooLarge?.status == 413 && tooLarge?.body.contains("longer than 2048 bytes") == true, "\(tooLarge?.body ?? "-")")
        #expect(b.closedByServer)
        #expect(server.stop() == 0)
    }

    @Test func optionsListsTheMethodsAndHelpTeachesTheClients() throws {
        let help = try sh(camcap, ["rtsp", "--help"])
        for s in ["ffplay", "gst-launch-1.0 rtspsrc", "vlc", "go2rtc", "MediaMTX", "--user", "--session-timeout", "CAMCAP_RTSP_PASSWORD"] {
            #expect(help.out.contains(s), "--help mentions \(s)")
        }
        let bad = try sh(camcap, ["rtsp", "--path", "camera"])
        #expect(bad.code != 0 && bad.err.contains("--path must be /NAME"), "\(bad.err)")
        let noPassword = try runTool(camcap, ["rtsp", "-d", "fixture:vivid", "--user", "admin"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(noPassword.code != 0 && noPassword.err.contains("--user needs a password"), "\(noPassword.err)")
        let server = try RTSPProcess(["-d", "fixture:vivid", "-s", "320x180"], name: "rtsp-options")
        defer { _ = server.stop() }
        let a = try RawRTSP(port: server.port)
        let options = a.request("OPTIONS", server.url, cseq: 41)
        #expect(options?.status == 200 && options?.header("CSeq") == "41")
        #expect(options?.header("Public") == "OPTIONS, DESCRIBE, SETUP, PLAY, PAUSE, TEARDOWN, GET_PARAMETER, SET_PARAMETER")
        #expect(server.stop() == 0)
    }
}

/// A few results written by concurrent threads.
final class Mutex3: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var values: [Int: (Int, String)] = [:]
    func set(_ i: Int, _ v: (Int, String)) { lock.withLock { values[i] = v } }
    func get(_ i: Int) -> (Int, String) { lock.withLock { values[i] ?? (-1, "no result") } }
}
