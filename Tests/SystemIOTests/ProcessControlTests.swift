import Dispatch
import Glibc
import Synchronization
import Testing
@testable import SystemIO

/// The wrappers that moved into SystemIO with the link-level check (#38): clocks, limits, signal dispositions.
@Suite struct ProcessControlTests {
    @Test func clocksReadTheKernelsClocks() {
        let a = SystemClock.monotonicNanoseconds(), b = SystemClock.monotonicNanoseconds()
        #expect(a > 0 && b >= a)
        #expect(SystemClock.realtimeNanoseconds() > 1_600_000_000 * 1_000_000_000) // after 2020
        let offset = SystemClock.realtimeMinusMonotonicNanoseconds()
        #expect(abs(SystemClock.realtimeNanoseconds() - SystemClock.monotonicNanoseconds() - offset) < 1_000_000_000)
        #expect(SystemClock.threadCPUNanoseconds() > 0)
        #expect(SystemClock.localTime().tm_year >= 120)
    }

    @Test func openFileLimits() throws {
        let limit = try ResourceLimits.openFiles()
        #expect(limit.soft > 0 && limit.soft <= limit.hard)
    }

    @Test func signalDispositionsSetAndRestore() throws {
        var old = sigaction()
        try SignalDisposition.ignore(SIGUSR2)
        sigaction(SIGUSR2, nil, &old)
        #expect(unsafeBitCast(old.__sigaction_handler.sa_handler, to: Int.self) == 1) // SIG_IGN
        try SignalDisposition.restoreDefault(SIGUSR2)
        sigaction(SIGUSR2, nil, &old)
        #expect(unsafeBitCast(old.__sigaction_handler.sa_handler, to: Int.self) == 0) // SIG_DFL
        #expect(throws: SystemError("sigaction", errno: EINVAL)) { try SignalDisposition.ignore(SIGKILL) }
    }

    /// SignalWatch: every signal sent while the watch is installed reaches the callback, also when the sending
    /// thread blocks it (the watch thread unblocks it for itself), and cancel restores the default action.
    @Test func signalWatchDeliversEverySignal() throws {
        let seen = Mutex<[Int32]>([]), arrived = DispatchSemaphore(value: 0)
        let watch = try SignalWatch([SIGUSR1]) { number in
            seen.withLock { $0.append(number) }
            arrived.signal()
        }
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGUSR1)
        for i in 0..<20 {
            if i == 10 { pthread_sigmask(SIG_BLOCK, &blocked, nil) } // this thread no longer takes it
            kill(getpid(), SIGUSR1)
            #expect(arrived.wait(timeout: .now() + 30) == .success, "signal \(i) never reached the callback")
        }
        pthread_sigmask(SIG_UNBLOCK, &blocked, nil)
        #expect(seen.withLock { $0 } == Array(repeating: SIGUSR1, count: 20))
        watch.cancel()
        var old = sigaction()
        sigaction(SIGUSR1, nil, &old)
        #expect(unsafeBitCast(old.__sigaction_handler.sa_handler, to: Int.self) == 0) // SIG_DFL again
        watch.cancel() // twice: no effect
    }

    @Test func timerSlackAndTerminals() throws {
        try Sleep.setTimerSlack(nanoseconds: 50_000) // the default again
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        #expect(!FileDescriptor(rawValue: fds[0]).isTerminal)
        close(fds[0])
        close(fds[1])
        StandardStreams.flush()
    }
}
