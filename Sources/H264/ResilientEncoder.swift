public import VideoCapture
import SystemIO

/// A `VideoEncoder` that watches another (a hardware encoder) and keeps frames coming: when the encoder gives no
/// output for `Configuration.stallTimeoutNs` (default 1 s), or fails, it is closed (its buffers handed back) and a
/// new one made by the same factory, asked for a key frame and given the same picture again; after
/// `Configuration.maxFailures` failures (default 3) the fallback (OpenH264) takes over for the rest of the run.
///
/// Requests on `control` (key frames, bitrates from congestion control) reach whichever encoder runs, before its
/// next frame; the bitrate last asked is the one a new encoder starts with. The statistics add up the encoders'
/// frames, and `EncoderStatistics.watchdog` says what happened, for the summary:
/// "v4l2m2m /dev/video11 failed 3 times (no output for 1.0 s); fell back to OpenH264".
///
/// ```swift
/// import H264
/// import VideoCapture
///
/// func resilient(_ primary: @escaping ResilientEncoder.Factory, _ settings: H264Encoder.Settings) throws -> ResilientEncoder {
///     try ResilientEncoder(
///         settings: settings, control: EncoderControl(), configuration: .init(name: "v4l2m2m /dev/video11"), primary: primary)
/// }
/// ```
///
/// Time is read through `now` (monotonic nanoseconds), which tests replace with a simulated clock. An encoder that
/// holds each picture until its frame is out (`V4L2M2MEncoder.encode`) should wait no longer than the stall
/// timeout: its own timeout error is then the stall.
public final class ResilientEncoder: VideoEncoder {
    /// Makes an encoder for the settings with the control given (`EncodeStage.EncoderFactory`'s shape).
    public typealias Factory = @Sendable (_ settings: H264Encoder.Settings, _ control: EncoderControl) throws -> any VideoEncoder

    /// OpenH264, the default fallback.
    public static let openH264: Factory = { settings, control in try H264Encoder(settings: settings, control: control) }

    /// The watchdog's limits and the name the summary gives the watched encoder.
    public struct Configuration: Sendable, Equatable {
        /// The watched encoder, as the summary names it ("v4l2m2m /dev/video11").
        public var name: String
        /// How long the encoder may give no output before it counts as stalled, nanoseconds.
        public var stallTimeoutNs: Int64
        /// Failures (stalls, errors, failed restarts) after which the fallback takes over.
        public var maxFailures: Int
        /// The fallback's name in the summary.
        public var fallbackName: String
        /// A watchdog for `name` with these limits.
        public init(name: String, stallTimeoutNs: Int64 = 1_000_000_000, maxFailures: Int = 3, fallbackName: String = "OpenH264") {
            self.name = name
            self.stallTimeoutNs = stallTimeoutNs
            self.maxFailures = max(1, maxFailures)
            self.fallbackName = fallbackName
        }
    }

    /// What the watchdog did, in order (`events`).
    public enum Event: Sendable, Equatable {
        /// The encoder failed at `timeNs` (the clock's), for `reason`.
        case failed(reason: String, timeNs: Int64)
        /// A new encoder was made at `timeNs`.
        case restarted(timeNs: Int64)
        /// The fallback took over at `timeNs`.
        case fellBack(timeNs: Int64)
        /// The encoder refused the camera's buffers at `timeNs` (`ImportRefusedError`, for `reason`); one that copies
        /// pictures in took over (not a failure).
        case copying(reason: String, timeNs: Int64)
    }

    /// The settings in force (the running encoder's).
    public private(set) var settings: H264Encoder.Settings
    /// The caller's control: requests are taken from it before every frame and handed to the running encoder; the
    /// added-up statistics are published on it.
    public let control: EncoderControl
    /// The watchdog's limits.
    public let configuration: Configuration
    /// Failures so far.
    public private(set) var failures = 0
    /// True once the fallback runs.
    public private(set) var fellBack = false
    /// What happened, in order.
    public private(set) var events: [Event] = []
    /// Called on the encoding thread after each event (tests wait on it).
    public var onEvent: (@Sendable (Event) -> Void)?

