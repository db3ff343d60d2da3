public import VideoCapture
import VideoProcessing
import H264
import Foundation
import SystemIO
import Logging
import Metrics
import Synchronization

// One run of a `CaptureSession`, in four steps: start (the source, the stages' checks, the camera, the stages'
// begin), the frame loop, the idle release (the camera stopped while nobody wants pictures, started again at a
// wake), and the report. `RunState` is what the frames feed; `RunContext` what the run was started with.

/// What a run was started with: its stages, its source and what the source reports back.
struct RunContext {
    let stages: [any PictureStage]
    /// The stages in order, each as the loop calls it: a `ProcessStage` turns the picture the stages after it get.
    let steps: [Step]
    enum Step {
        case consume(any PictureStage)
        case process(ProcessStage)
        init(_ stage: any PictureStage) { self = (stage as? ProcessStage).map(Step.process) ?? .consume(stage) }
    }
    /// The stages that take a camera's own access units, in order (sorted out once, at the start).
    let encodedStages: [any EncodedFrameStage]
    let source: VideoSource
    let conversions: ConversionTimes
    let replay: ScheduleReplay?
    let trace: FrameTrace?
    let encodeStage: EncodeStage?
    let subscribe: () -> VideoFrameStream
    /// The frames of the first start, subscribed before the camera starts: a camera as fast as consumed delivers
    /// (and may end) before `run` would subscribe otherwise, and a frame without a subscriber is lost.
    let firstFrames: VideoFrameStream
    /// Ends a run with a duration whose camera sends nothing at its end (slower than 1 fps, stalled): nil without
    /// a duration, or as fast as consumed (where frame time runs ahead of the clock).
    let durationWatch: DurationWatch?
}

/// Stops a session (its `stopAction`) once the clock passes its duration's end by `graceNs`: the frame loop itself
/// ends at the first frame past the end, which a camera slower than 1 fps, or a stalled one, may not send for long.
/// A thread of its own that sleeps until then (in slices of 250 ms, to see a new end or a stop).
final class DurationWatch: Sendable {
    static let graceNs: Int64 = 1_000_000_000
    private final class End: Sendable { let ns = Atomic<Int64>(0) }
    private let end = End()
    private let thread: WorkerThread

    init(stop: @escaping @Sendable () -> Void) {
        let end = self.end
        thread = WorkerThread(name: "duration-watch") { flag in
            while !flag.isSet {
                let e = end.ns.load(ordering: .acquiring), now = monotonicNanoseconds()
                if e > 0 && now >= e &+ DurationWatch.graceNs { return stop() }
                Sleep.until(monotonicNs: e > 0 ? min(e &+ DurationWatch.graceNs, now &+ 250_000_000) : now &+ 250_000_000)
            }
        }
    }
    /// The duration's end on the monotonic clock (frame timestamps' clock); set again when it moves.
    func arm(_ endNs: Int64) { end.ns.store(endNs, ordering: .releasing) }
    /// Ends the watch (within 250 ms; not joined).
    func cancel() { thread.requestStop() }
}

/// What the frames of a run feed: the report, the metrics, the histograms and the clock of its first and last frame.
struct RunState {
    var metrics: SessionMetrics
    var report = CaptureSession.Report()
    var latency = DurationHistogram()
    var workTime = DurationHistogram() // conversion + stages, per frame: latency minus this is waiting
    var conversionTime = DurationHistogram()
    var adapted = AdaptationTally()
    var firstTs: Int64?
    var lastTs: Int64 = 0
    /// Where `Configuration.durationNs` counts from: the first frame, or, when a camera's own H.264 was held back
    /// waiting for its first key frame, the first frame written (nil until then).
    var clockFrom: Int64?
    /// Access units an encoded stage held back although an output wanted them (before a key frame, malformed):
    /// captured, not processed.
    var heldBack = 0
    /// Pictures a `ProcessStage` dropped as late (captured, not delivered).
    var processingDropped = 0
    var captureError: CaptureError?
    var stageError: Error?
    let wallStart: Int64
    var nextProgress: Int64
    var idle: IdleRelease
    var losses = LossTally()
    /// When the next placeholder is due while the camera is away, and how many the stages sent.
    var nextPlaceholderNs: Int64 = 0
    var placeholders = 0
    /// Frames the camera delivered, converted or not (a server nobody watches dequeues frames it converts none of).
    var seen = 0

