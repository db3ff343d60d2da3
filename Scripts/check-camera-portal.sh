#!/usr/bin/env bash
# Checks CCameraPortal (Sources/CCameraPortal) against a headless xdg camera portal: builds
# Tests/CameraPortalC/portal_check.c with gcc, and runs it in private portal sessions (Scripts/camera-portal-session.sh)
# where the camera access is granted and where it is refused. Prints portal_check's PASS/FAIL lines, one line per
# case with its time, and the total; exits 1 when any case failed.
#
#   Scripts/check-camera-portal.sh [--quick] [--sanitize] [--keep-going]
#
#   --quick       only the two main cases: grant and refuse, decided by the fake backend's dialog
#   --sanitize    build with -fsanitize=address,undefined
#   --keep-going  run every case even after a failure (default: stop at the first)
#
# The camera: pw-test-camera, built with gcc from $PW_TEST_CAMERA_SOURCE (default Sources/pw-test-camera/main.c of
# this tree), or the binary $PW_TEST_CAMERA. Without either, the grant cases only list the nodes the portal's
# PipeWire connection sees (no camera, no frame).
#
# Cases (all but the first two are skipped by --quick):
#   grant            dialog grants (response 0, asked once, then the stored "yes"); a camera that exists before the
#                    portal starts: IsCameraPresent true, listed through the portal's fd, one frame byte-exact
#   refuse           dialog refuses: AccessCamera answers 1 (asked once, then the stored "no"),
#                    OpenPipeWireRemote fails with org.freedesktop.portal.Error.NotAllowed
#   grant-hotplug    the camera starts after the portal: still listed and streamed through the fd (IsCameraPresent
#                    is only reported: xdg-desktop-portal 1.16 does not see cameras added after its start)
#   grant-store      permission store "yes" for app id "" decides, the backend (told to refuse) is never asked
#   refuse-store     permission store "no" decides, the backend (told to grant) is never asked
#   timeout          the backend answers after 3 s; access with a 1000 ms timeout gives up in time
#   threads          granted: 8 threads call is_present, access, open_remote and acquire at once
#   no-camera        a portal without an Access backend, hence without Camera: every call answers no-portal
#   absent           a bus without any portal: every call answers no-portal at once
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
me="check-camera-portal.sh"
quick=0 sanitize=0 keep_going=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --sanitize) sanitize=1 ;;
    --keep-going) keep_going=1 ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "$me: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

for pc in dbus-1 libpipewire-0.3; do
  if ! pkg-config --exists "$pc"; then
    echo "$me: pkg-config finds no $pc (Debian: apt-get install libdbus-1-dev libpipewire-0.3-dev)" >&2
    exit 3
  fi
done

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { print b - a }'; }
started_all=$(date +%s.%N)
build="$repo/.build/camera-portal-check"
mkdir -p "$build"
flags=(-std=gnu11 -O1 -g -Wall -Wextra -Werror)
[ $sanitize -eq 1 ] && flags+=(-fsanitize=address,undefined -fno-omit-frame-pointer)
# shellcheck disable=SC2046
if ! gcc "${flags[@]}" -I"$repo/Sources/CCameraPortal/include" $(pkg-config --cflags dbus-1 libpipewire-0.3) \
    "$repo/Tests/CameraPortalC/portal_check.c" "$repo/Sources/CCameraPortal/camera_portal.c" \
    -o "$build/portal_check" $(pkg-config --libs dbus-1 libpipewire-0.3) -pthread; then
  echo "FAIL: building portal_check" >&2
  exit 1
fi

camera_bin="${PW_TEST_CAMERA:-}"
camera_source="${PW_TEST_CAMERA_SOURCE:-$repo/Sources/pw-test-camera/main.c}"
if [ -z "$camera_bin" ] && [ -f "$camera_source" ]; then
  # shellcheck disable=SC2046
  if gcc -std=gnu11 -O2 $(pkg-config --cflags libpipewire-0.3) "$camera_source" -o "$build/pw-test-camera" \
      $(pkg-config --libs libpipewire-0.3) -lm; then
    camera_bin="$build/pw-test-camera"
  else
    echo "FAIL: building pw-test-camera from $camera_source" >&2
    exit 1
  fi
