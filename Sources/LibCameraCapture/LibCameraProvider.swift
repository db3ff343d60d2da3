import CLibCameraShim
import Synchronization
import SystemIO
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// Cameras behind libcamera: every camera libcamera's camera manager lists (CSI sensor pipelines of a Raspberry
/// Pi, Rockchip or i.MX board, an IPU6 laptop camera, UVC cameras through libcamera's UVC pipeline, the kernel's
/// `vimc` test pipeline), as `libcamera:ID` devices, where ID is libcamera's camera id.
///
/// Without a media device (`/dev/media*`) the provider lists no camera, at once and silently, without starting
/// libcamera. libcamera's own log is switched off (unless `LIBCAMERA_LOG_FILE` or `LIBCAMERA_LOG_LEVELS` is set):
/// the library never prints.
///
/// Formats are the stream formats of ``Configuration/role`` (viewfinder by default), under their V4L2 fourccs, with
/// `FrameDurationLimits` as the frame intervals where the camera has them, so the usual negotiation applies
/// unchanged. libcamera may adjust the size a stream is configured with (vimc under 0.0.3 makes 640x480 636x480):
/// ``Configuration/sizeAdjustment`` says whether that size is delivered (``LibCameraFormats/SizeAdjustment/accept``,
/// the default) or frames are cropped to the request (``LibCameraFormats/SizeAdjustment/crop``).
public final class LibCameraProvider: CaptureDeviceProvider {
    /// The stream role, the size policy and the stream's timeouts and buffers.
    public struct Configuration: Sendable {
        /// libcamera's stream roles: what the pipeline handler configures the camera for.
        public enum Role: String, Sendable, CaseIterable {
            /// Preview frames (the default; what `cam` uses).
            case viewfinder
            /// Frames for a recording.
            case video
            /// Full-resolution stills.
            case still
            /// The sensor's raw frames (Bayer: formats this package has no layout for are left out).
            case raw

            var code: Int32 {
                switch self {
                case .viewfinder: Int32(LCS_ROLE_VIEWFINDER)
                case .video: Int32(LCS_ROLE_VIDEO)
                case .still: Int32(LCS_ROLE_STILL)
                case .raw: Int32(LCS_ROLE_RAW)
                }
            }
        }
        /// The stream role: ``Role/viewfinder`` by default.
        public var role: Role
        /// What to do with a size libcamera adjusted: ``LibCameraFormats/SizeAdjustment/accept`` by default.
        public var sizeAdjustment: LibCameraFormats.SizeAdjustment
        /// libcamera's buffers (requests in flight), 2...16.
        public var cameraBuffers: Int
        /// Private buffers frames are copied into when they are not read in place (2...16): a frame held by
        /// consumers keeps its buffer; with every buffer held, the next frame is dropped as `.buffersHeld`.
        public var frameBuffers: Int
        /// Frames read in place (true, the default): a frame is libcamera's buffer itself, whose request is queued
        /// again once the last consumer lets the frame go, as long as two requests stay with libcamera (a frame
        /// beyond that is copied into a private buffer and its request queued at once). A cropped frame of a
        /// format in several planes is always copied. False: every frame is copied.
        public var zeroCopy: Bool
        /// No frame for this long: the stream fails with `.timeout` (at least 100 ms).
        public var noFrameTimeoutNs: Int64
        /// Settings with every value clamped to its range.
        public init(
            role: Role = .viewfinder, sizeAdjustment: LibCameraFormats.SizeAdjustment = .accept, cameraBuffers: Int = 4, frameBuffers: Int = 4,
            zeroCopy: Bool = true, noFrameTimeoutNs: Int64 = 3_000_000_000
        ) {
            self.zeroCopy = zeroCopy
            self.role = role
            self.sizeAdjustment = sizeAdjustment
            self.cameraBuffers = min(max(cameraBuffers, 2), 16)
            self.frameBuffers = min(max(frameBuffers, 2), 16)
            self.noFrameTimeoutNs = max(noFrameTimeoutNs, 100_000_000)
        }
    }

    /// The prefix of this provider's device specs and paths.
    public static let scheme = "libcamera:"

    /// The role, size policy and timeouts.
    public let configuration: Configuration

