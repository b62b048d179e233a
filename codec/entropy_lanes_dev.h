/* Method 2 ("lanes") for device decoders: the CPU parses a payload's
 * header into gpu/gpu_lanes.h's structures, the device runs the lanes.
 * Internal to libgmtf. */
#ifndef GMTF_ENTROPY_LANES_DEV_H
#define GMTF_ENTROPY_LANES_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_lanes.h"

/* Parses the method 2 payload src[0..len) of a block of n bytes (ws: a
 * decoder workspace, gmtf_qlfc_decode_workspace_size) into its 32 lanes,
 * its tables (GMTF_GPU_LANES_NTABLES x GMTF_GPU_LANES_CUM) and selectors
 * (GMTF_GPU_LANES_MAX_GROUPS); the lanes' word streams as offsets from
 * in_base, the offset of src in the device's input. 0 or GMTF_E_CORRUPT
 * (what gmtf_qlfc_decode says of the same header). */
int gmtf_lanes_dev_setup(const uint8_t *src, size_t len, size_t n, void *ws, uint64_t in_base,
                         gmtf_gpu_lane *lanes, uint16_t *cum, uint8_t *sel);

/* Method 2's encoder around a device's scan and code steps (gpu_lanes.h),
 * block by block: the plan takes block n's scan (o: its pointers moved to
 * the block: rk + roff[32 b], keys + 2 roff[32 b], runs + 32 b, init + 8192 b, ninit +
 * 32 b, gstart + b GMTF_GPU_LANES_MAX_GROUPS, shared + 32 b x 12 x 16),
 * checks it, and chooses sets, selectors and tables as gmtf_lanes_encode
 * does (choose: the method rule, -EXDEV for method 3); it writes the
 * block's selectors (GMTF_GPU_LANES_MAX_GROUPS) and tables
 * (GMTF_GPU_LANES_NTABLES x GMTF_GPU_LANES_CUM) for the device. ws (an
 * encoder workspace) keeps the plan for the finish, which takes the 32
 * lane streams (streams, their lengths len; a 0 length: the lane is coded
 * here) and writes the payload: gmtf_lanes_encode's bytes, or its -ENOSPC.
 * -EIO: the scan broke a rule. */
long gmtf_lanes_enc_dev_plan(const uint8_t *bwt, size_t n, void *ws,
                             const gmtf_gpu_lanes_scan_out *o, int choose, uint8_t *sel,
                             uint16_t *cum);
/* The same plan from the device's statistics (gmtf_gpu_lanes_enc_scan_plan:
 * p and sel2 of block n; o as above without rk, keys and roff): the
 * header estimates, the choice of sets and the quantised tables here, the
 * same bytes as gmtf_lanes_enc_dev_plan. The workspace holds no ranks and
 * keys afterwards: finish with gmtf_lanes_enc_dev_save and
 * gmtf_lanes_enc_dev_finish_rec (-EAGAIN for a lane left to the host). */
long gmtf_lanes_enc_dev_plan_stats(size_t n, void *ws, const gmtf_gpu_lanes_scan_out *o,
                                   const gmtf_gpu_lanes_plan *p, const uint8_t *sel2, int choose,
                                   uint8_t *sel, uint16_t *cum);
long gmtf_lanes_enc_dev_finish(const uint8_t *bwt, size_t n, void *ws, const uint8_t *streams,
                               const uint32_t *len, uint8_t *dst, size_t cap);

/* The batch's way: a worker plans many blocks before their lanes come
 * back, so each plan is saved (gmtf_lanes_enc_dev_save, right after a
 * plan that returned 0; rec: gmtf_lanes_enc_dev_rec_size bytes) and its
 * block finished from the record in any encoder workspace (n: its size;
 * streams, len: its 32 lanes). -EAGAIN when a lane's length is 0 (the
 * device's room was too small: the caller codes the block another way). */
size_t gmtf_lanes_enc_dev_rec_size(void);
void gmtf_lanes_enc_dev_save(const void *ws, void *rec);
long gmtf_lanes_enc_dev_finish_rec(size_t n, void *ws, const void *rec, const uint8_t *streams,
                                   const uint32_t *len, uint8_t *dst, size_t cap);

#endif
