/* Entropy method 0: an adaptive binary range coder under a structured
 * model (docs/entropy.md). The coded events, in order:
 *   - after a nonzero rank (and at the start): one decision, "a zero run
 *     follows" or "a rank follows";
 *   - a zero run of length L >= 1: k = floor(log2 L) in unary, the two
 *     bits below L's leading one by a small tree, the rest direct;
 *   - a rank r in 1..255 (after a run no decision is needed: runs are
 *     maximal): bucket of r in unary (1, 2, 3-4, 5-8, ..., 129-255), then
 *     the offset inside the bucket, most significant bit first.
 * Each decision has its own adaptive probability, chosen by the previous
 * rank and a running mean of recent ranks. Best ratio, about 100 MB/s.
 *
 * The fused coders read and write ranks (zero runs in place); the stage
 * coders read and write zero-run symbols with the same code. */
#include <errno.h>
#include <string.h>

#include "entropy_internal.h"
#include "gmtf_codec.h"
#include "rank_coder.h"

/* ---- model ------------------------------------------------------------- */

#define LEN_MAX_K 30 /* runs below 2^31; blocks are at most 2^24 */
#define LCTX 32      /* contexts for the run length's bit count */

typedef struct {
    prob2 run[RCTX];                      /* a run follows (1) or a rank (0) */
    prob2 len_unary[LCTX][LEN_MAX_K + 1]; /* k > i */
    prob2 len_top[LEN_MAX_K + 1][4];      /* first two low bits of L: tree */
    prob2 bucket[RCTX][NBUCKET];          /* bucket > b */
    prob2 offset[256];                    /* offset tree of all buckets */
} model;

static inline unsigned ctx_len(const history *h)
{
    unsigned kq = h->k1 < 3 ? h->k1 : 3;
    return rank_q[h->r1] * 4 + kq;
}

static void model_init(model *m)
{
    prob2 *p = (prob2 *)m;
    for (size_t i = 0; i < sizeof(model) / sizeof(prob2); i++) {
        p[i].fast = p[i].slow = PROB_INIT;
        p[i].n = 0;
    }
}

size_t gmtf_adaptive_ws_size(void)
{
    return ALIGN_UP(sizeof(model));
}

/* ---- events: encoder --------------------------------------------------- */

/* The bits of a run length below its leading one (k >= 1 of them): the
 * first two by a small tree per k (they carry most of the skew), the rest
 * direct. Both methods code them so. */
static void enc_run_low(rc_enc *e, model *m, unsigned k, uint32_t len)
{
    int j = (int)k - 1;
    unsigned node = 1;
    for (; j >= 0 && node < 4; j--) {
        int bit = (len >> j) & 1;
        enc_bit(e, &m->len_top[k][node], bit);
        node = node * 2 + (unsigned)bit;
    }
    if (j >= 0)
        enc_direct(e, len & ((2u << j) - 1), (unsigned)j + 1);
}

static void enc_run_len(rc_enc *e, model *m, const history *h, uint32_t len)
{
    unsigned k = 31 - (unsigned)__builtin_clz(len);
    prob2 *u = m->len_unary[ctx_len(h)];
    for (unsigned i = 0; i < k; i++)
        enc_bit(e, &u[i], 1);
    if (k < LEN_MAX_K)
        enc_bit(e, &u[k], 0);
    if (k > 0)
        enc_run_low(e, m, k, len);
}

/* Offset of rank r in its bucket b >= 2, modelled; both methods. */
static void enc_rank_offset(rc_enc *e, model *m, unsigned b, unsigned r)
{
    /* Offset of r in its bucket, b - 1 bits; the tree node starts at the
     * bucket's own root 1 << (b - 1) so that buckets never share nodes. */
    unsigned nbits = b - 1;
    unsigned off = r - (1u << nbits) - 1;
    unsigned node = 1;
    for (int j = (int)nbits - 1; j >= 0; j--) {
        int bit = (off >> j) & 1;
        enc_bit(e, &m->offset[(1u << nbits) + node - 1], bit);
        node = node * 2 + (unsigned)bit;
    }
}

