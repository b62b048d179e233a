/* The MTF encoder kernel family (docs/gpu.md). Every kernel starts each
 * chunk from its exact inbound queue (qin, built by mtf_chunks.cu), so
 * complete variants match the scalar reference over whole blocks.
 *
 * Shapes:
 *  - warp per chunk, queue in registers (8 positions per lane):
 *    scalar, 2symbols (two symbols per step), 2buffers (two chunks);
 *  - G lanes per chunk, queue in shared memory, G words per step:
 *    4by8 (G = 4), 8by4 (G = 8), thread / thread_by4 / thread_by8 (G = 1
 *    with 1-, 4- and 8-byte words);
 *  - depth-limited thread per chunk, queue of N = 8 or 32 in registers:
 *    ranks < N exact, the rest escape; with records of the escapes the
 *    multi-pass combinations finish them: 8+full, 32+full, 8+32+full. */
#include "gpu_internal.cuh"

#define CTA 128
#define WARPS_PER_CTA (CTA / 32)

static unsigned grid_for(size_t threads, unsigned cta)
{
    return (unsigned)((threads + cta - 1) / cta);
}

/* ---- warp per chunk, register queue ------------------------------------ */

/* One MTF step on the warp's queue (lane l holds positions 8l..8l+7):
 * finds s at positions >= 8 * LO_LANE, removes it, shifts the positions
 * before it back and puts ins at position 8 * LO_LANE. Returns the lane
 * holding s; *rank gets its position on that lane only. */
template <unsigned LO_LANE>
__device__ __forceinline__ unsigned warp_mtf_step(uint64_t &q, unsigned lane, uint32_t s,
                                                  uint32_t ins, unsigned *rank)
{
    uint64_t m = gmtf_zero_bytes64(q ^ (GMTF_ONES64 * s));
    if (LO_LANE && lane < LO_LANE)
        m = 0;
    unsigned L = __ffs(__ballot_sync(GMTF_FULL, m != 0)) - 1;
    uint64_t top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
    if (lane == LO_LANE)
        top = ins;
    unsigned b = lane < L ? 7 : gmtf_first_byte64(m);
    if (lane <= L && (LO_LANE == 0 || lane >= LO_LANE))
        q = gmtf_shift_in64(q, b, top);
    *rank = lane * 8 + b;
    return L;
}

/* Loads 4 bytes of a chunk for lane-wise staging (bytes past len read 0). */
__device__ __forceinline__ uint32_t load_word(const uint8_t *p, uint32_t i, uint32_t len,
                                              bool aligned)
{
    if (aligned && i + 4 <= len)
        return *(const uint32_t *)(p + i);
    uint32_t w = 0;
    for (uint32_t k = 0; k < 4 && i + k < len; k++)
        w |= (uint32_t)p[i + k] << (8 * k);
    return w;
}

__device__ __forceinline__ void store_word(uint8_t *p, uint32_t i, uint32_t len, bool aligned,
                                           uint32_t w)
{
    if (aligned && i + 4 <= len) {
        *(uint32_t *)(p + i) = w;
        return;
    }
    for (uint32_t k = 0; k < 4 && i + k < len; k++)
        p[i + k] = (uint8_t)(w >> (8 * k));
}

/* scalar (SYM = 1) and 2symbols (SYM = 2): one chunk per warp, 128
 * symbols per round staged in registers, ranks staged in shared memory. */
