public import VideoCapture
public import VideoProcessing
import VideoCaptureCommons
import SystemIO
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// A camera session as the driver gave it, in one file: the camera's listing, the mode it applied, and every frame
/// (its bytes, capture timestamp, sequence number and key-frame flag), the drops it reported, and each time the
/// camera was lost (the error) and came back. `CameraTraceWriter` records one from any capturer;
/// `fixture:trace:FILE` replays it through the same capturer API (`FixtureCameraProvider`): the same listing (so the
/// same negotiation), the same bytes, sequence numbers and timestamp steps, the losses at the same frames, in real
/// time or as fast as consumed. A field report becomes a fixture.
///
/// The format (version 1, little endian): `CAMTRACE`, a UInt32 version, a UInt32 header length and the header as
/// JSON (`name`, `listing` as `v4l2-ctl --list-formats-ext` text, `pixelFormat`, `width`, `height`, `stride`,
/// `fps` as "N/D", `rotation`); then records, each a 24-byte head (UInt8 kind, UInt8 flags, UInt16 zero,
/// UInt32 payload length, Int64 timestamp in ns, UInt64 sequence or count) and its payload: kind 1 a frame (flags
/// bit 0: key frame; the payload its bytes), kind 2 frames dropped (the count; the payload the reason), kind 3 the
/// camera lost (the payload `code` NUL `message`). Replaying checks every length before it reads.
public enum CameraTrace {
    /// The format's version; a trace of another is refused, naming both.
    public static let version: UInt32 = 1
    static let magic = Array("CAMTRACE".utf8)
    /// A frame's payload at most (a 4K RGB frame is 48 MB).
    public static let maximumRecordBytes = 64 << 20

    /// What a trace says about its camera.
    public struct Header: Sendable, Equatable {
        /// The camera's name.
        public var name: String
        /// Its formats, as `v4l2-ctl --list-formats-ext` prints them.
        public var listing: String
        /// The mode the driver applied.
        public var applied: AppliedFormat
        /// The rotation its frames carry.
        public var rotation: VideoRotation
        /// A header for `applied` on a camera with `formats`.
        public init(name: String, formats: [CaptureFormat], applied: AppliedFormat, rotation: VideoRotation = .rotation0) {
            self.name = name
            self.listing = FormatListing.text(formats)
            self.applied = applied
            self.rotation = rotation
        }
        init(name: String, listing: String, applied: AppliedFormat, rotation: VideoRotation) {
            (self.name, self.listing, self.applied, self.rotation) = (name, listing, applied, rotation)
        }
    }

    /// One record of a trace.
    public enum Record: Sendable, Equatable {
        /// A frame: its bytes as the driver filled them.
        case frame(bytes: [UInt8], timestampNs: Int64, sequence: UInt64, isKeyFrame: Bool)
        /// Frames the stream reported lost, and why.
        case dropped(count: Int, reason: String, atNs: Int64)
        /// The camera was lost (its error's code and message); the next frame is after it came back.
        case lost(code: String, message: String, atNs: Int64)
    }

    static func headerJSON(_ h: Header) -> String {
        let a = h.applied
        return "{\"name\": \(jsonString(h.name)), \"listing\": \(jsonString(h.listing)), \"pixelFormat\": \(jsonString(a.pixelFormat.fourcc)), "
            + "\"width\": \(a.size.width), \"height\": \(a.size.height), \"stride\": \(a.stride), \"fps\": \"\(a.fps.numerator)/\(a.fps.denominator)\", "
            + "\"rotation\": \(h.rotation.degrees)}"
    }
}

/// Records a trace (`CameraTrace`) of a capturer's camera: add it as a delegate of the capturer before the camera
/// starts, `finish()` after it stops. Every frame's bytes are written as delivered (one copy, into the file's
/// buffer), on the capturer's delivery thread; a write failure is kept (`failure`) and ends the recording, not the
/// capture. Single-planar frames only: a multi-planar camera's frames are refused (`failure` says so).
public final class CameraTraceWriter: CameraVideoCapturerDelegate, Sendable {
    /// The file, only ever touched under the state's lock.
    private final class LockedFile: @unchecked Sendable {
        let file: OutputFile
        init(_ file: OutputFile) { self.file = file }
    }
    private struct State: ~Copyable {
        var file: LockedFile?
        var frames = 0, losses = 0
        var failure: String?
        /// Written at the first frame, which tells the mode the driver applied (size, stride) exactly.
        var headerWritten = false
    }
    private let state: Mutex<State>
    private let name: String, listing: String, fps: Fraction
    /// The trace's path.
    public let path: String

