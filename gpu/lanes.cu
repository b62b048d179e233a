/* Lane-parallel rANS run decoding on the GPU (gpu_lanes.h): one CTA of 32
 * threads a block, one thread a lane; each thread runs its lane's runs to
 * the end exactly as codec/entropy_lanes.c's lane_run does (the model's
 * constants are repeated below; gpu_lanes.h's layout macros let the codec
 * check the layout at compile time). Version 4 (lane_decode4, the default)
 * stages the block's tables, selectors and the lanes' lists and histories
 * in shared memory and cuts the instructions a run's path takes; versions
 * 2 (lane_decode2, GMTF_GPU_LANES_V=2) and 1 (lane_decode,
 * GMTF_GPU_LANES_V=1) are kept for comparison.
 *
 * The same source builds for the CPU with GMTF_LANES_EMU: tests/gpu runs
 * the device code path without a GPU. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GMTF_LANES_EMU
#include "lanes_emu_names.h"
#define GMTF_HD
#define GMTF_CONST static const
#else
#include <cuda_runtime.h>
#include "dev_alloc.cuh"
#include "gpu.h"
#define GMTF_HD __device__
#define GMTF_CONST __constant__
#endif

#include "gpu_lanes.h"

/* ---- the model (codec/entropy_lanes.c) ----------------------------------- */

#define NSYM 16
#define RSYM_RETIRE 0
#define RSYM_BIG_FIRST 13
#define LSYM_ESC 15
#define LBIG_MIN 8
#define NRCTX (12 * 3 * 3)
#define NLCTX (12 * 5)
#define TPS (NRCTX + NLCTX)
#define MAX_SETS 8
#define T_OFF (MAX_SETS * TPS)
#define T_LBIG (T_OFF + 11)
#define T_NONE (T_LBIG + 1)
#define NTAB (T_NONE + 1) /* tables a block, the one-symbol table last */
#define GROUP_BYTES 4096
#define MAX_GROUPS ((16u << 20) / GROUP_BYTES + GMTF_GPU_LANES)
#define PROB_BITS 12
#define RANS_L (1ull << 32)
#define XA 0
#define XB 1

GMTF_CONST uint8_t c_rbase[NSYM] = {0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 129, 193};
GMTF_CONST uint8_t c_lbase[LSYM_ESC] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192};
GMTF_CONST uint8_t c_lbits[LSYM_ESC] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};
GMTF_CONST uint16_t c_off_table[NSYM] = {
    T_NONE,    T_NONE,    T_NONE,    T_NONE,    T_NONE,    T_OFF + 0, T_OFF + 1, T_OFF + 2,
    T_OFF + 3, T_OFF + 4, T_OFF + 5, T_OFF + 6, T_OFF + 7, T_OFF + 8, T_OFF + 9, T_OFF + 10,
};
GMTF_CONST uint8_t c_e_q[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11};
GMTF_CONST uint8_t c_h_q[16] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
GMTF_CONST uint8_t c_p_q[16] = {2, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
GMTF_CONST uint8_t c_r_q[16] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};

static_assert(NTAB == GMTF_GPU_LANES_NTABLES && TPS == GMTF_GPU_LANES_TPS &&
                  GROUP_BYTES == GMTF_GPU_LANES_GROUP && MAX_GROUPS == GMTF_GPU_LANES_MAX_GROUPS,
              "gpu_lanes.h's layout");
static_assert(offsetof(gmtf_gpu_lane, list) % 4 == 0 &&
                  offsetof(gmtf_gpu_lane, er) == offsetof(gmtf_gpu_lane, list) + 256 &&
                  offsetof(gmtf_gpu_lane, el) == offsetof(gmtf_gpu_lane, list) + 512 &&
                  offsetof(gmtf_gpu_lane, hr) == offsetof(gmtf_gpu_lane, list) + 768,
              "a lane's list and histories: 1024 aligned bytes");

/* ---- one lane --------------------------------------------------------------- */

struct lane_regs {
    uint64_t x[2];
    uint64_t in, in_end;
    uint32_t pos, end, start, active, group_base, c, rtab, ltab, over;
};

static GMTF_HD inline void renorm(lane_regs &l, int st, const uint8_t *in)
{
    uint64_t x = l.x[st];
    uint64_t need = x < RANS_L;
    if (l.in_end - l.in >= 4) {
        const uint8_t *p = in + l.in;
        uint32_t wd =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        l.x[st] = need ? x << 32 | wd : x;
        l.in += 4 * need;
    } else if (need) {
        l.over++;
        l.x[st] = x << 32;
    }
}

static GMTF_HD inline unsigned get_sym(lane_regs &l, int st, const uint16_t *cum)
{
    uint64_t x = l.x[st];
    uint32_t slot = (uint32_t)x & ((1u << PROB_BITS) - 1);
    unsigned y = 0;
    for (unsigned i = 1; i < NSYM; i++)
        y += cum[i] <= slot;
    l.x[st] = (uint64_t)(cum[y + 1] - cum[y]) * (x >> PROB_BITS) + slot - cum[y];
    return y;
}

static GMTF_HD inline uint32_t get_raw(lane_regs &l, int st, unsigned nb)
{
    uint32_t v = (uint32_t)l.x[st] & ((1u << nb) - 1);
    l.x[st] >>= nb;
    return v;
}

/* A lane's byte list and histories, side by side (shared memory on the
 * device): list 0..255, er 256.., el 512.., hr 768.. */
#define S_LIST 0
#define S_ER 256
#define S_EL 512
#define S_HR 768

static GMTF_HD inline void next_run(lane_regs &l, const uint8_t *s, const uint8_t *sel,
                                    unsigned prev)
{
    unsigned c = s[S_LIST];
    uint32_t gi = l.group_base + (l.pos - l.start) / GROUP_BYTES;
    unsigned set = sel[gi < MAX_GROUPS ? gi : MAX_GROUPS - 1] & (MAX_SETS - 1);
    l.c = c;
    l.rtab = set * TPS + (c_e_q[((s[S_ER + c] + 8) >> 4) & 15] * 3 + c_h_q[s[S_HR + c] & 15]) * 3 +
             c_p_q[prev & 15];
    l.ltab = set * TPS + NRCTX + c_e_q[((s[S_EL + c] + 8) >> 4) & 15] * 5;
}

/* Runs lane g to its end, its list and histories in s (a copy of g's);
 * 0, or 1 when it broke a rule. */
static GMTF_HD int lane_decode(const gmtf_gpu_lane *g, uint8_t *s, const uint16_t *cum,
                               const uint8_t *sel, const uint8_t *in, uint8_t *out)
{
    lane_regs l;
    l.x[0] = g->x[0];
    l.x[1] = g->x[1];
    l.in = g->in;
    l.in_end = g->in_end;
    l.pos = g->pos;
    l.end = g->end;
    l.start = g->start;
    l.active = g->active;
    l.group_base = g->group_base;
    l.c = g->c;
    l.rtab = g->rtab;
    l.ltab = g->ltab;
    l.over = 0;
    while (l.pos < l.end) {
        if (l.active == 0)
            return 1;
        unsigned c = l.c;
        unsigned rsym = get_sym(l, XA, cum + (size_t)l.rtab * GMTF_GPU_LANES_CUM);
        unsigned lsym = get_sym(l, XA, cum + (size_t)(l.ltab + c_r_q[rsym]) * GMTF_GPU_LANES_CUM);
        renorm(l, XA, in);
        unsigned r =
            c_rbase[rsym] + get_sym(l, XB, cum + (size_t)c_off_table[rsym] * GMTF_GPU_LANES_CUM);
        if (rsym >= RSYM_BIG_FIRST)
            r = c_rbase[rsym] + ((r - c_rbase[rsym]) << 2 | get_raw(l, XB, 2));
        unsigned retire = rsym == RSYM_RETIRE;
        r = retire ? l.active - 1 : r;
        if (r >= l.active)
            return 1;
        uint32_t len;
        if (lsym == LSYM_ESC) {
            renorm(l, XB, in);
            unsigned eb = LBIG_MIN + get_sym(l, XB, cum + (size_t)T_LBIG * GMTF_GPU_LANES_CUM);
            unsigned lo_bits = eb < 16 ? eb : 16;
            uint32_t hi = get_raw(l, XB, lo_bits);
            renorm(l, XB, in);
            uint32_t low = get_raw(l, XB, eb - lo_bits);
            len = 1u << eb | hi << (eb - lo_bits) | low;
        } else {
            len = c_lbase[lsym] + get_raw(l, XB, c_lbits[lsym]);
        }
        renorm(l, XB, in);
        if (len > l.end - l.pos)
            return 1;
        for (uint32_t i = 0; i < len; i++)
            out[l.pos + i] = (uint8_t)c;
        l.pos += len;
        for (unsigned i = 0; i < r; i++)
            s[S_LIST + i] = s[S_LIST + i + 1];
        s[S_LIST + r] = (uint8_t)c;
        l.active -= retire;
        unsigned rv = retire ? 15 : rsym;
        s[S_ER + c] = (uint8_t)((s[S_ER + c] + (rv << 4)) >> 1);
        s[S_EL + c] = (uint8_t)((s[S_EL + c] + (lsym << 4)) >> 1);
        s[S_HR + c] = (uint8_t)rv;
        if (l.pos < l.end)
            next_run(l, s, sel, rsym);
    }
    return l.active != 0 || l.x[XA] != RANS_L || l.x[XB] != RANS_L || l.in != l.in_end || l.over;
}

/* ---- version 2: the block's tables in shared memory, the chain shortened --
 * The dependent steps of a run are what a lane waits on (one lane is one
 * serial chain; a batch has only 32 lanes an SM): so the block's tables
 * (cum[0..15] of each in a 32-byte row, cum[16] beside), its selectors and
 * its lanes' lists sit in shared memory, loaded once by the whole CTA; a
 * symbol is found by 15 compares on two 16-byte loads (no dependent loads
 * in the search, its bounds picked by selects); the model's small tables
 * are constants packed into 64-bit words (no divergent constant loads);
 * the next stream word is loaded ahead; the selector is looked up once a
 * group; the list moves a word at a time and the next run's byte comes
 * from the word already loaded; long runs are written 4 and 16 bytes at a
 * time. Same results as lane_decode above, rule for rule. */