template <int SYM>
__global__ void __launch_bounds__(CTA) k_warp_encode(gmtf_batch_dev d, size_t c0, size_t c1)
{
    __shared__ __align__(16) uint8_t ranks_s[WARPS_PER_CTA][128];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t c = c0 + (size_t)blockIdx.x * WARPS_PER_CTA + w;
    if (c >= c1)
        return;
    uint8_t *rk = ranks_s[w];
    uint64_t q = *(const uint64_t *)(d.qin + c * 256 + lane * 8);
    const uint8_t *src = d.in + d.ck_start[c];
    uint8_t *dst = d.out + d.ck_start[c];
    uint32_t len = d.ck_len[c];
    bool aligned = ((uintptr_t)src & 3) == 0;
    for (uint32_t base = 0; base < len; base += 128) {
        uint32_t word = load_word(src, base + lane * 4, len, aligned);
        uint32_t n = min(128u, len - base);
        if (SYM == 1) {
            for (uint32_t j = 0; j < n; j++) {
                uint32_t s = (__shfl_sync(GMTF_FULL, word, j >> 2) >> (8 * (j & 3))) & 0xff;
                unsigned r;
                unsigned L = warp_mtf_step<0>(q, lane, s, s, &r);
                if (lane == L)
                    rk[j] = (uint8_t)r;
            }
        } else {
            uint32_t j = 0;
            for (; j + 1 < n; j += 2) {
                uint32_t s1 = (__shfl_sync(GMTF_FULL, word, j >> 2) >> (8 * (j & 3))) & 0xff;
                uint32_t s2 =
                    (__shfl_sync(GMTF_FULL, word, (j + 1) >> 2) >> (8 * ((j + 1) & 3))) & 0xff;
                /* search both in the same queue, then correct the second */
                uint64_t m1 = gmtf_zero_bytes64(q ^ (GMTF_ONES64 * s1));
                uint64_t m2 = gmtf_zero_bytes64(q ^ (GMTF_ONES64 * s2));
                unsigned L1 = __ffs(__ballot_sync(GMTF_FULL, m1 != 0)) - 1;
                unsigned L2 = __ffs(__ballot_sync(GMTF_FULL, m2 != 0)) - 1;
                unsigned r1 = __shfl_sync(GMTF_FULL, lane * 8 + gmtf_first_byte64(m1), L1);
                unsigned r2 = __shfl_sync(GMTF_FULL, lane * 8 + gmtf_first_byte64(m2), L2);
                r2 = s1 == s2 ? 0 : r2 + (r2 < r1);
                uint64_t top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
                if (lane == 0)
                    top = s1;
                if (lane <= L1)
                    q = gmtf_shift_in64(q, lane < L1 ? 7 : (r1 & 7), top);
                unsigned L2n = r2 >> 3;
                top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
                if (lane == 0)
                    top = s2;
                if (lane <= L2n)
                    q = gmtf_shift_in64(q, lane < L2n ? 7 : (r2 & 7), top);
                if (lane == 0) {
                    rk[j] = (uint8_t)r1;
                    rk[j + 1] = (uint8_t)r2;
                }
            }
            if (j < n) {
                uint32_t s = (__shfl_sync(GMTF_FULL, word, j >> 2) >> (8 * (j & 3))) & 0xff;
                unsigned r;
                unsigned L = warp_mtf_step<0>(q, lane, s, s, &r);
                if (lane == L)
                    rk[j] = (uint8_t)r;
            }
        }
        __syncwarp();
        store_word(dst, base + lane * 4, len, aligned, *(const uint32_t *)(rk + lane * 4));
        __syncwarp();
    }
}

/* 2buffers: two chunks per warp, their steps interleaved for ILP. */
__global__ void __launch_bounds__(CTA) k_warp_encode_2buf(gmtf_batch_dev d, size_t c0, size_t c1)
{
    __shared__ __align__(16) uint8_t ranks_s[WARPS_PER_CTA][2][128];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t ca = c0 + ((size_t)blockIdx.x * WARPS_PER_CTA + w) * 2;
    if (ca >= c1)
        return;
    size_t cb = ca + 1 < c1 ? ca + 1 : ca;
    uint32_t la = d.ck_len[ca], lb = ca + 1 < c1 ? d.ck_len[cb] : 0;
    uint64_t qa = *(const uint64_t *)(d.qin + ca * 256 + lane * 8);
    uint64_t qb = *(const uint64_t *)(d.qin + cb * 256 + lane * 8);
    const uint8_t *sa = d.in + d.ck_start[ca], *sb = d.in + d.ck_start[cb];
    uint8_t *da = d.out + d.ck_start[ca], *db = d.out + d.ck_start[cb];
    bool ala = ((uintptr_t)sa & 3) == 0, alb = ((uintptr_t)sb & 3) == 0;
    uint8_t *rka = ranks_s[w][0], *rkb = ranks_s[w][1];
    uint32_t lmax = max(la, lb);
    for (uint32_t base = 0; base < lmax; base += 128) {
        uint32_t wa = base < la ? load_word(sa, base + lane * 4, la, ala) : 0;
        uint32_t wb = base < lb ? load_word(sb, base + lane * 4, lb, alb) : 0;
        uint32_t na = base < la ? min(128u, la - base) : 0;
        uint32_t nb = base < lb ? min(128u, lb - base) : 0;
        uint32_t nmin = min(na, nb), j = 0;
        for (; j < nmin; j++) {
            uint32_t s1 = (__shfl_sync(GMTF_FULL, wa, j >> 2) >> (8 * (j & 3))) & 0xff;
            uint32_t s2 = (__shfl_sync(GMTF_FULL, wb, j >> 2) >> (8 * (j & 3))) & 0xff;
            unsigned r1, r2;
            unsigned L1 = warp_mtf_step<0>(qa, lane, s1, s1, &r1);
            unsigned L2 = warp_mtf_step<0>(qb, lane, s2, s2, &r2);
            if (lane == L1)
                rka[j] = (uint8_t)r1;
            if (lane == L2)
                rkb[j] = (uint8_t)r2;
        }
        for (uint32_t k = j; k < na; k++) {
            uint32_t s = (__shfl_sync(GMTF_FULL, wa, k >> 2) >> (8 * (k & 3))) & 0xff;
            unsigned r;
            unsigned L = warp_mtf_step<0>(qa, lane, s, s, &r);
            if (lane == L)
                rka[k] = (uint8_t)r;
        }
        for (uint32_t k = j; k < nb; k++) {
            uint32_t s = (__shfl_sync(GMTF_FULL, wb, k >> 2) >> (8 * (k & 3))) & 0xff;
            unsigned r;
            unsigned L = warp_mtf_step<0>(qb, lane, s, s, &r);
            if (lane == L)
                rkb[k] = (uint8_t)r;
        }
        __syncwarp();
        if (base < la)
            store_word(da, base + lane * 4, la, ala, *(const uint32_t *)(rka + lane * 4));
        if (base < lb)
            store_word(db, base + lane * 4, lb, alb, *(const uint32_t *)(rkb + lane * 4));
        __syncwarp();
    }
}

/* Last pass of the multi-pass scheme: one warp per chunk over its escape
 * records (position << 16 | symbol << 8 | symbol entering position LO),
 * queue positions LO..255 in registers. */
template <unsigned LO>
__global__ void __launch_bounds__(CTA) k_warp_records(gmtf_batch_dev d, size_t c0, size_t c1)
{
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t c = c0 + (size_t)blockIdx.x * WARPS_PER_CTA + w;
    if (c >= c1)
        return;
    uint32_t n = d.esc_cnt[c];
    if (!n)
        return;
    uint64_t q = *(const uint64_t *)(d.qin + c * 256 + lane * 8);
    const uint32_t *rec = d.esc + c * d.chunk;
    uint8_t *dst = d.out + d.ck_start[c];
    for (uint32_t base = 0; base < n; base += 32) {
        uint32_t mine = base + lane < n ? rec[base + lane] : 0;
        uint32_t m = min(32u, n - base);
        for (uint32_t j = 0; j < m; j++) {
            uint32_t r = __shfl_sync(GMTF_FULL, mine, j);
            unsigned rank;
            unsigned L = warp_mtf_step<LO / 8>(q, lane, (r >> 8) & 0xff, r & 0xff, &rank);
            if (lane == L)
                dst[r >> 16] = (uint8_t)rank;
        }
    }
}

/* ---- G lanes per chunk, queue in shared memory ------------------------- */

template <typename WT> struct word_ops;
template <> struct word_ops<uint8_t> {
    static __device__ __forceinline__ uint8_t none()
    {
        return 0;
    }
    static __device__ __forceinline__ uint8_t eor(uint8_t a, uint8_t b)
    {
        return (uint8_t)(a ^ b);
    }
    static __device__ __forceinline__ bool any(uint64_t m)
    {
        return m != 0;
    }
    static __device__ __forceinline__ uint32_t splat(uint32_t s)
    {
        return s;
    }
    static __device__ __forceinline__ uint32_t zero(uint8_t x)
    {
        return x == 0;
    }
    static __device__ __forceinline__ unsigned first(uint32_t)
    {
        return 0;
    }
    static __device__ __forceinline__ uint8_t shift_in(uint8_t, unsigned, uint32_t c)
    {
        return (uint8_t)c;
    }
    static __device__ __forceinline__ uint32_t top(uint8_t w)
    {
        return w;
    }
};
template <> struct word_ops<uint32_t> {
    static __device__ __forceinline__ uint32_t none()
    {
        return 0;
    }
    static __device__ __forceinline__ uint32_t eor(uint32_t a, uint32_t b)
    {
        return (uint32_t)(a ^ b);
    }
    static __device__ __forceinline__ bool any(uint64_t m)
    {
        return m != 0;
    }
    static __device__ __forceinline__ uint32_t splat(uint32_t s)
    {
        return s * 0x01010101u;
    }
    static __device__ __forceinline__ uint32_t zero(uint32_t x)
    {
        return gmtf_zero_bytes32(x);
    }
    static __device__ __forceinline__ unsigned first(uint32_t m)
    {
        return gmtf_first_byte32(m);
    }
    static __device__ __forceinline__ uint32_t shift_in(uint32_t q, unsigned b, uint32_t c)
    {
        return gmtf_shift_in32(q, b, c);
    }
    static __device__ __forceinline__ uint32_t top(uint32_t w)
    {
        return w >> 24;
    }
};
template <> struct word_ops<uint64_t> {
    static __device__ __forceinline__ uint64_t none()
    {
        return 0;
    }
    static __device__ __forceinline__ uint64_t eor(uint64_t a, uint64_t b)
    {
        return (uint64_t)(a ^ b);
    }
    static __device__ __forceinline__ bool any(uint64_t m)
    {
        return m != 0;
    }
    static __device__ __forceinline__ uint64_t splat(uint32_t s)
    {
        return GMTF_ONES64 * s;
    }
    static __device__ __forceinline__ uint64_t zero(uint64_t x)
    {
        return gmtf_zero_bytes64(x);
    }
    static __device__ __forceinline__ unsigned first(uint64_t m)
    {
        return gmtf_first_byte64(m);
    }
    static __device__ __forceinline__ uint64_t shift_in(uint64_t q, unsigned b, uint64_t c)
    {
        return gmtf_shift_in64(q, b, c);
    }
    static __device__ __forceinline__ uint32_t top(uint64_t w)
    {
        return (uint32_t)(w >> 56);
    }
};

/* 16 queue positions as one word (thread_by16). Only the lowest flagged
 * byte of a zero_bytes result is exact, so the high half counts only when
 * the low half has no flag. */
struct q128 {
    uint64_t lo, hi; /* trivial: it lives in __shared__ arrays */
};
__device__ __forceinline__ q128 mk128(uint64_t l, uint64_t h)
{
    q128 r;
    r.lo = l;
    r.hi = h;
    return r;
}
template <> struct word_ops<q128> {
    static __device__ __forceinline__ q128 none()
    {
        return mk128(0, 0);
    }
    static __device__ __forceinline__ q128 eor(q128 a, q128 b)
    {
        return mk128(a.lo ^ b.lo, a.hi ^ b.hi);
    }
    static __device__ __forceinline__ bool any(q128 m)
    {
        return (m.lo | m.hi) != 0;
    }
    static __device__ __forceinline__ q128 splat(uint32_t s)
    {
        return mk128(GMTF_ONES64 * s, GMTF_ONES64 * s);
    }
    static __device__ __forceinline__ q128 zero(q128 x)
    {
        return mk128(gmtf_zero_bytes64(x.lo), gmtf_zero_bytes64(x.hi));
    }
    static __device__ __forceinline__ unsigned first(q128 m)
    {
        return m.lo ? gmtf_first_byte64(m.lo) : 8 + gmtf_first_byte64(m.hi);
    }
    static __device__ __forceinline__ q128 shift_in(q128 q, unsigned b, uint32_t c)
    {
        if (b < 8)
            return mk128(gmtf_shift_in64(q.lo, b, c), q.hi);
        return mk128((q.lo << 8) | c, gmtf_shift_in64(q.hi, b - 8, q.lo >> 56));
    }
    static __device__ __forceinline__ uint32_t top(q128 w)
    {
        return (uint32_t)(w.hi >> 56);
    }
};

