public import VideoCapture

/// What a consumer of frames wants (WebRTC's `VideoSinkWants`): at most this many pixels or a box to fit in, at
/// most this frame rate, and sizes that are multiples of an alignment (an encoder's macroblocks, a GPU texture's rows).
/// `nil` means "no limit".
public struct VideoSinkWants: Sendable, Hashable, CustomStringConvertible {
    /// A pixel budget: frames above it are scaled down (aspect kept) to at most this many pixels, whatever
    /// their orientation.
    public var maxPixelCount: Int?
    /// A bounding box: frames are scaled down (aspect kept, centre-cropped to aligned sizes) until both
    /// sides fit, in the orientation the sink receives them (`width` against `width`): a portrait 720x1280
    /// frame does not fit a 1280x720 box and arrives as 404x720. Give `maxPixelCount` for a limit that
    /// either orientation meets.
    public var maxSize: FrameSize?
    /// At most this many frames per second, thinned on capture timestamps; nil (or ≤ 0) for no limit.
    public var maxFrameRate: Double?
    /// Width and height are multiples of this (at least 2: I420's chroma is subsampled).
    public var resolutionAlignment: Int

    /// Wants of a consumer; the defaults take every frame at the source's size.
    public init(maxPixelCount: Int? = nil, maxFrameRate: Double? = nil, resolutionAlignment: Int = 2) {
        self.maxPixelCount = maxPixelCount
        self.maxFrameRate = maxFrameRate
        self.resolutionAlignment = resolutionAlignment
    }

    /// Wants frames that fit inside `maxSize` (a bounding box, see ``maxSize``) at no more than `maxFrameRate`.
    public init(maxSize: FrameSize, maxFrameRate: Double? = nil, resolutionAlignment: Int = 2) {
        self.init(maxPixelCount: nil, maxFrameRate: maxFrameRate, resolutionAlignment: resolutionAlignment)
        self.maxSize = maxSize
    }

    /// The wants in one line, e.g. `max 921600 pixels @ 15.0 fps, align 16` or `within 640x360 @ any fps, align 2`.
    public var description: String {
        let size = maxSize.map { "within \($0)" } ?? "max \(maxPixelCount.map(String.init) ?? "any") pixels"
        return "\(size) @ \(maxFrameRate.map { "\($0)" } ?? "any") fps, align \(resolutionAlignment)"
    }

    /// The box, when it has a positive size.
    var box: FrameSize? { maxSize.flatMap { $0.width > 0 && $0.height > 0 ? $0 : nil } }

    /// Alignment clamped to 2...64 and made even.
    var alignment: Int { max(2, min(64, resolutionAlignment)) & ~1 }
}

/// Keeps frames at an even cadence for a target frame rate, deciding on capture timestamps alone
/// (30→15 keeps every other frame, 30→20 two of three), never on the wall clock. The idea is WebRTC's
/// frame-rate controller: an expected time for the next kept frame that advances by one output interval.
public struct FrameRateGate: Sendable, Equatable {
    private var next: Int64?
    private var intervalNs: Int64 = 0

    /// A gate that keeps the next frame it sees.
    public init() {}

    /// True when the frame at `timestampNs` is kept for `maxFps` (nil, non-finite or ≤ 0: no limit).
    public mutating func keep(timestampNs: Int64, maxFps: Double?) -> Bool {
        guard let fps = maxFps, fps.isFinite, fps > 0, fps < 1e6 else {
            next = nil
            return true
        }
        let interval = Int64(1e9 / fps)
        if interval != intervalNs {
            intervalNs = interval
            next = nil
        }
        if let n = next {
            let until = n &- timestampNs
            // Within two intervals of the expectation: steady state. Farther: a jump (a pause, a new stream).
            if until.magnitude < 2 * UInt64(interval) {
                if until > 0 { return false }
                next = n &+ interval
                return true
            }
        }
        // The first frame, or after a jump or a new rate: keep it, and expect the next a quarter of an interval
        // early, so that timestamp jitter keeps frames rather than dropping them, while a camera frame two-thirds
        // of an interval on (30 → 10 fps) is not taken as the next one (that gave a 67 ms gap at every new rate).
        next = timestampNs &+ interval - interval / 4
        return true
    }

    /// Forgets the cadence: the next frame is kept and starts a new one (after a pause or a camera switch).
    public mutating func reset() { next = nil }
}

/// Where an input frame goes: the part of it that is kept (centre crop to the output's aspect) and the size
/// it is scaled to.
public struct Adaptation: Sendable, Hashable {
    /// Crop of the input (nil: the whole frame).
    public var crop: CropRect?
    /// The output size (even, a multiple of the alignment asked for).
    public var size: FrameSize
    /// True when the output equals the input: no crop, no scale.
    public var isIdentity: Bool

