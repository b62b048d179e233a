// gpu/lanes.cu built for the CPU (GMTF_LANES_EMU): the GPU lane decoder's
// device code as loops, linked into the tests' emulation builds.
#define GMTF_LANES_EMU 1
#include "lanes.cu"
