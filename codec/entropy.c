/* Entropy coding of zero-run coded MTF ranks (docs/entropy.md has the
 * measurements and the payload layout). A payload starts with a method
 * byte:
 *
 * Method 0, an adaptive binary range coder under a structured model. The
 * coded events, in order:
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
 * Method 1, semi-static rANS over the same events and contexts: per-block
 * counts sent up front, one table lookup per coded symbol, about twice as
 * fast to decode. Used for blocks of 64 KiB and more unless method 0 is
 * clearly smaller (gmtf_rank_encode tries both).
 *
 * The fused decoders write ranks (zero runs in place); the stage decoder
 * writes zero-run symbols from the same code. */
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

#define LEN_MAX_K 30 /* runs below 2^31; blocks are at most 2^24 */
#define RCTX 64      /* contexts for the run decision and rank buckets */
#define LCTX 32      /* contexts for the run length's bit count */
#define NBUCKET 9    /* rank buckets 1, 2, 3-4, ..., 129-255 */

typedef struct {
    prob2 run[RCTX];                      /* a run follows (1) or a rank (0) */
    prob2 len_unary[LCTX][LEN_MAX_K + 1]; /* k > i */
    prob2 len_top[LEN_MAX_K + 1][4];      /* first two low bits of L: tree */
    prob2 bucket[RCTX][NBUCKET];          /* bucket > b */
    prob2 offset[256];                    /* offset tree of all buckets */
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

/* ---- workspace --------------------------------------------------------- */

#define WS_ALIGN 64
#define MODEL_BYTES ((sizeof(model) + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1))

static model *ws_model(void *ws)
{
    return (model *)ws;
}

/* ---- public: encode ---------------------------------------------------- */

static long adaptive_encode_syms(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap,
                                 void *ws)
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

/* Method 0, fused: events straight from the ranks, no symbol buffer. */
static long adaptive_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws)
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

static int adaptive_decode_syms(const uint8_t *src, size_t len, uint16_t *syms, size_t count,
                                void *ws)
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

static int adaptive_decode_ranks(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws)
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

/* ==== method 1: semi-static rANS =========================================
 *
 * Every coded item of an event is one rANS symbol of a static per-block
 * distribution: the event class (run flag, run bit count k, rank bucket:
 * method 0's first 3-4 decisions) in the same 64 contexts, the offset of a
 * rank in its bucket (one table per bucket), the two bits below a run
 * length's leading one (one table per k); the run length's remaining bits
 * are raw. The encoder counts the symbols first and sends quantised counts
 * at the front (through the binary range coder, which models them); both
 * sides normalise them to 12-bit frequencies the same way. Decoding is one
 * table lookup and one multiply per symbol with two interleaved states and
 * no branch on the data but the event type. */

#define HYB_RUN0 NBUCKET /* class symbol of a run with k = 0; k = 0..24 follow */
#define HYB_KMAX 24      /* GMTF_BLOCK_MAX = 2^24: k <= 24 */
#define HYB_NSYM (HYB_RUN0 + HYB_KMAX + 1)
#define T_OFF RCTX                  /* offset tables: T_OFF + b - 2, b = 2..8 */
#define T_TOP (T_OFF + NBUCKET - 2) /* run top bits: T_TOP + k - 1, k = 1..24 */
#define NTAB (T_TOP + HYB_KMAX)
#define TAB_ALPHA 128 /* largest alphabet (offsets of bucket 8) */
#define HYB_HDR 5     /* method byte, LE32 length of the count stream */
#define TAB_BITS 12
#define TAB_SIZE (1u << TAB_BITS)
#define RANS_L (1u << 16) /* states live in [2^16, 2^32); 16-bit words */
#define RAW_MAX 16        /* raw bits per rANS step */
#define CNT_KIND 46       /* count models: class symbols, offsets by log2, top bits */
#define CNT_REF 13        /* times the neighbour count's bit length / 2 */
#define CNT_CTX (CNT_KIND * CNT_REF)
#define CNT_TREE 32           /* bit length of a count: 5-level tree, 0..25 used */
#define HYB_MIN_N (64u << 10) /* smaller blocks: method 0 only */
/* Method 1 is kept unless method 0 is smaller by more than slack/1024 of
 * its size: large blocks, where decoding speed counts and method 1's
 * tables are cheap, accept more (about 1.4% is typical there). */
