package import Metrics

/// What an encoder reports through swift-metrics when it is made with `metricsDimensions` (nothing is recorded
/// unless the app bootstraps a backend, e.g. swift-prometheus):
///   encoder_frames_total, encoder_key_frames_total, encoder_bytes_total, encoder_encode_seconds (a timer:
///   one encode per frame), encoder_target_bitrate_bps (a gauge).
/// The dimensions tell encoders apart (`[("camera", "/dev/video0")]`): two encoders with the same ones add up.
public struct EncoderMetrics: Sendable {
    /// The help text of each metric (a Prometheus exposition gives it as `# HELP`).
    public static let help: [String: String] = [
        "encoder_frames_total": "Frames the H.264 encoder produced.",
        "encoder_key_frames_total": "Key frames (IDR) the encoder produced.",
        "encoder_bytes_total": "Bytes of encoded H.264.",
        "encoder_encode_seconds": "Time to encode one frame.",
        "encoder_target_bitrate_bps": "The encoder's target bitrate, bits per second.",
    ]

    package let frames, keyFrames, bytes: Counter
    package let encode: Metrics.Timer
    package let targetBitrate: Gauge

    /// The metrics with these dimensions (made once: a backend such as Prometheus refuses the same label made
    /// once without dimensions and once with).
    package init(dimensions d: [(String, String)]) {
        frames = Counter(label: "encoder_frames_total", dimensions: d)
        keyFrames = Counter(label: "encoder_key_frames_total", dimensions: d)
        bytes = Counter(label: "encoder_bytes_total", dimensions: d)
        encode = Metrics.Timer(label: "encoder_encode_seconds", dimensions: d)
        targetBitrate = Gauge(label: "encoder_target_bitrate_bps", dimensions: d)
    }

    /// One encoded frame: its count, bytes, key frame and the encoder's own time for it.
    package func record(_ frame: EncodedFrame) {
        frames.increment()
        encode.recordNanoseconds(frame.encodeNs)
        bytes.increment(by: frame.size)
        if frame.isKeyFrame { keyFrames.increment() }
    }
}