    init(metrics: SessionMetrics, idle: IdleRelease) {
        self.metrics = metrics
        self.idle = idle
        wallStart = monotonicNanoseconds()
        nextProgress = wallStart
    }
}

extension CaptureSession {
    func runFrames(stages: [any PictureStage]) async throws -> Report {
        let context = try await startRun(stages: stages)
        defer {
            context.durationWatch?.cancel()
            context.source.detach()
            context.replay?.detach()
            self.source = nil
            outputRequests.detach()
        }
        var frames = context.firstFrames
        var state = RunState(metrics: SessionMetrics(dimensions: metricsDimensions), idle: IdleRelease(afterNs: configuration.idleReleaseNs))
        while true {
            do {
                for try await frame in frames {
                    if stopFlag.isSet || !process(frame, context, &state) { break }
                }
            } catch {
                state.captureError = error
            }
            if let error = state.captureError {
                guard let next = await heal(error, context, &state) else { break }
                frames = next
                continue
            }
            guard state.stageError == nil, state.idle.releasing, !stopFlag.isSet else { break }
            guard let next = await releaseIdle(context, &state) else { break }
            frames = next
        }
        eventSink.finish()
        return await finish(context, &state)
    }

    /// The source (one conversion per frame, adaptation), the stages' checks, the camera and the stages' begin.
    /// On a failure nothing was written: the camera stops, existing files are untouched, new ones removed.
    private func startRun(stages: [any PictureStage]) async throws -> RunContext {
        // The conversion times reach the loop by frame sequence (the work time of each frame: conversion + stages).
        let conversions = ConversionTimes()
        var options = sourceOptions
        if options.size == nil, let size = constrainedSize { (options.size, options.cropsToAspect) = (size, true) } // crop-and-scale
        let replay = adaptSchedule.map { ScheduleReplay($0, onStep: onAdaptationStep) }
        let userWillAdapt = options.willAdapt, userDidConvert = options.didConvert
        options.didConvert = { seq, ns in
            conversions.record(seq, ns)
            userDidConvert?(seq, ns)
        }
        if let replay {
            options.willAdapt = { frame in
                replay.willAdapt(frame)
                userWillAdapt?(frame)
            }
        }
        let source = VideoSource(capturer: capturer, options: options)
        replay?.attach(source)
        self.source = source
        outputRequests.attach(source)
        // Subscribed before the start: the first frame is ours. As fast as consumed (a fast fixture), the source
        // waits for this loop instead of dropping.
        let subscribe = { [configuration] in source.frames(bufferingNewest: 2, waitsForConsumer: configuration.fast) }
        let context = RunContext(
            stages: stages, steps: stages.map(RunContext.Step.init), encodedStages: stages.compactMap { $0 as? any EncodedFrameStage },
            source: source, conversions: conversions, replay: replay,
            trace: configuration.fast ? nil : frameTrace,
            encodeStage: stages.lazy.compactMap { $0 as? EncodeStage }.first, subscribe: subscribe, firstFrames: subscribe(),
            durationWatch: configuration.durationNs == nil || configuration.fast ? nil : DurationWatch(stop: stopAction))
        do {
            for s in stages { try s.check(self) }
            for s in stages { s.prepare(source) }
            try await startCamera()
            for s in stages { try s.begin(self) }
        } catch {
            source.detach()
            replay?.detach()
            self.source = nil
            outputRequests.detach()
            if capturer.isRunning { try? await capturer.stopCapture() }
            for s in stages { s.discard() }
            throw error
        }
        configuration.logger.debug(
            "capture started", metadata: ["device": "\(device.path)", "format": "\(selection.pixelFormat) \(applied.size) @ \(applied.fps)"])
        onStarted(self)
        return context
    }

