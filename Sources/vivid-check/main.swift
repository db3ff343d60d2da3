// The checks the vivid VM test runs on a real kernel driver. Prints one line per check
// ("PASS name" / "FAIL name: why") and closes with "RESULT: N passed, M failed".
import Foundation
import VideoCapture
import V4L2Capture
import VideoProcessing
import FixtureCameras
import H264

// A mode, not a check: the writer that makes v4l2loopback an H.264 camera (Feeder.swift).
if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "feed" { feedLoopback(Array(CommandLine.arguments.dropFirst(2))) }

nonisolated(unsafe) var passed = 0, failed = 0 // also read by the watchdog thread, which then exits
func check(_ name: String, _ ok: Bool, _ detail: @autoclosure () -> String = "") {
    if ok {
        passed += 1
        print("PASS \(name)")
    } else {
        failed += 1
        print("FAIL \(name): \(detail())")
    }
    fflush(stdout)
}
func note(_ s: String) {
    print("  \(s)")
    fflush(stdout)
}

/// Spawns a program (posix_spawn: Foundation's Process needs more of a system than the initramfs has).
func spawn(_ path: String, _ args: [String], capture: Bool) -> (pid: pid_t, fd: Int32)? {
    var fds: [Int32] = [-1, -1]
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if capture {
        guard pipe(&fds) == 0 else { return nil }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        posix_spawn_file_actions_addclose(&actions, fds[0])
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
    if capture { close(fds[1]) }
    guard rc == 0 else {
        if capture { close(fds[0]) }
        return nil
    }
    return (pid, fds[0])
}

@discardableResult
func v4l2ctl(_ args: [String]) -> (Int32, String) {
    guard let (pid, fd) = spawn("/usr/bin/v4l2-ctl", args, capture: true) else { return (-1, "spawn failed") }
    return finish(pid, fd)
}

let checksStarted = Date()
// A hang must not eat the VM's whole time budget: report and leave.
Thread.detachNewThread {
    sleep(420)
    print("FAIL watchdog: checks did not finish in 420 s")
    print("RESULT: \(passed) passed, \(failed + 1) failed")
    fflush(stdout)
    exit(1)
}

/// Open descriptors and mappings of video nodes in this process.
func leftovers() -> (fds: Int, maps: Int) {
    let fds = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).filter {
        ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) ?? "").hasPrefix("/dev/video")
    }.count
    let maps =
        (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8))?.split(separator: "\n").filter { $0.contains("/dev/video") }.count ?? -1
    return (fds, maps)
}

final class Collector: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    let lock = NSLock()
    var frames: [(ts: Int64, w: Int, h: Int, stride: Int, pf: PixelFormat, bytes: Int)] = []
    var drops: [FrameDropReason: Int] = [:]
    var stopError: CaptureError??
    var convertErrors = 0
    let converter = FrameConverter()
    func capturer(_ c: CameraVideoCapturer, didCapture f: VideoFrame) {
        let ok = (try? converter.convert(f.buffer)) != nil
        lock.withLock {
            frames.append((f.timestampNs, f.width, f.height, f.buffer.stride, f.buffer.pixelFormat, f.buffer.bytesUsed))
            if !ok { convertErrors += 1 }
        }
    }
    func capturer(_ c: CameraVideoCapturer, didDropFrames n: Int, reason: FrameDropReason) { lock.withLock { drops[reason, default: 0] += n } }
    func capturer(_ c: CameraVideoCapturer, didStopWithError e: CaptureError?) { lock.withLock { stopError = .some(e) } }
    var count: Int { lock.withLock { frames.count } }
    func reset() {
        lock.withLock {
            frames = []
            drops = [:]
            stopError = nil
            convertErrors = 0
        }
    }
    func wait(_ seconds: Double, _ cond: (Collector) -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if lock.withLock({ cond(self) }) { return true }
            usleep(20_000)
        }
        return lock.withLock { cond(self) }
    }
}

let capturer = CameraVideoCapturer(providers: [V4L2DeviceProvider()], configuration: .init(maxPendingFrames: 2))
let collector = Collector()
capturer.addDelegate(collector)

func start(_ path: String, _ pf: PixelFormat, _ size: FrameSize, _ fps: Int) async throws(CaptureError) -> AppliedFormat {
    let device = try capturer.device(path)
    let formats = try capturer.supportedFormats(for: device)
    guard let format = formats.first(where: { $0.pixelFormat == pf && $0.size.contains(size) }) else {
        throw CaptureError(.unsupportedFormat, "\(path) has no \(pf) \(size)")
    }
    return try await capturer.startCapture(device: device, format: format, size: size, fps: Fraction(Int64(fps)))
}

func stopQuietly() async { if capturer.isRunning { try? await capturer.stopCapture() } }

func cleanAfter(_ name: String, path: String) async {
    await stopQuietly()
    try? await Task.sleep(nanoseconds: 200_000_000)
    let l = leftovers()
    check("\(name): no fd or mapping left", l.fds == 0 && l.maps == 0, "fds \(l.fds), maps \(l.maps)")
    // The device opens and streams again.
    collector.reset()
    do {
        _ = try await start(path, .yuyv, FrameSize(width: 320, height: 180), 30)
        let ok = collector.wait(5) { $0.frames.count >= 3 }
        await stopQuietly()
        check("\(name): device usable again", ok, "\(collector.count) frames")
    } catch { check("\(name): device usable again", false, "\(error)") }
}

// 1. Enumeration, and the format list equals v4l2-ctl's. vivid is loaded with three instances: two single-planar
// cameras (cam1, cam2) and a multi-planar one (multiplanar=2, the kind SoC camera drivers expose). A fourth, an HDMI
// receiver (one input of type HDMI), is the source-change scenario's (7c) and is left out of the camera checks.
let hdmiNode = capturer.devices().first { $0.busInfo == "platform:vivid-003" }?.path
let devices = capturer.devices().filter { $0.path != hdmiNode }
let multiPlanarPaths = Set(devices.map(\.path).filter { v4l2ctl(["-d", $0, "-D"]).1.contains("Video Capture Multiplanar") })
check(
    "enumeration finds three vivid cameras, the third multi-planar",
    devices.count == 3 && devices.allSatisfy { $0.driver == "vivid" } && multiPlanarPaths == [devices[2].path],
    "\(devices); multi-planar: \(multiPlanarPaths)")
for d in devices {
    note("\(d.path): \(d.name) [\(d.driver), \(d.busInfo)] id \(d.uniqueID)")
    let (rc, listing) = v4l2ctl(["-d", d.path, "--list-formats-ext"])
    do {
        let theirs = try CameraDescription.parse(listing, file: "v4l2-ctl \(d.path)").formats
        let ours = try capturer.supportedFormats(for: d)
        let same =
            theirs.map { [$0.pixelFormat.fourcc, "\($0.size)", "\(String(describing: $0.intervals))"] }
            == ours.map { [$0.pixelFormat.fourcc, "\($0.size)", "\(String(describing: $0.intervals))"] }
        check(
            "\(d.path) formats equal v4l2-ctl --list-formats-ext", rc == 0 && same && ours.count > 100,
            "ours \(ours.count) entries, v4l2-ctl \(theirs.count) (rc \(rc))")
    } catch { check("\(d.path) formats equal v4l2-ctl --list-formats-ext", false, "\(error)") }
}
let cam1 = devices.first?.path ?? "/dev/video0", cam2 = devices.dropFirst().first?.path ?? "/dev/video1"
let camMP = devices.dropFirst(2).first?.path ?? "/dev/video2"

// VIVID_ONLY=m2m (Scripts/vivid-vm-test.sh passes it on): the hardware-encoder checks alone (#51), all four record
// cases, for a quick run while working on them.
if ProcessInfo.processInfo.environment["VIVID_ONLY"] == "m2m" {
    await m2mCheck(camera: cam1)
    m2mRecordChecks(single: cam1, multi: camMP)
    print("RESULT: \(passed) passed, \(failed) failed")
    fflush(stdout)
    exit(failed == 0 ? 0 : 1)
}

// 2. Negotiation + capture at several points.
let sel = try? capturer.selectFormat(for: capturer.device(cam1), targetSize: FrameSize(width: 1280, height: 720))
check("negotiation on vivid picks YU12 1280x720 @ 12.5", sel.map { "\($0)" } == "YU12 1280x720 @ 12.5 fps", "\(String(describing: sel))")
let points: [(PixelFormat, FrameSize, Int, Int)] = [
    (.yuyv, FrameSize(width: 640, height: 360), 30, 20), (.nv12, FrameSize(width: 1280, height: 720), 10, 8),
    (.rgb24, FrameSize(width: 320, height: 180), 25, 20), (.abgr32, FrameSize(width: 640, height: 480), 15, 10),
]
for (pf, size, fps, n) in points {
    collector.reset()
    let name = "capture \(pf) \(size) @ \(fps)"
    do {
        let applied = try await start(cam1, pf, size, fps)
        let t0 = Date()
        let got = collector.wait(20) { $0.frames.count >= n }
        let secs = Date().timeIntervalSince(t0)
        await stopQuietly()
        let f = collector.lock.withLock { collector.frames }
        let minStride = pf.minimumStride(width: size.width)!
        let shapeOK = f.allSatisfy {
            $0.w == size.width && $0.h == size.height && $0.pf == pf && $0.stride >= minStride
                && $0.bytes >= pf.frameSize(width: size.width, height: size.height, stride: $0.stride)!
        }
        let increasing = zip(f, f.dropFirst()).allSatisfy { $0.ts < $1.ts }
        let measured = f.count > 1 ? Double(f.count - 1) / (Double(f.last!.ts - f.first!.ts) / 1e9) : 0
        note(
            "\(name): applied \(applied), \(f.count) frames in \(String(format: "%.2f", secs)) s, measured \(String(format: "%.2f", measured)) fps, stride \(f.first?.stride ?? 0)"
        )
        check(
            name,
            got && applied.fps == Fraction(Int64(fps)) && shapeOK && increasing && collector.convertErrors == 0
                && measured <= Double(fps) * 1.2 && measured >= Double(fps) * 0.5,
            "frames \(f.count), shape \(shapeOK), increasing \(increasing), fps \(measured), convert errors \(collector.convertErrors)")
    } catch {
        check(name, false, "\(error)")
        await stopQuietly()
    }
}

