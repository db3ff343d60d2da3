import CV4L2
public import VideoCapture
import Foundation
import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// A camera appearing or going away (AVFoundation's `AVCaptureDeviceWasConnected/Disconnected`).
public enum DeviceEvent: Sendable, Equatable {
    /// A camera node appeared (`/dev/video2`) and answers as a video capture device.
    case connected(path: String)
    /// A camera node reported earlier went away.
    case disconnected(path: String)

    /// The event as a line of a listing that follows the cameras (`camcap devices --watch`): "connected:    PATH\tNAME"
    /// (the name `name` gives for the path, "?" without one) or "disconnected: PATH".
    public func line(name: (String) -> String?) -> String {
        switch self {
        case .connected(let path): "connected:    \(path)\t\(name(path) ?? "?")"
        case .disconnected(let path): "disconnected: \(path)"
        }
    }
}

/// Watches a directory (`/dev`) with inotify for `videoN` nodes being created or removed, and reports the
/// ones that are cameras: a node that does not capture video (UVC's metadata node, a codec) is not reported,
/// nor is its removal. `stop()` may be called any number of times; releasing the monitor stops it.
public final class HotplugMonitor: Sendable {
    /// The directory watched (`/dev`).
    public let directory: String
    /// The events, in the order they happened; finishes when the monitor stops. Iterate it from one task.
    public let events: AsyncStream<DeviceEvent>
    private let fd: Int32
    private let wakePipe: (read: Int32, write: Int32)
    private let thread: WorkerThread
    private let stopped = Mutex(false)

    /// `isCamera` decides whether a new node is reported (default: it answers VIDIOC_QUERYCAP as a streaming
    /// video capture device).
    public init(directory: String = "/dev", isCamera: (@Sendable (String) -> Bool)? = nil) throws(CaptureError) {
        self.directory = directory
        let fd: Int32
        switch Syscall.inotifyInit() {
        case .success(let f): fd = f
        case .failure(let e):
            throw CaptureError(.ioctlFailed, "cannot start watching for cameras (inotify_init1)", errno: e.rawValue, operation: "inotify_init1")
        }
        if case .failure(let e) = Syscall.inotifyAddWatch(fd, directory, UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB)) {
            Syscall.close(fd)
            throw CaptureError(.ioctlFailed, "cannot watch \(directory) for camera hot-plug", errno: e.rawValue, operation: "inotify_add_watch")
        }
        let pipe: (read: Int32, write: Int32)
        switch Syscall.pipe() {
        case .success(let p): pipe = p
        case .failure(let e):
            Syscall.close(fd)
            throw CaptureError(.ioctlFailed, "cannot create the monitor's wake-up pipe", errno: e.rawValue, operation: "pipe2")
        }
        self.fd = fd
        self.wakePipe = pipe
        let (stream, continuation) = AsyncStream<DeviceEvent>.makeStream()
        self.events = stream
        let check = isCamera ?? { path in (try? V4L2DeviceProvider().describe(path)) != nil }
        // The cameras already there: their removal is reported, their presence is not an event.
        let present = Set(V4L2DeviceProvider(devDirectory: directory).nodePaths().filter(check))
        // Stopped by WorkerThread's protocol: the flag, then a byte to the wake-up pipe the loop polls.
        thread = WorkerThread(name: "v4l2-hotplug", wake: { _ = Syscall.write(pipe.write, 1) }) { _ in
            HotplugMonitor.loop(fd: fd, wake: pipe.read, directory: directory, known: present, isCamera: check, continuation: continuation)
        }
    }

    deinit { stop() }

    private static func loop(
        fd: Int32, wake: Int32, directory: String, known: Set<String>, isCamera: @Sendable (String) -> Bool,
        continuation: AsyncStream<DeviceEvent>.Continuation
    ) {
        var cameras = known
        var pending = Set<String>() // created but not (yet) a camera: udev may still be setting permissions
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        defer { buf.deallocate() }
        let headerSize = MemoryLayout<inotify_event>.size
        outer: while true {
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            guard case .success = Syscall.poll(&fds, timeoutMs: -1) else { break }
            if fds[1].revents != 0 { break }
            guard case .success(let n) = Syscall.read(fd, buf), n > 0 else { continue }
            var off = 0
            while off + headerSize <= n {
                let ev = buf.loadUnaligned(fromByteOffset: off, as: inotify_event.self)
                let len = Int(ev.len)
                let nameStart = off + headerSize, nameEnd = min(n, nameStart + len)
                let name = String(decoding: UnsafeRawBufferPointer(rebasing: buf[nameStart..<nameEnd]).prefix { $0 != 0 }, as: UTF8.self)
                off += headerSize + len
                if ev.mask & UInt32(IN_IGNORED) != 0 { break outer }
                guard name.hasPrefix("video"), Int(name.dropFirst(5)) != nil else { continue }
                let path = directory + "/" + name
                if ev.mask & UInt32(IN_CREATE | IN_MOVED_TO | IN_ATTRIB) != 0, !cameras.contains(path) {
                    if isCamera(path) {
                        cameras.insert(path)
                        pending.remove(path)
                        continuation.yield(.connected(path: path))
                    } else {
                        pending.insert(path)
                    }
                }
                if ev.mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
                    pending.remove(path)
                    if cameras.remove(path) != nil { continuation.yield(.disconnected(path: path)) }
                }
            }
        }
        continuation.finish()
    }

    /// Stops watching; the event stream finishes. Safe to call more than once, from any thread.
    public func stop() {
        let first = stopped.withLock { s -> Bool in
            defer { s = true }
            return !s
        }
        guard first else { return }
        thread.stop()
        Syscall.close(fd)
        Syscall.close(wakePipe.read)
        Syscall.close(wakePipe.write)
    }
}

extension CameraVideoCapturer {
    /// Camera connected/disconnected notifications (as AVFoundation's `AVCaptureDeviceWasConnected/
    /// DisconnectedNotification`), from inotify on `directory`. Stop the monitor (or release it) when done.
    /// A camera that goes away while capturing also stops capture with a `.disconnected` error.
    public func watchDevices(directory: String = "/dev") throws(CaptureError) -> HotplugMonitor {
        try HotplugMonitor(directory: directory)
    }
}
