// PipeWire frames read in place (#52's "not yet", the one-pass rule): a frame is PipeWire's buffer itself, mapped by
// the stream, given back when the last consumer lets it go; two buffers always stay with PipeWire, frames beyond
// are copied, and a frame held past the stream's end still reads its bytes.
import Foundation
import PipeWireCapture
import Testing
import TestSupport
import VideoCapture

/// Checks each frame in the callback, as it comes (no copy), and keeps the first `hold` frames as they are.
private final class InPlaceChecker: @unchecked Sendable {
    // @unchecked: all state behind `lock`.
    private let lock = NSLock()
    private var held: [VideoFrame] = []
    private(set) var borrowed = 0, copied = 0, failures: [String] = []
    private var seen = 0
    private var drops: [FrameDropReason: Int] = [:]
    private var releaseAfter: Int?
    /// Whether each frame, in order, was read in place.
    private var inPlace: [Bool] = []
    let hold: Int

    init(hold: Int = 0, releaseAfter: Int? = nil) {
        self.hold = hold
        self.releaseAfter = releaseAfter
    }

    var sink: FrameSink {
        FrameSink(
            frame: { [self] f in
                let check = verify(f)
                lock.withLock {
                    seen += 1
                    inPlace.append(f.buffer.storage.isBorrowed)
                    if f.buffer.storage.isBorrowed { borrowed += 1 } else { copied += 1 }
                    if case .failure(let e) = check { failures.append("\(e)") }
                    if held.count < hold && releaseAfter.map({ seen <= $0 }) ?? true { held.append(f) }
                    if let r = releaseAfter, seen == r { held.removeAll() }
                }
            },
            dropped: { [self] reason, n in lock.withLock { drops[reason, default: 0] += n } },
            failed: { [self] e in lock.withLock { failures.append("failed: \(e)") } })
    }

    var count: Int { lock.withLock { seen } }
    var frames: [VideoFrame] { lock.withLock { held } }
    var order: [Bool] { lock.withLock { inPlace } }
    var problems: [String] { lock.withLock { failures } }
    var dropped: [FrameDropReason: Int] { lock.withLock { drops } }
    func releaseHeld() { lock.withLock { held.removeAll() } }
}

@Suite(.serialized) struct PipeWireZeroCopyTests {
    struct Case: Sendable, CustomStringConvertible {
        var format: PixelFormat
        var size: FrameSize
        var arguments: [String]
        var description: String { "\(format) \(size) \(arguments.joined(separator: " "))" }
    }

