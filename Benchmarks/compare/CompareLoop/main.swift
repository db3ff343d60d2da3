// The library side of the comparison benchmark (compare.py beside this folder):
//   compare-loop generate YUYV|MJPG WxH FRAMES OUT [NOISE]   writes the raw frames every contender reads
//   compare-loop run YUYV|MJPG WxH FILE BITRATE [OUT [KEY=VALUE ...]]
//                                                             camera → frames() → FrameConverter → EncoderThread (H264Encoder → AnnexBWriter)
//   compare-loop run-inline …                                 the same on one thread: convert and encode in turn
// Both deliver on the camera's thread (`Configuration.delivery = .captureThread`): a delegate converts each frame on
// the thread that captured it, and encodes it there too (run-inline) or hands the picture to the EncoderThread
// (run), as loop.c's stages=1 and stages=2 do. `run-async` and `run-inline-async` are the same loops fed through
// the capturer's delivery thread and `frames()` instead (an async consumer: two more thread hand-offs per frame).
//   compare-loop decode MJPG WxH FILE OUTWxOUTH [full]       MJPEG to a smaller I420 picture, nothing else: FrameConverter
//                                                             with `scale` (the reduced DCT), or with `full` a full-size
//                                                             decode and then the scale (the way without it); compare.py --scaled
// `run` replays the file's frames zero-copy (a mapped file, one FrameStorage per frame) through a capture
// provider, so the loop is the one an application writes; it prints the frame count and the loop's seconds.
// The encoder settings compare.py passes (complexity=low|medium|high, max-bitrate=N, intra-period=N, threads=N,
// frame-skip=on|off) go into H264Encoder.Settings; the parameters OpenH264 then holds are read back and printed on
// stderr as "effective: ..." (the line loop.c prints for the C contender). With REPLAY_WAITS set, the replay camera
// prints how often it had to wait for a frame to be released (a driver queue running dry; 0 in every mode measured).
import Foundation
import VideoCapture
import VideoProcessing
import FixtureCameras
import H264
import Recording
import Synchronization

/// An `AnnexBWriter` that a `@Sendable` closure (the encoder thread's output) can write to.
final class LockedWriter: Sendable {
    private let writer: Mutex<AnnexBWriter>
    init(_ writer: sending AnnexBWriter) { self.writer = Mutex(writer) }
    func write(_ frame: EncodedFrame) throws { try writer.withLock { try $0.write(frame) } }
    func close() throws { try writer.withLock { try $0.close() } }
}

/// The synchronous consumer: converts (and encodes, or hands to the encoder thread) each frame on the thread that
/// captured it. Every frame is delivered on the replay thread, one at a time, so nothing here is shared.
final class InlineLoop: CameraVideoCapturerDelegate, @unchecked Sendable {
    // @unchecked: used only on the camera's thread (`.captureThread` delivery), then read after `done`.
    let converter = FrameConverter()
    let encoder: H264Encoder?
    let thread: EncoderThread?
    let writer: LockedWriter
    let total: Int
    var out = EncodedFrame()
    var count = 0
    var failure: Error?
    let done = DispatchSemaphore(value: 0)
    init(encoder: sending H264Encoder, twoStages: Bool, writer: LockedWriter, total: Int) {
        self.writer = writer
        self.total = total
        if twoStages {
            self.encoder = nil
            thread = EncoderThread(encoder: encoder) { frame in try writer.write(frame) }
        } else {
            self.encoder = encoder
            thread = nil
        }
    }
    func capturer(_ capturer: CameraVideoCapturer, didCapture frame: VideoFrame) {
        guard count < total, failure == nil else { return }
        do {
            let picture = try converter.convert(frame.buffer)
            if let thread {
                try thread.submit(picture, timestampNs: frame.timestampNs)
            } else if let encoder {
                try encoder.encode(picture, timestampNs: frame.timestampNs, into: &out)
                if !out.isSkipped { try writer.write(out) }
            }
        } catch {
            failure = error
            done.signal()
            return
        }
        count += 1
        if count == total { done.signal() }
    }
}

