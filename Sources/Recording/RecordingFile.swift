/// What every recording writer tells about its file, whatever the format: `FragmentedMP4Writer` and
/// `AnnexBWriter`, for an owner that holds either (a segmented recording's current file).
public protocol RecordingFile: AnyObject {
    /// The path of the file written.
    var path: String { get }
    /// Frames handed to `write` and kept (some may still be buffered).
    var framesWritten: Int { get }
    /// Bytes the kernel accepted.
    var bytesWritten: Int64 { get }
    /// Frames whose every byte the kernel accepted: what a reader of the file sees now.
    var framesOnDisk: Int { get }
    /// Gives the file up: for a start that failed before anything was written.
    func discard()
}

extension FragmentedMP4Writer: RecordingFile {}
extension AnnexBWriter: RecordingFile {}
