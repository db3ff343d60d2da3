#if canImport(Glibc)
    package import Glibc
#endif

/// The clocks the package reads, through clock_gettime(2). With these clock ids and a valid pointer the call
/// cannot fail (EINVAL and EFAULT are the only errors it has), so the readings are plain values.
package enum SystemClock {
    /// CLOCK_MONOTONIC in nanoseconds: the clock every capture timestamp is on (and `Sleep.until` sleeps on).
    package static func monotonicNanoseconds() -> Int64 { read(CLOCK_MONOTONIC) }

    /// CLOCK_REALTIME in nanoseconds since the Unix epoch (wall-clock time; it can step).
    package static func realtimeNanoseconds() -> Int64 { read(CLOCK_REALTIME) }

    /// CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
    package static func threadCPUNanoseconds() -> Int64 { read(CLOCK_THREAD_CPUTIME_ID) }

    /// CLOCK_REALTIME − CLOCK_MONOTONIC now, in nanoseconds (the two read back to back).
    package static func realtimeMinusMonotonicNanoseconds() -> Int64 {
        let realtime = realtimeNanoseconds()
        return realtime - monotonicNanoseconds()
    }

    /// The local calendar time now (time(2), localtime_r(3)): the time zone's fields, for names such as a
    /// recording segment's strftime pattern.
    package static func localTime() -> tm {
        var t = time(nil)
        var parts = tm()
        localtime_r(&t, &parts)
        return parts
    }

    private static func read(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
