/* Round trips through the public API.
 *
 * Groups (argv[1] picks one; none runs all):
 *   corpus    every corpus file at block sizes 64 KiB, 900 KiB and 4 MiB,
 *             plus block sizes that are not powers of two
 *   system    files every Debian machine has (licences, headers, binaries)
 *   edge      empty, 1 byte, 1 MiB of one byte, all 256 values, period-2
 *             and period-3 strings, random data, tiny sizes
 *   max       16 MiB blocks (random, text, one byte) and the limit itself
 *   batch     gmtf_batch_encode/decode with 1 and 4 threads: identical
 *             frames (determinism), equal to single-frame encoding, and
 *             per-frame status on a damaged batch
 *   backends  every available MTF backend gives the same frames as scalar
 *             and decodes everyone's frames
 * Each decode goes into a buffer of exactly the block size followed by a
 * guard zone; every frame's header is checked with gmtf_frame_info_get. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmtf_codec.h"
#include "test_util.h"

static const size_t block_sizes[] = {64u << 10, 900u << 10, 4u << 20};
#define NBLOCK_SIZES (sizeof block_sizes / sizeof block_sizes[0])

static gmtf_codec *new_codec(unsigned threads, const char *mtf, size_t max_block)
{
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {.threads = threads, .mtf = mtf, .max_block = (uint32_t)max_block};
    int r = gmtf_codec_create(&c, &o);
    if (r != 0)
        fail_msg("codec_create(threads=%u, mtf=%s, max_block=%zu): %s", threads, mtf ? mtf : "NULL",
                 max_block, gmtf_strerror(r));
    return c;
}

/* Encodes data[0..n) in blocks of `block` bytes, one frame each, checks
 * each frame's header and decodes it back. Returns the total frame bytes. */
static size_t roundtrip_blocks(gmtf_codec *c, const uint8_t *data, size_t n, size_t block,
                               const char *what)
{
    size_t total = 0;
    uint8_t *frame = tu_malloc(gmtf_frame_bound(block));
    tu_guarded out = tu_guarded_alloc(block);
    size_t pos = 0;
    do {
        size_t len = n - pos < block ? n - pos : block;
        long f = gmtf_frame_encode(c, data + pos, len, frame, gmtf_frame_bound(len));
        if (f < 0)
            fail_msg("%s: encode of block at %zu (%zu bytes, block size %zu): %s", what, pos, len,
                     block, gmtf_strerror((int)f));
        assert_true((size_t)f <= gmtf_frame_bound(len));
        gmtf_frame_info info;
        assert_int_equal(gmtf_frame_info_get(frame, (size_t)f, &info), 0);
        assert_int_equal(info.frame_len, (uint32_t)f);
        assert_int_equal(info.orig_len, len);
        tu_guard_set(&out, len); /* exactly the block: the guard sits right after it */
        long d = gmtf_frame_decode(c, frame, (size_t)f, out.buf, len);
        if (d != (long)len)
            fail_msg("%s: decode of block at %zu (%zu bytes, block size %zu, method %u): %s", what,
                     pos, len, block, info.method, d < 0 ? gmtf_strerror((int)d) : "wrong length");
        if (memcmp(out.buf, data + pos, len) != 0)
            fail_msg("%s: block at %zu (%zu bytes, block size %zu, method %u) decoded to "
                     "different bytes",
                     what, pos, len, block, info.method);
        assert_true(tu_guard_ok(&out));
        total += (size_t)f;
        pos += len;
    } while (pos < n);
    free(frame);
    tu_guarded_free(&out);
    return total;
}

/* ---- corpus and system files ------------------------------------------ */

