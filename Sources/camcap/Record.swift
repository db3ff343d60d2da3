import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import H264

struct Record: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record H.264 from a camera: negotiate, capture, convert to I420, encode with OpenH264, write Annex-B.",
        discussion: """
            With no arguments: 5 seconds at 1280x720 (up to 30 fps) from the first camera, or from the built-in \
            fixture webcam where there is none, to capture.h264. Play it with `ffplay -f h264 capture.h264`.

            Every IDR is preceded by SPS and PPS. Ctrl-C stops cleanly and leaves a playable file.
            Examples:
              camcap record --device /dev/video0 --size 1920x1080 --bitrate 4000 --duration 10
              camcap record --device fixture:vivid --frames 300 --keyint-seconds 1 --preview check.y4m
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(name: .shortAndLong, help: "Output file (Annex-B H.264).") var output = "capture.h264"
    @Option(help: "Target bitrate in kbps.") var bitrate = 1500
    @Option(help: "Maximum bitrate in kbps (default 1.5 × target).") var maxBitrate: Int?
    @Option(help: "Frames between key frames.") var keyint: Int?
    @Option(help: "Seconds between key frames (default 2).") var keyintSeconds: Double?
    @Option(help: "Encoder threads (1-4).") var threads = 1
    @Option(help: "Limit slices to this many bytes (RTP payload budget, e.g. 1200).") var maxNalSize: Int?
    @Flag(help: "Let rate control skip frames (off: every captured frame is encoded).") var frameSkipping = false
    @Option(help: "Also write the I420 fed to the encoder as Y4M.") var preview: String?
    @Option(help: "Write a JPEG snapshot every N frames next to the output.") var snapshotEvery: Int?

    func validate() throws {
        try capture.validateCommon()
        try CLIRange.capture(capture)
        if keyint != nil && keyintSeconds != nil { throw ValidationError("give either --keyint or --keyint-seconds, not both") }
        try CLIRange.count(snapshotEvery, "--snapshot-every")
        // The encoder's limits (OpenH264's), checked before the output or the camera is touched.
        try CLIRange.encoder(bitrateKbps: bitrate, maxBitrateKbps: maxBitrate, keyint: keyint, keyintSeconds: keyintSeconds,
                             threads: threads, maxNalSize: maxNalSize, fpsLimit: capture.fpsLimit)
    }

    func run() async throws {
        do { try await record() } catch { fail(error) }
    }

    private func record() async throws {
        // Outputs first: an unwritable path fails before the camera is touched.
        let writer = try AnnexBWriter(path: output)
        let (capturer, device, selection, applied) = try await startCapture(capture)
        let size = FrameSize(width: applied.size.width & ~1, height: applied.size.height & ~1)
        var settings = H264Encoder.Settings(width: size.width, height: size.height)
        settings.maxFrameRate = applied.fps.fpsDouble
        settings.targetBitrate = bitrate * 1000
        settings.maxBitrate = maxBitrate.map { $0 * 1000 }
        settings.keyFrameInterval = keyint ?? keyintSeconds.map { max(1, Int(($0 * applied.fps.fpsDouble).rounded())) }
        settings.threads = threads
        settings.sliceMode = maxNalSize.map { .maxNALSize($0) } ?? .single
        settings.frameSkipping = frameSkipping
        let encoder: H264Encoder
        let y4m: Y4MWriter?
        do {
            encoder = try H264Encoder(settings: settings)
            y4m = try preview.map { p throws(ProcessingError) in try Y4MWriter(path: p, width: size.width, height: size.height, fps: applied.fps) }
        } catch {
            try? await capturer.stopCapture()
            throw error
        }
        let stopSignal = StopSignal { Task { try? await capturer.stopCapture() } }
        defer { withExtendedLifetime(stopSignal) {} }
        if !capture.quiet {
            FileHandle.standardError.write(Data("recording \(device.path) (\(device.name)): \(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps -> \(output)\n".utf8))
        }

        let converter = FrameConverter()
        let needsScale = size != applied.size
        var out = EncodedFrame()
        var progress = Progress(quiet: capture.quiet)
        var encodeMs: [Double] = []
        var firstTs: Int64?, lastTs: Int64 = 0
        var encoded = 0, skipped = 0, convertFailed = 0, keyFrames = 0
        var writeError: Error?
        let started = Date()
        let stem = (output as NSString).deletingPathExtension
        var lastFlush = Date()

        for await frame in capturer.frames(bufferingNewest: 2) {
            if firstTs == nil { firstTs = frame.timestampNs }
            lastTs = frame.timestampNs
            let picture: I420Buffer
            do {
                picture = try converter.convert(frame.buffer, options: .init(scale: needsScale ? size : nil))
            } catch {
                convertFailed += 1
                continue
            }
            do {
                let t0 = DispatchTime.now().uptimeNanoseconds
                try encoder.encode(picture, timestampNs: frame.timestampNs, into: &out)
                encodeMs.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
                if out.isSkipped { skipped += 1 } else {
                    encoded += 1
                    if out.isKeyFrame { keyFrames += 1 }
                    try writer.write(out)
                }
                try y4m?.write(picture)
                if let n = snapshotEvery, (encoded + skipped) % n == 0 {
                    try SnapshotWriter.write(picture, to: "\(stem)-snapshot-\(String(format: "%06d", encoded + skipped)).jpg")
                }
                if Date().timeIntervalSince(lastFlush) >= 1 { try writer.flush(); lastFlush = Date() }
            } catch {
                writeError = error
                break
            }
            let elapsed = Double(lastTs - firstTs!) / 1e9
            let stats = capturer.statistics
            if elapsed >= 0.2 {
                progress.update("\(fmt(elapsed)) s  \(encoded + skipped) frames  \(fmt(Double(encoded + skipped - 1) / elapsed)) fps  \(fmt(Double(writer.bytesWritten) * 8 / elapsed / 1000, 0)) kbps  drops \(stats.totalDropped)")
            }
            if let n = capture.frames, encoded + skipped >= n { break }
            if let d = capture.effectiveDuration, Date().timeIntervalSince(started) >= d { break }
        }
        progress.finish()
        // Counters as of the end of the recording (frames produced while stopping are not part of it).
        let stats = capturer.statistics
        if capturer.isRunning { try? await capturer.stopCapture() }
        let closeError: Error? = { do { try writer.close(); try y4m?.close(); return nil } catch { return error } }()
        encoder.close()

        let elapsed = firstTs.map { Double(lastTs - $0) / 1e9 } ?? 0
        let frames = encoded + skipped
        let achievedFps = elapsed > 0 ? Double(frames - 1) / elapsed : 0
        let kbps = elapsed > 0 ? Double(writer.bytesWritten) * 8 / (elapsed + 1 / applied.fps.fpsDouble) / 1000 : 0
        let drops = stats.dropped.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        print("""
            device:        \(device.path) (\(device.name))
            format:        \(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps (stride \(applied.stride))\(needsScale ? ", encoded at \(size)" : "")
            frames:        captured \(encoded + skipped + convertFailed + stats.totalDropped), dropped \(stats.totalDropped)\(drops.isEmpty ? "" : " (\(drops))"), encoded \(encoded), skipped \(skipped)\(convertFailed > 0 ? ", undecodable \(convertFailed)" : "")
            key frames:    \(keyFrames) (interval \(settings.effectiveKeyFrameInterval) frames)
            achieved fps:  \(fmt(achievedFps, 2))
            bitrate:       \(fmt(kbps, 0)) kbps average (target \(bitrate) kbps)
            encode time:   mean \(fmt(encodeMs.isEmpty ? 0 : encodeMs.reduce(0, +) / Double(encodeMs.count), 2)) ms, p95 \(fmt(percentile(encodeMs, 0.95), 2)) ms
            output:        \(output) (\(writer.bytesWritten) bytes)\(preview.map { ", preview \($0)" } ?? "")
            """)
        if let e = writeError ?? closeError { throw CLIError("recording stopped: \(e) — the \(encoded) frames written to \(output) are playable") }
        if encoded == 0 { throw CLIError("no frame was recorded from \(device.path)") }
    }
}
