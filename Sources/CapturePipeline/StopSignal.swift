import Synchronization
import SystemIO
#if canImport(Glibc)
    import Glibc
#endif

/// Stops a session on signals (SIGINT and SIGTERM by default): the first asks it to finish cleanly (give it
/// `CaptureSession.stopAction`), each later one calls `onRepeat` (an app exits at once there). A signal
/// handler underneath, installed by `init` before the camera starts, so no signal is lost to the moment it
/// arrives in; removed when the value is released. Without a way to install it the signals keep their
/// dispositions (nothing traps).
///
/// ```swift
/// let stop = StopSignal(onStop: session.stopAction) { exit(130) }
/// let report = try await session.run(stages: stages)
/// withExtendedLifetime(stop) {}
/// ```
public final class StopSignal: Sendable {
    private final class Count: Sendable { let value = Mutex(0) }
    private let watch: SignalWatch?
    private let count: Count
    /// Whether a stop signal has arrived.
    public var received: Bool { count.value.withLock { $0 > 0 } }

    /// Watches `signals` (nil: SIGINT and SIGTERM): the first calls `onStop`, the later ones `onRepeat`.
    public init(
        signals: [Int32]? = nil, onStop: @escaping @Sendable () -> Void, onRepeat: @escaping @Sendable () -> Void = {}
    ) {
        let count = Count()
        self.count = count
        watch = try? SignalWatch(signals ?? [SIGINT, SIGTERM]) { _ in
            let n = count.value.withLock { c -> Int in
                c += 1
                return c
            }
            if n > 1 { onRepeat() } else { onStop() }
        }
    }

    deinit { watch?.cancel() }
}
