#if canImport(Glibc)
    import Glibc
#endif
public import VideoCapture
import SystemIO
import CLibYUV

/// An output file written the way a recording needs it. The contract ("validate everything first, nothing
/// lost when the start fails"):
///
/// - `init(path:)` checks and claims the path **without changing it**: it opens the path the user gave
///   (following symbolic links, so a link or a device node is written through, never replaced; no temporary
///   file is renamed over it), creating the file only if it does not exist, and, for a regular file, takes an exclusive advisory
///   lock (`flock(LOCK_EX | LOCK_NB)`): a second writer of the same file, in this process or another, fails at
///   once with an error naming the file. A directory, an unwritable path or a FIFO nobody reads fail here too.
/// - Nothing in an existing file is touched until the writer **commits**: the first time bytes are handed to
///   the kernel (a full buffer, `flush()`, `close()`) or an explicit `commit()`. Only then is a regular file
///   truncated. So open every output, then start the camera and the encoder; if anything fails before the first
///   flush, drop the writers, `close()` or `discard()` them: existing files keep their contents, and files
///   this object created are removed again — nothing empty is left behind. (`commit()` first to keep an
///   empty output.)
/// - Writes go through one preallocated buffer (no allocation per write) and `write(2)`; every error is
///   reported with the path (`/dev/full` fails with "No space left on device"). `bytesWritten` counts only
///   bytes the kernel accepted; `close()` also `fsync`s a regular file, so a full disk shows up as an error
///   there at the latest.
/// - Dropping a committed file without `close()` flushes what it can and ignores errors: call `close()` to
///   learn whether everything was written.
public final class OutputFile {
    /// The path as given to `init(path:bufferSize:)`.
    public let path: String
    /// nil once closed.
    private var fd: FileDescriptor?
    private let buffer: UnsafeMutableRawPointer
    private let capacity: Int
    private var buffered = 0
    private let isRegularFile: Bool
    private let createdHere: Bool
    /// True once the file is this writer's: an existing file has been truncated (see `commit()`).
    public private(set) var isCommitted = false
    /// Bytes the kernel has accepted (what survives this process being killed).
    public private(set) var bytesWritten: Int64 = 0
    /// Bytes handed to `write` but still in this object's buffer.
    public var bytesPending: Int { buffered }

    /// Opens and locks `path` without truncating it (see the type's documentation). `bufferSize` bytes are
    /// allocated once.
    public convenience init(path: String, bufferSize: Int = 1 << 16) throws(ProcessingError) {
        if path == OutputFile.standardOutput { // a pipe or a terminal: a descriptor of our own, no lock, nothing to truncate
            let fd: FileDescriptor
            do throws(SystemError) { fd = try FileDescriptor.duplicatingStandardOutput() } catch { throw Self.failure(path, error.reason) }
            try self.init(path: path, opened: fd, created: false, bufferSize: bufferSize)
            return
        }
        var existed = true
        // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking; cleared again below.
        var opened: Result<FileDescriptor, SystemError> = Result { () throws(SystemError) in
            try FileDescriptor.open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        }
        if case .failure(let e) = opened, e.errno == ENOENT {
            existed = false
            opened = Result { () throws(SystemError) in
                try FileDescriptor.create(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, mode: 0o666)
            }
        }
        let fd: FileDescriptor
        switch opened {
        case .success(let f): fd = f
        case .failure(let e): throw Self.failure(path, e.errno == ENXIO ? "it is a FIFO that no process is reading" : e.reason)
        }
        try self.init(path: path, opened: fd, created: !existed, bufferSize: bufferSize)
    }

    /// Creates `path` as a new file (`O_CREAT | O_EXCL`), locked as `init(path:bufferSize:)` does; nil when
    /// anything is at `path` already (a file, a directory, a symbolic link, dangling or not), which is left as it
    /// is. What a segment ring opens each file with, so that no name on disk is ever reused. Throws `ioFailed`
    /// naming the path for any other failure (a missing directory, no permission).
    public static func createNew(path: String, bufferSize: Int = 1 << 16) throws(ProcessingError) -> OutputFile? {
        let fd: FileDescriptor
        do throws(SystemError) { fd = try FileDescriptor.create(path, O_WRONLY | O_CLOEXEC | O_NOCTTY, mode: 0o666) } catch {
            if error.errno == EEXIST { return nil }
            throw failure(path, error.reason)
        }
        return try OutputFile(path: path, opened: fd, created: true, bufferSize: bufferSize)
    }

