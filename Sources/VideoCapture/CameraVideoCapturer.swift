import Foundation
public import Logging
import Synchronization
import SystemIO

/// Receives frames and events from a `CameraVideoCapturer`, on the capturer's delivery thread.
/// A delegate that takes long makes the capturer drop late frames (counted, see `Configuration`).
public protocol CameraVideoCapturerDelegate: AnyObject, Sendable {
    /// A new frame, in capture order. Return quickly: while this runs, newer frames wait (and the oldest are dropped).
    /// The frame's buffer may be the driver's memory; see ``VideoFrame`` for how long it may be held.
    func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame)
    /// `count` frames were lost, and why (late consumers, driver gaps, corrupt or short buffers). Optional.
    func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason)
    /// Capture ended: `error` is nil after `stopCapture()`, else why it stopped (disconnect, I/O error…).
    func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?)
    /// `stopCapture()` was called: on its caller's thread, after the camera stopped and before the capturer waits
    /// for its delivery thread to finish. A consumer that can make that thread wait (a stream that waits for room)
    /// must stop waiting here, or the stop would wait for it forever. Optional.
    func capturerWillStop(_ capturer: CameraVideoCapturer)
}

public extension CameraVideoCapturerDelegate {
    /// Does nothing.
    func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason) {}
    func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?) {}
    /// Does nothing.
    func capturerWillStop(_ capturer: CameraVideoCapturer) {}
}

/// Counters since the capturer was created.
public struct CaptureStatistics: Sendable, Equatable {
    /// Frames the camera produced (delivered + dropped after capture).
    public var captured = 0
    /// Frames handed to the consumers.
    public var delivered = 0
    /// Frames lost, by reason.
    public var dropped: [FrameDropReason: Int] = [:]
    /// Frames copied out of driver memory because consumers held every other buffer (see the frame lifetime
    /// contract in `VideoFrame`); bounded by the stream's copy pool.
    public var copied = 0
    /// Frames whose camera timestamp went backwards (a driver whose clock reset): stamped with the clock at their
    /// arrival instead, so timestamps stay increasing and about a frame apart (never squeezed 1 ns apart).
    public var timestampsReplaced = 0
    /// Frames lost, all reasons together.
    public var totalDropped: Int { dropped.values.reduce(0, +) }
}

/// The Linux counterpart of WebRTC's `RTCCameraVideoCapturer`: finds cameras, negotiates a format, streams
/// `VideoFrame`s to any number of delegates and `AsyncSequence` consumers, switches cameras while running.
///
/// Frames are delivered on one delivery thread, in order. When consumers are slower than the camera, the
/// newest frames win: at most `Configuration.maxPendingFrames` wait, older ones are dropped and counted
/// (WebRTC's `alwaysDiscardsLateVideoFrames = YES`). Timestamps are strictly increasing monotonic nanoseconds,
/// across device switches too.
///
/// **Delegates are held strongly** until `removeDelegate` (or until the capturer goes): adding one is enough to
/// receive frames. A delegate that keeps a strong reference to the capturer makes a cycle; remove it when done,
/// or use the `capturer` argument each callback passes.
///
/// **Releasing the capturer stops capture**: the device is stopped (STREAMOFF), unmapped and closed, and frame
/// streams end, as if `stopCapture()` had been called.
///
/// **Generations.** Every start, switch and stop bumps `State.generation`; a stream is opened for one
/// generation and every callback it makes (frame, drop, failure) carries it. Callbacks from a generation that
/// is no longer current are ignored, so a stream that is still winding down after a stop or a switch can
/// never deliver into the next one, and a stop that races a start or a switch wins: the late stream is
/// stopped at once instead of being recorded as running.
public final class CameraVideoCapturer: Sendable {
    /// How a capturer delivers frames and prepares each camera it starts.
    public struct Configuration: Sendable {
        /// Frames that may wait for busy consumers before the oldest is dropped (newest wins).
        public var maxPendingFrames: Int = 1
        /// When false, the producer waits for consumers instead of dropping (for offline processing of
        /// fixture cameras; never use it with a real camera, the driver would drop instead).
        public var alwaysDiscardsLateFrames: Bool = true
        /// Anti-flicker set on every start and switch before the first frame, as Chromium does (nil: leave the
        /// camera as it is). `.auto` is used where the camera offers it, else the camera is left unchanged. A
        /// camera without the control, or one that refuses it, still starts (logged at debug level).
        public var powerLineFrequency: PowerLineFrequency?
        /// Controls set on every start and switch, in order, before the first frame (after the power-line
        /// default). A control the camera lacks, or a bad value, fails the start with the typed error.
        public var startControls: [CameraControlSetting]
        /// Where frames are delivered: on the capturer's delivery thread (the default) or synchronously on the
        /// camera's own capture thread.
        public var delivery: Delivery
        /// The defaults are what a real-time consumer wants: one pending frame, late frames dropped, controls left as
        /// they are, frames on the delivery thread. `maxPendingFrames` below 1 counts as 1.
        public init(
            maxPendingFrames: Int = 1, alwaysDiscardsLateFrames: Bool = true,
            powerLineFrequency: PowerLineFrequency? = nil, startControls: [CameraControlSetting] = [],
            delivery: Delivery = .deliveryThread
        ) {
            self.maxPendingFrames = max(1, maxPendingFrames)
            self.alwaysDiscardsLateFrames = alwaysDiscardsLateFrames
            self.powerLineFrequency = powerLineFrequency
            self.startControls = startControls
            self.delivery = delivery
        }
    }

