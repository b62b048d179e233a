/* GPU inverse BWT (gpu_ibwt.h): batches of blocks made by a libdivsufsort
 * forward transform (any sample step; the version 2 steps checked against
 * codec/bwt.c's gmtf_bwt_forward_step too) must come back byte for byte:
 * random, structured and text blocks, the corpora (GMTF_CORPUS), a Linux
 * tar prefix (GMTF_LINUX_TAR, a plain tar, or
 * /usr/src/linux-source-6.1.tar.xz), several pieces. Hostile input: a
 * sample row of 0 or over n is -EUCLEAN and dst stays untouched; garbage
 * bytes with in-range rows give exactly what codec/bwt.c's inverse gives
 * for them (the same walk), never a fault. With no CUDA device it exits 77.
 *
 * Built a second time with GMTF_GPU_IBWT_EMU against the CPU emulation of
 * gpu/ibwt.cu (test_gpu_ibwt_emu), smaller sizes unless
 * GMTF_IBWT_EMU_FULL=1; GMTF_IBWT_TEST_SMALL=1 gives the GPU build the
 * small sizes (for compute-sanitizer). */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <divsufsort.h>

#ifdef GMTF_GPU_IBWT_EMU
#include "ibwt_emu_names.h"
#endif
#include "bwt.h"
#include "gpu_ibwt.h"
#ifndef GMTF_GPU_IBWT_EMU
#include "gpu.h"
#endif

static gmtf_gpu_ibwt_ctx *ctx;
static size_t unit = 2u << 20; /* "large" block size; smaller in the emulation */
static int full = 1;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- a batch: source blocks, their BWT and sample rows ------------------- */

typedef struct batch {
    uint8_t *src, *bwt;
    size_t len, cap;
    uint64_t *off;
    uint32_t *step, *idx;
    size_t count, ocap, nidx, icap;
} batch;

static void b_init(batch *b)
{
    memset(b, 0, sizeof *b);
}

static uint8_t *b_block(batch *b, size_t n, uint32_t step)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->src = realloc(b->src, b->cap);
        b->bwt = realloc(b->bwt, b->cap);
        assert_non_null(b->src);
        assert_non_null(b->bwt);
    }
    if (b->count + 2 > b->ocap) {
        b->ocap = b->ocap ? 2 * b->ocap : 64;
        b->off = realloc(b->off, b->ocap * sizeof *b->off);
        b->step = realloc(b->step, b->ocap * sizeof *b->step);
        assert_non_null(b->off);
        assert_non_null(b->step);
    }
    size_t k = (n + step - 1) / step;
    if (b->nidx + k > b->icap) {
        b->icap = (b->nidx + k) * 2;
        b->idx = realloc(b->idx, b->icap * sizeof *b->idx);
        assert_non_null(b->idx);
    }
    b->off[b->count] = b->len;
    b->step[b->count] = step;
    b->count++;
    b->len += n;
    b->off[b->count] = b->len;
    b->nidx += k;
    return b->src + b->len - n;
}

static void b_free(batch *b)
{
    free(b->src);
    free(b->bwt);
    free(b->off);
    free(b->step);
    free(b->idx);
}

/* The forward transform of every block (codec/bwt.c's convention) by
 * libdivsufsort, any step; v2 steps cross-checked with codec/bwt.c. */
static void b_forward(batch *b)
{
    size_t k = 0;
    for (size_t i = 0; i < b->count; i++) {
        size_t n = b->off[i + 1] - b->off[i];
        const uint8_t *s = b->src + b->off[i];
        uint8_t *d = b->bwt + b->off[i];
        uint32_t step = b->step[i];
        saidx_t *sa = malloc(n * sizeof *sa);
        assert_non_null(sa);
        assert_int_equal(divsufsort(s, sa, (saidx_t)n), 0);
        size_t j = 0;
        d[j++] = s[n - 1];
        for (size_t r = 0; r < n; r++) {
            size_t p = (size_t)sa[r];
            if (p % step == 0)
                b->idx[k + p / step] = (uint32_t)(r + 1);
            if (p)
                d[j++] = s[p - 1];
        }
        assert_int_equal(j, n);
        if (step == 1u << gmtf_bwt_step_log2(n)) {
            uint8_t *ref = malloc(n);
            uint32_t ridx[GMTF_BWT_MAX_SAMPLES];
            void *ws = malloc(gmtf_bwt_workspace_size(n));
            assert_non_null(ref);
            assert_non_null(ws);
            assert_int_equal(gmtf_bwt_forward_step(s, ref, n, ridx, ws), 0);
            assert_memory_equal(ref, d, n);
            assert_memory_equal(ridx, b->idx + k, gmtf_bwt_sample_count(n) * sizeof *ridx);
            free(ref);
            free(ws);
        }
        k += (n + step - 1) / step;
        free(sa);
    }
}

