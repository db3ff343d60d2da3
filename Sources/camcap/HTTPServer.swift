import Foundation
import NIOCore
import NIOPosix
import NIOHTTP1
import NIOSSL
import Synchronization
import VideoCapture

/// Who may use the server and how much of it: the bearer token (RFC 9725 §4.1; nil with --no-auth), the
/// origins allowed cross-origin access, the names the server answers to (Host, against DNS rebinding), and limits.
struct ServerPolicy: Sendable {
    var token: String?
    var allowedOrigins: Set<String> = []
    /// Lower-case host names and addresses a request's Host may name (without the port).
    var hostNames: Set<String> = []
    var tls = false
    /// A complete request (head and body) within this long of the connection opening or of the previous
    /// response, else the connection is closed (slowloris; idle keep-alive connections).
    var requestTimeoutNs: Int64 = 10_000_000_000
    var maxConnections = 256
    var maxConnectionsPerAddress = 32

    /// Constant-time comparison of `Authorization: Bearer …` with the token.
    func authorizes(_ header: String?) -> Bool {
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
    static func hostPart(_ host: String) -> String {
        var h = Substring(host.lowercased())
        if h.hasPrefix("["), let close = h.firstIndex(of: "]") { return String(h[h.index(after: h.startIndex)..<close]) }
        if let colon = h.lastIndex(of: ":"), h.firstIndex(of: ":") == colon { h = h[..<colon] }
        return String(h)
    }
}

/// What the server refused, by reason (GET /stats shows them; each abuse test reads its own).
struct RefusalCounters: Sendable {
    var unauthorized = 0, foreignOrigin = 0, foreignHost = 0, connectionLimit = 0, perAddressConnectionLimit = 0, evicted = 0
    var timeouts = 0, viewerLimit = 0, pendingLimit = 0, perAddressViewerLimit = 0, badOffer = 0
    var json: [(String, Any)] {
        [("unauthorized", unauthorized), ("foreignOrigin", foreignOrigin), ("foreignHost", foreignHost), ("connectionLimit", connectionLimit),
         ("perAddressConnectionLimit", perAddressConnectionLimit), ("evicted", evicted), ("timeouts", timeouts), ("viewerLimit", viewerLimit),
         ("pendingLimit", pendingLimit), ("perAddressViewerLimit", perAddressViewerLimit), ("badOffer", badOffer)]
    }
}

/// Open connections, overall and per client address, and the refusal counters. When every connection is
/// taken, a new one evicts the one that has waited longest without a request in progress (an idle or slowloris
/// connection), so that connections held open by others cannot lock real clients out.
final class ConnectionTracker: Sendable {
    private struct State {
        var open = 0
        var perAddress: [String: Int] = [:]
        /// Connections with no request in progress, and since when (monotonic ns).
        var waiting: [ObjectIdentifier: (channel: any Channel, sinceNs: Int64)] = [:]
        var refused = RefusalCounters()
    }
    private let state = Mutex(State())
    let policy: ServerPolicy
    init(policy: ServerPolicy) { self.policy = policy }

    enum Admission { case admitted, tooMany, tooManyFromAddress }
    func admit(_ channel: any Channel, from address: String) -> Admission {
        let (admission, evict) = state.withLock { s -> (Admission, (any Channel)?) in
            if s.perAddress[address, default: 0] >= policy.maxConnectionsPerAddress { s.refused.perAddressConnectionLimit += 1; return (.tooManyFromAddress, nil) }
            var victim: (any Channel)?
            if s.open >= policy.maxConnections {
                guard let oldest = s.waiting.min(by: { $0.value.sinceNs < $1.value.sinceNs }) else { s.refused.connectionLimit += 1; return (.tooMany, nil) }
                s.waiting.removeValue(forKey: oldest.key)
                s.refused.evicted += 1
                victim = oldest.value.channel
            }
            s.open += 1; s.perAddress[address, default: 0] += 1
            s.waiting[ObjectIdentifier(channel)] = (channel, monotonicNanoseconds())
            return (.admitted, victim)
        }
        evict?.close(promise: nil)
        return admission
    }
    func release(_ channel: any Channel, from address: String) {
        state.withLock { s in
            s.open -= 1
            let n = s.perAddress[address, default: 1] - 1
            s.perAddress[address] = n > 0 ? n : nil
            s.waiting.removeValue(forKey: ObjectIdentifier(channel))
        }
    }
    /// A request has begun on `channel` (it is not evicted until it is answered).
    func busy(_ channel: any Channel) { _ = state.withLock { $0.waiting.removeValue(forKey: ObjectIdentifier(channel)) } }
    /// `channel` waits for its next request.
    func waiting(_ channel: any Channel) { state.withLock { $0.waiting[ObjectIdentifier(channel)] = (channel, monotonicNanoseconds()) } }
    func count(_ update: (inout RefusalCounters) -> Void) { state.withLock { update(&$0.refused) } }
    var refused: RefusalCounters { state.withLock { $0.refused } }
    var openConnections: Int { state.withLock { $0.open } }
}

/// The HTTP side of `serve` on SwiftNIO (NIOHTTP1, optionally TLS through NIOSSL): the page, WHEP (RFC 9725)
/// and the stats, behind the policy (token, origins, hosts, limits).
///   GET /            the player page (public: it holds no secret; it reads the token from the URL's fragment)
///   POST /whep       SDP offer → 201 Created, Location: /whep/ID (unguessable), the SDP answer
///   DELETE /whep/ID  ends that viewer (200; 404 for an unknown one)
///   GET /stats       the viewers and the refusal counters, as JSON
final class HTTPServer: Sendable {
    let port: Int
    let tracker: ConnectionTracker
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    private init(port: Int, tracker: ConnectionTracker, group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.port = port; self.tracker = tracker; self.group = group; self.channel = channel
    }

