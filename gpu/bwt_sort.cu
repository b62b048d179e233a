/* Forward BWT of a batch of blocks on the GPU (gpu_bwt.h): a segmented
 * suffix sort by prefix doubling over radix-sorted initial keys, with
 * singleton discarding (docs/gpu.md, "GPU BWT").
 *
 * Positions. A piece of the batch (whole blocks) is laid out as one string
 * of positions: block b owns positions [s_b, s_b + n_b] where position
 * s_b + n_b stands for its empty suffix (the sentinel). Every position is a
 * suffix to sort, and block b's suffixes take the sorted slots
 * [s_b, s_b + n_b]: slot s_b is the empty suffix (row 0), so row = slot - s_b.
 *
 * Ranks. isa[p] is the slot where p's group (suffixes sharing their first h
 * characters, the end of the block counting as a character below every
 * byte) starts. Keys compare the block first, so ranks never cross blocks.
 *
 * 1. Initial keys: block id and the first k characters in base 257
 *    (0 = past the end, byte c = c + 1), k as large as fits 64 bits with
 *    the block id; one radix sort. The key is exact, so a suffix shorter
 *    than k is alone in its group.
 * 2. Doubling: a group of depth h holds suffixes of length >= h only (a
 *    shorter one differs from all others within h characters), so the
 *    suffix h ahead of each member lies in the same block, at most at its
 *    sentinel. Sorting each group by isa[p + h] gives depth 2h. Groups of one
 *    are final and leave the active list; the active list keeps each
 *    element's position (V) and slot (P, bit 31 = first of its group).
 * 3. Output: row of p = isa[p] - s_b; the byte before p goes to its row,
 *    rows after the primary index's row one place down.
 *
 * The same source builds for the CPU with GMTF_BWT_EMU (element loops and
 * std::sort in place of kernels and CUB): tests/gpu runs the algorithm
 * without a GPU that way. */
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
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cuda_runtime.h>
#include "gpu.h"
#define GMTF_HD __host__ __device__
#endif

#include "gpu_bwt.h"

#define START 0x80000000u
#define SLOT 0x7fffffffu
#ifdef GMTF_BWT_EMU
#define PIECE_MIN 4096ull /* the emulation tests the piece logic on small inputs */
#else
#define PIECE_MIN ((uint64_t)GMTF_GPU_BWT_MAX_BLOCK + 2)
#endif
#define PIECE_MAX (1ull << 30)
#define PIECE_DEFAULT ((1ull << 28) + (1ull << 24))
#define MAX_ROUNDS 40

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

/* ---- element functions (one per kernel) ---------------------------------- */

/* Block of position p: the last b with bs[b] <= p (bs ascending, nb >= 1). */
GMTF_HD static inline uint32_t find_block(const uint32_t *bs, uint32_t nb, uint32_t p)
{
    uint32_t lo = 0, hi = nb - 1;
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) >> 1;
        if (bs[mid] <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

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
        uint32_t b = find_block(bs, nb, p);
        uint32_t s = bs[b], n = bs[b + 1] - s - 1, l = p - s;
        const uint8_t *t = text + (s - b);
        uint64_t x = 0;
        for (uint32_t i = 0; i < k; i++)
            x = x * 257 + (l + i < n ? t[l + i] + 1u : 0u);
        key[p] = (uint64_t)b * pk + x;
        val[p] = p;
    }
};

/* Group heads after a sort: first of its old group or a new key. R = the
 * head's slot (0 elsewhere) for the max-scan. P NULL: slots are 0..A-1 and
 * the whole range is one old group (the initial sort). */
template <class K> struct f_heads {
    const K *key;
    const uint32_t *P;
    uint8_t *F;
    uint32_t *R;
    GMTF_HD void operator()(uint32_t j) const
    {
        uint32_t slot = P ? P[j] & SLOT : j;
        bool h = j == 0 || (P && (P[j] & START)) || key[j] != key[j - 1];
        F[j] = h;
        R[j] = h ? slot : 0;
    }
};

