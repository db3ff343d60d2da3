#!/bin/bash
# CPU of `camcap publish` into Janus with one layer and with --simulcast (three layers: 1280x720, 640x360,
# 320x180), #39: the cost of encoding every tier while connected.
#
#   Benchmarks/simulcast/layers-cpu.sh [CAMCAP] [SECONDS] [RUNS]
#
# CAMCAP defaults to .build/release/camcap (build it with `swift build -c release --product camcap`), SECONDS to
# 20, RUNS to 3. The camera is the 1280x720 vivid fixture (-s 1280x720); Janus's VideoRoom with simple-whip-server
# in front runs on loopback (Scripts/janus-env.sh, started once for all runs). The runs alternate (one layer, three
# layers, one, …) so a change in the machine's load falls on both; each prints camcap's user + sys CPU (its
# getrusage, read by /usr/bin/time) over the whole run and the frames each layer sent (the summary's whip line),
# then the medians and their ratio. The fixture camera's own thread, which draws the pattern a real camera's
# hardware would, is part of both figures alike.
set -euo pipefail
cd "$(dirname "$0")/../.."
CAMCAP=${1:-.build/release/camcap}
SECONDS_RUN=${2:-20}
RUNS=${3:-3}
[ -x "$CAMCAP" ] || { echo "no $CAMCAP: build it first (swift build -c release --product camcap)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
work=$(mktemp -d)
trap 'bash Scripts/janus-env.sh stop "$work/janus" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
bash Scripts/janus-env.sh start "$work/janus" >"$work/janus.log" 2>&1 || { cat "$work/janus.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$work/janus/env"
printf '%s' "$WHIP_TOKEN" >"$work/token"
one=() three=()
for run in $(seq 1 "$RUNS"); do
    for layers in 1 3; do
        extra=()
        [ "$layers" = 3 ] && extra=(--simulcast)
        /usr/bin/time -f "%U %S" -o "$work/time" "$CAMCAP" publish -d fixture:vivid -s 1280x720 --whip "$WHIP_URL" \
            --token-file "$work/token" --duration "$SECONDS_RUN" -q "${extra[@]}" >"$work/out" 2>"$work/err" \
            || { echo "camcap publish failed:" >&2; cat "$work/err" >&2; exit 1; }
        cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$work/time")
        sent=$(grep -o 'simulcast .*' "$work/out" | sed 's/; DELETE.*//' || true)
        [ -n "$sent" ] || sent=$(grep -o 'frames: .*' "$work/out" | head -1 || true)
        echo "run $run, $layers layer(s): $cpu s of CPU in $SECONDS_RUN s ($sent)"
        if [ "$layers" = 1 ]; then one+=("$cpu"); else three+=("$cpu"); fi
    done
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
m1=$(median "${one[@]}") m3=$(median "${three[@]}")
awk -v a="$m1" -v b="$m3" -v s="$SECONDS_RUN" 'BEGIN { printf "median: one layer %.2f s (%.1f %% of a core), three layers %.2f s (%.1f %%): × %.2f\n", a, a * 100 / s, b, b * 100 / s, b / a }'
