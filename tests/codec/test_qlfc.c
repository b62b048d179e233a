/* QLFC coders of frame version 2 (qlfc.h): method 2 (lanes, semi-static
 * rANS) and method 3 (adaptive), each called directly for any block length
 * and through the dispatcher that picks by length. Round trips on edge
 * cases, synthetic and real BWT output; the bytes never depend on the
 * output capacity or on what the workspace held; -ENOSPC at one byte too
 * few; hostile payloads (mutations, truncation, garbage, random bytes
 * behind each method byte) give an error or the right bytes, never a
 * write past n, a crash or a hang. */
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
#include "qlfc.h"
#include "qlfc_internal.h"
#include "test_util.h"

#define KIB 1024u
#define MIB (1u << 20)

typedef long (*enc_fn)(const uint8_t *, size_t, uint8_t *, size_t, void *);
typedef int (*dec_fn)(const uint8_t *, size_t, uint8_t *, size_t, void *);

/* method 4 at 8 and 3 lanes (fewer for blocks shorter than that) */
static long cml8_enc(const uint8_t *s, size_t n, uint8_t *d, size_t cap, void *ws)
{
    return gmtf_cm_lanes_encode(s, n, 8, d, cap, ws);
}

static long cml3_enc(const uint8_t *s, size_t n, uint8_t *d, size_t cap, void *ws)
{
    return gmtf_cm_lanes_encode(s, n, 3, d, cap, ws);
}

static const struct {
    const char *name;
    enc_fn enc;
    dec_fn dec;
    unsigned method;
} coders[] = {
    {"lanes", gmtf_lanes_encode, gmtf_lanes_decode, GMTF_QLFC_METHOD_LANES},
    {"adaptive", gmtf_adaptive_qlfc_encode, gmtf_adaptive_qlfc_decode, GMTF_QLFC_METHOD_ADAPTIVE},
    {"dispatch", gmtf_qlfc_encode, gmtf_qlfc_decode, 0},
    {"cm lanes 8", cml8_enc, gmtf_cm_lanes_decode, GMTF_QLFC_METHOD_CM_LANES},
    {"cm lanes 3", cml3_enc, gmtf_cm_lanes_decode, GMTF_QLFC_METHOD_CM_LANES},
};
#define CODER_CML8 3
#define NCODERS (sizeof coders / sizeof coders[0])

static size_t enc_cap(size_t n)
{
    return 2 * n + 64 * KIB; /* generous: random data expands a little */
}

/* Set while coding incompressible data: the lanes method's scratch holds
 * 1.25 n bytes, and says -ENOSPC beyond (the frame is then stored raw). */
static int may_expand;

/* counts (gmtf_qlfc_decode_counted) are those of s[0..n) in four
 * ascending parts that cover it. */
static void check_counts(const gmtf_bwt_counts *c, const uint8_t *s, size_t n)
{
    assert_int_equal(c->start[0], 0);
    assert_int_equal(c->start[4], n);
    for (unsigned k = 0; k < 4; k++) {
        assert_true(c->start[k] <= c->start[k + 1]);
        uint32_t h[256] = {0};
        for (size_t i = c->start[k]; i < c->start[k + 1]; i++)
            h[s[i]]++;
        assert_memory_equal(h, c->cnt[k], sizeof h);
    }
    assert_int_equal(gmtf_bwt_counts_check(c, n), 0);
}

/* Encodes with coder k, checks the method byte and that a dirty workspace
 * and a bigger capacity give the same bytes, decodes with the full and the
 * decode-only workspace into a guarded buffer. Returns the length. */
