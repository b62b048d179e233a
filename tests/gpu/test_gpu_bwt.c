/* GPU forward BWT (gpu_bwt.h) against codec/bwt.c's gmtf_bwt_forward, byte
 * for byte, and every sample index against a suffix array from
 * libdivsufsort: tiny blocks (1..40 bytes), repetitive and adversarial
 * blocks (one byte, "abab", Fibonacci, Thue-Morse, long periods), random
 * data, a batch mixing 1-byte and 2^24-byte blocks, the corpora
 * (GMTF_CORPUS), a Linux tar prefix (GMTF_LINUX_TAR, a plain tar, or
 * /usr/src/linux-source-6.1.tar.xz), pieces (a small piece bound), the
 * staged path and many sample layouts. With no CUDA device it exits 77.
 *
 * Built a second time with GMTF_GPU_BWT_EMU against the CPU emulation of
 * gpu/bwt_sort.cu (test_gpu_bwt_emu): the same algorithm without a GPU, on
 * smaller inputs (GMTF_BWT_EMU_FULL=1 for the full sizes). GMTF_BWT_TEST_SMALL=1
 * gives the GPU build the small sizes too (for compute-sanitizer). */
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

#ifdef GMTF_GPU_BWT_EMU
#include "bwt_emu_names.h"
#endif
#include "bwt.h"
#include "gpu_bwt.h"
#ifndef GMTF_GPU_BWT_EMU
#include "gpu.h"
#endif

static gmtf_gpu_bwt_ctx *ctx;
static size_t unit = 1u << 20; /* "large" block size; smaller in the emulation */
static int full = 1;           /* the 2^24-byte and Linux tar cases */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- batches -------------------------------------------------------------- */

typedef struct batch {
    uint8_t *data;
    size_t len, cap;
    uint64_t *off;
    size_t count, ocap;
} batch;

static void b_init(batch *b, size_t lead)
{
    memset(b, 0, sizeof *b);
    b->cap = lead + 4096;
    b->data = malloc(b->cap);
    b->len = lead; /* blocks need not start at 0 */
    memset(b->data, 0x5a, lead);
    b->ocap = 64;
    b->off = malloc(b->ocap * sizeof *b->off);
    assert_non_null(b->data);
    assert_non_null(b->off);
    b->off[0] = lead;
}

