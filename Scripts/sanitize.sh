#!/usr/bin/env bash
# Runs the whole test suite under AddressSanitizer (+ LeakSanitizer) and ThreadSanitizer.
#   Scripts/sanitize.sh                 both, one after the other
#   Scripts/sanitize.sh address         only ASan (scratch .build-asan); `thread` only TSan (.build-tsan)
#   SANITIZE_FILTER=ParsingTests Scripts/sanitize.sh address     only some tests (swift test --filter)
# Every instrumented process (the test runner and the camcap binaries the CLI tests start) writes its reports
# to .build-<asan|tsan>/reports/ instead of stderr; the run is clean when the tests pass AND no report file
# exists. Exit status 0 only when everything is clean; otherwise the reports' summaries are printed.
# Reports that are not bugs are suppressed in Scripts/lsan-suppressions.txt (XCTest's runner) and
# Scripts/tsan-suppressions.txt (Synchronization.Mutex, which TSan cannot see on Linux), each with a reason.
set -uo pipefail
cd "$(dirname "$0")/.."
kinds=("$@"); [ ${#kinds[@]} -eq 0 ] && kinds=(address thread)
filter=()
[ -n "${SANITIZE_FILTER:-}" ] && filter=(--filter "$SANITIZE_FILTER")
status=0
for kind in "${kinds[@]}"; do
  case $kind in
    address) scratch=.build-asan; var=ASAN_OPTIONS; opts="detect_leaks=1:detect_stack_use_after_return=0:abort_on_error=0" ;;
    thread)  scratch=.build-tsan; var=TSAN_OPTIONS; opts="halt_on_error=0:second_deadlock_stack=1:suppressions=$PWD/Scripts/tsan-suppressions.txt" ;;
    *) echo "sanitize: unknown kind $kind (address or thread)" >&2; exit 2 ;;
  esac
  reports="$PWD/$scratch/reports"
  rm -rf "$reports"; mkdir -p "$reports"
  echo "sanitize: building with --sanitize=$kind into $scratch"
  if ! swift build --build-tests --sanitize="$kind" --scratch-path "$scratch" 2>&1 | grep -E "error:|Compiling|Build complete" | grep -v "^\[" ; then :; fi
  echo "sanitize: running the tests under $kind sanitizer"
  env "$var=$opts:log_path=$reports/$kind" LSAN_OPTIONS="log_path=$reports/leak:suppressions=$PWD/Scripts/lsan-suppressions.txt:print_suppressions=0" \
    swift test --skip-build --sanitize="$kind" --scratch-path "$scratch" "${filter[@]}" > "$scratch/test.log" 2>&1
  rc=$?
  tail -3 "$scratch/test.log"
  n=$(find "$reports" -type f | wc -l)
  if [ $rc -ne 0 ] || [ "$n" -gt 0 ]; then
    status=1
    echo "sanitize: $kind: NOT clean (tests exit $rc, $n report file(s) in $reports)"
    grep -h -E "^(SUMMARY|ERROR|WARNING): " "$reports"/* 2>/dev/null | sort | uniq -c | sort -rn | head -20
    grep -E "✘ Test .* (failed|recorded)" "$scratch/test.log" | head -20
  else
    echo "sanitize: $kind: clean ($(grep -oE "Test run with [0-9]+ tests" "$scratch/test.log" | tail -1))"
  fi
done
exit $status
