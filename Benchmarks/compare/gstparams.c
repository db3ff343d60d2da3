/* LD_PRELOAD helper of compare.py: makes GStreamer's openh264enc report the parameters OpenH264 really holds.
 * It wraps WelsCreateSVCEncoder and points each new encoder at a copy of its method table in which
 * InitializeExt is followed by GetOption(ENCODER_OPTION_SVC_ENCODE_PARAM_EXT) and params_print to stderr
 * (the same line loop.c and compare-loop print). Nothing else changes: every other method is the original.
 *   cc -O2 -shared -fPIC -o gstparams.so gstparams.c -ldl -lm
 *   LD_PRELOAD=./gstparams.so gst-launch-1.0 ... ! openh264enc ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include "params.h"

/* The table as the C++ compiler lays it out: offset-to-top and type information before the address the object
 * points at, then the methods (the nine of ISVCEncoder, the destructors, the implementation's own). Copying a few
 * more entries than exist only reads neighbouring read-only data. */
enum { before = 2, entries = 16 };
static void *table[before + entries];
static int (*realInitializeExt)(ISVCEncoder *, const SEncParamExt *);
static pthread_once_t once = PTHREAD_ONCE_INIT;
static const void *const *originalTable;

static int initializeExt(ISVCEncoder *e, const SEncParamExt *p) {
    int rc = realInitializeExt(e, p);
    if (rc == 0) {
        SEncParamExt q;
        memset(&q, 0, sizeof q);
        if ((*e)->GetOption(e, ENCODER_OPTION_SVC_ENCODE_PARAM_EXT, &q) == 0) params_print(stderr, &q);
        else fprintf(stderr, "effective: (GetOption failed)\n");
    }
    return rc;
}

static void copyTable(void) {
    memcpy(table, originalTable - before, sizeof table);
    realInitializeExt = (int (*)(ISVCEncoder *, const SEncParamExt *))table[before + 1];
    table[before + 1] = (void *)initializeExt;
}

/* GStreamer loads its plugins, and so libopenh264, with local binding: RTLD_NEXT may not see the real function,
 * then it is taken from the library itself (already loaded by the plugin). */
static void *realCreate(void) {
    void *f = dlsym(RTLD_NEXT, "WelsCreateSVCEncoder");
    static const char *const names[] = {"libopenh264.so.7", "libopenh264.so.6", "libopenh264.so"};
    for (size_t i = 0; !f && i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h) h = dlopen(names[i], RTLD_LAZY);
        if (h) f = dlsym(h, "WelsCreateSVCEncoder");
    }
    return f;
}

int WelsCreateSVCEncoder(ISVCEncoder **out) {
    int (*real)(ISVCEncoder **) = (int (*)(ISVCEncoder **))realCreate();
    if (!real) {
        fprintf(stderr, "gstparams: the real WelsCreateSVCEncoder was not found\n");
        return 1;
    }
    int rc = real(out);
    if (rc == 0 && out && *out) {
        originalTable = (const void *const *)**out;
        pthread_once(&once, copyTable);
        **out = (const ISVCEncoderVtbl *)(void *)&table[before];
    }
    return rc;
}
