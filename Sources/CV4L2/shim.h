#ifndef CV4L2_SHIM_H
#define CV4L2_SHIM_H
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <linux/videodev2.h>
#include <libv4l2.h>

/* v4l2_open / v4l2_ioctl are variadic and VIDIOC_* are function-like macros:
   Swift sees neither, so they are re-exported here. */
static inline int cv4l2_open(const char *path, int flags) { return v4l2_open(path, flags); }
static inline int cv4l2_close(int fd) { return v4l2_close(fd); }
static inline int cv4l2_ioctl(int fd, unsigned long request, void *arg) { return v4l2_ioctl(fd, request, arg); }
static inline int cv4l2_fd_open(int fd, int flags) { return v4l2_fd_open(fd, flags); }
static inline void *cv4l2_mmap(void *start, size_t length, int prot, int flags, int fd, int64_t offset) {
    return v4l2_mmap(start, length, prot, flags, fd, offset);
}
static inline int cv4l2_munmap(void *start, size_t length) { return v4l2_munmap(start, length); }
static inline int cv4l2_errno(void) { return errno; }
static inline void cv4l2_set_errno(int e) { errno = e; }
static inline int cv4l2_pipe2(int fds[2], int flags) { return pipe2(fds, flags); }

static const unsigned long CV4L2_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
static const unsigned long CV4L2_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
static const unsigned long CV4L2_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
static const unsigned long CV4L2_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;
static const unsigned long CV4L2_VIDIOC_S_FMT = VIDIOC_S_FMT;
static const unsigned long CV4L2_VIDIOC_G_FMT = VIDIOC_G_FMT;
static const unsigned long CV4L2_VIDIOC_S_PARM = VIDIOC_S_PARM;
static const unsigned long CV4L2_VIDIOC_G_PARM = VIDIOC_G_PARM;
static const unsigned long CV4L2_VIDIOC_REQBUFS = VIDIOC_REQBUFS;
static const unsigned long CV4L2_VIDIOC_QUERYBUF = VIDIOC_QUERYBUF;
static const unsigned long CV4L2_VIDIOC_EXPBUF = VIDIOC_EXPBUF;
static const uint32_t CV4L2_EXPBUF_FLAGS = O_CLOEXEC | O_RDONLY;
static const unsigned long CV4L2_VIDIOC_QBUF = VIDIOC_QBUF;
static const unsigned long CV4L2_VIDIOC_DQBUF = VIDIOC_DQBUF;
static const unsigned long CV4L2_VIDIOC_STREAMON = VIDIOC_STREAMON;
static const unsigned long CV4L2_VIDIOC_STREAMOFF = VIDIOC_STREAMOFF;
static const unsigned long CV4L2_VIDIOC_S_CTRL = VIDIOC_S_CTRL;
static const unsigned long CV4L2_VIDIOC_QUERYCTRL = VIDIOC_QUERYCTRL;
static const unsigned long CV4L2_VIDIOC_QUERY_EXT_CTRL = VIDIOC_QUERY_EXT_CTRL;
static const unsigned long CV4L2_VIDIOC_QUERYMENU = VIDIOC_QUERYMENU;
static const unsigned long CV4L2_VIDIOC_G_EXT_CTRLS = VIDIOC_G_EXT_CTRLS;
static const unsigned long CV4L2_VIDIOC_S_EXT_CTRLS = VIDIOC_S_EXT_CTRLS;
static const uint32_t CV4L2_CTRL_FLAG_NEXT_CTRL = V4L2_CTRL_FLAG_NEXT_CTRL;
static const uint32_t CV4L2_CTRL_FLAG_NEXT_COMPOUND = V4L2_CTRL_FLAG_NEXT_COMPOUND;
static const uint32_t CV4L2_CTRL_WHICH_CUR_VAL = V4L2_CTRL_WHICH_CUR_VAL;

