import Foundation

/// A camera's controls as text in `v4l2-ctl --list-ctrls-menus` style (so the two can be diffed) or as JSON
/// (`camcap controls`).
public enum ControlListing {
    /// The listing: a heading per control class, a line per control with its range, default, value and flags,
    /// and its menu entries under it.
    public static func text(_ controls: [CameraControl]) -> String {
        var out = ""
        for c in controls {
            if c.kind == .ctrlClass {
                out += "\n\(c.label)\n\n"
                continue
            }
            out += String(repeating: " ", count: max(0, 31 - c.name.count)) + c.name + " " + c.id.description + " "
            let type = "(\(c.kind.rawValue))"
            out += type + String(repeating: " ", count: max(0, 9 - type.count)) + ": "
            var parts: [String] = []
            let value = c.dimensions.isEmpty ? c.value : nil
            switch c.kind {
            case .integer, .integer64, .u8, .u16, .u32:
                parts = ["min=\(c.minimum)", "max=\(c.maximum)", "step=\(c.step)", "default=\(c.defaultValue)"]
                if let v = value?.integer { parts.append("value=\(v)") }
            case .boolean:
                parts = ["default=\(c.defaultValue)"]
                if let v = value?.integer { parts.append("value=\(v)") }
            case .menu, .integerMenu:
                parts = ["min=\(c.minimum)", "max=\(c.maximum)", "default=\(c.defaultValue)"]
                if let v = value?.integer {
                    let item = c.currentMenuItem.map { m in
                        c.kind == .integerMenu ? "\(m.value ?? 0) 0x\(String(UInt64(bitPattern: m.value ?? 0), radix: 16))" : m.name
                    }
                    parts.append("value=\(v)" + (item.map { " (\($0))" } ?? ""))
                }
            case .button:
                parts = ["value=0"]
            case .string:
                parts = ["min=\(c.minimum)", "max=\(c.maximum)", "step=\(c.step)"]
                if case .string(let s)? = value { parts.append("value='\(s)'") }
            case .bitmask:
                parts = ["max=" + hex(c.maximum), "default=" + hex(c.defaultValue)]
                if let v = value?.integer { parts.append("value=\(Int32(truncatingIfNeeded: v))") }
            case .area:
                if case .string(let s)? = value { parts.append("value=\(s)") }
            case .ctrlClass, .other:
                break
            }
            if !c.dimensions.isEmpty { parts.append("dims=" + c.dimensions.map { "[\($0)]" }.joined()) }
            if !c.flags.isEmpty { parts.append("flags=" + c.flags.names.joined(separator: ", ")) }
            out += parts.joined(separator: " ") + "\n"
            for item in c.menu { out += "\t\t\t\t\(item.index): \(menuText(c, item))\n" }
        }
        return out
    }

    /// A menu entry as the listing shows it: its name, or for an integer menu its value in decimal and hex.
    public static func menuText(_ c: CameraControl, _ item: CameraControl.MenuItem) -> String {
        if c.kind == .integerMenu, let v = item.value { return "\(v) (0x\(String(UInt64(bitPattern: v), radix: 16)))" }
        return item.name
    }
    /// A bitmask value as eight hex digits (`0x0000ff00`).
    static func hex(_ v: Int64) -> String {
        "0x" + String(String(UInt32(truncatingIfNeeded: v), radix: 16).reversed()).padding(toLength: 8, withPad: "0", startingAt: 0).reversed()
    }

    /// `140`, `1 (50 Hz)`, `'text'`, `(write-only)`.
    public static func valueText(_ c: CameraControl) -> String {
        guard let v = c.value else { return "(write-only)" }
        if let item = c.currentMenuItem { return "\(v) (\(menuText(c, item)))" }
        return v.description
    }

    /// The controls as a JSON array (control classes left out): name, id, type, label, range, default, flags,
    /// value, menu entries and dimensions.
    public static func json(_ controls: [CameraControl]) -> String {
        let items: [String] = controls.filter { $0.kind != .ctrlClass }.map { c in
            var pairs: [(String, Any)] = [
                ("name", c.name), ("id", c.id.description), ("type", c.kind.rawValue), ("label", c.label),
                ("min", Int(c.minimum)), ("max", Int(c.maximum)), ("step", Int(clamping: c.step)),
                ("default", Int(c.defaultValue)), ("flags", c.flags.names as [Any]),
            ]
            switch c.value {
            case .integer(let v)?: pairs.append(("value", Int(v)))
            case .string(let s)?: pairs.append(("value", s))
            case nil: break
            }
            if !c.menu.isEmpty {
                pairs.append(
                    (
                        "menu",
                        c.menu.map { m -> Any in
                            var p: [(String, Any)] = [("index", Int(m.index)), ("name", m.name)]
                            if let v = m.value { p.append(("value", Int(v))) }
                            return p
                        }
                    ))
            }
            if !c.dimensions.isEmpty { pairs.append(("dims", c.dimensions as [Any])) }
            return jsonObject(pairs)
        }
        return "[" + items.joined(separator: ",\n ") + "]\n"
    }
}
