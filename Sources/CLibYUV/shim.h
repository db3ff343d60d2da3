#ifndef CLIBYUV_SHIM_H
#define CLIBYUV_SHIM_H
/* libyuv for Swift (conversion, scaling, rotation). The JPEG decoder and encoder are in CJPEGCodec. */
#include <libyuv.h>

/* libyuv's Y'CbCr -> RGB constants for a matrix (0 BT.601, 1 BT.709, 2 BT.2020) and a range (full != 0: Y' 0...255,
   else 16...235). `swap_uv` gives the mirrored constants, used with the U and V planes exchanged to write R first
   (ABGR, RAW), as libyuv's own I420ToABGR and I420ToRAW do. */
static inline const struct YuvConstants *svc_yuv_constants(int matrix, int full, int swap_uv) {
    switch (matrix) {
    case 1:
        if (swap_uv) return full ? &kYvuF709Constants : &kYvuH709Constants;
        return full ? &kYuvF709Constants : &kYuvH709Constants;
    case 2:
        if (swap_uv) return full ? &kYvuV2020Constants : &kYvu2020Constants;
        return full ? &kYuvV2020Constants : &kYuv2020Constants;
    default:
        if (swap_uv) return full ? &kYvuJPEGConstants : &kYvuI601Constants;
        return full ? &kYuvJPEGConstants : &kYuvI601Constants;
    }
}
#endif