#define HYB_BIG_N (512u << 10)
#define HYB_SLACK_BIG 48
#define HYB_SLACK_SMALL 8

/* Counts are sent as bit length e (a tree per count context) and up to two
 * bits below the leading one; the value is the middle of that interval. */
typedef struct {
    prob2 len[CNT_CTX][CNT_TREE];
    uint8_t lens[NTAB][TAB_ALPHA]; /* bit lengths sent so far */
} count_model;

typedef struct {
    uint32_t fc[NTAB][TAB_ALPHA]; /* freq << 16 | cum; freq 0: impossible */
    uint8_t slot[NTAB][TAB_SIZE]; /* decoder: slot -> symbol */
} hyb_tables;

/* Alphabet of table t. After a run (contexts 0..7, q(r1) = 0) only ranks
 * can follow; bucket 8 holds ranks 129..255 (offset 127 would be 256). */
static inline unsigned hyb_alphabet(unsigned t)
{
    if (t < 8)
        return NBUCKET;
    if (t < T_OFF)
        return HYB_NSYM;
    if (t < T_TOP) {
        unsigned b = t - T_OFF + 2;
        return b == NBUCKET - 1 ? 127 : 1u << (b - 1);
    }
    return t == T_TOP ? 2 : 4;
}

/* Count context: the symbol (class symbols), its log2 (offsets) or the
 * symbol (top bits), times the bit length of a neighbour count: the same
 * class one context before (the previous avg step, else the previous
 * r1 row), or the previous symbol of the same table. */
static inline unsigned count_ctx(unsigned t, unsigned s, const uint8_t (*lens)[TAB_ALPHA])
{
    unsigned kind, ref;
    if (t < T_OFF) {
        kind = s;
        ref = t == 0 ? 0 : t % 8 ? lens[t - 1][s] : lens[t - 8][s];
    } else {
        kind = t < T_TOP ? HYB_NSYM + 31 - (unsigned)__builtin_clz(s + 1) : HYB_NSYM + 8 + s;
        ref = s ? lens[t][s - 1] : 0;
    }
    ref >>= 1;
    return kind * CNT_REF + (ref < CNT_REF - 1 ? ref : CNT_REF - 1);
}

/* Bits sent below a count's leading one: the cost of a count's relative
 * error d is about count * d^2 / 1.4 bits, so a bit more is worth it about
 * every factor 4 of count (0 bits below 16, 1 from 32, 2 from 128, ...). */
static inline unsigned mant_bits(unsigned e)
{
    return e < 6 ? 0 : (e - 4) / 2;
}

static inline uint32_t count_value(unsigned e, unsigned m)
{
    if (e == 0)
        return 0;
    unsigned mb = mant_bits(e);
    uint32_t top = (1u << mb) | m;
    unsigned sh = e - 1 - mb;
    return sh ? (top << sh) | (1u << (sh - 1)) : top;
}

/* Weights w[0..a) -> frequencies summing to TAB_SIZE, each >= 1; any
 * weights give a valid table (hostile input included). */
static void hyb_normalise(const uint32_t *w, unsigned a, uint32_t *fc)
{
    uint64_t total = 0;
    for (unsigned s = 0; s < a; s++)
        total += w[s];
    uint32_t f[TAB_ALPHA], sum = 0;
    unsigned best = 0;
    for (unsigned s = 0; s < a; s++) {
        f[s] = total ? 1 + (uint32_t)((uint64_t)w[s] * (TAB_SIZE - a) / total) : TAB_SIZE / a;
        sum += f[s];
        if (w[s] > w[best])
            best = s;
    }
    f[best] += TAB_SIZE - sum;
    uint32_t cum = 0;
    for (unsigned s = 0; s < TAB_ALPHA; s++) {
        uint32_t fs = s < a ? f[s] : 0;
        fc[s] = fs << 16 | cum;
        cum += fs;
    }
}

/* ---- workspace --------------------------------------------------------- */

