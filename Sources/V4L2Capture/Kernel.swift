import CV4L2
#if canImport(Glibc)
import Glibc
#endif

/// The system calls the V4L2 backend makes, behind one protocol so tests can play the kernel
/// (after NIO's syscall abstraction layer and Chromium's `FakeV4L2Impl`). Calls return 0 or an errno.
public protocol V4L2Kernel: Sendable {
    func open(_ path: String) -> (fd: Int32, errno: Int32)
    func close(_ fd: Int32)
    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32
    func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32)
    func munmap(_ pointer: UnsafeMutableRawPointer, length: Int)
    /// Waits for the fd to be readable: returns poll's revents (0 on timeout) or a negative errno.
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32
}

/// The real kernel, through libv4l2 with its format conversion disabled (native formats only).
public struct SystemV4L2Kernel: V4L2Kernel {
    public init() {}
    public func open(_ path: String) -> (fd: Int32, errno: Int32) {
        let fd = Glibc.open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return (-1, Glibc.errno) }
        // Only real V4L2 nodes go to libv4l2 (it prints complaints about anything else); it wraps them
        // without emulating formats: we convert with libyuv.
        var cap = v4l2_capability()
        guard Glibc.ioctl(fd, CV4L2_VIDIOC_QUERYCAP, &cap) == 0 else { return (fd, 0) }
        let wrapped = cv4l2_fd_open(fd, CV4L2_DISABLE_CONVERSION)
        return wrapped >= 0 ? (wrapped, 0) : (fd, 0)
    }
    public func close(_ fd: Int32) { _ = cv4l2_close(fd) }
    public func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        cv4l2_ioctl(fd, request, arg) == 0 ? 0 : cv4l2_errno()
    }
    public func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
        let p = cv4l2_mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset)
        if p == MAP_FAILED || p == nil { return (nil, cv4l2_errno()) }
        return (p, 0)
    }
    public func munmap(_ pointer: UnsafeMutableRawPointer, length: Int) { _ = cv4l2_munmap(pointer, length) }
    public func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 {
        var p = pollfd(fd: fd, events: Int16(POLLIN | POLLPRI), revents: 0)
        let rc = Glibc.poll(&p, 1, timeoutMs)
        if rc < 0 { return -Glibc.errno }
        return rc == 0 ? 0 : Int32(p.revents)
    }
}

/// The one choke point: every ioctl goes through here, EINTR is retried, the errno is captured and
/// turned into a `CaptureError` naming the device, the request and the errno.
struct V4L2IO: Sendable {
    let kernel: any V4L2Kernel
    let path: String

    /// Returns 0 or the errno (after retrying EINTR).
    func call<T>(_ fd: Int32, _ request: UInt, _ arg: inout T) -> Int32 {
        while true {
            let e = withUnsafeMutableBytes(of: &arg) { kernel.ioctl(fd, request, $0.baseAddress!) }
            if e != EINTR { return e }
        }
    }

    /// Throws a typed error for a failed ioctl.
    func check<T>(_ fd: Int32, _ request: UInt, _ name: String, _ arg: inout T) throws(CaptureError) {
        let e = call(fd, request, &arg)
        if e != 0 { throw error(e, name) }
    }

    func error(_ e: Int32, _ what: String) -> CaptureError {
        switch e {
        case EBUSY: return CaptureError(.deviceBusy, "\(path) is busy: another process is using it (\(what))", errno: e, device: path)
        case ENODEV, ENXIO: return CaptureError(.disconnected, "\(path) was disconnected (\(what))", errno: e, device: path)
        case EACCES, EPERM: return CaptureError(.permissionDenied, "no permission to use \(path) (\(what)); add the user to the 'video' group", errno: e, device: path)
        default: return CaptureError(.ioctlFailed, "\(what) failed on \(path)", errno: e, device: path)
        }
    }
}

func fourccString(_ v: UInt32) -> String { PixelFormat(rawValue: v).fourcc }
import VideoCapture
