import Foundation
public import Logging
import Synchronization

/// Receives frames and events from a `CameraVideoCapturer`, on the capturer's delivery thread.
/// A delegate that takes long makes the capturer drop late frames (counted, see `Configuration`).
public protocol CameraVideoCapturerDelegate: AnyObject, Sendable {
    func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame)
    func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason)
    /// Capture ended: `error` is nil after `stopCapture()`, else why it stopped (disconnect, I/O error…).
    func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?)
}

public extension CameraVideoCapturerDelegate {
    func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason) {}
    func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?) {}
}

/// Counters since the capturer was created.
public struct CaptureStatistics: Sendable, Equatable {
    public var captured = 0
    public var delivered = 0
    public var dropped: [FrameDropReason: Int] = [:]
    public var totalDropped: Int { dropped.values.reduce(0, +) }
}

/// The Linux counterpart of WebRTC's `RTCCameraVideoCapturer`: finds cameras, negotiates a format, streams
/// `VideoFrame`s to any number of delegates and `AsyncSequence` consumers, switches cameras while running.
///
/// Frames are delivered on one delivery thread, in order. When consumers are slower than the camera, the
/// newest frames win: at most `Configuration.maxPendingFrames` wait, older ones are dropped and counted
/// (WebRTC's `alwaysDiscardsLateVideoFrames = YES`). Timestamps are strictly increasing monotonic nanoseconds,
/// across device switches too.
public final class CameraVideoCapturer: Sendable {
    public struct Configuration: Sendable {
        /// Frames that may wait for busy consumers before the oldest is dropped (newest wins).
        public var maxPendingFrames: Int = 1
        /// When false, the producer waits for consumers instead of dropping (for offline processing of
        /// fixture cameras; never use it with a real camera, the driver would drop instead).
        public var alwaysDiscardsLateFrames: Bool = true
        public init(maxPendingFrames: Int = 1, alwaysDiscardsLateFrames: Bool = true) {
            self.maxPendingFrames = max(1, maxPendingFrames); self.alwaysDiscardsLateFrames = alwaysDiscardsLateFrames
        }
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
        var delegates: [WeakDelegate] = []
        var streams: [UInt64: AsyncStream<VideoFrame>.Continuation] = [:] {
            didSet { streamList = Array(streams.values) }
        }
        /// `streams.values`, kept ready so delivering a frame allocates nothing.
        var streamList: [AsyncStream<VideoFrame>.Continuation] = []
        var nextStreamID: UInt64 = 0
        var lastTimestamp: Int64 = .min
        var sequence: UInt64 = 0
        var stats = CaptureStatistics()
    }
    private struct WeakDelegate { weak var value: (any CameraVideoCapturerDelegate)? }

    public let providers: [any CaptureDeviceProvider]
    public let configuration: Configuration
    private let logger: Logger
    private let state = Mutex(State())
    private let delivery: DeliveryQueue

    public init(providers: [any CaptureDeviceProvider], configuration: Configuration = .init(),
                logger: Logger = Logger(label: "video-capture")) {
        self.providers = providers
        self.configuration = configuration
        self.logger = logger
        self.delivery = DeliveryQueue(capacity: configuration.maxPendingFrames, discardsLate: configuration.alwaysDiscardsLateFrames)
        delivery.start { [weak self] event in self?.deliver(event) }
    }

    deinit { delivery.shutdown() }

    // MARK: Devices and formats

    /// Every camera every provider sees.
    public func devices() -> [CaptureDevice] { providers.flatMap { $0.devices() } }

    /// The device a spec names: a V4L2 node, `fixture:NAME`, a fixture file, or a unique id / name of a listed device.
    public func device(_ spec: String) throws(CaptureError) -> CaptureDevice {
        for p in providers { if let d = try p.device(for: spec) { return d } }
        if let d = devices().first(where: { $0.uniqueID == spec || $0.name == spec }) { return d }
        throw CaptureError(.unknownDevice, "unknown device \"\(spec)\": expected a V4L2 node (/dev/video0), fixture:NAME or a fixture file; `camcap devices` lists what is here", device: spec)
    }

