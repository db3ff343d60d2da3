// The fixture cameras: cameras described by a fixture file (JSON or a `v4l2-ctl --list-formats-ext` dump)
// that really stream — the test pattern with a frame counter, in the negotiated format, size and rate.
import Foundation
public import VideoCapture
import VideoProcessing
import Synchronization
import SystemIO

/// Provides the built-in fixture cameras (`fixture:NAME`, from `Fixtures/cameras/`) and any fixture file
/// a user names by path.
public final class FixtureCameraProvider: CaptureDeviceProvider {
    /// When a fixture camera sends its frames.
    public enum Pacing: Sendable, Equatable {
        /// Frames at the negotiated rate on the monotonic clock (the default, like a real camera).
        case realTime
        /// Frames as fast as the consumers take them; timestamps advance exactly 1/fps from the first frame.
        /// Pair with `CameraVideoCapturer.Configuration(alwaysDiscardsLateFrames: false)` to lose none.
        case asFastAsConsumed
    }

    /// How the fixture cameras of a provider stream.
    public struct Options: Sendable {
        /// When frames are sent: in real time, or as fast as they are consumed.
        public var pacing: Pacing
        /// Simulates an unplug: the stream fails with `.disconnected` after this many frames.
        public var disconnectAfterFrames: Int?
        /// Number of frame buffers, as a V4L2 driver's queue (frames held by consumers are not reused).
        public var bufferCount: Int
        /// Private buffers used when consumers hold all the others (as `V4L2Stream.Configuration.copyBuffers`).
        public var copyBuffers: Int = 2
        /// Sensor-like noise added to luma (amplitude, 0 = the clean pattern), so encoders have detail to spend bits on.
        public var noise: Int
        /// Faults the cameras play (a stall, an unplug), each once per provider (`FixtureFault`).
        public var faults: [FixtureFault] = []
        /// A stall this long or longer ends the stream with `.timeout`, as a V4L2 stream ends after its restart
        /// (nanoseconds; 3 s by default, `V4L2Stream.Configuration.noFrameTimeoutNs`'s default).
        public var stallTimeoutNs: Int64 = 3_000_000_000
        /// How an H.264 fixture's own encoder streams (nil: as a UVC H.264 camera, `H264Stream.uvc`).
        public var h264Stream: H264Stream?
        /// Options with `bufferCount` at least 2 and `noise` clamped to 0...64.
        public init(pacing: Pacing = .realTime, disconnectAfterFrames: Int? = nil, bufferCount: Int = 4, noise: Int = 0) {
            self.pacing = pacing
            self.disconnectAfterFrames = disconnectAfterFrames
            self.bufferCount = max(2, bufferCount)
            self.noise = max(0, min(64, noise))
        }
    }

    /// How an H.264 fixture camera's stream is made: its key-frame interval, where the capture joins the stream and
    /// whether the camera makes a key frame when asked. A UVC H.264 camera (the default) starts its stream with the
    /// capture, makes a key frame a second and one on request, and sends SPS and PPS once; a v4l2loopback node fed
    /// by a writer that started earlier (`loopback(keyFrameInterval:joinedAt:)`) is joined mid-stream, has no key-frame
    /// control, and repeats SPS and PPS before every IDR (as x264 and ffmpeg write them).
    public struct H264Stream: Sendable, Equatable {
        /// Frames from one IDR to the next (nil: a second's worth at the camera's rate).
        public var keyFrameInterval: Int?
        /// Frames of its stream the camera made before the capture joined it: the first frame delivered is a key
        /// frame only when this is a multiple of the interval.
        public var joinedAt: Int
        /// Whether `requestKeyFrame()` makes the next frame an IDR (V4L2's `FORCE_KEY_FRAME`).
        public var answersKeyFrameRequests: Bool
        /// Whether SPS and PPS come before every IDR, not only the first.
        public var repeatsParameterSets: Bool

        /// A stream with these properties.
        public init(keyFrameInterval: Int? = nil, joinedAt: Int = 0, answersKeyFrameRequests: Bool = true, repeatsParameterSets: Bool = false) {
            self.keyFrameInterval = keyFrameInterval.map { Swift.max(1, $0) }
            self.joinedAt = Swift.max(0, joinedAt)
            self.answersKeyFrameRequests = answersKeyFrameRequests
            self.repeatsParameterSets = repeatsParameterSets
        }

