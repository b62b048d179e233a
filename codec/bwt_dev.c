/* The codec's batch BWT device (bwt_dev.h): lazy contexts, the size rule,
 * retirement on a device error, the fault-injection hook, and the GPU's
 * ops over gpu/gpu_bwt.h and gpu/gpu_ibwt.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bwt_dev.h"
#include "gmtf_config.h"

/* Below these a batch stays on the CPU (docs/gpu.md, "The codec on the
 * GPU": a device call costs a few ms whatever its size; measured on an
 * H100 host, 16 threads, the GPU codec ties the CPU one at 1 MiB batches
 * of 64 KiB blocks and wins from there on). */
#define DEV_MIN_FWD (1u << 20)
#define DEV_MIN_INV (1u << 20)
/* Chunks a batch is cut into: the device works on one while the CPU codes
 * the last and prepares the next. Measured (docs/gpu.md): encoding gained
 * from two while method 2's plan was the CPU's (180 ms of 16 threads for
 * 256 MiB); with the plan on the device the host's part is short and each
 * chunk's lane kernels are as long as the whole batch's (their slowest
 * lanes), so one is faster (2026-11-24 19:21: 244-250 against 258-266 ms);
 * decoding gains from none (its CPU step is the longer one and each chunk
 * ends with idle workers); a device call costs some ms whatever its size,
 * so a chunk holds 32 MiB or more. */
#define DEV_PIPE_FWD 1
#define DEV_PIPE_INV 1
#define DEV_CHUNK_MIN (32u << 20)
/* Decode: method 2's blocks in groups by cost (batch.c), each group's
 * inverse behind its own lanes, so that the inverse of the cheap groups
 * runs while the costly ones' lanes still run (docs/gpu.md, gpu9); 4
 * tapered since the lanes have their SMs to themselves (dec13). */
#define DEV_DEC_GROUPS 4

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    return *end ? def : (uint64_t)v;
}

void gmtf_bwt_dev_init(gmtf_bwt_dev *d, const gmtf_bwt_dev_ops *ops)
{
    gmtf_bwt_dev_init_on(d, ops, 0);
}

void gmtf_bwt_dev_init_on(gmtf_bwt_dev *d, const gmtf_bwt_dev_ops *ops, int device)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->lock, NULL);
    d->ops = ops;
    d->device = device;
    d->min_bytes[GMTF_BWT_DEV_FWD] = env_u64("GMTF_GPU_BWT_MIN", DEV_MIN_FWD);
    d->min_bytes[GMTF_BWT_DEV_INV] = env_u64("GMTF_GPU_IBWT_MIN", DEV_MIN_INV);
    d->fault_at = (long)env_u64("GMTF_GPU_FAULT", 0);
    const char *fd = getenv("GMTF_GPU_FAULT_DEV");
    if (fd && *fd && env_u64("GMTF_GPU_FAULT_DEV", ~0ull) != (uint64_t)device)
        d->fault_at = 0;
    uint64_t pipe[2] = {env_u64("GMTF_GPU_PIPE", DEV_PIPE_FWD),
                        env_u64("GMTF_GPU_IPIPE", DEV_PIPE_INV)};
    for (int i = 0; i < 2; i++)
        d->pipe[i] = pipe[i] < 1                       ? 1
                     : pipe[i] > GMTF_BWT_DEV_PIPE_MAX ? GMTF_BWT_DEV_PIPE_MAX
                                                       : (unsigned)pipe[i];
    d->chunk_min = env_u64("GMTF_GPU_CHUNK_MIN", DEV_CHUNK_MIN);
    d->use_lanes = ops && ops->lanes && env_u64("GMTF_GPU_LANES", 1) != 0;
    d->use_enc = ops && ops->enc_scan && env_u64("GMTF_GPU_LANES_ENC", 1) != 0;
    d->use_plan = d->use_enc && ops->enc_scan_plan && env_u64("GMTF_GPU_PLAN", 1) != 0;
    d->use_inv_dev =
        d->use_lanes && ops->lanes_keep && ops->inv_dev && env_u64("GMTF_GPU_INV_DEV", 1) != 0;
    d->copy_in = env_u64("GMTF_GPU_DEC_COPY_IN", 1) != 0;
    d->split_m3 = env_u64("GMTF_GPU_DEC_SPLIT", 1) != 0;
    uint64_t g = env_u64("GMTF_GPU_DEC_GROUPS", DEV_DEC_GROUPS);
    /* (the last context: the other blocks' inverse beside the groups) */
    d->dec_groups = g < 1                               ? 1
                    : g > GMTF_GPU_LANES_GROUPS_MAX - 1 ? GMTF_GPU_LANES_GROUPS_MAX - 1
                                                        : (unsigned)g;
    d->dec_taper = env_u64("GMTF_GPU_DEC_TAPER", 1) != 0;
    d->use_groups = d->use_inv_dev && d->split_m3 && ops->lanes_groups && ops->inv_group_start &&
                    ops->inv_group_wait && d->dec_groups > 1;
}

