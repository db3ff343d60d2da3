import CV4L2
import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

// Controls through the extended-control ioctls (as v4l2-ctl and Chromium do): VIDIOC_QUERY_EXT_CTRL walks
// every control with V4L2_CTRL_FLAG_NEXT_CTRL | NEXT_COMPOUND, VIDIOC_QUERYMENU names menu entries,
// VIDIOC_G/S_EXT_CTRLS read and write one control at a time. Controls are device state, so a second
// descriptor works while another one streams. Every number from the driver is range-checked: the walk
// stops at 4096 controls or an id that does not increase, menus at 1024 entries, strings at 64 KiB.

extension V4L2Node {
    static let maxControls = 4096
    static let maxMenuItems = 1024
    static let maxStringLength: Int64 = 65536

    /// Every control, in the driver's order, with its current value (control classes as headings).
    func controls() throws(CaptureError) -> [CameraControl] {
        var out: [CameraControl] = []
        var next: UInt32 = CV4L2_CTRL_FLAG_NEXT_CTRL | CV4L2_CTRL_FLAG_NEXT_COMPOUND
        var last: UInt32 = 0
        while out.count < V4L2Node.maxControls {
            var q = v4l2_query_ext_ctrl()
            q.id = next
            if let e = io.errnoOf(fd, .queryExtControl, &q) {
                if e.rawValue == EINVAL || e.rawValue == ENOTTY { break } // the end (ENOTTY: no controls at all)
                throw io.error(e, "VIDIOC_QUERY_EXT_CTRL after \(CameraControlID(last))")
            }
            guard q.id > last else { break } // a driver that does not advance would loop forever
            last = q.id
            next = q.id | CV4L2_CTRL_FLAG_NEXT_CTRL | CV4L2_CTRL_FLAG_NEXT_COMPOUND
            if q.flags & CameraControl.Flags.disabled.rawValue != 0 { continue }
            out.append(describe(q))
        }
        return out
    }

    /// One control by id (nil when the device has none with that id).
    func control(_ id: CameraControlID) throws(CaptureError) -> CameraControl? {
        var q = v4l2_query_ext_ctrl()
        q.id = id.rawValue
        if let e = io.errnoOf(fd, .queryExtControl, &q) {
            if e.rawValue == EINVAL || e.rawValue == ENOTTY { return nil }
            throw io.error(e, "VIDIOC_QUERY_EXT_CTRL \(id)")
        }
        guard q.id == id.rawValue, q.flags & CameraControl.Flags.disabled.rawValue == 0 else { return nil }
        return describe(q)
    }

    private func describe(_ q: v4l2_query_ext_ctrl) -> CameraControl {
        let kind = CameraControl.Kind(v4l2Type: q.type)
        let flags = CameraControl.Flags(rawValue: q.flags)
        var dims: [Int] = []
        if q.nr_of_dims > 0 {
            withUnsafeBytes(of: q.dims) { raw in
                let d = raw.bindMemory(to: UInt32.self)
                for i in 0..<min(Int(q.nr_of_dims), d.count) { dims.append(Int(d[i])) }
            }
        }
        var c = CameraControl(
            id: CameraControlID(q.id), label: cString(q.name), kind: kind, minimum: q.minimum, maximum: q.maximum,
            step: q.step, defaultValue: q.default_value, flags: flags, dimensions: dims)
        if kind.isMenu { c.menu = menuItems(q) }
        c.value = readValue(c, elems: q.elems)
        return c
    }

    private func menuItems(_ q: v4l2_query_ext_ctrl) -> [CameraControl.MenuItem] {
        guard q.minimum >= 0, q.maximum >= q.minimum, q.maximum <= Int64(UInt32.max) else { return [] }
        var items: [CameraControl.MenuItem] = []
        // At most 4096 indices are asked, whatever range the driver claims (it may skip most of them).
        var i = q.minimum
        let last = min(q.maximum, q.minimum + 4095)
        while i <= last && items.count < V4L2Node.maxMenuItems {
            var m = v4l2_querymenu()
            m.id = q.id
            m.index = UInt32(i)
            if io.errnoOf(fd, .queryMenu, &m) == nil { // EINVAL: the driver skips this index
                if q.type == 9 {
                    let v = m.value
                    items.append(.init(index: i, name: String(v), value: v))
                } else {
                    items.append(.init(index: i, name: cString(m.name)))
                }
            }
            i += 1
        }
        return items
    }