        /// A UVC H.264 camera's stream.
        public static let uvc = H264Stream()

        /// A v4l2loopback node's: a key frame every `keyFrameInterval` frames, joined at frame `joinedAt` of the
        /// writer's stream, no key frame on request, SPS and PPS before every IDR.
        public static func loopback(keyFrameInterval: Int, joinedAt: Int) -> H264Stream {
            H264Stream(keyFrameInterval: keyFrameInterval, joinedAt: joinedAt, answersKeyFrameRequests: false, repeatsParameterSets: true)
        }

        /// Parses `KEYINT@JOINED` (`30@13`: frames 1...100,000 and 0...100,000) as `loopback(keyFrameInterval:joinedAt:)`.
        /// A refusal names the text.
        public init(parsing text: String) throws(CaptureError) {
            let parts = text.split(separator: "@", omittingEmptySubsequences: false)
            guard parts.count == 2, let k = Int(parts[0]), (1...100_000).contains(k), let j = Int(parts[1]), (0...100_000).contains(j) else {
                throw CaptureError(
                    .invalidArgument, "an H.264 fixture stream is KEYINT@JOINED (1...100000 @ 0...100000), got \"\(text.prefix(40))\"")
            }
            self = .loopback(keyFrameInterval: k, joinedAt: j)
        }
    }

    /// How this provider's cameras stream.
    public let options: Options
    /// What the faults of `options` have done so far.
    private let playback: FaultPlayback
    /// The live controls of each fixture camera opened through this provider, by path.
    private let live = Mutex<[String: FixtureControls]>([:])
    /// Traces being replayed (`fixture:trace:FILE`), by device path: where each camera is in its trace.
    private let traces = Mutex<[String: TracePlayback]>([:])

    /// The replay of the trace behind `path` (`fixture:trace:FILE`), opened on first use.
    private func trace(_ path: String) throws(CaptureError) -> TracePlayback {
        if let known = traces.withLock({ $0[path] }) { return known }
        let file = String(path.dropFirst("fixture:trace:".count))
        guard FileSystem.exists(file) else {
            throw CaptureError(.unknownDevice, "no trace at \(file) (record one with a CameraTraceWriter, as `trace record` does)", device: path)
        }
        let made: TracePlayback
        do throws(FixtureParseError) { made = try TracePlayback(path: file) } catch {
            throw CaptureError(.invalidFixture, error.description, device: path)
        }
        return traces.withLock { t in
            if let known = t[path] { return known }
            t[path] = made
            return made
        }
    }
    private var builtins: [(name: String, description: CameraDescription)] { FixtureCameraProvider.parsedBuiltins }

    /// A provider of the built-in fixtures and of fixture files named by path.
    public init(options: Options = .init()) {
        self.options = options
        playback = FaultPlayback(options.faults)
    }

    /// Names of the built-in fixtures (`fixture:NAME`), without parsing them.
    public var builtinNames: [String] { BuiltinCameras.files.map(\.name) }

    /// The built-in fixtures, compiled into the binary (generated at build time from Fixtures/cameras/
    /// by the EmbedFixtures plugin), parsed once per process on first use (a static let is lazy and thread-safe).
    static let parsedBuiltins: [(name: String, description: CameraDescription)] = BuiltinCameras.files.compactMap { f in
        // A broken built-in is a packaging bug; it is skipped here and caught by the tests.
        (try? CameraDescription.parse(f.text, file: "fixture:" + f.name)).map { (f.name, $0) }
    }

    public func devices() -> [CaptureDevice] {
        builtins.map { device(name: $0.name, path: "fixture:\($0.name)", description: $0.description) }
    }

    private func device(name: String, path: String, description: CameraDescription) -> CaptureDevice {
        CaptureDevice(
            uniqueID: path, name: description.name, position: description.position, path: path,
            driver: "fixture", busInfo: "fixture:\(name)")
    }

