import Foundation
public import VideoCapture
import VideoProcessing
public import H264
import Recording
import Synchronization
import Metrics

// The stages commands are made of. Each checks its outputs in init (before the camera starts).

/// Where encoded frames go after the encode stage: an Annex-B file, an RTP sender… Claimed in init (before the
/// camera starts); `write` gets every encoded access unit (its `timestampNs` is the capture time).
public protocol EncodedOutput: AnyObject {
    /// False while the output has nobody to send to (a server without viewers): when no output wants frames
    /// the encode stage does not encode, and the first frame after such a pause is a key frame.
    var wantsFrames: Bool { get }
    /// Takes one encoded access unit; a thrown error stops the pipeline.
    func write(_ frame: EncodedFrame) throws
    /// True while someone is or will soon be there to send to (a viewer still connecting counts): while no
    /// output has an audience for a while, the camera may be released (`CaptureSession.Configuration.idleReleaseNs`).
    var hasAudience: Bool { get }
    /// True when `write` may run on the encoder's own thread (see `EncodeStage.usesEncoderThread`).
    var acceptsWritesFromEncoderThread: Bool { get }
    /// Closes the output at the end of a run that encoded frames; reports what could not be written.
    func end() throws
    /// Gives the output up: the run failed before its start, or encoded nothing (no empty file is left).
    func discard()
    /// Live figures for the progress line, if any.
    var progress: String? { get }
    /// What the output did in the run, for the summary (`OutputReport`); read at the end of a run.
    var report: OutputReport { get }
    /// The path of a file this output writes to that has not received a byte (a failed run then says that
    /// nothing was written, not that what was written is playable); nil when it has, or it writes no file.
    var unwrittenFile: String? { get }
    /// True for an output to live viewers (a server's, an RTP sender's, a WHIP publication's): it takes the
    /// placeholders sent while the camera is away (`PictureStage.placeholder(timestampNs:)`). False (the default)
    /// for files, which show the gap instead.
    var takesPlaceholders: Bool { get }
    /// Called by the stage that feeds this output (`EncodeStage`, `PassthroughStage`), when the stage is made,
    /// with the stage's key-frame control: an output that needs key frames at moments of its own (a
    /// `RecordingOutput`'s new segment) keeps it, so that no app has to wire it.
    func connect(keyFrames control: EncoderControl)
}
extension EncodedOutput {
    /// Does nothing: the output needs no key frame of its own.
    public func connect(keyFrames control: EncoderControl) {}
    /// nil: the output writes no file.
    public var unwrittenFile: String? { nil }
    /// Nothing: the output adds nothing to the progress line.
    public var progress: String? { nil }
    /// Nothing: the output adds nothing to the summary.
    public var report: OutputReport { .empty }
    /// False: writes stay on the pipeline's task unless the output says otherwise.
    public var acceptsWritesFromEncoderThread: Bool { false }
    /// Always true: the output takes every frame.
    public var wantsFrames: Bool { true }
    /// The same as `wantsFrames`.
    public var hasAudience: Bool { wantsFrames }
    /// False: a file, or anything that should show a gap where the camera was away.
    public var takesPlaceholders: Bool { false }
}

/// An encoder backend for a recipe (`EncodeStage.Configuration.backend`): its name and how to make it. Two
/// backends are equal when their names are.
public struct EncoderBackend: Sendable, Equatable {
    /// The name, for messages ("OpenH264", "V4L2 M2M /dev/video11").
    public let name: String
    /// Makes the encoder for a stage's settings (the first picture's size) and control.
    public let make: EncodeStage.EncoderFactory
    /// A backend named `name` made by `make`.
    public init(name: String, make: @escaping EncodeStage.EncoderFactory) {
        self.name = name
        self.make = make
    }
    /// OpenH264 (`EncodeStage.openH264`).
    public static let openH264 = EncoderBackend(name: "OpenH264", make: EncodeStage.openH264)
    /// Equal names.
    public static func == (a: EncoderBackend, b: EncoderBackend) -> Bool { a.name == b.name }
}

