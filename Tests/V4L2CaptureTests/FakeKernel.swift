import CV4L2
import Foundation
import VideoCapture
@testable import V4L2Capture

/// A scripted V4L2 driver: enough of the ioctl surface to stream, with faults on demand.
final class FakeKernel: V4L2Kernel, @unchecked Sendable {
    // @unchecked: every member is guarded by `lock`.
    enum Event {
        case frame(bytesUsed: Int?, flags: UInt32, timestampNs: Int64?, sequence: UInt32?), error(Int32), eintr
        /// A `V4L2_EVENT_SOURCE_CHANGE` (resolution) pending: poll says POLLPRI, VIDIOC_DQEVENT takes it.
        case sourceChange
    }

    private let lock = NSCondition() // the lock, and the "something happened" signal poll() waits on
    private var script: [Event] = []
    var openErrno: Int32 = 0
    private var failOn: [UInt: Int32] = [:] // request → errno (once)
    var extraStride = 64
    private(set) var calls: [String] = []
    private(set) var openFDs: Set<Int32> = []
    private(set) var mapped: [Int: UnsafeMutableRawPointer] = [:]
    private var buffers: [UnsafeMutableRawPointer] = []
    deinit { buffers.forEach { $0.deallocate() } } // a test that never freed them (LeakSanitizer stays quiet)
    private var queue: [Int] = []
    private var fmt = (width: 640, height: 480, pf: PixelFormat.yuyv.rawValue)
    private var fps = (num: UInt32(1), den: UInt32(30))
    private var streaming = false
    private var seq: UInt32 = 0
    private var nextFD: Int32 = 10

    // Multi-planar mode: a `V4L2_CAP_VIDEO_CAPTURE_MPLANE` device offering NM12 (two planes) and YUYV (one),
    // answering only the multi-planar buffer type. The faults below make its replies malformed.
    /// Answer VIDIOC_EXPBUF (vb2 drivers do; false plays one that cannot export).
    var exportsDMABuf = true
    /// Play a multi-planar device (set before the first call).
    var multiPlanar = false
    /// G_FMT reports this many planes instead of the format's.
    var reportedPlanes: Int?
    /// QUERYBUF reports plane 1 (else 0) this many bytes shorter than its sizeimage.
    var planeLengthShortfall = 0
    /// DQBUF reports plane 1 (else 0) with bytesused this many bytes beyond its length.
    var bytesUsedExcess = 0
    /// data_offset of plane 0 in every dequeued buffer (the payload starts after it, as vivid's NV16M).
    var dataOffset = 0
    /// The bytes of the next frames (an H.264 camera's access units): each `.frame` event takes the first, copies it
    /// into the buffer and, unless the event names its own `bytesUsed`, reports its length as `bytesused`.
    var payloads: [[UInt8]] = []
    /// QUERYCAP's driver name.
    var driverName = "fake"
    /// Play an HDMI receiver: input 0 has `V4L2_IN_CAP_DV_TIMINGS` and QUERY_DV_TIMINGS detects this size at 60 fps
    /// (720p's CTA-861 frame: 1650x750 with blanking, 74.25 MHz); nil detects no signal (ENOLINK).
    var receiver: (width: Int, height: Int)??
    /// S_DV_TIMINGS calls, with the size set.
    private(set) var timingsSet: [String] = []
    /// As v4l2loopback: DQBUF hands out the buffers round-robin and writes the next payload into one whether or not
    /// the reader re-queued it (its writer keeps no ownership of a dequeued buffer).
    var ignoresOwnership = false
    private var roundRobin = 0
    /// Planes of the current format, each (bytesperline, sizeimage).
    private var mpPlanes: [(stride: Int, size: Int)] {
        if fmt.pf == PixelFormat.nv12m.rawValue {
            let s = fmt.width + extraStride
            return [(s, s * fmt.height + dataOffset), (s, s * ((fmt.height + 1) / 2))]
        }
        let s = fmt.width * 2 + extraStride
        return [(s, s * fmt.height + dataOffset)]
    }
    /// The byte every plane `p` of buffer `b` is filled with (so a test can tell the planes apart).
    static func fill(buffer b: Int, plane p: Int) -> UInt8 { UInt8(0x10 * (p + 1) + b) }

