/* k-selection on the device, in the manner of GGKS randomized selection
 * (Monroe et al.; ../shared/seeds/ggks-randomized-select.txt): draw random
 * splitters from the candidates, sort them, choose the two around the
 * expected position of the k-th so that it lies between them with high
 * probability, then one pass counts the keys below and compacts the keys
 * between them. Repeat on the survivors; a small remainder is finished
 * by a radix sort on the device. Keys are first mapped to unsigned integers of the same order. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "gpu_bench.h"
#include "gpu_internal.cuh"

#define KS_SAMPLES 4096
/* survivors at most this many are radix-sorted on the device and picked */
#define KS_SORT_MAX (2u << 20)
#define KS_CTA 256

__host__ __device__ __forceinline__ uint64_t ks_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Order-preserving maps to unsigned keys (floats: IEEE totalOrder). */
template <typename U> __host__ __device__ __forceinline__ U ks_to_ordered(U x, int kind);
template <> __host__ __device__ __forceinline__ uint32_t ks_to_ordered(uint32_t x, int kind)
{
    if (kind == 1)
        return x ^ 0x80000000u;
    if (kind == 2)
        return (x & 0x80000000u) ? ~x : x | 0x80000000u;
    return x;
}
template <> __host__ __device__ __forceinline__ uint64_t ks_to_ordered(uint64_t x, int kind)
{
    const uint64_t sb = 1ull << 63;
    if (kind == 1)
        return x ^ sb;
    if (kind == 2)
        return (x & sb) ? ~x : x | sb;
    return x;
}
template <typename U> static U ks_from_ordered(U x, int kind)
{
    const U sb = (U)1 << (sizeof(U) * 8 - 1);
    if (kind == 1)
        return x ^ sb;
    if (kind == 2)
        return (x & sb) ? x ^ sb : ~x;
    return x;
}

template <typename U> __global__ void k_ks_map(U *k, size_t n, int kind)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        k[i] = ks_to_ordered<U>(k[i], kind);
}

