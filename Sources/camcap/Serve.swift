import ArgumentParser
import Foundation
import VideoCapture
import CapturePipeline
import WHEPServer
import Metrics
import Prometheus

struct Serve: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the camera to browsers over WebRTC (WHEP): open the printed URL.",
        discussion: """
            One capture and one H.264 encode (or up to 3 tiers, --tiers) for every viewer, each on the tier its link carries. \
            GET / is a player page, POST /whep takes an SDP offer (RFC 9725), GET /stats lists the viewers, GET /metrics is Prometheus; \
            GET /snapshot.jpg?width=&height= is the next frame as a JPEG, GET /stream.mjpeg?fps=&width=&height= is MJPEG (both take the token \
            as Authorization: Bearer or ?token=).
              camcap serve -d fixture:vivid --listen 127.0.0.1:8080     → open the URL it prints
            Runs until Ctrl-C (or --duration/--frames). Whoever has the token can watch: a random one, printed in the URL to open, \
            or your own (CAMCAP_TOKEN, --token-file); --no-auth turns it off. Other origins: --allow-origin; HTTPS: --tls-*. \
            Guide: docs/serve.md.
            """)

    @OptionGroup var capture: CaptureOptions
    @OptionGroup var server: ServerOptions // HTTP on --listen; one UDP port per viewer
    @OptionGroup var encoding: RTPEncoderOptions
    @Option(help: "Drop this fraction of outgoing RTP packets (0...1; a loss test for NACK and PLI).") var dropRate: Double = 0
    @Option(help: "The address in the answer's candidate (default: --listen's; for 0.0.0.0 every interface's IPv4).") var candidate: [String] = []
    @Option(help: "SRTP profiles to offer: gcm (AEAD_AES_128_GCM, preferred with both) or cm (AES_CM_128_HMAC_SHA1_80).") var srtp = SRTP.both
    @Flag(help: "Let the lowest viewer's REMB also lower size and frame rate (off: easy content would be shrunk).") var adaptToBandwidth = false
    @Option(help: ArgumentHelp("Encodes at full, half and quarter size (fewer for small pictures); 1: one for all.", valueName: "count")) var tiers =
        3
    @OptionGroup var auth: TokenOptions // default: $CAMCAP_TOKEN, else a random one, printed
    @Option(help: "transport-cc: our estimate per viewer (REMB without it); remb: the viewers' own.") var congestionControl = CongestionControl
        .transportCC
    @Flag(help: "Rotate a rotated camera's pixels instead of sending its rotation in the video-orientation extension.") var rotatePixels = false
    @Option(help: ArgumentHelp("Pace each viewer at this multiple of its estimate (2.5 as libwebrtc); off: a burst a frame.", valueName: "factor"))
    var pacing: Double?
    @Option(help: ArgumentHelp("The playout delay asked of viewers: auto 0:500 while a link is clear; MIN:MAX; off.", valueName: "auto|min:max|off"))
    var playoutDelay = "auto"
    @Flag(help: "No token: anyone who can reach the port (or a page from an allowed origin that can) can watch.") var noAuth = false
    @Option(help: "An origin (scheme://host[:port]) whose pages may use the server (CORS); repeatable, none by default.") var allowOrigin: [String] =
        []
    @Option(help: "A host name also answered to in the Host header (its addresses and localhost always are).") var allowHost: [String] = []
    @Option(help: "HTTPS: the certificate chain (PEM).") var tlsCert: String?
    @Option(help: "HTTPS: the private key (PEM).") var tlsKey: String?
    @Flag(help: "HTTPS with a self-signed certificate made at start for the server's names (fingerprints printed).") var tlsSelfSigned = false
    @Option(help: "Open HTTP connections per client network (IPv4 /24, IPv6 /64) at most.") var maxConnectionsPerNetwork = 128
    @Option(help: "Connected viewers at most.") var maxViewers = 16
    @Option(help: "Viewers still connecting (ICE and DTLS not done) at most.") var maxPending = 8
    @Option(help: "Viewers (connected or connecting) per client address at most.") var maxViewersPerAddress = 8
    @Option(help: "Viewers still connecting per client address at most.") var maxPendingPerAddress = 2
    @Option(help: "Seconds a viewer has to finish ICE and DTLS after its offer; then its slot is freed.") var connectTimeout: Double = 8
    @Option(help: ArgumentHelp("Serve a /snapshot.jpg this recent again instead of waiting for a frame (0: never).", valueName: "seconds"))
    var snapshotCache: Double = 1
    @Option(help: "MJPEG clients (/stream.mjpeg) at most; 0: no MJPEG.") var mjpegClients = 8
    @Option(help: "MJPEG frames per second when the client asks for none (?fps=, at most the camera's).") var mjpegFps: Double = 5
    @Option(help: .hidden) var consentTimeout: Double = 30 // tests: seconds without a STUN check before a viewer is dropped
    @Option(help: .hidden) var dumpInput: String? // tests: the encoder's input as Y4M, capture times in PATH.timestamps

    enum CongestionControl: String, CaseIterable, ExpressibleByArgument { case transportCC = "transport-cc", remb }
    enum SRTP: String, CaseIterable, ExpressibleByArgument { case gcm, cm, both }

    func validate() throws {
        if noAuth && (auth.token != nil || auth.tokenFile != nil) { throw ValidationError("--no-auth cannot go with --token or --token-file") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("HTTPS needs both --tls-cert and --tls-key") }
        if tlsSelfSigned && tlsCert != nil { throw ValidationError("--tls-self-signed cannot go with --tls-cert/--tls-key") }
        try validating {
            try capture.configuration(untilStopped: true, idleRelease: server.idleRelease).validate()
            try service(token: auth.token).validate(frameRate: capture.fpsLimit.doubleValue)
        }
    }

    /// The service the options describe: the address, the peers (loss test, timeouts, extensions, playout delay, the
    /// send-side estimate), the limits, the encodes, the policy, SRTP and TLS.
    private func service(token: String?, source: String? = nil, backend: EncoderBackend = .openH264) throws -> WHEPService.Configuration {
        let address = server.address(8080)
        let broadcast = WHEPBroadcast.Configuration(
            encoder: encoding.recipe(backend: backend), tiers: tiers, adaptsToBandwidth: adaptToBandwidth, rotationAsMetadata: !rotatePixels)
        var c = WHEPService.Configuration(host: address.host, port: address.port, policy: try policy(token: token), broadcast: broadcast)
        (c.tokenSource, c.peer.candidateHosts) = (source, candidate)
        (c.peer.maxPayload, c.peer.dropRate, c.peer.pacingFactor) = (encoding.mtu, dropRate, pacing)
        (c.peer.consentTimeoutNs, c.peer.connectTimeoutNs) = (nanoseconds(seconds: consentTimeout), nanoseconds(seconds: connectTimeout))
        (c.peer.useVideoOrientation, c.peer.useTransportWideCC) = (!rotatePixels, congestionControl == .transportCC)
        try c.peer.setPlayoutDelay(parsing: playoutDelay)
        c.limits = ViewerHub.Limits(
            maxViewers: maxViewers, maxPending: maxPending, maxPerAddress: maxViewersPerAddress, maxPendingPerAddress: maxPendingPerAddress)
        c.srtpProfiles = srtp == .gcm ? [.aeadAes128Gcm] : srtp == .cm ? [.aes128CmSha1_80] : [.aeadAes128Gcm, .aes128CmSha1_80]
        c.tls = tlsCert.map { .files(certificate: $0, key: tlsKey ?? "") } ?? (tlsSelfSigned ? .selfSigned : .none)
        var stills = JPEGFeed.Configuration()
        (stills.cacheWindowNs, stills.maxClients, stills.defaultFrameRate) = (nanoseconds(seconds: snapshotCache), mjpegClients, mjpegFps)
        stills.maxClientsPerAddress = max(1, min(stills.maxClientsPerAddress, mjpegClients))
        c.stills = stills
        return c
    }

    /// Who may use the server, and how much of it (the connections as given: the service keeps them within the
    /// descriptor limit).
    private func policy(token: String?) throws -> ServerPolicy {
        var policy = try ServerPolicy(token: token, allowedOrigins: Set(allowOrigin), hostNames: Set(allowHost))
        (policy.realm, policy.tokenHint) = ("camcap", "the token is in the URL camcap serve printed")
        policy.maxConnectionsPerNetwork = maxConnectionsPerNetwork
        server.apply(to: &policy, \.requestTimeoutNs, \.maxConnections, \.maxConnectionsPerAddress)
        return policy
    }

    func execute() async throws {
        // Everything read from files (token, certificate) is read before the camera starts: a bad path fails at once.
        let (token, tokenSource) = try ServeSecurity.token(
            noAuth: noAuth, given: auth.token, file: auth.tokenFile, environment: ProcessInfo.processInfo.environment)
        let registry = PrometheusCollectorRegistry(), buckets = [250, 500, 1000, 2000, 4000, 8000, 16_000, 33_000, 66_000, 133_000]
        var factory = PrometheusMetricsFactory(registry: registry) // GET /metrics: the library's swift-metrics, as Prometheus text
        factory.defaultDurationHistogramBuckets = buckets.map { .microseconds($0) }
        MetricsSystem.bootstrap(factory)
        let backend = try encoding.encoder.backend(for: "serve")
        let pipeline = try capture.session(untilStopped: true, idleRelease: server.idleRelease)
        let dump: [any PictureStage] = try dumpInput.map { [try InputDumpStage(path: $0)] } ?? []
        // The HTTP server is up before the camera starts: a busy port fails at once, with nothing captured. The URL
        // is printed once the camera runs (a busy camera fails before anyone is invited).
        let service = try await WHEPService.start(
            session: pipeline, configuration: service(token: token, source: tokenSource, backend: backend), metrics: { registry.emitToString() },
            logger: cliLogger)
        try await capture.run(pipeline, "serving", stages: dump + service.stages, announce: service.announcement) { await service.stop() }
    }
}
