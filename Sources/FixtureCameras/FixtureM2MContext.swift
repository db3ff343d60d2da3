import CV4L2
import H264
import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

// One open of the simulated bcm2835-codec encoder (a memory-to-memory context per file descriptor): its formats,
// controls, buffers, queues, and the OpenH264 encoder that plays the firmware. Called with the device's lock held.

extension FixtureM2MDevice {
    /// A buffer queue of one context.
    final class Queue {
        var memory: [UnsafeMutableRawPointer] = []
        var length = 0
        var streaming = false
        var done: [(index: Int, used: Int, ts: timeval, flags: UInt32)] = []
        var bytes: Int { memory.count * length }
        func free() {
            memory.forEach { $0.deallocate() }
            memory = []
            done = []
            streaming = false
        }
    }

    struct Control {
        let id: UInt32, type: UInt32, name: String, minimum: Int64, maximum: Int64, step: UInt64, defaultValue: Int64
        var menu: [Int64: String] = [:]
    }

    final class Context {
        static let captureOffset: Int64 = 0x100_0000
        static let integerType: UInt32 = 1, booleanType: UInt32 = 2, menuType: UInt32 = 3, buttonType: UInt32 = 4
        static let outType = CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE, capType = CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        static let levels = ["1.0", "1b", "1.1", "1.2", "1.3", "2.0", "2.1", "2.2", "3.0", "3.1", "3.2", "4.0", "4.1", "4.2", "5.0", "5.1"]

        let output = Queue(), capture = Queue()
        var heldBytes: Int { output.bytes + capture.bytes }
        /// The raw format: fourcc, padded size, bytes per line; the crop (the real size); the frame rate.
        var rawFormat = PixelFormat.i420, padded = FrameSize(width: 1920, height: 1088), bytesPerLine = 1920
        var crop = FrameSize(width: 1920, height: 1080)
        var fps = 30.0
        var codedSize = FrameSize(width: 1920, height: 1080)
        var controls: [Control] = []
        var values: [UInt32: Int64] = [:]
        var pending: [(index: Int, ts: timeval)] = []
        var capQueue: [Int] = []
        var forceNext = false
        var stopping = false, lastSent = false, lastTaken = false
        var produced = 0
        /// Coded frames after which this open stalls (nil: not yet decided; Int.max: never).
        var armed: Int?
        var stalled = false
        var codedSinceLast = 0
        var encoder: H264Encoder?
        var frame = EncodedFrame()
        var nv12Picture: I420Buffer?

        init(forceKeyFrame: Bool, levelControl: Bool) {
            controls = [
                Control(
                    id: CV4L2_CID_MPEG_VIDEO_BITRATE_MODE, type: Self.menuType, name: "Bitrate Mode", minimum: 0, maximum: 1, step: 1,
                    defaultValue: 0,
                    menu: [0: "Variable Bitrate", 1: "Constant Bitrate"]),
                Control(
                    id: CV4L2_CID_MPEG_VIDEO_BITRATE, type: Self.integerType, name: "Video Bitrate", minimum: 25000, maximum: 25_000_000, step: 25000,
                    defaultValue: 10_000_000),
                Control(
                    id: CV4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER, type: Self.booleanType, name: "Repeat Sequence Header", minimum: 0, maximum: 1,
                    step: 1, defaultValue: 0),
                Control(
                    id: CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD, type: Self.integerType, name: "H264 I-Frame Period", minimum: 0,
                    maximum: 2_147_483_647, step: 1, defaultValue: 60),
                Control(
                    id: CV4L2_CID_MPEG_VIDEO_H264_PROFILE, type: Self.menuType, name: "H264 Profile", minimum: 0, maximum: 4, step: 1,
                    defaultValue: 4,
                    menu: [0: "Baseline", 1: "Constrained Baseline", 2: "Main", 4: "High"]),
            ]
            if levelControl {
                var menu: [Int64: String] = [:]
                for (i, l) in Self.levels.enumerated() { menu[Int64(i)] = l }
                controls.append(
                    Control(
                        id: CV4L2_CID_MPEG_VIDEO_H264_LEVEL, type: Self.menuType, name: "H264 Level", minimum: 0, maximum: 15, step: 1,
                        defaultValue: 12, menu: menu))
            }
            if forceKeyFrame {
                controls.append(
                    Control(
                        id: CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME, type: Self.buttonType, name: "Force Key Frame", minimum: 0, maximum: 0, step: 0,
                        defaultValue: 0))
            }
            controls.sort { $0.id < $1.id }
            for c in controls { values[c.id] = c.defaultValue }
            values[CV4L2_CID_MPEG_VIDEO_H264_LEVEL] = 12 // 4.1, the driver's default, also without the control
        }

