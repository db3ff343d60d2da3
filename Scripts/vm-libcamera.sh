#!/bin/sh
# libcamera on vimc (#52), the VM's stage and its judge. Scripts/vivid-vm-test.sh loads vimc.ko after vivid-check and
# runs `run` inside the host's root (chroot /host, where libcamera, its IPA and `cam` are), then `judge` on the host.
#
#   vm-libcamera.sh run CAMCAP          in the VM's chroot (/run a tmpfs): fakes udev's entries (libcamera sees no
#                                       camera without them), turns vimc's on-screen text off (so every frame is the
#                                       same picture), lists cameras with `camcap devices`, records 30 frames at a
#                                       requested 640x480 to MP4, traces 5 raw frames (`camcap trace record`) and
#                                       captures 5 of the same configuration with libcamera's own `cam`; hands the
#                                       files over on the console (FILE-BEGIN NAME SIZE / base64 / FILE-END, gzipped)
#   vm-libcamera.sh judge CONSOLE DIR   on the host: extracts the files into DIR and prints one line per verdict,
#                                       `JUDGE 1|0 NAME | DETAIL` (vivid-vm-test.sh hands them to its `judge`)
set -u
mode=${1:-}

# The camera vimc's libcamera pipeline offers: libcamera's BGR888 is R,G,B in memory (V4L2 RGB3).
W=640 H=480 CAM_FORMAT=BGR888 OUR_FORMAT=RGB3 FRAMES=30 RAW_FRAMES=5

hand_over() { # hand_over FILE NAME: gzipped, base64 on the console
  gzip -c "$1" > "$1.gz"
  echo "FILE-BEGIN $2.gz $(wc -c < "$1.gz")"
  base64 "$1.gz"
  echo "FILE-END"
}

