#!/usr/bin/python3
"""A page of another origin attacks `camcap serve` from headless Chromium, as any web page open in the user's
browser could (the server listens on loopback, which the browser reaches).

    webrtc-attack.py SERVER_BASE_URL [--resource /whep/ID]

Serves an attacking page from its own HTTP server on 127.0.0.1 (another port: another origin) and runs it. The
page tries to read GET /stats, to DELETE a viewer (the real resource path when given: the worst case), to get a
viewer of its own through WHEP (an offer from its own RTCPeerConnection) and to read a pixel of the video into
a canvas. Prints one JSON line with what each attempt got.
"""
import argparse, http.server, json, os, sys, threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402  (the one Chromium set-up: Scripts/chromium.py)

PAGE = """<!doctype html><html><body><video id=v autoplay muted playsinline></video><script>
const target = %(target)s, resource = %(resource)s;
window.result = null;
async function attempt(f) { try { return await f(); } catch (e) { return 'error: ' + e; } }
(async () => {
  const r = {};
  r.stats = await attempt(async () => { const x = await fetch(target + 'stats'); return 'status ' + x.status + ': ' + (await x.text()).slice(0, 80); });
  r.statsNoCors = await attempt(async () => { const x = await fetch(target + 'stats', { mode: 'no-cors' }); return 'opaque ' + x.type; });
  if (resource) r.delete = await attempt(async () => { const x = await fetch(target + resource.slice(1), { method: 'DELETE' }); return 'status ' + x.status; });
  if (resource) r.deleteNoCors = await attempt(async () => { await fetch(target + resource.slice(1), { method: 'DELETE', mode: 'no-cors' }); return 'sent'; });
  const pc = new RTCPeerConnection();
  pc.addTransceiver('video', { direction: 'recvonly' });
  await pc.setLocalDescription(await pc.createOffer());
  r.whep = await attempt(async () => {
    const x = await fetch(target + 'whep', { method: 'POST', headers: { 'Content-Type': 'application/sdp' }, body: pc.localDescription.sdp });
    const text = await x.text();
    if (x.status === 201) { await pc.setRemoteDescription({ type: 'answer', sdp: text }); return 'ANSWERED'; }
    return 'status ' + x.status;
  });
  // A simple request the browser sends without a preflight (the response stays unreadable either way).
  r.whepNoCors = await attempt(async () => { await fetch(target + 'whep', { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: pc.localDescription.sdp }); return 'sent'; });
  pc.ontrack = (e) => { document.getElementById('v').srcObject = e.streams[0] || new MediaStream([e.track]); };
  await new Promise((ok) => setTimeout(ok, 1500));
  r.pixel = await attempt(async () => {
    const v = document.getElementById('v');
    if (!v.videoWidth) return 'no video';
    const c = document.createElement('canvas'); c.width = v.videoWidth; c.height = v.videoHeight;
    const g = c.getContext('2d'); g.drawImage(v, 0, 0);
    return 'PIXEL ' + Array.from(g.getImageData(0, 0, 1, 1).data).join(',');
  });
  window.result = r;
})();
</script></body></html>"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("--resource", default=None)
    a = ap.parse_args()
    target = a.target if a.target.endswith("/") else a.target + "/"
    page = (PAGE % {"target": json.dumps(target), "resource": json.dumps(a.resource)}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = "http://127.0.0.1:%d/" % server.server_address[1]

    d = chromium.start()
    out = {"origin": origin}
    try:
        d.get(origin)
        for _ in range(300):
            r = d.execute_script("return window.result")
            if r is not None:
                out["result"] = r
                break
            d.implicitly_wait(0)
            import time
            time.sleep(0.05)
        out["ok"] = "result" in out
    except Exception as e:
        out["ok"] = False
        out["error"] = str(e)
    finally:
        d.quit()
        server.shutdown()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
