#!/usr/bin/env python3
"""Comparison benchmark: the library loop against a raw C loop and GStreamer, on the same frames, with the same
OpenH264 settings and the same threading.

  python3 Benchmarks/compare/compare.py [--reps 9] [--sizes 720p,1080p] [--formats YUYV,MJPG] [--series 1t,2t]
                                        [--check-only] [--callgrind [--sim]] [--async] [--no-gst]
  python3 Benchmarks/compare/compare.py --scaled [540p,270p] [--reps 9] [--callgrind] [--content pattern|natural]
                                        (see scaled() below)

Settings (SETTINGS below), the same for every contender and set explicitly: camera usage, 2 Mbps at 720p / 4 Mbps
at 1080p with a 1.5x cap, bitrate rate control, complexity low, one OpenH264 thread, one slice, IDR every 60
frames, CAVLC, no frame skipping, no denoising, background detection on, adaptive quantisation asked for (OpenH264
2.3.1 turns it off for everyone), scene-change detection on, no long-term reference, one spatial and one temporal
layer, deblocking on, constrained baseline, 30 fps. The library takes complexity, bitrate, cap, intra period,
threads and frame skipping through H264Encoder.Settings and sets the rest in H264Encoder.apply; the C loop sets all
of them; GStreamer gets every one that openh264enc has a property for (the rest are fixed in its source). Before
timing anything, the script runs every contender once and reads back what OpenH264 holds after InitializeExt
(GetOption ENCODER_OPTION_SVC_ENCODE_PARAM_EXT): compare-loop and loop.c print it themselves, GStreamer prints it
through gstparams.c (LD_PRELOAD). It prints each contender's line, and refuses to report if the lines differ from
each other or from SETTINGS.

Two series, the same threading within each:
  1t  one thread converts and encodes each frame in turn
      library-1t  compare-loop run-inline: replay camera -> delegate on the camera's thread (delivery = .captureThread)
                  -> FrameConverter -> H264Encoder -> AnnexBWriter
      c-1t        loop.c stages=1: libyuv (YUY2ToI420 / MJPGToI420) + OpenH264
      gst-1t      filesrc ! rawvideoparse|matroskademux ! jpegdec ! videoconvert ! openh264enc ! filesink
                  (one streaming thread)
  2t  the conversion of frame N+1 overlaps the encoding of frame N, one picture handed over
      library-2t  compare-loop run: ... FrameConverter on the camera's thread -> EncoderThread (H264Encoder -> AnnexBWriter)
      c-2t        loop.c stages=2: a convert thread and an encode thread, one picture handed over
      gst-2t      the same pipeline with `queue max-size-buffers=1` between videoconvert and openh264enc
  --async adds the library fed through the capturer's delivery thread and frames() (an async consumer):
      async-1t    compare-loop run-inline-async (the encoder on the consumer's task)
      async-2t    compare-loop run-async (the consumer converts, EncoderThread encodes)

Frames are generated once (the fixture pattern with noise 3, fresh noise every frame). Each repetition runs every
contender in a rotated order, twice: over all frames and over the first 10; the difference of the two wall times
divided by the difference in frames is the time per frame (process start-up and set-up cancel out). Medians over
the repetitions; `library x` = the other's ms/frame over the library's in the same series (above 1: the library is
faster); `paired x` = the median of that ratio taken within each repetition (the two ran seconds apart, so a slow
spell of a shared machine hits both: steadier than the ratio of medians), with the IQR and, from 6 repetitions,
a distribution-free 95% confidence interval of that median (order statistics). The bytes of each contender's H.264 (all
frames) are printed too: equal settings give equal sizes (the library and C are byte-identical). --callgrind counts instructions instead (valgrind, same difference method, user
space only: the kernel's share, e.g. context switches, is not in it). valgrind 3.19 dies on libdispatch's
sigsuspend (it edits the mask, which is read-only there): the Swift contender runs with sigsuspend-shim.c preloaded.
--sim (with --callgrind) also simulates the caches and the branch predictor: data references, first- and last-level
misses, mispredicted branches and an estimate of cycles from them per frame (simulated()), and for the 2t series
each of the two busiest threads on its own (the pace of two overlapping stages is the busier one's). A model of a
machine, deterministic: on a shared VM with no cycle counters it resolves what wall time cannot.
"""
import argparse, hashlib, os, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
SIZES = {"720p": (1280, 720, 2_000_000), "1080p": (1920, 1080, 4_000_000)}
HEAD = 10
SERIES = {"1t": ["library-1t", "c-1t", "gst-1t"], "2t": ["library-2t", "c-2t", "gst-2t"]}
ASYNC = {"1t": "async-1t", "2t": "async-2t"}


