// The C API of include/clibcamera.h over libcamera's C++ API (written against Debian 12's libcamera 0.0.3). Every
// libcamera call of the package is in this file.
#include "clibcamera.h"

#include <libcamera/libcamera.h>
#include <libcamera/logging.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace libcamera;

namespace {

void set_error(char *error, size_t len, const std::string &text) {
    if (!error || len == 0) return;
    std::snprintf(error, len, "%s", text.c_str());
}

char *copy_string(const std::string &s) {
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (p) std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
}

// The process's camera manager (libcamera allows one at a time) and what this process set on each camera.
std::mutex g_lock;
CameraManager *g_manager = nullptr;
int g_manager_error = 0;
std::map<std::string, lcs_stream *> g_streams;             // the running streams, by camera id
std::map<std::string, std::map<unsigned int, double>> g_values; // controls set, by camera id

// Starts the manager once (under g_lock). libcamera logs to stderr by default: switched off here unless the user
// asked for its log with LIBCAMERA_LOG_FILE or LIBCAMERA_LOG_LEVELS (then theirs applies).
CameraManager *manager(char *error, size_t len) {
    if (g_manager) return g_manager;
    if (g_manager_error) {
        set_error(error, len, std::string("libcamera's camera manager did not start: ") + std::strerror(-g_manager_error));
        return nullptr;
    }
    if (!std::getenv("LIBCAMERA_LOG_FILE") && !std::getenv("LIBCAMERA_LOG_LEVELS")) {
        // An isolated IPA runs in a child process that logs by the environment only: fatal messages at most.
        setenv("LIBCAMERA_LOG_LEVELS", "*:FATAL", 0);
        logSetTarget(LoggingTargetNone);
    }
    auto *cm = new CameraManager();
    int r = cm->start();
    if (r < 0) {
        delete cm;
        g_manager_error = r;
        set_error(error, len, std::string("libcamera's camera manager did not start: ") + std::strerror(-r));
        return nullptr;
    }
    g_manager = cm;
    return cm;
}

int role_of(int role, StreamRole *out) {
    switch (role) {
    case LCS_ROLE_VIEWFINDER: *out = StreamRole::Viewfinder; return 0;
    case LCS_ROLE_VIDEO: *out = StreamRole::VideoRecording; return 0;
    case LCS_ROLE_STILL: *out = StreamRole::StillCapture; return 0;
    case LCS_ROLE_RAW: *out = StreamRole::Raw; return 0;
    default: return -EINVAL;
    }
}

std::shared_ptr<Camera> camera_of(const char *id, char *error, size_t len, int *code) {
    CameraManager *cm = manager(error, len);
    if (!cm) {
        *code = -ENODEV;
        return nullptr;
    }
    std::shared_ptr<Camera> cam = id ? cm->get(id) : nullptr;
    if (!cam) {
        *code = -ENODEV;
        set_error(error, len, std::string("libcamera has no camera ") + (id ? id : "(null)"));
    }
    return cam;
}

bool number_of(const ControlValue &v, double *out) {
    if (v.isNone() || v.isArray()) return false;
    switch (v.type()) {
    case ControlTypeBool: *out = v.get<bool>() ? 1 : 0; return true;
    case ControlTypeByte: *out = v.get<uint8_t>(); return true;
    case ControlTypeInteger32: *out = v.get<int32_t>(); return true;
    case ControlTypeInteger64: *out = static_cast<double>(v.get<int64_t>()); return true;
    case ControlTypeFloat: *out = v.get<float>(); return true;
    default: return false;
    }
}

int type_of(ControlType t) {
    switch (t) {
    case ControlTypeBool: return LCS_CONTROL_BOOL;
    case ControlTypeByte: return LCS_CONTROL_BYTE;
    case ControlTypeInteger32: return LCS_CONTROL_INT32;
    case ControlTypeInteger64: return LCS_CONTROL_INT64;
    case ControlTypeFloat: return LCS_CONTROL_FLOAT;
    default: return LCS_CONTROL_OTHER;
    }
}

// A number as a value of the control's type; false when the type is not scalar or the number does not fit.
bool value_of(const ControlId *id, double x, ControlValue *out) {
    switch (id->type()) {
    case ControlTypeBool: *out = ControlValue(x != 0); return true;
    case ControlTypeByte:
        if (!(x >= 0 && x <= 255)) return false;
        *out = ControlValue(static_cast<uint8_t>(x));
        return true;
    case ControlTypeInteger32:
        if (!(x >= -2147483648.0 && x <= 2147483647.0)) return false;
        *out = ControlValue(static_cast<int32_t>(x));
        return true;
    case ControlTypeInteger64:
        if (!(x >= -9.2e18 && x <= 9.2e18)) return false;
        *out = ControlValue(static_cast<int64_t>(x));
        return true;
    case ControlTypeFloat:
        if (!(x >= -3.4e38 && x <= 3.4e38)) return false;
        *out = ControlValue(static_cast<float>(x));
        return true;
    default: return false;
    }
}

// The remembered controls of a camera as a ControlList (under g_lock).
void remembered_controls(Camera *cam, ControlList *list) {
    auto it = g_values.find(cam->id());
    if (it == g_values.end()) return;
    const ControlInfoMap &infos = cam->controls();
    for (auto &[cid, x] : it->second) {
        auto info = infos.find(cid);
        if (info == infos.end()) continue;
        ControlValue v;
        if (value_of(info->first, x, &v)) list->set(cid, v);
    }
}

// Whether a device node this process holds open (/dev/video*, /dev/media*, /dev/v4l-subdev*) was removed: its fd's
// link then ends in " (deleted)". libcamera 0.0.3 learns of a removed camera only from udev's events; without them
// (no udevd) its requests never complete and Camera::stop() aborts the process on an assertion.
bool device_node_vanished() {
    DIR *dir = opendir("/proc/self/fd");
    if (!dir) return false;
    bool gone = false;
    char path[64], target[256];
    while (struct dirent *e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        std::snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0) continue;
        target[n] = 0;
        std::string t(target);
        bool node = t.rfind("/dev/video", 0) == 0 || t.rfind("/dev/media", 0) == 0 || t.rfind("/dev/v4l-subdev", 0) == 0;
        if (node && t.size() > 10 && t.compare(t.size() - 10, 10, " (deleted)") == 0) {
            gone = true;
            break;
        }
    }
    closedir(dir);
    return gone;
}

