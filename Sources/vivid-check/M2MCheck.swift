// #51: vivid → V4L2M2MEncoder on vicodec's stateful encoder → an FWHT file in `v4l2-ctl --stream-to-hdr` layout →
// `v4l2-ctl --stream-from-hdr` on vicodec's stateful decoder → compared with what the camera gave (PSNR, frame count),
// and every coded frame's timestamp against its capture's.
import Foundation
import H264
import Recording
import V4L2Capture
import VideoCapture
import VideoProcessing

/// Keeps the first `limit` frames of the camera as packed I420, with their timestamps.
final class I420Grabber: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    let lock = NSLock()
    let limit: Int
    var frames: [(ts: Int64, bytes: [UInt8])] = []
    let converter = FrameConverter()
    init(limit: Int) { self.limit = limit }
    func capturer(_ c: CameraVideoCapturer, didCapture f: VideoFrame) {
        guard lock.withLock({ frames.count < limit }), let i420 = try? converter.convert(f.buffer) else { return }
        let bytes = i420.packedBytes()
        lock.withLock { if frames.count < limit { frames.append((f.timestampNs, bytes)) } }
    }
    func capturer(_ c: CameraVideoCapturer, didDropFrames n: Int, reason: FrameDropReason) {}
    func capturer(_ c: CameraVideoCapturer, didStopWithError e: CaptureError?) {}
}

/// The node whose sysfs name is `name` (vicodec's: `stateful-encoder`, `stateful-decoder`, `stateless-decoder`).
func vicodecNode(_ wanted: String) -> String? {
    let dir = "/sys/class/video4linux"
    for n in ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() {
        let name = ((try? String(contentsOfFile: "\(dir)/\(n)/name", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if name == wanted { return "/dev/\(n)" }
    }
    return nil
}

/// PSNR in dB of two equal-length byte arrays (99 when equal).
func psnr(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Double {
    // Over raw pointers with integer sums: this runs in a debug build under TCG, where a zip of slices in Double
    // took most of a minute per 30-frame recording.
    let n = min(a.count, b.count)
    var total: UInt64 = 0
    a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in
            guard let x = pa.baseAddress?.assumingMemoryBound(to: UInt8.self), let y = pb.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                return
            }
            var i = 0
            while i < n {
                let d = Int32(x[i]) - Int32(y[i])
                total &+= UInt64(d * d)
                i += 1
            }
        }
    }
    let sum = Double(total)
    let mse = sum / Double(max(1, a.count))
    return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
}

func m2mCheck(camera: String) async {
    let name = "M2M: vivid → vicodec FWHT encoder → v4l2-ctl --stream-from-hdr on the decoder"
    guard let enc = vicodecNode("stateful-encoder"), let dec = vicodecNode("stateful-decoder") else {
        check(name, false, "vicodec not loaded (no encoder/decoder node in /sys/class/video4linux)")
        return
    }
    let n = 30, size = FrameSize(width: 640, height: 480) // vicodec pads 360 lines to 368 (the crop selection is not used yet)
    let grabber = I420Grabber(limit: n)
    capturer.addDelegate(grabber)
    defer { capturer.removeDelegate(grabber) }
    do {
        _ = try await start(camera, .i420, size, 30)
        let end = Date().addingTimeInterval(20)
        while grabber.lock.withLock({ grabber.frames.count < n }) && Date() < end { try? await Task.sleep(nanoseconds: 20_000_000) }
        await stopQuietly()
        let frames = grabber.lock.withLock { grabber.frames }
        guard frames.count == n else { return check(name, false, "vivid gave \(frames.count) of \(n) frames") }

        var settings = H264Encoder.Settings(width: size.width, height: size.height)
        settings.keyFrameInterval = 10
        let encoder = try V4L2M2MEncoder(path: enc, codedFormat: V4L2M2MEncoder.fwht, settings: settings)
        let path = "/tmp/m2m.fwht", decodedPath = "/tmp/m2m.yuv"
        let writer = try FramedStreamWriter(path: path) // v4l2-ctl's --stream-to-hdr layout
        var out = EncodedFrame(), stamps: [Int64] = []
        func append(_ f: EncodedFrame) throws {
            try writer.write(f)
            stamps.append(f.timestampNs)
        }
        let picture = I420Buffer(width: size.width, height: size.height)
        let t0 = Date()
        for f in frames {
            guard let p = picture.writablePlanes else { return check(name, false, "no writable picture") }
            f.bytes.withUnsafeBufferPointer { b in
                let ySize = size.width * size.height, cw = size.width / 2, ch = size.height / 2
                for r in 0..<size.height { (p.y + r * picture.strideY).update(from: b.baseAddress! + r * size.width, count: size.width) }
                for r in 0..<ch {
                    (p.u + r * picture.strideU).update(from: b.baseAddress! + ySize + r * cw, count: cw)
                    (p.v + r * picture.strideV).update(from: b.baseAddress! + ySize + cw * ch + r * cw, count: cw)
                }
            }
            try encoder.encode(picture, timestampNs: f.ts, into: &out)
            if !out.isSkipped { try append(out) }
        }
        let drained = try encoder.drain { try append($0) }
        let encodeSeconds = Date().timeIntervalSince(t0)
        encoder.close()
        try writer.close()
        let fileBytes = writer.bytesWritten
        let (rc, text) = v4l2ctl(["-d", dec, "--stream-mmap", "--stream-out-mmap", "--stream-from-hdr", path, "--stream-to", decodedPath])
        let decoded = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: decodedPath))) ?? Data())
        let frameBytes = size.width * size.height * 3 / 2
        let decodedFrames = decoded.count / frameBytes
        let scores = (0..<min(decodedFrames, n)).map { i in psnr(frames[i].bytes[...], decoded[i * frameBytes..<(i + 1) * frameBytes]) }
        let timesOK = stamps.count == n && zip(stamps, frames).allSatisfy { abs($0 - $1.ts) < 1000 }
        note(
            "M2M: \(enc) → \(dec): \(n) frames in \(String(format: "%.2f", encodeSeconds)) s, \(fileBytes) bytes of FWHT, \(drained) at the drain; decoded \(decodedFrames) frames (\(decoded.count) bytes, v4l2-ctl rc \(rc)), PSNR min \(String(format: "%.1f", scores.min() ?? 0)) dB, mean \(String(format: "%.1f", scores.reduce(0, +) / Double(max(1, scores.count)))) dB"
        )
        check(
            name, rc == 0 && decodedFrames == n && decoded.count == n * frameBytes && (scores.min() ?? 0) >= 30 && timesOK,
            "v4l2-ctl rc \(rc), decoded \(decoded.count) bytes (\(decodedFrames) frames), PSNR min \(scores.min() ?? 0), timestamps equal \(timesOK) (\(stamps.count) coded); \(text.suffix(400))"
        )
        try? FileManager.default.removeItem(atPath: path)
        try? FileManager.default.removeItem(atPath: decodedPath)
    } catch {
        await stopQuietly()
        check(name, false, "\(error)")
    }
}

