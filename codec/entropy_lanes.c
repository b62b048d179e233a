/* Method 2, "lanes": semi-static QLFC over 32 independent lanes, rANS.
 * The byte layout and the model are in docs/entropy.md; in short:
 *
 * A block of n bytes of BWT output is cut into 32 lanes of ceil(n/32)
 * bytes (the last ones shorter). Each lane is coded on its own as runs of
 * equal bytes. The decoder of a lane keeps a list of the lane's bytes: the
 * byte at its front is the current run's byte; the run's rank R says where
 * that byte goes back into the list (R = how many distinct bytes come
 * before it comes back), or "retire" when it does not come back. Per run:
 *
 *   rank symbol (16): retire, 1, 2, 3, 4, 5-6, 7-8, 9-12, 13-16, 17-24,
 *       25-32, 33-48, 49-64, 65-128, 129-192, 193-255; then the offset in
 *       the class: a table symbol for classes 5-6 .. 49-64; for the three
 *       last ones its top 4 bits by table and the low 2 raw;
 *   length symbol (16): 1, 2, 3, 4-5, 6-7, 8-11, ..., 192-255, escape;
 *       then the bits below the class raw; an escape codes the bit count
 *       of the length (a table symbol) and all bits below its leading one
 *       raw.
 *
 * The rank symbol's table is chosen by the run byte's history in the lane
 * (a running mean of its rank symbols and its last one) and the previous
 * run's rank; the length symbol's by the byte's mean length symbol and the
 * rank just coded. Up to 8 sets of those tables (the encoder tries 1 and
 * 2); a selector per lane and 4 KiB of output picks the set (bzip2's
 * idea). Tables are counts sent in a header, normalised to 12-bit
 * frequencies by both sides.
 *
 * Each lane has its own two 64-bit rANS states and word stream, so lanes
 * decode in any order: one GPU thread or SIMD lane per lane, two at a time
 * on a CPU core, or 8 to a vector with AVX-512 (lanes_decode_avx512). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "gmtf_codec.h"
#include "qlfc.h"
#include "qlfc_internal.h"
#include "qlfc_rc.h"
#include "entropy_lanes_dev.h"

/* GMTF_LANES_PROFILE (a measuring build, never the default): nanoseconds
 * of the encoder's phases summed over calls, read by gmtf_lanes_profile. */
#ifdef GMTF_LANES_PROFILE
#include <time.h>
static _Thread_local uint64_t prof_ns[6];
static uint64_t prof_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#define PROF_T(v) uint64_t v = prof_now()
#define PROF_ADD(i, t0) (prof_ns[i] += prof_now() - (t0))
void gmtf_lanes_profile(uint64_t out[6]);
void gmtf_lanes_profile(uint64_t out[6])
{
    memcpy(out, prof_ns, sizeof prof_ns);
}
#else
#define PROF_T(v) ((void)0)
#define PROF_ADD(i, t0) ((void)0)
#endif

/* ---- alphabets ----------------------------------------------------------- */

#define NSYM 16
#define RSYM_RETIRE 0
#define RSYM_OFF_FIRST 5  /* classes with a table-coded offset: 5..12 */
#define RSYM_BIG_FIRST 13 /* classes 13..15: 6 offset bits, the top 4 a table symbol */
#define LSYM_ESC 15
#define LBIG_MIN 8 /* escaped lengths have 8.. bits below their leading one */

static const uint8_t rbase[NSYM] = {0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 129, 193};
static const uint8_t lbase[LSYM_ESC] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192};
static const uint8_t lbits[LSYM_ESC] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};

static unsigned rsym_of(unsigned r) /* 1..255 */
{
    if (r <= 4)
        return r;
    unsigned s = 5;
    while (s + 1 < NSYM && rbase[s + 1] <= r)
        s++;
    return s;
}

static unsigned lsym_of(uint32_t len) /* len >= 1 */
{
    if (len >= 256)
        return LSYM_ESC;
    unsigned s = 0;
    while (s + 1 < LSYM_ESC && lbase[s + 1] <= len)
        s++;
    return s;
}

/* ---- contexts ------------------------------------------------------------ */

/* Per lane and byte: eR, the mean of the byte's rank values (rank symbol,
 * retire counted as 15) scaled by 16, halved toward each new value; hR,
 * its last rank value (0: none yet); eL, the same mean of its length
 * symbols. */
#define ER_INIT 48
#define NRCTX (12 * 3 * 3)     /* quantised eR x hR x previous rank */
#define NLCTX (12 * 5)         /* quantised eL x this run's rank */
#define TPS (NRCTX + NLCTX)    /* tables per set */
#define T_OFF (MAX_SETS * TPS) /* 11 offset tables, shared by all sets */
#define T_LBIG (T_OFF + 11)    /* bit count of escaped lengths */
#define NTABLES (T_LBIG + 1)
#define T_NONE NTABLES /* decoder only: one symbol of probability 1 */

/* The offset table of each rank symbol (T_NONE: no offset); classes 13..15
 * code the top 4 of their 6 offset bits there, the low 2 raw. */
static const uint16_t off_table[NSYM] = {
    T_NONE,    T_NONE,    T_NONE,    T_NONE,    T_NONE,    T_OFF + 0, T_OFF + 1, T_OFF + 2,
    T_OFF + 3, T_OFF + 4, T_OFF + 5, T_OFF + 6, T_OFF + 7, T_OFF + 8, T_OFF + 9, T_OFF + 10,
};

static const uint8_t e_q[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11};
static const uint8_t h_q[16] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
static const uint8_t p_q[16] = {2, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
static const uint8_t r_q[16] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};

static inline unsigned rank_value(unsigned rsym)
{
    return rsym == RSYM_RETIRE ? 15 : rsym;
}

static inline unsigned rctx_of(unsigned er, unsigned hr, unsigned prev)
{
    return (e_q[(er + 8) >> 4] * 3 + h_q[hr]) * 3 + p_q[prev];
}

static inline unsigned lctx_of(unsigned el, unsigned rsym)
{
    return NRCTX + e_q[(el + 8) >> 4] * 5 + r_q[rsym];
}

/* ---- tables -------------------------------------------------------------- */

static unsigned table_alphabet(unsigned t)
{
    if (t < T_OFF)
        return NSYM;
    if (t < T_OFF + 8)
        return 2u << ((t - T_OFF) >> 1); /* 2, 2, 4, 4, 8, 8, 16, 16 */
    if (t < T_LBIG)
        return NSYM; /* the top 4 of classes 13..15's 6 bits */
    return NSYM;
}

/* Counts are sent as their bit length e (0..25) and mant_bits(e) bits
 * below the leading one; both sides use the middle of the interval. */
static unsigned mant_bits(unsigned e)
{
    return e < 6 ? 0 : (e - 4) / 2;
}

static uint32_t count_value(unsigned e, uint32_t m)
{
    if (e == 0)
        return 0;
    unsigned mb = mant_bits(e), s = e - 1 - mb;
    uint32_t v = ((1u << mb) | m) << s;
    return s ? v | (1u << (s - 1)) : v;
}

/* 12-bit frequencies from weights: symbols of weight 0 get 0, the others
 * at least 1; the rounding rest goes to the first symbol of largest
 * weight. An empty table is uniform. cum gets a + 1 entries. */
static void normalise(const uint32_t *w, unsigned a, uint16_t *cum)
{
    uint64_t tot = 0;
    unsigned best = 0;
    for (unsigned s = 0; s < a; s++) {
        tot += w[s];
        if (w[s] > w[best])
            best = s;
    }
    uint32_t f[NSYM];
    if (tot == 0) {
        for (unsigned s = 0; s < a; s++)
            f[s] = QLFC_PROB_ONE / a;
    } else {
        uint32_t sum = 0;
        for (unsigned s = 0; s < a; s++) {
            uint32_t v = (uint32_t)((uint64_t)w[s] * QLFC_PROB_ONE / tot);
            f[s] = w[s] && !v ? 1 : v;
            sum += f[s];
        }
        /* sum <= 4096 + 15; the largest has at least 4096/16 */
        f[best] = f[best] + QLFC_PROB_ONE - sum;
    }
    cum[0] = 0;
    for (unsigned s = 0; s < a; s++)
        cum[s + 1] = (uint16_t)(cum[s] + f[s]);
    for (unsigned s = a + 1; s <= NSYM; s++) /* never reached by the search */
        cum[s] = QLFC_PROB_ONE;
}

/* ---- workspace ------------------------------------------------------------ */

#ifndef GROUP_BYTES
#define GROUP_BYTES 4096
#endif
#define MAX_GROUPS (GMTF_BLOCK_MAX / GROUP_BYTES + GMTF_QLFC_NLANES)
#ifndef ITERATIONS
#define ITERATIONS 3
#endif

typedef struct {
    uint8_t list[256]; /* the lane's bytes; the first `active` are live */
    uint8_t er[256], el[256], hr[256];
} lane_hist;

/* Decoding state of one lane. */
typedef struct {
    uint64_t x[2];            /* rANS states A and B */
    uint32_t pos, end, start; /* output position, end and start of the lane */
    const uint8_t *in, *in_end;
    uint32_t over;
    uint32_t active;
    uint32_t group_base;
    uint32_t gend, set;     /* end of the current group (output position), its set */
    uint32_t c, rtab, ltab; /* the next run: byte, rank table, length tables */
    uint32_t *cnt;          /* byte counts of the lane's quarter (lanes_dec_ws.qcnt) */
    uint32_t chk_next;      /* ranked: the next row's position (past the run), else ~0 */
    uint32_t chk_g;         /* its row */
    lane_hist h;
} lane_dec;

typedef struct {
    uint16_t cum[NTABLES + 1][NSYM + 2]; /* + T_NONE */
    uint64_t row4[NTABLES + 1];          /* decoder (AVX-512): cum[4], cum[8], cum[12], 4096 */
    uint8_t emq[NTABLES][NSYM];          /* decoder: count bit lengths (contexts) */
    uint8_t sel[MAX_GROUPS];
    lane_dec lane[GMTF_QLFC_NLANES];
    qbit hdr[QLFC_HDR_MODEL];
    uint32_t qcnt[4][256]; /* decoder: byte counts of lanes 8k..8k+7 (gmtf_bwt_counts) */
    uint32_t lcnt[GMTF_QLFC_NLANES][256]; /* ranked: each lane's own counts */
    uint32_t (*chk)[256];                 /* ranked: the rows (gmtf_lanes_decode_ranked) */
    uint32_t n;
} lanes_dec_ws;

typedef struct {
    lanes_dec_ws d; /* tables, selectors, header model (shared with decode) */
    uint32_t cnt[MAX_SETS][TPS][NSYM];
    uint32_t shared_cnt[NTABLES - T_OFF][NSYM];
    uint16_t cost[MAX_SETS][TPS][NSYM]; /* 1/256 bits */
    uint16_t log2_256[QLFC_PROB_ONE + 1];
    uint8_t init[GMTF_QLFC_NLANES][256];
    uint16_t ninit[GMTF_QLFC_NLANES];
    uint32_t nruns[GMTF_QLFC_NLANES + 1]; /* run index of each lane's first run */
    uint32_t ngroups[GMTF_QLFC_NLANES + 1];
    uint32_t gstart[MAX_GROUPS + 1];
    uint32_t lane_len[GMTF_QLFC_NLANES]; /* encoded bytes per lane */
    uint8_t best_sel[MAX_GROUPS];
    uint8_t emq[NTABLES][NSYM];  /* quantised counts: bit length, mantissa */
    uint64_t rcp[NTABLES][NSYM]; /* x / f by multiplication (see set_reciprocal) */
    uint8_t rcp_shift[NTABLES][NSYM];
    uint32_t mant[NTABLES][NSYM];
    unsigned nsets; /* table sets chosen */
} lanes_enc_fixed;

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

