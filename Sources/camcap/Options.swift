import ArgumentParser
import Foundation
import Logging
import SystemIO
import VideoCapture
import VideoProcessing
import CapturePipeline
import V4L2Capture
import LibCameraCapture
import PipeWireCapture
import FixtureCameras
import H264

/// Options shared by every capturing command.
struct CaptureOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "Device: \(deviceHelp) (default: the first camera, else fixture:uvc-webcam).") var device: String?
    @Option(name: .shortAndLong, help: "Target size; negotiation picks the closest the device offers.") var size = FrameSize(width: 1280, height: 720)
    @Option(help: ArgumentHelp(fpsHelp, valueName: "fps"), transform: parseRateLimit) var fpsLimit: Fraction = 30
    @Option(
        help: ArgumentHelp(pixelFormatHelp + "; default: any, the cheapest conversion.", valueName: fourCCs),
        transform: parsePixelFormats)
    var pixelFormat: [PixelFormat]?
    @Option(help: "Stop after this many frames.") var frames: Int?
    @Option(help: ArgumentHelp(constraintsHelp, valueName: "json"), transform: parseConstraints) var constraints: VideoConstraints?
    @Option(
        help:
            "Stop after this many seconds, on frame timestamps, counted from the first frame; the time a server's camera is released (--idle-release) or lost counts too (default 5 when --frames is not given; servers: until Ctrl-C)."
    ) var duration: Double?
    @Flag(help: "Fixture cameras only: frames as fast as consumed, timestamps 1/fps apart, no drops (encoding on a thread).") var fast = false
    @Option(help: "Fixture cameras only: sensor noise amplitude added to luma (0 = the clean test pattern).") var noise: Int = 0
    @Option(help: .hidden) var fixtureDisconnectAfter: Int?
    /// Fixture H.264 cameras as a v4l2loopback node joined mid-stream: `KEYINT@JOINED` (tests).
    @Option(
        help: .hidden,
        transform: { text in
            do throws(CaptureError) { return try FixtureCameraProvider.H264Stream(parsing: text) } catch { throw ValidationError(error.message) }
        })
    var fixtureH264Stream: FixtureCameraProvider.H264Stream?
    @Option(
        help: ArgumentHelp(
            "Fixture cameras only: play a fault (repeatable): unplug@FRAME+SECONDS (gone, then back), stall@FRAME+SECONDS (no frames), resize@FRAME:WxH (the source changes size), nosignal@FRAME+SECONDS (the source goes dark), corrupt@FRAME+COUNT (corrupt frames), timejump@FRAME+SECONDS (timestamps go back) or nospace@FOURCC:WxH (that mode lacks USB bandwidth).",
            valueName: "fault"),
        transform: { text in
            do throws(CaptureError) { return try FixtureFault(parsing: text) } catch { throw ValidationError(error.message) }
        })
    var fixtureFault: [FixtureFault] = []
    @Option(
        help: ArgumentHelp(
            "When the camera is lost mid-run (unplugged, failed, stalled): wait for it and carry on, or exit 1 (default: wait for serve, rtsp, publish, stream and a segmented record; exit otherwise).",
            valueName: "wait|exit"))
    var onCameraLoss: LossChoice?
    @Option(
        help: ArgumentHelp(
            "With --on-camera-loss wait: give up (exit 1) after this many seconds without the camera (default: never).", valueName: "seconds"))
    var giveUpAfter: Double?
    @Option(
        help: ArgumentHelp(
            "A camera that sends nothing for this long is restarted once (STREAMOFF/STREAMON), then lost (default 3; 0.5...600).",
            valueName: "seconds"))
    var stallTimeout: Double = 3
    @Option(
        name: .customLong("pipewire"),
        help: ArgumentHelp(
            "How PipeWire cameras are reached: auto (the PipeWire socket; inside a Flatpak the camera portal), direct, or portal (xdg camera portal: access is asked, a refusal fails by name).",
            valueName: "auto|direct|portal"),
        transform: parsing(PipeWireCameraProvider.Configuration.Connection.init(rawValue:), "--pipewire must be auto, direct or portal"))
    var pipeWire: PipeWireCameraProvider.Configuration.Connection = .automatic
    @Option(
        name: .customLong("libcamera-size"),
        help: ArgumentHelp(
            "When libcamera adjusts the size (vimc makes 640x480 636x480): accept delivers its size, crop asks for a size that covers the request and crops to it.",
            valueName: "accept|crop"),
        transform: parsing(LibCameraFormats.SizeAdjustment.init(rawValue:), "--libcamera-size must be accept or crop"))
    var libcameraSize: LibCameraFormats.SizeAdjustment = .accept
    @Option(
        name: .customLong("control"), help: ArgumentHelp("Set a camera control before the first frame (repeatable).", valueName: "name=value"),
        transform: parsing(CameraControlSetting.init(parsing:), "--control expects NAME=VALUE")) var controls: [CameraControlSetting] = []
    @Option(
        help: ArgumentHelp("Anti-flicker filter set on start (where the camera has it).", valueName: "50|60|auto|off"),
        transform: parsing(PowerLineFrequency.init(argument:), "--power-line must be 50, 60, auto or off")) var powerLine: PowerLineFrequency?
    @Option(
        name: .customLong("process"),
        help: ArgumentHelp(
            "Process every picture before it is encoded or written (repeatable, applied in order): time (the capture time drawn at the top left) or crop=WxH+X+Y[:WxH] (keep that region, optionally scaled). The capture timestamps are unchanged.",
            valueName: "time|crop=WxH+X+Y[:WxH]"),
        transform: { text in
            do throws(PipelineError) { return try ProcessingSpec.parse(text) } catch { throw ValidationError(error.message) }
        })
    var processing: [ProcessingSpec] = []
    @Option(
        help: ArgumentHelp(
            "With --process: wait (every picture is processed) or drop[:MS] (a picture older than MS, default 100, when its turn comes is skipped).",
            valueName: "wait|drop[:ms]"),
        transform: { text in
            do throws(PipelineError) { return try ProcessingBackpressure.parse(text) } catch { throw ValidationError(error.message) }
        })
    var processBackpressure: ProcessingBackpressure = .wait
    @Flag(name: .shortAndLong, help: "No progress line and no start line.") var quiet = false
    @Option(
        help: ArgumentHelp(
            "Publish the converted I420 frames to local readers through shared memory (a frame tap; Examples/FrameTap/frametap.py reads it): its socket is $XDG_RUNTIME_DIR/camcap-tap-NAME.sock (else /tmp), or NAME itself when it has a '/'.",
            valueName: "name"))
    var tap: String?

    func validate() throws {
        if let g = giveUpAfter, !(g.isFinite && g > 0 && g <= 31 * 86_400) {
            throw ValidationError("--give-up-after must be above 0 and at most 2678400 seconds, got \(g)")
        }
        guard stallTimeout.isFinite && (0.5...600).contains(stallTimeout) else {
            throw ValidationError("--stall-timeout must be 0.5...600 seconds, got \(stallTimeout)")
        }
        guard (0...64).contains(noise) else { throw ValidationError("--noise must be 0...64, got \(noise)") }
        if let n = fixtureDisconnectAfter, n < 0 { throw ValidationError("--fixture-disconnect-after must be >= 0") }
        if let tap { _ = try validating { try FrameTap.socketPath(name: tap, runtimeDirectory: nil) } }
        try validating { try configuration().validate() }
    }

    /// The session's configuration: 5 s of timestamps unless --frames or --duration (`untilStopped`: until Ctrl-C), the
    /// camera released after `idleRelease` s without viewers (0: never), the CLI's cameras and logger.
    func configuration(untilStopped: Bool = false, idleRelease: Double = 0, waitsForCamera: Bool? = nil, exportDMABuf: [PixelFormat] = [])
        -> CaptureSession.Configuration
    {
        var c = CaptureSession.Configuration()
        (c.device, c.size, c.fpsLimit, c.pixelFormats, c.frames) = (device, size, fpsLimit, pixelFormat ?? [], frames)
        c.constraints = constraints // the fps limit then breaks ties only
        c.durationNs = duration.map { nanoseconds(seconds: $0) } ?? (frames == nil && !untilStopped ? 5_000_000_000 : nil)
        (c.idleReleaseNs, c.fast) = (idleRelease == 0 ? nil : nanoseconds(seconds: idleRelease), fast)
        var fixtures = FixtureCameraProvider.Options(
            pacing: fast ? .asFastAsConsumed : .realTime, disconnectAfterFrames: fixtureDisconnectAfter, noise: noise)
        fixtures.faults = fixtureFault
        fixtures.stallTimeoutNs = nanoseconds(seconds: stallTimeout)
        fixtures.h264Stream = fixtureH264Stream
        let waits = onCameraLoss.map { $0 == .wait } ?? waitsForCamera ?? untilStopped
        c.onCameraLoss = waits ? .wait(giveUpAfterNs: giveUpAfter.map { nanoseconds(seconds: $0) }) : .exit
        (c.providers, c.controls, c.powerLine, c.logger) = (
            cameraProviders(
                fixtures, stallTimeoutNs: nanoseconds(seconds: stallTimeout), exportDMABuf: exportDMABuf, pipeWire: pipeWire,
                libcameraSize: libcameraSize), controls,
            powerLine, cliLogger
        )
        return c
    }

    /// The session (the device named, else `defaultCameraSpec`), checked: device, negotiation.
    func session(
        untilStopped: Bool = false, idleRelease: Double = 0, frames: Int? = nil, waitsForCamera: Bool? = nil, exportDMABuf: [PixelFormat] = []
    ) throws -> CaptureSession {
        var c = configuration(untilStopped: untilStopped, idleRelease: idleRelease, waitsForCamera: waitsForCamera, exportDMABuf: exportDMABuf)
        c.device = device ?? defaultCameraSpec
        if let frames { (c.frames, c.durationNs) = (frames, nil) }
        return try CaptureSession(c)
    }
}

