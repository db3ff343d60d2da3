import CV4L2
public import H264
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

/// A V4L2 memory-to-memory stateful encoder (the kernel's encoder interface, `dev-encoder.rst`): raw I420 (`YU12`)
/// pictures go to its OUTPUT queue, coded frames come back on its CAPTURE queue, single- or multi-planar as the
/// device is.
///
/// The coded format is a parameter: H.264 on boards with a hardware encoder (Raspberry Pi bcm2835-codec, Venus),
/// `FWHT` (`V4L2M2MEncoder.fwht`) on the kernel's virtual codec, vicodec. Each picture's timestamp is queued with
/// it and the driver copies it to the coded frame made from it (V4L2 keeps microseconds). Controls are set only
/// where the device has them (each is queried first; nothing is assumed): bitrate and bitrate mode, the key-frame
/// interval, the H.264 profile and level, and key-frame requests (`V4L2M2MEncoder/AppliedControls` says what was
/// set). A size the device pads (aligned) is kept for its buffers and cropped back with the crop selection.
///
/// `encode(_:timestampNs:into:)` (the `VideoEncoder` seam the encode stage uses) queues a picture and waits for its
/// coded frame. `submit(_:timestampNs:)`, `receive(into:)` and `drain(_:)` let a caller keep several frames in the
/// device; `drain(_:)` sends `V4L2_ENC_CMD_STOP` and takes every coded frame until the one flagged LAST, which a
/// driver may set on an extra empty buffer or on the last frame with data (both are handled). No memory is
/// allocated per frame once `EncodedFrame`'s storage has grown to the largest frame.
///
/// ```swift
/// import H264
/// import V4L2Capture
///
/// func encoder(for settings: H264Encoder.Settings) throws -> V4L2M2MEncoder {
///     try V4L2M2MEncoder(path: "/dev/video4", codedFormat: V4L2M2MEncoder.fwht, settings: settings)
/// }
/// ```
///
/// Not thread-safe: one thread encodes (the encode stage's, or an `EncoderThread`); `control` is usable from any.
public final class V4L2M2MEncoder: VideoEncoder {
    /// vicodec's coded format, `FWHT`.
    public static let fwht = PixelFormat(rawValue: 0x5448_5746)

    /// The settings the encoder was made with (its size is the pictures'; the device's buffers may be padded:
    /// `bufferSize`), with the bitrate last applied.
    public internal(set) var settings: H264Encoder.Settings
    /// Key-frame requests and rates from any thread, and the counters.
    public let control: EncoderControl
    /// Counters as of the last coded frame.
    public var statistics: EncoderStatistics { stats }
    /// The device node.
    public let path: String
    /// The coded format of the CAPTURE queue.
    public let codedFormat: PixelFormat
    /// True when the device uses the multi-planar API (`V4L2_CAP_VIDEO_M2M_MPLANE`).
    public let isMultiPlanar: Bool
    /// The key-frame interval the device applied (its GOP-size control), or nil when it has no such control or
    /// none was asked.
    public private(set) var gopSize: Int?
    /// What the encoder set on the device, control by control.
    public internal(set) var controls = AppliedControls()
    /// The size of the device's OUTPUT buffers: the pictures' size, or a larger one the device aligned it to (then
    /// cropped back to the pictures' size with the crop selection).
    public let bufferSize: FrameSize
    /// How long `encode` and `drain` wait for the device before failing with a `.timeout` error, milliseconds.
    public var timeoutMs: Int32 = 2000

    /// The raw format of the OUTPUT queue: `YU12` when pictures are copied in, the camera's (`YU12`, `NV12`) when
    /// its buffers are imported.
    public let rawFormat: PixelFormat
    /// Pictures copied into an OUTPUT buffer (one copy each).
    public var copiedFrames: Int { stats.copiedFrames }
    /// Camera buffers queued as they are (DMA-BUF, no copy).
    public var importedFrames: Int { stats.importedFrames }

    let node: V4L2Node
    /// MMAP OUTPUT buffers the pictures are copied into; nil when the camera's buffers are imported (`imports`).
    let output: V4L2BufferSet?
    /// DMA-BUF OUTPUT slots the camera's buffers are queued to (`init(…, importing:)`); nil when copying.
    let imports: V4L2DMABufQueue?
    let capture: V4L2BufferSet
    let raw: V4L2StreamFormat
    var stats = EncoderStatistics()
    var inFlight = 0
    /// Coded frames taken since the encoder started or was last reset (a key-frame request before the first is moot).
    var sinceReset = 0
    var drained = false
    var closed = false
    /// True when the device takes `V4L2_EVENT_EOS` subscriptions (the drain's end is then also an event).
    let subscribedEOS: Bool
    /// True once the drain ended and the device signalled `V4L2_EVENT_EOS` (dev-encoder.rst: "the encoder signals
    /// the end of the drain with the LAST flag and, if subscribed, an EOS event").
    public private(set) var sawEOS = false

