import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing

struct Preview: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capture, convert to I420 (scale/rotate) and dump: a Y4M stream and/or still snapshots.",
        discussion: """
            Play the Y4M with `ffplay preview.y4m` or `mpv preview.y4m`. Snapshots are PNG or JPEG by extension; \
            with --snapshot-every N, the frame number is inserted before the extension.
            Example: camcap preview --device fixture:iphone --size 1280x720 --rotate 90 --y4m out.y4m --frames 60
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(help: "Write the converted frames as Y4M.") var y4m: String?
    @Option(help: "Write a still picture (.png, .jpg) of the last frame (or every N frames with --snapshot-every).") var snapshot: String?
    @Option(help: "Snapshot every N frames.") var snapshotEvery: Int?
    @Option(help: "Rotate the pixels by 0, 90, 180 or 270 degrees (in addition to the camera's own rotation with --apply-rotation).")
    var rotate: Int = 0
    @Flag(help: "Apply the rotation the camera reports to the pixels (else it stays metadata).") var applyRotation = false
    @Flag(help: "Mirror horizontally (a selfie preview).") var mirror = false
    @Option(help: "Scale the output to this size (after rotation).") var scale: FrameSize?

    func validate() throws {
        try capture.validateCommon()
        try CLIRange.capture(capture)
        try CLIRange.size(scale, "--scale")
        guard VideoRotation(rawValue: rotate) != nil else { throw ValidationError("--rotate must be 0, 90, 180 or 270, got \(rotate)") }
        if let n = snapshotEvery, n <= 0 { throw ValidationError("--snapshot-every must be positive, got \(n)") }
        if let s = snapshot { do { _ = try SnapshotWriter.kind(forPath: s) } catch { throw ValidationError(error.description) } }
    }

    func run() async throws {
        do { try await preview() } catch { fail(error) }
    }

    private func preview() async throws {
        // Check the outputs can be written before starting the camera.
        for path in [y4m, snapshot].compactMap({ $0 }) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))")
            }
        }
        let (capturer, device, selection, applied) = try await startCapture(capture)
        let stopSignal = StopSignal { Task { try? await capturer.stopCapture() } }
        defer { withExtendedLifetime(stopSignal) {} }
        let converter = FrameConverter()
        var options = FrameConverter.Options(rotation: VideoRotation(rawValue: rotate)!, mirror: mirror, scale: scale)
        var writer: Y4MWriter?
        var progress = Progress(quiet: capture.quiet)
        var written = 0, failed = 0, snapshots = 0
        var lastPicture: I420Buffer?
        let started = Date()
        var failure: Error?
        if !capture.quiet {
            FileHandle.standardError.write(Data("preview \(device.path): \(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps\n".utf8))
        }
        for await frame in capturer.frames(bufferingNewest: 2) {
            do {
                if applyRotation { options.rotation = VideoRotation(degrees: rotate + frame.rotation.degrees)! }
                let picture = try converter.convert(frame.buffer, options: options)
                if let path = y4m {
                    if writer == nil { writer = try Y4MWriter(path: path, width: picture.width, height: picture.height, fps: applied.fps) }
                    try writer!.write(picture)
                }
                written += 1
                if let s = snapshot, let n = snapshotEvery, written % n == 0 {
                    let ext = (s as NSString).pathExtension
                    try SnapshotWriter.write(picture, to: "\((s as NSString).deletingPathExtension)-\(String(format: "%06d", written)).\(ext)")
                    snapshots += 1
                }
                lastPicture = picture
            } catch where error.code == .decodeFailed || error.code == .shortBuffer {
                failed += 1   // one bad frame while streaming: counted, capture goes on
            } catch {
                failure = error
                break
            }
            let stats = capturer.statistics
            progress.update("\(fmt(Date().timeIntervalSince(started))) s  \(written) frames  drops \(stats.totalDropped)")
            if let n = capture.frames, written >= n { break }
            if let d = capture.effectiveDuration, Date().timeIntervalSince(started) >= d { break }
        }
        progress.finish()
        let stats = capturer.statistics
        if capturer.isRunning { try? await capturer.stopCapture() }
        try writer?.close()
        if let s = snapshot, snapshotEvery == nil, let p = lastPicture { try SnapshotWriter.write(p, to: s); snapshots += 1 }
        print("""
            device:    \(device.path) (\(device.name))
            format:    \(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps
            frames:    captured \(written + failed + stats.totalDropped), written \(written), dropped \(stats.totalDropped)\(failed > 0 ? ", undecodable \(failed)" : "")
            output:    \(lastPicture.map { "\($0.width)x\($0.height)" } ?? "-")\(y4m.map { ", \($0)" } ?? "")\(snapshots > 0 ? ", \(snapshots) snapshot(s)" : "")
            """)
        if let failure { throw failure }
        if written == 0 { throw CLIError("no frame was captured from \(device.path)") }
    }
}
