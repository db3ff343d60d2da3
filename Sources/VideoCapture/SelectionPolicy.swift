// What other capture stacks would pick on a camera, as named policies. Each policy is written from the rules in
// that project's source (the file is named in `SelectionPolicy.source`); no code of theirs is carried over. Where
// a stack leaves the choice to the driver (`VIDIOC_S_FMT` rounds the size, `VIDIOC_S_PARM` rounds the rate), the
// driver is modelled from the listing (`DriverModel`), the way vivid and `v4l2_find_nearest_size` answer.

/// A camera mode as a device reports it: pixel format, size and frame rate (a device's current format, or what a
/// stack negotiated).
public typealias CameraMode = StreamRequest

/// A GStreamer caps filter as `gst-launch-1.0` takes it between `v4l2src` and its peer: one structure, its media
/// type and fixed fields (`video/x-raw,format=YUY2,width=1280,height=720,framerate=30/1`). Ranges and lists are
/// not modelled.
public struct GStreamerCaps: Hashable, Sendable, CustomStringConvertible {
    /// `video/x-raw`, `image/jpeg`, `video/x-h264` or `video/x-bayer`.
    public var mediaType: String
    /// GStreamer's format name (`YUY2`, `I420`, `NV12`, …), nil: any.
    public var format: String?
    /// The width, nil: any.
    public var width: Int?
    /// The height, nil: any.
    public var height: Int?
    /// The frame rate, nil: any.
    public var framerate: Fraction?

    /// A filter from its fields.
    public init(mediaType: String = "video/x-raw", format: String? = nil, width: Int? = nil, height: Int? = nil, framerate: Fraction? = nil) {
        self.mediaType = mediaType
        self.format = format
        self.width = width
        self.height = height
        self.framerate = framerate
    }

    /// Parses `video/x-raw,width=1280,height=720` (type annotations such as `(int)` are accepted). Throws
    /// `CaptureError` (`.invalidArgument`) naming the field that is not understood: an unknown field, a range or list
    /// (`[640,1280]`, `{…}`), or a number out of range.
    public init(parsing text: String) throws(CaptureError) {
        let parts = text.split(separator: ",").map { $0.trimmingSpaces }
        guard let type = parts.first, !type.isEmpty, !type.contains("=") else {
            throw CaptureError(.invalidArgument, "caps \"\(text)\": expected a media type first (video/x-raw, image/jpeg, video/x-h264)")
        }
        self.init(mediaType: String(type))
        for part in parts.dropFirst() {
            guard let eq = part.firstIndex(of: "=") else { throw CaptureError(.invalidArgument, "caps field \"\(part)\": expected name=value") }
            let name = part[..<eq].trimmingSpaces
            var value = part[part.index(after: eq)...].trimmingSpaces
            if value.hasPrefix("("), let close = value.firstIndex(of: ")") { value = value[value.index(after: close)...].trimmingSpaces }
            if value.hasPrefix("[") || value.hasPrefix("{") {
                throw CaptureError(.invalidArgument, "caps field \(name)=\(value): ranges and lists are not modelled; give one value")
            }
            func int() throws(CaptureError) -> Int {
                guard let v = Int(value), v > 0, v <= CaptureLimits.maxDimension else {
                    throw CaptureError(.invalidArgument, "caps field \(name)=\(value): expected a size from 1 to \(CaptureLimits.maxDimension)")
                }
                return v
            }
            switch name {
            case "width": width = try int()
            case "height": height = try int()
            case "format": format = String(value)
            case "framerate":
                guard let r = Fraction(rate: String(value)), CaptureLimits.problem(withRate: r) == nil else {
                    throw CaptureError(.invalidArgument, "caps field framerate=\(value): expected a positive rate such as 30/1")
                }
                framerate = r
            default:
                throw CaptureError(.invalidArgument, "caps field \"\(name)\": the model knows format, width, height and framerate")
            }
        }
    }

    /// The filter as `gst-launch-1.0` takes it.
    public var description: String {
        var s = mediaType
        if let format { s += ",format=\(format)" }
        if let width { s += ",width=\(width)" }
        if let height { s += ",height=\(height)" }
        if let framerate { s += ",framerate=\(framerate.numerator)/\(framerate.denominator)" }
        return s
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return s
    }
}

/// One request, as every policy takes it: the size and frame rate an application asks for, optional pixel formats
/// (a preference, `-input_format`, a caps `format`), and what only some stacks look at.
public struct PolicyRequest: Hashable, Sendable {
    /// The size asked for (`--size`, `-video_size`, the caps' width and height, `VideoCaptureCapability`).
    public var size: FrameSize
    /// The frame rate asked for: this package's limit, libwebrtc's `maxFPS`, ffmpeg's `-framerate`, Chromium's
    /// `frame_rate`, the seeds' `kFramerateLimit`.
    public var fps: Fraction
    /// Pixel formats wanted, preferred in this order (the first is ffmpeg's `-input_format`, libwebrtc's
    /// `videoType` and ARDCaptureController's preferred output format).
    public var pixelFormats: [PixelFormat]
    /// GStreamer's caps filter; nil: `video/x-raw` (or the first pixel format's media type) with this width and
    /// height, and the first pixel format's GStreamer name (no framerate: the rate is a limit, not a caps field).
    public var caps: GStreamerCaps?
    /// The device's current format, which GStreamer keeps when it is among its candidates; nil: none of them.
    public var deviceState: CameraMode?

