import Foundation
import Testing
import VideoCapture
@testable import VideoProcessing

/// The frame tap's ring, read in this process through the real socket and descriptor (`FrameTapReader`).
@Suite struct FrameTapTests {
    /// A picture of `width`×`height` whose every byte depends on `n` and its place (Y, U and V differ).
    static func picture(_ n: Int, width: Int = 33, height: Int = 17) -> I420Buffer {
        var bytes = [UInt8](repeating: 0, count: width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2))
        for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 7 &+ n &* 31) }
        return i420(fromPacked: bytes, width: width, height: height)
    }

    static func path(_ name: String) -> String { scratchDir + "/tap-\(name).sock" }

    static func tap(_ name: String, slots: Int = 4, maxSize: FrameSize = FrameSize(width: 64, height: 64)) throws -> FrameTap {
        var c = FrameTap.Configuration()
        c.slots = slots
        c.maxSize = maxSize
        return try FrameTap(socketPath: path(name), configuration: c)
    }

    @Test func framesArriveWithTheirHeadersAndBytes() throws {
        let tap = try Self.tap("roundtrip")
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        #expect(reader.hello.contains("\"format\": \"camcap-frametap\""))
        #expect(reader.hello.contains("\"slots\": 4"))
        #expect(reader.slots == 4 && reader.generation == 1)
        #expect(waitUntil { tap.readers == 1 }, "the tap counts the connected reader")
        let pictures = (1...3).map { Self.picture($0) }
        // An unpacked stride (a cropped source) is packed on the way in.
        for (i, p) in pictures.enumerated() {
            let seq = tap.publish(p, timestampNs: Int64(1_000 + i), rotation: .rotation90, cameraSequence: UInt64(40 + i), fullRange: i == 1)
            #expect(seq == UInt64(i + 1))
        }
        var bytes: [UInt8] = []
        for (i, p) in pictures.enumerated() {
            let got = try #require(reader.next(into: &bytes))
            #expect(got.missed == 0)
            let h = got.header
            #expect(h.sequence == UInt64(i + 1) && h.timestampNs == Int64(1_000 + i) && h.cameraSequence == UInt64(40 + i))
            #expect(h.width == 33 && h.height == 17 && h.strideY == 33 && h.strideU == 17 && h.strideV == 17)
            #expect(h.rotation == 90 && h.fullRange == (i == 1))
            #expect(h.offsetU == 33 * 17 && h.offsetV == 33 * 17 + 17 * 9 && h.dataSize == bytes.count)
            #expect(bytes == p.packedBytes(), "frame \(i + 1): the bytes published")
        }
        #expect(reader.next(into: &bytes) == nil, "nothing new")
        reader.close()
        #expect(waitUntil { tap.readers == 0 }, "a reader that hangs up is no longer counted")
    }

    @Test func aReaderThatFallsBehindSeesTheGap() throws {
        let tap = try Self.tap("behind")
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        var bytes: [UInt8] = []
        tap.publish(Self.picture(1), timestampNs: 1)
        #expect(reader.next(into: &bytes)?.header.sequence == 1)
        for n in 2...10 { tap.publish(Self.picture(n), timestampNs: Int64(n)) } // 4 slots: 7...10 are left
        #expect(reader.latestSequence == 10)
        let first = try #require(reader.next(into: &bytes))
        #expect(first.header.sequence == 7 && first.missed == 5, "frames 2...6 were overwritten unread")
        #expect(bytes == Self.picture(7).packedBytes())
        for n in 8...10 {
            let next = try #require(reader.next(into: &bytes))
            #expect(next.header.sequence == UInt64(n) && next.missed == 0)
        }
        #expect(reader.read(3, into: &bytes) == .overwritten)
        #expect(reader.read(11, into: &bytes) == .notWritten)
    }

    @Test func aSlotBeingWrittenIsNotRead() throws {
        let tap = try Self.tap("midwrite")
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        var bytes: [UInt8] = []
        tap.publish(Self.picture(1), timestampNs: 1)
        // Frame 5 goes into frame 1's slot: read frame 1 while the planes of 5 are there and the seqlock is odd.
        for n in 2...4 { tap.publish(Self.picture(n), timestampNs: Int64(n)) }
        var seen: FrameTapReader.ReadResult?
        tap.publish(Self.picture(5), timestampNs: 5, rotation: .rotation0, cameraSequence: 0, fullRange: false) {
            seen = reader.read(1, into: &bytes)
        }
        #expect(seen == .beingWritten)
        #expect(reader.read(5, into: &bytes) == .frame(try #require(Self.header(reader, 5))))
        #expect(bytes == Self.picture(5).packedBytes())
    }

    @Test func aCopyTheWriterOverwroteIsTorn() throws {
        let tap = try Self.tap("torn", slots: 2)
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        var bytes: [UInt8] = []
        tap.publish(Self.picture(1), timestampNs: 1)
        // The reader has copied frame 1 and has not yet looked at the seqlock again: the writer laps the ring.
        let result = reader.read(1, into: &bytes) {
            tap.publish(Self.picture(2), timestampNs: 2)
            tap.publish(Self.picture(3), timestampNs: 3) // frame 1's slot
        }
        #expect(result == .torn)
        // The same read without the writer in between is whole.
        tap.publish(Self.picture(4), timestampNs: 4)
        if case .frame(let h) = reader.read(3, into: &bytes) {
            #expect(h.sequence == 3 && bytes == Self.picture(3).packedBytes())
        } else {
            Issue.record("frame 3 should read whole")
        }
    }

    @Test func aLargerPictureStartsANewRing() throws {
        let tap = try Self.tap("grow", maxSize: FrameSize(width: 32, height: 32))
        defer { tap.close() }
        let old = try FrameTapReader(socketPath: tap.socketPath)
        var bytes: [UInt8] = []
        tap.publish(Self.picture(1, width: 16, height: 16), timestampNs: 1)
        #expect(old.next(into: &bytes)?.header.width == 16)
        #expect(!old.isRetired)
        tap.publish(Self.picture(2, width: 80, height: 60), timestampNs: 2) // more than a slot holds (one page)
        #expect(old.isRetired, "readers of the old ring are told to reconnect")
        #expect(tap.generation == 2 && tap.skipped == 0)
        let new = try FrameTapReader(socketPath: tap.socketPath)
        #expect(new.generation == 2)
        #expect(new.hello.contains("\"width\": 80") && new.hello.contains("\"height\": 60"))
        #expect(new.next(into: &bytes)?.header.sequence == 2)
        #expect(bytes == Self.picture(2, width: 80, height: 60).packedBytes())
        // Smaller again: the same ring, each slot with its own size.
        tap.publish(Self.picture(3, width: 8, height: 6), timestampNs: 3)
        #expect(new.next(into: &bytes)?.header.width == 8)
    }

    @Test func aLiveTapIsRefusedAndAStaleSocketReplaced() throws {
        let tap = try Self.tap("claim")
        do {
            _ = try Self.tap("claim")
            Issue.record("a second tap on a live socket must be refused")
        } catch let error as ProcessingError {
            #expect(error.code == .tapInUse)
            #expect(error.message.contains("another tap is running there"))
        }
        var st = stat()
        #expect(stat(tap.socketPath, &st) == 0 && st.st_mode & 0o777 == 0o600, "the socket file is the user's only")
        tap.close()
        #expect(!FileManager.default.fileExists(atPath: tap.socketPath), "close removes the socket file")
        // A socket file whose process is gone (bound, never unlinked) is replaced.
        let stale = Self.path("stale")
        let made = try runTool(
            "/usr/bin/python3", ["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)", stale])
        #expect(made.code == 0 && FileManager.default.fileExists(atPath: stale))
        let replacing = try Self.tap("stale")
        #expect(try FrameTapReader(socketPath: replacing.socketPath).slots == 4)
        replacing.close()
        // Something that is not a socket is left alone.
        let file = Self.path("file")
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        #expect(throws: ProcessingError.self) { try Self.tap("file") }
        #expect(FileManager.default.fileExists(atPath: file))
    }

    @Test func namesMapToSocketPaths() throws {
        #expect(try FrameTap.socketPath(name: "lab", runtimeDirectory: "/run/user/1000") == "/run/user/1000/camcap-tap-lab.sock")
        #expect(try FrameTap.socketPath(name: "lab", runtimeDirectory: nil) == "/tmp/camcap-tap-lab.sock")
        #expect(try FrameTap.socketPath(name: "lab", runtimeDirectory: "relative") == "/tmp/camcap-tap-lab.sock")
        #expect(try FrameTap.socketPath(name: "/x/y.sock", runtimeDirectory: nil) == "/x/y.sock")
        for bad in ["", ".hidden", "a b", String(repeating: "n", count: 65), "x\u{0}"] {
            #expect(throws: ProcessingError.self) { try FrameTap.socketPath(name: bad, runtimeDirectory: nil) }
        }
        #expect(throws: ProcessingError.self) { try FrameTap.socketPath(name: "/" + String(repeating: "p", count: 200), runtimeDirectory: nil) }
    }

    /// The header `read` should return for frame `n` of the tests' pictures (from a second, plain read).
    static func header(_ reader: FrameTapReader, _ n: UInt64) -> FrameTapReader.Header? {
        var scratch: [UInt8] = []
        if case .frame(let h) = reader.read(n, into: &scratch) { return h }
        return nil
    }
}
