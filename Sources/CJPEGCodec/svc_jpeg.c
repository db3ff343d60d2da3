/* The JPEG decoder (MJPEG frames to I420) and strip encoder (fixture cameras' MJPEG) over libjpeg(-turbo);
 * the API is in include/svc_jpeg.h. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include "svc_jpeg.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <stddef.h>
#include <math.h>
#include <jpeglib.h>
#include <jerror.h>
#include <jpegint.h>    /* struct jpeg_inverse_dct: libjpeg's per-component IDCT table, see svc_jpeg_reduced */

/*
 * libjpeg(-turbo) kept across frames, for MJPEG without per-frame heap allocations.
 *
 * libjpeg allocates its per-image state ("JPOOL_IMAGE": component info, Huffman derived tables, IDCT
 * and coefficient buffers) with malloc on every image and frees it when the image ends. svc_jpeg_arena
 * replaces the memory manager's allocation methods for that pool with a bump allocator over one block
 * that is reset when libjpeg frees the pool; requests that do not fit go to libjpeg's own allocator
 * (and are freed by it), and the block grows to the measured need between images. After the first
 * frame of a size, decoding and encoding allocate nothing. libjpeg's errors longjmp back into these
 * functions (Swift cannot host a setjmp), and its messages are kept, never printed.
 */

typedef struct svc_jpeg_arena {
    unsigned char *block;
    size_t size, used, demand;
    /* libjpeg's own methods: the permanent pool and requests the block cannot hold. */
    void *(*base_alloc_small)(j_common_ptr, int, size_t);
    void *(*base_alloc_large)(j_common_ptr, int, size_t);
    JSAMPARRAY (*base_alloc_sarray)(j_common_ptr, int, JDIMENSION, JDIMENSION);
    JBLOCKARRAY (*base_alloc_barray)(j_common_ptr, int, JDIMENSION, JDIMENSION);
    void (*base_free_pool)(j_common_ptr, int);
    unsigned long growths;      /* times the block was (re)allocated */
    struct jpeg_error_mgr err;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} svc_jpeg_arena;

static svc_jpeg_arena *svc_jpeg_arena_of(j_common_ptr cinfo) { return (svc_jpeg_arena *)cinfo->client_data; }

static void *svc_jpeg_arena_take(svc_jpeg_arena *a, size_t n) {
    a->demand += n + 64;
    size_t start = (a->used + 63) & ~(size_t)63;
    if (start > a->size || n > a->size - start) return NULL;
    a->used = start + n;
    return a->block + start;
}

static void *svc_jpeg_alloc_small(j_common_ptr cinfo, int pool, size_t n) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    void *p = pool == JPOOL_IMAGE ? svc_jpeg_arena_take(a, n) : NULL;
    return p ? p : a->base_alloc_small(cinfo, pool, n);
}

static void *svc_jpeg_alloc_large(j_common_ptr cinfo, int pool, size_t n) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    void *p = pool == JPOOL_IMAGE ? svc_jpeg_arena_take(a, n) : NULL;
    return p ? p : a->base_alloc_large(cinfo, pool, n);
}

static JSAMPARRAY svc_jpeg_alloc_sarray(j_common_ptr cinfo, int pool, JDIMENSION samples, JDIMENSION rows) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    if (pool == JPOOL_IMAGE && rows > 0 && samples > 0) {
        /* Rows 64-byte aligned and padded like libjpeg-turbo's own (its SIMD reads whole vectors). */
        size_t rowBytes = ((size_t)samples * sizeof(JSAMPLE) + 127) & ~(size_t)63;
        size_t ptrBytes = ((size_t)rows * sizeof(JSAMPROW) + 63) & ~(size_t)63;
        unsigned char *p = (unsigned char *)svc_jpeg_arena_take(a, ptrBytes + rowBytes * rows);
        if (p) {
            JSAMPARRAY arr = (JSAMPARRAY)p;
            for (JDIMENSION r = 0; r < rows; r++) arr[r] = (JSAMPROW)(p + ptrBytes + rowBytes * r);
            return arr;
        }
    }
    return a->base_alloc_sarray(cinfo, pool, samples, rows);
}

static JBLOCKARRAY svc_jpeg_alloc_barray(j_common_ptr cinfo, int pool, JDIMENSION blocks, JDIMENSION rows) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    if (pool == JPOOL_IMAGE && rows > 0 && blocks > 0) {
        size_t rowBytes = ((size_t)blocks * sizeof(JBLOCK) + 63) & ~(size_t)63;
        size_t ptrBytes = ((size_t)rows * sizeof(JBLOCKROW) + 63) & ~(size_t)63;
        unsigned char *p = (unsigned char *)svc_jpeg_arena_take(a, ptrBytes + rowBytes * rows);
        if (p) {
            JBLOCKARRAY arr = (JBLOCKARRAY)p;
            for (JDIMENSION r = 0; r < rows; r++) arr[r] = (JBLOCKROW)(p + ptrBytes + rowBytes * r);
            return arr;
        }
    }
    return a->base_alloc_barray(cinfo, pool, blocks, rows);
}

static void svc_jpeg_free_pool(j_common_ptr cinfo, int pool) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    a->base_free_pool(cinfo, pool);
    if (pool != JPOOL_IMAGE) return;
    if (a->demand > a->size) {   /* the image needed more: grow between images, not during one */
        size_t want = a->demand + a->demand / 4 + 4096;
        free(a->block);
        a->block = (unsigned char *)aligned_alloc(64, (want + 63) & ~(size_t)63);
        a->size = a->block ? want : 0;
        a->growths++;
    }
    a->used = 0; a->demand = 0;
}

static void svc_jpeg_error_exit(j_common_ptr cinfo) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    (*cinfo->err->format_message)(cinfo, a->message);
    longjmp(a->jump, 1);
}

/* Warnings (corrupt data that libjpeg works around) are kept, not printed: libraries never print. */
static void svc_jpeg_output_message(j_common_ptr cinfo) {
    svc_jpeg_arena *a = svc_jpeg_arena_of(cinfo);
    (*cinfo->err->format_message)(cinfo, a->message);
}

