public import VideoCapture
public import RTP
public import Recording
import VideoProcessing

// What the stages and their outputs did in a run, as figures: each stage returns its kind's report
// (`PictureStage.report`, `EncodedOutput.report`), and the summary's text is written here, in one place, from
// them. An app reads the figures from `CaptureSession.Report.stages` instead of parsing the summary.

/// What a stage did in a run (`PictureStage.report`): one case per kind of stage of this module, and `lines` for a
/// stage of another module or an app's, which states its summary itself.
public enum StageReport: Sendable {
    /// An `EncodeStage`.
    case encode(EncodeReport)
    /// A `TieredEncodeStage`: each tier's encode stage, full size first.
    case tiers([(tier: EncodeTier, report: EncodeReport)])
    /// A `PassthroughStage`.
    case passthrough(PassthroughReport)
    /// A `ProcessStage`.
    case processing(ProcessingReport)
    /// A `Y4MStage`: the file and the pictures written to it.
    case y4m(path: String, frames: Int)
    /// An `I420FileStage`: the file, the pictures written and their size (nil before the first).
    case i420(path: String, frames: Int, size: FrameSize?)
    /// A `SnapshotStage`: the files written, and the last one's path.
    case snapshots(written: Int, lastPath: String?)
    /// A `FrameTapStage`.
    case frameTap(FrameTapReport)
    /// A stage that counts the pictures it got (`preview`'s): how many, and the last one's size.
    case count(written: Int, size: FrameSize?)
    /// A stage's own text: its part of the summary's `frames:` line, if any, and its summary lines (label, value).
    case lines(frames: String?, [(String, String)])

    /// No report: the stage adds nothing to the summary.
    public static let empty = StageReport.lines(frames: nil, [])
}

/// What an `EncodedOutput` did in a run (`EncodedOutput.report`).
public enum OutputReport: Sendable {
    /// An `AnnexBFileOutput`: its file, bytes and frames on disk.
    case annexB(path: String, bytes: Int64, framesOnDisk: Int)
    /// A `RecordingOutput`.
    case recording(RecordingReport)
    /// An `RTPOutput`.
    case rtp(RTPOutputReport)
    /// An output's own summary lines (label, value): an output of another module or an app's.
    case lines([(String, String)])

    /// No report: the output adds nothing to the summary.
    public static let empty = OutputReport.lines([])
}

/// An `EncodeStage`'s run.
public struct EncodeReport: Sendable {
    /// Frames that gave bytes (not skipped by rate control).
    public var encoded = 0
    /// Frames the rate control skipped.
    public var skipped = 0
    /// Pictures not encoded because no output wanted frames (nobody watching).
    public var notEncoded = 0
    /// Placeholders (dark slates) encoded while the camera was away.
    public var placeholders = 0
    /// Key frames encoded.
    public var keyFrames = 0
    /// The key-frame interval in frames (`H264Encoder.Settings.effectiveKeyFrameInterval`).
    public var keyFrameInterval = 0
    /// The average bitrate, in kbit/s.
    public var averageKbps = 0.0
    /// The target bitrate configured, in kbit/s.
    public var targetKbps = 0
    /// The target bitrate last set (a receiver's REMB, adaptation), in kbit/s.
    public var lastTargetKbps = 0
    /// Encode time percentiles (median and 95th), in milliseconds.
    public var encodeP50Ms = 0.0, encodeP95Ms = 0.0
    /// The encoder ran on its own thread (`EncodeStage.usesEncoderThread`).
    public var onEncoderThread = false
    /// The encoder's size changes, in order ("640x360 at frame 120 (IDR)").
    public var sizeChanges: [String] = []
    /// What the encoder's watchdog did (`ResilientEncoder`: restarts, a fallback), nil when nothing happened: the
    /// summary's `encoder` line.
    public var encoderNote: String?
    /// The stage's outputs.
    public var outputs: [OutputReport] = []
    /// The encoder, when it is not OpenH264 (`VideoEncoder.summaryDescription`: a V4L2 memory-to-memory encoder, its
    /// device, and whether pictures were imported zero-copy or copied in); nil for OpenH264.
    public var encoder: String?
}