/* G lanes share one chunk; each step the group compares G words of WT
 * bytes (G * sizeof(WT) positions) and shifts them in the same pass.
 * Word i of the group's queue lives at qs[i * NB + g]: conflict-free. */
template <int G, typename WT>
__global__ void __launch_bounds__(CTA) k_group_encode(gmtf_batch_dev d, size_t c0, size_t c1)
{
    typedef word_ops<WT> ops;
    constexpr int NB = 32 / G, WB = sizeof(WT), NW = 256 / WB;
    __shared__ WT qs_all[WARPS_PER_CTA][NW * NB];
    __shared__ __align__(16) uint8_t out_all[WARPS_PER_CTA][NB][16];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned g = lane / G, k = lane % G;
    WT *qs = qs_all[w];
    uint8_t *os = out_all[w][g];
    size_t c = c0 + ((size_t)blockIdx.x * WARPS_PER_CTA + w) * NB + g;
    bool valid = c < c1;
    if (__all_sync(GMTF_FULL, !valid))
        return;
    const WT *qin = (const WT *)(d.qin + (valid ? c : c0) * 256);
    for (int i = k; i < NW; i += G)
        qs[i * NB + g] = qin[i];
    uint32_t len = valid ? d.ck_len[c] : 0;
    const uint8_t *src = d.in + (valid ? d.ck_start[c] : 0);
    uint8_t *dst = d.out + (valid ? d.ck_start[c] : 0);
    uint32_t maxlen = __reduce_max_sync(GMTF_FULL, len);
    unsigned gshift = g * G;
    uint32_t gmask = G == 32 ? GMTF_FULL : ((1u << G) - 1);
    uint32_t flushed = 0;
    __syncwarp();
    for (uint32_t pos = 0; pos < maxlen; pos++) {
        bool done = pos >= len;
        uint32_t s = done ? 0 : src[pos];
        WT splat = ops::splat(s);
        uint32_t carry = s;
        for (int step = 0; __any_sync(GMTF_FULL, !done); step++) {
            int i = step * G + k;
            WT wv = done ? ops::none() : qs[i * NB + g];
            WT m = done ? ops::none() : ops::zero(ops::eor(wv, splat));
            uint32_t gb = (__ballot_sync(GMTF_FULL, ops::any(m)) >> gshift) & gmask;
            uint32_t tp = ops::top(wv);
            uint32_t t = G > 1 ? __shfl_up_sync(GMTF_FULL, tp, 1, G) : tp;
            uint32_t last = G > 1 ? __shfl_sync(GMTF_FULL, tp, G - 1, G) : tp;
            if (k == 0)
                t = carry;
            unsigned fk = gb ? __ffs(gb) - 1 : G;
            if (!done) {
                if (k < fk) {
                    qs[i * NB + g] = ops::shift_in(wv, WB - 1, t);
                } else if (k == fk) {
                    unsigned b = ops::first(m);
                    qs[i * NB + g] = ops::shift_in(wv, b, t);
                    os[(pos + (uint32_t)(uintptr_t)src) & 15] = (uint8_t)(i * WB + b);
                }
            }
            carry = last;
            if (fk < G)
                done = true;
        }
        __syncwarp();
        /* flush staged ranks at 16-byte boundaries of the output */
        if (k == 0 && pos < len && (((uintptr_t)(dst + pos + 1) & 15) == 0 || pos + 1 == len)) {
            uint32_t from = flushed, to = pos + 1;
            if (to - from == 16 && ((uintptr_t)(dst + from) & 15) == 0) {
                *(uint4 *)(dst + from) = *(const uint4 *)os;
            } else {
                for (uint32_t x = from; x < to; x++)
                    dst[x] = os[(x + (uint32_t)(uintptr_t)src) & 15];
            }
            flushed = to;
        }
        __syncwarp();
    }
}

/* Last pass of the multi-pass scheme with G lanes per chunk: queue
 * positions LO..255 in shared memory, 4 bytes a lane a step, so a record
 * of rank < LO + 4G costs one step and 32 / G chunks share a warp. The
 * ranks left to the last pass sit mostly just past LO, where a warp per
 * chunk (k_warp_records) wastes most of its lanes. */