def settings(label):
    """The encoder settings every contender gets, as OpenH264 should report them back (params.h's keys)."""
    w, h, rate = SIZES[label]
    return {
        "usage": "camera", "size": f"{w}x{h}", "max-fps": "30", "bitrate": str(rate), "max-bitrate": str(rate * 3 // 2),
        "layer-bitrate": str(rate), "layer-max-bitrate": str(rate * 3 // 2), "rc": "bitrate", "complexity": "low",
        "threads": "1", "slice-mode": "single", "intra-period": "60", "entropy": "cavlc", "frame-skip": "off",
        "denoise": "off", "background-detection": "on", "adaptive-quant": "on", "scene-change": "on", "ltr": "off",
        "spatial-layers": "1", "temporal-layers": "1", "deblocking": "on", "profile": "baseline",
    }


# What OpenH264 2.3.1 reports whatever it is asked: ParamValidation turns adaptive quantisation off ("algorithms
# need to be refactored"). The read-back must show these values for everyone.
FORCED_BY_OPENH264 = {"adaptive-quant": "off"}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def build(work):
    sh(["swift", "build", "-c", "release", "--product", "compare-loop"], cwd=BENCH, stdout=subprocess.DEVNULL)
    binpath = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=BENCH, check=True,
                             capture_output=True, text=True).stdout.strip()
    cc = shutil.which("cc") or shutil.which("gcc")
    loop, preload = os.path.join(work, "loop"), os.path.join(work, "gstparams.so")
    sh([cc, "-O2", "-o", loop, os.path.join(HERE, "loop.c"), "-lyuv", "-ljpeg", "-lopenh264", "-lpthread", "-lm"])
    sh([cc, "-O2", "-shared", "-fPIC", "-o", preload, os.path.join(HERE, "gstparams.c"), "-ldl", "-lm"])
    sh([cc, "-O2", "-shared", "-fPIC", "-o", os.path.join(work, "sigsuspend-shim.so"), os.path.join(HERE, "sigsuspend-shim.c")])
    return os.path.join(binpath, "compare-loop"), loop, preload


def generate(lib, work, fmt, label, frames):
    w, h, _ = SIZES[label]
    ext = "yuyv" if fmt == "YUYV" else "mjpg"
    full = os.path.join(work, f"{label}-{frames}.{ext}")
    head = os.path.join(work, f"{label}-head.{ext}")
    for path, n in ((full, frames), (head, HEAD)):
        if not os.path.exists(path):
            sh([lib, "generate", fmt, f"{w}x{h}", str(n), path, "3"])
        if fmt == "MJPG" and not os.path.exists(path + ".mkv"):
            # GStreamer needs timestamps: the same JPEGs, copied into Matroska at 30 fps.
            sh(["ffmpeg", "-v", "error", "-y", "-f", "mjpeg", "-framerate", "30", "-i", path, "-c", "copy", "-f", "matroska", path + ".mkv"])
    return full, head


def commands(lib, cloop, fmt, label, path, out):
    """Each contender's command line for one input file, writing its H.264 to out[name]."""
    w, h, rate = SIZES[label]
    s = settings(label)
    # The settings the library's H264Encoder.Settings and loop.c take on the command line (loop.c sets the rest
    # explicitly to the same values, the library in H264Encoder.apply); the read-back checks all of them.
    args = [f"complexity={s['complexity']}", f"max-bitrate={s['max-bitrate']}", f"intra-period={s['intra-period']}",
            f"threads={s['threads']}", f"frame-skip={s['frame-skip']}"]
    on = {"on": "true", "off": "false"}
    enc = ["openh264enc", f"usage-type={s['usage']}", f"bitrate={s['bitrate']}", f"max-bitrate={s['max-bitrate']}",
           f"rate-control={s['rc']}", f"complexity={s['complexity']}", f"multi-thread={s['threads']}", "slice-mode=n-slices",
           "num-slices=1", f"gop-size={s['intra-period']}", f"enable-frame-skip={on[s['frame-skip']]}",
           f"enable-denoise={on[s['denoise']]}", f"background-detection={on[s['background-detection']]}",
           f"adaptive-quantization={on[s['adaptive-quant']]}", f"scene-change-detection={on[s['scene-change']]}",
           f"deblocking={s['deblocking']}", "!", "video/x-h264,profile=constrained-baseline"]
    if fmt == "YUYV":
        src = ["filesrc", f"location={path}", f"blocksize={w * h * 2}", "!", "rawvideoparse", "format=yuy2",
               f"width={w}", f"height={h}", "framerate=30/1"]
    else:
        src = ["filesrc", f"location={path}.mkv", "!", "matroskademux", "!", "jpegdec"]
    convert = ["!", "videoconvert", "n-threads=1", "!", "video/x-raw,format=I420", "!"]
    queue = ["queue", "max-size-buffers=1", "max-size-bytes=0", "max-size-time=0", "!"]
    gst = lambda name, q: ["gst-launch-1.0", "-q"] + src + convert + q + enc + ["!", "filesink", f"location={out[name]}"]
    return {
        "library-1t": [lib, "run-inline", fmt, f"{w}x{h}", path, str(rate), out["library-1t"]] + args,
        "library-2t": [lib, "run", fmt, f"{w}x{h}", path, str(rate), out["library-2t"]] + args,
        "async-1t": [lib, "run-inline-async", fmt, f"{w}x{h}", path, str(rate), out["async-1t"]] + args,
        "async-2t": [lib, "run-async", fmt, f"{w}x{h}", path, str(rate), out["async-2t"]] + args,
        "c-1t": [cloop, fmt, str(w), str(h), path, str(rate), out["c-1t"], "stages=1"] + args,
        "c-2t": [cloop, fmt, str(w), str(h), path, str(rate), out["c-2t"], "stages=2"] + args,
        "gst-1t": gst("gst-1t", []),
        "gst-2t": gst("gst-2t", queue),
    }


def effective(cmd, preload):
    """The contender's parameters as OpenH264 reports them (its one `effective:` line on stderr), as a dict."""
    env = dict(os.environ)
    if cmd[0] == "gst-launch-1.0":
        env["LD_PRELOAD"] = preload
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    lines = [l for l in p.stderr.splitlines() if l.startswith("effective: ")]
    if len(lines) != 1:
        sys.exit(f"expected one 'effective:' line from {cmd[0]}, got {len(lines)}:\n{p.stderr}")
    line = lines[0][len("effective: "):]
    return line, dict(kv.split("=", 1) for kv in line.split())


def check(names, cmds, label, preload):
    """Prints every contender's effective parameters; exits if they differ from each other or from SETTINGS."""
    want = dict(settings(label), **FORCED_BY_OPENH264)
    got = {n: effective(cmds[n], preload) for n in names}
    for n in names:
        print(f"  {n:<11} {got[n][0]}")
    gst = next((cmds[n] for n in names if n.startswith("gst")), None)
    if gst:
        # The element's properties as set on the command line (the read-back above is what OpenH264 made of them).
        props = gst[gst.index("openh264enc") + 1:]
        print(f"  {'openh264enc':<11} {' '.join(props[:props.index('!')])}")
    first = got[names[0]][1]
    problems = []
    for n in names:
        d = got[n][1]
        for k in sorted(set(first) | set(d)):
            if d.get(k) != first.get(k):
                problems.append(f"{n}: {k}={d.get(k)} but {names[0]} has {k}={first.get(k)}")
        for k, v in want.items():
            if d.get(k) != v:
                problems.append(f"{n}: {k}={d.get(k)}, asked for {k}={v}")
    if problems:
        print("\n".join(problems))
        sys.exit("refusing to report: the contenders' encoder settings differ")
    print("  the same for every contender (only adaptive-quant differs from what was asked: OpenH264 turns it off)")


def timed(cmd):
    """Wall seconds and CPU seconds (user + sys) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime


def callgrind(cmd, work, sim=False):
    """User-space instructions of one run (all threads and child processes); with `sim`, the events of callgrind's
    cache and branch simulation (SIM_EVENTS) instead, as a dict for the whole run and one for each thread (by the
    thread's number: threads are numbered in the order they start)."""
    out = os.path.join(work, "callgrind.out")
    pre = []
    if cmd[0].endswith("compare-loop"):
        pre = ["env", f"LD_PRELOAD={os.path.join(work, 'sigsuspend-shim.so')}"]
    opts = ["--cache-sim=yes", "--branch-sim=yes", "--separate-threads=yes"] + SIM_LL if sim else []
    for f in os.listdir(work):  # left by an interrupted run: they would be counted as this one's
        if f.startswith("callgrind.out."):
            os.remove(os.path.join(work, f))
    sh(["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}.%p"] + opts + pre + cmd,
       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = dict.fromkeys(SIM_EVENTS, 0)
    threads = {}
    for f in sorted(os.listdir(work)):
        if f.startswith("callgrind.out."):
            path = os.path.join(work, f)
            thread = threads.setdefault(f.rsplit("-", 1)[-1] if "-" in f else "1", dict.fromkeys(SIM_EVENTS, 0))
            with open(path) as fh:
                events = ["Ir"]
                for line in fh:
                    if line.startswith("events:"):
                        events = line.split()[1:]
                    if line.startswith("summary:") or line.startswith("totals:"):
                        for e, v in zip(events, line.split()[1:]):
                            total[e] = total.get(e, 0) + int(v)
                            thread[e] = thread.get(e, 0) + int(v)
                        break
            os.remove(path)
    return (total, threads) if sim else total["Ir"]


def core_l2():
    """valgrind's --LL option for this machine's per-core second-level cache (sysfs), or [] where sysfs has none.
    valgrind itself would simulate the last level, here a 300 MB L3 shared with the machine's other tenants: a frame
    fits in it, so only first touches would miss. A core's own L2 is what a frame does not fit in."""
    base = "/sys/devices/system/cpu/cpu0/cache/index2/"
    try:
        read = lambda k: open(base + k).read().strip()
        size = read("size")
        size = int(size[:-1]) * 1024 if size.endswith("K") else int(size[:-1]) * 1048576 if size.endswith("M") else int(size)
        return [f"--LL={size},{int(read('ways_of_associativity'))},{int(read('coherency_line_size'))}"]
    except (OSError, ValueError):
        return []


SIM_LL = core_l2()
SIM_EVENTS = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim"]


def simulated(full, head, frames):
    """`full` and `head`: callgrind(..., sim=True) of the two runs. Returns the per-frame figures of the whole run,
    with "stages": those of its two busiest threads (by estimated cycles; the difference method thread by thread)."""
    whole = per_frame(full[0], head[0], frames)
    # The threads that do work (over 5 M instructions even in the short run), in the order they started, matched
    # one to one between the two runs; short-lived helper threads (a few thousand instructions) come and go between
    # runs and would shift the numbering.
    busy = lambda run: [run[k] for k in sorted(run, key=int) if run[k]["Ir"] > 5_000_000]
    f, h = busy(full[1]), busy(head[1])
    threads = [per_frame(a, b, frames) for a, b in zip(f, h)] if len(f) == len(h) else []
    whole["stages"] = sorted(threads, key=lambda d: -d["cycles"])[:2]
    return whole


def per_frame(full, head, frames):
    """Per frame (the difference method) from callgrind's simulation: instructions, data references, first-level
    and last-level misses, mispredicted branches, and an estimate of cycles from them: L1 hits + 5 x LL hits + 35 x
    memory accesses (the weights of Itamar Turner-Trauring's "consistent benchmarking in CI" and of iai; a model of
    a machine, not this one). Mispredicts are shown beside it, not weighted in."""
    d = {e: (full.get(e, 0) - head.get(e, 0)) / (frames - HEAD) for e in SIM_EVENTS}
    refs = d["Ir"] + d["Dr"] + d["Dw"]
    l1m = d["I1mr"] + d["D1mr"] + d["D1mw"]
    llm = d["ILmr"] + d["DLmr"] + d["DLmw"]
    d["L1m"], d["LLm"], d["Bm"] = l1m, llm, d["Bcm"] + d["Bim"]
    d["cycles"] = (refs - l1m) + 5 * (l1m - llm) + 35 * llm
    return d


SCALED = {"540p": (960, 540), "270p": (480, 270)}

# --content natural: real photographs that a Debian package ships (mate-backgrounds 1.26, "nature": a storm over a
# road, raindrops on leaves, dune grass), each panned slowly (a 1920x1080 window moving diagonally across the
# picture scaled to cover 2112x1320, about 4 px a frame) for a third of the frames, the way a camera pans.
PHOTOS_PACKAGE = "mate-backgrounds"
PHOTOS = ["/usr/share/backgrounds/mate/nature/" + f for f in ("Storm.jpg", "RainDrops.jpg", "Dune.jpg")]


def natural(work, frames):
    """The 1080p MJPEG frames of --content natural: ffmpeg pans across each of PHOTOS (to RGB), and libjpeg-turbo's
    cjpeg encodes every frame the way the pattern's frames are encoded (FormatWriter: libjpeg-turbo, quality 85,
    4:2:0, the standard Huffman tables, the accurate integer DCT), so only the content differs. Written as
    compare-loop reads MJPEG (JPEGs back to back and a .idx of their lengths), all frames and the first HEAD."""
    full = os.path.join(work, f"natural-1080p-{frames}.mjpg")
    head = os.path.join(work, "natural-1080p-head.mjpg")
    if not os.path.exists(head + ".mkv"):  # written last
        missing = [p for p in PHOTOS if not os.path.exists(p)]
        if missing:
            sys.exit(f"missing {', '.join(missing)}: apt-get install {PHOTOS_PACKAGE} (or Scripts/install-deps.sh bench)")
        if not shutil.which("cjpeg"):
            sys.exit("missing cjpeg: apt-get install libjpeg-turbo-progs (or Scripts/install-deps.sh bench)")
        w, h, size = 1920, 1080, 1920 * 1080 * 3
        jpegs = []
        for k, photo in enumerate(PHOTOS):
            n = (k + 1) * frames // len(PHOTOS) - k * frames // len(PHOTOS)
            pan = (f"scale=2112:1320:force_original_aspect_ratio=increase,crop={w}:{h}:x='(iw-{w})*n/{max(n - 1, 1)}'"
                   f":y='(ih-{h})*n/{max(n - 1, 1)}',format=rgb24")
            ff = subprocess.Popen(["ffmpeg", "-v", "error", "-loop", "1", "-framerate", "30", "-i", photo, "-vf", pan,
                                   "-frames:v", str(n), "-f", "rawvideo", "-"], stdout=subprocess.PIPE)
            for i in range(n):
                rgb = ff.stdout.read(size)
                if len(rgb) != size:
                    sys.exit(f"ffmpeg gave {i} frames of {photo}, not {n}")
                jpegs.append(subprocess.run(["cjpeg", "-quality", "85", "-sample", "2x2,1x1,1x1", "-dct", "int"],
                                            input=f"P6 {w} {h} 255\n".encode() + rgb, check=True, capture_output=True).stdout)
            if ff.wait() != 0:
                sys.exit(f"ffmpeg failed on {photo}")
        for path, some in ((full, jpegs), (head, jpegs[:HEAD])):
            with open(path, "wb") as f:
                f.write(b"".join(some))
            with open(path + ".idx", "wb") as f:
                f.write(b"".join(len(j).to_bytes(4, "little") for j in some))
            sh(["ffmpeg", "-v", "error", "-y", "-f", "mjpeg", "-framerate", "30", "-i", path, "-c", "copy", "-f", "matroska", path + ".mkv"])
    return full, head


def jpeg_summary(path):
    """The first JPEG's chroma subsampling (from its SOF) and the mean bytes a frame, from the .idx."""
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    with open(path + ".idx", "rb") as f:
        idx = f.read()
    lengths = [int.from_bytes(idx[i:i + 4], "little") for i in range(0, len(idx) - 3, 4)]
    i, sampling = 2, "?"
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            comps = data[i + 9]
            factors = [data[i + 11 + 3 * c] for c in range(comps)]
            hv = [(f >> 4, f & 15) for f in factors]
            sampling = {((2, 2), (1, 1), (1, 1)): "4:2:0", ((2, 1), (1, 1), (1, 1)): "4:2:2",
                        ((1, 1), (1, 1), (1, 1)): "4:4:4"}.get(tuple(hv), str(hv))
            break
        i += 2 + length
    return sampling, sum(lengths) / len(lengths) / 1024


def scaled(a, lib):
    """--scaled: 1080p MJPEG to a smaller I420 picture, decode and scale only (no encoder), one thread each.
    library       compare-loop decode: FrameConverter with `scale`, the JPEG decoded at 1/2 or 1/4 by the reduced
                  inverse DCT straight into the planes (at 540p and 270p nothing is left to scale)
    library-full  compare-loop decode ... full: a full-size decode, then libyuv's I420Scale (box filter)
    gst           filesrc ! matroskademux ! jpegdec idct-method=ifast ! videoscale n-threads=1
                  ! video/x-raw,format=I420,width=W,height=H ! fakesink (jpegdec gives I420 for these JPEGs)
    The same JPEGs for everyone (150 1080p MJPEG frames: the fixture pattern with noise 3, or with --content natural
    the photographs of natural()), the fast integer IDCT everywhere, the same output size and format; the same
    difference method as the main mode."""
    frames = a.frames or 150
    if a.content == "natural":
        full, head = natural(a.work, frames)
        what = "natural: " + ", ".join(os.path.basename(p) for p in PHOTOS) + f" from Debian's {PHOTOS_PACKAGE}, panned"
    else:
        full, head = generate(lib, a.work, "MJPG", "1080p", frames)
        what = "pattern: the fixture's test pattern, noise 3"
    sampling, kb = jpeg_summary(full)
    names = ["library", "library-full", "gst"]
    print(f"content {what}; JPEG {sampling}, {kb:.0f} KB a frame on average")
    print(f"1080p MJPEG ({frames} frames) to a smaller I420 picture; " + ("M Ir/frame" if a.callgrind else "ms/frame"))
    print(f"{'output':<10}{'contender':<14}{'per frame':>10}{'IQR':>16}{'gst × ':>8}"
          + ("" if a.callgrind else "   paired gst × (IQR)"))
    for label in a.scaled.split(","):
        w, h = SCALED[label]
        def cmd(path):
            return {
                "library": [lib, "decode", "MJPG", "1920x1080", path, f"{w}x{h}"],
                "library-full": [lib, "decode", "MJPG", "1920x1080", path, f"{w}x{h}", "full"],
                "gst": ["gst-launch-1.0", "-q", "filesrc", f"location={path}.mkv", "!", "matroskademux", "!", "jpegdec",
                        "idct-method=ifast", "!", "videoscale", "n-threads=1", "!",
                        f"video/x-raw,format=I420,width={w},height={h}", "!", "fakesink", "sync=false"],
            }
        cf, ch = cmd(full), cmd(head)
        per = {n: [] for n in names}
        for rep in range(1 if a.callgrind else a.reps):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for n in order:
                if a.callgrind:
                    per[n].append((callgrind(cf[n], a.work) - callgrind(ch[n], a.work)) / (frames - HEAD) / 1e6)
                else:
                    wf, _ = timed(cf[n]); wh, _ = timed(ch[n])
                    per[n].append((wf - wh) / (frames - HEAD) * 1000)
        med = {n: statistics.median(per[n]) for n in names}
        for n in names:
            q = statistics.quantiles(per[n], n=4) if len(per[n]) >= 2 else [per[n][0]] * 3
            paired = ""
            if not a.callgrind and n != "gst" and len(per[n]) >= 2:
                # gst's time over this contender's within each repetition (they ran seconds apart), then the median
                pairs = [g / x for g, x in zip(per["gst"], per[n]) if x > 0]
                pq = statistics.quantiles(pairs, n=4)
                paired = f"   {statistics.median(pairs):.3f} ({pq[0]:.3f}–{pq[2]:.3f})"
            print(f"{label:<10}{n:<14}{med[n]:>10.3f}{f'{q[0]:.3f}–{q[2]:.3f}':>16}{med['gst'] / med[n]:>8.2f}{paired}")
        sys.stdout.flush()


def median_ci(xs):
    """A distribution-free 95% confidence interval of the median (order statistics, binomial; n >= 6), or None."""
    n = len(xs)
    if n < 6:
        return None
    k = max(0, int((n - 1.96 * n ** 0.5) / 2))
    v = sorted(xs)
    return v[k], v[n - 1 - k]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--sizes", default="720p,1080p")
    ap.add_argument("--formats", default="YUYV,MJPG")
    ap.add_argument("--series", default="1t,2t")
    ap.add_argument("--frames", type=int, default=0, help="frames per run (default 150 at 720p, 90 at 1080p; 30 with --callgrind; --scaled: 150 either way)")
    ap.add_argument("--check-only", action="store_true", help="print and check the effective settings, time nothing")
    ap.add_argument("--callgrind", action="store_true", help="count instructions with valgrind instead of timing")
    ap.add_argument("--sim", action="store_true",
                    help="with --callgrind: also simulate the caches and branch predictor and print misses, mispredicts "
                         "and an estimate of cycles (see simulated())")
    ap.add_argument("--async", dest="asyncs", action="store_true",
                    help="also run the library through the delivery thread and frames() (async-1t, async-2t)")
    ap.add_argument("--no-gst", action="store_true", help="leave GStreamer out")
    ap.add_argument("--scaled", nargs="?", const="540p,270p", default=None,
                    help="instead: 1080p MJPEG decoded to 540p and/or 270p, the library's reduced DCT against a full decode "
                         "+ scale and GStreamer's jpegdec ! videoscale (see scaled())")
    ap.add_argument("--content", choices=["pattern", "natural"], default="pattern",
                    help="with --scaled: the frames to decode, the fixture pattern (noise 3) or a pan across photographs "
                         "that Debian's mate-backgrounds ships (see natural())")
    ap.add_argument("--work", default="/tmp/svc-compare")
    a = ap.parse_args()
    a.callgrind = a.callgrind or a.sim
    if not 1 <= a.reps <= 100: sys.exit("--reps must be 1...100")
    if a.content != "pattern" and not a.scaled: sys.exit("--content natural goes with --scaled")
    series = a.series.split(",")
    if any(s not in SERIES for s in series): sys.exit("--series takes 1t and/or 2t")
    if a.asyncs:
        for s in SERIES:
            SERIES[s].append(ASYNC[s])
    if a.no_gst:
        for s in SERIES:
            SERIES[s] = [n for n in SERIES[s] if not n.startswith("gst")]
    names = [n for s in series for n in SERIES[s]]
    os.makedirs(a.work, exist_ok=True)
    lib, cloop, preload = build(a.work)
    if a.scaled:
        return scaled(a, lib)
    everyone = [n for s in SERIES.values() for n in s] + list(ASYNC.values()) + [f"gst-{s}" for s in SERIES]
    outFull = {n: os.path.join(a.work, f"out-{n}.h264") for n in everyone}
    outHead = {n: os.path.join(a.work, f"out-{n}-head.h264") for n in outFull}
    summary = []
    pairedSummary = {}
    for label in a.sizes.split(","):
        for fmt in a.formats.split(","):
            frames = a.frames or (30 if a.callgrind else (150 if label == "720p" else 90))
            if frames <= HEAD: sys.exit(f"--frames must exceed {HEAD}")
            full, head = generate(lib, a.work, fmt, label, frames)
            cf, ch = commands(lib, cloop, fmt, label, full, outFull), commands(lib, cloop, fmt, label, head, outHead)
            print(f"\n{label} {fmt}: effective OpenH264 parameters, read back after InitializeExt")
            check(names, ch, label, preload)
            if a.check_only:
                continue
            per = {n: [] for n in names}
            cpu = {n: [] for n in names}
            sims = {}
            for rep in range(1 if a.callgrind else a.reps):
                order = names[rep % len(names):] + names[:rep % len(names)]
                for n in order:
                    if a.sim:
                        sims[n] = simulated(callgrind(cf[n], a.work, True), callgrind(ch[n], a.work, True), frames)
                        per[n].append(sims[n]["Ir"])
                    elif a.callgrind:
                        per[n].append((callgrind(cf[n], a.work) - callgrind(ch[n], a.work)) / (frames - HEAD))
                    else:
                        wf, cpf = timed(cf[n]); wh, cph = timed(ch[n])
                        per[n].append((wf - wh) / (frames - HEAD) * 1000)
                        cpu[n].append((cpf - cph) / (frames - HEAD) * 1000)
            med = {n: statistics.median(per[n]) for n in names}
            size = {n: os.path.getsize(outFull[n]) for n in names}
            sha = {n: digest(outFull[n]) for n in names}
            print(f"{'input':<12}{'contender':<12}{'ms/frame':>9}{'IQR':>16}{'fps':>8}{'CPU ms/frame':>14}{'H.264 bytes':>13}"
                  f"{'vs library':>12}   library ×" + ("" if a.callgrind else "   paired × (IQR)"))
            for s in series:
                base = f"library-{s}"
                for n in SERIES[s]:
                    if n not in names:
                        continue
                    q = statistics.quantiles(per[n], n=4) if len(per[n]) >= 2 else [per[n][0]] * 3
                    ref = base
                    ratio = "" if n == ref else f"{med[n] / med[ref]:.3f}"
                    same = "identical" if sha[n] == sha[ref] else f"{(size[n] - size[ref]) / size[ref] * 100:+.2f}%"
                    same = "" if n == ref else same
                    if a.callgrind:
                        print(f"{label + ' ' + fmt:<12}{n:<12}{med[n] / 1e6:>8.2f}M Ir/frame{'':>22}{size[n]:>13}{same:>12}   {ratio}")
                    else:
                        # Paired: the ratio within each repetition (the two ran seconds apart, so a slow spell of a
                        # shared machine hits both alike), then the median of those ratios.
                        pairs = [o / l for o, l in zip(per[n], per[ref])]
                        pq = statistics.quantiles(pairs, n=4) if len(pairs) >= 2 else [pairs[0]] * 3
                        ci = median_ci(pairs)
                        paired = "" if n == ref else (f"   {statistics.median(pairs):.3f} ({pq[0]:.3f}–{pq[2]:.3f})"
                                                      + (f" CI95 {ci[0]:.3f}–{ci[1]:.3f}" if ci else ""))
                        print(f"{label + ' ' + fmt:<12}{n:<12}{med[n]:>9.3f}{f'{q[0]:.3f}–{q[2]:.3f}':>16}{1000 / med[n]:>8.1f}"
                              f"{statistics.median(cpu[n]):>14.3f}{size[n]:>13}{same:>12}   {ratio:<5}{paired}")
                        if n != ref:
                            pairedSummary[(f"{label} {fmt}", n)] = statistics.median(pairs)
            if a.sim:
                print(f"simulated: the first-level caches valgrind reads from the CPU, {' '.join(SIM_LL) or 'its own LL'} as the last level")
                print(f"{'input':<12}{'contender':<12}{'M Ir':>8}{'M D refs':>10}{'k L1 miss':>11}{'k LL miss':>11}"
                      f"{'k mispred.':>12}{'M est. cycles':>15}   library × (est. cycles, L1 miss, LL miss, mispred.)")
                for s_ in series:
                    ref = sims[f"library-{s_}"]
                    for n in SERIES[s_]:
                        if n not in sims:
                            continue
                        d = sims[n]
                        ratio = "" if d is ref else "   " + ", ".join(
                            f"{d[k] / ref[k]:.3f}" if ref[k] else "-" for k in ("cycles", "L1m", "LLm", "Bm"))
                        print(f"{label + ' ' + fmt:<12}{n:<12}{d['Ir'] / 1e6:>8.2f}{(d['Dr'] + d['Dw']) / 1e6:>10.2f}"
                              f"{d['L1m'] / 1e3:>11.1f}{d['LLm'] / 1e3:>11.1f}{d['Bm'] / 1e3:>12.1f}{d['cycles'] / 1e6:>15.2f}{ratio}")
                        if s_ == "2t":
                            # Two threads overlap: the busier stage sets the pace (callgrind runs threads one at a time,
                            # so this is each thread's own work, not their overlap).
                            st = d["stages"]
                            if len(st) < 2 or len(ref["stages"]) < 2:
                                print(f"{'':<12}{'  stages':<12}not matched: the runs' busy threads differ")
                                continue
                            print(f"{'':<12}{'  stages':<12}" + " / ".join(f"{t['cycles'] / 1e6:.2f}" for t in st)
                                  + " M est. cycles (the two busiest threads)"
                                  + ("" if d is ref else f"; busier stage, library × {st[0]['cycles'] / ref['stages'][0]['cycles']:.3f}"))
            summary.append((f"{label} {fmt}", med))
            sys.stdout.flush()
    if summary:
        unit = "M Ir/frame" if a.callgrind else "ms/frame"
        scale = 1e6 if a.callgrind else 1
        print(f"\nSummary (median {unit}; library × = other / library, above 1 the library is faster)")
        for s in series:
            lib_, others = SERIES[s][0], SERIES[s][1:]
            paired = not a.callgrind
            print(f"{s}: {'input':<12}{lib_:>11}" + "".join(f"{n:>10}" for n in others) + "".join(f"{'× ' + n:>12}" for n in others)
                  + ("".join(f"{'paired × ' + n:>18}" for n in others) if paired else ""))
            for name, med in summary:
                print(f"  - {name:<12}{med[lib_] / scale:>11.2f}" + "".join(f"{med[n] / scale:>10.2f}" for n in others)
                      + "".join(f"{med[n] / med[lib_]:>12.3f}" for n in others)
                      + ("".join(f"{pairedSummary.get((name, n), float('nan')):>18.3f}" for n in others) if paired else ""))


if __name__ == "__main__":
    main()
