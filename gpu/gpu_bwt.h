/* gpu/: forward Burrows-Wheeler transform of a batch of blocks on the GPU.
 *
 * Plain C; nothing CUDA-specific leaks out. Errors as in gpu.h: 0 or a
 * negative errno-style code:
 *   -ENODEV  no usable CUDA device (or no context given);
 *   -EINVAL  bad argument (offsets not ascending, an empty block or one
 *            over 2^24 bytes, a zero sample step, NULL buffers);
 *   -ENOMEM  device or pinned host memory exhausted;
 *   -EIO     a CUDA call failed after the device was found; the context
 *            stays usable only if gmtf_gpu_bwt_ok() says so.
 *
 * The transform is exactly codec/bwt.c's gmtf_bwt_forward: for a block
 * src[0..n) (1 <= n <= 2^24) the n suffixes and the empty suffix are sorted
 * (the empty suffix first; a suffix that is a proper prefix of another sorts
 * before it). Row 0 (the empty suffix) outputs src[n-1]; every other row,
 * in sorted order, outputs the byte before its suffix, except the row of the
 * suffix starting at 0, which outputs nothing. dst[0..n) gets those n bytes.
 *
 * Sample indexes: with a sample step s (1 <= s), a block of n bytes has
 * K = ceil(n / s) indexes: idx[k] = the row (1..n) of the suffix starting
 * at k*s, k = 0..K-1; idx[0] is the primary index. The codec's layout today
 * (K = clamp(n >> 14, 1, 16), s = ceil(n / K)) is gmtf_gpu_bwt_default_step.
 *
 * A batch is N blocks in one buffer plus offsets: block i is
 * src[off[i] .. off[i+1]), off[0] may be non-zero. Output bytes go to the
 * same offsets in dst. The indexes of block 0 come first in idx, then those
 * of block 1, and so on (gmtf_gpu_bwt_index_total counts them).
 *
 * A context owns its device buffers, pinned staging and stream; they grow to
 * the largest batch seen and are reused. Device memory: the batch's input
 * and output (2 bytes per input byte), plus about 42.5 bytes per byte of the
 * largest piece sorted at once; batches over the piece bound (default
 * 272 Mi bytes) are sorted in pieces of whole blocks. Not thread-safe: one
 * context per thread. */
#ifndef GMTF_GPU_BWT_H
#define GMTF_GPU_BWT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMTF_GPU_BWT_MAX_BLOCK (1u << 24)

/* ---- sample layout (no device needed) ---------------------------------- */

/* The step that gives codec/bwt.c's layout for a block of n bytes:
 * K = clamp(n >> 14, 1, 16), step = ceil(n / K). 0 when n == 0. */
uint32_t gmtf_gpu_bwt_default_step(uint64_t n);

/* Indexes of a block of n bytes with sample step `step`: ceil(n / step);
 * 0 when n or step is 0. */
uint64_t gmtf_gpu_bwt_index_count(uint64_t n, uint32_t step);

/* Sum of gmtf_gpu_bwt_index_count over the blocks of a batch (step NULL:
 * the default step of each block); 0 when the batch is invalid. */
uint64_t gmtf_gpu_bwt_index_total(const uint64_t *off, size_t count, const uint32_t *step);

/* ---- context ------------------------------------------------------------ */

typedef struct gmtf_gpu_bwt_ctx gmtf_gpu_bwt_ctx;

/* Creates a context on device 0 (no large allocation yet).
 * 0, -ENODEV or -ENOMEM; *out is NULL on failure. */
int gmtf_gpu_bwt_create(gmtf_gpu_bwt_ctx **out);
/* The same on CUDA device dev (0 .. gmtf_gpu_device_count() - 1, else
 * -ENODEV): its memory and streams live there, and each call makes dev
 * the calling thread's current device before it launches or copies. */
int gmtf_gpu_bwt_create_on(int dev, gmtf_gpu_bwt_ctx **out);
void gmtf_gpu_bwt_destroy(gmtf_gpu_bwt_ctx *ctx); /* NULL is fine */
/* 1 while the context can take work (no sticky device error). */
int gmtf_gpu_bwt_ok(const gmtf_gpu_bwt_ctx *ctx);
/* Text of the last error seen by this context ("" if none). */
const char *gmtf_gpu_bwt_error(const gmtf_gpu_bwt_ctx *ctx);

