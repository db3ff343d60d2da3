import Foundation
import Synchronization
import Testing
@testable import VideoCapture
import FixtureCameras

@Suite(.serialized, .timeLimit(.minutes(1)))
struct CapturerTests {
    @Test func startStopRestartDeliversFrames() async throws {
        let capturer = makeCapturer()
        let rec = Recorder()
        capturer.addDelegate(rec)
        let device = try capturer.device("fixture:vivid")
        let applied = try await capturer.startCapture(device: device, targetSize: FrameSize(width: 320, height: 180), fpsLimit: 60)
        #expect(
            applied
                == AppliedFormat(
                    pixelFormat: .i420, size: FrameSize(width: 320, height: 180), stride: 320, fps: Fraction(60), colorSpace: .webcam))
        #expect(await rec.wait { $0.frames.count >= 10 })
        #expect(rec.frames.allSatisfy { $0.colorSpace == .webcam }, "every frame carries the stream's colour description")
        try await capturer.stopCapture()
        #expect(rec.stops.count == 1 && rec.stops[0] == nil)
        // stopCapture returns after the delivery queue drained: every delivered frame has been seen, no more come.
        let n = rec.frames.count
        #expect(n == capturer.statistics.delivered, "no frames after stop")
        // Restart on the same capturer.
        try await capturer.startCapture(device: device, targetSize: FrameSize(width: 640, height: 480))
        #expect(await rec.wait { $0.frames.count >= n + 5 })
        #expect(rec.frames.last?.width == 640)
        try await capturer.stopCapture()
    }

    @Test func captureThreadDeliveryCallsDelegatesOnTheCamerasThreadInOrder() async throws {
        // `.captureThread`: the delegate runs on the camera's own thread (not the delivery thread), every frame in
        // order, and a frame stream still gets them; the stop callback still comes once, after the last frame.
        let capturer = CameraVideoCapturer(
            providers: [FixtureCameraProvider(options: .init(pacing: .asFastAsConsumed))],
            configuration: .init(maxPendingFrames: 1, alwaysDiscardsLateFrames: false, delivery: .captureThread))
        final class ThreadNames: CameraVideoCapturerDelegate, @unchecked Sendable {
            let names = Mutex<[String]>([])
            func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame) {
                // The calling thread's name, as the kernel keeps it (a test may read a file per frame).
                let name =
                    (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
                names.withLock { $0.append(name) }
            }
        }
        let threads = ThreadNames()
        let rec = Recorder()
        capturer.addDelegate(threads)
        capturer.addDelegate(rec)
        let stream = capturer.frames(bufferingNewest: 2)
        // Consumed meanwhile: frames held in the stream's buffer would hold the camera's buffers.
        let streamed = Task {
            var n = 0
            for try await _ in stream { n += 1 }
            return n
        }
        let device = try capturer.device("fixture:vivid")
        try await capturer.startCapture(device: device, targetSize: FrameSize(width: 320, height: 180))
        #expect(await rec.wait { $0.frames.count >= 20 })
        try await capturer.stopCapture()
        let names = threads.names.withLock { $0 }
        #expect(!names.isEmpty && Set(names) == ["fixture-camera"], "the camera's thread, never the delivery thread: \(Set(names))")
        let seqs = rec.frames.map(\.sequence)
        #expect(seqs == Array(seqs.indices).map(UInt64.init), "every frame, in order")
        #expect(rec.stops.count == 1 && rec.stops[0] == nil)
        #expect(try await streamed.value > 0)
    }

    @Test func lifecycleErrorsAreTyped() async throws {
        let capturer = makeCapturer()
        let device = try capturer.device("fixture:uvc-webcam")
        await #expect(throws: CaptureError.self) { try await capturer.stopCapture() }
        do { try await capturer.stopCapture() } catch { #expect(error.code == .notRunning) }
        try await capturer.startCapture(device: device, targetSize: FrameSize(width: 640, height: 480))
        do {
            try await capturer.startCapture(device: device, targetSize: FrameSize(width: 640, height: 480))
            Issue.record("second start succeeded")
        } catch { #expect(error.code == .alreadyRunning) }
        try await capturer.stopCapture()
        do {
            _ = try capturer.device("fixture:nope")
            Issue.record("unknown device accepted")
        } catch {
            #expect(error.code == .unknownDevice)
            #expect(error.message.contains("uvc-webcam"))
        }
        do {
            _ = try capturer.device("/tmp/definitely-not-here.json")
            Issue.record("missing file accepted")
        } catch { #expect(error.code == .unknownDevice) }
        // A format the device does not offer.
        let notOffered = CaptureFormat(pixelFormat: .nv12, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
        do {
            try await capturer.startCapture(device: device, format: notOffered, size: FrameSize(width: 640, height: 480), fps: Fraction(30))
            Issue.record("accepted")
        } catch {
            #expect(error.code == .unsupportedFormat)
            #expect(error.message.contains("NV12"))
        }
        let wrongSize = CaptureFormat(pixelFormat: .yuyv, size: .discrete(FrameSize(width: 640, height: 480)), intervals: nil)
        do {
            try await capturer.startCapture(device: device, format: wrongSize, size: FrameSize(width: 641, height: 480), fps: Fraction(30))
            Issue.record("accepted")
        } catch { #expect(error.code == .unsupportedFormat) }
        #expect(!capturer.isRunning)
    }

    @Test func invalidFixtureFileIsATypedError() {
        let path = tempFile(
            "broken.json", "{\"name\": \"x\", \"formats\": [{\"pixelFormat\": \"YUYV\", \"sizes\": [{\"width\": 0, \"height\": 1}]}]}")
        do {
            _ = try makeCapturer().device(path)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .invalidFixture)
            #expect(error.message.contains(path + ":1"))
        }
    }

    @Test func manyDelegatesAndTheAsyncSequenceSeeTheSameFrames() async throws {
        let capturer = makeCapturer(.init(pacing: .asFastAsConsumed), discardsLate: false, pending: 4)
        let delegates = (0..<3).map { _ in Recorder() }
        delegates.forEach(capturer.addDelegate)
        let stream = capturer.frames()
        try await capturer.startCapture(device: try capturer.device("fixture:macbook-m1"), targetSize: FrameSize(width: 640, height: 480))
        var seen: [UInt64] = []
        for try await f in stream {
            seen.append(f.sequence)
            if seen.count == 20 { break }
        }
        try await capturer.stopCapture()
        #expect(seen == Array(0..<20))
        for d in delegates {
            #expect(Array(d.frames.map(\.sequence).prefix(20)) == Array(0..<20))
        }
    }

    @Test func theAsyncSequenceFinishesWhenCaptureStops() async throws {
        let capturer = makeCapturer()
        let stream = capturer.frames(bufferingNewest: 4)
        try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180), fpsLimit: 60)
        var it = stream.makeAsyncIterator()
        #expect(try await it.next() != nil)
        try await capturer.stopCapture()
        var n = 1
        while try await it.next() != nil { n += 1 } // the buffered frames, then nil (a clean stop: no error)
        #expect(n >= 1 && n <= 5)
    }

    @Test func slowConsumersMakeTheNewestFramesWin() async throws {
        let capturer = makeCapturer() // real-time pacing, 1 pending frame
        let slow = Recorder(gated: true) // blocks in its first callback until opened
        capturer.addDelegate(slow)
        try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180), fpsLimit: 60)
        // While the consumer is stuck on frame 0, the camera goes on: wait for 20 more frames to be captured.
        #expect(await slow.wait { _ in capturer.statistics.captured >= 21 })
        slow.open()
        #expect(await slow.wait { $0.frames.count >= 2 })
        try await capturer.stopCapture()
        let stats = capturer.statistics
        let delivered = slow.frames.count
        let dropped = stats.dropped[.consumerBusy, default: 0]
        // Frame 0 was being delivered, one newer frame waited; every frame in between was dropped and counted.
        #expect(dropped >= 19, "captured \(stats.captured), delivered \(delivered), dropped \(dropped)")
        #expect(stats.captured - delivered - dropped >= 0 && stats.captured - delivered - dropped <= 1)
        #expect(slow.drops[.consumerBusy, default: 0] == stats.dropped[.consumerBusy, default: 0])
        // The newest frames win: delivered sequence numbers jump.
        let seqs = slow.frames.map(\.sequence)
        #expect(seqs.first == 0 && seqs.dropFirst().first.map { $0 >= 20 } == true, "\(seqs.prefix(4))")
    }

    @Test func switchingDevicesKeepsConsumersAndTimestampsIncreasing() async throws {
        let capturer = makeCapturer()
        let rec = Recorder()
        capturer.addDelegate(rec)
        let back = try capturer.device("fixture:iphone"), front = try capturer.device("fixture:iphone-front")
        #expect(capturer.device(at: .front)?.path == "fixture:iphone-front")
        try await capturer.startCapture(device: back, targetSize: FrameSize(width: 640, height: 480))
        #expect(await rec.wait { $0.frames.count >= 5 })
        let applied = try await capturer.switchDevice(to: front, targetSize: FrameSize(width: 352, height: 288))
        #expect(applied.size == FrameSize(width: 352, height: 288))
        #expect(await rec.wait { $0.frames.contains { $0.width == 352 } && $0.frames.filter { $0.width == 352 }.count >= 5 })
        try await capturer.stopCapture()
        let frames = rec.frames
        #expect(frames.first?.rotation == .rotation90) // back camera
        #expect(frames.last?.rotation == .rotation270) // front camera
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0.timestampNs < $1.timestampNs })
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        // The first frame of the start and the first of the switch, and only those, are discontinuities.
        let marks = frames.indices.filter { frames[$0].isDiscontinuity }
        let firstFront = frames.firstIndex { $0.width == 352 }
        #expect(marks == [0, firstFront].compactMap { $0 }, "\(marks) vs first front frame \(String(describing: firstFront))")
        #expect(capturer.currentDevice == nil)
    }

    @Test func fastPacingAdvancesTimestampsByExactlyOnePeriod() async throws {
        let capturer = makeCapturer(.init(pacing: .asFastAsConsumed), discardsLate: false, pending: 4)
        let stream = capturer.frames()
        try await capturer.startCapture(device: try capturer.device("fixture:uvc-webcam"), targetSize: FrameSize(width: 640, height: 480))
        var ts: [Int64] = []
        for try await f in stream {
            ts.append(f.timestampNs)
            if ts.count == 90 { break }
        }
        try await capturer.stopCapture()
        for (i, t) in ts.enumerated() { #expect(t - ts[0] == Int64(i) * 1_000_000_000 / 30) }
    }

    @Test func realTimePacingRunsAtTheNegotiatedRate() async throws {
        let capturer = makeCapturer()
        let rec = Recorder()
        capturer.addDelegate(rec)
        try await capturer.startCapture(device: try capturer.device("fixture:uvc-webcam"), targetSize: FrameSize(width: 640, height: 480))
        let started = monotonicNanoseconds()
        #expect(await rec.wait { $0.frames.count >= 31 })
        let elapsed = monotonicNanoseconds() - started
        try await capturer.stopCapture()
        let f = rec.frames
        // Stamped when due: whole periods apart (one, or more where a loaded machine made a frame drop: a late
        // frame is dropped, its timestamp is never shifted)…
        for i in 1...30 {
            let d = f[i].timestampNs - f[i - 1].timestampNs, k = (d + 16_666_666) / 33_333_333
            #expect(k >= 1 && abs(d * 3 - k * 100_000_000) <= 3, "frames \(i - 1)→\(i): \(d) ns")
        }
        // …and never faster than real time (load can only make it slower: a lower bound cannot flake).
        #expect(elapsed >= 29 * 1_000_000_000 / 30, "31 frames in \(elapsed / 1_000_000) ms")
    }

    @Test func disconnectStopsCaptureWithATypedError() async throws {
        let capturer = makeCapturer(.init(disconnectAfterFrames: 5))
        let rec = Recorder()
        capturer.addDelegate(rec)
        let stream = capturer.frames(bufferingNewest: 10)
        try await capturer.startCapture(device: try capturer.device("fixture:vivid"), targetSize: FrameSize(width: 320, height: 180), fpsLimit: 60)
        var n = 0
        do {
            for try await _ in stream { n += 1 }
            Issue.record("the sequence ended without the error")
        } catch {
            #expect(error.code == .disconnected) // the sequence ends by throwing what stopped capture
        }
        #expect(n <= 5)
        #expect(await rec.wait { !$0.stops.isEmpty })
        #expect(rec.stops.first??.code == .disconnected)
        #expect(!capturer.isRunning)
        do {
            try await capturer.stopCapture()
            Issue.record("stop after disconnect succeeded")
        } catch { #expect(error.code == .notRunning) }
    }
}
