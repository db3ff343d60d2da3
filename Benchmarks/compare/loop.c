/* The raw C contender of the comparison benchmark (compare.py): the same frames through libyuv and OpenH264
 * with the same encoder settings as the library, bitstream written to a file. Usage:
 *   loop YUYV|MJPG WIDTH HEIGHT FILE BITRATE OUT [stages=1|2] [complexity=low|medium|high] [max-bitrate=N]
 *        [intra-period=N] [threads=N] [frame-skip=on|off]
 * MJPEG frames use FILE.idx (little-endian uint32 lengths) and libyuv's MJPGToI420, as a C program would.
 * stages=1 (the default) converts and encodes each frame in turn on one thread. stages=2 does what the library's
 * EncoderThread does: the main thread converts frame N+1 while an encode thread encodes and writes frame N, with
 * a hand-off of one picture (pthreads, a mutex and a condition variable; three I420 buffers in turn).
 * Every OpenH264 setting is set explicitly over GetDefaultParams; after InitializeExt the parameters OpenH264
 * holds are read back and printed on stderr ("effective: ...", see params.h).
 * Prints "frames N seconds S" for the loop alone (file mapped and paged in before). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <libyuv.h>
#include <wels/codec_api.h>
#include "params.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

enum { pictures = 3 };

typedef struct {
    ISVCEncoder *enc;
    FILE *out;
    int w, h, sy, sc;
    uint8_t *y[pictures], *u[pictures], *v[pictures];
    SSourcePicture pic;
    SFrameBSInfo info;
    /* The hand-off of stages=2, guarded by `lock`: the picture waiting for the encode thread (-1: none). */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int waiting;
    size_t waitingFrame;
    int ending, failed;
} Loop;

/* Encodes picture `k` as frame `i` and writes its bytes; 0 on success. */
static int encodeOne(Loop *L, int k, size_t i) {
    L->pic.pData[0] = L->y[k]; L->pic.pData[1] = L->u[k]; L->pic.pData[2] = L->v[k];
    L->pic.uiTimeStamp = (long long)(i * 1000 / 30);
    if ((*L->enc)->EncodeFrame(L->enc, &L->pic, &L->info) != 0) { fprintf(stderr, "EncodeFrame failed\n"); return -1; }
    if (L->info.eFrameType == videoFrameTypeSkip) return 0;
    for (int l = 0; l < L->info.iLayerNum; l++) {
        SLayerBSInfo *layer = &L->info.sLayerInfo[l];
        size_t n = 0;
        for (int j = 0; j < layer->iNalCount; j++) n += layer->pNalLengthInByte[j];
        if (fwrite(layer->pBsBuf, 1, n, L->out) != n) { perror("write"); return -1; }
    }
    return 0;
}

/* The encode thread of stages=2: takes the waiting picture (freeing the slot at once, so the next conversion
 * can be handed over while this one encodes), encodes and writes it, until told to end with nothing waiting. */
static void *encodeThread(void *arg) {
    Loop *L = arg;
    for (;;) {
        pthread_mutex_lock(&L->lock);
        while (L->waiting < 0 && !L->ending) pthread_cond_wait(&L->changed, &L->lock);
        if (L->waiting < 0) { pthread_mutex_unlock(&L->lock); return NULL; }
        int k = L->waiting;
        size_t i = L->waitingFrame;
        L->waiting = -1;
        pthread_cond_broadcast(&L->changed);
        pthread_mutex_unlock(&L->lock);
        if (encodeOne(L, k, i) != 0) {
            pthread_mutex_lock(&L->lock);
            L->failed = 1;
            pthread_cond_broadcast(&L->changed);
            pthread_mutex_unlock(&L->lock);
            return NULL;
        }
    }
}

/* Hands picture `k` (frame `i`) to the encode thread; waits only while another picture is still waiting. */
static int submit(Loop *L, int k, size_t i) {
    pthread_mutex_lock(&L->lock);
    while (L->waiting >= 0 && !L->failed) pthread_cond_wait(&L->changed, &L->lock);
    int failed = L->failed;
    if (!failed) {
        L->waiting = k;
        L->waitingFrame = i;
        pthread_cond_broadcast(&L->changed);
    }
    pthread_mutex_unlock(&L->lock);
    return failed ? -1 : 0;
}

