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

#define RANK(word, j) ((__shfl_sync(GMTF_FULL, (word), (j) >> 2) >> (8 * ((j)&3))) & 0xff)

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
                uint32_t s1 =
                    __shfl_sync(GMTF_FULL, (uint32_t)(q >> (8 * (r1 & 7))) & 0xff, r1 >> 3);
                uint32_t s2 =
                    __shfl_sync(GMTF_FULL, (uint32_t)(q >> (8 * (r2o & 7))) & 0xff, r2o >> 3);
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

/* ---- multi-pass inverse MTF ("8+full") ----------------------------------
 * First pass, one thread per chunk: the 8 front positions as 16-bit tokens
 * in registers. A token names an event: 0..7 the entries the chunk starts
 * with at positions 0..7, 8 + e the symbol of the chunk's e-th rank >= 8
 * (an escape, unknown yet: it comes from positions 8..255). Ranks < 8 are
 * decoded to tokens at once; escapes leave a record (rank, token pushed out
 * of position 7). Second pass, G lanes per chunk: the records against
 * positions 8..255 in shared memory resolve each escape to an inbound
 * position. The chunk's final queue then goes to qin for the permutation
 * scan, and the last pass maps every token through the escapes and the
 * inbound queue. Storage (esc): tokens by batch position (u16), then
 * records and resolved escapes at chunk * chunk-size. */

__device__ __forceinline__ uint16_t *dec_tokens(const gmtf_batch_dev &d)
{
    return (uint16_t *)d.esc;
}
__device__ __forceinline__ uint32_t *dec_records(const gmtf_batch_dev &d, size_t c)
{
    return (uint32_t *)((uint8_t *)d.esc + 2 * d.nck * (size_t)d.chunk) + c * d.chunk;
}
__device__ __forceinline__ uint8_t *dec_resolved(const gmtf_batch_dev &d, size_t c)
{
    return (uint8_t *)d.esc + 6 * d.nck * (size_t)d.chunk + c * d.chunk;
}

__device__ __forceinline__ uint64_t shift_in16(uint64_t q, unsigned b, uint64_t c)
{
    uint64_t keep = b >= 3 ? 0 : (~0ull << (16 * (b + 1)));
    return (q & keep) | ((q << 16) & ~keep) | c;
}

/* One rank on the 8-token front; returns the token now at position 0. */
__device__ __forceinline__ uint32_t head_step(uint64_t &h0, uint64_t &h1, uint32_t r, uint32_t &ne,
                                              uint32_t *rec)
{
    uint32_t t;
    if (r < 8) {
        uint64_t w = r < 4 ? h0 : h1;
        t = (uint32_t)(w >> (16 * (r & 3))) & 0xffff;
        if (r < 4) {
            h0 = shift_in16(h0, r, t);
        } else {
            uint64_t top0 = h0 >> 48;
            h0 = (h0 << 16) | t;
            h1 = shift_in16(h1, r - 4, top0);
        }
    } else {
        t = 8 + ne;
        rec[ne++] = r << 16 | (uint32_t)(h1 >> 48);
        h1 = (h1 << 16) | (h0 >> 48);
        h0 = (h0 << 16) | t;
    }
    return t;
}

