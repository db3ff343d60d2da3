import FixtureCameras
import Synchronization
import Testing
@testable import VideoCapture
@testable import VideoProcessing

/// The fixture cameras with every frame marked as exported (a DMA-BUF descriptor of its own per frame), as a V4L2
/// camera started with `exportDMABuf` delivers them: what a zero-copy consumer (a hardware encoder) imports.
struct ExportingProvider: CaptureDeviceProvider {
    let inner = FixtureCameraProvider()
    func devices() -> [CaptureDevice] { inner.devices() }
    func device(for spec: String) throws(CaptureError) -> CaptureDevice? { try inner.device(for: spec) }
    func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] { try inner.formats(of: device) }
    func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        let exporting = FrameSink(
            frame: { frame in
                var f = frame
                f.buffer.dmaBuf = DMABuf(planes: [DMABuf.Plane(fd: Int32(100 + frame.sequence % 8), length: frame.buffer.storage.capacity)])
                sink.frame(f)
            }, dropped: sink.dropped, failed: sink.failed, copied: sink.copied)
        return try inner.openStream(device: device, request: request, sink: exporting)
    }
}

@Suite("the camera's exported buffer beside a converted picture (NV12 zero copy)")
struct CapturedBufferTests {
    /// What a sink saw of each frame: the picture's format and size, the camera buffer beside it (format, fd).
    final class Seen: Sendable {
        let frames = Mutex<[(picture: PixelFormat, size: FrameSize, captured: PixelFormat?, fd: Int32?)]>([])
        func add(_ f: VideoFrame) {
            let c = f.capturedBuffer
            frames.withLock {
                $0.append((f.buffer.pixelFormat, f.buffer.size, c?.pixelFormat, c?.dmaBuf?.planes.first?.fd))
            }
        }
        var all: [(picture: PixelFormat, size: FrameSize, captured: PixelFormat?, fd: Int32?)] { frames.withLock { $0 } }
    }

    func run(_ format: PixelFormat, options: VideoSource.Options = .init(), wants: VideoSinkWants? = nil) async throws -> [(
        picture: PixelFormat, size: FrameSize, captured: PixelFormat?, fd: Int32?
    )] {
        let cap = CameraVideoCapturer(providers: [ExportingProvider()])
        let source = VideoSource(capturer: cap, options: options)
        let seen = Seen()
        if let wants { source.addSink(wants: wants) { seen.add($0) } } else { source.addSink { seen.add($0) } }
        let dev = try cap.device("fixture:continuous")
        _ = try await cap.startCapture(
            device: dev, format: try #require(cap.supportedFormats(for: dev).first { $0.pixelFormat == format }),
            size: FrameSize(width: 640, height: 480), fps: Fraction(30))
        #expect(await waitUntil(timeout: 20) { seen.all.count >= 5 })
        try await cap.stopCapture()
        source.detach()
        return seen.all
    }

    @Test("an NV12 camera's I420 picture carries the camera's exported buffer (format only: same size)")
    func nv12CarriesTheCameraBuffer() async throws {
        let nv12 = try await run(.nv12)
        #expect(nv12.count >= 5)
        for f in nv12 {
            #expect(f.picture == .i420 && f.size == FrameSize(width: 640, height: 480))
            #expect(f.captured == .nv12 && f.fd != nil && (100..<108).contains(f.fd!), "the exported camera buffer rides beside the picture")
        }
    }

    @Test("a scaled, rotated or mirrored picture carries no camera buffer (it is not the camera's picture)")
    func geometryDropsIt() async throws {
        for f in try await run(.nv12, options: .init(rotation: .rotation90)) {
            #expect(f.captured == nil && f.size == FrameSize(width: 480, height: 640))
        }
        for f in try await run(.nv12, options: .init(mirror: true)) { #expect(f.captured == nil) }
        for f in try await run(.nv12, wants: VideoSinkWants(maxSize: FrameSize(width: 320, height: 240))) {
            #expect(f.captured == nil && f.size == FrameSize(width: 320, height: 240))
        }
    }
}
