#!/usr/bin/env bash
# Runs a command against a private, headless xdg camera portal: under one dbus-run-session (a bus of its own that
# activates no service) with a private XDG_RUNTIME_DIR (mode 700) and XDG_DATA_HOME/CONFIG/CACHE/STATE, it starts
# xdg-permission-store, pipewire, wireplumber, a fake Access backend (Scripts/fake-portal-access.py) and
# xdg-desktop-portal, waits until org.freedesktop.portal.Desktop offers org.freedesktop.portal.Camera, runs the
# command, then stops everything it started (also the command's leftover children) and removes the directory.
#
#   Scripts/camera-portal-session.sh [--decide dialog|store] [--before-portal SHELL_COMMAND] [--timeout SECONDS]
#                                    [--access-delay S] [--no-access-backend] [--keep] grant|refuse -- COMMAND...
#
#   grant|refuse     whether the camera access of this (unsandboxed) session is granted or refused
#   --decide dialog  (default) the permission store starts empty, so xdg-desktop-portal asks the fake backend's
#                    AccessDialog, which answers grant (0) or refuse (2); the portal stores that answer for app
#                    id "" (table devices, id camera) and later requests of the session use the stored answer
#   --decide store   the permission store entry devices/camera for app id "" is set to yes or no before the
#                    command runs, and the fake backend is told the opposite answer: only the store can decide
#   --before-portal C  run the shell command C (sh -c) once PipeWire and wireplumber are up and before
#                    xdg-desktop-portal starts; it must finish (exit 0) within the timeout, and what it leaves
#                    running (e.g. a test camera started with &) is stopped at the end. xdg-desktop-portal 1.16 sets
#                    IsCameraPresent only from the cameras that exist when it starts: start a camera here for that.
#   --access-delay S the fake backend answers each AccessDialog only after S seconds (for callers' timeouts)
#   --no-access-backend  no Access backend at all (an empty portals directory): xdg-desktop-portal then offers
#                    no Camera interface, as on a desktop whose portal backends lack Access (the wait is for
#                    org.freedesktop.portal.Desktop only)
#   --timeout S      how long to wait for each daemon (default 20)
#   --keep           keep the session directory (logs) and print its path
#
# The command sees DBUS_SESSION_BUS_ADDRESS, XDG_RUNTIME_DIR (PipeWire's socket is $XDG_RUNTIME_DIR/pipewire-0),
# CAMERA_PORTAL_MODE (grant|refuse), CAMERA_PORTAL_DECIDE (dialog|store), CAMERA_PORTAL_SESSION_DIR and
# CAMERA_PORTAL_ACCESS_LOG (one line per AccessDialog the backend answered). The exit status is the command's;
# 2 for a usage error, 3 when a program is missing, 4 when a daemon or the Camera portal did not come up (the
# logs' tails are printed to stderr).
#
# Example:
#   Scripts/camera-portal-session.sh grant -- gdbus call --session -d org.freedesktop.portal.Desktop \
#     -o /org/freedesktop/portal/desktop -m org.freedesktop.portal.Camera.AccessCamera "{}"
set -uo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
me="camera-portal-session.sh"
portal_bin="${XDG_DESKTOP_PORTAL_BIN:-/usr/libexec/xdg-desktop-portal}"
store_bin="${XDG_PERMISSION_STORE_BIN:-/usr/libexec/xdg-permission-store}"
backend_name="org.freedesktop.impl.portal.desktop.svcfake"  # the DBusName in Scripts/portals/svc-fake-access.portal

# Whether a process, or any process of a group, still runs: a zombie does not count (this matters where PID 1 reaps
# orphans late, as in some containers: a zombie's pid answers kill -0 until then).
running() { local state; state="$(ps -o stat= -p "$1" 2>/dev/null)" && [ -n "$state" ] && [ "${state#Z}" = "$state" ]; }
group_running() { ps -e -o pgid= -o stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'; }

usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; }