static size_t fixed_size(void)
{
    return ALIGN64(sizeof(lanes_enc_fixed));
}

/* Per block: ranks (1 byte per run), keys (2 x 2 bytes per run), lane
 * streams (scratch). */
static size_t scratch_cap(size_t n)
{
    return n + n / 4 + 65536;
}

size_t gmtf_lanes_workspace_size(size_t max_block)
{
    return fixed_size() + ALIGN64(max_block) + ALIGN64(4 * max_block) +
           ALIGN64(scratch_cap(max_block));
}

size_t gmtf_lanes_decode_workspace_size(void)
{
    return ALIGN64(sizeof(lanes_dec_ws));
}

/* ---- lane geometry ------------------------------------------------------- */

static inline size_t lane_seg(size_t n)
{
    return (n + GMTF_QLFC_NLANES - 1) / GMTF_QLFC_NLANES;
}

static inline void lane_range(size_t n, unsigned j, size_t *a, size_t *b)
{
    size_t seg = lane_seg(n);
    size_t lo = (size_t)j * seg;
    *a = lo < n ? lo : n;
    *b = lo + seg < n ? lo + seg : n;
}

static inline uint32_t lane_groups(size_t len)
{
    return (uint32_t)((len + GROUP_BYTES - 1) / GROUP_BYTES);
}

/* ---- encoder: transform and contexts ------------------------------------- */

static void hist_init(lane_hist *h)
{
    memset(h->er, ER_INIT, 256);
    memset(h->el, 0, 256);
    memset(h->hr, 0, 256);
}

static inline void hist_update(lane_hist *h, unsigned c, unsigned rsym, unsigned lsym)
{
    unsigned rv = rank_value(rsym);
    h->er[c] = (uint8_t)((h->er[c] + (rv << 4)) >> 1);
    h->el[c] = (uint8_t)((h->el[c] + (lsym << 4)) >> 1);
    h->hr[c] = (uint8_t)rv;
}

/* Keys of every run: (rank context << 4 | rank symbol) and (length
 * context << 4 | length symbol), and the first run of every group. */
static void lane_keys(const uint8_t *s, size_t a, size_t b, const uint8_t *rk, uint16_t *keys,
                      uint32_t run0, uint32_t *gstart, uint32_t (*shared)[NSYM])
{
    lane_hist h;
    hist_init(&h);
    unsigned prev = 1;
    size_t k = 0;
    uint32_t g = 0;
    for (size_t i = a; i < b; k++) {
        uint8_t c = s[i];
        size_t st = i;
        while (i < b && s[i] == c)
            i++;
        while ((st - a) >= (size_t)g * GROUP_BYTES)
            gstart[g++] = run0 + (uint32_t)k;
        unsigned rsym = rk[k] ? rsym_of(rk[k]) : RSYM_RETIRE;
        unsigned lsym = lsym_of((uint32_t)(i - st));
        if (rsym >= RSYM_BIG_FIRST)
            shared[rsym - RSYM_OFF_FIRST][(rk[k] - rbase[rsym]) >> 2]++;
        else if (rsym >= RSYM_OFF_FIRST)
            shared[rsym - RSYM_OFF_FIRST][rk[k] - rbase[rsym]]++;
        if (lsym == LSYM_ESC)
            shared[T_LBIG - T_OFF][31 - __builtin_clz((uint32_t)(i - st)) - LBIG_MIN]++;
        keys[2 * k] = (uint16_t)(rctx_of(h.er[c], h.hr[c], prev) << 4 | rsym);
        keys[2 * k + 1] = (uint16_t)(lctx_of(h.el[c], rsym) << 4 | lsym);
        hist_update(&h, c, rsym, lsym);
        prev = rsym;
    }
    /* groups with no run start (inside a long run) are empty */
    while (g < lane_groups(b - a))
        gstart[g++] = run0 + (uint32_t)k;
}

/* ---- encoder: selectors ---------------------------------------------------- */

/* log2(f) * 256 for f in 1..4096, integer only (deterministic). */
static void init_log2(uint16_t *lg)
{
    lg[0] = 0;
    for (uint32_t f = 1; f <= QLFC_PROB_ONE; f++) {
        unsigned k = 31 - (unsigned)__builtin_clz(f);
        uint64_t y = (uint64_t)f << (32 - k); /* [2^32, 2^33) */
        uint32_t frac = 0;
        for (int i = 0; i < 8; i++) {
            y = (y >> 16) * (y >> 16); /* square, back to 2^32 scale */
            frac <<= 1;
            if (y >= (1ull << 33)) {
                y >>= 1;
                frac |= 1;
            }
        }
        lg[f] = (uint16_t)(k * 256 + frac);
    }
}

static void set_costs(lanes_enc_fixed *w, unsigned s)
{
    for (unsigned t = 0; t < TPS; t++) {
        uint16_t cum[NSYM + 2];
        normalise(w->cnt[s][t], NSYM, cum);
        for (unsigned y = 0; y < NSYM; y++) {
            unsigned f = cum[y + 1] - cum[y];
            w->cost[s][t][y] = (uint16_t)(f ? 12 * 256 - w->log2_256[f] : 24 * 256);
        }
    }
}

static uint64_t group_cost(const lanes_enc_fixed *w, unsigned s, const uint16_t *keys, uint32_t r0,
                           uint32_t r1)
{
    const uint16_t *c = &w->cost[s][0][0];
    uint64_t sum = 0;
    for (uint32_t r = r0; r < r1; r++)
        sum += (uint32_t)c[keys[2 * r]] + c[keys[2 * r + 1]];
    return sum;
}

static void count_sets(lanes_enc_fixed *w, unsigned nsets, const uint16_t *keys, const uint8_t *sel,
                       uint32_t ng)
{
    memset(w->cnt, 0, sizeof(w->cnt[0]) * nsets);
    for (uint32_t g = 0; g < ng; g++) {
        uint32_t *c = &w->cnt[sel[g]][0][0];
        for (uint32_t r = w->gstart[g]; r < w->gstart[g + 1]; r++) {
            c[keys[2 * r]]++;
            c[keys[2 * r + 1]]++;
        }
    }
}

typedef struct {
    uint32_t g, key;
} group_key;

static int cmp_group_key(const void *x, const void *y)
{
    const group_key *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->g < b->g ? -1 : a->g > b->g;
}

/* Selectors for nsets sets: start from quantiles of the groups' mean rank
 * symbol, then a few rounds of (tables from the groups, each group to its
 * cheapest set). Returns the estimated code size in 1/256 bits. */
static uint64_t choose_selectors(lanes_enc_fixed *w, unsigned nsets, const uint16_t *keys,
                                 uint32_t ng, uint8_t *sel, group_key *tmp)
{
    for (uint32_t g = 0; g < ng; g++) {
        uint32_t r0 = w->gstart[g], r1 = w->gstart[g + 1], sum = 0;
        for (uint32_t r = r0; r < r1; r++)
            sum += keys[2 * r] & 15;
        tmp[g].g = g;
        tmp[g].key = r1 > r0 ? (uint32_t)(((uint64_t)sum << 8) / (r1 - r0)) : 0;
    }
    qsort(tmp, ng, sizeof *tmp, cmp_group_key);
    for (uint32_t i = 0; i < ng; i++)
        sel[tmp[i].g] = (uint8_t)((uint64_t)i * nsets / ng);
    uint64_t total = 0;
    for (int it = 0; it <= ITERATIONS; it++) {
        count_sets(w, nsets, keys, sel, ng);
        for (unsigned s = 0; s < nsets; s++)
            set_costs(w, s);
        total = 0;
        for (uint32_t g = 0; g < ng; g++) {
            uint32_t r0 = w->gstart[g], r1 = w->gstart[g + 1];
            uint64_t best = UINT64_MAX;
            unsigned bs = 0;
            if (it == ITERATIONS) {
                total += group_cost(w, sel[g], keys, r0, r1);
                continue;
            }
            for (unsigned s = 0; s < nsets; s++) {
                uint64_t c = group_cost(w, s, keys, r0, r1);
                if (c < best) {
                    best = c;
                    bs = s;
                }
            }
            sel[g] = (uint8_t)bs;
        }
    }
    count_sets(w, nsets, keys, sel, ng);
    return total;
}

/* ---- header: lists, selectors, tables, lane lengths ----------------------- */

/* Kind of a count for its tree: rank tables by symbol (0..15), length
 * tables by symbol (16..31), offset tables (32..42), escaped lengths (43); the
 * same plus 44 for sets after the first. */
static unsigned count_kind(unsigned t, unsigned y)
{
    if (t < T_OFF) {
        unsigned r = t % TPS;
        return (r < NRCTX ? y : 16 + y) + (t >= TPS ? 44 : 0);
    }
    return t < T_LBIG ? 32 + (t - T_OFF) : 43;
}

static unsigned empty_kind(unsigned t)
{
    if (t < T_OFF)
        return t % TPS < NRCTX ? 0 : 1;
    return t < T_LBIG ? 2 : 3;
}

/* The table coded just before t in the same set and part, whose counts
 * give the neighbour context; NTABLES when none. */
static unsigned count_neighbour_table(unsigned t)
{
    if (t < T_OFF) {
        unsigned r = t % TPS;
        if (t >= TPS) /* the same context in the previous set */
            return t - TPS;
        return r == 0 || r == NRCTX ? NTABLES : t - 1;
    }
    return NTABLES;
}

/* Quantises count v to (e, mantissa). */
static void quantise(uint32_t v, uint8_t *e, uint32_t *m)
{
    unsigned len = v ? 32 - (unsigned)__builtin_clz(v) : 0;
    unsigned mb = mant_bits(len);
    *e = (uint8_t)len;
    *m = mb ? (v >> (len - 1 - mb)) & ((1u << mb) - 1) : 0;
}

/* Tables in coding order: the used sets' rank and length tables, then the
 * shared ones. */
static unsigned table_at(unsigned i, unsigned nsets, int *ok)
{
    *ok = 1;
    if (i < nsets * TPS)
        return i;
    i -= nsets * TPS;
    if (i < NTABLES - T_OFF)
        return T_OFF + i;
    *ok = 0;
    return 0;
}

/* Division of any 64-bit x by f (1..4096) as a multiply (Granlund and
 * Montgomery): with l = ceil(log2 f) and m = floor(2^64 (2^l - f) / f) + 1,
 * t = (m x) >> 64, x / f = (t + ((x - t) >> min(l, 1))) >> max(l - 1, 0).
 * The encoder divides once per table step. */
static void set_reciprocal(lanes_enc_fixed *w, unsigned t, unsigned y, uint32_t f)
{
    unsigned l = 0;
    while ((1u << l) < f)
        l++;
    unsigned __int128 num = (unsigned __int128)((1ull << l) - f) << 64;
    w->rcp[t][y] = f ? (uint64_t)(num / f) + 1 : 0;
    w->rcp_shift[t][y] = (uint8_t)(l ? (l - 1) << 1 | 1 : 0);
}

static inline uint64_t div_by(uint64_t x, uint64_t m, unsigned sh)
{
    uint64_t t = (uint64_t)(((unsigned __int128)m * x) >> 64);
    return (t + ((x - t) >> (sh & 1))) >> (sh >> 1);
}

/* Quantises the counts of the tables in use and builds the encoder's
 * tables from them, as the decoder will. */
