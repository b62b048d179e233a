/* BWT: forward against a naive reference that sorts the n+1 rotations of
 * src + sentinel (the convention bwt.c documents: the sentinel row left
 * out of the output, its position the primary index idx[0], and idx[k]
 * the row of the rotation starting at k * ceil(n/K)); inverse round trips
 * through the sample indexes; hostile indexes and bytes give an error or
 * some output, never an out-of-bounds access. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bwt.h"
#include "gmtf_codec.h"
#include "test_util.h"

/* ---- naive reference: sort rotations ---------------------------------- */

static const uint8_t *rot_text;
static size_t rot_n; /* rotations of rot_text[0..rot_n) + sentinel */

/* Symbol j of the string text + sentinel: the sentinel (-1) sorts first. */
static int rot_sym(size_t j)
{
    return j == rot_n ? -1 : rot_text[j];
}

static int cmp_rot(const void *pa, const void *pb)
{
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb, m = rot_n + 1;
    for (size_t k = 0; k < m; k++) {
        int x = rot_sym((a + k) % m), y = rot_sym((b + k) % m);
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0; /* cannot happen: the sentinel is unique */
}

/* Fills out[0..n) and idx[0..count) the way the forward BWT must. */
static void naive_bwt(const uint8_t *src, size_t n, uint8_t *out, uint32_t *idx)
{
    size_t m = n + 1;
    size_t *rows = tu_malloc(m * sizeof *rows);
    for (size_t i = 0; i < m; i++)
        rows[i] = i;
    rot_text = src;
    rot_n = n;
    qsort(rows, m, sizeof *rows, cmp_rot);
    unsigned count = gmtf_bwt_index_count(n);
    size_t seg = (n + count - 1) / count;
    size_t j = 0;
    for (size_t r = 0; r < m; r++) {
        size_t start = rows[r];
        if (start == 0) {
            idx[0] = (uint32_t)r; /* its last symbol is the sentinel */
            continue;
        }
        out[j++] = src[start - 1];
        if (start % seg == 0 && start < n)
            idx[start / seg] = (uint32_t)r;
    }
    assert_int_equal(j, n);
    free(rows);
}

/* ---- inputs ----------------------------------------------------------- */

enum {
    IN_RANDOM,
    IN_TEXT,
    IN_BINARY2,
    IN_ONE,
    IN_PERIOD2,
    IN_PERIOD3,
    IN_PERIOD7,
    IN_ASC,
    IN_COUNT
};

static void fill_input(uint8_t *buf, size_t n, int kind, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case IN_RANDOM: buf[i] = (uint8_t)tu_rand(&s); break;
        case IN_BINARY2: buf[i] = (uint8_t)(tu_rand(&s) & 1); break;
        case IN_ONE: buf[i] = 'z'; break;
        case IN_PERIOD2: buf[i] = "ab"[i % 2]; break;
        case IN_PERIOD3: buf[i] = "abc"[i % 3]; break;
        case IN_PERIOD7: buf[i] = "abracad"[i % 7]; break;
        case IN_ASC: buf[i] = (uint8_t)i; break;
        default: break;
        }
    }
    if (kind == IN_TEXT)
        tu_fill_text_like(buf, n, seed);
}

static void check_forward(const uint8_t *src, size_t n, const char *what)
{
    uint32_t idx[GMTF_BWT_MAX_INDEXES], ref_idx[GMTF_BWT_MAX_INDEXES];
    uint8_t *out = tu_malloc(n), *ref = tu_malloc(n), *back = tu_malloc(n);
    void *ws = tu_malloc(gmtf_bwt_workspace_size(n));
    unsigned count = gmtf_bwt_index_count(n);
    assert_true(count >= 1 && count <= GMTF_BWT_MAX_INDEXES);
    memset(idx, 0xFF, sizeof idx);
    assert_int_equal(gmtf_bwt_forward(src, out, n, idx, ws), 0);
    naive_bwt(src, n, ref, ref_idx);
    if (memcmp(out, ref, n) != 0)
        fail_msg("forward BWT differs from sorted rotations: %s n=%zu", what, n);
    for (unsigned k = 0; k < count; k++)
        if (idx[k] != ref_idx[k])
            fail_msg("%s n=%zu: idx[%u] = %u, rotations say %u", what, n, k, idx[k], ref_idx[k]);
    assert_int_equal(gmtf_bwt_inverse(out, back, n, idx, ws), 0);
    if (memcmp(back, src, n) != 0)
        fail_msg("inverse BWT did not restore %s n=%zu", what, n);
    free(out), free(ref), free(back), free(ws);
}

