#!/usr/bin/env python3
"""An independent check of `select --constraints` (#49): the W3C Media Capture and Streams "SelectSettings"
algorithm, written here from the specification (fitness distance, section "SelectSettings"), not from our Swift.

For every camera listing in a folder (the corpus) and every constraint set below, it reads each listing itself
(v4l2-ctl --list-formats-ext text), computes the best fitness distance any mode reaches, and compares it with the
fitness distance of the mode camcap picked (`camcap select --corpus DIR --constraints JSON --json`). Ties may
differ (the spec leaves them to the user agent: we break them by the package's rule); the distances must not.

  Scripts/w3c-fitness.py [--camcap .build/debug/camcap] [--corpus Fixtures/corpus]

Exit 0 when every camera agrees, 1 otherwise (each disagreement printed). Scope: width, height, aspectRatio and
frameRate as min/max/exact/ideal, resizeMode none (the camera's modes as they are), convertible formats only.
"""
import argparse, json, re, subprocess, sys, os

# Formats the package converts to I420 (docs/processing.md), single- and multi-planar.
CONVERTIBLE = set("YU12 YV12 NV12 NV21 YUYV UYVY YVYU VYUY 422P NV16 NV61 NV24 NV42 BGR4 RGB4 AR24 XR24 BA24 BX24 "
                  "AB24 XB24 RA24 RX24 RGB3 BGR3 RGBP MJPG JPEG GREY NM12 YM12 NM21 YM21 YM16 NM16 NM61".split())

CONSTRAINT_SETS = [
    {"width": {"ideal": 1280}, "height": {"ideal": 720}},
    {"width": {"ideal": 1280}, "height": {"ideal": 720}, "frameRate": {"ideal": 30}},
    {"width": {"ideal": 640}, "frameRate": {"min": 15, "ideal": 30}},
    {"width": {"min": 1280}, "frameRate": {"ideal": 30}},
    {"height": {"ideal": 1080}, "frameRate": {"max": 30}},
    {"width": {"ideal": 1920}, "height": {"ideal": 1080}, "frameRate": {"ideal": 60}},
    {"aspectRatio": {"ideal": 1.7777777778}, "frameRate": {"ideal": 30}},
    {"width": {"exact": 640}, "height": {"exact": 480}},
    {"width": {"ideal": 320}, "height": {"ideal": 240}, "frameRate": {"ideal": 15}},
    {"width": {"max": 800}, "frameRate": {"min": 20}},
]


def parse_listing(text):
    """Entries (fourcc, sizes, rates): sizes a list of (w, h) or ('range', minw, minh, maxw, maxh, stepw, steph);
    rates a list of fps, ('range', minfps, maxfps) or None (the listing gives none)."""
    entries, fourcc, size = [], None, None
    def flush():
        if fourcc and size is not None:
            entries.append([fourcc, size, rates if rates else None])
    rates = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            continue
        m = re.match(r"\[\d+\]: '(....)'", line) or re.match(r"Pixel Format\s*: '(....)'", line)
        if m:
            flush(); fourcc, size, rates = m.group(1).strip(), None, []
            continue
        m = re.match(r"Size: Discrete (\d+)x(\d+)", line)
        if m:
            flush(); size, rates = (int(m.group(1)), int(m.group(2))), []
            continue
        m = re.match(r"Size: (?:Stepwise|Continuous) (\d+)x(\d+) - (\d+)x(\d+)(?: with step (\d+)/(\d+)| with step (\d+)x(\d+))?", line)
        if m:
            flush()
            g = m.groups()
            sw = int(g[4] or g[6] or 1); sh = int(g[5] or g[7] or 1)
            size, rates = ("range", int(g[0]), int(g[1]), int(g[2]), int(g[3]), sw, sh), []
            continue
        m = re.match(r"Interval: Discrete [\d.]+s \(([\d.]+) fps\)", line)
        if m and size is not None:
            rates.append(float(m.group(1)))
            continue
        m = re.match(r"Interval: (?:Stepwise|Continuous) ([\d.]+)s - ([\d.]+)s", line)
        if m and size is not None:
            lo, hi = float(m.group(1)), float(m.group(2))
            if lo > 0 and hi > 0:
                rates.append(("range", 1 / hi, 1 / lo))
    flush()
    return entries


