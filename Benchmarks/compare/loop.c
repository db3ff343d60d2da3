/* The raw C contender of the comparison benchmark (compare.py): the same frames through libyuv and OpenH264
 * with the library's encoder settings, bitstream written to a file. Usage:
 *   loop YUYV|MJPG WIDTH HEIGHT FILE BITRATE OUT
 * MJPEG frames use FILE.idx (little-endian uint32 lengths) and libyuv's MJPGToI420, as a C program would.
 * Prints "frames N seconds S" for the loop alone (file mapped and paged in before). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <libyuv.h>
#include <wels/codec_api.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: loop YUYV|MJPG W H FILE BITRATE OUT\n"); return 2; }
    int mjpeg = strcmp(argv[1], "MJPG") == 0;
    int w = atoi(argv[2]), h = atoi(argv[3]), bitrate = atoi(argv[5]);
    if (w < 16 || h < 16 || w > 4096 || h > 4096 || bitrate < 10000) { fprintf(stderr, "bad arguments\n"); return 2; }
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
    /* I420 with the library's layout: luma stride rounded up to 32. */
    int sy = (w + 31) & ~31, sc = sy / 2, ch = (h + 1) / 2;
    uint8_t *y = aligned_alloc(64, (size_t)sy * h + 2 * (size_t)sc * ch + 64);
    uint8_t *u = y + (size_t)sy * h, *v = u + (size_t)sc * ch;

    ISVCEncoder *enc = NULL;
    if (WelsCreateSVCEncoder(&enc) != 0) return 3;
    int trace = WELS_LOG_ERROR;
    (*enc)->SetOption(enc, ENCODER_OPTION_TRACE_LEVEL, &trace);
    SEncParamExt p;
    (*enc)->GetDefaultParams(enc, &p);
    p.iUsageType = CAMERA_VIDEO_REAL_TIME;
    p.iPicWidth = w; p.iPicHeight = h;
    p.iTargetBitrate = bitrate; p.iMaxBitrate = bitrate + bitrate / 2;
    p.iRCMode = RC_BITRATE_MODE;
    p.fMaxFrameRate = 30;
    p.uiIntraPeriod = 60;
    p.bEnableFrameSkip = 0;
    p.iEntropyCodingModeFlag = 0;
    p.eSpsPpsIdStrategy = CONSTANT_ID;
    p.bPrefixNalAddingCtrl = 0;
    p.bEnableDenoise = 0;
    p.bEnableBackgroundDetection = 1;
    p.bEnableAdaptiveQuant = 1;
    p.bEnableLongTermReference = 0;
    p.iTemporalLayerNum = 1; p.iSpatialLayerNum = 1;
    p.iMultipleThreadIdc = 1;
    p.sSpatialLayers[0].iVideoWidth = w; p.sSpatialLayers[0].iVideoHeight = h;
    p.sSpatialLayers[0].fFrameRate = 30;
    p.sSpatialLayers[0].iSpatialBitrate = bitrate; p.sSpatialLayers[0].iMaxSpatialBitrate = bitrate + bitrate / 2;
    p.sSpatialLayers[0].uiProfileIdc = PRO_BASELINE;
    p.sSpatialLayers[0].sSliceArgument.uiSliceMode = SM_SINGLE_SLICE;
    if ((*enc)->InitializeExt(enc, &p) != 0) { fprintf(stderr, "InitializeExt failed\n"); return 3; }
    int fmt = videoFormatI420;
    (*enc)->SetOption(enc, ENCODER_OPTION_DATAFORMAT, &fmt);
    FILE *out = fopen(argv[6], "wb");
    if (!out) { perror(argv[6]); return 2; }

    SSourcePicture pic; memset(&pic, 0, sizeof pic);
    pic.iColorFormat = videoFormatI420; pic.iPicWidth = w; pic.iPicHeight = h;
    pic.iStride[0] = sy; pic.iStride[1] = sc; pic.iStride[2] = sc;
    pic.pData[0] = y; pic.pData[1] = u; pic.pData[2] = v;
    SFrameBSInfo info; memset(&info, 0, sizeof info);
    double t0 = now();
    for (size_t i = 0; i < count; i++) {
        int rc;
        if (mjpeg) rc = MJPGToI420(data + offsets[i], lengths[i], y, sy, u, sc, v, sc, w, h, w, h);
        else rc = YUY2ToI420(data + i * (size_t)w * h * 2, w * 2, y, sy, u, sc, v, sc, w, h);
        if (rc != 0) { fprintf(stderr, "conversion failed on frame %zu\n", i); return 4; }
        pic.uiTimeStamp = (long long)(i * 1000 / 30);
        if ((*enc)->EncodeFrame(enc, &pic, &info) != 0) { fprintf(stderr, "EncodeFrame failed\n"); return 4; }
        if (info.eFrameType == videoFrameTypeSkip) continue;
        for (int l = 0; l < info.iLayerNum; l++) {
            SLayerBSInfo *layer = &info.sLayerInfo[l];
            size_t n = 0;
            for (int k = 0; k < layer->iNalCount; k++) n += layer->pNalLengthInByte[k];
            if (fwrite(layer->pBsBuf, 1, n, out) != n) { perror("write"); return 4; }
        }
    }
    double t = now() - t0;
    fclose(out);
    (*enc)->Uninitialize(enc);
    WelsDestroySVCEncoder(enc);
    printf("frames %zu seconds %.6f\n", count, t);
    return 0;
}
