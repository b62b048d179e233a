/* The steps every MTF variant shares: the chunk table (load-balancing
 * search of chunks onto blocks), the inbound queue of every chunk for the
 * encoder (parallel MTF: last occurrences, segmented prefix max, a sort per
 * chunk) and the permutation scan that finishes the decoder. */
#include "gpu_internal.cuh"

/* ---- chunk table: load-balancing search ------------------------------- */

#define LBS_CTA 256
#define LBS_SPAN 1024

/* Largest b in [lo, hi) with scan[b] <= x (scan ascending, scan[lo] <= x). */
__device__ __forceinline__ size_t lbs_search(const uint32_t *scan, size_t lo, size_t hi, uint32_t x)
{
    while (hi - lo > 1) {
        size_t mid = (lo + hi) >> 1;
        if (scan[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Each CTA maps LBS_CTA consecutive work-items (chunks or groups) to their
 * segments (blocks): it finds the segment range its items span, loads that
 * slice of the scan into shared memory and searches there, so the items of
 * one CTA share one small window as in moderngpu's load-balancing search. */
template <bool GROUPS> __global__ void k_chunk_table(gmtf_batch_dev d, size_t items)
{
    __shared__ uint32_t win[LBS_SPAN + 1];
    __shared__ size_t s_lo, s_hi;
    const uint32_t *scan = GROUPS ? d.grscan : d.ckscan;
    size_t first = (size_t)blockIdx.x * LBS_CTA;
    size_t last = min(first + LBS_CTA, items) - 1;
    if (threadIdx.x == 0) {
        s_lo = lbs_search(scan, 0, d.count, (uint32_t)first);
        s_hi = lbs_search(scan, 0, d.count, (uint32_t)last) + 1;
    }
    __syncthreads();
    size_t lo = s_lo, hi = s_hi;
    bool in_smem = hi - lo <= LBS_SPAN;
    if (in_smem)
        for (size_t i = threadIdx.x; i <= hi - lo; i += blockDim.x)
            win[i] = scan[lo + i];
    __syncthreads();
    size_t it = first + threadIdx.x;
    if (it >= items)
        return;
    size_t b = in_smem ? lo + lbs_search(win, 0, hi - lo, (uint32_t)it)
                       : lbs_search(scan, lo, hi, (uint32_t)it);
    if (GROUPS) {
        uint32_t j = (uint32_t)(it - d.grscan[b]);
        uint32_t c = d.ckscan[b] + j * GMTF_GROUP;
        d.gr_first[it] = c;
        d.gr_cnt[it] = min((uint32_t)GMTF_GROUP, d.ckscan[b + 1] - c);
    } else {
        uint32_t k = (uint32_t)(it - d.ckscan[b]);
        uint64_t s = d.off[b], e = d.off[b + 1];
        /* Chunks lie on a grid of multiples of the chunk size (relative to
         * the 256-aligned device buffer), so all but a block's first chunk
         * start 16-byte aligned. */
        uint64_t g = s / d.chunk + k;
        uint64_t cs = max(s, g * d.chunk), ce = min(e, (g + 1) * d.chunk);
        d.ck_start[it] = cs;
        d.ck_len[it] = (uint32_t)(ce - cs);
        d.ck_kidx[it] = k;
    }
}

void gmtf_launch_chunk_table(const gmtf_batch_dev *d, cudaStream_t s)
{
    if (d->nck)
        k_chunk_table<false>
            <<<(unsigned)((d->nck + LBS_CTA - 1) / LBS_CTA), LBS_CTA, 0, s>>>(*d, d->nck);
    if (d->ngr)
        k_chunk_table<true>
            <<<(unsigned)((d->ngr + LBS_CTA - 1) / LBS_CTA), LBS_CTA, 0, s>>>(*d, d->ngr);
}

/* ---- encoder: inbound queues ------------------------------------------- */

/* The queue entering a chunk lists every symbol by its last occurrence
 * before the chunk (latest first), then the unseen ones in ascending
 * order. Key of symbol s in chunk k: ((k + 1) << 16 | last position of s
 * in k) or 0; a segmented prefix max over the chunks of a block gives the
 * key before each chunk; sorting the 256 keys gives its inbound queue. */

#define K1_CTA 128

/* One thread per chunk scans it backwards; the first sighting of a symbol
 * is its last occurrence. Runs (frequent in BWT output) skip the lookup. */
__global__ void __launch_bounds__(K1_CTA) k_last_occurrence(gmtf_batch_dev d, size_t c0, size_t c1)
{
    __shared__ uint32_t seen[8 * K1_CTA];
    size_t c = c0 + (size_t)blockIdx.x * K1_CTA + threadIdx.x;
    if (c >= c1)
        return;
    uint32_t *m = seen + threadIdx.x;
#pragma unroll
    for (int w = 0; w < 8; w++)
        m[w * K1_CTA] = 0;
    const uint8_t *p = d.in + d.ck_start[c];
    uint32_t len = d.ck_len[c];
    uint32_t hi = (d.ck_kidx[c] + 1) << 16;
    uint32_t *key = d.keys + c * 256;
    uint32_t prev = 256;
    int i = (int)len - 1;
    /* unaligned tail, then 16 bytes at a time (aligned), then the head */
    uintptr_t a = (uintptr_t)(p + len) & 15;
    for (; i >= 0 && a; i--, a--) {
        uint32_t s = p[i];
        if (s != prev) {
            prev = s;
            uint32_t bit = 1u << (s & 31), w = m[(s >> 5) * K1_CTA];
            if (!(w & bit)) {
                m[(s >> 5) * K1_CTA] = w | bit;
                key[s] = hi | (uint32_t)i;
            }
        }
    }
    for (; i >= 15 && ((uintptr_t)(p + i + 1) & 15) == 0; i -= 16) {
        uint4 v = *(const uint4 *)(p + i - 15);
        uint32_t wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 15; j >= 0; j--) {
            uint32_t s = (wv[j >> 2] >> (8 * (j & 3))) & 0xff;
            if (s != prev) {
                prev = s;
                uint32_t bit = 1u << (s & 31), w = m[(s >> 5) * K1_CTA];
                if (!(w & bit)) {
                    m[(s >> 5) * K1_CTA] = w | bit;
                    key[s] = hi | (uint32_t)(i - 15 + j);
                }
            }
        }
    }
    for (; i >= 0; i--) {
        uint32_t s = p[i];
        if (s != prev) {
            prev = s;
            uint32_t bit = 1u << (s & 31), w = m[(s >> 5) * K1_CTA];
            if (!(w & bit)) {
                m[(s >> 5) * K1_CTA] = w | bit;
                key[s] = hi | (uint32_t)i;
            }
        }
    }
}

/* Two-level segmented exclusive prefix max of the keys over the chunks of
 * each block: max per group of chunks, exclusive scan over the groups of a
 * block, then the exclusive scan inside each group. One thread per
 * (group or block, symbol); consecutive threads read consecutive keys. */
__global__ void k_group_max(gmtf_batch_dev d, size_t g0, size_t g1)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t g = g0 + (t >> 8);
    if (g >= g1)
        return;
    uint32_t s = t & 255;
    uint32_t c = d.gr_first[g], n = d.gr_cnt[g], mx = 0;
    for (uint32_t j = 0; j < n; j++)
        mx = max(mx, d.keys[(size_t)(c + j) * 256 + s]);
    d.gmax[g * 256 + s] = mx;
}

__global__ void k_block_scan(gmtf_batch_dev d, size_t b0, size_t b1)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t b = b0 + (t >> 8);
    if (b >= b1)
        return;
    uint32_t s = t & 255, run = 0;
    for (uint32_t g = d.grscan[b]; g < d.grscan[b + 1]; g++) {
        uint32_t v = d.gmax[(size_t)g * 256 + s];
        d.gmax[(size_t)g * 256 + s] = run;
        run = max(run, v);
    }
}

__global__ void k_group_scan(gmtf_batch_dev d, size_t g0, size_t g1)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t g = g0 + (t >> 8);
    if (g >= g1)
        return;
    uint32_t s = t & 255;
    uint32_t c = d.gr_first[g], n = d.gr_cnt[g], run = d.gmax[g * 256 + s];
    for (uint32_t j = 0; j < n; j++) {
        uint32_t *k = &d.keys[(size_t)(c + j) * 256 + s];
        uint32_t v = *k;
        *k = run;
        run = max(run, v);
    }
}