// 2b. The multi-planar camera: its formats (single-buffer ones through the multi-planar API, and separate-plane
// ones), the same negotiation as a single-planar vivid, and 30-frame recordings for a single-buffer format and for
// NM12 and YM12 (encoded here, printed for the host, where ffprobe decodes them).
/// Converts and encodes every frame it gets (on the capturer's delivery thread) until it has `limit`.
final class Recorder: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    let lock = NSLock()
    let limit: Int
    var data: [UInt8] = []
    var frames = 0
    var shapes: Set<String> = []
    var errors: [String] = []
    var lumaBottomHalf: [UInt8]?
    let converter = FrameConverter()
    var encoder: H264Encoder?
    init(limit: Int) { self.limit = limit }
    func capturer(_ c: CameraVideoCapturer, didCapture f: VideoFrame) {
        lock.withLock {
            guard frames < limit else { return }
            do {
                let b = f.buffer
                shapes.insert("\(b.pixelFormat) \(b.width)x\(b.height)" + (b.pixelFormat.memoryPlaneCount > 1 ? " in \(b.planes.count) planes" : ""))
                let i420 = try converter.convert(f)
                if encoder == nil {
                    var settings = H264Encoder.Settings(width: f.width, height: f.height)
                    settings.targetBitrate = 300_000
                    encoder = try H264Encoder(settings: settings)
                }
                var out = EncodedFrame()
                try encoder!.encode(i420, into: &out)
                data += out.data
                frames += 1
                if frames == limit, let p = I420Buffer(i420.buffer) {
                    // The bottom half of the luma (below vivid's text overlay), to compare layouts of one picture.
                    lumaBottomHalf = Array(p.packedBytes()[(p.width * p.height / 2)..<(p.width * p.height)])
                }
            } catch { errors.append("\(error)") }
        }
    }
    func wait(_ seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if lock.withLock({ frames >= limit }) { return true }
            usleep(20_000)
        }
        return false
    }
}
do {
    let mp = try capturer.device(camMP)
    let formats = try capturer.supportedFormats(for: mp)
    let fourccs = Set(formats.map(\.pixelFormat))
    let separate = PixelFormat.convertible.filter { $0.memoryPlaneCount > 1 && fourccs.contains($0) }
    note("multi-planar \(camMP): \(formats.count) formats; separate-plane ones we convert: \(separate.map(\.fourcc).joined(separator: " "))")
    check(
        "multi-planar camera: formats enumerate, NM12 and YM12 among them, single-buffer ones too",
        formats.count > 100 && fourccs.contains(.nv12m) && fourccs.contains(.yuv420m) && fourccs.contains(.i420) && fourccs.contains(.yuyv),
        "\(fourccs.map(\.fourcc).sorted())")
    if let (pid, fd) = spawn("/check/camcap", ["devices"], capture: true) {
        var text = "", buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            text += String(decoding: buf[0..<n], as: UTF8.self)
        }
        close(fd)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        check("camcap devices lists the multi-planar camera", text.contains(camMP) && (status >> 8) & 0xff == 0, text)
    }
    for target in [FrameSize(width: 1280, height: 720), FrameSize(width: 640, height: 360)] {
        let single = try capturer.selectFormat(for: capturer.device(cam1), targetSize: target)
        let multi = try capturer.selectFormat(for: mp, targetSize: target)
        check(
            "multi-planar camera: select for \(target) picks what a single-planar vivid gets (\(single))",
            "\(single)" == "\(multi)" && multi.pixelFormat.memoryPlaneCount == 1, "single-planar \(single), multi-planar \(multi)")
    }
    let negotiated = try capturer.selectFormat(for: mp, targetSize: FrameSize(width: 640, height: 360))
    var bottoms: [PixelFormat: [UInt8]] = [:]
    for pf in [negotiated.pixelFormat, .nv12m, .yuv420m] {
        let name = "multi-planar \(pf) \(negotiated.size) @ \(negotiated.fps): 30 frames recorded"
        let recorder = Recorder(limit: 30)
        capturer.addDelegate(recorder)
        do {
            guard let format = formats.first(where: { $0.pixelFormat == pf && $0.size.contains(negotiated.size) }) else {
                throw CaptureError(.unsupportedFormat, "\(camMP) has no \(pf) \(negotiated.size)")
            }
            let applied = try await capturer.startCapture(device: mp, format: format, size: negotiated.size, fps: negotiated.fps)
            let got = recorder.wait(60)
            await stopQuietly()
            capturer.removeDelegate(recorder)
            try? await Task.sleep(nanoseconds: 200_000_000)
            let (frames, data, shapes, errors) = recorder.lock.withLock { (recorder.frames, recorder.data, recorder.shapes, recorder.errors) }
            bottoms[pf] = recorder.lock.withLock { recorder.lumaBottomHalf }
            let l = leftovers()
            note("\(name): applied \(applied), frames \(shapes.sorted()), \(data.count) bytes of H.264")
            check(
                name,
                got && frames == 30 && errors.isEmpty && applied.pixelFormat == pf && applied.size == negotiated.size
                    && shapes == [
                        "\(pf) \(negotiated.size.width)x\(negotiated.size.height)"
                            + (pf.memoryPlaneCount > 1 ? " in \(pf.memoryPlaneCount) planes" : "")
                    ]
                    && l.fds == 0 && l.maps == 0,
                "frames \(frames), shapes \(shapes), errors \(errors.prefix(2)), applied \(applied), leftovers \(l)")
            print("MPLANE-H264-BEGIN \(pf) \(negotiated.size.width)x\(negotiated.size.height) \(frames)")
            print(Data(data).base64EncodedString(options: [.lineLength76Characters]))
            print("MPLANE-H264-END")
            fflush(stdout)
        } catch {
            check(name, false, "\(error)")
            await stopQuietly()
            capturer.removeDelegate(recorder)
        }
    }
    // Controls as on a single-planar camera: the same list, and a set is applied and read back.
    let mpControls = try capturer.controls(for: mp).map(\.name), camControls = try capturer.controls(for: capturer.device(cam1)).map(\.name)
    let set = try capturer.setControl("brightness", to: "200", on: mp)
    _ = try capturer.setControl("brightness", to: "128", on: mp)
    check(
        "multi-planar camera: controls list as on a single-planar vivid, brightness=200 applied",
        mpControls == camControls && mpControls.count > 50 && set.value == .integer(200), "\(mpControls.count) vs \(camControls.count), set \(set)")
    // The same picture through three layouts: vivid draws one test pattern, so below its text overlay the luma
    // converted from NM12 and YM12 is the single-buffer format's, byte for byte.
    if let a = bottoms[negotiated.pixelFormat] {
        let same = [PixelFormat.nv12m, .yuv420m].map { bottoms[$0] == a }
        check(
            "multi-planar camera: NM12 and YM12 convert to the picture \(negotiated.pixelFormat) gives (bottom-half luma, byte for byte)",
            same == [true, true], "NM12 \(same[0]), YM12 \(same[1])")
    } else {
        check("multi-planar camera: NM12 and YM12 convert to the picture the single-buffer format gives", false, "no single-buffer recording")
    }
} catch {
    check("multi-planar camera", false, "\(error)")
    await stopQuietly()
}

// 3. Switching cameras while running keeps frames flowing to the same consumer.
collector.reset()
do {
    _ = try await start(cam1, .yuyv, FrameSize(width: 640, height: 360), 30)
    _ = collector.wait(5) { $0.frames.count >= 5 }
    let before = collector.count
    let applied = try await capturer.switchDevice(to: capturer.device(cam2), targetSize: FrameSize(width: 320, height: 180))
    // Camera 1 keeps delivering until the switch takes hold (selectFormat's ioctls can take a while on a loaded VM),
    // so wait for frames of camera 2 itself, not just any ten more.
    let flowing = collector.wait(10) { $0.frames.lazy.filter { $0.w == 320 }.count >= 10 }
    let f = collector.lock.withLock { collector.frames }
    await stopQuietly()
    let cleared = capturer.currentDevice == nil
    let lastIsNew = f.last?.w == 320
    let increasing = zip(f, f.dropFirst()).allSatisfy { $0.ts < $1.ts }
    let fromOld = f.lazy.filter { $0.w == 640 }.count
    check(
        "switch camera 1 → 2 while running",
        flowing && cleared && lastIsNew && increasing,
        "before \(before), after \(f.count) (\(fromOld) from camera 1), applied \(applied); camera 2 frames flowing \(flowing), "
            + "device cleared on stop \(cleared), last frame 320 wide \(lastIsNew), timestamps increasing \(increasing)")
} catch {
    check("switch camera 1 → 2 while running", false, "\(error)")
    await stopQuietly()
}

