import Foundation
import SystemIO
import VideoCapture

/// Spreads a stream's media packets over time at a pacing rate (libwebrtc's pacer: 2.5 × the bandwidth estimate)
/// instead of sending each frame as one burst, which a shallow bottleneck queue (a token bucket, a home router)
/// would overflow. The sending thread queues packets by sequence number (they are in the retransmission history
/// already); the pacer's own thread sends them when the budget allows: the budget grows at the rate, holds at most
/// 5 ms of it (or one packet), and a packet may take it below zero (the next waits until it is back).
/// Retransmissions and probes go out at once but are charged to the same budget.
///
/// So that pacing never becomes a delay of its own, the rate is raised to drain what is queued within
/// `maxQueueNs` (250 ms); and the queue holds at most `capacity` packets (beyond it a packet is sent at once).
final class Pacer: @unchecked Sendable {
    // @unchecked: every var below is guarded by `condition`.
    private let condition = NSCondition()
    private var ring: [(sequence: UInt16, bytes: Int)]
    private var head = 0, count = 0, queuedBytes = 0
    private var rateBps = 0
    private var budget = 0.0
    private var lastRefillNs: Int64 = 0
    private var stopping = false
    /// The most a packet waits: the rate rises so that the queue drains within it.
    static let maxQueueNs: Int64 = 250_000_000
    let capacity: Int
    private let maxPacket: Int
    private var thread: WorkerThread?

    /// `deliver` takes a queued packet's sequence number and sends it (from the pacer's thread).
    init(capacity: Int, maxPacket: Int, deliver: @escaping @Sendable (UInt16) -> Void) {
        self.capacity = capacity
        self.maxPacket = maxPacket
        ring = Array(repeating: (0, 0), count: capacity)
        thread = nil
        thread = WorkerThread(name: "rtp-pacer") { [self] _ in run(deliver) }
    }

    /// The pacing rate in bit/s (0: unpaced, every packet at once).
    func setRate(_ bps: Int) {
        condition.lock()
        rateBps = max(0, bps)
        condition.unlock()
    }

    /// Queues media packet `sequence` of `bytes`; false when it must be sent now (unpaced, or the queue is full).
    func enqueue(_ sequence: UInt16, bytes: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard rateBps > 0, !stopping, count < capacity else {
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
        refill(monotonicNanoseconds())
        budget -= Double(bytes)
    }

    private func refill(_ now: Int64) {
        let effective = max(rateBps, Int(min(Int64(queuedBytes) * 8 * 1_000_000_000 / Pacer.maxQueueNs, Int64(Int.max / 2))))
        let elapsed = Double(min(max(now - lastRefillNs, 0), 100_000_000)) / 1e9
        lastRefillNs = now
        budget = min(budget + Double(effective) / 8 * elapsed, max(Double(effective) / 8 * 0.005, Double(maxPacket)))
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
            let now = monotonicNanoseconds()
            refill(now)
            if budget < 0 && !stopping && rateBps > 0 {
                let effective = max(rateBps, Int(Int64(queuedBytes) * 8 * 1_000_000_000 / Pacer.maxQueueNs))
                let waitNs = Int64(-budget * 8 / Double(max(effective, 1)) * 1e9) + 200_000
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(min(waitNs, 50_000_000)) / 1e9))
                continue
            }
            let (sequence, bytes) = ring[head]
            head = (head + 1) % capacity
            count -= 1
            queuedBytes -= bytes
            budget -= Double(bytes)
            condition.unlock()
            deliver(sequence)
            condition.lock()
        }
        condition.unlock()
    }
}
