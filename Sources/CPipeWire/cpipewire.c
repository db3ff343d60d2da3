// The C side of PipeWireCapture: listener structs, SPA pods and varargs property lists, which Swift cannot use.
#define _GNU_SOURCE /* mremap */
#include "cpipewire.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/param/buffers.h>
#include <spa/param/props.h>
#include <spa/pod/builder.h>
#include <spa/pod/iter.h>
#include <spa/utils/result.h>
#include <spa/debug/types.h>

// MARK: - Once

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_pipewire(void) {
    pw_init(NULL, NULL);
    // A library never prints: PipeWire's warnings and errors are returned as errors instead. PIPEWIRE_DEBUG (a user
    // debugging PipeWire itself) keeps its log.
    if (getenv("PIPEWIRE_DEBUG") == NULL) pw_log_set_level(SPA_LOG_LEVEL_NONE);
}

static void set_error(char *error, size_t len, const char *fmt, ...) {
    if (error == NULL || len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error, len, fmt, ap);
    va_end(ap);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// MARK: - Formats

#define FOURCC(a, b, c, d) ((uint32_t)(a) | ((uint32_t)(b) << 8) | ((uint32_t)(c) << 16) | ((uint32_t)(d) << 24))

static const struct {
    uint32_t spa;
    uint32_t fourcc;
} format_map[] = {
    {SPA_VIDEO_FORMAT_YUY2, FOURCC('Y', 'U', 'Y', 'V')}, {SPA_VIDEO_FORMAT_UYVY, FOURCC('U', 'Y', 'V', 'Y')},
    {SPA_VIDEO_FORMAT_YVYU, FOURCC('Y', 'V', 'Y', 'U')}, {SPA_VIDEO_FORMAT_VYUY, FOURCC('V', 'Y', 'U', 'Y')},
    {SPA_VIDEO_FORMAT_I420, FOURCC('Y', 'U', '1', '2')}, {SPA_VIDEO_FORMAT_YV12, FOURCC('Y', 'V', '1', '2')},
    {SPA_VIDEO_FORMAT_NV12, FOURCC('N', 'V', '1', '2')}, {SPA_VIDEO_FORMAT_NV21, FOURCC('N', 'V', '2', '1')},
    {SPA_VIDEO_FORMAT_NV16, FOURCC('N', 'V', '1', '6')}, {SPA_VIDEO_FORMAT_NV61, FOURCC('N', 'V', '6', '1')},
    {SPA_VIDEO_FORMAT_NV24, FOURCC('N', 'V', '2', '4')}, {SPA_VIDEO_FORMAT_Y42B, FOURCC('4', '2', '2', 'P')},
    {SPA_VIDEO_FORMAT_GRAY8, FOURCC('G', 'R', 'E', 'Y')},
    // Packed RGB, named by their bytes in memory: SPA's names are byte orders, V4L2's the reverse for 32-bit ones.
    {SPA_VIDEO_FORMAT_RGB, FOURCC('R', 'G', 'B', '3')}, {SPA_VIDEO_FORMAT_BGR, FOURCC('B', 'G', 'R', '3')},
    {SPA_VIDEO_FORMAT_BGRx, FOURCC('X', 'R', '2', '4')}, {SPA_VIDEO_FORMAT_BGRA, FOURCC('A', 'R', '2', '4')},
    {SPA_VIDEO_FORMAT_RGBx, FOURCC('X', 'B', '2', '4')}, {SPA_VIDEO_FORMAT_RGBA, FOURCC('A', 'B', '2', '4')},
    {SPA_VIDEO_FORMAT_xRGB, FOURCC('B', 'X', '2', '4')}, {SPA_VIDEO_FORMAT_ARGB, FOURCC('B', 'A', '2', '4')},
    {SPA_VIDEO_FORMAT_xBGR, FOURCC('R', 'X', '2', '4')}, {SPA_VIDEO_FORMAT_ABGR, FOURCC('R', 'A', '2', '4')},
};

uint32_t cpw_fourcc_of_spa_format(uint32_t spa_format) {
    for (size_t i = 0; i < SPA_N_ELEMENTS(format_map); i++)
        if (format_map[i].spa == spa_format) return format_map[i].fourcc;
    return 0;
}

uint32_t cpw_spa_format_of_fourcc(uint32_t fourcc) {
    for (size_t i = 0; i < SPA_N_ELEMENTS(format_map); i++)
        if (format_map[i].fourcc == fourcc) return format_map[i].spa;
    return 0;
}

uint32_t cpw_subtype_of_fourcc(uint32_t fourcc) {
    if (fourcc == FOURCC('M', 'J', 'P', 'G')) return CPW_SUBTYPE_MJPG;
    if (fourcc == FOURCC('H', '2', '6', '4')) return CPW_SUBTYPE_H264;
    return cpw_spa_format_of_fourcc(fourcc) != 0 ? CPW_SUBTYPE_RAW : CPW_SUBTYPE_OTHER;
}

/* The values of a property: a plain value is one, an enum choice lists its alternatives (the default first in the
   pod, then the alternatives: the default is skipped when alternatives follow), a range gives min and max. */
typedef struct values {
    uint32_t choice;
    uint32_t n;
    uint32_t type;
    const void *body;
    uint32_t size;
} values;

static int get_values(const struct spa_pod *pod, values *v) {
    uint32_t n = 0, choice = 0;
    const struct spa_pod *val = spa_pod_get_values(pod, &n, &choice);
    if (val == NULL || n == 0) return -EINVAL;
    v->choice = choice;
    v->type = val->type;
    v->size = val->size;
    v->body = SPA_POD_BODY_CONST(val);
    v->n = n;
    return 0;
}

static const void *value_at(const values *v, uint32_t i) { return (const uint8_t *)v->body + (size_t)i * v->size; }

/* The indices to list for an enum: the alternatives after the default, or the default alone. */
static void enum_range(const values *v, uint32_t *first, uint32_t *end) {
    if (v->choice == SPA_CHOICE_Enum && v->n > 1) {
        *first = 1;
        *end = v->n;
    } else {
        *first = 0;
        *end = 1;
    }
}

typedef struct format_list {
    cpw_format *items;
    size_t n, cap;
} format_list;

static int push_format(format_list *l, const cpw_format *f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        if (cap > 4096) return -E2BIG;
        cpw_format *items = realloc(l->items, cap * sizeof(cpw_format));
        if (items == NULL) return -ENOMEM;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = *f;
    return 0;
}

/* Flattens one EnumFormat object into entries: one per format and size. */
static int parse_enum_format(const struct spa_pod *param, format_list *out) {
    if (!spa_pod_is_object(param)) return -EINVAL;
    uint32_t media_type = 0, media_subtype = 0;
    if (spa_format_parse(param, &media_type, &media_subtype) < 0 || media_type != SPA_MEDIA_TYPE_video) return 0;
    cpw_format base;
    memset(&base, 0, sizeof base);
    switch (media_subtype) {
    case SPA_MEDIA_SUBTYPE_raw: base.subtype = CPW_SUBTYPE_RAW; break;
    case SPA_MEDIA_SUBTYPE_mjpg: base.subtype = CPW_SUBTYPE_MJPG; base.fourcc = FOURCC('M', 'J', 'P', 'G'); break;
    case SPA_MEDIA_SUBTYPE_h264: base.subtype = CPW_SUBTYPE_H264; base.fourcc = FOURCC('H', '2', '6', '4'); break;
    default: return 0;
    }
    const struct spa_pod_object *obj = (const struct spa_pod_object *)param;
    const struct spa_pod_prop *prop;
    values formats = {0}, sizes = {0}, rates = {0};
    int have_formats = 0, have_sizes = 0, have_rates = 0;
    SPA_POD_OBJECT_FOREACH(obj, prop) {
        // Each value is read with its type's size: a pod whose values are smaller is not used.
        if (prop->key == SPA_FORMAT_VIDEO_format)
            have_formats = get_values(&prop->value, &formats) == 0 && formats.type == SPA_TYPE_Id && formats.size >= sizeof(uint32_t);
        else if (prop->key == SPA_FORMAT_VIDEO_size)
            have_sizes =
                get_values(&prop->value, &sizes) == 0 && sizes.type == SPA_TYPE_Rectangle && sizes.size >= sizeof(struct spa_rectangle);
        else if (prop->key == SPA_FORMAT_VIDEO_framerate)
            have_rates = get_values(&prop->value, &rates) == 0 && rates.type == SPA_TYPE_Fraction && rates.size >= sizeof(struct spa_fraction);
    }
    if (!have_sizes) return 0; // a format without a size cannot be negotiated by size: not listed
    if (base.subtype == CPW_SUBTYPE_RAW && !have_formats) return 0;

    if (have_rates) {
        if (rates.choice == SPA_CHOICE_Range || rates.choice == SPA_CHOICE_Step) {
            if (rates.n >= 3) {
                const struct spa_fraction *lo = value_at(&rates, 1), *hi = value_at(&rates, 2);
                base.rate_kind = CPW_RATES_RANGE;
                base.n_rates = 2;
                base.rate_num[0] = lo->num;
                base.rate_den[0] = lo->denom;
                base.rate_num[1] = hi->num;
                base.rate_den[1] = hi->denom;
            }
        } else {
            uint32_t first, end;
            enum_range(&rates, &first, &end);
            base.rate_kind = CPW_RATES_LIST;
            for (uint32_t i = first; i < end && base.n_rates < CPW_MAX_RATES; i++) {
                const struct spa_fraction *f = value_at(&rates, i);
                base.rate_num[base.n_rates] = f->num;
                base.rate_den[base.n_rates] = f->denom;
                base.n_rates++;
            }
        }
    }

    uint32_t ff = 0, fend = 1;
    if (base.subtype == CPW_SUBTYPE_RAW) enum_range(&formats, &ff, &fend);
    for (uint32_t fi = ff; fi < fend; fi++) {
        cpw_format f = base;
        if (base.subtype == CPW_SUBTYPE_RAW) {
            f.spa_format = *(const uint32_t *)value_at(&formats, fi);
            f.fourcc = cpw_fourcc_of_spa_format(f.spa_format);
        }
        if (sizes.choice == SPA_CHOICE_Range || sizes.choice == SPA_CHOICE_Step) {
            if (sizes.n < 3) continue;
            const struct spa_rectangle *lo = value_at(&sizes, 1), *hi = value_at(&sizes, 2);
            f.size_kind = CPW_SIZE_RANGE;
            f.width = lo->width;
            f.height = lo->height;
            f.max_width = hi->width;
            f.max_height = hi->height;
            f.step_width = f.step_height = 1;
            if (sizes.choice == SPA_CHOICE_Step && sizes.n >= 4) {
                const struct spa_rectangle *st = value_at(&sizes, 3);
                f.step_width = st->width ? st->width : 1;
                f.step_height = st->height ? st->height : 1;
            }
            int r = push_format(out, &f);
            if (r < 0) return r;
        } else {
            uint32_t sf, send;
            enum_range(&sizes, &sf, &send);
            for (uint32_t si = sf; si < send; si++) {
                const struct spa_rectangle *s = value_at(&sizes, si);
                f.size_kind = CPW_SIZE_FIXED;
                f.width = f.max_width = s->width;
                f.height = f.max_height = s->height;
                int r = push_format(out, &f);
                if (r < 0) return r;
            }
        }
    }
    return 0;
}

// MARK: - Listing

typedef struct list_node {
    cpw_node node;
    struct pw_proxy *proxy;
    struct spa_hook proxy_listener;
    struct spa_hook node_listener;
    format_list formats;
    struct list_state *state;
} list_node;

typedef struct list_state {
    struct pw_main_loop *loop;
    struct pw_core *core;
    struct pw_registry *registry;
    struct spa_hook core_listener, registry_listener;
    list_node *nodes;
    size_t n, cap;
    const char *formats_of;
    int sync_seq;
    int phase; // 0: waiting for the globals, 1: waiting for the params
    int done;
    int error;
    char error_text[256];
    /* On a camera portal's connection the session manager grants the client its cameras only after it connected:
       until `settle_until_ns`, a registry without a camera node is asked again (`settle_timer`, every 20 ms). */
    int64_t settle_until_ns;
    struct spa_source *settle_timer;
} list_state;

static char *dup_prop(const struct spa_dict *props, const char *key) {
    const char *v = props ? spa_dict_lookup(props, key) : NULL;
    return v ? strdup(v) : NULL;
}

static void node_param(void *data, int seq, uint32_t id, uint32_t index, uint32_t next, const struct spa_pod *param) {
    (void)seq;
    (void)index;
    (void)next;
    list_node *n = data;
    if (id != SPA_PARAM_EnumFormat || param == NULL) return;
    if (parse_enum_format(param, &n->formats) < 0) n->node.formats_error = 1;
}

static const struct pw_node_events list_node_events = {
    PW_VERSION_NODE_EVENTS,
    .param = node_param,
};

static void registry_global(
    void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version, const struct spa_dict *props) {
    (void)permissions;
    (void)version;
    list_state *s = data;
    if (strcmp(type, PW_TYPE_INTERFACE_Node) != 0 || props == NULL) return;
    const char *cls = spa_dict_lookup(props, PW_KEY_MEDIA_CLASS);
    if (cls == NULL || strcmp(cls, "Video/Source") != 0) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        if (cap > 1024) return;
        list_node *nodes = realloc(s->nodes, cap * sizeof(list_node));
        if (nodes == NULL) return;
        s->nodes = nodes;
        s->cap = cap;
    }
    list_node *n = &s->nodes[s->n++];
    memset(n, 0, sizeof *n);
    n->node.id = id;
    n->node.name = dup_prop(props, PW_KEY_NODE_NAME);
    n->node.description = dup_prop(props, PW_KEY_NODE_DESCRIPTION);
    n->node.nick = dup_prop(props, PW_KEY_NODE_NICK);
    n->node.serial = dup_prop(props, PW_KEY_OBJECT_SERIAL);
    n->node.device_serial = dup_prop(props, "device.serial");
    if (n->node.device_serial == NULL) n->node.device_serial = dup_prop(props, "api.v4l2.cap.bus_info");
    n->node.media_role = dup_prop(props, PW_KEY_MEDIA_ROLE);
    n->node.device_api = dup_prop(props, PW_KEY_DEVICE_API);
    n->node.object_path = dup_prop(props, PW_KEY_OBJECT_PATH);
    n->node.device_id = dup_prop(props, PW_KEY_DEVICE_ID);
}

