/* Forward BWT of a batch of blocks on the GPU (gpu_bwt.h): a segmented
 * suffix sort by prefix doubling over radix-sorted initial keys, groups
 * sorted in place and dropped once single (docs/gpu.md, "GPU BWT").
 *
 * Positions. A piece of the batch (whole blocks) is laid out as one string
 * of positions: block b owns positions [s_b, s_b + n_b] where position
 * s_b + n_b stands for its empty suffix (the sentinel). Every position is a
 * suffix to sort, and block b's suffixes take the sorted slots
 * [s_b, s_b + n_b]: slot s_b is the empty suffix (row 0), so row = slot - s_b.
 *
 * State. sa[slot] holds the suffixes in the order known so far; a group
 * (suffixes sharing their first h characters, the end of the block counting
 * as a character below every byte) is a range of slots, and p's rank is the
 * slot where its group starts. Keys compare the block first, so groups and
 * ranks never cross blocks. Groups of two or more are listed as
 * descriptors (start slot, size), in six lists by size.
 *
 * Ranks are versioned: isa[p] = (rank now, rank before the last change,
 * round of the last change), one 64-bit word. A round reads every rank as
 * it was when the round began (the older one where the entry changed in
 * this round), so one kernel can read ranks h ahead and write new ones
 * without a grid-wide barrier between.
 *
 * 1. Initial keys: block id and the first k characters in base 257
 *    (0 = past the end, byte c = c + 1), k as large as fits 64 bits with
 *    the block id; one radix sort gives sa, ranks and the first groups. The
 *    key is exact, so a suffix shorter than k is alone in its group.
 * 2. Doubling: a group of depth h holds suffixes of length >= h only (a
 *    shorter one differs from all others within h characters), so the
 *    suffix h ahead of each member lies in the same block, at most at its
 *    sentinel. Each round sorts every listed group in place by the ranks h
 *    ahead (depth 2h), writes the new ranks and lists the subgroups of two
 *    or more:
 *      2..8 members: a thread, ranks by counting in registers;
 *      9..32: a warp, one member a lane, counting by shuffles;
 *      33..256: a warp, eight members a lane, counting over shared memory;
 *      257..1024 and 1025..4096: a CTA each, cub::BlockRadixSort;
 *      more: all such groups in one device radix sort of (group, key).
 *    Each CTA reserves room for its descriptors with one atomic a list;
 *    the host reads the list sizes once a round.
 * 3. Output: row of p = rank - s_b; the byte before p goes to its row,
 *    rows after the primary index's row one place down.
 *
 * The same source builds for the CPU with GMTF_BWT_EMU (loops and std::sort
 * in place of kernels and CUB; the per-group sorts by std::sort): tests/gpu
 * runs the algorithm without a GPU that way. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GMTF_BWT_EMU
#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>
#include "bwt_emu_names.h"
#define GMTF_HD
#else
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>
#include "dev_alloc.cuh"
#include "gpu.h"
#define GMTF_HD __host__ __device__
#endif

#include "gpu_bwt.h"

#ifdef GMTF_BWT_EMU
#define PIECE_MIN 4096ull /* the emulation tests the piece logic on small inputs */
#else
#define PIECE_MIN ((uint64_t)GMTF_GPU_BWT_MAX_BLOCK + 2)
#endif
#define PIECE_MAX (1ull << 29) /* ranks are 29-bit fields of isa */
#define PIECE_DEFAULT ((1ull << 28) + (1ull << 24))
#define MAX_ROUNDS 40 /* round numbers are 6-bit fields of isa */

/* Group size classes: the fewest members of each. */
#define NCLS 6
#define CT_MAX 8u
#define CW_MAX 32u
#define CM_MAX 256u
#define CB1_MAX 1024u
#define CB2_MAX 4096u
#define CL NCLS - 1

/* ---- sample layout ------------------------------------------------------ */

extern "C" uint32_t gmtf_gpu_bwt_default_step(uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t k = n >> 14;
    k = k < 1 ? 1 : k > 16 ? 16 : k;
    return (uint32_t)((n + k - 1) / k);
}

extern "C" uint64_t gmtf_gpu_bwt_index_count(uint64_t n, uint32_t step)
{
    return n && step ? (n + step - 1) / step : 0;
}

extern "C" uint64_t gmtf_gpu_bwt_index_total(const uint64_t *off, size_t count,
                                             const uint32_t *step)
{
    if (!off)
        return 0;
    uint64_t t = 0;
    for (size_t i = 0; i < count; i++) {
        if (off[i + 1] <= off[i] || off[i + 1] - off[i] > GMTF_GPU_BWT_MAX_BLOCK)
            return 0;
        uint64_t n = off[i + 1] - off[i];
        uint32_t s = step ? step[i] : gmtf_gpu_bwt_default_step(n);
        if (!s)
            return 0;
        t += gmtf_gpu_bwt_index_count(n, s);
    }
    return t;
}

/* ---- shared helpers -------------------------------------------------------- */

GMTF_HD static inline int size_class(uint32_t s)
{
    return s <= CT_MAX    ? 0
           : s <= CW_MAX  ? 1
           : s <= CM_MAX  ? 2
           : s <= CB1_MAX ? 3
           : s <= CB2_MAX ? 4
                          : 5;
}

GMTF_HD static inline uint64_t desc_make(uint32_t start, uint32_t size)
{
    return (uint64_t)start | (uint64_t)size << 32;
}

#define RANK_MASK ((1u << 29) - 1)

GMTF_HD static inline uint64_t isa_pack(uint32_t now, uint32_t before, uint32_t round)
{
    return (uint64_t)now | (uint64_t)before << 29 | (uint64_t)round << 58;
}

GMTF_HD static inline uint32_t isa_now(uint64_t e)
{
    return (uint32_t)e & RANK_MASK;
}

/* The rank as it was when round `round` began. */
GMTF_HD static inline uint32_t isa_at(uint64_t e, uint32_t round)
{
    return (uint32_t)(e >> 58) == round ? (uint32_t)(e >> 29) & RANK_MASK : (uint32_t)e & RANK_MASK;
}

/* The doubling key of the suffix in slot j: its rank h ahead. */
GMTF_HD static inline uint32_t key_of(const uint64_t *isa, uint32_t v, uint32_t h, uint32_t last,
                                      uint32_t round)
{
    uint32_t q = v + h;
    return isa_at(isa[q < last ? q : last], round);
}

/* The last b with a[b] <= x (a ascending, n >= 1): the block of a
 * position, the group of a dense index. */
