#!/usr/bin/env bash
# Runs a command inside a private, headless PipeWire session: pipewire and wireplumber under their own D-Bus
# session bus (dbus-run-session), with a private XDG_RUNTIME_DIR (mode 700) and XDG_DATA_HOME/XDG_CACHE_HOME/
# XDG_STATE_HOME, so nothing of the user's own session is touched or seen. Waits for $XDG_RUNTIME_DIR/pipewire-0,
# runs the command, then stops everything it started (no process is left) and removes the directory.
#
#   Scripts/pipewire-session.sh [--dir DIR] [--timeout SECONDS] -- COMMAND [ARG...]
#
#   --dir DIR        the session's directory (made if missing, removed afterwards only when this script made it);
#                    default a new one under ${TMPDIR:-/tmp}
#   --timeout S      how long to wait for PipeWire's socket (default 20)
#
# The command starts once wireplumber is PipeWire's client. It sees XDG_RUNTIME_DIR (the socket is
# $XDG_RUNTIME_DIR/pipewire-0) and PIPEWIRE_SESSION_DIR. The exit status is the command's; 3 when PipeWire or
# wireplumber is missing (install: bash Scripts/install-deps.sh test), 4 when either did not start. The logs of pipewire and wireplumber are in the session directory while it
# runs; on failure their tails are printed to stderr.
#
# Example (a test camera, then camcap):
#   Scripts/pipewire-session.sh -- sh -c '.build/debug/pw-test-camera --name cam & sleep 1; .build/debug/camcap devices'
set -uo pipefail

dir="" timeout=20
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="${2:?--dir needs a value}"; shift 2 ;;
    --timeout) timeout="${2:?--timeout needs a value}"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then echo "pipewire-session.sh: no command given (usage: pipewire-session.sh [--dir DIR] -- COMMAND...)" >&2; exit 2; fi
case "$timeout" in ''|*[!0-9]*) echo "pipewire-session.sh: --timeout must be a whole number of seconds: $timeout" >&2; exit 2 ;; esac

for tool in pipewire wireplumber pw-cli dbus-run-session; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "pipewire-session.sh: $tool is not installed (run: bash Scripts/install-deps.sh test)" >&2
    exit 3
  fi
done

made=0
if [ -z "$dir" ]; then
  dir="$(mktemp -d "${TMPDIR:-/tmp}/pipewire-session.XXXXXX")" || exit 1
  made=1
elif [ ! -d "$dir" ]; then
  mkdir -p "$dir" || exit 1
  made=1
fi
. "$(dirname "${BASH_SOURCE[0]}")/private-session.sh"
private_xdg "$dir" || exit 1

# The inner part runs under dbus-run-session: the daemons in their own process group each, the command in the
# foreground; on any exit (also a signal) the daemons are stopped with TERM, then KILL after 3 s.
cat >"$dir/inner.sh" <<'INNER'
set -u
echo $$ >"$PIPEWIRE_SESSION_DIR/session.pid"
cmd=""
runtime="$PIPEWIRE_SESSION_DIR/runtime"
pipewire >"$PIPEWIRE_SESSION_DIR/pipewire.log" 2>&1 &
pw=$!
wp=""
stop() {
  kill -TERM $wp $pw 2>/dev/null
  for _ in $(seq 30); do
    kill -0 $wp 2>/dev/null || kill -0 $pw 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL $wp $pw 2>/dev/null
  wait $wp $pw 2>/dev/null
}
trap '[ -n "$cmd" ] && kill -TERM $cmd 2>/dev/null; [ -n "$cmd" ] && wait $cmd 2>/dev/null; stop; exit 143' TERM INT HUP
deadline=$(( $(date +%s) + PIPEWIRE_SESSION_TIMEOUT ))
until [ -S "$runtime/pipewire-0" ]; do
  if ! kill -0 $pw 2>/dev/null || [ "$(date +%s)" -ge $deadline ]; then
    echo "pipewire-session.sh: PipeWire did not start (no $runtime/pipewire-0); its log:" >&3
    tail -n 20 "$PIPEWIRE_SESSION_DIR/pipewire.log" >&3
    stop
    exit 4
  fi
  sleep 0.05
done
# wireplumber only once PipeWire listens (started together, it may find no socket and exit), and the command
# only once wireplumber is PipeWire's client: then streams are linked from the start.
wireplumber >"$PIPEWIRE_SESSION_DIR/wireplumber.log" 2>&1 &
wp=$!
until pw-cli ls Client 2>/dev/null | grep -q 'application.name = "WirePlumber"'; do
  if ! kill -0 $wp 2>/dev/null || [ "$(date +%s)" -ge $deadline ]; then
    echo "pipewire-session.sh: wireplumber did not start; its log:" >&3
    tail -n 20 "$PIPEWIRE_SESSION_DIR/wireplumber.log" >&3
    stop
    exit 4
  fi
  sleep 0.05
done
"$@" 2>&3 &
cmd=$!
wait $cmd
status=$?
stop
exit $status
INNER

export PIPEWIRE_SESSION_DIR="$dir" PIPEWIRE_SESSION_TIMEOUT="$timeout"

# dbus-daemon's own messages (service activations) go to dbus.log; the command's stderr stays ours (fd 3).
under_dbus "$dir/session.pid" "$dir/dbus.log" -- bash "$dir/inner.sh" "$@"
status=$?
[ $made -eq 1 ] && rm -rf "$dir"
exit $status
