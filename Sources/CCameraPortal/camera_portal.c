// CCameraPortal: the xdg camera portal over libdbus-1 (see include/camera_portal.h).
//
// Each public function: one deadline, one private connection (opened here, closed before returning), blocking
// calls bounded by what is left of the deadline, and an error sentence for every failure.
#define _GNU_SOURCE
#include "camera_portal.h"

#include <dbus/dbus.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PORTAL_NAME "org.freedesktop.portal.Desktop"
#define PORTAL_PATH "/org/freedesktop/portal/desktop"
#define CAMERA_INTERFACE "org.freedesktop.portal.Camera"
#define REQUEST_INTERFACE "org.freedesktop.portal.Request"
#define REQUEST_PATH_PREFIX "/org/freedesktop/portal/desktop/request/"
#define NOT_ALLOWED_ERROR "org.freedesktop.portal.Error.NotAllowed"

const char *svc_camera_portal_code_name(int code) {
    switch (code) {
    case SVC_CAMERA_PORTAL_OK: return "ok";
    case SVC_CAMERA_PORTAL_E_NO_BUS: return "no-bus";
    case SVC_CAMERA_PORTAL_E_NO_PORTAL: return "no-portal";
    case SVC_CAMERA_PORTAL_E_NOT_ALLOWED: return "not-allowed";
    case SVC_CAMERA_PORTAL_E_REFUSED: return "refused";
    case SVC_CAMERA_PORTAL_E_TIMEOUT: return "timeout";
    case SVC_CAMERA_PORTAL_E_PORTAL_GONE: return "portal-gone";
    case SVC_CAMERA_PORTAL_E_FAILED: return "failed";
    case SVC_CAMERA_PORTAL_E_INVALID: return "invalid";
    default: return "unknown";
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Errors and time
// ---------------------------------------------------------------------------------------------------------------

typedef struct {
    char *text;
    size_t size;
} error_out;

static int fail(error_out *e, int code, const char *format, ...) __attribute__((format(printf, 3, 4)));

static int fail(error_out *e, int code, const char *format, ...) {
    if (e->text && e->size > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(e->text, e->size, format, args);
        va_end(args);
    }
    return code;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// What is left of the deadline in ms (at least 1 while any is left, 0 when it has passed).
static int remaining_ms(int64_t deadline) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

// The return code for a D-Bus error name.
static int code_for_error(const char *name) {
    if (!name) return SVC_CAMERA_PORTAL_E_FAILED;
    if (strcmp(name, DBUS_ERROR_SERVICE_UNKNOWN) == 0 || strcmp(name, DBUS_ERROR_NAME_HAS_NO_OWNER) == 0 ||
        strcmp(name, DBUS_ERROR_UNKNOWN_METHOD) == 0 || strcmp(name, DBUS_ERROR_UNKNOWN_INTERFACE) == 0 ||
        strcmp(name, DBUS_ERROR_UNKNOWN_OBJECT) == 0 || strcmp(name, DBUS_ERROR_UNKNOWN_PROPERTY) == 0)
        return SVC_CAMERA_PORTAL_E_NO_PORTAL;
    if (strcmp(name, NOT_ALLOWED_ERROR) == 0) return SVC_CAMERA_PORTAL_E_NOT_ALLOWED;
    if (strcmp(name, DBUS_ERROR_NO_REPLY) == 0 || strcmp(name, DBUS_ERROR_TIMEOUT) == 0 ||
        strcmp(name, DBUS_ERROR_TIMED_OUT) == 0)
        return SVC_CAMERA_PORTAL_E_TIMEOUT;
    if (strcmp(name, DBUS_ERROR_DISCONNECTED) == 0) return SVC_CAMERA_PORTAL_E_PORTAL_GONE;
    if (strcmp(name, DBUS_ERROR_NO_MEMORY) == 0) return SVC_CAMERA_PORTAL_E_FAILED;
    return SVC_CAMERA_PORTAL_E_FAILED;
}

// ---------------------------------------------------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------------------------------------------------

// A blocking method call bounded by the deadline. On success *reply is the reply (the caller unrefs it).
// error_name (may be NULL) receives the D-Bus error's name, "" when there is none.
static int call_named(DBusConnection *c, DBusMessage *m, int64_t deadline, DBusMessage **reply, const char *what,
                      error_out *e, char *error_name, size_t name_size) {
    DBusError error;
    int left = remaining_ms(deadline);
    *reply = NULL;
    if (error_name && name_size > 0) error_name[0] = 0;
    if (left == 0) return fail(e, SVC_CAMERA_PORTAL_E_TIMEOUT, "%s: the time was up before the call", what);
    dbus_error_init(&error);
    *reply = dbus_connection_send_with_reply_and_block(c, m, left, &error);
    if (*reply) return SVC_CAMERA_PORTAL_OK;
    int code = dbus_error_is_set(&error) ? code_for_error(error.name) : SVC_CAMERA_PORTAL_E_FAILED;
    if (error_name && name_size > 0 && dbus_error_is_set(&error)) snprintf(error_name, name_size, "%s", error.name);
    if (code == SVC_CAMERA_PORTAL_E_TIMEOUT)
        fail(e, code, "%s: no reply within the time left (%d ms): %s: %s", what, left, error.name, error.message);
    else if (dbus_error_is_set(&error))
        fail(e, code, "%s failed: %s: %s", what, error.name, error.message);
    else
        fail(e, code, "%s failed without a D-Bus error (out of memory?)", what);
    dbus_error_free(&error);
    return code;
}

static int call(DBusConnection *c, DBusMessage *m, int64_t deadline, DBusMessage **reply, const char *what,
                error_out *e) {
    return call_named(c, m, deadline, reply, what, e, NULL, 0);
}

// The session bus's address: DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus when that is a socket. libdbus's
// own look-up would fall back to autolaunch (starting dbus-launch); a library must not start daemons.
static int session_address(char *out, size_t size, error_out *e) {
    const char *address = getenv("DBUS_SESSION_BUS_ADDRESS");
    if (address && address[0]) {
        if (strlen(address) >= size) return fail(e, SVC_CAMERA_PORTAL_E_NO_BUS, "DBUS_SESSION_BUS_ADDRESS is too long");
        strcpy(out, address);
        return SVC_CAMERA_PORTAL_OK;
    }
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    if (runtime && runtime[0]) {
        char path[4096];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/bus", runtime) < (int)sizeof path && stat(path, &st) == 0 &&
            S_ISSOCK(st.st_mode)) {
            char *escaped = dbus_address_escape_value(path);
            if (!escaped) return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "out of memory escaping the bus address");
            int n = snprintf(out, size, "unix:path=%s", escaped);
            dbus_free(escaped);
            if (n < 0 || (size_t)n >= size) return fail(e, SVC_CAMERA_PORTAL_E_NO_BUS, "the bus address is too long");
            return SVC_CAMERA_PORTAL_OK;
        }
    }
    return fail(e, SVC_CAMERA_PORTAL_E_NO_BUS,
                "no session bus: DBUS_SESSION_BUS_ADDRESS is not set and there is no $XDG_RUNTIME_DIR/bus socket");
}

static void close_connection(DBusConnection *c) {
    if (!c) return;
    dbus_connection_close(c);
    dbus_connection_unref(c);
}

// Opens a private connection and registers it (Hello, bounded by the deadline; dbus_bus_register would wait the
// default 25 s).
static int open_connection(DBusConnection **out, int64_t deadline, error_out *e) {
    char address[8192];
    DBusError error;
    *out = NULL;
    dbus_threads_init_default(); // a no-op since libdbus 1.7 made itself thread-safe; harmless before
    int r = session_address(address, sizeof address, e);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    dbus_error_init(&error);
    DBusConnection *c = dbus_connection_open_private(address, &error);
    if (!c) {
        fail(e, SVC_CAMERA_PORTAL_E_NO_BUS, "connecting to the session bus (%s) failed: %s: %s", address,
             error.name ? error.name : "?", error.message ? error.message : "?");
        dbus_error_free(&error);
        return SVC_CAMERA_PORTAL_E_NO_BUS;
    }
    // A bus connection exits the whole process on disconnection by default: never in a library.
    dbus_connection_set_exit_on_disconnect(c, FALSE);

    DBusMessage *hello = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "Hello");
    if (!hello) {
        close_connection(c);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "out of memory (Hello)");
    }
    DBusMessage *reply = NULL;
    r = call(c, hello, deadline, &reply, "registering on the session bus (Hello)", e);
    dbus_message_unref(hello);
    if (r != SVC_CAMERA_PORTAL_OK) {
        close_connection(c);
        return r == SVC_CAMERA_PORTAL_E_TIMEOUT ? r : SVC_CAMERA_PORTAL_E_NO_BUS;
    }
    const char *unique = NULL;
    dbus_error_init(&error);
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_STRING, &unique, DBUS_TYPE_INVALID) ||
        !dbus_bus_set_unique_name(c, unique)) {
        fail(e, SVC_CAMERA_PORTAL_E_NO_BUS, "the bus's Hello reply is not a name: %s",
             dbus_error_is_set(&error) ? error.message : "out of memory");
        dbus_error_free(&error);
        dbus_message_unref(reply);
        close_connection(c);
        return SVC_CAMERA_PORTAL_E_NO_BUS;
    }
    dbus_message_unref(reply);
    *out = c;
    return SVC_CAMERA_PORTAL_OK;
}