// 4. Faults.
// 4a. A buffer flagged as error: dropped and counted, capture goes on.
collector.reset()
do {
    _ = try await start(cam1, .yuyv, FrameSize(width: 320, height: 180), 30)
    _ = collector.wait(5) { $0.frames.count >= 3 }
    v4l2ctl(["-d", cam1, "-c", "inject_v4l2_buf_flag_error=1"])
    let counted = collector.wait(5) { $0.drops[.corruptBuffer, default: 0] >= 1 }
    let n = collector.count
    let goesOn = collector.wait(5) { $0.frames.count >= n + 5 }
    check("inject_v4l2_buf_flag_error: dropped, counted, capture goes on", counted && goesOn && capturer.isRunning, "drops \(collector.drops)")
} catch { check("inject_v4l2_buf_flag_error", false, "\(error)") }
await cleanAfter("inject_v4l2_buf_flag_error", path: cam1)

// 4b. 50% dropped buffers: sequence gaps counted as driver drops.
collector.reset()
do {
    v4l2ctl(["-d", cam1, "-c", "percentage_of_dropped_buffers=50"])
    _ = try await start(cam1, .yuyv, FrameSize(width: 320, height: 180), 30)
    try? await Task.sleep(nanoseconds: 3_000_000_000)
    await stopQuietly()
    v4l2ctl(["-d", cam1, "-c", "percentage_of_dropped_buffers=0"])
    let drops = collector.lock.withLock { collector.drops[.driverDropped, default: 0] }
    let frames = collector.count
    note("percentage_of_dropped_buffers=50: \(frames) frames, \(drops) counted driver drops")
    check(
        "percentage_of_dropped_buffers=50: drops counted", drops > 0 && frames > 0 && Double(drops) / Double(drops + frames) > 0.25,
        "frames \(frames), drops \(drops)")
} catch { check("percentage_of_dropped_buffers=50", false, "\(error)") }
await cleanAfter("percentage_of_dropped_buffers", path: cam1)

// 4c-e. Setup failures: a clear error, nothing left open.
for (control, what) in [
    ("inject_vidioc_streamon_error", "STREAMON"), ("inject_vidioc_reqbufs_error", "REQBUFS"), ("inject_vidioc_qbuf_error", "QBUF"),
] {
    collector.reset()
    v4l2ctl(["-d", cam1, "-c", "\(control)=1"])
    do {
        _ = try await start(cam1, .yuyv, FrameSize(width: 320, height: 180), 30)
        // vivid may fail QBUF only once streaming: then capture stops with an error.
        let stopped = collector.wait(5) { $0.stopError != nil }
        let e = collector.lock.withLock { collector.stopError ?? nil }
        check("\(control): clear error", stopped && e != nil, "started and kept running; \(String(describing: e))")
        if let e { note("\(control): \(e)") }
    } catch {
        note("\(control): \(error)")
        check("\(control): clear error", error.message.contains(what), "\(error)")
    }
    await cleanAfter(control, path: cam1)
}

/// Starts capture on `path`, sets a vivid fault control once frames flow, and checks that capture stops with
/// `.disconnected` and nothing is left open (used for a fatal streaming error and for an unplug).
func injectAndExpectDisconnect(_ name: String, path: String, control: String) async {
    collector.reset()
    do {
        _ = try await start(path, .yuyv, FrameSize(width: 320, height: 180), 30)
        _ = collector.wait(5) { $0.frames.count >= 3 }
        v4l2ctl(["-d", path, "-c", control])
        let stopped = collector.wait(10) { $0.stopError != nil }
        let e = collector.lock.withLock { collector.stopError ?? nil }
        note("\(name): \(e.map { "\($0)" } ?? "no error")")
        check(
            "\(name): capture stops with a disconnected error", stopped && e?.code == .disconnected && !capturer.isRunning, "\(String(describing: e))"
        )
        let l = leftovers()
        check("\(name): freed at once", l.fds == 0 && l.maps == 0, "fds \(l.fds) maps \(l.maps)")
    } catch { check(name, false, "\(error)") }
    await cleanAfter(name, path: path)
}

// 4f. A fatal streaming error mid-stream: "disconnected", resources freed.
await injectAndExpectDisconnect("inject_fatal_streaming_error", path: cam1, control: "inject_fatal_streaming_error=1")

// 5. A camera another process is streaming from: busy.
do {
    guard let (other, _) = spawn("/usr/bin/v4l2-ctl", ["-d", cam2, "--stream-mmap", "--stream-count=300"], capture: false) else {
        throw CaptureError(.streamFailed, "cannot start v4l2-ctl")
    }
    try? await Task.sleep(nanoseconds: 1_500_000_000)
    do {
        _ = try await start(cam2, .yuyv, FrameSize(width: 320, height: 180), 30)
        check("busy device gives the busy error", false, "started while another process streams")
        await stopQuietly()
    } catch {
        note("busy: \(error)")
        check("busy device gives the busy error", error.code == .deviceBusy && error.message.contains(cam2), "\(error)")
    }
    kill(other, SIGTERM)
    var st: Int32 = 0
    waitpid(other, &st, 0)
} catch { check("busy device gives the busy error", false, "\(error)") }
let l = leftovers()
check("busy: no fd or mapping left", l.fds == 0 && l.maps == 0, "fds \(l.fds) maps \(l.maps)")

// 6. A capturer released without stopCapture(): STREAMOFF, unmap, close (nothing left), device usable again.
do {
    var scoped: CameraVideoCapturer? = CameraVideoCapturer(providers: [V4L2DeviceProvider()])
    let stream = scoped!.frames()
    let device = try scoped!.device(cam1)
    _ = try await scoped!.startCapture(device: device, targetSize: FrameSize(width: 320, height: 180))
    var it = stream.makeAsyncIterator()
    let streaming = try await it.next() != nil
    let during = leftovers()
    scoped = nil
    while try await it.next() != nil {} // frames already buffered for us are ours until read: read them
    let l = leftovers()
    check(
        "released capturer: device stopped, unmapped and closed", streaming && during.fds == 1 && during.maps >= 2 && l.fds == 0 && l.maps == 0,
        "while streaming fds \(during.fds) maps \(during.maps); after release fds \(l.fds) maps \(l.maps)")
} catch { check("released capturer", false, "\(error)") }
await cleanAfter("released capturer", path: cam1)