GMTF_HD static inline uint32_t find_last_le(const uint32_t *a, uint32_t n, uint32_t x)
{
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) >> 1;
        if (a[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Where the next round's descriptors go. cnt[c]: descriptors (low word)
 * and their members (high word) of list c. */
struct lists {
    uint64_t *d[NCLS];
    uint64_t *cnt;
};

/* What a round's kernels need besides their list. */
struct round_args {
    uint32_t *sa;
    uint64_t *isa;
    const uint32_t *bs; /* block starts (positions), nb + 1 */
    uint32_t nb, h, last, round, kbits;
};

/* ---- element functions (one per kernel) ---------------------------------- */

/* Initial key of every position: b * 257^k + first k characters. */
struct f_init_keys {
    const uint8_t *text; /* the piece's bytes (no sentinels) */
    const uint32_t *bs;  /* block starts in positions, nb + 1 */
    uint32_t nb, k;
    uint64_t pk; /* 257^k */
    uint64_t *key;
    uint32_t *val;
    GMTF_HD void operator()(uint32_t p) const
    {
        uint32_t b = find_last_le(bs, nb, p);
        uint32_t s = bs[b], n = bs[b + 1] - s - 1, l = p - s;
        const uint8_t *t = text + (s - b);
        uint64_t x = 0;
        for (uint32_t i = 0; i < k; i++)
            x = x * 257 + (l + i < n ? t[l + i] + 1u : 0u);
        key[p] = (uint64_t)b * pk + x;
        val[p] = p;
    }
};

/* Heads of a sorted key array: R = own index at a head, 0 elsewhere (a
 * max-scan then gives every element its head). */
template <class K> struct f_heads {
    const K *key;
    uint32_t *R;
    GMTF_HD void operator()(uint32_t j) const
    {
        R[j] = j == 0 || key[j] != key[j - 1] ? j : 0;
    }
};

/* After the initial sort: rank of element j; *size > 0 when j closes a
 * group of two or more. */
GMTF_HD static inline void init_rank(const uint64_t *key, const uint32_t *sa, const uint32_t *R,
                                     uint32_t np, uint32_t j, uint64_t *isa, uint32_t *size)
{
    isa[sa[j]] = isa_pack(R[j], R[j], 0);
    bool last = j + 1 == np || key[j + 1] != key[j];
    uint32_t s = j - R[j] + 1;
    *size = last && s >= 2 ? s : 0;
}

/* Class-5 groups as one dense array: group g's members at
 * [loff[g], loff[g+1]); key = (g mod per_chunk) << kbits | rank - block start. */
struct f_large_sizes {
    const uint64_t *list;
    uint32_t *sz;
    GMTF_HD void operator()(uint32_t g) const
    {
        sz[g] = (uint32_t)(list[g] >> 32);
    }
};

struct f_large_gather {
    const uint64_t *list;
    const uint32_t *loff, *sa;
    const uint64_t *isa;
    const uint32_t *bs;
    uint32_t n4, nb, h, last, round, kbits, per_chunk;
    uint32_t *kl, *vl;
    GMTF_HD void operator()(uint32_t i) const
    {
        uint32_t g = find_last_le(loff, n4, i);
        uint32_t start = (uint32_t)list[g];
        uint32_t v = sa[start + (i - loff[g])];
        uint32_t base = bs[find_last_le(bs, nb, start)];
        kl[i] = (g % per_chunk) << kbits | (key_of(isa, v, h, last, round) - base);
        vl[i] = v;
    }
};

/* After the sort of a chunk of class-5 groups (dense indexes i0..i0+n;
 * kc, vc, R hold the chunk, R its chunk-relative subgroup heads): member t
 * goes back to its group's slots; *size > 0 when it closes a subgroup of
 * two or more, which starts at slot *at. */
GMTF_HD static inline void large_rank(const uint64_t *list, const uint32_t *loff,
                                      const uint32_t *kc, const uint32_t *vc, const uint32_t *R,
                                      uint32_t g0, uint32_t kbits, uint32_t i0, uint32_t n,
                                      uint32_t t, uint32_t round, uint32_t *sa, uint64_t *isa,
                                      uint32_t *at, uint32_t *size)
{
    uint32_t g = g0 + (kc[t] >> kbits);
    uint32_t start = (uint32_t)list[g], off = loff[g];
    uint32_t r = start + (i0 + R[t] - off);
    sa[start + (i0 + t - off)] = vc[t];
    isa[vc[t]] = isa_pack(r, start, round);
    bool last = t + 1 == n || kc[t + 1] != kc[t];
    uint32_t s = t - R[t] + 1;
    *at = r;
    *size = last && s >= 2 ? s : 0;
}

/* BWT bytes: every non-sentinel position writes the byte before it to its
 * row; position 0 of a block writes row 0 (the block's last byte). */
struct f_output {
    const uint8_t *text;
    const uint32_t *bs;
    const uint64_t *isa;
    uint32_t nb;
    uint8_t *out;
    GMTF_HD void operator()(uint32_t p) const
    {
        uint32_t b = find_last_le(bs, nb, p);
        uint32_t s = bs[b], n = bs[b + 1] - s - 1, l = p - s, o = s - b;
        if (l == n)
            return;
        if (l == 0) {
            out[o] = text[o + n - 1];
            return;
        }
        uint32_t row = isa_now(isa[p]) - s, r0 = isa_now(isa[s]) - s;
        out[o + (row < r0 ? row : row - 1)] = text[o + l - 1];
    }
};

/* Sample indexes: row of the suffix at k * step[b]. */
struct f_samples {
    const uint32_t *bs, *so, *step;
    const uint64_t *isa;
    uint32_t nb;
    uint32_t *idx;
    GMTF_HD void operator()(uint32_t t) const
    {
        uint32_t b = find_last_le(so, nb, t);
        uint32_t s = bs[b];
        idx[t] = isa_now(isa[s + (t - so[b]) * step[b]]) - s;
    }
};

/* ---- context ------------------------------------------------------------- */

struct dbuf {
    void *p;
    size_t cap;
};

struct piece {
    size_t b0, b1;   /* blocks [b0, b1) */
    uint64_t t0;     /* first byte, relative to the batch */
    uint64_t i0;     /* first sample index */
    uint32_t np;     /* positions: bytes + one sentinel a block */
    uint32_t ni;     /* sample indexes */
    uint32_t maxlen; /* longest block */
    uint64_t m0;     /* bs, so, step of this piece at meta + m0 */
};

/* A host-to-host batch of one piece in block ranges: range j is uploaded,
 * then its initial keys computed, while range j+1 is uploaded; at the end
 * range j is output and downloaded while range j+1 is output. */
#define NCHUNK 8
struct overlap {
    int n;                     /* ranges (0: no overlap) */
    uint32_t pos[NCHUNK + 1];  /* their positions in the piece */
    uint64_t byte[NCHUNK + 1]; /* their bytes, relative to the batch */
    const uint8_t *src;        /* batch bytes (pinned), at the batch start */
    uint8_t *dst;              /* output (pinned), at the batch start */
    uint32_t *idx;             /* indexes (pinned) */
};

struct gmtf_gpu_bwt_ctx {
    int dev; /* the CUDA device its memory and streams are on */
    int ok;
    char err[256];
    uint64_t piece_bound;
    int profile;
    gmtf_gpu_bwt_profile prof;
    /* staged batch */
    int staged; /* 1 uploaded, 2 sorted */
    size_t count;
    uint64_t base, nbytes, nidx;
    piece *pc;
    size_t npc, pc_cap;
    uint32_t *h_meta;
    size_t h_meta_cap;
    uint64_t *h_cnt; /* pinned: NCLS counters, then scratch */
    /* device */
    dbuf in, out, idx, meta, isa, pool, desc, loff, tmp, cnt;
    size_t cap;        /* positions the working buffers hold */
    size_t lcap[NCLS]; /* descriptors each list holds */
#ifndef GMTF_BWT_EMU
    cudaStream_t st;
    cudaEvent_t e0, e1, p0, p1;
    /* side streams: a round's class kernels run side by side */
    cudaStream_t side[NCLS - 1];
    cudaEvent_t fork, join[NCLS - 1];
    /* copies of an overlapped batch */
    cudaStream_t cp;
    cudaEvent_t ev_up[NCHUNK], ev_out[NCHUNK + 1];
#endif
    int concurrent; /* GMTF_BWT_STREAMS=0 runs them one after another */
};

static int set_err(gmtf_gpu_bwt_ctx *c, int rc, const char *what, const char *detail)
{
    snprintf(c->err, sizeof c->err, "%s: %s", what, detail);
    return rc;
}

/* ---- backend: CUDA, or the CPU emulation -------------------------------- */

#ifndef GMTF_BWT_EMU

static int cuda_fail(gmtf_gpu_bwt_ctx *c, cudaError_t e, const char *what)
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

#define FULL 0xffffffffu

struct max_u32 {
    __host__ __device__ uint32_t operator()(uint32_t a, uint32_t b) const
    {
        return a > b ? a : b;
    }
};

template <class F> __global__ void __launch_bounds__(256) k_each(uint32_t n, F f)
{
    uint32_t i = blockIdx.x * 256u + threadIdx.x;
    if (i < n)
        f(i);
}

template <class F> static void each(gmtf_gpu_bwt_ctx *c, uint32_t n, const F &f)
{
    if (n)
        k_each<<<(n + 255) / 256, 256, 0, c->st>>>(n, f);
}

template <class F> __global__ void __launch_bounds__(256) k_each_from(uint32_t p0, uint32_t n, F f)
{
    uint32_t i = blockIdx.x * 256u + threadIdx.x;
    if (i < n)
        f(p0 + i);
}

/* f(p0 .. p0 + n - 1) */
template <class F> static void each_from(gmtf_gpu_bwt_ctx *c, uint32_t p0, uint32_t n, const F &f)
{
    if (n)
        k_each_from<<<(n + 255) / 256, 256, 0, c->st>>>(p0, n, f);
}

static int launched(gmtf_gpu_bwt_ctx *c, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_fail(c, e, what);
}

/* Appends the descriptors (at[e], size[e]) with pred[e] to the lists of
 * their classes. Called by every thread of a 256-thread CTA together:
 * warps count in shared memory, then one global atomic a list a CTA. */
template <int E>
__device__ __forceinline__ void emit_cta(const lists &L, const bool (&pred)[E],
                                         const uint32_t (&at)[E], const uint32_t (&size)[E])
{
    __shared__ uint32_t s_cnt[NCLS], s_mem[NCLS], s_base[NCLS];
    uint32_t lane = threadIdx.x & 31, ltm = (1u << lane) - 1;
    if (threadIdx.x < NCLS) {
        s_cnt[threadIdx.x] = 0;
        s_mem[threadIdx.x] = 0;
    }
    __syncthreads();
    uint32_t off[E];
#pragma unroll
    for (int e = 0; e < E; e++) {
        off[e] = 0;
        if (!__ballot_sync(FULL, pred[e]))
            continue;
        int cls = size_class(size[e]);
#pragma unroll
        for (int c = 0; c < NCLS; c++) {
            bool mine = pred[e] && cls == c;
            unsigned m = __ballot_sync(FULL, mine);
            if (!m)
                continue;
            uint32_t mem = __reduce_add_sync(FULL, mine ? size[e] : 0);
            unsigned leader = __ffs(m) - 1;
            uint32_t b = 0;
            if (lane == leader) {
                b = atomicAdd(&s_cnt[c], (uint32_t)__popc(m));
                atomicAdd(&s_mem[c], mem);
            }
            b = __shfl_sync(FULL, b, leader);
            if (mine)
                off[e] = b + __popc(m & ltm);
        }
    }
    __syncthreads();
    if (threadIdx.x < NCLS && s_cnt[threadIdx.x]) {
        unsigned long long add = (unsigned long long)s_mem[threadIdx.x] << 32 | s_cnt[threadIdx.x];
        s_base[threadIdx.x] = (uint32_t)atomicAdd((unsigned long long *)&L.cnt[threadIdx.x], add);
    }
    __syncthreads();
#pragma unroll
    for (int e = 0; e < E; e++) {
        if (!pred[e])
            continue;
        int cls = size_class(size[e]);
        uint64_t *d = L.d[0];
#pragma unroll
        for (int c = 1; c < NCLS; c++)
            if (cls == c)
                d = L.d[c];
        d[s_base[cls] + off[e]] = desc_make(at[e], size[e]);
    }
}

/* First ranks and groups: eight elements a thread, striped. */
__global__ void __launch_bounds__(256)
    k_init_rank(const uint64_t *key, const uint32_t *sa, const uint32_t *R, uint32_t np,
                uint64_t *isa, lists L)
{
    bool pred[8];
    uint32_t at[8], size[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
        uint32_t j = blockIdx.x * 2048u + u * 256u + threadIdx.x;
        size[u] = 0;
        if (j < np)
            init_rank(key, sa, R, np, j, isa, &size[u]);
        pred[u] = size[u] > 0;
        at[u] = j + 1 - size[u];
    }
    emit_cta<8>(L, pred, at, size);
}

/* Groups of 2..8: a thread a group; ranks by counting in registers.
 * (Split into 2..4 and 5..8 it ran 9% slower overall: BWT_NOTES.md.) */
template <int CAP>
__global__ void __launch_bounds__(256)
    k_rank_t(const uint64_t *list, uint32_t n, round_args a, lists L)
{
    uint32_t g = blockIdx.x * 256u + threadIdx.x, start = 0, size = 0;
    if (g < n) {
        uint64_t d = list[g];
        start = (uint32_t)d;
        size = (uint32_t)(d >> 32);
    }
    uint32_t k[CAP], v[CAP];
#pragma unroll
    for (int i = 0; i < CAP; i++) {
        bool in = (uint32_t)i < size;
        v[i] = in ? a.sa[start + i] : 0;
        k[i] = in ? key_of(a.isa, v[i], a.h, a.last, a.round) : 0xffffffffu;
    }
    bool pred[CAP];
    uint32_t at[CAP], ne[CAP];
#pragma unroll
    for (int i = 0; i < CAP; i++) {
        uint32_t lt = 0, eq = 0, eqb = 0;
#pragma unroll
        for (int j = 0; j < CAP; j++) {
            lt += k[j] < k[i];
            eq += k[j] == k[i];
            if (j < i)
                eqb += k[j] == k[i];
        }
        bool in = (uint32_t)i < size;
        pred[i] = in && eqb == 0 && eq >= 2;
        at[i] = start + lt;
        ne[i] = eq;
        if (in) {
            a.sa[start + lt + eqb] = v[i];
            a.isa[v[i]] = isa_pack(start + lt, start, a.round);
        }
    }
    emit_cta<CAP>(L, pred, at, ne);
}

/* Groups of 9..32: a warp a group, a lane a member. rank = start + members
 * with a smaller key; equal keys (one match_any set) take consecutive
 * slots. */
__global__ void __launch_bounds__(256)
    k_rank_w(const uint64_t *list, uint32_t n, round_args a, lists L)
{
    uint32_t g = blockIdx.x * 8u + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    uint32_t start = 0, size = 0;
    if (g < n) {
        uint64_t d = list[g];
        start = (uint32_t)d;
        size = (uint32_t)(d >> 32);
    }
    bool in = lane < size;
    uint32_t v = in ? a.sa[start + lane] : 0;
    uint32_t k = in ? key_of(a.isa, v, a.h, a.last, a.round) : 0xffffffffu;
    unsigned eq = __match_any_sync(FULL, k);
    uint32_t lt = 0;
    for (uint32_t i = 0; i < size; i++)
        lt += __shfl_sync(FULL, k, i) < k;
    uint32_t before = __popc(eq & ((1u << lane) - 1)), ne = __popc(eq);
    __syncwarp();
    if (in) {
        a.sa[start + lt + before] = v;
        a.isa[v] = isa_pack(start + lt, start, a.round);
    }
    bool pred[1] = {in && before == 0 && ne >= 2};
    uint32_t at[1] = {start + lt}, sz[1] = {ne};
    emit_cta<1>(L, pred, at, sz);
}

/* Groups of 33..256: a warp a group, eight members a lane; keys in shared
 * memory; equal keys take slots through a shared counter per subgroup. */
__global__ void __launch_bounds__(256)
    k_rank_m(const uint64_t *list, uint32_t n, round_args a, lists L)
{
    __shared__ uint32_t sk[8][CM_MAX], sc[8][CM_MAX];
    uint32_t w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint32_t g = blockIdx.x * 8u + w, start = 0, size = 0;
    if (g < n) {
        uint64_t d = list[g];
        start = (uint32_t)d;
        size = (uint32_t)(d >> 32);
    }
    uint32_t k[8], v[8], lt[8], le[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
        uint32_t e = lane + 32u * u;
        bool in = e < size;
        v[u] = in ? a.sa[start + e] : 0;
        k[u] = in ? key_of(a.isa, v[u], a.h, a.last, a.round) : 0xffffffffu;
        sk[w][e] = k[u];
        sc[w][e] = 0;
        lt[u] = le[u] = 0;
    }
    __syncwarp();
    /* only the items some lane holds (size is the same for the warp) */
    uint32_t nu = (size + 31) / 32;
    for (uint32_t i = 0; i < size; i++) {
        uint32_t ki = sk[w][i];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            if ((uint32_t)u >= nu)
                break;
            lt[u] += ki < k[u];
            le[u] += ki <= k[u];
        }
    }
    bool pred[8];
    uint32_t at[8], sz[8];
#pragma unroll
    for (int u = 0; u < 8; u++) {
        bool in = lane + 32u * u < size;
        uint32_t pos = in ? lt[u] + atomicAdd(&sc[w][lt[u]], 1u) : 0;
        if (in) {
            a.sa[start + pos] = v[u];
            a.isa[v[u]] = isa_pack(start + lt[u], start, a.round);
        }
        pred[u] = in && pos == lt[u] && le[u] - lt[u] >= 2;
        at[u] = start + lt[u];
        sz[u] = le[u] - lt[u];
    }
    emit_cta<8>(L, pred, at, sz);
}

/* Groups of up to THREADS * ITEMS: a CTA a group; block radix sort of
 * (rank h ahead - block start, suffix), then heads, a max-scan for each
 * member's subgroup start, and the tails list the subgroups. */
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS, 2048 / THREADS / 2)
    k_rank_b(const uint64_t *list, round_args a, lists L)
{
    typedef cub::BlockRadixSort<uint32_t, THREADS, ITEMS, uint32_t> Sort;
    typedef cub::BlockScan<uint32_t, THREADS> Scan;
    __shared__ union {
        typename Sort::TempStorage sort;
        typename Scan::TempStorage scan;
        uint32_t keys[THREADS * ITEMS];
    } sm;
    uint64_t d = list[blockIdx.x];
    uint32_t start = (uint32_t)d, size = (uint32_t)(d >> 32);
    uint32_t base = a.bs[find_last_le(a.bs, a.nb, start)], pad = (1u << a.kbits) - 1;
    uint32_t k[ITEMS], v[ITEMS], r[ITEMS];
    uint32_t i0 = threadIdx.x * ITEMS;
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
        uint32_t i = i0 + u;
        v[u] = i < size ? a.sa[start + i] : 0;
        k[u] = i < size ? key_of(a.isa, v[u], a.h, a.last, a.round) - base : pad;
    }
    Sort(sm.sort).Sort(k, v, 0, (int)a.kbits);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < ITEMS; u++)
        sm.keys[i0 + u] = k[u];
    __syncthreads();
    bool tail[ITEMS];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
        uint32_t i = i0 + u;
        bool head = i == 0 || sm.keys[i - 1] != k[u];
        tail[u] = i + 1 >= size || sm.keys[i + 1] != k[u];
        r[u] = head ? i : 0;
    }
    __syncthreads();
    Scan(sm.scan).InclusiveScan(r, r, max_u32());
    bool pred[ITEMS];
    uint32_t at[ITEMS], sz[ITEMS];
