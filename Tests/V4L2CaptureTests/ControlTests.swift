import CV4L2
import Foundation
import Testing
import VideoCapture
@testable import V4L2Capture

/// Controls through the fake kernel: the walk, menus, values, sets read back, typed errors, sensor metadata
/// and the start-time defaults.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ControlTests {
    /// The fake delivers its script at once: the capturer waits for consumers instead of dropping late frames.
    func capturer(
        _ k: FakeKernel, _ dev: String, configuration: CameraVideoCapturer.Configuration = .init(alwaysDiscardsLateFrames: false),
        overrides: [String: SensorOverride] = [:]
    ) -> CameraVideoCapturer {
        CameraVideoCapturer(
            providers: [V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: fakeStreamConfig, overrides: overrides)],
            configuration: configuration)
    }

    @Test func listsEveryControlWithTypeRangeFlagsMenusAndValue() throws {
        let k = FakeKernel(), dev = fakeDev()
        let c = capturer(k, dev)
        let all = try c.controls(for: try c.device(dev + "/video0"))
        #expect(
            all.map(\.name) == [
                "user_controls", "brightness", "gain_automatic", "gain", "horizontal_flip", "power_line_frequency",
                "sharpness", "button", "integer_64_bits", "menu", "string", "integer_menu", "area",
                "camera_controls", "camera_orientation", "camera_sensor_rotation",
            ])
        let b = try #require(all.find("brightness"))
        #expect(b.id == .brightness && b.kind == .integer && b.minimum == 0 && b.maximum == 255 && b.defaultValue == 128 && b.value == .integer(128))
        #expect(b.flags == [.slider])
        let gain = try #require(all.find("gain"))
        #expect(gain.flags == [.inactive, .volatile], "inactive while gain_automatic is on")
        let plf = try #require(all.find("power_line_frequency"))
        #expect(plf.kind == .menu && plf.menu.map(\.name) == ["Disabled", "50 Hz", "60 Hz"] && plf.currentMenuItem?.name == "60 Hz")
        let menu = try #require(all.find("menu"))
        #expect(menu.menu.map(\.index) == [1, 3, 4], "skipped menu indices are left out")
        let im = try #require(all.find("integer_menu"))
        #expect(im.kind == .integerMenu && im.menu.map(\.value) == [2, 5, 13])
        #expect(all.find("integer_64_bits")?.value == .integer(1 << 40))
        #expect(all.find("button")?.value == nil && all.find("button")?.flags == [.writeOnly, .executeOnWrite])
        #expect(all.find("0x00980900")?.name == "brightness" && all.find("exposure_absolute") == nil)
        #expect(k.openCount == 0, "listing closes what it opens")
    }

    @Test func aSetReturnsTheValueTheDriverApplied() throws {
        let k = FakeKernel(), dev = fakeDev()
        let c = capturer(k, dev)
        let d = try c.device(dev + "/video0")
        #expect(try c.setControl("sharpness", to: "47", on: d).value == .integer(50), "the driver rounds to its step of 10")
        #expect(k.controlValue(CameraControlID.sharpness.rawValue) == 50)
        #expect(try c.setControl(.brightness, to: 200, on: d).value == .integer(200))
        #expect(try c.setControl("power_line_frequency", to: "50 Hz", on: d).currentMenuItem?.name == "50 Hz", "a menu entry by name")
        #expect(try c.setControl("horizontal_flip", to: "true", on: d).value == .integer(1))
        #expect(try c.setControl("integer_64_bits", to: "-5000000000", on: d).value == .integer(-5_000_000_000))
        #expect(try c.setControl("button", to: "1", on: d).value == .integer(1), "a button reports what was written")
        #expect(try c.control("string", of: d).value == .string("ab"))
        #expect(try c.control("area", of: d).value == .string("1000x2000"), "an area's payload is read and shown as v4l2-ctl shows it")
        #expect(try c.setControl("string", to: "xyz", on: d).value == .string("xyz"), "strings go through the pointer and are read back")
        #expect(throws: CaptureError.self) { try c.setControl("string", to: "toolong", on: d) }
        let applied = try c.setControls([CameraControlSetting("gain_automatic", "0"), CameraControlSetting("gain", "42")], on: d)
        #expect(applied.map(\.value) == [.integer(0), .integer(42)], "in order: automatic off, then the manual value is accepted")
        #expect(k.callLog.filter { $0.hasPrefix("S_EXT_CTRLS") }.count == 9)
    }

    @Test func refusedSetsAreTypedErrorsNamingTheControlAndValue() async throws {
        let k = FakeKernel(), dev = fakeDev()
        let c = capturer(k, dev)
        let d = try c.device(dev + "/video0")
        func code(_ spec: String, _ v: String) -> (CaptureError.Code?, String) {
            do {
                try c.setControl(spec, to: v, on: d)
                return (nil, "")
            } catch { return (error.code, error.message) }
        }
        var r = code("brightness", "300")
        #expect(r.0 == .controlOutOfRange && r.1.contains("300") && r.1.contains("brightness") && r.1.contains("0...255"), "\(r.1)")
        r = code("menu", "2")
        #expect(r.0 == .controlOutOfRange && r.1.contains("1 (Menu Item 1), 3 (Menu Item 3), 4 (Menu Item 4)"), "\(r.1)")
        r = code("camera_orientation", "0")
        #expect(r.0 == .controlReadOnly && r.1.contains("camera_orientation"), "\(r.1)")
        r = code("gain", "10")
        #expect(r.0 == .controlInactive && r.1.contains("gain") && r.1.contains("automatic"), "\(r.1)")
        r = code("zoom", "1")
        #expect(r.0 == .unknownControl && r.1.contains("\"zoom\"") && r.1.contains("brightness"), "\(r.1)")
        r = code("brightness", "bright")
        #expect(r.0 == .controlOutOfRange && r.1.contains("\"bright\""), "\(r.1)")
        r = code("horizontal_flip", "2")
        #expect(r.0 == .controlOutOfRange, "\(r.1)")
        // Busy: the fake grabs horizontal_flip while streaming (EBUSY from S_EXT_CTRLS).
        k.push((0..<200).map { _ in goodFrame() })
        try await c.startCapture(device: d, targetSize: FrameSize(width: 640, height: 480))
        r = code("horizontal_flip", "1")
        #expect(r.0 == .controlBusy && r.1.contains("horizontal_flip"), "\(r.1)")
        // A driver-side refusal the checks cannot see (ERANGE) is still typed.
        k.fail(CV4L2_VIDIOC_S_EXT_CTRLS, with: ERANGE)
        r = code("brightness", "10")
        #expect(r.0 == .controlOutOfRange, "\(r.1)")
        try await c.stopCapture()
        // EACCES from the driver on a control not flagged read-only: the camera's mode refuses it (uvcvideo does
        // this for manual controls under automatic modes).
        k.fail(CV4L2_VIDIOC_S_EXT_CTRLS, with: EACCES)
        r = code("brightness", "10")
        #expect(r.0 == .controlInactive && r.1.contains("current mode"), "\(r.1)")
        #expect(k.openCount == 0, "every set closes what it opens")
    }

    @Test func aDriverThatNeverEndsItsListOrMenusIsCut() throws {
        let k = FakeKernel(), dev = fakeDev()
        // A menu claiming 4 billion entries, all but two skipped: the walk asks at most 4096 indices.
        k.editControl(0x0098_f904) {
            $0.min = 0
            $0.max = Int64(UInt32.max)
        }
        let all = try capturer(k, dev).controls(for: try capturer(k, dev).device(dev + "/video0"))
        #expect(all.find("menu")?.menu.map(\.index) == [1, 3, 4])
    }

    @Test func controlsAreSetWhileStreaming() async throws {
        let k = FakeKernel(), dev = fakeDev()
        k.push((0..<300).map { _ in goodFrame() })
        let c = capturer(k, dev)
        let d = try c.device(dev + "/video0")
        let frames = c.frames(bufferingNewest: 8)
        try await c.startCapture(device: d, targetSize: FrameSize(width: 640, height: 480))
        var it = frames.makeAsyncIterator()
        #expect(try await it.next() != nil)
        #expect(try c.setControl("brightness", to: "10", on: d).value == .integer(10))
        #expect(try c.control("brightness", of: d).value == .integer(10))
        #expect(try await it.next() != nil, "frames keep coming after the set")
        #expect(c.isRunning)
        try await c.stopCapture()
        #expect(k.openCount == 0)
    }

    @Test(arguments: [(Int64(0), CaptureDevice.Position.front), (1, .back), (2, .external), (7, .external)])
    func orientationSetsThePosition(_ raw: Int64, _ position: CaptureDevice.Position) throws {
        let k = FakeKernel(), dev = fakeDev()
        k.setControlValue(CameraControlID.cameraOrientation.rawValue, raw)
        let d = try capturer(k, dev).device(dev + "/video0")
        #expect(d.position == position)
    }

    @Test func withoutTheOrientationControlTheOverrideOrExternalIsUsed() throws {
        let k = FakeKernel(), dev = fakeDev()
        k.removeControl(CameraControlID.cameraOrientation.rawValue)
        #expect(try capturer(k, dev).device(dev + "/video0").position == .external)
        let o = capturer(k, dev, overrides: ["Fake Cam": SensorOverride(position: .front)])
        #expect(try o.device(dev + "/video0").position == .front)
        #expect(o.device(at: .front)?.path == dev + "/video0")
    }

    @Test func sensorRotationIsEachFramesRotation() async throws {
        for (ccw, rotation) in [(Int64(0), VideoRotation.rotation0), (90, .rotation270), (180, .rotation180), (270, .rotation90)] {
            let k = FakeKernel(), dev = fakeDev()
            k.setControlValue(CameraControlID.cameraSensorRotation.rawValue, ccw)
            k.push((0..<20).map { _ in goodFrame() })
            let c = capturer(k, dev)
            let frames = c.frames(bufferingNewest: 4)
            try await c.startCapture(device: try c.device(dev + "/video0"), targetSize: FrameSize(width: 640, height: 480))
            var it = frames.makeAsyncIterator()
            let f1 = try #require(try await it.next()), f2 = try #require(try await it.next())
            #expect(f1.rotation == rotation && f2.rotation == rotation, "sensor rotation \(ccw)° counter-clockwise")
            try await c.stopCapture()
        }
    }

    @Test func aRotationOverrideWinsOverTheDriver() async throws {
        let k = FakeKernel(), dev = fakeDev()
        k.setControlValue(CameraControlID.cameraSensorRotation.rawValue, 90)
        k.push((0..<20).map { _ in goodFrame() })
        let c = capturer(k, dev, overrides: [dev + "/video0": SensorOverride(rotation: .rotation180)])
        let frames = c.frames(bufferingNewest: 4)
        try await c.startCapture(device: try c.device(dev + "/video0"), targetSize: FrameSize(width: 640, height: 480))
        var it = frames.makeAsyncIterator()
        #expect(try #require(try await it.next()).rotation == .rotation180)
        try await c.stopCapture()
    }

    @Test func thePowerLineDefaultIsAppliedBeforeStreaming() async throws {
        let k = FakeKernel(), dev = fakeDev()
        k.push((0..<20).map { _ in goodFrame() })
        let c = capturer(
            k, dev,
            configuration: .init(
                alwaysDiscardsLateFrames: false, powerLineFrequency: .hz50, startControls: [CameraControlSetting("brightness", "99")]))
        try await c.startCapture(device: try c.device(dev + "/video0"), targetSize: FrameSize(width: 640, height: 480))
        let log = k.callLog
        let set = try #require(log.firstIndex(of: "S_EXT_CTRLS power_line_frequency=1"))
        let bright = try #require(log.firstIndex(of: "S_EXT_CTRLS brightness=99"))
        let on = try #require(log.firstIndex(of: "STREAMON"))
        #expect(set < bright && bright < on, "defaults first, then start controls, then STREAMON")
        #expect(k.controlValue(CameraControlID.powerLineFrequency.rawValue) == 1)
        try await c.stopCapture()
    }

    @Test func autoPowerLineIsUsedOnlyWhereTheCameraHasIt() async throws {
        let k = FakeKernel(), dev = fakeDev()
        k.push((0..<40).map { _ in goodFrame() })
        let c = capturer(k, dev, configuration: .init(alwaysDiscardsLateFrames: false, powerLineFrequency: .auto))
        let d = try c.device(dev + "/video0")
        try await c.startCapture(device: d, targetSize: FrameSize(width: 640, height: 480))
        #expect(!k.callLog.contains { $0.hasPrefix("S_EXT_CTRLS power_line_frequency") }, "no auto entry: left as it is")
        try await c.stopCapture()
        // A camera with an auto entry gets it.
        k.editControl(CameraControlID.powerLineFrequency.rawValue) {
            $0.max = 3
            $0.menu[3] = "Auto"
        }
        try await c.startCapture(device: d, targetSize: FrameSize(width: 640, height: 480))
        #expect(k.controlValue(CameraControlID.powerLineFrequency.rawValue) == 3)
        try await c.stopCapture()
        // A camera without the control still starts.
        k.removeControl(CameraControlID.powerLineFrequency.rawValue)
        try await c.startCapture(device: d, targetSize: FrameSize(width: 640, height: 480))
        #expect(c.isRunning)
        try await c.stopCapture()
    }

    @Test func aBadStartControlFailsTheStartAndLeavesNothingOpen() async throws {
        let k = FakeKernel(), dev = fakeDev()
        let c = capturer(k, dev, configuration: .init(startControls: [CameraControlSetting("brightness", "999")]))
        await #expect(throws: CaptureError.self) {
            try await c.startCapture(device: try c.device(dev + "/video0"), targetSize: FrameSize(width: 640, height: 480))
        }
        do { try await c.startCapture(device: try c.device(dev + "/video0"), targetSize: FrameSize(width: 640, height: 480)) } catch {
            #expect(error.code == .controlOutOfRange && error.message.contains("999"))
        }
        #expect(!c.isRunning && k.openCount == 0 && !k.callLog.contains("STREAMON"))
    }

    @Test func controlKeysFollowV4L2Ctl() {
        #expect(CameraControl.key(from: "White Balance, Automatic") == "white_balance_automatic")
        #expect(CameraControl.key(from: "Exposure Time, Absolute") == "exposure_time_absolute")
        #expect(CameraControl.key(from: "  --Power Line Frequency-- ") == "power_line_frequency")
        #expect(CameraControl.key(from: "U8 2x3x4x5 Array") == "u8_2x3x4x5_array")
        #expect(CameraControl.key(from: "") == "")
        #expect(CameraControlID.brightness.description == "0x00980900")
    }
}
