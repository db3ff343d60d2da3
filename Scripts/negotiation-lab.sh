#!/bin/sh
# The negotiation lab's differential (issue #49, docs/cameras.md "Negotiation lab: policies"): GStreamer and ffmpeg
# negotiate on vivid in the VM, and NegotiationLabTests compares what they got with SelectionPolicy's picks.
#
#   Scripts/negotiation-lab.sh run DEV[,DEV2...] [REQUESTS]
#       (VM: Scripts/vivid-vm-test.sh runs it in a chroot of the host's root, shared read-only over 9p, so that
#       GStreamer and ffmpeg are the host's own) each request of REQUESTS (default Fixtures/negotiation/requests.txt)
#       on DEV, a single-planar vivid node (with several, nodes of the same camera: one worker each, in parallel):
#       resets the node to GREY 3840x2160 @ 1 fps on input 0 (the webcam), runs the command, and prints its output
#       between "NEGOTIATION-BEGIN ID" and "NEGOTIATION-END ID EXIT MS" (MS: how long it ran). LAB_RESET=0: no reset
#       (the v4l2loopback camera of requests-loopback.txt, whose only format is its writer's).
#   Scripts/negotiation-lab.sh split CONSOLE RESULTS
#       (host) writes each request's output from the VM's console log to RESULTS/ID.txt; then
#       NEGOTIATION_RESULTS=RESULTS swift test --filter realProgramsAgreeWithThePolicies
set -u
here=$(dirname "$0")
case "${1:-}" in
run)
  devs=${2:?device}
  requests=${3:-$here/../Fixtures/negotiation/requests.txt}
  # Only the two plugins the pipelines use are scanned, once, before the workers start (no scanner process).
  plugins=/usr/lib/x86_64-linux-gnu/gstreamer-1.0
  mkdir -p /tmp/gst-plugins
  ln -sf "$plugins/libgstvideo4linux2.so" "$plugins/libgstcoreelements.so" /tmp/gst-plugins/
  export GST_REGISTRY=/tmp/gst-registry.bin GST_PLUGIN_SYSTEM_PATH=/tmp/gst-plugins GST_REGISTRY_FORK=no
  gst-inspect-1.0 fakesink >/dev/null 2>&1
  # One worker per device (DEV1,DEV2,...: nodes of the same camera), each taking every Nth request; each worker's
  # outputs are printed whole when it is done, so that they do not interleave.
  n=$(echo "$devs" | tr ',' '\n' | grep -c .)
  i=0
  for dev in $(echo "$devs" | tr ',' ' '); do
    grep -v '^#' "$requests" | grep '|' | awk -v n="$n" -v i="$i" '(NR - 1) % n == i' | while IFS= read -r line; do
      id=$(echo "$line" | cut -d'|' -f1 | tr -d ' ')
      rest=${line#*|}; rest=${rest#*|}; rest=${rest#*|}; cmd=${rest#*|}
      [ "${LAB_RESET:-1}" = 1 ] && v4l2-ctl -d "$dev" -i 0 -v width=3840,height=2160,pixelformat=GREY -p 1 >/dev/null 2>&1
      echo "NEGOTIATION-BEGIN $id"
      t0=$(date +%s%N)
      DEV=$dev timeout 60 sh -c "$cmd" </dev/null 2>&1
      code=$?
      echo "NEGOTIATION-END $id $code $(( ($(date +%s%N) - t0) / 1000000 )) ms $dev"
    done > "/tmp/negotiation-$i.log" &
    i=$((i + 1))
  done
  wait
  i=0
  while [ "$i" -lt "$n" ]; do cat "/tmp/negotiation-$i.log"; i=$((i + 1)); done
  ;;
split)
  console=${2:?console log}; out=${3:?results folder}
  mkdir -p "$out"
  tr -d '\r' < "$console" | awk -v dir="$out" '
    $1 == "NEGOTIATION-BEGIN" { file = dir "/" $2 ".txt"; printf "" > file; on = 1; next }
    $1 == "NEGOTIATION-END" { on = 0; close(file); next }
    on { print >> file }'
  ls "$out" | wc -l | awk '{print $1 " outputs in '"$out"'"}'
  ;;
*)
  sed -n '2,13p' "$0"; exit 2 ;;
esac