static void test_forward_matches_naive_small(void **state)
{
    (void)state;
    uint8_t buf[700];
    for (size_t n = 1; n <= 40; n++)
        for (int kind = 0; kind < IN_COUNT; kind++) {
            fill_input(buf, n, kind, n * 13 + (size_t)kind);
            check_forward(buf, n, "small");
        }
    static const size_t more[] = {63, 64, 65, 255, 256, 257, 511, 699};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        for (int kind = 0; kind < IN_COUNT; kind++) {
            fill_input(buf, more[i], kind, i);
            check_forward(buf, more[i], "small");
        }
}

/* Sizes where the block carries 2, 3 and 4 sample indexes: the naive sort
 * stays affordable on data whose rotations differ early. */
static void test_forward_matches_naive_sampled(void **state)
{
    (void)state;
    static const size_t sizes[] = {(size_t)2 << 14, ((size_t)3 << 14) + 5, ((size_t)4 << 14) + 1};
    uint8_t *buf = tu_malloc(sizes[2]);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        assert_true(gmtf_bwt_index_count(sizes[i]) >= 2);
        fill_input(buf, sizes[i], IN_RANDOM, 100 + i);
        check_forward(buf, sizes[i], "random");
        fill_input(buf, sizes[i], IN_TEXT, 200 + i);
        check_forward(buf, sizes[i], "text");
    }
    free(buf);
}

static void test_index_count(void **state)
{
    (void)state;
    unsigned prev = 0;
    for (size_t n = 1; n <= GMTF_BLOCK_MAX; n = n * 3 / 2 + 1) {
        unsigned k = gmtf_bwt_index_count(n);
        assert_true(k >= 1 && k <= GMTF_BWT_MAX_INDEXES);
        assert_true(k >= prev);
        assert_true(k <= n);
        prev = k;
    }
    assert_true(gmtf_bwt_workspace_size(GMTF_BLOCK_MAX) >= GMTF_BLOCK_MAX);
}

/* Round trips through forward and inverse on sizes around the chain
 * split points, including the biggest block. */
static void test_round_trips(void **state)
{
    (void)state;
    static const size_t sizes[] = {1,     2,      3,      16383,   16384,
                                   16385, 32767,  32768,  32769,   49151,
                                   49153, 262144, 262145, 1000003, (size_t)16 << 20};
    size_t maxn = (size_t)16 << 20;
    uint8_t *src = tu_malloc(maxn), *bwt = tu_malloc(maxn), *back = tu_malloc(maxn);
    void *ws = tu_malloc(gmtf_bwt_workspace_size(maxn));
    uint32_t idx[GMTF_BWT_MAX_INDEXES];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        static const int kinds[] = {IN_RANDOM, IN_TEXT, IN_PERIOD3, IN_ONE, IN_BINARY2};
        for (size_t kk = 0; kk < sizeof kinds / sizeof kinds[0]; kk++) {
            if (n > ((size_t)1 << 22) && kk > 1)
                break; /* keep the biggest block to two kinds: time */
            fill_input(src, n, kinds[kk], i * 10 + kk);
            assert_int_equal(gmtf_bwt_forward(src, bwt, n, idx, ws), 0);
            memset(back, 0, n);
            assert_int_equal(gmtf_bwt_inverse(bwt, back, n, idx, ws), 0);
            if (memcmp(back, src, n) != 0)
                fail_msg("round trip failed: n=%zu kind=%d", n, kinds[kk]);
        }
    }
    free(src), free(bwt), free(back), free(ws);
}

static void test_forward_rejects_bad_sizes(void **state)
{
    (void)state;
    uint8_t b[1] = {0}, o[1];
    uint32_t idx[GMTF_BWT_MAX_INDEXES];
    void *ws = tu_malloc(gmtf_bwt_workspace_size(16));
    assert_true(gmtf_bwt_forward(b, o, 0, idx, ws) < 0);
    assert_true(gmtf_bwt_forward(b, o, (size_t)GMTF_BLOCK_MAX + 1, idx, ws) < 0);
    assert_true(gmtf_bwt_inverse(b, o, 0, idx, ws) < 0);
    assert_true(gmtf_bwt_inverse(b, o, (size_t)GMTF_BLOCK_MAX + 1, idx, ws) < 0);
    free(ws);
}

/* Indexes are untrusted: 0 and > n are rejected with GMTF_E_CORRUPT, any
 * in-range value yields some output without touching memory outside the
 * buffers (ASan and the guard zone check that). */