// 8. Controls: the list equals v4l2-ctl's, sets while streaming change the picture, refusals are typed.
/// Mean luma of a YUYV frame and the luma left and right on one row (bars: white left, black right).
final class LumaMeter: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    let lock = NSLock()
    var samples: [(mean: Double, left: Int, right: Int)] = []
    func capturer(_ c: CameraVideoCapturer, didCapture f: VideoFrame) {
        let b = f.buffer
        guard b.pixelFormat == .yuyv else { return }
        let p = b.bytes
        var sum = 0
        for y in 0..<b.height { for x in 0..<b.width { sum += Int(p[y * b.stride + 2 * x]) } }
        let row = b.height * 3 / 4
        let s = (Double(sum) / Double(b.width * b.height), Int(p[row * b.stride + 2 * 4]), Int(p[row * b.stride + 2 * (b.width - 5)]))
        lock.withLock { samples.append(s) }
    }
    var count: Int { lock.withLock { samples.count } }
    /// The samples after the first `from`, once at least `n` more have come.
    func wait(from: Int, _ n: Int) -> [(mean: Double, left: Int, right: Int)] {
        let end = Date().addingTimeInterval(10)
        while Date() < end && count < from + n { usleep(20_000) }
        return lock.withLock { Array(samples.dropFirst(from)) }
    }
}
do {
    let device = try capturer.device(cam1)
    let (rc, listing) = v4l2ctl(["-d", cam1, "--list-formats-ext", "--list-ctrls-menus"])
    let theirs = try CameraDescription.parse(listing, file: "v4l2-ctl \(cam1)").controls.filter { $0.kind != .ctrlClass }
    let ours = try capturer.controls(for: device).filter { $0.kind != .ctrlClass }
    // The value too: v4l2-ctl prints value=0 for buttons and write-only controls, which have none to read; a
    // volatile control (vivid's gain under autogain) changes by itself between the two reads.
    func value(_ c: CameraControl) -> String {
        if c.flags.contains(.volatile) { return "volatile" }
        return c.kind == .button || c.flags.contains(.writeOnly) ? "-" : c.value.map { "\($0)" } ?? "none"
    }
    func key(_ c: CameraControl) -> String {
        "\(c.name) \(c.id) \(c.kind.rawValue) \(c.minimum)...\(c.maximum) value \(value(c)) "
            + c.menu.map { "\($0.index):\($0.name)" }.joined(separator: ",")
    }
    let differ = zip(ours, theirs).filter { key($0) != key($1) }.map { "ours \(key($0)) / v4l2-ctl \(key($1))" }
    note(
        "controls: \(ours.count) (v4l2-ctl \(theirs.count)), \(ours.filter { $0.kind.isMenu }.count) menus, \(ours.filter { !$0.dimensions.isEmpty }.count) arrays"
    )
    let area = ours.first { $0.kind == .area }
    note(
        "area control: \(area.map { "\($0.name) = \(value($0))" } ?? "none"); "
            + "\(ours.filter { $0.value != nil && !$0.flags.contains(.volatile) }.count) values compared")
    check(
        "controls equal v4l2-ctl --list-ctrls-menus (name, id, type, range, value, menu items)",
        rc == 0 && ours.count == theirs.count && ours.count > 50 && differ.isEmpty, "ours \(ours.count), theirs \(theirs.count): \(differ.prefix(3))")
    check(
        "vivid reports no orientation: position external, rotation 0",
        device.position == .external
            && !ours.contains { $0.id == .cameraOrientation || $0.id == .cameraSensorRotation }, "\(device.position)")

    // Refusals, each with its typed error.
    func code(_ name: String, _ value: String) -> CaptureError? {
        do {
            try capturer.setControl(name, to: value, on: device)
            return nil
        } catch { return error }
    }
    for (name, value, expected) in [
        ("brightness", "300", CaptureError.Code.controlOutOfRange), ("read_only_integer_32_bits", "1", .controlReadOnly),
        ("gain", "10", .controlInactive), ("menu", "2", .controlOutOfRange),
    ] {
        let e = code(name, value)
        note("\(name)=\(value): \(e.map { "\($0)" } ?? "accepted")")
        check("\(name)=\(value) is refused with \(expected)", e?.code == expected, "\(String(describing: e))")
    }
    // What the driver applied is what a set returns (vivid's integer_32_bits takes anything; the 64-bit one too).
    let big = try capturer.setControl("integer_64_bits", to: "-5000000000", on: device)
    check("a set returns the value read back", big.value == .integer(-5_000_000_000), "\(big)")

    // While streaming: brightness, then horizontal flip.
    let meter = LumaMeter()
    capturer.addDelegate(meter)
    _ = try await start(cam1, .yuyv, FrameSize(width: 320, height: 180), 30)
    let before = meter.wait(from: 0, 10).suffix(5)
    let applied = try capturer.setControl("brightness", to: "200", on: device)
    var after = meter.wait(from: meter.count + 5, 5) // a few frames were already in flight
    let base = before.map(\.mean).reduce(0, +) / Double(max(1, before.count))
    let raised = after.map(\.mean).reduce(0, +) / Double(max(1, after.count))
    note(
        "brightness 128 → \(applied.integerValue ?? -1) while streaming: mean luma \(String(format: "%.1f", base)) → \(String(format: "%.1f", raised))"
    )
    check(
        "brightness=200 while streaming raises the mean luma", applied.value == .integer(200) && raised - base > 20 && capturer.isRunning,
        "\(base) → \(raised)")
    _ = try capturer.setControl("brightness", to: "128", on: device)
    let plain = meter.wait(from: meter.count + 5, 3).last
    _ = try capturer.setControl("horizontal_flip", to: "1", on: device)
    after = meter.wait(from: meter.count + 5, 3)
    let flipped = after.last
    note("horizontal_flip: left/right luma \(plain.map { "\($0.left)/\($0.right)" } ?? "?") → \(flipped.map { "\($0.left)/\($0.right)" } ?? "?")")
    check(
        "horizontal_flip=1 mirrors the picture (bars swap sides)",
        plain.map { $0.left > $0.right + 100 } == true && flipped.map { $0.right > $0.left + 100 } == true,
        "\(String(describing: plain)) → \(String(describing: flipped))")
    _ = try capturer.setControl("horizontal_flip", to: "0", on: device)
    await stopQuietly()
    capturer.removeDelegate(meter)
} catch {
    check("controls", false, "\(error)")
    await stopQuietly()
}

// 9. Colour: what the driver reports for the format reaches the applied format and every frame, and follows
// vivid's colorspace and quantization controls (the driver's own G_FMT, as v4l2-ctl --get-fmt-video shows it).
final class ColourCollector: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    let lock = NSLock()
    var seen: [VideoColorSpace] = []
    func capturer(_ c: CameraVideoCapturer, didCapture f: VideoFrame) { lock.withLock { seen.append(f.colorSpace) } }
    func wait(_ n: Int) -> [VideoColorSpace] {
        let end = Date().addingTimeInterval(10)
        while Date() < end && lock.withLock({ seen.count }) < n { usleep(20_000) }
        return lock.withLock { seen }
    }
}
do {
    let device = try capturer.device(cam1)
    // control settings (colorspace menu index, quantization menu index), v4l2-ctl's words, what we expect
    let cases: [(Int64, Int64, [String], VideoColorSpace)] = [
        (2, 0, ["sRGB", "Limited Range"], .webcam),
        (1, 0, ["Rec. 709", "Limited Range"], .bt709),
        (1, 1, ["Rec. 709", "Full Range"], VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .full)),
        (0, 0, ["SMPTE 170M", "Limited Range"], .bt601),
    ]
    for (cs, q, words, expected) in cases {
        _ = try capturer.setControl("colorspace", to: "\(cs)", on: device)
        _ = try capturer.setControl("quantization", to: "\(q)", on: device)
        let colours = ColourCollector()
        capturer.addDelegate(colours)
        let applied = try await start(cam1, .yuyv, FrameSize(width: 320, height: 180), 30)
        let seen = colours.wait(3)
        let (_, fmt) = v4l2ctl(["-d", cam1, "--get-fmt-video"])
        await stopQuietly()
        capturer.removeDelegate(colours)
        note(
            "colorspace=\(cs) quantization=\(q): \(applied.colorSpace); v4l2-ctl: \(fmt.split(separator: "\n").filter { $0.contains("Colorspace") || $0.contains("Quantization") }.map { $0.trimmingCharacters(in: .whitespaces) })"
        )
        check(
            "colour \(words.joined(separator: ", ")): applied format and every frame say \(expected)",
            applied.colorSpace == expected && seen.count >= 3 && seen.allSatisfy { $0 == expected } && words.allSatisfy { fmt.contains($0) },
            "applied \(applied.colorSpace), frames \(Set(seen.map(\.description))), v4l2-ctl \(fmt)")
    }
    _ = try capturer.setControl("colorspace", to: "2", on: device)
    _ = try capturer.setControl("quantization", to: "0", on: device)
} catch {
    check("colour", false, "\(error)")
    await stopQuietly()
}
await cleanAfter("controls", path: cam1)

// 6b. `--fast` is refused for a real camera, before anything is opened or written.
do {
    let out = "/tmp/fast-refused.h264"
    guard let (pid, fd) = spawn("/check/camcap", ["record", "-d", cam1, "--fast", "--frames", "5", "-o", out], capture: true) else {
        throw CaptureError(.streamFailed, "cannot start camcap")
    }
    var text = "", buf = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        text += String(decoding: buf[0..<n], as: UTF8.self)
    }
    close(fd)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    let code = (status >> 8) & 0xff
    check(
        "record --fast on a real camera is refused with the reason, no file written",
        code != 0 && text.contains("--fast is for fixture cameras") && !FileManager.default.fileExists(atPath: out), "exit \(code): \(text)")
} catch { check("record --fast refused", false, "\(error)") }

// 7. camcap record on a camera unplugged mid-recording: non-zero exit, the file kept (the host decodes it).
do {
    let out = "/tmp/unplugged.h264"
    guard let (pid, fd) = spawn("/check/camcap", ["record", "-d", cam1, "-s", "320x180", "--duration", "600", "-o", out], capture: true) else {
        throw CaptureError(.streamFailed, "cannot start camcap")
    }
    var text = "", buf = [UInt8](repeating: 0, count: 4096)
    var unplugged = false
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        text += String(decoding: buf[0..<n], as: UTF8.self)
        // The progress line says frames are being recorded: now pull the plug.
        if !unplugged && text.contains(" frames ") {
            unplugged = true
            v4l2ctl(["-d", cam1, "-c", "disconnect=1"])
        }
    }
    close(fd)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    let code = (status >> 8) & 0xff
    let encoded = encodedFrames(text)
    note("camcap after unplug: exit \(code), encoded \(encoded); \(text.split(separator: "\n").last ?? "")")
    check(
        "unplug mid-recording: camcap exits non-zero with the capture error", unplugged && code == 1 && text.contains("disconnected") && encoded > 0,
        text)
    emitRecording("H264", out, encoded: encoded)
} catch { check("unplug mid-recording", false, "\(error)") }
await cleanAfter("camcap unplug", path: cam1)

