import SystemIO

// The package's clocks, read by SystemIO (clock_gettime is a system call: Scripts/check-syscalls.sh).

/// CLOCK_MONOTONIC in nanoseconds: the clock every capture timestamp is on.
package func monotonicNanoseconds() -> Int64 { SystemClock.monotonicNanoseconds() }

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, in nanoseconds: add it to a capture timestamp for its wall-clock time
/// (what RTCP sender reports and the absolute capture time extension carry).
package func realtimeMinusMonotonicNs() -> Int64 { SystemClock.realtimeMinusMonotonicNanoseconds() }

/// CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID): wall time minus this over a
/// stretch of work is the time the thread waited for a core (preemption, a busy machine).
package func threadCPUNanoseconds() -> Int64 { SystemClock.threadCPUNanoseconds() }
