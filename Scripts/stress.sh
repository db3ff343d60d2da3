#!/usr/bin/env bash
# The whole test suite N times in a row (default 5) with 3 CPU-burning processes beside it: tests wait on
# events, never on wall-clock windows, so a loaded machine must not make them fail.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
swift build --build-tests -q || exit 1
burners=()
for _ in 1 2 3; do ( while :; do :; done ) & burners+=($!); done
trap 'kill ${burners[*]} 2>/dev/null' EXIT
pass=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if swift test --skip-build > .build/stress-$i.log 2>&1; then
    pass=$((pass + 1)); echo "run $i: passed ($(( $(date +%s) - start )) s, $(grep -oE 'Test run with [0-9]+ tests' .build/stress-$i.log | tail -1))"
  else
    echo "run $i: FAILED ($(( $(date +%s) - start )) s):"; grep -E "✘" .build/stress-$i.log | head -20
  fi
done
echo "stress: $pass of $runs runs passed with 3 CPU burners"
[ "$pass" = "$runs" ]