        func freeAll() {
            output.free()
            capture.free()
        }

        func handle(_ request: UInt, _ arg: UnsafeMutableRawPointer, device: FixtureM2MDevice) -> Int32 {
            switch request {
            case CV4L2_VIDIOC_QUERYCAP:
                let cap = arg.assumingMemoryBound(to: v4l2_capability.self)
                cap.pointee = v4l2_capability()
                setText(&cap.pointee.driver, "bcm2835-codec")
                setText(&cap.pointee.card, "bcm2835-codec-encode")
                setText(&cap.pointee.bus_info, "platform:bcm2835-codec")
                cap.pointee.device_caps = CV4L2_CAP_VIDEO_M2M_MPLANE | CV4L2_CAP_STREAMING
                cap.pointee.capabilities = cap.pointee.device_caps | CV4L2_CAP_DEVICE_CAPS
            case CV4L2_VIDIOC_ENUM_FMT:
                let d = arg.assumingMemoryBound(to: v4l2_fmtdesc.self)
                let list: [PixelFormat] = d.pointee.type == Self.outType ? [.i420, .nv12] : d.pointee.type == Self.capType ? [.h264] : []
                guard Int(d.pointee.index) < list.count else { return EINVAL }
                d.pointee.pixelformat = list[Int(d.pointee.index)].rawValue
                d.pointee.flags = d.pointee.type == Self.capType ? CV4L2_FMT_FLAG_COMPRESSED : 0
                setText(&d.pointee.description, list[Int(d.pointee.index)].fourcc)
            case CV4L2_VIDIOC_S_FMT, CV4L2_VIDIOC_G_FMT:
                return format(request == CV4L2_VIDIOC_S_FMT, arg.assumingMemoryBound(to: v4l2_format.self), device)
            case CV4L2_VIDIOC_S_PARM, CV4L2_VIDIOC_G_PARM:
                let p = arg.assumingMemoryBound(to: v4l2_streamparm.self)
                guard p.pointee.type == Self.outType || p.pointee.type == Self.capType else { return EINVAL }
                if request == CV4L2_VIDIOC_S_PARM, p.pointee.type == Self.outType {
                    let t = p.pointee.parm.output.timeperframe
                    if t.numerator > 0, t.denominator > 0 { fps = Double(t.denominator) / Double(t.numerator) }
                }
                p.pointee.parm.output.capability = CV4L2_CAP_TIMEPERFRAME
                p.pointee.parm.output.timeperframe.numerator = 1000
                p.pointee.parm.output.timeperframe.denominator = UInt32((fps * 1000).rounded())
            case CV4L2_VIDIOC_S_SELECTION, CV4L2_VIDIOC_G_SELECTION:
                let s = arg.assumingMemoryBound(to: v4l2_selection.self)
                guard s.pointee.type == CV4L2_BUF_TYPE_VIDEO_OUTPUT || s.pointee.type == Self.outType, s.pointee.target == CV4L2_SEL_TGT_CROP else {
                    return EINVAL
                }
                if request == CV4L2_VIDIOC_S_SELECTION {
                    guard !output.streaming else { return EBUSY }
                    let w = min(Int(s.pointee.r.width), padded.width) & ~1, h = min(Int(s.pointee.r.height), padded.height) & ~1
                    crop = FrameSize(width: max(2, w), height: max(2, h))
                    device.note("crop \(crop) of \(padded)")
                }
                s.pointee.r = v4l2_rect(left: 0, top: 0, width: UInt32(crop.width), height: UInt32(crop.height))
            case CV4L2_VIDIOC_QUERY_EXT_CTRL:
                return query(arg.assumingMemoryBound(to: v4l2_query_ext_ctrl.self))
            case CV4L2_VIDIOC_QUERYMENU:
                let m = arg.assumingMemoryBound(to: v4l2_querymenu.self)
                guard let c = controls.first(where: { $0.id == m.pointee.id }), let name = c.menu[Int64(m.pointee.index)] else { return EINVAL }
                setText(&m.pointee.name, name)
            case CV4L2_VIDIOC_G_EXT_CTRLS, CV4L2_VIDIOC_S_EXT_CTRLS:
                return extControls(request == CV4L2_VIDIOC_S_EXT_CTRLS, arg.assumingMemoryBound(to: v4l2_ext_controls.self), device)
            case CV4L2_VIDIOC_REQBUFS:
                let r = arg.assumingMemoryBound(to: v4l2_requestbuffers.self)
                guard let q = queue(r.pointee.type), r.pointee.memory == CV4L2_MEMORY_MMAP else { return EINVAL }
                guard !q.streaming else { return EBUSY }
                q.free()
                let n = min(Int(r.pointee.count), 32)
                q.length =
                    q === output ? bytesPerLine * padded.height * 3 / 2 : codedSize.width * codedSize.height > 1280 * 720 ? 768 << 10 : 512 << 10
                q.memory = (0..<n).map { _ in
                    let m = UnsafeMutableRawPointer.allocate(byteCount: q.length, alignment: 64)
                    m.initializeMemory(as: UInt8.self, repeating: 0, count: q.length)
                    return m
                }
                r.pointee.count = UInt32(n)
                if q === capture { capQueue = [] } else { pending = [] }
                device.note("REQBUFS \(q === output ? "OUTPUT" : "CAPTURE") \(n)")
            case CV4L2_VIDIOC_QUERYBUF, CV4L2_VIDIOC_QBUF, CV4L2_VIDIOC_DQBUF:
                let r = buffer(request, arg.assumingMemoryBound(to: v4l2_buffer.self))
                if r == 0, request == CV4L2_VIDIOC_QBUF { process(device) }
                return r
            case CV4L2_VIDIOC_STREAMON, CV4L2_VIDIOC_STREAMOFF:
                let r = stream(request == CV4L2_VIDIOC_STREAMON, arg.load(as: UInt32.self), device)
                if r == 0 { process(device) }
                return r
            case CV4L2_VIDIOC_ENCODER_CMD:
                let c = arg.assumingMemoryBound(to: v4l2_encoder_cmd.self)
                guard c.pointee.cmd == CV4L2_ENC_CMD_STOP else { return EINVAL }
                stopping = true
                process(device)
            default: return ENOTTY
            }
            return 0
        }

