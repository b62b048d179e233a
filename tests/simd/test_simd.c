/* cmocka tests of simd/: every MTF variant this CPU supports must give the
 * same bytes as the scalar reference (simd's "bsc" loop, a textbook
 * memmove loop written here, and the codec's gmtf_mtf_encode_scalar) on
 * BWT output of every corpus file, random data, edge cases, unaligned
 * buffers and two-block calls; decode must invert encode. Also checks the
 * by-name lookup and the codec's registration of the family.
 *
 * GMTF_CORPUS names the corpus folder (set by tests/meson.build); without it
 * the corpus cases print that they were skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <divsufsort.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gmtf_simd.h"
#include "mtf.h"

#define GUARD 64 /* canary bytes on each side of every output buffer */

/* ---- references ---------------------------------------------------------- */

static void naive_encode(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t q[256];
    for (int i = 0; i < 256; i++)
        q[i] = (uint8_t)i;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = memchr(q, src[i], 256);
        size_t r = (size_t)(p - q);
        memmove(q + 1, q, r);
        q[0] = src[i];
        dst[i] = (uint8_t)r;
    }
}

static void reference_encode(const uint8_t *src, uint8_t *dst, size_t n)
{
    const gmtf_simd_mtf_variant *bsc = gmtf_simd_mtf_find("bsc");
    assert_non_null(bsc);
    bsc->encode(src, dst, n);
}

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint8_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

/* Output buffer with canaries around [GUARD, GUARD + n). */
static uint8_t *guarded(size_t n)
{
    uint8_t *b = malloc(n + 2 * GUARD);
    assert_non_null(b);
    memset(b, 0xa5, n + 2 * GUARD);
    return b;
}

static void check_guards(const uint8_t *b, size_t n, const char *what)
{
    for (size_t i = 0; i < GUARD; i++)
        if (b[i] != 0xa5 || b[GUARD + n + i] != 0xa5)
            fail_msg("%s wrote outside its %zu-byte output", what, n);
}

static int variant_count_skipped;

static const gmtf_simd_mtf_variant *const *variants(size_t *n)
{
    const gmtf_simd_mtf_variant *const *v;
    *n = gmtf_simd_mtf_variants(&v);
    return v;
}

static void expect_same(const char *variant, const char *op, const char *what, const uint8_t *got,
                        const uint8_t *want, size_t n)
{
    if (memcmp(got, want, n) == 0)
        return;
    size_t i = 0;
    while (got[i] == want[i])
        i++;
    fail_msg("%s %s differs on %s (n=%zu) at byte %zu: %u, want %u", variant, op, what, n, i,
             got[i], want[i]);
}

/* Every supported variant: encode == ref, decode(ref) == src, no stray
 * writes; src/dst at the given misalignment. */
static void check_all(const uint8_t *src_in, size_t n, const char *what, size_t misalign)
{
    uint8_t *ref = malloc(n + 1), *src = malloc(n + misalign + 1);
    assert_non_null(ref);
    assert_non_null(src);
    memcpy(src + misalign, src_in, n);
    reference_encode(src_in, ref, n);
    size_t nv;
    const gmtf_simd_mtf_variant *const *v = variants(&nv);
    for (size_t k = 0; k < nv; k++) {
        if (!v[k]->supported())
            continue;
        uint8_t *out = guarded(n + misalign), *back = guarded(n + misalign);
        v[k]->encode(src + misalign, out + GUARD + misalign, n);
        expect_same(v[k]->name, "encode", what, out + GUARD + misalign, ref, n);
        memcpy(src + misalign, ref, n); /* decode from an equally misaligned copy */
        v[k]->decode(src + misalign, back + GUARD + misalign, n);
        expect_same(v[k]->name, "decode", what, back + GUARD + misalign, src_in, n);
        memcpy(src + misalign, src_in, n);
        check_guards(out + misalign, n, v[k]->name);
        check_guards(back + misalign, n, v[k]->name);
        free(out);
        free(back);
    }
    free(ref);
    free(src);
}

