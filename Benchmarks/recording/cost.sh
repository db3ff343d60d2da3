#!/usr/bin/env bash
# What the recording writers cost on the record path (#36), in instructions (callgrind counts them: stable on a
# noisy VM), and what a long recording holds in memory.
#
#   Benchmarks/recording/cost.sh [FRAMES]      # default 300; needs valgrind and a release camcap
#   SECTIONS="3 4" Benchmarks/recording/cost.sh  # only some of the parts below (default: all)
#
# 1. Instructions per frame: `camcap record --fast` from the fixture webcam at 1280x720 (MJPEG decode, encode,
#    write), run under callgrind for FRAMES and FRAMES/3 frames; the difference over the extra frames is the
#    record path's cost per frame (start-up cancels). The writer's share is the inclusive cost of
#    RecordingOutput.write (FragmentedMP4Writer or AnnexBWriter inside it) per frame. Both containers, same
#    settings, same threading (--fast: encoder on its own thread).
# 3. A camera's own H.264 passed through against encoding the same frames (below).
# 4. Multi-planar (#35): fixture:soc-mplane at 1280x720 in NM12 (planes in separate buffers) and NV12 (one buffer,
#    through the same multi-planar API): the inclusive cost per frame of FrameConverter.convert, the one pass from
#    the camera's planes to I420.
# 6. The frame tap (#50): `record --fast` at 1280x720 from the fixture webcam with and without `--tap`, each for
#    FRAMES and FRAMES/3 frames: the record path's instructions per frame both ways, and the tap's share (the
#    difference). With the tap the converter writes each picture into its ring slot: the tap itself copies nothing.
# 5. Memory: peak RSS of a 1-minute and a 10-minute (capture time) MP4 recording (--fast, so it takes less
#    wall time), from /usr/bin/time's maximum resident set size.
set -euo pipefail
cd "$(dirname "$0")/../.."
frames=${1:-300}
swift build -c release --product camcap >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# valgrind 3.19 cannot read the Swift release binary's debug info ("possibly corrupted debuginfo"): a copy
# without it keeps the symbol names. And it dies in libdispatch's sigsuspend (a read-only mask): the shim of
# Benchmarks/compare passes a writable copy.
camcap=$out/camcap
cp "$PWD/.build/release/camcap" "$camcap"
strip --strip-debug "$camcap"
gcc -O2 -shared -fPIC -o "$out/sigsuspend-shim.so" Benchmarks/compare/sigsuspend-shim.c
ir_total() { # callgrind file → total Ir
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }'
}
record_under_callgrind() { # NAME ARGS… → $out/cg-NAME: callgrind's file of `camcap record ARGS -q` (camcap's own process)
  local name=$1
  shift
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out/cg-$name.%p" env LD_PRELOAD="$out/sigsuspend-shim.so" \
    "$camcap" record "$@" -q >/dev/null 2>&1
  # The camcap process's file is the largest (env's own is tiny).
  mv "$(ls -S "$out"/cg-"$name".* | awk 'NR == 1')" "$out/cg-$name"
  rm -f "$out"/cg-"$name".*
}
ir_of() { # callgrind file, symbol regex → inclusive Ir of the first matching function (Swift names are mangled)
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | awk -v re="$2" '$0 ~ re && !done { gsub(",", "", $1); print $1; done = 1 }'
}
sections=" ${SECTIONS:-1 2 3 4 5 6} "
on() { [[ "$sections" == *" $1 "* ]]; }
on 1 && for container in h264 mp4; do
  for n in $((frames / 3)) "$frames"; do
    record_under_callgrind "$container-$n" -d fixture:uvc-webcam -s 1280x720 --fast --frames "$n" -o "$out/rec-$n.$container"
  done
  short=$(ir_total "$out/cg-$container-$((frames / 3))"); long=$(ir_total "$out/cg-$container-$frames")
  writer=$(ir_of "$out/cg-$container-$frames" 'RecordingOutputC5write|RecordingOutput\.write')
  per_frame=$(( (long - short) / (frames - frames / 3) ))
  python3 - "$container" "$per_frame" "${writer:-0}" "$frames" <<'PY'
