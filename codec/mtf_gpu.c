/* Registers the gpu/ MTF family in the codec's backend table: "gpu" (the
 * default variants of gpu/gpu.h) and "gpu-NAME" for every complete
 * variant. The ops table carries no context, so the wrapper keeps one
 * lazily created CUDA context behind a mutex; a failing GPU call makes the
 * batch hooks return an error (the codec then falls back to per-block
 * calls) and the per-block calls run the scalar reference. */
#include "gmtf_config.h"
#include "mtf.h"

#if GMTF_HAVE_CUDA

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"

#define GPU_SLOTS 16 /* wrappers below; more variants are not registered */

static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;
static gmtf_gpu_ctx *gpu_ctx;
static int gpu_broken; /* read without the lock: use atomics */

static int gpu_available(void)
{
    return gmtf_gpu_available() && !__atomic_load_n(&gpu_broken, __ATOMIC_RELAXED);
}

/* Runs one batch on variant v (-1 = default); decode selects the inverse.
 * A variant without a decoder decodes with the default one (the output is
 * the same: inverse MTF has one answer). */
static int gpu_batch(int v, int decode, const uint8_t *src, const uint64_t *off, size_t count,
                     uint8_t *dst)
{
    if (!gpu_available())
        return -ENODEV;
    if (decode && v >= 0 && !(gmtf_gpu_variant_flags((size_t)v) & GMTF_GPU_DECODE))
        v = -1;
    pthread_mutex_lock(&gpu_lock);
    int rc = 0;
    if (!gpu_ctx)
        rc = gmtf_gpu_ctx_create(&gpu_ctx);
    if (!rc)
        rc = decode ? gmtf_gpu_mtf_decode_batch(gpu_ctx, v, src, off, count, dst)
                    : gmtf_gpu_mtf_encode_batch(gpu_ctx, v, src, off, count, dst);
    if (rc && gpu_ctx && !gmtf_gpu_ctx_ok(gpu_ctx)) {
        /* the device is gone or faulted: stop offering it */
        gmtf_gpu_ctx_destroy(gpu_ctx);
        gpu_ctx = NULL;
        __atomic_store_n(&gpu_broken, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&gpu_lock);
    return rc;
}

/* Kernel-only timing: upload, run (timed by device events), download. */
static int gpu_kernel(int v, const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst,
                      int decode, double *ms)
{
    if (!gpu_available())
        return -ENODEV;
    if (decode && v >= 0 && !(gmtf_gpu_variant_flags((size_t)v) & GMTF_GPU_DECODE))
        v = -1;
    pthread_mutex_lock(&gpu_lock);
    int rc = 0;
    if (!gpu_ctx)
        rc = gmtf_gpu_ctx_create(&gpu_ctx);
    if (!rc)
        rc = gmtf_gpu_stage_upload(gpu_ctx, src, off, count);
    if (!rc)
        rc = gmtf_gpu_stage_run(gpu_ctx, v, decode, ms);
    if (!rc)
        rc = gmtf_gpu_stage_download(gpu_ctx, dst);
    pthread_mutex_unlock(&gpu_lock);
    return rc;
}

static void gpu_block(int v, int decode, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint64_t off[2] = {0, n};
    if (gpu_batch(v, decode, src, off, 1, dst) == 0)
        return;
    if (decode)
        gmtf_mtf_decode_scalar(src, dst, n);
    else
        gmtf_mtf_encode_scalar(src, dst, n);
}

/* One set of plain functions per slot: the ops table has no user pointer. */
/* clang-format off */
#define GPU_SLOT(i)                                                                                    \
    static void enc_##i(const uint8_t *s, uint8_t *d, size_t n) { gpu_block(slot_variant[i], 0, s, d, n); } \
    static void dec_##i(const uint8_t *s, uint8_t *d, size_t n) { gpu_block(slot_variant[i], 1, s, d, n); } \
    static int benc_##i(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d)                    \
    {                                                                                                  \
        return gpu_batch(slot_variant[i], 0, s, o, c, d);                                              \
    }                                                                                                  \
    static int bdec_##i(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d)                    \
    {                                                                                                  \
        return gpu_batch(slot_variant[i], 1, s, o, c, d);                                              \
    }                                                                                                  \
    static int kern_##i(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d, int dec, double *ms) \
    {                                                                                                  \
        return gpu_kernel(slot_variant[i], s, o, c, d, dec, ms);                                       \
    }

static int slot_variant[GPU_SLOTS];
GPU_SLOT(0) GPU_SLOT(1) GPU_SLOT(2) GPU_SLOT(3) GPU_SLOT(4) GPU_SLOT(5) GPU_SLOT(6) GPU_SLOT(7)
GPU_SLOT(8) GPU_SLOT(9) GPU_SLOT(10) GPU_SLOT(11) GPU_SLOT(12) GPU_SLOT(13) GPU_SLOT(14) GPU_SLOT(15)

#define OPS(i) {NULL, gpu_available, enc_##i, dec_##i, benc_##i, bdec_##i, 0, NULL, NULL, kern_##i}
static gmtf_mtf_backend gpu_backends[GPU_SLOTS] = {
    OPS(0), OPS(1), OPS(2), OPS(3), OPS(4), OPS(5), OPS(6), OPS(7),
    OPS(8), OPS(9), OPS(10), OPS(11), OPS(12), OPS(13), OPS(14), OPS(15),
};
/* clang-format on */
static char gpu_names[GPU_SLOTS][40];
static const gmtf_mtf_backend *gpu_list[GPU_SLOTS];

/* Below this a batch does not pay for the transfers (docs/gpu.md). */
#define GPU_MIN_BATCH (8u << 20)

const gmtf_mtf_backend *const *gmtf_mtf_gpu_list(size_t *count)
{
    /* called once, under the codec's pthread_once */
    size_t n = 0;
    slot_variant[n] = -1;
    snprintf(gpu_names[n], sizeof gpu_names[n], "gpu");
    n++;
    for (size_t v = 0; v < gmtf_gpu_variant_count() && n < GPU_SLOTS; v++) {
        if (!(gmtf_gpu_variant_flags(v) & GMTF_GPU_COMPLETE))
            continue; /* depth-limited passes are not an MTF on their own */
        slot_variant[n] = (int)v;
        snprintf(gpu_names[n], sizeof gpu_names[n], "gpu-%s", gmtf_gpu_variant_name(v));
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        gpu_backends[i].name = gpu_names[i];
        gpu_backends[i].min_batch_bytes = GPU_MIN_BATCH;
        gpu_backends[i].host_alloc = gmtf_gpu_host_alloc;
        gpu_backends[i].host_free = gmtf_gpu_host_free;
        gpu_list[i] = &gpu_backends[i];
    }
    *count = n;
    return gpu_list;
}

#else

const gmtf_mtf_backend *const *gmtf_mtf_gpu_list(size_t *count)
{
    *count = 0;
    return NULL;
}

#endif
