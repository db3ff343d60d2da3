public import VideoCapture
public import VideoProcessing
public import Logging
import Foundation
import Metrics
import H264
import Synchronization
import SystemIO

// The one capture loop every capturing command runs on (record, preview, stream, serve), and that an app runs
// without the CLI:
//
//   camera ─▶ CameraVideoCapturer ─▶ VideoSource (one conversion to I420, adaptation) ─▶ frames() ─▶ stage ─▶ stage ─▶ …
//
// The session owns the capturer, the device, the negotiated selection and the applied format, the stop
// conditions (on frame timestamps, not the wall clock), the bad-frame policy, the statistics and the summary.
// It never prints: the start, the progress and the summary reach the caller through closures and the report.

/// A step of the pipeline: it gets every I420 picture (from the `VideoSource`'s one conversion per frame) and the
/// frame it came from. A stage checks and opens its outputs in its initialiser, before the camera starts.
public protocol PictureStage: AnyObject {
    /// Refuses, before the camera starts, a session whose frames the stage cannot take: `run(stages:)` calls it for
    /// every stage before it starts the camera. A refusal is a `PipelineError` with code `invalidConfiguration`
    /// naming the stage, the camera and its format (`CaptureSession.refusal(of:takes:instead:)`).
    func check(_ session: CaptureSession) throws
    /// Once the session's source exists, before the camera starts (after every `check`): a stage that gives the
    /// source something it uses from the first frame on (a frame tap's slots to convert into) gives it here.
    func prepare(_ source: VideoSource)
    /// After the camera started, before the first picture.
    func begin(_ session: CaptureSession) throws
    /// One picture. A thrown error stops the pipeline (a write failure); bad captured frames never get here.
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws
    /// While the camera is away (lost and waited for, or without signal), about once a second: a stage that serves
    /// live viewers sends them a placeholder (a dark slate at its last size), so that players neither time out
    /// nor hang up; a stage that writes files sends nothing (the recording shows the gap). Returns true when it
    /// sent one.
    func placeholder(timestampNs: Int64) throws -> Bool
    /// Closes outputs; called once at the end, also after an error.
    func end() throws
    /// Gives up the outputs when the run fails before it starts (existing files keep their contents, new ones go).
    func discard()
    /// Live figures for the progress line ("1480 kbps").
    var progress: String? { get }
    /// What the stage did in the run (`StageReport`: its kind's figures), read at the end of a run: the session
    /// writes the summary from it (the stage's part of the `frames:` line and its lines) and returns it in
    /// `Report.stages`.
    var report: StageReport { get }
    /// False while the stage has no use for pictures (an encoder whose outputs have nobody to send to); when
    /// no stage wants pictures for `Configuration.idleReleaseNs`, the camera is released.
    var wantsPictures: Bool { get }
    /// The path of a file the stage writes to that has not received a byte (a failed run then says that nothing
    /// was written to it); nil when it has, or the stage writes no file.
    var unwrittenFile: String? { get }
}

extension PictureStage {
    /// Refuses a camera that delivers its own H.264 (`CaptureSession.deliversAccessUnits`), unless the stage is an
    /// `EncodedFrameStage`: any other stage gets pictures only, and would get none.
    public func check(_ session: CaptureSession) throws {
        guard session.deliversAccessUnits, !(self is any EncodedFrameStage) else { return }
        throw session.refusal(
            of: self, takes: "pictures",
            instead:
                "pass the camera's stream on with a PassthroughStage (`Recorder` picks the stage for the camera), or ask it for a raw or MJPEG format (`pixelFormats`)"
        )
    }
    /// Does nothing.
    public func prepare(_ source: VideoSource) {}
    /// Does nothing.
    public func begin(_ session: CaptureSession) throws {}
    /// Does nothing.
    public func discard() {}
    /// Sends nothing: the stage has no live viewers.
    public func placeholder(timestampNs: Int64) throws -> Bool { false }
    /// Nothing: the stage adds nothing to the progress line.
    public var progress: String? { nil }
    /// Nothing: the stage adds nothing to the summary.
    public var report: StageReport { .empty }
    /// Always true: the stage keeps the camera running.
    public var wantsPictures: Bool { true }
    /// nil: the stage writes no file.
    public var unwrittenFile: String? { nil }
}

