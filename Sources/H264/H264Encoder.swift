public import VideoCapture
import Metrics
import COpenH264
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// One encoded picture: Annex-B bytes (4-byte start codes), its NAL units, and what kind of frame it is.
public struct EncodedFrame: Sendable {
    /// The access unit in Annex-B form: every NAL unit preceded by a 4-byte start code.
    public var data: [UInt8] = []
    /// The NAL units in `data`, in order; each `offset` points at a header byte in `data`, past its start code.
    public var nalUnits: [NALUnit] = []
    /// True for an IDR frame (decodable on its own; the encoder puts SPS and PPS before it).
    public var isKeyFrame = false
    /// The encoder skipped the frame (rate control); `data` is empty.
    public var isSkipped = false
    /// The capture timestamp of the input frame, carried through.
    public var timestampNs: Int64 = 0
    /// How long `encode` took for this frame, in nanoseconds (what the encoder's statistics are made of).
    public var encodeNs: Int64 = 0
    /// The clockwise rotation a receiver applies to show the picture upright (the input `VideoFrame`'s
    /// rotation; 0 when the pixels are already upright). RTP carries it in the video-orientation header
    /// extension when the receiver negotiated it.
    public var rotation: VideoRotation = .rotation0
    /// An empty frame, to be filled by `H264Encoder.encode(_:timestampNs:into:)`.
    public init() {}
    /// This frame with another capture time (tests and replays that send one frame many times).
    package func stamped(_ timestampNs: Int64) -> EncodedFrame {
        var f = self
        f.timestampNs = timestampNs
        return f
    }
    /// The size of `data` in bytes.
    public var size: Int { data.count }
    /// True when the frame carries both an SPS and a PPS.
    public var containsParameterSets: Bool { nalUnits.contains { $0.type == .sps } && nalUnits.contains { $0.type == .pps } }
    /// The frame's first SPS and PPS (without start codes: what an SDP's sprop-parameter-sets carries); nil
    /// unless it has both (a key frame has).
    public var parameterSets: (sps: [UInt8], pps: [UInt8])? {
        guard let s = nalUnits.first(where: { $0.type == .sps }), let p = nalUnits.first(where: { $0.type == .pps }) else { return nil }
        return (Array(data[s.offset..<(s.offset + s.length)]), Array(data[p.offset..<(p.offset + p.length)]))
    }
}

/// The encoder's control plane, for congestion control and RTCP feedback: `Sendable`, callable from any thread
/// or task while the encode thread is busy. Requests are taken at the start of the next `encode` (they never
/// wait for an encode to finish); several requests between two frames merge (the last rate wins).
public final class EncoderControl: Sendable {
    struct Pending: Sendable {
        var keyFrame = false
        var rates: (bitrate: Int, fps: Double?)?
        var colorSpace: VideoColorSpace?
    }
    private let pending = Mutex(Pending())
    private let applied = Mutex(EncoderStatistics())
    /// A control plane with nothing pending, to hand to `H264Encoder.init(settings:control:)` (or to another
    /// thread) before the encoder exists.
    public init() {}

    /// The next encoded frame will be an IDR preceded by SPS and PPS.
    public func requestKeyFrame() { pending.withLock { $0.keyFrame = true } }

    /// New target bitrate (bits/s, 10 kbps...100 Mbps) and frame rate (1...240), from the next frame. The cap
    /// (`maxBitrate`) rises with the target when needed. Out-of-range values are refused here, at once.
    public func setRates(bitrate: Int, fps: Double) throws(H264Error) {
        guard (10_000...100_000_000).contains(bitrate) else {
            throw H264Error(
                .invalidSettings, "bitrate \(bitrate) bit/s is out of range: 10000...100000000 bit/s (10...100000 kbps)", setting: "targetBitrate")
        }
        guard fps.isFinite, fps >= 1, fps <= 240 else {
            throw H264Error(.invalidSettings, "frame rate \(fps) is out of range: 1...240 fps", setting: "maxFrameRate")
        }
        pending.withLock { $0.rates = (bitrate, fps) }
    }

    /// New target bitrate (bits/s, 10 kbps...100 Mbps) at the current frame rate, from the next frame.
    public func setBitrate(_ bitrate: Int) throws(H264Error) {
        guard (10_000...100_000_000).contains(bitrate) else {
            throw H264Error(
                .invalidSettings, "bitrate \(bitrate) bit/s is out of range: 10000...100000000 bit/s (10...100000 kbps)", setting: "targetBitrate")
        }
        pending.withLock { $0.rates = (bitrate, nil) }
    }

