#if canImport(Glibc)
    import Glibc
#endif
import Synchronization

/// The process's limits: getrlimit(2).
package enum ResourceLimits {
    /// The soft and hard limits on open descriptors (RLIMIT_NOFILE); RLIM_INFINITY reads as `UInt64.max`.
    package static func openFiles() throws(SystemError) -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        _ = try SystemCall.retrying("getrlimit") { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }
}

/// What the process does on a signal: sigaction(2) with the default action or ignoring it (a handler that
/// calls back is `SignalWatch`).
package enum SignalDisposition {
    /// SIG_IGN for `signal`: the process no longer stops on it (and the kernel drops it).
    package static func ignore(_ signal: Int32) throws(SystemError) { try set(signal, SIG_IGN) }

    /// SIG_DFL for `signal`: its default action again (SIGINT and SIGTERM end the process).
    package static func restoreDefault(_ signal: Int32) throws(SystemError) { try set(signal, SIG_DFL) }

    private static func set(_ signal: Int32, _ handler: sighandler_t?) throws(SystemError) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = handler
        sigemptyset(&action.sa_mask)
        _ = try SystemCall.retrying("sigaction") { sigaction(signal, &action, nil) }
    }
}

/// Process-directed signals (SIGINT, SIGTERM) handed to a callback on a thread of its own: a sigaction handler
/// writes the signal's number to a pipe (write(2) is async-signal-safe), the thread reads it and calls back.
///
/// Why not a dispatch signal source: on Linux it reads a signalfd with the signal blocked on dispatch's own
/// thread only, and wants the signal ignored; the kernel drops an ignored signal when it is sent if the thread
/// it targets does not block it, so a Ctrl-C that came at the wrong moment was lost (about 1 in 7 right after
/// start). A handler is never dropped. The watch thread unblocks the signals for itself, so a process started
/// with them blocked (a child of a test runner inherits its mask) still receives them there.
///
/// One watch per process at a time (the handler finds the pipe through one global). `cancel()` (or release)
/// restores the default actions.
package final class SignalWatch: Sendable {
    private let signals: [Int32]
    private let readEnd: Int32
    private let writeEnd: Int32
    private let thread: WorkerThread
    private let cancelled = StopFlag()

    /// Installs handlers for `signals` (each 1...64) and starts the thread that calls `onSignal(number)` once
    /// per delivered signal (two sent before either is delivered count once: the kernel keeps one pending).
    package init(_ signals: [Int32], onSignal: @escaping @Sendable (Int32) -> Void) throws(SystemError) {
        self.signals = signals
        var fds: [Int32] = [-1, -1]
        _ = try SystemCall.retrying("pipe") { pipe(&fds) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) } // not inherited by the processes we start
        readEnd = fds[0]
        writeEnd = fds[1]
        FileDescriptor(rawValue: writeEnd).setNonBlocking(true) // the handler never waits on a full pipe
        let readFD = fds[0], creator = pthread_self()
        thread = WorkerThread(name: "signals") { _ in
            // With no thread to be had the body runs on the caller: it must not wait there (no watch, no hang).
            guard pthread_equal(pthread_self(), creator) == 0 else { return }
            var wanted = sigset_t()
            sigemptyset(&wanted)
            for s in signals { sigaddset(&wanted, s) }
            pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
            var byte: UInt8 = 0
            while true {
                let n = read(readFD, &byte, 1)
                if n == 1 {
                    if byte == 0 { return } // cancel()
                    onSignal(Int32(byte))
                } else if n < 0 && Glibc.errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
        signalWatchWriteEnd.store(writeEnd, ordering: .releasing)
        for s in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                let fd = signalWatchWriteEnd.load(ordering: .acquiring)
                guard fd >= 0 else { return }
                let saved = Glibc.errno
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(fd, &byte, 1)
                Glibc.errno = saved
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            _ = try SystemCall.retrying("sigaction") { sigaction(s, &action, nil) }
        }
    }

    /// Restores the signals' default actions and ends the thread (waits for it). Idempotent.
    package func cancel() {
        guard cancelled.set() else { return }
        for s in signals { try? SignalDisposition.restoreDefault(s) }
        signalWatchWriteEnd.store(-1, ordering: .releasing)
        var stop: UInt8 = 0
        _ = write(writeEnd, &stop, 1)
        thread.join()
        _ = Glibc.close(readEnd)
        _ = Glibc.close(writeEnd)
    }

    deinit { cancel() }
}

/// The write end of the current `SignalWatch`'s pipe (-1: none), read by its handler.
private let signalWatchWriteEnd = Atomic<Int32>(-1)

/// Ending the process.
package enum ProcessExit {
    /// exit(3) with `status`: atexit handlers run and stdio is flushed.
    package static func now(_ status: Int32) -> Never { exit(status) }
}

/// The C library's buffered output streams (where `print` writes).
package enum StandardStreams {
    /// fflush(NULL): writes out what every output stream holds (a line `print` buffered before a long wait).
    package static func flush() { fflush(nil) }
}

extension FileDescriptor {
    /// Standard error (descriptor 2).
    package static let standardError = FileDescriptor(rawValue: 2)

    /// isatty(3): true when the descriptor is a terminal.
    package var isTerminal: Bool { isatty(rawValue) != 0 }
}
