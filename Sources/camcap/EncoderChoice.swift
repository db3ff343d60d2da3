import ArgumentParser
import CapturePipeline
import FixtureCameras
import H264
import V4L2Capture
import VideoCapture

/// `--encoder`: `auto` (a V4L2 memory-to-memory encoder that gives H.264, else OpenH264), `openh264`, or
/// `v4l2m2m[:/dev/videoN]` (`v4l2m2m:fixture:bcm2835[?OPTIONS]`: the simulated Raspberry Pi encoder).
enum EncoderChoice: Equatable {
    case auto, openH264
    /// A V4L2 memory-to-memory encoder: that node, or the first one found (H.264 preferred).
    case v4l2m2m(path: String?)
    /// The simulated encoder `v4l2m2m:fixture:SPEC` names (`FixtureM2MDevice(spec:)`: `bcm2835[?OPTIONS]`).
    case fixture(spec: String)

    init?(parsing text: String) {
        switch text {
        case "auto": self = .auto
        case "openh264": self = .openH264
        case "v4l2m2m": self = .v4l2m2m(path: nil)
        default:
            guard text.hasPrefix("v4l2m2m:"), text.count > 8 else { return nil }
            let path = String(text.dropFirst(8))
            self = path.hasPrefix("fixture:") ? .fixture(spec: String(path.dropFirst(8))) : .v4l2m2m(path: path)
        }
    }

    /// As given on the command line.
    var argument: String {
        switch self {
        case .auto: "auto"
        case .openH264: "openh264"
        case .v4l2m2m(let path): path.map { "v4l2m2m:\($0)" } ?? "v4l2m2m"
        case .fixture(let spec): "v4l2m2m:fixture:\(spec)"
        }
    }
}

extension EncoderOptions {
    /// The simulated encoder `--encoder v4l2m2m:fixture:NAME[?OPTIONS]` names (`FixtureM2MDevice`), nil otherwise.
    func fixtureEncoder() throws -> FixtureM2MDevice? {
        guard case .fixture(let spec) = encoderChoice else { return nil }
        do throws(CaptureError) { return try FixtureM2MDevice(spec: spec) } catch {
            throw ValidationError("--encoder \(encoderChoice.argument): \(error.message)")
        }
    }

    /// The backend `--encoder` names for `command` (`encoderNode(for:)`, or the simulated encoder), each hardware
    /// encoder behind the watchdog (`ResilientEncoder`).
    func backend(for command: String) throws -> EncoderBackend {
        if let fixture = try fixtureEncoder() { return fixtureBackend(fixture) }
        return camcapBackend(try encoderNode(for: command))
    }

    /// The memory-to-memory encoder `--encoder` names for `command`, nil for OpenH264. `auto` takes the first that
    /// gives H.264 (none on a machine without one: OpenH264, as before). A node that is not an encoder, no encoder
    /// at all, or one whose coded format is not H.264 for a command other than record, is refused naming the value.
    func encoderNode(for command: String, discovery: M2MEncoderDiscovery = M2MEncoderDiscovery()) throws -> M2MEncoderNode? {
        let given = "--encoder \(encoderChoice.argument)"
        switch encoderChoice {
        case .openH264, .fixture: return nil // the simulated encoder: `fixtureEncoder()`, `backend(for:)`
        case .auto: return discovery.firstH264()
        case .v4l2m2m(let path):
            let node: M2MEncoderNode
            if let path {
                do { node = try discovery.probe(path) } catch { throw ValidationError("\(given): \(error.message)") }
            } else {
                guard let found = discovery.preferred() else {
                    throw ValidationError(
                        "\(given): no V4L2 memory-to-memory encoder found (no \(discovery.devDirectory)/videoN with V4L2_CAP_VIDEO_M2M whose CAPTURE queue gives a coded format); use --encoder openh264 or auto"
                    )
                }
                node = found
            }
            guard node.encodesH264 || command == "record" else {
                throw ValidationError(
                    "\(given): \(node.path) encodes \(node.codedFormat); \(command) needs H.264 (only record writes other coded formats)")
            }
            return node
        }
    }
}