extension EncodeStage.Configuration {
    /// Makes `stage`'s encoder with this recipe's `backend`: an `EncodeStage`'s, or a `TieredEncodeStage`'s full tier
    /// (the smaller tiers keep OpenH264: tiers may mix encoders). Any other stage is left as it is. Call before the
    /// session runs.
    public func applyBackend(to stage: any PictureStage) {
        guard backend != .openH264 else { return }
        if let encode = stage as? EncodeStage {
            encode.makeEncoder = backend.make
        } else if let tiered = stage as? TieredEncodeStage {
            tiered.stages.first?.makeEncoder = backend.make
        }
    }
}

/// Encodes every picture with one encoder, shared by every output: OpenH264 unless `makeEncoder` gives
/// another `VideoEncoder` (a V4L2 memory-to-memory encoder).
///
/// With `usesEncoderThread` (camcap's `--fast`, when every output takes writes from another thread) the
/// encoder runs on an `EncoderThread`: the pipeline converts frame N+1 while frame N encodes, on the second
/// core. Real-time capture keeps the encoder on the pipeline's task (no hand-off in the latency).
public final class EncodeStage: PictureStage {
    /// The encoder settings: those given, then (at `begin`) the applied frame rate and key interval, then
    /// (at the first picture) its size.
    public private(set) var settings: H264Encoder.Settings
    private let outputs: [any EncodedOutput]
    /// Key frames and bitrates from other threads (RTCP feedback, the adaptation schedule): the encoder takes
    /// them before its next frame.
    public let control = EncoderControl()
    private let targetKbps: Int
    /// The encoder, here or handed to its own thread (made for the first picture).
    private var engine: Engine?
    private enum Engine {
        case inline(any VideoEncoder)
        case thread(EncoderThread)
    }
    /// Makes an encoder for the settings (the first picture's size) with the stage's control.
    public typealias EncoderFactory = @Sendable (_ settings: H264Encoder.Settings, _ control: EncoderControl) throws -> any VideoEncoder
    /// OpenH264: `H264Encoder(settings:control:)`.
    public static let openH264: EncoderFactory = { settings, control in try H264Encoder(settings: settings, control: control) }
    /// Which encoder the stage makes for its first picture: `openH264` unless set before the first picture.
    public var makeEncoder: EncoderFactory = EncodeStage.openH264
    /// The last frame the inline encoder made, for `FrameTrace` (not kept with the encoder thread).
    var lastEncoded: (type: String, bytes: Int, encodeNs: Int64) = ("-", 0, 0)
    /// Ask for the encoder thread (granted when every output accepts writes from it).
    public var usesEncoderThread = false
    /// The encoder ran on its own thread (the summary says so).
    public private(set) var ranOnThread = false
    /// The encoder's `summaryDescription` as it started (nil for OpenH264); the inline encoder's is read live.
    private var encoderDescription: String?
    private var out = EncodedFrame()
    /// Pictures not encoded because no output wanted frames.
    private var idle = 0
    /// The dark slate sent as a placeholder while the camera is away (made once, at the encoder's size), and how
    /// many were sent.
    private var slate: I420Buffer?
    private var placeholders = 0
    private var resumeWithKeyFrame = false
    private var fps = 30.0
    /// Where encoded frames go, on the thread that encoded them.
    private let delivery: Delivery
    private struct Tally {
        /// Bytes of every encoded frame, for the average bitrate (frames, key frames and timings are the
        /// encoder's own statistics).
        var bytes = 0
        var firstTs: Int64?, lastTs: Int64 = 0
        var lastSize: FrameSize?
        var sizeChanges: [String] = []
    }

    /// A new target bitrate (a receiver's REMB): clamped to 10 kbps...the configured cap.
    public static func request(_ bps: Int, on control: EncoderControl, cap: Int) {
        let bitrate = min(max(bps, 10_000), cap)
        try? control.setBitrate(bitrate)
    }

    /// Records a new target in this stage's `encoder_target_bitrate_bps` gauge (with the session's dimensions).
    package var recordTargetBitrate: @Sendable (Int) -> Void {
        { [delivery] bitrate in delivery.metrics.withLock { $0 }?.targetBitrate.record(bitrate) }
    }
    /// The highest bitrate requests may set, bits per second: the settings' `effectiveMaxBitrate`.
    public var bitrateCap: Int { settings.effectiveMaxBitrate }
    /// Seconds between key frames, resolved against the applied frame rate in `begin`.
    private let keyIntervalSeconds: Double?

