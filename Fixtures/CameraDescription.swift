import Foundation
public import VideoCapture

#if canImport(Glibc)
import Glibc
#endif

/// A camera described by its format list: what a fixture file holds, and what a V4L2 device reports.
public struct CameraDescription: Sendable, Hashable {
    public var name: String
    public var position: CaptureDevice.Position
    /// Rotation carried on every frame (a sensor mounted sideways, as on phones).
    public var rotation: VideoRotation
    public var formats: [CaptureFormat]

    public init(name: String, position: CaptureDevice.Position = .external, rotation: VideoRotation = .rotation0, formats: [CaptureFormat]) {
        self.name = name; self.position = position; self.rotation = rotation; self.formats = formats
    }

    /// Parses a fixture: JSON when the text starts with `{`, else the text of `v4l2-ctl --list-formats-ext`.
    /// `file` is used in error messages and, without a name in the text, as the camera's name.
    public static func parse(_ text: String, file: String) throws(FixtureParseError) -> CameraDescription {
        let trimmed = text.drop { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }
        if trimmed.first == "{" { return try parseJSON(text, file: file) }
        return try parseListing(text, file: file)
    }

    /// Reads and parses a fixture file.
    public static func load(path: String) throws(FixtureParseError) -> CameraDescription {
        guard let text = readTextFile(path) else {
            throw FixtureParseError(file: path, line: 0, "cannot read the file (\(String(cString: strerror(errno))))")
        }
        return try parse(text, file: path)
    }
}

/// Reads a whole file as UTF-8 (nil if it cannot be opened).
package func readTextFile(_ path: String) -> String? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, f)
        if n <= 0 { break }
        data.append(contentsOf: chunk[0..<n])
    }
    return String(decoding: data, as: UTF8.self)
}

// MARK: - v4l2-ctl --list-formats-ext

