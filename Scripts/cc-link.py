#!/usr/bin/python3
"""Chromium viewers of `camcap serve`, each behind its own real link whose rate can step (#21).

    Scripts/cc-link.py [--viewer NAME[=STEPS]]... [--seconds 35] [--congestion-control remb|transport-cc]
                       [--burst 5kb] [--latency 200ms] [--serve-arg ARG]... [--json FILE] [--camcap .build/debug/camcap]

Every viewer gets a network namespace with a veth pair (10.77.N.1 on this side, 10.77.N.2 inside) and runs
headless Chromium (Scripts/webrtc-browser.py) there; `camcap serve` (the 720p fixture webcam, noise 4) listens on
0.0.0.0 and answers each viewer on its own link. STEPS limit a viewer's link, both directions, with
`tc qdisc … tbf rate KBIT burst BURST latency LATENCY` (#39's link: burst 5kb, latency 200ms):
"T:KBIT,T:KBIT,…", seconds after every viewer played its first frame, KBIT 0 for no limit (default: no limit at
all; a step at 0 s or before is in place before the viewer connects). The default is the issue's step: one viewer 5000 → 500 → 5000 kbit/s at 10 s and 25 s.

Prints, every second, one line per viewer: its link, the send rate from the server's /stats, the estimate (REMB or
our send-side one), its tier, and what its browser shows (size, frames per second, freezes). At the end one JSON
line (also written to --json): every viewer's rows and the browser's final figures. Removes the namespaces and
qdiscs at the end, whatever happens. Needs root (ip netns, tc).
"""
import argparse, json, os, re, subprocess, sys, tempfile, time, urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--viewer", action="append", default=[], help="NAME[=T:KBIT,…] (repeatable)")
ap.add_argument("--congestion-control", default="transport-cc", choices=["remb", "transport-cc"])
ap.add_argument("--seconds", type=float, default=35)
ap.add_argument("--serve-arg", action="append", default=[], help="one more argument for camcap serve (repeatable)")
ap.add_argument("--json", default=None, help="also write the final JSON here")
ap.add_argument("--burst", default="5kb", help="the tbf bucket (tc's units: 5kb is 5 kilobytes; default 5kb, as #39)")
ap.add_argument("--latency", default="200ms", help="the tbf queue, as the time it may hold (default 200ms)")
ap.add_argument("--camcap", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".build", "debug", "camcap"))
a = ap.parse_args()
if not a.viewer:
    a.viewer = ["A=0:5000,10:500,25:5000"]


def parse_viewer(spec):
    name, _, steps = spec.partition("=")
    out = []
    for step in filter(None, steps.split(",")):
        t, _, kbit = step.partition(":")
        out.append((float(t), int(kbit)))
    return {"name": name, "steps": sorted(out)}


viewers = [parse_viewer(v) for v in a.viewer]
pid = os.getpid()
for i, v in enumerate(viewers):
    n = (pid + 7 * i) % 200 + 20
    v.update(ns="cc%d_%d" % (pid, i), host_if="cc%dh%d" % (pid, i), ns_if="cc%dn%d" % (pid, i),
             host_ip="10.77.%d.1" % n, ns_ip="10.77.%d.2" % n, limit=0, rows=[], proc=None,
             series=tempfile.NamedTemporaryFile(prefix="cc-series-", delete=False).name)


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), r.stderr.strip()))
    return r


def set_limit(v, kbit):
    # Both directions: the server's media to the viewer (the host's end of the veth pair) and the viewer's
    # feedback to the server (the namespace's end).
    if kbit == v["limit"]:
        return
    ends = [[], ["ip", "netns", "exec", v["ns"]]]
    for prefix, dev in zip(ends, [v["host_if"], v["ns_if"]]):
        if v["limit"]:
            sh(*prefix, "tc", "qdisc", "del", "dev", dev, "root")
        if kbit:
            sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "%dkbit" % kbit, "burst", a.burst, "latency", a.latency)
    v["limit"] = kbit


def last_line(path):
    try:
        with open(path) as f:
            lines = f.read().strip().split("\n")
        return json.loads(lines[-1]) if lines and lines[-1] else {}
    except (OSError, ValueError):
        return {}


