/* "shelwien" and "shelwien2": Eugene Shelwien's constant-speed MTF. Instead
 * of the queue it keeps each symbol's rank; a step touches all 256 ranks
 * with compare-and-add, so its cost does not depend on the rank and the
 * compiler vectorises the loop with the baseline ISA (SSE2 on x86-64).
 * Ranks are stored biased by -128 so that a signed byte compare orders them
 * (SSE2 has no unsigned byte compare). "shelwien2" folds two input symbols
 * into one pass over the table. */
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

void gmtf_simd_mtf_decode_shelwien(const uint8_t *src, uint8_t *dst, size_t n)
{
    rank_t rank[256] __attribute__((aligned(64)));
    ranks_init(rank);
    for (size_t i = 0; i < n; i++) {
        rank_t d = (rank_t)(src[i] - 128);
        uint8_t s = 0;
        for (int c = 0; c < 256; c++) { /* find the symbol holding rank d */
            s |= (uint8_t)(rank[c] == d ? c : 0);
            rank[c] = (rank_t)(rank[c] + (rank[c] < d));
        }
        rank[s] = RMIN;
        dst[i] = s;
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

void gmtf_simd_mtf_decode_shelwien2(const uint8_t *src, uint8_t *dst, size_t n)
{
    rank_t rank[256] __attribute__((aligned(64)));
    ranks_init(rank);
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        rank_t da = (rank_t)(src[i] - 128), db = (rank_t)(src[i + 1] - 128);
        uint8_t a = 0, b = 0;
        for (int c = 0; c < 256; c++) {
            rank_t x = rank[c];
            a |= (uint8_t)(x == da ? c : 0);
            /* after a's step: a has RMIN, the rest moved by the a rule */
            rank_t y = x == da ? RMIN : (rank_t)(x + (x < da));
            b |= (uint8_t)(y == db && db != RMIN ? c : 0);
            rank[c] = (rank_t)(y + (y < db));
        }
        if (db == RMIN)
            b = a;
        rank[a] = a == b ? RMIN : RMIN + 1;
        rank[b] = RMIN;
        dst[i] = a;
        dst[i + 1] = b;
    }
    if (i < n) {
        rank_t d = (rank_t)(src[i] - 128);
        uint8_t s = 0;
        for (int c = 0; c < 256; c++)
            s |= (uint8_t)(rank[c] == d ? c : 0);
        dst[i] = s;
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(shelwien)
GMTF_SIMD_PAIR_BY_TWO_CALLS(shelwien2)