    /// A request from its parts.
    public init(size: FrameSize, fps: Fraction = 30, pixelFormats: [PixelFormat] = [], caps: GStreamerCaps? = nil, deviceState: CameraMode? = nil) {
        self.size = size
        self.fps = fps
        self.pixelFormats = pixelFormats
        self.caps = caps
        self.deviceState = deviceState
    }

    /// The caps filter GStreamer gets: ``caps``, else one made from the size and pixel format.
    public var gstreamerCaps: GStreamerCaps {
        if let caps { return caps }
        let first = pixelFormats.first.flatMap { pf in GStreamerModel.table.first { $0.pixelFormat == pf } }
        return GStreamerCaps(
            mediaType: first?.mediaType ?? "video/x-raw",
            format: first?.mediaType == "video/x-raw" || first?.mediaType == "video/x-bayer" ? first?.name : nil,
            width: size.width, height: size.height)
    }
}

/// What one policy picked and why: the mode, or nil when that stack would fail to start (the reason says how).
public struct PolicyPick: Hashable, Sendable, CustomStringConvertible {
    /// The policy.
    public var policy: SelectionPolicy
    /// The format entry, exact size and rate that stack ends up streaming; nil: it fails.
    public var selection: FormatSelection?
    /// A short account of the rule that decided, in that stack's terms.
    public var reason: String
    /// The mode alone, for comparisons.
    public var mode: CameraMode? { selection.map { CameraMode(pixelFormat: $0.pixelFormat, size: $0.size, fps: $0.fps) } }
    /// `gstreamer: YUYV 1280x720 @ 12.5 fps (…)`.
    public var description: String { "\(policy.rawValue): \(mode.map { "\($0)" } ?? "fails") (\(reason))" }
}