    /// The thread that calls the delegates and feeds the frame streams.
    public enum Delivery: Sendable, Equatable {
        /// The capturer's own delivery thread: the camera's thread queues each frame (at most `maxPendingFrames`
        /// wait, see `alwaysDiscardsLateFrames`) and goes back to the driver at once, whatever the consumers do.
        case deliveryThread
        /// The camera's capture thread itself, synchronously, as WebRTC's `RTCVideoCapturerDelegate` is called:
        /// no hand-off and no thread switch per frame, so a delegate that converts and encodes runs the whole
        /// pipeline on one thread, as a plain C loop does. While a delegate runs, the camera's thread does not
        /// dequeue: the driver's own buffers absorb a slow frame (a camera drops what does not fit, counted as
        /// `.driverDropped`), and `maxPendingFrames` does not apply. Drop and failure callbacks come on that
        /// thread too; the stop callback after `stopCapture()` comes from the delivery thread, once the camera's
        /// thread has ended. Frame streams (`frames(bufferingNewest:)`) still buffer as usual.
        case captureThread
    }

    private struct Running {
        var device: CaptureDevice
        var stream: any CaptureStream
        var generation: UInt64
    }
    private struct State {
        var running: Running?
        var generation: UInt64 = 0
        /// A stream that failed before its start was recorded (its error already went to the delegates).
        var failedGeneration: UInt64?
        var delegates: [any CameraVideoCapturerDelegate] = []
        /// Frame streams; replaced (never mutated in place) so the delivery thread's copy allocates nothing.
        var streams: [FrameSubscription] = []
        var nextStreamID: UInt64 = 0
        var lastTimestamp: Int64 = .min
        /// The generation whose first frame was marked `isDiscontinuity`.
        var markedGeneration: UInt64?
        var sequence: UInt64 = 0
        var stats = CaptureStatistics()
    }

    /// Where cameras come from, asked in this order (``device(_:)`` takes the first provider that knows a spec).
    public let providers: [any CaptureDeviceProvider]
    /// The delivery and start settings this capturer was made with.
    public let configuration: Configuration
    private let logger: Logger
    private let state = Mutex(State())
    private let delivery: DeliveryQueue