        private func queue(_ type: UInt32) -> Queue? { type == Self.outType ? output : type == Self.capType ? capture : nil }

        private func format(_ set: Bool, _ f: UnsafeMutablePointer<v4l2_format>, _ device: FixtureM2MDevice) -> Int32 {
            let t = f.pointee.type
            guard let q = queue(t) else { return EINVAL } // multi-planar only
            if set {
                guard q.memory.isEmpty else { return EBUSY }
                let mp = f.pointee.fmt.pix_mp
                if q === output {
                    rawFormat = mp.pixelformat == PixelFormat.nv12.rawValue ? .nv12 : .i420
                    let w = min(1920, max(32, (Int(mp.width) + 31) & ~31)), h = min(1920, max(16, (Int(mp.height) + 15) & ~15))
                    padded = FrameSize(width: w, height: h)
                    bytesPerLine = (w + 63) & ~63
                    crop = FrameSize(width: min(Int(mp.width), w) & ~1, height: min(Int(mp.height), h) & ~1)
                    codedSize = crop
                    device.note("S_FMT OUTPUT \(rawFormat) \(mp.width)x\(mp.height) -> \(padded)")
                } else {
                    codedSize = FrameSize(width: Int(mp.width), height: Int(mp.height))
                    device.note("S_FMT CAPTURE H264")
                }
            }
            f.pointee.fmt.pix_mp = v4l2_pix_format_mplane()
            f.pointee.fmt.pix_mp.num_planes = 1
            f.pointee.fmt.pix_mp.field = 1 // V4L2_FIELD_NONE
            if q === output {
                f.pointee.fmt.pix_mp.width = UInt32(padded.width)
                f.pointee.fmt.pix_mp.height = UInt32(padded.height)
                f.pointee.fmt.pix_mp.pixelformat = rawFormat.rawValue
                f.pointee.fmt.pix_mp.plane_fmt.0.bytesperline = UInt32(bytesPerLine)
                f.pointee.fmt.pix_mp.plane_fmt.0.sizeimage = UInt32(bytesPerLine * padded.height * 3 / 2)
            } else {
                f.pointee.fmt.pix_mp.width = UInt32(codedSize.width)
                f.pointee.fmt.pix_mp.height = UInt32(codedSize.height)
                f.pointee.fmt.pix_mp.pixelformat = PixelFormat.h264.rawValue
                f.pointee.fmt.pix_mp.plane_fmt.0.sizeimage = UInt32(codedSize.width * codedSize.height > 1280 * 720 ? 768 << 10 : 512 << 10)
            }
            return 0
        }