static void svc_jpeg_arena_install(j_common_ptr cinfo, svc_jpeg_arena *a) {
    struct jpeg_memory_mgr *m = cinfo->mem;
    cinfo->client_data = a;
    a->base_alloc_small = m->alloc_small; a->base_alloc_large = m->alloc_large;
    a->base_alloc_sarray = m->alloc_sarray; a->base_alloc_barray = m->alloc_barray;
    a->base_free_pool = m->free_pool;
    m->alloc_small = svc_jpeg_alloc_small; m->alloc_large = svc_jpeg_alloc_large;
    m->alloc_sarray = svc_jpeg_alloc_sarray; m->alloc_barray = svc_jpeg_alloc_barray;
    m->free_pool = svc_jpeg_free_pool;
}

/* ---- Decoder ---------------------------------------------------------------------------------- */

/* Our reduced inverse DCT for one component (see svc_jpeg_reduced below). */
typedef struct svc_jpeg_reduced {
    int dc;                     /* the DC's multiplier, 2^K scaled (the 4x4's flat blocks) */
    short first[4][8];          /* 4x4: the dequantising first-pass constants, see svc_jpeg_idct_4x4_any */
    int m[4];                   /* 2x2: dequantising multipliers of coefficients (0,0) (0,1) (1,0) (1,1), 2^K2 scaled */
} svc_jpeg_reduced;

typedef struct svc_jpeg_decoder {
    svc_jpeg_arena arena;
    struct jpeg_decompress_struct cinfo;
    int created;
    unsigned char *scratch;     /* rows past a plane's end, and bands for chroma resampling */
    size_t scratchSize;
    JSAMPROW rows[3][4 * DCTSIZE];
    svc_jpeg_reduced reduced[3];
    int simd;                   /* 2: AVX2 where the CPU has it; 1: SSE2 only (tests compare the two) */
} svc_jpeg_decoder;

svc_jpeg_decoder *svc_jpeg_decoder_create(void) {
    svc_jpeg_decoder *d = (svc_jpeg_decoder *)calloc(1, sizeof(svc_jpeg_decoder));
    if (!d) return NULL;
    d->cinfo.err = jpeg_std_error(&d->arena.err);
    d->arena.err.error_exit = svc_jpeg_error_exit;
    d->arena.err.output_message = svc_jpeg_output_message;
    d->cinfo.client_data = &d->arena;
    d->simd = 2;
    if (setjmp(d->arena.jump)) { free(d); return NULL; }
    jpeg_create_decompress(&d->cinfo);
    d->created = 1;
    svc_jpeg_arena_install((j_common_ptr)&d->cinfo, &d->arena);
    return d;
}

void svc_jpeg_decoder_destroy(svc_jpeg_decoder *d) {
    if (!d) return;
    if (d->created) jpeg_destroy_decompress(&d->cinfo);
    free(d->arena.block); free(d->scratch); free(d);
}

const char *svc_jpeg_decoder_message(const svc_jpeg_decoder *d) { return d->arena.message; }
unsigned long svc_jpeg_decoder_growths(const svc_jpeg_decoder *d) { return d->arena.growths; }
void svc_jpeg_decoder_set_simd(svc_jpeg_decoder *d, int level) { d->simd = level; }

/* Averages fh x fv sample groups of a band of component rows into destination rows (fh, fv in {1, 2}). */
static void svc_jpeg_resample_band(const unsigned char *band, size_t bandStride, int bandRows, int compWidth,
                                          int fh, int fv, unsigned char *dst, int dstStride, int dstRow0,
                                          int dstRows, int dstWidth) {
    for (int r = 0; r + 0 < bandRows; r += fv) {
        int dr = dstRow0 + r / fv;
        if (dr >= dstRows) break;
        const unsigned char *restrict a = band + (size_t)r * bandStride;
        const unsigned char *restrict b = (fv == 2 && r + 1 < bandRows) ? a + bandStride : a;
        unsigned char *restrict o = dst + (size_t)dr * dstStride;
        if (fh == 1) {
            if (fv == 1) memcpy(o, a, (size_t)dstWidth);
            else for (int x = 0; x < dstWidth; x++) o[x] = (unsigned char)((a[x] + b[x] + 1) >> 1);
        } else {
            /* Pairs inside the component first, with no test per sample (the compiler vectorises it: with a reduced
             * DCT libjpeg gives chroma at twice the I420 size, so this runs over every chroma sample); then the
             * last column when the component is odd-wide, its one sample taken twice ((2a + 2b + 2) >> 2). */
            int pairs = dstWidth < compWidth / 2 ? dstWidth : compWidth / 2;
            int x = 0;
#if defined(__SSE2__)
            /* 16 outputs from 32 samples of each row: even and odd samples widened to 16 bits, summed, rounded. */
            const __m128i lowBytes = _mm_set1_epi16(0x00FF), two = _mm_set1_epi16(2);
            for (; x + 16 <= pairs; x += 16) {
                __m128i a0 = _mm_loadu_si128((const __m128i *)(a + 2 * x)), a1 = _mm_loadu_si128((const __m128i *)(a + 2 * x + 16));
                __m128i b0 = _mm_loadu_si128((const __m128i *)(b + 2 * x)), b1 = _mm_loadu_si128((const __m128i *)(b + 2 * x + 16));
                __m128i s0 = _mm_add_epi16(_mm_add_epi16(_mm_and_si128(a0, lowBytes), _mm_srli_epi16(a0, 8)),
                                           _mm_add_epi16(_mm_and_si128(b0, lowBytes), _mm_srli_epi16(b0, 8)));
                __m128i s1 = _mm_add_epi16(_mm_add_epi16(_mm_and_si128(a1, lowBytes), _mm_srli_epi16(a1, 8)),
                                           _mm_add_epi16(_mm_and_si128(b1, lowBytes), _mm_srli_epi16(b1, 8)));
                s0 = _mm_srli_epi16(_mm_add_epi16(s0, two), 2);
                s1 = _mm_srli_epi16(_mm_add_epi16(s1, two), 2);
                _mm_storeu_si128((__m128i *)(o + x), _mm_packus_epi16(s0, s1));
            }
#endif
            for (; x < pairs; x++)
                o[x] = (unsigned char)((a[2 * x] + a[2 * x + 1] + b[2 * x] + b[2 * x + 1] + 2) >> 2);
            for (x = pairs; x < dstWidth; x++) o[x] = (unsigned char)((a[2 * x] + b[2 * x] + 1) >> 1);
        }
    }
}

/*
 * Our own reduced inverse DCT, in place of libjpeg's for the sizes that matter (1/2 and 1/4 scale).
 *
 * libjpeg-turbo's reduced IDCTs (SSE2 on x86-64) use the odd high frequencies too, so as to give the box average,
 * and for subsampled chroma it picks a bigger IDCT than I420 needs (chroma comes out at twice the I420 size and is
 * averaged afterwards). Measured on 1080p MJPEG to 540p: chroma at its I420 size saves 2.9 M instructions a
 * frame, this 4x4 for luma 4.9 M more (docs/JOURNAL.md). After
 * jpeg_start_decompress has chosen its methods, svc_jpeg_decode_i420 replaces the entries of libjpeg's IDCT table
 * (jpegint.h's struct jpeg_inverse_dct, which libjpeg reads for every block) with these: a 4x4 in SSE2 and a
 * scalar 2x2, for luma, and for 4:2:0 chroma, which then goes straight into the I420 planes at its final size.
 *
 * Each output sample is the average of the 8/N x 8/N full-size samples it covers, computed from the block's N x N
 * lowest-frequency coefficients: averaging f samples of cos((2x+1)u pi/16) gives cos((2m+1)u pi/(2N)) times
 * g(u) (the mean of cos(j u pi/16) over the f offsets j in -f+1, -f+3 ... f-1), so the N-point IDCT of the
 * coefficients weighted by g(u) is the box average of the full decode, up to the dropped higher frequencies.
 * The weights, the dequantisation and 1/2 C(u) of the 8-point IDCT are folded into per-component multipliers.
 */
static const double svc_jpeg_pi = 3.14159265358979323846;

/* Weight of frequency k (0...N-1) for an N-sample output side: 1/2 C(k) g(k), times the butterfly's cos(pi/4)
 * for k = N/2 (the 4-point even part and the 2-point odd part use it as their only multiplier). */
static double svc_jpeg_reduced_weight(int n, int k) {
    int f = DCTSIZE / n;
    double g = 0;
    for (int j = -f + 1; j <= f - 1; j += 2) g += cos(j * k * svc_jpeg_pi / 16);
    g /= f;
    double w = 0.5 * (k == 0 ? sqrt(0.5) : 1.0) * g;
    if (k == n / 2) w *= cos(svc_jpeg_pi / 4);
    return w;
}

#define SVC_IDCT_P 9     /* fraction bits of the first pass's constants */
#define SVC_IDCT_K 13    /* fraction bits of the second pass's constants */
#define SVC_IDCT_K2 8    /* fraction bits of the 2x2's multipliers */
#define SVC_IDCT2_MAX 16000  /* their bound: 4 x 32768 x 16000 + the level shift stays below 2^31 */
/* The second pass's odd-part constants cos(pi/8) and cos(3pi/8), 2^K scaled. */
#define SVC_IDCT_C1 ((short)(0.92387953251128674 * (1 << SVC_IDCT_K) + 0.5))
#define SVC_IDCT_C3 ((short)(0.38268343236508978 * (1 << SVC_IDCT_K) + 0.5))

/* Sets up component `ci` for an N x N output (N = 4 or 2) from its quantisation table; 0 when the table does
 * not fit the fixed-point ranges (16-bit tables with large steps), and libjpeg's IDCT stays. */
static int svc_jpeg_reduced_setup(svc_jpeg_reduced *r, const JQUANT_TBL *q, int n) {
    if (!q) return 0;
    double w[4];
    for (int k = 0; k < n; k++) w[k] = svc_jpeg_reduced_weight(n, k);
    double m[4][4];
    for (int v = 0; v < n; v++)
        for (int u = 0; u < n; u++) m[v][u] = q->quantval[v * DCTSIZE + u] * w[v] * w[u];
    if (n == 4) {
#if defined(__SSE2__)
        const double c1 = cos(svc_jpeg_pi / 8), c3 = cos(3 * svc_jpeg_pi / 8), one = 1 << SVC_IDCT_P;
        short t[4][8];
        for (int v = 0; v < 4; v++) {
            double e0a = m[v][0], e0b = m[v][2], o0a = m[v][1] * c1, o0b = m[v][3] * c3, o1a = m[v][1] * c3, o1b = -m[v][3] * c1;
            double vals[4][2] = { { e0a, e0b }, { e0a, -e0b }, { o0a, o0b }, { o1a, o1b } };
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 2; j++) {
                    double x = vals[i][j] * one;
                    if (x > 32767 || x < -32767) return 0;
                    t[i][2 * v + j] = (short)lround(x);
                }
        }
        memcpy(r->first, t, sizeof t);
#else
        return 0;
#endif
    } else if (n == 2) {
        for (int i = 0; i < 4; i++) {
            double x = m[i / 2][i % 2] * (1 << SVC_IDCT_K2);
            if (x > SVC_IDCT2_MAX) return 0;
            r->m[i] = (int)lround(x);
        }
    } else {
        return 0;
    }
    r->dc = (int)lround(m[0][0] * (1 << SVC_IDCT_K));
    return 1;
}

static svc_jpeg_decoder *svc_jpeg_decoder_of(j_decompress_ptr cinfo) {
    return (svc_jpeg_decoder *)(void *)((char *)cinfo - offsetof(svc_jpeg_decoder, cinfo));
}

static inline JSAMPLE svc_jpeg_clamp(long long x) { return (JSAMPLE)(x < 0 ? 0 : x > 255 ? 255 : x); }

/* Chroma: when none of the 15 AC coefficients of the 4x4 corner is set (most chroma blocks of a camera picture),
 * every sample is the DC's; writes them and returns 1. */
static inline __attribute__((always_inline)) int svc_jpeg_flat_4x4(const svc_jpeg_reduced *r, JCOEFPTR coef, JSAMPARRAY out,
                                                                   JDIMENSION col) {
    unsigned long long q0, q1, q2, q3;
    memcpy(&q0, coef, 8); memcpy(&q1, coef + 8, 8); memcpy(&q2, coef + 16, 8); memcpy(&q3, coef + 24, 8);
    if (((q0 & ~0xFFFFull) | q1 | q2 | q3) != 0) return 0;
    JSAMPLE v = svc_jpeg_clamp(((long long)coef[0] * r->dc + (128 << SVC_IDCT_K) + (1 << (SVC_IDCT_K - 1))) >> SVC_IDCT_K);
    unsigned int four = 0x01010101u * v;
    memcpy(out[0] + col, &four, 4); memcpy(out[1] + col, &four, 4);
    memcpy(out[2] + col, &four, 4); memcpy(out[3] + col, &four, 4);
    return 1;
}

