/* GPU MTF exactness: every variant against the scalar reference, over whole
 * blocks, on BWT output of the corpus (and of GMTF_GPU_EXTRA, e.g. a slice
 * of the Linux tarball), random data, edge cases, odd block sizes and
 * mixed batches, at several chunk sizes, through the host-to-host, pinned
 * and staged paths; inverse MTF likewise. With no CUDA device it exits 77
 * (meson: skipped) after saying why. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <divsufsort.h>

#include "gpu.h"
#include "mtf.h"

typedef struct batch {
    const char *name;
    uint8_t *data; /* input bytes, blocks at off[] */
    uint64_t *off;
    size_t count;
    uint8_t *ref; /* scalar encoding */
} batch;

static gmtf_gpu_ctx *ctx;
static batch sets[8];
static size_t nsets;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- building batches ---------------------------------------------------- */

typedef struct builder {
    uint8_t *data;
    size_t len, cap;
    uint64_t *off;
    size_t count, ocap;
} builder;

static void b_init(builder *b, size_t lead)
{
    memset(b, 0, sizeof *b);
    b->cap = lead + 1024;
    b->data = calloc(1, b->cap);
    b->len = lead; /* blocks need not start at 0 */
    b->ocap = 16;
    b->off = malloc(b->ocap * sizeof *b->off);
    b->off[0] = lead;
    assert_non_null(b->data);
}

static uint8_t *b_block(builder *b, size_t n)
{
    while (b->len + n > b->cap) {
        b->cap *= 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    if (b->count + 2 > b->ocap) {
        b->ocap *= 2;
        b->off = realloc(b->off, b->ocap * sizeof *b->off);
        assert_non_null(b->off);
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    b->off[++b->count] = b->len;
    return p;
}

static void b_finish(builder *b, const char *name)
{
    batch *s = &sets[nsets++];
    s->name = name;
    s->data = b->data;
    s->off = b->off;
    s->count = b->count;
    s->ref = calloc(1, b->len + 1);
    assert_non_null(s->ref);
    for (size_t i = 0; i < b->count; i++)
        gmtf_mtf_encode_scalar(s->data + s->off[i], s->ref + s->off[i], s->off[i + 1] - s->off[i]);
}

static void bwt_into(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (!n)
        return;
    saidx_t *sa = malloc(n * sizeof *sa);
    assert_non_null(sa);
    assert_true(divbwt(src, dst, sa, (saidx_t)n) >= 0);
    free(sa);
}

static uint8_t *read_file(const char *path, size_t *n, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *p = malloc(max + 1);
    *n = p ? fread(p, 1, max, f) : 0;
    fclose(f);
    return p;
}

/* Each corpus file as one BWT block (mixed sizes), then GMTF_GPU_EXTRA
 * in 1 MiB BWT blocks. */
static int corpus_batch(void)
{
    const char *dir = getenv("GMTF_CORPUS");
    builder b;
    b_init(&b, 0);
    const char *sub[] = {"calgary", "canterbury"};
    for (int k = 0; dir && k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, sub[k]);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, "SHA256SUMS") == 0)
                continue;
            char fp[8192];
            snprintf(fp, sizeof fp, "%s/%s", path, e->d_name);
            size_t n;
            uint8_t *src = read_file(fp, &n, 4u << 20);
            if (!src)
                continue;
            bwt_into(b_block(&b, n), src, n);
            free(src);
        }
        closedir(d);
    }
    const char *extra = getenv("GMTF_GPU_EXTRA");
    if (extra) {
        size_t n;
        uint8_t *src = read_file(extra, &n, 32u << 20);
        for (size_t p = 0; src && p < n; p += 1u << 20) {
            size_t m = n - p < (1u << 20) ? n - p : (1u << 20);
            bwt_into(b_block(&b, m), src + p, m);
        }
        free(src);
    }
    if (!b.count) {
        free(b.data);
        free(b.off);
        return 0;
    }
    b_finish(&b, "corpus-bwt");
    return 1;
}