/// One capture session from negotiation to summary: `init` does everything that can fail before the camera
/// starts (device, negotiation), `run(stages:)` captures until a stop condition and returns the report.
public final class CaptureSession {
    /// What to capture, and when to stop.
    public struct Configuration: Sendable {
        /// /dev/videoN, fixture:NAME or a fixture file; nil: the first V4L2 camera (an error when there is none:
        /// name `fixture:uvc-webcam` to run without one; the library never stands in a test pattern silently).
        public var device: String?
        /// The target size; negotiation picks the closest the device offers.
        public var size = FrameSize(width: 1280, height: 720)
        /// The frame-rate limit for negotiation (a fraction: `Fraction(30000, 1001)`, `Fraction(rate: "12.5")`).
        public var fpsLimit: Fraction = 30
        /// The pixel formats wanted, preferred in this order (empty: any, by conversion cost).
        public var pixelFormats: [PixelFormat] = []
        /// Constraints as a browser states them (`VideoConstraints`): when set, negotiation is W3C SelectSettings
        /// over the device's modes (`FormatSelector.select(from:constraints:fpsLimit:)`) instead of `size`; a
        /// `crop-and-scale` answer delivers its smaller size. A camera that cannot meet them is an
        /// `OverconstrainedError` from `init`.
        public var constraints: VideoConstraints?
        /// Stop after this many processed frames.
        public var frames: Int?
        /// Stop after this much capture, on frame timestamps (nanoseconds), from the first frame (with a camera's own
        /// H.264, the first written: access units held back before its first key frame do not start it, unless they
        /// last the whole duration). With neither limit, the session runs until `stop()` or the end of the capture.
        public var durationNs: Int64?
        /// The cameras' providers, asked in this order (`CameraVideoCapturer`'s): `V4L2DeviceProvider()` for real
        /// cameras, a `FixtureCameraProvider` for the built-in ones (modules V4L2Capture and FixtureCameras), or
        /// an app's own. None by default: the session sees no camera until given one.
        public var providers: [any CaptureDeviceProvider] = []
        /// Fixture cameras only: frames as fast as they are consumed (give the fixture provider the
        /// `.asFastAsConsumed` pacing too), timestamps exactly 1/fps apart, no drops.
        public var fast = false
        /// Camera controls set before the first frame, in order.
        public var controls: [CameraControlSetting] = []
        /// The anti-flicker filter set on start, where the camera has it.
        public var powerLine: PowerLineFrequency?
        /// Release the camera when no stage has wanted pictures (`PictureStage.wantsPictures`: a server without
        /// viewers) for this long, on frame timestamps, and start it again at `wake()`; nil keeps it running.
        public var idleReleaseNs: Int64?
        /// Dimensions added to every metric the session and its encode stages record, after `("camera", path)`
        /// (the device's path or fixture name), so that two sessions in one process count apart: say
        /// `[("session", "front-door")]` to tell apart two sessions of one camera.
        public var metricsDimensions: [(String, String)] = []
        /// What a camera that fails mid-run does to the run (unplugged, failed, stalled past its stream's own
        /// restart): `.exit` ends it with the failure (the default), `.wait` waits for the camera and carries on.
        public var onCameraLoss: CameraLossPolicy = .exit
        /// Where the capturer logs (nothing by default).
        public var logger = Logger(label: "swift-video-capture.capture", factory: { _ in SwiftLogNoOpLogHandler() })
        /// The defaults: the first real camera of `providers` at 1280x720, up to 30 fps, until `stop()`.
        public init() {}

        /// The defaults with these cameras (`providers`) and, when given, this logger.
        public init(providers: [any CaptureDeviceProvider], logger: Logger? = nil) {
            self.providers = providers
            if let logger { self.logger = logger }
        }
    }

