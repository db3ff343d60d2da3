import CPipeWire
import SystemIO
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// Cameras behind PipeWire: every node of `media.class` `Video/Source` with the `Camera` role (the nodes
/// wireplumber makes for V4L2 and libcamera cameras, and cameras other programs publish), as `pipewire:NAME`
/// devices, where NAME is the node's `node.name`.
///
/// The provider connects to the user's PipeWire (`$PIPEWIRE_REMOTE`, else `$XDG_RUNTIME_DIR/pipewire-0`) or to
/// the socket ``Configuration/remote`` names. Without a PipeWire socket it lists no camera, at once and silently,
/// and a `pipewire:` spec fails with `.unknownDevice` saying that PipeWire is not running.
/// Each call connects for as long as it needs; the provider holds no connection and may be shared between
/// capturers and threads. A stream is linked to its node by the session manager (wireplumber), as every PipeWire
/// client's is: without one, a stream does not start (the error says so).
///
/// Formats are the node's `EnumFormat` params: raw formats under their V4L2 fourcc (`YUY2` as `YUYV`, `I420` as
/// `YU12`, `NV12`, the RGB orders by their bytes in memory), `MJPG` and `H264`, each with its sizes and rates, so
/// the usual negotiation (`select`, `--pixel-format`, `--fps-limit`) applies unchanged.
public final class PipeWireCameraProvider: CaptureDeviceProvider {
    /// Where to connect and how long to wait.
    public struct Configuration: Sendable {
        /// The PipeWire socket: an absolute path, or a name in PipeWire's runtime directory; nil for the default
        /// (`$PIPEWIRE_REMOTE`, else `pipewire-0` in `$PIPEWIRE_RUNTIME_DIR` or `$XDG_RUNTIME_DIR`).
        public var remote: String?
        /// How long a listing may wait for PipeWire's answer, in milliseconds (100...60000).
        public var listTimeoutMs: Int
        /// How long a start may wait for its stream to run, in milliseconds (100...60000).
        public var startTimeoutMs: Int
        /// No frame for this long: the stream fails with `.timeout` (at least 100 ms).
        public var noFrameTimeoutNs: Int64
        /// Private buffers a frame is copied into when it is not read in place (2...16): a frame held by consumers
        /// keeps its buffer; with every buffer held, the next frame is dropped as `.buffersHeld`.
        public var frameBuffers: Int
        /// Frames read in place (true, the default) where the camera keeps a buffer its consumer holds: a frame is
        /// PipeWire's buffer itself (mapped by the stream), given back to PipeWire once the last consumer lets the
        /// frame go, as long as two buffers stay with PipeWire (a frame beyond that is copied into a private buffer
        /// and its buffer given back at once). That holds for a client's stream (a virtual camera, pw-test-camera);
        /// a node of PipeWire's device monitors (a V4L2 or libcamera camera, made for a device) reuses each buffer
        /// at its next cycle whatever its consumers hold, so its frames are copied, as are buffers of memory the
        /// stream cannot map itself (neither a memfd nor a DMA-BUF). False: every frame is copied.
        public var zeroCopy: Bool
        /// How PipeWire is reached.
        public enum Connection: String, Sendable, CaseIterable {
            /// The PipeWire socket when there is one; without one, the camera portal inside a Flatpak sandbox
            /// (`/.flatpak-info` exists), where the portal is the way to a camera; else no camera, as `direct`.
            case automatic = "auto"
            /// The PipeWire socket (``Configuration/remote``) only.
            case direct
            /// The camera portal (``CameraPortal``) for every listing and stream: access asked (the desktop may ask
            /// the user; a refusal is `.permissionDenied`), then a connection that sees the cameras granted.
            case portal
        }
        /// How PipeWire is reached: ``Connection/direct`` by default.
        public var connection: Connection
        /// How long the camera portal may take to answer (it may show the user a dialog), milliseconds
        /// (100...600000).
        public var portalTimeoutMs: Int
        /// Settings with every value clamped to its range.
        public init(
            remote: String? = nil, listTimeoutMs: Int = 2000, startTimeoutMs: Int = 5000, noFrameTimeoutNs: Int64 = 3_000_000_000,
            frameBuffers: Int = 4, connection: Connection = .direct, portalTimeoutMs: Int = CameraPortal.defaultTimeoutMs, zeroCopy: Bool = true
        ) {
            self.zeroCopy = zeroCopy
            self.connection = connection
            self.portalTimeoutMs = min(max(portalTimeoutMs, 100), 600_000)
            self.remote = remote
            self.listTimeoutMs = min(max(listTimeoutMs, 100), 60000)
            self.startTimeoutMs = min(max(startTimeoutMs, 100), 60000)
            self.noFrameTimeoutNs = max(noFrameTimeoutNs, 100_000_000)
            self.frameBuffers = min(max(frameBuffers, 2), 16)
        }
    }

