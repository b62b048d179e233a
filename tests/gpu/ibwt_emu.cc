// gpu/ibwt.cu built for the CPU (GMTF_IBWT_EMU): the GPU inverse BWT's
// steps as element loops, linked into test_gpu_ibwt_emu.
#define GMTF_IBWT_EMU 1
#include "ibwt.cu"