/// What another stack would negotiate on a camera, each written from the rules in that project's source
/// (``source``): this package's own rule (`default`), libwebrtc's V4L2 capture module, Chromium's Linux capture
/// delegate, GStreamer's `v4l2src` caps fixation, ffmpeg's `-f v4l2`, and the seeds' `ARDCaptureController`.
/// Every policy takes the same ``PolicyRequest`` and a camera's format listing and returns a ``PolicyPick``.
///
/// Stacks that hand the size or rate to the driver (`VIDIOC_S_FMT`, `VIDIOC_S_PARM`) get the driver's answer
/// from a model of the driver built on the listing: the nearest listed size by |Δw| + |Δh| (ties: the later
/// entry, an exact match the first, as `v4l2_find_nearest_size`), the lowest listed rate at or above the one asked
/// for, else the highest (vivid's `S_PARM`), a format the camera does not list replaced by its first one. UVC
/// rounds sizes by area and rates to the nearest interval: a real UVC camera may answer otherwise.
public enum SelectionPolicy: String, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    /// This package's rule (``FormatSelector``): closest size, highest rate within the limit, cheapest conversion.
    case `default`
    /// libwebrtc's V4L2 module: `GetBestMatchedCapability` over its probed capability map, then `StartCapture`'s
    /// own fourcc preference (MJPEG first above VGA).
    case libwebrtc
    /// Chromium's `V4L2CaptureDelegate`: its fourcc preference (MJPEG first above 640x480), the size and rate
    /// asked of the driver.
    case chromium
    /// GStreamer 1.22 `v4l2src` with a caps filter: the probed caps intersected with the filter, fixated to the
    /// preference, sorted by size, the first (or the device's current format when it is among them).
    case gstreamer
    /// ffmpeg's `-f v4l2 -video_size -framerate [-input_format]`: the first format of its conversion table that
    /// the driver takes, the size and rate as the driver rounds them.
    case ffmpeg
    /// The seeds' `ARDCaptureController`: the size closest by |Δw| + |Δh| (the preferred pixel format wins ties),
    /// the rate min(highest offered, limit).
    case ardcapture

    /// The policy's name, as `camcap select --policy` takes it.
    public var description: String { rawValue }

    /// The source files the policy is written from.
    public var source: String {
        switch self {
        case .default: "swift-video-capture: Sources/VideoCapture/FormatSelector.swift (the design card's negotiation rules)"
        case .libwebrtc:
            "webrtc: modules/video_capture/device_info_impl.cc (GetBestMatchedCapability), modules/video_capture/linux/device_info_v4l2.cc (FillCapabilities), modules/video_capture/linux/video_capture_v4l2.cc (StartCapture)"
        case .chromium:
            "chromium: media/capture/video/linux/v4l2_capture_delegate.cc (kSupportedFormatsAndPlanarity, GetListOfUsableFourCcs, AllocateAndStart)"
        case .gstreamer:
            "gst-plugins-good 1.22: sys/v4l2/gstv4l2src.c (gst_v4l2src_negotiate, gst_v4l2src_fixate, gst_v4l2src_fixed_caps_compare), sys/v4l2/gstv4l2object.c (gst_v4l2_object_format_get_rank, sort_by_frame_size)"
        case .ffmpeg:
            "FFmpeg: libavdevice/v4l2.c (v4l2_read_header, device_try_init, device_init, v4l2_set_parameters), libavdevice/v4l2-common.c (ff_fmt_conversion_table)"
        case .ardcapture: "WebRTC examples: ARDCaptureController.m (selectFormatForDevice:, selectFpsForFormat:), as quoted in the seeds' article"
        }
    }

    /// The policy's rule in one line (for `--help` and the docs).
    public var summary: String {
        switch self {
        case .default: "closest size by |Δw|+|Δh|, highest rate within the limit, cheapest conversion to I420"
        case .libwebrtc:
            "probe 15 fourccs x 13 fixed sizes, maxFPS guessed (15 at width >= 800 unless MJPEG, else 30); best match on height, width, rate; then MJPG first above 640x480, else I420/YUYV first"
        case .chromium:
            "first of [MJPG above 640x480], YU12, Y16, Z16, INVZ, YUYV, RGB3, MJPG, JPEG the camera lists; S_FMT and S_PARM ask the driver for the request"
        case .gstreamer:
            "caps filter intersected with the probed caps (formats by v4l2src rank), fixated to 3840x2160@120 or the filter's values, sorted by size >= the preference"
        case .ffmpeg:
            "-input_format or the first of ff_fmt_conversion_table the driver takes (YU12, YV12, 422P, YUYV, UYVY, … NV12, MJPG); S_FMT size and S_PARM rate as the driver rounds them"
        case .ardcapture:
            "smallest |Δw|+|Δh| (the preferred pixel format, NV12 unless asked, wins ties, the last one), fps = min(highest offered, limit)"
        }
    }

    /// The policy's pick for `request` on a camera with `formats`.
    public func select(from formats: [CaptureFormat], request: PolicyRequest) -> PolicyPick {
        // Out-of-range requests are clamped, never trap: sizes into 0 … 2^32−1, the rate into 1/1000 … 1000 fps.
        var request = request
        let bound = Int(UInt32.max)
        request.size = FrameSize(
            width: Swift.min(Swift.max(request.size.width, 0), bound), height: Swift.min(Swift.max(request.size.height, 0), bound))
        request.fps = Swift.min(Swift.max(request.fps, Fraction(1, 1000)), FormatSelector.maxFpsLimit)
        let pick: (FormatSelection?, String)
        switch self {
        case .default: pick = Self.packageRule(formats, request)
        case .libwebrtc: pick = LibWebRTCModel.pick(formats, request)
        case .chromium: pick = Self.chromium(formats, request)
        case .gstreamer: pick = GStreamerModel.pick(formats, request)
        case .ffmpeg: pick = FFmpegModel.pick(formats, request)
        case .ardcapture: pick = Self.ardCapture(formats, request)
        }
        return PolicyPick(policy: self, selection: pick.0, reason: pick.1)
    }

    /// Every policy's pick, in `allCases` order.
    public static func selectAll(from formats: [CaptureFormat], request: PolicyRequest) -> [PolicyPick] {
        allCases.map { $0.select(from: formats, request: request) }
    }

    // MARK: default

    private static func packageRule(_ formats: [CaptureFormat], _ r: PolicyRequest) -> (FormatSelection?, String) {
        let limit = r.fps
        guard let s = FormatSelector.select(from: formats, target: r.size, fpsLimit: limit, pixelFormats: r.pixelFormats) else {
            return (nil, "no format entry converts to I420" + (r.pixelFormats.isEmpty ? "" : " among the pixel formats asked for"))
        }
        let off = gap(s.size.width, r.size.width) &+ gap(s.size.height, r.size.height)
        return (s, "closest size (\(off) off), highest rate within \(limit), cheapest conversion")
    }

    // MARK: chromium

    /// `kSupportedFormatsAndPlanarity`, in its order of precedence; MJPEG is duplicated on top for large sizes.
    static let chromiumFourCCs: [PixelFormat] = [.i420, fourCC("Y16"), fourCC("Z16"), fourCC("INVZ"), .yuyv, .rgb24, .mjpeg, .jpeg]

    private static func chromium(_ formats: [CaptureFormat], _ r: PolicyRequest) -> (FormatSelection?, String) {
        // AllocateAndStart: MJPEG first when width > 640 or height > 480 (kMjpegWidth/kMjpegHeight).
        let large = r.size.width > 640 || r.size.height > 480
        let preference = (large ? [PixelFormat.mjpeg] : []) + chromiumFourCCs
        let listed = Set(formats.map(\.pixelFormat))
        guard let fourcc = preference.first(where: listed.contains) else {
            return (nil, "Failed to find a supported camera format: none of \(preference.map(\.fourcc).joined(separator: ", "))")
        }
        let driver = DriverModel(formats: formats)
        guard let set = driver.setFormat(fourcc, r.size) else { return (nil, "the camera lists no format") }
        let fps = driver.setRate(set.entry, r.fps)
        let order = large ? "MJPG first above 640x480" : "YU12, Y16, Z16, INVZ, YUYV, RGB3, MJPG, JPEG"
        return (
            FormatSelection(format: set.entry, size: set.size, fps: fps),
            "\(fourcc) is the first listed of its preference (\(order)); S_FMT \(r.size)\(set.size == r.size ? "" : " → \(set.size)"), S_PARM \(r.fps)\(fps == r.fps ? "" : " → \(fps)") fps"
        )
    }

    // MARK: ardcapture

    private static func ardCapture(_ formats: [CaptureFormat], _ r: PolicyRequest) -> (FormatSelection?, String) {
        // selectFormatForDevice: the smallest |Δw| + |Δh|; an equal one replaces it when its pixel format is the
        // capturer's preferred output format (RTCCameraVideoCapturer's first: NV12). Ranges offer the target snapped.
        let preferred = r.pixelFormats.first ?? .nv12
        var best: (format: CaptureFormat, size: FrameSize, diff: UInt)?
        for f in formats where f.pixelFormat.isConvertibleToI420 || (f.pixelFormat == .h264 && r.pixelFormats.contains(.h264)) {
            let size = f.size.closest(to: r.size)
            let diff = gap(size.width, r.size.width) &+ gap(size.height, r.size.height)
            if let b = best {
                if diff < b.diff || (diff == b.diff && f.pixelFormat == preferred) { best = (f, size, diff) }
            } else {
                best = (f, size, diff)
            }
        }
        guard let b = best else { return (nil, "No valid formats for device") }
        // selectFpsForFormat: the highest rate of every range, capped at kFramerateLimit (the request's rate).
        let highest = b.format.intervals?.rateBounds?.max ?? r.fps
        let fps = Swift.min(highest, r.fps)
        let offered = b.format.intervals.map { i in Self.offers(i, fps) } ?? true
        return (
            FormatSelection(format: b.format, size: b.size, fps: fps),
            "smallest |Δw|+|Δh| (\(b.diff))\(b.format.pixelFormat == preferred ? ", the preferred \(preferred)" : ""); fps = min(highest \(highest), limit \(r.fps))"
                + (offered ? "" : "; \(fps) fps is not a listed rate (AVFoundation would refuse it)")
        )
    }

    /// Whether `intervals` offer exactly `fps`.
    static func offers(_ intervals: FrameIntervals, _ fps: Fraction) -> Bool {
        switch intervals {
        case .discrete(let list): return list.contains { $0.isPositive && $0.reciprocal == fps }
        case .stepwise, .continuous:
            guard let b = intervals.rateBounds else { return false }
            return b.min <= fps && fps <= b.max
        }
    }
}

