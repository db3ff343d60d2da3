import CV4L2
import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

// The one file where the V4L2 backend makes system calls (after swift-system's Syscalls.swift and NIO's
// System.swift): every call retries EINTR and captures errno at once; errno values are an `Errno`; ioctls
// are named constants that carry their own name for messages; and one mapping turns an errno into a
// `CaptureError`. `V4L2Kernel` is the swappable part (tests play the kernel); `Syscall` holds the calls that
// are not device I/O (inotify, pipes, the wake-up poll).

/// An errno value.
struct Errno: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32
    init(rawValue: Int32) { self.rawValue = rawValue }
    init(_ raw: Int32) { rawValue = raw }
    /// The calling thread's errno, read at once after a failed call.
    static var current: Errno { Errno(Glibc.errno) }
    var description: String { "errno \(rawValue): \(String(cString: strerror(rawValue)))" }
    /// A bad descriptor or pointer is our bug, never a property of the device: never reported as one.
    var isProgrammerError: Bool { rawValue == EBADF || rawValue == EFAULT }
}

/// A V4L2 ioctl request and its name.
struct IOCTL: Sendable, CustomStringConvertible {
    let request: UInt
    let name: String
    var description: String { name }

    static let querycap = IOCTL(request: CV4L2_VIDIOC_QUERYCAP, name: "VIDIOC_QUERYCAP")
    static let enumFormat = IOCTL(request: CV4L2_VIDIOC_ENUM_FMT, name: "VIDIOC_ENUM_FMT")
    static let enumFrameSizes = IOCTL(request: CV4L2_VIDIOC_ENUM_FRAMESIZES, name: "VIDIOC_ENUM_FRAMESIZES")
    static let enumFrameIntervals = IOCTL(request: CV4L2_VIDIOC_ENUM_FRAMEINTERVALS, name: "VIDIOC_ENUM_FRAMEINTERVALS")
    static let setFormat = IOCTL(request: CV4L2_VIDIOC_S_FMT, name: "VIDIOC_S_FMT")
    static let getFormat = IOCTL(request: CV4L2_VIDIOC_G_FMT, name: "VIDIOC_G_FMT")
    static let setParm = IOCTL(request: CV4L2_VIDIOC_S_PARM, name: "VIDIOC_S_PARM")
    static let getParm = IOCTL(request: CV4L2_VIDIOC_G_PARM, name: "VIDIOC_G_PARM")
    static let requestBuffers = IOCTL(request: CV4L2_VIDIOC_REQBUFS, name: "VIDIOC_REQBUFS")
    static let queryBuffer = IOCTL(request: CV4L2_VIDIOC_QUERYBUF, name: "VIDIOC_QUERYBUF")
    static let exportBuffer = IOCTL(request: CV4L2_VIDIOC_EXPBUF, name: "VIDIOC_EXPBUF")
    static let queueBuffer = IOCTL(request: CV4L2_VIDIOC_QBUF, name: "VIDIOC_QBUF")
    static let dequeueBuffer = IOCTL(request: CV4L2_VIDIOC_DQBUF, name: "VIDIOC_DQBUF")
    static let streamOn = IOCTL(request: CV4L2_VIDIOC_STREAMON, name: "VIDIOC_STREAMON")
    static let streamOff = IOCTL(request: CV4L2_VIDIOC_STREAMOFF, name: "VIDIOC_STREAMOFF")
    static let queryExtControl = IOCTL(request: CV4L2_VIDIOC_QUERY_EXT_CTRL, name: "VIDIOC_QUERY_EXT_CTRL")
    static let queryMenu = IOCTL(request: CV4L2_VIDIOC_QUERYMENU, name: "VIDIOC_QUERYMENU")
    static let getExtControls = IOCTL(request: CV4L2_VIDIOC_G_EXT_CTRLS, name: "VIDIOC_G_EXT_CTRLS")
    static let setExtControls = IOCTL(request: CV4L2_VIDIOC_S_EXT_CTRLS, name: "VIDIOC_S_EXT_CTRLS")
    static let encoderCommand = IOCTL(request: CV4L2_VIDIOC_ENCODER_CMD, name: "VIDIOC_ENCODER_CMD")
    static let setSelection = IOCTL(request: CV4L2_VIDIOC_S_SELECTION, name: "VIDIOC_S_SELECTION")
}