#pragma unroll
    for (int u = 0; u < ITEMS; u++) {
        uint32_t i = i0 + u;
        bool in = i < size;
        if (in) {
            a.sa[start + i] = v[u];
            a.isa[v[u]] = isa_pack(start + r[u], start, a.round);
        }
        pred[u] = in && tail[u] && i > r[u];
        at[u] = start + r[u];
        sz[u] = i - r[u] + 1;
    }
    emit_cta<ITEMS>(L, pred, at, sz);
}

/* Class-5 subgroups after a chunk's sort. */
__global__ void __launch_bounds__(256)
    k_rank_large(const uint64_t *list, const uint32_t *loff, const uint32_t *kc, const uint32_t *vc,
                 const uint32_t *R, uint32_t g0, uint32_t kbits, uint32_t i0, uint32_t n,
                 uint32_t round, uint32_t *sa, uint64_t *isa, lists L)
{
    uint32_t t = blockIdx.x * 256u + threadIdx.x;
    uint32_t at[1] = {0}, size[1] = {0};
    if (t < n)
        large_rank(list, loff, kc, vc, R, g0, kbits, i0, n, t, round, sa, isa, &at[0], &size[0]);
    bool pred[1] = {size[0] > 0};
    emit_cta<1>(L, pred, at, size);
}

static int dev_reserve(gmtf_gpu_bwt_ctx *c, dbuf *b, size_t bytes)
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