#define ALIGN_UP(x) (((x) + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1))
#define CMODEL_OFF MODEL_BYTES
#define TABLES_OFF (CMODEL_OFF + ALIGN_UP(sizeof(count_model)))
#define COUNTS_OFF (TABLES_OFF + ALIGN_UP(sizeof(hyb_tables)))
#define FIXED_BYTES (COUNTS_OFF + ALIGN_UP(sizeof(uint32_t) * NTAB * TAB_ALPHA))

/* Encoder scratch after the fixed part, laid out by the block size n:
 * event records (2 bytes each, at most n events), the rANS stream (at most
 * one 16-bit word per symbol and 2 symbols per rank: a run of 3-4 symbols
 * is 8 ranks or more), the method-0 trial. */
static size_t rans_cap(size_t n)
{
    return 4 * n + 64;
}

/* The method-0 trial: larger results count as "does not fit" (a block is
 * stored raw long before). */
static size_t trial_cap(size_t n)
{
    return n + n / 4 + 64;
}

#define COUNT_STREAM_CAP (64u << 10) /* far above any count stream */

static size_t enc_scratch(size_t n)
{
    return ALIGN_UP(2 * n) + ALIGN_UP(rans_cap(n)) + ALIGN_UP(trial_cap(n)) + COUNT_STREAM_CAP;
}

size_t gmtf_rank_workspace_size(size_t max_block)
{
    return FIXED_BYTES + enc_scratch(max_block);
}

static count_model *ws_cmodel(void *ws)
{
    return (count_model *)((uint8_t *)ws + CMODEL_OFF);
}

static hyb_tables *ws_tables(void *ws)
{
    return (hyb_tables *)((uint8_t *)ws + TABLES_OFF);
}

static uint32_t (*ws_counts(void *ws))[TAB_ALPHA]
{
    return (uint32_t(*)[TAB_ALPHA])((uint8_t *)ws + COUNTS_OFF);
}

static uint16_t *ws_records(void *ws)
{
    return (uint16_t *)((uint8_t *)ws + FIXED_BYTES);
}

static uint8_t *ws_rans_end(void *ws, size_t n)
{
    return (uint8_t *)ws + FIXED_BYTES + ALIGN_UP(2 * n) + rans_cap(n);
}

static uint8_t *ws_trial(void *ws, size_t n)
{
    return (uint8_t *)ws + FIXED_BYTES + ALIGN_UP(2 * n) + ALIGN_UP(rans_cap(n));
}

static uint8_t *ws_count_stream(void *ws, size_t n)
{
    return ws_trial(ws, n) + ALIGN_UP(trial_cap(n));
}

static void cmodel_init(count_model *cm)
{
    prob2 *p = &cm->len[0][0];
    for (size_t i = 0; i < (size_t)CNT_CTX * CNT_TREE; i++)
        p[i] = (prob2){PROB_INIT, PROB_INIT, 0};
    memset(cm->lens, 0, sizeof cm->lens);
}

/* ---- method 1: encoder ------------------------------------------------- */

/* The two bits below the leading one of a run length (one for k = 1). */
static inline unsigned run_top(uint32_t len, unsigned k)
{
    return k == 1 ? len & 1 : (len >> (k - 2)) & 3;
}

/* Pass 1: the event classes in order (context << 6 | class) and the counts
 * of every table. Returns the event count; *nsym: the rANS symbol count. */
static size_t hyb_records(const uint8_t *ranks, size_t n, uint16_t *rec, uint32_t (*cnt)[TAB_ALPHA],
                          size_t *nsym)
{
    memset(cnt, 0, sizeof(uint32_t) * NTAB * TAB_ALPHA);
    history h = {1, 0, 0};
    size_t i = 0, ne = 0, ns = 0;
    while (i < n) {
        unsigned c = ctx_event(&h), s;
        unsigned r = ranks[i];
        if (r != 0) {
            s = rank_bucket(r);
            if (s >= 2) {
                cnt[T_OFF + s - 2][r - (1u << (s - 1)) - 1]++;
                ns++;
            }
            hist_rank(&h, r);
            i++;
        } else {
            size_t start = i;
            while (i < n && ranks[i] == 0)
                i++;
            uint32_t len = (uint32_t)(i - start);
            unsigned k = 31 - (unsigned)__builtin_clz(len);
            s = HYB_RUN0 + k;
            if (k >= 1) {
                cnt[T_TOP + k - 1][run_top(len, k)]++;
                ns += 1 + (k > 2) + (k > 2 + RAW_MAX);
            }
            hist_run(&h, k);
        }
        rec[ne++] = (uint16_t)(c << 6 | s);
        cnt[c][s]++;
        ns++;
    }
    *nsym = ns;
    return ne;
}