// AddMatch, bounded by the deadline (dbus_bus_add_match would wait the default 25 s).
static int add_match(DBusConnection *c, const char *rule, int64_t deadline, error_out *e) {
    DBusMessage *m = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS, "AddMatch");
    if (!m || !dbus_message_append_args(m, DBUS_TYPE_STRING, &rule, DBUS_TYPE_INVALID)) {
        if (m) dbus_message_unref(m);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "out of memory (AddMatch)");
    }
    DBusMessage *reply = NULL;
    char what[600];
    snprintf(what, sizeof what, "subscribing to the bus (AddMatch %s)", rule);
    int r = call(c, m, deadline, &reply, what, e);
    dbus_message_unref(m);
    if (reply) dbus_message_unref(reply);
    return r;
}

// Appends an empty a{sv}, or one holding handle_token when token is not NULL.
static int append_options(DBusMessage *m, const char *token) {
    DBusMessageIter args, dict, entry, variant;
    dbus_message_iter_init_append(m, &args);
    if (!dbus_message_iter_open_container(&args, DBUS_TYPE_ARRAY, "{sv}", &dict)) return 0;
    if (token) {
        const char *key = "handle_token";
        if (!dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry) ||
            !dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key) ||
            !dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "s", &variant) ||
            !dbus_message_iter_append_basic(&variant, DBUS_TYPE_STRING, &token) ||
            !dbus_message_iter_close_container(&entry, &variant) || !dbus_message_iter_close_container(&dict, &entry))
            return 0;
    }
    return dbus_message_iter_close_container(&args, &dict);
}