    /// A stage that encodes with `settings` (the size is taken from the first picture) and writes to `outputs`.
    /// `keyIntervalSeconds` sets the key-frame interval in seconds of the applied frame rate; nil keeps the
    /// settings' own. Nothing is opened here: outputs are claimed when they are made. Each output is connected to
    /// this stage's `control` (`EncodedOutput.connect(keyFrames:)`): a `RecordingOutput`'s segments start with
    /// the key frame it asks for, whatever the key-frame interval.
    public init(settings: H264Encoder.Settings, keyIntervalSeconds: Double?, outputs: [any EncodedOutput]) {
        self.settings = settings
        self.keyIntervalSeconds = keyIntervalSeconds
        self.targetKbps = settings.targetBitrate / 1000
        self.outputs = outputs
        delivery = Delivery(outputs: outputs, control: control)
        for o in outputs { o.connect(keyFrames: control) }
    }

    /// The settings every encoding command starts from: the negotiated size made even, its frame rate, the
    /// bitrate options (kbps).
    public static func baseSettings(for selection: FormatSelection, bitrateKbps: Int, maxBitrateKbps: Int?) -> H264Encoder.Settings {
        var s = H264Encoder.Settings(width: selection.size.width & ~1, height: selection.size.height & ~1)
        s.maxFrameRate = selection.fps.fps
        s.targetBitrate = bitrateKbps * 1000
        s.maxBitrate = maxBitrateKbps.map { $0 * 1000 }
        return s
    }

    /// The size the encoder gets: the applied size made even (4:2:0).
    public static func encodedSize(_ applied: AppliedFormat) -> FrameSize {
        FrameSize(width: applied.size.width & ~1, height: applied.size.height & ~1)
    }

    /// The settings for what the camera applied.
    public static func settings(_ base: H264Encoder.Settings, keyIntervalSeconds: Double?, for applied: AppliedFormat) -> H264Encoder.Settings {
        var s = base
        let size = encodedSize(applied)
        s.width = size.width
        s.height = size.height
        s.maxFrameRate = applied.fps.fps
        if let k = keyIntervalSeconds { s.keyFrameInterval = max(1, Int(min(k * applied.fps.fps, 1e6).rounded())) }
        return s
    }

    /// Checks the settings against what negotiation chose, before any output is claimed or the camera starts
    /// (a 8x8 or 300 fps camera mode fails here with a message, not after the start).
    public static func check(_ base: H264Encoder.Settings, keyIntervalSeconds: Double?, for selection: FormatSelection) throws(PipelineError) {
        do { try settings(base, keyIntervalSeconds: keyIntervalSeconds, for: selection.planned).validate() } catch {
            throw PipelineError(
                .invalidConfiguration, "the camera's \(selection.pixelFormat) \(selection.size) @ \(selection.fps) fps cannot be encoded: \(error)")
        }
    }

    /// The encoder recipe of every encoding command: the bitrates, the key-frame interval, slices, threads and
    /// frame skipping. The size and frame rate come from negotiation: `settings(for:)` makes the encoder settings
    /// for a session's selection and checks them before any output is claimed or the camera starts.
    ///
    /// ```swift
    /// var recipe = EncodeStage.Configuration(bitrateKbps: 1500)
    /// recipe.sliceMode = EncodeStage.Configuration.slices(fitting: 1200) // RTP
    /// let settings = try recipe.settings(for: session.selection)
    /// let encode = EncodeStage(settings: settings, keyIntervalSeconds: recipe.keyIntervalSeconds, outputs: [output])
    /// ```
    public struct Configuration: Sendable, Equatable {
        /// How far apart key frames are.
        public enum KeyFrameInterval: Sendable, Equatable {
            /// Seconds, in frames of the frame rate the camera applies (resolved when the stage begins).
            case seconds(Double)
            /// A number of frames.
            case frames(Int)
        }
        /// The target bitrate in kbps.
        public var bitrateKbps: Int
        /// The highest bitrate in kbps (bandwidth estimates never raise the encoder above it); nil: 1.5 × the target.
        public var maxBitrateKbps: Int?
        /// Key frames every 2 seconds by default.
        public var keyFrameInterval: KeyFrameInterval
        /// How pictures are cut into slices: `.single` for a file, `slices(fitting:)` for RTP.
        public var sliceMode: H264Encoder.SliceMode
        /// Encoder threads (1...4).
        public var threads = 1
        /// Let rate control skip frames (off: every picture is encoded).
        public var frameSkipping = false
        /// Which encoder the stages made from this recipe run (OpenH264 by default).
        public var backend: EncoderBackend = .openH264