/* The quantised counts into the count stream, and the encoder's tables. */
static void hyb_send_tables(rc_enc *e, count_model *cm, uint32_t (*cnt)[TAB_ALPHA], hyb_tables *t)
{
    uint8_t(*lens)[TAB_ALPHA] = cm->lens;
    for (unsigned tb = 0; tb < NTAB; tb++) {
        unsigned a = hyb_alphabet(tb);
        uint32_t w[TAB_ALPHA];
        for (unsigned s = 0; s < a; s++) {
            uint32_t v = cnt[tb][s];
            unsigned len = v ? 32 - (unsigned)__builtin_clz(v) : 0;
            prob2 *tree = cm->len[count_ctx(tb, s, (const uint8_t(*)[TAB_ALPHA])lens)];
            lens[tb][s] = (uint8_t)len;
            unsigned node = 1;
            for (int j = 4; j >= 0; j--) {
                int bit = (len >> j) & 1;
                enc_bit(e, &tree[node], bit);
                node = node * 2 + (unsigned)bit;
            }
            unsigned m = 0, mb = mant_bits(len);
            if (mb) {
                m = (v >> (len - 1 - mb)) & ((1u << mb) - 1);
                enc_direct(e, m, mb);
            }
            w[s] = count_value(len, m);
        }
        hyb_normalise(w, a, t->fc[tb]);
    }
}

typedef struct {
    uint32_t x[2];
    size_t j; /* symbols still to encode; symbol j - 1 uses state (j - 1) & 1 */
    uint8_t *p;
} rans_enc;

static inline void rans_put(rans_enc *r, uint32_t fc)
{
    uint32_t f = fc >> 16, cum = fc & 0xFFFF;
    r->j--;
    uint32_t x = r->x[r->j & 1];
    if (x >= f << (32 - TAB_BITS)) { /* then x < f * 2^20: one word is enough */
        r->p -= 2;
        r->p[0] = (uint8_t)x;
        r->p[1] = (uint8_t)(x >> 8);
        x >>= 16;
    }
    r->x[r->j & 1] = ((x / f) << TAB_BITS) + x % f + cum;
}

static inline void rans_put_raw(rans_enc *r, uint32_t v, unsigned nb)
{
    r->j--;
    uint32_t x = r->x[r->j & 1];
    if (x >= 1u << (32 - nb)) {
        r->p -= 2;
        r->p[0] = (uint8_t)x;
        r->p[1] = (uint8_t)(x >> 8);
        x >>= 16;
    }
    r->x[r->j & 1] = x << nb | v;
}

/* Pass 3: every symbol by rANS, last first (the decoder's order reversed),
 * walking the ranks backwards; the stream grows down from end. Returns the
 * stream's first byte. */
