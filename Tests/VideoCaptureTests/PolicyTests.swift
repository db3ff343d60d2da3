import Foundation
import Testing
@testable import VideoCapture

/// One policy case: a fixture camera, a request, and the pick worked out by hand from that stack's rules (the
/// `why` cites the rule that decides).
struct PolicyCase: CustomTestStringConvertible, Sendable {
    let policy: SelectionPolicy
    let fixture: String, size: String, fps: Fraction
    var formats: [String] = []
    var caps: String? = nil
    var state: CameraMode? = nil
    let expected: String
    let why: String
    var testDescription: String {
        "\(policy) on \(fixture) \(size)@\(fps)\(formats.isEmpty ? "" : " \(formats)")\(caps.map { " [\($0)]" } ?? ""): \(why)"
    }
}

/// `FOURCC WxH@fps`, or `fails`.
func short(_ pick: PolicyPick) -> String { pick.mode.map { "\($0.pixelFormat) \($0.size)@\($0.fps)" } ?? "fails" }

let policyCases: [PolicyCase] = [
    // uvc-webcam: YUYV 1280x720 offers 10/7.5/5 fps, MJPG 1280x720 60/30/15 fps; YUYV is listed first.
    .init(
        policy: .default, fixture: "uvc-webcam", size: "1280x720", fps: 30, expected: "MJPG 1280x720@30",
        why: "rule 3: 30 fps within the limit beats 10"),
    .init(
        policy: .libwebrtc, fixture: "uvc-webcam", size: "1280x720", fps: 30, expected: "MJPG 1280x720@30",
        why: "capability 1280x720 (maxFPS 30: MJPEG's guess); StartCapture above VGA: MJPG first; S_PARM 30 is listed"),
    .init(
        policy: .chromium, fixture: "uvc-webcam", size: "1280x720", fps: 30, expected: "MJPG 1280x720@30",
        why: "1280 > kMjpegWidth: MJPEG duplicated on top of the fourcc list"),
    .init(
        policy: .gstreamer, fixture: "uvc-webcam", size: "1280x720", fps: 30, expected: "YUYV 1280x720@10",
        why: "video/x-raw leaves YUY2 only (MJPG is image/jpeg); the rate is fixated nearest 120: 10"),
    .init(
        policy: .ffmpeg, fixture: "uvc-webcam", size: "1280x720", fps: 30, expected: "YUYV 1280x720@10",
        why: "ff_fmt_conversion_table: YUYV before MJPG; S_PARM 30 above every listed rate: the highest, 10"),
    .init(
        policy: .ardcapture, fixture: "uvc-webcam", size: "1280x720", fps: 30, expected: "YUYV 1280x720@10",
        why: "YUYV 1280x720 is the first with diff 0; MJPG ties but is not the preferred NV12; fps min(10, 30)"),
    // 640x480: every stack agrees (30 fps exists raw).
    .init(policy: .default, fixture: "uvc-webcam", size: "640x480", fps: 30, expected: "YUYV 640x480@30", why: "same rate: YUYV is cheaper"),
    .init(policy: .libwebrtc, fixture: "uvc-webcam", size: "640x480", fps: 30, expected: "YUYV 640x480@30", why: "at VGA I420 then YUYV first"),
    .init(policy: .chromium, fixture: "uvc-webcam", size: "640x480", fps: 30, expected: "YUYV 640x480@30", why: "no MJPEG on top at 640x480"),
    .init(policy: .gstreamer, fixture: "uvc-webcam", size: "640x480", fps: 30, expected: "YUYV 640x480@30", why: "the highest rate, 30"),
    .init(policy: .ffmpeg, fixture: "uvc-webcam", size: "640x480", fps: 30, expected: "YUYV 640x480@30", why: "S_PARM 30 is listed"),
    .init(policy: .ardcapture, fixture: "uvc-webcam", size: "640x480", fps: 30, expected: "YUYV 640x480@30", why: "first exact size"),
    // 1920x1080: YUYV is 5 fps.
    .init(policy: .libwebrtc, fixture: "uvc-webcam", size: "1920x1080", fps: 30, expected: "MJPG 1920x1080@30", why: "MJPG first above VGA"),
    .init(policy: .gstreamer, fixture: "uvc-webcam", size: "1920x1080", fps: 30, expected: "YUYV 1920x1080@5", why: "raw caps: YUYV's only rate"),
    .init(policy: .ffmpeg, fixture: "uvc-webcam", size: "1920x1080", fps: 30, expected: "YUYV 1920x1080@5", why: "YUYV first in the table"),
    .init(policy: .ardcapture, fixture: "uvc-webcam", size: "1920x1080", fps: 30, expected: "YUYV 1920x1080@5", why: "fps min(5, 30)"),
    // 60 fps asked: libwebrtc's capability map guesses 30 for MJPEG and asks S_PARM for that.
    .init(policy: .default, fixture: "uvc-webcam", size: "1280x720", fps: 60, expected: "MJPG 1280x720@60", why: "limit 60 reaches MJPEG's 60"),
    .init(
        policy: .libwebrtc, fixture: "uvc-webcam", size: "1280x720", fps: 60, expected: "MJPG 1280x720@30",
        why: "FillCapabilities' maxFPS is 30 for MJPEG, whatever the camera lists; S_PARM 30"),
    .init(policy: .chromium, fixture: "uvc-webcam", size: "1280x720", fps: 60, expected: "MJPG 1280x720@60", why: "S_PARM 60 is listed"),
    // A pixel format asked for.
    .init(
        policy: .gstreamer, fixture: "uvc-webcam", size: "1280x720", fps: 30, formats: ["MJPG"], expected: "MJPG 1280x720@60",
        why: "image/jpeg caps without a framerate: fixated nearest 120"),
    .init(
        policy: .ffmpeg, fixture: "uvc-webcam", size: "1280x720", fps: 30, formats: ["MJPG"], expected: "MJPG 1280x720@30", why: "-input_format mjpeg"
    ),
    .init(
        policy: .ardcapture, fixture: "uvc-webcam", size: "1280x720", fps: 30, formats: ["MJPG"], expected: "MJPG 1280x720@30",
        why: "an equal diff in the preferred format replaces the first"),
    // 800x600 / 1000x600: YUYV 800x600 tops at 24, MJPG 800x600 has 30; 1000x600 is not listed.
    .init(
        policy: .libwebrtc, fixture: "uvc-webcam", size: "800x600", fps: 30, expected: "MJPG 800x600@30",
        why: "800 > 640: MJPG first; its capability keeps maxFPS 30"),
    .init(policy: .ffmpeg, fixture: "uvc-webcam", size: "800x600", fps: 30, expected: "YUYV 800x600@24", why: "S_PARM 30: the highest listed, 24"),
    .init(
        policy: .chromium, fixture: "uvc-webcam", size: "1000x600", fps: 30, expected: "MJPG 800x600@30",
        why: "S_FMT 1000x600: nearest MJPG size by |Δw|+|Δh| is 800x600 (200)"),
    .init(
        policy: .gstreamer, fixture: "uvc-webcam", size: "1000x600", fps: 30, expected: "fails",
        why: "a caps width/height no structure offers: not-negotiated"),
    .init(
        policy: .ardcapture, fixture: "uvc-webcam", size: "1000x600", fps: 30, expected: "YUYV 800x600@24",
        why: "first with diff 200; fps min(24, 30)"),
    // stepwise: NV12 176x144-1920x1088 step 16/8 (1-60 fps), YUYV 176x144-1280x720 step 2 (5-30 fps continuous), Bayer.
    .init(policy: .default, fixture: "stepwise", size: "1280x720", fps: 30, expected: "NV12 1280x720@30", why: "tie: NV12 is cheaper"),
    .init(
        policy: .libwebrtc, fixture: "stepwise", size: "1280x720", fps: 30, expected: "YUYV 1280x720@30",
        why: "TRY_FMT of MJPG comes back as NV12 at the probe sizes, labelled MJPEG (maxFPS 30); StartCapture: YUYV is the first of its list"),
    .init(policy: .chromium, fixture: "stepwise", size: "1280x720", fps: 30, expected: "YUYV 1280x720@30", why: "NV12 is not in Chromium's list"),
    .init(
        policy: .gstreamer, fixture: "stepwise", size: "1280x720", fps: 30, expected: "YUYV 1280x720@30",
        why: "YUY2 (rank 1010) before NV12 (50); the continuous range clamps 120 to 30"),
    .init(policy: .ffmpeg, fixture: "stepwise", size: "1280x720", fps: 30, expected: "YUYV 1280x720@30", why: "YUYV comes before NV12 in the table"),
    .init(policy: .ardcapture, fixture: "stepwise", size: "1280x720", fps: 30, expected: "NV12 1280x720@30", why: "NV12 is the preferred format"),
    // continuous: H264 1920x1080, BA81 1280x720, NV12 continuous 64x64-2592x1944 2-60 fps, YUYV stepwise 32x32-1920x1080
    // step 16x8 with intervals 1/60 … 1 step 1/60.
    .init(
        policy: .libwebrtc, fixture: "continuous", size: "1280x720", fps: 30, expected: "YUYV 1280x720@15",
        why: "the H264 stand-in entries are 1920x1080; YUY2 1280x720 wins on height with its guessed maxFPS 15; S_PARM 15"),
    .init(
        policy: .gstreamer, fixture: "continuous", size: "1280x720", fps: 30, expected: "YUYV 1280x720@60",
        why: "YUY2 outranks NV12; the stepwise intervals give the nearest to 120: 60"),
    .init(
        policy: .ffmpeg, fixture: "continuous", size: "1280x720", fps: 30, expected: "YUYV 1280x720@30",
        why: "YUYV before NV12; S_PARM 30 on the grid"),
    .init(policy: .ardcapture, fixture: "continuous", size: "1280x720", fps: 30, expected: "NV12 1280x720@30", why: "NV12 preferred; min(60, 30)"),
    // vivid: every format at 320x180 … 3840x2160; 1280x720 tops at 12.5 fps; listed YUYV, UYVY, …, YU12, YV12, NV12, …
    .init(policy: .default, fixture: "vivid", size: "1280x720", fps: 30, expected: "YU12 1280x720@12.5", why: "YU12 is the cheapest"),
    .init(
        policy: .libwebrtc, fixture: "vivid", size: "1280x720", fps: 30, expected: "YU12 1280x720@12.5",
        why: "MJPG is not listed: YU12 next; S_PARM 30 above every rate: the highest"),
    .init(policy: .chromium, fixture: "vivid", size: "1280x720", fps: 30, expected: "YU12 1280x720@12.5", why: "YU12 first of the raw list"),
    .init(policy: .gstreamer, fixture: "vivid", size: "1280x720", fps: 30, expected: "YUYV 1280x720@12.5", why: "YUY2 has the highest rank"),
    .init(policy: .ffmpeg, fixture: "vivid", size: "1280x720", fps: 30, expected: "YU12 1280x720@12.5", why: "yuv420p heads the table"),
    .init(policy: .ardcapture, fixture: "vivid", size: "1280x720", fps: 30, expected: "NV12 1280x720@12.5", why: "NV12 wins the diff-0 tie"),
    .init(
        policy: .ffmpeg, fixture: "vivid", size: "1000x600", fps: 30, expected: "YU12 1280x720@12.5",
        why: "S_FMT rounds to the nearest by |Δw|+|Δh|: 1280x720 (400) before 640x480 (480)"),
    .init(policy: .gstreamer, fixture: "vivid", size: "1000x600", fps: 30, expected: "fails", why: "exact caps size not offered"),
    .init(
        policy: .libwebrtc, fixture: "vivid", size: "640x480", fps: 30, formats: ["YUYV"], expected: "YU12 640x480@25",
        why: "the matched capability's type is not what StartCapture uses: YU12 heads its list at VGA"),
    .init(
        policy: .chromium, fixture: "vivid", size: "640x480", fps: 30, formats: ["YUYV"], expected: "YU12 640x480@25", why: "no pixel format request"),
    .init(policy: .ffmpeg, fixture: "vivid", size: "640x480", fps: 30, formats: ["YUYV"], expected: "YUYV 640x480@25", why: "-input_format yuyv422"),
    .init(
        policy: .ffmpeg, fixture: "vivid", size: "640x480", fps: 25, formats: ["NV21"], expected: "YU12 640x480@25",
        why: "nv21 has no table entry: the table's first listed format"),
    .init(policy: .ffmpeg, fixture: "vivid", size: "640x480", fps: 30, formats: ["MJPG"], expected: "fails", why: "mjpeg: only MJPG/JPEG are tried"),
    .init(policy: .ffmpeg, fixture: "vivid", size: "1280x720", fps: 11, expected: "YU12 1280x720@12.5", why: "vivid S_PARM: the lowest rate ≥ 11"),
    .init(
        policy: .gstreamer, fixture: "vivid", size: "640x480", fps: 30, caps: "video/x-raw,width=640,height=480,framerate=30/1", expected: "fails",
        why: "640x480 tops at 25: the framerate field matches nothing"),
    .init(
        policy: .gstreamer, fixture: "vivid", size: "640x480", fps: 30, caps: "video/x-raw,width=640,height=480,framerate=15/1",
        expected: "YUYV 640x480@15", why: "a fixed framerate in the filter"),
    .init(
        policy: .gstreamer, fixture: "vivid", size: "640x480", fps: 30, caps: "video/x-raw,format=NV12", expected: "NV12 3840x2160@2",
        why: "no size in the filter: the preference 3840x2160@120"),
    .init(
        policy: .gstreamer, fixture: "vivid", size: "640x480", fps: 30, caps: "video/x-raw,framerate=30/1", expected: "YUYV 640x360@30",
        why: "all candidates smaller than 3840x2160 keep their order: 640x360 is YUY2's largest with 30 fps"),
    .init(
        policy: .gstreamer, fixture: "vivid", size: "640x480", fps: 30,
        state: CameraMode(pixelFormat: .uyvy, size: FrameSize(width: 640, height: 480), fps: 25),
        expected: "UYVY 640x480@25", why: "the device's current format is among the candidates: kept"),
    // h264-webcam: YUYV 1280x720 at 10, MJPG and H264 at 30.
    .init(policy: .default, fixture: "h264-webcam", size: "1280x720", fps: 30, formats: ["H264"], expected: "H264 1280x720@30", why: "asked for"),
    .init(
        policy: .gstreamer, fixture: "h264-webcam", size: "1280x720", fps: 30, formats: ["H264"], expected: "H264 1280x720@30",
        why: "video/x-h264 caps"),
    .init(
        policy: .ffmpeg, fixture: "h264-webcam", size: "1280x720", fps: 30, formats: ["H264"], expected: "H264 1280x720@30", why: "-input_format h264"
    ),
    .init(
        policy: .ardcapture, fixture: "h264-webcam", size: "1280x720", fps: 30, formats: ["H264"], expected: "H264 1280x720@30",
        why: "the preferred format replaces an equal diff"),
    .init(
        policy: .chromium, fixture: "h264-webcam", size: "1280x720", fps: 30, formats: ["H264"], expected: "MJPG 1280x720@30",
        why: "H264 is not in its list"),
    .init(policy: .ffmpeg, fixture: "h264-webcam", size: "1280x720", fps: 30, expected: "YUYV 1280x720@10", why: "YUYV first in the table"),
]

