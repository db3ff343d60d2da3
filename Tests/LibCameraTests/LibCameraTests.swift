import CLibCameraShim
import FixtureCameras
import Foundation
@testable import LibCameraCapture
import Testing
import TestSupport
import VideoCapture

/// libcamera on a host without cameras (the VM's vimc stage, Scripts/vm-libcamera.sh, is the real camera): the
/// provider lists nothing at once, names a missing camera, maps formats and negotiates as for any camera.
@Suite struct LibCameraTests {
    static var hasMediaDevice: Bool { LibCameraProvider.mayHaveCameras }

    @Test func withoutACameraThereIsNoneAndNoWait() throws {
        let provider = LibCameraProvider()
        let started = Date()
        let devices = provider.devices()
        if !Self.hasMediaDevice {
            #expect(devices.isEmpty)
            #expect(Date().timeIntervalSince(started) < 0.5)
        }
        do {
            _ = try provider.device(for: "libcamera:nope")
            Issue.record("libcamera:nope was accepted")
        } catch {
            #expect(error.code == .unknownDevice)
            #expect(error.message.contains("libcamera has no camera nope"), "\(error.message)")
        }
        do {
            _ = try provider.device(for: "libcamera:")
            Issue.record("an empty libcamera: spec was accepted")
        } catch { #expect(error.code == .invalidArgument) }
        #expect(try provider.device(for: "fixture:vivid") == nil)
        #expect(try provider.device(for: "/dev/video0") == nil)
    }

    @Test func camcapListsNoLibcameraCameraQuicklyAndNamesAMissingOne() throws {
        let camcap = builtProduct("camcap")
        let started = Date()
        let devices = try runTool(camcap, ["devices"])
        #expect(devices.code == 0, "\(devices.err)")
        if !Self.hasMediaDevice {
            #expect(!devices.out.contains("libcamera:"), "\(devices.out)")
            #expect(devices.err.isEmpty, "libcamera printed: \(devices.err)")
            #expect(Date().timeIntervalSince(started) < 5)
        }
        let r = try runTool(camcap, ["record", "-d", "libcamera:nope", "--frames", "3", "-o", "/dev/null"])
        #expect(r.code != 0)
        #expect(r.err.contains("libcamera has no camera nope"), "\(r.err)")
        let c = try runTool(camcap, ["controls", "-d", "libcamera:nope"])
        #expect(c.code != 0)
        #expect(c.err.contains("libcamera has no camera nope"), "\(c.err)")
    }

    @Test func drmFourccsMapToV4L2ByTheirBytesInMemory() {
        let drm = LibCameraFormats.code
        // BGR888 is R,G,B in memory (V4L2 RGB3), RGB888 is B,G,R (BGR3): checked on vimc's colour bars in the VM.
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("BG24")) == .rgb24)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("RG24")) == .bgr24)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("XR24")) == .xbgr32)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("XB24")) == .rgbx32)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("YUYV")) == .yuyv)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("NV12")) == .nv12)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("YU12")) == .i420)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("YU16")) == .yuv422p)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("MJPG")) == .mjpeg)
        // Bayer and packed CSI-2 layouts (a modifier) have no layout here.
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("RGGB")) == nil)
        #expect(LibCameraFormats.pixelFormat(drmFourcc: drm("YUYV"), modifier: 1) == nil)
        for pf in [PixelFormat.rgb24, .bgr24, .yuyv, .nv12, .i420, .mjpeg, .xbgr32] {
            #expect(LibCameraFormats.drmFourcc(of: pf).flatMap { LibCameraFormats.pixelFormat(drmFourcc: $0) } == pf)
        }
        #expect(LibCameraFormats.drmFourcc(of: .h264) == nil)
    }

    @Test func anAdjustedSizeIsCroppedOnlyWhenItCoversTheRequest() {
        let r = FrameSize(width: 640, height: 480)
        #expect(LibCameraProvider.Configuration().sizeAdjustment == .accept)
        // vimc under 0.0.3 makes 640x480 636x480: too narrow to crop from.
        #expect(LibCameraFormats.cropOrigin(requested: r, adjusted: FrameSize(width: 636, height: 480)) == nil)
        #expect(LibCameraFormats.cropOrigin(requested: r, adjusted: r).map { [$0.x, $0.y] } == [0, 0])
        #expect(LibCameraFormats.cropOrigin(requested: r, adjusted: FrameSize(width: 642, height: 480)).map { [$0.x, $0.y] } == [0, 0])
        // Centred, on even pixels (subsampled chroma stays aligned).
        #expect(LibCameraFormats.cropOrigin(requested: r, adjusted: FrameSize(width: 648, height: 490)).map { [$0.x, $0.y] } == [4, 4])
        // The sizes asked for in turn grow by what libcamera took off (at least 2 pixels).
        let next = LibCameraFormats.coveringCandidates(requested: r, firstAdjusted: FrameSize(width: 636, height: 480))
        #expect(next.prefix(2) == [FrameSize(width: 644, height: 480), FrameSize(width: 648, height: 480)])
        #expect(
            LibCameraFormats.coveringCandidates(requested: r, firstAdjusted: FrameSize(width: 639, height: 479)).first
                == FrameSize(width: 642, height: 482))
        #expect(LibCameraFormats.coveringCandidates(requested: r, firstAdjusted: r).isEmpty)
    }

    /// A stream format as the shim gives it: the listed sizes, or a range.
    static func format(_ drm: String, sizes: [(Int, Int)]) -> [CaptureFormat] {
        var widths = sizes.map { UInt32($0.0) }, heights = sizes.map { UInt32($0.1) }
        return widths.withUnsafeMutableBufferPointer { w in
            heights.withUnsafeMutableBufferPointer { h in
                var f = lcs_format()
                f.drm_fourcc = LibCameraFormats.code(drm)
                (f.widths, f.heights, f.n_sizes) = (w.baseAddress, h.baseAddress, sizes.count)
                (f.min_width, f.min_height, f.max_width, f.max_height, f.step_width, f.step_height) = (16, 16, 4096, 2160, 1, 1)
                return LibCameraFormats.captureFormats(f, intervals: LibCameraFormats.intervals(minUs: 40000, maxUs: 1_000_000))
            }
        }
    }

    /// Negotiation is provider-neutral: libcamera's stream formats (vimc's: BGR888 and RGB888, a list of sizes,
    /// FrameDurationLimits 40 ms...1 s) and a fixture camera offering the same modes get the same answers.
    @Test func selectAnswersAsForAFixtureWithTheSameModes() throws {
        let sizes = [(320, 240), (640, 360), (640, 480), (1280, 720), (1920, 1080)]
        let lc = Self.format("BG24", sizes: sizes) + Self.format("RG24", sizes: sizes)
        #expect(lc.count == 10)
        #expect(lc.first?.pixelFormat == .rgb24 && lc.last?.pixelFormat == .bgr24)
        let modes = sizes.map { #"{"width": \#($0.0), "height": \#($0.1), "fpsRange": {"min": 1, "max": 25}}"# }.joined(separator: ", ")
        let json =
            #"{"name": "vimc's modes", "formats": ["#
            + ["RGB3", "BGR3"].map { #"{"pixelFormat": "\#($0)", "sizes": [\#(modes)]}"# }.joined(separator: ", ") + "]}"
        let fixture = try CameraDescription.parse(json, file: "vimc.json").formats
        #expect(fixture.count == lc.count)
        for (target, fps, formats) in [
            (FrameSize(width: 1280, height: 720), Fraction(30), [PixelFormat]()), (FrameSize(width: 640, height: 480), Fraction(15), []),
            (FrameSize(width: 300, height: 200), Fraction(30), []), (FrameSize(width: 800, height: 600), Fraction(25), [.bgr24]),
            (FrameSize(width: 4000, height: 3000), Fraction(60), [.rgb24, .bgr24]),
        ] {
            let a = FormatSelector.select(from: lc, target: target, fpsLimit: fps, pixelFormats: formats)
            let b = FormatSelector.select(from: fixture, target: target, fpsLimit: fps, pixelFormats: formats)
            #expect(
                a != nil && a?.size == b?.size && a?.fps == b?.fps && a?.format.pixelFormat == b?.format.pixelFormat,
                "\(target): \(String(describing: a)) vs \(String(describing: b))")
        }
    }
}

