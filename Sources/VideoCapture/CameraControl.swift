/// A V4L2 control id (`V4L2_CID_*`), with Swift names for the controls cameras and RTC apps use
/// (the `MediaTrackConstraints` image and camera properties).
public struct CameraControlID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The V4L2 control id.
    public let rawValue: UInt32
    /// An id from its V4L2 value (any value; drivers have private controls too).
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// An id from its V4L2 value, unlabelled (`CameraControlID(0x0098_0900)`).
    public init(_ raw: UInt32) { rawValue = raw }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    /// The id in `v4l2-ctl`'s notation: `0x` and eight hex digits (`0x00980900`).
    public var description: String { "0x" + String(rawValue, radix: 16).leftPadded(to: 8) }

    // User class (V4L2_CID_BASE = 0x00980900).
    /// `V4L2_CID_BRIGHTNESS`: the picture's black level, in the driver's own range.
    public static let brightness = Self(0x0098_0900)
    /// `V4L2_CID_CONTRAST`, in the driver's own range.
    public static let contrast = Self(0x0098_0901)
    /// `V4L2_CID_SATURATION`: colour intensity, in the driver's own range.
    public static let saturation = Self(0x0098_0902)
    /// `V4L2_CID_HUE`: colour balance, in the driver's own range.
    public static let hue = Self(0x0098_0903)
    /// `V4L2_CID_AUTO_WHITE_BALANCE`: boolean; while on, ``whiteBalanceTemperature`` is inactive.
    public static let autoWhiteBalance = Self(0x0098_090c)
    /// `V4L2_CID_GAMMA`, in the driver's own range.
    public static let gamma = Self(0x0098_0910)
    /// `V4L2_CID_AUTOGAIN`: boolean; while on, ``gain`` is set by the camera.
    public static let autoGain = Self(0x0098_0912)
    /// `V4L2_CID_GAIN`: sensor amplification, in the driver's own range.
    public static let gain = Self(0x0098_0913)
    /// `V4L2_CID_HFLIP`: boolean; mirrors the picture left to right in the camera.
    public static let horizontalFlip = Self(0x0098_0914)
    /// `V4L2_CID_VFLIP`: boolean; flips the picture upside down in the camera.
    public static let verticalFlip = Self(0x0098_0915)
    /// Menu: 0 disabled, 1 50 Hz, 2 60 Hz, 3 auto (not every camera has 3).
    public static let powerLineFrequency = Self(0x0098_0918)
    /// `V4L2_CID_WHITE_BALANCE_TEMPERATURE`: in kelvin; inactive while ``autoWhiteBalance`` is on.
    public static let whiteBalanceTemperature = Self(0x0098_091a)
    /// `V4L2_CID_SHARPNESS`, in the driver's own range.
    public static let sharpness = Self(0x0098_091b)
    /// `V4L2_CID_BACKLIGHT_COMPENSATION`, in the driver's own range (0 is off).
    public static let backlightCompensation = Self(0x0098_091c)
    // Camera class (V4L2_CID_CAMERA_CLASS_BASE = 0x009a0900).
    /// Menu: 0 auto, 1 manual, 2 shutter priority, 3 aperture priority (UVC cameras offer 1 and 3).
    public static let autoExposure = Self(0x009a_0901)
    /// In units of 100 µs.
    public static let exposureTimeAbsolute = Self(0x009a_0902)
    /// `V4L2_CID_EXPOSURE_AUTO_PRIORITY` (UVC's "auto priority"): boolean; while on, automatic exposure may lower
    /// the frame rate in low light. Turn it off to keep the negotiated rate.
    public static let exposureDynamicFramerate = Self(0x009a_0903)
    /// `V4L2_CID_PAN_ABSOLUTE`: in arc seconds (1/3600 degree); positive turns right.
    public static let panAbsolute = Self(0x009a_0908)
    /// `V4L2_CID_TILT_ABSOLUTE`: in arc seconds (1/3600 degree); positive turns up.
    public static let tiltAbsolute = Self(0x009a_0909)
    /// `V4L2_CID_FOCUS_ABSOLUTE`: the focus distance in the driver's units; inactive while ``autoFocus`` is on.
    public static let focusAbsolute = Self(0x009a_090a)
    /// `V4L2_CID_FOCUS_AUTO`: boolean, continuous automatic focus.
    public static let autoFocus = Self(0x009a_090c)
    /// `V4L2_CID_ZOOM_ABSOLUTE`: optical zoom in the driver's units.
    public static let zoomAbsolute = Self(0x009a_090d)
    /// Read-only menu: 0 front, 1 back, 2 external.
    public static let cameraOrientation = Self(0x009a_0922)
    /// Read-only: degrees counter-clockwise to rotate captured images by to make them upright.
    public static let cameraSensorRotation = Self(0x009a_0923)

    /// The well-known controls by the name `v4l2-ctl` gives them (recent kernels' names; older aliases too).
    public static let wellKnown: [(name: String, id: CameraControlID)] = [
        ("brightness", .brightness), ("contrast", .contrast), ("saturation", .saturation), ("hue", .hue),
        ("white_balance_automatic", .autoWhiteBalance), ("white_balance_temperature_auto", .autoWhiteBalance),
        ("gamma", .gamma), ("gain_automatic", .autoGain), ("gain", .gain),
        ("horizontal_flip", .horizontalFlip), ("vertical_flip", .verticalFlip),
        ("power_line_frequency", .powerLineFrequency), ("white_balance_temperature", .whiteBalanceTemperature),
        ("sharpness", .sharpness), ("backlight_compensation", .backlightCompensation),
        ("auto_exposure", .autoExposure), ("exposure_auto", .autoExposure),
        ("exposure_time_absolute", .exposureTimeAbsolute), ("exposure_absolute", .exposureTimeAbsolute),
        ("exposure_dynamic_framerate", .exposureDynamicFramerate), ("exposure_auto_priority", .exposureDynamicFramerate),
        ("pan_absolute", .panAbsolute), ("tilt_absolute", .tiltAbsolute),
        ("focus_absolute", .focusAbsolute), ("focus_automatic_continuous", .autoFocus), ("focus_auto", .autoFocus),
        ("zoom_absolute", .zoomAbsolute),
        ("camera_orientation", .cameraOrientation), ("camera_sensor_rotation", .cameraSensorRotation),
    ]
}