static const struct pw_registry_events list_registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = registry_global,
};

static void list_core_done(void *data, uint32_t id, int seq) {
    list_state *s = data;
    if (id != PW_ID_CORE || seq != s->sync_seq) return;
    if (s->phase == 0 && s->n == 0 && s->settle_timer != NULL && now_ns() < s->settle_until_ns) {
        struct timespec t = {.tv_sec = 0, .tv_nsec = 20 * 1000000L};
        pw_loop_update_timer(pw_main_loop_get_loop(s->loop), s->settle_timer, &t, NULL, false);
        return;
    }
    if (s->phase == 0 && s->formats_of != NULL) {
        // The globals are in: bind the nodes asked about and enumerate their formats, then sync once more (the
        // server answers in order, so every param has come when the second sync does).
        s->phase = 1;
        for (size_t i = 0; i < s->n; i++) {
            list_node *n = &s->nodes[i];
            if (strcmp(s->formats_of, "*") != 0 && (n->node.name == NULL || strcmp(n->node.name, s->formats_of) != 0)) continue;
            n->proxy = pw_registry_bind(s->registry, n->node.id, PW_TYPE_INTERFACE_Node, PW_VERSION_NODE, 0);
            if (n->proxy == NULL) {
                n->node.formats_error = 1;
                continue;
            }
            pw_node_add_listener((struct pw_node *)n->proxy, &n->node_listener, &list_node_events, n);
            pw_node_enum_params((struct pw_node *)n->proxy, 0, SPA_PARAM_EnumFormat, 0, UINT32_MAX, NULL);
        }
        s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, s->sync_seq);
        return;
    }
    s->done = 1;
    pw_main_loop_quit(s->loop);
}

static void list_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    list_state *s = data;
    if (id != PW_ID_CORE) return; // an error about one node (its params): that node's formats stay empty
    s->error = res < 0 ? res : -EIO;
    snprintf(s->error_text, sizeof s->error_text, "PipeWire: %s", message ? message : spa_strerror(res));
    pw_main_loop_quit(s->loop);
}

