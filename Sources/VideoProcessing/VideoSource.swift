public import VideoCapture
import Metrics
import Synchronization

/// A capture source for an RTC stack: it sits over a `CameraVideoCapturer`, converts each captured frame to
/// I420 **once** (crop to aspect, scale, rotate as asked) into pooled buffers, and hands the I420 frames to
/// any number of sinks and async sequences, each with its own `VideoSinkWants`.
///
/// - The source serves the most demanding want (the most pixels, the highest frame rate); a sink that wants
///   less gets a scaled copy (from the shared I420, not another decode) or fewer frames, on timestamps.
/// - `requestOutputFormat(maxSize:maxFps:)` (congestion control) caps every sink, from any thread, with no
///   camera restart. A request above what the camera delivers is not served by upscaling: the output stays at
///   the camera's size and `statistics.limitedByCamera` says so (restart the capturer with a larger format
///   to go higher).
/// - Sink callbacks run on the capturer's delivery thread, one frame at a time; a slow sink delays the others
///   (and the capturer then drops late frames, counted). Async sequences buffer the newest frames instead.
///
/// The source registers itself as a delegate of the capturer; `detach()` (or releasing the capturer) ends it.
public final class VideoSource: CameraVideoCapturerDelegate, Sendable {
    /// Why the source did not pass a frame on.
    public enum DropReason: String, Sendable, CaseIterable, CustomStringConvertible {
        /// Thinned for a lower requested frame rate (source-wide: no sink wanted it).
        case adaptation
        /// Dropped by the capturer before it reached the source (late, busy, driver drops).
        case late
        /// A sequence's consumer was behind: its oldest buffered frame was replaced.
        case starvation
        /// The frame could not be converted (a corrupt JPEG, a short buffer); capture goes on.
        case undecodable
        /// The reason's name, as used in statistics output (`adaptation`, `late`…).
        public var description: String { rawValue }
    }

    /// Counters since the source was made, read with `VideoSource.statistics` (a snapshot, from any thread).
    public struct Statistics: Sendable {
        /// Frames that reached the source from the capturer.
        public var inputFrames = 0
        /// Converted frames that were read where their producer put them (a V4L2 driver's or libcamera's buffer):
        /// the conversion was the one pass over their pixels. The others were copied out first, or made by us.
        public var zeroCopyFrames = 0
        /// Frames passed to at least one sink.
        public var outputFrames = 0
        /// Conversions of captured frames to I420 (at most one per input frame).
        public var conversions = 0
        /// Extra scales for sinks that want less than the shared output.
        public var sinkScales = 0
        /// Frames not passed on, by reason.
        public var dropped: [DropReason: Int] = [:]
        /// The size of the shared output at the last frame.
        public var outputSize: FrameSize?
        /// The input size at the last frame.
        public var inputSize: FrameSize?
        /// True when the last request asked for more than the camera delivers.
        public var limitedByCamera = false
        /// Input and output frame rate over the last second of timestamps.
        public var inputFps = 0.0
        /// Output frame rate over the last second of timestamps.
        public var outputFps = 0.0
        /// Conversion (and scale) time per frame, milliseconds.
        public var conversionP50Ms = 0.0
        /// 95th percentile of the conversion (and scale) time per frame, milliseconds.
        public var conversionP95Ms = 0.0
        /// All dropped frames, whatever the reason.
        public var totalDropped: Int { dropped.values.reduce(0, +) }
    }

    /// A registered sink: change what it wants, or remove it. Releasing the token does not remove the sink.
    public final class Sink: Sendable {
        let id: UInt64
        weak let source: VideoSource?
        init(id: UInt64, source: VideoSource) {
            self.id = id
            self.source = source
        }
        /// Replaces the sink's wants; the next frame delivered follows them. Safe from any thread.
        public func update(wants: VideoSinkWants) { source?.update(id, wants: wants) }
        /// Removes the sink: it gets no frame after the one being delivered, if any. Safe from any thread; removing
        /// twice does nothing.
        public func remove() { source?.removeSink(id) }
    }

    private enum Target: Sendable {
        case callback(@Sendable (VideoFrame) -> Void)
        case stream(FrameSubscription)
    }

