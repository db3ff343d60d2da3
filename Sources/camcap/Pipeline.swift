import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import FixtureCameras
import H264
import Synchronization

/// Options shared by `preview` and `record`.
struct CaptureOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file (default: the first camera, else fixture:uvc-webcam).")
    var device: String?
    @Option(name: .shortAndLong, help: "Target capture size; negotiation picks the closest the device offers.")
    var size: FrameSize = FrameSize(width: 1280, height: 720)
    @Option(help: "Frame-rate limit for negotiation.")
    var fpsLimit: Int = FormatSelector.defaultFpsLimit
    @Option(help: "Stop after this many frames.")
    var frames: Int?
    @Option(help: "Stop after this many seconds (default 5 when --frames is not given).")
    var duration: Double?
    @Flag(help: "Fixture cameras only: produce frames as fast as they are consumed, timestamps exactly 1/fps apart (no drops).")
    var fast = false
    @Option(help: "Fixture cameras only: sensor noise amplitude added to luma (0 = clean test pattern).")
    var noise: Int = 0
    @Flag(name: .shortAndLong, help: "No progress line.")
    var quiet = false

    func validateCommon() throws {
        guard fpsLimit > 0, fpsLimit <= 1000 else { throw ValidationError("--fps-limit must be between 1 and 1000, got \(fpsLimit)") }
        if let frames, frames <= 0 { throw ValidationError("--frames must be positive, got \(frames)") }
        if let duration, !(duration > 0) { throw ValidationError("--duration must be positive, got \(duration)") }
        guard (0...64).contains(noise) else { throw ValidationError("--noise must be 0...64, got \(noise)") }
        if frames != nil && duration != nil { throw ValidationError("give either --frames or --duration, not both") }
    }

    var effectiveDuration: Double? { frames == nil ? (duration ?? 5) : nil }
}

/// Stops on SIGINT/SIGTERM: the first signal asks the pipeline to finish cleanly, a second one exits.
final class StopSignal: @unchecked Sendable {
    // @unchecked: `sources` is written once in init and only kept alive afterwards; `count` is a Mutex.
    private var sources: [DispatchSourceSignal] = []
    private let count = SignalCount()
    init(onStop: @escaping @Sendable () -> Void) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            src.setEventHandler { [count] in
                let n = count.value.withLock { c -> Int in c += 1; return c }
                if n > 1 { exit(130) }
                onStop()
            }
            src.resume()
            sources.append(src)
        }
    }
}

/// A line on stderr rewritten in place (only on a terminal, else one line per update every few seconds).
struct Progress {
    let quiet: Bool
    private var last = Date.distantPast
    private let tty = isatty(2) != 0
    init(quiet: Bool) { self.quiet = quiet }
    mutating func update(_ text: @autoclosure () -> String, force: Bool = false) {
        guard !quiet else { return }
        let now = Date()
        let interval = tty ? 0.25 : 2.0
        guard force || now.timeIntervalSince(last) >= interval else { return }
        last = now
        FileHandle.standardError.write(Data(((tty ? "\r\u{1B}[K" : "") + text() + (tty ? "" : "\n")).utf8))
    }
    func finish() { if !quiet && tty { FileHandle.standardError.write(Data("\n".utf8)) } }
}

/// Negotiates and starts a capturer for the options; returns the capturer, the device and what was applied.
func startCapture(_ opts: CaptureOptions) async throws -> (CameraVideoCapturer, CaptureDevice, FormatSelection, AppliedFormat) {
    // As-fast-as-consumed fixture frames are not dropped: the capturer waits for the consumer.
    let capturer = makeCapturer(pacing: opts.fast ? .asFastAsConsumed : .realTime, discardsLate: !opts.fast, noise: opts.noise)
    let device = try opts.device.map { spec throws(CaptureError) in try capturer.device(spec) } ?? defaultDevice(capturer)
    let selection = try capturer.selectFormat(for: device, targetSize: opts.size, fpsLimit: opts.fpsLimit)
    return (capturer, device, selection, try await capturer.startCapture(device: device, format: selection.format, size: selection.size, fps: selection.fps))
}

extension Fraction {
    var fpsDouble: Double { doubleValue }
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func fmt(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }

final class SignalCount: Sendable { let value = Mutex(0) }