        private func query(_ q: UnsafeMutablePointer<v4l2_query_ext_ctrl>) -> Int32 {
            let flags = CV4L2_CTRL_FLAG_NEXT_CTRL | CV4L2_CTRL_FLAG_NEXT_COMPOUND
            let id = q.pointee.id
            let found = id & flags != 0 ? controls.first { $0.id > id & ~flags } : controls.first { $0.id == id }
            guard let c = found else { return EINVAL }
            q.pointee = v4l2_query_ext_ctrl()
            q.pointee.id = c.id
            q.pointee.type = c.type
            setText(&q.pointee.name, c.name)
            (q.pointee.minimum, q.pointee.maximum, q.pointee.step, q.pointee.default_value) = (c.minimum, c.maximum, c.step, c.defaultValue)
            q.pointee.flags = c.type == Self.buttonType ? 0x40 : 0 // V4L2_CTRL_FLAG_WRITE_ONLY
            q.pointee.elems = 1
            q.pointee.elem_size = 4
            return 0
        }

        private func extControls(_ set: Bool, _ list: UnsafeMutablePointer<v4l2_ext_controls>, _ device: FixtureM2MDevice) -> Int32 {
            guard let cs = list.pointee.controls else { return EINVAL }
            for i in 0..<Int(list.pointee.count) {
                let x = cs + i
                guard let c = controls.first(where: { $0.id == x.pointee.id }) else {
                    list.pointee.error_idx = UInt32(i)
                    return EINVAL
                }
                if !set {
                    guard c.type != Self.buttonType else { return EACCES }
                    x.pointee.value = Int32(clamping: values[c.id] ?? c.defaultValue)
                    continue
                }
                let v = Int64(x.pointee.value)
                switch c.type {
                case Self.buttonType:
                    forceNext = true
                    device.note("\(c.name)")
                    continue
                case Self.menuType: guard c.menu[v] != nil else { return EINVAL }
                default: guard v >= c.minimum, v <= c.maximum else { return ERANGE }
                }
                // The stream's shape cannot change while it runs; the bitrate can.
                if output.streaming, c.id != CV4L2_CID_MPEG_VIDEO_BITRATE { return EBUSY }
                values[c.id] = v
                device.note("\(c.name)=\(v)")
                if c.id == CV4L2_CID_MPEG_VIDEO_BITRATE, let encoder { try? encoder.control.setBitrate(Int(v)) }
            }
            return 0
        }

        private func buffer(_ request: UInt, _ b: UnsafeMutablePointer<v4l2_buffer>) -> Int32 {
            guard let q = queue(b.pointee.type), b.pointee.memory == CV4L2_MEMORY_MMAP, b.pointee.length >= 1, let planes = b.pointee.m.planes
            else { return EINVAL }
            let base: Int64 = q === output ? 0 : Self.captureOffset
            switch request {
            case CV4L2_VIDIOC_QUERYBUF:
                let i = Int(b.pointee.index)
                guard i < q.memory.count else { return EINVAL }
                planes[0].length = UInt32(q.length)
                planes[0].m.mem_offset = UInt32(base + Int64(i * 4096))
                planes[0].bytesused = 0
            case CV4L2_VIDIOC_QBUF:
                let i = Int(b.pointee.index)
                guard i < q.memory.count else { return EINVAL }
                if q === output {
                    guard planes[0].bytesused > 0 else { return EINVAL }
                    pending.append((i, b.pointee.timestamp))
                } else {
                    capQueue.append(i)
                }
            default:
                guard !q.done.isEmpty else { return q === capture && lastTaken ? EPIPE : EAGAIN }
                let d = q.done.removeFirst()
                b.pointee.index = UInt32(d.index)
                b.pointee.flags = d.flags
                b.pointee.timestamp = d.ts
                planes[0].bytesused = UInt32(d.used)
                planes[0].length = UInt32(q.length)
                planes[0].m.mem_offset = UInt32(base + Int64(d.index * 4096))
                if d.flags & CV4L2_BUF_FLAG_LAST != 0 { lastTaken = true }
            }
            return 0
        }

        private func stream(_ on: Bool, _ type: UInt32, _ device: FixtureM2MDevice) -> Int32 {
            guard let q = queue(type) else { return EINVAL }
            let name = q === output ? "OUTPUT" : "CAPTURE"
            if on {
                guard !q.memory.isEmpty else { return EINVAL }
                if q === output {
                    // The firmware checks the level against size x rate when the input port is enabled.
                    let level = Int(values[CV4L2_CID_MPEG_VIDEO_H264_LEVEL] ?? 12)
                    if let limit = H264Level.all.first(where: { $0.index == level }), !limit.fits(width: crop.width, height: crop.height, fps: fps) {
                        device.note("STREAMON OUTPUT refused: \(crop) at \(fps) fps is above level \(Self.levels[level])")
                        return ESRCH
                    }
                }
                q.streaming = true
                device.note("STREAMON \(name)")
            } else {
                q.streaming = false
                q.done = []
                if q === output {
                    pending = []
                } else {
                    // The reset (dev-encoder.rst): the drain state ends, and the next picture is a key frame.
                    capQueue = []
                    (stopping, lastSent, lastTaken) = (false, false, false)
                    forceNext = true
                }
                device.note("STREAMOFF \(name)")
            }
            return 0
        }

