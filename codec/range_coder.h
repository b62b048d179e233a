/* The adaptive binary range coder the entropy coders share (entropy_*.c):
 * two-rate bit probabilities, an LZMA-style carry-propagating encoder and
 * its decoder, and equiprobable "direct" bits. Header-only: the per-bit
 * functions inline into their callers; the per-byte and per-block ones
 * (rc_shift_low, init, finish) are plain static functions, left out of line
 * as the compiler placed them (unused in a file that only includes this
 * header). Internal to libgmtf. */
#ifndef GMTF_RANGE_CODER_H
#define GMTF_RANGE_CODER_H

#include <stddef.h>
#include <stdint.h>

/* ---- adaptive probabilities -------------------------------------------- */

/* Probability of a 0 bit, 16-bit scale, as the mean of a fast and a slow
 * estimator: the fast one follows local changes, the slow one is precise
 * on stationary data. The slow one's rate starts high and falls with the
 * use count n, so a fresh context learns from its first few bits (small
 * blocks gain most). Both stay within [1, 65535], so the mean is never 0 or
 * 65536 and every decision keeps a nonzero share of the range. */
typedef struct {
    uint16_t fast, slow, n;
} prob2;

#define RATE_FAST 4
#define PROB_INIT 32768
#define COUNT_MAX 31
static const uint8_t rate_slow_of[COUNT_MAX + 1] = {
    2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7,
};

static inline uint32_t prob_get(const prob2 *p)
{
    return ((uint32_t)p->fast + p->slow) >> 1;
}

/* mask: all ones for a 1 bit, 0 for a 0 bit (branch-free for the decoder). */
static inline __attribute__((always_inline)) void prob_update(prob2 *p, uint32_t mask)
{
    uint32_t f = p->fast, s = p->slow, n = p->n;
    uint32_t rs = rate_slow_of[n], rf = rs < RATE_FAST ? rs : RATE_FAST;
    f += (((65536 - f) >> rf) & ~mask) - ((f >> rf) & mask);
    s += (((65536 - s) >> rs) & ~mask) - ((s >> rs) & mask);
    p->fast = (uint16_t)f;
    p->slow = (uint16_t)s;
    p->n = (uint16_t)(n + (n < COUNT_MAX));
}

/* ---- range encoder ----------------------------------------------------- */

/* LZMA-style carry-propagating range coder, 32-bit range, bytes out. The
 * first byte such a coder makes is always 0 and is not stored. */
typedef struct {
    uint64_t low;
    uint32_t range;
    uint8_t cache;
    uint64_t pending; /* 0xFF bytes waiting for a possible carry */
    int first;
    uint8_t *out, *end;
    int overflow;
} rc_enc;

static inline void rc_put(rc_enc *e, uint8_t b)
{
    if (e->out < e->end)
        *e->out++ = b;
    else
        e->overflow = 1;
}

static __attribute__((unused)) void rc_shift_low(rc_enc *e)
{
    if ((uint32_t)e->low < 0xFF000000u || (e->low >> 32) != 0) {
        uint8_t carry = (uint8_t)(e->low >> 32);
        if (!e->first)
            rc_put(e, (uint8_t)(e->cache + carry));
        e->first = 0;
        for (; e->pending; e->pending--)
            rc_put(e, (uint8_t)(0xFF + carry));
        e->cache = (uint8_t)(e->low >> 24);
    } else {
        e->pending++;
    }
    e->low = (e->low & 0x00FFFFFFu) << 8;
}

static __attribute__((unused)) void rc_enc_init(rc_enc *e, uint8_t *dst, size_t cap)
{
    e->low = 0;
    e->range = 0xFFFFFFFFu;
    e->cache = 0;
    e->pending = 0;
    e->first = 1;
    e->out = dst;
    e->end = dst + cap;
    e->overflow = 0;
}

static __attribute__((unused)) void rc_enc_finish(rc_enc *e)
{
    for (int i = 0; i < 5; i++)
        rc_shift_low(e);
}

