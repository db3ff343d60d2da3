#!/usr/bin/env python3
"""Headless Chromium on camcap serve's MJPEG page (/mjpeg.html: an <img> of /stream.mjpeg): waits until the
picture has changed `--changes` times (sampled into a canvas every 50 ms), then prints one JSON line:
{"width", "height", "samples", "changes", "error"}. The judge of `<img src=/stream.mjpeg>` in a real browser.

  mjpeg-browser.py 'http://127.0.0.1:PORT/mjpeg.html#token=…&fps=10&width=320&height=240' --changes 10
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chromium  # noqa: E402  (the one Chromium set-up: Scripts/chromium.py)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--changes", type=int, default=10)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args()
    d = chromium.start()
    report = {"width": 0, "height": 0, "samples": 0, "changes": 0, "error": None}
    try:
        d.get(a.url)
        end = time.time() + a.timeout
        while time.time() < end:
            r = d.execute_script("return window.camcapMJPEG ? window.camcapMJPEG() : null")
            if r:
                report.update(r)
                if r["changes"] >= a.changes:
                    break
            time.sleep(0.1)
        else:
            report["error"] = "timed out after %s s" % a.timeout
    except Exception as e:  # noqa: BLE001 (the report says what went wrong)
        report["error"] = str(e)
    finally:
        d.quit()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
