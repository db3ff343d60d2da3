import Foundation
import VideoCaptureCommons

/// The time an `RTPSender` and its congestion control run on: the monotonic clock in production
/// (`MonotonicClock`), a simulated one in the link-simulation tests, which then run minutes of a link in
/// milliseconds on the shipped code. Nothing else in the RTP module reads a clock.
package protocol SenderClock: Sendable {
    /// Now on the clock capture timestamps are on (CLOCK_MONOTONIC), in nanoseconds.
    var nowNs: Int64 { get }
    /// The wall clock minus `nowNs`'s clock (ns): what turns a monotonic instant into the NTP time of RTCP sender
    /// reports and the absolute capture time extension.
    var realtimeMinusMonotonicNs: Int64 { get }
}

/// The real clock: CLOCK_MONOTONIC, and CLOCK_REALTIME for NTP times (both read through SystemIO).
package struct MonotonicClock: SenderClock {
    /// The system's clock.
    package init() {}
    package var nowNs: Int64 { monotonicNanoseconds() }
    package var realtimeMinusMonotonicNs: Int64 { VideoCaptureCommons.realtimeMinusMonotonicNs() }

    /// The `Date` `ns` from now, for a condition variable's timed wait (the pacing thread's).
    static func deadline(afterNs ns: Int64) -> Date { Date(timeIntervalSinceNow: Double(ns) / 1e9) }
}
