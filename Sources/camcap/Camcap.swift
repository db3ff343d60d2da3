import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import FixtureCameras
import V4L2Capture
import WHEPServer
import RTSPServer
import PipeWireCapture
import H264
import SystemIO

@main
struct Camcap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "camcap",
        abstract: "Find cameras, negotiate formats, capture, convert and record H.264 on Linux.",
        discussion: """
            DEVICES are V4L2 nodes (/dev/video0), built-in fixture cameras (fixture:NAME, see `camcap devices`), or the path of a \
            fixture file: a JSON camera description or the text of `v4l2-ctl --list-formats-ext`.

            Negotiation picks the size closest to the target, then the highest frame rate up to the limit, then the cheapest conversion to I420. \
            `camcap select --corpus Fixtures/corpus -s 1280x720` shows the pick on each of 57 real cameras.
            """,
        version: versionText,
        subcommands: [
            Devices.self, Formats.self, Controls.self, Select.self, Preview.self, Record.self, Stream.self, Serve.self, Publish.self, RTSP.self,
            Trace.self,
        ])
}

let versionText = "camcap 0.1.0\n\(libyuvCPUFlags)\n\(H264Encoder.openH264Version)"
/// The help texts of options several commands take.
let (deviceHelp, fourCCs) = ("/dev/videoN, fixture:NAME or a fixture file", "FOURCC[,FOURCC…]")
let fpsHelp = "Frame-rate limit for negotiation: 30, 12.5, 29.97 (= 30000/1001) or 30000/1001."
let pixelFormatHelp = "Pixel formats wanted, preferred in this order (MJPG or YUYV,NV12; H264: a camera's own stream; see `camcap formats`)"

extension FrameSize: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public var defaultValueDescription: String { description }
}

/// A command whose failures end it as "camcap: error: …" with exit status 1, not as a usage error (a
/// `ValidationError` thrown while it runs too: the message alone).
protocol CamcapCommand: AsyncParsableCommand { func execute() async throws }

extension CamcapCommand {
    func run() async throws {
        // A reader of standard output that goes away (`camcap … -o - | head`) is an EPIPE to handle, not a SIGPIPE death.
        try? SignalDisposition.ignore(SIGPIPE)
        do { try await execute() } catch { fail(error) }
    }
}

func fail(_ error: any Error) -> Never {
    printError("camcap: error: \(error)\(hint(for: error))\n")
    ProcessExit.now(1)
}

/// What a command-line user can do about an error the libraries state without naming options.
func hint(for error: any Error) -> String {
    let listen = (error as? ServerError)?.code == .cannotListen || (error as? RTSPError)?.code == .cannotListen
    return listen ? " (camcap: --listen HOST:PORT)" : ""
}

struct Devices: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "List cameras: V4L2 devices, PipeWire and libcamera cameras, and the built-in fixture cameras.")
    @Flag(help: "Print JSON (one object per device in an array).") var json = false
    @Flag(help: "Then keep watching /dev and print cameras as they are plugged in or removed (Ctrl-C ends).") var watch = false
    @Option(
        name: .customLong("pipewire"), help: ArgumentHelp("How PipeWire cameras are reached (see record --help).", valueName: "auto|direct|portal"),
        transform: parsing(PipeWireCameraProvider.Configuration.Connection.init(rawValue:), "--pipewire must be auto, direct or portal"))
    var pipeWire: PipeWireCameraProvider.Configuration.Connection = .automatic

    func execute() async throws {
        let capturer = makeCapturer(pipeWire: pipeWire), devices = capturer.devices()
        print(json ? DeviceListing.json(devices) : DeviceListing.text(devices), terminator: "")
        if !json { print(encoderDevicesText(M2MEncoderDiscovery().encoders()), terminator: "") }
        guard watch else { return }
        StandardStreams.flush()
        // Cameras as they come and go until Ctrl-C (the event stream is awaited: no thread is blocked).
        let monitor = try capturer.watchDevices()
        printFlushed("watching /dev for cameras (Ctrl-C to stop)")
        for await event in monitor.events { printFlushed(event.line { try? capturer.device($0).name }) }
    }
}

struct Formats: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a device's formats, sizes and frame intervals (in the style of `v4l2-ctl --list-formats-ext`).")
    @Option(name: .shortAndLong, help: "Device: \(deviceHelp).") var device: String
    @Flag(help: "Print JSON instead.") var json = false

    func execute() async throws {
        // An encoder node (memory-to-memory): its OUTPUT and CAPTURE formats.
        if device.hasPrefix("/dev/"), let encoder = try? M2MEncoderDiscovery().probe(device) {
            return print(json ? encoderFormatsJSON(encoder) : encoderFormatsText(encoder), terminator: json ? "\n" : "")
        }
        let capturer = makeCapturer()
        let formats = try capturer.supportedFormats(for: try capturer.device(device))
        print(json ? FormatListing.json(formats) : FormatListing.text(formats), terminator: "")
    }
}