static long roundtrip(unsigned k, const uint8_t *s, size_t n)
{
    size_t cap = enc_cap(n);
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    uint8_t *enc = tu_malloc(cap), *enc2 = tu_malloc(cap + 100);
    memset(ws, 0, gmtf_qlfc_workspace_size(n));
    long len = coders[k].enc(s, n, enc, cap, ws);
    if (len == -ENOSPC && may_expand) {
        free(enc2), free(enc), free(ws);
        return len;
    }
    if (len <= 0)
        fail_msg("%s: encode of %zu bytes: %ld", coders[k].name, n, len);
    unsigned want = coders[k].method ? coders[k].method : gmtf_qlfc_method(s, n, ws);
    assert_int_equal(enc[0], want);
    memset(ws, 0xA5, gmtf_qlfc_workspace_size(n));
    assert_int_equal(coders[k].enc(s, n, enc2, cap + 100, ws), len);
    assert_memory_equal(enc, enc2, (size_t)len);
    tu_guarded back = tu_guarded_alloc(n);
    memset(back.buf, 0x5A, n);
    int rc = coders[k].dec(enc, (size_t)len, back.buf, n, ws);
    if (rc != 0)
        fail_msg("%s: decode of %zu bytes: %d", coders[k].name, n, rc);
    assert_memory_equal(back.buf, s, n);
    assert_true(tu_guard_ok(&back));
    void *dws = tu_malloc(gmtf_qlfc_decode_workspace_size());
    memset(back.buf, 0x5A, n);
    assert_int_equal(gmtf_qlfc_decode(enc, (size_t)len, back.buf, n, dws), 0);
    assert_memory_equal(back.buf, s, n);
    assert_true(tu_guard_ok(&back));
    gmtf_bwt_counts counts;
    memset(&counts, 0xA5, sizeof counts);
    memset(back.buf, 0x5A, n);
    assert_int_equal(gmtf_qlfc_decode_counted(enc, (size_t)len, back.buf, n, dws, &counts), 0);
    assert_memory_equal(back.buf, s, n);
    check_counts(&counts, s, n);
    free(dws);
    tu_guarded_free(&back);
    free(enc2), free(enc), free(ws);
    return len;
}

/* Method 4 (its coder is method 3's, tested on every size) on blocks up
 * to 256 KiB, and on the larger ones of test_real_data. */
static void roundtrip_all(const uint8_t *s, size_t n)
{
    for (unsigned k = 0; k < NCODERS; k++)
        if (k < CODER_CML8 || n <= 256 * KIB)
            roundtrip(k, s, n);
}

/* The BWT output of real or synthetic data. */
static uint8_t *bwt_of(const uint8_t *src, size_t n)
{
    void *ws = tu_malloc(gmtf_bwt_workspace_size(n));
    uint8_t *out = tu_malloc(n);
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    assert_int_equal(gmtf_bwt_forward_step(src, out, n, idx, ws), 0);
    free(ws);
    return out;
}

/* ---- edge cases ------------------------------------------------------------ */

static void test_tiny_blocks(void **state)
{
    (void)state;
    uint8_t b[64];
    /* every byte value alone; every 16th and the two ends in the sanitizer
     * pass */
    for (unsigned v = 0; v < 256; v++) {
        if (tu_scale() > 1 && v % 16 != 0 && v != 255)
            continue;
        b[0] = (uint8_t)v;
        roundtrip_all(b, 1);
    }
    uint64_t seed = 1;
    for (size_t n = 2; n <= 64; n++) {
        for (int t = 0; t < 4; t++) {
            tu_fill_random(b, n, seed++);
            if (tu_scale() > 1 && t >= 2)
                continue; /* the sanitizer pass: one block of each kind */
            if (t & 1)    /* few distinct bytes, runs */
                for (size_t i = 0; i < n; i++)
                    b[i] = (uint8_t)(b[i] % 3 + 'a');
            may_expand = !(t & 1);
            roundtrip_all(b, n);
            may_expand = 0;
        }
    }
}

/* One byte repeated (one run), every byte value in turn, each in runs of
 * every length, and the 256 values in the orders that give the largest
 * ranks. */
static void test_runs_and_ranks(void **state)
{
    (void)state;
    size_t n = 300 * KIB;
    uint8_t *s = tu_malloc(n);
    memset(s, 'x', n);
    roundtrip_all(s, n);
    size_t i = 0;
    for (unsigned len = 1; i < n; len++)
        for (unsigned v = 0; v < 256 && i < n; v++)
            for (unsigned r = 0; r < len && i < n; r++)
                s[i++] = (uint8_t)v;
    roundtrip_all(s, n);
    /* cycles of all 256 bytes, forwards then backwards: ranks near 255 */
    for (i = 0; i < n; i++) {
        size_t c = i / 256;
        s[i] = (uint8_t)(c & 1 ? 255 - i % 256 : i % 256);
    }
    may_expand = 1;
    roundtrip_all(s, n);
    may_expand = 0;
    free(s);
}

/* Runs longer than the escapes of both methods' length codes: a block of
 * 16 MiB that is one run but for a few bytes (the lanes cut it into runs
 * of up to 512 KiB, the adaptive method codes up to 2^24). */
