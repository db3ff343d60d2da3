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
    /// Releases the encoder; safe to call more than once.
    func close()
}

extension H264Encoder: VideoEncoder {}