static void enc_rank(rc_enc *e, model *m, const history *h, unsigned r)
{
    unsigned b = rank_bucket(r);
    prob2 *pb = m->bucket[ctx_event(h)];
    for (unsigned i = 0; i < b; i++)
        enc_bit(e, &pb[i], 1);
    if (b < NBUCKET - 1)
        enc_bit(e, &pb[b], 0);
    if (b >= 2)
        enc_rank_offset(e, m, b, r);
}

/* ---- encode ------------------------------------------------------------ */

long gmtf_adaptive_encode_syms(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap,
                               void *ws)
{
    model *m = (model *)ws;
    model_init(m);
    rc_enc e;
    rc_enc_init(&e, dst, cap);
    history h = {1, 0, 0};
    size_t i = 0;
    while (i < count) {
        if (e.overflow)
            return -ENOSPC;
        unsigned s = syms[i];
        if (s <= GMTF_SYM_RUNB) {
            if (h.r1 == 0)
                return -EINVAL; /* two runs in a row: not maximal */
            uint64_t len = 0;
            unsigned digits = 0;
            for (; i < count && syms[i] <= GMTF_SYM_RUNB; i++, digits++) {
                if (digits == LEN_MAX_K)
                    return -EINVAL;
                len += (uint64_t)(syms[i] + 1) << digits;
            }
            if (len >> (LEN_MAX_K + 1))
                return -EINVAL;
            enc_bit(&e, &m->run[ctx_event(&h)], 1);
            enc_run_len(&e, m, &h, (uint32_t)len);
            hist_run(&h, 31 - (unsigned)__builtin_clz((uint32_t)len));
            continue;
        }
        if (s > 256)
            return -EINVAL;
        if (h.r1 != 0)
            enc_bit(&e, &m->run[ctx_event(&h)], 0);
        enc_rank(&e, m, &h, s - 1);
        hist_rank(&h, s - 1);
        i++;
    }
    rc_enc_finish(&e);
    if (e.overflow)
        return -ENOSPC;
    return (long)(e.out - dst);
}

/* Method 0, fused: events straight from the ranks, no symbol buffer. */
long gmtf_adaptive_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    model *m = (model *)ws;
    model_init(m);
    rc_enc e;
    rc_enc_init(&e, dst, cap);
    history h = {1, 0, 0};
    size_t i = 0;
    while (i < n) {
        if (e.overflow)
            return -ENOSPC;
        unsigned r = ranks[i];
        if (r != 0) {
            if (h.r1 != 0)
                enc_bit(&e, &m->run[ctx_event(&h)], 0);
            enc_rank(&e, m, &h, r);
            hist_rank(&h, r);
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && ranks[i] == 0)
            i++;
        uint64_t len = i - start;
        if (len >> (LEN_MAX_K + 1))
            return -EINVAL; /* far beyond GMTF_BLOCK_MAX */
        enc_bit(&e, &m->run[ctx_event(&h)], 1);
        enc_run_len(&e, m, &h, (uint32_t)len);
        hist_run(&h, 31 - (unsigned)__builtin_clz((uint32_t)len));
    }
    rc_enc_finish(&e);
    if (e.overflow)
        return -ENOSPC;
    return (long)(e.out - dst);
}

/* ---- decode ------------------------------------------------------------ */

/* A run length of bit count k from the bits below its leading one. */
static inline __attribute__((always_inline)) uint32_t dec_run_len_low(rc_dec *d, model *m,
                                                                      unsigned k)
{
    uint32_t runlen = 1;
    unsigned node = 1;
    int j = (int)k - 1;
    for (; j >= 0 && node < 4; j--) {
        int bit = dec_bit(d, &m->len_top[k][node]);
        node = node * 2 + (unsigned)bit;
        runlen = runlen * 2 + (unsigned)bit;
    }
    if (j >= 0)
        runlen = runlen << (j + 1) | dec_direct(d, (unsigned)j + 1);
    return runlen;
}

/* Rank of bucket b >= 2 from its offset; 256 (invalid) is possible only
 * from damaged input. */