    /// The output size for `input` under a size cap and a pixel cap, keeping the aspect ratio (the input is
    /// cropped by at most one alignment step to keep it exact), never larger than the input. Total: any
    /// values give a valid, non-empty size.
    public static func fit(_ input: FrameSize, maxSize: FrameSize?, maxPixelCount: Int?, alignment: Int = 2) -> Adaptation {
        let w = max(2, min(input.width, 16384)), h = max(2, min(input.height, 16384))
        let a = max(2, min(64, alignment)) & ~1
        var scale = 1.0
        if let m = maxSize, m.width > 0, m.height > 0 {
            scale = min(scale, Double(m.width) / Double(w), Double(m.height) / Double(h))
        }
        if let p = maxPixelCount, p > 0 { scale = min(scale, (Double(p) / (Double(w) * Double(h))).squareRoot()) }
        let ow = max(a, Int(Double(w) * scale) / a * a), oh = max(a, Int(Double(h) * scale) / a * a)
        let out = FrameSize(width: min(ow, w & ~1), height: min(oh, h & ~1))
        if out.width == input.width && out.height == input.height {
            return Adaptation(crop: nil, size: out, isIdentity: true)
        }
        // Crop the input to the output's aspect (centre), so the picture is not stretched by the alignment.
        var cw = w, ch = h
        if w * out.height > h * out.width {
            cw = min(w, (h * out.width + out.height / 2) / out.height)
        } else if w * out.height < h * out.width {
            ch = min(h, (w * out.height + out.width / 2) / out.width)
        }
        cw = max(2, cw & ~1)
        ch = max(2, ch & ~1)
        let crop = (cw == input.width && ch == input.height) ? nil : CropRect(x: ((w - cw) / 2) & ~1, y: ((h - ch) / 2) & ~1, width: cw, height: ch)
        return Adaptation(crop: crop, size: out, isIdentity: false)
    }
}

/// Adapts a stream of frames to a requested output format, as congestion control asks a capture source
/// (WebRTC's `VideoAdapter` and `OnOutputFormatRequest`, the seed's `adaptOutputFormatToWidth:height:fps:`):
/// frames above the requested rate are dropped on their timestamps, and frames larger than the requested
/// size are scaled (and centre-cropped to keep the aspect ratio) to even, aligned sizes an encoder accepts.
/// A value type without locks: one owner (a pipeline thread, or `VideoSource` behind its lock).
public struct VideoAdapter: Sendable {
    /// A requested output format: caps on size and frame rate, nil meaning no cap.
    public struct Request: Sendable, Hashable, CustomStringConvertible {
        /// The output fits in this size (aspect ratio kept, never upscaled); nil for the input's size.
        public var maxSize: FrameSize?
        /// At most this many frames per second; nil for every frame.
        public var maxFps: Double?
        /// A request with the given caps; the default caps nothing.
        public init(maxSize: FrameSize? = nil, maxFps: Double? = nil) {
            self.maxSize = maxSize
            self.maxFps = maxFps
        }
        /// The request in one line, e.g. `640x360 @ 15.0 fps` or `any size @ any fps`.
        public var description: String { "\(maxSize.map { "\($0)" } ?? "any size") @ \(maxFps.map { "\($0)" } ?? "any") fps" }
    }

    /// The request in force (set by `requestOutputFormat(maxSize:maxFps:)`).
    public private(set) var request = Request()
    /// Output widths and heights are multiples of this (clamped to 2…64 and made even).
    public var alignment: Int
    private var gate = FrameRateGate()

    /// An adapter that passes every frame unchanged until a request is made.
    public init(alignment: Int = 2) { self.alignment = alignment }

    /// A new output format, effective from the next frame (a new rate restarts the cadence: `FrameRateGate`).
    public mutating func requestOutputFormat(maxSize: FrameSize?, maxFps: Double?) {
        request = Request(maxSize: maxSize, maxFps: maxFps)
    }

    /// What to do with a frame of `size` captured at `timestampNs`: nil drops it (frame-rate adaptation).
    public mutating func adapt(size: FrameSize, timestampNs: Int64) -> Adaptation? {
        guard gate.keep(timestampNs: timestampNs, maxFps: request.maxFps) else { return nil }
        return Adaptation.fit(size, maxSize: request.maxSize, maxPixelCount: nil, alignment: alignment)
    }
}

/// What resolution and frame rate a bitrate estimate (REMB, transport-cc) can carry, as WebRTC's "balanced"
/// degradation does: a table of steps, down at once when the estimate falls below a step, up only when it is
/// 20% above the next step's threshold (no flapping around one value).
public struct BitrateAdaptation: Sendable {
    /// One rung of the degradation ladder: the caps that apply from `minBitrate` up.
    public struct Step: Sendable, Equatable {
        /// The lowest estimate, in bits per second, that this step serves.
        public var minBitrate: Int
        /// The largest output size at this step; nil for the camera's own.
        public var maxSize: FrameSize?
        /// The highest frame rate at this step; nil for the camera's own.
        public var maxFps: Double?
    }
    /// From the best to the lowest: nil size means the camera's own.
    public static let steps: [Step] = [
        Step(minBitrate: 1_500_000, maxSize: nil, maxFps: nil),
        Step(minBitrate: 800_000, maxSize: FrameSize(width: 960, height: 540), maxFps: nil),
        Step(minBitrate: 400_000, maxSize: FrameSize(width: 640, height: 360), maxFps: nil),
        Step(minBitrate: 200_000, maxSize: FrameSize(width: 480, height: 270), maxFps: nil),
        Step(minBitrate: 100_000, maxSize: FrameSize(width: 320, height: 180), maxFps: 20),
        Step(minBitrate: 0, maxSize: FrameSize(width: 320, height: 180), maxFps: 10),
    ]
    /// The index in `steps` of the step in force (0 is the best).
    public private(set) var current = 0
    /// Starts at the best step (index 0), as if the estimate were high.
    public init() {}

    /// The step for a new estimate (bits/s); nil when it stays the same.
    public mutating func update(bitrate: Int) -> Step? {
        var target = BitrateAdaptation.steps.firstIndex { bitrate >= $0.minBitrate } ?? BitrateAdaptation.steps.count - 1
        if target < current {
            // Up one step at a time, and only with headroom.
            let next = current - 1
            target = bitrate >= BitrateAdaptation.steps[next].minBitrate + BitrateAdaptation.steps[next].minBitrate / 5 ? next : current
        }
        guard target != current else { return nil }
        current = target
        return BitrateAdaptation.steps[target]
    }
}
