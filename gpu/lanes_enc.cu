/* Lane-parallel encoding of the codec's method 2 on the GPU
 * (gpu_lanes.h): one thread a lane, many blocks at once. Two kernels,
 * each the same loop as codec/entropy_lanes.c's:
 *   scan: a lane's QLFC ranks (gmtf_qlfc_ranks), its runs' context keys,
 *         its first run of every 4 KiB group and its counts of the shared
 *         tables (lane_keys);
 *   code: a lane's runs coded backwards by rANS (lane_encode) with the
 *         tables and selectors the host chose from the scan: a warp a lane,
 *         each run's groups made ready 32 runs at a time, the two states'
 *         chains on two of its threads (code_one2; code_one, a thread a
 *         lane, with GMTF_GPU_ENC_CODE=1).
 * The model's constants are repeated (as in gpu/lanes.cu); the codec checks
 * the layout macros at compile time. The scan's outputs stay on the device
 * for the code kernel.
 *
 * The same source builds for the CPU with GMTF_LANES_ENC_EMU: tests/gpu
 * runs the device code path without a GPU. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GMTF_LANES_ENC_EMU
#include "lanes_enc_emu_names.h"
#define GMTF_HD
#define GMTF_HHD
#define GMTF_CONST static const
#else
#include <cuda_runtime.h>
#include "dev_alloc.cuh"
#include "gpu.h"
#define GMTF_HD __device__
#define GMTF_HHD __host__ __device__
/* global memory through L1, not __constant__: the lanes of a warp index
 * the tables by their own symbols, which the constant cache serialises */
#define GMTF_CONST static __device__ const
#endif

#include "gpu_lanes.h"

/* ---- the model (codec/entropy_lanes.c) ----------------------------------- */

#define NSYM 16
#define RSYM_RETIRE 0
#define RSYM_OFF_FIRST 5
#define RSYM_BIG_FIRST 13
#define LSYM_ESC 15
#define LBIG_MIN 8
#define ER_INIT 48
#define NRCTX (12 * 3 * 3)
#define NLCTX (12 * 5)
#define TPS (NRCTX + NLCTX)
#define MAX_SETS 8
#define T_OFF (MAX_SETS * TPS)
#define T_LBIG (T_OFF + 11)
#define NTAB (T_LBIG + 2) /* tables a block, the decoder's one-symbol table last */
#define GROUP_BYTES 4096
#define MAX_GROUPS ((16u << 20) / GROUP_BYTES + GMTF_GPU_LANES)
#define PROB_BITS 12
#define RANS_L (1ull << 32)
#define XA 0
#define XB 1
#define CUMW GMTF_GPU_LANES_CUM

GMTF_CONST uint8_t e_rbase[NSYM] = {0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 129, 193};
GMTF_CONST uint8_t e_lbase[LSYM_ESC] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192};
GMTF_CONST uint8_t e_lbits[LSYM_ESC] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6};
GMTF_CONST uint8_t e_e_q[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11};
GMTF_CONST uint8_t e_h_q[16] = {0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
GMTF_CONST uint8_t e_p_q[16] = {2, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
GMTF_CONST uint8_t e_r_q[16] = {0, 1, 2, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};

static_assert(NTAB == GMTF_GPU_LANES_NTABLES && TPS == GMTF_GPU_LANES_TPS &&
                  GROUP_BYTES == GMTF_GPU_LANES_GROUP && MAX_GROUPS == GMTF_GPU_LANES_MAX_GROUPS &&
                  NTAB - 1 - T_OFF == GMTF_GPU_LANES_NSHARED,
              "gpu_lanes.h's layout");

/* ---- lane geometry (the codec's: ceil(n / 32) bytes a lane) ---------------- */

static GMTF_HHD inline void lane_geom(uint64_t n, unsigned j, uint32_t *a, uint32_t *b,
                                      uint32_t *gbase)
{
    uint64_t seg = (n + GMTF_GPU_LANES - 1) / GMTF_GPU_LANES, g = 0;
    for (unsigned i = 0; i < j; i++) {
        uint64_t lo = i * seg, hi = lo + seg;
        lo = lo < n ? lo : n;
        hi = hi < n ? hi : n;
        g += (hi - lo + GROUP_BYTES - 1) / GROUP_BYTES;
    }
    uint64_t lo = (uint64_t)j * seg, hi = lo + seg;
    *a = (uint32_t)(lo < n ? lo : n);
    *b = (uint32_t)(hi < n ? hi : n);
    *gbase = (uint32_t)g;
}

static GMTF_HD inline unsigned top_bit(uint32_t v) /* v >= 1 */
{
#ifdef GMTF_LANES_ENC_EMU
    return 31 - (unsigned)__builtin_clz(v);
#else
    return 31 - (unsigned)__clz(v);
#endif
}

/* The rank class of r (1..255) without a search: past 4, two classes an
 * octave of r - 1 (4-5, 6-7, 8-11, ..., 48-63), then 64-127, 128-191,
 * 192-254 (codec/entropy_lanes.c's rbase). */
static GMTF_HD inline unsigned rsym_of(unsigned r)
{
    if (r <= 4)
        return r;
    unsigned m = r - 1;
    if (m >= 64)
        return m < 128 ? 13 : m < 192 ? 14 : 15;
    unsigned k = top_bit(m);
    return 2 * k + 1 + ((m >> (k - 1)) & 1);
}

/* The length class of len >= 1: 1, 2, 3, then two an octave (4-5, 6-7,
 * ..., 192-255), 256 on escaped (lbase). */
static GMTF_HD inline unsigned lsym_of(uint32_t len)
{
    if (len >= 256)
        return LSYM_ESC;
    if (len < 4)
        return len - 1;
    unsigned k = top_bit(len);
    return 2 * k - 1 + ((len >> (k - 1)) & 1);
}

static GMTF_HD inline unsigned bitlen_m1(uint32_t v) /* v >= 1: index of the top bit */
{
    return top_bit(v);
}

/* ---- scan: ranks, keys, groups, shared counts of one lane ----------------- */

/* Two passes over a lane:
 *   ranks  backwards, run after run: the byte's place in the move-to-front
 *          list (0 for a byte's first use from the lane's end). The bytes
 *          used so far are the list's first nseen places, so a place >=
 *          nseen is a first use;
 *   keys   forwards: each run's context keys from its byte's histories (er,
 *          el, hr) and the previous run's rank class, the shared tables'
 *          counts, each 4 KiB group's first run.
 * In the CPU build (one "thread", t = 0) both are plain loops. On the device
 * a warp scans a lane: the ranks pass takes 32 bytes a step (their runs'
 * starts by a ballot) and keeps the list in registers, 8 places a thread;
 * the keys pass takes 32 runs a step, one a thread, the runs of one byte
 * among them in turn (a byte's histories are a chain).
 * tmp: the warp's 2048 bytes (the CPU build's list, er, el, hr, then the
 * shared counts, 8-aligned). rl: the runs' lengths (for the code step). */
#define SCAN_TMP 2048
#ifdef GMTF_LANES_ENC_EMU
#define SCAN_INC(p) (++*(p))
#else
#define SCAN_INC(p) atomicAdd((p), 1u)
#endif

/* A run's counts of the shared tables (offsets of big ranks, escaped
 * lengths). */
static GMTF_HD inline void run_count(uint32_t *cnt, unsigned r, unsigned rsym, unsigned lsym,
                                     uint32_t len)
{
    if (rsym >= RSYM_BIG_FIRST)
        SCAN_INC(&cnt[(rsym - RSYM_OFF_FIRST) * NSYM + ((r - e_rbase[rsym]) >> 2)]);
    else if (rsym >= RSYM_OFF_FIRST)
        SCAN_INC(&cnt[(rsym - RSYM_OFF_FIRST) * NSYM + (r - e_rbase[rsym])]);
    if (lsym == LSYM_ESC)
        SCAN_INC(&cnt[(T_LBIG - T_OFF) * NSYM + bitlen_m1(len) - LBIG_MIN]);
}

/* A run of byte c: its key pair (rank key low, length key high) from c's
 * histories, which it updates; prev: the previous run's rank class. */
static GMTF_HD inline uint32_t run_keys(uint8_t *er, uint8_t *el, uint8_t *hr, unsigned c,
                                        unsigned rsym, unsigned lsym, unsigned prev)
{
    unsigned rctx = (e_e_q[(er[c] + 8) >> 4] * 3 + e_h_q[hr[c]]) * 3 + e_p_q[prev];
    unsigned lctx = NRCTX + e_e_q[(el[c] + 8) >> 4] * 5 + e_r_q[rsym];
    unsigned rv = rsym == RSYM_RETIRE ? 15 : rsym;
    er[c] = (uint8_t)((er[c] + (rv << 4)) >> 1);
    el[c] = (uint8_t)((el[c] + (lsym << 4)) >> 1);
    hr[c] = (uint8_t)rv;
    return (uint32_t)(rctx << 4 | rsym) | (uint32_t)(lctx << 4 | lsym) << 16;
}

static GMTF_HD inline void scan_init(uint8_t *tmp, unsigned t, unsigned step)
{
    uint8_t *list = tmp, *er = tmp + 256, *el = tmp + 512, *hr = tmp + 768;
    uint32_t *cnt = (uint32_t *)(tmp + 1280);
    for (unsigned i = t; i < 256; i += step) {
        list[i] = (uint8_t)i;
        er[i] = ER_INIT;
        el[i] = 0;
        hr[i] = 0;
    }
    for (unsigned q = t; q < GMTF_GPU_LANES_NSHARED * NSYM; q += step)
        cnt[q] = 0;
}

#ifdef GMTF_LANES_ENC_EMU
static void lane_scan(const uint8_t *s, uint32_t a, uint32_t b, uint8_t *rk, uint16_t *keys,
                      uint32_t *rl, uint32_t *nruns, uint8_t *init, uint16_t *ninit,
                      uint32_t *gstart, uint32_t *shared, uint8_t *tmp, unsigned t)
{
    uint8_t *list = tmp, *er = tmp + 256, *el = tmp + 512, *hr = tmp + 768;
    uint32_t *cnt = (uint32_t *)(tmp + 1280);
    scan_init(tmp, t, 1);
    uint32_t runs = 0;
    for (uint32_t i = a; i < b; runs++)
        for (uint8_t c = s[i]; i < b && s[i] == c;)
            i++;
    uint32_t k = runs;
    unsigned nseen = 0;
    for (uint32_t i = b; i > a;) {
        uint32_t st = i - 1;
        while (st > a && s[st - 1] == s[i - 1])
            st--;
        unsigned c = s[st], p = 0;
        while (list[p] != c)
            p++;
        memmove(list + 1, list, p);
        list[0] = (uint8_t)c;
        --k;
        rk[k] = p < nseen ? (uint8_t)p : 0;
        rl[k] = i - st;
        nseen += p >= nseen;
        i = st;
    }
    memcpy(init, list, nseen);
    *ninit = (uint16_t)nseen;
    *nruns = runs;
    unsigned prev = 1;
    uint32_t g = 0, st = a;
    for (k = 0; k < runs; k++) {
        while ((st - a) >= g * GROUP_BYTES)
            gstart[g++] = k;
        unsigned r = rk[k], rsym = r ? rsym_of(r) : RSYM_RETIRE, lsym = lsym_of(rl[k]);
        run_count(cnt, r, rsym, lsym, rl[k]);
        uint32_t kp = run_keys(er, el, hr, s[st], rsym, lsym, prev);
        memcpy(keys + 2 * (size_t)k, &kp, 4);
        prev = rsym;
        st += rl[k];
    }
    for (uint32_t ng = (b - a + GROUP_BYTES - 1) / GROUP_BYTES; g < ng; g++)
        gstart[g] = runs;
    memcpy(shared, cnt, GMTF_GPU_LANES_NSHARED * NSYM * sizeof *cnt);
}
#else
#define FULL 0xffffffffu
static __device__ void lane_scan(const uint8_t *s, uint32_t a, uint32_t b, uint8_t *rk,
                                 uint16_t *keys, uint32_t *rl, uint32_t *nruns, uint8_t *init,
                                 uint16_t *ninit, uint32_t *gstart, uint32_t *shared, uint8_t *tmp,
                                 unsigned t)
{
    uint8_t *er = tmp + 256, *el = tmp + 512, *hr = tmp + 768;
    uint32_t *cnt = (uint32_t *)(tmp + 1280);
    scan_init(tmp, t, 32);
    __syncwarp();
    /* the runs counted by their starts, the warp's threads over every 32nd
     * byte (independent loads, not a run after another) */
    uint32_t k = 0;
    for (uint32_t q = a + t; q < b; q += 32)
        k += q == a || s[q] != s[q - 1];
    for (int d = 16; d > 0; d >>= 1)
        k += __shfl_xor_sync(FULL, k, d);
    uint32_t runs = k;

    /* ranks: places 8t..8t+7 of the list in v (place 8t + j in byte j); the
     * bytes [lo, i) a step, the next step's loaded during this one's runs */
    const uint64_t ones = 0x0101010101010101ull;
    uint64_t v = 0;
    for (unsigned j = 0; j < 8; j++)
        v |= (uint64_t)(8 * t + j) << (8 * j);
    unsigned nseen = 0;
    uint32_t end = b, i = b, lo = b - a > 32 ? b - 32 : a;
    unsigned x = 0, m;
    {
        uint32_t q = lo + t;
        unsigned px = 256;
        if (q < i) {
            x = s[q];
            px = q > a ? s[q - 1] : 256;
        }
        m = __ballot_sync(FULL, q < i && px != x);
    }
    while (i > a) {
        uint32_t nlo = lo - a > 32 ? lo - 32 : a, nq = nlo + t;
        unsigned nx = 0, npx = 256;
        if (nq < lo) {
            nx = s[nq];
            npx = nq > a ? s[nq - 1] : 256;
        }
        while (m) { /* the runs starting in [lo, i), from the last */
            unsigned bit = 31 - (unsigned)__clz((int)m);
            m ^= 1u << bit;
            unsigned c = __shfl_sync(FULL, x, (int)bit);
            uint64_t y = v ^ (ones * c), hz = (y - ones) & ~y & (ones << 7);
            /* the lowest flag is c's byte: in one thread's word only */
            unsigned p = __reduce_max_sync(
                FULL, hz ? 8 * t + (((unsigned)__ffsll((long long)hz) - 1) >> 3) : 0);
            uint64_t up = __shfl_up_sync(FULL, v >> 56, 1);
            int kk = (int)p - (int)(8 * t) + 1; /* bytes of this thread at places <= p */
            uint64_t mask = kk >= 8 ? ~0ull : kk <= 0 ? 0 : (1ull << (8 * kk)) - 1;
            v = ((v << 8 | (t == 0 ? (uint64_t)c : up)) & mask) | (v & ~mask);
            --k;
            if (t == 0) {
                rk[k] = p < nseen ? (uint8_t)p : 0;
                rl[k] = end - (lo + bit);
            }
            nseen += p >= nseen;
            end = lo + bit;
        }
        m = __ballot_sync(FULL, nq < lo && npx != nx);
        i = lo;
        lo = nlo;
        x = nx;
    }
    for (unsigned j = 0; j < 8; j++)
        if (8 * t + j < nseen)
            init[8 * t + j] = (uint8_t)(v >> (8 * j));
    if (t == 0) {
        *ninit = (uint16_t)nseen;
        *nruns = runs;
    }
    /* rl and rk: written by thread 0 of this warp, read by all below */
    __syncwarp();
    __threadfence_block();

    /* keys: runs k0..k0+31 a step, run k0 + t in thread t, starting at st */
    uint32_t st0 = a, plen = 0;
    unsigned prev = 1;
    for (uint32_t k0 = 0; k0 < runs; k0 += 32) {
        uint32_t kk = k0 + t;
        int ok = kk < runs;
        uint32_t len = ok ? rl[kk] : 0, inc = len;
        unsigned r = ok ? rk[kk] : 0;
        for (unsigned d = 1; d < 32; d <<= 1) {
            uint32_t y = __shfl_up_sync(FULL, inc, d);
            if (t >= d)
                inc += y;
        }
        uint32_t st = st0 + inc - len;
        unsigned c = ok ? s[st] : 0;
        unsigned rsym = r ? rsym_of(r) : RSYM_RETIRE, lsym = ok ? lsym_of(len) : 0;
        unsigned pv = __shfl_up_sync(FULL, rsym, 1);
        uint32_t pl = __shfl_up_sync(FULL, len, 1);
        if (t == 0) {
            pv = prev;
            pl = plen;
        }
        if (ok) {
            /* the first run of each group that starts in (the previous
             * run's start, this run's] */
            uint32_t g = kk ? (st - pl - a) / GROUP_BYTES + 1 : 0;
            for (; g * GROUP_BYTES <= st - a; g++)
                gstart[g] = kk;
            run_count(cnt, r, rsym, lsym, len);
        }
        unsigned same = __match_any_sync(FULL, ok ? c : 256 + t);
        unsigned todo = __ballot_sync(FULL, ok);
        uint32_t kp = 0;
        while (todo) { /* each byte's first pending run */
            int go = (todo >> t & 1) && (unsigned)__ffs((int)(same & todo)) - 1 == t;
            if (go)
                kp = run_keys(er, el, hr, c, rsym, lsym, pv);
            __syncwarp();
            todo &= ~__ballot_sync(FULL, go);
        }
        if (ok)
            ((uint32_t *)keys)[kk] = kp; /* 4-byte aligned: keys + 2 (o + a) */
        st0 += __shfl_sync(FULL, inc, 31);
        prev = __shfl_sync(FULL, rsym, 31);
        plen = __shfl_sync(FULL, len, 31);
    }
    uint32_t ng = (b - a + GROUP_BYTES - 1) / GROUP_BYTES;
    uint32_t g0 = runs ? (b - rl[runs - 1] - a) / GROUP_BYTES + 1 : 0;
    for (uint32_t q = g0 + t; q < ng; q += 32)
        gstart[q] = runs;
    __syncwarp();
    for (unsigned q = t; q < GMTF_GPU_LANES_NSHARED * NSYM; q += 32)
        shared[q] = cnt[q];
}
#endif

/* ---- code: rANS of one lane ------------------------------------------------ */

struct renc {
    uint64_t xa, xb;
    uint8_t *p, *lo;
    int overflow;
};

/* One group of rANS steps (the CPU's rans_group, in a fixed shape so that
 * it stays in registers): a raw field of rnb bits first, then symbol 2 and
 * symbol 1 (f = 0: absent), as the CPU applies its steps (last added
 * first); two raw fields in a row are one field of their bits. */
struct rgroup {
    uint32_t rnb, rval;
    uint32_t f1, c1, f2, c2;
};

static GMTF_HD inline void g_sym1(rgroup &g, const uint16_t *cum, unsigned t, unsigned y)
{
    const uint16_t *cm = cum + (size_t)t * CUMW;
    uint16_t lo = cm[y], hi = cm[y + 1];
    g.f1 = (uint16_t)(hi - lo);
    g.c1 = lo;
}

static GMTF_HD inline void g_sym2(rgroup &g, const uint16_t *cum, unsigned t, unsigned y)
{
    const uint16_t *cm = cum + (size_t)t * CUMW;
    uint16_t lo = cm[y], hi = cm[y + 1];
    g.f2 = (uint16_t)(hi - lo);
    g.c2 = lo;
}

/* x / f for f in 1..4096 (exact for any 64-bit x): on the device as a
 * multiply by the codec's reciprocal (Granlund and Montgomery,
 * codec/entropy_lanes.c's set_reciprocal), from a table by f. */
#ifdef GMTF_LANES_ENC_EMU
#define DIV_F(x, f, e) ((x) / (f))
#else
static __device__ inline uint64_t div_f(uint64_t x, uint32_t f, const uint64_t *rcp,
                                        const uint8_t *rsh)
{
    uint64_t m = __ldg(rcp + f);
    unsigned sh = __ldg(rsh + f);
    uint64_t t = __umul64hi(m, x);
    return (t + ((x - t) >> (sh & 1))) >> (sh >> 1);
}
#define DIV_F(x, f, e) div_f((x), (f), (e).rcp, (e).rsh)
#endif

struct divs {
    const uint64_t *rcp;
    const uint8_t *rsh;
};

static GMTF_HD inline uint64_t g_step(uint64_t x, uint32_t f, uint32_t c, const divs &d)
{
    (void)d;
    uint64_t q = DIV_F(x, f, d);
    return (q << PROB_BITS) + (x - q * f) + c;
}

static GMTF_HD inline uint64_t g_put(renc &r, uint64_t x, const rgroup &g, const divs &d)
{
    unsigned bits = g.rnb + (g.f1 ? PROB_BITS : 0) + (g.f2 ? PROB_BITS : 0);
    uint64_t freq = (uint64_t)(g.f1 ? g.f1 : 1) * (g.f2 ? g.f2 : 1);
    uint64_t k = freq << (32 - bits);
    if ((x >> 32) >= k) {
        if (r.p - r.lo < 4) {
            r.overflow = 1;
        } else {
            r.p -= 4;
            for (int q = 0; q < 4; q++)
                r.p[q] = (uint8_t)(x >> (8 * q));
        }
        x >>= 32;
    }
    if (g.rnb)
        x = x << g.rnb | g.rval;
    if (g.f2)
        x = g_step(x, g.f2, g.c2, d);
    if (g.f1)
        x = g_step(x, g.f1, g.c1, d);
    return x;
}

/* Run k's two keys as one word (rank key low, length key high). */
static GMTF_HD inline uint32_t key_pair(const uint16_t *keys, uint32_t k)
{
#ifdef GMTF_LANES_ENC_EMU
    uint32_t v;
    memcpy(&v, keys + 2 * (size_t)k, 4);
    return v;
#else
    return ((const uint32_t *)keys)[k]; /* 4-byte aligned: keys + 2 (o + a) */
#endif
}

/* Codes lane [a, b) of k runs backwards into [lo, hi); its length, or 0
 * when it does not fit (the host codes that lane itself). */
static GMTF_HD uint32_t lane_code(uint32_t a, uint32_t b, uint32_t k, const uint8_t *rk,
                                  const uint16_t *keys, const uint32_t *rl, const uint8_t *sel,
                                  const uint16_t *cum, uint8_t *lo, uint8_t *hi, const divs &d)
{
    renc r;
    r.xa = r.xb = RANS_L;
    r.p = hi;
    r.lo = lo;
    r.overflow = 0;
    uint32_t i = b;
    /* the next run's length, keys and rank are loaded a run ahead, so that
     * their latency passes while this run is coded */
    uint32_t nlen = 0, nkey = 0, nrk = 0;
    if (k > 0) {
        nlen = rl[k - 1];
        nkey = key_pair(keys, k - 1);
        nrk = rk[k - 1];
    }
    while (i > a) {
        if (k == 0)
            return 0; /* more runs than the scan found: not this lane's data */
        k--;
        uint32_t len = nlen, key = nkey, rkv = nrk;
        if (k > 0) {
            nlen = rl[k - 1];
            nkey = key_pair(keys, k - 1);
            nrk = rk[k - 1];
        }
        if (len == 0 || len > i - a)
            return 0;
        i -= len;
        unsigned set = sel[(i - a) / GROUP_BYTES] & (MAX_SETS - 1);
        unsigned rkey = key & 0xffff, lkey = key >> 16;
        unsigned rsym = rkey & 15, lsym = lkey & 15;
        unsigned rtab = rkey >> 4, ltab = lkey >> 4;
        if (rtab >= TPS || ltab >= TPS)
            return 0;
        rgroup ga = {0, 0, 0, 0, 0, 0}, gb = {0, 0, 0, 0, 0, 0};
        g_sym1(ga, cum, set * TPS + rtab, rsym);
        g_sym2(ga, cum, set * TPS + ltab, lsym);
        unsigned v = rkv - e_rbase[rsym];
        if (rsym >= RSYM_BIG_FIRST) {
            g_sym1(gb, cum, T_OFF + rsym - RSYM_OFF_FIRST, (v >> 2) & 15);
            gb.rnb = 2;
            gb.rval = v & 3;
        } else if (rsym >= RSYM_OFF_FIRST) {
            g_sym1(gb, cum, T_OFF + rsym - RSYM_OFF_FIRST, v & 15);
        }
        if (lsym == LSYM_ESC) {
            if (len < (1u << LBIG_MIN))
                return 0;
            unsigned eb = bitlen_m1(len), lo_bits = eb < 16 ? eb : 16;
            uint32_t low = len & ((1u << eb) - 1);
            rgroup g2 = {lo_bits, low >> (eb - lo_bits), 0, 0, 0, 0};
            g_sym1(g2, cum, T_LBIG, (eb - LBIG_MIN) & 15);
            rgroup g3 = {eb - lo_bits, low & ((1u << (eb - lo_bits)) - 1), 0, 0, 0, 0};
            if (g3.rnb)
                r.xb = g_put(r, r.xb, g3, d);
            r.xb = g_put(r, r.xb, g2, d);
        } else if (e_lbits[lsym]) {
            /* the length's raw bits come after the offset's (a later step:
             * applied first, the lower field of the two) */
            gb.rval = (len - e_lbase[lsym]) << gb.rnb | gb.rval;
            gb.rnb += e_lbits[lsym];
        }
        if (gb.rnb || gb.f1)
            r.xb = g_put(r, r.xb, gb, d);
        r.xa = g_put(r, r.xa, ga, d);
    }
    if (k != 0 || r.overflow || r.p - lo < 16)
        return 0;
    r.p -= 16;
    for (int q = 0; q < 8; q++) {
        r.p[q] = (uint8_t)(r.xa >> (8 * q));
        r.p[8 + q] = (uint8_t)(r.xb >> (8 * q));
    }
    return (uint32_t)(hi - r.p);
}

/* Lane L's stream room in the device's output: 2 bytes an input byte and
 * 64 more, the stream written downwards to the room's end. */
static GMTF_HD inline uint64_t room_end(uint64_t blk_off, uint32_t b, uint64_t lane)
{
    return 2 * (blk_off + b) + 64 * (lane + 1);
}

/* ---- one lane of a batch --------------------------------------------------- */

struct enc_args {
    const uint8_t *bwt;
    const uint64_t *off;
    uint8_t *rk;
    uint16_t *keys;
    uint32_t *rl; /* device only: the runs' lengths */
    uint32_t *runs;
    uint8_t *init;
    uint16_t *ninit;
    uint32_t *gstart;
    uint32_t *shared;
    const uint8_t *sel;
    const uint16_t *cum;
    uint8_t *room;
    uint32_t *len;
    const uint8_t *skip; /* code: blocks left alone (NULL: none) */
    divs d;              /* code: x / f by multiplication (device) */
};

static GMTF_HD void scan_one(const enc_args &e, size_t blk, unsigned j, uint8_t *tmp, unsigned t)
{
    uint64_t o = e.off[blk], n = e.off[blk + 1] - o;
    uint32_t a, b, gb;
    lane_geom(n, j, &a, &b, &gb);
    size_t L = blk * GMTF_GPU_LANES + j;
    lane_scan(e.bwt + o, a, b, e.rk + o + a, e.keys + 2 * (o + a), e.rl + o + a, &e.runs[L],
              e.init + L * 256, &e.ninit[L], e.gstart + blk * MAX_GROUPS + gb,
              e.shared + L * GMTF_GPU_LANES_NSHARED * NSYM, tmp, t);
}

static GMTF_HD void code_one(const enc_args &e, size_t blk, unsigned j)
{
    uint64_t o = e.off[blk], n = e.off[blk + 1] - o;
    uint32_t a, b, gb;
    lane_geom(n, j, &a, &b, &gb);
    size_t L = blk * GMTF_GPU_LANES + j;
    if (e.skip && e.skip[blk]) {
        e.len[L] = 0;
        return;
    }
    uint64_t hi = room_end(o, b, L), lo = hi - 2 * (uint64_t)(b - a) - 64;
    e.len[L] = lane_code(a, b, e.runs[L], e.rk + o + a, e.keys + 2 * (o + a), e.rl + o + a,
                         e.sel + blk * MAX_GROUPS + gb, e.cum + blk * NTAB * CUMW, e.room + lo,
                         e.room + hi, e.d);
}

/* ---- code by records: a warp a lane (the default) -------------------------- *
 * lane_code's two rANS chains split off from its lookups. A lane's runs go
 * CSTEP a step, one a thread (run j of a step: the j-th coded, backwards):
 *   recs   each run's groups made ready (the symbols' frequencies and
 *          cumulative counts, their reciprocals, the renormalisation
 *          bound, the raw fields): state A's group into ca[j], state B's
 *          0-3 groups into cb[] (by a prefix count over the runs); the
 *          lengths' prefix gives each run's start (its selector) and checks
 *          the lane as lane_code does;
 *   chain  thread 0 runs state A over ca[], thread 1 state B over cb[]: the
 *          same instructions (an absent symbol is f = 4096, c = 0, which
 *          leaves x as it is and the bound as lane_code's), each word it
 *          emits into its slot (run j's 4: B's three groups, then A's, the
 *          order in which lane_code emits them);
 *   emit   the slots' words into the stream in that order (a prefix count).
 * The lane's stream is lane_code's, byte for byte; the CPU build runs the
 * same steps as loops. */
#define CSTEP 32
#define CODE_WARPS 4

struct crec {
    uint64_t m1, m2;    /* x / f by multiplication (device) */
    uint32_t km1, rval; /* renormalise when x >> 32 > km1; then x << rnb | rval */
    uint16_t f1, c1, f2, c2;
    uint8_t rnb, sh1, sh2, slot;
};

static GMTF_HD inline void crec_of(crec &q, const rgroup &g, unsigned slot, const divs &d)
{
    (void)d;
    unsigned bits = g.rnb + (g.f1 ? PROB_BITS : 0) + (g.f2 ? PROB_BITS : 0);
    uint64_t freq = (uint64_t)(g.f1 ? g.f1 : 1) * (g.f2 ? g.f2 : 1);
    uint64_t k = freq << (32 - bits); /* >= 1 */
    q.km1 = k > (1ull << 32) ? 0xffffffffu : (uint32_t)(k - 1);
    q.rnb = (uint8_t)g.rnb;
    q.rval = g.rval;
    q.f1 = (uint16_t)(g.f1 ? g.f1 : 1u << PROB_BITS);
    q.c1 = (uint16_t)(g.f1 ? g.c1 : 0);
    q.f2 = (uint16_t)(g.f2 ? g.f2 : 1u << PROB_BITS);
    q.c2 = (uint16_t)(g.f2 ? g.c2 : 0);
    q.slot = (uint8_t)slot;
#ifdef GMTF_LANES_ENC_EMU
    q.m1 = q.m2 = 0;
    q.sh1 = q.sh2 = 0;
#else
    q.m1 = __ldg(d.rcp + q.f1);
    q.sh1 = __ldg(d.rsh + q.f1);
    q.m2 = __ldg(d.rcp + q.f2);
    q.sh2 = __ldg(d.rsh + q.f2);
#endif
}

static GMTF_HD inline uint64_t crec_step(uint64_t x, uint32_t f, uint32_t c, uint64_t m,
                                         unsigned sh)
{
#ifdef GMTF_LANES_ENC_EMU
    (void)m;
    (void)sh;
    uint64_t q = x / f;
#else
    uint64_t t = __umul64hi(m, x);
    uint64_t q = (t + ((x - t) >> (sh & 1))) >> (sh >> 1);
#endif
    return (q << PROB_BITS) + (x - q * f) + c;
}

/* g_put by a record: *w is the word emitted, *em whether there was one */
static GMTF_HD inline uint64_t crec_put(uint64_t x, const crec &q, uint32_t *w, int *em)
{
    *w = (uint32_t)x;
    *em = (uint32_t)(x >> 32) > q.km1;
    x = *em ? x >> 32 : x;
    x = x << q.rnb | q.rval;
    x = crec_step(x, q.f2, q.c2, q.m2, q.sh2);
    return crec_step(x, q.f1, q.c1, q.m1, q.sh1);
}

/* Run j's groups as records (lane_code's for one run): A's into *qa, B's
 * (0-3, lane_code's order) into qb; their count, or -1 where lane_code
 * gives the lane up. */
static GMTF_HD inline int run_recs(uint32_t len, uint32_t key, unsigned rkv, unsigned set,
                                   const uint16_t *cum, unsigned j, const divs &d, crec *qa,
                                   crec *qb)
{
    unsigned rkey = key & 0xffff, lkey = key >> 16;
    unsigned rsym = rkey & 15, lsym = lkey & 15;
    unsigned rtab = rkey >> 4, ltab = lkey >> 4;
    if (rtab >= TPS || ltab >= TPS)
        return -1;
    rgroup ga = {0, 0, 0, 0, 0, 0}, gb = {0, 0, 0, 0, 0, 0};
    g_sym1(ga, cum, set * TPS + rtab, rsym);
    g_sym2(ga, cum, set * TPS + ltab, lsym);
    unsigned v = rkv - e_rbase[rsym];
    if (rsym >= RSYM_BIG_FIRST) {
        g_sym1(gb, cum, T_OFF + rsym - RSYM_OFF_FIRST, (v >> 2) & 15);
        gb.rnb = 2;
        gb.rval = v & 3;
    } else if (rsym >= RSYM_OFF_FIRST) {
        g_sym1(gb, cum, T_OFF + rsym - RSYM_OFF_FIRST, v & 15);
    }
    int nb = 0;
    if (lsym == LSYM_ESC) {
        if (len < (1u << LBIG_MIN))
            return -1;
        unsigned eb = bitlen_m1(len), lo_bits = eb < 16 ? eb : 16;
        uint32_t low = len & ((1u << eb) - 1);
        rgroup g2 = {lo_bits, low >> (eb - lo_bits), 0, 0, 0, 0};
        g_sym1(g2, cum, T_LBIG, (eb - LBIG_MIN) & 15);
        rgroup g3 = {eb - lo_bits, low & ((1u << (eb - lo_bits)) - 1), 0, 0, 0, 0};
        if (g3.rnb)
            crec_of(qb[nb++], g3, 4 * j, d);
        crec_of(qb[nb++], g2, 4 * j + 1, d);
    } else if (e_lbits[lsym]) {
        gb.rval = (len - e_lbase[lsym]) << gb.rnb | gb.rval;
        gb.rnb += e_lbits[lsym];
    }
    if (gb.rnb || gb.f1)
        crec_of(qb[nb++], gb, 4 * j + 2, d);
    crec_of(*qa, ga, 4 * j + 3, d);
    return nb;
}

/* A step's emitted words in order: run j's flags (4 bytes, 0 or 1, slot s
 * at byte s) and its words; idx: the words emitted before run j. */
static GMTF_HD inline void emit_run(uint32_t fl, const uint32_t *word, uint64_t idx, uint8_t *hi,
                                    uint64_t room)
{
    for (unsigned s = 0; s < 4; s++) {
        if (!(fl >> (8 * s) & 1))
            continue;
        idx++;
        if (4 * idx <= room) {
            uint8_t *p = hi - 4 * idx;
            for (int q = 0; q < 4; q++)
                p[q] = (uint8_t)(word[s] >> (8 * q));
        }
    }
}

/* The lane's end: the two states in front, its length, or 0 where it does
 * not fit its room (lane_code's overflow). */
static GMTF_HD inline uint32_t lane_close(uint64_t xa, uint64_t xb, uint64_t nw, uint8_t *hi,
                                          uint64_t room)
{
    if (4 * nw + 16 > room)
        return 0;
    uint8_t *p = hi - 4 * nw - 16;
    for (int q = 0; q < 8; q++) {
        p[q] = (uint8_t)(xa >> (8 * q));
        p[8 + q] = (uint8_t)(xb >> (8 * q));
    }
    return (uint32_t)(4 * nw + 16);
}

struct code_shm {
    crec ca[CSTEP], cb[3 * CSTEP], tb[3 * CSTEP];
    uint32_t word[4 * CSTEP];
    uint32_t flag[CSTEP];
};

#ifdef GMTF_LANES_ENC_EMU
static uint32_t lane_code2(uint32_t a, uint32_t b, uint32_t k, const uint8_t *rk,
                           const uint16_t *keys, const uint32_t *rl, const uint8_t *sel,
                           const uint16_t *cum, uint8_t *lo, uint8_t *hi, const divs &d,
                           code_shm *s)
{
    uint64_t x[2] = {RANS_L, RANS_L}, i = b, room = (uint64_t)(hi - lo), nw = 0;
    for (uint32_t base = k; base > 0;) {
        uint32_t n = base < CSTEP ? base : CSTEP, nbt = 0;
        uint64_t incl = 0;
        for (unsigned t = 0; t < n; t++) {
            uint32_t r = base - 1 - t, len = rl[r];
            incl += len;
            if (len == 0 || incl > i - a)
                return 0;
            unsigned set = sel[(i - incl - a) / GROUP_BYTES] & (MAX_SETS - 1);
            int nb =
                run_recs(len, key_pair(keys, r), rk[r], set, cum, t, d, &s->ca[t], s->cb + nbt);
            if (nb < 0)
                return 0;
            nbt += (uint32_t)nb;
            s->flag[t] = 0;
        }
        for (unsigned t = 0; t < 2; t++) {
            const crec *list = t ? s->cb : s->ca;
            for (uint32_t q = 0, cnt = t ? nbt : n; q < cnt; q++) {
                uint32_t w;
                int em;
                x[t] = crec_put(x[t], list[q], &w, &em);
                if (em) {
                    s->word[list[q].slot] = w;
                    s->flag[list[q].slot / 4] |= 1u << (8 * (list[q].slot % 4));
                }
            }
        }
        for (unsigned t = 0; t < n; t++) {
            emit_run(s->flag[t], s->word + 4 * t, nw, hi, room);
            nw += (uint64_t)__builtin_popcount(s->flag[t]);
        }
        i -= incl;
        base -= n;
    }
    return i == a ? lane_close(x[0], x[1], nw, hi, room) : 0;
}
#else
static __device__ inline uint32_t wscan32(uint32_t v, unsigned t)
{
    for (unsigned o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(FULL, v, o);
        v += t >= o ? y : 0;
    }
    return v;
}

static __device__ inline uint64_t wscan64(uint64_t v, unsigned t)
{
    for (unsigned o = 1; o < 32; o <<= 1) {
        uint64_t y = __shfl_up_sync(FULL, v, o);
        v += t >= o ? y : 0;
    }
    return v;
}

static __device__ uint32_t lane_code2(uint32_t a, uint32_t b, uint32_t k, const uint8_t *rk,
                                      const uint16_t *keys, const uint32_t *rl, const uint8_t *sel,
                                      const uint16_t *cum, uint8_t *lo, uint8_t *hi, const divs &d,
                                      code_shm *s, unsigned t)
{
    uint64_t x = RANS_L, i = b, room = (uint64_t)(hi - lo), nw = 0;
    s->flag[t] = 0;
    for (uint32_t base = k; base > 0;) {
        uint32_t n = base < CSTEP ? base : CSTEP, r = base - 1 - t, len = 0, key = 0;
        unsigned rkv = 0;
        if (t < n) {
            len = rl[r];
            key = key_pair(keys, r);
            rkv = rk[r];
        }
        uint64_t incl = wscan64(len, t), tot = __shfl_sync(FULL, incl, 31);
        int nb = 0;
        if (t < n) {
            if (len == 0 || incl > i - a) {
                nb = -1;
            } else {
                unsigned set = sel[(i - incl - a) / GROUP_BYTES] & (MAX_SETS - 1);
                nb = run_recs(len, key, rkv, set, cum, t, d, &s->ca[t], s->tb + 3 * t);
            }
        }
        if (__any_sync(FULL, nb < 0))
            return 0;
        uint32_t at = wscan32((uint32_t)nb, t), nbt = __shfl_sync(FULL, at, 31);
        at -= (uint32_t)nb;
        for (int q = 0; q < nb; q++)
            s->cb[at + q] = s->tb[3 * t + q];
        __syncwarp();
        if (t < 2) {
            const crec *list = t ? s->cb : s->ca;
            uint32_t cnt = t ? nbt : n;
            for (uint32_t q = 0; q < cnt; q++) {
                crec c = list[q];
                uint32_t w;
                int em;
                x = crec_put(x, c, &w, &em);
                if (em) {
                    s->word[c.slot] = w;
                    ((uint8_t *)s->flag)[c.slot] = 1;
                }
            }
        }
        __syncwarp();
        uint32_t fl = s->flag[t], c = (uint32_t)__popc(fl), ex = wscan32(c, t);
        if (fl)
            emit_run(fl, s->word + 4 * t, nw + ex - c, hi, room);
        nw += __shfl_sync(FULL, ex, 31);
        s->flag[t] = 0;
        __syncwarp();
        i -= tot;
        base -= n;
    }
    uint64_t xa = __shfl_sync(FULL, x, 0), xb = __shfl_sync(FULL, x, 1);
    return i == a ? lane_close(xa, xb, nw, hi, room) : 0;
}
#endif

static GMTF_HD void code_one2(const enc_args &e, size_t blk, unsigned j, code_shm *s, unsigned t)
{
#ifdef GMTF_LANES_ENC_EMU
    (void)t;
#endif
    uint64_t o = e.off[blk], n = e.off[blk + 1] - o;
    uint32_t a, b, gb;
    lane_geom(n, j, &a, &b, &gb);
    size_t L = blk * GMTF_GPU_LANES + j;
    uint32_t len = 0;
    if (!e.skip || !e.skip[blk]) {
        uint64_t hi = room_end(o, b, L), lo = hi - 2 * (uint64_t)(b - a) - 64;
        len = lane_code2(a, b, e.runs[L], e.rk + o + a, e.keys + 2 * (o + a), e.rl + o + a,
                         e.sel + blk * MAX_GROUPS + gb, e.cum + blk * NTAB * CUMW, e.room + lo,
                         e.room + hi, e.d, s
#ifndef GMTF_LANES_ENC_EMU
                         ,
                         t
#endif
        );
    }
    if (t == 0)
        e.len[L] = len;
}

/* ---- plan: method 2's statistics and selectors of one block ---------------- *
 * codec/entropy_lanes.c's plan step for the table set counts 1 and 2
 * (choose_selectors), over the scan's outputs where they lie: one CTA a
 * block. The same integer arithmetic as the CPU's, so that the host's
 * choice between the two (its header estimate) and the tables it
 * quantises are the CPU's:
 *   A     each group's mean rank symbol (<< 8), the block's counts (one
 *         set), the runs with big ranks, the scan's keys checked;
 *   Q     the groups' rank by (mean, index): the first selectors, as
 *         quantiles (rank * 2 / groups);
 *   C     counts by set, each set's costs (normalise and log2 as
 *         set_costs);
 *   I x 3 each group to its cheapest set (ties to set 0), counted anew.
 * The estimates are sum(count * cost) over the sets' keys: what the CPU
 * sums group by group. Counts in shared memory (PLAN_NH copies against
 * contention), costs beside them. */
#define PLAN_SETS GMTF_GPU_LANES_PLAN_SETS
#define PLAN_KEYS (TPS * NSYM)
#define PLAN_NH 2
#ifdef GMTF_LANES_ENC_EMU
#define PLAN_THREADS 1
#define PLAN_WL 1 /* threads of a warp */
#define PLAN_SYNC() ((void)0)
#define PLAN_ADD32(p, v) (*(p) += (v))
#define PLAN_ADD64(p, v) (*(p) += (v))
#else
#define PLAN_THREADS 1024
#define PLAN_WL 32
#define PLAN_SYNC() __syncthreads()
#define PLAN_ADD32(p, v) atomicAdd((p), (v))
#define PLAN_ADD64(p, v) atomicAdd((unsigned long long *)(p), (unsigned long long)(v))
#endif

struct plan_shm {
    uint32_t hist[PLAN_NH][PLAN_SETS][PLAN_KEYS];
    uint16_t cost[PLAN_SETS][PLAN_KEYS];
    uint16_t lg[(1u << PROB_BITS) + 1];
    uint32_t gst[MAX_GROUPS], gen[MAX_GROUPS], gkey[MAX_GROUPS];
    uint8_t sel[MAX_GROUPS];
    uint32_t bad, big;
    uint64_t est;
};

struct plan_args {
    const uint64_t *off;
    const uint8_t *rk;
    const uint32_t *keys; /* the scan's key pairs (rank key low, length key high) */
    const uint32_t *runs;
    const uint32_t *gstart;
    uint32_t big_rank;
    gmtf_gpu_lanes_plan *out;
    uint8_t *psel;
};

/* log2(f) * 256, integer only (codec/entropy_lanes.c's init_log2). */
static GMTF_HD inline uint16_t plan_log2(uint32_t f)
{
    if (f == 0)
        return 0;
    unsigned k = top_bit(f);
    uint64_t y = (uint64_t)f << (32 - k);
    uint32_t frac = 0;
    for (int i = 0; i < 8; i++) {
        y = (y >> 16) * (y >> 16);
        frac <<= 1;
        if (y >= (1ull << 33)) {
            y >>= 1;
            frac |= 1;
        }
    }
    return (uint16_t)(k * 256 + frac);
}

/* Table t of set s: its costs from the merged counts (normalise, then
 * 12 - log2 f in 1/256 bits, 24 bits for f = 0), and sum(count * cost)
 * into *est when est is set. */
static GMTF_HD void plan_costs(plan_shm *m, unsigned s, unsigned t, uint64_t *est)
{
    const uint32_t *w = &m->hist[0][s][t * NSYM];
    uint64_t tot = 0;
    unsigned best = 0;
    for (unsigned y = 0; y < NSYM; y++) {
        tot += w[y];
        if (w[y] > w[best])
            best = y;
    }
    uint32_t f[NSYM];
    if (tot == 0) {
        for (unsigned y = 0; y < NSYM; y++)
            f[y] = (1u << PROB_BITS) / NSYM;
    } else {
        uint32_t sum = 0;
        for (unsigned y = 0; y < NSYM; y++) {
            uint32_t v = (uint32_t)((uint64_t)w[y] * (1u << PROB_BITS) / tot);
            f[y] = w[y] && !v ? 1 : v;
            sum += f[y];
        }
        f[best] = f[best] + (1u << PROB_BITS) - sum;
    }
    uint64_t e = 0;
    for (unsigned y = 0; y < NSYM; y++) {
        uint16_t c = (uint16_t)(f[y] ? 12 * 256 - m->lg[f[y]] : 24 * 256);
        m->cost[s][t * NSYM + y] = c;
        e += (uint64_t)w[y] * c;
    }
    if (est && e)
        PLAN_ADD64(est, e);
}

/* The copies of the counts summed into copy 0 (sets < nsets). */
static GMTF_HD void plan_merge(plan_shm *m, unsigned nsets, unsigned tid)
{
    uint32_t *base = &m->hist[0][0][0];
    for (unsigned i = tid; i < nsets * PLAN_KEYS; i += PLAN_THREADS) {
        uint32_t v = 0; /* i = set * PLAN_KEYS + key */
        for (unsigned h = 0; h < PLAN_NH; h++)
            v += base[h * PLAN_SETS * PLAN_KEYS + i];
        base[i] = v;
    }
}

static GMTF_HD void plan_zero(plan_shm *m, unsigned tid)
{
    uint32_t *h = &m->hist[0][0][0];
    for (unsigned i = tid; i < PLAN_NH * PLAN_SETS * PLAN_KEYS; i += PLAN_THREADS)
        h[i] = 0;
}

#ifdef GMTF_LANES_ENC_EMU
#define PLAN_WSUM(v) (v)
#else
template <typename T> static __device__ inline T plan_wsum(T v)
{
    for (int d = 16; d; d >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}
#define PLAN_WSUM(v) plan_wsum(v)
#endif

static GMTF_HD void plan_block(const plan_args &p, size_t blk, plan_shm *m, unsigned tid)
{
    const unsigned lane = tid % PLAN_WL, warp = tid / PLAN_WL, nw = PLAN_THREADS / PLAN_WL;
    uint64_t o = p.off[blk], n = p.off[blk + 1] - o;
    const uint8_t *rk = p.rk + o;
    const uint32_t *keys = p.keys + o;
    gmtf_gpu_lanes_plan *out = p.out + blk;
    uint32_t ng, a, b, gb;
    lane_geom(n, GMTF_GPU_LANES - 1, &a, &b, &gb);
    ng = gb + (b - a + GROUP_BYTES - 1) / GROUP_BYTES;

    for (unsigned f = tid; f <= (1u << PROB_BITS); f += PLAN_THREADS)
        m->lg[f] = plan_log2(f);
    plan_zero(m, tid);
    if (tid == 0) {
        m->bad = 0;
        m->big = 0;
        m->est = 0;
    }
    PLAN_SYNC();
    /* the groups' runs (block-relative run addresses), checked as the
     * host checks them: ascending, within the lane, the first at 0 */
    uint32_t total = 0;
    for (unsigned j = 0; j < GMTF_GPU_LANES; j++) {
        lane_geom(n, j, &a, &b, &gb);
        uint32_t k = p.runs[blk * GMTF_GPU_LANES + j], lg = (b - a + GROUP_BYTES - 1) / GROUP_BYTES;
        total += k;
        if (j % PLAN_THREADS != tid)
            continue;
        int bad = k > b - a || (k == 0) != (a == b);
        if (k > b - a)
            k = b - a;
        const uint32_t *gs = p.gstart + blk * MAX_GROUPS + gb;
        uint32_t prev = 0;
        for (uint32_t g = 0; g < lg; g++) {
            uint32_t v = gs[g];
            if (v < prev || v > k || (g == 0 && v != 0)) {
                bad = 1;
                v = prev; /* kept in range */
            }
            m->gst[gb + g] = a + v;
            if (g)
                m->gen[gb + g - 1] = a + v;
            prev = v;
        }
        if (lg)
            m->gen[gb + lg - 1] = a + k;
        if (bad)
            m->bad = 1;
    }
    PLAN_SYNC();

    /* A: means, the one-set counts, big ranks, the keys checked */
    uint32_t big = 0;
    for (uint32_t g = warp; g < ng; g += nw) {
        uint32_t r0 = m->gst[g], r1 = m->gen[g], sum = 0;
        uint32_t *h = m->hist[warp % PLAN_NH][0];
        int bad = 0;
        for (uint32_t r = r0 + lane; r < r1; r += PLAN_WL) {
            uint32_t kp = keys[r], k0 = kp & 0xffff, k1 = kp >> 16, rv = rk[r];
            if ((k0 & 15) != (rv ? rsym_of(rv) : RSYM_RETIRE) || k0 >> 4 >= NRCTX ||
                k1 >> 4 < NRCTX || k1 >> 4 >= TPS) {
                bad = 1;
                continue;
            }
            big += rv >= p.big_rank;
            sum += k0 & 15;
            PLAN_ADD32(&h[k0], 1u);
            PLAN_ADD32(&h[k1], 1u);
        }
        sum = PLAN_WSUM(sum);
        if (bad)
            m->bad = 1;
        if (lane == 0)
            m->gkey[g] = r1 > r0 ? (uint32_t)(((uint64_t)sum << 8) / (r1 - r0)) : 0;
    }
    big = PLAN_WSUM(big);
    if (lane == 0 && big)
        PLAN_ADD32(&m->big, big);
    PLAN_SYNC();
    plan_merge(m, 1, tid);
    PLAN_SYNC();
    for (unsigned i = tid; i < PLAN_KEYS; i += PLAN_THREADS)
        out->cnt1[i] = m->hist[0][0][i];
    for (unsigned t = tid; t < TPS; t += PLAN_THREADS)
        plan_costs(m, 0, t, &m->est);
    /* Q: the first selectors by the groups' rank */
    for (uint32_t g = tid; g < ng; g += PLAN_THREADS) {
        uint32_t kg = m->gkey[g], rank = 0;
        for (uint32_t h = 0; h < ng; h++)
            rank += m->gkey[h] < kg || (m->gkey[h] == kg && h < g);
        m->sel[g] = (uint8_t)((uint64_t)rank * PLAN_SETS / ng);
    }
    PLAN_SYNC();
    if (tid == 0) {
        out->est[0] = m->est;
        m->est = 0;
    }
    plan_zero(m, tid);
    PLAN_SYNC();
    /* C, then I x 3 (the last counts and costs are the result) */
    for (int it = 0; it <= 3; it++) {
        for (uint32_t g = warp; g < ng; g += nw) {
            uint32_t r0 = m->gst[g], r1 = m->gen[g];
            unsigned s = it == 0 ? m->sel[g] : 0;
            if (it > 0) {
                uint64_t c0 = 0, c1 = 0;
                for (uint32_t r = r0 + lane; r < r1; r += PLAN_WL) {
                    uint32_t kp = keys[r], k0 = kp & 0xffff, k1 = kp >> 16;
                    if (k0 >= PLAN_KEYS || k1 >= PLAN_KEYS)
                        continue; /* a bad key: the block is not used */
                    c0 += (uint32_t)m->cost[0][k0] + m->cost[0][k1];
                    c1 += (uint32_t)m->cost[1][k0] + m->cost[1][k1];
                }
                c0 = PLAN_WSUM(c0);
                c1 = PLAN_WSUM(c1);
                s = c1 < c0 ? 1 : 0;
                if (lane == 0)
                    m->sel[g] = (uint8_t)s;
            }
            uint32_t *h = m->hist[warp % PLAN_NH][s];
            for (uint32_t r = r0 + lane; r < r1; r += PLAN_WL) {
                uint32_t kp = keys[r], k0 = kp & 0xffff, k1 = kp >> 16;
                if (k0 >= PLAN_KEYS || k1 >= PLAN_KEYS)
                    continue;
                PLAN_ADD32(&h[k0], 1u);
                PLAN_ADD32(&h[k1], 1u);
            }
        }
        PLAN_SYNC();
        plan_merge(m, PLAN_SETS, tid);
        PLAN_SYNC();
        for (unsigned i = tid; i < PLAN_SETS * TPS; i += PLAN_THREADS)
            plan_costs(m, i / TPS, i % TPS, it == 3 ? &m->est : NULL);
        PLAN_SYNC();
        if (it < 3) {
            plan_zero(m, tid);
            PLAN_SYNC();
        }
    }
    for (unsigned i = tid; i < PLAN_SETS * PLAN_KEYS; i += PLAN_THREADS)
        out->cnt2[i / PLAN_KEYS][i % PLAN_KEYS] = m->hist[0][i / PLAN_KEYS][i % PLAN_KEYS];
    for (uint32_t g = tid; g < ng; g += PLAN_THREADS)
        p.psel[blk * MAX_GROUPS + g] = m->sel[g];
    if (tid == 0) {
        out->est[1] = m->est;
        out->bad = m->bad;
        out->big = m->big;
        out->runs = total;
        out->ng = ng;
    }
}

/* ---- context ------------------------------------------------------------------ */

struct dbuf {
    void *p;
    size_t cap;
};

struct gmtf_gpu_lanes_enc {
    int ok;
    char err[256];
    size_t count;    /* blocks of the last scan */
    uint64_t nbytes; /* their bytes */
    int scanned;
    float ms[3]; /* the last scan, code and plan kernels' device time */
    dbuf crk, ckeys, roff, bwt, off, rk, keys, rl, runs, init, ninit, gstart, shared, sel, cum,
        room, len, pos, packed, skip, plans, psel;
    /* the device-fed calls' host side (pinned; gmtf_gpu_lanes_enc_scan_dev) */
    dbuf h_rk, h_keys, h_runs, h_roff, h_init, h_ninit, h_gstart, h_shared, h_sel, h_cum, h_len,
        h_pos, h_streams, h_skip, h_plans, h_psel;
    int use_skip;
    dbuf rcp, rsh; /* the reciprocals of 1..65535 (device) */
    int lpw;       /* the code step's lanes a warp (lane_code's kernel) */
    int code1;     /* GMTF_GPU_ENC_CODE=1: lane_code's kernel, not code_one2's */
#ifndef GMTF_LANES_ENC_EMU
    cudaStream_t st;
    cudaEvent_t ev[4];
#endif
    int dev; /* the CUDA device its memory and stream are on */
};

static int set_err(gmtf_gpu_lanes_enc *c, int rc, const char *what, const char *detail)
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

static enc_args args_of(gmtf_gpu_lanes_enc *c)
{
    enc_args e;
    e.bwt = (const uint8_t *)c->bwt.p;
    e.off = (const uint64_t *)c->off.p;
    e.rk = (uint8_t *)c->rk.p;
    e.keys = (uint16_t *)c->keys.p;
    e.rl = (uint32_t *)c->rl.p;
    e.runs = (uint32_t *)c->runs.p;
    e.init = (uint8_t *)c->init.p;
    e.ninit = (uint16_t *)c->ninit.p;
    e.gstart = (uint32_t *)c->gstart.p;
    e.shared = (uint32_t *)c->shared.p;
    e.sel = (const uint8_t *)c->sel.p;
    e.cum = (const uint16_t *)c->cum.p;
    e.room = (uint8_t *)c->room.p;
    e.len = (uint32_t *)c->len.p;
    e.skip = c->use_skip ? (const uint8_t *)c->skip.p : NULL;
    e.d.rcp = (const uint64_t *)c->rcp.p;
    e.d.rsh = (const uint8_t *)c->rsh.p;
    return e;
}

/* GMTF_GPU_ENC_CODE=1: the code step by lane_code (a thread a lane), as
 * before the records */
static int code_version_1(void)
{
    const char *v = getenv("GMTF_GPU_ENC_CODE");
    return v && v[0] == '1' && !v[1];
}

#ifndef GMTF_LANES_ENC_EMU

static int cuda_fail(gmtf_gpu_lanes_enc *c, cudaError_t e, const char *what)
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

/* The code step by lane_code (GMTF_GPU_ENC_CODE=1): one thread a lane, one
 * block a CTA (k_code below): a batch has few blocks (128 of 2 MiB in 256
 * MiB), so that they spread over the SMs. The scan: one warp a lane, SCAN_WARPS lanes a CTA, each warp's lists,
 * histories and counts in shared memory. */
#define SCAN_WARPS 4

__global__ void __launch_bounds__(32 * SCAN_WARPS) k_scan(enc_args e, size_t count)
{
    __shared__ __align__(16) uint8_t sh[SCAN_WARPS * SCAN_TMP];
    size_t w = (size_t)blockIdx.x * SCAN_WARPS + threadIdx.x / 32;
    size_t blk = w / GMTF_GPU_LANES;
    if (blk >= count)
        return; /* a whole warp: the warp-wide steps never see a missing thread */
    scan_one(e, blk, (unsigned)(w % GMTF_GPU_LANES), sh + (threadIdx.x / 32) * SCAN_TMP,
             threadIdx.x % 32);
}

/* LPW lanes a warp, one block a CTA (as gpu/lanes.cu's decoder): a
 * block's 32 serial chains over 32 / LPW warps. */
template <int LPW>
__global__ void __launch_bounds__(GMTF_GPU_LANES / LPW * 32) k_code(enc_args e, size_t count)
{
    size_t blk = blockIdx.x;
    unsigned t = threadIdx.x % 32;
    if (blk >= count || t >= LPW)
        return;
    code_one(e, blk, threadIdx.x / 32 * LPW + t);
}

/* The code step by records (code_one2): a warp a lane, CODE_WARPS lanes a
 * CTA. */
__global__ void __launch_bounds__(32 * CODE_WARPS) k_code2(enc_args e, size_t count)
{
    __shared__ code_shm sh[CODE_WARPS];
    size_t w = (size_t)blockIdx.x * CODE_WARPS + threadIdx.x / 32;
    size_t blk = w / GMTF_GPU_LANES;
    if (blk >= count)
        return; /* a whole warp */
    code_one2(e, blk, (unsigned)(w % GMTF_GPU_LANES), &sh[threadIdx.x / 32], threadIdx.x % 32);
}

/* Lanes a warp of k_code, lane_code's kernel (GMTF_GPU_ENC_CODE=1):
 * GMTF_GPU_ENC_LPW (32, 16, 8 or 4) or the default. */
#define LPW_DEFAULT 8
static int lanes_per_warp(void)
{
    const char *v = getenv("GMTF_GPU_ENC_LPW");
    int n = v && *v ? atoi(v) : LPW_DEFAULT;
    return n == 32 || n == 16 || n == 8 || n == 4 ? n : LPW_DEFAULT;
}

/* Lane streams packed: one CTA a lane, its threads copy. */
__global__ void k_pack(const uint8_t *room, const uint64_t *off, const uint32_t *len,
                       const uint64_t *pos, uint8_t *packed)
{
    size_t L = blockIdx.x, blk = L / GMTF_GPU_LANES;
    uint64_t o = off[blk], n = off[blk + 1] - o;
    uint32_t a, b, gb;
    lane_geom(n, (unsigned)(L % GMTF_GPU_LANES), &a, &b, &gb);
    uint64_t hi = room_end(o, b, L);
    uint32_t l = len[L];
    for (uint32_t i = threadIdx.x; i < l; i += blockDim.x)
        packed[pos[L] + i] = room[hi - l + i];
}

/* The scan's ranks and keys, lane by lane back to back (roff: each lane's
 * first run): one CTA a lane. */
__global__ void k_compact(const uint64_t *off, const uint32_t *runs, const uint64_t *roff,
                          const uint8_t *rk, const uint32_t *keys, uint8_t *crk, uint32_t *ckeys)
{
    size_t L = blockIdx.x, blk = L / GMTF_GPU_LANES;
    uint64_t o = off[blk];
    uint32_t a, b, gb;
    lane_geom(off[blk + 1] - o, (unsigned)(L % GMTF_GPU_LANES), &a, &b, &gb);
    uint64_t from = o + a, to = roff[L];
    for (uint32_t i = threadIdx.x; i < runs[L]; i += blockDim.x) {
        crk[to + i] = rk[from + i];
        ckeys[to + i] = keys[from + i];
    }
}

static int run_compact(gmtf_gpu_lanes_enc *c)
{
    k_compact<<<(unsigned)(c->count * GMTF_GPU_LANES), 256, 0, c->st>>>(
        (const uint64_t *)c->off.p, (const uint32_t *)c->runs.p, (const uint64_t *)c->roff.p,
        (const uint8_t *)c->rk.p, (const uint32_t *)c->keys.p, (uint8_t *)c->crk.p,
        (uint32_t *)c->ckeys.p);
    CK(c, cudaGetLastError());
    return 0;
}

/* The plan: one CTA a block (plan_block). */
__global__ void __launch_bounds__(PLAN_THREADS) k_plan(plan_args p)
{
    extern __shared__ __align__(16) uint8_t plan_sh[];
    plan_block(p, blockIdx.x, (plan_shm *)plan_sh, threadIdx.x);
}

/* CUDA's current device is the calling thread's: the entry points that
 * launch or copy make the context's device current first. */
static int use_device(gmtf_gpu_lanes_enc *c)
{
    cudaError_t e = cudaSetDevice(c->dev);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, "cudaSetDevice");
}

static int backend_open(gmtf_gpu_lanes_enc *c)
{
    if (c->dev >= gmtf_gpu_device_count() || !gmtf_gpu_available())
        return -ENODEV;
    if (cudaSetDevice(c->dev) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&c->ev[0]) != cudaSuccess || cudaEventCreate(&c->ev[1]) != cudaSuccess ||
        cudaEventCreate(&c->ev[2]) != cudaSuccess || cudaEventCreate(&c->ev[3]) != cudaSuccess ||
        cudaFuncSetAttribute(k_plan, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)sizeof(plan_shm)) != cudaSuccess) {
        cudaGetLastError();
        return -ENODEV;
    }
    c->lpw = lanes_per_warp();
    c->code1 = code_version_1();
    return 0;
}

static int dev_reserve(gmtf_gpu_lanes_enc *c, dbuf *b, size_t bytes);
static int h2d(gmtf_gpu_lanes_enc *c, void *d, const void *h, size_t n);

/* The reciprocal of every 16-bit f (codec/entropy_lanes.c's set_reciprocal),
 * uploaded once: the code step divides by multiplying. */
static int rcp_init(gmtf_gpu_lanes_enc *c)
{
    enum { NF = 1 << 16 };
    uint64_t *m = (uint64_t *)malloc(NF * 8);
    uint8_t *sh = (uint8_t *)malloc(NF);
    int rc = m && sh ? 0 : -ENOMEM;
    for (uint32_t f = 1; f < NF && !rc; f++) {
        unsigned l = 0;
        while ((1u << l) < f)
            l++;
        unsigned __int128 num = (unsigned __int128)((1ull << l) - f) << 64;
        m[f] = (uint64_t)(num / f) + 1;
        sh[f] = (uint8_t)(l ? (l - 1) << 1 | 1 : 0);
    }
    if (!rc) {
        m[0] = 0;
        sh[0] = 0;
        rc = dev_reserve(c, &c->rcp, NF * 8);
    }
    if (!rc)
        rc = dev_reserve(c, &c->rsh, NF);
    if (!rc)
        rc = h2d(c, c->rcp.p, m, NF * 8);
    if (!rc)
        rc = h2d(c, c->rsh.p, sh, NF);
    if (!rc && cudaStreamSynchronize(c->st) != cudaSuccess)
        rc = -EIO;
    free(m);
    free(sh);
    return rc;
}

static void backend_close(gmtf_gpu_lanes_enc *c)
{
    if (c->st) {
        cudaStreamSynchronize(c->st);
        cudaStreamDestroy(c->st);
    }
    for (int i = 0; i < 4; i++)
        if (c->ev[i])
            cudaEventDestroy(c->ev[i]);
    cudaGetLastError();
}

static int dev_reserve(gmtf_gpu_lanes_enc *c, dbuf *b, size_t bytes)
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

static int h2d(gmtf_gpu_lanes_enc *c, void *d, const void *h, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, c->st));
    return 0;
}

static int d2d(gmtf_gpu_lanes_enc *c, void *d, const void *s, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, c->st));
    return 0;
}

/* Pinned host memory, grown (never shrunk) and reused: by
 * gmtf_gpu_host_alloc (large buffers registered, docs/gpu.md pipe11: a
 * first code step spent ~20 ms in cudaHostAlloc at exact sizes, pipe12),
 * with a quarter more than asked so that a batch a little larger than the
 * last (mkfs's windows differ) does not allocate again. */
static int host_reserve(gmtf_gpu_lanes_enc *c, dbuf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return 0;
    if (b->p)
        gmtf_gpu_host_free(b->p);
    b->p = NULL;
    b->cap = 0;
    size_t want = bytes + bytes / 4;
    b->p = gmtf_gpu_host_alloc(want);
    if (!b->p)
        return cuda_fail(c, cudaErrorMemoryAllocation, "gmtf_gpu_host_alloc");
    b->cap = want;
    return 0;
}

static void host_free(dbuf *b)
{
    if (b->p)
        gmtf_gpu_host_free(b->p);
    b->p = NULL;
    b->cap = 0;
}

static int d2h(gmtf_gpu_lanes_enc *c, void *h, const void *d, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, c->st));
    return 0;
}

static int run_scan(gmtf_gpu_lanes_enc *c)
{
    size_t lanes = c->count * GMTF_GPU_LANES;
    unsigned grid = (unsigned)((lanes + SCAN_WARPS - 1) / SCAN_WARPS);
    CK(c, cudaEventRecord(c->ev[0], c->st));
    k_scan<<<grid, 32 * SCAN_WARPS, 0, c->st>>>(args_of(c), c->count);
    CK(c, cudaGetLastError());
    CK(c, cudaEventRecord(c->ev[1], c->st));
    return 0;
}

static int run_code(gmtf_gpu_lanes_enc *c)
{
    unsigned grid = (unsigned)c->count;
    enc_args e = args_of(c);
    CK(c, cudaEventRecord(c->ev[0], c->st));
    if (!c->code1) {
        size_t lanes = c->count * GMTF_GPU_LANES;
        k_code2<<<(unsigned)((lanes + CODE_WARPS - 1) / CODE_WARPS), 32 * CODE_WARPS, 0, c->st>>>(
            e, c->count);
    } else {
        switch (c->lpw) {
        case 32: k_code<32><<<grid, 32, 0, c->st>>>(e, c->count); break;
        case 16: k_code<16><<<grid, 64, 0, c->st>>>(e, c->count); break;
        case 4: k_code<4><<<grid, 256, 0, c->st>>>(e, c->count); break;
        default: k_code<8><<<grid, 128, 0, c->st>>>(e, c->count); break;
        }
    }
    CK(c, cudaGetLastError());
    CK(c, cudaEventRecord(c->ev[1], c->st));
    return 0;
}