    public func device(for spec: String) throws(CaptureError) -> CaptureDevice? {
        if spec.hasPrefix("fixture:trace:") {
            return device(name: "trace", path: spec, description: try trace(spec).description)
        }
        if spec.hasPrefix("fixture:") {
            let name = String(spec.dropFirst("fixture:".count))
            guard let b = builtins.first(where: { $0.name == name }) else {
                throw CaptureError(
                    .unknownDevice, "unknown fixture camera \"\(name)\"; built-in fixtures: \(builtinNames.joined(separator: ", "))", device: spec)
            }
            return device(name: name, path: spec, description: b.description)
        }
        // A fixture file named by path: anything outside /dev that exists. What is not a regular file (a FIFO,
        // a directory, a link to a device) is then a clear error from the reader, never a blocked read. A .json or
        // .txt name that is not there is a fixture file missing, said so (not "unknown device").
        guard !spec.hasPrefix("/dev/") else { return nil }
        guard FileSystem.exists(spec) else {
            guard spec.lowercased().hasSuffix(".json") || spec.lowercased().hasSuffix(".txt") else { return nil }
            throw CaptureError(
                .unknownDevice,
                "no fixture file at \(spec): the file does not exist (a fixture file is named by its path, a built-in fixture as fixture:NAME)",
                device: spec)
        }
        let d = try description(forPath: spec)
        return device(name: fileStem(spec), path: spec, description: d)
    }

    /// The parsed description behind a fixture device (built-in or file). Throws `.unknownDevice` for an unknown
    /// built-in name, `.invalidFixture` (with the file and line) for a malformed file.
    public func description(of device: CaptureDevice) throws(CaptureError) -> CameraDescription {
        if device.path.hasPrefix("fixture:trace:") { return try trace(device.path).description }
        if device.path.hasPrefix("fixture:") {
            let name = String(device.path.dropFirst("fixture:".count))
            guard let b = builtins.first(where: { $0.name == name }) else {
                throw CaptureError(.unknownDevice, "unknown fixture camera \"\(name)\"", device: device.path)
            }
            return b.description
        }
        return try description(forPath: device.path)
    }

    private func description(forPath path: String) throws(CaptureError) -> CameraDescription {
        let result = FixtureCameraProvider.parsedFiles.withLock { cache in
            if let known = cache[path] { return known }
            let r: Result<CameraDescription, FixtureParseError>
            do throws(FixtureParseError) { r = .success(try CameraDescription.load(path: path)) } catch { r = .failure(error) }
            cache[path] = r
            return r
        }
        switch result {
        case .success(let d): return d
        case .failure(let error): throw CaptureError(.invalidFixture, error.description, device: path)
        }
    }

    /// Fixture files named by path, read and parsed once per process (an error is remembered too).
    static let parsedFiles = Mutex<[String: Result<CameraDescription, FixtureParseError>]>([:])

    /// The formats the fixture lists, in its order (unconvertible ones such as H264 or Bayer included, as a real
    /// camera lists them).
    public func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        playback.formats(try description(of: device).formats, of: device.path)
    }

    /// The device's live controls: its declared ones, with the values set through this provider.
    func liveControls(_ device: CaptureDevice) throws(CaptureError) -> FixtureControls {
        if let known = live.withLock({ $0[device.path] }) { return known }
        let declared = try description(of: device).controls
        return live.withLock { m in
            if let known = m[device.path] { return known }
            let c = FixtureControls(declared)
            m[device.path] = c
            return c
        }
    }

    public func controls(of device: CaptureDevice) throws(CaptureError) -> [CameraControl] {
        try liveControls(device).list()
    }

    public func setControl(_ id: CameraControlID, to value: CameraControl.Value, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        try liveControls(device).set(id, to: value, device: device.path)
    }

    public func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        if device.path.hasPrefix("fixture:trace:") { return try openTrace(device, request, sink) }
        if let away = playback.awayNs(device.path) {
            throw CaptureError(
                .disconnected, "\(device.path) is unplugged (a simulated fault), back in \(Double(away / 1_000_000) / 1000) s", device: device.path)
        }
        if let dark = playback.darkNs(device.path) {
            throw CaptureError(
                .noSignal, "\(device.path) detects no signal (a simulated fault), back in \(Double(dark / 1_000_000) / 1000) s", device: device.path)
        }
        let desc = try description(of: device)
        playback.declare(desc.faults, for: device.path)
        if playback.refuses(request.pixelFormat, request.size, on: device.path) {
            throw CaptureError(
                .ioctlFailed,
                "VIDIOC_STREAMON failed on \(device.path) (a simulated bus without bandwidth for \(request.pixelFormat) \(request.size))",
                errno: ENOSPC, device: device.path, operation: "VIDIOC_STREAMON")
        }
        let offered = playback.formats(desc.formats, of: device.path)
        guard let entry = offered.first(where: { $0.pixelFormat == request.pixelFormat && $0.size.contains(request.size) }) else {
            throw CaptureError(.unsupportedFormat, "\(device.path) does not offer \(request.pixelFormat) \(request.size)", device: device.path)
        }
        guard request.pixelFormat.isConvertibleToI420 || request.pixelFormat == .h264 else {
            throw CaptureError(
                .unsupportedFormat, "fixture cameras cannot produce \(request.pixelFormat) (\(request.pixelFormat.name)) frames", device: device.path)
        }
        if desc.quirks.failsAtStreamOn(request.pixelFormat, request.size) {
            throw CaptureError(
                .ioctlFailed,
                "VIDIOC_STREAMON failed on \(device.path) for \(request.pixelFormat) \(request.size) (a listed mode the camera never sends)",
                errno: EIO, device: device.path, operation: "VIDIOC_STREAMON")
        }
        // Like a driver, apply the nearest offered rate not above the request (or, ignoring S_PARM, the highest).
        let fps =
            desc.quirks.ignoresFrameInterval
            ? entry.intervals?.rateBounds?.max ?? request.fps : entry.intervals?.bestRate(limit: request.fps) ?? request.fps
        let size = desc.quirks.applied(request.size) // S_FMT may round the size
        let stride = request.pixelFormat.minimumStride(width: size.width) ?? 0
        let applied = AppliedFormat(
            pixelFormat: request.pixelFormat, size: size, stride: stride, fps: fps, colorSpace: desc.colorSpace(for: request.pixelFormat))
        return FixtureStream(
            applied: applied, rotation: desc.rotation, options: options, controls: try liveControls(device), sink: sink,
            faults: (device.path, playback, desc.formats), deliveredFps: desc.quirks.delivered(request.pixelFormat, request.size))
    }
}