static uint8_t *b_block(batch *b, size_t n)
{
    while (b->len + n > b->cap) {
        b->cap *= 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    if (b->count + 2 > b->ocap) {
        b->ocap *= 2;
        b->off = realloc(b->off, b->ocap * sizeof *b->off);
        assert_non_null(b->off);
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    b->off[++b->count] = b->len;
    return p;
}

static void b_free(batch *b)
{
    free(b->data);
    free(b->off);
}

/* Fills p[0..n) with one of the structured patterns. */
enum {
    P_ZERO,
    P_FF,
    P_ABAB,
    P_ABC,
    P_FIB,
    P_THUE,
    P_PERIOD,
    P_RANDOM,
    P_RUNS,
    P_AAB,
    P_BIN,
    P_WORDS,
    P_COUNT
};

static void fill(uint8_t *p, size_t n, int kind)
{
    static const char *words[] = {"the ",  "static ", "int ",  "return ",  "struct ",
                                  "void ", "if (",    ") {\n", "}\n",      "0",
                                  "x",     "->",      "\t",    "license ", "GPL "};
    size_t period = 1 + rnd() % 1000;
    for (size_t i = 0; i < n;) {
        switch (kind) {
        case P_ZERO: p[i++] = 0; break;
        case P_FF: p[i++] = 0xff; break;
        case P_ABAB: p[i] = "ab"[i & 1], i++; break;
        case P_ABC: p[i] = (uint8_t)("abc"[i % 3] - 'a'), i++; break;
        case P_FIB: {
            /* Fibonacci word: letter i is b when floor((i+2)/phi) - floor((i+1)/phi) == 0 */
            double phi = 1.6180339887498949;
            p[i] =
                (uint64_t)((double)(i + 2) / phi) - (uint64_t)((double)(i + 1) / phi) ? 'a' : 'b';
            i++;
            break;
        }
        case P_THUE: p[i] = (uint8_t)(__builtin_popcountll(i) & 1), i++; break;
        case P_PERIOD: p[i] = i < period ? (uint8_t)rnd() : p[i - period], i++; break;
        case P_RANDOM: p[i++] = (uint8_t)rnd(); break;
        case P_RUNS: {
            size_t r = 1 + rnd() % 300;
            uint8_t c = (uint8_t)(rnd() % 4);
            for (; r && i < n; r--)
                p[i++] = c;
            break;
        }
        case P_AAB: p[i] = i + 1 == n ? 'b' : 'a', i++; break;
        case P_BIN: p[i++] = (uint8_t)(rnd() & 1); break;
        default: {
            const char *w = words[rnd() % (sizeof words / sizeof words[0])];
            for (; *w && i < n; w++)
                p[i++] = (uint8_t)*w;
            break;
        }
        }
    }
}

/* ---- reference and comparison --------------------------------------------- */

static int verbose_left = 20;

/* Checks one block's output against gmtf_bwt_forward (bytes and, for the
 * default step, its indexes) and the sample indexes against its SA. */
static size_t check_block(const uint8_t *src, size_t n, uint32_t step, const uint8_t *got,
                          const uint32_t *gidx, size_t bi)
{
    uint8_t *ref = malloc(n);
    uint32_t *ws = malloc(gmtf_bwt_workspace_size(n));
    uint32_t ridx[GMTF_BWT_MAX_INDEXES];
    assert_non_null(ref);
    assert_non_null(ws);
    assert_int_equal(gmtf_bwt_forward(src, ref, n, ridx, ws), 0);
    size_t bad = 0;
    if (memcmp(ref, got, n) != 0) {
        size_t i = 0;
        while (ref[i] == got[i])
            i++;
        if (verbose_left-- > 0)
            fprintf(stderr, "block %zu (n=%zu): BWT byte %zu is %u, expected %u\n", bi, n, i,
                    got[i], ref[i]);
        bad++;
    }
    /* ws holds the suffix array: sample k is at row i + 1 where sa[i] = k*step */
    uint64_t K = gmtf_gpu_bwt_index_count(n, step);
    uint32_t *want = malloc(K * sizeof *want);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++)
        if (ws[i] % step == 0)
            want[ws[i] / step] = (uint32_t)(i + 1);
    if (step == gmtf_gpu_bwt_default_step(n)) {
        assert_int_equal(K, gmtf_bwt_index_count(n));
        assert_memory_equal(want, ridx, K * sizeof *want);
    }
    for (uint64_t k = 0; k < K; k++)
        if (want[k] != gidx[k]) {
            if (verbose_left-- > 0)
                fprintf(stderr, "block %zu (n=%zu, step %u): index %llu is %u, expected %u\n", bi,
                        n, step, (unsigned long long)k, gidx[k], want[k]);
            bad++;
            break;
        }
    free(want);
    free(ref);
    free(ws);
    return bad;
}

/* Host buffers: pinned ones (gmtf_gpu_host_alloc) take the batch path
 * whose copies overlap the kernels; the emulation has only plain ones. */
static void *hbuf(size_t n, int pinned)
{
#ifndef GMTF_GPU_BWT_EMU
    if (pinned)
        return gmtf_gpu_host_alloc(n);
#endif
    (void)pinned;
    return malloc(n);
}

static void hfree(void *p, int pinned)
{
#ifndef GMTF_GPU_BWT_EMU
    if (pinned) {
        gmtf_gpu_host_free(p);
        return;
    }
#endif
    (void)pinned;
    free(p);
}

/* Runs the batch through gmtf_gpu_bwt_batch with these steps (NULL:
 * default) and checks every block; pinned: from and to pinned memory. */
static void check_batch_mem(const char *name, const batch *b, const uint32_t *step, int pinned)
{
    uint64_t total = gmtf_gpu_bwt_index_total(b->off, b->count, step);
    assert_true(total >= b->count);
    uint8_t *dst = hbuf(b->len + 64, pinned), *src = hbuf(b->len + 1, pinned);
    uint32_t *idx = hbuf((total + 16) * sizeof *idx, pinned);
    assert_non_null(dst);
    assert_non_null(src);
    assert_non_null(idx);
    memcpy(src, b->data, b->len);
    memset(dst, 0xee, b->len + 64);
    memset(idx, 0xee, (total + 16) * sizeof *idx);
    int rc = gmtf_gpu_bwt_batch(ctx, src, b->off, b->count, step, dst, idx);
    if (rc)
        fprintf(stderr, "%s: gmtf_gpu_bwt_batch: %d (%s)\n", name, rc, gmtf_gpu_bwt_error(ctx));
    assert_int_equal(rc, 0);
    /* nothing outside the blocks written */
    for (size_t i = 0; i < b->off[0]; i++)
        assert_int_equal(dst[i], 0xee);
    for (size_t i = b->len; i < b->len + 64; i++)
        assert_int_equal(dst[i], 0xee);
    for (size_t i = total; i < total + 16; i++)
        assert_int_equal(idx[i], 0xeeeeeeeeu);
    size_t bad = 0, ix = 0;
    for (size_t i = 0; i < b->count; i++) {
        size_t n = b->off[i + 1] - b->off[i];
        uint32_t s = step ? step[i] : gmtf_gpu_bwt_default_step(n);
        bad += check_block(b->data + b->off[i], n, s, dst + b->off[i], idx + ix, i);
        ix += gmtf_gpu_bwt_index_count(n, s);
    }
    printf("%s%s: %zu blocks, %zu bytes, %llu indexes: %zu bad\n", name, pinned ? " (pinned)" : "",
           b->count, b->len - b->off[0], (unsigned long long)total, bad);
    assert_int_equal(bad, 0);
    hfree(dst, pinned);
    hfree(src, pinned);
    hfree(idx, pinned);
}

static void check_batch(const char *name, const batch *b, const uint32_t *step)
{
    check_batch_mem(name, b, step, 0);
}

/* Steps for every block: ceil(n / K) for a count K (0: step 1). */
static uint32_t *steps_for(const batch *b, uint64_t K)
{
    uint32_t *s = malloc((b->count + 1) * sizeof *s);
    assert_non_null(s);
    for (size_t i = 0; i < b->count; i++) {
        uint64_t n = b->off[i + 1] - b->off[i];
        s[i] = K ? (uint32_t)((n + K - 1) / K) : 1;
    }
    return s;
}

static void check_layouts(const char *name, const batch *b)
{
    char nm[256];
    check_batch(name, b, NULL);
    check_batch_mem(name, b, NULL, 1);
    uint64_t Ks[] = {0, 4096, 64, 3}; /* 0: step 1 */
    for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++) {
        uint32_t *s = steps_for(b, Ks[k]);
        snprintf(nm, sizeof nm, "%s, K=%llu", name, (unsigned long long)Ks[k]);
        check_batch(nm, b, s);
        free(s);
    }
}