/// The copy out of libcamera's buffers: by its stride (rows padded), planes in one block or one each, and the crop
/// window of `SizeAdjustment.crop`.
@Suite struct LibCameraFrameCopyTests {
    final class Frames: @unchecked Sendable {
        var frames: [VideoFrame] = []
        var drops: [FrameDropReason] = []
        var sink: FrameSink { FrameSink(frame: { self.frames.append($0) }, dropped: { r, _ in self.drops.append(r) }, failed: { _ in }) }
    }

    /// Hands `planes` (each its bytes) to a receiver as one completed request; the frame it made.
    static func copy(
        _ pf: PixelFormat, source: FrameSize, stride: Int, out: FrameSize, planes: [[UInt8]], sequence: UInt64 = 7
    ) throws -> (VideoFrame?, Frames) {
        let got = Frames()
        let origin = try #require(LibCameraFormats.cropOrigin(requested: out, adjusted: source))
        let receiver = LibCameraFrameReceiver(
            device: "libcamera:test", sink: got.sink, pixelFormat: pf, size: out,
            planes: try #require(pf.planeShapes(width: out.width, height: out.height)), sourceSize: source, sourceStride: stride,
            origin: origin, buffers: 2)
        var storage = planes
        storage.withUnsafeMutableBufferPointer { all in
            var f = lcs_frame()
            f.n_planes = UInt32(all.count)
            f.sequence = sequence
            withUnsafeMutableBytes(of: &f.planes) { raw in
                for i in 0..<all.count {
                    let p = lcs_plane(
                        data: all[i].withUnsafeBufferPointer { $0.baseAddress }, length: UInt32(all[i].count), bytes_used: UInt32(all[i].count))
                    raw.storeBytes(of: p, toByteOffset: i * MemoryLayout<lcs_plane>.stride, as: lcs_plane.self)
                }
            }
            receiver.receive(f, stopped: false)
        }
        return (got.frames.first, got)
    }