/// `--on-camera-loss`: what a run does when its camera is lost (`CameraLossPolicy`).
enum LossChoice: String, ExpressibleByArgument, CaseIterable {
    case wait, exit
}

/// A size option (`--size` of select, `--scale`) within `CaptureLimits` (16384 per side, 64 Mpx).
func checkSize(_ size: FrameSize?, _ option: String) throws {
    if let size, let problem = CaptureLimits.problem(with: size) { throw ValidationError("\(option): \(problem)") }
}

/// No camera named: the first V4L2 camera, else the built-in fixture webcam (the CLI's fallback; the start line says so).
var defaultCameraSpec: String { V4L2DeviceProvider().devices().first?.path ?? "fixture:uvc-webcam" }

/// The encoder options of every encoding command: one set of names, defaults and checks (record adds --keyint, …).
struct EncoderOptions: ParsableArguments {
    @Option(help: "Target bitrate in kbps.") var bitrate = 1500
    @Option(help: "Maximum bitrate in kbps (default 1.5 × target; a receiver's estimate, REMB, never goes above it).") var maxBitrate: Int?
    @Option(help: "Seconds between key frames (default 2).") var keyintSeconds: Double?
    @Option(
        name: .customLong("encoder"),
        help: ArgumentHelp(
            "The encoder: auto (a V4L2 memory-to-memory encoder that gives H.264, else OpenH264), openh264, or v4l2m2m[:/dev/videoN] (the first such encoder, H.264 preferred, or that node; one that gives another coded format, as vicodec's FWHT, only for record). `camcap devices` lists them.",
            valueName: "auto|openh264|v4l2m2m[:/dev/videoN]"),
        transform: parsing(EncoderChoice.init(parsing:), "--encoder must be auto, openh264 or v4l2m2m[:/dev/videoN]"))
    var encoderChoice: EncoderChoice = .auto

