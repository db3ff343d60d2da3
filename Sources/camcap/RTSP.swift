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
            One capture and one H.264 encoder for every client (resting while nobody plays), over UDP or TCP \
            (interleaved: through firewalls and NAT).
              camcap rtsp -d fixture:vivid    → serving rtsp://127.0.0.1:8554/camera
              ffplay -rtsp_transport tcp rtsp://127.0.0.1:8554/camera
              vlc rtsp://127.0.0.1:8554/camera         (a VLC built with live555)
              gst-launch-1.0 rtspsrc location=rtsp://127.0.0.1:8554/camera \\
                protocols=tcp latency=200 ! rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! autovideosink
              go2rtc.yaml:  streams: { camera: rtsp://127.0.0.1:8554/camera }
              MediaMTX:     paths: { camera: { source: rtsp://127.0.0.1:8554/camera } }
            Runs until Ctrl-C (or --duration/--frames). Anyone who reaches the port can watch unless --user is given \
            (Digest authentication); an address off loopback needs --user, or --no-auth. Limits and timeouts: the \
            --max-* and --*-timeout options. Guide: docs/rtsp.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @OptionGroup var server: ServerOptions // RTSP on --listen; UDP media on a port pair of its host
    @Option(help: "The stream's path in the URL.") var path = "/camera"
    @Option(help: "The server's UDP RTP port (RTCP on the next one); 0 picks a free even/odd pair.") var udpPort = 0
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Require Digest authentication as this user (the password from --password-file or $CAMCAP_RTSP_PASSWORD).") var user: String?
    @Option(help: "Read the password from the first line of this file.") var passwordFile: String?
    @Flag(help: "No authentication on an address off loopback: anyone who can reach it can watch (without it, such an address needs --user).")
    var noAuth = false
    @Option(help: "The authentication realm clients show.") var realm = "camcap"
    @Option(help: "Seconds a UDP session lives without a request or RTCP from its client.") var sessionTimeout: Double = 60
    @Option(help: "Seconds a session has from its SETUP to PLAY before it ends.") var setupTimeout: Double = 6
    @Option(help: "Seconds a connection without a session may stay without a request.") var idleTimeout: Double = 60
    @Option(help: "Sessions (clients) at once.") var maxClients = 16
    @Option(help: "Sessions per client address.") var maxClientsPerAddress = 8
    @Option(help: "Bytes one request may have (request line, headers and body); larger ones get 413 and the connection is closed.")
    var maxRequestBytes = 16_384
    @Option(help: "Also record what is served to this file (fragmented MP4 for .mp4, else Annex-B H.264); the camera then runs without clients too.")
    var output: String?
    @Option(help: .hidden) var nonceLifetime: Double = 300 // tests: seconds a Digest nonce is valid
    @Option(help: .hidden) var slowClientTimeout: Double = 10 // tests: seconds of dropped frames before a TCP client is cut off

    func validate() throws {
        guard let address = ListenAddress(listen) else { return } // refused by ServerOptions
        if user == nil && passwordFile != nil { throw ValidationError("--password-file needs --user") }
        if noAuth && user != nil { throw ValidationError("--no-auth cannot go with --user") }
        if !ServeSecurity.isLoopback(address.host), user == nil, !noAuth {
            throw ValidationError(
                "--listen \(listen) is off loopback: give --user (Digest authentication) or --no-auth (anyone who can reach it can watch)")
        }
        try validating {
            try capture.configuration(untilStopped: true, idleRelease: server.idleRelease).validate()
            try service(address).validate()
            try DigestAuthenticator.validate(user: user, realm: realm, nonceLifetimeNs: nanoseconds(seconds: nonceLifetime))
        }
    }

    /// `--listen`, else 127.0.0.1:8554.
    private var listen: String { server.listen ?? "127.0.0.1:8554" }

    /// The service's settings as given (it keeps the connections within the descriptor limit; `execute()` adds the
    /// authenticator and the recording).
    private func service(_ address: ListenAddress) -> RTSPService.Configuration {
        var c = RTSPService.Configuration(host: address.host, port: address.port, encoder: encoding.recipe)
        (c.hub.path, c.hub.udpPort, c.hub.maxPayload) = (path, udpPort, encoding.mtu)
        c.hub.sessionTimeoutNs = nanoseconds(seconds: sessionTimeout)
        c.hub.setupTimeoutNs = nanoseconds(seconds: setupTimeout)
        c.hub.idleTimeoutNs = nanoseconds(seconds: idleTimeout)
        c.hub.slowClientTimeoutNs = nanoseconds(seconds: slowClientTimeout)
        (c.hub.maxSessions, c.hub.maxSessionsPerAddress) = (maxClients, maxClientsPerAddress)
        server.apply(
            requestTimeoutNs: &c.hub.requestTimeoutNs, maxConnections: &c.hub.maxConnections,
            maxConnectionsPerAddress: &c.hub.maxConnectionsPerAddress)
        c.hub.parserLimits.maxRequestBytes = maxRequestBytes
        c.hub.parserLimits.maxLineLength = min(c.hub.parserLimits.maxLineLength, maxRequestBytes)
        return c
    }

    func execute() async throws {
        let address = ListenAddress(listen)!
        var c = service(address)
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
        let quiet = capture.quiet
        // The listener is up before the camera starts: a busy port fails at once, with nothing captured.
        let service = try await RTSPService.start(
            session: pipeline, configuration: c,
            events: { e in if !quiet || e.kind == .ended { printError("\(e)\n") } },
            logger: cliLogger)
        let note = user == nil && !ServeSecurity.isLoopback(address.host) ? "\nnote: --no-auth: anyone who can reach \(listen) can watch" : ""
        try await pipeline.runCommand(
            "serving", quiet: capture.quiet, stages: [service.stage], namedDevice: capture.device, announce: service.announcement + note,
            serving: true, stop: { await service.stop() })
    }
}