/* One block of 1024 threads: KS_SAMPLES random keys, bitonic-sorted. */
template <typename U>
__global__ void __launch_bounds__(1024) k_ks_sample(const U *k, size_t n, uint64_t seed, U *spl)
{
    __shared__ U s[KS_SAMPLES];
    for (int i = threadIdx.x; i < KS_SAMPLES; i += 1024)
        s[i] = k[ks_mix(seed ^ (uint64_t)i * 0x9e3779b97f4a7c15ull) % n];
    __syncthreads();
    for (int len = 2; len <= KS_SAMPLES; len <<= 1) {
        for (int j = len >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < KS_SAMPLES; i += 1024) {
                int p = i ^ j;
                if (p > i) {
                    bool up = (i & len) == 0;
                    U a = s[i], b = s[p];
                    if ((a > b) == up) {
                        s[i] = b;
                        s[p] = a;
                    }
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < KS_SAMPLES; i += 1024)
        spl[i] = s[i];
}

/* Counts keys < lo and keys in [lo, hi]; copies the latter to mid (order
 * not kept: selection needs none). cnt[0] = below, cnt[1] = between. Each
 * CTA takes tiles of KS_CTA * KS_ITEMS keys; one atomic per tile reserves
 * the tile's output range (one per warp would serialize on the counter). */
#define KS_ITEMS 8
template <typename U>
__global__ void __launch_bounds__(KS_CTA)
    k_ks_split(const U *k, size_t n, U lo, U hi, U *mid, unsigned long long *cnt)
{
    __shared__ unsigned warp_cnt[KS_CTA / 32];
    __shared__ unsigned long long tile_base;
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned long long below = 0;
    const size_t tile = (size_t)KS_CTA * KS_ITEMS;
    for (size_t t0 = (size_t)blockIdx.x * tile; t0 < n; t0 += (size_t)gridDim.x * tile) {
        U x[KS_ITEMS];
        unsigned in = 0, cnt_in = 0;
#pragma unroll
        for (int j = 0; j < KS_ITEMS; j++) {
            size_t i = t0 + (size_t)j * KS_CTA + threadIdx.x;
            x[j] = i < n ? k[i] : (U)0;
            bool inr = i < n && x[j] >= lo && x[j] <= hi;
            below += i < n && x[j] < lo;
            in |= (unsigned)inr << j;
            cnt_in += inr;
        }
        /* exclusive scan of cnt_in over the CTA */
        unsigned incl = cnt_in;
        for (int o = 1; o < 32; o <<= 1) {
            unsigned v = __shfl_up_sync(GMTF_FULL, incl, o);
            if (lane >= (unsigned)o)
                incl += v;
        }
        if (lane == 31)
            warp_cnt[w] = incl;
        __syncthreads();
        unsigned before = 0, total = 0;
        for (int i = 0; i < KS_CTA / 32; i++) {
            before += i < (int)w ? warp_cnt[i] : 0;
            total += warp_cnt[i];
        }
        if (threadIdx.x == 0)
            tile_base = total ? atomicAdd(&cnt[1], (unsigned long long)total) : 0;
        __syncthreads();
        unsigned long long pos = tile_base + before + incl - cnt_in;
#pragma unroll
        for (int j = 0; j < KS_ITEMS; j++)
            if (in >> j & 1)
                mid[pos++] = x[j];
        __syncthreads(); /* warp_cnt and tile_base are reused */
    }
    for (int o = 16; o; o >>= 1)
        below += __shfl_xor_sync(GMTF_FULL, below, o);
    if (lane == 0 && below)
        atomicAdd(&cnt[0], below);
}

template <typename U> struct ks_state {
    gmtf_gpu_ctx *ctx;
    int grid;
    U *spl;
    unsigned long long *cnt;
};

#define KCK(ctx, call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return gmtf_gpu_fail((ctx), e_, #call);                                                \
    } while (0)

/* One split of cur[0..n) by [lo, hi] into nxt; *below and *mid counts. */
template <typename U>
static int ks_split(ks_state<U> *st, const U *cur, size_t n, U lo, U hi, U *nxt, uint64_t *below,
                    uint64_t *mid)
{
    cudaStream_t s = st->ctx->st[0];
    unsigned long long h[2];
    KCK(st->ctx, cudaMemsetAsync(st->cnt, 0, 2 * sizeof h[0], s));
    k_ks_split<U><<<st->grid, KS_CTA, 0, s>>>(cur, n, lo, hi, nxt, st->cnt);
    KCK(st->ctx, cudaGetLastError());
    KCK(st->ctx, cudaMemcpyAsync(h, st->cnt, sizeof h, cudaMemcpyDeviceToHost, s));
    KCK(st->ctx, cudaStreamSynchronize(s));
    *below = h[0];
    *mid = h[1];
    return 0;
}

/* Selects the k-th smallest of the ordered keys a[0..n) (a and b are
 * scratch of n keys each; a is overwritten). */
template <typename U>
static int ks_select(gmtf_gpu_ctx *ctx, U *a, U *b, size_t n, size_t k, uint64_t seed, U *out)
{
    size_t sort_bytes = 0;
    cub::DeviceRadixSort::SortKeys(NULL, sort_bytes, (const U *)NULL, (U *)NULL, (int)KS_SORT_MAX);
    size_t spl_at = 256, tmp_at = spl_at + ((KS_SAMPLES * sizeof(U) + 255) & ~(size_t)255);
    int rc = gmtf_dbuf_reserve(ctx, &ctx->ks_misc, tmp_at + sort_bytes);
    if (rc)
        return rc;
    ks_state<U> st;
    st.ctx = ctx;
    int sms = 132;
    gmtf_gpu_device_info(NULL, 0, &sms);
    st.grid = sms * 4;
    st.cnt = (unsigned long long *)ctx->ks_misc.p;
    st.spl = (U *)((char *)ctx->ks_misc.p + spl_at);
    void *sort_tmp = (char *)ctx->ks_misc.p + tmp_at;
    U spl[KS_SAMPLES]; /* host copy of the sorted samples */
    U *cur = a, *nxt = b;
    const U umax = (U) ~(U)0;
    for (int round = 0; n > KS_SORT_MAX; round++) {
        k_ks_sample<U><<<1, 1024, 0, ctx->st[0]>>>(cur, n, ks_mix(seed + round), st.spl);
        KCK(ctx, cudaGetLastError());
        KCK(ctx, cudaMemcpyAsync(spl, st.spl, sizeof spl, cudaMemcpyDeviceToHost, ctx->st[0]));
        KCK(ctx, cudaStreamSynchronize(ctx->st[0]));
        /* the k-th sits near sample k * S / n; keep a margin of about
         * four standard deviations of that position on each side */
        double p = (double)k / (double)n;
        double e = p * KS_SAMPLES, m = 4.0 * sqrt(KS_SAMPLES * p * (1 - p)) + 4;
        long li = (long)floor(e - m), hi_i = (long)ceil(e + m);
        U lo = li <= 0 ? (U)0 : spl[li];
        U hi = hi_i >= KS_SAMPLES - 1 ? umax : spl[hi_i];
        uint64_t below, mid;
        if ((rc = ks_split<U>(&st, cur, n, lo, hi, nxt, &below, &mid)))
            return rc;
        if (k < below) { /* missed low: everything up to lo */
            hi = lo;
            lo = 0;
            if ((rc = ks_split<U>(&st, cur, n, lo, hi, nxt, &below, &mid)))
                return rc;
        } else if (k >= below + mid) { /* missed high */
            lo = hi;
            hi = umax;
            if ((rc = ks_split<U>(&st, cur, n, lo, hi, nxt, &below, &mid)))
                return rc;
        }
        if (lo == hi) { /* every survivor equals lo */
            *out = lo;
            return 0;
        }
        if (mid == n) {
            /* no progress (many equal keys): split at one sampled key */
            U piv = spl[KS_SAMPLES / 2];
            if ((rc = ks_split<U>(&st, cur, n, piv, piv, nxt, &below, &mid)))
                return rc;
            if (k >= below && k < below + mid) {
                *out = piv;
                return 0;
            }
            if (k < below) {
                if (piv == 0)
                    return -EIO;
                rc = ks_split<U>(&st, cur, n, 0, piv - 1, nxt, &below, &mid);
            } else {
                uint64_t b2 = below + mid;
                rc = ks_split<U>(&st, cur, n, piv + 1, umax, nxt, &below, &mid);
                below = b2;
            }
            if (rc)
                return rc;
        }
        k -= below;
        n = mid;
        U *t = cur;
        cur = nxt;
        nxt = t;
    }
    /* the survivors: radix sort on the device, then pick */
    KCK(ctx, cub::DeviceRadixSort::SortKeys(sort_tmp, sort_bytes, (const U *)cur, nxt, (int)n, 0,
                                            (int)(sizeof(U) * 8), ctx->st[0]));
    KCK(ctx, cudaMemcpyAsync(out, nxt + k, sizeof(U), cudaMemcpyDeviceToHost, ctx->st[0]));
    KCK(ctx, cudaStreamSynchronize(ctx->st[0]));
    return 0;
}

static int key_kind(gmtf_gpu_key t)
{
    return (t == GMTF_GPU_KEY_I32 || t == GMTF_GPU_KEY_I64)   ? 1
           : (t == GMTF_GPU_KEY_F32 || t == GMTF_GPU_KEY_F64) ? 2
                                                              : 0;
}

static int key_wide(gmtf_gpu_key t)
{
    return t == GMTF_GPU_KEY_U64 || t == GMTF_GPU_KEY_I64 || t == GMTF_GPU_KEY_F64;
}

template <typename U>
static int ks_host(gmtf_gpu_ctx *ctx, int kind, const void *keys, size_t n, size_t k, void *out)
{
    int rc;
    if ((rc = gmtf_dbuf_reserve(ctx, &ctx->ks_a, n * sizeof(U))) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->ks_b, n * sizeof(U))))
        return rc;
    U *a = (U *)ctx->ks_a.p, *b = (U *)ctx->ks_b.p;
    /* same stream as the kernels: a plain cudaMemcpy from pageable memory
     * may return before its DMA lands, and our streams do not wait for the
     * legacy default stream */
    KCK(ctx, cudaMemcpyAsync(a, keys, n * sizeof(U), cudaMemcpyHostToDevice, ctx->st[0]));
    k_ks_map<U><<<1024, 256, 0, ctx->st[0]>>>(a, n, kind);
    KCK(ctx, cudaGetLastError());
    U r;
    if ((rc = ks_select<U>(ctx, a, b, n, k, 0x5eed ^ n ^ k, &r)))
        return rc;
    r = ks_from_ordered<U>(r, kind);
    memcpy(out, &r, sizeof r);
    return 0;
}

