import ArgumentParser
import Foundation
import VideoCapture
import VideoProcessing
import H264
import CapturePipeline
import RTSPServer
import WHEPServer

struct RTSP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rtsp",
        abstract: "Serve the camera over RTSP (RFC 2326) to ffplay, VLC, GStreamer, go2rtc, MediaMTX or Frigate.",
        discussion: """
            One capture and one H.264 encoder for every client (resting while nobody plays). Clients choose UDP \
            (RTP to their client_port, RTCP both ways; the server's UDP pair is printed) or TCP (interleaved: through \
            firewalls and NAT); each starts at a key frame with SPS/PPS, receiver reports give RTT and loss, PLI a key frame.
              camcap rtsp -d fixture:vivid    → serving rtsp://127.0.0.1:8554/camera
              ffplay -rtsp_transport tcp rtsp://127.0.0.1:8554/camera
              vlc rtsp://127.0.0.1:8554/camera         (a VLC built with live555)
              gst-launch-1.0 rtspsrc location=rtsp://127.0.0.1:8554/camera \\
                protocols=tcp latency=200 ! rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! autovideosink
              go2rtc.yaml:  streams: { camera: rtsp://127.0.0.1:8554/camera }
              MediaMTX:     paths: { camera: { source: rtsp://127.0.0.1:8554/camera } }
            Runs until Ctrl-C (or --duration/--frames); clients get an RTCP BYE.

            Who can watch: anyone who reaches the port, unless --user is given: then Digest authentication (MD5) \
            with the password from --password-file or $CAMCAP_RTSP_PASSWORD (ffplay rtsp://USER:PASSWORD@HOST:8554/camera). \
            An address off loopback (--listen 0.0.0.0:8554) needs --user, or --no-auth to serve anyone. Wrong \
            passwords cost time: from the third in a row each 401 is held back (up to 2 s), three in a row close the \
            connection, and past 5 (+1/s) from an address or 40 (+20/s) in all, answers are refused unchecked (503). \
            A nonce is good only from the address it was given to; a replayed nc or a uri not the request's is refused.

            Limits: --max-clients (per address --max-clients-per-address), --max-connections, --request-timeout for \
            a request, --idle-timeout for a connection without a session. A UDP client with no request and no RTCP \
            for --session-timeout seconds is dropped; a TCP session lasts as long as its connection, and a TCP client \
            that does not read is dropped after 10 s of dropped frames. A session not played within --setup-timeout \
            of its SETUP ends; at --max-connections the connection idle longest without a playing session makes room. \
            A session is known only on its own connection (TCP) or from its client's address (UDP). Guide: docs/rtsp.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @Option(help: "RTSP address: HOST:PORT (port 0 picks a free one; the URL is printed). UDP media uses a port pair on HOST.")
    var listen = "127.0.0.1:8554"
    @Option(help: "The stream's path in the URL.") var path = "/camera"
    @Option(help: "The server's UDP RTP port (RTCP on the next one); 0 picks a free even/odd pair.") var udpPort = 0
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Require Digest authentication as this user (the password from --password-file or $CAMCAP_RTSP_PASSWORD).")
    var user: String?
    @Option(help: "Read the password from the first line of this file.") var passwordFile: String?
    @Flag(help: "No authentication on an address off loopback: anyone who can reach it can watch (without it, such an address needs --user).")
    var noAuth = false
    @Option(help: "The authentication realm clients show.") var realm = "camcap"
    @Option(help: "Seconds a UDP session lives without a request or RTCP from its client.") var sessionTimeout: Double = 60
    @Option(help: "Seconds a session has from its SETUP to PLAY before it ends.") var setupTimeout: Double = 6
    @Option(help: "Seconds a connection has to complete a request once it has begun.") var requestTimeout: Double = 10
    @Option(help: "Seconds a connection without a session may stay without a request.") var idleTimeout: Double = 60
    @Option(help: "Sessions (clients) at once.") var maxClients = 16
    @Option(help: "Sessions per client address.") var maxClientsPerAddress = 8
    @Option(help: "RTSP connections at once.") var maxConnections = 64
    @Option(help: "RTSP connections per client address.") var maxConnectionsPerAddress = 16
    @Option(help: "Bytes one request may have (request line, headers and body); larger ones get 413 and the connection is closed.")
    var maxRequestBytes = 16_384
    @Option(
        help: ArgumentHelp(
            "Release the camera after this many seconds without clients (its light goes off); the next client starts it again. 0 keeps it running.",
            valueName: "seconds"))
    var idleRelease: Double = 30
    @Option(help: "Also record what is served to this file (fragmented MP4 for .mp4, else Annex-B H.264); the camera then runs without clients too.")
    var output: String?
    @Option(help: .hidden) var nonceLifetime: Double = 300 // tests: seconds a Digest nonce is valid
    @Option(help: .hidden) var slowClientTimeout: Double = 10 // tests: seconds of dropped frames before a TCP client is cut off

    func validate() throws {
        try capture.validateCommon()
        try CLIRange.capture(capture)
        guard ListenAddress(listen) != nil else {
            throw ValidationError("--listen must be HOST:PORT with an IPv4/IPv6 address and a port 0...65535, got \"\(listen.prefix(80))\"")
        }
        guard path.hasPrefix("/"), (2...200).contains(path.utf8.count), !path.hasSuffix("/"),
            path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        else { throw ValidationError("--path must be /NAME (visible ASCII without spaces, '?' or '#', no trailing /), got \"\(path.prefix(80))\"") }
        guard udpPort == 0 || (1024...65534).contains(udpPort) else { throw ValidationError("--udp-port must be 0 or 1024...65534, got \(udpPort)") }
        try encoding.check(capture)
        if let user {
            guard (1...64).contains(user.utf8.count), user.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: ":") && $0 != 0x22 }) else {
                throw ValidationError("--user must be 1...64 visible ASCII characters without ':' or '\"'")
            }
        } else if passwordFile != nil {
            throw ValidationError("--password-file needs --user")
        }
        if noAuth && user != nil { throw ValidationError("--no-auth cannot go with --user") }
        if let address = ListenAddress(listen), !ServeSecurity.isLoopback(address.host), user == nil, !noAuth {
            throw ValidationError(
                "--listen \(listen) is off loopback: give --user (Digest authentication) or --no-auth (anyone who can reach it can watch)")
        }
        guard realm.utf8.count <= 64, realm.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f && $0 != 0x22 && $0 != 0x5c }) else {
            throw ValidationError("--realm must be at most 64 printable ASCII characters without quotes or backslashes")
        }
        for (name, v, range) in [
            ("--session-timeout", sessionTimeout, 1.0...3600), ("--setup-timeout", setupTimeout, 0.5...3600),
            ("--request-timeout", requestTimeout, 0.5...3600),
            ("--idle-timeout", idleTimeout, 1.0...86_400), ("--nonce-lifetime", nonceLifetime, 1.0...86_400),
            ("--slow-client-timeout", slowClientTimeout, 0.5...3600),
        ] {
            guard v.isFinite, range.contains(v) else {
                throw ValidationError("\(name) must be \(range.lowerBound)...\(range.upperBound) seconds, got \(v)")
            }
        }
        guard idleRelease.isFinite, idleRelease == 0 || (0.1...86_400).contains(idleRelease) else {
            throw ValidationError("--idle-release must be 0 (never) or 0.1...86400 seconds, got \(idleRelease)")
        }
        for (name, v, range) in [
            ("--max-clients", maxClients, 1...256), ("--max-clients-per-address", maxClientsPerAddress, 1...256),
            ("--max-connections", maxConnections, 1...4096), ("--max-connections-per-address", maxConnectionsPerAddress, 1...4096),
            ("--max-request-bytes", maxRequestBytes, 1024...65536),
        ] {
            guard range.contains(v) else { throw ValidationError("\(name) must be \(range.lowerBound)...\(range.upperBound), got \(v)") }
        }
    }

    func run() async throws {
        do { try await serve() } catch { fail(error) }
    }

    /// The password: the first line of --password-file, else $CAMCAP_RTSP_PASSWORD; nil without --user.
    private func password() throws -> String? {
        guard user != nil else { return nil }
        let text: String
        if let passwordFile {
            text =
                try ServeSecurity.readSmallFile(passwordFile, what: "password file", limit: 4096)
                .split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        } else if let env = ProcessInfo.processInfo.environment["CAMCAP_RTSP_PASSWORD"] {
            text = env
        } else {
            throw CLIError("--user needs a password: --password-file FILE or the environment variable CAMCAP_RTSP_PASSWORD")
        }
        let p = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...256).contains(p.utf8.count) else {
            throw CLIError("the password (\(passwordFile ?? "$CAMCAP_RTSP_PASSWORD")) must be 1...256 bytes, got \(p.utf8.count)")
        }
        return p
    }

    private func serve() async throws {
        let address = ListenAddress(listen)!
        let password = try password() // read before the camera starts: a bad file fails at once
        let pipeline = try CaptureSession(capture.configuration(untilStopped: true, idleRelease: idleRelease))
        let recipe = encoding.recipe
        let settings = try recipe.settings(for: pipeline.selection), keySeconds = recipe.keyIntervalSeconds
        // The SDP needs SPS/PPS before the first frame (the encoder rests until a client plays): an encoder with
        // the same settings gives the same ones; the first real key frame replaces them if they differ.
        // A camera that delivers H.264: the same stand-in until its first key frame (clients decode from the SPS/PPS
        // put before every IDR); its own from then on.
        let parameterSets = try H264Encoder.parameterSets(
            for: EncodeStage.settings(settings, keyIntervalSeconds: keySeconds, for: pipeline.selection.planned))

        var c = RTSPHub.Configuration()
        c.path = path
        c.udpHost = address.host
        c.udpPort = udpPort
        c.sessionTimeoutNs = Int64(sessionTimeout * 1e9)
        c.setupTimeoutNs = Int64(setupTimeout * 1e9)
        c.requestTimeoutNs = Int64(requestTimeout * 1e9)
        c.idleTimeoutNs = Int64(idleTimeout * 1e9)
        c.maxSessions = maxClients
        c.maxSessionsPerAddress = maxClientsPerAddress
        c.maxConnections = min(maxConnections, ServeSecurity.connectionsWithinDescriptorLimit(viewers: maxClients))
        c.maxConnectionsPerAddress = maxConnectionsPerAddress
        c.maxPayload = encoding.mtu
        c.parserLimits.maxRequestBytes = maxRequestBytes
        c.parserLimits.maxLineLength = min(c.parserLimits.maxLineLength, maxRequestBytes)
        c.slowClientTimeoutNs = Int64(slowClientTimeout * 1e9)
        if let user, let password {
            c.authenticator = DigestAuthenticator(user: user, password: password, realm: realm, nonceLifetimeNs: Int64(nonceLifetime * 1e9))
        }
        let hub = try RTSPHub(configuration: c, parameterSets: parameterSets, logger: cliLogger)
        let quiet = capture.quiet
        hub.onEvent { e in
            guard !quiet || e.kind == .ended else { return }
            let s = e.session
            let line: String
            switch e.kind {
            case .setUp: line = "rtsp: client \(s.number) from \(s.client) set up (\(s.transport) \(s.ports))"
            case .playing: line = "rtsp: client \(s.number) playing"
            case .ended: line = "rtsp: client \(s.number) ended: \(e.reason ?? "?") (\(s.framesSent) frames sent)"
            }
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        let recording = try output.map { try RecordingOutput(.init(path: $0, frameRate: pipeline.selection.fps)) }
        // The encode (or the camera's own H.264), key frames, the wake-up, upright pixels.
        let stage = hub.stage(for: pipeline, settings: settings, keyIntervalSeconds: keySeconds, alsoTo: recording.map { [$0] } ?? [])
        // The listener is up before the camera starts: a busy port fails at once, with nothing captured.
        let listener: RTSPListener
        do { listener = try await RTSPListener.start(host: address.host, port: address.port, hub: hub) } catch {
            hub.closeAll(reason: "the server did not start")
            throw error
        }
        let url = "rtsp://\(address.urlHost(interfaceAddresses())):\(listener.port)\(path)"
        var lines = [
            "serving \(url)  (UDP media ports \(hub.udpPorts.rtp)-\(hub.udpPorts.rtcp); "
                + (user.map { "Digest authentication, user \($0))" } ?? "no authentication)")
        ]
        if user == nil && !ServeSecurity.isLoopback(address.host) {
            lines.append("note: --no-auth: anyone who can reach \(listen) can watch")
        }
        let announce = AnnounceStage(line: lines.joined(separator: "\n"))
        do {
            try await pipeline.runCommand("serving", quiet: capture.quiet, stages: [announce, stage], namedDevice: capture.device, serving: true)
        } catch {
            hub.closeAll(reason: "the server stopped")
            await listener.stop()
            throw error
        }
        hub.closeAll(reason: "the server stopped")
        await listener.stop()
    }
}
