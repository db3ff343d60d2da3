import Foundation
import Testing
@testable import VideoCapture
@testable import FixtureCameras

/// Controls of fixture cameras: parsing (the pasted `v4l2-ctl --list-ctrls-menus` text and JSON), the same
/// semantics as V4L2 (typed errors, read back), pictures that honour the controls, and sensor metadata.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ControlFixtureTests {
    /// The control lines of a `v4l2-ctl -L` text (what the parser must find, counted independently).
    func controlLines(_ text: String) -> [String] {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { line in
            let w = line.split(separator: " ")
            return w.count >= 3 && w[1].hasPrefix("0x") && w[1].count == 10 && w[2].hasPrefix("(")
        }.map { String($0.split(separator: " ")[0]) }
    }

    @Test func theVividFixtureHasVividsControlListing() throws {
        let text = try #require(BuiltinCameras.files.first { $0.name == "vivid" }?.text)
        let d = try CameraDescription.parse(text, file: "vivid.txt")
        let expected = controlLines(text)
        #expect(expected.count == 70)
        #expect(d.controls.filter { $0.kind != .ctrlClass }.map(\.name) == expected)
        #expect(d.controls.filter { $0.kind == .ctrlClass }.map(\.label) == ["User Controls", "Digital Video Controls", "Vivid Controls"])
        let c = { (n: String) in d.controls.find(n)! }
        #expect(c("brightness").id == .brightness && c("brightness").maximum == 255 && c("brightness").flags == [.slider])
        #expect(c("gain").flags == [.inactive, .volatile] && c("gain").value == .integer(15))
        #expect(c("test_pattern").menu.count == 22 && c("test_pattern").currentMenuItem?.name == "75% Colorbar")
        #expect(c("menu").menu.map(\.index) == [1, 3, 4])
        #expect(c("integer_menu").kind == .integerMenu && c("integer_menu").menu.compactMap(\.value) == [2, 3, 5, 8, 13, 21, 42])
        #expect(c("integer_64_bits").minimum == .min && c("integer_64_bits").maximum == .max)
        #expect(c("string").value == .string("  ") && c("string").flags == [.hasPayload])
        #expect(c("bitmask").value == .integer(0x8000_2000) && c("bitmask").maximum == 0x8040_2010)
        #expect(c("u16_8x16_matrix").dimensions == [8, 16] && c("u16_8x16_matrix").value == nil)
        #expect(c("u32_dynamic_array").flags == [.hasPayload, .dynamicArray])
        #expect(c("button").value == nil && c("button").flags == [.writeOnly, .executeOnWrite])
        #expect(c("dv_timings").menu.count == 111 && c("dv_timings").isInactive)
        #expect(d.position == .external && d.rotation == .rotation0)
    }

    @Test func aPastedListingWithControlsParsesAndSetsPositionAndRotation() throws {
        let text = """
            Driver Info:
            \tCard type        : Phone Cam
            ioctl: VIDIOC_ENUM_FMT
            \t[0]: 'YUYV' (YUYV 4:2:2)
            \t\tSize: Discrete 640x480
            \t\t\tInterval: Discrete 0.033s (30.000 fps)

            User Controls

                                 brightness 0x00980900 (int)    : min=-64 max=64 step=1 default=0 value=10
                       power_line_frequency 0x00980918 (menu)   : min=0 max=3 default=1 value=1 (50 Hz)
            \t\t\t\t0: Disabled
            \t\t\t\t1: 50 Hz
            \t\t\t\t2: 60 Hz
            \t\t\t\t3: Auto

            Camera Controls

                         camera_orientation 0x009a0922 (menu)   : min=0 max=2 default=0 value=0 (Front) flags=read-only
            \t\t\t\t0: Front
            \t\t\t\t1: Back
            \t\t\t\t2: External
                     camera_sensor_rotation 0x009a0923 (int)    : min=0 max=270 step=90 default=90 value=90 flags=read-only
            """
        let d = try CameraDescription.parse(text, file: "phone.txt")
        #expect(d.name == "Phone Cam" && d.formats.count == 1)
        #expect(
            d.controls.map(\.name) == [
                "user_controls", "brightness", "power_line_frequency", "camera_controls", "camera_orientation", "camera_sensor_rotation",
            ])
        #expect(d.controls.find("brightness")?.value == .integer(10))
        #expect(d.controls.find("power_line_frequency")?.menu.map(\.name) == ["Disabled", "50 Hz", "60 Hz", "Auto"])
        #expect(d.position == .front && d.rotation == .rotation270, "90° counter-clockwise correction is 270° clockwise")
    }

    @Test(arguments: [
        ("brightness 0x00980900 (int)    : min=0 max=abc step=1 default=128 value=128", "expected a number for max, found \"abc\""),
        ("brightness 0x00980900 (int)    : min=9 max=1 step=1", "min 9 is above max 1"),
        ("brightness 0x00980900 (int)    : min=0 max=9 flags=slider, shiny", "unknown flag \"shiny\""),
        ("brightness 0x00980900 (int)    : min=0 max=9 colour=red", "unknown key \"colour\""),
        ("brightness 0x00980900 (int)      min=0 max=9", "expected \":\" after the type"),
        ("string 0x0098f905 (str)    : min=2 max=4 step=1 value='ab", "unterminated quoted value"),
        ("menu 0x0098f904 (menu)   : min=1 max=4 default=3 value=3\n\t\t\t\t9: Too Far", "menu entry 9 of control menu is outside its range 1...4"),
        ("u8_array 0x0098f90a (u8)     : min=16 max=32 step=1 default=24 dims=[2][x]", "expected dims=[N][M]"),
    ])
    func badControlLinesAreErrorsNamingFileAndLine(_ bad: String, _ message: String) {
        let text = "\t[0]: 'YUYV' (YUYV 4:2:2)\n\t\tSize: Discrete 640x480\n\nUser Controls\n\n" + bad + "\n"
        let badLine = 5 + bad.split(separator: "\n").count
        do {
            _ = try CameraDescription.parse(text, file: "bad.txt")
            Issue.record("parsed: \(bad)")
        } catch {
            #expect(error.file == "bad.txt" && error.line == badLine && error.message.contains(message), "\(error)")
        }
    }

    @Test func jsonControlsParseAndBadOnesNameTheLine() throws {
        let json = """
            {"name": "J", "formats": [{"pixelFormat": "YUYV", "sizes": [{"width": 320, "height": 240, "fps": [30]}]}],
             "controls": [
               {"name": "Brightness", "type": "int", "min": 0, "max": 255, "default": 128, "flags": ["slider"]},
               {"name": "power_line_frequency", "type": "menu", "min": 0, "max": 2, "default": 1, "menu": ["Disabled", "50 Hz", "60 Hz"]},
               {"name": "Test Pattern", "type": "menu", "max": 1, "menu": ["Bars", "100% Red"]},
               {"name": "Zoom Steps", "type": "intmenu", "max": 2, "menu": [1, 2, 4]},
               {"name": "Camera Orientation", "type": "menu", "max": 2, "default": 1, "flags": ["read-only"], "menu": ["Front", "Back", "External"]}
             ]}
            """
        let d = try CameraDescription.parse(json, file: "j.json")
        #expect(d.controls.map(\.name) == ["brightness", "power_line_frequency", "test_pattern", "zoom_steps", "camera_orientation"])
        #expect(d.controls[0].id == .brightness && d.controls[0].value == .integer(128) && d.controls[0].flags == [.slider])
        #expect(d.controls[1].id == .powerLineFrequency && d.controls[1].currentMenuItem?.name == "50 Hz")
        #expect(d.controls[2].id.rawValue == 0x00f0_f001, "controls without a well-known name get private ids")
        #expect(d.controls[3].menu.compactMap(\.value) == [1, 2, 4])
        #expect(d.position == .back)
        for (bad, message) in [
            (#"{"name": "x", "type": "float"}"#, "\"type\" must be one of"),
            (#"{"name": "m", "type": "menu", "max": 2}"#, "a menu control needs a \"menu\""),
            (#"{"name": "b", "type": "int", "min": 0, "max": 10, "value": 11}"#, "value 11 is not within its range"),
            (#"{"name": "f", "type": "bool", "flags": ["sticky"]}"#, "unknown flag"),
            (#"{"type": "int"}"#, "needs a \"name\""),
        ] {
            let text =
                "{\"name\": \"J\", \"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 32, \"height\": 24}]}],\n\"controls\": [\n" + bad
                + "]}"
            do {
                _ = try CameraDescription.parse(text, file: "j.json")
                Issue.record("parsed \(bad)")
            } catch { #expect(error.line == 3 && error.message.contains(message), "\(error)") }
        }
    }

    @Test func picturesSettingsNeverTrapOnExtremeRanges() throws {
        let extremes = [
            CameraControl(
                id: .brightness, label: "Brightness", kind: .integer64, minimum: .min, maximum: .max, defaultValue: .min, value: .integer(.max)),
            CameraControl(
                id: .contrast, label: "Contrast", kind: .integer64, minimum: .min, maximum: .max, defaultValue: .max, value: .integer(.min)),
        ]
        let s = PictureSettings(extremes)
        #expect(s.lumaOffset == 255 && s.contrastNum == 0)
        #expect(
            PictureSettings([
                CameraControl(id: .contrast, label: "Contrast", kind: .integer, minimum: 0, maximum: 255, defaultValue: 128, value: .integer(128))
            ]).isIdentity)
        let c = extremes[0]
        #expect(c.rounded(.min) == .min && c.rounded(.max) == .max)
        let stepped = CameraControl(
            id: .zoomAbsolute, label: "Zoom", kind: .integer, minimum: .min, maximum: .max, step: UInt64.max, value: .integer(0))
        #expect(stepped.rounded(0) == .max, "the nearer step")
        #expect(
            CameraControl(id: .zoomAbsolute, label: "Z", kind: .integer, minimum: 0, maximum: 10, step: 4).rounded(9) == 8,
            "half up would pass the maximum: down")
        #expect(throws: CaptureError.self) { try stepped.validate(.string("x"), device: "d") }
    }

    func vivid(_ configuration: CameraVideoCapturer.Configuration = .init(alwaysDiscardsLateFrames: false)) throws -> (
        CameraVideoCapturer, CaptureDevice
    ) {
        let c = CameraVideoCapturer(providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))], configuration: configuration)
        return (c, try c.device("fixture:vivid"))
    }

    @Test func fixtureControlsHaveTheV4L2Semantics() throws {
        let (c, d) = try vivid()
        func code(_ n: String, _ v: String) -> (CaptureError.Code?, String) {
            do {
                try c.setControl(n, to: v, on: d)
                return (nil, "")
            } catch { return (error.code, error.message) }
        }
        #expect(code("brightness", "300").0 == .controlOutOfRange)
        #expect(code("menu", "2").0 == .controlOutOfRange, "a skipped menu index")
        #expect(code("read_only_integer_32_bits", "1").0 == .controlReadOnly)
        #expect(code("gain", "10").0 == .controlInactive)
        #expect(code("no_such_control", "1").0 == .unknownControl)
        #expect(code("u16_8x16_matrix", "1").0 == .controlOutOfRange, "arrays cannot be set as one value")
        #expect(try c.setControl("gain_automatic", to: "0", on: d).value == .integer(0))
        #expect(try c.control("gain", of: d).isInactive == false, "manual gain is active once automatic gain is off")
        #expect(try c.setControl("gain", to: "10", on: d).value == .integer(10))
        #expect(try c.setControl("string", to: "abc", on: d).value == .string("abc"))
        #expect(code("string", "a").0 == .controlOutOfRange, "shorter than its minimum of 2")
        #expect(try c.setControl("test_pattern", to: "100% red", on: d).currentMenuItem?.name == "100% Red")
        #expect(try c.setControl("button", to: "1", on: d).value == .integer(1))
        #expect(try c.control("brightness", of: d).value == .integer(128), "a failed set changes nothing")
        // Rounded to the step, as the V4L2 core does.
        let webcam = try c.device("fixture:uvc-webcam")
        #expect(try c.setControl("pan_absolute", to: "5000", on: webcam).value == .integer(3600))
        #expect(code2(c, webcam, "exposure_time_absolute", "100") == .controlInactive, "aperture-priority auto exposure is on")
        #expect(try c.setControl("auto_exposure", to: "Manual Mode", on: webcam).value == .integer(1))
        #expect(try c.setControl("exposure_time_absolute", to: "100", on: webcam).value == .integer(100))
    }

    func code2(_ c: CameraVideoCapturer, _ d: CaptureDevice, _ n: String, _ v: String) -> CaptureError.Code? {
        do {
            try c.setControl(n, to: v, on: d)
            return nil
        } catch { return error.code }
    }

    /// A YUYV frame's luma, copied out (holding frames would hold the camera's buffers).
    struct Luma {
        let width: Int, height: Int, y: [UInt8]
        init(_ f: VideoFrame) {
            width = f.buffer.width
            height = f.buffer.height
            let b = f.buffer, p = b.bytes
            var out = [UInt8](repeating: 0, count: width * height)
            for r in 0..<height { for x in 0..<width { out[r * width + x] = p[r * b.stride + 2 * x] } }
            y = out
        }
    }
    func meanLuma(_ f: Luma) -> Double { Double(f.y.reduce(0) { $0 + Int($1) }) / Double(f.y.count) }
    func luma(_ f: Luma, _ x: Int, _ y: Int) -> Int { Int(f.y[y * f.width + x]) }

    /// Starts vivid's fixture in YUYV 320x180 and returns the frame iterator.
    func startYUYV(_ c: CameraVideoCapturer, _ d: CaptureDevice) async throws -> VideoFrameStream.AsyncIterator {
        let stream = c.frames(bufferingNewest: 2)
        let fmt = try #require(try c.supportedFormats(for: d).first { $0.pixelFormat == .yuyv })
        try await c.startCapture(device: d, format: fmt, size: FrameSize(width: 320, height: 180), fps: Fraction(30))
        return stream.makeAsyncIterator()
    }

    /// The next frame (within 30) for which `ok` holds, and how many came before it.
    func frame(_ it: inout VideoFrameStream.AsyncIterator, where ok: (Luma) -> Bool) async throws -> (Luma, Int)? {
        for i in 0..<30 {
            guard let f = try await it.next() else { return nil }
            let l = Luma(f)
            if ok(l) { return (l, i) }
        }
        return nil
    }

    @Test func aStreamingFixtureHonoursBrightnessContrastFlipsAndTestPattern() async throws {
        let (c, d) = try vivid()
        var it = try await startYUYV(c, d)
        let first = Luma(try #require(try await it.next()))
        let base = meanLuma(first)
        #expect(luma(first, 2, 10) == 180 && luma(first, 317, 10) == 16, "white bar on the left, black on the right")

        try c.setControl("brightness", to: "200", on: d)
        let (bright, lag) = try #require(try await frame(&it) { meanLuma($0) > base + 50 })
        #expect(lag <= 6, "the set shows within a few frames (\(lag))")
        #expect(abs(meanLuma(bright) - base - 72) < 8, "brightness 200 adds 72 to luma (measured \(meanLuma(bright) - base))")

        try c.setControl("brightness", to: "128", on: d)
        try c.setControl("contrast", to: "64", on: d)
        let (flat, _) = try #require(try await frame(&it) { luma($0, 2, 10) == 98 })
        #expect(luma(flat, 317, 10) == 16, "half contrast: white 180 → 98, black stays 16")

        try c.setControl("contrast", to: "128", on: d)
        try c.setControl("horizontal_flip", to: "1", on: d)
        let (mirrored, _) = try #require(try await frame(&it) { luma($0, 2, 10) == 16 })
        #expect(luma(mirrored, 317, 10) == 180, "mirrored: black on the left, white on the right")
        for x in stride(from: 0, to: 320, by: 17) { #expect(luma(mirrored, x, 10) == luma(first, 319 - x, 10)) }

        try c.setControl("horizontal_flip", to: "0", on: d)
        try c.setControl("vertical_flip", to: "1", on: d)
        // The frame counter's black box sits bottom left (rows 153...173 at this size); upside down it is at the top.
        #expect(luma(first, 7, 19) == 180 && luma(first, 7, 160) == 16)
        let (flipped, _) = try #require(try await frame(&it) { luma($0, 2, 10) == 180 && luma($0, 7, 19) == 16 })
        #expect(luma(flipped, 7, 179 - 19) == 180 && luma(flipped, 2, 10) == 180, "upside down: the box at the top, bars unchanged")

        try c.setControl("vertical_flip", to: "0", on: d)
        try c.setControl("test_pattern", to: "100% Red", on: d)
        let (red, _) = try #require(try await frame(&it) { luma($0, 160, 90) == 0x51 })
        #expect(luma(red, 2, 10) == 0x51 && luma(red, 317, 170) == 0x51, "solid red everywhere")
        try await c.stopCapture()
    }

    @Test func fixturesReportPositionAndRotationFromTheirControls() async throws {
        let c = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(alwaysDiscardsLateFrames: false))
        let back = try c.device("fixture:iphone"), front = try c.device("fixture:iphone-front"), webcam = try c.device("fixture:uvc-webcam")
        #expect(back.position == .back && front.position == .front && webcam.position == .external)
        #expect(try c.control(.cameraSensorRotation, of: back).value == .integer(270))
        #expect(c.device(at: .front)?.path == "fixture:iphone-front")
        for (d, rotation) in [(back, VideoRotation.rotation90), (front, .rotation270), (webcam, .rotation0)] {
            let s = c.frames(bufferingNewest: 2)
            try await c.startCapture(device: d, targetSize: FrameSize(width: 320, height: 240))
            var it = s.makeAsyncIterator()
            #expect(try #require(try await it.next()).rotation == rotation, "\(d.path)")
            try await c.stopCapture()
        }
    }

    @Test func thePowerLineDefaultIsAppliedOnStartWhereTheCameraHasIt() async throws {
        for (plf, device, expected) in [
            (PowerLineFrequency.hz50, "fixture:uvc-webcam", Int64(1)), (.auto, "fixture:iphone", 3),
            (.auto, "fixture:uvc-webcam", 2), (.hz60, "fixture:continuous", nil),
        ] {
            let c = CameraVideoCapturer(
                providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
                configuration: .init(alwaysDiscardsLateFrames: false, powerLineFrequency: plf))
            let d = try c.device(device)
            try await c.startCapture(device: d, targetSize: FrameSize(width: 320, height: 240))
            #expect(try c.controls(for: d).find("power_line_frequency")?.integerValue == expected, "\(plf) on \(device)")
            try await c.stopCapture()
        }
    }
}
