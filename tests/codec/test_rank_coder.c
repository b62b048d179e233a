/* Rank coder (rank_coder.h): zero-run coding, the entropy coder and the
 * combined gmtf_rank_* entry points. Round trips on edge cases, random and
 * real MTF ranks; -ENOSPC and -EINVAL paths; hostile input (mutated,
 * truncated, random payloads) must give an error or the right ranks, never
 * a write past n, a crash or a hang. */
#include <errno.h>
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
#include "mtf.h"
#include "rank_coder.h"
#include "test_util.h"

#define MIB (1u << 20)
#define BLOCK (900u << 10)

/* ---- helpers ------------------------------------------------------------ */

/* Both stage paths and the fused path round-trip ranks[0..n); the encoded
 * size of the fused path is returned. */
static long roundtrip_all(const uint8_t *ranks, size_t n)
{
    void *ws = tu_malloc(gmtf_rank_workspace_size(n));
    size_t cap = n + n / 8 + 4096; /* uniform ranks expand a little */
    uint8_t *enc = tu_malloc(cap);

    /* stages: zrle -> entropy and back */
    uint16_t *syms = tu_malloc((n + 1) * sizeof(uint16_t));
    uint16_t *syms2 = tu_malloc((n + 1) * sizeof(uint16_t));
    size_t count = gmtf_zrle_encode(ranks, n, syms);
    assert_true(count <= n);
    long elen = gmtf_entropy_encode(syms, count, enc, cap, ws);
    assert_true(elen > 0);
    assert_int_equal(gmtf_entropy_decode(enc, (size_t)elen, syms2, count, ws), 0);
    assert_memory_equal(syms, syms2, count * sizeof(uint16_t));
    tu_guarded back = tu_guarded_alloc(n);
    assert_int_equal(gmtf_zrle_decode(syms2, count, back.buf, n), 0);
    assert_memory_equal(back.buf, ranks, n);
    assert_true(tu_guard_ok(&back));

    /* the stage encoder always writes method 0 (adaptive) */
    assert_int_equal(enc[0], 0);
    /* fused entry points: method 0 gives the same bytes as the two stages;
     * method 1 (semi-static rANS) only for blocks of 64 KiB or more */
    uint8_t *enc2 = tu_malloc(cap);
    memcpy(enc2, enc, (size_t)elen);
    long len = gmtf_rank_encode(ranks, n, enc, cap, ws);
    assert_true(len > 0);
    assert_true(enc[0] == 0 || enc[0] == 1);
    if (enc[0] == 0) {
        assert_int_equal(len, elen);
        assert_memory_equal(enc, enc2, (size_t)len);
    } else {
        assert_true(n >= (64u << 10));
    }
    free(enc2);
    memset(back.buf, 0xAA, n);
    assert_int_equal(gmtf_rank_decode(enc, (size_t)len, back.buf, n, ws), 0);
    assert_memory_equal(back.buf, ranks, n);
    assert_true(tu_guard_ok(&back));
    /* the stage decoder reads either method: the same symbols */
    assert_int_equal(gmtf_entropy_decode(enc, (size_t)len, syms2, count, ws), 0);
    assert_memory_equal(syms, syms2, count * sizeof(uint16_t));

    tu_guarded_free(&back);
    free(syms2);
    free(syms);
    free(enc);
    free(ws);
    return len;
}

/* Ranks of real data: BWT then scalar MTF, one block. */
static void mtf_ranks_of(const uint8_t *src, size_t n, uint8_t *ranks)
{
    void *ws = tu_malloc(gmtf_bwt_workspace_size(n));
    uint8_t *bwt = tu_malloc(n);
    uint32_t idx[GMTF_BWT_MAX_INDEXES];
    assert_int_equal(gmtf_bwt_forward(src, bwt, n, idx, ws), 0);
    gmtf_mtf_encode_scalar(bwt, ranks, n);
    free(bwt);
    free(ws);
}

/* Geometric-ish ranks with zero runs, like MTF output of text. */
static void fill_skewed_ranks(uint8_t *r, size_t n, uint64_t seed)
{
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = tu_rand(&st);
        unsigned v = (unsigned)__builtin_ctzll(x | (1ull << 40)); /* P(v) = 2^-(v+1) */
        if (v > 8)
            v = 8 + (unsigned)((x >> 48) % 248);
        r[i] = (uint8_t)v;
    }
}

/* ---- zero-run stage ------------------------------------------------------ */