/// |a − b| without overflow (the true difference of two Ints always fits in a UInt).
func gap(_ a: Int, _ b: Int) -> UInt { a >= b ? UInt(bitPattern: a &- b) : UInt(bitPattern: b &- a) }

/// a × b, saturating at Int.max (areas of sizes that came from outside).
func saturatingProduct(_ a: Int, _ b: Int) -> Int {
    let p = a.multipliedReportingOverflow(by: b)
    return p.overflow ? (a < 0) != (b < 0) ? Int.min : Int.max : p.partialValue
}

/// The code a four-character spelling stands for ("Y16" is "Y16 "; a `-BE` suffix sets bit 31), known or not.
func fourCC(_ text: String) -> PixelFormat {
    var s = Substring(text)
    var big = false
    if s.hasSuffix("-BE") {
        big = true
        s = s.dropLast(3)
    }
    var b = Array(s.utf8.prefix(4))
    while b.count < 4 { b.append(0x20) }
    let raw = UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
    return PixelFormat(rawValue: big ? raw | 1 << 31 : raw)
}

/// A V4L2 driver answering `VIDIOC_S_FMT`/`TRY_FMT` and `VIDIOC_S_PARM` from its listing, as vivid does.
struct DriverModel {
    let formats: [CaptureFormat]

    /// `S_FMT(pixelFormat, size)`: a format the camera does not list is replaced by its first one (vivid's YUYV,
    /// UVC's first format); the size is the format's nearest by |Δw| + |Δh| (`v4l2_find_nearest_size`: a later
    /// entry wins a tie, an exact one stops the search; a range offers the size clamped and snapped).
    func setFormat(_ pixelFormat: PixelFormat, _ size: FrameSize) -> (entry: CaptureFormat, size: FrameSize, substituted: Bool)? {
        guard let first = formats.first else { return nil }
        let listed = formats.contains { $0.pixelFormat == pixelFormat }
        let used = listed ? pixelFormat : first.pixelFormat
        var best: (entry: CaptureFormat, size: FrameSize, error: UInt)?
        for f in formats where f.pixelFormat == used {
            let s = f.size.closest(to: size)
            let error = gap(s.width, size.width) &+ gap(s.height, size.height)
            if let b = best, b.error == 0 || error > b.error { continue }
            best = (f, s, error)
        }
        return best.map { ($0.entry, $0.size, !listed) }
    }

    /// `S_PARM(1/fps)` at the entry: the lowest listed rate at or above `fps`, else the highest (vivid); a range
    /// clamps `fps` into it; an entry without intervals keeps `fps`.
    func setRate(_ entry: CaptureFormat, _ fps: Fraction) -> Fraction {
        switch entry.intervals {
        case .discrete(let list)?:
            let rates = list.filter(\.isPositive).map(\.reciprocal)
            return rates.filter { $0 >= fps }.min() ?? rates.max() ?? fps
        case let i?:
            guard let b = i.rateBounds else { return fps }
            let clamped = Swift.min(Swift.max(fps, b.min), b.max)
            return i.bestRate(limit: clamped) ?? clamped
        case nil: return fps
        }
    }
}

// MARK: - libwebrtc