static inline __attribute__((always_inline)) unsigned dec_rank_offset(rc_dec *d, model *m,
                                                                      unsigned b)
{
    unsigned nbits = b - 1;
    unsigned node = 1;
    for (unsigned j = 0; j < nbits; j++)
        node = node * 2 + (unsigned)dec_bit(d, &m->offset[(1u << nbits) + node - 1]);
    return node + 1; /* node = (1 << nbits) + offset */
}

/* One coded stream being decoded: its range decoder, model, history and
 * output range [pos, total). */
typedef struct {
    rc_dec d;
    model *m;
    history h;
    size_t pos, total;
    void *out;
} lane;

static void lane_init(lane *l, const uint8_t *src, size_t len, model *m, void *out, size_t total)
{
    rc_dec_init(&l->d, src, len);
    model_init(m);
    l->m = m;
    l->h = (history){1, 0, 0};
    l->pos = 0;
    l->total = total;
    l->out = out;
}

/* Decodes one event (a run or a rank) of a lane whose pos < total; writes
 * ranks when to_syms is 0, zero-run symbols otherwise. Returns 0 or
 * GMTF_E_CORRUPT. */
static inline __attribute__((always_inline)) int lane_event(lane *l, int to_syms)
{
    model *m = l->m;
    history h = l->h;
    size_t pos = l->pos, total = l->total;
    if (h.r1 != 0 && dec_bit(&l->d, &m->run[ctx_event(&h)])) {
        prob2 *u = m->len_unary[ctx_len(&h)];
        unsigned k = 0;
        while (k < LEN_MAX_K && dec_bit(&l->d, &u[k]))
            k++;
        uint32_t runlen = dec_run_len_low(&l->d, m, k);
        if (to_syms) {
            uint16_t *syms = l->out;
            for (uint32_t r = runlen; r > 0;) {
                if (pos >= total)
                    return GMTF_E_CORRUPT;
                unsigned odd = r & 1;
                syms[pos++] = odd ? GMTF_SYM_RUNA : GMTF_SYM_RUNB;
                r = (r - 2 + odd) >> 1;
            }
        } else {
            if (runlen > total - pos)
                return GMTF_E_CORRUPT;
            uint8_t *z = (uint8_t *)l->out + pos;
            if (runlen <= 16 && total - pos >= 16) {
                /* Most runs are short: two fixed stores beat a memset
                 * call; bytes past the run are rewritten later. */
                uint64_t zero = 0;
                memcpy(z, &zero, 8);
                memcpy(z + 8, &zero, 8);
            } else {
                memset(z, 0, runlen);
            }
            pos += runlen;
        }
        hist_run(&l->h, k);
        l->pos = pos;
        return 0;
    }
    prob2 *pb = m->bucket[ctx_event(&h)];
    unsigned b = 0;
    while (b < NBUCKET - 1 && dec_bit(&l->d, &pb[b]))
        b++;
    unsigned r = b + 1;
    if (b >= 2) {
        r = dec_rank_offset(&l->d, m, b);
        if (r > 255)
            return GMTF_E_CORRUPT;
    }
    if (to_syms)
        ((uint16_t *)l->out)[pos] = (uint16_t)(r + 1);
    else
        ((uint8_t *)l->out)[pos] = (uint8_t)r;
    l->pos = pos + 1;
    hist_rank(&l->h, r);
    return 0;
}

/* The encoder's flush makes the decoder read exactly the lane's bytes. */
static int lane_check(const lane *l)
{
    return l->d.over != 0 || l->d.in != l->d.end ? GMTF_E_CORRUPT : 0;
}

int gmtf_adaptive_decode_syms(const uint8_t *src, size_t len, uint16_t *syms, size_t count,
                              void *ws)
{
    lane l;
    lane_init(&l, src, len, (model *)ws, syms, count);
    while (l.pos < l.total) {
        int err = lane_event(&l, 1);
        if (err)
            return err;
    }
    return lane_check(&l);
}

int gmtf_adaptive_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws)
{
    lane l;
    lane_init(&l, src, len, (model *)ws, ranks, n);
    while (l.pos < l.total) {
        int err = lane_event(&l, 0);
        if (err)
            return err;
    }
    return lane_check(&l);
}