static void dev_close(gmtf_bwt_dev *d)
{
    if (!d->ops)
        return;
    if (d->ctx[GMTF_BWT_DEV_FWD])
        d->ops->fwd_destroy(d->ctx[GMTF_BWT_DEV_FWD]);
    for (unsigned g = 1; g < GMTF_GPU_LANES_GROUPS_MAX; g++)
        if (d->inv_grp[g])
            d->ops->inv_destroy(d->inv_grp[g]);
    memset(d->inv_grp, 0, sizeof d->inv_grp);
    if (d->ctx[GMTF_BWT_DEV_INV])
        d->ops->inv_destroy(d->ctx[GMTF_BWT_DEV_INV]);
    if (d->ctx[GMTF_BWT_DEV_LANES])
        d->ops->lanes_destroy(d->ctx[GMTF_BWT_DEV_LANES]);
    for (int e = GMTF_BWT_DEV_ENC0; e <= GMTF_BWT_DEV_ENC2; e++)
        if (d->ctx[e])
            d->ops->enc_destroy(d->ctx[e]);
    for (int i = 0; i < GMTF_BWT_DEV_NCTX; i++)
        d->ctx[i] = NULL;
}

void gmtf_bwt_dev_free(gmtf_bwt_dev *d)
{
    dev_close(d);
    d->ops = NULL;
    pthread_mutex_destroy(&d->lock);
}

void gmtf_bwt_dev_hold(gmtf_bwt_dev *d, int on)
{
    pthread_mutex_lock(&d->lock);
    d->hold = on;
    if (!on && d->retired)
        dev_close(d);
    pthread_mutex_unlock(&d->lock);
}

static int dev_make(gmtf_bwt_dev *d, int i)
{
    if (d->ctx[i])
        return 0;
    int dev = d->device;
    int rc = i == GMTF_BWT_DEV_FWD     ? d->ops->fwd_create(dev, &d->ctx[i])
             : i == GMTF_BWT_DEV_INV   ? d->ops->inv_create(dev, &d->ctx[i])
             : i == GMTF_BWT_DEV_LANES ? d->ops->lanes_create(dev, &d->ctx[i])
                                       : d->ops->enc_create(dev, &d->ctx[i]);
    if (rc < 0)
        d->ctx[i] = NULL;
    return rc;
}

/* Group g's inverse context (caller holds the lock). */
static int grp_make(gmtf_bwt_dev *d, unsigned g)
{
    if (g == 0 || d->inv_grp[g])
        return 0;
    int rc = d->ops->inv_create(d->device, &d->inv_grp[g]);
    if (rc < 0)
        d->inv_grp[g] = NULL;
    return rc;
}

static void *grp_ctx(gmtf_bwt_dev *d, size_t g)
{
    return g == 0 ? d->ctx[GMTF_BWT_DEV_INV] : d->inv_grp[g];
}

