/* Names of gpu_lanes.h's functions in the CPU emulation of gpu/lanes.cu
 * (built with GMTF_LANES_EMU for tests/gpu): included before gpu_lanes.h,
 * so the emulation links beside the real library without clashing. */
#ifndef GMTF_LANES_EMU_NAMES_H
#define GMTF_LANES_EMU_NAMES_H

#define gmtf_gpu_lanes_create gmtf_gpu_lanes_emu_create
#define gmtf_gpu_lanes_create_on gmtf_gpu_lanes_emu_create_on
#define gmtf_gpu_lanes_destroy gmtf_gpu_lanes_emu_destroy
#define gmtf_gpu_lanes_ok gmtf_gpu_lanes_emu_ok
#define gmtf_gpu_lanes_error gmtf_gpu_lanes_emu_error
#define gmtf_gpu_lanes_decode gmtf_gpu_lanes_emu_decode

#define gmtf_gpu_lanes_decode_keep gmtf_gpu_lanes_emu_decode_keep
#define gmtf_gpu_lanes_out_device gmtf_gpu_lanes_emu_out_device
#define gmtf_gpu_lanes_decode_groups gmtf_gpu_lanes_emu_decode_groups
#define gmtf_gpu_lanes_group_event gmtf_gpu_lanes_emu_group_event
#define gmtf_gpu_lanes_group_wait gmtf_gpu_lanes_emu_group_wait

#endif
