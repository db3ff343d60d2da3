import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import FixtureCameras
import Synchronization

// The one capture loop every capturing command runs on (record, preview, and the commands that stream).
//
//   camera ─▶ CameraVideoCapturer ─▶ frames() ─▶ one conversion to I420 ─▶ stage ─▶ stage ─▶ …
//
// The pipeline owns the session (capturer, device, negotiated selection, applied format), the signals
// (installed before the camera starts), the stop conditions (on frame timestamps, not the wall clock), the
// bad-frame policy, progress and the summary. A command is a list of `PictureStage`s.

/// Options shared by every capturing command.
struct CaptureOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file (default: the first camera, else fixture:uvc-webcam).")
    var device: String?
    @Option(name: .shortAndLong, help: "Target capture size; negotiation picks the closest the device offers.")
    var size: FrameSize = FrameSize(width: 1280, height: 720)
    @Option(help: "Frame-rate limit for negotiation.")
    var fpsLimit: Int = FormatSelector.defaultFpsLimit
    @Option(help: "Stop after this many frames.")
    var frames: Int?
    @Option(help: "Stop after this many seconds of capture, on frame timestamps (default 5 when --frames is not given).")
    var duration: Double?
    @Flag(help: "Fixture cameras only (refused for a real camera): produce frames as fast as they are consumed, timestamps exactly 1/fps apart (no drops). `record` then encodes on a thread of its own while the next frame converts.")
    var fast = false
    @Option(help: "Fixture cameras only: sensor noise amplitude added to luma (0 = the clean test pattern).")
    var noise: Int = 0
    @Option(help: .hidden) var fixtureDisconnectAfter: Int?
    @Option(name: .customLong("control"), help: ArgumentHelp("Set a camera control before the first frame (repeatable, in order; see `camcap controls`).", valueName: "name=value"))
    var controls: [String] = []
    @Option(help: ArgumentHelp("Anti-flicker filter set on start: 50, 60, auto (where the camera has it) or off.", valueName: "50|60|auto|off"))
    var powerLine: String?
    @Flag(name: .shortAndLong, help: "No progress line and no start line.")
    var quiet = false

    func validateCommon() throws {
        guard fpsLimit > 0, fpsLimit <= 1000 else { throw ValidationError("--fps-limit must be between 1 and 1000, got \(fpsLimit)") }
        if let frames, frames <= 0 { throw ValidationError("--frames must be positive, got \(frames)") }
        if let duration, !(duration > 0 && duration <= 86_400 * 366) { throw ValidationError("--duration must be between 0 and one year of seconds, got \(duration)") }
        guard (0...64).contains(noise) else { throw ValidationError("--noise must be 0...64, got \(noise)") }
        if frames != nil && duration != nil { throw ValidationError("give either --frames or --duration, not both") }
        if let n = fixtureDisconnectAfter, n < 0 { throw ValidationError("--fixture-disconnect-after must be >= 0") }
        for c in controls where CameraControlSetting(parsing: c) == nil { throw ValidationError("--control expects NAME=VALUE, got \"\(c.prefix(80))\"") }
        if let p = powerLine, PowerLineFrequency(argument: p) == nil { throw ValidationError("--power-line must be 50, 60, auto or off, got \"\(p.prefix(80))\"") }
    }

    /// The stop condition on timestamps, in nanoseconds (nil when stopping on a frame count).
    var durationNs: Int64? { frames == nil ? Int64((duration ?? 5) * 1e9) : nil }
}

/// A step of the pipeline: it gets every I420 picture (from the pipeline's one conversion per frame) and the
/// frame it came from. A stage checks and opens its outputs in its initialiser, before the camera starts.
protocol PictureStage: AnyObject {
    /// After the camera started, before the first picture.
    func begin(_ pipeline: CapturePipeline) throws
    /// One picture. A thrown error stops the pipeline (a write failure); bad captured frames never get here.
    func consume(_ picture: I420Buffer, frame: VideoFrame) throws
    /// Closes outputs; called once at the end, also after an error.
    func end() throws
    /// Gives up the outputs when the run fails before it starts (existing files keep their contents, new ones go).
    func discard()
    /// The stage's part of the summary's `frames:` line ("encoded 150, skipped 0"), if any.
    var framesSummary: String? { get }
    /// Live figures for the progress line ("1480 kbps").
    var progress: String? { get }
    /// Summary lines (label, value).
    var summary: [(String, String)] { get }
}

extension PictureStage {
    func begin(_ pipeline: CapturePipeline) throws {}
    func discard() {}
    var framesSummary: String? { nil }
    var progress: String? { nil }
}