/// libwebrtc's V4L2 capture module as an application drives it: `DeviceInfoV4l2::FillCapabilities` builds the
/// capability map, `DeviceInfoImpl::GetBestMatchedCapability` picks one, `VideoCaptureModuleV4L2::StartCapture`
/// starts it.
enum LibWebRTCModel {
    /// FillCapabilities' fourccs, in its order, with the `VideoType` it labels each with.
    static let probeFormats: [(PixelFormat, String)] = [
        (.mjpeg, "MJPEG"), (.jpeg, "MJPEG"), (.i420, "I420"), (.yv12, "YV12"), (.yuyv, "YUY2"), (.uyvy, "UYVY"), (.nv12, "NV12"),
        (.bgr24, "RGB24"), (.rgb24, "BGR24"), (.rgb565, "RGB565"), (.abgr32, "ARGB"), (.argb32, "BGRA"), (.rgba32, "ABGR"), (.bgr32, "ARGB"),
        (.rgb32, "BGRA"),
    ]
    /// FillCapabilities' fixed sizes.
    static let probeSizes: [FrameSize] = [
        (128, 96), (160, 120), (176, 144), (320, 240), (352, 288), (640, 480), (704, 576), (800, 600), (960, 720), (1280, 720), (1024, 768),
        (1440, 1080), (1920, 1080),
    ].map { FrameSize(width: $0.0, height: $0.1) }
    /// StartCapture's preference above VGA, and at or below it.
    static let hdOrder: [PixelFormat] = [
        .mjpeg, .i420, .yv12, .yuyv, .uyvy, .nv12, .abgr32, .argb32, .rgba32, .bgr32, .rgb32, .bgr24, .rgb24, .rgb565, .jpeg,
    ]
    static let sdOrder: [PixelFormat] = [
        .i420, .yv12, .yuyv, .uyvy, .nv12, .abgr32, .argb32, .rgba32, .bgr32, .rgb32, .bgr24, .rgb24, .rgb565, .mjpeg, .jpeg,
    ]

    struct Capability {
        var width: Int, height: Int, maxFPS: Int, videoType: String
    }

    /// The capability map: every probe fourcc × size whose `TRY_FMT` comes back at that size. TRY_FMT of a fourcc
    /// the camera does not list answers with its first format, and the map keeps the probe's label anyway (the
    /// module compares only the size). maxFPS is the module's guess: 15 at a width of 800 or more unless MJPEG, else 30.
    static func capabilities(_ formats: [CaptureFormat]) -> [Capability] {
        let driver = DriverModel(formats: formats)
        var caps: [Capability] = []
        for (fourcc, label) in probeFormats {
            for size in probeSizes {
                guard let got = driver.setFormat(fourcc, size), got.size == size else { continue }
                caps.append(
                    Capability(width: size.width, height: size.height, maxFPS: size.width >= 800 && label != "MJPEG" ? 15 : 30, videoType: label))
            }
        }
        return caps
    }

    /// GetBestMatchedCapability's walk: height first (the smallest at or above the request, else the largest
    /// below), then width the same way, then the rate, then the video type; ties keep the earlier capability
    /// unless the later one fits the request exactly.
    static func bestMatch(_ caps: [Capability], width: Int, height: Int, maxFPS: Int, videoType: String?) -> Int? {
        var index: Int?
        var bw = 0, bh = 0, bf = 0
        var bt = "unknown"
        for (i, c) in caps.enumerated() {
            let dW = c.width &- width, dH = c.height &- height, dF = c.maxFPS &- maxFPS
            let cW = bw &- width, cH = bh &- height, cF = bf &- maxFPS
            func take() {
                (bw, bh, bf, bt, index) = (c.width, c.height, c.maxFPS, c.videoType, i)
            }
            guard (dH >= 0 && dH <= abs(cH)) || (cH < 0 && dH >= cH) else { continue }
            guard dH == cH else {
                take()
                continue
            }
            guard (dW >= 0 && dW <= abs(cW)) || (cW < 0 && dW >= cW) else { continue }
            guard dW == cW else {
                take()
                continue
            }
            guard (dF >= 0 && dF <= cF) || (cF < 0 && dF >= cF) else { continue }
            guard cF == dF || cF >= 0 else {
                take()
                continue
            }
            if let want = videoType, bt != want, c.videoType == want || ["I420", "YUY2", "YV12"].contains(c.videoType) {
                bt = c.videoType
                index = i
            }
            if c.height == height && c.width == width && c.maxFPS >= maxFPS { index = i }
        }
        return index
    }

    static func pick(_ formats: [CaptureFormat], _ r: PolicyRequest) -> (FormatSelection?, String) {
        let caps = capabilities(formats)
        let want = r.pixelFormats.first.flatMap { pf in probeFormats.first { $0.0 == pf }?.1 }
        let fps = Int(Swift.min(Swift.max(r.fps.doubleValue.rounded(.down), 0), 1000))
        guard let i = bestMatch(caps, width: r.size.width, height: r.size.height, maxFPS: fps, videoType: want) else {
            return (nil, "GetBestMatchedCapability finds none: no probe size (128x96 … 1920x1080) comes back from TRY_FMT")
        }
        let cap = caps[i]
        let hd = cap.width > 640 || cap.height > 480
        let listed = Set(formats.map(\.pixelFormat))
        guard let fourcc = (hd ? hdOrder : sdOrder).first(where: listed.contains) else {
            return (nil, "StartCapture: no supporting video formats found (\(cap.width)x\(cap.height))")
        }
        let driver = DriverModel(formats: formats)
        let size = FrameSize(width: cap.width, height: cap.height)
        guard let set = driver.setFormat(fourcc, size) else { return (nil, "the camera lists no format") }
        let rate = driver.setRate(set.entry, Fraction(Int64(cap.maxFPS)))
        return (
            FormatSelection(format: set.entry, size: set.size, fps: rate),
            "capability \(cap.width)x\(cap.height) \(cap.videoType) maxFPS \(cap.maxFPS) (guessed) of \(caps.count); StartCapture prefers \(fourcc) \(hd ? "(MJPG first above 640x480)" : "(I420 first up to 640x480)"); S_PARM \(cap.maxFPS) → \(rate) fps"
        )
    }
}

