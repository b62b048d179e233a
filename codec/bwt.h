/* Burrows-Wheeler transform: forward by libdivsufsort, inverse our own.
 * Internal to libgmtf (also used by gmtfc bench and the tests). */
#ifndef GMTF_BWT_H
#define GMTF_BWT_H

#include <stddef.h>
#include <stdint.h>

#include "gmtf_codec.h"

/* Most sample indexes a frame carries; the inverse uses them to follow
 * several independent chains at once (memory-level parallelism). */
#define GMTF_BWT_MAX_INDEXES 16

/* Number of sample indexes used for a block of n bytes. */
unsigned gmtf_bwt_index_count(size_t n);

/* Workspace bytes for blocks up to max_block (forward and inverse). */
size_t gmtf_bwt_workspace_size(size_t max_block);

/* Forward BWT of src[0..n) into dst[0..n) (1 <= n <= GMTF_BLOCK_MAX).
 * idx[0] is the primary index; idx[1..count) are the sample indexes
 * (count = gmtf_bwt_index_count(n)). Returns 0 or a negative code. */
int gmtf_bwt_forward(const uint8_t *src, uint8_t *dst, size_t n, uint32_t *idx, void *ws);

/* Inverse BWT. bwt and idx are untrusted: returns 0, or GMTF_E_CORRUPT when
 * an index is out of range; never reads or writes out of bounds. */
int gmtf_bwt_inverse(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx, void *ws);

/* ---- evenly spaced samples (frame version 2) ----------------------------
 * idx[k] is the row of the suffix that starts at k * step, for k = 0 ..
 * count - 1, count = ceil(n / step) (idx[0] is the primary index); the
 * inverse follows count chains of step bytes at once (the GPU: one thread
 * each). step = 2^gmtf_bwt_step_log2(n). */
#define GMTF_BWT_STEP_LOG2_SMALL 14 /* 16 KiB up to 256 KiB */
#define GMTF_BWT_STEP_LOG2_LARGE 15 /* 32 KiB above: 64 chains at 2 MiB */
#define GMTF_BWT_MAX_SAMPLES (GMTF_BLOCK_MAX >> GMTF_BWT_STEP_LOG2_LARGE) /* 512 */

unsigned gmtf_bwt_step_log2(size_t n);
/* ceil(n / step) */
unsigned gmtf_bwt_sample_count(size_t n);

/* Forward BWT as gmtf_bwt_forward, with gmtf_bwt_sample_count(n) samples
 * at multiples of 2^gmtf_bwt_step_log2(n) in idx. */
int gmtf_bwt_forward_step(const uint8_t *src, uint8_t *dst, size_t n, uint32_t *idx, void *ws);

/* Inverse with those samples; untrusted as gmtf_bwt_inverse. */
int gmtf_bwt_inverse_step(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx,
                          void *ws);

/* Inverse of part of a block, in two steps: gmtf_bwt_table_step checks the
 * samples (untrusted, as above) and builds the inverse's table in ws
 * (GMTF_E_CORRUPT or 0); gmtf_bwt_range_step then writes bytes
 * [off, off + len) of the block (off + len <= n) to dst[0..len), walking
 * only the chains that cover them: from the sample before off, so at most
 * one step (32 KiB) more than len. Any number of ranges can follow one
 * table. The whole block (off 0, len n) walks every chain at once, as
 * gmtf_bwt_inverse_step does. */
int gmtf_bwt_table_step(const uint8_t *bwt, size_t n, const uint32_t *idx, void *ws);

/* The byte counts of bwt[0..n) in four consecutive parts, parts[k] =
 * [start[k], start[k + 1]) with start[0] = 0 and start[4] = n, as an
 * entropy decoder can give them for free (method 2: lanes 8k..8k+7): the
 * table is then built without a counting pass over the block. Trusted
 * only as far as checked (gmtf_bwt_counts_check). */
typedef struct gmtf_bwt_counts {
    uint32_t start[5];
    uint32_t cnt[4][256];
} gmtf_bwt_counts;

/* 0 when the counts add up to each part's length (start ascending, n at
 * the end), else GMTF_E_CORRUPT. They must also be the counts of the
 * bytes: the caller's decoder made both. */
int gmtf_bwt_counts_check(const gmtf_bwt_counts *c, size_t n);

/* gmtf_bwt_table_step and gmtf_bwt_inverse_step with the counts given
 * (NULL: counted here). */
int gmtf_bwt_table_counted(const uint8_t *bwt, size_t n, const uint32_t *idx, void *ws,
                           const gmtf_bwt_counts *c);
int gmtf_bwt_inverse_counted(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx,
                             void *ws, const gmtf_bwt_counts *c);
void gmtf_bwt_range_step(const void *ws, size_t n, const uint32_t *idx, size_t off, size_t len,
                         uint8_t *dst);

/* Range decoding without the table (bwt.c, "range decoding without the
 * table"): gmtf_bwt_rank_table checks the samples and writes the byte
 * counts at every 4 KiB of bwt into ws (a quarter of a byte per byte;
 * gmtf_bwt_rank_fits says whether ws of max_block has room: n from
 * GMTF_BWT_RANK_MIN); gmtf_bwt_rank_range then writes bytes [off, off +
 * len) of the block, as gmtf_bwt_range_step does, from bwt (kept) and ws,
 * walking the chains that cover them backwards; gmtf_bwt_rank_to_table
 * turns ws into the table of gmtf_bwt_table_step (for the whole block, or
 * many ranges), using the counts for its parts. Any bytes give some
 * output and stay in bounds. */
#define GMTF_BWT_RANK_MIN (64u << 10)
#define GMTF_BWT_RANK_SHIFT 12 /* the counts' rows: every 2^12 bytes */
int gmtf_bwt_rank_fits(size_t n, size_t max_block);
int gmtf_bwt_rank_table(const uint8_t *bwt, size_t n, const uint32_t *idx, void *ws);
/* gmtf_bwt_rank_table's checks where ws holds its counts already (rows g =
 * 0..ceil(n / 2^12): the counts of each byte value in bwt[0, min(g 2^12,
 * n)), as gmtf_qlfc_decode_ranked writes them). */
int gmtf_bwt_rank_given(size_t n, const uint32_t *idx);
void gmtf_bwt_rank_range(const uint8_t *bwt, const void *ws, size_t n, const uint32_t *idx,
                         size_t off, size_t len, uint8_t *dst);
int gmtf_bwt_rank_to_table(const uint8_t *bwt, size_t n, void *ws);

#endif
