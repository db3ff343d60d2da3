// Issue 35: the format a user asks for: a pixel-format preference, fractional frame-rate limits, nonsense
// refused by name, and no silent stand-in camera.
import Foundation
import Testing
import FixtureCameras
@testable import VideoCapture

/// Rates as people write them: whole, decimal, fractional, and the rounded NTSC decimals meaning 1000/1001 rates.
@Test(arguments: [
    ("30", Fraction(30)), ("12.5", Fraction(25, 2)), ("29.97", Fraction(30000, 1001)), ("59.94", Fraction(60000, 1001)),
    ("23.976", Fraction(24000, 1001)), ("30000/1001", Fraction(30000, 1001)), ("30.00", Fraction(30)), (" 7.5 ", Fraction(15, 2)),
    ("0.5", Fraction(1, 2)), ("-5", Fraction(-5)), ("29.970", Fraction(30000, 1001)), ("29.9", Fraction(299, 10)),
])
func ratesParseAsWritten(_ text: String, _ expected: Fraction) {
    #expect(Fraction(rate: text) == expected, "\(text)")
}

@Test(arguments: ["", ".", "abc", "1/0", "1e3", "30fps", "1/-2", "99999999999999999999", "3.0000000001", "--1", "1/2/3"])
func garbageRatesAreNil(_ text: String) {
    #expect(Fraction(rate: text) == nil, "\(text)")
}

/// A camera listing both 30 and 29.97 fps (as many UVC cameras do): a limit of 29.97 picks 30000/1001, 30 picks
/// 30, and 12.5 picks the 12.5 listed; a pixel-format preference restricts the candidates and ranks them.
@Test func fractionalLimitsAndPixelFormatPreferences() {
    let rates: FrameIntervals = .discrete([Fraction(1, 30), Fraction(1001, 30000), Fraction(2, 25), Fraction(1, 10)])
    let formats = [
        CaptureFormat(pixelFormat: .yuyv, size: .discrete(FrameSize(width: 1280, height: 720)), intervals: .discrete([Fraction(1, 10)])),
        CaptureFormat(pixelFormat: .mjpeg, size: .discrete(FrameSize(width: 1280, height: 720)), intervals: rates),
        CaptureFormat(pixelFormat: .nv12, size: .discrete(FrameSize(width: 640, height: 480)), intervals: rates),
    ]
    let hd = FrameSize(width: 1280, height: 720)
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(rate: "29.97")!)?.fps == Fraction(30000, 1001))
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(30))?.fps == Fraction(30))
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(rate: "12.5")!)?.fps == Fraction(25, 2))
    // The default picks MJPEG (30 fps beats YUYV's 10); asking for YUYV gets YUYV, even at 10 fps.
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(30))?.pixelFormat == .mjpeg)
    let yuyv = FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(30), pixelFormats: [.yuyv])
    #expect(yuyv?.pixelFormat == .yuyv && yuyv?.fps == Fraction(10))
    // Only NV12 asked for: the closest NV12 size, even though MJPEG has the target size.
    #expect(
        FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(30), pixelFormats: [.nv12])?.size == FrameSize(width: 640, height: 480))
    // Two asked for where the rules tie: their order decides (YUYV and MJPEG both within 10 fps at 1280x720).
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(10), pixelFormats: [.mjpeg, .yuyv])?.pixelFormat == .mjpeg)
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(10), pixelFormats: [.yuyv, .mjpeg])?.pixelFormat == .yuyv)
    #expect(FormatSelector.select(from: formats, target: hd, fpsLimit: Fraction(30), pixelFormats: [.i420]) == nil)
}

/// The capturer refuses requests that are not pictures or rates, naming the value, and names what a camera
/// offers when it has none of the formats asked for.
@Test func nonsenseRequestsAreRefusedByName() throws {
    let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
    let camera = try capturer.device("fixture:uvc-webcam")
    for (size, limit, message) in [
        (FrameSize(width: 0, height: 0), Fraction(30), "target size 0x0 must be positive"),
        (FrameSize(width: -640, height: 480), Fraction(30), "target size -640x480 must be positive"),
        (FrameSize(width: 640, height: 480), Fraction(0), "frame-rate limit must be above 0 and at most 1000, got 0"),
        (FrameSize(width: 640, height: 480), Fraction(-25, 2), "frame-rate limit must be above 0 and at most 1000, got -12.5"),
    ] {
        let e = #expect(throws: CaptureError.self) { _ = try capturer.selectFormat(for: camera, targetSize: size, fpsLimit: limit) }
        #expect(e?.code == .invalidArgument && e?.message.contains(message) == true, "\(e?.message ?? "")")
    }
    let none = #expect(throws: CaptureError.self) {
        _ = try capturer.selectFormat(for: camera, targetSize: FrameSize(width: 640, height: 480), fpsLimit: Fraction(30), pixelFormats: [.nv12])
    }
    #expect(
        none?.code == .unsupportedFormat && none?.message.contains("offers none of the pixel formats asked for (NV12); it offers: MJPG, YUYV") == true
    )
    let intLimit = #expect(throws: CaptureError.self) {
        _ = try capturer.selectFormat(for: camera, targetSize: FrameSize(width: 640, height: 480), fpsLimit: 0)
    }
    #expect(intLimit?.code == .invalidArgument)
}