struct Select: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which format, size and frame rate negotiation picks for a target size.",
        discussion: """
            Rules: closest size (|w-W| + |h-H|), then the highest fps up to the limit (or the lowest above), then the cheapest conversion.

            With --corpus DIR instead of --device, every fixture file in DIR (*.txt, *.json) is negotiated and one row per camera \
            is printed: camera, chosen mode, conversion (none, decode JPEG, convert FOURCC) or why nothing could be picked. \
            Example: camcap select --corpus Fixtures/corpus --size 1280x720 --fps-limit 30
            With --policy (a list, or all), one column per policy instead, each cell marked * where it differs from default, \
            and how many cameras each policy differs on. Example: camcap select --corpus Fixtures/corpus -s 1280x720 --policy all

            --policy NAME answers what another stack would pick for the same request, each written from the rules in its source \
            (where a stack leaves the size or rate to the driver, the driver is modelled from the listing as vivid answers):
            \(SelectionPolicy.allCases.map { "  \($0.rawValue): \($0.summary).\n    Source: \($0.source)." }.joined(separator: "\n"))
            """)
    @Option(name: .shortAndLong, help: "Device: \(deviceHelp) (or --corpus).") var device: String?
    @Option(help: ArgumentHelp("A folder of fixture files: negotiate on every camera in it, one row each (instead of --device).", valueName: "dir"))
    var corpus: String?
    @Option(name: .shortAndLong, help: "Target size (or --constraints).") var size: FrameSize?
    @Option(help: ArgumentHelp(constraintsHelp, valueName: "json"), transform: parseConstraints) var constraints: VideoConstraints?
    @Option(help: ArgumentHelp(fpsHelp, valueName: "fps"), transform: parseRateLimit) var fpsLimit: Fraction = 30
    @Option(help: ArgumentHelp(pixelFormatHelp + ".", valueName: fourCCs), transform: parsePixelFormats)
    var pixelFormat: [PixelFormat]?
    @Flag(help: "Print exactly one JSON object: pixelFormat, width, height, fps (with --explain: selection and candidates).") var json = false
    @Flag(help: "List every format entry with the rule that kept or rejected it (the chosen one marked *).") var explain = false
    @Option(
        help: ArgumentHelp(
            "What another stack would pick for --size, --fps-limit and --pixel-format: \(SelectionPolicy.allCases.map(\.rawValue).joined(separator: ", ")), a list of them, or all (side by side, those that differ from default marked *).",
            valueName: "name[,name…]"), transform: parsePolicies) var policy: [SelectionPolicy]?
    @Option(
        help: ArgumentHelp(
            "GStreamer's caps filter for --policy gstreamer or all (default: video/x-raw,width=W,height=H[,format=…]; add framerate=N/1 to demand a rate).",
            valueName: "caps"), transform: parseCaps) var caps: GStreamerCaps?

    func validate() throws {
        try checkSize(size, "--size")
        guard (size == nil) != (constraints == nil) else { throw ValidationError("give --size or --constraints (one of them)") }
        if constraints != nil && explain { throw ValidationError("--explain explains --size negotiation; with --constraints the choice is printed") }
        if policy != nil && (constraints != nil || explain) { throw ValidationError("--policy takes --size (not --constraints or --explain)") }
        if caps != nil && policy == nil { throw ValidationError("--caps is GStreamer's filter: give it with --policy gstreamer or all") }
        guard (device == nil) != (corpus == nil) else { throw ValidationError("give --device or --corpus (one of them)") }
        if corpus != nil && explain { throw ValidationError("--explain explains one camera; give --device instead of --corpus") }
    }

    func execute() async throws {
        if let corpus { return try printCorpus(corpus) }
        guard let device else { return }
        let capturer = makeCapturer(), camera = try capturer.device(device)
        if let policy, let size {
            let formats = try capturer.supportedFormats(for: camera)
            let request = PolicyRequest(size: size, fps: fpsLimit, pixelFormats: pixelFormat ?? [], caps: caps)
            let picks = policy.map { $0.select(from: formats, request: request) }
            let reference = SelectionPolicy.default.select(from: formats, request: request).mode
            print(json ? FormatListing.json(picks, request: request, reference: reference) : FormatListing.text(picks, reference: reference))
            if picks.count == 1, let p = picks.first, p.selection == nil {
                throw CaptureError(.noConvertibleFormat, "\(camera.path): \(p.policy) would not start: \(p.reason)")
            }
            return
        }
        if let constraints {
            let chosen = try FormatSelector.select(from: try capturer.supportedFormats(for: camera), constraints: constraints, fpsLimit: fpsLimit)
            if json {
                var pairs: [(String, Any)] = [
                    ("pixelFormat", chosen.selection.pixelFormat.fourcc), ("width", chosen.selection.size.width),
                    ("height", chosen.selection.size.height), ("fps", chosen.selection.fps), ("fitness", chosen.fitness),
                ]
                if let o = chosen.outputSize { pairs += [("outputWidth", o.width), ("outputHeight", o.height)] }
                print(jsonObject(pairs))
            } else {
                print(FormatListing.text(chosen.selection) + (chosen.outputSize.map { " → \($0) (crop-and-scale)" } ?? ""))
            }
            return
        }
        guard let size else { return }
        if explain {
            let formats = try capturer.supportedFormats(for: camera)
            let verdicts = FormatSelector.explain(from: formats, target: size, fpsLimit: fpsLimit, pixelFormats: pixelFormat ?? [])
            print(json ? FormatListing.json(verdicts) : FormatListing.text(verdicts))
            if !verdicts.contains(where: \.chosen) { throw CaptureError(.noConvertibleFormat, "\(camera.path): no format entry can be chosen") }
            return
        }
        let sel = try capturer.selectFormat(for: camera, targetSize: size, fpsLimit: fpsLimit, pixelFormats: pixelFormat ?? [])
        print(json ? FormatListing.json(sel) : FormatListing.text(sel))
    }

    /// One row per camera of the corpus folder; a camera with nothing to pick is a row saying why, not an error.
    private func printCorpus(_ directory: String) throws {
        let cameras = try CameraCorpus.load(directory: directory)
        if let policy, let size {
            let request = PolicyRequest(size: size, fps: fpsLimit, pixelFormats: pixelFormat ?? [], caps: caps)
            let rows = CameraCorpus.policyRows(cameras, policies: policy, request: request)
            return print(json ? CameraCorpus.json(rows, request: request) : CameraCorpus.text(rows), terminator: "")
        }
        let picks =
            if let constraints {
                CameraCorpus.picks(cameras, constraints: constraints, fpsLimit: fpsLimit)
            } else if let size {
                CameraCorpus.picks(cameras, target: size, fpsLimit: fpsLimit, pixelFormats: pixelFormat ?? [])
            } else { [CameraCorpus.Pick]() }
        print(json ? CameraCorpus.json(picks) : CameraCorpus.text(picks), terminator: "")
    }
}

