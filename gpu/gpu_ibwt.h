/* gpu/: inverse Burrows-Wheeler transform of a batch of blocks on the GPU.
 *
 * Plain C; nothing CUDA-specific leaks out. The exact inverse of
 * gpu_bwt.h's forward transform (and codec/bwt.c's): block i of n bytes is
 * bwt[off[i] .. off[i+1]) (the BWT output, the empty suffix's row left
 * out), with sample step step[i] (>= 1) and K = ceil(n / step[i]) sample
 * rows in idx: idx[k] = the row (1..n) of the suffix starting at
 * k * step[i]; idx[0] is the primary index. The rows of block 0 come first,
 * then block 1's, and so on. The original bytes go to dst at the same
 * offsets. The device builds each block's LF table (a stable counting sort
 * of its positions by byte, all blocks at once) and walks it from rulers:
 * rows spread over the table whose short chains it walks first, then each
 * sample segment follows them (gpu/ibwt.cu; GMTF_GPU_IBWT_RULER=0: two
 * chains a sample segment, one from each end, on a radix-sorted table).
 *
 * Untrusted input: the rows are checked on the host before anything is
 * launched (-EUCLEAN when one is 0 or over n); any bytes with in-range
 * rows give some output, never an access out of the block's table (a wrong
 * result is the caller's checksum to catch, as codec/bwt.c).
 *
 * Errors: 0 or a negative errno-style code:
 *   -ENODEV  no usable CUDA device (or no context given);
 *   -EINVAL  bad argument (offsets not ascending, an empty block or one
 *            over 2^24 bytes, a zero step, more than 2^24 blocks, NULL);
 *   -EUCLEAN a sample row out of range (nothing launched);
 *   -ENOMEM  device or pinned host memory exhausted;
 *   -EIO     a CUDA call failed; the context stays usable only if
 *            gmtf_gpu_ibwt_ok() says so.
 *
 * Device memory: about 11 bytes per byte of the largest piece with the
 * rulers (input, table, the rulers' scratch, output), about 26 with the two
 * chains (sort keys and values twice, the two tables); batches over the piece
 * bound (512 MiB) run in pieces of whole blocks. A context owns its device
 * buffers and stream, grown to the largest piece seen; not thread-safe: one
 * context per thread. bwt and dst from pinned host memory copy fastest. */
#ifndef GMTF_GPU_IBWT_H
#define GMTF_GPU_IBWT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMTF_GPU_IBWT_MAX_BLOCK (1u << 24)

typedef struct gmtf_gpu_ibwt_ctx gmtf_gpu_ibwt_ctx;

/* Creates a context on device 0 (no large allocation yet).
 * 0, -ENODEV or -ENOMEM; *out is NULL on failure. */
int gmtf_gpu_ibwt_create(gmtf_gpu_ibwt_ctx **out);
/* The same on CUDA device dev (0 .. gmtf_gpu_device_count() - 1, else
 * -ENODEV); each call makes dev the calling thread's current device. */
int gmtf_gpu_ibwt_create_on(int dev, gmtf_gpu_ibwt_ctx **out);
void gmtf_gpu_ibwt_destroy(gmtf_gpu_ibwt_ctx *ctx); /* NULL is fine */
/* 1 while the context can take work (no sticky device error). */
int gmtf_gpu_ibwt_ok(const gmtf_gpu_ibwt_ctx *ctx);
/* Text of the last error seen by this context ("" if none). */
const char *gmtf_gpu_ibwt_error(const gmtf_gpu_ibwt_ctx *ctx);

/* Most bytes inverted at once; 0 = default (512 MiB). Values below
 * 2^24 are raised to it (one block always fits), over 2^30 lowered. */
int gmtf_gpu_ibwt_set_piece(gmtf_gpu_ibwt_ctx *ctx, uint64_t bytes);

/* Checks a batch's sample rows as gmtf_gpu_ibwt_batch does (no device
 * needed): 0, -EINVAL or -EUCLEAN. */
int gmtf_gpu_ibwt_check(const uint64_t *off, size_t count, const uint32_t *step,
                        const uint32_t *idx);

/* The inverse of every block of the batch (see above). count == 0 does
 * nothing. bwt and dst must not overlap. */
int gmtf_gpu_ibwt_batch(gmtf_gpu_ibwt_ctx *ctx, const uint8_t *bwt, const uint64_t *off,
                        size_t count, const uint32_t *step, const uint32_t *idx, uint8_t *dst);

/* The same with the BWT bytes already on the device (dbwt: a device
 * pointer to the bytes of off[0], e.g. gmtf_gpu_lanes_out_device's;
 * copied device to device, no upload). */
int gmtf_gpu_ibwt_batch_dev(gmtf_gpu_ibwt_ctx *ctx, const void *dbwt, const uint64_t *off,
                            size_t count, const uint32_t *step, const uint32_t *idx, uint8_t *dst);

/* batch_dev started, not waited: the device first waits for after (a
 * cudaEvent_t as void *, e.g. gmtf_gpu_lanes_group_event's; NULL: none),
 * then reads dbwt; the call returns once the work is queued (a batch over
 * the piece bound: all its pieces but the last done). gmtf_gpu_ibwt_wait
 * waits for it (dst complete, times and repairs counted: 0 or an error);
 * it does nothing when nothing is pending. Any other call on the context
 * waits for it first. */
int gmtf_gpu_ibwt_batch_dev_start(gmtf_gpu_ibwt_ctx *ctx, const void *dbwt, void *after,
                                  const uint64_t *off, size_t count, const uint32_t *step,
                                  const uint32_t *idx, uint8_t *dst);
int gmtf_gpu_ibwt_wait(gmtf_gpu_ibwt_ctx *ctx);

/* Device time of the last batch by phase, ms (events; 0 in the CPU build):
 * [0] upload, [1] keys + sort, [2] table, [3] chain walk, [4] download. */
#define GMTF_GPU_IBWT_PHASES 5
int gmtf_gpu_ibwt_last_ms(const gmtf_gpu_ibwt_ctx *ctx, double ms[GMTF_GPU_IBWT_PHASES]);

/* Sample segments of the last batch that were walked again forward because
 * the fast walk could not vouch for them (rulers: a ruler met twice, capped,
 * or the block's end too early; two chains: they did not meet): 0 for a real
 * BWT, many segments for garbage bytes (the output is the same either way);
 * 0 with GMTF_GPU_IBWT_BIDIR=0 (one chain a segment) or a NULL context. */
uint64_t gmtf_gpu_ibwt_last_repaired(const gmtf_gpu_ibwt_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif
