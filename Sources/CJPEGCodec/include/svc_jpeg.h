#ifndef CJPEGCODEC_SVC_JPEG_H
#define CJPEGCODEC_SVC_JPEG_H
/*
 * A JPEG decoder (MJPEG camera frames to I420) and a strip encoder (fixture cameras' MJPEG) over
 * libjpeg(-turbo), each kept across frames: after the first frame of a size they allocate nothing
 * (svc_jpeg.c explains the arena). libjpeg's errors never print and never abort: a call returns an error
 * code and the message is kept for svc_jpeg_*_message. The handles are opaque; libjpeg's headers stay
 * inside svc_jpeg.c.
 */

typedef struct svc_jpeg_decoder svc_jpeg_decoder;
typedef struct svc_jpeg_encoder svc_jpeg_encoder;

enum {
    SVC_JPEG_OK = 0,
    SVC_JPEG_ERROR = 1,          /* libjpeg error; message via svc_jpeg_decoder_message */
    SVC_JPEG_SIZE_MISMATCH = 2,  /* the JPEG's size is not the expected one (width/height are set) */
    SVC_JPEG_UNSUPPORTED = 3,    /* colour space or sampling this decoder does not map to I420 */
    SVC_JPEG_NO_MEMORY = 4
};

/* ---- Decoder ---------------------------------------------------------------------------------- */

/* NULL when out of memory. */
svc_jpeg_decoder *svc_jpeg_decoder_create(void);
void svc_jpeg_decoder_destroy(svc_jpeg_decoder *d);
/* The last error's or warning's text ("" when none). */
const char *svc_jpeg_decoder_message(const svc_jpeg_decoder *d);
/* Times the arena grew (once per new size; steady state adds none). */
unsigned long svc_jpeg_decoder_growths(const svc_jpeg_decoder *d);
/* The widest SIMD the reduced inverse DCT may use: 2 (default) AVX2 where the CPU has it, 1 SSE2. The pictures
 * are the same byte for byte; tests hold the two to that. */
void svc_jpeg_decoder_set_simd(svc_jpeg_decoder *d, int level);

/*
 * Decodes one JPEG of expectedWidth x expectedHeight into I420 planes (4:2:0 straight into the planes;
 * 4:2:2, 4:4:0, 4:4:4 through a band buffer, chroma averaged; greyscale with neutral chroma). With a
 * scaleDenominator of 2, 4 or 8 the inverse DCT itself gives a picture that much smaller a side (the planes are
 * then ceil(width / denominator) x ceil(height / denominator)): decoding and downscaling in one pass. At 1/2 and
 * 1/4 the inverse DCT is our own (svc_jpeg.c explains it), and 4:4:4 chroma also goes straight into the planes.
 * The image's size is returned in *width and *height whenever the header was read. Returns an SVC_JPEG_ code.
 */
int svc_jpeg_decode_i420(svc_jpeg_decoder *d, const unsigned char *data, unsigned long size,
                         int expectedWidth, int expectedHeight, int scaleDenominator, int *width, int *height,
                         unsigned char *y, int strideY, unsigned char *u, int strideU,
                         unsigned char *v, int strideV);

/* ---- Encoder of restart-interval tiles (fixture cameras' MJPEG) ------------------------------- */

/* quality 1...100; NULL when out of memory. */
svc_jpeg_encoder *svc_jpeg_encoder_create(int quality);
void svc_jpeg_encoder_destroy(svc_jpeg_encoder *e);
const char *svc_jpeg_encoder_message(const svc_jpeg_encoder *e);
unsigned long svc_jpeg_encoder_growths(const svc_jpeg_encoder *e);

/*
 * Encodes a strip of an I420 picture (at most 16 rows, whole 4:2:0 MCUs) as a baseline JPEG with the
 * standard Huffman tables and a restart marker every `restartMCUs` MCUs, into `out` (no reallocation:
 * a JPEG that does not fit is an error). A frame built from such strips' entropy-coded segments,
 * separated by RSTn markers, is one valid JPEG whose restart interval is `restartMCUs`: a camera
 * simulator re-encodes only the tiles whose pixels changed.
 * rows: 1...16 picture rows starting at the given plane pointers (chroma rows (rows+1)/2); rows below are
 * the last row repeated. Returns the JPEG's length, or 0 on error (message via svc_jpeg_encoder_message).
 */
unsigned long svc_jpeg_encode_strip(svc_jpeg_encoder *e, const unsigned char *y, int strideY,
                                    const unsigned char *u, int strideU, const unsigned char *v, int strideV,
                                    int width, int rows, int restartMCUs,
                                    unsigned char *out, unsigned long capacity);

/*
 * Encodes a whole I420 picture of width x height (1...16384 a side) as one baseline 4:2:0 JPEG (standard
 * Huffman tables, no restart markers) into `out` (no reallocation: a JPEG that does not fit is an error;
 * svc_jpeg_picture_capacity gives a size that always fits). Rows and columns past an odd edge repeat the last.
 * Returns the JPEG's length, or 0 on error (message via svc_jpeg_encoder_message).
 */
unsigned long svc_jpeg_encode_picture(svc_jpeg_encoder *e, const unsigned char *y, int strideY,
                                      const unsigned char *u, int strideU, const unsigned char *v, int strideV,
                                      int width, int height, unsigned char *out, unsigned long capacity);

/* A capacity that holds the JPEG of any width x height picture from svc_jpeg_encode_picture. */
unsigned long svc_jpeg_picture_capacity(int width, int height);

#endif
