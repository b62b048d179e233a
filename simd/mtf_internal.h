/* Internal to simd/: the variant functions and their shared tables. */
#ifndef GMTF_SIMD_MTF_INTERNAL_H
#define GMTF_SIMD_MTF_INTERNAL_H

#include "gmtf_simd.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define GMTF_SIMD_X86 1
#else
#define GMTF_SIMD_X86 0
#endif

extern const uint8_t gmtf_simd_rot64[64][64];

/* The scalar inverse MTF on a caller-held queue q: moving r bytes with
 * libc's memmove is hard to beat when ranks are large and random. */
static inline void gmtf_simd_queue_decode(uint8_t q[256], const uint8_t *src, uint8_t *dst,
                                          size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned r = src[i];
        uint8_t s = q[r];
        memmove(q + 1, q, r); /* what gcc makes of the textbook shifting loop */
        q[0] = s;
        dst[i] = s;
    }
}
extern const uint8_t gmtf_simd_le_ramp[128];

/* Declares name's encode/decode (one block) and encode2/decode2 (two). */
#define GMTF_SIMD_DECLARE(v)                                                                       \
    void gmtf_simd_mtf_encode_##v(const uint8_t *src, uint8_t *dst, size_t n);                     \
    void gmtf_simd_mtf_decode_##v(const uint8_t *src, uint8_t *dst, size_t n);                     \
    void gmtf_simd_mtf_encode2_##v(const uint8_t *s0, uint8_t *d0, size_t n0, const uint8_t *s1,   \
                                   uint8_t *d1, size_t n1);                                        \
    void gmtf_simd_mtf_decode2_##v(const uint8_t *s0, uint8_t *d0, size_t n0, const uint8_t *s1,   \
                                   uint8_t *d1, size_t n1)

/* encode2/decode2 for variants without an interleaved form: two plain calls. */
#define GMTF_SIMD_PAIR_BY_TWO_CALLS(v)                                                             \
    void gmtf_simd_mtf_encode2_##v(const uint8_t *s0, uint8_t *d0, size_t n0, const uint8_t *s1,   \
                                   uint8_t *d1, size_t n1)                                         \
    {                                                                                              \
        gmtf_simd_mtf_encode_##v(s0, d0, n0);                                                      \
        gmtf_simd_mtf_encode_##v(s1, d1, n1);                                                      \
    }                                                                                              \
    void gmtf_simd_mtf_decode2_##v(const uint8_t *s0, uint8_t *d0, size_t n0, const uint8_t *s1,   \
                                   uint8_t *d1, size_t n1)                                         \
    {                                                                                              \
        gmtf_simd_mtf_decode_##v(s0, d0, n0);                                                      \
        gmtf_simd_mtf_decode_##v(s1, d1, n1);                                                      \
    }

GMTF_SIMD_DECLARE(bsc);
GMTF_SIMD_DECLARE(shelwien);
GMTF_SIMD_DECLARE(shelwien2);
#if GMTF_SIMD_X86
GMTF_SIMD_DECLARE(sse2);
GMTF_SIMD_DECLARE(avx2);
GMTF_SIMD_DECLARE(avx512bw);
GMTF_SIMD_DECLARE(avx512);
GMTF_SIMD_DECLARE(avx512x2);
#endif

#endif
