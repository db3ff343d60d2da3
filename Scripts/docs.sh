#!/usr/bin/env bash
# The documentation check CI runs (from Scripts/test.sh, after the build): builds the DocC documentation of every
# library product's module (Sources/<Module>/<Module>.docc and the doc comments) with swift-docc-plugin, DocC's
# warnings treated as errors (an unresolved ``Symbol`` link, a documented parameter that does not exist…), then
# Scripts/doc-coverage.py fails on any public declaration without a doc comment.
#   Scripts/docs.sh                  # all of them; the archives land in .build/plugins/Swift-DocC/outputs/
#   Scripts/docs.sh VideoCapture     # one module (or several)
# Preview one: swift package --disable-sandbox preview-documentation --target VideoCapture
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  modules=("$@")
else
  mapfile -t modules < <(swift package describe --type json | python3 -c '
import json, sys
text = sys.stdin.read()
for product in json.loads(text[text.index("{"):])["products"]:
    if "library" in product["type"]:
        print("\n".join(product["targets"]))')
fi
start=$SECONDS
targets=()
for module in "${modules[@]}"; do targets+=(--target "$module"); done
log=.build/docs.log
mkdir -p .build
if ! swift package generate-documentation "${targets[@]}" --warnings-as-errors > "$log" 2>&1; then
  # DocC's diagnostics, without the build's progress lines.
  grep -vE '^\[[0-9]+/[0-9]+\]' "$log" | tail -80
  echo "docs: DocC failed (warnings are errors); the whole log: $log" >&2
  exit 1
fi
grep -E "^(Finished building documentation|warning|error)" "$log" || true
echo "docs: ${#modules[@]} modules built in $((SECONDS - start)) s: .build/plugins/Swift-DocC/outputs/"
coverage=()
for module in "${modules[@]}"; do coverage+=(--module "$module"); done
if [ $# -eq 0 ]; then coverage=(); fi   # every module, SystemIO too
Scripts/doc-coverage.py "${coverage[@]}"
