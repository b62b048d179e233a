/* "shelwien" and "shelwien2": Eugene Shelwien's constant-speed MTF. Instead
 * of the queue it keeps each symbol's rank; a step touches all 256 ranks
 * with compare-and-add, so its cost does not depend on the rank and the
 * compiler vectorises the loop with the baseline ISA (SSE2 on x86-64).
 * Ranks are stored biased by -128 so that a signed byte compare orders them
 * (SSE2 has no unsigned byte compare). "shelwien2" folds two input symbols
 * into one pass over the table. Both skip runs of repeats (mtf_runs.h).
 * Decoding uses the scalar queue loop over nonzero ranks (below). */
#include "mtf_internal.h"
#include "mtf_runs.h"

typedef int8_t rank_t; /* rank - 128 */
#define RMIN ((rank_t)-128)

static void ranks_init(rank_t rank[256])
{
    for (int c = 0; c < 256; c++)
        rank[c] = (rank_t)(c - 128);
}

static void enc_core1(rank_t rank[256], const uint8_t *src, uint8_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t s = src[i];
        rank_t d = rank[s];
        for (int c = 0; c < 256; c++) /* everything ahead of s moves back */
            rank[c] = (rank_t)(rank[c] + (rank[c] < d));
        rank[s] = RMIN;
        dst[i] = (uint8_t)(d + 128);
    }
}

static void enc_core2(rank_t rank[256], const uint8_t *src, uint8_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint8_t a = src[i], b = src[i + 1];
        rank_t da = rank[a], db = rank[b];
        /* b's rank once a has moved to the front */
        db = a == b ? RMIN : (rank_t)(db + (db < da));
        for (int c = 0; c < 256; c++) {
            rank_t x = rank[c];
            x = (rank_t)(x + (x < da));
            rank[c] = (rank_t)(x + (x < db));
        }
        /* a and b themselves were moved by the wrong rule above: fix them */
        rank[a] = a == b ? RMIN : RMIN + 1;
        rank[b] = RMIN;
        dst[i] = (uint8_t)(da + 128);
        dst[i + 1] = (uint8_t)(db + 128);
    }
    if (i < n) /* the odd last one: a one-symbol step */
        enc_core1(rank, src + i, dst + i, 1);
}

/* Both run the rank table over run heads only when a piece has enough
 * repeats (mtf_runs.h): a repeat has rank 0 and changes no rank. */
static void encode_runs(const uint8_t *src, uint8_t *dst, size_t n,
                        void (*core)(rank_t *, const uint8_t *, uint8_t *, size_t))
{
    rank_t rank[256] __attribute__((aligned(64)));
    gmtf_runs_work w;
    unsigned prev = 0; /* the queue front: a leading 0 has rank 0 */
    ranks_init(rank);
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_repeats(src + off, len, prev), len)) {
            core(rank, src + off, dst + off, len);
            prev = src[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_heads(src + off, len, &prev, &w);
        core(rank, w.in, w.out, nh);
        gmtf_runs_scatter(dst + off, len, nh, &w);
    }
}

void gmtf_simd_mtf_encode_shelwien(const uint8_t *src, uint8_t *dst, size_t n)
{
    encode_runs(src, dst, n, enc_core1);
}

void gmtf_simd_mtf_encode_shelwien2(const uint8_t *src, uint8_t *dst, size_t n)
{
    encode_runs(src, dst, n, enc_core2);
}

/* Shelwien's idea speeds up the search for a symbol's rank; decoding has
 * no search (the rank says where the symbol is) and a constant-speed
 * rewrite of the whole queue loses to moving r bytes. So both variants
 * decode with the scalar queue loop, over the nonzero ranks only when a
 * piece has enough zeros (a zero repeats the byte before it). */
static void decode_runs(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t q[256] __attribute__((aligned(64)));
    gmtf_runs_work w;
    for (int i = 0; i < 256; i++)
        q[i] = (uint8_t)i;
    w.out[0] = 0; /* a leading rank 0 is the queue front, 0 */
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_zeros(src + off, len), len)) {
            gmtf_simd_queue_decode(q, src + off, dst + off, len);
            w.out[0] = dst[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_nonzero(src + off, len, &w);
        gmtf_simd_queue_decode(q, w.in, w.out + 1, nh);
        gmtf_runs_fill(src + off, dst + off, len, nh, &w);
    }
}

void gmtf_simd_mtf_decode_shelwien(const uint8_t *src, uint8_t *dst, size_t n)
{
    decode_runs(src, dst, n);
}

void gmtf_simd_mtf_decode_shelwien2(const uint8_t *src, uint8_t *dst, size_t n)
{
    decode_runs(src, dst, n);
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(shelwien)
GMTF_SIMD_PAIR_BY_TWO_CALLS(shelwien2)