    /// One frame through the stages; false when the run stops here (a limit reached, a stage failed, the camera
    /// is to be released). Allocates nothing: the progress line is formatted only when it is due.
    private func process(_ frame: VideoFrame, _ c: RunContext, _ state: inout RunState) -> Bool {
        state.seen += 1
        if state.idle.awaitingFirstFrame, state.idle.firstFrameAfterRestart(now: monotonicNanoseconds()) != nil {
            onEvent?("camera restarted for a viewer: first frame after \(fmt(state.idle.lastRestartMs, 1)) ms")
        }
        state.firstTs = state.firstTs ?? c.replay?.firstTimestamp ?? frame.timestampNs
        // The duration counts from the first frame; access units held back before the first key frame of a camera's
        // own H.264 do not start it (nor count towards `frames`), unless they last the whole duration themselves.
        let first = state.clockFrom ?? state.firstTs ?? frame.timestampNs
        if let d = configuration.durationNs {
            if frame.timestampNs - first >= d { return false }
            c.durationWatch?.arm(first &+ d)
        }
        // Pictures paused (nobody wanted one): the frame only keeps the clock. A stage that wants pictures again
        // (a viewer came) resumes them from the next frame.
        if frame.isUnconverted {
            state.clockFrom = state.clockFrom ?? (state.heldBack > 0 ? frame.timestampNs : first)
            state.metrics.capture.frames.increment() // captured (dequeued), although nobody wanted its picture
            let wanted = c.stages.contains { $0.wantsPictures }
            if wanted { c.source.setPicturesPaused(false) }
            return !(state.idle.enabled && state.idle.shouldRelease(wanted: wanted, at: frame.timestampNs))
        }
        // The source's output is I420, or a camera's own encoded access unit passed through.
        let picture = frame.isEncoded ? nil : I420Buffer(frame.buffer)
        guard picture != nil || frame.isEncoded else { return true }
        let stageStart = monotonicNanoseconds()
        let stageCPUStart = c.trace == nil ? 0 : threadCPUNanoseconds()
        let converted = c.conversions.take(frame.sequence)
        if let converted {
            state.conversionTime.add(converted)
            state.metrics.capture.conversion.recordNanoseconds(converted)
        }
        do {
            if var picture {
                for step in c.steps {
                    switch step {
                    case .consume(let s): try s.consume(picture, frame: frame)
                    case .process(let p):
                        guard let out = try p.apply(picture, frame: frame) else {
                            state.processingDropped += 1
                            return true // late, dropped: the stages after it get nothing
                        }
                        picture = out
                    }
                }
            } else {
                for s in c.encodedStages { try s.consume(encoded: frame) }
            }
        } catch {
            state.stageError = error
            return false
        }
        if picture == nil && heldBack(c.encodedStages) {
            state.heldBack += 1
            state.metrics.capture.frames.increment()
            return true
        }
        let from = state.clockFrom ?? (state.heldBack > 0 ? frame.timestampNs : first)
        state.clockFrom = from
        state.report.processed += 1
        state.metrics.capture.frames.increment()
        if let picture, c.replay != nil || outputRequests.used { state.adapted.add(picture, elapsedNs: frame.timestampNs - from) }
        if state.report.processed % 16 == 0 { state.metrics.update(capturer.statistics, c.source.statistics) }
        state.lastTs = frame.timestampNs
        let now = monotonicNanoseconds()
        if !configuration.fast { time(frame, c, &state, stageStart: stageStart, stageCPUStart: stageCPUStart, converted: converted, now: now) }
        if onProgress != nil, now >= state.nextProgress { progress(c, &state, from: from, now: now) }
        if let n = configuration.frames, state.report.processed >= n { return false }
        // Nobody wants this picture's successors (a server without viewers): the camera costs its dequeue only until
        // somebody does, and is released when nobody has for long enough.
        let wanted = c.stages.contains { $0.wantsPictures }
        if !wanted { c.source.setPicturesPaused(true) }
        return !(state.idle.enabled && state.idle.shouldRelease(wanted: wanted, at: frame.timestampNs))
    }

