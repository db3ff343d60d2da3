#!/usr/bin/env bash
# PipeWire's own camera nodes (#52), run by Scripts/vivid-vm-test.sh inside the VM, in `chroot /host` (the host's
# root, read-only over 9p, with tmpfs on /tmp and /run): pipewire and wireplumber headless (Scripts/pipewire-session.sh:
# dbus-run-session, a private XDG_RUNTIME_DIR), wireplumber's V4L2 monitor exposing vivid and its libcamera monitor
# exposing vimc (the modules are loaded by the VM's init). Then:
#   - `camcap devices` lists both as pipewire: nodes;
#   - `camcap record -d pipewire:NODE --frames 30` to MP4 (with a Y4M preview of the same frames) from each, handed
#     to the host (FILE-BEGIN NAME SIZE / base64 / FILE-END), whose ffprobe decodes them at the negotiated size;
#   - a picture check: the mean Y, U and V of each of the eight colour bars (vivid's and vimc's test pattern is the
#     same: 75 % colour bars) in every recorded frame, against a direct V4L2 read of vivid (v4l2-ctl, YUYV, before
#     PipeWire opens the device). vimc through libcamera has its quirks named, not hidden: PipeWire 0.3.65's
#     libcamera node labels R,G,B bytes BGR (so red/blue and yellow/cyan bars swap places) and announces the size
#     asked for where libcamera adjusted it (640 for 636);
#   - device nodes' frames copied: a node of PipeWire's device monitors reuses its buffers at its next cycle, so
#     no record from one reads a buffer in place (its summary counts no zero-copy frame);
#   - controls through PipeWire: `camcap controls -d pipewire:NODE` lists vivid's controls as its V4L2 node offers them
#     (PropInfo), each with v4l2-ctl's id, type, range and default; brightness=200 set through PipeWire (a Props param)
#     reads back 200 with v4l2-ctl.
# Prints PASS/FAIL lines (prefixed "pipewire:"), PIPEWIRE-RECORD NAME WxH FRAMES for the host, and exits non-zero when
# a check failed.
#
#   chroot /host bash /tmp/lab/Scripts/vm-pipewire.sh CAMCAP [SIZE [VIMC_SIZE]]     (default 640x480 for vivid, 720x480 for vimc)
#
# What wireplumber needs in a bare VM: /run/systemd/{seats,sessions,users,machines} (it watches logind) and udev
# entries under /run/udev/data (libudev calls a device without one uninitialized, and both monitors then skip it).
set -u
CAMCAP=${1:?usage: vm-pipewire.sh CAMCAP [SIZE]}
SIZE=${2:-640x480}
# vimc through libcamera at a size libcamera keeps (a width and height that are multiples of 6).
VIMC_SIZE=${3:-720x480}
HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/pw
rm -rf "$W"; mkdir -p "$W"
t0=$(date +%s.%N)
passed=0 failed=0
check() { # check NAME OK DETAIL
  if [ "$2" = 1 ]; then echo "PASS pipewire: $1 ($3)"; passed=$((passed + 1)); else echo "FAIL pipewire: $1: $3"; failed=$((failed + 1)); fi
}
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}'; }

