// Issue 11: bad input never crashes. Every crash found by hand or by the fuzzers is a row here: the parser
// must answer with a FixtureParseError naming the file, the line and the value — no trap, no hang.
import Foundation
import Testing
@testable import VideoCapture
@testable import FixtureCameras

struct CrashCase: Sendable, CustomTestStringConvertible {
    let name: String, text: String, line: Int, message: String
    var testDescription: String { name }
}

private let listingHead = "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\n"
private func camera(_ size: String, _ extra: String = "") -> String {
    "{\"name\": \"x\",\n\(extra)\"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [\n\(size)]}]}\n"
}

let crashCases: [CrashCase] = [
    // Listing text (CameraDescription.parseListing → Fraction).
    .init(
        name: "inf fps", text: listingHead + "\t\t\tInterval: Discrete 0.000s (inf fps)\n", line: 3,
        message: "frame rate \"inf\" is out of range: 0.001...1000000 fps"),
    .init(
        name: "1e19 fps", text: listingHead + "\t\t\tInterval: Discrete 0.000s (1e19 fps)\n", line: 3, message: "frame rate \"1e19\" is out of range"),
    .init(
        name: "0.0001 fps (zero denominator)", text: listingHead + "\t\t\tInterval: Discrete 10000.000s (0.0001 fps)\n", line: 3,
        message: "frame rate \"0.0001\" is out of range"),
    .init(
        name: "no rate in parentheses", text: listingHead + "\t\t\tInterval: Discrete ( (fps)\n", line: 3,
        message: "expected the frame rate in parentheses"),
    .init(name: "nan fps", text: listingHead + "\t\t\tInterval: Discrete 0.033s (nan fps)\n", line: 3, message: "must be positive"),
    .init(
        name: "huge stepwise step", text: "\t[0]: 'NV12' (x)\n\t\tSize: Stepwise 2x2 - 1920x1080 with step 9223372036854775807/2\n", line: 2,
        message: "expected a step W/H of 1...16384"),
    .init(
        name: "huge listing size", text: "\t[0]: 'MJPG' (Motion-JPEG)\n\t\tSize: Discrete 100000x100000\n", line: 2,
        message: "size 100000x100000 is too large: width and height are at most 16384"),
    .init(
        name: "area beyond 64 Mpx", text: "\t[0]: 'MJPG' (Motion-JPEG)\n\t\tSize: Discrete 16384x16384\n", line: 2, message: "at most 67108864 pixels"
    ),
    .init(
        name: "Int overflow in a size", text: "\t[0]: 'YUYV' (x)\n\t\tSize: Discrete 99999999999999999999x2\n", line: 2,
        message: "expected a size WIDTHxHEIGHT"),
    .init(
        name: "interval step out of range",
        text: listingHead.replacingOccurrences(of: "Discrete 640x480", with: "Discrete 64x48")
            + "\t\t\tInterval: Stepwise 0.033s - 1.000s with step 1e300s (1.000-30.000 fps)\n", line: 3, message: "interval step"),
    // JSON (CameraDescription.parseJSON).
    .init(
        name: "width 1e20", text: camera("{\"width\": 1e20, \"height\": 480}"), line: 3, message: "\"width\" is too large: at most 16384, found 1e+20"
    ),
    .init(name: "width -1e20", text: camera("{\"width\": -1e20, \"height\": 480}"), line: 3, message: "\"width\" must be positive, found -1e+20"),
    .init(
        name: "rotation 1e20", text: camera("{\"width\": 640, \"height\": 480}", "\"rotation\": 1e20,\n"), line: 2,
        message: "\"rotation\" must be 0, 90, 180 or 270, found the number 1e+20"),
    .init(name: "fps 1e300", text: camera("{\"width\": 640, \"height\": 480, \"fps\": [1e300]}"), line: 3, message: "frame rate"),
    .init(
        name: "fps 1e400 (not a finite number)", text: camera("{\"width\": 640, \"height\": 480, \"fps\": [1e400]}"), line: 3,
        message: "the number \"1e400\" is out of range"),
    .init(
        name: "interval 1/Int64.max",
        text: camera(
            "{\"stepwise\": {\"min\": \"2x2\", \"max\": \"640x480\", \"step\": \"2x2\"},\n \"intervalRange\": {\"min\": \"1/9223372036854775807\", \"max\": \"1\", \"step\": \"1/9223372036854775807\"}}"
        ), line: 4, message: "has a term above 4294967295"),
    .init(
        name: "stepwise step Int64.max",
        text: camera("{\"stepwise\": {\"min\": \"2x2\", \"max\": \"640x480\", \"step\": \"9223372036854775807x2\"}}"), line: 3,
        message: "\"step\" 9223372036854775807x2 is too large"),
    .init(
        name: "fps Int64.max/1", text: camera("{\"width\": 640, \"height\": 480, \"fps\": [\"9223372036854775807/1\"]}"), line: 3,
        message: "has a term above 4294967295"),
    .init(
        name: "fps 2000000/1 (above the rate limit)", text: camera("{\"width\": 640, \"height\": 480, \"fps\": [\"2000000/1\"]}"), line: 3,
        message: "out of range: 0.001...1000000 fps"),
    .init(
        name: "fps N/0", text: camera("{\"width\": 640, \"height\": 480, \"fps\": [\"30/0\"]}"), line: 3,
        message: "expected a positive fraction \"N/D\", found \"30/0\""),
    .init(
        name: "MJPG 100000x100000", text: camera("{\"width\": 100000, \"height\": 100000, \"fps\": [30]}"), line: 3,
        message: "\"width\" is too large: at most 16384, found 100000"),
    .init(
        name: "continuous beyond 64 Mpx", text: camera("{\"continuous\": {\"min\": \"2x2\", \"max\": \"16384x16384\"}}"), line: 3,
        message: "at most 67108864 pixels"),
    .init(
        name: "nested 100,000 deep",
        text: "{\"name\": \"x\", \"formats\": " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}", line: 1,
        message: "nest deeper than 64 levels"),
    .init(
        name: "nested objects 65 deep", text: String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65), line: 1,
        message: "nest deeper than 64 levels"),
    .init(name: "bad escape", text: "{\"name\": \"a\\qb\"}", line: 1, message: "unknown escape \\q"),
]

