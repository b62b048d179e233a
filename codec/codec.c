/* Codec context, single-frame calls and the batch API.
 *
 * A batch runs block-parallel on the thread pool. Per-block backends do all
 * stages of a block in one task (the block stays in cache). A backend with
 * batch hooks (the GPU) gets the MTF stage of the whole batch in one call
 * between two parallel stages: BWT of every block, then one MTF call, then
 * entropy coding of every block. Either way each block's frame depends only
 * on its bytes, so the output is the same for any thread count. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bwt.h"
#include "codec_internal.h"
#include "gmtf_config.h"
#include "qlfc.h"
#include "rank_coder.h"

const char *gmtf_version(void)
{
    return GMTF_VERSION;
}

const char *gmtf_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case GMTF_E_CORRUPT: return "corrupt frame";
    case GMTF_E_CHECKSUM: return "checksum mismatch";
    case GMTF_E_TRUNCATED: return "truncated frame";
    case GMTF_E_VERSION: return "frame from a newer format version";
    case GMTF_E_BACKEND: return "unknown or unavailable MTF backend";
    default: return err < 0 ? strerror(-err) : "unknown error";
    }
}

/* The entropy coders' workspace: either frame version's coder (rank_coder.h
 * for version 1, qlfc.h for version 2), never both at once. A decoder
 * needs fixed tables only; an encoder adds about 7.25 x max_block. */
static size_t rank_ws_size(size_t max_block, int enc)
{
    size_t v1 = gmtf_rank_workspace_size(enc ? max_block : 0);
    size_t v2 = enc ? gmtf_qlfc_workspace_size(max_block) : gmtf_qlfc_decode_workspace_size();
    return v1 > v2 ? v1 : v2;
}

int gmtf_workspace_init(gmtf_workspace *w, size_t max_block)
{
    memset(w, 0, sizeof *w);
    w->max_block = max_block;
    w->buf_a = malloc(max_block ? max_block : 1);
    w->buf_b = malloc(max_block ? max_block : 1);
    w->bwt_ws = malloc(gmtf_bwt_workspace_size(max_block));
    w->rank_ws = malloc(rank_ws_size(max_block, 0));
    if (!w->buf_a || !w->buf_b || !w->bwt_ws || !w->rank_ws) {
        gmtf_workspace_free(w);
        return -ENOMEM;
    }
    return 0;
}

int gmtf_workspace_encoder(gmtf_workspace *w)
{
    if (w->rank_enc)
        return 0;
    void *ws = malloc(rank_ws_size(w->max_block, 1)); /* scratch: nothing to keep */
    if (!ws)
        return -ENOMEM;
    free(w->rank_ws);
    w->rank_ws = ws;
    w->rank_enc = 1;
    return 0;
}

/* Back to the decoder's size; on -ENOMEM the big one stays (still valid). */
static void workspace_trim(gmtf_workspace *w)
{
    if (!w->rank_enc)
        return;
    void *ws = malloc(rank_ws_size(w->max_block, 0));
    if (!ws)
        return;
    free(w->rank_ws);
    w->rank_ws = ws;
    w->rank_enc = 0;
}

void gmtf_workspace_free(gmtf_workspace *w)
{
    free(w->buf_a);
    free(w->buf_b);
    free(w->bwt_ws);
    free(w->rank_ws);
    memset(w, 0, sizeof *w);
}

static void stage_free(gmtf_codec *c);