static uint8_t *hyb_rans_encode(const uint8_t *ranks, size_t n, const uint16_t *rec, size_t ne,
                                size_t nsym, const hyb_tables *t, uint8_t *end)
{
    rans_enc r = {{RANS_L, RANS_L}, nsym, end};
    size_t i = n;
    for (size_t ev = ne; ev-- > 0;) {
        unsigned c = rec[ev] >> 6, s = rec[ev] & 63;
        if (s < HYB_RUN0) {
            unsigned rk = ranks[--i];
            if (s >= 2)
                rans_put(&r, t->fc[T_OFF + s - 2][rk - (1u << (s - 1)) - 1]);
        } else {
            unsigned k = s - HYB_RUN0;
            size_t start = i; /* the run ends at i and is maximal */
            while (start > 0 && ranks[start - 1] == 0)
                start--;
            uint32_t len = (uint32_t)(i - start);
            i = start;
            if (k > 2) {
                unsigned nb = k - 2;
                uint32_t low = len & ((1u << nb) - 1);
                if (nb > RAW_MAX) {
                    rans_put_raw(&r, low & ((1u << RAW_MAX) - 1), RAW_MAX);
                    rans_put_raw(&r, low >> RAW_MAX, nb - RAW_MAX);
                } else {
                    rans_put_raw(&r, low, nb);
                }
            }
            if (k >= 1)
                rans_put(&r, t->fc[T_TOP + k - 1][run_top(len, k)]);
        }
        rans_put(&r, t->fc[c][s]);
    }
    for (int j = 1; j >= 0; j--) {
        r.p -= 4;
        for (int b = 0; b < 4; b++)
            r.p[b] = (uint8_t)(r.x[j] >> (8 * b));
    }
    return r.p;
}

/* Encodes into the workspace: the count stream at ws_count_stream, the
 * rANS stream ending at ws_rans_end. Returns the payload size (header
 * included) or -ENOSPC; hybrid_emit writes the payload. */
typedef struct {
    size_t len_b, len_a;
    const uint8_t *b, *a;
} hyb_result;

static long hybrid_encode(const uint8_t *ranks, size_t n, void *ws, hyb_result *res)
{
    uint16_t *rec = ws_records(ws);
    uint32_t(*cnt)[TAB_ALPHA] = ws_counts(ws);
    hyb_tables *t = ws_tables(ws);
    size_t nsym;
    size_t ne = hyb_records(ranks, n, rec, cnt, &nsym);

    count_model *cm = ws_cmodel(ws);
    cmodel_init(cm);
    rc_enc e;
    uint8_t *b = ws_count_stream(ws, n);
    rc_enc_init(&e, b, COUNT_STREAM_CAP);
    hyb_send_tables(&e, cm, cnt, t);
    rc_enc_finish(&e);
    if (e.overflow)
        return -ENOSPC;
    res->b = b;
    res->len_b = (size_t)(e.out - b);
    uint8_t *end = ws_rans_end(ws, n);
    res->a = hyb_rans_encode(ranks, n, rec, ne, nsym, t, end);
    res->len_a = (size_t)(end - res->a);
    return (long)(HYB_HDR + res->len_b + res->len_a);
}

static void hybrid_emit(const hyb_result *res, uint8_t *dst)
{
    dst[0] = 1;
    for (int b = 0; b < 4; b++)
        dst[1 + b] = (uint8_t)(res->len_b >> (8 * b));
    memcpy(dst + HYB_HDR, res->b, res->len_b);
    memcpy(dst + HYB_HDR + res->len_b, res->a, res->len_a);
}

/* ---- method 1: decoder ------------------------------------------------- */

/* Reads the counts and builds the decoding tables. */
static int hyb_read_tables(rc_dec *d, count_model *cm, hyb_tables *t)
{
    for (unsigned tb = 0; tb < NTAB; tb++) {
        unsigned a = hyb_alphabet(tb);
        uint32_t w[TAB_ALPHA];
        for (unsigned s = 0; s < a; s++) {
            prob2 *tree = cm->len[count_ctx(tb, s, (const uint8_t(*)[TAB_ALPHA])cm->lens)];
            unsigned node = 1;
            for (int j = 0; j < 5; j++)
                node = node * 2 + (unsigned)dec_bit(d, &tree[node]);
            unsigned len = node - CNT_TREE;
            if (len > 25)
                return GMTF_E_CORRUPT;
            cm->lens[tb][s] = (uint8_t)len;
            unsigned m = 0;
            if (mant_bits(len))
                m = dec_direct(d, mant_bits(len));
            w[s] = count_value(len, m);
        }
        hyb_normalise(w, a, t->fc[tb]);
        for (unsigned s = 0; s < a; s++)
            memset(t->slot[tb] + (t->fc[tb][s] & 0xFFFF), (int)s, t->fc[tb][s] >> 16);
    }
    return 0;
}