    private struct SinkEntry: Sendable {
        var id: UInt64
        var wants: VideoSinkWants
        var target: Target
    }

    private struct Control: Sendable {
        var sinks: [SinkEntry] = []
        var request = VideoAdapter.Request()
        var nextID: UInt64 = 0
        var stats = Statistics()
    }

    /// State of the delivery thread's work (one frame at a time).
    private struct Work {
        var converter = FrameConverter()
        var sourceGate = FrameRateGate()
        var gates: [UInt64: FrameRateGate] = [:]
        /// Sinks owed a discontinuity mark (the marked frame did not reach them yet).
        var marked: Set<UInt64> = []
        var scalers: [UInt64: FrameConverter] = [:]
        var times = DurationHistogram()
        var inputWindow = TimestampWindow(), outputWindow = TimestampWindow()
        var deliveries: [(Target, VideoFrame)] = []
        var takers: [Int] = []
    }

    /// How the source shapes every frame before the sinks' wants and the output request apply.
    public struct Options: Sendable {
        /// Apply each frame's own rotation to the pixels (outputs have rotation 0, as WebRTC's
        /// `rotation_applied`); else it is carried as metadata for the consumer to apply.
        public var applyRotation = false
        /// A rotation of the source's own, applied to the pixels after the frame's (a preview turned by hand).
        public var rotation: VideoRotation = .rotation0
        /// Mirror the picture horizontally (a front camera's preview).
        public var mirror = false
        /// The output size before any request or want (exactly this size, stretched if its aspect differs);
        /// nil: the camera's size, made even (I420's chroma is subsampled).
        public var size: FrameSize?
        /// With `size`: crop the middle of the picture to its aspect ratio first, instead of stretching (W3C
        /// `resizeMode: "crop-and-scale"`).
        public var cropsToAspect = false
        /// Called on the delivery thread with each frame before it is adapted: a `requestOutputFormat` made
        /// here applies to this frame (a schedule replayed on capture timestamps).
        public var willAdapt: (@Sendable (VideoFrame) -> Void)?
        /// Called on the delivery thread after each conversion with the frame's sequence number and the
        /// conversion's time in nanoseconds (metrics, per-frame work time).
        public var didConvert: (@Sendable (_ sequence: UInt64, _ nanoseconds: Int64) -> Void)?
        /// Record `CaptureMetrics` through swift-metrics with these dimensions (e.g. `[("camera", path)]`):
        /// frames captured, drops, undecodable frames, conversion time. nil (the default) records nothing.
        public var metricsDimensions: [(String, String)]?
        /// Options with no callbacks; the defaults leave the picture as the camera delivers it (sizes made even).
        public init(applyRotation: Bool = false, rotation: VideoRotation = .rotation0, mirror: Bool = false, size: FrameSize? = nil) {
            self.applyRotation = applyRotation
            self.rotation = rotation
            self.mirror = mirror
            self.size = size
        }
    }

    private let control = Mutex(Control())
    private let work: Mutex<Work>
    /// How this source shapes frames, as given at creation (`appliesRotation` can change later).
    public let options: Options
    /// The part of each frame the camera meant (`setVisibleSize(_:)`): nil, the whole frame.
    private let visible = Mutex<FrameSize?>(nil)
    /// Whether each frame's own rotation is applied to the pixels now (`Options.applyRotation` at first).
    private let rotationApplied: Atomic<Bool>
    /// Nobody wants a picture: frames are passed to the streams unconverted (`VideoFrame.isUnconverted`).
    private let picturesPaused = Atomic(false)
    private weak let capturer: CameraVideoCapturer?
    /// swift-metrics, when `options.metricsDimensions` asks for them.
    private let metrics: CaptureMetrics?

    /// A source over `capturer`. With `applyRotation`, each frame's rotation is applied to the pixels
    /// (outputs have rotation 0); else it is carried as metadata for the consumer to apply.
    public convenience init(capturer: CameraVideoCapturer, applyRotation: Bool = false) {
        self.init(capturer: capturer, options: Options(applyRotation: applyRotation))
    }