/* One warp per chunk: bitonic sort of the 256 values (key << 8 | 255 - s)
 * ascending, 8 per lane (element e = 8 * lane + i); the queue is that
 * order reversed. Keys of seen symbols are distinct and non-zero, unseen
 * ones tie at 0 and fall back to ascending symbol order. */
#define K3_WARPS 4
__global__ void __launch_bounds__(K3_WARPS * 32)
    k_sort_queues(gmtf_batch_dev d, size_t c0, size_t c1)
{
    unsigned lane = threadIdx.x & 31;
    size_t c = c0 + (size_t)blockIdx.x * K3_WARPS + (threadIdx.x >> 5);
    if (c >= c1)
        return;
    const uint32_t *key = d.keys + c * 256 + lane * 8;
    uint4 k0 = *(const uint4 *)key, k1 = *(const uint4 *)(key + 4);
    uint32_t kk[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
    uint64_t v[8];
#pragma unroll
    for (int i = 0; i < 8; i++)
        v[i] = ((uint64_t)kk[i] << 8) | (255 - (lane * 8 + i));
#pragma unroll
    for (unsigned k = 2; k <= 256; k <<= 1) {
#pragma unroll
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            if (j >= 8) {
                unsigned lx = j >> 3;
                bool upper = lane & lx; /* this lane holds the higher index */
                bool up = ((lane * 8) & k) == 0;
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    uint64_t o = __shfl_xor_sync(GMTF_FULL, v[i], lx);
                    uint64_t lo = min(v[i], o), hi = max(v[i], o);
                    v[i] = (upper == up) ? hi : lo;
                }
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    if (i & j)
                        continue;
                    bool up = (((lane * 8) + i) & k) == 0;
                    uint64_t a = v[i], b = v[i | j];
                    uint64_t lo = min(a, b), hi = max(a, b);
                    v[i] = up ? lo : hi;
                    v[i | j] = up ? hi : lo;
                }
            }
        }
    }
    /* element e goes to queue position 255 - e */
    uint64_t out = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        out |= (uint64_t)(255 - (v[i] & 0xff)) << (8 * (7 - i));
    *(uint64_t *)(d.qin + c * 256 + 248 - lane * 8) = out;
}

