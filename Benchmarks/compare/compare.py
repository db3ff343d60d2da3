#!/usr/bin/env python3
"""Comparison benchmark: the library loop against a raw C loop and GStreamer, on the same frames.

  python3 Benchmarks/compare/compare.py [--reps 5] [--sizes 720p,1080p] [--formats YUYV,MJPG] [--callgrind]

Contenders (same frames, same OpenH264 settings: camera usage, bitrate RC, 1 thread, one slice, IDR every
60 frames, CAVLC, 2 Mbps at 720p / 4 Mbps at 1080p):
  library    compare-loop run: replay camera -> frames() -> FrameConverter -> EncoderThread (H264Encoder -> AnnexBWriter):
             the conversion of frame N+1 overlaps the encoding of frame N (two cores)
  library-1t compare-loop run-inline: the same loop on one thread (convert, encode, write in turn)
  c          loop.c: libyuv (YUY2ToI420 / MJPGToI420) + OpenH264, written for this comparison
  gstreamer  rawvideoparse ! videoconvert ! openh264enc (YUYV); matroskademux ! jpegdec ! videoconvert ! openh264enc (MJPEG)

Frames are generated once (the fixture pattern with noise 3). Each repetition runs every contender in a
rotated order, twice: over all frames and over the first 10; the difference of the two wall times divided
by the difference in frames is the time per frame (process start-up and set-up cancel out). Medians over
the repetitions, and ratios (throughput library / other). --callgrind counts instructions instead (valgrind,
same difference method), which a noisy machine does not disturb.
"""
import argparse, os, resource, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
SIZES = {"720p": (1280, 720, 2_000_000), "1080p": (1920, 1080, 4_000_000)}
HEAD = 10

def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)

def build(work):
    sh(["swift", "build", "-c", "release", "--product", "compare-loop"], cwd=BENCH, stdout=subprocess.DEVNULL)
    binpath = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=BENCH, check=True,
                             capture_output=True, text=True).stdout.strip()
    cc = shutil.which("cc") or shutil.which("gcc")
    sh([cc, "-O2", "-o", os.path.join(work, "loop"), os.path.join(HERE, "loop.c"), "-lyuv", "-ljpeg", "-lopenh264"])
    return os.path.join(binpath, "compare-loop"), os.path.join(work, "loop")

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
    w, h, rate = SIZES[label]
    enc = ["openh264enc", "usage-type=camera", f"bitrate={rate}", f"max-bitrate={rate * 3 // 2}", "rate-control=bitrate",
           "gop-size=60", "enable-frame-skip=false", "enable-denoise=false", "background-detection=true",
           "adaptive-quantization=true", "multi-thread=1", "slice-mode=n-slices", "num-slices=1", "complexity=medium"]
    if fmt == "YUYV":
        src = ["filesrc", f"location={path}", f"blocksize={w * h * 2}", "!", "rawvideoparse", "format=yuy2",
               f"width={w}", f"height={h}", "framerate=30/1"]
    else:
        src = ["filesrc", f"location={path}.mkv", "!", "matroskademux", "!", "jpegdec"]
    gst = ["gst-launch-1.0", "-q"] + src + ["!", "videoconvert", "!", "video/x-raw,format=I420", "!"] + enc + ["!", "filesink", f"location={out}"]
    return {
        "library": [lib, "run", fmt, f"{w}x{h}", path, str(rate), out],
        "library-1t": [lib, "run-inline", fmt, f"{w}x{h}", path, str(rate), out],
        "c": [cloop, fmt, str(w), str(h), path, str(rate), out],
        "gstreamer": gst,
    }

def timed(cmd):
    """Wall seconds and CPU seconds (user + sys) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"failed: {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime

def callgrind(cmd, work):
    out = os.path.join(work, "callgrind.out")
    sh(["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}.%p"] + cmd,
       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = 0
    for f in os.listdir(work):
        if f.startswith("callgrind.out."):
            path = os.path.join(work, f)
            with open(path) as fh:
                for line in fh:
                    if line.startswith("summary:") or line.startswith("totals:"):
                        total += int(line.split()[1]); break
            os.remove(path)
    return total

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="720p,1080p")
    ap.add_argument("--formats", default="YUYV,MJPG")
    ap.add_argument("--frames", type=int, default=0, help="frames per run (default 150 at 720p, 90 at 1080p; 30 with --callgrind)")
    ap.add_argument("--callgrind", action="store_true", help="count instructions with valgrind instead of timing")
    ap.add_argument("--work", default="/tmp/svc-compare")
    a = ap.parse_args()
    if not 1 <= a.reps <= 100: sys.exit("--reps must be 1...100")
    os.makedirs(a.work, exist_ok=True)
    lib, cloop = build(a.work)
    out = os.path.join(a.work, "out.h264")
    names = ["library", "library-1t", "c", "gstreamer"]
    print(f"{'input':<12}{'contender':<11}{'ms/frame':>9}{'IQR':>16}{'fps':>8}{'CPU ms/frame':>14}   library ×")
    for label in a.sizes.split(","):
        for fmt in a.formats.split(","):
            frames = a.frames or (30 if a.callgrind else (150 if label == "720p" else 90))
            if frames <= HEAD: sys.exit(f"--frames must exceed {HEAD}")
            full, head = generate(lib, a.work, fmt, label, frames)
            per = {n: [] for n in names}
            cpu = {n: [] for n in names}
            for rep in range(1 if a.callgrind else a.reps):
                order = names[rep % len(names):] + names[:rep % len(names)]
                for n in order:
                    cf = commands(lib, cloop, fmt, label, full, out)[n]
                    ch = commands(lib, cloop, fmt, label, head, out)[n]
                    if a.callgrind:
                        per[n].append((callgrind(cf, a.work) - callgrind(ch, a.work)) / (frames - HEAD))
                    else:
                        wf, cpf = timed(cf); wh, cph = timed(ch)
                        per[n].append((wf - wh) / (frames - HEAD) * 1000)
                        cpu[n].append((cpf - cph) / (frames - HEAD) * 1000)
            med = {n: statistics.median(per[n]) for n in names}
            for n in names:
                q = statistics.quantiles(per[n], n=4) if len(per[n]) >= 2 else [per[n][0]] * 3
                ratio = "" if n == "library" else f"{med[n] / med['library']:.3f}"
                if a.callgrind:
                    print(f"{label + ' ' + fmt:<12}{n:<11}{med[n] / 1e6:>8.2f}M Ir/frame{'':>6}{'':>8}{'':>14}   {ratio}")
                else:
                    print(f"{label + ' ' + fmt:<12}{n:<11}{med[n]:>9.3f}{f'{q[0]:.3f}–{q[2]:.3f}':>16}{1000 / med[n]:>8.1f}"
                          f"{statistics.median(cpu[n]):>14.3f}   {ratio}")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
