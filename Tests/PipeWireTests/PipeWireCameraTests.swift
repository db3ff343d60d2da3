// PipeWire cameras on the host (#52): each test runs its own headless PipeWire (Scripts/pipewire-session.sh) and
// pw-test-camera, and checks what comes out against what the camera wrote.
import Foundation
import PipeWireCapture
import Testing
import TestSupport
import VideoCapture

@Suite(.serialized) struct PipeWireCameraTests {
    @Test func theCameraIsListedWithItsFormats() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "listed-cam")
        let provider = session.provider()
        let device = try #require(provider.devices().first { $0.path == "pipewire:listed-cam" })
        #expect(device.name == "Test camera (pw-test-camera)")
        #expect(device.uniqueID == "pipewire:listed-cam")
        #expect(try provider.device(for: "pipewire:listed-cam")?.path == "pipewire:listed-cam")
        #expect(try provider.device(for: "/dev/video0") == nil)

        let formats = try provider.formats(of: device)
        let thirty = FrameIntervals.discrete([Fraction(1, 30)])
        var expected: [CaptureFormat] = []
        for pf in [PixelFormat.yuyv, .i420, .nv12] {
            for size in [FrameSize(width: 640, height: 480), FrameSize(width: 320, height: 240)] {
                expected.append(CaptureFormat(pixelFormat: pf, size: .discrete(size), intervals: thirty))
            }
        }
        #expect(formats == expected)

        do {
            _ = try provider.device(for: "pipewire:no-such-cam")
            Issue.record("an unknown node was accepted")
        } catch {
            #expect(error.code == .unknownDevice)
            #expect(error.message.contains("no-such-cam") && error.message.contains("pipewire:listed-cam"), "\(error.message)")
        }
    }

    struct Case: Sendable, CustomStringConvertible {
        var format: PixelFormat
        var size: FrameSize
        var pad: Int
        var offset: Int
        var separatePlanes = false
        var description: String { "\(format) \(size) pad \(pad) offset \(offset)" + (separatePlanes ? " separate planes" : "") }
    }

    @Test(arguments: [
        Case(format: .yuyv, size: FrameSize(width: 640, height: 480), pad: 0, offset: 0),
        Case(format: .yuyv, size: FrameSize(width: 320, height: 240), pad: 96, offset: 40),
        Case(format: .i420, size: FrameSize(width: 320, height: 240), pad: 0, offset: 0),
        Case(format: .i420, size: FrameSize(width: 320, height: 240), pad: 128, offset: 16),
        Case(format: .nv12, size: FrameSize(width: 640, height: 480), pad: 64, offset: 0),
        Case(format: .i420, size: FrameSize(width: 320, height: 240), pad: 32, offset: 24, separatePlanes: true),
        Case(format: .nv12, size: FrameSize(width: 320, height: 240), pad: 0, offset: 0, separatePlanes: true),
    ])
    func framesEqualTheProducersBytes(_ c: Case) throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(
            name: "exact-cam", ["--pad", "\(c.pad)", "--offset", "\(c.offset)"] + (c.separatePlanes ? ["--separate-planes"] : []))
        let provider = session.provider()
        let device = try #require(try provider.device(for: "pipewire:exact-cam"))
        let collector = Collector(keep: 20)
        let started = Date()
        let stream = try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: c.format, size: c.size, fps: 30), sink: collector.sink)
        defer { stream.stop() }
        #expect(stream.applied.pixelFormat == c.format)
        #expect(stream.applied.size == c.size)
        #expect(stream.applied.fps == 30)
        // The frames handed on have rows of the width, whatever the producer's stride.
        #expect(stream.applied.stride == testCameraPlanes(c.format, c.size.width, c.size.height)[0].bytes)
        #expect(waitUntil(timeout: 10) { collector.count >= 20 }, "\(collector.count) frames, error \(String(describing: collector.error))")
        stream.stop()
        let frames = collector.collected
        var numbers: [UInt32] = [], bytes = 0
        for f in frames {
            switch verify(f) {
            case .success(let v):
                numbers.append(v.number)
                bytes += v.bytes
                #expect(UInt64(v.number) == f.sequence, "the header's seq is the frame's number")
            case .failure(let e): Issue.record("\(c): \(e)")
            }
        }
        #expect(numbers.count == 20)
        #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "\(numbers)")
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0.timestampNs < $1.timestampNs })
        #expect(collector.error == nil)
        print(
            "PipeWire \(c): \(frames.count) frames, \(bytes) bytes equal the producer's, in \(String(format: "%.2f", Date().timeIntervalSince(started))) s"
        )
    }

    @Test func twoConsumersShareTheCamera() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "shared-cam")
        let provider = session.provider()
        let device = try #require(try provider.device(for: "pipewire:shared-cam"))
        let request = StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 320, height: 240), fps: 30)
        // The first consumer keeps its frames from when the second has its first one (the second's link and format
        // take their time on a loaded box): 15 and 30 frames then overlap.
        let (a, b) = (Collector(keep: 15, paused: true), Collector(keep: 30))
        let first = try provider.openStream(device: device, request: request, sink: a.sink)
        defer { first.stop() }
        let second = try provider.openStream(device: device, request: request, sink: b.sink)
        defer { second.stop() }
        #expect(waitUntil(timeout: 10) { b.count >= 1 }, "the second consumer's first frame")
        a.resume()
        #expect(waitUntil(timeout: 10) { a.count >= 15 && b.count >= 30 }, "\(a.count) and \(b.count) frames")
        first.stop()
        second.stop()
        var numbers: [Set<UInt32>] = []
        for c in [a, b] {
            var seen = Set<UInt32>()
            for f in c.collected {
                switch verify(f) {
                case .success(let v): seen.insert(v.number)
                case .failure(let e): Issue.record("\(e)")
                }
            }
            #expect(seen.count == c.keep)
            numbers.append(seen)
        }
        // Both consumers receive the same frames of the one camera (the later one joins while the first runs).
        #expect(!numbers[0].intersection(numbers[1]).isEmpty, "\(numbers)")
    }

    @Test func aNodeThatGoesAwayEndsTheStreamAsDisconnected() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        let camera = try session.startCamera(name: "leaving-cam")
        let provider = session.provider()
        let device = try #require(try provider.device(for: "pipewire:leaving-cam"))
        let collector = Collector(keep: 5)
        let stream = try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: .nv12, size: FrameSize(width: 320, height: 240), fps: 30), sink: collector.sink)
        defer { stream.stop() }
        #expect(waitUntil(timeout: 10) { collector.count >= 5 })
        kill(camera.pid, SIGTERM)
        #expect(waitUntil(timeout: 10) { collector.error != nil })
        #expect(collector.error?.code == .disconnected, "\(String(describing: collector.error))")
        // Gone from the listing too; opening it again fails by name.
        #expect(waitUntil(timeout: 10) { !provider.devices().contains { $0.path == "pipewire:leaving-cam" } })
        #expect(throws: CaptureError.self) { _ = try provider.device(for: "pipewire:leaving-cam") }
    }

    /// `stop()` from the stream's own frame callback returns (it does not wait for itself), and the stream ends.
    @Test func aStreamStopsFromItsOwnFrameCallback() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "stopping-cam")
        let provider = session.provider()
        let device = try #require(try provider.device(for: "pipewire:stopping-cam"))
        final class Holder: @unchecked Sendable {
            let lock = NSLock()
            var stream: (any CaptureStream)?
            var frames = 0
            var stoppedAt: Int?
        }
        let holder = Holder()
        let sink = FrameSink(
            frame: { _ in
                let s: (any CaptureStream)? = holder.lock.withLock {
                    holder.frames += 1
                    guard holder.frames >= 3, holder.stoppedAt == nil, let s = holder.stream else { return nil }
                    holder.stoppedAt = holder.frames
                    return s
                }
                s?.stop()
            }, dropped: { _, _ in }, failed: { _ in })
        let stream = try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 320, height: 240), fps: 30), sink: sink)
        holder.lock.withLock { holder.stream = stream }
        #expect(waitUntil(timeout: 10) { holder.lock.withLock { holder.stoppedAt != nil } })
        let started = Date()
        stream.stop() // the thread has ended (or ends now): returns at once
        #expect(Date().timeIntervalSince(started) < 3, "a stop that waited")
        let after = holder.lock.withLock { holder.frames }
        // No frame comes after the stop: waiting for one more times out.
        #expect(!waitUntil(timeout: 0.5) { holder.lock.withLock { holder.frames > after } })
        #expect(after == holder.lock.withLock { holder.stoppedAt })
    }

    @Test func aFormatTheNodeDoesNotOfferIsRefused() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "picky-cam")
        let provider = session.provider(startTimeoutMs: 3000)
        let device = try #require(try provider.device(for: "pipewire:picky-cam"))
        let started = Date()
        do {
            let s = try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: .rgb24, size: FrameSize(width: 640, height: 480), fps: 30),
                sink: Collector(keep: 1).sink)
            s.stop()
            Issue.record("RGB3 was accepted from a camera that offers only YUYV, YU12 and NV12")
        } catch {
            #expect(error.code == .unsupportedFormat, "\(error)")
            #expect(error.message.contains("pipewire:picky-cam does not offer RGB3 640x480"), "\(error.message)")
            #expect(error.message.contains("YUYV 640x480"), "\(error.message)")
        }
        #expect(Date().timeIntervalSince(started) < 2.9, "refused before the 3 s start timeout")
        // A size it does not offer: refused the same way.
        #expect(throws: CaptureError.self) {
            _ = try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 1280, height: 720), fps: 30),
                sink: Collector(keep: 1).sink)
        }
    }

    // Controls come through PipeWire only from a V4L2 node (checked on vivid in the VM: Scripts/vm-pipewire.sh); a
    // camera of another program offers none, and setting one is refused by name.
    @Test func aCameraThatIsNoV4L2NodeHasNoControls() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "plain-cam")
        let provider = session.provider()
        let device = try #require(try provider.device(for: "pipewire:plain-cam"))
        #expect(try provider.controls(of: device).isEmpty)
        do {
            _ = try provider.setControl(.brightness, to: .integer(200), on: device)
            Issue.record("brightness was set on a camera without controls")
        } catch {
            #expect(error.code == .unknownControl, "\(error)")
            #expect(error.message.contains("pipewire:plain-cam has no control"), "\(error.message)")
        }
    }

    @Test func withoutPipeWireThereIsNoCameraAndNoWait() throws {
        let provider = PipeWireCameraProvider(configuration: .init(remote: "/nonexistent/pipewire-0"))
        let started = Date()
        #expect(provider.devices().isEmpty)
        #expect(Date().timeIntervalSince(started) < 2, "no wait for a PipeWire that is not there")
        do {
            _ = try provider.device(for: "pipewire:anything")
            Issue.record("a pipewire: spec was accepted without PipeWire")
        } catch {
            #expect(error.code == .unknownDevice)
            #expect(error.message.contains("PipeWire is not running"), "\(error.message)")
        }
        #expect(try provider.device(for: "fixture:vivid") == nil)
    }

    @Test func camcapListsAndRecordsThePipeWireCamera() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "camcap-cam", ["--pad", "32"])
        let camcap = builtProduct("camcap")
        let devices = try runTool(camcap, ["devices"], environment: session.environment)
        #expect(devices.code == 0, "\(devices.err)")
        #expect(devices.out.contains("pipewire:camcap-cam\tTest camera (pw-test-camera)"), "\(devices.out)")

        let dir = scratchDirectory("pipewire-tests")
        for (format, size) in [("YUYV", "640x480"), ("NV12", "320x240")] {
            let file = "\(dir)/\(format).mp4"
            try? FileManager.default.removeItem(atPath: file)
            let r = try runTool(
                camcap, ["record", "-d", "pipewire:camcap-cam", "-o", file, "--frames", "30", "--pixel-format", format, "--size", size],
                environment: session.environment)
            #expect(r.code == 0, "\(r.err)")
            #expect(r.err.contains("pipewire:camcap-cam") && r.err.contains("\(format) \(size)"), "\(r.err)")
            // PipeWire's buffers are read in place (the camera's rows are padded): the summary counts them.
            let inPlace = r.out.split(separator: "\n").first { $0.hasPrefix("frames:") }.flatMap { $0.firstMatch(of: /zero-copy (\d+)/) }
            #expect(inPlace.flatMap { Int($0.1) }.map { $0 > 0 } == true, "\(r.out)")
            let probe = try runTool(
                "ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height", "-of", "csv=p=0", file])
            #expect(probe.out.trimmingCharacters(in: .whitespacesAndNewlines) == size.replacingOccurrences(of: "x", with: ",") + ",30", "\(probe)")
        }
    }

    /// `select` is provider-neutral: the PipeWire camera and a fixture camera offering the same modes get the same
    /// answers, for sizes, pixel formats, getUserMedia constraints (also one no mode meets) and other stacks' policies.
    @Test func selectAnswersAsForAFixtureWithTheSameModes() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "select-cam")
        let sizes = #"[{"width": 640, "height": 480, "fps": [30]}, {"width": 320, "height": 240, "fps": [30]}]"#
        let fixture = tempFile(
            "pw-test-camera.json",
            #"{"name": "pw-test-camera's modes", "formats": ["#
                + ["YUYV", "YU12", "NV12"].map { #"{"pixelFormat": "\#($0)", "sizes": \#(sizes)}"# }.joined(separator: ", ") + "]}")
        let camcap = builtProduct("camcap")
        for query in [
            ["-s", "1280x720"], ["-s", "320x240"], ["-s", "300x200", "--fps-limit", "15"], ["-s", "640x480", "--pixel-format", "NV12"],
            ["-s", "200x100", "--pixel-format", "YUYV,NV12"],
            // getUserMedia's constraints, and other stacks' policies.
            ["--constraints", #"{"width": {"ideal": 1280}, "height": {"ideal": 720}}"#],
            ["--constraints", #"{"width": {"min": 400}, "frameRate": {"ideal": 60}}"#],
            ["--constraints", #"{"width": {"exact": 800}}"#],
            ["-s", "640x480", "--policy", "gstreamer,ffmpeg,libwebrtc,chromium"],
        ] {
            let pw = try runTool(camcap, ["select", "-d", "pipewire:select-cam"] + query, environment: session.environment)
            let fx = try runTool(camcap, ["select", "-d", fixture] + query, environment: session.environment)
            // Both succeed or both refuse (an exact width no mode has), in the same words but for the device's name.
            #expect(pw.code == fx.code, "\(query): \(pw.err) \(fx.err)")
            #expect(pw.out == fx.out, "\(query): \(pw.out) vs \(fx.out)")
            #expect(
                pw.err.replacingOccurrences(of: "pipewire:select-cam", with: "D") == fx.err.replacingOccurrences(of: fixture, with: "D"),
                "\(query): \(pw.err) vs \(fx.err)")
            #expect(!pw.out.isEmpty || pw.code != 0)
        }
    }

    @Test func camcapServesThePipeWireCamera() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "serve-cam", ["--pad", "16"])
        let token = "pipewire-test-token-0123"
        let file = scratchDirectory("pipewire-tests") + "/snapshot.jpg"
        try? FileManager.default.removeItem(atPath: file)
        let status = Box()
        // Once it serves the camera: the snapshot (retried until the first picture is there), then Ctrl-C.
        let r = try runTool(
            builtProduct("camcap"), ["serve", "-d", "pipewire:serve-cam", "--listen", "127.0.0.1:0", "--token", token],
            environment: session.environment,
            interruptWhen: { text in
                guard text.contains("serving pipewire:serve-cam"), let m = text.firstMatch(of: /serving http:\/\/127\.0\.0\.1:(\d+)\//) else {
                    return false
                }
                let url = "http://127.0.0.1:\(m.1)/snapshot.jpg"
                waitUntil(timeout: 10, every: 0.05) {
                    let c = try? runTool("curl", ["-s", "-H", "Authorization: Bearer \(token)", "-o", file, "-w", "%{http_code}", url])
                    status.set(c?.out ?? "")
                    return status.get() == "200"
                }
                return true
            })
        #expect(r.code == 0, "\(r.err)")
        #expect(status.get() == "200", "\(r.err)")
        let probe = try runTool("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0", file])
        #expect(probe.out.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,640,480", "\(probe)")
    }

    /// A camera that goes away and comes back (a node of the same name): a recording that waits for its camera
    /// (the healing every provider's `.disconnected` gets) carries on from the new node.
    @Test func aRecordingWaitsForTheNodeToComeBack() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        // The first camera ends by itself after 30 frames: its node leaves PipeWire. The time the camera is away counts
        // toward --duration: 8 s leave the second node (started once the loss is seen) time to register on a loaded box.
        try session.startCamera(name: "healing-cam", ["--frames", "30"])
        let file = scratchDirectory("pipewire-tests") + "/healing.mp4"
        try? FileManager.default.removeItem(atPath: file)
        let stderr = Box()
        let done = DispatchSemaphore(value: 0)
        let result = Box()
        DispatchQueue.global().async {
            let r = try? runTool(
                builtProduct("camcap"), ["record", "-d", "pipewire:healing-cam", "-o", file, "--duration", "8", "--on-camera-loss", "wait"],
                environment: session.environment,
                interruptWhen: { text in
                    stderr.set(text)
                    return false
                })
            result.set(r.map { "\($0.code)\n\($0.err)" } ?? "could not run camcap")
            done.signal()
        }
        #expect(waitUntil(timeout: 20) { stderr.get().contains("camera lost") }, "\(stderr.get())")
        try session.startCamera(name: "healing-cam")
        #expect(done.wait(timeout: .now() + 30) == .success)
        let out = result.get()
        #expect(out.hasPrefix("0\n"), "\(out)")
        #expect(out.contains("camera back after"), "\(out)")
        let probe = try runTool("ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", file])
        let frames = Int(probe.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(frames > 30, "frames from both nodes: \(probe)")
    }
}

/// A string shared between threads.
final class Box: @unchecked Sendable {
    // @unchecked: `value` is behind `lock`.
    private let lock = NSLock()
    private var value = ""
    func set(_ v: String) { lock.withLock { value = v } }
    func get() -> String { lock.withLock { value } }
}
