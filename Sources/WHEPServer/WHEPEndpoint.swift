import Foundation
import Synchronization
import Metrics
import CapturePipeline
public import VideoCaptureCommons
import WebRTC

/// Who may use the server and how much of it: the bearer token (RFC 9725 §4.1; nil: no authentication), the
/// origins allowed cross-origin access, the names the server answers to (Host, against DNS rebinding), and limits.
public struct ServerPolicy: Sendable {
    /// The bearer token every request needs except the player page (GET /) and CORS preflights (OPTIONS), the
    /// app's own routes included; nil for none (anyone who reaches the server may watch). Set by `init`, which
    /// checks it (16–256 characters of RFC 6750's b64token).
    public private(set) var token: String?
    /// Origins (`https://app.example`, lower-case, no path) whose pages may call the endpoint cross-origin;
    /// requests from any other foreign origin get 403.
    public var allowedOrigins: Set<String> = []
    /// Lower-case host names and addresses a request's Host may name (without the port).
    public var hostNames: Set<String> = []
    /// The page is served over HTTPS (its own origin is https://HOST).
    public var tls = false
    /// A complete request (head and body) within this long of the connection opening or of the previous
    /// response, else the connection is closed (slowloris; idle keep-alive connections).
    public var requestTimeoutNs: Int64 = 10_000_000_000
    /// HTTP connections open at once; past it the one evictable longest is evicted (no request in progress, or
    /// one without the token), or the new one gets 503.
    public var maxConnections = 256
    /// HTTP connections open at once from one client address; past it that address's connection evictable
    /// longest is evicted, or the new one gets 429.
    public var maxConnectionsPerAddress = 32
    /// HTTP connections open at once from one network (an IPv4 /24, an IPv6 /64), so that many addresses of one
    /// host or subnet count together; past it that network's connection evictable longest is evicted, or 429.
    public var maxConnectionsPerNetwork = 128
    /// The largest request head (request line and headers) taken, in bytes; past it 431 and the connection is closed.
    public var maxHeadBytes = 16 * 1024
    /// The realm of the 401's `WWW-Authenticate: Bearer realm="…"`, the app's name (printable ASCII; quotes,
    /// backslashes and control characters are dropped, at most 64 characters kept).
    public var realm: String {
        get { realmValue }
        set { realmValue = String(newValue.filter { $0.isASCII && $0 != "\"" && $0 != "\\" && ($0.asciiValue ?? 0) >= 0x20 }.prefix(64)) }
    }
    private var realmValue = "WHEP"
    /// Where a user finds the token, added to the 401's text ("this server needs Authorization: Bearer TOKEN
    /// (HINT)"); nil says nothing more. `camcap serve` says its printed URL holds it.
    public var tokenHint: String?

    /// A policy with the default limits. Give `hostNames`: with none, every request's Host is refused. The
    /// `allowedOrigins` are lower-cased as browsers send them (`ServeSecurity.origin(_:)`; one that is no origin
    /// is kept as given, for `validate()` to refuse). A token that is not 16–256 characters of RFC 6750's b64token
    /// (`ServeSecurity.tokenRule`) is a `ServerError` with code `badToken` naming its length.
    public init(token: String?, allowedOrigins: Set<String> = [], hostNames: Set<String> = []) throws(ServerError) {
        if let token, !ServeSecurity.isValidToken(token) {
            let n = token.utf8.count
            throw ServerError(
                .badToken,
                (16...256).contains(n)
                    ? "the token has a character outside A-Z a-z 0-9 - . _ ~ + /: \(ServeSecurity.tokenRule)"
                    : "the token is \(n) characters long: \(ServeSecurity.tokenRule)")
        }
        self.token = token
        self.allowedOrigins = Set(allowedOrigins.map { ServeSecurity.origin($0) ?? $0 })
        self.hostNames = hostNames
    }

    /// Constant-time comparison of `Authorization: Bearer …` with the token.
    public func authorizes(_ header: String?) -> Bool {
        guard let token else { return true }
        guard let header, header.count <= 1024 else { return false }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
        let given = Array(parts[1].trimmingCharacters(in: .whitespaces).utf8), wanted = Array(token.utf8)
        var diff = given.count ^ wanted.count
        for i in 0..<wanted.count { diff |= Int(wanted[i] ^ (i < given.count ? given[i] : 0)) }
        return diff == 0
    }

