/* "sse2": the first 16 queue positions live in one XMM register, positions
 * 16..255 in a 240-byte tail in memory. Encode finds a byte with
 * PCMPEQB + PMOVMSKB + TZCNT over 16 positions at a time; decode extracts
 * position r with a PSADBW reduction (SSE2 has no byte shuffle). Both run
 * only over run heads (mtf_runs.h). Runs on every x86-64 CPU. */
#include "mtf_internal.h"
#include "mtf_runs.h"

#if GMTF_SIMD_X86
#include <immintrin.h>

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

/* [below[15], cur[0..14]] */
T_SSE2 static inline __m128i carry16(__m128i cur, __m128i below)
{
    return _mm_or_si128(_mm_slli_si128(cur, 1), _mm_srli_si128(below, 15));
}

/* The tail is queue positions 16..255 in 15 aligned chunks. Moves tail[idx]
 * out, shifts tail[0..idx-1] back by one and puts h[15] (evicted from the
 * head) first. Only aligned whole-chunk loads and stores, each chunk read
 * before it is written, so loads never straddle pending stores (a failed
 * store-to-load forward costs more than the whole shift). */
T_SSE2 static inline void tail_shift16(uint8_t *tail, unsigned idx, __m128i h)
{
    unsigned c = idx / 16;
    __m128i cur = _mm_load_si128((const __m128i *)(tail + 16 * c));
    __m128i below = c ? _mm_load_si128((const __m128i *)(tail + 16 * (c - 1))) : h;
    _mm_store_si128((__m128i *)(tail + 16 * c), sel16(le16(idx % 16), carry16(cur, below), cur));
    while (c-- > 0) {
        cur = below;
        below = c ? _mm_load_si128((const __m128i *)(tail + 16 * (c - 1))) : h;
        _mm_store_si128((__m128i *)(tail + 16 * c), carry16(cur, below));
    }
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

/* The whole queue in memory between pieces; while a piece runs, positions
 * 0..15 live in a register and q[16..255] is the tail. */
typedef struct {
    uint8_t q[256] __attribute__((aligned(64)));
} q16;

T_SSE2 static void q16_init(q16 *q)
{
    for (int i = 0; i < 256; i++)
        q->q[i] = (uint8_t)i;
}

T_SSE2 static inline void enc_core16(q16 *q, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t *tail = q->q + 16;
    __m128i h = _mm_load_si128((const __m128i *)q->q);
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
            tail_shift16(tail, idx, h);
            h = sh;
            dst[i] = (uint8_t)(16 + idx);
        }
    }
    _mm_store_si128((__m128i *)q->q, h);
}

T_SSE2 static inline void dec_core16(q16 *q, const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t *tail = q->q + 16;
    __m128i h = _mm_load_si128((const __m128i *)q->q);
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
            tail_shift16(tail, idx, h);
            h = push16(h, s);
            dst[i] = (uint8_t)s;
        }
    }
    _mm_store_si128((__m128i *)q->q, h);
}

T_SSE2 void gmtf_simd_mtf_encode_sse2(const uint8_t *src, uint8_t *dst, size_t n)
{
    q16 q;
    gmtf_runs_work w;
    unsigned prev = 0; /* the queue front: a leading 0 has rank 0 */
    q16_init(&q);
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_repeats(src + off, len, prev), len)) {
            enc_core16(&q, src + off, dst + off, len);
            prev = src[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_heads(src + off, len, &prev, &w);
        enc_core16(&q, w.in, w.out, nh);
        gmtf_runs_scatter(dst + off, len, nh, &w);
    }
}

T_SSE2 void gmtf_simd_mtf_decode_sse2(const uint8_t *src, uint8_t *dst, size_t n)
{
    q16 q;
    gmtf_runs_work w;
    q16_init(&q);
    w.out[0] = 0;
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_zeros(src + off, len), len)) {
            /* few rank 0s, so ranks are high: SSE2's 16 bytes a step lose
             * to libc's memmove (see docs/simd.md) */
            gmtf_simd_queue_decode(q.q, src + off, dst + off, len);
            w.out[0] = dst[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_nonzero(src + off, len, &w);
        dec_core16(&q, w.in, w.out + 1, nh);
        gmtf_runs_fill(src + off, dst + off, len, nh, &w);
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(sse2)
#endif
