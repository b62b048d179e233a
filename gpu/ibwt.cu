/* Inverse BWT of a batch of blocks on the GPU (gpu_ibwt.h).
 *
 * A piece of the batch (whole blocks, side by side) goes through four
 * steps, all blocks at once:
 * 1. keys: position i of block b gets the key (b << 8 | byte) and the value
 *    i (piece-relative);
 * 2. one stable radix sort of (key, value) over the low 8 + log2(blocks)
 *    bits: block b's positions end up in its own range, ordered by byte
 *    and, within a byte, by position: that is the LF order;
 * 3. table: block b owns E[start_b + b .. start_b + b + n_b], one slot a
 *    row; row 0 (the empty suffix) is 0, row r >= 1 is (F byte << 24 |
 *    the L position of the same occurrence), as codec/bwt.c's table;
 * 4. walk: one thread a chain (a sample row and the step bytes from its
 *    sample position on): out = E[row] >> 24, w = E[row] & 0xffffff,
 *    row = w + (w >= primary). w < n_b, so the row stays in 0..n_b whatever
 *    the bytes: the walk never leaves its block's table.
 * The rows are checked on the host first (gmtf_gpu_ibwt_check).
 *
 * The default since gpu10 is the ruler walk on a table by counting (steps
 * 2-4 replaced; both described where they are defined below);
 * GMTF_GPU_IBWT_RULER=0 gives the steps above with
 *
 * two chains a sample segment (GMTF_GPU_IBWT_BIDIR=0: one):
 * the walk is a dependent load a byte, latency-bound with a few thousand
 * chains, so each segment [s, e) is walked from both ends: forward from its
 * own sample row over the first half, backward from the next sample's row
 * (row 0, the empty suffix, for the block's last segment) over the second.
 * The backward table is the LF map by row: step 3 also writes
 * LF[r] = (L byte of row r) << 24 | (its sorted slot j), the row of the
 * suffix one before being j + 1; LF[primary] = primary - 1 (a row that maps
 * to itself, which no valid walk reads). Both halves end on the row of the
 * segment's middle suffix when the bytes are a real BWT; a segment whose
 * two chains end on different rows (garbage bytes: the LF map then has
 * other cycles) is walked again forward over its whole length (step 5), so
 * the output is byte for byte the forward-only walk's (codec/bwt.c's)
 * whatever the bytes. Forward and backward steps are the same instructions
 * (row = w + ((w >= primary) | backward)), so a warp holding both kinds
 * does not diverge.
 *
 * The same source builds for the CPU with GMTF_IBWT_EMU (loops and
 * std::stable_sort for kernels and CUB): tests/gpu runs it without a GPU. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GMTF_IBWT_EMU
#include <algorithm>
#include <vector>
#include "ibwt_emu_names.h"
#define GMTF_HD
#else
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>
#include "dev_alloc.cuh"
#include "gpu.h"
#define GMTF_HD __host__ __device__
#endif

#include "gpu_ibwt.h"

#ifdef GMTF_IBWT_EMU
#define PIECE_MIN 4096ull /* the emulation tests the piece logic on small inputs */
#else
#define PIECE_MIN ((uint64_t)GMTF_GPU_IBWT_MAX_BLOCK)
#endif
#define PIECE_MAX (1ull << 30)
#define PIECE_DEFAULT (512ull << 20)
#define MAX_BLOCKS (1u << 24) /* block ids take the key's upper 24 bits */

/* One chain: block (piece-relative), first row, where its bytes start in
 * the block, how many (bit 31 of len: a backward chain, which writes
 * start + len - 1 down to start). */
struct chain {
    uint32_t b, row, start, len;
};
#define CHAIN_BACK 0x80000000u

struct dbuf {
    void *p;
    size_t cap;
};

struct gmtf_gpu_ibwt_ctx {
    int ok;
    char err[256];
    uint64_t piece_bound;
    double ms[GMTF_GPU_IBWT_PHASES];
    int bidir; /* two chains a segment (GMTF_GPU_IBWT_BIDIR) */
    int lr;    /* the ruler walk, rulers 2^lr slots apart; 0: the chains */
    int count; /* with the rulers: the table by counting (GMTF_GPU_IBWT_COUNT) */
    int ldm;   /* the ruler walk's loads (ld_e; GMTF_GPU_IBWT_LD) */
    int scr;   /* step 1 keeps the rulers' bytes for step 3 (GMTF_GPU_IBWT_SCRATCH=0: not) */
    uint64_t repaired; /* segments walked again by the last batch */
    int pending;       /* batch_dev_start's last piece not waited yet (1 + its acc) */
    int prof;          /* GMTF_GPU_IBWT_PROFILE=1: each piece's phases on stderr */
    uint32_t *h_rep;   /* the repair count read back */
    /* host: per piece block starts (nb + 1) and each block's first chunk
     * (nb + 1, right after), primaries (nb), chains */
    uint32_t *h_start, *h_p;
    chain *h_ch;
    size_t h_blk_cap, h_ch_cap;
    dbuf in, out, ka, kb, va, vb, start, prim, ch, tmp, lf, endrow, rep, rl, own, rw, bad, cnt,
        cbase, scr_b;
#ifndef GMTF_IBWT_EMU
    cudaStream_t st;
    cudaEvent_t ev[GMTF_GPU_IBWT_PHASES + 1];
#endif
    int dev; /* the CUDA device its memory and stream are on */
};

static int set_err(gmtf_gpu_ibwt_ctx *c, int rc, const char *what, const char *detail)
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

/* ---- the per-element steps, shared by kernels and loops ------------------ */

/* The block of piece position i: the last b with start[b] <= i. */
static GMTF_HD inline uint32_t block_of(const uint32_t *start, uint32_t nb, uint32_t i)
{
    uint32_t lo = 0, hi = nb; /* start[lo] <= i < start[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (start[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static GMTF_HD inline void key_one(const uint8_t *in, const uint32_t *start, uint32_t nb,
                                   uint32_t i, uint32_t *key, uint32_t *val)
{
    key[i] = block_of(start, nb, i) << 8 | in[i];
    val[i] = i;
}

/* Sorted slot j: its row's table entry (and row 0's for a block's first);
 * with lf, the LF entry of the row whose L byte it is (and the primary's). */
static GMTF_HD inline void table_one(const uint32_t *key, const uint32_t *val,
                                     const uint32_t *start, const uint32_t *prim, uint32_t j,
                                     uint32_t *e, uint32_t *lf)
{
    uint32_t k = key[j], b = k >> 8, w = val[j] - start[b];
    e[j + b + 1] = (k & 0xff) << 24 | w;
    if (j == start[b])
        e[j + b] = 0;
    if (lf) {
        uint32_t p = prim[b];
        lf[start[b] + b + w + (w >= p)] = (k & 0xff) << 24 | (j - start[b]);
        if (j == start[b])
            lf[start[b] + b + p] = p - 1;
    }
}

/* A chain's walk; its last row to endrow (when given). Forward: the table
 * E, row = w + (w >= p); backward: LF, row = w + 1, bytes from the end. */
static GMTF_HD inline void walk_one(const chain *ch, const uint32_t *start, const uint32_t *prim,
                                    const uint32_t *e, const uint32_t *lf, uint8_t *out,
                                    uint32_t *endrow, uint32_t t)
{
    chain c = ch[t];
    uint32_t back = c.len >> 31, len = c.len & ~CHAIN_BACK;
    const uint32_t *eb = (back ? lf : e) + start[c.b] + c.b;
    uint8_t *o = out + start[c.b] + c.start;
    uint32_t p = prim[c.b], row = c.row;
    /* forward: o[0], o[1], ...; backward: o[len - 1], o[len - 2], ... */
    uint8_t *q = back ? o + len - 1 : o;
    ptrdiff_t d = back ? -1 : 1;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t v = eb[row];
        *q = (uint8_t)(v >> 24);
        q += d;
        uint32_t w = v & 0xffffff;
        row = w + ((w >= p) | back);
    }
    if (endrow)
        endrow[t] = row;
}

