import Synchronization
import H264
import Foundation
public import VideoCapture
public import VideoProcessing

/// `--adapt 0s:1280x720@30,3s:640x360@15/600,6s:1280x720@30`: what congestion control would ask of the source,
/// replayed on frame timestamps. Each step: TIME (seconds from the first frame, `s` optional), the maximum
/// output size and frame rate, and optionally a bitrate in kbps after `/`.
public struct AdaptSchedule: Sendable, CustomStringConvertible {
    /// One request of the schedule: caps from `atNs` on, and a new bitrate if `kbps` is set.
    public struct Step: Equatable, Sendable {
        /// When the step applies: nanoseconds after the first frame's timestamp.
        public var atNs: Int64
        /// The largest output size from then on (aspect ratio kept).
        public var maxSize: FrameSize
        /// The highest output frame rate from then on.
        public var maxFps: Double
        /// The encoder's new target bitrate in kbit/s, or nil to leave it.
        public var kbps: Int?
        /// A step; unlike `AdaptSchedule.init(parsing:)` nothing is checked.
        public init(atNs: Int64, maxSize: FrameSize, maxFps: Double, kbps: Int? = nil) {
            self.atNs = atNs
            self.maxSize = maxSize
            self.maxFps = maxFps
            self.kbps = kbps
        }
    }
    /// The steps, in order of time.
    public var steps: [Step]

    /// Parses `TIME:WxH@FPS[/KBPS],…`; the error names the step and what is wrong with it.
    public init(parsing text: String) throws(PipelineError) {
        guard text.utf8.count <= 4096 else { throw PipelineError(.invalidConfiguration, "--adapt: the schedule is longer than 4096 characters") }
        var steps: [Step] = []
        for (n, raw) in text.split(separator: ",").enumerated() {
            let item = raw.trimmingCharacters(in: .whitespaces)
            let bad = { (why: String) in
                PipelineError(
                    .invalidConfiguration,
                    "--adapt step \(n + 1) \"\(item.prefix(60))\": \(why); expected TIME:WxH@FPS[/KBPS], e.g. 3s:640x360@15/600")
            }
            guard let colon = item.firstIndex(of: ":"), let at = item.firstIndex(of: "@"), colon < at else { throw bad("missing ':' or '@'") }
            var time = item[..<colon]
            if time.hasSuffix("s") { time = time.dropLast() }
            guard let seconds = Double(time), seconds.isFinite, (0...86_400).contains(seconds) else { throw bad("time must be 0...86400 seconds") }
            guard let size = FrameSize(parsing: item[item.index(after: colon)..<at]) else { throw bad("size must be WxH") }
            if let problem = CaptureLimits.problem(with: size) { throw bad(problem) }
            guard size.width >= 16, size.height >= 16 else { throw bad("size must be at least 16x16") }
            let rest = item[item.index(after: at)...].split(separator: "/", omittingEmptySubsequences: false)
            guard rest.count <= 2, let fps = Double(rest[0]), fps.isFinite, fps >= 1, fps <= 240 else { throw bad("frame rate must be 1...240") }
            var kbps: Int?
            if rest.count == 2 {
                guard let k = Int(rest[1]), (10...100_000).contains(k) else { throw bad("bitrate must be 10...100000 kbps") }
                kbps = k
            }
            let ns = Int64((seconds * 1e9).rounded())
            if let last = steps.last, ns <= last.atNs { throw bad("times must increase (previous step at \(Double(last.atNs) / 1e9) s)") }
            steps.append(Step(atNs: ns, maxSize: size, maxFps: fps, kbps: kbps))
        }
        guard !steps.isEmpty else { throw PipelineError(.invalidConfiguration, "--adapt: the schedule is empty") }
        self.steps = steps
    }

    /// A schedule of `steps`, which must be in increasing order of `atNs` (not checked).
    public init(steps: [Step]) { self.steps = steps }

    /// The schedule in the syntax `init(parsing:)` reads, e.g. `0.0s:1280x720@30,3.0s:640x360@15/600`.
    public var description: String {
        steps.map { "\(fmt(Double($0.atNs) / 1e9, 1))s:\($0.maxSize)@\(fmt($0.maxFps, 0))" + ($0.kbps.map { "/\($0)" } ?? "") }.joined(separator: ",")
    }
}

/// `record --adapt` on the source: each step's output request is made on the capturer's delivery thread just
/// before the first frame at or after its time (elapsed from the first frame's timestamp), so it applies to
/// that frame; `onStep` sets the rest (the encoder's rates).
final class ScheduleReplay: Sendable {
    private struct State {
        var next = 0
        var first: Int64?
    }
    let schedule: AdaptSchedule
    private let onStep: @Sendable (AdaptSchedule.Step) -> Void
    private let state = Mutex(State())
    private let source = Mutex<VideoSource?>(nil)

    init(_ schedule: AdaptSchedule, onStep: @escaping @Sendable (AdaptSchedule.Step) -> Void) {
        self.schedule = schedule
        self.onStep = onStep
    }

    /// The source the requests go to (it holds this replay through its options: kept until the run ends).
    func attach(_ source: VideoSource) { self.source.withLock { $0 = source } }

    /// The timestamp the schedule counts from (the first frame's).
    var firstTimestamp: Int64? { state.withLock { $0.first } }