static int host_alloc(void **p, size_t bytes)
{
    if (cudaHostAlloc(p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return -ENOMEM;
    }
    return 0;
}

static void host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

/* Pinned host memory can be copied asynchronously; pageable memory goes
 * through cudaMemcpy (the driver stages it). */
static bool is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

static int copy_h2d(gmtf_gpu_bwt_ctx *c, void *d, const void *h, size_t n)
{
    if (!n)
        return 0;
    if (is_pinned(h))
        CK(c, cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, c->st));
    else {
        CK(c, cudaStreamSynchronize(c->st));
        CK(c, cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    }
    return 0;
}

static int copy_d2h(gmtf_gpu_bwt_ctx *c, void *h, const void *d, size_t n)
{
    if (!n)
        return 0;
    if (is_pinned(h))
        CK(c, cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, c->st));
    else {
        CK(c, cudaStreamSynchronize(c->st));
        CK(c, cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    }
    return 0;
}

static int dev_zero(gmtf_gpu_bwt_ctx *c, void *d, size_t n)
{
    CK(c, cudaMemsetAsync(d, 0, n, c->st));
    return 0;
}

static int dev_sync(gmtf_gpu_bwt_ctx *c)
{
    CK(c, cudaStreamSynchronize(c->st));
    return 0;
}

/* CUB temporary storage for every call on up to cap positions. */
static int temp_bytes(gmtf_gpu_bwt_ctx *c, size_t cap, size_t *bytes)
{
    size_t t = 0, m = 0;
    cub::DoubleBuffer<uint64_t> k64(NULL, NULL);
    cub::DoubleBuffer<uint32_t> k32(NULL, NULL), v32(NULL, NULL);
    CK(c, cub::DeviceRadixSort::SortPairs(NULL, t, k64, v32, (uint32_t)cap, 0, 64, c->st));
    m = t > m ? t : m;
    t = 0;
    CK(c, cub::DeviceRadixSort::SortPairs(NULL, t, k32, v32, (uint32_t)cap, 0, 32, c->st));
    m = t > m ? t : m;
    t = 0;
    CK(c, cub::DeviceScan::InclusiveScan(NULL, t, (uint32_t *)NULL, (uint32_t *)NULL, max_u32(),
                                         (uint32_t)cap, c->st));
    m = t > m ? t : m;
    t = 0;
    CK(c, cub::DeviceScan::ExclusiveSum(NULL, t, (uint32_t *)NULL, (uint32_t *)NULL, (uint32_t)cap,
                                        c->st));
    m = t > m ? t : m;
    *bytes = m + 256;
    return 0;
}

template <class K>
static int sort_pairs(gmtf_gpu_bwt_ctx *c, K *ka, K *kb, uint32_t *va, uint32_t *vb, uint32_t n,
                      int end_bit, K **kout, uint32_t **vout)
{
    cub::DoubleBuffer<K> k(ka, kb);
    cub::DoubleBuffer<uint32_t> v(va, vb);
    size_t t = c->tmp.cap;
    CK(c, cub::DeviceRadixSort::SortPairs(c->tmp.p, t, k, v, n, 0, end_bit, c->st));
    *kout = k.Current();
    *vout = v.Current();
    return 0;
}

static int scan_max(gmtf_gpu_bwt_ctx *c, uint32_t *a, uint32_t n)
{
    size_t t = c->tmp.cap;
    CK(c, cub::DeviceScan::InclusiveScan(c->tmp.p, t, a, a, max_u32(), n, c->st));
    return 0;
}

static int scan_sum(gmtf_gpu_bwt_ctx *c, uint32_t *a, uint32_t n)
{
    size_t t = c->tmp.cap;
    CK(c, cub::DeviceScan::ExclusiveSum(c->tmp.p, t, a, a, n, c->st));
    return 0;
}

static void launch_init_rank(gmtf_gpu_bwt_ctx *c, const uint64_t *key, const uint32_t *sa,
                             const uint32_t *R, uint32_t np, uint64_t *isa, const lists &L)
{
    k_init_rank<<<(np + 2047) / 2048, 256, 0, c->st>>>(key, sa, R, np, isa, L);
}

/* One round's sort of the groups of class cls (0..4). */
static void launch_rank(gmtf_gpu_bwt_ctx *c, int cls, const uint64_t *list, uint32_t n,
                        const round_args &a, const lists &L)
{
    if (!n)
        return;
    switch (cls) {
    case 0: k_rank_t<CT_MAX><<<(n + 255) / 256, 256, 0, c->st>>>(list, n, a, L); break;
    case 1: k_rank_w<<<(n + 7) / 8, 256, 0, c->st>>>(list, n, a, L); break;
    case 2: k_rank_m<<<(n + 7) / 8, 256, 0, c->st>>>(list, n, a, L); break;
    case 3: k_rank_b<256, CB1_MAX / 256><<<n, 256, 0, c->st>>>(list, a, L); break;
    default: k_rank_b<512, CB2_MAX / 512><<<n, 512, 0, c->st>>>(list, a, L); break;
    }
}

static void launch_rank_large(gmtf_gpu_bwt_ctx *c, const uint64_t *list, const uint32_t *loff,
                              const uint32_t *kc, const uint32_t *vc, const uint32_t *R,
                              uint32_t g0, uint32_t kbits, uint32_t i0, uint32_t n,
                              const round_args &a, const lists &L)
{
    k_rank_large<<<(n + 255) / 256, 256, 0, c->st>>>(list, loff, kc, vc, R, g0, kbits, i0, n,
                                                     a.round, a.sa, a.isa, L);
}

/* Overlapped batch: range j's upload on the copy stream. */
static int ov_upload(gmtf_gpu_bwt_ctx *c, const overlap *ov)
{
    for (int j = 0; j < ov->n; j++) {
        size_t b = ov->byte[j], n = ov->byte[j + 1] - b;
        CK(c,
           cudaMemcpyAsync((uint8_t *)c->in.p + b, ov->src + b, n, cudaMemcpyHostToDevice, c->cp));
        CK(c, cudaEventRecord(c->ev_up[j], c->cp));
    }
    return 0;
}

/* The main stream waits for range j's upload. */
static int ov_wait_upload(gmtf_gpu_bwt_ctx *c, int j)
{
    CK(c, cudaStreamWaitEvent(c->st, c->ev_up[j], 0));
    return 0;
}

/* Range j's output (or, j = n, the indexes) goes down once the main stream
 * has written it. */
static int ov_download(gmtf_gpu_bwt_ctx *c, const overlap *ov, int j, uint32_t nidx)
{
    CK(c, cudaEventRecord(c->ev_out[j], c->st));
    CK(c, cudaStreamWaitEvent(c->cp, c->ev_out[j], 0));
    if (j < ov->n) {
        size_t b = ov->byte[j], n = ov->byte[j + 1] - b;
        CK(c,
           cudaMemcpyAsync(ov->dst + b, (uint8_t *)c->out.p + b, n, cudaMemcpyDeviceToHost, c->cp));
    } else if (nidx)
        CK(c, cudaMemcpyAsync(ov->idx, c->idx.p, (size_t)nidx * 4, cudaMemcpyDeviceToHost, c->cp));
    return 0;
}

static int ov_finish(gmtf_gpu_bwt_ctx *c)
{
    CK(c, cudaStreamSynchronize(c->cp));
    CK(c, cudaStreamSynchronize(c->st));
    return 0;
}

/* Class q's kernels go to side stream q after everything queued so far on
 * the main stream (fork), and the main stream waits for all (join). */
static int fork_sides(gmtf_gpu_bwt_ctx *c)
{
    CK(c, cudaEventRecord(c->fork, c->st));
    for (int i = 0; i < NCLS - 1; i++)
        CK(c, cudaStreamWaitEvent(c->side[i], c->fork, 0));
    return 0;
}

/* Runs the launches that follow on side stream q (q < 0: no change);
 * returns the stream to restore. */
static cudaStream_t use_side(gmtf_gpu_bwt_ctx *c, int q)
{
    cudaStream_t m = c->st;
    if (q >= 0)
        c->st = c->side[q];
    return m;
}

static void restore_stream(gmtf_gpu_bwt_ctx *c, cudaStream_t m)
{
    c->st = m;
}

static int join_sides(gmtf_gpu_bwt_ctx *c)
{
    for (int i = 0; i < NCLS - 1; i++) {
        CK(c, cudaEventRecord(c->join[i], c->side[i]));
        CK(c, cudaStreamWaitEvent(c->st, c->join[i], 0));
    }
    return 0;
}

/* Profiling: one event pair around a phase, read after its sync. */
static int prof_begin(gmtf_gpu_bwt_ctx *c)
{
    if (c->profile)
        CK(c, cudaEventRecord(c->p0, c->st));
    return 0;
}

static int prof_end(gmtf_gpu_bwt_ctx *c, int phase)
{
    if (!c->profile)
        return 0;
    float ms = 0;
    CK(c, cudaEventRecord(c->p1, c->st));
    CK(c, cudaEventSynchronize(c->p1));
    CK(c, cudaEventElapsedTime(&ms, c->p0, c->p1));
    c->prof.ms[phase] += ms;
    return 0;
}

static int run_begin(gmtf_gpu_bwt_ctx *c)
{
    CK(c, cudaEventRecord(c->e0, c->st));
    return 0;
}

static int run_end(gmtf_gpu_bwt_ctx *c, double *ms)
{
    float f = 0;
    CK(c, cudaEventRecord(c->e1, c->st));
    CK(c, cudaEventSynchronize(c->e1));
    CK(c, cudaEventElapsedTime(&f, c->e0, c->e1));
    if (ms)
        *ms = f;
    return 0;
}

/* CUDA's current device is the calling thread's: every entry point that
 * launches or copies makes the context's device current first. */
static int use_device(gmtf_gpu_bwt_ctx *c)
{
    cudaError_t e = cudaSetDevice(c->dev);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, "cudaSetDevice");
}

