#!/usr/bin/env bash
# A private Janus (Debian's `janus`) with simple-whip-server in front of its VideoRoom, on loopback only: the
# third-party judges of issue #22 (WHIP publishing, RTSP restreaming).
#
#   janus-env.sh start DIR                           start both, write DIR/env (shell variables, below)
#   janus-env.sh stop DIR                            stop what `start DIR` started; leaves no process
#   janus-env.sh rtsp-mountpoint DIR URL [USER PASS] a Streaming-plugin mountpoint pulling URL (video, H.264); prints its id
#   janus-env.sh whip-root                           only make the private simple-whip-server root (cached)
#
# DIR/env:  JANUS_HTTP=http://127.0.0.1:P/janus  JANUS_ADMIN=http://127.0.0.1:P/admin  JANUS_ADMIN_SECRET=...
#           JANUS_WS=ws://127.0.0.1:P  WHIP_BASE=http://127.0.0.1:P/whip  WHIP_URL=$WHIP_BASE/endpoint/ID
#           WHIP_TOKEN=...  ROOM=...
# Logs: DIR/janus.log, DIR/whip.log. Settings (environment): JANUS_ROOM (default 1234), JANUS_RTP_RANGE
# (default 20000-20999: Janus's ICE/RTP ports and the Streaming plugin's), JANUS_H264_PROFILE (default 42e01f),
# JANUS_DEADLINE (seconds to wait for each server, default 20), SVC_CACHE (default ~/.cache/swift-video-capture).
#
# simple-whip-server: Debian's package (bookworm: 0.0~git20230201) cannot be installed with apt where nodesource's
# nodejs 20 is installed (its node-* dependencies want Debian's nodejs 18 / libnode108, which conflict). So its
# .deb and the node-* closure of its runtime Depends are downloaded (apt-get download) and unpacked with dpkg-deb
# into $SVC_CACHE/whip/root, and its server runs from there with the system's /usr/bin/node and NODE_PATH set.
# Not taken: nodejs/libnode108 (node-websocket's two native addons, bufferutil and utf-8-validate, are built for
# libnode108 and fall back to their JavaScript versions when they cannot be loaded), libc6, and the demo web page's
# libjs-*/fonts packages. node-tape is unpacked (it is the Debian package that provides `for-each`, a dependency
# of node-deep-equal, itself the provider of `side-channel` that node-qs needs) but its own Depends (a test
# harness's: istanbul, babel...) are not followed. Nothing is installed into the system by this part.
# Debian's server.js and whip-janus.js run unchanged, copied next to a generated config.js (Debian's symlinks it
# to /etc); a preload (-r loopback.js) makes its listen(port) bind 127.0.0.1 instead of every interface.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${SVC_CACHE:-$HOME/.cache/swift-video-capture}/whip"
DEADLINE="${JANUS_DEADLINE:-20}"
ROOM="${JANUS_ROOM:-1234}"
RTP_RANGE="${JANUS_RTP_RANGE:-20000-20999}"
H264_PROFILE="${JANUS_H264_PROFILE:-42e01f}"
PLUGINS=/usr/lib/x86_64-linux-gnu/janus

