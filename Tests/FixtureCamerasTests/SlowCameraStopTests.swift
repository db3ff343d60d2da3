import Foundation
import Testing
import TestSupport
import VideoCapture
import FixtureCameras

/// #53: a fixture camera slower than 1 fps stops when asked, not at its next frame (it slept until then: Ctrl-C
/// was ignored for up to a period). A 0.1 fps camera's stop must return well inside its 10 s period.
@Test(.timeLimit(.minutes(1))) func aCameraSlowerThanOneFrameASecondStopsWhenAsked() async throws {
    let dir = scratchDirectory("slow-camera")
    let path = dir + "/slow.txt"
    try """
    ioctl: VIDIOC_ENUM_FMT
    \tType: Video Capture

    \t[0]: 'YUYV' (YUYV 4:2:2)
    \t\tSize: Discrete 320x240
    \t\t\tInterval: Discrete 10.000s (0.100 fps)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    let capturer = CameraVideoCapturer(providers: [FixtureCameraProvider()])
    let frames = capturer.frames()
    let applied = try await capturer.startCapture(device: try capturer.device(path), targetSize: FrameSize(width: 320, height: 240))
    #expect(applied.fps == Fraction(1, 10), "\(applied)")
    var it = frames.makeAsyncIterator()
    #expect(try await it.next() != nil, "the first frame comes at once")
    let asked = monotonicNanoseconds()
    try await capturer.stopCapture()
    let ms = (monotonicNanoseconds() - asked) / 1_000_000
    #expect(ms < 5_000, "stopped \(ms) ms after it was asked, with the next frame due 10 s after the first")
}