        /// A recipe with these bitrates, key-frame interval and slices (one thread, no frame skipping).
        public init(
            bitrateKbps: Int = 1500, maxBitrateKbps: Int? = nil, keyFrameInterval: KeyFrameInterval = .seconds(2),
            sliceMode: H264Encoder.SliceMode = .single
        ) {
            self.bitrateKbps = bitrateKbps
            self.maxBitrateKbps = maxBitrateKbps
            self.keyFrameInterval = keyFrameInterval
            self.sliceMode = sliceMode
        }

        /// Slices that fit an RTP payload budget of `payload` bytes (at least 420): most NAL units then go in one
        /// packet, without FU-A fragments (as WebRTC's encoders do).
        public static func slices(fitting payload: Int) -> H264Encoder.SliceMode { .maxNALSize(max(420, payload)) }

        /// The key-frame interval in seconds (`EncodeStage`'s and `TieredEncodeStage`'s `keyIntervalSeconds`); nil
        /// when it is given in frames (the settings carry it).
        public var keyIntervalSeconds: Double? {
            if case .seconds(let seconds) = keyFrameInterval { seconds } else { nil }
        }

        /// The encoder settings for what negotiation picked (`baseSettings(for:bitrateKbps:maxBitrateKbps:)` and
        /// this recipe), checked by `EncodeStage.check`: a camera mode the encoder cannot take fails here, naming it.
        /// A camera that delivers its own H.264 is passed through, not encoded: its mode is not checked against the
        /// encoder's limits (a 0.001 fps time-lapse camera streams as it records), and the settings' frame rate is
        /// clamped into the encoder's 1...240 fps (only the bitrates are used then).
        public func settings(for selection: FormatSelection) throws(PipelineError) -> H264Encoder.Settings {
            var s = EncodeStage.baseSettings(for: selection, bitrateKbps: bitrateKbps, maxBitrateKbps: maxBitrateKbps)
            if case .frames(let n) = keyFrameInterval { s.keyFrameInterval = n }
            s.sliceMode = sliceMode
            s.threads = threads
            s.frameSkipping = frameSkipping
            if selection.frameKind == .accessUnit {
                s.maxFrameRate = Swift.min(240, Swift.max(1, s.maxFrameRate.isFinite ? s.maxFrameRate : 30))
                return s
            }
            try EncodeStage.check(s, keyIntervalSeconds: keyIntervalSeconds, for: selection)
            return s
        }
    }

    /// Refuses a camera that delivers its own H.264 (`PictureStage.check(_:)`), then takes the applied frame
    /// rate and the key interval into the settings.
    public func begin(_ session: CaptureSession) throws {
        try check(session)
        settings = EncodeStage.settings(settings, keyIntervalSeconds: keyIntervalSeconds, for: session.applied)
        let metrics = EncoderMetrics(dimensions: session.metricsDimensions)
        delivery.metrics.withLock { $0 = metrics }
        metrics.targetBitrate.record(settings.targetBitrate)
        fps = settings.maxFrameRate
        self.session = session
    }
    private weak var session: CaptureSession?
    /// Whether the encoded size goes into the summary's format line (a smaller encode tier's does not: the line
    /// names the full tier's).
    var notesEncodedSize = true

    /// The encoder is made for the first picture's size (the source decided it: rotation applied, made even,
    /// adapted), so it is never rebuilt at frame 1; later sizes (adaptation) reconfigure it.
    private func start(_ picture: I420Buffer, colorSpace: VideoColorSpace) throws {
        var s = settings
        s.width = picture.width
        s.height = picture.height
        s.colorSpace = colorSpace
        let encoder = try makeEncoder(s, control)
        encoderDescription = encoder.summaryDescription
        settings = s
        if notesEncodedSize, let session, FrameSize(width: s.width, height: s.height) != session.applied.size {
            session.formatNote = ", encoded at \(s.width)x\(s.height)"
        }
        if usesEncoderThread && outputs.allSatisfy(\.acceptsWritesFromEncoderThread) {
            // Handed over: from here only the thread touches the encoder (the compiler checks it).
            engine = .thread(EncoderThread(encoder: encoder) { [delivery] frame in try delivery.deliver(frame) })
            ranOnThread = true
        } else {
            engine = .inline(encoder)
        }
    }

