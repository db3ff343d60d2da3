/*
 * frametap.h: the shared-memory format of camcap's frame tap (`camcap ... --tap NAME`, the library's FrameTap),
 * version 1. A C reader includes this header; Examples/FrameTap/frametap.py is the same reader in Python, and
 * docs/processing.md ("Frame tap") describes the protocol.
 *
 * Discovery: connect (SOCK_STREAM) to the tap's Unix socket, $XDG_RUNTIME_DIR/camcap-tap-NAME.sock (else
 * /tmp/camcap-tap-NAME.sock, or NAME itself when it contains a '/'). The tap sends one message: a line of JSON
 * ({"format": "camcap-frametap", "version": 1, "generation": ..., "slots": ..., "slot_size": ..., "header_size": ...,
 * "slot_header_size": ..., "size": ..., "pixel_format": "I420", "width": ..., "height": ..., "pid": ...}) with the
 * ring's memfd in SCM_RIGHTS (read-only). mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0). Keep the connection open
 * while reading: the tap counts its readers by their connections. The socket file's mode (0600, or 0660) is the
 * access control.
 *
 * Layout: a struct frametap_header at offset 0; slot i at header_size + i * slot_size, a struct frametap_slot
 * followed by the planes (Y, U, V, packed: strides equal to the widths; contiguous, data_size bytes from offset_y).
 * Frame number s (1, 2, 3...) goes into slot s % slot_count. Little-endian, naturally aligned.
 *
 * Reading frame s (a seqlock; the writer never waits for readers):
 *   slot = base + header_size + (s % slot_count) * slot_size;
 *   s1 = load_acquire(&slot->seqlock);  if (s1 & 1) -> being written (a later frame): missed
 *   if (slot->sequence != s) -> overwritten: missed (or not written yet, if s > latest_sequence)
 *   copy (or use) the header fields and the planes; check every size against slot_size before using it
 *   atomic_thread_fence(memory_order_acquire); s2 = load_relaxed(&slot->seqlock);
 *   s1 == s2 -> the copy is whole; else it was torn: drop it (missed).
 * latest_sequence is the last frame completely written; a reader that falls more than slot_count - 1 frames behind
 * misses frames and sees it from the sequence numbers. When flags has FRAMETAP_FLAG_RETIRED the writer stopped, or
 * moved to a new, larger ring (a picture larger than max_data_size): reconnect to get it (generation is one higher).
 * Pictures smaller than max_data_size (a camera's source change) stay in the same ring: each slot has its own size.
 */
#ifndef CAMCAP_FRAMETAP_H
#define CAMCAP_FRAMETAP_H

#include <stdint.h>

#define FRAMETAP_MAGIC 0x50415443u /* "CTAP" in memory */
#define FRAMETAP_VERSION 1u
#define FRAMETAP_FLAG_RETIRED 1u     /* frametap_header.flags */
#define FRAMETAP_SLOT_FULL_RANGE 1u  /* frametap_slot.flags: samples 0...255 (else 16...235) */

struct frametap_header {
    uint32_t magic;            /*   0: FRAMETAP_MAGIC */
    uint32_t version;          /*   4: FRAMETAP_VERSION */
    uint32_t header_size;      /*   8: bytes before slot 0 (4096) */
    uint32_t slot_count;       /*  12 */
    uint64_t slot_size;        /*  16: bytes per slot, its header included (whole pages) */
    uint32_t slot_header_size; /*  24: bytes of struct frametap_slot as written (128) */
    uint32_t generation;       /*  28: 1, then one more for each new ring of the same tap */
    uint64_t latest_sequence;  /*  32: the last frame completely written (0: none yet) */
    uint32_t flags;            /*  40: FRAMETAP_FLAG_RETIRED */
    uint32_t writer_pid;       /*  44 */
    uint64_t total_size;       /*  48: header_size + slot_count * slot_size */
    uint64_t max_data_size;    /*  56: the largest picture (planes) a slot holds */
    uint8_t reserved[64];      /*  64...127 */
};

struct frametap_slot {
    uint64_t seqlock;          /*   0: odd while the writer writes this slot */
    uint64_t sequence;         /*   8: the frame's number (1, 2, 3...) */
    int64_t timestamp_ns;      /*  16: capture time, CLOCK_MONOTONIC nanoseconds */
    uint64_t camera_sequence;  /*  24: the camera's frame number (skips where it dropped frames) */
    uint32_t width;            /*  32 */
    uint32_t height;           /*  36 */
    uint32_t stride_y;         /*  40: = width */
    uint32_t stride_u;         /*  44: = (width + 1) / 2 */
    uint32_t stride_v;         /*  48: = (width + 1) / 2 */
    uint32_t rotation;         /*  52: degrees to turn clockwise to be upright (metadata) */
    uint32_t offset_y;         /*  56: from the slot's start */
    uint32_t offset_u;         /*  60 */
    uint32_t offset_v;         /*  64 */
    uint32_t flags;            /*  68: FRAMETAP_SLOT_FULL_RANGE */
    uint64_t data_size;        /*  72: bytes of Y, U and V from offset_y */
    uint8_t reserved[48];      /*  80...127 */
};

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(struct frametap_header) == 128, "frametap_header is 128 bytes");
_Static_assert(sizeof(struct frametap_slot) == 128, "frametap_slot is 128 bytes");
#endif

#endif /* CAMCAP_FRAMETAP_H */