// ---------------------------------------------------------------------------------------------------------------
// The operations, on an open connection
// ---------------------------------------------------------------------------------------------------------------

static int get_property(DBusConnection *c, const char *name, int type, void *value, int64_t deadline, error_out *e) {
    const char *interface = CAMERA_INTERFACE;
    DBusMessage *m = dbus_message_new_method_call(PORTAL_NAME, PORTAL_PATH, DBUS_INTERFACE_PROPERTIES, "Get");
    if (!m || !dbus_message_append_args(m, DBUS_TYPE_STRING, &interface, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID)) {
        if (m) dbus_message_unref(m);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "out of memory (Properties.Get)");
    }
    char what[200];
    snprintf(what, sizeof what, "reading %s.%s (Properties.Get)", CAMERA_INTERFACE, name);
    DBusMessage *reply = NULL;
    char error_name[256];
    int r = call_named(c, m, deadline, &reply, what, e, error_name, sizeof error_name);
    dbus_message_unref(m);
    if (r != SVC_CAMERA_PORTAL_OK) {
        // GDBus answers a Get for an interface the object lacks with InvalidArgs ("No such interface ...").
        if (r == SVC_CAMERA_PORTAL_E_FAILED && strcmp(error_name, DBUS_ERROR_INVALID_ARGS) == 0)
            r = SVC_CAMERA_PORTAL_E_NO_PORTAL;
        return r;
    }
    DBusMessageIter args, variant;
    if (!dbus_message_iter_init(reply, &args) || dbus_message_iter_get_arg_type(&args) != DBUS_TYPE_VARIANT) {
        dbus_message_unref(reply);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "%s: the reply holds no variant", what);
    }
    dbus_message_iter_recurse(&args, &variant);
    if (dbus_message_iter_get_arg_type(&variant) != type) {
        int got = dbus_message_iter_get_arg_type(&variant);
        dbus_message_unref(reply);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "%s: the value has type '%c', not '%c'", what, got, type);
    }
    dbus_message_iter_get_basic(&variant, value);
    dbus_message_unref(reply);
    return SVC_CAMERA_PORTAL_OK;
}

