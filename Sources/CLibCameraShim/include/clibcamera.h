#ifndef CLIBCAMERA_H
#define CLIBCAMERA_H
/* libcamera's C++ API behind a small C API of plain structs: the one place that knows libcamera's classes, so a newer
   libcamera (built and tried against Debian 12's 0.0.3) needs changes here only. LibCameraCapture's Swift code is
   the only user. Every function reports failure by its return value and an error text; nothing is printed
   (libcamera's own log is switched off unless LIBCAMERA_LOG_FILE or LIBCAMERA_LOG_LEVELS is set).

   One camera manager serves the process (libcamera allows one at a time): started by the first call that needs it
   and kept until the process ends. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* properties::Location. */
enum { LCS_LOCATION_UNKNOWN = -1, LCS_LOCATION_FRONT = 0, LCS_LOCATION_BACK = 1, LCS_LOCATION_EXTERNAL = 2 };

/* A camera as the camera manager lists it. Strings are never NULL (empty when absent). */
typedef struct lcs_camera {
    char *id;       /* Camera::id(), stable across boots for the same hardware */
    char *model;    /* properties::Model, empty when absent */
    int32_t location; /* LCS_LOCATION_*, properties::Location */
    int32_t rotation; /* properties::Rotation in degrees, -1 when absent */
} lcs_camera;

typedef struct lcs_listing {
    lcs_camera *cameras;
    size_t n_cameras;
} lcs_listing;

/* Whether the camera manager may be started at all: false when no media device (/dev/media*) exists, the fast
   "no camera here" check that loads nothing. */
int lcs_may_have_cameras(void);

/* Every camera now. Returns 0, or a negative errno with `error` filled. */
int lcs_list(lcs_listing *out, char *error, size_t error_len);
void lcs_listing_free(lcs_listing *listing);

/* One pixel format of a stream role's StreamFormats: its sizes (a list, or a range when the list is empty). */
typedef struct lcs_format {
    uint32_t drm_fourcc; /* PixelFormat::fourcc() (DRM_FORMAT_*) */
    uint64_t modifier;   /* PixelFormat::modifier(), 0 for linear */
    uint32_t *widths;    /* n_sizes sizes */
    uint32_t *heights;
    size_t n_sizes;
    uint32_t min_width, min_height, max_width, max_height, step_width, step_height; /* the range */
} lcs_format;

/* The stream roles. */
enum { LCS_ROLE_VIEWFINDER = 0, LCS_ROLE_VIDEO = 1, LCS_ROLE_STILL = 2, LCS_ROLE_RAW = 3 };

typedef struct lcs_formats {
    lcs_format *formats;
    size_t n_formats;
    /* controls::FrameDurationLimits (microseconds per frame: min is the fastest), when the camera has it. */
    int has_frame_durations;
    int64_t min_frame_duration_us, max_frame_duration_us;
    /* The role's default configuration. */
    uint32_t default_fourcc, default_width, default_height;
} lcs_formats;

/* The stream formats of the camera `id` for `role`. Returns 0, or a negative errno (-ENODEV: no such camera). */
int lcs_formats_of(const char *id, int role, lcs_formats *out, char *error, size_t error_len);
void lcs_formats_free(lcs_formats *formats);

/* A configuration as libcamera validated it: the size it adjusts to, the stride and frame size of its buffers. */
typedef struct lcs_config {
    uint32_t drm_fourcc, width, height, stride, frame_size;
    int adjusted; /* CameraConfiguration::validate() said Adjusted */
    uint32_t buffers; /* the buffers (requests) a stream has: set by lcs_stream_open only */
} lcs_config;

/* Validates `drm_fourcc` at `width`x`height` for `role` without acquiring the camera; `out` holds what libcamera
   would apply. Returns 0, or a negative errno (-EINVAL: the configuration is invalid). */
int lcs_validate(const char *id, int role, uint32_t drm_fourcc, uint32_t width, uint32_t height, lcs_config *out, char *error,
    size_t error_len);

/* One plane of a completed buffer, mapped. */
typedef struct lcs_plane {
    const uint8_t *data;
    uint32_t length;    /* bytes of the plane in the buffer */
    uint32_t bytes_used; /* FrameMetadata's bytesused for the plane */
} lcs_plane;

