// portal_check: judges CCameraPortal (Sources/CCameraPortal) against a headless xdg camera portal
// (Scripts/camera-portal-session.sh; Scripts/check-camera-portal.sh runs every case). Prints one PASS or FAIL line
// per check and exits 1 when any failed, 2 on a usage error.
//
//   (grant and refuse take --expect-present yes|no|any: what IsCameraPresent must read, default any (reported);
//   and --expect-dialogs N: how many AccessDialog calls the fake backend logged in $CAMERA_PORTAL_ACCESS_LOG,
//   which shows whether the backend's dialog (N >= 1) or the permission store (N = 0) decided)
//   portal_check grant [--camera NODE_NAME] [--timeout-ms N]
//       access answers 0; the remote's fd connects with pw_context_connect_fd; its registry lists the camera node
//       NODE_NAME (else: lists the nodes it sees); a pw_stream through that fd receives a frame of pw-test-camera
//       whose bytes are the ones pw-test-camera documents; acquire (access + remote on one connection) gives an fd.
//   portal_check refuse [--timeout-ms N]
//       access answers non-zero (xdg-desktop-portal 1.16: 1); OpenPipeWireRemote is refused by name
//       (not-allowed); acquire answers refused without an fd.
//   portal_check timeout --timeout-ms N
//       (a backend that answers late) access gives up with timeout within N ms plus a little.
//   portal_check absent
//       (a bus without the portal) every call answers no-portal at once.
//   portal_check no-camera
//       (a portal without the Camera interface, i.e. without an Access backend) every call answers no-portal.
//   portal_check threads [--threads N]
//       (granted) N threads at once each call is_present, access, open_remote and acquire: all succeed.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/utils/result.h>
#include <spa/pod/builder.h>

#include "camera_portal.h"

static int failures;

static void verdict(int ok, const char *what, const char *detail) {
    printf("%s: %s%s%s\n", ok ? "PASS" : "FAIL", what, detail && detail[0] ? " — " : "", detail ? detail : "");
    fflush(stdout);
    if (!ok) failures++;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// ---------------------------------------------------------------------------------------------------------------
// PipeWire through the portal's fd: the registry, then one frame.
// ---------------------------------------------------------------------------------------------------------------

struct pw_check {
    struct pw_main_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_registry *registry;
    struct spa_hook core_listener, registry_listener, stream_listener;
    struct pw_stream *stream;
    const char *camera;     // the node to find, or NULL
    int camera_found;       // its node was listed
    int nodes_seen;
    char nodes[2048];       // "name (class), ..."
    int core_error;
    char core_error_text[256];
    uint32_t width, height, format;
    int frame_checked;      // 1: a frame was judged (frame_ok says how)
    int frame_ok;
    char frame_detail[256];
    int timed_out;
};

static uint8_t expected_byte(uint32_t n, uint32_t plane, uint32_t y, uint32_t x) {
    // pw-test-camera's documented pattern: (n*131 + p*71 + y*37 + x*7 + x/256) mod 256.
    return (uint8_t)(n * 131u + plane * 71u + y * 37u + x * 7u + (x >> 8));
}

static void on_registry_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                               const struct spa_dict *props) {
    (void)id; (void)permissions; (void)version;
    struct pw_check *k = data;
    if (strcmp(type, PW_TYPE_INTERFACE_Node) != 0 || !props) return;
    const char *name = spa_dict_lookup(props, PW_KEY_NODE_NAME);
    const char *klass = spa_dict_lookup(props, PW_KEY_MEDIA_CLASS);
    k->nodes_seen++;
    size_t used = strlen(k->nodes);
    snprintf(k->nodes + used, sizeof k->nodes - used, "%s%s (%s)", used ? ", " : "", name ? name : "?",
             klass ? klass : "no media.class");
    if (k->camera && name && strcmp(name, k->camera) == 0) {
        k->camera_found = 1;
        pw_main_loop_quit(k->loop);
    }
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = on_registry_global,
};

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    struct pw_check *k = data;
    if (id != PW_ID_CORE) return;
    k->core_error = res;
    snprintf(k->core_error_text, sizeof k->core_error_text, "%s (%s)", message ? message : "?", spa_strerror(res));
    pw_main_loop_quit(k->loop);
}

