public import H264
import Recording

/// A file of coded frames in `v4l2-ctl`'s `--stream-to-hdr` layout (`FramedStreamWriter`): what `record` writes from
/// an encoder whose coded format is not H.264 (the kernel's vicodec gives FWHT), for `v4l2-ctl --stream-from-hdr` to
/// decode. Claimed at init (before the camera starts).
public final class FramedStreamOutput: EncodedOutput {
    private let writer: FramedStreamWriter
    /// What the frames are, for the summary ("FWHT").
    public let codedFormatName: String
    /// Written by one thread at a time (the encoder's, once `end` has joined it, or the pipeline's).
    public var acceptsWritesFromEncoderThread: Bool { true }
    /// Claims `path` at once: an unwritable or busy path throws before the camera starts.
    public init(path: String, codedFormatName: String) throws {
        writer = try FramedStreamWriter(path: path)
        self.codedFormatName = codedFormatName
    }
    /// Always true: the file takes every frame.
    public var wantsFrames: Bool { true }
    /// The same as `wantsFrames`.
    public var hasAudience: Bool { true }
    /// False: a file shows the gap where the camera was away.
    public var takesPlaceholders: Bool { false }
    /// Appends the frame.
    public func write(_ frame: EncodedFrame) throws { try writer.write(frame) }
    /// Flushes, syncs and closes the file.
    public func end() throws { try writer.close() }
    /// Gives the file up; an existing file keeps its contents.
    public func discard() { writer.discard() }
    /// Frames written.
    public var framesWritten: Int { writer.framesWritten }
    /// The file, its frames and bytes (the summary's `output` line).
    public var report: OutputReport {
        .lines([
            (
                "output",
                "\(writer.path) (\(codedFormatName) in v4l2-ctl's --stream-to-hdr layout, \(writer.framesWritten) frames, \(writer.bytesWritten) bytes)"
            )
        ])
    }
    /// The path while no byte has reached it.
    public var unwrittenFile: String? { writer.bytesWritten == 0 ? writer.path : nil }
}