/* Segment t of nseg (chains t forward and nseg + t backward): when the two
 * chains did not meet, the whole segment again, forward. 1 if it did. */
static GMTF_HD inline int repair_one(const chain *ch, const uint32_t *start, const uint32_t *prim,
                                     const uint32_t *e, const uint32_t *endrow, uint8_t *out,
                                     uint32_t nseg, uint32_t t)
{
    if (endrow[t] == endrow[nseg + t])
        return 0;
    chain f = ch[t], g = ch[nseg + t];
    chain whole = {f.b, f.row, f.start, f.len + (g.len & ~CHAIN_BACK)};
    walk_one(&whole, start, prim, e, NULL, out, NULL, 0);
    return 1;
}

/* ---- the ruler walk (the default) ---------------------------------------
 *
 * The chains above are latency-bound: a few thousand of them, a dependent
 * load a byte each. The ruler walk splits every segment into many short
 * chains. Rulers: one row a bucket of 2^lr table slots (a table slot T =
 * start[b] + b + row), at a pseudo-random offset in the bucket (a hash of
 * the bucket; a fixed residue would line up with periodic data), row 0 (a
 * block's empty suffix) never one.
 * 1. each ruler walks forward to the next ruler (or row 0, the block's end;
 *    at most RULER_CAP(lr) steps), its length and next ruler recorded;
 * 2. each segment walks from its sample row to its first ruler writing the
 *    bytes, then follows the rulers' links (a hop a ruler: 2^lr times fewer
 *    steps than the bytes) to its end, claiming each ruler (its position
 *    and count, clamped to the segment) by a compare-and-swap;
 * 3. each claimed ruler writes its bytes (a thread a ruler);
 * 4. a segment whose walk met a ruler already claimed (by another segment
 *    or itself), a capped ruler, or the block's end too early (garbage
 *    bytes: the map then has other cycles) is walked again forward over its
 *    whole length.
 * A segment not walked again owns every ruler it used, at the positions of
 * its own walk, so the output is the forward walk's (codec/bwt.c's) whatever
 * the bytes and whatever the order of the claims. On a real BWT every walk
 * is one cycle through all rows: no ruler is met twice, nothing walked again. */
#define RULER_FREE 0xffffffffu
#define RULER_CAPPED 0xffffffffu /* rl.x: the walk hit the cap */
#define RULER_END 0xfffffffeu    /* rl.x: the walk reached row 0 */
#define RULER_CAP(lr) (32u << (lr))

struct rl2 {
    uint32_t x, y; /* 1: next ruler's bucket (or RULER_*), length; 3: out offset, count */
};

static GMTF_HD inline uint32_t ruler_off(uint32_t bucket, int lr)
{
    return (bucket * 0x9E3779B1u) >> (32 - lr);
}

static GMTF_HD inline int is_ruler(uint32_t slot, int lr)
{
    return (slot & ((1u << lr) - 1)) == ruler_off(slot >> lr, lr);
}

