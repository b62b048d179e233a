/* GPU decoding of method 2 lanes (gpu/gpu_lanes.h) against the codec's CPU
 * decoder (gmtf_qlfc_decode): blocks of real and synthetic data, BWT'd
 * and coded by gmtf_qlfc_encode with method 2, parsed by
 * gmtf_lanes_dev_setup, decoded many at once on the device: the same bytes.
 * Hostile: damaged lane streams give "bad" exactly when the CPU decoder
 * fails, and the CPU decoder's bytes when it does not; damaged structures
 * are -EINVAL before anything runs. With no CUDA device it exits 77.
 *
 * Built a second time with GMTF_GPU_LANES_EMU against the CPU emulation of
 * gpu/lanes.cu (test_gpu_lanes_emu). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../codec/test_util.h"
#ifdef GMTF_GPU_LANES_EMU
#include "lanes_emu_names.h"
#endif
#include "bwt.h"
#include "entropy_lanes_dev.h"
#include "gpu_lanes.h"
#include "qlfc.h"
#ifndef GMTF_GPU_LANES_EMU
#include "gpu.h"
#endif

static gmtf_gpu_lanes_ctx *ctx;

/* A batch of coded blocks: payloads back to back in pay, the BWT bytes
 * they decode to in bwt (the reference). */
typedef struct coded {
    uint8_t *pay, *bwt;
    uint64_t *poff, *off;
    size_t count;
} coded;

static coded make(const uint8_t *data, const size_t *len, size_t count)
{
    coded k;
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += len[i];
    k.pay = tu_malloc(total + 64 * count + 1);
    k.bwt = tu_malloc(total + 1);
    k.poff = tu_malloc((count + 1) * sizeof *k.poff);
    k.off = tu_malloc((count + 1) * sizeof *k.off);
    k.count = count;
    k.poff[0] = k.off[0] = 0;
    const uint8_t *src = data;
    for (size_t i = 0; i < count; i++) {
        size_t n = len[i];
        void *bws = tu_malloc(gmtf_bwt_workspace_size(n));
        void *qws = tu_malloc(gmtf_qlfc_workspace_size(n));
        uint32_t idx[GMTF_BWT_MAX_SAMPLES];
        uint8_t *b = k.bwt + k.off[i];
        assert_int_equal(gmtf_bwt_forward_step(src, b, n, idx, bws), 0);
        long p = gmtf_qlfc_encode(b, n, k.pay + k.poff[i], n + 64, qws);
        assert_true(p > 0);
        assert_int_equal(k.pay[k.poff[i]], GMTF_QLFC_METHOD_LANES);
        k.poff[i + 1] = k.poff[i] + (uint64_t)p;
        k.off[i + 1] = k.off[i] + n;
        src += n;
        free(bws);
        free(qws);
    }
    return k;
}

static void coded_free(coded *k)
{
    free(k->pay);
    free(k->bwt);
    free(k->poff);
    free(k->off);
}

typedef struct parsed {
    gmtf_gpu_lane *lanes;
    uint16_t *cum;
    uint8_t *sel;
    int *err; /* the setup's answer per block */
} parsed;

static parsed parse(const coded *k)
{
    parsed p;
    p.lanes = tu_calloc(k->count * GMTF_GPU_LANES * sizeof *p.lanes);
    p.cum = tu_calloc(k->count * GMTF_GPU_LANES_NTABLES * GMTF_GPU_LANES_CUM * 2);
    p.sel = tu_calloc(k->count * GMTF_GPU_LANES_MAX_GROUPS);
    p.err = tu_calloc(k->count * sizeof *p.err);
    void *ws = tu_malloc(gmtf_qlfc_decode_workspace_size());
    for (size_t i = 0; i < k->count; i++)
        p.err[i] = gmtf_lanes_dev_setup(k->pay + k->poff[i], k->poff[i + 1] - k->poff[i],
                                        k->off[i + 1] - k->off[i], ws, k->poff[i],
                                        p.lanes + i * GMTF_GPU_LANES,
                                        p.cum + i * GMTF_GPU_LANES_NTABLES * GMTF_GPU_LANES_CUM,
                                        p.sel + i * GMTF_GPU_LANES_MAX_GROUPS);
    free(ws);
    return p;
}

static void parsed_free(parsed *p)
{
    free(p->lanes);
    free(p->cum);
    free(p->sel);
    free(p->err);
}

/* Called on the parsed structures before the device decodes them (NULL:
 * none); returns how many blocks it changed. */
static size_t (*tamper)(parsed *p, const coded *k);

