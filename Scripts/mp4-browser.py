#!/usr/bin/python3
"""Plays a recording in headless Chromium's <video> and reports what the browser saw, as JSON on stdout.

    Scripts/mp4-browser.py FILE.mp4 [--seek SECONDS] [--frames N] [--png OUT.png]

Reports: duration, videoWidth/videoHeight, the mediaTime of the first N frames presented while playing
(requestVideoFrameCallback metadata: the frames' presentation times), then seeks to --seek, waits for the frame
shown there and writes it as a PNG (--png) with its mediaTime. Used by Tests/CamcapTests/BrowserPlaybackTests
(issue 36: Chromium as a judge of the MP4 writer). Needs chromium, chromium-driver and python3-selenium
(Debian's Python: /usr/bin/python3)."""
import argparse
import base64
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402  (the one Chromium set-up: Scripts/chromium.py)

SCRIPT = """
const [name, frames, seek, done] = arguments;
const out = {};
const v = document.createElement('video');
v.muted = true;
v.preload = 'auto';
const fail = (what) => { out.error = what + (v.error ? ': ' + v.error.code + ' ' + v.error.message : ''); done(out); };
v.onerror = () => fail('video error');
v.src = name;
document.body.appendChild(v);
v.onloadedmetadata = async () => {
  out.duration = v.duration; out.width = v.videoWidth; out.height = v.videoHeight;
  out.mediaTimes = [];
  await new Promise((resolve) => {
    const cb = (now, md) => {
      out.mediaTimes.push(md.mediaTime);
      if (out.mediaTimes.length >= frames) resolve(); else v.requestVideoFrameCallback(cb);
    };
    v.requestVideoFrameCallback(cb);
    v.onended = resolve;
    v.playbackRate = 1;
    v.play().catch((e) => { out.playError = String(e); resolve(); });
  });
  v.pause();
  out.ended = v.ended;
  const shown = new Promise((resolve) => v.requestVideoFrameCallback((now, md) => { out.seekMediaTime = md.mediaTime; resolve(); }));
  const seeked = new Promise((resolve) => { v.onseeked = resolve; });
  v.currentTime = seek;
  await seeked;
  await Promise.race([shown, new Promise((r) => setTimeout(r, 3000))]);
  out.currentTime = v.currentTime;
  const c = document.createElement('canvas');
  c.width = v.videoWidth; c.height = v.videoHeight;
  c.getContext('2d').drawImage(v, 0, 0);
  out.png = c.toDataURL('image/png');
  done(out);
};
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--seek", type=float, default=1.0, help="seconds to seek to after playing (default 1.0)")
    ap.add_argument("--frames", type=int, default=20, help="frames whose presentation times are collected while playing")
    ap.add_argument("--png", default=None, help="write the frame shown after the seek here")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    if not os.path.isfile(a.file):
        sys.exit(f"mp4-browser.py: {a.file}: no such file")
    # The page and a copy of the file in one folder of their own, loaded over file:// (same folder: the canvas
    # may read the picture with --allow-file-access-from-files).
    folder = tempfile.mkdtemp(prefix="mp4-browser-")
    try:
        shutil.copy(a.file, os.path.join(folder, "video.mp4"))
        page = os.path.join(folder, "index.html")
        with open(page, "w") as f:
            f.write("<!doctype html><html><body></body></html>")
        d = chromium.start(window="800,600")
        try:
            d.set_script_timeout(a.timeout)
            d.get("file://" + page)
            out = d.execute_async_script(SCRIPT, "video.mp4", a.frames, a.seek)
        finally:
            d.quit()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    png = out.pop("png", None)
    if a.png and png and png.startswith("data:image/png;base64,"):
        with open(a.png, "wb") as f:
            f.write(base64.b64decode(png[len("data:image/png;base64,"):]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