#if defined(__SSE2__)
/* 4x4 samples from the 4x4 lowest coefficients. First pass along each coefficient row (lanes: the row v),
 * dequantising in the multiply-adds; second pass down the columns (lanes: the output column x), so the rows of
 * the result come out in order with no transpose. */
static inline __attribute__((always_inline)) void svc_jpeg_idct_4x4_any(j_decompress_ptr cinfo, jpeg_component_info *compptr,
                                                                        JCOEFPTR coef, JSAMPARRAY out, JDIMENSION col, int component) {
    const svc_jpeg_reduced *r = &svc_jpeg_decoder_of(cinfo)->reduced[component < 0 ? compptr->component_index : component];
    if (component < 0 && svc_jpeg_flat_4x4(r, coef, out, col)) return;
    /* Rows 0-1 and 2-3 of the coefficients' top-left 4x4, as (c0, c2, c1, c3) of each row. */
    __m128i a = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)coef), _mm_loadl_epi64((const __m128i *)(coef + 8)));
    __m128i b = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(coef + 16)), _mm_loadl_epi64((const __m128i *)(coef + 24)));
    a = _mm_shufflehi_epi16(_mm_shufflelo_epi16(a, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
    b = _mm_shufflehi_epi16(_mm_shufflelo_epi16(b, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
    /* even: (c0, c2) of rows 0...3; odd: (c1, c3) of rows 0...3 */
    __m128i even = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(2, 0, 2, 0)));
    __m128i odd = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(3, 1, 3, 1)));
    __m128i e0 = _mm_madd_epi16(even, _mm_loadu_si128((const __m128i *)r->first[0]));
    __m128i e1 = _mm_madd_epi16(even, _mm_loadu_si128((const __m128i *)r->first[1]));
    __m128i o0 = _mm_madd_epi16(odd, _mm_loadu_si128((const __m128i *)r->first[2]));
    __m128i o1 = _mm_madd_epi16(odd, _mm_loadu_si128((const __m128i *)r->first[3]));
    /* h[x]: lanes v, scaled by 2^P; kept with 3 fraction bits in 16 bits. (e + o can wrap in 32 bits only for
     * coefficients no valid stream has, about 6.6M dequantised: a wrong sample then, never a wrong address.) */
    const __m128i round1 = _mm_set1_epi32(1 << (SVC_IDCT_P - 4));
    __m128i h0 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(e0, o0), round1), SVC_IDCT_P - 3);
    __m128i h1 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(e1, o1), round1), SVC_IDCT_P - 3);
    __m128i h2 = _mm_srai_epi32(_mm_add_epi32(_mm_sub_epi32(e1, o1), round1), SVC_IDCT_P - 3);
    __m128i h3 = _mm_srai_epi32(_mm_add_epi32(_mm_sub_epi32(e0, o0), round1), SVC_IDCT_P - 3);
    a = _mm_packs_epi32(h0, h1);  /* h0[v0..3], h1[v0..3] */
    b = _mm_packs_epi32(h2, h3);
    a = _mm_shufflehi_epi16(_mm_shufflelo_epi16(a, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
    b = _mm_shufflehi_epi16(_mm_shufflelo_epi16(b, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
    even = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(2, 0, 2, 0)));
    odd = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(3, 1, 3, 1)));
    const short one = 1 << SVC_IDCT_K;
    const short c1 = SVC_IDCT_C1, c3 = SVC_IDCT_C3;
    e0 = _mm_madd_epi16(even, _mm_set_epi16(one, one, one, one, one, one, one, one));
    e1 = _mm_madd_epi16(even, _mm_set_epi16((short)-one, one, (short)-one, one, (short)-one, one, (short)-one, one));
    o0 = _mm_madd_epi16(odd, _mm_set_epi16(c3, c1, c3, c1, c3, c1, c3, c1));
    o1 = _mm_madd_epi16(odd, _mm_set_epi16((short)-c1, c3, (short)-c1, c3, (short)-c1, c3, (short)-c1, c3));
    /* Rows y = 0...3 (lanes x), scaled by 2^(3+K): level shift, round, descale, clamp. */
    const __m128i bias = _mm_set1_epi32((128 << (3 + SVC_IDCT_K)) + (1 << (2 + SVC_IDCT_K)));
    __m128i y0 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(e0, o0), bias), 3 + SVC_IDCT_K);
    __m128i y1 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(e1, o1), bias), 3 + SVC_IDCT_K);
    __m128i y2 = _mm_srai_epi32(_mm_add_epi32(_mm_sub_epi32(e1, o1), bias), 3 + SVC_IDCT_K);
    __m128i y3 = _mm_srai_epi32(_mm_add_epi32(_mm_sub_epi32(e0, o0), bias), 3 + SVC_IDCT_K);
    __m128i px = _mm_packus_epi16(_mm_packs_epi32(y0, y1), _mm_packs_epi32(y2, y3));
    int row;
    row = _mm_cvtsi128_si32(px); memcpy(out[0] + col, &row, 4);
    row = _mm_cvtsi128_si32(_mm_srli_si128(px, 4)); memcpy(out[1] + col, &row, 4);
    row = _mm_cvtsi128_si32(_mm_srli_si128(px, 8)); memcpy(out[2] + col, &row, 4);
    row = _mm_cvtsi128_si32(_mm_srli_si128(px, 12)); memcpy(out[3] + col, &row, 4);
}

/* Luma: libjpeg's own layout. */
static void svc_jpeg_idct_4x4(j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR coef, JSAMPARRAY out,
                              JDIMENSION outCol) {
    svc_jpeg_idct_4x4_any(cinfo, compptr, coef, out, outCol, 0);  /* luma is component 0 */
}

/* Chroma that libjpeg would give at twice the size: half its columns; most blocks are flat. */
static void svc_jpeg_idct_4x4_half(j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR coef, JSAMPARRAY out,
                                   JDIMENSION outCol) {
    svc_jpeg_idct_4x4_any(cinfo, compptr, coef, out, outCol >> 1, -1);
}

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define SVC_JPEG_AVX2 1
/* The same 4x4 in AVX2 (chosen at run time): each pass's two halves (the even and odd outputs) in the two 128-bit
 * lanes, so one multiply-add does what two do above; the arithmetic is the same, and so are the samples. */
