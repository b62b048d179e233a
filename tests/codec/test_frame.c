/* Frame layer through the public API: gmtf_frame_info_get on good frames
 * of every method and on damaged, truncated and crafted headers; the
 * documented layout (docs/codec.md) against real frames; codec options;
 * capacity handling of encode and decode; error strings. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>

#include "gmtf_codec.h"
#include "test_util.h"

static gmtf_codec *new_codec_version(unsigned threads, uint32_t max_block, unsigned version)
{
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {
        .threads = threads, .mtf = "scalar", .max_block = max_block, .frame_version = version};
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    assert_non_null(c);
    return c;
}

static gmtf_codec *new_codec(unsigned threads, uint32_t max_block)
{
    return new_codec_version(threads, max_block, 0);
}

/* Encodes src, checks what info_get reports, returns the malloc'ed frame. */
static uint8_t *encode_checked(gmtf_codec *c, const uint8_t *src, size_t n, size_t *flen,
                               gmtf_frame_info *info)
{
    size_t bound = gmtf_frame_bound(n);
    assert_true(bound >= n);
    uint8_t *f = tu_malloc(bound);
    long r = gmtf_frame_encode(c, src, n, f, bound);
    if (r < 0)
        fail_msg("encode of %zu bytes failed: %s", n, gmtf_strerror((int)r));
    assert_true((size_t)r <= bound);
    *flen = (size_t)r;
    assert_int_equal(gmtf_frame_info_get(f, *flen, info), 0);
    assert_int_equal(info->frame_len, *flen);
    assert_int_equal(info->orig_len, n);
    assert_int_equal(info->data_crc, gmtf_crc32c(0, src, n));
    return f;
}

static void test_bound(void **state)
{
    (void)state;
    size_t prev = 0;
    for (size_t n = 0; n <= GMTF_BLOCK_MAX; n = n ? n * 2 + 1 : 1) {
        size_t b = gmtf_frame_bound(n);
        assert_true(b > n);         /* a frame has a header */
        assert_true(b <= n + 4096); /* "input + a small header" */
        assert_true(b >= prev);
        prev = b;
    }
    uint64_t off[4] = {0, 10, 10, 100000};
    uint64_t bb = gmtf_batch_bound(off, 3);
    assert_true(bb >= gmtf_frame_bound(10) + gmtf_frame_bound(0) + gmtf_frame_bound(99990));
}

/* The method a block gets follows from its bytes: runs are RUN, random
 * bytes are stored RAW, text goes through the BWT pipeline. */
static void test_methods_and_info(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(1, 0);
    size_t n = 100000, flen;
    uint8_t *src = tu_malloc(n);
    gmtf_frame_info info;

    memset(src, 'q', n);
    uint8_t *f = encode_checked(c, src, n, &flen, &info);
    assert_int_equal(info.method, GMTF_METHOD_RUN);
    assert_true(flen < 64);
    free(f);

    tu_fill_random(src, n, 1);
    f = encode_checked(c, src, n, &flen, &info);
    assert_int_equal(info.method, GMTF_METHOD_RAW);
    assert_true(flen <= gmtf_frame_bound(n));
    free(f);

    tu_fill_text_like(src, n, 2);
    f = encode_checked(c, src, n, &flen, &info);
    assert_int_equal(info.method, GMTF_METHOD_BWT);
    assert_true(flen < n / 2);
    free(f);

    /* Empty block: a valid frame that decodes to nothing. */
    f = encode_checked(c, src, 0, &flen, &info);
    assert_int_equal(info.orig_len, 0);
    uint8_t dummy[1] = {0x5A};
    assert_int_equal(gmtf_frame_decode(c, f, flen, dummy, 0), 0);
    assert_int_equal(dummy[0], 0x5A);
    free(f);

    free(src);
    gmtf_codec_destroy(c);
}

/* Real frames of both versions follow the layout the tests (and
 * docs/codec.md) describe: the independent header writer reproduces their
 * headers byte for byte. Version 0 (the default) writes version 2. */