    /// OpenH264's limits, checked before any camera or file is touched (record adds its own options).
    func validate() throws { try validating { try recipe().validate() } }

    /// The library's encoder recipe for these options (key frames every --keyint-seconds, default 2), made by
    /// `backend`.
    func recipe(sliceMode: H264Encoder.SliceMode = .single, backend: EncoderBackend = .openH264) -> EncodeStage.Configuration {
        var r = EncodeStage.Configuration(
            bitrateKbps: bitrate, maxBitrateKbps: maxBitrate, keyFrameInterval: .seconds(keyintSeconds ?? 2), sliceMode: sliceMode)
        r.backend = backend
        return r
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
    var recipe: EncodeStage.Configuration { recipe(backend: .openH264) }
    /// The recipe made by `backend`.
    func recipe(backend: EncoderBackend) -> EncodeStage.Configuration {
        encoder.recipe(sliceMode: EncodeStage.Configuration.slices(fitting: mtu), backend: backend)
    }
}

/// A transform for an option whose value `parse` reads, else a usage error: what is `expected`, and the value.
func parsing<T>(_ parse: @escaping @Sendable (String) -> T?, _ expected: String) -> @Sendable (String) throws -> T {
    { text in
        guard let value = parse(text) else { throw ValidationError("\(expected), got \"\(text.prefix(80))\"") }
        return value
    }
}

/// `--constraints`: getUserMedia's video constraints as JSON (`VideoConstraints(json:)`).
func parseConstraints(_ text: String) throws -> VideoConstraints {
    do throws(CaptureError) { return try VideoConstraints(json: text) } catch { throw ValidationError(error.message) }
}
let constraintsHelp =
    "Negotiate as getUserMedia does, from its video constraints as JSON ('{\"width\": {\"ideal\": 1280}, \"frameRate\": {\"min\": 24}}'; min/max/exact/ideal for width, height, aspectRatio, frameRate; pixelFormat; resizeMode none or crop-and-scale; advanced): instead of --size and --fps-limit."

/// `--policy NAME|all`: the named selection policies (`all`: every one, in `SelectionPolicy.allCases` order).
func parsePolicies(_ text: String) throws -> [SelectionPolicy] {
    if text == "all" { return SelectionPolicy.allCases }
    var policies: [SelectionPolicy] = []
    for name in text.split(separator: ",", omittingEmptySubsequences: false) {
        guard let p = SelectionPolicy(rawValue: String(name)) else {
            throw ValidationError(
                "--policy: expected \(SelectionPolicy.allCases.map(\.rawValue).joined(separator: ", ")) or all (or a comma-separated list), got \"\(name.prefix(80))\""
            )
        }
        if !policies.contains(p) { policies.append(p) }
    }
    return policies
}
/// `--caps`: a GStreamer caps filter (`GStreamerCaps(parsing:)`).
func parseCaps(_ text: String) throws -> GStreamerCaps {
    do throws(CaptureError) { return try GStreamerCaps(parsing: text) } catch { throw ValidationError(error.message) }
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
func cameraProviders(
    _ fixtures: FixtureCameraProvider.Options = .init(), stallTimeoutNs: Int64 = 3_000_000_000, exportDMABuf: [PixelFormat] = [],
    pipeWire: PipeWireCameraProvider.Configuration.Connection = .automatic, libcameraSize: LibCameraFormats.SizeAdjustment = .accept
) -> [any CaptureDeviceProvider] {
    var v4l2 = V4L2Stream.Configuration(noFrameTimeoutNs: stallTimeoutNs)
    // A hardware encoder imports the camera's buffers in `exportDMABuf`'s formats (`--encoder v4l2m2m`, record): each
    // is held while it encodes, so more of them stay with the driver (a frame is copied out, and cannot be imported,
    // only when none is left).
    if !exportDMABuf.isEmpty { (v4l2.exportDMABuf, v4l2.exportedFormats, v4l2.bufferCount) = (true, exportDMABuf, 8) }
    // PipeWire's cameras (`pipewire:NAME`): none, at once, where no PipeWire runs; libcamera's (`libcamera:ID`): none,
    // at once, without a media device.
    return [
        V4L2DeviceProvider(configuration: v4l2), FixtureCameraProvider(options: fixtures),
        PipeWireCameraProvider(configuration: .init(noFrameTimeoutNs: stallTimeoutNs, connection: pipeWire)),
        LibCameraProvider(configuration: .init(sizeAdjustment: libcameraSize, noFrameTimeoutNs: stallTimeoutNs)),
    ]
}

/// A capturer with the CLI's providers and logger (for the commands that only list or select), built as every
/// session's is (`CaptureSession.capturer(for:)`).
func makeCapturer(pipeWire: PipeWireCameraProvider.Configuration.Connection = .automatic) -> CameraVideoCapturer {
    CaptureSession.capturer(for: .init(providers: cameraProviders(pipeWire: pipeWire), logger: cliLogger))
}

extension CaptureOptions {
    /// Runs `session` as a command does: Ctrl-C stops it cleanly (a second one exits), `announce` (the servers' URL)
    /// and, unless --quiet, the start line and the progress go to stderr once the camera runs, the summary to stdout;
    /// a failure is thrown after the summary. The commands that announce (serve, rtsp, publish) produce no file:
    /// stopped before the camera's first frame, they end cleanly with a note instead of "no frame was captured".
    /// `stop` (a server's) runs once the session has ended, however it ended.
    func run(
        _ session: CaptureSession, _ verb: String, stages: [any PictureStage], announce: String? = nil, dataOnStandardOutput: Bool = false,
        stop: (() async -> Void)? = nil
    ) async throws {
        let (quiet, named) = (quiet, device), tty = FileDescriptor.standardError.isTerminal, (clear, end) = tty ? ("\r\u{1B}[K", "") : ("", "\n")
        session.onStarted = { s in
            if let announce { printError(announce + "\n") }
            let fallback = named == nil && s.device.path == "fixture:uvc-webcam" ? " (no camera found: the built-in fixture webcam)" : ""
            let mode = "\(s.selection.pixelFormat) \(s.applied.size) @ \(s.applied.fps) fps"
            if !quiet { printError("\(verb) \(s.device.path) (\(s.device.name))\(fallback): \(mode)\n") }
        }
        if !quiet {
            session.progressIntervalNs = tty ? 250_000_000 : 2_000_000_000
            (session.onProgress, session.onEvent) = ({ printError(clear + $0 + end) }, { printError(clear + $0 + "\n") })
        }
        // Waiting for a lost V4L2 camera: a node appearing in /dev (hot-plug) ends the backoff at once.
        let hotplug =
            session.configuration.onCameraLoss != .exit && session.device.path.hasPrefix("/dev/") ? try? session.capturer.watchDevices() : nil
        defer { hotplug?.stop() }
        if let hotplug {
            let (events, mayBeBack) = (hotplug.events, session.cameraMayBeBackAction)
            Task { for await event in events { if case .connected = event { mayBeBack() } } }
        }
        // --process: the processing stages before the command's own, so that every output gets their picture; the
        // frame tap (--tap) before them, so that its readers get the camera's picture. Its socket is claimed before
        // the camera starts.
        let given = stages, stages: [any PictureStage]
        do {
            let processStages = try processing.map { spec in ProcessStage(try spec.makeProcessor(), backpressure: processBackpressure) }
            stages = try (tap.map { [try FrameTapStage(name: $0)] } ?? []) + processStages + given
        } catch {
            for s in given { s.discard() } // the files the command claimed are given up
            throw error
        }
        // Ctrl-C or SIGTERM: the first finishes cleanly, a second exits (130); the signals are watched until the end.
        let (report, signals) = try await session.runStoppingOnSignals(stages: stages, afterwards: stop)
        defer { withExtendedLifetime(signals) {} }
        if !quiet && tty { printError("\n") }
        // Standard output carries the pictures or the stream (`-`): the summary goes to standard error.
        if dataOnStandardOutput { printError(report.summaryText + "\n") } else { print(report.summaryText) }
        guard let failure = report.failure else { return }
        // The reader of the pipe went away (`| head`, a closed ffplay): a clean end, said as such.
        guard failure.code != .readerGone else { return printError("camcap: \(failure.message)\n") }
        // A server stopped by the user before the camera's first frame produced no file: a clean end, with a note.
        let stoppedEarly = announce != nil && failure.code == .noFrames && signals?.received == true
        guard !stoppedEarly else { return printError("note: stopped before the camera's first frame\n") }
        throw failure
    }
}

/// The options that set library settings whose names differ from the option's; any other setting is its option in
/// kebab case, without a nanosecond suffix ("maxViewers" → --max-viewers, "requestTimeoutNs" → --request-timeout).
let optionNames = [
    "maxSessions": "--max-clients", "maxSessionsPerAddress": "--max-clients-per-address", "maxPerAddress": "--max-viewers-per-address",
    "bitrateKbps": "--bitrate", "maxBitrateKbps": "--max-bitrate", "keyFrameInterval": "--keyint", "keyIntervalSeconds": "--keyint-seconds",
    "sliceMode": "--max-nal-size", "pacingFactor": "--pacing", "adaptsToBandwidth": "--adapt-to-bandwidth", "durationNs": "--duration",
    "fpsLimit": "--fps-limit", "pixelFormats": "--pixel-format", "candidateHosts": "--candidate", "feedbackFrom": "--rtcp-from",
    "localRTCPPort": "--rtcp-port", "allowedOrigins": "--allow-origin", "hostNames": "--allow-host", "tiers": "--tiers",
    "cacheWindowNs": "--snapshot-cache", "maxClients": "--mjpeg-clients", "defaultFrameRate": "--mjpeg-fps",
]

/// The option that sets a library setting (`optionNames`, else the setting's name as an option).
func option(for setting: String) -> String { optionNames[setting] ?? optionName(forSetting: setting) }

/// Runs library checks (the configurations' `validate()`, parsing): a refusal names our options where the library
/// names its settings, keeping the value and the valid range. The one place where settings become options.
func validating<T>(_ checks: () throws -> T) throws -> T {
    do { return try checks() } catch let error as any SettingError {
        throw ValidationError(error.message(calling: option(for:), others: { optionNames[$0] }))
    } catch { throw ValidationError("\(error)") }
}

/// --token and --token-file (serve, publish): the bearer token, given once.
struct TokenOptions: ParsableArguments {
    @Option(help: "The bearer token (visible to other users in ps; prefer --token-file or the environment variable).") var token: String?
    @Option(help: "Read the bearer token from this file.") var tokenFile: String?

    func validate() throws {
        if token != nil && tokenFile != nil { throw ValidationError("give the token once: --token or --token-file") }
    }
}

/// The options both servers (serve, rtsp) take: where to listen, the request timeout, the connection limits and when
/// to release the camera. Those not given keep the server's own default (`ServerPolicy`, `RTSPHub.Configuration`).
struct ServerOptions: ParsableArguments {
    @Option(
        help: "HOST:PORT (port 0: a free one, printed); default 127.0.0.1:8080 (serve), 127.0.0.1:8554 (rtsp); UDP media on HOST.",
        transform: parsing(ListenAddress.init, "--listen must be HOST:PORT with an IPv4/IPv6 address and a port 0...65535"))
    var listen: ListenAddress?
    @Option(help: "Seconds a connection has to send a complete request (default 10).") var requestTimeout: Double?
    @Option(help: "Open connections at most (default: serve 256, rtsp 64; kept below the descriptor limit).") var maxConnections: Int?
    @Option(help: "Open connections per client address at most (default: serve 32, rtsp 16).") var maxConnectionsPerAddress: Int?
    @Option(help: "Seconds without viewers before the camera is released (its light goes off, the next viewer starts it); 0: never.")
    var idleRelease: Double = 30

    /// --listen, else 127.0.0.1 at `port`.
    func address(_ port: Int) -> ListenAddress { listen ?? ListenAddress(host: "127.0.0.1", port: port) }

    /// The request timeout and connection limits given, over a server's defaults (its settings at these key paths).
    func apply<C>(to c: inout C, _ timeout: WritableKeyPath<C, Int64>, _ max: WritableKeyPath<C, Int>, _ perAddress: WritableKeyPath<C, Int>) {
        if let requestTimeout { c[keyPath: timeout] = nanoseconds(seconds: requestTimeout) }
        (c[keyPath: max], c[keyPath: perAddress]) = (maxConnections ?? c[keyPath: max], maxConnectionsPerAddress ?? c[keyPath: perAddress])
    }
}
