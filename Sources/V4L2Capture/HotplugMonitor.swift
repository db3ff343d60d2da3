import CV4L2
public import VideoCapture
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A camera appearing or going away (AVFoundation's `AVCaptureDeviceWasConnected/Disconnected`).
public enum DeviceEvent: Sendable, Equatable {
    case connected(path: String)
    case disconnected(path: String)
}

/// Watches `/dev` with inotify for `videoN` nodes being created or removed.
public final class HotplugMonitor: Sendable {
    public let directory: String
    public let events: AsyncStream<DeviceEvent>
    private let fd: Int32
    private let wakePipe: (Int32, Int32)
    private let done = DispatchSemaphore(value: 0)

    public init(directory: String = "/dev") throws(CaptureError) {
        self.directory = directory
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw CaptureError(.ioctlFailed, "inotify_init1 failed", errno: errno) }
        guard inotify_add_watch(fd, directory, UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM)) >= 0 else {
            let e = errno; Glibc.close(fd)
            throw CaptureError(.ioctlFailed, "cannot watch \(directory) for camera hot-plug", errno: e)
        }
        var p: [Int32] = [0, 0]
        guard pipe(&p) == 0 else { let e = errno; Glibc.close(fd); throw CaptureError(.ioctlFailed, "pipe failed", errno: e) }
        self.fd = fd
        self.wakePipe = (p[0], p[1])
        let (stream, continuation) = AsyncStream<DeviceEvent>.makeStream()
        self.events = stream
        let wake = p[0]
        let doneSem = done
        let t = Thread {
            HotplugMonitor.loop(fd: fd, wake: wake, directory: directory, continuation: continuation)
            doneSem.signal()
        }
        t.name = "v4l2-hotplug"
        t.start()
    }

    private static func loop(fd: Int32, wake: Int32, directory: String, continuation: AsyncStream<DeviceEvent>.Continuation) {
        var buf = [UInt8](repeating: 0, count: 4096)
        let headerSize = MemoryLayout<inotify_event>.size
        outer: while true {
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let rc = poll(&fds, 2, -1)
            if rc < 0 { if errno == EINTR { continue }; break }
            if fds[1].revents != 0 { break }
            let n = read(fd, &buf, buf.count)
            if n <= 0 { continue }
            var off = 0
            while off + headerSize <= n {
                let (mask, len) = buf.withUnsafeBytes { raw -> (UInt32, Int) in
                    let ev = raw.loadUnaligned(fromByteOffset: off, as: inotify_event.self)
                    return (ev.mask, Int(ev.len))
                }
                let nameBytes = buf[(off + headerSize)..<min(n, off + headerSize + len)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                off += headerSize + len
                guard name.hasPrefix("video"), Int(name.dropFirst(5)) != nil else { continue }
                if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 { continuation.yield(.connected(path: directory + "/" + name)) }
                if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 { continuation.yield(.disconnected(path: directory + "/" + name)) }
                if mask & UInt32(IN_IGNORED) != 0 { break outer }
            }
        }
        continuation.finish()
    }

    /// Stops watching; the event stream finishes.
    public func stop() {
        var one: UInt8 = 1
        _ = write(wakePipe.1, &one, 1)
        done.wait()
        Glibc.close(fd); Glibc.close(wakePipe.0); Glibc.close(wakePipe.1)
    }
}

extension CameraVideoCapturer {
    /// Camera connected/disconnected notifications (as AVFoundation's `AVCaptureDeviceWasConnected/
    /// DisconnectedNotification`), from inotify on `directory`. Call `stop()` on the monitor when done.
    /// A camera that goes away while capturing also stops capture with a `.disconnected` error.
    public func watchDevices(directory: String = "/dev") throws(CaptureError) -> HotplugMonitor {
        try HotplugMonitor(directory: directory)
    }
}