static void on_core_done(void *data, uint32_t id, int seq) {
    (void)id; (void)seq;
    struct pw_check *k = data;
    if (!k->camera) pw_main_loop_quit(k->loop); // nothing to wait for: the first round trip lists what there is
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = on_core_done,
    .error = on_core_error,
};

static void on_stream_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct pw_check *k = data;
    if (id != SPA_PARAM_Format || !param) return;
    struct spa_video_info_raw info;
    memset(&info, 0, sizeof info);
    if (spa_format_video_raw_parse(param, &info) < 0) return;
    k->format = info.format;
    k->width = info.size.width;
    k->height = info.size.height;
}

static void on_stream_process(void *data) {
    struct pw_check *k = data;
    struct pw_buffer *b = pw_stream_dequeue_buffer(k->stream);
    if (!b) return;
    if (!k->frame_checked && k->format == SPA_VIDEO_FORMAT_YUY2 && k->width > 0) {
        struct spa_data *d = &b->buffer->datas[0];
        uint32_t offset = d->chunk->offset, size = d->chunk->size;
        int32_t stride = d->chunk->stride;
        uint32_t row_bytes = k->width * 2;
        if (d->data && stride >= (int32_t)row_bytes && (uint64_t)offset + size <= d->maxsize &&
            (uint64_t)stride * (k->height - 1) + row_bytes <= size) {
            const uint8_t *frame = (const uint8_t *)d->data + offset;
            uint32_t n = (uint32_t)frame[0] | (uint32_t)frame[1] << 8 | (uint32_t)frame[2] << 16 | (uint32_t)frame[3] << 24;
            uint64_t wrong = 0, first_y = 0, first_x = 0;
            for (uint32_t y = 0; y < k->height; y++) {
                const uint8_t *row = frame + (size_t)y * (uint32_t)stride;
                for (uint32_t x = (y == 0 ? 4 : 0); x < row_bytes; x++)
                    if (row[x] != expected_byte(n, 0, y, x) && wrong++ == 0) { first_y = y; first_x = x; }
            }
            k->frame_checked = 1;
            k->frame_ok = wrong == 0;
            if (wrong == 0)
                snprintf(k->frame_detail, sizeof k->frame_detail, "frame %u, YUY2 %ux%u, stride %d: every byte as expected",
                         n, k->width, k->height, stride);
            else
                snprintf(k->frame_detail, sizeof k->frame_detail,
                         "frame %u, YUY2 %ux%u, stride %d: %llu bytes differ, the first at row %llu byte %llu", n, k->width,
                         k->height, stride, (unsigned long long)wrong, (unsigned long long)first_y,
                         (unsigned long long)first_x);
            pw_main_loop_quit(k->loop);
        }
    }
    pw_stream_queue_buffer(k->stream, b);
}

static void on_stream_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    (void)old;
    struct pw_check *k = data;
    if (state == PW_STREAM_STATE_ERROR) {
        snprintf(k->frame_detail, sizeof k->frame_detail, "stream error: %s", error ? error : "?");
        pw_main_loop_quit(k->loop);
    }
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_stream_state_changed,
    .param_changed = on_stream_param_changed,
    .process = on_stream_process,
};

static void on_deadline(void *data, uint64_t expirations) {
    (void)expirations;
    struct pw_check *k = data;
    k->timed_out = 1;
    pw_main_loop_quit(k->loop);
}

// Runs the loop until something quits it or ms pass.
static void run_for(struct pw_check *k, int ms) {
    struct spa_source *timer = pw_loop_add_timer(pw_main_loop_get_loop(k->loop), on_deadline, k);
    struct timespec value = {ms / 1000, (long)(ms % 1000) * 1000000L}, interval = {0, 0};
    k->timed_out = 0;
    pw_loop_update_timer(pw_main_loop_get_loop(k->loop), timer, &value, &interval, false);
    pw_main_loop_run(k->loop);
    pw_loop_destroy_source(pw_main_loop_get_loop(k->loop), timer);
}

