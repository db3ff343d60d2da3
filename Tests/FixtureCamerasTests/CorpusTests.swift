// Issue 49, the corpus of real cameras: Fixtures/corpus holds `v4l2-ctl --list-formats-ext` listings pasted in
// public bug reports and docs, each behind `# ` lines naming the camera, the source and what is unusual about it.
// Every one parses, and negotiation's picks over all of them are a checked-in table, so a change to negotiation
// shows which real cameras it moves.
import Foundation
import Testing
import TestSupport
import VideoCapture
@testable import FixtureCameras

let corpusDir = fixturesRoot + "/corpus"
let corpusExpectedDefault = corpusDir + "/expected/default.txt"

@Test("every corpus file parses into formats with sizes, names its camera and source, and there are at least 50")
func corpusFilesParseAndCarryProvenance() throws {
    let cameras = try CameraCorpus.load(directory: corpusDir)
    #expect(cameras.count >= 50, "the corpus holds \(cameras.count) cameras")
    for c in cameras {
        #expect(!c.camera.formats.isEmpty, "\(c.name): no format")
        let data = try #require(FileManager.default.contents(atPath: c.path))
        let text = try #require(String(data: data, encoding: .utf8))
        let header = text.split(separator: "\n", omittingEmptySubsequences: false).prefix { $0.hasPrefix("# ") }
        #expect(header.contains { $0.hasPrefix("# Camera: ") }, "\(c.name): no \"# Camera:\" line at the top")
        #expect(header.contains { $0.hasPrefix("# Source: ") && ($0.contains("https://") || $0.contains("github.com")) }, "\(c.name): no source")
        #expect(header.contains { $0.hasPrefix("# Shows: ") }, "\(c.name): no \"# Shows:\" line")
        // The provenance lines are not part of the listing: the camera parses the same without them.
        let bare = text.split(separator: "\n", omittingEmptySubsequences: false).drop { $0.hasPrefix("# ") }.joined(separator: "\n")
        #expect(try CameraDescription.parse(bare, file: c.path).formats == c.camera.formats, "\(c.name): the # lines change the parse")
    }
}

@Test("leading # lines are ignored by the listing parser, also ones that look like listing lines after the #")
func commentLinesBeforeAListingAreIgnored() throws {
    let listing = "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\n\t\t\tInterval: Discrete 0.033s (30.000 fps)\n"
    let commented = "# Camera: x\n# Size: Discrete 1x1\n# Card type        : not a name\n# [0]: 'ZZZZ' (nothing)\n" + listing
    let a = try CameraDescription.parse(listing, file: "a.txt"), b = try CameraDescription.parse(commented, file: "a.txt")
    #expect(a.formats == b.formats && a.formats.count == 1)
    #expect(b.name == "a", "a commented Card type line does not name the camera")
}

/// The requests of the checked-in table: 640x480, 1280x720 and 1920x1080, each up to 30 fps.
let corpusRequests: [(String, FrameSize)] = [
    ("640x480@30", FrameSize(width: 640, height: 480)), ("1280x720@30", FrameSize(width: 1280, height: 720)),
    ("1920x1080@30", FrameSize(width: 1920, height: 1080)),
]

/// One line per camera and request: `camera request: mode [conversion]`.
func corpusTable() throws -> [String] {
    let cameras = try CameraCorpus.load(directory: corpusDir)
    var lines: [String] = []
    for (label, size) in corpusRequests {
        for p in CameraCorpus.picks(cameras, target: size, fpsLimit: 30) { lines.append("\(p.camera) \(label): \(p.modeText) [\(p.conversionText)]") }
    }
    return lines.sorted()
}

@Test("the default negotiation's picks on every corpus camera match Fixtures/corpus/expected/default.txt")
func corpusPicksMatchTheCheckedInTable() throws {
    let actual = try corpusTable()
    // CORPUS_UPDATE=1 rewrites the table (review the diff before committing it).
    if ProcessInfo.processInfo.environment["CORPUS_UPDATE"] == "1" {
        try (actual.joined(separator: "\n") + "\n").write(toFile: corpusExpectedDefault, atomically: true, encoding: .utf8)
    }
    let data = try #require(FileManager.default.contents(atPath: corpusExpectedDefault))
    let text = try #require(String(data: data, encoding: .utf8))
    let expected = text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    let (moved, diff) = corpusDiff(expected: expected, actual: actual)
    #expect(moved.isEmpty, "negotiation moved on \(moved.count) corpus cameras: \(moved.joined(separator: ", "))\n\(diff)")
}

/// The cameras whose lines differ between two tables, and a `-`/`+` diff of those lines.
func corpusDiff(expected: [String], actual: [String]) -> (moved: [String], diff: String) {
    let gone = Set(expected).subtracting(actual), new = Set(actual).subtracting(expected)
    let moved = Set((gone.union(new)).map { String($0.prefix { $0 != " " }) }).sorted()
    return (moved, (gone.sorted().map { "- " + $0 } + new.sorted().map { "+ " + $0 }).joined(separator: "\n"))
}