static void test_zrle_known_symbols(void **state)
{
    (void)state;
    /* 5 zeros = 1*1 + 2*2: RUNA RUNB; rank 3 -> 4; 2 zeros = 2: RUNB;
     * 1 zero: RUNA; rank 255 -> 256. */
    const uint8_t ranks[] = {0, 0, 0, 0, 0, 3, 0, 0, 255, 0};
    const uint16_t want[] = {GMTF_SYM_RUNA, GMTF_SYM_RUNB, 4, GMTF_SYM_RUNB, 256, GMTF_SYM_RUNA};
    uint16_t syms[sizeof ranks + 1];
    size_t count = gmtf_zrle_encode(ranks, sizeof ranks, syms);
    assert_int_equal(count, sizeof want / sizeof want[0]);
    assert_memory_equal(syms, want, sizeof want);
}

static void test_zrle_run_lengths(void **state)
{
    (void)state;
    /* every run length from 1 to 600 alone and between ranks */
    uint8_t buf[602];
    uint16_t syms[603];
    uint8_t back[602];
    for (size_t len = 1; len <= 600; len++) {
        memset(buf, 0, sizeof buf);
        buf[0] = 7;
        buf[len + 1] = 1;
        size_t count = gmtf_zrle_encode(buf, len + 2, syms);
        assert_true(count <= len + 2);
        assert_int_equal(gmtf_zrle_decode(syms, count, back, len + 2), 0);
        assert_memory_equal(back, buf, len + 2);
        count = gmtf_zrle_encode(buf + 1, len, syms);
        assert_int_equal(gmtf_zrle_decode(syms, count, back, len), 0);
        assert_memory_equal(back, buf + 1, len);
    }
}

static void test_zrle_decode_rejects(void **state)
{
    (void)state;
    uint8_t out[16];
    /* run of 3 into n = 2 */
    const uint16_t over[] = {GMTF_SYM_RUNA, GMTF_SYM_RUNA};
    assert_int_equal(gmtf_zrle_decode(over, 2, out, 2), GMTF_E_CORRUPT);
    /* too few outputs */
    const uint16_t few[] = {5, 6};
    assert_int_equal(gmtf_zrle_decode(few, 2, out, 3), GMTF_E_CORRUPT);
    /* too many outputs */
    assert_int_equal(gmtf_zrle_decode(few, 2, out, 1), GMTF_E_CORRUPT);
    /* symbol beyond 256 */
    const uint16_t big[] = {257};
    assert_int_equal(gmtf_zrle_decode(big, 1, out, 1), GMTF_E_CORRUPT);
    /* 70 digits: the place value would overflow without the check */
    uint16_t many[70];
    for (int i = 0; i < 70; i++)
        many[i] = GMTF_SYM_RUNB;
    assert_int_equal(gmtf_zrle_decode(many, 70, out, 16), GMTF_E_CORRUPT);
    /* exact fit works */
    const uint16_t ok[] = {GMTF_SYM_RUNB, 2};
    assert_int_equal(gmtf_zrle_decode(ok, 2, out, 3), 0);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 0);
    assert_int_equal(out[2], 1);
}

/* ---- round trips ----------------------------------------------------------- */

static void test_roundtrip_single(void **state)
{
    (void)state;
    for (unsigned v = 0; v < 256; v++) {
        uint8_t r = (uint8_t)v;
        assert_true(roundtrip_all(&r, 1) > 0);
    }
}

static void test_roundtrip_zeros(void **state)
{
    (void)state;
    /* up to GMTF_BLOCK_MAX: the longest run, the widest direct bits */
    const size_t sizes[] = {1, 2, 3, 255, 256, 65536, 65537, MIB, GMTF_BLOCK_MAX};
    uint8_t *z = tu_calloc(GMTF_BLOCK_MAX);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        long len = roundtrip_all(z, sizes[i]);
        assert_true(len <= 16); /* one run: a handful of bytes */
    }
    free(z);
}

static void test_roundtrip_all_ranks(void **state)
{
    (void)state;
    size_t n = 256 * 40;
    uint8_t *r = tu_malloc(n);
    for (size_t i = 0; i < n; i++)
        r[i] = (uint8_t)(i * 7 % 256); /* every rank, no two zeros in a row */
    roundtrip_all(r, n);
    for (size_t i = 0; i < n; i++)
        r[i] = (uint8_t)(i % 512 < 256 ? i % 256 : 0); /* ranks then a long run */
    roundtrip_all(r, n);
    free(r);
}

static void test_roundtrip_random(void **state)
{
    (void)state;
    size_t n = MIB;
    uint8_t *r = tu_malloc(n);
    tu_fill_random(r, n, 1);
    long len = roundtrip_all(r, n);
    assert_true((size_t)len < n + n / 16); /* uniform ranks: about 8 bits each */
    fill_skewed_ranks(r, n, 2);
    roundtrip_all(r, n);
    for (size_t n2 = 1; n2 < 300; n2 += 7) {
        fill_skewed_ranks(r, n2, n2);
        roundtrip_all(r, n2);
    }
    free(r);
}