    /// Makes the watched encoder (the copying one once the camera's buffers were refused).
    private var primary: Factory
    private let fallback: Factory
    /// The primary copying pictures in, made when the running one refuses the camera's buffers
    /// (`ImportRefusedError`); nil: such a refusal is a failure like any other.
    private var copying: Factory?
    /// Why the camera's buffers were refused, once they were (the summary's note says so).
    private var importRefusal: String?
    private let now: @Sendable () -> Int64
    /// The running encoder's own control: requests are moved to it from `control`, it publishes its counters there.
    private let inner = EncoderControl()
    private var current: (any VideoEncoder)?
    private var lastOutputNs: Int64
    /// The counters of the encoders closed so far.
    private var base = EncoderStatistics()
    private var firstReason: String?
    private var restarts = 0

    /// Makes the primary encoder for `settings` (a failure to make it counts as a failure; after `maxFailures` the
    /// fallback is made instead). Throws only when the fallback cannot be made either. `now` reads the clock
    /// (monotonic nanoseconds; nil: the system's monotonic clock).
    public init(
        settings: H264Encoder.Settings, control: EncoderControl, configuration: Configuration,
        now: (@Sendable () -> Int64)? = nil, primary: @escaping Factory,
        fallback: @escaping Factory = ResilientEncoder.openH264, copying: Factory? = nil
    ) throws {
        self.settings = settings
        self.control = control
        self.configuration = configuration
        self.primary = primary
        self.fallback = fallback
        self.copying = copying
        let clock = now ?? { SystemClock.monotonicNanoseconds() }
        self.now = clock
        lastOutputNs = clock()
        while current == nil {
            if failures >= configuration.maxFailures {
                try fallBack()
            } else {
                do { current = try primary(settings, inner) } catch { record(failure: describe(error)) }
            }
        }
        lastOutputNs = clock()
    }

    deinit { close() }

    /// What the summary says (the same as `statistics.watchdog`): nil while the first encoder runs unharmed.
    public private(set) var note: String?

    /// Words for `note`, made when something happens (not per frame).
    private func updateNote() {
        let copied = importRefusal.map { "\(configuration.name) refused the camera's buffers (\($0)); pictures copied in since" }
        guard let firstReason else {
            note = copied
            return
        }
        let times = failures == 1 ? "once" : "\(failures) times"
        let failed =
            fellBack
            ? "\(configuration.name) failed \(times) (\(firstReason)); fell back to \(configuration.fallbackName)"
            : "\(configuration.name) failed \(times) (\(firstReason)); restarted \(restarts == 1 ? "once" : "\(restarts) times")"
        note = copied.map { "\($0); \(failed)" } ?? failed
    }

    /// The running encoder's counters added to those of the encoders before it, with the watchdog's note.
    public var statistics: EncoderStatistics { merged(current?.statistics ?? inner.statistics) }

    /// Encodes with the running encoder. A stall (no output for `stallTimeoutNs`) or an error makes a new encoder
    /// (or, after `maxFailures`, the fallback), which encodes the same picture, starting with a key frame.
    public func encode(_ picture: I420Buffer, timestampNs: Int64, into out: inout EncodedFrame) throws {
        try watched(&out) { encoder, out in try encoder.encode(picture, timestampNs: timestampNs, into: &out) }
    }

    /// The same, with the camera's frame: an encoder that imports the camera's buffers (DMA-BUF) takes it as it is;
    /// a new one after a failure, and the fallback, get the same frame or picture.
    public func encode(_ picture: I420Buffer, frame: VideoFrame, into out: inout EncodedFrame) throws {
        try watched(&out) { encoder, out in try encoder.encode(picture, frame: frame, into: &out) }
    }

    /// The running encoder's drain (a hardware encoder's held frames), at the end of the run.
    public func finish(_ body: (EncodedFrame) throws -> Void) throws { try current?.finish(body) }

    /// The running encoder's description, with "after N failures" once it is not the first; the fallback's name once
    /// it runs.
    public var summaryDescription: String? {
        if fellBack { return "\(configuration.fallbackName) (the fallback)" }
        return current?.summaryDescription ?? configuration.name
    }