static int backend_open(gmtf_gpu_bwt_ctx *c)
{
    if (c->dev >= gmtf_gpu_device_count())
        return -ENODEV;
    if (!gmtf_gpu_available())
        return -ENODEV;
    bool fail = cudaSetDevice(c->dev) != cudaSuccess ||
                cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess ||
                cudaEventCreate(&c->e0) != cudaSuccess || cudaEventCreate(&c->e1) != cudaSuccess ||
                cudaEventCreate(&c->p0) != cudaSuccess || cudaEventCreate(&c->p1) != cudaSuccess ||
                cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming) != cudaSuccess;
    for (int i = 0; i < NCLS - 1 && !fail; i++)
        fail = cudaStreamCreateWithFlags(&c->side[i], cudaStreamNonBlocking) != cudaSuccess ||
               cudaEventCreateWithFlags(&c->join[i], cudaEventDisableTiming) != cudaSuccess;
    fail = fail || cudaStreamCreateWithFlags(&c->cp, cudaStreamNonBlocking) != cudaSuccess;
    for (int i = 0; i < NCHUNK + 1 && !fail; i++)
        fail = (i < NCHUNK &&
                cudaEventCreateWithFlags(&c->ev_up[i], cudaEventDisableTiming) != cudaSuccess) ||
               cudaEventCreateWithFlags(&c->ev_out[i], cudaEventDisableTiming) != cudaSuccess;
    if (fail) {
        cudaGetLastError();
        return -ENODEV;
    }
    return 0;
}

static void backend_close(gmtf_gpu_bwt_ctx *c)
{
    if (c->st)
        cudaStreamSynchronize(c->st);
    cudaEvent_t ev[] = {c->e0, c->e1, c->p0, c->p1, c->fork};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    for (int i = 0; i < NCLS - 1; i++) {
        if (c->side[i])
            cudaStreamSynchronize(c->side[i]);
        if (c->join[i])
            cudaEventDestroy(c->join[i]);
        if (c->side[i])
            cudaStreamDestroy(c->side[i]);
    }
    for (int i = 0; i < NCHUNK + 1; i++) {
        if (i < NCHUNK && c->ev_up[i])
            cudaEventDestroy(c->ev_up[i]);
        if (c->ev_out[i])
            cudaEventDestroy(c->ev_out[i]);
    }
    if (c->cp) {
        cudaStreamSynchronize(c->cp);
        cudaStreamDestroy(c->cp);
    }
    if (c->st)
        cudaStreamDestroy(c->st);
    cudaGetLastError();
}

#else /* GMTF_BWT_EMU: the same steps on the CPU */

template <class F> static void each(gmtf_gpu_bwt_ctx *, uint32_t n, const F &f)
{
    for (uint32_t i = 0; i < n; i++)
        f(i);
}

template <class F> static void each_from(gmtf_gpu_bwt_ctx *, uint32_t p0, uint32_t n, const F &f)
{
    for (uint32_t i = 0; i < n; i++)
        f(p0 + i);
}

static int launched(gmtf_gpu_bwt_ctx *, const char *)
{
    return 0;
}

/* The emulation has no streams: the same steps in order. */
static int ov_upload(gmtf_gpu_bwt_ctx *c, const overlap *ov)
{
    for (int j = 0; j < ov->n; j++)
        memcpy((uint8_t *)c->in.p + ov->byte[j], ov->src + ov->byte[j],
               ov->byte[j + 1] - ov->byte[j]);
    return 0;
}

static int ov_wait_upload(gmtf_gpu_bwt_ctx *, int)
{
    return 0;
}

static int ov_download(gmtf_gpu_bwt_ctx *c, const overlap *ov, int j, uint32_t nidx)
{
    if (j < ov->n)
        memcpy(ov->dst + ov->byte[j], (uint8_t *)c->out.p + ov->byte[j],
               ov->byte[j + 1] - ov->byte[j]);
    else
        memcpy(ov->idx, c->idx.p, (size_t)nidx * 4);
    return 0;
}

static int ov_finish(gmtf_gpu_bwt_ctx *)
{
    return 0;
}

static void emit_host(const lists &L, uint32_t start, uint32_t size)
{
    int c = size_class(size);
    L.d[c][(uint32_t)L.cnt[c]] = desc_make(start, size);
    L.cnt[c] += 1 + ((uint64_t)size << 32);
}

static void launch_init_rank(gmtf_gpu_bwt_ctx *, const uint64_t *key, const uint32_t *sa,
                             const uint32_t *R, uint32_t np, uint64_t *isa, const lists &L)
{
    for (uint32_t j = 0; j < np; j++) {
        uint32_t size;
        init_rank(key, sa, R, np, j, isa, &size);
        if (size)
            emit_host(L, j + 1 - size, size);
    }
}

/* Every group of the list sorted by key (equal keys in reverse order of
 * arrival), new ranks, subgroups listed: what every GPU class kernel does.
 * Groups go backwards, and each is read and written before the next, so
 * later groups read ranks this round already changed (isa_at must undo). */
static void launch_rank(gmtf_gpu_bwt_ctx *, int, const uint64_t *list, uint32_t n,
                        const round_args &a, const lists &L)
{
    std::vector<std::pair<uint32_t, uint32_t>> m;
    for (uint32_t g = n; g-- > 0;) {
        uint32_t start = (uint32_t)list[g], size = (uint32_t)(list[g] >> 32);
        m.clear();
        for (uint32_t i = 0; i < size; i++)
            m.push_back(
                std::make_pair(key_of(a.isa, a.sa[start + i], a.h, a.last, a.round), size - i));
        std::sort(m.begin(), m.end());
        std::vector<uint32_t> v(size);
        for (uint32_t i = 0; i < size; i++)
            v[i] = a.sa[start + size - m[i].second];
        for (uint32_t i = 0, h = 0; i < size; i++) {
            if (m[i].first != m[h].first)
                h = i;
            a.sa[start + i] = v[i];
            a.isa[v[i]] = isa_pack(start + h, start, a.round);
            if ((i + 1 == size || m[i + 1].first != m[i].first) && i > h)
                emit_host(L, start + h, i - h + 1);
        }
    }
}

static void launch_rank_large(gmtf_gpu_bwt_ctx *, const uint64_t *list, const uint32_t *loff,
                              const uint32_t *kc, const uint32_t *vc, const uint32_t *R,
                              uint32_t g0, uint32_t kbits, uint32_t i0, uint32_t n,
                              const round_args &a, const lists &L)
{
    for (uint32_t t = 0; t < n; t++) {
        uint32_t at, size;
        large_rank(list, loff, kc, vc, R, g0, kbits, i0, n, t, a.round, a.sa, a.isa, &at, &size);
        if (size)
            emit_host(L, at, size);
    }
}

static int dev_reserve(gmtf_gpu_bwt_ctx *c, dbuf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return 0;
    free(b->p);
    b->cap = 0;
    /* poisoned, as device memory is never zeroed */
    b->p = malloc(bytes ? bytes : 1);
    if (!b->p)
        return set_err(c, -ENOMEM, "malloc", "out of memory");
    memset(b->p, 0xa5, bytes);
    b->cap = bytes;
    return 0;
}

static void dev_free(dbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

static int host_alloc(void **p, size_t bytes)
{
    *p = malloc(bytes);
    return *p ? 0 : -ENOMEM;
}

static void host_free(void *p)
{
    free(p);
}

static bool is_pinned(const void *)
{
    return true; /* the emulation takes the overlapped batch path */
}

static int copy_h2d(gmtf_gpu_bwt_ctx *, void *d, const void *h, size_t n)
{
    if (n)
        memcpy(d, h, n);
    return 0;
}

static int copy_d2h(gmtf_gpu_bwt_ctx *, void *h, const void *d, size_t n)
{
    if (n)
        memcpy(h, d, n);
    return 0;
}

static int dev_zero(gmtf_gpu_bwt_ctx *, void *d, size_t n)
{
    memset(d, 0, n);
    return 0;
}

static int dev_sync(gmtf_gpu_bwt_ctx *)
{
    return 0;
}

static int temp_bytes(gmtf_gpu_bwt_ctx *, size_t, size_t *bytes)
{
    *bytes = 1;
    return 0;
}

template <class K>
static int sort_pairs(gmtf_gpu_bwt_ctx *, K *ka, K *kb, uint32_t *va, uint32_t *vb, uint32_t n, int,
                      K **kout, uint32_t **vout)
{
    std::vector<std::pair<K, uint32_t>> v;
    v.reserve(n);
    for (uint32_t i = 0; i < n; i++)
        v.push_back(std::make_pair(ka[i], va[i]));
    std::stable_sort(v.begin(), v.end(),
                     [](const std::pair<K, uint32_t> &a, const std::pair<K, uint32_t> &b) {
                         return a.first < b.first;
                     });
    for (uint32_t i = 0; i < n; i++) {
        kb[i] = v[i].first;
        vb[i] = v[i].second;
    }
    *kout = kb;
    *vout = vb;
    return 0;
}

static int scan_max(gmtf_gpu_bwt_ctx *, uint32_t *a, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++)
        a[i] = a[i] > a[i - 1] ? a[i] : a[i - 1];
    return 0;
}

static int scan_sum(gmtf_gpu_bwt_ctx *, uint32_t *a, uint32_t n)
{
    uint32_t s = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = a[i];
        a[i] = s;
        s += x;
    }
    return 0;
}

static std::chrono::steady_clock::time_point emu_t0, emu_p0;

static int prof_begin(gmtf_gpu_bwt_ctx *)
{
    emu_p0 = std::chrono::steady_clock::now();
    return 0;
}

static int prof_end(gmtf_gpu_bwt_ctx *c, int phase)
{
    if (c->profile)
        c->prof.ms[phase] +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - emu_p0)
                .count();
    return 0;
}

