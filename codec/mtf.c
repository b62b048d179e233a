/* The MTF backend table (scalar, then whatever simd/ and gpu/ register) and
 * the instance calls of mtf.h and mtf_bench.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mtf.h"
#include "mtf_bench.h"

const gmtf_mtf_backend *const *gmtf_mtf_simd_list(size_t *count);
const gmtf_mtf_backend *const *gmtf_mtf_gpu_list(size_t *count);

/* ---- scalar ------------------------------------------------------------ */

static int always_available(const gmtf_mtf_backend *b)
{
    (void)b;
    return 1;
}

static void scalar_encode(void *state, const uint8_t *src, uint8_t *dst, size_t n)
{
    (void)state;
    gmtf_mtf_encode_scalar(src, dst, n);
}

static void scalar_decode(void *state, const uint8_t *src, uint8_t *dst, size_t n)
{
    (void)state;
    gmtf_mtf_decode_scalar(src, dst, n);
}

static const gmtf_mtf_backend mtf_scalar = {
    .name = "scalar",
    .available = always_available,
    .encode = scalar_encode,
    .decode = scalar_decode,
};

/* The scalar loop behind batch hooks: runs the staged batch path (the one
 * the GPU takes) on any machine, so CI tests it. Never chosen by auto. */
static int scalar_batch_encode(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                               uint8_t *dst)
{
    (void)state;
    for (size_t i = 0; i < count; i++)
        gmtf_mtf_encode_scalar(src + off[i], dst + off[i], off[i + 1] - off[i]);
    return 0;
}

static int scalar_batch_decode(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                               uint8_t *dst)
{
    (void)state;
    for (size_t i = 0; i < count; i++)
        gmtf_mtf_decode_scalar(src + off[i], dst + off[i], off[i + 1] - off[i]);
    return 0;
}

static const gmtf_mtf_backend mtf_scalar_batch = {
    .name = "scalar-batch",
    .available = always_available,
    .encode = scalar_encode,
    .decode = scalar_decode,
    .batch_encode = scalar_batch_encode,
    .batch_decode = scalar_batch_decode,
};

/* ---- the table ----------------------------------------------------------
 * Filled once (the families' lists are built at run time: variant names
 * depend on the build and the CPU), read-only afterwards. */

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

static void mtf_table_init(void)
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
    pthread_once(&mtf_once, mtf_table_init);
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

static int is_auto(const char *name)
{
    return !name || !*name || strcmp(name, "auto") == 0;
}

/* auto: the dispatched SIMD family when present, else scalar. The GPU is
 * used by batch calls only (see batch.c), where its batch hooks pay off. */
const gmtf_mtf_backend *gmtf_mtf_backend_find(const char *name)
{
    pthread_once(&mtf_once, mtf_table_init);
    if (is_auto(name)) {
        const gmtf_mtf_backend *b = mtf_lookup("simd");
        if (b && b->available(b))
            return b;
        return &mtf_scalar;
    }
    const gmtf_mtf_backend *b = mtf_lookup(name);
    if (!b || !b->available(b))
        return NULL;
    return b;
}

size_t gmtf_mtf_backend_count(void)
{
    pthread_once(&mtf_once, mtf_table_init);
    return mtf_count;
}

const char *gmtf_mtf_backend_name(size_t i, int *available)
{
    pthread_once(&mtf_once, mtf_table_init);
    if (i >= mtf_count)
        return NULL;
    if (available)
        *available = mtf_table[i]->available(mtf_table[i]);
    return mtf_table[i]->name;
}

const gmtf_mtf_backend *gmtf_mtf_batch_backend(const char *name, const gmtf_mtf_backend *chosen)
{
    pthread_once(&mtf_once, mtf_table_init);
    if (!is_auto(name))
        return chosen->batch_encode || chosen->batch_decode ? chosen : NULL;
    const gmtf_mtf_backend *b = mtf_lookup("gpu");
    if (b && b->available(b) && (b->batch_encode || b->batch_decode))
        return b;
    return NULL;
}

/* ---- instances --------------------------------------------------------- */

int gmtf_mtf_init(gmtf_mtf *m, const gmtf_mtf_backend *b)
{
    m->ops = b;
    m->state = (void *)b->variant;
    if (!b->init)
        return 0;
    int rc = b->init(b, &m->state);
    if (rc < 0)
        *m = (gmtf_mtf){0};
    return rc;
}

void gmtf_mtf_free(gmtf_mtf *m)
{
    if (m->ops && m->ops->init && m->ops->free)
        m->ops->free(m->state);
    *m = (gmtf_mtf){0};
}

void *gmtf_mtf_host_alloc(const gmtf_mtf *m, size_t size)
{
    if (m->ops->host_alloc && m->ops->host_free)
        return m->ops->host_alloc(m->state, size);
    return malloc(size);
}

void gmtf_mtf_host_free(const gmtf_mtf *m, void *p)
{
    if (m->ops->host_alloc && m->ops->host_free)
        m->ops->host_free(m->state, p);
    else
        free(p);
}

int gmtf_mtf_bench_has_kernel(const gmtf_mtf *m)
{
    return m->ops->bench && m->ops->bench->kernel;
}

int gmtf_mtf_bench_kernel(const gmtf_mtf *m, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, int decode, double *ms)
{
    if (!gmtf_mtf_bench_has_kernel(m))
        return -ENOTSUP;
    return m->ops->bench->kernel(m->state, src, off, count, dst, decode, ms);
}