static const struct pw_core_events list_core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = list_core_done,
    .error = list_core_error,
};

static void list_settle(void *data, uint64_t expirations) {
    (void)expirations;
    list_state *s = data;
    s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, s->sync_seq);
}

static void list_timeout(void *data, uint64_t expirations) {
    (void)expirations;
    list_state *s = data;
    pw_main_loop_quit(s->loop);
}

static struct pw_properties *remote_properties(const char *remote) {
    struct pw_properties *p = pw_properties_new(NULL, NULL);
    if (p != NULL && remote != NULL && remote[0] != '\0') pw_properties_set(p, PW_KEY_REMOTE_NAME, remote);
    return p;
}

static void free_node(cpw_node *n) {
    free(n->name);
    free(n->description);
    free(n->nick);
    free(n->serial);
    free(n->device_serial);
    free(n->media_role);
    free(n->device_api);
    free(n->object_path);
    free(n->device_id);
    free(n->formats);
    memset(n, 0, sizeof *n);
}

void cpw_listing_free(cpw_listing *listing) {
    if (listing == NULL) return;
    for (size_t i = 0; i < listing->n_nodes; i++) free_node(&listing->nodes[i]);
    free(listing->nodes);
    listing->nodes = NULL;
    listing->n_nodes = 0;
}

/* Connects to `remote`, or on `fd` when it is not negative (a socket the call takes: the camera portal's). */
static struct pw_core *connect_core(struct pw_context *context, const char *remote, int fd) {
    if (fd >= 0) return pw_context_connect_fd(context, fd, NULL, 0); /* PipeWire closes it on disconnect or error */
    return pw_context_connect(context, remote_properties(remote), 0);
}

static int list_on(const char *remote, int fd, const char *formats_of, int timeout_ms, cpw_listing *out, char *error, size_t error_len);

int cpw_list(const char *remote, const char *formats_of, int timeout_ms, cpw_listing *out, char *error, size_t error_len) {
    return list_on(remote, -1, formats_of, timeout_ms, out, error, error_len);
}

int cpw_list_fd(int fd, const char *formats_of, int timeout_ms, cpw_listing *out, char *error, size_t error_len) {
    if (fd < 0) {
        memset(out, 0, sizeof *out);
        set_error(error, error_len, "PipeWire: no connection (descriptor %d)", fd);
        return -EBADF;
    }
    return list_on("the camera portal's connection", fd, formats_of, timeout_ms, out, error, error_len);
}

static int list_on(const char *remote, int fd, const char *formats_of, int timeout_ms, cpw_listing *out, char *error, size_t error_len) {
    pthread_once(&init_once, init_pipewire);
    memset(out, 0, sizeof *out);
    list_state s;
    memset(&s, 0, sizeof s);
    s.formats_of = formats_of;
    int res = 0;
    struct pw_context *context = NULL;
    struct spa_source *timer = NULL;
    s.loop = pw_main_loop_new(NULL);
    if (s.loop == NULL) {
        if (fd >= 0) close(fd);
        set_error(error, error_len, "PipeWire: could not make a main loop");
        return -errno ? -errno : -ENOMEM;
    }
    context = pw_context_new(pw_main_loop_get_loop(s.loop), NULL, 0);
    if (context == NULL) {
        if (fd >= 0) close(fd);
        res = errno ? -errno : -ENOMEM;
        set_error(error, error_len, "PipeWire: could not make a context");
        goto done;
    }
    s.core = connect_core(context, remote, fd);
    if (s.core == NULL) {
        res = errno ? -errno : -ECONNREFUSED;
        set_error(error, error_len, "PipeWire: could not connect to %s (%s)", remote ? remote : "the default remote", spa_strerror(res));
        goto done;
    }
    pw_core_add_listener(s.core, &s.core_listener, &list_core_events, &s);
    s.registry = pw_core_get_registry(s.core, PW_VERSION_REGISTRY, 0);
    if (s.registry == NULL) {
        res = -ENOMEM;
        set_error(error, error_len, "PipeWire: no registry");
        goto done;
    }
    pw_registry_add_listener(s.registry, &s.registry_listener, &list_registry_events, &s);
    if (fd >= 0) { /* a portal's connection: wait (a second at most, within the timeout) for the cameras granted */
        s.settle_timer = pw_loop_add_timer(pw_main_loop_get_loop(s.loop), list_settle, &s);
        s.settle_until_ns = now_ns() + (int64_t)(timeout_ms < 1000 ? timeout_ms / 2 : 1000) * 1000000;
    }
    s.sync_seq = pw_core_sync(s.core, PW_ID_CORE, 0);
    timer = pw_loop_add_timer(pw_main_loop_get_loop(s.loop), list_timeout, &s);
    if (timer != NULL) {
        struct timespec t = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
        pw_loop_update_timer(pw_main_loop_get_loop(s.loop), timer, &t, NULL, false);
    }
    pw_main_loop_run(s.loop);
    if (s.error != 0) {
        res = s.error;
        set_error(error, error_len, "%s", s.error_text);
    } else if (!s.done) {
        res = -ETIMEDOUT;
        set_error(error, error_len, "PipeWire did not answer within %d ms", timeout_ms);
    }

done:
    if (res == 0) {
        out->nodes = calloc(s.n ? s.n : 1, sizeof(cpw_node));
        if (out->nodes == NULL) res = -ENOMEM;
    }
    for (size_t i = 0; i < s.n; i++) {
        list_node *n = &s.nodes[i];
        if (n->proxy != NULL) {
            spa_hook_remove(&n->node_listener);
            pw_proxy_destroy(n->proxy);
        }
        if (res == 0) {
            n->node.formats = n->formats.items;
            n->node.n_formats = n->formats.n;
            out->nodes[out->n_nodes++] = n->node;
        } else {
            n->node.formats = n->formats.items;
            free_node(&n->node);
        }
    }
    free(s.nodes);
    if (timer != NULL) pw_loop_destroy_source(pw_main_loop_get_loop(s.loop), timer);
    if (s.settle_timer != NULL) pw_loop_destroy_source(pw_main_loop_get_loop(s.loop), s.settle_timer);
    if (s.registry != NULL) {
        spa_hook_remove(&s.registry_listener);
        pw_proxy_destroy((struct pw_proxy *)s.registry);
    }
    if (s.core != NULL) {
        spa_hook_remove(&s.core_listener);
        pw_core_disconnect(s.core);
    }
    if (context != NULL) pw_context_destroy(context);
    pw_main_loop_destroy(s.loop);
    return res;
}

// MARK: - Socket