    private func watched(_ out: inout EncodedFrame, _ body: (any VideoEncoder, inout EncodedFrame) throws -> Void) throws {
        forwardRequests()
        while true {
            guard let encoder = current else { throw H264Error("the encoder is closed") }
            let reason: String
            do {
                try body(encoder, &out)
                let t = now()
                if !out.isSkipped || fellBack || t - lastOutputNs < configuration.stallTimeoutNs {
                    if !out.isSkipped { lastOutputNs = t }
                    settings = encoder.settings
                    let stats = merged(inner.statistics)
                    control.publish { $0 = stats }
                    return
                }
                reason = stallText
            } catch let error as ImportRefusedError where !fellBack && copying != nil {
                try switchToCopying(error.reason)
                continue // the same picture, copied in: not a failure
            } catch let error where !fellBack {
                reason = now() - lastOutputNs >= configuration.stallTimeoutNs ? stallText : describe(error)
            }
            try replace(reason: reason)
        }
    }

    /// Closes the running encoder; safe to call more than once.
    public func close() {
        current?.close()
        current = nil
    }

    // MARK: -

    private var stallText: String {
        let tenths = (configuration.stallTimeoutNs + 50_000_000) / 100_000_000
        return "no output for \(tenths / 10).\(tenths % 10) s"
    }

    private func describe(_ error: any Error) -> String { "\(error)" }

    private func record(failure reason: String) {
        failures += 1
        if firstReason == nil { firstReason = reason }
        emit(.failed(reason: reason, timeNs: now()))
    }

    private func emit(_ e: Event) {
        updateNote()
        events.append(e)
        onEvent?(e)
    }

    /// Closes the failed encoder and makes the next one (a new primary, or the fallback), asking it for a key frame.
    private func replace(reason: String) throws {
        retireCurrent()
        record(failure: reason)
        while current == nil {
            if failures >= configuration.maxFailures {
                try fallBack()
            } else {
                do {
                    current = try primary(settings, inner)
                    restarts += 1
                    emit(.restarted(timeNs: now()))
                } catch {
                    record(failure: describe(error))
                }
            }
        }
        inner.requestKeyFrame()
        lastOutputNs = now()
    }

    /// The running encoder refused the camera's buffer (nothing reached the device): it is closed and the copying
    /// factory's encoder takes over, asked for a key frame; from then on every encoder made copies pictures in. A
    /// copying encoder that cannot be made counts as a failure (the watchdog's rules then apply).
    private func switchToCopying(_ reason: String) throws {
        guard let copying else { return }
        self.copying = nil
        importRefusal = reason
        primary = copying // restarts from now on copy too
        retireCurrent()
        do {
            current = try copying(settings, inner)
            emit(.copying(reason: reason, timeNs: now()))
        } catch {
            try replace(reason: describe(error))
        }
        inner.requestKeyFrame()
        lastOutputNs = now()
    }

    /// Adds the running encoder's counters to those of the encoders before it, carries its bitrate over and closes
    /// it (its buffers handed back before anything is opened again).
    private func retireCurrent() {
        guard let c = current else { return }
        let s = c.statistics
        base.frames += s.frames
        base.keyFrames += s.keyFrames
        base.skipped += s.skipped
        (base.copiedFrames, base.importedFrames) = (base.copiedFrames + s.copiedFrames, base.importedFrames + s.importedFrames)
        settings.targetBitrate = c.settings.targetBitrate // the bitrate last asked carries over
        c.close()
        current = nil
    }

    private func fallBack() throws {
        current = try fallback(settings, inner)
        fellBack = true
        emit(.fellBack(timeNs: now()))
    }

    /// Moves the caller's requests to the running encoder's control.
    private func forwardRequests() {
        let p = control.take()
        if p.keyFrame { inner.requestKeyFrame() }
        if let r = p.rates {
            if let fps = r.fps { try? inner.setRates(bitrate: r.bitrate, fps: fps) } else { try? inner.setBitrate(r.bitrate) }
        }
        if let cs = p.colorSpace { inner.setColorSpace(cs) }
    }

    private func merged(_ s: EncoderStatistics) -> EncoderStatistics {
        var m = s
        m.frames += base.frames
        m.keyFrames += base.keyFrames
        m.skipped += base.skipped
        (m.copiedFrames, m.importedFrames) = (m.copiedFrames + base.copiedFrames, m.importedFrames + base.importedFrames)
        m.watchdog = note
        return m
    }
}