/// A `PassthroughStage`'s run: the camera's own H.264, passed on.
public struct PassthroughReport: Sendable {
    /// Access units written to the outputs.
    public var passed = 0
    /// Access units dropped while waiting for the first key frame, and malformed ones dropped.
    public var droppedBeforeKeyFrame = 0, malformed = 0
    /// Key frames passed through.
    public var keyFrames = 0
    /// The average bitrate, in kbit/s.
    public var averageKbps = 0
    /// IDRs that came without SPS/PPS, which were put before them.
    public var parameterSetsInserted = 0
    /// Key frames asked of the camera, and those it could not take.
    public var keyFramesAsked = 0, keyFramesAskedUnanswerable = 0
    /// Bitrates asked of the camera, the last one (bit/s), and those it could not take.
    public var bitratesAsked = 0, lastBitrateAsked = 0, bitratesUnanswerable = 0
    /// Gaps (frames dropped before the stage), each resumed at the next key frame.
    public var gaps = 0
    /// The stage's outputs.
    public var outputs: [OutputReport] = []
}

/// A `ProcessStage`'s run.
public struct ProcessingReport: Sendable {
    /// The processor's name.
    public var processor: String
    /// What happened to late pictures.
    public var backpressure: ProcessingBackpressure
    /// Pictures processed and dropped, the time in the processor and the last output size.
    public var statistics: ProcessStage.Statistics
}

/// A `FrameTapStage`'s run.
public struct FrameTapReport: Sendable {
    /// The tap's socket.
    public var socketPath: String
    /// Frames published.
    public var published: UInt64 = 0
    /// Frames copied into the ring (not converted straight into their slot).
    public var copied: UInt64 = 0
    /// Readers connected in all, and pictures too large for a new ring.
    public var connections = 0, skipped = 0
    /// Pictures not published: their slot was still held by a stage.
    public var busy = 0
    /// Rings made (a larger picture makes a new one).
    public var generation: UInt32 = 0
}

/// A `RecordingOutput`'s run: one file, or a ring of segments.
public struct RecordingReport: Sendable {
    /// The container written.
    public var container: RecordingOutput.Container
    /// The current file (the one file without segments).
    public var path: String
    /// The current file's bytes and frames on disk.
    public var bytes: Int64 = 0, framesOnDisk = 0
    /// MP4 only: fragments written, the duration and frames dropped before the first key frame.
    public var mp4: (fragments: Int, durationNs: Int64, framesDroppedBeforeKeyFrame: Int)?
    /// With segments: the ring's figures (nil for one file).
    public var ring: Ring?
    /// A ring of segments' figures.
    public struct Ring: Sendable {
        /// Segments written, deleted by `keep`, and deleted of earlier runs.
        public var written = 0, deleted = 0, deletedEarlier = 0
        /// Frames in the closed segments.
        public var frames = 0
        /// The last segments closed (at most 100 or `keep`), deleted ones included.
        public var segments: [RecordingOutput.Segment] = []
        /// Earlier runs' files of the ring that hold no frame.
        public var emptyLeftovers = 0
        /// Up to ten of those files (path, bytes).
        public var namedLeftovers: [(path: String, bytes: Int)] = []
    }
}

/// An `RTPOutput`'s run: the sender's statistics, where it sent, its SSRC and RTCP port.
public struct RTPOutputReport: Sendable {
    /// What was sent and what the receivers reported.
    public var statistics: RTPSender.Statistics
    /// Where the stream went.
    public var target: StreamTarget
    /// The stream's SSRC.
    public var ssrc: UInt32
    /// The local port RTCP is sent from.
    public var localRTCPPort: Int
}

// MARK: - The summary's text

extension StageReport {
    /// The stage's part of the summary's `frames:` line ("encoded 150, skipped 0"), if any.
    package var framesText: String? {
        switch self {
        case .encode(let e): e.framesText
        case .tiers(let tiers): tiers.first?.report.framesText
        case .passthrough(let p):
            "passed through \(p.passed) (no encoder)"
                + (p.droppedBeforeKeyFrame > 0 ? ", dropped before a key frame \(p.droppedBeforeKeyFrame)" : "")
                + (p.malformed > 0 ? ", malformed \(p.malformed)" : "")
        case .processing(let p): p.statistics.dropped > 0 ? "processing dropped \(p.statistics.dropped)" : nil
        case .count(let written, _): "written \(written)"
        case .lines(let frames, _): frames
        case .y4m, .i420, .snapshots, .frameTap: nil
        }
    }

