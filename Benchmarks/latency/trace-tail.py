#!/usr/bin/env python3
"""Where a real-time session's latency tail comes from, from `camcap record --frame-trace FILE` CSVs.

  python3 Benchmarks/latency/trace-tail.py TRACE.csv [TRACE.csv ...]

For each trace: p50/p99 of latency and work (conversion + stages), p99 latency ÷ median work (the issue's
measure), and the frames at or above the p99 latency: their type (I/P), conversion, wait (capture to the loop,
less the conversion), encode, the rest of the stages (writing), and off-CPU time (the loop thread's wall minus its
CPU time over the stages: time it waited for a core). Then what the p99 frames have in common against the median
frame: the share of key frames, and how much of their excess over the median latency each part explains.
"""
import csv, statistics, sys


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main():
    for path in sys.argv[1:]:
        rows = list(csv.DictReader(open(path)))
        for r in rows:
            for k in r:
                if k != "type":
                    r[k] = float(r[k])
        rows = rows[5:]  # the first frames (encoder start, cold caches) are not steady state
        lat = [r["latency_us"] for r in rows]
        work = [r["work_us"] for r in rows]
        p99 = pct(lat, 0.99)
        med_work = statistics.median(work)
        print(f"{path}: {len(rows)} frames; latency p50 {pct(lat, .5) / 1000:.2f} p99 {p99 / 1000:.2f} ms; "
              f"work p50 {med_work / 1000:.2f} p99 {pct(work, .99) / 1000:.2f} ms; p99 latency ÷ median work {p99 / med_work:.2f}")
        tail = [r for r in rows if r["latency_us"] >= p99]
        parts = ["convert_us", "wait_us", "encode_us", "other_us", "offcpu_us"]
        med = {k: statistics.median(r[k] for r in rows) for k in parts + ["latency_us", "bytes"]}
        print(f"  median frame: " + ", ".join(f"{k[:-3]} {med[k] / 1000:.2f} ms" for k in parts) + f", {med['bytes']:.0f} bytes")
        print(f"  {'seq':>6} {'type':>4} {'latency':>8} {'convert':>8} {'wait':>6} {'encode':>7} {'other':>6} {'offcpu':>7} {'bytes':>7}")
        for r in sorted(tail, key=lambda r: -r["latency_us"]):
            print(f"  {int(r['sequence']):>6} {r['type']:>4} {r['latency_us'] / 1000:>8.2f} {r['convert_us'] / 1000:>8.2f} "
                  f"{r['wait_us'] / 1000:>6.2f} {r['encode_us'] / 1000:>7.2f} {r['other_us'] / 1000:>6.2f} {r['offcpu_us'] / 1000:>7.2f} "
                  f"{int(r['bytes']):>7}")
        ikeys = [r for r in rows if r["type"] == "I"]
        if ikeys:
            rank = statistics.median(sum(1 for x in lat if x <= r["latency_us"]) / len(lat) * 100 for r in ikeys)
            print(f"  key frames: median latency {statistics.median(r['latency_us'] for r in ikeys) / 1000:.2f} ms "
                  f"(percentile {rank:.0f} of all frames), encode {statistics.median(r['encode_us'] for r in ikeys) / 1000:.2f} ms, "
                  f"{statistics.median(r['bytes'] for r in ikeys):.0f} bytes")
        keys = sum(1 for r in tail if r["type"] == "I")
        allkeys = sum(1 for r in rows if r["type"] == "I")
        excess = sum(r["latency_us"] - med["latency_us"] for r in tail)
        share = {k: sum(r[k] - med[k] for r in tail) / excess * 100 if excess > 0 else 0 for k in parts}
        print(f"  p99 frames: {len(tail)}, key frames among them {keys} (key frames in the run: {allkeys}); "
              f"their excess over the median latency: " + ", ".join(f"{k[:-3]} {share[k]:.0f}%" for k in parts)
              + " (off-CPU time is inside encode/other, not added to them)")


if __name__ == "__main__":
    main()