static void quantise_tables(lanes_enc_fixed *w, unsigned nsets)
{
    unsigned count = nsets * TPS + (NTABLES - T_OFF);
    for (unsigned i = 0; i < count; i++) {
        int ok;
        unsigned t = table_at(i, nsets, &ok);
        unsigned a = table_alphabet(t);
        const uint32_t *c = t < T_OFF ? w->cnt[t / TPS][t % TPS] : w->shared_cnt[t - T_OFF];
        uint32_t wgt[NSYM];
        for (unsigned y = 0; y < a; y++) {
            quantise(c[y], &w->emq[t][y], &w->mant[t][y]);
            wgt[y] = count_value(w->emq[t][y], w->mant[t][y]);
        }
        normalise(wgt, a, w->d.cum[t]);
        for (unsigned y = 0; y < a; y++)
            set_reciprocal(w, t, y, (uint32_t)(w->d.cum[t][y + 1] - w->d.cum[t][y]));
    }
}

static void put_tables(qrc_enc *e, qbit *m, lanes_enc_fixed *w, unsigned nsets)
{
    unsigned count = nsets * TPS + (NTABLES - T_OFF);
    for (unsigned i = 0; i < count; i++) {
        int ok;
        unsigned t = table_at(i, nsets, &ok);
        unsigned a = table_alphabet(t);
        const uint32_t *c = t < T_OFF ? w->cnt[t / TPS][t % TPS] : w->shared_cnt[t - T_OFF];
        int empty = 1;
        for (unsigned y = 0; y < a; y++)
            if (c[y])
                empty = 0;
        qbit_enc(e, &m[QLFC_HDR_EMPTY + empty_kind(t)], empty);
        unsigned nt = count_neighbour_table(t);
        for (unsigned y = 0; y < a && !empty; y++) {
            unsigned e_len = w->emq[t][y];
            unsigned nb = nt < NTABLES ? w->emq[nt][y] / 2 : QLFC_COUNT_NEIGH - 1;
            nb = nb < QLFC_COUNT_NEIGH - 1 ? nb : QLFC_COUNT_NEIGH - 2;
            if (nt == NTABLES)
                nb = QLFC_COUNT_NEIGH - 1;
            qbit *tree = &m[QLFC_HDR_COUNT + (count_kind(t, y) * QLFC_COUNT_NEIGH + nb) * 32];
            unsigned node = 1;
            for (int j = 4; j >= 0; j--) {
                int bit = (e_len >> j) & 1;
                qbit_enc(e, &tree[node], bit);
                node = node * 2 + (unsigned)bit;
            }
            if (mant_bits(e_len))
                qrc_encode_direct(e, w->mant[t][y], mant_bits(e_len));
        }
    }
}

/* Decoder side: counts into normalised tables (cum). */
static int get_tables(qrc_dec *d, qbit *m, lanes_dec_ws *w, unsigned nsets, uint8_t (*emq)[NSYM])
{
    unsigned count = nsets * TPS + (NTABLES - T_OFF);
    for (unsigned i = 0; i < count; i++) {
        int ok;
        unsigned t = table_at(i, nsets, &ok);
        unsigned a = table_alphabet(t);
        int empty = qbit_dec(d, &m[QLFC_HDR_EMPTY + empty_kind(t)]);
        unsigned nt = count_neighbour_table(t);
        uint32_t wgt[NSYM];
        for (unsigned y = 0; y < a; y++) {
            wgt[y] = 0;
            emq[t][y] = 0;
            if (empty)
                continue;
            unsigned nb = nt < NTABLES ? emq[nt][y] / 2 : QLFC_COUNT_NEIGH - 1;
            nb = nb < QLFC_COUNT_NEIGH - 1 ? nb : QLFC_COUNT_NEIGH - 2;
            if (nt == NTABLES)
                nb = QLFC_COUNT_NEIGH - 1;
            qbit *tree = &m[QLFC_HDR_COUNT + (count_kind(t, y) * QLFC_COUNT_NEIGH + nb) * 32];
            unsigned node = 1;
            for (int j = 0; j < 5; j++)
                node = node * 2 + (unsigned)qbit_dec(d, &tree[node]);
            unsigned e_len = node - 32;
            if (e_len > 25)
                return GMTF_E_CORRUPT;
            emq[t][y] = (uint8_t)e_len;
            uint32_t mm = mant_bits(e_len) ? qrc_decode_direct(d, mant_bits(e_len)) : 0;
            wgt[y] = count_value(e_len, mm);
        }
        normalise(wgt, a, w->cum[t]);
    }
    return 0;
}

static void put_list(qrc_enc *e, qbit *m, const uint8_t *ref, unsigned nref, const uint8_t *list,
                     unsigned d)
{
    uint8_t order[256];
    memcpy(order, ref, nref);
    qgamma_enc(e, &m[QLFC_HDR_LIST], d + 1);
    for (unsigned i = 0; i < d; i++) {
        unsigned p = 0;
        while (order[p] != list[i])
            p++;
        qgamma_enc(e, &m[QLFC_HDR_LIST + 32], p + 1);
        memmove(order + p, order + p + 1, nref - p - 1);
        nref--;
    }
}

/* Reference order for lane j's list: lane j - 1's list, then the other
 * bytes in increasing order. */
static unsigned list_reference(const uint8_t *prev, unsigned nprev, uint8_t *ref)
{
    uint8_t used[256] = {0};
    unsigned r = 0;
    for (unsigned i = 0; i < nprev; i++) {
        ref[r++] = prev[i];
        used[prev[i]] = 1;
    }
    for (unsigned c = 0; c < 256; c++)
        if (!used[c])
            ref[r++] = (uint8_t)c;
    return r;
}

static int get_list(qrc_dec *d, qbit *m, const uint8_t *ref, uint8_t *list, unsigned *dcount)
{
    uint8_t order[256];
    memcpy(order, ref, 256);
    uint32_t v = qgamma_dec(d, &m[QLFC_HDR_LIST], 9);
    if (v == 0 || v > 257)
        return GMTF_E_CORRUPT;
    unsigned cnt = v - 1, left = 256;
    for (unsigned i = 0; i < cnt; i++) {
        uint32_t p = qgamma_dec(d, &m[QLFC_HDR_LIST + 32], 8);
        if (p == 0 || p > left)
            return GMTF_E_CORRUPT;
        p--;
        list[i] = order[p];
        memmove(order + p, order + p + 1, left - p - 1);
        left--;
    }
    *dcount = cnt;
    return 0;
}

/* Selectors, lane by lane, move-to-front coded in unary. */
static void put_selectors(qrc_enc *e, qbit *m, const uint8_t *sel, uint32_t ng, unsigned nsets)
{
    uint8_t mtf[MAX_SETS];
    for (unsigned i = 0; i < MAX_SETS; i++)
        mtf[i] = (uint8_t)i;
    unsigned prev0 = 1;
    for (uint32_t g = 0; g < ng; g++) {
        unsigned p = 0;
        while (mtf[p] != sel[g])
            p++;
        for (unsigned i = 0; i < p; i++)
            qbit_enc(e, &m[QLFC_HDR_SEL + prev0 * 8 + i], 1);
        if (p + 1 < nsets)
            qbit_enc(e, &m[QLFC_HDR_SEL + prev0 * 8 + p], 0);
        memmove(mtf + 1, mtf, p);
        mtf[0] = sel[g];
        prev0 = p == 0;
    }
}

static void get_selectors(qrc_dec *d, qbit *m, uint8_t *sel, uint32_t ng, unsigned nsets)
{
    uint8_t mtf[MAX_SETS];
    for (unsigned i = 0; i < MAX_SETS; i++)
        mtf[i] = (uint8_t)i;
    unsigned prev0 = 1;
    for (uint32_t g = 0; g < ng; g++) {
        unsigned p = 0;
        while (p + 1 < nsets && qbit_dec(d, &m[QLFC_HDR_SEL + prev0 * 8 + p]))
            p++;
        uint8_t v = mtf[p];
        memmove(mtf + 1, mtf, p);
        mtf[0] = v;
        sel[g] = v;
        prev0 = p == 0;
    }
}

/* The whole header; returns its length or -1 when it does not fit. */
static long put_header(lanes_enc_fixed *w, unsigned nsets, const uint8_t *sel, uint32_t ng,
                       uint8_t *dst, size_t cap)
{
    qbit *m = w->d.hdr;
    qbit_init(m, QLFC_HDR_MODEL);
    qrc_enc e;
    qrc_enc_init(&e, dst, cap);
    uint8_t ref[256];
    unsigned nprev = 0;
    const uint8_t *prev = NULL;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        list_reference(prev, nprev, ref);
        put_list(&e, m, ref, 256, w->init[j], w->ninit[j]);
        prev = w->init[j];
        nprev = w->ninit[j];
    }
    qrc_encode_direct(&e, nsets - 1, 3);
    if (nsets > 1)
        put_selectors(&e, m, sel, ng, nsets);
    put_tables(&e, m, w, nsets);
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
        qgamma_enc(&e, &m[QLFC_HDR_LEN], (w->lane_len[j] - 16) / 4 + 1);
    return qrc_enc_finish(&e, dst);
}

/* ---- rANS ------------------------------------------------------------------ */

/* Two 64-bit states per lane, so that two dependency chains run at once:
 * state A codes the rank and length symbols, state B the offsets, raw bits
 * and escaped lengths. Both share the lane's stream of 32-bit words. A
 * state is renormalised once per group of steps, not per step: in
 * [2^32, 2^64) at every group boundary, a group takes at most 32 bits
 * (rank + length symbol; offset + length bits; ...), and the decoder reads
 * a word after a group when the state fell below 2^32. For the encoder a
 * group is one step of frequency F = (product of the steps' frequencies)
 * on a scale of 2^P (P = the steps' bits), so the interval of states it
 * maps back into [2^32, 2^64) is [K, 2^32 K) with K = F 2^(32 - P): the
 * encoder writes a word first when x >= 2^32 K. */
#define RANS_L (1ull << 32)
#define XA 0
#define XB 1

typedef struct {
    uint64_t x[2];
    uint8_t *p, *lo; /* words are written downwards from p, not below lo */
    int overflow;
} rans_enc;

/* A group's steps, gathered in decoding order and coded in reverse. */
typedef struct {
    unsigned n, bits;
    uint64_t freq;
    uint16_t f[4], c[4];     /* frequency and start; raw steps: f = 0, c = value */
    uint16_t tab[4], sym[4]; /* table and symbol of a table step (its reciprocal) */
    uint8_t nb[4];           /* bits of the step: 12 for a table symbol */
} rans_group;

static inline void group_init(rans_group *g)
{
    g->n = 0;
    g->bits = 0;
    g->freq = 1;
}

static inline void group_sym(rans_group *g, const uint16_t (*cums)[NSYM + 2], unsigned t,
                             unsigned y)
{
    const uint16_t *cum = cums[t];
    g->tab[g->n] = (uint16_t)t;
    g->sym[g->n] = (uint16_t)y;
    g->f[g->n] = (uint16_t)(cum[y + 1] - cum[y]);
    g->c[g->n] = cum[y];
    g->nb[g->n++] = QLFC_PROB_BITS;
    g->bits += QLFC_PROB_BITS;
    g->freq *= (uint64_t)(cum[y + 1] - cum[y]);
}

static inline void group_raw(rans_group *g, uint32_t v, unsigned nb)
{
    if (nb == 0)
        return;
    g->f[g->n] = 0;
    g->c[g->n] = (uint16_t)v;
    g->nb[g->n++] = (uint8_t)nb;
    g->bits += nb;
}