/// The system calls the V4L2 backend makes on a device, behind one protocol so tests can play the kernel
/// (after NIO's syscall abstraction layer and Chromium's `FakeV4L2Impl`). Calls return 0 or an errno; the
/// callers (`V4L2IO`) retry EINTR.
package protocol V4L2Kernel: Sendable {
    func open(_ path: String) -> (fd: Int32, errno: Int32)
    func close(_ fd: Int32)
    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32
    func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32)
    func munmap(_ pointer: UnsafeMutableRawPointer, length: Int)
    /// Waits for the fd to be readable: returns poll's revents (0 on timeout) or a negative errno.
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32
}

/// The real kernel, through libv4l2 with its format conversion disabled (native formats only).
package struct SystemV4L2Kernel: V4L2Kernel {
    package init() {}
    package func open(_ path: String) -> (fd: Int32, errno: Int32) {
        let fd: Int32
        switch Syscall.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) {
        case .success(let f): fd = f
        case .failure(let e): return (-1, e.rawValue)
        }
        // Only real V4L2 nodes go to libv4l2 (it prints complaints about anything else); it wraps them
        // without emulating formats: we convert with libyuv. A multi-planar-only node is not wrapped: libv4l2's
        // mplane plugin would present it as single-planar (one plane only, so NM12 or YM12 would be lost), and
        // libv4l2 has nothing else to offer it; its calls below go straight to the kernel (libv4l2 passes through
        // descriptors it did not wrap).
        var cap = v4l2_capability()
        guard Syscall.ioctl(fd, CV4L2_VIDIOC_QUERYCAP, &cap) == nil else { return (fd, 0) }
        let caps = cap.capabilities & CV4L2_CAP_DEVICE_CAPS != 0 ? cap.device_caps : cap.capabilities
        if caps & CV4L2_CAP_VIDEO_CAPTURE == 0 && caps & CV4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 { return (fd, 0) }
        let wrapped = cv4l2_fd_open(fd, CV4L2_DISABLE_CONVERSION)
        return wrapped >= 0 ? (wrapped, 0) : (fd, 0)
    }
    package func close(_ fd: Int32) { _ = cv4l2_close(fd) } // never retried: Linux frees the fd even on EINTR
    package func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        Syscall.retrying { cv4l2_ioctl(fd, request, arg) }.failure?.rawValue ?? 0
    }
    package func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
        let p = cv4l2_mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset)
        if p == MAP_FAILED || p == nil { return (nil, cv4l2_errno()) }
        return (p, 0)
    }
    package func munmap(_ pointer: UnsafeMutableRawPointer, length: Int) { _ = cv4l2_munmap(pointer, length) }
    package func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN | POLLPRI), revents: 0)]
        switch Syscall.poll(&fds, timeoutMs: timeoutMs) {
        case .failure(let e): return -e.rawValue
        case .success(let n): return n == 0 ? 0 : Int32(fds[0].revents)
        }
    }
}