@Test("issue-11 crash inputs are errors with file, line and value", arguments: crashCases)
func crashInputIsAClearError(_ c: CrashCase) throws {
    // One file per case: the cases run in parallel, and "width 1e20" and "width -1e20" must not share a name.
    let path = tempFile("crash-\(c.name.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." }).txt", c.text)
    let error = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: path) }
    #expect(error?.file == path)
    #expect(error?.line == c.line, "\(error?.description ?? "")")
    #expect(error?.message.contains(c.message) == true, "\(error?.description ?? "")")
    #expect((error?.description.count ?? 0) < 400, "error messages stay short")
}

/// Every seed and crash input of the fuzzers parses or fails cleanly (their regression set): Fixtures/v4l2 and the
/// built-in listings for FuzzListing, Fixtures/json and the built-in JSON cameras for FuzzJSON (Scripts/fuzz.sh).
@Test("every fuzz seed and crash input parses or is a FixtureParseError", arguments: ["v4l2", "json"])
func fuzzCorpusRegression(_ folder: String) throws {
    let ext = folder == "json" ? ".json" : ".txt"
    let paths =
        try FileManager.default.contentsOfDirectory(atPath: fixturesRoot + "/" + folder).sorted().map { fixturesRoot + "/\(folder)/" + $0 }
        + FileManager.default.contentsOfDirectory(atPath: fixturesDir).sorted().filter { $0.hasSuffix(ext) }.map { fixturesDir + "/" + $0 }
    #expect(paths.count >= 12)
    for path in paths {
        let f = URL(fileURLWithPath: path).lastPathComponent
        let text = try readFixtureFile(path)
        do {
            let d = try CameraDescription.parse(text, file: f, syntax: folder == "json" ? .json : .listing)
            for limit in [1, 30, 1000] { _ = FormatSelector.select(from: d.formats, target: FrameSize(width: 1280, height: 720), fpsLimit: limit) }
            #expect(!f.hasPrefix("crash-"), "\(f) was a crash input: it must be refused")
        } catch {
            #expect(error.file == f && !error.message.isEmpty)
        }
    }
}

@Test func aParenthesisAfterTheRateIsIgnored() throws {
    // Crashed with a reversed range before; the rate is the last "(N fps)".
    let d = try CameraDescription.parse(listingHead + "\t\t\tInterval: Discrete (30.000 fps) (\n", file: "p.txt")
    #expect(d.formats.first?.intervals == .discrete([Fraction(1, 30)]))
}