fi
if [ -n "$camera_bin" ] && [ ! -x "$camera_bin" ]; then
  echo "$me: PW_TEST_CAMERA=$camera_bin is not an executable" >&2
  exit 3
fi
if [ -z "$camera_bin" ]; then
  echo "$me: no pw-test-camera ($camera_source missing, PW_TEST_CAMERA unset): the grant cases list nodes only" >&2
fi
printf '%s: built in %.1f s\n' "$me" "$(elapsed "$started_all")"

session="$repo/Scripts/camera-portal-session.sh"
check="$build/portal_check"
cam_name="svc-portal-cam"
# Starts the test camera in the background and waits (bounded by the session's timeout) for its "ready" line.
start_camera="'$camera_bin' --name $cam_name >\"\$CAMERA_PORTAL_SESSION_DIR/camera.log\" 2>&1 &
  until grep -q ready \"\$CAMERA_PORTAL_SESSION_DIR/camera.log\"; do kill -0 \$! 2>/dev/null || exit 1; sleep 0.05; done"

failed=0
run_case() { # run_case NAME COMMAND...
  local name="$1"; shift
  local t0 t1 status
  echo "== $name"
  t0=$(date +%s.%N)
  "$@"
  status=$?
  t1=$(date +%s.%N)
  if [ $status -eq 0 ]; then
    printf 'CASE PASS: %s (%.2f s)\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
  else
    printf 'CASE FAIL: %s (exit %d, %.2f s)\n' "$name" "$status" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
    failed=$((failed + 1))
    [ $keep_going -eq 1 ] || finish
  fi
}
finish() {
  printf '%s: %s in %.2f s\n' "$me" "$([ $failed -eq 0 ] && echo 'all cases passed' || echo "$failed case(s) FAILED")" \
    "$(elapsed "$started_all")"
  [ $failed -eq 0 ] && exit 0
  exit 1
}

main_started=$(date +%s.%N)
if [ -n "$camera_bin" ]; then
  run_case grant "$session" --before-portal "$start_camera" grant -- \
    "$check" grant --camera "$cam_name" --expect-present yes --expect-dialogs 1
else
  run_case grant "$session" grant -- "$check" grant --expect-dialogs 1
fi
run_case refuse "$session" refuse -- "$check" refuse --expect-dialogs 1
printf '%s: grant + refuse took %.2f s\n' "$me" "$(elapsed "$main_started")"
[ $quick -eq 1 ] && finish

if [ -n "$camera_bin" ]; then
  run_case grant-hotplug "$session" grant -- sh -c "$start_camera
    exec '$check' grant --camera $cam_name --expect-dialogs 1"
  run_case grant-store "$session" --decide store --before-portal "$start_camera" grant -- \
    "$check" grant --camera "$cam_name" --expect-present yes --expect-dialogs 0
else
  run_case grant-store "$session" --decide store grant -- "$check" grant --expect-dialogs 0
fi
run_case refuse-store "$session" --decide store refuse -- "$check" refuse --expect-dialogs 0
run_case timeout "$session" --access-delay 3 grant -- "$check" timeout --timeout-ms 1000
run_case threads "$session" grant -- "$check" threads --threads 8
run_case no-camera "$session" --no-access-backend grant -- "$check" no-camera

# A bus of its own without any portal (and nothing activatable on it).
absent_dir="$(mktemp -d "${TMPDIR:-/tmp}/camera-portal-absent.XXXXXX")"
mkdir -p "$absent_dir/services"
cat >"$absent_dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$absent_dir/bus</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$absent_dir/services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
run_case absent dbus-run-session --config-file="$absent_dir/bus.conf" -- "$check" absent 2>/dev/null
rm -rf "$absent_dir"
finish
