// Every camcap command on a PipeWire camera (#52): `preview`, `stream`, `rtsp` and `controls` (record and serve:
// PipeWireCameraTests), each judged by what comes out: the producer's bytes in the Y4M, ffmpeg's decode of the RTP and
// RTSP streams.
import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct PipeWireCommandsTests {
    /// `preview --y4m` of an I420 camera with padded rows: the converter drops the padding, and every picture is the
    /// producer's frame byte for byte (Y4M packs the planes: no stride).
    @Test func previewWritesTheProducersPicturesByteForByte() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "preview-cam", ["--pad", "64"])
        let file = scratchDirectory("pipewire-tests") + "/preview.y4m"
        try? FileManager.default.removeItem(atPath: file)
        let r = try runTool(
            builtProduct("camcap"),
            ["preview", "-d", "pipewire:preview-cam", "--pixel-format", "YU12", "-s", "320x240", "--frames", "12", "--y4m", file],
            environment: session.environment)
        #expect(r.code == 0, "\(r.err)")
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        let header = try #require(data.firstIndex(of: 0x0a))
        #expect(String(decoding: data[..<header], as: UTF8.self).hasPrefix("YUV4MPEG2 W320 H240"))
        let planes = testCameraPlanes(.i420, 320, 240)
        let pictureBytes = planes.reduce(0) { $0 + $1.rows * $1.bytes }
        var at = header + 1, numbers: [UInt32] = [], mismatch: String?
        data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            while at + 6 + pictureBytes <= bytes.count, mismatch == nil {
                at += 6 // "FRAME\n"
                let n = UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
                var offset = at
                for (p, shape) in planes.enumerated() {
                    for y in 0..<shape.rows {
                        for x in 0..<shape.bytes where !(p == 0 && y == 0 && x < 4) {
                            let want = expectedByte(frame: n, plane: p, row: y, byte: x)
                            if bytes[offset + y * shape.bytes + x] != want, mismatch == nil {
                                mismatch = "picture \(numbers.count) (frame \(n)) plane \(p) row \(y) byte \(x)"
                            }
                        }
                    }
                    offset += shape.rows * shape.bytes
                }
                numbers.append(n)
                at += pictureBytes
            }
        }
        #expect(mismatch == nil, "\(mismatch ?? "")")
        #expect(numbers.count == 12, "\(numbers.count) pictures in the Y4M")
        // In the producer's order (a dropped frame leaves a gap, never a step back).
        #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "\(numbers)")
    }

    /// `stream` to ffmpeg (RTP over UDP, opened from camcap's SDP): every frame decoded at the negotiated size.
    @Test func streamReachesFFmpeg() throws {
        try #require(onPath("ffmpeg"))
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "stream-cam")
        let dir = scratchDirectory("pipewire-tests")
        let port = try freeUDPPortPair()
        let sdp = dir + "/stream.sdp", md5 = dir + "/stream.framemd5"
        let camcap = builtProduct("camcap")
        let base = ["stream", "-d", "pipewire:stream-cam", "-s", "320x240", "--to", "127.0.0.1:\(port)"]
        let announced = try runTool(camcap, base + ["--sdp", sdp, "--sdp-only"], environment: session.environment)
        #expect(announced.code == 0, "\(announced.err)")
        let ffmpeg = try Child(
            "/usr/bin/ffmpeg", ["-y", "-v", "error", "-protocol_whitelist", "file,udp,rtp", "-i", sdp, "-f", "framemd5", md5],
            environment: session.environment, output: dir + "/stream-ffmpeg.log")
        defer { ffmpeg.stop() }
        #expect(waitUntil(timeout: 10) { udpPortInUse(port) }, "ffmpeg listens on \(port)")
        let r = try runTool(camcap, base + ["--frames", "30", "-q"], environment: session.environment)
        #expect(r.code == 0, "\(r.err)")
        // The stream's RTCP BYE ends ffmpeg's input.
        #expect(waitUntil(timeout: 20) { !ffmpeg.isRunning }, "ffmpeg did not end after the BYE")
        let frames = ((try? String(contentsOfFile: md5, encoding: .utf8)) ?? "").split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(frames.count == 30, "ffmpeg decoded \(frames.count) of 30")
        // 320x240 I420: 115200 bytes a picture.
        #expect(frames.allSatisfy { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.dropFirst(4).first == "115200" })
    }

    /// `rtsp`: ffmpeg over TCP takes 20 pictures at the negotiated size, then camcap ends on Ctrl-C with exit 0.
    @Test func rtspServesFFmpeg() throws {
        try #require(onPath("ffmpeg"))
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "rtsp-cam", ["--pad", "32"])
        let client = Box()
        let r = try runTool(
            builtProduct("camcap"), ["rtsp", "-d", "pipewire:rtsp-cam", "-s", "640x480", "--listen", "127.0.0.1:0", "--no-auth"],
            environment: session.environment,
            interruptWhen: { text in
                guard let m = text.firstMatch(of: /rtsp:\/\/127\.0\.0\.1:(\d+)(\/\S*)/) else { return false }
                let probe = try? runTool(
                    "ffprobe",
                    [
                        "-v", "error", "-rtsp_transport", "tcp", "-i", "rtsp://127.0.0.1:\(m.1)\(m.2)", "-count_frames", "-read_intervals", "%+#20",
                        "-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height,nb_read_frames", "-of", "csv=p=0",
                    ])
                client.set(probe.map { "\($0.code) \($0.out.trimmingCharacters(in: .whitespacesAndNewlines)) \($0.err)" } ?? "ffprobe did not run")
                return true
            })
        #expect(r.code == 0, "\(r.err)")
        #expect(r.err.contains("pipewire:rtsp-cam"), "\(r.err)")
        #expect(client.get().hasPrefix("0 h264,640,480,20"), "\(client.get())")
    }

    /// `controls` on a camera whose node offers none: an empty list said so, and a set names the control and the
    /// camera.
    @Test func controlsOfANodeWithoutControls() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "controls-cam")
        let camcap = builtProduct("camcap")
        let list = try runTool(camcap, ["controls", "-d", "pipewire:controls-cam"], environment: session.environment)
        #expect(list.code == 0, "\(list.err)")
        #expect(list.out.isEmpty, "\(list.out)")
        #expect(list.err.contains("pipewire:controls-cam offers no controls"), "\(list.err)")
        let set = try runTool(camcap, ["controls", "-d", "pipewire:controls-cam", "--set", "brightness=10"], environment: session.environment)
        #expect(set.code != 0)
        #expect(set.err.contains("brightness") && set.err.contains("pipewire:controls-cam"), "\(set.err)")
    }
}

/// An even UDP port whose pair (RTP, RTCP) is free now.
func freeUDPPortPair() throws -> Int {
    for _ in 0..<50 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { break }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let port: Int = withUnsafeMutablePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { s in
                guard bind(fd, s, len) == 0, getsockname(fd, s, &len) == 0 else { return 0 }
                return Int(UInt16(bigEndian: p.pointee.sin_port))
            }
        }
        close(fd)
        let even = port & ~1
        if even > 1024, !udpPortInUse(even), !udpPortInUse(even + 1) { return even }
    }
    throw PipeWireTestError(description: "no free UDP port pair")
}
