/* gpu/: entry points for benchmark programs only (bench/), apart from the
 * API the codec uses (gpu.h). Same error convention as gpu.h. */
#ifndef GMTF_GPU_BENCH_H
#define GMTF_GPU_BENCH_H

#include <stddef.h>

#include "gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* k-selection against sorting: n random keys of the type generated on the
 * device; times selection of several k and radix sort (CUB) plus pick of
 * the same k. *select_ms and *sort_ms get medians over reps; *agree is 1
 * when every selected key equalled the sorted pick. 0, -EINVAL, -ENODEV,
 * -ENOMEM, -EIO. */
int gmtf_gpu_kselect_bench(gmtf_gpu_ctx *ctx, gmtf_gpu_key type, size_t n, int reps,
                           double *select_ms, double *sort_ms, int *agree);

#ifdef __cplusplus
}
#endif

#endif
