import VideoCapture
import VideoProcessing
import Synchronization

/// What a fixture camera's picture honours of its controls: brightness and contrast (on luma), horizontal
/// and vertical flip, and a test-pattern menu whose entry names a solid colour ("100% Red", "Black"…).
struct PictureSettings: Equatable, Sendable {
    /// Added to luma, after contrast.
    var lumaOffset = 0
    /// Luma contrast around black (16, or 0 in a full-range picture) as a fraction.
    var contrastNum = 1, contrastDen = 1
    var hflip = false, vflip = false
    /// A solid picture (Y, U, V packed as 0xYYUUVV) instead of the test pattern.
    var solid: UInt32?

    var isIdentity: Bool { !adjustsLuma && !hflip && !vflip && solid == nil }
    var adjustsLuma: Bool { lumaOffset != 0 || contrastNum != contrastDen }

    /// Limited-range BT.601 colours of vivid's solid test patterns (expanded when drawn in a full-range picture).
    static let solids: [(word: String, yuv: UInt32)] = [
        ("black", 0x10_80_80), ("white", 0xeb_80_80), ("red", 0x51_5a_f0), ("green", 0x91_36_22), ("blue", 0x29_f0_6e),
    ]

    init() {}
    init(_ controls: [CameraControl]) {
        for c in controls {
            guard let v = c.integerValue else { continue }
            switch c.id {
            case .brightness:
                // In Double: a fixture may declare any Int64 range, and no arithmetic here may trap.
                let span = Swift.max(1, Double(c.maximum) - Double(c.minimum))
                lumaOffset = Int(Swift.max(-255, Swift.min(255, (Double(v) - Double(c.defaultValue)) * 255 / span)))
            case .contrast where c.defaultValue > c.minimum:
                let gain = (Double(v) - Double(c.minimum)) / (Double(c.defaultValue) - Double(c.minimum))
                contrastNum = Int(Swift.max(0, Swift.min(8, gain)) * 256)
                contrastDen = 256
            case .horizontalFlip: hflip = v != 0
            case .verticalFlip: vflip = v != 0
            default:
                if c.name == "test_pattern", c.kind == .menu, let item = c.currentMenuItem {
                    let words = item.name.lowercased().split { !$0.isLetter }
                    // One colour word and nothing that makes it a pattern ("Colorbar", "Checkers", "Squares").
                    if words.count <= 3, let s = PictureSettings.solids.first(where: { words.contains(Substring($0.word)) }),
                        !words.contains(where: { $0.hasPrefix("color") || $0.hasPrefix("checker") || $0.hasPrefix("square") || $0 == "lines" })
                    {
                        solid = s.yuv
                    }
                }
            }
        }
    }
}

/// The live controls of one fixture camera: its declared controls with their current values, shared by
/// the provider (get/set) and a running stream (which reads `picture` each frame: no allocation).
final class FixtureControls: Sendable {
    private struct State {
        var controls: [CameraControl]
        var picture: PictureSettings
    }
    private let state: Mutex<State>

    init(_ controls: [CameraControl]) {
        let live = FixtureControls.withDynamicFlags(controls)
        state = Mutex(State(controls: live, picture: PictureSettings(live)))
    }

    var picture: PictureSettings { state.withLock { $0.picture } }
    func list() -> [CameraControl] { state.withLock { $0.controls } }

    /// Validates, rounds to the step as the V4L2 core does, stores; returns the control as now applied.
    func set(_ id: CameraControlID, to value: CameraControl.Value, device: String) throws(CaptureError) -> CameraControl {
        try state.withLock { (s: inout State) throws(CaptureError) -> CameraControl in
            guard let i = s.controls.firstIndex(where: { $0.id == id && $0.kind != .ctrlClass }) else {
                throw s.controls.unknown(id.description, device: device)
            }
            var c = s.controls[i]
            try c.validate(value, device: device)
            if c.kind == .button || c.flags.contains(.writeOnly) {
                c.value = value // reported as written, never stored
                return c
            }
            if case .integer(let v) = value { s.controls[i].value = .integer(c.rounded(v)) } else { s.controls[i].value = value }
            s.controls = FixtureControls.withDynamicFlags(s.controls)
            s.picture = PictureSettings(s.controls)
            return s.controls[i]
        }
    }

