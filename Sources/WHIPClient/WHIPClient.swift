public import Foundation
import RTP
import NIOHTTP1
public import H264
public import CapturePipeline
public import WebRTC
public import Logging
import Dispatch
import Synchronization
import SystemIO
public import VideoCaptureCommons

/// Why publishing failed, in words that name the server's answer or the local cause.
public struct WHIPError: CodedError {
    /// What kind of failure this is, to switch on (a `refused` 401/403 will not pass by retrying; `unreachable`
    /// may).
    public var code: Code
    /// What went wrong.
    public var message: String
    /// The HTTP status, when the server answered with an error.
    public var status: Int?
    /// An error with its code, message and, if any, the HTTP status.
    public init(_ code: Code, _ message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }
}

extension ErrorCode where Domain == WHIPError {
    /// The endpoint URL or a setting is wrong; nothing was sent.
    public static var invalidConfiguration: Self { Self(rawValue: "invalid configuration") }
    /// The server answered with an error status (`status` says which) or a redirect that is not followed.
    public static var refused: Self { Self(rawValue: "refused") }
    /// The server could not be reached, or did not answer in time.
    public static var unreachable: Self { Self(rawValue: "unreachable") }
    /// The server's 201 cannot be used (no Location, an answer that does not fit the offer).
    public static var badAnswer: Self { Self(rawValue: "bad answer") }
    /// The output cannot publish yet (a camera's H.264 whose profile is not known, the peer not made).
    public static var notReady: Self { Self(rawValue: "not ready") }
}

/// The HTTP side of WHIP (RFC 9725): POST an SDP offer to the endpoint, get `201 Created` with the answer and
/// the session's resource URL (`Location`), DELETE the resource to end it. A bearer token, if given, goes in
/// `Authorization` on both. Synchronous (each call waits for the server, at most `timeout` seconds, blocked
/// on a condition: waiting costs no CPU).
///
/// The rules, like curl's and a browser's for credentials:
/// - The answer is read as it arrives and bounded: at most `maxAnswerBytes` of body (16 KiB of headers); a
///   larger one stops the reading, closes the connection and fails with the size. Informational responses
///   before it (`100 Continue`, `103 Early Hints`) are skipped, at most 8 of them and 16 KiB in all: more
///   ends the request with an error (`unreachable`) that says so.
/// - The token goes to the endpoint's origin (scheme, host and port) only. A redirect of the offer is followed
///   only when it is a 307 or 308 to the same origin (at most `maxRedirects`); one to another origin (an
///   https → http downgrade is one) or a 301/302/303 (which would turn the POST into a GET) is refused.
/// - The resource is DELETEd only when it is on the endpoint's origin; a `Location` elsewhere is not sent the
///   token (`delete` says so). A 201 whose answer cannot be used is DELETEd before the error is thrown.
public struct WHIPClient: Sendable {
    /// The WHIP endpoint (http or https).
    public var endpoint: URL
    /// The bearer token, if the server wants one.
    public var token: String?
    /// Seconds a request may take (connecting, sending and reading the whole answer).
    public var timeout: Double = 10
    /// The largest answer body read (the SDP answer); more fails the request.
    public var maxAnswerBytes = 64 * 1024
    /// How many same-origin 307/308 redirects of the offer are followed.
    public var maxRedirects = 3

    /// A client for `endpoint`; throws for a URL that is not http(s) with a host.
    public init(endpoint: String, token: String?) throws(WHIPError) {
        guard endpoint.utf8.count <= 2048, let url = URL(string: endpoint), Origin(url) != nil else {
            throw WHIPError(
                .invalidConfiguration, "the WHIP endpoint must be an http:// or https:// URL with a host, got \"\(endpoint.prefix(100))\"")
        }
        self.endpoint = url
        self.token = token
    }

    /// True when `url` has the endpoint's origin (scheme, host and port): the only URLs the token is sent to.
    public func isOnEndpointOrigin(_ url: URL) -> Bool {
        guard let a = Origin(endpoint), let b = Origin(url) else { return false }
        return a == b
    }

    /// The endpoint's origin, scheme://host[:port].
    public var endpointOrigin: String { Origin(endpoint)?.description ?? endpoint.absoluteString }