extension FixtureCameraProvider {
    /// A replayed trace streams the mode it recorded, only: another is refused, naming the one it has. While the
    /// camera is away after a recorded loss, or after the trace's end, opening it fails with `.disconnected`.
    fileprivate func openTrace(_ device: CaptureDevice, _ request: StreamRequest, _ sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        let t = try trace(device.path)
        let a = t.header.applied
        guard request.pixelFormat == a.pixelFormat && request.size == a.size else {
            throw CaptureError(
                .unsupportedFormat,
                "\(device.path) replays \(a.pixelFormat) \(a.size), what it recorded; \(request.pixelFormat) \(request.size) was asked",
                device: device.path)
        }
        let (away, ended) = t.state.withLock { ($0.awayUntilNs, $0.ended) }
        if ended { throw CaptureError(.disconnected, "\(device.path): the trace ended (its camera is gone)", device: device.path) }
        let now = monotonicNanoseconds()
        if away > now {
            throw CaptureError(
                .disconnected, "\(device.path) is away as in its trace, back in \(Double((away - now) / 1_000_000) / 1000) s", device: device.path)
        }
        return TraceStream(path: device.path, playback: t, sink: sink, realTime: options.pacing == .realTime, bufferCount: options.bufferCount)
    }
}

/// One streaming fixture camera: a thread that renders and paces frames.
final class FixtureStream: CaptureStream, Sendable {
    /// index × num / den in 128 bits (a rate like 4294967295/143165576 would overflow 64), saturated.
    static func offset(_ index: Int64, _ num: Int128, _ den: Int128) -> Int64 {
        Int64(exactly: Int128(index) * num / Swift.max(den, 1)) ?? .max / 2
    }

    // Everything is immutable or guarded; the renderer objects are locals of the stream's own thread.
    let applied: AppliedFormat
    private let rotation: VideoRotation
    private let options: FixtureCameraProvider.Options
    private let sink: FrameSink
    private let controls: FixtureControls?
    /// The camera thread's stop flag (WorkerThread's protocol: set, then join; the loop waits with a timeout).
    private let stopFlag = StopFlag()
    private let keyFrameRequested = Atomic<Bool>(false)
    private let bitrateRequested = Atomic<Int>(0)
    private let thread = Mutex<WorkerThread?>(nil)
    /// The camera's path, the provider's fault playback and the formats the camera lists (a `resize` must name one).
    private let faults: (path: String, playback: FaultPlayback, listed: [CaptureFormat])?
    /// The rate frames come at when it is not the applied one (`FixtureQuirk.deliversRate`).
    private let deliveredFps: Fraction?

