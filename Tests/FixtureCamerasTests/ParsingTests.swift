import Foundation
import Testing
@testable import VideoCapture
@testable import FixtureCameras

let newStyle = """
    ioctl: VIDIOC_ENUM_FMT
    \tType: Video Capture

    \t[0]: 'YUYV' (YUYV 4:2:2)
    \t\tSize: Discrete 640x480
    \t\t\tInterval: Discrete 0.033s (30.000 fps)
    \t\t\tInterval: Discrete 0.080s (12.500 fps)
    \t\tSize: Stepwise 32x32 - 1280x720 with step 8/4
    \t\t\tInterval: Continuous 0.033s - 1.000s (1.000-30.000 fps)
    \t[1]: 'MJPG' (Motion-JPEG, compressed)
    \t\tSize: Discrete 1280x720
    \t\t\tInterval: Stepwise 0.017s - 1.000s with step 0.017s (1.000-60.000 fps)
    """

let oldStyle = """
    ioctl: VIDIOC_ENUM_FMT
    \tIndex       : 0
    \tType        : Video Capture
    \tPixel Format: 'YUYV'
    \tName        : YUYV 4:2:2
    \t\tSize: Discrete 640x480
    \t\t\tInterval: Discrete 0.033s (30.000 fps)
    \t\t\tInterval: Discrete 0.080s (12.500 fps)
    \t\tSize: Stepwise 32x32 - 1280x720 with step 8/4
    \t\t\tInterval: Continuous 0.033s - 1.000s (1.000-30.000 fps)

    \tIndex       : 1
    \tType        : Video Capture
    \tPixel Format: 'MJPG' (compressed)
    \tName        : Motion-JPEG
    \t\tSize: Discrete 1280x720
    \t\t\tInterval: Stepwise 0.017s - 1.000s with step 0.017s (1.000-60.000 fps)
    """

@Test func bothListingStylesParseToTheSameFormats() throws {
    let a = try CameraDescription.parse(newStyle, file: "new.txt")
    let b = try CameraDescription.parse(oldStyle, file: "old.txt")
    #expect(a.formats.map(\.pixelFormat) == [.yuyv, .yuyv, .mjpeg])
    #expect(a.formats.map(\.size) == b.formats.map(\.size))
    #expect(a.formats.map(\.intervals) == b.formats.map(\.intervals))
    #expect(a.formats[0].intervals == .discrete([Fraction(1, 30), Fraction(2, 25)]))
    #expect(
        a.formats[1].size
            == .stepwise(min: FrameSize(width: 32, height: 32), max: FrameSize(width: 1280, height: 720), step: FrameSize(width: 8, height: 4)))
    #expect(a.formats[1].intervals == .continuous(min: Fraction(1, 30), max: Fraction(1)))
    #expect(a.formats[2].intervals == .stepwise(min: Fraction(1, 60), max: Fraction(1), step: Fraction(1, 60)))
    #expect(a.formats[2].formatDescription == "Motion-JPEG")
    #expect(b.formats[0].formatDescription == "YUYV 4:2:2")
    #expect(a.name == "new")
}

@Test func vividReferenceParsesCompletely() throws {
    let vivid = try fixture("vivid")
    #expect(vivid.name == "vivid")
    #expect(Set(vivid.formats.map(\.pixelFormat)).count == 83)
    // Every format offers the same six sizes.
    #expect(vivid.formats.count == 83 * 6)
    let yuyv720 = try #require(vivid.formats.first { $0.pixelFormat == .yuyv && $0.size == .discrete(FrameSize(width: 1280, height: 720)) })
    #expect(yuyv720.intervals?.rateBounds?.max == Fraction(25, 2))
    #expect(vivid.formats.contains { $0.pixelFormat == PixelFormat(fourcc: "Y16-BE") })
}

@Test func everyShippedFixtureLoads() throws {
    for name in ["macbook-m1", "iphone", "iphone-front", "vivid", "uvc-webcam", "stepwise", "continuous"] {
        let d = try fixture(name)
        #expect(!d.formats.isEmpty, "\(name)")
    }
    #expect(try fixture("iphone").rotation == .rotation90)
    #expect(try fixture("iphone").position == .back)
}

