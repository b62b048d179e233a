/* Entropy coding of zero-run coded MTF ranks: an adaptive binary range
 * coder under a structured model (docs/entropy.md has the measurements and
 * the payload layout).
 *
 * The coded events, in order:
 *   - after a nonzero rank (and at the start): one decision, "a zero run
 *     follows" or "a rank follows";
 *   - a zero run of length L >= 1: k = floor(log2 L) in unary, the two
 *     bits below L's leading one by a small tree, the rest direct;
 *   - a rank r in 1..255 (after a run no decision is needed: runs are
 *     maximal): bucket of r in unary (1, 2, 3-4, 5-8, ..., 129-255), then
 *     the offset inside the bucket, most significant bit first.
 * Each decision has its own adaptive probability, chosen by the previous
 * rank and a running mean of recent ranks. One decoder (lane_event)
 * serves both the fused path gmtf_rank_decode (ranks out, zero runs
 * written in place) and the stage function (zero-run symbols out). */
#include <errno.h>
#include <string.h>

#include "gmtf_codec.h"
#include "rank_coder.h"

/* ---- adaptive probabilities -------------------------------------------- */

/* Probability of a 0 bit, 16-bit scale, as the mean of a fast and a slow
 * estimator: the fast one follows local changes, the slow one is precise
 * on stationary data. The slow one's rate starts high and falls with the
 * use count n, so a fresh context learns from its first few bits (small
 * blocks gain most). Both stay within [1, 65535], so the mean is never 0 or
 * 65536 and every decision keeps a nonzero share of the range. */
typedef struct {
    uint16_t fast, slow, n;
} prob2;

#define RATE_FAST 4
#define PROB_INIT 32768
#define COUNT_MAX 31
static const uint8_t rate_slow_of[COUNT_MAX + 1] = {
    2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7,
};

static inline uint32_t prob_get(const prob2 *p)
{
    return ((uint32_t)p->fast + p->slow) >> 1;
}

/* mask: all ones for a 1 bit, 0 for a 0 bit (branch-free for the decoder). */
static inline __attribute__((always_inline)) void prob_update(prob2 *p, uint32_t mask)
{
    uint32_t f = p->fast, s = p->slow, n = p->n;
    uint32_t rs = rate_slow_of[n], rf = rs < RATE_FAST ? rs : RATE_FAST;
    f += (((65536 - f) >> rf) & ~mask) - ((f >> rf) & mask);
    s += (((65536 - s) >> rs) & ~mask) - ((s >> rs) & mask);
    p->fast = (uint16_t)f;
    p->slow = (uint16_t)s;
    p->n = (uint16_t)(n + (n < COUNT_MAX));
}

/* ---- model ------------------------------------------------------------- */

#define LEN_MAX_K 30   /* runs below 2^31; blocks are at most 2^24 */
#define RCTX 64        /* contexts for the run decision and rank buckets */
#define LCTX 32        /* contexts for the run length's bit count */
#define NBUCKET 9      /* rank buckets 1, 2, 3-4, ..., 129-255 */

typedef struct {
    prob2 run[RCTX];                       /* a run follows (1) or a rank (0) */
    prob2 len_unary[LCTX][LEN_MAX_K + 1];  /* k > i */
    prob2 len_top[LEN_MAX_K + 1][4];       /* first two low bits of L: tree */
    prob2 bucket[RCTX][NBUCKET];           /* bucket > b */
    prob2 offset[256];                     /* offset tree of all buckets */
} model;

/* Quantised rank for contexts: 0 (the event was a run), 1, 2, 3, 4-5,
 * 6-9, 10-19, 20+. */
static const uint8_t rank_q[256] = {
    0, 1, 2, 3, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, [20 ... 255] = 7,
};

/* What the contexts look at. r1: the previous rank, 0 when the previous
 * event was a run; k1: bit count of the last run; avg: running mean of the
 * quantised ranks of recent events (runs count 0), scaled by 16, which
 * tells a settled stretch of the block from a busy one. */
typedef struct {
    unsigned r1, k1, avg;
} history;

#define AVG_RATE 3 /* the mean follows about the last 8 events */

static inline void hist_run(history *h, unsigned k)
{
    h->r1 = 0;
    h->k1 = k;
    h->avg -= h->avg >> AVG_RATE;
}

static inline void hist_rank(history *h, unsigned r)
{
    h->r1 = r;
    h->avg += ((unsigned)rank_q[r] << 4 >> AVG_RATE) - (h->avg >> AVG_RATE);
}

/* avg in 8 steps of one quantised rank each */
static inline unsigned avg_q(const history *h)
{
    unsigned a = h->avg >> 4;
    return a < 7 ? a : 7;
}

