/* Shared by the QLFC coders (qlfc.c, entropy_lanes.c, entropy_cm.c). */
#ifndef GMTF_QLFC_INTERNAL_H
#define GMTF_QLFC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define QLFC_PROB_BITS 12
#define QLFC_PROB_ONE (1u << QLFC_PROB_BITS)
#define MAX_SETS 8

/* Header model of method 2: adaptive bits (qbit) of the payload header. */
#define QLFC_HDR_LIST 0                    /* 2 x 32: list length, entries */
#define QLFC_HDR_SEL (QLFC_HDR_LIST + 64)  /* 2 x 8: selector MTF unary */
#define QLFC_HDR_EMPTY (QLFC_HDR_SEL + 16) /* 4: empty-table flags by kind */
#define QLFC_HDR_LEN (QLFC_HDR_EMPTY + 4)  /* 32: lane stream lengths */
#define QLFC_HDR_COUNT (QLFC_HDR_LEN + 32) /* count trees: kind x neighbour x 32 */
#define QLFC_COUNT_KINDS 76
#define QLFC_COUNT_NEIGH 14
#define QLFC_HDR_MODEL (QLFC_HDR_COUNT + QLFC_COUNT_KINDS * QLFC_COUNT_NEIGH * 32)

/* Runs of s[a..b) and their ranks (QLFC, run by run backwards): rk[k] is
 * the number of distinct bytes between run k and the next run of its byte,
 * or 0 when its byte does not come back; init gets the distinct bytes in
 * order of first occurrence, *ninit their count. Returns the run count. */
size_t gmtf_qlfc_ranks(const uint8_t *s, size_t a, size_t b, uint8_t *rk, uint8_t *init,
                       uint16_t *ninit);

/* Runs of a block, found 16 bytes at a time where SSE2 is there (the
 * runs of highly compressible blocks average 16 bytes or more, where
 * byte-by-byte loops were a fifth of method 3's encoder).
 * qlfc_run_end: the end of the run of s[i] (i < b): the least j in
 * (i, b] with j == b or s[j] != s[i]. */
static inline __attribute__((always_inline)) size_t qlfc_run_end(const uint8_t *s, size_t i,
                                                                 size_t b)
{
    uint8_t c = s[i];
#if defined(__SSE2__)
    __m128i cv = _mm_set1_epi8((char)c);
    for (i++; b - i >= 16; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        unsigned ne = 0xFFFFu ^ (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, cv));
        if (ne)
            return i + (unsigned)__builtin_ctz(ne);
    }
#else
    i++;
#endif
    while (i < b && s[i] == c)
        i++;
    return i;
}

/* The start of the run that ends at s[i - 1] (a < i): the least j in
 * [a, i) with s[j..i) all s[i - 1]. */
static inline __attribute__((always_inline)) size_t qlfc_run_start(const uint8_t *s, size_t a,
                                                                   size_t i)
{
    uint8_t c = s[i - 1];
#if defined(__SSE2__)
    __m128i cv = _mm_set1_epi8((char)c);
    for (i--; i - a >= 16; i -= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i - 16));
        unsigned ne = 0xFFFFu ^ (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, cv));
        if (ne) /* the last differing byte is at i - 16 + 31 - clz */
            return i - 16 + 32 - (unsigned)__builtin_clz(ne);
    }
#else
    i--;
#endif
    while (i > a && s[i - 1] == c)
        i--;
    return i;
}

/* Method 2 under the method rule: -EXDEV when the block takes method 3. */
long gmtf_lanes_encode_or_defer(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);

/* gmtf_adaptive_qlfc_encode run by run in one thread (entropy_cm.c: the
 * encoder's halves must make these bytes; tests compare the two). */
long gmtf_adaptive_qlfc_encode_serial(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap,
                                      void *ws);

/* gmtf_lanes_decode with simd = 0: the scalar decoder even where the CPU
 * has AVX-512 (tests and measurements compare the two); 1: the best. */
int gmtf_lanes_decode_isa(const uint8_t *src, size_t len, uint8_t *out, size_t n, void *ws,
                          int simd);
/* 1 when gmtf_lanes_decode_isa(..., 1) takes the AVX-512 path here (the
 * build has it, the CPU has it, GMTF_LANES_SIMD is not 0), else 0. */
int gmtf_lanes_decode_simd(void);
size_t gmtf_lanes_workspace_size(size_t max_block);
size_t gmtf_lanes_decode_workspace_size(void);
size_t gmtf_cm_workspace_size(size_t max_block);
size_t gmtf_cm_decode_workspace_size(void);

/* A run of byte c at o: two 8-byte stores for a run of at most 16 where
 * room (the bytes o may write: later runs of the same output write what is
 * past the run) allows, which beats a memset call; else memset. */
static inline __attribute__((always_inline)) void qlfc_put_run(uint8_t *o, unsigned c, size_t run,
                                                               size_t room)
{
    if (run <= 16 && room >= 16) {
        uint64_t v = 0x0101010101010101ull * c;
        memcpy(o, &v, 8);
        memcpy(o + 8, &v, 8);
    } else {
        memset(o, (int)c, run);
    }
}

/* The list's front byte c goes back to place r; places 1..r move up.
 * The list must have 48 bytes of room (256 in both coders). */
static inline __attribute__((always_inline)) void qlfc_list_reinsert(uint8_t *list, unsigned r,
                                                                     unsigned c)
{
#if defined(__SSE2__)
    if (r < 32) {
        /* places 0..31 (most ranks; a wider window measured no faster): place
     * i < r takes place i + 1, place r takes c */
        static const uint8_t idx[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                        11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                        22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
        __m128i rv = _mm_set1_epi8((char)r), cv = _mm_set1_epi8((char)c);
        __m128i i0 = _mm_loadu_si128((const __m128i *)idx);
        __m128i i1 = _mm_loadu_si128((const __m128i *)(idx + 16));
        __m128i c0 = _mm_loadu_si128((const __m128i *)list);
        __m128i u0 = _mm_loadu_si128((const __m128i *)(list + 1));
        __m128i c1 = _mm_loadu_si128((const __m128i *)(list + 16));
        __m128i u1 = _mm_loadu_si128((const __m128i *)(list + 17));
        __m128i lt0 = _mm_cmplt_epi8(i0, rv), eq0 = _mm_cmpeq_epi8(i0, rv);
        __m128i lt1 = _mm_cmplt_epi8(i1, rv), eq1 = _mm_cmpeq_epi8(i1, rv);
        __m128i v0 = _mm_or_si128(_mm_and_si128(lt0, u0), _mm_andnot_si128(lt0, c0));
        __m128i v1 = _mm_or_si128(_mm_and_si128(lt1, u1), _mm_andnot_si128(lt1, c1));
        v0 = _mm_or_si128(_mm_and_si128(eq0, cv), _mm_andnot_si128(eq0, v0));
        v1 = _mm_or_si128(_mm_and_si128(eq1, cv), _mm_andnot_si128(eq1, v1));
        _mm_storeu_si128((__m128i *)list, v0);
        _mm_storeu_si128((__m128i *)(list + 16), v1);
        return;
    }
#endif
    memmove(list, list + 1, r);
    list[r] = (uint8_t)c;
}

#endif