/* Every supported variant's two-block calls against two one-block refs. */
static void check_pair(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, const char *what)
{
    uint8_t *ra = malloc(na + 1), *rb = malloc(nb + 1);
    reference_encode(a, ra, na);
    reference_encode(b, rb, nb);
    size_t nv;
    const gmtf_simd_mtf_variant *const *v = variants(&nv);
    for (size_t k = 0; k < nv; k++) {
        if (!v[k]->supported())
            continue;
        uint8_t *oa = guarded(na), *ob = guarded(nb);
        v[k]->encode2(a, oa + GUARD, na, b, ob + GUARD, nb);
        expect_same(v[k]->name, "encode2 block 0", what, oa + GUARD, ra, na);
        expect_same(v[k]->name, "encode2 block 1", what, ob + GUARD, rb, nb);
        check_guards(oa, na, v[k]->name);
        check_guards(ob, nb, v[k]->name);
        memset(oa, 0xa5, na + 2 * GUARD);
        memset(ob, 0xa5, nb + 2 * GUARD);
        v[k]->decode2(ra, oa + GUARD, na, rb, ob + GUARD, nb);
        expect_same(v[k]->name, "decode2 block 0", what, oa + GUARD, a, na);
        expect_same(v[k]->name, "decode2 block 1", what, ob + GUARD, b, nb);
        check_guards(oa, na, v[k]->name);
        check_guards(ob, nb, v[k]->name);
        free(oa);
        free(ob);
    }
    free(ra);
    free(rb);
}

static uint8_t *bwt_of(const uint8_t *in, size_t n)
{
    uint8_t *out = malloc(n + 1);
    saidx_t *work = malloc((n + 1) * sizeof(saidx_t));
    assert_non_null(out);
    assert_non_null(work);
    const size_t block = 1 << 20; /* the codec's default block size */
    for (size_t off = 0; off < n; off += block) {
        size_t len = n - off < block ? n - off : block;
        assert_true(divbwt(in + off, out + off, work, (saidx_t)len) >= 0);
    }
    free(work);
    return out;
}

/* ---- tests: the references agree ---------------------------------------- */

static void test_references_agree(void **state)
{
    (void)state;
    size_t n = 200000;
    uint8_t *src = malloc(n), *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = i < n / 2 ? rnd() : (uint8_t)(rnd() % 5 * (i % 3)); /* wide, then skewed */
    naive_encode(src, a, n);
    reference_encode(src, b, n);
    expect_same("bsc", "encode", "naive memmove loop", b, a, n);
    gmtf_mtf_encode_scalar(src, b, n);
    expect_same("codec scalar", "encode", "naive memmove loop", b, a, n);
    gmtf_mtf_decode_scalar(a, b, n);
    expect_same("codec scalar", "decode", "naive memmove loop", b, src, n);
    free(src);
    free(a);
    free(b);
}

/* ---- tests: corpus ------------------------------------------------------- */

static int corpus_files(const char *dir, char ***names)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 64, n = 0;
    *names = malloc(cap * sizeof **names);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096 + 256 + 2];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap)
            *names = realloc(*names, (cap *= 2) * sizeof **names);
        (*names)[n++] = strdup(path);
    }
    closedir(d);
    return (int)n;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void test_corpus(void **state)
{
    (void)state;
    const char *corpus = getenv("GMTF_CORPUS");
    static const char *const sets[] = {"calgary", "canterbury"};
    int files = 0;
    uint8_t *prev = NULL;
    size_t prev_n = 0;
    for (size_t s = 0; corpus && s < 2; s++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", corpus, sets[s]);
        char **names;
        int n = corpus_files(dir, &names);
        for (int i = 0; i < n; i++) {
            size_t len;
            uint8_t *raw = read_file(names[i], &len);
            uint8_t *bwt = bwt_of(raw, len);
            check_all(bwt, len, names[i], 0);
            if (prev) /* two-block calls across consecutive files */
                check_pair(prev, prev_n, bwt, len, names[i]);
            free(prev);
            prev = bwt;
            prev_n = len;
            free(raw);
            free(names[i]);
            files++;
        }
        if (n >= 0)
            free(names);
    }
    free(prev);
    if (files == 0) {
        printf("[  SKIPPED ] corpus: no files under GMTF_CORPUS=%s\n", corpus ? corpus : "(unset)");
        skip();
    }
    printf("[   INFO   ] corpus: %d files checked\n", files);
}