static plan_args plan_args_of(gmtf_gpu_lanes_enc *c, unsigned big_rank)
{
    plan_args p;
    p.off = (const uint64_t *)c->off.p;
    p.rk = (const uint8_t *)c->rk.p;
    p.keys = (const uint32_t *)c->keys.p;
    p.runs = (const uint32_t *)c->runs.p;
    p.gstart = (const uint32_t *)c->gstart.p;
    p.big_rank = big_rank;
    p.out = (gmtf_gpu_lanes_plan *)c->plans.p;
    p.psel = (uint8_t *)c->psel.p;
    return p;
}

static int run_plan(gmtf_gpu_lanes_enc *c, unsigned big_rank)
{
    CK(c, cudaEventRecord(c->ev[2], c->st));
    k_plan<<<(unsigned)c->count, PLAN_THREADS, sizeof(plan_shm), c->st>>>(
        plan_args_of(c, big_rank));
    CK(c, cudaGetLastError());
    CK(c, cudaEventRecord(c->ev[3], c->st));
    return 0;
}

/* after a sync: the kernel's time between the events */
static void kernel_ms(gmtf_gpu_lanes_enc *c, int which)
{
    float ms = 0;
    if (cudaEventElapsedTime(&ms, c->ev[which == 2 ? 2 : 0], c->ev[which == 2 ? 3 : 1]) !=
        cudaSuccess) {
        cudaGetLastError();
        ms = 0;
    }
    c->ms[which] = ms;
}

