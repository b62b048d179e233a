/* Run-head helpers shared by the SSE2 and AVX2 variants (plain C, so any
 * target may inline them). A byte equal to its predecessor has rank 0 and
 * leaves the queue alone, and a rank 0 decodes to the previous byte: BWT
 * output is 60-80% such bytes. The variants therefore run their dependency
 * chain over the run heads of a piece only, and these cheap linear passes
 * take the heads out and put the results back. */
#ifndef GMTF_SIMD_MTF_RUNS_H
#define GMTF_SIMD_MTF_RUNS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GMTF_RUNS_PIECE 4096 /* bytes per round; work buffers live on the stack */

/* The passes cost about 2-3 cycles a byte; a skipped byte saves the chain's
 * 10-30. Pieces with fewer repeats than this (random data) go direct. */
#define GMTF_RUNS_WORTH(repeats, n) ((repeats)*8 >= (n))

typedef struct {
    uint8_t in[GMTF_RUNS_PIECE + 1];  /* heads (encode) or nonzero ranks (decode) */
    uint8_t out[GMTF_RUNS_PIECE + 1]; /* their ranks (encode) or bytes (decode at +1) */
    uint16_t pos[GMTF_RUNS_PIECE];    /* encode: where each head sits in the piece */
} gmtf_runs_work;

/* Bytes of src[0..n) equal to their predecessor (prev before the first),
 * and zero bytes of src[0..n). In mtf_runs.c, compiled for the baseline
 * ISA: inlined into AVX-512 functions clang 14 crashes vectorising them. */
size_t gmtf_runs_repeats(const uint8_t *src, size_t n, unsigned prev);
size_t gmtf_runs_zeros(const uint8_t *src, size_t n);

/* Encode pass 1: the bytes of src[0..n) that differ from their predecessor
 * (*prev before the first), with their positions. Returns their count. */
static inline size_t gmtf_runs_heads(const uint8_t *src, size_t n, unsigned *prev,
                                     gmtf_runs_work *w)
{
    size_t j = 0;
    unsigned p = *prev;
    for (size_t i = 0; i < n; i++) { /* branch-free: write always, advance on change */
        unsigned c = src[i];
        w->in[j] = (uint8_t)c;
        w->pos[j] = (uint16_t)i;
        j += c != p;
        p = c;
    }
    *prev = p;
    return j;
}

/* Encode pass 3: zeros everywhere, the heads' ranks at their positions. */
static inline void gmtf_runs_scatter(uint8_t *dst, size_t n, size_t nh, const gmtf_runs_work *w)
{
    memset(dst, 0, n);
    for (size_t j = 0; j < nh; j++)
        dst[w->pos[j]] = w->out[j];
}

/* Decode pass 1: the nonzero ranks of src[0..n). Returns their count. */
static inline size_t gmtf_runs_nonzero(const uint8_t *src, size_t n, gmtf_runs_work *w)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        w->in[j] = src[i];
        j += src[i] != 0;
    }
    return j;
}

/* Decode pass 3: w->out[0] holds the byte before the piece and w->out[1..]
 * the decoded heads; each rank 0 repeats the byte before it. Leaves the
 * piece's last byte in w->out[0] for the next piece. */
static inline void gmtf_runs_fill(const uint8_t *src, uint8_t *dst, size_t n, size_t nh,
                                  gmtf_runs_work *w)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        j += src[i] != 0;
        dst[i] = w->out[j];
    }
    w->out[0] = w->out[nh];
}

#endif