    /// The encoder's outputs have an audience (a server with viewers, connected or connecting).
    public var wantsPictures: Bool { outputs.contains { $0.hasAudience } }
    /// Some output wants encoded frames now (`EncodedOutput.wantsFrames`): `consume` encodes.
    public var wantsFrames: Bool { outputs.contains { $0.wantsFrames } }
    /// A picture this stage does not get (nobody wants its frames: a tier without viewers): counted as not
    /// encoded, and the next picture encoded is a key frame.
    public func rest() {
        idle += 1
        resumeWithKeyFrame = true
    }

    /// Encodes a picture and writes it to every output (or hands it to the encoder thread). Without an output
    /// that wants frames nothing is encoded, and the next frame encoded is a key frame.
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        guard wantsFrames else { return rest() }
        if engine == nil { try start(picture, colorSpace: frame.colorSpace) }
        if resumeWithKeyFrame || frame.isDiscontinuity { // back from idle, or a camera started or switched
            resumeWithKeyFrame = false
            control.requestKeyFrame()
        }
        if frame.colorSpace != settings.colorSpace { // another camera: its colours from this frame's SPS on
            settings.colorSpace = frame.colorSpace
            control.setColorSpace(frame.colorSpace)
        }
        delivery.tally.withLock { t in
            if t.firstTs == nil { t.firstTs = frame.timestampNs }
            t.lastTs = frame.timestampNs
        }
        switch engine {
        case nil: break
        case .thread(let thread):
            try thread.submit(picture, timestampNs: frame.timestampNs, rotation: frame.rotation)
        case .inline(let encoder):
            try encoder.encode(picture, frame: frame, into: &out)
            out.rotation = frame.rotation
            lastEncoded = (out.isSkipped ? "skip" : out.isKeyFrame ? "I" : "P", out.isSkipped ? 0 : out.size, out.encodeNs)
            if out.isSkipped { return }
            try delivery.deliver(out)
        }
    }

    /// While the camera is away: a dark slate at the encoder's size, encoded and written to the outputs that take
    /// placeholders (live viewers; never a file). The next camera picture is then a key frame, so an output that did
    /// not take the slates decodes on. Nothing is sent before the first picture, on the encoder's own thread, or
    /// when no live output wants frames.
    public func placeholder(timestampNs: Int64) throws -> Bool {
        guard case .inline(let encoder) = engine, outputs.contains(where: { $0.takesPlaceholders && $0.wantsFrames }) else { return false }
        let size = encoder.settings
        if slate.map({ $0.width != size.width || $0.height != size.height }) ?? true {
            let s = I420Buffer(width: size.width, height: size.height) // once per away time at most, not per frame
            if let p = s.writablePlanes {
                p.y.update(repeating: 40, count: s.strideY * s.height)
                p.u.update(repeating: 128, count: s.strideU * s.chromaHeight)
                p.v.update(repeating: 128, count: s.strideV * s.chromaHeight)
            }
            slate = s
        }
        guard let slate else { return false }
        try encoder.encode(slate, timestampNs: timestampNs, into: &out)
        resumeWithKeyFrame = true
        if out.isSkipped { return false }
        for o in outputs where o.takesPlaceholders && o.wantsFrames { try o.write(out) }
        placeholders += 1
        return true
    }

    /// An encoded frame to every output, with the metrics and the tally, on the thread that encoded it.
    private final class Delivery: @unchecked Sendable {
        // @unchecked: `outputs` are not Sendable. They are written by one thread at a time: the pipeline's, or,
        // only when every output `acceptsWritesFromEncoderThread`, the encoder thread until `EncoderThread.finish()`
        // has joined it. Everything else here is Sendable.
        let outputs: [any EncodedOutput]
        let control: EncoderControl
        /// What the encoded frames amounted to; written where the encoder runs, read by the progress line.
        let tally = Mutex(Tally())
        /// encoder_frames_total, encoder_key_frames_total, encoder_bytes_total, encoder_encode_seconds,
        /// encoder_target_bitrate_bps (swift-metrics; see `SessionMetrics`).
        /// Made by `begin` with the session's dimensions (the camera). None before: a metric made without
        /// dimensions and then with them is refused by a Prometheus registry (it traps).
        let metrics = Mutex<EncoderMetrics?>(nil)

        init(outputs: [any EncodedOutput], control: EncoderControl) {
            self.outputs = outputs
            self.control = control
        }

        func deliver(_ out: EncodedFrame) throws {
            metrics.withLock { $0 }?.record(out) // the encoder's own time for the frame, on either thread
            let stats = control.statistics // published by the encoder before it returned this frame
            let size = stats.size, encoded = stats.frames - stats.skipped
            tally.withLock { t in
                t.bytes += out.size
                if size != t.lastSize {
                    if t.lastSize != nil { t.sizeChanges.append("\(size) at frame \(encoded)\(out.isKeyFrame ? " (IDR)" : "")") }
                    t.lastSize = size
                }
            }
            for o in outputs { try o.write(out) }
        }
    }

    /// Finishes the encoder thread, then ends every output (or discards them when nothing was encoded). Throws
    /// the first error met.
    public func end() throws {
        defer { if case .inline(let encoder) = engine { encoder.close() } } // a thread closes its encoder itself
        var first: Error?
        if case .inline(let encoder) = engine { // what a hardware encoder still holds (its drain), delivered
            do { try encoder.finish { [delivery] frame in try delivery.deliver(frame) } } catch { first = error }
        }
        if case .thread(let thread) = engine {
            do { try thread.finish() } catch { first = error } // from now on its control has the final statistics
        }
        for o in outputs {
            if encoded == 0 {
                o.discard()
                continue
            } // nothing encoded: an existing file keeps its contents
            do { try o.end() } catch { first = first ?? error }
        }
        if let first { throw first }
    }

    /// Stops the encoder and discards every output.
    public func discard() {
        if case .thread(let thread) = engine { try? thread.finish() }
        for o in outputs { o.discard() }
        if case .inline(let encoder) = engine { encoder.close() }
    }

    /// The encoder's counters: its own while it runs here, through its control while it runs on its thread (the
    /// exact percentiles once the thread has finished).
    private var stats: EncoderStatistics {
        switch engine {
        case .inline(let encoder): encoder.statistics
        case .thread: control.statistics
        case nil: EncoderStatistics()
        }
    }
    /// Frames that gave bytes (not skipped by rate control).
    private var encoded: Int { stats.frames - stats.skipped }

    private var settingsKbps: Int {
        switch engine {
        case .inline(let encoder): encoder.settings.targetBitrate / 1000
        case .thread: (control.statistics.frames > 0 ? control.statistics.targetBitrate : settings.targetBitrate) / 1000
        case nil: settings.targetBitrate / 1000
        }
    }

    private var kbps: Double {
        let t = delivery.tally.withLock { $0 }
        guard let firstTs = t.firstTs else { return 0 }
        let seconds = Double(t.lastTs - firstTs) / 1e9 + 1 / fps
        return Double(t.bytes) * 8 / seconds / 1000
    }

    /// The average bitrate so far, then each output's progress.
    public var progress: String? { (["\(fmt(kbps, 0)) kbps"] + outputs.compactMap(\.progress)).joined(separator: "  ") }
    /// Frames encoded and skipped, key frames, average bitrate against the target, encode time, reconfigurations,
    /// and each output's report.
    public var encodeReport: EncodeReport {
        let stats = self.stats
        var r = EncodeReport()
        (r.encoded, r.skipped, r.notEncoded, r.placeholders) = (stats.frames - stats.skipped, stats.skipped, idle, placeholders)
        (r.keyFrames, r.keyFrameInterval) = (stats.keyFrames, settings.effectiveKeyFrameInterval)
        (r.averageKbps, r.targetKbps, r.lastTargetKbps) = (kbps, targetKbps, settingsKbps)
        (r.encodeP50Ms, r.encodeP95Ms, r.onEncoderThread) = (stats.encodeP50Ms, stats.encodeP95Ms, ranOnThread)
        r.sizeChanges = delivery.tally.withLock { $0.sizeChanges }
        r.encoderNote = stats.watchdog
        switch engine {
        case .inline(let encoder): r.encoder = encoder.summaryDescription
        case .thread(let thread): r.encoder = thread.summaryDescription ?? encoderDescription // its final one once finished
        case nil: r.encoder = encoderDescription
        }
        r.outputs = outputs.map(\.report)
        return r
    }
    /// `.encode(encodeReport)`.
    public var report: StageReport { .encode(encodeReport) }
    /// The first output's file that has not received a byte.
    public var unwrittenFile: String? { outputs.lazy.compactMap(\.unwrittenFile).first }
}