    /// `logger` defaults to a no-op logger: the library is silent unless the application passes one.
    public init(
        providers: [any CaptureDeviceProvider], configuration: Configuration = .init(),
        logger: Logger = Logger(label: "video-capture", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.providers = providers
        self.configuration = configuration
        self.logger = logger
        self.delivery = DeliveryQueue(capacity: configuration.maxPendingFrames, discardsLate: configuration.alwaysDiscardsLateFrames)
        delivery.start { [weak self] event in self?.deliver(event) }
    }

    deinit {
        // Released without stopCapture(): stop and close the device, end the streams.
        let (running, streams) = state.withLock { s in
            let r = s.running
            s.running = nil
            s.generation += 1
            let st = s.streams
            s.streams = []
            return (r, st)
        }
        running?.stream.stop()
        for st in streams { st.finish(nil) }
        delivery.shutdown()
    }

    // MARK: Devices and formats

    /// Every camera every provider sees.
    public func devices() -> [CaptureDevice] { providers.flatMap { p in p.devices().map { stamped($0, by: p) } } }

    /// The device a spec names: a V4L2 node, `fixture:NAME`, a fixture file, or a unique id / name of a listed device.
    /// Throws `unknownDevice` naming the spec; with no provider at all, saying that none is configured.
    public func device(_ spec: String) throws(CaptureError) -> CaptureDevice {
        try requireProviders(for: spec)
        for p in providers { if let d = try p.device(for: spec) { return stamped(d, by: p) } }
        if let d = devices().first(where: { $0.uniqueID == spec || $0.name == spec }) { return d }
        throw CaptureError(
            .unknownDevice,
            "unknown device \"\(spec)\": expected a V4L2 node (/dev/video0), fixture:NAME or a fixture file; `devices()` lists what is here",
            device: spec)
    }

    /// Throws `unknownDevice` when the capturer was given no provider: it can see no camera at all, which says
    /// more than "unknown device" or "no camera found" (`spec`: the device asked for, if one was).
    public func requireProviders(for spec: String? = nil) throws(CaptureError) {
        guard providers.isEmpty else { return }
        throw CaptureError(
            .unknownDevice,
            "no camera provider is configured\(spec.map { ", so \"\($0)\" cannot be opened" } ?? ""): give the capturer (or `CaptureSession.Configuration.providers`) V4L2DeviceProvider() for real cameras, FixtureCameraProvider() for the built-in ones, or one of your own",
            device: spec)
    }

    /// The camera at a position (front/back), else the first one, as WebRTC's `findDeviceForPosition`.
    public func device(at position: CaptureDevice.Position) -> CaptureDevice? {
        let all = devices()
        return all.first { $0.position == position } ?? all.first
    }

    /// Every format the device offers natively (its provider's list). Throws when the device cannot be opened or
    /// queried (`.unknownDevice`, `.permissionDenied`, `.notACaptureDevice`…).
    public func supportedFormats(for device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        try provider(for: device).formats(of: device)
    }

    /// A device carries the name of the provider that made it, so finding it needs no I/O.
    private func stamped(_ d: CaptureDevice, by p: any CaptureDeviceProvider) -> CaptureDevice {
        var d = d
        d.providerName = String(reflecting: type(of: p))
        return d
    }

    func provider(for device: CaptureDevice) throws(CaptureError) -> any CaptureDeviceProvider {
        if !device.providerName.isEmpty, let p = providers.first(where: { String(reflecting: type(of: $0)) == device.providerName }) { return p }
        // A device built by hand: ask each provider whether the path is its kind (the real error if it is).
        for p in providers { if try p.device(for: device.path) != nil { return p } }
        throw CaptureError(.unknownDevice, "no provider of this capturer opens \(device.path)", device: device.path)
    }

    /// Negotiation for a device (rules in `FormatSelector`).
    public func selectFormat(for device: CaptureDevice, targetSize: FrameSize, fpsLimit: Int = FormatSelector.defaultFpsLimit) throws(CaptureError)
        -> FormatSelection
    {
        try selectFormat(for: device, targetSize: targetSize, fpsLimit: Fraction(Int64(fpsLimit)))
    }

    /// Negotiation for a device with a fractional limit (`Fraction(rate: "29.97")`) and, when `pixelFormats` is
    /// not empty, only those formats, preferred in their order (rules in `FormatSelector`). Throws
    /// `invalidArgument`, naming the value, for a target that is not a picture (a side ≤ 0, or beyond
    /// `CaptureLimits`), a limit ≤ 0 or above 1000 (`FormatSelector.problem(withFpsLimit:shown:)`), or a pixel
    /// format that is unknown or cannot be converted to I420 (`FormatSelector.problem(withPixelFormats:)`), before
    /// the device is opened; `unsupportedFormat` when the device offers none of the formats asked for, and
    /// `noConvertibleFormat` when it offers nothing convertible, naming what it offers.
    public func selectFormat(for device: CaptureDevice, targetSize: FrameSize, fpsLimit: Fraction, pixelFormats: [PixelFormat] = [])
        throws(CaptureError) -> FormatSelection
    {
        if let problem = CaptureLimits.problem(with: targetSize) {
            throw CaptureError(.invalidArgument, "target \(problem)", device: device.path)
        }
        if let problem = FormatSelector.problem(withFpsLimit: fpsLimit) {
            throw CaptureError(.invalidArgument, "frame-rate limit \(problem)", device: device.path)
        }
        if let problem = FormatSelector.problem(withPixelFormats: pixelFormats) {
            throw CaptureError(.invalidArgument, "pixelFormats: \(problem)", device: device.path)
        }
        let formats = try supportedFormats(for: device)
        guard let sel = FormatSelector.select(from: formats, target: targetSize, fpsLimit: fpsLimit, pixelFormats: pixelFormats) else {
            let offered = Set(formats.map(\.pixelFormat.fourcc)).sorted().joined(separator: ", ")
            if !pixelFormats.isEmpty {
                throw CaptureError(
                    .unsupportedFormat,
                    "\(device.path) offers none of the pixel formats asked for (\(pixelFormats.map(\.fourcc).joined(separator: ", "))); it offers: \(offered)",
                    device: device.path)
            }
            throw CaptureError(
                .noConvertibleFormat, "\(device.path) offers no format we can convert to I420 (it offers: \(offered))", device: device.path)
        }
        return sel
    }

    // MARK: Lifecycle

    /// Whether a camera is streaming (set once a start returns, cleared by a stop or a failure).
    public var isRunning: Bool { state.withLock { $0.running != nil } }
    /// The camera streaming now, if any.
    public var currentDevice: CaptureDevice? { state.withLock { $0.running?.device } }
    /// Asks a camera that delivers H.264 for a key frame next (V4L2's `V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME`, a
    /// fixture's encoder): what a receiver's PLI or FIR becomes when the camera's own stream is passed through.
    /// False when nothing is streaming or the camera cannot be asked. Any thread; rate-limit it yourself.
    @discardableResult
    public func requestKeyFrame() -> Bool {
        guard let stream = state.withLock({ $0.running?.stream }) else { return false }
        return stream.requestKeyFrame()
    }
    /// Asks a camera that delivers H.264 for a target bitrate in bits per second (V4L2's
    /// `V4L2_CID_MPEG_VIDEO_BITRATE`, clamped to the control's range; a fixture's encoder): what receivers'
    /// bandwidth estimates become when the camera's own stream is passed through. False when nothing is streaming
    /// or the camera has no such control. Any thread; the last request before the camera's next frame wins.
    @discardableResult
    public func requestBitrate(_ bitsPerSecond: Int) -> Bool {
        guard let stream = state.withLock({ $0.running?.stream }) else { return false }
        return stream.requestBitrate(bitsPerSecond)
    }
    /// The counters so far (a snapshot; safe from any thread).
    public var statistics: CaptureStatistics { state.withLock { $0.stats } }
    var loggerForTesting: Logger { logger }

    /// Starts capture with an explicit format entry, size and rate; returns what the device really applied.
    @discardableResult
    public func startCapture(device: CaptureDevice, format: CaptureFormat, size: FrameSize? = nil, fps: Fraction) async throws(CaptureError)
        -> AppliedFormat
    {
        let size = size ?? format.size.closest(to: FrameSize(width: 640, height: 480))
        guard format.size.contains(size) else {
            throw CaptureError(
                .unsupportedFormat, "\(device.path) does not offer \(format.pixelFormat) at \(size) (it offers \(format.size))", device: device.path)
        }
        let offered = try supportedFormats(for: device)
        guard offered.contains(where: { $0.pixelFormat == format.pixelFormat && $0.size.contains(size) }) else {
            throw CaptureError(.unsupportedFormat, "\(device.path) does not offer \(format.pixelFormat) \(size)", device: device.path)
        }
        return try await begin(device: device, request: StreamRequest(pixelFormat: format.pixelFormat, size: size, fps: fps))
    }

    /// Negotiates (closest size, highest fps up to the limit, cheapest conversion) and starts.
    @discardableResult
    public func startCapture(device: CaptureDevice, targetSize: FrameSize, fpsLimit: Int = FormatSelector.defaultFpsLimit) async throws(CaptureError)
        -> AppliedFormat
    {
        // The selection comes from the device's own list: no second enumeration to validate it.
        let sel = try selectFormat(for: device, targetSize: targetSize, fpsLimit: fpsLimit)
        return try await begin(device: device, request: StreamRequest(pixelFormat: sel.pixelFormat, size: sel.size, fps: sel.fps))
    }

    /// Negotiates with a fractional limit and a pixel-format preference (see
    /// `selectFormat(for:targetSize:fpsLimit:pixelFormats:)`) and starts.
    @discardableResult
    public func startCapture(device: CaptureDevice, targetSize: FrameSize, fpsLimit: Fraction, pixelFormats: [PixelFormat] = [])
        async throws(CaptureError) -> AppliedFormat
    {
        let sel = try selectFormat(for: device, targetSize: targetSize, fpsLimit: fpsLimit, pixelFormats: pixelFormats)
        return try await begin(device: device, request: StreamRequest(pixelFormat: sel.pixelFormat, size: sel.size, fps: sel.fps))
    }

    /// Opens the stream and records it as running.
    private func begin(device: CaptureDevice, request: StreamRequest) async throws(CaptureError) -> AppliedFormat {
        guard request.fps.isPositive else { throw CaptureError(.invalidArgument, "frame rate must be positive, got \(request.fps)") }
        let gen: UInt64 = try state.withLock { (s: inout State) throws(CaptureError) -> UInt64 in
            if let r = s.running {
                throw CaptureError(.alreadyRunning, "capture is already running on \(r.device.path); stop it or switch devices", device: device.path)
            }
            s.generation += 1
            return s.generation
        }
        do {
            let stream = try await open(device: device, request: request, generation: gen)
            return try state.withLock { (s: inout State) throws(CaptureError) -> AppliedFormat in
                if s.failedGeneration == gen { return stream.applied } // started, then failed at once
                guard s.generation == gen, s.running == nil else {
                    stream.stop()
                    throw CaptureError(.alreadyRunning, "capture was started concurrently", device: device.path)
                }
                s.running = Running(device: device, stream: stream, generation: gen)
                logger.debug("capture started", metadata: ["device": "\(device.path)", "format": "\(stream.applied)"])
                return stream.applied
            }
        } catch {
            state.withLock { s in if s.generation == gen { s.generation += 1 } }
            throw error
        }
    }

    /// Stops capture; delegates get `didStopWithError(nil)` and frame streams finish.
    public func stopCapture() async throws(CaptureError) {
        let running = state.withLock { s -> Running? in
            let r = s.running
            s.running = nil
            s.generation += 1
            return r
        }
        guard let running else { throw CaptureError(.notRunning, "capture is not running") }
        await offThread { running.stream.stop() }
        // A consumer holding the delivery thread (a stream waiting for room that nobody reads any more) lets go
        // before the drain below waits for that thread.
        for d in state.withLock({ $0.delegates }) { d.capturerWillStop(self) }
        delivery.enqueue(.stopped(nil))
        await delivery.drain()
        logger.debug("capture stopped", metadata: ["device": "\(running.device.path)"])
    }

    /// Switches to another camera while running, as WebRTC's front/back switch: consumers keep their
    /// subscription; the new device is negotiated with the same rules.
    @discardableResult
    public func switchDevice(to device: CaptureDevice, targetSize: FrameSize, fpsLimit: Int = FormatSelector.defaultFpsLimit)
        async throws(CaptureError) -> AppliedFormat
    {
        let sel = try selectFormat(for: device, targetSize: targetSize, fpsLimit: fpsLimit)
        let (old, gen) = try state.withLock { (s: inout State) throws(CaptureError) -> (Running, UInt64) in
            guard let r = s.running else { throw CaptureError(.notRunning, "cannot switch devices: capture is not running") }
            s.generation += 1
            return (r, s.generation)
        }
        // The old camera is released first: many cameras (and vivid) cannot stream twice at once.
        await offThread { old.stream.stop() }
        do throws(CaptureError) {
            let stream = try await open(
                device: device, request: StreamRequest(pixelFormat: sel.pixelFormat, size: sel.size, fps: sel.fps), generation: gen)
            let current = state.withLock { s -> Bool in
                guard s.generation == gen else { return false } // a stop (or another switch) won the race
                if s.failedGeneration != gen { s.running = Running(device: device, stream: stream, generation: gen) }
                return true
            }
            guard current else {
                await offThread { stream.stop() }
                throw CaptureError(.notRunning, "capture was stopped while switching to \(device.path)", device: device.path)
            }
            logger.debug("switched device", metadata: ["device": "\(device.path)", "format": "\(stream.applied)"])
            return stream.applied
        } catch {
            // Only the switch that is still current ends capture (a racing stop already reported its own end).
            let mine = state.withLock { s -> Bool in
                guard s.generation == gen else { return false }
                s.running = nil
                s.generation += 1
                return true
            }
            if mine { delivery.enqueue(.stopped(error)) }
            throw error
        }
    }

    // MARK: Controls

    /// The device's controls with their current values (control-class headings included, `kind == .ctrlClass`).
    /// Works whether or not the device is streaming.
    public func controls(for device: CaptureDevice) throws(CaptureError) -> [CameraControl] {
        try provider(for: device).controls(of: device)
    }

    /// One control, named as `v4l2-ctl` names it (`brightness`), by a well-known alias or by id (`0x00980900`).
    public func control(_ spec: String, of device: CaptureDevice) throws(CaptureError) -> CameraControl {
        let all = try controls(for: device)
        guard let c = all.find(spec) else { throw all.unknown(spec, device: device.path) }
        return c
    }

    /// One control by id, with its current value; `.unknownControl` when the camera lacks it.
    public func control(_ id: CameraControlID, of device: CaptureDevice) throws(CaptureError) -> CameraControl {
        try control(id.description, of: device)
    }

    /// Sets a control from text (a number, a menu entry's name, `true`/`false`); returns the control read back,
    /// whose value is what the device applied. Typed errors: `.unknownControl`, `.controlOutOfRange`,
    /// `.controlReadOnly`, `.controlInactive`, `.controlBusy`.
    @discardableResult
    public func setControl(_ spec: String, to text: String, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        let p = try provider(for: device)
        let all = try p.controls(of: device)
        guard let c = all.find(spec) else { throw all.unknown(spec, device: device.path) }
        return try p.setControl(c.id, to: try c.parseValue(text, device: device.path), on: device)
    }

    /// Sets a control by id to a number; returns the control read back (the value the device applied). Same errors
    /// as setting it by name.
    @discardableResult
    public func setControl(_ id: CameraControlID, to value: Int64, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        try provider(for: device).setControl(id, to: .integer(value), on: device)
    }

    /// Sets controls in order (so `auto_exposure=1` can come before `exposure_time_absolute=…`); stops at the
    /// first failure. Returns each control as read back.
    @discardableResult
    public func setControls(_ settings: [CameraControlSetting], on device: CaptureDevice) throws(CaptureError) -> [CameraControl] {
        var out: [CameraControl] = []
        for s in settings { out.append(try setControl(s.control, to: s.value, on: device)) }
        return out
    }

    /// Sets the anti-flicker filter; `.auto` needs a camera that offers it (else `.controlOutOfRange`).
    @discardableResult
    public func setPowerLineFrequency(_ f: PowerLineFrequency, on device: CaptureDevice) throws(CaptureError) -> CameraControl {
        try setControl(.powerLineFrequency, to: f.rawValue, on: device)
    }

    /// The configured start controls: the power-line default (best effort), then `startControls` (strict).
    private func applyStartControls(_ device: CaptureDevice, provider p: any CaptureDeviceProvider) throws(CaptureError) {
        guard configuration.powerLineFrequency != nil || !configuration.startControls.isEmpty else { return }
        if let plf = configuration.powerLineFrequency {
            do throws(CaptureError) {
                let all = try p.controls(of: device)
                if let c = all.first(where: { $0.id == .powerLineFrequency }),
                    plf != .auto || c.menu.contains(where: { $0.index == PowerLineFrequency.auto.rawValue })
                {
                    let applied = try p.setControl(.powerLineFrequency, to: .integer(plf.rawValue), on: device)
                    logger.debug(
                        "power-line frequency set", metadata: ["device": "\(device.path)", "value": "\(applied.currentMenuItem?.name ?? "\(plf)")"])
                } else {
                    logger.debug("power-line frequency left as it is", metadata: ["device": "\(device.path)", "wanted": "\(plf)"])
                }
            } catch {
                logger.debug("power-line frequency not set", metadata: ["device": "\(device.path)", "error": "\(error)"])
            }
        }
        if !configuration.startControls.isEmpty {
            let all = try p.controls(of: device)
            for s in configuration.startControls {
                guard let c = all.find(s.control) else { throw all.unknown(s.control, device: device.path) }
                _ = try p.setControl(c.id, to: try c.parseValue(s.value, device: device.path), on: device)
            }
        }
    }

    // MARK: Consumers

    /// Adds a delegate, held strongly until `removeDelegate` (adding the same object twice adds it once).
    public func addDelegate(_ delegate: any CameraVideoCapturerDelegate) {
        state.withLock { s in
            s.delegates.removeAll { $0 === delegate }
            s.delegates.append(delegate)
        }
    }

    /// Removes a delegate (matched by identity): after the delivery under way, it gets no more callbacks.
    public func removeDelegate(_ delegate: any CameraVideoCapturerDelegate) {
        state.withLock { s in s.delegates.removeAll { $0 === delegate } }
    }

    /// The frames as an `AsyncSequence` (see `VideoFrameStream`): make it before `startCapture` to receive
    /// every frame from the first; it ends at the next stop, by returning nil, or by throwing the
    /// `CaptureError` that stopped capture. It buffers the newest `bufferingNewest` frames; when its consumer
    /// falls behind, older frames are dropped and counted as `.consumerBusy`.
    ///
    /// With `alwaysDiscardsLateFrames == false` the sequence buffers without limit instead: the source's own
    /// buffer count bounds it (a held frame holds a buffer), so nothing is dropped.
    public func frames(bufferingNewest: Int = 1) -> VideoFrameStream {
        let sub = state.withLock { s -> FrameSubscription in
            s.nextStreamID += 1
            let sub = FrameSubscription(id: s.nextStreamID, capacity: max(1, bufferingNewest), growable: !configuration.alwaysDiscardsLateFrames)
            s.streams = s.streams + [sub]
            return sub
        }
        let id = sub.id
        return VideoFrameStream(
            handle: FrameSubscription.Handle(sub) { [weak self] in
                self?.state.withLock { s in if s.streams.contains(where: { $0.id == id }) { s.streams = s.streams.filter { $0.id != id } } }
            })
    }

    // MARK: Internals

    private func open(device: CaptureDevice, request: StreamRequest, generation gen: UInt64) async throws(CaptureError) -> any CaptureStream {
        let provider = try provider(for: device)
        let sink = FrameSink(
            frame: { [weak self] frame in self?.accept(frame, generation: gen) },
            dropped: { [weak self] reason, count in self?.recordDrop(reason, count: count, generation: gen) },
            failed: { [weak self] error in self?.streamFailed(error, generation: gen) },
            copied: { [weak self] in self?.state.withLock { s in if s.generation == gen { s.stats.copied += 1 } } })
        let result: Result<any CaptureStream, CaptureError> = await offThread { [self] in
            do throws(CaptureError) {
                try applyStartControls(device, provider: provider)
                return .success(try provider.openStream(device: device, request: request, sink: sink))
            } catch { return .failure(error) }
        }
        return try result.get()
    }

    private func accept(_ frame: VideoFrame, generation gen: UInt64) {
        var frame = frame
        let ok = state.withLock { s -> Bool in
            guard s.generation == gen else { return false }
            // Strictly increasing, whatever the source says (and across device switches): a timestamp that went back
            // is replaced by the clock now (on the same monotonic clock; a frame is at most its delivery late).
            if frame.timestampNs <= s.lastTimestamp {
                frame.timestampNs = max(monotonicNanoseconds(), s.lastTimestamp + 1)
                s.stats.timestampsReplaced += 1
            }
            s.lastTimestamp = frame.timestampNs
            frame.sequence = s.sequence
            s.sequence += 1
            s.stats.captured += 1
            if s.delegates.isEmpty && s.streams.isEmpty {
                s.stats.dropped[.noConsumer, default: 0] += 1 // nobody subscribed yet: counted, not silent
                return false
            }
            if s.markedGeneration != gen { // the first frame of this start or switch that a consumer gets
                s.markedGeneration = gen
                frame.isDiscontinuity = true
            }
            return true
        }
        guard ok else { return }
        if configuration.delivery == .captureThread {
            deliver(.frame(frame)) // on the camera's thread: no queue, no wake-up
            return
        }
        if let dropped = delivery.enqueue(.frame(frame)), dropped > 0 {
            recordDrop(.consumerBusy, count: dropped, generation: gen, force: true)
        }
    }

    private func recordDrop(_ reason: FrameDropReason, count: Int, generation gen: UInt64, force: Bool = false) {
        let ok = state.withLock { s -> Bool in
            guard force || s.generation == gen else { return false }
            s.stats.dropped[reason, default: 0] += count
            // Frames the camera made but the driver lost, or delivered corrupt or short, leave a gap in the sequence
            // too: a consumer that needs every frame (a camera's own H.264 passed through) sees the break and waits
            // for a key frame instead of sending broken references. (`.buffersHeld` does not: a fixture camera then
            // makes no frame at all, and its stream has no break.)
            if !force && (reason == .driverDropped || reason == .corruptBuffer || reason == .shortBuffer), count > 0 {
                s.sequence &+= UInt64(count)
            }
            return true
        }
        guard ok else { return }
        if configuration.delivery == .captureThread && !force {
            deliver(.dropped(reason, count)) // reported by the camera's thread, delivered where its frames are
        } else {
            delivery.enqueue(.dropped(reason, count))
        }
    }

    private func streamFailed(_ error: CaptureError, generation gen: UInt64) {
        let (running, current) = state.withLock { s -> (Running?, Bool) in
            guard s.generation == gen else { return (nil, false) }
            let r = s.running
            if r == nil { s.failedGeneration = gen }
            s.running = nil
            s.generation += 1
            return (r, true)
        }
        guard current else { return }
        logger.error("capture failed", metadata: ["error": "\(error)"])
        // The stream released its resources before reporting; stop() from another thread just joins it.
        if let running { _ = WorkerThread(name: "capture-stop") { _ in running.stream.stop() } } // detached: released unjoined
        if configuration.delivery == .captureThread {
            deliver(.stopped(error)) // on the failing stream's thread, after its last frame
        } else {
            delivery.enqueue(.stopped(error))
        }
    }

    private func deliver(_ event: DeliveryQueue.Event) {
        let (delegates, streams) = state.withLock { s in (s.delegates, s.streams) }
        switch event {
        case .frame(let frame):
            for d in delegates { d.capturer(self, didCapture: frame) }
            var late = 0
            for c in streams { late += c.yield(frame) }
            state.withLock { s in
                s.stats.delivered += 1
                if late > 0 { s.stats.dropped[.consumerBusy, default: 0] += late }
            }
            if late > 0 { for d in delegates { d.capturer(self, didDropFrames: late, reason: .consumerBusy) } }
        case .dropped(let reason, let count):
            for d in delegates { d.capturer(self, didDropFrames: count, reason: reason) }
        case .stopped(let error):
            for d in delegates { d.capturer(self, didStopWithError: error) }
            let finished = state.withLock { s -> [FrameSubscription] in
                let all = s.streams
                s.streams = []
                return all
            }
            for c in finished { c.finish(error) }
        }
    }
}

/// Runs blocking work (ioctls, joins) off the cooperative pool, on a thread of its own (the package's one thread
/// lifecycle, detached: nothing joins it). Starts and stops are rare, so a thread per call costs nothing that counts.
func offThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (c: CheckedContinuation<T, Never>) in
        _ = WorkerThread(name: "capture-call") { _ in c.resume(returning: work()) }
    }
}
