import Foundation
public import VideoCapture

#if canImport(Glibc)
    import Glibc
#endif

/// A camera described by its format list: what a fixture file holds, and what a V4L2 device reports.
public struct CameraDescription: Sendable, Hashable {
    /// The camera's name, as devices list it (the JSON `name`, V4L2's card name; else the file's name).
    public var name: String
    /// Where the camera faces (`external` unless the fixture says otherwise).
    public var position: CaptureDevice.Position
    /// Rotation carried on every frame (a sensor mounted sideways, as on phones).
    public var rotation: VideoRotation
    /// Every format entry, in the order of the file (negotiation ties go to the first listed).
    public var formats: [CaptureFormat]
    /// The controls the camera declares (from JSON, or the pasted `v4l2-ctl --list-ctrls-menus` text), with
    /// their initial values; control-class headings included.
    public var controls: [CameraControl]
    /// The colour description of the camera's uncompressed formats (nil: V4L2's default for a webcam, sRGB
    /// with the BT.601 matrix at limited range, as uvcvideo and vivid report). MJPEG frames are always JPEG's
    /// full-range BT.601, whatever this says.
    public var colorSpace: VideoColorSpace?
    /// The faults the camera plays (`FixtureFault`), on this camera only: the JSON `faults` array, or `Fault:` lines
    /// in a listing. They add to the provider's (`FixtureCameraProvider.Options.faults`).
    public var faults: [FixtureFault] = []
    /// How the camera's driver bends negotiation (`FixtureQuirk`): the JSON `quirks` array, or `Quirk:` lines in a
    /// listing.
    public var quirks: [FixtureQuirk] = []

    /// A description in code, without a file.
    public init(
        name: String, position: CaptureDevice.Position = .external, rotation: VideoRotation = .rotation0, formats: [CaptureFormat],
        controls: [CameraControl] = [], colorSpace: VideoColorSpace? = nil
    ) {
        self.name = name
        self.position = position
        self.rotation = rotation
        self.formats = formats
        self.controls = controls
        self.colorSpace = colorSpace
    }

    /// The colour description frames of `pixelFormat` carry: JPEG's for MJPEG/JPEG, else `colorSpace` or
    /// V4L2's sRGB default for the format (limited-range BT.601 Y'CbCr; full-range RGB).
    public func colorSpace(for pixelFormat: PixelFormat) -> VideoColorSpace {
        if pixelFormat == .mjpeg || pixelFormat == .jpeg || pixelFormat == .h264 { return .jpeg } // a webcam's encoder: the JPEG convention
        return colorSpace ?? VideoColorSpace(v4l2Colorspace: 8, transfer: 0, encoding: 0, quantization: 0, pixelFormat: pixelFormat)
    }

    /// The two fixture syntaxes.
    public enum Syntax: Sendable {
        /// JSON: a name, a position, a rotation, formats with their sizes and rates, and controls.
        case json
        /// The text `v4l2-ctl --list-formats-ext` prints (optionally followed by `--list-ctrls-menus`).
        case listing
    }

    /// Fixture files are at most this many bytes (a listing is kilobytes; vivid's 83 formats are 40 KB).
    public static let maximumFileSize = 4 << 20

    /// Parses a fixture: JSON when the text starts with `{` (after an optional UTF-8 byte-order mark and
    /// white space), else the text of `v4l2-ctl --list-formats-ext`; `syntax` forces one.
    /// `file` is used in error messages and, without a name in the text, as the camera's name.
    /// Sizes and rates beyond `CaptureLimits` are errors naming the file, the line and the value.
    public static func parse(_ text: String, file: String, syntax: Syntax? = nil) throws(FixtureParseError) -> CameraDescription {
        guard text.utf8.count <= maximumFileSize else {
            throw FixtureParseError(
                file: file, line: 0, "the text is \(text.utf8.count) bytes; fixtures are limited to \(maximumFileSize) bytes (4 MiB)")
        }
        var body = Substring(text)
        if body.unicodeScalars.first == "\u{FEFF}" { body = Substring(body.unicodeScalars.dropFirst()) }
        let isJSON = syntax.map { $0 == .json } ?? (body.utf8.first { $0 != 0x20 && $0 != 0x0a && $0 != 0x09 && $0 != 0x0d } == UInt8(ascii: "{"))
        if isJSON { return try parseJSON(body, file: file) }
        return try parseListing(body, file: file)
    }

    /// Reads and parses a fixture file (a regular file after following links, at most `maximumFileSize`
    /// bytes: a FIFO, a device or a directory is an error at once, never a blocked or endless read).
    public static func load(path: String) throws(FixtureParseError) -> CameraDescription {
        try parse(try readFixtureFile(path), file: path)
    }
}