/// An Annex-B `.h264` file (SPS+PPS before every IDR), flushed about once a second of capture so that an
/// interrupted recording keeps all but the last second.
public final class AnnexBFileOutput: EncodedOutput {
    private let writer: AnnexBWriter
    /// Written by one thread at a time (the encoder's, once `end` has joined it, or the pipeline's).
    public var acceptsWritesFromEncoderThread: Bool { true }
    /// Claims `path` at once (see `AnnexBWriter.init(path:)`): an unwritable or busy path throws before the camera
    /// starts.
    public init(path: String) throws { writer = try AnnexBWriter(path: path, flushPolicy: .recording) }
    /// Appends the frame; flushes about once a second of capture time (`AnnexBWriter.FlushPolicy.recording`).
    public func write(_ frame: EncodedFrame) throws { try writer.write(frame) }
    /// Flushes, syncs and closes the file.
    public func end() throws { try writer.close() }
    /// Gives the file up; an existing file keeps its contents.
    public func discard() { writer.discard() }
    /// The file, its bytes and frames on disk (the summary's `output` line).
    public var report: OutputReport { .annexB(path: writer.path, bytes: writer.bytesWritten, framesOnDisk: writer.framesOnDisk) }
    /// The path while no byte has reached it.
    public var unwrittenFile: String? { writer.bytesWritten == 0 ? writer.path : nil }
}

