/* The JPEG decoder (MJPEG frames to I420) and strip encoder (fixture cameras' MJPEG) over libjpeg(-turbo);
 * the API is in include/svc_jpeg.h. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "svc_jpeg.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

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

typedef struct svc_jpeg_decoder {
    svc_jpeg_arena arena;
    struct jpeg_decompress_struct cinfo;
    int created;
    unsigned char *scratch;     /* rows past a plane's end, and bands for chroma resampling */
    size_t scratchSize;
    JSAMPROW rows[3][4 * DCTSIZE];
} svc_jpeg_decoder;

svc_jpeg_decoder *svc_jpeg_decoder_create(void) {
    svc_jpeg_decoder *d = (svc_jpeg_decoder *)calloc(1, sizeof(svc_jpeg_decoder));
    if (!d) return NULL;
    d->cinfo.err = jpeg_std_error(&d->arena.err);
    d->arena.err.error_exit = svc_jpeg_error_exit;
    d->arena.err.output_message = svc_jpeg_output_message;
    d->cinfo.client_data = &d->arena;
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
    /* Samples libjpeg writes per row of each component (whole blocks). */
    size_t written[3];
    for (int k = 0; k < n; k++) written[k] = (size_t)ci[k].width_in_blocks * (size_t)ci[k].DCT_scaled_size;
    int directY = written[0] <= (size_t)strideY;
    int directC = !grey && fh == 1 && fv == 1 && written[1] <= (size_t)strideU && written[2] <= (size_t)strideV;
    size_t trashBytes = (written[0] + 127) & ~(size_t)63;
    size_t bandStride = n > 1 ? ((written[1] + 127) & ~(size_t)63) : 0;
    int bandRows = n > 1 ? ci[1].v_samp_factor * sc : 0;
    size_t lumaBandRows = directY ? 0 : (size_t)mv * s;
    size_t need = trashBytes + (directC ? 0 : 2 * bandStride * bandRows) + lumaBandRows * trashBytes;
    if (need > d->scratchSize) {
        free(d->scratch);
        d->scratch = (unsigned char *)aligned_alloc(64, (need + 63) & ~(size_t)63);
        d->scratchSize = d->scratch ? need : 0;
        if (!d->scratch) { jpeg_abort_decompress(c); return SVC_JPEG_NO_MEMORY; }
    }
    unsigned char *trash = d->scratch;
    unsigned char *bands[2] = { trash + trashBytes, trash + trashBytes + bandStride * bandRows };
    unsigned char *lumaBand = trash + trashBytes + (directC ? 0 : 2 * bandStride * bandRows);
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
                int sr = imcu * bandRows + r;
                d->rows[k][r] = directC ? (sr < ch ? planes[k] + (size_t)sr * strides[k] : trash) : bands[k - 1] + (size_t)r * bandStride;
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
            for (int k = 1; k < 3; k++)
                svc_jpeg_resample_band(bands[k - 1], bandStride, rowsHere, compWidth, fh, fv, planes[k], strides[k],
                                       imcu * bandRows / fv, ch, cw);
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