/* Runs the batch through the device and compares with the source. */
static void b_check(batch *b, const char *what)
{
    b_forward(b);
    uint8_t *out = malloc(b->len + 1);
    assert_non_null(out);
    memset(out, 0xa5, b->len + 1);
    int rc = gmtf_gpu_ibwt_batch(ctx, b->bwt, b->off, b->count, b->step, b->idx, out);
    if (rc)
        fprintf(stderr, "%s: %d %s\n", what, rc, gmtf_gpu_ibwt_error(ctx));
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < b->count; i++)
        if (memcmp(out + b->off[i], b->src + b->off[i], b->off[i + 1] - b->off[i]) != 0) {
            fprintf(stderr, "%s: block %zu of %zu (n=%llu, step %u) differs\n", what, i, b->count,
                    (unsigned long long)(b->off[i + 1] - b->off[i]), b->step[i]);
            fail();
        }
    assert_int_equal(out[b->len], 0xa5);
    /* a real BWT: every segment's two chains meet, nothing walked again */
    assert_int_equal(gmtf_gpu_ibwt_last_repaired(ctx), 0);
    printf("%s: %zu blocks, %zu bytes, %zu chains: exact\n", what, b->count, b->len, b->nidx);
    free(out);
}

/* 1 unless GMTF_GPU_IBWT_BIDIR=0 (one chain a segment, nothing repaired) */
static int bidir(void)
{
    const char *e = getenv("GMTF_GPU_IBWT_BIDIR");
    return !(e && e[0] == '0');
}

/* The device's output for b's (possibly damaged) bytes against codec/bwt.c's
 * inverse of the same bytes; returns the segments repaired. */
static uint64_t b_same_as_cpu(batch *b)
{
    uint8_t *out = malloc(b->len), *ref = malloc(b->len);
    assert_non_null(out);
    assert_non_null(ref);
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, b->bwt, b->off, b->count, b->step, b->idx, out), 0);
    for (size_t i = 0, k = 0; i < b->count; i++) {
        size_t n = b->off[i + 1] - b->off[i];
        void *ws = malloc(gmtf_bwt_workspace_size(n));
        assert_non_null(ws);
        assert_int_equal(
            gmtf_bwt_inverse_step(b->bwt + b->off[i], ref + b->off[i], n, b->idx + k, ws), 0);
        free(ws);
        k += gmtf_bwt_sample_count(n);
    }
    assert_memory_equal(out, ref, b->len);
    free(out);
    free(ref);
    return gmtf_gpu_ibwt_last_repaired(ctx);
}

static uint32_t v2_step(size_t n)
{
    return 1u << gmtf_bwt_step_log2(n);
}

static void fill_text(uint8_t *p, size_t n)
{
    static const char *words[] = {"the ",  "static ", "int ",  "return ",  "struct ",
                                  "void ", "if (",    ") {\n", "}\n",      "0",
                                  "x",     "->",      "\t",    "license ", "GPL "};
    for (size_t i = 0; i < n;) {
        const char *w = words[rnd() % (sizeof words / sizeof words[0])];
        for (; *w && i < n; w++)
            p[i++] = (uint8_t)*w;
    }
}

