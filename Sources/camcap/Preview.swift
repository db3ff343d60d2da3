import ArgumentParser
import VideoCapture
import VideoProcessing
import CapturePipeline

struct Preview: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capture, convert to I420 (scale/rotate) and dump: a Y4M stream and/or still snapshots.",
        discussion: """
            Play the Y4M with `ffplay preview.y4m` or `mpv preview.y4m`. Snapshots are PNG or JPEG by extension; with \
            --snapshot-every N, the frame number is inserted before the extension.
            Example: camcap preview --device fixture:iphone --size 1280x720 --rotate 90 --y4m out.y4m --frames 60
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(help: "Write the converted frames as Y4M (- for standard output: `| ffplay -`).") var y4m: String?
    @Option(help: "Write the converted frames as raw I420, planes packed, no header (- for standard output: a numpy reader, `ffmpeg -f rawvideo`).")
    var i420: String?
    @Option(help: "Write a still picture (.png, .jpg) of the last frame (or every N frames with --snapshot-every).") var snapshot: String?
    @Option(help: "Snapshot every N frames.") var snapshotEvery: Int?
    @Option(
        help: ArgumentHelp(
            "Rotate the pixels by 0, 90, 180 or 270 degrees (default 0; after the camera's own with --apply-rotation).", valueName: "degrees"),
        transform: parsing({ Int($0).flatMap(VideoRotation.init(rawValue:)) }, "--rotate must be 0, 90, 180 or 270"))
    var rotate = VideoRotation.rotation0
    @Flag(help: "Apply the rotation the camera reports to the pixels (else it stays metadata).") var applyRotation = false
    @Flag(help: "Mirror horizontally (a selfie preview).") var mirror = false
    @Option(help: "Scale the output to this size (after rotation).") var scale: FrameSize?

    func validate() throws {
        try checkSize(scale, "--scale")
        if let n = snapshotEvery, n <= 0 { throw ValidationError("--snapshot-every must be positive, got \(n)") }
        if y4m == "-" && i420 == "-" { throw ValidationError("--y4m and --i420 cannot both be standard output (-)") }
        if let s = snapshot { do { _ = try SnapshotWriter.kind(forPath: s) } catch { throw ValidationError(error.description) } }
    }

    func execute() async throws {
        let pipeline = try capture.session()
        if pipeline.selection.frameKind == .accessUnit { // pictures needed: a camera's own H.264 is refused by name
            throw ValidationError(
                "preview: \(pipeline.device.path) delivers H.264 (\(pipeline.selection)); only `record`, `stream`, `rtsp`, `serve` and `publish` pass a camera's own H.264 through: use one of them, or ask for a raw or MJPEG format with --pixel-format (see `camcap formats -d \(pipeline.device.path)`)"
            )
        }
        var stages: [any PictureStage] = [CountStage()]
        if let y4m { stages.append(try Y4MStage(path: y4m)) }
        if let i420 { stages.append(try I420FileStage(path: i420)) }
        if let snapshot { stages.append(try SnapshotStage(every: snapshotEvery, path: SnapshotStage.numbered(snapshot))) }
        // The source turns, mirrors and scales every frame once; with --apply-rotation the camera's own rotation
        // first.
        pipeline.sourceOptions = VideoSource.Options(applyRotation: applyRotation, rotation: rotate, mirror: mirror, size: scale)
        try await capture.run(pipeline, "preview", stages: stages, dataOnStandardOutput: y4m == "-" || i420 == "-")
    }
}