    /// The colour description to write into the SPS from the next frame (a change gives new SPS/PPS and an
    /// IDR; the same description as now changes nothing). Frames from `VideoSource` carry theirs.
    public func setColorSpace(_ colorSpace: VideoColorSpace) { pending.withLock { $0.colorSpace = colorSpace } }

    /// Counters and timings as of the last encoded frame.
    public var statistics: EncoderStatistics { applied.withLock { $0 } }

    /// Takes (and clears) a pending key-frame request: for a stage that passes a camera's own stream through and
    /// forwards the request to the camera instead of an encoder.
    package func takeKeyFrameRequest() -> Bool {
        pending.withLock { p in
            defer { p.keyFrame = false }
            return p.keyFrame
        }
    }
    /// Takes (and clears) a pending bitrate request (bits/s), for the same stage: forwarded to the camera.
    package func takeBitrateRequest() -> Int? {
        pending.withLock { p in
            defer { p.rates = nil }
            return p.rates?.bitrate
        }
    }
    func take() -> Pending {
        pending.withLock { p in
            let r = p
            p = Pending()
            return r
        }
    }
    /// Publishes an encoder's counters (for `statistics`): called by each backend after a frame.
    package func publish(_ update: (inout EncoderStatistics) -> Void) { applied.withLock { update(&$0) } }
}

/// What an encoder did: frames, key frames, reconfigurations, encode time, bitrate against its target.
public struct EncoderStatistics: Sendable {
    /// Frames encoded, skipped ones included.
    public var frames = 0
    /// IDR frames among them.
    public var keyFrames = 0
    /// Frames rate control skipped (only with `H264Encoder.Settings.frameSkipping`).
    public var skipped = 0
    /// Times the encoder was set up again for a new input size (each gives new SPS/PPS and an IDR).
    public var reconfigurations = 0
    /// Frames whose encoding overflowed OpenH264's bitstream buffer (it is the size of the raw picture: noise,
    /// such as a camera's sensor at full gain in the dark or uninitialised memory, does not compress that far at
    /// a fine quantiser). OpenH264 reports it as `cmMallocMemeError` and uninitialises itself; the encoder is
    /// set up again with a coarser minimum QP (30, 40, then 51) and the frame encoded as an IDR. The floor is
    /// lifted again after a second of frames.
    public var recoveries = 0
    /// The size the encoder is set up for now.
    public var size = FrameSize(width: 0, height: 0)
    /// The target bitrate in force, bits per second.
    public var targetBitrate = 0
    /// Bits per second over the last second of timestamps.
    public var bitrate = 0.0
    /// Median encode time per frame, milliseconds.
    public var encodeP50Ms = 0.0
    /// 95th percentile of the encode time per frame, milliseconds.
    public var encodeP95Ms = 0.0
    /// What a `ResilientEncoder` did (restarts, a fallback), in words for the summary; nil when nothing happened.
    public var watchdog: String?
    /// The encoder that made the last frame: "openh264", or "v4l2m2m /dev/video11" (a hardware encoder); empty
    /// before any encoder published (and where none runs: a camera's own H.264 passed through).
    public var encoder = ""
    /// Pictures copied into the encoder's own memory (a hardware encoder's copy path; OpenH264 reads them in place).
    public var copiedFrames = 0
    /// Camera buffers the encoder took as they are (DMA-BUF import: no copy).
    public var importedFrames = 0
    /// Which path the pictures take into the encoder: "zero-copy" (every picture imported), "copied" (any copied
    /// in), "in place" (OpenH264 reads the picture it is given), or empty (nothing encoded yet).
    public var inputPath: String {
        if copiedFrames > 0 { return "copied" }
        if importedFrames > 0 { return "zero-copy" }
        return encoder == "openh264" ? "in place" : ""
    }
    /// All counters zero.
    public init() {}
    /// All counters zero, for `encoder`.
    public init(encoder: String) { self.encoder = encoder }
}

/// An H.264 encoder over OpenH264, configured the way an RTC stack uses it: real-time camera usage,
/// bitrate rate control with a cap, constrained baseline, a key-frame interval, slices sized for RTP.
public final class H264Encoder {
    /// OpenH264's complexity mode (`iComplexityMode`): more effort per frame for a little more quality.
    public enum Complexity: Int, Sendable, Equatable, CaseIterable {
        /// OpenH264's default and the fastest.
        case low = 0
        /// Between `low` and `high` in effort per frame.
        case medium = 1
        /// The most effort per frame.
        case high = 2
    }

