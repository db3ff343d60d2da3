import Foundation
public import VideoCapture
public import VideoProcessing
public import H264
public import RTP
import Synchronization
public import Logging

/// HOST:PORT (an IPv6 host in brackets: [::1]:5004) with a numeric IPv4/IPv6 host and a port in `ports`.
package func parseHostPort(_ s: String, ports: ClosedRange<Int>) -> (host: String, port: Int)? {
    guard let (hostPart, portPart) = splitHostPort(s), portPart.count <= 5, let p = Int(portPart), ports.contains(p), !hostPart.isEmpty,
        hostPart.count <= 64
    else { return nil }
    var a4 = in_addr(), a6 = in6_addr()
    let h = String(hostPart)
    guard inet_pton(AF_INET, h, &a4) == 1 || inet_pton(AF_INET6, h, &a6) == 1 else { return nil }
    return (h, p)
}

/// Where `stream` sends: HOST:PORT with a port 1...65534 (RTCP goes to PORT+1).
public struct StreamTarget: Sendable, CustomStringConvertible {
    /// The receiver's numeric IPv4 or IPv6 address, and its RTP port (1–65534).
    public var host: String, port: Int
    /// "HOST:PORT", an IPv6 host in brackets.
    public var description: String { bracketedHost(host) + ":\(port)" }
    /// Reads `HOST:PORT` (`[::1]:5004` for IPv6); nil unless the host is a numeric address and the port is
    /// 1…65534.
    public init?(_ s: String) {
        guard let (h, p) = parseHostPort(s, ports: 1...65534) else { return nil }
        host = h
        port = p
    }

    /// SSRCs derived from the target (FNV-1a of `salt` and its text, never 0): the same in every run to this
    /// address, so an SDP written beforehand names the stream's. The media SSRC is `ssrc ?? derived`; the RTX one
    /// is derived with "rtx " and made to differ from the media one.
    public func derivedSSRCs(ssrc: UInt32? = nil) -> (media: UInt32, rtx: UInt32) {
        func hash(_ salt: String) -> UInt32 {
            var h: UInt32 = 0x811c_9dc5
            for b in (salt + description).utf8 { h = (h ^ UInt32(b)) &* 0x0100_0193 }
            return h == 0 ? 1 : h
        }
        let media = ssrc ?? hash("")
        let rtx = hash("rtx ")
        return (media, rtx == media ? rtx &+ 1 : rtx)
    }

    /// The RTP sender's settings for a stream to this target: its host and port, the SSRCs `derivedSSRCs(ssrc:)`
    /// gives (the same in every run to this address, so an SDP written beforehand names them) and the
    /// video-orientation extension as `a=extmap:1` (the camera's rotation stays metadata: the last packet of each
    /// frame carries it; receivers that ignore it show the sensor's picture).
    public func senderConfiguration(ssrc: UInt32? = nil) -> RTPSender.Configuration {
        var c = RTPSender.Configuration(host: host, port: port)
        c.videoOrientationExtensionID = 1 // a=extmap:1 urn:3gpp:video-orientation
        (c.ssrc, c.rtxSSRC) = derivedSSRCs(ssrc: ssrc)
        return c
    }
}

/// Writes `text` to a new file at `path` (an existing file is replaced only once the new one is complete).
package func write(_ text: String, to path: String) throws { try write(text, into: try OutputFile(path: path)) }

/// Writes `text` and closes the file; on a failure the file is discarded (an existing one is kept as it was).
package func write(_ text: String, into f: OutputFile) throws {
    do {
        try f.write(Array(text.utf8))
        try f.close()
    } catch {
        f.discard()
        throw error
    }
}

/// Sends the encoded frames as RTP and acts on the receivers' feedback: PLI/FIR → a key frame, REMB → the
/// bitrate (both taken by the encode stage before its next frame). Writes the SDP once the first key frame
/// gives the real SPS/PPS.
public final class RTPOutput: EncodedOutput {
    /// True: the receiver gets the slate while the camera is away (a player would otherwise time out).
    public var takesPlaceholders: Bool { true }
    /// The sender the frames go through: its statistics, SSRC and RTCP port.
    public let sender: RTPSender
    private var sdpFile: OutputFile?
    private let target: StreamTarget

    private let logger: Logger
    /// Written by one thread at a time (the encoder's, or the pipeline's): the sender's packetizer has one
    /// sending thread, its feedback thread takes only RTCP, and the SDP file is written once, here.
    public var acceptsWritesFromEncoderThread: Bool { true }

