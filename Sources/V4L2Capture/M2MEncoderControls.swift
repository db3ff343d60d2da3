import CV4L2
public import H264
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

// The M2M encoder's controls and sizes (dev-encoder.rst): each control is queried before it is set and used only
// where the device has it; a padded OUTPUT size is cropped back with the crop selection; key frames and bitrates
// asked on the encoder's control reach the device before the next picture.

extension V4L2M2MEncoder {
    /// How a key frame is made when one is asked for.
    public enum KeyFrameMethod: String, Sendable, Equatable {
        /// `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME`: the next picture queued is coded as a key frame.
        case control = "V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME"
        /// The device has no force-key-frame control: the encoder is reset (dev-encoder.rst's reset sequence: the drain
        /// with `V4L2_ENC_CMD_STOP`, then `VIDIOC_STREAMOFF` and `VIDIOC_STREAMON` on the CAPTURE queue), after which
        /// the next picture is coded as a key frame (with SPS and PPS on H.264). The device stays open.
        case restart = "encoder reset (STREAMOFF/STREAMON on CAPTURE)"
    }

    /// What the encoder set on the device. A nil field: the device has no such control (or nothing was asked).
    public struct AppliedControls: Sendable, Equatable {
        /// `V4L2_CID_MPEG_VIDEO_BITRATE`, bits per second (the settings' target, within the device's range).
        public var bitrate: Int?
        /// `V4L2_CID_MPEG_VIDEO_BITRATE_MODE`: "CBR" where the device offers it (what RTP wants), else "VBR".
        public var bitrateMode: String?
        /// `V4L2_CID_MPEG_VIDEO_H264_I_PERIOD`: frames between key frames. Never 1 (an I-period of 1 makes
        /// bcm2835-codec hang); an interval of 1 asked gets 2 here and a key frame forced on every picture.
        public var iPeriod: Int?
        /// `V4L2_CID_MPEG_VIDEO_GOP_SIZE`: frames between key frames.
        public var gopSize: Int?
        /// `V4L2_CID_MPEG_VIDEO_H264_PROFILE`: "constrained baseline" where offered (WebRTC's), else "baseline",
        /// else the device's own.
        public var profile: String?
        /// `V4L2_CID_MPEG_VIDEO_H264_LEVEL`: the smallest level whose MaxFS and MaxMBPS fit the size and frame rate
        /// (among those the device lists).
        public var level: H264Level?
        /// `V4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER` set: SPS and PPS before every key frame.
        public var repeatsSequenceHeader = false
        /// How key frames asked for are made.
        public var keyFrames = KeyFrameMethod.restart
        /// Every picture is forced to be a key frame (a key-frame interval of 1 asked of a device with an I-period
        /// control and a force-key-frame control).
        public var forcesEveryFrame = false
        /// What could not be done as asked, in words.
        public var notes: [String] = []
        /// Nothing set yet.
        public init() {}
    }

    /// Sets the controls the device has for `settings` (queried first; never assumed). Controls are set before the
    /// buffers are allocated: bcm2835-codec checks the level against the size and rate at STREAMON.
    static func configure(_ node: V4L2Node, settings: H264Encoder.Settings, size: FrameSize, fps: Double) throws(CaptureError)
        -> AppliedControls
    {
        var a = AppliedControls()
        func find(_ id: UInt32) throws(CaptureError) -> CameraControl? { try node.control(CameraControlID(id)) }
        func set(_ c: CameraControl, _ v: Int64) throws(CaptureError) -> Int64 {
            (try node.setControl(c.id, to: .integer(v))).value?.integer ?? v
        }
        func inRange(_ c: CameraControl, _ v: Int64) -> Int64 { snap(c, v) }
        func offers(_ c: CameraControl, _ v: Int64) -> Bool {
            c.menu.isEmpty ? (c.minimum...c.maximum).contains(v) : c.menu.contains { $0.index == v }
        }
        if let c = try find(CV4L2_CID_MPEG_VIDEO_BITRATE_MODE) {
            let cbr = CV4L2_MPEG_VIDEO_BITRATE_MODE_CBR
            if offers(c, cbr) {
                _ = try set(c, cbr)
                a.bitrateMode = "CBR"
            } else {
                a.bitrateMode = c.value?.integer == CV4L2_MPEG_VIDEO_BITRATE_MODE_VBR ? "VBR" : "device default"
                a.notes.append("no CBR bitrate mode")
            }
        }
        if let c = try find(CV4L2_CID_MPEG_VIDEO_BITRATE) {
            a.bitrate = Int(try set(c, inRange(c, Int64(settings.targetBitrate))))
        }
        if let k = settings.keyFrameInterval {
            let iPeriod = try find(CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD)
            let gop = try find(CV4L2_CID_MPEG_VIDEO_GOP_SIZE)
            if let c = iPeriod {
                // An I-period of 1 makes bcm2835-codec hang (https://github.com/raspberrypi/linux/issues/4740): 2 at
                // least, and an all-intra stream asked for is made by forcing every picture.
                let v = try set(c, inRange(c, Int64(max(2, k))))
                a.iPeriod = Int(v)
                if k == 1 { a.notes.append("I-period 2 instead of 1 (an I-period of 1 hangs some encoders)") }
            }
            if let c = gop, !(k == 1 && iPeriod != nil) { a.gopSize = Int(try set(c, inRange(c, Int64(k)))) }
        }
        if let c = try find(CV4L2_CID_MPEG_VIDEO_H264_PROFILE) {
            let wanted: [(Int64, String)] = [
                (CV4L2_MPEG_VIDEO_H264_PROFILE_CONSTRAINED_BASELINE, "constrained baseline"), (CV4L2_MPEG_VIDEO_H264_PROFILE_BASELINE, "baseline"),
            ]
            if let w = wanted.first(where: { offers(c, $0.0) }) {
                _ = try set(c, w.0)
                a.profile = w.1
            } else {
                a.profile = c.menu.first { $0.index == c.value?.integer }?.name ?? "device default"
                a.notes.append("no baseline profile offered")
            }
        }
        if let c = try find(CV4L2_CID_MPEG_VIDEO_H264_LEVEL) {
            let needed = H264Level.smallest(width: size.width, height: size.height, fps: fps)
            let offered = H264Level.all.filter { offers(c, Int64($0.index)) }
            // The smallest level offered that is at least the one needed; else the highest offered (the device
            // then says at STREAMON whether it takes the stream).
            let pick = needed.flatMap { n in offered.first { $0.index >= n.index } } ?? offered.last
            if let pick {
                _ = try set(c, Int64(pick.index))
                a.level = pick
                if let n = needed, pick.index < n.index {
                    a.notes.append("level \(n) needed for \(size) at \(fps) fps; the device offers up to \(pick)")
                }
            }
        }
        if let c = try find(CV4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER), (try? set(c, 1)) == 1 { a.repeatsSequenceHeader = true }
        if try find(CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME) != nil { a.keyFrames = .control }
        a.forcesEveryFrame = settings.keyFrameInterval == 1 && a.iPeriod != nil && a.keyFrames == .control
        return a
    }

    /// `v` within the control's range, on its step.
    static func snap(_ c: CameraControl, _ v: Int64) -> Int64 {
        let clamped = min(max(v, c.minimum), c.maximum), step = Int64(clamping: c.step)
        return step > 1 ? c.minimum + (clamped - c.minimum) / step * step : clamped
    }

    /// Sets the crop selection of the OUTPUT queue to the pictures' size inside the padded buffers. A device that
    /// refuses it (or crops elsewhere) is an error naming both sizes. The selection takes the single-planar buffer
    /// type on a multi-planar queue (accepted by every driver since Linux 4.13); the multi-planar one is tried after.
    static func crop(_ node: V4L2Node, to size: FrameSize, padded: FrameSize, multiPlanar: Bool) throws(CaptureError) {
        let path = node.path
        guard padded.width >= size.width, padded.height >= size.height else {
            throw CaptureError(
                .unsupportedFormat, "\(path) applied \(padded) instead of \(size) for YU12: give it a size it takes (aligned)", device: path)
        }
        var types = [CV4L2_BUF_TYPE_VIDEO_OUTPUT]
        if multiPlanar { types.append(CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE) }
        var last: Errno?
        for t in types {
            var sel = v4l2_selection()
            sel.type = t
            sel.target = CV4L2_SEL_TGT_CROP
            sel.r = v4l2_rect(left: 0, top: 0, width: UInt32(size.width), height: UInt32(size.height))
            if let e = node.io.errnoOf(node.fd, .setSelection, &sel) {
                last = e
                continue
            }
            guard sel.r.left == 0, sel.r.top == 0, Int(sel.r.width) == size.width, Int(sel.r.height) == size.height else {
                throw CaptureError(
                    .unsupportedFormat,
                    "\(path) pads \(size) to \(padded) and crops it to \(sel.r.width)x\(sel.r.height) at (\(sel.r.left),\(sel.r.top)), not \(size): give it a size it takes (aligned)",
                    device: path, operation: "VIDIOC_S_SELECTION")
            }
            return
        }
        throw CaptureError(
            .unsupportedFormat,
            "\(path) pads \(size) to \(padded) and refuses the crop selection back to \(size): give it a size it takes (aligned)",
            errno: last?.rawValue, device: path, operation: "VIDIOC_S_SELECTION")
    }

