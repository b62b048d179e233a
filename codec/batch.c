/* The batch API: count blocks in one buffer, encoded or decoded in
 * parallel on the codec's thread pool.
 *
 * Per-block backends do all stages of a block in one task (the block stays
 * in cache). A backend with batch hooks (the GPU) gets the MTF stage of the
 * whole batch in one call between two parallel stages: BWT of every block,
 * then one MTF call, then entropy coding of every block (the staged path).
 * Either way each block's frame depends only on its bytes, so the output
 * is the same for any thread count. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bwt.h"
#include "codec_internal.h"
#include "entropy_lanes_dev.h"
#include "qlfc.h"
#include "qlfc_internal.h"

/* GMTF_BATCH_PROFILE=1: the device decode's phases on stderr (ms), for
 * benchmarks (docs/gpu.md). */
static int prof_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("GMTF_BATCH_PROFILE");
        on = e && *e == '1';
    }
    return on;
}

static double prof_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- batch encode ------------------------------------------------------ */

uint64_t gmtf_batch_bound(const uint64_t *off, size_t count)
{
    return off[count] - off[0] + (uint64_t)count * GMTF_FRAME_FIXED;
}

struct batch_enc {
    gmtf_codec *c;
    const uint8_t *src;
    const uint64_t *off;
    uint8_t *dst;
    const uint64_t *slot;    /* where frame i may be written (bound-sized slots) */
    uint64_t *len;           /* frame length of block i */
    uint32_t *crc;           /* CRC-32C of block i, or NULL */
    int err;                 /* first error seen (any thread) */
    const uint8_t *adaptive; /* block i takes method 3 when adaptive[i] (NULL: none) */
};

/* Does the caller want block i in method 3 (gmtf_batch_encode_hint)? */
static int hint_adaptive(const uint8_t *adaptive, size_t i)
{
    return adaptive && adaptive[i];
}

