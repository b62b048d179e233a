/* tools/cli.c, the pieces every program shares: the CPU selection behind
 * gmtf-stat's percentiles (against a sort, on keys with many repeats and
 * adversarial orders), the name escaping of the JSON outputs (valid UTF-8
 * always, and reversible for any bytes), the one ratio and the UUID text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_select(double *v, size_t n)
{
    double *sorted = malloc(n * sizeof *sorted), *work = malloc(n * sizeof *work);
    memcpy(sorted, v, n * sizeof *v);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    size_t ks[] = {0, n / 100, n / 4, n / 2, 3 * n / 4, n - 1 - n / 100, n - 1};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        memcpy(work, v, n * sizeof *v);
        assert_true(cli_select_f64(work, n, ks[i]) == sorted[ks[i]]);
    }
    /* several selections on the same (reordered) array, as gmtf-stat does */
    memcpy(work, v, n * sizeof *v);
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        assert_true(cli_select_f64(work, n, ks[i]) == sorted[ks[i]]);
    free(sorted);
    free(work);
}

static void test_select(void **state)
{
    (void)state;
    size_t sizes[] = {1, 2, 3, 7, 100, 1001, 65536};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        double *v = malloc(n * sizeof *v);
        for (int kind = 0; kind < 5; kind++) {
            for (size_t i = 0; i < n; i++) {
                switch (kind) {
                case 0: v[i] = (double)(next() % 1000000) / 997.0; break; /* random */
                case 1: v[i] = (double)(next() % 3); break;               /* few values */
                case 2: v[i] = 4.5; break;                                /* all equal */
                case 3: v[i] = (double)i; break;                          /* sorted */
                default: v[i] = (double)(n - i) * 0.25;                   /* reversed */
                }
            }
            check_select(v, n);
        }
        free(v);
    }
}

/* Inverse of cli_name_utf8 (as docs/gmtf-stat.1 describes it). */
static size_t unescape(const char *s, char *out)
{
    size_t k = 0;
    while (*s) {
        if (s[0] == '\\' && s[1] == '\\') {
            out[k++] = '\\';
            s += 2;
        } else if (s[0] == '\\' && s[1] == 'x') {
            unsigned v;
            assert_int_equal(sscanf(s + 2, "%2x", &v), 1);
            out[k++] = (char)v;
            s += 4;
        } else {
            out[k++] = *s++;
        }
    }
    out[k] = 0;
    return k;
}

/* A strict UTF-8 check (no overlong forms, surrogates, or past U+10FFFF). */
static int valid_utf8(const unsigned char *s)
{
    while (*s) {
        int n = *s < 0x80             ? 1
                : (*s & 0xe0) == 0xc0 ? 2
                : (*s & 0xf0) == 0xe0 ? 3
                : (*s & 0xf8) == 0xf0 ? 4
                                      : 0;
        if (!n || (n == 2 && *s < 0xc2) || (n == 4 && *s > 0xf4))
            return 0;
        for (int i = 1; i < n; i++)
            if ((s[i] & 0xc0) != 0x80)
                return 0;
        if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
            (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
            return 0;
        s += n;
    }
    return 1;
}

static void test_name_utf8(void **state)
{
    (void)state;
    char *e = cli_name_utf8("plain.c");
    assert_string_equal(e, "plain.c");
    free(e);
    e = cli_name_utf8("a\\b\xe9t\xc3\xa9");
    assert_string_equal(e, "a\\\\b\\xe9t\xc3\xa9"); /* é kept, lone 0xe9 escaped */
    free(e);
    e = cli_name_utf8("\xed\xa0\x80\xf4\x90\x80\x80\xc0\xaf"); /* surrogate, > U+10FFFF, overlong */
    assert_string_equal(e, "\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\\xc0\\xaf");
    free(e);
    char in[64], back[64];
    for (int t = 0; t < 20000; t++) {
        size_t n = 1 + next() % 40;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next();
            in[i] = (char)(r % 4 == 0 ? '\\' : r % 4 == 1 ? 'x' : 1 + (r >> 8) % 255);
        }
        in[n] = 0;
        e = cli_name_utf8(in);
        assert_non_null(e);
        assert_true(valid_utf8((const unsigned char *)e));
        assert_int_equal(unescape(e, back), n);
        assert_memory_equal(back, in, n + 1);
        free(e);
    }
}

static void test_ratio_uuid(void **state)
{
    (void)state;
    assert_true(cli_ratio(1000, 250) == 4.0);
    assert_true(cli_ratio(1000, 0) == 0.0);
    const uint8_t u[16] = {0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78,
                           0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0};
    char s[37];
    cli_uuid_string(u, s);
    assert_string_equal(s, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_name_utf8),
        cmocka_unit_test(test_ratio_uuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