static void roundtrip_files(const tu_files *files, const char *label)
{
    for (size_t b = 0; b < NBLOCK_SIZES; b++) {
        gmtf_codec *c = new_codec(1, "scalar", block_sizes[b]);
        size_t in = 0, out = 0;
        for (size_t i = 0; i < files->count; i++) {
            in += files->v[i].len;
            out += roundtrip_blocks(c, files->v[i].data, files->v[i].len, block_sizes[b],
                                    files->v[i].name);
        }
        printf("# %s: %zu files, block %zu KiB: %zu -> %zu bytes\n", label, files->count,
               block_sizes[b] >> 10, in, out);
        gmtf_codec_destroy(c);
    }
}

static void test_corpus(void **state)
{
    (void)state;
    tu_files files = tu_corpus_files();
    if (files.count == 0)
        skip();
    roundtrip_files(&files, "corpus");
    /* Block sizes that are not powers of two, over the whole corpus as one
     * stream so blocks straddle file boundaries. */
    size_t total = 0;
    for (size_t i = 0; i < files.count; i++)
        total += files.v[i].len;
    uint8_t *all = tu_concat(&files, total);
    static const size_t odd[] = {100000, 65537, 1000003, 3u << 20};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        gmtf_codec *c = new_codec(1, "scalar", odd[i]);
        roundtrip_blocks(c, all, total, odd[i], "corpus (odd block sizes)");
        gmtf_codec_destroy(c);
    }
    free(all);
    tu_files_free(&files);
}

static void test_system(void **state)
{
    (void)state;
    tu_files files = tu_system_files(24, (size_t)3 << 20);
    if (files.count == 0) {
        printf("# no system files found\n");
        skip();
    }
    roundtrip_files(&files, "system files");
    uint8_t *all = tu_concat(&files, (size_t)5 << 20);
    gmtf_codec *c = new_codec(1, "scalar", 777777);
    roundtrip_blocks(c, all, (size_t)5 << 20, 777777, "system files (block 777777)");
    gmtf_codec_destroy(c);
    free(all);
    tu_files_free(&files);
}

/* ---- edge cases -------------------------------------------------------- */

static void edge_all_block_sizes(const uint8_t *data, size_t n, const char *what)
{
    for (size_t b = 0; b < NBLOCK_SIZES; b++) {
        gmtf_codec *c = new_codec(1, "scalar", block_sizes[b]);
        roundtrip_blocks(c, data, n, block_sizes[b], what);
        gmtf_codec_destroy(c);
    }
}

