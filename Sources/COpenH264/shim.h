#ifndef COPENH264_SHIM_H
#define COPENH264_SHIM_H
#include <stdbool.h>
#include <wels/codec_api.h>
#include <wels/codec_ver.h>

/* The encoder is a C++ object seen from C as a pointer to a vtable; these
   wrappers keep the double indirection out of Swift. */
static inline int ch264_init_ext(ISVCEncoder *e, const SEncParamExt *p) { return (*e)->InitializeExt(e, p); }
static inline int ch264_default_params(ISVCEncoder *e, SEncParamExt *p) { return (*e)->GetDefaultParams(e, p); }
static inline int ch264_uninit(ISVCEncoder *e) { return (*e)->Uninitialize(e); }
static inline int ch264_encode(ISVCEncoder *e, const SSourcePicture *pic, SFrameBSInfo *info) { return (*e)->EncodeFrame(e, pic, info); }
static inline int ch264_force_intra(ISVCEncoder *e, bool idr) { return (*e)->ForceIntraFrame(e, idr); }
static inline int ch264_set_option(ISVCEncoder *e, ENCODER_OPTION opt, void *v) { return (*e)->SetOption(e, opt, v); }
static inline int ch264_get_option(ISVCEncoder *e, ENCODER_OPTION opt, void *v) { return (*e)->GetOption(e, opt, v); }
#endif
