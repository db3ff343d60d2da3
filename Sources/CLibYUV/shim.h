#ifndef CLIBYUV_SHIM_H
#define CLIBYUV_SHIM_H
#include <libyuv.h>
#endif