    /// The progress line, when due: time, frames, rate, the stages' figures and the drops.
    private func progress(_ c: RunContext, _ state: inout RunState, from: Int64, now: Int64) {
        let elapsed = Double(state.lastTs - from) / 1e9
        guard let onProgress, elapsed >= 0.2 else { return }
        state.nextProgress = now + progressIntervalNs
        let processed = state.report.processed
        onProgress(
            "\(fmt(elapsed)) s  \(processed) frames  \(fmt(Double(processed - 1) / elapsed)) fps  \(c.stages.compactMap(\.progress).joined(separator: "  "))  drops \(capturer.statistics.totalDropped)"
        )
    }

    /// Every encoded stage held the last access unit back (none was written): it is not a processed frame.
    private func heldBack(_ stages: [any EncodedFrameStage]) -> Bool {
        !stages.isEmpty && stages.allSatisfy(\.heldBackLastFrame)
    }

    /// The frame's latency and work time, and its row of the frame trace when one is kept.
    private func time(
        _ frame: VideoFrame, _ c: RunContext, _ state: inout RunState, stageStart: Int64, stageCPUStart: Int64, converted: Int64?, now: Int64
    ) {
        state.latency.add(now - frame.timestampNs)
        state.workTime.add(now - stageStart + (converted ?? 0))
        guard let trace = c.trace else { return }
        var row = FrameTrace.Row()
        row.sequence = frame.sequence
        row.captureNs = frame.timestampNs
        row.convertNs = converted ?? 0
        row.waitNs = stageStart - frame.timestampNs - (converted ?? 0)
        row.stagesNs = now - stageStart
        row.stagesCPUNs = threadCPUNanoseconds() - stageCPUStart
        row.latencyNs = now - frame.timestampNs
        if let encodeStage = c.encodeStage {
            (row.frameType, row.bytes, row.encodeNs) = encodeStage.lastEncoded
            encodeStage.lastEncoded = ("-", 0, 0)
        }
        trace.record(row)
    }

    /// When `Configuration.durationNs` ends, on the monotonic clock the frame timestamps are on (nil: no duration, or no
    /// frame yet).
    func deadline(_ state: RunState) -> Int64? {
        guard let d = configuration.durationNs, let first = state.clockFrom ?? state.firstTs else { return nil }
        return first &+ d
    }

    /// Released: the camera stops (its light goes off) until `wake()` (a viewer arrived) or `stop()`, then starts
    /// again; the frames of the new start, or nil when the run ends instead (stopped, or the restart failed).
    private func releaseIdle(_ c: RunContext, _ state: inout RunState) async -> VideoFrameStream? {
        // A wake from before this point is stale (nobody was there for the whole idle time); one that comes while the
        // camera stops is seen by the check after the stop, or by the wait.
        wakeSignal.clear()
        try? await capturer.stopCapture()
        let idleSeconds = fmt(Double(state.idle.afterNs) / 1e9)
        configuration.logger.debug("camera released", metadata: ["device": "\(device.path)", "idle": "\(idleSeconds) s"])
        onEvent?("camera released: no picture wanted for \(idleSeconds) s")
        if !c.stages.contains(where: { $0.wantsPictures }) {
            // The duration counts the released time too (a server with a time limit ends with nobody watching).
            if let deadline = deadline(state) {
                while monotonicNanoseconds() < deadline {
                    guard await wakeSignal.wait(timeoutNs: deadline - monotonicNanoseconds()) else { return nil }
                    if c.stages.contains(where: { $0.wantsPictures }) || monotonicNanoseconds() < deadline { break }
                }
                if monotonicNanoseconds() >= deadline { return nil }
            } else {
                guard await wakeSignal.wait() else { return nil }
            }
        }
        let frames = c.subscribe()
        c.source.setPicturesPaused(false)
        state.idle.restarting(now: monotonicNanoseconds())
        do {
            try await startCamera()
            configuration.logger.debug("camera restarted", metadata: ["device": "\(device.path)"])
            return frames
        } catch {
            state.captureError = error
            return nil
        }
    }

