#!/usr/bin/python3
"""A test RTSP server on loopback (GStreamer's gst-rtsp-server, Debian's gir1.2-gst-rtsp-server-1.0): serves a
live H.264 test pattern (videotestsrc, openh264enc Constrained Baseline, RTP over UDP or TCP) at
rtsp://127.0.0.1:PORT/test, for checking Janus's RTSP mountpoints (janus-env.sh rtsp-mountpoint) without a camera.

    rtsp-test-server.py [--port 0] [--width 640 --height 360 --fps 30] [--url-file FILE]

Prints the URL on stdout once it listens (and writes it to --url-file), serves until SIGTERM/SIGINT.
"""
import argparse, os, signal, socket, sys

import gi
gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--url-file")
    a = ap.parse_args()
    Gst.init(None)
    port = a.port
    if port == 0:
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(port))
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        "( videotestsrc is-live=true pattern=smpte ! video/x-raw,width=%d,height=%d,framerate=%d/1 ! videoconvert "
        "! openh264enc gop-size=%d bitrate=1500000 complexity=low ! video/x-h264,profile=constrained-baseline "
        "! h264parse config-interval=-1 ! rtph264pay name=pay0 pt=96 config-interval=-1 )"
        % (a.width, a.height, a.fps, a.fps * 2))
    factory.set_shared(True)
    server.get_mount_points().add_factory("/test", factory)
    if server.attach(None) == 0:
        print("rtsp-test-server.py: cannot listen on 127.0.0.1:%d" % port, file=sys.stderr)
        return 1
    url = "rtsp://127.0.0.1:%d/test" % port
    print(url, flush=True)
    if a.url_file:
        with open(a.url_file + ".tmp", "w") as f:
            f.write(url + "\n")
        os.replace(a.url_file + ".tmp", a.url_file)
    loop = GLib.MainLoop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, sig, loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
