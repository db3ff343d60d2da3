#!/usr/bin/env bash
# The real-link tests of #21 and #39 with the issues' own bounds (LINKS_STRICT=1: A at 1280x720 and ≥ 28 fps in
# every second, its tier's rate ≥ 90 % of what it was while B was limited; B at most 2 freezes a minute behind
# 400 kbit/s with a 5 kB bucket and 200 ms of queue, its estimate never over twice that for more than a second; the
# same behind a 64 kB bucket and 400 ms; the 5 → 0.5 → 5 Mbit/s step followed within 5 s each way with no freeze
# over 1 s), RUNS times (default 3), each run's figures printed. Needs root (network namespaces, tc).
# Run on a quiet machine: CI runs the same tests with bounds that do not depend on the load, against the debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
# The server is the release build (what a user runs); CI runs the same tests against the debug build.
swift build -c release --product camcap
export LINKS_CAMCAP="$PWD/.build/release/camcap"
failed=0
for i in $(seq 1 "${RUNS:-3}"); do
  echo "=== run $i"
  LINKS_STRICT=1 swift test --skip-build --filter "^CamcapTests\.LinkTests" > .build/links-$i.log 2>&1 || failed=$((failed + 1))
  grep -E "^(tiers|step)( \(|:)|✘ Test .*recorded|Test run" .build/links-$i.log || true
done
echo "links: $failed of ${RUNS:-3} runs failed the strict bounds"
[ "$failed" = 0 ]