    /// The host part of a Host header ("[::1]:8080" → "::1", "Example.com:80" → "example.com").
    public static func hostPart(_ host: String) -> String {
        var h = Substring(host.lowercased())
        if h.hasPrefix("["), let close = h.firstIndex(of: "]") { return String(h[h.index(after: h.startIndex)..<close]) }
        if let colon = h.lastIndex(of: ":"), h.firstIndex(of: ":") == colon { h = h[..<colon] }
        return String(h)
    }
}

/// What the server refused, by reason (GET /stats shows them; each abuse test reads its own).
public struct RefusalCounters: Sendable {
    /// Refusals before a request is routed: a missing or wrong token (401), a foreign Origin (403), a foreign
    /// Host (403), the connection limits (503, 429: overall, per address, per network), and evictable connections
    /// evicted to make room.
    public var unauthorized = 0, foreignOrigin = 0, foreignHost = 0, connectionLimit = 0, perAddressConnectionLimit = 0,
        perNetworkConnectionLimit = 0, evicted = 0
    /// Request heads over the size limit (431), and plain HTTP sent to the HTTPS port (400).
    public var headTooLarge = 0, plainHTTPOnTLS = 0
    /// Refusals of requests and offers: request timeouts, the hub's viewer limits (503, 429), and offers that
    /// could not be answered (400, 406).
    public var timeouts = 0, viewerLimit = 0, pendingLimit = 0, perAddressViewerLimit = 0, badOffer = 0
    var json: [(String, Any)] {
        [
            ("unauthorized", unauthorized), ("foreignOrigin", foreignOrigin), ("foreignHost", foreignHost), ("connectionLimit", connectionLimit),
            ("perAddressConnectionLimit", perAddressConnectionLimit), ("perNetworkConnectionLimit", perNetworkConnectionLimit),
            ("headTooLarge", headTooLarge), ("plainHTTPOnTLS", plainHTTPOnTLS), ("evicted", evicted), ("timeouts", timeouts),
            ("viewerLimit", viewerLimit),
            ("pendingLimit", pendingLimit), ("perAddressViewerLimit", perAddressViewerLimit), ("badOffer", badOffer),
        ]
    }
}

/// An HTTP request as the endpoint sees it, from whatever server received it.
public struct WHEPRequest: Sendable {
    /// The HTTP method, upper-case (`GET`, `POST`, `DELETE`, `OPTIONS`).
    public var method: String
    /// The request target; a query is ignored.
    public var uri: String
    /// The request's headers, in order (`header(_:)` looks one up).
    public var headers: [(name: String, value: String)]
    /// The request body (an SDP offer for POST /whep).
    public var body: [UInt8]
    /// The client's IP address (limits per address).
    public var client: String

    /// A request as a host received it.
    public init(method: String, uri: String, headers: [(name: String, value: String)], body: [UInt8] = [], client: String) {
        self.method = method
        self.uri = uri
        self.headers = headers
        self.body = body
        self.client = client
    }

    /// The first header of that name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
    /// The path without the query.
    public var path: String { uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri }
}

/// The endpoint's answer; the host adds Content-Length and connection handling.
public struct WHEPResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Headers to send, in order.
    public var headers: [(name: String, value: String)]
    /// The body (text: an SDP answer, the page, JSON, or a message).
    public var body: String
    /// A binary body (a JPEG), sent instead of `body` when set.
    public var bytes: [UInt8]?
    /// A response; the host adds Content-Length.
    public init(status: Int, headers: [(name: String, value: String)], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }
    /// A response with a binary body (`bytes`); the host adds Content-Length.
    public init(status: Int, headers: [(name: String, value: String)], bytes: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = ""
        self.bytes = bytes
    }
    /// The body's bytes: `bytes`, else `body` as UTF-8.
    public var bodyBytes: [UInt8] { bytes ?? Array(body.utf8) }
}