static inline void group_put(const lanes_enc_fixed *w, rans_enc *r, unsigned st,
                             const rans_group *g)
{
    uint64_t x = r->x[st];
    uint64_t k = g->freq << (32 - g->bits); /* bits <= 32 */
    if ((x >> 32) >= k) {
        if (r->p - r->lo < 4) {
            r->overflow = 1;
        } else {
            r->p -= 4;
            for (int q = 0; q < 4; q++)
                r->p[q] = (uint8_t)(x >> (8 * q));
        }
        x >>= 32;
    }
    for (unsigned i = g->n; i-- > 0;) {
        if (g->f[i]) {
            uint64_t q =
                div_by(x, w->rcp[g->tab[i]][g->sym[i]], w->rcp_shift[g->tab[i]][g->sym[i]]);
            x = (q << QLFC_PROB_BITS) + (x - q * g->f[i]) + g->c[i];
        } else
            x = x << g->nb[i] | g->c[i];
    }
    r->x[st] = x;
}

/* Encodes lane [a, b) of k runs backwards into [lo, hi); returns the
 * stream start or NULL when it does not fit. Decoding order of a run:
 * A: rank symbol, length symbol | B: offset, length bits; an escaped
 * length instead: B: offset | lbig symbol, up to 16 bits | the rest. */
static uint8_t *lane_encode(const lanes_enc_fixed *w, const uint8_t *s, size_t a, size_t b,
                            size_t k, const uint8_t *rk, const uint16_t *keys, const uint8_t *sel,
                            uint8_t *lo, uint8_t *hi)
{
    rans_enc r = {{RANS_L, RANS_L}, hi, lo, 0};
    const uint16_t(*cum)[NSYM + 2] = w->d.cum;
    size_t i = b;
    while (i > a) {
        uint8_t c = s[i - 1];
        size_t end = i;
        while (i > a && s[i - 1] == c)
            i--;
        k--;
        uint32_t len = (uint32_t)(end - i);
        unsigned set = sel[(i - a) / GROUP_BYTES];
        unsigned rkey = keys[2 * k], lkey = keys[2 * k + 1];
        unsigned rsym = rkey & 15, lsym = lkey & 15;
        rans_group ga, gb;
        group_init(&ga);
        group_sym(&ga, cum, set * TPS + (rkey >> 4), rsym);
        group_sym(&ga, cum, set * TPS + (lkey >> 4), lsym);
        group_init(&gb);
        if (rsym >= RSYM_BIG_FIRST) {
            group_sym(&gb, cum, T_OFF + rsym - RSYM_OFF_FIRST, (rk[k] - rbase[rsym]) >> 2);
            group_raw(&gb, (rk[k] - rbase[rsym]) & 3, 2);
        } else if (rsym >= RSYM_OFF_FIRST)
            group_sym(&gb, cum, T_OFF + rsym - RSYM_OFF_FIRST, rk[k] - rbase[rsym]);
        if (lsym == LSYM_ESC) {
            unsigned eb = 31 - (unsigned)__builtin_clz(len), lo_bits = eb < 16 ? eb : 16;
            uint32_t low = len & ((1u << eb) - 1);
            rans_group g2, g3;
            group_init(&g2);
            group_sym(&g2, cum, T_LBIG, eb - LBIG_MIN);
            group_raw(&g2, low >> (eb - lo_bits), lo_bits);
            group_init(&g3);
            group_raw(&g3, low & ((1u << (eb - lo_bits)) - 1), eb - lo_bits);
            group_put(w, &r, XB, &g3);
            group_put(w, &r, XB, &g2);
        } else {
            group_raw(&gb, len - lbase[lsym], lbits[lsym]);
        }
        group_put(w, &r, XB, &gb);
        group_put(w, &r, XA, &ga);
    }
    if (r.overflow || r.p - lo < 16)
        return NULL;
    r.p -= 16;
    for (int q = 0; q < 8; q++) {
        r.p[q] = (uint8_t)(r.x[XA] >> (8 * q));
        r.p[8 + q] = (uint8_t)(r.x[XB] >> (8 * q));
    }
    return r.p;
}

/* ---- encoder ----------------------------------------------------------------- */

/* Table sets tried: more than 2 paid less than 0.01% in tests (Linux tar),
 * for a fifth of the encoding time. */
#ifndef SET_CHOICES
#define SET_CHOICES 2
#define SET_LIST                                                                                   \
    {                                                                                              \
        1, 2                                                                                       \
    }
#endif
static const uint8_t set_choice[SET_CHOICES] = SET_LIST;

/* A device's statistics for the plan (gpu/gpu_lanes.h: choose_selectors
 * for 1 and 2 sets, done there with this arithmetic): NULL on the CPU. */
typedef struct {
    const gmtf_gpu_lanes_plan *p;
    const uint8_t *sel2;
} dev_stats;

/* After the lanes' ranks and keys (w, rk, keys: runs runs, ng groups):
 * the method rule (choose: big ranks or long runs on average: -EXDEV, take
 * method 3), the number of table sets (the smallest estimate of code plus
 * header; stop once more sets stop paying), selectors and tables. 0 or
 * negative. With ds, the rule's count, the selectors, counts and
 * estimates are the device's (rk and keys unused). */
static long plan(lanes_enc_fixed *w, const uint8_t *rk, const uint16_t *keys, uint8_t *scratch,
                 size_t scap, size_t n, uint32_t runs, uint32_t ng, int choose, const dev_stats *ds)
{
    w->nruns[GMTF_QLFC_NLANES] = runs;
    if (choose) {
        uint32_t big = 0;
        if (ds)
            big = ds->p->big;
        else
            for (uint32_t k = 0; k < runs; k++)
                big += rk[k] >= GMTF_QLFC_BIG_RANK;
        if ((uint64_t)big * GMTF_QLFC_BIG_DIV >= runs || (uint64_t)runs * GMTF_QLFC_SPARSE < n)
            return -EXDEV;
    }
    w->ngroups[GMTF_QLFC_NLANES] = ng;
    w->gstart[ng] = runs;

    group_key *tmp = (group_key *)scratch;
    uint8_t *sel = w->d.sel;
    uint64_t best = UINT64_MAX;
    unsigned best_sets = 1;
    PROF_T(t2);
    for (unsigned i = 0; i < SET_CHOICES; i++) {
        unsigned nsets = set_choice[i];
        if (nsets > 1 && ng < 2 * nsets)
            break;
        uint64_t est;
        if (ds) {
            est = ds->p->est[nsets - 1];
            if (nsets == 1) {
                memcpy(w->cnt[0], ds->p->cnt1, sizeof w->cnt[0]);
                memset(sel, 0, ng);
            } else {
                memcpy(w->cnt, ds->p->cnt2, sizeof ds->p->cnt2);
                memcpy(sel, ds->sel2, ng);
            }
        } else {
            est = choose_selectors(w, nsets, keys, ng, sel, tmp);
        }
        quantise_tables(w, nsets);
        for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
            w->lane_len[j] = 16;
        long h = put_header(w, nsets, sel, ng, scratch + 8 * (size_t)ng, scap - 8 * (size_t)ng);
        if (h < 0)
            return -ENOSPC;
        est += (uint64_t)h * 8 * 256;
        if (est >= best)
            break;
        best = est;
        best_sets = nsets;
        memcpy(w->best_sel, sel, ng);
    }
    PROF_ADD(2, t2);
    PROF_T(t3);
    w->nsets = best_sets;
    memcpy(sel, w->best_sel, ng);
    if (!ds)
        count_sets(w, best_sets, keys, sel, ng);
    else if (best_sets == 1)
        memcpy(w->cnt[0], ds->p->cnt1, sizeof w->cnt[0]);
    else
        memcpy(w->cnt, ds->p->cnt2, sizeof ds->p->cnt2);
    quantise_tables(w, best_sets);
    PROF_ADD(3, t3);
    return 0;
}

/* Lane j coded on the CPU into scratch[used..scap); its length or 0. */
static size_t code_lane(lanes_enc_fixed *w, const uint8_t *bwt, size_t n, unsigned j,
                        const uint8_t *rk, const uint16_t *keys, uint8_t *scratch, size_t used,
                        size_t scap)
{
    size_t a, b;
    lane_range(n, j, &a, &b);
    uint32_t r0 = w->nruns[j];
    uint8_t *p = lane_encode(w, bwt, a, b, w->nruns[j + 1] - r0, rk + r0, keys + 2 * (size_t)r0,
                             w->d.sel + w->ngroups[j], scratch + used, scratch + scap);
    if (!p)
        return 0;
    size_t len = (size_t)(scratch + scap - p);
    memmove(scratch + used, p, len);
    return len;
}

/* The payload: method byte, header length, header, the lanes' streams
 * (scratch[0..used), lane_len set). */
static long assemble(lanes_enc_fixed *w, const uint8_t *scratch, size_t used, uint8_t *dst,
                     size_t cap)
{
    if (cap < 5)
        return -ENOSPC;
    uint32_t ng = w->ngroups[GMTF_QLFC_NLANES];
    long h = put_header(w, w->nsets, w->d.sel, ng, dst + 5, cap - 5);
    if (h < 0 || (size_t)h + 5 + used > cap)
        return -ENOSPC;
    dst[0] = GMTF_QLFC_METHOD_LANES;
    for (int q = 0; q < 4; q++)
        dst[1 + q] = (uint8_t)((uint32_t)h >> (8 * q));
    memcpy(dst + 5 + h, scratch, used);
    return (long)(5 + (size_t)h + used);
}

static long lanes_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws,
                         int choose)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    lanes_enc_fixed *w = ws;
    uint8_t *rk = (uint8_t *)ws + fixed_size();
    uint16_t *keys = (uint16_t *)(rk + ALIGN64(n));
    uint8_t *scratch = (uint8_t *)keys + ALIGN64(4 * n);
    size_t scap = scratch_cap(n);
    init_log2(w->log2_256);
    memset(w->shared_cnt, 0, sizeof w->shared_cnt);

    uint32_t runs = 0, ng = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        size_t a, b;
        lane_range(n, j, &a, &b);
        w->nruns[j] = runs;
        w->ngroups[j] = ng;
        PROF_T(t0);
        size_t k = gmtf_qlfc_ranks(bwt, a, b, rk + runs, w->init[j], &w->ninit[j]);
        PROF_ADD(0, t0);
        PROF_T(t1);
        lane_keys(bwt, a, b, rk + runs, keys + 2 * (size_t)runs, runs, w->gstart + ng,
                  w->shared_cnt);
        PROF_ADD(1, t1);
        runs += (uint32_t)k;
        ng += lane_groups(b - a);
    }
    long rc = plan(w, rk, keys, scratch, scap, n, runs, ng, choose, NULL);
    if (rc < 0)
        return rc;

    /* lanes, one after another into the scratch */
    PROF_T(t4);
    size_t used = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        size_t len = code_lane(w, bwt, n, j, rk, keys, scratch, used, scap);
        if (!len)
            return -ENOSPC;
        used += len;
        w->lane_len[j] = (uint32_t)len;
    }
    PROF_ADD(4, t4);
    PROF_T(t5);
    long r = assemble(w, scratch, used, dst, cap);
    PROF_ADD(5, t5);
    return r;
}

long gmtf_lanes_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    return lanes_encode(bwt, n, dst, cap, ws, 0);
}

long gmtf_lanes_encode_or_defer(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    return lanes_encode(bwt, n, dst, cap, ws, 1);
}

/* ---- decoder ----------------------------------------------------------------- */

/* The end of a group of steps: a word when the state fell below 2^32.
 * Branch-free on the data. `safe`: at least 4 bytes are left (a constant
 * in the fast path, which checks once per run that 16 are). */