    /// A source over `capturer` that shapes every frame as `options` say.
    public init(capturer: CameraVideoCapturer, options: Options) {
        self.capturer = capturer
        self.options = options
        metrics = options.metricsDimensions.map(CaptureMetrics.init(dimensions:))
        rotationApplied = Atomic(options.applyRotation)
        var w = Work()
        w.deliveries.reserveCapacity(8)
        w.takers.reserveCapacity(8)
        work = Mutex(w)
        capturer.addDelegate(self)
    }

    /// The size of the output for a camera frame of `input` (rotated by `rotation`) with no request and no
    /// sink wanting less: what an encoder fed by this source gets, known before the first frame.
    public func plannedOutputSize(input: FrameSize, rotation: VideoRotation = .rotation0) -> FrameSize {
        let shown =
            VideoSource.rotation(for: rotation, options, applied: appliesRotation).swapsDimensions
            ? FrameSize(width: input.height, height: input.width) : input
        return Adaptation.fit(options.size ?? shown, maxSize: nil, maxPixelCount: nil).size
    }

    /// The rotation applied to the pixels of a frame that carries `frame`.
    private static func rotation(for frame: VideoRotation, _ options: Options, applied: Bool) -> VideoRotation {
        applied ? VideoRotation(degrees: frame.degrees + options.rotation.degrees) ?? .rotation0 : options.rotation
    }

    /// Whether each frame's own rotation is applied to the pixels (outputs then have rotation 0) or carried as
    /// metadata; `Options.applyRotation` until `setAppliesRotation(_:)` changes it.
    public var appliesRotation: Bool { rotationApplied.load(ordering: .acquiring) }

    /// Applies each frame's rotation to the pixels, or stops doing so, from the next frame (any thread; the
    /// camera is not restarted). A WebRTC sender turns it off while every receiver takes the rotation as metadata
    /// (the video-orientation RTP extension, WebRTC's `rotation_applied` = false): no rotation pass, and the
    /// receiver turns the picture. A 90° or 270° change swaps the output's width and height.
    public func setAppliesRotation(_ applies: Bool) { rotationApplied.store(applies, ordering: .releasing) }

    /// Keeps only the top left `size` of every frame larger than it, before anything else: a driver that rounded
    /// the size asked up to whole macroblocks (1920x1080 asked, 1920x1088 given) pads the bottom and right, and the
    /// picture is the size asked. nil (the default) keeps whole frames. Takes effect from the next frame.
    public func setVisibleSize(_ size: FrameSize?) { visible.withLock { $0 = size } }

    /// Gives the shared picture of every frame memory of the caller's choosing, from the next frame: `provider` is
    /// asked with the picture's size and returns an I420 buffer to convert into, or nil for one of the source's own
    /// pools. A frame tap hands out its ring slots, so that the converter writes each picture where the tap's readers
    /// read it, and the tap copies nothing (`FrameTap.destination(width:height:)`). nil (the default) removes it.
    /// The provider runs on the delivery thread; a picture converted into its buffer is what every sink gets.
    public func setPictureDestination(_ provider: (@Sendable (_ width: Int, _ height: Int) -> I420Buffer?)?) {
        // Kept by the converter (under the delivery lock: set between two frames), not read per frame: a closure
        // copied out of a lock each frame costs a retain, and a converted one an allocation.
        work.withLock { $0.converter.destination = provider }
    }

    /// Stops receiving frames from the capturer and ends every sequence.
    public func detach() {
        capturer?.removeDelegate(self)
        endStreams(nil)
    }

    // MARK: Sinks

    /// Adds a sink called with each frame it wants, on the capturer's delivery thread.
    @discardableResult
    public func addSink(wants: VideoSinkWants = .init(), _ onFrame: @escaping @Sendable (VideoFrame) -> Void) -> Sink {
        let id = control.withLock { c -> UInt64 in
            c.nextID += 1
            c.sinks.append(SinkEntry(id: c.nextID, wants: wants, target: .callback(onFrame)))
            return c.nextID
        }
        return Sink(id: id, source: self)
    }

