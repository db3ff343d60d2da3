#if canImport(Glibc)
    package import Glibc
#endif
import Synchronization

/// A Unix domain stream socket (AF_UNIX, SOCK_STREAM), close-on-exec, closed once by `close()` or when released:
/// a listener at a path, an accepted connection, or a client's connection. Descriptors travel over it
/// (SCM_RIGHTS). Closing while another thread uses it is the owner's to prevent.
package final class LocalSocket: Sendable {
    package let descriptor: Int32
    private let closed = Atomic<Bool>(false)

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close() }

    /// Closes the socket (idempotent; never retried: Linux frees the descriptor even on EINTR).
    package func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = Glibc.close(descriptor)
    }

    /// `path` as a sockaddr_un; nil when it is empty, holds a NUL or does not fit sun_path (107 bytes).
    private static func address(_ path: String) -> (sockaddr_un, socklen_t)? {
        var a = sockaddr_un()
        a.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: a.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else { return nil }
        withUnsafeMutableBytes(of: &a.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        return (a, socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1))
    }

    /// The longest path a socket can have (sun_path less its NUL).
    package static var maximumPathLength: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    private static func stream() throws(SystemError) -> LocalSocket {
        LocalSocket(descriptor: try SystemCall.retrying("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) })
    }

    /// Connects to the socket at `path` (ENOENT: none there; ECONNREFUSED: nobody accepts on it; EACCES: not ours).
    package static func connect(path: String) throws(SystemError) -> LocalSocket {
        guard let (address, length) = address(path) else { throw SystemError("connect \(path)", errno: ENAMETOOLONG) }
        var a = address
        let s = try stream()
        _ = try SystemCall.retrying("connect") {
            withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(s.descriptor, $0, length) } }
        }
        return s
    }

    /// Listens at `path`, the file's mode set to `mode` (chmod right after bind; until then it has the umask's).
    /// Something already at `path`: a socket that nobody accepts on (its process is gone: connect is refused) is
    /// removed and replaced; a socket that accepts throws EADDRINUSE; anything that is not a socket throws EEXIST
    /// and is left alone. The listener does not block on `accept`.
    package static func listen(path: String, mode: mode_t, backlog: Int32 = 16) throws(SystemError) -> LocalSocket {
        guard let (address, length) = address(path) else { throw SystemError("bind \(path)", errno: ENAMETOOLONG) }
        var a = address
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else { throw SystemError("bind \(path)", errno: EEXIST) }
            do throws(SystemError) {
                _ = try connect(path: path) // released (closed) at once
                throw SystemError("bind \(path)", errno: EADDRINUSE)
            } catch  where error.errno == ECONNREFUSED {
                try FileSystem.unlink(path) // a stale socket: its listener is gone
            }
        }
        let s = try stream()
        _ = try SystemCall.retrying("bind") {
            withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(s.descriptor, $0, length) } }
        }
        do throws(SystemError) {
            _ = try SystemCall.retrying("chmod") { chmod(path, mode) }
            _ = try SystemCall.retrying("listen") { Glibc.listen(s.descriptor, backlog) }
        } catch {
            try? FileSystem.unlink(path)
            throw error
        }
        FileDescriptor(rawValue: s.descriptor).setNonBlocking(true)
        return s
    }

    /// Accepts one waiting connection without waiting (close-on-exec, non-blocking); nil when none is waiting.
    package func accept() -> LocalSocket? {
        let fd = (try? SystemCall.retrying("accept") { Glibc.accept(descriptor, nil, nil) }) ?? -1
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        FileDescriptor(rawValue: fd).setNonBlocking(true)
        return LocalSocket(descriptor: fd)
    }

    /// Sends `bytes` with `passing` (a descriptor, or -1 for none) in one message (sendmsg, SCM_RIGHTS), without
    /// waiting and without SIGPIPE. Returns 0, or errno (EAGAIN: the peer's buffer is full; EPIPE: it left).
    /// A short send counts as EAGAIN (the message is small: only a full buffer cuts it).
    package func send(_ bytes: [UInt8], passing fd: Int32) -> Int32 {
        // One control message: cmsghdr (len, level, type: 16 bytes on 64-bit Linux) and one int, padded to 8.
        var control = [UInt64](repeating: 0, count: 3)
        var bytes = bytes
        return bytes.withUnsafeMutableBytes { payload in
            control.withUnsafeMutableBytes { cmsg in
                var iov = iovec(iov_base: payload.baseAddress, iov_len: payload.count)
                return withUnsafeMutablePointer(to: &iov) { iovp in
                    var message = msghdr()
                    message.msg_iov = iovp
                    message.msg_iovlen = 1
                    if fd >= 0 {
                        cmsg.storeBytes(of: MemoryLayout<cmsghdr>.size + 4, toByteOffset: 0, as: Int.self) // CMSG_LEN(4)
                        cmsg.storeBytes(of: SOL_SOCKET, toByteOffset: 8, as: Int32.self)
                        cmsg.storeBytes(of: 1, toByteOffset: 12, as: Int32.self) // SCM_RIGHTS
                        cmsg.storeBytes(of: fd, toByteOffset: 16, as: Int32.self)
                        message.msg_control = cmsg.baseAddress
                        message.msg_controllen = cmsg.count // CMSG_SPACE(4)
                    }
                    let r = SystemCall.errno { sendmsg(descriptor, &message, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
                    return r
                }
            }
        }
    }

    /// Receives one message of at most `maxBytes` bytes and the descriptor that came with it (recvmsg; waits unless
    /// the socket is non-blocking). Any further descriptors are closed. Empty bytes and no descriptor: the peer left.
    package func receive(maxBytes: Int) throws(SystemError) -> (bytes: [UInt8], descriptor: Int32?) {
        var buffer = [UInt8](repeating: 0, count: max(1, maxBytes))
        var control = [UInt64](repeating: 0, count: 16) // room for a few descriptors (the extras are closed)
        var received: Int32?
        var failure: Int32 = 0
        let n = buffer.withUnsafeMutableBytes { payload -> Int in
            control.withUnsafeMutableBytes { cmsg -> Int in
                var iov = iovec(iov_base: payload.baseAddress, iov_len: payload.count)
                return withUnsafeMutablePointer(to: &iov) { iovp -> Int in
                    var message = msghdr()
                    message.msg_iov = iovp
                    message.msg_iovlen = 1
                    message.msg_control = cmsg.baseAddress
                    message.msg_controllen = cmsg.count
                    var n = -1
                    failure = SystemCall.errno {
                        n = recvmsg(descriptor, &message, Int32(MSG_CMSG_CLOEXEC))
                        return n
                    }
                    guard failure == 0 else { return 0 }
                    // Walk the control messages (CMSG_FIRSTHDR/NXTHDR by hand: 8-byte aligned headers).
                    var offset = 0
                    let end = min(Int(message.msg_controllen), cmsg.count)
                    while offset + 16 <= end {
                        let length = cmsg.load(fromByteOffset: offset, as: Int.self)
                        let level = cmsg.load(fromByteOffset: offset + 8, as: Int32.self)
                        let type = cmsg.load(fromByteOffset: offset + 12, as: Int32.self)
                        guard length >= 16, offset + length <= end else { break }
                        if level == SOL_SOCKET && type == 1 { // SCM_RIGHTS
                            var i = offset + 16
                            while i + 4 <= offset + length {
                                let fd = cmsg.load(fromByteOffset: i, as: Int32.self)
                                if received == nil { received = fd } else { _ = Glibc.close(fd) }
                                i += 4
                            }
                        }
                        offset += (length + 7) & ~7
                    }
                    return n
                }
            }
        }
        if failure != 0 { throw SystemError("recvmsg", errno: failure) }
        return (Array(buffer.prefix(n)), received)
    }

    /// One read(2) into `buffer` without waiting: the byte count (0: the peer left), or nil when nothing is there
    /// (EAGAIN) or the read failed.
    package func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let n = (try? SystemCall.retrying("recv") { recv(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT)) }) ?? -1
        return n >= 0 ? n : nil
    }
}

