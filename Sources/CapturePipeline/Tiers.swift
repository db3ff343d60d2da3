public import VideoCapture
import VideoProcessing
public import H264

/// One encode tier: a size (the full picture divided by `divisor` a side) and its bitrates, as WebRTC's
/// simulcast layers. Viewers whose link carries less get a smaller tier instead of lowering everyone's picture.
public struct EncodeTier: Sendable, Equatable, CustomStringConvertible {
    /// 1 (full size), 2 (half) or 4 (quarter), a side.
    public var divisor: Int
    /// The tier's size for a full picture of this size: divided, made even, at least 16x16.
    public var size: FrameSize
    /// Below this estimate a viewer does not stay on the tier, bits per second.
    public var minBitrate: Int
    /// The bitrate the tier's encoder aims at when its viewers' links allow it, bits per second.
    public var targetBitrate: Int
    /// The most the tier's encoder is given, bits per second.
    public var maxBitrate: Int

    /// "1280x720 600…2500 kbps".
    public var description: String { "\(size) \(minBitrate / 1000)…\(targetBitrate / 1000) kbps" }

    /// WebRTC's simulcast table (libwebrtc's `kSimulcastFormats`): for a layer of at least this many pixels, the
    /// most layers a stream of that size gets and the layer's max, target and min bitrate in kbps.
    static let simulcastTable: [(width: Int, height: Int, layers: Int, maxKbps: Int, targetKbps: Int, minKbps: Int)] = [
        (1920, 1080, 3, 5000, 4000, 800), (1280, 720, 3, 2500, 2500, 600), (960, 540, 3, 1200, 1200, 350),
        (640, 360, 2, 700, 500, 150), (480, 270, 2, 450, 350, 150), (320, 180, 1, 200, 150, 30), (0, 0, 1, 200, 150, 30),
    ]

    static func row(for size: FrameSize) -> (width: Int, height: Int, layers: Int, maxKbps: Int, targetKbps: Int, minKbps: Int) {
        let pixels = size.width * size.height
        return simulcastTable.first { $0.width * $0.height <= pixels } ?? simulcastTable[simulcastTable.count - 1]
    }

    /// The tiers for a picture of `size`: at most `maxCount` (1...3) and no more than WebRTC's table gives that size
    /// (3 from 960x540 up, 2 from 480x270, 1 below). The full tier takes `targetBitrate` and `maxBitrate` (the
    /// command's), the smaller ones the table's figures for their size; every tier's min is the table's.
    public static func plan(for size: FrameSize, maxCount: Int, targetBitrate: Int, maxBitrate: Int) -> [EncodeTier] {
        let count = max(1, min(maxCount, 3, row(for: size).layers))
        return (0..<count).map { i in
            let divisor = 1 << i
            let tierSize = FrameSize(width: max(16, size.width / divisor & ~1), height: max(16, size.height / divisor & ~1))
            let r = row(for: tierSize)
            if i == 0 {
                return EncodeTier(
                    divisor: 1, size: tierSize, minBitrate: min(r.minKbps * 1000, targetBitrate), targetBitrate: targetBitrate,
                    maxBitrate: max(maxBitrate, targetBitrate))
            }
            return EncodeTier(
                divisor: divisor, size: tierSize, minBitrate: r.minKbps * 1000, targetBitrate: r.targetKbps * 1000, maxBitrate: r.maxKbps * 1000)
        }
    }
}

/// Encodes each picture at up to three sizes (full, half, quarter: `EncodeTier`), one `EncodeStage` per tier, as
/// WebRTC's simulcast does: one capture and one conversion, the smaller tiers scaled from the shared picture into
/// pooled buffers (each from the next larger one). A tier is scaled and encoded only while one of its outputs
/// wants frames (`EncodedOutput.wantsFrames`: a viewer is on it); it starts again with a key frame.
///
/// Tiers run one after the other on the pipeline's task; tiers that `firstTiers` names go first, so that a viewer
/// moving to a tier gets the new tier's key frame of a picture before its old tier's frame of the same picture.
public final class TieredEncodeStage: PictureStage {
    /// The tiers, full size first.
    public let tiers: [EncodeTier]
    /// One encode stage per tier, in the order of `tiers`: their `control`s take key-frame requests and bitrates.
    public let stages: [EncodeStage]
    private let scalers: [FrameConverter]
    private let firstTiers: @Sendable () -> Int?
    private var pictures: [I420Buffer?]

