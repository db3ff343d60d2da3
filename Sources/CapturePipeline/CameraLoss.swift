public import VideoCapture
import Logging
import SystemIO
import Metrics
import VideoProcessing
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// What a session does when its camera fails mid-run: unplugged (`disconnected`), failing while streaming, or
/// silent past its stream's own restart (`timeout`: the V4L2 stream restarts a stalled stream once by itself).
public enum CameraLossPolicy: Sendable, Equatable, CustomStringConvertible {
    /// The run ends with the failure; what was written is complete and playable.
    case exit
    /// Nothing above the camera is torn down: the session reopens the camera (the same identity, even at another
    /// /dev/videoN) with a backoff from `CameraLossPolicy.firstRetryNs` to `maxRetryNs` (a hot-plug event cuts it
    /// short: `CaptureSession.cameraMayBeBack()`), and carries on with the same stages and outputs. After
    /// `giveUpAfterNs` without the camera (nil: never) the run ends as with `.exit`.
    case wait(giveUpAfterNs: Int64?)

    /// The first wait before a retry, in nanoseconds (it doubles up to `maxRetryNs`).
    public static let firstRetryNs: Int64 = 250_000_000
    /// The longest wait between two retries, in nanoseconds.
    public static let maxRetryNs: Int64 = 2_000_000_000
    /// While the camera is away, live viewers get a placeholder this often (`PictureStage.placeholder(timestampNs:)`),
    /// in nanoseconds: the first one this long after the camera went.
    public static let placeholderIntervalNs: Int64 = 1_000_000_000

    /// `exit`, `wait`, or `wait (give up after N s)`.
    public var description: String {
        switch self {
        case .exit: "exit"
        case .wait(let n): n.map { "wait (give up after \(Double($0) / 1e9) s)" } ?? "wait"
        }
    }

    /// True for the failures a camera can come back from: unplugged, failed while streaming, no frames, no signal.
    /// (A change of source is not a failure: it is followed under either policy.)
    public static func isRecoverable(_ error: CaptureError) -> Bool {
        error.code == .disconnected || error.code == .timeout || error.code == .streamFailed || error.code == .noSignal
    }
}

/// The camera's comings and goings during a run (`CaptureSession.events`).
public enum CaptureEvent: Sendable, Equatable, CustomStringConvertible {
    /// The camera stopped delivering: the error says how (unplugged, failed, stalled).
    case lost(CaptureError)
    /// The camera delivers again after `afterNs` without pictures and this many attempts to reopen it.
    case back(afterNs: Int64, attempts: Int)
    /// The session stopped waiting for the camera after `afterNs` (`CameraLossPolicy.wait(giveUpAfterNs:)`).
    case gaveUp(afterNs: Int64)
    /// The device refused to stream a mode for want of bandwidth (the `reason`, with its errno): the next mode of the
    /// same negotiation is tried.
    case fallback(from: FormatSelection, to: FormatSelection, reason: String)
    /// The camera's source changed (`V4L2_EVENT_SOURCE_CHANGE`: an HDMI source switched resolution or came back)
    /// and the session negotiated again: the new mode streams after `afterNs` without pictures. The stages carry on
    /// at the new size (the encoders start again with SPS/PPS and an IDR); under either `CameraLossPolicy`.
    case sourceChanged(from: FormatSelection, to: FormatSelection, afterNs: Int64)
    /// The camera's source has no signal (an HDMI cable pulled, a source asleep): a state, not an error. Under
    /// `CameraLossPolicy.wait` the session tries again with its backoff until the signal returns
    /// (`sourceChanged`); under `.exit` the run ends.
    case noSignal(CaptureError)

    /// True for a start the device refused for want of bandwidth: `VIDIOC_STREAMON` failing with ENOSPC (a USB bus
    /// without the bandwidth for the mode) or EBUSY (the bus or the sensor held by another stream).
    public static func isBandwidthRefusal(_ error: CaptureError) -> Bool {
        (error.operation ?? "").hasPrefix("VIDIOC_STREAMON") && (error.errno == ENOSPC || error.errno == EBUSY)
    }

    /// True for a mode the device lists but will not stream: a bandwidth refusal, or `VIDIOC_STREAMON` failing with
    /// EIO (firmware that lists a format it never sends). The session falls back to the next mode for either.
    public static func isStartRefusal(_ error: CaptureError) -> Bool {
        isBandwidthRefusal(error) || ((error.operation ?? "").hasPrefix("VIDIOC_STREAMON") && error.errno == EIO)
    }

    /// A line for a log.
    public var description: String {
        switch self {
        case .lost(let e): "camera lost: \(e)"
        case .back(let ns, let attempts): "camera back after \(fmt(Double(ns) / 1e9, 2)) s (\(attempts) attempt\(attempts == 1 ? "" : "s"))"
        case .gaveUp(let ns): "gave up waiting for the camera after \(fmt(Double(ns) / 1e9, 1)) s"
        case .fallback(let from, let to, let reason): "\(from) cannot stream (\(reason)): trying \(to)"
        case .sourceChanged(let from, let to, let ns): "source changed: \(from) → \(to), pictures again after \(fmt(Double(ns) / 1e9, 2)) s"
        case .noSignal(let e): "no signal: \(e.message)"
        }
    }
}