/// How the endpoint answers a request (`WHEPEndpoint.reply(to:routes:)`): at once, once a frame is encoded (a
/// snapshot), or as an MJPEG stream.
public enum WHEPReply: Sendable {
    /// The response, now.
    case response(WHEPResponse)
    /// `GET /snapshot.jpg` waiting for the next frame: the host answers when `PendingSnapshot.whenReady(_:)` calls
    /// back, or with `PendingSnapshot.cancel(timedOut:)`'s 503 after `PendingSnapshot.timeoutNs`.
    case snapshot(PendingSnapshot)
    /// `GET /stream.mjpeg`: the host sends `head` (no Content-Length: the stream runs until either side closes),
    /// then each part `client` offers (`MJPEGClient.whenReady(_:)`, `MJPEGClient.take()`), and closes the client
    /// when the connection ends.
    case stream(head: WHEPResponse, client: MJPEGClient)
}

/// A snapshot request waiting for its frame. Its answer comes once: to the handler given to `whenReady(_:)`, or as
/// `cancel(timedOut:)`'s response, whichever is first.
public final class PendingSnapshot: Sendable {
    private let feed: JPEGFeed
    private let answer: @Sendable (Result<[UInt8], JPEGFeed.StillRefusal>) -> WHEPResponse
    private struct State {
        var id: UInt64?
        var result: WHEPResponse?
        var handler: (@Sendable (WHEPResponse) -> Void)?
        var done = false
    }
    private let state = Mutex(State())

    init(feed: JPEGFeed, answer: @escaping @Sendable (Result<[UInt8], JPEGFeed.StillRefusal>) -> WHEPResponse) {
        self.feed = feed
        self.answer = answer
    }

    /// How long the host waits before `cancel(timedOut: true)` (the feed's `snapshotTimeoutNs`).
    public var timeoutNs: Int64 { feed.configuration.snapshotTimeoutNs }

    /// Calls `handler` once with the answer (the JPEG, or the refusal), from the session's thread or at once.
    public func whenReady(_ handler: @escaping @Sendable (WHEPResponse) -> Void) {
        let ready = state.withLock { s -> WHEPResponse? in
            guard !s.done else { return nil }
            if let r = s.result {
                s.done = true
                return r
            }
            s.handler = handler
            return nil
        }
        if let ready { handler(ready) }
    }

    /// The answer, awaited (for hosts with async handlers).
    public func response() async -> WHEPResponse {
        await withCheckedContinuation { c in whenReady { c.resume(returning: $0) } }
    }

    /// Gives up waiting (the client left, or `timeoutNs` passed): the 503 to send when the answer had not come
    /// (the handler is then never called), nil when it had.
    public func cancel(timedOut: Bool) -> WHEPResponse? {
        let (id, pending) = state.withLock { s -> (UInt64?, Bool) in
            guard !s.done, s.result == nil else { return (nil, false) }
            s.done = true
            s.handler = nil
            return (s.id, true)
        }
        guard pending else { return nil }
        if let id { feed.cancelSnapshot(id, timedOut: timedOut) }
        let seconds = Double(timeoutNs) / 1e9
        return answer(
            .failure(
                JPEGFeed.StillRefusal(
                    status: 503, message: "no frame came from the camera within \(seconds) s; try again later", retryAfter: 5)))
    }

    func started(_ id: UInt64?) { state.withLock { $0.id = id } }

    func complete(_ result: Result<[UInt8], JPEGFeed.StillRefusal>) {
        let response = answer(result)
        let handler = state.withLock { s -> (@Sendable (WHEPResponse) -> Void)? in
            guard !s.done, s.result == nil else { return nil }
            s.result = response
            guard let h = s.handler else { return nil }
            s.done = true
            s.handler = nil
            return h
        }
        handler?(response)
    }

    /// The answer when it came before the request left the endpoint (from the cache window, or refused).
    var immediate: WHEPResponse? {
        state.withLock { s in
            guard let r = s.result else { return nil }
            s.done = true
            return r
        }
    }
}

