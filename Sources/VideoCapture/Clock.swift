#if canImport(Glibc)
    import Glibc
#endif

/// CLOCK_MONOTONIC in nanoseconds: the clock every capture timestamp is on.
package func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, in nanoseconds: add it to a capture timestamp for its wall-clock time
/// (what RTCP sender reports and the absolute capture time extension carry).
package func realtimeMinusMonotonicNs() -> Int64 {
    var r = timespec(), m = timespec()
    clock_gettime(CLOCK_REALTIME, &r)
    clock_gettime(CLOCK_MONOTONIC, &m)
    return (Int64(r.tv_sec) - Int64(m.tv_sec)) * 1_000_000_000 + (Int64(r.tv_nsec) - Int64(m.tv_nsec))
}

/// CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID): wall time minus this over a
/// stretch of work is the time the thread waited for a core (preemption, a busy machine).
package func threadCPUNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}