    /// A provider for the cameras libcamera sees.
    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// Whether libcamera may see a camera here: some media device exists (`/dev/media*`).
    public static var mayHaveCameras: Bool { lcs_may_have_cameras() != 0 }

    static func text(_ buffer: [CChar]) -> String { buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } }

    /// The cameras libcamera lists now. Throws when its camera manager does not start.
    func cameras() throws(CaptureError) -> [LibCameraInfo] {
        guard Self.mayHaveCameras else { return [] }
        var listing = lcs_listing()
        var error = [CChar](repeating: 0, count: 512)
        let r = lcs_list(&listing, &error, error.count)
        defer { lcs_listing_free(&listing) }
        guard r == 0 else { throw CaptureError(.unknownDevice, Self.text(error), errno: Int32(clamping: -Int(r)), operation: "CameraManager") }
        guard let cameras = listing.cameras else { return [] }
        return (0..<listing.n_cameras).map { LibCameraInfo(cameras[$0]) }
    }

    /// The cameras, in libcamera's order; none (at once, silently) without a media device or when libcamera
    /// does not start.
    public func devices() -> [CaptureDevice] {
        ((try? cameras()) ?? []).map(\.device)
    }

    /// The camera `libcamera:ID` names (ID: libcamera's camera id). Nil for a spec without the prefix.
    public func device(for spec: String) throws(CaptureError) -> CaptureDevice? {
        guard spec.hasPrefix(Self.scheme) else { return nil }
        return try camera(for: spec).device
    }

    func camera(for spec: String) throws(CaptureError) -> LibCameraInfo {
        let id = String(spec.dropFirst(Self.scheme.count))
        guard !id.isEmpty else {
            throw CaptureError(.invalidArgument, "\(spec): a libcamera camera is named libcamera:ID (ID: a camera id libcamera lists)", device: spec)
        }
        let all = try cameras()
        if let c = all.first(where: { $0.id == id }) { return c }
        let known = all.map { Self.scheme + $0.id }
        let why =
            known.isEmpty
            ? (Self.mayHaveCameras ? " (it lists no camera)" : " (it lists no camera: there is no media device, /dev/media*)")
            : " (cameras: \(known.joined(separator: ", ")))"
        throw CaptureError(.unknownDevice, "libcamera has no camera \(id)" + why, errno: ENODEV, device: spec)
    }

    static func cameraID(of device: CaptureDevice) throws(CaptureError) -> String {
        guard device.path.hasPrefix(scheme), device.path.count > scheme.count else {
            throw CaptureError(.unknownDevice, "\(device.path) is not a libcamera camera (libcamera:ID)", device: device.path)
        }
        return String(device.path.dropFirst(scheme.count))
    }

    /// The stream formats of the configured role.
    public func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        let id = try Self.cameraID(of: device)
        _ = try camera(for: device.path)
        var list = lcs_formats()
        var error = [CChar](repeating: 0, count: 512)
        let r = lcs_formats_of(id, configuration.role.code, &list, &error, error.count)
        defer { lcs_formats_free(&list) }
        guard r == 0 else {
            throw CaptureError(
                r == -ENODEV ? .unknownDevice : .ioctlFailed, Self.text(error), errno: Int32(clamping: -Int(r)), device: device.path,
                operation: "StreamFormats")
        }
        let intervals =
            list.has_frame_durations != 0
            ? LibCameraFormats.intervals(minUs: list.min_frame_duration_us, maxUs: list.max_frame_duration_us) : nil
        guard let formats = list.formats else { return [] }
        return (0..<list.n_formats).flatMap { LibCameraFormats.captureFormats(formats[$0], intervals: intervals) }
    }

    /// What libcamera would apply for a request: the size it adjusts to and its stride (without acquiring the
    /// camera).
    public func validate(_ request: StreamRequest, on device: CaptureDevice) throws(CaptureError) -> (size: FrameSize, stride: Int, adjusted: Bool) {
        let id = try Self.cameraID(of: device)
        guard let drm = LibCameraFormats.drmFourcc(of: request.pixelFormat) else {
            throw CaptureError(.unsupportedFormat, "libcamera has no format for \(request.pixelFormat)", device: device.path)
        }
        return try validate(id: id, drm: drm, size: request.size, device: device.path)
    }

    func validate(id: String, drm: UInt32, size: FrameSize, device: String) throws(CaptureError) -> (size: FrameSize, stride: Int, adjusted: Bool) {
        if let problem = CaptureLimits.problem(with: size) { throw CaptureError(.invalidArgument, "\(device): \(problem)", device: device) }
        var config = lcs_config()
        var error = [CChar](repeating: 0, count: 512)
        let r = lcs_validate(id, configuration.role.code, drm, UInt32(size.width), UInt32(size.height), &config, &error, error.count)
        guard r == 0 else {
            throw CaptureError(r == -ENODEV ? .unknownDevice : .unsupportedFormat, Self.text(error), device: device, operation: "validate")
        }
        let applied = FrameSize(width: Int(config.width), height: Int(config.height))
        guard CaptureLimits.problem(with: applied) == nil else {
            throw CaptureError(.unsupportedFormat, "\(device): libcamera adjusted \(size) to \(applied)", device: device, operation: "validate")
        }
        return (applied, Int(config.stride), config.adjusted != 0)
    }

    /// Configures and starts the camera; returns once its requests are queued. With
    /// ``LibCameraFormats/SizeAdjustment/crop``, first finds a size libcamera makes that covers the request.
    public func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        let id = try Self.cameraID(of: device)
        _ = try camera(for: device.path)
        guard let drm = LibCameraFormats.drmFourcc(of: request.pixelFormat) else {
            throw CaptureError(.unsupportedFormat, "libcamera has no format for \(request.pixelFormat) (\(device.path))", device: device.path)
        }
        var configured = request.size
        var crop: FrameSize?
        if configuration.sizeAdjustment == .crop {
            let first = try validate(id: id, drm: drm, size: request.size, device: device.path)
            if LibCameraFormats.cropOrigin(requested: request.size, adjusted: first.size) == nil {
                var found: FrameSize?
                for candidate in LibCameraFormats.coveringCandidates(requested: request.size, firstAdjusted: first.size) {
                    let v = try validate(id: id, drm: drm, size: candidate, device: device.path)
                    if LibCameraFormats.cropOrigin(requested: request.size, adjusted: v.size) != nil {
                        found = candidate
                        break
                    }
                }
                guard let found else {
                    throw CaptureError(
                        .unsupportedFormat,
                        "libcamera makes \(request.pixelFormat) \(first.size), not \(request.size), and no size it makes covers \(request.size) (sizeAdjustment: accept delivers \(first.size))",
                        device: device.path)
                }
                configured = found
            }
            crop = request.size
        }
        return try LibCameraStream(
            device: device.path, cameraID: id, drm: drm, pixelFormat: request.pixelFormat, size: configured, crop: crop, fps: request.fps,
            configuration: configuration, sink: sink)
    }

    /// The libcamera controls that correspond to ours, with the last value this process set (libcamera reports
    /// controls per frame, not on request): `ExposureTime` as `exposure_time_absolute` (100 µs units, as V4L2),
    /// `AnalogueGain` as `gain`, `Brightness`, `Contrast`, `Saturation` and `Sharpness` (libcamera's floats in
    /// hundredths), `AwbEnable` as `white_balance_automatic`.
    public func controls(of device: CaptureDevice) throws(CaptureError) -> [CameraControl] {
        let id = try Self.cameraID(of: device)
        _ = try camera(for: device.path)
        var list = lcs_controls()
        var error = [CChar](repeating: 0, count: 512)
        let r = lcs_controls_of(id, &list, &error, error.count)
        defer { lcs_controls_free(&list) }
        guard r == 0 else { throw CaptureError(.ioctlFailed, Self.text(error), device: device.path, operation: "controls") }
        guard let controls = list.controls else { return [] }
        return (0..<list.n_controls).compactMap { LibCameraControls.control(controls[$0]) }
    }

    /// Sets one control (checked against its range): on the stream's next requests while this process streams the
    /// camera, else at its next start here. Returns it with the value set.
    public func setControl(_ id: CameraControlID, to value: CameraControl.Value, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        let camera = try Self.cameraID(of: device)
        guard var control = try controls(of: device).first(where: { $0.id == id }),
            let mapping = LibCameraControls.mapping(for: id)
        else {
            throw CaptureError(.unknownControl, "\(device.path) has no control \(id)", device: device.path)
        }
        try control.validate(value, device: device.path)
        guard case .integer(let v) = value else {
            throw CaptureError(.controlOutOfRange, "control \(control.name) takes a number", device: device.path)
        }
        var error = [CChar](repeating: 0, count: 512)
        let r = lcs_control_set(camera, mapping.libcameraID, Double(v) * mapping.scale, &error, error.count)
        guard r == 0 else {
            throw CaptureError(
                r == -ERANGE ? .controlOutOfRange : .ioctlFailed, Self.text(error), device: device.path, operation: "set \(control.name)")
        }
        control.value = value
        return control
    }
}

