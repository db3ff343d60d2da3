#!/usr/bin/python3
"""One Chromium viewer of `camcap serve` behind a real link whose rate steps down and back up (#21).

    Scripts/cc-link.py [--congestion-control remb|transport-cc] [--limit-kbit 500] [--limit-from 10] [--limit-until 22]
                       [--seconds 35] [--camcap .build/debug/camcap]

Creates a network namespace with a veth pair (10.77.N.1 here, 10.77.N.2 inside), serves the 720p fixture webcam
(noise 4) on 10.77.N.1, runs headless Chromium (Scripts/webrtc-browser.py) inside the namespace, and from the
viewer's connection on limits what flows toward it with `tc qdisc … tbf` between --limit-from and --limit-until
seconds. Prints, every second, the send rate measured from the server's /stats, the viewer's estimate (REMB or our
send-side one), the delay trend and the loss, then the viewer's frames and freezes. Removes the namespace and the
qdisc at the end, whatever happens. Needs root (ip netns, tc).
"""
import argparse, json, os, re, subprocess, sys, time, urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--congestion-control", default="transport-cc", choices=["remb", "transport-cc"])
ap.add_argument("--limit-kbit", type=int, default=500)
ap.add_argument("--limit-from", type=float, default=10)
ap.add_argument("--limit-until", type=float, default=22)
ap.add_argument("--seconds", type=float, default=35)
ap.add_argument("--camcap", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "debug", "camcap"))
a = ap.parse_args()

n = os.getpid() % 200 + 20
ns, host_if, ns_if = "cc%d" % os.getpid(), "cc%dh" % os.getpid(), "cc%dn" % os.getpid()
host_ip, ns_ip = "10.77.%d.1" % n, "10.77.%d.2" % n


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.strip()))
    return r


server = viewer = None
try:
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
    sh("ip", "link", "set", ns_if, "netns", ns)
    sh("ip", "addr", "add", host_ip + "/30", "dev", host_if)
    sh("ip", "link", "set", host_if, "up")
    sh("ip", "netns", "exec", ns, "ip", "addr", "add", ns_ip + "/30", "dev", ns_if)
    sh("ip", "netns", "exec", ns, "ip", "link", "set", ns_if, "up")
    sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
    server = subprocess.Popen(
        [a.camcap, "serve", "-d", "fixture:uvc-webcam", "-s", "1280x720", "--noise", "4", "--listen", host_ip + ":0",
         "--congestion-control", a.congestion_control, "--duration", str(a.seconds + 30)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = None
    while url is None:
        line = server.stderr.readline()
        if not line:
            raise RuntimeError("camcap serve ended before printing its URL")
        m = re.search(r"serving (http://\S+)", line)
        url = m.group(1) if m else None
    base, _, fragment = url.partition("#")
    token = fragment[len("token="):]
    frames = int(a.seconds * 30)
    viewer = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3",
                               os.path.join(os.path.dirname(os.path.abspath(__file__)), "webrtc-browser.py"), url,
                               "--frames", str(frames), "--timeout", str(a.seconds + 30)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def viewer_stats():
        req = urllib.request.Request(base + "stats")
        req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)["viewers"]

    t0 = last = None
    phase = "open"
    print("    t  link      send kbit/s  estimate  usage       loss", flush=True)
    while viewer.poll() is None:
        time.sleep(1)
        try:
            v = viewer_stats()
        except Exception:
            continue
        if not v or v[0]["state"] != "connected":
            continue
        v, now = v[0], time.time()
        t0 = t0 or now
        t = now - t0
        if phase == "open" and t >= a.limit_from:
            sh("tc", "qdisc", "add", "dev", host_if, "root", "tbf", "rate", "%dkbit" % a.limit_kbit, "burst", "16kbit", "latency", "200ms")
            phase = "%dk" % a.limit_kbit
        elif phase != "open" and phase != "lifted" and t >= a.limit_until:
            sh("tc", "qdisc", "del", "dev", host_if, "root")
            phase = "lifted"
        if last:
            rate = (v["bytesSent"] - last[1]) * 8 / (now - last[0]) / 1000
            estimate = v["sendSideEstimateBps"] if v.get("transportCC") else v.get("rembBps", -1)
            print("%5.1f  %-8s  %11.0f  %8d  %-10s  %s" % (t, phase, rate, estimate // 1000, v.get("delayUsage") or "-",
                                                          "%.2f" % v["transportLoss"] if v.get("transportLoss", -1) >= 0 else "-"), flush=True)
        last = (now, v["bytesSent"])
    d = json.loads(viewer.stdout.read().strip().split("\n")[-1])
    last_stats = d.get("last") or {}
    print("viewer: ok %s, decoded %s of %s sent, freezes %s (%.2f s)%s" % (
        d.get("ok"), d.get("framesDecoded"), d.get("framesSent"), last_stats.get("freezeCount"),
        last_stats.get("totalFreezesDuration") or 0, (", error: " + d["error"]) if d.get("error") else ""))
finally:
    for p in (viewer, server):
        if p and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