    /// What the session was made with.
    public let configuration: Configuration
    /// The capturer the session runs (its own, or the one given to `init(_:capturer:)`); its statistics and
    /// controls may be used while the session runs.
    public let capturer: CameraVideoCapturer
    /// The camera chosen (after a loss healed, the node it came back as: its `path` may be another /dev/videoN).
    public internal(set) var device: CaptureDevice
    /// The dimensions of this session's metrics: `("camera", device.path)`, then the configuration's own.
    public var metricsDimensions: [(String, String)] { [("camera", device.path)] + configuration.metricsDimensions }
    /// What negotiation picked for the device (the format asked for; `applied` is what the driver set).
    public internal(set) var selection: FormatSelection
    /// True when the camera delivers its own H.264 (the selection's pixel format): the stages get its access
    /// units (`EncodedFrameStage`), never pictures.
    public var deliversAccessUnits: Bool { selection.frameKind == .accessUnit }
    /// The refusal of a stage that cannot take this session's frames (`PictureStage.check(_:)`): "EncodeStage takes
    /// pictures, and fixture:h264-webcam delivers its own H.264 (H264), …", then what to do `instead`.
    public func refusal(of stage: any PictureStage, takes: String, instead: String) -> PipelineError {
        let delivered =
            deliversAccessUnits
            ? "its own H.264 (H264), passed through as access units and never decoded" : "pictures (\(selection.pixelFormat))"
        return PipelineError(.invalidConfiguration, "\(type(of: stage)) takes \(takes), and \(device.path) delivers \(delivered): \(instead)")
    }
    /// What the device applied (set once the camera has started).
    public private(set) var applied = AppliedFormat(pixelFormat: .i420, size: FrameSize(width: 0, height: 0), stride: 0, fps: Fraction(30))
    /// How the source shapes each frame (rotation applied, mirror, a fixed size); by default the camera's
    /// picture at its size made even. Every stage gets the source's one conversion per frame.
    public var sourceOptions = VideoSource.Options()
    /// The source of this run's pictures (set when `run` starts): sinks of an app's own may be added to it.
    public internal(set) var source: VideoSource?
    /// Output requests replayed from a schedule on frame timestamps (`record --adapt`); the step callback sets
    /// the rest (the bitrate). Called on the capturer's delivery thread.
    public var adaptSchedule: AdaptSchedule?
    /// Called with each step of `adaptSchedule` as it applies, on the capturer's delivery thread (set the
    /// encoder's bitrate here).
    public var onAdaptationStep: @Sendable (AdaptSchedule.Step) -> Void = { _ in }
    /// Requests from other threads (REMB), passed to the source; with the first one, the summary reports
    /// the adaptation.
    public let outputRequests = OutputRequests()
    /// Extra text for the format line of the summary (", encoded at 640x360").
    public var formatNote = ""
    /// Called once the camera runs and every stage has begun (the CLI prints its start line here).
    public var onStarted: (CaptureSession) -> Void = { _ in }
    /// A progress line, at most once per `progressIntervalNs` of wall time (formatted only when due).
    public var onProgress: ((String) -> Void)?
    /// How often `onProgress` is called, in nanoseconds of wall time (2 s by default).
    public var progressIntervalNs: Int64 = 2_000_000_000
    let stopFlag = StopFlag()
    let wakeSignal = WakeSignal()
    /// Wakes a session waiting for its lost camera before its backoff ends (`cameraMayBeBack()`).
    let healSignal = WakeSignal()
    /// The camera's health now (state and counts of this session's events), for a server's status page.
    public let health = CameraHealth()
    /// The camera's comings and goings (`CaptureEvent`), as they happen; finished when `run(stages:)` returns.
    public let events: AsyncStream<CaptureEvent>
    let eventSink: AsyncStream<CaptureEvent>.Continuation
    /// Events worth a line (the camera released or restarted), on the session's thread.
    public var onEvent: ((String) -> Void)?
    /// Per-frame stage times (real time only: not with `Configuration.fast`), kept when set before `run`.
    public var frameTrace: FrameTrace?