/// The power-line frequency a camera's anti-flicker filter is set to (`V4L2_CID_POWER_LINE_FREQUENCY`).
public enum PowerLineFrequency: Int64, Sendable, CaseIterable, CustomStringConvertible {
    /// No anti-flicker filtering.
    case disabled = 0
    /// 50 Hz mains (most of Europe, Africa and Asia).
    case hz50 = 1
    /// 60 Hz mains (the Americas, parts of Asia).
    case hz60 = 2
    /// The camera detects the mains frequency itself (not every camera offers it).
    case auto = 3
    public var description: String {
        switch self {
        case .disabled: "disabled"
        case .hz50: "50 Hz"
        case .hz60: "60 Hz"
        case .auto: "auto"
        }
    }
    /// `50`, `60`, `auto`, `off` (as the CLI takes it).
    public init?(argument: String) {
        switch argument.lowercased() {
        case "50", "50hz": self = .hz50
        case "60", "60hz": self = .hz60
        case "auto": self = .auto
        case "off", "disabled", "0": self = .disabled
        default: return nil
        }
    }
}

/// One control of a camera, as `VIDIOC_QUERY_EXT_CTRL` and `VIDIOC_QUERYMENU` describe it, with its current value.
public struct CameraControl: Sendable, Hashable, CustomStringConvertible {
    /// The type of a control's value, named as `v4l2-ctl` prints it (the raw value).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A 32-bit integer in `minimum...maximum`, in steps of `step`.
        case integer = "int"
        /// On (1) or off (0).
        case boolean = "bool"
        /// An index into named entries (``CameraControl/menu``).
        case menu = "menu"
        /// An action: setting any value triggers it; it has no value to read.
        case button = "button"
        /// A 64-bit integer.
        case integer64 = "int64"
        /// Not a control: the heading of a group of controls (`User Controls`, `Camera Controls`).
        case ctrlClass = "ctrl_class"
        /// Text whose length is in `minimum...maximum`.
        case string = "str"
        /// A set of bits; only the bits of `maximum` may be set.
        case bitmask = "bitmask"
        /// An index into entries that each stand for a 64-bit number (``CameraControl/MenuItem/value``).
        case integerMenu = "intmenu"
        /// An array of unsigned bytes (a compound control: see ``CameraControl/dimensions``).
        case u8 = "u8"
        /// An array of unsigned 16-bit values.
        case u16 = "u16"
        /// An array of unsigned 32-bit values.
        case u32 = "u32"
        /// A width and height (`struct v4l2_area`).
        case area = "area"
        /// Any other V4L2 type (compound codec parameters and the like).
        case other = "other"