/// The camera's health as a server reports it (`camcap serve`'s `/stats`, its `camera` object): streaming, away or
/// without signal, with the run's counts of losses, recoveries, source changes and fallbacks, the time without
/// pictures and the last event. The session keeps it from its events (`CaptureSession.health`); any thread reads it.
public final class CameraHealth: Sendable {
    /// What the camera is doing now.
    public enum State: String, Sendable {
        /// Delivering (or about to: the run started, or the camera just came back).
        case streaming
        /// Lost: the session waits for it (`CameraLossPolicy.wait`).
        case away
        /// Its source has no signal (an HDMI receiver with nothing plugged in).
        case noSignal = "no signal"
    }
    /// The health at one moment.
    public struct Snapshot: Sendable, Equatable {
        /// What the camera is doing now.
        public var state = State.streaming
        /// Times the camera was lost, came back, had its source change, and fell back to another mode.
        public var losses = 0, recoveries = 0, sourceChanges = 0, fallbacks = 0
        /// Nanoseconds without pictures over the losses and changes that ended.
        public var awayNs: Int64 = 0
        /// The last event's line (`CaptureEvent.description`), if any.
        public var lastEvent: String?
    }
    private let current = Mutex(Snapshot())
    /// Streaming, nothing counted yet.
    public init() {}
    /// The health now.
    public var snapshot: Snapshot { current.withLock { $0 } }
    /// The health as JSON members (state, counts, seconds without pictures, the last event).
    public var jsonMembers: [(String, Any)] {
        let s = snapshot
        return [
            ("state", s.state.rawValue), ("losses", s.losses), ("recoveries", s.recoveries), ("sourceChanges", s.sourceChanges),
            ("fallbacks", s.fallbacks), ("secondsWithoutPictures", Double(s.awayNs / 1_000_000) / 1000), ("lastEvent", s.lastEvent ?? ""),
        ]
    }

    func record(_ event: CaptureEvent) {
        current.withLock { s in
            switch event {
            case .lost:
                s.state = .away
                s.losses += 1
            case .back(let ns, _):
                s.state = .streaming
                s.recoveries += 1
                s.awayNs += ns
            case .gaveUp: s.state = .away
            case .fallback: s.fallbacks += 1
            case .sourceChanged(_, _, let ns):
                s.state = .streaming
                s.sourceChanges += 1
                s.awayNs += ns
            case .noSignal: s.state = .noSignal
            }
            s.lastEvent = String(event.description.prefix(300))
        }
    }
}

/// A run's losses of its camera: how many, of which kind, and the time without pictures; and its source's changes.
struct LossTally {
    private(set) var losses: [String: Int] = [:]
    private(set) var recoveries = 0
    private(set) var awayNs: Int64 = 0
    private(set) var sourceChanges = 0
    private(set) var changedNs: Int64 = 0
    private(set) var sizes: [FrameSize] = []

    mutating func lost(_ error: CaptureError) { losses["\(error.code)", default: 0] += 1 }
    mutating func back(afterNs ns: Int64) {
        recoveries += 1
        awayNs += ns
    }
    mutating func changed(from: FrameSize, to: FrameSize, afterNs ns: Int64) {
        sourceChanges += 1
        changedNs += ns
        if sizes.isEmpty { sizes.append(from) }
        if sizes.count < 64 { sizes.append(to) }
    }

    /// The summary's `source` value, or nil when the source never changed.
    var sourceLine: String? {
        guard sourceChanges > 0 else { return nil }
        let path = sizes.map(\.description).joined(separator: " → ") + (sizes.count >= 64 ? " …" : "")
        return "changed \(sourceChanges) time\(sourceChanges == 1 ? "" : "s") (\(path)), \(fmt(Double(changedNs) / 1e9, 2)) s without pictures"
    }

    /// The summary's `camera loss` value, or nil when the camera never went away.
    var line: String? {
        guard !losses.isEmpty else { return nil }
        let total = losses.values.reduce(0, +)
        let kinds = losses.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "lost \(total) time\(total == 1 ? "" : "s") (\(kinds)), back \(recoveries), \(fmt(Double(awayNs) / 1e9, 2)) s without pictures"
    }
}

