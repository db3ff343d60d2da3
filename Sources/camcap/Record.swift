import ArgumentParser
import CapturePipeline

struct Record: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record H.264 from a camera: negotiate, capture, convert to I420, encode with OpenH264, write MP4 or Annex-B.",
        discussion: """
            With no arguments: 5 seconds at 1280x720 (up to 30 fps) from the first camera (else the built-in fixture webcam) to \
            capture.mp4: fragmented MP4 that every player and browser opens (`ffplay capture.mp4`); other extensions get raw \
            Annex-B (or --container). Ctrl-C finishes the file; a crash loses at most a fragment. Examples:
              camcap record --device /dev/video0 --size 1920x1080 --bitrate 4000 --duration 10 -o talk.mp4
              camcap record --device fixture:vivid --frames 300 --keyint-seconds 1 --preview check.y4m
              camcap record --segment-seconds 60 --keep 10 -o 'cam-%Y%m%d-%H%M%S.mp4' --duration 86400   (a file a minute)
            Guide: docs/record.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(
        name: .shortAndLong,
        help: "Output file (- for standard output: Annex-B, or fragmented MP4 with --container mp4), or with --segment-seconds a strftime pattern.")
    var output = "capture.mp4"
    @Option(
        help: ArgumentHelp("Container (default: from the output's extension).", valueName: "mp4|h264"),
        transform: parsing({ RecordingOutput.Container(rawValue: $0.lowercased()) }, "--container must be mp4 or h264"))
    var container: RecordingOutput.Container?
    @Option(help: "Start a new file at the first key frame after this many seconds (0.5...86400).") var segmentSeconds: Double?
    @Option(help: "With --segment-seconds: keep at most this many files, deleting the oldest (see --keep-scope).") var keep: Int?
    @Option(
        help: ArgumentHelp(
            "Which files --keep counts and deletes: run (this run's only, the default) or pattern (the pattern's files on disk, earlier runs' first).",
            valueName: "run|pattern"),
        transform: parsing({ RecordingOutput.KeepScope(rawValue: $0.lowercased()) }, "--keep-scope must be run or pattern"))
    var keepScope: RecordingOutput.KeepScope = .run
    @Flag(help: "Turn a rotated camera's pixels upright; by default MP4 carries the rotation as display metadata.") var applyRotation = false
    @Option(help: "MP4: the longest fragment in seconds (a key frame also ends one; what a crash can lose).") var fragmentSeconds: Double = 1
    @OptionGroup var encoder: EncoderOptions
    @Option(help: "Frames between key frames (instead of --keyint-seconds).") var keyint: Int?
    @Option(help: "Encoder threads (1-4).") var threads = 1
    @Option(help: "Limit slices to this many bytes (RTP payload budget, e.g. 1200).") var maxNalSize: Int?
    @Flag(help: "Let rate control skip frames (off: every captured frame is encoded).") var frameSkipping = false
    @Option(help: "Also write the I420 fed to the encoder as Y4M (- for standard output).") var preview: String?
    @Option(help: "Write a JPEG snapshot every N frames next to the output.") var snapshotEvery: Int?
    @Option(
        help: ArgumentHelp(
            "Replay congestion control's requests on frame timestamps (0s:1280x720@30,3s:640x360@15/600).", valueName: "TIME:WxH@FPS[/KBPS],…"))
    var adapt: String?
    @Option(help: ArgumentHelp("Write per-frame stage times as CSV (real time only).", valueName: "file")) var frameTrace: String?

    func validate() throws {
        if keyint != nil && encoder.keyintSeconds != nil { throw ValidationError("give either --keyint or --keyint-seconds, not both") }
        if output == "-" && preview == "-" { throw ValidationError("-o and --preview cannot both be standard output (-)") }
        // The schedule, the snapshots, the output and the encoder's limits (OpenH264's), before the output or the
        // camera is touched.
        try validating { try configuration().validate(frameRate: capture.fpsLimit.doubleValue) }
    }

    /// The recording the options describe: the output, the encoder recipe (`--keyint-seconds` or `--keyint`, slices,
    /// threads) and what else to write.
    private func configuration() throws -> Recorder.Configuration {
        var recipe = encoder.recipe(sliceMode: maxNalSize.map { .maxNALSize($0) } ?? .single)
        if let keyint { recipe.keyFrameInterval = .frames(keyint) }
        (recipe.threads, recipe.frameSkipping) = (threads, frameSkipping)
        var r = RecordingOutput.Configuration(path: output, container: container)
        (r.segmentSeconds, r.keep, r.fragmentSeconds, r.keepScope) = (segmentSeconds, keep, fragmentSeconds, keepScope)
        var c = Recorder.Configuration(output: r, encoder: recipe)
        (c.adapt, c.previewPath) = (try adapt.map { try AdaptSchedule(parsing: $0) }, preview)
        (c.snapshotEvery, c.applyRotation) = (snapshotEvery, applyRotation)
        return c
    }

    func execute() async throws {
        // Everything is checked before the camera starts: device, negotiation, encoder settings, outputs.
        let pipeline = try capture.session(waitsForCamera: segmentSeconds != nil)
        if pipeline.selection.frameKind == .accessUnit && frameTrace != nil {
            throw ValidationError("--frame-trace needs decoded pictures, and \(pipeline.device.path) delivers H.264 that is recorded as it comes")
        }
        let recorder = try validating { try Recorder(session: pipeline, configuration: configuration()) }
        pipeline.frameTrace = frameTrace.map { _ in FrameTrace(for: pipeline.configuration) } // room for every frame of the run
        try await capture.run(pipeline, "recording", stages: recorder.stages, dataOnStandardOutput: output == "-" || preview == "-")
        if let trace = pipeline.frameTrace, let frameTrace { try trace.writeCSV(to: frameTrace) }
    }
}
