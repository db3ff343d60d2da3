import Foundation
import Synchronization
import Testing
import TestSupport
import VideoCapture
import FixtureCameras

/// #53: a fixture camera slower than 1 fps stops when asked, not at its next frame (it slept until then: Ctrl-C
/// was ignored for up to a period). A 0.1 fps camera's stop must return well inside its 10 s period. The stream is
/// driven directly and stopped on this thread (no task to wait for: a loaded test run's cooperative pool would
/// stretch an `await` more than the camera did).
@Test(.timeLimit(.minutes(1))) func aCameraSlowerThanOneFrameASecondStopsWhenAsked() throws {
    let dir = scratchDirectory("slow-camera")
    let path = dir + "/slow.txt"
    try """
    ioctl: VIDIOC_ENUM_FMT
    \tType: Video Capture

    \t[0]: 'YUYV' (YUYV 4:2:2)
    \t\tSize: Discrete 320x240
    \t\t\tInterval: Discrete 10.000s (0.100 fps)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    let provider = FixtureCameraProvider()
    let device = try #require(try provider.device(for: path))
    let frames = Mutex(0)
    let sink = FrameSink(frame: { _ in frames.withLock { $0 += 1 } }, dropped: { _, _ in }, failed: { _ in }, copied: {})
    let stream = try provider.openStream(
        device: device, request: StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 320, height: 240), fps: Fraction(1, 10)), sink: sink)
    #expect(waitUntil(timeout: 30, every: 0.005) { frames.withLock { $0 } == 1 }, "the first frame comes at once")
    let asked = monotonicNanoseconds()
    stream.stop()
    let ms = (monotonicNanoseconds() - asked) / 1_000_000
    #expect(ms < 5_000, "stopped \(ms) ms after it was asked, with the next frame due 10 s after the first")
    #expect(frames.withLock { $0 } == 1)
}