        /// The V4L2 type (`V4L2_CTRL_TYPE_*`).
        public init(v4l2Type t: UInt32) {
            switch t {
            case 1: self = .integer
            case 2: self = .boolean
            case 3: self = .menu
            case 4: self = .button
            case 5: self = .integer64
            case 6: self = .ctrlClass
            case 7: self = .string
            case 8: self = .bitmask
            case 9: self = .integerMenu
            case 0x100: self = .u8
            case 0x101: self = .u16
            case 0x102: self = .u32
            case 0x106: self = .area
            default: self = .other
            }
        }
        /// True for controls whose value is one number (what `get`/`set` handle).
        public var isScalar: Bool {
            switch self {
            case .integer, .boolean, .menu, .button, .integer64, .bitmask, .integerMenu: true
            default: false
            }
        }
        /// True for menus and integer menus, whose values are entry indices.
        public var isMenu: Bool { self == .menu || self == .integerMenu }
    }

    /// `V4L2_CTRL_FLAG_*`.
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The `V4L2_CTRL_FLAG_*` bits.
        public let rawValue: UInt32
        /// Flags from their V4L2 bits (unknown bits are kept).
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Permanently disabled: the control cannot be set (and is best not shown).
        public static let disabled = Flags(rawValue: 0x0001)
        /// Temporarily unchangeable, usually because streaming has started (setting it fails with `.controlBusy`).
        public static let grabbed = Flags(rawValue: 0x0002)
        /// Can be read, not set.
        public static let readOnly = Flags(rawValue: 0x0004)
        /// Changing it may change other controls (read them again).
        public static let update = Flags(rawValue: 0x0008)
        /// Not in effect now: another control, usually its automatic mode, overrides it.
        public static let inactive = Flags(rawValue: 0x0010)
        /// A hint to show the control as a slider.
        public static let slider = Flags(rawValue: 0x0020)
        /// Can be set, not read.
        public static let writeOnly = Flags(rawValue: 0x0040)
        /// The device changes the value by itself (automatic gain, exposure), so a read may differ from the last write.
        public static let volatile = Flags(rawValue: 0x0080)
        /// The value is an array or structure (a compound control), not a single number.
        public static let hasPayload = Flags(rawValue: 0x0100)
        /// Every write acts, even of the current value.
        public static let executeOnWrite = Flags(rawValue: 0x0200)
        /// Changing it changes the frame layout (it may be refused while streaming).
        public static let modifyLayout = Flags(rawValue: 0x0400)
        /// An array whose length can change.
        public static let dynamicArray = Flags(rawValue: 0x0800)
        /// The names `v4l2-ctl` prints, in bit order.
        public static let names: [(Flags, String)] = [
            (.disabled, "disabled"), (.grabbed, "grabbed"), (.readOnly, "read-only"), (.update, "update"),
            (.inactive, "inactive"), (.slider, "slider"), (.writeOnly, "write-only"), (.volatile, "volatile"),
            (.hasPayload, "has-payload"), (.executeOnWrite, "execute-on-write"), (.modifyLayout, "modify-layout"),
            (.dynamicArray, "dynamic-array"),
        ]
        /// `v4l2-ctl`'s rendering: known names, unknown bits in hex.
        public var names: [String] {
            var out: [String] = []
            var known: UInt32 = 0
            for (f, n) in Flags.names {
                known |= f.rawValue
                if contains(f) { out.append(n) }
            }
            if rawValue & ~known != 0 { out.append("0x" + String(rawValue & ~known, radix: 16).leftPadded(to: 8)) }
            return out
        }
        /// The flag `v4l2-ctl` prints under that name (`read-only`, `inactive`); nil for other names.
        public init?(name: String) {
            guard let f = Flags.names.first(where: { $0.1 == name }) else { return nil }
            self = f.0
        }
    }

    /// A menu entry: its index, and its name (menu) or value (integer menu).
    public struct MenuItem: Sendable, Hashable {
        /// The entry's index: the value that selects it.
        public var index: Int64
        /// The entry's name (`50 Hz`); for an integer menu, its number as text.
        public var name: String
        /// The value of an integer-menu item.
        public var value: Int64?
        /// A menu entry (as providers and fixture files make them).
        public init(index: Int64, name: String, value: Int64? = nil) {
            self.index = index
            self.name = name
            self.value = value
        }
    }

    /// A control's value: a number for every scalar kind, text for strings.
    public enum Value: Sendable, Hashable, CustomStringConvertible {
        /// A number: an integer, 0 or 1, a menu index, a bitmask (any value for a button).
        case integer(Int64)
        /// The text of a string control.
        case string(String)
        /// The number, or nil for text.
        public var integer: Int64? { if case .integer(let v) = self { v } else { nil } }
        /// The value as `v4l2-ctl` prints it: a number, or text in single quotes.
        public var description: String {
            switch self {
            case .integer(let v): String(v)
            case .string(let s): "'\(s)'"
            }
        }
    }

    /// The control's V4L2 id.
    public var id: CameraControlID
    /// The name `v4l2-ctl` uses (`brightness`, `white_balance_temperature`): `CameraControl.key(from:)` of the label.
    public var name: String
    /// The driver's name for it (`Brightness`, `White Balance Temperature`).
    public var label: String
    /// The type of its value.
    public var kind: Kind
    /// The smallest value (for strings: the shortest length; for menus: the first index).
    public var minimum: Int64
    /// The largest value (for strings: the longest length; for bitmasks: the bits that may be set).
    public var maximum: Int64
    /// The granularity of integer values from `minimum` (1: any value).
    public var step: UInt64
    /// The driver's default value.
    public var defaultValue: Int64
    /// The `V4L2_CTRL_FLAG_*` bits (read-only, inactive, grabbed…).
    public var flags: Flags
    /// Nil for controls that cannot be read (buttons, write-only, arrays and other compound controls).
    public var value: Value?
    /// Valid entries only (a driver may skip indices).
    public var menu: [MenuItem]
    /// Array dimensions of compound controls (`dims=[8][16]`); empty for scalars.
    public var dimensions: [Int]

    /// A control as a provider describes it; `name` defaults to ``key(from:)`` of the label.
    public init(
        id: CameraControlID, label: String, kind: Kind, minimum: Int64 = 0, maximum: Int64 = 0, step: UInt64 = 1,
        defaultValue: Int64 = 0, flags: Flags = [], value: Value? = nil, menu: [MenuItem] = [], dimensions: [Int] = [],
        name: String? = nil
    ) {
        self.id = id
        self.label = label
        self.kind = kind
        self.minimum = minimum
        self.maximum = maximum
        self.step = step
        self.defaultValue = defaultValue
        self.flags = flags
        self.value = value
        self.menu = menu
        self.dimensions = dimensions
        self.name = name ?? CameraControl.key(from: label)
    }

    /// `v4l2-ctl`'s name for a control label: lower-case letters and digits, each run of anything else one `_`,
    /// none leading or trailing (`White Balance, Automatic` → `white_balance_automatic`).
    public static func key(from label: String) -> String {
        var out = ""
        var pending = false
        for u in label.utf8 {
            let isAlnum = (u >= 0x30 && u <= 0x39) || (u >= 0x41 && u <= 0x5a) || (u >= 0x61 && u <= 0x7a)
            if isAlnum {
                if pending { out.append("_") }
                pending = false
                out.unicodeScalars.append(Unicode.Scalar(u >= 0x41 && u <= 0x5a ? u + 0x20 : u))
            } else if !out.isEmpty {
                pending = true
            }
        }
        return out
    }

    /// The current value as a number (nil for strings and unreadable controls).
    public var integerValue: Int64? { value?.integer }
    /// Whether the control can be read but not set.
    public var isReadOnly: Bool { flags.contains(.readOnly) }
    /// Whether another control currently overrides this one (setting it fails with `.controlInactive`).
    public var isInactive: Bool { flags.contains(.inactive) }
    /// The menu entry the current value selects.
    public var currentMenuItem: MenuItem? { integerValue.flatMap { v in menu.first { $0.index == v } } }

    /// `name (kind) = value`, for logs.
    public var description: String { "\(name) (\(kind.rawValue))" + (value.map { " = \($0)" } ?? "") }

    /// Checks a value before it is set: read-only, inactive, out of range, not a menu entry. Throws the typed
    /// error naming the control, the value and what is allowed. `device` is for the error.
    public func validate(_ value: Value, device: String) throws(CaptureError) {
        func fail(_ code: CaptureError.Code, _ msg: String) -> CaptureError {
            CaptureError(code, msg, device: device, operation: "set \(name)")
        }
        if flags.contains(.readOnly) {
            throw fail(.controlReadOnly, "control \(name) of \(device) is read-only; it cannot be set to \(value)")
        }
        if flags.contains(.disabled) || kind == .ctrlClass {
            throw fail(.unknownControl, "control \(name) of \(device) is disabled and cannot be set")
        }
        if flags.contains(.inactive) {
            throw fail(
                .controlInactive,
                "control \(name) of \(device) is inactive (another control, usually its automatic mode, overrides it); turn that off first, then set \(name)=\(value)"
            )
        }
        switch (kind, value) {
        case (.string, .string(let s)):
            let n = Int64(s.utf8.count)
            guard n >= minimum, n <= maximum else {
                throw fail(
                    .controlOutOfRange, "\(value) is out of range for control \(name) of \(device): its length must be \(minimum)...\(maximum)")
            }
            return
        case (.string, _):
            throw fail(.controlOutOfRange, "control \(name) of \(device) takes text, not \(value)")
        case (_, .string):
            throw fail(.controlOutOfRange, "control \(name) of \(device) takes a number, not \(value)")
        case (_, .integer(let v)):
            guard kind.isScalar else {
                throw fail(.controlOutOfRange, "control \(name) of \(device) is a \(kind.rawValue) array; only single values can be set")
            }
            switch kind {
            case .button: return
            case .boolean:
                guard v == 0 || v == 1 else {
                    throw fail(.controlOutOfRange, "\(v) is out of range for control \(name) of \(device): expected 0 or 1")
                }
            case .bitmask:
                let mask = UInt64(bitPattern: maximum) & 0xffff_ffff
                guard v >= 0, UInt64(v) & ~mask == 0 else {
                    throw fail(
                        .controlOutOfRange,
                        "\(v) is out of range for control \(name) of \(device): only bits of 0x\(String(mask, radix: 16)) may be set")
                }
            case .menu, .integerMenu:
                guard menu.isEmpty ? (v >= minimum && v <= maximum) : menu.contains(where: { $0.index == v }) else {
                    let items = menu.map { "\($0.index) (\($0.name))" }.joined(separator: ", ")
                    throw fail(
                        .controlOutOfRange,
                        "\(v) is out of range for control \(name) of \(device): expected one of \(items.isEmpty ? "\(minimum)...\(maximum)" : items)")
                }
            default:
                guard v >= minimum, v <= maximum else {
                    throw fail(
                        .controlOutOfRange,
                        "\(v) is out of range for control \(name) of \(device): expected \(minimum)...\(maximum)\(step > 1 ? " in steps of \(step)" : "")"
                    )
                }
            }
        }
    }

    /// The value a driver stores for `v`: rounded to the step from the minimum, as the V4L2 core does for
    /// integer controls (the fixture cameras use it; real drivers apply their own and are read back).
    public func rounded(_ v: Int64) -> Int64 {
        guard kind == .integer || kind == .integer64, step > 1, v >= minimum, v <= maximum else { return v }
        let span = UInt64(bitPattern: v &- minimum)
        let down = span / step * step
        // Half up, unless that passes the maximum (then down, as the kernel keeps the value in range).
        if span % step >= step - step / 2, down <= UInt64.max - step {
            let up = minimum &+ Int64(bitPattern: down + step)
            if up >= minimum && up <= maximum { return up }
        }
        return minimum &+ Int64(bitPattern: down)
    }

    /// Parses a value as given on a command line: a number (decimal or 0x hex), `true`/`false`, a menu entry's
    /// name (case-insensitive), or for string controls the text itself.
    public func parseValue(_ text: String, device: String) throws(CaptureError) -> Value {
        if kind == .string { return .string(text) }
        let t = text.trimmingBlanks()
        if let v = Int64(t) { return .integer(v) }
        if t.hasPrefix("0x") || t.hasPrefix("0X"), let v = UInt64(t.dropFirst(2), radix: 16), let s = Int64(exactly: v) { return .integer(s) }
        if kind == .boolean {
            switch t.lowercased() {
            case "true", "on", "yes": return .integer(1)
            case "false", "off", "no": return .integer(0)
            default: break
            }
        }
        if kind.isMenu, let item = menu.first(where: { $0.name.lowercased() == t.lowercased() }) { return .integer(item.index) }
        let hint = kind.isMenu ? "a menu index or name (\(menu.map { "\($0.index): \($0.name)" }.joined(separator: ", ")))" : "a whole number"
        throw CaptureError(
            .controlOutOfRange, "\"\(text.prefix(80))\" is not a valid value for control \(name) of \(device): expected \(hint)",
            device: device, operation: "set \(name)")
    }
}

