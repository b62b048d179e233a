/* Inverse MTF kernels. Each decodes its chunk from the identity queue:
 * output bytes name positions of the chunk's inbound queue, and the final
 * queue (a permutation) goes to qin; mtf_chunks.cu then scans the
 * permutations and maps the output (gmtf_launch_decode_finish). */
#include "gpu_internal.cuh"

#define CTA 128
#define WARPS_PER_CTA (CTA / 32)

static unsigned grid_for(size_t threads, unsigned cta)
{
    return (unsigned)((threads + cta - 1) / cta);
}

__device__ __forceinline__ uint64_t identity_slice(unsigned lane)
{
    uint64_t q = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        q |= (uint64_t)(lane * 8 + i) << (8 * i);
    return q;
}

/* One inverse step: the entry at rank r moves to the front; returns it. */
__device__ __forceinline__ uint32_t warp_unmtf_step(uint64_t &q, unsigned lane, uint32_t r)
{
    unsigned L = r >> 3, b = r & 7;
    uint32_t s = __shfl_sync(GMTF_FULL, (uint32_t)(q >> (8 * b)) & 0xff, L);
    uint64_t top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
    if (lane == 0)
        top = s;
    if (lane <= L)
        q = gmtf_shift_in64(q, lane < L ? 7 : b, top);
    return s;
}

__device__ __forceinline__ uint32_t load_word(const uint8_t *p, uint32_t i, uint32_t len, bool aligned)
{
    if (aligned && i + 4 <= len)
        return *(const uint32_t *)(p + i);
    uint32_t w = 0;
    for (uint32_t k = 0; k < 4 && i + k < len; k++)
        w |= (uint32_t)p[i + k] << (8 * k);
    return w;
}

__device__ __forceinline__ void store_word(uint8_t *p, uint32_t i, uint32_t len, bool aligned, uint32_t w)
{
    if (aligned && i + 4 <= len) {
        *(uint32_t *)(p + i) = w;
        return;
    }
    for (uint32_t k = 0; k < 4 && i + k < len; k++)
        p[i + k] = (uint8_t)(w >> (8 * k));
}

#define RANK(word, j) ((__shfl_sync(GMTF_FULL, (word), (j) >> 2) >> (8 * ((j) & 3))) & 0xff)

/* scalar (SYM = 1) and 2symbols (SYM = 2: both entries looked up in the
 * same queue, the second corrected for the first's move). Each lane keeps
 * the output word it will store; symbol j belongs to lane j / 4. */
template <int SYM>
__global__ void __launch_bounds__(CTA) k_warp_decode(gmtf_batch_dev d, size_t c0, size_t c1)
{
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t c = c0 + (size_t)blockIdx.x * WARPS_PER_CTA + w;
    if (c >= c1)
        return;
    uint64_t q = identity_slice(lane);
    const uint8_t *src = d.in + d.ck_start[c];
    uint8_t *dst = d.out + d.ck_start[c];
    uint32_t len = d.ck_len[c];
    bool aligned = ((uintptr_t)src & 3) == 0;
    for (uint32_t base = 0; base < len; base += 128) {
        uint32_t word = load_word(src, base + lane * 4, len, aligned);
        uint32_t n = min(128u, len - base), outw = 0, j = 0;
        if (SYM == 2) {
            for (; j + 1 < n; j += 2) {
                uint32_t r1 = RANK(word, j), r2 = RANK(word, j + 1);
                /* after r1 moves to the front, position r2 holds what
                 * was at r2 - 1 when r2 <= r1 (and the moved entry at 0) */
                uint32_t r2o = r2 == 0 ? r1 : (r2 <= r1 ? r2 - 1 : r2);
                uint32_t s1 = __shfl_sync(GMTF_FULL, (uint32_t)(q >> (8 * (r1 & 7))) & 0xff, r1 >> 3);
                uint32_t s2 = __shfl_sync(GMTF_FULL, (uint32_t)(q >> (8 * (r2o & 7))) & 0xff, r2o >> 3);
                uint64_t top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
                if (lane == 0)
                    top = s1;
                if (lane <= (r1 >> 3))
                    q = gmtf_shift_in64(q, lane < (r1 >> 3) ? 7 : (r1 & 7), top);
                top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
                if (lane == 0)
                    top = s2;
                if (lane <= (r2 >> 3))
                    q = gmtf_shift_in64(q, lane < (r2 >> 3) ? 7 : (r2 & 7), top);
                if (lane == (j >> 2))
                    outw |= s1 << (8 * (j & 3)) | s2 << (8 * ((j + 1) & 3));
            }
        }
        for (; j < n; j++) {
            uint32_t s = warp_unmtf_step(q, lane, RANK(word, j));
            if (lane == (j >> 2))
                outw |= s << (8 * (j & 3));
        }
        store_word(dst, base + lane * 4, len, aligned, outw);
    }
    *(uint64_t *)(d.qin + c * 256 + lane * 8) = q;
}

