import CV4L2
public import H264
public import VideoCapture
#if canImport(Glibc)
    import Glibc
#endif

// The zero-copy path of `V4L2M2MEncoder` (#51): a camera's exported buffer (`VideoFrameBuffer.dmaBuf`) queued to
// the OUTPUT queue as `V4L2_MEMORY_DMABUF`, held until the device gives it back; the drain at the end of a run, the
// summary's description and H.264's NAL units.
extension V4L2M2MEncoder {
    /// The raw formats a camera's buffer may be imported in: `YU12` and `NV12`, one memory plane each.
    public static let importableFormats: [PixelFormat] = [.i420, .nv12]

    static func checkImportable(_ format: PixelFormat, path: String) throws(CaptureError) {
        guard importableFormats.contains(format) else {
            throw CaptureError(.unsupportedFormat, "\(path): camera buffers are imported in YU12 or NV12, not \(format)", device: path)
        }
    }

    /// Why `buffer` cannot be queued to this encoder as it is, or nil when it can: it must be an exported camera
    /// buffer (`dmaBuf`) in the encoder's raw format, at its size and line stride, with its payload at the start of
    /// the buffer and one descriptor per memory plane of the encoder's, each large enough.
    public func importRefusal(_ buffer: VideoFrameBuffer) -> String? {
        guard imports != nil else { return "the encoder copies pictures in (it was not made for DMA-BUF import)" }
        guard let dma = buffer.dmaBuf else { return "the frame carries no DMA-BUF (the camera did not export it, or it was copied out)" }
        guard buffer.pixelFormat == rawFormat else { return "the frame is \(buffer.pixelFormat), the encoder takes \(rawFormat)" }
        guard buffer.width == settings.width, buffer.height == settings.height else {
            return "the frame is \(buffer.width)x\(buffer.height), the encoder \(settings.width)x\(settings.height)"
        }
        guard buffer.stride == raw.planes[0].stride else {
            return "the frame's lines are \(buffer.stride) bytes, the encoder's \(raw.planes[0].stride)"
        }
        guard buffer.offset == 0 else { return "the frame's payload starts \(buffer.offset) bytes into its buffer" }
        guard dma.planes.count == raw.planes.count else {
            return "the frame has \(dma.planes.count) memory plane(s), the encoder's queue \(raw.planes.count)"
        }
        for (p, need) in importedBytes.enumerated() where dma.planes[p].length < need {
            return "the frame's plane \(p) is \(dma.planes[p].length) bytes, the encoder needs \(need)"
        }
        return nil
    }

    /// The bytes used of each imported plane: the whole image on a one-plane queue, each plane's otherwise.
    private var importedBytes: [Int] { raw.planes.count == 1 ? [raw.sizeImage] : raw.planes.map(\.needed) }

    /// The camera buffer of `frame` an import queues: the frame's own when it is the camera's exported buffer (a
    /// `YU12` camera's picture needs no conversion), else the one its picture was converted from
    /// (`VideoFrame.capturedBuffer`: an `NV12` camera's).
    public static func importedBuffer(of frame: VideoFrame) -> VideoFrameBuffer {
        frame.buffer.dmaBuf == nil ? frame.capturedBuffer ?? frame.buffer : frame.buffer
    }

    /// Queues the camera's buffer of `frame` (`importedBuffer(of:)`, see `importRefusal(_:)`) on the OUTPUT queue
    /// with its timestamp, with no copy. The caller keeps `frame` (so the camera does not reuse its buffer) until
    /// the device gives the slot back: `encode(_:frame:into:)` does.
    public func submit(importing frame: VideoFrame) throws(CaptureError) -> Int {
        guard !closed, !drained else { throw CaptureError(.notRunning, "\(path): the encoder is closed or drained", device: path) }
        let buffer = V4L2M2MEncoder.importedBuffer(of: frame)
        if let why = importRefusal(buffer) {
            throw CaptureError(.unsupportedFormat, "\(path): cannot import the frame at \(frame.timestampNs) ns: \(why)", device: path)
        }
        guard let imports, let dma = buffer.dmaBuf else { throw CaptureError(.invalidArgument, "\(path): no DMA-BUF", device: path) }
        try applyRequests()
        let deadline = monotonicNanoseconds() + Int64(timeoutMs) * 1_000_000
        var slot = imports.freeSlot(for: dma.planes[0].fd)
        while slot == nil {
            reclaimOutputs()
            slot = imports.freeSlot(for: dma.planes[0].fd)
            if slot == nil {
                guard monotonicNanoseconds() < deadline else {
                    throw CaptureError(
                        .timeout, "\(path): no OUTPUT slot came back within \(timeoutMs) ms", device: path, operation: "VIDIOC_DQBUF")
                }
                _ = node.io.kernel.poll(node.fd, timeoutMs: 10)
            }
        }
        let i = slot!
        let ts = timeval(tv_sec: Int(frame.timestampNs / 1_000_000_000), tv_usec: Int(frame.timestampNs % 1_000_000_000 / 1000))
        if let e = imports.queue(i, dma, bytesUsed: importedBytes, timestamp: ts) {
            throw node.io.error(e, "VIDIOC_QBUF of DMA-BUF fd \(dma.planes[0].fd) to OUTPUT slot \(i)", phase: .streaming)
        }
        inFlight += 1
        stats.importedFrames += 1
        return i
    }

