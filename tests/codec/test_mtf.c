/* MTF: the scalar reference against a naive list-based MTF, round trips
 * both ways, and every backend of this build against scalar (per-block
 * calls and, where present, the batch hooks): all must give identical
 * bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmtf_codec.h"
#include "mtf.h"
#include "test_util.h"

/* Textbook MTF over an explicit list, written for obviousness. */
static void naive_mtf_encode(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t list[256];
    for (int i = 0; i < 256; i++)
        list[i] = (uint8_t)i;
    for (size_t i = 0; i < n; i++) {
        int r = 0;
        while (list[r] != src[i])
            r++;
        dst[i] = (uint8_t)r;
        memmove(list + 1, list, (size_t)r);
        list[0] = src[i];
    }
}

static void naive_mtf_decode(const uint8_t *src, uint8_t *dst, size_t n)
{
    uint8_t list[256];
    for (int i = 0; i < 256; i++)
        list[i] = (uint8_t)i;
    for (size_t i = 0; i < n; i++) {
        uint8_t r = src[i], s = list[r];
        dst[i] = s;
        memmove(list + 1, list, r);
        list[0] = s;
    }
}

enum { KIND_RANDOM, KIND_TEXT, KIND_ONE, KIND_ASC, KIND_DESC, KIND_SKEW, KIND_PERIOD3, KIND_COUNT };

static void fill_kind(uint8_t *buf, size_t n, int kind, uint64_t seed)
{
    uint64_t s = seed;
    switch (kind) {
    case KIND_RANDOM: tu_fill_random(buf, n, seed); break;
    case KIND_TEXT: tu_fill_text_like(buf, n, seed); break;
    case KIND_ONE: memset(buf, (int)(seed & 0xFF), n); break;
    case KIND_ASC:
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)i;
        break;
    case KIND_DESC:
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)(255 - i);
        break;
    case KIND_SKEW:
        /* mostly small ranks with rare deep ones, as after a BWT */
        for (size_t i = 0; i < n; i++) {
            uint64_t r = tu_rand(&s);
            buf[i] = (r & 7) ? (uint8_t)((r >> 8) & 3) : (uint8_t)(r >> 16);
        }
        break;
    default:
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)("abc"[i % 3]);
        break;
    }
}

static const size_t sizes[] = {1,    2,    3,    7,    8,     15,    16,    17,    31,  32,
                               33,   63,   64,   65,   127,   128,   255,   256,   257, 511,
                               1000, 4095, 4096, 4097, 65535, 65536, 65537, 300001};

static void test_scalar_matches_naive(void **state)
{
    (void)state;
    size_t maxn = 300001;
    uint8_t *src = tu_malloc(maxn), *a = tu_malloc(maxn), *b = tu_malloc(maxn),
            *back = tu_malloc(maxn);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            fill_kind(src, n, kind, 1000 + si * 31 + (size_t)kind);
            naive_mtf_encode(src, a, n);
            gmtf_mtf_encode_scalar(src, b, n);
            assert_memory_equal(a, b, n);
            gmtf_mtf_decode_scalar(b, back, n);
            assert_memory_equal(back, src, n);
        }
    }
    free(src), free(a), free(b), free(back);
}

/* Any byte string is a valid rank sequence: decode then encode is also the
 * identity, and decode agrees with the naive inverse. */
static void test_scalar_decode_any_ranks(void **state)
{
    (void)state;
    size_t n = 100000;
    uint8_t *ranks = tu_malloc(n), *a = tu_malloc(n), *b = tu_malloc(n), *again = tu_malloc(n);
    for (int kind = 0; kind < KIND_COUNT; kind++) {
        fill_kind(ranks, n, kind, 77 + (uint64_t)kind);
        naive_mtf_decode(ranks, a, n);
        gmtf_mtf_decode_scalar(ranks, b, n);
        assert_memory_equal(a, b, n);
        gmtf_mtf_encode_scalar(b, again, n);
        assert_memory_equal(again, ranks, n);
    }
    free(ranks), free(a), free(b), free(again);
}

static void test_backend_table(void **state)
{
    (void)state;
    const gmtf_mtf_backend *const *list = NULL;
    size_t count = gmtf_mtf_backends(&list);
    assert_true(count >= 1);
    assert_non_null(list);
    assert_string_equal(list[0]->name, "scalar");
    assert_true(list[0]->available(list[0]));
    assert_int_equal(gmtf_mtf_backend_count(), count);
    for (size_t i = 0; i < count; i++) {
        int avail = -1;
        const char *name = gmtf_mtf_backend_name(i, &avail);
        assert_non_null(name);
        assert_string_equal(name, list[i]->name);
        assert_int_equal(!!avail, !!list[i]->available(list[i]));
        assert_non_null(list[i]->encode);
        assert_non_null(list[i]->decode);
        /* names are unique */
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(list[j]->name, name);
        const gmtf_mtf_backend *found = gmtf_mtf_backend_find(name);
        if (avail)
            assert_ptr_equal(found, list[i]);
        else
            assert_null(found);
    }
    assert_non_null(gmtf_mtf_backend_find("auto"));
    assert_non_null(gmtf_mtf_backend_find(NULL));
    assert_null(gmtf_mtf_backend_find("no-such-backend"));
}