/* Device decode of the blocks whose header parsed; compared with the CPU
 * decoder block by block. Returns how many blocks the CPU found corrupt. */
static size_t check(const coded *k, int expect_clean)
{
    parsed p = parse(k);
    if (tamper)
        assert_true(tamper(&p, k) > 0);
    uint8_t *out = tu_malloc(k->off[k->count] + 1), *bad = tu_calloc(k->count + 1);
    uint8_t *ref = tu_malloc(k->off[k->count] + 1);
    memset(out, 0xee, k->off[k->count] + 1);
    /* blocks whose header failed: an empty stand-in (all lanes done) */
    for (size_t i = 0; i < k->count; i++)
        if (p.err[i]) {
            memset(p.lanes + i * GMTF_GPU_LANES, 0, GMTF_GPU_LANES * sizeof *p.lanes);
            for (unsigned j = 0; j < GMTF_GPU_LANES; j++)
                p.lanes[i * GMTF_GPU_LANES + j].x[0] = p.lanes[i * GMTF_GPU_LANES + j].x[1] = 1ull
                                                                                              << 32;
        }
    int rc = gmtf_gpu_lanes_decode(ctx, k->pay, k->poff[k->count], k->count, p.lanes, p.cum, p.sel,
                                   k->off, out, bad);
    if (rc)
        fprintf(stderr, "decode: %d %s\n", rc, gmtf_gpu_lanes_error(ctx));
    assert_int_equal(rc, 0);
    void *ws = tu_malloc(gmtf_qlfc_decode_workspace_size());
    size_t corrupt = 0;
    for (size_t i = 0; i < k->count; i++) {
        size_t n = k->off[i + 1] - k->off[i];
        int crc = gmtf_qlfc_decode(k->pay + k->poff[i], k->poff[i + 1] - k->poff[i],
                                   ref + k->off[i], n, ws);
        if (p.err[i]) {
            assert_int_equal(crc, p.err[i]); /* the header's verdict is the CPU's */
            corrupt++;
            continue;
        }
        if (crc) {
            assert_int_equal(bad[i], 1);
            corrupt++;
            continue;
        }
        assert_int_equal(bad[i], 0);
        assert_memory_equal(out + k->off[i], ref + k->off[i], n);
        if (expect_clean)
            assert_memory_equal(out + k->off[i], k->bwt + k->off[i], n);
    }
    if (expect_clean)
        assert_int_equal(corrupt, 0);
    free(ws);
    free(out);
    free(ref);
    free(bad);
    parsed_free(&p);
    return corrupt;
}

/* Real files (the corpus, else system files) and text-like data, in
 * blocks of 900 KiB .. 2 MiB (method 2's sizes). */
static uint8_t *sample(size_t n, uint64_t seed)
{
    tu_files f = tu_corpus_files();
    if (f.count == 0) {
        tu_files_free(&f);
        f = tu_system_files(64, 4u << 20);
    }
    uint8_t *d = f.count ? tu_concat(&f, n) : NULL;
    tu_files_free(&f);
    if (!d) {
        d = tu_malloc(n);
        tu_fill_text_like(d, n, seed);
    }
    return d;
}

static void test_blocks(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, (2u << 20) - 3, 900u << 10, (1u << 20) + 12345};
    size_t n = 0, count = sizeof len / sizeof len[0];
    for (size_t i = 0; i < count; i++)
        n += len[i];
    uint8_t *d = sample(n, 7);
    coded k = make(d, len, count);
    check(&k, 1);
    printf("%zu blocks, %llu bytes -> %llu: same bytes as the CPU decoder\n", count,
           (unsigned long long)n, (unsigned long long)k.poff[count]);
    coded_free(&k);
    free(d);
}

static void test_text_like(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, 1u << 20};
    uint8_t *d = tu_malloc(2u << 20);
    tu_fill_text_like(d, 2u << 20, 99);
    coded k = make(d, len, 2);
    check(&k, 1);
    coded_free(&k);
    free(d);
}

/* Damaged lane streams (past each header): the device's verdict and bytes
 * are the CPU decoder's. */
