#!/usr/bin/env bash
# Fuzzes every parser that reads outside input (libFuzzer + AddressSanitizer), each for a bounded time.
#   Scripts/fuzz.sh [SECONDS_PER_TARGET]      default 60 (what CI runs); e.g. 600 for a long pass
#   FUZZ_TARGETS="FuzzJSON FuzzSPS" Scripts/fuzz.sh 30      only some targets
#   FUZZ_JOBS=2 Scripts/fuzz.sh 600                            targets run two at a time
#   FUZZ_BUILD_ONLY=1 Scripts/fuzz.sh                          build the targets only
# Targets live in Fuzz/ (a sub-package: one executable per parser, each defining LLVMFuzzerTestOneInput),
# built with -sanitize=fuzzer,address into .build-fuzz. Seeds: the target's folders of Fixtures/ (seeds_of below;
# read only; every crash ever found is kept there; Fixtures/README.md). New coverage goes to
# .build-fuzz/corpus/<target>/, crashes and hangs (> 10 s per input) to .build-fuzz/crashes/<target>/, logs to
# .build-fuzz/logs/<target>.log. Exit status: 0 when no target crashed, else 1 (the crashing inputs are listed;
# add each, named crash-…, to the target's folder in Fixtures/ once fixed, and to the regression tables in Tests/).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
read -r -a targets <<< "${FUZZ_TARGETS:-FuzzListing FuzzJSON FuzzAnnexB FuzzSPS FuzzRTCP FuzzSDP FuzzRTSP FuzzWebRTC FuzzMJPEG}"
jobs=${FUZZ_JOBS:-1}
scratch=.build-fuzz

swift build --package-path Fuzz --scratch-path "$scratch" -c release \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld 2>&1 | grep -vE "ld.gold: warning: Cannot export local symbol|^\[" || true
bin=$(swift build --package-path Fuzz --scratch-path "$scratch" -c release --show-bin-path)
# FUZZ_BUILD_ONLY=1: build the targets and stop (Scripts/test.sh builds them while DocC runs, and fuzzes later).
if [ "${FUZZ_BUILD_ONLY:-0}" = "1" ]; then
  for t in "${targets[@]}"; do [ -x "$bin/$t" ] || { echo "fuzz: no target $t in $bin" >&2; exit 2; }; done
  exit 0
fi
# (lld: gold fails with an internal error on the sanitizer-coverage sections of these binaries)

# The seed folders of each target, all in Fixtures/ (the one home of the fixture data; the built-in cameras seed
# the listing and JSON parsers).
seeds_of() {
  case $1 in
    FuzzListing) echo Fixtures/cameras Fixtures/v4l2 ;;
    FuzzJSON) echo Fixtures/cameras Fixtures/json ;;
    FuzzAnnexB|FuzzSPS) echo Fixtures/h264 ;;
    FuzzMJPEG) echo Fixtures/mjpeg ;;
    FuzzRTCP) echo Fixtures/rtcp ;;
    FuzzRTSP) echo Fixtures/rtsp ;;
    FuzzSDP) echo Fixtures/sdp ;;
    FuzzWebRTC) echo Fixtures/sdp Fixtures/webrtc ;;
    *) echo "fuzz: no seed folders for $1 (add them to seeds_of in Scripts/fuzz.sh)" >&2; return 1 ;;
  esac
}

run_one() {
  local t=$1 seeds
  read -r -a seeds <<< "$(seeds_of "$t")"
  mkdir -p "$scratch/corpus/$t" "$scratch/crashes/$t" "$scratch/logs"
  local max_len=16384
  case $t in FuzzAnnexB|FuzzSPS) max_len=8192 ;; esac
  # ASAN_OPTIONS: leaks are reported too; a slow input (> 10 s) counts as a hang.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 nice -n 10 "$bin/$t" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$scratch/crashes/$t/" "$scratch/corpus/$t" "${seeds[@]}" > "$scratch/logs/$t.log" 2>&1
}

mkdir -p "$scratch"; touch "$scratch/run-started"   # crash files older than this are from earlier runs
status=0
pids=()
for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || { echo "fuzz: no target $t in $bin" >&2; exit 2; }
  seeds_of "$t" > /dev/null || exit 2
  run_one "$t" & pids+=("$!:$t")
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
done
for p in "${pids[@]}"; do wait "${p%%:*}" || true; done

for t in "${targets[@]}"; do
  log="$scratch/logs/$t.log"
  runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo "?")
  crashes=$(find "$scratch/crashes/$t" -type f -newer "$scratch/run-started" | wc -l)   # this run's only
  if grep -qE "ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|SUMMARY: |Fatal error|deadly signal" "$log" || [ "$crashes" -gt 0 ]; then
    status=1
    echo "fuzz: $t FAILED after $runs runs ($secs s); inputs in $scratch/crashes/$t/, log $log"
    grep -m5 -E "ERROR:|Fatal error|SUMMARY:" "$log" | sed 's/^/    /'
  else
    echo "fuzz: $t ok: $runs runs in $secs s, 0 crashes (corpus $(find "$scratch/corpus/$t" -type f | wc -l) new inputs)"
  fi
done
exit $status