template <int G, int LO>
__global__ void __launch_bounds__(CTA) k_group_records(gmtf_batch_dev d, size_t c0, size_t c1)
{
    constexpr int NB = 32 / G, NW = 64;
    __shared__ uint32_t qs_all[WARPS_PER_CTA][NW * NB];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    unsigned g = lane / G, k = lane % G;
    uint32_t *qs = qs_all[w];
    size_t c = c0 + ((size_t)blockIdx.x * WARPS_PER_CTA + w) * NB + g;
    bool valid = c < c1;
    if (__all_sync(GMTF_FULL, !valid))
        return;
    const uint32_t *qin = (const uint32_t *)(d.qin + (valid ? c : c0) * 256);
    for (int i = LO / 4 + k; i < NW; i += G)
        qs[i * NB + g] = qin[i];
    uint32_t n = valid ? d.esc_cnt[c] : 0;
    const uint32_t *rec = d.esc + (valid ? c : c0) * d.chunk;
    uint8_t *dst = d.out + (valid ? d.ck_start[c] : 0);
    uint32_t nmax = __reduce_max_sync(GMTF_FULL, n);
    unsigned gshift = g * G;
    uint32_t gmask = G == 32 ? GMTF_FULL : ((1u << G) - 1);
    __syncwarp();
    for (uint32_t e = 0; e < nmax; e++) {
        bool done = e >= n;
        uint32_t r = done ? 0 : rec[e];
        uint32_t splat = ((r >> 8) & 0xff) * 0x01010101u;
        uint32_t carry = r & 0xff;
        for (int step = 0; __any_sync(GMTF_FULL, !done); step++) {
            int i = LO / 4 + step * G + k;
            /* with LO > 0 the last step reaches past word 63 */
            bool live = !done && i < NW;
            uint32_t wv = live ? qs[i * NB + g] : 0;
            uint32_t m = live ? gmtf_zero_bytes32(wv ^ splat) : 0;
            uint32_t gb = (__ballot_sync(GMTF_FULL, m != 0) >> gshift) & gmask;
            uint32_t tp = wv >> 24;
            uint32_t t = __shfl_up_sync(GMTF_FULL, tp, 1, G);
            uint32_t last = __shfl_sync(GMTF_FULL, tp, G - 1, G);
            if (k == 0)
                t = carry;
            unsigned fk = gb ? __ffs(gb) - 1 : G;
            if (live) {
                if (k < fk) {
                    qs[i * NB + g] = gmtf_shift_in32(wv, 3, t);
                } else if (k == fk) {
                    unsigned b = gmtf_first_byte32(m);
                    qs[i * NB + g] = gmtf_shift_in32(wv, b, t);
                    dst[r >> 16] = (uint8_t)(i * 4 + b);
                }
            }
            carry = last;
            if (fk < G)
                done = true;
        }
    }
}

/* ---- thread per chunk, depth-limited register queue -------------------- */

/* One step on a queue of K * 8 positions in registers: finds s, removes it
 * (or the last entry when absent), inserts c in front. Returns the rank or
 * K * 8 when absent; *out gets the entry pushed out then. */
template <int K>
__device__ __forceinline__ unsigned reg_mtf_step(uint64_t (&q)[K], uint32_t s, uint32_t c,
                                                 uint32_t *out)
{
    uint64_t splat = GMTF_ONES64 * s;
    unsigned r = K * 8;
#pragma unroll
    for (int i = K - 1; i >= 0; i--) {
        uint64_t m = gmtf_zero_bytes64(q[i] ^ splat);
        if (m)
            r = i * 8 + gmtf_first_byte64(m);
    }
    unsigned wi = r >> 3;
    uint64_t carry = c;
#pragma unroll
    for (int i = 0; i < K; i++) {
        uint64_t tp = q[i] >> 56;
        if (i <= (int)wi)
            q[i] = gmtf_shift_in64(q[i], i < (int)wi ? 7 : (r & 7), carry);
        carry = tp;
    }
    *out = (uint32_t)carry;
    return r;
}

/* First pass: every byte of the chunk against queue positions 0..K*8-1.
 * Ranks below K*8 are final; the others write K*8 and, with RECORDS, an
 * escape record for the later passes. */
