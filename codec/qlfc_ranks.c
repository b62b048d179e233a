/* The QLFC rank transform (qlfc_internal.h) that methods 2 and 3 share:
 * below both coders and the dispatcher (qlfc.c). */
#include <string.h>

#include "qlfc_internal.h"

/* The number of runs of s[a..b). */
static size_t run_count(const uint8_t *s, size_t a, size_t b)
{
    if (a >= b)
        return 0;
    size_t k = 1, i = a + 1;
#if defined(__SSE2__)
    /* a run starts at i where s[i] != s[i - 1]: 16 places at a time */
    for (; b - i >= 16; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i y = _mm_loadu_si128((const __m128i *)(s + i - 1));
        k += (unsigned)__builtin_popcount(0xFFFFu ^
                                          (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, y)));
    }
#endif
    for (; i < b; i++)
        k += s[i] != s[i - 1];
    return k;
}

/* Moves c, at place p of the list, to the front; places 0..p-1 move up.
 * Returns p. The first 32 places (most ranks of compressible blocks) by
 * SSE2, without the calls of memchr and memmove. */
static inline unsigned list_to_front(uint8_t *list, unsigned c)
{
#if defined(__SSE2__)
    __m128i cv = _mm_set1_epi8((char)c);
    __m128i l0 = _mm_loadu_si128((const __m128i *)list);
    __m128i l1 = _mm_loadu_si128((const __m128i *)(list + 16));
    unsigned hit = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(l0, cv)) |
                   (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(l1, cv)) << 16;
    if (hit) {
        unsigned p = (unsigned)__builtin_ctz(hit);
        static const uint8_t idx[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                        11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                        22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
        /* place i in 1..p takes place i - 1; place 0 takes c */
        __m128i i0 = _mm_loadu_si128((const __m128i *)idx);
        __m128i i1 = _mm_loadu_si128((const __m128i *)(idx + 16));
        __m128i pv = _mm_set1_epi8((char)p);
        __m128i s0 = _mm_slli_si128(l0, 1);
        __m128i s1 = _mm_or_si128(_mm_slli_si128(l1, 1), _mm_srli_si128(l0, 15));
        __m128i le0 = _mm_cmpeq_epi8(_mm_min_epu8(i0, pv), i0);
        __m128i le1 = _mm_cmpeq_epi8(_mm_min_epu8(i1, pv), i1);
        _mm_storeu_si128((__m128i *)list,
                         _mm_or_si128(_mm_and_si128(le0, s0), _mm_andnot_si128(le0, l0)));
        _mm_storeu_si128((__m128i *)(list + 16),
                         _mm_or_si128(_mm_and_si128(le1, s1), _mm_andnot_si128(le1, l1)));
        list[0] = (uint8_t)c;
        return p;
    }
#endif
    /* c is in the list (it holds every byte): memchr's vector search
     * beats a loop of up to 255 compares on high-entropy blocks */
    unsigned p = (unsigned)((const uint8_t *)memchr(list, (int)c, 256) - list);
    memmove(list + 1, list, p);
    list[0] = (uint8_t)c;
    return p;
}

size_t gmtf_qlfc_ranks(const uint8_t *s, size_t a, size_t b, uint8_t *rk, uint8_t *init,
                       uint16_t *ninit)
{
    size_t k = run_count(s, a, b), runs = k;
    /* Backwards, a move-to-front list: a run's rank is its byte's place in
     * the list of bytes by next use. */
    uint8_t list[256], seen[256];
    for (unsigned i = 0; i < 256; i++) {
        list[i] = (uint8_t)i;
        seen[i] = 0;
    }
    unsigned nseen = 0;
    size_t i = b;
    while (i > a) {
        uint8_t c = s[i - 1];
        i = qlfc_run_start(s, a, i);
        unsigned p = list_to_front(list, c);
        rk[--k] = seen[c] ? (uint8_t)p : 0;
        if (!seen[c]) {
            seen[c] = 1;
            nseen++;
        }
    }
    /* the bytes seen are the front of the list, by first occurrence */
    memcpy(init, list, nseen);
    *ninit = (uint16_t)nseen;
    return runs;
}