    /// Stops the camera, ends the stages and reports: the summary, then why the run failed, if it did.
    private func finish(_ c: RunContext, _ state: inout RunState) async -> Report {
        let wallSeconds = Double(monotonicNanoseconds() - state.wallStart) / 1e9
        // Counters as of the end of the run (frames produced while stopping are not part of it). The source is
        // detached first: a delivery thread waiting for this loop (as fast as consumed) returns.
        let stats = capturer.statistics
        let sourceStats = c.source.statistics
        c.source.detach()
        state.metrics.update(stats, sourceStats)
        // The stages end before the camera stops (the detached source hands them nothing more): an encoder that
        // imported the camera's buffers (DMA-BUF) drains and hands them back while the camera's queue still exists.
        // Stopping vivid's queue while vicodec still held its buffers hung the VM's kernel (#51).
        var endError: Error?
        for s in c.stages { do { try s.end() } catch { endError = endError ?? error } }
        if capturer.isRunning { try? await capturer.stopCapture() }
        configuration.logger.debug("capture stopped", metadata: ["device": "\(device.path)", "frames": "\(state.report.processed)"])
        var report = state.report
        report.undecodable = sourceStats.dropped[.undecodable, default: 0]
        report.stages = c.stages.map(\.report)
        report.summary = summary(state, report.stages, stats, sourceStats, undecodable: report.undecodable, wallSeconds: wallSeconds)
        // What is on disk: a file that got no byte (or a run without a frame) is not called playable.
        let unwritten = c.stages.lazy.compactMap(\.unwrittenFile).first
        if let e = state.captureError {
            let outcome =
                unwritten.map { "nothing was written to \($0)" }
                ?? (report.processed == 0 ? "no frame was written" : "what was written is complete and playable")
            report.failure = PipelineError(.captureFailed, "capture failed after \(report.processed) frames: \(e) — \(outcome)")
        } else if let e = state.stageError ?? endError, Self.isReaderGone(e) {
            report.failure = PipelineError(.readerGone, "stopped after \(report.processed) frames: \(e)")
        } else if let e = state.stageError ?? endError {
            let outcome =
                unwritten.map { "nothing was written to \($0)" }
                ?? (report.processed == 0 ? "no frame was written" : "what was written before is playable")
            report.failure = PipelineError(.outputFailed, "stopped after \(report.processed) frames: \(e) — \(outcome)")
        } else if report.processed == 0 && state.seen == 0 {
            report.failure = PipelineError(.noFrames, "no frame was captured from \(device.path)")
        }
        if let f = report.failure { configuration.logger.debug("capture session failed", metadata: ["error": "\(f)"]) }
        return report
    }

    /// What the camera did with what negotiation asked (docs/cameras.md, "Quirks negotiation survives"): a size
    /// rounded up (cropped back), a rate not applied as asked (`VIDIOC_S_PARM` ignored or rounded), and a rate
    /// applied but not delivered (measured over at least 2 s of an uninterrupted real-time run).
    private func negotiationQuirks(_ state: RunState, captured: Int) -> [(String, String)] {
        var lines: [(String, String)] = []
        if let given = roundedSize {
            lines.append(
                ("size", "the driver gave \(given) for \(selection.size) (VIDIOC_S_FMT rounded it up): pictures cropped back to \(selection.size)"))
        }
        let (asked, set) = (selection.fps.doubleValue, applied.fps.doubleValue)
        if !deliversAccessUnits, asked > 0, set > 0, abs(set - asked) > asked * 0.01 {
            lines.append(("rate", "asked \(fmt(asked, 2)) fps, the camera applied \(fmt(set, 2)) fps (VIDIOC_S_PARM)"))
        }
        if !configuration.fast, set > 0, state.losses.line == nil, state.idle.releases == 0, let first = state.firstTs {
            let seconds = Double(state.lastTs - first) / 1e9
            let delivered = seconds > 0 ? Double(captured - 1) / seconds : 0
            if seconds >= 2, delivered < set * 0.9 {
                lines.append(
                    (
                        "rate",
                        "the camera delivered \(fmt(delivered, 2)) fps of the \(fmt(set, 2)) it applied: a listed rate it does not keep (a UVC camera in low light with exposure priority on, a busy bus)"
                    ))
            }
        }
        return lines
    }

    /// True for an output whose pipe's reader went away (EPIPE), however the stage wrapped it.
    static func isReaderGone(_ error: Error) -> Bool {
        (error as? ProcessingError)?.code == .readerGone || (error as? H264Error)?.code == .readerGone
    }