    private static func failure(_ path: String, _ what: String) -> ProcessingError {
        ProcessingError(.ioFailed, "cannot write \(shown(path)): \(what)")
    }

    /// The path that means standard output: `-` (a pipe to ffmpeg, a Python reader). Its reader going away (EPIPE)
    /// is a `readerGone` error, not an `ioFailed` one; the process must ignore SIGPIPE to see it (camcap does).
    public static let standardOutput = "-"
    /// `path` for a message: "standard output" for `-`.
    public static func shown(_ path: String) -> String { path == standardOutput ? "standard output" : path }

    /// Checks and locks a descriptor just opened on `path` (closing it on failure); `created`: this object made
    /// the file, and removes it again if nothing is committed.
    private init(path: String, opened fd: FileDescriptor, created: Bool, bufferSize: Int) throws(ProcessingError) {
        self.path = path
        func failure(_ what: String) -> ProcessingError { Self.failure(path, what) }
        let existed = !created
        let st: stat
        do throws(SystemError) { st = try fd.status() } catch {
            try? fd.close()
            throw failure(error.reason)
        }
        if st.st_mode & S_IFMT == S_IFDIR {
            try? fd.close()
            throw failure("it is a directory")
        }
        // Only files are locked: a device or a pipe (/dev/null, /dev/full, a FIFO) is shared by nature, and one
        // process writing it would otherwise refuse every other (measured: parallel tests writing /dev/full).
        if st.st_mode & S_IFMT == S_IFREG {
            do throws(SystemError) { try fd.lockExclusively() } catch {
                if !existed { try? FileSystem.unlink(path) }
                try? fd.close()
                throw error.errno == EWOULDBLOCK
                    ? ProcessingError(
                        .ioFailed, "\(path) is being written by another writer (it holds the file's lock): refusing to write it at the same time")
                    : failure("cannot lock it (\(error.reason))")
            }
        }
        fd.setNonBlocking(false)
        self.fd = fd
        isRegularFile = st.st_mode & S_IFMT == S_IFREG
        createdHere = !existed
        capacity = max(1, bufferSize)
        buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    /// Truncates an existing regular file (once): from here on the file is this writer's. Called by the first
    /// push of bytes to the kernel; call it yourself to empty the file before there is anything to write.
    public func commit() throws(ProcessingError) {
        guard !isCommitted else { return }
        guard let fd else { throw ProcessingError(.ioFailed, "\(path) is already closed") }
        if isRegularFile {
            do throws(SystemError) { try fd.truncate(to: 0) } catch {
                throw ProcessingError(.ioFailed, "cannot truncate \(path): \(error.reason)")
            }
        }
        isCommitted = true
    }

    /// Appends `count` bytes from `p`, buffered; a write larger than the buffer goes straight to the kernel.
    /// Throws `ioFailed` (with the path) if the file is closed or the kernel refuses the bytes.
    public func write(_ p: UnsafeRawPointer, count: Int) throws(ProcessingError) {
        guard fd != nil else { throw ProcessingError(.ioFailed, "\(path) is already closed") }
        guard count > 0 else { return }
        if buffered + count <= capacity {
            buffer.advanced(by: buffered).copyMemory(from: p, byteCount: count)
            buffered += count
            return
        }
        try flush()
        if count >= capacity {
            try push(p, count)
        } else {
            buffer.copyMemory(from: p, byteCount: count)
            buffered = count
        }
    }

    /// Appends `bytes` (see `write(_:count:)`).
    public func write(_ bytes: [UInt8]) throws(ProcessingError) { try write(bytes[...]) }

    /// Appends `bytes` (see `write(_:count:)`).
    public func write(_ bytes: ArraySlice<UInt8>) throws(ProcessingError) {
        guard !bytes.isEmpty else { return }
        let r: Result<Void, ProcessingError> = bytes.withUnsafeBytes { b in
            do throws(ProcessingError) {
                try write(b.baseAddress!, count: b.count)
                return .success(())
            } catch { return .failure(error) }
        }
        try r.get()
    }

    /// Hands buffered bytes to the kernel (committing first), so they survive this process.
    public func flush() throws(ProcessingError) {
        guard fd != nil else { return }
        guard buffered > 0 else { return }
        let n = buffered
        buffered = 0
        try push(buffer, n)
    }

    private func push(_ p: UnsafeRawPointer, _ count: Int) throws(ProcessingError) {
        try commit()
        guard let fd else { return }
        var done = 0
        while done < count {
            let n: Int
            do throws(SystemError) { n = try fd.write(p + done, count: count - done) } catch {
                if error.errno == EPIPE {
                    throw ProcessingError(.readerGone, "the reader of \(Self.shown(path)) went away (EPIPE) after \(bytesWritten) bytes")
                }
                throw ProcessingError(.ioFailed, "writing \(Self.shown(path)) failed after \(bytesWritten) bytes: \(error.reason)")
            }
            if n == 0 { throw ProcessingError(.ioFailed, "writing \(path) failed after \(bytesWritten) bytes: the device took nothing") }
            done += n
            bytesWritten += Int64(n)
        }
    }

    /// True for a regular file: `overwrite(at:_:)` and `truncate(to:)` work (not on a pipe or a device).
    public var isRewritable: Bool { isRegularFile }

    /// Cuts a regular file back to `length` bytes (at most `bytesWritten`), dropping anything still buffered: a
    /// writer that failed in the middle of a unit (a full disk) keeps only its complete units. Does nothing on a
    /// pipe or a device. Throws `ioFailed` with the path.
    public func truncate(to length: Int64) throws(ProcessingError) {
        guard let fd else { throw ProcessingError(.ioFailed, "\(path) is already closed") }
        buffered = 0
        guard isRegularFile, length >= 0, length < bytesWritten else { return }
        do throws(SystemError) { try fd.truncate(to: Int(length)) } catch {
            throw ProcessingError(.ioFailed, "cannot cut \(path) back to \(length) bytes: \(error.reason)")
        }
        do throws(SystemError) { try fd.seek(to: length) } catch {
            throw ProcessingError(.ioFailed, "cannot cut \(path) back to \(length) bytes: \(error.reason)")
        }
        bytesWritten = length
    }

    /// Replaces bytes already handed to the kernel at `offset` (a header field known only at the end, such as a
    /// duration), leaving the write position where it is. Only inside what `bytesWritten` counts, and only for a
    /// regular file (a pipe or device cannot be rewritten: the call then does nothing). Throws `ioFailed` with
    /// the path when the range lies outside what was written or the kernel refuses it.
    public func overwrite(at offset: Int64, _ bytes: [UInt8]) throws(ProcessingError) {
        guard let fd else { throw ProcessingError(.ioFailed, "\(path) is already closed") }
        guard isRegularFile, !bytes.isEmpty else { return }
        guard offset >= 0, offset <= bytesWritten - Int64(bytes.count) else {
            throw ProcessingError(.ioFailed, "cannot rewrite \(bytes.count) bytes at \(offset) in \(path): only \(bytesWritten) bytes are written")
        }
        var done = 0
        while done < bytes.count {
            let result: Result<Int, SystemError> = bytes.withUnsafeBytes { b in
                Result { () throws(SystemError) in try fd.write(b.baseAddress! + done, count: b.count - done, at: offset + Int64(done)) }
            }
            let n: Int
            switch result {
            case .success(let count): n = count
            case .failure(let error): throw ProcessingError(.ioFailed, "rewriting \(path) at \(offset) failed: \(error.reason)")
            }
            if n == 0 { throw ProcessingError(.ioFailed, "rewriting \(path) at \(offset) failed: the device took nothing") }
            done += n
        }
    }

    /// Flushes, syncs a regular file to the disk, unlocks and closes; reports any failure (idempotent).
    public func close() throws(ProcessingError) {
        guard let fd else { return }
        var failure: ProcessingError?
        do { try flush() } catch { failure = error }
        if failure == nil && !isCommitted && createdHere {
            removeIfStillOurs() // opened but never written (a start that failed): nothing is left behind
        }
        if failure == nil && isRegularFile {
            do throws(SystemError) { try fd.sync() } catch  where error.errno != EINVAL && error.errno != EROFS {
                failure = ProcessingError(.ioFailed, "writing \(path) failed: \(error.reason)")
            } catch {}
        }
        do throws(SystemError) { try fd.close() } catch  where failure == nil && error.errno != EINTR {
            failure = ProcessingError(.ioFailed, "closing \(path) failed: \(error.reason)")
        } catch {}
        self.fd = nil
        if let failure { throw failure }
    }

    /// Gives up the file: buffered bytes are dropped; an uncommitted existing file keeps its contents, and a
    /// file this object created is removed (also after a failed write: no empty or partial file is left).
    public func discard() {
        guard let fd else { return }
        buffered = 0
        if createdHere { removeIfStillOurs() }
        try? fd.close()
        self.fd = nil
    }

    /// Unlinks `path` only if it still names the file this object opened (not something put there since).
    private func removeIfStillOurs() {
        guard let mine = try? fd?.status(), let there = try? FileSystem.status(path),
            mine.st_dev == there.st_dev, mine.st_ino == there.st_ino
        else { return }
        try? FileSystem.unlink(path)
    }

    deinit {
        if fd != nil {
            if isCommitted { try? close() } else { discard() }
        }
        buffer.deallocate()
    }
}

/// A YUV4MPEG2 writer (plays in ffplay/mpv, reads in ffmpeg): 4:2:0, frame rate and colour range in the header.
public final class Y4MWriter {
    /// Picture width in pixels, as written in the stream header.
    public let width: Int
    /// Picture height in pixels, as written in the stream header.
    public let height: Int
    /// Pictures appended so far.
    public private(set) var framesWritten = 0
    private let file: OutputFile