__global__ void __launch_bounds__(CTA) k_thread_undepth8(gmtf_batch_dev d, size_t c0, size_t c1)
{
    size_t c = c0 + (size_t)blockIdx.x * CTA + threadIdx.x;
    if (c >= c1)
        return;
    uint64_t h0 = 0x0003000200010000ull, h1 = 0x0007000600050004ull;
    uint64_t start = d.ck_start[c];
    const uint8_t *src = d.in + start;
    uint16_t *tok = dec_tokens(d) + start;
    uint32_t *rec = dec_records(d, c);
    uint32_t len = d.ck_len[c], ne = 0, i = 0;
    uint32_t head = min(len, (uint32_t)((16 - ((uintptr_t)src & 15)) & 15));
    for (; i < head; i++)
        tok[i] = (uint16_t)head_step(h0, h1, src[i], ne, rec);
    for (; i + 16 <= len; i += 16) {
        uint4 v = *(const uint4 *)(src + i);
        uint32_t x[4] = {v.x, v.y, v.z, v.w}, y[8];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t t = head_step(h0, h1, (x[j >> 2] >> (8 * (j & 3))) & 0xff, ne, rec);
            if (j % 2 == 0)
                y[j >> 1] = t;
            else
                y[j >> 1] |= t << 16;
        }
        *(uint4 *)(tok + i) = make_uint4(y[0], y[1], y[2], y[3]);
        *(uint4 *)(tok + i + 8) = make_uint4(y[4], y[5], y[6], y[7]);
    }
    for (; i < len; i++)
        tok[i] = (uint16_t)head_step(h0, h1, src[i], ne, rec);
    d.esc_cnt[c] = ne;
    uint64_t *ht = (uint64_t *)(d.keys + c * 256);
    ht[0] = h0;
    ht[1] = h1;
}

template <int G>
__global__ void __launch_bounds__(CTA) k_group_unrecords(gmtf_batch_dev d, size_t c0, size_t c1)
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
    size_t cc = valid ? c : c0;
    for (int i = 2 + k; i < NW; i += G)
        qs[i * NB + g] = 0x03020100u + 0x04040404u * i;
    uint32_t n = valid ? d.esc_cnt[c] : 0;
    const uint32_t *rec = dec_records(d, cc);
    uint8_t *res = dec_resolved(d, cc);
    uint32_t nmax = __reduce_max_sync(GMTF_FULL, n);
    __syncwarp();
    for (uint32_t e = 0; e < nmax; e++) {
        bool done = e >= n;
        uint32_t x = done ? 0 : rec[e];
        uint32_t r = x >> 16, pt = x & 0xffff;
        uint32_t carry = done ? 0 : (pt < 8 ? pt : res[pt - 8]);
        int wr = (int)(r >> 2);
        for (int step = 0; __any_sync(GMTF_FULL, !done); step++) {
            int i = 2 + step * G + (int)k;
            uint32_t wv = (!done && i <= wr) ? qs[i * NB + g] : 0;
            uint32_t tp = wv >> 24;
            uint32_t t = __shfl_up_sync(GMTF_FULL, tp, 1, G);
            uint32_t last = __shfl_sync(GMTF_FULL, tp, G - 1, G);
            if (k == 0)
                t = carry;
            if (!done) {
                if (i < wr) {
                    qs[i * NB + g] = gmtf_shift_in32(wv, 3, t);
                } else if (i == wr) {
                    res[e] = (uint8_t)(wv >> (8 * (r & 3)));
                    qs[i * NB + g] = gmtf_shift_in32(wv, r & 3, t);
                }
            }
            carry = last;
            if (2 + step * G + G - 1 >= wr)
                done = true;
        }
        __syncwarp(); /* res[e] is read by other lanes later */
    }
    if (!valid)
        return;
    uint32_t *q = (uint32_t *)(d.qin + c * 256);
    for (int i = 2 + k; i < NW; i += G)
        q[i] = qs[i * NB + g];
    if (k == 0) {
        const uint16_t *ht = (const uint16_t *)(d.keys + c * 256);
        uint32_t h[2] = {0, 0};
        for (int j = 0; j < 8; j++) {
            uint32_t t = ht[j];
            h[j >> 2] |= (t < 8 ? t : res[t - 8]) << (8 * (j & 3));
        }
        q[0] = h[0];
        q[1] = h[1];
    }
}

/* Second pass, one warp per chunk: positions 8..255 in registers (lane l
 * holds 8l..8l+7, lane 0 idle), one record per step with no search: the
 * rank names the lane and byte. Lane 1 inserts at position 8 and alone
 * writes and reads the resolved escapes, so program order suffices. */