    /// The stage's summary lines (label, value).
    package var lines: [(String, String)] {
        switch self {
        case .encode(let e): e.lines
        case .tiers(let tiers):
            (tiers.first?.report.lines ?? [])
                + tiers.enumerated().dropFirst().map { ("tier \($0.offset)", "\($0.element.tier): \($0.element.report.framesText)") }
        case .passthrough(let p): p.lines
        case .processing(let p): [("processing", p.line)]
        case .y4m(let path, let frames): [("y4m", "\(OutputFile.shown(path)) (\(frames) frames)")]
        case .i420(let path, let frames, let size):
            [("i420", "\(OutputFile.shown(path)) (\(frames) frames\(size.map { " of \($0), planes packed" } ?? ""))")]
        case .snapshots(let written, let lastPath): [("snapshots", written == 0 ? "none" : "\(written)\(lastPath.map { ", last \($0)" } ?? "")")]
        case .frameTap(let t):
            [
                (
                    "tap",
                    "\(t.socketPath) (\(t.published) frames published, \(t.connections) readers, \(t.copied) copied"
                        + (t.skipped > 0 ? ", \(t.skipped) too large for a new ring" : "")
                        + (t.busy > 0 ? ", \(t.busy) not published (their slot still held by a stage)" : "")
                        + (t.generation > 1 ? ", \(t.generation) rings (larger pictures)" : "") + ")"
                )
            ]
        case .count(_, let size): [("output size", size.map { "\($0)" } ?? "-")]
        case .lines(_, let lines): lines
        }
    }
}