template <int K, bool RECORDS>
__global__ void __launch_bounds__(CTA) k_thread_depth(gmtf_batch_dev d, size_t c0, size_t c1)
{
    size_t c = c0 + (size_t)blockIdx.x * CTA + threadIdx.x;
    if (c >= c1)
        return;
    uint64_t q[K];
#pragma unroll
    for (int i = 0; i < K; i++)
        q[i] = *(const uint64_t *)(d.qin + c * 256 + i * 8);
    const uint8_t *src = d.in + d.ck_start[c];
    uint8_t *dst = d.out + d.ck_start[c];
    uint32_t len = d.ck_len[c];
    uint32_t *rec = d.esc + c * d.chunk;
    uint32_t ne = 0;
    uint32_t i = 0;
    uint32_t head = min(len, (uint32_t)((16 - ((uintptr_t)src & 15)) & 15));
    for (; i < head; i++) {
        uint32_t s = src[i], ov;
        unsigned r = reg_mtf_step<K>(q, s, s, &ov);
        dst[i] = (uint8_t)r;
        if (RECORDS && r == K * 8)
            rec[ne++] = i << 16 | s << 8 | ov;
    }
    for (; i + 16 <= len; i += 16) {
        uint4 v = *(const uint4 *)(src + i);
        uint32_t x[4] = {v.x, v.y, v.z, v.w}, y[4];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t s = (x[j >> 2] >> (8 * (j & 3))) & 0xff, ov;
            unsigned r = reg_mtf_step<K>(q, s, s, &ov);
            if (j % 4 == 0)
                y[j >> 2] = 0;
            y[j >> 2] |= r << (8 * (j & 3));
            if (RECORDS && r == K * 8)
                rec[ne++] = (i + j) << 16 | s << 8 | ov;
        }
        *(uint4 *)(dst + i) = make_uint4(y[0], y[1], y[2], y[3]);
    }
    for (; i < len; i++) {
        uint32_t s = src[i], ov;
        unsigned r = reg_mtf_step<K>(q, s, s, &ov);
        dst[i] = (uint8_t)r;
        if (RECORDS && r == K * 8)
            rec[ne++] = i << 16 | s << 8 | ov;
    }
    if (RECORDS)
        d.esc_cnt[c] = ne;
}

/* Middle pass: the records of the previous pass against queue positions
 * LO..LO+K*8-1; found ranks are final, the rest become records for the
 * next pass (compacted in place). */
template <int LO, int K>
__global__ void __launch_bounds__(CTA) k_thread_level(gmtf_batch_dev d, size_t c0, size_t c1)
{
    size_t c = c0 + (size_t)blockIdx.x * CTA + threadIdx.x;
    if (c >= c1)
        return;
    uint64_t q[K];
#pragma unroll
    for (int i = 0; i < K; i++)
        q[i] = *(const uint64_t *)(d.qin + c * 256 + LO + i * 8);
    uint8_t *dst = d.out + d.ck_start[c];
    uint32_t *rec = d.esc + c * d.chunk;
    uint32_t n = d.esc_cnt[c], ne = 0;
    for (uint32_t e = 0; e < n; e++) {
        uint32_t x = rec[e], ov;
        unsigned r = reg_mtf_step<K>(q, (x >> 8) & 0xff, x & 0xff, &ov);
        if (r < K * 8)
            dst[x >> 16] = (uint8_t)(LO + r);
        else
            rec[ne++] = (x & 0xffff0000u) | (x & 0xff00u) | ov;
    }
    d.esc_cnt[c] = ne;
}

/* ---- launchers ---------------------------------------------------------- */

#define RANGE_N(r) ((r)->c1 - (r)->c0)