int gmtf_bwt_dev_prepare(gmtf_bwt_dev *d, int dir)
{
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (!d->ops || d->retired)
        rc = -ENODEV;
    else if (dir == GMTF_BWT_DEV_FWD) {
        rc = dev_make(d, GMTF_BWT_DEV_FWD);
        unsigned enc = d->pipe[0] < 3 ? d->pipe[0] : 3;
        for (unsigned e = 0; e < enc && d->use_enc && rc == 0; e++)
            rc = dev_make(d, GMTF_BWT_DEV_ENC0 + (int)e);
    } else {
        rc = dev_make(d, GMTF_BWT_DEV_INV);
        if (rc == 0 && d->use_lanes)
            rc = dev_make(d, GMTF_BWT_DEV_LANES);
        for (unsigned g = 1; g < d->dec_groups && d->use_groups && rc == 0; g++)
            rc = grp_make(d, g);
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

int gmtf_bwt_dev_wants(const gmtf_bwt_dev *d, int dir, uint64_t bytes)
{
    return d->ops && !d->retired && bytes > 0 && bytes >= d->min_bytes[dir];
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The first device error retires the device (caller holds the lock). */
static void dev_retire(gmtf_bwt_dev *d, int rc)
{
    if (d->retired)
        return;
    if (!d->hold)
        dev_close(d);
    d->retired = 1;
    d->last_err = rc;
}

/* Makes the direction's context; then counts the call and applies the
 * injected fault (which retires the device at once, so that a call
 * entering beside it on another thread is not counted). 0 or a negative
 * code. Calls may come from two threads at once (the batch encode's
 * device steps): the bookkeeping is under d->lock, the calls are not. */
static int dev_enter(gmtf_bwt_dev *d, int dir)
{
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (!d->ops || d->retired) {
        rc = -ENODEV;
    } else {
        rc = dev_make(d, dir);
    }
    if (rc == 0) {
        d->calls++;
        if (d->fault_at && d->calls == d->fault_at) {
            rc = -EIO;
            dev_retire(d, rc);
        }
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Counts the call's blocks and time; retires the device after a device
 * error (the input's errors do not). */
static int dev_leave(gmtf_bwt_dev *d, int dir, int rc, size_t count, uint64_t t0)
{
    uint64_t t = now_ns() - t0;
    pthread_mutex_lock(&d->lock);
    d->ns[dir] += t;
    if (rc == 0)
        d->blocks[dir] += count;
    else if (rc != -EINVAL && rc != -EUCLEAN)
        dev_retire(d, rc);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

int gmtf_bwt_dev_forward(gmtf_bwt_dev *d, const uint8_t *src, const uint64_t *off, size_t count,
                         const uint32_t *step, uint8_t *dst, uint32_t *idx)
{
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_FWD);
    if (rc == 0)
        rc = d->ops->fwd(d->ctx[GMTF_BWT_DEV_FWD], src, off, count, step, dst, idx);
    return dev_leave(d, GMTF_BWT_DEV_FWD, rc, count, t0);
}

int gmtf_bwt_dev_inverse(gmtf_bwt_dev *d, const uint8_t *bwt, const uint64_t *off, size_t count,
                         const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_INV);
    if (rc == 0)
        rc = d->ops->inv(d->ctx[GMTF_BWT_DEV_INV], bwt, off, count, step, idx, dst);
    return dev_leave(d, GMTF_BWT_DEV_INV, rc, count, t0);
}

int gmtf_bwt_dev_lanes(gmtf_bwt_dev *d, const uint8_t *in, uint64_t nin, size_t count,
                       const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                       const uint64_t *out_off, uint8_t *out, uint8_t *bad, int keep)
{
    if (!d->use_lanes || (keep && !d->use_inv_dev))
        return -ENOTSUP;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_LANES);
    if (rc == 0 && keep)
        rc = d->ops->lanes_keep(d->ctx[GMTF_BWT_DEV_LANES], in, nin, count, lanes, cum, sel,
                                out_off, out, bad);
    else if (rc == 0)
        rc = d->ops->lanes(d->ctx[GMTF_BWT_DEV_LANES], in, nin, count, lanes, cum, sel, out_off,
                           out, bad);
    return dev_leave(d, GMTF_BWT_DEV_LANES, rc, count, t0);
}

/* 1 when the device is in service and context i exists. */
static int dev_has(gmtf_bwt_dev *d, int i)
{
    pthread_mutex_lock(&d->lock);
    int r = !d->retired && d->ctx[i] != NULL;
    pthread_mutex_unlock(&d->lock);
    return r;
}

int gmtf_bwt_dev_enc_scan(gmtf_bwt_dev *d, int e, size_t count, const uint64_t *off,
                          gmtf_gpu_lanes_scan_out *o)
{
    int dir = GMTF_BWT_DEV_ENC0 + e % 3;
    if (!d->use_enc)
        return -ENOTSUP;
    if (!dev_has(d, GMTF_BWT_DEV_FWD))
        return -ENODEV;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, dir);
    if (rc == 0)
        rc = d->ops->enc_scan(d->ctx[dir], d->ctx[GMTF_BWT_DEV_FWD], count, off, o);
    return dev_leave(d, dir, rc, 0, t0);
}

int gmtf_bwt_dev_enc_scan_plan(gmtf_bwt_dev *d, int e, size_t count, const uint64_t *off,
                               unsigned big_rank, gmtf_gpu_lanes_scan_out *o,
                               const gmtf_gpu_lanes_plan **plans, const uint8_t **psel)
{
    int dir = GMTF_BWT_DEV_ENC0 + e % 3;
    if (!d->use_plan)
        return -ENOTSUP;
    if (!dev_has(d, GMTF_BWT_DEV_FWD))
        return -ENODEV;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, dir);
    if (rc == 0)
        rc = d->ops->enc_scan_plan(d->ctx[dir], d->ctx[GMTF_BWT_DEV_FWD], count, off, big_rank, o,
                                   plans, psel);
    return dev_leave(d, dir, rc, 0, t0);
}

int gmtf_bwt_dev_enc_tables(gmtf_bwt_dev *d, int e, uint8_t **sel, uint16_t **cum, uint8_t **skip)
{
    int dir = GMTF_BWT_DEV_ENC0 + e % 3;
    if (!d->use_enc || !dev_has(d, dir))
        return -ENODEV;
    return d->ops->enc_tables(d->ctx[dir], sel, cum, skip);
}

int gmtf_bwt_dev_enc_code(gmtf_bwt_dev *d, int e, size_t count, const uint8_t **streams,
                          const uint32_t **len)
{
    int dir = GMTF_BWT_DEV_ENC0 + e % 3;
    if (!d->use_enc || !dev_has(d, dir))
        return -ENODEV;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, dir);
    if (rc == 0)
        rc = d->ops->enc_code(d->ctx[dir], streams, len);
    return dev_leave(d, dir, rc, count, t0);
}

int gmtf_bwt_dev_inverse_lanes(gmtf_bwt_dev *d, const uint64_t *off, size_t count,
                               const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    if (!d->use_inv_dev)
        return -ENOTSUP;
    if (!dev_has(d, GMTF_BWT_DEV_LANES))
        return -ENODEV;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_INV);
    if (rc == 0)
        rc = d->ops->inv_dev(d->ctx[GMTF_BWT_DEV_INV], d->ctx[GMTF_BWT_DEV_LANES], off, count, step,
                             idx, dst);
    return dev_leave(d, GMTF_BWT_DEV_INV, rc, count, t0);
}

