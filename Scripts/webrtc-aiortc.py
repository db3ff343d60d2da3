#!/usr/bin/env python3
"""A second, independent WHEP client: aiortc (Python WebRTC) receives `camcap serve`'s stream and decodes it.

    webrtc-aiortc.py URL --frames N --out DECODED.y4m

URL is the one `camcap serve` prints; a "#token=…" fragment is sent as Authorization: Bearer.

POSTs a recvonly video offer to URL/whep, decodes N frames after the first, writes them as Y4M with their RTP
timestamps and local receive times (CLOCK_MONOTONIC ns, the clock camcap stamps captures with) in
DECODED.y4m.frames, DELETEs the resource and prints one JSON line: frames decoded, size, and the server's
figures for this viewer (its RTP offset and first capture time, to map RTP timestamps to capture times).
"""
import argparse, asyncio, json, os, re, sys, time, urllib.request

from aiortc import RTCPeerConnection, RTCSessionDescription


TOKEN = None


def http(method, url, body=None, ctype=None):
    req = urllib.request.Request(url, data=body, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    if TOKEN:
        req.add_header("Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


async def run(a):
    global TOKEN
    url, _, fragment = a.url.partition("#")
    if fragment.startswith("token="):
        TOKEN = fragment[len("token="):]
    base = url if url.endswith("/") else url + "/"
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    got = asyncio.get_running_loop().create_future()
    pc.on("track", lambda track: got.set_result(track) if not got.done() else None)
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    if a.tamper_fingerprint:
        # Claim another certificate than the one DTLS will present: the server must refuse the handshake.
        sdp = re.sub(r"(a=fingerprint:sha-256 )([0-9A-F]{2})", lambda m: m.group(1) + ("00" if m.group(2) != "00" else "11"), sdp)
    status, headers, answer = await asyncio.to_thread(http, "POST", base + "whep", sdp.encode(), "application/sdp")
    if status != 201:
        raise RuntimeError("WHEP answered %d: %s" % (status, answer[:200]))
    resource = headers.get("Location")
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer.decode(), type="answer"))
    track = await asyncio.wait_for(got, 20)
    frames, width, height = [], 0, 0
    with open(a.out, "wb") as y4m:
        deadline = time.monotonic() + a.timeout
        while len(frames) < a.frames + 1:
            frame = await asyncio.wait_for(track.recv(), max(1, deadline - time.monotonic()))
            now = time.monotonic_ns()
            if not width:
                width, height = frame.width, frame.height
                y4m.write(b"YUV4MPEG2 W%d H%d F30:1 Ip A1:1 C420jpeg\n" % (width, height))
            if (frame.width, frame.height) != (width, height):
                raise RuntimeError("size changed to %dx%d" % (frame.width, frame.height))
            y4m.write(b"FRAME\n")
            for i, plane in enumerate(frame.planes):
                w, h = (width, height) if i == 0 else ((width + 1) // 2, (height + 1) // 2)
                data = bytes(plane)
                for row in range(h):
                    y4m.write(data[row * plane.line_size: row * plane.line_size + w])
            frames.append((frame.pts, now))
    if a.abandon:
        # Vanish like a closed laptop: no DELETE, no DTLS close_notify, no more STUN consent checks.
        print(json.dumps({"ok": True, "abandoned": resource, "framesDecoded": len(frames)}), flush=True)
        os._exit(0)
    viewer = None
    for v in json.loads(http("GET", base + "stats")[2])["viewers"]:
        if resource and v.get("resource") == resource:
            viewer = v
    if resource:
        await asyncio.to_thread(http, "DELETE", base + resource.lstrip("/"))
    await pc.close()
    with open(a.out + ".frames", "w") as f:
        for pts, now in frames:
            f.write("%d %d\n" % (pts, now))
    return {"ok": True, "framesDecoded": len(frames), "width": width, "height": height, "server": viewer}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--abandon", action="store_true", help="exit without DELETE or closing after the frames")
    ap.add_argument("--tamper-fingerprint", action="store_true", help="send an offer whose DTLS fingerprint is wrong")
    a = ap.parse_args()
    try:
        out = asyncio.run(run(a))
    except Exception as e:
        out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