    /// Opens `path` (see `OutputFile`: nothing is truncated before the first frames are flushed).
    public convenience init(path: String, width: Int, height: Int, fps: Fraction, fullRange: Bool = false) throws(ProcessingError) {
        guard width > 0, height > 0 else { throw ProcessingError(.invalidSize, "Y4M size \(width)x\(height) must be positive") }
        try self.init(file: try OutputFile(path: path), width: width, height: height, fps: fps, fullRange: fullRange)
    }

    /// Writes into a file opened (and locked) earlier, e.g. before the camera started.
    public init(file: OutputFile, width: Int, height: Int, fps: Fraction, fullRange: Bool = false) throws(ProcessingError) {
        guard width > 0, height > 0 else { throw ProcessingError(.invalidSize, "Y4M size \(width)x\(height) must be positive") }
        self.width = width
        self.height = height
        self.file = file
        let header =
            "YUV4MPEG2 W\(width) H\(height) F\(fps.numerator):\(fps.denominator) Ip A1:1 C420jpeg XCOLORRANGE=\(fullRange ? "FULL" : "LIMITED")\n"
        try file.write(Array(header.utf8))
    }

    /// The path of the file written.
    public var path: String { file.path }

    /// Appends one picture (its size must match the header).
    public func write(_ frame: I420Buffer) throws(ProcessingError) {
        guard frame.width == width, frame.height == height else {
            throw ProcessingError(
                .invalidSize, "frame \(frame.width)x\(frame.height) does not match the Y4M stream's \(width)x\(height) (\(file.path))")
        }
        try file.write(Self.frameTag, count: 6)
        for r in 0..<height { try file.write(frame.dataY + r * frame.strideY, count: width) }
        for r in 0..<frame.chromaHeight { try file.write(frame.dataU + r * frame.strideU, count: frame.chromaWidth) }
        for r in 0..<frame.chromaHeight { try file.write(frame.dataV + r * frame.strideV, count: frame.chromaWidth) }
        framesWritten += 1
    }