extern "C" int gmtf_gpu_kselect(gmtf_gpu_ctx *ctx, gmtf_gpu_key type, const void *keys, size_t n,
                                size_t k, void *out)
{
    if (!ctx || !ctx->ok)
        return -ENODEV;
    if (gmtf_gpu_use(ctx))
        return -EIO;
    if (!keys || !out || k >= n || (int)type < 0 || type > GMTF_GPU_KEY_F64)
        return -EINVAL;
    if (key_wide(type))
        return ks_host<uint64_t>(ctx, key_kind(type), keys, n, k, out);
    return ks_host<uint32_t>(ctx, key_kind(type), keys, n, k, out);
}

/* ---- benchmark ---------------------------------------------------------- */

template <typename U> __global__ void k_ks_random(U *k, size_t n, uint64_t seed)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        k[i] = (U)ks_mix(seed + i);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

template <typename U>
static int ks_bench(gmtf_gpu_ctx *ctx, int kind, size_t n, int reps, double *sel_ms,
                    double *sort_ms, int *agree)
{
    int rc;
    size_t tmp_bytes = 0;
    cub::DeviceRadixSort::SortKeys(NULL, tmp_bytes, (const U *)NULL, (U *)NULL, (int)n);
    if ((rc = gmtf_dbuf_reserve(ctx, &ctx->ks_a, n * sizeof(U))) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->ks_b, n * sizeof(U))) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->in, n * sizeof(U) + tmp_bytes + 256)))
        return rc;
    ctx->staged = 0; /* ctx->in is reused as scratch */
    U *orig = (U *)ctx->in.p;
    void *tmp = (char *)ctx->in.p + ((n * sizeof(U) + 255) & ~(size_t)255);
    U *a = (U *)ctx->ks_a.p, *b = (U *)ctx->ks_b.p;
    cudaStream_t s = ctx->st[0];
    k_ks_random<U><<<1024, 256, 0, s>>>(orig, n, 12345);
    k_ks_map<U><<<1024, 256, 0, s>>>(orig, n, kind);
    KCK(ctx, cudaGetLastError());
    KCK(ctx, cudaStreamSynchronize(s));
    if (reps < 1)
        reps = 1;
    double *ts = (double *)calloc((size_t)reps, sizeof(double)),
           *tr = (double *)calloc((size_t)reps, sizeof(double));
    if (!ts || !tr) {
        free(ts);
        free(tr);
        return -ENOMEM;
    }
    *agree = 1;
    for (int r = 0; r < reps && !rc; r++) {
        size_t k = r == 0 ? n / 2 : (size_t)(ks_mix(r) % n);
        U got = 0, want = 0;
        /* selection: the copy of the keys it overwrites is not timed */
        cudaMemcpyAsync(a, orig, n * sizeof(U), cudaMemcpyDeviceToDevice, s);
        cudaEventRecord(ctx->ev0, s);
        rc = ks_select<U>(ctx, a, b, n, k, 777 + r, &got);
        cudaEventRecord(ctx->ev1, s);
        cudaEventSynchronize(ctx->ev1);
        float ms = 0;
        cudaEventElapsedTime(&ms, ctx->ev0, ctx->ev1);
        ts[r] = ms;
        if (rc)
            break;
        /* radix sort of all keys, then pick */
        cudaEventRecord(ctx->ev0, s);
        size_t tb = tmp_bytes;
        cub::DeviceRadixSort::SortKeys(tmp, tb, (const U *)orig, b, (int)n, 0, (int)(sizeof(U) * 8),
                                       s);
        cudaMemcpyAsync(&want, b + k, sizeof(U), cudaMemcpyDeviceToHost, s);
        cudaEventRecord(ctx->ev1, s);
        cudaEventSynchronize(ctx->ev1);
        cudaEventElapsedTime(&ms, ctx->ev0, ctx->ev1);
        tr[r] = ms;
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            rc = gmtf_gpu_fail(ctx, e, "radix sort");
        if (got != want)
            *agree = 0;
    }
    qsort(ts, (size_t)reps, sizeof(double), cmp_double);
    qsort(tr, (size_t)reps, sizeof(double), cmp_double);
    *sel_ms = ts[reps / 2];
    *sort_ms = tr[reps / 2];
    free(ts);
    free(tr);
    return rc;
}

extern "C" int gmtf_gpu_kselect_bench(gmtf_gpu_ctx *ctx, gmtf_gpu_key type, size_t n, int reps,
                                      double *select_ms, double *sort_ms, int *agree)
{
    if (!ctx || !ctx->ok)
        return -ENODEV;
    if (gmtf_gpu_use(ctx))
        return -EIO;
    if (n < 1 || n > 0x7fffffff || (int)type < 0 || type > GMTF_GPU_KEY_F64)
        return -EINVAL;
    if (key_wide(type))
        return ks_bench<uint64_t>(ctx, key_kind(type), n, reps, select_ms, sort_ms, agree);
    return ks_bench<uint32_t>(ctx, key_kind(type), n, reps, select_ms, sort_ms, agree);
}
