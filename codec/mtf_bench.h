/* Benchmark hooks of MTF backends, apart from the ops table the codec
 * uses (mtf.h): for benchmark programs (gmtfc bench, bench/) only. */
#ifndef GMTF_MTF_BENCH_H
#define GMTF_MTF_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "mtf.h"

typedef struct gmtf_mtf_bench_ops {
    /* Runs the batch transform (decode = 0: MTF, 1: inverse) on data
     * already on the device: upload and download stay outside the timing,
     * *ms gets the device time; the output lands in dst for checking. */
    int (*kernel)(void *state, const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst,
                  int decode, double *ms);
} gmtf_mtf_bench_ops;

/* 1 when instance m can time its kernels alone (gmtf_mtf_bench_kernel). */
int gmtf_mtf_bench_has_kernel(const gmtf_mtf *m);
/* The kernel hook above; -ENOTSUP when the backend has none. */
int gmtf_mtf_bench_kernel(const gmtf_mtf *m, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, int decode, double *ms);

#endif