int gmtf_codec_create(gmtf_codec **out, const gmtf_codec_options *opt)
{
    gmtf_codec_options o = {0};
    if (opt)
        o = *opt;
    if (o.threads == 0)
        o.threads = 1;
    if (o.threads > 1024 || o.max_block > GMTF_BLOCK_MAX || o.frame_version > GMTF_FRAME_VERSION)
        return -EINVAL;
    if (o.max_block == 0)
        o.max_block = GMTF_BLOCK_MAX;
    const gmtf_mtf_backend *mtf = gmtf_mtf_backend_find(o.mtf);
    if (!mtf)
        return GMTF_E_BACKEND;
    gmtf_codec *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->mtf = mtf;
    c->batch_mtf = gmtf_mtf_batch_backend(o.mtf, mtf);
    c->max_block = o.max_block;
    c->threads = o.threads;
    c->frame_version = o.frame_version ? o.frame_version : GMTF_FRAME_VERSION;
    c->ws = calloc(o.threads, sizeof *c->ws);
    if (!c->ws) {
        free(c);
        return -ENOMEM;
    }
    if (o.threads > 1) {
        int rc = gmtf_pool_create(&c->pool, o.threads);
        if (rc < 0) {
            free(c->ws);
            free(c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

void gmtf_codec_destroy(gmtf_codec *c)
{
    if (!c)
        return;
    gmtf_pool_destroy(c->pool);
    for (unsigned i = 0; i < c->threads; i++)
        gmtf_workspace_free(&c->ws[i]);
    free(c->ws);
    stage_free(c);
    free(c);
}

const char *gmtf_codec_mtf_name(const gmtf_codec *c)
{
    return c->mtf->name;
}

unsigned gmtf_codec_threads(const gmtf_codec *c)
{
    return c->threads;
}

void gmtf_codec_trim(gmtf_codec *c)
{
    for (unsigned i = 0; i < c->threads; i++)
        workspace_trim(&c->ws[i]);
}

gmtf_workspace *gmtf_codec_workspace(gmtf_codec *c, unsigned i)
{
    gmtf_workspace *w = &c->ws[i];
    if (!w->buf_a && gmtf_workspace_init(w, c->max_block) < 0)
        return NULL;
    return w;
}

gmtf_workspace *gmtf_codec_workspace_enc(gmtf_codec *c, unsigned i)
{
    gmtf_workspace *w = gmtf_codec_workspace(c, i);
    if (w && gmtf_workspace_encoder(w) < 0)
        return NULL;
    return w;
}

long gmtf_frame_encode(gmtf_codec *c, const void *src, size_t n, void *dst, size_t cap)
{
    gmtf_workspace *w = gmtf_codec_workspace_enc(c, 0);
    if (!w)
        return -ENOMEM;
    return gmtf_frame_encode_ws(c->mtf, w, src, n, dst, cap, c->frame_version);
}

long gmtf_frame_decode(gmtf_codec *c, const void *src, size_t len, void *dst, size_t cap)
{
    gmtf_workspace *w = gmtf_codec_workspace(c, 0);
    if (!w)
        return -ENOMEM;
    return gmtf_frame_decode_ws(c->mtf, w, src, len, dst, cap);
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
    const uint64_t *slot; /* where frame i may be written (bound-sized slots) */
    uint64_t *len;        /* frame length of block i */
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
    long r = gmtf_frame_encode_ws(b->c->mtf, w, b->src + b->off[i], n, b->dst + b->slot[i],
                                  gmtf_frame_bound(n), b->c->frame_version);
    if (r < 0)
        batch_set_err(&b->err, (int)r);
    else
        b->len[i] = (uint64_t)r;
}

static void stage_free(gmtf_codec *c)
{
    void (*release)(void *) = c->stage_pinned ? c->batch_mtf->host_free : free;
    release(c->stage_a);
    release(c->stage_b);
    c->stage_a = c->stage_b = NULL;
    c->stage_cap = 0;
}

/* Grows the two staging buffers to n bytes each, from the batch backend's
 * host allocator when it has one (pinned memory doubles GPU transfers). */
static int stage_reserve(gmtf_codec *c, uint64_t n)
{
    if (n <= c->stage_cap)
        return 0;
    stage_free(c);
    const gmtf_mtf_backend *b = c->batch_mtf;
    c->stage_pinned = b && b->host_alloc && b->host_free;
    if (c->stage_pinned) {
        c->stage_a = b->host_alloc(n);
        c->stage_b = b->host_alloc(n);
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
        s->c->mtf->encode(s->c->stage_a + s->stage[i], ranks, n);
    long r = gmtf_frame_encode_ranks(s->src + s->off[i], ranks, n, b->idx, b->crc,
                                     s->dst + s->slot[i], w->rank_ws);
    if (r < 0)
        batch_set_err(&s->err, (int)r);
    else
        s->len[i] = (uint64_t)r;
}

/* BWT of every block, one batch MTF call, entropy coding of every block. */
static int batch_encode_staged(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                               uint8_t *dst, const uint64_t *slot, uint64_t *len)
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
                       .sb = sb};
    gmtf_pool_run(c->pool, staged_encode_bwt, &s, count);
    if (s.err == 0) {
        s.mtf_failed = c->batch_mtf->batch_encode(c->stage_a, off, count, c->stage_b) < 0;
        gmtf_pool_run(c->pool, staged_encode_entropy, &s, count);
    }
    free(sb);
    return s.err;
}

static int batch_use_staged(const gmtf_codec *c, uint64_t bytes)
{
    return c->batch_mtf && bytes >= c->batch_mtf->min_batch_bytes;
}

int gmtf_batch_encode(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                      uint8_t *dst, uint64_t cap, uint64_t *dst_off)
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
    struct batch_enc b = {c, src, off, dst, slot, len, 0};
    /* Only version 1 frames have an MTF stage to batch. */
    if (c->frame_version == GMTF_FRAME_V1 && batch_use_staged(c, off[count]) &&
        c->batch_mtf->batch_encode)
        b.err = batch_encode_staged(c, src, off, count, dst, slot, len);
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
        long r = gmtf_frame_decode_ws(b->c->mtf, w, b->src + b->foff[i],
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
        s->c->mtf->decode(s->c->stage_a + s->stage[i], out, b->fi.orig_len);
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
    s.mtf_failed = c->batch_mtf->batch_decode(c->stage_a, stage, count, c->stage_b) < 0;
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
    if (batch_use_staged(c, doff[count] - doff[0]) && c->batch_mtf->batch_decode) {
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