    /// How a picture is cut into slices (NAL units). For RTP, `maxNALSize` keeps each slice within one packet
    /// (single NAL unit packets instead of fragments).
    public enum SliceMode: Sendable, Equatable {
        /// One slice per picture (FU-A fragments carry it over RTP).
        case single
        /// Slices no larger than this many bytes (an RTP payload budget, e.g. 1200).
        case maxNALSize(Int)
        /// This many slices per picture (1…32), of about equal size.
        case fixedCount(Int)
    }

    /// What an encoder is set up with; `validate()` lists the accepted ranges. The size follows the input: a
    /// frame of another size reconfigures the encoder.
    public struct Settings: Sendable, Equatable {
        /// Picture width in pixels (16…4096, even).
        public var width: Int
        /// Picture height in pixels (16…2304, even).
        public var height: Int
        /// The input frame rate rate control plans for, frames per second (1…240).
        public var maxFrameRate: Double = 30
        /// Target bitrate, bits per second.
        public var targetBitrate: Int = 1_500_000
        /// Cap for rate control, bits per second (nil: 1.5 × target).
        public var maxBitrate: Int?
        /// Frames between IDRs (nil: about 2 seconds at `maxFrameRate`).
        public var keyFrameInterval: Int?
        /// Encoding threads, 1…4 (OpenH264's `iMultipleThreadIdc`).
        public var threads: Int = 1
        /// How pictures are cut into slices (see `SliceMode`).
        public var sliceMode: SliceMode = .single
        /// Let rate control skip frames. Off by default: a recording keeps every frame.
        public var frameSkipping: Bool = false
        /// How much effort OpenH264 spends per frame. Low is OpenH264's own default and the fastest.
        public var complexity: Complexity = .low
        /// The colour description written into the SPS (VUI `video_full_range_flag`, primaries, transfer and
        /// matrix), so decoders show the colours the camera meant; `.unspecified` writes none.
        public var colorSpace: VideoColorSpace = .unspecified

        /// Settings for `width` x `height` with the defaults: 30 fps, 1.5 Mbit/s, single slice, one thread.
        public init(width: Int, height: Int) {
            self.width = width
            self.height = height
        }

        /// Never traps, whatever the fields hold (out-of-range values are then refused by `validate()`).
        public var effectiveKeyFrameInterval: Int {
            if let keyFrameInterval { return keyFrameInterval }
            let frames = (2 * maxFrameRate).rounded()
            guard frames >= 1 else { return 1 }
            return frames <= 1e9 ? Int(frames) : 1_000_000_000
        }
        /// `maxBitrate`, or 1.5 × `targetBitrate` when it is nil (saturating, never trapping).
        public var effectiveMaxBitrate: Int {
            maxBitrate
                ?? {
                    let (sum, overflow) = targetBitrate.addingReportingOverflow(targetBitrate / 2)
                    return overflow ? .max : sum
                }()
        }

        /// Checks every field against what OpenH264 accepts (size 16...4096 x 16...2304, even; 1...240 fps;
        /// 10...100000 kbps; max bitrate up to 200000 kbps and not below the target; key-frame interval
        /// 1...100000 frames; 1...4 threads; slices of 420...65535 bytes or 1...32 per frame). Callers check
        /// settings with it before opening a camera; `init(settings:)` calls it too.
        public func validate() throws(H264Error) {
            guard width >= 16, height >= 16, width <= 4096, height <= 2304 else {
                throw H264Error(.invalidSettings, "size \(width)x\(height) is out of range: width 16...4096, height 16...2304", setting: "size")
            }
            guard width % 2 == 0, height % 2 == 0 else {
                throw H264Error(.invalidSettings, "size \(width)x\(height) must have even width and height (4:2:0)", setting: "size")
            }
            guard maxFrameRate >= 1, maxFrameRate <= 240 else {
                throw H264Error(.invalidSettings, "frame rate \(maxFrameRate) is out of range: 1...240 fps", setting: "maxFrameRate")
            }
            guard targetBitrate >= 10_000, targetBitrate <= 100_000_000 else {
                throw H264Error(
                    .invalidSettings, "bitrate \(targetBitrate) bit/s is out of range: 10000...100000000 bit/s (10...100000 kbps)",
                    setting: "targetBitrate")
            }
            guard effectiveMaxBitrate >= targetBitrate, effectiveMaxBitrate <= 200_000_000 else {
                throw H264Error(
                    .invalidSettings,
                    "max bitrate \(effectiveMaxBitrate / 1000) kbps must be at least the target (\(targetBitrate / 1000) kbps) and at most 200000 kbps",
                    setting: "maxBitrate")
            }
            guard effectiveKeyFrameInterval >= 1, effectiveKeyFrameInterval <= 100_000 else {
                throw H264Error(
                    .invalidSettings, "key-frame interval \(effectiveKeyFrameInterval) is out of range: 1...100000 frames",
                    setting: "keyFrameInterval")
            }
            guard (1...4).contains(threads) else {
                throw H264Error(.invalidSettings, "thread count \(threads) is out of range: 1...4", setting: "threads")
            }
            switch sliceMode {
            case .single: break
            // OpenH264 2.3.1 refuses size-limited slices below 420 bytes for any frame of more than a few
            // macroblocks (measured: 320x240 up to 4096x2304 all need ≥ 420), after the camera would have started.
            case .maxNALSize(let n):
                guard (420...65535).contains(n) else {
                    throw H264Error(.invalidSettings, "max NAL size \(n) is out of range: 420...65535 bytes", setting: "sliceMode")
                }
            case .fixedCount(let n):
                guard (1...32).contains(n) else {
                    throw H264Error(.invalidSettings, "slice count \(n) is out of range: 1...32", setting: "sliceMode")
                }
            }
        }
    }

    /// The settings in force: those given, with the size of the last frame encoded.
    public private(set) var settings: Settings
    private var encoder: UnsafeMutablePointer<ISVCEncoder?>?
    private var info = SFrameBSInfo()
    private var picture = SSourcePicture()
    private var forceKeyFrame = false
    /// Requests from other threads (key frames, rates, max size), taken before each frame.
    public let control: EncoderControl
    /// Counters as of the last frame, with the encode-time percentiles over every frame so far (other threads
    /// read `control.statistics`, whose percentiles are refreshed every 16 frames).
    public var statistics: EncoderStatistics {
        var s = stats
        s.encodeP50Ms = times.percentileMs(0.5)
        s.encodeP95Ms = times.percentileMs(0.95)
        return s
    }
    private var stats = EncoderStatistics(encoder: "openh264")
    private var times = DurationHistogram()
    private var window = TimestampWindow()
    /// swift-metrics for each encoded frame, when made with `metricsDimensions`.
    private let metrics: EncoderMetrics?

    /// The version of the OpenH264 library linked, e.g. `OpenH264 2.3.1`.
    public static var openH264Version: String {
        let v = WelsGetCodecVersion()
        return "OpenH264 \(v.uMajor).\(v.uMinor).\(v.uRevision)"
    }

    /// An encoder for `settings`; `control` may be made first (to hand to another thread before the encoder
    /// exists). With `metricsDimensions`, every encoded frame and the target bitrate are recorded through
    /// swift-metrics (`EncoderMetrics`, with these dimensions); nil records nothing.
    public init(settings: Settings, control: EncoderControl = EncoderControl(), metricsDimensions: [(String, String)]? = nil)
        throws(H264Error)
    {
        try settings.validate()
        self.settings = settings
        self.control = control
        metrics = metricsDimensions.map(EncoderMetrics.init(dimensions:))
        metrics?.targetBitrate.record(settings.targetBitrate)
        try configure(settings)
        stats.size = FrameSize(width: settings.width, height: settings.height)
        stats.targetBitrate = settings.targetBitrate
    }