/// The backend that runs `node`: pictures copied in (`importing` nil) or the camera's buffers imported in that format,
/// behind the watchdog: an encoder with no output for 1 s is restarted, and after 3 failures OpenH264 takes over
/// (for H.264; an FWHT recording has no fallback and fails by name).
func m2mBackend(_ node: M2MEncoderNode, importing: PixelFormat?) -> EncoderBackend {
    let name = "V4L2 M2M \(node.path)"
    let factory = { (importing: PixelFormat?) -> ResilientEncoder.Factory in
        { settings, control in
            let e = try V4L2M2MEncoder(path: node.path, codedFormat: node.codedFormat, settings: settings, control: control, importing: importing)
            e.timeoutMs = 1000 // the watchdog's stall time: the encoder's own timeout is the stall
            return e
        }
    }
    guard node.encodesH264 else { return EncoderBackend(name: name, make: factory(importing)) }
    // A camera buffer the encoder refuses (memory it cannot read) switches to copying pictures in, not a failure.
    let (primary, copying) = (factory(importing), importing.map { _ in factory(nil) })
    return EncoderBackend(name: name) { settings, control in
        try ResilientEncoder(
            settings: settings, control: control, configuration: .init(name: "v4l2m2m \(node.path)"), primary: primary, copying: copying)
    }
}

/// The simulated Raspberry Pi encoder behind the watchdog, as a real one is.
func fixtureBackend(_ device: FixtureM2MDevice) -> EncoderBackend {
    let primary = device.factory()
    return EncoderBackend(name: device.summaryName) { settings, control in
        try ResilientEncoder(settings: settings, control: control, configuration: .init(name: device.summaryName), primary: primary)
    }
}

/// The backend a command other than record runs: OpenH264, or `node` with pictures copied in.
func camcapBackend(_ node: M2MEncoderNode?) -> EncoderBackend { node.map { m2mBackend($0, importing: nil) } ?? .openH264 }

/// Whether `session`'s camera frames can go to `node` as they are (DMA-BUF import): a V4L2 camera in a raw format
/// the encoder takes and the library imports (`V4L2M2MEncoder.importableFormats`: `YU12`, whose picture is the
/// camera's buffer, and `NV12`, whose converted picture carries the camera's buffer beside it).
func importableFormat(_ session: CaptureSession, _ node: M2MEncoderNode) -> PixelFormat? {
    let format = session.selection.pixelFormat
    guard session.device.path.hasPrefix("/dev/"), session.selection.frameKind == .picture, importableFormats(node).contains(format) else {
        return nil
    }
    return format
}

/// The camera formats whose buffers `node` can take as they are: those the library imports and the node's OUTPUT
/// queue takes (what the camera exports, when it streams in one of them).
func importableFormats(_ node: M2MEncoderNode) -> [PixelFormat] { V4L2M2MEncoder.importableFormats.filter(node.rawFormats.contains) }

extension M2MEncoderNode.Format {
    /// "YU12 (Planar YUV 4:2:0), 640x360 - 4096x2160 step 8x8".
    var line: String {
        "\(pixelFormat) (\(description))\(isCompressed ? ", compressed" : "")\(sizes.map { ": \($0)" } ?? "")"
    }
}

/// `camcap formats -d` on an encoder node: what its OUTPUT queue takes and its CAPTURE queue gives.
func encoderFormatsText(_ node: M2MEncoderNode) -> String {
    var text = "\(node.path): memory-to-memory encoder (\(node.card), \(node.driver)\(node.isMultiPlanar ? ", multi-planar" : ""))\n"
    text += "OUTPUT (raw pictures in):\n" + node.output.map { "  \($0.line)\n" }.joined()
    text += "CAPTURE (coded frames out):\n" + node.capture.map { "  \($0.line)\n" }.joined()
    return text
}

/// `camcap devices`' section for encoders, empty when there is none (the listing is then as it was).
func encoderDevicesText(_ nodes: [M2MEncoderNode]) -> String {
    guard !nodes.isEmpty else { return "" }
    return "\nEncoders (V4L2 memory-to-memory; --encoder v4l2m2m:PATH):\n" + nodes.map { "  \($0.summary)\n" }.joined()
}

/// `camcap formats -d --json` on an encoder node.
func encoderFormatsJSON(_ node: M2MEncoderNode) -> String {
    func formats(_ list: [M2MEncoderNode.Format]) -> [Any] {
        list.map { f -> [(String, Any)] in
            [
                ("pixelFormat", f.pixelFormat.fourcc), ("description", f.description), ("compressed", f.isCompressed),
                ("sizes", f.sizes.map { "\($0)" } ?? ""),
            ]
        }
    }
    return jsonObject([
        ("path", node.path), ("card", node.card), ("driver", node.driver), ("kind", "m2m-encoder"), ("multiPlanar", node.isMultiPlanar),
        ("output", formats(node.output)), ("capture", formats(node.capture)),
    ])
}