/// The pictures of a Y4M file (4:2:0, one `FRAME` line each): each frame's packed I420 bytes.
func y4mFrames(_ bytes: [UInt8], width: Int, height: Int) -> [ArraySlice<UInt8>] {
    let frameBytes = width * height * 3 / 2
    guard var i = bytes.firstIndex(of: 0x0A).map({ $0 + 1 }) else { return [] }
    var out: [ArraySlice<UInt8>] = []
    while i < bytes.count, let nl = bytes[i...].firstIndex(of: 0x0A), nl + 1 + frameBytes <= bytes.count {
        out.append(bytes[(nl + 1)..<(nl + 1 + frameBytes)])
        i = nl + 1 + frameBytes
    }
    return out
}

/// #51: `camcap record --encoder v4l2m2m:<vicodec's encoder>` on vivid, single- and multi-planar, YU12 and NV12:
/// the camera's buffers imported as DMA-BUF (0 copies per frame), the FWHT file decoded by vicodec's decoder
/// (`v4l2-ctl --stream-from-hdr`) and every frame compared with the preview Y4M of the same frames (PSNR ≥ 35 dB),
/// and as many frames written as captured (the drain at the end loses none).
func m2mRecordChecks(single: String, multi: String) {
    guard let enc = vicodecNode("stateful-encoder"), let dec = vicodecNode("stateful-decoder") else {
        check("M2M record: camcap record --encoder v4l2m2m", false, "vicodec not loaded")
        return
    }
    let n = 30, (w, h) = (640, 480), frameBytes = 640 * 480 * 3 / 2
    // All four cases, one after another on the same vivid and vicodec. (Before the stages ended before the camera
    // stopped, and while NV12 was copied in, a second or third `record` sometimes hung the VM's kernel.)
    let cases = [
        (single, "YU12", "single-planar"), (multi, "YU12", "multi-planar"), (single, "NV12", "single-planar"), (multi, "NV12", "multi-planar"),
    ]
    for (camera, format, kind) in cases {
        let name = "M2M record: camcap record -d \(camera) (\(kind) \(format)) --encoder v4l2m2m:\(enc)"
        let file = "/tmp/rec.fwht", preview = "/tmp/rec.y4m", decodedPath = "/tmp/rec.yuv"
        let t0 = Date()
        // Each step bounded (busybox timeout: SIGTERM, which camcap answers by finishing the file), so that a hang is
        // reported as such and the other cases still run.
        setenv("CAMCAP_LOG", "debug", 1) // the session's stops and failures, in the output
        defer { unsetenv("CAMCAP_LOG") }
        let (rc, text) = bounded(
            "/check/camcap",
            [
                "record", "-d", camera, "--encoder", "v4l2m2m:\(enc)", "--pixel-format", format, "-s", "\(w)x\(h)", "--frames", "\(n)",
                "-o", file, "--preview", preview,
            ])
        let seconds = Date().timeIntervalSince(t0)
        let (drc, dtext) = bounded(
            "/usr/bin/v4l2-ctl", ["-d", dec, "--stream-mmap", "--stream-out-mmap", "--stream-from-hdr", file, "--stream-to", decodedPath])
        let decoded = [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: decodedPath))) ?? Data())
        let pictures = y4mFrames([UInt8]((try? Data(contentsOf: URL(fileURLWithPath: preview))) ?? Data()), width: w, height: h)
        let coded = FramedStreamWriter.frames(in: [UInt8]((try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data())).frames.count
        let decodedFrames = decoded.count / frameBytes
        let scores = (0..<min(decodedFrames, pictures.count)).map { i in psnr(pictures[i], decoded[i * frameBytes..<(i + 1) * frameBytes]) }
        let encoded = text.range(of: "encoded ").map { Int(text[$0.upperBound...].prefix { $0.isNumber }) ?? -1 } ?? -1
        // The camera's buffers go to the encoder as they are (DMA-BUF): YU12's picture is the camera's buffer, NV12's
        // converted picture carries it beside it (`VideoFrame.capturedBuffer`).
        let path = "zero-copy (DMA-BUF): 0 copies per frame (\(n) imported)"
        let zeroCopy = text.contains(path)
        note(
            "\(kind) \(format): exit \(rc) in \(String(format: "%.1f", seconds)) s; \(line(text, "encoder:")); \(line(text, "frames:")); \(coded) coded frames, \(pictures.count) preview pictures, decoded \(decodedFrames) (v4l2-ctl rc \(drc)); PSNR min \(String(format: "%.1f", scores.min() ?? 0)) dB, mean \(String(format: "%.1f", scores.reduce(0, +) / Double(max(1, scores.count)))) dB"
        )
        check(
            name,
            rc == 0 && drc == 0 && zeroCopy && encoded == n && coded == n && pictures.count == n && decodedFrames == n
                && decoded.count == n * frameBytes
                && scores.count == n && (scores.min() ?? 0) >= 35,
            "\(path) \(zeroCopy), encoded \(encoded), coded \(coded), preview \(pictures.count), decoded \(decodedFrames) (\(decoded.count) bytes), PSNR min \(scores.min() ?? 0); camcap exit \(rc): \(text.split(separator: "\n").filter { $0.contains("error") || $0.contains("bounded") }.joined(separator: " | ").suffix(900)) … \(text.suffix(300)); v4l2-ctl exit \(drc): \(dtext.suffix(300))"
        )
        for p in [file, preview, decodedPath] { try? FileManager.default.removeItem(atPath: p) }
    }
}

