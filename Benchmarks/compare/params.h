/* The comparison benchmark's one printer of OpenH264's effective parameters: what an encoder reports with
 * GetOption(ENCODER_OPTION_SVC_ENCODE_PARAM_EXT) after InitializeExt, as one line of key=value pairs.
 * The same keys, order and wording as H264Encoder.EffectiveParameters.description in Sources/H264, so
 * compare.py can compare the library, the C loop and GStreamer line for line. Used by loop.c and gstparams.c. */
#ifndef COMPARE_PARAMS_H
#define COMPARE_PARAMS_H
#include <stdio.h>
#include <math.h>
#include <wels/codec_api.h>

static const char *params_name(int v, const int *keys, const char *const *names, int n, char *buf, size_t len) {
    for (int i = 0; i < n; i++)
        if (keys[i] == v) return names[i];
    snprintf(buf, len, "%d", v);
    return buf;
}

#define PARAMS_NAME(v, keys, names, buf) params_name((v), (keys), (names), (int)(sizeof(keys) / sizeof((keys)[0])), (buf), sizeof(buf))

static void params_print(FILE *f, const SEncParamExt *p) {
    static const int usageKeys[] = {0, 1, 2, 3};
    static const char *const usageNames[] = {"camera", "screen", "camera-offline", "screen-offline"};
    static const int rcKeys[] = {-1, 0, 1, 2, 3, 4};
    static const char *const rcNames[] = {"off", "quality", "bitrate", "buffer", "timestamp", "bitrate-post-skip"};
    static const int complexityKeys[] = {0, 1, 2};
    static const char *const complexityNames[] = {"low", "medium", "high"};
    static const int sliceKeys[] = {0, 1, 2, 3};
    static const char *const sliceNames[] = {"single", "fixed", "raster", "size-limited"};
    static const int entropyKeys[] = {0, 1};
    static const char *const entropyNames[] = {"cavlc", "cabac"};
    static const int deblockKeys[] = {0, 1, 2};
    static const char *const deblockNames[] = {"on", "off", "not-slice-boundaries"};
    static const int profileKeys[] = {66, 77, 100};
    static const char *const profileNames[] = {"baseline", "main", "high"};
    char b1[16], b2[16], b3[16], b4[16], b5[16], b6[16], b7[16], fps[32];
    const SSpatialLayerConfig *l = &p->sSpatialLayers[0];
    /* A whole frame rate prints without a fraction (30), any other with %g (29.97), as the Swift side does. */
    if (p->fMaxFrameRate == floorf(p->fMaxFrameRate)) snprintf(fps, sizeof fps, "%d", (int)p->fMaxFrameRate);
    else snprintf(fps, sizeof fps, "%g", p->fMaxFrameRate);
#define ONOFF(b) ((b) ? "on" : "off")
    fprintf(f,
            "effective: usage=%s size=%dx%d max-fps=%s bitrate=%d max-bitrate=%d layer-bitrate=%d layer-max-bitrate=%d rc=%s "
            "complexity=%s threads=%d slice-mode=%s slices=%u max-nal-size=%u intra-period=%u ref-frames=%d entropy=%s "
            "frame-skip=%s denoise=%s background-detection=%s adaptive-quant=%s scene-change=%s ltr=%s spatial-layers=%d "
            "temporal-layers=%d deblocking=%s qp=%d-%d profile=%s\n",
            PARAMS_NAME((int)p->iUsageType, usageKeys, usageNames, b1), p->iPicWidth, p->iPicHeight, fps, p->iTargetBitrate,
            p->iMaxBitrate, l->iSpatialBitrate, l->iMaxSpatialBitrate, PARAMS_NAME((int)p->iRCMode, rcKeys, rcNames, b2),
            PARAMS_NAME((int)p->iComplexityMode, complexityKeys, complexityNames, b3), (int)p->iMultipleThreadIdc,
            PARAMS_NAME((int)l->sSliceArgument.uiSliceMode, sliceKeys, sliceNames, b4), l->sSliceArgument.uiSliceNum, p->uiMaxNalSize,
            p->uiIntraPeriod, p->iNumRefFrame, PARAMS_NAME(p->iEntropyCodingModeFlag, entropyKeys, entropyNames, b5),
            ONOFF(p->bEnableFrameSkip), ONOFF(p->bEnableDenoise), ONOFF(p->bEnableBackgroundDetection), ONOFF(p->bEnableAdaptiveQuant),
            ONOFF(p->bEnableSceneChangeDetect), ONOFF(p->bEnableLongTermReference), p->iSpatialLayerNum, p->iTemporalLayerNum,
            PARAMS_NAME(p->iLoopFilterDisableIdc, deblockKeys, deblockNames, b6), p->iMinQp, p->iMaxQp,
            PARAMS_NAME((int)l->uiProfileIdc, profileKeys, profileNames, b7));
#undef ONOFF
    fflush(f);
}
#endif