typedef struct {
    uint32_t xa, xb; /* xa decodes the next symbol; they swap after each */
    const uint8_t *in, *end;
    size_t over;
} rans_dec;

static inline __attribute__((always_inline)) void rans_renorm(rans_dec *r, uint32_t x)
{
    uint32_t need = x < RANS_L;
    if (__builtin_expect(r->end - r->in >= 2, 1)) {
        uint32_t w = (uint32_t)r->in[0] | (uint32_t)r->in[1] << 8;
        x = need ? x << 16 | w : x;
        r->in += 2 * need;
    } else if (need) {
        r->over++;
        x <<= 16;
    }
    r->xa = r->xb;
    r->xb = x;
}

static inline __attribute__((always_inline)) unsigned rans_get(rans_dec *r, const hyb_tables *t,
                                                               unsigned tb)
{
    uint32_t x = r->xa;
    uint32_t sl = x & (TAB_SIZE - 1);
    unsigned s = t->slot[tb][sl];
    uint32_t fc = t->fc[tb][s];
    /* slot >= cum and freq * (x >> 12) < 2^32: no wrap for any state */
    rans_renorm(r, (fc >> 16) * (x >> TAB_BITS) + sl - (fc & 0xFFFF));
    return s;
}

static inline __attribute__((always_inline)) uint32_t rans_get_raw(rans_dec *r, unsigned nb)
{
    uint32_t x = r->xa;
    uint32_t v = x & ((1u << nb) - 1);
    rans_renorm(r, x >> nb);
    return v;
}

static inline __attribute__((always_inline)) int
hyb_decode(const uint8_t *src, size_t len, void *out, size_t total, void *ws, int to_syms)
{
    if (len < HYB_HDR)
        return GMTF_E_CORRUPT;
    size_t len_b =
        (size_t)src[1] | (size_t)src[2] << 8 | (size_t)src[3] << 16 | (size_t)src[4] << 24;
    if (len_b > len - HYB_HDR || len - HYB_HDR - len_b < 8)
        return GMTF_E_CORRUPT;
    count_model *cm = ws_cmodel(ws);
    cmodel_init(cm);
    hyb_tables *t = ws_tables(ws);
    rc_dec d;
    rc_dec_init(&d, src + HYB_HDR, len_b);
    int err = hyb_read_tables(&d, cm, t);
    if (err)
        return err;
    if (d.over != 0 || d.in != d.end)
        return GMTF_E_CORRUPT;
    const uint8_t *a = src + HYB_HDR + len_b;
    rans_dec r;
    r.xa = (uint32_t)a[0] | (uint32_t)a[1] << 8 | (uint32_t)a[2] << 16 | (uint32_t)a[3] << 24;
    r.xb = (uint32_t)a[4] | (uint32_t)a[5] << 8 | (uint32_t)a[6] << 16 | (uint32_t)a[7] << 24;
    r.in = a + 8;
    r.end = src + len;
    r.over = 0;
    /* The history of ctx_event kept as q(r1) and avg: one table load less
     * on the chain from one event's symbol to the next one's context. */
    unsigned q1 = rank_q[1], avg = 0;
    size_t pos = 0;
    while (pos < total) {
        unsigned aq = avg >> 4;
        unsigned s = rans_get(&r, t, q1 * 8 + (aq < 7 ? aq : 7));
        if (s < HYB_RUN0) {
            unsigned rk = s + 1;
            if (s >= 2)
                rk = (1u << (s - 1)) + 1 + rans_get(&r, t, T_OFF + s - 2);
            if (to_syms)
                ((uint16_t *)out)[pos] = (uint16_t)(rk + 1);
            else
                ((uint8_t *)out)[pos] = (uint8_t)rk;
            pos++;
            q1 = rank_q[rk];
            avg += (q1 << 4 >> AVG_RATE) - (avg >> AVG_RATE);
            continue;
        }
        unsigned k = s - HYB_RUN0;
        uint32_t runlen = 1;
        if (k >= 1) {
            unsigned top = rans_get(&r, t, T_TOP + k - 1);
            if (k == 1) {
                runlen = 2 | top;
            } else {
                unsigned nb = k - 2;
                uint32_t low = 0;
                if (nb > RAW_MAX) {
                    low = rans_get_raw(&r, nb - RAW_MAX) << RAW_MAX;
                    low |= rans_get_raw(&r, RAW_MAX);
                } else if (nb > 0) {
                    low = rans_get_raw(&r, nb);
                }
                runlen = ((4u | top) << nb) | low;
            }
        }
        if (to_syms) {
            uint16_t *syms = out;
            for (uint32_t rl = runlen; rl > 0;) {
                if (pos >= total)
                    return GMTF_E_CORRUPT;
                unsigned odd = rl & 1;
                syms[pos++] = odd ? GMTF_SYM_RUNA : GMTF_SYM_RUNB;
                rl = (rl - 2 + odd) >> 1;
            }
        } else {
            if (runlen > total - pos)
                return GMTF_E_CORRUPT;
            uint8_t *z = (uint8_t *)out + pos;
            if (runlen <= 16 && total - pos >= 16) {
                uint64_t zero = 0;
                memcpy(z, &zero, 8);
                memcpy(z + 8, &zero, 8);
            } else {
                memset(z, 0, runlen);
            }
            pos += runlen;
        }
        q1 = 0;
        avg -= avg >> AVG_RATE;
    }
    /* A valid stream ends with both states back at their start and every
     * byte read. */
    if (r.over != 0 || r.in != r.end || r.xa != RANS_L || r.xb != RANS_L)
        return GMTF_E_CORRUPT;
    return 0;
}

