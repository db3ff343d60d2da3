public import VideoCapture
import Foundation
import SystemIO

/// An `H264Encoder` (or any `VideoEncoder`) on a thread of its own, for throughput: the caller converts picture N+1 while picture N
/// encodes, so a two-core machine does the conversion (an MJPEG decode, a YUYV repack) and the encoding at
/// the same time. One picture waits at most: `submit` returns as soon as the thread has room, and blocks only
/// while one picture is encoding **and** another is already waiting. Encoded frames go to `output` on the
/// encoder thread, in order.
///
/// Use it where throughput matters (offline processing, a fast fixture camera, 1080p MJPEG on a small box).
/// For real-time capture of small sizes the plain `H264Encoder` on the consumer's thread has the shorter
/// latency (no hand-off); the thread buys nothing when conversion is a few percent of the encode.
///
/// Memory: the pictures stay referenced until encoded, so a converter's pool needs three buffers (the one being
/// converted, the waiting one, the encoding one); `FrameConverter`'s pools hold four. No allocation per frame.
///
/// The compiler holds both sides to this: the encoder is handed over (`sending`: the caller cannot use it
/// afterwards), and `output` is `@Sendable` (it runs on the encoder thread, so it cannot capture main-actor
/// state or a non-Sendable object the caller still uses).
public final class EncoderThread: Sendable {
    /// Receives each encoded frame (skipped frames are not passed), in order, on the encoder thread. The frame's
    /// storage is reused for the next one: copy what must outlive the call. An error thrown here stops the
    /// encoding and is rethrown by the next `submit(_:timestampNs:)` or by `finish()`.
    public typealias Output = @Sendable (_ frame: EncodedFrame) throws -> Void
    private let core: Core

    /// Starts the thread and hands it `encoder`: from now on only the thread uses it (`sending`: using it after
    /// this call does not compile), and closes it when it ends. Its `control` stays usable from any thread
    /// (key-frame requests and rates are taken before the next picture); after `finish()` its statistics are
    /// the encoder's final ones, percentiles over every frame included.
    public init(encoder: sending some VideoEncoder, name: String = "h264-encoder", output: @escaping Output) {
        core = Core(encoder: encoder, output: output)
        // The thread holds the core, not this object: releasing it ends the thread (which is then detached).
        _ = WorkerThread(name: name) { [core] _ in core.run() }
    }

    /// Key frames and rates from any thread, and the encoder's statistics.
    public var control: EncoderControl { core.control }

    /// Hands a picture to the encoder thread. Waits only while another picture is already waiting. Throws the
    /// first error the thread met (an encode failure, or an error thrown by `output`): from then on nothing more
    /// is encoded. `rotation` (the frame's, for a receiver to apply) is carried into its `EncodedFrame`.
    public func submit(_ picture: I420Buffer, timestampNs: Int64, rotation: VideoRotation = .rotation0) throws {
        try core.submit(picture, timestampNs, rotation)
    }

    /// Waits until every submitted picture is encoded and written, then ends the thread. Throws the first error
    /// the thread met. Safe to call more than once.
    public func finish() throws { try core.finish() }

    /// The encoder's `summaryDescription` as it ended (a hardware encoder's copies and imports counted); nil until
    /// `finish()` has returned, and for OpenH264.
    public var summaryDescription: String? { core.finalDescription }

    /// Released without `finish`: the pictures already submitted are still encoded, then the thread ends.
    deinit { core.end() }

    private final class Core: @unchecked Sendable {
        // @unchecked: every var is guarded by `condition`; `encoder` and `frame` are used by the encoder thread only.
        private let condition = NSCondition()
        private var waiting: (picture: I420Buffer, timestampNs: Int64, rotation: VideoRotation)?
        private var ending = false
        private var ended = false
        private var failure: Error?
        private let encoder: any VideoEncoder
        private let output: Output
        private var frame = EncodedFrame()
        let control: EncoderControl
        /// Set by the thread as it ends, read after `finish()` (which waited for it under `condition`).
        var finalDescription: String? { condition.withLock { description } }
        private var description: String?

        init(encoder: sending any VideoEncoder, output: @escaping Output) {
            self.encoder = encoder
            self.output = output
            control = encoder.control
        }

        func submit(_ picture: I420Buffer, _ timestampNs: Int64, _ rotation: VideoRotation) throws {
            condition.lock()
            defer { condition.unlock() }
            while waiting != nil && failure == nil && !ended { condition.wait() }
            if let failure { throw failure }
            guard !ended, !ending else { throw H264Error("the encoder thread has finished") }
            waiting = (picture, timestampNs, rotation)
            condition.broadcast()
        }

        func finish() throws {
            condition.lock()
            ending = true
            condition.broadcast()
            while !ended { condition.wait() }
            let failure = self.failure
            condition.unlock()
            if let failure { throw failure }
        }

        func end() {
            condition.lock()
            ending = true
            condition.broadcast()
            condition.unlock()
        }

        func run() {
            while true {
                condition.lock()
                while waiting == nil && !ending { condition.wait() }
                guard let job = waiting else {
                    // The frames a hardware encoder still holds (its drain), written like the others unless the
                    // thread failed; then the final counters (exact percentiles) for `control.statistics`, and the
                    // encoder's description, and the encoder is freed.
                    if failure == nil {
                        condition.unlock()
                        do { try encoder.finish { try output($0) } } catch { condition.withLock { if failure == nil { failure = error } } }
                        condition.lock()
                    }
                    let final = encoder.statistics
                    control.publish { $0 = final }
                    description = encoder.summaryDescription
                    encoder.close()
                    ended = true
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                waiting = nil
                condition.broadcast() // room for the next picture while this one encodes
                let failed = failure != nil
                condition.unlock()
                guard !failed else { continue }
                do {
                    try encoder.encode(job.picture, timestampNs: job.timestampNs, into: &frame)
                    frame.rotation = job.rotation
                    if !frame.isSkipped { try output(frame) }
                } catch {
                    condition.withLock { if failure == nil { failure = error } }
                }
            }
        }
    }
}
