#!/usr/bin/python3
"""Publishes Chromium's fake camera to a WHIP endpoint (RFC 9725) from headless Chromium, for N seconds.

    whip-publish-browser.py WHIP_URL [--token T] [--seconds N] [--width 640 --height 480 --fps 30]
                            [--ready FILE] [--no-delete] [--timeout S]

A local page does getUserMedia({video}), a send-only transceiver with H.264 (Constrained Baseline 42e01f,
packetization-mode=1) first in setCodecPreferences, createOffer, waits for ICE gathering to complete (no trickle:
simple-whip-server accepts PATCH but does not pass the candidates on to Janus), POSTs the SDP (Content-Type
application/sdp, Authorization: Bearer T; only its loopback candidates unless --all-candidates), sets the 201's answer, publishes N seconds from the moment the ICE/DTLS
connection is up, then DELETEs the Location resource. With --ready FILE, FILE is written (the stats, as JSON) once
the connection is up and frames are being sent. Prints one JSON line: the negotiated codec and fmtp, the outbound-rtp
figures at the end (framesEncoded, framesSent, frameWidth/Height, packetsSent, nackCount, pliCount, firCount,
encoderImplementation), the POST's and DELETE's HTTP status, and the resource URL. Exit status 0 when all of that
went through.
"""
import argparse, json, os, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402  (the one Chromium set-up: Scripts/chromium.py)

PAGE = r"""<!doctype html><html><head><meta charset="utf-8"><title>WHIP publisher</title></head><body>
<video id="v" autoplay muted playsinline width="320"></video>
<script>
window.pub = {state: "idle", error: null, log: []};
function log(m) { window.pub.log.push((performance.now() / 1000).toFixed(3) + " " + m); }

// Keeps only the loopback candidates (127.0.0.0/8, ::1) of an SDP: the server is on loopback.
function loopbackOnly(sdp) {
  return sdp.split("\r\n").filter(l => {
    if (!l.startsWith("a=candidate:")) return true;
    const addr = l.split(" ")[4];
    return addr.startsWith("127.") || addr === "::1";
  }).join("\r\n");
}

window.pubStart = async function (url, token, width, height, fps, allCandidates) {
  const p = window.pub;
  try {
    const stream = await navigator.mediaDevices.getUserMedia(
      {video: {width: {ideal: width}, height: {ideal: height}, frameRate: {ideal: fps}}, audio: false});
    document.getElementById("v").srcObject = stream;
    const track = stream.getVideoTracks()[0];
    p.trackSettings = track.getSettings();
    const pc = new RTCPeerConnection({iceServers: [], bundlePolicy: "max-bundle"});
    p.pc = pc;
    pc.oniceconnectionstatechange = () => log("ice " + pc.iceConnectionState);
    pc.onconnectionstatechange = () => log("pc " + pc.connectionState);
    const tr = pc.addTransceiver(track, {direction: "sendonly", streams: [stream]});
    const caps = RTCRtpSender.getCapabilities("video").codecs;
    const isH264 = c => c.mimeType.toLowerCase() === "video/h264";
    const best = caps.filter(c => isH264(c) && /profile-level-id=42e01f/i.test(c.sdpFmtpLine || "") &&
                                  /packetization-mode=1/.test(c.sdpFmtpLine || ""));
    if (best.length === 0) throw new Error("this Chromium offers no H.264 42e01f packetization-mode=1: " +
                                           JSON.stringify(caps.filter(isH264)));
    const otherH264 = caps.filter(c => isH264(c) && !best.includes(c));
    const rest = caps.filter(c => !isH264(c));
    tr.setCodecPreferences([...best, ...otherH264, ...rest]);
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    // Non-trickle: wait for every candidate to be in the SDP.
    await new Promise((resolve, reject) => {
      if (pc.iceGatheringState === "complete") return resolve();
      const t = setTimeout(() => reject(new Error("ICE gathering did not complete in 10 s")), 10000);
      pc.addEventListener("icegatheringstatechange", () => {
        if (pc.iceGatheringState === "complete") { clearTimeout(t); resolve(); }
      });
    });
    p.offer = allCandidates ? pc.localDescription.sdp : loopbackOnly(pc.localDescription.sdp);
    p.state = "posting";
    const headers = {"Content-Type": "application/sdp"};
    if (token) headers["Authorization"] = "Bearer " + token;
    const r = await fetch(url, {method: "POST", headers, body: p.offer});
    p.postStatus = r.status;
    const body = await r.text();
    if (r.status !== 201) throw new Error("POST " + url + " answered " + r.status + ": " + body);
    const loc = r.headers.get("Location");
    if (!loc) throw new Error("201 without a Location header (is it exposed to CORS?)");
    p.resource = new URL(loc, url).href;
    p.etag = r.headers.get("ETag");
    p.answer = body;
    await pc.setRemoteDescription({type: "answer", sdp: body});
    p.state = "answered";
    log("answered, resource " + p.resource);
  } catch (e) {
    p.state = "failed"; p.error = String(e && e.stack || e);
  }
};

window.pubStats = async function () {
  const p = window.pub, out = {state: p.state, error: p.error};
  if (!p.pc) return out;
  out.connectionState = p.pc.connectionState;
  out.iceConnectionState = p.pc.iceConnectionState;
  const s = await p.pc.getStats();
  const codecs = {};
  s.forEach(r => { if (r.type === "codec") codecs[r.id] = r; });
  s.forEach(r => {
    if (r.type === "outbound-rtp" && r.kind === "video") {
      for (const k of ["framesEncoded", "framesSent", "frameWidth", "frameHeight", "framesPerSecond", "packetsSent",
                       "bytesSent", "nackCount", "pliCount", "firCount", "keyFramesEncoded", "encoderImplementation",
                       "qualityLimitationReason", "retransmittedPacketsSent"])
        out[k] = r[k];
      const c = codecs[r.codecId];
      if (c) { out.codec = c.mimeType; out.fmtp = c.sdpFmtpLine; out.payloadType = c.payloadType; }
    }
    if (r.type === "candidate-pair" && r.state === "succeeded" && r.nominated) {
      out.rttMs = r.currentRoundTripTime !== undefined ? Math.round(r.currentRoundTripTime * 1000) : undefined;
      const l = s.get(r.localCandidateId), rm = s.get(r.remoteCandidateId);
      if (l && rm) out.pair = (l.address || l.ip) + ":" + l.port + " -> " + (rm.address || rm.ip) + ":" + rm.port;
    }
  });
  return out;
};

window.pubStop = async function (token, doDelete) {
  const p = window.pub, out = {};
  if (doDelete && p.resource) {
    const headers = {};
    if (token) headers["Authorization"] = "Bearer " + token;
    const r = await fetch(p.resource, {method: "DELETE", headers});
    out.deleteStatus = r.status;
  }
  if (p.pc) p.pc.close();
  p.state = "closed";
  return out;
};
</script></body></html>
"""