static void test_edge(void **state)
{
    (void)state;
    size_t mib = (size_t)1 << 20;
    uint8_t *buf = tu_malloc(6 * mib);

    edge_all_block_sizes(buf, 0, "empty");
    for (int v = 0; v < 256; v++) {
        buf[0] = (uint8_t)v;
        gmtf_codec *c = new_codec(1, "scalar", 1);
        roundtrip_blocks(c, buf, 1, 1, "1 byte");
        gmtf_codec_destroy(c);
    }
    edge_all_block_sizes(buf, 1, "1 byte");

    memset(buf, 0, mib);
    edge_all_block_sizes(buf, mib, "1 MiB of zeros");
    memset(buf, 0xFF, mib);
    edge_all_block_sizes(buf, mib, "1 MiB of 0xFF");
    memset(buf, 'x', mib);
    buf[mib - 1] = 'y'; /* a run broken at the very end goes through the BWT */
    edge_all_block_sizes(buf, mib, "1 MiB of one byte then another");

    for (int i = 0; i < 256; i++)
        buf[i] = (uint8_t)i;
    edge_all_block_sizes(buf, 256, "all 256 values");
    for (int i = 0; i < 256; i++)
        buf[i] = (uint8_t)(255 - i);
    edge_all_block_sizes(buf, 256, "all 256 values descending");
    /* all 256 values in a shuffled order, many times over */
    uint64_t s = 5;
    for (size_t i = 0; i < mib; i += 256) {
        for (int k = 0; k < 256; k++)
            buf[i + (size_t)k] = (uint8_t)k;
        for (int k = 255; k > 0; k--) {
            size_t j = (size_t)tu_rand_below(&s, (uint64_t)k + 1);
            uint8_t t = buf[i + (size_t)k];
            buf[i + (size_t)k] = buf[i + j];
            buf[i + j] = t;
        }
    }
    edge_all_block_sizes(buf, mib, "shuffled permutations of 0..255");

    static const char *periods[] = {"ab", "abc", "\x00\xff", "aab", "abcd"};
    for (size_t p = 0; p < sizeof periods / sizeof periods[0]; p++) {
        size_t pl = p == 2 ? 2 : strlen(periods[p]);
        for (size_t i = 0; i < 2 * mib + 1; i++)
            buf[i] = (uint8_t)periods[p][i % pl];
        char what[64];
        snprintf(what, sizeof what, "period-%zu string #%zu", pl, p);
        edge_all_block_sizes(buf, 2 * mib + 1, what);
        edge_all_block_sizes(buf, 17, what);
    }

    tu_fill_random(buf, 6 * mib, 99);
    edge_all_block_sizes(buf, 6 * mib, "6 MiB random");
    /* random over a 2-letter and a 4-letter alphabet: compressible, no runs */
    for (size_t i = 0; i < 2 * mib; i++)
        buf[i] = (uint8_t)('a' + (buf[i] & 1));
    edge_all_block_sizes(buf, 2 * mib, "random over 2 letters");
    tu_fill_text_like(buf, 5 * mib, 3);
    edge_all_block_sizes(buf, 5 * mib, "5 MiB text-like");

    /* Tiny blocks of every length around the raw/BWT threshold. */
    gmtf_codec *c = new_codec(1, "scalar", 0);
    for (size_t n = 1; n <= 300; n++) {
        tu_fill_text_like(buf, n, n);
        roundtrip_blocks(c, buf, n, n, "tiny text");
        tu_fill_random(buf, n, n);
        roundtrip_blocks(c, buf, n, n, "tiny random");
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)(i % 3 == 2);
        roundtrip_blocks(c, buf, n, n, "tiny period-3");
    }
    gmtf_codec_destroy(c);
    free(buf);
}

/* ---- maximum block size ----------------------------------------------- */

static void test_max(void **state)
{
    (void)state;
    size_t max = GMTF_BLOCK_MAX;
    assert_int_equal(max, (size_t)16 << 20);
    uint8_t *buf = tu_malloc(max + 1);
    gmtf_codec *c = new_codec(1, "scalar", 0);

    tu_fill_random(buf, max, 1);
    roundtrip_blocks(c, buf, max, max, "16 MiB random");

    tu_files files = tu_corpus_files();
    if (files.count == 0)
        files = tu_system_files(30, (size_t)2 << 20);
    uint8_t *text = tu_concat(&files, max);
    if (!text) {
        text = tu_malloc(max);
        tu_fill_text_like(text, max, 8);
    }
    size_t total = roundtrip_blocks(c, text, max, max, "16 MiB real data");
    printf("# 16 MiB of real data in one block: %zu bytes\n", total);
    assert_true(total < max);
    free(text);
    tu_files_free(&files);

    memset(buf, 7, max);
    roundtrip_blocks(c, buf, max, max, "16 MiB of one byte");

    /* One byte more than the maximum is refused, and so is a block over
     * the codec's own max_block. */
    uint8_t *frame = tu_malloc(gmtf_frame_bound(max + 1));
    assert_true(gmtf_frame_encode(c, buf, max + 1, frame, gmtf_frame_bound(max + 1)) < 0);
    gmtf_codec *small = new_codec(1, "scalar", 1000);
    assert_true(gmtf_frame_encode(small, buf, 1001, frame, gmtf_frame_bound(1001)) < 0);
    gmtf_codec_destroy(small);
    free(frame);
    gmtf_codec_destroy(c);
    free(buf);
}

/* ---- batches ----------------------------------------------------------- */

typedef struct batch {
    uint8_t *src;
    uint64_t *off;
    size_t count;
} batch;