static void test_roundtrip_corpus(void **state)
{
    (void)state;
    tu_files files = tu_corpus_files();
    if (files.count == 0) {
        printf("rank_coder: no corpus ($GMTF_CORPUS), real MTF ranks skipped\n");
        files = tu_system_files(8, 2 * MIB);
    }
    size_t total_in = 0, total_out = 0;
    uint8_t *ranks = tu_malloc(BLOCK);
    for (size_t f = 0; f < files.count; f++) {
        for (size_t o = 0; o < files.v[f].len; o += BLOCK) {
            size_t n = files.v[f].len - o < BLOCK ? files.v[f].len - o : BLOCK;
            mtf_ranks_of(files.v[f].data + o, n, ranks);
            long len = roundtrip_all(ranks, n);
            total_in += n;
            total_out += (size_t)len;
        }
    }
    if (total_in)
        printf("rank_coder: %zu ranks of real data -> %zu bytes (%.3f bits/byte)\n", total_in,
               total_out, 8.0 * (double)total_out / (double)total_in);
    /* real data compresses: well under 8 bits per rank */
    assert_true(total_in == 0 || total_out * 2 < total_in);
    free(ranks);
    tu_files_free(&files);
}

/* ---- capacity and invalid input to the encoder ----------------------------- */

static void test_enospc(void **state)
{
    (void)state;
    size_t n = 200000;
    uint8_t *r = tu_malloc(n);
    fill_skewed_ranks(r, n, 3);
    void *ws = tu_malloc(gmtf_rank_workspace_size(n));
    uint8_t *enc = tu_malloc(2 * n);
    long len = gmtf_rank_encode(r, n, enc, 2 * n, ws);
    assert_true(len > 0);
    /* exactly enough works, one byte less does not, and nothing is
     * written past cap */
    tu_guarded g = tu_guarded_alloc((size_t)len);
    assert_int_equal(gmtf_rank_encode(r, n, g.buf, (size_t)len, ws), len);
    assert_memory_equal(g.buf, enc, (size_t)len);
    assert_true(tu_guard_ok(&g));
    const size_t caps[] = {(size_t)len - 1, (size_t)len / 2, 5, 1, 0};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        tu_guard_set(&g, caps[i]);
        assert_int_equal(gmtf_rank_encode(r, n, g.buf, caps[i], ws), -ENOSPC);
        assert_true(tu_guard_ok(&g));
    }
    /* random ranks do not fit in n bytes: the frame stores such blocks raw */
    tu_fill_random(r, n, 4);
    assert_int_equal(gmtf_rank_encode(r, n, enc, n, ws), -ENOSPC);
    tu_guarded_free(&g);
    free(enc);
    free(ws);
    free(r);
}

static void test_entropy_rejects_bad_symbols(void **state)
{
    (void)state;
    void *ws = tu_malloc(gmtf_rank_workspace_size(64));
    uint8_t out[256];
    const uint16_t big[] = {2, 257};
    assert_int_equal(gmtf_entropy_encode(big, 2, out, sizeof out, ws), -EINVAL);
    uint16_t digits[40];
    for (int i = 0; i < 40; i++)
        digits[i] = GMTF_SYM_RUNA;
    assert_int_equal(gmtf_entropy_encode(digits, 40, out, sizeof out, ws), -EINVAL);
    free(ws);
}

/* ---- hostile input ----------------------------------------------------------- */

/* Decodes src into a guarded buffer of n ranks; checks the promise:
 * 0 and the right ranks, or a GMTF_E_* code; nothing written past n.
 * Returns 1 when the decoder said 0 but the ranks differ (possible: this
 * layer has no checksum; the frame's CRC-32C catches those). */
static int hostile_decode(const uint8_t *src, size_t len, const uint8_t *want, size_t n,
                          tu_guarded *g, void *ws)
{
    int rc = gmtf_rank_decode(src, len, g->buf, n, ws);
    assert_true(tu_guard_ok(g));
    if (rc != 0) {
        assert_true(rc == GMTF_E_CORRUPT || rc == GMTF_E_TRUNCATED);
        return 0;
    }
    return memcmp(g->buf, want, n) != 0;
}