    static func start(host: String, port: Int, hub: ViewerHub, policy: ServerPolicy, tls: NIOSSLContext?) async throws -> HTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let tracker = ConnectionTracker(policy: policy)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 128)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let address = channel.remoteAddress?.ipAddress ?? "?"
                    let admission = tracker.admit(channel, from: address)
                    guard case .admitted = admission else {
                        // Over a limit: a plain-HTTP client is told why; then the connection is closed.
                        try channel.pipeline.syncOperations.addHandler(RefuseHandler(tls: tls != nil, tooMany: admission == .tooMany))
                        return
                    }
                    channel.closeFuture.whenComplete { _ in tracker.release(channel, from: address) }
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(WHEPHandler(hub: hub, tracker: tracker, address: address))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return HTTPServer(port: channel.localAddress?.port ?? port, tracker: tracker, group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            if let e = error as? IOError, e.errnoCode == EADDRINUSE {
                throw CLIError("cannot listen on \(host):\(port): the port is in use (another camcap serve?); pick another with --listen \(host):PORT, or port 0 for any free one")
            }
            if let e = error as? IOError, e.errnoCode == EADDRNOTAVAIL {
                throw CLIError("cannot listen on \(host):\(port): no interface has that address")
            }
            throw CLIError("cannot listen on \(host):\(port): \(error)")
        }
    }

    func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}

