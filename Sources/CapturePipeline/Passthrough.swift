public import VideoCapture
import VideoProcessing
public import H264
import Synchronization
import RTP

/// A stage that takes a camera's own encoded access units (`VideoFrame.isEncoded`) instead of pictures.
public protocol EncodedFrameStage: PictureStage {
    /// One access unit as the camera delivered it. A thrown error stops the pipeline (a write failure).
    func consume(encoded frame: VideoFrame) throws
    /// True when the last access unit given to `consume(encoded:)` was held back although an output wanted it (it
    /// came before a key frame, or was malformed): not written, so the session does not count it towards
    /// `Configuration.frames`, and while nothing was written yet `durationNs` does not start with it.
    var heldBackLastFrame: Bool { get }
}

extension EncodedFrameStage {
    /// False: every access unit given is taken.
    public var heldBackLastFrame: Bool { false }
}

/// Passes a camera's own H.264 to encoded outputs (files, RTP, viewers) without decoding or re-encoding: the
/// cheapest encode there is. What it does to the stream, and only that:
/// - every output starts at a key frame: access units before the first IDR (and after a gap, a frame the
///   pipeline dropped) are dropped and a key frame is asked of the camera (`CameraVideoCapturer.requestKeyFrame()`,
///   at most one per `keyFrameRequestIntervalNs` of capture time);
/// - SPS and PPS are tracked from the stream and put before every IDR that comes without them (cameras that send
///   them once, at the start);
/// - the access unit's own bytes are kept, NAL unit for NAL unit; a driver's zero padding after it is stripped;
/// - receivers' key-frame requests (`control.requestKeyFrame()`, what `RTPOutput` and the hubs call on PLI/FIR)
///   go to the camera the same way;
/// - receivers' bandwidth estimates (`control.setBitrate(_:)`, what `BandwidthFollower` calls) go to the camera's
///   bitrate control (`CameraVideoCapturer.requestBitrate(_:)`: V4L2's `V4L2_CID_MPEG_VIDEO_BITRATE`), at most one
///   per `bitrateRequestIntervalNs` and only when the rate changes by 5 % or more.
/// An access unit that is not Annex-B (garbage, a truncated buffer) is dropped and counted as malformed; the
/// stream resumes at the next key frame. No allocation per frame once the buffers have grown.
public final class PassthroughStage: EncodedFrameStage {
    /// The first output's file that has not received a byte.
    public var unwrittenFile: String? { outputs.lazy.compactMap(\.unwrittenFile).first }
    private let outputs: [any EncodedOutput]
    /// Key-frame requests from receivers (the same type an encoder takes them on): forwarded to the camera.
    public let control = EncoderControl()
    /// The shortest gap between two key-frame requests sent to the camera, in capture time (default 300 ms,
    /// as WebRTC throttles them).
    public var keyFrameRequestIntervalNs: Int64 = 300_000_000
    /// How a key frame is asked of the camera; by default the session's capturer (set at `begin`).
    public var askCameraForKeyFrame: (@Sendable () -> Bool)?
    /// The shortest gap between two bitrate requests sent to the camera, in capture time (default 200 ms).
    public var bitrateRequestIntervalNs: Int64 = 200_000_000
    /// How a bitrate (bits/s) is asked of the camera; by default the session's capturer (set at `begin`).
    public var askCameraForBitrate: (@Sendable (Int) -> Bool)?
    /// The stream's `profile-level-id` (6 hex digits: profile_idc, constraint flags, level_idc) from the last
    /// SPS seen, nil before the first: what a WebRTC answer must be able to decode.
    public var profileLevelID: String? { profile.value.withLock { $0 } }
    /// Called (on the pipeline's thread) when the stream's profile-level-id becomes known from its first SPS, and
    /// again if a later SPS changes it: a WHIP output makes its offer then. Set before the camera starts.
    public var onStreamProfile: (@Sendable (String) -> Void)?
    /// `profileLevelID`, readable from any thread (a server answering offers while the camera runs).
    public var profileLevelIDSource: @Sendable () -> String? {
        let box = profile
        return { box.value.withLock { $0 } }
    }
    private final class ProfileBox: Sendable { let value = Mutex<String?>(nil) }
    private let profile = ProfileBox()

    private var out = EncodedFrame()
    private var units: [NALUnit] = []
    private var sps: [UInt8] = []
    private var pps: [UInt8] = []
    private var waitingForKeyFrame = true
    /// The last access unit was wanted but not written (before a key frame, or malformed).
    public private(set) var heldBackLastFrame = false
    private var lastSequence: UInt64?
    private var lastRequestNs: Int64?
    private var pendingBitrate: Int?
    private var lastBitrate: (bps: Int, ns: Int64)?
    private let tally = Mutex(Tally())
    private struct Tally {
        var passed = 0, keyFrames = 0, bytes = 0, droppedBeforeKeyFrame = 0, parameterSetsInserted = 0, malformed = 0
        var keyFramesAsked = 0, keyFramesAskedUnanswerable = 0, gaps = 0, notWanted = 0
        var firstTs: Int64?, lastTs: Int64 = 0
        var bitratesAsked = 0, bitratesUnanswerable = 0, lastBitrateAsked = 0
    }