server = None
result = {"viewers": {}}
try:
    for v in viewers:
        sh("ip", "netns", "add", v["ns"])
        sh("ip", "link", "add", v["host_if"], "type", "veth", "peer", "name", v["ns_if"])
        sh("ip", "link", "set", v["ns_if"], "netns", v["ns"])
        sh("ip", "addr", "add", v["host_ip"] + "/30", "dev", v["host_if"])
        sh("ip", "link", "set", v["host_if"], "up")
        sh("ip", "netns", "exec", v["ns"], "ip", "addr", "add", v["ns_ip"] + "/30", "dev", v["ns_if"])
        sh("ip", "netns", "exec", v["ns"], "ip", "link", "set", v["ns_if"], "up")
        sh("ip", "netns", "exec", v["ns"], "ip", "link", "set", "lo", "up")
    server = subprocess.Popen(
        [a.camcap, "serve", "-d", "fixture:uvc-webcam", "-s", "1280x720", "--noise", "4", "--listen", "0.0.0.0:0",
         "--congestion-control", a.congestion_control, "--duration", str(a.seconds + 60)]
        + [c for v in viewers for c in ("--candidate", v["host_ip"])] + a.serve_arg,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = token = None
    tiers_line = ""
    while port is None:
        line = server.stderr.readline()
        if not line:
            raise RuntimeError("camcap serve ended before printing its URL")
        m = re.search(r"serving https?://[^:/]+:(\d+)/#token=(\S+)", line)
        if m:
            port, token = m.group(1), m.group(2)
    frames = int(a.seconds * 30) + 90
    for v in viewers:  # a limit at 0 s or before holds from the viewer's first packet
        early = [k for at, k in v["steps"] if at <= 0]
        if early:
            set_limit(v, early[-1])
    for v in viewers:
        # Each viewer reaches the server through its own link's address.
        url = "http://%s:%s/#token=%s" % (v["host_ip"], port, token)
        v["proc"] = subprocess.Popen(
            ["ip", "netns", "exec", v["ns"], "/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "webrtc-browser.py"),
             url, "--frames", str(frames), "--timeout", "60", "--series", v["series"]],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def server_viewers():
        req = urllib.request.Request("http://%s:%s/stats" % (viewers[0]["host_ip"], port))
        req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def tier_rate(stats, tier):
        # What the viewer's tier's encoder is asked for now (kbit/s), None while nobody on it has an estimate.
        for t in stats.get("tiers", []):
            if t.get("tier") == tier and t.get("rateBps", -1) >= 0:
                return t["rateBps"] // 1000
        return None

    def by_remote(stats, v):
        for s in stats["viewers"]:
            if s.get("remote", "").startswith(v["ns_ip"] + ":") or s.get("client") == v["ns_ip"]:
                return s
        return None

    # t = 0 once every viewer has decoded a frame (its series file has a line).
    start_deadline = time.time() + 90
    while not all(last_line(v["series"]).get("framesDecoded", 0) > 0 for v in viewers):
        if time.time() > start_deadline or any(v["proc"].poll() is not None for v in viewers):
            raise RuntimeError("the viewers did not all start playing")
        time.sleep(0.2)
    t0 = time.time()
    last = {}

    def server_cpu():  # the server's user + system time, seconds
        with open("/proc/%d/stat" % server.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    cpu0 = server_cpu()

    def box_cpu():  # (busy, total) jiffies of every CPU of the machine
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)  # idle and iowait are not busy
    box_last = box_cpu()
    print("    t  viewer  link      send kbit/s  estimate  tier  shown        fps  playout  freezes", flush=True)
    while time.time() - t0 < a.seconds:
        time.sleep(1)
        now = time.time()
        t = now - t0
        try:
            stats = server_viewers()
        except Exception:
            continue
        # How busy the whole machine was over the last second: a viewer's frame rate falls with it (two
        # Chromium decoders and the server on 2 cores), whatever its link.
        box_now = box_cpu()
        box_busy = round(100 * (box_now[0] - box_last[0]) / max(1, box_now[1] - box_last[1]))
        box_last = box_now
        for v in viewers:
            if v["steps"]:
                set_limit(v, [k for at, k in v["steps"] if at <= t][-1] if any(at <= t for at, _ in v["steps"]) else 0)
            s = by_remote(stats, v)
            b = last_line(v["series"])
            if s is None:
                continue
            rate = sent_fps = None
            if v["name"] in last:
                then, sent, frames_then = last[v["name"]]
                rate = (s["bytesSent"] - sent) * 8 / (now - then) / 1000
                sent_fps = round((s.get("framesSent", 0) - frames_then) / (now - then), 1)
            last[v["name"]] = (now, s["bytesSent"], s.get("framesSent", 0))
            estimate = s["sendSideEstimateBps"] if s.get("transportCC") else s.get("rembBps", -1)
            row = {"t": round(t, 1), "limit": v["limit"], "sendKbps": round(rate) if rate is not None else None,
                   "estimateKbps": estimate // 1000 if estimate and estimate > 0 else None, "tier": s.get("tier"),
                   "pendingTier": s.get("pendingTier"), "width": b.get("frameWidth"), "height": b.get("frameHeight"),
                   "fps": b.get("framesPerSecond"), "freezes": b.get("freezeCount"), "freezeSeconds": b.get("totalFreezesDuration"),
                   "longestFreeze": b.get("longestFreeze"),
                   "decoded": b.get("framesDecoded"), "probes": s.get("probes"), "probesLost": s.get("probesLost"), "probesOnClearedQueue": s.get("probesOnClearedQueue"), "probesRaised": s.get("probesRaised"), "probesCapped": s.get("probesCapped"), "deliveryCaps": s.get("deliveryCaps"), "probesRaisedShort": s.get("probesRaisedShort"), "tierRateKbps": tier_rate(stats, s.get("tier")), "sentFps": sent_fps, "boxBusyPercent": box_busy, "trainsRaised": s.get("trainsRaised"), "lastTrainBps": s.get("lastTrainBps"), "lastProbeBps": s.get("lastProbeBps"), "trains": s.get("trains"), "queueDelayMs": s.get("queueDelayMs"), "delayUsage": s.get("delayUsage"),
                   "playoutDelay": s.get("playoutDelaySent"), "nacks": s.get("nacks"), "retransmissions": s.get("retransmissions"),
                   "nacksIgnored": s.get("nacksIgnored"), "overBudget": s.get("retransmissionsOverBudget"),
                   "keyFrameRequests": s.get("keyFrameRequests"), "packetsDroppedBeforeKeyFrame": s.get("packetsDroppedBeforeKeyFrame"),
                   "nacksBeforeKeyFrame": s.get("nacksBeforeKeyFrame")}
            v["rows"].append(row)
            print("%5.1f  %-6s  %-8s  %11s  %8s  %4s  %-11s  %3s  %-7s  %s (%.2f s)" % (
                t, v["name"], ("%dk" % v["limit"]) if v["limit"] else "open", "-" if rate is None else "%.0f" % rate,
                row["estimateKbps"], row["tier"], "%sx%s" % (row["width"], row["height"]), row["fps"], row["playoutDelay"] or "-", row["freezes"],
                row["freezeSeconds"] or 0), flush=True)
    result["serverCpuMsPerSecond"] = round((server_cpu() - cpu0) * 1000 / (time.time() - t0), 1)
    print("server CPU: %.1f ms per second over %.0f s" % (result["serverCpuMsPerSecond"], time.time() - t0), flush=True)
    for v in viewers:
        set_limit(v, 0)
    for v in viewers:
        v["proc"].terminate()
        try:
            out, _ = v["proc"].communicate(timeout=20)
        except subprocess.TimeoutExpired:
            v["proc"].kill()
            out = ""
        result["viewers"][v["name"]] = {"steps": v["steps"], "rows": v["rows"], "final": last_line(v["series"])}
finally:
    for v in viewers:
        if v.get("proc") and v["proc"].poll() is None:
            v["proc"].kill()
    if server and server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    for v in viewers:
        # Whatever still runs in the namespace (a browser left by a killed viewer) goes with it.
        pids = subprocess.run(["ip", "netns", "pids", v["ns"]], capture_output=True, text=True).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), 9)
            except (OSError, ValueError):
                pass
        subprocess.run(["ip", "link", "del", v["host_if"]], capture_output=True)
        subprocess.run(["ip", "netns", "del", v["ns"]], capture_output=True)
        try:
            os.unlink(v["series"])
        except OSError:
            pass
line = json.dumps(result)
if a.json:
    with open(a.json, "w") as f:
        f.write(line + "\n")
print(line, flush=True)
