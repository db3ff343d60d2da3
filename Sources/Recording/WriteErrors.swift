import H264
import VideoProcessing

extension H264Error {
    /// A write failure of the file underneath (`writeFailed`, with the file's message).
    init(writing error: ProcessingError) { self.init(.writeFailed, error.message) }
}
