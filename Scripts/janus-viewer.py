#!/usr/bin/python3
"""Watches a Janus VideoRoom publisher or a Streaming-plugin mountpoint in headless Chromium, with Janus's own
JavaScript library (janus.js from Debian's libjs-janus-gateway, with webrtc-adapter from libjs-webrtc-adapter).

    janus-viewer.py --janus JANUS_HTTP (--videoroom ROOM | --streaming MOUNTPOINT_ID) [--frames N] [--timeout S]
                    [--expect-publisher-gone] [--log FILE]
                    [--substream N --width W] [--switch-to N --switch-width W --switch-frames M]

VideoRoom: waits (listparticipants through the HTTP API, until the deadline) for a publisher in ROOM, subscribes to
the first one; Streaming: watches the mountpoint. Then waits for the first decoded frame and for N more, and prints
one JSON line: the inbound-rtp video figures of getStats (framesDecoded, framesReceived, framesDropped, frameWidth,
frameHeight, freezeCount, packetsLost, packetsReceived, pliCount, nackCount, firCount, jitter, codec, fmtp,
decoderImplementation), decodedRatio (framesDecoded / framesReceived), the Janus-side publisher (listparticipants)
or mountpoint (info), and with --expect-publisher-gone the time until listparticipants shows no publisher.
Exit status 0 when N frames were decoded in time (and the publisher was seen leaving, if asked).

Simulcast (VideoRoom): --substream N asks Janus for substream N (configure, as janus.js's demos do) after the first
frame and waits until the decoded width is W (--width) before counting the N frames ("window": framesDecoded and
framesReceived over them, at that width); --switch-to asks for another substream after them, waits for
--switch-width and counts --switch-frames more ("switched": the same figures, and switchAfterS).
"""
import argparse, json, os, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import janus_api  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402  (the one Chromium set-up: Scripts/chromium.py)

JANUS_JS = "/usr/share/javascript/janus-gateway/janus.js"
ADAPTER_JS = "/usr/share/javascript/webrtc-adapter/adapter.js"

PAGE = r"""<!doctype html><html><head><meta charset="utf-8"><title>Janus viewer</title>
<script src="file://%(adapter)s"></script>
<script src="file://%(janus)s"></script>
</head><body>
<video id="v" autoplay muted playsinline width="320"></video>
<script>
window.view = {state: "idle", error: null, log: [], events: []};
function log(m) { window.view.log.push((performance.now() / 1000).toFixed(3) + " " + m); }

window.viewStart = function (server, mode, room, feed, mountpoint, substream) {
  const v = window.view;
  Janus.init({debug: ["error"], dependencies: Janus.useDefaultDependencies(), callback: function () {
    if (!Janus.isWebrtcSupported()) { v.state = "failed"; v.error = "no WebRTC"; return; }
    v.janus = new Janus({
      server: server, iceServers: [],
      success: function () {
        v.state = "session";
        v.janus.attach({
          plugin: mode === "videoroom" ? "janus.plugin.videoroom" : "janus.plugin.streaming",
          opaqueId: "swiftvc-viewer-" + Janus.randomString(8),
          success: function (h) {
            v.handle = h; v.state = "attached";
            if (mode === "videoroom")
              // With a simulcast substream asked for from the join on, VideoRoom only ever moves toward it (it
              // starts on the first key frame of any layer): no passing visit to a layer in between later.
              h.send({message: {request: "join", room: room, ptype: "subscriber",
                                streams: [substream === null ? {feed: feed} : {feed: feed, substream: substream}]}});
            else
              h.send({message: {request: "watch", id: mountpoint}});
          },
          error: function (e) { v.state = "failed"; v.error = "attach: " + e; },
          iceState: function (s) { log("ice " + s); },
          webrtcState: function (on) { log("webrtc " + (on ? "up" : "down")); },
          onmessage: function (msg, jsep) {
            const ev = msg["videoroom"] || (msg["streaming"] ? "streaming:" + JSON.stringify(msg["result"] || {}) : "?");
            if (msg["error"]) { v.state = "failed"; v.error = "plugin: " + msg["error"]; return; }
            if (v.state === "answered")   // after the start: the plugin telling us the feed changed or went
              v.events.push({t: Date.now(), msg: msg});
            log("message " + ev);
            if (jsep) {
              v.handle.createAnswer({
                jsep: jsep,
                tracks: [{type: "data"}],  // receive only (and no data channel unless offered)
                success: function (answer) {
                  const body = mode === "videoroom" ? {request: "start", room: room} : {request: "start"};
                  v.handle.send({message: body, jsep: answer});
                  v.state = "answered";
                },
                error: function (e) { v.state = "failed"; v.error = "createAnswer: " + JSON.stringify(e); }
              });
            }
          },
          onremotetrack: function (track, mid, on) {
            log("remote track " + track.kind + " " + mid + " " + on);
            if (track.kind !== "video") return;
            v.mid = mid;
            if (on) {
              const el = document.getElementById("v");
              el.srcObject = new MediaStream([track]);
              el.play().catch(e => log("play: " + e));
              v.track = true;
            }
          },
          oncleanup: function () { log("cleanup"); v.cleanedUp = true; }
        });
      },
      error: function (e) { v.state = "failed"; v.error = "session: " + e; },
      destroyed: function () { log("destroyed"); }
    });
  }});
};

window.viewStats = async function () {
  const v = window.view, out = {state: v.state, error: v.error};
  const pc = v.handle && v.handle.webrtcStuff && v.handle.webrtcStuff.pc;
  if (!pc) return out;
  out.connectionState = pc.connectionState;
  const s = await pc.getStats();
  const codecs = {};
  s.forEach(r => { if (r.type === "codec") codecs[r.id] = r; });
  s.forEach(r => {
    if (r.type === "inbound-rtp" && r.kind === "video") {
      for (const k of ["framesDecoded", "framesReceived", "framesDropped", "frameWidth", "frameHeight",
                       "framesPerSecond", "freezeCount", "totalFreezesDuration", "pauseCount", "packetsLost",
                       "packetsReceived", "bytesReceived", "pliCount", "nackCount", "firCount", "jitter",
                       "keyFramesDecoded", "decoderImplementation"])
        out[k] = r[k];
      const c = codecs[r.codecId];
      if (c) { out.codec = c.mimeType; out.fmtp = c.sdpFmtpLine; }
    }
    if (r.type === "candidate-pair" && r.state === "succeeded" && r.nominated) {
      const l = s.get(r.localCandidateId), rm = s.get(r.remoteCandidateId);
      if (l && rm) out.pair = (l.address || l.ip || l.candidateType) + ":" + l.port + " -> " + (rm.address || rm.ip) + ":" + rm.port;
    }
  });
  return out;
};

window.viewConfigure = function (substream) {
  const v = window.view;
  const body = {request: "configure", substream: substream};
  if (v.mid !== undefined) body.mid = v.mid;
  v.handle.send({message: body});
  log("configure substream " + substream);
};

window.viewStop = function () {
  return new Promise(resolve => {
    const v = window.view;
    if (!v.janus) return resolve(true);
    v.janus.destroy({success: () => resolve(true), error: e => resolve(String(e))});
  });
};
</script></body></html>
"""