/* ---- tests ------------------------------------------------------------------ */

static void test_bad_arguments(void **state)
{
    (void)state;
    uint8_t src[64] = {1, 2, 3}, dst[64];
    uint32_t idx[64], step[2] = {1, 0};
    uint64_t off[3] = {0, 10, 20};
    assert_int_equal(gmtf_gpu_bwt_batch(NULL, src, off, 1, NULL, dst, idx), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, NULL, off, 1, NULL, dst, idx), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, NULL, 1, NULL, dst, idx), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, off, 1, NULL, NULL, idx), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, off, 1, NULL, dst, NULL), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, off, 2, step, dst, idx), -EINVAL); /* step 0 */
    uint64_t empty[3] = {0, 10, 10};
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, empty, 2, NULL, dst, idx), -EINVAL);
    uint64_t down[3] = {0, 10, 5};
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, down, 2, NULL, dst, idx), -EINVAL);
    uint64_t huge[2] = {0, (1u << 24) + 1};
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, huge, 1, NULL, dst, idx), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_index_total(huge, 1, NULL), 0);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, off, 0, NULL, dst, idx), 0);
    /* staged calls out of order */
    assert_int_equal(gmtf_gpu_bwt_stage_upload(ctx, src, down, 2, NULL), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_stage_run(ctx, NULL), -EINVAL);
    assert_int_equal(gmtf_gpu_bwt_stage_download(ctx, dst, idx), -EINVAL);
    /* the layout helpers */
    assert_int_equal(gmtf_gpu_bwt_default_step(1), 1);
    assert_int_equal(gmtf_gpu_bwt_default_step(1u << 24), 1u << 20);
    assert_int_equal(gmtf_gpu_bwt_default_step(3 << 14), 1 << 14);
    assert_int_equal(gmtf_gpu_bwt_index_count(10, 3), 4);
    assert_int_equal(gmtf_gpu_bwt_index_count(10, 0), 0);
    assert_true(gmtf_gpu_bwt_ok(ctx));
    /* still works after the refusals */
    uint64_t one[2] = {0, 3};
    memcpy(src, "abc", 3);
    assert_int_equal(gmtf_gpu_bwt_batch(ctx, src, one, 1, NULL, dst, idx), 0);
    assert_memory_equal(dst, "cab", 3); /* rows: $, abc$, bc$, c$ */
    assert_int_equal(idx[0], 1);
}