static inline __attribute__((always_inline)) void lane_renorm(lane_dec *l, unsigned st, int safe)
{
    uint64_t x = l->x[st];
    uint64_t need = x < RANS_L;
    if (safe || l->in_end - l->in >= 4) {
        uint32_t wd;
        memcpy(&wd, l->in, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        wd = __builtin_bswap32(wd);
#endif
        l->x[st] = need ? x << 32 | wd : x;
        l->in += 4 * need;
    } else if (need) {
        l->over++;
        l->x[st] = x << 32;
    }
}

/* The symbol whose interval holds the slot: the count of cum[1..15] <= slot
 * (cum[16] = 4096 never is; cum never decreases). */
static inline __attribute__((always_inline)) unsigned find_symbol(const uint16_t *cum,
                                                                  uint32_t slot)
{
#if defined(__SSE2__)
    __m128i sv = _mm_set1_epi16((short)slot);
    __m128i a = _mm_cmpgt_epi16(_mm_loadu_si128((const __m128i *)(cum + 1)), sv);
    __m128i b = _mm_cmpgt_epi16(_mm_loadu_si128((const __m128i *)(cum + 9)), sv);
    unsigned above = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(a, b));
    return (unsigned)__builtin_ctz(above); /* cum[1 + i] > slot from i = y on */
#else
    unsigned y = 0;
    for (unsigned i = 1; i < NSYM; i++)
        y += cum[i] <= slot;
    return y;
#endif
}

/* One table step (no renormalisation: see lane_renorm). Any 64-bit state
 * decodes without wrapping: f (x >> 12) + slot - cum < 2^64. */
static inline __attribute__((always_inline)) unsigned rans_get(lane_dec *l, unsigned st,
                                                               const uint16_t *cum)
{
    uint64_t x = l->x[st];
    uint32_t slot = (uint32_t)x & (QLFC_PROB_ONE - 1);
    unsigned y = find_symbol(cum, slot);
    l->x[st] = (uint64_t)(cum[y + 1] - cum[y]) * (x >> QLFC_PROB_BITS) + slot - cum[y];
    return y;
}

/* nb <= 16 raw bits; nb = 0 reads nothing and changes nothing. */
static inline __attribute__((always_inline)) uint32_t rans_get_raw(lane_dec *l, unsigned st,
                                                                   unsigned nb)
{
    uint32_t v = (uint32_t)l->x[st] & ((1u << nb) - 1);
    l->x[st] >>= nb;
    return v;
}

/* An escaped length (state B, after the run's offset): its bit count eb
 * by table, then its eb bits below the leading one raw, the high part
 * first. */
static inline __attribute__((always_inline)) uint32_t lane_escape(const lanes_dec_ws *w,
                                                                  lane_dec *l, int safe)
{
    lane_renorm(l, XB, safe);
    unsigned eb = LBIG_MIN + rans_get(l, XB, w->cum[T_LBIG]);
    unsigned lo_bits = eb < 16 ? eb : 16;
    uint32_t hi = rans_get_raw(l, XB, lo_bits);
    lane_renorm(l, XB, safe);
    uint32_t low = rans_get_raw(l, XB, eb - lo_bits);
    return 1u << eb | hi << (eb - lo_bits) | low;
}

/* A run of byte c at o: four 8-byte stores for a run of at most 32 where
 * 32 bytes of the lane are left (later runs write what is past the run),
 * else memset. */
static inline __attribute__((always_inline)) void lane_put_run(uint8_t *o, unsigned c, uint32_t len,
                                                               uint32_t room)
{
    if (len <= 32 && room >= 32) {
        uint64_t v = 0x0101010101010101ull * c;
        memcpy(o, &v, 8);
        memcpy(o + 8, &v, 8);
        memcpy(o + 16, &v, 8);
        memcpy(o + 24, &v, 8);
    } else {
        memset(o, (int)c, len);
    }
}

/* Ranked decoding: the rows at the 4 KiB boundaries that a run of len
 * bytes of c from pos reaches (pos < row <= pos + len), each the lane's
 * counts up to the boundary (the lanes before it are added when all are
 * done: lanes_ranked_finish). Out of line: a run reaches one in about 870
 * bytes. */
static __attribute__((noinline)) void lane_snap(const lanes_dec_ws *w, lane_dec *l, unsigned c,
                                                uint32_t len)
{
    uint32_t to = l->pos + len;
    while (l->chk_next <= to) {
        uint32_t part = l->chk_next - l->pos;
        l->cnt[c] += part;
        memcpy(w->chk[l->chk_g], l->cnt, sizeof w->chk[0]);
        l->cnt[c] -= part;
        if (l->chk_next >= w->n) {
            l->chk_next = UINT32_MAX;
            break;
        }
        l->chk_g++;
        uint64_t at = (uint64_t)l->chk_g << GMTF_BWT_RANK_SHIFT;
        at = at < w->n ? at : w->n;
        l->chk_next = at <= l->end ? (uint32_t)at : UINT32_MAX;
    }
}

static inline __attribute__((always_inline)) void lane_count(const lanes_dec_ws *w, lane_dec *l,
                                                             unsigned c, uint32_t len)
{
    if (__builtin_expect(l->pos + len >= l->chk_next, 0))
        lane_snap(w, l, c, len);
    l->pos += len;
    l->cnt[c] += len;
}

/* What the next run of a lane needs before its first symbol: its byte,
 * its rank table and the base of its length tables. Done at the end of
 * the previous run, off the next run's critical path: the byte c is the
 * list's second entry read before the run's reinsertion (r >= 1 puts it
 * in front; r = 0 leaves active = 0, which the next run rejects), and the
 * set is the group's, looked up again only when pos leaves the group (a
 * predictable branch, so nothing waits for the run's length). */
static inline __attribute__((always_inline)) void lane_next(const lanes_dec_ws *w, lane_dec *l,
                                                            unsigned prev, unsigned c)
{
    if (__builtin_expect(l->pos >= l->gend, 0)) {
        uint32_t g = (l->pos - l->start) / GROUP_BYTES;
        l->set = w->sel[l->group_base + g];
        l->gend = l->start + (g + 1) * GROUP_BYTES;
    }
    l->c = c;
    l->rtab = l->set * TPS + rctx_of(l->h.er[c], l->h.hr[c], prev);
    l->ltab = l->set * TPS + lctx_of(l->h.el[c], 0);
}

/* One run of a lane whose pos < end; safe: 16 bytes of words are left (a
 * run reads at most 4 words). */
static inline __attribute__((always_inline)) int lane_run(const lanes_dec_ws *w, lane_dec *l,
                                                          uint8_t *out, int safe)
{
    if (l->active == 0)
        return GMTF_E_CORRUPT;
    unsigned c = l->c, cn = l->h.list[1];
    const uint16_t(*cum)[NSYM + 2] = w->cum;
    unsigned rsym = rans_get(l, XA, cum[l->rtab]);
    unsigned lsym = rans_get(l, XA, cum[l->ltab + r_q[rsym]]);
    lane_renorm(l, XA, safe);
    /* the offset: a table symbol (the one-symbol table T_NONE, which
     * changes nothing, for classes without one) or, rarely, raw bits */
    unsigned r = rbase[rsym] + rans_get(l, XB, cum[off_table[rsym]]);
    if (__builtin_expect(rsym >= RSYM_BIG_FIRST, 0))
        r = rbase[rsym] + ((r - rbase[rsym]) << 2 | rans_get_raw(l, XB, 2));
    unsigned retire = rsym == RSYM_RETIRE;
    r = retire ? l->active - 1 : r;
    if (r >= l->active)
        return GMTF_E_CORRUPT;
    uint32_t len;
    if (__builtin_expect(lsym == LSYM_ESC, 0)) {
        len = lane_escape(w, l, safe);
    } else {
        len = lbase[lsym] + rans_get_raw(l, XB, lbits[lsym]);
    }
    lane_renorm(l, XB, safe);
    if (len > l->end - l->pos)
        return GMTF_E_CORRUPT;
    qlfc_put_run(out + l->pos, c, len, l->end - l->pos); /* past the run: this lane's */
    lane_count(w, l, c, len);
    qlfc_list_reinsert(l->h.list, r, c);
    l->active -= retire;
    hist_update(&l->h, c, rsym, lsym);
    if (l->pos < l->end)
        lane_next(w, l, rsym, cn);
    return 0;
}

static int lanes_read_header(lanes_dec_ws *w, const uint8_t *src, size_t len, size_t n,
                             size_t *lanes_at)
{
    if (len < 5)
        return GMTF_E_CORRUPT;
    size_t h = (size_t)src[1] | (size_t)src[2] << 8 | (size_t)src[3] << 16 | (size_t)src[4] << 24;
    if (h > len - 5)
        return GMTF_E_CORRUPT;
    qbit *m = w->hdr;
    qbit_init(m, QLFC_HDR_MODEL);
    qrc_dec d;
    qrc_dec_init(&d, src + 5, h);
    uint8_t ref[256];
    const uint8_t *prev = NULL;
    unsigned nprev = 0;
    uint32_t ng = 0;
    memset(w->qcnt, 0, sizeof w->qcnt);
    if (w->chk)
        memset(w->lcnt, 0, sizeof w->lcnt);
    w->n = (uint32_t)n;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        lane_dec *l = &w->lane[j];
        size_t a, b;
        lane_range(n, j, &a, &b);
        l->cnt = w->chk ? w->lcnt[j] : w->qcnt[j / (GMTF_QLFC_NLANES / 4)];
        /* ranked: the first row past a, if the lane reaches it */
        l->chk_g = (uint32_t)(a >> GMTF_BWT_RANK_SHIFT) + 1;
        size_t at = (size_t)l->chk_g << GMTF_BWT_RANK_SHIFT;
        at = at < n ? at : n;
        l->chk_next = w->chk && a < b && at <= b ? (uint32_t)at : UINT32_MAX;
        list_reference(prev, nprev, ref);
        unsigned cnt;
        int err = get_list(&d, m, ref, l->h.list, &cnt);
        if (err)
            return err;
        if ((cnt == 0) != (a == b))
            return GMTF_E_CORRUPT;
        l->active = cnt;
        l->pos = l->start = (uint32_t)a;
        l->end = (uint32_t)b;
        l->group_base = ng;
        hist_init(&l->h);
        ng += lane_groups(b - a);
        prev = l->h.list;
        nprev = cnt;
    }
    unsigned nsets = qrc_decode_direct(&d, 3) + 1;
    if (nsets > 1)
        get_selectors(&d, m, w->sel, ng, nsets);
    else
        memset(w->sel, 0, ng);
    int err = get_tables(&d, m, w, nsets, w->emq);
    if (err)
        return err;
    w->cum[T_NONE][0] = 0;
    for (unsigned y = 1; y <= NSYM; y++)
        w->cum[T_NONE][y] = QLFC_PROB_ONE;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
        if (w->lane[j].active) {
            w->lane[j].gend = w->lane[j].start;
            lane_next(w, &w->lane[j], 1, w->lane[j].h.list[0]);
        }
    size_t at = 5 + h, left = len - at;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        uint32_t v = qgamma_dec(&d, &m[QLFC_HDR_LEN], 25);
        if (v == 0)
            return GMTF_E_CORRUPT;
        size_t ll = 16 + 4 * (size_t)(v - 1);
        if (ll > left)
            return GMTF_E_CORRUPT;
        lane_dec *l = &w->lane[j];
        const uint8_t *p = src + at;
        for (unsigned st = 0; st < 2; st++) {
            l->x[st] = 0;
            for (int q = 7; q >= 0; q--)
                l->x[st] = l->x[st] << 8 | p[8 * st + (unsigned)q];
        }
        l->in = p + 16;
        l->in_end = p + ll;
        l->over = 0;
        at += ll;
        left -= ll;
    }
    if (left != 0 || !qrc_dec_done(&d))
        return GMTF_E_CORRUPT;
    *lanes_at = at;
    return 0;
}