def distance(c, v):
    """The spec's fitness distance of one numeric constraint (min/max/exact/ideal) for the value v."""
    if c is None:
        return 0.0
    if "exact" in c and abs(v - c["exact"]) > max(1e-6, abs(c["exact"]) * 1e-6):
        return float("inf")
    if "min" in c and v < c["min"] - 1e-9:
        return float("inf")
    if "max" in c and v > c["max"] + 1e-9:
        return float("inf")
    if "ideal" in c:
        ideal = c["ideal"]
        return 0.0 if v == ideal else abs(v - ideal) / max(abs(v), abs(ideal))
    return 0.0


def fitness(cs, w, h, fps):
    return (distance(cs.get("width"), w) + distance(cs.get("height"), h) + distance(cs.get("frameRate"), fps)
            + distance(cs.get("aspectRatio"), w / h if h else 0))


def values(c, default):
    out = set()
    for k in ("exact", "ideal", "min", "max"):
        if c and k in c:
            out.add(c[k])
    return out or {default}


def candidates(entries, cs):
    for fourcc, size, rates in entries:
        if fourcc not in CONVERTIBLE:
            continue
        if size[0] == "range":
            _, w0, h0, w1, h1, sw, sh = size
            ws = {w0, w1} | {min(max(w0 + round((x - w0) / sw) * sw, w0), w1) for x in values(cs.get("width"), 1280)}
            hs = {h0, h1} | {min(max(h0 + round((x - h0) / sh) * sh, h0), h1) for x in values(cs.get("height"), 720)}
            sizes = [(w, h) for w in ws for h in hs]
        else:
            sizes = [size]
        fps_list = []
        for r in rates or [None]:
            if r is None:  # no rate listed: taken to reach what is asked (ideal, else 30)
                fps_list.append(cs.get("frameRate", {}).get("ideal", 30) if cs.get("frameRate") else 30)
            elif isinstance(r, tuple):
                lo, hi = r[1], r[2]
                fps_list += [lo, hi] + [min(max(x, lo), hi) for x in values(cs.get("frameRate"), 30)]
            else:
                fps_list.append(r)
        for (w, h) in sizes:
            for f in fps_list:
                yield fourcc, w, h, f


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--camcap", default=".build/debug/camcap")
    ap.add_argument("--corpus", default="Fixtures/corpus")
    a = ap.parse_args()
    listings = {os.path.splitext(f)[0]: open(os.path.join(a.corpus, f), encoding="utf-8", errors="replace").read()
                for f in sorted(os.listdir(a.corpus)) if f.endswith(".txt")}
    compared = agreed = 0
    bad = []
    for cs in CONSTRAINT_SETS:
        out = subprocess.run([a.camcap, "select", "--corpus", a.corpus, "--constraints", json.dumps(cs), "--json"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"camcap failed for {cs}: {out.stderr.strip()}"); return 1
        rows = {r["camera"]: r for r in json.loads(out.stdout)}
        for name, text in listings.items():
            entries = parse_listing(text)
            best = min((fitness(cs, w, h, f) for (_, w, h, f) in candidates(entries, cs)), default=float("inf"))
            row = rows.get(name)
            if row is None:
                continue
            compared += 1
            ours = fitness(cs, row["width"], row["height"], row["fps"]) if row.get("width") else float("inf")
            same = (ours == best == float("inf")) or abs(ours - best) <= 1e-9
            if same:
                agreed += 1
            else:
                bad.append(f"{name} {json.dumps(cs)}: camcap picked {row.get('pixelFormat')} {row.get('width')}x{row.get('height')}"
                           f"@{row.get('fps')} (fitness {ours:.6f}), the spec's best is {best:.6f}")
    for b in bad:
        print("DIFFERS " + b)
    print(f"w3c-fitness: {agreed} of {compared} camera × constraint cases agree ({len(listings)} cameras, {len(CONSTRAINT_SETS)} constraint sets)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