    @Test func paddedRowsAreCopiedByTheirStride() throws {
        // RGB3 6x3, rows 32 bytes apart: byte (y, x) = y * 32 + x; padding 0xEE.
        let (w, h, s) = (6, 3, 32)
        let plane: [UInt8] = (0..<h * s).map { i in i % s < w * 3 ? UInt8(i & 0xff) : 0xEE }
        let (frame, got) = try Self.copy(
            .rgb24, source: FrameSize(width: w, height: h), stride: s, out: FrameSize(width: w, height: h), planes: [plane])
        let f = try #require(frame, "\(got.drops)")
        #expect(f.buffer.stride == w * 3 && f.sequence == 7)
        let bytes = Array(f.buffer.bytes)
        var want: [UInt8] = []
        for y in 0..<h { for x in 0..<w * 3 { want.append(UInt8(y * s + x)) } }
        #expect(bytes == want)
    }

    @Test func aCroppedFrameIsTheCentredWindow() throws {
        // RGB3 10x6 cropped to 6x2: origin (2, 2).
        let (w, h, s) = (10, 6, 30)
        let plane: [UInt8] = (0..<h * s).map { UInt8($0 & 0xff) }
        let (frame, _) = try Self.copy(
            .rgb24, source: FrameSize(width: w, height: h), stride: s, out: FrameSize(width: 6, height: 2), planes: [plane])
        let f = try #require(frame)
        #expect(f.buffer.width == 6 && f.buffer.height == 2 && f.buffer.stride == 18)
        var want: [UInt8] = []
        for y in 2..<4 { for x in 0..<18 { want.append(UInt8((y * s + 2 * 3 + x) & 0xff)) } }
        #expect(Array(f.buffer.bytes) == want)
    }

    @Test func nv12InTwoPaddedPlanesBecomesOneBuffer() throws {
        // NV12 8x4, stride 16: luma 4 rows, chroma 2 rows of 8 bytes, each plane its own block.
        let (w, h, s) = (8, 4, 16)
        let luma: [UInt8] = (0..<h * s).map { UInt8($0) }
        let chroma: [UInt8] = (0..<h / 2 * s).map { UInt8(200 + $0 % 50) }
        let (frame, _) = try Self.copy(
            .nv12, source: FrameSize(width: w, height: h), stride: s, out: FrameSize(width: w, height: h), planes: [luma, chroma])
        let f = try #require(frame)
        var want: [UInt8] = []
        for y in 0..<h { for x in 0..<w { want.append(UInt8(y * s + x)) } }
        for y in 0..<h / 2 { for x in 0..<w { want.append(UInt8(200 + (y * s + x) % 50)) } }
        #expect(Array(f.buffer.bytes) == want)
    }

    @Test func aShortBufferIsDroppedNotRead() throws {
        let (frame, got) = try Self.copy(
            .rgb24, source: FrameSize(width: 6, height: 3), stride: 18, out: FrameSize(width: 6, height: 3),
            planes: [[UInt8](repeating: 1, count: 40)])
        #expect(frame == nil)
        #expect(got.drops == [.shortBuffer])
    }
}

/// camcap as this build made it (in .build/debug, beside the test bundle).
private func builtProduct(_ name: String) -> String {
    let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for candidate in [dir, dir.deletingLastPathComponent()] {
        let p = candidate.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: p) { return p }
    }
    return repositoryRoot + "/.build/debug/" + name
}