extension CaptureSession {
    /// The camera failed mid-run or its source changed. A source change is followed under either policy: the
    /// session negotiates again (the camera now offers its source's size) and restarts. A failure the policy waits
    /// for (and a source without signal) reopens the camera (the same identity, even at another /dev/videoN) with a
    /// backoff until it delivers again (its frames are returned), the session is stopped, or the give-up time passes
    /// (nil; `state.captureError` says why).
    func heal(_ error: CaptureError, _ c: RunContext, _ state: inout RunState) async -> VideoFrameStream? {
        let giveUpAfterNs: Int64?, waits: Bool
        switch configuration.onCameraLoss {
        case .wait(let limit): (waits, giveUpAfterNs) = (true, limit)
        case .exit: (waits, giveUpAfterNs) = (false, nil)
        }
        let changed = error.code == .sourceChanged
        guard !stopFlag.isSet, changed || (waits && CameraLossPolicy.isRecoverable(error)) else { return nil }
        let lostAt = monotonicNanoseconds()
        if !changed {
            state.losses.lost(error)
            state.metrics.capture.cameraLosses.increment()
            report(.lost(error))
        }
        healSignal.clear()
        var delay = CameraLossPolicy.firstRetryNs, attempts = 0, renegotiate = changed, dark = false
        let before = selection // what streamed before (a restart without signal may select something else meanwhile)
        state.nextPlaceholderNs = lostAt + CameraLossPolicy.placeholderIntervalNs
        while !stopFlag.isSet {
            if let limit = giveUpAfterNs, monotonicNanoseconds() - lostAt >= limit {
                report(.gaveUp(afterNs: monotonicNanoseconds() - lostAt))
                state.captureError = CaptureError(
                    error.code, "\(error.message); the camera did not come back within \(fmt(Double(limit) / 1e9, 1)) s", device: device.path)
                return nil
            }
            if let end = deadline(state), monotonicNanoseconds() >= end { // the run's duration is over: it ends, not fails
                state.captureError = nil
                return nil
            }
            attempts += 1
            let frames = c.subscribe()
            do throws(CaptureError) {
                if capturer.isRunning { try? await capturer.stopCapture() }
                if let moved = capturer.devices().first(where: { $0.uniqueID == device.uniqueID && $0.path != device.path }) { device = moved }
                if renegotiate {
                    do { try negotiate() } catch let e as CaptureError { throw e } catch {
                        throw CaptureError(.unsupportedFormat, "\(error)", device: device.path) // overconstrained by the new source
                    }
                }
                try await startCamera()
                let away = monotonicNanoseconds() - lostAt
                state.captureError = nil
                if renegotiate {
                    state.losses.changed(from: before.size, to: selection.size, afterNs: away)
                    state.metrics.capture.sourceChanges.increment()
                    report(.sourceChanged(from: before, to: selection, afterNs: away))
                }
                if !changed {
                    state.losses.back(afterNs: away)
                    state.metrics.capture.cameraRecoveries.increment()
                    state.metrics.capture.cameraAway.recordNanoseconds(away)
                    report(.back(afterNs: away, attempts: attempts))
                }
                return frames
            } catch {
                configuration.logger.debug("camera still away", metadata: ["device": "\(device.path)", "error": "\(error)"])
                if error.code == .noSignal {
                    renegotiate = true // the signal that returns may be another size
                    if !dark { report(.noSignal(error)) }
                    dark = true
                }
                guard waits else { // the exit policy follows a source change once; a failed restart ends the run
                    state.captureError = error
                    return nil
                }
                if error.code != .noSignal { onEvent?("camera still away (attempt \(attempts)): \(error)") }
            }
            let wait = deadline(state).map { min(delay, max($0 - monotonicNanoseconds(), 0)) } ?? delay
            guard await waitSendingPlaceholders(wait, c, &state) else { break } // stopped, or a stage failed
            delay = min(delay * 2, CameraLossPolicy.maxRetryNs)
        }
        state.captureError = nil // stopped while waiting: the user's stop, not a failure (the summary tells the loss)
        return nil
    }

    /// Waits `ns` before the next attempt (a hot-plug wake cuts it short), sending the stages' placeholders every
    /// `CameraLossPolicy.placeholderIntervalNs` meanwhile. False when the session was stopped, or a stage failed
    /// (`state.stageError`).
    private func waitSendingPlaceholders(_ ns: Int64, _ c: RunContext, _ state: inout RunState) async -> Bool {
        let end = monotonicNanoseconds() &+ ns
        while true {
            var now = monotonicNanoseconds()
            if now >= state.nextPlaceholderNs {
                do {
                    for s in c.stages where try s.placeholder(timestampNs: max(now, state.lastTs + 1)) { state.placeholders += 1 }
                } catch {
                    state.stageError = error
                    return false
                }
                state.nextPlaceholderNs = now + CameraLossPolicy.placeholderIntervalNs
                now = monotonicNanoseconds()
            }
            let slice = min(end, state.nextPlaceholderNs) - now
            if slice <= 0 { return true }
            guard await healSignal.wait(timeoutNs: slice) else { return false }
            let after = monotonicNanoseconds()
            if after >= end || after < now + slice - 20_000_000 { return true } // the backoff is over, or a wake cut it short
        }
    }

    /// An event to the events stream, the log and the caller's line.
    func report(_ event: CaptureEvent) {
        health.record(event)
        eventSink.yield(event)
        configuration.logger.info("\(event)", metadata: ["device": "\(device.path)"])
        onEvent?(event.description)
    }
}
