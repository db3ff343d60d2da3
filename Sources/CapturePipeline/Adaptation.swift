import Synchronization
import H264
import Foundation
public import VideoCapture
public import VideoProcessing

/// `--adapt 0s:1280x720@30,3s:640x360@15/600,6s:1280x720@30`: what congestion control would ask of the source,
/// replayed on frame timestamps. Each step: TIME (seconds from the first frame, `s` optional), the maximum
/// output size and frame rate, and optionally a bitrate in kbps after `/`.
public struct AdaptSchedule: Sendable, CustomStringConvertible {
    public struct Step: Equatable, Sendable {
        public var atNs: Int64
        public var maxSize: FrameSize
        public var maxFps: Double
        public var kbps: Int?
        public init(atNs: Int64, maxSize: FrameSize, maxFps: Double, kbps: Int? = nil) { self.atNs = atNs; self.maxSize = maxSize; self.maxFps = maxFps; self.kbps = kbps }
    }
    public var steps: [Step]

    /// Parses `TIME:WxH@FPS[/KBPS],…`; the error names the step and what is wrong with it.
    public init(parsing text: String) throws(PipelineError) {
        guard text.utf8.count <= 4096 else { throw PipelineError(.invalidConfiguration, "--adapt: the schedule is longer than 4096 characters") }
        var steps: [Step] = []
        for (n, raw) in text.split(separator: ",").enumerated() {
            let item = raw.trimmingCharacters(in: .whitespaces)
            let bad = { (why: String) in PipelineError(.invalidConfiguration, "--adapt step \(n + 1) \"\(item.prefix(60))\": \(why); expected TIME:WxH@FPS[/KBPS], e.g. 3s:640x360@15/600") }
            guard let colon = item.firstIndex(of: ":"), let at = item.firstIndex(of: "@") , colon < at else { throw bad("missing ':' or '@'") }
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

    public init(steps: [Step]) { self.steps = steps }

    public var description: String {
        steps.map { "\(fmt(Double($0.atNs) / 1e9, 1))s:\($0.maxSize)@\(fmt($0.maxFps, 0))" + ($0.kbps.map { "/\($0)" } ?? "") }.joined(separator: ",")
    }
}

/// Live output adaptation in the pipeline: a schedule (`record --adapt`) and/or requests from other threads
/// (`stream`: REMB), applied to a `VideoAdapter` as frames arrive; counts frames per second of timestamps.
public struct ScheduledAdaptation {
    public let schedule: AdaptSchedule
    public var adapter = VideoAdapter()
    private var next = 0
    public private(set) var thinned = 0
    public private(set) var perSecond: [Int] = []
    public private(set) var sizes: [FrameSize] = []

    public init(_ schedule: AdaptSchedule = AdaptSchedule(steps: [])) {
        self.schedule = schedule
        perSecond.reserveCapacity(64)
    }

    /// A request from elsewhere (a bitrate estimate), effective from this frame.
    public mutating func request(_ r: VideoAdapter.Request) {
        adapter.requestOutputFormat(maxSize: r.maxSize, maxFps: r.maxFps)
    }

    /// The step that starts at this frame, if any (the caller applies its bitrate).
    public mutating func step(atElapsed ns: Int64) -> AdaptSchedule.Step? {
        guard next < schedule.steps.count, ns >= schedule.steps[next].atNs else { return nil }
        var step = schedule.steps[next]
        while next + 1 < schedule.steps.count && ns >= schedule.steps[next + 1].atNs { next += 1; step = schedule.steps[next] }
        next += 1
        adapter.requestOutputFormat(maxSize: step.maxSize, maxFps: step.maxFps)
        return step
    }

    /// What to do with a frame (nil: thinned for the frame rate).
    public mutating func adapt(size: FrameSize, timestampNs: Int64, elapsedNs: Int64) -> Adaptation? {
        guard let a = adapter.adapt(size: size, timestampNs: timestampNs) else { thinned += 1; return nil }
        let second = Int(elapsedNs / 1_000_000_000)
        if second >= 0 && second < 86_400 {
            while perSecond.count <= second { perSecond.append(0) }
            perSecond[second] += 1
        }
        if sizes.last != a.size { sizes.append(a.size) }
        return a
    }
}

/// Output-format requests from another thread (RTCP feedback), taken by the pipeline before its next frame.
public final class OutputRequests: Sendable {
    private let pending = Mutex<VideoAdapter.Request?>(nil)
    public init() {}
    public func request(_ r: VideoAdapter.Request) { pending.withLock { $0 = r } }
    public func take() -> VideoAdapter.Request? { pending.withLock { r in defer { r = nil }; return r } }
}

/// A receiver's bandwidth estimate (REMB) → the encoder's bitrate (clamped to 10 kbps...the encoder's cap)
/// and, with `adapting`, the output size and frame rate (WebRTC's balanced steps, `BitrateAdaptation`). The
/// one wiring of estimates for `stream` and `serve`; any thread.
public final class BandwidthFollower: Sendable {
    private let control: EncoderControl
    private let cap: Int
    private let requests: OutputRequests?
    private let policy = Mutex(BitrateAdaptation())

    public init(_ encode: EncodeStage, adapting requests: OutputRequests?) {
        control = encode.control; cap = encode.bitrateCap; self.requests = requests
    }

    public func update(bitsPerSecond bps: UInt64) {
        let bitrate = Int(clamping: min(bps, UInt64(cap)))
        EncodeStage.request(bitrate, on: control, cap: cap)
        if let requests, let step = policy.withLock({ $0.update(bitrate: bitrate) }) {
            requests.request(VideoAdapter.Request(maxSize: step.maxSize, maxFps: step.maxFps))
        }
    }
}
