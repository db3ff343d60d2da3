import CV4L2
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif
import SystemIO

/// What VIDIOC_QUERYCAP says about a node.
struct V4L2Capabilities {
    var driver: String
    var card: String
    var busInfo: String
    var deviceCaps: UInt32
    /// A single-planar capture node (`V4L2_CAP_VIDEO_CAPTURE`).
    var isSinglePlanar: Bool { deviceCaps & CV4L2_CAP_VIDEO_CAPTURE != 0 }
    /// A multi-planar capture node (`V4L2_CAP_VIDEO_CAPTURE_MPLANE`, as SoC camera drivers are) that is not also
    /// single-planar: its formats, buffers and parameters use the multi-planar buffer type.
    var isMultiPlanar: Bool { !isSinglePlanar && deviceCaps & CV4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 }
    var isVideoCapture: Bool { (isSinglePlanar || isMultiPlanar) && deviceCaps & CV4L2_CAP_STREAMING != 0 }
    /// The buffer type of every format, parameter and buffer call on this node.
    var bufferType: UInt32 { isMultiPlanar ? CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : CV4L2_BUF_TYPE_VIDEO_CAPTURE }
}

func cString<T>(_ tuple: T) -> String {
    withUnsafeBytes(of: tuple) { raw in
        let bytes = raw.prefix { $0 != 0 }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// An open V4L2 node: queries and format enumeration. Closed explicitly or on deinit.
final class V4L2Node {
    let path: String
    let io: V4L2IO
    private(set) var fd: Int32

    init(path: String, kernel: any V4L2Kernel) throws(CaptureError) {
        self.path = path
        self.io = V4L2IO(kernel: kernel, path: path)
        let (fd, e) = kernel.open(path)
        guard fd >= 0 else {
            throw io.error(Errno(e), "open")
        }
        self.fd = fd
    }

    deinit { close() }

    func close() {
        if fd >= 0 {
            io.kernel.close(fd)
            fd = -1
        }
    }

    func capabilities() throws(CaptureError) -> V4L2Capabilities {
        var cap = v4l2_capability()
        try io.ioctl(fd, .querycap, &cap)
        let caps = cap.capabilities & CV4L2_CAP_DEVICE_CAPS != 0 ? cap.device_caps : cap.capabilities
        return V4L2Capabilities(driver: cString(cap.driver), card: cString(cap.card), busInfo: cString(cap.bus_info), deviceCaps: caps)
    }

    /// ENUM_FMT / ENUM_FRAMESIZES / ENUM_FRAMEINTERVALS, native formats only (emulated ones skipped); on a
    /// multi-planar node with the multi-planar buffer type (its single-buffer and separate-plane formats alike).
    func formats() throws(CaptureError) -> [CaptureFormat] {
        let type = try capabilities().bufferType
        var out: [CaptureFormat] = []
        let end = try enumerate(.enumFormat) { index in
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = type
            return desc
        } each: { desc throws(CaptureError) in
            if desc.flags & CV4L2_FMT_FLAG_EMULATED != 0 { return true }
            let pf = PixelFormat(rawValue: desc.pixelformat)
            var name = cString(desc.description)
            if name.isEmpty { name = pf.name }
            // A refusal ends the list (EINVAL); drivers without the ioctl list no sizes.
            _ = try enumerate(.enumFrameSizes) { index in
                var fs = v4l2_frmsizeenum()
                fs.index = index
                fs.pixel_format = desc.pixelformat
                return fs
            } each: { fs throws(CaptureError) in
                switch fs.type {
                case V4L2_FRMSIZE_TYPE_DISCRETE.rawValue:
                    let size = FrameSize(width: Int(fs.discrete.width), height: Int(fs.discrete.height))
                    out.append(
                        CaptureFormat(
                            pixelFormat: pf, size: .discrete(size), intervals: try intervals(desc.pixelformat, size), formatDescription: name))
                default:
                    let s = fs.stepwise
                    let lo = FrameSize(width: Int(s.min_width), height: Int(s.min_height)),
                        hi = FrameSize(width: Int(s.max_width), height: Int(s.max_height))
                    let range: FrameSizeRange =
                        fs.type == V4L2_FRMSIZE_TYPE_CONTINUOUS.rawValue
                        ? .continuous(min: lo, max: hi)
                        : .stepwise(min: lo, max: hi, step: FrameSize(width: Int(max(1, s.step_width)), height: Int(max(1, s.step_height))))
                    out.append(CaptureFormat(pixelFormat: pf, size: range, intervals: nil, formatDescription: name))
                }
                return fs.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue // a range is the whole list
            }
            return true
        }
        // EINVAL is the end of the list.
        if let end, end.errno.rawValue != EINVAL { throw io.error(end.errno, "VIDIOC_ENUM_FMT index \(end.index)") }
        return hasDVTimings() ? receiverFormats(out) : out
    }

    func intervals(_ fourcc: UInt32, _ size: FrameSize) throws(CaptureError) -> FrameIntervals? {
        var list: [Fraction] = []
        var range: FrameIntervals?, ranged = false
        _ = try enumerate(.enumFrameIntervals) { index in
            var fi = v4l2_frmivalenum()
            fi.index = index
            fi.pixel_format = fourcc
            fi.width = UInt32(size.width)
            fi.height = UInt32(size.height)
            return fi
        } each: { fi in
            if fi.type == V4L2_FRMIVAL_TYPE_DISCRETE.rawValue {
                if fi.discrete.numerator > 0 && fi.discrete.denominator > 0 {
                    list.append(Fraction(Int64(fi.discrete.numerator), Int64(fi.discrete.denominator)))
                }
                return true
            }
            (range, ranged) = (Self.intervalRange(fi), true) // a range is the whole list
            return false
        }
        if ranged { return range }
        return list.isEmpty ? nil : .discrete(list)
    }

    /// A stepwise or continuous `VIDIOC_ENUM_FRAMEINTERVALS` entry as a range; nil for one with a zero bound.
    private static func intervalRange(_ fi: v4l2_frmivalenum) -> FrameIntervals? {
        let s = fi.stepwise
        guard s.min.denominator > 0, s.max.denominator > 0, s.min.numerator > 0 else { return nil }
        let lo = Fraction(Int64(s.min.numerator), Int64(s.min.denominator)), hi = Fraction(Int64(s.max.numerator), Int64(s.max.denominator))
        if fi.type == V4L2_FRMIVAL_TYPE_CONTINUOUS.rawValue || s.step.numerator == 0 || s.step.denominator == 0 {
            return .continuous(min: lo, max: hi)
        }
        return .stepwise(min: lo, max: hi, step: Fraction(Int64(s.step.numerator), Int64(s.step.denominator)))
    }

    /// Walks a V4L2 enumeration (`VIDIOC_ENUM_FMT`, `VIDIOC_ENUM_FRAMESIZES`, `VIDIOC_ENUM_FRAMEINTERVALS`): asks for
    /// the argument `request` makes for index 0, 1, 2… and gives each entry the driver fills to `each`, until `each`
    /// returns false (nil is returned) or the driver refuses an index (its errno and the index are returned: EINVAL
    /// is the end of the list).
    func enumerate<Entry>(
        _ op: IOCTL, _ request: (UInt32) -> Entry, each: (Entry) throws(CaptureError) -> Bool
    ) throws(CaptureError) -> (errno: Errno, index: UInt32)? {
        var index: UInt32 = 0
        while true {
            var entry = request(index)
            if let e = io.errnoOf(fd, op, &entry) { return (e, index) }
            index += 1
            guard try each(entry) else { return nil }
        }
    }
}

/// Real cameras: every `/dev/video*` node that captures video, single-planar or multi-planar (metadata and
/// mem2mem nodes skipped).
///
/// Devices are opened through libv4l2 with its format emulation off, so only the camera's native formats are
/// listed and negotiated. Every call opens the node for as long as it needs it; the provider itself holds no
/// descriptor and may be shared between capturers and threads.
public final class V4L2DeviceProvider: CaptureDeviceProvider {
    /// The system calls it makes (the real kernel; tests substitute their own).
    package let kernel: any V4L2Kernel
    /// The directory scanned for `videoN` nodes (`/dev`).
    public let devDirectory: String
    /// The buffer and timeout settings of every stream it opens.
    public let configuration: V4L2Stream.Configuration
    /// Position and rotation for cameras that report none (or report them wrong), keyed by node path
    /// (`/dev/video0`), unique id (`/dev/v4l/by-id/…`) or name (the card, `HD Pro Webcam C920`).
    public let overrides: [String: SensorOverride]

    /// A provider for the cameras under `devDirectory`, streaming with `configuration`, with `overrides` for
    /// cameras that misreport their position or rotation.
    public convenience init(
        devDirectory: String = "/dev", configuration: V4L2Stream.Configuration = .init(), overrides: [String: SensorOverride] = [:]
    ) {
        self.init(kernel: SystemV4L2Kernel(), devDirectory: devDirectory, configuration: configuration, overrides: overrides)
    }

    /// A provider whose system calls go to `kernel` (tests play the driver with it).
    package init(
        kernel: any V4L2Kernel, devDirectory: String = "/dev", configuration: V4L2Stream.Configuration = .init(),
        overrides: [String: SensorOverride] = [:]
    ) {
        self.kernel = kernel
        self.devDirectory = devDirectory
        self.configuration = configuration
        self.overrides = overrides
    }

    func override(path: String, uniqueID: String, name: String) -> SensorOverride? {
        overrides[path] ?? overrides[uniqueID] ?? overrides[name]
    }

    /// `/dev/videoN` paths in numeric order.
    func nodePaths() -> [String] {
        let names = (try? FileSystem.entries(devDirectory)) ?? []
        return names.filter { $0.hasPrefix("video") && Int($0.dropFirst(5)) != nil }
            .sorted { Int($0.dropFirst(5))! < Int($1.dropFirst(5))! }
            .map { devDirectory + "/" + $0 }
    }

    public func devices() -> [CaptureDevice] {
        nodePaths().compactMap { try? describe($0) }
    }

    /// Opens the node, checks it captures video, builds the device (with its stable id).
    func describe(_ path: String) throws(CaptureError) -> CaptureDevice {
        let node = try V4L2Node(path: path, kernel: kernel)
        defer { node.close() }
        let caps = try node.capabilities()
        guard caps.isVideoCapture else {
            throw CaptureError(.notACaptureDevice, "\(path) (\(caps.card), \(caps.driver)) is not a video capture device", device: path)
        }
        // V4L2_CID_CAMERA_ORIENTATION (front/back/external) where the driver has it; else external.
        let id = stableID(for: path, busInfo: caps.busInfo)
        let position =
            override(path: path, uniqueID: id, name: caps.card)?.position
            ?? node.property(.cameraOrientation).flatMap(CaptureDevice.Position.init(v4l2Orientation:)) ?? .external
        return CaptureDevice(
            uniqueID: id, name: caps.card, position: position,
            path: path, driver: caps.driver, busInfo: caps.busInfo)
    }

    /// The `/dev/v4l/by-id` (else `by-path`) link that resolves to the node; else `v4l2:<bus info>`.
    func stableID(for path: String, busInfo: String) -> String {
        for dir in ["\(devDirectory)/v4l/by-id", "\(devDirectory)/v4l/by-path"] {
            guard let links = try? FileSystem.entries(dir) else { continue }
            for l in links.sorted() {
                let full = dir + "/" + l
                if let dest = FileSystem.linkDestination(full), V4L2DeviceProvider.resolve(dest, in: dir) == path { return full }
            }
        }
        return "v4l2:\(busInfo)"
    }

    /// A link's destination as an absolute path: relative ones (udev writes `../../video0`) from `directory`,
    /// with "." and ".." resolved by name.
    static func resolve(_ destination: String, in directory: String) -> String {
        var parts: [Substring] = []
        let full = destination.hasPrefix("/") ? destination : directory + "/" + destination
        for part in full.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    public func device(for spec: String) throws(CaptureError) -> CaptureDevice? {
        guard spec.hasPrefix(devDirectory + "/") || spec.hasPrefix("/dev/") else { return nil }
        return try describe(spec)
    }

    /// The node's native formats (`VIDIOC_ENUM_FMT`, `ENUM_FRAMESIZES`, `ENUM_FRAMEINTERVALS`; libv4l2's emulated
    /// formats are not listed). Throws `.permissionDenied`, `.deviceBusy`, `.notACaptureDevice` or `.ioctlFailed`.
    public func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        let node = try V4L2Node(path: device.path, kernel: kernel)
        defer { node.close() }
        return try node.formats()
    }

    public func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        try V4L2Stream(
            path: device.path, request: request, kernel: kernel, configuration: configuration,
            rotationOverride: override(path: device.path, uniqueID: device.uniqueID, name: device.name)?.rotation, sink: sink)
    }

    public func controls(of device: CaptureDevice) throws(CaptureError) -> [CameraControl] {
        let node = try V4L2Node(path: device.path, kernel: kernel)
        defer { node.close() }
        return try node.controls()
    }

    public func setControl(_ id: CameraControlID, to value: CameraControl.Value, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        let node = try V4L2Node(path: device.path, kernel: kernel)
        defer { node.close() }
        return try node.setControl(id, to: value)
    }
}
