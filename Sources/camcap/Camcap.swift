import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import V4L2Capture
import H264
import SystemIO

@main
struct Camcap: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "camcap",
        abstract: "Find cameras, negotiate formats, capture, convert and record H.264 on Linux.",
        discussion: """
            DEVICES are V4L2 nodes (/dev/video0), built-in fixture cameras (fixture:NAME, see `camcap devices`), \
            or the path of a fixture file: a JSON camera description or the text of `v4l2-ctl --list-formats-ext`.

            Negotiation picks the size closest to the target, then the highest frame rate up to the limit, \
            then the cheapest conversion to I420.
            """,
        version: versionText,
        subcommands: [
            Devices.self, Formats.self, Controls.self, Select.self, Preview.self, Record.self, Stream.self, Serve.self, Publish.self, RTSP.self,
        ])
}

let versionText = "camcap 0.1.0\n\(libyuvCPUFlags)\n\(H264Encoder.openH264Version)"

extension FrameSize: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public var defaultValueDescription: String { description }
}

func fail(_ error: any Error) -> Never {
    printError("camcap: error: \(error)\n")
    ProcessExit.now(1)
}

/// A command whose failures end it as "camcap: error: …" with exit status 1 (`fail`), not as a usage error
/// (a `ValidationError` thrown while it runs too: the message alone).
protocol CamcapCommand: AsyncParsableCommand {
    func execute() async throws
}

extension CamcapCommand {
    func run() async throws {
        do { try await execute() } catch { fail(error) }
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List cameras: V4L2 devices and the built-in fixture cameras.")
    @Flag(help: "Print JSON (one object per device in an array).") var json = false
    @Flag(help: "Then keep watching /dev and print cameras as they are plugged in or removed (Ctrl-C ends).") var watch = false

    func run() async throws {
        let capturer = makeCapturer()
        let devices = capturer.devices()
        print(json ? DeviceListing.json(devices) : DeviceListing.text(devices), terminator: "")
        if watch {
            StandardStreams.flush()
            await watchDevices(capturer)
        }
    }
}

struct Formats: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a device's formats, sizes and frame intervals (in the style of `v4l2-ctl --list-formats-ext`).")
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file.") var device: String
    @Flag(help: "Print JSON instead.") var json = false

    func execute() async throws {
        let capturer = makeCapturer()
        let d = try capturer.device(device)
        let formats = try capturer.supportedFormats(for: d)
        print(json ? FormatListing.json(formats) : FormatListing.text(formats), terminator: "")
    }
}

struct Select: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which format, size and frame rate negotiation picks for a target size.",
        discussion:
            "Rules: closest size (|w-W| + |h-H|), then the highest fps up to the limit (else the lowest above it), then the cheapest conversion to I420."
    )
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file.") var device: String
    @Option(name: .shortAndLong, help: "Target size.") var size: FrameSize
    @Option(help: ArgumentHelp("Frame-rate limit: 30, 12.5, 29.97 (= 30000/1001) or 30000/1001.", valueName: "fps"), transform: parseRateLimit)
    var fpsLimit: Fraction = 30
    @Option(
        help: ArgumentHelp("Pixel formats wanted, preferred in this order (e.g. MJPG or YUYV,NV12).", valueName: "FOURCC[,FOURCC…]"),
        transform: parsePixelFormats)
    var pixelFormat: [PixelFormat]?
    @Flag(help: "Print exactly one JSON object: pixelFormat, width, height, fps.") var json = false

    func validate() throws {
        try checkSize(size, "--size")
    }

    func execute() async throws {
        let capturer = makeCapturer()
        let d = try capturer.device(device)
        let sel = try capturer.selectFormat(for: d, targetSize: size, fpsLimit: fpsLimit, pixelFormats: pixelFormat ?? [])
        print(json ? FormatListing.json(sel) : FormatListing.text(sel))
    }
}

/// Writes `text` to stderr at once (progress, events and errors show up as they happen).
func printError(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }

/// Prints a line and flushes it (events must show up at once, also through a pipe).
func printFlushed(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// Prints cameras as they come and go until Ctrl-C (the event stream is awaited: no thread is blocked).
func watchDevices(_ capturer: CameraVideoCapturer) async {
    let monitor: HotplugMonitor
    do { monitor = try capturer.watchDevices() } catch { fail(error) }
    printFlushed("watching /dev for cameras (Ctrl-C to stop)")
    for await event in monitor.events {
        switch event {
        case .connected(let path):
            let name = (try? capturer.device(path).name) ?? "?"
            printFlushed("connected:    \(path)\t\(name)")
        case .disconnected(let path): printFlushed("disconnected: \(path)")
        }
    }
}