static void test_damaged(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, 1u << 20, 1u << 20};
    uint8_t *d = sample(3u << 20, 5);
    coded k = make(d, len, 3);
    uint64_t seed = 12345;
    size_t corrupt = 0, rounds = 12;
    uint8_t *keep = tu_malloc(k.poff[3]);
    memcpy(keep, k.pay, k.poff[3]);
    for (size_t r = 0; r < rounds; r++) {
        memcpy(k.pay, keep, k.poff[3]);
        for (size_t i = 0; i < 3; i++) {
            size_t plen = k.poff[i + 1] - k.poff[i];
            size_t flips = 1 + tu_rand_below(&seed, 4);
            for (size_t f = 0; f < flips; f++) {
                /* mostly the lane streams (the back part); now and then the header */
                size_t at = r % 4 == 3 ? tu_rand_below(&seed, plen)
                                       : plen / 4 + tu_rand_below(&seed, plen - plen / 4);
                k.pay[k.poff[i] + at] ^= (uint8_t)(1u << tu_rand_below(&seed, 8));
            }
        }
        corrupt += check(&k, 0);
    }
    printf("damaged: %zu of %zu blocks corrupt by the CPU's verdict, the device agreeing\n",
           corrupt, rounds * 3);
    assert_true(corrupt > 0);
    free(keep);
    coded_free(&k);
    free(d);
}

/* Halves of 0x8000 or more in a table the lanes use, its meaning kept: the
 * one-symbol table (the last; 0, 4096, 4096, ...) with cum[2..15] = 0xF000
 * decodes the same symbol 0 with frequency 4096, but the decoder's fast
 * count (for tables under 0x8000) would be wrong on it: such a table takes
 * the exact count. */
static size_t widen_one_symbol_table(parsed *p, const coded *k)
{
    for (size_t b = 0; b < k->count; b++) {
        uint16_t *cum =
            p->cum + (b * GMTF_GPU_LANES_NTABLES + GMTF_GPU_LANES_NTABLES - 1) * GMTF_GPU_LANES_CUM;
        assert_int_equal(cum[0], 0);
        assert_int_equal(cum[1], 4096);
        for (unsigned y = 2; y < 16; y++)
            cum[y] = 0xF000;
    }
    return k->count;
}

static void test_wide_tables(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, (1u << 20) + 777, 900u << 10};
    size_t n = 0, count = sizeof len / sizeof len[0];
    for (size_t i = 0; i < count; i++)
        n += len[i];
    uint8_t *d = sample(n, 11);
    coded k = make(d, len, count);
    tamper = widen_one_symbol_table;
    check(&k, 1);
    tamper = NULL;
    coded_free(&k);
    free(d);
}

static void test_bad_structures(void **state)
{
    (void)state;
    size_t len[] = {1u << 20};
    uint8_t *d = sample(1u << 20, 3);
    coded k = make(d, len, 1);
    parsed p = parse(&k);
    assert_int_equal(p.err[0], 0);
    uint8_t out[64], bad[1];
    uint8_t *big = tu_malloc(k.off[1]);
    gmtf_gpu_lane keep = p.lanes[5];
    p.lanes[5].in_end = k.poff[1] + 1; /* past the input */
    assert_int_equal(
        gmtf_gpu_lanes_decode(ctx, k.pay, k.poff[1], 1, p.lanes, p.cum, p.sel, k.off, big, bad),
        -EINVAL);
    p.lanes[5] = keep;
    p.lanes[7].rtab = GMTF_GPU_LANES_NTABLES;
    assert_int_equal(
        gmtf_gpu_lanes_decode(ctx, k.pay, k.poff[1], 1, p.lanes, p.cum, p.sel, k.off, big, bad),
        -EINVAL);
    p.lanes[7].rtab = 0;
    p.lanes[9].end = (uint32_t)k.off[1] + 1;
    assert_int_equal(
        gmtf_gpu_lanes_decode(ctx, k.pay, k.poff[1], 1, p.lanes, p.cum, p.sel, k.off, big, bad),
        -EINVAL);
    assert_int_equal(
        gmtf_gpu_lanes_decode(NULL, k.pay, 1, 1, p.lanes, p.cum, p.sel, k.off, out, bad), -ENODEV);
    assert_int_equal(gmtf_gpu_lanes_ok(ctx), 1);
    free(big);
    parsed_free(&p);
    coded_free(&k);
    free(d);
}

static int setup(void **state)
{
    (void)state;
    return gmtf_gpu_lanes_create(&ctx) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gmtf_gpu_lanes_destroy(ctx);
    return 0;
}

int main(void)
{
#ifndef GMTF_GPU_LANES_EMU
    if (!gmtf_gpu_available()) {
        printf("SKIP: no usable CUDA device on this machine (or no CUDA in this build)\n");
        return 77;
    }
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),         cmocka_unit_test(test_text_like),
        cmocka_unit_test(test_damaged),        cmocka_unit_test(test_wide_tables),
        cmocka_unit_test(test_bad_structures),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
