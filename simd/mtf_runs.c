/* Counting helpers of mtf_runs.h; see there. */
#include "mtf_runs.h"

size_t gmtf_runs_repeats(const uint8_t *src, size_t n, unsigned prev)
{
    if (n == 0)
        return 0;
    size_t z = src[0] == prev;
    for (size_t i = 1; i < n; i++)
        z += src[i] == src[i - 1];
    return z;
}

size_t gmtf_runs_zeros(const uint8_t *src, size_t n)
{
    size_t z = 0;
    for (size_t i = 0; i < n; i++)
        z += src[i] == 0;
    return z;
}