    /// Manual controls are inactive while their automatic mode is on (when the camera declares both), as a
    /// driver reports them: gain / gain_automatic, white_balance_temperature / white_balance_automatic,
    /// exposure_time_absolute / auto_exposure (manual is mode 1), focus_absolute / continuous autofocus.
    static func withDynamicFlags(_ controls: [CameraControl]) -> [CameraControl] {
        let pairs: [(manual: CameraControlID, auto: CameraControlID, isAuto: (Int64) -> Bool)] = [
            (.gain, .autoGain, { $0 != 0 }), (.whiteBalanceTemperature, .autoWhiteBalance, { $0 != 0 }),
            (.exposureTimeAbsolute, .autoExposure, { $0 != 1 }), (.focusAbsolute, .autoFocus, { $0 != 0 }),
        ]
        var out = controls
        for p in pairs {
            guard let m = out.firstIndex(where: { $0.id == p.manual }), let a = out.first(where: { $0.id == p.auto })?.integerValue else { continue }
            if p.isAuto(a) { out[m].flags.insert(.inactive) } else { out[m].flags.remove(.inactive) }
        }
        return out
    }
}

/// Applies `PictureSettings` to a rendered picture, into a buffer of its own (allocated once per stream).
final class PictureAdjuster {
    let width: Int, height: Int
    /// The picture is full range (MJPEG): black is 0 and solid colours are expanded to full range.
    let fullRange: Bool
    private var adjusted: I420Buffer?
    private let table = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
    private var tableFor: PictureSettings?

    init(width: Int, height: Int, fullRange: Bool = false) {
        self.width = width
        self.height = height
        self.fullRange = fullRange
    }
    deinit { table.deallocate() }

    /// The picture to send: `src` itself when the settings change nothing, else the adjusted copy.
    func apply(_ s: PictureSettings, to src: I420Buffer) -> I420Buffer {
        if s.isIdentity { return src }
        let dst = adjusted ?? I420Buffer(width: width, height: height)
        adjusted = dst
        let w = src.width, h = src.height, cw = src.chromaWidth, ch = src.chromaHeight
        if let yuv = s.solid {
            let total = dst.strideY * h
            var y = UInt8(yuv >> 16 & 0xff), u = UInt8(yuv >> 8 & 0xff), v = UInt8(yuv & 0xff)
            if fullRange { (y, u, v) = (TestPattern.fullRangeLuma(y), TestPattern.fullRangeChroma(u), TestPattern.fullRangeChroma(v)) }
            dst.mutableDataY.update(repeating: y, count: total)
            dst.mutableDataU.update(repeating: u, count: dst.strideU * ch)
            dst.mutableDataV.update(repeating: v, count: dst.strideV * ch)
        } else {
            func plane(_ sp: UnsafePointer<UInt8>, _ ss: Int, _ dp: UnsafeMutablePointer<UInt8>, _ ds: Int, _ pw: Int, _ ph: Int) {
                switch (s.hflip, s.vflip) {
                case (true, true): PlaneOps.rotate180(sp, ss, dp, ds, width: pw, height: ph)
                case (true, false): PlaneOps.mirror(sp, ss, dp, ds, width: pw, height: ph)
                case (false, true): PlaneOps.flipVertically(sp, ss, dp, ds, width: pw, height: ph)
                case (false, false): PlaneOps.copy(sp, ss, dp, ds, width: pw, height: ph)
                }
            }
            plane(src.dataY, src.strideY, dst.mutableDataY, dst.strideY, w, h)
            plane(src.dataU, src.strideU, dst.mutableDataU, dst.strideU, cw, ch)
            plane(src.dataV, src.strideV, dst.mutableDataV, dst.strideV, cw, ch)
        }
        if s.adjustsLuma {
            if tableFor != s {
                let black = fullRange ? 0 : 16
                for y in 0..<256 {
                    let v = black + (y - black) * s.contrastNum / Swift.max(1, s.contrastDen) + s.lumaOffset
                    let b = UInt8(Swift.max(0, Swift.min(255, v)))
                    for k in 0..<4 { table[y * 4 + k] = b }
                }
                tableFor = s
            }
            PlaneOps.lookUp(dst.mutableDataY, dst.strideY, table: table, width: dst.strideY, height: h)
        }
        return dst
    }
}