# ---------------------------------------------------------------------------------------------------------------
# The inner part: runs under dbus-run-session.
# ---------------------------------------------------------------------------------------------------------------
inner() {
  local dir="$CAMERA_PORTAL_SESSION_DIR" timeout="$CAMERA_PORTAL_TIMEOUT"
  local mode="$CAMERA_PORTAL_MODE" decide="$CAMERA_PORTAL_DECIDE"
  local pids=() names=() cmd="" before=""
  exec 2>&3 3>&-  # our stderr again (dbus-daemon's own goes to dbus-daemon.log)
  echo $$ >"$dir/session.pid"
  # The bus daemon's pid, so that the outer part can wait until it is gone (dbus-run-session does not wait).
  dbus-send --session --print-reply=literal --reply-timeout=2000 --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.DBus 2>/dev/null |
    awk '{ print $2 }' >"$dir/bus.pid"

  start() { # start NAME LOG PROGRAM ARGS...: in the background, remembered for the teardown
    local name="$1" log="$2"; shift 2
    "$@" >"$log" 2>&1 &
    pids+=($!); names+=("$name")
  }
  stop_all() {
    # Everything we started: the daemons of the list, and every other child of this shell (a signal can come
    # between a start and its entry in the list), then the commands' process groups.
    local i alive group p everyone name
    everyone="${pids[*]} $(ps -o pid= --ppid $$ 2>/dev/null)"
    for group in $cmd $before; do
      kill -TERM -- "-$group" 2>/dev/null  # the commands run in process groups of their own (setsid)
    done
    # Reverse order of start: the portal first, the permission store last.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null; done
    for p in $everyone; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 60); do
      alive=0
      for p in $everyone; do running "$p" && { alive=1; trace "waiting for pid $p"; }; done
      for group in $cmd $before; do group_running "$group" && { alive=1; trace "waiting for group $group"; }; done
      [ $alive -eq 0 ] && break
      sleep 0.05
    done
    for p in $everyone; do
      if running "$p"; then
        name="pid $p"
        for i in "${!pids[@]}"; do [ "${pids[$i]}" = "$p" ] && name="${names[$i]} (pid $p)"; done
        echo "$me: $name ignored TERM for 3 s: killed" >&2
        kill -KILL "$p" 2>/dev/null
      fi
    done
    for group in $cmd $before; do kill -KILL -- "-$group" 2>/dev/null; done
    trace "reaping"
    wait 2>/dev/null
  }
  fail() { # fail MESSAGE LOG...: say what did not come up, show the logs' tails, stop everything
    local msg="$1" log; shift
    echo "$me: $msg" >&2
    for log in "$@"; do
      [ -s "$log" ] && { echo "--- last lines of $(basename "$log"):" >&2; tail -n 15 "$log" >&2; }
    done
    stop_all
    exit 4
  }
  alive() { # alive INDEX: whether the daemon started as number INDEX still runs
    running "${pids[$1]}"
  }
  has_owner() {
    dbus-send --session --print-reply=literal --reply-timeout=2000 --dest=org.freedesktop.DBus \
      /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner "string:$1" 2>/dev/null | grep -q true
  }
  wait_for() { # wait_for WHAT INDEX LOG TEST...: poll TEST until it succeeds, the daemon dies, or the timeout
    local what="$1" index="$2" log="$3"; shift 3
    local deadline=$(( $(date +%s) + timeout ))
    until "$@"; do
      alive "$index" || fail "$what exited before it was ready" "$log"
      [ "$(date +%s)" -ge $deadline ] && fail "$what was not ready within ${timeout} s" "$log"
      sleep 0.05
    done
  }
  trace() { # with CAMERA_PORTAL_TRACE=1: when each step was reached, on stderr
    [ -n "${CAMERA_PORTAL_TRACE:-}" ] && printf '%s: %s %s\n' "$me" "$(date +%s.%N | cut -c7-14)" "$*" >&2
    return 0
  }
  trap 'stop_all; exit 143' TERM INT HUP
  trace "bus up"

  # 1. The permission store, which xdg-desktop-portal and wireplumber's portal-permissionstore plugin both use.
  start xdg-permission-store "$dir/permission-store.log" "$store_bin"
  wait_for xdg-permission-store 0 "$dir/permission-store.log" has_owner org.freedesktop.impl.portal.PermissionStore

  trace "permission store up"
  # 2. PipeWire and wireplumber (its access-portal.lua gives portal clients their camera nodes).
  start pipewire "$dir/pipewire.log" pipewire
  wait_for pipewire 1 "$dir/pipewire.log" test -S "$XDG_RUNTIME_DIR/pipewire-0"
  trace "pipewire up"
  start wireplumber "$dir/wireplumber.log" wireplumber
  if command -v pw-cli >/dev/null 2>&1; then
    wireplumber_connected() { pw-cli ls Client 2>/dev/null | grep -q '"WirePlumber"'; }
    wait_for wireplumber 2 "$dir/wireplumber.log" wireplumber_connected
  fi

  trace "wireplumber up"
  # 2b. With --before-portal: the command that must run before the portal (a camera it should see at start).
  if [ -n "$CAMERA_PORTAL_BEFORE" ]; then
    setsid sh -c "$CAMERA_PORTAL_BEFORE" >"$dir/before-portal.log" 2>&1 &
    before=$!
    local deadline=$(( $(date +%s) + timeout ))
    # It is done when its shell has exited; what it left running keeps the process group alive.
    while [ -d "/proc/$before" ] && [ "$(awk '{ print $3 }' "/proc/$before/stat" 2>/dev/null)" != Z ]; do
      [ "$(date +%s)" -ge $deadline ] && fail "--before-portal command did not finish within ${timeout} s" "$dir/before-portal.log"
      sleep 0.05
    done
    wait "$before"
    local before_status=$?
    [ $before_status -eq 0 ] || fail "--before-portal command failed (exit status $before_status)" "$dir/before-portal.log"
  fi

  # 3. The fake Access backend: it answers the mode, or with --decide store the opposite (the store decides).
  local answer="$mode" portals="$script_dir/portals"
  if [ -n "$CAMERA_PORTAL_NO_BACKEND" ]; then
    portals="$dir/no-portals"
    mkdir -p "$portals"
    # A stand-in that exits at once keeps the daemon numbering of the teardown and the waits below.
    start no-access-backend /dev/null true
  else
    if [ "$decide" = store ]; then
      if [ "$mode" = grant ]; then answer=refuse; else answer=grant; fi
    fi
    start fake-portal-access "$dir/fake-portal-access.log" /usr/bin/python3 "$script_dir/fake-portal-access.py" \
      "$answer" --bus-name "$backend_name" --log "$CAMERA_PORTAL_ACCESS_LOG" --delay "$CAMERA_PORTAL_ACCESS_DELAY"
    wait_for fake-portal-access 3 "$dir/fake-portal-access.log" has_owner "$backend_name"
  fi

  trace "access backend step done"
  # 4. xdg-desktop-portal, reading .portal files only from our directory.
  start xdg-desktop-portal "$dir/xdg-desktop-portal.log" env XDG_DESKTOP_PORTAL_DIR="$portals" "$portal_bin" -v
  wait_for xdg-desktop-portal 4 "$dir/xdg-desktop-portal.log" has_owner org.freedesktop.portal.Desktop
  local xml
  xml="$(dbus-send --session --print-reply=literal --reply-timeout=5000 --dest=org.freedesktop.portal.Desktop \
    /org/freedesktop/portal/desktop org.freedesktop.DBus.Introspectable.Introspect 2>&1)" ||
    fail "xdg-desktop-portal does not answer Introspect: $xml" "$dir/xdg-desktop-portal.log"
  local camera_offered=0
  case "$xml" in *'interface name="org.freedesktop.portal.Camera"'*) camera_offered=1 ;; esac
  if [ -n "$CAMERA_PORTAL_NO_BACKEND" ]; then
    [ $camera_offered -eq 0 ] ||
      fail "xdg-desktop-portal offers org.freedesktop.portal.Camera without any Access backend" "$dir/xdg-desktop-portal.log"
  elif [ $camera_offered -eq 0 ]; then
    local why="no Access backend loaded from $portals, or built without PipeWire"
    fail "xdg-desktop-portal runs but offers no org.freedesktop.portal.Camera ($why)" "$dir/xdg-desktop-portal.log"
  fi

  trace "xdg-desktop-portal up (Camera offered: $camera_offered)"
  # 5. With --decide store: the permission for unsandboxed callers (app id "").
  if [ "$decide" = store ]; then
    local value=no reply
    [ "$mode" = grant ] && value=yes
    reply="$(dbus-send --session --print-reply --reply-timeout=5000 --dest=org.freedesktop.impl.portal.PermissionStore \
      /org/freedesktop/impl/portal/PermissionStore org.freedesktop.impl.portal.PermissionStore.SetPermission \
      string:devices boolean:true string:camera string: "array:string:$value" 2>&1)" ||
      fail "PermissionStore.SetPermission(devices, camera, \"\", [$value]) failed: $reply" "$dir/permission-store.log"
  fi

  # 6. The command, in a process group of its own so that its leftover children can be stopped with it.
  setsid "$@" <&0 &
  cmd=$!
  local status
  wait "$cmd"
  status=$?
  trace "command done ($status)"
  stop_all
  trace "all stopped"
  exit $status
}

