import Foundation
import NIOCore
import NIOPosix
import NIOHTTP1

/// The HTTP side of `serve` on SwiftNIO (NIOHTTP1): the page, WHEP (RFC 9725) and the stats.
///   GET /            the player page
///   POST /whep       SDP offer → 201 Created, Location: /whep/ID, the SDP answer
///   DELETE /whep/ID  ends that viewer (200; 404 for an unknown one)
///   GET /stats       the viewers, as JSON
final class HTTPServer: Sendable {
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    private init(port: Int, group: MultiThreadedEventLoopGroup, channel: any Channel) {
        self.port = port; self.group = group; self.channel = channel
    }

    static func start(host: String, port: Int, hub: ViewerHub) async throws -> HTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(WHEPHandler(hub: hub))
                }
            }
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            return HTTPServer(port: channel.localAddress?.port ?? port, group: group, channel: channel)
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

private final class WHEPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    static let maxBody = 64 * 1024

    private let hub: ViewerHub
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(hub: ViewerHub) { self.hub = hub }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h; body.removeAll(keepingCapacity: true); tooLarge = false
        case .body(var b):
            if body.count + b.readableBytes > WHEPHandler.maxBody { tooLarge = true; return }
            if let bytes = b.readBytes(length: b.readableBytes) { body += bytes }
        case .end:
            guard let head else { return }
            self.head = nil
            let (status, headers, text) = tooLarge
                ? (HTTPResponseStatus.payloadTooLarge, [("Content-Type", "text/plain")], "the offer is larger than 64 KiB\n")
                : route(head)
            respond(context, head, status, headers, text)
        }
    }

    private func route(_ head: HTTPRequestHead) -> (HTTPResponseStatus, [(String, String)], String) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let plain = [("Content-Type", "text/plain; charset=utf-8")]
        switch (head.method, path) {
        case (.GET, "/"), (.GET, "/index.html"):
            return (.ok, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")], playerPage)
        case (.GET, "/stats"):
            return (.ok, [("Content-Type", "application/json"), ("Cache-Control", "no-store")], hub.statsJSON() + "\n")
        case (.OPTIONS, _):
            return (.noContent, [("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"), ("Access-Control-Allow-Headers", "Content-Type")], "")
        case (.POST, "/whep"):
            let type = head.headers.first(name: "Content-Type")?.lowercased() ?? ""
            guard type.hasPrefix("application/sdp") else {
                return (.unsupportedMediaType, plain, "POST /whep takes an SDP offer with Content-Type: application/sdp (got \"\(type.prefix(60))\")\n")
            }
            do throws(ViewerHub.AddError) {
                let (id, answer) = try hub.add(offer: String(decoding: body, as: UTF8.self))
                return (.created, [("Content-Type", "application/sdp"), ("Location", "/whep/\(id)"),
                                   ("Access-Control-Expose-Headers", "Location")], answer)
            } catch {
                switch error {
                case .badOffer(let m): return (m.contains("H.264") ? .notAcceptable : .badRequest, plain, m + "\n")
                case .full: return (.serviceUnavailable, plain, "already \(ViewerHub.maxViewers) viewers; try again when one leaves\n")
                case .stopped: return (.serviceUnavailable, plain, "the server is stopping\n")
                case .failed(let m): return (.internalServerError, plain, m + "\n")
                }
            }
        case (.DELETE, _) where path.hasPrefix("/whep/"):
            let id = String(path.dropFirst("/whep/".count))
            return hub.remove(id) ? (.ok, plain, "") : (.notFound, plain, "no viewer \(id.prefix(40))\n")
        case (_, "/whep"), (_, "/stats"), (_, "/"):
            return (.methodNotAllowed, plain, "\(head.method) is not allowed on \(path)\n")
        default:
            return (.notFound, plain, "no such page: \(path.prefix(100))\n")
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
                         _ extra: [(String, String)], _ text: String) {
        var headers = HTTPHeaders(extra)
        headers.add(name: "Access-Control-Allow-Origin", value: "*")
        let bytes = Array(text.utf8)
        headers.add(name: "Content-Length", value: String(bytes.count))
        let keepAlive = request.isKeepAlive && !tooLarge
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { done.whenComplete { [context] _ in context.close(promise: nil) } }
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
window.camcap = { pc, error: null, state: 'new' };
pc.addTransceiver('video', { direction: 'recvonly' });
pc.ontrack = (e) => { video.srcObject = e.streams[0] || new MediaStream([e.track]); };
pc.onconnectionstatechange = () => { window.camcap.state = pc.connectionState; };
async function start() {
  try {
    await pc.setLocalDescription(await pc.createOffer());
    const r = await fetch('/whep', { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
    const text = await r.text();
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
  if (resource) { await fetch(resource, { method: 'DELETE' }); resource = null; }
  pc.close();
};
window.addEventListener('pagehide', () => { if (resource) fetch(resource, { method: 'DELETE', keepalive: true }); });
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
