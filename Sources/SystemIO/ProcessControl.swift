#if canImport(Glibc)
    package import Glibc
#endif

/// The process's limits: getrlimit(2).
package enum ResourceLimits {
    /// The soft and hard limits on open descriptors (RLIMIT_NOFILE); RLIM_INFINITY reads as `UInt64.max`.
    package static func openFiles() throws(SystemError) -> (soft: UInt64, hard: UInt64) {
        var limit = rlimit()
        _ = try SystemCall.retrying("getrlimit") { getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }
}

/// What the process does on a signal: sigaction(2) with the default action or ignoring it (handlers are
/// dispatch's signal sources, which want the signal ignored so that only they see it).
package enum SignalDisposition {
    /// SIG_IGN for `signal`: the process no longer stops on it (a dispatch signal source still sees it).
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