static int run_pack(gmtf_gpu_lanes_enc *c)
{
    k_pack<<<(unsigned)(c->count * GMTF_GPU_LANES), 128, 0, c->st>>>(
        (const uint8_t *)c->room.p, (const uint64_t *)c->off.p, (const uint32_t *)c->len.p,
        (const uint64_t *)c->pos.p, (uint8_t *)c->packed.p);
    CK(c, cudaGetLastError());
    return 0;
}

static int sync(gmtf_gpu_lanes_enc *c)
{
    CK(c, cudaStreamSynchronize(c->st));
    return 0;
}

#else /* GMTF_LANES_ENC_EMU */

static int use_device(gmtf_gpu_lanes_enc *)
{
    return 0;
}

static int backend_open(gmtf_gpu_lanes_enc *c)
{
    c->code1 = code_version_1();
    return 0;
}

static void backend_close(gmtf_gpu_lanes_enc *)
{
}

static int rcp_init(gmtf_gpu_lanes_enc *)
{
    return 0;
}

static int dev_reserve(gmtf_gpu_lanes_enc *c, dbuf *b, size_t bytes)
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

static int h2d(gmtf_gpu_lanes_enc *, void *d, const void *h, size_t n)
{
    if (n)
        memcpy(d, h, n);
    return 0;
}

static int d2d(gmtf_gpu_lanes_enc *, void *d, const void *s, size_t n)
{
    if (n)
        memcpy(d, s, n);
    return 0;
}

static int host_reserve(gmtf_gpu_lanes_enc *c, dbuf *b, size_t bytes)
{
    return dev_reserve(c, b, bytes);
}

static void host_free(dbuf *b)
{
    dev_free(b);
}

static int d2h(gmtf_gpu_lanes_enc *, void *h, const void *d, size_t n)
{
    if (n)
        memcpy(h, d, n);
    return 0;
}

static int run_scan(gmtf_gpu_lanes_enc *c)
{
    enc_args e = args_of(c);
    uint64_t tmp[SCAN_TMP / 8];
    for (size_t b = 0; b < c->count; b++)
        for (unsigned j = 0; j < GMTF_GPU_LANES; j++)
            scan_one(e, b, j, (uint8_t *)tmp, 0);
    return 0;
}

static int run_code(gmtf_gpu_lanes_enc *c)
{
    enc_args e = args_of(c);
    code_shm *s = c->code1 ? NULL : (code_shm *)malloc(sizeof *s);
    if (!c->code1 && !s)
        return set_err(c, -ENOMEM, "malloc", "out of memory");
    for (size_t b = 0; b < c->count; b++)
        for (unsigned j = 0; j < GMTF_GPU_LANES; j++) {
            if (s)
                code_one2(e, b, j, s, 0);
            else
                code_one(e, b, j);
        }
    free(s);
    return 0;
}

static int run_pack(gmtf_gpu_lanes_enc *c)
{
    const uint64_t *off = (const uint64_t *)c->off.p, *pos = (const uint64_t *)c->pos.p;
    const uint32_t *len = (const uint32_t *)c->len.p;
    for (size_t L = 0; L < c->count * GMTF_GPU_LANES; L++) {
        size_t blk = L / GMTF_GPU_LANES;
        uint32_t a, b, gb;
        lane_geom(off[blk + 1] - off[blk], (unsigned)(L % GMTF_GPU_LANES), &a, &b, &gb);
        uint64_t hi = room_end(off[blk], b, L);
        memcpy((uint8_t *)c->packed.p + pos[L], (const uint8_t *)c->room.p + hi - len[L], len[L]);
    }
    return 0;
}

static int sync(gmtf_gpu_lanes_enc *)
{
    return 0;
}

static int run_compact(gmtf_gpu_lanes_enc *c)
{
    const uint64_t *off = (const uint64_t *)c->off.p, *roff = (const uint64_t *)c->roff.p;
    const uint32_t *runs = (const uint32_t *)c->runs.p;
    for (size_t L = 0; L < c->count * GMTF_GPU_LANES; L++) {
        size_t blk = L / GMTF_GPU_LANES;
        uint32_t a, b, gb;
        lane_geom(off[blk + 1] - off[blk], (unsigned)(L % GMTF_GPU_LANES), &a, &b, &gb);
        memcpy((uint8_t *)c->crk.p + roff[L], (const uint8_t *)c->rk.p + off[blk] + a, runs[L]);
        memcpy((uint32_t *)c->ckeys.p + roff[L], (const uint32_t *)c->keys.p + off[blk] + a,
               4 * (size_t)runs[L]);
    }
    return 0;
}

static void kernel_ms(gmtf_gpu_lanes_enc *, int)
{
}

static int run_plan(gmtf_gpu_lanes_enc *c, unsigned big_rank)
{
    plan_args p;
    p.off = (const uint64_t *)c->off.p;
    p.rk = (const uint8_t *)c->rk.p;
    p.keys = (const uint32_t *)c->keys.p;
    p.runs = (const uint32_t *)c->runs.p;
    p.gstart = (const uint32_t *)c->gstart.p;
    p.big_rank = big_rank;
    p.out = (gmtf_gpu_lanes_plan *)c->plans.p;
    p.psel = (uint8_t *)c->psel.p;
    plan_shm *m = (plan_shm *)malloc(sizeof *m);
    if (!m)
        return set_err(c, -ENOMEM, "malloc", "out of memory");
    for (size_t b = 0; b < c->count; b++)
        plan_block(p, b, m, 0);
    free(m);
    return 0;
}

#endif

/* ---- API ---------------------------------------------------------------------- */

extern "C" int gmtf_gpu_lanes_enc_create(gmtf_gpu_lanes_enc **out)
{
    return gmtf_gpu_lanes_enc_create_on(0, out);
}

