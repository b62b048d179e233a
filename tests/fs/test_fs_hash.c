/* The name and content hashes spread what real trees hold over the bits
 * that index their tables (issue #10: names f0..f19999 took 2,000 values
 * of the old name hash, chains of 10,000 in one directory). The old hash
 * (fs_hash64) stays for the format's journal ids: its values are fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fs_internal.h"

#define N 40000u
#define TABLE (1u << 16)

/* Buckets used and the longest chain of keys[0..n) in a table of TABLE. */
static void spread(const uint32_t *keys, size_t n, unsigned *used, unsigned *longest)
{
    uint16_t *count = calloc(TABLE, sizeof *count);
    assert_non_null(count);
    *used = *longest = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t *c = &count[keys[i] & (TABLE - 1)];
        *used += *c == 0;
        if (++*c > *longest)
            *longest = *c;
    }
    free(count);
}

/* 40,000 keys in 65,536 buckets at random: about 30,000 used, chains of 6
 * to 8. The bounds leave room and still fail any hash that ignores bytes. */
static void check_spread(const uint32_t *keys, const char *what)
{
    unsigned used, longest;
    spread(keys, N, &used, &longest);
    if (used < 28000 || longest > 12)
        fail_msg("%s: %u buckets of %u used, longest chain %u", what, used, TABLE, longest);
}

static void test_name_hash_sequential_names(void **state)
{
    (void)state;
    uint32_t *h = malloc(N * sizeof *h);
    assert_non_null(h);
    char name[32];
    for (unsigned i = 0; i < N; i++) {
        int n = snprintf(name, sizeof name, "f%u", i);
        h[i] = name_hash(7, name, (size_t)n);
    }
    check_spread(h, "f0..f39999 in one directory");
    for (unsigned i = 0; i < N; i++) { /* zero-padded, as many tools number files */
        int n = snprintf(name, sizeof name, "img_%06u.jpg", i);
        h[i] = name_hash(GMTF_ROOT_INO, name, (size_t)n);
    }
    check_spread(h, "img_000000.jpg.. in the root");
    free(h);
}

static void test_name_hash_same_name_many_dirs(void **state)
{
    (void)state;
    uint32_t *h = malloc(N * sizeof *h);
    assert_non_null(h);
    for (unsigned i = 0; i < N; i++) /* Makefile in 40,000 directories */
        h[i] = name_hash(i + 2, "Makefile", 8);
    check_spread(h, "one name in 40,000 directories");
    free(h);
}

static void test_content_hash_small_blocks(void **state)
{
    (void)state;
    uint32_t *h = malloc(N * sizeof *h);
    assert_non_null(h);
    char data[32];
    for (unsigned i = 0; i < N; i++) {
        int n = snprintf(data, sizeof data, "file %u\n", i);
        h[i] = (uint32_t)hash_bytes(data, (size_t)n, 0);
    }
    check_spread(h, "small contents");
    free(h);
}

/* fs_hash64 names journals on existing images: its values never change.
 * The two values were computed by the function as of format version 2
 * (fs/util.c at 21cc11e). */
static void test_format_hash_fixed(void **state)
{
    (void)state;
    uint8_t uuid[16];
    for (int i = 0; i < 16; i++)
        uuid[i] = (uint8_t)(i * 17 + 1);
    assert_int_equal(fs_hash64(uuid, 16, 5), 0x82ac31f47003b610ull);
    assert_int_equal(fs_hash64("gmtf journal", 12, 1234567), 0x975376247681d179ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_hash_sequential_names),
        cmocka_unit_test(test_name_hash_same_name_many_dirs),
        cmocka_unit_test(test_content_hash_small_blocks),
        cmocka_unit_test(test_format_hash_fixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