// 7b. #48: one `record --on-camera-loss wait` on vivid survives, in one run, the kernel's own faults: a fatal
// streaming error, an unplug (`disconnect`) whose reopen meets an injected STREAMON error, and 50 % dropped buffers.
// Each step waits on what camcap prints (its progress, "camera lost", "camera back"), never on a clock; Ctrl-C ends
// the run, which must exit 0. The host decodes the file (frames on every side of every fault).
do {
    let out = "/tmp/healed.h264"
    guard
        let (pid, fd) = spawn(
            "/check/camcap",
            ["record", "-d", cam1, "-s", "320x180", "--on-camera-loss", "wait", "--give-up-after", "20", "--duration", "600", "-o", out],
            capture: true)
    else { throw CaptureError(.streamFailed, "cannot start camcap") }
    // The steps, each taken when its condition is first seen in what camcap printed so far.
    var dropStart = 0
    let (text, step, framesAt, code) = takeSteps(of: pid, printingOn: fd, count: 5) { step, now, framesAt, count in
        switch step {
        case 0 where now > 0: // recording: a fatal streaming error (DQBUF fails with EIO until STREAMON)
            v4l2ctl(["-d", cam1, "-c", "inject_fatal_streaming_error=1"])
        case 1 where count("camera back after") >= 1 && now > framesAt[0]: // back: an unplug whose first reopen fails at STREAMON
            v4l2ctl(["-d", cam1, "-c", "inject_vidioc_streamon_error=1"])
            v4l2ctl(["-d", cam1, "-c", "disconnect=1"])
        case 2 where count("camera back after") >= 2 && now > framesAt[1]: // back again: drop half the buffers for a while
            v4l2ctl(["-d", cam1, "-c", "percentage_of_dropped_buffers=50"])
            dropStart = now
        case 3 where now >= dropStart + 30: // 30 frames (about 2 s at 15 fps) through a lossy driver: whole again
            v4l2ctl(["-d", cam1, "-c", "percentage_of_dropped_buffers=0"])
        case 4 where now >= framesAt[3] + 15: // frames after the last fault: Ctrl-C
            kill(pid, SIGINT)
        default: return false
        }
        return true
    }
    let encoded = encodedFrames(text)
    let loss = text.split(separator: "\n").first { $0.hasPrefix("camera loss:") }.map(String.init) ?? "no camera loss line"
    note("camcap healing: exit \(code), steps \(step), frames at each step \(framesAt), encoded \(encoded); \(loss)")
    for l in text.split(separator: "\n") where l.contains("camera lost") || l.contains("camera back") || l.contains("camera still away") {
        note("  \(l)")
    }
    check(
        "record --on-camera-loss wait on vivid: a fatal streaming error, an unplug with a failed STREAMON and 50 % drops, then Ctrl-C: exit 0",
        step == 5 && code == 0 && loss.contains("lost 2 times (disconnected 2), back 2") && encoded >= (framesAt.last ?? 1), String(text.suffix(3000))
    )
    emitRecording("HEALED", out, encoded: encoded)
} catch { check("record --on-camera-loss wait on vivid", false, "\(error)") }
await cleanAfter("camcap healing", path: cam1)

// 7b'. #48: the same faults under `camcap rtsp` (waiting is its default) with one client playing over TCP throughout:
// each fault injected once the client has received the frames after the previous one (RTP marker bits: events, not
// clocks). The client's one session must last through all of them, camcap must report two losses and two returns
// and exit 0 on Ctrl-C; the host replays the packets to ffmpeg, which must decode them.
do {
    if !loopbackUp() { note("could not bring lo up (errno \(errno)): rtsp needs 127.0.0.1") }
    guard let (pid, out) = spawn("/check/camcap", ["rtsp", "-d", cam1, "-s", "320x180", "--listen", "127.0.0.1:8556"], capture: true) else {
        throw CaptureError(.streamFailed, "cannot start camcap rtsp")
    }
    var packets: [[UInt8]] = [], sdp = "", steps: [Int] = []
    if let (fd, described) = rtspPlay(port: 8556) {
        sdp = described
        func frames(_ n: Int) { packets += receivePackets(udp: nil, tcp: fd, until: nil, limit: 100_000, seconds: 60, frames: n).packets }
        frames(20) // playing
        v4l2ctl(["-d", cam1, "-c", "inject_fatal_streaming_error=1"])
        frames(30) // back after the fatal error (and a slate or two while away)
        steps.append(packets.count)
        v4l2ctl(["-d", cam1, "-c", "inject_vidioc_streamon_error=1"])
        v4l2ctl(["-d", cam1, "-c", "disconnect=1"])
        frames(30) // back after the unplug whose first reopen failed
        steps.append(packets.count)
        v4l2ctl(["-d", cam1, "-c", "percentage_of_dropped_buffers=50"])
        frames(30)
        v4l2ctl(["-d", cam1, "-c", "percentage_of_dropped_buffers=0"])
        frames(15)
        steps.append(packets.count)
        close(fd)
    }
    kill(pid, SIGINT)
    let (rc, text) = finish(pid, out)
    let losses = text.components(separatedBy: "camera lost").count - 1, backs = text.components(separatedBy: "camera back after").count - 1
    let clients = text.split(separator: "\n").filter { $0.hasPrefix("rtsp: client") && $0.contains("playing") }.count
    note(
        "camcap rtsp healing: exit \(rc), \(packets.count) RTP packets (after each step \(steps)), \(losses) lost, \(backs) back, \(clients) client(s)"
    )
    check(
        "rtsp on vivid: one client plays through a fatal streaming error, an unplug with a failed STREAMON and 50 % drops; Ctrl-C: exit 0",
        rc == 0 && steps.count == 3 && losses == 2 && backs == 2 && clients == 1 && sdp.contains("H264"), String(text.suffix(2500)))
    writePackets(packets, to: "/tmp/healed-rtsp.pkts")
    _ = FileManager.default.createFile(atPath: "/tmp/healed-rtsp.sdp", contents: Data(sdp.utf8))
    emitFile("healed-rtsp.sdp", "/tmp/healed-rtsp.sdp")
    emitFile("healed-rtsp.pkts", "/tmp/healed-rtsp.pkts")
} catch { check("rtsp on vivid through faults", false, "\(error)") }
await cleanAfter("camcap rtsp healing", path: cam1)

/// Connects to camcap's RTSP server on `port` (waiting up to 30 s for it to listen), and DESCRIBE, SETUP (TCP
/// interleaved 0-1) and PLAY: the connection and the SDP, or nil.
func rtspPlay(port: UInt16) -> (fd: Int32, sdp: String)? {
    var fd: Int32 = -1
    for _ in 0..<600 where fd < 0 {
        fd = tcpConnect(port: port)
        if fd < 0 { usleep(50_000) }
    }
    guard fd >= 0 else { return nil }
    let url = "rtsp://127.0.0.1:\(port)/camera"
    var cseq = 0
    func request(_ method: String, _ uri: String, _ headers: [String] = []) -> String {
        cseq += 1
        let text = (["\(method) \(uri) RTSP/1.0", "CSeq: \(cseq)"] + headers).joined(separator: "\r\n") + "\r\n\r\n"
        _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        return readResponse(fd)
    }
    let sdp = request("DESCRIBE", url, ["Accept: application/sdp"]).components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    let control =
        sdp.split(whereSeparator: \.isNewline).first { $0.hasPrefix("a=control:") && !$0.hasSuffix("*") }
        .map { String($0.dropFirst("a=control:".count)) } ?? "trackID=0"
    let setup = request("SETUP", control.hasPrefix("rtsp:") ? control : url + "/" + control, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
    let session =
        setup.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("session:") }
        .map { $0.dropFirst("session:".count).split(separator: ";")[0].trimmingCharacters(in: .whitespaces) } ?? ""
    _ = request("PLAY", url, ["Session: \(session)"])
    return (fd, sdp)
}