static void random_batch(void)
{
    builder b;
    b_init(&b, 0);
    size_t sizes[] = {1u << 20, 333333, 4096, 65536 + 17, 2u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = b_block(&b, sizes[i]);
        for (size_t j = 0; j < sizes[i]; j++)
            p[j] = (uint8_t)rnd();
    }
    b_finish(&b, "random");
}

static void edge_batch(void)
{
    builder b;
    b_init(&b, 5); /* first block at an odd offset */
    b_block(&b, 0);
    *b_block(&b, 1) = 255;
    memset(b_block(&b, 100000), 'a', 100000);
    b_block(&b, 0);
    uint8_t *p = b_block(&b, 256 * 300); /* every rank 255 after the first pass */
    for (size_t j = 0; j < 256 * 300; j++)
        p[j] = (uint8_t)j;
    p = b_block(&b, 256 * 40 + 3); /* descending: ranks 0..255 */
    for (size_t j = 0; j < 256 * 40 + 3; j++)
        p[j] = (uint8_t)(255 - j);
    p = b_block(&b, 77777); /* two symbols alternating, runs of random length */
    for (size_t j = 0; j < 77777; j++)
        p[j] = (rnd() & 7) ? p[j ? j - 1 : 0] : (uint8_t)(rnd() & 1 ? 0 : 255);
    p = b_block(&b, 3u << 20); /* low entropy, long block */
    uint8_t c = 0;
    for (size_t j = 0; j < (3u << 20); j++) {
        if ((rnd() & 15) == 0)
            c = (uint8_t)(c + (rnd() % 64) - 32);
        p[j] = c;
    }
    *b_block(&b, 1) = 0;
    b_finish(&b, "edge");
}

/* Many blocks of odd sizes (some empty) with skewed content. */
static void odd_batch(void)
{
    builder b;
    b_init(&b, 3);
    for (int i = 0; i < 300; i++) {
        size_t n = (i % 17 == 0) ? 0 : (size_t)(rnd() % 20000);
        uint8_t *p = b_block(&b, n);
        for (size_t j = 0; j < n; j++) {
            uint64_t r = rnd();
            p[j] = (uint8_t)((r & 3) ? (r >> 8) % 12 : (r >> 16));
        }
    }
    b_finish(&b, "odd-sizes");
}

/* ---- checks ---------------------------------------------------------------- */

static size_t batch_len(const batch *s)
{
    return s->off[s->count];
}

/* Compares out with the reference over every block; prints the first
 * difference. depth > 0: ranks >= depth must read depth. */
static size_t count_mismatch(const batch *s, const uint8_t *out, unsigned depth, const char *what)
{
    size_t bad = 0;
    for (size_t i = s->off[0]; i < batch_len(s); i++) {
        uint8_t want = s->ref[i];
        if (depth && want >= depth)
            want = (uint8_t)depth;
        if (out[i] != want) {
            if (!bad) {
                size_t blk = 0;
                while (s->off[blk + 1] <= i)
                    blk++;
                print_error("%s on %s: block %zu at %zu: got %u want %u\n", what, s->name, blk,
                            (size_t)(i - s->off[blk]), out[i], want);
            }
            bad++;
        }
    }
    return bad;
}

/* Returns the number of failed checks (printed), so one run reports every
 * failing variant rather than the first. */
static int check_variant_on(const batch *s, size_t v, uint32_t chunk)
{
    const char *name = gmtf_gpu_variant_name(v);
    unsigned flags = gmtf_gpu_variant_flags(v), depth = gmtf_gpu_variant_depth(v);
    size_t n = batch_len(s);
    int fails = 0;
    uint8_t *out = malloc(n + 1);
    assert_non_null(out);
    char what[128];
    snprintf(what, sizeof what, "%s encode (chunk %u)", name, chunk);
    assert_int_equal(gmtf_gpu_set_chunk(ctx, chunk), 0);
    memset(out, 0xAA, n + 1);
    int rc = gmtf_gpu_mtf_encode_batch(ctx, (int)v, s->data, s->off, s->count, out);
    if (rc) {
        print_error("%s on %s: rc %d (%s)\n", what, s->name, rc, gmtf_gpu_ctx_error(ctx));
        fails++;
    } else if (count_mismatch(s, out, (flags & GMTF_GPU_COMPLETE) ? 0 : depth, what)) {
        fails++;
    }
    if (flags & GMTF_GPU_DECODE) {
        snprintf(what, sizeof what, "%s decode (chunk %u)", name, chunk);
        memset(out, 0x55, n + 1);
        rc = gmtf_gpu_mtf_decode_batch(ctx, (int)v, s->ref, s->off, s->count, out);
        size_t bad = 0;
        for (size_t i = s->off[0]; !rc && i < n; i++)
            bad += out[i] != s->data[i];
        if (rc || bad) {
            print_error("%s on %s: rc %d, %zu bytes differ\n", what, s->name, rc, bad);
            fails++;
        }
    }
    free(out);
    assert_int_equal(gmtf_gpu_set_chunk(ctx, 0), 0);
    return fails;
}