    // Immutable after initialisation; a raw pointer so a frame header costs no allocation.
    nonisolated(unsafe) private static let frameTag: UnsafeRawPointer = {
        let p = UnsafeMutableRawPointer.allocate(byteCount: 6, alignment: 1)
        p.copyMemory(from: Array("FRAME\n".utf8), byteCount: 6)
        return UnsafeRawPointer(p)
    }()

    /// Bytes the kernel accepted so far.
    public var bytesWritten: Int64 { file.bytesWritten }
    /// Hands buffered frames to the kernel (see `OutputFile.flush()`).
    public func flush() throws(ProcessingError) { try file.flush() }
    /// Flushes, syncs and closes the file, reporting any write error (see `OutputFile.close()`).
    public func close() throws(ProcessingError) { try file.close() }
    /// Gives the file up (see `OutputFile.discard()`).
    public func discard() { file.discard() }
}

/// Still pictures of frames: PNG (RGB, stored deflate) or JPEG (4:2:0, libjpeg-turbo), picked by extension.
///
/// The picture's colour description (`colorSpace`, a frame's `VideoFrame.colorSpace`) decides the conversion, so
/// black stays 0 and white 255 whatever the source: a PNG is RGB from the picture's own matrix and range (a
/// full-range JPEG camera's Y' 0...255 and a limited-range camera's 16...235 both map to 0...255); a JPEG is JFIF,
/// full-range BT.601 by definition: a full-range BT.601 picture is encoded as it is, a limited-range one has its
/// samples expanded to full range first (Y' = (Y − 16) × 255 / 219, C = (C − 128) × 255 / 224 + 128), and one with
/// another matrix (BT.709, BT.2020) goes through RGB. Without a description a picture is taken as limited-range
/// BT.601 (`VideoColorSpace.bt601`).
public enum SnapshotWriter {
    /// The picture formats a snapshot can be written in.
    public enum Kind: String, Sendable {
        /// PNG: 8-bit RGB converted with the picture's matrix and range, lossless, in stored (uncompressed) deflate
        /// blocks.
        case png
        /// JPEG: baseline 4:2:0 full-range BT.601 (JFIF) from libjpeg-turbo, quality 85.
        case jpeg
    }