/// The WHEP server without an HTTP server (RFC 9725): the policy checks (Host, Origin, token) and the routes,
/// request in, response out. Any HTTP server can call it; `HTTPServer` is the SwiftNIO host `camcap serve` uses.
///   GET /            the player page (public: it holds no secret; it reads the token from the URL's fragment)
///   POST /whep       SDP offer → 201 Created, Location: /whep/ID (unguessable), ETag of the ICE session, the SDP answer
///   DELETE /whep/ID  ends that viewer (200; 404 for an unknown one)
///   GET /stats       the viewers and the refusal counters, as JSON
///   GET /metrics     Prometheus text (when the app gives `metrics`): the capture, the encoder, the viewers
///   GET /snapshot.jpg?width=&height=        the next frame as a JPEG (when the app gives `stills`)
///   GET /stream.mjpeg?fps=&width=&height=   MJPEG, multipart/x-mixed-replace (when the app gives `stills`)
///   GET /mjpeg.html  a page showing the MJPEG stream (public; the token, rate and size from its URL's fragment)
/// The stills take the token also as `?token=` (an `<img>` cannot send Authorization); see `reply(to:routes:)`.
public final class WHEPEndpoint: Sendable {
    /// The viewers POST adds to and DELETE removes from.
    public let hub: ViewerHub
    /// The token, origins, host names and limits every request is checked against.
    public let policy: ServerPolicy
    private let metrics: (@Sendable () -> String)?
    /// Stills and MJPEG (`GET /snapshot.jpg`, `GET /stream.mjpeg`); nil: the server has none (404).
    public let stills: JPEGFeed?
    private let reportedRefusals = Mutex(RefusalCounters())
    /// The largest offer taken (64 KiB).
    public static let maxBody = 64 * 1024
    private let refusals = Mutex(RefusalCounters())
    private let connections = Mutex<@Sendable () -> Int>({ 0 })

    /// `metrics` renders the app's metrics registry (swift-metrics' backend) for GET /metrics, after the
    /// endpoint has brought the viewers' and its refusals' metrics up to date; nil: no /metrics.
    /// `stills` serves `GET /snapshot.jpg` and `GET /stream.mjpeg` (run its stage in the session); nil: neither.
    public init(hub: ViewerHub, policy: ServerPolicy, metrics: (@Sendable () -> String)? = nil, stills: JPEGFeed? = nil) {
        self.hub = hub
        self.policy = policy
        self.metrics = metrics
        self.stills = stills
    }

    /// The help text of the server's metrics (and the pipeline's), given as `# HELP` before each family.
    public static let metricsHelp: [String: String] = pipelineMetricsHelp.merging([
        "whep_viewers": "Viewers connected or connecting.",
        "whep_viewers_joined_total": "Viewers whose offer was answered.",
        "whep_viewers_left_total": "Viewers that ended (DELETE, consent expired, failed to connect, server stop).",
        "whep_viewer_rtt_seconds": "Round-trip time to the viewer, from its RTCP receiver reports.",
        "whep_viewer_fraction_lost": "Fraction of packets the viewer reported lost (last receiver report).",
        "whep_viewer_remb_bps": "The viewer's receiver-estimated maximum bitrate (REMB).",
        "whep_viewer_bytes_sent_total": "RTP bytes sent to the viewer.",
        "whep_viewer_nacks_total": "NACK messages from the viewer.",
        "whep_viewer_retransmitted_bytes_total": "Bytes retransmitted to the viewer after NACKs.",
        "whep_viewer_key_frame_requests_total": "Key-frame requests (PLI/FIR) from the viewer.",
        "whep_refused_total": "Requests and connections refused, by reason.",
        "whep_snapshots_total": "Snapshots (GET /snapshot.jpg) answered with a JPEG, from the cache window or a new frame.",
        "whep_jpeg_encodes_total": "JPEG encodes for snapshots and MJPEG (one per frame and size, shared).",
        "whep_mjpeg_frames_total": "MJPEG parts handed to clients.",
        "whep_mjpeg_clients": "MJPEG clients connected.",
    ]) { a, _ in a }

