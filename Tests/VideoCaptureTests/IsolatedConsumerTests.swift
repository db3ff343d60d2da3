import Foundation
import Testing
import VideoCapture
import FixtureCameras

// An actor and a @MainActor class consume frames with no lock of their own: they iterate `frames()` (a Sendable
// `AsyncSequence` whose iterator runs in the caller's isolation), so their state stays isolated. This file compiles
// in the Swift 6 language mode, which is the proof that nothing here races; the tests check that the frames arrive.

/// Frames counted on an actor.
actor CountingActor {
    private(set) var sequences: [UInt64] = []
    private(set) var timestamps: [Int64] = []

    func consume(_ frames: VideoFrameStream, count: Int) async throws {
        for try await frame in frames {
            assertIsolated("the loop runs on the actor") // traps (in a debug build) if not
            sequences.append(frame.sequence)
            timestamps.append(frame.timestampNs)
            if sequences.count == count { return }
        }
    }
}

/// Frames counted on the main actor (a view model, say).
@MainActor final class CountingModel {
    private(set) var sequences: [UInt64] = []
    private(set) var timestamps: [Int64] = []

    func consume(_ frames: VideoFrameStream, count: Int) async throws {
        for try await frame in frames {
            MainActor.assertIsolated("the loop runs on the main actor") // traps (in a debug build) if not
            sequences.append(frame.sequence)
            timestamps.append(frame.timestampNs)
            if sequences.count == count { return }
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct IsolatedConsumerTests {
    static let count = 60

    /// Strictly increasing, as the capturer promises.
    func increasing<T: Comparable>(_ values: [T]) -> Bool { zip(values, values.dropFirst()).allSatisfy { $0 < $1 } }

    /// Each test runs on a thread of its own (the actor's jobs follow the task's executor preference): in the
    /// parallel suite, synchronous tests beside it can hold every thread of the cooperative pool (two on a
    /// two-core box) for minutes; CI saw the actor stop at frame 30 for the 60 s limit. As HummingbirdWHEPTests.
    func onOwnThread(_ name: String, _ body: () async throws -> Void) async throws {
        let executor = DedicatedTaskExecutor(name: name)
        defer { executor.shutdown() }
        try await withTaskExecutorPreference(executor) { try await body() }
    }

    @Test func anActorAndAMainActorClassEachCountEveryFrame() async throws {
        try await onOwnThread("isolated-consumers") { try await actorAndMainActorCountEveryFrame() }
    }

    func actorAndMainActorCountEveryFrame() async throws {
        // As fast as consumed and nothing discarded: both consumers see every frame, from the first.
        let capturer = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(maxPendingFrames: 2, alwaysDiscardsLateFrames: false))
        let counter = CountingActor()
        let model = CountingModel()
        let forActor = capturer.frames(), forModel = capturer.frames() // before the start: from the first frame
        _ = try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180))
        async let counted: Void = counter.consume(forActor, count: Self.count)
        try await model.consume(forModel, count: Self.count)
        try await counted
        try await capturer.stopCapture()

        let (actorSequences, actorTimestamps) = (await counter.sequences, await counter.timestamps)
        #expect(actorSequences == (0..<UInt64(Self.count)).map { $0 }, "the actor got every frame in order")
        #expect(increasing(actorTimestamps))
        let (modelSequences, modelTimestamps) = await (model.sequences, model.timestamps)
        #expect(modelSequences == (0..<UInt64(Self.count)).map { $0 }, "the main actor got every frame in order")
        #expect(increasing(modelTimestamps) && modelTimestamps == actorTimestamps)
    }

    @Test func aRealTimeCameraFeedsAnActorUntilItStops() async throws {
        try await onOwnThread("real-time-consumer") { try await realTimeCameraFeedsAnActor() }
    }

    func realTimeCameraFeedsAnActor() async throws {
        // Real-time pacing (30 fps): the actor's loop ends when capture stops, having counted what arrived.
        let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
        let counter = CountingActor()
        let frames = capturer.frames(bufferingNewest: 4)
        _ = try await capturer.startCapture(
            device: try capturer.device("fixture:uvc-webcam"), targetSize: FrameSize(width: 640, height: 360), fpsLimit: 30)
        let consuming = Task { try await counter.consume(frames, count: .max) }
        while await counter.sequences.count < 10 { try await Task.sleep(for: .milliseconds(5)) }
        try await capturer.stopCapture()
        try await consuming.value // the sequence ended (nil) at the stop
        let sequences = await counter.sequences, timestamps = await counter.timestamps
        #expect(sequences.count >= 10 && increasing(sequences) && increasing(timestamps))
        // 30 fps: consecutive frames about 33 ms apart on the camera's clock.
        let gaps = zip(timestamps, timestamps.dropFirst()).map { Double($1 - $0) / 1e6 }
        #expect(gaps.allSatisfy { $0 >= 30 }, "\(gaps)")
    }
}