    /// Checks the whole configuration (`Configuration.validate()`: `size`, `fpsLimit`, `pixelFormats`, `frames`,
    /// `durationNs`, `idleReleaseNs`), resolves the device and negotiates: everything that can fail before the
    /// camera starts. Pass a capturer of your own, or the session makes one
    /// with the configuration's providers (`capturer(for:)`). A refusal names the setting and the value.
    public init(_ configuration: Configuration, capturer: CameraVideoCapturer? = nil) throws {
        try configuration.validate()
        (events, eventSink) = AsyncStream.makeStream(of: CaptureEvent.self, bufferingPolicy: .bufferingNewest(256))
        self.configuration = configuration
        let capturer = capturer ?? CaptureSession.capturer(for: configuration)
        self.capturer = capturer
        device = try configuration.device.map { spec throws(CaptureError) in try capturer.device(spec) } ?? CaptureSession.defaultDevice(capturer)
        if configuration.fast && device.driver != "fixture" {
            throw PipelineError(
                .invalidConfiguration,
                "--fast is for fixture cameras (frames as fast as they are consumed); \(device.path) is a real camera, which delivers at its own rate"
            )
        }
        (selection, constrainedSize) = try CaptureSession.negotiation(capturer, device, configuration)
    }

    /// Negotiates again (at the start, and when the source changed): the constraints' choice when there are
    /// constraints, else the package's rule for `size`.
    func negotiate() throws {
        (selection, constrainedSize) = try CaptureSession.negotiation(capturer, device, configuration)
    }
    private static func negotiation(
        _ capturer: CameraVideoCapturer, _ device: CaptureDevice, _ configuration: Configuration
    ) throws -> (FormatSelection, FrameSize?) {
        guard let constraints = configuration.constraints else {
            let selection = try capturer.selectFormat(
                for: device, targetSize: configuration.size, fpsLimit: configuration.fpsLimit, pixelFormats: configuration.pixelFormats)
            return (selection, nil)
        }
        let chosen = try FormatSelector.select(
            from: try capturer.supportedFormats(for: device), constraints: constraints, fpsLimit: configuration.fpsLimit)
        return (chosen.selection, chosen.outputSize)
    }
    /// The size a `crop-and-scale` constraint asked for (the pictures are scaled to it), nil otherwise.
    public private(set) var constrainedSize: FrameSize?

    /// A capturer with the configuration's providers, set up for it (late frames, controls, power line, logger).
    public static func capturer(for configuration: Configuration) -> CameraVideoCapturer {
        // As-fast-as-consumed fixture frames are not dropped: the capturer waits for the consumer.
        CameraVideoCapturer(
            providers: configuration.providers,
            configuration: .init(
                maxPendingFrames: 2, alwaysDiscardsLateFrames: !configuration.fast,
                powerLineFrequency: configuration.powerLine, startControls: configuration.controls),
            logger: configuration.logger)
    }

    /// The default camera: the capturer's first real camera (not a fixture camera, whose driver is "fixture").
    /// Throws `unknownDevice` when there is none: an app that wants the built-in test pattern names it
    /// (`fixture:uvc-webcam`), as camcap does and says so; with no provider at all, that none is configured.
    public static func defaultDevice(_ capturer: CameraVideoCapturer) throws(CaptureError) -> CaptureDevice {
        try capturer.requireProviders()
        if let real = capturer.devices().first(where: { $0.driver != "fixture" }) { return real }
        throw CaptureError(
            .unknownDevice,
            "no camera found (no V4L2 capture device under /dev); name one, or a fixture camera such as fixture:uvc-webcam to run without hardware")
    }

    /// Ends the run as if a stop condition was met (any thread): the stages end and the report is returned.
    public func stop() { stopAction() }

    /// Says that the lost camera may be back (a hot-plug event: a node appeared): a session waiting for it
    /// (`CameraLossPolicy.wait`) tries at once instead of at the end of its backoff. Any thread; nothing happens
    /// otherwise.
    public func cameraMayBeBack() { healSignal.wake() }

    /// `cameraMayBeBack()` as a closure to hand to a hot-plug monitor.
    public var cameraMayBeBackAction: @Sendable () -> Void { { [healSignal] in healSignal.wake() } }