    /// The camera at a position (front/back), else the first one, as WebRTC's `findDeviceForPosition`.
    public func device(at position: CaptureDevice.Position) -> CaptureDevice? {
        let all = devices()
        return all.first { $0.position == position } ?? all.first
    }

    public func supportedFormats(for device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        try provider(for: device).formats(of: device)
    }

    func provider(for device: CaptureDevice) throws(CaptureError) -> any CaptureDeviceProvider {
        for p in providers { if (try? p.device(for: device.path)) != nil { return p } }
        throw CaptureError(.unknownDevice, "no provider opens \(device.path)", device: device.path)
    }

    /// Negotiation for a device (rules in `FormatSelector`).
    public func selectFormat(for device: CaptureDevice, targetSize: FrameSize, fpsLimit: Int = FormatSelector.defaultFpsLimit) throws(CaptureError) -> FormatSelection {
        let formats = try supportedFormats(for: device)
        guard let sel = FormatSelector.select(from: formats, target: targetSize, fpsLimit: fpsLimit) else {
            let offered = Set(formats.map(\.pixelFormat.fourcc)).sorted().joined(separator: ", ")
            throw CaptureError(.noConvertibleFormat, "\(device.path) offers no format we can convert to I420 (it offers: \(offered))", device: device.path)
        }
        return sel
    }

    // MARK: Lifecycle

    public var isRunning: Bool { state.withLock { $0.running != nil } }
    public var currentDevice: CaptureDevice? { state.withLock { $0.running?.device } }
    public var statistics: CaptureStatistics { state.withLock { $0.stats } }

    /// Starts capture with an explicit format entry, size and rate; returns what the device really applied.
    @discardableResult
    public func startCapture(device: CaptureDevice, format: CaptureFormat, size: FrameSize? = nil, fps: Fraction) async throws(CaptureError) -> AppliedFormat {
        let size = size ?? format.size.closest(to: FrameSize(width: 640, height: 480))
        guard format.size.contains(size) else {
            throw CaptureError(.unsupportedFormat, "\(device.path) does not offer \(format.pixelFormat) at \(size) (it offers \(format.size))", device: device.path)
        }
        let offered = try supportedFormats(for: device)
        guard offered.contains(where: { $0.pixelFormat == format.pixelFormat && $0.size.contains(size) }) else {
            throw CaptureError(.unsupportedFormat, "\(device.path) does not offer \(format.pixelFormat) \(size)", device: device.path)
        }
        return try await begin(device: device, request: StreamRequest(pixelFormat: format.pixelFormat, size: size, fps: fps))
    }

    /// Negotiates (closest size, highest fps up to the limit, cheapest conversion) and starts.
    @discardableResult
    public func startCapture(device: CaptureDevice, targetSize: FrameSize, fpsLimit: Int = FormatSelector.defaultFpsLimit) async throws(CaptureError) -> AppliedFormat {
        // The selection comes from the device's own list: no second enumeration to validate it.
        let sel = try selectFormat(for: device, targetSize: targetSize, fpsLimit: fpsLimit)
        return try await begin(device: device, request: StreamRequest(pixelFormat: sel.pixelFormat, size: sel.size, fps: sel.fps))
    }