static int run_begin(gmtf_gpu_bwt_ctx *)
{
    emu_t0 = std::chrono::steady_clock::now();
    return 0;
}

static int run_end(gmtf_gpu_bwt_ctx *, double *ms)
{
    if (ms)
        *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - emu_t0)
                  .count();
    return 0;
}

typedef int cudaStream_t;

static int fork_sides(gmtf_gpu_bwt_ctx *)
{
    return 0;
}

static cudaStream_t use_side(gmtf_gpu_bwt_ctx *, int)
{
    return 0;
}

static void restore_stream(gmtf_gpu_bwt_ctx *, cudaStream_t)
{
}

static int join_sides(gmtf_gpu_bwt_ctx *)
{
    return 0;
}

static int use_device(gmtf_gpu_bwt_ctx *)
{
    return 0;
}

static int backend_open(gmtf_gpu_bwt_ctx *)
{
    return 0;
}

static void backend_close(gmtf_gpu_bwt_ctx *)
{
}

#endif

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    } while (0)

/* ---- one piece ------------------------------------------------------------ */

static const uint32_t class_min[NCLS] = {2,          CT_MAX + 1,  CW_MAX + 1,
                                         CM_MAX + 1, CB1_MAX + 1, CB2_MAX + 1};

/* Working buffers for pieces of up to np positions:
 *   isa     8 B a position (versioned ranks)
 *   pool   24 B: initial keys 2 x 8 B, values 2 x 4 B; then sa (one value
 *          array) and the class-5 dense arrays
 *   desc   two sets of six lists, each as long as its class can get
 *          (np / smallest size), 8 B a descriptor: about 10.3 B a position
 *   loff   class-5 offsets; tmp: CUB; cnt: two sets of counters */
static int reserve_work(gmtf_gpu_bwt_ctx *c, uint32_t np)
{
    size_t cap = ((size_t)np + 63) & ~(size_t)63;
    if (cap <= c->cap)
        return 0;
    size_t tb = 0, nd = 0, lc[NCLS];
    for (int k = 0; k < NCLS; k++) {
        lc[k] = cap / class_min[k] + 1;
        nd += lc[k];
    }
    TRY(temp_bytes(c, cap, &tb));
    TRY(dev_reserve(c, &c->isa, cap * 8));
    TRY(dev_reserve(c, &c->pool, cap * 24));
    TRY(dev_reserve(c, &c->desc, 2 * nd * 8));
    TRY(dev_reserve(c, &c->loff, (lc[CL] + 2) * 4));
    TRY(dev_reserve(c, &c->tmp, tb));
    TRY(dev_reserve(c, &c->cnt, 2 * NCLS * 8));
    for (int k = 0; k < NCLS; k++)
        c->lcap[k] = lc[k];
    c->cap = cap;
    return 0;
}

/* The lists of set s (0 or 1). */
static lists lists_of(gmtf_gpu_bwt_ctx *c, int s)
{
    lists L;
    uint64_t *d = (uint64_t *)c->desc.p;
    size_t nd = 0;
    for (int k = 0; k < NCLS; k++)
        nd += c->lcap[k];
    d += s * nd;
    for (int k = 0; k < NCLS; k++) {
        L.d[k] = d;
        d += c->lcap[k];
    }
    L.cnt = (uint64_t *)c->cnt.p + s * NCLS;
    return L;
}

/* Reads the counters of set s into n[] (descriptors) and m[] (members);
 * checks them against the capacities. */
static int read_counts(gmtf_gpu_bwt_ctx *c, const lists &L, uint32_t *n, uint32_t *m, uint32_t np)
{
    TRY(copy_d2h(c, c->h_cnt, L.cnt, NCLS * 8));
    TRY(dev_sync(c));
    uint64_t members = 0;
    for (int k = 0; k < NCLS; k++) {
        n[k] = (uint32_t)c->h_cnt[k];
        m[k] = (uint32_t)(c->h_cnt[k] >> 32);
        if (n[k] > c->lcap[k] || m[k] < (uint64_t)n[k] * class_min[k])
            return set_err(c, -EIO, "sort_piece", "inconsistent group lists");
        members += m[k];
    }
    if (members > np)
        return set_err(c, -EIO, "sort_piece", "inconsistent group counts");
    return 0;
}

/* Characters in the initial key: the most with nb * 257^k <= 2^64. */
static unsigned initial_chars(uint32_t nb, uint64_t *pk, int *end_bit)
{
    unsigned k = 1;
    unsigned __int128 p = 257;
    while (k < 7 && (unsigned __int128)nb * p * 257 <= ((unsigned __int128)1 << 64)) {
        p *= 257;
        k++;
    }
    unsigned __int128 top = (unsigned __int128)nb * p - 1;
    int bits = 0;
    while (top) {
        bits++;
        top >>= 1;
    }
    *pk = (uint64_t)p;
    *end_bit = bits;
    return k;
}

static uint32_t bit_length(uint64_t x)
{
    uint32_t b = 0;
    while (x) {
        b++;
        x >>= 1;
    }
    return b;
}

/* Class-5 groups of a round, gathered into one dense array: keys in kl,
 * values in vl. */
static int gather_large(gmtf_gpu_bwt_ctx *c, const uint64_t *list, uint32_t n5, uint32_t a5,
                        const round_args &a, uint32_t *kl, uint32_t *vl)
{
    uint32_t *loff = (uint32_t *)c->loff.p;
    each(c, n5, f_large_sizes{list, loff});
    TRY(dev_zero(c, loff + n5, 4));
    TRY(launched(c, "large sizes"));
    TRY(scan_sum(c, loff, n5 + 1));
    each(c, a5,
         f_large_gather{list, loff, a.sa, a.isa, a.bs, n5, a.nb, a.h, a.last, a.round, a.kbits,
                        1u << (32 - a.kbits), kl, vl});
    return launched(c, "large gather");
}

/* ... sorted by (group, key) in chunks of groups whose index fits beside
 * the key in 32 bits, and ranked. k2/v2 are the other halves of the double
 * buffers; R scratch. */
static int rank_large(gmtf_gpu_bwt_ctx *c, const uint64_t *list, uint32_t n5, uint32_t a5,
                      const round_args &a, uint32_t *kl, uint32_t *vl, uint32_t *k2, uint32_t *v2,
                      uint32_t *R, const lists &L)
{
    const uint32_t *loff = (const uint32_t *)c->loff.p;
    uint32_t per_chunk = 1u << (32 - a.kbits);
    uint32_t *h_loff = (uint32_t *)(c->h_cnt + NCLS); /* pinned scratch: chunk bounds */
    for (uint32_t g0 = 0; g0 < n5; g0 += per_chunk) {
        uint32_t g1 = n5 - g0 < per_chunk ? n5 : g0 + per_chunk;
        uint32_t i0 = 0, n = a5;
        if (g0 > 0 || g1 < n5) { /* several chunks: read their bounds */
            TRY(copy_d2h(c, h_loff, loff + g0, 4));
            TRY(copy_d2h(c, h_loff + 1, loff + g1, 4));
            TRY(dev_sync(c));
            i0 = h_loff[0];
            n = h_loff[1] - h_loff[0];
            if (h_loff[1] < h_loff[0] || h_loff[1] > a5)
                return set_err(c, -EIO, "rank_large", "inconsistent offsets");
        }
        uint32_t *ks, *vs;
        int bits = (int)(a.kbits + bit_length(g1 - g0 - 1));
        TRY(sort_pairs<uint32_t>(c, kl + i0, k2 + i0, vl + i0, v2 + i0, n, bits, &ks, &vs));
        each(c, n, f_heads<uint32_t>{ks, R});
        TRY(launched(c, "large heads"));
        TRY(scan_max(c, R, n));
        if (n)
            launch_rank_large(c, list, loff, ks, vs, R, g0, a.kbits, i0, n, a, L);
        TRY(launched(c, "large rank"));
    }
    return 0;
}