/// A connection over a limit: 503 (all connections) or 429 (this address's), then closed.
private final class RefuseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let tls: Bool, tooMany: Bool
    init(tls: Bool, tooMany: Bool) { self.tls = tls; self.tooMany = tooMany }
    func channelActive(context: ChannelHandlerContext) {
        guard !tls else { context.close(promise: nil); return }
        let text = tooMany ? "the server has too many connections; try again later\n" : "too many connections from your address\n"
        let head = tooMany ? "503 Service Unavailable" : "429 Too Many Requests"
        var b = context.channel.allocator.buffer(capacity: 200)
        b.writeString("HTTP/1.1 \(head)\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\nRetry-After: 5\r\nConnection: close\r\n\r\n\(text)")
        context.writeAndFlush(NIOAny(b)).whenComplete { _ in context.close(promise: nil) }
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

private final class WHEPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    static let maxBody = 64 * 1024

    private let hub: ViewerHub
    private let tracker: ConnectionTracker
    private let address: String
    private var policy: ServerPolicy { tracker.policy }
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var deadline: Scheduled<Void>?

    init(hub: ViewerHub, tracker: ConnectionTracker, address: String) { self.hub = hub; self.tracker = tracker; self.address = address }

    /// A complete request within the request timeout, from now.
    private func arm(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        let tracker = self.tracker
        deadline = context.eventLoop.scheduleTask(in: .nanoseconds(policy.requestTimeoutNs)) { [context] in
            tracker.count { $0.timeouts += 1 }
            context.close(promise: nil)
        }
    }
    func handlerAdded(context: ChannelHandlerContext) { arm(context) }
    func handlerRemoved(context: ChannelHandlerContext) { deadline?.cancel(); deadline = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h; body.removeAll(keepingCapacity: true); tooLarge = false
            tracker.busy(context.channel)
            // RFC 9110 §10.1.1: a client waiting for 100 Continue gets it (or the final answer, when that is a refusal).
            if h.headers.first(name: "Expect")?.lowercased() == "100-continue" {
                if let refusal = refusal(h) {
                    self.head = nil
                    respond(context, h, refusal.0, refusal.1, refusal.2, close: true)
                    return
                }
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: h.version, status: .continue))), promise: nil)
            }
        case .body(var b):
            guard head != nil else { return }
            if body.count + b.readableBytes > WHEPHandler.maxBody { tooLarge = true; return }
            if let bytes = b.readBytes(length: b.readableBytes) { body += bytes }
        case .end:
            guard let head else { return }
            self.head = nil
            deadline?.cancel(); deadline = nil
            let (status, headers, text) = tooLarge
                ? (HTTPResponseStatus.payloadTooLarge, [("Content-Type", "text/plain")], "the offer is larger than 64 KiB\n")
                : (refusal(head) ?? route(head))
            respond(context, head, status, headers, text, close: tooLarge)
        }
    }

    private typealias Response = (HTTPResponseStatus, [(String, String)], String)
    private static let plain = [("Content-Type", "text/plain; charset=utf-8")]

    /// The origin a request comes from, when it is not the server's own (nil for same-origin and non-browser requests).
    private func foreignOrigin(_ head: HTTPRequestHead) -> String? {
        guard let origin = head.headers.first(name: "Origin") else { return nil }
        let own = (policy.tls ? "https://" : "http://") + (head.headers.first(name: "Host") ?? "")
        return origin.lowercased() == own.lowercased() ? nil : origin
    }

    /// Host, origin and token checks, in that order; nil when the request may be routed.
    private func refusal(_ head: HTTPRequestHead) -> Response? {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        // DNS rebinding: a name that resolves to us but is not ours is refused whatever the path.
        let host = head.headers.first(name: "Host").map(ServerPolicy.hostPart) ?? ""
        guard policy.hostNames.contains(host) else {
            tracker.count { $0.foreignHost += 1 }
            return (.forbidden, Self.plain, "Host \"\(host.prefix(80).filter { $0.isASCII && !$0.isNewline })\" is not one of this server's names; start it with --allow-host NAME to add one\n")
        }
        if let origin = foreignOrigin(head), !policy.allowedOrigins.contains(origin.lowercased()) {
            tracker.count { $0.foreignOrigin += 1 }
            return (.forbidden, Self.plain, "requests from the origin \"\(origin.prefix(80).filter { $0.isASCII && !$0.isNewline })\" are not allowed; start the server with --allow-origin ORIGIN to allow one\n")
        }
        let open = head.method == .OPTIONS || (head.method == .GET && (path == "/" || path == "/index.html"))
        if !open && !policy.authorizes(head.headers.first(name: "Authorization")) {
            tracker.count { $0.unauthorized += 1 }
            let given = head.headers.first(name: "Authorization") != nil
            return (.unauthorized, Self.plain + [("WWW-Authenticate", given ? "Bearer realm=\"camcap\", error=\"invalid_token\"" : "Bearer realm=\"camcap\"")],
                    given ? "the bearer token is not this server's\n" : "this server needs Authorization: Bearer TOKEN (the token is in the URL camcap serve printed)\n")
        }
        return nil
    }

    private func route(_ head: HTTPRequestHead) -> Response {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let plain = Self.plain
        switch (head.method, path) {
        case (.GET, "/"), (.GET, "/index.html"):
            return (.ok, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
                          ("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
                          ("Referrer-Policy", "no-referrer")], playerPage)
        case (.GET, "/stats"):
            // Addresses and resources only to the token's holder (with --no-auth, to no one).
            return (.ok, [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                    hub.statsJSON(detailed: policy.token != nil, refused: tracker.refused, connections: tracker.openConnections) + "\n")
        case (.OPTIONS, _):
            return (.noContent, [("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"), ("Access-Control-Allow-Headers", "Authorization, Content-Type"),
                                 ("Access-Control-Max-Age", "600")], "")
        case (.POST, "/whep"):
            let type = head.headers.first(name: "Content-Type")?.lowercased() ?? ""
            guard type.hasPrefix("application/sdp") else {
                return (.unsupportedMediaType, plain, "POST /whep takes an SDP offer with Content-Type: application/sdp (got \"\(type.prefix(60))\")\n")
            }
            do throws(ViewerHub.AddError) {
                let (id, answer) = try hub.add(offer: String(decoding: body, as: UTF8.self), from: address)
                return (.created, [("Content-Type", "application/sdp"), ("Location", "/whep/\(id)")], answer)
            } catch {
                switch error {
                case .badOffer(let e):
                    tracker.count { $0.badOffer += 1 }
                    return (e.code == .unsupportedCodec ? .notAcceptable : .badRequest, plain, e.message + "\n")
                case .full:
                    tracker.count { $0.viewerLimit += 1 }
                    return (.serviceUnavailable, plain + [("Retry-After", "10")], "already \(hub.limits.maxViewers) viewers; try again when one leaves\n")
                case .tooManyPending:
                    tracker.count { $0.pendingLimit += 1 }
                    return (.serviceUnavailable, plain + [("Retry-After", "5")], "\(hub.limits.maxPending) viewers are still connecting; try again in a few seconds\n")
                case .tooManyFromAddress(let n):
                    tracker.count { $0.perAddressViewerLimit += 1 }
                    return (.tooManyRequests, plain + [("Retry-After", "5")], "your address already has \(n) viewers (or viewers still connecting); end one first\n")
                case .stopped: return (.serviceUnavailable, plain, "the server is stopping\n")
                case .failed(let m): return (.internalServerError, plain, m + "\n")
                }
            }
        case (.DELETE, _) where path.hasPrefix("/whep/"):
            let id = String(path.dropFirst("/whep/".count))
            return hub.remove(id) ? (.ok, plain, "") : (.notFound, plain, "no such viewer\n")
        case (_, "/whep"), (_, "/stats"), (_, "/"):
            return (.methodNotAllowed, plain, "\(head.method) is not allowed on \(path)\n")
        default:
            return (.notFound, plain, "no such page: \(path.prefix(100).filter { $0.isASCII && !$0.isNewline })\n")
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
                         _ extra: [(String, String)], _ text: String, close: Bool) {
        var headers = HTTPHeaders(extra)
        // CORS only for origins named with --allow-origin (same-origin requests need none).
        if let origin = foreignOrigin(request), policy.allowedOrigins.contains(origin.lowercased()) {
            headers.add(name: "Access-Control-Allow-Origin", value: origin)
            headers.add(name: "Access-Control-Expose-Headers", value: "Location")
            headers.add(name: "Vary", value: "Origin")
        }
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        let bytes = Array(text.utf8)
        headers.add(name: "Content-Length", value: String(bytes.count))
        let keepAlive = request.isKeepAlive && !close
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if keepAlive { arm(context); tracker.waiting(context.channel) } else { done.whenComplete { [context] _ in context.close(promise: nil) } }
    }
}

/// The player: WHEP from the page itself (recvonly video transceiver, POST the offer, DELETE on leaving), and
/// an overlay with getStats figures. `window.camcapStats()` returns them for tests.
let playerPage = """
<!doctype html>
<html><head><meta charset="utf-8"><title>camcap</title>
<style>
body { margin: 0; background: #111; color: #eee; font: 14px system-ui, sans-serif; overflow: hidden; }
video { width: 100vw; height: 100vh; object-fit: contain; background: #000; }
#overlay { position: fixed; top: 8px; left: 8px; background: rgba(0,0,0,.6); padding: 6px 10px; border-radius: 4px; white-space: pre; font-family: monospace; }
</style></head>
<body>
<video id="video" autoplay muted playsinline></video>
<div id="overlay">connecting…</div>
<script>
const overlay = document.getElementById('overlay');
const video = document.getElementById('video');
const pc = new RTCPeerConnection();
let resource = null, last = null;
// The token comes in the URL's fragment (#token=…), which the browser never sends to a server; it is kept for
// this tab only, and sent as Authorization: Bearer (RFC 9725).
const token = new URLSearchParams(location.hash.slice(1)).get('token') || sessionStorage.getItem('camcap-token');
if (token) sessionStorage.setItem('camcap-token', token);
const auth = token ? { 'Authorization': 'Bearer ' + token } : {};
window.camcap = { pc, error: null, state: 'new' };
pc.addTransceiver('video', { direction: 'recvonly' });
pc.ontrack = (e) => { video.srcObject = e.streams[0] || new MediaStream([e.track]); };
pc.onconnectionstatechange = () => { window.camcap.state = pc.connectionState; };
async function start() {
  try {
    await pc.setLocalDescription(await pc.createOffer());
    const r = await fetch('/whep', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
    const text = await r.text();
    if (r.status === 401) throw new Error('this server needs its token: open the URL that camcap serve printed (with #token=…)');
    if (r.status !== 201) throw new Error('WHEP ' + r.status + ': ' + text);
    resource = r.headers.get('Location');
    window.camcap.resource = resource;
    await pc.setRemoteDescription({ type: 'answer', sdp: text });
  } catch (e) {
    window.camcap.error = String(e);
    overlay.textContent = String(e);
  }
}
window.camcapStop = async () => {
  if (resource) { await fetch(resource, { method: 'DELETE', headers: auth }); resource = null; }
  pc.close();
};
window.addEventListener('pagehide', () => { if (resource) fetch(resource, { method: 'DELETE', headers: auth, keepalive: true }); });
window.camcapStats = async () => {
  const report = await pc.getStats();
  let inbound = null, pair = null, transport = null;
  report.forEach((s) => {
    if (s.type === 'inbound-rtp' && s.kind === 'video') inbound = s;
    if (s.type === 'transport') transport = s;
  });
  if (transport && transport.selectedCandidatePairId) pair = report.get(transport.selectedCandidatePairId);
  const i = inbound || {};
  return {
    state: pc.connectionState, error: window.camcap.error,
    framesDecoded: i.framesDecoded || 0, framesReceived: i.framesReceived || 0, framesDropped: i.framesDropped || 0,
    keyFramesDecoded: i.keyFramesDecoded || 0,
    frameWidth: i.frameWidth || 0, frameHeight: i.frameHeight || 0, framesPerSecond: i.framesPerSecond || 0,
    freezeCount: i.freezeCount || 0, totalFreezesDuration: i.totalFreezesDuration || 0,
    nackCount: i.nackCount || 0, pliCount: i.pliCount || 0, firCount: i.firCount || 0,
    retransmittedPacketsReceived: i.retransmittedPacketsReceived || 0,
    packetsReceived: i.packetsReceived || 0, packetsLost: i.packetsLost || 0, bytesReceived: i.bytesReceived || 0,
    jitterBufferDelay: i.jitterBufferDelay || 0, jitterBufferEmittedCount: i.jitterBufferEmittedCount || 0,
    totalDecodeTime: i.totalDecodeTime || 0, decoderImplementation: i.decoderImplementation || '',
    rtt: pair ? (pair.currentRoundTripTime ?? null) : null,
    videoWidth: video.videoWidth, videoHeight: video.videoHeight,
    srtpCipher: transport ? transport.srtpCipher : null, dtlsState: transport ? transport.dtlsState : null,
    now: Date.now(),
  };
};
// Per-frame timing (requestVideoFrameCallback): RTP timestamp, when its last packet arrived and when it is
// expected on screen, in wall-clock ms; camcap's /stats maps RTP timestamps back to capture times.
const frameLog = [];
function onFrame(now, m) {
  if (frameLog.length < 100000) frameLog.push([m.rtpTimestamp ?? -1, m.receiveTime !== undefined ? performance.timeOrigin + m.receiveTime : -1,
                                               performance.timeOrigin + m.expectedDisplayTime]);
  video.requestVideoFrameCallback(onFrame);
}
if ('requestVideoFrameCallback' in HTMLVideoElement.prototype) video.requestVideoFrameCallback(onFrame);
window.camcapFrames = () => frameLog.splice(0);
setInterval(async () => {
  if (window.camcap.error) return;
  const s = await window.camcapStats();
  if (s.dtlsState === 'closed' || s.state === 'failed') {
    overlay.textContent = s.dtlsState === 'closed' ? 'the server ended the stream' : 'connection failed';
    return;
  }
  let kbps = 0;
  if (last) kbps = (s.bytesReceived - last.bytesReceived) * 8 / (s.now - last.now);
  last = s;
  overlay.textContent = `${s.frameWidth}x${s.frameHeight}  ${s.framesPerSecond} fps  ${kbps.toFixed(0)} kbps` +
    `  rtt ${s.rtt === null ? '-' : (s.rtt * 1000).toFixed(1) + ' ms'}\\n${s.state}  decoded ${s.framesDecoded}` +
    `  freezes ${s.freezeCount}  nack ${s.nackCount}  pli ${s.pliCount}`;
}, 1000);
start();
</script>
</body></html>
"""
