#!/usr/bin/env bash
# swift-format over the package's Swift sources with the checked-in configuration (.swift-format: 4-space
# indentation, 150 columns, one statement per line). `Scripts/format.sh` rewrites the files in place;
# `Scripts/format.sh --check` (run by Scripts/test.sh, so by CI) changes nothing and fails, naming file:line,
# where a file is not formatted. swift-format ships with the Swift toolchain (`swift format`).
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(Package.swift Sources Tests Examples Plugins Fuzz/Package.swift Fuzz/Sources Benchmarks/Package.swift Benchmarks/Benchmarks Benchmarks/compare/CompareLoop)
if [ "${1:-}" = "--check" ]; then
  out=$(swift format lint --strict --recursive --parallel "${paths[@]}" 2>&1) || true
  if [ -n "$out" ]; then
    echo "$out" | sort -u | head -40
    echo "swift-format: $(echo "$out" | sort -u | wc -l) findings; run Scripts/format.sh to fix them" >&2
    exit 1
  fi
  echo "swift-format: all files formatted"
else
  swift format format --in-place --recursive --parallel "${paths[@]}"
fi