/* Cuts data into blocks of `block` bytes and appends a few odd blocks
 * (empty, 1 byte, a run, random) so every frame method is in the batch. */
static batch make_batch(const uint8_t *data, size_t n, size_t block)
{
    static const size_t extra_len[] = {0, 1, 5000, 20000, 0, 3};
    size_t nextra = sizeof extra_len / sizeof extra_len[0];
    size_t nblocks = (n + block - 1) / block;
    batch b;
    b.count = nblocks + nextra;
    b.off = tu_malloc((b.count + 1) * sizeof *b.off);
    size_t total = n;
    for (size_t i = 0; i < nextra; i++)
        total += extra_len[i];
    b.src = tu_malloc(total);
    size_t pos = 0, k = 0;
    b.off[0] = 0;
    /* odd blocks first and in the middle, so their frames sit between others */
    for (size_t i = 0; i < nextra / 2; i++, k++) {
        memset(b.src + pos, 'r', extra_len[i]);
        pos += extra_len[i];
        b.off[k + 1] = pos;
    }
    for (size_t i = 0; i < nblocks; i++, k++) {
        size_t len = n - i * block < block ? n - i * block : block;
        memcpy(b.src + pos, data + i * block, len);
        pos += len;
        b.off[k + 1] = pos;
    }
    for (size_t i = nextra / 2; i < nextra; i++, k++) {
        tu_fill_random(b.src + pos, extra_len[i], i);
        pos += extra_len[i];
        b.off[k + 1] = pos;
    }
    assert_int_equal(k, b.count);
    assert_int_equal(pos, total);
    return b;
}

static void batch_free(batch *b)
{
    free(b->src);
    free(b->off);
}

/* Batch-encodes b; returns the malloc'ed frames, fills *dst_off. Checks
 * the CRCs gmtf_batch_encode_crc reports against the blocks and against
 * the data checksums in the frames. */
static uint8_t *batch_encode_checked(gmtf_codec *c, const batch *b, uint64_t **dst_off)
{
    uint64_t cap = gmtf_batch_bound(b->off, b->count);
    assert_true(cap >= b->off[b->count]);
    uint8_t *dst = tu_malloc((size_t)cap);
    *dst_off = tu_malloc((b->count + 1) * sizeof **dst_off);
    uint32_t *crc = tu_malloc((b->count + 1) * sizeof *crc);
    for (size_t i = 0; i < b->count; i++)
        crc[i] = ~gmtf_crc32c(0, b->src + b->off[i], (size_t)(b->off[i + 1] - b->off[i]));
    int r = gmtf_batch_encode_crc(c, b->src, b->off, b->count, dst, cap, *dst_off, crc);
    if (r != 0)
        fail_msg("batch_encode (%u threads, %zu blocks): %s", gmtf_codec_threads(c), b->count,
                 gmtf_strerror(r));
    assert_int_equal((*dst_off)[0], 0);
    assert_true((*dst_off)[b->count] <= cap);
    for (size_t i = 0; i < b->count; i++) {
        size_t len = (size_t)(b->off[i + 1] - b->off[i]);
        gmtf_frame_info info;
        assert_int_equal(gmtf_frame_info_get(dst + (*dst_off)[i],
                                             (size_t)((*dst_off)[i + 1] - (*dst_off)[i]), &info),
                         0);
        if (crc[i] != gmtf_crc32c(0, b->src + b->off[i], len) || crc[i] != info.data_crc)
            fail_msg("batch_encode_crc (%s, %u threads): wrong CRC for block %zu",
                     gmtf_codec_mtf_name(c), gmtf_codec_threads(c), i);
    }
    free(crc);
    return dst;
}