    /// `stop()` as a closure that may be kept and called from anywhere (a signal handler).
    public var stopAction: @Sendable () -> Void {
        { [stopFlag, capturer, wakeSignal, healSignal] in
            stopFlag.set()
            wakeSignal.stop()
            healSignal.stop()
            Task { try? await capturer.stopCapture() }
        }
    }

    /// Restarts a camera released for idleness (`Configuration.idleReleaseNs`): a viewer arrived. Any thread;
    /// nothing happens while the camera runs.
    public func wake() { wakeSignal.wake() }

    /// `wake()` as a closure to hand to whoever learns of demand (`ViewerHub.whenViewersArrive`).
    public var wakeAction: @Sendable () -> Void { { [wakeSignal] in wakeSignal.wake() } }

    /// What a run gave: the summary, and why it failed (after the summary), if it did.
    public struct Report {
        /// Pictures every stage got; with a camera's own H.264, access units written (those an `EncodedFrameStage`
        /// held back, before a key frame or malformed, are not: `Configuration.frames` counts what was written).
        public var processed = 0
        /// Captured frames that could not be converted (a corrupt JPEG): counted, capture went on.
        public var undecodable = 0
        /// Summary lines (label, value), in order.
        public var summary: [(String, String)] = []
        /// What each stage did (`PictureStage.report`), in the order of the stages: the figures the summary's stage
        /// lines were written from.
        public var stages: [StageReport] = []
        /// The capture or a stage failed; what was written before is complete and playable.
        public var failure: PipelineError?
        /// The summary as aligned "label: value" lines.
        public var summaryText: String {
            let width = (summary.map(\.0.count).max() ?? 0) + 2
            return summary.map { ($0.0 + ":").padding(toLength: width, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n")
        }
    }

    /// Checks that every stage takes the camera's frames (`PictureStage.check(_:)`), starts the camera, feeds
    /// every picture through the stages, stops, closes them and reports. Throws (with nothing written) when a
    /// stage refuses the camera's frames, or the camera or a stage fails to start; a failure after the start is the
    /// report's `failure`, after its summary.
    ///
    /// The loop runs on a thread of its own (`DedicatedTaskExecutor`): resumed by the capturer for every frame,
    /// it costs no allocation there, where the default executor allocates for each resumption.
    public func run(stages: [any PictureStage]) async throws -> Report {
        let executor = DedicatedTaskExecutor(name: "capture-session")
        defer { executor.shutdown() }
        return try await withTaskExecutorPreference(executor) { try await runFrames(stages: stages) }
    }

    /// Starts the negotiated format (at the start, and again after an idle release or a loss) and keeps what was
    /// applied. A device that refuses to stream it (`CaptureEvent.isStartRefusal`: ENOSPC at STREAMON, a USB bus
    /// shared with another camera; EIO, a mode listed but never sent) gets the next mode of the same negotiation
    /// (`FormatSelector.fallbacks(after:from:)`: MJPEG at the same size, then lower rates), each said as a
    /// `CaptureEvent.fallback`; the mode that streams becomes the session's `selection`. A size the driver rounded
    /// up is cropped back (`roundedSize`).
    func startCamera() async throws(CaptureError) {
        defer { cropRoundedSize() }
        do {
            applied = try await capturer.startCapture(device: device, format: selection.format, size: selection.size, fps: selection.fps)
        } catch  where CaptureEvent.isStartRefusal(error) {
            var last = error
            for next in FormatSelector.fallbacks(after: selection, from: (try? capturer.supportedFormats(for: device)) ?? []) {
                report(.fallback(from: selection, to: next, reason: last.description))
                do {
                    applied = try await capturer.startCapture(device: device, format: next.format, size: next.size, fps: next.fps)
                    selection = next
                    return
                } catch  where CaptureEvent.isStartRefusal(error) {
                    last = error
                }
            }
            throw last
        }
    }

    /// The size the driver gave instead of the one asked, when it rounded it up (at most 16 pixels more each way:
    /// whole macroblocks, 1920x1080 asked and 1920x1088 given) and the pictures are cropped back; nil otherwise.
    public private(set) var roundedSize: FrameSize?

    /// A driver that rounded the size asked up has its padding (bottom and right) cropped off by the source.
    private func cropRoundedSize() {
        let (asked, given) = (selection.size, applied.size)
        let padded =
            given != asked && given.width >= asked.width && given.height >= asked.height && given.width - asked.width <= 16
            && given.height - asked.height <= 16
        roundedSize = padded ? given : nil
        source?.setVisibleSize(padded ? asked : nil)
    }

    // The run itself (start, frame loop, idle release, report) is in CaptureRun.swift.
}

/// Conversion times by frame sequence, from the source's delivery thread to the session's task (a ring: the
/// source is at most a few frames ahead).
final class ConversionTimes: Sendable {
    private let slots = Mutex<[(sequence: UInt64, ns: Int64)]>(Array(repeating: (UInt64.max, 0), count: 16))
    func record(_ sequence: UInt64, _ ns: Int64) { slots.withLock { $0[Int(sequence % 16)] = (sequence, ns) } }
    func take(_ sequence: UInt64) -> Int64? {
        slots.withLock { s in s[Int(sequence % 16)].sequence == sequence ? s[Int(sequence % 16)].ns : nil }
    }
}

/// The sizes and frames per second of timestamps the stages got while the output adapted (the summary's
/// `adaptation` and `frames/second` lines).
struct AdaptationTally {
    private(set) var active = false
    private(set) var perSecond: [Int] = []
    private(set) var sizes: [FrameSize] = []
    init() { perSecond.reserveCapacity(64) }
    mutating func add(_ picture: I420Buffer, elapsedNs: Int64) {
        active = true
        let second = elapsedNs / 1_000_000_000
        if second >= 0 && second < 86_400 {
            while perSecond.count <= Int(second) { perSecond.append(0) }
            perSecond[Int(second)] += 1
        }
        let size = FrameSize(width: picture.width, height: picture.height)
        if sizes.last != size { sizes.append(size) }
    }
}

/// The help text of every metric the pipeline reports (a Prometheus exposition gives it as `# HELP`): capture's
/// and the encoder's.
public let pipelineMetricsHelp: [String: String] = CaptureMetrics.help.merging(EncoderMetrics.help) { a, _ in a }

/// What a session reports through swift-metrics: `CaptureMetrics` with the session's dimensions, counted here
/// (frames the stages took, or dequeued while no stage wanted pictures; drops of the capturer and of this
/// session's own stream), not by its source.
struct SessionMetrics {
    let capture: CaptureMetrics
    init(dimensions d: [(String, String)]) { capture = CaptureMetrics(dimensions: d) }
    private var reportedDrops = 0, reportedUndecodable = 0
    /// The drops (the capturer's, not those before anybody consumed frames, and the source's while this
    /// session was behind) and undecodable frames since the last call.
    mutating func update(_ stats: CaptureStatistics, _ source: VideoSource.Statistics) {
        let drops = stats.droppedWhileConsumed + source.dropped[.starvation, default: 0]
        if drops > reportedDrops {
            capture.droppedFrames.increment(by: drops - reportedDrops)
            reportedDrops = drops
        }
        let bad = source.dropped[.undecodable, default: 0]
        if bad > reportedUndecodable {
            capture.undecodable.increment(by: bad - reportedUndecodable)
            reportedUndecodable = bad
        }
    }
}

extension CaptureStatistics {
    /// Frames dropped by the capturer, not counting those produced before anybody consumed frames.
    var droppedWhileConsumed: Int { totalDropped - dropped[.noConsumer, default: 0] }
}

/// Why a session could not run, or ended early: a code, a sentence for people naming the setting, the camera or
/// the file at fault, and the configuration member refused by a `validate()` ("bitrateKbps", "durationNs"), if one
/// is.
public typealias PipelineError = CodedSettingError<PipelineFailure>

/// The domain of `PipelineError`: its codes are `ErrorCode<PipelineError>`'s.
public enum PipelineFailure {}

extension Fraction {
    /// The rate as a Double.
    package var fps: Double { doubleValue }
}

/// A number with `digits` decimals, for summaries and progress lines.
package func fmt(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }

/// The codes of `PipelineError`.
extension ErrorCode where Domain == PipelineError {
    /// Settings that cannot work with this camera (checked before it starts).
    public static var invalidConfiguration: Self { Self(rawValue: "invalid configuration") }
    /// The camera stopped with an error during the run.
    public static var captureFailed: Self { Self(rawValue: "capture failed") }
    /// An output could not be opened or written (a file, a socket).
    public static var outputFailed: Self { Self(rawValue: "output failed") }
    /// The run ended before the first frame.
    public static var noFrames: Self { Self(rawValue: "no frames") }
    /// The reader of an output on a pipe went away (EPIPE): the run ended there; what it read was complete up to then.
    public static var readerGone: Self { Self(rawValue: "reader gone") }
}

/// When to release an unwatched camera, and how long a restart took to give its first frame.
struct IdleRelease {
    let afterNs: Int64
    let enabled: Bool
    private var idleSince: Int64?
    private(set) var releasing = false
    private(set) var releases = 0
    private var restartedAt: Int64?
    private var restartNs: [Int64] = []