static void test_layout_matches_docs(void **state)
{
    (void)state;
    for (unsigned version = 0; version <= 2; version++) {
        gmtf_codec *c = new_codec_version(1, 0, version);
        static const size_t sizes[] = {1, 20, 5000, 70000, 300000, 1200000};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i], flen;
            uint8_t *src = tu_malloc(n);
            tu_fill_text_like(src, n, i);
            gmtf_frame_info info;
            uint8_t *f = encode_checked(c, src, n, &flen, &info);
            tu_header h;
            size_t hl = tu_read_header(f, flen, &h);
            assert_true(hl >= 24);
            assert_int_equal(h.version, version ? version : 2);
            if (n >= 5000)
                assert_int_equal(h.method, GMTF_METHOD_BWT);
            if (h.method == GMTF_METHOD_BWT)
                assert_int_equal(h.nidx, h.version == 2 ? tu_v2_sample_count((uint32_t)n)
                                                        : (n / 16384 < 1    ? 1
                                                           : n / 16384 > 16 ? 16
                                                                            : n / 16384));
            assert_int_equal(h.orig_len, n);
            assert_int_equal(h.method, info.method);
            assert_int_equal(hl + h.payload_len, flen);
            assert_int_equal(h.data_crc, info.data_crc);
            /* version 2 BWT: the payload checksum is the payload's CRC-32C */
            if (h.version == 2 && h.method == GMTF_METHOD_BWT)
                assert_int_equal(h.payload_crc, tu_crc32c_ref(0, f + hl, h.payload_len));
            uint8_t again[32 + 3 * TU_MAX_SAMPLES];
            assert_int_equal(tu_write_header(again, &h), hl);
            assert_memory_equal(again, f, hl);
            assert_int_equal(gmtf_frame_info_get(f, flen, &info), 0);
            free(f), free(src);
        }
        gmtf_codec_destroy(c);
    }
}

/* Every prefix shorter than the frame is rejected by info_get and by
 * decode (as truncated, or as corrupt where the header is cut). */
static void test_truncated(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(1, 0);
    size_t n = 20000, flen;
    uint8_t *src = tu_malloc(n), *dst = tu_malloc(n);
    tu_fill_text_like(src, n, 9);
    gmtf_frame_info info;
    uint8_t *f = encode_checked(c, src, n, &flen, &info);
    for (size_t len = 0; len < flen; len++) {
        /* a fresh copy, so a read past len lands in freed/redzone memory */
        uint8_t *p = tu_malloc(len);
        memcpy(p, f, len);
        gmtf_frame_info i2;
        int r = gmtf_frame_info_get(p, len, &i2);
        if (r >= 0)
            fail_msg("info_get accepted %zu of %zu bytes", len, flen);
        assert_int_equal(r, GMTF_E_TRUNCATED);
        long d = gmtf_frame_decode(c, p, len, dst, n);
        assert_true(d < 0);
        free(p);
    }
    /* trailing bytes after a frame are ignored */
    uint8_t *longer = tu_malloc(flen + 100);
    memcpy(longer, f, flen);
    memset(longer + flen, 0xEE, 100);
    assert_int_equal(gmtf_frame_info_get(longer, flen + 100, &info), 0);
    assert_int_equal(info.frame_len, flen);
    assert_int_equal(gmtf_frame_decode(c, longer, flen + 100, dst, n), (long)n);
    assert_memory_equal(dst, src, n);
    free(longer), free(f), free(src), free(dst);
    gmtf_codec_destroy(c);
}

/* Every single-bit flip of the header is caught by info_get itself,
 * before any payload is looked at. */
static void test_header_bit_flips(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(1, 0);
    static const size_t sizes[] = {1, 1000, 70000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], flen;
        uint8_t *src = tu_malloc(n);
        tu_fill_text_like(src, n, 100 + i);
        gmtf_frame_info info;
        uint8_t *f = encode_checked(c, src, n, &flen, &info);
        tu_header h;
        size_t hl = tu_read_header(f, flen, &h);
        assert_true(hl > 0);
        for (size_t bit = 0; bit < hl * 8; bit++) {
            f[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            int r = gmtf_frame_info_get(f, flen, &info);
            if (r >= 0)
                fail_msg("n=%zu: flip of header bit %zu accepted", n, bit);
            f[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        assert_int_equal(gmtf_frame_info_get(f, flen, &info), 0);
        free(f), free(src);
    }
    gmtf_codec_destroy(c);
}

/* Version 1 frames are the bytes the code before frame version 2 wrote
 * (commit 8f400ce: length and CRC-32C of its frames of these inputs), and
 * the default codec (writing version 2) reads them. */
static void gen_text(uint8_t *b, size_t n, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned v = (unsigned)(x >> 59);
        b[i] = (uint8_t)(v < 20 ? (unsigned)(uint8_t) "etaoinshrdlu cmfwyp."[v]
                                : 'a' + (unsigned)(x >> 40) % 26);
    }
}

static void test_v1_bytes_as_before(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        uint64_t seed;
        long len;
        uint32_t crc;
    } before[] = {
        {100, 7, 124, 0x04a19110},
        {5000, 8, 3184, 0x54a9ebd9},
        {70000, 9, 42428, 0x390d5d74},
        {300000, 10, 180215, 0xcc486bcd},
    };
    gmtf_codec *v1 = new_codec_version(1, 0, 1), *v2 = new_codec(1, 0);
    for (size_t i = 0; i < sizeof before / sizeof before[0]; i++) {
        size_t n = before[i].n;
        uint8_t *src = tu_malloc(n), *f = tu_malloc(gmtf_frame_bound(n)), *back = tu_malloc(n);
        gen_text(src, n, before[i].seed);
        long r = gmtf_frame_encode(v1, src, n, f, gmtf_frame_bound(n));
        assert_int_equal(r, before[i].len);
        assert_int_equal(gmtf_crc32c(0, f, (size_t)r), before[i].crc);
        assert_int_equal(gmtf_frame_decode(v2, f, (size_t)r, back, n), (long)n);
        assert_memory_equal(back, src, n);
        free(back), free(f), free(src);
    }
    gmtf_codec_destroy(v1);
    gmtf_codec_destroy(v2);
}

