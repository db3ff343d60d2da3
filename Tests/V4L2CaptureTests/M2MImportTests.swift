import CV4L2
import Foundation
import H264
import Testing
import VideoCapture
@testable import V4L2Capture

/// Several fake nodes behind one kernel, routed by the node's name (`video4` → its kernel): what discovery scans.
final class RoutedKernel: V4L2Kernel, @unchecked Sendable {
    // @unchecked: `nodes` is set before use and only read afterwards.
    let nodes: [(name: String, kernel: any V4L2Kernel)]
    init(_ nodes: [(String, any V4L2Kernel)]) { self.nodes = nodes.map { (name: $0.0, kernel: $0.1) } }
    private func route(_ fd: Int32) -> (any V4L2Kernel, Int32) { (nodes[Int(fd) / 1000].kernel, fd % 1000) }
    func open(_ path: String) -> (fd: Int32, errno: Int32) {
        guard let i = nodes.firstIndex(where: { path.hasSuffix("/" + $0.name) }) else { return (-1, ENOENT) }
        let (fd, e) = nodes[i].kernel.open(path)
        return fd < 0 ? (fd, e) : (Int32(i * 1000) + fd, 0)
    }
    func close(_ fd: Int32) { route(fd).0.close(route(fd).1) }
    func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
        route(fd).0.mmap(route(fd).1, length: length, offset: offset)
    }
    func munmap(_ pointer: UnsafeMutableRawPointer, length: Int) {}
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 { route(fd).0.poll(route(fd).1, timeoutMs: timeoutMs) }
    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 { route(fd).0.ioctl(route(fd).1, request, arg) }
}

@Suite("M2M encoders: discovery and DMA-BUF import (fake vicodec)")
struct M2MImportTests {
    /// A folder with `videoN` entries, as /dev has (discovery lists the folder, the kernel answers for each node).
    static func devFolder(_ names: [String]) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("m2m-dev-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for n in names { FileManager.default.createFile(atPath: dir + "/" + n, contents: nil) }
        return dir
    }