/* The model's small tables packed (static_asserts below check them
 * against the arrays above). */
#define PK_RBASE_LO 0x0907050403020100ull
#define PK_RBASE_HI 0xC18141312119110Dull
#define PK_LBASE_LO 0x100C080604030201ull
#define PK_LBASE_HI 0x00C0806040302018ull
#define PK_LBITS 0x0665544332211000ull
#define PK_EQ 0xBBAA998876543210ull
#define PK_RQ 0x4444444444433210ull

static GMTF_HD inline unsigned pk8(uint64_t lo, uint64_t hi, unsigned i)
{
    return (unsigned)((i < 8 ? lo : hi) >> (8 * (i & 7))) & 255;
}

static GMTF_HD inline unsigned pk4(uint64_t v, unsigned i)
{
    return (unsigned)(v >> (4 * (i & 15))) & 15;
}

static GMTF_HD inline unsigned hq(unsigned v)
{
    v &= 15;
    return v < 2 ? v : 2;
}

static GMTF_HD inline unsigned pq(unsigned v)
{
    v &= 15;
    return v == 1 ? 0 : v == 2 ? 1 : 2;
}

static GMTF_HD inline unsigned offtab(unsigned rsym)
{
    return rsym < 5 ? T_NONE : T_OFF + rsym - 5;
}

#ifdef GMTF_LANES_EMU
static constexpr uint64_t pack_bytes(const uint8_t *a, unsigned n, unsigned from)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8 && from + i < n; i++)
        v |= (uint64_t)a[from + i] << (8 * i);
    return v;
}
static constexpr uint64_t pack_nibbles(const uint8_t *a, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)a[i] << (4 * i);
    return v;
}
static constexpr uint8_t k_rbase[NSYM] = {0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 129, 193};
static constexpr uint8_t k_lbase[LSYM_ESC] = {1,  2,  3,  4,  6,  8,   12, 16,
                                              24, 32, 48, 64, 96, 128, 192};
static constexpr uint8_t k_lbits[LSYM_ESC] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};
static constexpr uint8_t k_eq[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11};
static constexpr uint8_t k_rq[16] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
static_assert(pack_bytes(k_rbase, NSYM, 0) == PK_RBASE_LO &&
                  pack_bytes(k_rbase, NSYM, 8) == PK_RBASE_HI &&
                  pack_bytes(k_lbase, LSYM_ESC, 0) == PK_LBASE_LO &&
                  pack_bytes(k_lbase, LSYM_ESC, 8) == PK_LBASE_HI &&
                  pack_nibbles(k_lbits, LSYM_ESC) == PK_LBITS && pack_nibbles(k_eq, 16) == PK_EQ &&
                  pack_nibbles(k_rq, 16) == PK_RQ,
              "packed model tables");
#endif

/* The kernel: version 4, or GMTF_GPU_LANES_V=1 / 2 (GMTF_GPU_LANES_V1=1:
 * the first), for timings and comparisons. */
static int lanes_version(void)
{
    const char *e = getenv("GMTF_GPU_LANES_V1");
    if (e && *e == '1')
        return 1;
    e = getenv("GMTF_GPU_LANES_V");
    return e && (*e == '1' || *e == '2') && !e[1] ? *e - '0' : 4;
}

/* GMTF_GPU_LANES_EXACT=1: every table takes sym2's exact count (to time
 * the fast one against it). */
static int exact_count(void)
{
    const char *e = getenv("GMTF_GPU_LANES_EXACT");
    return e && *e == '1';
}

/* A block's staged tables: table t's cum[0..15] at tab[8 t ..], its
 * cum[16] at top[t]; the block's selectors. */
struct blk_tabs {
    const uint32_t *tab;
    const uint16_t *top;
    const uint8_t *sel;
    const uint8_t *wide;  /* table t has a cum[0..15] of 0x8000 or more (sym2's exact count) */
    const uint32_t *pair; /* version 4: symbol y of table t at 16 t + y: cum[y] | f << 16 */
    const uint8_t *eq;    /* version 4: 256 bytes e_q[(v + 8) >> 4] * 9, then 256 * 5 */
};

/* Staging layout (bytes; each part 16-aligned): tables, tops, selectors,
 * then the 32 lanes' rows (list, er, el, hr; 1040 bytes a row so that 8
 * neighbouring lanes' words fall in different banks). */
#define SH_TAB 0
#define SH_TOP (SH_TAB + NTAB * 32)
#define SH_SEL (SH_TOP + ((NTAB * 2 + 15) & ~15))
#define SH_WIDE (SH_SEL + ((MAX_GROUPS + 15) & ~15))
#define SH_ROWS (SH_WIDE + ((NTAB + 15) & ~15))
#define SH_ROW 1040
#define SH_BYTES (SH_ROWS + GMTF_GPU_LANES * SH_ROW)

static GMTF_HD inline int popc32(uint32_t v)
{
#ifdef GMTF_LANES_EMU
    return __builtin_popcount(v);
#else
    return __popc(v);
#endif
}

/* w[i] of 8 by selects (no indexed registers, no memory). */
static GMTF_HD inline uint32_t pick8(const uint32_t *w, unsigned i)
{
    uint32_t a0 = i & 1 ? w[1] : w[0], a1 = i & 1 ? w[3] : w[2];
    uint32_t a2 = i & 1 ? w[5] : w[4], a3 = i & 1 ? w[7] : w[6];
    uint32_t b0 = i & 2 ? a1 : a0, b1 = i & 2 ? a3 : a2;
    return i & 4 ? b1 : b0;
}

/* Table t's row (cum[0..15]) into w. */
static GMTF_HD inline void load_row(uint32_t *w, const blk_tabs &bt, unsigned t)
{
#ifdef GMTF_LANES_EMU
    memcpy(w, bt.tab + (size_t)t * 8, 32);
#else
    const uint4 *r = (const uint4 *)(bt.tab + (size_t)t * 8);
    uint4 a = r[0], b = r[1];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
    w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
#endif
}

/* The symbol of slot in row w: how many of cum[1..15] are <= slot. Fast:
 * both halves of a word at once: bit 15 of each half of (0x8000 + slot)
 * - cum is cum <= slot (no borrow: every cum[0..15] under 0x8000, else the
 * table is wide); word k's two bits shifted to 15 - k and 31 - k, then
 * counted. Exact: 15 compares (any table). */
static GMTF_HD inline unsigned count_fast(const uint32_t *w, uint32_t slot)
{
    uint32_t s8 = (slot | slot << 16) | 0x80008000u, acc = 0;
#ifndef GMTF_LANES_EMU
#pragma unroll
#endif
    for (unsigned k = 0; k < 8; k++)
        acc |= ((s8 - w[k]) >> k) & (0x80008000u >> k);
    return (unsigned)popc32(acc) - (((s8 - w[0]) >> 15) & 1);
}

static GMTF_HD inline unsigned count_exact(const uint32_t *w, uint32_t slot)
{
    unsigned y = 0;
#ifndef GMTF_LANES_EMU
#pragma unroll
#endif
    for (unsigned k = 0; k < 8; k++) {
        if (k)
            y += (w[k] & 0xffff) <= slot;
        y += (w[k] >> 16) <= slot;
    }
    return y;
}

/* x's table step for symbol y of row w, top its cum[16]: the bounds by
 * selects. */
static GMTF_HD inline void step_row(uint64_t &x, const uint32_t *w, uint32_t top, unsigned y,
                                    uint32_t slot)
{
    uint32_t w0 = pick8(w, y >> 1), w1 = (y >> 1) == 7 ? top : pick8(w, ((y >> 1) + 1) & 7);
    uint32_t lo = y & 1 ? w0 >> 16 : w0 & 0xffff;
    uint32_t hi = y & 1 ? w1 & 0xffff : w0 >> 16;
    x = (uint64_t)((int)hi - (int)lo) * (x >> PROB_BITS) + slot - (uint64_t)lo;
}

/* get_sym on the staged table t: the same symbol and state. */
static GMTF_HD inline unsigned sym2(uint64_t &x, const blk_tabs &bt, unsigned t)
{
    uint32_t w[8];
    load_row(w, bt, t);
    uint32_t slot = (uint32_t)x & ((1u << PROB_BITS) - 1);
    unsigned y = bt.wide[t] ? count_exact(w, slot) : count_fast(w, slot);
    step_row(x, w, bt.top[t], y, slot);
    return y;
}

/* x's low nb bits, taken (a raw step). */
static GMTF_HD inline uint32_t take_bits(uint64_t &x, unsigned nb)
{
    uint32_t v = (uint32_t)x & ((1u << nb) - 1);
    x >>= nb;
    return v;
}

/* A length of symbol lsym < 15: its base and its bits from x. */
static GMTF_HD inline uint32_t len_short(unsigned lsym, uint64_t &x)
{
    return pk8(PK_LBASE_LO, PK_LBASE_HI, lsym) + take_bits(x, pk4(PK_LBITS, lsym));
}

