/* Registers the simd/ MTF family in the codec's backend table: "simd" (the
 * variant simd/ dispatches to on this CPU, GMTF_MTF honoured) and
 * "simd-NAME" for every variant compiled in. The batch hooks hand blocks to
 * the variant two at a time, so interleaving variants (avx512x2) overlap
 * the two blocks' dependency chains. */
#include <stdio.h>

#include "gmtf_simd.h"
#include "mtf.h"

#define SIMD_MAX 16 /* slots; simd/ has 8 variants today */

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

/* Slot k serves variant k of simd/'s list. */
static const gmtf_simd_mtf_variant *slot_variant[SIMD_MAX];

/* clang-format off */
#define SLOT(k)                                                                           \
    static int batch_encode_##k(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d) \
    {                                                                                     \
        return batch_run(slot_variant[k], 0, s, o, c, d);                                 \
    }                                                                                     \
    static int batch_decode_##k(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d) \
    {                                                                                     \
        return batch_run(slot_variant[k], 1, s, o, c, d);                                 \
    }
SLOT(0) SLOT(1) SLOT(2) SLOT(3) SLOT(4) SLOT(5) SLOT(6) SLOT(7)
SLOT(8) SLOT(9) SLOT(10) SLOT(11) SLOT(12) SLOT(13) SLOT(14) SLOT(15)
    /* clang-format on */

    static int batch_encode_best(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d)
{
    return batch_run(gmtf_simd_mtf_best(), 0, s, o, c, d);
}

static int batch_decode_best(const uint8_t *s, const uint64_t *o, size_t c, uint8_t *d)
{
    return batch_run(gmtf_simd_mtf_best(), 1, s, o, c, d);
}

#define HOOKS(k)                                                                                   \
    {                                                                                              \
        batch_encode_##k, batch_decode_##k                                                         \
    }
static const struct {
    int (*enc)(const uint8_t *, const uint64_t *, size_t, uint8_t *);
    int (*dec)(const uint8_t *, const uint64_t *, size_t, uint8_t *);
} slot_hooks[SIMD_MAX] = {HOOKS(0),  HOOKS(1),  HOOKS(2),  HOOKS(3), HOOKS(4),  HOOKS(5),
                          HOOKS(6),  HOOKS(7),  HOOKS(8),  HOOKS(9), HOOKS(10), HOOKS(11),
                          HOOKS(12), HOOKS(13), HOOKS(14), HOOKS(15)};

static int simd_available(void)
{
    return 1; /* the dispatched variant always exists (portable fallbacks) */
}

static gmtf_mtf_backend backends[SIMD_MAX + 1];
static const gmtf_mtf_backend *backend_list[SIMD_MAX + 1];
static char backend_names[SIMD_MAX][40];

/* Called once, under the codec table's pthread_once. */
const gmtf_mtf_backend *const *gmtf_mtf_simd_list(size_t *count)
{
    const gmtf_simd_mtf_variant *const *v;
    size_t nv = gmtf_simd_mtf_variants(&v), n = 0;
    backends[n] = (gmtf_mtf_backend){
        .name = "simd",
        .available = simd_available,
        .encode = gmtf_simd_mtf_encode,
        .decode = gmtf_simd_mtf_decode,
        .batch_encode = batch_encode_best,
        .batch_decode = batch_decode_best,
    };
    backend_list[n] = &backends[n];
    n++;
    for (size_t i = 0; i < nv && i < SIMD_MAX; i++, n++) {
        slot_variant[i] = v[i];
        snprintf(backend_names[i], sizeof backend_names[i], "simd-%s", v[i]->name);
        backends[n] = (gmtf_mtf_backend){
            .name = backend_names[i],
            .available = v[i]->supported,
            .encode = v[i]->encode,
            .decode = v[i]->decode,
            .batch_encode = slot_hooks[i].enc,
            .batch_decode = slot_hooks[i].dec,
        };
        backend_list[n] = &backends[n];
    }
    *count = n;
    return backend_list;
}