    /// Claims the file (see `OutputFile`: an existing file is replaced only once the trace has a frame) for a
    /// camera named `name` with `formats`, streaming at `fps`. The header is written with the first frame, whose
    /// buffer gives the mode exactly as the driver applied it.
    public init(path: String, name: String, formats: [CaptureFormat], fps: Fraction) throws(ProcessingError) {
        self.path = path
        (self.name, self.listing, self.fps) = (name, FormatListing.text(formats), fps)
        state = Mutex(State(file: LockedFile(try OutputFile(path: path, bufferSize: 1 << 20))))
    }

    /// Frames written so far, and losses.
    public var counts: (frames: Int, losses: Int) { state.withLock { ($0.frames, $0.losses) } }
    /// Why the recording stopped early, if it did.
    public var failure: String? { state.withLock { $0.failure } }

    private func record(
        kind: UInt8, flags: UInt8, payload: UnsafeRawBufferPointer, timestampNs: Int64, sequence: UInt64, first: VideoFrame? = nil
    ) {
        state.withLock { s in
            guard let file = s.file?.file, s.failure == nil else { return }
            // Nothing before the first frame has a header to follow (a loss before any frame is not a session).
            guard s.headerWritten || first != nil else { return }
            do throws(ProcessingError) {
                if !s.headerWritten, let f = first {
                    let b = f.buffer
                    let applied = AppliedFormat(pixelFormat: b.pixelFormat, size: b.size, stride: b.stride, fps: fps)
                    let json = Array(
                        CameraTrace.headerJSON(CameraTrace.Header(name: name, listing: listing, applied: applied, rotation: f.rotation)).utf8)
                    try file.write(CameraTrace.magic + le(CameraTrace.version) + le(UInt32(json.count)) + json)
                    s.headerWritten = true
                }
                var head = [kind, flags, 0, 0] + le(UInt32(truncatingIfNeeded: payload.count))
                head += le(UInt64(bitPattern: timestampNs)) + le(sequence)
                try file.write(head)
                if let base = payload.baseAddress, payload.count > 0 { try file.write(base, count: payload.count) }
                if kind == 1 { s.frames += 1 } else if kind == 3 { s.losses += 1 }
            } catch {
                s.failure = "writing \(path): \(error.message)"
                file.discard()
                s.file = nil
            }
        }
    }

    /// Writes the frame's bytes.
    public func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame) {
        guard frame.buffer.explicitPlanes == nil else {
            state.withLock { $0.failure = $0.failure ?? "a multi-planar frame (\(frame.buffer.pixelFormat)): traces hold single-planar frames" }
            return
        }
        let b = frame.buffer.bytes
        guard b.count <= CameraTrace.maximumRecordBytes else { return }
        record(kind: 1, flags: frame.isKeyFrame ? 1 : 0, payload: b, timestampNs: frame.timestampNs, sequence: frame.sequence, first: frame)
    }

    /// Writes the count and the reason.
    public func capturer(_ capturer: CameraVideoCapturer, didDropFrames count: Int, reason: FrameDropReason) {
        let text = Array("\(reason)".utf8)
        text.withUnsafeBytes { record(kind: 2, flags: 0, payload: $0, timestampNs: monotonicNanoseconds(), sequence: UInt64(max(0, count))) }
    }

    /// Writes the loss (nothing after a stop that was asked for).
    public func capturer(_ capturer: CameraVideoCapturer, didStopWithError error: CaptureError?) {
        guard let error else { return }
        let text = Array(error.code.rawValue.utf8) + [0] + Array(error.message.prefix(4096).utf8)
        text.withUnsafeBytes { record(kind: 3, flags: 0, payload: $0, timestampNs: monotonicNanoseconds(), sequence: 0) }
    }

    /// Closes the file (kept when it holds at least one frame; else removed). Returns the counts.
    @discardableResult
    public func finish() throws(ProcessingError) -> (frames: Int, losses: Int) {
        let (file, frames, losses) = state.withLock { s in
            let f = s.file
            s.file = nil
            return (f, s.frames, s.losses)
        }
        guard let file = file?.file else { return (frames, losses) }
        if frames == 0 {
            file.discard()
        } else {
            try file.close()
        }
        return (frames, losses)
    }
}

private func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }

/// Reads a trace one record at a time, every length checked before the read; a malformed trace is a
/// `FixtureParseError` naming the file and the byte offset.
final class CameraTraceReader {
    let path: String
    private let fd: FileDescriptor
    private(set) var offset = 0
    let header: CameraTrace.Header
    /// Where the first record starts.
    let recordsStart: Int

    init(path: String) throws(FixtureParseError) {
        self.path = path
        let fd: FileDescriptor
        do throws(SystemError) { fd = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) } catch {
            throw FixtureParseError(file: path, line: 0, "cannot open the trace: \(error)")
        }
        self.fd = fd
        var offset = 0
        func fail(_ what: String) -> FixtureParseError { FixtureParseError(file: path, line: 0, "byte \(offset): \(what)") }
        func take(_ n: Int) throws(FixtureParseError) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: n)
            var got = 0
            while got < n {
                let result: Result<Int, SystemError> = out.withUnsafeMutableBytes { b in
                    Result { () throws(SystemError) in try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: b[got...])) }
                }
                let r: Int
                switch result {
                case .success(let n): r = n
                case .failure(let error): throw fail("read failed: \(error)")
                }
                guard r > 0 else { throw fail("the trace ends in the middle of its header") }
                got += r
            }
            offset += n
            return out
        }
        guard (try? take(8)) == CameraTrace.magic else {
            try? fd.close()
            throw FixtureParseError(
                file: path, line: 0,
                "not a camera trace (it does not start with CAMTRACE; record one with a CameraTraceWriter, as `trace record` does)")
        }
        let fixed = try take(8)
        let version = UInt32(fixed[0]) | UInt32(fixed[1]) << 8 | UInt32(fixed[2]) << 16 | UInt32(fixed[3]) << 24
        let length = Int(UInt32(fixed[4]) | UInt32(fixed[5]) << 8 | UInt32(fixed[6]) << 16 | UInt32(fixed[7]) << 24)
        guard version == CameraTrace.version else { throw fail("trace version \(version); this build reads version \(CameraTrace.version)") }
        guard length <= 1 << 20 else { throw fail("a header of \(length) bytes (at most 1 MiB)") }
        let json = String(decoding: try take(length), as: UTF8.self)
        let root = try JSONReader.parse(json, file: path)
        func string(_ key: String) throws(FixtureParseError) -> String {
            guard case .string(let s, _)? = root[key] else { throw fail("the header has no \"\(key)\" string") }
            return s
        }
        func int(_ key: String) throws(FixtureParseError) -> Int {
            guard case .number(let n, _)? = root[key], n.isFinite, n >= 0, n <= 1_048_576, n == n.rounded() else {
                throw fail("the header's \"\(key)\" must be a whole number 0...1048576")
            }
            return Int(n)
        }
        let fpsParts = try string("fps").split(separator: "/")
        guard fpsParts.count == 2, let n = Int64(fpsParts[0]), let d = Int64(fpsParts[1]), n > 0, d > 0, let fps = Fraction(exactly: n, d) else {
            throw fail("the header's \"fps\" must be N/D with both above 0")
        }
        guard let format = PixelFormat(fourcc: try string("pixelFormat")) else { throw fail("the header's \"pixelFormat\" is not a FourCC") }
        let (w, h) = (try int("width"), try int("height"))
        guard w > 0, h > 0 else { throw fail("the header's size \(w)x\(h) is empty") }
        let applied = AppliedFormat(pixelFormat: format, size: FrameSize(width: w, height: h), stride: try int("stride"), fps: fps)
        let rotation = VideoRotation(degrees: try int("rotation")) ?? .rotation0
        header = CameraTrace.Header(name: try string("name"), listing: try string("listing"), applied: applied, rotation: rotation)
        self.offset = offset
        recordsStart = offset
    }

    deinit { try? fd.close() }

    /// The next record, nil at the end of the file.
    func next() throws(FixtureParseError) -> CameraTrace.Record? {
        var head = [UInt8](repeating: 0, count: 24)
        guard try fill(&head, allowEnd: true) else { return nil }
        func u64(_ at: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(head[at + $1]) << (8 * UInt64($1)) } }
        let length = Int(UInt32(head[4]) | UInt32(head[5]) << 8 | UInt32(head[6]) << 16 | UInt32(head[7]) << 24)
        let ts = Int64(bitPattern: u64(8)), seq = u64(16)
        guard length <= CameraTrace.maximumRecordBytes else {
            throw FixtureParseError(
                file: path, line: 0, "byte \(offset - 24): a record of \(length) bytes (at most \(CameraTrace.maximumRecordBytes))")
        }
        var payload = [UInt8](repeating: 0, count: length)
        _ = try fill(&payload, allowEnd: false)
        switch head[0] {
        case 1: return .frame(bytes: payload, timestampNs: ts, sequence: seq, isKeyFrame: head[1] & 1 != 0)
        case 2: return .dropped(count: Int(min(seq, 1 << 30)), reason: String(decoding: payload, as: UTF8.self), atNs: ts)
        case 3:
            let parts = payload.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
            return .lost(
                code: String(decoding: parts.first ?? [], as: UTF8.self), message: String(decoding: parts.count > 1 ? parts[1] : [], as: UTF8.self),
                atNs: ts)
        default: throw FixtureParseError(file: path, line: 0, "byte \(offset - length - 24): an unknown record kind \(head[0])")
        }
    }

    /// Fills `buffer` from the file; false at a clean end (nothing read, `allowEnd`).
    private func fill(_ buffer: inout [UInt8], allowEnd: Bool) throws(FixtureParseError) -> Bool {
        var got = 0
        while got < buffer.count {
            let result: Result<Int, SystemError> = buffer.withUnsafeMutableBytes { b in
                Result { () throws(SystemError) in try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: b[got...])) }
            }
            let r: Int
            switch result {
            case .success(let n): r = n
            case .failure(let error): throw FixtureParseError(file: path, line: 0, "byte \(offset + got): read failed: \(error)")
            }
            if r == 0 {
                if got == 0 && allowEnd { return false }
                throw FixtureParseError(file: path, line: 0, "byte \(offset + got): the trace ends in the middle of a record")
            }
            got += r
        }
        offset += buffer.count
        return true
    }
}

