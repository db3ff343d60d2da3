#!/usr/bin/env bash
# Checks a board's V4L2 memory-to-memory encoder with camcap, as docs/encoders.md describes (#51):
#   1. v4l2-compliance's streaming tests on the encoder node;
#   2. a 10-second `camcap record --encoder v4l2m2m:NODE` from the camera, ended by SIGINT (the drain at stop),
#      with --preview writing the pictures the encoder was given;
#   3. every recorded frame decoded and compared with its preview picture: PSNR per frame (ffmpeg's psnr filter
#      for H.264; vicodec's own stateful decoder through `v4l2-ctl --stream-from-hdr` for FWHT).
#
# Usage: Scripts/check-m2m.sh [ENCODER_NODE] [CAMERA]
#   ENCODER_NODE  the M2M encoder (default: the first /dev/video* that is a memory-to-memory device with H.264 or
#                 FWHT on its CAPTURE queue);
#   CAMERA        what `camcap record -d` takes (default: the first camera, else the built-in fixture webcam).
# Environment: SECONDS_TO_RECORD (10), SIZE (1280x720), MIN_PSNR (35, dB), OUT (a new directory under /tmp),
#              CAMCAP (default: the release build, built if missing).
# Exit status: 0 when every step passed, 1 when a step failed, 2 when there is no M2M encoder to check.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${SECONDS_TO_RECORD:-10} size=${SIZE:-1280x720} min_psnr=${MIN_PSNR:-35}
out=${OUT:-$(mktemp -d /tmp/check-m2m.XXXXXX)}
mkdir -p "$out"
say() { echo "check-m2m: $*"; }

need=()
command -v v4l2-ctl > /dev/null || need+=(v4l-utils)
command -v v4l2-compliance > /dev/null || need+=(v4l-utils)
command -v ffmpeg > /dev/null || need+=(ffmpeg)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" > /dev/null || { say "apt-get install ${need[*]} failed"; exit 1; }
  else
    say "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root"; exit 1
  fi
fi

# The encoder node and its coded format.
coded_format() { # NODE → H264, FWHT or nothing
  v4l2-ctl -d "$1" --info 2> /dev/null | grep -q "Memory-to-Memory" || return 0
  local caps
  caps=$(v4l2-ctl -d "$1" --list-formats 2> /dev/null)
  if grep -q "'H264'" <<< "$caps"; then echo H264; elif grep -q "'FWHT'" <<< "$caps"; then echo FWHT; fi
}
node=${1:-}
if [ -z "$node" ]; then
  for n in /dev/video*; do
    [ -e "$n" ] || continue
    # vicodec's decoder nodes take FWHT on OUTPUT and give raw on CAPTURE: coded_format skips them.
    if [ -n "$(coded_format "$n")" ]; then node=$n; break; fi
  done
fi
if [ -z "$node" ]; then
  say "no V4L2 memory-to-memory encoder found (no /dev/video* with H.264 or FWHT on its CAPTURE queue)"
  say "on a Raspberry Pi 4 the encoder is bcm2835-codec's /dev/video11; check that the bcm2835_codec module is loaded"
  exit 2
fi
format=$(coded_format "$node")
[ -n "$format" ] || { say "$node is not a memory-to-memory encoder with H.264 or FWHT on its CAPTURE queue"; exit 1; }
say "encoder $node ($(v4l2-ctl -d "$node" --info 2> /dev/null | sed -n 's/.*Card type *: //p'), $format), results in $out"

failed=0
# 1. Compliance: streaming tests with MMAP buffers; the summary line counts failures.
v4l2-compliance -d "$node" -s > "$out/compliance.txt" 2>&1
summary=$(grep -E "^Total( for)? .*: [0-9]+, Succeeded: [0-9]+, Failed: [0-9]+" "$out/compliance.txt" | tail -1)
say "compliance: ${summary:-no summary (see $out/compliance.txt)}"
fails=$(sed -n 's/.*Failed: \([0-9]*\).*/\1/p' <<< "$summary")
[ "${fails:-1}" = 0 ] || say "compliance reported failures (older v4l-utils than the kernel fail on description strings: read $out/compliance.txt)"

# 2. Record.
camcap=${CAMCAP:-.build/release/camcap}
if [ ! -x "$camcap" ]; then swift build -c release --product camcap > "$out/build.txt" 2>&1 || { say "build failed: $out/build.txt"; exit 1; }; fi
ext=mp4
[ "$format" = FWHT ] && ext=fwht
camera=()
[ -n "${2:-}" ] && camera=(-d "$2")
say "recording ${secs} s at $size: $camcap record ${camera[*]} --encoder v4l2m2m:$node"
timeout -s INT "$((secs + 1))" "$camcap" record "${camera[@]}" --size "$size" --encoder "v4l2m2m:$node" \
  --preview "$out/preview.y4m" -o "$out/recording.$ext" > "$out/record.txt" 2>&1
rc=$?
sed 's/^/  /' "$out/record.txt" | tail -6
if [ "$rc" != 0 ] || [ ! -s "$out/recording.$ext" ]; then say "record failed (exit $rc): $out/record.txt"; exit 1; fi

# 3. Decode and compare with the preview, frame by frame.
dims=$(head -c 200 "$out/preview.y4m" | head -1 | sed -n 's/.* W\([0-9]*\) H\([0-9]*\).*/\1x\2/p')
pictures=$(grep -c -a "^FRAME" "$out/preview.y4m")
if [ "$format" = FWHT ]; then
  dec=""
  for n in /sys/class/video4linux/video*; do
    [ "$(cat "$n/name" 2> /dev/null)" = stateful-decoder ] && dec=/dev/$(basename "$n")
  done
  [ -n "$dec" ] || { say "no vicodec stateful decoder to decode FWHT with"; exit 1; }
  v4l2-ctl -d "$dec" --stream-mmap --stream-out-mmap --stream-from-hdr "$out/recording.fwht" --stream-to "$out/decoded.yuv" > "$out/decode.txt" 2>&1
  decoded=(-f rawvideo -pix_fmt yuv420p -s "$dims" -i "$out/decoded.yuv")
else
  decoded=(-i "$out/recording.mp4")
fi
ffmpeg -v error "${decoded[@]}" -i "$out/preview.y4m" -lavfi "[0:v][1:v]psnr=stats_file=$out/psnr.txt" -f null - 2> "$out/ffmpeg.txt"
frames=$(grep -c . "$out/psnr.txt" 2> /dev/null || echo 0)
min=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /^psnr_avg:/) { split($i, a, ":"); v = a[2] == "inf" ? 99 : a[2]; if (m == "" || v < m) m = v } } END { print m == "" ? 0 : m }' "$out/psnr.txt" 2> /dev/null)
say "decoded $frames of $pictures pictures, PSNR min ${min} dB (bound ${min_psnr} dB)"
[ "$frames" -gt 0 ] && [ "$frames" = "$pictures" ] || { say "frame counts differ: the drain lost frames, or the decoder did"; failed=1; }
awk -v m="$min" -v b="$min_psnr" 'BEGIN { exit !(m + 0 >= b + 0) }' || { say "PSNR below the bound"; failed=1; }
if [ "$failed" = 0 ]; then say "passed"; else say "FAILED (files in $out)"; fi
exit "$failed"