int cpw_socket_exists(const char *remote, char *path, size_t path_len) {
    const char *name = remote;
    if (name == NULL || name[0] == '\0') name = getenv("PIPEWIRE_REMOTE");
    if (name == NULL || name[0] == '\0') name = "pipewire-0";
    if (name[0] == '/') {
        snprintf(path, path_len, "%s", name);
    } else {
        const char *dir = getenv("PIPEWIRE_RUNTIME_DIR");
        if (dir == NULL || dir[0] == '\0') dir = getenv("XDG_RUNTIME_DIR");
        if (dir == NULL || dir[0] == '\0') dir = getenv("USERPROFILE");
        if (dir == NULL || dir[0] == '\0') {
            snprintf(path, path_len, "%s (no XDG_RUNTIME_DIR)", name);
            return 0;
        }
        snprintf(path, path_len, "%s/%s", dir, name);
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

// MARK: - Stream

struct cpw_mappings {
    atomic_long references;
    size_t n, capacity;
    struct cpw_map {
        void *address;
        size_t length;
    } *maps;
};

static cpw_mappings *mappings_new(void) {
    cpw_mappings *m = calloc(1, sizeof *m);
    if (m != NULL) atomic_init(&m->references, 1);
    return m;
}

/* Adds a mapping (the stream's thread only: no other thread reads the list before the last release). */
static int mappings_add(cpw_mappings *m, void *address, size_t length) {
    if (m->n == m->capacity) {
        size_t capacity = m->capacity ? m->capacity * 2 : 8;
        struct cpw_map *maps = realloc(m->maps, capacity * sizeof *maps);
        if (maps == NULL) return -ENOMEM;
        m->maps = maps;
        m->capacity = capacity;
    }
    m->maps[m->n].address = address;
    m->maps[m->n].length = length;
    m->n++;
    return 0;
}

void cpw_mappings_release(cpw_mappings *m) {
    if (m == NULL || atomic_fetch_sub_explicit(&m->references, 1, memory_order_acq_rel) != 1) return;
    for (size_t i = 0; i < m->n; i++) munmap(m->maps[i].address, m->maps[i].length);
    free(m->maps);
    free(m);
}

/* A buffer PipeWire added, by its slot (pw_buffer.user_data is slot + 1). */
#define CPW_MAX_SLOTS 64
struct cpw_slot {
    struct pw_buffer *pb;                  /* NULL once PipeWire removed it */
    const uint8_t *data[CPW_MAX_PLANES];   /* our mapping of each data block */
    struct cpw_map maps[CPW_MAX_PLANES];   /* the whole mappings they lie in */
    uint32_t n_maps;
    int kept;                              /* the callback kept it: not queued until cpw_stream_requeue */
};

static int make_private(const struct cpw_map *map);

/* A kept buffer that goes back to PipeWire while frames may still read it (the stream closes, or PipeWire removes
   it): its mappings become private copies first. True when that worked (the buffer may go back). */
static int release_kept(struct cpw_slot *slot) {
    for (uint32_t i = 0; i < slot->n_maps; i++)
        if (make_private(&slot->maps[i]) != 0) return 0;
    return 1;
}

struct cpw_stream {
    struct pw_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_registry *registry;
    struct pw_stream *stream;
    struct spa_hook core_listener, registry_listener, stream_listener;
    struct spa_source *wake;
    char *target;
    uint32_t target_id; // SPA_ID_INVALID until the registry shows it
    int target_seen;
    int sync_seq, synced;
    cpw_buffer_callback callback;
    void *context_ptr;
    cpw_applied applied;
    int format_set;
    int streaming, was_streaming;
    int opening;      // in cpw_stream_open: a refusal before the first streaming is retried
    int retry;        // the session manager refused or dropped the stream while opening
    char last_refusal[256];
    int status;
    char error[256];
    cpw_mappings *mappings;
    struct cpw_slot slots[CPW_MAX_SLOTS];
    uint32_t n_slots;
};

static void stream_fail(cpw_stream *s, int status, const char *fmt, ...) {
    if (s->status != CPW_STATUS_RUNNING) return;
    s->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
}

static void stream_registry_global(
    void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version, const struct spa_dict *props) {
    (void)permissions;
    (void)version;
    cpw_stream *s = data;
    if (strcmp(type, PW_TYPE_INTERFACE_Node) != 0 || props == NULL) return;
    const char *name = spa_dict_lookup(props, PW_KEY_NODE_NAME);
    if (name != NULL && strcmp(name, s->target) == 0 && s->target_id == SPA_ID_INVALID) {
        s->target_id = id;
        s->target_seen = 1;
    }
}

static void stream_registry_global_remove(void *data, uint32_t id) {
    cpw_stream *s = data;
    if (id == s->target_id) stream_fail(s, CPW_STATUS_NODE_GONE, "the PipeWire node %s went away", s->target);
}

static const struct pw_registry_events stream_registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = stream_registry_global,
    .global_remove = stream_registry_global_remove,
};

static void stream_core_done(void *data, uint32_t id, int seq) {
    cpw_stream *s = data;
    if (id == PW_ID_CORE && seq == s->sync_seq) s->synced = 1;
}

static void stream_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    cpw_stream *s = data;
    if (id == PW_ID_CORE && res == -EPIPE)
        stream_fail(s, CPW_STATUS_DISCONNECTED, "the connection to PipeWire broke (%s)", message ? message : spa_strerror(res));
}

static const struct pw_core_events stream_core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = stream_core_done,
    .error = stream_core_error,
};

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    (void)old;
    cpw_stream *s = data;
    // While opening, wireplumber may destroy the stream ("no node available") when the camera's node is listed but
    // not yet ready for linking: the stream is made again. A format negotiation failure is final.
    int negotiation = error != NULL && strstr(error, "format") != NULL;
    switch (state) {
    case PW_STREAM_STATE_ERROR:
        if (s->opening && !s->was_streaming && !negotiation) {
            s->retry = 1;
            snprintf(s->last_refusal, sizeof s->last_refusal, "%s", error ? error : "unknown error");
            break;
        }
        stream_fail(s, CPW_STATUS_ERROR, "the PipeWire stream from %s failed: %s", s->target, error ? error : "unknown error");
        break;
    case PW_STREAM_STATE_UNCONNECTED:
        if (s->opening && !s->was_streaming) s->retry = 1;
        else if (s->was_streaming) stream_fail(s, CPW_STATUS_UNLINKED, "the PipeWire stream from %s was disconnected", s->target);
        break;
    case PW_STREAM_STATE_STREAMING:
        s->streaming = 1;
        s->was_streaming = 1;
        break;
    default: s->streaming = 0; break;
    }
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    cpw_stream *s = data;
    if (id != SPA_PARAM_Format || param == NULL) return;
    struct spa_video_info info;
    memset(&info, 0, sizeof info);
    if (spa_format_parse(param, &info.media_type, &info.media_subtype) < 0) return;
    if (info.media_type != SPA_MEDIA_TYPE_video) return;
    cpw_applied a;
    memset(&a, 0, sizeof a);
    if (info.media_subtype == SPA_MEDIA_SUBTYPE_raw) {
        if (spa_format_video_raw_parse(param, &info.info.raw) < 0) return;
        a.subtype = CPW_SUBTYPE_RAW;
        a.spa_format = info.info.raw.format;
        a.fourcc = cpw_fourcc_of_spa_format(a.spa_format);
        a.width = info.info.raw.size.width;
        a.height = info.info.raw.size.height;
        a.rate_num = info.info.raw.framerate.num;
        a.rate_den = info.info.raw.framerate.denom;
    } else if (info.media_subtype == SPA_MEDIA_SUBTYPE_mjpg) {
        if (spa_format_video_mjpg_parse(param, &info.info.mjpg) < 0) return;
        a.subtype = CPW_SUBTYPE_MJPG;
        a.fourcc = FOURCC('M', 'J', 'P', 'G');
        a.width = info.info.mjpg.size.width;
        a.height = info.info.mjpg.size.height;
        a.rate_num = info.info.mjpg.framerate.num;
        a.rate_den = info.info.mjpg.framerate.denom;
    } else if (info.media_subtype == SPA_MEDIA_SUBTYPE_h264) {
        if (spa_format_video_h264_parse(param, &info.info.h264) < 0) return;
        a.subtype = CPW_SUBTYPE_H264;
        a.fourcc = FOURCC('H', '2', '6', '4');
        a.width = info.info.h264.size.width;
        a.height = info.info.h264.size.height;
        a.rate_num = info.info.h264.framerate.num;
        a.rate_den = info.info.h264.framerate.denom;
    } else {
        return;
    }
    s->applied = a;
    s->format_set = 1;
    // Ask for the header meta (pts, seq) with the buffers; the buffer layout itself is the producer's.
    uint8_t buffer[256];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[1];
    params[0] = spa_pod_builder_add_object(
        &b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta, SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header), SPA_PARAM_META_size,
        SPA_POD_Int(sizeof(struct spa_meta_header)));
    pw_stream_update_params(s->stream, params, 1);
}

/* Where `ptr` lies in the file it is mapped from: the offset, from the mapping's line in /proc/self/maps (its start
   and file offset). Returns 0, or -1 when no mapping holds it or the file cannot be read. The read is bounded. */
static int file_offset_of(const void *ptr, uint64_t *offset) {
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) return -1;
    char line[512];
    int found = -1;
    uintptr_t p = (uintptr_t)ptr;
    for (int lines = 0; lines < 100000 && fgets(line, sizeof line, f) != NULL; lines++) {
        unsigned long long start, end, off;
        if (sscanf(line, "%llx-%llx %*s %llx", &start, &end, &off) != 3) continue;
        if (p >= start && p < end) {
            *offset = off + (p - start);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Maps `length` bytes of `fd` from `offset` read-only into the counted mappings; the address of `offset`, or NULL.
   The whole mapping (page-aligned) goes to `*map`. */
static const uint8_t *map_shared(cpw_mappings *m, int fd, uint64_t offset, size_t length, struct cpw_map *map) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || length == 0) return NULL;
    uint64_t start = offset - offset % (uint64_t)page;
    size_t total = (size_t)(offset - start) + length;
    void *a = mmap(NULL, total, PROT_READ, MAP_SHARED, fd, (off_t)start);
    if (a == MAP_FAILED) return NULL;
    if (mappings_add(m, a, total) != 0) {
        munmap(a, total);
        return NULL;
    }
    map->address = a;
    map->length = total;
    return (const uint8_t *)a + (offset - start);
}