/// Writes every picture to a Y4M file (claimed before the camera starts; the header takes the first picture's size).
public final class Y4MStage: PictureStage {
    /// The Y4M file's path.
    public let path: String
    private let file: OutputFile
    private var writer: Y4MWriter?
    private var fps = Fraction(30)
    /// Claims `path` at once (see `OutputFile`); nothing is truncated before the first frames are flushed.
    public init(path: String) throws {
        self.path = path
        file = try OutputFile(path: path) // opened and locked, not truncated until the first frames are flushed
    }
    /// Takes the applied frame rate for the Y4M header.
    public func begin(_ session: CaptureSession) throws { fps = session.applied.fps }
    /// Appends a picture; the first one's size goes into the header, and a later one of another size throws.
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        if writer == nil { // the header's range is the frames' (MJPEG decodes to full range)
            writer = try Y4MWriter(file: file, width: picture.width, height: picture.height, fps: fps, fullRange: frame.colorSpace.range == .full)
        }
        try writer!.write(picture)
    }
    /// Closes the file, or discards it when no picture came.
    public func end() throws {
        guard let writer else {
            file.discard()
            return
        }
        try writer.close()
    }
    /// Gives the file up; an existing file keeps its contents.
    public func discard() { file.discard() }
    /// The file and the pictures written (the summary's `y4m` line).
    public var report: StageReport { .y4m(path: path, frames: writer?.framesWritten ?? 0) }
}

/// Raw I420 pictures, one after the other with their planes packed (Y, then U, then V; no header): what
/// `ffmpeg -f rawvideo -pix_fmt yuv420p -video_size WxH -i -` and a numpy reader take. `-` is standard output. The
/// size is the first picture's; a later picture of another size throws (a raw stream cannot say it changed).
public final class I420FileStage: PictureStage {
    /// The file's path (`-`: standard output).
    public let path: String
    private let file: OutputFile
    private var size: FrameSize?
    private var frames = 0
    /// Claims `path` at once (see `OutputFile`).
    public init(path: String) throws {
        self.path = path
        file = try OutputFile(path: path, bufferSize: 1 << 20)
    }
    /// Appends the picture's planes, row by row (no allocation).
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        let s = FrameSize(width: picture.width, height: picture.height)
        if size == nil { size = s }
        guard s == size else {
            throw ProcessingError(.invalidSize, "raw I420 to \(path): a \(s) picture after \(size!) ones (a raw stream has one size)")
        }
        func rows(_ p: UnsafePointer<UInt8>, _ stride: Int, _ width: Int, _ height: Int) throws {
            for r in 0..<height { try file.write(p + r * stride, count: width) }
        }
        try rows(picture.dataY, picture.strideY, picture.width, picture.height)
        try rows(picture.dataU, picture.strideU, picture.chromaWidth, picture.chromaHeight)
        try rows(picture.dataV, picture.strideV, picture.chromaWidth, picture.chromaHeight)
        frames += 1
    }
    /// Closes the file, or discards it when no picture came.
    public func end() throws {
        guard frames > 0 else { return file.discard() }
        try file.close()
    }
    /// Gives the file up; an existing file keeps its contents.
    public func discard() { file.discard() }
    /// The file, the pictures and their size (the summary's `i420` line: what a reader needs to know).
    public var report: StageReport { .i420(path: path, frames: frames, size: size) }
}