static unsigned grid_for(size_t threads, unsigned cta)
{
    return (unsigned)((threads + cta - 1) / cta);
}

void gmtf_launch_inbound_queues(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s)
{
    size_t nc = r->c1 - r->c0, ng = r->g1 - r->g0, nb = r->b1 - r->b0;
    if (!nc)
        return;
    cudaMemsetAsync(d->keys + r->c0 * 256, 0, nc * 256 * sizeof(uint32_t), s);
    k_last_occurrence<<<grid_for(nc, K1_CTA), K1_CTA, 0, s>>>(*d, r->c0, r->c1);
    k_group_max<<<grid_for(ng * 256, 256), 256, 0, s>>>(*d, r->g0, r->g1);
    k_block_scan<<<grid_for(nb * 256, 256), 256, 0, s>>>(*d, r->b0, r->b1);
    k_group_scan<<<grid_for(ng * 256, 256), 256, 0, s>>>(*d, r->g0, r->g1);
    k_sort_queues<<<grid_for(nc, K3_WARPS), K3_WARPS * 32, 0, s>>>(*d, r->c0, r->c1);
}

/* ---- decoder: permutation scan and final mapping ----------------------- */

/* Inverse MTF moves queue entries by position only, whatever they hold, so
 * each chunk is first decoded from the identity queue (its output names
 * positions of the inbound queue, and its final queue is a permutation
 * P). The inbound queue of chunk k + 1 is Q_k[P_k[i]]; a two-level scan
 * composes these, and a last pass maps each output byte through its
 * chunk's inbound queue. The per-chunk permutations sit in qin and are
 * replaced there by the inbound queues; group permutations use gmax. */

/* cur <- cur o p for the 8 entries of this lane (cur in shared memory). */
__device__ __forceinline__ uint64_t perm_apply(const uint8_t *cur, uint64_t p)
{
    uint64_t r = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        r |= (uint64_t)cur[(p >> (8 * i)) & 0xff] << (8 * i);
    return r;
}

#define D2_WARPS 4
/* mode 0: group permutation of each group; mode 2: inbound queues inside
 * each group. */
