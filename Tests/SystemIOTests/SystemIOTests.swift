import Dispatch
import Testing
import Glibc
import Synchronization
@testable import SystemIO

@Suite struct SystemCallTests {
    @Test func retriesEINTRThenReturns() throws {
        var calls = 0
        let r = try SystemCall.retrying("fake") { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(r == 7)
        #expect(calls == 3)
    }

    @Test func capturesErrnoIntoTheError() {
        var caught: SystemError?
        do throws(SystemError) { _ = try FileDescriptor.open("/nonexistent/dir/file", O_RDONLY) } catch { caught = error }
        #expect(caught == SystemError("open", errno: ENOENT))
        #expect(caught?.description == "open failed: No such file or directory (errno 2)")
        #expect(caught?.reason == "No such file or directory")
    }

    @Test func plainErrnoForHotPaths() {
        #expect(SystemCall.errno { () -> Int32 in 0 } == 0)
        var calls = 0
        #expect(
            SystemCall.errno { () -> Int32 in
                calls += 1
                errno = calls == 1 ? EINTR : EAGAIN
                return -1
            } == EAGAIN)
        #expect(calls == 2)
    }

    @Test func filesRoundTrip() throws {
        let path = "/tmp/systemio-test-\(getpid())"
        let fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o600)
        let bytes: [UInt8] = [1, 2, 3, 4]
        #expect(try bytes.withUnsafeBytes { try fd.write($0.baseAddress!, count: 4) } == 4)
        try fd.sync()
        try fd.close()
        try FileSystem.rename(path, to: path + ".2")
        let rd = try FileDescriptor.open(path + ".2", O_RDONLY | O_CLOEXEC)
        var back = [UInt8](repeating: 0, count: 8)
        #expect(try back.withUnsafeMutableBytes { try rd.read(into: $0) } == 4)
        #expect(Array(back.prefix(4)) == bytes)
        #expect(try rd.status().st_size == 4)
        try rd.close()
        try FileSystem.unlink(path + ".2")
        #expect(throws: SystemError("unlink", errno: ENOENT)) { try FileSystem.unlink(path + ".2") }
    }
}

@Suite struct ByteOrderTests {
    @Test func readsAndWritesBigEndian() {
        var a: [UInt8] = []
        a.appendBigEndian(UInt16(0x0102))
        a.appendBigEndian(UInt32(0x0304_0506))
        #expect(a == [1, 2, 3, 4, 5, 6])
        #expect(a.bigEndianUInt16(at: 0) == 0x0102)
        a.storeBigEndian(UInt32(0xaabb_ccdd), at: 2)
        a.withUnsafeBytes { #expect($0.bigEndianUInt32(at: 2) == 0xaabb_ccdd) }
        a.withUnsafeMutableBytes { $0.storeBigEndian(UInt16(0xfffe), at: 0) }
        #expect(a.prefix(2) == [0xff, 0xfe])
    }
}

@Suite struct WorkerThreadTests {
    @Test func runsUntilStoppedAndJoinsTwice() {
        let turns = Atomic<Int>(0)
        let t = WorkerThread(name: "a-very-long-thread-name") { flag in
            while !flag.isSet {
                turns.add(1, ordering: .relaxed)
                Sleep.for(nanoseconds: 1_000_000)
            }
        }
        Sleep.for(nanoseconds: 20_000_000)
        t.stop()
        let after = turns.load(ordering: .relaxed)
        #expect(after > 0)
        t.join()
        Sleep.for(nanoseconds: 5_000_000)
        let later = turns.load(ordering: .relaxed)
        #expect(later == after)
    }

    /// The stop protocol: the flag, then the owner's wake (once), then the join. A body blocked on a semaphore
    /// with no timeout ends only because `wake` signals it.
    @Test func stopWakesTheBodyOnceThenJoins() {
        let semaphore = DispatchSemaphore(value: 0), wakes = Atomic<Int>(0), ended = Atomic<Bool>(false)
        let t = WorkerThread(
            name: "waits-forever",
            wake: {
                wakes.add(1, ordering: .relaxed)
                semaphore.signal()
            }
        ) { flag in
            while !flag.isSet { semaphore.wait() }
            ended.store(true, ordering: .relaxed)
        }
        t.stop()
        let endedFirst = ended.load(ordering: .relaxed)
        #expect(endedFirst, "stop returned after the body ended")
        t.stop()
        t.requestStop()
        let woken = wakes.load(ordering: .relaxed)
        #expect(woken == 1)
    }

    @Test func joinOnItsOwnThreadReturns() {
        let box = Mutex<WorkerThread?>(nil)
        let done = Atomic<Bool>(false)
        let t = WorkerThread(name: "self-join") { _ in
            while box.withLock({ $0 }) == nil { Sleep.for(nanoseconds: 1_000_000) }
            box.withLock { $0 }?.join() // must not deadlock
            done.store(true, ordering: .releasing)
        }
        box.withLock { $0 = t }
        t.join()
        let finished = done.load(ordering: .acquiring)
        #expect(finished)
        box.withLock { $0 = nil }
    }
}

@Suite struct UDPSocketTests {
    @Test func loopbackSendAndReceive() throws {
        for host in ["127.0.0.1", "::1"] {
            let any = try #require(SocketAddress(host: host, port: 0))
            let a = try UDPSocket(family: any.family), b = try UDPSocket(family: any.family)
            try a.bind(any)
            try b.bind(any)
            try b.setOption(level: SOL_SOCKET, SO_RCVBUF, 65536)
            let to = try b.localAddress()
            #expect(to.port != 0)
            #expect(UDPSocket.localAddress(toward: to)?.parts.host == to.parts.host)
            let sent = [UInt8](repeating: 7, count: 10).withUnsafeBytes { a.send($0, to: to) }
            #expect(sent == 0)
            #expect(b.waitUntilReadable(timeoutMs: 1000))
            var buffer = [UInt8](repeating: 0, count: 64)
            var from = SocketAddress()
            let n = buffer.withUnsafeMutableBytes { b.receive(into: $0, from: &from) }
            #expect(n == 10)
            #expect(from.isSame(as: try a.localAddress()))
            #expect(buffer.withUnsafeMutableBytes { b.receive(into: $0, from: &from) } == nil)
            a.close()
            a.close()
        }
        #expect(SocketAddress(host: "example.com", port: 1) == nil)
        #expect(SocketAddress(host: "10.0.0.1", port: 5004)?.text == "10.0.0.1:5004")
        #expect(SocketAddress(host: "::1", port: 9)?.text == "[::1]:9")
    }
}