int gmtf_bwt_dev_dec_groups(gmtf_bwt_dev *d, const uint8_t *in, uint64_t nin, size_t count,
                            const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                            const uint64_t *out_off, const uint8_t *fill, size_t ngroups,
                            const size_t *gend, const uint32_t *step, const uint32_t *idx,
                            const uint64_t *ioff, uint8_t *dst)
{
    if (!d->use_groups || !d->use_inv_dev || ngroups < 1 || ngroups > d->dec_groups)
        return -ENOTSUP;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_LANES);
    if (rc == 0) {
        pthread_mutex_lock(&d->lock);
        rc = dev_make(d, GMTF_BWT_DEV_INV);
        for (unsigned g = 1; g < ngroups && rc == 0; g++)
            rc = grp_make(d, g);
        pthread_mutex_unlock(&d->lock);
    }
    void *lc = d->ctx[GMTF_BWT_DEV_LANES];
    if (rc == 0)
        rc =
            d->ops->lanes_groups(lc, in, nin, count, lanes, cum, sel, out_off, fill, ngroups, gend);
    size_t started = 0;
    for (size_t g = 0; g < ngroups && rc == 0; g++, started++) {
        size_t a = g ? gend[g - 1] : 0;
        rc = d->ops->inv_group_start(grp_ctx(d, g), lc, g, out_off[0], out_off + a, gend[g] - a,
                                     step + a, idx + ioff[a], dst);
    }
    /* a failure after some groups were queued: nothing may still run when
     * the caller goes on without them */
    for (size_t g = 0; rc && g < started; g++)
        (void)d->ops->inv_group_wait(grp_ctx(d, g), lc, g, NULL);
    return dev_leave(d, GMTF_BWT_DEV_LANES, rc, count, t0);
}

