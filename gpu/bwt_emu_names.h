/* Names of gpu_bwt.h's functions in the CPU emulation of gpu/bwt_sort.cu
 * (built with GMTF_BWT_EMU for tests/gpu): included before gpu_bwt.h, so
 * the emulation links beside the real library without clashing. */
#ifndef GMTF_BWT_EMU_NAMES_H
#define GMTF_BWT_EMU_NAMES_H

#define gmtf_gpu_bwt_default_step gmtf_gpu_bwt_emu_default_step
#define gmtf_gpu_bwt_index_count gmtf_gpu_bwt_emu_index_count
#define gmtf_gpu_bwt_index_total gmtf_gpu_bwt_emu_index_total
#define gmtf_gpu_bwt_create gmtf_gpu_bwt_emu_create
#define gmtf_gpu_bwt_create_on gmtf_gpu_bwt_emu_create_on
#define gmtf_gpu_bwt_destroy gmtf_gpu_bwt_emu_destroy
#define gmtf_gpu_bwt_ok gmtf_gpu_bwt_emu_ok
#define gmtf_gpu_bwt_error gmtf_gpu_bwt_emu_error
#define gmtf_gpu_bwt_set_piece gmtf_gpu_bwt_emu_set_piece
#define gmtf_gpu_bwt_batch gmtf_gpu_bwt_emu_batch
#define gmtf_gpu_bwt_stage_upload gmtf_gpu_bwt_emu_stage_upload
#define gmtf_gpu_bwt_stage_run gmtf_gpu_bwt_emu_stage_run
#define gmtf_gpu_bwt_stage_download gmtf_gpu_bwt_emu_stage_download
#define gmtf_gpu_bwt_stage_device gmtf_gpu_bwt_emu_stage_device
#define gmtf_gpu_bwt_set_profile gmtf_gpu_bwt_emu_set_profile
#define gmtf_gpu_bwt_get_profile gmtf_gpu_bwt_emu_get_profile
#define gmtf_gpu_bwt_phase_name gmtf_gpu_bwt_emu_phase_name

#endif