static void batch_set_err(int *err, int rc)
{
    int zero = 0;
    __atomic_compare_exchange_n(err, &zero, rc, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void batch_encode_one(void *ctx, size_t i, unsigned worker)
{
    struct batch_enc *b = ctx;
    gmtf_workspace *w = gmtf_codec_workspace_enc(b->c, worker);
    if (!w) {
        batch_set_err(&b->err, -ENOMEM);
        return;
    }
    size_t n = b->off[i + 1] - b->off[i];
    long r = gmtf_frame_encode_ws_as(&b->c->mtf, w, b->src + b->off[i], n, b->dst + b->slot[i],
                                     gmtf_frame_bound(n), b->c->frame_version,
                                     b->crc ? &b->crc[i] : NULL, hint_adaptive(b->adaptive, i));
    if (r < 0)
        batch_set_err(&b->err, (int)r);
    else
        b->len[i] = (uint64_t)r;
}

static void hbuf_free(gmtf_codec *c, struct gmtf_hbuf *b)
{
    if (b->pinned)
        gmtf_mtf_host_free(c->batch_mtf, b->p);
    else
        free(b->p);
    b->p = NULL;
    b->cap = 0;
    b->pinned = 0;
}

/* b grown to n bytes (its contents not kept), pinned when pin and the
 * batch backend allocates so, else from malloc (2 MiB pages asked for);
 * NULL on -ENOMEM. */
static void *hbuf_reserve_as(gmtf_codec *c, struct gmtf_hbuf *b, uint64_t n, int pin)
{
    if (n <= b->cap && b->p)
        return b->p;
    hbuf_free(c, b);
    if (n == 0)
        n = 1;
    if (pin && c->batch_mtf && (b->p = gmtf_mtf_host_alloc(c->batch_mtf, n)) != NULL) {
        b->pinned = 1;
    } else {
        b->p = malloc(n);
#ifdef MADV_HUGEPAGE
        if (b->p && n >= (4u << 20))
            (void)madvise((void *)(((uintptr_t)b->p + 4095) & ~(uintptr_t)4095),
                          (n - 4096) & ~(uint64_t)4095, MADV_HUGEPAGE);
#endif
    }
    b->cap = b->p ? n : 0;
    return b->p;
}

static void *hbuf_reserve(gmtf_codec *c, struct gmtf_hbuf *b, uint64_t n)
{
    return hbuf_reserve_as(c, b, n, 1);
}

static int ahead_capable(const gmtf_codec *c);
static unsigned enc_sets(const gmtf_codec *c);

/* Whether the encode's staging set (0, or 1: encoding ahead) is pinned:
 * both. Pinning by cudaHostAlloc cost about 0.7 ms a MiB on the H100 host
 * and more at the exit, so that pipe10 left both sets of an encode ahead
 * pageable (the whole Linux tar in 1.736 s, 2.123 with both pinned);
 * gmtf_gpu_host_alloc now registers pages it touched (pipe11: 8 ms for
 * 256 MiB), and pageable sets cost 35-60 ms a 256 MiB batch in transfers
 * at 5-11 GB/s that do not overlap the sort (docs/gpu.md, pipe11).
 * mkfs asks for pageable sets (gmtf_codec_set_pageable: mkfs11 measured
 * them faster on the 256 MiB prefix with cudaHostAlloc's pinning, and even
 * on the whole tar). GMTF_ENC_PIN (measurements): two digits, 1 = pinned,
 * for sets 0 and 1. */
static int enc_pin(const gmtf_codec *c, unsigned set)
{
    const char *v = getenv("GMTF_ENC_PIN");
    if (v && strlen(v) == 2)
        return v[set ? 1 : 0] == '1'; /* set 2 (two ahead) as set 1 */
    return !c->enc_pageable;
}

void gmtf_codec_set_pageable(gmtf_codec *c, int on)
{
    c->enc_pageable = on != 0;
    for (unsigned k = 0; c->multi && k < c->multi->n; k++)
        gmtf_codec_set_pageable(c->multi->sub[k], on);
}

static void stage_free(gmtf_codec *c)
{
    if (c->stage_pinned) {
        gmtf_mtf_host_free(c->batch_mtf, c->stage_a);
        gmtf_mtf_host_free(c->batch_mtf, c->stage_b);
    } else {
        free(c->stage_a);
        free(c->stage_b);
    }
    c->stage_a = c->stage_b = NULL;
    c->stage_cap = 0;
    if (c->stage_idx_pinned)
        gmtf_mtf_host_free(c->batch_mtf, c->stage_idx);
    else
        free(c->stage_idx);
    c->stage_idx = NULL;
    c->stage_idx_cap = 0;
}

static void ahead_drop(gmtf_codec *c);

void gmtf_batch_stage_free(gmtf_codec *c)
{
    ahead_drop(c);
    stage_free(c);
    for (int set = 0; set < 3; set++)
        for (int k = 0; k < 3; k++)
            hbuf_free(c, &c->enc_st[set][k]);
    hbuf_free(c, &c->dec_lanes);
    hbuf_free(c, &c->dec_cum);
    hbuf_free(c, &c->dec_sel);
    hbuf_free(c, &c->dec_in);
}

/* GMTF_STAGE_PAR=0 (measurements): the two pinned staging buffers one
 * after the other, as before pipe10. */
static int stage_par_on(void)
{
    const char *e = getenv("GMTF_STAGE_PAR");
    return !(e && *e == '0' && !e[1]);
}

/* Pinning page by page is most of a GPU codec's prepare (docs/gpu.md,
 * pipe10): a staging buffer from STAGE_PAR_MIN bytes is pinned on a
 * helper thread beside the other. */
#define STAGE_PAR_MIN (16u << 20)

struct pin_job {
    const gmtf_mtf *m;
    size_t n;
    void *p;
};

static void *pin_run(void *arg)
{
    struct pin_job *j = arg;
    j->p = gmtf_mtf_host_alloc(j->m, j->n);
    return NULL;
}

/* Grows the two staging buffers to n bytes each, from the batch backend's
 * host allocator (pinned memory doubles GPU transfers), else malloc. */
static int stage_reserve(gmtf_codec *c, uint64_t n)
{
    if (n <= c->stage_cap)
        return 0;
    stage_free(c);
    c->stage_pinned = c->batch_mtf != NULL;
    if (c->stage_pinned) {
        struct pin_job j = {c->batch_mtf, n, NULL};
        pthread_t th;
        int par =
            n >= STAGE_PAR_MIN && stage_par_on() && pthread_create(&th, NULL, pin_run, &j) == 0;
        c->stage_a = gmtf_mtf_host_alloc(c->batch_mtf, n);
        if (par)
            pthread_join(th, NULL);
        else
            pin_run(&j);
        c->stage_b = j.p;
        if (!c->stage_a || !c->stage_b) {
            stage_free(c);
            c->stage_pinned = 0;
        }
    }
    if (!c->stage_pinned) {
        c->stage_a = malloc(n);
        c->stage_b = malloc(n);
    }
    if (!c->stage_a || !c->stage_b) {
        stage_free(c);
        return -ENOMEM;
    }
    c->stage_cap = n;
    return 0;
}

struct stage_job {
    gmtf_codec *c;
    uint64_t bytes;
    int rc;
    double ms;
};

/* One buffer of the encode's own staging sets, on a thread; pageable
 * buffers touched (their page faults here rather than in the batches). */
struct hbuf_job {
    gmtf_codec *c;
    struct gmtf_hbuf *b;
    uint64_t bytes;
    int pin;
    pthread_t th;
    int started;
};

static void *hbuf_run(void *arg)
{
    struct hbuf_job *j = arg;
    uint8_t *p = hbuf_reserve_as(j->c, j->b, j->bytes, j->pin); /* a failure: the batch's */
    if (p && !j->b->pinned)
        memset(p, 0, j->bytes);
    return NULL;
}

static void hbuf_jobs_start(struct hbuf_job *j, int n)
{
    for (int i = 0; i < n; i++) {
        j[i].started = pthread_create(&j[i].th, NULL, hbuf_run, &j[i]) == 0;
        if (!j[i].started)
            hbuf_run(&j[i]);
    }
}

static int ahead_matches(const struct enc_ahead *a, const uint8_t *src, const uint64_t *off,
                         size_t count, const uint8_t *dst);

static void *stage_run(void *arg)
{
    struct stage_job *j = arg;
    double t0 = prof_on() ? prof_ms() : 0;
    j->rc = stage_reserve(j->c, j->bytes);
    if (prof_on())
        j->ms = prof_ms() - t0;
    return NULL;
}

int gmtf_codec_prepare(gmtf_codec *c, uint64_t batch_bytes, int encode)
{
    ahead_drop(c); /* a batch run ahead: its staging may be grown here */
    if (c->multi && gmtf_multi_dev_live(c->multi)) /* the device codecs' workspaces */
        return gmtf_multi_dev_prepare(c->multi, batch_bytes, encode);
    int dir = encode ? GMTF_BWT_DEV_FWD : GMTF_BWT_DEV_INV;
    int dev =
        c->frame_version != GMTF_FRAME_V1 && gmtf_bwt_dev_wants(&c->bwt_dev, dir, batch_bytes);
    double t0 = prof_on() ? prof_ms() : 0, t1 = t0, t2 = t0;
    /* the staging (pinned: the longest part) on a helper thread beside the
     * workspaces and the device's contexts; GMTF_STAGE_PAR=0: in turn. An
     * encode with its set 0 not pinned readies that set instead, and
     * encoding ahead its set 1 too. */
    int own0 = dev && encode && !enc_pin(c, 0), ahead = dev && encode && ahead_capable(c);
    struct stage_job sj = {c, batch_bytes, 0, 0};
    pthread_t th;
    int par = dev && !own0 && stage_par_on() && pthread_create(&th, NULL, stage_run, &sj) == 0;
    struct hbuf_job hj[6];
    int nh = 0;
    for (unsigned set = own0 ? 0 : 1; set < enc_sets(c) && (set == 0 || ahead); set++)
        for (int k = 0; k < 2; k++)
            hj[nh++] = (struct hbuf_job){c, &c->enc_st[set][k], batch_bytes, enc_pin(c, set), 0, 0};
    hbuf_jobs_start(hj, nh);
    int rc = 0;
    for (unsigned i = 0; i < c->threads && rc == 0; i++)
        if (!(encode ? gmtf_codec_workspace_enc(c, i) : gmtf_codec_workspace(c, i)))
            rc = -ENOMEM;
    if (prof_on())
        t1 = prof_ms();
    if (dev && rc == 0) /* a failure: the first batch's to find */
        (void)gmtf_bwt_dev_prepare(&c->bwt_dev, dir);
    if (prof_on())
        t2 = prof_ms();
    if (par)
        pthread_join(th, NULL);
    else if (dev && !own0 && rc == 0)
        stage_run(&sj);
    for (int i = 0; i < nh; i++)
        if (hj[i].started)
            pthread_join(hj[i].th, NULL);
    if (prof_on())
        fprintf(stderr,
                "profile: prepare %s %llu bytes: workspaces %.2f, device %.2f, staging %.2f "
                "(%s), %.2f ms in all\n",
                encode ? "encode" : "decode", (unsigned long long)batch_bytes, t1 - t0, t2 - t1,
                sj.ms, par ? "beside" : "after", prof_ms() - t0);
    return rc ? rc : sj.rc;
}

/* Per-block state of a staged batch. */
struct stage_block {
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    gmtf_frame_info fi;
    uint32_t crc;
    int bwt;   /* the block goes through BWT and MTF (GMTF_DECODE_RANKS), or
                * decodes to BWT output with no MTF (GMTF_DECODE_BWT_V2) */
    int lanes; /* device path: its method 2 lanes are decoded on the device */
    int m2;    /* decode, device path: its payload says method 2 (packed first) */
};

struct staged {
    gmtf_codec *c;
    const uint8_t *src;
    const uint64_t *off; /* blocks in src (encode) or frames (decode) */
    uint8_t *dst;
    const uint64_t *slot;  /* encode: frame slots in dst; decode: blocks in dst */
    const uint64_t *stage; /* block i in the staging buffers, from 0 */
    uint64_t *len;
    uint32_t *crc; /* encode: CRC-32C of block i, or NULL */
    int *status;
    struct stage_block *sb;
    int mtf_failed; /* the batch hook failed: per-block MTF instead */
    int err;
    const uint8_t *adaptive; /* encode: block i takes method 3 (NULL: none) */
};

static void staged_encode_bwt(void *ctx, size_t i, unsigned worker)
{
    struct staged *s = ctx;
    gmtf_workspace *w = gmtf_codec_workspace(s->c, worker);
    const uint8_t *src = s->src + s->off[i];
    size_t n = s->off[i + 1] - s->off[i];
    uint8_t *stage = s->c->stage_a + s->stage[i];
    struct stage_block *b = &s->sb[i];
    if (!w) {
        batch_set_err(&s->err, -ENOMEM);
        return;
    }
    b->crc = gmtf_crc32c(0, src, n);
    if (s->crc)
        s->crc[i] = b->crc;
    long r = gmtf_frame_encode_special(src, n, s->dst + s->slot[i], b->crc);
    if (r) {
        s->len[i] = (uint64_t)r;
        memcpy(stage, src, n); /* the batch MTF then reads defined bytes */
        return;
    }
    b->bwt = 1;
    int rc = gmtf_bwt_forward(src, stage, n, b->idx, w->bwt_ws);
    if (rc < 0)
        batch_set_err(&s->err, rc);
}

static void staged_encode_entropy(void *ctx, size_t i, unsigned worker)
{
    struct staged *s = ctx;
    struct stage_block *b = &s->sb[i];
    if (!b->bwt)
        return;
    gmtf_workspace *w = gmtf_codec_workspace_enc(s->c, worker);
    if (!w) {
        batch_set_err(&s->err, -ENOMEM);
        return;
    }
    size_t n = s->off[i + 1] - s->off[i];
    uint8_t *ranks = s->c->stage_b + s->stage[i];
    if (s->mtf_failed)
        gmtf_mtf_encode(&s->c->mtf, s->c->stage_a + s->stage[i], ranks, n);
    long r = gmtf_frame_encode_ranks(s->src + s->off[i], ranks, n, b->idx, b->crc,
                                     s->dst + s->slot[i], w->rank_ws);
    if (r < 0)
        batch_set_err(&s->err, (int)r);
    else
        s->len[i] = (uint64_t)r;
}

/* BWT of every block, one batch MTF call, entropy coding of every block. */
static int batch_encode_staged(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                               uint8_t *dst, const uint64_t *slot, uint64_t *len, uint32_t *crc)
{
    int rc = stage_reserve(c, off[count]);
    if (rc < 0)
        return rc;
    struct stage_block *sb = calloc(count, sizeof *sb);
    if (!sb)
        return -ENOMEM;
    struct staged s = {.c = c,
                       .src = src,
                       .off = off,
                       .dst = dst,
                       .slot = slot,
                       .stage = off,
                       .len = len,
                       .crc = crc,
                       .sb = sb};
    gmtf_pool_run(c->pool, staged_encode_bwt, &s, count);
    if (s.err == 0) {
        s.mtf_failed = gmtf_mtf_batch_encode(c->batch_mtf, c->stage_a, off, count, c->stage_b) < 0;
        gmtf_pool_run(c->pool, staged_encode_entropy, &s, count);
    }
    free(sb);
    return s.err;
}

/* Version 2 frames with the BWT on the device (below). */
static int batch_encode_dev(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                            uint8_t *dst, const uint64_t *slot, uint64_t *len, uint32_t *crc,
                            const uint8_t *adaptive);

static int batch_use_staged(const gmtf_codec *c, uint64_t bytes)
{
    return c->batch_mtf && bytes >= c->batch_mtf->ops->min_batch_bytes;
}

int gmtf_batch_encode(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                      uint8_t *dst, uint64_t cap, uint64_t *dst_off)
{
    return gmtf_batch_encode_crc(c, src, off, count, dst, cap, dst_off, NULL);
}

static int batch_encode_crc(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                            uint8_t *dst, uint64_t *dst_off, uint32_t *crc,
                            const uint8_t *adaptive);

int gmtf_batch_encode_crc(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, uint64_t cap, uint64_t *dst_off, uint32_t *crc)
{
    return gmtf_batch_encode_hint(c, src, off, count, dst, cap, dst_off, crc, NULL);
}

int gmtf_batch_encode_hint(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                           uint8_t *dst, uint64_t cap, uint64_t *dst_off, uint32_t *crc,
                           const uint8_t *adaptive)
{
    int hinted = 0;
    for (size_t i = 0; adaptive && i < count && !hinted; i++)
        hinted = adaptive[i] != 0;
    if (!hinted)
        adaptive = NULL;
    if (c->ahead && (hinted || !ahead_matches(c->ahead, src, off, count, dst)))
        ahead_drop(c); /* not the batch announced (or hinted): its work is dropped */
    if (off[0] != 0)
        return -EINVAL;
    uint64_t largest = 0;
    for (size_t i = 0; i < count; i++) {
        if (off[i + 1] < off[i] || off[i + 1] - off[i] > c->max_block)
            return -EINVAL;
        if (off[i + 1] - off[i] > largest)
            largest = off[i + 1] - off[i];
    }
    if (cap < gmtf_batch_bound(off, count))
        return -ENOSPC;
    int mrc = c->multi && !hinted
                  ? gmtf_multi_dev_encode(c->multi, src, off, count, dst, dst_off, crc)
                  : 1;
    if (mrc != 1) /* several GPUs took it (multi_dev.c) */
        return mrc;
    gmtf_codec_need(c, largest);
    double t0 = prof_on() ? prof_ms() : 0;
    int rc = batch_encode_crc(c, src, off, count, dst, dst_off, crc, adaptive);
    if (prof_on()) /* one line a batch: what a caller's time in the codec adds up to */
        fprintf(stderr, "profile: encode batch of %zu blocks, %llu bytes: %.2f ms\n", count,
                (unsigned long long)off[count], prof_ms() - t0);
    gmtf_codec_need(c, 0);
    return rc;
}

static int batch_encode_crc(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                            uint8_t *dst, uint64_t *dst_off, uint32_t *crc, const uint8_t *adaptive)
{
    /* Frames are written into bound-sized slots, then packed forward; a
     * slot never starts before the packed position, so memmove is safe. */
    uint64_t *slot = malloc((count + 1) * sizeof *slot * 2);
    if (!slot && count)
        return -ENOMEM;
    uint64_t *len = slot + count + 1;
    uint64_t pos = 0;
    for (size_t i = 0; i < count; i++) {
        slot[i] = pos;
        pos += gmtf_frame_bound(off[i + 1] - off[i]);
    }
    struct batch_enc b = {c, src, off, dst, slot, len, crc, 0, adaptive};
    /* Only version 1 frames have an MTF stage to batch. */
    int cpu = 1;
    if (c->frame_version == GMTF_FRAME_V1 && batch_use_staged(c, off[count]) &&
        c->batch_mtf->ops->batch_encode) {
        b.err = batch_encode_staged(c, src, off, count, dst, slot, len, crc);
        cpu = 0;
    } else if (c->ahead || (c->frame_version != GMTF_FRAME_V1 &&
                            gmtf_bwt_dev_wants(&c->bwt_dev, GMTF_BWT_DEV_FWD, off[count]))) {
        int rc = batch_encode_dev(c, src, off, count, dst, slot, len, crc, adaptive);
        cpu = rc == 1;
        b.err = rc == 1 ? 0 : rc;
    }
    if (cpu)
        gmtf_pool_run(c->pool, batch_encode_one, &b, count);
    if (b.err == 0) {
        uint64_t out = 0;
        for (size_t i = 0; i < count; i++) {
            if (out != slot[i])
                memmove(dst + out, dst + slot[i], len[i]);
            dst_off[i] = out;
            out += len[i];
        }
        dst_off[count] = out;
    }
    free(slot);
    return b.err;
}

/* ---- batch decode ------------------------------------------------------ */

struct batch_dec {
    gmtf_codec *c;
    const uint8_t *src;
    const uint64_t *foff;
    uint8_t *dst;
    const uint64_t *doff;
    int *status;
    int err;
};

static void batch_decode_one(void *ctx, size_t i, unsigned worker)
{
    struct batch_dec *b = ctx;
    int rc;
    gmtf_workspace *w = gmtf_codec_workspace(b->c, worker);
    if (!w) {
        rc = -ENOMEM;
    } else {
        size_t cap = b->doff[i + 1] - b->doff[i];
        long r = gmtf_frame_decode_ws(&b->c->mtf, w, b->src + b->foff[i],
                                      b->foff[i + 1] - b->foff[i], b->dst + b->doff[i], cap);
        rc = r < 0 ? (int)r : (r == (long)cap ? 0 : GMTF_E_CORRUPT);
    }
    if (b->status)
        b->status[i] = rc;
    if (rc)
        batch_set_err(&b->err, rc);
}

static void staged_decode_ranks(void *ctx, size_t i, unsigned worker)
{
    struct staged *s = ctx;
    struct stage_block *b = &s->sb[i];
    gmtf_workspace *w = gmtf_codec_workspace(s->c, worker);
    size_t cap = s->slot[i + 1] - s->slot[i];
    uint8_t *ranks = s->c->stage_a + s->stage[i];
    long r = -ENOMEM;
    if (w)
        /* A BWT block beyond max_block would overrun the worker's tables. */
        r = gmtf_frame_decode_begin(
            s->src + s->off[i], s->off[i + 1] - s->off[i], s->dst + s->slot[i], cap, ranks,
            cap < w->max_block ? cap : w->max_block, w->rank_ws, &b->fi, b->idx);
    if ((r == GMTF_DECODE_RANKS || r == GMTF_DECODE_BWT_V2) && b->fi.orig_len == cap) {
        b->bwt = (int)r; /* version 2: the batch MTF's output for it is unused */
        return;
    }
    memset(ranks, 0, cap); /* the batch MTF then reads defined bytes */
    if (r >= 0 && b->fi.orig_len != cap)
        r = GMTF_E_CORRUPT;
    s->status[i] = r < 0 ? (int)r : 0;
    s->len[i] = r == 0; /* 1: decoded, only the checksum is left */
}

static void staged_decode_bwt(void *ctx, size_t i, unsigned worker)
{
    struct staged *s = ctx;
    struct stage_block *b = &s->sb[i];
    if (!b->bwt && !s->len[i])
        return;
    gmtf_workspace *w = gmtf_codec_workspace(s->c, worker);
    uint8_t *out = s->c->stage_b + s->stage[i];
    if (!w) {
        s->status[i] = -ENOMEM;
        return;
    }
    if (b->bwt == GMTF_DECODE_RANKS && s->mtf_failed)
        gmtf_mtf_decode(&s->c->mtf, s->c->stage_a + s->stage[i], out, b->fi.orig_len);
    if (b->bwt == GMTF_DECODE_BWT_V2)
        out = s->c->stage_a + s->stage[i];
    long r = gmtf_frame_decode_end(out, s->dst + s->slot[i], &b->fi, b->idx, w->bwt_ws, b->bwt);
    s->status[i] = r < 0 ? (int)r : 0;
}

/* Entropy decoding of every frame, one batch inverse MTF, inverse BWT. */
static int batch_decode_staged(gmtf_codec *c, const uint8_t *src, const uint64_t *foff,
                               size_t count, uint8_t *dst, const uint64_t *doff, int *status)
{
    uint64_t total = doff[count] - doff[0];
    int rc = stage_reserve(c, total ? total : 1);
    if (rc < 0)
        return rc;
    struct stage_block *sb = calloc(count, sizeof *sb);
    uint64_t *stage = malloc((count + 1) * sizeof *stage);
    uint64_t *done = calloc(count, sizeof *done);
    if (!sb || !stage || !done) {
        free(sb);
        free(stage);
        free(done);
        return -ENOMEM;
    }
    for (size_t i = 0; i <= count; i++)
        stage[i] = doff[i] - doff[0];
    struct staged s = {.c = c,
                       .src = src,
                       .off = foff,
                       .dst = dst,
                       .slot = doff,
                       .stage = stage,
                       .len = done,
                       .status = status,
                       .sb = sb};
    gmtf_pool_run(c->pool, staged_decode_ranks, &s, count);
    s.mtf_failed = gmtf_mtf_batch_decode(c->batch_mtf, c->stage_a, stage, count, c->stage_b) < 0;
    gmtf_pool_run(c->pool, staged_decode_bwt, &s, count);
    for (size_t i = 0; i < count && !s.err; i++)
        s.err = status[i];
    free(sb);
    free(stage);
    free(done);
    return s.err;
}

/* ---- version 2 batches with the BWT on the device -------------------------
 *
 * The blocks that need a BWT are packed into the staging buffers (pinned
 * when the GPU is the batch backend) and cut into chunks of about equal
 * bytes (gmtf_bwt_dev.pipe and chunk_min); each chunk goes through three steps:
 *   encode: copy in (CPU) -> forward BWT (device) -> QLFC coding (CPU);
 *   decode: QLFC decoding (CPU) -> inverse BWT (device) -> checksum, copy
 *           out (CPU).
 * The device step of chunk k runs on a helper thread while the pool does
 * the first step of chunk k + 1 and the last of chunk k - 1. A device step
 * that fails retires the device (bwt_dev.c); its chunk and every later one
 * finish on the CPU (codec/bwt.c from the same staged bytes), so no block
 * of the batch is lost and the output is the same. */

/* Grows the sample-row array to n entries (pinned like the staging). */
static int stage_idx_reserve(gmtf_codec *c, uint64_t n)
{
    if (n <= c->stage_idx_cap)
        return 0;
    if (c->stage_idx_pinned)
        gmtf_mtf_host_free(c->batch_mtf, c->stage_idx);
    else
        free(c->stage_idx);
    c->stage_idx_cap = 0;
    c->stage_idx_pinned = c->batch_mtf != NULL;
    c->stage_idx = c->stage_idx_pinned ? gmtf_mtf_host_alloc(c->batch_mtf, n * 4) : NULL;
    if (!c->stage_idx) {
        c->stage_idx_pinned = 0;
        c->stage_idx = malloc(n * 4);
    }
    if (!c->stage_idx)
        return -ENOMEM;
    c->stage_idx_cap = n;
    return 0;
}

/* The device's share of a batch: the blocks it transforms, packed in the
 * staging buffers, and their sample rows. */
struct dev_batch {
    struct staged s;
    size_t nsel;    /* blocks on the device */
    size_t *sel;    /* their batch indexes */
    uint64_t *coff; /* their bytes in stage_a / stage_b (nsel + 1) */
    uint64_t *ioff; /* their first sample row in stage_idx (nsel + 1) */
    uint32_t *step; /* their sample steps */
    int dev_failed; /* set before the last step of the chunk that failed */
    size_t count;   /* blocks in the batch */
    /* decode, method 2 on the device: per packed block its 32 lanes,
     * tables and selectors (gpu_lanes.h), and the device's verdict */
    gmtf_gpu_lane *lanes;
    uint16_t *cum;
    uint8_t *selectors;
    uint8_t *bad;
    /* the device's input: src, or a pinned copy of each such block's payload at
     * its offset in src (GMTF_GPU_DEC_COPY_IN, default on) */
    uint8_t *in;
    struct enc_lanes *enc; /* encode, method 2 on the device */
    uint64_t prof_ns[4];   /* GMTF_BATCH_PROFILE: decode begin's parts, summed */
    size_t split;          /* decode: the packed blocks [0, split) say method 2 */
    /* encode: the staging set (0 or 1: encoding ahead), whether it is the
     * encode's own (enc_st[set]) or the codec's (stage_a, stage_b,
     * stage_idx: decode, and encode's pinned set 0), and its buffers, set
     * by dev_batch_pack_by */
    unsigned set;
    int own;
    uint8_t *st_a, *st_b;
    uint32_t *st_idx;
};

static uint64_t prof_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#define LANES_CUM ((size_t)GMTF_GPU_LANES_NTABLES * GMTF_GPU_LANES_CUM)

/* Packed block j's lanes as a stand-in: all at their end, nothing to do. */
static void lanes_standin(struct dev_batch *d, size_t j)
{
    gmtf_gpu_lane *l = d->lanes + j * GMTF_GPU_LANES;
    memset(l, 0, GMTF_GPU_LANES * sizeof *l);
    for (unsigned q = 0; q < GMTF_GPU_LANES; q++)
        l[q].x[0] = l[q].x[1] = 1ull << 32;
}

static int dev_batch_alloc(struct dev_batch *d, size_t count)
{
    size_t m = count + 1;
    d->sel = malloc(m * sizeof *d->sel);
    d->coff = malloc(m * sizeof *d->coff);
    d->ioff = malloc(m * sizeof *d->ioff);
    d->step = malloc(m * sizeof *d->step);
    d->s.sb = calloc(m, sizeof *d->s.sb);
    return d->sel && d->coff && d->ioff && d->step && d->s.sb ? 0 : -ENOMEM;
}

static void dev_batch_free(struct dev_batch *d)
{
    /* lanes, cum and selectors are the codec's (dec_lanes, dec_cum, dec_sel) */
    free(d->bad);
    free(d->sel);
    free(d->coff);
    free(d->ioff);
    free(d->step);
    free(d->s.sb);
}

struct cost_of {
    uint64_t cost;
    size_t i;
};

static int cost_cmp(const void *a, const void *b)
{
    const struct cost_of *x = a, *y = b;
    return x->cost != y->cost ? (x->cost < y->cost ? -1 : 1) : (x->i > y->i) - (x->i < y->i);
}

/* Packs the marked blocks (sb[i].bwt) of size[i] bytes; sizes the staging.
 * cost (decode, may be NULL): the method 2 blocks in ascending cost, so
 * that the decode's groups (dev_decode_groups) are cut from the cheapest
 * to the costliest. */
static int dev_batch_pack_by(struct dev_batch *d, size_t count, const uint64_t *size,
                             const uint64_t *cost)
{
    gmtf_codec *c = d->s.c;
    d->nsel = 0;
    d->coff[0] = 0;
    d->ioff[0] = 0;
    struct cost_of *ord = cost ? malloc(count * sizeof *ord) : NULL;
    size_t nord = 0;
    if (ord)
        for (size_t i = 0; i < count; i++)
            if (d->s.sb[i].bwt && d->s.sb[i].m2)
                ord[nord++] = (struct cost_of){cost[i], i};
    if (nord)
        qsort(ord, nord, sizeof *ord, cost_cmp);
    /* the blocks whose payload says method 2 first (decode; none in encode),
     * then the others: the decode's pipeline cuts after them (dev_pipeline) */
    for (int pass = 1; pass >= 0; pass--) {
        for (size_t q = 0; q < count; q++) {
            size_t i = pass && ord ? (q < nord ? ord[q].i : count) : q;
            if (i >= count || !d->s.sb[i].bwt || d->s.sb[i].m2 != pass)
                continue;
            size_t n = size[i], j = d->nsel++;
            d->sel[j] = i;
            d->step[j] = 1u << gmtf_bwt_step_log2(n);
            d->coff[j + 1] = d->coff[j] + n;
            d->ioff[j + 1] = d->ioff[j] + gmtf_bwt_sample_count(n);
        }
        if (pass == 1)
            d->split = d->nsel;
    }
    free(ord);
    if (d->nsel == 0)
        return 0;
    if (d->own) { /* the encode's own set (its last batch is done) */
        uint64_t n = d->coff[d->nsel];
        struct gmtf_hbuf *h = c->enc_st[d->set];
        d->st_a = hbuf_reserve_as(c, &h[0], n, enc_pin(c, d->set));
        d->st_b = hbuf_reserve_as(c, &h[1], n, enc_pin(c, d->set));
        d->st_idx = hbuf_reserve(c, &h[2], d->ioff[d->nsel] * 4);
        return d->st_a && d->st_b && d->st_idx ? 0 : -ENOMEM;
    }
    int rc = stage_reserve(c, d->coff[d->nsel]);
    if (rc == 0)
        rc = stage_idx_reserve(c, d->ioff[d->nsel]);
    d->st_a = c->stage_a;
    d->st_b = c->stage_b;
    d->st_idx = c->stage_idx;
    return rc;
}

static int dev_batch_pack(struct dev_batch *d, size_t count, const uint64_t *size)
{
    return dev_batch_pack_by(d, count, size, NULL);
}

/* ---- the chunk pipeline ---- */

typedef void (*dev_step)(struct dev_batch *d, size_t j, unsigned worker);

struct dev_range {
    struct dev_batch *d;
    size_t j0;
    dev_step fn;
};

static void dev_range_one(void *ctx, size_t i, unsigned worker)
{
    struct dev_range *r = ctx;
    r->fn(r->d, r->j0 + i, worker);
}

/* fn over the packed blocks [j0, j1) on the pool. */
static void dev_run(struct dev_batch *d, dev_step fn, size_t j0, size_t j1)
{
    struct dev_range r = {d, j0, fn};
    gmtf_pool_run(d->s.c->pool, dev_range_one, &r, j1 - j0);
}

/* Method 2 lanes of the packed blocks [j0, j1) on the device, into the
 * staging; a block the device finds corrupt fails (as gmtf_qlfc_decode
 * would) and the inverse then sees harmless rows for it. */
static int dev_lanes(struct dev_batch *d, size_t j0, size_t j1, int *kept)
{
    *kept = 0;
    if (!d->lanes)
        return 0;
    size_t any = 0;
    for (size_t j = j0; j < j1; j++)
        any += d->s.sb[d->sel[j]].lanes;
    if (!any)
        return 0;
    gmtf_codec *c = d->s.c;
    int rc = gmtf_bwt_dev_lanes(&c->bwt_dev, d->in, d->s.off[d->count], j1 - j0,
                                d->lanes + j0 * GMTF_GPU_LANES, d->cum + j0 * LANES_CUM,
                                d->selectors + j0 * GMTF_GPU_LANES_MAX_GROUPS, d->coff + j0,
                                c->stage_a, d->bad + j0, c->bwt_dev.use_inv_dev);
    if (rc)
        return rc;
    *kept = c->bwt_dev.use_inv_dev;
    for (size_t j = j0; j < j1; j++) {
        struct stage_block *b = &d->s.sb[d->sel[j]];
        if (!b->lanes || !d->bad[j])
            continue;
        b->bwt = 0;
        d->s.status[d->sel[j]] = GMTF_E_CORRUPT;
        for (uint64_t q = d->ioff[j]; q < d->ioff[j + 1]; q++)
            c->stage_idx[q] = 1;
    }
    return 0;
}

struct dev_job {
    struct dev_batch *d;
    int dir;
    size_t j0, j1;
    int rc;
};

static void *dev_job_run(void *arg)
{
    struct dev_job *job = arg;
    struct dev_batch *d = job->d;
    gmtf_codec *c = d->s.c;
    size_t j0 = job->j0, n = job->j1 - j0;
    int kept = 0;
    if (job->dir == GMTF_BWT_DEV_FWD)
        job->rc = gmtf_bwt_dev_forward(&c->bwt_dev, d->st_a, d->coff + j0, n, d->step + j0, d->st_b,
                                       d->st_idx + d->ioff[j0]);
    else if ((job->rc = dev_lanes(d, j0, job->j1, &kept)) == 0 && kept)
        /* the lanes' output is still on the device: no round trip */
        job->rc = gmtf_bwt_dev_inverse_lanes(&c->bwt_dev, d->coff + j0, n, d->step + j0,
                                             c->stage_idx + d->ioff[j0], c->stage_b);
    else if (job->rc == 0)
        job->rc = gmtf_bwt_dev_inverse(&c->bwt_dev, c->stage_a, d->coff + j0, n, d->step + j0,
                                       c->stage_idx + d->ioff[j0], c->stage_b);
    return NULL;
}

/* first(k), device(k), last(k) for every chunk k, device(k) on a helper
 * thread beside first(k + 1) and last(k - 1). */
/* Chunks of the batch's device work in direction dir: the configured
 * count, at most one per chunk_min bytes and one per block, at least one. */
static unsigned dev_chunks(const struct dev_batch *d, int dir)
{
    const gmtf_codec *c = d->s.c;
    uint64_t bytes = d->coff[d->nsel],
             most = c->bwt_dev.chunk_min ? bytes / c->bwt_dev.chunk_min : bytes;
    unsigned chunks = c->bwt_dev.pipe[dir];
    if (chunks > most)
        chunks = (unsigned)most;
    if (chunks > d->nsel)
        chunks = (unsigned)d->nsel;
    return chunks < 1 ? 1 : chunks;
}

static void dev_pipeline(struct dev_batch *d, int dir, dev_step first, dev_step last)
{
    unsigned chunks = dev_chunks(d, dir);
    size_t b[GMTF_BWT_DEV_PIPE_MAX + 1];
    b[0] = 0;
    for (unsigned k = 1; k <= chunks; k++) {
        /* the first block boundary at or past k / chunks of the bytes */
        uint64_t want = d->coff[d->nsel] * k / chunks;
        size_t j = b[k - 1] < d->nsel ? b[k - 1] + 1 : d->nsel;
        while (j < d->nsel && d->coff[j] < want)
            j++;
        b[k] = k == chunks ? d->nsel : j;
    }
    if (dir == GMTF_BWT_DEV_INV && chunks == 1 && d->lanes && d->split > 0 && d->split < d->nsel &&
        d->s.c->bwt_dev.split_m3) {
        /* one chunk of the method 2 blocks, one of the others: the pool's
         * QLFC decoding of the others (a 2 MiB block of method 3 takes tens
         * of ms) runs beside the device's lanes and inverse of the first */
        chunks = 2;
        b[1] = d->split;
        b[2] = d->nsel;
    }
    struct dev_job job = {0};
    pthread_t th;
    int running = 0;
    double t0 = prof_on() ? prof_ms() : 0;
    for (unsigned k = 0; k <= chunks; k++) {
        if (k < chunks && b[k] < b[k + 1])
            dev_run(d, first, b[k], b[k + 1]);
        if (prof_on())
            fprintf(stderr, "profile: round %u first %.2f ms\n", k, prof_ms() - t0);
        if (running) {
            pthread_join(th, NULL);
            running = 0;
            if (job.rc)
                d->dev_failed = 1;
        }
        if (k < chunks && b[k] < b[k + 1] && !d->dev_failed) {
            job = (struct dev_job){d, dir, b[k], b[k + 1], 0};
            if (chunks > 1 && pthread_create(&th, NULL, dev_job_run, &job) == 0) {
                running = 1;
            } else {
                dev_job_run(&job);
                d->dev_failed = job.rc != 0;
            }
        }
        if (prof_on())
            fprintf(stderr, "profile: round %u device %.2f ms\n", k, prof_ms() - t0);
        if (k > 0 && b[k - 1] < b[k])
            dev_run(d, last, b[k - 1], b[k]);
        if (prof_on())
            fprintf(stderr, "profile: round %u last %.2f ms\n", k, prof_ms() - t0);
    }
}

/* ---- encode ---- */

/* Pass 1: checksum, empty/tiny/run frames; the others are marked. */
static void dev_encode_prep(void *ctx, size_t i, unsigned worker)
{
    (void)worker;
    struct dev_batch *d = ctx;
    struct staged *s = &d->s;
    const uint8_t *src = s->src + s->off[i];
    size_t n = s->off[i + 1] - s->off[i];
    struct stage_block *b = &s->sb[i];
    b->crc = gmtf_crc32c(0, src, n);
    if (s->crc)
        s->crc[i] = b->crc;
    long r = gmtf_frame_encode_special_v2(src, n, s->dst + s->slot[i], b->crc);
    if (r)
        s->len[i] = (uint64_t)r;
    else
        b->bwt = 1;
}

/* The block into the staging (pinned: fast transfers). */
static void dev_encode_copy(struct dev_batch *d, size_t j, unsigned worker)
{
    (void)worker;
    memcpy(d->st_a + d->coff[j], d->s.src + d->s.off[d->sel[j]], d->coff[j + 1] - d->coff[j]);
}

/* QLFC coding of the block's BWT output; the whole frame on the CPU when
 * the device failed. */
static void dev_encode_entropy(struct dev_batch *d, size_t j, unsigned worker)
{
    struct staged *s = &d->s;
    size_t i = d->sel[j];
    gmtf_workspace *w = gmtf_codec_workspace_enc(s->c, worker);
    if (!w) {
        batch_set_err(&s->err, -ENOMEM);
        return;
    }
    size_t n = s->off[i + 1] - s->off[i];
    long r;
    int m3 = hint_adaptive(s->adaptive, i);
    if (d->dev_failed)
        r = gmtf_frame_encode_ws_as(&s->c->mtf, w, s->src + s->off[i], n, s->dst + s->slot[i],
                                    gmtf_frame_bound(n), GMTF_FRAME_V2, NULL, m3);
    else
        r = gmtf_frame_encode_bwt_v2(s->src + s->off[i], d->st_b + d->coff[j], n,
                                     d->st_idx + d->ioff[j], s->sb[i].crc, s->dst + s->slot[i],
                                     w->rank_ws, m3);
    if (r < 0)
        batch_set_err(&s->err, (int)r);
    else
        s->len[i] = (uint64_t)r;
}

/* ---- encode, method 2 on the device ----
 *
 * Each chunk k goes through five steps:
 *   copy (pool)   its blocks into the pinned staging;
 *   A (device)    the forward BWT, then method 2's scan of its output on
 *                 the device (gmtf_bwt_dev_enc_scan: no round trip);
 *   plan (pool)   a block's plan from the scan, saved in a record; blocks
 *                 the device does not code (under GMTF_QLFC_LANES_MIN,
 *                 method 3 by the rule, raw, a scan that broke a rule) are
 *                 coded here from the BWT output, which came down with A;
 *   B (device)    the code step of the planned blocks;
 *   finish (pool) each planned block's payload from its record and lanes.
 * Round r runs copy(r), plan(r - 2) and finish(r - 4) on the pool while
 * two helper threads run A(r - 1) and B(r - 3) on the device; chunk k
 * takes encoder context k % 3, whose pinned buffers hold its scan outputs
 * and tables from A(k) to B(k) (rounds k + 1 to k + 3). Any device step that fails retires the
 * device (held: its buffers stay until the batch ends) and the chunk's
 * blocks are coded on the CPU: from the BWT output when A's forward BWT
 * came back, else from the source. Every frame is the CPU path's. */

struct enc_chunk {
    size_t j0, j1; /* its packed blocks */
    uint64_t *off; /* their bytes from 0 (j1 - j0 + 1) */
    int fwd_ok;    /* the BWT output and samples are in the staging */
    int scan_ok;   /* o, sel, cum and skip are valid */
    int code_ok;   /* streams, len and soff are valid */
    int lanes;     /* blocks planned for the device */
    gmtf_gpu_lanes_scan_out o;
    const gmtf_gpu_lanes_plan *plans; /* the plan's statistics from the device, or NULL */
    const uint8_t *psel;
    uint8_t *sel;
    uint16_t *cum;
    uint8_t *skip;
    const uint8_t *streams;
    const uint32_t *len;
    uint64_t *soff; /* block b's streams at streams + soff[b] */
};

struct enc_lanes {
    unsigned chunks;
    struct enc_chunk ch[GMTF_BWT_DEV_PIPE_MAX];
    unsigned *chunk_of; /* packed block -> chunk */
    uint8_t *planned;   /* packed block: 1 = planned, its frame comes in finish */
    uint8_t *late;      /* packed block: its frame coded on the CPU after the plan (ENC_LATE_*) */
    int tight;          /* the plan's statistics came from the device: B(k) right after plan(k) */
    uint8_t *rec;       /* packed block j's plan record at j * rec_size */
    size_t rec_size;
    unsigned ctx0; /* chunk k takes encoder context (ctx0 + k) % 3 */
    /* method 3 coded ahead (enc_spec): packed block j's payload length
     * (or -ENOSPC) in its slot, SPEC_NONE: not coded; NULL: off. A(k)
     * says when chunk k's BWT output is in the staging (bwt_done). */
    long *spec;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t bwt_done[GMTF_BWT_DEV_PIPE_MAX];
};

#define SPEC_NONE LONG_MIN

/* Packed block j's frame on the CPU: from its BWT output when that came
 * back from the device (the same bytes as gmtf_frame_encode_ws), else
 * from the source. */
static void enc_cpu(struct dev_batch *d, size_t j, gmtf_workspace *w, int have_bwt)
{
    struct staged *s = &d->s;
    size_t i = d->sel[j], n = s->off[i + 1] - s->off[i];
    int m3 = hint_adaptive(s->adaptive, i);
    long r = have_bwt ? gmtf_frame_encode_bwt_v2(s->src + s->off[i], d->st_b + d->coff[j], n,
                                                 d->st_idx + d->ioff[j], s->sb[i].crc,
                                                 s->dst + s->slot[i], w->rank_ws, m3)
                      : gmtf_frame_encode_ws_as(&s->c->mtf, w, s->src + s->off[i], n,
                                                s->dst + s->slot[i], gmtf_frame_bound(n),
                                                GMTF_FRAME_V2, NULL, m3);
    if (r < 0)
        batch_set_err(&s->err, (int)r);
    else
        s->len[i] = (uint64_t)r;
}

/* The frame around a payload coded at dst + header (plen, or -ENOSPC). */
static void enc_frame(struct dev_batch *d, size_t j, long plen)
{
    struct staged *s = &d->s;
    size_t i = d->sel[j], n = s->off[i + 1] - s->off[i];
    long r = gmtf_frame_finish_bwt_v2(s->src + s->off[i], n, d->st_idx + d->ioff[j], s->sb[i].crc,
                                      s->dst + s->slot[i], plen);
    if (r < 0)
        batch_set_err(&s->err, (int)r);
    else
        s->len[i] = (uint64_t)r;
}

/* What a block not planned for the device takes (its coding on the CPU,
 * left for later in the tight schedule so that the code step starts
 * first). */
enum { ENC_LATE_NONE, ENC_LATE_CPU, ENC_LATE_CPU_BWT, ENC_LATE_M3, ENC_LATE_RAW };

static void enc_late(struct dev_batch *d, size_t j, unsigned worker)
{
    struct enc_lanes *e = d->enc;
    int how = e->late[j];
    if (how == ENC_LATE_NONE)
        return;
    e->late[j] = ENC_LATE_NONE;
    struct staged *s = &d->s;
    size_t i = d->sel[j], n = s->off[i + 1] - s->off[i];
    gmtf_workspace *w = gmtf_codec_workspace_enc(s->c, worker);
    if (!w) {
        batch_set_err(&s->err, -ENOMEM);
        return;
    }
    const uint8_t *bwt = d->st_b + d->coff[j];
    size_t h = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n), cap = gmtf_frame_payload_cap_v2(n);
    if (how == ENC_LATE_M3 && e->spec && e->spec[j] != SPEC_NONE) /* coded ahead */
        enc_frame(d, j, e->spec[j]);
    else if (how == ENC_LATE_M3) /* method 3, as gmtf_qlfc_encode goes on */
        enc_frame(d, j,
                  cap ? gmtf_qlfc_encode_deferred(bwt, n, s->dst + s->slot[i] + h, cap, w->rank_ws)
                      : -ENOSPC);
    else if (how == ENC_LATE_RAW) /* the header does not fit: raw, as on the CPU */
        enc_frame(d, j, -ENOSPC);
    else /* the CPU's way, from the BWT output when it came back */
        enc_cpu(d, j, w, how == ENC_LATE_CPU_BWT);
}

static void enc_plan(struct dev_batch *d, size_t j, unsigned worker)
{
    struct enc_lanes *e = d->enc;
    struct enc_chunk *ch = &e->ch[e->chunk_of[j]];
    struct staged *s = &d->s;
    size_t i = d->sel[j], n = s->off[i + 1] - s->off[i], b = j - ch->j0;
    gmtf_workspace *w = gmtf_codec_workspace_enc(s->c, worker);
    e->planned[j] = 0;
    e->late[j] = ENC_LATE_NONE;
    if (!w) {
        batch_set_err(&s->err, -ENOMEM);
        return;
    }
    int m3 = hint_adaptive(s->adaptive, i); /* the caller's: method 3, as on the CPU */
    if (!ch->fwd_ok || !ch->scan_ok || n < GMTF_QLFC_LANES_MIN || m3) {
        if (ch->scan_ok)
            ch->skip[b] = 1;
        e->late[j] = !ch->fwd_ok ? ENC_LATE_CPU : m3 ? ENC_LATE_M3 : ENC_LATE_CPU_BWT;
        if (!e->tight)
            enc_late(d, j, worker);
        return;
    }
    ch->skip[b] = 1;
    gmtf_gpu_lanes_scan_out v = ch->o;
    if (!ch->plans) {
        v.rk += ch->o.roff[GMTF_GPU_LANES * b];
        v.keys += 2 * ch->o.roff[GMTF_GPU_LANES * b];
    }
    v.runs += GMTF_GPU_LANES * b;
    v.init += (size_t)GMTF_GPU_LANES * 256 * b;
    v.ninit += GMTF_GPU_LANES * b;
    v.gstart += (size_t)GMTF_GPU_LANES_MAX_GROUPS * b;
    v.shared += (size_t)GMTF_GPU_LANES * GMTF_GPU_LANES_NSHARED * 16 * b;
    const uint8_t *bwt = d->st_b + d->coff[j];
    uint8_t *bsel = ch->sel + (size_t)GMTF_GPU_LANES_MAX_GROUPS * b;
    long r =
        ch->plans
            ? gmtf_lanes_enc_dev_plan_stats(n, w->rank_ws, &v, ch->plans + b,
                                            ch->psel + (size_t)GMTF_GPU_LANES_MAX_GROUPS * b, 1,
                                            bsel, ch->cum + LANES_CUM * b)
            : gmtf_lanes_enc_dev_plan(bwt, n, w->rank_ws, &v, 1, bsel, ch->cum + LANES_CUM * b);
    if (r == 0) {
        gmtf_lanes_enc_dev_save(w->rank_ws, e->rec + j * e->rec_size);
        ch->skip[b] = 0;
        e->planned[j] = 1;
        return;
    }
    e->late[j] = r == -EXDEV    ? ENC_LATE_M3
                 : r == -ENOSPC ? ENC_LATE_RAW
                                : ENC_LATE_CPU_BWT; /* the scan broke a rule: the CPU's way */
    if (!e->tight)
        enc_late(d, j, worker);
}

static void enc_finish(struct dev_batch *d, size_t j, unsigned worker)
{
    struct enc_lanes *e = d->enc;
    if (!e->planned[j])
        return;
    struct enc_chunk *ch = &e->ch[e->chunk_of[j]];
    struct staged *s = &d->s;
    size_t i = d->sel[j], n = s->off[i + 1] - s->off[i], b = j - ch->j0;
    gmtf_workspace *w = gmtf_codec_workspace_enc(s->c, worker);
    if (!w) {
        batch_set_err(&s->err, -ENOMEM);
        return;
    }
    long plen = -EAGAIN;
    if (ch->code_ok) {
        size_t h = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n), cap = gmtf_frame_payload_cap_v2(n);
        plen = gmtf_lanes_enc_dev_finish_rec(
            n, w->rank_ws, e->rec + j * e->rec_size, ch->streams + ch->soff[b],
            ch->len + (size_t)GMTF_GPU_LANES * b, s->dst + s->slot[i] + h, cap);
    }
    if (plen >= 0 || plen == -ENOSPC)
        enc_frame(d, j, plen);
    else /* a lane the device could not code, or no code step: the CPU's way */
        enc_cpu(d, j, w, 1);
}

