#!/bin/bash
# CPU of `camcap serve` with no viewer, before the idle release, per thread (#38: a camera nobody wants pictures
# from costs its dequeue only: no decode, no conversion).
#
#   Benchmarks/serve-idle/idle-cpu.sh [CAMCAP] [SECONDS]
#
# CAMCAP defaults to .build/release/camcap (build it with `swift build -c release --product camcap`), SECONDS to
# 10. The camera is the 720p MJPEG fixture (fixture:uvc-webcam); its own thread ("fixture-camera") makes the
# JPEG frames a real camera's hardware would, so it is reported apart from the library's threads. Three runs;
# each prints ms of CPU per second for the process, the library (everything but the fixture camera) and each
# thread that used any.
set -euo pipefail
cd "$(dirname "$0")/../.."
CAMCAP=${1:-.build/release/camcap}
SECONDS_MEASURED=${2:-10}
[ -x "$CAMCAP" ] || { echo "no $CAMCAP: build it first (swift build -c release --product camcap)" >&2; exit 1; }
hz=$(getconf CLK_TCK)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for run in 1 2 3; do
    "$CAMCAP" serve -d fixture:uvc-webcam -s 1280x720 --listen 127.0.0.1:0 --idle-release 600 >"$work/out" 2>"$work/err" &
    pid=$!
    # Serving (the camera started) before the window opens.
    for _ in $(seq 1 100); do grep -q "^serving fixture" "$work/err" && break; sleep 0.1; done
    sleep 1
    snap() { for t in /proc/$pid/task/*; do printf '%s %s\n' "$(tr ' ' _ <"$t/comm")/$(basename "$t")" "$(awk '{print $14+$15}' "$t/stat")"; done | sort; }
    snap >"$work/a"
    sleep "$SECONDS_MEASURED"
    snap >"$work/b"
    kill -INT "$pid"
    wait "$pid" || true
    join "$work/a" "$work/b" | awk -v hz="$hz" -v s="$SECONDS_MEASURED" -v run="$run" '
        { d = ($3 - $2) * 1000 / hz / s; total += d; if ($1 !~ /^fixture-camera/) lib += d; if (d > 0) per = per sprintf(" %s %.1f", $1, d) }
        END { printf "run %d: process %.1f ms CPU/s, library (all but the fixture camera) %.1f ms CPU/s;%s\n", run, total, lib, per }'
done