/* Every length 1..40 in every pattern, as one batch. */
static void test_tiny_blocks(void **state)
{
    (void)state;
    batch b;
    b_init(&b, 7);
    for (size_t n = 1; n <= 40; n++)
        for (int k = 0; k < P_COUNT; k++)
            fill(b_block(&b, n), n, k);
    check_layouts("tiny", &b);
    b_free(&b);
}

static void test_structured(void **state)
{
    (void)state;
    batch b;
    b_init(&b, 0);
    for (int k = 0; k < P_COUNT; k++)
        fill(b_block(&b, unit), unit, k);
    /* odd sizes around powers of two */
    size_t odd[] = {255, 256, 257, 16383, 16384, 16385, 65537, 3 * unit / 2 + 1};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        fill(b_block(&b, odd[i]), odd[i], (int)(i % P_COUNT));
    check_layouts("structured", &b);
    b_free(&b);
}

/* 1-byte blocks beside 2^24-byte ones. */
static void test_mixed_sizes(void **state)
{
    (void)state;
    batch b;
    b_init(&b, 3);
    size_t big = full ? GMTF_GPU_BWT_MAX_BLOCK : 4 * unit;
    fill(b_block(&b, 1), 1, P_RANDOM);
    fill(b_block(&b, big), big, P_WORDS);
    fill(b_block(&b, 1), 1, P_ZERO);
    fill(b_block(&b, 3), 3, P_ABAB);
    fill(b_block(&b, 2 * unit), 2 * unit, P_RANDOM);
    fill(b_block(&b, 1), 1, P_FF);
    fill(b_block(&b, big), big, P_FIB);
    fill(b_block(&b, 17), 17, P_ZERO);
    fill(b_block(&b, big), big, P_ZERO);
    fill(b_block(&b, 1), 1, P_ZERO);
    check_batch("mixed", &b, NULL);
    check_batch_mem("mixed", &b, NULL, 1);
    uint32_t *s = steps_for(&b, 4096);
    check_batch("mixed, K=4096", &b, s);
    free(s);
    b_free(&b);
}

static uint8_t *read_file(const char *path, size_t *n, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *p = malloc(max + 1);
    *n = p ? fread(p, 1, max, f) : 0;
    fclose(f);
    return p;
}

static void test_corpus(void **state)
{
    (void)state;
    const char *dir = getenv("GMTF_CORPUS");
    batch b;
    b_init(&b, 0);
    const char *sub[] = {"calgary", "canterbury"};
    for (int k = 0; dir && k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, sub[k]);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, "SHA256SUMS") == 0)
                continue;
            char fp[8192];
            snprintf(fp, sizeof fp, "%s/%s", path, e->d_name);
            size_t n;
            uint8_t *src = read_file(fp, &n, full ? GMTF_GPU_BWT_MAX_BLOCK : 2 * unit);
            if (src && n)
                memcpy(b_block(&b, n), src, n);
            free(src);
        }
        closedir(d);
    }
    if (!b.count) {
        printf("SKIP corpus: no corpus (GMTF_CORPUS unset or empty)\n");
        b_free(&b);
        skip();
    }
    check_layouts("corpus", &b);
    b_free(&b);
}