static void mutate_sample(const uint8_t *ranks, size_t n, long iterations, uint64_t seed)
{
    void *ws = tu_malloc(gmtf_rank_workspace_size(n));
    size_t cap = n + 4096;
    uint8_t *enc = tu_malloc(cap), *bad = tu_malloc(cap + 64);
    long len = gmtf_rank_encode(ranks, n, enc, cap, ws);
    assert_true(len > 0);
    int method = enc[0];
    tu_guarded g = tu_guarded_alloc(n);
    uint64_t st = seed;
    long silent = 0;
    for (long it = 0; it < iterations; it++) {
        size_t blen = (size_t)len;
        memcpy(bad, enc, blen);
        switch (it % 4) {
        case 0: /* flip one bit */
            bad[tu_rand_below(&st, blen)] ^= (uint8_t)(1u << tu_rand_below(&st, 8));
            break;
        case 1: /* random bytes at random places */
            for (int k = 0; k < 1 + (int)tu_rand_below(&st, 4); k++)
                bad[tu_rand_below(&st, blen)] = (uint8_t)tu_rand(&st);
            break;
        case 2: /* truncate */ blen = tu_rand_below(&st, blen); break;
        default: /* append garbage */
            for (int k = 0; k < 1 + (int)tu_rand_below(&st, 32); k++)
                bad[blen++] = (uint8_t)tu_rand(&st);
            break;
        }
        silent += hostile_decode(bad, blen, ranks, n, &g, ws);
    }
    printf("rank_coder: method %d, %ld mutations, %ld decoded to other ranks without an error\n",
           method, iterations, silent);
    /* the end-of-stream checks reject nearly all damage by themselves */
    assert_true(silent * 20 <= iterations);
    tu_guarded_free(&g);
    free(bad);
    free(enc);
    free(ws);
}

static void test_mutations(void **state)
{
    (void)state;
    long iters = tu_env_long("GMTF_CODER_MUTATIONS", 6000);
    size_t n = 20000;
    uint8_t *r = tu_malloc(n);
    fill_skewed_ranks(r, n, 5);
    mutate_sample(r, n, iters, 11);
    tu_files files = tu_corpus_files();
    if (files.count == 0) {
        printf("rank_coder: no corpus, mutating system data instead\n");
        files = tu_system_files(1, 64 << 10);
    }
    if (files.count) {
        size_t m = files.v[0].len < (64u << 10) ? files.v[0].len : (64u << 10);
        uint8_t *ranks = tu_malloc(m);
        mtf_ranks_of(files.v[0].data, m, ranks);
        mutate_sample(ranks, m, iters / 2, 12);
        free(ranks);
    }
    tu_files_free(&files);
    free(r);
}

/* Blocks of 64 KiB and more with stable statistics take method 1; small
 * blocks method 0; both survive mutation. */
static void test_method_choice(void **state)
{
    (void)state;
    size_t n = 300000;
    uint8_t *r = tu_malloc(n);
    fill_skewed_ranks(r, n, 7);
    void *ws = tu_malloc(gmtf_rank_workspace_size(n));
    uint8_t *enc = tu_malloc(2 * n);
    long len = gmtf_rank_encode(r, n, enc, 2 * n, ws);
    assert_true(len > 0);
    assert_int_equal(enc[0], 1);
    mutate_sample(r, n, tu_env_long("GMTF_CODER_MUTATIONS", 6000) / 2, 13);
    len = gmtf_rank_encode(r, 1000, enc, 2 * n, ws);
    assert_true(len > 0);
    assert_int_equal(enc[0], 0);
    /* skewed ranks with runs of every bit count k up to 19 (two raw pieces
     * above k = 18) mixed in: still method 1 */
    size_t big = 1u << 21;
    uint8_t *z = tu_malloc(big);
    fill_skewed_ranks(z, big, 8);
    size_t pos = 0;
    for (unsigned k = 0; k < 20; k++) {
        pos += 20000;
        size_t run = ((size_t)1 << k) + (size_t)k * 977 % ((size_t)1 << k);
        memset(z + pos, 0, run);
        pos += run;
        z[pos] = (uint8_t)(1 + k);
    }
    assert_true(pos < big);
    len = roundtrip_all(z, big);
    uint8_t *enc2 = tu_malloc(2 * big);
    void *ws2 = tu_malloc(gmtf_rank_workspace_size(big));
    assert_int_equal(gmtf_rank_encode(z, big, enc2, 2 * big, ws2), len);
    assert_int_equal(enc2[0], 1);
    free(ws2);
    free(enc2);
    free(z);
    free(enc);
    free(ws);
    free(r);
}

