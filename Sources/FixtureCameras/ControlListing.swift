import VideoCapture

// The text of `v4l2-ctl --list-ctrls-menus` (`-L`, also `-l` without menus) inside a fixture listing:
//
//                      brightness 0x00980900 (int)    : min=0 max=255 step=1 default=128 value=128 flags=slider
//                           menu 0x0098f904 (menu)   : min=1 max=4 default=3 value=3 (Menu Item 3)
//                                 1: Menu Item 1
//
// A line is a control when it reads NAME 0xHHHHHHHH (TYPE); such a line that is malformed is an error
// naming the file and the line. Menu entries (`N: name`, `N: value (0xhex)` for integer menus) follow their
// control. Headings ("User Controls") name the control class that follows.

/// Collects controls line by line while a listing is parsed.
struct ControlListingParser {
    private(set) var controls: [CameraControl] = []
    private var heading: String?
    private var inMenu = false

    /// Takes `line` when it belongs to the control listing (returns true); throws for a malformed control
    /// or menu line.
    mutating func consume(_ line: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> Bool {
        if inMenu, let item = try menuItem(line, err) {
            guard let last = controls.indices.last else { return false }
            guard item.index >= controls[last].minimum, item.index <= controls[last].maximum else {
                throw err(
                    "menu entry \(item.index) of control \(controls[last].name) is outside its range \(controls[last].minimum)...\(controls[last].maximum)"
                )
            }
            guard controls[last].menu.count < 1024 else { throw err("control \(controls[last].name) has more than 1024 menu entries") }
            controls[last].menu.append(item)
            return true
        }
        inMenu = false
        let words = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true).map { $0.drop { $0 == " " } }
        guard words.count == 3, words[1].hasPrefix("0x"), words[1].count == 10, words[2].hasPrefix("("),
            words[0].utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f })
        else {
            // A heading such as "User Controls" names the class of the controls that follow.
            if line.hasSuffix(" Controls"), line.count <= 64 { heading = line }
            return false
        }
        guard controls.count < 4096 else { throw err("more than 4096 controls") }
        let c = try control(name: String(words[0]), idText: String(words[1].dropFirst(2)), rest: String(words[2]), err)
        // A class heading for the first control of each class, as the driver lists it.
        let cls = c.id.rawValue & 0x0fff_0000
        if controls.last(where: { $0.kind != .ctrlClass }).map({ $0.id.rawValue & 0x0fff_0000 != cls }) ?? true {
            let label = heading ?? "Class 0x\(String(cls, radix: 16)) Controls"
            controls.append(CameraControl(id: CameraControlID(cls | 1), label: label, kind: .ctrlClass, flags: [.readOnly, .writeOnly]))
        }
        heading = nil
        controls.append(c)
        inMenu = c.kind.isMenu
        return true
    }

    private func menuItem(_ line: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> CameraControl.MenuItem? {
        guard let colon = line.firstIndex(of: ":"), let index = Int64(line[..<colon]) else { return nil }
        let name = String(line[line.index(after: colon)...]).trimmingSpaces
        guard let last = controls.last else { return nil }
        if last.kind == .integerMenu {
            // "2: 13 (0xd)"
            let figure = name.split(separator: " ").first.map(String.init) ?? ""
            guard let v = Int64(figure) else { throw err("expected an integer menu entry \"N: VALUE (0xHEX)\", found \(excerpt(line))") }
            return .init(index: index, name: figure, value: v)
        }
        guard !name.isEmpty else { throw err("menu entry \(index) of control \(last.name) has no name") }
        return .init(index: index, name: String(name.prefix(64)))
    }

    private func control(name: String, idText: String, rest: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> CameraControl
    {
        guard let id = UInt32(idText, radix: 16), id != 0 else {
            throw err("control \(name): expected an id 0xHHHHHHHH, found \(excerpt("0x" + idText))")
        }
        guard let close = rest.firstIndex(of: ")") else {
            throw err("control \(name): expected its type in parentheses, e.g. \"(int)\", found \(excerpt(rest))")
        }
        let typeText = String(rest[rest.index(after: rest.startIndex)..<close]).trimmingSpaces
        let kind = CameraControl.Kind(rawValue: typeText) ?? .other
        var body = rest[rest.index(after: close)...].drop { $0 == " " }
        guard body.first == ":" else { throw err("control \(name): expected \":\" after the type, found \(excerpt(body))") }
        body = body.dropFirst()
        var c = CameraControl(id: CameraControlID(id), label: name, kind: kind, name: name)
        c.step = kind == .integer || kind == .integer64 ? 1 : 0
        var sawValue = false
        // key=value pairs; flags= takes the rest of the line; a quoted string value may hold spaces; a
        // parenthesised note after a value (the menu entry's name) is skipped.
        while true {
            body = body.drop { $0 == " " }
            guard !body.isEmpty else { break }
            guard let eq = body.firstIndex(of: "=") else { throw err("control \(name): expected key=value, found \(excerpt(body))") }
            let key = String(body[..<eq])
            var value = body[body.index(after: eq)...]
            var text: String
            if key == "flags" {
                text = String(value)
                body = body[body.endIndex...]
            } else if value.first == "'" {
                let inner = value.dropFirst()
                guard
                    let end = inner.indices.last(where: {
                        inner[$0] == "'" && (inner.index(after: $0) == inner.endIndex || inner[inner.index(after: $0)] == " ")
                    })
                else {
                    throw err("control \(name): unterminated quoted value \(excerpt(value))")
                }
                text = String(inner[..<end])
                body = inner[inner.index(after: end)...]
            } else {
                let end = value.firstIndex(of: " ") ?? value.endIndex
                text = String(value[..<end])
                value = value[end...]
                let after = value.drop { $0 == " " }
                if after.first == "(", let p = after.firstIndex(of: ")") { body = after[after.index(after: p)...] } else { body = value }
            }
            func number(_ t: String) throws(FixtureParseError) -> Int64 {
                if t.hasPrefix("0x"), let u = UInt64(t.dropFirst(2), radix: 16) { return Int64(bitPattern: u) }
                guard let v = Int64(t) else { throw err("control \(name): expected a number for \(key), found \(excerpt(t))") }
                return v
            }
            switch key {
            case "min": c.minimum = try number(text)
            case "max": c.maximum = try number(text)
            case "step":
                let s = try number(text)
                guard s >= 0 else { throw err("control \(name): step must not be negative, found \(s)") }
                c.step = UInt64(s)
            case "default": c.defaultValue = try number(text)
            case "value":
                sawValue = true
                if kind == .string {
                    c.value = .string(text)
                } else if kind == .area {
                    c.value = .string(text)
                } // shown as listed (WIDTHxHEIGHT), never set
                else {
                    c.value = .integer(kind == .bitmask ? Int64(UInt32(truncatingIfNeeded: try number(text))) : try number(text))
                }
            case "flags":
                var f = CameraControl.Flags()
                for part in text.split(separator: ",") {
                    let p = part.trimmingSpaces
                    if let known = CameraControl.Flags(name: p) {
                        f.insert(known)
                    } else if p.hasPrefix("0x"), let raw = UInt32(p.dropFirst(2), radix: 16) {
                        f.insert(CameraControl.Flags(rawValue: raw))
                    } else {
                        throw err("control \(name): unknown flag \(excerpt(p))")
                    }
                }
                c.flags = f
            case "dims":
                var dims: [Int] = []
                for part in text.split(separator: "]") {
                    guard part.hasPrefix("["), let d = Int(part.dropFirst()), d > 0, d <= 1 << 20 else {
                        throw err("control \(name): expected dims=[N][M]…, found \(excerpt(text))")
                    }
                    dims.append(d)
                }
                guard dims.count <= 4 else { throw err("control \(name): at most 4 dimensions, found \(dims.count)") }
                c.dimensions = dims
            case "elems": break
            default: throw err("control \(name): unknown key \(excerpt(key))")
            }
        }
        if kind == .bitmask { c.minimum = 0 }
        if kind == .boolean {
            c.minimum = 0
            c.maximum = 1
            c.step = 1
        }
        guard c.minimum <= c.maximum else { throw err("control \(name): min \(c.minimum) is above max \(c.maximum)") }
        if !c.dimensions.isEmpty { c.value = nil }
        if !sawValue && c.value == nil && kind.isScalar && kind != .button && !c.flags.contains(.writeOnly) && c.dimensions.isEmpty {
            c.value = .integer(c.defaultValue)
        }
        if kind == .button || c.flags.contains(.writeOnly) { c.value = nil }
        return c
    }
}

extension CameraDescription {
    /// The position and rotation the controls declare (`camera_orientation`, `camera_sensor_rotation`).
    static func sensorMetadata(_ controls: [CameraControl]) -> (CaptureDevice.Position?, VideoRotation?) {
        let pos = controls.first { $0.id == .cameraOrientation }?.integerValue.flatMap(CaptureDevice.Position.init(v4l2Orientation:))
        let rot = controls.first { $0.id == .cameraSensorRotation }?.integerValue.flatMap(VideoRotation.init(sensorRotationCounterClockwise:))
        return (pos, rot)
    }
}

extension CameraDescription {
    /// `"controls": [{"name", "id"?, "type", "min"?, "max"?, "step"?, "default"?, "value"?, "flags"?: [...], "menu"?: [...]}]`.
    /// `name` is the `v4l2-ctl` name or the driver's label; `id` (`"0x00980900"`) may be left out for the
    /// well-known controls; `menu` lists entry names from `min` on, or `{"index", "name"}` objects; an
    /// integer menu lists numbers.
    static func parseJSONControls(_ node: JSONNode?, file: String) throws(FixtureParseError) -> [CameraControl] {
        guard let node else { return [] }
        func err(_ n: JSONNode, _ msg: String) -> FixtureParseError { FixtureParseError(file: file, line: n.line, msg) }
        guard case .array(let items, _) = node else { throw err(node, "\"controls\" must be an array of controls, found \(node.kind)") }
        guard items.count <= 4096 else { throw err(node, "more than 4096 controls") }
        func whole(_ n: JSONNode, _ what: String) throws(FixtureParseError) -> Int64 {
            guard case .number(let v, _) = n, v.isFinite, v == v.rounded(), abs(v) <= 9_007_199_254_740_992 else {
                throw err(n, "\(what) must be a whole number, found \(n.kind)")
            }
            return Int64(v)
        }
        var out: [CameraControl] = []
        var privateID: UInt32 = 0x00f0_f000
        for item in items {
            guard case .object = item else { throw err(item, "each control must be an object, found \(item.kind)") }
            guard let nameNode = item["name"], case .string(let label, _) = nameNode, !label.isEmpty else {
                throw err(item, "a control needs a \"name\" (a string such as \"brightness\")")
            }
            let key = CameraControl.key(from: label)
            guard !key.isEmpty else { throw err(nameNode, "control name \(excerpt(label)) has no letters or digits") }
            guard let typeNode = item["type"], case .string(let typeText, _) = typeNode,
                let kind = CameraControl.Kind(rawValue: typeText), kind.isScalar || kind == .string
            else {
                throw err(item["type"] ?? item, "control \(key): \"type\" must be one of int, bool, menu, intmenu, button, int64, bitmask, str")
            }
            var id: UInt32
            if let idNode = item["id"] {
                switch idNode {
                case .string(let s, _) where s.hasPrefix("0x"):
                    guard let v = UInt32(s.dropFirst(2), radix: 16), v != 0 else {
                        throw err(idNode, "control \(key): \"id\" must be 0xHHHHHHHH, found \(excerpt(s))")
                    }
                    id = v
                case .number:
                    let v = try whole(idNode, "control \(key): \"id\"")
                    guard let u = UInt32(exactly: v), u != 0 else { throw err(idNode, "control \(key): \"id\" \(v) is out of range") }
                    id = u
                default: throw err(idNode, "control \(key): \"id\" must be \"0xHHHHHHHH\", found \(idNode.kind)")
                }
            } else if let known = CameraControlID.wellKnown.first(where: { $0.name == key }) {
                id = known.id.rawValue
            } else {
                privateID += 1
                id = privateID
            }
            guard !out.contains(where: { $0.id.rawValue == id }) else {
                throw err(item, "control \(key): id 0x\(String(id, radix: 16)) is declared twice")
            }
            var c = CameraControl(id: CameraControlID(id), label: label, kind: kind)
            if kind == .boolean { c.maximum = 1 }
            if let n = item["min"] { c.minimum = try whole(n, "control \(key): \"min\"") }
            if let n = item["max"] { c.maximum = try whole(n, "control \(key): \"max\"") }
            if let n = item["step"] {
                let s = try whole(n, "control \(key): \"step\"")
                guard s >= 0 else { throw err(n, "control \(key): \"step\" must not be negative") }
                c.step = UInt64(s)
            }
            if let n = item["default"] { c.defaultValue = try whole(n, "control \(key): \"default\"") }
            guard c.minimum <= c.maximum else { throw err(item, "control \(key): min \(c.minimum) is above max \(c.maximum)") }
            if let f = item["flags"] {
                guard case .array(let names, _) = f else { throw err(f, "control \(key): \"flags\" must be an array of names such as \"read-only\"") }
                for n in names {
                    guard case .string(let s, _) = n, let flag = CameraControl.Flags(name: s) else {
                        throw err(n, "control \(key): unknown flag \(n.kind); known: \(CameraControl.Flags.names.map(\.1).joined(separator: ", "))")
                    }
                    c.flags.insert(flag)
                }
            }
            if let m = item["menu"] {
                guard kind.isMenu else { throw err(m, "control \(key): only menu and intmenu controls have a \"menu\"") }
                guard case .array(let entries, _) = m, !entries.isEmpty, entries.count <= 1024 else {
                    throw err(m, "control \(key): \"menu\" must be a non-empty array of at most 1024 entries")
                }
                var next = c.minimum
                for e in entries {
                    var index = next
                    var entry = e
                    if case .object = e {
                        guard let i = e["index"], let n = e["name"] ?? e["value"] else {
                            throw err(e, "control \(key): a menu entry object needs \"index\" and \"name\"")
                        }
                        index = try whole(i, "control \(key): menu \"index\"")
                        entry = n
                    }
                    guard index >= c.minimum, index <= c.maximum else {
                        throw err(e, "control \(key): menu entry \(index) is outside \(c.minimum)...\(c.maximum)")
                    }
                    if kind == .integerMenu {
                        let v = try whole(entry, "control \(key): an integer menu entry")
                        c.menu.append(.init(index: index, name: String(v), value: v))
                    } else {
                        guard case .string(let s, _) = entry, !s.isEmpty else {
                            throw err(entry, "control \(key): a menu entry must be a non-empty string, found \(entry.kind)")
                        }
                        c.menu.append(.init(index: index, name: String(s.prefix(64))))
                    }
                    next = index + 1
                }
            } else if kind.isMenu {
                throw err(item, "control \(key): a \(kind.rawValue) control needs a \"menu\"")
            }
            if let v = item["value"] {
                if kind == .string {
                    guard case .string(let s, _) = v else { throw err(v, "control \(key): \"value\" must be a string") }
                    c.value = .string(s)
                } else {
                    c.value = .integer(try whole(v, "control \(key): \"value\""))
                }
            } else if kind.isScalar && kind != .button {
                c.value = .integer(c.defaultValue)
            } else if kind == .string {
                c.value = .string("")
            }
            if kind == .button || c.flags.contains(.writeOnly) { c.value = nil }
            if let v = c.integerValue, kind != .bitmask, v < c.minimum || v > c.maximum || (kind.isMenu && !c.menu.contains { $0.index == v }) {
                throw err(item["value"] ?? item["default"] ?? item, "control \(key): value \(v) is not within its range or menu")
            }
            out.append(c)
        }
        return out
    }
}
