#if canImport(Glibc)
    import Glibc
#endif
import SystemIO

/// Why `readBoundedFile` refused or failed (callers word it for their own files).
package enum BoundedReadFailure: Error, Sendable {
    /// open or fstat failed, with errno.
    case cannotOpen(Int32)
    /// Not a regular file: what it is instead ("a directory", "a FIFO (named pipe)", …).
    case notRegular(String)
    /// The file's size, over the limit.
    case tooLarge(Int64)
    /// The file grew past the limit while it was read.
    case grew
    /// read failed, with errno.
    case readFailed(Int32)
}

/// Reads a regular file (after following links) of at most `limit` bytes. A FIFO, a device, a socket or a
/// directory is refused at once, never a blocked or endless read: the file is opened without waiting
/// (O_NONBLOCK) and its type checked on the open descriptor, so nothing can be swapped in between.
package func readBoundedFile(_ path: String, limit: Int) throws(BoundedReadFailure) -> [UInt8] {
    let fd: FileDescriptor
    do throws(SystemError) { fd = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) } catch { throw .cannotOpen(error.errno) }
    defer { try? fd.close() }
    let st: stat
    do throws(SystemError) { st = try fd.status() } catch { throw .cannotOpen(error.errno) }
    guard st.st_mode & S_IFMT == S_IFREG else {
        switch st.st_mode & S_IFMT {
        case S_IFDIR: throw .notRegular("a directory")
        case S_IFIFO: throw .notRegular("a FIFO (named pipe)")
        case S_IFCHR: throw .notRegular("a character device")
        case S_IFBLK: throw .notRegular("a block device")
        case S_IFSOCK: throw .notRegular("a socket")
        default: throw .notRegular("not a regular file")
        }
    }
    guard st.st_size <= limit else { throw .tooLarge(Int64(st.st_size)) }
    var data = [UInt8](repeating: 0, count: Int(st.st_size) + 1)
    var used = 0
    while true {
        if used == data.count {
            guard data.count <= limit else { throw .grew }
            data.append(contentsOf: [UInt8](repeating: 0, count: Swift.min(65536, limit + 1 - data.count + 1)))
        }
        let r: Result<Int, SystemError> = data.withUnsafeMutableBytes { b in
            Result { () throws(SystemError) in try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: b[used...])) }
        }
        let n: Int
        switch r {
        case .success(let count): n = count
        case .failure(let e): throw .readFailed(e.errno)
        }
        if n == 0 { break }
        used += n
        guard used <= limit else { throw .grew }
    }
    data.removeLast(data.count - used)
    return data
}

extension BoundedReadFailure {
    /// A sentence naming the file, what it is for and what is wrong ("cannot read the token file x: No such
    /// file or directory").
    package func message(_ path: String, what: String, limit: Int) -> String {
        switch self {
        case .cannotOpen(let e), .readFailed(let e): "cannot read the \(what) \(path): \(String(cString: strerror(e)))"
        case .notRegular(let kind): "the \(what) \(path) is \(kind), not a regular file"
        case .tooLarge(let size): "the \(what) \(path) is \(size) bytes; at most \(limit) are read"
        case .grew: "the \(what) \(path) grew past \(limit) bytes while it was read"
        }
    }
}