static void fill(uint8_t *p, size_t n, int kind)
{
    switch (kind) {
    case 0:
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)rnd();
        break;
    case 1: fill_text(p, n); break;
    case 2: memset(p, 'z', n); break;
    case 3:
        for (size_t i = 0; i < n; i++)
            p[i] = "ab"[i & 1];
        break;
    case 4:
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)(rnd() & 1);
        break;
    default: {
        size_t period = 1 + rnd() % 500;
        for (size_t i = 0; i < n; i++)
            p[i] = i < period ? (uint8_t)rnd() : p[i - period];
    }
    }
}

/* ---- tests ----------------------------------------------------------------- */

static void test_tiny(void **state)
{
    (void)state;
    batch b;
    b_init(&b);
    for (size_t n = 1; n <= 40; n++)
        for (int kind = 0; kind < 6; kind++) {
            uint32_t step = kind == 5 ? 1 : (uint32_t)(1 + rnd() % (n + 2));
            fill(b_block(&b, n, step), n, kind);
        }
    b_check(&b, "tiny blocks, steps 1..n+2");
    b_free(&b);
}

static void test_v2_layout(void **state)
{
    (void)state;
    batch b;
    b_init(&b);
    size_t sizes[] = {unit,       unit - 1,         unit + 17,    1u << 14, (1u << 14) + 1,
                      256u << 10, (256u << 10) + 1, 3 * unit / 2, 100,      65536};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int kind = 0; kind < 6; kind++) {
            size_t n = sizes[i];
            fill(b_block(&b, n, v2_step(n)), n, kind);
        }
    b_check(&b, "version 2 layout, random/text/run/abab/binary/periodic");
    b_free(&b);
}

static void test_random_steps(void **state)
{
    (void)state;
    for (int r = 0; r < 4; r++) {
        batch b;
        b_init(&b);
        size_t count = 1 + rnd() % 40;
        for (size_t i = 0; i < count; i++) {
            size_t n = 1 + rnd() % (unit / 4);
            uint32_t step = (uint32_t)(1 + rnd() % (rnd() & 1 ? 64 : n + 1));
            if (rnd() % 3 == 0)
                step = v2_step(n);
            fill(b_block(&b, n, step), n, (int)(rnd() % 6));
        }
        b_check(&b, "random batch, random steps");
        b_free(&b);
    }
}

static void test_pieces(void **state)
{
    (void)state;
    batch b;
    b_init(&b);
    for (int i = 0; i < 24; i++) {
        size_t n = i % 5 == 0 ? 1 : 1000 + rnd() % (unit / 8);
        fill(b_block(&b, n, v2_step(n)), n, i % 6);
    }
    /* the smallest bound: every block its own piece in the emulation */
    assert_int_equal(gmtf_gpu_ibwt_set_piece(ctx, 1), 0);
    b_check(&b, "small piece bound");
    assert_int_equal(gmtf_gpu_ibwt_set_piece(ctx, 0), 0);
    b_check(&b, "default piece bound");
    b_free(&b);
}

static void add_file(batch *b, const char *path, size_t blk, size_t limit)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    uint8_t *buf = malloc(blk);
    assert_non_null(buf);
    size_t got, total = 0;
    while (total < limit && (got = fread(buf, 1, blk, f)) > 0) {
        memcpy(b_block(b, got, v2_step(got)), buf, got);
        total += got;
    }
    free(buf);
    fclose(f);
}

static void test_corpus(void **state)
{
    (void)state;
    const char *dir = getenv("GMTF_CORPUS");
    if (!dir || !*dir)
        dir = "/work/shared/corpus";
    batch b;
    b_init(&b);
    const char *sub[] = {"calgary", "canterbury", ""};
    for (size_t s = 0; s < 3; s++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, sub[s]);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char file[8192];
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            add_file(&b, file, full ? (900u << 10) : (64u << 10), full ? (64u << 20) : (1u << 20));
        }
        closedir(d);
    }
    if (b.count == 0) {
        printf("SKIP corpus: no corpus at %s (GMTF_CORPUS)\n", dir);
        b_free(&b);
        skip();
    }
    b_check(&b, "corpus");
    b_free(&b);
}

