// pw-test-camera: a PipeWire camera of our own for the tests and for trying PipeWireCapture without a camera.
//
// A pw_stream of direction output that drives the graph (PW_STREAM_FLAG_DRIVER) from a timer, registered as a
// camera (media.class Video/Source, media.role Camera, media.category Capture) so that wireplumber links consumers
// to it. It offers YUY2 at 640x480 and 320x240, and I420 and NV12 at the same sizes, at one fixed rate.
//
// Every frame carries known bytes that a consumer can recompute: frame n (counted from 0), plane p, row y, byte x
// of the row holds (n*131 + p*71 + y*37 + x*7 + x/256) mod 256, except the first four bytes of plane 0, which hold
// n (little-endian 32 bits). Planar formats sit in one data block in the V4L2 single-buffer layout: luma rows of
// the chunk's stride s, then for I420 the U and V planes with rows of s/2, for NV12 the interleaved chroma with
// rows of s; with --separate-planes each plane has a data block of its own (as libcamera gives planar formats),
// with its own chunk stride (s, s/2 or s) and the same chunk offset. Row padding (--pad) and the bytes before the
// chunk's offset (--offset) are filled with 0xEE and 0xDD.
// Each buffer carries a header meta with pts (CLOCK_MONOTONIC ns) and seq = n.
//
//   pw-test-camera [--name NODE_NAME] [--description TEXT] [--frames N] [--fps N] [--pad BYTES] [--offset BYTES]
//                  [--separate-planes]
//
// It prints "pw-test-camera: NODE_NAME ready" once its node is registered, and "pw-test-camera: N frames" when it
// ends (after N frames with --frames, or on SIGTERM/SIGINT).
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pipewire/pipewire.h>
#include <spa/param/buffers.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>

struct camera {
    struct pw_main_loop *loop;
    struct pw_stream *stream;
    struct spa_hook listener;
    struct spa_source *timer;
    const char *name;
    unsigned long frames_wanted; // 0: until stopped
    unsigned long fps;
    unsigned long pad, offset;
    int separate_planes; // --separate-planes: a planar format in one data block per plane (as libcamera gives them)
    unsigned long produced;
    int ready;
    // The negotiated layout.
    uint32_t format, width, height;
    uint32_t n_planes;
    uint32_t plane_offset[3], plane_rows[3], plane_bytes[3], plane_stride[3];
    uint32_t stride, frame_bytes;
};

static uint8_t pattern(unsigned long n, uint32_t plane, uint32_t y, uint32_t x) {
    return (uint8_t)(n * 131u + plane * 71u + y * 37u + x * 7u + (x >> 8));
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fill(struct camera *c, uint8_t *base, unsigned long n) {
    memset(base, 0xDD, c->offset);
    uint8_t *frame = base + c->offset;
    memset(frame, 0xEE, c->frame_bytes);
    for (uint32_t p = 0; p < c->n_planes; p++) {
        for (uint32_t y = 0; y < c->plane_rows[p]; y++) {
            uint8_t *row = frame + c->plane_offset[p] + (size_t)y * c->plane_stride[p];
            for (uint32_t x = 0; x < c->plane_bytes[p]; x++) row[x] = pattern(n, p, y, x);
        }
    }
    uint32_t n32 = (uint32_t)n;
    memcpy(frame, &n32, 4);
}

/* One data block per plane: plane p at the chunk's offset in block p, with its own stride. */
static int fill_separate(struct camera *c, struct spa_buffer *buf, unsigned long n) {
    if (buf->n_datas < c->n_planes) return -1;
    for (uint32_t p = 0; p < c->n_planes; p++) {
        struct spa_data *d = &buf->datas[p];
        uint32_t bytes = c->plane_stride[p] * c->plane_rows[p];
        if (d->data == NULL || d->maxsize < c->offset + bytes) return -1;
        uint8_t *base = d->data;
        memset(base, 0xDD, c->offset);
        memset(base + c->offset, 0xEE, bytes);
        for (uint32_t y = 0; y < c->plane_rows[p]; y++) {
            uint8_t *row = base + c->offset + (size_t)y * c->plane_stride[p];
            for (uint32_t x = 0; x < c->plane_bytes[p]; x++) row[x] = pattern(n, p, y, x);
        }
        if (p == 0) {
            uint32_t n32 = (uint32_t)n;
            memcpy(base + c->offset, &n32, 4);
        }
        d->chunk->offset = (uint32_t)c->offset;
        d->chunk->size = bytes;
        d->chunk->stride = (int32_t)c->plane_stride[p];
        d->chunk->flags = 0;
    }
    return 0;
}

static void on_process(void *data) {
    struct camera *c = data;
    struct pw_buffer *pb = pw_stream_dequeue_buffer(c->stream);
    if (pb == NULL) return;
    struct spa_buffer *buf = pb->buffer;
    struct spa_data *d = &buf->datas[0];
    if (c->separate_planes && c->n_planes > 1) {
        if (fill_separate(c, buf, c->produced) < 0) {
            pw_stream_queue_buffer(c->stream, pb);
            return;
        }
    } else {
        if (d->data == NULL || c->frame_bytes == 0 || d->maxsize < c->offset + c->frame_bytes) {
            pw_stream_queue_buffer(c->stream, pb);
            return;
        }
        fill(c, d->data, c->produced);
        d->chunk->offset = (uint32_t)c->offset;
        d->chunk->size = c->frame_bytes;
        d->chunk->stride = (int32_t)c->stride;
        d->chunk->flags = 0;
    }
    struct spa_meta_header *h = spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof(*h));
    if (h != NULL) {
        h->pts = now_ns();
        h->flags = 0;
        h->seq = c->produced;
        h->dts_offset = 0;
    }
    pw_stream_queue_buffer(c->stream, pb);
    c->produced++;
    if (c->frames_wanted != 0 && c->produced >= c->frames_wanted) pw_main_loop_quit(c->loop);
}