    /// Opens the stream and records it as running.
    private func begin(device: CaptureDevice, request: StreamRequest) async throws(CaptureError) -> AppliedFormat {
        guard request.fps.isPositive else { throw CaptureError(.invalidArgument, "frame rate must be positive, got \(request.fps)") }
        let gen: UInt64 = try state.withLock { (s: inout State) throws(CaptureError) -> UInt64 in
            if let r = s.running { throw CaptureError(.alreadyRunning, "capture is already running on \(r.device.path); stop it or switch devices", device: device.path) }
            s.generation += 1
            return s.generation
        }
        do {
            let stream = try await open(device: device, request: request, generation: gen)
            return try state.withLock { (s: inout State) throws(CaptureError) -> AppliedFormat in
                if s.failedGeneration == gen { return stream.applied }   // started, then failed at once
                guard s.generation == gen, s.running == nil else {
                    stream.stop()
                    throw CaptureError(.alreadyRunning, "capture was started concurrently", device: device.path)
                }
                s.running = Running(device: device, stream: stream, generation: gen)
                logger.info("capture started", metadata: ["device": "\(device.path)", "format": "\(stream.applied)"])
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
            let r = s.running; s.running = nil; s.generation += 1; return r
        }
        guard let running else { throw CaptureError(.notRunning, "capture is not running") }
        await offThread { running.stream.stop() }
        delivery.enqueue(.stopped(nil))
        await delivery.drain()
        logger.info("capture stopped", metadata: ["device": "\(running.device.path)"])
    }

    /// Switches to another camera while running, as WebRTC's front/back switch: consumers keep their
    /// subscription; the new device is negotiated with the same rules.
    @discardableResult
    public func switchDevice(to device: CaptureDevice, targetSize: FrameSize, fpsLimit: Int = FormatSelector.defaultFpsLimit) async throws(CaptureError) -> AppliedFormat {
        let sel = try selectFormat(for: device, targetSize: targetSize, fpsLimit: fpsLimit)
        let (old, gen) = try state.withLock { (s: inout State) throws(CaptureError) -> (Running, UInt64) in
            guard let r = s.running else { throw CaptureError(.notRunning, "cannot switch devices: capture is not running") }
            s.generation += 1
            return (r, s.generation)
        }
        // The old camera is released first: many cameras (and vivid) cannot stream twice at once.
        await offThread { old.stream.stop() }
        do {
            let stream = try await open(device: device, request: StreamRequest(pixelFormat: sel.pixelFormat, size: sel.size, fps: sel.fps), generation: gen)
            state.withLock { s in if s.failedGeneration != gen { s.running = Running(device: device, stream: stream, generation: gen) } }
            logger.info("switched device", metadata: ["device": "\(device.path)", "format": "\(stream.applied)"])
            return stream.applied
        } catch {
            state.withLock { s in if s.generation == gen { s.running = nil } }
            delivery.enqueue(.stopped(error))
            throw error
        }
    }

    // MARK: Consumers

    public func addDelegate(_ delegate: any CameraVideoCapturerDelegate) {
        state.withLock { s in
            s.delegates.removeAll { $0.value == nil || $0.value === delegate }
            s.delegates.append(WeakDelegate(value: delegate))
        }
    }

    public func removeDelegate(_ delegate: any CameraVideoCapturerDelegate) {
        state.withLock { s in s.delegates.removeAll { $0.value == nil || $0.value === delegate } }
    }

    /// The frames as an `AsyncSequence`. Each sequence buffers the newest `bufferingNewest` frames; when its
    /// consumer falls behind, older frames are dropped and counted as `.consumerBusy`. It finishes when
    /// capture stops (by `stopCapture()` or an error).
    ///
    /// With `alwaysDiscardsLateFrames == false` the sequence buffers without limit instead: the source's own
    /// buffer count bounds it (a held frame holds a buffer), so nothing is dropped.
    public func frames(bufferingNewest: Int = 1) -> VideoFrameStream {
        let policy: AsyncStream<VideoFrame>.Continuation.BufferingPolicy =
            configuration.alwaysDiscardsLateFrames ? .bufferingNewest(max(1, bufferingNewest)) : .unbounded
        let (stream, continuation) = AsyncStream<VideoFrame>.makeStream(bufferingPolicy: policy)
        let id = state.withLock { s -> UInt64 in
            s.nextStreamID += 1
            s.streams[s.nextStreamID] = continuation
            return s.nextStreamID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { s in s.streams.removeValue(forKey: id) }
        }
        return VideoFrameStream(base: stream)
    }

    // MARK: Internals

    private func open(device: CaptureDevice, request: StreamRequest, generation gen: UInt64) async throws(CaptureError) -> any CaptureStream {
        let provider = try provider(for: device)
        let sink = FrameSink(
            frame: { [weak self] frame in self?.accept(frame, generation: gen) },
            dropped: { [weak self] reason, count in self?.recordDrop(reason, count: count, generation: gen) },
            failed: { [weak self] error in self?.streamFailed(error, generation: gen) })
        let result: Result<any CaptureStream, CaptureError> = await offThread {
            do throws(CaptureError) { return .success(try provider.openStream(device: device, request: request, sink: sink)) }
            catch { return .failure(error) }
        }
        return try result.get()
    }

    private func accept(_ frame: VideoFrame, generation gen: UInt64) {
        var frame = frame
        let ok = state.withLock { s -> Bool in
            guard s.generation == gen else { return false }
            // Strictly increasing, whatever the source says (and across device switches).
            if frame.timestampNs <= s.lastTimestamp { frame.timestampNs = s.lastTimestamp + 1 }
            s.lastTimestamp = frame.timestampNs
            frame.sequence = s.sequence
            s.sequence += 1
            s.stats.captured += 1
            return true
        }
        guard ok else { return }
        if let dropped = delivery.enqueue(.frame(frame)), dropped > 0 {
            recordDrop(.consumerBusy, count: dropped, generation: gen, force: true)
        }
    }

    private func recordDrop(_ reason: FrameDropReason, count: Int, generation gen: UInt64, force: Bool = false) {
        let ok = state.withLock { s -> Bool in
            guard force || s.generation == gen else { return false }
            s.stats.dropped[reason, default: 0] += count
            return true
        }
        if ok { delivery.enqueue(.dropped(reason, count)) }
    }

    private func streamFailed(_ error: CaptureError, generation gen: UInt64) {
        let (running, current) = state.withLock { s -> (Running?, Bool) in
            guard s.generation == gen else { return (nil, false) }
            let r = s.running
            if r == nil { s.failedGeneration = gen }
            s.running = nil; s.generation += 1
            return (r, true)
        }
        guard current else { return }
        logger.error("capture stopped", metadata: ["error": "\(error)"])
        // The stream released its resources before reporting; stop() from another thread just joins it.
        if let running { DispatchQueue.global().async { running.stream.stop() } }
        delivery.enqueue(.stopped(error))
    }

    private func deliver(_ event: DeliveryQueue.Event) {
        let (delegateRefs, streams) = state.withLock { s in (s.delegates, s.streamList) }
        switch event {
        case .frame(let frame):
            for ref in delegateRefs { ref.value?.capturer(self, didCapture: frame) }
            var late = 0
            for c in streams { if case .dropped = c.yield(frame) { late += 1 } }
            state.withLock { s in
                s.stats.delivered += 1
                if late > 0 { s.stats.dropped[.consumerBusy, default: 0] += late }
            }
            if late > 0 { for ref in delegateRefs { ref.value?.capturer(self, didDropFrames: late, reason: .consumerBusy) } }
        case .dropped(let reason, let count):
            for ref in delegateRefs { ref.value?.capturer(self, didDropFrames: count, reason: reason) }
        case .stopped(let error):
            for ref in delegateRefs { ref.value?.capturer(self, didStopWithError: error) }
            let finished = state.withLock { s -> [AsyncStream<VideoFrame>.Continuation] in
                let all = Array(s.streams.values); s.streams.removeAll(); return all
            }
            for c in finished { c.finish() }
        }
    }
}

/// The capturer's frames as an `AsyncSequence` (newest-N buffering, see `CameraVideoCapturer.frames`).
public struct VideoFrameStream: AsyncSequence, Sendable {
    public typealias Element = VideoFrame
    let base: AsyncStream<VideoFrame>
    public func makeAsyncIterator() -> AsyncStream<VideoFrame>.Iterator { base.makeAsyncIterator() }
}

/// Runs blocking work (ioctls, joins) off the cooperative pool.
func offThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (c: CheckedContinuation<T, Never>) in
        DispatchQueue.global(qos: .userInitiated).async { c.resume(returning: work()) }
    }
}
