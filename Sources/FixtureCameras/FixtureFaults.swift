public import VideoCapture
import Synchronization
import SystemIO

/// A fault a fixture camera plays, so that an app can test its own healing without a kernel. Each imitates what
/// real cameras do (docs/cameras.md, "Cameras that misbehave", gives the reports):
/// - `stall`: no frame for `seconds` (a UVC camera whose USB bus hiccups, v4l2loopback whose writer pauses); a
///   stall of the provider's `stallTimeoutNs` or longer ends the stream with `.timeout`, as a V4L2 stream does after
///   its own restart;
/// - `unplug`: the stream fails with `.disconnected` and the camera cannot be opened for `seconds` (a USB camera
///   pulled out and plugged back in; vivid's `disconnect` control).
/// A fault fires once per provider, at the camera's `atFrame`-th frame counted over every stream of that camera
/// (a camera that comes back does not replay it).
public struct FixtureFault: Sendable, Equatable, CustomStringConvertible {
    /// What happens.
    public enum Kind: String, Sendable, CaseIterable {
        /// No frame for a while.
        case stall
        /// Gone for a while.
        case unplug
    }
    /// What happens.
    public var kind: Kind
    /// The frame (0-based, counted over every stream of the camera through this provider) it happens at.
    public var atFrame: Int
    /// How long it lasts, in seconds.
    public var seconds: Double

    /// A fault of `kind` at frame `atFrame` lasting `seconds`.
    public init(_ kind: Kind, atFrame: Int, seconds: Double) {
        self.kind = kind
        self.atFrame = atFrame
        self.seconds = seconds
    }

    /// Parses `KIND@FRAME+SECONDS` (`unplug@90+5`, `stall@60+1.5`): frame 0...10,000,000, 0.01...3600 seconds. A
    /// refusal names the text and what was wrong.
    public init(parsing text: String) throws(CaptureError) {
        func refuse(_ why: String) -> CaptureError {
            CaptureError(
                .invalidArgument,
                "fixture fault \"\(text.prefix(64))\": \(why) (expected KIND@FRAME+SECONDS, e.g. unplug@90+5; kinds: \(Kind.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        let at = text.split(separator: "@", maxSplits: 1), rest = at.count == 2 ? at[1].split(separator: "+", maxSplits: 1) : []
        guard at.count == 2, rest.count == 2 else { throw refuse("not KIND@FRAME+SECONDS") }
        guard let kind = Kind(rawValue: String(at[0])) else { throw refuse("unknown kind \"\(at[0].prefix(16))\"") }
        guard let frame = Int(rest[0]), (0...10_000_000).contains(frame) else {
            throw refuse("frame must be 0...10000000, got \"\(rest[0].prefix(16))\"")
        }
        guard let seconds = Double(rest[1]), seconds.isFinite, (0.01...3600).contains(seconds) else {
            throw refuse("seconds must be 0.01...3600, got \"\(rest[1].prefix(16))\"")
        }
        self.init(kind, atFrame: frame, seconds: seconds)
    }

    /// `KIND@FRAME+SECONDS`.
    public var description: String { "\(kind.rawValue)@\(atFrame)+\(seconds)" }
}

/// What a provider's faults have done so far: frames per camera, the faults fired, and the cameras unplugged
/// until when. Shared by the provider and its streams.
final class FaultPlayback: Sendable {
    private struct State {
        var frames: [String: Int] = [:]
        var fired: Set<Int> = []
        var unpluggedUntil: [String: Int64] = [:]
    }
    let faults: [FixtureFault]
    private let state = Mutex(State())

    init(_ faults: [FixtureFault]) { self.faults = faults }

    /// Counts a frame of `path`; the fault that fires at it, if one does (each fires once).
    func frame(of path: String) -> FixtureFault? {
        guard !faults.isEmpty else { return nil }
        return state.withLock { s in
            let n = s.frames[path, default: 0]
            s.frames[path] = n + 1
            guard let i = faults.indices.first(where: { faults[$0].atFrame == n && !s.fired.contains($0) }) else { return nil }
            s.fired.insert(i)
            return faults[i]
        }
    }

    func unplug(_ path: String, forNs ns: Int64) { state.withLock { $0.unpluggedUntil[path] = monotonicNanoseconds() + ns } }

    /// The nanoseconds until `path` is back, or nil when it is plugged in.
    func awayNs(_ path: String) -> Int64? {
        state.withLock { s in
            guard let until = s.unpluggedUntil[path] else { return nil }
            let left = until - monotonicNanoseconds()
            if left <= 0 { s.unpluggedUntil[path] = nil }
            return left > 0 ? left : nil
        }
    }
}