func die(_ s: String) -> Never {
    FileHandle.standardError.write(Data((s + "\n").utf8))
    exit(2)
}

func parseSize(_ s: String) -> FrameSize {
    let p = s.split(separator: "x").compactMap { Int($0) }
    guard p.count == 2, (16...4096).contains(p[0]), (16...4096).contains(p[1]) else { die("bad size \(s)") }
    return FrameSize(width: p[0], height: p[1])
}

func parseFormat(_ s: String) -> PixelFormat {
    switch s {
    case "YUYV": return .yuyv
    case "MJPG": return .mjpeg
    default: die("format must be YUYV or MJPG, got \(s)")
    }
}

/// Frames in a file: YUYV back to back, or MJPEG with a `.idx` of little-endian UInt32 lengths.
// @unchecked: a read-only mapping (PROT_READ: a writable private one would copy every page when populated), never unmapped
struct FrameFile: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let spans: [(offset: Int, count: Int)]
    init(path: String, format: PixelFormat, size: FrameSize) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { die("cannot open \(path)") }
        var st = stat()
        fstat(fd, &st)
        let length = Int(st.st_size)
        guard length > 0, let m = mmap(nil, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0), m != MAP_FAILED else { die("cannot map \(path)") }
        close(fd)
        base = m
        if format == .yuyv {
            let n = size.width * size.height * 2
            spans = (0..<(length / n)).map { ($0 * n, n) }
        } else {
            guard let idx = FileManager.default.contents(atPath: path + ".idx") else { die("missing \(path).idx") }
            var off = 0
            spans = stride(from: 0, to: idx.count - 3, by: 4).map { i in
                let n = Int(idx[i]) | Int(idx[i + 1]) << 8 | Int(idx[i + 2]) << 16 | Int(idx[i + 3]) << 24
                defer { off += n }
                return (off, n)
            }
        }
    }
}

/// A camera that replays a file's frames as fast as they are consumed, at most `inFlight` ahead.
final class ReplayProvider: CaptureDeviceProvider {
    let file: FrameFile, format: PixelFormat, size: FrameSize
    init(file: FrameFile, format: PixelFormat, size: FrameSize) {
        self.file = file
        self.format = format
        self.size = size
    }
    var device: CaptureDevice { CaptureDevice(uniqueID: "replay", name: "replay", path: "replay:", driver: "replay", busInfo: "replay") }
    func devices() -> [CaptureDevice] { [device] }
    func device(for spec: String) throws(CaptureError) -> CaptureDevice? { spec == "replay:" ? device : nil }
    func formats(of device: CaptureDevice) throws(CaptureError) -> [CaptureFormat] {
        [CaptureFormat(pixelFormat: format, size: .discrete(size), intervals: .discrete([Fraction(1, 30)]))]
    }
    func openStream(device: CaptureDevice, request: StreamRequest, sink: FrameSink) throws(CaptureError) -> any CaptureStream {
        ReplayStream(file: file, format: format, size: size, sink: sink)
    }
}