static void test_constant_payloads(void **state)
{
    (void)state;
    /* All 0xFF makes every decision a 1: the longest run-length codes and
     * the widest direct-bit reads (a division by zero once, found by the
     * frame fuzzer). All 0x00 and alternating bytes probe the other ends. */
    const uint8_t fills[] = {0xFF, 0x00, 0x55, 0xAA, 0x80, 0x7F};
    const size_t sizes[] = {1, 2, 17, 70000, 1u << 20};
    void *ws = tu_malloc(gmtf_rank_workspace_size(1u << 20));
    uint16_t *syms = tu_malloc(((1u << 20) + 1) * sizeof(uint16_t));
    uint8_t src[64];
    for (size_t f = 0; f < sizeof fills; f++) {
        memset(src, fills[f], sizeof src);
        for (size_t s = 0; s < 3 * (sizeof sizes / sizeof sizes[0]); s++) {
            /* as it is, then behind method byte 0, then 1 */
            if (s % 3)
                src[0] = (uint8_t)(s % 3 - 1);
            else
                src[0] = fills[f];
            tu_guarded g = tu_guarded_alloc(sizes[s / 3]);
            for (size_t len = 0; len <= sizeof src; len += 3) {
                int rc = gmtf_rank_decode(src, len, g.buf, sizes[s / 3], ws);
                assert_true(rc == 0 || rc == GMTF_E_CORRUPT || rc == GMTF_E_TRUNCATED);
                assert_true(tu_guard_ok(&g));
                rc = gmtf_entropy_decode(src, len, syms, sizes[s / 3], ws);
                assert_true(rc == 0 || rc == GMTF_E_CORRUPT || rc == GMTF_E_TRUNCATED);
            }
            tu_guarded_free(&g);
        }
    }
    free(syms);
    free(ws);
}

static void test_fuzzer_payload(void **state)
{
    (void)state;
    /* The payload of the frame the fuzzer found (tests/codec/test_crafted.c):
     * a run of 2^30 asked for 28 direct bits at once, and the range
     * shifted right by 28 was 0. Behind method byte 0 (method 0) now. */
    static const uint8_t payload[] = {0x00, 0x4c, 0x7e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    size_t n = 70000;
    void *ws = tu_malloc(gmtf_rank_workspace_size(n));
    tu_guarded g = tu_guarded_alloc(n);
    assert_int_equal(gmtf_rank_decode(payload, sizeof payload, g.buf, n, ws), GMTF_E_CORRUPT);
    assert_true(tu_guard_ok(&g));
    tu_guarded_free(&g);
    free(ws);
}

static void test_random_payloads(void **state)
{
    (void)state;
    /* pure garbage of every small length and some large ones, decoded into
     * several block sizes: errors, never a crash, hang or overwrite */
    size_t sizes[] = {1, 2, 100, 4096, 1u << 18};
    void *ws = tu_malloc(gmtf_rank_workspace_size(1u << 18));
    uint8_t *src = tu_malloc(1u << 16);
    uint16_t *syms = tu_malloc(((1u << 18) + 1) * sizeof(uint16_t));
    uint64_t st = 99;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        tu_guarded g = tu_guarded_alloc(sizes[s]);
        for (int it = 0; it < 300; it++) {
            size_t len = it < 64 ? (size_t)it : tu_rand_below(&st, 1u << 16);
            for (size_t i = 0; i < len; i++)
                src[i] = (uint8_t)tu_rand(&st);
            if (len > 0 && it % 3 != 0)
                src[0] = (uint8_t)(it % 3 - 1); /* reach both decoders */
            int rc = gmtf_rank_decode(src, len, g.buf, sizes[s], ws);
            assert_true(rc == 0 || rc == GMTF_E_CORRUPT || rc == GMTF_E_TRUNCATED);
            assert_true(tu_guard_ok(&g));
            rc = gmtf_entropy_decode(src, len, syms, sizes[s], ws);
            assert_true(rc == 0 || rc == GMTF_E_CORRUPT || rc == GMTF_E_TRUNCATED);
        }
        tu_guarded_free(&g);
    }
    free(syms);
    free(src);
    free(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zrle_known_symbols),
        cmocka_unit_test(test_zrle_run_lengths),
        cmocka_unit_test(test_zrle_decode_rejects),
        cmocka_unit_test(test_roundtrip_single),
        cmocka_unit_test(test_roundtrip_zeros),
        cmocka_unit_test(test_roundtrip_all_ranks),
        cmocka_unit_test(test_roundtrip_random),
        cmocka_unit_test(test_roundtrip_corpus),
        cmocka_unit_test(test_enospc),
        cmocka_unit_test(test_entropy_rejects_bad_symbols),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_method_choice),
        cmocka_unit_test(test_constant_payloads),
        cmocka_unit_test(test_fuzzer_payload),
        cmocka_unit_test(test_random_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