static inline unsigned ctx_event(const history *h)
{
    return rank_q[h->r1] * 8 + avg_q(h);
}

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

/* Rank r in 1..255 -> bucket b (0..8); bucket b >= 2 covers
 * [2^(b-1) + 1, 2^b], the last one stops at 255. */
static inline unsigned rank_bucket(unsigned r)
{
    return r <= 2 ? r - 1 : 32 - (unsigned)__builtin_clz(r - 1);
}

/* ---- range encoder ----------------------------------------------------- */

/* LZMA-style carry-propagating range coder, 32-bit range, bytes out. The
 * first byte such a coder makes is always 0 and is not stored. */
typedef struct {
    uint64_t low;
    uint32_t range;
    uint8_t cache;
    uint64_t pending; /* 0xFF bytes waiting for a possible carry */
    int first;
    uint8_t *out, *end;
    int overflow;
} rc_enc;

static inline void rc_put(rc_enc *e, uint8_t b)
{
    if (e->out < e->end)
        *e->out++ = b;
    else
        e->overflow = 1;
}

static void rc_shift_low(rc_enc *e)
{
    if ((uint32_t)e->low < 0xFF000000u || (e->low >> 32) != 0) {
        uint8_t carry = (uint8_t)(e->low >> 32);
        if (!e->first)
            rc_put(e, (uint8_t)(e->cache + carry));
        e->first = 0;
        for (; e->pending; e->pending--)
            rc_put(e, (uint8_t)(0xFF + carry));
        e->cache = (uint8_t)(e->low >> 24);
    } else {
        e->pending++;
    }
    e->low = (e->low & 0x00FFFFFFu) << 8;
}

static void rc_enc_init(rc_enc *e, uint8_t *dst, size_t cap)
{
    e->low = 0;
    e->range = 0xFFFFFFFFu;
    e->cache = 0;
    e->pending = 0;
    e->first = 1;
    e->out = dst;
    e->end = dst + cap;
    e->overflow = 0;
}

static void rc_enc_finish(rc_enc *e)
{
    for (int i = 0; i < 5; i++)
        rc_shift_low(e);
}

static inline void enc_bit(rc_enc *e, prob2 *p, int bit)
{
    uint32_t bound = (e->range >> 16) * prob_get(p);
    if (bit) {
        e->low += bound;
        e->range -= bound;
    } else {
        e->range = bound;
    }
    prob_update(p, 0u - (uint32_t)bit);
    while (e->range < (1u << 24)) {
        e->range <<= 8;
        rc_shift_low(e);
    }
}

/* nb equiprobable bits in one step (two for nb > 16): the range splits into 2^nb
 * equal parts. One division in the decoder replaces nb dependent
 * decisions; the low bits of run lengths so coded are near-random
 * (modelled, they cost 0.97 bits each). Rank offsets stay modelled: coded
 * direct they cost canterbury 4-8% (kennedy.xls). */
#define DIRECT_MAX 16 /* keeps range >> nb >= 2^8, never 0 */

static inline void enc_direct_part(rc_enc *e, uint32_t v, unsigned nb)
{
    e->range >>= nb;
    e->low += (uint64_t)v * e->range;
    while (e->range < (1u << 24)) {
        e->range <<= 8;
        rc_shift_low(e);
    }
}

/* nb <= 31 bits, the high part first */
static inline void enc_direct(rc_enc *e, uint32_t v, unsigned nb)
{
    if (nb > DIRECT_MAX) {
        enc_direct_part(e, v >> DIRECT_MAX, nb - DIRECT_MAX);
        nb = DIRECT_MAX;
        v &= (1u << DIRECT_MAX) - 1;
    }
    enc_direct_part(e, v, nb);
}

/* ---- range decoder ----------------------------------------------------- */

typedef struct {
    uint32_t range, code;
    const uint8_t *in, *end;
    size_t over; /* bytes asked for beyond the end (read as 0) */
} rc_dec;

static inline uint8_t rc_get(rc_dec *d)
{
    if (d->in < d->end)
        return *d->in++;
    d->over++;
    return 0;
}

static void rc_dec_init(rc_dec *d, const uint8_t *src, size_t len)
{
    d->in = src;
    d->end = src + len;
    d->over = 0;
    d->range = 0xFFFFFFFFu;
    d->code = 0;
    for (int i = 0; i < 4; i++)
        d->code = (d->code << 8) | rc_get(d);
}