    /// Creates (or re-creates, for a new size) the OpenH264 encoder for `settings`.
    private func configure(_ settings: Settings, minimumQP: Int = 0) throws(H264Error) {
        close()
        var enc: UnsafeMutablePointer<ISVCEncoder?>?
        guard WelsCreateSVCEncoder(&enc) == 0, let enc else { throw H264Error("OpenH264 could not create an encoder") }
        encoder = enc
        var traceLevel = Int32(WELS_LOG_QUIET) // OpenH264 traces to stderr; libraries don't print (errors come back as codes)
        _ = ch264_set_option(enc, ENCODER_OPTION_TRACE_LEVEL, &traceLevel)
        var p = SEncParamExt()
        _ = ch264_default_params(enc, &p)
        H264Encoder.apply(settings, to: &p)
        if minimumQP > 0 { p.iMinQp = Int32(minimumQP) }
        let rc = ch264_init_ext(enc, &p)
        guard rc == 0 else {
            WelsDestroySVCEncoder(enc)
            encoder = nil
            throw H264Error(
                "OpenH264 rejected the settings \(settings.width)x\(settings.height) @ \(settings.maxFrameRate) fps, \(settings.targetBitrate / 1000) kbps (code \(rc))"
            )
        }
        var format = Int32(videoFormatI420.rawValue)
        _ = ch264_set_option(enc, ENCODER_OPTION_DATAFORMAT, &format)
        self.minimumQP = minimumQP
    }

    /// The RTC configuration of OpenH264 for `settings`, over its defaults (pure: no encoder involved).
    static func apply(_ settings: Settings, to p: inout SEncParamExt) {
        p.iUsageType = CAMERA_VIDEO_REAL_TIME
        p.iPicWidth = Int32(settings.width)
        p.iPicHeight = Int32(settings.height)
        p.iTargetBitrate = Int32(settings.targetBitrate)
        p.iMaxBitrate = Int32(settings.effectiveMaxBitrate)
        p.iRCMode = RC_BITRATE_MODE
        p.fMaxFrameRate = Float(settings.maxFrameRate)
        p.uiIntraPeriod = UInt32(settings.effectiveKeyFrameInterval)
        p.bEnableFrameSkip = settings.frameSkipping
        p.iComplexityMode = ECOMPLEXITY_MODE(UInt32(settings.complexity.rawValue))
        p.iEntropyCodingModeFlag = 0
        p.eSpsPpsIdStrategy = CONSTANT_ID
        p.bPrefixNalAddingCtrl = false
        p.bEnableDenoise = false
        p.bEnableBackgroundDetection = true
        p.bEnableAdaptiveQuant = true
        p.bEnableLongTermReference = false
        p.iTemporalLayerNum = 1
        p.iSpatialLayerNum = 1
        // OpenH264 caps threads by the slice count: more threads need as many fixed slices.
        var slices = settings.sliceMode
        if settings.threads > 1, slices == .single { slices = .fixedCount(settings.threads) }
        p.iMultipleThreadIdc = UInt16(settings.threads)
        p.sSpatialLayers.0.iVideoWidth = Int32(settings.width)
        p.sSpatialLayers.0.iVideoHeight = Int32(settings.height)
        p.sSpatialLayers.0.fFrameRate = Float(settings.maxFrameRate)
        p.sSpatialLayers.0.iSpatialBitrate = Int32(settings.targetBitrate)
        p.sSpatialLayers.0.iMaxSpatialBitrate = Int32(settings.effectiveMaxBitrate)
        p.sSpatialLayers.0.uiProfileIdc = PRO_BASELINE
        let color = settings.colorSpace
        if color.isSpecified {
            // VUI video_signal_type: video_format 5 (unspecified), the range, and the three code points.
            p.sSpatialLayers.0.bVideoSignalTypePresent = true
            p.sSpatialLayers.0.uiVideoFormat = 5
            p.sSpatialLayers.0.bFullRange = color.range == .full
            let described = color.primaries != .unspecified || color.transfer != .unspecified || color.matrix != .unspecified
            p.sSpatialLayers.0.bColorDescriptionPresent = described
            p.sSpatialLayers.0.uiColorPrimaries = color.primaries.rawValue
            p.sSpatialLayers.0.uiTransferCharacteristics = color.transfer.rawValue
            p.sSpatialLayers.0.uiColorMatrix = color.matrix.rawValue
        }
        switch slices {
        case .single:
            p.sSpatialLayers.0.sSliceArgument.uiSliceMode = SM_SINGLE_SLICE
        case .maxNALSize(let n):
            p.sSpatialLayers.0.sSliceArgument.uiSliceMode = SM_SIZELIMITED_SLICE
            p.sSpatialLayers.0.sSliceArgument.uiSliceSizeConstraint = UInt32(n)
            p.uiMaxNalSize = UInt32(n)
        case .fixedCount(let n):
            p.sSpatialLayers.0.sSliceArgument.uiSliceMode = SM_FIXEDSLCNUM_SLICE
            p.sSpatialLayers.0.sSliceArgument.uiSliceNum = UInt32(n)
        }
    }