/// One assignment of a value to a control named by its `v4l2-ctl` name, a well-known alias or its id.
public struct CameraControlSetting: Sendable, Hashable, CustomStringConvertible {
    /// The control: its `v4l2-ctl` name, a well-known alias (`exposure_absolute`) or its id (`0x009a0902`).
    public var control: String
    /// The value as text, parsed against the control when it is applied (``CameraControl/parseValue(_:device:)``).
    public var value: String
    /// A setting from a control name and a value as text (`CameraControlSetting("brightness", "140")`).
    public init(_ control: String, _ value: String) {
        self.control = control
        self.value = value
    }
    /// A setting from a control id and a number (`CameraControlSetting(.brightness, 140)`).
    public init(_ id: CameraControlID, _ value: Int64) {
        self.control = id.description
        self.value = String(value)
    }
    /// `name=value`.
    public init?(parsing text: String) {
        guard let eq = text.firstIndex(of: "=") else { return nil }
        let name = String(text[..<eq]).trimmingBlanks(), value = String(text[text.index(after: eq)...])
        guard !name.isEmpty else { return nil }
        self.control = name
        self.value = value
    }
    /// `control=value`, as ``init(parsing:)`` reads it.
    public var description: String { "\(control)=\(value)" }
}

extension Array where Element == CameraControl {
    /// The control a name, well-known alias (`exposure_absolute`), or id (`0x00980900`, decimal) names.
    public func find(_ spec: String) -> CameraControl? {
        let s = spec.trimmingBlanks()
        if let c = first(where: { $0.name == s && $0.kind != .ctrlClass }) { return c }
        var id: UInt32?
        if s.hasPrefix("0x") || s.hasPrefix("0X") { id = UInt32(s.dropFirst(2), radix: 16) } else { id = UInt32(s) }
        if id == nil { id = CameraControlID.wellKnown.first(where: { $0.name == s })?.id.rawValue }
        guard let id else { return nil }
        return first { $0.id.rawValue == id && $0.kind != .ctrlClass }
    }

