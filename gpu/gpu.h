/* gpu/: CUDA MTF, inverse MTF and k-selection behind a plain C API.
 *
 * Nothing CUDA-specific leaks out of this header: callers (codec/, tools,
 * tests) include it from plain C. Every function returns 0 (or a
 * non-negative value where stated) or a negative errno-style code:
 *   -ENODEV  no usable CUDA device (none present, driver too old, or the
 *            build has no CUDA); callers fall back to a CPU backend.
 *   -EINVAL  bad argument (unknown variant, offsets not ascending, ...).
 *   -ENOMEM  device or pinned host memory exhausted.
 *   -EIO     a CUDA call failed after the device was found; the context
 *            stays usable only if gmtf_gpu_ctx_ok() says so.
 *
 * MTF as everywhere in gmtf (codec/mtf.h): per block the queue starts
 * 0..255; each byte outputs its queue position and moves to the front.
 * Every complete variant gives output byte-identical to the scalar
 * reference over whole blocks: blocks are cut into chunks and each chunk
 * starts from the exact queue the scalar coder has there (docs/gpu.md).
 *
 * A batch is N blocks in one buffer plus offsets: block i is
 * src[off[i] .. off[i+1]), off[0] may be non-zero, off ascending. Output
 * goes to the same offsets in dst. A context owns the device buffers,
 * pinned staging and streams; they grow to the largest batch seen and are
 * reused. A context is not thread-safe: use one per thread. Benchmark-only
 * entry points: gpu_bench.h. */
#ifndef GMTF_GPU_H
#define GMTF_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device probe ----------------------------------------------------- */

/* 1 when a CUDA device of compute capability >= 7.0 can run our kernels,
 * else 0. Probed once, cheap afterwards. Never fails. */
int gmtf_gpu_available(void);

/* How many CUDA devices can run our kernels: devices 0, 1, ... up to the
 * first one below compute capability 7.0 (CUDA's numbering, so
 * CUDA_VISIBLE_DEVICES applies). 0 without a device. Probed once. */
int gmtf_gpu_device_count(void);

/* What the library was built for (text, static storage). */
const char *gmtf_gpu_build_info(void);

/* Name and multiprocessor count of device 0; name is NUL-terminated and
 * truncated to len. Either pointer may be NULL. 0 or -ENODEV. */
int gmtf_gpu_device_info(char *name, size_t len, int *sm_count);

/* ---- variants --------------------------------------------------------- */

/* Kernel variants, by index 0..count-1 (docs/gpu.md describes each):
 * complete encoders "16+full" (index 0, the default), "8+full",
 * "32+full", "8+32+full", "8+full/g4", "scalar", "2symbols", "2buffers",
 * "4by8", "8by4", "thread", "thread_by4", "thread_by8", "thread_by16";
 * depth-limited "depth8", "depth32"; decoders "8+full" (the default),
 * "8+full/g4", "scalar", "2symbols", "2buffers"; and "queues", a timing
 * probe (GMTF_GPU_PROBE). */
size_t gmtf_gpu_variant_count(void);
const char *gmtf_gpu_variant_name(size_t i); /* NULL when out of range */
int gmtf_gpu_variant_find(const char *name); /* index, or -EINVAL */

#define GMTF_GPU_ENCODE 1u   /* variant has an MTF encoder */
#define GMTF_GPU_DECODE 2u   /* variant has an inverse MTF */
#define GMTF_GPU_COMPLETE 4u /* encoder output is the full exact MTF */
#define GMTF_GPU_PROBE 8u    /* timing probe (shared steps only): output undefined */
unsigned gmtf_gpu_variant_flags(size_t i);
/* Depth-limited variants output ranks < depth exactly and the byte
 * `depth` for every rank >= depth; 0 for complete variants. */
unsigned gmtf_gpu_variant_depth(size_t i);

/* ---- context ---------------------------------------------------------- */

typedef struct gmtf_gpu_ctx gmtf_gpu_ctx;

/* Creates a context on device 0 (no large allocation yet).
 * 0, -ENODEV or -ENOMEM. */