static void test_inverse_hostile_indexes(void **state)
{
    (void)state;
    size_t n = 70001; /* 4 indexes */
    unsigned count = gmtf_bwt_index_count(n);
    assert_true(count >= 2);
    uint8_t *src = tu_malloc(n), *bwt = tu_malloc(n);
    tu_guarded back = tu_guarded_alloc(n);
    void *ws = tu_malloc(gmtf_bwt_workspace_size(n));
    uint32_t idx[GMTF_BWT_MAX_INDEXES], bad[GMTF_BWT_MAX_INDEXES];
    fill_input(src, n, IN_TEXT, 5);
    assert_int_equal(gmtf_bwt_forward(src, bwt, n, idx, ws), 0);
    for (unsigned k = 0; k < count; k++) {
        static const uint32_t wrong[] = {0, 0xFFFFFFFFu, 0x80000000u, 0x01000000u};
        for (size_t w = 0; w < sizeof wrong / sizeof wrong[0]; w++) {
            memcpy(bad, idx, sizeof bad);
            bad[k] = wrong[w];
            assert_int_equal(gmtf_bwt_inverse(bwt, back.buf, n, bad, ws), GMTF_E_CORRUPT);
        }
        memcpy(bad, idx, sizeof bad);
        bad[k] = (uint32_t)n + 1;
        assert_int_equal(gmtf_bwt_inverse(bwt, back.buf, n, bad, ws), GMTF_E_CORRUPT);
        /* n itself is the last valid row */
        bad[k] = (uint32_t)n;
        assert_true(gmtf_bwt_inverse(bwt, back.buf, n, bad, ws) == 0 ||
                    gmtf_bwt_inverse(bwt, back.buf, n, bad, ws) == GMTF_E_CORRUPT);
        assert_true(tu_guard_ok(&back));
    }
    /* Random in-range indexes over random bytes. */
    uint64_t s = 17;
    for (int trial = 0; trial < 50; trial++) {
        tu_fill_random(bwt, n, (uint64_t)trial);
        for (unsigned k = 0; k < count; k++)
            bad[k] = 1 + (uint32_t)tu_rand_below(&s, n);
        int r = gmtf_bwt_inverse(bwt, back.buf, n, bad, ws);
        assert_true(r == 0 || r == GMTF_E_CORRUPT);
        assert_true(tu_guard_ok(&back));
    }
    free(src), free(bwt), free(ws);
    tu_guarded_free(&back);
}

/* The inverse with counts given (gmtf_bwt_inverse_counted): parts of any
 * lengths, empty ones included, give the block back; counts that do not
 * add up to their parts, or parts out of order, are GMTF_E_CORRUPT before
 * the table is touched. */
static void test_inverse_counted(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 3, 17, 40000, 300001, 1 << 20};
    size_t maxn = 1 << 20;
    uint8_t *src = tu_malloc(maxn), *bwt = tu_malloc(maxn), *back = tu_malloc(maxn);
    void *ws = tu_malloc(gmtf_bwt_workspace_size(maxn));
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    uint64_t seed = 3;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        fill_input(src, n, i % 2 ? IN_TEXT : IN_BINARY2, i);
        assert_int_equal(gmtf_bwt_forward_step(src, bwt, n, idx, ws), 0);
        for (int t = 0; t < 4; t++) {
            gmtf_bwt_counts c;
            memset(&c, 0, sizeof c);
            /* random cut points, sorted; t = 0: all in the last part */
            uint32_t cut[3];
            for (unsigned k = 0; k < 3; k++)
                cut[k] = t ? (uint32_t)tu_rand_below(&seed, n + 1) : 0;
            for (unsigned a = 0; a < 3; a++)
                for (unsigned b = a + 1; b < 3; b++)
                    if (cut[b] < cut[a]) {
                        uint32_t x = cut[a];
                        cut[a] = cut[b];
                        cut[b] = x;
                    }
            c.start[1] = cut[0], c.start[2] = cut[1], c.start[3] = cut[2];
            c.start[4] = (uint32_t)n;
            for (unsigned k = 0; k < 4; k++)
                for (size_t j = c.start[k]; j < c.start[k + 1]; j++)
                    c.cnt[k][bwt[j]]++;
            memset(back, 0, n);
            assert_int_equal(gmtf_bwt_inverse_counted(bwt, back, n, idx, ws, &c), 0);
            assert_memory_equal(back, src, n);
            gmtf_bwt_counts bad = c;
            bad.cnt[t][bwt[0]]++;
            assert_int_equal(gmtf_bwt_inverse_counted(bwt, back, n, idx, ws, &bad), GMTF_E_CORRUPT);
            bad = c;
            bad.start[4] = (uint32_t)n + 1;
            assert_int_equal(gmtf_bwt_table_counted(bwt, n, idx, ws, &bad), GMTF_E_CORRUPT);
            if (n > 1) {
                bad = c;
                bad.start[1] = (uint32_t)n;
                bad.start[2] = 0;
                assert_int_equal(gmtf_bwt_table_counted(bwt, n, idx, ws, &bad), GMTF_E_CORRUPT);
            }
        }
    }
    free(src), free(bwt), free(back), free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_count),
        cmocka_unit_test(test_forward_matches_naive_small),
        cmocka_unit_test(test_forward_matches_naive_sampled),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_forward_rejects_bad_sizes),
        cmocka_unit_test(test_inverse_hostile_indexes),
        cmocka_unit_test(test_inverse_counted),
    };
    return cmocka_run_group_tests_name("bwt", tests, NULL, NULL);
}
