import VideoCapture
import VideoProcessing
import H264

/// The encoder inside a fixture camera that delivers H.264 (as a UVC H.264 camera or a camera module with an
/// encoder does): real OpenH264 access units of the test pattern, one key frame a second, written the way such
/// cameras deliver them: Annex-B, SPS and PPS only before the first IDR (later IDRs come without them), and the
/// buffer's payload padded with zero bytes after the access unit (`bytesused` covering them), as drivers do.
final class FixtureH264Writer {
    private let encoder: H264Encoder
    private var out = EncodedFrame()
    private var sentParameterSets = false
    /// Zero bytes after each access unit.
    static let padding = 128
    /// Bytes a frame buffer needs: a raw picture's worth (an IDR of noise stays below it) and the padding.
    let capacity: Int

    private let repeatsParameterSets: Bool

    init(width: Int, height: Int, fps: Fraction, colorSpace: VideoColorSpace, stream: FixtureCameraProvider.H264Stream = .uvc) throws(H264Error) {
        var s = H264Encoder.Settings(width: width, height: height)
        s.maxFrameRate = min(240, max(1, fps.doubleValue))
        s.targetBitrate = min(20_000_000, max(200_000, width * height * 2))
        s.keyFrameInterval = stream.keyFrameInterval ?? max(1, Int(s.maxFrameRate.rounded()))
        repeatsParameterSets = stream.repeatsParameterSets
        s.colorSpace = colorSpace
        encoder = try H264Encoder(settings: s)
        capacity = width * height * 3 / 2 + 4096 + Self.padding
    }

    /// Asks the next access unit to be an IDR (the camera's "force key frame" control).
    func requestKeyFrame() { encoder.control.requestKeyFrame() }

    /// Sets the encoder's target bitrate (the camera's `V4L2_CID_MPEG_VIDEO_BITRATE`), bits per second.
    func requestBitrate(_ bitsPerSecond: Int) { try? encoder.control.setBitrate(bitsPerSecond) }

    /// Encodes `picture` into `storage`; returns the bytes used (padding included) and whether it is a key frame.
    /// (`timestampNs` is the frame's time from the stream's start: OpenH264's rate control spreads its budget
    /// over real time; nanosecond steps make it overflow its buffers.)
    func write(_ picture: I420Buffer, timestampNs: Int64, into storage: FrameStorage) throws -> (used: Int, key: Bool) {
        try encoder.encode(picture, timestampNs: timestampNs, into: &out)
        let base = storage.mutableBaseAddress
        var used = 0
        let startCode: [UInt8] = [0, 0, 0, 1]
        try out.data.withUnsafeBytes { (data: UnsafeRawBufferPointer) throws in
            for u in out.nalUnits {
                if (u.type == .sps || u.type == .pps) && sentParameterSets { continue }
                guard used + 4 + u.length + Self.padding <= capacity else {
                    throw H264Error(.encoderFailed, "fixture H.264 frame of more than \(capacity) bytes")
                }
                startCode.withUnsafeBytes { (base + used).copyMemory(from: $0.baseAddress!, byteCount: 4) }
                (base + used + 4).copyMemory(from: data.baseAddress! + u.offset, byteCount: u.length)
                used += 4 + u.length
            }
        }
        if out.isKeyFrame && !repeatsParameterSets { sentParameterSets = true }
        (base + used).initializeMemory(as: UInt8.self, repeating: 0, count: Self.padding)
        return (used + Self.padding, out.isKeyFrame)
    }
}