extension CameraDescription {
    /// Both styles v4l2-ctl has printed: `[0]: 'YUYV' (YUYV 4:2:2)` and the older
    /// `Index : 0` / `Pixel Format: 'YUYV'` / `Name : YUYV 4:2:2`. Lines that are neither a format, a size
    /// nor an interval (driver info, controls) are ignored, so a whole bug-report paste works.
    static func parseListing(_ text: String, file: String) throws(FixtureParseError) -> CameraDescription {
        var name = ""
        var formats: [CaptureFormat] = []
        var currentFormat: (PixelFormat, String)?
        var currentSize: FrameSizeRange?
        var discreteIntervals: [Fraction] = []
        var rangeIntervals: FrameIntervals?

        func flushSize() {
            guard let (pf, desc) = currentFormat, let size = currentSize else { return }
            let intervals: FrameIntervals? = rangeIntervals ?? (discreteIntervals.isEmpty ? nil : .discrete(discreteIntervals))
            formats.append(CaptureFormat(pixelFormat: pf, size: size, intervals: intervals, formatDescription: desc))
            currentSize = nil; discreteIntervals = []; rangeIntervals = nil
        }

        var lineNo = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNo += 1
            let line = rawLine.trimmingSpaces
            let err = { (msg: String) in FixtureParseError(file: file, line: lineNo, msg) }

            if line.hasPrefix("Card type"), let v = line.valueAfterColon, name.isEmpty { name = v; continue }
            if line.hasPrefix("Size:") {
                guard currentFormat != nil else { throw err("a size line before any format: expected a format line such as \"[0]: 'YUYV' (YUYV 4:2:2)\" first") }
                flushSize()
                currentSize = try parseSizeLine(String(line.dropFirst(5)).trimmingSpaces, err)
                continue
            }
            if line.hasPrefix("Interval:") {
                guard currentSize != nil else { throw err("an interval line before any size: expected \"Size: Discrete WxH\" first") }
                let iv = try parseIntervalLine(String(line.dropFirst(9)).trimmingSpaces, err)
                switch iv {
                case .discrete(let list): discreteIntervals += list
                default: rangeIntervals = iv
                }
                continue
            }
            // New style: [N]: 'FOURCC' (description)
            if line.hasPrefix("["), let close = line.firstIndex(of: "]"), Int(line[line.index(after: line.startIndex)..<close]) != nil {
                flushSize()
                let rest = String(line[line.index(after: close)...])
                guard let (pf, desc) = try parseFourCCAndDescription(rest, err) else {
                    throw err("expected a format line like \"[0]: 'YUYV' (YUYV 4:2:2)\", found \"\(line)\"")
                }
                currentFormat = (pf, desc)
                continue
            }
            // Old style.
            if line.hasPrefix("Pixel Format") {
                flushSize()
                guard let (pf, _) = try parseFourCCAndDescription(String(line.dropFirst("Pixel Format".count)), err) else {
                    throw err("expected \"Pixel Format: 'YUYV'\", found \"\(line)\"")
                }
                currentFormat = (pf, pf.name)
                continue
            }
            if line.hasPrefix("Name"), let v = line.valueAfterColon, let cf = currentFormat, currentSize == nil {
                currentFormat = (cf.0, v)
                continue
            }
        }
        flushSize()
        if formats.isEmpty {
            throw FixtureParseError(file: file, line: lineNo, "no formats found: expected the output of `v4l2-ctl --list-formats-ext` or a JSON camera description")
        }
        if name.isEmpty { name = fileStem(file) }
        return CameraDescription(name: name, formats: formats)
    }

    private static func parseFourCCAndDescription(_ text: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> (PixelFormat, String)? {
        // ": 'YUYV' (YUYV 4:2:2, ...)" — the FourCC sits between the first pair of quotes.
        guard let q1 = text.firstIndex(of: "'") else { return nil }
        let afterQ1 = text.index(after: q1)
        guard let q2 = text[afterQ1...].firstIndex(of: "'") else { return nil }
        let code = String(text[afterQ1..<q2])
        guard let pf = PixelFormat(fourcc: code), pf.isKnown else {
            throw err("unknown FourCC '\(code)': expected a V4L2 pixel format such as 'YUYV', 'NV12' or 'MJPG'")
        }
        var desc = pf.name
        let rest = text[text.index(after: q2)...]
        if let open = rest.firstIndex(of: "("), let close = rest.lastIndex(of: ")"), open < close {
            let inside = rest[rest.index(after: open)..<close]
            desc = String(inside.split(separator: ",").first ?? Substring(desc)).trimmingSpaces
        }
        return (pf, desc)
    }

    private static func parseSize(_ text: some StringProtocol, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> FrameSize {
        let parts = text.split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else {
            throw err("expected a size WIDTHxHEIGHT, found \"\(text)\"")
        }
        guard w > 0, h > 0 else { throw err("size \(w)x\(h) must be positive") }
        return FrameSize(width: w, height: h)
    }

    private static func parseSizeLine(_ text: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> FrameSizeRange {
        let words = text.split(separator: " ")
        switch words.first {
        case "Discrete":
            guard words.count == 2 else { throw err("expected \"Size: Discrete WxH\", found \"Size: \(text)\"") }
            return .discrete(try parseSize(words[1], err))
        case "Stepwise":
            // Stepwise 16x16 - 1920x1080 with step 8/8
            guard words.count == 7, words[2] == "-", words[4] == "with", words[5] == "step" else {
                throw err("expected \"Size: Stepwise WxH - WxH with step W/H\", found \"Size: \(text)\"")
            }
            let stepText = words[6]
            let lo = try parseSize(words[1], err), hi = try parseSize(words[3], err)
            let st = stepText.split(separator: "/")
            guard st.count == 2, let sw = Int(st[0]), let sh = Int(st[1]), sw > 0, sh > 0 else {
                throw err("expected a positive step W/H, found \"\(stepText)\"")
            }
            guard lo.width <= hi.width, lo.height <= hi.height else { throw err("size range \(lo) - \(hi) has its minimum above its maximum") }
            return .stepwise(min: lo, max: hi, step: FrameSize(width: sw, height: sh))
        case "Continuous":
            guard words.count >= 4, words[2] == "-" else { throw err("expected \"Size: Continuous WxH - WxH\", found \"Size: \(text)\"") }
            let lo = try parseSize(words[1], err), hi = try parseSize(words[3], err)
            guard lo.width <= hi.width, lo.height <= hi.height else { throw err("size range \(lo) - \(hi) has its minimum above its maximum") }
            return .continuous(min: lo, max: hi)
        default:
            throw err("expected Discrete, Stepwise or Continuous after \"Size:\", found \"\(text)\"")
        }
    }

    /// Intervals are taken from the fps figures v4l2-ctl prints (three decimals, exact for common rates);
    /// a stepwise step from its seconds figure.
    private static func parseIntervalLine(_ text: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> FrameIntervals {
        func fpsFigures() throws(FixtureParseError) -> [Double] {
            guard let open = text.lastIndex(of: "("), let fpsEnd = text.range(of: " fps)") else {
                throw err("expected the frame rate in parentheses, e.g. \"(30.000 fps)\", found \"\(text)\"")
            }
            let inner = text[text.index(after: open)..<fpsEnd.lowerBound]
            // "1.000-30.000" or "30.000"
            let values = inner.split(separator: "-").compactMap { Double($0) }
            guard !values.isEmpty, values.allSatisfy({ $0 > 0 }) else {
                throw err("frame rate must be positive, found \"(\(inner) fps)\"")
            }
            return values
        }
        let kind = text.split(separator: " ").first
        switch kind {
        case "Discrete":
            let v = try fpsFigures()
            guard v.count == 1 else { throw err("expected one frame rate, found \"\(text)\"") }
            return .discrete([Fraction(approximating: v[0]).reciprocal])
        case "Stepwise", "Continuous":
            let v = try fpsFigures()
            guard v.count == 2 else { throw err("expected a frame-rate range \"(MIN-MAX fps)\", found \"\(text)\"") }
            let minInterval = Fraction(approximating: v[1]).reciprocal, maxInterval = Fraction(approximating: v[0]).reciprocal
            guard minInterval <= maxInterval else { throw err("interval range has its minimum above its maximum: \"\(text)\"") }
            if kind == "Continuous" { return .continuous(min: minInterval, max: maxInterval) }
            guard let stepText = text.components(afterLast: "with step "), let s = Double(stepText.split(separator: "s").first ?? ""), s > 0 else {
                throw err("expected \"with step N.NNNs\" and a positive step, found \"\(text)\"")
            }
            // v4l2-ctl rounds to milliseconds: a step that matches the minimum interval within that
            // rounding (0.017s for 1/60) is taken as exactly the minimum interval.
            let step = abs(s - minInterval.doubleValue) <= 0.0005 ? minInterval : Fraction(approximating: s)
            return .stepwise(min: minInterval, max: maxInterval, step: step)
        default:
            throw err("expected Discrete, Stepwise or Continuous after \"Interval:\", found \"\(text)\"")
        }
    }
}

// MARK: - JSON

extension CameraDescription {
    /// The JSON schema (documented in `Fixtures/README.md`):
    /// `{"name", "position"?, "rotation"?, "formats": [{"pixelFormat", "sizes": [size...]}]}` where a size is
    /// `{"width", "height", "fps"?: [rates] | "fpsRange"?: {"min","max"} | "intervalRange"?: {"min","max","step"}}`
    /// or `{"stepwise": {"min": "WxH", "max": "WxH", "step": "WxH"}, ...}` or `{"continuous": {"min", "max"}, ...}`.
    static func parseJSON(_ text: String, file: String) throws(FixtureParseError) -> CameraDescription {
        let root = try JSONReader.parse(text, file: file)
        func err(_ node: JSONNode, _ msg: String) -> FixtureParseError { FixtureParseError(file: file, line: node.line, msg) }
        guard case .object = root else { throw err(root, "expected a JSON object describing a camera, found \(root.kind)") }

        func string(_ n: JSONNode?, _ what: String, in parent: JSONNode) throws(FixtureParseError) -> String {
            guard let n else { throw err(parent, "missing \(what)") }
            guard case .string(let s, _) = n else { throw err(n, "\(what) must be a string, found \(n.kind)") }
            return s
        }
        func positiveInt(_ n: JSONNode?, _ what: String, in parent: JSONNode) throws(FixtureParseError) -> Int {
            guard let n else { throw err(parent, "missing \(what)") }
            guard case .number(let v, _) = n, v == v.rounded() else { throw err(n, "\(what) must be a whole number, found \(n.kind)") }
            guard v > 0 else { throw err(n, "\(what) must be positive, found \(Int(v))") }
            return Int(v)
        }
        func size(_ n: JSONNode?, _ what: String, in parent: JSONNode) throws(FixtureParseError) -> FrameSize {
            let s = try string(n, what, in: parent)
            guard let parsed = FrameSize(parsing: s) else { throw err(n ?? parent, "\(what) must be a positive size \"WxH\", found \"\(s)\"") }
            return parsed
        }
        func rate(_ n: JSONNode) throws(FixtureParseError) -> Fraction {
            switch n {
            case .number(let v, _) where v > 0: return Fraction(approximating: v)
            case .string(let s, _):
                let p = s.split(separator: "/", omittingEmptySubsequences: false)
                if p.count == 1, let a = Int64(p[0]), a > 0 { return Fraction(a) }
                if p.count == 2, let a = Int64(p[0]), let b = Int64(p[1]), a > 0, b > 0 { return Fraction(a, b) }
                throw err(n, "expected a positive fraction \"N/D\", found \"\(s)\"")
            default: throw err(n, "expected a positive frame rate, found \(n.kind)")
            }
        }

        let name = try string(root["name"], "\"name\"", in: root)
        var position = CaptureDevice.Position.external
        if let p = root["position"] {
            let s = try string(p, "\"position\"", in: root)
            guard let v = CaptureDevice.Position(rawValue: s) else { throw err(p, "\"position\" must be front, back or external, found \"\(s)\"") }
            position = v
        }
        var rotation = VideoRotation.rotation0
        if let r = root["rotation"] {
            guard case .number(let v, _) = r, let rot = VideoRotation(rawValue: Int(v)), Double(rot.rawValue) == v else {
                throw err(r, "\"rotation\" must be 0, 90, 180 or 270, found \(r.kind)")
            }
            rotation = rot
        }
        guard let fmtsNode = root["formats"] else { throw err(root, "missing \"formats\" (an array of formats)") }
        guard case .array(let fmts, _) = fmtsNode, !fmts.isEmpty else { throw err(fmtsNode, "\"formats\" must be a non-empty array, found \(fmtsNode.kind)") }

        var formats: [CaptureFormat] = []
        for f in fmts {
            guard case .object = f else { throw err(f, "each format must be an object, found \(f.kind)") }
            let code = try string(f["pixelFormat"], "\"pixelFormat\"", in: f)
            guard let pf = PixelFormat(fourcc: code), pf.isKnown else {
                throw err(f["pixelFormat"]!, "unknown FourCC '\(code)': expected a V4L2 pixel format such as 'YUYV', 'NV12' or 'MJPG'")
            }
            let desc = f["description"].flatMap { if case .string(let s, _) = $0 { s } else { nil } } ?? pf.name
            guard let sizesNode = f["sizes"] else { throw err(f, "missing \"sizes\" for format \(code)") }
            guard case .array(let sizes, _) = sizesNode, !sizes.isEmpty else { throw err(sizesNode, "\"sizes\" must be a non-empty array") }
            for s in sizes {
                guard case .object = s else { throw err(s, "each size must be an object, found \(s.kind)") }
                let range: FrameSizeRange
                if let sw = s["stepwise"] {
                    let lo = try size(sw["min"], "\"min\"", in: sw), hi = try size(sw["max"], "\"max\"", in: sw)
                    let st = try size(sw["step"], "\"step\"", in: sw)
                    guard lo.width <= hi.width, lo.height <= hi.height else { throw err(sw, "stepwise range \(lo) - \(hi) has its minimum above its maximum") }
                    range = .stepwise(min: lo, max: hi, step: st)
                } else if let c = s["continuous"] {
                    let lo = try size(c["min"], "\"min\"", in: c), hi = try size(c["max"], "\"max\"", in: c)
                    guard lo.width <= hi.width, lo.height <= hi.height else { throw err(c, "continuous range \(lo) - \(hi) has its minimum above its maximum") }
                    range = .continuous(min: lo, max: hi)
                } else {
                    range = .discrete(FrameSize(width: try positiveInt(s["width"], "\"width\"", in: s),
                                                height: try positiveInt(s["height"], "\"height\"", in: s)))
                }
                var intervals: FrameIntervals?
                if let list = s["fps"] {
                    guard case .array(let items, _) = list, !items.isEmpty else { throw err(list, "\"fps\" must be a non-empty array of rates") }
                    var ivs: [Fraction] = []
                    for item in items { ivs.append(try rate(item).reciprocal) }
                    intervals = .discrete(ivs)
                } else if let r = s["fpsRange"] {
                    guard let lo = r["min"], let hi = r["max"] else { throw err(r, "\"fpsRange\" needs \"min\" and \"max\"") }
                    let a = try rate(lo), b = try rate(hi)
                    guard a <= b else { throw err(r, "\"fpsRange\" min \(a) is above max \(b)") }
                    intervals = .continuous(min: b.reciprocal, max: a.reciprocal)
                } else if let r = s["intervalRange"] {
                    guard let lo = r["min"], let hi = r["max"], let st = r["step"] else { throw err(r, "\"intervalRange\" needs \"min\", \"max\" and \"step\" (seconds, e.g. \"1/30\")") }
                    let a = try rate(lo), b = try rate(hi), c = try rate(st)
                    guard a <= b else { throw err(r, "\"intervalRange\" min \(a) is above max \(b)") }
                    intervals = .stepwise(min: a, max: b, step: c)
                }
                formats.append(CaptureFormat(pixelFormat: pf, size: range, intervals: intervals, formatDescription: desc))
            }
        }
        return CameraDescription(name: name, position: position, rotation: rotation, formats: formats)
    }
}

/// The file name without folder and extension (`Fixtures/cameras/vivid.txt` → `vivid`).
package func fileStem(_ path: String) -> String {
    let last = path.split(separator: "/").last.map(String.init) ?? path
    if let dot = last.lastIndex(of: "."), dot != last.startIndex { return String(last[..<dot]) }
    return last
}

extension StringProtocol {
    var trimmingSpaces: String {
        let scalars = unicodeScalars.drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(String.UnicodeScalarView(scalars.reversed()))
    }
    var valueAfterColon: String? {
        guard let c = firstIndex(of: ":") else { return nil }
        return String(self[index(after: c)...]).trimmingSpaces
    }
    func components(afterLast marker: String) -> String? {
        guard let r = String(self).range(of: marker, options: .backwards) else { return nil }
        return String(String(self)[r.upperBound...])
    }
}

/// A malformed fixture file: which file, which line, what was expected and what was found.
public struct FixtureParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var message: String
    public init(file: String, line: Int, _ message: String) { self.file = file; self.line = line; self.message = message }
    public var description: String { "\(file):\(line): \(message)" }
}
