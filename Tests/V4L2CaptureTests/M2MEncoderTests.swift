import CV4L2
import Foundation
import H264
import Testing
import VideoCapture
@testable import V4L2Capture

/// A scripted memory-to-memory encoder after vicodec: a YU12 OUTPUT queue, an FWHT CAPTURE queue, sizes in steps
/// of 8, a GOP-size control (1...16), no S_PARM, and the drain (`V4L2_ENC_CMD_STOP`) ending with LAST either on an
/// extra empty buffer or on the last frame with data. Each "coded" frame is `FAKE`, the picture's first luma byte
/// and a frame counter (16 bytes); work is done at QBUF time, so nothing waits.
final class FakeM2MKernel: V4L2Kernel, @unchecked Sendable {
    // @unchecked: every member is guarded by `lock`.
    enum Last { case emptyBuffer, onLastData }
    private let lock = NSLock()
    let multiPlanar: Bool
    var last: Last = .emptyBuffer
    /// Pictures the device keeps before it gives their coded frames (a look-ahead); the drain flushes them.
    var latency = 0
    /// Never give a coded frame (a stalled encoder).
    var stalled = false
    /// Answer QUERYCAP as a capture-only camera.
    var notM2M = false
    var hasGOPControl = true
    /// Refuse the crop selection (a padded size cannot be cropped back).
    var refusesCrop = false
    /// The coded format of the CAPTURE queue (vicodec's FWHT; H.264 for a board's encoder).
    var coded = V4L2M2MEncoder.fwht
    /// The raw formats the OUTPUT queue takes, in ENUM_FMT order (anything else is replaced by the first).
    var rawFormats: [PixelFormat] = [.i420, .nv12]
    /// DMA-BUF imports taken before QBUF refuses them with EINVAL (memory the device cannot use); nil: never.
    var refusesImportsAfter: Int?
    /// DMA-BUF imports queued to OUTPUT: each QBUF's descriptor, bytes used and length, in order.
    private(set) var imported: [(fd: Int32, used: Int, length: Int)] = []
    /// The OUTPUT queue's memory (REQBUFS): MMAP, or DMABUF when camera buffers are imported.
    private(set) var outputMemory = CV4L2_MEMORY_MMAP
    /// OUTPUT slots the device holds now (queued, not yet dequeued).
    var outputsHeld: Int { lock.withLock { pendingOut.count + doneOut.count } }
    private(set) var gop: Int64 = 10
    private(set) var calls: [String] = []
    private var formats: [UInt32: (w: Int, h: Int, pf: UInt32)] = [:]
    private var buffers: [UInt32: [UnsafeMutableRawPointer]] = [:]
    private var lengths: [UInt32: Int] = [:]
    private var pendingOut: [(index: Int, ts: timeval, first: UInt8?)] = []
    private var capQueue: [Int] = []
    private var doneOut: [Int] = []
    private var doneCap: [(index: Int, used: Int, ts: timeval, flags: UInt32)] = []
    private var stopping = false, lastSent = false, lastTaken = false
    /// Events subscribed to, and the EOS event queued when LAST is sent (vicodec's order).
    var subscribed: Set<UInt32> = []
    var pendingEOS = false
    private var produced = 0

    init(multiPlanar: Bool) { self.multiPlanar = multiPlanar }
    deinit { buffers.values.joined().forEach { $0.deallocate() } }
    func configure(_ body: (FakeM2MKernel) -> Void) { lock.withLock { body(self) } }

    private var outType: UInt32 { multiPlanar ? CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE : CV4L2_BUF_TYPE_VIDEO_OUTPUT }
    private var capType: UInt32 { multiPlanar ? CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : CV4L2_BUF_TYPE_VIDEO_CAPTURE }
    private func isOut(_ t: UInt32) -> Bool { t == outType }
    private func sizeImage(_ t: UInt32) -> Int {
        let f = formats[t] ?? (640, 360, 0)
        return f.w * f.h * 3 / 2 + (isOut(t) ? 0 : 64)
    }