static void test_long_runs(void **state)
{
    (void)state;
    size_t n = GMTF_BLOCK_MAX;
    uint8_t *s = tu_malloc(n);
    memset(s, 0, n);
    s[12345] = 1;
    s[n / 2 + 7] = 2;
    roundtrip_all(s, n);
    memset(s, 9, n);
    roundtrip_all(s, n);
    /* run lengths of every bit count below 2^20, between single bytes */
    size_t i = 0;
    for (unsigned e = 0; e < 20 && i < n; e++) {
        size_t len = ((size_t)1 << e) + e;
        for (size_t r = 0; r < len && i < n; r++)
            s[i++] = 'r';
        if (i < n)
            s[i++] = (uint8_t)e;
    }
    roundtrip_all(s, i);
    free(s);
}

/* Method 3's encoder by halves (spans of 2^17 runs or more: the length
 * half and the coder here, the rank half a chunk or two ahead on a thread
 * of its own) makes the bytes of the run-by-run encoder, on a block of
 * 160,000 runs (ranks up to 255, retirements, escaped lengths); -ENOSPC
 * without a hang or a write past the output when the coder overflows at
 * once or at the end, the thread ahead. */
static void test_halves_same_bytes(void **state)
{
    (void)state;
    size_t n = 3 * MIB / 2, i = 0;
    uint8_t *s = tu_malloc(n), *rk = tu_malloc(n), init[256];
    uint64_t st = 11;
    while (i < n) {
        uint8_t c = (uint8_t)(tu_rand_below(&st, 4) ? tu_rand_below(&st, 24) : tu_rand(&st));
        size_t len =
            tu_rand_below(&st, 512) ? 1 + tu_rand_below(&st, 12) : 200 + tu_rand_below(&st, 3000);
        for (size_t k = 0; k < len && i < n; k++)
            s[i++] = c;
    }
    uint16_t d;
    assert_true(gmtf_qlfc_ranks(s, 0, n, rk, init, &d) > 150000); /* past 2^17 */
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    uint8_t *a = tu_malloc(enc_cap(n)), *b = tu_malloc(enc_cap(n));
    setenv("GMTF_CM_HALVES", "1", 1); /* off by default (entropy_cm.c) */
    long la = gmtf_adaptive_qlfc_encode(s, n, a, enc_cap(n), ws);
    long lb = gmtf_adaptive_qlfc_encode_serial(s, n, b, enc_cap(n), ws);
    assert_true(la > 0);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, (size_t)la);
    for (size_t cap = 64; cap < (size_t)la; cap += (size_t)la - 65) {
        tu_guarded out = tu_guarded_alloc(cap);
        assert_int_equal(gmtf_adaptive_qlfc_encode(s, n, out.buf, cap, ws), -ENOSPC);
        assert_true(tu_guard_ok(&out));
        tu_guarded_free(&out);
    }
    unsetenv("GMTF_CM_HALVES");
    free(b), free(a), free(ws), free(rk), free(s);
}

/* The lanes decoder's paths by rank and run length: runs of lengths 1..40
 * with ranks 1..80 (two cycles of r + 1 distinct bytes give rank r), so
 * ranks on both sides of 16, 32 and 64 and runs on both sides of 16 and 32
 * at every place in a lane; the first half of the block has small ranks
 * and short runs, the second the rest, so that groups differ (table sets). */
static void test_rank_windows(void **state)
{
    (void)state;
    size_t n = 2 * MIB, i = 0;
    uint8_t *s = tu_malloc(n);
    for (unsigned step = 0; i < n; step++) {
        int second = i >= n / 2;
        unsigned r = second ? 1 + step % 80 : 1 + step % 20;
        unsigned len = second ? 1 + (step * 7) % 40 : 1 + step % 3;
        for (unsigned cyc = 0; cyc < 2; cyc++)
            for (unsigned v = 0; v <= r && i < n; v++)
                for (unsigned k = 0; k < len && i < n; k++)
                    s[i++] = (uint8_t)(3 * v + step); /* 3v distinct for v < 86 */
    }
    roundtrip_all(s, n);
    free(s);
}

static void test_random_and_text(void **state)
{
    (void)state;
    static const size_t sizes[] = {1000, 65536, 700 * KIB, MIB, MIB + 17, 3 * MIB};
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        if (tu_scale() > 1 && (n == 700 * KIB || n == MIB || n == 3 * MIB))
            continue; /* the sanitizer pass: 1000, 64 KiB and 1 MiB + 17 */
        uint8_t *s = tu_malloc(n);
        tu_fill_random(s, n, 100 + j);
        may_expand = 1;
        roundtrip_all(s, n);
        may_expand = 0;
        tu_fill_text_like(s, n, 200 + j);
        uint8_t *b = bwt_of(s, n);
        roundtrip_all(b, n);
        free(b), free(s);
    }
}

