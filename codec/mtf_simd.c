/* Registers the simd/ MTF family in the codec's backend table: "simd" (the
 * variant simd/ dispatches to on this CPU, GMTF_MTF honoured) and
 * "simd-NAME" for every variant compiled in. An instance's state is its
 * variant (gmtf_simd_mtf_variant), chosen at init for "simd". The batch
 * hooks hand blocks to the variant two at a time, so interleaving variants
 * (avx512x2) overlap the two blocks' dependency chains. */
#include <stdio.h>

#include "gmtf_simd.h"
#include "mtf.h"

#define SIMD_MAX 16 /* variants registered; simd/ has 8 today */

static int simd_available(const gmtf_mtf_backend *b)
{
    const gmtf_simd_mtf_variant *v = b->variant;
    return v ? v->supported() : 1; /* the dispatched one always exists */
}

/* "simd" resolves to the dispatched variant when an instance is made. */
static int simd_init(const gmtf_mtf_backend *b, void **state)
{
    *state = (void *)(b->variant ? b->variant : gmtf_simd_mtf_best());
    return 0;
}

static void simd_encode(void *state, const uint8_t *src, uint8_t *dst, size_t n)
{
    const gmtf_simd_mtf_variant *v = state;
    v->encode(src, dst, n);
}

static void simd_decode(void *state, const uint8_t *src, uint8_t *dst, size_t n)
{
    const gmtf_simd_mtf_variant *v = state;
    v->decode(src, dst, n);
}

static int batch_run(const gmtf_simd_mtf_variant *v, int dec, const uint8_t *src,
                     const uint64_t *off, size_t count, uint8_t *dst)
{
    gmtf_simd_mtf_fn one = dec ? v->decode : v->encode;
    gmtf_simd_mtf2_fn two = dec ? v->decode2 : v->encode2;
    size_t i = 0;
    for (; i + 1 < count; i += 2)
        two(src + off[i], dst + off[i], off[i + 1] - off[i], src + off[i + 1], dst + off[i + 1],
            off[i + 2] - off[i + 1]);
    if (i < count)
        one(src + off[i], dst + off[i], off[i + 1] - off[i]);
    return 0;
}

static int simd_batch_encode(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                             uint8_t *dst)
{
    return batch_run(state, 0, src, off, count, dst);
}

static int simd_batch_decode(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                             uint8_t *dst)
{
    return batch_run(state, 1, src, off, count, dst);
}

static gmtf_mtf_backend backends[SIMD_MAX + 1];
static const gmtf_mtf_backend *backend_list[SIMD_MAX + 1];
static char backend_names[SIMD_MAX][40];

/* Called once, under the codec table's pthread_once. */
const gmtf_mtf_backend *const *gmtf_mtf_simd_list(size_t *count)
{
    const gmtf_simd_mtf_variant *const *v;
    size_t nv = gmtf_simd_mtf_variants(&v), n = 0;
    const gmtf_mtf_backend ops = {
        .available = simd_available,
        .init = simd_init, /* the variant is static: nothing to free */
        .encode = simd_encode,
        .decode = simd_decode,
        .batch_encode = simd_batch_encode,
        .batch_decode = simd_batch_decode,
    };
    backends[n] = ops;
    backends[n].name = "simd";
    backend_list[n] = &backends[n];
    n++;
    for (size_t i = 0; i < nv && i < SIMD_MAX; i++, n++) {
        snprintf(backend_names[i], sizeof backend_names[i], "simd-%s", v[i]->name);
        backends[n] = ops;
        backends[n].name = backend_names[i];
        backends[n].variant = v[i];
        backend_list[n] = &backends[n];
    }
    *count = n;
    return backend_list;
}