    @Test("discovery: a camera is no encoder; FWHT and H.264 encoders are listed with what they take and give; auto takes H.264")
    func discovery() throws {
        let camera = FakeM2MKernel(multiPlanar: false)
        camera.notM2M = true
        let fwht = FakeM2MKernel(multiPlanar: false)
        let h264 = FakeM2MKernel(multiPlanar: true)
        h264.coded = .h264
        let dir = try Self.devFolder(["video0", "video4", "video11"])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let d = M2MEncoderDiscovery(kernel: RoutedKernel([("video0", camera), ("video4", fwht), ("video11", h264)]), devDirectory: dir)
        let all = d.encoders()
        #expect(all.map(\.path) == [dir + "/video4", dir + "/video11"])
        #expect(all[0].rawFormats == [.i420, .nv12])
        #expect(all[0].codedFormats == [V4L2M2MEncoder.fwht])
        #expect(!all[0].encodesH264 && !all[0].isMultiPlanar)
        #expect(
            all[0].output[0].sizes
                == .stepwise(min: FrameSize(width: 640, height: 360), max: FrameSize(width: 4096, height: 2160), step: FrameSize(width: 8, height: 8))
        )
        #expect(all[1].encodesH264 && all[1].isMultiPlanar && all[1].codedFormat == .h264)
        #expect(all[0].summary == "\(dir)/video4 (fake-enc, fake-m2m): takes YU12, NV12; gives FWHT")
        #expect(d.firstH264()?.path == dir + "/video11")
        #expect(d.preferred()?.path == dir + "/video11")
        let e = #expect(throws: CaptureError.self) { try d.probe(dir + "/video0") }
        #expect(e?.code == .notACaptureDevice)
        #expect(e?.message.hasPrefix("\(dir)/video0 (fake-enc) is not a memory-to-memory device") == true)
        // Only FWHT: auto finds nothing (OpenH264 then), v4l2m2m takes the FWHT one.
        let onlyFWHT = M2MEncoderDiscovery(kernel: RoutedKernel([("video0", camera), ("video4", fwht)]), devDirectory: dir)
        #expect(onlyFWHT.firstH264() == nil)
        #expect(onlyFWHT.preferred()?.path == dir + "/video4")
        // No node at all: nothing, no error.
        let empty = try Self.devFolder([])
        defer { try? FileManager.default.removeItem(atPath: empty) }
        #expect(M2MEncoderDiscovery(kernel: fwht, devDirectory: empty).encoders().isEmpty)
    }

    /// A camera frame whose buffer is exported as `fd` (one plane of `length` bytes), in `format`.
    static func frame(_ format: PixelFormat, fd: Int32, ts: Int64, w: Int = 640, h: Int = 360, stride: Int? = nil, length: Int? = nil) -> VideoFrame {
        let size = w * h * 3 / 2
        var b = VideoFrameBuffer(
            pixelFormat: format, width: w, height: h, stride: stride ?? w, bytesUsed: size, storage: FrameStorage(capacity: length ?? size))
        b.dmaBuf = DMABuf(planes: [DMABuf.Plane(fd: fd, length: length ?? size)])
        return VideoFrame(buffer: b, timestampNs: ts, sequence: UInt64(ts))
    }

    @Test("zero copy: each frame's DMA-BUF goes to OUTPUT as it is, held until the device gives it back", arguments: [false, true])
    func importsDMABuf(multiPlanar: Bool) throws {
        let k = FakeM2MKernel(multiPlanar: multiPlanar)
        let e = try V4L2M2MEncoder(
            path: "/dev/video9", codedFormat: V4L2M2MEncoder.fwht, settings: M2MEncoderTests.settings(), control: EncoderControl(), buffers: 4,
            kernel: k, importing: .nv12)
        #expect(k.calls.contains("S_FMT OUTPUT NV12"))
        #expect(k.calls.contains("REQBUFS OUTPUT 8 DMABUF"))
        #expect(k.outputMemory == V4L2_MEMORY_DMABUF.rawValue)
        let picture = I420Buffer(width: 640, height: 360)
        var out = EncodedFrame()
        for (n, fd) in [Int32(41), 42, 43, 41, 42].enumerated() {
            try e.encode(picture, frame: Self.frame(.nv12, fd: fd, ts: Int64(n) * 33_333_000), into: &out)
            #expect(out.timestampNs == Int64(n) * 33_333_000)
            #expect(out.data[4] == UInt8(fd), "the coded frame is made from the imported buffer")
            #expect(k.outputsHeld == 0, "the camera's buffer is back before encode returns")
        }
        #expect(k.imported.map(\.fd) == [41, 42, 43, 41, 42])
        #expect(k.imported.allSatisfy { $0.used == 640 * 360 * 3 / 2 && $0.length == 640 * 360 * 3 / 2 })
        #expect(e.importedFrames == 5 && e.copiedFrames == 0)
        #expect(e.summaryDescription == "V4L2 M2M /dev/video9 (FWHT), zero-copy (DMA-BUF): 0 copies per frame (5 imported)")
        // The drain at the end: nothing held, the LAST buffer ends it.
        #expect(try e.drain { _ in } == 0)
        #expect(k.calls.contains("ENC_CMD_STOP"))
        e.close()
        #expect(k.calls.suffix(2) == ["STREAMOFF CAPTURE", "REQBUFS CAPTURE 0"])
    }

    @Test("an NV12 camera: the converted picture's frame carries the camera's buffer, which is what is imported")
    func importsTheCapturedBuffer() throws {
        let k = FakeM2MKernel(multiPlanar: false)
        let e = try V4L2M2MEncoder(
            path: "/dev/video9", codedFormat: V4L2M2MEncoder.fwht, settings: M2MEncoderTests.settings(), control: EncoderControl(), buffers: 4,
            kernel: k, importing: .nv12)
        let picture = I420Buffer(width: 640, height: 360)
        var out = EncodedFrame()
        for (n, fd) in [Int32(51), 52, 51].enumerated() {
            var frame = VideoFrame(buffer: picture.buffer, timestampNs: Int64(n) * 33_333_000, sequence: UInt64(n)) // the I420 picture
            frame.capturedBuffer = Self.frame(.nv12, fd: fd, ts: frame.timestampNs).buffer
            #expect(V4L2M2MEncoder.importedBuffer(of: frame).pixelFormat == .nv12)
            try e.encode(picture, frame: frame, into: &out)
            #expect(out.data[4] == UInt8(fd) && out.timestampNs == frame.timestampNs)
        }
        #expect(k.imported.map(\.fd) == [51, 52, 51])
        #expect(e.importedFrames == 3 && e.copiedFrames == 0)
        // Without the camera's buffer beside it, the picture alone cannot be imported, and the refusal says why.
        let bare = VideoFrame(buffer: picture.buffer, timestampNs: 1, sequence: 9)
        let error = #expect(throws: ImportRefusedError.self) { try e.encode(picture, frame: bare, into: &out) }
        #expect(error?.reason.contains("the frame carries no DMA-BUF") == true)
        e.close()
    }

    @Test("a camera buffer refused at QBUF switches the watched encoder to copying: no frame lost, not a failure")
    func refusedImportSwitchesToCopying() throws {
        let importing = FakeM2MKernel(multiPlanar: false), copying = FakeM2MKernel(multiPlanar: false)
        importing.refusesImportsAfter = 3
        let settings = M2MEncoderTests.settings()
        let make = { (k: FakeM2MKernel, format: PixelFormat?) -> ResilientEncoder.Factory in
            { s, c in
                try V4L2M2MEncoder(
                    path: "/dev/video9", codedFormat: V4L2M2MEncoder.fwht, settings: s, control: c, buffers: 4, kernel: k, importing: format)
            }
        }
        let control = EncoderControl()
        let e = try ResilientEncoder(
            settings: settings, control: control, configuration: .init(name: "v4l2m2m /dev/video9"), primary: make(importing, .i420),
            copying: make(copying, nil))
        let picture = I420Buffer(width: 640, height: 360)
        var out = EncodedFrame()
        var times: [Int64] = []
        for n in 0..<6 {
            let ts = Int64(n) * 33_333_000
            try e.encode(picture, frame: Self.frame(.i420, fd: Int32(60 + n), ts: ts), into: &out)
            if !out.isSkipped { times.append(out.timestampNs) }
        }
        #expect(times == (0..<6).map { Int64($0) * 33_333_000 }, "every frame encoded once, in order")
        #expect(importing.imported.count == 3, "three imported before the refusal")
        #expect(e.failures == 0 && !e.fellBack)
        #expect(e.events.count == 1)
        if case .copying(let reason, _) = e.events.first {
            #expect(reason.contains("VIDIOC_QBUF of DMA-BUF fd 63"), "\(reason)")
        } else {
            Issue.record("no switch to copying: \(e.events)")
        }
        let stats = e.statistics
        #expect(stats.importedFrames == 3 && stats.copiedFrames == 3 && stats.frames == 6, "\(stats)")
        #expect(stats.inputPath == "copied")
        #expect(e.note?.hasPrefix("v4l2m2m /dev/video9 refused the camera's buffers (") == true, "\(e.note ?? "")")
        #expect(e.note?.hasSuffix("; pictures copied in since") == true)
        #expect(importing.calls.suffix(2) == ["STREAMOFF CAPTURE", "REQBUFS CAPTURE 0"], "the importing encoder was closed first")
        e.close()
    }

    @Test("a frame that cannot be imported is refused naming why; the copy path counts one copy per frame")
    func refusalsAndCopies() throws {
        let k = FakeM2MKernel(multiPlanar: false)
        let e = try V4L2M2MEncoder(
            path: "/dev/video9", codedFormat: V4L2M2MEncoder.fwht, settings: M2MEncoderTests.settings(), control: EncoderControl(), buffers: 4,
            kernel: k, importing: .i420)
        let picture = I420Buffer(width: 640, height: 360)
        var out = EncodedFrame()
        let cases: [(VideoFrame, String)] = [
            (Self.frame(.nv12, fd: 5, ts: 1), "the frame is NV12, the encoder takes YU12"),
            (Self.frame(.i420, fd: 5, ts: 1, stride: 704), "the frame's lines are 704 bytes, the encoder's 640"),
            (Self.frame(.i420, fd: 5, ts: 1, w: 648), "the frame is 648x360, the encoder 640x360"),
            (
                VideoFrame(
                    buffer: VideoFrameBuffer(
                        pixelFormat: .i420, width: 640, height: 360, stride: 640, bytesUsed: 345_600, storage: FrameStorage(capacity: 345_600)),
                    timestampNs: 1, sequence: 1),
                "the frame carries no DMA-BUF"
            ),
        ] // each an ImportRefusedError: nothing reached the device, a copying encoder would take the frame
        for (frame, why) in cases {
            let error = #expect(throws: ImportRefusedError.self) { try e.encode(picture, frame: frame, into: &out) }
            #expect(error?.reason.contains(why) == true, "\(error?.reason ?? "")")
        }
        #expect(k.imported.isEmpty)
        #expect(throws: CaptureError.self) {
            try V4L2M2MEncoder(
                path: "/dev/video9", codedFormat: V4L2M2MEncoder.fwht, settings: M2MEncoderTests.settings(), control: EncoderControl(), buffers: 4,
                kernel: FakeM2MKernel(multiPlanar: false), importing: .yuyv)
        }

        let copying = try M2MEncoderTests.make(FakeM2MKernel(multiPlanar: false))
        for n in 0..<3 { try copying.encode(M2MEncoderTests.picture(luma: UInt8(n)), frame: Self.frame(.i420, fd: 7, ts: Int64(n)), into: &out) }
        #expect(copying.copiedFrames == 3 && copying.importedFrames == 0)
        #expect(copying.copyDescription == "copied: 1 copy per frame (3 copied)")
    }

    @Test("H.264 from the device: its NAL units are located, an IDR makes a key frame")
    func h264NALUnits() throws {
        var out = EncodedFrame()
        out.data = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3, 0, 0, 1, 0x65, 9, 9]
        let h = FakeM2MKernel(multiPlanar: false)
        h.coded = .h264
        let enc = try V4L2M2MEncoder(
            path: "/dev/video9", codedFormat: .h264, settings: M2MEncoderTests.settings(), control: EncoderControl(), buffers: 4, kernel: h)
        enc.describeH264(&out)
        #expect(out.nalUnits.map(\.type) == [.sps, .pps, .idr])
        #expect(out.isKeyFrame)
    }
}