/* The incompressibility rule (qlfc.h, GMTF_QLFC_RAW_BITS): random bytes of
 * 64 KiB and more are not coded (-ENOSPC: the frame stores them raw, as it
 * did after the adaptive coder's 1.003 n, at 0.5 s per MiB), whatever the
 * capacity; data with a little redundancy anywhere keeps its coder:
 * 7.6 bits of entropy a byte, and a block half random and half text. */
static void test_incompressible_rule(void **state)
{
    (void)state;
    size_t n = 1 * MIB + 300 * KIB;
    uint8_t *s = tu_malloc(n), *d = tu_malloc(enc_cap(n));
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    static const size_t sizes[] = {64 * KIB, 200 * KIB, 1 * MIB + 300 * KIB};
    for (size_t j = 0; j < 3; j++) {
        tu_fill_random(s, sizes[j], 7 + j);
        uint8_t *b = bwt_of(s, sizes[j]);
        assert_int_equal(gmtf_qlfc_encode(b, sizes[j], d, enc_cap(sizes[j]), ws), -ENOSPC);
        free(b);
    }
    /* 192 of the 256 byte values: about 7.6 bits a byte, coded */
    tu_fill_random(s, 256 * KIB, 11);
    for (size_t i = 0; i < 256 * KIB; i++)
        s[i] = (uint8_t)(s[i] % 192);
    uint8_t *b = bwt_of(s, 256 * KIB);
    long len = gmtf_qlfc_encode(b, 256 * KIB, d, enc_cap(n), ws);
    assert_true(len > 0 && len < (long)(256 * KIB));
    free(b);
    /* half random, half text: the text's contexts make some segments
     * compressible */
    tu_fill_random(s, n / 2, 12);
    tu_fill_text_like(s + n / 2, n - n / 2, 13);
    b = bwt_of(s, n);
    len = gmtf_qlfc_encode(b, n, d, enc_cap(n), ws);
    assert_true(len > 0 && len < (long)(n * 3 / 4));
    free(b);
    free(ws), free(d), free(s);
}

/* The BWT output of every corpus file (system files when it is absent) in
 * 900 KiB blocks and of their concatenation in 2 MiB blocks; each method
 * beats a plain order-0 bound of 8 bits a byte by far on text. */
static void test_real_data(void **state)
{
    (void)state;
    tu_files f = tu_corpus_files();
    if (f.count == 0)
        f = tu_system_files(40, 2 * MIB);
    /* the sanitizer pass (GMTF_TEST_SCALE): a quarter of the files and one
     * 2 MiB block of their concatenation */
    size_t nfiles = tu_scale() > 1 ? (f.count + 3) / 4 : f.count;
    size_t nall = tu_scale() > 1 ? 2 * MIB : 6 * MIB;
    size_t total = 0, coded[2] = {0, 0};
    for (size_t i = 0; i < nfiles; i++) {
        for (size_t a = 0; a < f.v[i].len; a += 900 * KIB) {
            size_t n = f.v[i].len - a < 900 * KIB ? f.v[i].len - a : 900 * KIB;
            uint8_t *b = bwt_of(f.v[i].data + a, n);
            coded[0] += (size_t)roundtrip(0, b, n);
            coded[1] += (size_t)roundtrip(1, b, n);
            roundtrip(2, b, n);
            total += n;
            free(b);
        }
    }
    uint8_t *all = tu_concat(&f, nall);
    if (all) {
        for (size_t a = 0; a < nall; a += 2 * MIB) {
            uint8_t *b = bwt_of(all + a, 2 * MIB);
            roundtrip_all(b, 2 * MIB);
            if (a == 0)
                roundtrip(CODER_CML8, b, 2 * MIB);
            free(b);
        }
        free(all);
    }
    print_message("qlfc: %zu bytes: lanes %zu, adaptive %zu\n", total, coded[0], coded[1]);
    assert_true(coded[0] < total / 2 && coded[1] < total / 2);
    tu_files_free(&f);
}

/* The method rule: the length, and for long blocks the share of big ranks
 * among the lanes' runs. */