static GMTF_HD inline uint32_t load_word(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* renorm with the next word already loaded (nw: the word at in when 4
 * bytes or more are left). */
#define RENORM2(x)                                                                                 \
    do {                                                                                           \
        if (in_end - pin >= 4) {                                                                   \
            if ((x) < RANS_L) {                                                                    \
                (x) = (x) << 32 | nw;                                                              \
                pin += 4;                                                                          \
                nw = in_end - pin >= 4 ? load_word(in + pin) : 0;                                  \
            }                                                                                      \
        } else if ((x) < RANS_L) {                                                                 \
            over++;                                                                                \
            (x) <<= 32;                                                                            \
        }                                                                                          \
    } while (0)

static GMTF_HD inline void put32(uint8_t *p, uint32_t v)
{
#ifdef GMTF_LANES_EMU
    memcpy(p, &v, 4);
#else
    *(uint32_t *)p = v;
#endif
}

/* len bytes c at o: bytes to a 4-byte boundary, words to a 16-byte one,
 * 16 bytes at a time, then words and bytes. */
static GMTF_HD inline void fill(uint8_t *o, unsigned c, uint32_t len)
{
    uint32_t i = 0;
    if (len >= 8) {
        uint32_t cw = c * 0x01010101u;
        for (; ((uintptr_t)(o + i) & 3) != 0; i++)
            o[i] = (uint8_t)c;
        for (; ((uintptr_t)(o + i) & 15) != 0 && i + 4 <= len; i += 4)
            put32(o + i, cw);
        for (; i + 16 <= len; i += 16) {
#ifdef GMTF_LANES_EMU
            put32(o + i, cw), put32(o + i + 4, cw), put32(o + i + 8, cw), put32(o + i + 12, cw);
#else
            *(uint4 *)(o + i) = make_uint4(cw, cw, cw, cw);
#endif
        }
        for (; i + 4 <= len; i += 4)
            put32(o + i, cw);
    }
    for (; i < len; i++)
        o[i] = (uint8_t)c;
}

/* The list (64 words, L) after a run of c with rank r: bytes 0..r-1 take
 * bytes 1..r, byte r takes c. w0 is L[0] as loaded. */
static GMTF_HD inline void move_list(uint32_t *L, uint32_t w0, unsigned r, unsigned c)
{
    unsigned nw = r >> 2, k = r & 3, w = 0;
    uint32_t cur = w0;
    for (; w + 4 <= nw; w += 4) {
        uint32_t n1 = L[w + 1], n2 = L[w + 2], n3 = L[w + 3], n4 = L[w + 4];
        L[w] = cur >> 8 | n1 << 24;
        L[w + 1] = n1 >> 8 | n2 << 24;
        L[w + 2] = n2 >> 8 | n3 << 24;
        L[w + 3] = n3 >> 8 | n4 << 24;
        cur = n4;
    }
    for (; w < nw; w++) {
        uint32_t n1 = L[w + 1];
        L[w] = cur >> 8 | n1 << 24;
        cur = n1;
    }
    uint32_t keep = k == 3 ? 0 : ~0u << (8 * k + 8);
    uint32_t low = (cur >> 8) & ((1u << (8 * k)) - 1);
    L[nw] = (cur & keep) | low | c << (8 * k);
}

/* lane_decode on the staged block: g's registers, s its row (list, er,
 * el, hr at S_LIST.. as lane_decode's). */
static GMTF_HD int lane_decode2(const gmtf_gpu_lane *g, uint8_t *s, const blk_tabs &bt,
                                const uint8_t *in, uint8_t *out)
{
    uint64_t xa = g->x[0], xb = g->x[1], pin = g->in;
    const uint64_t in_end = g->in_end;
    uint32_t pos = g->pos;
    const uint32_t end = g->end, start = g->start, gbase = g->group_base;
    uint32_t active = g->active, c = g->c, rtab = g->rtab, ltab = g->ltab, over = 0;
    uint32_t nw = in_end - pin >= 4 ? load_word(in + pin) : 0;
    uint32_t *L = (uint32_t *)(s + S_LIST);
    uint32_t gend = 0, set = 0; /* the selector's set while pos < gend */
    while (pos < end) {
        if (active == 0)
            return 1;
        uint32_t w0 = L[0]; /* early: the next run's byte */
        unsigned rsym = sym2(xa, bt, rtab);
        unsigned lsym = sym2(xa, bt, ltab + pk4(PK_RQ, rsym));
        RENORM2(xa);
        unsigned rb = pk8(PK_RBASE_LO, PK_RBASE_HI, rsym);
        unsigned r = rb + sym2(xb, bt, offtab(rsym));
        if (rsym >= RSYM_BIG_FIRST) {
            r = rb + ((r - rb) << 2 | (unsigned)(xb & 3));
            xb >>= 2;
        }
        unsigned retire = rsym == RSYM_RETIRE;
        r = retire ? active - 1 : r;
        if (r >= active)
            return 1;
        uint32_t len;
        if (lsym == LSYM_ESC) {
            RENORM2(xb);
            unsigned eb = LBIG_MIN + sym2(xb, bt, T_LBIG), hb = eb < 16 ? eb : 16;
            len = 1u << eb | take_bits(xb, hb) << (eb - hb);
            RENORM2(xb);
            len |= take_bits(xb, eb - hb);
        } else {
            len = len_short(lsym, xb);
        }
        RENORM2(xb);
        if (len > end - pos)
            return 1;
        unsigned cn = r ? (w0 >> 8) & 255 : c;
        fill(out + pos, c, len);
        pos += len;
        move_list(L, w0, r, c);
        active -= retire;
        unsigned rv = retire ? 15 : rsym;
        s[S_ER + c] = (uint8_t)((s[S_ER + c] + (rv << 4)) >> 1);
        s[S_EL + c] = (uint8_t)((s[S_EL + c] + (lsym << 4)) >> 1);
        s[S_HR + c] = (uint8_t)rv;
        c = cn;
        if (pos < end) {
            if (pos >= gend) {
                uint32_t k = (pos - start) / GROUP_BYTES, gi = gbase + k;
                set = bt.sel[gi < MAX_GROUPS ? gi : MAX_GROUPS - 1] & (MAX_SETS - 1);
                gend = start + (k + 1) * GROUP_BYTES;
            }
            rtab = set * TPS +
                   (pk4(PK_EQ, ((s[S_ER + c] + 8) >> 4) & 15) * 3 + hq(s[S_HR + c])) * 3 + pq(rsym);
            ltab = set * TPS + NRCTX + pk4(PK_EQ, ((s[S_EL + c] + 8) >> 4) & 15) * 5;
        }
    }
    return active != 0 || xa != RANS_L || xb != RANS_L || pin != in_end || over;
}

/* Stages block b's tables and selectors into sh (tables at SH_TAB, their
 * tops at SH_TOP, selectors at SH_SEL) with threads tid of nt. */
static GMTF_HD inline void stage_tabs(uint8_t *sh, const uint16_t *cum, const uint8_t *sel,
                                      unsigned tid, unsigned nt)
{
    const uint32_t *src = (const uint32_t *)cum; /* NTAB rows of 18 halves = 9 words */
    uint32_t *tab = (uint32_t *)(sh + SH_TAB);
    uint16_t *top = (uint16_t *)(sh + SH_TOP);
    for (unsigned q = tid; q < NTAB * 9; q += nt) {
        unsigned t = q / 9, w = q - t * 9;
        uint32_t v = src[q];
        if (w < 8)
            tab[t * 8 + w] = v;
        else
            top[t] = (uint16_t)(v & 0xffff);
    }
    const uint32_t *s4 = (const uint32_t *)sel;
    uint32_t *d4 = (uint32_t *)(sh + SH_SEL);
    for (unsigned q = tid; q < MAX_GROUPS / 4; q += nt)
        d4[q] = s4[q];
}

/* stage_tabs and version 2's lane rows (then stage_wide, after a barrier). */
static GMTF_HD inline void stage_block(uint8_t *sh, const gmtf_gpu_lane *lanes, const uint16_t *cum,
                                       const uint8_t *sel, unsigned tid, unsigned nt)
{
    stage_tabs(sh, cum, sel, tid, nt);
    for (unsigned q = tid; q < GMTF_GPU_LANES * 256; q += nt) {
        unsigned j = q / 256, w = q % 256;
        const uint32_t *from = (const uint32_t *)lanes[j].list;
        ((uint32_t *)(sh + SH_ROWS + j * SH_ROW))[w] = from[w];
    }
}

/* Each staged table's flag for sym2 (a header's unused sets may hold
 * anything: only the tables a lane reads decide its way). */
static GMTF_HD inline void stage_wide(uint8_t *sh, unsigned tid, unsigned nt, int exact)
{
    const uint32_t *tab = (const uint32_t *)(sh + SH_TAB);
    for (unsigned t = tid; t < NTAB; t += nt) {
        uint32_t v = 0;
        for (unsigned w = 0; w < 8; w++)
            v |= tab[t * 8 + w];
        sh[SH_WIDE + t] = exact || (v & 0x80008000u) != 0;
    }
}

/* ---- version 4: fewer instructions a run, two runs in flight -------------------
 * Version 2 spends ~2,000 cycles a run on a lane (52.4 ms for 256 MiB of
 * the Linux tar): a warp's instructions issue in order and most wait on
 * the one before (Nsight Compute: ~400 instructions a warp step, a warp
 * issuing every ~3.4 cycles), so what counts is the instructions on a
 * run's path and their dependences. Version 4 (docs/gpu.md, gpu8):
 * - the histories of byte v are one word a lane (er, el and the context
 *   parts they give: the next run's tables are an add away), and the next
 *   run's word (byte list[1]) is loaded at the start of this run: list[1]
 *   is not this run's byte while the lane is valid (the list's live bytes
 *   are distinct; a run that leaves one live byte ends the lane or the
 *   next run breaks the rules), so the store of this run's word cannot
 *   change it; the word's e_q parts come from two staged tables;
 * - the list's first word stays in a register: ranks 1..3 move it there;
 *   longer moves go through shared memory as before;
 * - the word stream is read as aligned words (the device copy of the
 *   input is padded by 16 bytes), two words ahead, joined by a funnel
 *   shift, and renormalised by selects;
 * - a symbol is the count on the table's row (two 16-byte loads) and one
 *   staged pair, cum[y] and cum[y + 1] - cum[y]; no per-table branch: a
 *   block with a table of a half >= 0x8000 in a set its lanes can read
 *   (used_sets) runs the exact count and the bounds' selects instead (a
 *   template choice per block: the codec's unused sets hold stale tables,
 *   never read); the big ranks' raw bits take no branch; the run's checks
 *   are one branch; runs under 8 bytes are stored by predicated stores;
 * - two runs in flight: run k+1's A symbols need only A's state, the next
 *   byte's histories and run k's rank symbol (and the group's table set,
 *   which changes only at a 4 KiB group boundary), so each step decodes
 *   run k's B part and run k+1's A symbols side by side, with the set of
 *   run k's group; when run k ends in a group of another set, run k+1's A
 *   symbols are decoded again from the saved state. The words are still
 *   read in the stream's order: A's renormalisation for run k+1 follows
 *   B's for run k.
 * Same results as lane_decode above, rule for rule. */

/* Lane rows of version 4: the list (256 bytes), then 256 history words;
 * then each table's 16 pairs and the two e_q tables. */
#define SH4_HIST 256
#define SH4_ROW 1296 /* 324 words: neighbouring lanes 4 banks apart */
#define SH4_PAIR (SH_ROWS + GMTF_GPU_LANES * SH4_ROW) /* NTAB x 16 words */
#define SH4_EQ (SH4_PAIR + NTAB * 64)                 /* 512 bytes */
#define SH4_BYTES (SH4_EQ + 512)

/* A history word: er, el, the rank context's part from er and hr, and the
 * length context's part from el. */
static GMTF_HD inline uint32_t hist_pack(unsigned er, unsigned el, unsigned hr)
{
    unsigned rp = (pk4(PK_EQ, ((er + 8) >> 4) & 15) * 3 + hq(hr)) * 3; /* 0..105 */
    unsigned lp = pk4(PK_EQ, ((el + 8) >> 4) & 15) * 5;                /* 0..55 */
    return er | el << 8 | rp << 16 | lp << 24;
}

/* hist_pack of a run's update, the e_q parts from the staged tables (eq:
 * stage_eq): er and el are bytes here. */
static GMTF_HD inline uint32_t hist_next(const uint8_t *eq, uint32_t hc, unsigned rv, unsigned lsym)
{
    unsigned er = ((hc & 255) + (rv << 4)) >> 1, el = (((hc >> 8) & 255) + (lsym << 4)) >> 1;
    unsigned rp = eq[er] + hq(rv) * 3, lp = eq[256 + el];
    return er | el << 8 | rp << 16 | lp << 24;
}

/* get_sym on staged table t: EXACT, the exact count and the bounds'
 * selects (any table); else the fast count and the staged pair, lo and
 * hi - lo (tables whose halves and top are under 0x8000). */
template <bool EXACT>
static GMTF_HD inline unsigned sym4(uint64_t &x, const blk_tabs &bt, unsigned t)
{
    uint32_t w[8];
    load_row(w, bt, t);
    uint32_t slot = (uint32_t)x & ((1u << PROB_BITS) - 1);
    if (!EXACT) {
        unsigned y = count_fast(w, slot);
        uint32_t p = bt.pair[(size_t)t * 16 + y];
        x = (uint64_t)(int64_t)((int32_t)p >> 16) * (x >> PROB_BITS) + slot -
            (uint64_t)(p & 0xffff);
        return y;
    }
    unsigned y = count_exact(w, slot);
    step_row(x, w, bt.top[t], y, slot);
    return y;
}

static GMTF_HD inline uint32_t funnel(uint32_t lo, uint32_t hi, unsigned sh)
{
#ifdef GMTF_LANES_EMU
    return sh ? lo >> sh | hi << (32 - sh) : lo;
#else
    return __funnelshift_r(lo, hi, sh);
#endif
}

/* The list after a run of c with rank r, its first word in head (returned;
 * L[0] in memory is not kept): bytes 0..r-1 take bytes 1..r, byte r takes c. */
static GMTF_HD inline uint32_t move3(uint32_t *L, uint32_t head, unsigned r, unsigned c)
{
    if (r < 4) {
        uint32_t keep = r == 3 ? 0 : ~0u << (8 * r + 8);
        uint32_t low = (head >> 8) & ((1u << (8 * r)) - 1);
        return (head & keep) | low | c << (8 * r);
    }
    unsigned nw = r >> 2, k = r & 3;
    uint32_t cur = L[1];
    uint32_t nh = head >> 8 | cur << 24;
    for (unsigned w = 1; w < nw; w++) {
        uint32_t nx = L[w + 1];
        L[w] = cur >> 8 | nx << 24;
        cur = nx;
    }
    uint32_t keep = k == 3 ? 0 : ~0u << (8 * k + 8);
    uint32_t low = (cur >> 8) & ((1u << (8 * k)) - 1);
    L[nw] = (cur & keep) | low | c << (8 * k);
    return nh;
}

/* renorm: left bytes of the stream, the word at its front is
 * funnel(w0, w1, sh); wp points at w0 (aligned), w2 follows w1. By
 * selects: the next word's load is made every time (from the padded input). */
#define RENORM4(x)                                                                                 \
    do {                                                                                           \
        uint32_t need_ = (uint32_t)((x) >> 32) == 0;                                               \
        uint32_t take_ = need_ & (left >= 4);                                                      \
        uint32_t wd_ = funnel(w0, w1, sh);                                                         \
        (x) = need_ ? (x) << 32 | (take_ ? wd_ : 0) : (x);                                         \
        over += need_ & !take_;                                                                    \
        left -= take_ << 2;                                                                        \
        w0 = take_ ? w1 : w0;                                                                      \
        w1 = take_ ? w2 : w1;                                                                      \
        wp += take_;                                                                               \
        w2 = wp[2];                                                                                \
    } while (0)

/* len bytes c at o: under 8 by predicated stores, else fill. */
static GMTF_HD inline void fill4(uint8_t *o, unsigned c, uint32_t len)
{
    if (len < 8) {
#ifndef GMTF_LANES_EMU
#pragma unroll
#endif
        for (unsigned i = 0; i < 7; i++)
            if (i < len)
                o[i] = (uint8_t)c;
    } else {
        fill(o, c, len);
    }
}

template <bool EXACT>
static GMTF_HD int lane_decode4(const gmtf_gpu_lane *g, uint8_t *row, const blk_tabs &bt,
                                const uint8_t *in, uint8_t *out)
{
    uint64_t xa = g->x[0], xb = g->x[1];
    uint64_t left64 = g->in_end - g->in;
    /* a stream of 4 GiB or more cannot be read to its end: left stays over 0 */
    uint32_t left = left64 > 0xffffffffu ? 0xffffffffu : (uint32_t)left64;
    const uint32_t *wp = (const uint32_t *)(in + (g->in & ~(uint64_t)3));
    const unsigned sh = (unsigned)(g->in & 3) * 8;
    uint32_t w0 = wp[0], w1 = wp[1], w2 = wp[2];
    uint32_t pos = g->pos;
    const uint32_t end = g->end, start = g->start, gbase = g->group_base;
    uint32_t active = g->active, c = g->c, over = 0;
    uint32_t *L = (uint32_t *)row, *H = (uint32_t *)(row + SH4_HIST);
    uint32_t head = L[0], hc = H[c];
    uint32_t gk = (pos - start) / GROUP_BYTES, gi = gbase + gk;
    uint32_t setoff = (bt.sel[gi < MAX_GROUPS ? gi : MAX_GROUPS - 1] & (MAX_SETS - 1)) * TPS;
    uint32_t gend = start + (gk + 1) * GROUP_BYTES;
    if (pos < end) {
        unsigned rsym = sym4<EXACT>(xa, bt, g->rtab);
        unsigned lsym = sym4<EXACT>(xa, bt, g->ltab + pk4(PK_RQ, rsym));
        RENORM4(xa);
        for (;;) {
            unsigned cn = (head >> 8) & 255;
            uint32_t hn = H[cn];
            unsigned pq1 = pq(rsym);
            uint32_t rt1 = setoff + ((hn >> 16) & 127) + pq1, lt1 = setoff + NRCTX + (hn >> 24);
            /* run k's B symbol and run k+1's A symbols: independent */
            unsigned o = sym4<EXACT>(xb, bt, offtab(rsym));
            uint64_t xs = xa;
            unsigned rsym1 = sym4<EXACT>(xa, bt, rt1);
            unsigned lsym1 = sym4<EXACT>(xa, bt, lt1 + pk4(PK_RQ, rsym1));
            unsigned rb = pk8(PK_RBASE_LO, PK_RBASE_HI, rsym);
            unsigned big = rsym >= RSYM_BIG_FIRST ? 2 : 0;
            unsigned r = rb + (o << big | ((unsigned)xb & ((1u << big) - 1)));
            xb >>= big;
            unsigned retire = rsym == RSYM_RETIRE;
            r = retire ? active - 1 : r;
            uint32_t len;
            if (lsym == LSYM_ESC) {
                RENORM4(xb);
                unsigned eb = LBIG_MIN + sym4<EXACT>(xb, bt, T_LBIG), hb = eb < 16 ? eb : 16;
                len = 1u << eb | take_bits(xb, hb) << (eb - hb);
                RENORM4(xb);
                len |= take_bits(xb, eb - hb);
            } else {
                len = len_short(lsym, xb);
            }
            RENORM4(xb);
            if (r >= active || len > end - pos)
                return 1;
            fill4(out + pos, c, len);
            pos += len;
            head = move3(L, head, r, c);
            active -= retire;
            unsigned rv = retire ? 15 : rsym;
            H[c] = hist_next(bt.eq, hc, rv, lsym);
            if (pos >= end) {
                xa = xs; /* no run k+1 */
                break;
            }
            if (pos >= gend) {
                gk = (pos - start) / GROUP_BYTES, gi = gbase + gk;
                uint32_t so =
                    (bt.sel[gi < MAX_GROUPS ? gi : MAX_GROUPS - 1] & (MAX_SETS - 1)) * TPS;
                gend = start + (gk + 1) * GROUP_BYTES;
                if (so != setoff) { /* run k+1 is in a group of another set */
                    setoff = so;
                    xa = xs;
                    rsym1 = sym4<EXACT>(xa, bt, so + ((hn >> 16) & 127) + pq1);
                    lsym1 = sym4<EXACT>(xa, bt, so + NRCTX + (hn >> 24) + pk4(PK_RQ, rsym1));
                }
            }
            RENORM4(xa);
            c = cn;
            hc = hn;
            rsym = rsym1;
            lsym = lsym1;
        }
    }
    return active != 0 || xa != RANS_L || xb != RANS_L || left != 0 || over;
}

/* Version 4's lane rows: each lane's list and its history words. */
static GMTF_HD inline void stage_rows4(uint8_t *sh, const gmtf_gpu_lane *lanes, unsigned tid,
                                       unsigned nt)
{
    for (unsigned q = tid; q < GMTF_GPU_LANES * 256; q += nt) {
        unsigned j = q / 256, v = q % 256;
        const gmtf_gpu_lane *l = &lanes[j];
        uint8_t *row = sh + SH_ROWS + j * SH4_ROW;
        if (v < 64)
            ((uint32_t *)row)[v] = ((const uint32_t *)l->list)[v];
        ((uint32_t *)(row + SH4_HIST))[v] = hist_pack(l->er[v], l->el[v], l->hr[v]);
    }
}

/* The table sets the block's lanes can read (a bit a set): those of the
 * selectors before the end of the lanes' last group and of the lanes'
 * first tables, this thread's share (threads tid of nt; OR them). The
 * sets past the header's count are not decoded and may hold anything. */
static GMTF_HD inline unsigned set_bit(uint32_t t)
{
    return t < T_OFF ? 1u << (t / TPS) : 0;
}

static GMTF_HD inline unsigned used_sets(const gmtf_gpu_lane *lanes, const uint8_t *sel,
                                         unsigned tid, unsigned nt)
{
    uint32_t gmax = 0;
    unsigned m = 0;
    for (unsigned j = 0; j < GMTF_GPU_LANES; j++) {
        const gmtf_gpu_lane *l = &lanes[j];
        uint32_t e = l->group_base + (l->end - l->start + GROUP_BYTES - 1) / GROUP_BYTES;
        gmax = e > gmax ? e : gmax;
        if (j % nt == tid)
            m |= set_bit(l->rtab) | set_bit(l->ltab) | set_bit(l->ltab + 4);
    }
    for (uint32_t q = tid; q < gmax && q < MAX_GROUPS; q += nt)
        m |= 1u << (sel[q] & (MAX_SETS - 1));
    return m;
}

/* Whether staged table t needs the exact count (cum[0..15] >= 0x8000). */
static GMTF_HD inline int tab_wide(const uint8_t *sh, unsigned t)
{
    const uint32_t *tab = (const uint32_t *)(sh + SH_TAB) + t * 8;
    uint32_t v = ((const uint16_t *)(sh + SH_TOP))[t];
    for (unsigned w = 0; w < 8; w++)
        v |= tab[w];
    return (v & 0x80008000u) != 0;
}

/* Version 4: each table's symbols as pairs cum[y] | (cum[y + 1] -
 * cum[y]) << 16 (the difference's low 16 bits: exact for the tables that
 * are not wide, the only ones sym4 reads them for), and the e_q parts of
 * the history words. */
static GMTF_HD inline void stage_pairs(uint8_t *sh, const uint16_t *cum, unsigned tid, unsigned nt)
{
    uint32_t *pr = (uint32_t *)(sh + SH4_PAIR);
    for (unsigned q = tid; q < NTAB * 16; q += nt) {
        const uint16_t *r = cum + (size_t)(q >> 4) * GMTF_GPU_LANES_CUM + (q & 15);
        pr[q] = r[0] | (uint32_t)(uint16_t)(r[1] - r[0]) << 16;
    }
    for (unsigned v = tid; v < 256; v += nt) {
        sh[SH4_EQ + v] = (uint8_t)(pk4(PK_EQ, ((v + 8) >> 4) & 15) * 9);
        sh[SH4_EQ + 256 + v] = (uint8_t)(pk4(PK_EQ, ((v + 8) >> 4) & 15) * 5);
    }
}

/* ---- context -------------------------------------------------------------- */

/* The device copy of the input is padded (zeros): version 4 reads aligned
 * words up to 15 bytes past a lane's stream. */
#define IN_PAD 16

struct dbuf {
    void *p;
    size_t cap;
};

struct gmtf_gpu_lanes_ctx {
    int ok;
    char err[256];
    dbuf in, lanes, cum, sel, off, out, bad;
    int kept;  /* the last decode's output is on the device (decode_keep) */
    int lpw;   /* lanes a warp (the kernel's shape) */
    int ver;   /* the kernel's version: 3, or 1 / 2 (GMTF_GPU_LANES_V) */
    int exact; /* GMTF_GPU_LANES_EXACT=1 */
    /* decode_groups: the groups' last blocks (gend[g], exclusive) */
    size_t ngroups, gend[GMTF_GPU_LANES_GROUPS_MAX];
#ifndef GMTF_LANES_EMU
    cudaStream_t st;
    cudaStream_t gst[GMTF_GPU_LANES_GROUPS_MAX]; /* a group's stream (made at first use) */
    cudaEvent_t gev[GMTF_GPU_LANES_GROUPS_MAX];  /* its lanes done */
    cudaEvent_t up;                              /* the uploads of decode_groups done */
    int prof;                                    /* GMTF_GPU_LANES_PROFILE=1 */
    /* GMTF_GPU_LANES_EXCL=n: the last n groups' CTAs of decode_groups take
     * sh4 bytes, the SM's whole shared memory (default: every group's;
     * 0: none; a single kernel's never) */
    int excl, excl_now;
    size_t sh4;
    cudaEvent_t ev[4]; /* its marks */
#endif
    int dev; /* the CUDA device its memory and stream are on */
};

static int set_err(gmtf_gpu_lanes_ctx *c, int rc, const char *what, const char *detail)
{
    snprintf(c->err, sizeof c->err, "%s: %s", what, detail);
    return rc;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    } while (0)

#ifndef GMTF_LANES_EMU

static int cuda_fail(gmtf_gpu_lanes_ctx *c, cudaError_t e, const char *what)
{
    set_err(c, 0, what, cudaGetErrorString(e));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return -ENOMEM;
    }
    if (cudaDeviceSynchronize() != cudaSuccess)
        c->ok = 0;
    cudaGetLastError();
    return -EIO;
}