    /// Passes the camera's access units to `outputs` (claimed by their own initialisers, before the camera starts),
    /// each connected to this stage's `control` (`EncodedOutput.connect(keyFrames:)`: a `RecordingOutput`'s new
    /// segment asks the camera for its key frame).
    public init(outputs: [any EncodedOutput]) {
        self.outputs = outputs
        for o in outputs { o.connect(keyFrames: control) }
        out.data.reserveCapacity(1 << 20)
        out.nalUnits.reserveCapacity(64)
        units.reserveCapacity(64)
    }

    /// Refuses a camera that delivers pictures (anything but its own H.264): this stage would get no access unit.
    public func check(_ session: CaptureSession) throws {
        guard !session.deliversAccessUnits else { return }
        throw session.refusal(
            of: self, takes: "a camera's own H.264",
            instead:
                "encode the pictures with an EncodeStage (`Recorder` picks the stage for the camera), or ask for H264 (`pixelFormats`) from a camera that offers it"
        )
    }

    /// Refuses a camera that delivers pictures (`check(_:)`), then wires the key-frame requests to the session's
    /// camera unless `askCameraForKeyFrame` was set.
    public func begin(_ session: CaptureSession) throws {
        try check(session)
        if askCameraForKeyFrame == nil {
            let capturer = session.capturer
            askCameraForKeyFrame = { capturer.requestKeyFrame() }
        }
        if askCameraForBitrate == nil {
            let capturer = session.capturer
            askCameraForBitrate = { capturer.requestBitrate($0) }
        }
    }

    /// Never called with pictures: a session whose camera delivers H.264 hands this stage access units.
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {}

    /// Some output has an audience.
    public var wantsPictures: Bool { outputs.contains { $0.hasAudience } }

    /// One access unit: checked, its padding stripped, parameter sets put before an IDR that lacks them, then
    /// written to every output that wants frames (from the first key frame on).
    public func consume(encoded frame: VideoFrame) throws {
        heldBackLastFrame = false
        // A gap (the pipeline dropped a frame) breaks the references: wait for the next key frame.
        if let last = lastSequence, frame.sequence != last &+ 1 {
            tally.withLock { $0.gaps += 1 }
            waitingForKeyFrame = true
        }
        lastSequence = frame.sequence
        // The access unit's own bytes: a driver's zero padding after the last NAL unit is not part of it (a NAL
        // unit never ends in a zero byte: its stop bit is in the last byte).
        let bytes = frame.buffer.bytes
        var end = bytes.count
        while end > 0 && bytes[end - 1] == 0 { end -= 1 }
        do {
            try AnnexB.split(UnsafeRawBufferPointer(rebasing: bytes[0..<end]), into: &units)
            guard !units.isEmpty else { throw H264Error("an access unit with no NAL unit", offset: 0) }
        } catch {
            tally.withLock { $0.malformed += 1 }
            waitingForKeyFrame = true
            heldBackLastFrame = outputs.contains { $0.wantsFrames }
            askForKeyFrame(at: frame.timestampNs, force: true)
            return
        }
        var hasIDR = false, hasSPS = false, hasPPS = false
        for u in units {
            switch u.type {
            case .idr: hasIDR = true
            case .sps:
                hasSPS = true
                Self.keep(bytes, u, in: &sps)
                if sps.count >= 4, !knowsProfile || (sps[1], sps[2], sps[3]) != profileBytes {
                    noteProfile()
                }
            case .pps:
                hasPPS = true
                Self.keep(bytes, u, in: &pps)
            default: break
            }
        }
        // The parameter sets are learned from every frame, wanted or not: a camera may send them only once.
        guard outputs.contains(where: { $0.wantsFrames }) else {
            tally.withLock { $0.notWanted += 1 }
            waitingForKeyFrame = true // the next frame an output gets must be decodable on its own
            return
        }
        if control.takeKeyFrameRequest() { askForKeyFrame(at: frame.timestampNs, force: false) }
        if let bps = control.takeBitrateRequest() { pendingBitrate = bps }
        if let bps = pendingBitrate { askForBitrate(bps, at: frame.timestampNs) }
        if waitingForKeyFrame {
            guard hasIDR, !sps.isEmpty, !pps.isEmpty else {
                tally.withLock { $0.droppedBeforeKeyFrame += 1 }
                heldBackLastFrame = true
                askForKeyFrame(at: frame.timestampNs, force: false)
                return
            }
            waitingForKeyFrame = false
        }
        out.data.removeAll(keepingCapacity: true)
        out.nalUnits.removeAll(keepingCapacity: true)
        let insert = hasIDR && !(hasSPS && hasPPS)
        if insert {
            append(sps[...], type: .sps)
            append(pps[...], type: .pps)
        }
        for u in units where !(insert && (u.type == .sps || u.type == .pps)) {
            append(UnsafeRawBufferPointer(rebasing: bytes[u.offset..<(u.offset + u.length)]), type: u.type)
        }
        out.isKeyFrame = hasIDR
        out.isSkipped = false
        out.timestampNs = frame.timestampNs
        out.rotation = frame.rotation
        out.encodeNs = 0
        tally.withLock { t in
            t.passed += 1
            if hasIDR { t.keyFrames += 1 }
            if insert { t.parameterSetsInserted += 1 }
            t.bytes += out.data.count
            if t.firstTs == nil { t.firstTs = frame.timestampNs }
            t.lastTs = frame.timestampNs
        }
        for o in outputs where o.wantsFrames { try o.write(out) }
    }