if [ "${1:-}" = "--inner" ]; then
  shift
  inner "$@"
fi

# ---------------------------------------------------------------------------------------------------------------
# The outer part: options, the private directories, dbus-run-session.
# ---------------------------------------------------------------------------------------------------------------
decide=dialog timeout=20 keep=0 mode="" before_portal="" access_delay=0 no_backend=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --decide) decide="${2:-}"; shift 2 || { echo "$me: --decide needs dialog or store" >&2; exit 2; } ;;
    --timeout) timeout="${2:-}"; shift 2 || { echo "$me: --timeout needs a value" >&2; exit 2; } ;;
    --keep) keep=1; shift ;;
    --no-access-backend) no_backend=1; shift ;;
    --access-delay) access_delay="${2:-}"; shift 2 || { echo "$me: --access-delay needs seconds" >&2; exit 2; } ;;
    --before-portal) before_portal="${2:-}"; shift 2 || { echo "$me: --before-portal needs a command" >&2; exit 2; } ;;
    grant|refuse) mode="$1"; shift ;;
    --) shift; break ;;
    *) echo "$me: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$mode" ] || { echo "$me: say grant or refuse (usage: $me grant|refuse -- COMMAND...)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "$me: no command given (usage: $me grant|refuse -- COMMAND...)" >&2; exit 2; }
case "$decide" in dialog|store) ;; *) echo "$me: --decide must be dialog or store: $decide" >&2; exit 2 ;; esac
case "$access_delay" in ''|*[!0-9.]*) echo "$me: --access-delay must be a number of seconds: $access_delay" >&2; exit 2 ;; esac
case "$timeout" in ''|*[!0-9]*|0) echo "$me: --timeout must be a whole number of seconds: $timeout" >&2; exit 2 ;; esac

