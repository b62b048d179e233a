/* Entropy coders of the BWT output for frame version 2 (docs/entropy.md):
 * QLFC (quantised local frequency coding, after bsc) models the BWT
 * output as runs of equal bytes: each run's length, and its rank, which
 * says how many distinct bytes come before the run's byte comes back. The
 * decoder knows a run's byte before it decodes the run, so every model is
 * conditioned on it.
 *
 *   method 2 "lanes": 32 independent lanes per block, semi-static tables
 *       (several sets, chosen per 4 KiB of output by selectors), rANS; a
 *       GPU warp or SIMD lanes decode one block in parallel;
 *   method 3 "adaptive": one adaptive binary coder with mixed context
 *       models over the whole block, for blocks under GMTF_QLFC_LANES_MIN.
 *
 * The method is a function of the block (gmtf_qlfc_method: its length and
 * one count of method 2's transform), so every encoder (CPU or GPU, any
 * thread count) makes the same bytes.
 * Internal to libgmtf; frame.c calls gmtf_qlfc_encode/decode. */
#ifndef GMTF_QLFC_H
#define GMTF_QLFC_H

#include <stddef.h>
#include <stdint.h>

#include "bwt.h"

#define GMTF_QLFC_METHOD_LANES 2
#define GMTF_QLFC_METHOD_ADAPTIVE 3
/* Method 4 "adaptive lanes": method 3's coder on up to
 * GMTF_QLFC_CM_LANES_MAX independent lanes of the block, each its own
 * model, list and stream (docs/entropy.md). Decoded by every reader since
 * 2026-11-24 (task ratio5); no encoder makes it unless built with
 * GMTF_QLFC_CM_LANES = L > 0 (a measuring build: then every block the rule
 * gives to method 2 takes method 4 with L lanes). Older readers reject its
 * payloads as corrupt (their dispatch knows methods 2 and 3 only). */
#define GMTF_QLFC_METHOD_CM_LANES 4
#define GMTF_QLFC_CM_LANES_MAX 8
#ifndef GMTF_QLFC_CM_LANES
#define GMTF_QLFC_CM_LANES 0
#endif
/* The method rule. Blocks under GMTF_QLFC_LANES_MIN take method 3: file
 * tails, small files and small-block settings get the adaptive method's
 * ratio, while a full block of gmtfc's default size (900 KiB) or of the
 * filesystem's (2 MiB) decodes fast and in parallel. Larger blocks take
 * method 2 unless at least 1/GMTF_QLFC_BIG_DIV of the runs of its 32 lanes
 * have ranks of GMTF_QLFC_BIG_RANK or more (binary tables such as
 * spreadsheets, where the semi-static model loses 10-50%), or its runs are
 * GMTF_QLFC_SPARSE bytes long or more on average (highly compressible
 * blocks: the adaptive method codes them 4-15% smaller, and its decoding
 * time goes by runs, so they still decode at 100 MB/s or more); those take
 * method 3 too. */
#ifndef GMTF_QLFC_LANES_MIN /* a build may move it, for comparisons */
#define GMTF_QLFC_LANES_MIN (900u << 10)
#endif
#define GMTF_QLFC_BIG_RANK 65
#define GMTF_QLFC_BIG_DIV 4
#ifndef GMTF_QLFC_SPARSE /* a build may move it, for comparisons */
#define GMTF_QLFC_SPARSE 16
#endif
#define GMTF_QLFC_NLANES 32
/* Blocks that method 3 would take are stored raw, uncoded, when every
 * segment of about GMTF_QLFC_RAW_SEG bytes has ranks of order-0 entropy
 * GMTF_QLFC_RAW_BITS/16 bits per byte or more (qlfc.c; docs/entropy.md,
 * "Method rule"). Blocks under GMTF_QLFC_RAW_MIN are always coded. */
#define GMTF_QLFC_RAW_MIN (16u << 10)
#define GMTF_QLFC_RAW_SEG (64u << 10)
#ifndef GMTF_QLFC_RAW_BITS     /* a build may move it, for comparisons */
#define GMTF_QLFC_RAW_BITS 127 /* 7.9375 bits */
#endif

/* The method gmtf_qlfc_encode uses for the BWT output bwt[0..n); ws: an
 * encoding workspace (gmtf_qlfc_workspace_size(n)). */
unsigned gmtf_qlfc_method(const uint8_t *bwt, size_t n, void *ws);

/* Scratch bytes for encoding blocks up to max_block bytes (about
 * 6.3 x max_block plus 0.5 MiB), and for decoding only (a fixed size). */
size_t gmtf_qlfc_workspace_size(size_t max_block);
size_t gmtf_qlfc_decode_workspace_size(void);

/* Encodes the BWT output bwt[0..n) (1 <= n <= GMTF_BLOCK_MAX, n no larger
 * than the workspace's max_block) into dst. Returns the payload length, or
 * -ENOSPC when it would exceed cap (the bytes never depend on cap) or when
 * the block looks incompressible (GMTF_QLFC_RAW_BITS): the frame stores
 * it raw. */
long gmtf_qlfc_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);

/* gmtf_qlfc_encode's way for a block that method 2's rule deferred
 * (-EXDEV), and for a block its caller wants in method 3 whatever the rule
 * says (gmtf_batch_encode_hint): the incompressibility rule, then method 3. */
long gmtf_qlfc_encode_deferred(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);

/* Decodes exactly n bytes of BWT output. src is untrusted: returns 0, or a
 * negative GMTF_E_* code; never reads past src + len, writes past
 * bwt + n, or loops without bound. ws: either workspace size. */
int gmtf_qlfc_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws);

/* gmtf_qlfc_decode, and on success the byte counts of bwt[0..n) in four
 * parts (bwt.h) for gmtf_bwt_table_counted, counted run by run as the
 * decoder writes them: the table then needs no counting pass. */
int gmtf_qlfc_decode_counted(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                             gmtf_bwt_counts *counts);

/* gmtf_qlfc_decode, and for method 2 (return 1) the rank counts of
 * gmtf_bwt_rank_table (bwt.h) in chk, taken run by run as the decoder
 * writes them: no counting pass. chk: ceil(n / 2^12) + 1 rows of 256.
 * Other methods decode only (return 0); a negative GMTF_E_* code. */
int gmtf_qlfc_decode_ranked(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                            uint32_t (*chk)[256]);
int gmtf_lanes_decode_ranked(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                             uint32_t (*chk)[256]);

/* The two methods apart, for tests and benchmarks: any n >= 1. */
long gmtf_lanes_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);
int gmtf_lanes_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws);
long gmtf_adaptive_qlfc_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);
int gmtf_adaptive_qlfc_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws);
int gmtf_lanes_decode_counted(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                              gmtf_bwt_counts *counts);
int gmtf_adaptive_qlfc_decode_counted(const uint8_t *src, size_t len, uint8_t *bwt, size_t n,
                                      void *ws, gmtf_bwt_counts *counts);
/* Method 4 with nl lanes (1..GMTF_QLFC_CM_LANES_MAX; fewer when the block
 * is too short for every lane to hold a byte). */
long gmtf_cm_lanes_encode(const uint8_t *bwt, size_t n, unsigned nl, uint8_t *dst, size_t cap,
                          void *ws);
int gmtf_cm_lanes_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws);
int gmtf_cm_lanes_decode_counted(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                                 gmtf_bwt_counts *counts);

#endif
