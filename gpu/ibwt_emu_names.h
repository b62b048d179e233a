/* Names of gpu_ibwt.h's functions in the CPU emulation of gpu/ibwt.cu
 * (built with GMTF_IBWT_EMU for tests/gpu): included before gpu_ibwt.h, so
 * the emulation links beside the real library without clashing. */
#ifndef GMTF_IBWT_EMU_NAMES_H
#define GMTF_IBWT_EMU_NAMES_H

#define gmtf_gpu_ibwt_create gmtf_gpu_ibwt_emu_create
#define gmtf_gpu_ibwt_create_on gmtf_gpu_ibwt_emu_create_on
#define gmtf_gpu_ibwt_destroy gmtf_gpu_ibwt_emu_destroy
#define gmtf_gpu_ibwt_ok gmtf_gpu_ibwt_emu_ok
#define gmtf_gpu_ibwt_error gmtf_gpu_ibwt_emu_error
#define gmtf_gpu_ibwt_set_piece gmtf_gpu_ibwt_emu_set_piece
#define gmtf_gpu_ibwt_check gmtf_gpu_ibwt_emu_check
#define gmtf_gpu_ibwt_batch gmtf_gpu_ibwt_emu_batch
#define gmtf_gpu_ibwt_last_ms gmtf_gpu_ibwt_emu_last_ms
#define gmtf_gpu_ibwt_last_repaired gmtf_gpu_ibwt_emu_last_repaired

#define gmtf_gpu_ibwt_batch_dev gmtf_gpu_ibwt_emu_batch_dev
#define gmtf_gpu_ibwt_batch_dev_start gmtf_gpu_ibwt_emu_batch_dev_start
#define gmtf_gpu_ibwt_wait gmtf_gpu_ibwt_emu_wait

#endif