// The path element xdg-desktop-portal makes of a unique name: ":1.42" -> "1_42".
static void sender_element(const char *unique, char *out, size_t size) {
    size_t n = 0;
    for (const char *p = unique[0] == ':' ? unique + 1 : unique; *p && n + 1 < size; p++)
        out[n++] = *p == '.' ? '_' : *p;
    out[n] = 0;
}

// Closes a request we stopped waiting for, so that the portal ends its dialog (no reply awaited).
static void close_request(DBusConnection *c, const char *handle) {
    DBusMessage *m = dbus_message_new_method_call(PORTAL_NAME, handle, REQUEST_INTERFACE, "Close");
    if (!m) return;
    dbus_message_set_no_reply(m, TRUE);
    dbus_connection_send(c, m, NULL);
    dbus_connection_flush(c);
    dbus_message_unref(m);
}

// What one incoming message means to the wait for the Response of request `handle` (NULL: not known yet).
enum { WAIT_GO_ON, WAIT_RESPONSE, WAIT_GONE };

static int judge_message(DBusMessage *msg, const char *handle, uint32_t *response) {
    if (dbus_message_is_signal(msg, DBUS_INTERFACE_LOCAL, "Disconnected")) return WAIT_GONE;
    if (dbus_message_is_signal(msg, DBUS_INTERFACE_DBUS, "NameOwnerChanged")) {
        const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
        if (dbus_message_get_args(msg, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_STRING, &old_owner, DBUS_TYPE_STRING,
                                  &new_owner, DBUS_TYPE_INVALID) &&
            strcmp(name, PORTAL_NAME) == 0 && new_owner[0] == 0)
            return WAIT_GONE;
        return WAIT_GO_ON;
    }
    if (handle && dbus_message_is_signal(msg, REQUEST_INTERFACE, "Response") && dbus_message_has_path(msg, handle)) {
        DBusMessageIter args;
        if (dbus_message_iter_init(msg, &args) && dbus_message_iter_get_arg_type(&args) == DBUS_TYPE_UINT32) {
            dbus_uint32_t value = 0;
            dbus_message_iter_get_basic(&args, &value);
            *response = value;
            return WAIT_RESPONSE;
        }
    }
    return WAIT_GO_ON;
}