int gmtf_bwt_dev_inverse_grp(gmtf_bwt_dev *d, size_t g, const uint8_t *bwt, const uint64_t *off,
                             size_t count, const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    if (g >= GMTF_GPU_LANES_GROUPS_MAX)
        return -EINVAL;
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_INV);
    if (rc == 0) {
        pthread_mutex_lock(&d->lock);
        rc = grp_make(d, (unsigned)g);
        pthread_mutex_unlock(&d->lock);
    }
    if (rc == 0)
        rc = d->ops->inv(grp_ctx(d, g), bwt, off, count, step, idx, dst);
    return dev_leave(d, GMTF_BWT_DEV_INV, rc, count, t0);
}

int gmtf_bwt_dev_dec_group_wait(gmtf_bwt_dev *d, size_t g, size_t count, uint8_t *bad)
{
    uint64_t t0 = now_ns();
    int rc = dev_enter(d, GMTF_BWT_DEV_INV);
    if (rc == 0)
        rc = d->ops->inv_group_wait(grp_ctx(d, g), d->ctx[GMTF_BWT_DEV_LANES], g, bad);
    return dev_leave(d, GMTF_BWT_DEV_INV, rc, count, t0);
}

/* ---- the GPU's ops -------------------------------------------------------- */

#if GMTF_HAVE_CUDA

#include "gpu.h"
#include "gpu_bwt.h"
#include "gpu_ibwt.h"

static int gpu_fwd_create(int dev, void **ctx)
{
    return gmtf_gpu_bwt_create_on(dev, (gmtf_gpu_bwt_ctx **)ctx);
}

static void gpu_fwd_destroy(void *ctx)
{
    gmtf_gpu_bwt_destroy(ctx);
}

static int gpu_fwd(void *ctx, const uint8_t *src, const uint64_t *off, size_t count,
                   const uint32_t *step, uint8_t *dst, uint32_t *idx)
{
    return gmtf_gpu_bwt_batch(ctx, src, off, count, step, dst, idx);
}

static int gpu_inv_create(int dev, void **ctx)
{
    return gmtf_gpu_ibwt_create_on(dev, (gmtf_gpu_ibwt_ctx **)ctx);
}

static void gpu_inv_destroy(void *ctx)
{
    gmtf_gpu_ibwt_destroy(ctx);
}

static int gpu_inv(void *ctx, const uint8_t *bwt, const uint64_t *off, size_t count,
                   const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    return gmtf_gpu_ibwt_batch(ctx, bwt, off, count, step, idx, dst);
}

static int gpu_lanes_create(int dev, void **ctx)
{
    return gmtf_gpu_lanes_create_on(dev, (gmtf_gpu_lanes_ctx **)ctx);
}

static void gpu_lanes_destroy(void *ctx)
{
    gmtf_gpu_lanes_destroy(ctx);
}

static int gpu_lanes(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                     const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                     const uint64_t *out_off, uint8_t *out, uint8_t *bad)
{
    return gmtf_gpu_lanes_decode(ctx, in, nin, count, lanes, cum, sel, out_off, out, bad);
}

static int gpu_lanes_keep(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                          const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                          const uint64_t *out_off, const uint8_t *fill, uint8_t *bad)
{
    return gmtf_gpu_lanes_decode_keep(ctx, in, nin, count, lanes, cum, sel, out_off, fill, bad);
}

static int gpu_inv_dev(void *ctx, void *lanes_ctx, const uint64_t *off, size_t count,
                       const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_lanes_out_device(lanes_ctx, &bwt);
    return rc ? rc : gmtf_gpu_ibwt_batch_dev(ctx, bwt, off, count, step, idx, dst);
}

