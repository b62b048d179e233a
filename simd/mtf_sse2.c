/* "sse2": the first 16 queue positions live in one XMM register, positions
 * 16..255 in a 240-byte tail in memory. Encode finds a byte with
 * PCMPEQB + PMOVMSKB + TZCNT over 16 positions at a time; decode extracts
 * position r with a PSADBW reduction (SSE2 has no byte shuffle). Runs on
 * every x86-64 CPU. */
#include "mtf_internal.h"

#if GMTF_SIMD_X86
#include <immintrin.h>
#include <string.h>

#define T_SSE2 __attribute__((target("sse2")))

/* lanes 0..r set, r < 64 */
T_SSE2 static inline __m128i le16(unsigned r)
{
    return _mm_loadu_si128((const __m128i *)(gmtf_simd_le_ramp + 63 - r));
}

/* m ? a : b, bytewise */
T_SSE2 static inline __m128i sel16(__m128i m, __m128i a, __m128i b)
{
    return _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b));
}

/* [first, v[0..14]] */
T_SSE2 static inline __m128i push16(__m128i v, unsigned first)
{
    return _mm_or_si128(_mm_slli_si128(v, 1), _mm_cvtsi32_si128((int)first));
}

/* The tail is queue positions 16..255; tb[15] is scratch so that the shifted
 * chunk j can be read unaligned at 16 * j - 1. Moves tail[idx] out, shifts
 * tail[0..idx-1] back by one and puts e (evicted from the head) first. */
T_SSE2 static inline void tail_shift16(uint8_t *tail, unsigned idx, unsigned e)
{
    unsigned j = idx / 16;
    __m128i v = _mm_load_si128((const __m128i *)(tail + 16 * j));
    __m128i sh = j ? _mm_loadu_si128((const __m128i *)(tail + 16 * j - 1)) : push16(v, e);
    _mm_store_si128((__m128i *)(tail + 16 * j), sel16(le16(idx % 16), sh, v));
    for (; j > 1; j--) /* whole chunks below, top down so reads precede writes */
        _mm_store_si128((__m128i *)(tail + 16 * (j - 1)),
                        _mm_loadu_si128((const __m128i *)(tail + 16 * (j - 1) - 1)));
    if (j == 1)
        _mm_store_si128((__m128i *)tail, push16(_mm_load_si128((const __m128i *)tail), e));
}

T_SSE2 static inline unsigned tail_find16(const uint8_t *tail, __m128i bs)
{
    for (unsigned j = 0;; j++) { /* s is in the tail: the loop ends */
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_load_si128((const __m128i *)(tail + 16 * j)), bs));
        if (m)
            return 16 * j + (unsigned)__builtin_ctz(m);
    }
}

T_SSE2 static void state_init16(__m128i *h, uint8_t *tail)
{
    *h = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int i = 0; i < 240; i++)
        tail[i] = (uint8_t)(16 + i);
}

T_SSE2 void gmtf_simd_mtf_encode_sse2(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t tb[16 + 240] __attribute__((aligned(16)));
    uint8_t *tail = tb + 16;
    __m128i h;
    state_init16(&h, tail);
    for (size_t i = 0; i < n; i++) {
        unsigned s = src[i];
        __m128i bs = _mm_set1_epi8((char)s);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(h, bs));
        __m128i sh = push16(h, s);
        if (__builtin_expect(m != 0, 1)) {
            unsigned r = (unsigned)__builtin_ctz(m);
            h = sel16(le16(r), sh, h);
            dst[i] = (uint8_t)r;
        } else {
            unsigned idx = tail_find16(tail, bs);
            tail_shift16(tail, idx, (unsigned)_mm_extract_epi16(h, 7) >> 8);
            h = sh;
            dst[i] = (uint8_t)(16 + idx);
        }
    }
}

T_SSE2 void gmtf_simd_mtf_decode_sse2(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t tb[16 + 240] __attribute__((aligned(16)));
    uint8_t *tail = tb + 16;
    __m128i h;
    state_init16(&h, tail);
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i lane0 = _mm_cvtsi32_si128(0xff);
    for (size_t i = 0; i < n; i++) {
        unsigned r = src[i];
        if (__builtin_expect(r < 16, 1)) {
            /* byte r of h, summed alone by PSADBW, lands in lane 0 */
            __m128i x = _mm_and_si128(h, _mm_cmpeq_epi8(iota, _mm_set1_epi8((char)r)));
            x = _mm_sad_epu8(x, _mm_setzero_si128());
            x = _mm_add_epi64(x, _mm_shuffle_epi32(x, 0x4e));
            x = _mm_and_si128(x, lane0);
            __m128i sh = _mm_or_si128(_mm_slli_si128(h, 1), x);
            h = sel16(le16(r), sh, h);
            dst[i] = (uint8_t)_mm_cvtsi128_si32(x);
        } else {
            unsigned idx = r - 16, s = tail[idx];
            tail_shift16(tail, idx, (unsigned)_mm_extract_epi16(h, 7) >> 8);
            h = push16(h, s);
            dst[i] = (uint8_t)s;
        }
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(sse2)
#endif