static void test_all_variants(void **state)
{
    (void)state;
    const uint32_t chunks[] = {0, 256, 1024, 65536};
    int total = 0;
    for (size_t v = 0; v < gmtf_gpu_variant_count(); v++) {
        if (gmtf_gpu_variant_flags(v) & GMTF_GPU_PROBE)
            continue; /* timing probe: output undefined by design */
        int fails = 0, runs = 0;
        for (size_t s = 0; s < nsets; s++)
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++, runs++)
                fails += check_variant_on(&sets[s], v, chunks[c]);
        printf("variant %-12s %s (%d batches x chunk sizes%s)\n", gmtf_gpu_variant_name(v),
               fails ? "FAILED" : "exact", runs,
               (gmtf_gpu_variant_flags(v) & GMTF_GPU_DECODE) ? ", encode + decode" : ", encode");
        total += fails;
    }
    assert_int_equal(total, 0);
}

/* Pinned buffers and the staged path give the same bytes. */
static void test_pinned_and_staged(void **state)
{
    (void)state;
    const batch *s = &sets[0];
    size_t n = batch_len(s);
    uint8_t *in = gmtf_gpu_host_alloc(n), *out = gmtf_gpu_host_alloc(n);
    assert_non_null(in);
    assert_non_null(out);
    memcpy(in, s->data, n);
    memset(out, 0, n);
    assert_int_equal(gmtf_gpu_mtf_encode_batch(ctx, -1, in, s->off, s->count, out), 0);
    assert_int_equal(count_mismatch(s, out, 0, "pinned encode"), 0);
    memset(out, 0, n);
    assert_int_equal(gmtf_gpu_stage_upload(ctx, s->data, s->off, s->count), 0);
    double ms = -1;
    assert_int_equal(gmtf_gpu_stage_run(ctx, -1, 0, &ms), 0);
    assert_true(ms >= 0);
    assert_int_equal(gmtf_gpu_stage_download(ctx, out + s->off[0]), 0);
    assert_int_equal(count_mismatch(s, out, 0, "staged encode"), 0);
    /* decode what was encoded, on the device */
    assert_int_equal(gmtf_gpu_stage_swap(ctx), 0);
    assert_int_equal(gmtf_gpu_stage_run(ctx, -1, 1, &ms), 0);
    assert_int_equal(gmtf_gpu_stage_download(ctx, out + s->off[0]), 0);
    assert_memory_equal(out + s->off[0], s->data + s->off[0], n - s->off[0]);
    gmtf_gpu_host_free(in);
    gmtf_gpu_host_free(out);
}

/* Bad arguments are refused, and the context stays usable. */
static void test_bad_arguments(void **state)
{
    (void)state;
    uint8_t buf[16] = {0}, out[16];
    uint64_t off[3] = {0, 10, 5};
    assert_int_equal(gmtf_gpu_mtf_encode_batch(ctx, 0, buf, off, 2, out), -EINVAL);
    assert_int_equal(gmtf_gpu_mtf_encode_batch(ctx, 9999, buf, off, 1, out), -EINVAL);
    int depth8 = gmtf_gpu_variant_find("depth8");
    assert_true(depth8 >= 0);
    assert_int_equal(gmtf_gpu_mtf_decode_batch(ctx, depth8, buf, off, 1, out), -EINVAL);
    assert_int_equal(gmtf_gpu_set_chunk(ctx, 300), -EINVAL);
    assert_int_equal(gmtf_gpu_variant_find("no-such"), -EINVAL);
    assert_int_equal(gmtf_gpu_mtf_encode_batch(ctx, -1, buf, off, 0, out), 0);
    assert_int_equal(gmtf_gpu_ctx_ok(ctx), 1);
    off[2] = 16;
    assert_int_equal(gmtf_gpu_mtf_encode_batch(ctx, -1, buf, off, 2, out), 0);
    uint8_t ref[16];
    gmtf_mtf_encode_scalar(buf, ref, 10);
    gmtf_mtf_encode_scalar(buf + 10, ref + 10, 6);
    assert_memory_equal(out, ref, 16);
}