/* Chunk k's BWT output is in the staging, or will not come (enc_spec). */
static void enc_bwt_done(struct enc_lanes *e, unsigned k)
{
    if (!e->spec)
        return;
    pthread_mutex_lock(&e->mu);
    e->bwt_done[k] = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static void enc_dev_a_impl(struct dev_batch *d, unsigned k);

/* Device step A of chunk k: forward BWT, then the scan. */
static void enc_dev_a(struct dev_batch *d, unsigned k)
{
    enc_dev_a_impl(d, k);
    enc_bwt_done(d->enc, k); /* (any way out) */
}

static void enc_dev_a_impl(struct dev_batch *d, unsigned k)
{
    gmtf_codec *c = d->s.c;
    struct enc_chunk *ch = &d->enc->ch[k];
    size_t j0 = ch->j0, n = ch->j1 - j0;
    double t0 = prof_on() ? prof_ms() : 0, t1 = t0;
    ch->fwd_ok = gmtf_bwt_dev_forward(&c->bwt_dev, d->st_a, d->coff + j0, n, d->step + j0, d->st_b,
                                      d->st_idx + d->ioff[j0]) == 0;
    enc_bwt_done(d->enc, k);
    if (prof_on())
        t1 = prof_ms();
    size_t big = 0;
    for (size_t j = j0; j < ch->j1; j++)
        big += d->coff[j + 1] - d->coff[j] >= GMTF_QLFC_LANES_MIN;
    if (!ch->fwd_ok || !big)
        return;
    int rc;
    ch->plans = NULL;
    ch->psel = NULL;
    if (c->bwt_dev.use_plan)
        rc = gmtf_bwt_dev_enc_scan_plan(&c->bwt_dev, (int)((d->enc->ctx0 + k) % 3), n, ch->off,
                                        GMTF_QLFC_BIG_RANK, &ch->o, &ch->plans, &ch->psel);
    else
        rc = gmtf_bwt_dev_enc_scan(&c->bwt_dev, (int)((d->enc->ctx0 + k) % 3), n, ch->off, &ch->o);
    double t2 = prof_on() ? prof_ms() : 0;
    if (rc == 0)
        rc = gmtf_bwt_dev_enc_tables(&c->bwt_dev, (int)((d->enc->ctx0 + k) % 3), &ch->sel, &ch->cum,
                                     &ch->skip);
    ch->scan_ok = rc == 0;
    if (prof_on()) {
        struct timespec w;
        clock_gettime(CLOCK_REALTIME, &w);
        fprintf(stderr,
                "profile: encode A (context %u, %zu blocks): forward %.2f, scan %.2f, tables "
                "%.2f ms, done at %.3f s\n",
                (d->enc->ctx0 + k) % 3, n, t1 - t0, t2 - t1, prof_ms() - t2,
                (double)w.tv_sec + w.tv_nsec / 1e9);
    }
}

/* Device step B of chunk k: the code step of its planned blocks. */
static void enc_dev_b(struct dev_batch *d, unsigned k)
{
    gmtf_codec *c = d->s.c;
    struct enc_chunk *ch = &d->enc->ch[k];
    size_t nb = ch->j1 - ch->j0;
    int any = 0;
    for (size_t j = ch->j0; j < ch->j1; j++)
        any |= d->enc->planned[j];
    if (!ch->scan_ok || !any)
        return;
    double t0 = prof_on() ? prof_ms() : 0;
    if (gmtf_bwt_dev_enc_code(&c->bwt_dev, (int)((d->enc->ctx0 + k) % 3), nb, &ch->streams,
                              &ch->len) != 0)
        return;
    if (prof_on()) {
        struct timespec w;
        clock_gettime(CLOCK_REALTIME, &w);
        fprintf(stderr, "profile: encode B (context %u): code %.2f ms, done at %.3f s\n",
                (d->enc->ctx0 + k) % 3, prof_ms() - t0, (double)w.tv_sec + w.tv_nsec / 1e9);
    }
    uint64_t at = 0;
    for (size_t b = 0; b < nb; b++) {
        ch->soff[b] = at;
        for (unsigned q = 0; q < GMTF_GPU_LANES; q++)
            at += ch->len[GMTF_GPU_LANES * b + q];
    }
    ch->code_ok = 1;
}

struct enc_round {
    struct dev_batch *d;
    int r;    /* round */
    int late; /* the tight schedule's second phase: enc_late of the plan's blocks */
    /* pool tasks: plan(r - 2), finish(r - 4) (tight: r - 3), copy(r) */
    size_t p0, p1, f0, f1, c0, c1;
};

static void enc_round_task(void *ctx, size_t t, unsigned worker)
{
    struct enc_round *q = ctx;
    size_t np = q->p1 - q->p0, nf = q->f1 - q->f0;
    if (t < np && q->late)
        enc_late(q->d, q->p0 + t, worker);
    else if (t < np)
        enc_plan(q->d, q->p0 + t, worker);
    else if (t < np + nf)
        enc_finish(q->d, q->f0 + t - np, worker);
    else
        dev_encode_copy(q->d, q->c0 + t - np - nf, worker);
}

static void *enc_round_dev_a(void *arg)
{
    struct enc_round *q = arg;
    enc_dev_a(q->d, (unsigned)(q->r - 1));
    return NULL;
}

static void *enc_round_dev_b(void *arg)
{
    struct enc_round *q = arg;
    enc_dev_b(q->d, (unsigned)(q->r - (q->d->enc->tight ? 2 : 3)));
    return NULL;
}

/* A round's device steps on helper threads: [0] A(r - 1), [1] B (their own
 * contexts and streams). A step that gets no thread runs on the caller's
 * in enc_devs_finish. */
struct enc_devs {
    int on[2], threaded[2];
    pthread_t th[2];
};

static void enc_devs_start(struct enc_round *q, struct enc_devs *v, int which, int on)
{
    v->on[which] = on;
    v->threaded[which] = on && pthread_create(&v->th[which], NULL,
                                              which ? enc_round_dev_b : enc_round_dev_a, q) == 0;
}

/* The steps without a thread here (B first, then A), then both joined. */
static void enc_devs_finish(struct enc_round *q, struct enc_devs *v)
{
    if (v->on[1] && !v->threaded[1])
        enc_round_dev_b(q);
    if (v->on[0] && !v->threaded[0])
        enc_round_dev_a(q);
    for (int i = 0; i < 2; i++)
        if (v->threaded[i])
            pthread_join(v->th[i], NULL);
}

/* ---- method 3 coded ahead ----
 *
 * A block whose runs are long on average (the method rule's second test:
 * runs * GMTF_QLFC_SPARSE < n, runs counted lane by lane as the scan
 * counts them) takes method 3 (-EXDEV from the plan), coded on the CPU
 * after the plan: one thread a block, ~0.25 s for 16 MiB of the Linux
 * tar's register headers, the batch's last step (docs/gpu.md, mkfs11).
 * With one chunk the pool is idle while A's scan and plan run on the
 * device: it codes such blocks then, from the BWT output that A brought
 * down first, into their slots; enc_late takes that payload when the plan
 * said method 3 (the same call on the same bytes: the same payload), and a
 * block the plan codes otherwise overwrites its slot. The rule's first
 * test (big ranks) needs the ranks: those blocks are coded after the plan
 * as before. GMTF_GPU_ENC_SPEC=0: off (measurements). */
static int env_spec(void)
{
    const char *v = getenv("GMTF_GPU_ENC_SPEC");
    return !(v && v[0] == '0' && !v[1]);
}

/* Is the block's BWT output sparse by the method rule's runs test? */
static int spec_sparse(const uint8_t *bwt, size_t n)
{
    size_t seg = (n + GMTF_QLFC_NLANES - 1) / GMTF_QLFC_NLANES;
    uint64_t runs = 0;
    for (size_t a = 0; a < n; a += seg) {
        size_t b = a + seg < n ? a + seg : n;
        runs++;
        for (size_t i = a + 1; i < b; i++)
            runs += bwt[i] != bwt[i - 1];
        if (runs * GMTF_QLFC_SPARSE >= n)
            return 0;
    }
    return 1;
}

static void enc_spec_one(void *ctx, size_t t, unsigned worker)
{
    struct dev_batch *d = ctx;
    struct enc_lanes *e = d->enc;
    struct staged *s = &d->s;
    size_t j = e->ch[0].j0 + t, i = d->sel[j], n = s->off[i + 1] - s->off[i];
    const uint8_t *bwt = d->st_b + d->coff[j];
    if (n < GMTF_QLFC_LANES_MIN || !(hint_adaptive(s->adaptive, i) || spec_sparse(bwt, n)))
        return;
    gmtf_workspace *w = gmtf_codec_workspace_enc(s->c, worker);
    if (!w)
        return; /* coded after the plan */
    size_t h = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n), cap = gmtf_frame_payload_cap_v2(n);
    e->spec[j] =
        cap ? gmtf_qlfc_encode_deferred(bwt, n, s->dst + s->slot[i] + h, cap, w->rank_ws) : -ENOSPC;
}