def start_chromium(log=None):
    return chromium.start(log=log, browser_logs=True)


def publishers(j, room):
    return [p for p in janus_api.listparticipants(j, room).get("participants", []) if p.get("publisher")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--janus", required=True, help="Janus HTTP API, e.g. http://127.0.0.1:8088/janus")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--videoroom", type=int, metavar="ROOM")
    g.add_argument("--streaming", type=int, metavar="MOUNTPOINT_ID")
    ap.add_argument("--frames", type=int, default=300, help="frames to decode after the first one")
    ap.add_argument("--timeout", type=float, default=60, help="for the publisher, the first frame, and the N frames each")
    ap.add_argument("--expect-publisher-gone", action="store_true",
                    help="then wait (up to --timeout) until listparticipants shows no publisher in ROOM")
    ap.add_argument("--log", default=None, help="chromedriver log file")
    ap.add_argument("--ready", default=None, help="write this file once the N frames are decoded (before waiting for the publisher to go)")
    ap.add_argument("--substream", type=int, default=None, help="VideoRoom simulcast: ask for this substream (0 lowest) first")
    ap.add_argument("--width", type=int, default=None, help="with --substream: the decoded width to wait for before counting")
    ap.add_argument("--switch-to", type=int, default=None, help="then ask for this substream")
    ap.add_argument("--switch-width", type=int, default=None, help="the decoded width to wait for after --switch-to")
    ap.add_argument("--switch-frames", type=int, default=100, help="frames to count after the switch")
    a = ap.parse_args()
    for f in (JANUS_JS, ADAPTER_JS):
        if not os.path.exists(f):
            print(json.dumps({"ok": False, "error": "%s missing (apt-get install libjs-janus-gateway libjs-webrtc-adapter)" % f}))
            return 1

    out = {"ok": False, "janus": a.janus}
    j = janus_api.Janus(a.janus)
    d = None
    try:
        t_start = time.time()
        feed = None
        if a.videoroom is not None:
            mode = "videoroom"
            deadline = time.time() + a.timeout
            while True:
                pubs = publishers(j, a.videoroom)
                if pubs:
                    break
                if time.time() > deadline:
                    raise RuntimeError("no publisher in room %d within %.0f s" % (a.videoroom, a.timeout))
                time.sleep(0.1)
            out["publisher"] = pubs[0]
            out["publishers"] = len(pubs)
            feed = pubs[0]["id"]
        else:
            mode = "streaming"
            h = j.attach("janus.plugin.streaming")
            out["mountpoint"] = j.request(h, {"request": "info", "id": a.streaming}).get("info")

        tmp = tempfile.mkdtemp(prefix="janus-viewer-")
        page = os.path.join(tmp, "viewer.html")
        with open(page, "w") as f:
            f.write(PAGE % {"adapter": ADAPTER_JS, "janus": JANUS_JS})
        d = start_chromium(a.log)
        d.set_script_timeout(15)
        d.get("file://" + page)

        def stats():
            return d.execute_async_script(
                "const done = arguments[arguments.length - 1]; window.viewStats().then(done, e => done({error: String(e)}));")

        d.execute_script("window.viewStart(...arguments);", a.janus, mode, a.videoroom, feed, a.streaming, a.substream)
        deadline = time.time() + a.timeout
        s = stats()
        while (s.get("framesDecoded") or 0) == 0:
            if s.get("state") == "failed":
                raise RuntimeError("viewer failed: %s" % s.get("error"))
            if time.time() > deadline:
                raise RuntimeError("no frame decoded within %.0f s: %s" % (a.timeout, json.dumps(s)))
            time.sleep(0.05)
            s = stats()
        out["firstFrameAfterS"] = round(time.time() - t_start, 2)
        out["first"] = s

        def configure(substream, width):
            d.execute_script("window.viewConfigure(arguments[0]);", substream)
            t0 = time.time()
            deadline = time.time() + a.timeout
            s = stats()
            while width is not None and s.get("frameWidth") != width:
                if time.time() > deadline:
                    raise RuntimeError("substream %d: no frame %d wide within %.0f s: %s" % (substream, width, a.timeout, json.dumps(s)))
                time.sleep(0.05)
                s = stats()
            return s, round(time.time() - t0, 2)

        def window(base, n):
            target = base["framesDecoded"] + n
            deadline = time.time() + a.timeout
            s = base
            widths = set()
            while s.get("framesDecoded", 0) < target:
                if time.time() > deadline:
                    raise RuntimeError("only %d of %d frames decoded within %.0f s: %s"
                                       % (s.get("framesDecoded", 0) - base["framesDecoded"], n, a.timeout, json.dumps(s)))
                time.sleep(0.05)
                s = stats()
                widths.add("%sx%s" % (s.get("frameWidth"), s.get("frameHeight")))
            decoded = s["framesDecoded"] - base["framesDecoded"]
            received = s.get("framesReceived", 0) - base.get("framesReceived", 0)
            return s, {"framesDecoded": decoded, "framesReceived": received, "sizes": sorted(widths),
                       "frameWidth": s.get("frameWidth"), "frameHeight": s.get("frameHeight"),
                       "decodedRatio": round(decoded / received, 4) if received else None}

        if a.substream is not None:
            s, out["substreamAfterS"] = configure(a.substream, a.width)
            s, out["window"] = window(s, a.frames)
            if a.switch_to is not None:
                s, out["switchAfterS"] = configure(a.switch_to, a.switch_width)
                s, out["switched"] = window(s, a.switch_frames)
        target = s["framesDecoded"] + (0 if a.substream is not None else a.frames)
        deadline = time.time() + a.timeout
        while s.get("framesDecoded", 0) < target:
            if time.time() > deadline:
                raise RuntimeError("only %d of %d frames decoded within %.0f s: %s"
                                   % (s.get("framesDecoded", 0) - out["first"]["framesDecoded"], a.frames, a.timeout, json.dumps(s)))
            time.sleep(0.05)
            s = stats()
        out["last"] = s
        for k in ["framesDecoded", "framesReceived", "framesDropped", "frameWidth", "frameHeight", "freezeCount",
                  "packetsLost", "packetsReceived", "pliCount", "nackCount", "firCount", "jitter", "codec", "fmtp",
                  "decoderImplementation", "pair"]:
            out[k] = s.get(k)
        out["decodedRatio"] = round(s["framesDecoded"] / s["framesReceived"], 4) if s.get("framesReceived") else None
        if a.ready:
            open(a.ready, "w").close()
        if a.expect_publisher_gone:
            if mode != "videoroom":
                raise RuntimeError("--expect-publisher-gone is for --videoroom")
            t0 = time.time()
            deadline = t0 + a.timeout
            while publishers(j, a.videoroom):
                if time.time() > deadline:
                    raise RuntimeError("the publisher was still in room %d after %.0f s" % (a.videoroom, a.timeout))
                time.sleep(0.05)
            out["publisherGoneAfterS"] = round(time.time() - t0, 2)
            out["publisherGoneAt"] = round(time.time(), 3)
            # The subscriber's own view of it: the plugin's event (unpublished/leaving), if it came already.
            out["subscriberEvents"] = d.execute_script("return window.view.events")
            after = stats()
            out["afterGone"] = {k: after.get(k) for k in ("framesDecoded", "framesReceived", "connectionState", "state")}
        d.execute_async_script("const done = arguments[arguments.length - 1]; window.viewStop().then(done);")
        out["ok"] = True
    except Exception as e:
        out["error"] = str(e)
    finally:
        if d is not None:
            try:
                out["pageLog"] = d.execute_script("return window.view && window.view.log")[-12:]
            except Exception:
                pass
            try:
                out["console"] = [l["message"] for l in d.get_log("browser") if l.get("level") in ("SEVERE", "WARNING")][-10:]
            except Exception:
                pass
            d.quit()
        j.destroy()
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