static void check_pipewire(int fd, const char *camera, int timeout_ms) {
    struct pw_check k;
    memset(&k, 0, sizeof k);
    k.camera = camera;
    char detail[2300];

    k.loop = pw_main_loop_new(NULL);
    k.context = k.loop ? pw_context_new(pw_main_loop_get_loop(k.loop), NULL, 0) : NULL;
    if (!k.context) {
        verdict(0, "pw_context_connect_fd on the portal's fd", "no PipeWire main loop or context");
        close(fd);
        goto out;
    }
    int64_t started = now_ms();
    k.core = pw_context_connect_fd(k.context, fd, NULL, 0); // takes the fd
    if (!k.core) {
        snprintf(detail, sizeof detail, "pw_context_connect_fd failed: %s", strerror(errno));
        verdict(0, "pw_context_connect_fd on the portal's fd", detail);
        goto out;
    }
    pw_core_add_listener(k.core, &k.core_listener, &core_events, &k);
    k.registry = pw_core_get_registry(k.core, PW_VERSION_REGISTRY, 0);
    pw_registry_add_listener(k.registry, &k.registry_listener, &registry_events, &k);
    pw_core_sync(k.core, PW_ID_CORE, 0);
    // wireplumber gives the portal's client its camera nodes when it sees the client: they may come a little later.
    run_for(&k, timeout_ms);
    if (k.core_error) {
        snprintf(detail, sizeof detail, "the PipeWire core failed: %s", k.core_error_text);
        verdict(0, "pw_context_connect_fd on the portal's fd", detail);
        goto out;
    }
    verdict(1, "pw_context_connect_fd on the portal's fd", "connected, registry read");
    if (camera) {
        snprintf(detail, sizeof detail, "after %lld ms; nodes this client sees: %s", (long long)(now_ms() - started),
                 k.nodes[0] ? k.nodes : "none");
        char what[300];
        snprintf(what, sizeof what, "the portal's registry lists the camera node %s", camera);
        verdict(k.camera_found, what, detail);
        if (!k.camera_found) goto out;

        // One frame of the camera through the portal's connection, judged byte by byte.
        uint8_t buffer[1024];
        struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
        const struct spa_pod *params[1];
        params[0] = spa_pod_builder_add_object(
            &b, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat, SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
            SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw), SPA_FORMAT_VIDEO_format,
            SPA_POD_Id(SPA_VIDEO_FORMAT_YUY2), SPA_FORMAT_VIDEO_size,
            SPA_POD_CHOICE_RANGE_Rectangle(&SPA_RECTANGLE(640, 480), &SPA_RECTANGLE(1, 1), &SPA_RECTANGLE(8192, 8192)),
            SPA_FORMAT_VIDEO_framerate,
            SPA_POD_CHOICE_RANGE_Fraction(&SPA_FRACTION(30, 1), &SPA_FRACTION(0, 1), &SPA_FRACTION(1000, 1)));
        k.stream = pw_stream_new(k.core, "portal-check",
                                 pw_properties_new(PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture",
                                                   PW_KEY_MEDIA_ROLE, "Camera", PW_KEY_TARGET_OBJECT, camera, NULL));
        if (!k.stream) {
            verdict(0, "a frame of the camera through the portal's fd", "pw_stream_new failed");
            goto out;
        }
        pw_stream_add_listener(k.stream, &k.stream_listener, &stream_events, &k);
        int r = pw_stream_connect(k.stream, PW_DIRECTION_INPUT, PW_ID_ANY,
                                  PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
        if (r < 0) {
            snprintf(detail, sizeof detail, "pw_stream_connect: %s", spa_strerror(r));
            verdict(0, "a frame of the camera through the portal's fd", detail);
            goto out;
        }
        started = now_ms();
        run_for(&k, timeout_ms);
        if (k.frame_checked) {
            snprintf(detail, sizeof detail, "%s, after %lld ms", k.frame_detail, (long long)(now_ms() - started));
            verdict(k.frame_ok, "a frame of the camera through the portal's fd", detail);
        } else {
            snprintf(detail, sizeof detail, "no YUY2 frame within %d ms%s%s", timeout_ms, k.frame_detail[0] ? ": " : "",
                     k.frame_detail);
            verdict(0, "a frame of the camera through the portal's fd", detail);
        }
    } else {
        snprintf(detail, sizeof detail, "%d nodes: %s", k.nodes_seen, k.nodes[0] ? k.nodes : "none");
        verdict(1, "the portal's registry (no camera named, listing only)", detail);
    }
out:
    if (k.stream) pw_stream_destroy(k.stream);
    if (k.registry) pw_proxy_destroy((struct pw_proxy *)k.registry);
    if (k.core) pw_core_disconnect(k.core);
    if (k.context) pw_context_destroy(k.context);
    if (k.loop) pw_main_loop_destroy(k.loop);
}