// MARK: - Bad fixture files: the file, the line, what was expected.

struct BadFixture: Sendable, CustomTestStringConvertible {
    let name: String, text: String, line: Int, message: String
    var testDescription: String { name }
}

let badFixtures: [BadFixture] = [
    .init(
        name: "bad JSON", text: "{\n  \"name\": \"x\",\n  \"formats\": [\n    {\"pixelFormat\": \"YUYV\" \"sizes\": []}\n  ]\n}\n", line: 4,
        message: "expected ',' or '}'"),
    .init(name: "unterminated JSON", text: "{\n  \"name\": \"x\",\n  \"formats\": [\n", line: 4, message: "invalid JSON"),
    .init(
        name: "unknown FourCC in JSON",
        text: "{\n\"name\": \"x\",\n\"formats\": [\n{\"pixelFormat\": \"ZZZZ\",\n \"sizes\": [{\"width\": 640, \"height\": 480}]}]}", line: 4,
        message: "unknown FourCC 'ZZZZ'"),
    .init(
        name: "negative width in JSON",
        text: "{\"name\": \"x\",\n\"formats\": [{\"pixelFormat\": \"NV12\", \"sizes\": [\n{\"width\": -640, \"height\": 480}]}]}", line: 3,
        message: "\"width\" must be positive"),
    .init(
        name: "zero fps in JSON",
        text: "{\"name\": \"x\",\n\"formats\": [{\"pixelFormat\": \"NV12\", \"sizes\": [\n{\"width\": 640, \"height\": 480,\n \"fps\": [30, 0]}]}]}",
        line: 4, message: "expected a positive frame rate"),
    .init(name: "missing formats", text: "{\"name\": \"x\"}", line: 1, message: "missing \"formats\""),
    .init(
        name: "size before format", text: "ioctl: VIDIOC_ENUM_FMT\n\tType: Video Capture\n\t\tSize: Discrete 640x480\n", line: 3,
        message: "a size line before any format"),
    .init(
        name: "interval before size", text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\t\tInterval: Discrete 0.033s (30.000 fps)\n", line: 2,
        message: "an interval line before any size"),
    .init(
        name: "unknown FourCC in listing", text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\n\t[1]: 'QQQQ' (mystery)\n", line: 3,
        message: "unknown FourCC 'QQQQ'"),
    .init(name: "zero size in listing", text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 0x480\n", line: 2, message: "must be positive"),
    .init(
        name: "negative size in listing", text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete -640x480\n", line: 2,
        message: "size -640x480 must be positive"),
    .init(
        name: "zero interval in listing",
        text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\n\t\t\tInterval: Discrete 0.000s (0.000 fps)\n", line: 3,
        message: "frame rate must be positive"),
    .init(
        name: "garbled size kind", text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discret 640x480\n", line: 2,
        message: "expected Discrete, Stepwise or Continuous"),
    .init(
        name: "inverted stepwise range", text: "\t[0]: 'NV12' (x)\n\t\tSize: Stepwise 1920x1080 - 32x32 with step 2/2\n", line: 2,
        message: "minimum above its maximum"),
    .init(name: "no formats", text: "Driver Info:\n\tCard type : nothing\n", line: 3, message: "no formats found"),
    .init(
        name: "unknown colour preset", text: "{\"name\": \"x\",\n\"colorSpace\": \"hdr\",\n\"formats\": []}", line: 2,
        message: "\"colorSpace\" must be one of bt601, bt709, jpeg, webcam or an object, found \"hdr\""),
    .init(
        name: "unknown colour range",
        text:
            "{\"name\": \"x\", \"colorSpace\": {\"primaries\": \"bt709\", \"transfer\": \"bt709\",\n\"matrix\": \"bt709\", \"range\": \"tv\"},\n\"formats\": []}",
        line: 2, message: "\"colorSpace\" \"range\" must be one of limited, full, found \"tv\""),
    .init(
        name: "bad fault in JSON",
        text:
            "{\"name\": \"x\",\n\"faults\": [\"unplug@90+5\",\n \"jam@1+1\"],\n\"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 64, \"height\": 48}]}]}",
        line: 3,
        message: "fixture fault \"jam@1+1\": unknown kind \"jam\""),
    .init(
        name: "faults not an array",
        text:
            "{\"name\": \"x\",\n\"faults\": \"unplug@90+5\",\n\"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 64, \"height\": 48}]}]}",
        line: 2,
        message: "\"faults\" must be an array of at most 256 faults"),
    .init(
        name: "bad fault in listing", text: "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\nFault: resize@10:huge\n", line: 3,
        message: "fixture fault \"resize@10:huge\": not a size: \"huge\""),
]

/// #48: a fixture file carries the faults its camera plays: JSON's `faults` array, a listing's `Fault:` lines.
@Test func fixtureFilesDeclareTheirFaults() throws {
    let json = try CameraDescription.parse(
        "{\"name\": \"flaky\", \"faults\": [\"unplug@90+5\", \"resize@30:320x240\", \"corrupt@10+3\"],"
            + " \"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 640, \"height\": 480}]}]}", file: "flaky.json")
    #expect(json.faults.map(\.description) == ["unplug@90+5.0", "resize@30:320x240", "corrupt@10+3.0"])
    let listing = try CameraDescription.parse(
        "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\nFault: stall@60+1.5\nfault: nospace@YUYV:640x480\n", file: "flaky.txt")
    #expect(listing.faults.map(\.description) == ["stall@60+1.5", "nospace@YUYV:640x480"])
    #expect(listing.formats.count == 1, "the fault lines are not formats")
}

@Test func fixtureColourDescriptionReachesFrames() throws {
    let json = """
        {"name": "hd", "colorSpace": {"primaries": "bt709", "transfer": "bt709", "matrix": "bt709", "range": "full"},
         "formats": [{"pixelFormat": "NV12", "sizes": [{"width": 320, "height": 240}]},
                     {"pixelFormat": "MJPG", "sizes": [{"width": 320, "height": 240}]}]}
        """
    let d = try CameraDescription.parse(json, file: "hd.json")
    #expect(d.colorSpace(for: .nv12) == VideoColorSpace(primaries: .bt709, transfer: .bt709, matrix: .bt709, range: .full))
    #expect(d.colorSpace(for: .mjpeg) == .jpeg, "MJPEG is JPEG's full-range BT.601 whatever the camera says")
    // Without a description: V4L2's sRGB default (what vivid and uvcvideo report).
    let plain = try CameraDescription.parse(
        "{\"name\": \"p\", \"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 64, \"height\": 48}]}]}", file: "p.json")
    #expect(plain.colorSpace(for: .yuyv) == .webcam)
    #expect(
        try CameraDescription.parse(
            "{\"name\": \"q\", \"colorSpace\": \"bt601\", \"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 64, \"height\": 48}]}]}",
            file: "q.json"
        ).colorSpace == .bt601)
}

@Test("malformed fixtures are rejected with file and line", arguments: badFixtures)
func badFixture(_ c: BadFixture) throws {
    let path = tempFile("bad-\(c.name.replacingOccurrences(of: " ", with: "-")).txt", c.text)
    let error = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: path) }
    #expect(error?.file == path)
    #expect(error?.line == c.line, "\(error?.description ?? "")")
    #expect(error?.code == (c.line == 0 ? .unreadable : .malformed))
    #expect(error?.message.contains(c.message) == true, "\(error?.description ?? "")")
}

@Test func unreadableFixtureNamesTheFile() {
    let error = #expect(throws: FixtureParseError.self) { try CameraDescription.load(path: "/nonexistent/cam.json") }
    #expect(error?.description.contains("/nonexistent/cam.json") == true)
    #expect(error?.code == .unreadable)
}