mkdir -p /run/systemd/seats /run/systemd/sessions /run/systemd/users /run/systemd/machines /run/udev/data
for d in /sys/bus/media/devices/* /sys/class/video4linux/*; do [ -f "$d/dev" ] && echo I:1 > "/run/udev/data/c$(cat "$d/dev")"; done

# vivid's first camera, on its webcam input with the colour bars, read directly (V4L2, YUYV) as the reference.
vdev=""
for v in /sys/class/video4linux/video*; do
  [ "$(cat "$v/name")" = vivid-000-vid-cap ] && vdev=/dev/$(basename "$v")
done
[ -n "$vdev" ] || { check "vivid's first camera" 0 "no video node named vivid-000-vid-cap"; echo "PIPEWIRE-RESULT 0 passed, 1 failed"; exit 1; }
v4l2-ctl -d "$vdev" -i 0 >/dev/null
v4l2-ctl -d "$vdev" -c test_pattern=0,horizontal_flip=0,vertical_flip=0 >/dev/null 2>&1
ref_out=$(v4l2-ctl -d "$vdev" --set-fmt-video=width="${SIZE%x*}",height="${SIZE#*x}",pixelformat=YUYV --stream-mmap --stream-count=3 \
  --stream-to="$W/ref.yuyv" 2>&1)
check "direct V4L2 read of $vdev (YUYV $SIZE, 3 frames)" "$([ "$(stat -c %s "$W/ref.yuyv" 2>/dev/null)" = $((${SIZE%x*} * ${SIZE#*x} * 6)) ] && echo 1 || echo 0)" \
  "$(stat -c %s "$W/ref.yuyv" 2>/dev/null || echo no) bytes; $(echo "$ref_out" | tail -c 200 | tr '\n' ' ')"

# Inside the session: wait for both nodes, then list, record and judge.
cat > "$W/inner.sh" <<'INNER'
set -u
W=/tmp/pw
# The nodes appear as the monitors find the devices: polled (0.2 s) until vivid's V4L2 node and a libcamera node are
# there, at most 40 s.
deadline=$(( $(date +%s) + 40 ))
while :; do
  pw-dump > "$W/nodes.json" 2>/dev/null
  python3 - "$W/nodes.json" "$VDEV" > "$W/nodes.txt" <<'PY'
import json, sys
try:
    objs = json.load(open(sys.argv[1]))
except Exception:
    objs = []
v4l2 = lib = ""
for o in objs:
    p = (o.get("info") or {}).get("props") or {}
    if o.get("type") != "PipeWire:Interface:Node" or p.get("media.class") != "Video/Source":
        continue
    if p.get("device.api") == "v4l2" and p.get("api.v4l2.path") == sys.argv[2]:
        v4l2 = p.get("node.name", "")
    if p.get("device.api") == "libcamera" and not lib:
        lib = p.get("node.name", "")
print(v4l2, lib)
PY
  read -r VNODE LNODE < "$W/nodes.txt"
  if [ -n "${VNODE:-}" ] && [ -n "${LNODE:-}" ]; then break; fi
  if [ "$(date +%s)" -ge "$deadline" ]; then break; fi
  sleep 0.2
done
echo "  pipewire nodes after $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}') s: vivid ${VNODE:-none}, libcamera ${LNODE:-none}"
python3 - "$W/nodes.json" <<'PY'
import json, sys
for o in json.load(open(sys.argv[1])):
    p = (o.get("info") or {}).get("props") or {}
    if o.get("type") == "PipeWire:Interface:Node" and p.get("media.class") == "Video/Source":
        print("  node", p.get("node.name"), "|", p.get("node.description"), "|", p.get("device.api"), "|", p.get("api.v4l2.path") or p.get("api.libcamera.path") or p.get("object.path"), "| role", p.get("media.role"))
PY
echo "VNODE=${VNODE:-}; LNODE=${LNODE:-}" > "$W/names"
since() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}'; }
timeout -k 5 60 "$CAMCAP" devices > "$W/devices.txt" 2>&1
rc=$?
echo "DEVICES-RC=$rc" >> "$W/names"
echo "  camcap devices: exit $rc at $(since) s"
for n in vivid:"${VNODE:-}":"$SIZE" vimc:"${LNODE:-}":"$VIMC_SIZE"; do
  IFS=: read -r name node size <<< "$n"
  [ -n "$node" ] || continue
  timeout -s INT -k 5 90 "$CAMCAP" record -d "pipewire:$node" -s "$size" --frames 30 -o "$W/pw-$name.mp4" --preview "$W/pw-$name.y4m" > "$W/record-$name.txt" 2>&1
  rc=$?
  echo "$rc" > "$W/record-$name.rc"
  echo "  camcap record from $name: exit $rc at $(since) s"
done
# Controls through PipeWire: vivid's as its V4L2 node offers them (PropInfo), brightness set through PipeWire and
# read back with a direct V4L2 read (v4l2-ctl), then restored.
if [ -n "${VNODE:-}" ]; then
  timeout -k 5 30 "$CAMCAP" controls -d "pipewire:$VNODE" > "$W/controls.txt" 2>&1
  echo "CONTROLS-RC=$?" >> "$W/names"
  v4l2-ctl -d "$VDEV" -c brightness=128 >/dev/null 2>&1
  timeout -k 5 30 "$CAMCAP" controls -d "pipewire:$VNODE" --set brightness=200 > "$W/controls-set.txt" 2>&1
  echo "SET-RC=$?" >> "$W/names"
  v4l2-ctl -d "$VDEV" -C brightness > "$W/controls-readback.txt" 2>&1
  v4l2-ctl -d "$VDEV" -c brightness=128 >/dev/null 2>&1
  echo "  camcap controls through PipeWire: done at $(since) s"
fi
# The size quirk: libcamera adjusts 640x480 to 636x480 (vimc's widths are multiples of 6 under libcamera 0.0.3), and
# PipeWire 0.3.65's node keeps announcing 640x480: every buffer is shorter than the format says, and camcap drops
# each as a short buffer (no frame comes). A bounded try: 12 s.
if [ -n "${LNODE:-}" ]; then
  timeout -s INT -k 3 12 "$CAMCAP" record -d "pipewire:$LNODE" -s 640x480 --frames 5 -o "$W/quirk.mp4" > "$W/record-quirk.txt" 2>&1
  echo "  camcap record from vimc at 640x480: exit $? at $(since) s"
fi
INNER
export VDEV=$vdev CAMCAP SIZE VIMC_SIZE T0=$t0
mkdir -p "$W/session"
bash "$HERE/pipewire-session.sh" --dir "$W/session" --timeout 40 -- bash "$W/inner.sh"
session_rc=$?
check "pipewire and wireplumber start headless" "$([ $session_rc = 0 ] && echo 1 || echo 0)" "session exit $session_rc after $(elapsed) s"
VNODE="" LNODE="" DEVICES_RC="" CONTROLS_RC="" SET_RC=""
[ -f "$W/names" ] && eval "$(sed 's/DEVICES-RC/DEVICES_RC/; s/CONTROLS-RC/CONTROLS_RC/; s/SET-RC/SET_RC/' "$W/names")"
check "wireplumber's V4L2 monitor exposes $vdev" "$([ -n "$VNODE" ] && echo 1 || echo 0)" "node ${VNODE:-none}"
check "wireplumber's libcamera monitor exposes vimc" "$([ -n "$LNODE" ] && echo 1 || echo 0)" "node ${LNODE:-none}"
listed() { [ -n "$1" ] && grep -q "^pipewire:$1[[:space:]]" "$W/devices.txt" 2>/dev/null && echo 1 || echo 0; }
check "camcap devices lists vivid as pipewire:$VNODE" "$(listed "$VNODE")" "$(grep '^pipewire:' "$W/devices.txt" 2>/dev/null | tr '\t' ' ' | tr '\n' ';') (rc ${DEVICES_RC:-?})"
check "camcap devices lists vimc as pipewire:$LNODE" "$(listed "$LNODE")" "$(grep "^pipewire:$LNODE" "$W/devices.txt" 2>/dev/null | tr '\t' ' ')"

# Controls: every one PipeWire's node lists has v4l2-ctl's id, range and default on the same device; brightness set
# through PipeWire reads back directly.
v4l2-ctl -d "$vdev" --list-ctrls > "$W/v4l2-ctrls.txt" 2>&1
ctl_cmp=$(python3 - "$W/controls.txt" "$W/v4l2-ctrls.txt" <<'PY'
import re, sys
def parse(path):
    out = {}
    for line in open(path, errors="replace"):
        m = re.match(r"\s*(\w+) (0x[0-9a-f]+) \((\w+)\)\s*:(.*)", line)
        if not m: continue
        f = dict(kv.split("=", 1) for kv in m.group(4).split() if "=" in kv)
        out[m.group(1)] = (m.group(2), m.group(3), f.get("min"), f.get("max"), f.get("default"))
    return out
ours, theirs = parse(sys.argv[1]), parse(sys.argv[2])
bad = [f"{k}: {v} vs {theirs.get(k)}" for k, v in ours.items() if theirs.get(k) != v]
missing = sorted(set(theirs) - set(ours))
print(int(len(ours) >= 5 and not bad and "brightness" in ours), f"{len(ours)} controls through PipeWire, {len(theirs)} from v4l2-ctl;"
      f" differing: {'; '.join(bad) or 'none'}; not through PipeWire: {' '.join(f'{k} ({theirs[k][1]})' for k in missing)}")
PY
)
check "camcap controls -d pipewire:$VNODE: the node's controls, as v4l2-ctl lists them on $vdev" "${ctl_cmp%% *}" \
  "exit ${CONTROLS_RC:-?}; ${ctl_cmp#* }$( [ "${CONTROLS_RC:-1}" = 0 ] || tail -c 300 "$W/controls.txt" | tr '\n' ' ')"
readback=$(tr -d ' ' < "$W/controls-readback.txt" 2>/dev/null)
check "brightness=200 set through PipeWire reads back 200 from $vdev (v4l2-ctl)" "$([ "${SET_RC:-1}" = 0 ] && [ "$readback" = "brightness:200" ] && echo 1 || echo 0)" \
  "exit ${SET_RC:-?}, camcap: $(tr '\n' ' ' < "$W/controls-set.txt" 2>/dev/null | tr -s ' ' | tail -c 300); v4l2-ctl: $readback"

for name in vivid vimc; do
  rc=$(cat "$W/record-$name.rc" 2>/dev/null || echo none)
  y4m=$W/pw-$name.y4m
  hdr=$(head -c 200 "$y4m" 2>/dev/null | head -1)
  w=$(echo "$hdr" | tr ' ' '\n' | sed -n 's/^W//p') h=$(echo "$hdr" | tr ' ' '\n' | sed -n 's/^H//p')
  frames=$(python3 -c 'import sys
d = open(sys.argv[1], "rb").read(); h = d[:d.index(b"\n")].split()
w = int([t for t in h if t[:1] == b"W"][0][1:]); hh = int([t for t in h if t[:1] == b"H"][0][1:])
print((len(d) - d.index(b"\n") - 1) // (6 + w * hh * 3 // 2))' "$y4m" 2>/dev/null || echo 0)
  fmt=$(grep '^format:' "$W/record-$name.txt" 2>/dev/null | sed 's/^format: *//')
  check "camcap record from the $name node: 30 frames" "$([ "$rc" = 0 ] && [ "$frames" = 30 ] && echo 1 || echo 0)" \
    "exit $rc, ${w:-?}x${h:-?}, $frames frames in the preview; format $fmt; $(grep -E '^(frames|achieved)' "$W/record-$name.txt" 2>/dev/null | tr -s ' ' | tr '\n' ';') $( [ "$rc" = 0 ] || tail -c 400 "$W/record-$name.txt" | tr '\n' ' ')"
  echo "PIPEWIRE-RECORD pw-$name.mp4 ${w:-0}x${h:-0} $frames"
  # A node of PipeWire's device monitors reuses each buffer at its next cycle whatever its consumers hold: its frames
  # are copied, never read in place (the summary counts no zero-copy frame).
  inplace=$(grep '^frames:' "$W/record-$name.txt" 2>/dev/null | grep -oE 'zero-copy [0-9]+' | grep -oE '[0-9]+')
  check "frames from the $name node (a device node) copied, not read in place" "$([ "$rc" = 0 ] && [ "${inplace:-0}" = 0 ] && echo 1 || echo 0)" \
    "zero-copy ${inplace:-0}; $(grep '^frames:' "$W/record-$name.txt" 2>/dev/null | tr -s ' ')"
