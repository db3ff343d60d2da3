// CCameraPortal: a small client of the xdg camera portal (org.freedesktop.portal.Camera on the session bus) over
// libdbus-1, for reaching cameras through PipeWire the way a sandboxed application must: AccessCamera, then
// OpenPipeWireRemote, whose file descriptor is given to pw_context_connect_fd().
//
// Every call opens a private connection to the session bus of its own (DBUS_SESSION_BUS_ADDRESS, else
// $XDG_RUNTIME_DIR/bus; never an autolaunch), does its work with one deadline of timeout_ms for all of it, and
// closes the connection before it returns. No state is kept between calls, so any thread may call any function at
// any time. The library never prints: each failure returns a negative SVC_CAMERA_PORTAL_E_* code and writes a
// sentence into err (errlen bytes, always NUL-terminated when errlen > 0; err may be NULL) naming what failed, with
// the D-Bus error name and message where there is one. err is set to "" on success.
//
// This header needs no D-Bus header: callers (and Swift) see only standard C types.
#ifndef SVC_CAMERA_PORTAL_H
#define SVC_CAMERA_PORTAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The Request's response codes (org.freedesktop.portal.Request.Response). xdg-desktop-portal 1.16 answers a
// refused camera with 1 (it sends "cancelled" for every refusal, whatever the permission backend said); 2 is what
// the portal documentation calls "the interaction was ended in some other way".
#define SVC_CAMERA_PORTAL_RESPONSE_GRANTED 0u
#define SVC_CAMERA_PORTAL_RESPONSE_CANCELLED 1u
#define SVC_CAMERA_PORTAL_RESPONSE_OTHER 2u

// Return codes.
#define SVC_CAMERA_PORTAL_OK 0
#define SVC_CAMERA_PORTAL_E_NO_BUS (-1)       // no session bus address, or connecting / registering failed
#define SVC_CAMERA_PORTAL_E_NO_PORTAL (-2)    // org.freedesktop.portal.Desktop absent, or without the Camera interface
#define SVC_CAMERA_PORTAL_E_NOT_ALLOWED (-3)  // the portal refused (org.freedesktop.portal.Error.NotAllowed)
#define SVC_CAMERA_PORTAL_E_REFUSED (-4)      // svc_camera_portal_acquire: the access request was answered non-zero
#define SVC_CAMERA_PORTAL_E_TIMEOUT (-5)      // timeout_ms passed (no reply, or no Response signal)
#define SVC_CAMERA_PORTAL_E_PORTAL_GONE (-6)  // the portal left the bus, or the bus closed, while we waited
#define SVC_CAMERA_PORTAL_E_FAILED (-7)       // any other D-Bus error or an unexpected reply
#define SVC_CAMERA_PORTAL_E_INVALID (-8)      // a NULL out-pointer

// The default whole-operation timeout, used when timeout_ms <= 0. The access request may show the user a dialog:
// give it more time than a plain method call.
#define SVC_CAMERA_PORTAL_DEFAULT_TIMEOUT_MS 30000

// A constant name for a return code ("ok", "no-bus", "no-portal", "not-allowed", "refused", "timeout",
// "portal-gone", "failed", "invalid", or "unknown").
const char *svc_camera_portal_code_name(int code);

// Reads the Camera interface's IsCameraPresent (*present: 1 or 0) and version (*version, unless NULL).
int svc_camera_portal_is_present(int timeout_ms, int *present, uint32_t *version, char *err, size_t errlen);

// Calls AccessCamera with a handle_token and waits for the Request's Response signal, subscribed to before the
// call (for the request path /org/freedesktop/portal/desktop/request/SENDER/TOKEN and its /RANDOM variant).
// Returns SVC_CAMERA_PORTAL_OK with *response the portal's answer: 0 granted, 1 cancelled (xdg-desktop-portal's
// refusal), 2 other. A timeout closes the request (Request.Close) before it returns SVC_CAMERA_PORTAL_E_TIMEOUT.
int svc_camera_portal_access(int timeout_ms, uint32_t *response, char *err, size_t errlen);

// Calls OpenPipeWireRemote with empty options. On success *fd is a new file descriptor (close-on-exec) that the
// caller owns: a PipeWire connection for pw_context_connect_fd(), which sees only the camera nodes the caller may
// use. Without a granted access the portal answers SVC_CAMERA_PORTAL_E_NOT_ALLOWED. *fd is -1 on failure.
int svc_camera_portal_open_remote(int timeout_ms, int *fd, char *err, size_t errlen);

// Both of the above on one connection and one deadline: access, then, when granted, the remote. Returns
// SVC_CAMERA_PORTAL_OK with *fd, or SVC_CAMERA_PORTAL_E_REFUSED with *response the non-zero answer (then no
// OpenPipeWireRemote is attempted), or another error. response may be NULL.
int svc_camera_portal_acquire(int timeout_ms, uint32_t *response, int *fd, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