// 7c. #48: an HDMI receiver whose source changes (vivid's fourth instance: one HDMI input). `record` with no size asked
// follows its source through 1280x720 → 640x480 → no signal → 1280x720 in one run (vivid raises
// V4L2_EVENT_SOURCE_CHANGE for each change of `dv_timings_signal_mode`/`dv_timings`), and Ctrl-C ends it with exit 0.
// Each step waits on what camcap printed (its progress, "source changed", "no signal"). The host decodes the MP4.
if let hdmi = hdmiNode {
    let out = "/tmp/hdmi.mp4"
    v4l2ctl(["-d", hdmi, "-c", "dv_timings_signal_mode=4,dv_timings=9"]) // the source sends 1280x720p60
    let formats = (try? capturer.supportedFormats(for: capturer.device(hdmi))) ?? []
    check(
        "HDMI receiver: every format is listed at the detected 1280x720 @ 60 only",
        !formats.isEmpty
            && formats.allSatisfy { $0.size == .discrete(FrameSize(width: 1280, height: 720)) && $0.intervals == .discrete([Fraction(1, 60)]) },
        "\(formats.prefix(3).map { "\($0) \(String(describing: $0.intervals))" })")
    if let (pid, fd) = spawn("/check/camcap", ["record", "-d", hdmi, "--on-camera-loss", "wait", "--duration", "600", "-o", out], capture: true) {
        let (text, step, framesAt, code) = takeSteps(of: pid, printingOn: fd, count: 4) { step, now, framesAt, count in
            switch step {
            case 0 where now > 0: v4l2ctl(["-d", hdmi, "-c", "dv_timings=0"]) // 640x480p59
            case 1 where count("source changed:") >= 1 && now > framesAt[0]: v4l2ctl(["-d", hdmi, "-c", "dv_timings_signal_mode=1"]) // no signal
            case 2 where count("no signal:") >= 1: v4l2ctl(["-d", hdmi, "-c", "dv_timings_signal_mode=4,dv_timings=9"]) // 1280x720p60 again
            case 3 where count("source changed:") >= 2 && now > framesAt[2] + 5: kill(pid, SIGINT)
            default: return false
            }
            return true
        }
        let encoded = encodedFrames(text)
        let source = text.split(separator: "\n").first { $0.hasPrefix("source:") }.map(String.init) ?? "no source line"
        note("camcap HDMI: exit \(code), steps \(step), frames at each step \(framesAt), encoded \(encoded); \(source)")
        for l in text.split(separator: "\n") where l.hasPrefix("source changed") || l.hasPrefix("no signal") { note("  \(l)") }
        check(
            "record on vivid's HDMI input follows 1280x720 → 640x480 → no signal → 1280x720 in one run, then Ctrl-C: exit 0",
            step == 4 && code == 0 && source.contains("changed 2 times (1280x720 → 640x480 → 1280x720)") && encoded > 0,
            String(text.suffix(3000)))
        print("HDMI-ENCODED \(encoded)")
        emitFile("hdmi.mp4", out)
    } else {
        check("record on vivid's HDMI input", false, "cannot start camcap")
    }
} else {
    check("vivid's HDMI receiver (platform:vivid-003) is present", false, "\(capturer.devices().map(\.busInfo))")
}

/// Reads what camcap (`pid`, printing on `fd`) prints until it ends, taking a scenario's `count` steps in turn:
/// after each read, `take(step, now, framesAt, count)` takes step `step` if its condition holds in what was printed
/// so far (`now`: the frames of the last progress line; `framesAt`: the frames when each earlier step was taken;
/// `count(phrase)`: how often a phrase was printed) and says whether it did. A step that has not come by 3000
/// frames ends the run (Ctrl-C; the step is then 99, which the check names). Returns the whole output, the steps
/// taken, the frames at each and camcap's exit code.
func takeSteps(
    of pid: pid_t, printingOn fd: Int32, count steps: Int, _ take: (_ step: Int, _ now: Int, _ framesAt: [Int], _ count: (String) -> Int) -> Bool
) -> (text: String, step: Int, framesAt: [Int], code: Int32) {
    var text = "", buf = [UInt8](repeating: 0, count: 4096), step = 0, framesAt: [Int] = []
    func count(_ needle: String) -> Int { text.components(separatedBy: needle).count - 1 }
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        text += String(decoding: buf[0..<n], as: UTF8.self)
        let now = progressFrames(text)
        if now > 3000 && step < steps { // a step that never came: end the run (the check then fails naming the step)
            kill(pid, SIGINT)
            step = 99
        }
        guard take(step, now, framesAt, count) else { continue }
        framesAt.append(now)
        step += 1
    }
    close(fd)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return (text, step, framesAt, (status >> 8) & 0xff)
}

/// The frame count of the last progress line camcap printed ("12.3 s  370 frames  30.0 fps …"), 0 before the first.
func progressFrames(_ text: String) -> Int {
    text.split(separator: "\n").last { $0.contains(" frames ") }.flatMap { line in
        line.split(separator: " ").firstIndex(of: "frames").flatMap { i in i > 0 ? Int(line.split(separator: " ")[i - 1]) : nil }
    } ?? 0
}

/// The `encoded N` figure of a camcap summary's `frames:` line (-1 when there is none).
func encodedFrames(_ text: String) -> Int {
    text.split(separator: "\n").first { $0.hasPrefix("frames:") }.flatMap { line in
        line.range(of: "encoded ").map { Int(line[$0.upperBound...].prefix { $0.isNumber }) ?? -1 }
    } ?? -1
}

/// Prints a recording for the host to decode: `PREFIX-ENCODED n`, then the file in base64 between `PREFIX-BEGIN` and
/// `PREFIX-END` (nothing when the file is missing).
func emitRecording(_ prefix: String, _ path: String, encoded: Int) {
    guard let data = FileManager.default.contents(atPath: path) else { return }
    print("\(prefix)-ENCODED \(encoded)")
    print("\(prefix)-BEGIN")
    print(data.base64EncodedString(options: [.lineLength76Characters]))
    print("\(prefix)-END")
    fflush(stdout)
}

/// Brings the loopback interface up (the initramfs has no network setup; `stream` and `rtsp` need 127.0.0.1).
func loopbackUp() -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var req = ifreq()
    withUnsafeMutableBytes(of: &req.ifr_ifrn.ifrn_name) { p in
        for (i, c) in "lo".utf8.enumerated() { p[i] = c }
    }
    guard ioctl(fd, UInt(SIOCGIFFLAGS), &req) == 0 else { return false }
    req.ifr_ifru.ifru_flags |= Int16(IFF_UP | IFF_RUNNING)
    return ioctl(fd, UInt(SIOCSIFFLAGS), &req) == 0
}

/// A UDP socket bound to 127.0.0.1:`port`, non-blocking.
func udpSocket(port: UInt16) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_port = port.bigEndian
    a.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &a) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// A TCP connection to 127.0.0.1:`port`, or -1.
func tcpConnect(port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_port = port.bigEndian
    a.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &a) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if ok != 0 {
        close(fd)
        return -1
    }
    return fd
}

/// One RTSP response (head and, with Content-Length, body), read a byte at a time (a few hundred bytes).
func readResponse(_ fd: Int32) -> String {
    var bytes: [UInt8] = []
    var c: UInt8 = 0
    while read(fd, &c, 1) == 1 {
        bytes.append(c)
        if bytes.count >= 4 && bytes.suffix(4) == [13, 10, 13, 10] { break }
        if bytes.count > 65536 { break }
    }
    let head = String(decoding: bytes, as: UTF8.self)
    let length =
        head.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("content-length:") }
        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
    var body = [UInt8](repeating: 0, count: min(max(length, 0), 65536))
    var got = 0
    while got < body.count {
        let n = body.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
        if n <= 0 { break }
        got += n
    }
    return head + String(decoding: body.prefix(got), as: UTF8.self)
}

/// RTP packets as they arrive: datagrams on `udp` while `until` runs, or interleaved channel-0 frames on `tcp`
/// (`$`, channel, 16-bit length) until `frames` marker bits; at most `limit` packets and `seconds`.
func receivePackets(
    udp: Int32?, tcp: Int32?, until pid: pid_t?, limit: Int, seconds: Double, frames: Int = .max
) -> (packets: [[UInt8]], reaped: Int32?) {
    var packets: [[UInt8]] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    let end = Date().addingTimeInterval(seconds)
    var markers = 0
    var pending: [UInt8] = []
    var exited = false
    var reaped: Int32?
    while Date() < end && packets.count < limit && markers < frames {
        var p = pollfd(fd: udp ?? tcp ?? -1, events: Int16(POLLIN), revents: 0)
        if poll(&p, 1, 100) > 0 {
            let n = read(p.fd, &buf, buf.count)
            if n <= 0 { break }
            if udp != nil {
                packets.append(Array(buf[0..<n]))
            } else {
                pending += buf[0..<n]
                while pending.count >= 4 && pending[0] == 0x24 {
                    let len = Int(pending[2]) << 8 | Int(pending[3])
                    guard pending.count >= 4 + len else { break }
                    if pending[1] == 0 {
                        let rtp = Array(pending[4..<(4 + len)])
                        if rtp.count > 1 && rtp[1] & 0x80 != 0 { markers += 1 }
                        packets.append(rtp)
                    }
                    pending.removeFirst(4 + len)
                }
                if let first = pending.first, first != 0x24 { break } // an RTSP message in between: not expected here
            }
        } else if exited {
            break // the sender ended and nothing more came for 100 ms
        }
        if let pid, !exited {
            var status: Int32 = 0
            exited = waitpid(pid, &status, WNOHANG) == pid
            if exited { reaped = status }
        }
    }
    return (packets, reaped)
}

/// Reads what `pid` printed to `fd` until it closes, then waits for it (unless `reaped` is its status already):
/// exit code and text.
func finish(_ pid: pid_t, _ fd: Int32, reaped: Int32? = nil) -> (Int32, String) {
    var out = [UInt8](), buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        out += buf[0..<n]
    }
    close(fd)
    var status: Int32 = reaped ?? 0
    if reaped == nil { waitpid(pid, &status, 0) }
    return ((status >> 8) & 0xff, String(decoding: out, as: UTF8.self))
}

/// Packets as a file: each a 16-bit big-endian length and its bytes.
func writePackets(_ packets: [[UInt8]], to path: String) {
    var data = Data()
    for p in packets {
        data.append(UInt8(p.count >> 8))
        data.append(UInt8(p.count & 0xff))
        data.append(contentsOf: p)
    }
    _ = FileManager.default.createFile(atPath: path, contents: data)
}

/// Runs camcap to its end: exit code and everything it printed.
func camcap(_ args: [String]) -> (Int32, String) {
    guard let (pid, fd) = spawn("/check/camcap", args, capture: true) else { return (-1, "cannot start camcap") }
    return finish(pid, fd)
}

