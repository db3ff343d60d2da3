import Foundation
import SystemIO
import VideoCaptureCommons

/// Spreads a stream's media packets over time at a pacing rate (libwebrtc's pacer: 2.5 × the bandwidth estimate)
/// instead of sending each frame as one burst, which a shallow bottleneck queue (a token bucket, a home router)
/// would overflow. The sending thread queues packets by sequence number (they are in the retransmission history
/// already); the pacing thread sends them when the budget allows: the budget grows at the rate, holds at most
/// 5 ms of it (or one packet), and a packet may take it below zero (the next waits until it is back).
/// Retransmissions and probes go out at once but are charged to the same budget.
///
/// So that pacing never becomes a delay of its own, the rate is raised to drain what is queued within
/// `maxQueueNs` (250 ms); and the queue holds at most `capacity` packets (beyond it a packet is sent at once).
///
/// Every pacer of the process is served by one thread (`PacerLoop`: 16 viewers cost one pacing thread, not 16);
/// it rests while no pacer holds a packet, and ends when the last pacer stops.
///
/// The budget's arithmetic is `PacingBudget`, a value on an injected clock, which the congestion-control tests
/// drive against a simulated link.
final class Pacer: @unchecked Sendable {
    // @unchecked: every var below is guarded by the loop's condition (`PacerLoop.condition`).
    fileprivate var ring: [(sequence: UInt16, bytes: Int)]
    fileprivate var head = 0, count = 0, queuedBytes = 0
    fileprivate var budget: PacingBudget
    fileprivate var stopped = false
    fileprivate let deliver: @Sendable (UInt16) -> Void
    private let loop: PacerLoop
    /// The most a packet waits: the rate rises so that the queue drains within it.
    static let maxQueueNs: Int64 = PacingBudget.maxQueueNs
    let capacity: Int

    /// `deliver` takes a queued packet's sequence number and sends it (from the pacing thread).
    init(capacity: Int, maxPacket: Int, loop: PacerLoop = .shared, deliver: @escaping @Sendable (UInt16) -> Void) {
        self.capacity = capacity
        self.deliver = deliver
        self.loop = loop
        budget = PacingBudget(maxPacket: maxPacket)
        ring = Array(repeating: (0, 0), count: capacity)
        loop.add(self)
    }

    /// The pacing rate in bit/s (0: unpaced, every packet at once).
    func setRate(_ bps: Int) {
        loop.condition.lock()
        budget.rateBps = max(0, bps)
        loop.condition.unlock()
    }

    /// Queues media packet `sequence` of `bytes`; false when it must be sent now (unpaced, or the queue is full).
    func enqueue(_ sequence: UInt16, bytes: Int) -> Bool {
        loop.condition.lock()
        defer { loop.condition.unlock() }
        guard budget.rateBps > 0, !stopped, count < capacity else {
            charge(bytes)
            return false
        }
        ring[(head + count) % capacity] = (sequence, bytes)
        count += 1
        queuedBytes += bytes
        if count == 1 { loop.wake() } // it may be resting: nothing was queued anywhere
        return true
    }

    /// Bytes sent outside the queue (retransmissions, probes, unpaced packets): the queued packets wait for them.
    func sent(_ bytes: Int) {
        loop.condition.lock()
        charge(bytes)
        loop.condition.unlock()
    }

    /// Forgets every queued packet (a key frame follows that makes them useless); returns how many.
    func dropQueued() -> Int {
        loop.condition.lock()
        defer { loop.condition.unlock() }
        let n = count
        head = 0
        count = 0
        queuedBytes = 0
        return n
    }

    /// Packets waiting.
    var queued: Int {
        loop.condition.lock()
        defer { loop.condition.unlock() }
        return count
    }

    private func charge(_ bytes: Int) {
        budget.refill(atNs: monotonicNanoseconds(), queuedBytes: queuedBytes)
        budget.charge(bytes)
    }

    /// Takes the next packet if the budget allows it now (charged); else the nanoseconds until it may (nil:
    /// nothing queued). Under the loop's lock.
    fileprivate func next(now: Int64) -> (packet: UInt16?, waitNs: Int64?) {
        guard count > 0 else { return (nil, nil) }
        budget.refill(atNs: now, queuedBytes: queuedBytes)
        if let w = budget.waitNs(queuedBytes: queuedBytes) { return (nil, w) }
        return (pop(), nil)
    }

    fileprivate func pop() -> UInt16 {
        let (sequence, bytes) = ring[head]
        head = (head + 1) % capacity
        count -= 1
        queuedBytes -= bytes
        budget.charge(bytes)
        return sequence
    }

    /// Leaves the loop; packets still queued are sent at once, here (a stopping stream loses nothing it had
    /// encoded). After it returns, no packet of this pacer is delivered any more. Idempotent.
    func stop() {
        loop.remove(self)
        loop.condition.lock()
        while count > 0 {
            let sequence = pop()
            loop.condition.unlock()
            deliver(sequence)
            loop.condition.lock()
        }
        loop.condition.unlock()
    }
}

/// The one thread that paces every `Pacer` of the process: it sends each pacer's packets as its budget allows,
/// sleeps until the earliest budget is back (at most 50 ms), rests while no pacer holds a packet, and ends when
/// the last pacer leaves (the next one starts it again).
final class PacerLoop: @unchecked Sendable {
    // @unchecked: every var below is guarded by `condition`.
    /// The process's loop.
    static let shared = PacerLoop()
    /// Guards the loop's state and every member pacer's queue.
    let condition = NSCondition()
    private var members: [Pacer] = []
    /// The pacer whose packet is being delivered now (outside the lock): `remove` waits for it.
    private var delivering: Pacer?
    /// Something was queued since the thread last looked: it must not rest.
    private var woken = false
    private var thread: WorkerThread?

    /// The number of pacing threads running (0 or 1): what the thread-count tests read.
    var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return thread == nil ? 0 : 1
    }

    fileprivate func add(_ p: Pacer) {
        condition.lock()
        defer { condition.unlock() }
        members.append(p)
        if thread == nil { thread = WorkerThread(name: "rtp-pacer") { [self] _ in run() } }
    }

    /// Takes `p` out; waits while the thread delivers one of its packets (unless called from that delivery).
    fileprivate func remove(_ p: Pacer) {
        condition.lock()
        defer { condition.unlock() }
        guard !p.stopped else { return }
        p.stopped = true
        members.removeAll { $0 === p }
        while delivering === p, thread?.isCurrent == false { condition.wait() }
        condition.broadcast()
    }

    /// Under the lock: the thread looks again before it rests.
    fileprivate func wake() {
        woken = true
        condition.broadcast()
    }

    private func run() {
        condition.lock()
        defer { condition.unlock() }
        while !members.isEmpty {
            woken = false
            var waitNs: Int64? = nil
            var i = 0
            while i < members.count {
                let p = members[i]
                let (packet, wait) = p.next(now: monotonicNanoseconds())
                if let packet {
                    delivering = p
                    condition.unlock()
                    p.deliver(packet)
                    condition.lock()
                    delivering = nil
                    condition.broadcast() // a `remove` may wait for this delivery
                    continue // the same pacer again (or the one now at i, if it left)
                }
                if let wait { waitNs = min(waitNs ?? wait, wait) }
                i += 1
            }
            if woken { continue }
            if let waitNs {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(min(waitNs + 200_000, 50_000_000)) / 1e9))
            } else {
                condition.wait() // nothing queued anywhere: rest until a packet is
            }
        }
        thread = nil // the last pacer left; the next starts a new thread
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