/// Writes `text` to stderr at once (progress, events and errors show up as they happen).
func printError(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }

/// Prints a line and flushes it (events must show up at once, also through a pipe).
func printFlushed(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

struct Controls: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, read and set a camera's controls (in the layout of `v4l2-ctl --list-ctrls-menus`).",
        discussion: """
            NAME is the control's v4l2-ctl name (brightness, power_line_frequency), a well-known alias (exposure_absolute) or its id \
            (0x00980900). VALUE is a number, a menu entry's name ("50 Hz") or true/false. --set values are applied in order and what \
            the camera applied is printed; a value out of range, a read-only or an inactive control is an error naming both.
            """)
    @Option(name: .shortAndLong, help: "Device: \(deviceHelp) (default: the first camera, else fixture:uvc-webcam).") var device: String?
    @Option(
        name: .customLong("set"), help: ArgumentHelp("Set a control (repeatable, applied in order).", valueName: "name=value"),
        transform: parsing(CameraControlSetting.init(parsing:), "--set expects NAME=VALUE")) var settings: [CameraControlSetting] = []
    @Option(name: .customLong("get"), help: ArgumentHelp("Print one control's value (repeatable).", valueName: "name")) var gets: [String] = []
    @Flag(help: "Print JSON instead.") var json = false

    func execute() async throws {
        let capturer = makeCapturer(), d = try capturer.device(device ?? defaultCameraSpec)
        if settings.isEmpty && gets.isEmpty {
            let all = try capturer.controls(for: d)
            // An empty listing is said on stderr (stdout stays what scripts parse: nothing, or `[]` with --json).
            if all.isEmpty { printError("\(d.path) offers no controls\n") }
            return print(json ? ControlListing.json(all) : ControlListing.text(all), terminator: "")
        }
        // Set in order, then read: what the camera applied.
        let out = try capturer.setControls(settings, on: d) + gets.map { try capturer.control($0, of: d) }
        if json { print(ControlListing.json(out), terminator: "") } else { for c in out { print("\(c.name): \(ControlListing.valueText(c))") } }
    }
}
