import Foundation
public import VideoCapture
import H264
import VideoProcessing

/// A session recorded to a file, its stages made in one call: what `camcap record` runs. For a camera that gives
/// pictures: the encode (an ``EncodeStage`` with the recipe, on a thread of its own when the session is
/// `fast`, so the next frame converts meanwhile), the ``RecordingOutput`` (a new segment asks the encoder for a
/// key frame: the stage connects it), an ``AdaptSchedule`` replayed with the encoder following, a Y4M of what is encoded and JPEG
/// snapshots next to the output. For a camera that delivers H.264: its access units recorded as they come
/// (``PassthroughStage``), with no decoder and no encoder.
///
/// ```swift
/// let recorder = try Recorder(session: session, configuration: .init(output: .init(path: "clip.mp4")))
/// let report = try await session.run(stages: recorder.stages)
/// ```
public struct Recorder {
    /// What to record, and what else to write.
    public struct Configuration: Sendable {
        /// The file (or segments); a frame rate not given is the camera's.
        public var output: RecordingOutput.Configuration
        /// The encoder recipe (unused for a camera's own H.264).
        public var encoder: EncodeStage.Configuration
        /// A schedule of size, frame-rate and bitrate requests replayed on frame timestamps; nil: none.
        public var adapt: AdaptSchedule?
        /// Also write the I420 fed to the encoder here, as Y4M; nil: not.
        public var previewPath: String?
        /// A JPEG snapshot every this many frames, next to the output (`NAME-snapshot-000030.jpg`); nil: none.
        public var snapshotEvery: Int?
        /// Turn a rotated camera's pixels upright before they are encoded (the session's
        /// `VideoSource.Options.applyRotation`); false: the recording carries the rotation as display metadata.
        public var applyRotation = false

        /// A recording to `output` with `encoder`, nothing else.
        public init(output: RecordingOutput.Configuration, encoder: EncodeStage.Configuration = EncodeStage.Configuration()) {
            self.output = output
            self.encoder = encoder
        }

        /// Checks `snapshotEvery` (1...100000000), the output (`RecordingOutput.Configuration.validate()`) and
        /// the recipe at `frameRate` (`EncodeStage.Configuration.validate(frameRate:)`), before a file is made.
        /// A refusal is a `PipelineError` with code `invalidConfiguration`.
        public func validate(frameRate: Double = 30) throws(PipelineError) {
            try PipelineError.refuse([("snapshotEvery", snapshotEvery.flatMap { SettingCheck.range("snapshotEvery", $0, 1...100_000_000) })])
            try output.validate()
            try encoder.validate(frameRate: frameRate)
        }
    }

    /// The stages to run in the session, in order.
    public let stages: [any PictureStage]
    /// The recording.
    public let file: RecordingOutput

    /// Makes the stages for `session`'s selection (the files are created now: a bad path fails before the camera
    /// starts). A camera that delivers H.264 with `adapt`, `previewPath`, `snapshotEvery` or `applyRotation` given
    /// is refused (`invalidConfiguration` naming the setting: they need decoded pictures); otherwise the encoder's
    /// settings for the camera's mode are checked (`EncodeStage.Configuration.settings(for:)`) and `applyRotation`
    /// is set on the session's source.
    public init(session: CaptureSession, configuration c: Configuration) throws {
        var output = c.output
        output.frameRate = output.frameRate ?? session.selection.fps
        if session.selection.frameKind == .accessUnit {
            for (given, setting) in [
                (c.adapt != nil, "adapt"), (c.previewPath != nil, "previewPath"), (c.snapshotEvery != nil, "snapshotEvery"),
                (c.applyRotation, "applyRotation"),
            ] where given {
                throw PipelineError(
                    .invalidConfiguration,
                    "\(setting) needs decoded pictures, and \(session.device.path) delivers H.264 that is recorded as it comes (no decoder, no encoder): leave it out, or ask the camera for another pixel format",
                    setting: setting)
            }
            file = try RecordingOutput(output)
            let stage = PassthroughStage(outputs: [file])
            stages = [stage]
            return
        }
        let settings = try c.encoder.settings(for: session.selection)
        if c.applyRotation { session.sourceOptions.applyRotation = true }
        file = try RecordingOutput(output)
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: c.encoder.keyIntervalSeconds, outputs: [file])
        // As fast as frames come (a fixture with `fast`): encode on a thread of its own, so the next frame converts
        // meanwhile. Real time: on the pipeline's task, for the shortest capture-to-bytes latency.
        encode.usesEncoderThread = session.configuration.fast
        c.encoder.applyBackend(to: encode)
        var stages: [any PictureStage] = [encode]
        if let adapt = c.adapt { encode.follow(adapt, in: session, baseKbps: c.encoder.bitrateKbps) }
        if let preview = c.previewPath { stages.append(try Y4MStage(path: preview)) }
        if let n = c.snapshotEvery {
            stages.append(
                try SnapshotStage(every: n, path: SnapshotStage.numbered((output.path as NSString).deletingPathExtension + "-snapshot.jpg")))
        }
        self.stages = stages
    }
}
