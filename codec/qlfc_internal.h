/* Shared by the QLFC coders (qlfc.c, entropy_lanes.c, entropy_cm.c). */
#ifndef GMTF_QLFC_INTERNAL_H
#define GMTF_QLFC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

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

/* Method 2 under the method rule: -EXDEV when the block takes method 3. */
long gmtf_lanes_encode_or_defer(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);
/* gmtf_qlfc_encode's way for a block that method 2's rule deferred
 * (-EXDEV): the incompressibility rule, then method 3. */
long gmtf_qlfc_encode_deferred(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws);

size_t gmtf_lanes_workspace_size(size_t max_block);
size_t gmtf_lanes_decode_workspace_size(void);
size_t gmtf_cm_workspace_size(size_t max_block);
size_t gmtf_cm_decode_workspace_size(void);

#endif
