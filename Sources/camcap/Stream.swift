import ArgumentParser
import VideoCapture
import RTP
import VideoProcessing
import CapturePipeline

struct Stream: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream H.264 over RTP/UDP (RFC 6184) with RTCP feedback, and write the SDP a receiver opens.",
        discussion: """
            The encode of `record`, packetized for a payload budget of --mtu bytes; RTCP on port+1 (receiver reports, NACK, \
            PLI/FIR, REMB) is acted on and shown on the progress line.
              camcap stream -d fixture:vivid --to 127.0.0.1:5004 --sdp stream.sdp --duration 600 &
              ffplay -protocol_whitelist file,udp,rtp stream.sdp
              gst-launch-1.0 udpsrc port=5004 caps="application/x-rtp,media=video,clock-rate=90000,encoding-name=H264,payload=96" \\
                ! rtph264depay ! h264parse ! avdec_h264 ! autovideosink
            Start the receiver first, or write the SDP with --sdp-only and start both. A rotated camera's rotation goes in the \
            video-orientation extension (ffplay and GStreamer ignore it). Guide: docs/stream.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(
        name: .customLong("to"), help: "Where to send RTP: HOST:PORT (RTCP goes to PORT+1).",
        transform: parsing(StreamTarget.init, "--to must be HOST:PORT with an IPv4/IPv6 address and a port 1...65534"))
    var target: StreamTarget
    @Option(help: "Write the SDP describing the stream here.") var sdp: String?
    @Option(help: "The stream's SSRC (1...4294967295; default: derived from --to, the same in every run to that address).") var ssrc: UInt32?
    @Flag(help: "Write the SDP (--sdp) and exit without capturing.") var sdpOnly = false
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Drop this fraction of outgoing RTP packets (0...1; a loss test for NACK and PLI).") var dropRate: Double = 0
    @Option(help: "Send retransmissions as RTX (RFC 4588) with this payload type.") var rtx: Int?
    @Option(help: "Also record the stream to this file (fragmented MP4 for .mp4, else Annex-B H.264).") var output: String?
    @Flag(help: "Let the receiver's estimate (REMB) also lower and restore size and frame rate (balanced steps).") var adaptToBandwidth = false
    @Option(help: "Local port our RTCP socket listens on for receiver reports and feedback (default: any free port).") var rtcpPort: Int = 0
    @Option(
        help:
            "Also obey RTCP from ADDRESS (any port) or ADDRESS:PORT (repeatable; no port is latched then); else only from --to's ports and the one port there its first reports latch."
    ) var rtcpFrom: [String] = []

    func validate() throws {
        if let rtx, !(97...127).contains(rtx) { throw ValidationError("--rtx must be a dynamic payload type 97...127, got \(rtx)") }
        if sdpOnly && sdp == nil { throw ValidationError("--sdp-only needs --sdp PATH") }
        if ssrc == 0 { throw ValidationError("--ssrc must be 1...4294967295") }
        try validating { try sender(target).validate() }
    }

    /// The RTP sender's settings: the target's (the rotation as metadata, SSRCs derived from --to unless given), ours.
    private func sender(_ target: StreamTarget) -> RTPSender.Configuration {
        var c = target.senderConfiguration(ssrc: ssrc)
        (c.maxPayload, c.dropRate, c.localRTCPPort, c.feedbackFrom) = (encoding.mtu, dropRate, rtcpPort, rtcpFrom)
        c.rtxPayloadType = rtx.map(UInt8.init)
        return c
    }

    func execute() async throws {
        // The SDP file is opened (and locked) before the camera starts: a bad path fails at once, naming it.
        var sdpFile: OutputFile?
        if let sdp, !sdpOnly {
            do { sdpFile = try OutputFile(path: sdp) } catch { throw ValidationError("--sdp: \(error)") }
        }
        // --sdp-only: one frame, whose SPS/PPS (with the camera's colour description) are the stream's.
        let pipeline = try capture.session(frames: sdpOnly ? 1 : nil, waitsForCamera: !sdpOnly)
        if pipeline.selection.frameKind == .accessUnit && (sdpOnly || adaptToBandwidth) {
            throw ValidationError(
                "\(sdpOnly ? "--sdp-only" : "--adapt-to-bandwidth") needs our encoder, and \(pipeline.device.path) delivers H.264 that is streamed as it comes: use --sdp (written from the camera's first key frame), or ask for another format with --pixel-format"
            )
        }
        let settings = try encoding.recipe.settings(for: pipeline.selection), keySeconds = encoding.recipe.keyIntervalSeconds
        if sdpOnly {
            // The SDP needs the SPS/PPS of the stream: one frame of the camera, encoded as the stream will be.
            let ps = try await pipeline.encodedParameterSets(
                settings: settings, keyIntervalSeconds: keySeconds, backend: try encoding.encoder.backend(for: "stream"))
            try write(RTPOutput.sdp(target: target, configuration: sender(target), parameterSets: ps), to: sdp!)
            print("wrote \(sdp!) for \(target) (\(pipeline.selection.size) H.264, SSRC \(target.derivedSSRCs(ssrc: ssrc).media))")
            return
        }
        let rtpOutput = try RTPOutput(configuration: sender(target), sdpFile: sdpFile, target: target, logger: cliLogger)
        let recording = try output.map { try RecordingOutput(.init(path: $0, frameRate: pipeline.selection.fps)) }
        let stage = rtpOutput.stage(
            for: pipeline, settings: settings, keyIntervalSeconds: keySeconds, alsoTo: recording.map { [$0] } ?? [],
            adaptsToBandwidth: adaptToBandwidth)
        encoding.recipe(backend: try encoding.encoder.backend(for: "stream")).applyBackend(to: stage)
        try await capture.run(pipeline, "streaming", stages: [stage])
    }
}