    /// The format for a file name: `.png` for `*.png`, `.jpeg` for `*.jpg` and `*.jpeg` (any case). Throws
    /// `invalidArgument` for any other extension.
    public static func kind(forPath path: String) throws(ProcessingError) -> Kind {
        let lower = path.lowercased()
        if lower.hasSuffix(".png") { return .png }
        if lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") { return .jpeg }
        throw ProcessingError(.invalidArgument, "snapshot path \(path) must end in .png, .jpg or .jpeg")
    }

    /// Writes `frame`, described by `colorSpace`, to `path` (encoded in memory first; a failed write removes a file
    /// it created, so no empty or partial snapshot is left behind).
    public static func write(_ frame: I420Buffer, colorSpace: VideoColorSpace = .bt601, to path: String) throws(ProcessingError) {
        let data = try encode(frame, colorSpace: colorSpace, kind: try kind(forPath: path))
        try write(data, to: try OutputFile(path: path))
    }

    /// Writes `frame`, described by `colorSpace`, into a file opened (and locked) earlier, e.g. before the camera
    /// started; the file is truncated only now. Picks PNG or JPEG by the file's path.
    public static func write(_ frame: I420Buffer, colorSpace: VideoColorSpace = .bt601, to file: OutputFile) throws(ProcessingError) {
        let data: [UInt8]
        do { data = try encode(frame, colorSpace: colorSpace, kind: try kind(forPath: file.path)) } catch {
            file.discard()
            throw error
        }
        try write(data, to: file)
    }

    private static func write(_ data: [UInt8], to f: OutputFile) throws(ProcessingError) {
        do {
            try f.write(data)
            try f.close()
        } catch {
            f.discard()
            throw error
        }
    }

    /// The picture, described by `colorSpace`, as PNG or JPEG bytes.
    public static func encode(_ frame: I420Buffer, colorSpace: VideoColorSpace = .bt601, kind: Kind) throws(ProcessingError) -> [UInt8] {
        switch kind {
        case .png: return png(frame, colorSpace: colorSpace)
        case .jpeg: return try jpeg(frame, colorSpace: colorSpace)
        }
    }