    /// A clear error for a control that is not there, listing what is.
    package func unknown(_ spec: String, device: String) -> CaptureError {
        let names = filter { $0.kind != .ctrlClass }.map(\.name)
        let list = names.isEmpty ? "it has no controls" : "it has: " + names.prefix(60).joined(separator: ", ") + (names.count > 60 ? ", …" : "")
        return CaptureError(.unknownControl, "\(device) has no control \"\(spec.prefix(80))\"; \(list)", device: device, operation: "find control")
    }
}

extension String {
    func leftPadded(to n: Int, with c: Character = "0") -> String { count >= n ? self : String(repeating: c, count: n - count) + self }
    func trimmingBlanks() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// Position and rotation for a camera that reports none (or reports them wrong): set per device in the
/// provider's configuration or in a fixture file.
public struct SensorOverride: Sendable, Hashable {
    /// The position to report; nil keeps what the device says.
    public var position: CaptureDevice.Position?
    /// Clockwise, as `VideoFrame.rotation`.
    public var rotation: VideoRotation?
    /// An override; nil fields leave what the device reports.
    public init(position: CaptureDevice.Position? = nil, rotation: VideoRotation? = nil) {
        self.position = position
        self.rotation = rotation
    }
}

extension CaptureDevice.Position {
    /// `V4L2_CID_CAMERA_ORIENTATION`: 0 front, 1 back, 2 external.
    public init?(v4l2Orientation v: Int64) {
        switch v {
        case 0: self = .front
        case 1: self = .back
        case 2: self = .external
        default: return nil
        }
    }
}

extension VideoRotation {
    /// `V4L2_CID_CAMERA_SENSOR_ROTATION` is the correction counter-clockwise; a frame's rotation is clockwise
    /// (WebRTC's), so 90 there is 270 here. Values that are not 0, 90, 180 or 270 are nil.
    public init?(sensorRotationCounterClockwise v: Int64) {
        guard v >= 0, v < 360, v % 90 == 0 else { return nil }
        self.init(rawValue: Int((360 - v) % 360))
    }
}