/* Decodes a batch's frames with batch_decode and checks every block. */
static void batch_decode_checked(gmtf_codec *c, const batch *b, const uint8_t *frames,
                                 const uint64_t *foff)
{
    size_t total = (size_t)b->off[b->count];
    tu_guarded out = tu_guarded_alloc(total);
    int *status = tu_malloc(b->count * sizeof *status);
    for (size_t i = 0; i < b->count; i++)
        status[i] = 12345;
    int r = gmtf_batch_decode(c, frames, foff, b->count, out.buf, b->off, status);
    if (r != 0)
        fail_msg("batch_decode (%u threads): %s", gmtf_codec_threads(c), gmtf_strerror(r));
    for (size_t i = 0; i < b->count; i++)
        assert_int_equal(status[i], 0);
    assert_memory_equal(out.buf, b->src, total);
    assert_true(tu_guard_ok(&out));
    tu_guarded_free(&out);
    free(status);
}

static void check_batch(const uint8_t *data, size_t n, size_t block, const char *what)
{
    batch b = make_batch(data, n, block);
    gmtf_codec *c1 = new_codec(1, "scalar", block), *c4 = new_codec(4, "scalar", block);
    uint64_t *off1, *off4, *off4b;
    uint8_t *f1 = batch_encode_checked(c1, &b, &off1);
    uint8_t *f4 = batch_encode_checked(c4, &b, &off4);
    /* Determinism: the same frames for 1 and 4 threads, and run to run. */
    assert_memory_equal(off1, off4, (b.count + 1) * sizeof *off1);
    if (memcmp(f1, f4, (size_t)off1[b.count]) != 0)
        fail_msg("%s, block %zu: 1-thread and 4-thread batches differ", what, block);
    uint8_t *f4b = batch_encode_checked(c4, &b, &off4b);
    assert_memory_equal(off4, off4b, (b.count + 1) * sizeof *off4);
    assert_memory_equal(f4, f4b, (size_t)off4[b.count]);

    /* Each batch frame equals the single-frame encoding of its block. */
    uint8_t *one = tu_malloc(gmtf_frame_bound(block));
    for (size_t i = 0; i < b.count; i++) {
        size_t len = (size_t)(b.off[i + 1] - b.off[i]);
        long f = gmtf_frame_encode(c1, b.src + b.off[i], len, one, gmtf_frame_bound(len));
        assert_true(f >= 0);
        assert_int_equal((uint64_t)f, off1[i + 1] - off1[i]);
        if (memcmp(one, f1 + off1[i], (size_t)f) != 0)
            fail_msg("%s: batch frame %zu differs from gmtf_frame_encode's", what, i);
        gmtf_frame_info info;
        assert_int_equal(gmtf_frame_info_get(f1 + off1[i], (size_t)(off1[i + 1] - off1[i]), &info),
                         0);
        assert_int_equal(info.orig_len, len);
    }
    free(one);

    batch_decode_checked(c1, &b, f1, off1);
    batch_decode_checked(c4, &b, f1, off1);
    printf("# %s, block %zu KiB: %zu blocks, %llu -> %llu bytes\n", what, block >> 10, b.count,
           (unsigned long long)b.off[b.count], (unsigned long long)off1[b.count]);

    free(f1), free(f4), free(f4b), free(off1), free(off4), free(off4b);
    gmtf_codec_destroy(c1);
    gmtf_codec_destroy(c4);
    batch_free(&b);
}

/* A batch with one damaged frame: that frame's status is an error, every
 * other block still decodes, and the call returns that error. */