/* With one chunk and A(0) on its thread: once its BWT output is down,
 * the sparse blocks coded ahead on the pool (returns before A ends when
 * none is). */
static void enc_spec_run(struct dev_batch *d)
{
    struct enc_lanes *e = d->enc;
    pthread_mutex_lock(&e->mu);
    while (!e->bwt_done[0])
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    if (e->ch[0].fwd_ok)
        gmtf_pool_run(d->s.c->pool, enc_spec_one, d, e->ch[0].j1 - e->ch[0].j0);
}

static void enc_range(const struct enc_lanes *e, int k, size_t *a, size_t *b)
{
    *a = *b = 0;
    if (k >= 0 && k < (int)e->chunks) {
        *a = e->ch[k].j0;
        *b = e->ch[k].j1;
    }
}

/* GMTF_GPU_ENC_TIGHT=0: the plan's step as a round of its own even with
 * the device's statistics (for measurements). */
static int env_tight(void)
{
    const char *v = getenv("GMTF_GPU_ENC_TIGHT");
    return !(v && v[0] == '0' && !v[1]);
}

/* d->enc for chunks chunks (their blocks cut by bytes); enc_free undoes it. */
static int enc_setup(struct dev_batch *d, unsigned chunks)
{
    gmtf_codec *c = d->s.c;
    struct enc_lanes *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    d->enc = e;
    uint64_t bytes = d->coff[d->nsel];
    e->chunks = chunks;
    e->rec_size = (gmtf_lanes_enc_dev_rec_size() + 63) & ~(size_t)63;
    e->chunk_of = malloc(d->nsel * sizeof *e->chunk_of);
    e->planned = calloc(d->nsel, 1);
    e->late = calloc(d->nsel, 1);
    e->rec = malloc(d->nsel * e->rec_size);
    e->tight = c->bwt_dev.use_plan && env_tight();
    if (chunks == 1 && e->tight && env_spec() && (e->spec = malloc(d->nsel * sizeof *e->spec))) {
        for (size_t j = 0; j < d->nsel; j++)
            e->spec[j] = SPEC_NONE;
        pthread_mutex_init(&e->mu, NULL);
        pthread_cond_init(&e->cv, NULL);
    }
    int rc = e->chunk_of && e->planned && e->late && e->rec ? 0 : -ENOMEM;
    size_t prev = 0;
    for (unsigned k = 0; k < chunks && rc == 0; k++) {
        /* the first block boundary at or past (k + 1) / chunks of the bytes */
        uint64_t want = bytes * (k + 1) / chunks;
        size_t j = prev < d->nsel ? prev + 1 : d->nsel;
        while (j < d->nsel && d->coff[j] < want)
            j++;
        struct enc_chunk *ch = &e->ch[k];
        ch->j0 = prev;
        ch->j1 = k + 1 == chunks ? d->nsel : j;
        prev = ch->j1;
        size_t nb = ch->j1 - ch->j0;
        ch->off = malloc((nb + 1) * sizeof *ch->off);
        ch->soff = malloc((nb + 1) * sizeof *ch->soff);
        if (!ch->off || !ch->soff) {
            rc = -ENOMEM;
            break;
        }
        for (size_t b = 0; b <= nb; b++)
            ch->off[b] = d->coff[ch->j0 + b] - d->coff[ch->j0];
        for (size_t jj = ch->j0; jj < ch->j1; jj++)
            e->chunk_of[jj] = k;
    }
    return rc;
}