/* A prefix of the Linux 6.1 tar: GMTF_LINUX_TAR (a plain tar file) or the
 * Debian source package's tar.xz. */
static uint8_t *linux_tar(size_t want, size_t *n)
{
    const char *plain = getenv("GMTF_LINUX_TAR");
    if (plain)
        return read_file(plain, n, want);
    const char *xz = "/usr/src/linux-source-6.1.tar.xz";
    FILE *t = fopen(xz, "rb");
    if (!t)
        return NULL;
    fclose(t);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "xz -dc %s 2>/dev/null | head -c %zu", xz, want);
    FILE *f = popen(cmd, "r");
    if (!f)
        return NULL;
    uint8_t *p = malloc(want + 1);
    *n = p ? fread(p, 1, want, f) : 0;
    pclose(f);
    return p;
}

static void test_linux_tar(void **state)
{
    (void)state;
    size_t n = 0, want = full ? (48u << 20) : 3 * unit;
    uint8_t *tar = linux_tar(want, &n);
    if (!tar || n < want) {
        printf("SKIP linux tar: set GMTF_LINUX_TAR or install linux-source-6.1\n");
        free(tar);
        skip();
    }
    size_t bsz[] = {unit, 2 * unit, 16 * unit};
    for (size_t k = 0; k < 3; k++) {
        batch b;
        b_init(&b, 0);
        size_t size = bsz[k] > GMTF_GPU_BWT_MAX_BLOCK ? GMTF_GPU_BWT_MAX_BLOCK : bsz[k];
        for (size_t p = 0; p < n; p += size) {
            size_t m = n - p < size ? n - p : size;
            memcpy(b_block(&b, m), tar + p, m);
        }
        char nm[64];
        snprintf(nm, sizeof nm, "linux tar, %zu KiB blocks", size >> 10);
        check_batch(nm, &b, NULL);
        if (k == 1) {
            check_batch_mem(nm, &b, NULL, 1);
            uint32_t *s = steps_for(&b, 4096);
            check_batch_mem("linux tar, K=4096", &b, s, 1);
            free(s);
        }
        b_free(&b);
    }
    free(tar);
}

/* A small piece bound: the batch is sorted in several pieces. */
static void test_pieces(void **state)
{
    (void)state;
    batch b;
    b_init(&b, 0);
    size_t sizes[] = {5 * unit, 1, 7 * unit, 3 * unit + 5, 2, 6 * unit, 11 * unit, 100, unit};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        fill(b_block(&b, sizes[i]), sizes[i], (int)((i * 5) % P_COUNT));
    assert_int_equal(gmtf_gpu_bwt_set_piece(ctx, 1), 0); /* raised to 2^24 + 2 */
    assert_int_equal(gmtf_gpu_bwt_set_profile(ctx, 1), 0);
    check_batch("pieces", &b, NULL);
    gmtf_gpu_bwt_profile p;
    assert_int_equal(gmtf_gpu_bwt_get_profile(ctx, &p), 0);
    printf("pieces: %u pieces, %u rounds\n", p.pieces, p.rounds);
    if (full)
        assert_true(p.pieces >= 3);
    assert_int_equal(gmtf_gpu_bwt_set_profile(ctx, 0), 0);
    assert_int_equal(gmtf_gpu_bwt_set_piece(ctx, 0), 0);
    b_free(&b);
}