final class ReplayStream: CaptureStream, @unchecked Sendable {
    // @unchecked: the storages are touched only by the replay thread after init; `stopRequested` is atomic.
    let applied: AppliedFormat
    private let stopRequested = Atomic<Bool>(false)
    private let done = Atomic<Bool>(false)
    init(file: FrameFile, format: PixelFormat, size: FrameSize, sink: FrameSink) {
        applied = AppliedFormat(pixelFormat: format, size: size, stride: format == .yuyv ? size.width * 2 : 0, fps: Fraction(30))
        let spans = file.spans
        let t = Thread { [self] in
            // Built here, held only here: a storage is uniquely referenced again once the consumer lets go.
            var storages = spans.map { s in FrameStorage(borrowing: file.base + s.offset, capacity: s.count, release: {}) }
            var i = 0, waits = 0
            let inFlight = 3
            // One pass over the file: every contender encodes each frame once.
            while !stopRequested.load(ordering: .acquiring) && i < storages.count {
                let k = i % storages.count
                // Wait until the frame `inFlight` back is released (a driver's short queue).
                let back = (i - inFlight + storages.count * 4) % storages.count
                if i >= inFlight && !isKnownUniquelyReferenced(&storages[back]) {
                    waits += 1
                    usleep(500)
                    continue
                } // a poll (as a driver queue refills), not a spin: the second core stays free
                let buf = VideoFrameBuffer(
                    pixelFormat: applied.pixelFormat, width: applied.size.width, height: applied.size.height,
                    stride: applied.stride, bytesUsed: spans[k].count, storage: storages[k])
                sink.frame(VideoFrame(buffer: buf, rotation: .rotation0, timestampNs: Int64(i) * 33_333_333 + 1, sequence: UInt64(i)))
                i += 1
            }
            if ProcessInfo.processInfo.environment["REPLAY_WAITS"] != nil {
                FileHandle.standardError.write(Data("replay: \(i) frames, \(waits) waits\n".utf8))
            }
            done.store(true, ordering: .releasing)
        }
        t.start()
    }
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        while !done.load(ordering: .acquiring) { usleep(100) }
    }
}

let args = CommandLine.arguments
guard args.count >= 5 else { die("usage: compare-loop generate|run FORMAT WxH ...") }
let format = parseFormat(args[2]), size = parseSize(args[3])

switch args[1] {
case "generate":
    guard args.count >= 6, let count = Int(args[4]), (1...10_000).contains(count) else { die("generate FORMAT WxH FRAMES OUT [NOISE]") }
    let noise = args.count > 6 ? Int(args[6]) ?? 0 : 0
    guard (0...64).contains(noise) else { die("noise must be 0...64") }
    let out = try OutputFile(path: args[5])
    var lengths: [UInt8] = []
    let picture = I420Buffer(width: size.width, height: size.height)
    let storage = FrameStorage(capacity: FormatWriter.capacity(for: format, width: size.width, height: size.height))
    let writer = FormatWriter()
    for i in 0..<count {
        TestPattern.render(frame: UInt64(i), into: picture, noise: noise)
        let buf = try writer.write(picture, as: format, into: storage)
        try out.write(buf.baseAddress, count: buf.bytesUsed)
        let n = UInt32(buf.bytesUsed)
        lengths += [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)]
    }
    try out.close()
    if format == .mjpeg {
        let idx = try OutputFile(path: args[5] + ".idx")
        try idx.write(lengths)
        try idx.close()
    }
