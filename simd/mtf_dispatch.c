/* The variant table, CPU checks and the dispatched entry points. */
#include "mtf_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int always(void)
{
    return 1;
}

#if GMTF_SIMD_X86
static int cpu_sse2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse2");
}
static int cpu_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi");
}
static int cpu_avx512bw(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
}
static int cpu_avx512vbmi2(void)
{
    return cpu_avx512bw() && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("popcnt");
}
#endif

#define VARIANT(v, isa_text, check)                                                                \
    static const gmtf_simd_mtf_variant variant_##v = {#v,                                          \
                                                      isa_text,                                    \
                                                      check,                                       \
                                                      gmtf_simd_mtf_encode_##v,                    \
                                                      gmtf_simd_mtf_decode_##v,                    \
                                                      gmtf_simd_mtf_encode2_##v,                   \
                                                      gmtf_simd_mtf_decode2_##v}

VARIANT(bsc, "C", always);
VARIANT(shelwien, "C (auto-vectorised)", always);
VARIANT(shelwien2, "C (auto-vectorised)", always);
#if GMTF_SIMD_X86
VARIANT(sse2, "SSE2", cpu_sse2);
VARIANT(avx2, "AVX2, BMI1", cpu_avx2);
VARIANT(avx512bw, "AVX-512F/BW, BMI1/2", cpu_avx512bw);
VARIANT(avx512, "AVX-512F/BW/VBMI/VBMI2, BMI1/2", cpu_avx512vbmi2);
VARIANT(avx512x2, "AVX-512F/BW/VBMI/VBMI2, BMI1/2", cpu_avx512vbmi2);
#endif

/* Preference order, best first; see docs/simd.md for the measurements. */
static const gmtf_simd_mtf_variant *const variants[] = {
#if GMTF_SIMD_X86
    &variant_avx512x2,  &variant_avx512,   &variant_avx512bw, &variant_avx2, &variant_sse2,
#endif
    &variant_shelwien2, &variant_shelwien, &variant_bsc,
};

size_t gmtf_simd_mtf_variants(const gmtf_simd_mtf_variant *const **list)
{
    *list = variants;
    return sizeof variants / sizeof variants[0];
}

const gmtf_simd_mtf_variant *gmtf_simd_mtf_find(const char *name)
{
    if (!name)
        return NULL;
    if (!strncmp(name, "simd-", 5))
        name += 5;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (!strcmp(variants[i]->name, name))
            return variants[i]->supported() ? variants[i] : NULL;
    return NULL;
}

static const gmtf_simd_mtf_variant *choose(void)
{
    const gmtf_simd_mtf_variant *v = gmtf_simd_mtf_find(getenv("GMTF_MTF"));
    if (v)
        return v;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (variants[i]->supported())
            return variants[i];
    return &variant_bsc; /* unreachable: bsc is always supported */
}

const gmtf_simd_mtf_variant *gmtf_simd_mtf_best(void)
{
    /* Decided once; racing first calls compute the same answer. */
    static _Atomic(const gmtf_simd_mtf_variant *) best;
    const gmtf_simd_mtf_variant *v = atomic_load_explicit(&best, memory_order_acquire);
    if (!v) {
        v = choose();
        atomic_store_explicit(&best, v, memory_order_release);
    }
    return v;
}

void gmtf_simd_mtf_encode(const uint8_t *src, uint8_t *dst, size_t n)
{
    gmtf_simd_mtf_best()->encode(src, dst, n);
}

void gmtf_simd_mtf_decode(const uint8_t *src, uint8_t *dst, size_t n)
{
    gmtf_simd_mtf_best()->decode(src, dst, n);
}

void gmtf_simd_mtf_encode2(const uint8_t *src0, uint8_t *dst0, size_t n0, const uint8_t *src1,
                           uint8_t *dst1, size_t n1)
{
    gmtf_simd_mtf_best()->encode2(src0, dst0, n0, src1, dst1, n1);
}

void gmtf_simd_mtf_decode2(const uint8_t *src0, uint8_t *dst0, size_t n0, const uint8_t *src1,
                           uint8_t *dst1, size_t n1)
{
    gmtf_simd_mtf_best()->decode2(src0, dst0, n0, src1, dst1, n1);
}
