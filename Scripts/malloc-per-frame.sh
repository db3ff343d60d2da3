#!/usr/bin/env bash
# Allocations per frame on the real-time record path (#24), in the release build: builds `camcap -c release`, then
# runs AllocationTests (an LD_PRELOAD malloc counter, Scripts/malloc-count.c, over a 60- and a 180-frame real-time
# `camcap record` at 720p30 MJPEG; fails at a quarter of an allocation per frame) and prints the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product camcap
swift build --build-tests
CAMCAP_RELEASE="$PWD/.build/release/camcap" swift test --skip-build --filter AllocationTests 2>&1 | grep -E "real-time record|✘|Test run"
