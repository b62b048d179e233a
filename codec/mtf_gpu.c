/* Registers the gpu/ MTF family in the codec's backend table: "gpu" (the
 * default variants of gpu/gpu.h) and "gpu-NAME" for every complete
 * variant. An instance holds its own CUDA context, created at its first
 * batch (a codec that never runs a large batch never starts CUDA), behind
 * the instance's lock: per-block calls may come from several workers. A
 * failing GPU call makes the batch hooks return an error (the codec then
 * falls back to per-block calls) and the per-block calls run the scalar
 * reference; once the device is gone or faulted, the instance stops
 * offering it. */
#include "gmtf_config.h"
#include "mtf.h"

#if GMTF_HAVE_CUDA

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "mtf_bench.h"

#define GPU_MAX 16 /* backends registered; more variants are not */

typedef struct gpu_mtf {
    int variant; /* gpu.h variant index, -1 = default */
    pthread_mutex_t lock;
    gmtf_gpu_ctx *ctx; /* NULL until the first batch */
    int broken;        /* the device failed: no more GPU calls */
} gpu_mtf;

static int gpu_available(const gmtf_mtf_backend *b)
{
    (void)b;
    return gmtf_gpu_available();
}

static int gpu_init(const gmtf_mtf_backend *b, void **state)
{
    gpu_mtf *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->variant = *(const int *)b->variant;
    pthread_mutex_init(&g->lock, NULL);
    *state = g;
    return 0;
}

static void gpu_free(void *state)
{
    gpu_mtf *g = state;
    gmtf_gpu_ctx_destroy(g->ctx);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* The variant for this direction: a variant without a decoder decodes with
 * the default one (the output is the same: inverse MTF has one answer). */
static int gpu_variant(const gpu_mtf *g, int decode)
{
    int v = g->variant;
    if (decode && v >= 0 && !(gmtf_gpu_variant_flags((size_t)v) & GMTF_GPU_DECODE))
        v = -1;
    return v;
}

/* Takes the lock and makes the context if needed; on success the caller
 * holds the lock. */
static int gpu_enter(gpu_mtf *g)
{
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    if (g->broken || !gmtf_gpu_available())
        rc = -ENODEV;
    else if (!g->ctx)
        rc = gmtf_gpu_ctx_create(&g->ctx);
    if (rc)
        pthread_mutex_unlock(&g->lock);
    return rc;
}

/* Releases the lock; a context whose device is gone or faulted goes too. */
static void gpu_leave(gpu_mtf *g, int rc)
{
    if (rc && g->ctx && !gmtf_gpu_ctx_ok(g->ctx)) {
        gmtf_gpu_ctx_destroy(g->ctx);
        g->ctx = NULL;
        g->broken = 1;
    }
    pthread_mutex_unlock(&g->lock);
}

/* Runs one batch; decode selects the inverse. */
static int gpu_batch(gpu_mtf *g, int decode, const uint8_t *src, const uint64_t *off, size_t count,
                     uint8_t *dst)
{
    int rc = gpu_enter(g);
    if (rc)
        return rc;
    int v = gpu_variant(g, decode);
    rc = decode ? gmtf_gpu_mtf_decode_batch(g->ctx, v, src, off, count, dst)
                : gmtf_gpu_mtf_encode_batch(g->ctx, v, src, off, count, dst);
    gpu_leave(g, rc);
    return rc;
}

static int gpu_batch_encode(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                            uint8_t *dst)
{
    return gpu_batch(state, 0, src, off, count, dst);
}

static int gpu_batch_decode(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                            uint8_t *dst)
{
    return gpu_batch(state, 1, src, off, count, dst);
}

/* One block as a batch of one; the scalar reference when the GPU fails. */
static void gpu_encode(void *state, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint64_t off[2] = {0, n};
    if (gpu_batch(state, 0, src, off, 1, dst) != 0)
        gmtf_mtf_encode_scalar(src, dst, n);
}

static void gpu_decode(void *state, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint64_t off[2] = {0, n};
    if (gpu_batch(state, 1, src, off, 1, dst) != 0)
        gmtf_mtf_decode_scalar(src, dst, n);
}

static void *gpu_host_alloc(void *state, size_t size)
{
    (void)state;
    return gmtf_gpu_host_alloc(size);
}

static void gpu_host_free(void *state, void *p)
{
    (void)state;
    gmtf_gpu_host_free(p);
}

/* Kernel-only timing: upload, run (timed by device events), download. */
static int gpu_kernel(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                      uint8_t *dst, int decode, double *ms)
{
    gpu_mtf *g = state;
    int rc = gpu_enter(g);
    if (rc)
        return rc;
    rc = gmtf_gpu_stage_upload(g->ctx, src, off, count);
    if (!rc)
        rc = gmtf_gpu_stage_run(g->ctx, gpu_variant(g, decode), decode, ms);
    if (!rc)
        rc = gmtf_gpu_stage_download(g->ctx, dst);
    gpu_leave(g, rc);
    return rc;
}

static const gmtf_mtf_bench_ops gpu_bench_ops = {.kernel = gpu_kernel};

/* Below this a batch does not pay for the transfers (docs/gpu.md). */
#define GPU_MIN_BATCH (8u << 20)

static gmtf_mtf_backend gpu_backends[GPU_MAX];
static const gmtf_mtf_backend *gpu_list[GPU_MAX];
static char gpu_names[GPU_MAX][40];
static int gpu_variants[GPU_MAX];

const gmtf_mtf_backend *const *gmtf_mtf_gpu_list(size_t *count)
{
    /* called once, under the codec's pthread_once */
    size_t n = 0;
    gpu_variants[n] = -1;
    snprintf(gpu_names[n], sizeof gpu_names[n], "gpu");
    n++;
    for (size_t v = 0; v < gmtf_gpu_variant_count() && n < GPU_MAX; v++) {
        if (!(gmtf_gpu_variant_flags(v) & GMTF_GPU_COMPLETE))
            continue; /* depth-limited passes are not an MTF on their own */
        gpu_variants[n] = (int)v;
        snprintf(gpu_names[n], sizeof gpu_names[n], "gpu-%s", gmtf_gpu_variant_name(v));
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        gpu_backends[i] = (gmtf_mtf_backend){
            .name = gpu_names[i],
            .variant = &gpu_variants[i],
            .available = gpu_available,
            .init = gpu_init,
            .free = gpu_free,
            .encode = gpu_encode,
            .decode = gpu_decode,
            .batch_encode = gpu_batch_encode,
            .batch_decode = gpu_batch_decode,
            .min_batch_bytes = GPU_MIN_BATCH,
            .host_alloc = gpu_host_alloc,
            .host_free = gpu_host_free,
            .bench = &gpu_bench_ops,
        };
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
