import CPipeWire
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

extension PipeWireCameraProvider {
    /// The controls of a V4L2 camera behind PipeWire: the `PropInfo` params of its node (PipeWire's V4L2 node makes
    /// one of each integer, boolean and menu control), under their V4L2 ids and `v4l2-ctl` names. PipeWire 0.3.65
    /// reports no current values, so each control's `value` is nil. A node of another kind (a
    /// libcamera camera, a stream of another program) lists none.
    public func controls(of device: CaptureDevice) throws(CaptureError) -> [CameraControl] {
        let n = try node(for: device.path)
        guard n.isV4L2 else { return [] }
        return try Self.controls(
            of: n.name, device: device.path, remote: configuration.remote, connection: try portalConnection(),
            timeoutMs: configuration.listTimeoutMs
        ).map(\.control)
    }

    /// Sets a control through PipeWire (a `Props` param on the node, which its V4L2 node applies with
    /// `VIDIOC_S_CTRL`). PipeWire 0.3.65 does not report what the driver applied: the control returned carries the
    /// value set. `.unknownControl` when the node lacks it, `.controlOutOfRange` outside its range.
    public func setControl(_ id: CameraControlID, to value: CameraControl.Value, on device: CaptureDevice) throws(CaptureError)
        -> CameraControl
    {
        let n = try node(for: device.path)
        let all =
            n.isV4L2
            ? try Self.controls(
                of: n.name, device: device.path, remote: configuration.remote, connection: try portalConnection(),
                timeoutMs: configuration.listTimeoutMs) : []
        guard let c = all.first(where: { $0.control.id == id }) else {
            throw CaptureError(.unknownControl, "\(device.path) has no control \(id) through PipeWire", device: device.path, operation: "set \(id)")
        }
        guard let v = value.integer, v >= c.control.minimum, v <= c.control.maximum, let v32 = Int32(exactly: v) else {
            throw CaptureError(
                .controlOutOfRange, "\(device.path) refused \(c.control.name)=\(value) (allowed: \(c.control.minimum)...\(c.control.maximum))",
                device: device.path, operation: "set \(c.control.name)")
        }
        var error = [CChar](repeating: 0, count: 512)
        let fd = try portalConnection()
        let r = cpw_set_control(
            configuration.remote, fd ?? -1, n.name, c.propID, c.kind, v32, Int32(configuration.listTimeoutMs), &error, error.count)
        guard r == 0 else {
            let text = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw CaptureError(
                r == -ETIMEDOUT ? .timeout : .ioctlFailed, "\(device.path): setting \(c.control.name)=\(v) failed: \(text)",
                errno: Int32(clamping: -Int(r)), device: device.path, operation: "set \(c.control.name)")
        }
        var applied = c.control
        applied.value = .integer(v)
        return applied
    }

    /// The node's controls, with the SPA property and kind each is set by.
    static func controls(of node: String, device: String, remote: String?, connection fd: Int32?, timeoutMs: Int) throws(CaptureError)
        -> [PipeWireControl]
    {
        var list: UnsafeMutablePointer<cpw_control>?
        var count = 0
        var error = [CChar](repeating: 0, count: 512)
        let r = cpw_controls(remote, fd ?? -1, node, Int32(timeoutMs), &list, &count, &error, error.count)
        defer { cpw_controls_free(list, count) }
        guard r == 0 else {
            let text = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw CaptureError(
                r == -ETIMEDOUT ? .timeout : .unknownDevice, text, errno: Int32(clamping: -Int(r)), device: device, operation: "PipeWire PropInfo")
        }
        guard let list else { return [] }
        return (0..<count).map { PipeWireControl(list[$0]) }
    }
}

extension PipeWireNode {
    /// A node PipeWire's V4L2 plugin made (its `object.path` is `v4l2:/dev/videoN`; the registry's properties
    /// carry no `device.api`).
    var isV4L2: Bool { api == "v4l2" || objectPath?.hasPrefix("v4l2:") == true }
}

/// One control as PipeWire's node describes it.
struct PipeWireControl {
    var propID: UInt32
    var kind: UInt32
    var control: CameraControl

    init(_ c: cpw_control) {
        propID = c.prop_id
        kind = c.kind
        let label = c.name.map { String(cString: $0) } ?? "Control \(c.v4l2_id)"
        var menu: [CameraControl.MenuItem] = []
        withUnsafeBytes(of: c.item_value) { values in
            withUnsafeBytes(of: c.item_label) { labels in
                for i in 0..<Int(min(c.n_items, UInt32(CPW_MAX_MENU))) {
                    let v = values.load(fromByteOffset: i * MemoryLayout<Int32>.stride, as: Int32.self)
                    let p = labels.load(fromByteOffset: i * MemoryLayout<UnsafeMutablePointer<CChar>?>.stride, as: UnsafeMutablePointer<CChar>?.self)
                    menu.append(CameraControl.MenuItem(index: Int64(v), name: p.map { String(cString: $0) } ?? "\(v)"))
                }
            }
        }
        let k: CameraControl.Kind =
            switch Int(c.kind) {
            case Int(CPW_CONTROL_BOOLEAN): .boolean
            case Int(CPW_CONTROL_MENU): .menu
            default: .integer
            }
        control = CameraControl(
            id: CameraControlID(c.v4l2_id), label: label, kind: k, minimum: Int64(c.minimum), maximum: Int64(c.maximum),
            step: UInt64(max(c.step, 1)), defaultValue: Int64(c.default_value), menu: menu)
    }
}
