/* Shared by the entropy coders of libgmtf (docs/entropy.md):
 *   entropy.c           the method byte: choice on encode, dispatch on decode;
 *                       the workspace layout (rank_coder.h)
 *   entropy_adaptive.c  method 0, adaptive binary range coding of events
 *   entropy_rans.c      method 1, semi-static rANS over the same events
 * Both methods code the same events (a zero run of length L, or a rank r
 * in 1..255) under the same contexts, defined here. A method's functions
 * code the payload after the method byte, which entropy.c writes and
 * reads. Internal to libgmtf; nothing outside codec/ includes this. */
#ifndef GMTF_ENTROPY_INTERNAL_H
#define GMTF_ENTROPY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "range_coder.h"

/* ---- events and contexts ------------------------------------------------ */

#define RCTX 64   /* contexts for the run decision and rank buckets */
#define NBUCKET 9 /* rank buckets 1, 2, 3-4, ..., 129-255 */

/* Quantised rank for contexts: 0 (the event was a run), 1, 2, 3, 4-5,
 * 6-9, 10-19, 20+. */
static const uint8_t rank_q[256] = {
    0, 1, 2, 3, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, [20 ... 255] = 7,
};

/* What the contexts look at. r1: the previous rank, 0 when the previous
 * event was a run; k1: bit count of the last run; avg: running mean of the
 * quantised ranks of recent events (runs count 0), scaled by 16, which
 * tells a settled stretch of the block from a busy one. */
typedef struct {
    unsigned r1, k1, avg;
} history;

#define AVG_RATE 3 /* the mean follows about the last 8 events */

static inline void hist_run(history *h, unsigned k)
{
    h->r1 = 0;
    h->k1 = k;
    h->avg -= h->avg >> AVG_RATE;
}

static inline void hist_rank(history *h, unsigned r)
{
    h->r1 = r;
    h->avg += ((unsigned)rank_q[r] << 4 >> AVG_RATE) - (h->avg >> AVG_RATE);
}

/* avg in 8 steps of one quantised rank each */
static inline unsigned avg_q(const history *h)
{
    unsigned a = h->avg >> 4;
    return a < 7 ? a : 7;
}

static inline unsigned ctx_event(const history *h)
{
    return rank_q[h->r1] * 8 + avg_q(h);
}

/* Rank r in 1..255 -> bucket b (0..8); bucket b >= 2 covers
 * [2^(b-1) + 1, 2^b], the last one stops at 255. */
static inline unsigned rank_bucket(unsigned r)
{
    return r <= 2 ? r - 1 : 32 - (unsigned)__builtin_clz(r - 1);
}

/* ---- workspace ---------------------------------------------------------- */

/* Every region of the workspace (rank_coder.h) starts on this boundary. */
#define WS_ALIGN 64
#define ALIGN_UP(x) (((x) + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1))

/* ---- method 0: adaptive (entropy_adaptive.c) ------------------------------ */

/* Bytes of the method's model, the only workspace it uses (ws below). */
size_t gmtf_adaptive_ws_size(void);
/* Codes n ranks into dst (cap bytes). Returns the byte count, -ENOSPC
 * when it does not fit, -EINVAL for runs beyond 2^31. */
long gmtf_adaptive_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws);
/* The same from zero-run symbols (rank_coder.h's rules; -EINVAL when
 * broken): the same bytes for the same ranks. */
long gmtf_adaptive_encode_syms(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap,
                               void *ws);
/* Decodes exactly n ranks (or count symbols) from untrusted src[0..len).
 * Returns 0 or GMTF_E_CORRUPT. */
int gmtf_adaptive_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws);
int gmtf_adaptive_decode_syms(const uint8_t *src, size_t len, uint16_t *syms, size_t count,
                              void *ws);

/* ---- method 1: semi-static rANS (entropy_rans.c) ------------------------- */

#define RANS_MIN_N (64u << 10) /* smaller blocks: method 0 only */

/* Bytes of the method's tables (decoder and encoder), and of the encoder's
 * scratch for blocks of n bytes. */
size_t gmtf_rans_ws_size(void);
size_t gmtf_rans_scratch_size(size_t n);

/* An encoded payload, still in the workspace: the count stream b and the
 * rANS stream a. */
typedef struct {
    size_t len_b, len_a;
    const uint8_t *b, *a;
} gmtf_rans_out;

/* Codes n ranks (n <= GMTF_BLOCK_MAX) in the workspace ws, which holds the
 * tables and, right behind them, the encoder scratch for n; returns the
 * payload size or -ENOSPC. gmtf_rans_emit then writes the payload to dst. */
long gmtf_rans_encode(const uint8_t *ranks, size_t n, void *ws, gmtf_rans_out *out);
void gmtf_rans_emit(const gmtf_rans_out *out, uint8_t *dst);
/* Decodes exactly n ranks (or count symbols) from untrusted src[0..len).
 * Returns 0 or GMTF_E_CORRUPT. */
int gmtf_rans_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws);
int gmtf_rans_decode_syms(const uint8_t *src, size_t len, uint16_t *syms, size_t count, void *ws);

#endif
