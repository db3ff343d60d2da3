import Foundation
import VideoCapture
import VideoProcessing
import H264

// The stages commands are made of. Each checks its outputs in init (before the camera starts).

/// Encodes every picture with OpenH264 and writes Annex-B (SPS+PPS before every IDR).
final class EncodeStage: PictureStage {
    private var settings: H264Encoder.Settings
    private let writer: AnnexBWriter
    private let targetKbps: Int
    private var encoder: H264Encoder?
    private var out = EncodedFrame()
    private var encodeTime = LatencyHistogram()
    private var encoded = 0, skipped = 0, keyFrames = 0
    private var firstTs: Int64?, lastTs: Int64 = 0, lastFlushTs: Int64?
    private var fps = 30.0
    /// Seconds between key frames, resolved against the applied frame rate in `begin`.
    private let keyIntervalSeconds: Double?

    init(output: String, settings: H264Encoder.Settings, keyIntervalSeconds: Double?) throws {
        self.settings = settings
        self.keyIntervalSeconds = keyIntervalSeconds
        self.targetKbps = settings.targetBitrate / 1000
        writer = try AnnexBWriter(path: output)
    }

    /// The size the encoder gets: the applied size made even (4:2:0).
    static func encodedSize(_ applied: AppliedFormat) -> FrameSize {
        FrameSize(width: applied.size.width & ~1, height: applied.size.height & ~1)
    }

    func begin(_ pipeline: CapturePipeline) throws {
        let size = EncodeStage.encodedSize(pipeline.applied)
        fps = pipeline.applied.fps.fps
        settings.width = size.width; settings.height = size.height
        settings.maxFrameRate = fps
        if let s = keyIntervalSeconds { settings.keyFrameInterval = max(1, Int(min(s * fps, 1e6).rounded())) }
        encoder = try H264Encoder(settings: settings)
        if size != pipeline.applied.size { pipeline.formatNote = ", encoded at \(size)" }
    }

    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        guard let encoder else { return }
        let t0 = monotonicNow()
        try encoder.encode(picture, timestampNs: frame.timestampNs, into: &out)
        encodeTime.add(monotonicNow() - t0)
        if firstTs == nil { firstTs = frame.timestampNs }
        lastTs = frame.timestampNs
        if out.isSkipped { skipped += 1; return }
        encoded += 1
        if out.isKeyFrame { keyFrames += 1 }
        try writer.write(out)
        // Flush about once a second of capture: an interrupted run leaves at most a second unwritten.
        let sinceFlush = lastFlushTs.map { frame.timestampNs - $0 } ?? 0
        if lastFlushTs == nil { lastFlushTs = frame.timestampNs } else if sinceFlush >= 1_000_000_000 { try writer.flush(); lastFlushTs = frame.timestampNs }
    }

    func end() throws {
        defer { encoder?.close() }
        try writer.close()
    }

    private var kbps: Double {
        guard let firstTs else { return 0 }
        let seconds = Double(lastTs - firstTs) / 1e9 + 1 / fps
        return Double(writer.bytesWritten) * 8 / seconds / 1000
    }

    var framesSummary: String? { "encoded \(encoded), skipped \(skipped)" }
    var progress: String? { "\(fmt(kbps, 0)) kbps" }
    var summary: [(String, String)] {
        [("key frames", "\(keyFrames) (interval \(settings.effectiveKeyFrameInterval) frames)"),
         ("bitrate", "\(fmt(kbps, 0)) kbps average (target \(targetKbps) kbps)"),
         ("encode time", "p50 \(fmt(encodeTime.percentileMs(0.5), 2)) ms, p95 \(fmt(encodeTime.percentileMs(0.95), 2)) ms"),
         ("output", "\(writer.path) (\(writer.bytesWritten) bytes)")]
    }
}

/// Writes every picture to a Y4M file (opened at the first picture, whose size it takes).
final class Y4MStage: PictureStage {
    let path: String
    private var writer: Y4MWriter?
    private var fps = Fraction(30)
    init(path: String) throws {
        self.path = path
        try checkWritable(path)
    }
    func begin(_ pipeline: CapturePipeline) throws { fps = pipeline.applied.fps }
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        if writer == nil { writer = try Y4MWriter(path: path, width: picture.width, height: picture.height, fps: fps) }
        try writer!.write(picture)
    }
    func end() throws { try writer?.close() }
    var summary: [(String, String)] { [("y4m", "\(path) (\(writer?.framesWritten ?? 0) frames)")] }
}

/// Still pictures (PNG or JPEG by extension): every N pictures, numbered, or the last picture at the end.
final class SnapshotStage: PictureStage {
    private let every: Int?
    private let path: (Int) -> String
    private var count = 0
    private var written = 0
    private var last: I420Buffer?
    private var lastPath: String?
    private(set) var lastSize: FrameSize?

    /// `path(n)` names the snapshot of picture n (1-based); with `every == nil`, `path(0)` is the one file.
    init(every: Int?, path: @escaping (Int) -> String) throws {
        self.every = every; self.path = path
        _ = try SnapshotWriter.kind(forPath: path(0))
        if every == nil { try checkWritable(path(0)) }
    }
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        count += 1
        lastSize = FrameSize(width: picture.width, height: picture.height)
        if let n = every {
            if count % n == 0 { let p = path(count); try SnapshotWriter.write(picture, to: p); written += 1; lastPath = p }
        } else {
            last = picture
        }
    }
    func end() throws {
        if every == nil, let last { try SnapshotWriter.write(last, to: path(0)); written += 1; lastPath = path(0) }
        last = nil
    }
    var summary: [(String, String)] { [("snapshots", written == 0 ? "none" : "\(written)\(lastPath.map { ", last \($0)" } ?? "")")] }
}

/// Counts the pictures the stages after conversion got (`preview`'s "written N").
final class CountStage: PictureStage {
    private(set) var count = 0
    private var size: FrameSize?
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        count += 1; size = FrameSize(width: picture.width, height: picture.height)
    }
    func end() throws {}
    var framesSummary: String? { "written \(count)" }
    var summary: [(String, String)] { [("output size", size.map { "\($0)" } ?? "-")] }
}