/* k-selection agrees with sorting on the host, for each key type. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_f32(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
static int cmp_f64(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_kselect(void **state)
{
    (void)state;
    size_t n = 3000000;
    int32_t *ki = malloc(n * 4), *si = malloc(n * 4);
    float *kf = malloc(n * 4), *sf = malloc(n * 4);
    uint64_t *ku = malloc(n * 8), *su = malloc(n * 8);
    double *kd = malloc(n * 8), *sd = malloc(n * 8);
    assert_true(ki && si && kf && sf && ku && su && kd && sd);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        ki[i] = (int32_t)(r % 1000) - 500; /* many duplicates */
        kf[i] = (float)((double)(int64_t)r / 9.2e18 * 1e6);
        ku[i] = r;
        kd[i] = (double)(int64_t)rnd() / 1e10;
    }
    memcpy(si, ki, n * 4);
    memcpy(sf, kf, n * 4);
    memcpy(su, ku, n * 8);
    memcpy(sd, kd, n * 8);
    qsort(si, n, 4, cmp_i32);
    qsort(sf, n, 4, cmp_f32);
    qsort(su, n, 8, cmp_u64);
    qsort(sd, n, 8, cmp_f64);
    size_t ks[] = {0, 1, n / 100, n / 2, n - 2, n - 1, 1234567};
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        size_t k = ks[j];
        int32_t oi;
        float of;
        uint64_t ou;
        double od;
        assert_int_equal(gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_I32, ki, n, k, &oi), 0);
        assert_int_equal(oi, si[k]);
        assert_int_equal(gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_F32, kf, n, k, &of), 0);
        assert_true(of == sf[k]);
        assert_int_equal(gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_U64, ku, n, k, &ou), 0);
        assert_true(ou == su[k]);
        assert_int_equal(gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_F64, kd, n, k, &od), 0);
        assert_true(od == sd[k]);
    }
    uint32_t same[70000];
    for (size_t i = 0; i < 70000; i++)
        same[i] = 42;
    uint32_t o;
    assert_int_equal(gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_U32, same, 70000, 69999, &o), 0);
    assert_int_equal(o, 42);
    assert_int_equal(gmtf_gpu_kselect(ctx, GMTF_GPU_KEY_U32, same, 70000, 70000, &o), -EINVAL);
    free(ki), free(si), free(kf), free(sf), free(ku), free(su), free(kd), free(sd);
}

static int setup(void **state)
{
    (void)state;
    if (gmtf_gpu_ctx_create(&ctx) != 0)
        return -1;
    if (!corpus_batch())
        fprintf(stderr, "note: no corpus (GMTF_CORPUS unset or empty); synthetic data only\n");
    random_batch();
    edge_batch();
    odd_batch();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gmtf_gpu_ctx_destroy(ctx);
    for (size_t i = 0; i < nsets; i++) {
        free(sets[i].data);
        free(sets[i].off);
        free(sets[i].ref);
    }
    return 0;
}

int main(void)
{
    if (!gmtf_gpu_available()) {
        printf("SKIP: no usable CUDA device on this machine (or no CUDA in this build)\n");
        return 77;
    }
    char name[256];
    int sms = 0;
    gmtf_gpu_device_info(name, sizeof name, &sms);
    printf("device: %s, %d SMs\n", name, sms);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_pinned_and_staged),
        cmocka_unit_test(test_all_variants),
        cmocka_unit_test(test_kselect),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
