// gpu/lanes_enc.cu built for the CPU (GMTF_LANES_ENC_EMU): the GPU lane
// encoder's device code as loops, linked into the tests' emulation builds.
#define GMTF_LANES_ENC_EMU 1
#include "lanes_enc.cu"
