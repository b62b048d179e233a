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
#include <stdlib.h>
#include <string.h>

#include "bwt.h"
#include "codec_internal.h"

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
    const uint64_t *slot; /* where frame i may be written (bound-sized slots) */
    uint64_t *len;        /* frame length of block i */
    uint32_t *crc;        /* CRC-32C of block i, or NULL */
    int err;              /* first error seen (any thread) */
};

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
    long r =
        gmtf_frame_encode_ws(&b->c->mtf, w, b->src + b->off[i], n, b->dst + b->slot[i],
                             gmtf_frame_bound(n), b->c->frame_version, b->crc ? &b->crc[i] : NULL);
    if (r < 0)
        batch_set_err(&b->err, (int)r);
    else
        b->len[i] = (uint64_t)r;
}

void gmtf_batch_stage_free(gmtf_codec *c)
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
}

/* Grows the two staging buffers to n bytes each, from the batch backend's
 * host allocator (pinned memory doubles GPU transfers), else malloc. */
static int stage_reserve(gmtf_codec *c, uint64_t n)
{
    if (n <= c->stage_cap)
        return 0;
    gmtf_batch_stage_free(c);
    c->stage_pinned = c->batch_mtf != NULL;
    if (c->stage_pinned) {
        c->stage_a = gmtf_mtf_host_alloc(c->batch_mtf, n);
        c->stage_b = gmtf_mtf_host_alloc(c->batch_mtf, n);
        if (!c->stage_a || !c->stage_b) {
            gmtf_batch_stage_free(c);
            c->stage_pinned = 0;
        }
    }
    if (!c->stage_pinned) {
        c->stage_a = malloc(n);
        c->stage_b = malloc(n);
    }
    if (!c->stage_a || !c->stage_b) {
        gmtf_batch_stage_free(c);
        return -ENOMEM;
    }
    c->stage_cap = n;
    return 0;
}

/* Per-block state of a staged batch. */
struct stage_block {
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    gmtf_frame_info fi;
    uint32_t crc;
    int bwt; /* the block goes through BWT and MTF (GMTF_DECODE_RANKS), or
              * decodes to BWT output with no MTF (GMTF_DECODE_BWT_V2) */
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

static int batch_use_staged(const gmtf_codec *c, uint64_t bytes)
{
    return c->batch_mtf && bytes >= c->batch_mtf->ops->min_batch_bytes;
}

int gmtf_batch_encode(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                      uint8_t *dst, uint64_t cap, uint64_t *dst_off)
{
    return gmtf_batch_encode_crc(c, src, off, count, dst, cap, dst_off, NULL);
}

int gmtf_batch_encode_crc(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, uint64_t cap, uint64_t *dst_off, uint32_t *crc)
{
    if (off[0] != 0)
        return -EINVAL;
    for (size_t i = 0; i < count; i++)
        if (off[i + 1] < off[i] || off[i + 1] - off[i] > c->max_block)
            return -EINVAL;
    if (cap < gmtf_batch_bound(off, count))
        return -ENOSPC;
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
    struct batch_enc b = {c, src, off, dst, slot, len, crc, 0};
    /* Only version 1 frames have an MTF stage to batch. */
    if (c->frame_version == GMTF_FRAME_V1 && batch_use_staged(c, off[count]) &&
        c->batch_mtf->ops->batch_encode)
        b.err = batch_encode_staged(c, src, off, count, dst, slot, len, crc);
    else
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

int gmtf_batch_decode(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                      uint8_t *dst, const uint64_t *doff, int *status)
{
    for (size_t i = 0; i < count; i++)
        if (foff[i + 1] < foff[i] || doff[i + 1] < doff[i])
            return -EINVAL;
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