__attribute__((target("avx2"))) static inline void svc_jpeg_idct_4x4_avx2_any(j_decompress_ptr cinfo, jpeg_component_info *compptr,
                                                                              JCOEFPTR coef, JSAMPARRAY out, JDIMENSION col,
                                                                              int component) {
    const svc_jpeg_reduced *r = &svc_jpeg_decoder_of(cinfo)->reduced[component < 0 ? compptr->component_index : component];
    if (component < 0 && svc_jpeg_flat_4x4(r, coef, out, col)) return;
    /* Rows 0-1 and 2-3, each row's first four as (c0, c2, c1, c3); then per lane (v0, v2, v1, v3)'s pairs, and
     * the even pairs (c0, c2) of rows 0...3 in both lanes, the odd pairs (c1, c3) likewise. */
    __m256i r01 = _mm256_shufflelo_epi16(_mm256_loadu_si256((const __m256i *)coef), _MM_SHUFFLE(3, 1, 2, 0));
    __m256i r23 = _mm256_shufflelo_epi16(_mm256_loadu_si256((const __m256i *)(coef + 16)), _MM_SHUFFLE(3, 1, 2, 0));
    __m256i u = _mm256_unpacklo_epi32(r01, r23);  /* lane 0: r0e r2e r0o r2o; lane 1: r1e r3e r1o r3o */
    __m256i even = _mm256_permutevar8x32_epi32(u, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    __m256i odd = _mm256_permutevar8x32_epi32(u, _mm256_setr_epi32(2, 6, 3, 7, 2, 6, 3, 7));
    __m256i pe = _mm256_madd_epi16(even, _mm256_loadu_si256((const __m256i *)r->first[0]));  /* e0 | e1 */
    __m256i po = _mm256_madd_epi16(odd, _mm256_loadu_si256((const __m256i *)r->first[2]));   /* o0 | o1 */
    pe = _mm256_add_epi32(pe, _mm256_set1_epi32(1 << (SVC_IDCT_P - 4)));
    __m256i hs = _mm256_srai_epi32(_mm256_add_epi32(pe, po), SVC_IDCT_P - 3);  /* h0 | h1 */
    __m256i hd = _mm256_srai_epi32(_mm256_sub_epi32(pe, po), SVC_IDCT_P - 3);  /* h3 | h2 */
    __m256i p = _mm256_packs_epi32(hs, hd);  /* lane 0: h0[v0..3] h3[v0..3]; lane 1: h1, h2 */
    p = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(p, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
    /* dwords: x0e x0o x3e x3o | x1e x1o x2e x2o */
    even = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 6, 2, 0, 4, 6, 2));
    odd = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(1, 5, 7, 3, 1, 5, 7, 3));
    const short one = 1 << SVC_IDCT_K;
    const short c1 = SVC_IDCT_C1, c3 = SVC_IDCT_C3;
    pe = _mm256_madd_epi16(even, _mm256_setr_epi16(one, one, one, one, one, one, one, one,
                                                   one, (short)-one, one, (short)-one, one, (short)-one, one, (short)-one));
    po = _mm256_madd_epi16(odd, _mm256_setr_epi16(c1, c3, c1, c3, c1, c3, c1, c3,
                                                  c3, (short)-c1, c3, (short)-c1, c3, (short)-c1, c3, (short)-c1));
    pe = _mm256_add_epi32(pe, _mm256_set1_epi32((128 << (3 + SVC_IDCT_K)) + (1 << (2 + SVC_IDCT_K))));
    __m256i ys = _mm256_srai_epi32(_mm256_add_epi32(pe, po), 3 + SVC_IDCT_K);  /* y0 | y1 */
    __m256i yd = _mm256_srai_epi32(_mm256_sub_epi32(pe, po), 3 + SVC_IDCT_K);  /* y3 | y2 */
    __m256i q = _mm256_packs_epi32(ys, yd);  /* lane 0: y0 y3; lane 1: y1 y2 */
    __m128i px = _mm_packus_epi16(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));  /* y0 y3 y1 y2 */
    int row;
    row = _mm_cvtsi128_si32(px); memcpy(out[0] + col, &row, 4);
    row = _mm_extract_epi32(px, 1); memcpy(out[3] + col, &row, 4);
    row = _mm_extract_epi32(px, 2); memcpy(out[1] + col, &row, 4);
    row = _mm_extract_epi32(px, 3); memcpy(out[2] + col, &row, 4);
}

__attribute__((target("avx2"))) static void svc_jpeg_idct_4x4_avx2(j_decompress_ptr cinfo, jpeg_component_info *compptr,
                                                                   JCOEFPTR coef, JSAMPARRAY out, JDIMENSION outCol) {
    svc_jpeg_idct_4x4_avx2_any(cinfo, compptr, coef, out, outCol, 0);
}

__attribute__((target("avx2"))) static void svc_jpeg_idct_4x4_avx2_half(j_decompress_ptr cinfo, jpeg_component_info *compptr,
                                                                        JCOEFPTR coef, JSAMPARRAY out, JDIMENSION outCol) {
    svc_jpeg_idct_4x4_avx2_any(cinfo, compptr, coef, out, outCol >> 1, -1);
}
#endif
#endif