/// Runs `path` with `args`, its output to a file: SIGTERM after 20 s, SIGKILL after 25 s. Exit code (128 + the
/// signal when killed) and the output, with when a signal was sent (where a hang is).
func bounded(_ path: String, _ args: [String]) -> (Int32, String) {
    let log = "/tmp/bounded-\((path as NSString).lastPathComponent).log"
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { return (-1, "cannot start \(path)") }
    let t0 = Date()
    var status: Int32 = 0, signalled = ""
    while waitpid(pid, &status, WNOHANG) == 0 {
        let s = Date().timeIntervalSince(t0)
        if s > 25 {
            kill(pid, SIGKILL)
            signalled += ", SIGKILL at \(Int(s)) s"
            for _ in 0..<60 where waitpid(pid, &status, WNOHANG) == 0 { usleep(50_000) }
            if kill(pid, 0) == 0 { // not reaped after SIGKILL: asleep in the kernel (D state); where, and move on
                let proc = { (f: String) in (try? String(contentsOfFile: "/proc/\(pid)/\(f)", encoding: .utf8)) ?? "?" }
                let state = proc("status").split(separator: "\n").first { $0.hasPrefix("State:") } ?? "?"
                signalled += "; still there: \(state), wchan \(proc("wchan")), kernel stack:\n\(proc("stack"))"
                status = 9
            }
            break
        }
        if s > 20 && signalled.isEmpty {
            kill(pid, SIGTERM)
            signalled = "SIGTERM at \(Int(s)) s"
        }
        usleep(50_000)
    }
    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    let code: Int32 = (status & 0x7f) != 0 ? 128 + (status & 0x7f) : (status >> 8) & 0xff
    return (code, text + (signalled.isEmpty ? "" : "\n[bounded: \(signalled)]"))
}
