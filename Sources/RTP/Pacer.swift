import Foundation
import SystemIO
import VideoCaptureCommons

/// Spreads a stream's media packets over time at a pacing rate (libwebrtc's pacer: 2.5 × the bandwidth estimate)
/// instead of sending each frame as one burst, which a shallow bottleneck queue (a token bucket, a home router)
/// would overflow. The sending thread queues packets by sequence number (they are in the retransmission history
/// already); the pacer's own thread sends them when the budget allows: the budget grows at the rate, holds at most
/// 5 ms of it (or one packet), and a packet may take it below zero (the next waits until it is back).
/// Retransmissions and probes go out at once but are charged to the same budget.
///
/// So that pacing never becomes a delay of its own, the rate is raised to drain what is queued within
/// `maxQueueNs` (250 ms); and the queue holds at most `capacity` packets (beyond it a packet is sent at once).
///
/// The budget's arithmetic is `PacingBudget`, a value on an injected clock, which the congestion-control tests
/// drive against a simulated link.
final class Pacer: @unchecked Sendable {
    // @unchecked: every var below is guarded by `condition`.
    private let condition = NSCondition()
    private var ring: [(sequence: UInt16, bytes: Int)]
    private var head = 0, count = 0, queuedBytes = 0
    private var budget: PacingBudget
    private var stopping = false
    /// The most a packet waits: the rate rises so that the queue drains within it.
    static let maxQueueNs: Int64 = PacingBudget.maxQueueNs
    let capacity: Int
    private var thread: WorkerThread?

    /// `deliver` takes a queued packet's sequence number and sends it (from the pacer's thread).
    init(capacity: Int, maxPacket: Int, deliver: @escaping @Sendable (UInt16) -> Void) {
        self.capacity = capacity
        budget = PacingBudget(maxPacket: maxPacket)
        ring = Array(repeating: (0, 0), count: capacity)
        thread = nil
        thread = WorkerThread(name: "rtp-pacer") { [self] _ in run(deliver) }
    }

    /// The pacing rate in bit/s (0: unpaced, every packet at once).
    func setRate(_ bps: Int) {
        condition.lock()
        budget.rateBps = max(0, bps)
        condition.unlock()
    }

    /// Queues media packet `sequence` of `bytes`; false when it must be sent now (unpaced, or the queue is full).
    func enqueue(_ sequence: UInt16, bytes: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard budget.rateBps > 0, !stopping, count < capacity else {
            charge(bytes)
            return false
        }
        ring[(head + count) % capacity] = (sequence, bytes)
        count += 1
        queuedBytes += bytes
        condition.signal()
        return true
    }

    /// Bytes sent outside the queue (retransmissions, probes, unpaced packets): the queued packets wait for them.
    func sent(_ bytes: Int) {
        condition.lock()
        charge(bytes)
        condition.unlock()
    }

    /// Forgets every queued packet (a key frame follows that makes them useless); returns how many.
    func dropQueued() -> Int {
        condition.lock()
        defer { condition.unlock() }
        let n = count
        head = 0
        count = 0
        queuedBytes = 0
        return n
    }

    /// Packets waiting.
    var queued: Int {
        condition.lock()
        defer { condition.unlock() }
        return count
    }

    private func charge(_ bytes: Int) {
        budget.refill(atNs: monotonicNanoseconds(), queuedBytes: queuedBytes)
        budget.charge(bytes)
    }

    /// Ends the thread; packets still queued are sent at once (a stopping stream loses nothing it had encoded).
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
        thread?.join()
        thread = nil
    }

    private func run(_ deliver: (UInt16) -> Void) {
        condition.lock()
        while true {
            if count == 0 {
                if stopping { break }
                condition.wait()
                continue
            }
            budget.refill(atNs: monotonicNanoseconds(), queuedBytes: queuedBytes)
            if let waitNs = budget.waitNs(queuedBytes: queuedBytes), !stopping {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(min(waitNs + 200_000, 50_000_000)) / 1e9))
                continue
            }
            let (sequence, bytes) = ring[head]
            head = (head + 1) % capacity
            count -= 1
            queuedBytes -= bytes
            budget.charge(bytes)
            condition.unlock()
            deliver(sequence)
            condition.lock()
        }
        condition.unlock()
    }
}

/// The pacer's budget on an injected clock: it grows at the pacing rate (raised so that what is queued drains
/// within `maxQueueNs`), holds at most 5 ms of it (or one packet), and a packet may take it below zero (the next
/// waits until it is back). `Pacer` keeps one under its lock; tests drive one against a simulated link.
package struct PacingBudget: Sendable {
    /// The most a packet waits: the rate rises so that the queue drains within it (250 ms).
    package static let maxQueueNs: Int64 = 250_000_000
    /// The pacing rate, bit/s (0: unpaced).
    package var rateBps = 0
    /// Bytes that may leave now (negative: the time until the next may).
    package private(set) var bytes = 0.0
    private var lastRefillNs: Int64 = 0
    private let maxPacket: Int

    /// An empty budget; `maxPacket` bytes is the least it holds when full.
    package init(maxPacket: Int) { self.maxPacket = maxPacket }

    /// The rate in force with `queuedBytes` waiting.
    package func effectiveRate(queuedBytes: Int) -> Int {
        max(rateBps, Int(min(Int64(queuedBytes) * 8 * 1_000_000_000 / PacingBudget.maxQueueNs, Int64(Int.max / 2))))
    }

    /// Grows the budget for the time since the last refill (at most 100 ms counted).
    package mutating func refill(atNs now: Int64, queuedBytes: Int) {
        let effective = effectiveRate(queuedBytes: queuedBytes)
        let elapsed = Double(min(max(now - lastRefillNs, 0), 100_000_000)) / 1e9
        lastRefillNs = now
        bytes = min(bytes + Double(effective) / 8 * elapsed, max(Double(effective) / 8 * 0.005, Double(maxPacket)))
    }

    /// `sent` bytes left (queued, or outside the queue).
    package mutating func charge(_ sent: Int) { bytes -= Double(sent) }

    /// How long until the next queued packet may leave (ns), nil when it may now (or pacing is off).
    package func waitNs(queuedBytes: Int) -> Int64? {
        guard bytes < 0, rateBps > 0 else { return nil }
        return Int64(-bytes * 8 / Double(max(effectiveRate(queuedBytes: queuedBytes), 1)) * 1e9)
    }
}