/// A file for the host to judge (ffprobe, the fed H.264): base64 between FILE-BEGIN NAME and FILE-END.
func emitFile(_ name: String, _ path: String) {
    guard let data = FileManager.default.contents(atPath: path) else {
        note("\(path): no file to hand to the host")
        return
    }
    print("FILE-BEGIN \(name) \(data.count)")
    print(data.base64EncodedString(options: [.lineLength76Characters]))
    print("FILE-END")
    fflush(stdout)
}

/// An IDR slice (NAL type 5) among the Annex-B access unit's NAL units.
func hasIDR(_ au: UnsafeRawBufferPointer) -> Bool {
    var i = 0
    while i + 3 < au.count {
        if au[i] == 0 && au[i + 1] == 0 && au[i + 2] == 1 {
            if au[i + 3] & 0x1f == 5 { return true }
            i += 3
        } else {
            i += 1
        }
    }
    return false
}

func line(_ text: String, _ prefix: String) -> String {
    text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map(String.init) ?? "(no \(prefix.trimmingCharacters(in: .whitespaces)) line)"
}

// 7b. DMA-BUF export (VIDIOC_EXPBUF, opt-in): the descriptors a frame carries, mapped here, hold the frame's bytes;
// single-planar YUYV and the multi-planar camera's NM12 (two memory planes). After stop every descriptor is closed.
for (path, pf) in [(cam1, PixelFormat.yuyv), (camMP, PixelFormat.nv12m)] {
    let name = "DMA-BUF export on \(path) \(pf.fourcc)"
    final class Compare: @unchecked Sendable { // written by the capture thread, read after stop()
        let lock = NSLock()
        var compared = 0, mismatches: [String] = [], fds: [Int32] = []
    }
    let result = Compare()
    var config = V4L2Stream.Configuration()
    config.exportDMABuf = true
    let provider = V4L2DeviceProvider(configuration: config)
    let sink = FrameSink(
        frame: { f in
            let b = f.buffer
            guard let dma = b.dmaBuf else { return }
            result.lock.lock()
            defer { result.lock.unlock() }
            guard result.compared < 5 else { return }
            result.fds = dma.planes.map(\.fd)
            for (i, plane) in dma.planes.enumerated() {
                guard let m = mmap(nil, plane.length, PROT_READ, MAP_SHARED, plane.fd, 0), m != MAP_FAILED else {
                    result.mismatches.append("plane \(i): mmap of the DMA-BUF fd \(plane.fd) failed (errno \(errno))")
                    continue
                }
                defer { munmap(m, plane.length) }
                // Plane 0: the frame's payload at its offset; plane 1 (NM12's chroma): where the frame places it.
                let (start, count) = i == 0 ? (b.offset, b.bytesUsed) : (0, b.planes.strides.1 * b.height / 2)
                let frameBytes = i == 0 ? b.baseAddress : b.baseAddress + b.planes.offsets.1
                if count > plane.length - start || memcmp(m + start, frameBytes, count) != 0 {
                    result.mismatches.append("plane \(i): \(count) bytes differ from the frame's")
                }
            }
            result.compared += 1
        }, dropped: { _, _ in }, failed: { _ in }, copied: {})
    do {
        guard let device = try provider.device(for: path) else { throw CaptureError(.unknownDevice, "\(path) not found") }
        let stream = try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: pf, size: FrameSize(width: 640, height: 360), fps: Fraction(30)), sink: sink)
        let end = Date().addingTimeInterval(10)
        while Date() < end && result.lock.withLock({ result.compared < 5 }) { usleep(10_000) }
        stream.stop()
        let (compared, mismatches, fds) = result.lock.withLock { (result.compared, result.mismatches, result.fds) }
        check(
            name + ": 5 frames, every plane's bytes equal the frame's", compared == 5 && mismatches.isEmpty,
            "compared \(compared): \(mismatches.prefix(3))")
        let stillOpen = fds.filter { fcntl($0, F_GETFD) != -1 }
        check(name + ": descriptors closed after stop", !fds.isEmpty && stillOpen.isEmpty, "fds \(fds), open \(stillOpen)")
        note("\(name): \(fds.count) plane(s) per buffer, fds \(fds)")
    } catch { check(name, false, "\(error)") }
}