static const uint32_t CV4L2_CAP_VIDEO_CAPTURE = V4L2_CAP_VIDEO_CAPTURE;
static const uint32_t CV4L2_CAP_DEVICE_CAPS = V4L2_CAP_DEVICE_CAPS;
static const uint32_t CV4L2_CAP_STREAMING = V4L2_CAP_STREAMING;
static const uint32_t CV4L2_BUF_TYPE_VIDEO_CAPTURE = V4L2_BUF_TYPE_VIDEO_CAPTURE;
static const uint32_t CV4L2_BUF_TYPE_VIDEO_OUTPUT = V4L2_BUF_TYPE_VIDEO_OUTPUT;
static const uint32_t CV4L2_CAP_VIDEO_CAPTURE_MPLANE = V4L2_CAP_VIDEO_CAPTURE_MPLANE;
static const uint32_t CV4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
static const int CV4L2_VIDEO_MAX_PLANES = VIDEO_MAX_PLANES;
static const uint32_t CV4L2_MEMORY_MMAP = V4L2_MEMORY_MMAP;
static const uint32_t CV4L2_FIELD_ANY = V4L2_FIELD_ANY;
static const uint32_t CV4L2_FMT_FLAG_EMULATED = V4L2_FMT_FLAG_EMULATED;
static const uint32_t CV4L2_FMT_FLAG_COMPRESSED = V4L2_FMT_FLAG_COMPRESSED;
static const uint32_t CV4L2_BUF_FLAG_ERROR = V4L2_BUF_FLAG_ERROR;
static const uint32_t CV4L2_BUF_FLAG_TIMESTAMP_MASK = V4L2_BUF_FLAG_TIMESTAMP_MASK;
static const uint32_t CV4L2_BUF_FLAG_TIMESTAMP_MONOTONIC = V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC;
static const uint32_t CV4L2_BUF_FLAG_KEYFRAME = V4L2_BUF_FLAG_KEYFRAME;
static const uint32_t CV4L2_BUF_FLAG_PFRAME = V4L2_BUF_FLAG_PFRAME;
static const uint32_t CV4L2_BUF_FLAG_BFRAME = V4L2_BUF_FLAG_BFRAME;
static const uint32_t CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME = V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME;
static const uint32_t CV4L2_CID_MPEG_VIDEO_BITRATE = V4L2_CID_MPEG_VIDEO_BITRATE;
static const uint32_t CV4L2_CAP_TIMEPERFRAME = V4L2_CAP_TIMEPERFRAME;
static const unsigned long CV4L2_VIDIOC_G_INPUT = VIDIOC_G_INPUT;
static const unsigned long CV4L2_VIDIOC_ENUMINPUT = VIDIOC_ENUMINPUT;
static const uint32_t CV4L2_IN_CAP_DV_TIMINGS = V4L2_IN_CAP_DV_TIMINGS;
static const unsigned long CV4L2_VIDIOC_QUERY_DV_TIMINGS = VIDIOC_QUERY_DV_TIMINGS;
static const unsigned long CV4L2_VIDIOC_G_DV_TIMINGS = VIDIOC_G_DV_TIMINGS;
static const unsigned long CV4L2_VIDIOC_S_DV_TIMINGS = VIDIOC_S_DV_TIMINGS;
static const uint32_t CV4L2_DV_BT_656_1120 = V4L2_DV_BT_656_1120;
static const unsigned long CV4L2_VIDIOC_SUBSCRIBE_EVENT = VIDIOC_SUBSCRIBE_EVENT;
static const unsigned long CV4L2_VIDIOC_DQEVENT = VIDIOC_DQEVENT;
static const uint32_t CV4L2_EVENT_SOURCE_CHANGE = V4L2_EVENT_SOURCE_CHANGE;
static const uint32_t CV4L2_EVENT_EOS = V4L2_EVENT_EOS;
static const uint32_t CV4L2_EVENT_SRC_CH_RESOLUTION = V4L2_EVENT_SRC_CH_RESOLUTION;
static const int CV4L2_DISABLE_CONVERSION = V4L2_DISABLE_CONVERSION;
/* Memory-to-memory encoders (Documentation/userspace-api/media/v4l/dev-encoder.rst). */
static const uint32_t CV4L2_CAP_VIDEO_M2M = V4L2_CAP_VIDEO_M2M;
static const uint32_t CV4L2_CAP_VIDEO_M2M_MPLANE = V4L2_CAP_VIDEO_M2M_MPLANE;
static const uint32_t CV4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE = V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE;
static const unsigned long CV4L2_VIDIOC_ENCODER_CMD = VIDIOC_ENCODER_CMD;
static const uint32_t CV4L2_ENC_CMD_STOP = V4L2_ENC_CMD_STOP;
static const uint32_t CV4L2_BUF_FLAG_LAST = V4L2_BUF_FLAG_LAST;
static const uint32_t CV4L2_CID_MPEG_VIDEO_GOP_SIZE = V4L2_CID_MPEG_VIDEO_GOP_SIZE;
/* Encoder controls, used only where the device has them (queried first), and the crop selection of a padded
   OUTPUT size. */