__global__ void __launch_bounds__(CTA) k_warp_unrecords(gmtf_batch_dev d, size_t c0, size_t c1)
{
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t c = c0 + (size_t)blockIdx.x * WARPS_PER_CTA + w;
    if (c >= c1)
        return;
    uint64_t q = identity_slice(lane);
    uint32_t n = d.esc_cnt[c];
    const uint32_t *rec = dec_records(d, c);
    uint8_t *res = dec_resolved(d, c);
    for (uint32_t base = 0; base < n; base += 32) {
        uint32_t mine = base + lane < n ? rec[base + lane] : 0;
        uint32_t m = min(32u, n - base);
        for (uint32_t j = 0; j < m; j++) {
            uint32_t x = __shfl_sync(GMTF_FULL, mine, j);
            uint32_t r = x >> 16, pt = x & 0xffff;
            unsigned L = r >> 3, b = r & 7;
            uint32_t s = __shfl_sync(GMTF_FULL, (uint32_t)(q >> (8 * b)) & 0xff, L);
            uint64_t top = __shfl_up_sync(GMTF_FULL, (uint32_t)(q >> 56), 1);
            if (lane == 1) {
                res[base + j] = (uint8_t)s;
                top = pt < 8 ? pt : res[pt - 8];
            }
            if (lane >= 1 && lane <= L)
                q = gmtf_shift_in64(q, lane < L ? 7 : b, top);
        }
    }
    *(uint64_t *)(d.qin + c * 256 + lane * 8) = q;
    if (lane == 1) {
        const uint16_t *ht = (const uint16_t *)(d.keys + c * 256);
        uint64_t h = 0;
        for (int j = 0; j < 8; j++) {
            uint32_t t = ht[j];
            h |= (uint64_t)(t < 8 ? t : res[t - 8]) << (8 * j);
        }
        *(uint64_t *)(d.qin + c * 256) = h;
    }
}

/* Last pass: token -> inbound position -> symbol, one warp per chunk. */
__global__ void __launch_bounds__(CTA) k_token_map(gmtf_batch_dev d, size_t c0, size_t c1)
{
    __shared__ __align__(16) uint8_t q_s[WARPS_PER_CTA][256];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t c = c0 + (size_t)blockIdx.x * WARPS_PER_CTA + w;
    if (c >= c1)
        return;
    uint8_t *q = q_s[w];
    *(uint64_t *)(q + lane * 8) = *(const uint64_t *)(d.qin + c * 256 + lane * 8);
    __syncwarp();
    uint64_t start = d.ck_start[c];
    const uint16_t *tok = dec_tokens(d) + start;
    const uint8_t *res = dec_resolved(d, c);
    uint8_t *p = d.out + start;
    uint32_t len = d.ck_len[c];
    uint32_t head = min(len, (uint32_t)((8 - ((uintptr_t)p & 7)) & 7));
    if (lane < head) {
        uint32_t t = tok[lane];
        p[lane] = q[t < 8 ? t : res[t - 8]];
    }
    uint32_t body = (len - head) & ~7u;
    for (uint32_t i = head + lane * 8; i < head + body; i += 32 * 8) {
        uint4 v = *(const uint4 *)(tok + i);
        uint32_t x[4] = {v.x, v.y, v.z, v.w};
        uint64_t o = 0;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t t = (x[j >> 1] >> (16 * (j & 1))) & 0xffff;
            o |= (uint64_t)q[t < 8 ? t : res[t - 8]] << (8 * j);
        }
        *(uint64_t *)(p + i) = o;
    }
    for (uint32_t i = head + body + lane; i < len; i += 32) {
        uint32_t t = tok[i];
        p[i] = q[t < 8 ? t : res[t - 8]];
    }
}

void gmtf_dec_8_full(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    size_t nc = r->c1 - r->c0;
    k_thread_undepth8<<<grid_for(nc, CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
    k_warp_unrecords<<<grid_for(nc, WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}

void gmtf_dec_8_full_g4(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    size_t nc = r->c1 - r->c0;
    k_thread_undepth8<<<grid_for(nc, CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
    k_group_unrecords<4><<<grid_for(nc, 8 * WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}

void gmtf_dec_8_full_map(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    k_token_map<<<grid_for(r->c1 - r->c0, WARPS_PER_CTA), CTA, 0, s>>>(*d, r->c0, r->c1);
}
