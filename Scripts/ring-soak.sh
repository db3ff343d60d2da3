#!/usr/bin/env bash
# A long segment ring's memory and CPU per segment (#53): not CI, a measurement for the closing note.
#
# Runs `camcap record` from the fixture webcam with --fast (capture time runs ahead of the wall clock), tiny
# segments (--segment-seconds 0.5 --keep 10) and a pattern given as $1 (default: a numbered ring; 'cam-%Y.mp4'
# makes every name a suffixed one, the case whose suffix search used to restart per segment), up to $2 segments
# (default 12800). While it runs, it samples the process's VmRSS (/proc/PID/status) and CPU (utime+stime in
# /proc/PID/stat) against the segment count (the highest number in the file names) and prints, about every 800
# segments, the RSS and the CPU per segment since the last line; then RSS(last) - RSS(first) and the CPU ratio.
# Passes (exit 0) when the RSS grew by less than 1 MiB from segment 800 to the end and the last window's CPU per
# segment is within 1.5x of the first's.
#
#   Scripts/ring-soak.sh                      # numbered: ring-00000.mp4 …
#   Scripts/ring-soak.sh 'cam-%Y.mp4' 12800   # one strftime name for all: cam-2026.mp4, cam-2026_001.mp4 …
#   CAMCAP=.build/release/camcap Scripts/ring-soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
pattern=${1:-ring.mp4}
segments=${2:-12800}
window=800
camcap=${CAMCAP:-.build/debug/camcap}
[ -x "$camcap" ] || { echo "ring-soak: $camcap not built (swift build)" >&2; exit 2; }
base=/dev/shm
[ -w "$base" ] || base=${TMPDIR:-/tmp}
dir=$(mktemp -d "$base/ring-soak.XXXXXX")
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
ticks=$(getconf CLK_TCK)
duration=$(( (segments + 2 * window) / 2 )) # capture seconds: a window more than asked

"$camcap" record -d fixture:uvc-webcam -s 160x120 --fast --segment-seconds 0.5 --keep 10 \
    --duration "$duration" -o "$dir/$pattern" -q > "$dir/summary" 2>&1 &
pid=$!

# The segment being written: the highest number in the names on disk (ring-00812.mp4, cam-2026_00812.mp4).
case $pattern in *%*) number='_\([0-9]*\)\.' ;; *) number='-\([0-9]*\)\.' ;; esac
next=$window
printf '%9s %10s %14s\n' segments "RSS KiB" "CPU ms/segment"
rss=() cpu=()
last_cpu=0 last_count=0
while kill -0 "$pid" 2>/dev/null && [ "$next" -le "$segments" ]; do
    current=$(ls "$dir" | sed -n "s/.*$number.*/\1/p" | sort -n | tail -1)
    current=$(( 10#${current:-0} ))
    if [ "$current" -ge "$next" ]; then
        kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        # Fields 14 and 15 of /proc/PID/stat (after the command name in parentheses): utime, stime in ticks.
        t=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0)
        ms=$(awk -v t="$t" -v l="$last_cpu" -v hz="$ticks" -v n="$(( current - last_count ))" 'BEGIN { printf "%.3f", (t - l) * 1000 / hz / n }')
        printf '%9d %10d %14s\n' "$current" "$kib" "$ms"
        rss+=("$kib")
        cpu+=("$ms")
        last_cpu=$t last_count=$current
        next=$(( next + window ))
    fi
    sleep 0.2
done
kill -INT "$pid" 2>/dev/null || true
wait "$pid" || true
if [ "${#rss[@]}" -lt 3 ]; then
    echo "ring-soak: the run ended after fewer than $(( 3 * window )) segments:" >&2
    tail -5 "$dir/summary" >&2
    exit 1
fi
grew=$(( rss[${#rss[@]} - 1] - rss[0] ))
# The first window's CPU includes the start (encoder set-up): the second is the reference.
ratio=$(awk -v a="${cpu[1]}" -v b="${cpu[${#cpu[@]} - 1]}" 'BEGIN { printf "%.2f", b / a }')
echo "pattern $pattern: RSS grew $grew KiB from segment $window to $(( window * ${#rss[@]} )); CPU per segment ${cpu[1]} -> ${cpu[${#cpu[@]} - 1]} ms (x$ratio)"
echo "files left: $(find "$dir" -name '*.mp4' | wc -l) (--keep 10)"
if [ "$grew" -lt 1024 ] && awk -v r="$ratio" 'BEGIN { exit !(r < 1.5) }'; then echo "ring-soak: PASS"; else echo "ring-soak: FAIL"; exit 1; fi