static void enc_free(struct dev_batch *d)
{
    struct enc_lanes *e = d->enc;
    if (!e)
        return;
    for (unsigned k = 0; k < e->chunks; k++) {
        free(e->ch[k].off);
        free(e->ch[k].soff);
    }
    free(e->chunk_of);
    free(e->planned);
    free(e->late);
    free(e->rec);
    if (e->spec) {
        free(e->spec);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
    }
    free(e);
    d->enc = NULL;
}

static int enc_pipeline(struct dev_batch *d)
{
    gmtf_codec *c = d->s.c;
    unsigned chunks = dev_chunks(d, GMTF_BWT_DEV_FWD);
    int rc = enc_setup(d, chunks);
    struct enc_lanes *e = d->enc;
    if (rc == 0) {
        gmtf_bwt_dev_hold(&c->bwt_dev, 1);
        for (int r = 0; r < (int)chunks + 4 && e->tight; r++) {
            /* tight: the plans of chunk r - 2 first (the device's
             * statistics: some ms), then its code step B(r - 2) beside
             * A(r - 1) on the device while the pool codes what the plan
             * left to the CPU, finishes chunk r - 3 and copies chunk r */
            struct enc_round q = {.d = d, .r = r};
            struct enc_devs v = {.on = {0, 0}};
            enc_range(e, r - 2, &q.p0, &q.p1);
            enc_range(e, r, &q.c0, &q.c1);
            double t0 = prof_on() ? prof_ms() : 0, t1 = t0, t2 = t0;
            enc_devs_start(&q, &v, 0, r >= 1 && r - 1 < (int)chunks);
            if (r == 1 && e->spec && v.threaded[0])
                enc_spec_run(d); /* beside A(0)'s scan and plan */
            if (q.p1 > q.p0)
                gmtf_pool_run(c->pool, enc_round_task, &q, q.p1 - q.p0);
            if (prof_on())
                t1 = prof_ms();
            enc_devs_start(&q, &v, 1, r >= 2 && r - 2 < (int)chunks);
            q.late = 1;
            enc_range(e, r - 3, &q.f0, &q.f1);
            size_t tasks = (q.p1 - q.p0) + (q.f1 - q.f0) + (q.c1 - q.c0);
            if (tasks)
                gmtf_pool_run(c->pool, enc_round_task, &q, tasks);
            if (prof_on())
                t2 = prof_ms();
            enc_devs_finish(&q, &v);
            if (prof_on()) /* the pool's two phases, then its wait on the device */
                fprintf(stderr,
                        "profile: encode round %d: plan %.2f, late+finish+copy %.2f, "
                        "device wait %.2f ms\n",
                        r, t1 - t0, t2 - t1, prof_ms() - t2);
        }
        for (int r = 0; r < (int)chunks + 4 && !e->tight; r++) {
            struct enc_round q = {.d = d, .r = r};
            struct enc_devs v = {.on = {0, 0}};
            enc_range(e, r - 2, &q.p0, &q.p1);
            enc_range(e, r - 4, &q.f0, &q.f1);
            enc_range(e, r, &q.c0, &q.c1);
            /* A(r - 1) and B(r - 3) on two helper threads (the code step, a
             * few warps that wait on their slowest lane, leaves the GPU to
             * the next chunk's BWT) */
            enc_devs_start(&q, &v, 0, r >= 1 && r - 1 < (int)chunks);
            enc_devs_start(&q, &v, 1, r >= 3 && r - 3 < (int)chunks);
            size_t tasks = (q.p1 - q.p0) + (q.f1 - q.f0) + (q.c1 - q.c0);
            if (tasks)
                gmtf_pool_run(c->pool, enc_round_task, &q, tasks);
            enc_devs_finish(&q, &v);
        }
        gmtf_bwt_dev_hold(&c->bwt_dev, 0);
    }
    enc_free(d);
    return rc;
}