/* 2x2 samples from the 2x2 lowest coefficients: c00 +- c01 +- c10 +- c11, each dequantised and weighted. */
static inline __attribute__((always_inline)) void svc_jpeg_idct_2x2_any(j_decompress_ptr cinfo, jpeg_component_info *compptr,
                                                                        JCOEFPTR coef, JSAMPARRAY out, JDIMENSION col,
                                                                        int flatTest) {
    const svc_jpeg_reduced *r = &svc_jpeg_decoder_of(cinfo)->reduced[compptr->component_index];
    /* 32-bit is enough: |coefficient| <= 32768 and |m| <= SVC_IDCT2_MAX keep the four terms' sum in range. */
    int a = coef[0] * r->m[0] + (128 << SVC_IDCT_K2) + (1 << (SVC_IDCT_K2 - 1));
    if (flatTest && (coef[1] | coef[DCTSIZE] | coef[DCTSIZE + 1]) == 0) {
        JSAMPLE v = svc_jpeg_clamp(a >> SVC_IDCT_K2);
        out[0][col] = out[0][col + 1] = out[1][col] = out[1][col + 1] = v;
        return;
    }
    int b = coef[1] * r->m[1], c = coef[DCTSIZE] * r->m[2], d = coef[DCTSIZE + 1] * r->m[3];
    int s0 = a + c, s1 = a - c, t0 = b + d, t1 = b - d;
    out[0][col] = svc_jpeg_clamp((s0 + t0) >> SVC_IDCT_K2);
    out[0][col + 1] = svc_jpeg_clamp((s0 - t0) >> SVC_IDCT_K2);
    out[1][col] = svc_jpeg_clamp((s1 + t1) >> SVC_IDCT_K2);
    out[1][col + 1] = svc_jpeg_clamp((s1 - t1) >> SVC_IDCT_K2);
}

static void svc_jpeg_idct_2x2(j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR coef, JSAMPARRAY out,
                              JDIMENSION outCol) {
    svc_jpeg_idct_2x2_any(cinfo, compptr, coef, out, outCol, 0);
}

static void svc_jpeg_idct_2x2_half(j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR coef, JSAMPARRAY out,
                                   JDIMENSION outCol) {
    svc_jpeg_idct_2x2_any(cinfo, compptr, coef, out, outCol >> 1, 1);
}

/* Declared, with what it does, in include/svc_jpeg.h. */
int svc_jpeg_decode_i420(svc_jpeg_decoder *d, const unsigned char *data, unsigned long size,
                         int expectedWidth, int expectedHeight, int scaleDenominator, int *width, int *height,
                         unsigned char *y, int strideY, unsigned char *u, int strideU,
                         unsigned char *v, int strideV) {
    struct jpeg_decompress_struct *c = &d->cinfo;
    *width = 0; *height = 0;
    d->arena.message[0] = 0;
    if (setjmp(d->arena.jump)) { jpeg_abort_decompress(c); return SVC_JPEG_ERROR; }
    d->arena.err.num_warnings = 0;
    jpeg_mem_src(c, data, size);
    if (jpeg_read_header(c, TRUE) != JPEG_HEADER_OK) { jpeg_abort_decompress(c); return SVC_JPEG_ERROR; }
    *width = (int)c->image_width; *height = (int)c->image_height;
    if (*width != expectedWidth || *height != expectedHeight) { jpeg_abort_decompress(c); return SVC_JPEG_SIZE_MISMATCH; }
    int n = c->num_components;
    int grey = n == 1 && c->jpeg_color_space == JCS_GRAYSCALE;
    if (!grey && !(n == 3 && c->jpeg_color_space == JCS_YCbCr)) { jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED; }
    int mh = c->max_h_samp_factor, mv = c->max_v_samp_factor;
    jpeg_component_info *ci = c->comp_info;
    if (ci[0].h_samp_factor != mh || ci[0].v_samp_factor != mv || mv > 4 || mh > 4) { jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED; }
    if (!grey && (ci[1].h_samp_factor != ci[2].h_samp_factor || ci[1].v_samp_factor != ci[2].v_samp_factor)) {
        jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED;
    }
    if (scaleDenominator != 1 && scaleDenominator != 2 && scaleDenominator != 4 && scaleDenominator != 8) {
        jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED;
    }
    /* A reduced DCT: each 8x8 block is inverse-transformed straight to 8/denominator samples a side. */
    c->scale_num = 1; c->scale_denom = (unsigned int)scaleDenominator;
    c->raw_data_out = TRUE;
    c->do_fancy_upsampling = FALSE;
    /* The fast integer IDCT, as libyuv's MJPGToI420 and GStreamer's jpegdec use (libjpeg's default is the slower,
     * more exact one): the same work as the decoders it is compared with; the tests hold the picture within 45 dB
     * of ffmpeg's decode. Block smoothing only concerns progressive JPEGs, which cameras do not send. */
    c->dct_method = JDCT_IFAST;
    c->do_block_smoothing = FALSE;
    jpeg_start_decompress(c);

    /* Samples a block gives, a side: 8 / scaleDenominator for luma. With a reduced DCT libjpeg may give the
     * subsampled chroma blocks more (it scales chroma up in the IDCT rather than upsampling it later), so the
     * chroma-to-I420 ratio comes from the components' scaled sizes, not from their sampling factors alone. */
    int s = ci[0].DCT_scaled_size;
    int sc = grey ? s : ci[1].DCT_scaled_size;
    int fh = 1, fv = 1;   /* chroma component samples per I420 chroma sample, per direction */
    if (!grey) {
        if (ci[2].DCT_scaled_size != sc) { jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED; }
        long hComp = 2L * ci[1].h_samp_factor * sc, hI420 = (long)mh * s;   /* per iMCU, times two */
        long vComp = 2L * ci[1].v_samp_factor * sc, vI420 = (long)mv * s;
        if (hComp == hI420) fh = 1; else if (hComp == 2 * hI420) fh = 2; else { jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED; }
        if (vComp == vI420) fv = 1; else if (vComp == 2 * vI420) fv = 2; else { jpeg_abort_decompress(c); return SVC_JPEG_UNSUPPORTED; }
    }
    int W = (int)c->output_width, H = (int)c->output_height, cw = (W + 1) / 2, ch = (H + 1) / 2;
    /* Our reduced IDCTs where they apply (see svc_jpeg_reduced): luma at 1/2 and 1/4, and chroma that libjpeg would
     * give at twice the I420 size a side (4:2:0, and 4:4:4) made at the I420 size instead, into the planes. */
    int ownChroma = 0;
    if (scaleDenominator == 2 || scaleDenominator == 4) {
        /* By output size: libjpeg's layout (luma), and half libjpeg's columns (chroma it would scale up). */
        inverse_DCT_method_ptr luma[5] = { 0 }, chroma[5] = { 0 };
#if defined(__SSE2__)
        luma[4] = svc_jpeg_idct_4x4; chroma[4] = svc_jpeg_idct_4x4_half;
#if defined(SVC_JPEG_AVX2)
        if (d->simd >= 2 && __builtin_cpu_supports("avx2")) { luma[4] = svc_jpeg_idct_4x4_avx2; chroma[4] = svc_jpeg_idct_4x4_avx2_half; }
#endif
#endif
        luma[2] = svc_jpeg_idct_2x2; chroma[2] = svc_jpeg_idct_2x2_half;
        if ((s == 4 || s == 2) && luma[s] && svc_jpeg_reduced_setup(&d->reduced[0], ci[0].quant_table, s))
            c->idct->inverse_DCT[0] = luma[s];
        int n2 = sc / 2;
        if (!grey && fh == 2 && fv == 2 && (n2 == 4 || n2 == 2) && chroma[n2] && ci[1].h_samp_factor == 1 && ci[1].v_samp_factor == 1
            && (size_t)ci[1].width_in_blocks * (size_t)n2 <= (size_t)strideU && (size_t)ci[2].width_in_blocks * (size_t)n2 <= (size_t)strideV
            && svc_jpeg_reduced_setup(&d->reduced[1], ci[1].quant_table, n2)
            && svc_jpeg_reduced_setup(&d->reduced[2], ci[2].quant_table, n2)) {
            c->idct->inverse_DCT[1] = c->idct->inverse_DCT[2] = chroma[n2];
            ownChroma = 1;
        }
    }
    /* Samples libjpeg writes per row of each component (whole blocks). */
    size_t written[3];
    for (int k = 0; k < n; k++) written[k] = (size_t)ci[k].width_in_blocks * (size_t)ci[k].DCT_scaled_size;
    int directY = written[0] <= (size_t)strideY;
    int directC = !grey && ((fh == 1 && fv == 1 && written[1] <= (size_t)strideU && written[2] <= (size_t)strideV) || ownChroma);
    size_t trashBytes = (written[0] + 127) & ~(size_t)63;
    size_t bandStride = n > 1 ? ((written[1] + 127) & ~(size_t)63) : 0;
    int bandRows = n > 1 ? ci[1].v_samp_factor * sc : 0;
    int planeRows = ownChroma ? bandRows / 2 : bandRows;  /* I420 chroma rows an iMCU row gives, when direct */
    size_t lumaBandRows = directY ? 0 : (size_t)mv * s;
    /* One component row an iMCU row where two make an I420 row (4:2:2 and 4:4:4 at 1/8): the band holds two, the
     * even iMCU row's decoded into the first and the odd one's into the second, and the pair is averaged (not the
     * second taken alone). */
    int pairRows = !grey && !directC && bandRows == 1 && fv == 2;
    int bandHeld = pairRows ? 2 : bandRows;  /* rows each chroma band holds */
    size_t need = trashBytes + (directC ? 0 : 2 * bandStride * bandHeld) + lumaBandRows * trashBytes;
    if (need > d->scratchSize) {
        free(d->scratch);
        d->scratch = (unsigned char *)aligned_alloc(64, (need + 63) & ~(size_t)63);
        d->scratchSize = d->scratch ? need : 0;
        if (!d->scratch) { jpeg_abort_decompress(c); return SVC_JPEG_NO_MEMORY; }
    }
    unsigned char *trash = d->scratch;
    unsigned char *bands[2] = { trash + trashBytes, trash + trashBytes + bandStride * bandHeld };
    unsigned char *lumaBand = trash + trashBytes + (directC ? 0 : 2 * bandStride * bandHeld);
    unsigned char *planes[3] = { y, u, v };
    int strides[3] = { strideY, strideU, strideV };
    int lumaRows = mv * s;
    JSAMPARRAY arrays[3] = { d->rows[0], d->rows[1], d->rows[2] };
    int imcu = 0;
    while (c->output_scanline < c->output_height) {
        for (int r = 0; r < lumaRows; r++) {
            int sr = imcu * lumaRows + r;
            d->rows[0][r] = directY ? (sr < H ? y + (size_t)sr * strideY : trash) : lumaBand + (size_t)r * trashBytes;
        }
        for (int k = 1; k < n; k++) {
            for (int r = 0; r < bandRows; r++) {
                int sr = imcu * planeRows + r;
                d->rows[k][r] = directC ? (r < planeRows && sr < ch ? planes[k] + (size_t)sr * strides[k] : trash)
                                        : bands[k - 1] + (size_t)(pairRows ? (imcu & 1) : r) * bandStride;
            }
        }
        if (jpeg_read_raw_data(c, arrays, (JDIMENSION)lumaRows) == 0) break;
        if (!directY) {
            for (int r = 0; r < lumaRows; r++) {
                int sr = imcu * lumaRows + r;
                if (sr < H) memcpy(y + (size_t)sr * strideY, lumaBand + (size_t)r * trashBytes, (size_t)W);
            }
        }
        if (!grey && !directC) {
            int compWidth = (int)((W * (long)ci[1].h_samp_factor * sc + (long)mh * s - 1) / ((long)mh * s));
            int compHeight = (int)((H * (long)ci[1].v_samp_factor * sc + (long)mv * s - 1) / ((long)mv * s));
            int rowsHere = compHeight - imcu * bandRows < bandRows ? compHeight - imcu * bandRows : bandRows;
            /* A pair: the even iMCU row is written alone (in case no second comes), the odd one averaged with it. */
            for (int k = 1; k < 3; k++)
                svc_jpeg_resample_band(bands[k - 1], bandStride, pairRows ? 1 + (imcu & 1) : rowsHere, compWidth, fh, fv,
                                       planes[k], strides[k], pairRows ? imcu / 2 : imcu * bandRows / fv, ch, cw);
        }
        imcu++;
    }
    if (grey) {
        for (int r = 0; r < ch; r++) { memset(u + (size_t)r * strideU, 128, (size_t)cw); memset(v + (size_t)r * strideV, 128, (size_t)cw); }
    }
    jpeg_finish_decompress(c);
    return SVC_JPEG_OK;
}

/* ---- Encoder of restart-interval tiles (fixture cameras' MJPEG) ------------------------------- */

typedef struct svc_jpeg_encoder {
    svc_jpeg_arena arena;
    struct jpeg_compress_struct cinfo;
    struct jpeg_destination_mgr dest;
    int created;
    JSAMPROW rows[3][2 * DCTSIZE];
} svc_jpeg_encoder;