    /// Every frame released at once is PipeWire's buffer, read in place, with the producer's bytes where its chunk
    /// put them (padded rows, chunk offsets, a data block per plane); with `zeroCopy` off every frame is copied.
    @Test(arguments: [
        Case(format: .yuyv, size: FrameSize(width: 320, height: 240), arguments: ["--pad", "96", "--offset", "40"]),
        Case(format: .i420, size: FrameSize(width: 320, height: 240), arguments: ["--pad", "128", "--offset", "16"]),
        Case(format: .nv12, size: FrameSize(width: 640, height: 480), arguments: ["--pad", "64"]),
        Case(format: .i420, size: FrameSize(width: 320, height: 240), arguments: ["--pad", "32", "--offset", "24", "--separate-planes"]),
    ])
    func framesAreReadInPlace(_ c: Case) throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "inplace-cam", c.arguments)
        for zeroCopy in [true, false] {
            let provider = PipeWireCameraProvider(configuration: .init(remote: session.socket, startTimeoutMs: 8000, zeroCopy: zeroCopy))
            let device = try #require(try provider.device(for: "pipewire:inplace-cam"))
            let checker = InPlaceChecker()
            let stream = try provider.openStream(
                device: device, request: StreamRequest(pixelFormat: c.format, size: c.size, fps: 30), sink: checker.sink)
            defer { stream.stop() }
            #expect(waitUntil(timeout: 10) { checker.count >= 20 }, "\(checker.count) frames")
            stream.stop()
            #expect(checker.problems.isEmpty, "\(c) zeroCopy \(zeroCopy): \(checker.problems.prefix(3))")
            if zeroCopy {
                #expect(checker.borrowed == checker.count && checker.copied == 0, "\(c): \(checker.borrowed) read in place, \(checker.copied) copied")
            } else {
                #expect(checker.borrowed == 0 && checker.copied == checker.count, "\(c): \(checker.borrowed) read in place with zeroCopy off")
            }
            print("PipeWire in place \(c) zeroCopy \(zeroCopy): \(checker.borrowed) read in place, \(checker.copied) copied")
        }
    }

    /// A consumer that holds frames: buffers are lent while two stay with PipeWire, then frames are copied into the
    /// private buffers, then dropped as `.buffersHeld`; the camera keeps running on the buffers left. Frames held
    /// past the stream's end still read the producer's bytes. Once the held frames go, frames are read in place
    /// again (their buffers went back to PipeWire).
    @Test func heldFramesAreLentWhileTwoBuffersStayThenCopiedAndOutliveTheStream() throws {
        let session = try PipeWireSession()
        defer { session.close() }
        try session.startCamera(name: "held-cam", ["--pad", "64"])
        let provider = session.provider()
        let device = try #require(try provider.device(for: "pipewire:held-cam"))
        let request = StreamRequest(pixelFormat: .yuyv, size: FrameSize(width: 320, height: 240), fps: 30)

        // Another consumer of the camera runs throughout: the producer goes on filling the same buffers after the
        // first stream has given its kept ones back.
        let other = Collector(keep: 1000)
        let otherStream = try provider.openStream(device: device, request: request, sink: other.sink)
        defer { otherStream.stop() }

        // Phase one: hold everything; the stream stops with the frames still held.
        let holder = InPlaceChecker(hold: 100)
        let stream = try provider.openStream(device: device, request: request, sink: holder.sink)
        defer { stream.stop() }
        #expect(waitUntil(timeout: 10) { (holder.dropped[.buffersHeld] ?? 0) >= 3 }, "\(holder.count) frames, \(holder.dropped)")
        // While the stream runs and the producer goes on for the other consumer, the lent buffers stay ours.
        func check(_ frames: [VideoFrame], _ when: String) -> [UInt32] {
            var numbers: [UInt32] = []
            for f in frames {
                switch verify(f) {
                case .success(let v):
                    numbers.append(v.number)
                    #expect(UInt64(v.number) == f.sequence, "\(when): frame \(f.sequence) reads frame \(v.number)'s bytes")
                case .failure(let e): Issue.record("\(when): \(e)")
                }
            }
            return numbers
        }
        let running = other.count
        #expect(waitUntil(timeout: 10) { other.count >= running + 30 }, "the other consumer: \(other.count) frames")
        _ = check(holder.frames, "while streaming")
        stream.stop()
        let held = holder.frames
        let lent = held.filter { $0.buffer.storage.isBorrowed }.count
        // pw-test-camera offers 2...8 buffers (4 by default): all but two are lent, the private buffers (4) take the rest.
        #expect((1...6).contains(lent) && held.count == lent + 4, "\(lent) lent, \(held.count) held, \(holder.dropped)")
        #expect(holder.order.prefix(lent).allSatisfy { $0 }, "the first frames are lent: \(holder.order.prefix(8))")
        // After the stream is gone and the producer has filled its buffers again (30 frames for the other consumer),
        // every held frame still reads what the producer wrote for it.
        let otherBefore = other.count
        #expect(waitUntil(timeout: 10) { other.count >= otherBefore + 30 }, "the other consumer: \(other.count) frames")
        let numbers = check(held, "after stop")
        #expect(numbers.count == held.count && zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "\(numbers)")
        holder.releaseHeld()

        // Phase two: hold the first 5 frames (lent, then copied), then let them all go: the lent buffers go back to
        // PipeWire, and the frames after are read in place again.
        let checker = InPlaceChecker(hold: 5, releaseAfter: 5)
        let again = try provider.openStream(device: device, request: request, sink: checker.sink)
        defer { again.stop() }
        #expect(waitUntil(timeout: 10) { checker.count >= 40 }, "\(checker.count) frames")
        again.stop()
        let after = checker.order.dropFirst(8)
        #expect(after.filter { $0 }.count == after.count, "after the release: \(after.filter { $0 }.count) of \(after.count) read in place")
        #expect(checker.problems.isEmpty, "\(checker.problems.prefix(3))")
        print(
            "PipeWire held frames: \(lent) lent + 4 copied held past the stream's end, \(holder.dropped[.buffersHeld] ?? 0) dropped; after the release \(after.count) of \(after.count) in place"
        )
    }
}
