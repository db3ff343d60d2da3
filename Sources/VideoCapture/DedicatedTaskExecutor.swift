import Dispatch
import Synchronization
import SystemIO

/// A task executor with a thread of its own, for a frame consumer's task:
///
/// ```swift
/// let executor = DedicatedTaskExecutor(name: "my-pipeline")
/// try await withTaskExecutorPreference(executor) {
///     for try await frame in capturer.frames() { … }        // resumed on the executor's thread
/// }
/// executor.shutdown()
/// ```
///
/// Why: a task that waits for frames is resumed by the capturer's delivery thread. On the default executor
/// that goes through Dispatch, which allocates a continuation object for every job enqueued from a thread
/// outside its own pool: two allocations per frame on the real-time path. Here a resumed job goes into a
/// fixed ring and the thread is woken with a semaphore: nothing is allocated per frame (the ring grows only if
/// more than `capacity` jobs ever wait at once). The thread runs one job at a time, in order.
public final class DedicatedTaskExecutor: TaskExecutor, Sendable {
    private struct Queue {
        var ring: Ring<UnownedJob>
    }

    private let queue: Mutex<Queue>
    private let wake = DispatchSemaphore(value: 0)
    private let thread = Mutex<WorkerThread?>(nil)

    /// Starts the thread (named `name`; the kernel keeps 15 bytes). Call `shutdown()` when the work is done.
    public init(name: String, capacity: Int = 64) {
        queue = Mutex(Queue(ring: Ring(capacity: max(4, min(capacity, 4096)))))
        // The thread holds the executor until `shutdown()` ends its loop.
        // Stopped by WorkerThread's protocol: the flag, then the semaphore the loop waits on.
        let worker = WorkerThread(name: name, wake: { [wake] in wake.signal() }) { [self] stop in self.runJobs(stop) }
        thread.withLock { $0 = worker }
    }

    /// Queues a job for the executor's thread (the Swift runtime calls this; jobs run one at a time, in order).
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.ring.append(job) } // more jobs than the ring holds double it (rare)
        wake.signal()
    }

    /// Runs the jobs that are left, then ends the thread and waits for it. Call it once the work that
    /// preferred this executor has returned; jobs enqueued afterwards are never run.
    public func shutdown() {
        let worker = thread.withLock { t -> WorkerThread? in
            defer { t = nil }
            return t
        }
        worker?.stop()
    }

    private func runJobs(_ stop: StopFlag) {
        while true {
            wake.wait()
            while let job = next() {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
            if stop.isSet && queue.withLock({ $0.ring.count == 0 }) { return }
        }
    }

    private func next() -> UnownedJob? { queue.withLock { $0.ring.popFirst() } }
}