static void on_timer(void *data, uint64_t expirations) {
    (void)expirations;
    struct camera *c = data;
    if (pw_stream_get_state(c->stream, NULL) == PW_STREAM_STATE_STREAMING) pw_stream_trigger_process(c->stream);
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    (void)old;
    struct camera *c = data;
    if (state == PW_STREAM_STATE_ERROR) {
        fprintf(stderr, "pw-test-camera: stream error: %s\n", error ? error : "?");
        pw_main_loop_quit(c->loop);
    }
    if (!c->ready && (state == PW_STREAM_STATE_PAUSED || state == PW_STREAM_STATE_STREAMING)) {
        c->ready = 1;
        printf("pw-test-camera: %s ready (node %u)\n", c->name, pw_stream_get_node_id(c->stream));
        fflush(stdout);
    }
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct camera *c = data;
    if (id != SPA_PARAM_Format || param == NULL) return;
    struct spa_video_info_raw info;
    memset(&info, 0, sizeof info);
    if (spa_format_video_raw_parse(param, &info) < 0) return;
    c->format = info.format;
    c->width = info.size.width;
    c->height = info.size.height;
    uint32_t w = c->width, h = c->height, cw = (w + 1) / 2, ch = (h + 1) / 2;
    switch (c->format) {
    case SPA_VIDEO_FORMAT_YUY2:
        c->n_planes = 1;
        c->plane_bytes[0] = cw * 4;
        break;
    case SPA_VIDEO_FORMAT_I420:
    case SPA_VIDEO_FORMAT_NV12:
        c->n_planes = c->format == SPA_VIDEO_FORMAT_I420 ? 3 : 2;
        c->plane_bytes[0] = w;
        break;
    default: return;
    }
    c->stride = c->plane_bytes[0] + (uint32_t)c->pad;
    c->stride += c->stride & 1; // even, so that a chroma row of s/2 is whole
    c->plane_rows[0] = h;
    c->plane_stride[0] = c->stride;
    c->plane_offset[0] = 0;
    if (c->format == SPA_VIDEO_FORMAT_I420) {
        for (int p = 1; p < 3; p++) {
            c->plane_rows[p] = ch;
            c->plane_bytes[p] = cw;
            c->plane_stride[p] = c->stride / 2;
        }
        c->plane_offset[1] = c->stride * h;
        c->plane_offset[2] = c->plane_offset[1] + (c->stride / 2) * ch;
        c->frame_bytes = c->plane_offset[2] + (c->stride / 2) * ch;
    } else if (c->format == SPA_VIDEO_FORMAT_NV12) {
        c->plane_rows[1] = ch;
        c->plane_bytes[1] = cw * 2;
        c->plane_stride[1] = c->stride;
        c->plane_offset[1] = c->stride * h;
        c->frame_bytes = c->plane_offset[1] + c->stride * ch;
    } else {
        c->frame_bytes = c->stride * h;
    }

    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[2];
    int separate = c->separate_planes && c->n_planes > 1;
    params[0] = spa_pod_builder_add_object(
        &b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers, SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 2, 8),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(separate ? (int32_t)c->n_planes : 1), SPA_PARAM_BUFFERS_size,
        SPA_POD_Int((int32_t)(c->offset + (separate ? c->stride * c->height : c->frame_bytes))),
        SPA_PARAM_BUFFERS_stride, SPA_POD_Int((int32_t)c->stride), SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int(1 << SPA_DATA_MemFd));
    params[1] = spa_pod_builder_add_object(
        &b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta, SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header), SPA_PARAM_META_size,
        SPA_POD_Int(sizeof(struct spa_meta_header)));
    pw_stream_update_params(c->stream, params, 2);
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
};

