/* The device allocation behind every module's growing buffers (gpu/*.cu:
 * dev_reserve, gmtf_dbuf_reserve). CUDA builds only; the emulations keep
 * their own. */
#ifndef GMTF_DEV_ALLOC_CUH
#define GMTF_DEV_ALLOC_CUH

#include <cuda_runtime.h>
#include <stddef.h>

/* Makes *p a device buffer of at least bytes (the old one freed): an eighth
 * more when the device has it, so that batches of nearly the same size (a
 * filesystem's flushes) reuse it instead of freeing and making it again;
 * the exact size when that does not fit. On success *cap is the size; on
 * an error *p is NULL, *cap 0, and the error is returned. */
static inline cudaError_t gmtf_dev_regrow(void **p, size_t *cap, size_t bytes)
{
    if (*p)
        cudaFree(*p);
    *p = NULL;
    *cap = 0;
    size_t want = bytes + bytes / 8;
    cudaError_t e = cudaMalloc(p, want);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        want = bytes;
        e = cudaMalloc(p, want);
    }
    if (e != cudaSuccess) {
        *p = NULL;
        return e;
    }
    *cap = want;
    return cudaSuccess;
}

#endif