#define CK(c, call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return cuda_fail((c), e_, #call);                                                      \
    } while (0)

/* The lane's list and histories in shared memory, one row of 1028 bytes a
 * lane (the extra word spreads the lanes' rows over the banks). */
#define S_ROW 1028

/* LPW lanes a warp (32 / LPW warps a block, one block a CTA): each thread
 * is one lane's serial chain, so fewer lanes a warp put a block's chains on
 * more of the SM's schedulers and shorten the divergent steps (a run's
 * bytes, the list's move), which last as long as the warp's longest. */
template <int LPW>
__global__ void __launch_bounds__(GMTF_GPU_LANES / LPW * 32)
    k_lanes(const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel, const uint8_t *in,
            const uint64_t *off, uint8_t *out, uint8_t *bad)
{
    __shared__ __align__(16) uint8_t sh[GMTF_GPU_LANES * S_ROW];
    uint32_t b = blockIdx.x, t = threadIdx.x % 32;
    if (t >= LPW)
        return;
    uint32_t j = threadIdx.x / 32 * LPW + t;
    const gmtf_gpu_lane *g = &lanes[(size_t)b * GMTF_GPU_LANES + j];
    uint8_t *s = sh + j * S_ROW;
    const uint32_t *from = (const uint32_t *)g->list; /* list, er, el, hr: 1024 bytes */
    for (unsigned i = 0; i < 256; i++)
        ((uint32_t *)s)[i] = from[i];
    int e = lane_decode(g, s, cum + (size_t)b * NTAB * GMTF_GPU_LANES_CUM,
                        sel + (size_t)b * MAX_GROUPS, in, out + (off[b] - off[0]));
    if (e)
        bad[b] = 1;
}

