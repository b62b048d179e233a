/* Near-duplicate clustering of a flush's small pieces (fs/similar.c): a
 * piece whose lines mostly match an earlier one's joins its cluster, and
 * nothing else moves. docs/format.md, "Packing order". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fs_internal.h"

static uint64_t rng = 88172645463325252ull;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* Lines of text: "line <tag> <k> ..." for k in [0, lines); line k of tag
 * `alt` instead where mask bit k is set. */
static uint8_t *text(unsigned tag, unsigned lines, unsigned alt, uint64_t mask, uint32_t *len)
{
    size_t cap = (size_t)lines * 64 + 1;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t n = 0;
    for (unsigned k = 0; k < lines; k++)
        n += (size_t)snprintf(b + n, cap - n, "static int value_%u_%u = %u;\n",
                              (mask >> k) & 1 ? alt : tag, k, k * 7);
    *len = (uint32_t)n;
    return (uint8_t *)b;
}

static void test_clusters(void **state)
{
    (void)state;
    enum { N = 8 };
    uint8_t *buf[N];
    uint32_t len[N], root[N];
    buf[0] = text(1, 40, 0, 0, &len[0]);   /* A */
    buf[1] = text(2, 40, 0, 0, &len[1]);   /* B, unrelated */
    buf[2] = text(1, 40, 9, 0x3, &len[2]); /* A with 2 of 40 lines changed */
    buf[3] = text(1, 3, 0, 0, &len[3]);    /* too few lines */
    buf[4] = malloc(4096);                 /* bytes without lines */
    assert_non_null(buf[4]);
    for (int i = 0; i < 4096; i++) {
        uint8_t v = (uint8_t)next();
        buf[4][i] = v == '\n' ? 0 : v;
    }
    len[4] = 4096;
    buf[5] = text(3, 40, 0, 0, &len[5]);        /* C, unrelated */
    buf[6] = text(2, 40, 5, 0xff00ff, &len[6]); /* B with 16 of 40 changed: J = 0.43 */
    buf[7] = text(1, 40, 0, 0, &len[7]);        /* A again */
    assert_int_equal(fs_similar_roots((const uint8_t *const *)buf, len, N, 4, root), 0);
    assert_int_equal(root[0], 0);
    assert_int_equal(root[1], 1);
    assert_int_equal(root[2], 0);
    assert_int_equal(root[3], 3);
    assert_int_equal(root[4], 4);
    assert_int_equal(root[5], 5);
    assert_int_equal(root[7], 0);
    /* the same answer every time (images are reproducible) */
    uint32_t again[N];
    assert_int_equal(fs_similar_roots((const uint8_t *const *)buf, len, N, 1, again), 0);
    assert_memory_equal(root, again, sizeof root);
    for (int i = 0; i < N; i++) {
        assert_true(root[i] <= (uint32_t)i);
        assert_int_equal(root[root[i]], root[i]);
        free(buf[i]);
    }
}

/* Many copies of one piece and many distinct ones: roots before members,
 * every copy in the first copy's cluster, distinct pieces alone; the
 * buckets' walks stay bounded (SIM_CHAIN). */
static void test_many(void **state)
{
    (void)state;
    enum { N = 20000 };
    uint8_t **buf = malloc(N * sizeof *buf);
    uint32_t *len = malloc(N * sizeof *len), *root = malloc(N * sizeof *root);
    assert_true(buf && len && root);
    for (unsigned i = 0; i < N; i++)
        buf[i] = i % 2 ? text(7, 20, 0, 0, &len[i]) : text(1000 + i, 20, 0, 0, &len[i]);
    assert_int_equal(fs_similar_roots((const uint8_t *const *)buf, len, N, 4, root), 0);
    for (unsigned i = 0; i < N; i++) {
        assert_int_equal(root[i], i % 2 ? 1 : i);
        free(buf[i]);
    }
    /* none and one piece */
    assert_int_equal(fs_similar_roots(NULL, NULL, 0, 1, root), 0);
    uint32_t l1 = 0;
    const uint8_t *b1 = (const uint8_t *)"";
    assert_int_equal(fs_similar_roots(&b1, &l1, 1, 1, root), 0);
    assert_int_equal(root[0], 0);
    free(buf);
    free(len);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clusters),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