/* Headers with a valid checksum around fields this version must refuse. */
static void test_crafted_headers(void **state)
{
    (void)state;
    uint8_t buf[4096] = {0};
    gmtf_frame_info info;
    tu_header h;

    /* A good RAW header, as the base of the variations below. */
    memset(&h, 0, sizeof h);
    h.version = 1, h.method = GMTF_METHOD_RAW, h.orig_len = 100, h.payload_len = 100;
    size_t hl = tu_write_header(buf, &h);
    assert_int_equal(gmtf_frame_info_get(buf, hl + 100, &info), 0);
    assert_int_equal(info.frame_len, hl + 100);
    assert_int_equal(gmtf_frame_info_get(buf, hl + 99, &info), GMTF_E_TRUNCATED);

    tu_header v = h;
    v.version = 3;
    hl = tu_write_header(buf, &v);
    assert_int_equal(gmtf_frame_info_get(buf, sizeof buf, &info), GMTF_E_VERSION);
    v.version = 0;
    tu_write_header(buf, &v);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);

    v = h, v.method = 3;
    tu_write_header(buf, &v);
    assert_int_equal(gmtf_frame_info_get(buf, sizeof buf, &info), GMTF_E_CORRUPT);
    v.method = 255;
    tu_write_header(buf, &v);
    assert_int_equal(gmtf_frame_info_get(buf, sizeof buf, &info), GMTF_E_CORRUPT);

    v = h, v.flags = 1;
    tu_write_header(buf, &v);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);

    /* RAW whose payload length disagrees with orig_len. */
    v = h, v.payload_len = 99;
    tu_write_header(buf, &v);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);

    /* orig_len over the 16 MiB maximum, for every method. */
    for (uint8_t m = 0; m <= GMTF_METHOD_BWT; m++) {
        v = h, v.method = m, v.orig_len = GMTF_BLOCK_MAX + 1;
        v.payload_len = m == GMTF_METHOD_RUN ? 1 : m == GMTF_METHOD_BWT ? 100 : 100;
        if (m == GMTF_METHOD_BWT) {
            v.nidx = 16;
            for (unsigned k = 0; k < v.nidx; k++)
                v.idx[k] = 1 + k;
        }
        tu_write_header(buf, &v);
        assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
        v.orig_len = 0xFFFFFFFFu;
        tu_write_header(buf, &v);
        assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
    }

    /* Payload length beyond the buffer, up to 2^32-1. */
    /* (the BWT header below is 88 bytes: 4008 payload bytes still fit) */
    static const uint32_t plens[] = {4009, 4096, 0x7FFFFFFFu, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof plens / sizeof plens[0]; i++) {
        v = h, v.method = GMTF_METHOD_BWT, v.orig_len = 0xFFFFFFu, v.payload_len = plens[i];
        v.nidx = (uint8_t)(0xFFFFFFu >> 14 > 16 ? 16 : 0xFFFFFFu >> 14);
        for (unsigned k = 0; k < v.nidx; k++)
            v.idx[k] = 1 + k;
        assert_int_equal(tu_write_header(buf, &v), 88);
        assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
        /* RAW: 24-byte header, so 4072 payload bytes still fit */
        static const uint32_t raw_lens[] = {4073, 5000, 0x7FFFFFFFu, 0xFFFFFFFFu};
        v = h, v.orig_len = v.payload_len = raw_lens[i];
        tu_write_header(buf, &v);
        assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
    }
    v = h, v.method = GMTF_METHOD_BWT, v.orig_len = 0xFFFFFFu, v.payload_len = 4008, v.nidx = 16;
    for (unsigned k = 0; k < v.nidx; k++)
        v.idx[k] = 1 + k;
    tu_write_header(buf, &v);
    assert_int_equal(gmtf_frame_info_get(buf, sizeof buf, &info), 0); /* the control */

    /* Index count beyond anything valid, with all bytes present. */
    v = h, v.method = GMTF_METHOD_BWT, v.orig_len = 1000, v.payload_len = 10, v.nidx = 255;
    tu_write_header(buf, &v);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
    v.nidx = 17;
    tu_write_header(buf, &v);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);

    /* Bad magic with an otherwise good header. */
    tu_write_header(buf, &h);
    buf[0] ^= 0x20;
    tu_fix_header_crc(buf);
    assert_int_equal(gmtf_frame_info_get(buf, sizeof buf, &info), GMTF_E_CORRUPT);

    /* A corrupt header checksum. */
    hl = tu_write_header(buf, &h);
    buf[hl - 1] ^= 1;
    assert_int_equal(gmtf_frame_info_get(buf, sizeof buf, &info), GMTF_E_CHECKSUM);

    /* All zeros and all ones. */
    memset(buf, 0, sizeof buf);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
    memset(buf, 0xFF, sizeof buf);
    assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
}

