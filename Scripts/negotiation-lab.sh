#!/bin/sh
# The negotiation lab's differential (issue #49, docs/cameras.md "Negotiation lab: policies"): GStreamer and ffmpeg
# negotiate on vivid in the VM, and NegotiationLabTests compares what they got with SelectionPolicy's picks.
#
#   Scripts/negotiation-lab.sh files
#       (host) the files the VM's initramfs needs besides busybox and v4l2-ctl: gst-launch-1.0, the v4l2 and
#       core-elements plugins, the plugin scanner, ffmpeg, and every library they load (ldd), one path a line.
#   Scripts/negotiation-lab.sh run DEV [REQUESTS]
#       (VM, busybox sh) each request of REQUESTS (default Fixtures/negotiation/requests.txt) on DEV (a single-planar
#       vivid node): resets the node to GREY 3840x2160 @ 1 fps on input 0 (the webcam), runs the command, and prints
#       its output between "NEGOTIATION-BEGIN ID" and "NEGOTIATION-END ID EXIT".
#   Scripts/negotiation-lab.sh split CONSOLE RESULTS
#       (host) writes each request's output from the VM's console log to RESULTS/ID.txt; then
#       NEGOTIATION_RESULTS=RESULTS swift test --filter realProgramsAgreeWithThePolicies
set -u
here=$(dirname "$0")
case "${1:-}" in
files)
  plugins=/usr/lib/x86_64-linux-gnu/gstreamer-1.0
  scanner=/usr/lib/x86_64-linux-gnu/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner
  for f in /usr/bin/gst-launch-1.0 "$plugins/libgstvideo4linux2.so" "$plugins/libgstcoreelements.so" "$scanner" /usr/bin/ffmpeg; do
    echo "$f"
    ldd "$f" | awk '/=>/{print $3} /^\s*\/lib/{print $1}'
  done | sort -u
  ;;
run)
  dev=${2:?device}
  requests=${3:-$here/../Fixtures/negotiation/requests.txt}
  export GST_REGISTRY=/tmp/gst-registry.bin GST_PLUGIN_SYSTEM_PATH=/usr/lib/x86_64-linux-gnu/gstreamer-1.0 GST_REGISTRY_FORK=no
  grep -v '^#' "$requests" | grep '|' | while IFS= read -r line; do
    id=$(echo "$line" | cut -d'|' -f1 | tr -d ' ')
    rest=${line#*|}; rest=${rest#*|}; rest=${rest#*|}; cmd=${rest#*|}
    v4l2-ctl -d "$dev" -i 0 -v width=3840,height=2160,pixelformat=GREY -p 1 >/dev/null 2>&1
    echo "NEGOTIATION-BEGIN $id"
    DEV=$dev timeout 60 sh -c "$cmd" </dev/null 2>&1
    code=$?
    echo "NEGOTIATION-END $id $code"
  done
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
  sed -n '2,15p' "$0"; exit 2 ;;
esac