    private func multiPlanarIoctl(_ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32? {
        switch request {
        case CV4L2_VIDIOC_QUERYCAP:
            let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
            cap.pointee = v4l2_capability()
            setCString(&cap.pointee.card, "Fake SoC Cam")
            setCString(&cap.pointee.driver, "fake-mp")
            setCString(&cap.pointee.bus_info, "platform:fake-mp")
            cap.pointee.capabilities = CV4L2_CAP_DEVICE_CAPS | CV4L2_CAP_VIDEO_CAPTURE_MPLANE | CV4L2_CAP_STREAMING
            cap.pointee.device_caps = CV4L2_CAP_VIDEO_CAPTURE_MPLANE | CV4L2_CAP_STREAMING
        case CV4L2_VIDIOC_ENUM_FMT:
            let d = arg.assumingMemoryBound(to: v4l2_fmtdesc.self)
            let table: [PixelFormat] = [.nv12m, .yuyv]
            guard d.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE, Int(d.pointee.index) < table.count else { return EINVAL }
            d.pointee.pixelformat = table[Int(d.pointee.index)].rawValue
            d.pointee.flags = 0
        case CV4L2_VIDIOC_ENUM_FRAMESIZES:
            let s = arg.assumingMemoryBound(to: v4l2_frmsizeenum.self)
            guard s.pointee.index == 0 else { return EINVAL }
            s.pointee.type = V4L2_FRMSIZE_TYPE_DISCRETE.rawValue
            s.pointee.discrete.width = 640
            s.pointee.discrete.height = 480
        case CV4L2_VIDIOC_S_FMT, CV4L2_VIDIOC_G_FMT, CV4L2_VIDIOC_S_PARM, CV4L2_VIDIOC_G_PARM, CV4L2_VIDIOC_REQBUFS:
            // The type sits first in v4l2_format, v4l2_streamparm and v4l2_requestbuffers (after count there).
            let type =
                request == CV4L2_VIDIOC_REQBUFS
                ? arg.assumingMemoryBound(to: v4l2_requestbuffers.self).pointee.type : arg.load(as: UInt32.self)
            guard type == CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE else { return EINVAL }
            if request == CV4L2_VIDIOC_S_FMT {
                let f = arg.assumingMemoryBound(to: v4l2_format.self)
                fmt = (Int(f.pointee.fmt.pix_mp.width), Int(f.pointee.fmt.pix_mp.height), f.pointee.fmt.pix_mp.pixelformat)
                log("S_FMT")
            } else if request == CV4L2_VIDIOC_G_FMT {
                let f = arg.assumingMemoryBound(to: v4l2_format.self)
                f.pointee.fmt.pix_mp.width = UInt32(fmt.width)
                f.pointee.fmt.pix_mp.height = UInt32(fmt.height)
                f.pointee.fmt.pix_mp.pixelformat = fmt.pf
                let planes = mpPlanes
                f.pointee.fmt.pix_mp.num_planes = UInt8(reportedPlanes ?? planes.count)
                withUnsafeMutableBytes(of: &f.pointee.fmt.pix_mp.plane_fmt) { raw in
                    for (i, p) in planes.enumerated() {
                        var pf = v4l2_plane_pix_format()
                        pf.bytesperline = UInt32(p.stride)
                        pf.sizeimage = UInt32(p.size)
                        raw.storeBytes(of: pf, toByteOffset: i * MemoryLayout<v4l2_plane_pix_format>.stride, as: v4l2_plane_pix_format.self)
                    }
                }
            } else if request == CV4L2_VIDIOC_S_PARM {
                fps = (1, 30)
            } else if request == CV4L2_VIDIOC_G_PARM {
                arg.assumingMemoryBound(to: v4l2_streamparm.self).pointee.parm.capture.timeperframe = v4l2_fract(
                    numerator: fps.num, denominator: fps.den)
            } else {
                let r = arg.assumingMemoryBound(to: v4l2_requestbuffers.self)
                log("REQBUFS \(r.pointee.count)")
                if r.pointee.count == 0 && !mapped.isEmpty { return EBUSY }
                buffers.forEach { $0.deallocate() }
                buffers = []
                queue = []
                let planes = mpPlanes
                for b in 0..<Int(r.pointee.count) {
                    for (p, plane) in planes.enumerated() {
                        let m = UnsafeMutableRawPointer.allocate(byteCount: plane.size, alignment: 64)
                        m.initializeMemory(as: UInt8.self, repeating: FakeKernel.fill(buffer: b, plane: p), count: plane.size)
                        buffers.append(m)
                    }
                }
            }
        case CV4L2_VIDIOC_QUERYBUF, CV4L2_VIDIOC_QBUF, CV4L2_VIDIOC_DQBUF:
            let b = arg.assumingMemoryBound(to: v4l2_buffer.self)
            let planes = mpPlanes
            // A multi-planar call carries its plane array, as long as the format's planes.
            guard b.pointee.type == CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE, Int(b.pointee.length) == planes.count, let pa = b.pointee.m.planes
            else { return EINVAL }
            if request == CV4L2_VIDIOC_QUERYBUF {
                for p in planes.indices {
                    pa[p].length = UInt32(planes[p].size - (p == planes.count - 1 ? planeLengthShortfall : 0))
                    pa[p].m.mem_offset = UInt32((Int(b.pointee.index) * planes.count + p) * 4096)
                }
            } else if request == CV4L2_VIDIOC_QBUF {
                queue.append(Int(b.pointee.index))
                log("QBUF")
            } else {
                guard streaming, !script.isEmpty else { return EAGAIN }
                switch script[0] {
                case .sourceChange: return EAGAIN
                case .eintr:
                    script.removeFirst()
                    return EINTR
                case .error(let e):
                    script.removeFirst()
                    return e
                case .frame(let used, let flags, let ts, let sequence):
                    guard !queue.isEmpty else { return EAGAIN }
                    script.removeFirst()
                    b.pointee.index = UInt32(queue.removeFirst())
                    for p in planes.indices {
                        pa[p].bytesused = UInt32(planes[p].size)
                        pa[p].data_offset = p == 0 ? UInt32(dataOffset) : 0
                    }
                    if let used { pa[0].bytesused = UInt32(used) }
                    pa[planes.count - 1].bytesused += UInt32(bytesUsedExcess)
                    b.pointee.flags = flags
                    seq = sequence ?? seq &+ 1
                    b.pointee.sequence = seq
                    let t = ts ?? monotonicNanoseconds()
                    b.pointee.timestamp = timeval(tv_sec: Int(t / 1_000_000_000), tv_usec: Int(t % 1_000_000_000 / 1000))
                }
            }
        default: return nil
        }
        return 0
    }

    /// A control of the fake driver. Flags that depend on state (gain inactive while gain_automatic is on,
    /// horizontal_flip grabbed while streaming) are computed on each query, as a driver does.
    struct Control {
        var id: UInt32, type: UInt32, name: String
        var min: Int64 = 0, max: Int64 = 0, step: UInt64 = 1, def: Int64 = 0, flags: UInt32 = 0
        var value: Int64 = 0
        var menu: [Int64: String] = [:]
        var text = ""
    }
    /// The fake's controls, sorted by id (tests may change values and add or remove controls).
    var controls: [Control] = FakeKernel.defaultControls
    static let defaultControls: [Control] = [
        Control(id: 0x0098_0001, type: 6, name: "User Controls", flags: 0x44),
        Control(id: 0x0098_0900, type: 1, name: "Brightness", min: 0, max: 255, step: 1, def: 128, flags: 0x20, value: 128),
        Control(id: 0x0098_0912, type: 2, name: "Gain, Automatic", min: 0, max: 1, def: 1, flags: 0x08, value: 1),
        Control(id: 0x0098_0913, type: 1, name: "Gain", min: 0, max: 255, step: 1, def: 100, value: 100),
        Control(id: 0x0098_0914, type: 2, name: "Horizontal Flip", min: 0, max: 1),
        Control(
            id: 0x0098_0918, type: 3, name: "Power Line Frequency", min: 0, max: 2, def: 2, value: 2,
            menu: [0: "Disabled", 1: "50 Hz", 2: "60 Hz"]),
        Control(id: 0x0098_091b, type: 1, name: "Sharpness", min: 0, max: 100, step: 10, def: 50, value: 50),
        Control(id: 0x0098_f900, type: 4, name: "Button", flags: 0x240),
        Control(
            id: 0x0098_f904, type: 3, name: "Menu", min: 1, max: 4, def: 3, value: 3, menu: [1: "Menu Item 1", 3: "Menu Item 3", 4: "Menu Item 4"]),
        Control(id: 0x0098_f907, type: 9, name: "Integer Menu", min: 1, max: 3, def: 2, value: 2, menu: [1: "2", 2: "5", 3: "13"]),
        Control(id: 0x0098_f903, type: 5, name: "Integer 64 Bits", min: .min, max: .max, def: 0, value: 1 << 40),
        Control(id: 0x0098_f905, type: 7, name: "String", min: 2, max: 4, step: 1, flags: 0x100, text: "ab"),
        // An area (struct v4l2_area, a payload control): width in the high 32 bits of `value`, height in the low.
        Control(id: 0x0098_f90b, type: 0x106, name: "Area", flags: 0x100, value: 1000 << 32 | 2000),
        Control(id: 0x009a_0001, type: 6, name: "Camera Controls", flags: 0x44),
        Control(
            id: 0x009a_0922, type: 3, name: "Camera Orientation", min: 0, max: 2, flags: 0x04, value: 2,
            menu: [0: "Front", 1: "Back", 2: "External"]),
        Control(id: 0x009a_0923, type: 1, name: "Camera Sensor Rotation", min: 0, max: 270, step: 90, flags: 0x04, value: 0),
    ].sorted { $0.id < $1.id }
    func setControlValue(_ id: UInt32, _ v: Int64) {
        lock.withLock { if let i = controls.firstIndex(where: { $0.id == id }) { controls[i].value = v } }
    }
    func controlValue(_ id: UInt32) -> Int64? { lock.withLock { controls.first { $0.id == id }?.value } }
    func editControl(_ id: UInt32, _ body: (inout Control) -> Void) {
        lock.withLock { if let i = controls.firstIndex(where: { $0.id == id }) { body(&controls[i]) } }
    }
    func removeControl(_ id: UInt32) { lock.withLock { controls.removeAll { $0.id == id } } }

    private func dynamicFlags(_ c: Control) -> UInt32 {
        var f = c.flags
        if c.id == 0x0098_0913, controls.first(where: { $0.id == 0x0098_0912 })?.value == 1 { f |= 0x10 | 0x80 }
        if c.id == 0x0098_0914, streaming { f |= 0x02 }
        return f
    }

    private func controlIoctl(_ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32? {
        switch request {
        case CV4L2_VIDIOC_QUERY_EXT_CTRL:
            let q = arg.assumingMemoryBound(to: v4l2_query_ext_ctrl.self)
            let asked = q.pointee.id
            let next = asked & (CV4L2_CTRL_FLAG_NEXT_CTRL | CV4L2_CTRL_FLAG_NEXT_COMPOUND) != 0
            let base = asked & ~(CV4L2_CTRL_FLAG_NEXT_CTRL | CV4L2_CTRL_FLAG_NEXT_COMPOUND)
            guard let c = next ? controls.first(where: { $0.id > base }) : controls.first(where: { $0.id == asked }) else { return EINVAL }
            q.pointee = v4l2_query_ext_ctrl()
            q.pointee.id = c.id
            q.pointee.type = c.type
            setCString(&q.pointee.name, c.name)
            q.pointee.minimum = c.min
            q.pointee.maximum = c.max
            q.pointee.step = c.step
            q.pointee.default_value = c.def
            q.pointee.flags = dynamicFlags(c)
            q.pointee.elems = 1
            q.pointee.elem_size = c.type == 5 ? 8 : 4
            return 0
        case CV4L2_VIDIOC_QUERYMENU:
            let m = arg.assumingMemoryBound(to: v4l2_querymenu.self)
            guard let c = controls.first(where: { $0.id == m.pointee.id }), let item = c.menu[Int64(m.pointee.index)] else { return EINVAL }
            if c.type == 9 { m.pointee.value = Int64(item)! } else { setCString(&m.pointee.name, item) }
            return 0
        case CV4L2_VIDIOC_G_EXT_CTRLS, CV4L2_VIDIOC_S_EXT_CTRLS:
            let list = arg.assumingMemoryBound(to: v4l2_ext_controls.self)
            guard list.pointee.count == 1, let ctrl = list.pointee.controls else { return EINVAL }
            guard let i = controls.firstIndex(where: { $0.id == ctrl.pointee.id }), controls[i].type != 6 else { return EINVAL }
            let c = controls[i], flags = dynamicFlags(c)
            if c.type == 7 { // strings: through the pointer, `size` bytes with the terminator
                guard let p = ctrl.pointee.string else { return EFAULT }
                if request == CV4L2_VIDIOC_G_EXT_CTRLS {
                    let bytes = Array(c.text.utf8)
                    guard Int(ctrl.pointee.size) > bytes.count else {
                        ctrl.pointee.size = UInt32(bytes.count + 1)
                        return ENOSPC
                    }
                    for (i, b) in bytes.enumerated() { p[i] = CChar(bitPattern: b) }
                    p[bytes.count] = 0
                    return 0
                }
                let s = String(cString: p)
                guard s.utf8.count >= c.min, s.utf8.count <= c.max else { return ERANGE }
                controls[i].text = s
                log("S_EXT_CTRLS \(CameraControl.key(from: c.name))='\(s)'")
                return 0
            }
            if c.type == 0x106 { // an area: 8 bytes through the pointer
                guard let p = ctrl.pointee.ptr else { return EFAULT }
                guard ctrl.pointee.size == 8 else { return EINVAL }
                guard request == CV4L2_VIDIOC_G_EXT_CTRLS else { return EACCES }
                p.storeBytes(of: UInt32(truncatingIfNeeded: c.value >> 32), as: UInt32.self)
                p.storeBytes(of: UInt32(truncatingIfNeeded: c.value), toByteOffset: 4, as: UInt32.self)
                return 0
            }
            if request == CV4L2_VIDIOC_G_EXT_CTRLS {
                if flags & 0x40 != 0 { return EACCES }
                if c.type == 5 { ctrl.pointee.value64 = c.value } else { ctrl.pointee.value = Int32(truncatingIfNeeded: c.value) }
                return 0
            }
            if flags & 0x04 != 0 { return EACCES }
            if flags & 0x02 != 0 { return EBUSY }
            var v = c.type == 5 ? ctrl.pointee.value64 : Int64(ctrl.pointee.value)
            switch c.type {
            case 3, 9:
                guard v >= c.min, v <= c.max else { return ERANGE }
                guard c.menu[v] != nil else { return EINVAL }
            case 2: v = v != 0 ? 1 : 0
            case 4: v = 0
            case 1, 5: // the V4L2 core clamps and rounds to the step
                v = Swift.max(c.min, Swift.min(c.max, v))
                if c.step > 1 { v = c.min + (v - c.min + Int64(c.step) / 2) / Int64(c.step) * Int64(c.step) }
            default: break
            }
            controls[i].value = v
            if c.type == 5 { ctrl.pointee.value64 = v } else { ctrl.pointee.value = Int32(truncatingIfNeeded: v) }
            log("S_EXT_CTRLS \(CameraControl.key(from: c.name))=\(v)")
            return 0
        default: return nil
        }
    }

    var stride: Int { lock.withLock { fmt.width * 2 + extraStride } }
    var sizeImage: Int { lock.withLock { (fmt.width * 2 + extraStride) * fmt.height } }
    func log(_ s: String) {
        calls.append(s)
        lock.broadcast()
    }

    func push(_ events: [Event]) {
        lock.withLock {
            script += events
            lock.broadcast()
        }
    }
    /// Changes the fake's settings under its lock (safe while streaming).
    func configure(_ body: (FakeKernel) -> Void) { lock.withLock { body(self) } }
    /// Makes the next `request` fail with `errno` (once); safe while streaming.
    func fail(_ request: UInt, with errno: Int32) {
        lock.withLock {
            failOn[request] = errno
            lock.broadcast()
        }
    }
    /// Waits until the stream has called ioctl `request` `count` times in all (an event, not a delay).
    func waitForCalls(_ name: String, count: Int = 1, timeout: Double = 10) -> Bool {
        let end = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while calls.filter({ $0 == name }).count < count { if !lock.wait(until: end) { return false } }
        return true
    }
    var mappedCount: Int { lock.withLock { mapped.count } }
    var openCount: Int { lock.withLock { openFDs.count } }
    var callLog: [String] { lock.withLock { calls } }
    var scriptEmpty: Bool { lock.withLock { script.isEmpty } }

    func open(_ path: String) -> (fd: Int32, errno: Int32) {
        lock.withLock {
            if openErrno != 0 { return (-1, openErrno) }
            nextFD += 1
            openFDs.insert(nextFD)
            log("open")
            return (nextFD, 0)
        }
    }
    func close(_ fd: Int32) {
        lock.withLock {
            openFDs.remove(fd)
            log("close")
        }
    }

    func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
        lock.withLock {
            let i = Int(offset / 4096)
            guard i < buffers.count else { return (nil, EINVAL) }
            mapped[i] = buffers[i]
            return (buffers[i], 0)
        }
    }
    func munmap(_ pointer: UnsafeMutableRawPointer, length: Int) {
        lock.withLock {
            if let k = mapped.first(where: { $0.value == pointer })?.key {
                mapped[k] = nil
                log("munmap")
            }
        }
    }

    /// As the kernel's poll: returns at once when an event is ready, else waits for one (a push, a QBUF)
    /// up to the timeout.
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        let end = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        while true {
            if case .sourceChange = script.first { return Int32(POLLPRI) }
            let ready = !script.isEmpty && (!queue.isEmpty || ignoresOwnership || { if case .frame = script[0] { false } else { true } }())
            if ready { return Int32(POLLIN) }
            if !lock.wait(until: end) { return 0 }
        }
    }

    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        if let e = failOn.removeValue(forKey: request) {
            log("fail \(request)")
            return e
        }
        if let r = controlIoctl(request, arg) { return r }
        if request == CV4L2_VIDIOC_EXPBUF { // a new descriptor per buffer plane, counted among the open ones
            let x = arg.assumingMemoryBound(to: v4l2_exportbuffer.self)
            guard exportsDMABuf else { return ENOTTY }
            let planes = multiPlanar ? mpPlanes.count : 1
            guard x.pointee.index < 64, Int(x.pointee.plane) < planes, x.pointee.flags & UInt32(O_CLOEXEC) != 0 else { return EINVAL }
            nextFD += 1
            openFDs.insert(nextFD)
            x.pointee.fd = nextFD
            log("EXPBUF \(x.pointee.index).\(x.pointee.plane)")
            return 0
        }
        if multiPlanar, let r = multiPlanarIoctl(request, arg) { return r }
        switch request {
        case CV4L2_VIDIOC_QUERYCAP:
            let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
            cap.pointee = v4l2_capability()
            setCString(&cap.pointee.card, "Fake Cam")
            setCString(&cap.pointee.driver, driverName)
            setCString(&cap.pointee.bus_info, "usb-fake-1")
            cap.pointee.capabilities = CV4L2_CAP_DEVICE_CAPS | CV4L2_CAP_VIDEO_CAPTURE | CV4L2_CAP_STREAMING
            cap.pointee.device_caps = CV4L2_CAP_VIDEO_CAPTURE | CV4L2_CAP_STREAMING
        case CV4L2_VIDIOC_ENUM_FMT:
            let d = arg.assumingMemoryBound(to: v4l2_fmtdesc.self)
            let table: [(PixelFormat, UInt32)] = [(.yuyv, 0), (.mjpeg, CV4L2_FMT_FLAG_COMPRESSED), (.rgb24, CV4L2_FMT_FLAG_EMULATED)]
            guard Int(d.pointee.index) < table.count else { return EINVAL }
            d.pointee.pixelformat = table[Int(d.pointee.index)].0.rawValue
            d.pointee.flags = table[Int(d.pointee.index)].1
        case CV4L2_VIDIOC_ENUM_FRAMESIZES:
            let s = arg.assumingMemoryBound(to: v4l2_frmsizeenum.self)
            if s.pointee.pixel_format == PixelFormat.yuyv.rawValue {
                let sizes = [(640, 480), (320, 240)]
                guard Int(s.pointee.index) < sizes.count else { return EINVAL }
                s.pointee.type = V4L2_FRMSIZE_TYPE_DISCRETE.rawValue
                s.pointee.discrete.width = UInt32(sizes[Int(s.pointee.index)].0)
                s.pointee.discrete.height = UInt32(sizes[Int(s.pointee.index)].1)
            } else {
                guard s.pointee.index == 0 else { return EINVAL }
                s.pointee.type = V4L2_FRMSIZE_TYPE_STEPWISE.rawValue
                s.pointee.stepwise = v4l2_frmsize_stepwise(
                    min_width: 160, max_width: 1920, step_width: 8, min_height: 120, max_height: 1080, step_height: 8)
            }
        case CV4L2_VIDIOC_ENUM_FRAMEINTERVALS:
            let f = arg.assumingMemoryBound(to: v4l2_frmivalenum.self)
            guard f.pointee.index < 2 else { return EINVAL }
            f.pointee.type = V4L2_FRMIVAL_TYPE_DISCRETE.rawValue
            f.pointee.discrete = v4l2_fract(numerator: 1, denominator: f.pointee.index == 0 ? 30 : 15)
        case CV4L2_VIDIOC_S_FMT:
            let f = arg.assumingMemoryBound(to: v4l2_format.self)
            fmt = (Int(f.pointee.fmt.pix.width), Int(f.pointee.fmt.pix.height), f.pointee.fmt.pix.pixelformat)
            log("S_FMT")
        case CV4L2_VIDIOC_G_FMT:
            let f = arg.assumingMemoryBound(to: v4l2_format.self)
            f.pointee.fmt.pix.width = UInt32(fmt.width)
            f.pointee.fmt.pix.height = UInt32(fmt.height)
            f.pointee.fmt.pix.pixelformat = fmt.pf
            f.pointee.fmt.pix.bytesperline = UInt32(fmt.width * 2 + extraStride)
            f.pointee.fmt.pix.sizeimage = UInt32((fmt.width * 2 + extraStride) * fmt.height)
            // An HD camera: Rec. 709, the encoding and transfer left to the colour space's defaults, full range.
            f.pointee.fmt.pix.colorspace = 3 // V4L2_COLORSPACE_REC709
            f.pointee.fmt.pix.quantization = 1 // V4L2_QUANTIZATION_FULL_RANGE
        case CV4L2_VIDIOC_S_PARM:
            let p = arg.assumingMemoryBound(to: v4l2_streamparm.self)
            // The driver rounds to what it has: 15 or 30.
            let asked = Double(p.pointee.parm.capture.timeperframe.denominator) / Double(max(1, p.pointee.parm.capture.timeperframe.numerator))
            fps = (1, asked > 20 ? 30 : 15)
        case CV4L2_VIDIOC_G_PARM:
            let p = arg.assumingMemoryBound(to: v4l2_streamparm.self)
            p.pointee.parm.capture.timeperframe = v4l2_fract(numerator: fps.num, denominator: fps.den)
        case CV4L2_VIDIOC_REQBUFS:
            let r = arg.assumingMemoryBound(to: v4l2_requestbuffers.self)
            log("REQBUFS \(r.pointee.count)")
            if r.pointee.count == 0 {
                if !mapped.isEmpty { return EBUSY }
                buffers.forEach { $0.deallocate() }
                buffers = []
                queue = []
            } else {
                let size = (fmt.width * 2 + extraStride) * fmt.height
                buffers.forEach { $0.deallocate() } // a second REQBUFS replaces them, as the kernel does
                buffers = (0..<Int(r.pointee.count)).map { _ in UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64) }
            }
        case CV4L2_VIDIOC_QUERYBUF:
            let b = arg.assumingMemoryBound(to: v4l2_buffer.self)
            b.pointee.length = UInt32((fmt.width * 2 + extraStride) * fmt.height)
            b.pointee.m.offset = b.pointee.index * 4096
        case CV4L2_VIDIOC_QBUF:
            let b = arg.assumingMemoryBound(to: v4l2_buffer.self)
            queue.append(Int(b.pointee.index))
            log("QBUF")
        case CV4L2_VIDIOC_STREAMON:
            streaming = true
            log("STREAMON")
        case CV4L2_VIDIOC_STREAMOFF:
            streaming = false
            queue = []
            log("STREAMOFF")
        case CV4L2_VIDIOC_ENUMINPUT:
            let i = arg.assumingMemoryBound(to: v4l2_input.self)
            guard i.pointee.index == 0 else { return EINVAL }
            i.pointee.capabilities = receiver == nil ? 0 : CV4L2_IN_CAP_DV_TIMINGS
        case CV4L2_VIDIOC_QUERY_DV_TIMINGS:
            guard let r = receiver else { return ENOTTY }
            guard let size = r else { return ENOLINK }
            let t = arg.assumingMemoryBound(to: v4l2_dv_timings.self)
            t.pointee.type = CV4L2_DV_BT_656_1120
            t.pointee.bt.width = UInt32(size.width)
            t.pointee.bt.height = UInt32(size.height)
            t.pointee.bt.pixelclock = 74_250_000
            (t.pointee.bt.hfrontporch, t.pointee.bt.hsync, t.pointee.bt.hbackporch) = (UInt32(1650 - size.width), 0, 0)
            (t.pointee.bt.vfrontporch, t.pointee.bt.vsync, t.pointee.bt.vbackporch) = (UInt32(750 - size.height), 0, 0)
        case CV4L2_VIDIOC_S_DV_TIMINGS:
            let t = arg.assumingMemoryBound(to: v4l2_dv_timings.self)
            timingsSet.append("\(t.pointee.bt.width)x\(t.pointee.bt.height)")
            fmt.width = Int(t.pointee.bt.width)
            fmt.height = Int(t.pointee.bt.height)
            log("S_DV_TIMINGS")
        case CV4L2_VIDIOC_SUBSCRIBE_EVENT:
            log("SUBSCRIBE_EVENT \(arg.assumingMemoryBound(to: v4l2_event_subscription.self).pointee.type)")
        case CV4L2_VIDIOC_DQEVENT:
            guard case .sourceChange = script.first else { return ENOENT }
            script.removeFirst()
            let e = arg.assumingMemoryBound(to: v4l2_event.self)
            e.pointee.type = CV4L2_EVENT_SOURCE_CHANGE
            e.pointee.u.src_change.changes = CV4L2_EVENT_SRC_CH_RESOLUTION
            log("DQEVENT")
        case CV4L2_VIDIOC_DQBUF:
            guard streaming, !script.isEmpty else { return EAGAIN }
            switch script[0] {
            case .sourceChange: return EAGAIN
            case .eintr:
                script.removeFirst()
                return EINTR
            case .error(let e):
                script.removeFirst()
                return e
            case .frame(let used, let flags, let ts, let sequence):
                guard !queue.isEmpty || ignoresOwnership else { return EAGAIN }
                script.removeFirst()
                let b = arg.assumingMemoryBound(to: v4l2_buffer.self)
                if ignoresOwnership {
                    b.pointee.index = UInt32(roundRobin % buffers.count)
                    roundRobin += 1
                    queue.removeAll { $0 == Int(b.pointee.index) }
                } else {
                    b.pointee.index = UInt32(queue.removeFirst())
                }
                var payloadCount: Int?
                if !payloads.isEmpty {
                    let p = payloads.removeFirst()
                    p.withUnsafeBytes { buffers[Int(b.pointee.index)].copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                    payloadCount = p.count
                }
                b.pointee.bytesused = UInt32(used ?? payloadCount ?? (fmt.width * 2 + extraStride) * fmt.height)
                b.pointee.flags = flags
                seq = sequence ?? seq &+ 1
                b.pointee.sequence = seq
                let t = ts ?? monotonicNanoseconds()
                b.pointee.timestamp = timeval(tv_sec: Int(t / 1_000_000_000), tv_usec: Int(t % 1_000_000_000 / 1000))
            }
        default: break
        }
        return 0
    }
}

let monotonicFlag = CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC
func goodFrame(_ ts: Int64? = nil, seq: UInt32? = nil) -> FakeKernel.Event {
    .frame(bytesUsed: nil, flags: monotonicFlag, timestampNs: ts, sequence: seq)
}

func setCString<T>(_ field: inout T, _ value: String) {
    withUnsafeMutableBytes(of: &field) { dst in
        let bytes = Array(value.utf8)
        for (i, b) in bytes.enumerated() where i < dst.count - 1 { dst[i] = b }
    }
}