extension EncodeReport {
    /// "encoded N, skipped N", and the pictures not encoded for want of viewers, and the placeholders.
    var framesText: String {
        "encoded \(encoded), skipped \(skipped)" + (notEncoded > 0 ? ", not encoded (nobody watching) \(notEncoded)" : "")
            + (placeholders > 0 ? ", placeholders \(placeholders) (while the camera was away)" : "")
    }
    /// Key frames, average bitrate against the target, encode time, reconfigurations, and each output's lines.
    var lines: [(String, String)] {
        let named: [(String, String)] = encoder.map { [("encoder", $0)] } ?? []
        return named + [
            ("key frames", "\(keyFrames) (interval \(keyFrameInterval) frames)"),
            (
                "bitrate",
                "\(fmt(averageKbps, 0)) kbps average (target \(targetKbps) kbps\(targetKbps != lastTargetKbps ? ", last \(lastTargetKbps) kbps" : ""))"
            ),
            ("encode time", "p50 \(fmt(encodeP50Ms, 2)) ms, p95 \(fmt(encodeP95Ms, 2)) ms\(onEncoderThread ? ", on the encoder's own thread" : "")"),
        ]
            + (sizeChanges.isEmpty ? [] : [("reconfigured", sizeChanges.joined(separator: ", "))])
            + (encoderNote.map { [("watchdog", $0)] } ?? [])
            + outputs.flatMap(\.lines)
    }
}

extension PassthroughReport {
    /// The camera's stream as passed through: encoders, key frames, what was inserted and asked; then each output's lines.
    var lines: [(String, String)] {
        var lines: [(String, String)] = [
            ("encoder", "none: the camera's own H.264 passed through (0 encoder instances), \(keyFrames) key frames, \(averageKbps) kbps average")
        ]
        var notes: [String] = []
        if parameterSetsInserted > 0 { notes.append("SPS/PPS put before \(parameterSetsInserted) IDRs that came without them") }
        if keyFramesAsked > 0 {
            notes.append(
                "\(keyFramesAsked) key frames asked of the camera"
                    + (keyFramesAskedUnanswerable > 0 ? " (\(keyFramesAskedUnanswerable) it could not take)" : ""))
        }
        if bitratesAsked > 0 {
            notes.append(
                "\(bitratesAsked) bitrates asked of the camera, the last \(lastBitrateAsked / 1000) kbps"
                    + (bitratesUnanswerable > 0 ? " (\(bitratesUnanswerable) it could not take: no bitrate control)" : ""))
        }
        if gaps > 0 { notes.append("\(gaps) gaps (frames dropped before this stage): resumed at the next key frame") }
        if !notes.isEmpty { lines.append(("passthrough", notes.joined(separator: "; "))) }
        return lines + outputs.flatMap(\.lines)
    }
}

extension ProcessingReport {
    /// The `processing` line: the processor, pictures, drops, latency percentiles and the output size.
    var line: String {
        let l = statistics.latency
        let times =
            l.count > 0
            ? ", p50 \(fmt(l.percentileMs(0.5), 2)) ms, p95 \(fmt(l.percentileMs(0.95), 2)) ms, max \(fmt(l.percentileMs(1), 2)) ms"
            : ""
        let size = statistics.lastOutputSize.map { ", output \($0)" } ?? ""
        return "\(processor): \(statistics.processed) pictures, dropped \(statistics.dropped) (backpressure \(backpressure))\(times)\(size)"
    }
}

extension OutputReport {
    /// The output's summary lines (label, value).
    package var lines: [(String, String)] {
        switch self {
        case .annexB(let path, let bytes, let framesOnDisk): [("output", "\(path) (\(bytes) bytes, \(framesOnDisk) frames on disk)")]
        case .recording(let r): r.lines
        case .rtp(let r): r.lines
        case .lines(let lines): lines
        }
    }
}

extension RecordingReport {
    /// The `output` line (one file) or the `segments` lines, and the earlier runs' files of the ring that hold no
    /// frame (`leftover`: 0 bytes or an MP4 header only, what a SIGKILL leaves), never counted as segments.
    var lines: [(String, String)] {
        let kind = container == .mp4 ? "fragmented MP4" : "Annex-B H.264"
        guard let ring else {
            var extra = ""
            if let mp4 {
                extra = ", \(mp4.fragments) fragments, \(fmt(Double(mp4.durationNs) / 1e9, 3)) s"
                if mp4.framesDroppedBeforeKeyFrame > 0 { extra += ", \(mp4.framesDroppedBeforeKeyFrame) frames before the first key frame dropped" }
            }
            return [("output", "\(OutputFile.shown(path)) (\(kind), \(bytes) bytes, \(framesOnDisk) frames on disk\(extra))")]
        }
        let earlier = ring.deletedEarlier > 0 ? " (and \(ring.deletedEarlier) of earlier runs)" : ""
        var lines = [
            (
                "segments",
                "\(ring.written) written (\(kind)), \(ring.written - ring.deleted) kept, \(ring.deleted) deleted\(earlier), \(ring.frames) frames"
            )
        ]
        if ring.written > ring.segments.count {
            lines.append(("segment", "(the last \(ring.segments.count) listed)"))
        }
        for s in ring.segments where !s.deleted {
            lines.append(("segment", "\(s.path): frames \(s.firstFrame)...\(s.firstFrame + s.frames - 1), from \(fmt(Double(s.startNs) / 1e9, 3)) s"))
        }
        let count = ring.emptyLeftovers
        if count > 0 {
            let named = ring.namedLeftovers.map { "\($0.path) (\($0.bytes == 0 ? "0 bytes" : "\($0.bytes) bytes, header only"))" }
            lines.append(
                (
                    "leftover",
                    "\(count) earlier file\(count == 1 ? "" : "s") of this ring hold\(count == 1 ? "s" : "") no frame (cut short by a kill or a power loss: not playable, left as \(count == 1 ? "it is" : "they are"), not counted among the ring's files): "
                        + named.joined(separator: ", ") + (count > named.count ? ", …" : "")
                ))
        }
        return lines
    }
}

extension RTPOutputReport {
    /// The `rtp`, `rtcp` and `feedback` lines: what was sent, what receivers reported, what their feedback asked.
    var lines: [(String, String)] {
        let s = statistics
        return [
            (
                "rtp",
                "\(s.packetsSent) packets, \(s.bytesSent) bytes to \(target) (SSRC \(ssrc), RTCP from port \(localRTCPPort))"
                    + (s.packetsDroppedBySimulation > 0 ? ", \(s.packetsDroppedBySimulation) dropped by --drop-rate" : "")
            ),
            (
                "rtcp",
                "\(s.senderReports) sender reports, \(s.receiverReports) receiver reports, rtt \(s.rttMs.map { fmt($0, 1) + " ms" } ?? "-"), loss \(s.fractionLost.map { fmt($0 * 100, 1) + "%" } ?? "-"), jitter \(s.jitterMs.map { fmt($0, 1) + " ms" } ?? "-")"
            ),
            (
                "feedback",
                "\(s.nacksReceived) NACKs (\(s.retransmissions) retransmitted, \(s.retransmittedBytes) bytes; \(s.nacksIgnored) ignored, \(s.retransmissionsOverBudget) over budget, \(s.nacksBeforeKeyFrame) before a key frame), \(s.keyFrameRequests) key-frame requests (\(s.keyFrameRequestsHonoured) honoured), REMB \(s.rembBitrate.map { "\($0 / 1000) kbps" } ?? "-"), \(s.rtcpErrors) malformed RTCP, \(s.rtcpFromStrangers) RTCP datagrams from elsewhere than the receiver's ports dropped"
                    + (s.rtcpFromStrangers > 0 ? " (to obey a receiver's other socket: --rtcp-from ADDRESS[:PORT])" : "")
                    + (s.rtcpLatchedPort.map { ", RTCP latched to \(bracketedHost(target.host)):\($0)" } ?? "")
            ),
        ]
    }
}