    /// The prefix of this provider's device specs and paths.
    public static let scheme = "pipewire:"

    /// Where it connects and its timeouts.
    public let configuration: Configuration

    /// A provider for the cameras of the PipeWire `configuration` names (by default the user's).
    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// The PipeWire socket this provider connects to, and whether it exists now.
    public var socket: (path: String, exists: Bool) {
        var buffer = [CChar](repeating: 0, count: 4096)
        let exists = cpw_socket_exists(configuration.remote, &buffer, buffer.count) != 0
        let path = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (path, exists)
    }

    /// The camera nodes now, with their formats when `formatsOf` names a node (or is `*`). Throws when PipeWire
    /// is not running or does not answer.
    /// Whether listings and streams go through the camera portal (``Configuration/connection``: `portal`, or
    /// `automatic` without a PipeWire socket).
    public var usesPortal: Bool {
        switch configuration.connection {
        case .direct: false
        case .portal: true
        case .automatic: !socket.exists && Self.inSandbox
        }
    }

    /// Whether this process runs in a Flatpak sandbox.
    static let inSandbox = FileSystem.exists("/.flatpak-info")

    /// A connection through the camera portal when it is used (the caller's, to hand to PipeWire), nil to connect
    /// to the socket; throws when the socket is missing or the portal refuses.
    func portalConnection() throws(CaptureError) -> Int32? {
        if usesPortal { return try CameraPortal.connection(timeoutMs: configuration.portalTimeoutMs) }
        let (path, exists) = socket
        guard exists else {
            throw CaptureError(.unknownDevice, "PipeWire is not running: no socket at \(path)", errno: ENOENT, operation: "connect")
        }
        return nil
    }

    func listing(formatsOf: String? = nil) throws(CaptureError) -> [PipeWireNode] {
        let fd = try portalConnection()
        var listing = cpw_listing()
        var error = [CChar](repeating: 0, count: 512)
        let timeout = Int32(configuration.listTimeoutMs)
        let r =
            fd.map { cpw_list_fd($0, formatsOf, timeout, &listing, &error, error.count) }
            ?? cpw_list(configuration.remote, formatsOf, timeout, &listing, &error, error.count)
        defer { cpw_listing_free(&listing) }
        guard r == 0 else {
            let text = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw CaptureError(r == -ETIMEDOUT ? .timeout : .unknownDevice, text, errno: Int32(clamping: -Int(r)), operation: "PipeWire registry")
        }
        guard let nodes = listing.nodes else { return [] }
        return (0..<listing.n_nodes).map { PipeWireNode(nodes[$0]) }.filter(\.isCamera)
    }

    /// The camera nodes, in the order PipeWire announced them; none (at once, silently) when PipeWire is not
    /// running or does not answer.
    public func devices() -> [CaptureDevice] {
        guard usesPortal || socket.exists else { return [] }
        return ((try? listing()) ?? []).map(\.device)
    }

    /// The camera `pipewire:NAME` names: NAME is a node's `node.name`, else its `object.serial` or its device's
    /// serial. Nil for a spec without the `pipewire:` prefix.
    public func device(for spec: String) throws(CaptureError) -> CaptureDevice? {
        guard spec.hasPrefix(Self.scheme) else { return nil }
        return try node(for: spec).device
    }

    func node(for spec: String, formats: Bool = false) throws(CaptureError) -> PipeWireNode {
        let key = String(spec.dropFirst(Self.scheme.count))
        guard !key.isEmpty else {
            throw CaptureError(
                .invalidArgument,
                "\(spec): a PipeWire camera is named pipewire:NODE_NAME (the node.name of a Video/Source node with the Camera role)", device: spec)
        }
        // Formats are read for the node of that name; a spec by serial is resolved first.
        let nodes = try listing(formatsOf: formats ? key : nil)
        if let n = nodes.first(where: { $0.name == key }) ?? nodes.first(where: { $0.serial == key || $0.deviceSerial == key }) {
            if formats, n.name != key { return try node(for: Self.scheme + n.name, formats: true) }
            return n
        }
        let known = nodes.map { Self.scheme + $0.name }
        throw CaptureError(
            .unknownDevice,
            "PipeWire has no camera named \(key)" + (known.isEmpty ? " (it lists no camera)" : " (cameras: \(known.joined(separator: ", ")))"),
            device: spec)
    }

