import ArgumentParser
import VideoCapture
import FixtureCameras
import CapturePipeline

/// `camcap trace record`: a camera session as the driver gave it, to replay as `fixture:trace:FILE`.
struct Trace: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record a camera session (listing, negotiation, every frame's bytes and timestamps, losses) to replay it as a fixture.",
        discussion: """
            A field report becomes a fixture: record what a camera does, then replay it byte for byte with any command \
            (`-d fixture:trace:FILE`), in real time or as fast as consumed (--fast). Guide: docs/cameras.md ("Camera \
            sessions recorded and replayed").
            """,
        subcommands: [TraceRecord.self])
}

struct TraceRecord: CamcapCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Capture from a camera and write every frame as the driver gave it to a trace file.",
        discussion: """
            The camera is negotiated as for any command (--size, --fps-limit, --pixel-format, --constraints); a camera \
            lost on the way is waited for (the loss is in the trace, and replayed). Examples:
              camcap trace record -d /dev/video0 -s 1280x720 --duration 60 -o webcam.camtrace
              camcap record -d fixture:trace:webcam.camtrace -o replayed.mp4       (the same frames, the same steps)
            Traces hold single-planar raw and MJPEG formats (a multi-planar camera, or its own H.264, is refused).
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(name: .shortAndLong, help: "The trace file.") var output = "camera.camtrace"

    func execute() async throws {
        let pipeline = try capture.session(waitsForCamera: true)
        let writer = try validating {
            try CameraTraceWriter(
                path: output, name: pipeline.device.name, formats: try pipeline.capturer.supportedFormats(for: pipeline.device),
                fps: pipeline.selection.fps)
        }
        pipeline.capturer.addDelegate(writer)
        try await capture.run(pipeline, "tracing", stages: [CountStage()])
        let (frames, losses) = try writer.finish()
        if let failure = writer.failure { throw ValidationError("trace: \(failure)") }
        print("trace:        \(output) (\(frames) frames, \(losses) losses; replay: -d fixture:trace:\(output))")
    }
}