static inline __attribute__((always_inline)) int dec_bit(rc_dec *d, prob2 *p)
{
    uint32_t bound = (d->range >> 16) * prob_get(p);
    /* Masks rather than branches or ternaries (which compilers turn back
     * into branches): the bit is data, and mispredicting it is the main
     * cost of a decision. */
    uint32_t mask = 0u - (uint32_t)(d->code >= bound);
    d->code -= bound & mask;
    d->range = bound + ((d->range - 2 * bound) & mask);
    prob_update(p, mask);
    if (d->range < (1u << 24)) {
        d->range <<= 8;
        d->code = (d->code << 8) | rc_get(d);
        if (d->range < (1u << 24)) {
            d->range <<= 8;
            d->code = (d->code << 8) | rc_get(d);
        }
    }
    return (int)(mask & 1);
}

static inline __attribute__((always_inline)) uint32_t dec_direct_part(rc_dec *d, unsigned nb)
{
    /* range >= 2^24 between steps and nb <= DIRECT_MAX: never 0 */
    d->range >>= nb;
    uint32_t v = d->code / d->range;
    /* v >= 2^nb only from damaged input; clamp so code stays consistent */
    uint32_t top = (1u << nb) - 1;
    v = v < top ? v : top;
    d->code -= v * d->range;
    while (d->range < (1u << 24)) {
        d->range <<= 8;
        d->code = (d->code << 8) | rc_get(d);
    }
    return v;
}

static inline __attribute__((always_inline)) uint32_t dec_direct(rc_dec *d, unsigned nb)
{
    uint32_t hi = 0;
    if (nb > DIRECT_MAX) {
        hi = dec_direct_part(d, nb - DIRECT_MAX) << DIRECT_MAX;
        nb = DIRECT_MAX;
    }
    return hi | dec_direct_part(d, nb);
}

/* ---- events: encoder --------------------------------------------------- */

static void enc_run_len(rc_enc *e, model *m, const history *h, uint32_t len)
{
    unsigned k = 31 - (unsigned)__builtin_clz(len);
    prob2 *u = m->len_unary[ctx_len(h)];
    for (unsigned i = 0; i < k; i++)
        enc_bit(e, &u[i], 1);
    if (k < LEN_MAX_K)
        enc_bit(e, &u[k], 0);
    if (k == 0)
        return;
    /* First two bits below the leading one by a small tree (they carry
     * most of the skew), the rest direct. */
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

static void enc_rank(rc_enc *e, model *m, const history *h, unsigned r)
{
    unsigned b = rank_bucket(r);
    prob2 *pb = m->bucket[ctx_event(h)];
    for (unsigned i = 0; i < b; i++)
        enc_bit(e, &pb[i], 1);
    if (b < NBUCKET - 1)
        enc_bit(e, &pb[b], 0);
    if (b < 2)
        return;
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

/* ---- workspace --------------------------------------------------------- */

#define WS_ALIGN 64
#define MODEL_BYTES ((sizeof(model) + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1))

/* The model only, whatever the block size: both fused paths read and
 * write the caller's buffers directly. */
size_t gmtf_rank_workspace_size(size_t max_block)
{
    (void)max_block;
    return MODEL_BYTES;
}

static model *ws_model(void *ws)
{
    return (model *)ws;
}

/* ---- public: encode ---------------------------------------------------- */

long gmtf_entropy_encode(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap, void *ws)
{
    model *m = ws_model(ws);
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

/* The fused encoder: events straight from the ranks, no symbol buffer. */
long gmtf_rank_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    model *m = ws_model(ws);
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
        uint32_t runlen = 1;
        unsigned node = 1;
        int j = (int)k - 1;
        for (; j >= 0 && node < 4; j--) {
            int bit = dec_bit(&l->d, &m->len_top[k][node]);
            node = node * 2 + (unsigned)bit;
            runlen = runlen * 2 + (unsigned)bit;
        }
        if (j >= 0)
            runlen = runlen << (j + 1) | dec_direct(&l->d, (unsigned)j + 1);
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
        unsigned nbits = b - 1;
        unsigned node = 1;
        for (unsigned j = 0; j < nbits; j++)
            node = node * 2 + (unsigned)dec_bit(&l->d, &m->offset[(1u << nbits) + node - 1]);
        r = node + 1; /* node = (1 << nbits) + offset */
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

int gmtf_entropy_decode(const uint8_t *src, size_t len, uint16_t *syms, size_t count, void *ws)
{
    lane l;
    lane_init(&l, src, len, ws_model(ws), syms, count);
    while (l.pos < l.total) {
        int err = lane_event(&l, 1);
        if (err)
            return err;
    }
    return lane_check(&l);
}

int gmtf_rank_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws)
{
    lane l;
    lane_init(&l, src, len, ws_model(ws), ranks, n);
    while (l.pos < l.total) {
        int err = lane_event(&l, 0);
        if (err)
            return err;
    }
    return lane_check(&l);
}