/* Version 2 (lane_decode2): the CTA stages the block (tables, selectors,
 * lane rows: SH_BYTES of dynamic shared memory), then LPW threads a warp
 * run a lane each. */
template <int LPW>
__global__ void __launch_bounds__(GMTF_GPU_LANES / LPW * 32)
    k_lanes2(const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
             const uint8_t *__restrict__ in, const uint64_t *off, uint8_t *out, uint8_t *bad,
             int exact)
{
    extern __shared__ uint4 sh4[];
    uint8_t *sh = (uint8_t *)sh4;
    uint32_t b = blockIdx.x;
    stage_block(sh, lanes + (size_t)b * GMTF_GPU_LANES, cum + (size_t)b * NTAB * GMTF_GPU_LANES_CUM,
                sel + (size_t)b * MAX_GROUPS, threadIdx.x, blockDim.x);
    __syncthreads();
    stage_wide(sh, threadIdx.x, blockDim.x, exact);
    __syncthreads();
    uint32_t t = threadIdx.x % 32;
    if (t >= LPW)
        return;
    uint32_t j = threadIdx.x / 32 * LPW + t;
    blk_tabs bt = {(const uint32_t *)(sh + SH_TAB), (const uint16_t *)(sh + SH_TOP), sh + SH_SEL,
                   sh + SH_WIDE};
    if (lane_decode2(&lanes[(size_t)b * GMTF_GPU_LANES + j], sh + SH_ROWS + j * SH_ROW, bt, in,
                     out + (off[b] - off[0])))
        bad[b] = 1;
}

/* Version 4 (lane_decode4): the CTA stages the block (tables, pairs,
 * selectors, lane rows: SH4_BYTES), then LPW threads a warp run a lane
 * each, all with the exact count when a table its lanes can read needs it
 * (or exact). */