std::vector<lcs_stream *> g_lost; // streams of removed cameras: kept, never stopped (see device_node_vanished)

} // namespace

// Buffer mappings, counted: the stream holds one reference, every frame storage that lends a buffer one more.
struct lcs_mappings {
    struct Mapping {
        void *address;
        size_t length;
    };
    std::atomic<long> references{1};
    std::vector<Mapping> maps;
};

struct lcs_stream {
    std::shared_ptr<Camera> camera;
    std::unique_ptr<CameraConfiguration> config;
    std::unique_ptr<FrameBufferAllocator> allocator;
    Stream *stream = nullptr;
    std::vector<std::unique_ptr<Request>> requests;
    lcs_mappings *mappings = new lcs_mappings();
    // Per request: each plane's mapped address.
    std::vector<std::vector<const uint8_t *>> planes;

    std::mutex lock;
    std::condition_variable changed;
    std::vector<uint32_t> completed; // a ring of request slots, capacity requests.size()
    size_t head = 0, count = 0;
    bool disconnected = false, woken = false, stopping = false, gone = false;
    std::chrono::steady_clock::time_point last_completion = std::chrono::steady_clock::now();
    ControlList pending;
    bool has_pending = false;

    void requestDone(Request *request) {
        std::lock_guard<std::mutex> guard(lock);
        if (stopping || request->status() == Request::RequestCancelled) return;
        uint64_t slot = request->cookie();
        if (slot >= requests.size() || count >= completed.size()) return;
        completed[(head + count) % completed.size()] = static_cast<uint32_t>(slot);
        count++;
        last_completion = std::chrono::steady_clock::now();
        changed.notify_all();
    }
    void cameraGone() {
        std::lock_guard<std::mutex> guard(lock);
        // A disconnected camera refuses stop(): its stream is left as it is when closed (see lcs_stream_close).
        disconnected = gone = true;
        changed.notify_all();
    }
};

