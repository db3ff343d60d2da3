"""One Chromium set-up for every browser judge (webrtc-browser, janus-viewer, whip-publish-browser, mp4-browser,
webrtc-attack): Debian's chromium and chromedriver, headless, with the same flags everywhere so that a judge's
behaviour never depends on which script started the browser.

Flags, and why:
  --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage   runs as root in a container, no GPU, small /dev/shm
  --mute-audio --autoplay-policy=no-user-gesture-required              a <video> plays without a click
  --allow-loopback-in-peer-connection                                  ICE candidates on 127.0.0.1 (our servers' tests)
  --allow-file-access-from-files                                       pages from file:// load local media (mp4-browser)
  --no-first-run                                                       no welcome page
  --disable-background-timer-throttling --disable-renderer-backgrounding --disable-backgrounding-occluded-windows
                                                                       a headless tab is never treated as hidden: its
                                                                       timers and decoder run at full rate
  --window-size                                                        the viewport the page lays its <video> out in
"""
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--mute-audio",
    "--autoplay-policy=no-user-gesture-required", "--allow-loopback-in-peer-connection",
    "--allow-file-access-from-files", "--no-first-run", "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows",
]


def start(extra=(), window="640,480", log=None, browser_logs=False):
    """A new Chromium under chromedriver: FLAGS, the window size, then `extra` flags (a fake camera, a pinned
    certificate); `log` is chromedriver's log file, `browser_logs` keeps the page's console for get_log."""
    o = Options()
    for arg in FLAGS + ["--window-size=" + window] + list(extra):
        o.add_argument(arg)
    o.binary_location = CHROMIUM
    if browser_logs:
        o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER, log_output=log) if log else Service(CHROMEDRIVER)
    return webdriver.Chrome(service=service, options=o)
