#if canImport(Glibc)
    import Glibc
#endif
import Synchronization

/// A stop request shared by a `WorkerThread` and the loop it runs.
package final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    package init() {}
    package var isSet: Bool { value.load(ordering: .acquiring) }
    /// Sets the flag; true for the first caller only.
    @discardableResult
    package func set() -> Bool { !value.exchange(true, ordering: .acquiringAndReleasing) }
}

/// The package's one thread lifecycle: a named thread that runs a body (usually a loop that checks its
/// `StopFlag`), a stop request, and a join.
///
/// The one stop protocol: `stop()` sets the flag, calls the owner's `wake` (what gets the body out of its wait:
/// a byte to a pipe it polls, a semaphore or condition it waits on; none for a loop that polls with a timeout),
/// then joins. The body checks `stopFlag.isSet` after every wait. Threads that serve a queue (frame delivery,
/// the encoder) end once asked and their queue is empty; threads that serve many members (the pacing and
/// transport loops) end when their last member leaves.
///
/// The thread holds its body only while it runs, and this object does not keep the body: an owner that keeps
/// its `WorkerThread` while the body captures the owner makes no lasting cycle (the body is released when it
/// returns). `join()` waits for the body to return, any number of times and from any thread; called on the
/// thread itself (an owner stopping on its own error path) it returns at once instead of deadlocking. A thread
/// released without a join is detached (its resources are freed when it ends).
package final class WorkerThread: Sendable {
    /// Set by `requestStop()`; the body's loop reads it.
    package let stopFlag: StopFlag
    private let wake: (@Sendable () -> Void)?
    private let handle = Mutex<pthread_t?>(nil)
    /// True once the thread was joined or detached (pthread allows only one of either); held while joining so
    /// that other joiners wait for the same end.
    private let released = Mutex<Bool>(false)

    /// Starts a thread named `name` (the kernel keeps 15 bytes of it) running `body(stopFlag)`.
    /// If the system refuses a thread (EAGAIN: out of threads), the body runs at once on a fallback thread
    /// made the same way, and failing that on the calling thread: it is never skipped.
    /// `wake` is called by the first `requestStop()`, after the flag is set.
    package init(
        name: String, stopFlag: StopFlag = StopFlag(), wake: (@Sendable () -> Void)? = nil, body: @escaping @Sendable (StopFlag) -> Void
    ) {
        self.stopFlag = stopFlag
        self.wake = wake
        let start = ThreadStart(name: name, flag: stopFlag, body: body)
        let context = Unmanaged.passRetained(start).toOpaque()
        var thread = pthread_t()
        let r = pthread_create(
            &thread, nil,
            { raw in
                let start = Unmanaged<ThreadStart>.fromOpaque(raw!).takeRetainedValue()
                start.run()
                return nil
            }, context)
        if r == 0 {
            handle.withLock { $0 = thread }
        } else {
            // No thread to be had: run here, so the work is still done and joins return.
            released.withLock { $0 = true }
            Unmanaged<ThreadStart>.fromOpaque(context).takeRetainedValue().run()
        }
    }

    /// Asks the body to stop (it sees `stopFlag.isSet`; the first request also calls `wake`); does not wait.
    package func requestStop() { if stopFlag.set() { wake?() } }

    /// Waits until the body has returned. Returns at once on the thread itself (which may call it before
    /// `init` has stored the handle: no handle yet means the caller is the new thread).
    package func join() {
        guard let thread = handle.withLock({ $0 }) else { return }
        if pthread_equal(thread, pthread_self()) != 0 { return }
        released.withLock { done in
            guard !done else { return }
            pthread_join(thread, nil)
            done = true
        }
    }

    /// True when called on this thread (a callback from its body that must not wait for the body).
    package var isCurrent: Bool {
        guard let thread = handle.withLock({ $0 }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// `requestStop()` then `join()`.
    package func stop() {
        requestStop()
        join()
    }

    deinit {
        let detach = released.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        if detach, let thread = handle.withLock({ $0 }) { pthread_detach(thread) }
    }
}

/// What the new thread starts with (passed through pthread_create's one pointer).
private final class ThreadStart: Sendable {
    let name: String
    let flag: StopFlag
    let body: @Sendable (StopFlag) -> Void
    init(name: String, flag: StopFlag, body: @escaping @Sendable (StopFlag) -> Void) {
        self.name = name
        self.flag = flag
        self.body = body
    }
    func run() {
        // The kernel keeps 15 bytes of a thread's name (longer names are refused, so cut at a character).
        var short = ""
        for c in name {
            guard short.utf8.count + String(c).utf8.count <= 15 else { break }
            short.append(c)
        }
        setThreadName(short)
        body(flag)
    }
}

/// pthread_setname_np for the calling thread. Swift's Glibc module does not declare it (a GNU extension), so
/// it is looked up once by name; without it the thread keeps its inherited name.
private func setThreadName(_ name: String) {
    typealias SetName = @convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32
    guard let setName = threadNameSetter else { return }
    _ = unsafeBitCast(setName, to: SetName.self)(pthread_self(), name)
}
private nonisolated(unsafe) let threadNameSetter = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_setname_np") // RTLD_DEFAULT
