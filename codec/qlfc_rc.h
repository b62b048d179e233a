/* Binary range coder for the QLFC coders (entropy_lanes.c, entropy_cm.c):
 * the payload headers of method 2 and the whole of method 3.
 *
 * LZMA-style carry-propagating coder: 32-bit range, 33-bit low, bytes out;
 * a decision splits the range at (range >> 12) * p1, p1 = P(bit = 1) in
 * 1..4095 on a 12-bit scale. The first byte such an encoder makes is
 * always 0 and is not stored; the encoder ends with 5 shifts, and the
 * decoder of a valid stream reads exactly its bytes (reads past the end
 * give 0 and are counted in `over`). Everything is integer arithmetic, so
 * encoder and decoder agree on every platform. Internal to libgmtf. */
#ifndef GMTF_QLFC_RC_H
#define GMTF_QLFC_RC_H

#include <stddef.h>
#include <stdint.h>

#define QRC_BITS 12
#define QRC_ONE (1u << QRC_BITS)
#define QRC_TOP (1u << 24)

typedef struct {
    uint64_t low;
    uint32_t range;
    uint8_t cache;
    int first;
    uint64_t pending; /* 0xFF bytes waiting for a carry */
    uint8_t *out, *end;
    int overflow; /* the output did not fit; the bytes are then invalid */
} qrc_enc;

typedef struct {
    uint32_t range, code;
    const uint8_t *in, *end;
    size_t over; /* bytes asked for beyond the end */
} qrc_dec;

static inline void qrc_put(qrc_enc *e, uint8_t b)
{
    if (e->out < e->end)
        *e->out++ = b;
    else
        e->overflow = 1;
}

static inline void qrc_shift_low(qrc_enc *e)
{
    if ((uint32_t)e->low < 0xFF000000u || (e->low >> 32) != 0) {
        uint8_t carry = (uint8_t)(e->low >> 32);
        if (!e->first)
            qrc_put(e, (uint8_t)(e->cache + carry));
        e->first = 0;
        for (; e->pending; e->pending--)
            qrc_put(e, (uint8_t)(0xFF + carry));
        e->cache = (uint8_t)(e->low >> 24);
    } else {
        e->pending++;
    }
    e->low = (e->low & 0x00FFFFFFu) << 8;
}

static inline void qrc_enc_init(qrc_enc *e, uint8_t *dst, size_t cap)
{
    e->low = 0;
    e->range = 0xFFFFFFFFu;
    e->cache = 0;
    e->first = 1;
    e->pending = 0;
    e->out = dst;
    e->end = dst + cap;
    e->overflow = 0;
}

/* Returns the byte count, or -1 when the output did not fit. */
static inline long qrc_enc_finish(qrc_enc *e, const uint8_t *start)
{
    for (int i = 0; i < 5; i++)
        qrc_shift_low(e);
    return e->overflow ? -1 : (long)(e->out - start);
}

/* p1 = P(bit = 1) in [1, 4095]. */
static inline void qrc_encode(qrc_enc *e, uint32_t p1, int bit)
{
    uint32_t bound = (e->range >> QRC_BITS) * p1;
    if (bit) {
        e->range = bound;
    } else {
        e->low += bound;
        e->range -= bound;
    }
    while (e->range < QRC_TOP) {
        e->range <<= 8;
        qrc_shift_low(e);
    }
}

/* nb <= 16 equiprobable bits */
static inline void qrc_encode_direct(qrc_enc *e, uint32_t v, unsigned nb)
{
    e->range >>= nb;
    e->low += (uint64_t)v * e->range;
    while (e->range < QRC_TOP) {
        e->range <<= 8;
        qrc_shift_low(e);
    }
}

static inline uint8_t qrc_get(qrc_dec *d)
{
    if (d->in < d->end)
        return *d->in++;
    d->over++;
    return 0;
}

static inline void qrc_dec_init(qrc_dec *d, const uint8_t *src, size_t len)
{
    d->in = src;
    d->end = src + len;
    d->over = 0;
    d->range = 0xFFFFFFFFu;
    d->code = 0;
    for (int i = 0; i < 4; i++)
        d->code = d->code << 8 | qrc_get(d);
}