/* Upload once, sort twice, download; device pointers handed out. */
static void test_staged(void **state)
{
    (void)state;
    batch b;
    b_init(&b, 100);
    for (int k = 0; k < P_COUNT; k++)
        fill(b_block(&b, 1000 + 3 * k), 1000 + 3 * k, k);
    uint64_t total = gmtf_gpu_bwt_index_total(b.off, b.count, NULL);
    uint8_t *d1 = calloc(1, b.len), *d2 = calloc(1, b.len);
    uint32_t *i1 = calloc(total, 4), *i2 = calloc(total, 4);
    assert_int_equal(gmtf_gpu_bwt_stage_upload(ctx, b.data, b.off, b.count, NULL), 0);
    assert_int_equal(gmtf_gpu_bwt_stage_download(ctx, d1, i1), -EINVAL); /* not sorted yet */
    double ms = -1;
    assert_int_equal(gmtf_gpu_bwt_stage_run(ctx, &ms), 0);
    assert_true(ms >= 0);
    void *dv = NULL, *di = NULL;
    assert_int_equal(gmtf_gpu_bwt_stage_device(ctx, &dv, &di), 0);
    assert_non_null(dv);
    assert_non_null(di);
    assert_int_equal(gmtf_gpu_bwt_stage_download(ctx, d1, i1), 0);
    assert_int_equal(gmtf_gpu_bwt_stage_run(ctx, NULL), 0);
    assert_int_equal(gmtf_gpu_bwt_stage_download(ctx, d2, i2), 0);
    assert_memory_equal(d1 + b.off[0], d2 + b.off[0], b.len - b.off[0]);
    assert_memory_equal(i1, i2, total * 4);
    size_t ix = 0, bad = 0;
    for (size_t i = 0; i < b.count; i++) {
        size_t n = b.off[i + 1] - b.off[i];
        bad += check_block(b.data + b.off[i], n, gmtf_gpu_bwt_default_step(n), d1 + b.off[i],
                           i1 + ix, i);
        ix += gmtf_gpu_bwt_index_count(n, gmtf_gpu_bwt_default_step(n));
    }
    assert_int_equal(bad, 0);
    free(d1), free(d2), free(i1), free(i2);
    b_free(&b);
}

/* Random batches of random sizes and contents, several layouts. */
static void test_random_batches(void **state)
{
    (void)state;
    for (int r = 0; r < 4; r++) {
        batch b;
        b_init(&b, rnd() % 5);
        size_t nb = 1 + rnd() % 60;
        for (size_t i = 0; i < nb; i++) {
            size_t n = 1 + (rnd() % 4 == 0 ? rnd() % (2 * unit) : rnd() % 5000);
            fill(b_block(&b, n), n, (int)(rnd() % P_COUNT));
        }
        uint32_t *s = malloc(b.count * sizeof *s);
        for (size_t i = 0; i < b.count; i++) {
            uint32_t n = (uint32_t)(b.off[i + 1] - b.off[i]);
            s[i] = 1 + (uint32_t)(rnd() % (rnd() % 2 ? n + 10 : 70));
        }
        check_batch("random", &b, s);
        free(s);
        b_free(&b);
    }
}

static int setup(void **state)
{
    (void)state;
    int rc = gmtf_gpu_bwt_create(&ctx);
    if (rc)
        fprintf(stderr, "gmtf_gpu_bwt_create: %d\n", rc);
    return rc ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    gmtf_gpu_bwt_destroy(ctx);
    return 0;
}

int main(void)
{
#ifdef GMTF_GPU_BWT_EMU
    const char *f = getenv("GMTF_BWT_EMU_FULL");
    full = f && *f && *f != '0';
    if (!full)
        unit = 32u << 10; /* keeps the sanitizer build's run near a minute */
    printf("CPU emulation of the GPU suffix sort%s\n", full ? " (full sizes)" : "");
#else
    const char *small = getenv("GMTF_BWT_TEST_SMALL"); /* e.g. under compute-sanitizer */
    if (small && *small && *small != '0') {
        full = 0;
        unit = 64u << 10;
    }
    if (!gmtf_gpu_available()) {
        printf("SKIP: no usable CUDA device on this machine (or no CUDA in this build)\n");
        return 77;
    }
    char name[256];
    int sms = 0;
    gmtf_gpu_device_info(name, sizeof name, &sms);
    printf("device: %s, %d SMs\n", name, sms);
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),  cmocka_unit_test(test_tiny_blocks),
        cmocka_unit_test(test_structured),     cmocka_unit_test(test_staged),
        cmocka_unit_test(test_random_batches), cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_mixed_sizes),    cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_linux_tar),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