static void check_batch_damaged(const uint8_t *data, size_t n, size_t block)
{
    batch b = make_batch(data, n, block);
    gmtf_codec *c = new_codec(4, "scalar", block);
    uint64_t *foff;
    uint8_t *frames = batch_encode_checked(c, &b, &foff);
    size_t victim = b.count / 2;
    gmtf_frame_info info;
    assert_int_equal(gmtf_frame_info_get(frames + foff[victim],
                                         (size_t)(foff[victim + 1] - foff[victim]), &info),
                     0);
    assert_true(info.frame_len > 40);
    frames[foff[victim] + info.frame_len - 5] ^= 0x10; /* a payload byte */

    size_t total = (size_t)b.off[b.count];
    uint8_t *out = tu_malloc(total);
    int *status = tu_malloc(b.count * sizeof *status);
    int r = gmtf_batch_decode(c, frames, foff, b.count, out, b.off, status);
    assert_true(r < 0);
    assert_int_equal(r, status[victim]);
    for (size_t i = 0; i < b.count; i++) {
        if (i == victim)
            continue;
        assert_int_equal(status[i], 0);
        assert_memory_equal(out + b.off[i], b.src + b.off[i], (size_t)(b.off[i + 1] - b.off[i]));
    }
    free(out), free(status), free(frames), free(foff);
    gmtf_codec_destroy(c);
    batch_free(&b);
}

static void test_batch(void **state)
{
    (void)state;
    tu_files files = tu_corpus_files();
    if (files.count == 0)
        files = tu_system_files(24, (size_t)1 << 20);
    /* 6 MiB; 3 MiB in the sanitizer pass (GMTF_TEST_SCALE) */
    size_t n = (size_t)(tu_scale() > 1 ? 3 : 6) << 20;
    uint8_t *data = tu_concat(&files, n);
    if (!data) {
        data = tu_malloc(n);
        tu_fill_text_like(data, n, 1);
    }
    for (size_t b = 0; b < NBLOCK_SIZES; b++)
        check_batch(data, n, block_sizes[b], "real data");
    check_batch(data, n, 333333, "real data");
    uint8_t *rnd = tu_malloc((size_t)1 << 20);
    tu_fill_random(rnd, (size_t)1 << 20, 4);
    check_batch(rnd, (size_t)1 << 20, 64u << 10, "random");
    free(rnd);
    check_batch_damaged(data, (size_t)2 << 20, 64u << 10);

    /* An empty batch and a batch of only empty blocks. */
    gmtf_codec *c = new_codec(4, "scalar", 0);
    uint64_t off[4] = {0, 0, 0, 0}, dst_off[4];
    uint8_t dst[256];
    assert_int_equal(gmtf_batch_encode(c, data, off, 0, dst, sizeof dst, dst_off), 0);
    assert_int_equal(dst_off[0], 0);
    assert_int_equal(gmtf_batch_encode(c, data, off, 3, dst, sizeof dst, dst_off), 0);
    int status[3];
    uint8_t none[1];
    assert_int_equal(gmtf_batch_decode(c, dst, dst_off, 3, none, off, status), 0);
    assert_int_equal(status[0] | status[1] | status[2], 0);
    /* a block over the codec's max_block is refused, on every path */
    const char *names[] = {"scalar", "scalar-batch"};
    for (size_t k = 0; k < 2; k++) {
        gmtf_codec *lim = NULL;
        gmtf_codec_options lo = {.threads = 2, .mtf = names[k], .max_block = 1000};
        if (gmtf_codec_create(&lim, &lo) != 0)
            continue;
        uint64_t off3[3] = {0, 1000, 2001}, doff3[3];
        uint8_t *big = tu_malloc((size_t)gmtf_batch_bound(off3, 2));
        assert_true(gmtf_batch_encode(lim, data, off3, 2, big, gmtf_batch_bound(off3, 2), doff3) <
                    0);
        free(big);
        gmtf_codec_destroy(lim);
    }
    /* too small an output is refused, not overrun */
    uint64_t off2[2] = {0, 100000};
    tu_guarded g = tu_guarded_alloc(1000);
    assert_true(gmtf_batch_encode(c, data, off2, 1, g.buf, g.cap, dst_off) < 0);
    assert_true(tu_guard_ok(&g));
    tu_guarded_free(&g);
    gmtf_codec_destroy(c);

    free(data);
    tu_files_free(&files);
}

/* ---- MTF backends ------------------------------------------------------ */