static void test_codec_options(void **state)
{
    (void)state;
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {0};
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    assert_int_equal(gmtf_codec_threads(c), 1);
    assert_non_null(gmtf_codec_mtf_name(c));
    assert_string_not_equal(gmtf_codec_mtf_name(c), "auto");
    gmtf_codec_destroy(c);

    o.mtf = "auto";
    o.threads = 3;
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    assert_int_equal(gmtf_codec_threads(c), 3);
    assert_string_not_equal(gmtf_codec_mtf_name(c), "auto");
    gmtf_codec_destroy(c);

    c = NULL;
    o.mtf = "no-such-backend";
    assert_int_equal(gmtf_codec_create(&c, &o), GMTF_E_BACKEND);
    o.mtf = "scalar";
    o.max_block = GMTF_BLOCK_MAX + 1;
    assert_int_equal(gmtf_codec_create(&c, &o), -EINVAL);
    gmtf_codec_destroy(NULL); /* allowed, like free(NULL) */
}

/* Workspaces follow the blocks a call holds, not the codec's max_block
 * (codec/workspace.c): a codec of 8 MiB blocks that codes 64 KiB blocks
 * holds about a megabyte of workspace, not the 100 MiB its max_block would
 * take (buffers, the BWT's and the encoder's scratch), and grows for a
 * larger block later without changing a byte. */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void roundtrip_blocks(gmtf_codec *c, const uint8_t *src, size_t bs, size_t count)
{
    uint64_t off[5];
    assert_true(count < 5);
    for (size_t i = 0; i <= count; i++)
        off[i] = i * bs;
    uint64_t cap = gmtf_batch_bound(off, count), doff[5];
    uint8_t *frames = tu_malloc(cap), *back = tu_malloc(bs * count);
    assert_int_equal(gmtf_batch_encode(c, src, off, count, frames, cap, doff), 0);
    assert_int_equal(gmtf_batch_decode(c, frames, doff, count, back, off, NULL), 0);
    assert_memory_equal(back, src, bs * count);
    free(frames);
    free(back);
}