    /// The summary's lines: device, format, frames, rates, times, the camera's releases, adaptation, the stages'.
    private func summary(
        _ state: RunState, _ stages: [StageReport], _ stats: CaptureStatistics, _ sourceStats: VideoSource.Statistics, undecodable: Int,
        wallSeconds: Double
    ) -> [(String, String)] {
        let processed = state.report.processed
        let elapsed = (state.clockFrom ?? state.firstTs).map { Double(state.lastTs - $0) / 1e9 } ?? 0
        let starved = sourceStats.dropped[.starvation, default: 0]
        let dropped = stats.droppedWhileConsumed + starved
        var drops = stats.dropped.filter { $0.key != .noConsumer && $0.value > 0 }.map { ("\($0.key)", $0.value) }
        if starved > 0 { drops.append(("pipeline busy", starved)) }
        let dropText = drops.sorted { $0.0 < $1.0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
        let thinned = sourceStats.dropped[.adaptation, default: 0]
        let captured = processed + state.heldBack + state.processingDropped + undecodable + dropped + thinned
        var frameLine =
            "captured \(captured), dropped \(dropped)\(dropText.isEmpty ? "" : " (\(dropText))")"
        for s in stages { if let f = s.framesText { frameLine += ", " + f } }
        if undecodable > 0 { frameLine += ", undecodable \(undecodable)" }
        // Frames converted where the driver (or libcamera) put them, not copied out first.
        if sourceStats.zeroCopyFrames > 0 { frameLine += ", zero-copy \(sourceStats.zeroCopyFrames)" }
        let colour = applied.colorSpace.isSpecified ? ", colour \(applied.colorSpace)" : ""
        var lines: [(String, String)] = [
            ("device", "\(device.path) (\(device.name))"),
            ("format", "\(selection.pixelFormat) \(applied.size) @ \(applied.fps) fps (stride \(applied.stride))\(formatNote)\(colour)"),
            ("frames", frameLine),
            (
                "achieved fps",
                "\(fmt(elapsed > 0 ? Double(processed - 1) / elapsed : 0, 2)) on frame timestamps, \(fmt(wallSeconds > 0 ? Double(processed) / wallSeconds : 0, 1)) frames/s throughput"
            ),
        ]
        func percentiles(_ h: DurationHistogram, _ ps: [Double]) -> String {
            ps.map { "p\(Int(($0 * 100).rounded())) \(fmt(h.percentileMs($0), 2)) ms" }.joined(separator: ", ")
        }
        if state.conversionTime.count > 0 { lines.append(("convert time", percentiles(state.conversionTime, [0.5, 0.95]))) }
        if state.latency.count > 0 {
            lines.append(("latency", "capture to output " + percentiles(state.latency, [0.5, 0.95, 0.99])))
            lines.append(("work time", "convert + stages " + percentiles(state.workTime, [0.5, 0.95, 0.99])))
        }
        let idle = state.idle
        if idle.releases > 0 {
            lines.append(
                (
                    "camera",
                    "released \(idle.releases) times when no picture was wanted for \(fmt(Double(idle.afterNs) / 1e9)) s; "
                        + "first frame after a restart p50 \(fmt(idle.restartPercentileMs(0.5), 1)) ms, max \(fmt(idle.restartPercentileMs(1), 1)) ms"
                ))
        }
        lines += negotiationQuirks(state, captured: captured)
        if stats.timestampsReplaced > 0 {
            lines.append(("timestamps", "\(stats.timestampsReplaced) went backwards at the camera: stamped on arrival instead"))
        }
        if let loss = state.losses.line { lines.append(("camera loss", loss)) }
        if let source = state.losses.sourceLine { lines.append(("source", source)) }
        if state.adapted.active {
            let how = adaptSchedule.map { "\($0)" } ?? "on bitrate estimates"
            let sizes = state.adapted.sizes.map(\.description).joined(separator: " → ")
            lines.append(("adaptation", "\(how); \(thinned) frames thinned for frame rate; sizes \(sizes)"))
            lines.append(("frames/second", state.adapted.perSecond.map(String.init).joined(separator: " ")))
        }
        for s in stages { lines += s.lines }
        return lines
    }
}
