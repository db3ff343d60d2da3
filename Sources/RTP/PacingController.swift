/// A pacer's queue and budget, a value on time passed in (libwebrtc's `PacingController`, driven from outside):
/// media packets wait in a ring by sequence number (they are in the retransmission history already) and leave as
/// the `PacingBudget` allows; retransmissions and probes leave at once but are charged to the same budget. A queue
/// of `capacity` packets is full (a packet beyond it leaves at once). `Pacer` keeps one under its loop's lock and is
/// its thread's thin driver; the link-simulation tests drive the same one on a simulated clock.
package struct PacingController: Sendable {
    private var ring: [(sequence: UInt16, bytes: Int)]
    private var head = 0
    /// Packets waiting, and their bytes.
    package private(set) var count = 0, queuedBytes = 0
    private var budget: PacingBudget
    /// The most packets that wait.
    package let capacity: Int

    /// An empty queue of `capacity` packets, unpaced (rate 0) until `rateBps` is set; `maxPacket` bytes is the least
    /// the budget holds when full.
    package init(capacity: Int, maxPacket: Int) {
        self.capacity = capacity
        budget = PacingBudget(maxPacket: maxPacket)
        ring = Array(repeating: (0, 0), count: max(1, capacity))
    }

    /// The pacing rate in bit/s (0: unpaced, every packet at once).
    package var rateBps: Int {
        get { budget.rateBps }
        set { budget.rateBps = max(0, newValue) }
    }

    /// Queues media packet `sequence` of `bytes` at `nowNs`; false when it must leave now (unpaced, or the queue is
    /// full): it is charged then.
    package mutating func enqueue(_ sequence: UInt16, bytes: Int, nowNs: Int64) -> Bool {
        guard budget.rateBps > 0, count < capacity else {
            sent(bytes, nowNs: nowNs)
            return false
        }
        ring[(head + count) % capacity] = (sequence, bytes)
        count += 1
        queuedBytes += bytes
        return true
    }

    /// Bytes that left outside the queue at `nowNs` (retransmissions, probes, unpaced packets): the queued packets
    /// wait for them.
    package mutating func sent(_ bytes: Int, nowNs: Int64) {
        budget.refill(atNs: nowNs, queuedBytes: queuedBytes)
        budget.charge(bytes)
    }

    /// Forgets every queued packet (a key frame follows that makes them useless); returns how many.
    package mutating func dropQueued() -> Int {
        let n = count
        head = 0
        count = 0
        queuedBytes = 0
        return n
    }

    /// Takes the next packet if the budget allows it at `nowNs` (charged); else the nanoseconds until it may (nil:
    /// nothing queued).
    package mutating func next(nowNs: Int64) -> (packet: UInt16?, waitNs: Int64?) {
        guard count > 0 else { return (nil, nil) }
        budget.refill(atNs: nowNs, queuedBytes: queuedBytes)
        if let w = budget.waitNs(queuedBytes: queuedBytes) { return (nil, w) }
        return (pop(), nil)
    }

    /// Takes the next packet whatever the budget (charged); the queue must not be empty.
    package mutating func pop() -> UInt16 {
        let (sequence, bytes) = ring[head]
        head = (head + 1) % capacity
        count -= 1
        queuedBytes -= bytes
        budget.charge(bytes)
        return sequence
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