/* New ranks (R holds each element's head slot after the scan); S counts
 * the elements that stay active (low word) and the groups they open. */
struct f_update {
    const uint32_t *V, *R;
    const uint8_t *F;
    uint32_t A;
    uint32_t *isa;
    uint64_t *S;
    GMTF_HD void operator()(uint32_t j) const
    {
        isa[V[j]] = R[j];
        bool keep = !(F[j] && (j + 1 == A || F[j + 1]));
        S[j] = (uint64_t)keep | (uint64_t)(keep && F[j]) << 32;
    }
};

/* Keeps the elements of groups of two or more (after the exclusive scan
 * of S); the last element writes the totals and closes the offsets. */
struct f_compact {
    const uint32_t *V, *P;
    const uint8_t *F;
    const uint64_t *S;
    uint32_t A;
    uint32_t *Vn, *Pn, *seg, *cnt;
    GMTF_HD void operator()(uint32_t j) const
    {
        bool keep = !(F[j] && (j + 1 == A || F[j + 1]));
        uint64_t s = S[j];
        if (keep) {
            uint32_t o = (uint32_t)s;
            Vn[o] = V[j];
            Pn[o] = (P ? P[j] & SLOT : j) | (F[j] ? START : 0);
            if (F[j])
                seg[s >> 32] = o;
        }
        if (j + 1 == A) {
            uint32_t a = (uint32_t)s + keep, m = (uint32_t)(s >> 32) + (keep && F[j]);
            cnt[0] = a;
            cnt[1] = m;
            seg[m] = a;
        }
    }
};

/* The rank h positions ahead: the doubling key. */
struct f_gather {
    const uint32_t *V, *isa;
    uint32_t h, last;
    uint32_t *K;
    GMTF_HD void operator()(uint32_t j) const
    {
        uint32_t q = V[j] + h;
        K[j] = isa[q < last ? q : last];
    }
};

/* BWT bytes: every non-sentinel position writes the byte before it to its
 * row; position 0 of a block writes row 0 (the block's last byte). */
struct f_output {
    const uint8_t *text;
    const uint32_t *bs, *isa;
    uint32_t nb;
    uint8_t *out;
    GMTF_HD void operator()(uint32_t p) const
    {
        uint32_t b = find_block(bs, nb, p);
        uint32_t s = bs[b], n = bs[b + 1] - s - 1, l = p - s, o = s - b;
        if (l == n)
            return;
        if (l == 0) {
            out[o] = text[o + n - 1];
            return;
        }
        uint32_t row = isa[p] - s, r0 = isa[s] - s;
        out[o + (row < r0 ? row : row - 1)] = text[o + l - 1];
    }
};

/* Sample indexes: row of the suffix at k * step[b]. */
struct f_samples {
    const uint32_t *bs, *so, *step, *isa;
    uint32_t nb;
    uint32_t *idx;
    GMTF_HD void operator()(uint32_t t) const
    {
        uint32_t b = find_block(so, nb, t);
        uint32_t s = bs[b];
        idx[t] = isa[s + (t - so[b]) * step[b]] - s;
    }
};

/* ---- context ------------------------------------------------------------- */

struct dbuf {
    void *p;
    size_t cap;
};

struct piece {
    size_t b0, b1; /* blocks [b0, b1) */
    uint64_t t0;   /* first byte, relative to the batch */
    uint64_t i0;   /* first sample index */
    uint32_t np;   /* positions: bytes + one sentinel a block */
    uint32_t ni;   /* sample indexes */
    uint64_t m0;   /* bs, so, step of this piece at meta + m0 */
};