/// One capture session from negotiation to summary.
final class CapturePipeline {
    let options: CaptureOptions
    let capturer: CameraVideoCapturer
    let device: CaptureDevice
    let selection: FormatSelection
    /// What the device applied (set once the camera has started).
    private(set) var applied = AppliedFormat(pixelFormat: .i420, size: FrameSize(width: 0, height: 0), stride: 0, fps: Fraction(30))
    /// The conversion of each frame (one per captured frame, shared by every stage).
    var conversion: (VideoFrame, AppliedFormat) -> FrameConverter.Options = { _, _ in .init() }
    /// Live output adaptation replayed from a schedule (`--adapt`), and what to do at each step (the bitrate).
    var adaptation: ScheduledAdaptation?
    /// Requests from other threads (REMB); with the first one, the pipeline starts adapting.
    let outputRequests = OutputRequests()
    var onAdaptationStep: (AdaptSchedule.Step) -> Void = { _ in }
    /// Extra text for the format line of the summary (", encoded at 640x360").
    var formatNote = ""

    /// Resolves the device and negotiates: everything that can fail before the camera starts.
    init(_ options: CaptureOptions) throws {
        self.options = options
        // As-fast-as-consumed fixture frames are not dropped: the capturer waits for the consumer.
        let capturer = makeCapturer(pacing: options.fast ? .asFastAsConsumed : .realTime, discardsLate: !options.fast,
                                    noise: options.noise, disconnectAfter: options.fixtureDisconnectAfter,
                                    powerLine: options.powerLine.flatMap(PowerLineFrequency.init(argument:)),
                                    controls: options.controls.compactMap(CameraControlSetting.init(parsing:)))
        self.capturer = capturer
        device = try options.device.map { spec throws(CaptureError) in try capturer.device(spec) } ?? defaultDevice(capturer)
        if options.fast && device.driver != "fixture" {
            throw CLIError("--fast is for fixture cameras (frames as fast as they are consumed); \(device.path) is a real camera, which delivers at its own rate")
        }
        selection = try capturer.selectFormat(for: device, targetSize: options.size, fpsLimit: options.fpsLimit)
    }

    struct Outcome {
        var processed = 0
        var undecodable = 0
    }

