public import VideoCapture
import Synchronization
import SystemIO

/// A fault a fixture camera plays, so that an app can test its own healing without a kernel. Each imitates what
/// real cameras do (docs/cameras.md, "Cameras that misbehave", gives the reports):
/// - `stall`: no frame for `seconds` (a UVC camera whose USB bus hiccups, v4l2loopback whose writer pauses); a
///   stall of the provider's `stallTimeoutNs` or longer ends the stream with `.timeout`, as a V4L2 stream does after
///   its own restart;
/// - `unplug`: the stream fails with `.disconnected` and the camera cannot be opened for `seconds` (a USB camera
///   pulled out and plugged back in; vivid's `disconnect` control);
/// - `nospace`: the one mode `pixelFormat` at `size` never streams: its start fails as `VIDIOC_STREAMON` with ENOSPC
///   (two USB cameras on one bus; vivid's `inject_vidioc_streamon_error` fails once).
/// - `resize`: the source changes to `size`, another size the camera lists: the stream ends with `.sourceChanged`
///   and from then on the camera offers that size only (an HDMI receiver whose source switched resolution: a
///   laptop plugged into a capture box, a console changing modes; vivid's HDMI input with `dv_timings`).
/// - `corrupt`: the next `seconds` frames (a count here, 1...1000) are corrupt: an MJPEG frame cut short in its
///   headers (a USB transfer that lost packets: the "corrupt JPEG data" reports of motion and ffmpeg users), any
///   other format a buffer the driver flags `V4L2_BUF_FLAG_ERROR`;
/// - `timejump`: from that frame on, the camera's timestamps are `seconds` earlier (a driver whose clock resets, the
///   UVC timestamp bugs that make recordings stutter): the capturer keeps its timestamps increasing;
/// - `nosignal`: the source goes dark for `seconds`: the stream ends with `.sourceChanged`, and opening the camera
///   fails with `.noSignal` until the signal returns (an HDMI cable pulled, a source asleep; vivid's
///   `dv_timings_signal_mode` "No Signal").
/// A fault fires once per provider, at the camera's `atFrame`-th frame counted over every stream of that camera
/// (a camera that comes back does not replay it).
public struct FixtureFault: Sendable, Hashable, CustomStringConvertible {
    /// What happens.
    public enum Kind: String, Sendable, CaseIterable {
        /// No frame for a while.
        case stall
        /// Gone for a while.
        case unplug
        /// One mode without the bandwidth to stream.
        case nospace
        /// The source changes to another listed size.
        case resize
        /// No signal for a while.
        case nosignal
        /// A burst of corrupt frames.
        case corrupt
        /// Timestamps that jump backwards.
        case timejump
    }
    /// What happens.
    public var kind: Kind
    /// The frame (0-based, counted over every stream of the camera through this provider) it happens at.
    public var atFrame: Int
    /// How long it lasts, in seconds.
    public var seconds: Double
    /// `nospace`: the pixel format and size of the mode that cannot stream.
    public var mode: (pixelFormat: PixelFormat, size: FrameSize)?
    /// `resize`: the size the source changes to.
    public var newSize: FrameSize?

    /// Same kind, frame, length and mode.
    public static func == (a: FixtureFault, b: FixtureFault) -> Bool {
        a.kind == b.kind && a.atFrame == b.atFrame && a.seconds == b.seconds && a.mode?.pixelFormat == b.mode?.pixelFormat
            && a.mode?.size == b.mode?.size && a.newSize == b.newSize
    }

    /// Hashes what `==` compares.
    public func hash(into h: inout Hasher) {
        h.combine(kind)
        h.combine(atFrame)
        h.combine(seconds)
        h.combine(mode?.pixelFormat)
        h.combine(mode?.size)
        h.combine(newSize)
    }

    /// A `resize` fault: at frame `atFrame` the source changes to `size`.
    public init(resizeTo size: FrameSize, atFrame: Int) {
        self.init(.resize, atFrame: atFrame, seconds: 0)
        newSize = size
    }

