package import H264
package import VideoProcessing

extension H264Error {
    /// A write failure of the file underneath (`writeFailed`, with the file's message).
    package init(writing error: ProcessingError) { self.init(error.code == .readerGone ? .readerGone : .writeFailed, error.message) }
}
