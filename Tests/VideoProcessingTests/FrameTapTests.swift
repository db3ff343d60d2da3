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

    /// Writes `n`'s pattern into a picture handed out by the tap (as the converter would).
    static func fill(_ p: I420Buffer, _ n: Int) {
        let source = picture(n, width: p.width, height: p.height)
        for (dst, src, stride, w, h) in [
            (p.mutableDataY, source.dataY, source.strideY, p.width, p.height),
            (p.mutableDataU, source.dataU, source.strideU, p.chromaWidth, p.chromaHeight),
            (p.mutableDataV, source.dataV, source.strideV, p.chromaWidth, p.chromaHeight),
        ] {
            for row in 0..<h { (dst + row * w).update(from: src + row * stride, count: w) }
        }
    }

    /// A picture converted into the slot the tap handed out is published without a copy, and read back exactly.
    @Test func aPictureConvertedIntoItsSlotIsPublishedWithoutACopy() throws {
        let tap = try Self.tap("inplace")
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        var bytes: [UInt8] = []
        for n in 1...6 {
            let p = try #require(tap.destination(width: 33, height: 17))
            #expect(p.strideY == 33 && p.strideU == 17 && p.writablePlanes == nil, "packed, and read-only to stages")
            #expect(reader.next(into: &bytes) == nil || n > 1, "a slot handed out is not a frame yet")
            Self.fill(p, n)
            #expect(tap.publish(p, timestampNs: Int64(n), cameraSequence: UInt64(n)) == UInt64(n))
            let got = try #require(reader.next(into: &bytes))
            #expect(got.missed == 0 && got.header.sequence == UInt64(n) && got.header.timestampNs == Int64(n))
            #expect(bytes == Self.picture(n).packedBytes(), "frame \(n)")
        }
        #expect(tap.published == 6 && tap.publishedInPlace == 6 && tap.busy == 0)
        #expect(tap.destination(width: 200, height: 200) == nil, "larger than the ring: the caller's own memory")
        #expect(tap.destination(width: 0, height: 64) == nil)
    }

    /// A stage that keeps a picture for longer than the ring lasts keeps its slot: the tap neither hands it out
    /// nor copies into it (the kept picture stays intact), and counts what it could not publish.
    @Test func aSlotAStageStillHoldsIsNeverWritten() throws {
        let tap = try Self.tap("held", slots: 4)
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        var kept: I420Buffer? = try #require(tap.destination(width: 33, height: 17))
        Self.fill(kept!, 1)
        #expect(tap.publish(kept!, timestampNs: 1) == 1)
        var bytes: [UInt8] = []
        #expect(reader.next(into: &bytes)?.header.sequence == 1)
        for n in 2...4 {
            let p = try #require(tap.destination(width: 33, height: 17))
            Self.fill(p, n)
            #expect(tap.publish(p, timestampNs: Int64(n)) == UInt64(n))
        }
        // Slot 1 % 4 comes round again: still held.
        #expect(tap.destination(width: 33, height: 17) == nil)
        #expect(tap.publish(Self.picture(5), timestampNs: 5) == nil, "not copied over the kept picture either")
        #expect(tap.busy == 1)
        #expect(kept!.packedBytes() == Self.picture(1).packedBytes(), "the kept picture is unchanged")
        kept = nil
        let p = try #require(tap.destination(width: 33, height: 17), "let go: the slot is handed out again")
        Self.fill(p, 6)
        #expect(tap.publish(p, timestampNs: 6) == 5)
        var last: UInt64 = 0
        while let got = reader.next(into: &bytes) { last = got.header.sequence }
        #expect(last == 5 && bytes == Self.picture(6).packedBytes())
    }

    /// A picture handed out and never published (dropped on the way) costs readers one missed frame, never a frame
    /// of garbage; one published after a later frame is not published (numbers only rise).
    @Test func aSlotHandedOutAndNotPublishedIsMissedNotRead() throws {
        let tap = try Self.tap("abandoned")
        defer { tap.close() }
        let reader = try FrameTapReader(socketPath: tap.socketPath)
        var bytes: [UInt8] = []
        do {
            let dropped = try #require(tap.destination(width: 33, height: 17))
            Self.fill(dropped, 99)
        }
        #expect(tap.publish(Self.picture(2), timestampNs: 2) == 2, "the next frame is copied in, numbered after it")
        let got = try #require(reader.next(into: &bytes))
        #expect(got.header.sequence == 2 && got.missed == 1 && bytes == Self.picture(2).packedBytes())
        // Handed out (3), then a later picture copied (4) before it is published: 3 is dropped.
        let late = try #require(tap.destination(width: 33, height: 17))
        Self.fill(late, 3)
        #expect(tap.publish(Self.picture(4), timestampNs: 4) == 4)
        #expect(tap.publish(late, timestampNs: 3) == nil)
        #expect(tap.busy == 1)
        let next = try #require(reader.next(into: &bytes))
        #expect(next.header.sequence == 4 && next.missed == 1 && bytes == Self.picture(4).packedBytes())
        #expect(reader.next(into: &bytes) == nil)
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
