#!/usr/bin/python3
"""A fake org.freedesktop.impl.portal.Access backend for xdg-desktop-portal, for headless tests of the camera
portal (Scripts/camera-portal-session.sh starts it). Every AccessDialog is answered at once without a dialog:
grant (response 0), cancel (1) or refuse (2), as chosen on the command line.

    fake-portal-access.py grant|cancel|refuse [--bus-name NAME] [--delay SECONDS] [--log FILE]

  --bus-name NAME   the session-bus name to own (default org.freedesktop.impl.portal.desktop.svcfake); the
                    DBusName of the .portal file that makes xdg-desktop-portal use this backend
                    (Scripts/portals/svc-fake-access.portal)
  --delay SECONDS   answer each AccessDialog only after SECONDS (for tests of a caller's timeout)
  --log FILE        append one line per AccessDialog call (app id, title, the answer) to FILE

It prints "fake-portal-access: NAME ready (MODE)" on stdout once it owns the name, serves until SIGTERM or SIGINT,
and exits 1 if the name is already owned or there is no session bus.

Why a backend is needed: xdg-desktop-portal 1.16 exports org.freedesktop.portal.Camera only when some .portal file
lists org.freedesktop.impl.portal.Access. Its camera portal asks the backend's AccessDialog only while the
permission store (table "devices", id "camera") has no entry, or "ask", for the caller's app id (an unsandboxed
caller is app id ""); the first answer is then stored as "yes" or "no" and decides later requests of the session.
"""
import argparse
import signal
import sys
import time

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

ACCESS_INTERFACE = "org.freedesktop.impl.portal.Access"
OBJECT_PATH = "/org/freedesktop/portal/desktop"
RESPONSES = {"grant": 0, "cancel": 1, "refuse": 2}


class FakeAccess(dbus.service.Object):
    def __init__(self, bus, mode, delay, log_path):
        super().__init__(bus, OBJECT_PATH)
        self.mode = mode
        self.response = RESPONSES[mode]
        self.delay = delay
        self.log_path = log_path

    def _log(self, app_id, title):
        if not self.log_path:
            return
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write("%.3f AccessDialog app_id=%r title=%r -> %d (%s)\n"
                      % (time.time(), str(app_id), str(title), self.response, self.mode))

    @dbus.service.method(ACCESS_INTERFACE, in_signature="osssssa{sv}", out_signature="ua{sv}",
                         async_callbacks=("reply", "error"))
    def AccessDialog(self, handle, app_id, parent_window, title, subtitle, body, options, reply, error):
        self._log(app_id, title)
        answer = (dbus.UInt32(self.response), dbus.Dictionary({}, signature="sv"))
        if self.delay > 0:
            def later():
                reply(*answer)
                return GLib.SOURCE_REMOVE
            GLib.timeout_add(int(self.delay * 1000), later)
        else:
            reply(*answer)


def main():
    parser = argparse.ArgumentParser(description="A fake xdg-desktop-portal Access backend (grants or refuses).")
    parser.add_argument("mode", choices=sorted(RESPONSES), help="the answer to every AccessDialog")
    parser.add_argument("--bus-name", default="org.freedesktop.impl.portal.desktop.svcfake")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--log")
    args = parser.parse_args()
    if args.delay < 0:
        parser.error("--delay must not be negative")

    DBusGMainLoop(set_as_default=True)
    try:
        bus = dbus.SessionBus()
    except dbus.exceptions.DBusException as e:
        print("fake-portal-access: no session bus: %s" % e, file=sys.stderr)
        return 1
    try:
        name = dbus.service.BusName(args.bus_name, bus, do_not_queue=True)
    except dbus.exceptions.NameExistsException:
        print("fake-portal-access: %s is already owned on this bus" % args.bus_name, file=sys.stderr)
        return 1
    backend = FakeAccess(bus, args.mode, args.delay, args.log)

    loop = GLib.MainLoop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, loop.quit)
    print("fake-portal-access: %s ready (%s)" % (args.bus_name, args.mode), flush=True)
    loop.run()
    del backend, name
    return 0


if __name__ == "__main__":
    sys.exit(main())