/// A camera as libcamera's camera manager lists it.
struct LibCameraInfo {
    var id: String
    var model: String
    var location: Int32
    var rotation: Int32

    init(_ c: lcs_camera) {
        id = c.id.map { String(cString: $0) } ?? ""
        model = c.model.map { String(cString: $0) } ?? ""
        location = c.location
        rotation = c.rotation
    }

    var position: CaptureDevice.Position {
        switch Int(location) {
        case LCS_LOCATION_FRONT: .front
        case LCS_LOCATION_BACK: .back
        case LCS_LOCATION_EXTERNAL: .external
        default: .unspecified
        }
    }

    var device: CaptureDevice {
        let path = LibCameraProvider.scheme + id
        return CaptureDevice(
            uniqueID: path, name: model.isEmpty ? id : model, position: position, path: path,
            driver: rotation >= 0 ? "libcamera (rotation \(rotation))" : "libcamera", busInfo: id)
    }
}

/// Which libcamera controls stand for which of ours, and the scale between their numbers.
enum LibCameraControls {
    struct Mapping {
        var name: String
        var id: CameraControlID
        /// libcamera's value = ours × scale.
        var scale: Double
        var libcameraID: UInt32 = 0
    }

    static let mappings: [Mapping] = [
        Mapping(name: "ExposureTime", id: .exposureTimeAbsolute, scale: 100),
        Mapping(name: "AnalogueGain", id: .gain, scale: 0.01),
        Mapping(name: "Brightness", id: .brightness, scale: 0.01),
        Mapping(name: "Contrast", id: .contrast, scale: 0.01),
        Mapping(name: "Saturation", id: .saturation, scale: 0.01),
        Mapping(name: "Sharpness", id: .sharpness, scale: 0.01),
        Mapping(name: "AwbEnable", id: .autoWhiteBalance, scale: 1),
    ]

