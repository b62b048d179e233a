/* "avx2": the first 32 queue positions (the ranks BWT output mostly has)
 * live in one YMM register; positions 32..255 in a 224-byte tail in memory,
 * reached only on the slow path for rank >= 32. Decode rotates the head
 * with one PSHUFB when r < 16. Both run only over run heads (mtf_runs.h). */
#include "mtf_internal.h"
#include "mtf_runs.h"

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

/* [below[31], cur[0..30]] */
T_AVX2 static inline __m256i carry32(__m256i cur, __m256i below)
{
    __m256i t = _mm256_permute2x128_si256(cur, below, 0x03); /* [below.hi, cur.lo] */
    return _mm256_alignr_epi8(cur, t, 15);
}

/* Tail = positions 32..255 in 7 aligned chunks; as tail_shift16 in
 * mtf_sse2.c: h[31] goes first, aligned whole-chunk accesses only. */
T_AVX2 static inline void tail_shift32(uint8_t *tail, unsigned idx, __m256i h)
{
    unsigned c = idx / 32;
    __m256i cur = _mm256_load_si256((const __m256i *)(tail + 32 * c));
    __m256i below = c ? _mm256_load_si256((const __m256i *)(tail + 32 * (c - 1))) : h;
    _mm256_store_si256((__m256i *)(tail + 32 * c),
                       _mm256_blendv_epi8(cur, carry32(cur, below), le32(idx % 32)));
    while (c-- > 0) {
        cur = below;
        below = c ? _mm256_load_si256((const __m256i *)(tail + 32 * (c - 1))) : h;
        _mm256_store_si256((__m256i *)(tail + 32 * c), carry32(cur, below));
    }
}

/* Branch-free tail_shift32 for decode, where random ranks make the loop's
 * trip count unpredictable: all 7 chunks, each blended by how much of it
 * lies at or below idx (lanes of chunk i at or below idx - 32 i). */
T_AVX2 static inline void tail_shift32_all(uint8_t *tail, unsigned idx, __m256i h)
{
    __m256i below = h;
    for (int i = 0; i < 7; i++) {
        __m256i cur = _mm256_load_si256((const __m256i *)(tail + 32 * i));
        int k = (int)idx - 32 * i; /* clamp to -1 (none) .. 31 (all) */
        k = k < -1 ? -1 : k > 31 ? 31 : k;
        __m256i m = _mm256_loadu_si256((const __m256i *)(gmtf_simd_le_ramp + 63 - k));
        _mm256_store_si256((__m256i *)(tail + 32 * i),
                           _mm256_blendv_epi8(cur, carry32(cur, below), m));
        below = cur;
    }
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

typedef struct {
    __m256i h;                                      /* positions 0..31 */
    uint8_t tail[224] __attribute__((aligned(32))); /* positions 32..255 */
} q32;

T_AVX2 static void q32_init(q32 *q)
{
    q->h = _mm256_loadu_si256((const __m256i *)gmtf_simd_rot64[0]); /* row 0 = identity */
    for (int i = 0; i < 224; i++)
        q->tail[i] = (uint8_t)(32 + i);
}

T_AVX2 static inline void enc_core32(q32 *q, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t *tail = q->tail;
    __m256i h = q->h;
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
            tail_shift32(tail, idx, h);
            h = sh;
            dst[i] = (uint8_t)(32 + idx);
        }
    }
    q->h = h;
}

T_AVX2 static inline void dec_core32(q32 *q, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t *tail = q->tail;
    __m256i h = q->h;
    const __m128i lane0 = _mm_cvtsi32_si128(0xff);
    for (size_t i = 0; i < n; i++) {
        unsigned r = src[i];
        if (__builtin_expect(r < 16, 1)) {
            /* lanes 16..31 of the row are the identity within their lane */
            h = _mm256_shuffle_epi8(h, _mm256_loadu_si256((const __m256i *)gmtf_simd_rot64[r]));
            dst[i] = (uint8_t)_mm_cvtsi128_si32(_mm256_castsi256_si128(h));
        } else if (r < 32) {
            __m128i x =
                _mm_shuffle_epi8(_mm256_extracti128_si256(h, 1), _mm_set1_epi8((char)(r - 16)));
            x = _mm_and_si128(x, lane0);
            h = _mm256_blendv_epi8(h, push32(h, _mm256_zextsi128_si256(x)), le32(r));
            dst[i] = (uint8_t)_mm_cvtsi128_si32(x);
        } else {
            unsigned idx = r - 32, s = tail[idx];
            tail_shift32_all(tail, idx, h);
            h = push32(h, lane0_32(s));
            dst[i] = (uint8_t)s;
        }
    }
    q->h = h;
}

T_AVX2 void gmtf_simd_mtf_encode_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    q32 q;
    gmtf_runs_work w;
    unsigned prev = 0; /* the queue front: a leading 0 has rank 0 */
    q32_init(&q);
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_repeats(src + off, len, prev), len)) {
            enc_core32(&q, src + off, dst + off, len);
            prev = src[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_heads(src + off, len, &prev, &w);
        enc_core32(&q, w.in, w.out, nh);
        gmtf_runs_scatter(dst + off, len, nh, &w);
    }
}

T_AVX2 void gmtf_simd_mtf_decode_avx2(const uint8_t *src, uint8_t *dst, size_t n)
{
    q32 q;
    gmtf_runs_work w;
    q32_init(&q);
    w.out[0] = 0;
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_zeros(src + off, len), len)) {
            dec_core32(&q, src + off, dst + off, len);
            w.out[0] = dst[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_nonzero(src + off, len, &w);
        dec_core32(&q, w.in, w.out + 1, nh);
        gmtf_runs_fill(src + off, dst + off, len, nh, &w);
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(avx2)
#endif