    /// Opens the memory-to-memory encoder at `path` and sets it up for `settings` (size, frame rate, key-frame
    /// interval) with `codedFormat` on its CAPTURE queue. A node that is not a memory-to-memory device, a coded
    /// format it does not take, or a size it changes (it needs aligned sizes) is an error naming the value.
    ///
    /// With `importing` (`YU12` or `NV12`), the OUTPUT queue takes DMA-BUF memory in that format: each frame's
    /// exported camera buffer (`VideoFrameBuffer.dmaBuf`) is queued as it is by `encode(_:frame:into:)`, with no
    /// copy (see `importedFrames`); nil copies every picture into a `YU12` buffer of the device's.
    public convenience init(
        path: String, codedFormat: PixelFormat, settings: H264Encoder.Settings, control: EncoderControl = EncoderControl(),
        importing: PixelFormat? = nil
    ) throws(CaptureError) {
        try self.init(
            path: path, codedFormat: codedFormat, settings: settings, control: control, buffers: 4, kernel: SystemV4L2Kernel(), importing: importing)
    }

    package init(
        path: String, codedFormat: PixelFormat, settings: H264Encoder.Settings, control: EncoderControl, buffers: Int, kernel: any V4L2Kernel,
        importing: PixelFormat? = nil
    ) throws(CaptureError) {
        self.rawFormat = importing ?? .i420
        self.path = path
        self.codedFormat = codedFormat
        self.settings = settings
        self.control = control
        stats.encoder = "v4l2m2m \(path)"
        node = try V4L2Node(path: path, kernel: kernel)
        isMultiPlanar = try node.memoryToMemoryIsMultiPlanar()
        let outType = isMultiPlanar ? CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE : CV4L2_BUF_TYPE_VIDEO_OUTPUT
        let capType = isMultiPlanar ? CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE : CV4L2_BUF_TYPE_VIDEO_CAPTURE
        let size = FrameSize(width: settings.width, height: settings.height)
        let rate = settings.maxFrameRate.isFinite && settings.maxFrameRate > 0 ? settings.maxFrameRate : 30
        let fps = Fraction(Int64((rate * 1000).rounded()), 1000)
        // The coded format first (CAPTURE), then the raw one (OUTPUT), as the encoder interface orders them.
        let coded = try V4L2StreamFormat.apply(node, StreamRequest(pixelFormat: codedFormat, size: size, fps: fps), type: capType)
        if let importing { try V4L2M2MEncoder.checkImportable(importing, path: path) }
        raw = try V4L2StreamFormat.apply(node, StreamRequest(pixelFormat: rawFormat, size: size, fps: fps), type: outType)
        bufferSize = raw.applied.size
        if bufferSize != size { try Self.crop(node, to: size, padded: bufferSize, multiPlanar: isMultiPlanar) }
        controls = try Self.configure(node, settings: settings, size: size, fps: rate)
        gopSize = controls.gopSize
        if importing != nil {
            output = nil
            imports = try V4L2DMABufQueue(node: node, type: outType, planeCount: raw.planes.count, count: 2 * buffers)
        } else {
            output = try V4L2BufferSet(node: node, type: outType, planeFormats: raw.planes, count: buffers, exportDMABuf: false)
            imports = nil
        }
        do {
            capture = try V4L2BufferSet(node: node, type: capType, planeFormats: coded.planes, count: buffers, exportDMABuf: false)
        } catch {
            output?.release() // REQBUFS(0) before the device is closed: a driver may leak CMA memory otherwise
            imports?.release()
            throw error
        }
        if let e = capture.queueFree(phase: .setup) ?? output?.streamOn(phase: .setup, "(OUTPUT)") ?? imports?.streamOn(phase: .setup, "(OUTPUT)")
            ?? capture.streamOn(phase: .setup, "(CAPTURE)")
        {
            output?.release()
            imports?.release()
            capture.release()
            throw e
        }
        var sub = v4l2_event_subscription()
        sub.type = CV4L2_EVENT_EOS
        subscribedEOS = node.io.errnoOf(node.fd, .subscribeEvent, &sub) == nil
        stats.size = size
        stats.targetBitrate = controls.bitrate ?? settings.targetBitrate
        self.settings.targetBitrate = stats.targetBitrate
    }