/* The block whose table holds slot T: the last b with start[b] + b <= T. */
static GMTF_HD inline uint32_t table_block(const uint32_t *start, uint32_t nb, uint32_t slot)
{
    uint32_t lo = 0, hi = nb;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (start[mid] + mid <= slot)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* atomicCAS on the device; the emulation's loops are sequential */
static GMTF_HD inline uint32_t cas_u32(uint32_t *a, uint32_t cmp, uint32_t v)
{
#ifdef __CUDA_ARCH__
    return atomicCAS(a, cmp, v);
#else
    uint32_t old = *a;
    if (old == cmp)
        *a = v;
    return old;
#endif
}

/* A table entry for the ruler walk (GMTF_GPU_IBWT_LD): 2, the default, skips
 * L1 (ld.global.cg), 1 marks it evict-first (ld.global.cs), 0 a plain load.
 * The walk's reads are scattered over tables larger than L2 and the lanes
 * kernels of later groups run beside it: plain loads evict their words from
 * L1 and slowed them (docs/gpu.md, "The inverse by rulers"). */
static GMTF_HD inline uint32_t ld_e(const uint32_t *p, int ldm)
{
#ifdef __CUDA_ARCH__
    return ldm == 1 ? __ldcs(p) : ldm == 2 ? __ldcg(p) : *p;
#else
    (void)ldm;
    return *p;
#endif
}

/* Step 1 for bucket i of a piece of ns table slots. With scr (2^lr words a
 * ruler), its first 4 * 2^lr bytes too, four to a word, for step 3. */
static GMTF_HD inline void ruler_walk_one(const uint32_t *start, const uint32_t *prim,
                                          const uint32_t *e, uint32_t nb, uint32_t ns, int lr,
                                          int ldm, uint32_t *scr, rl2 *rl, uint32_t i)
{
    uint32_t slot = (i << lr) + ruler_off(i, lr);
    if (slot >= ns)
        return;
    uint32_t b = table_block(start, nb, slot), base = start[b] + b, row = slot - base;
    if (row == 0) /* not a ruler: nothing reads its entry */
        return;
    const uint32_t *eb = e + base;
    uint32_t p = prim[b], cap = RULER_CAP(lr), len = 0, next = RULER_CAPPED, acc = 0;
    uint32_t *sw = scr ? scr + ((size_t)i << lr) : NULL, nw = sw ? 1u << lr : 0;
    while (len < cap) {
        uint32_t v = ld_e(eb + row, ldm), w = v & 0xffffff;
        acc |= (v >> 24) << 8 * (len & 3);
        if ((len & 3) == 3) {
            if ((len >> 2) < nw)
                sw[len >> 2] = acc;
            acc = 0;
        }
        row = w + (w >= p);
        len++;
        if (row == 0) {
            next = RULER_END;
            break;
        }
        if (is_ruler(base + row, lr)) {
            next = (base + row) >> lr;
            break;
        }
    }
    if ((len & 3) && (len >> 2) < nw)
        sw[len >> 2] = acc;
    rl[i] = rl2{next, len};
}

/* Step 2 for segment t (chain t: one a segment). */
static GMTF_HD inline void ruler_resolve_one(const chain *ch, const uint32_t *start,
                                             const uint32_t *prim, const uint32_t *e, int lr,
                                             int ldm, const rl2 *rl, uint32_t *own, rl2 *rw,
                                             uint32_t *bad, uint8_t *out, uint32_t t)
{
    chain c = ch[t];
    uint32_t base = start[c.b] + c.b, p = prim[c.b], row = c.row, h = 0;
    const uint32_t *eb = e + base;
    uint8_t *o = out + start[c.b] + c.start;
    while (h < c.len && (row == 0 || !is_ruler(base + row, lr))) {
        uint32_t v = ld_e(eb + row, ldm);
        o[h++] = (uint8_t)(v >> 24);
        uint32_t w = v & 0xffffff;
        row = w + (w >= p);
    }
    uint32_t at = h, r = (base + row) >> lr;
    while (at < c.len) {
        uint32_t old = cas_u32(&own[r], RULER_FREE, t);
        if (old != RULER_FREE) { /* its owner keeps it: the walk there was its own */
            bad[t] = 1;
            return;
        }
        rl2 x = rl[r];
        uint32_t left = c.len - at;
        rw[r] = rl2{start[c.b] + c.start + at, x.y < left ? x.y : left};
        if (x.x == RULER_CAPPED || (x.x == RULER_END && x.y < left)) {
            bad[t] = 1;
            return;
        }
        at += x.y < left ? x.y : left;
        r = x.x;
    }
}

/* Step 3 for bucket i: a claimed ruler of a segment not walked again (its
 * bytes from scr when step 1 kept them all). */
static GMTF_HD inline void ruler_write_one(const uint32_t *start, const uint32_t *prim,
                                           const uint32_t *e, uint32_t nb, int lr, int ldm,
                                           const uint32_t *scr, const uint32_t *own, const rl2 *rw,
                                           const uint32_t *bad, uint8_t *out, uint32_t i)
{
    uint32_t t = own[i];
    if (t == RULER_FREE || bad[t])
        return;
    if (scr && rw[i].y <= 4u << lr) {
        const uint32_t *sw = scr + ((size_t)i << lr);
        uint8_t *o = out + rw[i].x;
        for (uint32_t k = 0, n = rw[i].y; k < n; k += 4) {
            uint32_t wd = sw[k >> 2];
            for (uint32_t j = 0; j < 4 && k + j < n; j++)
                o[k + j] = (uint8_t)(wd >> 8 * j);
        }
        return;
    }
    uint32_t slot = (i << lr) + ruler_off(i, lr);
    uint32_t b = table_block(start, nb, slot), base = start[b] + b, row = slot - base;
    const uint32_t *eb = e + base;
    uint32_t p = prim[b];
    rl2 x = rw[i];
    uint8_t *o = out + x.x;
    for (uint32_t k = 0; k < x.y; k++) {
        uint32_t v = ld_e(eb + row, ldm);
        o[k] = (uint8_t)(v >> 24);
        uint32_t w = v & 0xffffff;
        row = w + (w >= p);
    }
}

/* Step 4 for segment t: 1 if it was walked again. */
static GMTF_HD inline int ruler_repair_one(const chain *ch, const uint32_t *start,
                                           const uint32_t *prim, const uint32_t *e,
                                           const uint32_t *bad, uint8_t *out, uint32_t t)
{
    if (!bad[t])
        return 0;
    walk_one(ch, start, prim, e, NULL, out, NULL, t);
    return 1;
}

/* ---- the table by counting (with the rulers) ----------------------------
 *
 * The table needs each block's positions in LF order (by byte, then by
 * position), which the radix sort gives for all blocks at once. The ruler
 * walk has no use for the sort's other output (LF), so its table comes from
 * a counting sort a block instead: every block cut into chunks of CHUNK
 * bytes; (a) a histogram a chunk; (b) a block's counts turned into each
 * chunk's first slot for each byte (the bytes' starts in the block plus the
 * same byte's count in the block's earlier chunks); (c) each chunk writes its
 * positions' entries in order: slot = 1 + that start + the byte's rank in
 * the chunk so far. The same table as the sort's, entry for entry. */
#define CHUNK_LOG 12
#define CHUNK (1u << CHUNK_LOG)

/* The block of chunk k: the last b with cfirst[b] <= k. */
static GMTF_HD inline uint32_t chunk_block(const uint32_t *cfirst, uint32_t nb, uint32_t k)
{
    return block_of(cfirst, nb, k);
}

/* Chunk k's bytes: [*lo, *hi) of the piece; its block's index. */
static GMTF_HD inline uint32_t chunk_range(const uint32_t *start, const uint32_t *cfirst,
                                           uint32_t nb, uint32_t k, uint32_t *lo, uint32_t *hi)
{
    uint32_t b = chunk_block(cfirst, nb, k);
    *lo = start[b] + ((k - cfirst[b]) << CHUNK_LOG);
    *hi = start[b + 1] - *lo > CHUNK ? *lo + CHUNK : start[b + 1];
    return b;
}

/* ---- backend: CUDA, or the CPU emulation -------------------------------- */

#ifndef GMTF_IBWT_EMU

static int cuda_fail(gmtf_gpu_ibwt_ctx *c, cudaError_t e, const char *what)
{
    set_err(c, 0, what, cudaGetErrorString(e));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return -ENOMEM;
    }
    /* sticky errors (a kernel fault) poison the CUDA context for good */
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

__global__ void __launch_bounds__(256) k_keys(const uint8_t *in, const uint32_t *start, uint32_t nb,
                                              uint32_t n, uint32_t *key, uint32_t *val)
{
    uint32_t i = blockIdx.x * 256u + threadIdx.x;
    if (i < n)
        key_one(in, start, nb, i, key, val);
}

__global__ void __launch_bounds__(256)
    k_table(const uint32_t *key, const uint32_t *val, const uint32_t *start, const uint32_t *prim,
            uint32_t n, uint32_t *e, uint32_t *lf)
{
    uint32_t j = blockIdx.x * 256u + threadIdx.x;
    if (j < n)
        table_one(key, val, start, prim, j, e, lf);
}

/* 64 threads a CTA: chains are few (thousands), spread them over the SMs. */
__global__ void __launch_bounds__(64)
    k_walk(const chain *ch, const uint32_t *start, const uint32_t *prim, const uint32_t *e,
           const uint32_t *lf, uint8_t *out, uint32_t *endrow, uint32_t nc)
{
    uint32_t t = blockIdx.x * 64u + threadIdx.x;
    if (t < nc)
        walk_one(ch, start, prim, e, lf, out, endrow, t);
}

__global__ void __launch_bounds__(64)
    k_repair(const chain *ch, const uint32_t *start, const uint32_t *prim, const uint32_t *e,
             const uint32_t *endrow, uint8_t *out, uint32_t nseg, uint32_t *rep)
{
    uint32_t t = blockIdx.x * 64u + threadIdx.x;
    if (t < nseg && repair_one(ch, start, prim, e, endrow, out, nseg, t))
        atomicAdd(rep, 1u);
}

/* (a) chunk k's histogram */
__global__ void __launch_bounds__(256) k_chist(const uint8_t *in, const uint32_t *start,
                                               const uint32_t *cf, uint32_t nb, uint32_t *cnt)
{
    __shared__ uint32_t h[256];
    uint32_t k = blockIdx.x, lo, hi;
    h[threadIdx.x] = 0;
    __syncthreads();
    chunk_range(start, cf, nb, k, &lo, &hi);
    for (uint32_t i = lo + threadIdx.x; i < hi; i += 256)
        atomicAdd(&h[in[i]], 1u);
    __syncthreads();
    cnt[(size_t)k * 256 + threadIdx.x] = h[threadIdx.x];
}

/* (b) block b: each chunk's count of byte c becomes the count of c in the
 * block's earlier chunks; cbase[b][c] = 1 + the block's bytes below c;
 * row 0's entry */
__global__ void __launch_bounds__(256)
    k_cscan(const uint32_t *start, const uint32_t *cf, uint32_t *cnt, uint32_t *cbase, uint32_t *e)
{
    __shared__ uint32_t tot[256];
    uint32_t b = blockIdx.x, c = threadIdx.x, run = 0, k = cf[b], k1 = cf[b + 1];
    for (; k + 4 <= k1; k += 4) {
        uint32_t *q = cnt + (size_t)k * 256 + c;
        uint32_t v0 = q[0], v1 = q[256], v2 = q[512], v3 = q[768];
        q[0] = run;
        q[256] = run + v0;
        q[512] = run + v0 + v1;
        q[768] = run + v0 + v1 + v2;
        run += v0 + v1 + v2 + v3;
    }
    for (; k < k1; k++) {
        uint32_t *q = cnt + (size_t)k * 256 + c, v = *q;
        *q = run;
        run += v;
    }
    tot[c] = run;
    __syncthreads();
    for (uint32_t d = 1; d < 256; d <<= 1) { /* inclusive scan */
        uint32_t v = c >= d ? tot[c - d] : 0;
        __syncthreads();
        tot[c] += v;
        __syncthreads();
    }
    cbase[(size_t)b * 256 + c] = 1 + tot[c] - run;
    if (c == 0)
        e[start[b] + b] = 0;
}

/* (c) a warp a chunk: its positions' entries in order (the rank of a byte
 * among its equals in the warp's 32 by a match) */
__global__ void __launch_bounds__(128)
    k_cscatter(const uint8_t *in, const uint32_t *start, const uint32_t *cf, uint32_t nb,
               uint32_t nch, const uint32_t *cnt, const uint32_t *cbase, uint32_t *e)
{
    __shared__ uint32_t ctr[4][256];
    uint32_t wp = threadIdx.x >> 5, lane = threadIdx.x & 31, k = blockIdx.x * 4 + wp, lo, hi;
    if (k >= nch)
        return;
    uint32_t b = chunk_range(start, cf, nb, k, &lo, &hi), *x = ctr[wp];
    for (uint32_t c = lane; c < 256; c += 32)
        x[c] = cnt[(size_t)k * 256 + c] + cbase[(size_t)b * 256 + c];
    __syncwarp();
    uint32_t *eb = e + start[b] + b, lt = (1u << lane) - 1;
    for (uint32_t i0 = lo; i0 < hi; i0 += 32) {
        uint32_t i = i0 + lane, ok = i < hi, v = ok ? in[i] : 256 + lane;
        uint32_t peers = __match_any_sync(0xffffffffu, v);
        uint32_t slot = ok ? x[v] + __popc(peers & lt) : 0;
        __syncwarp();
        if (ok) {
            eb[slot] = v << 24 | (i - start[b]);
            if (lane == 31 - __clz(peers))
                x[v] += __popc(peers);
        }
        __syncwarp();
    }
}

__global__ void __launch_bounds__(256)
    k_rulers(const uint32_t *start, const uint32_t *prim, const uint32_t *e, uint32_t nb,
             uint32_t ns, int lr, int ldm, uint32_t *scr, rl2 *rl, uint32_t nr)
{
    uint32_t i = blockIdx.x * 256u + threadIdx.x;
    if (i < nr)
        ruler_walk_one(start, prim, e, nb, ns, lr, ldm, scr, rl, i);
}

__global__ void __launch_bounds__(64)
    k_resolve(const chain *ch, const uint32_t *start, const uint32_t *prim, const uint32_t *e,
              int lr, int ldm, const rl2 *rl, uint32_t *own, rl2 *rw, uint32_t *bad, uint8_t *out,
              uint32_t nseg)
{
    uint32_t t = blockIdx.x * 64u + threadIdx.x;
    if (t < nseg)
        ruler_resolve_one(ch, start, prim, e, lr, ldm, rl, own, rw, bad, out, t);
}

__global__ void __launch_bounds__(256)
    k_rwrite(const uint32_t *start, const uint32_t *prim, const uint32_t *e, uint32_t nb, int lr,
             int ldm, const uint32_t *scr, const uint32_t *own, const rl2 *rw, const uint32_t *bad,
             uint8_t *out, uint32_t nr)
{
    uint32_t i = blockIdx.x * 256u + threadIdx.x;
    if (i < nr)
        ruler_write_one(start, prim, e, nb, lr, ldm, scr, own, rw, bad, out, i);
}

__global__ void __launch_bounds__(64)
    k_rrepair(const chain *ch, const uint32_t *start, const uint32_t *prim, const uint32_t *e,
              const uint32_t *bad, uint8_t *out, uint32_t nseg, uint32_t *rep)
{
    uint32_t t = blockIdx.x * 64u + threadIdx.x;
    if (t < nseg && ruler_repair_one(ch, start, prim, e, bad, out, t))
        atomicAdd(rep, 1u);
}

/* CUDA's current device is the calling thread's: the entry points that
 * launch or copy make the context's device current first. */
static int use_device(gmtf_gpu_ibwt_ctx *c)
{
    cudaError_t e = cudaSetDevice(c->dev);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, "cudaSetDevice");
}