# commands CAMCAP ID OUT: preview (Y4M), stream (RTP to ffmpeg from camcap's SDP), rtsp (ffmpeg over TCP) and serve
# (GET /snapshot.jpg and /stats) on the libcamera camera; the files are handed over for the host's judge.
commands() {
  c=$1 id=$2 o=$3
  "$c" preview -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames 10 --y4m "$o/preview.y4m" > "$o/preview.out" 2>&1
  echo "LIBCAMERA-PREVIEW-EXIT $?"
  [ -s "$o/preview.y4m" ] && hand_over "$o/preview.y4m" libcamera-preview.y4m
  # stream: the SDP first, ffmpeg listening on it, then 30 frames; camcap's RTCP BYE ends ffmpeg's input.
  "$c" stream -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --to 127.0.0.1:5004 --sdp "$o/stream.sdp" --sdp-only > "$o/sdp.out" 2>&1
  timeout -k 2 30 ffmpeg -y -v warning -protocol_whitelist file,udp,rtp -i "$o/stream.sdp" -fps_mode passthrough -f framemd5 "$o/stream.framemd5" > "$o/stream-ffmpeg.out" 2>&1 &
  f=$!
  i=0; while [ $i -lt 50 ] && ! grep -q ':138C ' /proc/net/udp 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  "$c" stream -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --to 127.0.0.1:5004 --frames 30 > "$o/stream.out" 2>&1
  echo "LIBCAMERA-STREAM-EXIT $?"
  wait $f; echo "LIBCAMERA-STREAM-FFMPEG-EXIT $?"
  tr '\r' '\n' < "$o/stream.out" | grep -E '^(frames|rtp|sent|packets)' | sed 's/^/LIBCAMERA-STREAM /'
  head -5 "$o/stream-ffmpeg.out" | sed 's/^/LIBCAMERA-STREAM-FFMPEG /'
  [ -s "$o/stream.framemd5" ] && hand_over "$o/stream.framemd5" libcamera-stream.framemd5
  # rtsp: ffmpeg over TCP copies 20 pictures, then camcap is interrupted as by Ctrl-C.
  "$c" rtsp -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --listen 127.0.0.1:8554 --no-auth > "$o/rtsp.out" 2>&1 &
  r=$!
  i=0; while [ $i -lt 100 ] && ! grep -q 'rtsp://' "$o/rtsp.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  url=$(grep -o 'rtsp://[^ ]*' "$o/rtsp.out" | head -1)
  timeout -k 2 30 ffmpeg -y -v error -rtsp_transport tcp -i "$url" -frames:v 20 -c copy "$o/rtsp.mp4" > "$o/rtsp-ffmpeg.out" 2>&1
  echo "LIBCAMERA-RTSP-FFMPEG-EXIT $? $url"
  kill -INT $r; wait $r; echo "LIBCAMERA-RTSP-EXIT $?"
  [ -s "$o/rtsp.mp4" ] && hand_over "$o/rtsp.mp4" libcamera-rtsp.mp4
  # serve: a still through the server's own capture, and its stats.
  "$c" serve -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --listen 127.0.0.1:8089 --no-auth > "$o/serve.out" 2>&1 &
  r=$!
  i=0; while [ $i -lt 100 ] && ! grep -q 'snapshot.jpg' "$o/serve.out" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  curl -s -m 15 -o "$o/snapshot.jpg" -w '%{http_code}' http://127.0.0.1:8089/snapshot.jpg > "$o/snapshot.code" 2>&1
  echo "LIBCAMERA-SERVE-SNAPSHOT $(cat "$o/snapshot.code") $(wc -c < "$o/snapshot.jpg" 2>/dev/null)"
  kill -INT $r; wait $r; echo "LIBCAMERA-SERVE-EXIT $?"
  grep '^serving libcamera' "$o/serve.out" | head -1 | sed 's/^/LIBCAMERA-SERVE /'
  [ -s "$o/snapshot.jpg" ] && hand_over "$o/snapshot.jpg" libcamera-snapshot.jpg
  # publish: WHIP into a private Janus (Scripts/janus-env.sh: the host's janus and simple-whip-server, loopback
  # only); Janus's receiver reports (the rtt on the progress line) show it received and decrypted the media.
  # (Janus was started in the background at the stage's start: it takes about a minute under the VM's emulation.)
  i=0; while [ $i -lt 1200 ] && [ ! -f "$o/janus.rc" ]; do sleep 0.1; i=$((i + 1)); done
  echo "LIBCAMERA-PUBLISH-JANUS ready after $(( $(date +%s) - t0 )) s of the stage"
  if [ "$(cat "$o/janus.rc" 2>/dev/null)" = 0 ]; then
    p0=$(date +%s)
    . "$o/janus/env"
    printf %s "$WHIP_TOKEN" > "$o/janus/token"
    "$c" publish -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --whip "$WHIP_URL" --token-file "$o/janus/token" --duration 8 > "$o/publish.out" 2>&1
    echo "LIBCAMERA-PUBLISH-EXIT $?"
    echo "LIBCAMERA-PUBLISH-JANUS publish took $(( $(date +%s) - p0 )) s"
    bash "$(dirname "$0")/janus-env.sh" stop "$o/janus" > /dev/null 2>&1
  else
    echo "LIBCAMERA-PUBLISH-EXIT janus did not start: $(tail -3 "$o/janus.out" | tr '\n' ' ')"
    touch "$o/publish.out"
  fi
  tr '\r' '\n' < "$o/publish.out" | grep -E '^(publishing|whip:|frames:)|rtt [0-9]' | tail -4 | sed 's/^/LIBCAMERA-PUBLISH /'
  for f in preview stream rtsp rtsp-ffmpeg stream-ffmpeg serve publish; do
    tr '\r' '\n' < "$o/$f.out" | grep -iE 'error|fail|lost' | head -2 | sed "s/^/LIBCAMERA-LOG $f: /"
  done
}

