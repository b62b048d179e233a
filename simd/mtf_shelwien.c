/* "shelwien" and "shelwien2": Eugene Shelwien's constant-speed MTF. Instead
 * of the queue it keeps each symbol's rank; a step touches all 256 ranks
 * with compare-and-add, so its cost does not depend on the rank and the
 * compiler vectorises the loop with the baseline ISA (SSE2 on x86-64).
 * Ranks are stored biased by -128 so that a signed byte compare orders them
 * (SSE2 has no unsigned byte compare). "shelwien2" folds two input symbols
 * into one pass over the table. Decoding uses the scalar queue loop (below). */
#include "mtf_internal.h"

typedef int8_t rank_t; /* rank - 128 */
#define RMIN ((rank_t)-128)

static void ranks_init(rank_t rank[256])
{
    for (int c = 0; c < 256; c++)
        rank[c] = (rank_t)(c - 128);
}

void gmtf_simd_mtf_encode_shelwien(const uint8_t *src, uint8_t *dst, size_t n)
{
    rank_t rank[256] __attribute__((aligned(64)));
    ranks_init(rank);
    for (size_t i = 0; i < n; i++) {
        uint8_t s = src[i];
        rank_t d = rank[s];
        for (int c = 0; c < 256; c++) /* everything ahead of s moves back */
            rank[c] = (rank_t)(rank[c] + (rank[c] < d));
        rank[s] = RMIN;
        dst[i] = (uint8_t)(d + 128);
    }
}

void gmtf_simd_mtf_encode_shelwien2(const uint8_t *src, uint8_t *dst, size_t n)
{
    rank_t rank[256] __attribute__((aligned(64)));
    ranks_init(rank);
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
    if (i < n) {
        uint8_t s = src[i];
        dst[i] = (uint8_t)(rank[s] + 128);
    }
}

/* Shelwien's idea speeds up the search for a symbol's rank; decoding has
 * no search (the rank says where the symbol is) and a constant-speed
 * rewrite of the whole queue loses to moving r bytes, so both variants
 * decode with the scalar queue loop. */
void gmtf_simd_mtf_decode_shelwien(const uint8_t *src, uint8_t *dst, size_t n)
{
    gmtf_simd_mtf_decode_bsc(src, dst, n);
}

void gmtf_simd_mtf_decode_shelwien2(const uint8_t *src, uint8_t *dst, size_t n)
{
    gmtf_simd_mtf_decode_bsc(src, dst, n);
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(shelwien)
GMTF_SIMD_PAIR_BY_TWO_CALLS(shelwien2)