/* Most input bytes sorted at once (plus one per block); 0 = default.
 * Values below 2^24 + 2 are raised to it (one block always fits), values
 * over 2^29 lowered to it. Device memory is about 42.5 bytes per byte of it. */
int gmtf_gpu_bwt_set_piece(gmtf_gpu_bwt_ctx *ctx, uint64_t bytes);

/* ---- batch, host to host ------------------------------------------------ */

/* BWT of every block of the batch: dst[off[i]..off[i+1]) and the block's
 * indexes in idx (see above). step: per-block sample step (>= 1), or NULL
 * for the default layout. src and dst may be pageable or pinned; they must
 * not overlap. count == 0 does nothing. */
int gmtf_gpu_bwt_batch(gmtf_gpu_bwt_ctx *ctx, const uint8_t *src, const uint64_t *off, size_t count,
                       const uint32_t *step, uint8_t *dst, uint32_t *idx);

/* ---- staged use: the output stays on the device ------------------------ */

/* Uploads a batch as the context's staged input (synchronous). */
int gmtf_gpu_bwt_stage_upload(gmtf_gpu_bwt_ctx *ctx, const uint8_t *src, const uint64_t *off,
                              size_t count, const uint32_t *step);
/* Sorts the staged batch into the device output; *kernel_ms (may be NULL)
 * gets the device time of the whole sequence, measured by events. */
int gmtf_gpu_bwt_stage_run(gmtf_gpu_bwt_ctx *ctx, double *kernel_ms);
/* Copies the device output to dst (at the upload's offsets) and idx. */
int gmtf_gpu_bwt_stage_download(gmtf_gpu_bwt_ctx *ctx, uint8_t *dst, uint32_t *idx);
/* Device pointers of the staged output, for later device stages: BWT bytes
 * of block i at (*bwt)[off[i] - off[0] ..], indexes as in idx above
 * (uint32_t). Valid until the next upload or the context's destruction. */
int gmtf_gpu_bwt_stage_device(gmtf_gpu_bwt_ctx *ctx, void **bwt, void **idx);

/* ---- profile ------------------------------------------------------------ */

/* Device time by phase over the runs since profiling was switched on
 * (events around each phase; costs a little). */
enum {
    GMTF_GPU_BWT_PH_KEYS,   /* initial keys: block id + first chars */
    GMTF_GPU_BWT_PH_SORT0,  /* radix sort of the initial keys */
    GMTF_GPU_BWT_PH_RANK0,  /* first ranks and groups */
    GMTF_GPU_BWT_PH_GATHER, /* doubling rounds: keys of the largest groups, gathered */
    GMTF_GPU_BWT_PH_SMALL,  /* doubling rounds: groups of 2..256, ranks by counting */
    GMTF_GPU_BWT_PH_BLOCK,  /* doubling rounds: groups of 257..4096, one CTA sort each */
    GMTF_GPU_BWT_PH_LARGE,  /* doubling rounds: the largest groups, one device radix sort */
    GMTF_GPU_BWT_PH_OUTPUT, /* BWT bytes and sample indexes */
    GMTF_GPU_BWT_PH_COUNT
};
typedef struct gmtf_gpu_bwt_profile {
    double ms[GMTF_GPU_BWT_PH_COUNT];
    uint64_t positions; /* suffixes sorted (incl. one empty suffix a block) */
    uint64_t active;    /* sum over doubling rounds of the suffixes still unsorted */
    uint32_t rounds;    /* doubling rounds (most of any piece) */
    uint32_t pieces;
    uint32_t init_chars;   /* characters in the initial key (last piece) */
    uint64_t device_bytes; /* device memory the context holds now */
} gmtf_gpu_bwt_profile;
/* on = 1 starts (and clears) profiling, 0 stops it. */
int gmtf_gpu_bwt_set_profile(gmtf_gpu_bwt_ctx *ctx, int on);
int gmtf_gpu_bwt_get_profile(const gmtf_gpu_bwt_ctx *ctx, gmtf_gpu_bwt_profile *p);
const char *gmtf_gpu_bwt_phase_name(int phase);

#ifdef __cplusplus
}
#endif

#endif