    /// Takes the requests from `control` before a picture is queued: a bitrate reaches the bitrate control (when the
    /// device has one), a key frame is forced (`KeyFrameMethod`), or every picture is when an interval of 1 was asked.
    func applyRequests() throws(CaptureError) {
        if let bps = control.takeBitrateRequest(), let c = try node.control(CameraControlID(CV4L2_CID_MPEG_VIDEO_BITRATE)) {
            let v = Self.snap(c, Int64(bps))
            let applied = Int((try node.setControl(c.id, to: .integer(v))).value?.integer ?? v)
            controls.bitrate = applied
            settings.targetBitrate = applied
            stats.targetBitrate = applied
        }
        let asked = control.takeKeyFrameRequest()
        guard controls.forcesEveryFrame || (asked && sinceReset > 0) else { return }
        switch controls.keyFrames {
        case .control:
            _ = try node.setControl(CameraControlID(CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME), to: .integer(1))
        case .restart:
            if inFlight == 0 { try reset() } else { control.requestKeyFrame() } // once what is in the device is out
        }
    }

    /// An H.264 frame's NAL units (what the outputs packetize and write), found in its Annex-B bytes without allocating
    /// once the list has grown; an IDR makes it a key frame whatever the driver's flag says.
    func describeH264(_ out: inout EncodedFrame) {
        var units: [NALUnit] = []
        swap(&units, &out.nalUnits)
        units.removeAll(keepingCapacity: true)
        let ok = out.data.withUnsafeBytes { b in (try? AnnexB.split(b, into: &units)) != nil }
        if !ok { units.removeAll(keepingCapacity: true) }
        if units.contains(where: { $0.type == .idr }) { out.isKeyFrame = true }
        swap(&units, &out.nalUnits)
    }

    /// dev-encoder.rst's reset: the drain (`V4L2_ENC_CMD_STOP` until the buffer flagged LAST; nothing is in flight
    /// here), then STREAMOFF and STREAMON on the CAPTURE queue with its buffers queued again. The next picture is
    /// coded as a key frame.
    func reset() throws(CaptureError) {
        var cmd = v4l2_encoder_cmd()
        cmd.cmd = CV4L2_ENC_CMD_STOP
        if node.io.errnoOf(node.fd, .encoderCommand, &cmd) == nil {
            let deadline = monotonicNanoseconds() + Int64(timeoutMs) * 1_000_000
            drain: while true {
                switch capture.dequeue() {
                case .success(let d):
                    if d.flags & CV4L2_BUF_FLAG_LAST != 0 { break drain }
                    _ = capture.queueFree()
                case .failure(let e) where e.rawValue == EAGAIN:
                    guard monotonicNanoseconds() < deadline else { break drain } // STREAMOFF below ends it anyway
                    _ = node.io.kernel.poll(node.fd, timeoutMs: 10)
                case .failure:
                    break drain // EPIPE: the LAST buffer is out
                }
            }
        }
        capture.streamOff()
        if let e = capture.queueFree(phase: .streaming) ?? capture.streamOn(phase: .streaming, "(CAPTURE, after a reset)") { throw e }
        sinceReset = 0
    }
}

extension V4L2M2MEncoder {
    /// A factory for the encode stage (`EncodeStage.makeEncoder`, or `ResilientEncoder`'s primary): opens the
    /// encoder at `path` for the settings it is given (the first picture's size) with the stage's control, waiting up
    /// to `timeoutMs` for each coded frame.
    public static func factory(path: String, codedFormat: PixelFormat, timeoutMs: Int32 = 1000)
        -> @Sendable (H264Encoder.Settings, EncoderControl) throws -> any VideoEncoder
    {
        { settings, control in
            let e = try V4L2M2MEncoder(path: path, codedFormat: codedFormat, settings: settings, control: control)
            e.timeoutMs = timeoutMs
            return e
        }
    }
}
