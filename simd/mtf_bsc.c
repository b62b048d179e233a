/* "bsc": the plain scalar MTF loop, the baseline every vector variant is
 * measured against. Encode searches and shifts in one pass; decode moves
 * the found byte to the front with a shifting loop. */
#include "mtf_internal.h"

static void queue_init(uint8_t q[256])
{
    for (int i = 0; i < 256; i++)
        q[i] = (uint8_t)i;
}

void gmtf_simd_mtf_encode_bsc(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t q[256] __attribute__((aligned(64)));
    queue_init(q);
    for (size_t i = 0; i < n; i++) {
        uint8_t s = src[i], prev = q[0];
        if (prev == s) {
            dst[i] = 0;
            continue;
        }
        q[0] = s;
        unsigned r = 1;
        for (;;) { /* carry the displaced byte down until s's slot is found */
            uint8_t c = q[r];
            q[r] = prev;
            if (c == s)
                break;
            prev = c;
            r++;
        }
        dst[i] = (uint8_t)r;
    }
}

void gmtf_simd_mtf_decode_bsc(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t q[256] __attribute__((aligned(64)));
    queue_init(q);
    gmtf_simd_queue_decode(q, src, dst, n);
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(bsc)
