#if canImport(Glibc)
    package import Glibc
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

/// Sleeping on the monotonic clock (CLOCK_MONOTONIC, the clock `monotonicNanoseconds` reads).
package enum Sleep {
    /// Sleeps until the monotonic clock reads `ns` (at once if it has passed); a signal does not cut it short.
    package static func until(monotonicNs ns: Int64) {
        var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }

    /// Sleeps for `ns` nanoseconds.
    package static func `for`(nanoseconds ns: Int64) {
        guard ns > 0 else { return }
        var ts = timespec(), now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let end = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec) + ns
        ts = timespec(tv_sec: Int(end / 1_000_000_000), tv_nsec: Int(end % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}
