#ifndef CPIPEWIRE_H
#define CPIPEWIRE_H
/* What Swift cannot call in libpipewire-0.3 (varargs property lists, SPA pod building and parsing macros, spa_hook
   listeners), behind a small API of plain structs. No PipeWire header is visible from here: PipeWireCapture's Swift
   wrappers are the only users. Every function reports failure by its return value and an error text; nothing is
   printed (PipeWire's own log is silenced unless PIPEWIRE_DEBUG is set). */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The media subtype of a format entry. */
enum { CPW_SUBTYPE_OTHER = 0, CPW_SUBTYPE_RAW = 1, CPW_SUBTYPE_MJPG = 2, CPW_SUBTYPE_H264 = 3 };
/* How a format entry gives its sizes: one size (width, height), or a range (width..max_width, height..max_height,
   by step_width/step_height, 1 for any). */
enum { CPW_SIZE_FIXED = 0, CPW_SIZE_RANGE = 1 };
/* How it gives its rates: none given, a list (rate_num/rate_den[0..n_rates)), or a range ([0] min, [1] max). */
enum { CPW_RATES_NONE = 0, CPW_RATES_LIST = 1, CPW_RATES_RANGE = 2 };
#define CPW_MAX_RATES 16

/* One entry of a node's EnumFormat params, flattened: one format and one size (or size range) each. */
typedef struct cpw_format {
    uint32_t subtype;
    /* A V4L2 fourcc ('YUYV', 'YU12', 'NV12', 'MJPG', …) for the SPA format, 0 for one we do not map. */
    uint32_t fourcc;
    /* The SPA video format (enum spa_video_format) of a raw entry, 0 otherwise. */
    uint32_t spa_format;
    uint32_t size_kind;
    uint32_t width, height, max_width, max_height, step_width, step_height;
    uint32_t rate_kind;
    uint32_t n_rates;
    uint32_t rate_num[CPW_MAX_RATES];
    uint32_t rate_den[CPW_MAX_RATES];
} cpw_format;

/* A node of media.class Video/Source as the registry announced it. Strings are NULL when the property is absent. */
typedef struct cpw_node {
    uint32_t id;
    char *name;        /* node.name */
    char *description; /* node.description */
    char *nick;        /* node.nick */
    char *serial;      /* object.serial */
    char *device_serial; /* device.serial, api.v4l2.cap.bus_info or api.libcamera.location, where given */
    char *media_role;  /* media.role */
    char *device_api;  /* device.api (v4l2, libcamera), absent for a stream */
    char *object_path; /* object.path */
    char *device_id;   /* device.id: the device object a monitor made the node for (absent for a client's stream) */
    cpw_format *formats;
    size_t n_formats;
    int formats_error; /* nonzero when the node's formats could not be read */
} cpw_node;

typedef struct cpw_listing {
    cpw_node *nodes;
    size_t n_nodes;
} cpw_listing;

/* The `struct spa_video_format` ↔ fourcc mapping (0 when there is none). */
uint32_t cpw_fourcc_of_spa_format(uint32_t spa_format);
uint32_t cpw_spa_format_of_fourcc(uint32_t fourcc);
/* The subtype of a fourcc: MJPG and H264 are their own subtypes, every other mapped fourcc is raw. */
uint32_t cpw_subtype_of_fourcc(uint32_t fourcc);

/* Connects to `remote` (an absolute socket path, or NULL for PipeWire's default), lists the nodes of media.class
   Video/Source and, when `formats_of` is given, reads the EnumFormat params of the node of that node.name ("*" for
   every node). Waits for the server at most `timeout_ms`. Returns 0, or a negative errno with `error` filled. */
int cpw_list(const char *remote, const char *formats_of, int timeout_ms, cpw_listing *out, char *error, size_t error_len);
/* The same on `fd`, a connected PipeWire socket (the camera portal's OpenPipeWireRemote), which the call takes and
   closes: one descriptor per call. */
int cpw_list_fd(int fd, const char *formats_of, int timeout_ms, cpw_listing *out, char *error, size_t error_len);
void cpw_listing_free(cpw_listing *listing);

/* One data block of a buffer, as the producer's chunk describes it. */
typedef struct cpw_plane {
    const uint8_t *data; /* the mapped memory, NULL when it could not be mapped */
    uint32_t maxsize;    /* bytes mapped */
    uint32_t offset;     /* chunk->offset (to be taken modulo maxsize) */
    uint32_t size;       /* chunk->size */
    int32_t stride;      /* chunk->stride */
    uint32_t corrupted;  /* chunk->flags has SPA_CHUNK_FLAG_CORRUPTED */
} cpw_plane;

#define CPW_MAX_PLANES 4
typedef struct cpw_buffer {
    uint32_t n_planes;
    cpw_plane planes[CPW_MAX_PLANES];
    /* The buffer's slot when its memory is mapped by us (every data block a MemFd or DmaBuf, mapped when PipeWire
       added the buffer): such a buffer may be kept by the callback and handed back later with cpw_stream_requeue,
       and its planes' data stay readable while a reference to cpw_stream_mappings is held. -1 otherwise (the data
       are PipeWire's mapping, readable during the callback only). */
    int32_t slot;
    int has_header;  /* a spa_meta_header came with the buffer */
    int64_t pts;     /* its pts (ns), when has_header */
    uint64_t seq;    /* its seq, when has_header */
    uint32_t header_flags;
} cpw_buffer;

/* The format both ends agreed on (SPA_PARAM_Format), and the buffers PipeWire added for it (their slots are
   0..<n_buffers). */