    /// Prometheus text with a `# HELP` line before each `# TYPE` line whose metric has help text.
    static func withHelp(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 2048)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first, let help = metricsHelp[String(name)] {
                out += "# HELP \(name) \(help)\n"
            }
            out += line
            out += "\n"
        }
        if out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }

    /// whep_refused_total{reason}: the refusal counters' growth since the last scrape.
    private func refreshRefusalMetrics() {
        let now = refused
        let before = reportedRefusals.withLock { r in
            defer { r = now }
            return r
        }
        for ((name, value), (_, old)) in zip(now.json, before.json) {
            if let v = value as? Int, let o = old as? Int, v > o {
                Counter(label: "whep_refused_total", dimensions: [("reason", name)]).increment(by: v - o)
            }
        }
    }

    /// Counts a refusal (the host counts its own: connection limits, timeouts).
    public func count(_ update: (inout RefusalCounters) -> Void) { refusals.withLock { update(&$0) } }
    /// The refusal counters so far (a snapshot; safe from any thread).
    public var refused: RefusalCounters { refusals.withLock { $0 } }
    /// Where /stats reads the open connections from (the host's count).
    public func countConnections(with source: @escaping @Sendable () -> Int) { connections.withLock { $0 = source } }

    /// The whole request: refused (Host, Origin, token), or routed: first to the app's `routes` (nil passes
    /// it on), then to the endpoint's own.
    /// Stills (`GET /snapshot.jpg` not in the cache window, `GET /stream.mjpeg`) need `reply(to:routes:)`: here
    /// they get 501 naming it.
    public func handle(_ request: WHEPRequest, routes: ((WHEPRequest) -> WHEPResponse?)? = nil) -> WHEPResponse {
        switch reply(to: request, routes: routes) {
        case .response(let r): return r
        case .snapshot(let pending):
            _ = pending.cancel(timedOut: false)
            return decorated(
                WHEPResponse(status: 501, headers: Self.plain, body: "this host serves snapshots only through WHEPEndpoint.reply(to:)\n"),
                for: request)
        case .stream(_, let client):
            client.close()
            return decorated(
                WHEPResponse(status: 501, headers: Self.plain, body: "this host serves MJPEG only through WHEPEndpoint.reply(to:)\n"), for: request)
        }
    }

    /// The whole request, as `handle(_:routes:)` answers it, with the stills too: a snapshot waits for its frame
    /// (`WHEPReply.snapshot`), an MJPEG request becomes a stream (`WHEPReply.stream`). `HTTPServer` calls this.
    public func reply(to request: WHEPRequest, routes: ((WHEPRequest) -> WHEPResponse?)? = nil) -> WHEPReply {
        if let refused = refusal(request) { return .response(decorated(refused, for: request)) }
        if let mine = routes?(request) { return .response(decorated(mine, for: request)) }
        guard request.method == "GET", request.path == "/snapshot.jpg" || request.path == "/stream.mjpeg", let stills else {
            return .response(decorated(route(request), for: request))
        }
        let query = Self.query(request.uri)
        let plain = Self.plain
        let answer: @Sendable (Result<[UInt8], JPEGFeed.StillRefusal>) -> WHEPResponse = { [self] result in
            switch result {
            case .success(let jpeg):
                return decorated(
                    WHEPResponse(status: 200, headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "no-store")], bytes: jpeg), for: request)
            case .failure(let r):
                return decorated(
                    WHEPResponse(
                        status: r.status, headers: plain + (r.retryAfter.map { [("Retry-After", String($0))] } ?? []), body: r.message + "\n"),
                    for: request)
            }
        }
        do throws(JPEGFeed.StillRefusal) {
            let size = try stills.requestedSize(query)
            if request.path == "/snapshot.jpg" {
                let pending = PendingSnapshot(feed: stills, answer: answer)
                let id = stills.snapshot(size: size) { pending.complete($0) }
                if let now = pending.immediate { return .response(now) }
                pending.started(id)
                return .snapshot(pending)
            }
            let fps = try stills.requestedFrameRate(query)
            let client = try stills.subscribe(size: size, frameRate: fps, address: request.client)
            let head = WHEPResponse(
                status: 200,
                headers: [("Content-Type", MJPEGClient.contentType), ("Cache-Control", "no-store"), ("Pragma", "no-cache")], body: "")
            return .stream(head: decorated(head, for: request), client: client)
        } catch {
            return .response(answer(.failure(error)))
        }
    }

    /// The query's name=value pairs (percent-decoded; at most 16 pairs of a query of at most 2048 bytes).
    static func query(_ uri: String) -> [(String, String)] {
        guard let q = uri.split(separator: "?", maxSplits: 1).dropFirst().first, q.utf8.count <= 2048 else { return [] }
        return q.split(separator: "&").prefix(16).map { pair in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(kv[0]).removingPercentEncoding ?? String(kv[0])
            let value = kv.count > 1 ? (String(kv[1]).removingPercentEncoding ?? String(kv[1])) : ""
            return (name, value)
        }
    }

    /// The refusal for a request from its head alone (Host, Origin, token), if any: a host sends it before reading
    /// the body.
    public func check(_ request: WHEPRequest) -> WHEPResponse? {
        refusal(request).map { decorated($0, for: request) }
    }

    /// A body over `maxBody`.
    public func tooLarge(_ request: WHEPRequest) -> WHEPResponse {
        decorated(WHEPResponse(status: 413, headers: [("Content-Type", "text/plain")], body: "the offer is larger than 64 KiB\n"), for: request)
    }

    private static let plain: [(name: String, value: String)] = [("Content-Type", "text/plain; charset=utf-8")]

    /// The origin a request comes from, when it is not the server's own (nil for same-origin and non-browser requests).
    private func foreignOrigin(_ request: WHEPRequest) -> String? {
        guard let origin = request.header("Origin") else { return nil }
        let own = (policy.tls ? "https://" : "http://") + (request.header("Host") ?? "")
        return origin.lowercased() == own.lowercased() ? nil : origin
    }

    private static func printable(_ s: String, _ n: Int) -> String { String(s.prefix(n).filter { $0.isASCII && !$0.isNewline }) }

    /// Host, origin and token checks, in that order; nil when the request may be routed.
    private func refusal(_ request: WHEPRequest) -> WHEPResponse? {
        let path = request.path
        // DNS rebinding: a name that resolves to us but is not ours is refused whatever the path.
        let host = request.header("Host").map(ServerPolicy.hostPart) ?? ""
        guard policy.hostNames.contains(host) else {
            count { $0.foreignHost += 1 }
            return WHEPResponse(
                status: 403, headers: Self.plain,
                body: "Host \"\(Self.printable(host, 80))\" is not one of this server's names; start it with --allow-host NAME to add one\n")
        }
        if let origin = foreignOrigin(request), !policy.allowedOrigins.contains(origin.lowercased()) {
            count { $0.foreignOrigin += 1 }
            return WHEPResponse(
                status: 403, headers: Self.plain,
                body:
                    "requests from the origin \"\(Self.printable(origin, 80))\" are not allowed; start the server with --allow-origin ORIGIN to allow one\n"
            )
        }
        let open = request.method == "OPTIONS" || (request.method == "GET" && (path == "/" || path == "/index.html" || path == "/mjpeg.html"))
        // An <img> cannot send Authorization: the stills also take the token as ?token= (constant-time compared).
        let stillsToken =
            (path == "/snapshot.jpg" || path == "/stream.mjpeg") && request.header("Authorization") == nil
            ? Self.query(request.uri).last { $0.0 == "token" }.map { "Bearer " + $0.1 } : nil
        if !open && !policy.authorizes(stillsToken ?? request.header("Authorization")) {
            count { $0.unauthorized += 1 }
            let given = stillsToken != nil || request.header("Authorization") != nil
            return WHEPResponse(
                status: 401,
                headers: Self.plain + [
                    ("WWW-Authenticate", "Bearer realm=\"\(policy.realm)\"" + (given ? ", error=\"invalid_token\"" : ""))
                ],
                body: given
                    ? "the bearer token is not this server's\n"
                    : "this server needs Authorization: Bearer TOKEN" + (policy.tokenHint.map { " (\($0))" } ?? "") + "\n")
        }
        return nil
    }

    /// One of the server's own pages: not cached, its scripts and styles inline only, never framed, no referrer.
    private static func page(_ body: String) -> WHEPResponse {
        WHEPResponse(
            status: 200,
            headers: [
                ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
                ("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
                ("Referrer-Policy", "no-referrer"),
            ], body: body)
    }

    private func route(_ request: WHEPRequest) -> WHEPResponse {
        let path = request.path, plain = Self.plain
        switch (request.method, path) {
        case ("GET", "/"), ("GET", "/index.html"):
            return Self.page(playerPage)
        case ("GET", "/mjpeg.html") where stills != nil:
            return Self.page(mjpegPage)
        case ("GET", "/stats"):
            // Addresses and resources only to the token's holder (with no token, to no one).
            let open = connections.withLock { $0 }()
            return WHEPResponse(
                status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                body: Self.adding(stills: stills, to: hub.statsJSON(detailed: policy.token != nil, refused: refused, connections: open)) + "\n")
        case ("GET", "/metrics"):
            guard let metrics else { return WHEPResponse(status: 404, headers: plain, body: "this server keeps no metrics\n") }
            hub.refreshMetrics()
            refreshRefusalMetrics()
            return WHEPResponse(
                status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store")],
                body: WHEPEndpoint.withHelp(metrics()))
        case ("OPTIONS", _):
            return WHEPResponse(
                status: 204,
                headers: [
                    ("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"), ("Access-Control-Allow-Headers", "Authorization, Content-Type"),
                    ("Access-Control-Max-Age", "600"),
                ], body: "")
        case ("POST", "/whep"):
            let type = request.header("Content-Type")?.lowercased() ?? ""
            guard type.hasPrefix("application/sdp") else {
                return WHEPResponse(
                    status: 415, headers: plain,
                    body: "POST /whep takes an SDP offer with Content-Type: application/sdp (got \"\(Self.printable(type, 60))\")\n")
            }
            do throws(ViewerHub.AddError) {
                let (id, answer) = try hub.add(offer: String(decoding: request.body, as: UTF8.self), from: request.client)
                // The ETag names the viewer's one ICE session (RFC 9725 §4.3.1: it would change with an ICE restart).
                return WHEPResponse(
                    status: 201, headers: [("Content-Type", "application/sdp"), ("Location", "/whep/\(id)"), ("ETag", "\"\(id)\"")],
                    body: answer)
            } catch {
                switch error {
                case .badOffer(let e):
                    count { $0.badOffer += 1 }
                    return WHEPResponse(status: e.code == .unsupportedCodec ? 406 : 400, headers: plain, body: e.message + "\n")
                case .full:
                    count { $0.viewerLimit += 1 }
                    return WHEPResponse(
                        status: 503, headers: plain + [("Retry-After", "10")],
                        body: "already \(hub.limits.maxViewers) viewers; try again when one leaves\n")
                case .tooManyPending:
                    count { $0.pendingLimit += 1 }
                    return WHEPResponse(
                        status: 503, headers: plain + [("Retry-After", "5")],
                        body: "\(hub.limits.maxPending) viewers are still connecting; try again in a few seconds\n")
                case .tooManyFromAddress(let n):
                    count { $0.perAddressViewerLimit += 1 }
                    return WHEPResponse(
                        status: 429, headers: plain + [("Retry-After", "5")],
                        body: "your address already has \(n) viewers (or viewers still connecting); end one first\n")
                case .stopped: return WHEPResponse(status: 503, headers: plain, body: "the server is stopping\n")
                case .waitingForStream:
                    return WHEPResponse(
                        status: 503, headers: plain + [("Retry-After", "1")],
                        body: "the camera's H.264 has not started yet (its profile decides the answer); try again in a second\n")
                case .failed(let m): return WHEPResponse(status: 500, headers: plain, body: m + "\n")
                }
            }
        case ("DELETE", _) where path.hasPrefix("/whep/"):
            let id = String(path.dropFirst("/whep/".count))
            return hub.remove(id)
                ? WHEPResponse(status: 200, headers: plain, body: "") : WHEPResponse(status: 404, headers: plain, body: "no such viewer\n")
        case ("GET", "/snapshot.jpg"), ("GET", "/stream.mjpeg"):
            return WHEPResponse(status: 404, headers: plain, body: "this server serves no stills (no JPEG feed)\n")
        case (_, "/whep"), (_, "/stats"), (_, "/metrics"), (_, "/"), (_, "/snapshot.jpg"), (_, "/stream.mjpeg"):
            return WHEPResponse(status: 405, headers: plain, body: "\(Self.printable(request.method, 20)) is not allowed on \(path)\n")
        default:
            return WHEPResponse(status: 404, headers: plain, body: "no such page: \(Self.printable(path, 100))\n")
        }
    }

    /// The stats JSON with the feed's `stills` member (unchanged without a feed).
    static func adding(stills: JPEGFeed?, to json: String) -> String {
        guard let stills, json.hasSuffix("}") else { return json }
        return String(json.dropLast()) + ", \"stills\": " + stills.statsJSON + "}"
    }

    /// CORS for origins named in the policy (same-origin requests need none), and nosniff.
    private func decorated(_ response: WHEPResponse, for request: WHEPRequest) -> WHEPResponse {
        var r = response
        if let origin = foreignOrigin(request), policy.allowedOrigins.contains(origin.lowercased()) {
            r.headers += [("Access-Control-Allow-Origin", origin), ("Access-Control-Expose-Headers", "Location, ETag"), ("Vary", "Origin")]
        }
        r.headers.append(("X-Content-Type-Options", "nosniff"))
        return r
    }
}