// ---------------------------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------------------------

static void describe(char *out, size_t size, int code, const char *err) {
    snprintf(out, size, "returned %d (%s)%s%s", code, svc_camera_portal_code_name(code), err[0] ? ": " : "", err);
}

// expect: 1 IsCameraPresent must be true, 0 false, -1 either (reported only).
static void check_presence(int timeout_ms, int expect) {
    char err[512], detail[700];
    int present = -1;
    uint32_t version = 0;
    int r = svc_camera_portal_is_present(timeout_ms, &present, &version, err, sizeof err);
    if (r == SVC_CAMERA_PORTAL_OK)
        snprintf(detail, sizeof detail, "IsCameraPresent %s, version %u", present ? "true" : "false", version);
    else
        describe(detail, sizeof detail, r, err);
    const char *what = expect == 1   ? "is_present reads IsCameraPresent = true"
                       : expect == 0 ? "is_present reads IsCameraPresent = false"
                                     : "is_present reads the Camera properties";
    verdict(r == SVC_CAMERA_PORTAL_OK && (expect < 0 || present == expect), what, detail);
}

static void case_grant(const char *camera, int timeout_ms, int expect_present) {
    char err[512], detail[700];
    check_presence(timeout_ms, expect_present);

    uint32_t response = 99;
    int64_t t0 = now_ms();
    int r = svc_camera_portal_access(timeout_ms, &response, err, sizeof err);
    if (r == SVC_CAMERA_PORTAL_OK)
        snprintf(detail, sizeof detail, "response %u in %lld ms", response, (long long)(now_ms() - t0));
    else
        describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_OK && response == SVC_CAMERA_PORTAL_RESPONSE_GRANTED, "access is granted (response 0)",
            detail);

    int fd = -1;
    r = svc_camera_portal_open_remote(timeout_ms, &fd, err, sizeof err);
    if (r == SVC_CAMERA_PORTAL_OK)
        snprintf(detail, sizeof detail, "fd %d", fd);
    else
        describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_OK && fd >= 0, "open_remote gives a PipeWire fd", detail);
    if (fd >= 0) check_pipewire(fd, camera, timeout_ms);

    fd = -1;
    response = 99;
    r = svc_camera_portal_acquire(timeout_ms, &response, &fd, err, sizeof err);
    if (r == SVC_CAMERA_PORTAL_OK)
        snprintf(detail, sizeof detail, "response %u, fd %d", response, fd);
    else
        describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_OK && response == 0 && fd >= 0, "acquire (access + remote) gives an fd", detail);
    if (fd >= 0) close(fd);
}

