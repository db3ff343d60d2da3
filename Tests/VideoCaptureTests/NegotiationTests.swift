import Testing
@testable import VideoCapture

/// One negotiation case: fixture, target, limit → expected pick. Expectations follow the GUIDE's rules by hand.
struct NegotiationCase: CustomTestStringConvertible, Sendable {
    let fixture: String, target: String, limit: Int
    let fourcc: String, width: Int, height: Int, fps: Double
    let why: String
    var testDescription: String { "\(fixture) \(target)@\(limit): \(why)" }
}

let negotiationCases: [NegotiationCase] = [
    // Seed 003: WebRTC picks by closest size; 1920x720 is nearest to 1920x1080 (360) not 1280x720 (640).
    .init(fixture: "macbook-m1", target: "1920x720", limit: 30, fourcc: "NV12", width: 1920, height: 1080, fps: 30, why: "closest size"),
    .init(fixture: "macbook-m1", target: "1280x720", limit: 30, fourcc: "NV12", width: 1280, height: 720, fps: 30, why: "exact size"),
    .init(
        fixture: "macbook-m1", target: "1500x1500", limit: 24, fourcc: "NV12", width: 1552, height: 1552, fps: 24,
        why: "square, continuous rate clamps to the limit"),
    .init(fixture: "iphone", target: "1280x720", limit: 30, fourcc: "NV12", width: 1280, height: 720, fps: 30, why: "NV12/NV21 tie: NV12 is cheaper"),
    .init(
        fixture: "iphone", target: "640x480", limit: 15, fourcc: "NV12", width: 640, height: 480, fps: 15,
        why: "duplicate sizes, range 1-30 gives the limit"),
    .init(
        fixture: "iphone", target: "4000x3000", limit: 30, fourcc: "NV12", width: 3088, height: 2320, fps: 30,
        why: "larger than anything: the biggest"),
    .init(
        fixture: "iphone-front", target: "100x100", limit: 30, fourcc: "NV12", width: 192, height: 144, fps: 30,
        why: "smaller than anything: the smallest"),
    // UVC: HD YUYV is 10 fps; MJPEG gives 30.
    .init(fixture: "uvc-webcam", target: "1280x720", limit: 30, fourcc: "MJPG", width: 1280, height: 720, fps: 30, why: "fps beats conversion cost"),
    .init(fixture: "uvc-webcam", target: "1920x1080", limit: 30, fourcc: "MJPG", width: 1920, height: 1080, fps: 30, why: "YUYV 1080p is 5 fps"),
    .init(
        fixture: "uvc-webcam", target: "640x480", limit: 30, fourcc: "YUYV", width: 640, height: 480, fps: 30, why: "same fps: YUYV cheaper than MJPG"
    ),
    .init(
        fixture: "uvc-webcam", target: "1280x720", limit: 60, fourcc: "MJPG", width: 1280, height: 720, fps: 60, why: "limit 60 reaches MJPEG's 60"),
    .init(
        fixture: "uvc-webcam", target: "1280x720", limit: 10, fourcc: "YUYV", width: 1280, height: 720, fps: 10,
        why: "MJPEG's rates all above 10: within-limit YUYV wins"),
    .init(
        fixture: "uvc-webcam", target: "1920x1080", limit: 2, fourcc: "YUYV", width: 1920, height: 1080, fps: 5,
        why: "all rates above the limit: the lowest"),
    .init(fixture: "uvc-webcam", target: "800x600", limit: 30, fourcc: "MJPG", width: 800, height: 600, fps: 30, why: "YUYV 800x600 tops at 24"),
    // vivid: every format at every size; rates shrink with size.
    .init(
        fixture: "vivid", target: "1280x720", limit: 30, fourcc: "YU12", width: 1280, height: 720, fps: 12.5,
        why: "12.5 fps max at 720p, YU12 cheapest"),
    .init(fixture: "vivid", target: "640x480", limit: 30, fourcc: "YU12", width: 640, height: 480, fps: 25, why: "25 fps max at VGA"),
    .init(fixture: "vivid", target: "320x180", limit: 30, fourcc: "YU12", width: 320, height: 180, fps: 30, why: "60/50/40 above the limit"),
    .init(fixture: "vivid", target: "320x180", limit: 60, fourcc: "YU12", width: 320, height: 180, fps: 60, why: "limit 60"),
    .init(fixture: "vivid", target: "1920x1080", limit: 30, fourcc: "YU12", width: 1920, height: 1080, fps: 5, why: "5 fps at 1080p"),
    .init(fixture: "vivid", target: "700x400", limit: 30, fourcc: "YU12", width: 640, height: 360, fps: 30, why: "640x360 (100) beats 640x480 (140)"),
    // Stepwise (old v4l2-ctl style): snapping to the step grid; Bayer is skipped.
    .init(
        fixture: "stepwise", target: "1000x700", limit: 30, fourcc: "YUYV", width: 1000, height: 700, fps: 30,
        why: "step 2 hits exactly; NV12 step 16/8 misses by 12"),
    .init(
        fixture: "stepwise", target: "1920x1080", limit: 30, fourcc: "NV12", width: 1920, height: 1080, fps: 30,
        why: "on NV12's grid; stepwise interval 1/60 steps gives 30"),
    .init(
        fixture: "stepwise", target: "2592x1944", limit: 30, fourcc: "NV12", width: 1920, height: 1088, fps: 30,
        why: "Bayer exact but not convertible: clamp NV12"),
    .init(
        fixture: "stepwise", target: "100x100", limit: 30, fourcc: "NV12", width: 176, height: 144, fps: 30,
        why: "both clamp to the minimum: NV12 cheaper"),
    .init(
        fixture: "stepwise", target: "1000x700", limit: 45, fourcc: "YUYV", width: 1000, height: 700, fps: 30,
        why: "continuous 5-30: highest within 45 is 30"),
    .init(
        fixture: "stepwise", target: "1000x700", limit: 3, fourcc: "YUYV", width: 1000, height: 700, fps: 5,
        why: "continuous 5-30 all above 3: the lowest"),
    .init(
        fixture: "stepwise", target: "1928x1084", limit: 30, fourcc: "NV12", width: 1920, height: 1080, fps: 30,
        why: "width clamps to 1920; 1084 is halfway between 1080 and 1088: the smaller"),
    // Continuous sizes (JSON): H264 and Bayer are skipped.
    .init(fixture: "continuous", target: "1000x700", limit: 30, fourcc: "NV12", width: 1000, height: 700, fps: 30, why: "continuous size: exact"),
    .init(
        fixture: "continuous", target: "1000x700", limit: 45, fourcc: "NV12", width: 1000, height: 700, fps: 45,
        why: "continuous rate: exactly the limit"),
    .init(
        fixture: "continuous", target: "1920x1080", limit: 30, fourcc: "NV12", width: 1920, height: 1080, fps: 30,
        why: "H264 exact but compressed: skipped"),
    .init(
        fixture: "continuous", target: "10x10", limit: 30, fourcc: "YUYV", width: 32, height: 32, fps: 30,
        why: "YUYV's 32x32 minimum is closer than NV12's 64x64"),
    .init(
        fixture: "continuous", target: "992x696", limit: 20, fourcc: "NV12", width: 992, height: 696, fps: 20,
        why: "tie in size: NV12 20 fps vs YUYV stepwise interval 1/20"),
]

