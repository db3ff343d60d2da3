import ArgumentParser
import Foundation
import VideoCapture
import CapturePipeline

struct Controls: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, read and set a camera's controls (in the layout of `v4l2-ctl --list-ctrls-menus`).",
        discussion: """
            NAME is the control's v4l2-ctl name (brightness, power_line_frequency), a well-known alias \
            (exposure_absolute) or its id (0x00980900). VALUE is a number, a menu entry's name ("50 Hz") or \
            true/false. --set values are applied in order and what the camera applied is printed; a value out of \
            range, a read-only or an inactive control is an error naming the control and the value.
            """)
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file (default: the first camera, else fixture:uvc-webcam).")
    var device: String?
    @Option(name: .customLong("set"), help: ArgumentHelp("Set a control (repeatable, applied in order).", valueName: "name=value"))
    var settings: [String] = []
    @Option(name: .customLong("get"), help: ArgumentHelp("Print one control's value (repeatable).", valueName: "name"))
    var gets: [String] = []
    @Flag(help: "Print JSON instead.") var json = false

    func validate() throws {
        for s in settings where CameraControlSetting(parsing: s) == nil {
            throw ValidationError("--set expects NAME=VALUE, got \"\(s.prefix(80))\"")
        }
    }

    func run() async throws {
        let capturer = makeCapturer()
        do {
            let d = try capturer.device(device ?? defaultCameraSpec)
            if settings.isEmpty && gets.isEmpty {
                let all = try capturer.controls(for: d)
                print(json ? ControlListing.json(all) : ControlListing.text(all), terminator: "")
                return
            }
            var out: [CameraControl] = []
            for s in settings.compactMap(CameraControlSetting.init(parsing:)) {
                out.append(try capturer.setControl(s.control, to: s.value, on: d))
            }
            for g in gets { out.append(try capturer.control(g, of: d)) }
            if json { print(ControlListing.json(out), terminator: "") } else { for c in out { print("\(c.name): \(ControlListing.valueText(c))") } }
        } catch { fail(error) }
    }
}

/// Control lists as `v4l2-ctl --list-ctrls-menus` prints them, or as JSON.
enum ControlListing {
    static func text(_ controls: [CameraControl]) -> String {
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

    static func menuText(_ c: CameraControl, _ item: CameraControl.MenuItem) -> String {
        if c.kind == .integerMenu, let v = item.value { return "\(v) (0x\(String(UInt64(bitPattern: v), radix: 16)))" }
        return item.name
    }
    static func hex(_ v: Int64) -> String {
        "0x" + String(String(UInt32(truncatingIfNeeded: v), radix: 16).reversed()).padding(toLength: 8, withPad: "0", startingAt: 0).reversed()
    }

    /// `140`, `1 (50 Hz)`, `'text'`, `(write-only)`.
    static func valueText(_ c: CameraControl) -> String {
        guard let v = c.value else { return "(write-only)" }
        if let item = c.currentMenuItem { return "\(v) (\(menuText(c, item)))" }
        return v.description
    }

    static func json(_ controls: [CameraControl]) -> String {
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