/* ---- tests: synthetic data --------------------------------------------------- */

static const size_t lengths[] = {0,    1,    2,    3,    7,    15,   16,   17,    31,    32,
                                 33,   63,   64,   65,   127,  128,  129,  255,   256,   257,
                                 1000, 4095, 4096, 4097, 8191, 8192, 8193, 65537, 300001};

static void test_random(void **state)
{
    (void)state;
    uint8_t *buf = malloc(300001);
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        size_t n = lengths[li];
        for (size_t i = 0; i < n; i++)
            buf[i] = rnd();
        check_all(buf, n, "random", 0);
        for (size_t i = 0; i < n; i++) /* small alphabet: mostly low ranks */
            buf[i] = (uint8_t)("abcab"[rnd() % 5] + (rnd() % 16 == 0 ? rnd() % 40 : 0));
        check_all(buf, n, "small alphabet", 0);
    }
    free(buf);
}

static void test_edge_cases(void **state)
{
    (void)state;
    size_t n = 70000;
    uint8_t *buf = calloc(n, 1);
    assert_non_null(buf);
    check_all(buf, 0, "n=0", 0);
    for (int c = 0; c < 256; c += 85) { /* n=1 and all one byte */
        buf[0] = (uint8_t)c;
        check_all(buf, 1, "n=1", 0);
        memset(buf, c, n);
        check_all(buf, n, "all one byte", 0);
    }
    for (size_t i = 0; i < 256; i++)
        buf[i] = (uint8_t)i;
    check_all(buf, 256, "all 256 values once", 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)i; /* after the first lap every rank is 255 */
    check_all(buf, n, "0..255 cycle", 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(255 - i);
    check_all(buf, n, "255..0 cycle", 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i % 64 + 64 * (i / 4096 % 4)); /* ranks 63 then the next register */
    check_all(buf, n, "64-cycles per 4 KiB", 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i & 1 ? 200 : 3);
    check_all(buf, n, "two alternating bytes", 0);
    for (size_t i = 0; i < n; i++) /* ranks just below and above 16/32/64 */
        buf[i] = (uint8_t)(i % (size_t)(15 + (i / 1000) % 52));
    check_all(buf, n, "cycles of 15..66", 0);
    free(buf);
}

static void test_unaligned(void **state)
{
    (void)state;
    size_t n = 10007;
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = rnd() % 8 ? (uint8_t)(rnd() % 12) : rnd();
    for (size_t mis = 1; mis < 64; mis += 7)
        check_all(buf, n - mis, "unaligned buffers", mis);
    free(buf);
}

static void test_two_blocks(void **state)
{
    (void)state;
    size_t n = 150001;
    uint8_t *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++) {
        a[i] = rnd() % 4 ? (uint8_t)(rnd() % 10) : rnd();
        b[i] = rnd();
    }
    static const size_t pairs[][2] = {{0, 0},           {0, 5000},        {5000, 0},    {1, 1},
                                      {1, 2},           {4096, 4097},     {100000, 5},  {5, 100000},
                                      {150001, 150000}, {150001, 150001}, {8191, 16385}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        check_pair(a, pairs[i][0], b, pairs[i][1], "two blocks (skewed, random)");
        check_pair(b, pairs[i][0], a, pairs[i][1], "two blocks (random, skewed)");
    }
    free(a);
    free(b);
}

/* ---- tests: lookup, dispatch, codec registration --------------------------- */