@Test("negotiation follows the rules", arguments: negotiationCases)
func negotiation(_ c: NegotiationCase) throws {
    let camera = try fixture(c.fixture)
    let sel = try #require(FormatSelector.select(from: camera.formats, target: FrameSize(parsing: c.target)!, fpsLimit: c.limit))
    #expect(sel.pixelFormat.fourcc == c.fourcc)
    #expect(sel.size == FrameSize(width: c.width, height: c.height))
    #expect(abs(sel.fps.doubleValue - c.fps) < 1e-9, "fps \(sel.fps)")
}

@Test func negotiationSkipsEverythingUnconvertible() {
    let bayer = CaptureFormat(pixelFormat: PixelFormat(fourcc: "BA81")!, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
    let h264 = CaptureFormat(pixelFormat: .h264, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
    #expect(FormatSelector.select(from: [bayer], target: FrameSize(width: 640, height: 480)) == nil)
    // Nothing convertible but the camera's own H.264 (#35): that is passed through.
    #expect(FormatSelector.select(from: [h264, bayer], target: FrameSize(width: 640, height: 480))?.pixelFormat == .h264)
}

@Test func noRatesListedMeansTheLimit() {
    let f = [CaptureFormat(pixelFormat: .yuyv, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)]
    #expect(FormatSelector.select(from: f, target: FrameSize(width: 640, height: 480), fpsLimit: 24)?.fps == Fraction(24))
}

@Test func stepwiseIntervalsSnapToTheGrid() {
    // Intervals 1/60 ... 1/5 in steps of 1/60: rates 60, 30, 20, 15, 12, 10, ...
    let iv = FrameIntervals.stepwise(min: Fraction(1, 60), max: Fraction(1, 5), step: Fraction(1, 60))
    #expect(iv.bestRate(limit: Fraction(25)) == Fraction(20))
    #expect(iv.bestRate(limit: Fraction(30)) == Fraction(30))
    #expect(iv.bestRate(limit: Fraction(100)) == Fraction(60))
    #expect(iv.bestRate(limit: Fraction(4)) == Fraction(5)) // all above: the lowest
    #expect(FrameIntervals.continuous(min: Fraction(1, 30), max: Fraction(1, 5)).bestRate(limit: Fraction(24)) == Fraction(24))
}

@Test func stepwiseSizesSnapToTheGrid() {
    let r = FrameSizeRange.stepwise(
        min: FrameSize(width: 16, height: 16), max: FrameSize(width: 100, height: 100), step: FrameSize(width: 8, height: 8))
    #expect(r.closest(to: FrameSize(width: 37, height: 43)) == FrameSize(width: 40, height: 40)) // 37→40 (3 up), 43→40 (3 down)
    #expect(r.closest(to: FrameSize(width: 500, height: 1)) == FrameSize(width: 96, height: 16)) // clamp, then the last grid point ≤ max
    #expect(r.closest(to: FrameSize(width: 20, height: 28)) == FrameSize(width: 16, height: 24)) // halfway → the smaller
}

/// A negotiation's result as `camcap select` prints it: one line, or one JSON object.
@Test func aSelectionIsListedAsTextAndJSON() throws {
    let f = [
        CaptureFormat(
            pixelFormat: .yuyv, size: .discrete(FrameSize(width: 640, height: 480)), intervals: .discrete([Fraction(2, 25)]),
            formatDescription: "YUYV 4:2:2")
    ]
    let sel = try #require(FormatSelector.select(from: f, target: FrameSize(width: 640, height: 480)))
    #expect(FormatListing.text(sel) == "YUYV (YUYV 4:2:2) 640x480 @ 12.5 fps")
    #expect(FormatListing.json(sel) == "{\"pixelFormat\": \"YUYV\", \"width\": 640, \"height\": 480, \"fps\": 12.5}")
}

/// #49 `select --explain`: every negotiation case's explanation has exactly one chosen entry, and it is what
/// `select` picks (one piece of code ranks both).
@Test("an explanation's chosen entry is the selection", arguments: negotiationCases)
func explanationAgreesWithTheSelection(_ c: NegotiationCase) throws {
    let camera = try fixture(c.fixture)
    let target = FrameSize(parsing: c.target)!
    let sel = FormatSelector.select(from: camera.formats, target: target, fpsLimit: Fraction(Int64(c.limit)))
    let verdicts = FormatSelector.explain(from: camera.formats, target: target, fpsLimit: Fraction(Int64(c.limit)))
    #expect(verdicts.count == camera.formats.count)
    #expect(verdicts.filter(\.chosen).count == 1 && verdicts.first { $0.chosen }?.mode == sel, "\(verdicts.filter(\.chosen))")
}

/// Each rule in words, as `camcap select --explain` prints it.
@Test func anExplanationNamesTheRuleEachEntryLostOn() throws {
    let camera = try fixture("uvc-webcam")
    let v = FormatSelector.explain(from: camera.formats, target: FrameSize(width: 1280, height: 720), fpsLimit: 30)
    let lines = v.map(\.description)
    #expect(lines.contains("MJPG 1280x720 @ 30 fps: chosen"), "\(lines)")
    #expect(lines.contains("YUYV 1280x720 @ 10 fps: a lower rate within the limit: 10 fps, the chosen 30"), "\(lines)")
    #expect(lines.contains("YUYV 640x480 @ 30 fps: farther from 1280x720: 640x480 is 880 off, the chosen 1280x720 is 0 off"), "\(lines)")
    // Same size and rate: the cheaper conversion wins (YUYV over MJPG at 640x480).
    let vga = FormatSelector.explain(from: camera.formats, target: FrameSize(width: 640, height: 480), fpsLimit: 30).map(\.description)
    #expect(vga.contains("MJPG 640x480 @ 30 fps: a costlier conversion to I420 than YUYV"), "\(vga)")
    // Above the limit, and the formats asked for.
    let slow = FormatSelector.explain(from: camera.formats, target: FrameSize(width: 1280, height: 720), fpsLimit: 10).map(\.description)
    #expect(slow.contains { $0.hasPrefix("MJPG 1280x720 @ 15 fps: 15 fps is above the limit of 10") }, "\(slow)")
    let asked = FormatSelector.explain(
        from: camera.formats, target: FrameSize(width: 1280, height: 720), fpsLimit: 30, pixelFormats: [.yuyv]
    ).map(\.description)
    #expect(asked.contains { $0.hasPrefix("MJPG Discrete 1280x720: not among the pixel formats asked for (YUYV)") }, "\(asked)")
    // No candidate at all: Bayer cannot be converted; the camera's own H.264 waits to be asked for.
    let bayer = CaptureFormat(pixelFormat: PixelFormat(fourcc: "BA81")!, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
    let h264 = CaptureFormat(pixelFormat: .h264, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
    let yuyv = CaptureFormat(pixelFormat: .yuyv, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
    let odd = FormatSelector.explain(from: [bayer, h264, yuyv], target: FrameSize(width: 640, height: 480), fpsLimit: 30).map(\.description)
    #expect(odd[0].contains("cannot be converted to I420") && odd[1].contains("only when asked for (pixel formats: H264)"), "\(odd)")
    #expect(odd[2] == "YUYV 640x480 @ 30 fps: chosen")
}
