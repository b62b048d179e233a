/* Names of gpu_lanes.h's encoding functions in the CPU emulation of
 * gpu/lanes_enc.cu (built with GMTF_LANES_ENC_EMU for tests/gpu): included
 * before gpu_lanes.h, so the emulation links beside the real library. */
#ifndef GMTF_LANES_ENC_EMU_NAMES_H
#define GMTF_LANES_ENC_EMU_NAMES_H

#define gmtf_gpu_lanes_enc_create gmtf_gpu_lanes_enc_emu_create
#define gmtf_gpu_lanes_enc_destroy gmtf_gpu_lanes_enc_emu_destroy
#define gmtf_gpu_lanes_enc_error gmtf_gpu_lanes_enc_emu_error
#define gmtf_gpu_lanes_enc_kernel_ms gmtf_gpu_lanes_enc_emu_kernel_ms
#define gmtf_gpu_lanes_enc_scan gmtf_gpu_lanes_enc_emu_scan
#define gmtf_gpu_lanes_enc_code gmtf_gpu_lanes_enc_emu_code
#define gmtf_gpu_lanes_enc_scan_dev gmtf_gpu_lanes_enc_emu_scan_dev
#define gmtf_gpu_lanes_enc_tables gmtf_gpu_lanes_enc_emu_tables
#define gmtf_gpu_lanes_enc_code_dev gmtf_gpu_lanes_enc_emu_code_dev
#define gmtf_gpu_lanes_enc_scan_plan gmtf_gpu_lanes_enc_emu_scan_plan
#define gmtf_gpu_lanes_enc_plan_ms gmtf_gpu_lanes_enc_emu_plan_ms
#define gmtf_gpu_lanes_enc gmtf_gpu_lanes_enc_emu

#endif