static void test_lookup(void **state)
{
    (void)state;
    size_t nv;
    const gmtf_simd_mtf_variant *const *v = variants(&nv);
    assert_true(nv >= 3);
    const gmtf_simd_mtf_variant *best = gmtf_simd_mtf_best();
    assert_non_null(best);
    assert_true(best->supported());
    assert_ptr_equal(gmtf_simd_mtf_find("bsc"), gmtf_simd_mtf_find("simd-bsc"));
    assert_null(gmtf_simd_mtf_find("no-such-variant"));
    assert_null(gmtf_simd_mtf_find(NULL));
    for (size_t k = 0; k < nv; k++) {
        const gmtf_simd_mtf_variant *f = gmtf_simd_mtf_find(v[k]->name);
        if (v[k]->supported())
            assert_ptr_equal(f, v[k]);
        else
            assert_null(f);
    }
    if (!getenv("GMTF_MTF")) /* default: the first supported in preference order */
        for (size_t k = 0; k < nv; k++)
            if (v[k]->supported()) {
                assert_ptr_equal(best, v[k]);
                break;
            }
}

static void test_codec_registration(void **state)
{
    (void)state;
    size_t nv;
    const gmtf_simd_mtf_variant *const *v = variants(&nv);
    const gmtf_mtf_backend *simd = gmtf_mtf_backend_find("simd");
    assert_non_null(simd);
    size_t n = 20000, count = 5;
    uint64_t off[6] = {0, 1, 4097, 9000, 9001, 20000};
    uint8_t *src = malloc(n), *ref = malloc(n), *out = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = rnd() % 3 ? (uint8_t)(rnd() % 20) : rnd();
    for (size_t i = 0; i < count; i++)
        gmtf_mtf_encode_scalar(src + off[i], ref + off[i], off[i + 1] - off[i]);
    for (size_t k = 0; k <= nv; k++) {
        char name[64];
        snprintf(name, sizeof name, "simd-%s", k < nv ? v[k]->name : "");
        const gmtf_mtf_backend *b = k < nv ? gmtf_mtf_backend_find(name) : simd;
        if (k < nv && !v[k]->supported()) {
            assert_null(b);
            continue;
        }
        assert_non_null(b);
        assert_non_null(b->batch_encode);
        gmtf_mtf m;
        assert_int_equal(gmtf_mtf_init(&m, b), 0);
        /* "simd" resolves to the dispatched variant, simd-NAME to NAME */
        assert_ptr_equal(m.state, k < nv ? v[k] : gmtf_simd_mtf_best());
        memset(out, 0, n);
        assert_int_equal(gmtf_mtf_batch_encode(&m, src, off, count, out), 0);
        expect_same(b->name, "batch_encode", "5-block batch", out, ref, n);
        memset(back, 0, n);
        assert_int_equal(gmtf_mtf_batch_decode(&m, ref, off, count, back), 0);
        expect_same(b->name, "batch_decode", "5-block batch", back, src, n);
        gmtf_mtf_encode(&m, src, out, n);
        gmtf_mtf_encode_scalar(src, back, n);
        expect_same(b->name, "encode", "one block", out, back, n);
        gmtf_mtf_free(&m);
    }
    free(src);
    free(ref);
    free(out);
    free(back);
}

int main(void)
{
    /* GMTF_MTF_EXPECT: only check that GMTF_MTF forced this variant. */
    const char *expect = getenv("GMTF_MTF_EXPECT");
    if (expect) {
        const gmtf_simd_mtf_variant *b = gmtf_simd_mtf_best();
        printf("GMTF_MTF=%s -> %s (expected %s)\n", getenv("GMTF_MTF"), b->name, expect);
        return strcmp(b->name, expect) != 0;
    }
    size_t nv;
    const gmtf_simd_mtf_variant *const *v = variants(&nv);
    printf("[   INFO   ] dispatch picks %s\n", gmtf_simd_mtf_best()->name);
    for (size_t k = 0; k < nv; k++)
        if (!v[k]->supported()) {
            printf("[  SKIPPED ] variant %s: this CPU lacks %s\n", v[k]->name, v[k]->isa);
            variant_count_skipped++;
        } else {
            printf("[   INFO   ] variant %s tested\n", v[k]->name);
        }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_references_agree), cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_edge_cases),       cmocka_unit_test(test_random),
        cmocka_unit_test(test_unaligned),        cmocka_unit_test(test_two_blocks),
        cmocka_unit_test(test_corpus),           cmocka_unit_test(test_codec_registration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