static void test_linux_tar(void **state)
{
    (void)state;
    size_t want = full ? (64u << 20) : (2u << 20), blk = full ? (2u << 20) : (128u << 10);
    const char *tar = getenv("GMTF_LINUX_TAR");
    batch b;
    b_init(&b);
    if (tar && *tar) {
        add_file(&b, tar, blk, want);
    } else {
        FILE *p = popen("xz -dc /usr/src/linux-source-6.1.tar.xz 2>/dev/null", "r");
        if (p) {
            uint8_t *buf = malloc(blk);
            assert_non_null(buf);
            size_t got, total = 0;
            while (total < want && (got = fread(buf, 1, blk, p)) == blk) {
                memcpy(b_block(&b, got, v2_step(got)), buf, got);
                total += got;
            }
            free(buf);
            pclose(p);
        }
    }
    if (b.count == 0) {
        printf("SKIP linux tar: none (GMTF_LINUX_TAR or /usr/src/linux-source-6.1.tar.xz)\n");
        b_free(&b);
        skip();
    }
    b_check(&b, "Linux tar prefix");
    b_free(&b);
}

/* Rows out of range: -EUCLEAN before anything runs, dst untouched. */
static void test_hostile_rows(void **state)
{
    (void)state;
    batch b;
    b_init(&b);
    for (int i = 0; i < 6; i++) {
        size_t n = 1000 + rnd() % 70000;
        fill(b_block(&b, n, v2_step(n)), n, i);
    }
    b_forward(&b);
    uint8_t *out = malloc(b.len);
    assert_non_null(out);
    for (int r = 0; r < 60; r++) {
        size_t bi = rnd() % b.count, k = 0;
        for (size_t i = 0; i < bi; i++)
            k += (b.off[i + 1] - b.off[i] + b.step[i] - 1) / b.step[i];
        size_t n = b.off[bi + 1] - b.off[bi];
        k += rnd() % ((n + b.step[bi] - 1) / b.step[bi]);
        uint32_t keep = b.idx[k];
        uint32_t bad[] = {0, (uint32_t)n + 1, (uint32_t)n + 2, 0xffffffu, 0x1000000u, 0xffffffffu};
        b.idx[k] = bad[r % 6];
        memset(out, 0x3c, b.len);
        assert_int_equal(gmtf_gpu_ibwt_check(b.off, b.count, b.step, b.idx), -EUCLEAN);
        assert_int_equal(gmtf_gpu_ibwt_batch(ctx, b.bwt, b.off, b.count, b.step, b.idx, out),
                         -EUCLEAN);
        for (size_t i = 0; i < b.len; i++)
            assert_int_equal(out[i], 0x3c);
        b.idx[k] = keep;
    }
    assert_int_equal(gmtf_gpu_ibwt_ok(ctx), 1);
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, b.bwt, b.off, b.count, b.step, b.idx, out), 0);
    assert_memory_equal(out, b.src, b.len);
    free(out);
    b_free(&b);
}

/* Garbage bytes and in-range rows (and the extreme rows 1 and n): the same
 * walk as codec/bwt.c's inverse, so the same bytes out. */
static void test_hostile_bytes(void **state)
{
    (void)state;
    uint64_t repaired = 0;
    for (int r = 0; r < 8; r++) {
        batch b;
        b_init(&b);
        size_t count = 1 + rnd() % 8;
        for (size_t i = 0; i < count; i++) {
            size_t n = 1 + rnd() % (r & 1 ? 300000 : 3000);
            b_block(&b, n, v2_step(n));
        }
        for (size_t i = 0; i < b.len; i++)
            b.bwt[i] = (uint8_t)(r & 2 ? rnd() % 3 : rnd());
        for (size_t i = 0, k = 0; i < b.count; i++) {
            size_t n = b.off[i + 1] - b.off[i], K = (n + b.step[i] - 1) / b.step[i];
            for (size_t j = 0; j < K; j++, k++) {
                uint64_t x = rnd() % 4;
                b.idx[k] = x == 0 ? 1 : x == 1 ? (uint32_t)n : (uint32_t)(1 + rnd() % n);
            }
        }
        repaired += b_same_as_cpu(&b);
        b_free(&b);
    }
    /* garbage: the two chains of most segments do not meet */
    if (bidir())
        assert_true(repaired > 0);
    else
        assert_int_equal(repaired, 0);
    assert_int_equal(gmtf_gpu_ibwt_ok(ctx), 1);
}

