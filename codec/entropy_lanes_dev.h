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

#endif