@Test func crlfAndBareCRListingsParseLikeLF() throws {
    let lf = try CameraDescription.parse(newStyle, file: "lf.txt")
    let crlf = try CameraDescription.parse(newStyle.replacingOccurrences(of: "\n", with: "\r\n"), file: "crlf.txt")
    let cr = try CameraDescription.parse(newStyle.replacingOccurrences(of: "\n", with: "\r"), file: "cr.txt")
    #expect(crlf.formats == lf.formats && cr.formats == lf.formats)
    #expect(lf.formats.count == 3)
    // Line numbers count CRLF once.
    let e = #expect(throws: FixtureParseError.self) {
        try CameraDescription.parse("\t[0]: 'YUYV' (x)\r\n\r\n\t\tSize: Discret 1x1\r\n", file: "c.txt")
    }
    #expect(e?.line == 3)
}

@Test func byteOrderMarkIsSkipped() throws {
    let json = try String(contentsOfFile: fixturesDir + "/macbook-m1.json", encoding: .utf8)
    let plain = try CameraDescription.parse(json, file: "m.json")
    let bom = try CameraDescription.parse("\u{FEFF}" + json, file: "m.json")
    #expect(bom == plain)
    let listing = try CameraDescription.parse("\u{FEFF}" + newStyle, file: "new.txt")
    #expect(listing.formats.count == 3)
}

@Test func errorMessagesCutTheOffendingLine() throws {
    let longLine = "\t[0]: 'YUYV' (x)\n\t\tSize: Discrete " + String(repeating: "9", count: 1_000_000) + "x1\n"
    let e = #expect(throws: FixtureParseError.self) { try CameraDescription.parse(longLine, file: "long.txt") }
    #expect(e?.line == 2)
    #expect((e?.description.count ?? .max) < 200, "\(e?.description.prefix(300) ?? "")")
    #expect(e?.message.contains("…") == true)
    // Control characters are escaped, not sent to the terminal.
    let ctl = #expect(throws: FixtureParseError.self) { try CameraDescription.parse("\t[0]: 'YU\u{1B}[2J' (x)\n", file: "ctl.txt") }
    #expect(ctl?.message.contains("\u{1B}") == false)
    #expect(ctl?.message.contains("\\u{1b}") == true)
}

@Test func specialFilesAreRefusedAtOnce() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vc-special-\(getpid())").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    // A FIFO with no writer: opening must not block (the test would hang).
    let fifo = dir + "/cam.fifo"
    #expect(mkfifo(fifo, 0o600) == 0)
    let f = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: fifo) }
    #expect(f?.message.contains("a FIFO (named pipe), not a fixture file") == true, "\(f?.description ?? "")")
    // A link to /dev/zero, and //dev/zero: a character device, not read at all.
    let link = dir + "/zero.json"
    try? FileManager.default.removeItem(atPath: link)
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/dev/zero")
    for p in [link, "//dev/zero"] {
        let z = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: p) }
        #expect(z?.file == p && z?.message.contains("a character device") == true, "\(z?.description ?? "")")
    }
    let d = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: dir) }
    #expect(d?.message.contains("a directory") == true)
    // Too big: refused from its size, before reading (10 MB of newlines took 590 MB and 9 s before).
    let big = dir + "/newlines.txt"
    #expect(FileManager.default.createFile(atPath: big, contents: Data(repeating: 0x0a, count: 10_000_000)))
    let b = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: big) }
    #expect(b?.message == "the file is 10000000 bytes; fixture files are limited to 4194304 bytes (4 MiB)")
    // Just under the limit: a file of newlines is parsed line by line and rejected as having no formats.
    let under = dir + "/under.txt"
    #expect(FileManager.default.createFile(atPath: under, contents: Data(repeating: 0x0a, count: CameraDescription.maximumFileSize)))
    let u = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: under) }
    #expect(u?.message.hasPrefix("no formats found") == true)
    #expect(u?.line == CameraDescription.maximumFileSize + 1)
}

@Test func userFixtureFilesAreParsedOncePerPath() throws {
    let path = tempFile("once.txt", newStyle)
    let provider = FixtureCameraProvider()
    let device = try #require(try provider.device(for: path))
    #expect(try provider.formats(of: device).count == 3)
    // Changing the file does not change what this process sees: it was parsed once.
    _ = FileManager.default.createFile(atPath: path, contents: Data("garbage".utf8))
    #expect(try provider.formats(of: device).count == 3)
    #expect(try FixtureCameraProvider().formats(of: device).count == 3)
}