static void case_refuse(int timeout_ms, int expect_present) {
    char err[512], detail[700];
    check_presence(timeout_ms, expect_present);

    uint32_t response = 99;
    int r = svc_camera_portal_access(timeout_ms, &response, err, sizeof err);
    if (r == SVC_CAMERA_PORTAL_OK)
        snprintf(detail, sizeof detail, "response %u%s", response,
                 response == SVC_CAMERA_PORTAL_RESPONSE_CANCELLED ? " (xdg-desktop-portal's refusal)" : "");
    else
        describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_OK && response != SVC_CAMERA_PORTAL_RESPONSE_GRANTED && response <= 2,
            "access is refused (response 1 or 2)", detail);

    int fd = -1;
    r = svc_camera_portal_open_remote(timeout_ms, &fd, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NOT_ALLOWED && fd == -1, "open_remote is refused by name (not-allowed)", detail);
    if (fd >= 0) close(fd);

    response = 99;
    r = svc_camera_portal_acquire(timeout_ms, &response, &fd, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_REFUSED && fd == -1 && response != 0, "acquire answers refused, no fd", detail);
    if (fd >= 0) close(fd);
}

static void case_timeout(int timeout_ms) {
    char err[512], detail[700];
    uint32_t response = 99;
    int64_t t0 = now_ms();
    int r = svc_camera_portal_access(timeout_ms, &response, err, sizeof err);
    int64_t took = now_ms() - t0;
    describe(detail, sizeof detail, r, err);
    char what[200];
    snprintf(what, sizeof what, "access gives up with timeout after %d ms (took %lld ms)", timeout_ms, (long long)took);
    verdict(r == SVC_CAMERA_PORTAL_E_TIMEOUT && took >= timeout_ms - 5 && took < timeout_ms + 500, what, detail);
}

static void case_absent(int timeout_ms) {
    char err[512], detail[700];
    int present = -1;
    int64_t t0 = now_ms();
    int r = svc_camera_portal_is_present(timeout_ms, &present, NULL, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NO_PORTAL, "is_present without a portal answers no-portal", detail);
    uint32_t response = 99;
    r = svc_camera_portal_access(timeout_ms, &response, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NO_PORTAL, "access without a portal answers no-portal", detail);
    int fd = -1;
    r = svc_camera_portal_open_remote(timeout_ms, &fd, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NO_PORTAL && fd == -1, "open_remote without a portal answers no-portal", detail);
    snprintf(detail, sizeof detail, "%lld ms for the three", (long long)(now_ms() - t0));
    verdict(now_ms() - t0 < 1000, "without a portal the answers come at once", detail);
}

static void case_no_camera(int timeout_ms) {
    char err[512], detail[700];
    int present = -1;
    int r = svc_camera_portal_is_present(timeout_ms, &present, NULL, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NO_PORTAL, "is_present on a portal without Camera answers no-portal", detail);
    uint32_t response = 99;
    r = svc_camera_portal_access(timeout_ms, &response, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NO_PORTAL, "access on a portal without Camera answers no-portal", detail);
    int fd = -1;
    r = svc_camera_portal_open_remote(timeout_ms, &fd, err, sizeof err);
    describe(detail, sizeof detail, r, err);
    verdict(r == SVC_CAMERA_PORTAL_E_NO_PORTAL && fd == -1, "open_remote on a portal without Camera answers no-portal",
            detail);
    if (fd >= 0) close(fd);
}

struct worker {
    pthread_t thread;
    int timeout_ms;
    int failed; // the number of calls that failed
    char first_error[600];
};

static void *work(void *data) {
    struct worker *w = data;
    char err[512];
    int present = 0, fd = -1;
    uint32_t response = 99;
    int r;
#define NOTE(call_name)                                                                                          \
    do {                                                                                                         \
        if (w->failed++ == 0)                                                                                    \
            snprintf(w->first_error, sizeof w->first_error, "%s: %d (%s) %s", call_name, r,                      \
                     svc_camera_portal_code_name(r), err);                                                       \
    } while (0)
    if ((r = svc_camera_portal_is_present(w->timeout_ms, &present, NULL, err, sizeof err)) != 0) NOTE("is_present");
    if ((r = svc_camera_portal_access(w->timeout_ms, &response, err, sizeof err)) != 0 || response != 0) NOTE("access");
    if ((r = svc_camera_portal_open_remote(w->timeout_ms, &fd, err, sizeof err)) != 0 || fd < 0) NOTE("open_remote");
    if (fd >= 0) close(fd);
    fd = -1;
    if ((r = svc_camera_portal_acquire(w->timeout_ms, &response, &fd, err, sizeof err)) != 0 || fd < 0) NOTE("acquire");
    if (fd >= 0) close(fd);
#undef NOTE
    return NULL;
}