/// A trace being replayed: its reader (where the camera is in it), the clock offset fixed at the first start
/// (replayed timestamps are the trace's plus it: the same steps), and when a camera lost in the trace is back.
final class TracePlayback: Sendable {
    struct State {
        var reader: CameraTraceReader
        var offsetNs: Int64?
        var awayUntilNs: Int64 = 0
        var ended = false
        /// The previous replayed frame's recorded sequence number, and how far replayed drops have moved the
        /// capturer's numbering since (a driver's drop moves it by its count).
        var lastSequence: UInt64?
        var advanced: UInt64 = 0
        /// A record read ahead (the frame after a loss, to know when the camera is back).
        var pending: CameraTrace.Record?
        /// The error reading ahead met: thrown by the next `next()`, so a trace broken after a loss fails its
        /// replay by name when the camera is back, as it would have without the look-ahead.
        var pendingError: FixtureParseError?
        mutating func next() throws(FixtureParseError) -> CameraTrace.Record? {
            if let e = pendingError {
                pendingError = nil
                throw e
            }
            if let p = pending {
                pending = nil
                return p
            }
            return ended ? nil : try reader.next()
        }
    }
    let state: Mutex<State>
    let header: CameraTrace.Header
    let description: CameraDescription
    init(path: String) throws(FixtureParseError) {
        let reader = try CameraTraceReader(path: path)
        header = reader.header
        var d = try CameraDescription.parse(reader.header.listing, file: path + " (its listing)")
        (d.name, d.rotation) = (reader.header.name, reader.header.rotation)
        description = d
        state = Mutex(State(reader: reader))
    }
}

/// One start of a replayed trace: a thread that hands out the trace's frames (each copied once into one of the
/// stream's buffers) at their recorded steps, or as fast as they are consumed, until a recorded loss (the stream
/// fails with it, and the camera is away until its next frame is due) or the end (the camera is then gone).
final class TraceStream: CaptureStream, Sendable {
    let applied: AppliedFormat
    private let stopFlag = StopFlag()
    private let thread = Mutex<WorkerThread?>(nil)
    private let playback: TracePlayback
    private let sink: FrameSink
    private let path: String
    private let realTime: Bool
    private let bufferCount: Int

    init(path: String, playback: TracePlayback, sink: FrameSink, realTime: Bool, bufferCount: Int) {
        (self.path, self.playback, self.sink, self.realTime, self.bufferCount) = (path, playback, sink, realTime, max(2, bufferCount))
        applied = playback.header.applied
        thread.withLock { $0 = WorkerThread(name: "trace-camera", stopFlag: stopFlag) { [self] _ in run() } }
    }

    func stop() {
        if let thread = thread.withLock({ $0 }) { thread.stop() } else { stopFlag.set() }
    }

    private func sleepUntil(_ ns: Int64) { FixtureStream.sleep(until: ns, unless: stopFlag) }