    private static let startCode: [UInt8] = [0, 0, 0, 1]

    private static func keep(_ bytes: UnsafeRawBufferPointer, _ u: NALUnit, in stored: inout [UInt8]) {
        stored.removeAll(keepingCapacity: true)
        stored.append(contentsOf: bytes[u.offset..<(u.offset + u.length)])
    }

    private func append<C: Collection<UInt8>>(_ unit: C, type: NALUnitType) {
        out.data.append(contentsOf: Self.startCode)
        out.nalUnits.append(NALUnit(type: type, offset: out.data.count, length: unit.count))
        out.data.append(contentsOf: unit)
    }

    private var profileBytes: (UInt8, UInt8, UInt8) = (0, 0, 0)
    private var knowsProfile = false
    /// Once per new profile (not per frame: the string is made only when the SPS's profile or level changes).
    private func noteProfile() {
        profileBytes = (sps[1], sps[2], sps[3])
        knowsProfile = true
        guard let hex = SDP.profileLevelID(sps: sps[...]) else { return }
        profile.value.withLock { $0 = hex }
        onStreamProfile?(hex)
    }

    private func askForBitrate(_ bps: Int, at ts: Int64) {
        if let last = lastBitrate {
            if ts >= last.ns, ts - last.ns < bitrateRequestIntervalNs { return } // kept pending for a later frame
            if abs(bps - last.bps) * 20 < last.bps {
                pendingBitrate = nil
                return
            }
        }
        pendingBitrate = nil
        lastBitrate = (bps, ts)
        let answered = askCameraForBitrate?(bps) ?? false
        tally.withLock { t in
            t.bitratesAsked += 1
            t.lastBitrateAsked = bps
            if !answered { t.bitratesUnanswerable += 1 }
        }
    }

    private func askForKeyFrame(at ts: Int64, force: Bool) {
        if !force, let last = lastRequestNs, ts - last < keyFrameRequestIntervalNs, ts >= last { return }
        lastRequestNs = ts
        let answered = askCameraForKeyFrame?() ?? false
        tally.withLock { t in
            t.keyFramesAsked += 1
            if !answered { t.keyFramesAskedUnanswerable += 1 }
        }
    }

    /// Closes the outputs (or gives them up when nothing was passed through).
    public func end() throws {
        var first: Error?
        let passed = tally.withLock { $0.passed }
        for o in outputs {
            if passed == 0 {
                o.discard()
                continue
            }
            do { try o.end() } catch { first = first ?? error }
        }
        if let first { throw first }
    }

    /// Gives every output up.
    public func discard() { for o in outputs { o.discard() } }

    /// The average bitrate of what was passed through, then each output's progress.
    public var progress: String? { (["\(Int(kbps)) kbps"] + outputs.compactMap(\.progress)).joined(separator: "  ") }

    private var kbps: Double {
        let t = tally.withLock { $0 }
        guard let first = t.firstTs, t.lastTs > first else { return 0 }
        return Double(t.bytes) * 8 / (Double(t.lastTs - first) / 1e9) / 1000
    }

    /// The camera's stream as passed through: access units passed, dropped and malformed, key frames, the average
    /// bitrate, what was inserted and asked of the camera; then each output's report.
    public var passthroughReport: PassthroughReport {
        let t = tally.withLock { $0 }
        var r = PassthroughReport()
        (r.passed, r.droppedBeforeKeyFrame, r.malformed, r.keyFrames) = (t.passed, t.droppedBeforeKeyFrame, t.malformed, t.keyFrames)
        (r.averageKbps, r.parameterSetsInserted, r.gaps) = (Int(kbps), t.parameterSetsInserted, t.gaps)
        (r.keyFramesAsked, r.keyFramesAskedUnanswerable) = (t.keyFramesAsked, t.keyFramesAskedUnanswerable)
        (r.bitratesAsked, r.lastBitrateAsked, r.bitratesUnanswerable) = (t.bitratesAsked, t.lastBitrateAsked, t.bitratesUnanswerable)
        r.outputs = outputs.map(\.report)
        return r
    }
    /// `.passthrough(passthroughReport)`.
    public var report: StageReport { .passthrough(passthroughReport) }
}