/// Reads a fixture file as UTF-8 (invalid bytes become U+FFFD): only a regular file (after resolving
/// symbolic links), at most `CameraDescription.maximumFileSize` bytes.
package func readFixtureFile(_ path: String) throws(FixtureParseError) -> String {
    func fail(_ what: String) -> FixtureParseError { FixtureParseError(file: path, line: 0, what) }
    let limit = CameraDescription.maximumFileSize
    do throws(BoundedReadFailure) {
        return String(decoding: try readBoundedFile(path, limit: limit), as: UTF8.self)
    } catch {
        switch error {
        case .cannotOpen(let e): throw fail("cannot read the file (\(String(cString: strerror(e))))")
        case .notRegular(let kind):
            throw fail("\(kind), not a fixture file: expected a regular file with a JSON camera description or a v4l2-ctl listing")
        case .tooLarge(let size): throw fail("the file is \(size) bytes; fixture files are limited to \(limit) bytes (4 MiB)")
        case .grew: throw fail("the file grew past \(limit) bytes while being read; fixture files are limited to 4 MiB")
        case .readFailed(let e): throw fail("reading the file failed (\(String(cString: strerror(e))))")
        }
    }
}

// MARK: - v4l2-ctl --list-formats-ext

extension CameraDescription {
    /// Both styles v4l2-ctl has printed: `[0]: 'YUYV' (YUYV 4:2:2)` and the older
    /// `Index : 0` / `Pixel Format: 'YUYV'` / `Name : YUYV 4:2:2`. Lines that are neither a format, a size
    /// nor an interval (driver info, controls) are ignored, so a whole bug-report paste works, and so are the `# `
    /// lines the corpus files start with (`# Camera:`, `# Source:`). A range's maximum beyond `CaptureLimits` is
    /// brought within them (`clampedMaximum`). Lines end in LF, CRLF or CR.
    static func parseListing(_ text: Substring, file: String) throws(FixtureParseError) -> CameraDescription {
        var name = ""
        var formats: [CaptureFormat] = []
        var currentFormat: (PixelFormat, String)?
        var currentSize: FrameSizeRange?
        var discreteIntervals: [Fraction] = []
        var rangeIntervals: FrameIntervals?
        var controlParser = ControlListingParser()
        var faults: [FixtureFault] = []
        var quirks: [FixtureQuirk] = []

        func flushSize() {
            guard let (pf, desc) = currentFormat, let size = currentSize else { return }
            let intervals: FrameIntervals? = rangeIntervals ?? (discreteIntervals.isEmpty ? nil : .discrete(discreteIntervals))
            formats.append(CaptureFormat(pixelFormat: pf, size: size, intervals: intervals, formatDescription: desc))
            currentSize = nil
            discreteIntervals = []
            rangeIntervals = nil
        }

        var lineNo = 0
        var rest = text[...]
        var more = true
        while more {
            // One line at a time, without materialising an array of lines (a file of newlines stays cheap).
            let end = rest.utf8.firstIndex { $0 == 0x0a || $0 == 0x0d } ?? rest.endIndex
            let rawLine = rest[..<end]
            if end == rest.endIndex {
                more = false
            } else {
                var next = rest.utf8.index(after: end)
                if rest.utf8[end] == 0x0d, next < rest.endIndex, rest.utf8[next] == 0x0a { next = rest.utf8.index(after: next) }
                rest = rest[next...]
            }
            lineNo += 1
            // Cheap exit for the common blank line.
            if rawLine.utf8.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            let line = rawLine.trimmingSpaces
            let err = { (msg: String) in FixtureParseError(file: file, line: lineNo, msg) }

            if line.hasPrefix("Card type"), let v = line.valueAfterColon, name.isEmpty {
                name = String(v.prefix(256))
                continue
            }
            if try controlParser.consume(line, err) { continue }
            // A fault the camera plays (not v4l2-ctl's: added to a pasted listing): `Fault: unplug@90+5`.
            // A quirk of the camera's driver (`Quirk: round@1920x1080=1920x1088`).
            if line.lowercased().hasPrefix("quirk:") {
                guard quirks.count < 64 else { throw err("more than 64 quirks") }
                do throws(CaptureError) {
                    quirks.append(try FixtureQuirk(parsing: String(line.dropFirst("quirk:".count))))
                } catch { throw err(error.message) }
                continue
            }
            if line.lowercased().hasPrefix("fault:") {
                guard faults.count < 256 else { throw err("more than 256 faults") }
                do throws(CaptureError) {
                    faults.append(try FixtureFault(parsing: String(line.dropFirst("fault:".count)).trimmingSpaces))
                } catch { throw err(error.message) }
                continue
            }
            if line.hasPrefix("Size:") {
                guard currentFormat != nil else {
                    throw err("a size line before any format: expected a format line such as \"[0]: 'YUYV' (YUYV 4:2:2)\" first")
                }
                flushSize()
                currentSize = try parseSizeLine(String(line.dropFirst(5)).trimmingSpaces, err)
                continue
            }
            if line.hasPrefix("Interval:") {
                guard currentSize != nil else { throw err("an interval line before any size: expected \"Size: Discrete WxH\" first") }
                let iv = try parseIntervalLine(String(line.dropFirst(9)).trimmingSpaces, err)
                switch iv {
                case .discrete(let list):
                    guard discreteIntervals.count + list.count <= 1024 else { throw err("more than 1024 intervals for one size") }
                    discreteIntervals += list
                default: rangeIntervals = iv
                }
                continue
            }
            // New style: [N]: 'FOURCC' (description)
            if line.hasPrefix("["), let close = line.firstIndex(of: "]"), Int(line[line.index(after: line.startIndex)..<close]) != nil {
                flushSize()
                let rest = String(line[line.index(after: close)...])
                guard let (pf, desc) = try parseFourCCAndDescription(rest, err) else {
                    throw err("expected a format line like \"[0]: 'YUYV' (YUYV 4:2:2)\", found \(excerpt(line))")
                }
                currentFormat = (pf, desc)
                continue
            }
            // Old style.
            if line.hasPrefix("Pixel Format") {
                flushSize()
                guard let (pf, _) = try parseFourCCAndDescription(String(line.dropFirst("Pixel Format".count)), err) else {
                    throw err("expected \"Pixel Format: 'YUYV'\", found \(excerpt(line))")
                }
                currentFormat = (pf, pf.name)
                continue
            }
            if line.hasPrefix("Name"), let v = line.valueAfterColon, let cf = currentFormat, currentSize == nil {
                currentFormat = (cf.0, String(v.prefix(256)))
                continue
            }
        }
        flushSize()
        if formats.isEmpty {
            throw FixtureParseError(
                file: file, line: lineNo, "no formats found: expected the output of `v4l2-ctl --list-formats-ext` or a JSON camera description")
        }
        if name.isEmpty { name = fileStem(file) }
        let controls = controlParser.controls
        let (position, rotation) = sensorMetadata(controls)
        var d = CameraDescription(name: name, position: position ?? .external, rotation: rotation ?? .rotation0, formats: formats, controls: controls)
        (d.faults, d.quirks) = (faults, quirks)
        return d
    }