/* Runs of BATCH live lanes at once, each phase for the lanes in turn, so
 * that the core works on independent rANS chains together (a run's own
 * steps depend on each other); 2 measured faster than 1, 4 or 8 (register
 * pressure). Every lane has 16 bytes of words left. */
#define BATCH 2
static inline __attribute__((always_inline)) int lanes_run_batch(const lanes_dec_ws *w,
                                                                 lane_dec *const *lb, uint8_t *out)
{
    const uint16_t(*cum)[NSYM + 2] = w->cum;
    unsigned rsym[BATCH], lsym[BATCH], r[BATCH];
    uint32_t len[BATCH];
    unsigned cn[BATCH];
    unsigned bad = 0;
#pragma GCC unroll 2
    for (unsigned k = 0; k < BATCH; k++) {
        lane_dec *l = lb[k];
        cn[k] = l->h.list[1];
        rsym[k] = rans_get(l, XA, cum[l->rtab]);
        lsym[k] = rans_get(l, XA, cum[l->ltab + r_q[rsym[k]]]);
        lane_renorm(l, XA, 1);
    }
#pragma GCC unroll 2
    for (unsigned k = 0; k < BATCH; k++) {
        lane_dec *l = lb[k];
        unsigned off = rans_get(l, XB, cum[off_table[rsym[k]]]);
        if (__builtin_expect(rsym[k] >= RSYM_BIG_FIRST, 0))
            off = off << 2 | rans_get_raw(l, XB, 2);
        unsigned rr = rbase[rsym[k]] + off;
        r[k] = rsym[k] == RSYM_RETIRE ? l->active - 1 : rr;
        bad |= (r[k] >= l->active) | (l->active == 0);
        if (__builtin_expect(lsym[k] == LSYM_ESC, 0)) {
            len[k] = lane_escape(w, l, 1);
        } else {
            len[k] = lbase[lsym[k]] + rans_get_raw(l, XB, lbits[lsym[k]]);
        }
        lane_renorm(l, XB, 1);
        bad |= len[k] > l->end - l->pos;
    }
    if (bad)
        return GMTF_E_CORRUPT;
#pragma GCC unroll 2
    for (unsigned k = 0; k < BATCH; k++) {
        lane_dec *l = lb[k];
        unsigned c = l->c;
        lane_put_run(out + l->pos, c, len[k], l->end - l->pos);
        lane_count(w, l, c, len[k]);
        qlfc_list_reinsert(l->h.list, r[k], c);
        l->active -= rsym[k] == RSYM_RETIRE;
        hist_update(&l->h, c, rsym[k], lsym[k]);
        if (l->pos < l->end)
            lane_next(w, l, rsym[k], cn[k]);
    }
    return 0;
}

static inline int lane_fits_batch(const lane_dec *l)
{
    return l->pos < l->end && l->in_end - l->in >= 16;
}

/* One run of a live lane (pos < end), by the fast path where 16 bytes of
 * words are left. */
static inline int lane_run_one(const lanes_dec_ws *w, lane_dec *l, uint8_t *out)
{
    if (__builtin_expect(l->in_end - l->in >= 16, 1))
        return lane_run(w, l, out, 1);
    return lane_run(w, l, out, 0);
}

/* ---- AVX-512 decoder: the same lanes, 8 to a vector ---------------------- */

/* Where the CPU has AVX-512 (F, DQ, VL, BW), gmtf_lanes_decode runs the
 * lanes' rANS steps 8 lanes to a vector, four vectors a round: every live
 * lane's rank and length symbols (state A), offset and length bits (state
 * B) and renormalisations, each table step by two gathers (vec_get_q);
 * then each lane's run (the write, its list, its histories, the next run's
 * tables) in scalar code, as lanes_run_batch does. Per lane the same
 * arithmetic in the same order, so the same bytes and the same errors. A
 * lane leaves the vectors when it ends or has fewer than 16 bytes of words
 * left, and the last live lane takes its slot; below LANES_VEC_MIN live
 * lanes the scalar loop finishes them all. Escaped lengths are finished in
 * scalar code. GMTF_LANES_SIMD=0 in the environment, or
 * gmtf_lanes_decode_isa(..., 0), takes the scalar path (same output). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(GMTF_LANES_NO_SIMD)
#define LANES_AVX512 1
#include <immintrin.h>
#define AVX512_FN __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))

/* The live lanes' vector state, by slot (lanes_decode_avx512). */
typedef struct {
    uint64_t xa[GMTF_QLFC_NLANES], xb[GMTF_QLFC_NLANES];
    uint32_t in[GMTF_QLFC_NLANES]; /* the next word's offset from src */
    uint32_t rtab[GMTF_QLFC_NLANES], ltab[GMTF_QLFC_NLANES];
    uint32_t rsym[GMTF_QLFC_NLANES], lsym[GMTF_QLFC_NLANES];
    uint32_t off[GMTF_QLFC_NLANES], len[GMTF_QLFC_NLANES];
} lanes_vec;

/* rans_get for 8 lanes (tables tab, states x), in two 8-byte gathers (the
 * lanes' tables differ, so the table search is not one compare as in
 * find_symbol): row4 gives the quarter k of the row that
 * holds the symbol (the number of cum[4], cum[8], cum[12] <= slot), the
 * quarter cum[4k..4k+3] the symbol 4k + j and both bounds (the upper one
 * from row4 when j = 3). */
static inline __attribute__((always_inline)) AVX512_FN __m256i vec_get_q(__m512i *x, __m256i tab,
                                                                         const long long *cumq,
                                                                         const long long *row4)
{
    const __m512i ones = _mm512_set1_epi64(0x0001000100010001ll);
    const __m512i m16 = _mm512_set1_epi64(0xFFFF), three = _mm512_set1_epi64(3);
    __m512i slot = _mm512_and_si512(*x, _mm512_set1_epi64(4095));
    __m512i s4 = _mm512_mullo_epi64(slot, ones);
    __m512i r4 = _mm512_i32gather_epi64(tab, row4, 8);
    __m512i k = _mm512_srli_epi64(
        _mm512_mullo_epi64(_mm512_maskz_mov_epi16(_mm512_cmple_epu16_mask(r4, s4), ones), ones),
        48);
    __m256i base = _mm256_add_epi32(_mm256_mullo_epi32(tab, _mm256_set1_epi32((NSYM + 2) * 2)),
                                    _mm256_slli_epi32(_mm512_cvtepi64_epi32(k), 3));
    __m512i q = _mm512_i32gather_epi64(base, cumq, 1);
    __m512i j = _mm512_sub_epi64(
        _mm512_srli_epi64(
            _mm512_mullo_epi64(_mm512_maskz_mov_epi16(_mm512_cmple_epu16_mask(q, s4), ones), ones),
            48),
        _mm512_set1_epi64(1));
    __m512i lo = _mm512_and_si512(_mm512_srlv_epi64(q, _mm512_slli_epi64(j, 4)), m16);
    __m512i hi = _mm512_and_si512(
        _mm512_srlv_epi64(q, _mm512_slli_epi64(_mm512_add_epi64(j, _mm512_set1_epi64(1)), 4)), m16);
    __m512i hk = _mm512_and_si512(_mm512_srlv_epi64(r4, _mm512_slli_epi64(k, 4)), m16);
    hi = _mm512_mask_mov_epi64(hi, _mm512_cmpeq_epi64_mask(j, three), hk);
    __m512i q2 =
        _mm512_mullo_epi64(_mm512_sub_epi64(hi, lo), _mm512_srli_epi64(*x, QLFC_PROB_BITS));
    *x = _mm512_add_epi64(q2, _mm512_sub_epi64(slot, lo));
    return _mm512_cvtepi64_epi32(_mm512_add_epi64(_mm512_slli_epi64(k, 2), j));
}

/* lane_renorm for the lanes of mask k (each has 16 bytes of words). */
static inline __attribute__((always_inline)) AVX512_FN void vec_renorm(__m512i *x, __m256i *in,
                                                                       const int *src, __mmask8 k)
{
    __mmask8 need = _mm512_mask_cmplt_epu64_mask(k, *x, _mm512_set1_epi64((long long)RANS_L));
    __m256i wd = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), need, *in, src, 1);
    *x = _mm512_mask_or_epi64(*x, need, _mm512_slli_epi64(*x, 32), _mm512_cvtepu32_epi64(wd));
    *in = _mm256_mask_add_epi32(*in, need, *in, _mm256_set1_epi32(4));
}

/* The symbol steps of one round for the lanes in slots 0..live-1; the
 * other slots' tables are valid table numbers, their results unused. */
#define VEC_GET(x, t) vec_get_q(x, t, (const long long *)(const void *)cumb, row4)
#define NG (GMTF_QLFC_NLANES / 8)
static inline __attribute__((always_inline)) AVX512_FN void
vec_round(lanes_vec *v, unsigned live, const int *cumb, const long long *row4, const int *src)
{
    static const uint32_t rq[NSYM] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    static const uint32_t ot[NSYM] = {
        T_NONE,    T_NONE,    T_NONE,    T_NONE,    T_NONE,    T_OFF + 0, T_OFF + 1, T_OFF + 2,
        T_OFF + 3, T_OFF + 4, T_OFF + 5, T_OFF + 6, T_OFF + 7, T_OFF + 8, T_OFF + 9, T_OFF + 10,
    };
    static const uint32_t lb[NSYM] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 0};
    static const uint32_t ln[NSYM] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 0};
    __m512i xa[NG], xb[NG];
    __m256i in[NG], rs[NG], ls[NG], off[NG];
    __mmask8 k[NG];
#pragma GCC unroll 4
    for (unsigned g = 0; g < NG; g++) {
        if (8 * g >= live)
            break;
        k[g] = (__mmask8)(live >= 8 * g + 8 ? 0xFF : live > 8 * g ? (1u << (live - 8 * g)) - 1 : 0);
        xa[g] = _mm512_loadu_si512(v->xa + 8 * g);
        xb[g] = _mm512_loadu_si512(v->xb + 8 * g);
        in[g] = _mm256_loadu_si256((const __m256i *)(v->in + 8 * g));
        rs[g] = VEC_GET(&xa[g], _mm256_loadu_si256((const __m256i *)(v->rtab + 8 * g)));
    }
#pragma GCC unroll 4
    for (unsigned g = 0; g < NG; g++) {
        if (8 * g >= live)
            break;
        __m512i rs5 = _mm512_castsi256_si512(rs[g]);
        __m256i lt = _mm256_add_epi32(
            _mm256_loadu_si256((const __m256i *)(v->ltab + 8 * g)),
            _mm512_castsi512_si256(_mm512_permutexvar_epi32(rs5, _mm512_loadu_si512(rq))));
        ls[g] = VEC_GET(&xa[g], lt);
        off[g] = VEC_GET(
            &xb[g], _mm512_castsi512_si256(_mm512_permutexvar_epi32(rs5, _mm512_loadu_si512(ot))));
    }