    /// A `nospace` fault: `pixelFormat` at `size` never streams (ENOSPC at STREAMON).
    public init(noBandwidthFor pixelFormat: PixelFormat, _ size: FrameSize) {
        self.init(.nospace, atFrame: 0, seconds: 0)
        mode = (pixelFormat, size)
    }

    /// A fault of `kind` at frame `atFrame` lasting `seconds`.
    public init(_ kind: Kind, atFrame: Int, seconds: Double) {
        self.kind = kind
        self.atFrame = atFrame
        self.seconds = seconds
    }

    /// Parses `KIND@FRAME+SECONDS` (`unplug@90+5`, `stall@60+1.5`, `nosignal@60+3`, `timejump@60+2`: frame
    /// 0...10,000,000, 0.01...3600 seconds; `corrupt@60+5`: 5 frames, 1...1000), `resize@FRAME:WxH`
    /// (`resize@90:640x480`) or `nospace@FOURCC:WxH` (`nospace@YUYV:640x480`). A refusal names the text and what was
    /// wrong.
    public init(parsing text: String) throws(CaptureError) {
        func refuse(_ why: String) -> CaptureError {
            CaptureError(
                .invalidArgument,
                "fixture fault \"\(text.prefix(64))\": \(why) (expected KIND@FRAME+SECONDS, e.g. unplug@90+5, resize@FRAME:WxH or nospace@FOURCC:WxH; kinds: \(Kind.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        if text.hasPrefix("nospace@") {
            let mode = text.dropFirst("nospace@".count).split(separator: ":", maxSplits: 1)
            guard mode.count == 2, let pf = PixelFormat(fourcc: String(mode[0])) else { throw refuse("not nospace@FOURCC:WxH with a known FourCC") }
            guard let size = FrameSize(parsing: mode[1]) else { throw refuse("not a size: \"\(mode[1].prefix(16))\"") }
            self.init(noBandwidthFor: pf, size)
            return
        }
        if text.hasPrefix("resize@") {
            let parts = text.dropFirst("resize@".count).split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let frame = Int(parts[0]), (0...10_000_000).contains(frame) else {
                throw refuse("not resize@FRAME:WxH with a frame 0...10000000")
            }
            guard let size = FrameSize(parsing: parts[1]) else { throw refuse("not a size: \"\(parts[1].prefix(16))\"") }
            self.init(resizeTo: size, atFrame: frame)
            return
        }
        let at = text.split(separator: "@", maxSplits: 1), rest = at.count == 2 ? at[1].split(separator: "+", maxSplits: 1) : []
        guard at.count == 2, rest.count == 2 else { throw refuse("not KIND@FRAME+SECONDS") }
        guard let kind = Kind(rawValue: String(at[0])), kind != .resize, kind != .nospace else {
            throw refuse("unknown kind \"\(at[0].prefix(16))\"")
        }
        guard let frame = Int(rest[0]), (0...10_000_000).contains(frame) else {
            throw refuse("frame must be 0...10000000, got \"\(rest[0].prefix(16))\"")
        }
        guard let seconds = Double(rest[1]), seconds.isFinite, (0.01...3600).contains(seconds) else {
            throw refuse("seconds must be 0.01...3600, got \"\(rest[1].prefix(16))\"")
        }
        if kind == .corrupt, seconds != seconds.rounded() || seconds > 1000 {
            throw refuse("a corrupt burst is a whole number of frames 1...1000, got \"\(rest[1].prefix(16))\"")
        }
        self.init(kind, atFrame: frame, seconds: seconds)
    }

    /// `KIND@FRAME+SECONDS`, `resize@FRAME:WxH`, or `nospace@FOURCC:WxH`.
    public var description: String {
        if let mode { return "\(kind.rawValue)@\(mode.pixelFormat):\(mode.size)" }
        if let newSize { return "\(kind.rawValue)@\(atFrame):\(newSize)" }
        return "\(kind.rawValue)@\(atFrame)+\(seconds)"
    }
}

/// What a provider's faults have done so far: frames per camera, the faults fired, and the cameras unplugged
/// until when. Shared by the provider and its streams.
final class FaultPlayback: Sendable {
    private struct State {
        var frames: [String: Int] = [:]
        var fired: Set<Int> = []
        var unpluggedUntil: [String: Int64] = [:]
        var darkUntil: [String: Int64] = [:]
        var sourceSize: [String: FrameSize] = [:]
    }
    let faults: [FixtureFault]
    private let state = Mutex(State())
    /// The faults each fixture file declares (its `faults`), by path: they play on that camera only.
    private let described = Mutex<[String: [FixtureFault]]>([:])
    /// Described faults fired, by path and index.
    private let describedFired = Mutex<Set<String>>([])