static void on_signal(void *data, int signal_number) {
    (void)signal_number;
    struct camera *c = data;
    pw_main_loop_quit(c->loop);
}

static int number(const char *text, unsigned long max, unsigned long *out) {
    if (text == NULL || *text == '\0') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || v > max) return -1;
    *out = v;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: pw-test-camera [--name NODE_NAME] [--description TEXT] [--frames N] [--fps 1-120] [--pad 0-4096] [--offset 0-4096] [--separate-planes]\n");
}

int main(int argc, char **argv) {
    struct camera c;
    memset(&c, 0, sizeof c);
    c.name = "pw-test-camera";
    c.fps = 30;
    const char *description = "Test camera (pw-test-camera)";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--name") == 0 && v) c.name = v;
        else if (strcmp(a, "--description") == 0 && v) description = v;
        else if (strcmp(a, "--frames") == 0) bad = number(v, ULONG_MAX / 2, &c.frames_wanted);
        else if (strcmp(a, "--fps") == 0) bad = number(v, 120, &c.fps) || c.fps == 0;
        else if (strcmp(a, "--pad") == 0) bad = number(v, 4096, &c.pad);
        else if (strcmp(a, "--offset") == 0) bad = number(v, 4096, &c.offset);
        else if (strcmp(a, "--separate-planes") == 0) {
            c.separate_planes = 1;
            continue;
        }
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "pw-test-camera: unknown option or missing value: %s\n", a);
            usage();
            return 2;
        }
        if (bad) {
            fprintf(stderr, "pw-test-camera: bad value for %s: %s\n", a, v ? v : "(none)");
            usage();
            return 2;
        }
        i++;
    }

    pw_init(&argc, &argv);
    c.loop = pw_main_loop_new(NULL);
    if (c.loop == NULL) {
        fprintf(stderr, "pw-test-camera: no main loop\n");
        return 1;
    }
    struct pw_loop *loop = pw_main_loop_get_loop(c.loop);
    pw_loop_add_signal(loop, SIGINT, on_signal, &c);
    pw_loop_add_signal(loop, SIGTERM, on_signal, &c);

    c.stream = pw_stream_new_simple(
        loop, c.name,
        pw_properties_new(
            PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Camera", PW_KEY_MEDIA_CLASS, "Video/Source",
            PW_KEY_NODE_NAME, c.name, PW_KEY_NODE_DESCRIPTION, description, NULL),
        &stream_events, &c);
    if (c.stream == NULL) {
        fprintf(stderr, "pw-test-camera: could not make a stream (is PipeWire running?)\n");
        return 1;
    }

    uint8_t buffer[2048];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    struct spa_rectangle big = SPA_RECTANGLE(640, 480), small = SPA_RECTANGLE(320, 240);
    struct spa_fraction rate = SPA_FRACTION((uint32_t)c.fps, 1);
    const struct spa_pod *params[2];
    params[0] = spa_pod_builder_add_object(
        &b, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat, SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video), SPA_FORMAT_mediaSubtype,
        SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw), SPA_FORMAT_VIDEO_format, SPA_POD_Id(SPA_VIDEO_FORMAT_YUY2), SPA_FORMAT_VIDEO_size,
        SPA_POD_CHOICE_ENUM_Rectangle(3, &big, &big, &small), SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&rate));
    params[1] = spa_pod_builder_add_object(
        &b, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat, SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video), SPA_FORMAT_mediaSubtype,
        SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw), SPA_FORMAT_VIDEO_format,
        SPA_POD_CHOICE_ENUM_Id(3, SPA_VIDEO_FORMAT_I420, SPA_VIDEO_FORMAT_I420, SPA_VIDEO_FORMAT_NV12), SPA_FORMAT_VIDEO_size,
        SPA_POD_CHOICE_ENUM_Rectangle(3, &big, &big, &small), SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&rate));

    if (pw_stream_connect(c.stream, PW_DIRECTION_OUTPUT, PW_ID_ANY, PW_STREAM_FLAG_DRIVER | PW_STREAM_FLAG_MAP_BUFFERS, params, 2) < 0) {
        fprintf(stderr, "pw-test-camera: could not connect the stream\n");
        return 1;
    }
    c.timer = pw_loop_add_timer(loop, on_timer, &c);
    struct timespec interval = {.tv_sec = 0, .tv_nsec = (long)(1000000000UL / c.fps)};
    if (c.fps == 1) interval = (struct timespec){.tv_sec = 1, .tv_nsec = 0};
    pw_loop_update_timer(loop, c.timer, &interval, &interval, false);

    pw_main_loop_run(c.loop);
    printf("pw-test-camera: %lu frames\n", c.produced);
    fflush(stdout);
    pw_stream_destroy(c.stream);
    pw_main_loop_destroy(c.loop);
    pw_deinit();
    return 0;
}
