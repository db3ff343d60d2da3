#if canImport(Glibc)
    package import Glibc
#endif

/// An open file descriptor and the file calls made on it. A value: closing it is the owner's job (once).
package struct FileDescriptor: Sendable, Hashable {
    package let rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// open(2); O_CLOEXEC is the caller's to add.
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemError) -> FileDescriptor {
        FileDescriptor(rawValue: try SystemCall.retrying("open") { Glibc.open(path, flags, mode) })
    }

    /// open(2) with O_CREAT | O_EXCL: creates `path`, never opens what is there already (EEXIST, also for a
    /// symbolic link, dangling or not). O_CLOEXEC is the caller's to add.
    package static func create(_ path: String, _ flags: Int32, mode: mode_t) throws(SystemError) -> FileDescriptor {
        try open(path, flags | O_CREAT | O_EXCL, mode: mode)
    }

    /// A new descriptor for standard output (fcntl F_DUPFD_CLOEXEC on descriptor 1): closing it leaves the process's
    /// standard output open.
    package static func duplicatingStandardOutput() throws(SystemError) -> FileDescriptor {
        FileDescriptor(rawValue: try SystemCall.retrying("fcntl") { Glibc.fcntl(1, F_DUPFD_CLOEXEC, 3) })
    }

    /// One read(2) into `buffer`: the byte count (0 at the end of the file).
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try SystemCall.retrying("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// One write(2): the bytes the kernel took (maybe fewer than `count`).
    package func write(_ bytes: UnsafeRawPointer, count: Int) throws(SystemError) -> Int {
        try SystemCall.retrying("write") { Glibc.write(rawValue, bytes, count) }
    }

    /// One pwrite(2) at `offset` (the file position is unchanged): the bytes the kernel took.
    package func write(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws(SystemError) -> Int {
        try SystemCall.retrying("pwrite") { Glibc.pwrite(rawValue, bytes, count, off_t(offset)) }
    }

    /// lseek(2) to `offset` from the start.
    package func seek(to offset: Int64) throws(SystemError) {
        _ = try SystemCall.retrying("lseek") { Glibc.lseek(rawValue, off_t(offset), SEEK_SET) }
    }

    /// fstat(2).
    package func status() throws(SystemError) -> stat {
        var st = stat()
        _ = try SystemCall.retrying("fstat") { fstat(rawValue, &st) }
        return st
    }

    /// flock(2) exclusively, without waiting (EWOULDBLOCK: another holder).
    package func lockExclusively() throws(SystemError) {
        _ = try SystemCall.retrying("flock") { flock(rawValue, LOCK_EX | LOCK_NB) }
    }

    /// Sets or clears O_NONBLOCK (best effort, as fcntl's failure here only means it stays as it was).
    package func setNonBlocking(_ on: Bool) {
        guard let flags = try? SystemCall.retrying("fcntl", { fcntl(rawValue, F_GETFL) }) else { return }
        _ = try? SystemCall.retrying("fcntl") { fcntl(rawValue, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }

    /// ftruncate(2).
    package func truncate(to length: Int) throws(SystemError) {
        _ = try SystemCall.retrying("ftruncate") { ftruncate(rawValue, off_t(length)) }
    }

    /// fsync(2).
    package func sync() throws(SystemError) {
        _ = try SystemCall.retrying("fsync") { fsync(rawValue) }
    }

    /// close(2), never retried: Linux frees the descriptor even when it reports EINTR.
    package func close() throws(SystemError) {
        if Glibc.close(rawValue) != 0 { throw SystemError("close", errno: Glibc.errno) }
    }
}

/// Calls on paths.
package enum FileSystem {
    /// stat(2) (links followed).
    package static func status(_ path: String) throws(SystemError) -> stat {
        var st = stat()
        _ = try SystemCall.retrying("stat") { stat(path, &st) }
        return st
    }

    /// unlink(2).
    package static func unlink(_ path: String) throws(SystemError) {
        _ = try SystemCall.retrying("unlink") { Glibc.unlink(path) }
    }

    /// rename(2): atomically replaces `to`.
    package static func rename(_ from: String, to: String) throws(SystemError) {
        _ = try SystemCall.retrying("rename") { Glibc.rename(from, to) }
    }

    /// mkdir(2) of `path` and of each missing directory above it (`mkdir -p`), with `mode` less the umask.
    /// A directory that exists already (made by someone else in the meantime too) is fine; anything else that is
    /// not a directory fails (ENOTDIR, EEXIST), as does a missing permission. `path` is at most PATH_MAX bytes and
    /// 256 levels deep (else ENAMETOOLONG), so the work is bounded whatever the input.
    package static func makeDirectories(_ path: String, mode: mode_t) throws(SystemError) {
        guard path.utf8.count < Int(PATH_MAX) else { throw SystemError("mkdir", errno: ENAMETOOLONG) }
        var missing: [Substring] = []
        var current = Substring(path)
        while !current.isEmpty, current != "/" {
            if let st = try? status(String(current)) {
                guard st.st_mode & S_IFMT == S_IFDIR else { throw SystemError("mkdir", errno: ENOTDIR) }
                break
            }
            guard missing.count < 256 else { throw SystemError("mkdir", errno: ENAMETOOLONG) }
            missing.append(current)
            guard let slash = current.lastIndex(of: "/") else { break }
            current = current[..<slash]
            while current.hasSuffix("/") { current = current.dropLast() }
        }
        for dir in missing.reversed() {
            do throws(SystemError) { _ = try SystemCall.retrying("mkdir") { mkdir(String(dir), mode) } } catch  where error.errno == EEXIST {
                guard let st = try? status(String(dir)), st.st_mode & S_IFMT == S_IFDIR else { throw error }
            }
        }
    }

    /// rmdir(2): removes `path` if it is an empty directory (ENOTEMPTY otherwise).
    package static func removeDirectory(_ path: String) throws(SystemError) {
        _ = try SystemCall.retrying("rmdir") { rmdir(path) }
    }

    /// True when stat(2) finds something at `path` (links followed).
    package static func exists(_ path: String) -> Bool { (try? status(path)) != nil }

    /// The names in a directory (opendir/readdir/closedir), without "." and "..", unsorted; at most `limit` of them
    /// (a directory is read in bounded time whatever it holds).
    package static func entries(_ path: String, limit: Int = 100_000) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else { throw SystemError("opendir \(path)", errno: Glibc.errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while names.count < limit, let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Where the symbolic link at `path` points (readlink(2)), as written in the link; nil when it is not a link.
    package static func linkDestination(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX))
        let n = buffer.withUnsafeMutableBytes { readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
        guard n > 0, n < buffer.count else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }
}