static void case_threads(int timeout_ms, int count) {
    struct worker workers[64];
    char detail[800];
    if (count < 1 || count > 64) count = 8;
    memset(workers, 0, sizeof workers);
    int64_t t0 = now_ms();
    int started = 0;
    for (int i = 0; i < count; i++) {
        workers[i].timeout_ms = timeout_ms;
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]) == 0) started++;
        else break;
    }
    int failed = 0;
    const char *first = "";
    for (int i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
        if (workers[i].failed && !first[0]) first = workers[i].first_error;
        failed += workers[i].failed;
    }
    snprintf(detail, sizeof detail, "%d threads x 4 calls in %lld ms, %d failed%s%s", started,
             (long long)(now_ms() - t0), failed, first[0] ? "; first: " : "", first);
    char what[100];
    snprintf(what, sizeof what, "%d threads call the portal at once", count);
    verdict(started == count && failed == 0, what, detail);
}

// The fake backend's log: one line per AccessDialog it answered.
static void check_dialogs(int expected) {
    const char *path = getenv("CAMERA_PORTAL_ACCESS_LOG");
    char detail[600];
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) {
        snprintf(detail, sizeof detail, "cannot read CAMERA_PORTAL_ACCESS_LOG (%s)", path ? path : "not set");
        verdict(0, "the AccessDialog count", detail);
        return;
    }
    int lines = 0, c, last = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (c == '\n') lines++;
        last = c;
    }
    if (last != '\n') lines++;
    fclose(f);
    char what[200];
    snprintf(what, sizeof what, "the fake backend's AccessDialog was called %d time%s (%s decided)", expected,
             expected == 1 ? "" : "s", expected == 0 ? "the permission store" : "the dialog, then the stored answer");
    snprintf(detail, sizeof detail, "%d logged", lines);
    verdict(lines == expected, what, detail);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const char *camera = NULL;
    int timeout_ms = 5000, expect_present = -1, expect_dialogs = -1, threads = 8;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--camera") == 0 && i + 1 < argc) camera = argv[++i];
        else if (strcmp(argv[i], "--expect-present") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            expect_present = strcmp(v, "yes") == 0 ? 1 : strcmp(v, "no") == 0 ? 0 : -1;
        }
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) timeout_ms = atoi(argv[++i]);
        else if (strcmp(argv[i], "--expect-dialogs") == 0 && i + 1 < argc) expect_dialogs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "portal_check: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (timeout_ms <= 0) {
        fprintf(stderr, "portal_check: --timeout-ms must be positive\n");
        return 2;
    }
    pw_init(NULL, NULL);
    if (strcmp(mode, "grant") == 0) case_grant(camera, timeout_ms, expect_present);
    else if (strcmp(mode, "refuse") == 0) case_refuse(timeout_ms, expect_present);
    else if (strcmp(mode, "timeout") == 0) case_timeout(timeout_ms);
    else if (strcmp(mode, "absent") == 0) case_absent(timeout_ms);
    else if (strcmp(mode, "no-camera") == 0) case_no_camera(timeout_ms);
    else if (strcmp(mode, "threads") == 0) case_threads(timeout_ms, threads);
    else {
        fprintf(stderr, "usage: portal_check grant [--camera NODE_NAME] | refuse | timeout | absent | no-camera | "
                        "threads [--threads N] [--timeout-ms N] [--expect-present yes|no|any] [--expect-dialogs N]\n");
        return 2;
    }
    if (expect_dialogs >= 0) check_dialogs(expect_dialogs);
    pw_deinit();
    return failures ? 1 : 0;
}
