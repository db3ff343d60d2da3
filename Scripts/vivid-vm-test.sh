#!/usr/bin/env bash
# Real-kernel test: boots Debian's kernel under qemu (TCG, no KVM needed) with the vivid virtual camera
# driver (three capture-only cameras: two single-planar, one multi-planar), runs `vivid-check` inside and fails
# if any check fails; on the host, ffprobe decodes what the VM recorded.
#
#   Scripts/vivid-vm-test.sh            build vivid-check, build the initramfs, boot, check
#   VM_CACHE=/path                      where the kernel package is kept (default /var/cache/swift-video-capture)
#   VM_TIMEOUT=540                      seconds before the VM is killed
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${VM_CACHE:-/var/cache/swift-video-capture}
WORK=$ROOT/.build/vm
TIMEOUT=${VM_TIMEOUT:-540}
mkdir -p "$CACHE" "$WORK"
log() { echo "[vivid-vm] $*" >&2; }

Scripts/install-deps.sh test

# 1. The kernel: the version Debian's linux-image-amd64 depends on, unpacked (not installed).
if [ -z "$(ls "$CACHE"/linux-image-*-amd64_*.deb 2>/dev/null)" ]; then
  [ -n "$(ls /var/lib/apt/lists/*Packages 2>/dev/null)" ] || apt-get update -qq
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
  log "downloading $pkg"
  (cd "$CACHE" && apt-get download "$pkg" >/dev/null 2>&1) || (cd "$CACHE" && chmod 777 . && apt-get download "$pkg" >/dev/null)
fi
DEB=$(ls -t "$CACHE"/linux-image-*-amd64_*.deb | head -1)
KROOT=$WORK/kernel
if [ ! -f "$KROOT/.done-$(basename "$DEB")" ]; then
  rm -rf "$KROOT"; mkdir -p "$KROOT"
  dpkg -x "$DEB" "$KROOT"
  touch "$KROOT/.done-$(basename "$DEB")"
fi
KVER=$(ls "$KROOT/lib/modules" | head -1)
VMLINUZ=$KROOT/boot/vmlinuz-$KVER
depmod -b "$KROOT" "$KVER"
# Modules in load order (dependencies first).
MODS=$(modprobe -d "$KROOT" -S "$KVER" --show-depends vivid | awk '$1=="insmod"{print $2}')
[ -n "$MODS" ] || { log "cannot resolve vivid's modules"; exit 1; }

# 2. The check program, and camcap (run inside the VM on a camera that is unplugged mid-recording).
swift build --product vivid-check >/dev/null
swift build --product camcap >/dev/null
BIN=$(swift build --show-bin-path)/vivid-check
CAMCAP=$(swift build --show-bin-path)/camcap

# 3. The initramfs: busybox, modules, the check, v4l2-ctl, and every library they load.
IRD=$WORK/initramfs
rm -rf "$IRD"; mkdir -p "$IRD"/{bin,sbin,proc,sys,dev,tmp,modules,usr/bin,check,etc}
cp /bin/busybox "$IRD/bin/busybox"
for m in $MODS; do cp "$m" "$IRD/modules/"; echo "$(basename "$m")" >> "$IRD/modules/order"; done
cp "$BIN" "$IRD/check/vivid-check"
cp "$CAMCAP" "$IRD/check/camcap"
cp /usr/bin/v4l2-ctl "$IRD/usr/bin/v4l2-ctl"
for exe in "$BIN" "$CAMCAP" /usr/bin/v4l2-ctl; do
  ldd "$exe" | awk '/=>/{print $3} /^\s*\/lib/{print $1}' | while read -r lib; do
    [ -f "$lib" ] || continue
    mkdir -p "$IRD$(dirname "$lib")"; cp -L "$lib" "$IRD$lib"
  done
done
mkdir -p "$IRD/lib64"; cp -L /lib64/ld-linux-x86-64.so.2 "$IRD/lib64/"
cat > "$IRD/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
for m in $(cat /modules/order); do
  case $m in
    vivid.ko) insmod /modules/$m n_devs=3 node_types=0x1,0x1,0x1 multiplanar=1,1,2 || echo "INSMOD-FAILED $m" ;;
    *) insmod /modules/$m || echo "INSMOD-FAILED $m" ;;
  esac
