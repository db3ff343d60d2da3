import CV4L2
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// A V4L2 memory-to-memory encoder node, as `M2MEncoderDiscovery` found it: a node with
/// `V4L2_CAP_VIDEO_M2M` (or `_MPLANE`) whose OUTPUT queue takes raw pictures and whose CAPTURE queue gives a coded
/// format (H.264 on a board's encoder, FWHT on the kernel's vicodec).
public struct M2MEncoderNode: Sendable, Equatable {
    /// One format of a queue: the FourCC, the driver's description and the sizes it lists (nil when it lists none).
    public struct Format: Sendable, Equatable {
        /// The FourCC.
        public let pixelFormat: PixelFormat
        /// The driver's description (`VIDIOC_ENUM_FMT`).
        public let description: String
        /// True for a coded format (`V4L2_FMT_FLAG_COMPRESSED`).
        public let isCompressed: Bool
        /// The sizes `VIDIOC_ENUM_FRAMESIZES` gives, nil when it gives none.
        public let sizes: FrameSizeRange?
        /// A format as a driver lists it.
        public init(pixelFormat: PixelFormat, description: String, isCompressed: Bool, sizes: FrameSizeRange?) {
            self.pixelFormat = pixelFormat
            self.description = description
            self.isCompressed = isCompressed
            self.sizes = sizes
        }
    }
    /// The node (`/dev/video11`).
    public let path: String
    /// The driver's card name (`bcm2835-codec-encode`, `vicodec`).
    public let card: String
    /// The driver's name.
    public let driver: String
    /// True when the node uses the multi-planar API (`V4L2_CAP_VIDEO_M2M_MPLANE`).
    public let isMultiPlanar: Bool
    /// What its OUTPUT queue takes (raw pictures), in the driver's order.
    public let output: [Format]
    /// What its CAPTURE queue gives (coded frames), in the driver's order.
    public let capture: [Format]

    /// A node with these queues.
    public init(path: String, card: String, driver: String, isMultiPlanar: Bool, output: [Format], capture: [Format]) {
        self.path = path
        self.card = card
        self.driver = driver
        self.isMultiPlanar = isMultiPlanar
        self.output = output
        self.capture = capture
    }

    /// The raw formats it encodes from.
    public var rawFormats: [PixelFormat] { output.filter { !$0.isCompressed }.map(\.pixelFormat) }
    /// The coded formats it gives.
    public var codedFormats: [PixelFormat] { capture.filter(\.isCompressed).map(\.pixelFormat) }
    /// True when it gives H.264.
    public var encodesH264: Bool { codedFormats.contains(.h264) }
    /// What it would encode to: H.264 when it gives it, else its first coded format (vicodec's FWHT).
    public var codedFormat: PixelFormat { encodesH264 ? .h264 : codedFormats.first ?? .h264 }
    /// One line: "/dev/video4 (vicodec, vicodec): takes YU12, NV12, … (28); gives FWHT".
    public var summary: String {
        let raw = rawFormats.map(\.description)
        let shown = raw.count > 8 ? raw.prefix(8).joined(separator: ", ") + ", … (\(raw.count))" : raw.joined(separator: ", ")
        return
            "\(path) (\(card), \(driver)\(isMultiPlanar ? ", multi-planar" : "")): takes \(shown); gives \(codedFormats.map(\.description).joined(separator: ", "))"
    }
}

/// Finds the V4L2 memory-to-memory encoders among `/dev/videoN` (`VIDIOC_QUERYCAP` for `V4L2_CAP_VIDEO_M2M` or
/// `_MPLANE`, then `VIDIOC_ENUM_FMT` on both queues: raw formats on OUTPUT, coded ones on CAPTURE). A decoder (coded
/// on OUTPUT) or a scaler (raw on both) is not an encoder.
///
/// ```swift
/// import V4L2Capture
///
/// let h264 = M2MEncoderDiscovery().encoders().first { $0.encodesH264 }
/// ```
public struct M2MEncoderDiscovery: Sendable {
    /// The directory scanned for `videoN` nodes.
    public let devDirectory: String
    let kernel: any V4L2Kernel

    /// Discovery under `devDirectory` (`/dev`).
    public init(devDirectory: String = "/dev") { self.init(kernel: SystemV4L2Kernel(), devDirectory: devDirectory) }

    /// Discovery whose system calls go to `kernel` (tests play the driver).
    package init(kernel: any V4L2Kernel, devDirectory: String = "/dev") {
        self.kernel = kernel
        self.devDirectory = devDirectory
    }

    /// Every encoder node, in numeric order (H.264 ones are not moved first: `preferred()` does that).
    public func encoders() -> [M2MEncoderNode] {
        V4L2DeviceProvider(kernel: kernel, devDirectory: devDirectory).nodePaths().compactMap { try? probe($0) }
    }