// MARK: - GStreamer

/// GStreamer 1.22's `v4l2src` negotiation with a caps filter downstream.
enum GStreamerModel {
    /// A V4L2 format as v4l2src maps it: media type, GStreamer's format name, and its rank
    /// (`gst_v4l2_object_format_get_rank`, higher first).
    struct Entry {
        var pixelFormat: PixelFormat, mediaType: String, name: String, rank: Int
    }

    static let table: [Entry] = [
        Entry(pixelFormat: .yuyv, mediaType: "video/x-raw", name: "YUY2", rank: 1010),
        Entry(pixelFormat: .uyvy, mediaType: "video/x-raw", name: "UYVY", rank: 1009),
        Entry(pixelFormat: .yuv422p, mediaType: "video/x-raw", name: "Y42B", rank: 1008),
        Entry(pixelFormat: .i420, mediaType: "video/x-raw", name: "I420", rank: 1007),
        Entry(pixelFormat: .yuv420m, mediaType: "video/x-raw", name: "I420", rank: 1007),
        Entry(pixelFormat: .yv12, mediaType: "video/x-raw", name: "YV12", rank: 1006),
        Entry(pixelFormat: fourCC("411P"), mediaType: "video/x-raw", name: "Y41B", rank: 1004),
        Entry(pixelFormat: fourCC("YVU9"), mediaType: "video/x-raw", name: "YVU9", rank: 1003),
        Entry(pixelFormat: fourCC("YUV9"), mediaType: "video/x-raw", name: "YUV9", rank: 1002),
        Entry(pixelFormat: .mjpeg, mediaType: "image/jpeg", name: "", rank: 500),
        Entry(pixelFormat: .jpeg, mediaType: "image/jpeg", name: "", rank: 501),
        Entry(pixelFormat: .rgb32, mediaType: "video/x-raw", name: "xRGB", rank: 100),
        Entry(pixelFormat: .xrgb32, mediaType: "video/x-raw", name: "xRGB", rank: 100),
        Entry(pixelFormat: .rgbx32, mediaType: "video/x-raw", name: "RGBx", rank: 100),
        Entry(pixelFormat: .bgr32, mediaType: "video/x-raw", name: "BGRx", rank: 100),
        Entry(pixelFormat: .xbgr32, mediaType: "video/x-raw", name: "BGRx", rank: 100),
        Entry(pixelFormat: .bgrx32, mediaType: "video/x-raw", name: "xBGR", rank: 100),
        Entry(pixelFormat: .abgr32, mediaType: "video/x-raw", name: "BGRA", rank: 100),
        Entry(pixelFormat: .bgra32, mediaType: "video/x-raw", name: "ABGR", rank: 100),
        Entry(pixelFormat: .rgba32, mediaType: "video/x-raw", name: "RGBA", rank: 100),
        Entry(pixelFormat: .argb32, mediaType: "video/x-raw", name: "ARGB", rank: 100),
        Entry(pixelFormat: .rgb24, mediaType: "video/x-raw", name: "RGB", rank: 99),
        Entry(pixelFormat: .bgr24, mediaType: "video/x-raw", name: "BGR", rank: 99),
        Entry(pixelFormat: .nv12, mediaType: "video/x-raw", name: "NV12", rank: 50),
        Entry(pixelFormat: .nv12m, mediaType: "video/x-raw", name: "NV12", rank: 50),
        Entry(pixelFormat: .nv21, mediaType: "video/x-raw", name: "NV21", rank: 50),
        Entry(pixelFormat: .nv21m, mediaType: "video/x-raw", name: "NV21", rank: 50),
        Entry(pixelFormat: .nv16, mediaType: "video/x-raw", name: "NV16", rank: 50),
        Entry(pixelFormat: .nv16m, mediaType: "video/x-raw", name: "NV16", rank: 50),
        Entry(pixelFormat: .nv61, mediaType: "video/x-raw", name: "NV61", rank: 50),
        Entry(pixelFormat: .nv61m, mediaType: "video/x-raw", name: "NV61", rank: 50),
        Entry(pixelFormat: .nv24, mediaType: "video/x-raw", name: "NV24", rank: 50),
        Entry(pixelFormat: fourCC("RGBO"), mediaType: "video/x-raw", name: "RGB15", rank: 25),
        Entry(pixelFormat: fourCC("XR15"), mediaType: "video/x-raw", name: "RGB15", rank: 25),
        Entry(pixelFormat: fourCC("RGBQ"), mediaType: "video/x-raw", name: "BGR15", rank: 25),
        Entry(pixelFormat: fourCC("XR15-BE"), mediaType: "video/x-raw", name: "BGR15", rank: 25),
        Entry(pixelFormat: .rgb565, mediaType: "video/x-raw", name: "RGB16", rank: 25),
        Entry(pixelFormat: fourCC("BA81"), mediaType: "video/x-bayer", name: "bggr", rank: 15),
        Entry(pixelFormat: fourCC("GBRG"), mediaType: "video/x-bayer", name: "gbrg", rank: 15),
        Entry(pixelFormat: fourCC("GRBG"), mediaType: "video/x-bayer", name: "grbg", rank: 15),
        Entry(pixelFormat: fourCC("RGGB"), mediaType: "video/x-bayer", name: "rggb", rank: 15),
        Entry(pixelFormat: .grey, mediaType: "video/x-raw", name: "GRAY8", rank: 5),
        Entry(pixelFormat: .yvyu, mediaType: "video/x-raw", name: "YVYU", rank: 0),
        Entry(pixelFormat: fourCC("Y16"), mediaType: "video/x-raw", name: "GRAY16_LE", rank: 0),
        Entry(pixelFormat: fourCC("Y16-BE"), mediaType: "video/x-raw", name: "GRAY16_BE", rank: 0),
        Entry(pixelFormat: .h264, mediaType: "video/x-h264", name: "", rank: 0),
    ]

