/* The MTF backend table: scalar, then whatever simd/ and gpu/ register. */
#include <pthread.h>
#include <string.h>

#include "codec_internal.h"

const gmtf_mtf_backend *const *gmtf_mtf_simd_list(size_t *count);
const gmtf_mtf_backend *const *gmtf_mtf_gpu_list(size_t *count);

static int always_available(void)
{
    return 1;
}

static const gmtf_mtf_backend mtf_scalar = {
    .name = "scalar",
    .available = always_available,
    .encode = gmtf_mtf_encode_scalar,
    .decode = gmtf_mtf_decode_scalar,
};

#define MTF_MAX_BACKENDS 64
static const gmtf_mtf_backend *mtf_table[MTF_MAX_BACKENDS];
static size_t mtf_count;
static pthread_once_t mtf_once = PTHREAD_ONCE_INIT;

static void mtf_add_list(const gmtf_mtf_backend *const *list, size_t n)
{
    for (size_t i = 0; i < n && mtf_count < MTF_MAX_BACKENDS; i++)
        if (list[i])
            mtf_table[mtf_count++] = list[i];
}

static void mtf_init(void)
{
    size_t n = 0;
    mtf_table[mtf_count++] = &mtf_scalar;
    const gmtf_mtf_backend *const *l = gmtf_mtf_simd_list(&n);
    mtf_add_list(l, n);
    n = 0;
    l = gmtf_mtf_gpu_list(&n);
    mtf_add_list(l, n);
}

size_t gmtf_mtf_backends(const gmtf_mtf_backend *const **list)
{
    pthread_once(&mtf_once, mtf_init);
    *list = mtf_table;
    return mtf_count;
}

static const gmtf_mtf_backend *mtf_lookup(const char *name)
{
    for (size_t i = 0; i < mtf_count; i++)
        if (strcmp(mtf_table[i]->name, name) == 0)
            return mtf_table[i];
    return NULL;
}

/* auto: the dispatched SIMD family when present, else scalar. The GPU is
 * used by batch calls only (see codec.c), where its batch hooks pay off. */
const gmtf_mtf_backend *gmtf_mtf_backend_find(const char *name)
{
    pthread_once(&mtf_once, mtf_init);
    if (!name || !*name || strcmp(name, "auto") == 0) {
        const gmtf_mtf_backend *b = mtf_lookup("simd");
        if (b && b->available())
            return b;
        return &mtf_scalar;
    }
    const gmtf_mtf_backend *b = mtf_lookup(name);
    if (!b || !b->available())
        return NULL;
    return b;
}

size_t gmtf_mtf_backend_count(void)
{
    pthread_once(&mtf_once, mtf_init);
    return mtf_count;
}

const char *gmtf_mtf_backend_name(size_t i, int *available)
{
    pthread_once(&mtf_once, mtf_init);
    if (i >= mtf_count)
        return NULL;
    if (available)
        *available = mtf_table[i]->available();
    return mtf_table[i]->name;
}