static int sort_piece(gmtf_gpu_bwt_ctx *c, const piece *pc, const overlap *ov)
{
    uint32_t np = pc->np, nb = (uint32_t)(pc->b1 - pc->b0);
    const uint8_t *text = (const uint8_t *)c->in.p + pc->t0;
    uint8_t *out = (uint8_t *)c->out.p + pc->t0;
    const uint32_t *bs = (const uint32_t *)c->meta.p + pc->m0;
    const uint32_t *so = bs + nb + 1, *step = so + nb + 1;
    uint64_t *isa = (uint64_t *)c->isa.p;
    uint32_t *X[6];
    for (int i = 0; i < 6; i++)
        X[i] = (uint32_t *)c->pool.p + (size_t)i * c->cap;

    /* 1. initial keys and their sort: keys in X0X1 / X2X3, values X4 / X5 */
    uint64_t pk;
    int end_bit;
    unsigned k = initial_chars(nb, &pk, &end_bit);
    c->prof.init_chars = k;
    TRY(prof_begin(c));
    f_init_keys fk = {text, bs, nb, k, pk, (uint64_t *)X[0], X[4]};
    if (ov) /* range by range as the upload goes */
        for (int j = 0; j < ov->n; j++) {
            TRY(ov_wait_upload(c, j));
            each_from(c, ov->pos[j], ov->pos[j + 1] - ov->pos[j], fk);
        }
    else
        each(c, np, fk);
    TRY(launched(c, "init_keys"));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_KEYS));
    TRY(prof_begin(c));
    uint64_t *ks;
    uint32_t *sa;
    TRY(sort_pairs<uint64_t>(c, (uint64_t *)X[0], (uint64_t *)X[2], X[4], X[5], np, end_bit, &ks,
                             &sa));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_SORT0));
    if (sa != X[4] && sa != X[5])
        return set_err(c, -EIO, "sort_piece", "unexpected buffers");

    /* 2. first ranks and groups; R in the free key pair */
    uint32_t *kfree = ks == (uint64_t *)X[0] ? X[2] : X[0];
    uint32_t *vfree = sa == X[4] ? X[5] : X[4];
    int cur = 0;
    lists L = lists_of(c, cur);
    uint32_t n[NCLS], m[NCLS];
    TRY(prof_begin(c));
    TRY(dev_zero(c, L.cnt, NCLS * 8));
    each(c, np, f_heads<uint64_t>{ks, kfree});
    TRY(launched(c, "init heads"));
    TRY(scan_max(c, kfree, np));
    launch_init_rank(c, ks, sa, kfree, np, isa, L);
    TRY(launched(c, "init rank"));
    TRY(read_counts(c, L, n, m, np));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_RANK0));

    /* 3. doubling; the class-5 dense arrays in the key pairs and the free
     * value array */
    round_args a = {sa, isa, bs, nb, k, np - 1, 0, bit_length((uint64_t)pc->maxlen + 1)};
    /* GMTF_BWT_TRACE with profiling on: per-round groups and times */
    bool trace = c->profile && getenv("GMTF_BWT_TRACE");
    for (;;) {
        uint64_t members = 0;
        for (int q = 0; q < NCLS; q++)
            members += m[q];
        if (!members)
            break;
        if (++a.round > MAX_ROUNDS || a.h > GMTF_GPU_BWT_MAX_BLOCK)
            return set_err(c, -EIO, "sort_piece", "doubling did not converge");
        c->prof.active += members;
        double before[GMTF_GPU_BWT_PH_COUNT];
        memcpy(before, c->prof.ms, sizeof before);
        lists C = lists_of(c, cur), N = lists_of(c, cur ^ 1);
        TRY(dev_zero(c, N.cnt, NCLS * 8));
        TRY(prof_begin(c));
        if (n[CL])
            TRY(gather_large(c, C.d[CL], n[CL], m[CL], a, X[0], vfree));
        TRY(prof_end(c, GMTF_GPU_BWT_PH_GATHER));
        /* the classes' groups are disjoint and ranks versioned: their
         * kernels may run side by side (not when profiling by phase) */
        bool side = c->concurrent && !c->profile;
        if (side)
            TRY(fork_sides(c));
        double cls_ms[NCLS] = {0};
        for (int q = 0; q < CL; q++) {
            int ph = q < 3 ? GMTF_GPU_BWT_PH_SMALL : GMTF_GPU_BWT_PH_BLOCK;
            double t0 = c->prof.ms[ph];
            TRY(prof_begin(c));
            cudaStream_t main = use_side(c, side ? q : -1);
            launch_rank(c, q, C.d[q], n[q], a, N);
            restore_stream(c, main);
            TRY(launched(c, "rank"));
            TRY(prof_end(c, ph));
            cls_ms[q] = c->prof.ms[ph] - t0;
        }
        TRY(prof_begin(c));
        if (n[CL])
            TRY(rank_large(c, C.d[CL], n[CL], m[CL], a, X[0], vfree, X[1], X[2], X[3], N));
        TRY(prof_end(c, GMTF_GPU_BWT_PH_LARGE));
        if (side)
            TRY(join_sides(c));
        if (trace) {
            fprintf(stderr, "round %2u h %8u:", a.round, a.h);
            for (int q = 0; q < NCLS; q++)
                fprintf(stderr, " %u/%u", n[q], m[q]);
            for (int q = 0; q < CL; q++)
                fprintf(stderr, " %.3f", cls_ms[q]);
            for (int q = GMTF_GPU_BWT_PH_GATHER; q <= GMTF_GPU_BWT_PH_LARGE; q++)
                fprintf(stderr, " %s %.3f", gmtf_gpu_bwt_phase_name(q), c->prof.ms[q] - before[q]);
            fprintf(stderr, "\n");
        }
        TRY(read_counts(c, N, n, m, np));
        cur ^= 1;
        a.h *= 2;
    }
    if (a.round > c->prof.rounds)
        c->prof.rounds = a.round;

    /* 4. output */
    TRY(prof_begin(c));
    f_output fo = {text, bs, isa, nb, out};
    if (ov) /* each range goes down while the next is output */
        for (int j = 0; j < ov->n; j++) {
            each_from(c, ov->pos[j], ov->pos[j + 1] - ov->pos[j], fo);
            TRY(launched(c, "output"));
            TRY(ov_download(c, ov, j, 0));
        }
    else
        each(c, np, fo);
    TRY(launched(c, "output"));
    each(c, pc->ni, f_samples{bs, so, step, isa, nb, (uint32_t *)c->idx.p + pc->i0});
    TRY(launched(c, "samples"));
    if (ov)
        TRY(ov_download(c, ov, ov->n, pc->ni));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_OUTPUT));
    c->prof.positions += np;
    c->prof.pieces++;
    return 0;
}

/* ---- API ------------------------------------------------------------------ */

extern "C" int gmtf_gpu_bwt_create(gmtf_gpu_bwt_ctx **out)
{
    return gmtf_gpu_bwt_create_on(0, out);
}

extern "C" int gmtf_gpu_bwt_create_on(int dev, gmtf_gpu_bwt_ctx **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (dev < 0)
        return -ENODEV;
    gmtf_gpu_bwt_ctx *c = (gmtf_gpu_bwt_ctx *)calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->dev = dev;
    int rc = backend_open(c);
    if (rc == 0)
        rc = host_alloc((void **)&c->h_cnt, 128);
    if (rc) {
        gmtf_gpu_bwt_destroy(c);
        return rc;
    }
    c->ok = 1;
    c->piece_bound = PIECE_DEFAULT;
    /* GMTF_BWT_TRACE=1 (measurements): every batch's rounds and phases on
     * stderr, profiled (the classes' kernels then run one after another) */
    const char *tr = getenv("GMTF_BWT_TRACE");
    c->profile = tr && *tr == '1';
    const char *st = getenv("GMTF_BWT_STREAMS");
    c->concurrent = !(st && *st == '0');
    *out = c;
    return 0;
}

extern "C" void gmtf_gpu_bwt_destroy(gmtf_gpu_bwt_ctx *c)
{
    if (!c)
        return;
    (void)use_device(c);
    backend_close(c);
    dbuf *b[] = {&c->in,   &c->out,  &c->idx,  &c->meta, &c->isa,
                 &c->pool, &c->desc, &c->loff, &c->tmp,  &c->cnt};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        dev_free(b[i]);
    host_free(c->h_cnt);
    host_free(c->h_meta);
    free(c->pc);
    free(c);
}

extern "C" int gmtf_gpu_bwt_ok(const gmtf_gpu_bwt_ctx *c)
{
    return c && c->ok;
}

extern "C" const char *gmtf_gpu_bwt_error(const gmtf_gpu_bwt_ctx *c)
{
    return c ? c->err : "no context";
}

extern "C" int gmtf_gpu_bwt_set_piece(gmtf_gpu_bwt_ctx *c, uint64_t bytes)
{
    if (!c)
        return -ENODEV;
    uint64_t b = bytes ? bytes : PIECE_DEFAULT;
    c->piece_bound = b < PIECE_MIN ? PIECE_MIN : b > PIECE_MAX ? PIECE_MAX : b;
    return 0;
}

extern "C" int gmtf_gpu_bwt_set_profile(gmtf_gpu_bwt_ctx *c, int on)
{
    if (!c)
        return -ENODEV;
    memset(&c->prof, 0, sizeof c->prof);
    c->profile = on != 0;
    return 0;
}

extern "C" int gmtf_gpu_bwt_get_profile(const gmtf_gpu_bwt_ctx *c, gmtf_gpu_bwt_profile *p)
{
    if (!c)
        return -ENODEV;
    if (!p)
        return -EINVAL;
    *p = c->prof;
    const dbuf *b[] = {&c->in,   &c->out,  &c->idx,  &c->meta, &c->isa,
                       &c->pool, &c->desc, &c->loff, &c->tmp,  &c->cnt};
    p->device_bytes = 0;
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        p->device_bytes += b[i]->cap;
    return 0;
}

extern "C" const char *gmtf_gpu_bwt_phase_name(int phase)
{
    static const char *names[GMTF_GPU_BWT_PH_COUNT] = {"keys",  "sort0", "rank0", "gather",
                                                       "small", "block", "large", "output"};
    return phase >= 0 && phase < GMTF_GPU_BWT_PH_COUNT ? names[phase] : NULL;
}

