/* Scalar MTF, the reference every other backend must match byte for byte.
 * A plain loop in the style of bsc's: search and shift in one pass, with a
 * fast path for rank 0 (the most common rank in BWT output). */
#include "mtf.h"

void gmtf_mtf_encode_scalar(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t q[256];
    for (unsigned i = 0; i < 256; i++)
        q[i] = (uint8_t)i;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = src[i];
        if (q[0] == c) {
            dst[i] = 0;
            continue;
        }
        uint8_t prev = q[0];
        q[0] = c;
        unsigned r = 1;
        for (;;) {
            uint8_t t = q[r];
            q[r] = prev;
            if (t == c)
                break;
            prev = t;
            r++;
        }
        dst[i] = (uint8_t)r;
    }
}

void gmtf_mtf_decode_scalar(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t q[256];
    for (unsigned i = 0; i < 256; i++)
        q[i] = (uint8_t)i;
    for (size_t i = 0; i < n; i++) {
        unsigned r = src[i];
        uint8_t c = q[r];
        for (; r; r--)
            q[r] = q[r - 1];
        q[0] = c;
        dst[i] = c;
    }
}