static void test_method_rule(void **state)
{
    (void)state;
    size_t n = GMTF_QLFC_LANES_MIN;
    uint8_t *s = tu_malloc(GMTF_BLOCK_MAX);
    tu_fill_text_like(s, n + 1, 5);
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(GMTF_BLOCK_MAX));
    uint8_t *d = tu_malloc(enc_cap(GMTF_BLOCK_MAX));
    assert_int_equal(gmtf_qlfc_method(s, 1, ws), GMTF_QLFC_METHOD_ADAPTIVE);
    assert_int_equal(gmtf_qlfc_method(s, n - 1, ws), GMTF_QLFC_METHOD_ADAPTIVE);
    assert_int_equal(gmtf_qlfc_method(s, n, ws), GMTF_QLFC_METHOD_LANES);
    assert_true(gmtf_qlfc_encode(s, n - 1, d, enc_cap(n), ws) > 0);
    assert_int_equal(d[0], GMTF_QLFC_METHOD_ADAPTIVE);
    assert_true(gmtf_qlfc_encode(s, n, d, enc_cap(n), ws) > 0);
    assert_int_equal(d[0], GMTF_QLFC_METHOD_LANES);
    /* Cycles through all 256 byte values, a little jittered: nearly every
     * run has a rank near 255, so the block takes method 3, the same
     * through the dispatcher. */
    uint64_t st = 3;
    for (size_t i = 0; i < n; i++)
        s[i] = (uint8_t)((i * 167 + (tu_rand(&st) & 1)) & 255);
    unsigned m = gmtf_qlfc_method(s, n, ws);
    long len = gmtf_qlfc_encode(s, n, d, enc_cap(n), ws);
    assert_true(len > 0 || len == -ENOSPC);
    if (len > 0)
        assert_int_equal(d[0], m);
    assert_int_equal(m, GMTF_QLFC_METHOD_ADAPTIVE);
    assert_int_equal(gmtf_qlfc_encode(s, 0, d, enc_cap(n), ws), -EINVAL);
    assert_int_equal(gmtf_qlfc_encode(s, GMTF_BLOCK_MAX + 1, d, enc_cap(n), ws), -EINVAL);
    free(d), free(ws), free(s);
}

/* -ENOSPC at every capacity below the length (down to 0), never a write
 * past the capacity. */
static void test_capacity(void **state)
{
    (void)state;
    size_t n = 200 * KIB;
    uint8_t *s = tu_malloc(n);
    tu_fill_text_like(s, n, 9);
    uint8_t *b = bwt_of(s, n);
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    for (unsigned k = 0; k < NCODERS; k++) {
        if (!coders[k].method)
            continue;
        uint8_t *full = tu_malloc(enc_cap(n));
        long len = coders[k].enc(b, n, full, enc_cap(n), ws);
        assert_true(len > 0);
        for (long cap = len - 1; cap >= 0; cap = cap > 64 ? cap - cap / 7 - 1 : cap - 1) {
            tu_guarded out = tu_guarded_alloc((size_t)cap);
            assert_int_equal(coders[k].enc(b, n, out.buf, (size_t)cap, ws), -ENOSPC);
            assert_true(tu_guard_ok(&out));
            tu_guarded_free(&out);
        }
        tu_guarded out = tu_guarded_alloc((size_t)len);
        assert_int_equal(coders[k].enc(b, n, out.buf, (size_t)len, ws), len);
        assert_memory_equal(out.buf, full, (size_t)len);
        assert_true(tu_guard_ok(&out));
        tu_guarded_free(&out);
        free(full);
    }
    free(ws), free(b), free(s);
}

/* ---- hostile payloads --------------------------------------------------------- */

/* Decodes src into a guarded buffer: an error, or n bytes equal to want
 * (when given). Returns 1 when it decoded to want without an error. */
static int decode_hostile(const uint8_t *src, size_t len, size_t n, const uint8_t *want, void *ws)
{
    tu_guarded out = tu_guarded_alloc(n);
    int rc = gmtf_qlfc_decode(src, len, out.buf, n, ws);
    assert_true(tu_guard_ok(&out));
    assert_true(rc <= 0);
    int same = rc == 0 && want && memcmp(out.buf, want, n) == 0;
    tu_guarded_free(&out);
    return same;
}

