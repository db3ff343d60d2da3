#if canImport(Glibc)
    import Glibc
#endif

/// Every failure of capture, with a code to switch on, the errno where the OS gave one, and a message that
/// names the device, the call and the value involved (after swift-subprocess's `SubprocessError`).
public struct CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, RawRepresentable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let unknownDevice = Code(rawValue: "unknown device")
        public static let unsupportedFormat = Code(rawValue: "unsupported format")
        public static let noConvertibleFormat = Code(rawValue: "no convertible format")
        public static let alreadyRunning = Code(rawValue: "already running")
        public static let notRunning = Code(rawValue: "not running")
        public static let deviceBusy = Code(rawValue: "device busy")
        public static let permissionDenied = Code(rawValue: "permission denied")
        public static let disconnected = Code(rawValue: "disconnected")
        public static let notACaptureDevice = Code(rawValue: "not a capture device")
        public static let ioctlFailed = Code(rawValue: "ioctl failed")
        public static let streamFailed = Code(rawValue: "stream failed")
        public static let timeout = Code(rawValue: "no frames")
        public static let invalidFixture = Code(rawValue: "invalid fixture")
        public static let invalidArgument = Code(rawValue: "invalid argument")
        /// The camera has no control of that name or id.
        public static let unknownControl = Code(rawValue: "unknown control")
        /// A control value outside its range, not a menu entry, or of the wrong kind.
        public static let controlOutOfRange = Code(rawValue: "control value out of range")
        public static let controlReadOnly = Code(rawValue: "read-only control")
        /// The control is inactive: another control (its automatic mode) overrides it.
        public static let controlInactive = Code(rawValue: "inactive control")
        /// The driver refuses to change the control now (`EBUSY`: grabbed while streaming, or held by another user).
        public static let controlBusy = Code(rawValue: "control busy")
        /// A bug in this package (a bad descriptor or pointer reached the kernel), never a device condition.
        public static let internalError = Code(rawValue: "internal error")
    }

    public let code: Code
    public let message: String
    /// The errno the failing call set, if any.
    public let errno: Int32?
    public let device: String?
    /// The call or ioctl that failed (`VIDIOC_DQBUF`, `open`, `mmap of buffer 2`), if any.
    public let operation: String?

    public init(_ code: Code, _ message: String, errno: Int32? = nil, device: String? = nil, operation: String? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
        self.device = device
        self.operation = operation
    }

    public var description: String {
        var s = message
        if let errno {
            #if canImport(Glibc)
                s += " (errno \(errno): \(String(cString: strerror(errno))))"
            #else
                s += " (errno \(errno))"
            #endif
        }
        return s
    }
}