template <int LPW>
__global__ void __launch_bounds__(GMTF_GPU_LANES / LPW * 32)
    k_lanes4(const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
             const uint8_t *__restrict__ in, const uint64_t *off, uint8_t *out, uint8_t *bad,
             int exact)
{
    extern __shared__ uint4 sh4[];
    uint8_t *sh = (uint8_t *)sh4;
    uint32_t b = blockIdx.x;
    stage_tabs(sh, cum + (size_t)b * NTAB * GMTF_GPU_LANES_CUM, sel + (size_t)b * MAX_GROUPS,
               threadIdx.x, blockDim.x);
    stage_rows4(sh, lanes + (size_t)b * GMTF_GPU_LANES, threadIdx.x, blockDim.x);
    stage_pairs(sh, cum + (size_t)b * NTAB * GMTF_GPU_LANES_CUM, threadIdx.x, blockDim.x);
    __shared__ unsigned sets;
    if (threadIdx.x == 0)
        sets = 0;
    __syncthreads();
    atomicOr(&sets,
             used_sets(lanes + (size_t)b * GMTF_GPU_LANES, sh + SH_SEL, threadIdx.x, blockDim.x));
    __syncthreads();
    int wide = exact;
    for (unsigned t = threadIdx.x; t < NTAB; t += blockDim.x)
        if (t >= T_OFF || (sets >> (t / TPS) & 1))
            wide |= tab_wide(sh, t);
    wide = __syncthreads_or(wide);
    uint32_t t = threadIdx.x % 32;
    if (t >= LPW)
        return;
    uint32_t j = threadIdx.x / 32 * LPW + t;
    blk_tabs bt = {(const uint32_t *)(sh + SH_TAB),
                   (const uint16_t *)(sh + SH_TOP),
                   sh + SH_SEL,
                   NULL,
                   (const uint32_t *)(sh + SH4_PAIR),
                   sh + SH4_EQ};
    const gmtf_gpu_lane *g = &lanes[(size_t)b * GMTF_GPU_LANES + j];
    uint8_t *row = sh + SH_ROWS + j * SH4_ROW, *o = out + (off[b] - off[0]);
    if (wide ? lane_decode4<true>(g, row, bt, in, o) : lane_decode4<false>(g, row, bt, in, o))
        bad[b] = 1;
}

/* Lanes a warp: GMTF_GPU_LPW (32, 16, 8, 4, 2 or 1; 2 and 1 version 2
 * only) or the default (docs/gpu.md); GMTF_GPU_LANES_V1=1 runs the first
 * kernel (for comparison). */
#define LPW_DEFAULT 8
#define LPW2_DEFAULT 4
static int lanes_per_warp(int v2)
{
    const char *e = getenv("GMTF_GPU_LPW");
    int d = v2 ? LPW2_DEFAULT : LPW_DEFAULT;
    int v = e && *e ? atoi(e) : d;
    return v == 32 || v == 16 || v == 8 || v == 4 || (v2 && (v == 2 || v == 1)) ? v : d;
}

/* Version 4 with LPW lanes a warp (lanes_per_warp). */
static void launch4(gmtf_gpu_lanes_ctx *c, cudaStream_t st, unsigned g, const gmtf_gpu_lane *l,
                    const uint16_t *cum, const uint8_t *sel, const uint8_t *in, const uint64_t *off,
                    uint8_t *out, uint8_t *bad)
{
    size_t sb = c->excl_now ? c->sh4 : SH4_BYTES;
    int x = c->exact;
    switch (c->lpw) {
    case 32: k_lanes4<32><<<g, 32, sb, st>>>(l, cum, sel, in, off, out, bad, x); break;
    case 16: k_lanes4<16><<<g, 64, sb, st>>>(l, cum, sel, in, off, out, bad, x); break;
    case 8: k_lanes4<8><<<g, 128, sb, st>>>(l, cum, sel, in, off, out, bad, x); break;
    case 2: k_lanes4<2><<<g, 512, sb, st>>>(l, cum, sel, in, off, out, bad, x); break;
    case 1: k_lanes4<1><<<g, 1024, sb, st>>>(l, cum, sel, in, off, out, bad, x); break;
    default: k_lanes4<4><<<g, 256, sb, st>>>(l, cum, sel, in, off, out, bad, x); break;
    }
}

static int v2_attrs(int n4)
{
    int n = SH_BYTES;
    return cudaFuncSetAttribute(k_lanes4<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, n4) ||
           cudaFuncSetAttribute(k_lanes4<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, n4) ||
           cudaFuncSetAttribute(k_lanes4<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, n4) ||
           cudaFuncSetAttribute(k_lanes4<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, n4) ||
           cudaFuncSetAttribute(k_lanes4<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, n4) ||
           cudaFuncSetAttribute(k_lanes4<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, n4) ||
           cudaFuncSetAttribute(k_lanes2<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, n) ||
           cudaFuncSetAttribute(k_lanes2<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, n) ||
           cudaFuncSetAttribute(k_lanes2<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, n) ||
           cudaFuncSetAttribute(k_lanes2<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, n) ||
           cudaFuncSetAttribute(k_lanes2<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, n) ||
           cudaFuncSetAttribute(k_lanes2<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, n);
}

/* CUDA's current device is the calling thread's: the entry points that
 * launch or copy make the context's device current first. */
static int use_device(gmtf_gpu_lanes_ctx *c)
{
    cudaError_t e = cudaSetDevice(c->dev);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, "cudaSetDevice");
}

static int backend_open(gmtf_gpu_lanes_ctx *c)
{
    if (c->dev >= gmtf_gpu_device_count() || !gmtf_gpu_available())
        return -ENODEV;
    if (cudaSetDevice(c->dev) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        return -ENODEV;
    }
    c->ver = lanes_version();
    c->exact = exact_count();
    const char *pe = getenv("GMTF_GPU_LANES_PROFILE");
    c->prof = pe && *pe == '1';
    c->lpw = lanes_per_warp(c->ver != 1);
    /* GMTF_GPU_LANES_EXCL=n: version 4's CTAs of decode_groups' last n
     * groups (default all) take all of an SM's shared memory, so that no
     * other kernel's CTA (each reserves some) runs on an SM beside a block's
     * lanes: the other groups' inverse kernels beside them slowed the
     * costliest group's lanes from 32.6 to 41.3 ms (dec13, docs/gpu.md) */
    const char *ex = getenv("GMTF_GPU_LANES_EXCL");
    c->excl = ex && *ex ? atoi(ex) : GMTF_GPU_LANES_GROUPS_MAX;
    int optin = 0;
    cudaFuncAttributes fa;
    c->sh4 = SH4_BYTES;
    /* (the kernel's static shared bytes, the same in every k_lanes4, count
     * against the same limit) */
    if (c->excl > 0 &&
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->dev) ==
            cudaSuccess &&
        cudaFuncGetAttributes(&fa, k_lanes4<4>) == cudaSuccess &&
        optin - (int)fa.sharedSizeBytes > (int)SH4_BYTES)
        c->sh4 = (size_t)optin - fa.sharedSizeBytes;
    c->excl_now = 0;
    if (v2_attrs((int)c->sh4)) {
        cudaGetLastError();
        cudaStreamDestroy(c->st);
        c->st = NULL;
        return -ENODEV;
    }
    return 0;
}

static void backend_close(gmtf_gpu_lanes_ctx *c)
{
    for (int i = 0; i < 4; i++)
        if (c->ev[i])
            cudaEventDestroy(c->ev[i]);
    for (int g = 0; g < GMTF_GPU_LANES_GROUPS_MAX; g++) {
        if (c->gst[g]) {
            cudaStreamSynchronize(c->gst[g]);
            cudaStreamDestroy(c->gst[g]);
        }
        if (c->gev[g])
            cudaEventDestroy(c->gev[g]);
    }
    if (c->up)
        cudaEventDestroy(c->up);
    if (c->st) {
        cudaStreamSynchronize(c->st);
        cudaStreamDestroy(c->st);
    }
    cudaGetLastError();
}

static int dev_reserve(gmtf_gpu_lanes_ctx *c, dbuf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return 0;
    cudaError_t e = gmtf_dev_regrow(&b->p, &b->cap, bytes);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, "cudaMalloc");
}

static void dev_free(dbuf *b)
{
    if (b->p)
        cudaFree(b->p);
    b->p = NULL;
    b->cap = 0;
}

static int h2d(gmtf_gpu_lanes_ctx *c, void *d, const void *h, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, c->st));
    return 0;
}

static int d2h(gmtf_gpu_lanes_ctx *c, void *h, const void *d, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, c->st));
    return 0;
}

/* The kernel over the uploaded batch's blocks [b0, b1) on group q's stream
 * (q < 0: the context's); out_off: the host's copy of the offsets. */
static int run(gmtf_gpu_lanes_ctx *c, size_t b0, size_t b1, const uint64_t *out_off, int q)
{
    cudaStream_t st = q < 0 ? c->st : c->gst[q];
    size_t count = b1 - b0;
    CK(c, cudaMemsetAsync((uint8_t *)c->bad.p + b0, 0, count, st));
    const gmtf_gpu_lane *l = (const gmtf_gpu_lane *)c->lanes.p + b0 * GMTF_GPU_LANES;
    const uint16_t *cum = (const uint16_t *)c->cum.p + b0 * NTAB * GMTF_GPU_LANES_CUM;
    const uint8_t *sel = (const uint8_t *)c->sel.p + b0 * MAX_GROUPS,
                  *in = (const uint8_t *)c->in.p;
    const uint64_t *off = (const uint64_t *)c->off.p + b0;
    uint8_t *out = (uint8_t *)c->out.p + (out_off[b0] - out_off[0]),
            *bad = (uint8_t *)c->bad.p + b0;
    unsigned g = (unsigned)count;
    if (c->ver == 4) {
        launch4(c, st, g, l, cum, sel, in, off, out, bad);
        CK(c, cudaGetLastError());
        return 0;
    }
    if (c->ver == 2) {
        size_t sb = SH_BYTES;
        switch (c->lpw) {
        case 32: k_lanes2<32><<<g, 32, sb, st>>>(l, cum, sel, in, off, out, bad, c->exact); break;
        case 16: k_lanes2<16><<<g, 64, sb, st>>>(l, cum, sel, in, off, out, bad, c->exact); break;
        case 8: k_lanes2<8><<<g, 128, sb, st>>>(l, cum, sel, in, off, out, bad, c->exact); break;
        case 2: k_lanes2<2><<<g, 512, sb, st>>>(l, cum, sel, in, off, out, bad, c->exact); break;
        case 1: k_lanes2<1><<<g, 1024, sb, st>>>(l, cum, sel, in, off, out, bad, c->exact); break;
        default: k_lanes2<4><<<g, 256, sb, st>>>(l, cum, sel, in, off, out, bad, c->exact); break;
        }
        CK(c, cudaGetLastError());
        return 0;
    }
    switch (c->lpw) {
    case 32: k_lanes<32><<<g, 32, 0, st>>>(l, cum, sel, in, off, out, bad); break;
    case 16: k_lanes<16><<<g, 64, 0, st>>>(l, cum, sel, in, off, out, bad); break;
    case 4: k_lanes<4><<<g, 256, 0, st>>>(l, cum, sel, in, off, out, bad); break;
    default: k_lanes<8><<<g, 128, 0, st>>>(l, cum, sel, in, off, out, bad); break;
    }
    CK(c, cudaGetLastError());
    return 0;
}

static int zero(gmtf_gpu_lanes_ctx *c, void *d, size_t n)
{
    CK(c, cudaMemsetAsync(d, 0, n, c->st));
    return 0;
}

static int sync(gmtf_gpu_lanes_ctx *c)
{
    CK(c, cudaStreamSynchronize(c->st));
    return 0;
}

/* decode_groups' launches: group g's blocks on stream g after the
 * uploads on the context's stream, its end recorded in gev[g]. */
static int launch_groups(gmtf_gpu_lanes_ctx *c, const uint64_t *out_off, size_t ngroups,
                         const size_t *gend)
{
    /* timed only for GMTF_GPU_LANES_PROFILE (group_wait's report) */
    unsigned fl = c->prof ? cudaEventDefault : cudaEventDisableTiming;
    if (!c->up)
        CK(c, cudaEventCreateWithFlags(&c->up, fl));
    for (size_t g = 0; g < ngroups; g++) {
        if (!c->gst[g])
            CK(c, cudaStreamCreateWithFlags(&c->gst[g], cudaStreamNonBlocking));
        if (!c->gev[g])
            CK(c, cudaEventCreateWithFlags(&c->gev[g], fl));
    }
    CK(c, cudaEventRecord(c->up, c->st));
    for (size_t g = 0; g < ngroups; g++) {
        CK(c, cudaStreamWaitEvent(c->gst[g], c->up, 0));
        c->excl_now = c->excl > 0 && g + (size_t)c->excl >= ngroups;
        int rc = run(c, g ? gend[g - 1] : 0, gend[g], out_off, (int)g);
        c->excl_now = 0;
        TRY(rc);
        CK(c, cudaEventRecord(c->gev[g], c->gst[g]));
    }
    return 0;
}

static int group_wait(gmtf_gpu_lanes_ctx *c, size_t g, const uint8_t *dbad, uint8_t *bad, size_t n)
{
    if (bad)
        CK(c, cudaMemcpyAsync(bad, dbad, n, cudaMemcpyDeviceToHost, c->gst[g]));
    CK(c, cudaStreamSynchronize(c->gst[g]));
    float ms = 0;
    if (c->prof && cudaEventElapsedTime(&ms, c->up, c->gev[g]) == cudaSuccess)
        fprintf(stderr,
                "lanes profile: group %zu (%zu blocks): lanes done %.2f ms after the uploads\n", g,
                n, ms);
    cudaGetLastError();
    return 0;
}

extern "C" void *gmtf_gpu_lanes_group_event(gmtf_gpu_lanes_ctx *c, size_t g)
{
    return c && g < c->ngroups ? (void *)c->gev[g] : NULL;
}

/* GMTF_GPU_LANES_PROFILE=1: uploads, kernel and the rest of each decode
 * on stderr (device events), for benchmarks. */
static void prof_mark(gmtf_gpu_lanes_ctx *c, int i)
{
    if (!c->prof)
        return;
    if (!c->ev[i])
        cudaEventCreate(&c->ev[i]);
    cudaEventRecord(c->ev[i], c->st);
}