/* ---- encoding ahead (gmtf_codec_set_next, pipe10) ----
 *
 * A batch in one chunk leaves the device idle during the pool's steps
 * around it (the copy, the plans, the blocks the device does not code, the
 * frames put together: ~85 of a 256 MiB batch's ~245 ms on the H100,
 * docs/gpu.md). With a next-batch hook, batch k's call readies batch
 * k + 1 on the pool while A(k) runs (the caller's hook, then its
 * checksums and special frames, its pack and its copy into the other
 * staging set), starts A(k + 1) on a thread as soon as A(k) ends, beside
 * batch k's plans, code step B(k), CPU blocks and finish, and returns with
 * A(k + 1) running: the call for batch k + 1 takes it over. The batches
 * use staging sets and encoder contexts in turn (0, 1, and 2 when batches
 * run two ahead; the set a batch takes is free: its last batch's call has
 * returned). The device stays held (not closed on a fault) while a batch
 * runs ahead; a fault in its A leaves its blocks to the CPU as in
 * enc_pipeline.
 *
 * Two ahead (pipe12): a batch whose blocks the plan mostly leaves to the
 * CPU (method 3: the tar's register headers, 95 of 128 blocks in its
 * second batch) keeps the pool busy long after A(k + 1) has ended, the
 * device idle. Then a helper thread readies batch k + 2 (the hook with
 * `after` = batch k + 1's src; its checksums and copy on AHEAD2_THREADS
 * threads of its own, beside the pool), joins A(k + 1)'s thread in place
 * of batch k + 1's call, and runs A(k + 2) at once; batch k + 1's call
 * waits for that join and takes batch k + 2 as its next batch instead of
 * readying it. GMTF_GPU_ENC_AHEAD2 (measurements): 0 off, 2 after every
 * batch; by default when at least a quarter of the batch's device blocks
 * go to the CPU after the plan. */
struct enc_ahead {
    struct dev_batch d;
    gmtf_batch_next nb; /* its arguments */
    uint64_t *slot;     /* slot, then len: count + 1 each */
    uint32_t *crc;
    pthread_t th;
    int running; /* A on th (two ahead: the helper, which readies it first) */
    /* two ahead: joiner, the batch whose helper joins this one's A thread
     * (set on the encoder's thread); for a batch a helper readies, the
     * codec, the batch before it, and under mu: done (its readying ended
     * and prev's A thread is joined), valid (readied: its A runs next) */
    struct enc_ahead *joiner;
    gmtf_codec *codec;
    struct enc_ahead *prev;
    int two;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, valid;
};

#define AHEAD2_THREADS 4

static int env_ahead(void)
{
    const char *v = getenv("GMTF_GPU_ENC_AHEAD"); /* measurements: 0 = off */
    return !(v && v[0] == '0' && !v[1]);
}

/* GMTF_GPU_ENC_AHEAD2: 1 by the rule, 2 after every batch; unset or 0:
 * off, the default. On the whole tar (docs/gpu.md, "Two batches ahead")
 * the device's coding ended 0.2 s earlier but the whole process did not
 * (1.446 s against 1.452 without), and a proxy whose later batches are
 * CPU-bound gained nothing: a third staging set (a batch of pinned memory)
 * is not worth it by default. */
static int env_ahead2(void)
{
    const char *v = getenv("GMTF_GPU_ENC_AHEAD2");
    if (v && (v[0] == '1' || v[0] == '2') && !v[1])
        return v[0] - '0';
    return 0;
}

/* 1 when batches on this codec's device go the way that encodes ahead. */
static int ahead_capable(const gmtf_codec *c)
{
    return c->next_fn && c->bwt_dev.use_enc && c->bwt_dev.use_plan && env_tight() && env_ahead();
}

/* The encode's staging sets in use: three when batches may run two ahead. */
static unsigned enc_sets(const gmtf_codec *c)
{
    return ahead_capable(c) && env_ahead2() ? 3 : 2;
}

static unsigned enc_set_after(const gmtf_codec *c, unsigned set)
{
    return (set + 1) % enc_sets(c);
}

static void ahead_free(struct enc_ahead *a)
{
    enc_free(&a->d);
    dev_batch_free(&a->d);
    free(a->slot);
    free(a->crc);
    if (a->two) {
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
    }
    free(a);
}

/* Waits for the batches started ahead, if any, and drops them. */
static void ahead_drop(gmtf_codec *c)
{
    struct enc_ahead *a = c->ahead, *a2 = c->ahead2;
    if (!a && !a2)
        return;
    c->ahead = c->ahead2 = NULL;
    if (a2) /* its helper: it joins a's A thread first */
        pthread_join(a2->th, NULL);
    if (a && a->running && !a->joiner)
        pthread_join(a->th, NULL);
    gmtf_bwt_dev_hold(&c->bwt_dev, 0);
    if (a)
        ahead_free(a);
    if (a2)
        ahead_free(a2);
}

static int ahead_matches(const struct enc_ahead *a, const uint8_t *src, const uint64_t *off,
                         size_t count, const uint8_t *dst)
{
    return a->nb.src == src && a->nb.off == off && a->nb.count == count && a->nb.dst == dst;
}

static int big_block(const struct dev_batch *d)
{
    for (size_t j = 0; j < d->nsel; j++)
        if (d->coff[j + 1] - d->coff[j] >= GMTF_QLFC_LANES_MIN)
            return 1;
    return 0;
}

/* A step over a batch's blocks on `parts` threads of its own (a helper's
 * readying, beside the pool): prep (pass 1) or copy. */
struct par_job {
    struct dev_batch *d;
    size_t n;
    unsigned part, parts;
    int copy;
    pthread_t th;
    int started;
};

static void *par_main(void *arg)
{
    struct par_job *j = arg;
    for (size_t i = j->part; i < j->n; i += j->parts) {
        if (j->copy)
            dev_encode_copy(j->d, i, 0);
        else
            dev_encode_prep(j->d, i, 0);
    }
    return NULL;
}

static void par_run(struct dev_batch *d, size_t n, int copy, unsigned parts)
{
    struct par_job j[AHEAD2_THREADS];
    for (unsigned i = 0; i < parts; i++) {
        j[i] = (struct par_job){d, n, i, parts, copy, 0, 0};
        j[i].started = i > 0 && pthread_create(&j[i].th, NULL, par_main, &j[i]) == 0;
    }
    for (unsigned i = 0; i < parts; i++)
        if (!j[i].started)
            par_main(&j[i]);
    for (unsigned i = 0; i < parts; i++)
        if (j[i].started)
            pthread_join(j[i].th, NULL);
}

/* Readies a (its set chosen) from the caller's hook up to its device step:
 * the next batch (after NULL; on the pool: nothing else runs there
 * meanwhile) or the one after `after` (a helper: on `threads` threads of
 * its own). -1: no such batch, one the device would not take this way, or
 * no memory (its call then codes it from the start). */
static int ahead_ready(gmtf_codec *c, struct enc_ahead *a, const uint8_t *after, unsigned threads)
{
    gmtf_batch_next nb = {.after = after};
    if (c->next_fn(c->next_arg, &nb) != 1 || nb.after != after || nb.count == 0 || !nb.off ||
        nb.off[0] != 0)
        return -1;
    for (size_t i = 0; i < nb.count; i++)
        if (nb.off[i + 1] < nb.off[i] || nb.off[i + 1] - nb.off[i] > c->max_block)
            return -1; /* its call says why */
    if (nb.cap < gmtf_batch_bound(nb.off, nb.count) ||
        nb.off[nb.count] < c->bwt_dev.min_bytes[GMTF_BWT_DEV_FWD])
        return -1;
    size_t count = nb.count;
    a->nb = nb;
    a->slot = malloc((count + 1) * 2 * sizeof *a->slot);
    a->crc = malloc(count * sizeof *a->crc);
    uint64_t *size = malloc((count + 1) * sizeof *size);
    int rc = a->slot && a->crc && size ? dev_batch_alloc(&a->d, count) : -ENOMEM;
    if (rc == 0) {
        uint64_t *len = a->slot + count + 1, pos = 0;
        for (size_t i = 0; i < count; i++) { /* as batch_encode_crc */
            a->slot[i] = pos;
            pos += gmtf_frame_bound(nb.off[i + 1] - nb.off[i]);
            size[i] = nb.off[i + 1] - nb.off[i];
        }
        a->d.s = (struct staged){.c = c,
                                 .src = nb.src,
                                 .off = nb.off,
                                 .dst = nb.dst,
                                 .slot = a->slot,
                                 .len = len,
                                 .crc = a->crc,
                                 .sb = a->d.s.sb};
        if (threads)
            par_run(&a->d, count, 0, threads);
        else
            gmtf_pool_run(c->pool, dev_encode_prep, &a->d, count);
        a->d.own = a->d.set != 0 || !enc_pin(c, 0);
        rc = dev_batch_pack(&a->d, count, size);
    }
    free(size);
    if (rc == 0 && a->d.nsel && big_block(&a->d) && enc_setup(&a->d, 1) == 0) {
        a->d.enc->ctx0 = a->d.set;
        if (threads)
            par_run(&a->d, a->d.nsel, 1, threads);
        else
            dev_run(&a->d, dev_encode_copy, 0, a->d.nsel);
        return 0;
    }
    return -1;
}

/* The next batch readied (the encoder's thread), or NULL. */
static struct enc_ahead *ahead_start(gmtf_codec *c)
{
    if (!ahead_capable(c))
        return NULL;
    struct enc_ahead *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->d.set = c->enc_set;
    if (ahead_ready(c, a, NULL, 0) == 0) {
        c->enc_set = enc_set_after(c, a->d.set);
        return a;
    }
    ahead_free(a);
    return NULL;
}

static void *enc_a_thread(void *arg)
{
    enc_dev_a(arg, 0);
    return NULL;
}

/* A helper two ahead: batch a readied, prev's A thread joined (the device's
 * forward step takes one batch at a time), then a's A. */
static void *ahead2_main(void *arg)
{
    struct enc_ahead *a = arg, *prev = a->prev;
    int ok = ahead_ready(a->codec, a, prev->nb.src, AHEAD2_THREADS) == 0;
    if (prev->running)
        pthread_join(prev->th, NULL);
    pthread_mutex_lock(&a->mu);
    a->valid = ok;
    a->done = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (ok)
        enc_dev_a(&a->d, 0);
    return NULL;
}

/* Whether batch d (its plan done: late says what the CPU codes) should
 * start the batch after next now. */
static int ahead2_want(const gmtf_codec *c, const struct dev_batch *d, size_t cpu_blocks)
{
    int e = env_ahead2();
    return enc_sets(c) == 3 && !c->ahead2 && (e == 2 || (e == 1 && 4 * cpu_blocks >= d->nsel));
}

/* Starts the helper that readies the batch after prev (the next batch,
 * its A on prev->th) and runs its A; 1 when it runs. */
static int ahead2_start(gmtf_codec *c, struct enc_ahead *prev)
{
    struct enc_ahead *a = calloc(1, sizeof *a);
    if (!a)
        return 0;
    a->codec = c;
    a->prev = prev;
    a->two = 1;
    a->d.set = c->enc_set;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    prev->joiner = a;
    if (pthread_create(&a->th, NULL, ahead2_main, a) != 0) {
        prev->joiner = NULL;
        ahead_free(a);
        return 0;
    }
    a->running = 1;
    c->enc_set = enc_set_after(c, a->d.set);
    c->ahead2 = a;
    return 1;
}