#pragma GCC unroll 4
    for (unsigned g = 0; g < NG; g++) {
        if (8 * g >= live)
            break;
        vec_renorm(&xa[g], &in[g], src, k[g]);
        __mmask8 big = _mm256_mask_cmpge_epu32_mask(k[g], rs[g], _mm256_set1_epi32(RSYM_BIG_FIRST));
        __m256i raw = _mm256_and_si256(_mm512_cvtepi64_epi32(xb[g]), _mm256_set1_epi32(3));
        off[g] = _mm256_mask_or_epi32(off[g], big, _mm256_slli_epi32(off[g], 2), raw);
        xb[g] = _mm512_mask_srli_epi64(xb[g], big, xb[g], 2);
        __mmask8 esc = _mm256_mask_cmpeq_epu32_mask(k[g], ls[g], _mm256_set1_epi32(LSYM_ESC));
        __m512i ls5 = _mm512_castsi256_si512(ls[g]);
        __m256i nb = _mm512_castsi512_si256(_mm512_permutexvar_epi32(ls5, _mm512_loadu_si512(ln)));
        __m256i lbv = _mm512_castsi512_si256(_mm512_permutexvar_epi32(ls5, _mm512_loadu_si512(lb)));
        __m256i msk =
            _mm256_sub_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), nb), _mm256_set1_epi32(1));
        __m256i len = _mm256_add_epi32(lbv, _mm256_and_si256(_mm512_cvtepi64_epi32(xb[g]), msk));
        xb[g] = _mm512_mask_srlv_epi64(xb[g], (__mmask8)~esc, xb[g], _mm512_cvtepu32_epi64(nb));
        vec_renorm(&xb[g], &in[g], src, (__mmask8)(k[g] & ~esc));
        _mm512_mask_storeu_epi64(v->xa + 8 * g, k[g], xa[g]);
        _mm512_mask_storeu_epi64(v->xb + 8 * g, k[g], xb[g]);
        _mm256_mask_storeu_epi32(v->in + 8 * g, k[g], in[g]);
        _mm256_storeu_si256((__m256i *)(v->rsym + 8 * g), rs[g]);
        _mm256_storeu_si256((__m256i *)(v->lsym + 8 * g), ls[g]);
        _mm256_storeu_si256((__m256i *)(v->off + 8 * g), off[g]);
        _mm256_storeu_si256((__m256i *)(v->len + 8 * g), len);
    }
}

/* Lanes in the vectors until fewer than LANES_VEC_MIN are live; the rest
 * (and every lane that left) stay for the scalar loop, their states
 * written back. 0 or GMTF_E_CORRUPT. 12: two vectors, at most half of
 * the second idle, else the scalar loop's pairs of live lanes, which
 * decode a run faster than a vector round with a third of its slots idle
 * (docs/entropy.md, "Method 2's AVX-512 decoder"). */
#ifndef LANES_VEC_MIN
#define LANES_VEC_MIN 12
#endif
static AVX512_FN int lanes_decode_avx512(lanes_dec_ws *w, const uint8_t *src, uint8_t *out)
{
    /* slots 0..live-1 hold the live lanes (lane[] their numbers): a lane
     * that leaves gives its slot to the last one, so the vectors stay full
     * while the lanes end at different times */
    lanes_vec v;
    memset(&v, 0, sizeof v);
    uint8_t lane[GMTF_QLFC_NLANES];
    unsigned live = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        lane_dec *l = &w->lane[j];
        if (!lane_fits_batch(l))
            continue;
        v.xa[live] = l->x[XA];
        v.xb[live] = l->x[XB];
        v.in[live] = (uint32_t)(l->in - src);
        v.rtab[live] = l->rtab;
        v.ltab[live] = l->ltab;
        lane[live++] = (uint8_t)j;
    }
    const int *cumb = (const int *)(const void *)w->cum, *srcb = (const int *)(const void *)src;
    for (unsigned t = 0; t <= NTABLES; t++)
        w->row4[t] = (uint64_t)w->cum[t][4] | (uint64_t)w->cum[t][8] << 16 |
                     (uint64_t)w->cum[t][12] << 32 | (uint64_t)QLFC_PROB_ONE << 48;
    const long long *row4 = (const long long *)(const void *)w->row4;
    while (live >= LANES_VEC_MIN) {
        vec_round(&v, live, cumb, row4, srcb);
        /* backwards, so that a slot given away has had its run */
        for (unsigned i = live; i-- > 0;) {
            lane_dec *l = &w->lane[lane[i]];
            unsigned rs = v.rsym[i], ls = v.lsym[i];
            uint32_t len = v.len[i];
            if (__builtin_expect(ls == LSYM_ESC, 0)) {
                l->x[XB] = v.xb[i];
                l->in = src + v.in[i];
                len = lane_escape(w, l, 1);
                lane_renorm(l, XB, 1);
                v.xb[i] = l->x[XB];
                v.in[i] = (uint32_t)(l->in - src);
            }
            unsigned retire = rs == RSYM_RETIRE;
            unsigned r = retire ? l->active - 1 : rbase[rs] + v.off[i];
            if ((r >= l->active) | (l->active == 0) | (len > l->end - l->pos))
                return GMTF_E_CORRUPT;
            unsigned c = l->c, cn = l->h.list[1];
            lane_put_run(out + l->pos, c, len, l->end - l->pos);
            lane_count(w, l, c, len);
            qlfc_list_reinsert(l->h.list, r, c);
            l->active -= retire;
            hist_update(&l->h, c, rs, ls);
            if (l->pos < l->end)
                lane_next(w, l, rs, cn);
            if (l->pos < l->end && l->in_end - (src + v.in[i]) >= 16) {
                v.rtab[i] = l->rtab;
                v.ltab[i] = l->ltab;
            } else { /* out of the vectors, its state back in *l */
                l->x[XA] = v.xa[i];
                l->x[XB] = v.xb[i];
                l->in = src + v.in[i];
                unsigned last = --live;
                v.xa[i] = v.xa[last];
                v.xb[i] = v.xb[last];
                v.in[i] = v.in[last];
                v.rtab[i] = v.rtab[last];
                v.ltab[i] = v.ltab[last];
                lane[i] = lane[last];
            }
        }
    }
    /* the rest to the scalar loop */
    for (unsigned i = 0; i < live; i++) {
        lane_dec *l = &w->lane[lane[i]];
        l->x[XA] = v.xa[i];
        l->x[XB] = v.xb[i];
        l->in = src + v.in[i];
    }
    return 0;
}

static int lanes_simd_ok(void)
{
    static _Atomic int ok = -1; /* every thread computes the same */
    int v = atomic_load_explicit(&ok, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("GMTF_LANES_SIMD");
        __builtin_cpu_init();
        v = (!e || strcmp(e, "0") != 0) && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512bw");
        atomic_store_explicit(&ok, v, memory_order_relaxed);
    }
    return v;
}
#endif

int gmtf_lanes_decode_counted(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws,
                              gmtf_bwt_counts *counts)
{
    int rc = gmtf_lanes_decode(src, len, out, n, ws);
    if (rc == 0 && counts) {
        const lanes_dec_ws *w = ws;
        for (unsigned k = 0; k < 4; k++) {
            size_t a, b;
            lane_range(n, k * (GMTF_QLFC_NLANES / 4), &a, &b);
            counts->start[k] = (uint32_t)a;
        }
        counts->start[4] = (uint32_t)n;
        memcpy(counts->cnt, w->qcnt, sizeof counts->cnt);
    }
    return rc;
}

int gmtf_lanes_decode_simd(void)
{
#ifdef LANES_AVX512
    return lanes_simd_ok();
#else
    return 0;
#endif
}

int gmtf_lanes_decode(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws)
{
    return gmtf_lanes_decode_isa(src, len, out, n, ws, 1);
}

static int lanes_decode(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws, int simd,
                        uint32_t (*chk)[256])
{
    if (len < 1 || src[0] != GMTF_QLFC_METHOD_LANES || n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    lanes_dec_ws *w = ws;
    w->chk = chk;
    size_t at;
    int err = lanes_read_header(w, src, len, n, &at);
    if (err)
        return err;
#ifdef LANES_AVX512
    if (simd && lanes_simd_ok()) {
        err = lanes_decode_avx512(w, src, out);
        if (err)
            return err;
    }
#else
    (void)simd;
#endif
    /* Round robin, one run per live lane, the live lanes BATCH at a time
     * (the lanes' dependency chains overlap in the core). Lanes that end
     * leave the list, so the last lanes (the AVX-512 decoder's tail) are
     * still paired. */
    lane_dec *lv[GMTF_QLFC_NLANES];
    unsigned live = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
        if (w->lane[j].pos < w->lane[j].end)
            lv[live++] = &w->lane[j];
    while (live) {
        unsigned ended = 0, i = 0;
        for (; i + BATCH <= live; i += BATCH) {
            int fits = 1;
            for (unsigned k = 0; k < BATCH; k++)
                fits &= lane_fits_batch(lv[i + k]);
            if (fits) {
                err = lanes_run_batch(w, lv + i, out);
                if (err)
                    return err;
                for (unsigned k = 0; k < BATCH; k++)
                    ended += lv[i + k]->pos == lv[i + k]->end;
                continue;
            }
            for (unsigned k = 0; k < BATCH; k++) {
                err = lane_run_one(w, lv[i + k], out);
                if (err)
                    return err;
                ended += lv[i + k]->pos == lv[i + k]->end;
            }
        }
        for (; i < live; i++) {
            err = lane_run_one(w, lv[i], out);
            if (err)
                return err;
            ended += lv[i]->pos == lv[i]->end;
        }
        if (ended) {
            unsigned m = 0;
            for (i = 0; i < live; i++)
                if (lv[i]->pos < lv[i]->end)
                    lv[m++] = lv[i];
            live = m;
        }
    }
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        const lane_dec *l = &w->lane[j];
        if (l->active != 0 || l->x[XA] != RANS_L || l->x[XB] != RANS_L || l->in != l->in_end ||
            l->over)
            return GMTF_E_CORRUPT;
    }
    return 0;
}

int gmtf_lanes_decode_isa(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws,
                          int simd)
{
    return lanes_decode(src, len, out, n, ws, simd, NULL);
}

/* The rows of each lane hold its own counts: add those of the lanes
 * before it (row 0 is zero). */
static void lanes_ranked_finish(const lanes_dec_ws *w, size_t n, uint32_t (*chk)[256])
{
    uint32_t pre[256];
    memset(pre, 0, sizeof pre);
    memset(chk[0], 0, sizeof chk[0]);
    size_t ng = (n + (1u << GMTF_BWT_RANK_SHIFT) - 1) >> GMTF_BWT_RANK_SHIFT;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        size_t a, b;
        lane_range(n, j, &a, &b);
        if (a == b)
            continue;
        size_t g0 = (a >> GMTF_BWT_RANK_SHIFT) + 1, g1 = b == n ? ng : b >> GMTF_BWT_RANK_SHIFT;
        for (size_t g = g0; g <= g1; g++)
            for (unsigned v = 0; v < 256; v++)
                chk[g][v] += pre[v];
        for (unsigned v = 0; v < 256; v++)
            pre[v] += w->lcnt[j][v];
    }
}

int gmtf_lanes_decode_ranked(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws,
                             uint32_t (*chk)[256])
{
    int rc = lanes_decode(src, len, out, n, ws, 1, chk);
    ((lanes_dec_ws *)ws)->chk = NULL;
    if (rc == 0)
        lanes_ranked_finish(ws, n, chk);
    return rc;
}

/* ---- for device decoders (entropy_lanes_dev.h) ------------------------------ */

_Static_assert(NTABLES + 1 == GMTF_GPU_LANES_NTABLES && TPS == GMTF_GPU_LANES_TPS &&
                   GROUP_BYTES == GMTF_GPU_LANES_GROUP && MAX_GROUPS == GMTF_GPU_LANES_MAX_GROUPS &&
                   GMTF_QLFC_NLANES == GMTF_GPU_LANES && NSYM + 2 == GMTF_GPU_LANES_CUM,
               "gpu/gpu_lanes.h's layout is this file's");