extern "C" int gmtf_gpu_lanes_enc_create_on(int dev, gmtf_gpu_lanes_enc **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (dev < 0)
        return -ENODEV;
    gmtf_gpu_lanes_enc *c = (gmtf_gpu_lanes_enc *)calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->dev = dev;
    int rc = backend_open(c);
    if (rc) {
        free(c);
        return rc;
    }
    c->ok = 1;
    rc = rcp_init(c);
    if (rc) {
        gmtf_gpu_lanes_enc_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

extern "C" void gmtf_gpu_lanes_enc_destroy(gmtf_gpu_lanes_enc *c)
{
    if (!c)
        return;
    (void)use_device(c);
    backend_close(c);
    dbuf *b[] = {&c->crk,  &c->ckeys, &c->roff, &c->rl,    &c->bwt,    &c->off,    &c->rk,
                 &c->keys, &c->runs,  &c->init, &c->ninit, &c->gstart, &c->shared, &c->sel,
                 &c->cum,  &c->room,  &c->len,  &c->pos,   &c->packed, &c->plans,  &c->psel};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        dev_free(b[i]);
    dev_free(&c->skip);
    dev_free(&c->rcp);
    dev_free(&c->rsh);
    dbuf *h[] = {&c->h_rk,      &c->h_keys,   &c->h_runs,  &c->h_roff, &c->h_init, &c->h_ninit,
                 &c->h_gstart,  &c->h_shared, &c->h_sel,   &c->h_cum,  &c->h_len,  &c->h_pos,
                 &c->h_streams, &c->h_skip,   &c->h_plans, &c->h_psel};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        host_free(h[i]);
    free(c);
}

extern "C" const char *gmtf_gpu_lanes_enc_error(const gmtf_gpu_lanes_enc *c)
{
    return c ? c->err : "no context";
}

extern "C" void gmtf_gpu_lanes_enc_kernel_ms(const gmtf_gpu_lanes_enc *c, double *scan,
                                             double *code)
{
    *scan = c ? c->ms[0] : 0;
    *code = c ? c->ms[1] : 0;
}

/* The scan of count blocks whose bytes are at bwt (dev: a device pointer,
 * copied device to device; else host memory). o's pointers: the caller's
 * buffers, or with dev the context's pinned ones (set here). */
static int scan_impl(gmtf_gpu_lanes_enc *c, const uint8_t *bwt, int dev, size_t count,
                     const uint64_t *off, gmtf_gpu_lanes_scan_out *o, int plan, unsigned big_rank)
{
    if (!c)
        return -ENODEV;
    if (!c->ok)
        return -EIO;
    c->scanned = 0;
    if (count == 0)
        return 0;
    if (!off || !o || count > (1u << 20) || !bwt || off[0] != 0 ||
        (!dev && !plan &&
         (!o->rk || !o->keys || !o->runs || !o->roff || !o->init || !o->ninit || !o->gstart ||
          !o->shared)))
        return -EINVAL;
    for (size_t b = 0; b < count; b++)
        if (off[b + 1] <= off[b] || off[b + 1] - off[b] > (16u << 20))
            return -EINVAL;
    uint64_t n = off[count];
    size_t nl = count * GMTF_GPU_LANES;
    if (dev || plan) {
        TRY(host_reserve(c, &c->h_runs, nl * 4));
        TRY(host_reserve(c, &c->h_roff, (nl + 1) * 8));
        TRY(host_reserve(c, &c->h_init, nl * 256));
        TRY(host_reserve(c, &c->h_ninit, nl * 2));
        TRY(host_reserve(c, &c->h_gstart, count * MAX_GROUPS * 4));
        TRY(host_reserve(c, &c->h_shared, nl * GMTF_GPU_LANES_NSHARED * NSYM * 4));
        TRY(host_reserve(c, &c->h_sel, count * MAX_GROUPS));
        TRY(host_reserve(c, &c->h_cum, count * NTAB * CUMW * 2));
        TRY(host_reserve(c, &c->h_skip, count));
        o->runs = (uint32_t *)c->h_runs.p;
        o->roff = (uint64_t *)c->h_roff.p;
        o->init = (uint8_t *)c->h_init.p;
        o->ninit = (uint16_t *)c->h_ninit.p;
        o->gstart = (uint32_t *)c->h_gstart.p;
        o->shared = (uint32_t *)c->h_shared.p;
    }
    TRY(dev_reserve(c, &c->bwt, n));
    TRY(dev_reserve(c, &c->off, (count + 1) * 8));
    TRY(dev_reserve(c, &c->rk, n));
    TRY(dev_reserve(c, &c->keys, 4 * n));
    TRY(dev_reserve(c, &c->rl, 4 * n));
    TRY(dev_reserve(c, &c->runs, nl * 4));
    TRY(dev_reserve(c, &c->init, nl * 256));
    TRY(dev_reserve(c, &c->ninit, nl * 2));
    TRY(dev_reserve(c, &c->gstart, count * MAX_GROUPS * 4));
    TRY(dev_reserve(c, &c->shared, nl * GMTF_GPU_LANES_NSHARED * NSYM * 4));
    TRY(dev ? d2d(c, c->bwt.p, bwt, n) : h2d(c, c->bwt.p, bwt, n));
    TRY(h2d(c, c->off.p, off, (count + 1) * 8));
    c->count = count;
    c->nbytes = n;
    if (plan) {
        /* no round trip: the plan reads the scan where it lies; only the
         * lanes' small outputs and the plans come down */
        TRY(dev_reserve(c, &c->plans, count * sizeof(gmtf_gpu_lanes_plan)));
        TRY(dev_reserve(c, &c->psel, count * MAX_GROUPS));
        TRY(host_reserve(c, &c->h_plans, count * sizeof(gmtf_gpu_lanes_plan)));
        TRY(host_reserve(c, &c->h_psel, count * MAX_GROUPS));
        TRY(run_scan(c));
        TRY(run_plan(c, big_rank));
        TRY(d2h(c, o->runs, c->runs.p, nl * 4));
        TRY(d2h(c, o->init, c->init.p, nl * 256));
        TRY(d2h(c, o->ninit, c->ninit.p, nl * 2));
        TRY(d2h(c, o->gstart, c->gstart.p, count * MAX_GROUPS * 4));
        TRY(d2h(c, o->shared, c->shared.p, nl * GMTF_GPU_LANES_NSHARED * NSYM * 4));
        TRY(d2h(c, c->h_plans.p, c->plans.p, count * sizeof(gmtf_gpu_lanes_plan)));
        TRY(d2h(c, c->h_psel.p, c->psel.p, count * MAX_GROUPS));
        TRY(sync(c));
        kernel_ms(c, 0);
        kernel_ms(c, 2);
        const char *pe = getenv("GMTF_GPU_LANES_PROFILE");
        if (pe && *pe == '1')
            fprintf(stderr,
                    "lanes enc profile: %zu blocks, scan kernel %.2f ms, plan kernel %.2f ms\n",
                    count, (double)c->ms[0], (double)c->ms[2]);
        o->rk = NULL;
        o->keys = NULL;
        o->roff = NULL;
        c->scanned = 2;
        return 0;
    }
    TRY(dev_reserve(c, &c->roff, (nl + 1) * 8));
    TRY(dev_reserve(c, &c->crk, n));
    TRY(dev_reserve(c, &c->ckeys, 4 * n));
    TRY(run_scan(c));
    /* the runs a lane, then the ranks and keys packed by them */
    TRY(d2h(c, o->runs, c->runs.p, nl * 4));
    TRY(sync(c));
    uint64_t at = 0;
    for (size_t L = 0; L < nl; L++) {
        uint32_t a, b, gb;
        size_t blk = L / GMTF_GPU_LANES;
        lane_geom(off[blk + 1] - off[blk], (unsigned)(L % GMTF_GPU_LANES), &a, &b, &gb);
        if (o->runs[L] > b - a)
            return set_err(c, -EIO, "scan", "more runs than bytes in a lane");
        o->roff[L] = at;
        at += o->runs[L];
    }
    o->roff[nl] = at;
    if (dev) {
        TRY(host_reserve(c, &c->h_rk, at ? at : 1));
        TRY(host_reserve(c, &c->h_keys, at ? 4 * at : 4));
        o->rk = (uint8_t *)c->h_rk.p;
        o->keys = (uint16_t *)c->h_keys.p;
    }
    TRY(h2d(c, c->roff.p, o->roff, (nl + 1) * 8));
    TRY(run_compact(c));
    TRY(d2h(c, o->rk, c->crk.p, at));
    TRY(d2h(c, o->keys, c->ckeys.p, 4 * at));
    TRY(d2h(c, o->init, c->init.p, nl * 256));
    TRY(d2h(c, o->ninit, c->ninit.p, nl * 2));
    TRY(d2h(c, o->gstart, c->gstart.p, count * MAX_GROUPS * 4));
    TRY(d2h(c, o->shared, c->shared.p, nl * GMTF_GPU_LANES_NSHARED * NSYM * 4));
    TRY(sync(c));
    kernel_ms(c, 0);
    c->scanned = 1 + dev;
    return 0;
}

extern "C" int gmtf_gpu_lanes_enc_scan(gmtf_gpu_lanes_enc *c, const uint8_t *bwt, size_t count,
                                       const uint64_t *off, gmtf_gpu_lanes_scan_out *o)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc : scan_impl(c, bwt, 0, count, off, o, 0, 0);
}

extern "C" int gmtf_gpu_lanes_enc_scan_dev(gmtf_gpu_lanes_enc *c, const void *dbwt, size_t count,
                                           const uint64_t *off, gmtf_gpu_lanes_scan_out *o)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc : scan_impl(c, (const uint8_t *)dbwt, 1, count, off, o, 0, 0);
}

extern "C" int gmtf_gpu_lanes_enc_scan_plan(gmtf_gpu_lanes_enc *c, const void *bwt, int dev,
                                            size_t count, const uint64_t *off, unsigned big_rank,
                                            gmtf_gpu_lanes_scan_out *o,
                                            const gmtf_gpu_lanes_plan **plans, const uint8_t **psel)
{
    if (!plans || !psel)
        return -EINVAL;
    *plans = NULL;
    *psel = NULL;
    int rc = c ? use_device(c) : 0;
    if (rc == 0)
        rc = scan_impl(c, (const uint8_t *)bwt, dev, count, off, o, 1, big_rank);
    if (rc == 0) {
        *plans = (const gmtf_gpu_lanes_plan *)c->h_plans.p;
        *psel = (const uint8_t *)c->h_psel.p;
    }
    return rc;
}

extern "C" double gmtf_gpu_lanes_enc_plan_ms(const gmtf_gpu_lanes_enc *c)
{
    return c ? c->ms[2] : 0;
}

extern "C" int gmtf_gpu_lanes_enc_tables(gmtf_gpu_lanes_enc *c, uint8_t **sel, uint16_t **cum,
                                         uint8_t **skip)
{
    if (!c)
        return -ENODEV;
    if (c->scanned != 2)
        return -EINVAL;
    *sel = (uint8_t *)c->h_sel.p;
    *cum = (uint16_t *)c->h_cum.p;
    *skip = (uint8_t *)c->h_skip.p;
    return 0;
}

/* The code step; out NULL: into the context's pinned buffer (*streams). */
static int code_impl(gmtf_gpu_lanes_enc *c, const uint8_t *skip, const uint8_t *sel,
                     const uint16_t *cum, uint8_t *out, uint64_t cap, uint32_t *len,
                     const uint8_t **streams)
{
    size_t count = c->count, nl = count * GMTF_GPU_LANES;
    TRY(dev_reserve(c, &c->sel, count * MAX_GROUPS));
    TRY(dev_reserve(c, &c->cum, count * NTAB * CUMW * 2));
    TRY(dev_reserve(c, &c->room, 2 * c->nbytes + 64 * nl));
    TRY(dev_reserve(c, &c->len, nl * 4));
    TRY(dev_reserve(c, &c->pos, nl * 8));
    TRY(h2d(c, c->sel.p, sel, count * MAX_GROUPS));
    TRY(h2d(c, c->cum.p, cum, count * NTAB * CUMW * 2));
    c->use_skip = skip != NULL;
    if (skip) {
        TRY(dev_reserve(c, &c->skip, count));
        TRY(h2d(c, c->skip.p, skip, count));
    }
    TRY(run_code(c));
    TRY(d2h(c, len, c->len.p, nl * 4));
    TRY(sync(c));
    kernel_ms(c, 1);
    const char *pe = getenv("GMTF_GPU_LANES_PROFILE");
    if (pe && *pe == '1')
        fprintf(stderr, "lanes enc profile: %zu blocks, %llu bytes, code kernel %.2f ms\n",
                c->count, (unsigned long long)c->nbytes, (double)c->ms[1]);
    uint64_t *pos;
    if (streams) {
        TRY(host_reserve(c, &c->h_pos, nl * 8));
        pos = (uint64_t *)c->h_pos.p;
    } else if (!(pos = (uint64_t *)malloc(nl * 8))) {
        return -ENOMEM;
    }
    uint64_t at = 0;
    for (size_t L = 0; L < nl; L++) {
        pos[L] = at;
        at += len[L];
    }
    int rc = !streams && at > cap ? -ENOSPC : 0;
    if (!rc)
        rc = dev_reserve(c, &c->packed, at ? at : 1);
    if (!rc && streams) {
        rc = host_reserve(c, &c->h_streams, at ? at : 1);
        out = (uint8_t *)c->h_streams.p;
        *streams = out;
    }
    if (!rc)
        rc = h2d(c, c->pos.p, pos, nl * 8);
    if (!rc)
        rc = run_pack(c);
    if (!rc)
        rc = d2h(c, out, c->packed.p, at);
    if (!rc)
        rc = sync(c);
    if (!streams)
        free(pos);
    return rc;
}

extern "C" int gmtf_gpu_lanes_enc_code(gmtf_gpu_lanes_enc *c, const uint8_t *sel,
                                       const uint16_t *cum, uint8_t *out, uint64_t cap,
                                       uint32_t *len)
{
    if (!c)
        return -ENODEV;
    if (!c->ok)
        return -EIO;
    if (!c->scanned || !sel || !cum || !out || !len)
        return -EINVAL;
    TRY(use_device(c));
    return code_impl(c, NULL, sel, cum, out, cap, len, NULL);
}

extern "C" int gmtf_gpu_lanes_enc_code_dev(gmtf_gpu_lanes_enc *c, const uint8_t **streams,
                                           const uint32_t **len)
{
    if (!c)
        return -ENODEV;
    if (!c->ok)
        return -EIO;
    if (c->scanned != 2 || !streams || !len)
        return -EINVAL;
    *streams = NULL;
    *len = NULL;
    if (c->count == 0)
        return 0;
    TRY(use_device(c));
    TRY(host_reserve(c, &c->h_len, c->count * GMTF_GPU_LANES * 4));
    uint32_t *l = (uint32_t *)c->h_len.p;
    TRY(code_impl(c, (const uint8_t *)c->h_skip.p, (const uint8_t *)c->h_sel.p,
                  (const uint16_t *)c->h_cum.p, NULL, 0, l, streams));
    *len = l;
    return 0;
}
