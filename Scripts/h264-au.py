#!/usr/bin/env python3
"""Access units of an Annex-B H.264 stream, for the VM test's H.264 camera (v4l2loopback).

  h264-au.py offsets FILE             one "offset length" line per access unit (what the feeder writes, one per write())
  h264-au.py compare FED RECORDED N   are RECORDED's N access units consecutive fed ones, slice NAL units bit for bit?
                                      (a gap is allowed only where the recording resumes at an IDR)

An access unit starts at an AUD/SPS/PPS/SEI after a slice, or at a slice whose first_mb_in_slice is 0 after a slice.
The comparison is on the slice NAL units (types 1 and 5): a recorder may rewrite the SPS (our Annex-B writer adds VUI
timing_info) and insert SPS/PPS before IDRs. The fed stream is looped by the feeder, so "consecutive" wraps around.
"""
import sys


def nal_units(data):
    """(start code offset, payload start, payload end) of each NAL unit; trailing zero bytes are not payload."""
    starts = []
    i, n = 0, len(data)
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0:
            break
        sc = j - 1 if j > 0 and data[j - 1] == 0 else j
        starts.append((sc, j + 3))
        i = j + 3
    out = []
    for k, (sc, p) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else n
        e = end
        while e > p and data[e - 1] == 0:
            e -= 1
        out.append((sc, p, e))
    return out


def access_units(data):
    """[(offset, length, [(type, payload bytes)])]"""
    aus, cur, cur_start, has_vcl = [], [], 0, False
    for sc, p, e in nal_units(data):
        if p >= e:
            continue
        t = data[p] & 0x1F
        vcl = t in (1, 5)
        new = has_vcl and ((t in (6, 7, 8, 9) or 14 <= t <= 18) or (vcl and e > p + 1 and data[p + 1] & 0x80))
        if new:
            aus.append((cur_start, sc - cur_start, cur))
            cur, cur_start, has_vcl = [], sc, False
        if not cur:
            cur_start = sc
        cur.append((t, data[p:e]))
        has_vcl = has_vcl or vcl
    if cur:
        aus.append((cur_start, len(data) - cur_start, cur))
    return aus


def slices(au):
    return tuple(b for t, b in au[2] if t in (1, 5))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "offsets":
        data = open(sys.argv[2], "rb").read()
        for off, length, _ in access_units(data):
            print(off, length)
        return 0
    if len(sys.argv) == 5 and sys.argv[1] == "compare":
        fed = [slices(a) for a in access_units(open(sys.argv[2], "rb").read())]
        rec_aus = access_units(open(sys.argv[3], "rb").read())
        rec = [slices(a) for a in rec_aus]
        expected = int(sys.argv[4])
        where = {}
        for i, s in enumerate(fed):
            where.setdefault(s, i)
        idx = [where.get(s) for s in rec]
        unmatched = sum(1 for i in idx if i is None)
        repeats = skips = resumed = 0
        where_bad = []
        for k, (a, b) in enumerate(zip(idx, idx[1:])):
            if a is None or b is None:
                continue
            if b == a:
                repeats += 1
                where_bad.append(f"recorded #{k + 1} repeats fed #{b}")
            elif b != (a + 1) % len(fed):
                # Frames lost before the recorder (a driver or pipeline drop) are fine if it resumed at an IDR.
                if any(t == 5 for t, _ in rec_aus[k + 1][2]):
                    resumed += 1
                else:
                    skips += 1
                    where_bad.append(f"recorded #{k + 1} is fed #{b} after #{a}")
        first_idr = bool(rec_aus) and any(t == 5 for t, _ in rec_aus[0][2])
        sps_pps = sum(1 for a in rec_aus for t, _ in a[2] if t in (7, 8))
        ok = len(rec) == expected and unmatched == 0 and repeats == 0 and skips == 0 and first_idr and len(fed) > 0
        print(
            f"{'ok' if ok else 'bad'}: {len(rec)} access units (expected {expected}), {len(rec) - unmatched} bit-identical to fed ones"
            f" (fed {len(fed)}, from #{idx[0] if idx else None}), {unmatched} unmatched, {repeats} repeated, {skips} skipped,"
            f" {resumed} gaps resumed at an IDR,"
            f" first is {'an IDR' if first_idr else 'not an IDR'}, {sps_pps} SPS/PPS"
            + (f" ({'; '.join(where_bad[:5])})" if where_bad else ""))
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
