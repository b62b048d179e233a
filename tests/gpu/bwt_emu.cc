// gpu/bwt_sort.cu built for the CPU (GMTF_BWT_EMU): the GPU suffix sort's
// algorithm as element loops, linked into test_gpu_bwt_emu.
#define GMTF_BWT_EMU 1
#include "bwt_sort.cu"
