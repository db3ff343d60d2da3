import ArgumentParser
import Foundation
import Logging
import SystemIO
import VideoCapture
import CapturePipeline
import V4L2Capture
import FixtureCameras
import H264

/// Options shared by every capturing command.
struct CaptureOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file (default: the first camera, else fixture:uvc-webcam).")
    var device: String?
    @Option(name: .shortAndLong, help: "Target capture size; negotiation picks the closest the device offers.")
    var size: FrameSize = FrameSize(width: 1280, height: 720)
    @Option(
        help: ArgumentHelp("Frame-rate limit for negotiation: 30, 12.5, 29.97 (= 30000/1001) or 30000/1001.", valueName: "fps"),
        transform: parseRateLimit)
    var fpsLimit: Fraction = 30
    @Option(
        help: ArgumentHelp(
            "Pixel formats wanted, preferred in this order (e.g. MJPG or YUYV,NV12; H264: a camera's own stream, passed through by record; see `camcap formats`); default: any, the cheapest conversion.",
            valueName: "FOURCC[,FOURCC…]"),
        transform: parsePixelFormats)
    var pixelFormat: [PixelFormat]?
    @Option(help: "Stop after this many frames.") var frames: Int?
    @Option(help: "Stop after this many seconds of capture, on frame timestamps (default 5 when --frames is not given).") var duration: Double?
    @Flag(help: "Fixture cameras only: frames as fast as they are consumed, timestamps exactly 1/fps apart, no drops (encoding on a thread).")
    var fast = false
    @Option(help: "Fixture cameras only: sensor noise amplitude added to luma (0 = the clean test pattern).") var noise: Int = 0
    @Option(help: .hidden) var fixtureDisconnectAfter: Int?
    @Option(
        name: .customLong("control"),
        help: ArgumentHelp("Set a camera control before the first frame (repeatable, in order; see `camcap controls`).", valueName: "name=value"),
        transform: parsing(CameraControlSetting.init(parsing:), "--control expects NAME=VALUE"))
    var controls: [CameraControlSetting] = []
    @Option(
        help: ArgumentHelp("Anti-flicker filter set on start: 50, 60, auto (where the camera has it) or off.", valueName: "50|60|auto|off"),
        transform: parsing(PowerLineFrequency.init(argument:), "--power-line must be 50, 60, auto or off"))
    var powerLine: PowerLineFrequency?
    @Flag(name: .shortAndLong, help: "No progress line and no start line.") var quiet = false

    func validate() throws {
        guard (0...64).contains(noise) else { throw ValidationError("--noise must be 0...64, got \(noise)") }
        if let n = fixtureDisconnectAfter, n < 0 { throw ValidationError("--fixture-disconnect-after must be >= 0") }
        try validating { try configuration().validate() }
    }

    /// The session's configuration: the stop condition on timestamps (5 s unless --frames; the servers run until
    /// Ctrl-C when neither is given: `untilStopped`), the camera released after `idleRelease` seconds without
    /// viewers (0: never), the CLI's cameras (`cameraProviders`) and logger; no device named: nil.
    func configuration(untilStopped: Bool = false, idleRelease: Double = 0) -> CaptureSession.Configuration {
        var c = CaptureSession.Configuration()
        (c.device, c.size, c.fpsLimit, c.pixelFormats, c.frames) = (device, size, fpsLimit, pixelFormat ?? [], frames)
        c.durationNs = duration.map { nanoseconds(seconds: $0) } ?? (frames == nil && !untilStopped ? 5_000_000_000 : nil)
        c.idleReleaseNs = idleRelease == 0 ? nil : nanoseconds(seconds: idleRelease)
        c.fast = fast
        c.providers = cameraProviders(
            FixtureCameraProvider.Options(
                pacing: fast ? .asFastAsConsumed : .realTime, disconnectAfterFrames: fixtureDisconnectAfter, noise: noise))
        (c.controls, c.powerLine) = (controls, powerLine)
        c.logger = cliLogger
        return c
    }

    /// The session (the device named, else `defaultCameraSpec`), checked: device, negotiation.
    func session(untilStopped: Bool = false, idleRelease: Double = 0, frames: Int? = nil) throws -> CaptureSession {
        var c = configuration(untilStopped: untilStopped, idleRelease: idleRelease)
        c.device = device ?? defaultCameraSpec
        if let frames { (c.frames, c.durationNs) = (frames, nil) }
        return try CaptureSession(c)
    }
}

/// A size option (`--size` of select, `--scale`) within `CaptureLimits` (16384 per side, 64 Mpx).
func checkSize(_ size: FrameSize?, _ option: String) throws {
    if let size, let problem = CaptureLimits.problem(with: size) { throw ValidationError("\(option): \(problem)") }
}

/// The camera when none is named: the first V4L2 camera, else the built-in fixture webcam (the CLI's documented
/// fallback; the library has none, and the start line says so: see `fallbackNote`).
var defaultCameraSpec: String { V4L2DeviceProvider().devices().first?.path ?? "fixture:uvc-webcam" }

/// What the start line adds when no camera was named and none was found.
func fallbackNote(named device: String?, using path: String) -> String {
    device == nil && path == "fixture:uvc-webcam" ? " (no camera found: the built-in fixture webcam)" : ""
}

/// The encoder options of every encoding command (record, stream, serve, rtsp, publish): one set of names,
/// defaults and checks. `record` adds its own (--keyint, --threads, --max-nal-size, --frame-skipping).
struct EncoderOptions: ParsableArguments {
    @Option(help: "Target bitrate in kbps.") var bitrate = 1500
    @Option(help: "Maximum bitrate in kbps (default 1.5 × target; a receiver's estimate, REMB, never goes above it).") var maxBitrate: Int?
    @Option(help: "Seconds between key frames (default 2).") var keyintSeconds: Double?