    func open(_ path: String) -> (fd: Int32, errno: Int32) { (20, 0) }
    func close(_ fd: Int32) {}
    func mmap(_ fd: Int32, length: Int, offset: Int64) -> (pointer: UnsafeMutableRawPointer?, errno: Int32) {
        lock.withLock {
            let t = offset >= 0x100_0000 ? capType : outType
            let i = Int(offset % 0x100_0000) / 4096
            guard let b = buffers[t], i < b.count, length <= lengths[t]! else { return (nil, EINVAL) }
            return (b[i], 0)
        }
    }
    func munmap(_ pointer: UnsafeMutableRawPointer, length: Int) {}
    func poll(_ fd: Int32, timeoutMs: Int32) -> Int32 { lock.withLock { doneCap.isEmpty ? 0 : Int32(POLLIN) } }

    func ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        lock.withLock { handle(request, arg) }
    }

    private func handle(_ request: UInt, _ arg: UnsafeMutableRawPointer) -> Int32 {
        switch request {
        case CV4L2_VIDIOC_QUERYCAP:
            let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
            cap.pointee = v4l2_capability()
            setCString(&cap.pointee.card, "fake-enc")
            setCString(&cap.pointee.driver, "fake-m2m")
            let kind = notM2M ? CV4L2_CAP_VIDEO_CAPTURE : multiPlanar ? CV4L2_CAP_VIDEO_M2M_MPLANE : CV4L2_CAP_VIDEO_M2M
            cap.pointee.capabilities = CV4L2_CAP_DEVICE_CAPS | kind | CV4L2_CAP_STREAMING
            cap.pointee.device_caps = kind | CV4L2_CAP_STREAMING
        case CV4L2_VIDIOC_S_FMT, CV4L2_VIDIOC_G_FMT:
            let f = arg.assumingMemoryBound(to: v4l2_format.self)
            let t = f.pointee.type
            guard t == outType || t == capType else { return EINVAL }
            if request == CV4L2_VIDIOC_S_FMT {
                let (w, h, pf) =
                    multiPlanar
                    ? (f.pointee.fmt.pix_mp.width, f.pointee.fmt.pix_mp.height, f.pointee.fmt.pix_mp.pixelformat)
                    : (f.pointee.fmt.pix.width, f.pointee.fmt.pix.height, f.pointee.fmt.pix.pixelformat)
                // vicodec: 640x360 and up, in steps of 8; YU12 in, FWHT out (anything else is replaced).
                let aw = max(640, (Int(w) + 7) & ~7), ah = max(360, (Int(h) + 7) & ~7)
                let raw = rawFormats.contains(PixelFormat(rawValue: pf)) ? pf : rawFormats[0].rawValue
                formats[t] = (aw, ah, isOut(t) ? raw : coded.rawValue)
                _ = pf
                calls.append("S_FMT \(isOut(t) ? "OUTPUT" : "CAPTURE") \(PixelFormat(rawValue: pf))")
            }
            let cur = formats[t] ?? (640, 360, isOut(t) ? rawFormats[0].rawValue : coded.rawValue)
            let stride = isOut(t) ? cur.w : 0
            if multiPlanar {
                f.pointee.fmt.pix_mp.width = UInt32(cur.w)
                f.pointee.fmt.pix_mp.height = UInt32(cur.h)
                f.pointee.fmt.pix_mp.pixelformat = cur.pf
                f.pointee.fmt.pix_mp.num_planes = 1
                f.pointee.fmt.pix_mp.plane_fmt.0.bytesperline = UInt32(stride)
                f.pointee.fmt.pix_mp.plane_fmt.0.sizeimage = UInt32(sizeImage(t))
            } else {
                f.pointee.fmt.pix.width = UInt32(cur.w)
                f.pointee.fmt.pix.height = UInt32(cur.h)
                f.pointee.fmt.pix.pixelformat = cur.pf
                f.pointee.fmt.pix.bytesperline = UInt32(stride)
                f.pointee.fmt.pix.sizeimage = UInt32(sizeImage(t))
            }
        case CV4L2_VIDIOC_S_PARM, CV4L2_VIDIOC_G_PARM: return ENOTTY // vicodec has no frame interval
        case CV4L2_VIDIOC_S_SELECTION:
            let s = arg.assumingMemoryBound(to: v4l2_selection.self)
            guard !refusesCrop, s.pointee.type == CV4L2_BUF_TYPE_VIDEO_OUTPUT, s.pointee.target == CV4L2_SEL_TGT_CROP else { return EINVAL }
            calls.append("S_SELECTION CROP \(s.pointee.r.width)x\(s.pointee.r.height)")
        case CV4L2_VIDIOC_ENUM_FMT:
            let d = arg.assumingMemoryBound(to: v4l2_fmtdesc.self)
            let list = d.pointee.type == outType ? rawFormats : d.pointee.type == capType ? [coded] : []
            let i = Int(d.pointee.index)
            guard i < list.count else { return EINVAL }
            d.pointee.pixelformat = list[i].rawValue
            d.pointee.flags = d.pointee.type == capType ? CV4L2_FMT_FLAG_COMPRESSED : 0
            setCString(&d.pointee.description, d.pointee.type == capType ? "coded \(list[i])" : "raw \(list[i])")
        case CV4L2_VIDIOC_ENUM_FRAMESIZES:
            let f = arg.assumingMemoryBound(to: v4l2_frmsizeenum.self)
            guard f.pointee.index == 0 else { return EINVAL }
            f.pointee.type = V4L2_FRMSIZE_TYPE_STEPWISE.rawValue
            (f.pointee.stepwise.min_width, f.pointee.stepwise.max_width, f.pointee.stepwise.step_width) = (640, 4096, 8)
            (f.pointee.stepwise.min_height, f.pointee.stepwise.max_height, f.pointee.stepwise.step_height) = (360, 2160, 8)
        case CV4L2_VIDIOC_QUERY_EXT_CTRL:
            let q = arg.assumingMemoryBound(to: v4l2_query_ext_ctrl.self)
            guard hasGOPControl, q.pointee.id == CV4L2_CID_MPEG_VIDEO_GOP_SIZE else { return EINVAL }
            q.pointee = v4l2_query_ext_ctrl()
            q.pointee.id = CV4L2_CID_MPEG_VIDEO_GOP_SIZE
            q.pointee.type = 1
            setCString(&q.pointee.name, "GOP Size")
            (q.pointee.minimum, q.pointee.maximum, q.pointee.step, q.pointee.default_value) = (1, 16, 1, 10)
            q.pointee.elems = 1
            q.pointee.elem_size = 4
        case CV4L2_VIDIOC_G_EXT_CTRLS, CV4L2_VIDIOC_S_EXT_CTRLS:
            let list = arg.assumingMemoryBound(to: v4l2_ext_controls.self)
            guard hasGOPControl, list.pointee.count == 1, let c = list.pointee.controls, c.pointee.id == CV4L2_CID_MPEG_VIDEO_GOP_SIZE
            else { return EINVAL }
            if request == CV4L2_VIDIOC_S_EXT_CTRLS {
                gop = Int64(c.pointee.value)
                calls.append("GOP \(gop)")
            } else {
                c.pointee.value = Int32(gop)
            }
        case CV4L2_VIDIOC_REQBUFS:
            let r = arg.assumingMemoryBound(to: v4l2_requestbuffers.self)
            let t = r.pointee.type
            let dmabuf = r.pointee.memory == V4L2_MEMORY_DMABUF.rawValue
            guard t == outType || t == capType, r.pointee.memory == CV4L2_MEMORY_MMAP || (dmabuf && isOut(t)) else { return EINVAL }
            if isOut(t) { outputMemory = r.pointee.memory }
            buffers[t]?.forEach { $0.deallocate() }
            let n = Int(r.pointee.count), length = sizeImage(t)
            lengths[t] = length
            buffers[t] = (0..<n).map { _ in
                let m = UnsafeMutableRawPointer.allocate(byteCount: length, alignment: 64)
                m.initializeMemory(as: UInt8.self, repeating: 0, count: length)
                return m
            }
            calls.append("REQBUFS \(isOut(t) ? "OUTPUT" : "CAPTURE") \(n)\(dmabuf ? " DMABUF" : "")")
        case CV4L2_VIDIOC_QUERYBUF, CV4L2_VIDIOC_QBUF, CV4L2_VIDIOC_DQBUF:
            return buffer(request, arg.assumingMemoryBound(to: v4l2_buffer.self))
        case CV4L2_VIDIOC_STREAMON, CV4L2_VIDIOC_STREAMOFF:
            let t = arg.load(as: UInt32.self)
            calls.append("\(request == CV4L2_VIDIOC_STREAMON ? "STREAMON" : "STREAMOFF") \(isOut(t) ? "OUTPUT" : "CAPTURE")")
            if request == CV4L2_VIDIOC_STREAMOFF {
                if isOut(t) {
                    (pendingOut, doneOut) = ([], [])
                } else {
                    (capQueue, doneCap) = ([], []) // the reset: the drain state ends
                    (stopping, lastSent, lastTaken) = (false, false, false)
                }
            }
        case CV4L2_VIDIOC_SUBSCRIBE_EVENT:
            subscribed.insert(arg.assumingMemoryBound(to: v4l2_event_subscription.self).pointee.type)
        case CV4L2_VIDIOC_DQEVENT:
            guard pendingEOS else { return ENOENT }
            pendingEOS = false
            let e = arg.assumingMemoryBound(to: v4l2_event.self)
            e.pointee = v4l2_event()
            e.pointee.type = CV4L2_EVENT_EOS
        case CV4L2_VIDIOC_ENCODER_CMD:
            let c = arg.assumingMemoryBound(to: v4l2_encoder_cmd.self)
            guard c.pointee.cmd == CV4L2_ENC_CMD_STOP else { return EINVAL }
            calls.append("ENC_CMD_STOP")
            stopping = true
            process()
        default: return ENOTTY
        }
        return 0
    }

    private func buffer(_ request: UInt, _ b: UnsafeMutablePointer<v4l2_buffer>) -> Int32 {
        let t = b.pointee.type
        guard t == outType || t == capType, let bufs = buffers[t] else { return EINVAL }
        if multiPlanar { guard b.pointee.length == 1, b.pointee.m.planes != nil else { return EINVAL } }
        let i = Int(b.pointee.index)
        func setPlane(used: Int, length: Int, offset: UInt32) {
            if multiPlanar {
                b.pointee.m.planes[0].bytesused = UInt32(used)
                b.pointee.m.planes[0].length = UInt32(length)
                b.pointee.m.planes[0].m.mem_offset = offset
            } else {
                b.pointee.bytesused = UInt32(used)
                b.pointee.length = UInt32(length)
                b.pointee.m.offset = offset
            }
        }
        let base: UInt32 = isOut(t) ? 0 : 0x100_0000
        switch request {
        case CV4L2_VIDIOC_QUERYBUF:
            guard i < bufs.count else { return EINVAL }
            setPlane(used: 0, length: lengths[t]!, offset: base + UInt32(i * 4096))
        case CV4L2_VIDIOC_QBUF:
            guard i < bufs.count else { return EINVAL }
            if isOut(t) && outputMemory == V4L2_MEMORY_DMABUF.rawValue {
                // vb2: the memory type must match, the descriptor be valid, the buffer hold the image.
                guard b.pointee.memory == V4L2_MEMORY_DMABUF.rawValue else { return EINVAL }
                let (fd, used, length) =
                    multiPlanar
                    ? (b.pointee.m.planes[0].m.fd, Int(b.pointee.m.planes[0].bytesused), Int(b.pointee.m.planes[0].length))
                    : (b.pointee.m.fd, Int(b.pointee.bytesused), Int(b.pointee.length))
                guard fd >= 0, length >= lengths[t]!, used == lengths[t]!, !pendingOut.contains(where: { $0.index == i }) else { return EINVAL }
                if let n = refusesImportsAfter, imported.count >= n { return EINVAL }
                imported.append((fd, used, length))
                pendingOut.append((i, b.pointee.timestamp, UInt8(truncatingIfNeeded: fd)))
            } else if isOut(t) {
                let used = multiPlanar ? Int(b.pointee.m.planes[0].bytesused) : Int(b.pointee.bytesused)
                guard used == lengths[t]! else { return EINVAL }
                pendingOut.append((i, b.pointee.timestamp, nil))
            } else {
                capQueue.append(i)
            }
            process()
        default:
            if isOut(t) {
                guard !doneOut.isEmpty else { return EAGAIN }
                b.pointee.index = UInt32(doneOut.removeFirst())
                return 0
            }
            guard !doneCap.isEmpty else { return lastTaken ? EPIPE : EAGAIN }
            let d = doneCap.removeFirst()
            b.pointee.index = UInt32(d.index)
            b.pointee.flags = d.flags
            b.pointee.timestamp = d.ts
            setPlane(used: d.used, length: lengths[t]!, offset: base + UInt32(d.index * 4096))
            if d.flags & CV4L2_BUF_FLAG_LAST != 0 { lastTaken = true }
        }
        return 0
    }

    /// Encodes what it can: a picture needs a queued CAPTURE buffer, and `latency` pictures stay until the drain.
    private func process() {
        guard !stalled else { return }
        while !capQueue.isEmpty, pendingOut.count > (stopping ? 0 : latency) {
            let o = pendingOut.removeFirst(), c = capQueue.removeFirst()
            let first = o.first ?? buffers[outType]![o.index].assumingMemoryBound(to: UInt8.self)[0]
            let dst = buffers[capType]![c]
            let bytes: [UInt8] =
                Array("FAKE".utf8) + [first] + withUnsafeBytes(of: UInt32(produced).littleEndian, Array.init) + [UInt8](repeating: 0, count: 7)
            dst.copyMemory(from: bytes, byteCount: bytes.count)
            produced += 1
            doneCap.append((c, bytes.count, o.ts, 0))
            doneOut.append(o.index)
        }
        guard stopping, pendingOut.isEmpty, !lastSent else { return }
        if last == .onLastData, !doneCap.isEmpty {
            doneCap[doneCap.count - 1].flags |= CV4L2_BUF_FLAG_LAST
            lastSent = true
        } else if !capQueue.isEmpty {
            doneCap.append((capQueue.removeFirst(), 0, timeval(), CV4L2_BUF_FLAG_LAST))
            lastSent = true
        }
        if lastSent, subscribed.contains(CV4L2_EVENT_EOS) { pendingEOS = true }
    }
}