/// The non-device system calls (inotify, pipes, poll, read, write, open): EINTR retried, errno captured.
enum Syscall {
    /// Runs `call` until it does not fail with EINTR; a negative result becomes the errno.
    static func retrying<T: BinaryInteger>(_ call: () -> T) -> Result<T, Errno> {
        while true {
            let r = call()
            if r >= 0 { return .success(r) }
            let e = Errno.current
            if e.rawValue != EINTR { return .failure(e) }
        }
    }
    static func open(_ path: String, _ flags: Int32) -> Result<Int32, Errno> { retrying { Glibc.open(path, flags) } }
    static func close(_ fd: Int32) { _ = Glibc.close(fd) }
    static func ioctl<T>(_ fd: Int32, _ request: UInt, _ arg: inout T) -> Errno? {
        withUnsafeMutableBytes(of: &arg) { p in retrying { Glibc.ioctl(fd, request, p.baseAddress!) }.failure }
    }
    static func poll(_ fds: inout [pollfd], timeoutMs: Int32) -> Result<Int32, Errno> {
        fds.withUnsafeMutableBufferPointer { b in retrying { Glibc.poll(b.baseAddress, nfds_t(b.count), timeoutMs) } }
    }
    static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        retrying { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }
    static func write(_ fd: Int32, _ byte: UInt8) -> Result<Int, Errno> {
        var b = byte
        return retrying { Glibc.write(fd, &b, 1) }
    }
    /// A pipe with both ends close-on-exec and non-blocking.
    static func pipe() -> Result<(read: Int32, write: Int32), Errno> {
        var p: [Int32] = [0, 0]
        return retrying { cv4l2_pipe2(&p, O_CLOEXEC | O_NONBLOCK) }.map { _ in (p[0], p[1]) }
    }
    static func inotifyInit() -> Result<Int32, Errno> { retrying { inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)) } }
    static func inotifyAddWatch(_ fd: Int32, _ path: String, _ mask: UInt32) -> Result<Int32, Errno> {
        retrying { inotify_add_watch(fd, path, mask) }
    }
}

extension Result {
    var failure: Failure? { if case .failure(let e) = self { e } else { nil } }
}

/// Where a failure happened: while setting up (an EIO there is a failed call) or while streaming (an EIO
/// there means the device went away, as with an unplugged USB camera).
enum V4L2Phase { case setup, streaming }

/// The one choke point for device ioctls: EINTR is retried, the errno is captured and turned into a
/// `CaptureError` naming the device, the ioctl and the errno (one errno → error mapping: `error`).
struct V4L2IO: Sendable {
    let kernel: any V4L2Kernel
    let path: String

    /// Performs the ioctl; returns nil on success, else the errno (EINTR already retried).
    func errnoOf<T>(_ fd: Int32, _ op: IOCTL, _ arg: inout T) -> Errno? {
        while true {
            let e = withUnsafeMutableBytes(of: &arg) { kernel.ioctl(fd, op.request, $0.baseAddress!) }
            if e == 0 { return nil }
            if e != EINTR { return Errno(e) }
        }
    }

    /// Performs the ioctl and throws a typed error when it fails.
    func ioctl<T>(_ fd: Int32, _ op: IOCTL, _ arg: inout T, _ detail: String = "", phase: V4L2Phase = .setup) throws(CaptureError) {
        if let e = errnoOf(fd, op, &arg) { throw error(e, detail.isEmpty ? op.name : "\(op.name) \(detail)", phase: phase) }
    }

    /// The one errno → `CaptureError` mapping of the backend.
    func error(_ e: Errno, _ operation: String, phase: V4L2Phase = .setup) -> CaptureError {
        let raw = e.rawValue
        if e.isProgrammerError {
            return CaptureError(
                .internalError,
                "internal error: \(operation) on \(path) was given a bad descriptor or pointer (a bug in swift-video-capture, please report it)",
                errno: raw, device: path, operation: operation)
        }
        switch raw {
        case EBUSY:
            return CaptureError(
                .deviceBusy, "\(path) is busy: another process is using it (\(operation))", errno: raw, device: path, operation: operation)
        case ENODEV, ENXIO:
            return CaptureError(.disconnected, "\(path) was disconnected (\(operation))", errno: raw, device: path, operation: operation)
        case EIO where phase == .streaming, EPIPE where phase == .streaming:
            return CaptureError(
                .disconnected, "\(path) disconnected or failed mid-stream (\(operation))", errno: raw, device: path, operation: operation)
        case EACCES, EPERM:
            return CaptureError(
                .permissionDenied, "no permission to use \(path) (\(operation)); add the user to the 'video' group", errno: raw, device: path,
                operation: operation)
        case ENOENT: return CaptureError(.unknownDevice, "\(path) does not exist", errno: raw, device: path, operation: operation)
        default:
            return CaptureError(
                phase == .streaming ? .streamFailed : .ioctlFailed, "\(operation) failed on \(path)\(phase == .streaming ? "; capture stopped" : "")",
                errno: raw, device: path, operation: operation)
        }
    }
}

func fourccString(_ v: UInt32) -> String { PixelFormat(rawValue: v).fourcc }