static int access_camera(DBusConnection *c, int64_t deadline, uint32_t *response, error_out *e) {
    const char *unique = dbus_bus_get_unique_name(c);
    char sender[256], token[64], request_root[400], rule[800], predicted[512];
    int r;

    // The request's path is REQUEST_PATH_PREFIX SENDER/TOKEN, or SENDER/TOKEN/RANDOM when that is taken. Subscribe
    // to Response signals under SENDER before the call, so that none can be missed between the call and its reply.
    sender_element(unique, sender, sizeof sender);
    snprintf(token, sizeof token, "svc_camera_%ld_%lld", (long)getpid(), (long long)now_ms());
    snprintf(request_root, sizeof request_root, REQUEST_PATH_PREFIX "%s", sender);
    snprintf(predicted, sizeof predicted, "%s/%s", request_root, token);
    snprintf(rule, sizeof rule,
             "type='signal',sender='" PORTAL_NAME "',interface='" REQUEST_INTERFACE
             "',member='Response',path_namespace='%s'",
             request_root);
    if ((r = add_match(c, rule, deadline, e)) != SVC_CAMERA_PORTAL_OK) return r;
    // And to the portal leaving the bus: then no Response can come.
    r = add_match(c,
                  "type='signal',sender='" DBUS_SERVICE_DBUS "',interface='" DBUS_INTERFACE_DBUS
                  "',member='NameOwnerChanged',arg0='" PORTAL_NAME "'",
                  deadline, e);
    if (r != SVC_CAMERA_PORTAL_OK) return r;

    DBusMessage *m = dbus_message_new_method_call(PORTAL_NAME, PORTAL_PATH, CAMERA_INTERFACE, "AccessCamera");
    if (!m || !append_options(m, token)) {
        if (m) dbus_message_unref(m);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "out of memory (AccessCamera)");
    }
    DBusMessage *reply = NULL;
    r = call(c, m, deadline, &reply, CAMERA_INTERFACE ".AccessCamera", e);
    dbus_message_unref(m);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    const char *returned = NULL;
    DBusError error;
    dbus_error_init(&error);
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_OBJECT_PATH, &returned, DBUS_TYPE_INVALID)) {
        fail(e, SVC_CAMERA_PORTAL_E_FAILED, "AccessCamera's reply is not an object path: %s", error.message);
        dbus_error_free(&error);
        dbus_message_unref(reply);
        return SVC_CAMERA_PORTAL_E_FAILED;
    }
    char handle[512];
    snprintf(handle, sizeof handle, "%s", returned);
    dbus_message_unref(reply);
    if (strncmp(handle, request_root, strlen(request_root)) != 0 || handle[strlen(request_root)] != '/') {
        // An old portal (before the request path was predictable) would answer elsewhere, outside our match rule.
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED,
                    "AccessCamera returned the request %s, outside the path %s/ we subscribed to (predicted %s)",
                    handle, request_root, predicted);
    }

    // Wait for the Response: first what arrived while the call was under way, then the socket, until the deadline.
    for (;;) {
        DBusMessage *msg;
        while ((msg = dbus_connection_pop_message(c)) != NULL) {
            int verdict = judge_message(msg, handle, response);
            dbus_message_unref(msg);
            if (verdict == WAIT_RESPONSE) return SVC_CAMERA_PORTAL_OK;
            if (verdict == WAIT_GONE)
                return fail(e, SVC_CAMERA_PORTAL_E_PORTAL_GONE,
                            "the portal left the session bus (or the bus closed) before answering the request %s",
                            handle);
        }
        int left = remaining_ms(deadline);
        if (left == 0) {
            close_request(c, handle);
            return fail(e, SVC_CAMERA_PORTAL_E_TIMEOUT,
                        "AccessCamera: no Response signal for the request %s in time (the request was closed)", handle);
        }
        if (!dbus_connection_read_write(c, left))
            return fail(e, SVC_CAMERA_PORTAL_E_PORTAL_GONE, "the session bus closed while waiting for the request %s",
                        handle);
    }
}

static int open_remote(DBusConnection *c, int64_t deadline, int *fd, error_out *e) {
    if (!dbus_connection_can_send_type(c, DBUS_TYPE_UNIX_FD))
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED,
                    "this session bus connection cannot pass file descriptors (not a local UNIX socket?)");
    DBusMessage *m = dbus_message_new_method_call(PORTAL_NAME, PORTAL_PATH, CAMERA_INTERFACE, "OpenPipeWireRemote");
    if (!m || !append_options(m, NULL)) {
        if (m) dbus_message_unref(m);
        return fail(e, SVC_CAMERA_PORTAL_E_FAILED, "out of memory (OpenPipeWireRemote)");
    }
    DBusMessage *reply = NULL;
    int r = call(c, m, deadline, &reply, CAMERA_INTERFACE ".OpenPipeWireRemote", e);
    dbus_message_unref(m);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    int received = -1;
    DBusError error;
    dbus_error_init(&error);
    // libdbus hands out a duplicate (close-on-exec) that the caller owns.
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_UNIX_FD, &received, DBUS_TYPE_INVALID)) {
        fail(e, SVC_CAMERA_PORTAL_E_FAILED, "OpenPipeWireRemote's reply holds no file descriptor: %s: %s", error.name,
             error.message);
        dbus_error_free(&error);
        dbus_message_unref(reply);
        return SVC_CAMERA_PORTAL_E_FAILED;
    }
    dbus_message_unref(reply);
    *fd = received;
    return SVC_CAMERA_PORTAL_OK;
}