    /// The frames a consumer wants, as an async sequence that ends when capture stops (throwing the capture
    /// error, as the capturer's own `frames()`) or when the source is detached. It buffers the newest
    /// `bufferingNewest` frames; older ones are dropped as `.starvation`. With `waitsForConsumer`, nothing is
    /// dropped: while the buffer is full the capturer's delivery thread waits for the consumer (frames as fast
    /// as they are consumed, from a fixture camera that paces itself on its buffers; a real camera's capturer
    /// then drops late frames itself, counted in its statistics).
    public func frames(wants: VideoSinkWants = .init(), bufferingNewest: Int = 2, waitsForConsumer: Bool = false) -> VideoFrameStream {
        let (id, sub) = control.withLock { c -> (UInt64, FrameSubscription) in
            c.nextID += 1
            let sub = FrameSubscription(
                id: c.nextID, capacity: max(1, min(bufferingNewest, 64)), whenFull: waitsForConsumer ? .waitForRoom : .dropOldest)
            c.sinks.append(SinkEntry(id: c.nextID, wants: wants, target: .stream(sub)))
            return (c.nextID, sub)
        }
        return VideoFrameStream(handle: FrameSubscription.Handle(sub) { [weak self] in self?.removeSink(id) })
    }

    func update(_ id: UInt64, wants: VideoSinkWants) {
        control.withLock { c in if let i = c.sinks.firstIndex(where: { $0.id == id }) { c.sinks[i].wants = wants } }
    }

    func removeSink(_ id: UInt64) {
        let removed = control.withLock { c -> SinkEntry? in
            guard let i = c.sinks.firstIndex(where: { $0.id == id }) else { return nil }
            return c.sinks.remove(at: i)
        }
        if case .stream(let sub)? = removed?.target { sub.finish(nil) }
    }

    // MARK: Output requests

    /// The middle of `size` with the aspect ratio of `target` (even sides), nil when the aspects already agree.
    static func centerCrop(_ size: FrameSize, toAspectOf target: FrameSize) -> CropRect? {
        guard size.width > 0, size.height > 0, target.width > 0, target.height > 0 else { return nil }
        let (w, h, tw, th) = (Int64(size.width), Int64(size.height), Int64(target.width), Int64(target.height))
        if w * th > h * tw { // wider than the target: cut the sides
            let cw = Int(h * tw / th) & ~1
            return cw > 0 && cw < size.width ? CropRect(x: ((size.width - cw) / 2) & ~1, y: 0, width: cw, height: size.height) : nil
        }
        if w * th < h * tw { // taller: cut top and bottom
            let ch = Int(w * th / tw) & ~1
            return ch > 0 && ch < size.height ? CropRect(x: 0, y: ((size.height - ch) / 2) & ~1, width: size.width, height: ch) : nil
        }
        return nil
    }

    /// Caps the output at `maxSize` (aspect kept, even sizes) and `maxFps` (frames thinned on timestamps),
    /// from the next frame; nil lifts a cap. Any thread, any time; the camera is not restarted.
    public func requestOutputFormat(maxSize: FrameSize?, maxFps: Double?) {
        control.withLock { $0.request = VideoAdapter.Request(maxSize: maxSize, maxFps: maxFps) }
    }

    /// The request in force from the last `requestOutputFormat(maxSize:maxFps:)` (no caps if none was made).
    public var outputRequest: VideoAdapter.Request { control.withLock { $0.request } }

    /// A snapshot of the counters and the current rates; safe from any thread.
    public var statistics: Statistics {
        var s = control.withLock { $0.stats }
        work.withLock { w in
            s.conversionP50Ms = w.times.percentileMs(0.5)
            s.conversionP95Ms = w.times.percentileMs(0.95)
            s.inputFps = w.inputWindow.fps
            s.outputFps = w.outputWindow.fps
        }
        return s
    }

    // MARK: CameraVideoCapturerDelegate