#define LCS_MAX_PLANES 3
/* A completed request: its buffer's planes and metadata. Valid until lcs_stream_requeue. */
typedef struct lcs_frame {
    uint32_t n_planes;
    lcs_plane planes[LCS_MAX_PLANES];
    uint64_t sequence;  /* FrameMetadata::sequence */
    int64_t timestamp_ns; /* controls::SensorTimestamp, else FrameMetadata::timestamp (CLOCK_MONOTONIC ns) */
    int status;         /* 0: FrameSuccess; 1: FrameError; 2: FrameCancelled */
    uint32_t slot;      /* which request: give it back with lcs_stream_requeue */
} lcs_frame;

/* Stream status. */
enum { LCS_STATUS_RUNNING = 0, LCS_STATUS_DISCONNECTED = 1, LCS_STATUS_STOPPED = 2 };

typedef struct lcs_stream lcs_stream;

/* Acquires the camera, configures one stream of `role` (`drm_fourcc`, `width`x`height`, `buffers` buffers; what
   libcamera adjusts is applied and reported in `applied`), allocates and maps the buffers, starts it (with
   FrameDurationLimits of `frame_duration_us` when nonzero and the camera has it) and queues every request.
   Returns NULL with `error` filled and `*error_code` set (a negative errno) on failure. */
lcs_stream *lcs_stream_open(const char *id, int role, uint32_t drm_fourcc, uint32_t width, uint32_t height, uint32_t buffers,
    int64_t frame_duration_us, lcs_config *applied, int *error_code, char *error, size_t error_len);
/* Waits at most `timeout_ms` for a completed request. Returns 1 with `frame` filled (give it back with
   lcs_stream_requeue), 0 on timeout or wake, or a negative status (-LCS_STATUS_DISCONNECTED: the camera was
   removed). On the thread that reads frames. */
int lcs_stream_next(lcs_stream *stream, int timeout_ms, lcs_frame *frame);
/* Queues the request of `slot` again (with the controls set since, if any). */
int lcs_stream_requeue(lcs_stream *stream, uint32_t slot);
/* Wakes a lcs_stream_next in progress; from any thread. */
void lcs_stream_wake(lcs_stream *stream);
/* Stops the camera, releases it and frees everything but the buffers' mappings while a reference to them is held
   (lcs_stream_mappings). */
void lcs_stream_close(lcs_stream *stream);

/* The stream's buffer mappings, shared with frames that are read in place: lcs_stream_mappings takes a reference
   (NULL once the stream is closing), lcs_mappings_release drops one; the memory is unmapped when the stream is
   closed and the last reference is gone. Any thread. */
typedef struct lcs_mappings lcs_mappings;
lcs_mappings *lcs_stream_mappings(lcs_stream *stream);
void lcs_mappings_release(lcs_mappings *mappings);

/* Control types (ControlType). */
enum { LCS_CONTROL_BOOL = 1, LCS_CONTROL_BYTE = 2, LCS_CONTROL_INT32 = 3, LCS_CONTROL_INT64 = 4, LCS_CONTROL_FLOAT = 5, LCS_CONTROL_OTHER = 0 };

/* A scalar control of the camera (ControlInfoMap): arrays, strings, rectangles and sizes are left out. */
typedef struct lcs_control {
    uint32_t id;
    char *name;
    int type; /* LCS_CONTROL_* */
    double minimum, maximum, default_value;
    int has_default;
    int has_value; /* `value` is the last value set through this process (libcamera reads controls only per frame) */
    double value;
} lcs_control;

typedef struct lcs_controls {
    lcs_control *controls;
    size_t n_controls;
} lcs_controls;

/* The camera's scalar controls. Returns 0 or a negative errno. */
int lcs_controls_of(const char *id, lcs_controls *out, char *error, size_t error_len);
void lcs_controls_free(lcs_controls *controls);
/* Sets control `control_id` to `value` (converted to the control's type): on the running stream's next requests
   when the camera streams in this process, else remembered for its next start. Returns 0 or a negative errno. */
int lcs_control_set(const char *id, uint32_t control_id, double value, char *error, size_t error_len);

#ifdef __cplusplus
}
#endif
#endif