    deinit { close() }

    /// Queues `picture` (the encoder's size) on the OUTPUT queue with `timestampNs`; waits for a free OUTPUT buffer
    /// when the device holds them all.
    public func submit(_ picture: I420Buffer, timestampNs: Int64) throws(CaptureError) {
        guard !closed, !drained else { throw CaptureError(.notRunning, "\(path): the encoder is closed or drained", device: path) }
        guard picture.width == settings.width, picture.height == settings.height else {
            throw CaptureError(
                .invalidArgument, "\(path): a \(picture.width)x\(picture.height) picture for a \(settings.width)x\(settings.height) encoder",
                device: path)
        }
        guard let output else {
            throw CaptureError(
                .invalidArgument, "\(path): the encoder imports DMA-BUF camera buffers; give it frames (encode(_:frame:into:))", device: path)
        }
        try applyRequests()
        let i = try freeOutput(output)
        copy(picture, into: output.address(i), stride: raw.planes[0].stride, height: bufferSize.height)
        stats.copiedFrames += 1
        let ts = timeval(tv_sec: Int(timestampNs / 1_000_000_000), tv_usec: Int(timestampNs % 1_000_000_000 / 1000))
        if let e = output.queue(i, bytesUsed: raw.sizeImage, timestamp: ts) {
            throw node.io.error(e, "VIDIOC_QBUF of OUTPUT buffer \(i)", phase: .streaming)
        }
        inFlight += 1
    }

    /// Takes the next coded frame into `out`: waits up to `timeoutMs` when `wait`, else returns false at once
    /// when none is ready. The frame's timestamp is the one its picture was submitted with.
    @discardableResult
    public func receive(into out: inout EncodedFrame, wait: Bool = true) throws(CaptureError) -> Bool {
        var last = false
        return try take(into: &out, wait: wait, last: &last)
    }

    /// Drains the encoder (`V4L2_ENC_CMD_STOP`): every frame still in the device is encoded and handed to `body`,
    /// in order, until the frame flagged LAST (an empty buffer, or the last frame with data). Returns the number of
    /// frames handed over. The encoder takes no more pictures afterwards.
    @discardableResult
    public func drain(_ body: (EncodedFrame) throws -> Void) throws -> Int {
        guard !closed, !drained else { return 0 }
        drained = true
        var cmd = v4l2_encoder_cmd()
        cmd.cmd = CV4L2_ENC_CMD_STOP
        var out = EncodedFrame()
        var count = 0
        if node.io.errnoOf(node.fd, .encoderCommand, &cmd) != nil {
            // No drain command: take what is in flight.
            while inFlight > 0, try receive(into: &out) {
                try body(out)
                count += 1
            }
            return count
        }
        var last = false
        while !last {
            guard try take(into: &out, wait: true, last: &last) else { break }
            if !out.isSkipped {
                try body(out)
                count += 1
            }
        }
        takeEOS()
        return count
    }

    /// Submits `picture` and waits for its coded frame (the `VideoEncoder` seam): one picture in the device at a
    /// time, so `out` is always this picture's frame, with its timestamp.
    public func encode(_ picture: I420Buffer, timestampNs: Int64, into out: inout EncodedFrame) throws {
        try submit(picture, timestampNs: timestampNs)
        _ = try receive(into: &out)
    }

    /// Stops both queues and releases the buffers and the device. Safe to call more than once.
    public func close() {
        guard !closed else { return }
        closed = true
        output?.release()
        imports?.release()
        capture.release()
        node.close()
    }

    // MARK: -

