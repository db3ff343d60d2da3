import ArgumentParser
import CapturePipeline
import Foundation
import V4L2Capture
import VideoCapture

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
        let node = try encoder.encoderNode(for: "record")
        if let node, !node.encodesH264 { try checkCodedStream(node) }
        // Zero copy: a camera whose frames the encoder takes as they are is started with its buffers exported (in the
        // formats the encoder imports; the session negotiates once), and each is queued to the encoder as DMA-BUF (the
        // picture the encoder sees is then the camera's, unprocessed).
        let imports = capture.processing.isEmpty && !applyRotation && adapt == nil ? node.map(importableFormats) ?? [] : []
        let pipeline = try capture.session(waitsForCamera: segmentSeconds != nil, exportDMABuf: imports)
        if pipeline.selection.frameKind == .accessUnit && frameTrace != nil {
            throw ValidationError("--frame-trace needs decoded pictures, and \(pipeline.device.path) delivers H.264 that is recorded as it comes")
        }
        let importing = node.flatMap { importableFormat(pipeline, $0) }.flatMap { imports.contains($0) ? $0 : nil }
        var c = try configuration()
        if let node { c.encoder.backend = m2mBackend(node, importing: importing) }
        if let fixture = try encoder.fixtureEncoder() { c.encoder.backend = fixtureBackend(fixture) }
        let stages: [any PictureStage]
        if let node, !node.encodesH264 {
            stages = try codedStreamStages(pipeline, node, c)
        } else {
            stages = try validating { try Recorder(session: pipeline, configuration: c) }.stages
        }
        pipeline.frameTrace = frameTrace.map { _ in FrameTrace(for: pipeline.configuration) } // room for every frame of the run
        try await capture.run(pipeline, "recording", stages: stages, dataOnStandardOutput: output == "-" || preview == "-")
        if let trace = pipeline.frameTrace, let frameTrace { try trace.writeCSV(to: frameTrace) }
    }

    /// An encoder whose coded format is not H.264 (vicodec's FWHT) writes its frames in `v4l2-ctl`'s
    /// `--stream-to-hdr` layout: the options of MP4 and Annex-B files are refused by name.
    private func checkCodedStream(_ node: M2MEncoderNode) throws {
        let format = node.codedFormat
        let refused: [(Bool, String)] = [
            (container != nil, "--container"), (segmentSeconds != nil, "--segment-seconds"), (keep != nil, "--keep"),
            (maxNalSize != nil, "--max-nal-size"), (adapt != nil, "--adapt"), (output == "-", "-o -"),
        ]
        if let (_, option) = refused.first(where: \.0) {
            throw ValidationError("\(option) is for H.264 recordings; \(node.path) encodes \(format), written in v4l2-ctl's --stream-to-hdr layout")
        }
        let ext = (output as NSString).pathExtension.lowercased()
        if ["mp4", "h264", "264"].contains(ext) {
            throw ValidationError(
                "-o \(output): \(node.path) encodes \(format), written in v4l2-ctl's --stream-to-hdr layout, not .\(ext); name the file e.g. capture.\(format.description.lowercased())"
            )
        }
    }

    /// The stages of a coded-stream recording: the encode to the framed file, and the preview.
    private func codedStreamStages(_ pipeline: CaptureSession, _ node: M2MEncoderNode, _ c: Recorder.Configuration) throws -> [any PictureStage] {
        let settings = try validating { try c.encoder.settings(for: pipeline.selection) }
        let file = try FramedStreamOutput(path: output, codedFormatName: node.codedFormat.description)
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: c.encoder.keyIntervalSeconds, outputs: [file])
        c.encoder.applyBackend(to: encode)
        var stages: [any PictureStage] = [encode]
        do {
            if let preview { stages.append(try Y4MStage(path: preview)) }
            if let n = snapshotEvery {
                stages.append(try SnapshotStage(every: n, path: SnapshotStage.numbered((output as NSString).deletingPathExtension + "-snapshot.jpg")))
            }
        } catch {
            for s in stages { s.discard() }
            throw error
        }
        return stages
    }
}