static const uint32_t CV4L2_CID_MPEG_VIDEO_BITRATE_MODE = V4L2_CID_MPEG_VIDEO_BITRATE_MODE;
static const int64_t CV4L2_MPEG_VIDEO_BITRATE_MODE_VBR = V4L2_MPEG_VIDEO_BITRATE_MODE_VBR;
static const int64_t CV4L2_MPEG_VIDEO_BITRATE_MODE_CBR = V4L2_MPEG_VIDEO_BITRATE_MODE_CBR;
static const uint32_t CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD = V4L2_CID_MPEG_VIDEO_H264_I_PERIOD;
static const uint32_t CV4L2_CID_MPEG_VIDEO_H264_PROFILE = V4L2_CID_MPEG_VIDEO_H264_PROFILE;
static const int64_t CV4L2_MPEG_VIDEO_H264_PROFILE_BASELINE = V4L2_MPEG_VIDEO_H264_PROFILE_BASELINE;
static const int64_t CV4L2_MPEG_VIDEO_H264_PROFILE_CONSTRAINED_BASELINE = V4L2_MPEG_VIDEO_H264_PROFILE_CONSTRAINED_BASELINE;
static const int64_t CV4L2_MPEG_VIDEO_H264_PROFILE_MAIN = V4L2_MPEG_VIDEO_H264_PROFILE_MAIN;
static const int64_t CV4L2_MPEG_VIDEO_H264_PROFILE_HIGH = V4L2_MPEG_VIDEO_H264_PROFILE_HIGH;
static const uint32_t CV4L2_CID_MPEG_VIDEO_H264_LEVEL = V4L2_CID_MPEG_VIDEO_H264_LEVEL;
static const uint32_t CV4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER = V4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER;
static const unsigned long CV4L2_VIDIOC_S_SELECTION = VIDIOC_S_SELECTION;
static const unsigned long CV4L2_VIDIOC_G_SELECTION = VIDIOC_G_SELECTION;
static const uint32_t CV4L2_SEL_TGT_CROP = V4L2_SEL_TGT_CROP;
/* A DV-timings receiver's detected signal: active size, frame size with blanking (width x height) and pixel
   clock; the frame rate is pixelclock / (frame width * frame height). All zero for timings other than BT.656/1120. */
static inline void cv4l2_dv_timings_size(const struct v4l2_dv_timings *t, uint32_t *width, uint32_t *height,
                                         uint64_t *frame_pixels, uint64_t *pixelclock) {
    *width = *height = 0;
    *frame_pixels = *pixelclock = 0;
    if (t->type != V4L2_DV_BT_656_1120) return;
    *width = t->bt.width;
    *height = t->bt.height;
    *frame_pixels = (uint64_t)V4L2_DV_BT_FRAME_WIDTH(&t->bt) * (uint64_t)V4L2_DV_BT_FRAME_HEIGHT(&t->bt);
    *pixelclock = t->bt.pixelclock;
}
/* 1 for a source-change event that changed the resolution (or the signal), else 0. */
static inline int cv4l2_event_is_resolution_change(const struct v4l2_event *e) {
    return e->type == V4L2_EVENT_SOURCE_CHANGE && (e->u.src_change.changes & V4L2_EVENT_SRC_CH_RESOLUTION) != 0;
}
#endif