    /// One coded buffer into `out` (an empty LAST buffer gives `out.isSkipped`); `last` is set on the LAST flag
    /// or when the device says the drain is over (EPIPE). False when nothing came (no wait, or the drain ended).
    func take(into out: inout EncodedFrame, wait: Bool, last: inout Bool) throws(CaptureError) -> Bool {
        let deadline = monotonicNanoseconds() + Int64(timeoutMs) * 1_000_000
        while true {
            switch capture.dequeue() {
            case .success(let d):
                defer { _ = capture.queueFree() }
                last = d.flags & CV4L2_BUF_FLAG_LAST != 0
                reclaimOutputs()
                let ts = Int64(d.timestamp.tv_sec) * 1_000_000_000 + Int64(d.timestamp.tv_usec) * 1000
                out.timestampNs = ts
                out.nalUnits.removeAll(keepingCapacity: true)
                guard let p = d.payload, p.used > 0, d.flags & CV4L2_BUF_FLAG_ERROR == 0 else {
                    out.data.removeAll(keepingCapacity: true)
                    out.isSkipped = true
                    return true
                }
                inFlight = max(0, inFlight - 1)
                sinceReset += 1
                let base = UnsafeRawPointer(capture.address(d.index)) + p.start
                out.data.removeAll(keepingCapacity: true)
                out.data.append(contentsOf: UnsafeRawBufferPointer(start: base, count: p.used))
                out.isSkipped = false
                out.isKeyFrame = d.flags & CV4L2_BUF_FLAG_KEYFRAME != 0
                if codedFormat == .h264 { describeH264(&out) }
                out.encodeNs = 0
                stats.frames += 1
                if out.isKeyFrame { stats.keyFrames += 1 }
                let published = stats
                control.publish { $0 = published }
                return true
            case .failure(let e) where e.rawValue == EPIPE:
                last = true // the LAST buffer was already taken: the drain is over
                return false
            case .failure(let e) where e.rawValue == EAGAIN:
                guard wait else { return false }
                let r = node.io.kernel.poll(node.fd, timeoutMs: timeoutMs)
                // A poll that answers at once without a coded frame (finished OUTPUT buffers, POLLERR) must not spin
                // past the deadline: those buffers are taken back, and the wait is bounded all the same.
                if r > 0 { reclaimOutputs() }
                if r == 0 || monotonicNanoseconds() >= deadline {
                    throw CaptureError(
                        .timeout, "\(path): no coded frame within \(timeoutMs) ms (\(inFlight) picture(s) in the encoder)", device: path,
                        operation: "VIDIOC_DQBUF")
                }
                if r < 0 && -r != EINTR { throw node.io.error(Errno(-r), "poll", phase: .streaming) }
            case .failure(let e):
                throw node.io.error(e, "VIDIOC_DQBUF of a coded frame", phase: .streaming)
            }
        }
    }

    /// Dequeues the events pending (at most 16, never waiting): `sawEOS` once one is `V4L2_EVENT_EOS`.
    private func takeEOS() {
        guard subscribedEOS else { return }
        for _ in 0..<16 {
            var event = v4l2_event()
            guard node.io.errnoOf(node.fd, .dequeueEvent, &event) == nil else { return }
            if event.type == CV4L2_EVENT_EOS { sawEOS = true }
        }
    }

    /// Takes back the OUTPUT buffers the device has finished with (non-blocking).
    func reclaimOutputs() {
        if let output { while case .success = output.dequeue() {} }
        if let imports { while case .success = imports.dequeue() {} }
    }

    /// An OUTPUT buffer the device does not hold: reclaims finished ones, and waits for one when all are queued.
    private func freeOutput(_ output: V4L2BufferSet) throws(CaptureError) -> Int {
        let deadline = monotonicNanoseconds() + Int64(timeoutMs) * 1_000_000
        while true {
            if let i = output.queued.firstIndex(of: false) { return i }
            switch output.dequeue() {
            case .success: continue
            case .failure(let e) where e.rawValue == EAGAIN:
                guard monotonicNanoseconds() < deadline else {
                    throw CaptureError(
                        .timeout, "\(path): no OUTPUT buffer came back within \(timeoutMs) ms", device: path, operation: "VIDIOC_DQBUF")
                }
                _ = node.io.kernel.poll(node.fd, timeoutMs: 10)
            case .failure(let e):
                throw node.io.error(e, "VIDIOC_DQBUF of an OUTPUT buffer", phase: .streaming)
            }
        }
    }

    /// Copies an I420 picture into a `YU12` buffer whose luma lines are `stride` bytes (chroma lines half that) and
    /// `height` lines (the device's, which may be padded: the planes follow each other at the padded size).
    private func copy(_ p: I420Buffer, into base: UnsafeMutableRawPointer, stride: Int, height: Int) {
        let cs = stride / 2, ch = p.chromaHeight, cw = p.chromaWidth
        let dst = base.assumingMemoryBound(to: UInt8.self)
        for r in 0..<p.height { (dst + r * stride).update(from: p.dataY + r * p.strideY, count: p.width) }
        let u = dst + stride * height, v = u + cs * ((height + 1) / 2)
        for r in 0..<ch {
            (u + r * cs).update(from: p.dataU + r * p.strideU, count: cw)
            (v + r * cs).update(from: p.dataV + r * p.strideV, count: cw)
        }
    }
}
