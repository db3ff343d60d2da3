import Foundation
import SystemIO

/// The capturer's delivery thread: a short queue of events consumed in order on one dedicated thread.
/// At most `capacity` frames wait; a new frame beyond that evicts the oldest waiting frame (newest wins),
/// or, with `discardsLate == false`, the producer waits for room.
final class DeliveryQueue: @unchecked Sendable {
    // @unchecked: every stored property is guarded by `condition` (an NSCondition used as the mutex).
    enum Event: Sendable {
        case frame(VideoFrame)
        case dropped(FrameDropReason, Int)
        case stopped(CaptureError?)
    }

    private let condition = NSCondition()
    private var events: [Event] = []
    private var framesQueued = 0
    private var busy = false
    private var shuttingDown = false
    private let capacity: Int
    private let discardsLate: Bool

    init(capacity: Int, discardsLate: Bool) {
        self.capacity = capacity
        self.discardsLate = discardsLate
        events.reserveCapacity(capacity + 16)
    }

    /// Starts the delivery thread. The thread holds the queue only while it runs (the queue does not keep the
    /// thread): after `shutdown()` it ends and both are freed, with no retain cycle.
    func start(_ handler: @escaping @Sendable (Event) -> Void) {
        // Not kept: the thread ends after `shutdown()` and is detached when this object lets it go.
        _ = WorkerThread(name: "video-capture.delivery") { [self] _ in
            while true {
                condition.lock()
                while events.isEmpty && !shuttingDown { condition.wait() }
                if events.isEmpty && shuttingDown {
                    condition.unlock()
                    return
                }
                let e = events.removeFirst()
                if case .frame = e { framesQueued -= 1 }
                busy = true
                condition.broadcast()
                condition.unlock()
                handler(e)
                condition.lock()
                busy = false
                condition.broadcast()
                condition.unlock()
            }
        }
    }

    /// Queues an event; for a frame, returns how many older frames it evicted.
    @discardableResult
    func enqueue(_ event: Event) -> Int? {
        var event = event
        condition.lock()
        defer { condition.unlock() }
        guard !shuttingDown else { return nil }
        var evicted = 0
        if case .frame = event {
            if discardsLate {
                while framesQueued >= capacity, let i = events.firstIndex(where: { if case .frame = $0 { true } else { false } }) {
                    // A dropped first frame of a start or switch passes its mark on to the newest frame.
                    if case .frame(let old) = events.remove(at: i), old.isDiscontinuity, case .frame(var new) = event {
                        new.isDiscontinuity = true
                        event = .frame(new)
                    }
                    framesQueued -= 1
                    evicted += 1
                }
            } else {
                while framesQueued >= capacity && !shuttingDown { condition.wait() }
            }
            framesQueued += 1
        }
        events.append(event)
        condition.broadcast()
        return evicted
    }

    /// Waits until every queued event has been handled.
    func drain() async {
        await offThread { [self] in
            condition.lock()
            while (!events.isEmpty || busy) && !shuttingDown { condition.wait() }
            condition.unlock()
        }
    }

    /// Ends the thread; events not yet handled are dropped at once (their frames released now, not later).
    func shutdown() {
        condition.lock()
        shuttingDown = true
        let dropped = events
        events.removeAll()
        framesQueued = 0
        condition.broadcast()
        condition.unlock()
        _ = dropped // released here, outside the lock (a frame's last release may unmap a driver buffer)
    }
}