static int gpu_lanes_groups(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                            const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                            const uint64_t *out_off, const uint8_t *fill, size_t ngroups,
                            const size_t *gend)
{
    return gmtf_gpu_lanes_decode_groups(ctx, in, nin, count, lanes, cum, sel, out_off, fill,
                                        ngroups, gend);
}

static int gpu_inv_group_start(void *ctx, void *lanes_ctx, size_t g, uint64_t base,
                               const uint64_t *off, size_t count, const uint32_t *step,
                               const uint32_t *idx, uint8_t *dst)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_lanes_out_device(lanes_ctx, &bwt);
    return rc ? rc
              : gmtf_gpu_ibwt_batch_dev_start(ctx, (uint8_t *)bwt + (off[0] - base),
                                              gmtf_gpu_lanes_group_event(lanes_ctx, g), off, count,
                                              step, idx, dst);
}

static int gpu_inv_group_wait(void *ctx, void *lanes_ctx, size_t g, uint8_t *bad)
{
    int rc = gmtf_gpu_ibwt_wait(ctx);
    return rc ? rc : gmtf_gpu_lanes_group_wait(lanes_ctx, g, bad);
}

static int gpu_enc_create(int dev, void **ctx)
{
    return gmtf_gpu_lanes_enc_create_on(dev, (gmtf_gpu_lanes_enc **)ctx);
}

static void gpu_enc_destroy(void *ctx)
{
    gmtf_gpu_lanes_enc_destroy(ctx);
}

static int gpu_enc_scan(void *ctx, void *fwd_ctx, size_t count, const uint64_t *off,
                        gmtf_gpu_lanes_scan_out *o)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_bwt_stage_device(fwd_ctx, &bwt, NULL);
    return rc ? rc : gmtf_gpu_lanes_enc_scan_dev(ctx, bwt, count, off, o);
}

static int gpu_enc_scan_plan(void *ctx, void *fwd_ctx, size_t count, const uint64_t *off,
                             unsigned big_rank, gmtf_gpu_lanes_scan_out *o,
                             const gmtf_gpu_lanes_plan **plans, const uint8_t **psel)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_bwt_stage_device(fwd_ctx, &bwt, NULL);
    return rc ? rc
              : gmtf_gpu_lanes_enc_scan_plan(ctx, bwt, 1, count, off, big_rank, o, plans, psel);
}

static int gpu_enc_tables(void *ctx, uint8_t **sel, uint16_t **cum, uint8_t **skip)
{
    return gmtf_gpu_lanes_enc_tables(ctx, sel, cum, skip);
}

static int gpu_enc_code(void *ctx, const uint8_t **streams, const uint32_t **len)
{
    return gmtf_gpu_lanes_enc_code_dev(ctx, streams, len);
}

static const gmtf_bwt_dev_ops gpu_ops = {
    .name = "gpu",
    .fwd_create = gpu_fwd_create,
    .fwd_destroy = gpu_fwd_destroy,
    .fwd = gpu_fwd,
    .inv_create = gpu_inv_create,
    .inv_destroy = gpu_inv_destroy,
    .inv = gpu_inv,
    .lanes_create = gpu_lanes_create,
    .lanes_destroy = gpu_lanes_destroy,
    .lanes = gpu_lanes,
    .enc_create = gpu_enc_create,
    .enc_destroy = gpu_enc_destroy,
    .enc_scan = gpu_enc_scan,
    .enc_tables = gpu_enc_tables,
    .enc_code = gpu_enc_code,
    .enc_scan_plan = gpu_enc_scan_plan,
    .lanes_keep = gpu_lanes_keep,
    .inv_dev = gpu_inv_dev,
    .lanes_groups = gpu_lanes_groups,
    .inv_group_start = gpu_inv_group_start,
    .inv_group_wait = gpu_inv_group_wait,
};

const gmtf_bwt_dev_ops *gmtf_bwt_dev_gpu(void)
{
    return gmtf_gpu_available() ? &gpu_ops : NULL;
}

int gmtf_bwt_dev_gpu_count(void)
{
    return gmtf_gpu_device_count();
}

#else

const gmtf_bwt_dev_ops *gmtf_bwt_dev_gpu(void)
{
    return NULL;
}

int gmtf_bwt_dev_gpu_count(void)
{
    return 0;
}

#endif