    /// I420 → JPEG bytes (JFIF: full-range BT.601), converting a picture that is not full-range BT.601.
    static func jpeg(_ frame: I420Buffer, colorSpace: VideoColorSpace) throws(ProcessingError) -> [UInt8] {
        let writer = FormatWriter()
        let cap = FormatWriter.capacity(for: .mjpeg, width: frame.width, height: frame.height)
        var out = [UInt8](repeating: 0, count: cap)
        let r: Result<Int, ProcessingError> = out.withUnsafeMutableBufferPointer { b in
            do throws(ProcessingError) {
                if RGBConstants.matrix(colorSpace) != 0 {
                    // BT.709 / BT.2020: through RGB, which libjpeg-turbo converts to JFIF's BT.601.
                    let w = frame.width, h = frame.height
                    let rgb = UnsafeMutablePointer<UInt8>.allocate(capacity: w * h * 3)
                    defer { rgb.deallocate() }
                    _ = I420ToRGB24Matrix(
                        frame.dataY, Int32(frame.strideY), frame.dataV, Int32(frame.strideV), frame.dataU, Int32(frame.strideU),
                        rgb, Int32(w * 3), RGBConstants.yvu(colorSpace), Int32(w), Int32(h))
                    return .success(try writer.encodeJPEG(rgb: rgb, width: w, height: h, pitch: w * 3, into: b.baseAddress!, capacity: cap))
                }
                let source = colorSpace.range == .full ? frame : expandedToFullRange(frame)
                return .success(try writer.encodeJPEG(source, into: b.baseAddress!, capacity: cap))
            } catch {
                return .failure(error)
            }
        }
        let n = try r.get()
        return Array(out[0..<n])
    }

    /// A copy of a limited-range picture with its samples expanded to full range (one table look-up a sample):
    /// Y' = (Y − 16) × 255 / 219, C = (C − 128) × 255 / 224 + 128, rounded and clamped.
    static func expandedToFullRange(_ frame: I420Buffer) -> I420Buffer {
        let dst = I420Buffer(width: frame.width, height: frame.height)
        let cw = frame.chromaWidth, ch = frame.chromaHeight
        PlaneOps.copy(frame.dataY, frame.strideY, dst.mutableDataY, dst.strideY, width: frame.width, height: frame.height)
        PlaneOps.copy(frame.dataU, frame.strideU, dst.mutableDataU, dst.strideU, width: cw, height: ch)
        PlaneOps.copy(frame.dataV, frame.strideV, dst.mutableDataV, dst.strideV, width: cw, height: ch)
        // libyuv's ARGB colour table: 4 bytes a pixel, each channel through its own column of the table; the
        // planes' strides are multiples of 4, so whole rows are looked up 4 samples at a time.
        let luma = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024), chroma = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
        defer {
            luma.deallocate()
            chroma.deallocate()
        }
        for v in 0..<256 {
            let y = FullRange.luma(UInt8(v)), c = FullRange.chroma(UInt8(v))
            for k in 0..<4 {
                luma[v * 4 + k] = y
                chroma[v * 4 + k] = c
            }
        }
        PlaneOps.lookUp(dst.mutableDataY, dst.strideY, table: luma, width: dst.strideY, height: frame.height)
        PlaneOps.lookUp(dst.mutableDataU, dst.strideU, table: chroma, width: dst.strideU, height: ch)
        PlaneOps.lookUp(dst.mutableDataV, dst.strideV, table: chroma, width: dst.strideV, height: ch)
        return dst
    }