    /// One probed caps structure fixated: the entry, its size and rate.
    struct Candidate {
        var entry: CaptureFormat, gst: Entry, size: FrameSize, fps: Fraction
    }

    /// `gst_v4l2src_fixed_caps_compare` (1.22: sizes only): those at least the preferred size first, the smallest
    /// excess first (an exact width or height counts one less); the smaller ones after, in their order.
    static func compare(_ a: FrameSize, _ b: FrameSize, _ pref: FrameSize) -> Int {
        let aSmall = a.width < pref.width || a.height < pref.height, bSmall = b.width < pref.width || b.height < pref.height
        if aSmall { return 1 }
        if bSmall { return -1 }
        func excess(_ s: FrameSize) -> Int {
            var d = saturatingProduct(Swift.max(1, s.width &- pref.width), Swift.max(1, s.height &- pref.height))
            if s.width == pref.width { d -= 1 }
            if s.height == pref.height { d -= 1 }
            return d
        }
        let ad = excess(a), bd = excess(b)
        return ad == bd ? 1 : ad < bd ? -1 : 1
    }

    /// `g_list_insert_sorted_with_data`: the new element goes before the first one it does not compare above.
    static func insertSorted(_ list: inout [Candidate], _ c: Candidate, _ pref: FrameSize) {
        var i = 0
        while i < list.count && compare(c.size, list[i].size, pref) > 0 { i += 1 }
        list.insert(c, at: i)
    }

    /// The probed caps in v4l2src's order: formats by rank (an equal rank puts the later-listed format first, as
    /// `g_slist_insert_sorted`), each format's sizes largest first (`sort_by_frame_size`; ranges count as 0).
    static func probed(_ formats: [CaptureFormat]) -> [(CaptureFormat, Entry)] {
        var order: [(PixelFormat, Entry)] = []
        for f in formats where !order.contains(where: { $0.0 == f.pixelFormat }) {
            guard let e = table.first(where: { $0.pixelFormat == f.pixelFormat }) else { continue }
            var i = 0
            while i < order.count && order[i].1.rank > e.rank { i += 1 }
            order.insert((f.pixelFormat, e), at: i)
        }
        var out: [(CaptureFormat, Entry)] = []
        for (pf, e) in order {
            let entries = formats.filter { $0.pixelFormat == pf }
            func area(_ f: CaptureFormat) -> Int {
                if case .discrete(let s) = f.size { return saturatingProduct(s.width, s.height) }
                return 0
            }
            // A stable sort, largest area first.
            let sorted = entries.enumerated().sorted { a, b in
                area(a.element) != area(b.element) ? area(a.element) > area(b.element) : a.offset < b.offset
            }
            out += sorted.map { ($0.element, e) }
        }
        return out
    }

    /// The rate nearest to `pref` that `intervals` offer (the first of equals); a range clamps it.
    static func nearestRate(_ intervals: FrameIntervals?, _ pref: Fraction) -> Fraction? {
        switch intervals {
        case .discrete(let list)?:
            var best: (Fraction, Double)?
            for iv in list where iv.isPositive {
                let d = Swift.abs(iv.reciprocal.doubleValue - pref.doubleValue)
                if best == nil || d < best!.1 { best = (iv.reciprocal, d) }
            }
            return best?.0
        case let i?:
            guard let b = i.rateBounds else { return nil }
            let c = Swift.min(Swift.max(pref, b.min), b.max)
            return i.bestRate(limit: c) ?? c
        case nil: return pref
        }
    }