static void mutations(unsigned k, size_t n, uint64_t seed, unsigned count)
{
    uint8_t *s = tu_malloc(n);
    tu_fill_text_like(s, n, seed);
    uint8_t *b = bwt_of(s, n);
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    uint8_t *enc = tu_malloc(enc_cap(n)), *m = tu_malloc(enc_cap(n) + 64);
    long len = coders[k].enc(b, n, enc, enc_cap(n), ws);
    assert_true(len > 0);
    uint64_t st = seed;
    unsigned silent = 0;
    for (unsigned t = 0; t < count; t++) {
        size_t ml = (size_t)len;
        memcpy(m, enc, ml);
        switch (t % 4) {
        case 0: { /* bit flips */
            unsigned flips = 1 + (unsigned)tu_rand_below(&st, 3);
            for (unsigned f = 0; f < flips; f++) {
                size_t p = (size_t)tu_rand_below(&st, ml);
                m[p] ^= (uint8_t)(1u << tu_rand_below(&st, 8));
            }
            break;
        }
        case 1: /* random bytes */ m[tu_rand_below(&st, ml)] = (uint8_t)tu_rand(&st); break;
        case 2: /* truncated */ ml = (size_t)tu_rand_below(&st, ml); break;
        default: /* garbage appended */
            tu_fill_random(m + ml, 64, tu_rand(&st));
            ml += 1 + (size_t)tu_rand_below(&st, 64);
        }
        if (ml == (size_t)len && memcmp(m, enc, ml) == 0)
            continue;
        silent += decode_hostile(m, ml, n, b, ws);
    }
    print_message("qlfc %s: %u mutations of %zu bytes, %u decoded to the original\n",
                  coders[k].name, count, n, silent);
    /* a rare mutation may hit bits the coders never use (flush bytes) */
    assert_true(silent < count / 20);
    free(m), free(enc), free(ws), free(b), free(s);
}

static void test_mutations(void **state)
{
    (void)state;
    unsigned count = (unsigned)tu_env_long("GMTF_CODER_MUTATIONS", 4000);
    mutations(0, 150 * KIB, 1, count);
    mutations(1, 60 * KIB, 2, count);
    mutations(2, GMTF_QLFC_LANES_MIN + 5000, 3, count / 10);
    mutations(CODER_CML8, 100 * KIB, 4, count / 4);
}

/* The lanes decoder's two paths (gmtf_lanes_decode_isa: the scalar one,
 * and the AVX-512 one where the CPU has it): the same bytes and the same
 * result on valid payloads (text, escaped lengths, big ranks, a block
 * whose lanes end far apart) and on mutations of one (bit flips and
 * truncations: an error from both, or the same bytes from both). */
static int isa_pair(const uint8_t *enc, size_t len, size_t n, uint8_t *o0, uint8_t *o1, void *ws)
{
    memset(o0, 0x11, n);
    memset(o1, 0x22, n);
    int r0 = gmtf_lanes_decode_isa(enc, len, o0, n, ws, 0);
    int r1 = gmtf_lanes_decode_isa(enc, len, o1, n, ws, 1);
    assert_int_equal(r0, r1);
    if (r0 == 0)
        assert_memory_equal(o0, o1, n);
    return r0;
}

/* gmtf_lanes_decode_ranked: the block, and the rank rows that
 * gmtf_bwt_rank_table counts from it. */
static void check_ranked(const uint8_t *enc, size_t len, const uint8_t *b, size_t n, uint8_t *o,
                         void *ws)
{
    size_t rows = ((n + (1u << GMTF_BWT_RANK_SHIFT) - 1) >> GMTF_BWT_RANK_SHIFT) + 1;
    uint32_t(*chk)[256] = tu_malloc(rows * sizeof *chk);
    uint32_t(*want)[256] = tu_malloc(rows * sizeof *want);
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    for (unsigned k = 0; k < GMTF_BWT_MAX_SAMPLES; k++)
        idx[k] = 1;
    assert_int_equal(gmtf_lanes_decode_ranked(enc, len, o, n, ws, chk), 0);
    assert_memory_equal(o, b, n);
    assert_int_equal(gmtf_bwt_rank_table(b, n, idx, want), 0);
    assert_memory_equal(chk, want, rows * sizeof *chk);
    free(want), free(chk);
}