/* Turns a shared mapping of ours into a private copy of what it holds now, in place: the copy is made elsewhere and
   moved over the mapping in one step (mremap), so a frame reading it sees the same bytes throughout, and keeps
   them once the buffer is PipeWire's again (its producer may then write into it). Returns 0, or -1 (the mapping is
   unchanged). */
static int make_private(const struct cpw_map *map) {
    if (map->address == NULL || map->length == 0) return -1;
    void *copy = mmap(NULL, map->length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) return -1;
    memcpy(copy, map->address, map->length);
    mprotect(copy, map->length, PROT_READ);
    if (mremap(copy, map->length, map->length, MREMAP_MAYMOVE | MREMAP_FIXED, map->address) == MAP_FAILED) {
        munmap(copy, map->length);
        return -1;
    }
    return 0;
}

/* Maps each data block of a buffer PipeWire adds ourselves, read-only, into the counted mappings, and gives the
   buffer a slot: such a buffer can be kept after the callback and read after the stream is gone. A MemFd or DmaBuf
   block is mapped from its fd. A MemPtr block (what a client gets for buffers PipeWire put in shared memory: the
   data inside the buffer's memfd, mapped by PipeWire) is mapped from the memfd of the core's memory pool that holds
   it, at the offset its mapping has there, and used only when both mappings read the same bytes. A buffer with
   another kind of data (or a mapping that fails) has no slot and is read in the callback only. */
static void on_add_buffer(void *data, struct pw_buffer *pb) {
    cpw_stream *s = data;
    pb->user_data = NULL;
    struct spa_buffer *buf = pb->buffer;
    if (s->mappings == NULL || s->n_slots >= CPW_MAX_SLOTS || buf->n_datas == 0 || buf->n_datas > CPW_MAX_PLANES) return;
    struct cpw_slot *slot = &s->slots[s->n_slots];
    memset(slot, 0, sizeof *slot);
    /* The blocks mapped before a failure stay in the list until it is released. */
    for (uint32_t i = 0; i < buf->n_datas; i++) {
        struct spa_data *d = &buf->datas[i];
        if (d->maxsize == 0) return;
        if ((d->type == SPA_DATA_MemFd || d->type == SPA_DATA_DmaBuf) && d->fd >= 0) {
            /* Only what the file holds: a mapping past its end would fault when read (SIGBUS). A DMA-BUF tells its
               size by seeking to its end; a memfd by fstat. */
            struct stat st;
            off_t size = d->type == SPA_DATA_DmaBuf ? lseek((int)d->fd, 0, SEEK_END)
                                                   : (fstat((int)d->fd, &st) == 0 ? st.st_size : (off_t)-1);
            if (size < 0 || (uint64_t)d->mapoffset + d->maxsize > (uint64_t)size) return;
            slot->data[i] = map_shared(s->mappings, (int)d->fd, d->mapoffset, d->maxsize, &slot->maps[i]);
        } else if (d->type == SPA_DATA_MemPtr && d->data != NULL && s->core != NULL) {
            struct pw_memblock *block = pw_mempool_find_ptr(pw_core_get_mempool(s->core), d->data);
            uint64_t offset;
            struct stat st; /* an imported block's size is unknown (0): the file's is the bound */
            if (block == NULL || block->fd < 0 || fstat(block->fd, &st) != 0 || file_offset_of(d->data, &offset) != 0 ||
                st.st_size < 0 || offset + d->maxsize > (uint64_t)st.st_size)
                return;
            slot->data[i] = map_shared(s->mappings, block->fd, offset, d->maxsize, &slot->maps[i]);
            if (slot->data[i] != NULL && memcmp(slot->data[i], d->data, d->maxsize) != 0) return;
        }
        if (slot->data[i] == NULL) return;
        slot->n_maps = i + 1;
    }
    slot->pb = pb;
    pb->user_data = (void *)(uintptr_t)(s->n_slots + 1);
    s->n_slots++;
}

static void on_remove_buffer(void *data, struct pw_buffer *pb) {
    cpw_stream *s = data;
    uintptr_t u = (uintptr_t)pb->user_data;
    pb->user_data = NULL;
    if (u == 0 || u > s->n_slots) return;
    /* A kept one is PipeWire's again: frames still reading it keep a private copy. */
    if (s->slots[u - 1].kept) release_kept(&s->slots[u - 1]);
    s->slots[u - 1].pb = NULL;
    s->slots[u - 1].kept = 0;
}

int cpw_stream_requeue(cpw_stream *s, int32_t slot) {
    if (s == NULL || s->stream == NULL || slot < 0 || (uint32_t)slot >= s->n_slots) return -ENOENT;
    struct cpw_slot *sl = &s->slots[slot];
    if (!sl->kept || sl->pb == NULL) return -ENOENT;
    sl->kept = 0;
    pw_stream_queue_buffer(s->stream, sl->pb);
    return 0;
}

cpw_mappings *cpw_stream_mappings(cpw_stream *s) {
    if (s == NULL || s->mappings == NULL) return NULL;
    atomic_fetch_add_explicit(&s->mappings->references, 1, memory_order_relaxed);
    return s->mappings;
}

static void on_process(void *data) {
    cpw_stream *s = data;
    struct pw_buffer *pb;
    // Every buffer waiting is handed on in order (normally one).
    while ((pb = pw_stream_dequeue_buffer(s->stream)) != NULL) {
        struct spa_buffer *buf = pb->buffer;
        uintptr_t u = (uintptr_t)pb->user_data;
        struct cpw_slot *slot = u > 0 && u <= s->n_slots && s->slots[u - 1].pb == pb ? &s->slots[u - 1] : NULL;
        cpw_buffer out;
        memset(&out, 0, sizeof out);
        out.slot = slot != NULL ? (int32_t)(u - 1) : -1;
        out.n_planes = buf->n_datas < CPW_MAX_PLANES ? buf->n_datas : CPW_MAX_PLANES;
        for (uint32_t i = 0; i < out.n_planes; i++) {
            struct spa_data *d = &buf->datas[i];
            out.planes[i].data = slot != NULL ? slot->data[i] : d->data;
            out.planes[i].maxsize = d->maxsize;
            if (d->chunk != NULL) {
                out.planes[i].offset = d->chunk->offset;
                out.planes[i].size = d->chunk->size;
                out.planes[i].stride = d->chunk->stride;
                out.planes[i].corrupted = (d->chunk->flags & SPA_CHUNK_FLAG_CORRUPTED) != 0;
            }
        }
        struct spa_meta_header *h = spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof(*h));
        if (h != NULL) {
            out.has_header = 1;
            out.pts = h->pts;
            out.seq = h->seq;
            out.header_flags = h->flags;
        }
        int keep = 0;
        if (s->callback != NULL && s->status == CPW_STATUS_RUNNING) keep = s->callback(s->context_ptr, &out);
        if (keep && slot != NULL) slot->kept = 1;
        else pw_stream_queue_buffer(s->stream, pb);
    }
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .add_buffer = on_add_buffer,
    .remove_buffer = on_remove_buffer,
    .process = on_process,
};

static void on_wake(void *data, uint64_t count) {
    (void)data;
    (void)count;
}