static void svc_jpeg_dest_init(j_compress_ptr c) { (void)c; }
static boolean svc_jpeg_dest_full(j_compress_ptr c) {
    /* The buffer is sized for the worst case; running out is an error, never a reallocation. */
    c->err->msg_code = JERR_BUFFER_SIZE;
    (*c->err->error_exit)((j_common_ptr)c);
    return FALSE;
}
static void svc_jpeg_dest_term(j_compress_ptr c) { (void)c; }

svc_jpeg_encoder *svc_jpeg_encoder_create(int quality) {
    svc_jpeg_encoder *e = (svc_jpeg_encoder *)calloc(1, sizeof(svc_jpeg_encoder));
    if (!e) return NULL;
    e->cinfo.err = jpeg_std_error(&e->arena.err);
    e->arena.err.error_exit = svc_jpeg_error_exit;
    e->arena.err.output_message = svc_jpeg_output_message;
    e->cinfo.client_data = &e->arena;
    if (setjmp(e->arena.jump)) { if (e->created) jpeg_destroy_compress(&e->cinfo); free(e); return NULL; }
    jpeg_create_compress(&e->cinfo);
    e->created = 1;
    svc_jpeg_arena_install((j_common_ptr)&e->cinfo, &e->arena);
    struct jpeg_compress_struct *c = &e->cinfo;
    c->in_color_space = JCS_YCbCr;
    c->input_components = 3;
    jpeg_set_defaults(c);
    jpeg_set_colorspace(c, JCS_YCbCr);
    jpeg_set_quality(c, quality, TRUE);
    c->raw_data_in = TRUE;
    c->dct_method = JDCT_ISLOW;
    c->optimize_coding = FALSE;
    c->comp_info[0].h_samp_factor = 2; c->comp_info[0].v_samp_factor = 2;
    c->comp_info[1].h_samp_factor = 1; c->comp_info[1].v_samp_factor = 1;
    c->comp_info[2].h_samp_factor = 1; c->comp_info[2].v_samp_factor = 1;
    e->dest.init_destination = svc_jpeg_dest_init;
    e->dest.empty_output_buffer = svc_jpeg_dest_full;
    e->dest.term_destination = svc_jpeg_dest_term;
    c->dest = &e->dest;
    return e;
}

void svc_jpeg_encoder_destroy(svc_jpeg_encoder *e) {
    if (!e) return;
    if (e->created) jpeg_destroy_compress(&e->cinfo);
    free(e->arena.block); free(e);
}

const char *svc_jpeg_encoder_message(const svc_jpeg_encoder *e) { return e->arena.message; }
unsigned long svc_jpeg_encoder_growths(const svc_jpeg_encoder *e) { return e->arena.growths; }

unsigned long svc_jpeg_encode_strip(svc_jpeg_encoder *e, const unsigned char *y, int strideY,
                                    const unsigned char *u, int strideU, const unsigned char *v, int strideV,
                                    int width, int rows, int restartMCUs,
                                    unsigned char *out, unsigned long capacity) {
    struct jpeg_compress_struct *c = &e->cinfo;
    e->arena.message[0] = 0;
    if (rows < 1 || rows > 16 || width < 1) return 0;
    if (setjmp(e->arena.jump)) { jpeg_abort_compress(c); return 0; }
    c->image_width = (JDIMENSION)width;
    c->image_height = (JDIMENSION)rows;
    c->restart_interval = (unsigned int)restartMCUs;
    c->restart_in_rows = 0;
    e->dest.next_output_byte = out;
    e->dest.free_in_buffer = capacity;
    jpeg_start_compress(c, TRUE);
    int crow = (rows + 1) / 2;
    for (int r = 0; r < 16; r++) e->rows[0][r] = (JSAMPROW)(y + (size_t)(r < rows ? r : rows - 1) * strideY);
    for (int r = 0; r < 8; r++) {
        e->rows[1][r] = (JSAMPROW)(u + (size_t)(r < crow ? r : crow - 1) * strideU);
        e->rows[2][r] = (JSAMPROW)(v + (size_t)(r < crow ? r : crow - 1) * strideV);
    }
    JSAMPARRAY arrays[3] = { e->rows[0], e->rows[1], e->rows[2] };
    jpeg_write_raw_data(c, arrays, 16);
    jpeg_finish_compress(c);
    return capacity - (unsigned long)e->dest.free_in_buffer;
}

unsigned long svc_jpeg_picture_capacity(int width, int height) {
    if (width < 1 || height < 1 || width > 16384 || height > 16384) return 0;
    /* Baseline 4:2:0 at any quality stays well below 3 bytes a pixel of the padded picture, plus headers. */
    return (unsigned long)((width + 15) & ~15) * (unsigned long)((height + 15) & ~15) * 3UL + 4096UL;
}

unsigned long svc_jpeg_encode_picture(svc_jpeg_encoder *e, const unsigned char *y, int strideY,
                                      const unsigned char *u, int strideU, const unsigned char *v, int strideV,
                                      int width, int height, unsigned char *out, unsigned long capacity) {
    struct jpeg_compress_struct *c = &e->cinfo;
    e->arena.message[0] = 0;
    if (width < 1 || height < 1 || width > 16384 || height > 16384) return 0;
    if (setjmp(e->arena.jump)) { jpeg_abort_compress(c); return 0; }
    c->image_width = (JDIMENSION)width;
    c->image_height = (JDIMENSION)height;
    c->restart_interval = 0;
    c->restart_in_rows = 0;
    e->dest.next_output_byte = out;
    e->dest.free_in_buffer = capacity;
    jpeg_start_compress(c, TRUE);
    int crows = (height + 1) / 2;
    for (int top = 0; top < height; top += 16) {
        for (int r = 0; r < 16; r++) {
            int row = top + r < height ? top + r : height - 1;
            e->rows[0][r] = (JSAMPROW)(y + (size_t)row * strideY);
        }
        for (int r = 0; r < 8; r++) {
            int row = top / 2 + r < crows ? top / 2 + r : crows - 1;
            e->rows[1][r] = (JSAMPROW)(u + (size_t)row * strideU);
            e->rows[2][r] = (JSAMPROW)(v + (size_t)row * strideV);
        }
        JSAMPARRAY arrays[3] = { e->rows[0], e->rows[1], e->rows[2] };
        jpeg_write_raw_data(c, arrays, 16);
    }
    jpeg_finish_compress(c);
    return capacity - (unsigned long)e->dest.free_in_buffer;
}
