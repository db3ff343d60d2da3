#if canImport(Glibc)
    import Glibc
#endif

/// Every failure of capture, with a code to switch on, the errno where the OS gave one, and a message that
/// names the device, the call and the value involved (after swift-subprocess's `SubprocessError`).
public struct CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    public typealias Code = ErrorCode<CaptureError>

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

extension ErrorCode where Domain == CaptureError {
    public static var unknownDevice: Self { Self(rawValue: "unknown device") }
    public static var unsupportedFormat: Self { Self(rawValue: "unsupported format") }
    public static var noConvertibleFormat: Self { Self(rawValue: "no convertible format") }
    public static var alreadyRunning: Self { Self(rawValue: "already running") }
    public static var notRunning: Self { Self(rawValue: "not running") }
    public static var deviceBusy: Self { Self(rawValue: "device busy") }
    public static var permissionDenied: Self { Self(rawValue: "permission denied") }
    public static var disconnected: Self { Self(rawValue: "disconnected") }
    public static var notACaptureDevice: Self { Self(rawValue: "not a capture device") }
    public static var ioctlFailed: Self { Self(rawValue: "ioctl failed") }
    public static var streamFailed: Self { Self(rawValue: "stream failed") }
    public static var timeout: Self { Self(rawValue: "no frames") }
    public static var invalidFixture: Self { Self(rawValue: "invalid fixture") }
    public static var invalidArgument: Self { Self(rawValue: "invalid argument") }
    /// The camera has no control of that name or id.
    public static var unknownControl: Self { Self(rawValue: "unknown control") }
    /// A control value outside its range, not a menu entry, or of the wrong kind.
    public static var controlOutOfRange: Self { Self(rawValue: "control value out of range") }
    public static var controlReadOnly: Self { Self(rawValue: "read-only control") }
    /// The control is inactive: another control (its automatic mode) overrides it.
    public static var controlInactive: Self { Self(rawValue: "inactive control") }
    /// The driver refuses to change the control now (`EBUSY`: grabbed while streaming, or held by another user).
    public static var controlBusy: Self { Self(rawValue: "control busy") }
    /// A bug in this package (a bad descriptor or pointer reached the kernel), never a device condition.
    public static var internalError: Self { Self(rawValue: "internal error") }
}