    /// The parameters OpenH264 holds for this encoder, read back from it (`GetOption` with
    /// `ENCODER_OPTION_SVC_ENCODE_PARAM_EXT`): what it encodes with after checking and adjusting `settings`
    /// over its defaults. For benchmarks and diagnostics; the encoder must be open.
    public func effectiveParameters() throws(H264Error) -> EffectiveParameters {
        guard let encoder else { throw H264Error("encoder is closed") }
        var p = SEncParamExt()
        let rc = ch264_get_option(encoder, ENCODER_OPTION_SVC_ENCODE_PARAM_EXT, &p)
        guard rc == 0 else { throw H264Error("OpenH264 could not report its parameters (code \(rc))") }
        return EffectiveParameters(p)
    }

    deinit { close() }

    /// The SPS and PPS of an encoder made with `settings`: the same settings always give the same ones, so a
    /// stream's SDP can be written before its first frame is encoded (one black picture is encoded here). The SPS
    /// carries the colour description of `settings.colorSpace`.
    public static func parameterSets(for settings: Settings) throws(H264Error) -> (sps: [UInt8], pps: [UInt8]) {
        let encoder = try H264Encoder(settings: settings)
        defer { encoder.close() }
        let first = try encoder.encode(I420Buffer(width: settings.width, height: settings.height), timestampNs: 0)
        guard let ps = first.parameterSets else { throw H264Error(.encoderFailed, "the encoder gave no SPS/PPS") }
        return ps
    }

    /// Frees the encoder (idempotent).
    public func close() {
        if let encoder {
            _ = ch264_uninit(encoder)
            WelsDestroySVCEncoder(encoder)
        }
        encoder = nil
    }

    /// Changes the target bitrate (bits/s) and frame rate, from the next frame (as `control.setRates`).
    public func setRates(bitrate: Int, fps: Double) throws(H264Error) {
        try control.setRates(bitrate: bitrate, fps: fps)
    }

    private func applyRates(bitrate: Int, fps: Double) throws(H264Error) {
        var s = settings
        s.targetBitrate = bitrate
        s.maxFrameRate = fps
        if let m = s.maxBitrate, m < bitrate { s.maxBitrate = bitrate }
        try s.validate()
        guard let encoder else { throw H264Error("encoder is closed") }
        var br = SBitrateInfo(iLayer: SPATIAL_LAYER_ALL, iBitrate: Int32(bitrate))
        var maxBr = SBitrateInfo(iLayer: SPATIAL_LAYER_ALL, iBitrate: Int32(s.effectiveMaxBitrate))
        // The overall cap and the layer's cap are separate in OpenH264; a target above the layer's cap is refused.
        var layerMaxBr = SBitrateInfo(iLayer: SPATIAL_LAYER_0, iBitrate: Int32(s.effectiveMaxBitrate))
        var rate = Float(fps)
        // The cap first when raising, the target first when lowering, so target ≤ cap throughout.
        if bitrate > settings.targetBitrate {
            _ = ch264_set_option(encoder, ENCODER_OPTION_MAX_BITRATE, &maxBr)
            _ = ch264_set_option(encoder, ENCODER_OPTION_MAX_BITRATE, &layerMaxBr)
            _ = ch264_set_option(encoder, ENCODER_OPTION_BITRATE, &br)
        } else {
            _ = ch264_set_option(encoder, ENCODER_OPTION_BITRATE, &br)
            _ = ch264_set_option(encoder, ENCODER_OPTION_MAX_BITRATE, &layerMaxBr)
            _ = ch264_set_option(encoder, ENCODER_OPTION_MAX_BITRATE, &maxBr)
        }
        _ = ch264_set_option(encoder, ENCODER_OPTION_FRAME_RATE, &rate)
        settings = s
        metrics?.targetBitrate.record(bitrate)
    }

    /// The next encoded frame will be an IDR preceded by SPS and PPS (as `control.requestKeyFrame()`).
    public func requestKeyFrame() { control.requestKeyFrame() }

