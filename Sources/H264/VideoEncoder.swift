public import VideoCapture

/// An encoder the encode stage can run: OpenH264 (`H264Encoder`) or another backend, such as a V4L2
/// memory-to-memory encoder.
///
/// The stage makes one for the first picture (with its size in `settings`), feeds it one I420 picture at a time
/// on one thread, and closes it at the end. Requests from other threads (a key frame, a bitrate) reach it through
/// its `control`, taken before its next frame where the backend can honour them; its counters are published
/// there too.
///
/// ```swift
/// import H264
/// import VideoCapture
///
/// func encodeOne(_ encoder: any VideoEncoder, _ picture: I420Buffer) throws -> Int {
///     var out = EncodedFrame()
///     try encoder.encode(picture, timestampNs: 0, into: &out)
///     return out.isSkipped ? 0 : out.size
/// }
/// ```
public protocol VideoEncoder: AnyObject {
    /// The settings in force: those the encoder was made with, with the size of the last frame encoded. Fields a
    /// backend has no use for (slices, threads for a hardware encoder) are kept as given.
    var settings: H264Encoder.Settings { get }
    /// Key frames and rates from any thread, and the counters as of the last encoded frame.
    var control: EncoderControl { get }
    /// Counters as of the last encoded frame (on the encoding thread).
    var statistics: EncoderStatistics { get }
    /// Encodes `picture` into `out` (its storage reused), with `timestampNs` carried through. A backend that
    /// holds frames (a hardware queue) may give an earlier picture's bytes, with that picture's timestamp, or
    /// none (`out.isSkipped`) until it has one.
    func encode(_ picture: I420Buffer, timestampNs: Int64, into out: inout EncodedFrame) throws
    /// Encodes `picture`, the converted form of the camera's `frame` (its timestamp carried through). A backend that
    /// can take the camera's own buffer (a V4L2 memory-to-memory encoder importing `frame.buffer.dmaBuf`) does so,
    /// and holds `frame` until the device has finished with it; the default encodes `picture`.
    func encode(_ picture: I420Buffer, frame: VideoFrame, into out: inout EncodedFrame) throws
    /// At the end of a run: hands every frame the encoder still holds to `body`, in order (a hardware encoder's
    /// drain). The default has none.
    func finish(_ body: (EncodedFrame) throws -> Void) throws
    /// What the summary says of this encoder: its backend, device and path (zero-copy or copied); nil for OpenH264,
    /// the default, which the summary does not name.
    var summaryDescription: String? { get }
    /// Releases the encoder; safe to call more than once.
    func close()
}

/// Thrown by an encoder that imports the camera's buffers when it cannot take one (another format or size, memory the
/// device refuses at `VIDIOC_QBUF`), before anything of the frame reached the device: the same encoder copying the
/// picture in would work. `ResilientEncoder` then switches to its copying factory, which is not a failure.
public struct ImportRefusedError: Error, Sendable, CustomStringConvertible {
    /// Why, naming the device and the buffer.
    public let reason: String
    /// A refusal for `reason`.
    public init(_ reason: String) { self.reason = reason }
    /// `reason`.
    public var description: String { reason }
}

extension VideoEncoder {
    /// Encodes `picture` with the frame's timestamp.
    public func encode(_ picture: I420Buffer, frame: VideoFrame, into out: inout EncodedFrame) throws {
        try encode(picture, timestampNs: frame.timestampNs, into: &out)
    }
    /// Nothing is held: nothing to hand over.
    public func finish(_ body: (EncodedFrame) throws -> Void) throws {}
    /// nil: the default encoder is not named.
    public var summaryDescription: String? { nil }
}

extension H264Encoder: VideoEncoder {}