die() { echo "janus-env.sh: $*" >&2; exit 1; }
tail_log() { [ -f "$1" ] && { echo "--- last lines of $1:" >&2; tail -n "${2:-30}" "$1" >&2; echo "---" >&2; }; return 0; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_ready() {   # apt's lists are there (apt-cache knows the package)
  apt-cache show --no-all-versions "$1" >/dev/null 2>&1 || as_root apt-get update -qq || die "apt-get update failed"
  apt-cache show --no-all-versions "$1" >/dev/null 2>&1 || die "apt knows no package $1"
}

install_apt() {   # Debian packages for Janus and its browser library, only those missing
  local missing=() p
  for p in janus libjs-janus-gateway libjs-webrtc-adapter; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "janus-env.sh: installing ${missing[*]}" >&2
  apt_ready janus
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# Prints the packages to unpack: simple-whip-server and the closure of its runtime Depends (see the header). For
# each dependency: skipped if any alternative is already installed or already taken, else the first alternative;
# a virtual package is replaced by its first provider.
whip_closure() {
  /usr/bin/python3 - <<'EOF'
import re, subprocess, sys
ROOTS = ["simple-whip-server"]
SKIP = {"nodejs", "libnode108", "libc6"}
WEB_ONLY = {"fonts-font-awesome", "libjs-bootbox", "libjs-bootstrap", "libjs-bootswatch", "libjs-jquery", "libjs-toastr"}
LEAF = {"node-tape"}
def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout
inst = set()
for line in run("dpkg-query", "-W", "-f=${Package}\t${Status}\t${Provides}\n").splitlines():
    name, status, provides = (line.split("\t") + ["", ""])[:3]
    if status.endswith("ok installed"):
        inst.add(name)
        inst.update(re.sub(r"\(.*?\)", "", x).strip() for x in provides.split(",") if x.strip())
def show(pkgs):
    res = {}
    for st in run("apt-cache", "show", "--no-all-versions", *pkgs).split("\n\n"):
        m = re.search(r"^Package: (\S+)", st, re.M)
        if not m:
            continue
        deps = []
        for line in st.splitlines():
            if line.startswith(("Depends:", "Pre-Depends:")):
                for group in line.split(":", 1)[1].split(","):
                    deps.append([re.sub(r"\(.*?\)|:any|\[.*?\]", "", a).strip() for a in group.split("|")])
        res[m.group(1)] = deps
    return res
seen, real, frontier = set(), set(), list(ROOTS)
while frontier:
    frontier = [p for p in dict.fromkeys(frontier) if p not in seen]
    if not frontier:
        break
    info = show(frontier)
    nxt = []
    for p in frontier:
        seen.add(p)
        if p not in info:   # virtual
            rp = run("apt-cache", "showpkg", p).split("Reverse Provides:", 1)[-1].split()
            if not rp:
                sys.exit("no package provides " + p)
            nxt.append(rp[0])
            continue
        real.add(p)
        for alts in ([] if p in LEAF else info[p]):
            if any(a in SKIP or (p in ROOTS and a in WEB_ONLY) for a in alts):
                continue
            if any(a in seen or a in inst for a in alts):
                continue
            nxt.append(alts[0])
    frontier = nxt
print("\n".join(sorted(real)))
EOF
}

# The private simple-whip-server root, made once per simple-whip-server version: $CACHE/root.
whip_root() {
  local version stamp tmp
  apt_ready simple-whip-server
  version="$(apt-cache show --no-all-versions simple-whip-server | sed -n 's/^Version: //p')"
  stamp="$CACHE/root/.simple-whip-server-$version"
  if [ -f "$stamp" ]; then echo "$CACHE/root"; return 0; fi
  echo "janus-env.sh: unpacking simple-whip-server $version and its node-* closure into $CACHE/root (once)" >&2
  mkdir -p "$CACHE/debs"
  whip_closure > "$CACHE/closure.txt" || die "could not resolve simple-whip-server's dependencies"
  # apt-get download as root would drop to _apt, which cannot write to a private directory: stay root there.
  ( cd "$CACHE/debs" && apt-get -q -o APT::Sandbox::User="$(id -un)" download $(cat "$CACHE/closure.txt") ) >"$CACHE/download.log" 2>&1 \
    || { tail_log "$CACHE/download.log"; die "apt-get download of simple-whip-server's closure failed"; }
  tmp="$CACHE/root.tmp"; rm -rf "$tmp"; mkdir -p "$tmp"
  local p deb
  for p in $(cat "$CACHE/closure.txt"); do
    deb="$(ls -t "$CACHE/debs/${p}"_*.deb 2>/dev/null | head -1)"
    [ -n "$deb" ] || die "no .deb downloaded for $p (see $CACHE/download.log)"
    dpkg-deb -x "$deb" "$tmp" || die "dpkg-deb -x $deb failed"
  done
  [ -f "$tmp/usr/share/simple-whip-server/src/server.js" ] || die "simple-whip-server's server.js missing from its .deb"
  rm -rf "$CACHE/root"; mv "$tmp" "$CACHE/root"; touch "$CACHE/root/.simple-whip-server-$version"
  echo "$CACHE/root"
}

# Janus 1.1.2 gathers ICE candidates only on interfaces without IFF_LOOPBACK (src/ice.c skips loopback
# interfaces outright, and libnice's own fallback skips them too), so ice_enforce_list = "lo" alone leaves it with
# no address and every PeerConnection fails ("Error setting ICE locally"). This preload hides IFF_LOOPBACK on "lo"
# from Janus's getifaddrs(), so that with ice_enforce_list = "lo" its only candidate is 127.0.0.1 (host). Built
# once with gcc into $SVC_CACHE/janus-lo/.
lo_shim() {
  local d="${SVC_CACHE:-$HOME/.cache/swift-video-capture}/janus-lo" so
  so="$d/janus-lo-ifaddrs.so"
  if [ ! -f "$so" ]; then
    command -v gcc >/dev/null || { DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
      || die "gcc is needed for the loopback shim"; }
    mkdir -p "$d"
    cat > "$d/janus-lo-ifaddrs.c" <<'CSRC'
/* LD_PRELOAD for Janus (Scripts/janus-env.sh): getifaddrs() reports "lo" without IFF_LOOPBACK. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <string.h>
int getifaddrs(struct ifaddrs **ifap) {
	static int (*real)(struct ifaddrs **);
	if (!real)
		real = (int (*)(struct ifaddrs **))dlsym(RTLD_NEXT, "getifaddrs");
	int r = real(ifap);
	if (r == 0)
		for (struct ifaddrs *i = *ifap; i; i = i->ifa_next)
			if (i->ifa_name && strcmp(i->ifa_name, "lo") == 0)
				i->ifa_flags &= ~IFF_LOOPBACK;
	return r;
}
CSRC
    gcc -O2 -shared -fPIC -o "$so.tmp" "$d/janus-lo-ifaddrs.c" -ldl || die "could not build $so"
    mv "$so.tmp" "$so"
  fi
  echo "$so"
}

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http URL PIDFILE LOG WHAT: until URL answers 2xx, the process is gone (error), or the deadline passes.
wait_http() {
  local url=$1 pidfile=$2 log=$3 what=$4 end=$((SECONDS + DEADLINE))
  while :; do
    if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then return 0; fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then tail_log "$log"; die "$what exited before answering $url"; fi
    if [ $SECONDS -ge $end ]; then tail_log "$log"; die "$what did not answer $url within ${DEADLINE} s"; fi
    sleep 0.1
  done
}

write_janus_config() {   # DIR HTTP_PORT ADMIN_PORT WS_PORT ADMIN_SECRET
  local dir=$1 conf=$1/conf keep disable f
  mkdir -p "$conf"
  # Start from Debian's configs (the plugins' and transports' documented defaults), then replace the parts that
  # matter here with files of our own: janus.jcfg, the two transports, the two plugins.
  cp /etc/janus/*.jcfg "$conf/"
  # Only the plugins and transports needed; no event handlers or loggers.
  disable_list() { local d=$1; shift; local out=() so; for so in "$PLUGINS/$d"/*.so; do so=$(basename "$so");
      case " $* " in *" $so "*) ;; *) out+=("$so");; esac; done; (IFS=,; echo "${out[*]}"); }
  cat > "$conf/janus.jcfg" <<EOF
# Private Janus for swift-video-capture's tests (Scripts/janus-env.sh): loopback only.
general: {
	configs_folder = "$conf"
	plugins_folder = "$PLUGINS/plugins"
	transports_folder = "$PLUGINS/transports"
	events_folder = "$PLUGINS/events"
	loggers_folder = "$PLUGINS/loggers"
	debug_level = 4
	debug_timestamps = true
	admin_secret = "$5"
	server_name = "swift-video-capture-test"
	interface = "127.0.0.1"
	session_timeout = 60
	protected_folders = [ "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/sbin", "/sys", "/usr", "/var" ]
}
certificates: {
}
media: {
	rtp_port_range = "$RTP_RANGE"
	no_media_timer = 2
}
nat: {
	nice_debug = false
	# No STUN, no 1:1 NAT, half trickle: Janus puts its candidates in its SDP answer, which is what reaches a
	# WHIP client (simple-whip-server does not relay Janus's trickled candidates).
	full_trickle = false
	ice_lite = false
	ice_tcp = false
	ignore_mdns = true
	ice_enforce_list = "lo"
}
plugins: {
	disable = "$(disable_list plugins libjanus_videoroom.so libjanus_streaming.so)"
}
transports: {
	disable = "$(disable_list transports libjanus_http.so libjanus_websockets.so)"
}
loggers: {
	disable = "$(disable_list loggers)"
}
events: {
	broadcast = false
	disable = "$(disable_list events)"
}
EOF
  cat > "$conf/janus.transport.http.jcfg" <<EOF
general: {
	json = "compact"
	base_path = "/janus"
	http = true
	port = $2
	ip = "127.0.0.1"
	https = false
}
admin: {
	admin_base_path = "/admin"
	admin_http = true
	admin_port = $3
	admin_ip = "127.0.0.1"
	admin_https = false
}
cors: {
}
EOF
  cat > "$conf/janus.transport.websockets.jcfg" <<EOF
general: {
	json = "compact"
	ws = true
	ws_port = $4
	ws_ip = "127.0.0.1"
	wss = false
}
admin: {
	admin_ws = false
	admin_wss = false
}
EOF
  # The room is created through the VideoRoom API once Janus is up (janus_api.py room-create), so these hold
  # no rooms or mountpoints of their own (Debian's samples would bind fixed ports).
  printf 'general: {\n}\n' > "$conf/janus.plugin.videoroom.jcfg"
  printf 'general: {\n\trtp_port_range = "%s"\n}\n' "$RTP_RANGE" > "$conf/janus.plugin.streaming.jcfg"
}

start() {
  local dir=$1
  mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"
  for f in janus.pid whip.pid; do
    if [ -f "$dir/$f" ] && kill -0 "$(cat "$dir/$f")" 2>/dev/null; then die "$dir already runs ${f%.pid} (pid $(cat "$dir/$f")): stop it first"; fi
  done
  install_apt
  command -v curl >/dev/null || die "curl is needed (apt-get install curl)"
  local root node
  root="$(whip_root)"
  node=/usr/bin/node; [ -x "$node" ] || node=/usr/bin/nodejs
  [ -x "$node" ] || die "no node binary (/usr/bin/node or /usr/bin/nodejs) for simple-whip-server"

  local http_port admin_port ws_port whip_port secret token
  if [ "${REUSE:-0}" = 1 ] && [ -f "$dir/env" ]; then
    # restart: the same ports, secret and token as the last start (a server that comes back at the same URL).
    http_port=$(sed -n 's|^JANUS_HTTP=http://127.0.0.1:\([0-9]*\)/janus$|\1|p' "$dir/env")
    admin_port=$(sed -n 's|^JANUS_ADMIN=http://127.0.0.1:\([0-9]*\)/admin$|\1|p' "$dir/env")
    ws_port=$(sed -n 's|^JANUS_WS=ws://127.0.0.1:\([0-9]*\)$|\1|p' "$dir/env")
    whip_port=$(sed -n 's|^WHIP_BASE=http://127.0.0.1:\([0-9]*\)/whip$|\1|p' "$dir/env")
    secret=$(sed -n 's|^JANUS_ADMIN_SECRET=||p' "$dir/env"); token=$(sed -n 's|^WHIP_TOKEN=||p' "$dir/env")
    [ -n "$http_port" ] && [ -n "$admin_port" ] && [ -n "$ws_port" ] && [ -n "$whip_port" ] && [ -n "$token" ] || die "$dir/env does not hold the last start's ports and token"
  else
    http_port=$(free_port); admin_port=$(free_port); ws_port=$(free_port); whip_port=$(free_port)
    secret=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'); token=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  fi
  write_janus_config "$dir" "$http_port" "$admin_port" "$ws_port" "$secret"

  # Janus, in its own session (setsid in a script without job control execs: $! is janus itself).
  : > "$dir/janus.log"
  local shim; shim="$(lo_shim)"
  ( close_inherited_fds
    LD_PRELOAD="$shim" exec setsid /usr/bin/janus -F "$dir/conf" -C "$dir/conf/janus.jcfg" -o </dev/null >>"$dir/janus.log" 2>&1 ) &
  echo $! > "$dir/janus.pid"
  wait_http "http://127.0.0.1:$http_port/janus/info" "$dir/janus.pid" "$dir/janus.log" "janus"
  /usr/bin/python3 "$HERE/janus_api.py" "http://127.0.0.1:$http_port/janus" room-create "$ROOM" --h264-profile "$H264_PROFILE" \
    > "$dir/room.json" 2> "$dir/room.err" || { cat "$dir/room.err" >&2; tail_log "$dir/janus.log"; die "could not create VideoRoom room $ROOM"; }

  # simple-whip-server: Debian's code, our config.
  local w=$dir/whip
  rm -rf "$w"; mkdir -p "$w/src"
  cp "$root/usr/share/simple-whip-server/src/server.js" "$root/usr/share/simple-whip-server/src/whip-janus.js" "$w/src/"
  cat > "$w/src/config.js" <<EOF
module.exports = {
	janus: { address: 'ws://127.0.0.1:$ws_port' },
	port: $whip_port,
	rest: '/whip',
	allowTrickle: true,
	strictETags: false,
	iceServers: []
};
EOF
  cat > "$w/loopback.js" <<'EOF'
// Preloaded (node -r): a server's listen(port[, cb]) without a host binds 127.0.0.1 instead of every interface.
'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === 'number' || /^\d+$/.test(String(args[0]))) && typeof args[1] !== 'string')
    args.splice(1, 0, '127.0.0.1');
  return listen.apply(this, args);
};
EOF
  : > "$dir/whip.log"
  ( close_inherited_fds; cd "$w" && NODE_PATH="$root/usr/share/nodejs:$root/usr/lib/x86_64-linux-gnu/nodejs" NODE_ENV=production \
      DEBUG="whip:*,janus:*,-janus:vdebug,-janus:debug" DEBUG_COLORS=0 \
      exec setsid "$node" -r "$w/loopback.js" src/server.js </dev/null >>"$dir/whip.log" 2>&1 ) &
  echo $! > "$dir/whip.pid"
  # /whip/healthcheck exists only once simple-whip-server has a Janus session (its start-up waits for that).
  wait_http "http://127.0.0.1:$whip_port/whip/healthcheck" "$dir/whip.pid" "$dir/whip.log" "simple-whip-server"

  local id="swiftvc"
  local code
  code=$(curl -sS -o "$dir/create.out" -w '%{http_code}' --max-time 5 -H 'Content-Type: application/json' \
    -d "{\"id\":\"$id\",\"room\":$ROOM,\"token\":\"$token\",\"label\":\"whip-$id\"}" "http://127.0.0.1:$whip_port/whip/create") || code=000
  [ "$code" = 200 ] || { cat "$dir/create.out" >&2 2>/dev/null; tail_log "$dir/whip.log"; die "creating WHIP endpoint $id failed (HTTP $code)"; }

  cat > "$dir/env" <<EOF
JANUS_HTTP=http://127.0.0.1:$http_port/janus
JANUS_ADMIN=http://127.0.0.1:$admin_port/admin
JANUS_ADMIN_SECRET=$secret
JANUS_WS=ws://127.0.0.1:$ws_port
WHIP_BASE=http://127.0.0.1:$whip_port/whip
WHIP_URL=http://127.0.0.1:$whip_port/whip/endpoint/$id
WHIP_TOKEN=$token
ROOM=$ROOM
JANUS_PID=$(cat "$dir/janus.pid")
WHIP_PID=$(cat "$dir/whip.pid")
EOF
  echo "janus-env.sh: Janus (pid $(cat "$dir/janus.pid")) and simple-whip-server (pid $(cat "$dir/whip.pid")) up; $dir/env:" >&2
  cat "$dir/env"
}

# Daemons keep none of the caller's descriptors beyond 0-2: a caller that waits for this script through a pipe or
# a descriptor it watches (Foundation's Process does) would otherwise wait for the daemons instead.
close_inherited_fds() {
  local fd
  for fd in /proc/$BASHPID/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

stop_pid() {   # PIDFILE NAME: TERM, wait up to the deadline, then KILL; the whole session it leads too
  local f=$1 name=$2 pid end
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    # 3 s: a daemon started by a test runner inherits its blocked SIGTERM and never sees it.
    end=$((SECONDS + 3))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "janus-env.sh: $name (pid $pid) ignored SIGTERM for 3 s: SIGKILL" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      end=$((SECONDS + 5))
      while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
    fi
  fi
  kill -0 "$pid" 2>/dev/null && die "$name (pid $pid) still running"
  rm -f "$f"
}

stop() {
  local dir=$1
  [ -d "$dir" ] || die "no directory $dir"
  stop_pid "$dir/whip.pid" simple-whip-server
  stop_pid "$dir/janus.pid" janus
  echo "janus-env.sh: stopped ($dir)" >&2
}

rtsp_mountpoint() {   # DIR URL [USER PASS]
  local dir=$1 url=$2
  [ -f "$dir/env" ] || die "no $dir/env: run janus-env.sh start $dir first"
  # shellcheck disable=SC1091
  . "$dir/env"
  local args=("$JANUS_HTTP" rtsp-mountpoint "$url")
  [ $# -ge 4 ] && args+=(--user "$3" --password "$4")
  local out
  out=$(/usr/bin/python3 "$HERE/janus_api.py" "${args[@]}") || { tail_log "$dir/janus.log" 15; die "creating the RTSP mountpoint for $url failed"; }
  /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["stream"]["id"])' "$out" \
    || die "unexpected answer from the Streaming plugin: $out"
}

case "${1:-}" in
  start) [ $# -eq 2 ] || die "usage: janus-env.sh start DIR"; start "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: janus-env.sh stop DIR"; stop "$2" ;;
  restart) [ $# -eq 2 ] || die "usage: janus-env.sh restart DIR"; REUSE=1 start "$2" ;;
  rtsp-mountpoint) [ $# -eq 3 ] || [ $# -eq 5 ] || die "usage: janus-env.sh rtsp-mountpoint DIR RTSP_URL [USER PASS]"; shift; rtsp_mountpoint "$@" ;;
  whip-root) whip_root ;;
  *) die "usage: janus-env.sh start DIR | stop DIR | restart DIR (after stop: the same ports and token) | rtsp-mountpoint DIR RTSP_URL [USER PASS] | whip-root" ;;
esac