static void test_backends(void **state)
{
    (void)state;
    tu_files files = tu_corpus_files();
    if (files.count == 0)
        files = tu_system_files(24, (size_t)1 << 20);
    /* 4 MiB (5 blocks); 2 MiB in the sanitizer pass (GMTF_TEST_SCALE) */
    size_t n = (size_t)(tu_scale() > 1 ? 2 : 4) << 20, block = 900u << 10;
    uint8_t *data = tu_concat(&files, n);
    if (!data) {
        data = tu_malloc(n);
        tu_fill_text_like(data, n, 1);
    }
    batch b = make_batch(data, n, block);
    gmtf_codec *ref = new_codec(1, "scalar", block);
    uint64_t *ref_off;
    uint8_t *ref_frames = batch_encode_checked(ref, &b, &ref_off);

    size_t count = gmtf_mtf_backend_count(), ran = 0;
    assert_true(count >= 1);
    for (size_t i = 0; i < count; i++) {
        int avail = 0;
        const char *name = gmtf_mtf_backend_name(i, &avail);
        assert_non_null(name);
        if (!avail) {
            gmtf_codec *c = NULL;
            gmtf_codec_options o = {.mtf = name};
            assert_int_equal(gmtf_codec_create(&c, &o), GMTF_E_BACKEND);
            printf("# backend %s: not available here, skipped\n", name);
            continue;
        }
        for (unsigned threads = 1; threads <= 4; threads += 3) {
            gmtf_codec *c = new_codec(threads, name, block);
            assert_string_equal(gmtf_codec_mtf_name(c), name);
            uint64_t *off;
            uint8_t *frames = batch_encode_checked(c, &b, &off);
            assert_memory_equal(off, ref_off, (b.count + 1) * sizeof *off);
            if (memcmp(frames, ref_frames, (size_t)off[b.count]) != 0)
                fail_msg("backend %s (%u threads): frames differ from scalar's", name, threads);
            batch_decode_checked(c, &b, ref_frames, ref_off);
            /* the single-frame path of this backend too */
            roundtrip_blocks(c, data, (size_t)1 << 20, 64u << 10, name);
            free(frames), free(off);
            gmtf_codec_destroy(c);
        }
        ran++;
    }
    printf("# %zu of %zu MTF backends checked against scalar\n", ran, count);
    assert_true(ran >= 1);

    /* "auto" resolves to a real, available backend that matches scalar. */
    gmtf_codec *c = new_codec(2, "auto", block);
    assert_string_not_equal(gmtf_codec_mtf_name(c), "auto");
    uint64_t *off;
    uint8_t *frames = batch_encode_checked(c, &b, &off);
    assert_memory_equal(frames, ref_frames, (size_t)ref_off[b.count]);
    free(frames), free(off);
    gmtf_codec_destroy(c);

    free(ref_frames), free(ref_off);
    gmtf_codec_destroy(ref);
    batch_free(&b);
    free(data);
    tu_files_free(&files);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        struct CMUnitTest test;
    } groups[] = {
        {"corpus", cmocka_unit_test(test_corpus)}, {"system", cmocka_unit_test(test_system)},
        {"edge", cmocka_unit_test(test_edge)},     {"max", cmocka_unit_test(test_max)},
        {"batch", cmocka_unit_test(test_batch)},   {"backends", cmocka_unit_test(test_backends)},
    };
    size_t ng = sizeof groups / sizeof groups[0];
    struct CMUnitTest tests[sizeof groups / sizeof groups[0]];
    size_t nt = 0;
    for (size_t i = 0; i < ng; i++)
        if (argc < 2 || strcmp(argv[1], groups[i].name) == 0)
            tests[nt++] = groups[i].test;
    if (nt == 0) {
        fprintf(stderr, "unknown group %s\n", argv[1]);
        return 2;
    }
    return _cmocka_run_group_tests(argc < 2 ? "roundtrip" : argv[1], tests, nt, NULL, NULL);
}