    /// The encoder `--encoder auto` takes: the first that gives H.264; nil when none does.
    public func firstH264() -> M2MEncoderNode? { encoders().first { $0.encodesH264 } }

    /// The first encoder, one that gives H.264 preferred; nil when there is none.
    public func preferred() -> M2MEncoderNode? {
        let all = encoders()
        return all.first { $0.encodesH264 } ?? all.first
    }

    /// The node at `path` as an encoder. A node that cannot be opened, is not a memory-to-memory device, or is not
    /// an encoder (raw formats on OUTPUT, coded ones on CAPTURE) is an error naming it.
    public func probe(_ path: String) throws(CaptureError) -> M2MEncoderNode {
        let node = try V4L2Node(path: path, kernel: kernel)
        defer { node.close() }
        let caps = try node.capabilities()
        let multi = try node.memoryToMemoryIsMultiPlanar(caps)
        let output = try formats(node, multi ? CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE : CV4L2_BUF_TYPE_VIDEO_OUTPUT)
        let capture = try formats(node, multi ? CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : CV4L2_BUF_TYPE_VIDEO_CAPTURE)
        let encoder = M2MEncoderNode(path: path, card: caps.card, driver: caps.driver, isMultiPlanar: multi, output: output, capture: capture)
        guard !encoder.rawFormats.isEmpty, !encoder.codedFormats.isEmpty else {
            throw CaptureError(
                .notACaptureDevice,
                "\(path) (\(caps.card)) is a memory-to-memory device but not an encoder: it takes \(output.map(\.pixelFormat.description).joined(separator: ", ")) and gives \(capture.map(\.pixelFormat.description).joined(separator: ", "))",
                device: path)
        }
        return encoder
    }

    /// `VIDIOC_ENUM_FMT` on `type`, with each format's sizes (`VIDIOC_ENUM_FRAMESIZES`, where the driver has it).
    private func formats(_ node: V4L2Node, _ type: UInt32) throws(CaptureError) -> [M2MEncoderNode.Format] {
        var out: [M2MEncoderNode.Format] = []
        let end = try node.enumerate(.enumFormat) { index in
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = type
            return desc
        } each: { desc throws(CaptureError) in
            let pf = PixelFormat(rawValue: desc.pixelformat)
            var sizes: FrameSizeRange?
            _ = try node.enumerate(.enumFrameSizes) { index in
                var fs = v4l2_frmsizeenum()
                fs.index = index
                fs.pixel_format = desc.pixelformat
                return fs
            } each: { fs in
                let s = fs.stepwise
                switch fs.type {
                case V4L2_FRMSIZE_TYPE_DISCRETE.rawValue:
                    sizes = .discrete(FrameSize(width: Int(fs.discrete.width), height: Int(fs.discrete.height)))
                case V4L2_FRMSIZE_TYPE_CONTINUOUS.rawValue:
                    sizes = .continuous(
                        min: FrameSize(width: Int(s.min_width), height: Int(s.min_height)),
                        max: FrameSize(width: Int(s.max_width), height: Int(s.max_height)))
                default:
                    sizes = .stepwise(
                        min: FrameSize(width: Int(s.min_width), height: Int(s.min_height)),
                        max: FrameSize(width: Int(s.max_width), height: Int(s.max_height)),
                        step: FrameSize(width: Int(max(1, s.step_width)), height: Int(max(1, s.step_height))))
                }
                return false // the first entry is enough to say what it takes
            }
            let name = cString(desc.description)
            out.append(
                .init(
                    pixelFormat: pf, description: name.isEmpty ? pf.name : name, isCompressed: desc.flags & CV4L2_FMT_FLAG_COMPRESSED != 0,
                    sizes: sizes))
            return true
        }
        if let end, end.errno.rawValue != EINVAL { throw node.io.error(end.errno, "VIDIOC_ENUM_FMT index \(end.index)") }
        return out
    }
}

extension V4L2Node {
    /// Whether this memory-to-memory node uses the multi-planar API (`V4L2_CAP_VIDEO_M2M_MPLANE`) or not
    /// (`V4L2_CAP_VIDEO_M2M`); a node that is neither is an error naming it. `caps`: QUERYCAP's answer, asked when nil.
    func memoryToMemoryIsMultiPlanar(_ given: V4L2Capabilities? = nil) throws(CaptureError) -> Bool {
        let caps: V4L2Capabilities
        if let given { caps = given } else { caps = try capabilities() }
        if caps.deviceCaps & CV4L2_CAP_VIDEO_M2M_MPLANE != 0 { return true }
        if caps.deviceCaps & CV4L2_CAP_VIDEO_M2M != 0 { return false }
        throw CaptureError(
            .notACaptureDevice, "\(path) (\(caps.card)) is not a memory-to-memory device (no V4L2_CAP_VIDEO_M2M or _MPLANE)", device: path)
    }
}