// 8. An H.264 camera: v4l2loopback (video_nr=9, exclusive_caps=1) fed by `vivid-check feed` with H.264 made on the host
// (ffmpeg/libx264, 640x360, 30 fps, an IDR every 30 frames with SPS/PPS). With exclusive_caps it is a capture device
// only while a writer feeds it. The host compares what camcap recorded with the fed access units, bit for bit.
let loopNode = "/dev/video9"
if FileManager.default.fileExists(atPath: loopNode) && FileManager.default.fileExists(atPath: "/check/fed.h264") {
    note("H.264 loopback camera: starting the feeder after \(Int(Date().timeIntervalSince(checksStarted))) s")
    let feeder = spawn("/check/vivid-check", ["feed", loopNode, "/check/fed.h264", "/check/fed.offsets", "30", "640x360"], capture: false)
    var listed = false
    for _ in 0..<100 where !listed {
        listed = capturer.devices().contains { $0.path == loopNode }
        if !listed { usleep(50_000) }
    }
    check("H.264 loopback camera: a capture device once fed", feeder != nil && listed, "feeder \(feeder.map { "\($0.pid)" } ?? "not started")")
    let (dc, devicesText) = camcap(["devices"])
    check("camcap devices lists the H.264 loopback camera", dc == 0 && devicesText.contains(loopNode), devicesText)
    let (fc, formatsText) = camcap(["formats", "-d", loopNode])
    check(
        "camcap formats shows H264 640x360 on the loopback camera", fc == 0 && formatsText.contains("H264") && formatsText.contains("640x360"),
        formatsText)
    // #49: the negotiation lab's requests for this camera (Fixtures/negotiation/requests-loopback.txt), while the
    // feeder writes: GStreamer and ffmpeg from the host's root (/init mounts it at /host), outputs for the host.
    if let root = ProcessInfo.processInfo.environment["LAB_ROOT"], FileManager.default.fileExists(atPath: "/host/usr/bin/gst-launch-1.0") {
        let started = Date()
        let lab =
            "LAB_RESET=0 HOME=/tmp PATH=/usr/bin:/bin:/usr/sbin:/sbin chroot /host /bin/sh \(root)/Scripts/negotiation-lab.sh run \(loopNode) "
            + "\(root)/Fixtures/negotiation/requests-loopback.txt"
        if let (pid, fd) = spawn("/bin/sh", ["-c", lab], capture: true) {
            let (rc, text) = finish(pid, fd)
            print(text)
            note("negotiation lab on the loopback camera: exit \(rc) in \(Int(Date().timeIntervalSince(started))) s")
        }
    }
    // The capturer itself: no raw format, so H.264 is negotiated; key frames from the NAL types (v4l2loopback
    // flags none), and no force-key-frame control, so a request is refused.
    final class AUCollector: CameraVideoCapturerDelegate, @unchecked Sendable {
        // @unchecked: guarded by `lock`.
        let lock = NSLock()
        var units: [(key: Bool, idr: Bool, encoded: Bool, bytes: Int)] = []
        func capturer(_ c: CameraVideoCapturer, didCapture f: VideoFrame) {
            let idr = hasIDR(f.buffer.bytes)
            lock.withLock { units.append((f.isKeyFrame, idr, f.isEncoded, f.buffer.bytesUsed)) }
        }
    }
    do {
        let dev = try capturer.device(loopNode)
        let sel = try capturer.selectFormat(for: dev, targetSize: FrameSize(width: 1280, height: 720))
        check("H.264 loopback camera: negotiation picks its only format, H264 640x360 @ 30", "\(sel)" == "H264 640x360 @ 30 fps", "\(sel)")
        let aus = AUCollector()
        capturer.addDelegate(aus)
        let applied = try await start(loopNode, .h264, FrameSize(width: 640, height: 360), 30)
        let enough = { aus.lock.withLock { aus.units.count >= 45 } }
        let end = Date().addingTimeInterval(20)
        while !enough() && Date() < end { usleep(20_000) }
        let refused = !capturer.requestKeyFrame()
        await stopQuietly()
        capturer.removeDelegate(aus)
        try? await Task.sleep(nanoseconds: 200_000_000)
        let units = aus.lock.withLock { aus.units }
        let l = leftovers()
        note(
            "loopback capture: applied \(applied), \(units.count) access units, \(units.filter(\.key).count) key frames, sizes \(units.prefix(4).map(\.bytes))"
        )
        check(
            "H.264 loopback camera: access units delivered as encoded frames, key frames exactly the IDRs (no driver flag)",
            units.count >= 45 && units.allSatisfy { $0.encoded && $0.key == $0.idr } && units.contains { $0.key } && l.fds == 0 && l.maps == 0,
            "\(units.count) units, mismatches \(units.filter { $0.key != $0.idr }.count), leftovers \(l)")
        check("H.264 loopback camera: a key-frame request is refused (no V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME)", refused)
    } catch {
        check("H.264 loopback camera: capture", false, "\(error)")
        await stopQuietly()
    }
    for ext in ["h264", "mp4"] {
        let out = "/tmp/loop.\(ext)"
        let (rc, text) = camcap(["record", "-d", loopNode, "--pixel-format", "H264", "--frames", "150", "-q", "-o", out])
        let frames = line(text, "frames:")
        // --frames counts what is written (#53): the passthrough writes 150 from the first IDR on (the feeder's GOP is 30:
        // up to 29 held back before it, counted as captured), resuming at the next IDR after a frame the debug build
        // dropped under TCG ("pipeline busy").
        func count(after label: String) -> Int? {
            frames.range(of: label).flatMap { r in Int(frames[r.upperBound...].prefix { $0.isNumber }) }
        }
        let passed = count(after: "passed through ") ?? -1, before = count(after: "before a key frame ") ?? 0
        note("loop.\(ext): exit \(rc) after \(Int(Date().timeIntervalSince(checksStarted))) s; \(frames); \(line(text, "encoder:"))")
        check(
            "camcap record --pixel-format H264 -o loop.\(ext): 150 frames, passed through from the first IDR, 0 encoders",
            rc == 0 && passed == 150 && before < 150
                && text.contains("none: the camera's own H.264 passed through (0 encoder instances)"), text)
        print("LOOP-PASSED loop.\(ext) \(passed)")
        emitFile("loop.\(ext)", out)
        try? FileManager.default.removeItem(atPath: out)
    }
    // `stream` and `rtsp` from the H.264 camera: the RTP packets as they arrive here (nothing parsed), handed with the
    // SDP to the host, which replays them to ffmpeg (opened from that SDP) and compares what it got with the fed units.
    let rtpPort: UInt16 = 5004
    if !loopbackUp() { note("could not bring lo up (errno \(errno)): stream and rtsp need 127.0.0.1") }
    if let udp = udpSocket(port: rtpPort),
        let (pid, out) = spawn(
            "/check/camcap",
            ["stream", "-d", loopNode, "--pixel-format", "H264", "--to", "127.0.0.1:\(rtpPort)", "--sdp", "/tmp/loop-rtp.sdp", "--frames", "150"],
            capture: true)
    {
        let (packets, reaped) = receivePackets(udp: udp, tcp: nil, until: pid, limit: 100_000, seconds: 40)
        let (rc, text) = finish(pid, out, reaped: reaped)
        close(udp)
        note("loop stream: exit \(rc), \(packets.count) RTP packets; \(line(text, "encoder:"))")
        check(
            "camcap stream --pixel-format H264 from the loopback camera: 150 frames as RTP, 0 encoders",
            rc == 0 && packets.count >= 30 && text.contains("0 encoder instances"), text)
        writePackets(packets, to: "/tmp/loop-rtp.pkts")
        emitFile("loop-rtp.sdp", "/tmp/loop-rtp.sdp")
        emitFile("loop-rtp.pkts", "/tmp/loop-rtp.pkts")
    } else {
        check("camcap stream from the loopback camera", false, "cannot bind UDP \(rtpPort) or start camcap")
    }
    if let (pid, out) = spawn("/check/camcap", ["rtsp", "-d", loopNode, "--pixel-format", "H264", "--listen", "127.0.0.1:8554"], capture: true) {
        var packets: [[UInt8]] = []
        var sdp = ""
        var fd: Int32 = -1
        for _ in 0..<600 where fd < 0 { // until it listens (the camera starts first; up to 30 s in a VM on a loaded host)
            fd = tcpConnect(port: 8554)
            if fd < 0 { usleep(50_000) }
        }
        if fd >= 0 {
            let url = "rtsp://127.0.0.1:8554/camera"
            var cseq = 0
            func request(_ method: String, _ uri: String, _ headers: [String] = []) -> String {
                cseq += 1
                let text = (["\(method) \(uri) RTSP/1.0", "CSeq: \(cseq)"] + headers).joined(separator: "\r\n") + "\r\n\r\n"
                _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
                return readResponse(fd)
            }
            let described = request("DESCRIBE", url, ["Accept: application/sdp"])
            sdp = described.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
            let control =
                sdp.split(whereSeparator: \.isNewline).first { $0.hasPrefix("a=control:") && !$0.hasSuffix("*") }
                .map { String($0.dropFirst("a=control:".count)) } ?? "trackID=0"
            let setup = request(
                "SETUP", control.hasPrefix("rtsp:") ? control : url + "/" + control, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
            let session =
                setup.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("session:") }
                .map { $0.dropFirst("session:".count).split(separator: ";")[0].trimmingCharacters(in: .whitespaces) } ?? ""
            _ = request("PLAY", url, ["Session: \(session)"])
            packets = receivePackets(udp: nil, tcp: fd, until: nil, limit: 1500, seconds: 10, frames: 90).packets
            close(fd)
        }
        kill(pid, SIGINT)
        let (rc, text) = finish(pid, out)
        note("loop rtsp: exit \(rc), \(packets.count) RTP packets over TCP; \(line(text, "encoder:"))")
        check(
            "camcap rtsp --pixel-format H264 from the loopback camera: RTP over TCP (interleaved), 0 encoders",
            packets.count >= 30 && sdp.contains("H264") && text.contains("0 encoder instances"), "exit \(rc), sdp \(sdp.prefix(200)) \(text)")
        try? sdp.write(toFile: "/tmp/loop-rtsp.sdp", atomically: false, encoding: .utf8)
        writePackets(packets, to: "/tmp/loop-rtsp.pkts")
        emitFile("loop-rtsp.sdp", "/tmp/loop-rtsp.sdp")
        emitFile("loop-rtsp.pkts", "/tmp/loop-rtsp.pkts")
    } else {
        check("camcap rtsp from the loopback camera", false, "cannot start camcap")
    }
    if let (pid, fd) = feeder {
        kill(pid, SIGKILL) // not SIGTERM: a child spawned from a thread that blocks signals inherits the mask
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        if fd >= 0 { close(fd) }
    }
} else {
    check("H.264 loopback camera: \(loopNode) and the fed H.264 present", false, "v4l2loopback not loaded or /check/fed.h264 missing")
}

// 9. Recordings the host judges with ffprobe (#36, #35): vivid at 720p (12.5 fps; packet times are the capture
// timestamps of --frame-trace),
// and the multi-planar camera in separate-plane formats, decoded at 640x360.
for (name, args) in [
    ("vivid.mp4", ["-d", cam2, "-s", "1280x720", "--frames", "25", "--frame-trace", "/tmp/vivid.csv"]),
    ("nm12.mp4", ["-d", camMP, "--pixel-format", "NM12", "-s", "640x360", "--frames", "30"]),
    ("ym12.mp4", ["-d", camMP, "--pixel-format", "YM12", "-s", "640x360", "--frames", "30"]),
] {
    let out = "/tmp/\(name)"
    let (rc, text) = camcap(["record"] + args + ["--bitrate", "400", "-q", "-o", out])
    note("\(name): exit \(rc) after \(Int(Date().timeIntervalSince(checksStarted))) s; \(line(text, "format:")); \(line(text, "frames:"))")
    check("camcap record \(args.joined(separator: " ")) -o \(name)", rc == 0 && FileManager.default.fileExists(atPath: out), text)
    emitFile(name, out)
    try? FileManager.default.removeItem(atPath: out)
}
emitFile("vivid.csv", "/tmp/vivid.csv") // the capture timestamps of vivid.mp4's frames (capture_ms)

// #49: a camera session traced on the real driver (YUYV 320x180 at 30 fps, 60 frames); the host replays it as
// `fixture:trace:FILE` (TraceTests) and compares every frame's bytes, timestamp and sequence number. Gzipped for the
// console (vivid's test pattern compresses well).
do {
    let trace = "/tmp/vivid.camtrace"
    let (rc, text) = camcap(["trace", "record", "-d", cam1, "--pixel-format", "YUYV", "-s", "320x180", "--frames", "60", "-q", "-o", trace])
    note("trace record: exit \(rc) after \(Int(Date().timeIntervalSince(checksStarted))) s; \(line(text, "trace:"))")
    check("camcap trace record -d \(cam1) (60 frames of YUYV 320x180)", rc == 0 && text.contains("(60 frames, 0 losses"), text)
    if let (pid, fd) = spawn("/bin/gzip", ["-1", trace], capture: true) { _ = finish(pid, fd) }
    emitFile("vivid.camtrace.gz", trace + ".gz")
    try? FileManager.default.removeItem(atPath: trace + ".gz")
}

// 10. #51: a V4L2 memory-to-memory encoder (vicodec) fed from vivid, decoded back by vicodec (M2MCheck.swift).
await m2mCheck(camera: cam1)
m2mRecordChecks(single: cam1, multi: camMP)

// 4g. Unplug (last: the node only comes back once every handle is closed), of a single-planar and of the
// multi-planar camera.
await injectAndExpectDisconnect("disconnect", path: cam2, control: "disconnect=1")
await injectAndExpectDisconnect("disconnect (multi-planar)", path: camMP, control: "disconnect=1")

print("RESULT: \(passed) passed, \(failed) failed")
fflush(stdout)
exit(failed == 0 ? 0 : 1)