if [ "$mode" = run ]; then
  camcap=${2:-/tmp/camcap}
  out=/tmp/libcamera-out
  rm -rf "$out"; mkdir -p "$out/cam"
  t0=$(date +%s)
  ip link set lo up 2>/dev/null # stream, rtsp, serve and publish talk over loopback, which the bare VM leaves down
  # Janus and simple-whip-server for `publish` (Scripts/janus-env.sh), started now: ready by the time it runs.
  ( SVC_CACHE=/root/.cache/swift-video-capture JANUS_DEADLINE=120 bash "$(dirname "$0")/janus-env.sh" start "$out/janus" > "$out/janus.out" 2>&1
    echo $? > "$out/janus.rc" ) &
  # libcamera enumerates through udev and skips devices udev has not initialised: fake their entries.
  mkdir -p /run/udev/data
  for d in /sys/bus/media/devices/* /sys/class/video4linux/*; do
    [ -f "$d/dev" ] && echo I:1 > "/run/udev/data/c$(cat "$d/dev")"
  done
  # vimc's sensors draw their settings and a running clock over the bars by default: "Show Information" None.
  for d in /sys/class/video4linux/v4l-subdev*; do
    case "$(cat "$d/name" 2>/dev/null)" in Sensor*) v4l2-ctl -d "/dev/${d##*/}" -c show_information=2 2>&1 | sed 's/^/LIBCAMERA-NOTE v4l2-ctl: /' ;; esac
  done
  a=$(date +%s%N)
  cam -l 2>/dev/null | sed 's/^/LIBCAMERA-CAM-LIST /'
  b=$(date +%s%N)
  echo "LIBCAMERA-CAM-LIST-MS $(( (b - a) / 1000000 ))"
  a=$(date +%s%N)
  "$camcap" devices > "$out/devices.txt" 2> "$out/devices.err"
  b=$(date +%s%N)
  echo "LIBCAMERA-DEVICES-MS $(( (b - a) / 1000000 ))"
  grep '^libcamera:' "$out/devices.txt" | sed 's/^/LIBCAMERA-DEVICE /'
  sed 's/^/LIBCAMERA-DEVICES-STDERR /' "$out/devices.err"
  id=$(grep '^libcamera:' "$out/devices.txt" | grep 'Sensor B' | head -1 | cut -f1)
  [ -n "$id" ] || id=$(grep '^libcamera:' "$out/devices.txt" | head -1 | cut -f1)
  if [ -z "$id" ]; then
    echo "LIBCAMERA-FAILED camcap devices lists no libcamera camera"
  else
    echo "LIBCAMERA-ID $id"
    "$camcap" controls -d "$id" 2>&1 | sed 's/^/LIBCAMERA-CONTROLS /'
    "$camcap" formats -d "$id" > "$out/formats.txt" 2>&1
    head -20 "$out/formats.txt" | sed 's/^/LIBCAMERA-FORMATS /'
    # Negotiation is provider-neutral: the listing as a fixture file gets the same answers as the camera.
    for q in "-s 1280x720" "-s 300x200 --fps-limit 15" "-s 800x600 --pixel-format BGR3"; do
      a=$("$camcap" select -d "$id" $q 2>&1); b=$("$camcap" select -d "$out/formats.txt" $q 2>&1)
      [ "$a" = "$b" ] && echo "LIBCAMERA-SELECT same $q: $a" || echo "LIBCAMERA-SELECT differ $q: $a | fixture: $b"
    done
    "$camcap" record -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames $FRAMES -o "$out/libcamera.mp4" > "$out/record.out" 2> "$out/record.err"
    echo "LIBCAMERA-RECORD-EXIT $?"
    sed 's/^/LIBCAMERA-RECORD /' "$out/record.out" "$out/record.err" | tr '\r' '\n' | grep -v '^$' | tail -12
    # --libcamera-size crop: a size libcamera makes that covers 640x480, cropped back to it.
    "$camcap" record -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames 10 --libcamera-size crop -o "$out/libcamera-crop.mp4" > "$out/crop.out" 2>&1
    echo "LIBCAMERA-CROP-EXIT $?"
    tr '\r' '\n' < "$out/crop.out" | grep -E '^(recording|format|frames|camcap)' | sed 's/^/LIBCAMERA-CROP /'
    "$camcap" trace record -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames $RAW_FRAMES -o "$out/libcamera.camtrace" > "$out/trace.out" 2>&1
    echo "LIBCAMERA-TRACE-EXIT $?"
    tr '\r' '\n' < "$out/trace.out" | grep -v '^$' | tail -4 | sed 's/^/LIBCAMERA-TRACE /'
    # The same configuration through libcamera's own application.
    cam -c 1 --capture=$RAW_FRAMES -s role=viewfinder,width=$W,height=$H,pixelformat=$CAM_FORMAT --file="$out/cam/" > "$out/cam.out" 2>&1
    echo "LIBCAMERA-CAM-EXIT $?"
    grep -v '^\[' "$out/cam.out" | tail -8 | sed 's/^/LIBCAMERA-CAM /'
    [ -s "$out/libcamera.mp4" ] && hand_over "$out/libcamera.mp4" libcamera.mp4
    [ -s "$out/libcamera-crop.mp4" ] && hand_over "$out/libcamera-crop.mp4" libcamera-crop.mp4
    [ -s "$out/libcamera.camtrace" ] && hand_over "$out/libcamera.camtrace" libcamera.camtrace
    last=$(ls "$out/cam" | sort | tail -1)
    [ -n "$last" ] && { echo "LIBCAMERA-CAM-FILE $last $(ls "$out/cam" | wc -l)"; hand_over "$out/cam/$last" libcamera-cam.bin; }
    # A control through libcamera's requests: Brightness +0.5 (ours: 50 hundredths) lifts the black bar.
    "$camcap" record -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames 10 --control brightness=50 -o "$out/libcamera-bright.mp4" > "$out/bright.out" 2>&1
    echo "LIBCAMERA-BRIGHT-EXIT $?"
    tr '\r' '\n' < "$out/bright.out" | grep -iE 'error|control' | head -3 | sed 's/^/LIBCAMERA-BRIGHT /'
    [ -s "$out/libcamera-bright.mp4" ] && hand_over "$out/libcamera-bright.mp4" libcamera-bright.mp4
    # Every other command on the same camera (they share record's capture path; each is judged on what comes out).
    commands "$camcap" "$id" "$out"
    # Allocations per frame on libcamera's path: an LD_PRELOAD malloc counter over a 20- and an 80-frame record.
    if gcc -O2 -shared -fPIC -o "$out/libmc.so" "$(dirname "$0")/malloc-count.c" 2>"$out/mc.err"; then
      for n in 20 80; do
        LD_PRELOAD="$out/libmc.so" MALLOC_COUNT_AT_EXIT=1 "$camcap" record -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames $n -q -o "$out/mc-$n.mp4" > "$out/mc-$n.out" 2>&1
        echo "LIBCAMERA-MALLOC $n $? $(grep -o 'MALLOCS [0-9]*' "$out/mc-$n.out" | tail -1 | cut -d' ' -f2)"
        # libcamera's own application on the same configuration: what libcamera itself allocates per frame.
        LD_PRELOAD="$out/libmc.so" MALLOC_COUNT_AT_EXIT=1 cam -c 1 --capture=$n -s role=viewfinder,width=$W,height=$H,pixelformat=$CAM_FORMAT > "$out/mc-cam-$n.out" 2>&1
        echo "LIBCAMERA-MALLOC-CAM $n $? $(grep -o 'MALLOCS [0-9]*' "$out/mc-cam-$n.out" | tail -1 | cut -d' ' -f2)"
      done
    else
      echo "LIBCAMERA-MALLOC none: $(head -1 "$out/mc.err")"
    fi
    # The camera removed while it streams (vimc unbound from its driver): the recording must end, by name.
    LIBCAMERA_LOG_LEVELS='*:ERROR' "$camcap" record -d "$id" -s ${W}x$H --pixel-format $OUR_FORMAT --frames 100000 --stall-timeout 2 -o "$out/libcamera-unplug.mp4" > "$out/unplug.out" 2>&1 &
    pid=$!
    i=0; while [ $i -lt 50 ] && ! grep -q 'frames' "$out/unplug.out" 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    sleep 1
    for d in /sys/bus/platform/drivers/vimc/vimc.*; do [ -e "$d" ] && echo "${d##*/}" > /sys/bus/platform/drivers/vimc/unbind; done
    u0=$(date +%s)
    i=0; while [ $i -lt 150 ] && kill -0 $pid 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    if kill -0 $pid 2>/dev/null; then echo "LIBCAMERA-UNPLUG still running 30 s after the unbind"; kill $pid; fi
    wait $pid; echo "LIBCAMERA-UNPLUG-EXIT $? after $(( $(date +%s) - u0 )) s"
    tr '\r' '\n' < "$out/unplug.out" | grep -E 'ERROR|FATAL|Fatal|crashed|error|^[0-9]+ .* in ' | head -40 | sed 's/^/LIBCAMERA-UNPLUG-LOG /'
    tr '\r' '\n' < "$out/unplug.out" | grep -E 'error|lost|frames:|disconnect|no frame' | head -4 | sed 's/^/LIBCAMERA-UNPLUG /'
    # vimc bound again, for whatever runs after this stage (new nodes: their udev entries faked too).
    for d in /sys/devices/platform/vimc.*; do [ -e "$d" ] && echo "${d##*/}" > /sys/bus/platform/drivers/vimc/bind; done
    sleep 1
    for d in /sys/bus/media/devices/* /sys/class/video4linux/*; do
      [ -f "$d/dev" ] && echo I:1 > "/run/udev/data/c$(cat "$d/dev")"
    done
    echo "LIBCAMERA-REBOUND $("$camcap" devices 2>/dev/null | grep -c '^libcamera:') libcamera camera(s) listed after vimc was bound again"
  fi
  [ -f "$out/janus/janus.pid" ] && bash "$(dirname "$0")/janus-env.sh" stop "$out/janus" > /dev/null 2>&1
  echo "LIBCAMERA-STAGE-TIME $(( $(date +%s) - t0 ))"
  exit 0
fi

if [ "$mode" = judge ]; then
  console=$2 dir=$3
  mkdir -p "$dir"
  tr -d '\r' < "$console" | awk -v d="$dir" '$1=="FILE-BEGIN" && $2 ~ /^libcamera/ {f=d"/"$2".b64"; next} $1=="FILE-END"{if(f!="")close(f); f=""; next} f!=""{print > f}'
  for b in "$dir"/libcamera*.b64; do
    [ -f "$b" ] || continue
    base64 -d "$b" 2>/dev/null | gzip -dc > "${b%.gz.b64}" 2>/dev/null || true
    rm -f "$b"
  done
  line() { tr -d '\r' < "$console" | awk -v k="$1" '$1==k {sub(/^[^ ]* /, ""); print; exit}'; }
  n=$(tr -d '\r' < "$console" | grep -c '^LIBCAMERA-DEVICE ')
  ms=$(line LIBCAMERA-DEVICES-MS)
  id=$(line LIBCAMERA-ID)
  echo "JUDGE $([ "$n" -ge 1 ] && [ -n "$id" ] && echo 1 || echo 0) libcamera on vimc: camcap devices lists it | $n libcamera camera(s) in ${ms:-?} ms (cam -l: $(line LIBCAMERA-CAM-LIST-MS) ms); recorded from '$id'; stage $(line LIBCAMERA-STAGE-TIME) s in the VM"
  mode_line=$(tr -d '\r' < "$console" | grep '^LIBCAMERA-RECORD recording ' | head -1 | sed 's/^LIBCAMERA-RECORD //')
  # The size camcap negotiated and libcamera applied: the start line says `… RGB3 636x480 …`.
  size=$(echo "$mode_line" | grep -o '[0-9]\{2,5\}x[0-9]\{2,5\}' | tail -1)
  got=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=width,height,nb_read_frames -of csv=p=0 "$dir/libcamera.mp4" 2>/dev/null | tr -d ' \n')
  echo "JUDGE $([ -n "$size" ] && [ "$got" = "${size%x*},${size#*x},$FRAMES" ] && echo 1 || echo 0) libcamera on vimc: record at a requested ${W}x$H decodes to $FRAMES frames at the applied size | ffprobe: ${got:-nothing}; camcap: ${mode_line:-no start line}"
  # Frames read in place: the summary's frames line counts them (`zero-copy N`).
  fl=$(tr -d '\r' < "$console" | grep '^LIBCAMERA-RECORD frames:' | head -1 | sed 's/^LIBCAMERA-RECORD //')
  zc=$(echo "$fl" | grep -o 'zero-copy [0-9]*' | grep -o '[0-9]*$')
  echo "JUDGE $([ "${zc:-0}" -gt 0 ] && echo 1 || echo 0) libcamera on vimc: frames read in place from libcamera's buffers (zero-copy) | ${fl:-no frames line}"
  pub=$(tr -d '\r' < "$console" | grep -E '^LIBCAMERA-PUBLISH' | sed 's/^LIBCAMERA-PUBLISH[-A-Z]* //' | tr '\n' ';')
  echo "JUDGE $(tr -d '\r' < "$console" | grep -q '^LIBCAMERA-PUBLISH-EXIT 0$' && echo "$pub" | grep -q 'whip connected, rtt [0-9]' && echo "$pub" | grep -q 'whip: *1 connection' && echo 1 || echo 0) libcamera on vimc: publish over WHIP into Janus, which reports receiving the media (RTCP receiver reports) | $pub"
  sel_same=$(tr -d '\r' < "$console" | grep -c '^LIBCAMERA-SELECT same ')
  sel_all=$(tr -d '\r' < "$console" | grep -c '^LIBCAMERA-SELECT ')
  echo "JUDGE $([ "$sel_all" -ge 3 ] && [ "$sel_same" = "$sel_all" ] && echo 1 || echo 0) libcamera on vimc: select answers as for its listing as a fixture file | $sel_same of $sel_all queries the same; $(tr -d '\r' < "$console" | grep '^LIBCAMERA-SELECT' | head -2 | sed 's/^LIBCAMERA-SELECT //' | tr '\n' ';')"
  unplug=$(tr -d '\r' < "$console" | grep -E '^LIBCAMERA-UNPLUG( |-EXIT)' | sed 's/^LIBCAMERA-UNPLUG[-A-Z]* //' | tr '\n' ';')
  echo "JUDGE $(tr -d '\r' < "$console" | grep -qE '^LIBCAMERA-UNPLUG-EXIT [1-9]' && tr -d '\r' < "$console" | grep '^LIBCAMERA-UNPLUG ' | grep -q 'libcamera:' && echo 1 || echo 0) libcamera on vimc: a camera removed while recording ends the recording with an error naming it | $unplug"
  got=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=width,height,nb_read_frames -of csv=p=0 "$dir/libcamera-crop.mp4" 2>/dev/null | tr -d ' \n')
  echo "JUDGE $([ "$got" = "$W,$H,10" ] && echo 1 || echo 0) libcamera on vimc: record --libcamera-size crop delivers exactly ${W}x$H | ffprobe: ${got:-nothing}; $(tr -d '\r' < "$console" | grep '^LIBCAMERA-CROP format' | head -1 | sed 's/^LIBCAMERA-CROP //')"
  # Allocations per frame (a figure, not a verdict: the VM's camcap is the debug build, whose generic code allocates
  # where the release build does not; Scripts/vivid-vm-test.sh takes VM_CAMCAP=.build/release/camcap for the figure).
  per() { tr -d '\r' < "$console" | awk -v k="$1" '$1==k && $2==20 {a=$4} $1==k && $2==80 {b=$4} END {if (a != "" && b != "") printf "%.1f", (b - a) / 60; else printf "?"}'; }
  echo "FIGURE libcamera on vimc: heap allocations per frame in steady state (an LD_PRELOAD counter, 80 frames against 20): camcap record $(per LIBCAMERA-MALLOC), libcamera's own cam $(per LIBCAMERA-MALLOC-CAM)"
  python3 - "$dir" "${size:-0x0}" <<'PY'
import os, struct, subprocess, sys
d, size = sys.argv[1], sys.argv[2]
w, h = (int(v) for v in size.split("x"))
def say(ok, name, detail): print(f"JUDGE {1 if ok else 0} libcamera on vimc: {name} | {detail}")
# 75 % colour bars, left to right: white, yellow, cyan, green, magenta, red, blue, black, as (R, G, B) on or off.
BARS = [(1,1,1), (1,1,0), (0,1,1), (0,1,0), (1,0,1), (1,0,0), (0,0,1), (0,0,0)]
def bars(rgb, w, h, stride):
    """Each bar's centre on the middle row, as on/off per channel (above half of full scale)."""
    y = h // 2
    got = []
    for i in range(8):
        x = (2 * i + 1) * w // 16
        p = rgb[y * stride + 3 * x: y * stride + 3 * x + 3]
        got.append(tuple(int(c > 96) for c in p))
    return got
# Our raw frames: the trace's frame records (header: magic, version, JSON length, JSON; records: 24-byte heads).
frames, header = [], {}
try:
    t = open(os.path.join(d, "libcamera.camtrace"), "rb").read()
    assert t[:8] == b"CAMTRACE"
    n = struct.unpack_from("<I", t, 12)[0]
    import json
    header = json.loads(t[16:16 + n])
    o = 16 + n
    while o + 24 <= len(t):
        kind, _, _, length, ts, seq = struct.unpack_from("<BBHIqQ", t, o)
        o += 24
        if kind == 1: frames.append(t[o:o + length])
        o += length
except Exception as e:
    say(False, "camcap's raw frames (trace)", f"unreadable: {e}")
cam = open(os.path.join(d, "libcamera-cam.bin"), "rb").read() if os.path.exists(os.path.join(d, "libcamera-cam.bin")) else b""
if frames and cam:
    tw, th, ts = header.get("width", 0), header.get("height", 0), header.get("stride", 0)
    row = tw * 3
    # cam writes the whole buffer: rows at libcamera's stride (at least the row), which its size tells.
    cs = len(cam) // th if th else 0
    same = [all(f[y * ts: y * ts + row] == cam[y * cs: y * cs + row] for y in range(th)) for f in frames] if cs >= row else []
    say(tw == w and th == h and same and all(same), f"camcap's raw frames equal cam's ({header.get('pixelFormat')} {tw}x{th})",
        f"{sum(same)} of {len(frames)} traced frames byte for byte equal to cam's last frame ({len(cam)} bytes, stride {cs}; ours {ts})")
    got = bars(frames[-1], tw, th, ts)
    say(got == BARS, "colour order on the bars (R,G,B in memory)", f"bars {got}")
    cgot = bars(cam, tw, th, cs)
    say(cgot == BARS, "cam's frame shows the same bars", f"bars {cgot}")
else:
    say(False, "camcap's raw frames equal cam's", f"{len(frames)} traced frames, {len(cam)} bytes from cam")
# The picture check on the recording: its last frame decoded to RGB shows the bars in order.
def decoded_last(path):
    rgb = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True).stdout
    n = len(rgb) // (w * h * 3) if w and h else 0
    return n, (rgb[(n - 1) * w * h * 3: n * w * h * 3] if n else b"")
def black_level(rgb):
    """The mean of the black bar's centre (the eighth bar, middle rows)."""
    vals = [rgb[y * w * 3 + 3 * x + c] for y in range(h // 2 - 8, h // 2 + 8) for x in range(15 * w // 16 - 4, 15 * w // 16 + 4) for c in range(3)]
    return sum(vals) / len(vals)
bright = os.path.join(d, "libcamera-bright.mp4")
if os.path.exists(bright) and os.path.exists(os.path.join(d, "libcamera.mp4")) and w and h:
    (_, plain), (nb, lifted) = decoded_last(os.path.join(d, "libcamera.mp4")), decoded_last(bright)
    if plain and lifted:
        a, b = black_level(plain), black_level(lifted)
        say(b > a + 20, "--control brightness=50 reaches the camera (libcamera Brightness 0.5)", f"black bar {a:.0f} plain, {b:.0f} with it ({nb} frames)")
    else:
        say(False, "--control brightness=50", "a recording did not decode")
else:
    say(False, "--control brightness=50", "no recording")
mp4 = os.path.join(d, "libcamera.mp4")
if os.path.exists(mp4) and w and h:
    rgb = subprocess.run(["ffmpeg", "-v", "error", "-i", mp4, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True).stdout
    n = len(rgb) // (w * h * 3)
    last = rgb[(n - 1) * w * h * 3: n * w * h * 3] if n else b""
    got = bars(last, w, h, w * 3) if last else []
    say(got == BARS, "the recording's picture shows the colour bars in order", f"{n} frames decoded; bars {got}")
else:
    say(False, "the recording's picture", "no recording")
# The other commands on the same camera, each judged by what came out of it.
def decode(path, fmt="rgb24"):
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", fmt, "-"], capture_output=True)
    return r.stdout
def probe(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                        "stream=codec_name,width,height,nb_read_frames", "-of", "csv=p=0", path], capture_output=True, text=True)
    return r.stdout.strip()
p = os.path.join(d, "libcamera-preview.y4m")
if os.path.exists(p) and w and h:
    head = open(p, "rb").read(80).split(b"\n")[0].decode(errors="replace")
    rgb = decode(p)
    n = len(rgb) // (w * h * 3)
    got = bars(rgb[(n - 1) * w * h * 3:], w, h, w * 3) if n else []
    say(n == 10 and f" W{w} H{h} " in head + " " and got == BARS, "preview --y4m: 10 pictures at the applied size with the bars",
        f"{n} pictures; {head}; bars {got}")
else:
    say(False, "preview --y4m", "no Y4M from the VM")
p = os.path.join(d, "libcamera-stream.framemd5")
if os.path.exists(p) and w and h:
    rows = [l for l in open(p).read().splitlines() if l and not l.startswith("#")]
    sizes = {l.split(",")[4].strip() for l in rows if len(l.split(",")) > 5}
    # All 30 frames go out (an RTP log showed 30 timestamps in 32 packets, in order); ffmpeg 5.1 under the VM's
    # emulation has decoded 29 of them in every run so far (one lost at an edge of the session; 30 of 30 on the host).
    say(29 <= len(rows) <= 30 and sizes == {str(w * h * 3 // 2)}, "stream: ffmpeg decodes the RTP frames from camcap's SDP (at least 29 of 30) at the applied size",
        f"{len(rows)} frames; picture sizes {sorted(sizes)} (I420 {w}x{h} is {w * h * 3 // 2})")
else:
    say(False, "stream: ffmpeg from camcap's SDP", "no frames from the VM")
p = os.path.join(d, "libcamera-rtsp.mp4")
got = probe(p) if os.path.exists(p) else ""
say(got == f"h264,{w},{h},20", "rtsp: ffmpeg over TCP takes 20 H.264 pictures at the applied size", f"ffprobe: {got or 'no file'}")
p = os.path.join(d, "libcamera-snapshot.jpg")
if os.path.exists(p) and w and h:
    got_size = probe(p)
    rgb = decode(p)
    got = bars(rgb, w, h, w * 3) if len(rgb) >= w * h * 3 else []
    say(got_size.startswith("mjpeg,") and got == BARS, "serve: GET /snapshot.jpg is a JPEG of the camera's bars", f"ffprobe: {got_size}; bars {got}")
else:
    say(False, "serve: GET /snapshot.jpg", "no JPEG from the VM")
PY
  exit 0
fi
echo "usage: vm-libcamera.sh run [CAMCAP] | judge CONSOLE DIR" >&2
exit 2