    /// `settings` is the full tier's (its bitrates are replaced by each tier's); `outputs[i]` gets tier i's frames.
    /// `firstTiers` names a tier to encode first for the next picture (nil: full size first).
    public init(
        tiers: [EncodeTier], settings: H264Encoder.Settings, keyIntervalSeconds: Double?, outputs: [[any EncodedOutput]],
        firstTier: @escaping @Sendable () -> Int? = { nil }
    ) {
        precondition(!tiers.isEmpty && tiers.count == outputs.count, "one list of outputs per tier")
        self.tiers = tiers
        stages = zip(tiers, outputs).map { tier, outs in
            var s = settings
            s.width = tier.size.width
            s.height = tier.size.height
            s.targetBitrate = tier.targetBitrate
            s.maxBitrate = tier.maxBitrate
            return EncodeStage(settings: s, keyIntervalSeconds: keyIntervalSeconds, outputs: outs)
        }
        for stage in stages.dropFirst() { stage.notesEncodedSize = false } // the format line names the full tier's size
        scalers = tiers.map { _ in FrameConverter() }
        firstTiers = firstTier
        pictures = Array(repeating: nil, count: tiers.count)
    }

    /// Begins every tier's stage.
    public func begin(_ session: CaptureSession) throws { for s in stages { try s.begin(session) } }

    /// Scales the picture for every tier that has viewers, then encodes the tier named first, then the others from
    /// full size down.
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        pictures[0] = picture
        for i in 1..<max(1, tiers.count) {
            pictures[i] = nil
            guard (i..<tiers.count).contains(where: { stages[$0].wantsFrames }) else { continue } // nobody here or below
            guard let from = pictures[i - 1] else { continue }
            let size = FrameSize(width: max(16, picture.width / tiers[i].divisor & ~1), height: max(16, picture.height / tiers[i].divisor & ~1))
            pictures[i] = try? scalers[i].convert(from.buffer, options: FrameConverter.Options(scale: size))
        }
        let first = firstTiers().flatMap { stages.indices.contains($0) ? $0 : nil }
        if let first, let p = pictures[first] { try stages[first].consume(p, frame: frame) }
        for i in stages.indices where i != first {
            if let p = pictures[i] { try stages[i].consume(p, frame: frame) } else { stages[i].rest() }
        }
        for i in pictures.indices { pictures[i] = nil } // the pooled buffers go back
    }

    /// Ends every tier's stage; throws the first error.
    /// While the camera is away: each tier's slate to its viewers (`EncodeStage.placeholder(timestampNs:)`).
    public func placeholder(timestampNs: Int64) throws -> Bool {
        var sent = false
        for s in stages where try s.placeholder(timestampNs: timestampNs) { sent = true }
        return sent
    }

    public func end() throws {
        var first: Error?
        for s in stages {
            do { try s.end() } catch { first = first ?? error }
        }
        if let first { throw first }
    }
    /// Discards every tier's outputs.
    public func discard() { for s in stages { s.discard() } }
    /// Some tier has an audience.
    public var wantsPictures: Bool { stages.contains { $0.wantsPictures } }
    /// The full tier's progress (the outputs' figures are shared).
    public var progress: String? { stages.first?.progress }
    /// Each tier's encode report, full size first (the summary gives the full tier's, then one line per smaller tier).
    public var report: StageReport { .tiers(zip(tiers, stages).map { ($0, $1.encodeReport) }) }
}
