package import Metrics

/// What capture reports through swift-metrics: a `VideoSource` made with `Options.metricsDimensions` records
/// them (the capture → `VideoSource` → encoder path of an RTC stack), and so does a `CaptureSession` (with its
/// own dimensions). Nothing is recorded unless the app bootstraps a backend (e.g. swift-prometheus):
///   capture_frames_total, capture_frames_dropped_total (late, consumer busy, driver drops),
///   capture_frames_undecodable_total, capture_conversion_seconds (a timer: one conversion per frame).
/// The dimensions tell cameras apart (`[("camera", "/dev/video0")]`): two sources with the same ones add up.
public struct CaptureMetrics: Sendable {
    /// The help text of each metric (a Prometheus exposition gives it as `# HELP`).
    public static let help: [String: String] = [
        "capture_frames_total": "Frames captured: converted and passed on, or only dequeued while nobody wants pictures.",
        "capture_frames_dropped_total": "Frames the capturer dropped (late, consumer busy, driver drops).",
        "capture_frames_undecodable_total": "Captured frames that could not be converted (a corrupt JPEG, a short buffer).",
        "capture_conversion_seconds": "Time to convert one captured frame to I420.",
        "capture_camera_losses_total": "Times the camera was lost mid-run (unplugged, failed, stalled).",
        "capture_camera_recoveries_total": "Times a lost camera delivered again and the run carried on.",
        "capture_camera_away_seconds": "How long a lost camera was away before it delivered again.",
        "capture_source_changes_total": "Times the camera's source changed (size or signal) and the run negotiated again.",
    ]

    package let frames, droppedFrames, undecodable: Counter
    package let conversion: Metrics.Timer
    package let cameraLosses, cameraRecoveries, sourceChanges: Counter
    package let cameraAway: Metrics.Timer

    /// The metrics with these dimensions (made once: a backend such as Prometheus refuses the same label made
    /// once without dimensions and once with).
    package init(dimensions d: [(String, String)]) {
        frames = Counter(label: "capture_frames_total", dimensions: d)
        droppedFrames = Counter(label: "capture_frames_dropped_total", dimensions: d)
        undecodable = Counter(label: "capture_frames_undecodable_total", dimensions: d)
        conversion = Metrics.Timer(label: "capture_conversion_seconds", dimensions: d)
        cameraLosses = Counter(label: "capture_camera_losses_total", dimensions: d)
        cameraRecoveries = Counter(label: "capture_camera_recoveries_total", dimensions: d)
        cameraAway = Metrics.Timer(label: "capture_camera_away_seconds", dimensions: d)
        sourceChanges = Counter(label: "capture_source_changes_total", dimensions: d)
    }
}