    /// Applies what other threads asked for, then makes the encoder match `frame`'s size: a frame of a new
    /// size (a source that adapted its output) reconfigures the encoder, which starts with an IDR.
    private func prepare(_ input: I420Buffer) throws(H264Error) -> I420Buffer {
        let p = control.take()
        if p.keyFrame { forceKeyFrame = true }
        if let r = p.rates { try applyRates(bitrate: r.bitrate, fps: r.fps ?? settings.maxFrameRate) }
        let frame = input
        let newColor = p.colorSpace.map { $0 != settings.colorSpace } ?? false
        if frame.width != settings.width || frame.height != settings.height || newColor {
            var s = settings
            if let c = p.colorSpace { s.colorSpace = c }
            s.width = frame.width
            s.height = frame.height
            do throws(H264Error) { try s.validate() } catch {
                throw H264Error(.invalidSettings, "frame \(frame.width)x\(frame.height) cannot be encoded: \(error)")
            }
            try configure(s)
            settings = s
            forceKeyFrame = true
            if stats.frames > 0 { stats.reconfigurations += 1 } // not the first frame's own description
            stats.size = FrameSize(width: s.width, height: s.height)
        }
        return frame
    }

    /// Encodes one I420 picture into `out`, reusing its storage (no allocation in steady state).
    public func encode(_ frame: I420Buffer, timestampNs: Int64, into out: inout EncodedFrame) throws(H264Error) {
        guard encoder != nil else { throw H264Error("encoder is closed") }
        let t0 = monotonicNanoseconds()
        var frame = try prepare(frame)
        // OpenH264 reads both chroma planes with one stride: wrapped planes whose U and V strides differ are
        // copied once into a buffer of our own (made once per size); equal strides are read in place.
        if frame.strideU != frame.strideV { frame = sameChromaStrides(frame) }
        guard let encoder else { throw H264Error("encoder is closed") }
        if forceKeyFrame {
            _ = ch264_force_intra(encoder, true)
            forceKeyFrame = false
        }
        picture.iColorFormat = Int32(videoFormatI420.rawValue)
        picture.iPicWidth = Int32(frame.width)
        picture.iPicHeight = Int32(frame.height)
        picture.iStride.0 = Int32(frame.strideY)
        picture.iStride.1 = Int32(frame.strideU)
        picture.iStride.2 = Int32(frame.strideV)
        // OpenH264 declares the planes mutable but only reads them (the source may be read-only driver memory).
        picture.pData.0 = UnsafeMutablePointer(mutating: frame.dataY)
        picture.pData.1 = UnsafeMutablePointer(mutating: frame.dataU)
        picture.pData.2 = UnsafeMutablePointer(mutating: frame.dataV)
        picture.uiTimeStamp = timestampNs / 1_000_000
        var rc = ch264_encode(encoder, &picture, &info)
        if rc == 3 { // the bitstream buffer overflowed (see `EncoderStatistics.recoveries`): coarser, as an IDR
            stats.recoveries += 1
            for floor in [30, 40, 51] where floor > minimumQP && rc == 3 {
                try configure(settings, minimumQP: floor)
                guard let fresh = self.encoder else { throw H264Error("encoder is closed") }
                _ = ch264_force_intra(fresh, true)
                rc = ch264_encode(fresh, &picture, &info)
            }
            framesSinceFloor = 0
        } else if minimumQP > 0, rc == 0 {
            framesSinceFloor += 1
            if Double(framesSinceFloor) >= settings.maxFrameRate { try liftMinimumQP() }
        }
        guard rc == 0 else { throw H264Error("OpenH264 EncodeFrame failed (code \(rc))") }
        defer { finishStatistics(&out, startNs: t0) } // counted once encoded (skipped or not), never on failure
        out.data.removeAll(keepingCapacity: true)
        out.nalUnits.removeAll(keepingCapacity: true)
        out.timestampNs = timestampNs
        out.rotation = .rotation0 // a bare picture is upright; encode(VideoFrame) sets the frame's rotation
        out.isSkipped = info.eFrameType == videoFrameTypeSkip
        out.isKeyFrame = info.eFrameType == videoFrameTypeIDR
        guard !out.isSkipped else { return }
        let layers = Int(info.iLayerNum)
        withUnsafeBytes(of: &info.sLayerInfo) { raw in
            let layerInfo = raw.bindMemory(to: SLayerBSInfo.self)
            for l in 0..<layers {
                let layer = layerInfo[l]
                var offset = 0
                for n in 0..<Int(layer.iNalCount) {
                    let len = Int(layer.pNalLengthInByte[n])
                    let start = out.data.count
                    out.data.append(contentsOf: UnsafeBufferPointer(start: layer.pBsBuf + offset, count: len))
                    // Each unit carries its own 4-byte start code.
                    var sc = 0
                    while sc < min(4, len) && out.data[start + sc] == 0 { sc += 1 }
                    if sc < len && out.data[start + sc] == 1 { sc += 1 }
                    if sc < len {
                        out.nalUnits.append(NALUnit(type: NALUnitType(header: out.data[start + sc]), offset: start + sc, length: len - sc))
                    }
                    offset += len
                }
            }
        }
    }