    /// Converts a captured frame once and delivers it to the sinks that want it. Called by the capturer on its
    /// delivery thread; an app does not call it.
    public func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame) {
        metrics?.frames.increment()
        if frame.isEncoded { return passThrough(frame) }
        if picturesPaused.load(ordering: .acquiring) { return passUnconverted(frame) }
        options.willAdapt?(frame)
        let (sinks, request) = control.withLock { c in (c.sinks, c.request) }
        var counts = (converted: false, scales: 0, output: false, dropReason: DropReason?.none)
        var outSize: FrameSize?, inSize = frame.buffer.size, limited = false
        // A padded frame (`setVisibleSize`): its visible part is the input from here on, cropped at conversion.
        var padding: CropRect?
        if let v = visible.withLock({ $0 }), v.width <= inSize.width, v.height <= inSize.height, v != inSize {
            (padding, inSize) = (CropRect(x: 0, y: 0, width: v.width, height: v.height), v)
        }
        var failure: ProcessingError?
        let deliveries = work.withLock { w -> [(Target, VideoFrame)] in
            w.deliveries.removeAll(keepingCapacity: true)
            w.inputWindow.add(frame.timestampNs)
            // A camera start or switch: every sink's next delivered frame carries the mark.
            if frame.isDiscontinuity { for s in sinks { w.marked.insert(s.id) } }
            // The source's rate: the fastest sink's, under the request's cap.
            var sourceFps: Double? = 0
            for s in sinks {
                guard let f = s.wants.maxFrameRate, f.isFinite, f > 0 else {
                    sourceFps = nil
                    break
                }
                sourceFps = max(sourceFps ?? 0, f)
            }
            if sourceFps == 0 { sourceFps = nil }
            if let r = request.maxFps, r.isFinite, r > 0 { sourceFps = min(sourceFps ?? r, r) }
            guard !sinks.isEmpty, w.sourceGate.keep(timestampNs: frame.timestampNs, maxFps: sourceFps) else {
                counts.dropReason = .adaptation
                return []
            }
            // Which sinks take this frame (each sink's own cadence under the source's).
            w.takers.removeAll(keepingCapacity: true)
            for (i, s) in sinks.enumerated() {
                let fps = min(s.wants.maxFrameRate ?? .infinity, request.maxFps ?? .infinity)
                if w.gates[s.id, default: FrameRateGate()].keep(timestampNs: frame.timestampNs, maxFps: fps.isFinite ? fps : nil) {
                    w.takers.append(i)
                }
            }
            let takers = w.takers
            guard !takers.isEmpty else {
                counts.dropReason = .adaptation
                return []
            }
            // The shared output: the most pixels any taker wants, under the request.
            // A sink with a box but no budget limits the pixels by its box; a sink with neither takes everything.
            var maxPixels: Int? = 0, alignment = 2, box: FrameSize? = FrameSize(width: 0, height: 0)
            for i in takers {
                let wnt = sinks[i].wants
                alignment = max(alignment, wnt.alignment)
                let b = wnt.box
                if let b { box = box.map { FrameSize(width: max($0.width, b.width), height: max($0.height, b.height)) } } else { box = nil }
                let budget =
                    wnt.maxPixelCount.flatMap { $0 > 0 ? $0 : nil } ?? b.map { $0.width.multipliedReportingOverflow(by: $0.height).partialValue }
                if let p = budget { maxPixels = maxPixels.map { max($0, p) } } else { maxPixels = nil }
            }
            let applied = rotationApplied.load(ordering: .acquiring)
            let rotation = VideoSource.rotation(for: frame.rotation, options, applied: applied)
            if rotation.swapsDimensions { inSize = FrameSize(width: inSize.height, height: inSize.width) }
            // The source's own size (exact, stretched) replaces the camera's before requests and wants apply.
            let base = options.size ?? inSize
            if let m = request.maxSize, m.width > base.width || m.height > base.height { limited = true }
            var bound = request.maxSize
            if let b = box, b.width > 0 {
                bound = bound.map { FrameSize(width: min($0.width, b.width), height: min($0.height, b.height)) } ?? b
            }
            let shared = Adaptation.fit(base, maxSize: bound, maxPixelCount: maxPixels, alignment: alignment)
            let t0 = monotonicNanoseconds()
            let picture: I420Buffer
            var formatOnly = false
            do throws(ProcessingError) {
                // Crop applies to the unrotated input: map it back when rotating by 90/270. A fixed size is a
                // stretch of the whole picture (its fit's crop would be of the fixed size, not of the input).
                var crop: CropRect?
                if let size = options.size {
                    crop = options.cropsToAspect ? VideoSource.centerCrop(inSize, toAspectOf: size) : nil
                } else {
                    crop = shared.crop
                }
                if let c = crop, rotation.swapsDimensions { crop = CropRect(x: c.y, y: c.x, width: c.height, height: c.width) }
                crop = crop ?? padding // the visible part lies at the top left: a crop within it is one of the frame
                let scale = shared.isIdentity && options.size == nil ? nil : shared.size
                formatOnly = crop == nil && scale == nil && rotation == .rotation0 && !options.mirror
                picture = try w.converter.convert(
                    frame.buffer,
                    options: FrameConverter.Options(
                        crop: crop, rotation: rotation, mirror: options.mirror, scale: scale))
            } catch {
                // One bad frame (a corrupt JPEG, a short buffer) is dropped; anything else will fail every frame.
                if error.code != .decodeFailed && error.code != .shortBuffer { failure = error }
                counts.dropReason = .undecodable
                return []
            }
            counts.converted = true
            let convertedNs = monotonicNanoseconds() - t0
            options.didConvert?(frame.sequence, convertedNs)
            metrics?.conversion.recordNanoseconds(convertedNs)
            outSize = FrameSize(width: picture.width, height: picture.height)
            let outRotation: VideoRotation = applied ? .rotation0 : frame.rotation
            let color = frame.colorSpace.convertedToI420(from: frame.buffer.pixelFormat)
            var sharedFrame = VideoFrame(
                buffer: picture.buffer, rotation: outRotation, timestampNs: frame.timestampNs, sequence: frame.sequence, colorSpace: color)
            // A conversion of format only keeps the camera's exported buffer beside the picture (zero-copy import).
            if frame.buffer.dmaBuf != nil, picture.buffer.dmaBuf == nil, formatOnly, picture.width == frame.buffer.width,
                picture.height == frame.buffer.height
            {
                sharedFrame.capturedBuffer = frame.buffer
            }
            for i in takers {
                let s = sinks[i]
                var out = sharedFrame
                let p = s.wants.maxPixelCount.flatMap { $0 > 0 ? $0 : nil }, b = s.wants.box
                let over =
                    p.map { $0 < picture.width * picture.height } == true || b.map { $0.width < picture.width || $0.height < picture.height } == true
                if over || ((p != nil || b != nil) && s.wants.alignment > alignment) {
                    let mine = Adaptation.fit(outSize!, maxSize: b, maxPixelCount: p, alignment: s.wants.alignment)
                    if !mine.isIdentity {
                        let scaler = w.scalers[s.id] ?? FrameConverter()
                        w.scalers[s.id] = scaler
                        if let scaled = try? scaler.convert(picture.buffer, options: FrameConverter.Options(crop: mine.crop, scale: mine.size)) {
                            out = VideoFrame(
                                buffer: scaled.buffer, rotation: outRotation, timestampNs: frame.timestampNs, sequence: frame.sequence,
                                colorSpace: color)
                            counts.scales += 1
                        }
                    }
                }
                out.isDiscontinuity = w.marked.remove(s.id) != nil
                w.deliveries.append((s.target, out))
            }
            w.times.add(monotonicNanoseconds() - t0)
            w.outputWindow.add(frame.timestampNs)
            counts.output = true
            // Forget per-sink state of sinks that are gone.
            if w.gates.count > sinks.count + 4 { w.gates = w.gates.filter { id in sinks.contains { $0.id == id.key } } }
            if w.scalers.count > sinks.count + 4 { w.scalers = w.scalers.filter { id in sinks.contains { $0.id == id.key } } }
            return w.deliveries
        }
        var starved = 0
        for (target, f) in deliveries {
            switch target {
            case .callback(let call): call(f)
            case .stream(let sub): starved += sub.yield(f)
            }
        }
        work.withLock { $0.deliveries.removeAll(keepingCapacity: true) }
        control.withLock { c in
            c.stats.inputFrames += 1
            c.stats.inputSize = inSize
            c.stats.limitedByCamera = limited
            if counts.converted {
                c.stats.conversions += 1
                if frame.buffer.storage.isBorrowed { c.stats.zeroCopyFrames += 1 }
            }
            c.stats.sinkScales += counts.scales
            if counts.output {
                c.stats.outputFrames += 1
                c.stats.outputSize = outSize
            }
            if let r = counts.dropReason { c.stats.dropped[r, default: 0] += 1 }
            if starved > 0 { c.stats.dropped[.starvation, default: 0] += starved }
        }
        if let metrics {
            if counts.dropReason == .undecodable { metrics.undecodable.increment() }
            if starved > 0 { metrics.droppedFrames.increment(by: starved) }
        }
        if let failure {
            // Frames of this format cannot be converted at all: the sequences end with the reason.
            endStreams(CaptureError(.unsupportedFormat, "frames cannot be converted to I420: \(failure)"))
        }
    }

    /// Pauses (or resumes) pictures: while paused, a frame costs its dequeue only. No conversion, scaling or
    /// rate gate runs; the async streams get the camera's frame marked `isUnconverted` (their owner keeps its
    /// clock: a session times its idle release by them) and callback sinks get nothing. For a session whose
    /// stages want no picture (a server without viewers).
    package func setPicturesPaused(_ paused: Bool) { picturesPaused.store(paused, ordering: .releasing) }

    private func passUnconverted(_ frame: VideoFrame) {
        var f = frame
        f.isUnconverted = true
        let sinks = control.withLock { $0.sinks }
        for s in sinks { if case .stream(let sub) = s.target { _ = sub.yield(f) } }
        control.withLock { $0.stats.inputFrames += 1 }
    }

    /// A camera's own encoded access unit (`VideoFrame.isEncoded`): nothing to convert, scale or thin (a dropped
    /// frame would break the stream until the next key frame), so every sink gets it as it came.
    private func passThrough(_ frame: VideoFrame) {
        let sinks = control.withLock { $0.sinks }
        var starved = 0
        for s in sinks {
            switch s.target {
            case .callback(let call): call(frame)
            case .stream(let sub): starved += sub.yield(frame)
            }
        }
        control.withLock { c in
            c.stats.inputFrames += 1
            c.stats.inputSize = frame.buffer.size
            if !sinks.isEmpty {
                c.stats.outputFrames += 1
                c.stats.outputSize = frame.buffer.size
            }
            if starved > 0 { c.stats.dropped[.starvation, default: 0] += starved }
        }
        if starved > 0 { metrics?.droppedFrames.increment(by: starved) }
    }

    /// Counts frames the capturer dropped as `DropReason.late` (except drops for want of a consumer). Called by
    /// the capturer.
    public func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason) {
        guard reason != .noConsumer else { return }
        control.withLock { $0.stats.dropped[.late, default: 0] += count }
        metrics?.droppedFrames.increment(by: count)
    }

    /// Ends the source's async sequences, throwing `error` if capture failed; callback sinks stay registered for
    /// the next start. Called by the capturer.
    public func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?) {
        endStreams(error)
    }

    /// The streams end at a stop before the capturer waits for its delivery thread: a stream made with
    /// `waitsForConsumer` that its consumer stopped reading (a loop left with `break`, then `stopCapture()`) would
    /// otherwise hold that thread, and the stop, forever. Their queued frames can still be read.
    public func capturerWillStop(_ capturer: CameraVideoCapturer) {
        endStreams(nil)
    }

    /// Ends the sequences (they are made per run, like the capturer's); callback sinks stay.
    private func endStreams(_ error: CaptureError?) {
        let subs = control.withLock { c -> [FrameSubscription] in
            let subs = c.sinks.compactMap { s -> FrameSubscription? in if case .stream(let sub) = s.target { return sub } else { return nil } }
            c.sinks.removeAll { if case .stream = $0.target { return true } else { return false } }
            return subs
        }
        for s in subs { s.finish(error) }
    }
}