/* 2buffers: two chunks per warp, steps interleaved. */
__global__ void __launch_bounds__(CTA) k_warp_decode_2buf(gmtf_batch_dev d, size_t c0, size_t c1)
{
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t ca = c0 + ((size_t)blockIdx.x * WARPS_PER_CTA + w) * 2;
    if (ca >= c1)
        return;
    bool has_b = ca + 1 < c1;
    size_t cb = has_b ? ca + 1 : ca;
    uint32_t la = d.ck_len[ca], lb = has_b ? d.ck_len[cb] : 0;
    uint64_t qa = identity_slice(lane), qb = qa;
    const uint8_t *sa = d.in + d.ck_start[ca], *sb = d.in + d.ck_start[cb];
    uint8_t *da = d.out + d.ck_start[ca], *db = d.out + d.ck_start[cb];
    bool ala = ((uintptr_t)sa & 3) == 0, alb = ((uintptr_t)sb & 3) == 0;
    uint32_t lmax = max(la, lb);
    for (uint32_t base = 0; base < lmax; base += 128) {
        uint32_t wa = base < la ? load_word(sa, base + lane * 4, la, ala) : 0;
        uint32_t wb = base < lb ? load_word(sb, base + lane * 4, lb, alb) : 0;
        uint32_t na = base < la ? min(128u, la - base) : 0;
        uint32_t nb = base < lb ? min(128u, lb - base) : 0;
        uint32_t oa = 0, ob = 0, j = 0, nmin = min(na, nb);
        for (; j < nmin; j++) {
            uint32_t s1 = warp_unmtf_step(qa, lane, RANK(wa, j));
            uint32_t s2 = warp_unmtf_step(qb, lane, RANK(wb, j));
            if (lane == (j >> 2)) {
                oa |= s1 << (8 * (j & 3));
                ob |= s2 << (8 * (j & 3));
            }
        }
        for (uint32_t k = j; k < na; k++) {
            uint32_t s = warp_unmtf_step(qa, lane, RANK(wa, k));
            if (lane == (k >> 2))
                oa |= s << (8 * (k & 3));
        }
        for (uint32_t k = j; k < nb; k++) {
            uint32_t s = warp_unmtf_step(qb, lane, RANK(wb, k));
            if (lane == (k >> 2))
                ob |= s << (8 * (k & 3));
        }
        if (base < la)
            store_word(da, base + lane * 4, la, ala, oa);
        if (base < lb)
            store_word(db, base + lane * 4, lb, alb, ob);
    }
    *(uint64_t *)(d.qin + ca * 256 + lane * 8) = qa;
    if (has_b)
        *(uint64_t *)(d.qin + cb * 256 + lane * 8) = qb;
}

void gmtf_dec_scalar(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_warp_decode<1><<<grid_for(r->c1 - r->c0, WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
void gmtf_dec_2symbols(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_warp_decode<2><<<grid_for(r->c1 - r->c0, WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
void gmtf_dec_2buffers(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_warp_decode_2buf<<<grid_for(r->c1 - r->c0, 2 * WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