done
sleep 1
echo "VM-READY $(ls /dev/video* | tr '\n' ' ')"
HOME=/tmp /check/vivid-check
echo "VIVID-CHECK-EXIT $?"
poweroff -f
INIT
chmod +x "$IRD/init"
(cd "$IRD" && find . | cpio -o -H newc --quiet | gzip -1 > "$WORK/initrd.gz")
log "initramfs $(du -h "$WORK/initrd.gz" | cut -f1), kernel $KVER, modules: $(cat "$IRD/modules/order" | tr '\n' ' ')"

# 4. Boot.
OUT=$WORK/console.log
log "booting (timeout ${TIMEOUT}s)"
start=$(date +%s)
timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg -m 1536 -smp 2 -kernel "$VMLINUZ" -initrd "$WORK/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1" -nographic -no-reboot -monitor none -serial stdio </dev/null > "$OUT" 2>&1 || true
log "VM ran $(( $(date +%s) - start )) s"
grep -E "^(PASS|FAIL|  |RESULT|VM-READY|VIVID-CHECK-EXIT|INSMOD-FAILED)" "$OUT" | sed 's/\r$//' || true
# 5. On the host: the file camcap left after the unplug must decode (ffprobe) with every frame it reported.
tr -d '\r' < "$OUT" | sed -n '/^H264-BEGIN$/,/^H264-END$/p' | sed '1d;$d' | base64 -d > "$WORK/unplugged.h264" 2>/dev/null || true
reported=$(tr -d '\r' < "$OUT" | awk '/^H264-ENCODED/{print $2}')
decoded=$(ffprobe -v error -f h264 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$WORK/unplugged.h264" 2>/dev/null | tr -d ' \n' || true)
host_failed=0
if [ -n "$reported" ] && [ "$decoded" = "$reported" ] && [ "$reported" -gt 0 ]; then
  echo "PASS host: the file camcap left after the unplug decodes: $decoded of $reported frames (ffprobe)"
else
  echo "FAIL host: the file camcap left after the unplug: ffprobe decoded '$decoded' of '$reported' frames"; host_failed=1
fi
# The multi-planar camera's 30-frame recordings (a single-buffer format, NM12, YM12): each must decode with ffprobe
# to 30 frames at the size negotiated in the VM.
host_passed=$((1 - host_failed))
mp_seen=0
while read -r _ fourcc size frames; do
  mp_seen=$((mp_seen + 1))
  file=$WORK/mplane-$fourcc.h264
  tr -d '\r' < "$OUT" | awk -v f="$fourcc" '$1=="MPLANE-H264-BEGIN" && $2==f {on=1; next} $1=="MPLANE-H264-END" {on=0} on' | base64 -d > "$file" 2>/dev/null || true
  got=$(ffprobe -v error -f h264 -count_frames -select_streams v:0 -show_entries stream=width,height,nb_read_frames -of csv=p=0 "$file" 2>/dev/null | tr -d ' \n' || true)
  if [ "$got" = "${size/x/,},$frames" ] && [ "$frames" = 30 ]; then
    echo "PASS host: multi-planar $fourcc recording decodes: 30 frames at $size (ffprobe: $got)"; host_passed=$((host_passed + 1))
  else
    echo "FAIL host: multi-planar $fourcc recording: ffprobe says '$got', the VM recorded $frames frames at $size"; host_failed=$((host_failed + 1))
  fi
done < <(tr -d '\r' < "$OUT" | grep '^MPLANE-H264-BEGIN ')
if [ "$mp_seen" != 3 ]; then
  echo "FAIL host: $mp_seen multi-planar recordings in the console, 3 expected"; host_failed=$((host_failed + 1))
fi
echo "RESULT-HOST: $host_passed passed, $host_failed failed" | tee -a "$OUT"
if ! grep -q "^RESULT: .* 0 failed" <(tr -d '\r' < "$OUT") || [ "$host_failed" != 0 ]; then
  log "vivid VM test FAILED (full console: $OUT)"
  tail -n 40 "$OUT" >&2
  exit 1
fi
log "vivid VM test passed"