    /// An H.264 fixture's next frame is an IDR; other formats have no key frames.
    func requestKeyFrame() -> Bool {
        guard applied.pixelFormat == .h264, options.h264Stream?.answersKeyFrameRequests ?? true else { return false }
        keyFrameRequested.store(true, ordering: .releasing)
        return true
    }

    /// An H.264 fixture's encoder targets `bitsPerSecond` (10 kbps…20 Mbps) from its next frame.
    func requestBitrate(_ bitsPerSecond: Int) -> Bool {
        guard applied.pixelFormat == .h264 else { return false }
        bitrateRequested.store(min(max(bitsPerSecond, 10_000), 20_000_000), ordering: .releasing)
        return true
    }

    init(
        applied: AppliedFormat, rotation: VideoRotation, options: FixtureCameraProvider.Options, controls: FixtureControls? = nil, sink: FrameSink,
        faults: (path: String, playback: FaultPlayback, listed: [CaptureFormat])? = nil, deliveredFps: Fraction? = nil
    ) {
        self.faults = faults
        self.deliveredFps = deliveredFps
        self.applied = applied
        self.rotation = rotation
        self.options = options
        self.sink = sink
        self.controls = controls
        thread.withLock { $0 = WorkerThread(name: "fixture-camera", stopFlag: stopFlag) { [self] _ in run() } }
    }

    func stop() {
        if let thread = thread.withLock({ $0 }) { thread.stop() } else { stopFlag.set() }
    }

    /// Sleeps until `ns` on the monotonic clock, in slices of at most 100 ms, so that a stop is seen within one (a
    /// camera slower than 1 fps used to ignore Ctrl-C until its next frame).
    private func sleepUntil(_ ns: Int64) { FixtureStream.sleep(until: ns, unless: stopFlag) }
    /// Sleeps until `ns` on the monotonic clock in slices of at most 100 ms, returning early once `stop` is set (a
    /// simulated camera's thread: the fixture's and a replayed trace's).
    static func sleep(until ns: Int64, unless stop: StopFlag) {
        while !stop.isSet {
            let now = monotonicNanoseconds()
            if now >= ns { return }
            Sleep.until(monotonicNs: min(ns, now &+ 100_000_000))
        }
    }

    /// A `resize` or `nosignal` fault: the source changes (the stream's end, as `V4L2_EVENT_SOURCE_CHANGE` ends a
    /// receiver's). A `resize` to a size the camera does not list ends the run with `.invalidFixture` instead.
    private func changeSource(_ fault: FixtureFault, _ path: String, _ playback: FaultPlayback, _ listed: [CaptureFormat]) -> CaptureError {
        if let size = fault.newSize {
            guard listed.contains(where: { $0.size.contains(size) }) else {
                return CaptureError(.invalidFixture, "fixture fault \(fault): \(path) lists no \(size) format to change to", device: path)
            }
            playback.resize(path, to: size)
            return CaptureError(
                .sourceChanged, "the source of \(path) changed to \(size) at frame \(fault.atFrame) (a simulated fault)", device: path)
        }
        playback.loseSignal(path, forNs: Int64(fault.seconds * 1e9))
        return CaptureError(
            .sourceChanged, "the source of \(path) lost its signal at frame \(fault.atFrame) (a simulated fault, back in \(fault.seconds) s)",
            device: path)
    }

    private func run() {
        // Wake at the frame's time, not up to 50 µs later (the default timer slack): a camera's frame arrives on time.
        try? Sleep.setTimerSlack(nanoseconds: 1)
        let w = applied.size.width, h = applied.size.height
        let format = applied.pixelFormat
        // The picture changes only where it moves; MJPEG re-encodes only the tiles that changed.
        // MJPEG keeps encoded tiles per noise field: its noise cycles through a few fields (raw formats get fresh
        // noise every frame, which costs them only two SIMD passes).
        // The pattern is drawn in the range the frames are labelled with: MJPEG's JPEGs are full range (JFIF), as is
        // a Y'CbCr camera whose fixture says so. RGB and grey frames are written from a limited-range picture (libyuv's
        // BT.601 matrix expands it to full-range RGB).
        let fullRange = applied.colorSpace.range == .full && (format.isCompressed || format.isYCbCr)
        // An H.264 camera encodes the pattern itself (a real OpenH264 stream), as a UVC H.264 camera does.
        let h264: FixtureH264Writer?
        if format == .h264 {
            do {
                h264 = try FixtureH264Writer(
                    width: w & ~1, height: h & ~1, fps: applied.fps, colorSpace: applied.colorSpace, stream: options.h264Stream ?? .uvc)
            } catch {
                sink.failed(CaptureError(.streamFailed, "fixture camera could not start its H.264 encoder: \(error)"))
                return
            }
        } else {
            h264 = nil
        }
        let jpeg = format.isCompressed && h264 == nil
        let renderer = PatternRenderer(
            width: h264 == nil ? w : w & ~1, height: h264 == nil ? h : h & ~1, noise: options.noise,
            noisePhases: jpeg ? TiledMJPEGWriter.phases : nil, fullRange: fullRange)
        let tiled = jpeg ? TiledMJPEGWriter(width: w, height: h) : nil
        let writer = FormatWriter()
        let capacity = h264?.capacity ?? tiled?.capacity ?? FormatWriter.capacity(for: format, width: w, height: h)
        // `bufferCount` driver-like buffers, then `copyBuffers` private ones used only when all those are held.
        var storages = (0..<(options.bufferCount + options.copyBuffers)).map { _ in FrameStorage(pooledCapacity: capacity) }
        // Touch every page now, like a driver's buffers: the first frames cost no page faults.
        for s in storages { memset(s.mutableBaseAddress, 0, s.capacity) }
        // Frame period in nanoseconds, exact as a fraction: 1e9 * den / num.
        let pace = deliveredFps ?? applied.fps
        let periodNum = Int128(1_000_000_000) * Int128(pace.denominator), periodDen = Int128(pace.numerator)
        let start = monotonicNanoseconds()
        let periodNs = Int64(periodNum / periodDen)
        // Real time: each picture is rendered just before it is due (by about its recent rendering time), so the
        // simulator's work does not compete with the consumer's for the CPU while it handles the previous frame.
        var renderNs: Int64 = 0
        var index: Int64 = 0
        // A stream joined mid-way: the frames its writer made before the capture joined are encoded and not delivered.
        let joined = Int64(h264 == nil ? 0 : options.h264Stream?.joinedAt ?? 0)
        if let h264, joined > 0, let scratch = storages.first {
            do {
                for k in 0..<joined {
                    renderer.advance(to: UInt64(k))
                    _ = try h264.write(renderer.output, timestampNs: Self.offset(k, periodNum, periodDen), into: scratch)
                }
            } catch {
                storages.removeAll()
                sink.failed(CaptureError(.streamFailed, "fixture camera could not render H264: \(error)"))
                return
            }
        }
        var skew: Int64 = 0 // frames a stall skipped: the pictures after it are due at their real time
        var corruptLeft = 0 // frames of a `corrupt` burst still to come
        var jumpNs: Int64 = 0 // how far `timejump` faults set the camera's clock back
        while !stopFlag.isSet {
            if let (path, playback, listed) = faults, let fault = playback.frame(of: path) {
                let ns = Int64(fault.seconds * 1e9)
                switch fault.kind {
                case .corrupt: corruptLeft = Int(fault.seconds) // this frame and the next ones, made below as any other
                case .timejump: jumpNs += ns
                case .resize, .nosignal:
                    storages.removeAll()
                    sink.failed(changeSource(fault, path, playback, listed))
                    return
                case .unplug:
                    storages.removeAll()
                    playback.unplug(path, forNs: ns)
                    sink.failed(
                        CaptureError(
                            .disconnected, "\(path) was unplugged at frame \(fault.atFrame) (a simulated fault, back in \(fault.seconds) s)",
                            device: path))
                    return
                case .stall, .nospace:
                    let stallEnd = monotonicNanoseconds() + min(ns, options.stallTimeoutNs)
                    sleepUntil(stallEnd)
                    if ns >= options.stallTimeoutNs {
                        storages.removeAll()
                        sink.failed(
                            CaptureError(
                                .timeout,
                                "\(path) delivered no frame for \(options.stallTimeoutNs / 1_000_000) ms (a simulated stall at frame \(fault.atFrame))",
                                device: path))
                        return
                    }
                    let late = monotonicNanoseconds() - (start + Self.offset(index + skew, periodNum, periodDen))
                    if late > 0 { skew += Int64(Int128(late) * periodDen / periodNum) }
                }
            }
            if let n = options.disconnectAfterFrames, index >= n {
                storages.removeAll()
                sink.failed(CaptureError(.disconnected, "fixture camera disconnected after \(n) frames (simulated unplug)"))
                return
            }
            let due = start + Self.offset(index + skew, periodNum, periodDen)
            if options.pacing == .realTime { sleepUntil(due - min(periodNs / 2, renderNs * 3 / 2 + 1_000_000)) }
            guard !stopFlag.isSet else { break }
            // A free buffer, as a driver's queue: one the consumers no longer hold. The frame lifetime contract
            // is the V4L2 one: with every buffer held, a private copy buffer; with those held too, a drop.
            var slot = -1
            for i in 0..<options.bufferCount where isKnownUniquelyReferenced(&storages[i]) {
                slot = i
                break
            }
            if slot < 0 {
                if options.pacing == .asFastAsConsumed {
                    Sleep.for(nanoseconds: 500_000)
                    continue
                }
                for i in options.bufferCount..<storages.count where isKnownUniquelyReferenced(&storages[i]) {
                    slot = i
                    break
                }
                if slot < 0 {
                    sleepUntil(due) // the frame this would have been is lost at its time
                    index += 1
                    sink.dropped(.buffersHeld, 1)
                    continue
                }
                sink.copied()
            }
            if let controls { renderer.settings = controls.picture } // set while streaming: the next frame shows it
            let renderStart = monotonicNanoseconds()
            renderer.advance(to: UInt64(index))
            var buffer: VideoFrameBuffer
            var isKeyFrame = false
            do {
                if let h264 {
                    if keyFrameRequested.exchange(false, ordering: .acquiringAndReleasing) { h264.requestKeyFrame() }
                    let bitrate = bitrateRequested.exchange(0, ordering: .acquiringAndReleasing)
                    if bitrate > 0 { h264.requestBitrate(bitrate) }
                    let s = storages[slot]
                    let (used, key) = try h264.write(
                        renderer.output, timestampNs: Self.offset(index + skew + joined, periodNum, periodDen), into: s)
                    isKeyFrame = key
                    buffer = VideoFrameBuffer(pixelFormat: format, width: w, height: h, stride: 0, bytesUsed: used, storage: s)
                } else if let tiled {
                    let s = storages[slot]
                    let used = try tiled.write(renderer, into: s.mutableBaseAddress.assumingMemoryBound(to: UInt8.self), capacity: s.capacity)
                    buffer = VideoFrameBuffer(pixelFormat: format, width: w, height: h, stride: 0, bytesUsed: used, storage: s)
                } else {
                    buffer = try writer.write(renderer.output, as: format, into: storages[slot])
                }
            } catch {
                storages.removeAll()
                sink.failed(CaptureError(.streamFailed, "fixture camera could not render \(format): \(error)"))
                return
            }
            // The capture time is when the frame was due (as a sensor stamps its exposure), in both pacings:
            // exact 1/fps steps, also when this thread runs late on a loaded machine. In real time the picture is
            // made ahead and handed over at that time, as a camera's finished frame arrives: the consumer's
            // capture-to-output latency is then its own work, not the simulator's rendering.
            renderNs = max(monotonicNanoseconds() - renderStart, renderNs * 15 / 16) // the longest recent one, decaying
            if options.pacing == .realTime { sleepUntil(due) }
            guard !stopFlag.isSet else { break }
            let ts = due - jumpNs
            if corruptLeft > 0 { // a `corrupt` burst: MJPEG cut short in its headers, anything else flagged as the driver would
                corruptLeft -= 1
                guard format == .mjpeg || format == .jpeg else {
                    sink.dropped(.corruptBuffer, 1)
                    index += 1
                    continue
                }
                buffer = VideoFrameBuffer(
                    pixelFormat: format, width: w, height: h, stride: 0, bytesUsed: min(buffer.bytesUsed, 96), storage: storages[slot])
            }
            var frame = VideoFrame(buffer: buffer, rotation: rotation, timestampNs: ts, sequence: UInt64(index), colorSpace: applied.colorSpace)
            frame.isKeyFrame = isKeyFrame
            sink.frame(frame)
            index += 1
        }
    }
}
