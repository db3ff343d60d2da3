#!/usr/bin/env bash
# Soak: a long --fast recording from a fixture camera (RSS and open descriptors sampled while it runs), then
# start/stop and switch cycles through the API (SoakTests). Prints the figures docs/MEASUREMENTS.md
# (Cameras) quotes. Usage: Scripts/soak.sh [frames=20000] [start/stop cycles=500] [switches=200]
set -euo pipefail
cd "$(dirname "$0")/.."
frames=${1:-20000}; cycles=${2:-500}; switches=${3:-200}
swift build --build-tests -q 2>&1 | grep -v "^$" || true
bin=.build/debug/camcap
out=$(mktemp -d)/soak.h264
$bin record -d fixture:uvc-webcam -s 640x480 --fast --frames "$frames" -o "$out" -q > "$out.summary" &
pid=$!
samples=()
while kill -0 $pid 2>/dev/null; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || true)
  fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l || true)
  [ -n "$rss" ] && samples+=("$rss/$fds")
  sleep 2
done
wait $pid
echo "record --fast: $frames frames; RSS KiB / open fds every 2 s: ${samples[*]}"
grep -E "frames:|achieved" "$out.summary"
echo "ffprobe frames: $(ffprobe -v error -f h264 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$out")"
rm -f "$out" "$out.summary"
SOAK=1 SOAK_START_STOP=$cycles SOAK_SWITCHES=$switches swift test --skip-build --filter SoakTests 2>&1 | grep -E "soak:|✘|passed after|failed after"