for tool in dbus-run-session dbus-send pipewire wireplumber setsid /usr/bin/python3 "$portal_bin" "$store_bin"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$me: $tool is missing (Debian: apt-get install dbus pipewire pipewire-bin wireplumber" \
      "xdg-desktop-portal python3-dbus python3-gi)" >&2
    exit 3
  fi
done
if ! /usr/bin/python3 -c 'import dbus, gi' 2>/dev/null; then
  echo "$me: /usr/bin/python3 lacks dbus or gi (apt-get install python3-dbus python3-gi)" >&2
  exit 3
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/camera-portal.XXXXXX")" || exit 1
. "$script_dir/private-session.sh"
private_xdg "$dir" || exit 1
mkdir -p "$dir/dbus-services"

# A session bus that activates nothing (its only service directory is empty): every daemon is one we start and
# stop, and xdg-desktop-portal's look-up of the document portal fails at once instead of starting a FUSE daemon.
cat >"$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:path=$dir/runtime/bus</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$dir/dbus-services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
# xdg-desktop-portal 1.17+ chooses backends by portals.conf (1.16 ignores it and uses the .portal file's UseIn).
mkdir -p "$dir/config/xdg-desktop-portal"
printf '[preferred]\ndefault=none\norg.freedesktop.impl.portal.Access=svc-fake-access\n' \
  >"$dir/config/xdg-desktop-portal/portals.conf"

export XDG_CURRENT_DESKTOP=svc-test
export CAMERA_PORTAL_SESSION_DIR="$dir" CAMERA_PORTAL_TIMEOUT="$timeout" CAMERA_PORTAL_MODE="$mode"
export CAMERA_PORTAL_DECIDE="$decide" CAMERA_PORTAL_ACCESS_LOG="$dir/access-dialog.log"
export CAMERA_PORTAL_BEFORE="$before_portal" CAMERA_PORTAL_ACCESS_DELAY="$access_delay"
export CAMERA_PORTAL_NO_BACKEND="$no_backend"
unset XDG_DESKTOP_PORTAL_DIR
: >"$CAMERA_PORTAL_ACCESS_LOG"

under_dbus "$dir/session.pid" "$dir/dbus-daemon.log" --config-file="$dir/bus.conf" -- bash "$0" --inner "$@"
status=$?
bus_pid="$(cat "$dir/bus.pid" 2>/dev/null)"
[ -n "${CAMERA_PORTAL_TRACE:-}" ] && echo "$me: $(date +%s.%N | cut -c7-14) dbus-run-session done" >&2
if [ -n "$bus_pid" ]; then
  for _ in $(seq 60); do running "$bus_pid" || break; sleep 0.05; done
  if running "$bus_pid"; then
    echo "$me: the session's dbus-daemon (pid $bus_pid) outlived dbus-run-session by 3 s: killed" >&2
    kill -KILL "$bus_pid" 2>/dev/null
  fi
fi
if [ $status -ne 0 ] && [ -s "$dir/dbus-daemon.log" ] && grep -qv 'Failed to set fd limit' "$dir/dbus-daemon.log"; then
  echo "--- dbus-run-session / dbus-daemon said:" >&2; tail -n 10 "$dir/dbus-daemon.log" >&2
fi
if [ $keep -eq 1 ]; then echo "$me: session directory kept: $dir" >&2; else rm -rf "$dir"; fi
exit $status
