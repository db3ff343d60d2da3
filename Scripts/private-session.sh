# Sourced by Scripts/pipewire-session.sh and Scripts/camera-portal-session.sh: the part both share, a private
# desktop session's outer shell (its own XDG directories, a D-Bus session bus of its own, signals passed on to the
# inner part, which does the teardown).

# private_xdg DIR: makes DIR's runtime, data, cache, state and config folders (DIR and runtime mode 700), points the
# XDG variables at them and forgets the caller's own session (its bus, its PipeWire).
private_xdg() {
  local dir="$1"
  mkdir -p "$dir/runtime" "$dir/data" "$dir/cache" "$dir/state" "$dir/config" || return 1
  chmod 700 "$dir" "$dir/runtime"
  export XDG_RUNTIME_DIR="$dir/runtime" XDG_DATA_HOME="$dir/data" XDG_CACHE_HOME="$dir/cache"
  export XDG_STATE_HOME="$dir/state" XDG_CONFIG_HOME="$dir/config"
  unset DBUS_SESSION_BUS_ADDRESS PIPEWIRE_REMOTE PIPEWIRE_RUNTIME_DIR
}

# under_dbus PIDFILE LOG DBUS_RUN_SESSION_ARGS...: runs `dbus-run-session ARGS...` in the background with our stdin,
# our stderr as its fd 3 and its own stderr appended to LOG (dbus-daemon's messages). TERM, INT and HUP are passed
# to the inner part (whose pid it writes to PIDFILE; before that, to dbus-run-session), which stops what it
# started; returns once dbus-run-session has ended, with its exit status.
under_dbus() {
  local pidfile="$1" log="$2" child status
  shift 2
  dbus-run-session "$@" <&0 3>&2 2>>"$log" &
  child=$!
  # shellcheck disable=SC2064 # the pid and file are meant to be fixed now
  trap "private_session_forward '$pidfile' $child" TERM INT HUP
  wait "$child"
  status=$?
  # A signal interrupts the first wait: wait again while the inner part tears down.
  while kill -0 "$child" 2>/dev/null; do wait "$child"; status=$?; done
  trap - TERM INT HUP
  return $status
}

private_session_forward() { # private_session_forward PIDFILE FALLBACK_PID
  local inner_pid
  inner_pid="$(cat "$1" 2>/dev/null)"
  if [ -n "$inner_pid" ]; then kill -TERM "$inner_pid" 2>/dev/null; else kill -TERM "$2" 2>/dev/null; fi
}