static void test_workspace_follows_blocks(void **state)
{
    (void)state;
    size_t big = 1u << 20;
    uint8_t *src = tu_malloc(3 * big);
    tu_fill_text_like(src, 3 * big, 77);
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {.threads = 1, .max_block = 8u << 20};
    size_t before = heap_in_use();
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    roundtrip_blocks(c, src, 64u << 10, 3);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* (a sanitizer's allocator keeps its own books: mallinfo2 sees none) */
    size_t held = heap_in_use() - before;
    if (held > (4u << 20))
        fail_msg("a codec that coded 64 KiB blocks holds %zu bytes", held);
#else
    (void)before;
#endif
    roundtrip_blocks(c, src, big, 3);                               /* grows */
    roundtrip_blocks(c, src, 64u << 10, 4);                         /* keeps the larger ones */
    assert_true(gmtf_frame_decode(c, src, 10, src + big, big) < 0); /* garbage: an error */
    gmtf_codec_destroy(c);
    free(src);
}

/* An empty block with no source buffer (src NULL, n 0), as a caller with
 * nothing to store passes it: a frame of either version that decodes to
 * nothing, and no memcpy from NULL (UBSan: frame version 2's raw frame did
 * one after the GPU merge split frame.c; found by test_fs_hostile). */
static void test_empty_null_source(void **state)
{
    (void)state;
    for (unsigned v = 1; v <= 2; v++) {
        gmtf_codec *c = NULL;
        gmtf_codec_options o = {.frame_version = v};
        assert_int_equal(gmtf_codec_create(&c, &o), 0);
        uint8_t f[256], out[1];
        long len = gmtf_frame_encode(c, NULL, 0, f, sizeof f);
        assert_true(len > 0);
        assert_int_equal(gmtf_frame_decode(c, f, (size_t)len, out, sizeof out), 0);
        gmtf_codec_destroy(c);
    }
}

/* Encode refuses blocks over max_block and too small outputs; decode
 * refuses a too small output and frames whose block exceeds max_block,
 * and in every case writes nothing past cap. */
static void test_capacities(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(1, 4096);
    size_t n = 10000;
    uint8_t *src = tu_malloc(n);
    tu_fill_text_like(src, n, 4);
    tu_guarded out = tu_guarded_alloc(gmtf_frame_bound(n));
    assert_true(gmtf_frame_encode(c, src, 4097, out.buf, out.cap) < 0);
    assert_true(tu_guard_ok(&out));
    long r = gmtf_frame_encode(c, src, 4096, out.buf, out.cap);
    assert_true(r > 0);
    for (size_t cap = 0; cap < 64; cap++) {
        tu_guarded small = tu_guarded_alloc(cap);
        long s = gmtf_frame_encode(c, src, 4096, small.buf, cap);
        assert_true(s < 0 || (size_t)s <= cap);
        assert_true(tu_guard_ok(&small));
        tu_guarded_free(&small);
    }
    /* decode into less than orig_len */
    for (size_t cap = 0; cap < 4096; cap += 1023) {
        tu_guarded d = tu_guarded_alloc(cap);
        assert_true(gmtf_frame_decode(c, out.buf, (size_t)r, d.buf, cap) < 0);
        assert_true(tu_guard_ok(&d));
        tu_guarded_free(&d);
    }
    tu_guarded d = tu_guarded_alloc(4096);
    assert_int_equal(gmtf_frame_decode(c, out.buf, (size_t)r, d.buf, 4096), 4096);
    assert_memory_equal(d.buf, src, 4096);
    assert_true(tu_guard_ok(&d));
    tu_guarded_free(&d);

    /* A frame of a 10000-byte block, decoded by a codec limited to 4096. */
    gmtf_codec *big = new_codec(1, 0);
    long rb = gmtf_frame_encode(big, src, n, out.buf, out.cap);
    assert_true(rb > 0);
    tu_guarded d2 = tu_guarded_alloc(n);
    long dr = gmtf_frame_decode(c, out.buf, (size_t)rb, d2.buf, n);
    assert_true(dr < 0 || (dr == (long)n && memcmp(d2.buf, src, n) == 0));
    assert_true(tu_guard_ok(&d2));
    tu_guarded_free(&d2);
    gmtf_codec_destroy(big);

    tu_guarded_free(&out);
    free(src);
    gmtf_codec_destroy(c);
}

static void test_strerror(void **state)
{
    (void)state;
    static const int codes[] = {GMTF_E_CORRUPT, GMTF_E_CHECKSUM, GMTF_E_TRUNCATED, GMTF_E_VERSION,
                                GMTF_E_BACKEND};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = gmtf_strerror(codes[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 3);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, gmtf_strerror(codes[j]));
    }
    assert_non_null(gmtf_strerror(-ENOMEM));
    assert_non_null(gmtf_strerror(-123456));
    assert_non_null(gmtf_strerror(7));
    assert_non_null(gmtf_version());
    assert_true(strlen(gmtf_version()) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_methods_and_info),
        cmocka_unit_test(test_layout_matches_docs),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_header_bit_flips),
        cmocka_unit_test(test_crafted_headers),
        cmocka_unit_test(test_v1_bytes_as_before),
        cmocka_unit_test(test_codec_options),
        cmocka_unit_test(test_workspace_follows_blocks),
        cmocka_unit_test(test_empty_null_source),
        cmocka_unit_test(test_capacities),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