static int parseOnOff(const char *s) { return strcmp(s, "on") == 0 || strcmp(s, "1") == 0 || strcmp(s, "true") == 0; }

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: loop YUYV|MJPG W H FILE BITRATE OUT [stages=1|2] [complexity=low|medium|high] [max-bitrate=N] "
                        "[intra-period=N] [threads=N] [frame-skip=on|off]\n");
        return 2;
    }
    int mjpeg = strcmp(argv[1], "MJPG") == 0;
    int w = atoi(argv[2]), h = atoi(argv[3]), bitrate = atoi(argv[5]);
    if (w < 16 || h < 16 || w > 4096 || h > 4096 || bitrate < 10000) { fprintf(stderr, "bad arguments\n"); return 2; }
    int stages = 1, complexity = LOW_COMPLEXITY, maxBitrate = bitrate + bitrate / 2, intraPeriod = 60, threads = 1, frameSkip = 0;
    for (int a = 7; a < argc; a++) {
        const char *eq = strchr(argv[a], '=');
        if (!eq) { fprintf(stderr, "expected key=value, got %s\n", argv[a]); return 2; }
        size_t kl = (size_t)(eq - argv[a]);
        const char *val = eq + 1;
#define KEY(k) (kl == strlen(k) && strncmp(argv[a], k, kl) == 0)
        if (KEY("stages")) stages = atoi(val);
        else if (KEY("complexity")) {
            if (strcmp(val, "low") == 0) complexity = LOW_COMPLEXITY;
            else if (strcmp(val, "medium") == 0) complexity = MEDIUM_COMPLEXITY;
            else if (strcmp(val, "high") == 0) complexity = HIGH_COMPLEXITY;
            else { fprintf(stderr, "complexity must be low, medium or high\n"); return 2; }
        } else if (KEY("max-bitrate")) maxBitrate = atoi(val);
        else if (KEY("intra-period")) intraPeriod = atoi(val);
        else if (KEY("threads")) threads = atoi(val);
        else if (KEY("frame-skip")) frameSkip = parseOnOff(val);
        else { fprintf(stderr, "unknown setting %s\n", argv[a]); return 2; }
#undef KEY
    }
    if (stages < 1 || stages > 2 || maxBitrate < bitrate || intraPeriod < 1 || threads < 1 || threads > 4) {
        fprintf(stderr, "bad settings\n");
        return 2;
    }
    int fd = open(argv[4], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) { perror(argv[4]); return 2; }
    const uint8_t *data = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (data == MAP_FAILED) { perror("mmap"); return 2; }
    size_t count = 0, *offsets = NULL, *lengths = NULL;
    if (mjpeg) {
        char idxPath[4096];
        snprintf(idxPath, sizeof idxPath, "%s.idx", argv[4]);
        FILE *f = fopen(idxPath, "rb");
        if (!f) { perror(idxPath); return 2; }
        uint8_t b[4];
        size_t off = 0;
        while (fread(b, 1, 4, f) == 4) {
            offsets = realloc(offsets, (count + 1) * sizeof *offsets); lengths = realloc(lengths, (count + 1) * sizeof *lengths);
            lengths[count] = b[0] | b[1] << 8 | b[2] << 16 | (size_t)b[3] << 24;
            offsets[count] = off; off += lengths[count]; count++;
        }
        fclose(f);
    } else {
        count = st.st_size / ((size_t)w * h * 2);
    }
    static Loop L;
    L.w = w; L.h = h;
    /* I420 with the library's layout: luma stride rounded up to 32. */
    L.sy = (w + 31) & ~31; L.sc = L.sy / 2;
    int ch = (h + 1) / 2;
    for (int k = 0; k < pictures; k++) {
        L.y[k] = aligned_alloc(64, (size_t)L.sy * h + 2 * (size_t)L.sc * ch + 64);
        L.u[k] = L.y[k] + (size_t)L.sy * h; L.v[k] = L.u[k] + (size_t)L.sc * ch;
    }

    if (WelsCreateSVCEncoder(&L.enc) != 0) return 3;
    ISVCEncoder *enc = L.enc;
    int trace = WELS_LOG_ERROR;
    (*enc)->SetOption(enc, ENCODER_OPTION_TRACE_LEVEL, &trace);
    SEncParamExt p;
    (*enc)->GetDefaultParams(enc, &p);
    /* Every setting compare.py lists, set here explicitly (the library sets the same in H264Encoder.apply). */
    p.iUsageType = CAMERA_VIDEO_REAL_TIME;
    p.iPicWidth = w; p.iPicHeight = h;
    p.iTargetBitrate = bitrate; p.iMaxBitrate = maxBitrate;
    p.iRCMode = RC_BITRATE_MODE;
    p.fMaxFrameRate = 30;
    p.iComplexityMode = (ECOMPLEXITY_MODE)complexity;
    p.uiIntraPeriod = intraPeriod;
    p.bEnableFrameSkip = frameSkip;
    p.iEntropyCodingModeFlag = 0;
    p.eSpsPpsIdStrategy = CONSTANT_ID;
    p.bPrefixNalAddingCtrl = 0;
    p.bEnableDenoise = 0;
    p.bEnableBackgroundDetection = 1;
    p.bEnableAdaptiveQuant = 1; /* asked for, as the library and GStreamer do; OpenH264 2.3.1 turns it off */
    p.bEnableSceneChangeDetect = 1;
    p.bEnableLongTermReference = 0;
    p.iLoopFilterDisableIdc = 0;
    p.iTemporalLayerNum = 1; p.iSpatialLayerNum = 1;
    p.iMultipleThreadIdc = threads;
    p.sSpatialLayers[0].iVideoWidth = w; p.sSpatialLayers[0].iVideoHeight = h;
    p.sSpatialLayers[0].fFrameRate = 30;
    p.sSpatialLayers[0].iSpatialBitrate = bitrate; p.sSpatialLayers[0].iMaxSpatialBitrate = maxBitrate;
    p.sSpatialLayers[0].uiProfileIdc = PRO_BASELINE;
    if (threads > 1) { /* OpenH264 needs a slice per thread, as the library arranges */
        p.sSpatialLayers[0].sSliceArgument.uiSliceMode = SM_FIXEDSLCNUM_SLICE;
        p.sSpatialLayers[0].sSliceArgument.uiSliceNum = threads;
    } else {
        p.sSpatialLayers[0].sSliceArgument.uiSliceMode = SM_SINGLE_SLICE;
    }
    if ((*enc)->InitializeExt(enc, &p) != 0) { fprintf(stderr, "InitializeExt failed\n"); return 3; }
    SEncParamExt effective;
    memset(&effective, 0, sizeof effective);
    if ((*enc)->GetOption(enc, ENCODER_OPTION_SVC_ENCODE_PARAM_EXT, &effective) != 0) { fprintf(stderr, "GetOption failed\n"); return 3; }
    params_print(stderr, &effective);
    int fmt = videoFormatI420;
    (*enc)->SetOption(enc, ENCODER_OPTION_DATAFORMAT, &fmt);
    L.out = fopen(argv[6], "wb");
    if (!L.out) { perror(argv[6]); return 2; }

    memset(&L.pic, 0, sizeof L.pic);
    L.pic.iColorFormat = videoFormatI420; L.pic.iPicWidth = w; L.pic.iPicHeight = h;
    L.pic.iStride[0] = L.sy; L.pic.iStride[1] = L.sc; L.pic.iStride[2] = L.sc;
    memset(&L.info, 0, sizeof L.info);
    pthread_t encoder;
    if (stages == 2) {
        pthread_mutex_init(&L.lock, NULL);
        pthread_cond_init(&L.changed, NULL);
        L.waiting = -1;
        if (pthread_create(&encoder, NULL, encodeThread, &L) != 0) { fprintf(stderr, "pthread_create failed\n"); return 3; }
    }
    double t0 = now();
    int failed = 0;
    for (size_t i = 0; i < count && !failed; i++) {
        /* With two stages, picture i % 3 is free: frame i - 3 was encoded before the encode thread took frame i - 2. */
        int k = stages == 2 ? (int)(i % pictures) : 0;
        int rc;
        if (mjpeg) rc = MJPGToI420(data + offsets[i], lengths[i], L.y[k], L.sy, L.u[k], L.sc, L.v[k], L.sc, w, h, w, h);
        else rc = YUY2ToI420(data + i * (size_t)w * h * 2, w * 2, L.y[k], L.sy, L.u[k], L.sc, L.v[k], L.sc, w, h);
        if (rc != 0) { fprintf(stderr, "conversion failed on frame %zu\n", i); failed = 1; break; }
        if (stages == 2) failed = submit(&L, k, i) != 0;
        else failed = encodeOne(&L, k, i) != 0;
    }
    if (stages == 2) {
        pthread_mutex_lock(&L.lock);
        L.ending = 1;
        pthread_cond_broadcast(&L.changed);
        pthread_mutex_unlock(&L.lock);
        pthread_join(encoder, NULL);
        failed |= L.failed;
    }
    double t = now() - t0;
    if (failed) return 4;
    fclose(L.out);
    (*enc)->Uninitialize(enc);
    WelsDestroySVCEncoder(enc);
    printf("frames %zu seconds %.6f stages %d\n", count, t, stages);
    return 0;
}
