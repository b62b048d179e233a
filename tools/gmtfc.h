/* gmtfc internals: the .gmz stream layer (gmtfc_stream.c) and the
 * benchmark (gmtfc_bench.c), shared with the CLI front end (gmtfc.c).
 *
 * The .gmz stream format is described byte by byte in docs/stream.md:
 *   stream  = header frame* trailer
 *   header  = magic "\x89GMZ", version, flags, reserved, block size, CRC
 *   frame   = one libgmtf frame (self-describing, gmtf_frame_info_get)
 *   trailer = end marker "\x89EOS", total length, frame count,
 *             CRC-32C of the content, CRC-32C of the frame bytes, CRC
 * A file holds one or more streams back to back; they decode to the
 * concatenation of their contents. */
#ifndef GMTFC_H
#define GMTFC_H

#include <stddef.h>
#include <stdint.h>

#define GMTFC_SUFFIX ".gmz"

#define GMTFC_MAGIC "\x89GMZ"
#define GMTFC_END_MARKER                                                                           \
    "\x89"                                                                                         \
    "EOS"
#define GMTFC_MARKER_LEN 4
#define GMTFC_VERSION 1
#define GMTFC_HEADER_LEN 16
#define GMTFC_TRAILER_LEN 32

/* Blocks per batch: four per thread, so that blocks of uneven cost even
 * out before the batch's barrier (two per thread scaled decoding 1.75x on
 * two threads, four 2.0x); but no more than MAX_BYTES of input unless that
 * leaves under two per thread; and at least MIN_BYTES per call so small
 * blocks do not drown in call overhead; at most MAX_BLOCKS so the
 * bookkeeping arrays stay small. Output never depends on it. */
#define GMTFC_BATCH_PER_THREAD 4u
#define GMTFC_BATCH_MIN_BYTES (16u << 20)
#define GMTFC_BATCH_MAX_BYTES (256u << 20)
#define GMTFC_BATCH_MAX_BLOCKS 65536u
/* Batches of a compression in flight at most (read, coded, written). */
#define GMTFC_SLOTS_MAX 3

typedef struct gmtfc_config {
    uint32_t block_size; /* compression block size, 1 .. GMTF_BLOCK_MAX */
    unsigned threads;    /* codec worker threads, >= 1 */
    const char *mtf;     /* MTF backend name, NULL = auto */
    const char *gpus;    /* GPUs (gmtf_codec_options.gpus), NULL = GMTF_GPUS or all */
} gmtfc_config;

/* What went wrong, for a message the CLI completes with the file name. */
enum gmtfc_error_kind {
    GMTFC_ERR_NONE = 0,
    GMTFC_ERR_READ,    /* reading the input failed (errno in code) */
    GMTFC_ERR_WRITE,   /* writing the output failed (errno in code) */
    GMTFC_ERR_CORRUPT, /* input is not a valid stream; offset is set */
    GMTFC_ERR_CODEC,   /* codec setup or encoding failed */
};

typedef struct gmtfc_error {
    enum gmtfc_error_kind kind;
    int code;        /* negative errno or GMTF_E_* */
    uint64_t offset; /* byte offset in the compressed input (CORRUPT) */
    char msg[160];   /* what was wrong, without file name */
} gmtfc_error;

typedef struct gmtfc_totals {
    uint64_t in_bytes;  /* bytes read */
    uint64_t out_bytes; /* bytes written (or that would be, for -t) */
    uint64_t frames;    /* frames written or checked */
    uint64_t streams;   /* streams decoded */
    uint64_t garbage;   /* offset of trailing garbage ignored after the last
                         * stream (bytes that do not start a stream header);
                         * 0: none */
} gmtfc_totals;

/* Called after every batch with the running totals; may be NULL. */
typedef void (*gmtfc_progress_fn)(void *arg, const gmtfc_totals *t);

typedef struct gmtfc_stream gmtfc_stream;

/* Creates the stream context: codec (threads, mtf) and reusable buffers.
 * Returns 0, -ENOMEM or a gmtf_codec_create error (e.g. GMTF_E_BACKEND). */
int gmtfc_stream_create(gmtfc_stream **out, const gmtfc_config *cfg);
void gmtfc_stream_destroy(gmtfc_stream *s);
void gmtfc_stream_set_progress(gmtfc_stream *s, gmtfc_progress_fn fn, void *arg);
/* 1 when the stream's batches go to a GPU (gmtf_codec_batch_device). */
int gmtfc_stream_device(const gmtfc_stream *s);
/* Resolved MTF backend name of the codec in use. */
const char *gmtfc_stream_mtf_name(const gmtfc_stream *s);

/* Compresses all of in_fd into one stream on out_fd. The input is read in
 * bounded batches; the output depends only on the input and block size.
 * Returns 0 or a negative code with *err filled. */
int gmtfc_compress(gmtfc_stream *s, int in_fd, int out_fd, gmtfc_totals *t, gmtfc_error *err);

/* Decompresses all streams of in_fd to out_fd (out_fd < 0: test only).
 * Any damage or truncation (also at a frame boundary) is an error of kind
 * GMTFC_ERR_CORRUPT with the offset. As bzip2 does, bytes after a trailer
 * that do not start with a stream header's magic end the input: they are
 * ignored and t->garbage says where they start (the caller warns); bytes
 * that do start with it must be a whole valid stream.
 * Output already written before an error is not retracted. */
int gmtfc_decompress(gmtfc_stream *s, int in_fd, int out_fd, gmtfc_totals *t, gmtfc_error *err);

/* Blocks per batch for a block size and thread count (see above). */
size_t gmtfc_batch_blocks(uint32_t block_size, unsigned threads);

/* A block size as cli_parse_size reads it ("900k", "1M"), range
 * 1 .. GMTF_BLOCK_MAX. Returns 0, -EINVAL or -ERANGE. */
int gmtfc_parse_block_size(const char *s, uint32_t *out);

/* `gmtfc bench ...`: argv[0] is "bench". Returns the exit status. */
int gmtfc_bench_main(int argc, char **argv);

#endif