/// Still pictures (PNG or JPEG by extension): every N pictures, numbered, or the last picture at the end. Each is
/// converted with its frame's colour description (`SnapshotWriter`): black is 0 and white 255 in the file whether
/// the camera is full range (MJPEG) or limited.
public final class SnapshotStage: PictureStage {
    private let every: Int?
    private let path: (Int) -> String
    private var count = 0
    private var written = 0
    private var last: I420Buffer?
    private var lastColorSpace = VideoColorSpace.bt601
    private var lastPath: String?
    /// The size of the last picture seen.
    public private(set) var lastSize: FrameSize?

    /// The one snapshot file (with `every == nil`), claimed before the camera starts.
    private let single: OutputFile?

    /// Names for `init(every:path:)` from one path: `path` itself for the one snapshot (n = 0), else the picture's
    /// number in six digits before the extension ("shot.png" → "shot-000030.png").
    public static func numbered(_ path: String) -> (Int) -> String {
        let stem = (path as NSString).deletingPathExtension, ext = (path as NSString).pathExtension
        return { n in n == 0 ? path : "\(stem)-\(String(format: "%06d", n))" + (ext.isEmpty ? "" : ".\(ext)") }
    }

    /// `path(n)` names the snapshot of picture n (1-based); with `every == nil`, `path(0)` is the one file.
    public init(every: Int?, path: @escaping (Int) -> String) throws {
        self.every = every
        self.path = path
        _ = try SnapshotWriter.kind(forPath: path(0))
        single = every == nil ? try OutputFile(path: path(0)) : nil
    }
    /// Writes every `every`-th picture, or keeps the picture for the end.
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        count += 1
        lastSize = FrameSize(width: picture.width, height: picture.height)
        if let n = every {
            if count % n == 0 {
                let p = path(count)
                try SnapshotWriter.write(picture, colorSpace: frame.colorSpace, to: p)
                written += 1
                lastPath = p
            }
        } else {
            last = picture
            lastColorSpace = frame.colorSpace
        }
    }
    /// Writes the last picture to the single file (discarded if no picture came).
    public func end() throws {
        defer { last = nil }
        guard let single else { return }
        guard let last else {
            single.discard()
            return
        }
        try SnapshotWriter.write(last, colorSpace: lastColorSpace, to: single)
        written += 1
        lastPath = single.path
    }
    /// Gives up the single file; an existing one keeps its contents.
    public func discard() { single?.discard() }
    /// How many were written, and the last one's path (the summary's `snapshots` line).
    public var report: StageReport { .snapshots(written: written, lastPath: lastPath) }
}

/// Counts the pictures the stages after conversion got (`preview`'s "written N").
package final class CountStage: PictureStage {
    package init() {}
    package private(set) var count = 0
    private var size: FrameSize?
    package func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        count += 1
        size = FrameSize(width: picture.width, height: picture.height)
    }
    package func end() throws {}
    package var report: StageReport { .count(written: count, size: size) }
}

/// What the pipeline reads from a negotiated format.
extension FormatSelection {
    /// What the camera is asked for, as the applied format it should give (checks before the start use it).
    public var planned: AppliedFormat { AppliedFormat(pixelFormat: pixelFormat, size: size, stride: 0, fps: fps) }
}

extension H264Encoder {
    /// The size being encoded (its settings'), without building the statistics (whose percentiles walk a histogram).
    package var size: FrameSize { FrameSize(width: settings.width, height: settings.height) }
}