    /// Starts the camera, feeds every picture through the stages, stops, closes and prints the summary.
    /// Throws (after the summary) when capture failed or a stage failed; what was written stays playable.
    func run(_ verb: String, stages: [any PictureStage]) async throws {
        let frames = capturer.frames(bufferingNewest: 2)   // subscribed before the start: the first frame is ours
        let stopSignal = StopSignal { [capturer] in Task { try? await capturer.stopCapture() } }
        defer { withExtendedLifetime(stopSignal) {} }
        do {
            applied = try await capturer.startCapture(device: device, format: selection.format, size: selection.size, fps: selection.fps)
            for s in stages { try s.begin(self) }
        } catch {
            if capturer.isRunning { try? await capturer.stopCapture() }
            for s in stages { s.discard() }   // nothing was written: existing files untouched, new ones removed
            throw error
        }
        if !options.quiet {
            FileHandle.standardError.write(Data("\(verb) \(device.path) (\(device.name)): \(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps\n".utf8))
        }

        let converter = FrameConverter()
        var outcome = Outcome()
        var progress = Progress(quiet: options.quiet)
        var latency = DurationHistogram()
        var workTime = DurationHistogram()   // conversion + stages, per frame: latency minus this is waiting
        var conversionTime = DurationHistogram()
        var firstTs: Int64?, lastTs: Int64 = 0
        var captureError: CaptureError?
        var stageError: Error?
        let wallStart = monotonicNanoseconds()
        do {
            frameLoop: for try await frame in frames {
                let first = firstTs ?? frame.timestampNs
                firstTs = first
                if let d = options.durationNs, frame.timestampNs - first >= d { break }
                var convert = conversion(frame, applied)
                if let r = outputRequests.take() {
                    if adaptation == nil { adaptation = ScheduledAdaptation() }
                    adaptation!.request(r)
                }
                if adaptation != nil {
                    let elapsed = frame.timestampNs - first
                    if let step = adaptation!.step(atElapsed: elapsed) { onAdaptationStep(step) }
                    guard let a = adaptation!.adapt(size: frame.buffer.size, timestampNs: frame.timestampNs, elapsedNs: elapsed) else { continue }
                    if !a.isIdentity { convert.crop = a.crop; convert.scale = a.size }
                }
                let picture: I420Buffer
                let workStart = monotonicNanoseconds()
                do {
                    picture = try converter.convert(frame.buffer, options: convert)
                    conversionTime.add(monotonicNanoseconds() - workStart)
                } catch where error.code == .decodeFailed || error.code == .shortBuffer {
                    outcome.undecodable += 1   // one bad frame while streaming: counted, capture goes on
                    continue
                } catch {
                    stageError = error
                    break
                }
                do {
                    for s in stages { try s.consume(picture, frame: frame) }
                } catch {
                    stageError = error
                    break frameLoop
                }
                outcome.processed += 1
                lastTs = frame.timestampNs
                if !options.fast {
                    let now = monotonicNanoseconds()
                    latency.add(now - frame.timestampNs)
                    workTime.add(now - workStart)
                }
                let elapsed = Double(lastTs - first) / 1e9
                if elapsed >= 0.2 && !options.quiet {
                    // Formatted only when the line is due (the autoclosure): nothing allocated per frame.
                    progress.update("\(fmt(elapsed)) s  \(outcome.processed) frames  \(fmt(Double(outcome.processed - 1) / elapsed)) fps  \(stages.compactMap(\.progress).joined(separator: "  "))  drops \(capturer.statistics.totalDropped)")
                }
                if let n = options.frames, outcome.processed >= n { break }
            }
        } catch {
            captureError = error
        }
        progress.finish()
        let wallSeconds = Double(monotonicNanoseconds() - wallStart) / 1e9
        // Counters as of the end of the run (frames produced while stopping are not part of it).
        let stats = capturer.statistics
        if capturer.isRunning { try? await capturer.stopCapture() }
        var endError: Error?
        for s in stages { do { try s.end() } catch { endError = endError ?? error } }

        let elapsed = firstTs.map { Double(lastTs - $0) / 1e9 } ?? 0
        let dropped = stats.totalDropped - stats.dropped[.noConsumer, default: 0]
        let drops = stats.dropped.filter { $0.key != .noConsumer && $0.value > 0 }.sorted { $0.key.rawValue < $1.key.rawValue }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        var frameLine = "captured \(outcome.processed + outcome.undecodable + dropped), dropped \(dropped)\(drops.isEmpty ? "" : " (\(drops))")"
        for s in stages { if let f = s.framesSummary { frameLine += ", " + f } }
        if outcome.undecodable > 0 { frameLine += ", undecodable \(outcome.undecodable)" }
        var lines: [(String, String)] = [
            ("device", "\(device.path) (\(device.name))"),
            ("format", "\(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps (stride \(applied.stride))\(formatNote)"),
            ("frames", frameLine),
            ("achieved fps", "\(fmt(elapsed > 0 ? Double(outcome.processed - 1) / elapsed : 0, 2)) on frame timestamps, \(fmt(wallSeconds > 0 ? Double(outcome.processed) / wallSeconds : 0, 1)) frames/s throughput"),
        ]
        if conversionTime.count > 0 {
            lines.append(("convert time", "p50 \(fmt(conversionTime.percentileMs(0.5), 2)) ms, p95 \(fmt(conversionTime.percentileMs(0.95), 2)) ms"))
        }
        if latency.count > 0 {
            lines.append(("latency", "capture to output p50 \(fmt(latency.percentileMs(0.5), 2)) ms, p95 \(fmt(latency.percentileMs(0.95), 2)) ms, p99 \(fmt(latency.percentileMs(0.99), 2)) ms"))
            lines.append(("work time", "convert + stages p50 \(fmt(workTime.percentileMs(0.5), 2)) ms, p95 \(fmt(workTime.percentileMs(0.95), 2)) ms, p99 \(fmt(workTime.percentileMs(0.99), 2)) ms"))
        }
        if let a = adaptation {
            lines.append(("adaptation", "\(a.schedule.steps.isEmpty ? "on bitrate estimates" : "\(a.schedule)"); \(a.thinned) frames thinned for frame rate; sizes \(a.sizes.map(\.description).joined(separator: " → "))"))
            lines.append(("frames/second", a.perSecond.map(String.init).joined(separator: " ")))
        }
        for s in stages { lines += s.summary }
        let width = (lines.map(\.0.count).max() ?? 0) + 2
        print(lines.map { ($0.0 + ":").padding(toLength: width, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n"))

        if let e = captureError { throw CLIError("capture failed after \(outcome.processed) frames: \(e) — what was written is complete and playable") }
        if let e = stageError ?? endError { throw CLIError("stopped after \(outcome.processed) frames: \(e) — what was written before is playable") }
        if outcome.processed == 0 { throw CLIError("no frame was captured from \(device.path)") }
    }
}

/// Stops on SIGINT/SIGTERM: the first signal asks the pipeline to finish cleanly, a second one exits at once
/// (130). Installed before the camera starts. Two signals that arrive together (dispatch coalesces them into
/// one event) count as two.
final class StopSignal: @unchecked Sendable {
    // @unchecked: `sources` is written once in init and only kept alive afterwards; `count` is a Mutex.
    private var sources: [DispatchSourceSignal] = []
    private let count = SignalCount()
    init(onStop: @escaping @Sendable () -> Void) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let src = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            src.setEventHandler { [count, src] in   // the cycle src → handler → src ends at cancel (deinit)
                let received = Int(src.data)
                let n = count.value.withLock { c -> Int in c += max(1, received); return c }
                if n > 1 { exit(130) }
                onStop()
            }
            src.resume()
            sources.append(src)
        }
    }
    deinit {
        for s in sources { s.cancel() }
        signal(SIGINT, SIG_DFL); signal(SIGTERM, SIG_DFL)
    }
}

final class SignalCount: Sendable { let value = Mutex(0) }

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

extension Fraction {
    var fps: Double { doubleValue }
}

func fmt(_ v: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }
