import Foundation
import Synchronization
import Testing
import VideoCapture
import H264

/// The encoder on its own thread: the same bitstream as encoding in turn, in order, errors carried back.
@Suite(.timeLimit(.minutes(2))) struct EncoderThreadTests {
    let source = PatternSource(width: 320, height: 240, count: 12, noise: 3)

    func settings() -> H264Encoder.Settings {
        var s = H264Encoder.Settings(width: 320, height: 240)
        s.targetBitrate = 300_000
        s.keyFrameInterval = 20
        return s
    }

    @Test func theThreadWritesTheSameBitstreamInOrder() throws {
        // In turn, on this thread.
        let inline = try H264Encoder(settings: settings())
        var out = EncodedFrame()
        var expected: [([UInt8], Int64)] = []
        for i in 0..<50 {
            try inline.encode(source[i], timestampNs: Int64(i) * 33_333_333, into: &out)
            if !out.isSkipped { expected.append((out.data, out.timestampNs)) }
        }
        // The same pictures through the thread: every frame, byte for byte, in submission order.
        let got = Mutex<[([UInt8], Int64)]>([]), rotations = Mutex<[Int]>([])
        let callerThread = Mutex<Bool>(false)
        let me = pthread_self()
        let thread = EncoderThread(encoder: try H264Encoder(settings: settings())) { frame in
            if pthread_equal(pthread_self(), me) != 0 { callerThread.withLock { $0 = true } }
            got.withLock { $0.append((frame.data, frame.timestampNs)) }
            rotations.withLock { $0.append(frame.rotation.degrees) }
        }
        // Each frame's rotation (for the receiver to apply) is carried to its encoded frame.
        let turns: [VideoRotation] = [.rotation0, .rotation90, .rotation180, .rotation270]
        for i in 0..<50 { try thread.submit(source[i], timestampNs: Int64(i) * 33_333_333, rotation: turns[i % 4]) }
        try thread.finish()
        #expect(rotations.withLock { $0 } == (0..<50).map { turns[$0 % 4].degrees })
        let frames = got.withLock { $0 }
        #expect(frames.count == expected.count && expected.count == 50)
        #expect(frames.map(\.1) == expected.map(\.1), "capture times in order")
        #expect(frames.map(\.0) == expected.map(\.0), "byte-identical access units")
        #expect(!callerThread.withLock { $0 }, "output runs on the encoder's thread")
        #expect(thread.control.statistics.frames == 50 && thread.control.statistics.keyFrames == 3)
    }

    @Test func afterFinishTheControlHasTheEncodersFinalStatistics() throws {
        // The encoder was handed over (`sending`): its counters come back through the control, final once the
        // thread has ended, even when nothing was encoded (before, they stayed zero until a frame was published).
        let idle = EncoderThread(encoder: try H264Encoder(settings: settings())) { _ in }
        try idle.finish()
        #expect(idle.control.statistics.size == FrameSize(width: 320, height: 240) && idle.control.statistics.targetBitrate == 300_000)
        #expect(idle.control.statistics.frames == 0)

        let busy = EncoderThread(encoder: try H264Encoder(settings: settings())) { _ in }
        for i in 0..<18 { try busy.submit(source[i], timestampNs: Int64(i) * 33_333_333) }
        try busy.finish()
        let s = busy.control.statistics
        #expect(s.frames == 18 && s.keyFrames == 1 && s.encodeP50Ms > 0 && s.encodeP95Ms >= s.encodeP50Ms)
        // The thread has closed the encoder: nothing more is taken.
        #expect(throws: H264Error.self) { try busy.submit(source[0], timestampNs: 18 * 33_333_333) }
    }

    @Test func anOutputErrorStopsTheEncodingAndIsThrownToTheCaller() throws {
        struct DiskFull: Error {}
        let written = Mutex(0)
        let thread = EncoderThread(encoder: try H264Encoder(settings: settings())) { _ in
            let n = written.withLock {
                $0 += 1
                return $0
            }
            if n == 5 { throw DiskFull() }
        }
        var thrownAt: Int?
        for i in 0..<40 {
            do { try thread.submit(source[i], timestampNs: Int64(i) * 33_333_333) } catch is DiskFull {
                thrownAt = i
                break
            }
        }
        #expect(thrownAt != nil && thrownAt! >= 5, "a later submit throws the output's error (at \(String(describing: thrownAt)))")
        #expect(throws: DiskFull.self) { try thread.finish() }
        #expect(written.withLock { $0 } == 5, "nothing is written after the failure")
    }

    @Test func anEncodeErrorIsThrown() throws {
        let thread = EncoderThread(encoder: try H264Encoder(settings: settings())) { _ in }
        try thread.submit(source[0], timestampNs: 0)
        // An odd size cannot be encoded: the thread's encode fails, and the caller hears of it.
        let odd = I420Buffer(width: 33, height: 17)
        try? thread.submit(odd, timestampNs: 33_333_333)
        #expect(throws: H264Error.self) { try thread.finish() }
        #expect(throws: H264Error.self) { try thread.submit(source[1], timestampNs: 66_666_666) }
    }

    @Test func releasedWithoutFinishItStillEncodesWhatWasSubmittedAndEnds() async throws {
        let written = Mutex(0)
        let done = Mutex(false)
        final class Flag: @unchecked Sendable {
            let onDeinit: @Sendable () -> Void
            init(_ f: @escaping @Sendable () -> Void) { onDeinit = f }
            deinit { onDeinit() }
        }
        do {
            let flag = Flag { done.withLock { $0 = true } }
            let thread = EncoderThread(encoder: try H264Encoder(settings: settings())) { _ in
                withExtendedLifetime(flag) { written.withLock { $0 += 1 } }
            }
            for i in 0..<3 { try thread.submit(source[i], timestampNs: Int64(i) * 33_333_333) }
        }
        // The thread ends by itself and lets go of the output closure (and what it captured): wait for that event.
        while !done.withLock({ $0 }) { await Task.yield() }
        #expect(written.withLock { $0 } == 3)
    }
}
