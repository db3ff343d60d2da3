#if canImport(Glibc)
    import Glibc
#endif

// The one place (with Sources/V4L2Capture/Kernel.swift for V4L2 device calls) where the package calls the
// kernel for sockets, files, memory maps, sleeping and threads. Every call that can fail goes through
// `SystemCall.retrying`: EINTR is retried there and errno is read there, at once, into a `SystemError`.
// Scripts/check-syscalls.sh fails CI when a call appears anywhere else.

/// A system call that failed: which one and errno.
package struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call's name ("open", "sendto", …).
    package let operation: String
    package let errno: Int32
    package init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }
    /// strerror's text for errno ("No such file or directory").
    package var reason: String { SystemError.reason(errno) }
    /// "open failed: No such file or directory (errno 2)".
    package var description: String { "\(operation) failed: \(reason) (errno \(errno))" }
    /// strerror's text for any errno value.
    package static func reason(_ errno: Int32) -> String { String(cString: strerror(errno)) }
}

/// How every call in this module is made.
package enum SystemCall {
    /// Calls `body` (a system call returning -1 with errno on failure) until it does not fail with EINTR.
    /// Returns what it returned, or throws its errno, read at once after the failure.
    @inlinable
    package static func retrying<T: FixedWidthInteger>(_ operation: String, _ body: () -> T) throws(SystemError) -> T {
        while true {
            let r = body()
            if r != -1 { return r }
            let e = Glibc.errno
            if e != EINTR { throw SystemError(operation, errno: e) }
        }
    }

    /// As `retrying`, for callers that keep a plain errno (0: success): hot paths such as a packet send.
    @inlinable
    package static func errno<T: FixedWidthInteger>(_ body: () -> T) -> Int32 {
        while true {
            if body() != -1 { return 0 }
            let e = Glibc.errno
            if e != EINTR { return e }
        }
    }
}
