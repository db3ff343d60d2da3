// A headless PipeWire for one test: Scripts/pipewire-session.sh (pipewire + wireplumber under dbus-run-session, a
// private XDG_RUNTIME_DIR) kept running while the test lasts, and pw-test-camera processes inside it.
import Foundation
import PipeWireCapture
import TestSupport
import VideoCapture

struct PipeWireTestError: Error, CustomStringConvertible {
    var description: String
}

/// A built executable of this package, next to the test bundle or in .build/debug.
func builtProduct(_ name: String) -> String {
    let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [dir, dir.deletingLastPathComponent()] {
        let p = candidate.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: p) { return p }
    }
    return repositoryRoot + "/.build/debug/" + name
}

/// Whether `tool` is on PATH.
func onPath(_ tool: String) -> Bool {
    (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").contains {
        FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)")
    }
}

/// A child process started with every signal unblocked and at its default: the test process blocks most signals
/// in its threads, and a child inheriting that mask (as Foundation's Process leaves it) could never be stopped
/// with SIGTERM (bash's traps, wireplumber's and dbus-daemon's handlers would not run).
final class Child: @unchecked Sendable {
    // @unchecked: `status` is behind `lock`.
    let pid: pid_t
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `path`; its stdout and stderr go to `output` (a file), else to /dev/null.
    init(_ path: String, _ arguments: [String], environment: [String: String], output: String? = nil) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // A process group of its own: a session script's teardown that signals groups never reaches the test runner
        // (nor whatever shares its group, as the `tee` of CI's log).
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw PipeWireTestError(description: "could not start \(path): errno \(rc)") }
        self.pid = pid
    }

    /// Whether it still runs (reaps it once it has ended).
    var isRunning: Bool {
        lock.withLock {
            if status != nil { return false }
            var s: Int32 = 0
            if waitpid(pid, &s, WNOHANG) == pid { status = s }
            return status == nil
        }
    }

    /// Its exit code once it has ended (128 + the signal when a signal ended it), nil while it runs.
    var exitCode: Int32? {
        guard !isRunning, let s = lock.withLock({ status }) else { return nil }
        return (s & 0x7f) != 0 ? 128 + (s & 0x7f) : (s >> 8) & 0xff
    }

    /// SIGTERM, then waits for it to end (at most `timeout` seconds, then SIGKILL).
    func stop(timeout: Double = 15) {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        if !waitUntil(timeout: timeout, every: 0.01, { !isRunning }) {
            kill(pid, SIGKILL)
            waitUntil(timeout: 5, every: 0.01) { !isRunning }
        }
    }
}

final class PipeWireSession: @unchecked Sendable {
    // @unchecked: used by one test at a time; the cameras list is behind `lock`.
    let directory: String
    var runtime: String { directory + "/runtime" }
    var socket: String { runtime + "/pipewire-0" }
    private var session: Child?
    private var cameras: [Child] = []
    private let lock = NSLock()

