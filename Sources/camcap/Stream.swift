import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import H264
import RTP
import CapturePipeline
import Synchronization

struct Stream: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream H.264 over RTP/UDP (RFC 6184) with RTCP feedback, and write the SDP a receiver opens.",
        discussion: """
            The stream is the encode of `record` (same options), packetized for a payload budget of --mtu bytes. \
            RTCP goes to port+1; receiver reports, NACK (retransmission from a 1 s history), PLI/FIR (a key frame, \
            at most one per 300 ms) and REMB (a new bitrate) are acted on, and the progress line shows them.
            Watch it:
              camcap stream -d fixture:vivid --to 127.0.0.1:5004 --sdp stream.sdp --duration 600 &
              ffplay -protocol_whitelist file,udp,rtp stream.sdp
            or with GStreamer:
              gst-launch-1.0 udpsrc port=5004 caps="application/x-rtp,media=video,clock-rate=90000,encoding-name=H264,payload=96" \\
                ! rtph264depay ! h264parse ! avdec_h264 ! autovideosink
            Start the receiver first (or use --sdp-only to write the SDP and exit, then start both).
            A rotated camera is sent as captured, its rotation in the video-orientation RTP extension (declared in \
            the SDP: a=extmap:1 urn:3gpp:video-orientation) on the last packet of each frame; ffplay and GStreamer \
            ignore it and show the sensor's picture.
            """)

    /// The id of the video-orientation extension in the SDP (a=extmap:1 urn:3gpp:video-orientation).
    static let videoOrientationID: UInt8 = 1

    @OptionGroup var capture: CaptureOptions
    @Option(help: "Where to send RTP: HOST:PORT (RTCP goes to PORT+1).") var to: String
    @Option(help: "Write the SDP describing the stream here.") var sdp: String?
    @Flag(help: "Write the SDP (--sdp) and exit without capturing.") var sdpOnly = false
    @Option(help: "RTP payload budget in bytes (packets are this plus 12 bytes of header).") var mtu = 1200
    @Option(help: "Target bitrate in kbps.") var bitrate = 1500
    @Option(help: "Maximum bitrate in kbps (REMB never goes above it; default 1.5 × target).") var maxBitrate: Int?
    @Option(help: "Seconds between key frames (default 2).") var keyintSeconds: Double?
    @Option(help: "Drop this fraction of outgoing RTP packets (0...1; a loss test for NACK and PLI).") var dropRate: Double = 0
    @Option(help: "Send retransmissions as RTX (RFC 4588) with this payload type.") var rtx: Int?
    @Option(help: "Also record the stream to this file (fragmented MP4 for .mp4, else Annex-B H.264).") var output: String?
    @Flag(
        help:
            "Let the receiver's bandwidth estimate (REMB) also lower the resolution and frame rate, and raise them when it recovers (WebRTC's balanced steps); the encoder follows without a camera restart. Off by default, as in `serve`: without probing, a receiver's estimate follows what it gets, so easy content would be shrunk."
    )
    var adaptToBandwidth = false
    @Option(help: "Local port our RTCP socket listens on for receiver reports and feedback (default: any free port).") var rtcpPort: Int = 0
    @Option(
        help: "Also obey RTCP from this address (repeatable). By default only the --to host's feedback is read; anyone else's is dropped and counted."
    )
    var rtcpFrom: [String] = []

    func validate() throws {
        try capture.validateCommon()
        try CLIRange.capture(capture)
        guard let _ = StreamTarget(to) else {
            throw ValidationError("--to must be HOST:PORT with an IPv4/IPv6 address and a port 1...65534, got \"\(to.prefix(80))\"")
        }
        guard (100...65_000).contains(mtu) else { throw ValidationError("--mtu must be 100...65000 bytes, got \(mtu)") }
        guard dropRate.isFinite, (0...1).contains(dropRate) else { throw ValidationError("--drop-rate must be 0...1, got \(dropRate)") }
        if let rtx {
            guard (96...127).contains(rtx) && rtx != 96 else { throw ValidationError("--rtx must be a dynamic payload type 97...127, got \(rtx)") }
        }
        guard (0...65535).contains(rtcpPort) else { throw ValidationError("--rtcp-port must be 0...65535, got \(rtcpPort)") }
        if sdpOnly && sdp == nil { throw ValidationError("--sdp-only needs --sdp PATH") }
        for a in rtcpFrom {
            var a4 = in_addr(), a6 = in6_addr()
            guard inet_pton(AF_INET, a, &a4) == 1 || inet_pton(AF_INET6, a, &a6) == 1 else {
                throw ValidationError("--rtcp-from must be an IP address, got \"\(a.prefix(64))\"")
            }
        }
        try CLIRange.encoder(
            bitrateKbps: bitrate, maxBitrateKbps: maxBitrate, keyint: nil, keyintSeconds: keyintSeconds,
            threads: 1, maxNalSize: nil, fpsLimit: capture.fpsLimit.doubleValue)
    }

    func run() async throws {
        do { try await stream() } catch { fail(error) }
    }

    private func stream() async throws {
        let target = StreamTarget(to)!
        // The SDP file is opened (and locked) before the camera starts: a bad path fails at once, naming it.
        var sdpFile: OutputFile?
        if let sdp, !sdpOnly {
            do { sdpFile = try OutputFile(path: sdp) } catch { throw CLIError("--sdp: \(error)") }
        }
        let pipeline = try CaptureSession(capture.configuration)
        let passThrough = pipeline.selection.pixelFormat == .h264
        if passThrough && (sdpOnly || adaptToBandwidth) {
            throw ValidationError(
                "\(sdpOnly ? "--sdp-only" : "--adapt-to-bandwidth") needs our encoder, and \(pipeline.device.path) delivers H.264 that is streamed as it comes: use --sdp (written from the camera's first key frame), or ask for another format with --pixel-format"
            )
        }
        var settings = EncodeStage.baseSettings(for: pipeline.selection, bitrateKbps: bitrate, maxBitrateKbps: maxBitrate)
        // Slices within the payload budget: no FU-A needed for most NAL units (as WebRTC's encoders do).
        settings.sliceMode = .maxNALSize(max(420, mtu))
        let keySeconds = keyintSeconds ?? 2
        try EncodeStage.check(settings, keyIntervalSeconds: keySeconds, for: pipeline.selection)
        if sdpOnly {
            // The SDP needs the encoder's SPS/PPS: the same settings always give the same ones.
            let text = try RTPOutput.sdp(
                for: EncodeStage.settings(settings, keyIntervalSeconds: keySeconds, for: pipeline.selection.planned), target: target,
                ssrc: 0, rtxPayloadType: rtx.map(UInt8.init), videoOrientationExtensionID: Stream.videoOrientationID)
            try write(text, to: sdp!)
            print("wrote \(sdp!) for \(target) (\(pipeline.selection.size) H.264)")
            return
        }
        var config = RTPSender.Configuration(host: target.host, port: target.port)
        config.maxPayload = mtu
        config.dropRate = dropRate
        config.rtxPayloadType = rtx.map(UInt8.init)
        config.localRTCPPort = rtcpPort
        // The camera's rotation stays metadata (no rotation pass): the last packet of each frame carries it in the
        // video-orientation extension, which the SDP declares. Receivers that ignore it show the sensor's picture.
        config.videoOrientationExtensionID = Stream.videoOrientationID
        config.feedbackFrom = rtcpFrom
        let rtpOutput = try RTPOutput(configuration: config, sdpFile: sdpFile, target: target, logger: cliLogger)
        var outputs: [any EncodedOutput] = [rtpOutput]
        if let output { outputs.append(try RecordingOutput(.init(path: output, frameRate: pipeline.selection.fps))) }
        if passThrough { // the camera's own access units, packetized as they come: no encoder
            let stage = PassthroughStage(outputs: outputs)
            rtpOutput.connect(stage, maxBitrate: settings.effectiveMaxBitrate)
            try await pipeline.runCommand("streaming", quiet: capture.quiet, stages: [stage], namedDevice: capture.device)
            return
        }
        let encode = EncodeStage(settings: settings, keyIntervalSeconds: keySeconds, outputs: outputs)
        rtpOutput.connect(encode, adapting: adaptToBandwidth ? pipeline.outputRequests : nil)
        // As fast as frames come (a fixture with --fast), encode on a thread of its own, as record does.
        encode.usesEncoderThread = capture.fast
        try await pipeline.runCommand("streaming", quiet: capture.quiet, stages: [encode], namedDevice: capture.device)
    }
}