void cpw_stream_close(cpw_stream *s) {
    if (s == NULL) return;
    if (s->stream != NULL) {
        /* Kept buffers go back before the stream goes (a producer would otherwise miss them for its other links and
           later streams); frames still reading them keep private copies. */
        for (uint32_t i = 0; i < s->n_slots; i++) {
            struct cpw_slot *slot = &s->slots[i];
            if (slot->kept && slot->pb != NULL && release_kept(slot)) pw_stream_queue_buffer(s->stream, slot->pb);
            slot->kept = 0;
        }
        spa_hook_remove(&s->stream_listener);
        pw_stream_disconnect(s->stream);
        pw_stream_destroy(s->stream);
    }
    if (s->registry != NULL) {
        spa_hook_remove(&s->registry_listener);
        pw_proxy_destroy((struct pw_proxy *)s->registry);
    }
    if (s->core != NULL) {
        spa_hook_remove(&s->core_listener);
        pw_core_disconnect(s->core);
    }
    if (s->context != NULL) pw_context_destroy(s->context);
    if (s->wake != NULL) pw_loop_destroy_source(s->loop, s->wake);
    if (s->loop != NULL) pw_loop_destroy(s->loop);
    cpw_mappings_release(s->mappings); /* unmapped now, or when the last frame reading a buffer in place goes */
    free(s->target);
    free(s);
}

int cpw_stream_iterate(cpw_stream *s, int timeout_ms) {
    if (s->status == CPW_STATUS_RUNNING) {
        pw_loop_enter(s->loop);
        int r = pw_loop_iterate(s->loop, timeout_ms);
        pw_loop_leave(s->loop);
        if (r < 0 && r != -EINTR) stream_fail(s, CPW_STATUS_DISCONNECTED, "the PipeWire loop failed (%s)", spa_strerror(r));
    }
    return s->status;
}

void cpw_stream_wake(cpw_stream *s) {
    if (s != NULL && s->wake != NULL) pw_loop_signal_event(s->loop, s->wake);
}

int cpw_stream_status(cpw_stream *s, char *error, size_t error_len) {
    if (s->status != CPW_STATUS_RUNNING) set_error(error, error_len, "%s", s->error);
    return s->status;
}

/* Iterates until `done(s)` or a failure or the deadline; returns 0, the failure's status, or -ETIMEDOUT. */
static int run_until(cpw_stream *s, int (*done)(cpw_stream *), int64_t deadline) {
    while (!done(s)) {
        if (s->status != CPW_STATUS_RUNNING) return s->status;
        int64_t left = (deadline - now_ns()) / 1000000;
        if (left <= 0) return -ETIMEDOUT;
        cpw_stream_iterate(s, left > 100 ? 100 : (int)left);
    }
    return s->status == CPW_STATUS_RUNNING ? 0 : s->status;
}

static int is_synced(cpw_stream *s) { return s->synced; }

/* Makes the capture stream and connects it to the target with the requested format. */
static int connect_stream(cpw_stream *s, const cpw_request *request) {
    const char *target = s->target;
    struct pw_properties *props = pw_properties_new(
        PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Camera", PW_KEY_NODE_NAME, "swift-video-capture",
        PW_KEY_TARGET_OBJECT, target, PW_KEY_NODE_DONT_RECONNECT, "true", NULL);
    s->stream = pw_stream_new(s->core, "swift-video-capture", props);
    if (s->stream == NULL) return errno ? -errno : -ENOMEM;
    pw_stream_add_listener(s->stream, &s->stream_listener, &stream_events, s);

    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    struct spa_rectangle size = SPA_RECTANGLE(request->width, request->height);
    struct spa_fraction rate = SPA_FRACTION(request->rate_num, request->rate_den);
    const struct spa_pod *params[1];
    struct spa_pod_frame f;
    spa_pod_builder_push_object(&b, &f, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat);
    spa_pod_builder_add(&b, SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video), 0);
    uint32_t subtype = request->subtype == CPW_SUBTYPE_MJPG   ? SPA_MEDIA_SUBTYPE_mjpg
                       : request->subtype == CPW_SUBTYPE_H264 ? SPA_MEDIA_SUBTYPE_h264
                                                              : SPA_MEDIA_SUBTYPE_raw;
    spa_pod_builder_add(&b, SPA_FORMAT_mediaSubtype, SPA_POD_Id(subtype), 0);
    if (subtype == SPA_MEDIA_SUBTYPE_raw) spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_format, SPA_POD_Id(request->spa_format), 0);
    spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_size, SPA_POD_Rectangle(&size), 0);
    if (request->rate_den != 0) {
        // The rate asked for, or one the node offers within 1 % of it (a node's rates may be listed differently from
        // ours: 30000/1001 for 30). Not wider: a V4L2 node lists its rates as an enumeration, and the intersection
        // with a wide range fixates to the enumeration's first (vivid's 1 fps), not to ours.
        struct spa_fraction lo = SPA_FRACTION(request->rate_num * 99, request->rate_den * 100),
                            hi = SPA_FRACTION(request->rate_num * 101, request->rate_den * 100);
        spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_framerate, SPA_POD_CHOICE_RANGE_Fraction(&rate, &lo, &hi), 0);
    }
    params[0] = spa_pod_builder_pop(&b, &f);

    return pw_stream_connect(
        s->stream, PW_DIRECTION_INPUT, PW_ID_ANY, PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_DONT_RECONNECT,
        params, 1);
}

static int is_streaming_or_refused(cpw_stream *s) { return (s->streaming && s->format_set) || s->retry; }

static cpw_stream *stream_open_on(
    const char *remote, int fd, const char *target, const cpw_request *request, cpw_buffer_callback callback, void *context,
    int timeout_ms, cpw_applied *applied, int *error_code, char *error, size_t error_len);

cpw_stream *cpw_stream_open(
    const char *remote, const char *target, const cpw_request *request, cpw_buffer_callback callback, void *context, int timeout_ms,
    cpw_applied *applied, int *error_code, char *error, size_t error_len) {
    return stream_open_on(remote, -1, target, request, callback, context, timeout_ms, applied, error_code, error, error_len);
}

cpw_stream *cpw_stream_open_fd(
    int fd, const char *target, const cpw_request *request, cpw_buffer_callback callback, void *context, int timeout_ms,
    cpw_applied *applied, int *error_code, char *error, size_t error_len) {
    if (fd < 0) {
        *error_code = -EBADF;
        set_error(error, error_len, "PipeWire: no connection (descriptor %d)", fd);
        return NULL;
    }
    return stream_open_on(
        "the camera portal's connection", fd, target, request, callback, context, timeout_ms, applied, error_code, error, error_len);
}