static void enc_scalar(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_warp_encode<1><<<grid_for(RANGE_N(r), WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
static void enc_2symbols(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_warp_encode<2><<<grid_for(RANGE_N(r), WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
static void enc_2buffers(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_warp_encode_2buf<<<grid_for(RANGE_N(r), 2 * WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
template <int G, typename WT>
static void enc_group(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_group_encode<G, WT>
        <<<grid_for(RANGE_N(r), (32 / G) * WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
template <int K> static void enc_depth(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_thread_depth<K, false><<<grid_for(RANGE_N(r), CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
/* Multi-pass: first pass of depth K * 8 per thread, then the records
 * through the tail with G lanes per chunk (G = 32: k_warp_records). */
template <int K, int G>
static void enc_multi(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_thread_depth<K, true><<<grid_for(RANGE_N(r), CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
    if (G == 32)
        k_warp_records<K * 8><<<grid_for(RANGE_N(r), WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
    else
        k_group_records<G, K * 8>
            <<<grid_for(RANGE_N(r), (32 / G) * WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
/* Timing probe: only the steps every encoder shares (inbound queues). */
static void enc_none(const gmtf_batch_dev *, const gmtf_range *, cudaStream_t)
{
}
static void enc_8_32_full(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_thread_depth<1, true><<<grid_for(RANGE_N(r), CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
    k_thread_level<8, 3><<<grid_for(RANGE_N(r), CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
    k_warp_records<32><<<grid_for(RANGE_N(r), WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}

/* decoders: mtf_decode.cu */
void gmtf_dec_scalar(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
void gmtf_dec_2symbols(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
void gmtf_dec_2buffers(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
void gmtf_dec_8_full(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
void gmtf_dec_8_full_g4(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
void gmtf_dec_8_full_map(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);

#define F_EC (GMTF_GPU_ENCODE | GMTF_GPU_COMPLETE)
#define F_ECD (GMTF_GPU_ENCODE | GMTF_GPU_COMPLETE | GMTF_GPU_DECODE)
/* want_chunks: thread-per-chunk kernels need ~64 Ki chunks to fill an
 * H100; warp-per-chunk ones ~16 Ki. Index 0 is the default encoder; the
 * first variant with a decoder is the default decoder. */
const gmtf_variant gmtf_variants[] = {
    /* name, flags, depth, want_chunks, encode, decode, decode_map, max_chunk, scratch.
     * Index 0 is the default encoder, the first with a decoder the default
     * decoder (docs/gpu.md has the measurements behind the order). */
    {"16+full", F_EC, 0, 65536, enc_multi<2, 32>, NULL, NULL, 0, 4},
    {"8+full", F_ECD, 0, 65536, enc_multi<1, 32>, gmtf_dec_8_full, gmtf_dec_8_full_map, 32768, 8},
    {"scalar", F_ECD, 0, 16384, enc_scalar, gmtf_dec_scalar, NULL, 0, 0},
    {"2symbols", F_ECD, 0, 16384, enc_2symbols, gmtf_dec_2symbols, NULL, 0, 0},
    {"2buffers", F_ECD, 0, 16384, enc_2buffers, gmtf_dec_2buffers, NULL, 0, 0},
    {"4by8", F_EC, 0, 32768, enc_group<4, uint32_t>, NULL, NULL, 0, 0},
    {"8by4", F_EC, 0, 32768, enc_group<8, uint32_t>, NULL, NULL, 0, 0},
    {"thread", F_EC, 0, 65536, enc_group<1, uint8_t>, NULL, NULL, 0, 0},
    {"thread_by4", F_EC, 0, 65536, enc_group<1, uint32_t>, NULL, NULL, 0, 0},
    {"thread_by8", F_EC, 0, 65536, enc_group<1, uint64_t>, NULL, NULL, 0, 0},
    {"thread_by16", F_EC, 0, 65536, enc_group<1, q128>, NULL, NULL, 0, 0},
    {"depth8", GMTF_GPU_ENCODE, 8, 65536, enc_depth<1>, NULL, NULL, 0, 0},
    {"depth32", GMTF_GPU_ENCODE, 32, 65536, enc_depth<4>, NULL, NULL, 0, 0},
    {"32+full", F_EC, 0, 65536, enc_multi<4, 32>, NULL, NULL, 0, 4},
    {"8+32+full", F_EC, 0, 65536, enc_8_32_full, NULL, NULL, 0, 4},
    /* the last pass with 4 lanes per chunk instead of a warp (slower:
     * chunks sharing a warp wait for the deepest rank among them) */
    {"8+full/g4", F_ECD, 0, 65536, enc_multi<1, 4>, gmtf_dec_8_full_g4, gmtf_dec_8_full_map, 32768,
     8},
    {"queues", GMTF_GPU_ENCODE | GMTF_GPU_PROBE, 0, 65536, enc_none, NULL, NULL, 0, 0},
};
const size_t gmtf_variant_total = sizeof(gmtf_variants) / sizeof(gmtf_variants[0]);
