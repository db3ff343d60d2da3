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
            #expect(Date().timeIntervalSince(started) < 2, "no wait without a media device")
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
            #expect(Date().timeIntervalSince(started) < 10, "camcap devices without a camera")
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

/// Frames read in place: a frame is libcamera's buffer itself (its window), its request queued again only once the
/// frame is let go, two requests always left with libcamera, and the mappings released when the last frame goes.
@Suite struct LibCameraZeroCopyTests {
    final class Mappings: @unchecked Sendable {
        var retained = 0, released = 0
        func lend() -> (@Sendable () -> Void)? {
            retained += 1
            return { self.released += 1 }
        }
    }

    /// A receiver over `slots` requests lending frames; the planes given to it by `deliver`.
    final class Rig {
        let got = LibCameraFrameCopyTests.Frames()
        let mappings = Mappings()
        var receiver: LibCameraFrameReceiver?
        init(_ pf: PixelFormat, source: FrameSize, stride: Int, out: FrameSize, slots: Int) throws {
            let origin = try #require(LibCameraFormats.cropOrigin(requested: out, adjusted: source))
            let m = mappings
            receiver = LibCameraFrameReceiver(
                device: "libcamera:test", sink: got.sink, pixelFormat: pf, size: out,
                planes: try #require(pf.planeShapes(width: out.width, height: out.height)), sourceSize: source, sourceStride: stride,
                origin: origin, buffers: 2, slots: slots, lend: { m.lend() })
        }
        /// Request `slot` completed with `planes` (pointers into memory the caller keeps alive); true when lent.
        func deliver(slot: UInt32, _ planes: [UnsafeMutableRawBufferPointer], sequence: UInt64) -> Bool {
            var f = lcs_frame()
            f.n_planes = UInt32(planes.count)
            f.sequence = sequence
            f.slot = slot
            withUnsafeMutableBytes(of: &f.planes) { raw in
                for (i, p) in planes.enumerated() {
                    let x = lcs_plane(
                        data: p.baseAddress?.assumingMemoryBound(to: UInt8.self), length: UInt32(p.count), bytes_used: UInt32(p.count))
                    raw.storeBytes(of: x, toByteOffset: i * MemoryLayout<lcs_plane>.stride, as: lcs_plane.self)
                }
            }
            return receiver!.receive(f, stopped: false)
        }
        func returned() -> [UInt32] {
            var slots: [UInt32] = []
            receiver!.returned { slots.append($0) }
            return slots
        }
    }