case "run", "run-inline", "run-async", "run-inline-async":
    guard let bitrate = Int(args[5]), (10_000...100_000_000).contains(bitrate) else { die("run FORMAT WxH FILE BITRATE [OUT [KEY=VALUE ...]]") }
    let file = FrameFile(path: args[4], format: format, size: size)
    let total = file.spans.count
    let async = args[1].hasSuffix("-async")
    let capturer = CameraVideoCapturer(
        providers: [ReplayProvider(file: file, format: format, size: size)],
        configuration: .init(maxPendingFrames: 2, alwaysDiscardsLateFrames: false, delivery: async ? .deliveryThread : .captureThread))
    var settings = H264Encoder.Settings(width: size.width, height: size.height)
    settings.targetBitrate = bitrate
    for option in args.dropFirst(7) {
        let kv = option.split(separator: "=", maxSplits: 1).map(String.init)
        guard kv.count == 2 else { die("expected KEY=VALUE, got \(option)") }
        switch (kv[0], kv[1]) {
        case ("complexity", "low"): settings.complexity = .low
        case ("complexity", "medium"): settings.complexity = .medium
        case ("complexity", "high"): settings.complexity = .high
        case ("max-bitrate", let v): settings.maxBitrate = Int(v) ?? -1
        case ("intra-period", let v): settings.keyFrameInterval = Int(v) ?? -1
        case ("threads", let v): settings.threads = Int(v) ?? -1
        case ("frame-skip", let v): settings.frameSkipping = v == "on"
        default: die("unknown setting \(option)")
        }
    }
    let encoder = try H264Encoder(settings: settings)
    FileHandle.standardError.write(Data("effective: \(try encoder.effectiveParameters())\n".utf8))
    // The encoder thread's output is @Sendable: the writer goes behind a lock (uncontended: one writer at a time).
    let writer = LockedWriter(try AnnexBWriter(path: args.count > 6 ? args[6] : "/dev/null"))
    let converter = FrameConverter()
    var out = EncodedFrame()
    let device = try capturer.device("replay:")
    let captureFormat = try capturer.supportedFormats(for: device)[0]
    var n = 0
    var t0 = DispatchTime.now().uptimeNanoseconds
    if !async {
        // The delegate runs on the replay thread from the first frame, which may come before the start returns.
        let loop = InlineLoop(encoder: encoder, twoStages: args[1] == "run", writer: writer, total: total)
        capturer.addDelegate(loop)
        t0 = DispatchTime.now().uptimeNanoseconds
        _ = try await capturer.startCapture(device: device, format: captureFormat, size: size, fps: Fraction(30))
        loop.done.wait()
        if let failure = loop.failure { die("failed: \(failure)") }
        try loop.thread?.finish()
        n = loop.count
    } else if args[1] == "run-inline-async" {
        let stream = capturer.frames(bufferingNewest: 2)
        _ = try await capturer.startCapture(device: device, format: captureFormat, size: size, fps: Fraction(30))
        t0 = DispatchTime.now().uptimeNanoseconds
        // One thread: convert and encode each frame in turn on the consumer's task.
        for try await frame in stream {
            let picture = try converter.convert(frame.buffer)
            try encoder.encode(picture, timestampNs: frame.timestampNs, into: &out)
            if !out.isSkipped { try writer.write(out) }
            n += 1
            if n == total { break }
        }
    } else {
        // Two stages: the consumer converts frame N+1 while the encoder thread encodes and writes frame N.
        let stream = capturer.frames(bufferingNewest: 2)
        _ = try await capturer.startCapture(device: device, format: captureFormat, size: size, fps: Fraction(30))
        t0 = DispatchTime.now().uptimeNanoseconds
        let thread = EncoderThread(encoder: encoder) { frame in try writer.write(frame) }
        for try await frame in stream {
            try thread.submit(try converter.convert(frame.buffer), timestampNs: frame.timestampNs)
            n += 1
            if n == total { break }
        }
        try thread.finish()
    }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
    try await capturer.stopCapture()
    try writer.close()
    print("frames \(n) seconds \(seconds)")
case "decode":
    // One thread, no camera, no encoder: the frames straight from the mapped file, as GStreamer's filesrc reads them.
    guard args.count >= 6, format == .mjpeg else { die("decode MJPG WxH FILE OUTWxOUTH [full]") }
    let file = FrameFile(path: args[4], format: format, size: size)
    let target = parseSize(args[5])
    let full = args.count > 6 && args[6] == "full"
    let converter = FrameConverter(), scaler = FrameConverter()
    var checksum = 0
    let storages = file.spans.map { FrameStorage(borrowing: file.base + $0.offset, capacity: $0.count, release: {}) }
    let t0 = DispatchTime.now().uptimeNanoseconds
    for (span, storage) in zip(file.spans, storages) {
        let buf = VideoFrameBuffer(pixelFormat: .mjpeg, width: size.width, height: size.height, stride: 0, bytesUsed: span.count, storage: storage)
        let picture: I420Buffer
        if full {
            picture = try scaler.convert(try converter.convert(buf).buffer, options: .init(scale: target))
        } else {
            picture = try converter.convert(buf, options: .init(scale: target))
        }
        checksum &+= Int(picture.dataY[picture.strideY * (picture.height / 2) + picture.width / 2]) // the picture is used
    }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
    print("frames \(file.spans.count) seconds \(seconds) checksum \(checksum)")
default:
    die("unknown command \(args[1])")
}
