#if canImport(Glibc)
    import Glibc
#endif

/// Every failure of capture, with a code to switch on, the errno where the OS gave one, and a message that
/// names the device, the call and the value involved (after swift-subprocess's `SubprocessError`).
public struct CaptureError: CodedError {

    /// What went wrong, to switch on.
    public let code: Code
    /// A sentence for people: the device, the call and the value involved, and what to do where that is known.
    public let message: String
    /// The errno the failing call set, if any.
    public let errno: Int32?
    /// The device's path (`/dev/video0`, `fixture:vivid`) when the error concerns one.
    public let device: String?
    /// The call or ioctl that failed (`VIDIOC_DQBUF`, `open`, `mmap of buffer 2`), if any.
    public let operation: String?

    /// An error with its code and message; the other fields are optional context.
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
    /// No provider knows the device named (a bad path, an unknown fixture, a camera that went away).
    public static var unknownDevice: Self { Self(rawValue: "unknown device") }
    /// The device does not offer the pixel format, size or rate asked for.
    public static var unsupportedFormat: Self { Self(rawValue: "unsupported format") }
    /// The device offers no format that can be converted to I420.
    public static var noConvertibleFormat: Self { Self(rawValue: "no convertible format") }
    /// `startCapture` while capture is running (stop first, or switch devices).
    public static var alreadyRunning: Self { Self(rawValue: "already running") }
    /// Stopping or switching when capture is not running.
    public static var notRunning: Self { Self(rawValue: "not running") }
    /// Another process is streaming from the camera (`EBUSY` when setting the format or requesting buffers).
    public static var deviceBusy: Self { Self(rawValue: "device busy") }
    /// No read/write access to the device node (on most systems: the user is not in the `video` group).
    public static var permissionDenied: Self { Self(rawValue: "permission denied") }
    /// The camera went away or failed mid-stream (`ENODEV`/`EIO`); capture stopped and every resource was released.
    public static var disconnected: Self { Self(rawValue: "disconnected") }
    /// The node exists but does not capture video (a metadata, output or mem2mem node).
    public static var notACaptureDevice: Self { Self(rawValue: "not a capture device") }
    /// Any other failed ioctl; ``CaptureError/operation`` names it and ``CaptureError/errno`` says why.
    public static var ioctlFailed: Self { Self(rawValue: "ioctl failed") }
    /// Streaming could not go on (a buffer could not be queued, or the driver granted fewer than two buffers).
    public static var streamFailed: Self { Self(rawValue: "stream failed") }
    /// No frame arrived for the stream's timeout (3 s by default), even after one restart of the stream.
    public static var timeout: Self { Self(rawValue: "no frames") }
    /// A fixture file or listing is malformed (the message names the file, the line and what was expected).
    public static var invalidFixture: Self { Self(rawValue: "invalid fixture") }
    /// An argument out of its range (a frame rate that is not positive, a picture size beyond the limits).
    public static var invalidArgument: Self { Self(rawValue: "invalid argument") }
    /// The camera has no control of that name or id.
    public static var unknownControl: Self { Self(rawValue: "unknown control") }
    /// A control value outside its range, not a menu entry, or of the wrong kind.
    public static var controlOutOfRange: Self { Self(rawValue: "control value out of range") }
    /// The control can be read but not set.
    public static var controlReadOnly: Self { Self(rawValue: "read-only control") }
    /// The control is inactive: another control (its automatic mode) overrides it.
    public static var controlInactive: Self { Self(rawValue: "inactive control") }
    /// The driver refuses to change the control now (`EBUSY`: grabbed while streaming, or held by another user).
    public static var controlBusy: Self { Self(rawValue: "control busy") }
    /// The camera's source changed (`V4L2_EVENT_SOURCE_CHANGE`: an HDMI source switched resolution, a fixture's
    /// `resize` fault): the stream ended; negotiating again follows the new source.
    public static var sourceChanged: Self { Self(rawValue: "source changed") }
    /// The receiver detects no signal (`VIDIOC_QUERY_DV_TIMINGS` fails with `ENOLINK`, `ENOLCK` or `ERANGE`: no
    /// cable, no lock, timings out of range): a state of the source, not of the device. A session waiting for its
    /// camera (`CameraLossPolicy.wait`) tries again until the signal returns.
    public static var noSignal: Self { Self(rawValue: "no signal") }
    /// A bug in this package (a bad descriptor or pointer reached the kernel), never a device condition.
    public static var internalError: Self { Self(rawValue: "internal error") }
}