@Test("a pick that moves is reported with its camera and both lines; an unchanged table reports nothing")
func corpusDiffNamesTheCamerasAPickMoved() throws {
    let actual = try corpusTable()
    #expect(corpusDiff(expected: actual, actual: actual).moved.isEmpty)
    // As if negotiation had taken YUYV 1280x720 at 10 fps on the C920 instead of MJPEG at 30.
    let line = try #require(actual.first { $0.hasPrefix("logitech-c920-h264 1280x720@30: ") })
    let edited = actual.map { $0 == line ? "logitech-c920-h264 1280x720@30: YUYV 1280x720@10 [convert YUYV]" : $0 }
    let (moved, diff) = corpusDiff(expected: edited, actual: actual)
    #expect(moved == ["logitech-c920-h264"])
    #expect(diff == "- logitech-c920-h264 1280x720@30: YUYV 1280x720@10 [convert YUYV]\n+ " + line)
    #expect(line == "logitech-c920-h264 1280x720@30: MJPG 1280x720@30 [decode JPEG]")
}

@Test("a corpus folder that cannot be read, holds no fixture file, or holds a bad one is an error naming it")
func corpusErrorsNameTheFolderOrFile() throws {
    let dir = scratchDirectory("corpus-errors")
    #expect(throws: FixtureParseError.self) { try CameraCorpus.load(directory: dir + "/missing") }
    do {
        _ = try CameraCorpus.load(directory: dir)
        Issue.record("an empty folder loaded")
    } catch { #expect(error.message.contains("no fixture files"), "\(error)") }
    try "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 0x480\n".write(toFile: dir + "/bad.txt", atomically: true, encoding: .utf8)
    do {
        _ = try CameraCorpus.load(directory: dir)
        Issue.record("a bad file loaded")
    } catch { #expect(error.file.hasSuffix("/bad.txt") && error.line == 2, "\(error)") }
}

@Test("a corpus pick names the conversion, and a camera with nothing convertible is a row saying why")
func corpusPicksNameConversionsAndFailures() throws {
    let cameras = try CameraCorpus.load(directory: corpusDir)
    let picks = CameraCorpus.picks(cameras, target: FrameSize(width: 1280, height: 720), fpsLimit: 30)
    #expect(picks.count == cameras.count)
    for p in picks {
        if let s = p.selection {
            #expect(p.conversionText == CameraCorpus.conversion(for: s.pixelFormat))
            // Converted to I420, or a camera's own H.264 passed through (an H.264-only node).
            #expect(s.pixelFormat.isConvertibleToI420 || s.pixelFormat == .h264, "\(p.camera): \(s)")
        } else {
            #expect(p.failure?.hasPrefix("no convertible format (") == true, "\(p.camera): \(p.failure ?? "nil")")
        }
    }
    #expect(CameraCorpus.conversion(for: .mjpeg) == "decode JPEG" && CameraCorpus.conversion(for: .i420) == "none")
    #expect(CameraCorpus.conversion(for: .yuyv) == "convert YUYV" && CameraCorpus.conversion(for: .h264) == "passthrough")
    let json = CameraCorpus.json(picks)
    #expect(json.hasPrefix("[{\"camera\": ") && json.hasSuffix("}]\n"))
    let rows = CameraCorpus.text(picks).split(separator: "\n")
    #expect(rows.count == picks.count + 1 && rows[0].hasPrefix("CAMERA"))
}

@Test("a listed range reaching past CaptureLimits keeps its maximum within them, on its step grid; a discrete size past them is an error")
func listedRangesBeyondTheLimitsAreClamped() throws {
    func range(_ line: String) throws -> FrameSizeRange {
        try #require(try CameraDescription.parse("\t[0]: 'NV12' (Y/UV 4:2:0)\n\t\tSize: \(line)\n", file: "r.txt").formats.first).size
    }
    // Raspberry Pi unicam and the Pi 5 ISP, as they print it.
    #expect(
        try range("Stepwise 16x16 - 16376x16376 with step 1/1")
            == .stepwise(min: FrameSize(width: 16, height: 16), max: FrameSize(width: 8192, height: 8192), step: FrameSize(width: 1, height: 1)))
    #expect(
        try range("Stepwise 32x32 - 65535x65535 with step 2/2")
            == .stepwise(min: FrameSize(width: 32, height: 32), max: FrameSize(width: 8192, height: 8192), step: FrameSize(width: 2, height: 2)))
    #expect(
        try range("Stepwise 35x16 - 20000x100 with step 8/4")
            == .stepwise(min: FrameSize(width: 35, height: 16), max: FrameSize(width: 16379, height: 100), step: FrameSize(width: 8, height: 4)))
    #expect(
        try range("Continuous 2x2 - 4294967295x4294967295")
            == .continuous(min: FrameSize(width: 2, height: 2), max: FrameSize(width: 8192, height: 8192)))
    // Within the limits nothing changes.
    #expect(
        try range("Stepwise 32x16 - 800x600 with step 8/8")
            == .stepwise(min: FrameSize(width: 32, height: 16), max: FrameSize(width: 800, height: 600), step: FrameSize(width: 8, height: 8)))
    for bad in ["Discrete 16384x16384", "Stepwise 10000x10000 - 20000x20000 with step 2/2", "Continuous 2x2 - 4294967296x2"] {
        #expect(throws: FixtureParseError.self, "\(bad)") { try range(bad) }
    }
}