    /// I420 → RGB (the picture's matrix and range; limited-range BT.601 by default) → PNG bytes.
    public static func png(_ frame: I420Buffer, colorSpace: VideoColorSpace = .bt601) -> [UInt8] {
        let w = frame.width, h = frame.height
        var rgb = [UInt8](repeating: 0, count: w * h * 3)
        rgb.withUnsafeMutableBufferPointer { b in
            // R, G, B in memory: the planes exchanged with the mirrored constants (libyuv's I420ToRAW, any matrix).
            _ = I420ToRGB24Matrix(
                frame.dataY, Int32(frame.strideY), frame.dataV, Int32(frame.strideV), frame.dataU, Int32(frame.strideU),
                b.baseAddress, Int32(w * 3), RGBConstants.yvu(colorSpace), Int32(w), Int32(h))
        }
        // Raw scanlines with filter byte 0, in stored (uncompressed) deflate blocks.
        var raw = [UInt8]()
        raw.reserveCapacity((w * 3 + 1) * h)
        for r in 0..<h {
            raw.append(0)
            raw.append(contentsOf: rgb[(r * w * 3)..<((r + 1) * w * 3)])
        }
        var z: [UInt8] = [0x78, 0x01]
        var i = 0
        repeat {
            let n = min(65535, raw.count - i)
            let last: UInt8 = i + n == raw.count ? 1 : 0
            z += [last, UInt8(n & 0xff), UInt8(n >> 8), UInt8(~n & 0xff), UInt8((~n >> 8) & 0xff)]
            z += raw[i..<(i + n)]
            i += n
        } while i < raw.count
        z += bigEndianBytes(adler32(raw))
        var out: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
        func chunk(_ type: String, _ body: [UInt8]) {
            let t = Array(type.utf8)
            out += bigEndianBytes(UInt32(body.count))
            out += t
            out += body
            out += bigEndianBytes(crc32(t + body))
        }
        chunk("IHDR", bigEndianBytes(UInt32(w)) + bigEndianBytes(UInt32(h)) + [8, 2, 0, 0, 0])
        chunk("IDAT", z)
        chunk("IEND", [])
        return out
    }

    private static func adler32(_ d: [UInt8]) -> UInt32 {
        var a: UInt32 = 1, b: UInt32 = 0
        for x in d {
            a = (a + UInt32(x)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }
    private static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xedb88320 ^ (c >> 1) : c >> 1 }
        return c
    }
    private static func crc32(_ d: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xffff_ffff
        for x in d { c = crcTable[Int((c ^ UInt32(x)) & 0xff)] ^ (c >> 8) }
        return c ^ 0xffff_ffff
    }
}

/// One limited-range sample expanded to full range (the same for every matrix): what a JPEG snapshot of a limited-range
/// picture holds, and how the fixture cameras draw their pattern for a full-range (MJPEG) stream.
package enum FullRange {
    /// Y' = (Y − 16) × 255 / 219, rounded and clamped to 0...255.
    package static func luma(_ y: UInt8) -> UInt8 {
        let d = (Int(y) - 16) * 255
        return UInt8(clamping: d >= 0 ? (d + 109) / 219 : -((-d + 109) / 219))
    }
    /// C = (C − 128) × 255 / 224 + 128, rounded and clamped to 0...255.
    package static func chroma(_ c: UInt8) -> UInt8 {
        let d = (Int(c) - 128) * 255
        return UInt8(clamping: 128 + (d >= 0 ? (d + 112) / 224 : -((-d + 112) / 224)))
    }
}

/// Picture quality between two I420 pictures of the same size (libyuv's PSNR over all planes, dB).
public func psnr(_ a: I420Buffer, _ b: I420Buffer) -> Double {
    I420Psnr(
        a.dataY, Int32(a.strideY), a.dataU, Int32(a.strideU), a.dataV, Int32(a.strideV),
        b.dataY, Int32(b.strideY), b.dataU, Int32(b.strideU), b.dataV, Int32(b.strideV), Int32(a.width), Int32(a.height))
}

/// libyuv's CPU feature flags as text (for `camcap --version`).
public var libyuvCPUFlags: String {
    let flags = InitCpuFlags()
    let names: [(Int32, String)] = [
        (kCpuHasSSE2, "SSE2"), (kCpuHasSSSE3, "SSSE3"), (kCpuHasSSE41, "SSE4.1"), (kCpuHasSSE42, "SSE4.2"),
        (kCpuHasAVX, "AVX"), (kCpuHasAVX2, "AVX2"), (kCpuHasAVX512BW, "AVX512BW"), (kCpuHasNEON, "NEON"),
    ]
    let on = names.filter { flags & $0.0 != 0 }.map(\.1)
    return "libyuv \(LIBYUV_VERSION) [\(on.isEmpty ? "C only" : on.joined(separator: " "))]"
}
