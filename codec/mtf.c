/* The MTF backend table: scalar, then whatever simd/ and gpu/ register. */
#include <pthread.h>
#include <string.h>

#include "mtf.h"

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

/* The scalar loop behind batch hooks: runs the staged batch path (the one
 * the GPU takes) on any machine, so CI tests it. Never chosen by auto. */
static int scalar_batch_encode(const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst)
{
    for (size_t i = 0; i < count; i++)
        gmtf_mtf_encode_scalar(src + off[i], dst + off[i], off[i + 1] - off[i]);
    return 0;
}

static int scalar_batch_decode(const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst)
{
    for (size_t i = 0; i < count; i++)
        gmtf_mtf_decode_scalar(src + off[i], dst + off[i], off[i + 1] - off[i]);
    return 0;
}

static const gmtf_mtf_backend mtf_scalar_batch = {
    .name = "scalar-batch",
    .available = always_available,
    .encode = gmtf_mtf_encode_scalar,
    .decode = gmtf_mtf_decode_scalar,
    .batch_encode = scalar_batch_encode,
    .batch_decode = scalar_batch_decode,
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
    mtf_table[mtf_count++] = &mtf_scalar_batch;
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

const gmtf_mtf_backend *gmtf_mtf_batch_backend(const char *name, const gmtf_mtf_backend *chosen)
{
    pthread_once(&mtf_once, mtf_init);
    int is_auto = !name || !*name || strcmp(name, "auto") == 0;
    if (!is_auto)
        return chosen->batch_encode || chosen->batch_decode ? chosen : NULL;
    const gmtf_mtf_backend *b = mtf_lookup("gpu");
    if (b && b->available() && (b->batch_encode || b->batch_decode))
        return b;
    return NULL;
}