static int backend_open(gmtf_gpu_ibwt_ctx *c)
{
    if (c->dev >= gmtf_gpu_device_count() || !gmtf_gpu_available())
        return -ENODEV;
    bool fail = cudaSetDevice(c->dev) != cudaSuccess ||
                cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess;
    for (int i = 0; i <= GMTF_GPU_IBWT_PHASES && !fail; i++)
        fail = cudaEventCreate(&c->ev[i]) != cudaSuccess;
    if (fail) {
        cudaGetLastError();
        return -ENODEV;
    }
    return 0;
}

static uint32_t *host_alloc_rep(gmtf_gpu_ibwt_ctx *)
{
    void *p = NULL;
    if (cudaMallocHost(&p, 4) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    *(uint32_t *)p = 0;
    return (uint32_t *)p;
}

static void host_free_rep(gmtf_gpu_ibwt_ctx *c)
{
    if (c->h_rep)
        cudaFreeHost(c->h_rep);
    c->h_rep = NULL;
}

static void backend_close(gmtf_gpu_ibwt_ctx *c)
{
    if (c->st)
        cudaStreamSynchronize(c->st);
    for (int i = 0; i <= GMTF_GPU_IBWT_PHASES; i++)
        if (c->ev[i])
            cudaEventDestroy(c->ev[i]);
    if (c->st)
        cudaStreamDestroy(c->st);
    cudaGetLastError();
}

static int dev_reserve(gmtf_gpu_ibwt_ctx *c, dbuf *b, size_t bytes)
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

static int mark(gmtf_gpu_ibwt_ctx *c, int phase)
{
    CK(c, cudaEventRecord(c->ev[phase], c->st));
    return 0;
}

static int copy_h2d(gmtf_gpu_ibwt_ctx *c, void *d, const void *h, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, c->st));
    return 0;
}

static int copy_d2h(gmtf_gpu_ibwt_ctx *c, void *h, const void *d, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, c->st));
    return 0;
}

static int copy_d2d(gmtf_gpu_ibwt_ctx *c, void *d, const void *s, size_t n)
{
    if (n)
        CK(c, cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, c->st));
    return 0;
}

