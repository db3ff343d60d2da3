import Foundation
import Testing
@testable import VideoCapture
import FixtureCameras
@_exported import MediaTestSupport

/// Collects what a capturer delivers.
final class Recorder: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: all state behind `lock`.
    private let lock = NSLock()
    private var _frames: [VideoFrame] = []
    private var _drops: [FrameDropReason: Int] = [:]
    private var _stops: [CaptureError?] = []
    let delayNs: UInt32
    let keepFrames: Bool
    private let gate: DispatchSemaphore?
    /// `gated`: the first frame callback blocks until `open()` (a consumer stuck on a frame).
    init(delayMs: UInt32 = 0, keepFrames: Bool = false, gated: Bool = false) {
        delayNs = delayMs * 1000
        self.keepFrames = keepFrames
        gate = gated ? DispatchSemaphore(value: 0) : nil
    }
    func open() { gate?.signal() }

    func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame) {
        if let gate, lock.withLock({ _frames.isEmpty }) {
            gate.wait()
            gate.signal()
        }
        // Keep metadata only (a copy of the struct keeps the buffer; drop pixels unless asked).
        var kept = frame
        if !keepFrames {
            kept.buffer = VideoFrameBuffer(
                pixelFormat: frame.buffer.pixelFormat, width: frame.width, height: frame.height, stride: frame.buffer.stride, bytesUsed: 0,
                storage: Recorder.empty)
        }
        lock.withLock { _frames.append(kept) }
        if delayNs > 0 { usleep(delayNs) }
    }
    func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason) {
        lock.withLock { _drops[reason, default: 0] += count }
    }
    func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?) {
        lock.withLock { _stops.append(error) }
    }
    var frames: [VideoFrame] { lock.withLock { _frames } }
    var drops: [FrameDropReason: Int] { lock.withLock { _drops } }
    var stops: [CaptureError?] { lock.withLock { _stops } }
    static let empty = FrameStorage(capacity: 1)

    /// Waits (polling) until `condition` holds or `timeout` seconds pass.
    func wait(timeout: Double = 10, _ condition: (Recorder) -> Bool) async -> Bool {
        await waitUntil(timeout: timeout) { condition(self) }
    }
}

func makeCapturer(_ options: FixtureCameraProvider.Options = .init(), discardsLate: Bool = true, pending: Int = 1) -> CameraVideoCapturer {
    CameraVideoCapturer(
        providers: [FixtureCameraProvider(options: options)],
        configuration: .init(maxPendingFrames: pending, alwaysDiscardsLateFrames: discardsLate))
}
