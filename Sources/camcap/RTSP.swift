import ArgumentParser
import Foundation
import VideoCapture
import CapturePipeline
import RTSPServer
import WHEPServer

struct RTSP: CamcapCommand {
    static let configuration = CommandConfiguration(
        commandName: "rtsp",
        abstract: "Serve the camera over RTSP (RFC 2326) to ffplay, VLC, GStreamer, go2rtc, MediaMTX or Frigate.",
        discussion: """
            One capture and one H.264 encoder for every client (resting while nobody plays), over UDP or TCP (interleaved: NAT).
              camcap rtsp -d fixture:vivid    → serving rtsp://127.0.0.1:8554/camera
              ffplay -rtsp_transport tcp rtsp://127.0.0.1:8554/camera     (or vlc URL: a VLC built with live555)
              gst-launch-1.0 rtspsrc location=rtsp://127.0.0.1:8554/camera protocols=tcp latency=200 \\
                ! rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! autovideosink
              go2rtc.yaml: streams: { camera: rtsp://127.0.0.1:8554/camera }
              MediaMTX:    paths: { camera: { source: rtsp://127.0.0.1:8554/camera } }
            Runs until Ctrl-C (or --duration/--frames). Anyone who reaches the port can watch unless --user is given \
            (Digest); off loopback it needs --user, or --no-auth. Limits: --max-*, --*-timeout. Guide: docs/rtsp.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @OptionGroup var server: ServerOptions // RTSP on --listen; UDP media on a port pair of its host
    @Option(help: "The stream's path in the URL.") var path = "/camera"
    @Option(help: "The server's UDP RTP port (RTCP on the next one); 0 picks a free even/odd pair.") var udpPort = 0
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Require Digest authentication as this user (the password from --password-file or $CAMCAP_RTSP_PASSWORD).") var user: String?
    @Option(help: "Read the password from the first line of this file.") var passwordFile: String?
    @Flag(help: "No authentication off loopback (without it, such an address needs --user): anyone who reaches it watches.") var noAuth = false
    @Option(help: "The authentication realm clients show.") var realm = "camcap"
    @Option(help: "Seconds a UDP session lives without a request or RTCP from its client.") var sessionTimeout: Double = 60
    @Option(help: "Seconds a session has from its SETUP to PLAY before it ends.") var setupTimeout: Double = 6
    @Option(help: "Seconds a connection without a session may stay without a request.") var idleTimeout: Double = 60
    @Option(help: "Sessions (clients) at once.") var maxClients = 16
    @Option(help: "Sessions per client address.") var maxClientsPerAddress = 8
    @Option(help: "Bytes one request may have (line, headers, body); larger: 413 and the connection closed.") var maxRequestBytes = 16_384
    @Option(help: "Also record what is served (MP4 for .mp4, else Annex-B); the camera then runs without clients too.") var output: String?
    @Option(help: .hidden) var nonceLifetime: Double = 300 // tests: seconds a Digest nonce is valid
    @Option(help: .hidden) var slowClientTimeout: Double = 10 // tests: seconds of dropped frames before a TCP client is cut off

    func validate() throws {
        let address = server.address(8554)
        if user == nil && passwordFile != nil { throw ValidationError("--password-file needs --user") }
        if noAuth && user != nil { throw ValidationError("--no-auth cannot go with --user") }
        if !ServeSecurity.isLoopback(address.host), user == nil, !noAuth {
            throw ValidationError(
                "--listen \(address) is off loopback: give --user (Digest authentication) or --no-auth (anyone who can reach it can watch)")
        }
        try validating {
            try capture.configuration(untilStopped: true, idleRelease: server.idleRelease).validate()
            try service(address).validate()
            try DigestAuthenticator.validate(user: user, realm: realm, nonceLifetimeNs: nanoseconds(seconds: nonceLifetime))
        }
    }

    /// The service's settings as given (it keeps the connections within the descriptor limit; `execute()` adds the
    /// authenticator and the recording).
    private func service(_ address: ListenAddress, backend: EncoderBackend = .openH264) -> RTSPService.Configuration {
        var c = RTSPService.Configuration(host: address.host, port: address.port, encoder: encoding.recipe(backend: backend))
        (c.hub.path, c.hub.udpPort, c.hub.maxPayload) = (path, udpPort, encoding.mtu)
        (c.hub.sessionTimeoutNs, c.hub.setupTimeoutNs) = (nanoseconds(seconds: sessionTimeout), nanoseconds(seconds: setupTimeout))
        (c.hub.idleTimeoutNs, c.hub.slowClientTimeoutNs) = (nanoseconds(seconds: idleTimeout), nanoseconds(seconds: slowClientTimeout))
        (c.hub.maxSessions, c.hub.maxSessionsPerAddress) = (maxClients, maxClientsPerAddress)
        server.apply(to: &c.hub, \.requestTimeoutNs, \.maxConnections, \.maxConnectionsPerAddress)
        c.hub.parserLimits.limitRequests(toBytes: maxRequestBytes)
        return c
    }

    func execute() async throws {
        let address = server.address(8554)
        var c = service(address, backend: try encoding.encoder.backend(for: "rtsp"))
        if let user { // the password is read before the camera starts: a bad file fails at once
            let environment = ProcessInfo.processInfo.environment["CAMCAP_RTSP_PASSWORD"]
            guard let password = try DigestAuthenticator.password(file: passwordFile, fallback: environment) else {
                throw ValidationError("--user needs a password: --password-file FILE or the environment variable CAMCAP_RTSP_PASSWORD")
            }
            c.hub.authenticator = DigestAuthenticator(
                user: user, password: password, realm: realm, nonceLifetimeNs: nanoseconds(seconds: nonceLifetime))
        }
        let pipeline = try capture.session(untilStopped: true, idleRelease: server.idleRelease)
        c.recording = output.map { RecordingOutput.Configuration(path: $0) }
        let quiet = capture.quiet // the listener is up before the camera starts: a busy port fails at once, nothing captured
        let events: @Sendable (RTSPEvent) -> Void = { e in if !quiet || e.kind == .ended { printError("\(e)\n") } }
        let service = try await RTSPService.start(session: pipeline, configuration: c, events: events, logger: cliLogger)
        let note = user == nil && !ServeSecurity.isLoopback(address.host) ? "\nnote: --no-auth: anyone who can reach \(address) can watch" : ""
        try await capture.run(pipeline, "serving", stages: [service.stage], announce: service.announcement + note) { await service.stop() }
    }
}