import sys
c, per_frame, writer, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
w = writer / frames
print(f"{c:5}: record path {per_frame/1e6:8.2f} M instructions/frame; writer (RecordingOutput.write, inclusive) {w/1e3:8.1f} k/frame = {100*w/per_frame:.3f} %")
PY
done
# 3. A camera's own H.264 passed through (#35) against encoding the same frames: fixture:h264-webcam at 1280x720
#    (its encoder runs in the process, as the camera's would in hardware), recorded once as H.264 passed through and
#    once as MJPEG encoded by us; the inclusive cost per frame of PassthroughStage.consume(encoded:) (with the MP4
#    writing it calls) against that of OpenH264's EncodeFrame (in the MJPEG run: our encoder; the fixture encodes
#    only when it delivers H.264).
if on 3; then
for mode in H264 MJPG; do
  record_under_callgrind "pt-$mode" -d fixture:h264-webcam -s 1280x720 --pixel-format "$mode" --fast --frames "$frames" -o "$out/pt-$mode.mp4"
done
pass=$(ir_of "$out/cg-pt-H264" 'PassthroughStageC7consume7encoded')
encode=$(ir_of "$out/cg-pt-MJPG" 'CWelsH264SVCEncoder::EncodeFrame\(')
python3 - "${pass:-0}" "${encode:-0}" "$frames" <<'PY'
import sys
p, e, n = (int(x) for x in sys.argv[1:])
print(f"passthrough: {p/n/1e3:.1f} k instructions/frame (PassthroughStage.consume(encoded:), MP4 writing included); encoding the same 720p frames: {e/n/1e6:.2f} M/frame (OpenH264 EncodeFrame): {100*p/max(e,1):.3f} %")
PY
fi
if on 4; then
  for fourcc in NM12 NV12; do
    record_under_callgrind "mp-$fourcc" -d fixture:soc-mplane -s 1280x720 --pixel-format "$fourcc" --fast --frames "$frames" -o "$out/mp-$fourcc.mp4"
  done
  nm12=$(ir_of "$out/cg-mp-NM12" 'FrameConverterC7convert_')
  nv12=$(ir_of "$out/cg-mp-NV12" 'FrameConverterC7convert_')
  python3 - "${nm12:-0}" "${nv12:-0}" "$frames" <<'PY'
import sys
a, b, n = (int(x) for x in sys.argv[1:])
print(f"multi-planar 720p to I420 (FrameConverter.convert, inclusive): NM12 {a/n/1e3:.1f} k instructions/frame, NV12 {b/n/1e3:.1f} k/frame: NM12/NV12 = {a/max(b,1):.3f}")
PY
fi
if on 6; then
  for tap in without with; do
    extra=(); [ "$tap" = with ] && extra=(--tap "$out/cost-tap.sock")
    for n in $((frames / 3)) "$frames"; do
      record_under_callgrind "tap-$tap-$n" -d fixture:uvc-webcam -s 1280x720 --fast --frames "$n" -o "$out/tap-$tap-$n.h264" "${extra[@]}"
    done
  done
  python3 - "$frames" $(for tap in without with; do for n in $((frames / 3)) "$frames"; do ir_total "$out/cg-tap-$tap-$n"; done; done) <<'PY'
import sys
frames = int(sys.argv[1]); a0, a1, b0, b1 = (int(x) for x in sys.argv[2:6])
n = frames - frames // 3
without, withtap = (a1 - a0) / n, (b1 - b0) / n
print(f"frame tap: record path {without/1e6:.3f} M instructions/frame without, {withtap/1e6:.3f} M with --tap: the tap costs {(withtap-without)/1e3:.1f} k/frame = {100*(withtap-without)/without:.2f} %")
PY
fi
if on 5; then for seconds in 60 600; do
  /usr/bin/time -f "%M" -o "$out/rss-$seconds" "$camcap" record -d fixture:uvc-webcam -s 1280x720 --fast --noise 3 \
    --duration "$seconds" -o "$out/long-$seconds.mp4" -q >/dev/null
  echo "mp4 recording of ${seconds} s (capture time): peak RSS $(cat "$out/rss-$seconds") KiB, $(stat -c %s "$out/long-$seconds.mp4") bytes written"
done
fi