static cpw_stream *stream_open_on(
    const char *remote, int fd, const char *target, const cpw_request *request, cpw_buffer_callback callback, void *context,
    int timeout_ms, cpw_applied *applied, int *error_code, char *error, size_t error_len) {
    pthread_once(&init_once, init_pipewire);
    *error_code = 0;
    int64_t deadline = now_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000;
    cpw_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        if (fd >= 0) close(fd);
        *error_code = -ENOMEM;
        set_error(error, error_len, "out of memory");
        return NULL;
    }
    s->target = strdup(target);
    s->target_id = SPA_ID_INVALID;
    s->opening = 1;
    s->callback = callback;
    s->context_ptr = context;
    s->mappings = mappings_new();
    s->loop = pw_loop_new(NULL);
    if (s->target == NULL || s->loop == NULL || s->mappings == NULL) {
        *error_code = -ENOMEM;
        set_error(error, error_len, "PipeWire: could not make a loop");
        goto fail;
    }
    s->wake = pw_loop_add_event(s->loop, on_wake, s);
    s->context = pw_context_new(s->loop, NULL, 0);
    if (s->context == NULL) {
        *error_code = errno ? -errno : -ENOMEM;
        set_error(error, error_len, "PipeWire: could not make a context");
        goto fail;
    }
    s->core = connect_core(s->context, remote, fd);
    int portal = fd >= 0;
    fd = -1; /* PipeWire's now, connected or not */
    if (s->core == NULL) {
        int e = errno ? -errno : -ECONNREFUSED;
        *error_code = -ECONNREFUSED; // one code for "cannot reach PipeWire"; the text has the reason
        set_error(error, error_len, "PipeWire: could not connect to %s (%s)", remote ? remote : "the default remote", spa_strerror(e));
        goto fail;
    }
    pw_core_add_listener(s->core, &s->core_listener, &stream_core_events, s);
    s->registry = pw_core_get_registry(s->core, PW_VERSION_REGISTRY, 0);
    if (s->registry == NULL) {
        *error_code = -ENOMEM;
        set_error(error, error_len, "PipeWire: no registry");
        goto fail;
    }
    pw_registry_add_listener(s->registry, &s->registry_listener, &stream_registry_events, s);
    s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, 0);
    int r = run_until(s, is_synced, deadline);
    /* On a camera portal's connection the session manager grants the client its cameras only after it connected:
       the registry is asked again until the target shows (a second at most, within the deadline). */
    int64_t settle_until = now_ns() + 1000000000LL;
    while (r == 0 && portal && !s->target_seen && now_ns() < settle_until && now_ns() < deadline) {
        s->synced = 0;
        s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, s->sync_seq);
        r = run_until(s, is_synced, deadline);
        if (r == 0 && !s->target_seen) cpw_stream_iterate(s, 20);
    }
    if (r != 0) {
        *error_code = r < 0 ? r : -EIO;
        if (r == -ETIMEDOUT) set_error(error, error_len, "PipeWire did not answer within %d ms", timeout_ms);
        else set_error(error, error_len, "%s", s->error);
        goto fail;
    }
    if (!s->target_seen) {
        *error_code = -ENOENT;
        set_error(error, error_len, "PipeWire has no node named %s", target);
        goto fail;
    }

    for (;;) {
        s->retry = 0;
        r = connect_stream(s, request);
        if (r < 0) {
            *error_code = r;
            set_error(error, error_len, "PipeWire: pw_stream_connect to %s failed (%s)", target, spa_strerror(r));
            goto fail;
        }
        r = run_until(s, is_streaming_or_refused, deadline);
        if (r != 0 || !s->retry) break;
        // Refused while the node got ready: a moment's wait (the loop keeps running), then a new stream.
        spa_hook_remove(&s->stream_listener);
        pw_stream_destroy(s->stream);
        s->stream = NULL;
        s->n_slots = 0; /* nothing was kept while opening: the next stream's buffers number from 0 */
        int64_t pause = now_ns() + 100000000;
        if (pause > deadline) pause = deadline;
        while (now_ns() < pause && s->status == CPW_STATUS_RUNNING) cpw_stream_iterate(s, 20);
        if (now_ns() >= deadline) {
            r = -ETIMEDOUT;
            break;
        }
    }
    s->opening = 0;
    if (r != 0) {
        // A negative errno; a stream error is EIO, a node or connection lost while starting ENOTCONN.
        *error_code = r < 0 ? r : r == CPW_STATUS_ERROR ? -EIO : -ENOTCONN;
        if (r == -ETIMEDOUT) {
            const char *state = s->stream ? pw_stream_state_as_string(pw_stream_get_state(s->stream, NULL)) : "none";
            set_error(
                error, error_len, "the PipeWire node %s did not start streaming within %d ms (stream %s%s)%s%s%s", target, timeout_ms, state,
                s->format_set ? ", format agreed" : "", s->last_refusal[0] ? " (the last refusal: " : " (is a session manager such as wireplumber running?)",
                s->last_refusal, s->last_refusal[0] ? ")" : "");
        } else {
            set_error(error, error_len, "%s", s->error);
        }
        goto fail;
    }
    *applied = s->applied;
    applied->n_buffers = s->n_slots;
    return s;

fail:
    if (fd >= 0) close(fd); /* failed before PipeWire took it */
    s->callback = NULL;
    cpw_stream_close(s);
    return NULL;
}

// MARK: - Controls

// The V4L2 controls PipeWire's V4L2 node gives a property of its own; every other one is SPA_PROP_START_CUSTOM + id.
static const struct {
    uint32_t prop, v4l2;
} control_map[] = {
    {SPA_PROP_brightness, 0x00980900}, {SPA_PROP_contrast, 0x00980901}, {SPA_PROP_saturation, 0x00980902},
    {SPA_PROP_hue, 0x00980903},        {SPA_PROP_gamma, 0x00980910},    {SPA_PROP_exposure, 0x00980911},
    {SPA_PROP_gain, 0x00980913},       {SPA_PROP_sharpness, 0x0098091b},
};

static uint32_t v4l2_of_prop(uint32_t prop) {
    for (size_t i = 0; i < sizeof control_map / sizeof control_map[0]; i++)
        if (control_map[i].prop == prop) return control_map[i].v4l2;
    return prop > SPA_PROP_START_CUSTOM ? prop - SPA_PROP_START_CUSTOM : 0;
}

typedef struct ctl_state {
    struct pw_main_loop *loop;
    struct pw_core *core;
    struct pw_registry *registry;
    struct pw_proxy *proxy;
    struct spa_hook core_listener, registry_listener, node_listener;
    const char *target;
    uint32_t node_id;
    int found, phase, sync_seq, done, error;
    char error_text[256];
    int setting; // 1: set (prop_id, kind, value); 0: list
    uint32_t prop_id, kind;
    int32_t value;
    cpw_control *controls;
    size_t n, cap;
} ctl_state;

static void ctl_free_one(cpw_control *c) {
    free(c->name);
    for (uint32_t i = 0; i < c->n_items; i++) free(c->item_label[i]);
    memset(c, 0, sizeof *c);
}

void cpw_controls_free(cpw_control *controls, size_t n) {
    if (controls == NULL) return;
    for (size_t i = 0; i < n; i++) ctl_free_one(&controls[i]);
    free(controls);
}

// One PropInfo: { id, name, type (an Int or Bool, or a choice of them), labels (a struct of Int, String pairs) }.
static void ctl_param(void *data, int seq, uint32_t id, uint32_t index, uint32_t next, const struct spa_pod *param) {
    (void)seq;
    (void)index;
    (void)next;
    ctl_state *s = data;
    if (id != SPA_PARAM_PropInfo || param == NULL || !spa_pod_is_object(param)) return;
    cpw_control c;
    memset(&c, 0, sizeof c);
    const struct spa_pod_prop *prop;
    const struct spa_pod_object *obj = (const struct spa_pod_object *)param;
    int typed = 0, lone_enum = 0;
    SPA_POD_OBJECT_FOREACH(obj, prop) {
        if (prop->key == SPA_PROP_INFO_id) {
            spa_pod_get_id(&prop->value, &c.prop_id);
        } else if (prop->key == SPA_PROP_INFO_name || (prop->key == SPA_PROP_INFO_description && c.name == NULL)) {
            const char *text = NULL;
            if (spa_pod_get_string(&prop->value, &text) == 0 && text != NULL) {
                free(c.name);
                c.name = strdup(text);
            }
        } else if (prop->key == SPA_PROP_INFO_type) {
            uint32_t n_vals = 0, choice = 0;
            const struct spa_pod *vals = spa_pod_get_values(&prop->value, &n_vals, &choice);
            if (vals == NULL || n_vals == 0) continue;
            if (vals->type == SPA_TYPE_Bool) {
                c.kind = CPW_CONTROL_BOOLEAN;
                c.minimum = 0;
                c.maximum = 1;
                c.step = 1;
                c.default_value = *(const int32_t *)SPA_POD_BODY_CONST(vals) ? 1 : 0;
                typed = 1;
            } else if (vals->type == SPA_TYPE_Int) {
                const int32_t *v = SPA_POD_BODY_CONST(vals);
                c.kind = CPW_CONTROL_INTEGER;
                c.default_value = v[0];
                c.minimum = c.maximum = v[0];
                c.step = 1;
                if (choice == SPA_CHOICE_Range && n_vals >= 3) {
                    c.minimum = v[1];
                    c.maximum = v[2];
                } else if (choice == SPA_CHOICE_Step && n_vals >= 4) {
                    c.minimum = v[1];
                    c.maximum = v[2];
                    c.step = v[3] > 0 ? v[3] : 1;
                } else if (choice == SPA_CHOICE_Enum) {
                    lone_enum = n_vals == 1;
                    for (uint32_t i = 1; i < n_vals; i++) {
                        if (v[i] < c.minimum) c.minimum = v[i];
                        if (v[i] > c.maximum) c.maximum = v[i];
                    }
                }
                typed = 1;
            }
        } else if (prop->key == SPA_PROP_INFO_labels && spa_pod_is_struct(&prop->value)) {
            const struct spa_pod *item;
            int32_t value = 0;
            int have_value = 0;
            SPA_POD_STRUCT_FOREACH(&prop->value, item) {
                const char *text = NULL;
                if (!have_value && spa_pod_get_int(item, &value) == 0) {
                    have_value = 1;
                } else if (have_value && spa_pod_get_string(item, &text) == 0 && text != NULL) {
                    if (c.n_items < CPW_MAX_MENU) {
                        c.item_value[c.n_items] = value;
                        c.item_label[c.n_items] = strdup(text);
                        c.n_items++;
                    }
                    have_value = 0;
                }
            }
        }
    }
    // Only the properties that stand for controls (not the node's device, deviceName, deviceFd).
    c.v4l2_id = v4l2_of_prop(c.prop_id);
    if (!typed || c.prop_id < SPA_PROP_START_Video || c.v4l2_id == 0 || c.name == NULL) {
        ctl_free_one(&c);
        return;
    }
    // A menu is an enumeration of its default alone, with its entries as labels: its range is theirs. One without
    // labels lost them (PipeWire 0.3.65 skips the entries of a menu too long for its buffer): left out.
    if (lone_enum && c.n_items == 0) {
        ctl_free_one(&c);
        return;
    }
    if (c.n_items > 0 && c.kind == CPW_CONTROL_INTEGER) {
        c.kind = CPW_CONTROL_MENU;
        c.minimum = c.maximum = c.item_value[0];
        for (uint32_t i = 1; i < c.n_items; i++) {
            if (c.item_value[i] < c.minimum) c.minimum = c.item_value[i];
            if (c.item_value[i] > c.maximum) c.maximum = c.item_value[i];
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        cpw_control *grown = cap > 4096 ? NULL : realloc(s->controls, cap * sizeof(cpw_control));
        if (grown == NULL) {
            ctl_free_one(&c);
            return;
        }
        s->controls = grown;
        s->cap = cap;
    }
    s->controls[s->n++] = c;
}

static const struct pw_node_events ctl_node_events = {
    PW_VERSION_NODE_EVENTS,
    .param = ctl_param,
};

static void ctl_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version, const struct spa_dict *props) {
    (void)permissions;
    (void)version;
    ctl_state *s = data;
    if (s->found || strcmp(type, PW_TYPE_INTERFACE_Node) != 0 || props == NULL) return;
    const char *name = spa_dict_lookup(props, PW_KEY_NODE_NAME);
    if (name == NULL || strcmp(name, s->target) != 0) return;
    s->found = 1;
    s->node_id = id;
}