int gmtf_gpu_ctx_create(gmtf_gpu_ctx **out);
/* The same on device dev (0 .. gmtf_gpu_device_count() - 1, else
 * -ENODEV). Every call that launches or copies makes the context's
 * device current on the calling thread first; pinned host memory
 * (gmtf_gpu_host_alloc, the contexts' staging) is portable: any device's
 * context may use it. */
int gmtf_gpu_ctx_create_on(int dev, gmtf_gpu_ctx **out);
void gmtf_gpu_ctx_destroy(gmtf_gpu_ctx *ctx); /* NULL is fine */
/* 1 while the context can take work (no sticky device error). */
int gmtf_gpu_ctx_ok(const gmtf_gpu_ctx *ctx);
/* Text of the last CUDA error seen by this context ("" if none). */
const char *gmtf_gpu_ctx_error(const gmtf_gpu_ctx *ctx);

/* Chunk size override in bytes (power of two, 256..65536), 0 = automatic
 * (chosen from the batch size so that enough chunks run at once). */
int gmtf_gpu_set_chunk(gmtf_gpu_ctx *ctx, uint32_t chunk);

/* ---- batch MTF, host to host ------------------------------------------ */

/* One upload, one launch sequence, one download (pipelined in slices so
 * transfers overlap kernels). src and dst may be pageable or come from
 * gmtf_gpu_host_alloc (faster: no staging copy). variant < 0 = default.
 * Decode needs a variant with GMTF_GPU_DECODE; -EINVAL otherwise. */
int gmtf_gpu_mtf_encode_batch(gmtf_gpu_ctx *ctx, int variant, const uint8_t *src,
                              const uint64_t *off, size_t count, uint8_t *dst);
int gmtf_gpu_mtf_decode_batch(gmtf_gpu_ctx *ctx, int variant, const uint8_t *src,
                              const uint64_t *off, size_t count, uint8_t *dst);

/* Pinned (page-locked) host memory for batch buffers; NULL on failure. */
void *gmtf_gpu_host_alloc(size_t size);
void gmtf_gpu_host_free(void *p);

/* ---- staged use: data stays on the device between calls --------------- */

/* Uploads a batch as the context's device input (synchronous). */
int gmtf_gpu_stage_upload(gmtf_gpu_ctx *ctx, const uint8_t *src, const uint64_t *off, size_t count);
/* Runs the variant's encoder (decode = 0) or decoder (decode = 1) on the
 * staged input into the device output; *kernel_ms (may be NULL) gets the
 * device time of the whole launch sequence, measured by events. */
int gmtf_gpu_stage_run(gmtf_gpu_ctx *ctx, int variant, int decode, double *kernel_ms);
/* Makes the device output the staged input (to decode what was encoded). */
int gmtf_gpu_stage_swap(gmtf_gpu_ctx *ctx);
/* Copies the device output of the staged batch to dst (same offsets as
 * the upload). */
int gmtf_gpu_stage_download(gmtf_gpu_ctx *ctx, uint8_t *dst);

/* ---- k-selection ------------------------------------------------------ */

typedef enum gmtf_gpu_key {
    GMTF_GPU_KEY_U32,
    GMTF_GPU_KEY_I32,
    GMTF_GPU_KEY_F32,
    GMTF_GPU_KEY_U64,
    GMTF_GPU_KEY_I64,
    GMTF_GPU_KEY_F64,
} gmtf_gpu_key;

/* Writes to *out (4 or 8 bytes by type) the k-th smallest of keys[0..n),
 * k counted from 0, by randomized selection (random splitters, bucket
 * counts, keep the bucket holding the k-th; docs/gpu.md). Floats order
 * as IEEE totalOrder (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN).
 * keys is host memory. 0, -EINVAL (k >= n), -ENODEV, -ENOMEM, -EIO. */
int gmtf_gpu_kselect(gmtf_gpu_ctx *ctx, gmtf_gpu_key type, const void *keys, size_t n, size_t k,
                     void *out);

#ifdef __cplusplus
}
#endif

#endif
