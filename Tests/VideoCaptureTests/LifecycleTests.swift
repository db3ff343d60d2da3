import Foundation
import Logging
import Synchronization
import Testing
@testable import VideoCapture
import FixtureCameras

/// A provider whose streams cost nothing and are counted: how many are open right now, how many ever.
final class CountingProvider: CaptureDeviceProvider {
    let open = Atomic<Int>(0)
    let opened = Atomic<Int>(0)
    final class Stream: CaptureStream, @unchecked Sendable {
        // @unchecked: `stopped` is a Mutex; the rest is immutable.
        let applied: AppliedFormat
        private let provider: CountingProvider
        private let stopped = Mutex(false)
        init(_ applied: AppliedFormat, _ provider: CountingProvider) {
            self.applied = applied
            self.provider = provider
        }
        func stop() {
            let first = stopped.withLock { s -> Bool in
                defer { s = true }
                return !s
            }
            if first { provider.open.subtract(1, ordering: .relaxed) }
        }
    }
    func devices() -> [CaptureDevice] { ["count:a", "count:b"].map { CaptureDevice(uniqueID: $0, name: $0, path: $0) } }
    func device(for spec: String) throws(CaptureError) -> CaptureDevice? { devices().first { $0.path == spec } }
    func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        [CaptureFormat(pixelFormat: .i420, size: .discrete(FrameSize(width: 64, height: 64)), intervals: .discrete([Fraction(1, 30)]))]
    }
    func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        open.add(1, ordering: .relaxed)
        opened.add(1, ordering: .relaxed)
        return Stream(AppliedFormat(pixelFormat: request.pixelFormat, size: request.size, stride: 64, fps: request.fps), self)
    }
}

/// Counts frames without being held by the test (to prove the capturer holds it).
final class CountingDelegate: CameraVideoCapturerDelegate {
    let frames: Counter
    init(_ counter: Counter) { frames = counter }
    func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame) { frames.value.add(1, ordering: .relaxed) }
}
final class Counter: Sendable { let value = Atomic<Int>(0) }

@Suite(.serialized, .timeLimit(.minutes(2)))
struct LifecycleTests {
    @Test func stopRacingSwitchNeverLeavesAZombieStream() async throws {
        let provider = CountingProvider()
        let capturer = CameraVideoCapturer(providers: [provider])
        let a = try capturer.device("count:a"), b = try capturer.device("count:b")
        let size = FrameSize(width: 64, height: 64)
        for i in 0..<1000 {
            try await capturer.startCapture(device: a, targetSize: size)
            async let switched: AppliedFormat? = try? capturer.switchDevice(to: b, targetSize: size)
            async let stopped: Void? = try? capturer.stopCapture()
            let (_, stop): (AppliedFormat?, Void?) = await (switched, stopped)
            // The stop started after the capture did, so it succeeds, and whatever the interleaving it wins:
            // nothing is running and no stream is left open.
            #expect(stop != nil)
            let zombie = capturer.isRunning || provider.open.load(ordering: .relaxed) != 0
            #expect(!zombie, "iteration \(i): running \(capturer.isRunning), open streams \(provider.open.load(ordering: .relaxed))")
            if zombie { break }
        }
        #expect(!capturer.isRunning)
        #expect(provider.opened.load(ordering: .relaxed) >= 1000)
    }

    @Test func theDefaultLoggerIsSilent() {
        let capturer = CameraVideoCapturer(providers: [])
        #expect(capturer.loggerForTesting.handler is SwiftLogNoOpLogHandler)
    }

    @Test func aDelegateNobodyElseHoldsStillReceivesFramesUntilRemoved() async throws {
        let capturer = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(maxPendingFrames: 2, alwaysDiscardsLateFrames: false))
        let counter = Counter()
        weak var weakDelegate: CountingDelegate?
        do {
            let d = CountingDelegate(counter)
            weakDelegate = d
            capturer.addDelegate(d) // the only strong reference is the capturer's
        }
        #expect(weakDelegate != nil, "held by the capturer")
        let stream = capturer.frames()
        try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180))
        var n = 0
        for try await _ in stream {
            n += 1
            if n == 10 { break }
        }
        try await capturer.stopCapture()
        #expect(counter.value.load(ordering: .relaxed) >= 10)
        capturer.removeDelegate(try #require(weakDelegate))
        #expect(weakDelegate == nil, "released by removeDelegate")
    }

    @Test func aStreamMadeBeforeTheStartGetsTheFirstFrameAndLateOnesAreCounted() async throws {
        let capturer = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(maxPendingFrames: 2, alwaysDiscardsLateFrames: false))
        let stream = capturer.frames()
        try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180))
        var it = stream.makeAsyncIterator()
        #expect(try await it.next()?.sequence == 0, "nothing is lost between the start and the subscription")
        try await capturer.stopCapture()
        // Frames with no consumer at all are counted as such, never silently lost.
        let lonely = CameraVideoCapturer(providers: [FixtureCameraProvider()])
        try await lonely.startCapture(device: try lonely.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180), fpsLimit: 60)
        let late = lonely.frames()
        var lit = late.makeAsyncIterator()
        let first = try await lit.next()
        try await lonely.stopCapture()
        let stats = lonely.statistics
        #expect(Int(first?.sequence ?? 0) == stats.dropped[.noConsumer, default: 0], "frames before the subscription: \(stats)")
    }

    @Test func releasingACapturerFreesItAndEndsItsStreams() async throws {
        weak var weakCapturer: CameraVideoCapturer?
        var it: VideoFrameStream.Iterator
        do {
            let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
            weakCapturer = capturer
            it = capturer.frames().makeAsyncIterator()
            try await capturer.startCapture(
                device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180), fpsLimit: 60)
            #expect(try await it.next() != nil)
        }
        // No retain cycle (delivery thread, streams) keeps it alive, and its streams end.
        while try await it.next() != nil {}
        #expect(weakCapturer == nil)
    }
}

/// One stream iterated by two tasks at once (#38: it compiled, the type being `Sendable`, and then one task waited
/// forever, also after `stopCapture()` and cancellation): the process stops with a message naming the misuse,
/// as `AsyncStream` does, instead of hanging.
@Test func oneStreamAwaitedByTwoTasksStopsWithAMessage() async throws {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))])
        let stream = capturer.frames()
        // Both tasks wait before the first frame: the second one's next() is the misuse.
        let first = Task { for try await _ in stream {} }
        let second = Task { for try await _ in stream {} }
        try? await Task.sleep(for: .seconds(30)) // never reached: the second await stops the process
        first.cancel()
        second.cancel()
    }
    let err = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(err.contains("VideoFrameStream: next() awaited from two tasks at once"), "\(err.suffix(500))")
}

/// Two consumers, each with its own stream, both get every frame (late frames kept: the rings grow).
@Test func twoStreamsEachGetEveryFrame() async throws {
    let capturer = CameraVideoCapturer(
        providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))], configuration: .init(alwaysDiscardsLateFrames: false))
    let a = capturer.frames(), b = capturer.frames()
    try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180))
    @Sendable func take(_ s: VideoFrameStream) async throws -> [UInt64] {
        var seen: [UInt64] = []
        for try await f in s {
            seen.append(f.sequence)
            if seen.count == 10 { break }
        }
        return seen
    }
    async let sa = take(a)
    async let sb = take(b)
    let (x, y) = try await (sa, sb)
    try await capturer.stopCapture()
    #expect(x == Array(0..<10) && y == Array(0..<10), "\(x) \(y)")
}
