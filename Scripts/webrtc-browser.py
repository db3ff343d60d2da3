#!/usr/bin/python3
"""Opens `camcap serve`'s page in headless Chromium and reads RTCPeerConnection.getStats().

    webrtc-browser.py URL [--frames N] [--timeout S] [--leave]

Waits for the first decoded frame, then for N more frames to be sent by the server (its /stats, the viewer of
this page), then for the browser to settle, and prints one JSON line: the getStats figures at the start and at
the end of the window, the server's figures for this viewer, and the frames sent in the window. With --hold FILE
it keeps the page open until FILE exists (two-viewer tests), then leaves with DELETE.
"""
import argparse, json, os, signal, ssl, sys, time, urllib.request

# A SIGTERM (cc-link.py ending a viewer) unwinds like an error: the finally below quits Chromium and chromedriver.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

# The test's own server may use a self-signed certificate (Chromium trusts it by its public key, below).
INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402  (the one Chromium set-up: Scripts/chromium.py)


TOKEN = None


def server_stats(base):
    req = urllib.request.Request(base + "stats")
    if TOKEN:
        req.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req, timeout=5, context=INSECURE) as r:
        return json.load(r)


def server_viewer(base, resource):
    for v in server_stats(base)["viewers"]:
        if resource and v.get("resource") == resource:
            return v
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--hold", default=None)
    ap.add_argument("--log", default=None)
    ap.add_argument("--navigate-away", action="store_true", help="leave by navigating away (pagehide) instead of calling DELETE")
    ap.add_argument("--expect-close", action="store_true", help="with --hold: wait for the DTLS transport to leave 'connected'")
    ap.add_argument("--picture", action="store_true", help="also report the shown picture: its size and the mean luma of its top, bottom, left and right fifths")
    ap.add_argument("--luma-region", default=None, help="W,H: also report the shown picture's luma in its top left W x H pixels, row by row (lumaRegion)")
    ap.add_argument("--series", default=None, help="append the page's getStats figures to this file as one JSON line a second while frames are counted")
    ap.add_argument("--spki", default=None, help="trust the server's self-signed certificate with this public-key hash (base64 SHA-256)")
    a = ap.parse_args()
    global TOKEN
    url, _, fragment = a.url.partition("#")
    if fragment.startswith("token="):
        TOKEN = fragment[len("token="):]
    base = url if url.endswith("/") else url + "/"

    d = chromium.start(extra=["--ignore-certificate-errors-spki-list=" + a.spki] if a.spki else [], log=a.log)
    out = {"ok": False}
    try:
        d.set_script_timeout(10)
        d.get(a.url)
        deadline = time.time() + a.timeout

        def stats():
            return d.execute_async_script("const done = arguments[arguments.length - 1]; window.camcapStats().then(done, e => done({error: String(e)}));")

        s = stats()
        while s.get("framesDecoded", 0) == 0:
            if s.get("error"):
                raise RuntimeError("page: " + str(s["error"]))
            if time.time() > deadline:
                raise RuntimeError("no frame decoded within %.0f s: %s" % (a.timeout, json.dumps(s)))
            time.sleep(0.05)
            s = stats()
        resource = d.execute_script("return window.camcap.resource")
        first_server = server_viewer(base, resource)
        first = s
        out["first"] = first
        out["firstServer"] = first_server
        # N more frames sent by the server to this viewer.
        target = first_server["framesSent"] + a.frames
        next_series = time.time()
        # With --series the freeze figures are read every 100 ms: a freeze's own length is the growth of the summed
        # freeze time when the count grew by one (getStats gives only the sum).
        next_poll, prev, longest = time.time(), None, 0.0
        while True:
            if a.series and time.time() >= next_poll:
                next_poll = time.time() + 0.1
                cur = stats()
                if prev is not None and cur.get("freezeCount", 0) > prev.get("freezeCount", 0):
                    longest = max(longest, cur.get("totalFreezesDuration", 0) - prev.get("totalFreezesDuration", 0))
                prev = cur
                if time.time() >= next_series:
                    next_series += 1
                    with open(a.series, "a") as f:
                        f.write(json.dumps(dict(cur, longestFreeze=longest)) + "\n")
            v = server_viewer(base, resource)
            if v is None:
                raise RuntimeError("the server lost this viewer")
            if v["framesSent"] >= target:
                break
            if time.time() > deadline + a.frames / 30:
                raise RuntimeError("the server sent only %d of %d frames" % (v["framesSent"] - first_server["framesSent"], a.frames))
            time.sleep(0.05)
        sent_end = v["framesSent"]
        # Let the browser decode what is in flight: until framesDecoded covers the window or stops growing.
        settle = time.time() + 3
        last = stats()
        while time.time() < settle:
            time.sleep(0.1)
            cur = stats()
            if cur["framesDecoded"] - first["framesDecoded"] >= sent_end - first_server["framesSent"]:
                last = cur
                break
            last = cur
        out["last"] = last
        # Glass-to-glass: each presented frame's RTP timestamp → its capture time (wall clock, from the server's
        # mapping) against the browser's receive time (last packet) and expected display time.
        frames = d.execute_script("return window.camcapFrames()")
        v = server_viewer(base, resource)
        if v and frames and v.get("firstCaptureNs", -1) > 0:
            offset, first_capture, wall = v["rtpTimestampOffset"], v["firstCaptureNs"], v["realtimeMinusMonotonicNs"]
            recv, shown = [], []
            for rtp, received, display, _ in frames:
                if rtp < 0:
                    continue
                capture_ms = (first_capture + wall + ((rtp - offset) % (1 << 32)) * 1_000_000_000 // 90_000) / 1e6
                if received > 0:
                    recv.append(received - capture_ms)
                shown.append(display - capture_ms)

            def pct(xs, p):
                xs = sorted(xs)
                return round(xs[min(len(xs) - 1, max(0, int(p * len(xs) + 0.5) - 1))], 1) if xs else None
            out["latency"] = {"frames": len(shown), "receiveP50Ms": pct(recv, 0.5), "receiveP95Ms": pct(recv, 0.95),
                              "displayP50Ms": pct(shown, 0.5), "displayP95Ms": pct(shown, 0.95)}
            # The same from the browser alone: requestVideoFrameCallback's captureTime, which Chromium takes from
            # the abs-capture-time extension (the server's wall clock; one machine here, so one clock).
            cap_recv = [r - c for _, r, _, c in frames if c > 0 and r > 0]
            cap_shown = [dsp - c for _, _, dsp, c in frames if c > 0]
            out["captureTime"] = {"frames": len(frames), "withCaptureTime": len(cap_shown),
                                  "receiveP50Ms": pct(cap_recv, 0.5), "receiveP95Ms": pct(cap_recv, 0.95), "receiveP99Ms": pct(cap_recv, 0.99),
                                  "displayP50Ms": pct(cap_shown, 0.5), "displayP95Ms": pct(cap_shown, 0.95), "displayP99Ms": pct(cap_shown, 0.99)}
            out["overlayLatency"] = d.execute_script("return window.camcapLatency ? window.camcapLatency() : null")
            out["synchronizationSources"] = d.execute_script(
                "const r = window.camcap.pc.getReceivers()[0]; return r ? r.getSynchronizationSources() : null")
        if a.picture:
            # What a person sees: the video element drawn into a canvas (Chromium applies the frame's rotation,
            # from the video-orientation extension, when it paints).
            out["picture"] = d.execute_script("""
                const v = document.querySelector('video');
                const w = v.videoWidth, h = v.videoHeight;
                const c = document.createElement('canvas'); c.width = w; c.height = h;
                const g = c.getContext('2d'); g.drawImage(v, 0, 0, w, h);
                const px = g.getImageData(0, 0, w, h).data;
                const mean = (x0, y0, x1, y1) => { let s = 0, n = 0;
                  for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) {
                    const i = 4 * (y * w + x); s += 0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2]; n++; }
                  return Math.round(s / Math.max(1, n)); };
                return {videoWidth: w, videoHeight: h, top: mean(0, 0, w, h / 5 | 0), bottom: mean(0, h - (h / 5 | 0), w, h),
                        left: mean(0, 0, w / 5 | 0, h), right: mean(w - (w / 5 | 0), 0, w, h)};""")
        if a.luma_region:
            rw, rh = (int(x) for x in a.luma_region.split(","))
            out["lumaRegion"] = d.execute_script("""
                const v = document.querySelector('video'), w = arguments[0], h = arguments[1];
                const c = document.createElement('canvas'); c.width = v.videoWidth; c.height = v.videoHeight;
                const g = c.getContext('2d'); g.drawImage(v, 0, 0);
                const px = g.getImageData(0, 0, w, h).data, out = [];
                for (let i = 0; i < w * h; i++) out.push(Math.round(0.299 * px[4 * i] + 0.587 * px[4 * i + 1] + 0.114 * px[4 * i + 2]));
                return {width: v.videoWidth, height: v.videoHeight, luma: out};""", rw, rh)
        out["lastServer"] = server_viewer(base, resource)
        out["framesSent"] = sent_end - first_server["framesSent"]
        out["framesDecoded"] = last["framesDecoded"] - first["framesDecoded"]
        out["resource"] = resource
        if a.hold:
            print(json.dumps(out), flush=True)
            while not os.path.exists(a.hold):
                time.sleep(0.05)
            out["afterHold"] = stats()
            if a.expect_close:
                # The server stopped while this page watched: it must have told the peer (BYE, close_notify).
                end = time.time() + 10
                while time.time() < end and out["afterHold"]["dtlsState"] == "connected":
                    time.sleep(0.05)
                    out["afterHold"] = stats()
        if a.navigate_away:
            d.get("about:blank")   # like closing the tab: the page's pagehide handler sends DELETE (keepalive)
        else:
            d.execute_async_script("const done = arguments[arguments.length - 1]; window.camcapStop().then(() => done(true), e => done(String(e)));")
        out["ok"] = True
    except Exception as e:
        out["error"] = str(e)
    finally:
        try:
            logs = d.get_log("browser")
            out["console"] = [l["message"] for l in logs][-10:]
        except Exception:
            pass
        d.quit()
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