static void check_backend(const gmtf_mtf *m)
{
    const gmtf_mtf_backend *be = m->ops;
    size_t maxn = 300001;
    uint8_t *src = tu_malloc(maxn), *ref = tu_malloc(maxn), *out = tu_malloc(maxn),
            *back = tu_malloc(maxn);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        for (int kind = 0; kind < KIND_COUNT; kind++) {
            fill_kind(src, n, kind, 5000 + si * 7 + (size_t)kind);
            gmtf_mtf_encode_scalar(src, ref, n);
            memset(out, 0xCC, n);
            gmtf_mtf_encode(m, src, out, n);
            if (memcmp(out, ref, n) != 0)
                fail_msg("backend %s encode differs from scalar: n=%zu kind=%d", be->name, n, kind);
            memset(back, 0xCC, n);
            gmtf_mtf_decode(m, ref, back, n);
            if (memcmp(back, src, n) != 0)
                fail_msg("backend %s decode differs: n=%zu kind=%d", be->name, n, kind);
        }
    }
    free(src), free(ref), free(out), free(back);
}

/* A batch of blocks of awkward sizes (including 1-byte blocks) through
 * the batch hooks; a hook may decline (negative return), but when it
 * succeeds its bytes must equal scalar's per block. */
static void check_backend_batch(const gmtf_mtf *m)
{
    const gmtf_mtf_backend *be = m->ops;
    enum { COUNT = 67 };
    uint64_t off[COUNT + 1];
    uint64_t s = 99;
    off[0] = 0;
    for (size_t i = 0; i < COUNT; i++) {
        uint64_t len = i % 5 == 0 ? 1 : 1 + tu_rand_below(&s, i % 7 == 0 ? 70000 : 3000);
        off[i + 1] = off[i] + len;
    }
    size_t total = (size_t)off[COUNT];
    uint8_t *src = tu_malloc(total), *ref = tu_malloc(total), *out = tu_malloc(total),
            *back = tu_malloc(total);
    for (size_t i = 0; i < COUNT; i++)
        fill_kind(src + off[i], (size_t)(off[i + 1] - off[i]), (int)(i % KIND_COUNT), i);
    for (size_t i = 0; i < COUNT; i++)
        gmtf_mtf_encode_scalar(src + off[i], ref + off[i], (size_t)(off[i + 1] - off[i]));
    if (be->batch_encode) {
        memset(out, 0xCC, total);
        int r = gmtf_mtf_batch_encode(m, src, off, COUNT, out);
        if (r == 0 && memcmp(out, ref, total) != 0)
            fail_msg("backend %s batch_encode differs from scalar", be->name);
        printf("# %s batch_encode: %s\n", be->name, r == 0 ? "ran" : "declined");
    }
    if (be->batch_decode) {
        memset(back, 0xCC, total);
        int r = gmtf_mtf_batch_decode(m, ref, off, COUNT, back);
        if (r == 0 && memcmp(back, src, total) != 0)
            fail_msg("backend %s batch_decode differs", be->name);
        printf("# %s batch_decode: %s\n", be->name, r == 0 ? "ran" : "declined");
    }
    free(src), free(ref), free(out), free(back);
}

/* Instances are independent: two of one backend, used in turn and freed
 * in either order, give scalar's output; freeing twice is harmless. */
static void test_instances(void **state)
{
    (void)state;
    const gmtf_mtf_backend *const *list = NULL;
    size_t count = gmtf_mtf_backends(&list);
    enum { N = 4096 };
    uint8_t src[N], ref[N], out[N];
    fill_kind(src, N, 0, 7);
    gmtf_mtf_encode_scalar(src, ref, N);
    for (size_t i = 0; i < count; i++) {
        if (!list[i]->available(list[i]))
            continue;
        gmtf_mtf a, b;
        assert_int_equal(gmtf_mtf_init(&a, list[i]), 0);
        assert_int_equal(gmtf_mtf_init(&b, list[i]), 0);
        memset(out, 0, N);
        gmtf_mtf_encode(&a, src, out, N);
        assert_memory_equal(out, ref, N);
        gmtf_mtf_free(&a);
        memset(out, 0, N);
        gmtf_mtf_encode(&b, src, out, N);
        assert_memory_equal(out, ref, N);
        gmtf_mtf_free(&b);
        gmtf_mtf_free(&b);
    }
    /* host memory: the backend's, or malloc's */
    gmtf_mtf m;
    assert_int_equal(gmtf_mtf_init(&m, gmtf_mtf_backend_find("scalar")), 0);
    uint8_t *p = gmtf_mtf_host_alloc(&m, 100);
    assert_non_null(p);
    memset(p, 1, 100);
    gmtf_mtf_host_free(&m, p);
    assert_int_equal(gmtf_mtf_batch_encode(&m, src, NULL, 0, out), -ENOTSUP);
    gmtf_mtf_free(&m);
}

static void test_every_backend_matches_scalar(void **state)
{
    (void)state;
    const gmtf_mtf_backend *const *list = NULL;
    size_t count = gmtf_mtf_backends(&list);
    size_t ran = 0;
    for (size_t i = 0; i < count; i++) {
        if (!list[i]->available(list[i])) {
            printf("# backend %s not available here: skipped\n", list[i]->name);
            continue;
        }
        gmtf_mtf m;
        assert_int_equal(gmtf_mtf_init(&m, list[i]), 0);
        assert_ptr_equal(m.ops, list[i]);
        check_backend(&m);
        check_backend_batch(&m);
        gmtf_mtf_free(&m);
        assert_null(m.ops);
        ran++;
    }
    assert_true(ran >= 1);
    printf("# %zu of %zu MTF backends checked\n", ran, count);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_matches_naive),
        cmocka_unit_test(test_scalar_decode_any_ranks),
        cmocka_unit_test(test_backend_table),
        cmocka_unit_test(test_every_backend_matches_scalar),
        cmocka_unit_test(test_instances),
    };
    return cmocka_run_group_tests_name("mtf", tests, NULL, NULL);
}