static void test_lanes_isa(void **state)
{
    (void)state;
    size_t n = tu_scale() > 1 ? 200 * KIB + 17 : 600 * KIB + 17; /* sanitizers: smaller */
    if (!gmtf_lanes_decode_simd())
        print_message("lanes isa: no AVX-512 path on this CPU or build: the scalar decoder is "
                      "checked against itself (hostile inputs included)\n");
    uint8_t *s = tu_malloc(n), *o0 = tu_malloc(n), *o1 = tu_malloc(n);
    uint8_t *enc = tu_malloc(enc_cap(n)), *m = tu_malloc(enc_cap(n));
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    for (int kind = 0; kind < 3; kind++) {
        size_t i = 0;
        if (kind == 0) { /* text */
            tu_fill_text_like(s, n, 31);
        } else if (kind == 1) { /* ranks up to 255, runs up to 600 (escapes) */
            for (unsigned step = 0; i < n; step++)
                for (unsigned v = 0; v <= 1 + step % 255 && i < n; v++)
                    for (unsigned k = 0; k < 1 + (step * 37 + v) % 600 && i < n; k++)
                        s[i++] = (uint8_t)(v + step);
        } else { /* lanes that end far apart: short runs first, long ones after */
            for (unsigned step = 0; i < n; step++)
                for (unsigned k = 0; k < (i < n / 3 ? 1u : 1 + step % 300) && i < n; k++)
                    s[i++] = (uint8_t)(step % 7);
        }
        uint8_t *b = kind == 0 ? bwt_of(s, n) : s;
        long len = gmtf_lanes_encode(b, n, enc, enc_cap(n), ws);
        assert_true(len > 0);
        assert_int_equal(isa_pair(enc, (size_t)len, n, o0, o1, ws), 0);
        assert_memory_equal(o0, b, n);
        check_ranked(enc, (size_t)len, b, n, o1, ws);
        if (kind == 0)
            free(b);
    }
    /* mutations of a 160 KiB block (32 lanes of 5 KiB) */
    size_t mn = 160 * KIB;
    tu_fill_text_like(s, mn, 32);
    uint8_t *b = bwt_of(s, mn);
    long len = gmtf_lanes_encode(b, mn, enc, enc_cap(mn), ws);
    assert_true(len > 0);
    uint64_t st = 77;
    unsigned errors = 0;
    unsigned count = tu_scale() > 1 ? 40 : 100;
    for (unsigned t = 0; t < count; t++) {
        size_t ml = (size_t)len;
        memcpy(m, enc, ml);
        if (t % 2)
            ml = (size_t)tu_rand_below(&st, ml);
        else
            m[5 + tu_rand_below(&st, ml - 5)] ^= (uint8_t)(1u << tu_rand_below(&st, 8));
        int r = isa_pair(m, ml, mn, o0, o1, ws);
        errors += r != 0;
        if (t % 4 == 0) { /* the same verdict with the rank rows */
            uint32_t(*chk)[256] = tu_malloc(((mn >> GMTF_BWT_RANK_SHIFT) + 2) * sizeof *chk);
            assert_int_equal(gmtf_lanes_decode_ranked(m, ml, o1, mn, ws, chk), r);
            free(chk);
        }
    }
    assert_true(errors > count * 9 / 10);
    free(b);
    free(ws), free(m), free(enc), free(o1), free(o0), free(s);
}

/* Method 4's layout: the lane count in byte 1 (fewer lanes when the block
 * is too short for each to hold a byte), L - 1 stream lengths, and each
 * lane's stream is method 3's payload (after its method byte) of the
 * lane's bytes; a lane count of 0 or above GMTF_QLFC_CM_LANES_MAX, or one
 * that leaves a lane empty, is corrupt, and so are lengths beyond the
 * payload. */