    /// The libcamera ids seen so far, by our id (filled by `control(_:)`, read by `mapping(for:)`).
    private static let seen = Mutex<[UInt32: UInt32]>([:])

    static func mapping(for id: CameraControlID) -> Mapping? {
        guard var m = mappings.first(where: { $0.id == id }), let lc = seen.withLock({ $0[id.rawValue] }) else { return nil }
        m.libcameraID = lc
        return m
    }

    /// A libcamera control as ours; nil for one without a counterpart.
    static func control(_ c: lcs_control) -> CameraControl? {
        guard let name = c.name.map({ String(cString: $0) }), let m = mappings.first(where: { $0.name == name }) else { return nil }
        seen.withLock { $0[m.id.rawValue] = c.id }
        func ours(_ x: Double) -> Int64 {
            let v = (x / m.scale).rounded()
            return v.isFinite ? Int64(max(min(v, 2_147_483_647), -2_147_483_648)) : 0
        }
        let boolean = Int(c.type) == LCS_CONTROL_BOOL
        return CameraControl(
            id: m.id, label: m.name, kind: boolean ? .boolean : .integer, minimum: ours(c.minimum), maximum: ours(c.maximum), step: 1,
            defaultValue: c.has_default != 0 ? ours(c.default_value) : ours(c.minimum), flags: [],
            value: c.has_value != 0 ? .integer(ours(c.value)) : nil)
    }
}