/* The batch a helper readied during the last call (self's): once it is
 * readied and self's A thread joined, it, or NULL (then its helper is
 * joined and it is dropped). */
static struct enc_ahead *ahead2_take(gmtf_codec *c)
{
    struct enc_ahead *a = c->ahead2;
    if (!a)
        return NULL;
    c->ahead2 = NULL;
    pthread_mutex_lock(&a->mu);
    while (!a->done)
        pthread_cond_wait(&a->cv, &a->mu);
    int ok = a->valid;
    pthread_mutex_unlock(&a->mu);
    if (ok)
        return a;
    pthread_join(a->th, NULL);
    ahead_free(a);
    return NULL;
}

/* Batch d in one chunk, encoding ahead; self: d came ahead (its copy done,
 * its A on self->th), else d is packed and nothing more. */
static int enc_ahead_pipeline(struct dev_batch *d, struct enc_ahead *self)
{
    gmtf_codec *c = d->s.c;
    double t0 = prof_on() ? prof_ms() : 0, t1 = t0, t2 = t0, t3 = t0;
    gmtf_bwt_dev_hold(&c->bwt_dev, 1);
    pthread_t th;
    int on = 0;
    if (!self) {
        int rc = enc_setup(d, 1);
        if (rc) {
            enc_free(d);
            gmtf_bwt_dev_hold(&c->bwt_dev, 0);
            return rc;
        }
        d->enc->ctx0 = d->set;
        dev_run(d, dev_encode_copy, 0, d->nsel);
        on = pthread_create(&th, NULL, enc_a_thread, d) == 0;
        if (!on)
            enc_dev_a(d, 0);
    }
    /* A(k) on the device; batch k + 1 readied by a helper during the last
     * call (its A running), else by the pool now */
    struct enc_ahead *next = self ? ahead2_take(c) : NULL;
    int two = next != NULL;
    if (!next)
        next = ahead_start(c);
    if (prof_on())
        t1 = prof_ms();
    if (self && self->running && !self->joiner)
        pthread_join(self->th, NULL);
    if (self)
        self->running = 0;
    if (on)
        pthread_join(th, NULL);
    if (prof_on())
        t2 = prof_ms();
    /* A(k + 1) beside this batch's plans, B(k) and CPU blocks */
    if (next && !two) {
        next->running = pthread_create(&next->th, NULL, enc_a_thread, &next->d) == 0;
        if (!next->running)
            enc_dev_a(&next->d, 0);
    }
    struct enc_round q = {.d = d, .r = 2, .p1 = d->nsel};
    struct enc_devs v = {.on = {0, 0}};
    gmtf_pool_run(c->pool, enc_round_task, &q, d->nsel);
    size_t late[ENC_LATE_RAW + 1] = {0}; /* the CPU's blocks by kind */
    for (size_t j = 0; d->enc && j < d->nsel; j++)
        late[d->enc->late[j] <= ENC_LATE_RAW ? d->enc->late[j] : 0]++;
    /* a batch mostly coded on the CPU: the one after next readied and its
     * A run beside (two ahead) */
    int two_next =
        next && ahead2_want(c, d, d->nsel - late[ENC_LATE_NONE]) && ahead2_start(c, next);
    enc_devs_start(&q, &v, 1, 1); /* B(0): r - 2 in the tight schedule */
    q.late = 1;
    gmtf_pool_run(c->pool, enc_round_task, &q, d->nsel);
    enc_devs_finish(&q, &v);
    if (prof_on())
        t3 = prof_ms();
    q = (struct enc_round){.d = d, .r = 3, .f1 = d->nsel};
    gmtf_pool_run(c->pool, enc_round_task, &q, d->nsel);
    c->ahead = next;
    gmtf_bwt_dev_hold(&c->bwt_dev, next != NULL);
    enc_free(d);
    if (prof_on())
        fprintf(stderr,
                "profile: encode ahead (%s, set %u): next readied %.2f, A wait %.2f, "
                "plan+B+late %.2f, finish %.2f ms; %s%s%s; the CPU's blocks: %zu method 3, %zu "
                "other, %zu raw, of %zu\n",
                self ? "taken over" : "started here", d->set, t1 - t0, t2 - t1, t3 - t2,
                prof_ms() - t3, next ? "the next batch runs ahead" : "none ahead",
                two ? " (readied two ahead)" : "", two_next ? ", the one after it too" : "",
                late[ENC_LATE_M3], late[ENC_LATE_CPU] + late[ENC_LATE_CPU_BWT], late[ENC_LATE_RAW],
                d->nsel);
    return 0;
}

/* Returns 1 when the device part could not start (the caller runs the
 * batch on the CPU), else 0 or a negative code. */
static int batch_encode_dev(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                            uint8_t *dst, const uint64_t *slot, uint64_t *len, uint32_t *crc,
                            const uint8_t *adaptive)
{
    struct enc_ahead *a = c->ahead; /* batch_encode_crc checked that it is this one */
    if (a) {
        c->ahead = NULL;
        int rc = enc_ahead_pipeline(&a->d, a);
        if (rc == 0)
            rc = a->d.s.err;
        memcpy(len, a->slot + count + 1, count * sizeof *len);
        if (crc)
            memcpy(crc, a->crc, count * sizeof *crc);
        ahead_free(a);
        return rc == -ENOMEM ? 1 : rc;
    }
    struct dev_batch d = {.s = {.c = c,
                                .src = src,
                                .off = off,
                                .dst = dst,
                                .slot = slot,
                                .len = len,
                                .crc = crc,
                                .adaptive = adaptive}};
    uint64_t *size = malloc((count + 1) * sizeof *size);
    int rc = size ? dev_batch_alloc(&d, count) : -ENOMEM;
    int ahead = ahead_capable(c);
    if (rc == 0) {
        for (size_t i = 0; i < count; i++)
            size[i] = off[i + 1] - off[i];
        double t0 = prof_on() ? prof_ms() : 0;
        gmtf_pool_run(c->pool, dev_encode_prep, &d, count);
        d.set = ahead ? c->enc_set : 0;
        d.own = d.set != 0 || !enc_pin(c, 0);
        rc = dev_batch_pack(&d, count, size);
        if (prof_on())
            fprintf(stderr, "profile: encode prep+pack %.2f ms\n", prof_ms() - t0);
    }
    if (rc == 0 && d.nsel) {
        int big = big_block(&d); /* a block that method 2 may code */
        if (ahead && big) {
            c->enc_set = enc_set_after(c, d.set);
            rc = enc_ahead_pipeline(&d, NULL);
        } else if (c->bwt_dev.use_enc && big) {
            rc = enc_pipeline(&d);
        } else {
            dev_pipeline(&d, GMTF_BWT_DEV_FWD, dev_encode_copy, dev_encode_entropy);
        }
    }
    if (rc == 0)
        rc = d.s.err;
    dev_batch_free(&d);
    free(size);
    return rc == -ENOMEM ? 1 : rc;
}

void gmtf_codec_set_next(gmtf_codec *c, gmtf_batch_next_fn fn, void *arg)
{
    if (!fn)
        ahead_drop(c);
    c->next_fn = fn;
    c->next_arg = arg;
}

/* ---- decode ---- */

/* QLFC decoding of the block's BWT output into the staging and a check of
 * its rows (a bad row fails the block here, as codec/bwt.c would, and the
 * device then inverts harmless rows 1). */
static void dev_decode_begin(struct dev_batch *d, size_t j, unsigned worker)
{
    struct staged *s = &d->s;
    size_t i = d->sel[j];
    struct stage_block *b = &s->sb[i];
    gmtf_workspace *w = gmtf_codec_workspace(s->c, worker);
    size_t n = d->coff[j + 1] - d->coff[j];
    uint32_t *rows = s->c->stage_idx + d->ioff[j];
    unsigned k = (unsigned)(d->ioff[j + 1] - d->ioff[j]);
    long r = -ENOMEM;
    gmtf_frame_info fi;
    uint64_t p0 = prof_on() ? prof_ns() : 0, p1 = p0, p2 = p0, p3 = p0;
    if (w && d->lanes) {
        /* method 2: its header parsed here, its lanes run on the device */
        const uint8_t *fr = s->src + s->off[i];
        unsigned h, nidx, version;
        if (gmtf_frame_parse_version(fr, s->off[i + 1] - s->off[i], &fi, &h, b->idx, &nidx,
                                     &version) == 0 &&
            version == GMTF_FRAME_V2 && fi.method == GMTF_METHOD_BWT && fi.orig_len == n &&
            fi.frame_len > h && fr[h] == GMTF_QLFC_METHOD_LANES) {
            if (prof_on())
                p1 = prof_ns();
            /* the payload checksum here, before the device's lanes read it */
            r = gmtf_frame_check_payload(fr, &fi, h, version);
            if (prof_on())
                p2 = prof_ns();
            if (r == 0)
                r = gmtf_lanes_dev_setup(fr + h, fi.frame_len - h, n, w->rank_ws, s->off[i] + h,
                                         d->lanes + j * GMTF_GPU_LANES, d->cum + j * LANES_CUM,
                                         d->selectors + j * GMTF_GPU_LANES_MAX_GROUPS);
            if (r == 0 && d->in != s->src) /* into the pinned input the device's lanes read */
                memcpy(d->in + s->off[i] + h, fr + h, fi.frame_len - h);
            if (prof_on()) {
                p3 = prof_ns();
                __atomic_fetch_add(&d->prof_ns[0], p1 - p0, __ATOMIC_RELAXED);
                __atomic_fetch_add(&d->prof_ns[1], p2 - p1, __ATOMIC_RELAXED);
                __atomic_fetch_add(&d->prof_ns[2], p3 - p2, __ATOMIC_RELAXED);
            }
            if (r == 0) {
                r = GMTF_DECODE_BWT_V2;
                b->lanes = 1;
            }
            w = NULL; /* decided */
        }
    }
    if (w)
        r = gmtf_frame_decode_begin(s->src + s->off[i], s->off[i + 1] - s->off[i],
                                    s->dst + s->slot[i], n, s->c->stage_a + d->coff[j], n,
                                    w->rank_ws, &fi, b->idx);
    if (r == GMTF_DECODE_BWT_V2 && fi.orig_len == n && fi.method == GMTF_METHOD_BWT) {
        for (unsigned q = 0; q < k; q++)
            if (b->idx[q] == 0 || b->idx[q] > n)
                r = GMTF_E_CORRUPT;
    } else if (r >= 0) {
        r = GMTF_E_CORRUPT; /* cannot happen: its header said so in pass 0 */
    }
    if (r == GMTF_DECODE_BWT_V2) {
        b->fi = fi;
        memcpy(rows, b->idx, k * sizeof *rows);
        if (prof_on())
            __atomic_fetch_add(&d->prof_ns[3], prof_ns() - p0, __ATOMIC_RELAXED);
        return;
    }
    if (d->lanes) /* the setup may have written part of it */
        lanes_standin(d, j);
    b->lanes = 0;
    b->bwt = 0;
    s->status[i] = (int)r;
    for (unsigned q = 0; q < k; q++)
        rows[q] = 1;
}

static void dev_decode_cpu(void *ctx, size_t i, unsigned worker)
{
    struct dev_batch *d = ctx;
    if (d->s.sb[i].bwt)
        return;
    struct batch_dec b = {d->s.c, d->s.src, d->s.off, d->s.dst, d->s.slot, d->s.status, 0};
    batch_decode_one(&b, i, worker);
}

/* dev_decode_end's piece: three of crc32c.c's 8 KiB strides, within L1. */
#define DEC_END_PIECE (24u << 10)

/* The checksum of the device's output, then into place; when the device
 * failed, codec/bwt.c's inverse from the staged BWT output instead. */
static void dev_decode_end_as(struct dev_batch *d, size_t j, unsigned worker, int failed)
{
    struct staged *s = &d->s;
    size_t i = d->sel[j];
    struct stage_block *b = &s->sb[i];
    if (!b->bwt)
        return;
    size_t n = b->fi.orig_len;
    if (failed) {
        gmtf_workspace *w = gmtf_codec_workspace(s->c, worker);
        long r = -ENOMEM;
        if (w && b->lanes) { /* its BWT bytes never came: the whole frame here */
            r = gmtf_frame_decode_ws(&s->c->mtf, w, s->src + s->off[i], s->off[i + 1] - s->off[i],
                                     s->dst + s->slot[i], n);
            r = r < 0 ? r : r == (long)n ? 0 : GMTF_E_CORRUPT;
        } else if (w) {
            r = gmtf_frame_decode_end(s->c->stage_a + d->coff[j], s->dst + s->slot[i], &b->fi,
                                      b->idx, w->bwt_ws, GMTF_DECODE_BWT_V2);
        }
        s->status[i] = r < 0 ? (int)r : 0;
        return;
    }
    /* the checksum and the copy a piece at a time: the copy reads what the
     * checksum brought into the cache (the CPU path writes its bytes before
     * it checks them too) */
    const uint8_t *out = s->c->stage_b + d->coff[j];
    uint8_t *to = s->dst + s->slot[i];
    uint32_t crc = 0;
    for (size_t o = 0; o < n; o += DEC_END_PIECE) {
        size_t m = n - o < DEC_END_PIECE ? n - o : DEC_END_PIECE;
        crc = gmtf_crc32c(crc, out + o, m);
        memcpy(to + o, out + o, m);
    }
    s->status[i] = crc == b->fi.data_crc ? 0 : GMTF_E_CHECKSUM;
}

static void dev_decode_end(struct dev_batch *d, size_t j, unsigned worker)
{
    dev_decode_end_as(d, j, worker, d->dev_failed);
}