typedef struct cpw_applied {
    uint32_t subtype, fourcc, spa_format, width, height, rate_num, rate_den;
    uint32_t n_buffers;
} cpw_applied;

/* What to ask the node for: one format, one size, one rate. */
typedef struct cpw_request {
    uint32_t subtype, spa_format, width, height, rate_num, rate_den;
} cpw_request;

/* Stream status: running, or why it ended. */
enum {
    CPW_STATUS_RUNNING = 0,
    CPW_STATUS_NODE_GONE = 1,    /* the node left the registry */
    CPW_STATUS_ERROR = 2,        /* the stream went to its error state (the text says why) */
    CPW_STATUS_DISCONNECTED = 3, /* the connection to PipeWire broke */
    CPW_STATUS_UNLINKED = 4      /* it was streaming, then paused or unconnected (the link went away) */
};

/* Called with each buffer; returns nonzero to keep a buffer with a slot (it is not given back to PipeWire until
   cpw_stream_requeue), 0 to give it back when the callback returns. */
typedef int (*cpw_buffer_callback)(void *context, const cpw_buffer *buffer);

typedef struct cpw_stream cpw_stream;
/* Our mappings of a stream's buffers, counted: the stream holds one reference until it is closed, and each
   cpw_stream_mappings another. Unmapped when the last is released, so memory read in place outlives the stream. */
typedef struct cpw_mappings cpw_mappings;

/* Connects a capture stream to the node named `target` and waits (iterating the loop on the calling thread) until it
   streams the requested format, at most `timeout_ms`. Each buffer is given to `callback` on the thread that iterates
   the loop, and goes back to PipeWire when the callback returns. Returns NULL with `error` filled and `*error_code`
   set (a negative errno, or -ETIMEDOUT when the node never streamed) on failure. */
cpw_stream *cpw_stream_open(
    const char *remote, const char *target, const cpw_request *request, cpw_buffer_callback callback, void *context, int timeout_ms,
    cpw_applied *applied, int *error_code, char *error, size_t error_len);
/* The same on `fd`, a connected PipeWire socket (the camera portal's), which the stream takes: closed with it, or
   at once when the open fails. */
cpw_stream *cpw_stream_open_fd(
    int fd, const char *target, const cpw_request *request, cpw_buffer_callback callback, void *context, int timeout_ms,
    cpw_applied *applied, int *error_code, char *error, size_t error_len);
/* Runs the loop for at most `timeout_ms` (returns earlier when woken or after an event). Returns the status. */
int cpw_stream_iterate(cpw_stream *stream, int timeout_ms);
/* Wakes a cpw_stream_iterate in progress; from any thread. */
void cpw_stream_wake(cpw_stream *stream);
/* The status and, when it is not running, what happened. */
int cpw_stream_status(cpw_stream *stream, char *error, size_t error_len);
/* Disconnects and frees everything; on the thread that iterates (or before any thread does). */
void cpw_stream_close(cpw_stream *stream);
/* Gives a kept buffer back to PipeWire (on the thread that iterates). Returns 0, or -ENOENT when the slot holds no
   kept buffer (PipeWire removed it meanwhile: nothing to give back). */
int cpw_stream_requeue(cpw_stream *stream, int32_t slot);
/* A reference to the stream's mappings (NULL when it has none); from any thread. */
cpw_mappings *cpw_stream_mappings(cpw_stream *stream);
/* Releases a reference; from any thread. */
void cpw_mappings_release(cpw_mappings *mappings);

/* A control a node offers: one of its SPA_PARAM_PropInfo params (PipeWire's V4L2 nodes make one of each V4L2 control
   of an integer, boolean or menu type), with the V4L2 control id it stands for. PipeWire 0.3.65 reports no current
   values: only the range and the default. */
enum { CPW_CONTROL_INTEGER = 0, CPW_CONTROL_BOOLEAN = 1, CPW_CONTROL_MENU = 2 };
#define CPW_MAX_MENU 64
typedef struct cpw_control {
    uint32_t prop_id; /* the SPA property id (SPA_PROP_brightness …, SPA_PROP_START_CUSTOM + the V4L2 id) */
    uint32_t v4l2_id; /* the V4L2 control id */
    char *name;       /* its name (the driver's label) */
    uint32_t kind;
    int32_t minimum, maximum, step, default_value;
    uint32_t n_items; /* a menu's entries: value and label */
    int32_t item_value[CPW_MAX_MENU];
    char *item_label[CPW_MAX_MENU];
} cpw_control;

/* The controls of the node named `node_name` (PropInfo params that stand for V4L2 controls), on `remote` or, when
   `fd` is not negative, on that connected socket (taken and closed). Returns 0, or a negative errno with `error`
   filled (-ENOENT: no such node). */
int cpw_controls(
    const char *remote, int fd, const char *node_name, int timeout_ms, cpw_control **out, size_t *n_out, char *error, size_t error_len);
void cpw_controls_free(cpw_control *controls, size_t n);
/* Sets one control of the node (a Props param with that property: the V4L2 node applies it with VIDIOC_S_CTRL) and
   waits until PipeWire has handled it. Returns 0, or a negative errno with `error` filled (what PipeWire answered). */
int cpw_set_control(
    const char *remote, int fd, const char *node_name, uint32_t prop_id, uint32_t kind, int32_t value, int timeout_ms, char *error,
    size_t error_len);

/* Whether PipeWire's socket exists for `remote` (or the default), without loading PipeWire: the quick "is it running"
   check. Writes the path it looked for into `path`. */
int cpw_socket_exists(const char *remote, char *path, size_t path_len);

#ifdef __cplusplus
}
#endif
#endif