static int wait_for(gmtf_gpu_ibwt_ctx *c, void *after)
{
    if (after)
        CK(c, cudaStreamWaitEvent(c->st, (cudaEvent_t)after, 0));
    return 0;
}

static int launched(gmtf_gpu_ibwt_ctx *c, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_fail(c, e, what);
}

/* Stable sort of (key, value) pairs over bits [0, bits): the result lands
 * in ka/va or kb/vb; *flip says which (1: kb/vb). */
static int sort_pairs(gmtf_gpu_ibwt_ctx *c, uint32_t n, int bits, int *flip)
{
    cub::DoubleBuffer<uint32_t> k((uint32_t *)c->ka.p, (uint32_t *)c->kb.p);
    cub::DoubleBuffer<uint32_t> v((uint32_t *)c->va.p, (uint32_t *)c->vb.p);
    size_t bytes = 0;
    CK(c, cub::DeviceRadixSort::SortPairs(NULL, bytes, k, v, n, 0, bits, c->st));
    TRY(dev_reserve(c, &c->tmp, bytes + 256));
    bytes = c->tmp.cap;
    CK(c, cub::DeviceRadixSort::SortPairs(c->tmp.p, bytes, k, v, n, 0, bits, c->st));
    *flip = k.selector;
    return 0;
}

/* Steps 1-3: the table E (returned), by the radix sort (and LF beside it for
 * the two chains) or, with the rulers, by counting. */
static int make_table(gmtf_gpu_ibwt_ctx *c, uint32_t np, uint32_t nb, uint32_t **table)
{
    const uint32_t *start = (const uint32_t *)c->start.p;
    const uint32_t *prim = (const uint32_t *)c->prim.p;
    const uint8_t *in = (const uint8_t *)c->in.p;
    if (c->count) {
        const uint32_t *cf = start + nb + 1;
        uint32_t nch = c->h_start[2 * nb + 1], *cnt = (uint32_t *)c->cnt.p;
        uint32_t *cbase = (uint32_t *)c->cbase.p, *e = (uint32_t *)c->ka.p;
        k_chist<<<nch, 256, 0, c->st>>>(in, start, cf, nb, cnt);
        TRY(launched(c, "k_chist"));
        k_cscan<<<nb, 256, 0, c->st>>>(start, cf, cnt, cbase, e);
        TRY(launched(c, "k_cscan"));
        TRY(mark(c, 2));
        k_cscatter<<<(nch + 3) / 4, 128, 0, c->st>>>(in, start, cf, nb, nch, cnt, cbase, e);
        TRY(launched(c, "k_cscatter"));
        TRY(mark(c, 3));
        *table = e;
        return 0;
    }
    int bits = 8;
    while (bits < 32 && (1ull << (bits - 8)) < nb)
        bits++;
    k_keys<<<(np + 255) / 256, 256, 0, c->st>>>(in, start, nb, np, (uint32_t *)c->ka.p,
                                                (uint32_t *)c->va.p);
    TRY(launched(c, "k_keys"));
    int flip = 0;
    TRY(sort_pairs(c, np, bits, &flip));
    TRY(mark(c, 2));
    const uint32_t *key = (const uint32_t *)(flip ? c->kb.p : c->ka.p);
    const uint32_t *val = (const uint32_t *)(flip ? c->vb.p : c->va.p);
    uint32_t *e = (uint32_t *)(flip ? c->ka.p : c->kb.p); /* the free key buffer */
    uint32_t *lf = c->bidir && !c->lr ? (uint32_t *)c->lf.p : NULL;
    k_table<<<(np + 255) / 256, 256, 0, c->st>>>(key, val, start, prim, np, e, lf);
    TRY(launched(c, "k_table"));
    TRY(mark(c, 3));
    *table = e;
    return 0;
}

static int run_steps(gmtf_gpu_ibwt_ctx *c, uint32_t np, uint32_t nb, uint32_t nc)
{
    const uint32_t *start = (const uint32_t *)c->start.p;
    const uint32_t *prim = (const uint32_t *)c->prim.p;
    const chain *ch = (const chain *)c->ch.p;
    uint8_t *out = (uint8_t *)c->out.p;
    uint32_t *e = NULL;
    TRY(make_table(c, np, nb, &e));
    if (c->lr) { /* the ruler walk's four steps */
        uint32_t ns = np + nb, nr = (ns >> c->lr) + 1;
        rl2 *rl = (rl2 *)c->rl.p, *rw = (rl2 *)c->rw.p;
        uint32_t *own = (uint32_t *)c->own.p, *bad = (uint32_t *)c->bad.p;
        CK(c, cudaMemsetAsync(own, 0xff, (size_t)nr * 4, c->st));
        CK(c, cudaMemsetAsync(bad, 0, (size_t)nc * 4, c->st));
        CK(c, cudaMemsetAsync(c->rep.p, 0, 4, c->st));
        uint32_t *scr = c->scr ? (uint32_t *)c->scr_b.p : NULL;
        k_rulers<<<(nr + 255) / 256, 256, 0, c->st>>>(start, prim, e, nb, ns, c->lr, c->ldm, scr,
                                                      rl, nr);
        TRY(launched(c, "k_rulers"));
        k_resolve<<<(nc + 63) / 64, 64, 0, c->st>>>(ch, start, prim, e, c->lr, c->ldm, rl, own, rw,
                                                    bad, out, nc);
        TRY(launched(c, "k_resolve"));
        k_rwrite<<<(nr + 255) / 256, 256, 0, c->st>>>(start, prim, e, nb, c->lr, c->ldm, scr, own,
                                                      rw, bad, out, nr);
        TRY(launched(c, "k_rwrite"));
        k_rrepair<<<(nc + 63) / 64, 64, 0, c->st>>>(ch, start, prim, e, bad, out, nc,
                                                    (uint32_t *)c->rep.p);
        TRY(launched(c, "k_rrepair"));
        CK(c, cudaMemcpyAsync(c->h_rep, c->rep.p, 4, cudaMemcpyDeviceToHost, c->st));
        TRY(mark(c, 4));
        return 0;
    }
    uint32_t *lf = c->bidir ? (uint32_t *)c->lf.p : NULL;
    uint32_t *endrow = c->bidir ? (uint32_t *)c->endrow.p : NULL;
    k_walk<<<(nc + 63) / 64, 64, 0, c->st>>>(ch, start, prim, e, lf, out, endrow, nc);
    TRY(launched(c, "k_walk"));
    if (c->bidir) {
        uint32_t nseg = nc / 2;
        CK(c, cudaMemsetAsync(c->rep.p, 0, 4, c->st));
        k_repair<<<(nseg + 63) / 64, 64, 0, c->st>>>(ch, start, prim, e, endrow, out, nseg,
                                                     (uint32_t *)c->rep.p);
        TRY(launched(c, "k_repair"));
        CK(c, cudaMemcpyAsync(c->h_rep, c->rep.p, 4, cudaMemcpyDeviceToHost, c->st));
    }
    TRY(mark(c, 4));
    return 0;
}

static int sync_times(gmtf_gpu_ibwt_ctx *c, int acc)
{
    CK(c, cudaStreamSynchronize(c->st));
    for (int i = 0; i < GMTF_GPU_IBWT_PHASES; i++) {
        float f = 0;
        CK(c, cudaEventElapsedTime(&f, c->ev[i], c->ev[i + 1]));
        c->ms[i] = acc ? c->ms[i] + f : f;
    }
    return 0;
}

