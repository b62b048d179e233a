/* simd/: vectorised move-to-front (MTF) and inverse MTF with run-time CPU
 * dispatch. Plain C over byte buffers; knows nothing of frames or images.
 *
 * The transform (identical in every variant, byte for byte): for each block
 * independently the queue starts as 0, 1, ..., 255; for each input byte s,
 * output its position r in the queue (its rank) and move s to the front
 * (positions 0..r-1 shift back by one). Decoding takes ranks and returns the
 * bytes, inverting it exactly.
 *
 * All functions are thread-safe and never allocate; buffers need no
 * alignment. src and dst must not overlap. */
#ifndef GMTF_SIMD_H
#define GMTF_SIMD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One block: n bytes in, n bytes out. */
typedef void (*gmtf_simd_mtf_fn)(const uint8_t *src, uint8_t *dst, size_t n);
/* Two independent blocks in one call (each with its own fresh queue); the
 * lengths may differ and either may be 0. Equivalent to two one-block calls;
 * variants that interleave the blocks gain instruction-level parallelism. */
typedef void (*gmtf_simd_mtf2_fn)(const uint8_t *src0, uint8_t *dst0, size_t n0,
                                  const uint8_t *src1, uint8_t *dst1, size_t n1);

typedef struct gmtf_simd_mtf_variant {
    const char *name;       /* "bsc", "shelwien", "sse2", "avx2", "avx512", ... */
    const char *isa;        /* instruction sets it needs, for humans */
    int (*supported)(void); /* 1 when this CPU (and OS) can run it */
    gmtf_simd_mtf_fn encode;
    gmtf_simd_mtf_fn decode;
    gmtf_simd_mtf2_fn encode2;
    gmtf_simd_mtf2_fn decode2;
} gmtf_simd_mtf_variant;

/* Every variant compiled into this build (supported or not), in dispatch
 * preference order: the first supported one is the default. Stores the
 * array in *list and returns its length. */
size_t gmtf_simd_mtf_variants(const gmtf_simd_mtf_variant *const **list);

/* The variant called name (a leading "simd-" is accepted), or NULL when the
 * name is unknown or the CPU cannot run it. */
const gmtf_simd_mtf_variant *gmtf_simd_mtf_find(const char *name);

/* The variant the dispatched entry points use: the one named by the
 * environment variable GMTF_MTF when it names a supported variant, else the
 * first supported one in preference order. Decided once per process;
 * never NULL (the portable variants run everywhere). */
const gmtf_simd_mtf_variant *gmtf_simd_mtf_best(void);

/* Dispatched entry points: gmtf_simd_mtf_best()'s functions. */
void gmtf_simd_mtf_encode(const uint8_t *src, uint8_t *dst, size_t n);
void gmtf_simd_mtf_decode(const uint8_t *src, uint8_t *dst, size_t n);
void gmtf_simd_mtf_encode2(const uint8_t *src0, uint8_t *dst0, size_t n0, const uint8_t *src1,
                           uint8_t *dst1, size_t n1);
void gmtf_simd_mtf_decode2(const uint8_t *src0, uint8_t *dst0, size_t n0, const uint8_t *src1,
                           uint8_t *dst1, size_t n1);

#ifdef __cplusplus
}
#endif

#endif
