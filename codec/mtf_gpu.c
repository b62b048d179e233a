/* Registers the gpu/ MTF family in the codec's backend table. */
#include "gmtf_config.h"
#include "mtf.h"

const gmtf_mtf_backend *const *gmtf_mtf_gpu_list(size_t *count)
{
    *count = 0;
    return NULL;
}
