/* Zero-run coding of MTF ranks (stage function; see rank_coder.h).
 *
 * A maximal run of L >= 1 zero ranks becomes the digits of L in bijective
 * base 2, least significant first: GMTF_SYM_RUNA is digit 1, GMTF_SYM_RUNB
 * digit 2 (so L = sum d_i * 2^i, as in bzip2). A rank r >= 1 becomes the
 * symbol r + 1. A run of L zeros takes floor(log2(L + 1)) <= L symbols, so
 * the output never exceeds n symbols. The fused decoder in entropy.c writes
 * ranks directly; this stage exists for benchmarks and tests. */
#include <string.h>

#include "gmtf_codec.h"
#include "rank_coder.h"

size_t gmtf_zrle_encode(const uint8_t *ranks, size_t n, uint16_t *syms)
{
    size_t count = 0;
    size_t i = 0;
    while (i < n) {
        if (ranks[i] != 0) {
            syms[count++] = (uint16_t)(ranks[i] + 1);
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && ranks[i] == 0)
            i++;
        size_t run = i - start;
        while (run > 0) {
            /* Odd: digit 1 leaves an even remainder; even: digit 2. */
            if (run & 1) {
                syms[count++] = GMTF_SYM_RUNA;
                run = (run - 1) >> 1;
            } else {
                syms[count++] = GMTF_SYM_RUNB;
                run = (run - 2) >> 1;
            }
        }
    }
    return count;
}

int gmtf_zrle_decode(const uint16_t *syms, size_t count, uint8_t *ranks, size_t n)
{
    size_t pos = 0;
    size_t run = 0;    /* zeros pending from the digits seen so far */
    size_t weight = 1; /* place value of the next digit */
    for (size_t i = 0; i < count; i++) {
        unsigned s = syms[i];
        if (s <= GMTF_SYM_RUNB) {
            /* weight > n means the next digit already overflows the block;
             * checking it first keeps weight from overflowing. */
            if (weight > n)
                return GMTF_E_CORRUPT;
            run += (s + 1) * weight;
            if (run > n - pos)
                return GMTF_E_CORRUPT;
            weight <<= 1;
            continue;
        }
        if (s > 256 || pos + run >= n)
            return GMTF_E_CORRUPT;
        memset(ranks + pos, 0, run);
        pos += run;
        run = 0;
        weight = 1;
        ranks[pos++] = (uint8_t)(s - 1);
    }
    if (run != n - pos)
        return GMTF_E_CORRUPT;
    memset(ranks + pos, 0, run);
    return 0;
}