/* ---- decode in groups (use_groups) ----
 * The method 2 blocks (packed first, by ascending cost) in groups of about
 * equal counts; the device runs every group's lanes at once, each on its
 * own stream, and each group's inverse behind its own lanes, so that the
 * cheap groups' inverses run while the costly groups' lanes still run.
 * One pool run then does the other blocks' first step and, group by
 * group, the checksums and copies (the first worker at a group waits for
 * it; the others wait on its lock). */
struct dec_group {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the others' group: its inverse done */
    int done, failed;
};

/* Groups 0 .. ng - 1; g[ng]: the other blocks (method 3), whose inverse
 * the worker that ends their first steps runs on context ng. */
struct dec_groups {
    struct dev_batch *d;
    size_t m2, ng, gend[GMTF_GPU_LANES_GROUPS_MAX];
    struct dec_group g[GMTF_GPU_LANES_GROUPS_MAX];
    size_t begun; /* the others' first steps done (atomic) */
    double t0;    /* GMTF_BATCH_PROFILE */
};

/* Group g waited (once) and its lanes' verdicts applied: 1 when it failed
 * (its blocks decode on the CPU). */
static int dec_group_ready(struct dec_groups *q, size_t g)
{
    struct dev_batch *d = q->d;
    struct dec_group *e = &q->g[g];
    pthread_mutex_lock(&e->mu);
    if (!e->done) {
        size_t j0 = g ? q->gend[g - 1] : 0;
        /* d->dev_failed: the start failed; nothing is queued */
        int rc = d->dev_failed ? -EIO
                               : gmtf_bwt_dev_dec_group_wait(&d->s.c->bwt_dev, g, q->gend[g] - j0,
                                                             d->bad + j0);
        for (size_t j = j0; j < q->gend[g] && rc == 0; j++) {
            struct stage_block *b = &d->s.sb[d->sel[j]];
            if (!b->lanes || !d->bad[j])
                continue;
            b->bwt = 0;
            d->s.status[d->sel[j]] = GMTF_E_CORRUPT;
        }
        e->failed = rc != 0;
        e->done = 1;
        if (prof_on())
            fprintf(stderr, "profile: groups: group %zu ready %.2f ms\n", g, prof_ms() - q->t0);
    }
    int failed = e->failed;
    pthread_mutex_unlock(&e->mu);
    return failed;
}

/* The others' inverse, once their first steps are all done. */
static void dec_others_inverse(struct dec_groups *q)
{
    struct dev_batch *d = q->d;
    gmtf_codec *c = d->s.c;
    int rc = -EIO;
    if (!d->dev_failed)
        rc = gmtf_bwt_dev_inverse_grp(&c->bwt_dev, q->ng, c->stage_a, d->coff + q->m2,
                                      d->nsel - q->m2, d->step + q->m2,
                                      c->stage_idx + d->ioff[q->m2], c->stage_b);
    struct dec_group *e = &q->g[q->ng];
    pthread_mutex_lock(&e->mu);
    e->failed = rc != 0;
    e->done = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (prof_on())
        fprintf(stderr, "profile: groups: others' inverse done %.2f ms\n", prof_ms() - q->t0);
}

static int dec_others_ready(struct dec_groups *q)
{
    struct dec_group *e = &q->g[q->ng];
    pthread_mutex_lock(&e->mu);
    while (!e->done)
        pthread_cond_wait(&e->cv, &e->mu);
    int failed = e->failed;
    pthread_mutex_unlock(&e->mu);
    return failed;
}

/* Items [0, rest): the other blocks' first step (the last to finish runs
 * their inverse); then the method 2 blocks' last step, group by group;
 * then the others' last step. The pool hands out items in order, so the
 * first steps are taken before any item waits. */
static void dec_groups_item(void *ctx, size_t t, unsigned worker)
{
    struct dec_groups *q = ctx;
    struct dev_batch *d = q->d;
    size_t rest = d->nsel - q->m2;
    if (t < rest) {
        dev_decode_begin(d, q->m2 + t, worker);
        if (__atomic_add_fetch(&q->begun, 1, __ATOMIC_ACQ_REL) == rest)
            dec_others_inverse(q);
        return;
    }
    if (t >= d->nsel) {
        dev_decode_end_as(d, q->m2 + (t - d->nsel), worker, dec_others_ready(q));
        return;
    }
    size_t j = t - rest, g = 0;
    while (j >= q->gend[g])
        g++;
    dev_decode_end_as(d, j, worker, dec_group_ready(q, g));
}

/* 0 when the batch does not go this way (the caller runs dev_pipeline). */
static int dev_decode_groups(struct dev_batch *d)
{
    gmtf_codec *c = d->s.c;
    gmtf_bwt_dev *bd = &c->bwt_dev;
    size_t m2 = d->split;
    /* (use_inv_dev, split_m3: cleared after the start, e.g. by a benchmark) */
    if (!bd->use_groups || !bd->use_inv_dev || !bd->split_m3 || !d->lanes || m2 < 2)
        return 0;
    struct dec_groups q = {.d = d, .m2 = m2, .ng = bd->dec_groups < m2 ? bd->dec_groups : m2};
    /* equal counts, or (taper) shares ng + 1 - g: the costliest group, whose
     * inverse is the batch's tail, the smallest */
    size_t w = 0, ws = 0;
    for (size_t g = 0; g < q.ng; g++)
        ws += bd->dec_taper ? q.ng + 1 - g : 1;
    for (size_t g = 0; g <= q.ng; g++) {
        w += g < q.ng ? (bd->dec_taper ? q.ng + 1 - g : 1) : 0;
        size_t prev = g ? q.gend[g - 1] : 0, e = m2 * w / ws;
        if (g < q.ng)
            q.gend[g] = e > prev ? e : prev + 1; /* (ng <= m2: never past m2) */
        pthread_mutex_init(&q.g[g].mu, NULL);
        pthread_cond_init(&q.g[g].cv, NULL);
    }
    q.g[q.ng].done = m2 == d->nsel; /* no others */
    double t0 = prof_on() ? prof_ms() : 0;
    q.t0 = t0;
    dev_run(d, dev_decode_begin, 0, m2);
    if (prof_on())
        fprintf(stderr, "profile: groups: lane setups %.2f ms\n", prof_ms() - t0);
    gmtf_bwt_dev_hold(bd, 1);
    int rc = gmtf_bwt_dev_dec_groups(bd, d->in, d->s.off[d->count], m2, d->lanes, d->cum,
                                     d->selectors, d->coff, c->stage_a, q.ng, q.gend, d->step,
                                     c->stage_idx, d->ioff, c->stage_b);
    if (rc)
        d->dev_failed = 1;
    if (prof_on())
        fprintf(stderr, "profile: groups: %zu queued %.2f ms\n", q.ng, prof_ms() - t0);
    gmtf_pool_run(c->pool, dec_groups_item, &q, d->nsel + (d->nsel - m2));
    for (size_t g = 0; g <= q.ng; g++) { /* groups with no block left to end */
        if (g < q.ng)
            (void)dec_group_ready(&q, g);
        pthread_mutex_destroy(&q.g[g].mu);
        pthread_cond_destroy(&q.g[g].cv);
    }
    gmtf_bwt_dev_hold(bd, 0);
    if (prof_on())
        fprintf(stderr, "profile: groups: ends %.2f ms\n", prof_ms() - t0);
    return 1;
}

/* Version 2 BWT frames: QLFC decoding on the CPU, the inverse BWT on the
 * device; every other frame on the CPU. Returns 1 when the device part
 * could not start (the caller decodes on the CPU), else the first error
 * (in block order) or 0. */
static int batch_decode_dev(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                            uint8_t *dst, const uint64_t *doff, int *status)
{
    struct dev_batch d = {
        .s = {.c = c, .src = src, .off = foff, .dst = dst, .slot = doff, .status = status}};
    double t0 = prof_on() ? prof_ms() : 0;
    /* size[i], then (grouped decode) cost[i] = size[count + 1 + i]: the
     * payload's bytes, the proxy of its slowest lane's runs */
    uint64_t *size = malloc((2 * count + 1) * sizeof *size);
    int rc = size ? dev_batch_alloc(&d, count) : -ENOMEM;
    /* pass 0: which frames go to the device (headers only) */
    for (size_t i = 0; i < count && rc == 0; i++) {
        unsigned h, k, version;
        gmtf_frame_info fi;
        uint64_t cap = doff[i + 1] - doff[i];
        status[i] = 0;
        size[i] = cap;
        if (gmtf_frame_parse_version(src + foff[i], foff[i + 1] - foff[i], &fi, &h, NULL, &k,
                                     &version) == 0 &&
            version == GMTF_FRAME_V2 && fi.method == GMTF_METHOD_BWT && fi.orig_len == cap &&
            cap <= c->max_block) {
            d.s.sb[i].bwt = 1;
            /* a hint for the packing order only: the payload is checked later */
            d.s.sb[i].m2 = fi.frame_len > h && src[foff[i] + h] == GMTF_QLFC_METHOD_LANES;
            size[count + 1 + i] = fi.frame_len;
        }
    }
    if (rc == 0)
        rc = dev_batch_pack_by(&d, count, size, c->bwt_dev.use_groups ? size + count + 1 : NULL);
    d.count = count;
    if (rc == 0 && d.nsel && c->bwt_dev.use_lanes) {
        d.lanes = hbuf_reserve(c, &c->dec_lanes, d.nsel * GMTF_GPU_LANES * sizeof *d.lanes);
        d.cum = hbuf_reserve(c, &c->dec_cum, d.nsel * LANES_CUM * sizeof *d.cum);
        d.selectors = hbuf_reserve(c, &c->dec_sel, d.nsel * GMTF_GPU_LANES_MAX_GROUPS);
        /* (a quarter more: the next batches' payloads, a few percent apart
         * on the Linux tar, then fit without a new pinned buffer, 11-14 ms
         * on the H100 host for 30 MB) */
        d.in = !c->bwt_dev.copy_in ? (uint8_t *)src
               : foff[count] <= c->dec_in.cap
                   ? hbuf_reserve(c, &c->dec_in, foff[count])
                   : hbuf_reserve(c, &c->dec_in, foff[count] + foff[count] / 4);
        d.bad = calloc(d.nsel, 1);
        if (!d.lanes || !d.cum || !d.selectors || !d.in || !d.bad)
            rc = -ENOMEM;
        for (size_t j = 0; j < d.nsel && rc == 0; j++)
            lanes_standin(&d, j);
    }
    if (rc) {
        dev_batch_free(&d);
        free(size);
        return 1;
    }
    if (prof_on())
        fprintf(stderr, "profile: decode setup %.2f ms\n", prof_ms() - t0);
    gmtf_pool_run(c->pool, dev_decode_cpu, &d, count);
    if (prof_on())
        fprintf(stderr, "profile: decode cpu frames %.2f ms\n", prof_ms() - t0);
    if (d.nsel && !dev_decode_groups(&d))
        dev_pipeline(&d, GMTF_BWT_DEV_INV, dev_decode_begin, dev_decode_end);
    if (prof_on())
        fprintf(stderr,
                "profile: decode pipeline %.2f ms; begin summed over blocks: parse %.2f, "
                "payload crc %.2f, lanes setup %.2f, whole %.2f ms\n",
                prof_ms() - t0, d.prof_ns[0] / 1e6, d.prof_ns[1] / 1e6, d.prof_ns[2] / 1e6,
                d.prof_ns[3] / 1e6);
    rc = 0;
    for (size_t i = 0; i < count && !rc; i++)
        rc = status[i];
    dev_batch_free(&d);
    free(size);
    return rc;
}

static int batch_decode(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                        uint8_t *dst, const uint64_t *doff, int *status);

int gmtf_batch_decode(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                      uint8_t *dst, const uint64_t *doff, int *status)
{
    ahead_drop(c); /* an encode run ahead, done before the device decodes */
    uint64_t largest = 0;
    for (size_t i = 0; i < count; i++) {
        if (foff[i + 1] < foff[i] || doff[i + 1] < doff[i])
            return -EINVAL;
        if (doff[i + 1] - doff[i] > largest)
            largest = doff[i + 1] - doff[i];
    }
    int mrc = c->multi ? gmtf_multi_dev_decode(c->multi, src, foff, count, dst, doff, status) : 1;
    if (mrc != 1) /* several GPUs took it (multi_dev.c) */
        return mrc;
    gmtf_codec_need(c, largest);
    int rc = batch_decode(c, src, foff, count, dst, doff, status);
    gmtf_codec_need(c, 0);
    return rc;
}

static int batch_decode(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                        uint8_t *dst, const uint64_t *doff, int *status)
{
    if (gmtf_bwt_dev_wants(&c->bwt_dev, GMTF_BWT_DEV_INV, doff[count] - doff[0])) {
        int *st = status ? status : calloc(count ? count : 1, sizeof *st);
        if (!st)
            return -ENOMEM;
        int rc = batch_decode_dev(c, src, foff, count, dst, doff, st);
        if (st != status)
            free(st);
        if (rc != 1)
            return rc;
    }
    if (batch_use_staged(c, doff[count] - doff[0]) && c->batch_mtf->ops->batch_decode) {
        int *st = status ? status : calloc(count ? count : 1, sizeof *st);
        if (!st)
            return -ENOMEM;
        int rc = batch_decode_staged(c, src, foff, count, dst, doff, st);
        if (st != status)
            free(st);
        return rc;
    }
    struct batch_dec b = {c, src, foff, dst, doff, status, 0};
    gmtf_pool_run(c->pool, batch_decode_one, &b, count);
    return b.err;
}