struct gmtf_gpu_bwt_ctx {
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
    uint32_t *h_cnt;
    /* device */
    dbuf in, out, idx, meta, isa, flag, s64, pool, seg, tmp, cnt;
    size_t cap; /* positions the working buffers hold */
#ifndef GMTF_BWT_EMU
    cudaStream_t st;
    cudaEvent_t e0, e1, p0, p1;
#endif
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

static int launched(gmtf_gpu_bwt_ctx *c, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_fail(c, e, what);
}

static int dev_reserve(gmtf_gpu_bwt_ctx *c, dbuf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return 0;
    if (b->p)
        cudaFree(b->p);
    b->p = NULL;
    b->cap = 0;
    cudaError_t e = cudaMalloc(&b->p, bytes);
    if (e != cudaSuccess) {
        b->p = NULL;
        return cuda_fail(c, e, "cudaMalloc");
    }
    b->cap = bytes;
    return 0;
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
    if (cudaMallocHost(p, bytes) != cudaSuccess) {
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

static int dev_sync(gmtf_gpu_bwt_ctx *c)
{
    CK(c, cudaStreamSynchronize(c->st));
    return 0;
}

struct max_u32 {
    __host__ __device__ uint32_t operator()(uint32_t a, uint32_t b) const
    {
        return a > b ? a : b;
    }
};

/* CUB temporary storage for every call on up to cap positions. */
static int temp_bytes(gmtf_gpu_bwt_ctx *c, size_t cap, size_t *bytes)
{
    size_t t = 0, m = 0;
    cub::DoubleBuffer<uint64_t> k64(NULL, NULL);
    cub::DoubleBuffer<uint32_t> k32(NULL, NULL), v32(NULL, NULL);
    CK(c, cub::DeviceRadixSort::SortPairs(NULL, t, k64, v32, (uint32_t)cap, 0, 64, c->st));
    m = t > m ? t : m;
    t = 0;
    CK(c,
       cub::DeviceSegmentedSort::SortPairs(NULL, t, k32, v32, (int64_t)cap, (int64_t)(cap / 2 + 1),
                                           (const uint32_t *)NULL, (const uint32_t *)NULL, c->st));
    m = t > m ? t : m;
    t = 0;
    CK(c, cub::DeviceScan::InclusiveScan(NULL, t, (uint32_t *)NULL, (uint32_t *)NULL, max_u32(),
                                         (uint32_t)cap, c->st));
    m = t > m ? t : m;
    t = 0;
    CK(c, cub::DeviceScan::ExclusiveSum(NULL, t, (uint64_t *)NULL, (uint64_t *)NULL, (uint32_t)cap,
                                        c->st));
    m = t > m ? t : m;
    *bytes = m + 256;
    return 0;
}

static int sort_initial(gmtf_gpu_bwt_ctx *c, uint64_t *ka, uint64_t *kb, uint32_t *va, uint32_t *vb,
                        uint32_t n, int end_bit, uint64_t **kout, uint32_t **vout)
{
    cub::DoubleBuffer<uint64_t> k(ka, kb);
    cub::DoubleBuffer<uint32_t> v(va, vb);
    size_t t = c->tmp.cap;
    CK(c, cub::DeviceRadixSort::SortPairs(c->tmp.p, t, k, v, n, 0, end_bit, c->st));
    *kout = k.Current();
    *vout = v.Current();
    return 0;
}

static int sort_groups(gmtf_gpu_bwt_ctx *c, uint32_t *ka, uint32_t *kb, uint32_t *va, uint32_t *vb,
                       uint32_t n, uint32_t m, const uint32_t *seg, uint32_t **kout,
                       uint32_t **vout)
{
    cub::DoubleBuffer<uint32_t> k(ka, kb);
    cub::DoubleBuffer<uint32_t> v(va, vb);
    size_t t = c->tmp.cap;
    CK(c, cub::DeviceSegmentedSort::SortPairs(c->tmp.p, t, k, v, (int64_t)n, (int64_t)m, seg,
                                              seg + 1, c->st));
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

static int scan_sum(gmtf_gpu_bwt_ctx *c, uint64_t *a, uint32_t n)
{
    size_t t = c->tmp.cap;
    CK(c, cub::DeviceScan::ExclusiveSum(c->tmp.p, t, a, a, n, c->st));
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

static int backend_open(gmtf_gpu_bwt_ctx *c)
{
    if (!gmtf_gpu_available())
        return -ENODEV;
    bool fail = cudaSetDevice(0) != cudaSuccess ||
                cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess ||
                cudaEventCreate(&c->e0) != cudaSuccess || cudaEventCreate(&c->e1) != cudaSuccess ||
                cudaEventCreate(&c->p0) != cudaSuccess || cudaEventCreate(&c->p1) != cudaSuccess;
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
    cudaEvent_t ev[] = {c->e0, c->e1, c->p0, c->p1};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
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

static int launched(gmtf_gpu_bwt_ctx *, const char *)
{
    return 0;
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
static void sort_pairs(K *ka, K *kb, uint32_t *va, uint32_t *vb, uint32_t lo, uint32_t hi)
{
    std::vector<std::pair<K, uint32_t>> v;
    v.reserve(hi - lo);
    for (uint32_t i = lo; i < hi; i++)
        v.push_back(std::make_pair(ka[i], va[i]));
    /* equal keys in reverse order of values: callers must not rely on it */
    std::sort(v.begin(), v.end(),
              [](const std::pair<K, uint32_t> &a, const std::pair<K, uint32_t> &b) {
                  return a.first < b.first || (a.first == b.first && a.second > b.second);
              });
    for (uint32_t i = lo; i < hi; i++) {
        kb[i] = v[i - lo].first;
        vb[i] = v[i - lo].second;
    }
}

static int sort_initial(gmtf_gpu_bwt_ctx *, uint64_t *ka, uint64_t *kb, uint32_t *va, uint32_t *vb,
                        uint32_t n, int, uint64_t **kout, uint32_t **vout)
{
    sort_pairs(ka, kb, va, vb, 0, n);
    *kout = kb;
    *vout = vb;
    return 0;
}

static int sort_groups(gmtf_gpu_bwt_ctx *, uint32_t *ka, uint32_t *kb, uint32_t *va, uint32_t *vb,
                       uint32_t n, uint32_t m, const uint32_t *seg, uint32_t **kout,
                       uint32_t **vout)
{
    (void)n;
    for (uint32_t g = 0; g < m; g++)
        sort_pairs(ka, kb, va, vb, seg[g], seg[g + 1]);
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

static int scan_sum(gmtf_gpu_bwt_ctx *, uint64_t *a, uint32_t n)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = a[i];
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

/* Working buffers for pieces of up to np positions. */
static int reserve_work(gmtf_gpu_bwt_ctx *c, uint32_t np)
{
    size_t cap = ((size_t)np + 63) & ~(size_t)63;
    if (cap <= c->cap)
        return 0;
    size_t tb = 0;
    TRY(temp_bytes(c, cap, &tb));
    TRY(dev_reserve(c, &c->isa, cap * 4));
    TRY(dev_reserve(c, &c->flag, cap));
    TRY(dev_reserve(c, &c->s64, cap * 8));
    TRY(dev_reserve(c, &c->pool, cap * 24));
    TRY(dev_reserve(c, &c->seg, (cap / 2 + 2) * 4));
    TRY(dev_reserve(c, &c->tmp, tb));
    TRY(dev_reserve(c, &c->cnt, 16));
    c->cap = cap;
    return 0;
}

/* After a sort: heads, ranks into isa, compaction of the groups of two or
 * more into Vn/Pn and seg; *a and *m get the new active count and groups. */
template <class K>
static int rank_groups(gmtf_gpu_bwt_ctx *c, const K *key, const uint32_t *V, const uint32_t *P,
                       uint32_t A, uint32_t *R, uint32_t *Vn, uint32_t *Pn, uint32_t *a,
                       uint32_t *m)
{
    uint8_t *F = (uint8_t *)c->flag.p;
    uint64_t *S = (uint64_t *)c->s64.p;
    uint32_t *isa = (uint32_t *)c->isa.p, *cnt = (uint32_t *)c->cnt.p;
    each(c, A, f_heads<K>{key, P, F, R});
    TRY(launched(c, "heads"));
    TRY(scan_max(c, R, A));
    each(c, A, f_update{V, R, F, A, isa, S});
    TRY(launched(c, "update"));
    TRY(scan_sum(c, S, A));
    each(c, A, f_compact{V, P, F, S, A, Vn, Pn, (uint32_t *)c->seg.p, cnt});
    TRY(launched(c, "compact"));
    TRY(copy_d2h(c, c->h_cnt, cnt, 8));
    TRY(dev_sync(c));
    *a = c->h_cnt[0];
    *m = c->h_cnt[1];
    if (*a > A || *m > *a / 2)
        return set_err(c, -EIO, "rank_groups", "inconsistent counts");
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

static int sort_piece(gmtf_gpu_bwt_ctx *c, const piece *pc)
{
    uint32_t np = pc->np, nb = (uint32_t)(pc->b1 - pc->b0);
    const uint8_t *text = (const uint8_t *)c->in.p + pc->t0;
    uint8_t *out = (uint8_t *)c->out.p + pc->t0;
    const uint32_t *bs = (const uint32_t *)c->meta.p + pc->m0;
    const uint32_t *so = bs + nb + 1, *step = so + nb + 1;
    uint32_t *isa = (uint32_t *)c->isa.p, *seg = (uint32_t *)c->seg.p;
    uint32_t *X[6];
    for (int i = 0; i < 6; i++)
        X[i] = (uint32_t *)c->pool.p + (size_t)i * c->cap;

    /* 1. initial keys and their sort: keys in X0X1 / X2X3, values X4 / X5 */
    uint64_t pk;
    int end_bit;
    unsigned k = initial_chars(nb, &pk, &end_bit);
    c->prof.init_chars = k;
    TRY(prof_begin(c));
    each(c, np, f_init_keys{text, bs, nb, k, pk, (uint64_t *)X[0], X[4]});
    TRY(launched(c, "init_keys"));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_KEYS));
    TRY(prof_begin(c));
    uint64_t *ks;
    uint32_t *vs;
    TRY(sort_initial(c, (uint64_t *)X[0], (uint64_t *)X[2], X[4], X[5], np, end_bit, &ks, &vs));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_SORT0));

    /* 2. first ranks; the active list goes to the free key pair */
    uint32_t *kfree = ks == (uint64_t *)X[0] ? X[2] : X[0];
    uint32_t *vfree = vs == X[4] ? X[5] : X[4];
    uint32_t *V = kfree, *P = kfree + c->cap;
    uint32_t A, M;
    TRY(prof_begin(c));
    TRY(rank_groups<uint64_t>(c, ks, vs, NULL, np, vfree, V, P, &A, &M));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_RANK0));
    /* free now: the sorted key pair and both value arrays */
    uint32_t *fr[4] = {(uint32_t *)ks, (uint32_t *)ks + c->cap, X[4], X[5]};

    /* 3. doubling */
    uint32_t h = k, rounds = 0;
    while (A > 0) {
        if (++rounds > MAX_ROUNDS || h > GMTF_GPU_BWT_MAX_BLOCK)
            return set_err(c, -EIO, "sort_piece", "doubling did not converge");
        c->prof.active += A;
        uint32_t *K = fr[0], *K2 = fr[1], *V2 = fr[2], *Pn = fr[3];
        TRY(prof_begin(c));
        each(c, A, f_gather{V, isa, h, np - 1, K});
        TRY(launched(c, "gather"));
        TRY(prof_end(c, GMTF_GPU_BWT_PH_GATHER));
        uint32_t *kc, *vc;
        TRY(prof_begin(c));
        TRY(sort_groups(c, K, K2, V, V2, A, M, seg, &kc, &vc));
        TRY(prof_end(c, GMTF_GPU_BWT_PH_SEGSORT));
        uint32_t *kalt = kc == K ? K2 : K, *valt = vc == V ? V2 : V;
        TRY(prof_begin(c));
        TRY(rank_groups<uint32_t>(c, kc, vc, P, A, kalt, valt, Pn, &A, &M));
        TRY(prof_end(c, GMTF_GPU_BWT_PH_RANK));
        uint32_t *oldP = P;
        V = valt;
        P = Pn;
        fr[0] = kc;
        fr[1] = kalt;
        fr[2] = vc;
        fr[3] = oldP;
        h *= 2;
    }
    if (rounds > c->prof.rounds)
        c->prof.rounds = rounds;

    /* 4. output */
    TRY(prof_begin(c));
    each(c, np, f_output{text, bs, isa, nb, out});
    TRY(launched(c, "output"));
    each(c, pc->ni, f_samples{bs, so, step, isa, nb, (uint32_t *)c->idx.p + pc->i0});
    TRY(launched(c, "samples"));
    TRY(prof_end(c, GMTF_GPU_BWT_PH_OUTPUT));
    c->prof.positions += np;
    c->prof.pieces++;
    return 0;
}

/* ---- API ------------------------------------------------------------------ */

extern "C" int gmtf_gpu_bwt_create(gmtf_gpu_bwt_ctx **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    gmtf_gpu_bwt_ctx *c = (gmtf_gpu_bwt_ctx *)calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    int rc = backend_open(c);
    if (rc == 0)
        rc = host_alloc((void **)&c->h_cnt, 16);
    if (rc) {
        gmtf_gpu_bwt_destroy(c);
        return rc;
    }
    c->ok = 1;
    c->piece_bound = PIECE_DEFAULT;
    *out = c;
    return 0;
}

extern "C" void gmtf_gpu_bwt_destroy(gmtf_gpu_bwt_ctx *c)
{
    if (!c)
        return;
    backend_close(c);
    dbuf *b[] = {&c->in,  &c->out,  &c->idx, &c->meta, &c->isa, &c->flag,
                 &c->s64, &c->pool, &c->seg, &c->tmp,  &c->cnt};
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
    return 0;
}

extern "C" const char *gmtf_gpu_bwt_phase_name(int phase)
{
    static const char *names[GMTF_GPU_BWT_PH_COUNT] = {"keys",    "sort0", "rank0", "gather",
                                                       "segsort", "rank",  "output"};
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
        size_t j = i;
        while (j < count && (j == i || np + (off[j + 1] - off[j]) + 1 <= c->piece_bound)) {
            np += off[j + 1] - off[j] + 1;
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

extern "C" int gmtf_gpu_bwt_stage_upload(gmtf_gpu_bwt_ctx *c, const uint8_t *src,
                                         const uint64_t *off, size_t count, const uint32_t *step)
{
    if (!c)
        return -ENODEV;
    if (!c->ok)
        return -EIO;
    c->staged = 0;
    if (!off || (count && !src))
        return -EINVAL;
    TRY(plan(c, off, count, step));
    if (count == 0) {
        c->staged = 1;
        return 0;
    }
    uint32_t maxnp = 0;
    for (size_t i = 0; i < c->npc; i++)
        maxnp = c->pc[i].np > maxnp ? c->pc[i].np : maxnp;
    TRY(dev_reserve(c, &c->in, c->nbytes + 16));
    TRY(dev_reserve(c, &c->out, c->nbytes + 16));
    TRY(dev_reserve(c, &c->idx, c->nidx * 4 + 16));
    TRY(dev_reserve(c, &c->meta, (3 * count + 2 * c->npc) * 4));
    TRY(reserve_work(c, maxnp));
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
    if (!c->ok)
        return -EIO;
    if (!c->staged)
        return -EINVAL;
    c->staged = 1;
    TRY(run_begin(c));
    for (size_t i = 0; i < c->npc && c->count; i++) {
        int rc = sort_piece(c, &c->pc[i]);
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

extern "C" int gmtf_gpu_bwt_batch(gmtf_gpu_bwt_ctx *c, const uint8_t *src, const uint64_t *off,
                                  size_t count, const uint32_t *step, uint8_t *dst, uint32_t *idx)
{
    if (!c)
        return -ENODEV;
    if (count && (!dst || !idx || !src || !off))
        return -EINVAL;
    TRY(gmtf_gpu_bwt_stage_upload(c, src, off, count, step));
    TRY(gmtf_gpu_bwt_stage_run(c, NULL));
    if (count == 0)
        return 0;
    return gmtf_gpu_bwt_stage_download(c, dst, idx);
}
