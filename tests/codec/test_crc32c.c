/* CRC-32C: published vectors, chaining, and the library (hardware path
 * where the CPU has SSE4.2) held against a bitwise reference at every
 * alignment and length class the word-at-a-time paths special-case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmtf_codec.h"
#include "test_util.h"

static void test_known_vectors(void **state)
{
    (void)state;
    assert_int_equal(gmtf_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(gmtf_crc32c(0, "", 0), 0u);
    assert_int_equal(gmtf_crc32c(0, "a", 1), 0xC1D04330u);

    /* RFC 3720 (iSCSI) B.4 test vectors. */
    uint8_t buf[32];
    memset(buf, 0, sizeof buf);
    assert_int_equal(gmtf_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    assert_int_equal(gmtf_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(gmtf_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(gmtf_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void test_reference_agrees(void **state)
{
    (void)state;
    /* The reference itself must reproduce the check value, or the rest of
     * this test proves nothing. */
    assert_int_equal(tu_crc32c_ref(0, "123456789", 9), 0xE3069283u);

    enum { MAXLEN = 4096 + 64 };
    uint8_t *buf = tu_malloc(MAXLEN + 16);
    tu_fill_random(buf, MAXLEN + 16, 42);
    for (size_t align = 0; align < 16; align++) {
        for (size_t n = 0; n <= 300; n++)
            assert_int_equal(gmtf_crc32c(0, buf + align, n), tu_crc32c_ref(0, buf + align, n));
        for (size_t n = 1000; n < MAXLEN; n += 997)
            assert_int_equal(gmtf_crc32c(0, buf + align, n), tu_crc32c_ref(0, buf + align, n));
    }
    free(buf);
}

static void test_large_buffer(void **state)
{
    (void)state;
    size_t n = (size_t)3 << 20;
    uint8_t *buf = tu_malloc(n + 1);
    tu_fill_random(buf, n + 1, 7);
    assert_int_equal(gmtf_crc32c(0, buf, n), tu_crc32c_ref(0, buf, n));
    assert_int_equal(gmtf_crc32c(0, buf + 1, n), tu_crc32c_ref(0, buf + 1, n));
    free(buf);
}

static void test_chaining(void **state)
{
    (void)state;
    enum { N = 1500 };
    uint8_t buf[N];
    tu_fill_text_like(buf, N, 3);
    uint32_t whole = gmtf_crc32c(0, buf, N);
    assert_int_equal(whole, tu_crc32c_ref(0, buf, N));
    for (size_t cut = 0; cut <= N; cut += (cut < 70 ? 1 : 61)) {
        uint32_t c = gmtf_crc32c(0, buf, cut);
        c = gmtf_crc32c(c, buf + cut, N - cut);
        assert_int_equal(c, whole);
    }
    /* Three pieces, one of them empty. */
    uint32_t c = gmtf_crc32c(0, buf, 100);
    c = gmtf_crc32c(c, buf + 100, 0);
    c = gmtf_crc32c(c, buf + 100, N - 100);
    assert_int_equal(c, whole);
}

static void test_detects_single_bit_errors(void **state)
{
    (void)state;
    enum { N = 257 };
    uint8_t buf[N];
    tu_fill_random(buf, N, 11);
    uint32_t good = gmtf_crc32c(0, buf, N);
    for (size_t bit = 0; bit < N * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_not_equal(gmtf_crc32c(0, buf, N), good);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}

/* Lengths that cross the paths' thresholds: the 8-byte loop, the
 * three-stream loop (3 x 8 KiB) and its remainders. */
static const size_t path_lens[] = {0,     1,     7,     8,         9,     63,     4096,
                                   24575, 24576, 24577, 49152 + 7, 73728, 100000, 262147};

/* Prints the CRC of fixed data at each length and alignment, one per line:
 * run in a child process whose environment picks the CRC path. */
static int dump_crcs(void)
{
    size_t max = 262147 + 16;
    uint8_t *buf = tu_malloc(max);
    tu_fill_random(buf, max, 1234);
    for (size_t a = 0; a < 8; a++)
        for (size_t i = 0; i < sizeof path_lens / sizeof path_lens[0]; i++)
            printf("%08x\n", (unsigned)gmtf_crc32c(0, buf + a, path_lens[i]));
    free(buf);
    return 0;
}

/* Runs this program with GMTF_CRC_SOFT=soft and --dump; reads its lines. */
static size_t run_dump(const char *soft, uint32_t *out, size_t max)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("GMTF_CRC_SOFT", soft, 1);
        execl("/proc/self/exe", "test_crc32c", "--dump", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    assert_non_null(f);
    size_t n = 0;
    unsigned v;
    while (n < max && fscanf(f, "%x", &v) == 1)
        out[n++] = v;
    fclose(f);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return n;
}

/* The SSE4.2 path and the table path (forced by GMTF_CRC_SOFT=1) give the
 * same values, both equal to the bitwise reference. */
static void test_hardware_vs_software(void **state)
{
    (void)state;
    enum { N = 8 * sizeof path_lens / sizeof path_lens[0] };
    uint32_t hw[N], sw[N];
    assert_int_equal(run_dump("0", hw, N), N);
    assert_int_equal(run_dump("1", sw, N), N);
    size_t max = 262147 + 16;
    uint8_t *buf = tu_malloc(max);
    tu_fill_random(buf, max, 1234);
    size_t k = 0;
    for (size_t a = 0; a < 8; a++)
        for (size_t i = 0; i < sizeof path_lens / sizeof path_lens[0]; i++, k++) {
            uint32_t ref = tu_crc32c_ref(0, buf + a, path_lens[i]);
            if (hw[k] != ref || sw[k] != ref)
                fail_msg("align %zu len %zu: default path %08x, table path %08x, reference %08x", a,
                         path_lens[i], hw[k], sw[k], ref);
        }
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--dump") == 0)
        return dump_crcs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_reference_agrees),
        cmocka_unit_test(test_large_buffer),
        cmocka_unit_test(test_chaining),
        cmocka_unit_test(test_detects_single_bit_errors),
        cmocka_unit_test(test_hardware_vs_software),
    };
    return cmocka_run_group_tests_name("crc32c", tests, NULL, NULL);
}
