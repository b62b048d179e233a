/* "avx2": the first 32 queue positions (the ranks BWT output mostly has)
 * live in one YMM register; positions 32..255 in a 224-byte tail in memory,
 * reached only on the slow path for rank >= 32. Decode rotates the head
 * with one PSHUFB when r < 16. */
#include "mtf_internal.h"

#if GMTF_SIMD_X86
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,bmi")))

T_AVX2 static inline __m256i le32(unsigned r) /* lanes 0..r set, r < 64 */
{
    return _mm256_loadu_si256((const __m256i *)(gmtf_simd_le_ramp + 63 - r));
}

/* [first-lane of f, v[0..30]]: f must be zero outside lane 0 */
T_AVX2 static inline __m256i push32(__m256i v, __m256i f)
{
    __m256i lo_up = _mm256_permute2x128_si256(v, v, 0x08); /* [0, v.lo] */
    return _mm256_or_si256(_mm256_alignr_epi8(v, lo_up, 15), f);
}

T_AVX2 static inline __m256i lane0_32(unsigned x)
{
    return _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)x));
}

/* Tail = positions 32..255 with a 32-byte scratch before it (see sse2). */
T_AVX2 static inline void tail_shift32(uint8_t *tail, unsigned idx, unsigned e)
{
    unsigned j = idx / 32;
    __m256i v = _mm256_load_si256((const __m256i *)(tail + 32 * j));
    __m256i sh = j ? _mm256_loadu_si256((const __m256i *)(tail + 32 * j - 1))
                   : push32(v, lane0_32(e));
    _mm256_store_si256((__m256i *)(tail + 32 * j), _mm256_blendv_epi8(v, sh, le32(idx % 32)));
    for (; j > 1; j--)
        _mm256_store_si256((__m256i *)(tail + 32 * (j - 1)),
                           _mm256_loadu_si256((const __m256i *)(tail + 32 * (j - 1) - 1)));
    if (j == 1)
        _mm256_store_si256((__m256i *)tail,
                           push32(_mm256_load_si256((const __m256i *)tail), lane0_32(e)));
}

T_AVX2 static inline unsigned tail_find32(const uint8_t *tail, __m256i bs)
{
    for (unsigned j = 0;; j++) {
        unsigned m = (unsigned)_mm256_movemask_epi8(
            _mm256_cmpeq_epi8(_mm256_load_si256((const __m256i *)(tail + 32 * j)), bs));
        if (m)
            return 32 * j + (unsigned)__builtin_ctz(m);
    }
}

T_AVX2 static inline unsigned last32(__m256i h)
{
    return (unsigned)_mm256_extract_epi8(h, 31);
}

T_AVX2 static void state_init32(__m256i *h, uint8_t *tail)
{
    *h = _mm256_loadu_si256((const __m256i *)gmtf_simd_rot64[0]); /* row 0 = identity */
    for (int i = 0; i < 224; i++)
        tail[i] = (uint8_t)(32 + i);
}

T_AVX2 void gmtf_simd_mtf_encode_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t tb[32 + 224] __attribute__((aligned(32)));
    uint8_t *tail = tb + 32;
    __m256i h;
    state_init32(&h, tail);
    for (size_t i = 0; i < n; i++) {
        unsigned s = src[i];
        __m256i bs = _mm256_set1_epi8((char)s);
        unsigned m = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(h, bs));
        __m256i sh = push32(h, lane0_32(s));
        if (__builtin_expect(m != 0, 1)) {
            unsigned r = (unsigned)__builtin_ctz(m);
            h = _mm256_blendv_epi8(h, sh, le32(r));
            dst[i] = (uint8_t)r;
        } else {
            unsigned idx = tail_find32(tail, bs);
            tail_shift32(tail, idx, last32(h));
            h = sh;
            dst[i] = (uint8_t)(32 + idx);
        }
    }
}

T_AVX2 void gmtf_simd_mtf_decode_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t tb[32 + 224] __attribute__((aligned(32)));
    uint8_t *tail = tb + 32;
    __m256i h;
    state_init32(&h, tail);
    const __m128i lane0 = _mm_cvtsi32_si128(0xff);
    for (size_t i = 0; i < n; i++) {
        unsigned r = src[i];
        if (__builtin_expect(r < 16, 1)) {
            /* lanes 16..31 of the row are the identity within their lane */
            h = _mm256_shuffle_epi8(h, _mm256_loadu_si256((const __m256i *)gmtf_simd_rot64[r]));
            dst[i] = (uint8_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(h));
        } else if (r < 32) {
            __m128i x = _mm_shuffle_epi8(_mm256_extracti128_si256(h, 1),
                                         _mm_set1_epi8((char)(r - 16)));
            x = _mm_and_si128(x, lane0);
            h = _mm256_blendv_epi8(h, push32(h, _mm256_zextsi128_si256(x)), le32(r));
            dst[i] = (uint8_t)_mm_cvtsi128_si32(x);
        } else {
            unsigned idx = r - 32, s = tail[idx];
            tail_shift32(tail, idx, last32(h));
            h = push32(h, lane0_32(s));
            dst[i] = (uint8_t)s;
        }
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(avx2)
#endif