    /// `logger` gets the stream's start and stop (debug), nothing per packet.
    public init(
        configuration: RTPSender.Configuration, sdpFile: OutputFile?, target: StreamTarget,
        logger: Logger = Logger(label: "swift-video-capture.rtp", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(PipelineError) {
        do { sender = try RTPSender(configuration: configuration) } catch {
            throw PipelineError(.outputFailed, "cannot stream to \(target): \(error)")
        }
        self.sdpFile = sdpFile
        self.target = target
        self.logger = logger
        logger.debug("stream started", metadata: ["to": "\(target)", "ssrc": "\(sender.ssrc)"])
    }

    /// PLI/FIR → a key frame; REMB → the encoder's bitrate and, with `adapting`, the output size and rate
    /// (`BandwidthFollower`).
    public func connect(_ encode: EncodeStage, adapting requests: OutputRequests?) {
        let control = encode.control
        let follower = BandwidthFollower(encode, adapting: requests)
        sender.setFeedbackHandlers(keyFrameRequest: { control.requestKeyFrame() }, bitrateEstimate: { bps in follower.update(bitsPerSecond: bps) })
    }

    /// PLI/FIR → a key frame asked of a camera whose own H.264 is passed through; REMB → the camera's bitrate
    /// control where it has one (`V4L2_CID_MPEG_VIDEO_BITRATE`), capped at `maxBitrate` bits/s.
    public func connect(_ passthrough: PassthroughStage, maxBitrate: Int = 100_000_000) {
        let control = passthrough.control
        let follower = BandwidthFollower(passthrough, maxBitrate: maxBitrate)
        sender.setFeedbackHandlers(keyFrameRequest: { control.requestKeyFrame() }, bitrateEstimate: { bps in follower.update(bitsPerSecond: bps) })
    }

    /// The SDP a receiver opens for a stream encoded with `settings` (the same settings always give the same
    /// SPS/PPS). The SPS carries the colour description of `settings.colorSpace` only: a stream of camera
    /// frames takes the camera's (`EncodeStage` sets it from the first frame), so set it to the camera's, or
    /// take the SPS/PPS of an encoded camera frame instead (as `camcap stream --sdp-only` does).
    public static func sdp(
        for settings: H264Encoder.Settings, target: StreamTarget, ssrc: UInt32, rtxPayloadType: UInt8?, videoOrientationExtensionID: UInt8? = nil
    ) throws -> String {
        let ps = try H264Encoder.parameterSets(for: settings)
        return SDP.offer(
            host: target.host, port: target.port, sps: ps.sps, pps: ps.pps, rtxPayloadType: rtxPayloadType, ssrc: ssrc,
            videoOrientationExtensionID: videoOrientationExtensionID)
    }

    /// The SDP of a stream to `target` sent with `configuration` (its SSRCs, else those `target` derives:
    /// `StreamTarget.derivedSSRCs(ssrc:)`; RTX; the video-orientation extension), announcing `parameterSets`: the
    /// SPS/PPS of an encoded camera frame (`CaptureSession.encodedParameterSets(settings:keyIntervalSeconds:)`), as
    /// `camcap stream --sdp-only` writes it before the stream starts.
    public static func sdp(target: StreamTarget, configuration: RTPSender.Configuration, parameterSets ps: (sps: [UInt8], pps: [UInt8])) -> String {
        let derived = target.derivedSSRCs(ssrc: configuration.ssrc)
        return SDP.offer(
            host: target.host, port: target.port, sps: ps.sps, pps: ps.pps, rtxPayloadType: configuration.rtxPayloadType, ssrc: derived.media,
            rtxSSRC: configuration.rtxPayloadType == nil ? nil : configuration.rtxSSRC ?? derived.rtx,
            videoOrientationExtensionID: configuration.videoOrientationExtensionID)
    }

    /// Sends one access unit (and writes the SDP file at the first key frame). Throws the sender's `RTPError`
    /// or the SDP file's write error.
    public func write(_ frame: EncodedFrame) throws {
        if let file = sdpFile, frame.isKeyFrame, let ps = RTPSender.parameterSets(of: frame) {
            sdpFile = nil
            let text = SDP.offer(
                host: target.host, port: target.port, sps: ps.sps, pps: ps.pps,
                rtxPayloadType: sender.configuration.rtxPayloadType, ssrc: sender.ssrc,
                rtxSSRC: sender.configuration.rtxPayloadType == nil ? nil : sender.rtxSSRC,
                videoOrientationExtensionID: sender.configuration.videoOrientationExtensionID)
            try CapturePipeline.write(text, into: file)
        }
        try sender.send(frame)
    }
    /// Serves the receiver's last NACKs (see `RTPSender.drainFeedback`), then closes the sender (a last sender
    /// report and a BYE); an SDP file never written is discarded.
    public func end() throws {
        sender.drainFeedback()
        sender.close()
        sdpFile?.discard()
        logger.debug("stream stopped", metadata: ["to": "\(target)", "packets": "\(sender.statistics.packetsSent)"])
    }
    /// Closes the sender and discards the SDP file (a run that failed before its start).
    public func discard() {
        sender.close()
        sdpFile?.discard()
    }

    /// Packets sent, and round-trip time, loss, key-frame requests and retransmissions once there are any.
    public var progress: String? {
        let s = sender.statistics
        return "\(s.packetsSent) pkts" + (s.rttMs.map { "  rtt \(fmt($0, 1)) ms" } ?? "")
            + (s.fractionLost.map { "  loss \(fmt($0 * 100, 1))%" } ?? "")
            + (s.keyFrameRequests > 0 ? "  key requests \(s.keyFrameRequests)" : "") + (s.retransmissions > 0 ? "  rtx \(s.retransmissions)" : "")
    }
    /// What was sent and what the receivers reported (the summary's `rtp`, `rtcp` and `feedback` lines).
    public var report: OutputReport {
        .rtp(RTPOutputReport(statistics: sender.statistics, target: target, ssrc: sender.ssrc, localRTCPPort: sender.localRTCPPort))
    }
}

/// The pictures the encoder gets, as Y4M, and their capture times (monotonic ns, one per line in PATH.timestamps):
/// the reference a receiver's decoded frames are compared with (PSNR, latency). For tests.
package final class InputDumpStage: PictureStage {
    private let y4m: Y4MStage
    private let path: String
    private var times: [Int64] = []
    package init(path: String) throws {
        self.path = path
        y4m = try Y4MStage(path: path)
        times.reserveCapacity(100_000)
    }
    package func begin(_ session: CaptureSession) throws { try y4m.begin(session) }
    package func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        guard times.count < 100_000 else { return }
        try y4m.consume(picture, frame: frame)
        times.append(frame.timestampNs)
    }
    package func end() throws {
        try y4m.end()
        try CapturePipeline.write(times.map(String.init).joined(separator: "\n") + "\n", to: path + ".timestamps")
    }
    package func discard() { y4m.discard() }
    package var report: StageReport { y4m.report }
}

/// Keeps the SPS and PPS of the first key frame written: what an SDP's `sprop-parameter-sets` needs before a
/// stream is sent (run one frame through an `EncodeStage` with this as its output).
public final class ParameterSetCatcher: EncodedOutput {
    /// The first key frame's SPS and PPS; nil until one was written.
    public private(set) var parameterSets: (sps: [UInt8], pps: [UInt8])?
    /// A catcher with nothing caught.
    public init() {}
    /// Keeps the parameter sets of the first key frame.
    public func write(_ frame: EncodedFrame) throws {
        if parameterSets == nil, frame.isKeyFrame { parameterSets = frame.parameterSets }
    }
    /// Nothing to finish.
    public func end() throws {}
    /// Nothing to remove.
    public func discard() {}
}

extension CaptureSession {
    /// Runs the session (give it a stop condition: `frames = 1`) with an `EncodeStage` of `settings` encoding with
    /// `backend` (the encoder the stream will run), and returns
    /// the SPS and PPS of its first key frame: what an SDP written before a stream starts announces, with the
    /// camera's colour description in the VUI. The run's failure is thrown; a run without a key frame is a
    /// `PipelineError` with code `noFrames`.
    public func encodedParameterSets(settings: H264Encoder.Settings, keyIntervalSeconds: Double?, backend: EncoderBackend = .openH264) async throws
        -> (
            sps: [UInt8], pps: [UInt8]
        )
    {
        let catcher = ParameterSetCatcher()
        let stage = EncodeStage(settings: settings, keyIntervalSeconds: keyIntervalSeconds, outputs: [catcher])
        stage.makeEncoder = backend.make // the encoder the stream will run: a hardware encoder's SPS/PPS differ from OpenH264's
        let report = try await run(stages: [stage])
        if let failure = report.failure { throw failure }
        guard let parameterSets = catcher.parameterSets else { throw PipelineError(.noFrames, "the encoder gave no SPS/PPS") }
        return parameterSets
    }
}

extension RTPOutput {
    /// The stage that feeds this output (and `alsoTo`, a recording) from `session`, wired in one call: an
    /// `EncodeStage` with `settings` (REMB also lowering and restoring the size and frame rate when
    /// `adaptsToBandwidth`), or for a camera that delivers H.264 a `PassthroughStage` of its own access units,
    /// packetized as they come. Feedback (PLI/FIR, REMB) goes to the stage; a `fast` session's encode runs on a
    /// thread of its own. Call before the camera starts, once.
    public func stage(
        for session: CaptureSession, settings: H264Encoder.Settings, keyIntervalSeconds: Double?, alsoTo outputs: [any EncodedOutput] = [],
        adaptsToBandwidth: Bool = false
    ) -> any PictureStage {
        if session.selection.frameKind == .accessUnit {
            let stage = PassthroughStage(outputs: [self] + outputs)
            connect(stage, maxBitrate: settings.effectiveMaxBitrate)
            return stage
        }
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: keyIntervalSeconds, outputs: [self] + outputs)
        connect(encode, adapting: adaptsToBandwidth ? session.outputRequests : nil)
        encode.usesEncoderThread = session.configuration.fast // as fast as frames come: encode on a thread, as `Recorder` does
        return encode
    }
}