    /// The current value of a scalar, string or area control; nil for what cannot be read (buttons, write-only
    /// controls, arrays).
    func readValue(_ c: CameraControl, elems: UInt32 = 1) -> CameraControl.Value? {
        if c.flags.contains(.writeOnly) || c.kind == .button || c.kind == .ctrlClass { return nil }
        if c.kind == .string {
            guard c.maximum >= 0, c.maximum < V4L2Node.maxStringLength else { return nil }
            let size = Int(c.maximum) + 1
            var buf = [CChar](repeating: 0, count: size)
            let ok = buf.withUnsafeMutableBufferPointer { b -> Bool in
                var ctrl = v4l2_ext_control()
                ctrl.id = c.id.rawValue
                ctrl.size = UInt32(size)
                ctrl.string = b.baseAddress
                return getExt(&ctrl) == nil
            }
            guard ok else { return nil }
            return .string(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        if c.kind == .area, elems <= 1 {
            // struct v4l2_area { __u32 width, height; }: shown as v4l2-ctl prints it, WIDTHxHEIGHT.
            var area: (UInt32, UInt32) = (0, 0)
            let ok = withUnsafeMutableBytes(of: &area) { b -> Bool in
                var ctrl = v4l2_ext_control()
                ctrl.id = c.id.rawValue
                ctrl.size = UInt32(b.count)
                ctrl.ptr = b.baseAddress
                return getExt(&ctrl) == nil
            }
            return ok ? .string("\(area.0)x\(area.1)") : nil
        }
        guard c.kind.isScalar, elems <= 1, !c.flags.contains(.hasPayload) else { return nil }
        var ctrl = v4l2_ext_control()
        ctrl.id = c.id.rawValue
        guard getExt(&ctrl) == nil else { return nil }
        switch c.kind {
        case .integer64: return .integer(ctrl.value64)
        case .bitmask: return .integer(Int64(UInt32(bitPattern: ctrl.value)))
        default: return .integer(Int64(ctrl.value))
        }
    }

    private func getExt(_ ctrl: inout v4l2_ext_control) -> Errno? { ext(.getExtControls, &ctrl) }
    private func setExt(_ ctrl: inout v4l2_ext_control) -> Errno? { ext(.setExtControls, &ctrl) }

    /// One control's current value through VIDIOC_G/S_EXT_CTRLS (a list of one).
    private func ext(_ op: IOCTL, _ ctrl: inout v4l2_ext_control) -> Errno? {
        withUnsafeMutablePointer(to: &ctrl) { p in
            var list = v4l2_ext_controls()
            list.which = CV4L2_CTRL_WHICH_CUR_VAL
            list.count = 1
            list.controls = p
            return io.errnoOf(fd, op, &list)
        }
    }

    /// Checks, sets and reads back one control.
    func setControl(_ id: CameraControlID, to value: CameraControl.Value) throws(CaptureError) -> CameraControl {
        guard let c = try control(id) else {
            throw CaptureError(.unknownControl, "\(path) has no control \(id)", device: path, operation: "set \(id)")
        }
        try c.validate(value, device: path)
        var ctrl = v4l2_ext_control()
        ctrl.id = id.rawValue
        var e: Errno?
        switch value {
        case .integer(let v):
            if c.kind == .integer64 {
                ctrl.value64 = v
            } else if c.kind == .bitmask {
                ctrl.value = Int32(bitPattern: UInt32(truncatingIfNeeded: v))
            } else {
                // validate() has checked the range for everything but buttons, whose value is ignored.
                ctrl.value = Int32(clamping: v)
            }
            e = setExt(&ctrl)
        case .string(let s):
            var bytes = Array(s.utf8CString)
            e = bytes.withUnsafeMutableBufferPointer { b in
                ctrl.size = UInt32(b.count)
                ctrl.string = b.baseAddress
                return setExt(&ctrl)
            }
        }
        if let e { throw controlError(e, c, value) }
        var read = (try self.control(id)) ?? c
        if read.value == nil { read.value = value } // write-only controls and buttons: what was written
        return read
    }

    /// The errno of a refused set as a typed error naming the control and the value.
    private func controlError(_ e: Errno, _ c: CameraControl, _ value: CameraControl.Value) -> CaptureError {
        let op = "VIDIOC_S_EXT_CTRLS \(c.name)=\(value)"
        switch e.rawValue {
        case ERANGE, EINVAL:
            return CaptureError(
                .controlOutOfRange, "\(path) refused \(c.name)=\(value) (allowed: \(c.minimum)...\(c.maximum))", errno: e.rawValue, device: path,
                operation: op)
        case EACCES:
            if c.flags.contains(.readOnly) {
                return CaptureError(.controlReadOnly, "control \(c.name) of \(path) is read-only", errno: e.rawValue, device: path, operation: op)
            }
            return CaptureError(
                .controlInactive,
                "\(path) refused \(c.name)=\(value): the control cannot be set in the camera's current mode (is its automatic mode on?)",
                errno: e.rawValue, device: path, operation: op)
        case EBUSY:
            return CaptureError(
                .controlBusy, "control \(c.name) of \(path) is busy (grabbed while streaming, or another program holds it); \(value) was not applied",
                errno: e.rawValue, device: path, operation: op)
        default:
            return io.error(e, op)
        }
    }

    /// A read-only camera property (orientation, sensor rotation): its value, or nil when absent.
    func property(_ id: CameraControlID) -> Int64? {
        var ctrl = v4l2_ext_control()
        ctrl.id = id.rawValue
        guard getExt(&ctrl) == nil else { return nil }
        return Int64(ctrl.value)
    }
}

extension CameraControlID {
    /// `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME`: a button that makes an encoding camera's next frame a key frame.
    static let forceKeyFrame = CameraControlID(rawValue: CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME)
    /// `V4L2_CID_MPEG_VIDEO_BITRATE`: an encoding camera's target bitrate, bits per second.
    static let videoBitrate = CameraControlID(rawValue: CV4L2_CID_MPEG_VIDEO_BITRATE)
}