    /// POSTs `offer`; returns the resource URL (from `Location`, resolved against the endpoint) and the answer.
    /// Throws with the status and the start of the body for anything but 201 with an SDP body and a Location;
    /// a 201 whose body cannot be used has its resource DELETEd first (when it is on the endpoint's origin).
    public func publish(offer: String) throws(WHIPError) -> (resource: URL, answer: String) {
        var url = endpoint
        var redirects = 0
        var r: HTTPAnswer
        while true {
            r = try send(.POST, url, body: Array(offer.utf8), contentType: "application/sdp")
            guard [301, 302, 303, 307, 308].contains(r.status) else { break }
            guard let location = r.header("location"), let next = URL(string: location, relativeTo: url)?.absoluteURL else {
                throw WHIPError(.refused, "the WHIP server answered \(r.status) to the offer without a Location to go to", status: r.status)
            }
            guard isOnEndpointOrigin(next) else {
                let downgrade = url.scheme?.lowercased() == "https" && next.scheme?.lowercased() == "http" ? " (a downgrade from https to http)" : ""
                throw WHIPError(
                    .refused,
                    "the WHIP server redirected the offer (\(r.status)) to \(Self.short(next))\(downgrade), another origin than the endpoint's (\(endpointOrigin)): not followed, the token goes to the endpoint's origin only",
                    status: r.status)
            }
            guard r.status == 307 || r.status == 308 else {
                throw WHIPError(
                    .refused,
                    "the WHIP server redirected the offer with \(r.status), which would turn the POST into a GET: not followed (only 307 and 308 keep the offer)",
                    status: r.status)
            }
            redirects += 1
            guard redirects <= maxRedirects else {
                throw WHIPError(
                    .refused, "the WHIP server redirected the offer more than \(maxRedirects) times: not followed further", status: r.status)
            }
            url = next
        }
        guard r.status == 201 else {
            let why = r.overflow.map { " (\($0))" } ?? ""
            throw WHIPError(
                .refused, "the WHIP server answered \(r.status)\(reason(r.status)) to the offer\(why): \(r.bodyStart())", status: r.status)
        }
        guard let location = r.header("location"), let resource = URL(string: location, relativeTo: url)?.absoluteURL, Origin(resource) != nil
        else {
            throw WHIPError(.badAnswer, "the WHIP server answered 201 without a usable Location header (RFC 9725 §4.2 requires one)", status: 201)
        }
        var unusable: String?
        if let overflow = r.overflow {
            unusable = "the WHIP server's answer is too large: \(overflow)"
        } else if r.body.count > maxAnswerBytes {
            unusable = "the WHIP server's answer is too large: \(r.body.count) bytes, at most \(maxAnswerBytes)"
        } else if !r.body.starts(with: Array("v=0".utf8)) || String(bytes: r.body, encoding: .utf8) == nil {
            unusable = "the WHIP server's 201 carries no SDP answer (\(r.body.count) bytes)"
        }
        guard let problem = unusable else { return (resource, String(decoding: r.body, as: UTF8.self)) }
        throw WHIPError(.badAnswer, problem + "; " + release(resource), status: 201)
    }

    /// DELETEs `resource` after an answer that cannot be used and says how it went (for the error message).
    /// Never throws.
    func release(_ resource: URL) -> String {
        do throws(WHIPError) {
            try delete(resource)
            return "its resource \(Self.short(resource)) was DELETEd"
        } catch {
            return "\(error)"
        }
    }

    /// DELETEs the session's resource (the server frees the publisher). Throws with the status for anything but
    /// 2xx, and without sending anything when the resource is on another origin than the endpoint (the token
    /// is not sent there). Redirects are not followed.
    public func delete(_ resource: URL) throws(WHIPError) {
        guard isOnEndpointOrigin(resource) else {
            throw WHIPError(
                .refused,
                "the resource \(Self.short(resource)) is on another origin than the endpoint's (\(endpointOrigin)): not DELETEd (the token goes to the endpoint's origin only)"
            )
        }
        let r = try send(.DELETE, resource, body: nil, contentType: nil)
        guard (200...299).contains(r.status) else {
            throw WHIPError(.refused, "DELETE \(Self.shown(resource.path)) answered \(r.status)\(reason(r.status))", status: r.status)
        }
    }