/* Checks the batch and cuts it into pieces; fills the host meta arrays. */
static int plan(gmtf_gpu_bwt_ctx *c, const uint64_t *off, size_t count, const uint32_t *step)
{
    uint64_t nidx = 0;
    size_t npc = 0;
    uint64_t np = 0;
    /* pass 1: check, count pieces */
    for (size_t i = 0; i < count; i++) {
        if (off[i + 1] <= off[i] || off[i + 1] - off[i] > GMTF_GPU_BWT_MAX_BLOCK)
            return set_err(c, -EINVAL, "batch",
                           "empty block, block over 2^24 bytes or offsets "
                           "not ascending");
        uint64_t n = off[i + 1] - off[i];
        if (step && step[i] == 0)
            return set_err(c, -EINVAL, "batch", "sample step 0");
        nidx += gmtf_gpu_bwt_index_count(n, step ? step[i] : gmtf_gpu_bwt_default_step(n));
        if (i == 0 || np + n + 1 > c->piece_bound) {
            npc++;
            np = 0;
        }
        np += n + 1;
    }
    if (npc > c->pc_cap) {
        piece *p = (piece *)realloc(c->pc, npc * sizeof *p);
        if (!p)
            return set_err(c, -ENOMEM, "plan", "out of memory");
        c->pc = p;
        c->pc_cap = npc;
    }
    size_t meta = 3 * count + 2 * npc;
    if (meta > c->h_meta_cap) {
        host_free(c->h_meta);
        c->h_meta_cap = 0;
        if (host_alloc((void **)&c->h_meta, meta * 4))
            return set_err(c, -ENOMEM, "plan", "pinned host memory");
        c->h_meta_cap = meta;
    }
    /* pass 2: pieces and their meta arrays (bs[nb+1], so[nb+1], step[nb]) */
    size_t k = 0, i = 0;
    uint64_t m = 0, i0 = 0;
    while (i < count) {
        piece *p = &c->pc[k++];
        p->b0 = i;
        p->t0 = off[i] - off[0];
        p->i0 = i0;
        np = 0;
        p->maxlen = 0;
        size_t j = i;
        while (j < count && (j == i || np + (off[j + 1] - off[j]) + 1 <= c->piece_bound)) {
            np += off[j + 1] - off[j] + 1;
            if (off[j + 1] - off[j] > p->maxlen)
                p->maxlen = (uint32_t)(off[j + 1] - off[j]);
            j++;
        }
        p->b1 = j;
        p->np = (uint32_t)np;
        p->m0 = m;
        size_t nb = j - i;
        uint32_t *bs = c->h_meta + m, *so = bs + nb + 1, *st = so + nb + 1;
        uint32_t pos = 0, ix = 0;
        for (size_t b = 0; b < nb; b++) {
            uint64_t n = off[i + b + 1] - off[i + b];
            uint32_t s = step ? step[i + b] : gmtf_gpu_bwt_default_step(n);
            bs[b] = pos;
            so[b] = ix;
            st[b] = s;
            pos += (uint32_t)n + 1;
            ix += (uint32_t)gmtf_gpu_bwt_index_count(n, s);
        }
        bs[nb] = pos;
        so[nb] = ix;
        p->ni = ix;
        i0 += ix;
        m += 3 * nb + 2;
        i = j;
    }
    c->npc = npc;
    c->count = count;
    c->base = off[0];
    c->nbytes = off[count] - off[0];
    c->nidx = nidx;
    return (k == npc && i0 == nidx) ? 0 : set_err(c, -EIO, "plan", "inconsistent pieces");
}

/* Plans the batch and sizes the device buffers for it (count > 0). */
static int stage_prepare(gmtf_gpu_bwt_ctx *c, const uint64_t *off, size_t count,
                         const uint32_t *step)
{
    TRY(plan(c, off, count, step));
    uint32_t maxnp = 0;
    for (size_t i = 0; i < c->npc; i++)
        maxnp = c->pc[i].np > maxnp ? c->pc[i].np : maxnp;
    TRY(dev_reserve(c, &c->in, c->nbytes + 16));
    TRY(dev_reserve(c, &c->out, c->nbytes + 16));
    TRY(dev_reserve(c, &c->idx, c->nidx * 4 + 16));
    TRY(dev_reserve(c, &c->meta, (3 * count + 2 * c->npc) * 4));
    return reserve_work(c, maxnp);
}

extern "C" int gmtf_gpu_bwt_stage_upload(gmtf_gpu_bwt_ctx *c, const uint8_t *src,
                                         const uint64_t *off, size_t count, const uint32_t *step)
{
    if (!c)
        return -ENODEV;
    TRY(use_device(c));
    if (!c->ok)
        return -EIO;
    c->staged = 0;
    if (!off || (count && !src))
        return -EINVAL;
    if (count == 0) {
        TRY(plan(c, off, count, step));
        c->staged = 1;
        return 0;
    }
    TRY(stage_prepare(c, off, count, step));
    TRY(copy_h2d(c, c->in.p, src + off[0], c->nbytes));
    TRY(copy_h2d(c, c->meta.p, c->h_meta, (3 * count + 2 * c->npc) * 4));
    TRY(dev_sync(c));
    c->staged = 1;
    return 0;
}

extern "C" int gmtf_gpu_bwt_stage_run(gmtf_gpu_bwt_ctx *c, double *kernel_ms)
{
    if (!c)
        return -ENODEV;
    TRY(use_device(c));
    if (!c->ok)
        return -EIO;
    if (!c->staged)
        return -EINVAL;
    c->staged = 1;
    TRY(run_begin(c));
    for (size_t i = 0; i < c->npc && c->count; i++) {
        int rc = sort_piece(c, &c->pc[i], NULL);
        if (rc) {
            dev_sync(c);
            return rc;
        }
    }
    TRY(run_end(c, kernel_ms));
    c->staged = 2;
    return 0;
}

extern "C" int gmtf_gpu_bwt_stage_download(gmtf_gpu_bwt_ctx *c, uint8_t *dst, uint32_t *idx)
{
    if (!c)
        return -ENODEV;
    TRY(use_device(c));
    if (!c->ok)
        return -EIO;
    if (c->staged != 2)
        return -EINVAL;
    if (c->count && (!dst || !idx))
        return -EINVAL;
    if (c->count == 0)
        return 0;
    TRY(copy_d2h(c, dst + c->base, c->out.p, c->nbytes));
    TRY(copy_d2h(c, idx, c->idx.p, c->nidx * 4));
    TRY(dev_sync(c));
    return 0;
}

extern "C" int gmtf_gpu_bwt_stage_device(gmtf_gpu_bwt_ctx *c, void **bwt, void **idx)
{
    if (!c)
        return -ENODEV;
    if (c->staged != 2)
        return -EINVAL;
    if (bwt)
        *bwt = c->out.p;
    if (idx)
        *idx = c->idx.p;
    return 0;
}

static int batch_impl(gmtf_gpu_bwt_ctx *c, const uint8_t *src, const uint64_t *off, size_t count,
                      const uint32_t *step, uint8_t *dst, uint32_t *idx);

extern "C" int gmtf_gpu_bwt_batch(gmtf_gpu_bwt_ctx *c, const uint8_t *src, const uint64_t *off,
                                  size_t count, const uint32_t *step, uint8_t *dst, uint32_t *idx)
{
    int rc = batch_impl(c, src, off, count, step, dst, idx);
    const char *tr = getenv("GMTF_BWT_TRACE");
    if (c && c->profile && tr && *tr == '1') {
        uint64_t most = 0;
        for (size_t i = 0; i < count; i++)
            most = off[i + 1] - off[i] > most ? off[i + 1] - off[i] : most;
        fprintf(stderr,
                "bwt trace: %zu blocks (longest %llu), %u pieces, %u rounds, active %.2f:", count,
                (unsigned long long)most, c->prof.pieces, c->prof.rounds,
                c->prof.positions ? (double)c->prof.active / (double)c->prof.positions : 0.0);
        for (int q = 0; q < GMTF_GPU_BWT_PH_COUNT; q++)
            fprintf(stderr, " %s %.2f", gmtf_gpu_bwt_phase_name(q), c->prof.ms[q]);
        fprintf(stderr, " ms\n");
        memset(&c->prof, 0, sizeof c->prof);
    }
    return rc;
}

static int batch_impl(gmtf_gpu_bwt_ctx *c, const uint8_t *src, const uint64_t *off, size_t count,
                      const uint32_t *step, uint8_t *dst, uint32_t *idx)
{
    if (!c)
        return -ENODEV;
    TRY(use_device(c));
    if (count && (!dst || !idx || !src || !off))
        return -EINVAL;
    if (count >= 2 && c->ok && is_pinned(src) && is_pinned(dst) && is_pinned(idx)) {
        /* one piece from pinned memory: copies overlap the first and last
         * kernels (struct overlap) */
        c->staged = 0;
        TRY(stage_prepare(c, off, count, step));
        if (c->npc == 1) {
            const piece *pc = &c->pc[0];
            overlap ov;
            ov.n = count < NCHUNK ? (int)count : NCHUNK;
            ov.src = src + off[0];
            ov.dst = dst + off[0];
            ov.idx = idx;
            size_t b = 0;
            for (int j = 0; j <= ov.n; j++) {
                /* the first block boundary at or past j/n of the bytes */
                uint64_t want = j == ov.n ? c->nbytes : c->nbytes * (uint64_t)j / (uint64_t)ov.n;
                while (b < count && off[b] - off[0] < want)
                    b++;
                ov.byte[j] = off[b] - off[0];
                ov.pos[j] = c->h_meta[pc->m0 + b];
            }
            TRY(copy_h2d(c, c->meta.p, c->h_meta, (3 * count + 2 * c->npc) * 4));
            TRY(ov_upload(c, &ov));
            int rc = sort_piece(c, pc, &ov);
            if (rc) {
                ov_finish(c);
                return rc;
            }
            TRY(ov_finish(c));
            c->staged = 2;
            return 0;
        }
    }
    TRY(gmtf_gpu_bwt_stage_upload(c, src, off, count, step));
    TRY(gmtf_gpu_bwt_stage_run(c, NULL));
    if (count == 0)
        return 0;
    return gmtf_gpu_bwt_stage_download(c, dst, idx);
}