static void prof_report(gmtf_gpu_lanes_ctx *c, size_t count)
{
    float up = 0, k = 0, rest = 0;
    if (!c->prof || cudaEventElapsedTime(&up, c->ev[0], c->ev[1]) != cudaSuccess ||
        cudaEventElapsedTime(&k, c->ev[1], c->ev[2]) != cudaSuccess ||
        cudaEventElapsedTime(&rest, c->ev[2], c->ev[3]) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    fprintf(
        stderr,
        "lanes profile: %zu blocks, v%d lpw %d: uploads %.2f ms, kernel %.2f ms, after %.2f ms\n",
        count, c->ver, c->lpw, up, k, rest);
}

#else /* GMTF_LANES_EMU */

static int use_device(gmtf_gpu_lanes_ctx *)
{
    return 0;
}

static int backend_open(gmtf_gpu_lanes_ctx *)
{
    return 0;
}

static void backend_close(gmtf_gpu_lanes_ctx *)
{
}

static int dev_reserve(gmtf_gpu_lanes_ctx *c, dbuf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return 0;
    free(b->p);
    b->p = malloc(bytes);
    b->cap = b->p ? bytes : 0;
    return b->p ? 0 : set_err(c, -ENOMEM, "malloc", "out of memory");
}

static void dev_free(dbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

static int h2d(gmtf_gpu_lanes_ctx *, void *d, const void *h, size_t n)
{
    if (n)
        memcpy(d, h, n);
    return 0;
}

static int d2h(gmtf_gpu_lanes_ctx *, void *h, const void *d, size_t n)
{
    if (n)
        memcpy(h, d, n);
    return 0;
}

static int run(gmtf_gpu_lanes_ctx *c, size_t b0, size_t b1, const uint64_t *, int)
{
    const uint64_t *off = (const uint64_t *)c->off.p;
    uint8_t *bad = (uint8_t *)c->bad.p;
    int ver = lanes_version();
    uint8_t *sh = (uint8_t *)malloc(SH4_BYTES); /* the CTA's shared memory */
    if (!sh)
        return set_err(c, -ENOMEM, "malloc", "out of memory");
    for (size_t b = b0; b < b1; b++) {
        const gmtf_gpu_lane *gb = (const gmtf_gpu_lane *)c->lanes.p + b * GMTF_GPU_LANES;
        const uint16_t *cum = (const uint16_t *)c->cum.p + b * NTAB * GMTF_GPU_LANES_CUM;
        const uint8_t *sel = (const uint8_t *)c->sel.p + b * MAX_GROUPS;
        const uint8_t *in = (const uint8_t *)c->in.p;
        uint8_t *out = (uint8_t *)c->out.p + (off[b] - off[0]);
        bad[b] = 0;
        int wide = exact_count();
        if (ver == 2) {
            stage_block(sh, gb, cum, sel, 0, 1);
            stage_wide(sh, 0, 1, wide);
        } else {
            stage_tabs(sh, cum, sel, 0, 1);
            stage_rows4(sh, gb, 0, 1);
            stage_pairs(sh, cum, 0, 1);
            unsigned sets = used_sets(gb, sh + SH_SEL, 0, 1);
            for (unsigned t = 0; t < NTAB; t++)
                if (t >= T_OFF || (sets >> (t / TPS) & 1))
                    wide |= tab_wide(sh, t);
        }
        blk_tabs bt = {(const uint32_t *)(sh + SH_TAB),
                       (const uint16_t *)(sh + SH_TOP),
                       sh + SH_SEL,
                       sh + SH_WIDE,
                       (const uint32_t *)(sh + SH4_PAIR),
                       sh + SH4_EQ};
        for (unsigned j = 0; j < GMTF_GPU_LANES; j++) {
            const gmtf_gpu_lane *g = gb + j;
            uint8_t s[1024], *row = sh + SH_ROWS + j * SH4_ROW;
            memcpy(s, g->list, 1024);
            if (ver == 1 ? lane_decode(g, s, cum, sel, in, out)
                : ver == 2 ? lane_decode2(g, sh + SH_ROWS + j * SH_ROW, bt, in, out)
                : wide ? lane_decode4<true>(g, row, bt, in, out)
                       : lane_decode4<false>(g, row, bt, in, out))
                bad[b] = 1;
        }
    }
    free(sh);
    return 0;
}

static int zero(gmtf_gpu_lanes_ctx *, void *d, size_t n)
{
    memset(d, 0, n);
    return 0;
}

static int sync(gmtf_gpu_lanes_ctx *)
{
    return 0;
}

static void prof_mark(gmtf_gpu_lanes_ctx *, int)
{
}

static void prof_report(gmtf_gpu_lanes_ctx *, size_t)
{
}

static int launch_groups(gmtf_gpu_lanes_ctx *c, const uint64_t *out_off, size_t ngroups,
                         const size_t *gend)
{
    for (size_t g = 0; g < ngroups; g++)
        TRY(run(c, g ? gend[g - 1] : 0, gend[g], out_off, (int)g));
    return 0;
}

static int group_wait(gmtf_gpu_lanes_ctx *, size_t, const uint8_t *dbad, uint8_t *bad, size_t n)
{
    if (bad)
        memcpy(bad, dbad, n);
    return 0;
}

extern "C" void *gmtf_gpu_lanes_group_event(gmtf_gpu_lanes_ctx *, size_t)
{
    return NULL;
}

#endif

extern "C" int gmtf_gpu_lanes_create(gmtf_gpu_lanes_ctx **out)
{
    return gmtf_gpu_lanes_create_on(0, out);
}

extern "C" int gmtf_gpu_lanes_create_on(int dev, gmtf_gpu_lanes_ctx **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (dev < 0)
        return -ENODEV;
    gmtf_gpu_lanes_ctx *c = (gmtf_gpu_lanes_ctx *)calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->dev = dev;
    int rc = backend_open(c);
    if (rc) {
        free(c);
        return rc;
    }
    c->ok = 1;
    *out = c;
    return 0;
}

extern "C" void gmtf_gpu_lanes_destroy(gmtf_gpu_lanes_ctx *c)
{
    if (!c)
        return;
    (void)use_device(c);
    backend_close(c);
    dbuf *b[] = {&c->in, &c->lanes, &c->cum, &c->sel, &c->off, &c->out, &c->bad};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        dev_free(b[i]);
    free(c);
}

extern "C" int gmtf_gpu_lanes_ok(const gmtf_gpu_lanes_ctx *c)
{
    return c && c->ok;
}

extern "C" const char *gmtf_gpu_lanes_error(const gmtf_gpu_lanes_ctx *c)
{
    return c ? c->err : "no context";
}

static int has_work(const gmtf_gpu_lane *l)
{
    for (unsigned j = 0; j < GMTF_GPU_LANES; j++)
        if (l[j].pos < l[j].end)
            return 1;
    return 0;
}

/* The host's check of the caller's structures: every index the device
 * takes from them stays in bounds. */
static int check(const gmtf_gpu_lane *lanes, size_t count, uint64_t nin, const uint64_t *off)
{
    for (size_t b = 0; b < count; b++) {
        if (off[b + 1] < off[b] || off[b + 1] - off[b] > (16u << 20))
            return -EINVAL;
        uint64_t n = off[b + 1] - off[b];
        for (unsigned j = 0; j < GMTF_GPU_LANES; j++) {
            const gmtf_gpu_lane *l = &lanes[b * GMTF_GPU_LANES + j];
            uint64_t groups = ((uint64_t)l->end - l->start + GROUP_BYTES - 1) / GROUP_BYTES;
            if (l->in > l->in_end || l->in_end > nin || l->start > l->pos || l->pos > l->end ||
                l->end > n || l->active > 256 || l->c > 255 || l->rtab >= NTAB ||
                l->ltab + 4 >= NTAB || (uint64_t)l->group_base + groups > MAX_GROUPS)
                return -EINVAL;
        }
    }
    return 0;
}

/* Only the bytes the blocks' lanes read go up, block by block: from the
 * word holding a block's first stream byte to 15 bytes past its last (the
 * aligned reads of version 4; IN_PAD). The caller may still be filling
 * the rest of in for later calls (the chunked decode: codec/batch.c copies
 * the next chunk's payloads into the same pinned input while this one
 * runs); the bytes around a block's streams are its own frame's header
 * and the next frame's, which nobody writes. */
static int upload_streams(gmtf_gpu_lanes_ctx *c, const uint8_t *in, uint64_t nin, size_t count,
                          const gmtf_gpu_lane *lanes)
{
    for (size_t b = 0; b < count; b++) {
        const gmtf_gpu_lane *l = lanes + b * GMTF_GPU_LANES;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (unsigned j = 0; j < GMTF_GPU_LANES; j++)
            if (l[j].in < l[j].in_end) {
                lo = l[j].in < lo ? l[j].in : lo;
                hi = l[j].in_end > hi ? l[j].in_end : hi;
            }
        if (lo >= hi)
            continue;
        lo &= ~(uint64_t)3;
        hi = nin - hi > IN_PAD ? hi + IN_PAD : nin;
        TRY(h2d(c, (uint8_t *)c->in.p + lo, in + lo, hi - lo));
    }
    return 0;
}

/* The checks, the buffers and the uploads on the context's stream; all of
 * in[0..nin) when whole, else only the lanes' streams (upload_streams). */
static int upload(gmtf_gpu_lanes_ctx *c, const uint8_t *in, uint64_t nin, size_t count,
                  const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                  const uint64_t *out_off, int whole)
{
    if (check(lanes, count, nin, out_off))
        return set_err(c, -EINVAL, "lanes", "a lane's state is out of range");
    size_t nout = out_off[count] - out_off[0];
    size_t lbytes = count * GMTF_GPU_LANES * sizeof(gmtf_gpu_lane);
    size_t cbytes = count * NTAB * GMTF_GPU_LANES_CUM * 2;
    TRY(dev_reserve(c, &c->in, nin + IN_PAD));
    TRY(dev_reserve(c, &c->lanes, lbytes));
    TRY(dev_reserve(c, &c->cum, cbytes));
    TRY(dev_reserve(c, &c->sel, count * MAX_GROUPS));
    TRY(dev_reserve(c, &c->off, (count + 1) * 8));
    TRY(dev_reserve(c, &c->out, nout ? nout : 1));
    TRY(dev_reserve(c, &c->bad, count));
    if (whole)
        TRY(h2d(c, c->in.p, in, nin));
    else
        TRY(upload_streams(c, in, nin, count, lanes));
    TRY(zero(c, (uint8_t *)c->in.p + nin, IN_PAD));
    TRY(h2d(c, c->lanes.p, lanes, lbytes));
    TRY(h2d(c, c->cum.p, cum, cbytes));
    TRY(h2d(c, c->sel.p, sel, count * MAX_GROUPS));
    TRY(h2d(c, c->off.p, out_off, (count + 1) * 8));
    return 0;
}

/* After the kernel: keep: the blocks without work go up from out (the
 * caller's fill); else only the blocks with work come down (the others'
 * bytes in out stay the caller's). */
static int standins(gmtf_gpu_lanes_ctx *c, size_t count, const gmtf_gpu_lane *lanes,
                    const uint64_t *out_off, uint8_t *out, int keep)
{
    for (size_t b = 0; b < count;) {
        int work = has_work(lanes + b * GMTF_GPU_LANES);
        size_t e = b + 1;
        while (e < count && has_work(lanes + e * GMTF_GPU_LANES) == work)
            e++;
        uint8_t *dev = (uint8_t *)c->out.p + (out_off[b] - out_off[0]);
        if (keep && !work)
            TRY(h2d(c, dev, out + out_off[b], out_off[e] - out_off[b]));
        else if (!keep && work)
            TRY(d2h(c, out + out_off[b], dev, out_off[e] - out_off[b]));
        b = e;
    }
    return 0;
}

static int args_ok(const uint8_t *in, const gmtf_gpu_lane *lanes, const uint16_t *cum,
                   const uint8_t *sel, const uint64_t *out_off, const void *out, size_t count)
{
    return in && lanes && cum && sel && out_off && out && count <= (1u << 20);
}

/* keep: the output stays on the device (the blocks without work get
 * fill's bytes there instead), else the blocks with work come down to out. */
static int decode_impl(gmtf_gpu_lanes_ctx *c, const uint8_t *in, uint64_t nin, size_t count,
                       const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                       const uint64_t *out_off, uint8_t *out, uint8_t *bad, int keep)
{
    if (!c)
        return -ENODEV;
    if (!c->ok)
        return -EIO;
    c->kept = 0;
    c->ngroups = 0;
    if (count == 0)
        return 0;
    if (!args_ok(in, lanes, cum, sel, out_off, out, count) || !bad)
        return -EINVAL;
    prof_mark(c, 0);
    TRY(upload(c, in, nin, count, lanes, cum, sel, out_off, 0));
    prof_mark(c, 1);
    TRY(run(c, 0, count, out_off, -1));
    prof_mark(c, 2);
    TRY(standins(c, count, lanes, out_off, out, keep));
    TRY(d2h(c, bad, c->bad.p, count));
    prof_mark(c, 3);
    TRY(sync(c));
    prof_report(c, count);
    c->kept = keep;
    return 0;
}

extern "C" int gmtf_gpu_lanes_decode(gmtf_gpu_lanes_ctx *c, const uint8_t *in, uint64_t nin,
                                     size_t count, const gmtf_gpu_lane *lanes, const uint16_t *cum,
                                     const uint8_t *sel, const uint64_t *out_off, uint8_t *out,
                                     uint8_t *bad)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc : decode_impl(c, in, nin, count, lanes, cum, sel, out_off, out, bad, 0);
}

extern "C" int gmtf_gpu_lanes_decode_keep(gmtf_gpu_lanes_ctx *c, const uint8_t *in, uint64_t nin,
                                          size_t count, const gmtf_gpu_lane *lanes,
                                          const uint16_t *cum, const uint8_t *sel,
                                          const uint64_t *out_off, const uint8_t *fill,
                                          uint8_t *bad)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc
              : decode_impl(c, in, nin, count, lanes, cum, sel, out_off, (uint8_t *)fill, bad, 1);
}

extern "C" int gmtf_gpu_lanes_out_device(gmtf_gpu_lanes_ctx *c, void **out)
{
    if (!c)
        return -ENODEV;
    if (!c->kept)
        return -EINVAL;
    *out = c->out.p;
    return 0;
}

extern "C" int gmtf_gpu_lanes_decode_groups(gmtf_gpu_lanes_ctx *c, const uint8_t *in, uint64_t nin,
                                            size_t count, const gmtf_gpu_lane *lanes,
                                            const uint16_t *cum, const uint8_t *sel,
                                            const uint64_t *out_off, const uint8_t *fill,
                                            size_t ngroups, const size_t *gend)
{
    if (!c)
        return -ENODEV;
    TRY(use_device(c));
    if (!c->ok)
        return -EIO;
    c->kept = 0;
    c->ngroups = 0;
    if (count == 0 || !args_ok(in, lanes, cum, sel, out_off, fill, count) || !gend || ngroups < 1 ||
        ngroups > GMTF_GPU_LANES_GROUPS_MAX || gend[ngroups - 1] != count)
        return -EINVAL;
    for (size_t g = 0; g < ngroups; g++)
        if (gend[g] <= (g ? gend[g - 1] : 0))
            return -EINVAL;
    /* every block's setup is done: one copy of the whole input */
    TRY(upload(c, in, nin, count, lanes, cum, sel, out_off, 1));
    TRY(standins(c, count, lanes, out_off, (uint8_t *)fill, 1));
    TRY(launch_groups(c, out_off, ngroups, gend));
    c->ngroups = ngroups;
    memcpy(c->gend, gend, ngroups * sizeof *gend);
    c->kept = 1;
    return 0;
}

extern "C" int gmtf_gpu_lanes_group_wait(gmtf_gpu_lanes_ctx *c, size_t g, uint8_t *bad)
{
    if (!c)
        return -ENODEV;
    if (g >= c->ngroups)
        return -EINVAL;
    TRY(use_device(c));
    size_t b0 = g ? c->gend[g - 1] : 0;
    return group_wait(c, g, (const uint8_t *)c->bad.p + b0, bad, c->gend[g] - b0);
}