#else /* GMTF_IBWT_EMU: the same steps on the CPU */

static int use_device(gmtf_gpu_ibwt_ctx *)
{
    return 0;
}

static int backend_open(gmtf_gpu_ibwt_ctx *)
{
    return 0;
}

static void backend_close(gmtf_gpu_ibwt_ctx *)
{
}

static uint32_t *host_alloc_rep(gmtf_gpu_ibwt_ctx *)
{
    return (uint32_t *)calloc(1, 4);
}

static void host_free_rep(gmtf_gpu_ibwt_ctx *c)
{
    free(c->h_rep);
    c->h_rep = NULL;
}

static int dev_reserve(gmtf_gpu_ibwt_ctx *c, dbuf *b, size_t bytes)
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

static int mark(gmtf_gpu_ibwt_ctx *, int)
{
    return 0;
}

static int wait_for(gmtf_gpu_ibwt_ctx *, void *)
{
    return 0;
}

static int copy_h2d(gmtf_gpu_ibwt_ctx *, void *d, const void *h, size_t n)
{
    if (n)
        memcpy(d, h, n);
    return 0;
}

static int copy_d2h(gmtf_gpu_ibwt_ctx *, void *h, const void *d, size_t n)
{
    if (n)
        memcpy(h, d, n);
    return 0;
}

static int copy_d2d(gmtf_gpu_ibwt_ctx *, void *d, const void *s, size_t n)
{
    if (n)
        memcpy(d, s, n);
    return 0;
}

/* The table by counting: the device's three steps as loops. */
static void count_table(gmtf_gpu_ibwt_ctx *c, uint32_t nb)
{
    const uint32_t *start = (const uint32_t *)c->start.p, *cf = start + nb + 1;
    const uint8_t *in = (const uint8_t *)c->in.p;
    uint32_t nch = c->h_start[2 * nb + 1], *cnt = (uint32_t *)c->cnt.p;
    uint32_t *cbase = (uint32_t *)c->cbase.p, *e = (uint32_t *)c->ka.p, lo, hi;
    memset(cnt, 0, (size_t)nch * 256 * 4);
    for (uint32_t k = 0; k < nch; k++) {
        chunk_range(start, cf, nb, k, &lo, &hi);
        for (uint32_t i = lo; i < hi; i++)
            cnt[(size_t)k * 256 + in[i]]++;
    }
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t below = 1;
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t run = 0;
            for (uint32_t k = cf[b]; k < cf[b + 1]; k++) {
                uint32_t x = cnt[(size_t)k * 256 + v];
                cnt[(size_t)k * 256 + v] = run;
                run += x;
            }
            cbase[(size_t)b * 256 + v] = below;
            below += run;
        }
        e[start[b] + b] = 0;
    }
    for (uint32_t k = 0; k < nch; k++) {
        uint32_t b = chunk_range(start, cf, nb, k, &lo, &hi), x[256];
        for (uint32_t v = 0; v < 256; v++)
            x[v] = cnt[(size_t)k * 256 + v] + cbase[(size_t)b * 256 + v];
        for (uint32_t i = lo; i < hi; i++)
            e[start[b] + b + x[in[i]]++] = (uint32_t)in[i] << 24 | (i - start[b]);
    }
}

/* The table by the sort's order (std::stable_sort for CUB's). */
static uint32_t *sort_table(gmtf_gpu_ibwt_ctx *c, uint32_t np, uint32_t nb)
{
    const uint32_t *start = (const uint32_t *)c->start.p;
    uint32_t *ka = (uint32_t *)c->ka.p, *va = (uint32_t *)c->va.p;
    uint32_t *kb = (uint32_t *)c->kb.p, *vb = (uint32_t *)c->vb.p;
    for (uint32_t i = 0; i < np; i++)
        key_one((const uint8_t *)c->in.p, start, nb, i, ka, va);
    /* the radix sort's result: stable by key, into the second buffers */
    std::vector<uint32_t> ord(np);
    for (uint32_t i = 0; i < np; i++)
        ord[i] = i;
    std::stable_sort(ord.begin(), ord.end(),
                     [ka](uint32_t x, uint32_t y) { return ka[x] < ka[y]; });
    for (uint32_t j = 0; j < np; j++) {
        kb[j] = ka[ord[j]];
        vb[j] = va[ord[j]];
    }
    uint32_t *lf = c->bidir && !c->lr ? (uint32_t *)c->lf.p : NULL;
    for (uint32_t j = 0; j < np; j++)
        table_one(kb, vb, start, (const uint32_t *)c->prim.p, j, ka, lf);
    return ka;
}

static int run_steps(gmtf_gpu_ibwt_ctx *c, uint32_t np, uint32_t nb, uint32_t nc)
{
    const uint32_t *start = (const uint32_t *)c->start.p;
    const uint32_t *prim = (const uint32_t *)c->prim.p;
    const chain *ch = (const chain *)c->ch.p;
    uint8_t *out = (uint8_t *)c->out.p;
    uint32_t *e = (uint32_t *)c->ka.p;
    if (c->count)
        count_table(c, nb);
    else
        e = sort_table(c, np, nb);
    if (c->lr) {
        uint32_t ns = np + nb, nr = (ns >> c->lr) + 1;
        rl2 *rl = (rl2 *)c->rl.p, *rw = (rl2 *)c->rw.p;
        uint32_t *own = (uint32_t *)c->own.p, *bad = (uint32_t *)c->bad.p;
        uint32_t *scr = c->scr ? (uint32_t *)c->scr_b.p : NULL;
        memset(own, 0xff, (size_t)nr * 4);
        memset(bad, 0, (size_t)nc * 4);
        for (uint32_t i = 0; i < nr; i++)
            ruler_walk_one(start, prim, e, nb, ns, c->lr, 0, scr, rl, i);
        /* the segments' claims last to first (the device's order is any) */
        for (uint32_t k = nc; k-- > 0;)
            ruler_resolve_one(ch, start, prim, e, c->lr, 0, rl, own, rw, bad, out, k);
        for (uint32_t i = 0; i < nr; i++)
            ruler_write_one(start, prim, e, nb, c->lr, 0, scr, own, rw, bad, out, i);
        *c->h_rep = 0;
        for (uint32_t t = 0; t < nc; t++)
            *c->h_rep += (uint32_t)ruler_repair_one(ch, start, prim, e, bad, out, t);
        return 0;
    }
    uint32_t *lf = c->bidir ? (uint32_t *)c->lf.p : NULL;
    uint32_t *endrow = c->bidir ? (uint32_t *)c->endrow.p : NULL;
    for (uint32_t t = 0; t < nc; t++)
        walk_one(ch, start, prim, e, lf, out, endrow, t);
    if (c->bidir) {
        *c->h_rep = 0;
        for (uint32_t t = 0; t < nc / 2; t++)
            *c->h_rep += (uint32_t)repair_one(ch, start, prim, e, endrow, out, nc / 2, t);
    }
    return 0;
}

static int sync_times(gmtf_gpu_ibwt_ctx *c, int)
{
    for (int i = 0; i < GMTF_GPU_IBWT_PHASES; i++)
        c->ms[i] = 0;
    return 0;
}

#endif

/* ---- host side ----------------------------------------------------------- */