/* ---- public ------------------------------------------------------------ */

long gmtf_entropy_encode(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap, void *ws)
{
    if (cap < 1)
        return -ENOSPC;
    long r = adaptive_encode_syms(syms, count, dst + 1, cap - 1, ws);
    if (r < 0)
        return r;
    dst[0] = 0;
    return r + 1;
}

long gmtf_rank_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    if (cap < 1)
        return -ENOSPC;
    if (n > GMTF_BLOCK_MAX)
        return -EINVAL;
    if (n < HYB_MIN_N) {
        long ad = adaptive_encode(ranks, n, dst + 1, cap - 1, ws);
        if (ad < 0)
            return ad;
        dst[0] = 0;
        return ad + 1;
    }
    /* Both methods into the workspace, then the choice, so that the bytes
     * never depend on cap: method 1 unless method 0 is clearly smaller
     * (data whose statistics drift within the block, like kennedy.xls). */
    hyb_result res;
    long hyb = hybrid_encode(ranks, n, ws, &res);
    uint8_t *trial = ws_trial(ws, n);
    long ad = adaptive_encode(ranks, n, trial, trial_cap(n), ws);
    if (ad < 0 && ad != -ENOSPC)
        return ad;
    if (ad >= 0)
        ad++;
    uint64_t slack = n >= HYB_BIG_N ? HYB_SLACK_BIG : HYB_SLACK_SMALL;
    if (hyb >= 0 && (ad < 0 || (uint64_t)hyb <= (uint64_t)ad + (uint64_t)ad * slack / 1024)) {
        if ((size_t)hyb > cap)
            return -ENOSPC;
        hybrid_emit(&res, dst);
        return hyb;
    }
    if (ad < 0 || (size_t)ad > cap)
        return -ENOSPC;
    dst[0] = 0;
    memcpy(dst + 1, trial, (size_t)ad - 1);
    return ad;
}

int gmtf_entropy_decode(const uint8_t *src, size_t len, uint16_t *syms, size_t count, void *ws)
{
    if (len < 1)
        return GMTF_E_CORRUPT;
    if (src[0] == 0)
        return adaptive_decode_syms(src + 1, len - 1, syms, count, ws);
    if (src[0] == 1)
        return hyb_decode(src, len, syms, count, ws, 1);
    return GMTF_E_CORRUPT;
}

int gmtf_rank_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws)
{
    if (len < 1)
        return GMTF_E_CORRUPT;
    if (src[0] == 0)
        return adaptive_decode_ranks(src + 1, len - 1, ranks, n, ws);
    if (src[0] == 1)
        return hyb_decode(src, len, ranks, n, ws, 0);
    return GMTF_E_CORRUPT;
}
