#!/usr/bin/env python3
"""Matches a receiver's decoded frames with camcap's encoder input by RTP timestamp, then measures them.

    webrtc-compare.py DECODED.y4m INPUT.y4m RTP_OFFSET FIRST_CAPTURE_NS

DECODED.y4m.frames holds "rtp_timestamp receive_monotonic_ns" per decoded frame, INPUT.y4m.timestamps the
capture time (monotonic ns) of every input picture. A decoded frame's capture time is FIRST_CAPTURE_NS +
(rtp - RTP_OFFSET mod 2^32) / 90 kHz. Prints one JSON line: matched frames, PSNR (ffmpeg's psnr filter, Y and
average), and capture-to-decoded latency p50/p95/max in ms.
"""
import json, os, re, subprocess, sys, tempfile


def y4m_frames(path):
    with open(path, "rb") as f:
        header = f.readline()
        w = int(re.search(rb" W(\d+)", header).group(1)); h = int(re.search(rb" H(\d+)", header).group(1))
        size = w * h + 2 * ((w + 1) // 2) * ((h + 1) // 2)
        frames = []
        while True:
            tag = f.readline()
            if not tag:
                break
            data = f.read(size)
            if len(data) < size:
                break
            frames.append(data)
        return header, frames


def main():
    dec, inp, offset, first = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    dh, decoded = y4m_frames(dec)
    ih, inputs = y4m_frames(inp)
    rtp = [tuple(map(int, l.split())) for l in open(dec + ".frames")]
    caps = [int(l) for l in open(inp + ".timestamps") if l.strip()]
    if rtp and rtp[0][0] == 0:
        offset = 0   # aiortc counts pts from the first frame it received: the first frame sent (a key frame)
    index = {}
    for i, c in enumerate(caps):
        index[c // 1_000_000] = i   # capture ms → picture (frames are ≥ 4 ms apart)
    pairs, latencies = [], []
    for k, (ts, recv) in enumerate(rtp[: len(decoded)]):
        capture = first + ((ts - offset) % (1 << 32)) * 1_000_000_000 // 90_000
        i = None
        for ms in (capture // 1_000_000, capture // 1_000_000 - 1, capture // 1_000_000 + 1):
            j = index.get(ms)
            if j is not None and abs(caps[j] - capture) < 1_000_000:
                i = j
        if i is None or i >= len(inputs):
            continue
        pairs.append((k, i))
        latencies.append((recv - caps[i]) / 1e6)
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "a.y4m"), os.path.join(d, "b.y4m")
        with open(a, "wb") as fa, open(b, "wb") as fb:
            fa.write(dh); fb.write(ih)
            for k, i in pairs:
                fa.write(b"FRAME\n" + decoded[k]); fb.write(b"FRAME\n" + inputs[i])
        r = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-i", a, "-i", b, "-lavfi", "psnr", "-f", "null", "-"],
                           capture_output=True, text=True)
        m = re.search(r"PSNR y:([\d.inf]+) u:([\d.inf]+) v:([\d.inf]+) average:([\d.inf]+)", r.stderr)
    lat = sorted(latencies)
    pct = lambda p: lat[min(len(lat) - 1, max(0, int(round(p * len(lat) + 0.5)) - 1))] if lat else -1
    out = {"decoded": len(decoded), "matched": len(pairs),
           "psnrY": float(m.group(1)) if m else -1, "psnrAverage": float(m.group(4)) if m else -1,
           "latencyP50Ms": round(pct(0.5), 2), "latencyP95Ms": round(pct(0.95), 2), "latencyMaxMs": round(lat[-1], 2) if lat else -1}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