    /// Starts the session and waits (at most 20 s) until PipeWire and wireplumber run. Throws, saying what to install, when
    /// PipeWire is missing.
    init() throws {
        for tool in ["pipewire", "wireplumber", "pw-cli", "dbus-run-session"] where !onPath(tool) {
            throw PipeWireTestError(
                description:
                    "\(tool) is not installed: run `bash Scripts/install-deps.sh test` (PipeWire tests need pipewire, pipewire-bin, wireplumber and dbus)"
            )
        }
        let base = FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/pw-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PipeWireTestError(description: "mkdtemp failed (errno \(errno))") }
        directory = String(cString: made)
        // The session's command waits until we end it (the script then stops pipewire and wireplumber).
        // Its command runs once wireplumber is up: it marks the session ready, then waits until we end it.
        session = try Child(
            "/bin/bash",
            [
                repositoryRoot + "/Scripts/pipewire-session.sh", "--dir", directory, "--", "sh", "-c",
                "touch \"$PIPEWIRE_SESSION_DIR/ready\"; exec sleep 600",
            ],
            environment: ProcessInfo.processInfo.environment)
        let ready = directory + "/ready"
        guard waitUntil(timeout: 20, every: 0.02, { FileManager.default.fileExists(atPath: ready) }) else {
            let logs = ["pipewire.log", "wireplumber.log"].map { (try? String(contentsOfFile: directory + "/" + $0, encoding: .utf8)) ?? "" }
            close()
            throw PipeWireTestError(description: "PipeWire and wireplumber did not start within 20 s; their logs: \(logs)")
        }
    }

    /// The environment of a process inside the session.
    var environment: [String: String] {
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = runtime
        env.removeValue(forKey: "PIPEWIRE_REMOTE")
        env.removeValue(forKey: "PIPEWIRE_RUNTIME_DIR")
        return env
    }

    /// A provider connected to this session.
    func provider(startTimeoutMs: Int = 8000, noFrameTimeoutNs: Int64 = 3_000_000_000) -> PipeWireCameraProvider {
        PipeWireCameraProvider(configuration: .init(remote: socket, startTimeoutMs: startTimeoutMs, noFrameTimeoutNs: noFrameTimeoutNs))
    }

    /// Starts pw-test-camera with `arguments` and waits (at most 10 s) until the provider lists it.
    @discardableResult
    func startCamera(name: String, _ arguments: [String] = []) throws -> Child {
        let p = try Child(builtProduct("pw-test-camera"), ["--name", name] + arguments, environment: environment)
        lock.withLock { cameras.append(p) }
        let provider = provider()
        guard waitUntil(timeout: 10, every: 0.02, { provider.devices().contains { $0.path == "pipewire:" + name } }) else {
            throw PipeWireTestError(description: "pw-test-camera \(name) did not appear in PipeWire within 10 s")
        }
        return p
    }

    /// Stops the cameras, then the session (pipewire, wireplumber, D-Bus), and removes its folder.
    func close() {
        let (cams, session): ([Child], Child?) = lock.withLock {
            defer { (cameras, self.session) = ([], nil) }
            return (cameras, self.session)
        }
        for c in cams { c.stop() }
        guard let session else { return }
        session.stop()
        if let keep = ProcessInfo.processInfo.environment["PIPEWIRE_TEST_KEEP_LOGS"] {
            try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            for log in ["pipewire.log", "wireplumber.log"] {
                try? FileManager.default.copyItem(
                    atPath: "\(directory)/\(log)", toPath: "\(keep)/\(URL(fileURLWithPath: directory).lastPathComponent)-\(log)")
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { close() }
}

/// Frames and events a stream hands on, collected for a test (the frames copied out: they outlive the stream's
/// buffers).
final class Collector: @unchecked Sendable {
    // @unchecked: all state behind `lock`.
    private let lock = NSLock()
    private var frames: [VideoFrame] = []
    private var drops: [FrameDropReason: Int] = [:]
    private var failure: CaptureError?
    private var paused: Bool
    let keep: Int

    /// `paused`: frames are not kept until `resume()`.
    init(keep: Int, paused: Bool = false) { (self.keep, self.paused) = (keep, paused) }

    func resume() { lock.withLock { paused = false } }

    var sink: FrameSink {
        FrameSink(
            frame: { [self] f in
                var copy = f
                copy.buffer = f.buffer.copy()
                lock.withLock { if !paused && frames.count < keep { frames.append(copy) } }
            },
            dropped: { [self] reason, n in lock.withLock { drops[reason, default: 0] += n } },
            failed: { [self] e in lock.withLock { failure = e } })
    }

    var count: Int { lock.withLock { frames.count } }
    var collected: [VideoFrame] { lock.withLock { frames } }
    var error: CaptureError? { lock.withLock { failure } }
    var dropped: [FrameDropReason: Int] { lock.withLock { drops } }
}

/// pw-test-camera's bytes: frame n, plane p, row y, byte x (its main.c), the first four bytes of plane 0 being n.
func expectedByte(frame n: UInt32, plane p: Int, row y: Int, byte x: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: Int(n) &* 131 &+ p &* 71 &+ y &* 37 &+ x &* 7 &+ (x >> 8))
}

/// The planes of the test camera's formats: (rows, bytes per row).
func testCameraPlanes(_ pf: PixelFormat, _ w: Int, _ h: Int) -> [(rows: Int, bytes: Int)] {
    switch pf {
    case .yuyv: return [(h, w * 2)]
    case .i420: return [(h, w), ((h + 1) / 2, (w + 1) / 2), ((h + 1) / 2, (w + 1) / 2)]
    case .nv12: return [(h, w), ((h + 1) / 2, (w + 1) / 2 * 2)]
    default: return []
    }
}

/// Compares a frame with the bytes the test camera wrote for it; returns the frame's number (from its first four
/// bytes) and the bytes compared, or the first difference.
func verify(_ frame: VideoFrame) -> Result<(number: UInt32, bytes: Int), PipeWireTestError> {
    let b = frame.buffer
    let layout = b.planes
    let offsets = [layout.offsets.0, layout.offsets.1, layout.offsets.2], strides = [layout.strides.0, layout.strides.1, layout.strides.2]
    let planes = testCameraPlanes(b.pixelFormat, b.width, b.height)
    guard !planes.isEmpty, layout.count == planes.count else {
        return .failure(PipeWireTestError(description: "unexpected format \(b.pixelFormat) with \(layout.count) planes"))
    }
    let base = b.baseAddress
    let n =
        UInt32(base.load(as: UInt8.self)) | UInt32(base.load(fromByteOffset: 1, as: UInt8.self)) << 8
        | UInt32(base.load(fromByteOffset: 2, as: UInt8.self)) << 16 | UInt32(base.load(fromByteOffset: 3, as: UInt8.self)) << 24
    var compared = 0
    for (p, shape) in planes.enumerated() {
        for y in 0..<shape.rows {
            let row = (base + offsets[p] + y * strides[p]).assumingMemoryBound(to: UInt8.self)
            for x in 0..<shape.bytes {
                let want =
                    p == 0 && y == 0 && x < 4 ? UInt8(truncatingIfNeeded: n >> (8 * UInt32(x))) : expectedByte(frame: n, plane: p, row: y, byte: x)
                if row[x] != want {
                    return .failure(PipeWireTestError(description: "frame \(n) plane \(p) row \(y) byte \(x): \(row[x]), expected \(want)"))
                }
            }
            compared += shape.bytes
        }
    }
    return .success((n, compared))
}
