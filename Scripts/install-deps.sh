#!/usr/bin/env bash
# Installs the Debian packages swift-video-capture needs (as root), only those missing.
#   build:  libv4l-dev libyuv-dev libopenh264-dev libjpeg-dev libturbojpeg0-dev pkg-config, libssl-dev libsrtp2-dev (WebRTC: DTLS, SRTP),
#           libpipewire-0.3-dev (PipeWireCapture and pw-test-camera), libdbus-1-dev (the camera portal's client),
#           libcamera-dev (LibCameraCapture's C++ shim, libcamera 0.0.3)
#   tests:  ffmpeg (ffprobe/ffmpeg as the independent decoder, and an RTSP client over UDP and TCP), v4l-utils, python3-numpy (the frame tap's Python reader), GStreamer (rtpbin,
#           rtspsrc + avdec_h264: an RTP and RTSP receiver we did not write; VLC is no judge: Debian builds it without live555, no rtsp://)
#           chromium chromium-driver python3-selenium (camcap serve's browser test), and aiortc (PyPI, a second
#           WebRTC client) in a virtual environment at ~/.cache/swift-video-capture/aiortc
#           pipewire pipewire-bin wireplumber dbus (Scripts/pipewire-session.sh: a headless PipeWire for the PipeWire camera tests),
#           xdg-desktop-portal python3-dbus (Scripts/camera-portal-session.sh: the camera portal, a fake permission dialog),
#           libcamera-ipa libcamera-tools pipewire-libcamera (the VM's libcamera checks on vimc: its IPA, `cam` as the judge,
#           PipeWire's libcamera monitor),
#           mkvtoolnix mediainfo (judges of the MP4 recordings), janus libjs-janus-gateway libjs-webrtc-adapter gcc (Scripts/janus-env.sh: Janus as a WHIP/RTSP judge; gcc builds
#           its loopback shim), gir1.2-gst-rtsp-server-1.0 python3-gi (Scripts/rtsp-test-server.py). simple-whip-server is
#           not apt-installed (its node-* dependencies conflict with nodesource's nodejs): janus-env.sh whip-root unpacks
#           it and its node-* closure into ~/.cache/swift-video-capture/whip/root, run with the system's node
#   VM test: qemu-system-x86 busybox-static kmod cpio; gcc make (v4l2loopback, built against the VM kernel's headers)
#   bench:  the comparison benchmark (Benchmarks/compare): gcc, GStreamer with openh264enc, valgrind, ffmpeg; for --content natural the photographs (mate-backgrounds) and cjpeg (libjpeg-turbo-progs)
set -euo pipefail
want=(libv4l-dev libyuv-dev libopenh264-dev libjpeg-dev libturbojpeg0-dev pkg-config libssl-dev libsrtp2-dev libpipewire-0.3-dev libdbus-1-dev libcamera-dev)
case "${1:-build}" in
  test) want+=(ffmpeg v4l-utils qemu-system-x86 busybox-static kmod cpio gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-libav chromium chromium-driver python3-selenium python3-venv python3-numpy curl prometheus
          janus libjs-janus-gateway libjs-webrtc-adapter gcc make gir1.2-gst-rtsp-server-1.0 python3-gi mkvtoolnix mediainfo
          pipewire pipewire-bin wireplumber dbus xdg-desktop-portal python3-dbus libcamera-ipa libcamera-tools pipewire-libcamera) ;;
  bench) want+=(gcc gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad valgrind ffmpeg mate-backgrounds libjpeg-turbo-progs) ;;
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

# aiortc for the WebRTC tests (Tests/CamcapTests/ServeTests.swift, AiortcTests): a venv of its own, made once.
if [ "${1:-build}" = test ]; then
  venv="${AIORTC_VENV:-$HOME/.cache/swift-video-capture/aiortc}"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import aiortc" 2>/dev/null; then
    echo "installing aiortc into $venv" >&2
    /usr/bin/python3 -m venv "$venv"   # Debian's Python (python3-venv), whatever else is on PATH
    "$venv/bin/pip" install -q aiortc==1.16.0
  fi
  # simple-whip-server for Scripts/janus-env.sh, unpacked privately (cached); a failure here only affects the Janus tests.
  "$(dirname "${BASH_SOURCE[0]}")/janus-env.sh" whip-root >/dev/null || echo "install-deps.sh: simple-whip-server could not be prepared (Janus WHIP tests will fail)" >&2
fi