    /// OpenH264's limits, checked before any camera or file is touched (record adds its own options).
    func validate() throws { try validating { try recipe().validate() } }

    /// The library's encoder recipe for these options (key frames every --keyint-seconds, default 2).
    func recipe(sliceMode: H264Encoder.SliceMode = .single) -> EncodeStage.Configuration {
        EncodeStage.Configuration(
            bitrateKbps: bitrate, maxBitrateKbps: maxBitrate, keyFrameInterval: .seconds(keyintSeconds ?? 2), sliceMode: sliceMode)
    }
}

/// `EncoderOptions` and `--mtu`, for the commands that send RTP (stream, serve, rtsp, publish).
struct RTPEncoderOptions: ParsableArguments {
    @OptionGroup var encoder: EncoderOptions
    @Option(help: "RTP payload budget in bytes, 200...1400 (packets are this plus 12 bytes of header).") var mtu = 1200

    /// 200...1400 bytes: 1400 + 12 of RTP + 28 of UDP/IP fit a 1500-byte Ethernet MTU; below 200 a slice of the
    /// smallest picture no longer fits a few packets.
    func validate() throws {
        guard (200...1400).contains(mtu) else { throw ValidationError("--mtu must be 200...1400 bytes, got \(mtu)") }
    }

    /// The encoder recipe, slices within the payload budget (`EncodeStage.Configuration.slices(fitting:)`).
    var recipe: EncodeStage.Configuration { encoder.recipe(sliceMode: EncodeStage.Configuration.slices(fitting: mtu)) }
}

/// A transform for an option whose value `parse` reads, else a usage error: what is `expected`, and the value.
func parsing<T>(_ parse: @escaping @Sendable (String) -> T?, _ expected: String) -> @Sendable (String) throws -> T {
    { text in
        guard let value = parse(text) else { throw ValidationError("\(expected), got \"\(text.prefix(80))\"") }
        return value
    }
}

/// `--fps-limit`: a whole, decimal or fractional rate, 0 < rate ≤ 1000.
func parseRateLimit(_ text: String) throws -> Fraction { try validating { try CaptureSession.Configuration.fpsLimit(parsing: text) } }
/// `--pixel-format YUYV,MJPG`: FourCCs we convert to I420 (or H.264), in order of preference.
func parsePixelFormats(_ text: String) throws -> [PixelFormat] { try validating { try CaptureSession.Configuration.pixelFormats(parsing: text) } }

/// The CLI's logger: silent unless CAMCAP_LOG names a level (trace, debug, info, …).
let cliLogger: Logger = {
    var logger = Logger(label: "camcap")
    logger.logLevel = ProcessInfo.processInfo.environment["CAMCAP_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    return logger
}()

/// The CLI's cameras: real ones (V4L2) first, then the built-in fixture cameras (the library has no default).
func cameraProviders(_ fixtures: FixtureCameraProvider.Options = .init()) -> [any CaptureDeviceProvider] {
    [V4L2DeviceProvider(), FixtureCameraProvider(options: fixtures)]
}

/// A capturer with the CLI's providers and logger (for the commands that only list or select).
func makeCapturer() -> CameraVideoCapturer {
    var c = CaptureSession.Configuration()
    c.providers = cameraProviders()
    c.logger = cliLogger
    return CaptureSession.capturer(for: c)
}

extension CaptureSession {
    /// Runs the session as a command does: Ctrl-C stops it cleanly (a second one exits), `announce` (the servers'
    /// URL) and, unless quiet, the start line and the progress go to stderr once the camera runs, the summary to
    /// stdout; a failure is thrown after the summary. `serving` commands (serve, rtsp, publish) produce no file: stopped by
    /// the user before the camera's first frame, they end cleanly with a note instead of "no frame was captured".
    /// `stop` (a server's) runs once the session has ended, however it ended.
    func runCommand(
        _ verb: String, quiet: Bool, stages: [any PictureStage], namedDevice: String?, announce: String? = nil, serving: Bool = false,
        stop: (() async -> Void)? = nil
    ) async throws {
        // Ctrl-C or SIGTERM: the first finishes cleanly, a second exits at once (130).
        let stopSignal = try? StopOnSignals(onFirst: stopAction)
        defer { withExtendedLifetime(stopSignal) {} }
        let tty = FileDescriptor.standardError.isTerminal
        onStarted = { s in
            if let announce { printError(announce + "\n") }
            guard !quiet else { return }
            let camera = "\(s.device.path) (\(s.device.name))\(fallbackNote(named: namedDevice, using: s.device.path))"
            printError("\(verb) \(camera): \(s.selection.pixelFormat) \(s.applied.size) @ \(s.applied.fps) fps\n")
        }
        if !quiet {
            progressIntervalNs = tty ? 250_000_000 : 2_000_000_000
            onProgress = { line in printError((tty ? "\r\u{1B}[K" : "") + line + (tty ? "" : "\n")) }
            onEvent = { line in printError((tty ? "\r\u{1B}[K" : "") + line + "\n") }
        }
        let report: Report
        do { report = try await run(stages: stages) } catch {
            await stop?()
            throw error
        }
        await stop?()
        if !quiet && tty { printError("\n") }
        print(report.summaryText)
        if let failure = report.failure {
            if serving && failure.code == .noFrames && stopSignal?.received == true {
                printError("note: stopped before the camera's first frame\n")
                return
            }
            throw failure
        }
    }
}