done

# The picture check. Per bar, the mean Y, U and V over its middle half (rows in the lower half: vivid's text is at
# the top); each recorded frame against the direct read (vivid), or against the direct read's bars in the expected
# order (vimc: with red and blue exchanged when the quirk is there).
python3 - "$W/ref.yuyv" "$W/pw-vivid.y4m" "$W/pw-vimc.y4m" "${SIZE%x*}" "${SIZE#*x}" > "$W/picture.txt" 2>&1 <<'PY'
import sys
ref_path, vivid_path, vimc_path, RW, RH = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])

def bars_of(getyuv, w, h):
    out = []
    for b in range(8):
        x0, x1 = (b * w) // 8, ((b + 1) * w) // 8
        xs = range(x0 + (x1 - x0) // 4, x1 - (x1 - x0) // 4, 2)
        ys = range(h // 2, h - h // 16, 4)
        acc = [0, 0, 0]; n = 0
        for y in ys:
            for x in xs:
                for i, v in enumerate(getyuv(x, y)): acc[i] += v
                n += 1
        out.append(tuple(round(a / n, 1) for a in acc))
    return out

def ref_bars():
    data = open(ref_path, "rb").read()
    frame = data[-RW * RH * 2:]  # the last of the three frames
    def get(x, y):
        o = y * RW * 2 + (x // 2) * 4
        return frame[o + (x % 2) * 2], frame[o + 1], frame[o + 3]
    return bars_of(get, RW, RH)

def y4m_frames(path):
    data = open(path, "rb").read()
    nl = data.index(b"\n")
    hdr = data[:nl].split()
    w = int([t for t in hdr if t.startswith(b"W")][0][1:]); h = int([t for t in hdr if t.startswith(b"H")][0][1:])
    size = w * h * 3 // 2
    pos, frames = nl + 1, []
    while pos < len(data):
        pos = data.index(b"\n", pos) + 1
        frames.append(data[pos:pos + size]); pos += size
    return w, h, frames

def yuv_getter(f, w, h):
    cw = w // 2
    def get(x, y):
        return f[y * w + x], f[w * h + (y // 2) * cw + x // 2], f[w * h + cw * (h // 2) + (y // 2) * cw + x // 2]
    return get

def diff(a, b): return max(abs(p - q) for u, v in zip(a, b) for p, q in zip(u, v))
def fmt(bars): return " ".join("%d/%d/%d" % tuple(round(c) for c in b) for b in bars)

ref = ref_bars()
# Colour bars: white to black, each bar darker than the one before.
is_bars = all(ref[i][0] > ref[i + 1][0] for i in range(7)) and ref[0][0] - ref[7][0] > 100
print("REF %d %s" % (is_bars, fmt(ref)))
SWAP = [0, 2, 1, 3, 4, 6, 5, 7]  # R and B exchanged: yellow<->cyan, red<->blue
for name, path, tol in (("vivid", vivid_path, 3), ("vimc", vimc_path, 12)):
    try:
        w, h, frames = y4m_frames(path)
    except Exception as e:
        print("PIC %s 0 no frames (%s)" % (name, e)); continue
    worst, worst_swapped, last = 0, 0, None
    for f in frames:
        bars = bars_of(yuv_getter(f, w, h), w, h)
        worst = max(worst, diff(bars, ref)); worst_swapped = max(worst_swapped, diff(bars, [ref[i] for i in SWAP])); last = bars
    if name == "vivid":
        ok = is_bars and worst <= tol and len(frames) > 0
        print("PIC vivid %d %d frames at %dx%d: largest difference of a bar's mean Y/U/V from the direct read %.1f (tolerance %d); bars %s"
              % (ok, len(frames), w, h, worst, tol, fmt(last or [])))
    else:
        quirk = worst_swapped <= tol and worst > tol
        ok = is_bars and len(frames) > 0 and (worst <= tol or quirk)
        print("PIC vimc %d %d frames at %dx%d: largest difference from the direct read's bars %.1f, from them with red and blue exchanged %.1f (tolerance %d)%s; bars %s"
              % (ok, len(frames), w, h, worst, worst_swapped, tol,
                 " - quirk: PipeWire's libcamera node labels R,G,B bytes BGR, so red/blue and yellow/cyan swap" if quirk else "", fmt(last or [])))
PY
ref_line=$(grep '^REF ' "$W/picture.txt")
check "direct V4L2 read of $vdev shows the colour bars" "$(echo "$ref_line" | awk '{print $2}')" "bars Y/U/V: $(echo "$ref_line" | cut -d' ' -f3-)"
for name in vivid vimc; do
  line=$(grep "^PIC $name " "$W/picture.txt")
  check "picture check, $name through PipeWire against the direct V4L2 read" "$(echo "$line" | awk '{print $3}')" \
    "$( [ -n "$line" ] && echo "$line" | cut -d' ' -f4- || tail -c 300 "$W/picture.txt" | tr '\n' ' ')"
done
# vimc at 640x480: what PipeWire's libcamera node announced against what libcamera configured (its log line in
# PipeWire's log) and delivered (camcap counts the buffers shorter than the format as dropped).
q_fmt=$(grep -o 'BGR3 [0-9]*x[0-9]*' "$W/record-quirk.txt" 2>/dev/null | head -1)
q_frames=$(grep '^frames:' "$W/record-quirk.txt" 2>/dev/null | sed 's/^frames: *//')
q_lib=$(grep -ao 'configuring streams: (0) [0-9x]*-[A-Z0-9]*' "$W/session/pipewire.log" 2>/dev/null | grep -v "${VIMC_SIZE}-" | tail -1)
check "quirk named: PipeWire's libcamera node announces 640x480 where libcamera configured 636x480" \
  "$(echo "$q_fmt" | grep -q '640x480' && echo "$q_lib" | grep -q '636x480' && echo 1 || echo 0)" \
  "PipeWire: ${q_fmt:-none}; libcamera: ${q_lib:-no line}; camcap: ${q_frames:-no frame within 12 s}"

for name in vivid vimc; do
  f=$W/pw-$name.mp4
  [ -s "$f" ] || continue
  echo "FILE-BEGIN pw-$name.mp4 $(stat -c %s "$f")"
  base64 -w 76 "$f"
  echo "FILE-END"
done
if [ "$failed" != 0 ]; then
  for f in devices.txt record-vivid.txt record-vimc.txt session/pipewire.log session/wireplumber.log; do
    [ -f "$W/$f" ] && { echo "  --- $f (tail)"; tail -n 15 "$W/$f" | sed 's/^/  /'; }
  done
fi
echo "PIPEWIRE-TIME $(elapsed)"
echo "PIPEWIRE-RESULT $passed passed, $failed failed"
[ "$failed" = 0 ]