int gmtf_lanes_dev_setup(const uint8_t *src, size_t len, size_t n, void *ws, uint64_t in_base,
                         gmtf_gpu_lane *lanes, uint16_t *cum, uint8_t *sel)
{
    if (len < 1 || src[0] != GMTF_QLFC_METHOD_LANES || n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    lanes_dec_ws *w = ws;
    w->chk = NULL;
    size_t at;
    int err = lanes_read_header(w, src, len, n, &at);
    if (err)
        return err;
    memcpy(cum, w->cum, sizeof w->cum);
    memcpy(sel, w->sel, sizeof w->sel);
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        const lane_dec *l = &w->lane[j];
        gmtf_gpu_lane *g = &lanes[j];
        g->x[0] = l->x[0];
        g->x[1] = l->x[1];
        g->in = in_base + (uint64_t)(l->in - src);
        g->in_end = in_base + (uint64_t)(l->in_end - src);
        g->pos = l->pos;
        g->end = l->end;
        g->start = l->start;
        g->active = l->active;
        g->group_base = l->group_base;
        int live = l->pos < l->end; /* an empty lane's next run is stale */
        g->c = live ? l->c : 0;
        g->rtab = live ? l->rtab : 0;
        g->ltab = live ? l->ltab : 0;
        memcpy(g->list, l->h.list, 256);
        memcpy(g->er, l->h.er, 256);
        memcpy(g->el, l->h.el, 256);
        memcpy(g->hr, l->h.hr, 256);
    }
    return 0;
}

/* ---- for device encoders (entropy_lanes_dev.h) ------------------------------ */

_Static_assert(NTABLES - T_OFF == GMTF_GPU_LANES_NSHARED, "gpu/gpu_lanes.h's shared tables");

/* Lane j of the device's scan o, its runs from runs and its groups from ng
 * in the block: its counts checked, its group starts, initial list and
 * shared counts taken into w; *k and *lg its runs and groups. 0 or -EIO. */
static int lane_take(lanes_enc_fixed *w, const gmtf_gpu_lanes_scan_out *o, size_t n, unsigned j,
                     uint32_t runs, uint32_t ng, uint32_t *k, uint32_t *lg)
{
    size_t a, b;
    lane_range(n, j, &a, &b);
    *k = o->runs[j];
    *lg = lane_groups(b - a);
    if (*k > b - a || (*k == 0) != (a == b) || o->ninit[j] > 256 || o->ninit[j] > *k)
        return -EIO;
    w->nruns[j] = runs;
    w->ngroups[j] = ng;
    uint32_t prev = 0;
    for (uint32_t g = 0; g < *lg; g++) {
        uint32_t v = o->gstart[ng + g];
        if (v < prev || v > *k)
            return -EIO;
        w->gstart[ng + g] = runs + v;
        prev = v;
    }
    memcpy(w->init[j], o->init + 256 * (size_t)j, o->ninit[j]);
    w->ninit[j] = o->ninit[j];
    const uint32_t *sh = o->shared + (size_t)j * GMTF_GPU_LANES_NSHARED * NSYM;
    for (unsigned t = 0; t < NTABLES - T_OFF; t++)
        for (unsigned y = 0; y < NSYM; y++)
            w->shared_cnt[t][y] += sh[t * NSYM + y];
    return 0;
}

/* The plan's selectors (ng, the rest 0) and tables (T_NONE's as a coder
 * wants it) out to the caller. */
static void plan_out(lanes_enc_fixed *w, uint32_t ng, uint8_t *sel, uint16_t *cum)
{
    memcpy(sel, w->d.sel, ng);
    memset(sel + ng, 0, MAX_GROUPS - ng);
    w->d.cum[T_NONE][0] = 0;
    for (unsigned y = 1; y < NSYM + 2; y++)
        w->d.cum[T_NONE][y] = QLFC_PROB_ONE;
    memcpy(cum, w->d.cum, sizeof w->d.cum);
}

long gmtf_lanes_enc_dev_plan(const uint8_t *bwt, size_t n, void *ws,
                             const gmtf_gpu_lanes_scan_out *o, int choose, uint8_t *sel,
                             uint16_t *cum)
{
    (void)bwt;
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    lanes_enc_fixed *w = ws;
    uint8_t *rk = (uint8_t *)ws + fixed_size();
    uint16_t *keys = (uint16_t *)(rk + ALIGN64(n));
    uint8_t *scratch = (uint8_t *)keys + ALIGN64(4 * n);
    init_log2(w->log2_256);
    memset(w->shared_cnt, 0, sizeof w->shared_cnt);
    /* the lanes' ranks and keys one after another, as lanes_encode has
     * them; what the device gave is checked as it is copied */
    uint32_t runs = 0, ng = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        uint32_t k, lg;
        if (lane_take(w, o, n, j, runs, ng, &k, &lg))
            return -EIO;
        memcpy(rk + runs, o->rk + runs, k); /* the block's lanes back to back */
        memcpy(keys + 2 * (size_t)runs, o->keys + 2 * (size_t)runs, 4 * (size_t)k);
        for (uint32_t r = runs; r < runs + k; r++) {
            unsigned rs = rk[r] ? rsym_of(rk[r]) : RSYM_RETIRE;
            if ((keys[2 * r] & 15) != rs || keys[2 * r] >> 4 >= NRCTX ||
                keys[2 * r + 1] >> 4 < NRCTX || keys[2 * r + 1] >> 4 >= TPS)
                return -EIO;
        }
        runs += k;
        ng += lg;
    }
    long rc = plan(w, rk, keys, scratch, scratch_cap(n), n, runs, ng, choose, NULL);
    if (rc < 0)
        return rc;
    plan_out(w, ng, sel, cum);
    return 0;
}

long gmtf_lanes_enc_dev_plan_stats(size_t n, void *ws, const gmtf_gpu_lanes_scan_out *o,
                                   const gmtf_gpu_lanes_plan *p, const uint8_t *sel2, int choose,
                                   uint8_t *sel, uint16_t *cum)
{
    if (n == 0 || n > GMTF_BLOCK_MAX || !p || !sel2)
        return -EINVAL;
    if (SET_CHOICES != GMTF_GPU_LANES_PLAN_SETS || set_choice[0] != 1 ||
        set_choice[SET_CHOICES - 1] != 2)
        return -EIO; /* not what the device planned: the caller's way */
    lanes_enc_fixed *w = ws;
    uint8_t *rk = (uint8_t *)ws + fixed_size();
    uint8_t *scratch = rk + ALIGN64(n) + ALIGN64(4 * n);
    memset(w->shared_cnt, 0, sizeof w->shared_cnt);
    /* the lanes' small outputs checked as gmtf_lanes_enc_dev_plan checks
     * them (the runs' keys were checked on the device: p->bad) */
    uint32_t runs = 0, ng = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        uint32_t k, lg;
        if (lane_take(w, o, n, j, runs, ng, &k, &lg))
            return -EIO;
        runs += k;
        ng += lg;
    }
    if (p->bad || p->runs != runs || p->ng != ng || p->big > runs)
        return -EIO;
    dev_stats ds = {p, sel2};
    long rc = plan(w, NULL, NULL, scratch, scratch_cap(n), n, runs, ng, choose, &ds);
    if (rc < 0)
        return rc;
    plan_out(w, ng, sel, cum);
    return 0;
}

long gmtf_lanes_enc_dev_finish(const uint8_t *bwt, size_t n, void *ws, const uint8_t *streams,
                               const uint32_t *len, uint8_t *dst, size_t cap)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    lanes_enc_fixed *w = ws;
    uint8_t *rk = (uint8_t *)ws + fixed_size();
    uint16_t *keys = (uint16_t *)(rk + ALIGN64(n));
    uint8_t *scratch = (uint8_t *)keys + ALIGN64(4 * n);
    size_t scap = scratch_cap(n), used = 0, at = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        size_t l = len[j];
        if (l == 0) { /* the device's room was too small: here */
            l = code_lane(w, bwt, n, j, rk, keys, scratch, used, scap);
            if (!l)
                return -ENOSPC;
        } else {
            if (l < 16 || l % 4 || l > scap - used)
                return l > scap - used && l % 4 == 0 ? -ENOSPC : -EIO;
            memcpy(scratch + used, streams + at, l);
            at += l;
        }
        used += l;
        w->lane_len[j] = (uint32_t)l;
    }
    return assemble(w, scratch, used, dst, cap);
}

/* What the finish needs of a plan, kept apart from the workspace so that a
 * worker can plan other blocks before this one's lanes come back. */
typedef struct {
    uint32_t nsets;
    uint32_t nruns[GMTF_QLFC_NLANES + 1];
    uint32_t ngroups[GMTF_QLFC_NLANES + 1];
    uint16_t ninit[GMTF_QLFC_NLANES];
    uint8_t init[GMTF_QLFC_NLANES][256];
    uint8_t sel[MAX_GROUPS];
    uint32_t cnt[MAX_SETS][TPS][NSYM];
    uint32_t shared_cnt[NTABLES - T_OFF][NSYM];
} lanes_plan_rec;

size_t gmtf_lanes_enc_dev_rec_size(void)
{
    return sizeof(lanes_plan_rec);
}

void gmtf_lanes_enc_dev_save(const void *ws, void *rec)
{
    const lanes_enc_fixed *w = ws;
    lanes_plan_rec *r = rec;
    r->nsets = w->nsets;
    memcpy(r->nruns, w->nruns, sizeof r->nruns);
    memcpy(r->ngroups, w->ngroups, sizeof r->ngroups);
    memcpy(r->ninit, w->ninit, sizeof r->ninit);
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
        memcpy(r->init[j], w->init[j], w->ninit[j]);
    memcpy(r->sel, w->d.sel, w->ngroups[GMTF_QLFC_NLANES]);
    memcpy(r->cnt, w->cnt, (size_t)w->nsets * sizeof r->cnt[0]);
    memcpy(r->shared_cnt, w->shared_cnt, sizeof r->shared_cnt);
}

long gmtf_lanes_enc_dev_finish_rec(size_t n, void *ws, const void *rec, const uint8_t *streams,
                                   const uint32_t *len, uint8_t *dst, size_t cap)
{
    const lanes_plan_rec *r = rec;
    if (n == 0 || n > GMTF_BLOCK_MAX || r->nsets < 1 || r->nsets > MAX_SETS ||
        r->ngroups[GMTF_QLFC_NLANES] > MAX_GROUPS)
        return -EINVAL;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
        if (len[j] == 0)
            return -EAGAIN; /* the device could not code a lane: the caller's way */
    lanes_enc_fixed *w = ws;
    uint8_t *rk = (uint8_t *)ws + fixed_size();
    uint8_t *scratch = rk + ALIGN64(n) + ALIGN64(4 * n);
    w->nsets = r->nsets;
    memcpy(w->nruns, r->nruns, sizeof r->nruns);
    memcpy(w->ngroups, r->ngroups, sizeof r->ngroups);
    memcpy(w->ninit, r->ninit, sizeof r->ninit);
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++)
        memcpy(w->init[j], r->init[j], r->ninit[j] <= 256 ? r->ninit[j] : 256);
    memcpy(w->d.sel, r->sel, r->ngroups[GMTF_QLFC_NLANES]);
    memcpy(w->cnt, r->cnt, (size_t)r->nsets * sizeof r->cnt[0]);
    memcpy(w->shared_cnt, r->shared_cnt, sizeof r->shared_cnt);
    quantise_tables(w, r->nsets);
    size_t scap = scratch_cap(n), used = 0;
    for (unsigned j = 0; j < GMTF_QLFC_NLANES; j++) {
        size_t l = len[j];
        if (l < 16 || l % 4 || l > scap - used)
            return l > scap - used && l % 4 == 0 ? -ENOSPC : -EIO;
        memcpy(scratch + used, streams + used, l);
        used += l;
        w->lane_len[j] = (uint32_t)l;
    }
    return assemble(w, scratch, used, dst, cap);
}