/// poll(2) over any descriptors, its array kept between calls: no allocation once it has grown.
package struct DescriptorPoll {
    private var fds: [pollfd] = []
    package init() {}

    /// Empties the set (keeping its storage).
    package mutating func removeAll() { fds.removeAll(keepingCapacity: true) }
    /// Adds `descriptor`, watched for input (and, always, hang-up and errors).
    package mutating func add(_ descriptor: Int32) { fds.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)) }

    /// Waits up to `timeoutMs` (-1: without limit) for input, a hang-up or an error on any descriptor added;
    /// `isReady(i)` then says which. Interrupted by a signal: returns as if nothing were ready.
    package mutating func wait(timeoutMs: Int32) {
        if poll(&fds, nfds_t(fds.count), timeoutMs) <= 0 {
            for i in fds.indices { fds[i].revents = 0 }
        }
    }

    /// Whether descriptor `i` (in the order added) has input, a hang-up or an error after the last `wait`.
    package func isReady(_ i: Int) -> Bool { i < fds.count && fds[i].revents != 0 }
}

/// A pipe that wakes a thread blocked in poll: `wake()` from any thread writes a byte (never waits), the thread
/// polls `descriptor` and `drain()`s it.
package final class WakePipe: Sendable {
    /// The end to poll.
    package let descriptor: Int32
    private let writeEnd: Int32

    package init() throws(SystemError) {
        var fds: [Int32] = [-1, -1]
        _ = try SystemCall.retrying("pipe") { pipe(&fds) }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            FileDescriptor(rawValue: fd).setNonBlocking(true)
        }
        descriptor = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        _ = Glibc.close(descriptor)
        _ = Glibc.close(writeEnd)
    }

    /// Makes `descriptor` readable (a full pipe is readable already).
    package func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(writeEnd, &byte, 1)
    }

    /// Reads what `wake` wrote.
    package func drain() {
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &buffer, { Glibc.read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// This process.
package enum CurrentProcess {
    /// getpid(2).
    package static var id: Int32 { getpid() }
}

/// Shared memory that other processes can map: a memfd (memfd_create(2)), sized, sealed and mapped.
package enum SharedMemory {
    /// A new memfd of `length` bytes (zeroed; pages are allocated when first written), close-on-exec, sealed
    /// against shrinking and growing (a process given the descriptor cannot truncate it under our mapping: no
    /// SIGBUS here) and against further seals.
    package static func create(name: String, length: Int) throws(SystemError) -> FileDescriptor {
        typealias MemfdCreate = @convention(c) (UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = memfdCreateSymbol else { throw SystemError("memfd_create", errno: ENOSYS) }
        let create = unsafeBitCast(symbol, to: MemfdCreate.self)
        let flags: UInt32 = 0x0001 | 0x0002 // MFD_CLOEXEC | MFD_ALLOW_SEALING
        let fd = FileDescriptor(rawValue: try SystemCall.retrying("memfd_create") { create(name, flags) })
        do throws(SystemError) {
            try fd.truncate(to: length)
            // F_ADD_SEALS (1033): F_SEAL_SEAL (1) | F_SEAL_SHRINK (2) | F_SEAL_GROW (4).
            _ = try SystemCall.retrying("fcntl") { fcntl(fd.rawValue, 1033, Int32(1 | 2 | 4)) }
        } catch {
            try? fd.close()
            throw error
        }
        return fd
    }

    /// A read-only descriptor of the same memory (open of /proc/self/fd/N, O_RDONLY): who gets it can map the
    /// memory for reading only, and cannot write to it or change its size.
    package static func readOnly(_ fd: FileDescriptor) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.open("/proc/self/fd/\(fd.rawValue)", O_RDONLY | O_CLOEXEC)
    }

    /// mmap(2) of `length` bytes of `fd` from its start, shared (MAP_SHARED), for reading and writing or reading only.
    package static func map(_ fd: FileDescriptor, length: Int, writable: Bool) throws(SystemError) -> UnsafeMutableRawPointer {
        guard length > 0 else { throw SystemError("mmap", errno: EINVAL) }
        let p = mmap(nil, length, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd.rawValue, 0)
        guard let p, p != MAP_FAILED else { throw SystemError("mmap", errno: Glibc.errno) }
        return p
    }

    /// munmap(2) of a map made by `map`.
    package static func unmap(_ pointer: UnsafeMutableRawPointer, length: Int) { _ = munmap(pointer, length) }
}

private nonisolated(unsafe) let memfdCreateSymbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "memfd_create") // RTLD_DEFAULT