    private func run() {
        var storages: [FrameStorage] = []
        var started = false
        let a = applied
        while !stopFlag.isSet {
            let record: CameraTrace.Record?
            do throws(FixtureParseError) {
                record = try playback.state.withLock { s throws(FixtureParseError) in try s.next() }
            } catch {
                sink.failed(CaptureError(.invalidFixture, error.description, device: path))
                return
            }
            guard let record else {
                playback.state.withLock { $0.ended = true }
                sink.failed(CaptureError(.disconnected, "\(path): the trace ended (its camera is gone)", device: path))
                return
            }
            switch record {
            case .frame(let bytes, let ts, let sequence, let key):
                // The first frame of a start is due now at the latest: after a loss, the camera is back when the
                // session reopened it (its backoff may be longer than the trace's gap), and the frames keep their steps.
                let offset = playback.state.withLock { s in
                    let now = monotonicNanoseconds()
                    if s.offsetNs == nil || (!started && ts &+ s.offsetNs! < now) { s.offsetNs = now &- ts }
                    return s.offsetNs!
                }
                started = true
                let due = ts &+ offset
                // A free buffer (one the consumers let go), else a new one while fewer than `bufferCount` exist; as
                // fast as consumed, wait for one.
                var slot = storages.indices.first { storages[$0].capacity >= bytes.count && isKnownUniquelyReferenced(&storages[$0]) }
                while slot == nil && !stopFlag.isSet {
                    if storages.count < bufferCount {
                        storages.append(FrameStorage(pooledCapacity: max(bytes.count, 1)))
                        slot = storages.count - 1
                    } else if let i = storages.indices.first(where: { isKnownUniquelyReferenced(&storages[$0]) }) {
                        storages[i] = FrameStorage(pooledCapacity: max(bytes.count, 1)) // grown for a larger frame
                        slot = i
                    } else {
                        Sleep.for(nanoseconds: 500_000)
                    }
                }
                guard let slot, !stopFlag.isSet else { return }
                let s = storages[slot]
                bytes.withUnsafeBytes { s.mutableBaseAddress.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
                if realTime { sleepUntil(due) }
                guard !stopFlag.isSet else { return }
                let buffer = VideoFrameBuffer(
                    pixelFormat: a.pixelFormat, width: a.size.width, height: a.size.height, stride: a.stride, bytesUsed: bytes.count, storage: s)
                // The capturer numbers the frames itself, one more each and a driver's drop more by its count: a gap
                // in the recorded numbers (frames the recording's capturer did not hand over) is a drop here, so that
                // every replayed frame gets its recorded number.
                let gap = playback.state.withLock { s -> UInt64 in
                    defer { (s.lastSequence, s.advanced) = (sequence, 0) }
                    let expected = (s.lastSequence.map { $0 &+ 1 } ?? 0) &+ s.advanced // a capturer numbers from 0
                    return sequence > expected ? sequence &- expected : 0
                }
                if gap > 0 { sink.dropped(.driverDropped, Int(clamping: gap)) }
                var frame = VideoFrame(buffer: buffer, rotation: playback.header.rotation, timestampNs: due, sequence: sequence)
                frame.isKeyFrame = key
                sink.frame(frame)
            case .dropped(let count, let reason, _):
                let why = FrameDropReason(rawValue: reason) ?? .driverDropped
                // The recording's own consumers' drops (busy, none subscribed) are not the camera's: those frames are
                // a gap in the numbers, replayed as such at the next frame.
                if why == .consumerBusy || why == .noConsumer { continue }
                if why == .driverDropped || why == .corruptBuffer || why == .shortBuffer {
                    playback.state.withLock { $0.advanced &+= UInt64(max(0, count)) }
                }
                sink.dropped(why, count)
            case .lost(let code, let message, let atNs):
                // Away until the trace's next frame is due (as fast as consumed: back at once).
                let lostAt = playback.state.withLock { s -> Int64 in
                    let offset = s.offsetNs ?? (monotonicNanoseconds() &- atNs)
                    s.offsetNs = offset
                    do throws(FixtureParseError) { s.pending = try s.reader.next() } catch { s.pendingError = error }
                    if realTime, case .frame(_, let ts, _, _)? = s.pending { s.awayUntilNs = ts &+ offset }
                    return atNs &+ offset
                }
                if realTime { sleepUntil(lostAt) }
                sink.failed(CaptureError(CaptureError.Code(rawValue: code), "\(message) (replayed from \(path))", device: path))
                return
            }
        }
    }
}