/* Consumed exactly: every byte read, none beyond. */
static inline int qrc_dec_done(const qrc_dec *d)
{
    return d->over == 0 && d->in == d->end;
}

static inline __attribute__((always_inline)) int qrc_decode(qrc_dec *d, uint32_t p1)
{
    uint32_t bound = (d->range >> QRC_BITS) * p1;
    /* bit 1 is the lower part [0, bound) */
    uint32_t mask = 0u - (uint32_t)(d->code < bound); /* all ones for a 1 */
    d->code -= ~mask & bound;
    d->range = (bound & mask) | ((d->range - bound) & ~mask);
    while (d->range < QRC_TOP) {
        d->range <<= 8;
        d->code = d->code << 8 | qrc_get(d);
    }
    return (int)(mask & 1);
}

static inline uint32_t qrc_decode_direct(qrc_dec *d, unsigned nb)
{
    d->range >>= nb; /* range >= 2^24, nb <= 16: never 0 */
    uint32_t v = d->code / d->range;
    uint32_t top = (1u << nb) - 1;
    v = v < top ? v : top; /* v > top only from damaged input */
    d->code -= v * d->range;
    while (d->range < QRC_TOP) {
        d->range <<= 8;
        d->code = d->code << 8 | qrc_get(d);
    }
    return v;
}

/* ---- adaptive bits for headers ------------------------------------------ */

/* 16-bit P(1) with a rate that starts fast and settles (count in n). */
typedef struct {
    uint16_t p, n;
} qbit;

static inline void qbit_init(qbit *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        b[i].p = 32768;
        b[i].n = 0;
    }
}

static inline uint32_t qbit_p12(const qbit *b)
{
    uint32_t p = (uint32_t)b->p >> 4;
    return p < 1 ? 1 : p > QRC_ONE - 1 ? QRC_ONE - 1 : p;
}

static inline void qbit_update(qbit *b, int bit)
{
    unsigned rate = b->n < 2 ? 2 : b->n < 6 ? 3 : b->n < 14 ? 4 : 5;
    if (bit)
        b->p = (uint16_t)(b->p + ((65535u - b->p) >> rate));
    else
        b->p = (uint16_t)(b->p - (b->p >> rate));
    if (b->n < 255)
        b->n++;
}

static inline void qbit_enc(qrc_enc *e, qbit *b, int bit)
{
    qrc_encode(e, qbit_p12(b), bit);
    qbit_update(b, bit);
}

static inline int qbit_dec(qrc_dec *d, qbit *b)
{
    int bit = qrc_decode(d, qbit_p12(b));
    qbit_update(b, bit);
    return bit;
}

/* Elias-gamma of v >= 1 (v < 2^31): the bit count k - 1 in unary with
 * adaptive bits u[0..31], the k - 1 bits below the leading one direct. */
#define QGAMMA_BITS 32
static inline void qgamma_enc(qrc_enc *e, qbit *u, uint32_t v)
{
    unsigned k = 31 - (unsigned)__builtin_clz(v);
    for (unsigned i = 0; i < k; i++)
        qbit_enc(e, &u[i], 1);
    qbit_enc(e, &u[k], 0);
    if (k > 16) {
        qrc_encode_direct(e, (v >> 16) & ((1u << (k - 16)) - 1), k - 16);
        k = 16;
    }
    if (k)
        qrc_encode_direct(e, v & ((1u << k) - 1), k);
}

/* Returns v, or 0 when the bit count exceeds max_k (damaged input). */
static inline uint32_t qgamma_dec(qrc_dec *d, qbit *u, unsigned max_k)
{
    unsigned k = 0;
    while (qbit_dec(d, &u[k])) {
        if (++k > max_k)
            return 0;
    }
    uint32_t v = 1;
    if (k > 16) {
        v = v << (k - 16) | qrc_decode_direct(d, k - 16);
        k = 16;
    }
    if (k)
        v = v << k | qrc_decode_direct(d, k);
    return v;
}

#endif