// ---------------------------------------------------------------------------------------------------------------
// The public functions
// ---------------------------------------------------------------------------------------------------------------

static int64_t deadline_for(int timeout_ms) {
    return now_ms() + (timeout_ms > 0 ? timeout_ms : SVC_CAMERA_PORTAL_DEFAULT_TIMEOUT_MS);
}

static void clear(error_out *e) {
    if (e->text && e->size > 0) e->text[0] = 0;
}

int svc_camera_portal_is_present(int timeout_ms, int *present, uint32_t *version, char *err, size_t errlen) {
    error_out e = {err, errlen};
    clear(&e);
    if (!present) return fail(&e, SVC_CAMERA_PORTAL_E_INVALID, "svc_camera_portal_is_present: present is NULL");
    *present = 0;
    int64_t deadline = deadline_for(timeout_ms);
    DBusConnection *c = NULL;
    int r = open_connection(&c, deadline, &e);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    dbus_bool_t value = FALSE;
    r = get_property(c, "IsCameraPresent", DBUS_TYPE_BOOLEAN, &value, deadline, &e);
    if (r == SVC_CAMERA_PORTAL_OK && version) {
        dbus_uint32_t v = 0;
        r = get_property(c, "version", DBUS_TYPE_UINT32, &v, deadline, &e);
        if (r == SVC_CAMERA_PORTAL_OK) *version = v;
    }
    if (r == SVC_CAMERA_PORTAL_OK) *present = value ? 1 : 0;
    close_connection(c);
    return r;
}

int svc_camera_portal_access(int timeout_ms, uint32_t *response, char *err, size_t errlen) {
    error_out e = {err, errlen};
    clear(&e);
    if (!response) return fail(&e, SVC_CAMERA_PORTAL_E_INVALID, "svc_camera_portal_access: response is NULL");
    int64_t deadline = deadline_for(timeout_ms);
    DBusConnection *c = NULL;
    int r = open_connection(&c, deadline, &e);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    r = access_camera(c, deadline, response, &e);
    close_connection(c);
    return r;
}

int svc_camera_portal_open_remote(int timeout_ms, int *fd, char *err, size_t errlen) {
    error_out e = {err, errlen};
    clear(&e);
    if (!fd) return fail(&e, SVC_CAMERA_PORTAL_E_INVALID, "svc_camera_portal_open_remote: fd is NULL");
    *fd = -1;
    int64_t deadline = deadline_for(timeout_ms);
    DBusConnection *c = NULL;
    int r = open_connection(&c, deadline, &e);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    r = open_remote(c, deadline, fd, &e);
    close_connection(c);
    return r;
}

int svc_camera_portal_acquire(int timeout_ms, uint32_t *response, int *fd, char *err, size_t errlen) {
    error_out e = {err, errlen};
    clear(&e);
    if (!fd) return fail(&e, SVC_CAMERA_PORTAL_E_INVALID, "svc_camera_portal_acquire: fd is NULL");
    *fd = -1;
    int64_t deadline = deadline_for(timeout_ms);
    DBusConnection *c = NULL;
    int r = open_connection(&c, deadline, &e);
    if (r != SVC_CAMERA_PORTAL_OK) return r;
    uint32_t answer = 0;
    r = access_camera(c, deadline, &answer, &e);
    if (response) *response = answer;
    if (r == SVC_CAMERA_PORTAL_OK && answer != SVC_CAMERA_PORTAL_RESPONSE_GRANTED)
        r = fail(&e, SVC_CAMERA_PORTAL_E_REFUSED, "the camera portal refused access to the camera (AccessCamera answered %u: %s)",
                 answer, answer == SVC_CAMERA_PORTAL_RESPONSE_CANCELLED ? "cancelled or denied" : "ended otherwise");
    else if (r == SVC_CAMERA_PORTAL_OK)
        r = open_remote(c, deadline, fd, &e);
    close_connection(c);
    return r;
}