extern "C" {

int lcs_may_have_cameras(void) {
    DIR *dir = opendir("/dev");
    if (!dir) return 0;
    int found = 0;
    while (struct dirent *e = readdir(dir)) {
        if (std::strncmp(e->d_name, "media", 5) == 0) {
            found = 1;
            break;
        }
    }
    closedir(dir);
    return found;
}

int lcs_list(lcs_listing *out, char *error, size_t error_len) {
    out->cameras = nullptr;
    out->n_cameras = 0;
    std::lock_guard<std::mutex> guard(g_lock);
    CameraManager *cm = manager(error, error_len);
    if (!cm) return -ENODEV;
    auto cameras = cm->cameras();
    if (cameras.empty()) return 0;
    out->cameras = static_cast<lcs_camera *>(std::calloc(cameras.size(), sizeof(lcs_camera)));
    if (!out->cameras) return -ENOMEM;
    for (auto &cam : cameras) {
        lcs_camera &c = out->cameras[out->n_cameras++];
        const ControlList &p = cam->properties();
        c.id = copy_string(cam->id());
        auto model = p.get(properties::Model);
        c.model = copy_string(model ? *model : std::string());
        auto location = p.get(properties::Location);
        c.location = LCS_LOCATION_UNKNOWN;
        if (location) {
            switch (*location) {
            case properties::CameraLocationFront: c.location = LCS_LOCATION_FRONT; break;
            case properties::CameraLocationBack: c.location = LCS_LOCATION_BACK; break;
            case properties::CameraLocationExternal: c.location = LCS_LOCATION_EXTERNAL; break;
            default: break;
            }
        }
        auto rotation = p.get(properties::Rotation);
        c.rotation = rotation ? *rotation : -1;
    }
    return 0;
}

void lcs_listing_free(lcs_listing *listing) {
    for (size_t i = 0; i < listing->n_cameras; i++) {
        std::free(listing->cameras[i].id);
        std::free(listing->cameras[i].model);
    }
    std::free(listing->cameras);
    listing->cameras = nullptr;
    listing->n_cameras = 0;
}

int lcs_formats_of(const char *id, int role, lcs_formats *out, char *error, size_t error_len) {
    std::memset(out, 0, sizeof(*out));
    StreamRole r;
    if (role_of(role, &r) < 0) return -EINVAL;
    std::lock_guard<std::mutex> guard(g_lock);
    int code = 0;
    auto cam = camera_of(id, error, error_len, &code);
    if (!cam) return code;
    auto config = cam->generateConfiguration({ r });
    if (!config || config->size() != 1) {
        set_error(error, error_len, std::string("libcamera has no configuration for this role of ") + id);
        return -EINVAL;
    }
    const StreamConfiguration &cfg = config->at(0);
    out->default_fourcc = cfg.pixelFormat.fourcc();
    out->default_width = cfg.size.width;
    out->default_height = cfg.size.height;
    const StreamFormats &formats = cfg.formats();
    auto list = formats.pixelformats();
    out->formats = static_cast<lcs_format *>(std::calloc(list.size() ? list.size() : 1, sizeof(lcs_format)));
    if (!out->formats) return -ENOMEM;
    for (const PixelFormat &pf : list) {
        lcs_format &f = out->formats[out->n_formats++];
        f.drm_fourcc = pf.fourcc();
        f.modifier = pf.modifier();
        SizeRange range = formats.range(pf);
        f.min_width = range.min.width;
        f.min_height = range.min.height;
        f.max_width = range.max.width;
        f.max_height = range.max.height;
        f.step_width = range.hStep;
        f.step_height = range.vStep;
        auto sizes = formats.sizes(pf);
        // A range expanded by small steps is a long list: the range says the same.
        if (!sizes.empty() && sizes.size() <= 256) {
            f.widths = static_cast<uint32_t *>(std::calloc(sizes.size(), sizeof(uint32_t)));
            f.heights = static_cast<uint32_t *>(std::calloc(sizes.size(), sizeof(uint32_t)));
            if (f.widths && f.heights) {
                for (auto &s : sizes) {
                    f.widths[f.n_sizes] = s.width;
                    f.heights[f.n_sizes] = s.height;
                    f.n_sizes++;
                }
            }
        }
    }
    const ControlInfoMap &controls = cam->controls();
    auto limits = controls.find(&controls::FrameDurationLimits);
    if (limits != controls.end()) {
        double lo = 0, hi = 0;
        const ControlValue &mn = limits->second.min(), &mx = limits->second.max();
        bool ok = number_of(mn, &lo) && number_of(mx, &hi);
        if (!ok && mn.isArray() && mx.isArray() && mn.type() == ControlTypeInteger64 && mn.numElements() > 0 && mx.numElements() > 0) {
            lo = static_cast<double>(mn.get<Span<const int64_t>>()[0]);
            hi = static_cast<double>(mx.get<Span<const int64_t>>()[0]);
            ok = true;
        }
        if (ok && lo > 0 && hi >= lo && hi < 1e12) {
            out->has_frame_durations = 1;
            out->min_frame_duration_us = static_cast<int64_t>(lo);
            out->max_frame_duration_us = static_cast<int64_t>(hi);
        }
    }
    return 0;
}

void lcs_formats_free(lcs_formats *formats) {
    for (size_t i = 0; i < formats->n_formats; i++) {
        std::free(formats->formats[i].widths);
        std::free(formats->formats[i].heights);
    }
    std::free(formats->formats);
    std::memset(formats, 0, sizeof(*formats));
}

static int configure(Camera *cam, int role, uint32_t fourcc, uint32_t width, uint32_t height, uint32_t buffers,
    std::unique_ptr<CameraConfiguration> *result, lcs_config *out, char *error, size_t error_len) {
    StreamRole r;
    if (role_of(role, &r) < 0) return -EINVAL;
    auto config = cam->generateConfiguration({ r });
    if (!config || config->size() != 1) {
        set_error(error, error_len, "libcamera has no configuration for this role of " + cam->id());
        return -EINVAL;
    }
    StreamConfiguration &cfg = config->at(0);
    cfg.pixelFormat = PixelFormat(fourcc);
    cfg.size = Size(width, height);
    if (buffers) cfg.bufferCount = buffers;
    auto status = config->validate();
    if (status == CameraConfiguration::Invalid) {
        set_error(error, error_len, "libcamera refused the configuration " + cfg.toString() + " of " + cam->id());
        return -EINVAL;
    }
    out->drm_fourcc = cfg.pixelFormat.fourcc();
    out->width = cfg.size.width;
    out->height = cfg.size.height;
    out->stride = cfg.stride;
    out->frame_size = cfg.frameSize;
    out->adjusted = status == CameraConfiguration::Adjusted;
    if (result) *result = std::move(config);
    return 0;
}

int lcs_validate(const char *id, int role, uint32_t drm_fourcc, uint32_t width, uint32_t height, lcs_config *out, char *error,
    size_t error_len) {
    std::memset(out, 0, sizeof(*out));
    std::lock_guard<std::mutex> guard(g_lock);
    int code = 0;
    auto cam = camera_of(id, error, error_len, &code);
    if (!cam) return code;
    return configure(cam.get(), role, drm_fourcc, width, height, 0, nullptr, out, error, error_len);
}

static void release(lcs_stream *s, bool started) {
    if (s->camera) {
        if (started) s->camera->stop();
        s->camera->requestCompleted.disconnect(s);
        s->camera->disconnected.disconnect(s);
    }
    s->requests.clear();
    lcs_mappings_release(s->mappings); // unmapped now, or when the last frame reading a buffer in place goes
    s->mappings = nullptr;
    if (s->allocator && s->stream) s->allocator->free(s->stream);
    s->allocator.reset();
    if (s->camera) s->camera->release();
    s->config.reset();
    s->camera.reset();
    delete s;
}

lcs_stream *lcs_stream_open(const char *id, int role, uint32_t drm_fourcc, uint32_t width, uint32_t height, uint32_t buffers,
    int64_t frame_duration_us, lcs_config *applied, int *error_code, char *error, size_t error_len) {
    std::memset(applied, 0, sizeof(*applied));
    std::lock_guard<std::mutex> guard(g_lock);
    auto cam = camera_of(id, error, error_len, error_code);
    if (!cam) return nullptr;
    int r = cam->acquire();
    if (r < 0) {
        *error_code = r;
        set_error(error, error_len, "libcamera could not acquire " + cam->id() + ": " + std::strerror(-r) + " (another program uses it)");
        return nullptr;
    }
    auto *s = new lcs_stream();
    s->camera = cam;
    auto fail = [&](int code, const std::string &text, bool started) -> lcs_stream * {
        *error_code = code;
        set_error(error, error_len, text);
        release(s, started);
        return nullptr;
    };
    r = configure(cam.get(), role, drm_fourcc, width, height, buffers, &s->config, applied, error, error_len);
    if (r < 0) {
        *error_code = r;
        release(s, false);
        return nullptr;
    }
    r = cam->configure(s->config.get());
    if (r < 0) return fail(r, "libcamera could not configure " + cam->id() + ": " + std::strerror(-r), false);
    s->stream = s->config->at(0).stream();
    s->allocator = std::make_unique<FrameBufferAllocator>(cam);
    r = s->allocator->allocate(s->stream);
    if (r <= 0) return fail(r < 0 ? r : -ENOMEM, "libcamera could not allocate buffers for " + cam->id(), false);
    const auto &fbs = s->allocator->buffers(s->stream);
    for (size_t i = 0; i < fbs.size(); i++) {
        FrameBuffer *fb = fbs[i].get();
        // Planes may share one dmabuf at offsets: each descriptor is mapped once, as far as its last plane reaches.
        std::map<int, size_t> extent;
        for (const auto &p : fb->planes()) {
            if (p.offset == FrameBuffer::Plane::kInvalidOffset) return fail(-EINVAL, "a buffer plane without an offset", false);
            size_t end = static_cast<size_t>(p.offset) + p.length;
            if (extent[p.fd.get()] < end) extent[p.fd.get()] = end;
        }
        std::map<int, uint8_t *> bases;
        for (auto &[fd, length] : extent) {
            void *address = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
            if (address == MAP_FAILED) return fail(-errno, std::string("mmap of a libcamera buffer failed: ") + std::strerror(errno), false);
            s->mappings->maps.push_back({ address, length });
            bases[fd] = static_cast<uint8_t *>(address);
        }
        std::vector<const uint8_t *> planes;
        for (const auto &p : fb->planes()) planes.push_back(bases[p.fd.get()] + p.offset);
        s->planes.push_back(planes);
        auto request = cam->createRequest(i);
        if (!request) return fail(-ENOMEM, "libcamera could not create a request for " + cam->id(), false);
        r = request->addBuffer(s->stream, fb);
        if (r < 0) return fail(r, "libcamera could not add a buffer to a request", false);
        s->requests.push_back(std::move(request));
    }
    s->completed.assign(s->requests.size(), 0);
    applied->buffers = static_cast<uint32_t>(s->requests.size());
    cam->requestCompleted.connect(s, &lcs_stream::requestDone);
    cam->disconnected.connect(s, &lcs_stream::cameraGone);
    ControlList start(cam->controls());
    remembered_controls(cam.get(), &start);
    // Not every pipeline handler takes controls at start (vimc's does not): the first request carries them too.
    if (!s->requests.empty()) s->requests[0]->controls().merge(start);
    if (frame_duration_us > 0 && cam->controls().find(&controls::FrameDurationLimits) != cam->controls().end())
        start.set(controls::FrameDurationLimits, { frame_duration_us, frame_duration_us });
    r = cam->start(&start);
    if (r < 0) return fail(r, "libcamera could not start " + cam->id() + ": " + std::strerror(-r), false);
    for (auto &request : s->requests) {
        r = cam->queueRequest(request.get());
        if (r < 0) return fail(r, "libcamera could not queue a request of " + cam->id() + ": " + std::strerror(-r), true);
    }
    g_streams[cam->id()] = s;
    return s;
}

int lcs_stream_next(lcs_stream *s, int timeout_ms, lcs_frame *frame) {
    std::unique_lock<std::mutex> guard(s->lock);
    auto ready = [s] { return s->count > 0 || s->disconnected || s->woken; };
    if (!ready()) s->changed.wait_for(guard, std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 0), ready);
    s->woken = false;
    if (s->disconnected) return -LCS_STATUS_DISCONNECTED;
    if (s->count == 0) {
        // No request for a second and a device node we hold was removed: the camera is gone.
        if (std::chrono::steady_clock::now() - s->last_completion > std::chrono::seconds(1) && device_node_vanished()) {
            s->disconnected = s->gone = true;
            return -LCS_STATUS_DISCONNECTED;
        }
        return 0;
    }
    uint32_t slot = s->completed[s->head];
    s->head = (s->head + 1) % s->completed.size();
    s->count--;
    guard.unlock();
    Request *request = s->requests[slot].get();
    FrameBuffer *fb = request->findBuffer(s->stream);
    std::memset(frame, 0, sizeof(*frame));
    frame->slot = slot;
    if (!fb) {
        frame->status = 1;
        return 1;
    }
    const FrameMetadata &md = fb->metadata();
    frame->status = md.status == FrameMetadata::FrameSuccess ? 0 : md.status == FrameMetadata::FrameCancelled ? 2 : 1;
    frame->sequence = md.sequence;
    auto ts = request->metadata().get(controls::SensorTimestamp);
    frame->timestamp_ns = ts ? *ts : static_cast<int64_t>(md.timestamp);
    const auto &planes = fb->planes();
    size_t n = planes.size() < LCS_MAX_PLANES ? planes.size() : LCS_MAX_PLANES;
    auto used = md.planes();
    for (size_t i = 0; i < n; i++) {
        frame->planes[i].data = s->planes[slot][i];
        frame->planes[i].length = planes[i].length;
        frame->planes[i].bytes_used = i < used.size() ? used[i].bytesused : planes[i].length;
    }
    frame->n_planes = static_cast<uint32_t>(n);
    return 1;
}

