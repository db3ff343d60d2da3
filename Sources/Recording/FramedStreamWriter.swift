public import H264
import VideoProcessing

/// Writes coded frames in `v4l2-ctl`'s `--stream-to-hdr` layout, which `v4l2-ctl --stream-from-hdr` reads back into
/// a memory-to-memory decoder: each frame is preceded by an 8-byte header, the magic `0x72646856` ("Vhdr" as a
/// little-endian FourCC) and the frame's length in bytes, both big-endian. It carries any coded format, one frame
/// per header: FWHT from the kernel's vicodec encoder, or H.264 access units.
///
/// The file is buffered (64 KiB) and flushed once a second of capture time, as recordings are.
public final class FramedStreamWriter {
    /// The header's magic, written big-endian.
    public static let magic: UInt32 = 0x7264_6856
    private let file: OutputFile
    private var header = [UInt8](repeating: 0, count: 8)
    private var lastFlushNs: Int64?
    /// Frames written.
    public private(set) var framesWritten = 0

    /// Opens and locks `path` at once without truncating it (see `OutputFile`): an unwritable or busy path fails
    /// before capture starts.
    public init(path: String) throws(H264Error) {
        do { file = try OutputFile(path: path) } catch { throw H264Error(writing: error) }
    }

    /// The path of the file written.
    public var path: String { file.path }
    /// Bytes the kernel accepted (not counting what is still buffered).
    public var bytesWritten: Int64 { file.bytesWritten }

    /// Appends one frame (header, then `frame.data`); skipped and empty frames are ignored.
    public func write(_ frame: EncodedFrame) throws(H264Error) {
        guard !frame.isSkipped, !frame.data.isEmpty else { return }
        let length = UInt32(truncatingIfNeeded: frame.data.count)
        for b in 0..<4 {
            header[b] = UInt8(truncatingIfNeeded: Self.magic >> (24 - 8 * b))
            header[4 + b] = UInt8(truncatingIfNeeded: length >> (24 - 8 * b))
        }
        do {
            try file.write(header)
            try file.write(frame.data)
        } catch { throw H264Error(writing: error) }
        framesWritten += 1
        if let last = lastFlushNs, frame.timestampNs - last < 1_000_000_000 { return }
        if lastFlushNs != nil { do { try file.flush() } catch { throw H264Error(writing: error) } }
        lastFlushNs = frame.timestampNs
    }

    /// The frames of a file in this layout: each frame's bytes, in order. A header with another magic, or a length
    /// running past the end, ends the list (the frames before it are returned) and is reported in `error`.
    public static func frames(in bytes: [UInt8]) -> (frames: [ArraySlice<UInt8>], error: String?) {
        var out: [ArraySlice<UInt8>] = [], i = 0
        func be(_ at: Int) -> UInt32 { (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[at + $1]) } }
        while i < bytes.count {
            guard i + 8 <= bytes.count else { return (out, "a truncated header at byte \(i)") }
            guard be(i) == magic else { return (out, "no magic at byte \(i)") }
            let n = Int(be(i + 4))
            guard i + 8 + n <= bytes.count else { return (out, "frame \(out.count) of \(n) bytes runs past the end") }
            out.append(bytes[(i + 8)..<(i + 8 + n)])
            i += 8 + n
        }
        return (out, nil)
    }

    /// Flushes, syncs and closes.
    public func close() throws(H264Error) { do { try file.close() } catch { throw H264Error(writing: error) } }
    /// Gives the file up (see `OutputFile.discard()`).
    public func discard() { file.discard() }
}