/* A real BWT with a few bytes changed: the segments whose chains still meet
 * keep the two-ended walk, the others are walked again; the output is
 * codec/bwt.c's for the same bytes either way. */
static void test_damaged_bwt(void **state)
{
    (void)state;
    uint64_t repaired = 0;
    for (int r = 0; r < 6; r++) {
        batch b;
        b_init(&b);
        size_t count = 2 + rnd() % 6;
        for (size_t i = 0; i < count; i++) {
            size_t n = unit / 4 + rnd() % (unit / 2);
            fill(b_block(&b, n, v2_step(n)), n, 1 + (int)(rnd() % 5));
        }
        b_forward(&b);
        for (int d = 0; r < 5 && d < 1 + r; d++) {
            size_t at = rnd() % b.len;
            b.bwt[at] = (uint8_t)(b.bwt[at] + 1 + rnd() % 255);
        }
        if (r == 5) /* swapped neighbours: the same bytes, the LF map changed locally */
            for (size_t i = 0; i + 1 < b.len; i += b.len / 3) {
                uint8_t t = b.bwt[i];
                b.bwt[i] = b.bwt[i + 1];
                b.bwt[i + 1] = t;
            }
        uint64_t rp = b_same_as_cpu(&b);
        if (r == 0) /* one byte of one block: the other blocks' segments meet */
            assert_true(rp < b.nidx);
        repaired += rp;
        b_free(&b);
    }
    if (bidir())
        assert_true(repaired > 0);
    assert_int_equal(gmtf_gpu_ibwt_ok(ctx), 1);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    uint8_t buf[64] = {1, 2, 3}, out[64];
    uint64_t off[3] = {0, 10, 10};
    uint32_t step[2] = {4, 4}, idx[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(gmtf_gpu_ibwt_batch(NULL, buf, off, 1, step, idx, out), -ENODEV);
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, buf, off, 0, step, idx, out), 0);
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, buf, off, 2, step, idx, out), -EINVAL); /* empty */
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, NULL, off, 1, step, idx, out), -EINVAL);
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, buf, off, 1, step, idx, NULL), -EINVAL);
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, buf, off, 1, NULL, idx, out), -EINVAL);
    step[0] = 0;
    assert_int_equal(gmtf_gpu_ibwt_batch(ctx, buf, off, 1, step, idx, out), -EINVAL);
    step[0] = 4;
    uint64_t big[2] = {0, (uint64_t)GMTF_GPU_IBWT_MAX_BLOCK + 1};
    assert_int_equal(gmtf_gpu_ibwt_check(big, 1, step, idx), -EINVAL);
    assert_int_equal(gmtf_gpu_ibwt_check(off, 1, step, idx), 0);
    assert_int_equal(gmtf_gpu_ibwt_ok(ctx), 1);
}

static int setup(void **state)
{
    (void)state;
    return gmtf_gpu_ibwt_create(&ctx) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gmtf_gpu_ibwt_destroy(ctx);
    return 0;
}

int main(void)
{
#ifdef GMTF_GPU_IBWT_EMU
    const char *f = getenv("GMTF_IBWT_EMU_FULL");
    full = f && *f && *f != '0';
    if (!full)
        unit = 96u << 10;
    printf("CPU emulation of the GPU inverse BWT%s\n", full ? " (full sizes)" : "");
#else
    const char *small = getenv("GMTF_IBWT_TEST_SMALL"); /* e.g. under compute-sanitizer */
    if (small && *small && *small != '0') {
        full = 0;
        unit = 96u << 10;
    }
    if (!gmtf_gpu_available()) {
        printf("SKIP: no usable CUDA device on this machine (or no CUDA in this build)\n");
        return 77;
    }
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_v2_layout),     cmocka_unit_test(test_random_steps),
        cmocka_unit_test(test_pieces),        cmocka_unit_test(test_hostile_rows),
        cmocka_unit_test(test_hostile_bytes), cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_linux_tar),     cmocka_unit_test(test_damaged_bwt),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