    func willAdapt(_ frame: VideoFrame) {
        let due = state.withLock { s -> AdaptSchedule.Step? in
            let first = s.first ?? frame.timestampNs
            s.first = first
            let elapsed = frame.timestampNs - first
            guard s.next < schedule.steps.count, elapsed >= schedule.steps[s.next].atNs else { return nil }
            while s.next + 1 < schedule.steps.count && elapsed >= schedule.steps[s.next + 1].atNs { s.next += 1 }
            defer { s.next += 1 }
            return schedule.steps[s.next]
        }
        guard let step = due else { return }
        source.withLock { $0 }?.requestOutputFormat(maxSize: step.maxSize, maxFps: step.maxFps)
        onStep(step)
    }

    /// Ends the reference cycle (source → options → replay → source) at the end of the run.
    func detach() { source.withLock { $0 = nil } }
}

/// Output-format requests from another thread (RTCP feedback), passed to the running session's source (or kept
/// for it until it starts).
public final class OutputRequests: Sendable {
    private struct State {
        var pending: VideoAdapter.Request?
        var rotationApplied: Bool?
        var source: VideoSource?
    }
    private let state = Mutex(State())
    /// Read by the session at every frame: an atomic, not the lock.
    private let requested = Atomic<Bool>(false)
    /// Requests with nothing pending; a session attaches its source when it runs.
    public init() {}

    /// Caps the output (size, frame rate) from the next frame.
    public func request(_ r: VideoAdapter.Request) {
        requested.store(true, ordering: .releasing)
        let source = state.withLock { s -> VideoSource? in
            if s.source == nil { s.pending = r }
            return s.source
        }
        source?.requestOutputFormat(maxSize: r.maxSize, maxFps: r.maxFps)
    }

    /// Applies each frame's rotation to the pixels (true) or leaves it as metadata (false), from the next frame
    /// (`VideoSource.setAppliesRotation(_:)`); kept for a source attached later. A server calls it when its
    /// receivers change: false while every one of them takes the rotation as metadata (the video-orientation RTP
    /// extension), true as soon as one does not.
    public func requestRotationApplied(_ applied: Bool) {
        let source = state.withLock { s -> VideoSource? in
            s.rotationApplied = applied
            return s.source
        }
        source?.setAppliesRotation(applied)
    }

    /// True once any request was made (the summary then reports the adaptation).
    public var used: Bool { requested.load(ordering: .acquiring) }

    func attach(_ source: VideoSource) {
        let (pending, rotation) = state.withLock { s -> (VideoAdapter.Request?, Bool?) in
            s.source = source
            defer { s.pending = nil }
            return (s.pending, s.rotationApplied)
        }
        if let r = pending { source.requestOutputFormat(maxSize: r.maxSize, maxFps: r.maxFps) }
        if let rotation { source.setAppliesRotation(rotation) }
    }

    func detach() { state.withLock { $0.source = nil } }
}

/// A receiver's bandwidth estimate (REMB) → the encoder's bitrate (clamped to 10 kbps...the encoder's cap)
/// and, with `adapting`, the output size and frame rate (WebRTC's balanced steps, `BitrateAdaptation`). The
/// one wiring of estimates for `stream` and `serve`; any thread.
public final class BandwidthFollower: Sendable {
    private let control: EncoderControl
    /// The encode stage's target-bitrate gauge; nil for a camera's own H.264.
    private let recordTarget: (@Sendable (Int) -> Void)?
    private let cap: Int
    private let requests: OutputRequests?
    private let policy = Mutex(BitrateAdaptation())

    /// Follows estimates for `encode`'s encoder, capped at its `bitrateCap`; with `requests` (a session's
    /// `outputRequests`), also steps the output size and frame rate down and up.
    public init(_ encode: EncodeStage, adapting requests: OutputRequests?) {
        control = encode.control
        recordTarget = encode.recordTargetBitrate
        cap = encode.bitrateCap
        self.requests = requests
    }

    /// Follows estimates for a camera's own H.264 passed through (`PassthroughStage`): its bitrate requests go to
    /// the camera, capped at `maxBitrate` bits per second; the size and frame rate are the camera's.
    public init(_ passthrough: PassthroughStage, maxBitrate: Int) {
        control = passthrough.control
        recordTarget = nil
        cap = max(maxBitrate, 10_000)
        requests = nil
    }

    /// Applies a new estimate in bits per second: the encoder's bitrate from the next frame, and with
    /// `adapting`, an output request when the estimate crosses a step. Any thread.
    public func update(bitsPerSecond bps: UInt64) {
        let bitrate = Int(clamping: min(bps, UInt64(cap)))
        EncodeStage.request(bitrate, on: control, cap: cap)
        recordTarget?(min(max(bitrate, 10_000), cap))
        if let requests, let step = policy.withLock({ $0.update(bitrate: bitrate) }) {
            requests.request(VideoAdapter.Request(maxSize: step.maxSize, maxFps: step.maxFps))
        }
    }
}

extension EncodeStage {
    /// Replays `schedule` in `session` (`CaptureSession.adaptSchedule`: frames dropped and scaled on their
    /// timestamps) with this encoder following: each step sets its rates, the step's bitrate (else `baseKbps`) at
    /// the step's frame rate, at most the camera's. Call before the session runs.
    public func follow(_ schedule: AdaptSchedule, in session: CaptureSession, baseKbps: Int) {
        session.adaptSchedule = schedule
        let control = control, cameraFps = session.selection.fps.fps
        session.onAdaptationStep = { step in
            try? control.setRates(bitrate: (step.kbps ?? baseKbps) * 1000, fps: max(1, min(step.maxFps, cameraFps)))
        }
    }
}