static const struct pw_registry_events ctl_registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = ctl_global,
};

static void ctl_done(void *data, uint32_t id, int seq) {
    ctl_state *s = data;
    if (id != PW_ID_CORE || seq != s->sync_seq) return;
    if (s->phase == 0) {
        if (!s->found) {
            s->error = -ENOENT;
            snprintf(s->error_text, sizeof s->error_text, "PipeWire has no node named %s", s->target);
            pw_main_loop_quit(s->loop);
            return;
        }
        s->phase = 1;
        s->proxy = pw_registry_bind(s->registry, s->node_id, PW_TYPE_INTERFACE_Node, PW_VERSION_NODE, 0);
        if (s->proxy == NULL) {
            s->error = errno ? -errno : -ENOMEM;
            snprintf(s->error_text, sizeof s->error_text, "PipeWire: could not bind the node %s", s->target);
            pw_main_loop_quit(s->loop);
            return;
        }
        if (s->setting) {
            uint8_t buffer[256];
            struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
            struct spa_pod_frame f;
            spa_pod_builder_push_object(&b, &f, SPA_TYPE_OBJECT_Props, SPA_PARAM_Props);
            spa_pod_builder_prop(&b, s->prop_id, 0);
            if (s->kind == CPW_CONTROL_BOOLEAN) spa_pod_builder_bool(&b, s->value != 0);
            else spa_pod_builder_int(&b, s->value);
            const struct spa_pod *pod = spa_pod_builder_pop(&b, &f);
            pw_node_set_param((struct pw_node *)s->proxy, SPA_PARAM_Props, 0, pod);
        } else {
            pw_node_add_listener((struct pw_node *)s->proxy, &s->node_listener, &ctl_node_events, s);
            pw_node_enum_params((struct pw_node *)s->proxy, 0, SPA_PARAM_PropInfo, 0, UINT32_MAX, NULL);
        }
        s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, s->sync_seq);
        return;
    }
    s->done = 1;
    pw_main_loop_quit(s->loop);
}

static void ctl_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    ctl_state *s = data;
    // The core's own errors, and those about the node (a refused Props param) end the call.
    if (id != PW_ID_CORE && (s->proxy == NULL || id != pw_proxy_get_id(s->proxy))) return;
    s->error = res < 0 ? res : -EIO;
    snprintf(s->error_text, sizeof s->error_text, "PipeWire: %s", message ? message : spa_strerror(res));
    pw_main_loop_quit(s->loop);
}

static const struct pw_core_events ctl_core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = ctl_done,
    .error = ctl_error,
};

static void ctl_timeout(void *data, uint64_t expirations) {
    (void)expirations;
    ctl_state *s = data;
    pw_main_loop_quit(s->loop);
}

static int ctl_run(const char *remote, int fd, ctl_state *s, int timeout_ms, char *error, size_t error_len) {
    pthread_once(&init_once, init_pipewire);
    int res = 0;
    struct pw_context *context = NULL;
    struct spa_source *timer = NULL;
    s->loop = pw_main_loop_new(NULL);
    if (s->loop == NULL) {
        if (fd >= 0) close(fd);
        set_error(error, error_len, "PipeWire: could not make a main loop");
        return -ENOMEM;
    }
    context = pw_context_new(pw_main_loop_get_loop(s->loop), NULL, 0);
    if (context == NULL) {
        if (fd >= 0) close(fd);
        res = -ENOMEM;
        set_error(error, error_len, "PipeWire: could not make a context");
        goto done;
    }
    s->core = connect_core(context, remote, fd);
    if (s->core == NULL) {
        res = errno ? -errno : -ECONNREFUSED;
        set_error(error, error_len, "PipeWire: could not connect to %s (%s)", remote ? remote : "the default remote", spa_strerror(res));
        goto done;
    }
    pw_core_add_listener(s->core, &s->core_listener, &ctl_core_events, s);
    s->registry = pw_core_get_registry(s->core, PW_VERSION_REGISTRY, 0);
    if (s->registry == NULL) {
        res = -ENOMEM;
        set_error(error, error_len, "PipeWire: no registry");
        goto done;
    }
    pw_registry_add_listener(s->registry, &s->registry_listener, &ctl_registry_events, s);
    s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, 0);
    timer = pw_loop_add_timer(pw_main_loop_get_loop(s->loop), ctl_timeout, s);
    if (timer != NULL) {
        struct timespec t = {.tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
        pw_loop_update_timer(pw_main_loop_get_loop(s->loop), timer, &t, NULL, false);
    }
    pw_main_loop_run(s->loop);
    if (s->error != 0) {
        res = s->error;
        set_error(error, error_len, "%s", s->error_text);
    } else if (!s->done) {
        res = -ETIMEDOUT;
        set_error(error, error_len, "PipeWire did not answer within %d ms", timeout_ms);
    }
done:
    if (timer != NULL) pw_loop_destroy_source(pw_main_loop_get_loop(s->loop), timer);
    if (s->proxy != NULL) pw_proxy_destroy(s->proxy);
    if (s->registry != NULL) pw_proxy_destroy((struct pw_proxy *)s->registry);
    if (s->core != NULL) pw_core_disconnect(s->core);
    if (context != NULL) pw_context_destroy(context);
    pw_main_loop_destroy(s->loop);
    return res;
}

int cpw_controls(
    const char *remote, int fd, const char *node_name, int timeout_ms, cpw_control **out, size_t *n_out, char *error, size_t error_len) {
    *out = NULL;
    *n_out = 0;
    ctl_state s;
    memset(&s, 0, sizeof s);
    s.target = node_name;
    int res = ctl_run(remote, fd, &s, timeout_ms, error, error_len);
    if (res < 0) {
        cpw_controls_free(s.controls, s.n);
        return res;
    }
    *out = s.controls;
    *n_out = s.n;
    return 0;
}

int cpw_set_control(
    const char *remote, int fd, const char *node_name, uint32_t prop_id, uint32_t kind, int32_t value, int timeout_ms, char *error,
    size_t error_len) {
    ctl_state s;
    memset(&s, 0, sizeof s);
    s.target = node_name;
    s.setting = 1;
    s.prop_id = prop_id;
    s.kind = kind;
    s.value = value;
    return ctl_run(remote, fd, &s, timeout_ms, error, error_len);
}