static uint64_t chains_of(uint64_t n, uint32_t step)
{
    return (n + step - 1) / step;
}

extern "C" int gmtf_gpu_ibwt_check(const uint64_t *off, size_t count, const uint32_t *step,
                                   const uint32_t *idx)
{
    if (count && (!off || !step || !idx))
        return -EINVAL;
    if (count > MAX_BLOCKS)
        return -EINVAL;
    uint64_t k = 0;
    for (size_t i = 0; i < count; i++) {
        if (off[i + 1] <= off[i] || off[i + 1] - off[i] > GMTF_GPU_IBWT_MAX_BLOCK || step[i] == 0)
            return -EINVAL;
        uint64_t n = off[i + 1] - off[i], nk = chains_of(n, step[i]);
        for (uint64_t j = 0; j < nk; j++)
            if (idx[k + j] == 0 || idx[k + j] > n)
                return -EUCLEAN;
        k += nk;
    }
    return 0;
}

extern "C" int gmtf_gpu_ibwt_create(gmtf_gpu_ibwt_ctx **out)
{
    return gmtf_gpu_ibwt_create_on(0, out);
}

extern "C" int gmtf_gpu_ibwt_create_on(int dev, gmtf_gpu_ibwt_ctx **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (dev < 0)
        return -ENODEV;
    gmtf_gpu_ibwt_ctx *c = (gmtf_gpu_ibwt_ctx *)calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->dev = dev;
    int rc = backend_open(c);
    if (rc) {
        gmtf_gpu_ibwt_destroy(c);
        return rc;
    }
    c->ok = 1;
    c->piece_bound = PIECE_DEFAULT;
    const char *bd = getenv("GMTF_GPU_IBWT_BIDIR");
    c->bidir = !(bd && bd[0] == '0');
    /* GMTF_GPU_IBWT_RULER=k: rulers 2^k slots apart (4..10; default 6), 0: the
     * two chains a segment; GMTF_GPU_IBWT_BIDIR=0: one chain a segment */
    const char *rv = getenv("GMTF_GPU_IBWT_RULER");
    int lr = rv && *rv ? atoi(rv) : 6;
    c->lr = !c->bidir || lr <= 0 ? 0 : lr < 4 ? 4 : lr > 10 ? 10 : lr;
    const char *cv = getenv("GMTF_GPU_IBWT_COUNT"); /* 0: the radix sort's table */
    c->count = c->lr && !(cv && cv[0] == '0');
    const char *lv = getenv("GMTF_GPU_IBWT_LD"); /* ld_e */
    c->ldm = lv && *lv ? atoi(lv) & 3 : 2;
    const char *sv = getenv("GMTF_GPU_IBWT_SCRATCH");
    c->scr = c->lr && !(sv && sv[0] == '0');
    const char *pe = getenv("GMTF_GPU_IBWT_PROFILE");
    c->prof = pe && pe[0] == '1';
    c->h_rep = host_alloc_rep(c);
    if (!c->h_rep) {
        gmtf_gpu_ibwt_destroy(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

extern "C" void gmtf_gpu_ibwt_destroy(gmtf_gpu_ibwt_ctx *c)
{
    if (!c)
        return;
    (void)use_device(c);
    backend_close(c);
    dbuf *b[] = {&c->in,   &c->out, &c->ka,  &c->kb,  &c->va,     &c->vb,   &c->start,
                 &c->prim, &c->ch,  &c->tmp, &c->lf,  &c->endrow, &c->rep,  &c->rl,
                 &c->own,  &c->rw,  &c->bad, &c->cnt, &c->cbase,  &c->scr_b};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        dev_free(b[i]);
    free(c->h_start);
    free(c->h_p);
    free(c->h_ch);
    host_free_rep(c);
    free(c);
}

extern "C" int gmtf_gpu_ibwt_ok(const gmtf_gpu_ibwt_ctx *c)
{
    return c && c->ok;
}

extern "C" const char *gmtf_gpu_ibwt_error(const gmtf_gpu_ibwt_ctx *c)
{
    return c ? c->err : "no context";
}

extern "C" int gmtf_gpu_ibwt_set_piece(gmtf_gpu_ibwt_ctx *c, uint64_t bytes)
{
    if (!c)
        return -ENODEV;
    uint64_t b = bytes ? bytes : PIECE_DEFAULT;
    c->piece_bound = b < PIECE_MIN ? PIECE_MIN : b > PIECE_MAX ? PIECE_MAX : b;
    return 0;
}

extern "C" uint64_t gmtf_gpu_ibwt_last_repaired(const gmtf_gpu_ibwt_ctx *c)
{
    return c ? c->repaired : 0;
}

extern "C" int gmtf_gpu_ibwt_last_ms(const gmtf_gpu_ibwt_ctx *c, double ms[GMTF_GPU_IBWT_PHASES])
{
    if (!c)
        return -ENODEV;
    for (int i = 0; i < GMTF_GPU_IBWT_PHASES; i++)
        ms[i] = c->ms[i];
    return 0;
}

static int host_grow(gmtf_gpu_ibwt_ctx *c, size_t nb, size_t nc)
{
    if (nb > c->h_blk_cap) {
        free(c->h_start);
        free(c->h_p);
        c->h_start = (uint32_t *)malloc(2 * (nb + 1) * sizeof *c->h_start);
        c->h_p = (uint32_t *)malloc(nb * sizeof *c->h_p);
        c->h_blk_cap = c->h_start && c->h_p ? nb : 0;
        if (!c->h_blk_cap)
            return set_err(c, -ENOMEM, "host", "out of memory");
    }
    if (nc > c->h_ch_cap) {
        free(c->h_ch);
        c->h_ch = (chain *)malloc(nc * sizeof *c->h_ch);
        c->h_ch_cap = c->h_ch ? nc : 0;
        if (!c->h_ch)
            return set_err(c, -ENOMEM, "host", "out of memory");
    }
    return 0;
}

/* Blocks [b0, b1) of the batch, their rows from idx + i0. */
static int piece_end(gmtf_gpu_ibwt_ctx *c, int acc);

/* after: an event (gpu_lanes.h's group_event) the device waits for before
 * it reads bwt; async: the piece is not waited (gmtf_gpu_ibwt_wait). */
static int run_piece(gmtf_gpu_ibwt_ctx *c, const uint8_t *bwt, const uint64_t *off, size_t b0,
                     size_t b1, const uint32_t *step, const uint32_t *idx, uint64_t i0,
                     uint8_t *dst, int acc, int dev, void *after, int async)
{
    uint32_t nb = (uint32_t)(b1 - b0), np = (uint32_t)(off[b1] - off[b0]);
    uint64_t nseg = 0;
    for (size_t i = b0; i < b1; i++)
        nseg += chains_of(off[i + 1] - off[i], step[i]);
    /* two: forward chains 0 .. nseg - 1, backward nseg .. 2 nseg - 1 */
    int two = c->bidir && !c->lr;
    uint64_t nc = two ? 2 * nseg : nseg;
    TRY(host_grow(c, nb, nc));
    uint64_t t = 0, k = i0;
    for (uint32_t b = 0; b < nb; b++) {
        uint64_t n = off[b0 + b + 1] - off[b0 + b];
        uint32_t s = step[b0 + b];
        c->h_start[b] = (uint32_t)(off[b0 + b] - off[b0]);
        c->h_p[b] = idx[k];
        for (uint64_t j = 0; j * s < n; j++, t++, k++) {
            uint64_t from = j * s, len = n - from < s ? n - from : s;
            if (!two) {
                c->h_ch[t] = chain{b, idx[k], (uint32_t)from, (uint32_t)len};
                continue;
            }
            /* the next sample's row, or row 0 (the empty suffix) at the end */
            uint32_t next = from + len < n ? idx[k + 1] : 0, half = (uint32_t)(len - len / 2);
            c->h_ch[t] = chain{b, idx[k], (uint32_t)from, half};
            c->h_ch[nseg + t] =
                chain{b, next, (uint32_t)from + half, (uint32_t)(len / 2) | CHAIN_BACK};
        }
    }
    c->h_start[nb] = np;
    uint32_t *cf = c->h_start + nb + 1, nch = 0; /* each block's first chunk */
    for (uint32_t b = 0; b < nb; b++) {
        cf[b] = nch;
        nch += (c->h_start[b + 1] - c->h_start[b] + CHUNK - 1) >> CHUNK_LOG;
    }
    cf[nb] = nch;
    TRY(dev_reserve(c, &c->in, np));
    TRY(dev_reserve(c, &c->out, np));
    TRY(dev_reserve(c, &c->ka, ((size_t)np + nb) * 4));
    if (c->count) { /* the table by counting */
        TRY(dev_reserve(c, &c->cnt, (size_t)nch * 256 * 4));
        TRY(dev_reserve(c, &c->cbase, (size_t)nb * 256 * 4));
    } else {
        TRY(dev_reserve(c, &c->kb, ((size_t)np + nb) * 4));
        TRY(dev_reserve(c, &c->va, (size_t)np * 4));
        TRY(dev_reserve(c, &c->vb, (size_t)np * 4));
    }
    TRY(dev_reserve(c, &c->start, 2 * ((size_t)nb + 1) * 4));
    TRY(dev_reserve(c, &c->prim, (size_t)nb * 4));
    TRY(dev_reserve(c, &c->ch, nc * sizeof(chain)));
    if (two) {
        TRY(dev_reserve(c, &c->lf, ((size_t)np + nb) * 4));
        TRY(dev_reserve(c, &c->endrow, nc * 4));
    }
    if (c->lr) {
        size_t nr = (((size_t)np + nb) >> c->lr) + 1;
        TRY(dev_reserve(c, &c->rl, nr * sizeof(rl2)));
        TRY(dev_reserve(c, &c->rw, nr * sizeof(rl2)));
        TRY(dev_reserve(c, &c->own, nr * 4));
        TRY(dev_reserve(c, &c->bad, nc * 4));
        if (c->scr) /* 2^lr words a ruler */
            TRY(dev_reserve(c, &c->scr_b, (nr << c->lr) * 4));
    }
    if (c->bidir)
        TRY(dev_reserve(c, &c->rep, 4));
    /* the small tables first (from pageable memory: copied before the
     * stream waits on anything), then the bytes */
    TRY(copy_h2d(c, c->start.p, c->h_start, 2 * ((size_t)nb + 1) * 4));
    TRY(copy_h2d(c, c->prim.p, c->h_p, (size_t)nb * 4));
    TRY(copy_h2d(c, c->ch.p, c->h_ch, nc * sizeof(chain)));
    TRY(wait_for(c, after));
    TRY(mark(c, 0));
    if (dev) /* bwt: on the device, at off[0] */
        TRY(copy_d2d(c, c->in.p, bwt + (off[b0] - off[0]), np));
    else
        TRY(copy_h2d(c, c->in.p, bwt + off[b0], np));
    TRY(mark(c, 1));
    TRY(run_steps(c, np, nb, (uint32_t)nc));
    TRY(copy_d2h(c, dst + off[b0], c->out.p, np));
    TRY(mark(c, 5));
    if (async) {
        c->pending = 1 + acc;
        return 0;
    }
    return piece_end(c, acc);
}

/* A piece's end: its times, its repairs. */
static int piece_end(gmtf_gpu_ibwt_ctx *c, int acc)
{
    TRY(sync_times(c, acc));
    if (c->prof)
        fprintf(stderr,
                "ibwt profile: upload %.2f, keys + sort %.2f, table %.2f, walk %.2f, "
                "download %.2f ms\n",
                c->ms[0], c->ms[1], c->ms[2], c->ms[3], c->ms[4]);
    if (c->bidir)
        c->repaired += *c->h_rep;
    return 0;
}

static int batch_impl(gmtf_gpu_ibwt_ctx *c, const uint8_t *bwt, const uint64_t *off, size_t count,
                      const uint32_t *step, const uint32_t *idx, uint8_t *dst, int dev, void *after,
                      int async)
{
    if (!c)
        return -ENODEV;
    if (!c->ok)
        return -EIO;
    if (c->pending) /* a batch_dev_start not waited: wait for it first */
        TRY(gmtf_gpu_ibwt_wait(c));
    if (count && (!bwt || !dst))
        return -EINVAL;
    int rc = gmtf_gpu_ibwt_check(off, count, step, idx);
    if (rc)
        return set_err(c, rc, "batch", rc == -EUCLEAN ? "sample row out of range" : "bad batch");
    size_t b0 = 0;
    uint64_t i0 = 0;
    int acc = 0;
    c->repaired = 0;
    while (b0 < count) {
        size_t b1 = b0 + 1;
        while (b1 < count && off[b1 + 1] - off[b0] <= c->piece_bound)
            b1++;
        TRY(run_piece(c, bwt, off, b0, b1, step, idx, i0, dst, acc, dev, after,
                      async && b1 == count));
        for (size_t i = b0; i < b1; i++)
            i0 += chains_of(off[i + 1] - off[i], step[i]);
        b0 = b1;
        acc = 1;
    }
    return 0;
}

extern "C" int gmtf_gpu_ibwt_batch(gmtf_gpu_ibwt_ctx *c, const uint8_t *bwt, const uint64_t *off,
                                   size_t count, const uint32_t *step, const uint32_t *idx,
                                   uint8_t *dst)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc : batch_impl(c, bwt, off, count, step, idx, dst, 0, NULL, 0);
}

extern "C" int gmtf_gpu_ibwt_batch_dev(gmtf_gpu_ibwt_ctx *c, const void *dbwt, const uint64_t *off,
                                       size_t count, const uint32_t *step, const uint32_t *idx,
                                       uint8_t *dst)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc : batch_impl(c, (const uint8_t *)dbwt, off, count, step, idx, dst, 1, NULL, 0);
}

extern "C" int gmtf_gpu_ibwt_batch_dev_start(gmtf_gpu_ibwt_ctx *c, const void *dbwt, void *after,
                                             const uint64_t *off, size_t count,
                                             const uint32_t *step, const uint32_t *idx,
                                             uint8_t *dst)
{
    int rc = c ? use_device(c) : 0;
    return rc ? rc : batch_impl(c, (const uint8_t *)dbwt, off, count, step, idx, dst, 1, after, 1);
}

extern "C" int gmtf_gpu_ibwt_wait(gmtf_gpu_ibwt_ctx *c)
{
    if (!c)
        return -ENODEV;
    if (!c->pending)
        return 0;
    int acc = c->pending - 1;
    c->pending = 0;
    TRY(use_device(c));
    return piece_end(c, acc);
}
