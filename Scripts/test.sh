#!/usr/bin/env bash
# The README's test command: installs what is missing, runs the unit/integration tests (swift test),
# then the real-kernel test (vivid under qemu). SKIP_VM=1 skips the VM part.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/install-deps.sh test
swift build --build-tests
swift test --skip-build 2>&1 | tee .build/test.log
if [ "${SKIP_VM:-0}" != "1" ]; then
  Scripts/vivid-vm-test.sh
fi
