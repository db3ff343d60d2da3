// libdbus-1 (Debian: libdbus-1-dev), found with pkg-config "dbus-1" (its headers sit in /usr/include/dbus-1.0 and
// /usr/lib/<triplet>/dbus-1.0/include). Only the C target CCameraPortal includes them: Swift sees the camera portal
// through CCameraPortal's own header, which needs no D-Bus header.
#include <dbus/dbus.h>
