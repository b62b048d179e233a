/* Build facts of gpu/, in plain C: the static library holds C as well as
 * CUDA objects, which keeps meson linking its dependents with the C linker. */
#include "gpu.h"

#ifndef GMTF_GPU_ARCH
#define GMTF_GPU_ARCH "sm_90 + compute_90 PTX"
#endif

const char *gmtf_gpu_build_info(void)
{
    return "CUDA kernels for " GMTF_GPU_ARCH ", cudart static";
}
