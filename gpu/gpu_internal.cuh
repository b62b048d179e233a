/* Internals shared by the .cu files of gpu/: the context, the batch
 * geometry and small device helpers. Not part of the API (gpu.h is). */
#ifndef GMTF_GPU_INTERNAL_CUH
#define GMTF_GPU_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "dev_alloc.cuh"
#include "gpu.h"

#define GMTF_WARP 32
#define GMTF_FULL 0xffffffffu
#define GMTF_NSTREAMS 3
/* Chunks of one block are combined in groups of this many (two-level scan). */
#define GMTF_GROUP 32

/* A device buffer that only grows. */
struct gmtf_dbuf {
    void *p;
    size_t cap;
};

/* One range of work: blocks [b0,b1), their chunks [c0,c1), groups [g0,g1). */
struct gmtf_range {
    size_t b0, b1, c0, c1, g0, g1;
};

/* Device pointers a launcher needs, all relative to the staged batch. */
struct gmtf_batch_dev {
    const uint8_t *in;      /* input bytes, 16-byte padded on both sides */
    uint8_t *out;           /* output bytes */
    const uint64_t *off;    /* block offsets relative to in, count + 1 */
    const uint32_t *ckscan; /* first chunk of each block, count + 1 */
    const uint32_t *grscan; /* first group of each block, count + 1 */
    uint64_t *ck_start;     /* chunk start (relative to in) */
    uint32_t *ck_len;       /* chunk length */
    uint32_t *ck_kidx;      /* index of the chunk in its block */
    uint32_t *gr_first;     /* first chunk of each group */
    uint32_t *gr_cnt;       /* chunks in each group */
    uint32_t *keys;         /* 256 per chunk: last-occurrence keys */
    uint32_t *gmax;         /* 256 per group */
    uint8_t *qin;           /* 256 per chunk: inbound queue (or permutation) */
    uint32_t *esc;          /* escape records, chunk bytes per chunk */
    uint32_t *esc_cnt;      /* records per chunk */
    uint32_t chunk;         /* chunk size (power of two) */
    size_t count, nck, ngr;
};

struct gmtf_gpu_ctx {
    int device; /* the CUDA device of its memory and streams */
    cudaStream_t st[GMTF_NSTREAMS];
    cudaEvent_t ev0, ev1, ev_tab;
    cudaEvent_t ev_slice[64];
    int ok;
    char err[256];
    uint32_t chunk_override;
    /* geometry of the staged batch */
    size_t count;
    uint64_t n;
    int staged;
    uint64_t *h_off; /* relative offsets, count + 1 */
    uint32_t *h_ckscan, *h_grscan;
    size_t h_cap;
    gmtf_dbuf in, out, off, ckscan, grscan, ck_start, ck_len, ck_kidx, gr_first, gr_cnt;
    gmtf_dbuf keys, gmax, qin, esc, esc_cnt;
    gmtf_dbuf ks_a, ks_b, ks_misc; /* k-selection scratch */
    uint8_t *h_in, *h_out;         /* pinned staging */
    size_t h_in_cap, h_out_cap;
    gmtf_batch_dev dev;
};

/* A variant's launchers: encode / decode the chunks of one range on a
 * stream, after the common steps. want_chunks tunes the automatic chunk
 * size: thread-per-chunk kernels need many more chunks than warp ones. */
typedef void (*gmtf_launch_fn)(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
struct gmtf_variant {
    const char *name;
    unsigned flags;
    unsigned depth;
    uint32_t want_chunks;
    gmtf_launch_fn encode;
    gmtf_launch_fn decode;
    gmtf_launch_fn decode_map; /* last decode pass; NULL = k_perm_map */
    uint32_t max_chunk;        /* 0 = no limit below 65536 */
    uint32_t scratch_per_byte; /* esc bytes per batch byte (records, tokens) */
};

/* mtf_chunks.cu: the steps every variant shares. */
void gmtf_launch_chunk_table(const gmtf_batch_dev *d, cudaStream_t s);
void gmtf_launch_inbound_queues(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s);
void gmtf_launch_decode_finish(const gmtf_batch_dev *d, const gmtf_range *r, cudaStream_t s,
                               gmtf_launch_fn map);

/* mtf_encode.cu / mtf_decode.cu */
extern const gmtf_variant gmtf_variants[];
extern const size_t gmtf_variant_total;

/* gpu_api.cu */
int gmtf_gpu_fail(gmtf_gpu_ctx *ctx, cudaError_t e, const char *what);
/* Makes the context's device the calling thread's current one (CUDA's
 * current device is per thread): 0, or gmtf_gpu_fail's code. */
int gmtf_gpu_use(gmtf_gpu_ctx *ctx);
int gmtf_dbuf_reserve(gmtf_gpu_ctx *ctx, gmtf_dbuf *b, size_t bytes);

/* ---- device helpers ---------------------------------------------------- */

#ifdef __CUDACC__
#define GMTF_ONES64 0x0101010101010101ull
#define GMTF_HIGH64 0x8080808080808080ull

/* Flags the byte of x that is zero; only the lowest flag is exact (borrows
 * can flag bytes above it), which is all a queue of distinct bytes needs. */
__device__ __forceinline__ uint64_t gmtf_zero_bytes64(uint64_t x)
{
    return (x - GMTF_ONES64) & ~x & GMTF_HIGH64;
}
__device__ __forceinline__ uint32_t gmtf_zero_bytes32(uint32_t x)
{
    return (x - 0x01010101u) & ~x & 0x80808080u;
}
/* Byte index of the lowest flagged byte (m != 0). */
__device__ __forceinline__ unsigned gmtf_first_byte64(uint64_t m)
{
    return (unsigned)(__ffsll((long long)m) - 1) >> 3;
}
__device__ __forceinline__ unsigned gmtf_first_byte32(uint32_t m)
{
    return (unsigned)(__ffs((int)m) - 1) >> 3;
}
/* Bytes above b kept, bytes 1..b take old bytes 0..b-1, byte 0 gets c:
 * removes byte b from an 8-byte slice of the queue and inserts c in front.
 * b == 7 (or more) shifts the whole word. */
__device__ __forceinline__ uint64_t gmtf_shift_in64(uint64_t q, unsigned b, uint64_t c)
{
    uint64_t keep = b >= 7 ? 0 : (~0ull << (8 * (b + 1)));
    return (q & keep) | ((q << 8) & ~keep) | c;
}
__device__ __forceinline__ uint32_t gmtf_shift_in32(uint32_t q, unsigned b, uint32_t c)
{
    uint32_t keep = b >= 3 ? 0 : (~0u << (8 * (b + 1)));
    return (q & keep) | ((q << 8) & ~keep) | c;
}
#endif

#endif