    private static func parseFourCCAndDescription(_ text: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> (
        PixelFormat, String
    )? {
        // ": 'YUYV' (YUYV 4:2:2, ...)" — the FourCC sits between the first pair of quotes.
        guard let q1 = text.firstIndex(of: "'") else { return nil }
        let afterQ1 = text.index(after: q1)
        guard let q2 = text[afterQ1...].firstIndex(of: "'") else { return nil }
        let code = String(text[afterQ1..<q2])
        guard let pf = PixelFormat(fourcc: code), pf.isKnown else {
            throw err("unknown FourCC \(excerpt(code, quote: "'")): expected a V4L2 pixel format such as 'YUYV', 'NV12' or 'MJPG'")
        }
        var desc = pf.name
        let rest = text[text.index(after: q2)...]
        if let open = rest.firstIndex(of: "("), let close = rest.lastIndex(of: ")"), open < close {
            let inside = rest[rest.index(after: open)..<close]
            desc = String((inside.split(separator: ",").first ?? Substring(desc)).trimmingSpaces.prefix(256))
        }
        return (pf, desc)
    }

    /// `WxH` with both sides 1...`limit` (`CaptureLimits.maxDimension` unless a range's maximum is read).
    private static func parseSize(_ text: some StringProtocol, upTo limit: Int = CaptureLimits.maxDimension, _ err: (String) -> FixtureParseError)
        throws(FixtureParseError) -> FrameSize
    {
        let parts = text.split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else {
            throw err("expected a size WIDTHxHEIGHT, found \(excerpt(text))")
        }
        guard w > 0, h > 0 else { throw err("size \(w)x\(h) must be positive") }
        guard w <= limit, h <= limit else { throw err("size \(w)x\(h) is too large: width and height are at most \(limit)") }
        return FrameSize(width: w, height: h)
    }

    /// The largest a range's maximum may be as a driver prints it (`struct v4l2_frmsize_stepwise` holds 32-bit sides).
    static let largestListedRangeSide = Int(UInt32.max)

    /// A range's maximum as the listing parser keeps it: drivers print ranges that reach past `CaptureLimits`
    /// (Raspberry Pi unicam 16376x16376, the Pi 5 ISP 65535x65535) although every size a capture can use is within
    /// them, so the maximum is brought within the limits (each side at most `CaptureLimits.maxDimension`, and both at
    /// most 8192 when the area would pass `CaptureLimits.maxPixels`), onto the range's step grid; never below `min`.
    static func clampedMaximum(_ hi: FrameSize, min lo: FrameSize, step: FrameSize?) -> FrameSize {
        var w = Swift.min(hi.width, CaptureLimits.maxDimension), h = Swift.min(hi.height, CaptureLimits.maxDimension)
        if w * h > CaptureLimits.maxPixels {
            let side = 1 << 13 // 8192: the square of side² == maxPixels
            w = Swift.min(w, side)
            h = Swift.min(h, side)
        }
        if let step, step.width > 0, step.height > 0 {
            if w > lo.width { w = lo.width + (w - lo.width) / step.width * step.width }
            if h > lo.height { h = lo.height + (h - lo.height) / step.height * step.height }
        }
        return FrameSize(width: Swift.max(w, Swift.min(lo.width, hi.width)), height: Swift.max(h, Swift.min(lo.height, hi.height)))
    }

    /// A whole size entry within `CaptureLimits` (for a range: its largest size).
    static func checkedRange(_ range: FrameSizeRange, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> FrameSizeRange {
        let largest: FrameSize
        switch range {
        case .discrete(let s): largest = s
        case .stepwise(let lo, let hi, _), .continuous(let lo, let hi):
            guard lo.width <= hi.width, lo.height <= hi.height else { throw err("size range \(lo) - \(hi) has its minimum above its maximum") }
            largest = hi
        }
        if let problem = CaptureLimits.problem(with: largest) { throw err(problem) }
        return range
    }

    private static func parseSizeLine(_ text: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> FrameSizeRange {
        let words = text.split(separator: " ")
        switch words.first {
        case "Discrete":
            guard words.count == 2 else { throw err("expected \"Size: Discrete WxH\", found \(excerpt("Size: " + text))") }
            return try checkedRange(.discrete(try parseSize(words[1], err)), err)
        case "Stepwise":
            // Stepwise 16x16 - 1920x1080 with step 8/8
            guard words.count == 7, words[2] == "-", words[4] == "with", words[5] == "step" else {
                throw err("expected \"Size: Stepwise WxH - WxH with step W/H\", found \(excerpt("Size: " + text))")
            }
            let stepText = words[6]
            let lo = try parseSize(words[1], err), listedHi = try parseSize(words[3], upTo: largestListedRangeSide, err)
            let st = stepText.split(separator: "/", omittingEmptySubsequences: false)
            guard st.count == 2, let sw = Int(st[0]), let sh = Int(st[1]), sw > 0, sh > 0,
                sw <= CaptureLimits.maxDimension, sh <= CaptureLimits.maxDimension
            else {
                throw err("expected a step W/H of 1...\(CaptureLimits.maxDimension) each, found \(excerpt(stepText))")
            }
            let step = FrameSize(width: sw, height: sh)
            return try checkedRange(.stepwise(min: lo, max: clampedMaximum(listedHi, min: lo, step: step), step: step), err)
        case "Continuous":
            guard words.count >= 4, words[2] == "-" else { throw err("expected \"Size: Continuous WxH - WxH\", found \(excerpt("Size: " + text))") }
            let lo = try parseSize(words[1], err), listedHi = try parseSize(words[3], upTo: largestListedRangeSide, err)
            return try checkedRange(.continuous(min: lo, max: clampedMaximum(listedHi, min: lo, step: nil)), err)
        default:
            throw err("expected Discrete, Stepwise or Continuous after \"Size:\", found \(excerpt(text))")
        }
    }

    /// A frame rate from a decimal figure, within `CaptureLimits` (three decimals are kept: v4l2-ctl prints three).
    static func rate(fromDecimal v: Double, _ what: @autoclosure () -> String, _ err: (String) -> FixtureParseError) throws(FixtureParseError)
        -> Fraction
    {
        guard v.isFinite, v >= CaptureLimits.minRate, v <= CaptureLimits.maxRate, let f = Fraction(approximating: v), f.isPositive else {
            throw err("frame rate \(what()) is out of range: \(CaptureLimits.minRate)...\(Int(CaptureLimits.maxRate)) fps")
        }
        return f
    }

    /// Intervals are taken from the fps figures v4l2-ctl prints (three decimals, exact for common rates);
    /// a stepwise step from its seconds figure.
    private static func parseIntervalLine(_ text: String, _ err: (String) -> FixtureParseError) throws(FixtureParseError) -> FrameIntervals {
        func fpsFigures() throws(FixtureParseError) -> [Fraction] {
            guard let fpsEnd = text.range(of: " fps)", options: .backwards), let open = text[..<fpsEnd.lowerBound].lastIndex(of: "(") else {
                throw err("expected the frame rate in parentheses, e.g. \"(30.000 fps)\", found \(excerpt(text))")
            }
            let inner = text[text.index(after: open)..<fpsEnd.lowerBound]
            // "1.000-30.000" or "30.000"
            let parts = inner.split(separator: "-", omittingEmptySubsequences: false)
            var values: [Fraction] = []
            for p in parts {
                guard let v = Double(p.trimmingSpaces), v > 0 else {
                    throw err("frame rate must be positive, found \(excerpt("(" + inner + " fps)"))")
                }
                values.append(try rate(fromDecimal: v, excerpt(String(p)), err))
            }
            return values
        }
        let kind = text.split(separator: " ").first
        switch kind {
        case "Discrete":
            let v = try fpsFigures()
            guard v.count == 1 else { throw err("expected one frame rate, found \(excerpt(text))") }
            return .discrete([v[0].reciprocal])
        case "Stepwise", "Continuous":
            let v = try fpsFigures()
            guard v.count == 2 else { throw err("expected a frame-rate range \"(MIN-MAX fps)\", found \(excerpt(text))") }
            let minInterval = v[1].reciprocal, maxInterval = v[0].reciprocal
            guard minInterval <= maxInterval else { throw err("interval range has its minimum above its maximum: \(excerpt(text))") }
            if kind == "Continuous" { return .continuous(min: minInterval, max: maxInterval) }
            guard let stepText = text.components(afterLast: "with step "), let s = Double(stepText.split(separator: "s").first ?? ""), s > 0 else {
                throw err("expected \"with step N.NNNs\" and a positive step, found \(excerpt(text))")
            }
            guard s.isFinite, s <= 1 / CaptureLimits.minRate, let stepFraction = Fraction(approximating: s), stepFraction.isPositive else {
                throw err("interval step \(s)s is out of range: 0.001...\(Int(1 / CaptureLimits.minRate)) s")
            }
            // v4l2-ctl rounds to milliseconds: a step that matches the minimum interval within that
            // rounding (0.017s for 1/60) is taken as exactly the minimum interval.
            let step = abs(s - minInterval.doubleValue) <= 0.0005 ? minInterval : stepFraction
            return .stepwise(min: minInterval, max: maxInterval, step: step)
        default:
            throw err("expected Discrete, Stepwise or Continuous after \"Interval:\", found \(excerpt(text))")
        }
    }
}

/// Quoted text for an error message: control characters escaped, cut to about 80 characters, so one bad
/// line of a 4 MB file does not flood the terminal.
package func excerpt(_ text: some StringProtocol, quote: Character = "\"", limit: Int = 80) -> String {
    var out = ""
    var count = 0
    for scalar in text.unicodeScalars {
        if count == limit {
            out += "…"
            break
        }
        switch scalar {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20 || scalar.value == 0x7f: out += "\\u{\(String(scalar.value, radix: 16))}"
        case _ where scalar == Unicode.Scalar(String(quote)): out += "\\" + String(quote)
        default: out.unicodeScalars.append(scalar)
        }
        count += 1
    }
    return String(quote) + out + String(quote)
}

// MARK: - JSON

extension CameraDescription {
    /// The JSON schema (documented in `Sources/FixtureCameras/README.md`):
    /// `{"name", "position"?, "rotation"?, "formats": [{"pixelFormat", "sizes": [size...]}]}` where a size is
    /// `{"width", "height", "fps"?: [rates] | "fpsRange"?: {"min","max"} | "intervalRange"?: {"min","max","step"}}`
    /// or `{"stepwise": {"min": "WxH", "max": "WxH", "step": "WxH"}, ...}` or `{"continuous": {"min", "max"}, ...}`.
    static func parseJSON(_ text: Substring, file: String) throws(FixtureParseError) -> CameraDescription {
        try JSONFixtureParser(file: file).camera(try JSONReader.parse(text, file: file))
    }
}

/// Reads a camera from a parsed JSON fixture: each part in its own method, every error naming the file and line.
struct JSONFixtureParser {
    let file: String

    func err(_ node: JSONNode, _ msg: String) -> FixtureParseError { FixtureParseError(file: file, line: node.line, msg) }

    func string(_ n: JSONNode?, _ what: String, in parent: JSONNode) throws(FixtureParseError) -> String {
        guard let n else { throw err(parent, "missing \(what)") }
        guard case .string(let s, _) = n else { throw err(n, "\(what) must be a string, found \(n.kind)") }
        return s
    }
    /// A whole number 1...maxDimension (compared as a Double first: no trapping conversion).
    func dimension(_ n: JSONNode?, _ what: String, in parent: JSONNode) throws(FixtureParseError) -> Int {
        guard let n else { throw err(parent, "missing \(what)") }
        guard case .number(let v, _) = n, v.isFinite, v == v.rounded() else { throw err(n, "\(what) must be a whole number, found \(n.kind)") }
        guard v > 0 else { throw err(n, "\(what) must be positive, found \(n.kind.dropFirst("the number ".count))") }
        guard v <= Double(CaptureLimits.maxDimension) else {
            throw err(n, "\(what) is too large: at most \(CaptureLimits.maxDimension), found \(n.kind.dropFirst("the number ".count))")
        }
        return Int(v)
    }
    func size(_ n: JSONNode?, _ what: String, in parent: JSONNode) throws(FixtureParseError) -> FrameSize {
        let s = try string(n, what, in: parent)
        guard let parsed = FrameSize(parsing: s) else { throw err(n ?? parent, "\(what) must be a positive size \"WxH\", found \(excerpt(s))") }
        guard parsed.width <= CaptureLimits.maxDimension, parsed.height <= CaptureLimits.maxDimension else {
            throw err(n ?? parent, "\(what) \(parsed) is too large: width and height are at most \(CaptureLimits.maxDimension)")
        }
        return parsed
    }
    /// A positive rate (or interval) as a number or "N/D", within `CaptureLimits` (as a rate, or as an
    /// interval when `interval` is set).
    func rate(_ n: JSONNode, interval: Bool = false) throws(FixtureParseError) -> Fraction {
        let value: Fraction
        switch n {
        case .number(let v, _):
            guard v > 0 else { throw err(n, "expected a positive \(interval ? "interval" : "frame rate"), found \(n.kind)") }
            guard let f = Fraction(approximating: v), f.isPositive else {
                throw err(n, "\(interval ? "interval" : "frame rate") \(n.kind.dropFirst("the number ".count)) is out of range")
            }
            value = f
        case .string(let s, _):
            let p = s.split(separator: "/", omittingEmptySubsequences: false)
            let terms = p.map { Int64($0) }
            guard p.count == 1 || p.count == 2, let a = terms[0], a > 0, p.count == 1 || (terms[1] ?? 0) > 0,
                let f = Fraction(exactly: a, p.count == 2 ? terms[1]! : 1)
            else {
                throw err(n, "expected a positive fraction \"N/D\", found \(excerpt(s))")
            }
            value = f
        default: throw err(n, "expected a positive \(interval ? "interval" : "frame rate"), found \(n.kind)")
        }
        if let problem = CaptureLimits.problem(withRate: interval ? value.reciprocal : value) {
            throw err(n, interval ? "interval \(value) s: \(problem)" : problem)
        }
        return value
    }
    func checked(_ range: FrameSizeRange, _ node: JSONNode) throws(FixtureParseError) -> FrameSizeRange {
        try CameraDescription.checkedRange(range) { err(node, $0) }
    }

    func camera(_ root: JSONNode) throws(FixtureParseError) -> CameraDescription {
        guard case .object = root else { throw err(root, "expected a JSON object describing a camera, found \(root.kind)") }
        let name = String(try string(root["name"], "\"name\"", in: root).prefix(256))
        let controls = try CameraDescription.parseJSONControls(root["controls"], file: file)
        let declared = CameraDescription.sensorMetadata(controls)
        var position = declared.0 ?? CaptureDevice.Position.external
        if let p = root["position"] {
            let s = try string(p, "\"position\"", in: root)
            guard let v = CaptureDevice.Position(rawValue: s) else {
                throw err(p, "\"position\" must be front, back or external, found \(excerpt(s))")
            }
            position = v
        }
        var rotation = declared.1 ?? VideoRotation.rotation0
        if let r = root["rotation"] {
            guard case .number(let v, _) = r, let rot = VideoRotation.allCases.first(where: { Double($0.rawValue) == v }) else {
                throw err(r, "\"rotation\" must be 0, 90, 180 or 270, found \(r.kind)")
            }
            rotation = rot
        }
        let colorSpace = try root["colorSpace"].map { n throws(FixtureParseError) in try self.colorSpace(n) }
        guard let fmtsNode = root["formats"] else { throw err(root, "missing \"formats\" (an array of formats)") }
        guard case .array(let fmts, _) = fmtsNode, !fmts.isEmpty else {
            throw err(fmtsNode, "\"formats\" must be a non-empty array, found \(fmtsNode.kind)")
        }

        var formats: [CaptureFormat] = []
        for f in fmts {
            guard case .object = f else { throw err(f, "each format must be an object, found \(f.kind)") }
            let code = try string(f["pixelFormat"], "\"pixelFormat\"", in: f)
            guard let pf = PixelFormat(fourcc: code), pf.isKnown else {
                throw err(
                    f["pixelFormat"]!, "unknown FourCC \(excerpt(code, quote: "'")): expected a V4L2 pixel format such as 'YUYV', 'NV12' or 'MJPG'")
            }
            let desc = f["description"].flatMap { if case .string(let s, _) = $0 { String(s.prefix(256)) } else { nil } } ?? pf.name
            guard let sizesNode = f["sizes"] else { throw err(f, "missing \"sizes\" for format \(code)") }
            guard case .array(let sizes, _) = sizesNode, !sizes.isEmpty else { throw err(sizesNode, "\"sizes\" must be a non-empty array") }
            for s in sizes {
                guard case .object = s else { throw err(s, "each size must be an object, found \(s.kind)") }
                formats.append(CaptureFormat(pixelFormat: pf, size: try sizeRange(s), intervals: try intervals(s), formatDescription: desc))
            }
        }
        var d = CameraDescription(name: name, position: position, rotation: rotation, formats: formats, controls: controls, colorSpace: colorSpace)
        d.faults = try faults(root["faults"])
        d.quirks = try quirks(root["quirks"])
        return d
    }

    /// `"quirks": ["round@1920x1080=1920x1088", …]`: each in `FixtureQuirk`'s text form, at most 64.
    func quirks(_ node: JSONNode?) throws(FixtureParseError) -> [FixtureQuirk] {
        try texts(
            node, of: "quirk", atMost: 64, suchAs: "round@1920x1080=1920x1088", eachSuchAs: "ignores-frame-interval", FixtureQuirk.init(parsing:))
    }

    /// `"faults": ["unplug@90+5", "resize@30:640x480", …]`: each in `FixtureFault`'s text form, at most 256.
    func faults(_ node: JSONNode?) throws(FixtureParseError) -> [FixtureFault] {
        try texts(node, of: "fault", atMost: 256, suchAs: "unplug@90+5", eachSuchAs: "unplug@90+5", FixtureFault.init(parsing:))
    }

    /// The member `"\(kind)s"`: an array of at most `most` strings, each read by `parse` (its error's message is the
    /// item's); the examples `suchAs` (of the array) and `eachSuchAs` (of an item) go in the messages.
    func texts<T>(
        _ node: JSONNode?, of kind: String, atMost most: Int, suchAs: String, eachSuchAs: String, _ parse: (String) throws(CaptureError) -> T
    ) throws(FixtureParseError) -> [T] {
        guard let node else { return [] }
        guard case .array(let items, _) = node, items.count <= most else {
            throw err(node, "\"\(kind)s\" must be an array of at most \(most) \(kind)s such as \"\(suchAs)\", found \(node.kind)")
        }
        var out: [T] = []
        for item in items {
            guard case .string(let text, _) = item else {
                throw err(item, "each \(kind) must be a string such as \"\(eachSuchAs)\", found \(item.kind)")
            }
            do throws(CaptureError) { out.append(try parse(text)) } catch { throw err(item, error.message) }
        }
        return out
    }

    /// `"colorSpace"`: a preset name (`webcam`, `jpeg`, `bt709`, `bt601`) or an object with `primaries`,
    /// `transfer`, `matrix` (ffprobe's names: `bt709`, `smpte170m`, `bt470bg`, `bt2020`, `iec61966-2-1`, …) and
    /// `range` (`limited` or `full`).
    func colorSpace(_ n: JSONNode) throws(FixtureParseError) -> VideoColorSpace {
        let presets: [String: VideoColorSpace] = ["webcam": .webcam, "jpeg": .jpeg, "bt709": .bt709, "bt601": .bt601]
        if case .string(let s, _) = n {
            guard let c = presets[s] else {
                throw err(n, "\"colorSpace\" must be one of \(presets.keys.sorted().joined(separator: ", ")) or an object, found \(excerpt(s))")
            }
            return c
        }
        guard case .object = n else { throw err(n, "\"colorSpace\" must be a preset name or an object, found \(n.kind)") }
        func part<T>(_ key: String, _ all: [T], _ name: (T) -> String) throws(FixtureParseError) -> T {
            let s = try string(n[key], "\"colorSpace\" \"\(key)\"", in: n)
            guard let v = all.first(where: { name($0) == s }) else {
                throw err(n[key]!, "\"colorSpace\" \"\(key)\" must be one of \(all.map(name).joined(separator: ", ")), found \(excerpt(s))")
            }
            return v
        }
        return VideoColorSpace(
            primaries: try part("primaries", VideoColorSpace.Primaries.allCases) { "\($0)" },
            transfer: try part("transfer", VideoColorSpace.Transfer.allCases) { $0 == .srgb ? "iec61966-2-1" : "\($0)" },
            matrix: try part("matrix", VideoColorSpace.Matrix.allCases) { "\($0)" },
            range: try part("range", [VideoColorSpace.Range.limited, .full]) { $0 == .full ? "full" : "limited" })
    }

    /// One entry of "sizes": discrete width/height, "stepwise" or "continuous".
    func sizeRange(_ s: JSONNode) throws(FixtureParseError) -> FrameSizeRange {
        if let sw = s["stepwise"] {
            let lo = try size(sw["min"], "\"min\"", in: sw), hi = try size(sw["max"], "\"max\"", in: sw)
            let st = try size(sw["step"], "\"step\"", in: sw)
            return try checked(.stepwise(min: lo, max: hi, step: st), sw)
        } else if let c = s["continuous"] {
            let lo = try size(c["min"], "\"min\"", in: c), hi = try size(c["max"], "\"max\"", in: c)
            return try checked(.continuous(min: lo, max: hi), c)
        } else {
            return try checked(
                .discrete(
                    FrameSize(
                        width: try dimension(s["width"], "\"width\"", in: s),
                        height: try dimension(s["height"], "\"height\"", in: s))), s)
        }
    }

    /// The frame rates of one size: "fps" (discrete), "fpsRange" (continuous) or "intervalRange" (stepwise).
    func intervals(_ s: JSONNode) throws(FixtureParseError) -> FrameIntervals? {
        if let list = s["fps"] {
            guard case .array(let items, _) = list, !items.isEmpty, items.count <= 1024 else {
                throw err(list, "\"fps\" must be a non-empty array of at most 1024 rates")
            }
            var ivs: [Fraction] = []
            for item in items { ivs.append(try rate(item).reciprocal) }
            return .discrete(ivs)
        } else if let r = s["fpsRange"] {
            guard let lo = r["min"], let hi = r["max"] else { throw err(r, "\"fpsRange\" needs \"min\" and \"max\"") }
            let a = try rate(lo), b = try rate(hi)
            guard a <= b else { throw err(r, "\"fpsRange\" min \(a) is above max \(b)") }
            return .continuous(min: b.reciprocal, max: a.reciprocal)
        } else if let r = s["intervalRange"] {
            guard let lo = r["min"], let hi = r["max"], let st = r["step"] else {
                throw err(r, "\"intervalRange\" needs \"min\", \"max\" and \"step\" (seconds, e.g. \"1/30\")")
            }
            let a = try rate(lo, interval: true), b = try rate(hi, interval: true), c = try rate(st, interval: true)
            guard a <= b else { throw err(r, "\"intervalRange\" min \(a) is above max \(b)") }
            return .stepwise(min: a, max: b, step: c)
        }
        return nil
    }
}

/// The file name without folder and extension (`Fixtures/cameras/vivid.txt` → `vivid`).
package func fileStem(_ path: String) -> String {
    let last = path.split(separator: "/").last.map(String.init) ?? path
    if let dot = last.lastIndex(of: "."), dot != last.startIndex { return String(last[..<dot]) }
    return last
}

extension Substring {
    /// Without leading and trailing spaces, tabs and CRs (on UTF-8 indices: no per-character work).
    var trimmingSpaces: String {
        let u = utf8 // Substring.UTF8View is bidirectional
        func space(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0d }
        var start = u.startIndex, end = u.endIndex
        while start < end, space(u[start]) { u.formIndex(after: &start) }
        while end > start {
            let before = u.index(before: end)
            guard space(u[before]) else { break }
            end = before
        }
        return String(self[start..<end])
    }
}

extension String {
    var trimmingSpaces: String { self[...].trimmingSpaces }
}

extension StringProtocol {
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
public struct FixtureParseError: CodedError {
    /// The file (or `fixture:NAME`) the text came from.
    public var file: String
    /// The 1-based line of the problem; 0 when it concerns the whole file (too large, unreadable).
    public var line: Int
    /// What was expected and what was found.
    public var message: String
    /// An error at a line of a file.
    public init(file: String, line: Int, _ message: String) {
        self.file = file
        self.line = line
        self.message = message
    }
    /// `file:line: message`, as compilers print errors.
    public var description: String { "\(file):\(line): \(message)" }
    /// What kind of failure this is, to switch on: `unreadable` when it concerns the whole file (line 0).
    public var code: Code { line == 0 ? .unreadable : .malformed }
}

extension ErrorCode where Domain == FixtureParseError {
    /// A line of the description is wrong (`line` says which).
    public static var malformed: Self { Self(rawValue: "malformed") }
    /// The file as a whole cannot be taken: missing, unreadable, too large.
    public static var unreadable: Self { Self(rawValue: "unreadable") }
}