    /// Waits until the device has given back OUTPUT slot `i` (the camera's buffer may then be reused).
    func waitForSlot(_ i: Int) throws(CaptureError) {
        guard let imports else { return }
        let deadline = monotonicNanoseconds() + Int64(timeoutMs) * 1_000_000
        while imports.queued[i] {
            switch imports.dequeue() {
            case .success: continue
            case .failure(let e) where e.rawValue == EAGAIN:
                guard monotonicNanoseconds() < deadline else {
                    throw CaptureError(
                        .timeout, "\(path): the camera buffer in OUTPUT slot \(i) did not come back within \(timeoutMs) ms", device: path,
                        operation: "VIDIOC_DQBUF")
                }
                _ = node.io.kernel.poll(node.fd, timeoutMs: 10)
            case .failure(let e):
                throw node.io.error(e, "VIDIOC_DQBUF of an OUTPUT slot", phase: .streaming)
            }
        }
    }

    /// The encode stage's call: with DMA-BUF import, `frame`'s camera buffer is queued as it is (no copy), its coded
    /// frame taken into `out`, and the call returns once the device has given the buffer back (the camera can reuse
    /// it); otherwise `picture` is copied in (`encode(_:timestampNs:into:)`).
    public func encode(_ picture: I420Buffer, frame: VideoFrame, into out: inout EncodedFrame) throws {
        guard imports != nil else { return try encode(picture, timestampNs: frame.timestampNs, into: &out) }
        let slot = try submitOrRefuse(frame)
        _ = try receive(into: &out)
        try waitForSlot(slot)
        withExtendedLifetime(frame) {} // the camera's buffer stays ours until the device has given it back
    }

    /// `submit(importing:)`, with a frame the device cannot take as it is (its format or size, or memory refused at
    /// `VIDIOC_QBUF`) thrown as `ImportRefusedError`: nothing of it reached the device, so copying it in would work.
    private func submitOrRefuse(_ frame: VideoFrame) throws -> Int {
        switch Result(catching: { () throws(CaptureError) -> Int in try submit(importing: frame) }) {
        case .success(let slot): return slot
        case .failure(let error):
            let refusedAtQueue = error.operation?.hasPrefix("VIDIOC_QBUF of DMA-BUF") == true && error.code != .disconnected
            if error.code == .unsupportedFormat || refusedAtQueue { throw ImportRefusedError(error.message) }
            throw error
        }
    }

    /// The drain (`drain(_:)`), at the end of a run.
    public func finish(_ body: (EncodedFrame) throws -> Void) throws { try drain(body) }

    /// "V4L2 M2M /dev/video4 (FWHT), zero-copy (DMA-BUF): 0 copies per frame", or "…, copied: 1 copy per frame".
    public var summaryDescription: String? { "V4L2 M2M \(path) (\(codedFormat)), \(copyDescription)" }

    /// Which path the pictures took: "zero-copy (DMA-BUF): 0 copies per frame (N imported)" or "copied: 1 copy per
    /// frame (N copied)".
    public var copyDescription: String {
        copiedFrames == 0 && importedFrames > 0
            ? "zero-copy (DMA-BUF): 0 copies per frame (\(importedFrames) imported)"
            : "copied: 1 copy per frame (\(copiedFrames) copied\(importedFrames > 0 ? ", \(importedFrames) imported" : ""))"
    }
}
