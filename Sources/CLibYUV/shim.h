#ifndef CLIBYUV_SHIM_H
#define CLIBYUV_SHIM_H
/* libyuv for Swift (conversion, scaling, rotation). The JPEG decoder and encoder are in CJPEGCodec. */
#include <libyuv.h>
#endif