    /// How a server's URL is shown in messages, summaries and logs: whole up to 200 bytes, else its first 200
    /// characters and its size (`…(15000 bytes)`): a server's Location of any length costs a line, not a page.
    public static func shown(_ url: URL) -> String { shown(url.absoluteString) }

    /// `shown(_:)` for a URL's text or part (a path).
    public static func shown(_ text: String) -> String {
        let bytes = text.utf8.count
        return bytes <= 200 ? text : "\(text.prefix(200))…(\(bytes) bytes)"
    }

    private static func short(_ url: URL) -> String { shown(url) }

    private func reason(_ status: Int) -> String {
        switch status {
        case 401, 403: " (the token is missing or wrong: --token, --token-file or CAMCAP_WHIP_TOKEN)"
        case 404: " (no such endpoint: check the URL)"
        case 406, 488: " (the server takes no H.264 Constrained Baseline)"
        case 503: " (the server is full or busy)"
        default: ""
        }
    }

    private func send(_ method: HTTPMethod, _ url: URL, body: [UInt8]?, contentType: String?) throws(WHIPError) -> HTTPAnswer {
        var headers: [(String, String)] = []
        if let contentType { headers.append(("Content-Type", contentType)) }
        // Only ever to the endpoint's origin (the callers check too).
        if let token, isOnEndpointOrigin(url) { headers.append(("Authorization", "Bearer \(token)")) }
        do throws(HTTPExchangeError) {
            return try HTTPExchange.send(method, url, headers: headers, body: body, limit: maxAnswerBytes, timeout: timeout)
        } catch {
            throw WHIPError(.unreachable, "\(method.rawValue) \(Self.short(url)): \(error.message)")
        }
    }
}

/// Publishes the encode to a WHIP server (RFC 9725): an `EncodedOutput` that sends every access unit over
/// WebRTC to the server, asks the encoder for a key frame on connection and on the server's PLI/FIR, follows
/// its REMB with the bitrate, and, when the connection ends (the server went away, consent expired, ICE or
/// DTLS never came up), publishes again with backoff: 1, 2, 4 … 30 s between attempts, growing with every
/// attempt that fails (a POST refused, or accepted but whose ICE or DTLS fails) and starting again at 1 s only
/// after a connection has carried media for `Configuration.stableAfter` seconds. `end()` closes the connection
/// and DELETEs the resource.
public final class WHIPOutput: EncodedOutput, Sendable {
    /// How the output publishes.
    public struct Configuration: Sendable {
        /// The publisher's ICE, DTLS and RTP settings.
        public var publisher = WebRTCPublisher.Configuration()
        /// The wait before the first attempt to publish again (seconds); it doubles with every failed attempt.
        public var firstBackoff: Double = 1
        /// The longest wait between two attempts to publish again (seconds).
        public var maxBackoff: Double = 30
        /// Seconds a connection must stay connected (carrying media) before its end starts the backoff at
        /// `firstBackoff` again; a shorter one counts as a failed attempt.
        public var stableAfter: Double = 10
        /// The defaults.
        public init() {}

        /// The wait (seconds) before the next attempt after `failures` failed attempts in a row:
        /// `firstBackoff` × 2^(failures − 1), at most `maxBackoff`; 0 for none. With the defaults 1, 2, 4, 8,
        /// 16, 30, 30 …
        public func backoff(afterFailures failures: Int) -> Double {
            guard failures > 0 else { return 0 }
            return min(maxBackoff, firstBackoff * Double(1 << min(failures - 1, 30)))
        }
    }

    private let client: WHIPClient
    private let configuration: Configuration
    private let identity: DTLSIdentity
    private let logger: Logger
    private struct State {
        var publisher: WebRTCPublisher?
        var resource: URL?
        var connections = 0, attempts = 0
        /// Failed attempts in a row (reset by a connection that lasted `stableAfter`).
        var failures = 0
        var lastEnd: String?
        var ended = false
        var follower: BandwidthFollower?
        var control: EncoderControl?
        var rotation: OutputRequests?
        var reconnector: WorkerThread?
        var reconnecting = false
        /// The connection made by the reconnecting thread ended before the thread was done: go on.
        var retryNeeded = false
        var deleted: String?
        /// A camera's own H.264 passed through: its profile-level-id, which the offer must carry (nil until its
        /// first SPS), and whether publishing has begun.
        var streamProfile: (@Sendable () -> String?)?
        var streamPublishing = false
        /// Simulcast: each layer's encoder control (the layers of `Configuration.publisher.simulcastRIDs`), and the
        /// bitrate the smaller layers take out of the server's estimate before the full layer gets the rest.
        var layerControls: [EncoderControl] = []
        var smallerLayersBitrate = 0
        /// The server's candidates ignored for not being unicast hosts, over every answer, and the last answer's
        /// (at most 4, "224.0.0.1 (multicast (224.0.0.0/4))").
        var candidatesIgnored = 0
        var ignoredExamples: [String] = []
    }
    private let state = Mutex(State())
    /// Wakes the reconnecting thread's backoff wait when the output ends.
    private let wake = DispatchSemaphore(value: 0)

