// Issue 49: constraints as browsers state them (W3C SelectSettings and fitness distance) over fixture cameras.
import Testing
@testable import VideoCapture
@testable import VideoProcessing

@Suite struct ConstraintsTests {
    private func pick(_ json: String, _ camera: String = "uvc-webcam") throws -> ConstrainedSelection {
        try FormatSelector.select(from: try fixture(camera).formats, constraints: try VideoConstraints(json: json))
    }

    @Test func getUserMediaStyleConstraintsPickWhatABrowserWouldAskFor() throws {
        // The issue's example: 720p ideal, at least 24 fps, ideally 30 (YUYV 720p is 10 fps: MJPEG).
        #expect(try pick(#"{"width": {"ideal": 1280}, "frameRate": {"min": 24, "ideal": 30}}"#).description == "MJPG 1280x720 @ 30 fps")
        #expect(try pick(#"{"width": {"exact": 1920}, "frameRate": {"min": 24}}"#).description == "MJPG 1920x1080 @ 30 fps")
        // A bare value is an ideal; without a frame rate the package's 30 fps limit breaks the tie.
        #expect(try pick(#"{"width": 640, "height": 480}"#).description == "YUYV 640x480 @ 30 fps")
        // Advanced sets narrow in order when they can (a bare value there is exact).
        #expect(try pick(#"{"width": {"ideal": 1280}, "advanced": [{"frameRate": 15}, {"width": 9999}]}"#).description == "MJPG 1280x720 @ 15 fps")
        // Ordered pixel-format preference.
        #expect(try pick(#"{"width": 640, "pixelFormat": ["MJPG", "YUYV"]}"#).selection.pixelFormat == .mjpeg)
    }

    @Test func cropAndScaleDeliversASmallerSizeCutFromACameraMode() throws {
        let c = try pick(#"{"width": {"exact": 640}, "height": {"exact": 360}, "resizeMode": "crop-and-scale"}"#)
        #expect(c.outputSize == FrameSize(width: 640, height: 360) && c.selection.size.width >= 640 && c.selection.size.height >= 360, "\(c)")
        // Without crop-and-scale, 640x360 exactly is not a mode of this camera.
        #expect(throws: OverconstrainedError.self) { try pick(#"{"width": {"exact": 640}, "height": {"exact": 360}}"#) }
        // The crop keeps the middle at the asked aspect.
        #expect(
            VideoSource.centerCrop(FrameSize(width: 640, height: 480), toAspectOf: FrameSize(width: 640, height: 360))
                == CropRect(x: 0, y: 60, width: 640, height: 360))
        #expect(
            VideoSource.centerCrop(FrameSize(width: 1280, height: 720), toAspectOf: FrameSize(width: 480, height: 480))
                == CropRect(x: 280, y: 0, width: 720, height: 720))
        #expect(VideoSource.centerCrop(FrameSize(width: 1280, height: 720), toAspectOf: FrameSize(width: 640, height: 360)) == nil)
    }

    @Test func anUnmeetableConstraintIsNamed() throws {
        let rate = #expect(throws: OverconstrainedError.self) { try pick(#"{"frameRate": {"min": 100}}"#) }
        #expect(rate?.constraint == "frameRate" && rate?.message.contains("it has rates 5...60 fps") == true, "\(String(describing: rate))")
        let width = #expect(throws: OverconstrainedError.self) { try pick(#"{"width": {"min": 5000}}"#) }
        #expect(width?.constraint == "width" && width?.message.contains("widths 320...1920") == true)
        let format = #expect(throws: OverconstrainedError.self) { try pick(#"{"pixelFormat": {"exact": "NV12"}}"#) }
        #expect(format?.constraint == "pixelFormat" && format?.message.contains("formats MJPG, YUYV") == true)
    }

    @Test(arguments: [
        (#"{"width": "big"}"#, "width must be a number, found big"), (#"{"width": {"least": 3}}"#, "width has an unknown member \"least\""),
        (#"{"height": {"min": 9, "max": 3}}"#, "height.min 9.0 is above height.max 3.0"), (#"{"zoom": 2}"#, "unknown member \"zoom\""),
        (#"{"resizeMode": "stretch"}"#, "resizeMode must be \"none\" or \"crop-and-scale\""), (#"[1]"#, "expected a JSON object"),
        (#"{"frameRate": true}"#, "frameRate must be a number"), (#"{"width": 1e9}"#, "width must be 0..."), ("{", "not JSON"),
        (#"{"advanced": [{"advanced": []}]}"#, "advanced must be an array of at most 32 constraint sets (and only at the top)"),
    ])
    func aBadConstraintIsRefusedByName(json: String, expected: String) {
        #expect {
            _ = try VideoConstraints(json: json)
        } throws: {
            "\($0)".hasPrefix("constraints: ") && "\($0)".contains(expected)
        }
    }
}
