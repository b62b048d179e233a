/* Entropy method 1: semi-static rANS (docs/entropy.md).
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
 * no branch on the data but the event type.
 *
 * Used for blocks of 64 KiB and more unless method 0 is clearly smaller
 * (entropy.c decides); about twice as fast to decode as method 0.
 * Payload: LE32 length of the count stream, the count stream (binary
 * range coder), the rANS stream (two LE32 states, then 16-bit words). */
#include <errno.h>
#include <string.h>

#include "byteorder.h"
#include "entropy_internal.h"
#include "gmtf_codec.h"
#include "rank_coder.h"

#define HYB_RUN0 NBUCKET /* class symbol of a run with k = 0; k = 0..24 follow */
#define HYB_KMAX 24      /* GMTF_BLOCK_MAX = 2^24: k <= 24 */
#define HYB_NSYM (HYB_RUN0 + HYB_KMAX + 1)
#define T_OFF RCTX                  /* offset tables: T_OFF + b - 2, b = 2..8 */
#define T_TOP (T_OFF + NBUCKET - 2) /* run top bits: T_TOP + k - 1, k = 1..24 */
#define NTAB (T_TOP + HYB_KMAX)
#define TAB_ALPHA 128 /* largest alphabet (offsets of bucket 8) */
#define RANS_HDR 4    /* LE32 length of the count stream */
#define TAB_BITS 12
#define TAB_SIZE (1u << TAB_BITS)
#define RANS_L (1u << 16) /* states live in [2^16, 2^32); 16-bit words */
#define RAW_MAX 16        /* raw bits per rANS step */
#define CNT_KIND 46       /* count models: class symbols, offsets by log2, top bits */
#define CNT_REF 13        /* times the neighbour count's bit length / 2 */
#define CNT_CTX (CNT_KIND * CNT_REF)
#define CNT_TREE 32 /* bit length of a count: 5-level tree, 0..25 used */

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

/* The tables (ws): count model, coding tables, symbol counts. */
#define CMODEL_OFF 0
#define TABLES_OFF (CMODEL_OFF + ALIGN_UP(sizeof(count_model)))
#define COUNTS_OFF (TABLES_OFF + ALIGN_UP(sizeof(hyb_tables)))
#define FIXED_BYTES (COUNTS_OFF + ALIGN_UP(sizeof(uint32_t) * NTAB * TAB_ALPHA))

/* The encoder's scratch, laid out by the block size n: event records (2
 * bytes each, at most n events), the rANS stream (at most one 16-bit word
 * per symbol and 2 symbols per rank: a run of 3-4 symbols is 8 ranks or
 * more), the count stream. */
static size_t rans_cap(size_t n)
{
    return 4 * n + 64;
}

#define COUNT_STREAM_CAP (64u << 10) /* far above any count stream */

size_t gmtf_rans_ws_size(void)
{
    return FIXED_BYTES;
}

size_t gmtf_rans_scratch_size(size_t n)
{
    return ALIGN_UP(2 * n) + ALIGN_UP(rans_cap(n)) + COUNT_STREAM_CAP;
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

/* The scratch lies right behind the tables: one base pointer and constant
 * offsets, which keeps the encoder's loops light on registers. */
static uint16_t *ws_records(void *ws)
{
    return (uint16_t *)((uint8_t *)ws + FIXED_BYTES);
}

static uint8_t *ws_rans_end(void *ws, size_t n)
{
    return (uint8_t *)ws + FIXED_BYTES + ALIGN_UP(2 * n) + rans_cap(n);
}

static uint8_t *ws_count_stream(void *ws, size_t n)
{
    return (uint8_t *)ws + FIXED_BYTES + ALIGN_UP(2 * n) + ALIGN_UP(rans_cap(n));
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
 * rANS stream ending at ws_rans_end. */
long gmtf_rans_encode(const uint8_t *ranks, size_t n, void *ws, gmtf_rans_out *out)
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
    out->b = b;
    out->len_b = (size_t)(e.out - b);
    uint8_t *end = ws_rans_end(ws, n);
    out->a = hyb_rans_encode(ranks, n, rec, ne, nsym, t, end);
    out->len_a = (size_t)(end - out->a);
    return (long)(RANS_HDR + out->len_b + out->len_a);
}

void gmtf_rans_emit(const gmtf_rans_out *out, uint8_t *dst)
{
    store_le32(dst, (uint32_t)out->len_b);
    memcpy(dst + RANS_HDR, out->b, out->len_b);
    memcpy(dst + RANS_HDR + out->len_b, out->a, out->len_a);
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
    if (len < RANS_HDR)
        return GMTF_E_CORRUPT;
    size_t len_b = load_le32(src);
    if (len_b > len - RANS_HDR || len - RANS_HDR - len_b < 8)
        return GMTF_E_CORRUPT;
    count_model *cm = ws_cmodel(ws);
    cmodel_init(cm);
    hyb_tables *t = ws_tables(ws);
    rc_dec d;
    rc_dec_init(&d, src + RANS_HDR, len_b);
    int err = hyb_read_tables(&d, cm, t);
    if (err)
        return err;
    if (d.over != 0 || d.in != d.end)
        return GMTF_E_CORRUPT;
    const uint8_t *a = src + RANS_HDR + len_b;
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

int gmtf_rans_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws)
{
    return hyb_decode(src, len, ranks, n, ws, 0);
}

int gmtf_rans_decode_syms(const uint8_t *src, size_t len, uint16_t *syms, size_t count, void *ws)
{
    return hyb_decode(src, len, syms, count, ws, 1);
}