    static func pick(_ formats: [CaptureFormat], _ r: PolicyRequest) -> (FormatSelection?, String) {
        let caps = r.gstreamerCaps
        // The preference: the filter's own values where it fixes them, else 3840x2160 at 120 fps.
        let pref = FrameSize(width: caps.width ?? 3840, height: caps.height ?? 2160)
        let prefRate = caps.framerate ?? 120
        var sorted: [Candidate] = []
        var probedCount = 0
        for (entry, gst) in probed(formats) {
            probedCount += 1
            guard gst.mediaType == caps.mediaType, caps.format.map({ $0 == gst.name }) ?? true else { continue }
            // Intersection with the filter: its width/height/framerate must be offered.
            var size = entry.size.closest(to: pref)
            if let w = caps.width, let h = caps.height {
                guard entry.size.contains(FrameSize(width: w, height: h)) else { continue }
                size = FrameSize(width: w, height: h)
            } else if let w = caps.width {
                guard entry.size.closest(to: FrameSize(width: w, height: pref.height)).width == w else { continue }
                size = entry.size.closest(to: FrameSize(width: w, height: pref.height))
            } else if let h = caps.height {
                guard entry.size.closest(to: FrameSize(width: pref.width, height: h)).height == h else { continue }
                size = entry.size.closest(to: FrameSize(width: pref.width, height: h))
            }
            var fps: Fraction
            if let rate = caps.framerate {
                if let i = entry.intervals { guard SelectionPolicy.offers(i, rate) else { continue } }
                fps = rate
            } else {
                guard let n = nearestRate(entry.intervals, prefRate) else { continue }
                fps = n
            }
            insertSorted(&sorted, Candidate(entry: entry, gst: gst, size: size, fps: fps), pref)
        }
        guard let first = sorted.first else {
            return (nil, "not-negotiated: caps \(caps) match none of the \(probedCount) probed structures")
        }
        let prefText = "preference \(pref)@\(prefRate)"
        if let state = r.deviceState,
            let kept = sorted.first(where: { $0.entry.pixelFormat == state.pixelFormat && $0.size == state.size && $0.fps == state.fps })
        {
            return (
                FormatSelection(format: kept.entry, size: kept.size, fps: kept.fps),
                "the device's current format \(state) is among the \(sorted.count) candidates of \(caps): kept (no TRY_FMT)"
            )
        }
        let label = first.gst.name.isEmpty ? first.gst.mediaType : first.gst.name
        return (
            FormatSelection(format: first.entry, size: first.size, fps: first.fps),
            "\(sorted.count) structure\(sorted.count == 1 ? "" : "s") match\(sorted.count == 1 ? "es" : "") \(caps); \(prefText); sorted by size (1.22 ignores the rate), then v4l2src's format rank: \(label) first, rate nearest \(prefRate)"
        )
    }
}

// MARK: - ffmpeg

/// ffmpeg's `-f v4l2` input (libavdevice/v4l2.c) with `-video_size`, `-framerate` and `-input_format`.
enum FFmpegModel {
    /// `ff_fmt_conversion_table`, in order: the V4L2 fourcc, ffmpeg's pixel format name (or codec), and whether
    /// it is a codec (`mjpeg`, `h264`) rather than raw video.
    static let table: [(PixelFormat, String, codec: Bool)] = [
        (.i420, "yuv420p", false), (.yv12, "yuv420p", false), (.yuv422p, "yuv422p", false), (.yuyv, "yuyv422", false),
        (.uyvy, "uyvy422", false), (fourCC("411P"), "yuv411p", false), (fourCC("YUV9"), "yuv410p", false), (fourCC("YVU9"), "yuv410p", false),
        (fourCC("RGBO"), "rgb555le", false), (fourCC("RGBQ"), "rgb555be", false), (.rgb565, "rgb565le", false), (fourCC("RGBR"), "rgb565be", false),
        (.bgr24, "bgr24", false), (.rgb24, "rgb24", false), (.bgr32, "bgr0", false), (.rgb32, "0rgb", false), (.grey, "gray", false),
        (fourCC("Y16"), "gray16le", false), (.nv12, "nv12", false), (.mjpeg, "mjpeg", true), (.jpeg, "mjpeg", true), (.h264, "h264", true),
        (fourCC("CPIA"), "cpia", true), (fourCC("BA81"), "bayer_bggr8", false), (fourCC("GBRG"), "bayer_gbrg8", false),
        (fourCC("GRBG"), "bayer_grbg8", false), (fourCC("RGGB"), "bayer_rggb8", false),
    ]
    /// ffmpeg pixel format names of formats the table lacks (asking for them falls back to the table's order).
    static let otherNames: [PixelFormat: String] = [.nv21: "nv21", .nv16: "nv16", .nv24: "nv24", .nv42: "nv42", .yvyu: "yvyu422"]

    /// The `-input_format` value for a pixel format, nil when ffmpeg has no name for it.
    static func inputFormat(_ pf: PixelFormat) -> String? { table.first { $0.0 == pf }?.1 ?? otherNames[pf] }

    static func pick(_ formats: [CaptureFormat], _ r: PolicyRequest) -> (FormatSelection?, String) {
        let driver = DriverModel(formats: formats)
        let listed = Set(formats.map(\.pixelFormat))
        var tried: PixelFormat?
        var candidates = table
        var note = "no -input_format: the first of ff_fmt_conversion_table the driver takes"
        if let asked = r.pixelFormats.first {
            guard let name = inputFormat(asked) else { return (nil, "No such input format: \(asked) has no ffmpeg name") }
            let codec = table.first { $0.1 == name }?.codec ?? false
            // device_try_init: the table's first fourcc for that name; S_FMT answering another format is EINVAL,
            // then the table is walked (codecs: only that codec's entries; a pixel format name: all of them).
            tried = table.first { $0.1 == name }?.0
            if let t = tried, listed.contains(t) {
                candidates = [(t, name, codec)]
            } else {
                candidates = codec ? table.filter { $0.1 == name } : table
            }
            note =
                "-input_format \(name)"
                + (tried.map { listed.contains($0) ? "" : " (\($0) not listed: the table's order)" } ?? " (not in the table: the table's order)")
        }
        guard let fourcc = candidates.first(where: { listed.contains($0.0) })?.0 else {
            return (nil, "Cannot find a proper format (\(note))")
        }
        guard let set = driver.setFormat(fourcc, r.size) else { return (nil, "the camera lists no format") }
        let fps = driver.setRate(set.entry, r.fps)
        return (
            FormatSelection(format: set.entry, size: set.size, fps: fps),
            "\(note): \(fourcc); S_FMT \(r.size)\(set.size == r.size ? "" : " → \(set.size) (the driver changed it)"), S_PARM \(r.fps)\(fps == r.fps ? "" : " → \(fps)") fps"
        )
    }
}