    /// The node's `EnumFormat` params as formats (entries of a format this package has no fourcc for are left out).
    public func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        try nodeWithFormats(device).formats
    }

    /// The device's node with its formats read; an error when PipeWire could not list them.
    private func nodeWithFormats(_ device: CaptureDevice) throws(CaptureError) -> PipeWireNode {
        let n = try node(for: device.path, formats: true)
        if n.formatsFailed, n.formats.isEmpty {
            throw CaptureError(.ioctlFailed, "PipeWire could not list the formats of \(device.path)", device: device.path, operation: "EnumFormat")
        }
        return n
    }

    /// Connects a capture stream to the node and returns once it streams the requested format.
    public func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        guard device.path.hasPrefix(Self.scheme), device.path.count > Self.scheme.count else {
            throw CaptureError(.unknownDevice, "\(device.path) is not a PipeWire camera (pipewire:NAME)", device: device.path)
        }
        let (path, exists) = socket
        guard exists || usesPortal else {
            throw CaptureError(
                .disconnected, "PipeWire is not running: no socket at \(path)", errno: ENOENT, device: device.path, operation: "connect")
        }
        // Refused here, by name, rather than by a negotiation that PipeWire reports only as a stream that never starts.
        let node = try nodeWithFormats(device)
        let offered = node.formats
        guard offered.contains(where: { $0.pixelFormat == request.pixelFormat && $0.size.contains(request.size) }) else {
            let list = offered.map { f in
                if case .discrete(let size) = f.size { return "\(f.pixelFormat) \(size)" }
                return "\(f.pixelFormat) \(f.size)"
            }
            throw CaptureError(
                .unsupportedFormat,
                "\(device.path) does not offer \(request.pixelFormat) \(request.size) (it offers: \(list.isEmpty ? "nothing" : list.joined(separator: ", ")))",
                device: device.path)
        }
        return try PipeWireStream(
            device: device.path, node: String(device.path.dropFirst(Self.scheme.count)), request: request, configuration: configuration,
            connection: try portalConnection(), readInPlace: configuration.zeroCopy && node.keepsHeldBuffers, sink: sink)
    }
}

/// A camera node as the registry lists it (copied out of CPipeWire's listing).
struct PipeWireNode {
    var id: UInt32
    var name: String
    var description: String?
    var nick: String?
    var serial: String?
    var deviceSerial: String?
    var role: String?
    var api: String?
    var objectPath: String?
    var deviceID: String?
    var formats: [CaptureFormat]
    var formatsFailed: Bool

    init(_ n: cpw_node) {
        func text(_ p: UnsafeMutablePointer<CChar>?) -> String? { p.map { String(cString: $0) } }
        id = n.id
        name = text(n.name) ?? ""
        description = text(n.description)
        nick = text(n.nick)
        serial = text(n.serial)
        deviceSerial = text(n.device_serial)
        role = text(n.media_role)
        api = text(n.device_api)
        objectPath = text(n.object_path)
        deviceID = text(n.device_id)
        formatsFailed = n.formats_error != 0
        var list: [CaptureFormat] = []
        if let f = n.formats {
            for i in 0..<n.n_formats { if let c = PipeWireFormats.captureFormat(f[i]) { list.append(c) } }
        }
        formats = list
    }

    /// A camera: a named node with the Camera role.
    var isCamera: Bool { !name.isEmpty && role == "Camera" }

    /// Whether a buffer a consumer keeps stays unwritten until it is given back: true for a client's stream (a
    /// `pw_stream` producer such as pw-test-camera or a virtual camera; checked with a second consumer running), false
    /// for the nodes PipeWire's device monitors make (a `device.id`, `device.api` v4l2 or libcamera, an `object.path`
    /// `v4l2:…` or `libcamera:…`), whose source gives each buffer
    /// back to its device at its next cycle whatever its consumers hold (PipeWire 0.3.65's V4L2 source recycles the
    /// buffer of its last cycle; its tee hands back a buffer as soon as any one consumer does).
    var keepsHeldBuffers: Bool {
        api == nil && deviceID == nil && !(objectPath.map { $0.hasPrefix("v4l2:") || $0.hasPrefix("libcamera:") } ?? false)
    }

    var device: CaptureDevice {
        let path = PipeWireCameraProvider.scheme + name
        let display = [description, nick].compactMap { $0 }.first { !$0.isEmpty } ?? name
        return CaptureDevice(
            uniqueID: path, name: display, position: .external, path: path, driver: api.map { "pipewire (\($0))" } ?? "pipewire",
            busInfo: deviceSerial ?? objectPath ?? "pipewire node \(id)" + (serial.map { " serial \($0)" } ?? ""))
    }
}