@Suite("V4L2 memory-to-memory encoder (fake vicodec)")
struct M2MEncoderTests {
    static func settings(_ w: Int = 640, _ h: Int = 360, key: Int? = 60) -> H264Encoder.Settings {
        var s = H264Encoder.Settings(width: w, height: h)
        s.keyFrameInterval = key
        return s
    }
    static func picture(_ w: Int = 640, _ h: Int = 360, luma: UInt8) -> I420Buffer {
        let p = I420Buffer(width: w, height: h)
        if let planes = p.writablePlanes {
            planes.y.update(repeating: luma, count: p.strideY * h)
            planes.u.update(repeating: 128, count: p.strideU * p.chromaHeight)
            planes.v.update(repeating: 128, count: p.strideV * p.chromaHeight)
        }
        return p
    }
    static func make(_ k: FakeM2MKernel, _ s: H264Encoder.Settings = settings(), buffers: Int = 4) throws -> V4L2M2MEncoder {
        try V4L2M2MEncoder(path: "/dev/video9", codedFormat: V4L2M2MEncoder.fwht, settings: s, control: EncoderControl(), buffers: buffers, kernel: k)
    }

    @Test("negotiates the coded format first, then YU12, clamps the GOP to the device's range", arguments: [false, true])
    func negotiation(multiPlanar: Bool) throws {
        let k = FakeM2MKernel(multiPlanar: multiPlanar)
        let e = try Self.make(k)
        #expect(e.isMultiPlanar == multiPlanar)
        #expect(e.gopSize == 16)
        #expect(k.gop == 16)
        let setup = k.calls.filter { !$0.hasPrefix("STREAMOFF") }
        #expect(
            Array(setup.prefix(3)) == ["S_FMT CAPTURE FWHT", "S_FMT OUTPUT YU12", "GOP 16"],
            "calls: \(k.calls)")
        #expect(setup.suffix(2) == ["STREAMON OUTPUT", "STREAMON CAPTURE"])
        e.close()
        #expect(k.calls.suffix(4) == ["STREAMOFF OUTPUT", "REQBUFS OUTPUT 0", "STREAMOFF CAPTURE", "REQBUFS CAPTURE 0"])
    }

    @Test("no GOP control: none is set, none is claimed")
    func noGOPControl() throws {
        let k = FakeM2MKernel(multiPlanar: false)
        k.hasGOPControl = false
        let e = try Self.make(k)
        #expect(e.gopSize == nil)
        #expect(!k.calls.contains { $0.hasPrefix("GOP") })
    }

    @Test("a size the device pads is kept and cropped back; one it cannot crop, and a node that is no encoder, are refused")
    func refusals() throws {
        let padding = FakeM2MKernel(multiPlanar: false)
        let p = try Self.make(padding, Self.settings(642, 360))
        #expect(p.bufferSize == FrameSize(width: 648, height: 360))
        #expect(padding.calls.contains("S_SELECTION CROP 642x360"))
        var out = EncodedFrame()
        try p.encode(Self.picture(642, 360, luma: 77), timestampNs: 1000, into: &out)
        #expect(Array(out.data.prefix(5)) == Array("FAKE".utf8) + [77])
        let k = FakeM2MKernel(multiPlanar: false)
        k.refusesCrop = true
        let e = #expect(throws: CaptureError.self) { try Self.make(k, Self.settings(642, 360)) }
        #expect(e?.code == .unsupportedFormat)
        #expect(
            e?.message
                == "/dev/video9 pads 642x360 to 648x360 and refuses the crop selection back to 642x360: give it a size it takes (aligned)")
        #expect(e?.errno == EINVAL)
        let camera = FakeM2MKernel(multiPlanar: false)
        camera.notM2M = true
        let c = #expect(throws: CaptureError.self) { try Self.make(camera) }
        #expect(c?.code == .notACaptureDevice)
        #expect(c?.message.contains("is not a memory-to-memory device") == true)
    }

    @Test("each coded frame carries its picture's timestamp and bytes", arguments: [false, true])
    func timestamps(multiPlanar: Bool) throws {
        let k = FakeM2MKernel(multiPlanar: multiPlanar)
        let e = try Self.make(k)
        var out = EncodedFrame()
        let stamps: [Int64] = [1_000, 33_367_000, 66_734_000, 1_700_000_000_123_456_000, 1_700_000_000_156_789_000]
        for (n, ts) in stamps.enumerated() {
            try e.encode(Self.picture(luma: UInt8(16 + n)), timestampNs: ts, into: &out)
            #expect(!out.isSkipped)
            #expect(out.timestampNs == ts)
            #expect(Array(out.data.prefix(5)) == Array("FAKE".utf8) + [UInt8(16 + n)])
            #expect(out.data.count == 16)
        }
        #expect(e.statistics.frames == stamps.count)
        #expect(e.control.statistics.frames == stamps.count)
    }

    @Test(
        "the drain ends on LAST, on an empty buffer or on the last frame with data; no frame is lost",
        arguments: [(FakeM2MKernel.Last.emptyBuffer, false), (.onLastData, false), (.emptyBuffer, true), (.onLastData, true)])
    func drain(last: FakeM2MKernel.Last, multiPlanar: Bool) throws {
        let k = FakeM2MKernel(multiPlanar: multiPlanar)
        k.last = last
        k.latency = 2
        let e = try Self.make(k)
        var got: [Int64] = []
        var out = EncodedFrame()
        for n in 0..<6 {
            try e.submit(Self.picture(luma: UInt8(n)), timestampNs: Int64(n) * 1_000_000)
            while try e.receive(into: &out, wait: false) { got.append(out.timestampNs) }
        }
        #expect(got.count == 4) // two pictures stay in the device until the drain
        let drained = try e.drain { got.append($0.timestampNs) }
        #expect(drained == 2)
        #expect(got == (0..<6).map { Int64($0) * 1_000_000 })
        #expect(e.sawEOS, "the drain's end signalled by V4L2_EVENT_EOS too")
        #expect(k.calls.contains("ENC_CMD_STOP"))
        #expect(throws: CaptureError.self) { try e.submit(Self.picture(luma: 0), timestampNs: 0) }
    }

    @Test("without a force-key-frame control, a key frame asked for resets the encoder (drain, STREAMOFF/STREAMON CAPTURE)")
    func keyFrameByReset() throws {
        let k = FakeM2MKernel(multiPlanar: true)
        let e = try Self.make(k)
        #expect(e.controls.keyFrames == .restart)
        var out = EncodedFrame()
        e.control.requestKeyFrame() // before the first frame: moot, the first frame is a key frame
        try e.encode(Self.picture(luma: 1), timestampNs: 1000, into: &out)
        #expect(!k.calls.contains("ENC_CMD_STOP"))
        e.control.requestKeyFrame()
        try e.encode(Self.picture(luma: 2), timestampNs: 2000, into: &out)
        #expect(out.timestampNs == 2000 && out.data[4] == 2)
        let reset = k.calls.drop { $0 != "ENC_CMD_STOP" }
        #expect(Array(reset.prefix(3)) == ["ENC_CMD_STOP", "STREAMOFF CAPTURE", "STREAMON CAPTURE"], "\(k.calls)")
        try e.encode(Self.picture(luma: 3), timestampNs: 3000, into: &out)
        #expect(out.timestampNs == 3000 && out.data[4] == 3)
    }

    @Test("a bitrate request without a bitrate control changes nothing on the device")
    func bitrateWithoutControl() throws {
        let k = FakeM2MKernel(multiPlanar: false)
        let e = try Self.make(k)
        try e.control.setBitrate(500_000)
        var out = EncodedFrame()
        try e.encode(Self.picture(luma: 1), timestampNs: 1000, into: &out)
        #expect(e.controls.bitrate == nil)
        #expect(e.statistics.targetBitrate == Self.settings().targetBitrate)
    }

    @Test("a stalled encoder fails with a timeout naming the frames it holds")
    func stall() throws {
        let k = FakeM2MKernel(multiPlanar: false)
        k.stalled = true
        let e = try Self.make(k)
        e.timeoutMs = 1
        var out = EncodedFrame()
        let error = #expect(throws: CaptureError.self) { try e.encode(Self.picture(luma: 1), timestampNs: 5, into: &out) }
        #expect(error?.code == .timeout)
        #expect(error?.message == "/dev/video9: no coded frame within 1 ms (1 picture(s) in the encoder)")
    }
}