static inline void enc_bit(rc_enc *e, prob2 *p, int bit)
{
    uint32_t bound = (e->range >> 16) * prob_get(p);
    if (bit) {
        e->low += bound;
        e->range -= bound;
    } else {
        e->range = bound;
    }
    prob_update(p, 0u - (uint32_t)bit);
    while (e->range < (1u << 24)) {
        e->range <<= 8;
        rc_shift_low(e);
    }
}

/* nb equiprobable bits in one step (two for nb > 16): the range splits into 2^nb
 * equal parts. One division in the decoder replaces nb dependent
 * decisions; the low bits of run lengths so coded are near-random
 * (modelled, they cost 0.97 bits each). Rank offsets stay modelled: coded
 * direct they cost canterbury 4-8% (kennedy.xls). */
#define DIRECT_MAX 16 /* keeps range >> nb >= 2^8, never 0 */

static inline void enc_direct_part(rc_enc *e, uint32_t v, unsigned nb)
{
    e->range >>= nb;
    e->low += (uint64_t)v * e->range;
    while (e->range < (1u << 24)) {
        e->range <<= 8;
        rc_shift_low(e);
    }
}

/* nb <= 31 bits, the high part first */
static inline void enc_direct(rc_enc *e, uint32_t v, unsigned nb)
{
    if (nb > DIRECT_MAX) {
        enc_direct_part(e, v >> DIRECT_MAX, nb - DIRECT_MAX);
        nb = DIRECT_MAX;
        v &= (1u << DIRECT_MAX) - 1;
    }
    enc_direct_part(e, v, nb);
}

/* ---- range decoder ----------------------------------------------------- */

typedef struct {
    uint32_t range, code;
    const uint8_t *in, *end;
    size_t over; /* bytes asked for beyond the end (read as 0) */
} rc_dec;

static inline uint8_t rc_get(rc_dec *d)
{
    if (d->in < d->end)
        return *d->in++;
    d->over++;
    return 0;
}

static __attribute__((unused)) void rc_dec_init(rc_dec *d, const uint8_t *src, size_t len)
{
    d->in = src;
    d->end = src + len;
    d->over = 0;
    d->range = 0xFFFFFFFFu;
    d->code = 0;
    for (int i = 0; i < 4; i++)
        d->code = (d->code << 8) | rc_get(d);
}

static inline __attribute__((always_inline)) int dec_bit(rc_dec *d, prob2 *p)
{
    uint32_t bound = (d->range >> 16) * prob_get(p);
    /* Masks rather than branches or ternaries (which compilers turn back
     * into branches): the bit is data, and mispredicting it is the main
     * cost of a decision. */
    uint32_t mask = 0u - (uint32_t)(d->code >= bound);
    d->code -= bound & mask;
    d->range = bound + ((d->range - 2 * bound) & mask);
    prob_update(p, mask);
    if (d->range < (1u << 24)) {
        d->range <<= 8;
        d->code = (d->code << 8) | rc_get(d);
        if (d->range < (1u << 24)) {
            d->range <<= 8;
            d->code = (d->code << 8) | rc_get(d);
        }
    }
    return (int)(mask & 1);
}

static inline __attribute__((always_inline)) uint32_t dec_direct_part(rc_dec *d, unsigned nb)
{
    /* range >= 2^24 between steps and nb <= DIRECT_MAX: never 0 */
    d->range >>= nb;
    uint32_t v = d->code / d->range;
    /* v >= 2^nb only from damaged input; clamp so code stays consistent */
    uint32_t top = (1u << nb) - 1;
    v = v < top ? v : top;
    d->code -= v * d->range;
    while (d->range < (1u << 24)) {
        d->range <<= 8;
        d->code = (d->code << 8) | rc_get(d);
    }
    return v;
}

static inline __attribute__((always_inline)) uint32_t dec_direct(rc_dec *d, unsigned nb)
{
    uint32_t hi = 0;
    if (nb > DIRECT_MAX) {
        hi = dec_direct_part(d, nb - DIRECT_MAX) << DIRECT_MAX;
        nb = DIRECT_MAX;
    }
    return hi | dec_direct_part(d, nb);
}

#endif