static void test_cm_lanes_layout(void **state)
{
    (void)state;
    size_t n = 300 * KIB;
    uint8_t *s = tu_malloc(n);
    tu_fill_text_like(s, n, 21);
    uint8_t *b = bwt_of(s, n);
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(n));
    uint8_t *e4 = tu_malloc(enc_cap(n)), *e3 = tu_malloc(enc_cap(n));
    for (unsigned nl = 1; nl <= GMTF_QLFC_CM_LANES_MAX; nl++) {
        long len = gmtf_cm_lanes_encode(b, n, nl, e4, enc_cap(n), ws);
        assert_true(len > 0);
        assert_int_equal(e4[0], GMTF_QLFC_METHOD_CM_LANES);
        assert_int_equal(e4[1], nl);
        size_t seg = (n + nl - 1) / nl, at = 2 + 4 * (size_t)(nl - 1);
        for (unsigned j = 0; j < nl; j++) {
            size_t a = j * seg, z = a + seg < n ? a + seg : n;
            long l3 = gmtf_adaptive_qlfc_encode(b + a, z - a, e3, enc_cap(n), ws);
            assert_true(l3 > 1);
            size_t sl = (size_t)len - at;
            if (j + 1 < nl)
                sl = (size_t)e4[2 + 4 * j] | (size_t)e4[3 + 4 * j] << 8 |
                     (size_t)e4[4 + 4 * j] << 16 | (size_t)e4[5 + 4 * j] << 24;
            assert_int_equal(sl, (size_t)l3 - 1);
            assert_memory_equal(e4 + at, e3 + 1, sl);
            at += sl;
        }
        assert_int_equal(at, (size_t)len);
        /* lane counts that the block cannot take, and a length past the end */
        tu_guarded out = tu_guarded_alloc(n);
        uint8_t keep = e4[1];
        static const uint8_t bad[] = {0, GMTF_QLFC_CM_LANES_MAX + 1, 255};
        for (unsigned i = 0; i < sizeof bad; i++) {
            e4[1] = bad[i];
            assert_int_equal(gmtf_qlfc_decode(e4, (size_t)len, out.buf, n, ws), GMTF_E_CORRUPT);
        }
        e4[1] = keep;
        if (nl > 1) {
            uint8_t k5 = e4[5];
            e4[5] = 0x7F;
            assert_int_equal(gmtf_qlfc_decode(e4, (size_t)len, out.buf, n, ws), GMTF_E_CORRUPT);
            e4[5] = k5;
        }
        assert_int_equal(gmtf_qlfc_decode(e4, (size_t)len, out.buf, n, ws), 0);
        assert_memory_equal(out.buf, b, n);
        assert_true(tu_guard_ok(&out));
        tu_guarded_free(&out);
    }
    /* 5 bytes: 5 lanes asked for 8; 8 lanes of 2 bytes would leave the last
     * empty for n = 14 (seg 2, 7 lanes), which the decoder rejects */
    long len = gmtf_cm_lanes_encode(b, 5, 8, e4, enc_cap(n), ws);
    assert_true(len > 0);
    assert_int_equal(e4[1], 5);
    len = gmtf_cm_lanes_encode(b, 14, 8, e4, enc_cap(n), ws);
    assert_true(len > 0);
    assert_int_equal(e4[1], 7);
    tu_guarded out = tu_guarded_alloc(14);
    assert_int_equal(gmtf_cm_lanes_decode(e4, (size_t)len, out.buf, 14, ws), 0);
    assert_memory_equal(out.buf, b, 14);
    e4[1] = 8;
    assert_int_equal(gmtf_cm_lanes_decode(e4, (size_t)len, out.buf, 14, ws), GMTF_E_CORRUPT);
    assert_true(tu_guard_ok(&out));
    tu_guarded_free(&out);
    /* method bytes no reader knows: corrupt (as an older reader says of 4) */
    for (unsigned m = 5; m < 256; m += 25) {
        e4[0] = (uint8_t)m;
        assert_int_equal(gmtf_qlfc_decode(e4, (size_t)len, b, 14, ws), GMTF_E_CORRUPT);
    }
    free(e3), free(e4), free(ws), free(b), free(s);
}

/* Constant and random payloads behind every method byte, for several
 * lengths: errors, never a crash. */
static void test_garbage(void **state)
{
    (void)state;
    static const size_t ns[] = {1, 100, 65536, 2 * MIB};
    size_t cap = 64 * KIB;
    uint8_t *p = tu_malloc(cap);
    void *ws = tu_malloc(gmtf_qlfc_decode_workspace_size());
    uint64_t seed = 77;
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
        for (unsigned method = 0; method < 6; method++) {
            for (size_t len = 1; len <= cap; len = len * 3 + 1) {
                for (int kind = 0; kind < 4; kind++) {
                    if (kind == 0)
                        memset(p, 0, len);
                    else if (kind == 1)
                        memset(p, 0xFF, len);
                    else
                        tu_fill_random(p, len, seed++);
                    p[0] = (uint8_t)method;
                    decode_hostile(p, len, ns[j], NULL, ws);
                }
            }
        }
    }
    free(ws), free(p);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test by name (glob) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_blocks),         cmocka_unit_test(test_runs_and_ranks),
        cmocka_unit_test(test_halves_same_bytes),   cmocka_unit_test(test_long_runs),
        cmocka_unit_test(test_rank_windows),        cmocka_unit_test(test_random_and_text),
        cmocka_unit_test(test_incompressible_rule), cmocka_unit_test(test_real_data),
        cmocka_unit_test(test_method_rule),         cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_mutations),           cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_cm_lanes_layout),     cmocka_unit_test(test_lanes_isa),
    };
    return cmocka_run_group_tests_name("qlfc", tests, NULL, NULL);
}