    /// The minimum QP raised after a bitstream overflow (0: OpenH264's own), and frames encoded since.
    private var minimumQP = 0
    private var framesSinceFloor = 0

    /// Puts OpenH264's own minimum QP back without setting the encoder up again (no new IDR).
    private func liftMinimumQP() throws(H264Error) {
        guard let encoder else { throw H264Error("encoder is closed") }
        var p = SEncParamExt()
        _ = ch264_get_option(encoder, ENCODER_OPTION_SVC_ENCODE_PARAM_EXT, &p)
        var defaults = SEncParamExt()
        _ = ch264_default_params(encoder, &defaults)
        p.iMinQp = defaults.iMinQp
        _ = ch264_set_option(encoder, ENCODER_OPTION_SVC_ENCODE_PARAM_EXT, &p)
        minimumQP = 0
    }

    private var chromaScratch: I420Buffer?
    private func sameChromaStrides(_ f: I420Buffer) -> I420Buffer {
        if chromaScratch.map({ $0.width != f.width || $0.height != f.height }) ?? true {
            chromaScratch = I420Buffer(width: f.width, height: f.height)
        }
        let d = chromaScratch!
        guard let planes = d.writablePlanes else { return f }
        Self.copyPlane(f.dataY, f.strideY, planes.y, d.strideY, width: f.width, height: f.height)
        Self.copyPlane(f.dataU, f.strideU, planes.u, d.strideU, width: f.chromaWidth, height: f.chromaHeight)
        Self.copyPlane(f.dataV, f.strideV, planes.v, d.strideV, width: f.chromaWidth, height: f.chromaHeight)
        return d
    }
    /// Copies `height` rows of `width` bytes between planes of different strides.
    private static func copyPlane(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int, _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int, width: Int, height: Int
    ) {
        for row in 0..<height { (dst + row * dstStride).update(from: src + row * srcStride, count: width) }
    }

    private func finishStatistics(_ out: inout EncodedFrame, startNs: Int64) {
        out.encodeNs = monotonicNanoseconds() - startNs
        times.add(out.encodeNs)
        stats.frames += 1
        if out.isSkipped { stats.skipped += 1 }
        if out.isKeyFrame { stats.keyFrames += 1 }
        window.add(out.timestampNs, bytes: out.size)
        stats.bitrate = window.bitsPerSecond
        stats.targetBitrate = settings.targetBitrate
        if stats.frames % 16 == 1 { // percentiles walk the histogram: refreshed every 16 frames
            stats.encodeP50Ms = times.percentileMs(0.5)
            stats.encodeP95Ms = times.percentileMs(0.95)
        }
        let snapshot = stats
        control.publish { $0 = snapshot }
        metrics?.record(out)
    }

    /// Encodes an I420 frame (what `VideoSource` delivers) into `out` with its capture time and rotation, writing its
    /// colour description into the SPS (a change of description starts a new IDR), and starting with an IDR
    /// when the frame follows a camera start or switch (`VideoFrame.isDiscontinuity`). A frame in another
    /// pixel format is an error: convert it first.
    public func encode(_ frame: VideoFrame, into out: inout EncodedFrame) throws(H264Error) {
        guard let picture = I420Buffer(frame.buffer) else {
            throw H264Error(.invalidSettings, "a \(frame.buffer.pixelFormat) frame cannot be encoded: the encoder takes I420 (convert it first)")
        }
        if frame.colorSpace != settings.colorSpace { control.setColorSpace(frame.colorSpace) }
        if frame.isDiscontinuity { control.requestKeyFrame() }
        try encode(picture, timestampNs: frame.timestampNs, into: &out)
        out.rotation = frame.rotation
    }

    /// Convenience: encodes into a new `EncodedFrame`.
    public func encode(_ frame: I420Buffer, timestampNs: Int64) throws(H264Error) -> EncodedFrame {
        var out = EncodedFrame()
        try encode(frame, timestampNs: timestampNs, into: &out)
        return out
    }
}
