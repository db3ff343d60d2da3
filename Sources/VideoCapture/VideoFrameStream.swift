import Synchronization
import Dispatch

/// The capturer's frames as an `AsyncSequence` that ends by **throwing** the `CaptureError` when capture fails
/// (an unplugged camera, an I/O error) and returns nil after `stopCapture()`.
///
/// A stream may be made before `startCapture`: it then receives the first frame of the next start (nothing is
/// lost between the start and the subscription). It ends at the first stop after it was made. Each stream
/// buffers the newest `bufferingNewest` frames in a fixed ring (no allocation per frame); a frame that pushes
/// out an older one is counted in `CaptureStatistics.dropped[.consumerBusy]`. When every copy of the stream and
/// its iterators is gone, the subscription ends by itself.
///
/// A stream has **one consumer**: two tasks awaiting its frames at once is a programming error that stops the
/// process with a message (as `AsyncStream` does); each consumer makes its own stream with `frames()` and gets
/// every frame.
public struct VideoFrameStream: AsyncSequence, Sendable {
    public typealias Element = VideoFrame
    public typealias Failure = CaptureError
    let handle: FrameSubscription.Handle
    package init(handle: FrameSubscription.Handle) { self.handle = handle }

    public func makeAsyncIterator() -> Iterator { Iterator(handle: handle) }

    /// Takes frames from the stream's buffer; use one iterator per stream, from one task at a time. Awaiting
    /// `next()` from a second task while another waits stops the process with a message naming the misuse (as
    /// `AsyncStream` does) instead of leaving one of the tasks waiting forever.
    public struct Iterator: AsyncIteratorProtocol {
        /// The frames.
        public typealias Element = VideoFrame
        public typealias Failure = CaptureError
        let handle: FrameSubscription.Handle

        public mutating func next() async throws(CaptureError) -> VideoFrame? {
            try await handle.subscription.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(CaptureError) -> VideoFrame? {
            try await handle.subscription.next()
        }
    }
}

/// One consumer's bounded queue of frames between the delivery thread and an async iterator.
package final class FrameSubscription: Sendable {
    /// Owned by the consumer's sequence: when the last copy goes, the subscription is removed from the capturer.
    package final class Handle: Sendable {
        let subscription: FrameSubscription
        let onRelease: @Sendable () -> Void
        package init(_ s: FrameSubscription, onRelease: @escaping @Sendable () -> Void) {
            subscription = s
            self.onRelease = onRelease
        }
        deinit {
            subscription.finish(nil)
            onRelease()
        }
    }

    private enum End { case stopped, failed(CaptureError) }
    private struct State {
        var ring: Ring<VideoFrame>
        var end: End?
        var waiter: UnsafeContinuation<Result<VideoFrame?, CaptureError>, Never>?
        /// A producer waits for room (`.waitsForRoom`).
        var producerWaiting = false
    }

    /// What `yield` does when the ring is full.
    package enum WhenFull: Sendable {
        /// The oldest frame makes room (real time: the newest frames matter).
        case dropOldest
        /// The ring doubles (offline processing that must lose nothing, with a producer that paces itself).
        case grow
        /// The producer waits until the consumer takes a frame (back-pressure: frames as fast as consumed,
        /// none lost, a bounded queue).
        case waitForRoom
    }

    package let id: UInt64
    private let whenFull: WhenFull
    private let state: Mutex<State>
    /// Signalled when a waiting producer may find room (a frame taken, the stream ended).
    private let room = DispatchSemaphore(value: 0)

    package init(id: UInt64, capacity: Int, whenFull: WhenFull) {
        self.id = id
        self.whenFull = whenFull
        state = Mutex(State(ring: Ring(capacity: capacity)))
    }

    package convenience init(id: UInt64, capacity: Int, growable: Bool) {
        self.init(id: id, capacity: capacity, whenFull: growable ? .grow : .dropOldest)
    }

    /// Queues a frame; returns how many older frames it pushed out (0 or 1). Ignored after the end. With
    /// `.waitForRoom` it blocks the calling thread while the ring is full (until a frame is taken or the end).
    package func yield(_ frame: VideoFrame) -> Int {
        while true {
            var full = false
            let dropped = push(frame, full: &full)
            if !full { return dropped }
            room.wait()
        }
    }

    private func push(_ frame: VideoFrame, full: inout Bool) -> Int {
        var resume: UnsafeContinuation<Result<VideoFrame?, CaptureError>, Never>?
        let dropped = state.withLock { [whenFull] s -> Int in
            guard s.end == nil else { return 0 }
            if let w = s.waiter {
                s.waiter = nil
                resume = w
                return 0
            }
            var dropped = 0
            if s.ring.isFull {
                switch whenFull {
                case .waitForRoom:
                    s.producerWaiting = true
                    full = true
                    return 0
                case .grow: break // the ring doubles (rare: only while the consumer is behind)
                case .dropOldest:
                    _ = s.ring.popFirst()
                    dropped = 1
                }
            }
            s.ring.append(frame)
            return dropped
        }
        resume?.resume(returning: .success(frame))
        return dropped
    }

    /// Ends the stream: after the queued frames, the iterator returns nil (`error == nil`) or throws.
    package func finish(_ error: CaptureError?) {
        let waiter = state.withLock { s -> UnsafeContinuation<Result<VideoFrame?, CaptureError>, Never>? in
            guard s.end == nil else { return nil }
            s.end = error.map { .failed($0) } ?? .stopped
            let w = s.waiter
            s.waiter = nil
            return w
        }
        room.signal() // a producer waiting for room returns (the frame is ignored after the end)
        waiter?.resume(returning: error.map { .failure($0) } ?? .success(nil))
    }

    private func take(_ s: inout State) -> Result<VideoFrame?, CaptureError>? {
        if let f = s.ring.popFirst() {
            if s.producerWaiting {
                s.producerWaiting = false
                room.signal()
            }
            return .success(f)
        }
        switch s.end {
        case .stopped: return .success(nil)
        case .failed(let e):
            s.end = .stopped // thrown once; later calls return nil
            return .failure(e)
        case nil: return nil
        }
    }

    func next() async throws(CaptureError) -> VideoFrame? {
        if let ready = state.withLock({ take(&$0) }) { return try ready.get() }
        let result = await withTaskCancellationHandler {
            await withUnsafeContinuation { (c: UnsafeContinuation<Result<VideoFrame?, CaptureError>, Never>) in
                let ready = state.withLock { s -> Result<VideoFrame?, CaptureError>? in
                    if let r = take(&s) { return r }
                    if Task.isCancelled { return .success(nil) }
                    if s.waiter != nil {
                        // A second task would take the first one's place and leave it waiting forever: stop here
                        // with the reason, as AsyncStream does, rather than hang both.
                        fatalError(
                            "VideoFrameStream: next() awaited from two tasks at once; a stream has one consumer. "
                                + "Make one stream per consumer (capturer.frames()), or share the frames from one task.")
                    }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            let w = state.withLock { s -> UnsafeContinuation<Result<VideoFrame?, CaptureError>, Never>? in
                let w = s.waiter
                s.waiter = nil
                return w
            }
            w?.resume(returning: .success(nil))
        }
        return try result.get()
    }
}
