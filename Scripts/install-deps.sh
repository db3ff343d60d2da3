#!/usr/bin/env bash
# Installs the Debian packages swift-video-capture needs (as root), only those missing.
#   build:  libv4l-dev libyuv-dev libopenh264-dev libjpeg-dev libturbojpeg0-dev pkg-config
#   tests:  ffmpeg (ffprobe/ffmpeg as the independent decoder), v4l-utils, GStreamer (rtpbin + avdec_h264: an RTP receiver we did not write)
#   VM test: qemu-system-x86 busybox-static kmod cpio
#   bench:  the comparison benchmark (Benchmarks/compare): gcc, GStreamer with openh264enc, valgrind, ffmpeg
set -euo pipefail
want=(libv4l-dev libyuv-dev libopenh264-dev libjpeg-dev libturbojpeg0-dev pkg-config)
case "${1:-build}" in
  test) want+=(ffmpeg v4l-utils qemu-system-x86 busybox-static kmod cpio gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-libav) ;;
  bench) want+=(gcc gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad valgrind ffmpeg) ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
