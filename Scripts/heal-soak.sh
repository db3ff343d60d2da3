#!/usr/bin/env bash
# A camera that keeps misbehaving, for a long time (#48): `camcap record` in segments from the fixture webcam with a
# fault every FAULT_EVERY seconds (in turn: an unplug of 2 s, a stall past the stream's timeout, the source changing
# size, the source without signal for 2 s), for SECONDS seconds. It samples the process's RSS and open descriptors every 10 s and at the end prints one line:
#   heal-soak: N faults, N recovered, RSS first/last/max KiB, fds first/last/max, frames, time without pictures
# Then the cost of waiting: a run whose camera goes away for 20 s, its CPU time during the wait per second.
#
#   Scripts/heal-soak.sh [SECONDS]        default 1800 (30 minutes); CI runs none of it
#   FAULT_EVERY=20                        seconds of frames between two faults
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_WANTED=${1:-1800}
EVERY=${FAULT_EVERY:-20}
FPS=30
swift build --product camcap >/dev/null # debug: the figures are RSS, descriptors and idle CPU, not speed
CAMCAP=$(swift build --show-bin-path)/camcap
WORK=$(mktemp -d /tmp/heal-soak.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The faults, at frames counted over every stream of the camera (frames the camera is away for do not count).
faults=()
n=$((SECONDS_WANTED / EVERY))
for ((i = 1; i <= n; i++)); do
  frame=$((i * EVERY * FPS))
  case $((i % 4)) in
    1) faults+=(--fixture-fault "unplug@$frame+2") ;;
    2) faults+=(--fixture-fault "stall@$frame+4") ;;
    3) faults+=(--fixture-fault "resize@$frame:$([ $((i % 8)) = 3 ] && echo 1280x720 || echo 640x480)") ;;
    0) faults+=(--fixture-fault "nosignal@$frame+2") ;;
  esac
done
"$CAMCAP" record -d fixture:uvc-webcam -s 640x360 --segment-seconds 10 --keep 3 -o "$WORK/soak-%04d.mp4" \
  --duration "$SECONDS_WANTED" "${faults[@]}" > "$WORK/summary.txt" 2> "$WORK/err.txt" &
pid=$!
rss=() fds=()
while kill -0 "$pid" 2>/dev/null; do
  r=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null || true)
  f=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l || true)
  [ -n "$r" ] && rss+=("$r") && fds+=("$f")
  sleep 10
done
wait "$pid" || { echo "heal-soak: camcap exited non-zero"; tail -5 "$WORK/err.txt"; exit 1; }
lost=$(grep -c "^camera lost" "$WORK/err.txt" || true)
back=$(grep -c "^camera back" "$WORK/err.txt" || true)
changed=$(grep -c "^source changed" "$WORK/err.txt" || true)
dark=$(grep -c "^no signal" "$WORK/err.txt" || true)
max() { printf '%s\n' "$@" | sort -n | tail -1; }
# The first samples are the start (libraries loading, the encoder's first buffers): the baseline is the sample at 30 s.
w=$(( ${#rss[@]} > 3 ? 3 : 0 ))
echo "heal-soak: $SECONDS_WANTED s, $n faults planned, $lost lost, $back back, $dark without signal, $changed source changes; RSS at 30 s ${rss[$w]} KiB, at the end ${rss[-1]} KiB, max $(max "${rss[@]:$w}") KiB; fds at 30 s ${fds[$w]}, at the end ${fds[-1]}, max $(max "${fds[@]:$w}")"
echo "heal-soak: RSS every 10 s (KiB): ${rss[*]}"
grep -E "^(frames|camera loss|source):" "$WORK/summary.txt" | sed 's/^/heal-soak: /'

# The cost of waiting: the camera goes at frame 60 for 20 s; the CPU the process spends while it is away.
"$CAMCAP" record -d fixture:uvc-webcam -s 640x360 --frames 120 --on-camera-loss wait --fixture-fault unplug@60+20 \
  -o "$WORK/wait.mp4" > /dev/null 2> "$WORK/wait.err" &
pid=$!
until grep -q "camera lost" "$WORK/wait.err" 2>/dev/null; do sleep 0.1; done
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
t0=$(ticks) s0=$(date +%s.%N)
sleep 15
t1=$(ticks) s1=$(date +%s.%N)
wait "$pid"
hz=$(getconf CLK_TCK)
python3 -c "print('heal-soak: waiting for the camera: %.2f ms CPU per second (%d ticks of 1/%d s in %.1f s)' % (($t1 - $t0) * 1000 / $hz / ($s1 - $s0), $t1 - $t0, $hz, $s1 - $s0))"