    init(_ faults: [FixtureFault]) { self.faults = faults }

    /// Adds the faults a camera's description declares (once per path; later calls change nothing).
    func declare(_ list: [FixtureFault], for path: String) {
        guard !list.isEmpty else { return }
        described.withLock { if $0[path] == nil { $0[path] = list } }
    }

    /// Counts a frame of `path`; the fault that fires at it, if one does (each fires once): the provider's faults
    /// (on any of its cameras), then the camera's own.
    func frame(of path: String) -> FixtureFault? {
        let own = described.withLock { $0[path] } ?? []
        guard !faults.isEmpty || !own.isEmpty else { return nil }
        return state.withLock { s in
            let n = s.frames[path, default: 0]
            s.frames[path] = n + 1
            if let i = faults.indices.first(where: { faults[$0].kind != .nospace && faults[$0].atFrame == n && !s.fired.contains($0) }) {
                s.fired.insert(i)
                return faults[i]
            }
            guard let i = own.indices.first(where: { own[$0].kind != .nospace && own[$0].atFrame == n }) else { return nil }
            return describedFired.withLock { $0.insert("\(path)#\(i)").inserted } ? own[i] : nil
        }
    }

    /// True when a `nospace` fault (the provider's, or `path`'s own) refuses `pixelFormat` at `size`.
    func refuses(_ pixelFormat: PixelFormat, _ size: FrameSize, on path: String) -> Bool {
        (faults + (described.withLock { $0[path] } ?? [])).contains {
            $0.kind == .nospace && $0.mode?.pixelFormat == pixelFormat && $0.mode?.size == size
        }
    }

    func unplug(_ path: String, forNs ns: Int64) { state.withLock { $0.unpluggedUntil[path] = monotonicNanoseconds() + ns } }

    /// `path`'s source went dark for `ns` nanoseconds.
    func loseSignal(_ path: String, forNs ns: Int64) { state.withLock { $0.darkUntil[path] = monotonicNanoseconds() + ns } }

    /// The nanoseconds until `path`'s signal returns, or nil when it has one.
    func darkNs(_ path: String) -> Int64? { state.withLock { Self.left(&$0.darkUntil, path) } }

    /// `path`'s source now sends `size` (a `resize` fault fired).
    func resize(_ path: String, to size: FrameSize) { state.withLock { $0.sourceSize[path] = size } }

    /// The size `path`'s source sends since a `resize` fault, or nil.
    func sourceSize(_ path: String) -> FrameSize? { state.withLock { $0.sourceSize[path] } }

    /// `formats` as a camera whose source changed size offers them: each format that lists the new size, at that
    /// size only (a receiver delivers what its source sends).
    func formats(_ formats: [CaptureFormat], of path: String) -> [CaptureFormat] {
        guard let size = sourceSize(path) else { return formats }
        return formats.compactMap { f in
            guard f.size.contains(size) else { return nil }
            var g = f
            g.size = .discrete(size)
            return g
        }
    }

    /// The nanoseconds until `path` is back, or nil when it is plugged in.
    func awayNs(_ path: String) -> Int64? { state.withLock { Self.left(&$0.unpluggedUntil, path) } }

    /// The nanoseconds left until `path`'s deadline in `deadlines`, or nil (and the entry forgotten) once it passed.
    private static func left(_ deadlines: inout [String: Int64], _ path: String) -> Int64? {
        guard let until = deadlines[path] else { return nil }
        let left = until - monotonicNanoseconds()
        if left <= 0 { deadlines[path] = nil }
        return left > 0 ? left : nil
    }
}