        /// Encodes what it can: a queued picture and a free CAPTURE buffer, both queues streaming, an I-period other
        /// than 1 (which hangs the real firmware) and no stall.
        func process(_ device: FixtureM2MDevice) {
            while output.streaming, capture.streaming, !stalled, values[CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD] != 1, !capQueue.isEmpty,
                !pending.isEmpty
            {
                if let n = armed, produced >= n {
                    stalled = true
                    device.note("stall after \(n)")
                    return
                }
                let o = pending.removeFirst(), c = capQueue.removeFirst()
                let (used, key) = encode(output.memory[o.index], into: capture.memory[c], capacity: capture.length, ts: o.ts)
                produced += 1
                codedSinceLast += 1
                capture.done.append((c, used, o.ts, key ? CV4L2_BUF_FLAG_KEYFRAME : CV4L2_BUF_FLAG_PFRAME))
                output.done.append((o.index, 0, o.ts, 0))
            }
            guard stopping, pending.isEmpty, !lastSent, !capQueue.isEmpty, capture.streaming else { return }
            capture.done.append((capQueue.removeFirst(), 0, timeval(), CV4L2_BUF_FLAG_LAST))
            lastSent = true
        }

        /// OpenH264 with the device's controls, on the cropped picture: the coded bytes and whether it is a key frame.
        private func encode(_ src: UnsafeMutableRawPointer, into dst: UnsafeMutableRawPointer, capacity: Int, ts: timeval) -> (Int, Bool) {
            if encoder == nil {
                var s = H264Encoder.Settings(width: crop.width, height: crop.height)
                s.maxFrameRate = min(240, max(1, fps))
                s.targetBitrate = Int(values[CV4L2_CID_MPEG_VIDEO_BITRATE] ?? 10_000_000)
                let period = Int(values[CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD] ?? 60)
                s.keyFrameInterval = period > 0 ? period : nil
                encoder = try? H264Encoder(settings: s)
            }
            guard let encoder else { return (0, false) }
            if forceNext {
                forceNext = false
                encoder.control.requestKeyFrame()
            }
            let picture: I420Buffer
            let y = src.assumingMemoryBound(to: UInt8.self), bpl = bytesPerLine, h = padded.height
            if rawFormat == .nv12 {
                let p = nv12Picture ?? I420Buffer(width: crop.width, height: crop.height)
                nv12Picture = p
                guard let w = p.writablePlanes else { return (0, false) }
                for r in 0..<crop.height { (w.y + r * p.strideY).update(from: y + r * bpl, count: crop.width) }
                let uv = y + bpl * h
                for r in 0..<p.chromaHeight {
                    for x in 0..<p.chromaWidth {
                        w.u[r * p.strideU + x] = uv[r * bpl + 2 * x]
                        w.v[r * p.strideV + x] = uv[r * bpl + 2 * x + 1]
                    }
                }
                picture = p
            } else {
                let u = y + bpl * h, v = u + bpl / 2 * ((h + 1) / 2)
                guard
                    let p = try? I420Buffer(
                        wrapping: (UnsafePointer(y), UnsafePointer(u), UnsafePointer(v)), strides: (bpl, bpl / 2, bpl / 2), width: crop.width,
                        height: crop.height, release: {})
                else { return (0, false) }
                picture = p
            }
            let ns = Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_usec) * 1000
            guard (try? encoder.encode(picture, timestampNs: ns, into: &frame)) != nil, !frame.isSkipped else { return (0, false) }
            let n = min(frame.data.count, capacity)
            frame.data.withUnsafeBytes { dst.copyMemory(from: $0.baseAddress!, byteCount: n) }
            return (n, frame.isKeyFrame)
        }
    }
}

/// Writes `value` into a fixed C character array (truncated, NUL-terminated).
private func setText<T>(_ field: inout T, _ value: String) {
    withUnsafeMutableBytes(of: &field) { dst in
        let bytes = Array(value.utf8.prefix(dst.count - 1))
        for (i, b) in bytes.enumerated() { dst[i] = b }
        dst[bytes.count] = 0
    }
}
