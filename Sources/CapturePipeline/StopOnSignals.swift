import Glibc
import SystemIO
public import VideoCapture
import Synchronization

/// Ctrl-C (SIGINT) and SIGTERM for an app that runs a `CaptureSession`: the first signal calls `onFirst` (pass
/// the session's `stopAction`: it finishes cleanly, its outputs complete), a second one ends the process at once
/// with status 128 + the signal's number (130 for Ctrl-C), as a shell would report it.
///
/// Install it before the session starts and keep it while it runs; releasing it (or `cancel()`) gives the
/// signals their default action back. One per process at a time. It runs the callback on a thread of its own,
/// fed by a signal handler, so a signal that arrives at any moment is kept (a dispatch signal source on Linux
/// wants the signal ignored, and the kernel drops an ignored signal sent while no thread blocks it).
///
/// ```swift
/// let stop = try StopOnSignals(onFirst: session.stopAction)
/// let report = try await session.run(stages: stages)
/// stop.cancel()
/// ```
public final class StopOnSignals: Sendable {
    private let watch: SignalWatch
    private let count: SignalTally

    /// Installs the handlers for SIGINT and SIGTERM; fails with `invalidConfiguration` when the system refuses
    /// (no descriptors left for its pipe, no thread to be had).
    public init(onFirst: @escaping @Sendable () -> Void) throws(PipelineError) {
        let count = SignalTally()
        self.count = count
        do {
            watch = try SignalWatch([SIGINT, SIGTERM]) { signal in
                let n = count.value.withLock { c -> Int in
                    c += 1
                    return c
                }
                if n > 1 { ProcessExit.now(128 + signal) }
                onFirst()
            }
        } catch {
            throw PipelineError(.invalidConfiguration, "cannot watch SIGINT and SIGTERM: \(error)")
        }
    }

    /// Whether a stop signal has arrived.
    public var received: Bool { count.value.withLock { $0 > 0 } }

    /// Gives SIGINT and SIGTERM their default action back (the process ends on them again).
    public func cancel() { watch.cancel() }

    deinit { watch.cancel() }
}

/// The signals delivered so far (shared by the watch's callback and `received`).
private final class SignalTally: Sendable { let value = Mutex(0) }

extension CaptureSession {
    /// Runs the session (`run(stages:)`) as a command-line program does: Ctrl-C or SIGTERM stops it cleanly and a
    /// second one ends the process (a `StopOnSignals` installed for the run; where the system refuses it, the run
    /// goes on without), and `afterwards` (a server's stop) runs once the session has ended, however it ended.
    /// Returns the report and the signal watch, which says whether a stop signal came (`StopOnSignals.received`):
    /// keep it while the report is printed, so that a signal meanwhile still counts as the first or the second.
    public func runStoppingOnSignals(
        stages: [any PictureStage], afterwards: (() async -> Void)? = nil
    ) async throws -> (report: Report, signals: StopOnSignals?) {
        let signals = try? StopOnSignals(onFirst: stopAction)
        let report: Report
        do { report = try await run(stages: stages) } catch {
            await afterwards?()
            throw error
        }
        await afterwards?()
        return (report, signals)
    }
}