    /// When one connection came up (monotonic ns; 0: not yet).
    private final class ConnectionClock: Sendable {
        let connectedAt = Atomic<Int64>(0)
    }

    /// An output for `client`'s endpoint; nothing is sent until `connect()`.
    public init(
        client: WHIPClient, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "swift-video-capture.whip", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(WebRTCError) {
        self.client = client
        self.configuration = configuration
        self.logger = logger
        identity = try DTLSIdentity.eitherRole()
    }

    /// Key-frame requests and the server's REMB go to `encode`; with `rotation`, the camera's rotation stays
    /// metadata while the server accepts the video-orientation extension. Call before `connect()`.
    public func connect(_ encode: EncodeStage, rotation: OutputRequests? = nil) {
        let follower = BandwidthFollower(encode, adapting: nil)
        state.withLock {
            $0.follower = follower
            $0.control = encode.control
            $0.rotation = rotation
        }
    }

    /// Simulcast: `tiered`'s tiers are published as the layers of `Configuration.publisher.simulcastRIDs` (tier i
    /// as rid i: full, half, quarter size; make the stage with `layerOutputs(_:)`). The server's PLI/FIR on a
    /// layer's SSRC asks that tier's encoder alone for a key frame; its REMB (one estimate for all the layers)
    /// goes to the full tier, less what the smaller tiers aim at. A tier is encoded while its layer is sent: from
    /// the connection on, for every layer the answer took (an answer without simulcast: the full tier alone,
    /// logged). Call before `connect()`.
    public func connect(_ tiered: TieredEncodeStage) {
        let follower = tiered.stages.first.map { BandwidthFollower($0, adapting: nil) }
        state.withLock {
            $0.follower = follower
            $0.control = tiered.stages.first?.control
            $0.rotation = nil
            $0.layerControls = tiered.stages.map(\.control)
            $0.smallerLayersBitrate = tiered.tiers.dropFirst().reduce(0) { $0 + $1.targetBitrate }
        }
    }

    /// The outputs of `count` simulcast layers (`TieredEncodeStage`'s `outputs`): layer i's frames go to the
    /// server as rid i. The first is this output itself (it carries the progress, the summary and the end).
    public func layerOutputs(_ count: Int) -> [[any EncodedOutput]] {
        (0..<count).map { i in i == 0 ? [self] : [LayerOutput(output: self, layer: i)] }
    }

    /// A camera's own H.264 passed through (`PassthroughStage` with this output): the server's PLI/FIR become key
    /// frames asked of the camera, its REMB the camera's bitrate (within `maxBitrate` bits/s) where it has the
    /// controls. The offer carries the camera's profile-level-id, so it is made once the stage has seen the
    /// camera's first SPS: publishing starts then, on a thread of this output, and a failure backs off as a lost
    /// connection does (a wrong URL or token is reported in the progress and summary, not before the camera
    /// starts). Call before the camera starts, instead of `connect()`.
    public func connect(_ passthrough: PassthroughStage, maxBitrate: Int) {
        let follower = BandwidthFollower(passthrough, maxBitrate: maxBitrate)
        let source = passthrough.profileLevelIDSource
        state.withLock {
            $0.follower = follower
            $0.control = passthrough.control
            $0.rotation = nil
            $0.streamProfile = source
        }
        passthrough.onStreamProfile = { [weak self] _ in self?.streamStarted() }
    }

    /// The passed-through stream's first SPS is known: publish, in the background, with backoff.
    private func streamStarted() {
        let start = state.withLock { s -> Bool in
            guard !s.ended, !s.streamPublishing, s.publisher == nil, !s.reconnecting else { return false }
            s.streamPublishing = true
            s.reconnecting = true
            return true
        }
        if start { runReconnector() }
    }

    /// Publishes once: POSTs the offer, takes the answer and starts ICE and DTLS (media follows once they are
    /// up). Throws `WHIPError` when the server refuses or cannot be reached; call it before the camera starts so
    /// a bad URL or token fails at once.
    public func connect() throws(WHIPError) {
        var c = configuration.publisher
        if let source = state.withLock({ $0.streamProfile }) {
            guard let profile = source() else { throw WHIPError(.notReady, "the camera's H.264 has not started: its profile is not known yet") }
            c.profileLevelID = profile
        }
        let host = client.endpoint.host
        let publisher: WebRTCPublisher
        do throws(WebRTCError) { publisher = try WebRTCPublisher(identity: identity, configuration: c, server: host) } catch {
            throw WHIPError(.notReady, "cannot make the WebRTC publisher: \(error)")
        }
        state.withLock { $0.attempts += 1 }
        let (resource, answer) = try client.publish(offer: publisher.offer)
        let clock = ConnectionClock()
        do throws(WebRTCError) {
            try publisher.accept(answer: answer)
            if let a = publisher.answer, a.ignoredCandidateCount > 0 {
                let examples = a.ignoredCandidates.prefix(4).map { "\($0.candidate.host.prefix(46)) (\($0.reason))" }
                state.withLock {
                    $0.candidatesIgnored += a.ignoredCandidateCount
                    $0.ignoredExamples = examples
                }
                logger.warning(
                    "the server's answer lists candidates that are not unicast hosts: ignored, no check goes to them",
                    metadata: ["ignored": "\(a.ignoredCandidateCount)", "examples": "\(examples.joined(separator: ", "))"])
            }
            let (control, follower, rotation, layers, reserve) = state.withLock {
                ($0.control, $0.follower, $0.rotation, $0.layerControls, $0.smallerLayersBitrate)
            }
            rotation?.requestRotationApplied(!publisher.receivesRotation)
            if !c.simulcastRIDs.isEmpty {
                if publisher.isSimulcast {
                    logger.info(
                        "simulcast", metadata: ["layers": "\(publisher.sentLayers.map { c.simulcastRIDs[$0] }.joined(separator: ";"))"])
                } else {
                    logger.warning(
                        "the server's answer drops simulcast (no a=simulcast:recv, or the mid or rid extension refused): publishing the full layer alone"
                    )
                }
            }
            // The current connection before it starts: its end (however soon) is seen as the current one's.
            let stale = state.withLock { s -> WebRTCPublisher? in
                defer {
                    s.publisher = publisher
                    s.resource = resource
                }
                return s.publisher
            }
            stale?.close()
            // Simulcast: the server's PLI/FIR on a layer's SSRC asks that layer's encoder alone; its REMB goes to
            // the full layer less what the smaller ones aim at (at least half of it).
            let layerKeyFrame: (@Sendable (Int) -> Void)? =
                layers.count > 1 ? { @Sendable layer in if layers.indices.contains(layer) { layers[layer].requestKeyFrame() } } : nil
            let smaller = UInt64(reserve)
            let fullLayerShare: @Sendable (UInt64) -> UInt64 = { bps in
                layers.count > 1 ? max(bps / 2, bps > smaller ? bps - smaller : 0) : bps
            }
            try publisher.start(
                WebRTCPublisher.Handlers(
                    connected: { [weak self] in
                        clock.connectedAt.store(monotonicNanoseconds(), ordering: .releasing)
                        self?.state.withLock { $0.connections += 1 }
                        control?.requestKeyFrame()
                        for layer in layers.dropFirst() { layer.requestKeyFrame() }
                        self?.logger.info("publishing", metadata: ["resource": "\(WHIPClient.shown(resource))"])
                    },
                    keyFrameRequest: { control?.requestKeyFrame() },
                    bitrateEstimate: { follower?.update(bitsPerSecond: fullLayerShare($0)) },
                    closed: { [weak self] reason in self?.closed(publisher, reason, clock) }),
                layerKeyFrameRequest: layerKeyFrame)
        } catch {
            state.withLock { s in
                if s.publisher === publisher {
                    s.publisher = nil
                    s.resource = nil
                }
            }
            publisher.close()
            throw WHIPError(.badAnswer, "the WHIP server's answer cannot be used: \(error); \(client.release(resource))")
        }
    }

    /// The connection ended by itself: publish again, with backoff, unless the output has ended.
    private func closed(_ publisher: WebRTCPublisher, _ reason: String, _ clock: ConnectionClock) {
        let connectedAt = clock.connectedAt.load(ordering: .acquiring)
        let stable = connectedAt > 0 && monotonicNanoseconds() - connectedAt >= Int64(configuration.stableAfter * 1e9)
        let start = state.withLock { s -> Bool in
            guard s.publisher === publisher, !s.ended else { return false }
            s.lastEnd = reason
            if stable { s.failures = 0 }
            s.failures += 1
            if s.reconnecting {
                s.retryNeeded = true
                return false
            }
            s.reconnecting = true
            return true
        }
        guard start else { return }
        logger.warning("the WHIP connection ended; publishing again", metadata: ["reason": "\(reason)"])
        runReconnector()
    }

    /// The thread that publishes (again) with backoff until a connection is made or the output ends; the caller
    /// has set `reconnecting`.
    private func runReconnector() {
        // Stopped by WorkerThread's protocol: the flag, then the semaphore the backoff waits on.
        let thread = WorkerThread(name: "whip-reconnect", wake: { [wake] in wake.signal() }) { [self] stop in
            while !stop.isSet {
                // The server may still hold the ended session's resource.
                let (old, failures, ended) = state.withLock { s in
                    defer { s.resource = nil }
                    return (s.resource, s.failures, s.ended)
                }
                if ended { break }
                if let old { try? client.delete(old) }
                let wait = configuration.backoff(afterFailures: failures)
                logger.info("publishing again", metadata: ["in": "\(wait) s", "failed attempts": "\(failures)"])
                // Blocked on the semaphore: `end()` wakes it.
                _ = wake.wait(timeout: .now() + wait)
                if stop.isSet || state.withLock({ $0.ended }) { break }
                do throws(WHIPError) {
                    try connect()
                    let again = state.withLock { s -> Bool in
                        guard s.retryNeeded && !s.ended else { return false }
                        s.retryNeeded = false
                        return true
                    }
                    if !again { break }
                } catch {
                    state.withLock {
                        $0.lastEnd = "\(error)"
                        $0.failures += 1
                    }
                    logger.warning("publishing again failed", metadata: ["error": "\(error)"])
                }
            }
            state.withLock {
                $0.reconnecting = false
                $0.retryNeeded = false
            }
        }
        state.withLock { $0.reconnector = thread }
    }

    /// The current connection's publisher, if any.
    public var publisher: WebRTCPublisher? { state.withLock { $0.publisher } }

    /// The current session's resource URL (what `end()` DELETEs).
    public var resource: URL? { state.withLock { $0.resource } }

    // EncodedOutput

    /// True while connected (frames are encoded only then; the first after a pause is a key frame); with
    /// simulcast, while the full layer is sent.
    /// True: the server gets the slate while the camera is away (an SFU would otherwise end the session).
    public var takesPlaceholders: Bool { true }
    public var wantsFrames: Bool {
        guard !configuration.publisher.simulcastRIDs.isEmpty else { return state.withLock { $0.publisher }?.isConnected ?? false }
        return layerWantsFrames(0)
    }

    /// Simulcast layer `layer` is sent: connected, and the answer took it.
    func layerWantsFrames(_ layer: Int) -> Bool {
        guard let p = state.withLock({ $0.publisher }), p.isConnected else { return false }
        return p.sentLayers.contains(layer)
    }

    /// Sends one access unit of simulcast layer `layer`.
    func write(_ frame: EncodedFrame, layer: Int) { state.withLock { $0.publisher }?.send(frame, layer: layer) }
    /// Always: the camera keeps running while the publisher reconnects.
    public var hasAudience: Bool { true }
    /// `write` may run on the encoder's thread.
    public var acceptsWritesFromEncoderThread: Bool { true }

    /// Sends one access unit to the server.
    public func write(_ frame: EncodedFrame) throws { state.withLock { $0.publisher }?.send(frame) }

    /// DELETEs the resource and ends the connection (RTCP BYE, DTLS close_notify). Never throws: how the DELETE
    /// went is in the summary.
    public func end() throws {
        let (publisher, resource, reconnector) = state.withLock { s -> (WebRTCPublisher?, URL?, WorkerThread?) in
            s.ended = true
            return (s.publisher, s.resource, s.reconnector)
        }
        wake.signal() // also for a reconnector not yet stored in the state
        reconnector?.stop()
        // DELETE first (RFC 9725 §4.3: the server tears the session down), then BYE and close_notify; a server that
        // already dropped the session (404) or cannot be reached does not fail the run: the summary says so.
        if let resource {
            do throws(WHIPError) {
                try client.delete(resource)
                state.withLock { $0.deleted = "DELETE \(WHIPClient.shown(resource.path)): done" }
            } catch {
                state.withLock { $0.deleted = error.status == 404 ? "DELETE \(WHIPClient.shown(resource.path)): already gone (404)" : "\(error)" }
            }
        }
        publisher?.close(reason: "the publisher stopped")
    }

    /// The same as `end()`, errors ignored.
    public func discard() { try? end() }

    /// "whip connected, rtt …" (or "whip reconnecting …") for the progress line.
    public var progress: String? {
        let (reconnecting, attempts) = state.withLock { ($0.reconnecting, $0.attempts) }
        if reconnecting { return "whip reconnecting (\(attempts) attempts in all)" }
        guard let p = state.withLock({ $0.publisher }) else { return "whip: not connected" }
        let s = p.statistics
        return "whip \(s.state)" + (s.rtp?.rttMs.map { ", rtt \(Int($0)) ms" } ?? "")
    }

    /// The resource, the connections made, and what the server asked for.
    public var report: OutputReport {
        let s = state.withLock { ($0.resource, $0.connections, $0.attempts, $0.lastEnd, $0.publisher?.statistics, $0.deleted) }
        var line = "\(s.1) connection\(s.1 == 1 ? "" : "s") (\(s.2) attempt\(s.2 == 1 ? "" : "s"))"
        if let r = s.0 { line += ", resource \(WHIPClient.shown(r))" }
        if let st = s.4?.rtp { // the full layer's, with simulcast (each layer's follows)
            line += "; PLI/FIR \(st.keyFrameRequests), NACKs \(st.nacksReceived), retransmissions \(st.retransmissions)"
            if let e = st.rembBitrate { line += ", REMB \(e / 1000) kbps" }
        }
        if !configuration.publisher.simulcastRIDs.isEmpty, let publisher = state.withLock({ $0.publisher }), publisher.answer != nil {
            let rids = configuration.publisher.simulcastRIDs
            line +=
                publisher.isSimulcast
                ? "; simulcast "
                    + publisher.sentLayers.map { l in
                        let st = publisher.sender(layer: l)?.statistics
                        return "\(rids[l]) \(st?.framesSent ?? 0) frames (PLI/FIR \(st?.keyFrameRequests ?? 0), NACKs \(st?.nacksReceived ?? 0))"
                    }.joined(separator: ", ")
                : "; simulcast refused by the server: the full layer alone"
        }
        let (ignored, examples) = state.withLock { ($0.candidatesIgnored, $0.ignoredExamples) }
        if ignored > 0 {
            line += "; \(ignored) server candidate\(ignored == 1 ? "" : "s") ignored, not unicast: \(examples.joined(separator: ", "))"
        }
        if let e = s.3 { line += "; last end: \(e)" }
        if let d = s.5 { line += "; \(d)" }
        return .lines([("whip", line)])
    }
}

/// Simulcast layer `layer` of a `WHIPOutput` (`WHIPOutput.layerOutputs(_:)`): its frames go to the server as that
/// layer; the output itself carries the progress, the summary and the end.
final class LayerOutput: EncodedOutput, Sendable {
    let output: WHIPOutput
    let layer: Int
    init(output: WHIPOutput, layer: Int) {
        self.output = output
        self.layer = layer
    }
    var wantsFrames: Bool { output.layerWantsFrames(layer) }
    var takesPlaceholders: Bool { true }
    var hasAudience: Bool { true }
    var acceptsWritesFromEncoderThread: Bool { true }
    func write(_ frame: EncodedFrame) throws { output.write(frame, layer: layer) }
    func end() throws {}
    func discard() {}
    var progress: String? { nil }
}