def start_chromium(log=None, fps=30):
    return chromium.start(extra=["--use-fake-device-for-media-stream=fps=%d" % fps, "--use-fake-ui-for-media-stream"], log=log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--token", default=None)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=20, help="for the POST, the answer and the connection")
    ap.add_argument("--ready", default=None, help="write this file once connected and sending frames")
    ap.add_argument("--no-delete", action="store_true", help="close the PeerConnection without DELETE")
    ap.add_argument("--log", default=None, help="chromedriver log file")
    ap.add_argument("--all-candidates", action="store_true",
                    help="offer every candidate Chromium gathers, not only the loopback ones")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="whip-pub-")
    page = os.path.join(tmp, "publish.html")
    with open(page, "w") as f:
        f.write(PAGE)
    out = {"ok": False, "url": a.url}
    d = start_chromium(a.log, a.fps)
    try:
        d.set_script_timeout(a.timeout + 5)
        d.get("file://" + page)

        def js_async(expr):
            return d.execute_async_script(
                "const done = arguments[arguments.length - 1]; (%s).then(done, e => done({error: String(e)}));" % expr)

        def stats():
            return js_async("window.pubStats()")

        d.execute_script("window.pubStart(...arguments);", a.url, a.token, a.width, a.height, a.fps, a.all_candidates)
        deadline = time.time() + a.timeout
        s = stats()
        while not (s.get("connectionState") == "connected" and (s.get("framesSent") or 0) > 0):
            if s.get("state") == "failed":
                raise RuntimeError("publishing failed: " + str(s.get("error")))
            if s.get("connectionState") == "failed":
                raise RuntimeError("the PeerConnection failed: %s" % json.dumps(s))
            if time.time() > deadline:
                raise RuntimeError("not connected and sending within %.0f s: %s" % (a.timeout, json.dumps(s)))
            time.sleep(0.05)
            s = stats()
        t0 = time.time()
        out["connectedAfterS"] = round(t0 - (deadline - a.timeout), 2)
        out["start"] = s
        out["trackSettings"] = d.execute_script("return window.pub.trackSettings")
        out["resource"] = d.execute_script("return window.pub.resource")
        out["postStatus"] = d.execute_script("return window.pub.postStatus")
        answer = d.execute_script("return window.pub.answer") or ""
        out["answerVideo"] = [l for l in answer.splitlines() if l.startswith(("a=rtpmap", "a=fmtp"))][:6]
        out["answerCandidates"] = [l[2:] for l in answer.splitlines() if l.startswith("a=candidate")]
        offer = d.execute_script("return window.pub.offer") or ""
        out["offerCandidates"] = [l[2:] for l in offer.splitlines() if l.startswith("a=candidate")]
        if a.ready:
            with open(a.ready + ".tmp", "w") as f:
                json.dump(out, f)
            os.replace(a.ready + ".tmp", a.ready)
        # Publish for N seconds (the time is the measure here; the connection is watched meanwhile).
        while time.time() - t0 < a.seconds:
            time.sleep(0.25)
            s = stats()
            if s.get("connectionState") in ("failed", "closed"):
                raise RuntimeError("the PeerConnection went %s after %.1f s" % (s["connectionState"], time.time() - t0))
        out["end"] = s
        out["publishedS"] = round(time.time() - t0, 2)
        out["stopAt"] = round(time.time(), 3)   # epoch seconds: when the DELETE (or close) was sent
        out.update(js_async("window.pubStop(%s, %s)" % (json.dumps(a.token), "false" if a.no_delete else "true")))
        if not a.no_delete and out.get("deleteStatus") != 200:
            raise RuntimeError("DELETE %s answered %s" % (out["resource"], out.get("deleteStatus")))
        out["ok"] = True
    except Exception as e:
        out["error"] = str(e)
    finally:
        try:
            out["pageLog"] = d.execute_script("return window.pub && window.pub.log")[-12:]
        except Exception:
            pass
        try:
            out["console"] = [l["message"] for l in d.get_log("browser")][-10:]
        except Exception:
            pass
        d.quit()
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
