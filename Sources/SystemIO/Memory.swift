#if canImport(Glibc)
    import Glibc
#endif

/// Anonymous private memory maps (page-aligned, zeroed, returned to the system when unmapped).
package enum MemoryMap {
    /// mmap(2) of `length` anonymous bytes, or nil.
    package static func anonymous(length: Int) -> UnsafeMutableRawPointer? {
        guard length > 0, let m = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), m != MAP_FAILED else { return nil }
        return m
    }

    /// munmap(2) of a map made by `anonymous`.
    package static func unmap(_ pointer: UnsafeMutableRawPointer, length: Int) {
        _ = munmap(pointer, length)
    }
}

/// Sleeping on the monotonic clock (CLOCK_MONOTONIC, the clock `SystemClock.monotonicNanoseconds` reads).
package enum Sleep {
    /// Sleeps until the monotonic clock reads `ns` (at once if it has passed); a signal does not cut it short.
    package static func until(monotonicNs ns: Int64) {
        var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }

    /// Sleeps for `ns` nanoseconds.
    package static func `for`(nanoseconds ns: Int64) {
        guard ns > 0 else { return }
        until(monotonicNs: SystemClock.monotonicNanoseconds() + ns)
    }

    /// prctl(PR_SET_TIMERSLACK, ns) for the calling thread: how late the kernel may end its sleeps (default 50 µs).
    /// prctl is variadic (Swift cannot call it directly); its integer arguments pass in registers as for a
    /// fixed-argument function, so it is called through that type.
    package static func setTimerSlack(nanoseconds ns: UInt) throws(SystemError) {
        typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
        guard let prctl = prctlSymbol else { throw SystemError("prctl", errno: ENOSYS) }
        _ = try SystemCall.retrying("prctl") { unsafeBitCast(prctl, to: Prctl.self)(29, ns, 0, 0, 0) } // PR_SET_TIMERSLACK
    }
}

private nonisolated(unsafe) let prctlSymbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prctl") // RTLD_DEFAULT
