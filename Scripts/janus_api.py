#!/usr/bin/python3
"""A small client of Janus's HTTP (REST) API, for Scripts/janus-env.sh and Scripts/janus-viewer.py.

    janus_api.py JANUS_HTTP info
    janus_api.py JANUS_HTTP room-create ROOM [--h264-profile 42e01f]
    janus_api.py JANUS_HTTP listparticipants ROOM
    janus_api.py JANUS_HTTP rtsp-mountpoint RTSP_URL [--user U --password P] [--id N]

Each command prints one JSON line (the plugin's answer) and exits non-zero with the reason on stderr when Janus
answers with an error. Synchronous plugin requests (create, list, listparticipants) are answered in the POST's own
reply by the HTTP transport, so no long poll is needed for them.
"""
import argparse, json, random, string, sys, urllib.error, urllib.request


class JanusError(RuntimeError):
    pass


def _tx():
    return "".join(random.choice(string.ascii_letters) for _ in range(12))


class Janus:
    def __init__(self, base, timeout=10):
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.session = None
        self.handles = {}

    def handle(self, plugin):
        """A handle to plugin, made once per session (a new session if the old one timed out)."""
        if plugin not in self.handles:
            self.handles[plugin] = self.attach(plugin)
        return self.handles[plugin]

    def retry(self, fn):
        """fn(), once more on a new session if Janus no longer knows ours (its session_timeout)."""
        try:
            return fn()
        except JanusError as e:
            if "458" not in str(e) and "459" not in str(e):   # no such session / no such handle
                raise
            self.session, self.handles = None, {}
            return fn()

    def _call(self, url, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                answer = json.load(r)
        except urllib.error.URLError as e:
            raise JanusError("Janus HTTP API %s unreachable: %s" % (url, e))
        if answer.get("janus") == "error":
            raise JanusError("Janus error %s: %s" % (answer["error"].get("code"), answer["error"].get("reason")))
        return answer

    def info(self):
        return self._call(self.base + "/info")

    def create_session(self):
        self.session = self._call(self.base, {"janus": "create", "transaction": _tx()})["data"]["id"]
        return self.session

    def attach(self, plugin):
        if self.session is None:
            self.create_session()
        return self._call("%s/%d" % (self.base, self.session),
                          {"janus": "attach", "plugin": plugin, "transaction": _tx()})["data"]["id"]

    def request(self, handle, body):
        """A synchronous plugin request: the answer's plugindata.data, or JanusError."""
        a = self._call("%s/%d/%d" % (self.base, self.session, handle),
                       {"janus": "message", "body": body, "transaction": _tx()})
        if a.get("janus") != "success":
            raise JanusError("expected a synchronous answer to %s, got %s" % (body.get("request"), json.dumps(a)))
        data = a["plugindata"]["data"]
        if "error" in data or "error_code" in data:
            raise JanusError("%s: %s (%s)" % (body.get("request"), data.get("error"), data.get("error_code")))
        return data

    def destroy(self):
        if self.session is not None:
            try:
                self._call("%s/%d" % (self.base, self.session), {"janus": "destroy", "transaction": _tx()})
            except JanusError:
                pass
            self.session, self.handles = None, {}


def room_create(j, room, profile):
    h = j.attach("janus.plugin.videoroom")
    if j.request(h, {"request": "exists", "room": room}).get("exists"):
        return {"videoroom": "exists", "room": room}
    return j.request(h, {"request": "create", "room": room, "description": "swift-video-capture test room",
                         "publishers": 4, "videocodec": "h264", "h264_profile": profile, "audiocodec": "opus",
                         "fir_freq": 10, "bitrate": 0, "notify_joining": True})


def listparticipants(j, room):
    return j.retry(lambda: j.request(j.handle("janus.plugin.videoroom"), {"request": "listparticipants", "room": room}))


def rtsp_mountpoint(j, url, user, password, mid):
    h = j.attach("janus.plugin.streaming")
    body = {"request": "create", "type": "rtsp", "url": url, "description": "RTSP " + url,
            # video only; its rtpmap/fmtp come from the RTSP server's DESCRIBE when not given here
            "audio": False, "video": True, "rtspiface": "127.0.0.1",
            "rtsp_reconnect_delay": 2, "rtsp_session_timeout": 0, "rtsp_failcheck": True}
    if mid is not None:
        body["id"] = mid
    if user:
        body["rtsp_user"], body["rtsp_pwd"] = user, password or ""
    return j.request(h, body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("janus")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info")
    p = sub.add_parser("room-create"); p.add_argument("room", type=int); p.add_argument("--h264-profile", default="42e01f")
    p = sub.add_parser("listparticipants"); p.add_argument("room", type=int)
    p = sub.add_parser("rtsp-mountpoint"); p.add_argument("url"); p.add_argument("--user"); p.add_argument("--password")
    p.add_argument("--id", type=int)
    a = ap.parse_args()
    j = Janus(a.janus)
    try:
        if a.cmd == "info":
            out = j.info()
        elif a.cmd == "room-create":
            out = room_create(j, a.room, a.h264_profile)
        elif a.cmd == "listparticipants":
            out = listparticipants(j, a.room)
        else:
            out = rtsp_mountpoint(j, a.url, a.user, a.password, a.id)
    except JanusError as e:
        print("janus_api.py %s: %s" % (a.cmd, e), file=sys.stderr)
        return 1
    finally:
        j.destroy()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
