// Issue 48: an HDMI receiver (a DV-timings input) through the fake kernel: formats at the detected size, the timings
// locked before the format, a source-change event ending the stream with `.sourceChanged`, and no signal refused
// by name. The VM checks the same on vivid's HDMI input.
import CV4L2
import Foundation
import Testing
import TestSupport
import VideoCapture
@testable import V4L2Capture

@Suite(.serialized, .timeLimit(.minutes(1))) struct SourceChangeTests {
    private func provider(_ k: FakeKernel) throws -> (V4L2DeviceProvider, CaptureDevice) {
        let dev = fakeDev()
        let provider = V4L2DeviceProvider(kernel: k, devDirectory: dev, configuration: fakeStreamConfig)
        return (provider, try #require(try provider.device(for: dev + "/video0")))
    }

    @Test func aReceiverListsEveryFormatAtItsDetectedSizeAndRateOnly() throws {
        let k = FakeKernel()
        k.configure { $0.receiver = (1280, 720) }
        let (provider, device) = try provider(k)
        let formats = try provider.formats(of: device)
        #expect(!formats.isEmpty)
        #expect(formats.allSatisfy { $0.size == .discrete(FrameSize(width: 1280, height: 720)) }, "\(formats.map(\.size))")
        #expect(formats.allSatisfy { $0.intervals == .discrete([Fraction(1, 60)]) }, "1650 x 750 at 74.25 MHz is 60 fps: \(formats)")
        #expect(Set(formats.map(\.pixelFormat)).count == formats.count, "one entry per pixel format")
        // A camera (no DV timings) keeps its own list.
        let camera = FakeKernel()
        let (p2, d2) = try self.provider(camera)
        #expect(try p2.formats(of: d2).contains { $0.size == .discrete(FrameSize(width: 320, height: 240)) })
    }

    @Test func aStreamLocksTheDetectedTimingsAndEndsWithSourceChangedOnTheEvent() throws {
        let k = FakeKernel()
        k.configure { $0.receiver = (1280, 720) }
        let (provider, device) = try provider(k)
        let s = Sink()
        let stream = try provider.openStream(
            device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 1280, height: 720), fps: Fraction(60)), sink: s.sink)
        defer { stream.stop() }
        #expect(k.configure { _ in } == () && k.timingsSet == ["1280x720"])
        let log = k.callLog
        let lockAt = try #require(log.firstIndex(of: "S_DV_TIMINGS")), formatAt = try #require(log.firstIndex(of: "S_FMT"))
        #expect(lockAt < formatAt, "the timings are locked before the format: \(log)")
        #expect(log.contains("SUBSCRIBE_EVENT \(CV4L2_EVENT_SOURCE_CHANGE)"))
        k.push([goodFrame(), goodFrame(), .sourceChange, goodFrame()])
        #expect(s.wait { $0.error != nil }, "the event ends the stream")
        #expect(s.lock.withLock { s.error?.code } == .sourceChanged)
        #expect(s.lock.withLock { s.error?.message.contains("changed (V4L2_EVENT_SOURCE_CHANGE)") } == true)
        #expect(s.lock.withLock { s.seen.count } == 2, "the frames before the change were delivered")
        #expect(k.waitForCalls("close"), "the device is released")
    }

    @Test func aReceiverWithoutSignalIsRefusedAsNoSignal() throws {
        let k = FakeKernel()
        k.configure { $0.receiver = .some(nil) }
        let (provider, device) = try provider(k)
        #expect {
            _ = try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 640, height: 480), fps: Fraction(30)),
                sink: Sink().sink)
        } throws: { error in
            guard let e = error as? CaptureError else { return false }
            return e.code == .noSignal && e.message.contains("detects no signal on its input (VIDIOC_QUERY_DV_TIMINGS)") && e.errno == ENOLINK
        }
        #expect(k.openCount == 0, "nothing left open")
        // With no signal, the formats are the camera's list as the driver gives it (no size to follow).
        #expect(try !provider.formats(of: device).isEmpty)
    }
}