@Test("each policy picks what its stack's rules say", arguments: policyCases)
func policyPicks(_ c: PolicyCase) throws {
    let camera = try fixture(c.fixture)
    let formats = try c.formats.map { try #require(PixelFormat(fourcc: $0)) }
    let caps = try c.caps.map { text throws in try GStreamerCaps(parsing: text) }
    let request = PolicyRequest(size: try #require(FrameSize(parsing: c.size)), fps: c.fps, pixelFormats: formats, caps: caps, deviceState: c.state)
    let pick = c.policy.select(from: camera.formats, request: request)
    #expect(short(pick) == c.expected, "\(pick.reason)")
    #expect(!pick.reason.isEmpty)
}

/// The design card's 22 cases, through the `default` policy: the same picks as `FormatSelector`.
@Test("the default policy is the package's rule", arguments: negotiationCases)
func defaultPolicyIsThePackageRule(_ c: NegotiationCase) throws {
    let camera = try fixture(c.fixture)
    let pick = SelectionPolicy.default.select(
        from: camera.formats, request: PolicyRequest(size: try #require(FrameSize(parsing: c.target)), fps: Fraction(Int64(c.limit))))
    #expect(pick.mode?.pixelFormat.fourcc == c.fourcc && pick.mode?.size == FrameSize(width: c.width, height: c.height), "\(pick)")
    #expect(abs((pick.mode?.fps.doubleValue ?? -1) - c.fps) < 1e-9)
}

@Test func capsFiltersParseAndRefuseWhatIsNotModelled() throws {
    let caps = try GStreamerCaps(parsing: "video/x-raw, format=(string)YUY2, width=(int)1280, height=720, framerate=(fraction)25/2")
    #expect(caps == GStreamerCaps(format: "YUY2", width: 1280, height: 720, framerate: Fraction(25, 2)))
    #expect(caps.description == "video/x-raw,format=YUY2,width=1280,height=720,framerate=25/2")
    for (bad, says) in [
        ("video/x-raw,width=[640,1280]", "ranges and lists are not modelled"), ("width=640", "expected a media type first"),
        ("video/x-raw,width=0", "expected a size from 1 to 16384"), ("video/x-raw,depth=8", "the model knows format, width, height and framerate"),
        ("video/x-raw,framerate=-1/1", "expected a positive rate"), ("video/x-raw,width", "expected name=value"),
    ] {
        #expect(throws: CaptureError.self) { try GStreamerCaps(parsing: bad) }
        do throws(CaptureError) { _ = try GStreamerCaps(parsing: bad) } catch { #expect(error.message.contains(says), "\(error.message)") }
    }
}

/// Out-of-range requests are clamped, never trap; an empty listing is a failure with a reason for every policy.
@Test func policiesSurviveNonsense() throws {
    let camera = try fixture("uvc-webcam")
    for size in [FrameSize(width: Int.max, height: Int.min), FrameSize(width: 0, height: 0)] {
        for fps in [Fraction(0), Fraction(-5), Fraction(Int64.max)] {
            for p in SelectionPolicy.selectAll(from: camera.formats, request: PolicyRequest(size: size, fps: fps)) { #expect(!p.reason.isEmpty) }
        }
    }
    for p in SelectionPolicy.selectAll(from: [], request: PolicyRequest(size: FrameSize(width: 640, height: 480))) {
        #expect(p.selection == nil && !p.reason.isEmpty, "\(p)")
    }
}

/// `select --policy all` as text marks the rows that differ from default; as JSON, one object per policy.
@Test func picksAreListedSideBySide() throws {
    let camera = try fixture("uvc-webcam")
    let request = PolicyRequest(size: FrameSize(width: 1280, height: 720))
    let picks = SelectionPolicy.selectAll(from: camera.formats, request: request)
    let reference = picks.first { $0.policy == .default }?.mode
    let lines = FormatListing.text(picks, reference: reference).split(separator: "\n").map(String.init)
    #expect(lines.count == 7 && lines.last == "(* differs from default)")
    #expect(lines.filter { $0.hasPrefix("* ") }.map { $0.split(separator: " ")[1] } == ["gstreamer", "ffmpeg", "ardcapture"], "\(lines)")
    let json = FormatListing.json(picks, request: request, reference: reference)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    let policies = try #require(object["policies"] as? [[String: Any]])
    #expect(policies.map { $0["policy"] as? String } == SelectionPolicy.allCases.map(\.rawValue))
    #expect(policies.map { $0["differs"] as? Bool } == [false, false, false, true, true, true])
    #expect((policies[3]["selection"] as? [String: Any])?["pixelFormat"] as? String == "YUYV")
    #expect((object["request"] as? [String: Any])?["caps"] as? String == "video/x-raw,width=1280,height=720")
    let one = FormatListing.text([picks[3]])
    #expect(one.hasPrefix("YUYV (YUYV 4:2:2) 1280x720 @ 10 fps\n  gstreamer: "), "\(one)")
}