int lcs_stream_requeue(lcs_stream *s, uint32_t slot) {
    if (slot >= s->requests.size()) return -EINVAL;
    Request *request = s->requests[slot].get();
    request->reuse(Request::ReuseBuffers);
    {
        std::lock_guard<std::mutex> guard(s->lock);
        if (s->disconnected) return -ENODEV;
        if (s->has_pending) {
            request->controls().merge(s->pending);
            s->pending.clear();
            s->has_pending = false;
        }
    }
    int r = s->camera->queueRequest(request);
    if (r == -ENODEV) s->cameraGone();
    return r;
}

void lcs_stream_wake(lcs_stream *s) {
    std::lock_guard<std::mutex> guard(s->lock);
    s->woken = true;
    s->changed.notify_all();
}

lcs_mappings *lcs_stream_mappings(lcs_stream *s) {
    std::lock_guard<std::mutex> guard(s->lock);
    if (s->stopping || !s->mappings) return nullptr;
    s->mappings->references.fetch_add(1, std::memory_order_relaxed);
    return s->mappings;
}

void lcs_mappings_release(lcs_mappings *m) {
    if (!m || m->references.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    for (auto &x : m->maps) munmap(x.address, x.length);
    delete m;
}

void lcs_stream_close(lcs_stream *s) {
    std::lock_guard<std::mutex> guard(g_lock);
    auto it = g_streams.find(s->camera->id());
    if (it != g_streams.end() && it->second == s) g_streams.erase(it);
    bool gone;
    {
        std::lock_guard<std::mutex> inner(s->lock);
        s->stopping = true;
        gone = s->gone;
    }
    if (gone) {
        // libcamera cannot stop a camera whose device went away (its queued requests never complete): the stream
        // is left as it is, its requests and buffers alive, no longer heard.
        s->camera->requestCompleted.disconnect(s);
        s->camera->disconnected.disconnect(s);
        g_lost.push_back(s);
        return;
    }
    release(s, true);
}

int lcs_controls_of(const char *id, lcs_controls *out, char *error, size_t error_len) {
    out->controls = nullptr;
    out->n_controls = 0;
    std::lock_guard<std::mutex> guard(g_lock);
    int code = 0;
    auto cam = camera_of(id, error, error_len, &code);
    if (!cam) return code;
    const ControlInfoMap &infos = cam->controls();
    if (infos.empty()) return 0;
    out->controls = static_cast<lcs_control *>(std::calloc(infos.size(), sizeof(lcs_control)));
    if (!out->controls) return -ENOMEM;
    auto values = g_values.find(cam->id());
    for (const auto &[cid, info] : infos) {
        int type = type_of(cid->type());
        double lo = 0, hi = 0;
        if (type == LCS_CONTROL_OTHER || !number_of(info.min(), &lo) || !number_of(info.max(), &hi)) continue;
        lcs_control &c = out->controls[out->n_controls++];
        c.id = cid->id();
        c.name = copy_string(cid->name());
        c.type = type;
        c.minimum = lo;
        c.maximum = hi;
        c.has_default = number_of(info.def(), &c.default_value);
        if (values != g_values.end()) {
            auto v = values->second.find(cid->id());
            if (v != values->second.end()) {
                c.has_value = 1;
                c.value = v->second;
            }
        }
    }
    return 0;
}

void lcs_controls_free(lcs_controls *controls) {
    for (size_t i = 0; i < controls->n_controls; i++) std::free(controls->controls[i].name);
    std::free(controls->controls);
    controls->controls = nullptr;
    controls->n_controls = 0;
}

int lcs_control_set(const char *id, uint32_t control_id, double value, char *error, size_t error_len) {
    std::lock_guard<std::mutex> guard(g_lock);
    int code = 0;
    auto cam = camera_of(id, error, error_len, &code);
    if (!cam) return code;
    const ControlInfoMap &infos = cam->controls();
    auto info = infos.find(control_id);
    if (info == infos.end()) {
        set_error(error, error_len, "libcamera's " + cam->id() + " has no control " + std::to_string(control_id));
        return -ENOENT;
    }
    ControlValue v;
    if (!value_of(info->first, value, &v)) {
        set_error(error, error_len, "the value does not fit the control " + info->first->name());
        return -ERANGE;
    }
    g_values[cam->id()][control_id] = value;
    auto s = g_streams.find(cam->id());
    if (s != g_streams.end()) {
        std::lock_guard<std::mutex> inner(s->second->lock);
        s->second->pending.set(control_id, v);
        s->second->has_pending = true;
    }
    return 0;
}

} // extern "C"
