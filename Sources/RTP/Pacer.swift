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
/// The queue and the budget's arithmetic are `PacingController`, a value on time passed in; the pacer is its lock
/// and its thread's driver, on an injected clock (the link-simulation tests drive it without a thread).
final class Pacer: @unchecked Sendable {
    // @unchecked: every var below is guarded by the loop's condition (`PacerLoop.condition`).
    fileprivate var controller: PacingController
    fileprivate var stopped = false
    fileprivate let deliver: @Sendable (UInt16) -> Void
    fileprivate let clock: any SenderClock
    private let loop: PacerLoop
    /// The most a packet waits: the rate rises so that the queue drains within it.
    static let maxQueueNs: Int64 = PacingBudget.maxQueueNs
    let capacity: Int

    /// `deliver` takes a queued packet's sequence number and sends it (from the pacing thread).
    init(
        capacity: Int, maxPacket: Int, clock: any SenderClock = MonotonicClock(), loop: PacerLoop = .shared,
        deliver: @escaping @Sendable (UInt16) -> Void
    ) {
        self.capacity = capacity
        self.deliver = deliver
        self.clock = clock
        self.loop = loop
        controller = PacingController(capacity: capacity, maxPacket: maxPacket)
        loop.add(self)
    }

    /// The pacing rate in bit/s (0: unpaced, every packet at once).
    func setRate(_ bps: Int) {
        loop.condition.lock()
        controller.rateBps = bps
        loop.condition.unlock()
    }

    /// Queues media packet `sequence` of `bytes`; false when it must be sent now (unpaced, or the queue is full).
    func enqueue(_ sequence: UInt16, bytes: Int) -> Bool {
        loop.condition.lock()
        defer { loop.condition.unlock() }
        let now = clock.nowNs
        guard !stopped else {
            controller.sent(bytes, nowNs: now)
            return false
        }
        guard controller.enqueue(sequence, bytes: bytes, nowNs: now) else { return false }
        if controller.count == 1 { loop.wake() } // it may be resting: nothing was queued anywhere
        return true
    }

    /// Bytes sent outside the queue (retransmissions, probes, unpaced packets): the queued packets wait for them.
    func sent(_ bytes: Int) {
        loop.condition.lock()
        controller.sent(bytes, nowNs: clock.nowNs)
        loop.condition.unlock()
    }

    /// Forgets every queued packet (a key frame follows that makes them useless); returns how many.
    func dropQueued() -> Int {
        loop.condition.lock()
        defer { loop.condition.unlock() }
        return controller.dropQueued()
    }

    /// Packets waiting.
    var queued: Int {
        loop.condition.lock()
        defer { loop.condition.unlock() }
        return controller.count
    }

    /// Leaves the loop; packets still queued are sent at once, here (a stopping stream loses nothing it had
    /// encoded). After it returns, no packet of this pacer is delivered any more. Idempotent.
    func stop() {
        loop.remove(self)
        loop.condition.lock()
        while controller.count > 0 {
            let sequence = controller.pop()
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
package final class PacerLoop: @unchecked Sendable {
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
    /// Whether the loop runs a thread (false: its owner calls `service()`).
    private let threaded: Bool

    /// A loop whose thread starts with its first pacer; `threaded: false` makes one that its owner drives.
    package init(threaded: Bool = true) { self.threaded = threaded }

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
        if threaded, thread == nil { thread = WorkerThread(name: "rtp-pacer") { [self] _ in run() } }
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
            let waitNs = pass()
            if woken { continue }
            if let waitNs {
                _ = condition.wait(until: MonotonicClock.deadline(afterNs: min(waitNs + 200_000, 50_000_000)))
            } else {
                condition.wait() // nothing queued anywhere: rest until a packet is
            }
        }
        thread = nil // the last pacer left; the next starts a new thread
    }

    /// One round over the pacers, under the lock: sends every packet whose budget allows it now (each on its pacer's
    /// clock); returns the nanoseconds until the earliest next one may leave (nil: nothing queued).
    private func pass() -> Int64? {
        var waitNs: Int64? = nil
        var i = 0
        while i < members.count {
            let p = members[i]
            let (packet, wait) = p.controller.next(nowNs: p.clock.nowNs)
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
        return waitNs
    }

    /// For a loop made without a thread (`init(threaded: false)`, the link-simulation tests): one round over its
    /// pacers on their clocks, as the thread makes it; the nanoseconds until the next packet may leave (nil:
    /// nothing queued).
    package func service() -> Int64? {
        condition.lock()
        defer { condition.unlock() }
        return pass()
    }
}