    init(afterNs: Int64?) {
        self.afterNs = afterNs ?? 0
        enabled = afterNs != nil
    }

    /// True when the camera should be released at this frame (asked only when `enabled`).
    mutating func shouldRelease(wanted: Bool, at ts: Int64) -> Bool {
        guard !wanted else {
            idleSince = nil
            return false
        }
        let since = idleSince ?? ts
        idleSince = since
        guard ts - since >= afterNs else { return false }
        releasing = true
        releases += 1
        return true
    }

    mutating func restarting(now: Int64) {
        releasing = false
        idleSince = nil
        restartedAt = now
    }

    /// True between a restart and its first frame.
    var awaitingFirstFrame: Bool { restartedAt != nil }

    /// The delay from the wake-up to this frame, for the first frame after a restart.
    mutating func firstFrameAfterRestart(now: Int64) -> Int64? {
        guard let at = restartedAt else { return nil }
        restartedAt = nil
        restartNs.append(now - at)
        return now - at
    }

    var lastRestartMs: Double { Double(restartNs.last ?? 0) / 1e6 }

    func restartPercentileMs(_ p: Double) -> Double {
        guard !restartNs.isEmpty else { return 0 }
        let sorted = restartNs.sorted()
        return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]) / 1e6
    }
}

/// Wakes a session waiting with a released camera: `wake()` from any thread (remembered if it comes before the
/// wait), `stop()` ends the wait for good.
final class WakeSignal: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Bool, Never>?
        var pending = false
        var stopped = false
    }
    private let state = Mutex(State())

    func wake() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return w
        }
        waiter?.resume(returning: true)
    }

    /// Forgets a wake that nobody waited for.
    func clear() { state.withLock { $0.pending = false } }

    /// As `wait()`, and true too when `timeoutNs` passed first (a backoff that a wake cuts short). The timer is a
    /// thread of its own, not a task: on a loaded machine the cooperative pool may be held by other work for longer
    /// than any backoff. It sleeps in slices of at most 100 ms, so a wait cut short leaves it behind that long at most.
    func wait(timeoutNs: Int64) async -> Bool {
        let end = monotonicNanoseconds() &+ max(timeoutNs, 0)
        let timer = WorkerThread(name: "wake-timer") { [weak self] stop in
            while !stop.isSet {
                let now = monotonicNanoseconds()
                if now >= end { return (self?.wake()) ?? () }
                Sleep.until(monotonicNs: min(end, now &+ 100_000_000))
            }
        }
        let woken = await wait()
        timer.requestStop() // not joined: it ends within 100 ms by itself
        clear() // the timer's wake, if it came after another one ended the wait
        return woken
    }

    func stop() {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            s.stopped = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: false)
    }

    /// True when woken, false when stopped.
    func wait() async -> Bool {
        await withCheckedContinuation { c in
            let now = state.withLock { s -> Bool? in
                if s.stopped { return false }
                if s.pending {
                    s.pending = false
                    return true
                }
                s.waiter = c
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }
}