template <int MODE>
__global__ void __launch_bounds__(D2_WARPS * 32)
    k_perm_group(gmtf_batch_dev d, size_t g0, size_t g1)
{
    __shared__ __align__(8) uint8_t cur_s[D2_WARPS][256];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t g = g0 + (size_t)blockIdx.x * D2_WARPS + w;
    if (g >= g1)
        return;
    uint8_t *cur = cur_s[w];
    uint8_t *gp = (uint8_t *)d.gmax + g * 1024;
    uint64_t mine;
    if (MODE == 0) {
        mine = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            mine |= (uint64_t)(lane * 8 + i) << (8 * i);
    } else {
        mine = *(const uint64_t *)(gp + lane * 8);
    }
    uint32_t c = d.gr_first[g], n = d.gr_cnt[g];
    for (uint32_t j = 0; j < n; j++) {
        uint64_t *pq = (uint64_t *)(d.qin + (size_t)(c + j) * 256) + lane;
        uint64_t p = *pq;
        *(uint64_t *)(cur + lane * 8) = mine;
        __syncwarp();
        if (MODE == 2)
            *pq = mine;
        mine = perm_apply(cur, p);
        __syncwarp();
    }
    if (MODE == 0)
        *(uint64_t *)(gp + lane * 8) = mine;
}

__global__ void __launch_bounds__(D2_WARPS * 32)
    k_perm_block(gmtf_batch_dev d, size_t b0, size_t b1)
{
    __shared__ __align__(8) uint8_t cur_s[D2_WARPS][256];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t b = b0 + (size_t)blockIdx.x * D2_WARPS + w;
    if (b >= b1)
        return;
    uint8_t *cur = cur_s[w];
    uint64_t mine = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
        mine |= (uint64_t)(lane * 8 + i) << (8 * i);
    for (uint32_t g = d.grscan[b]; g < d.grscan[b + 1]; g++) {
        uint64_t *pg = (uint64_t *)((uint8_t *)d.gmax + (size_t)g * 1024) + lane;
        uint64_t p = *pg;
        *(uint64_t *)(cur + lane * 8) = mine;
        __syncwarp();
        *pg = mine;
        mine = perm_apply(cur, p);
        __syncwarp();
    }
}

/* Maps every output byte through the chunk's inbound queue. */
__global__ void __launch_bounds__(D2_WARPS * 32) k_perm_map(gmtf_batch_dev d, size_t c0, size_t c1)
{
    __shared__ __align__(16) uint8_t q_s[D2_WARPS][256];
    unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    size_t c = c0 + (size_t)blockIdx.x * D2_WARPS + w;
    if (c >= c1)
        return;
    uint8_t *q = q_s[w];
    *(uint64_t *)(q + lane * 8) = *(const uint64_t *)(d.qin + c * 256 + lane * 8);
    __syncwarp();
    uint8_t *p = d.out + d.ck_start[c];
    uint32_t len = d.ck_len[c];
    uint32_t head = (uint32_t)((16 - ((uintptr_t)p & 15)) & 15);
    head = min(head, len);
    if (lane < head)
        p[lane] = q[p[lane]];
    uint32_t body = (len - head) & ~15u;
    for (uint32_t i = head + lane * 16; i < head + body; i += 32 * 16) {
        uint4 v = *(uint4 *)(p + i);
        uint32_t x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t y = x[j];
            x[j] = (uint32_t)q[y & 0xff] | (uint32_t)q[(y >> 8) & 0xff] << 8 |
                   (uint32_t)q[(y >> 16) & 0xff] << 16 | (uint32_t)q[y >> 24] << 24;
        }
        *(uint4 *)(p + i) = make_uint4(x[0], x[1], x[2], x[3]);
    }
    for (uint32_t i = head + body + lane; i < len; i += 32)
        p[i] = q[p[i]];
}

void gmtf_launch_decode_finish(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s,
                               gmtf_launch_fn map)
{
    size_t nc = r->c1 - r->c0, ng = r->g1 - r->g0, nb = r->b1 - r->b0;
    if (!nc)
        return;
    k_perm_group<0><<<grid_for(ng, D2_WARPS), D2_WARPS * 32, 0, s>>>(*d, r->g0, r->g1);
    k_perm_block<<<grid_for(nb, D2_WARPS), D2_WARPS * 32, 0, s>>>(*d, r->b0, r->b1);
    k_perm_group<2><<<grid_for(ng, D2_WARPS), D2_WARPS * 32, 0, s>>>(*d, r->g0, r->g1);
    if (map)
        map(d, r, s);
    else
        k_perm_map<<<grid_for(nc, D2_WARPS), D2_WARPS * 32, 0, s>>>(*d, r->c0, r->c1);
}
