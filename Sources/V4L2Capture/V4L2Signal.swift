import CV4L2
import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

// A camera's signal: what an HDMI/SDI receiver (a DV-timings input: TC358743, the capture boxes PiKVM-style
// devices use, vivid's HDMI input) detects, and the source-change events every kind of device may raise. A
// receiver has no sizes of its own: it delivers what its source sends, so its formats are listed at the detected
// size and rate, the stream locks the detected timings before it sets the format, and a change of source ends
// the stream with `.sourceChanged` for the session to negotiate again.

/// What a DV-timings receiver detects: the active size and the frame interval its timings give.
struct DetectedSignal: Equatable {
    var size: FrameSize
    /// Seconds per frame (frame pixels with blanking ÷ pixel clock); nil when the clock is 0.
    var interval: Fraction?
}

extension V4L2Node {
    /// True when the current input is a DV-timings receiver (`VIDIOC_G_INPUT`, then `V4L2_IN_CAP_DV_TIMINGS` in
    /// `VIDIOC_ENUMINPUT`). False for cameras, and for drivers without inputs.
    func hasDVTimings() -> Bool {
        var index: Int32 = 0
        guard io.errnoOf(fd, .getInput, &index) == nil, index >= 0 else { return false }
        var input = v4l2_input()
        input.index = UInt32(index)
        guard io.errnoOf(fd, .enumInput, &input) == nil else { return false }
        return input.capabilities & CV4L2_IN_CAP_DV_TIMINGS != 0
    }

    /// The receiver's detected timings (`VIDIOC_QUERY_DV_TIMINGS`); `lock` also makes them current
    /// (`VIDIOC_S_DV_TIMINGS`), as a receiver must before its format is set. Throws `.noSignal` when nothing is
    /// detected, and the mapped error for other failures.
    func detectedSignal(lock: Bool) throws(CaptureError) -> DetectedSignal {
        var timings = v4l2_dv_timings()
        if let e = io.errnoOf(fd, .queryDVTimings, &timings) {
            if e.rawValue == ENOLINK || e.rawValue == ENOLCK || e.rawValue == ERANGE {
                throw CaptureError(
                    .noSignal, "\(path) detects no signal on its input (VIDIOC_QUERY_DV_TIMINGS)", errno: e.rawValue, device: path,
                    operation: "VIDIOC_QUERY_DV_TIMINGS")
            }
            throw io.error(e, "VIDIOC_QUERY_DV_TIMINGS")
        }
        var width: UInt32 = 0, height: UInt32 = 0, framePixels: UInt64 = 0, clock: UInt64 = 0
        cv4l2_dv_timings_size(&timings, &width, &height, &framePixels, &clock)
        // Range-checked before any arithmetic: a driver's numbers are input too.
        guard (1...16384).contains(width), (1...16384).contains(height) else {
            throw CaptureError(
                .noSignal, "\(path) detects timings of \(width)x\(height), which is no picture", device: path, operation: "VIDIOC_QUERY_DV_TIMINGS")
        }
        if lock { try io.ioctl(fd, .setDVTimings, &timings) }
        let interval =
            framePixels > 0 && framePixels < 1 << 40 && clock > 0 && clock < 1 << 40
            ? Fraction(Int64(framePixels), Int64(clock)) : nil
        return DetectedSignal(size: FrameSize(width: Int(width), height: Int(height)), interval: interval)
    }

    /// Subscribes to `V4L2_EVENT_SOURCE_CHANGE` (then signalled by `POLLPRI`). False when the driver has no events.
    func subscribeSourceChanges() -> Bool {
        var sub = v4l2_event_subscription()
        sub.type = CV4L2_EVENT_SOURCE_CHANGE
        return io.errnoOf(fd, .subscribeEvent, &sub) == nil
    }

    /// Dequeues every pending event (`VIDIOC_DQEVENT`, at most 64); true when one was a change of resolution or
    /// signal.
    func sourceChanged() -> Bool {
        var changed = false
        for _ in 0..<64 {
            var event = v4l2_event()
            guard io.errnoOf(fd, .dequeueEvent, &event) == nil else { break }
            if cv4l2_event_is_resolution_change(&event) != 0 { changed = true }
        }
        return changed
    }

    /// The formats of a receiver: every pixel format at the detected size and rate only (a receiver delivers what
    /// its source sends; a scaler it may have is not used). With no signal, the current timings' size, if any.
    func receiverFormats(_ formats: [CaptureFormat]) -> [CaptureFormat] {
        let signal = try? detectedSignal(lock: false)
        guard let size = signal?.size else { return formats }
        var seen = Set<PixelFormat>()
        return formats.compactMap { f in
            guard seen.insert(f.pixelFormat).inserted else { return nil }
            return CaptureFormat(
                pixelFormat: f.pixelFormat, size: .discrete(size), intervals: signal?.interval.map { .discrete([$0]) },
                formatDescription: f.formatDescription)
        }
    }
}

extension IOCTL {
    static let getInput = IOCTL(request: CV4L2_VIDIOC_G_INPUT, name: "VIDIOC_G_INPUT")
    static let enumInput = IOCTL(request: CV4L2_VIDIOC_ENUMINPUT, name: "VIDIOC_ENUMINPUT")
    static let queryDVTimings = IOCTL(request: CV4L2_VIDIOC_QUERY_DV_TIMINGS, name: "VIDIOC_QUERY_DV_TIMINGS")
    static let setDVTimings = IOCTL(request: CV4L2_VIDIOC_S_DV_TIMINGS, name: "VIDIOC_S_DV_TIMINGS")
    static let subscribeEvent = IOCTL(request: CV4L2_VIDIOC_SUBSCRIBE_EVENT, name: "VIDIOC_SUBSCRIBE_EVENT")
    static let dequeueEvent = IOCTL(request: CV4L2_VIDIOC_DQEVENT, name: "VIDIOC_DQEVENT")
}