    @Test func aFrameIsLibcamerasBufferUntilItIsLetGo() throws {
        // RGB3 6x3, rows 32 bytes apart.
        let (w, h, s) = (6, 3, 32)
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: h * s, alignment: 64)
        defer { memory.deallocate() }
        for i in 0..<memory.count { memory[i] = UInt8(i & 0xff) }
        let rig = try Rig(.rgb24, source: FrameSize(width: w, height: h), stride: s, out: FrameSize(width: w, height: h), slots: 4)
        #expect(rig.deliver(slot: 1, [memory], sequence: 3))
        do {
            let f = try #require(rig.got.frames.first)
            #expect(f.buffer.storage.isBorrowed)
            #expect(f.buffer.baseAddress == UnsafeRawPointer(memory.baseAddress!), "read in place, not copied")
            #expect(f.buffer.stride == s && f.buffer.width == w && f.buffer.height == h && f.sequence == 3)
        }
        // Held by a consumer: the request stays out; let go: it goes back, once.
        #expect(rig.returned() == [])
        rig.got.frames.removeAll()
        #expect(rig.returned() == [1])
        #expect(rig.returned() == [])
        // The mapping is kept while the receiver lives (the slot's storage is kept), released when it goes.
        #expect(rig.mappings.retained == 1 && rig.mappings.released == 0)
        rig.receiver = nil
        #expect(rig.mappings.released == 1)
    }

    @Test func twoRequestsStayWithLibcameraAndTheRestIsCopied() throws {
        let (w, h) = (4, 2)
        let a = UnsafeMutableRawBufferPointer.allocate(byteCount: w * 3 * h, alignment: 64)
        let b = UnsafeMutableRawBufferPointer.allocate(byteCount: w * 3 * h, alignment: 64)
        defer {
            a.deallocate()
            b.deallocate()
        }
        for i in 0..<a.count { (a[i], b[i]) = (1, 2) }
        let rig = try Rig(.rgb24, source: FrameSize(width: w, height: h), stride: w * 3, out: FrameSize(width: w, height: h), slots: 3)
        #expect(rig.deliver(slot: 0, [a], sequence: 1), "lent: two of three requests stay queued")
        #expect(!rig.deliver(slot: 1, [b], sequence: 2), "copied: lending it would leave one request with libcamera")
        #expect(rig.got.frames.count == 2)
        let copied = rig.got.frames[1]
        #expect(!copied.buffer.storage.isBorrowed && Array(copied.buffer.bytes) == [UInt8](repeating: 2, count: w * 3 * h))
        rig.got.frames.removeAll()
        #expect(rig.returned() == [0])
    }

    @Test func aCroppedWindowIsReadInPlaceByTheStride() throws {
        // RGB3 10x6, stride 30, cropped to 6x2: origin (2, 2).
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: 6 * 30, alignment: 64)
        defer { memory.deallocate() }
        for i in 0..<memory.count { memory[i] = UInt8(i & 0xff) }
        let rig = try Rig(.rgb24, source: FrameSize(width: 10, height: 6), stride: 30, out: FrameSize(width: 6, height: 2), slots: 4)
        #expect(rig.deliver(slot: 0, [memory], sequence: 1))
        let f = try #require(rig.got.frames.first)
        #expect(f.buffer.baseAddress == UnsafeRawPointer(memory.baseAddress! + 2 * 30 + 2 * 3))
        #expect(f.buffer.stride == 30 && f.buffer.width == 6 && f.buffer.height == 2)
        var rows: [UInt8] = []
        for y in 0..<2 { rows += UnsafeRawBufferPointer(start: f.buffer.baseAddress + y * 30, count: 18) }
        var want: [UInt8] = []
        for y in 2..<4 { for x in 0..<18 { want.append(UInt8((y * 30 + 6 + x) & 0xff)) } }
        #expect(rows == want)
    }

    @Test func nv12InTwoBlocksIsReadWhereEachPlaneIs() throws {
        // NV12 8x4, stride 16, each plane its own block: the frame's planes point into both.
        let (w, h, s) = (8, 4, 16)
        let luma = UnsafeMutableRawBufferPointer.allocate(byteCount: h * s, alignment: 64)
        let chroma = UnsafeMutableRawBufferPointer.allocate(byteCount: h / 2 * s, alignment: 64)
        defer {
            luma.deallocate()
            chroma.deallocate()
        }
        let rig = try Rig(.nv12, source: FrameSize(width: w, height: h), stride: s, out: FrameSize(width: w, height: h), slots: 4)
        #expect(rig.deliver(slot: 2, [luma, chroma], sequence: 1))
        let f = try #require(rig.got.frames.first)
        let planes = f.buffer.planes
        #expect(f.buffer.baseAddress == UnsafeRawPointer(luma.baseAddress!))
        #expect(f.buffer.baseAddress + planes.offsets.1 == UnsafeRawPointer(chroma.baseAddress!))
        #expect(planes.strides.0 == s && planes.strides.1 == s)
    }

    @Test func aBufferShorterThanItsRowsIsCopiedOrDroppedNeverLent() throws {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: 40, alignment: 64)
        defer { memory.deallocate() }
        let rig = try Rig(.rgb24, source: FrameSize(width: 6, height: 3), stride: 18, out: FrameSize(width: 6, height: 3), slots: 4)
        #expect(!rig.deliver(slot: 0, [memory], sequence: 1))
        #expect(rig.got.frames.isEmpty && rig.got.drops == [.shortBuffer])
        #expect(rig.mappings.retained == 0)
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
