/* The decoder on crafted frames: headers with a valid checksum around
 * hostile fields (lengths past the buffer, orig_len over 16 MiB, BWT
 * indexes out of range, index counts that disagree with the length),
 * payloads of zeros, of random garbage, of another block, cut short or
 * padded. Every case must give an error code (or, where the frame is
 * still valid, the exact original bytes), write nothing past the output
 * capacity, and finish. Positive controls prove the crafting itself is
 * right: a crafted valid frame decodes. */
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
#include "test_util.h"

static gmtf_codec *codec;
static unsigned frame_version; /* of the group running: what `codec` writes */

static int setup(void **state)
{
    (void)state;
    gmtf_codec_options o = {.threads = 1, .mtf = "scalar", .frame_version = frame_version};
    return gmtf_codec_create(&codec, &o);
}

static int setup_v1(void **state)
{
    frame_version = 1;
    return setup(state);
}

static int setup_v2(void **state)
{
    frame_version = 2;
    return setup(state);
}

/* Header length of a parsed header. */
static size_t hdr_len(const tu_header *h)
{
    if (h->version == 2)
        return h->nidx ? 32 + 3 * (size_t)h->nidx : 24;
    return 24 + 4 * (size_t)h->nidx;
}

/* The sample indexes a BWT header of this group's version has for n. */
static unsigned index_count(size_t n)
{
    return frame_version == 2 ? tu_v2_sample_count((uint32_t)n) : gmtf_bwt_index_count(n);
}

static int teardown(void **state)
{
    (void)state;
    gmtf_codec_destroy(codec);
    return 0;
}

/* Decodes frame[0..len) into a guarded buffer of cap bytes. Returns the
 * decoder's result; fails the test on a write past cap, and on success
 * checks the length and (when expect is given) the bytes. */
static long decode_guarded(const uint8_t *frame, size_t len, size_t cap, const uint8_t *expect,
                           size_t expect_len)
{
    /* the frame in its own allocation, so a read past len is caught by ASan */
    uint8_t *copy = tu_malloc(len);
    memcpy(copy, frame, len);
    tu_guarded out = tu_guarded_alloc(cap);
    long r = gmtf_frame_decode(codec, copy, len, out.buf, cap);
    if (!tu_guard_ok(&out))
        fail_msg("decoder wrote past its %zu-byte output", cap);
    if (r >= 0 && expect) {
        assert_int_equal(r, (long)expect_len);
        assert_memory_equal(out.buf, expect, expect_len);
    }
    tu_guarded_free(&out);
    free(copy);
    return r;
}

/* A real BWT frame of n text bytes: returns it, its length and header. */
static uint8_t *real_bwt_frame(size_t n, uint64_t seed, uint8_t **src_out, size_t *flen,
                               tu_header *h)
{
    uint8_t *src = tu_malloc(n);
    uint8_t *f = tu_malloc(gmtf_frame_bound(n) + 64);
    /* Tiny blocks only compress (and so only get a BWT frame) when very
     * repetitive: try text first, then a period-2 string with one odd byte. */
    for (int attempt = 0;; attempt++) {
        if (attempt == 0) {
            tu_fill_text_like(src, n, seed);
        } else {
            for (size_t i = 0; i < n; i++)
                src[i] = (uint8_t) "ab"[i % 2];
            src[n / 2] = 'c';
        }
        long r = gmtf_frame_encode(codec, src, n, f, gmtf_frame_bound(n));
        assert_true(r > 0);
        *flen = (size_t)r;
        assert_true(tu_read_header(f, *flen, h) > 0);
        if (h->method == GMTF_METHOD_BWT)
            break;
        if (attempt == 1)
            fail_msg("no BWT frame for a block of %zu bytes", n);
    }
    *src_out = src;
    return f;
}

static void test_positive_controls(void **state)
{
    (void)state;
    uint8_t buf[24 + 300];
    tu_header h = {.version = 1, .method = GMTF_METHOD_RAW, .orig_len = 300, .payload_len = 300};
    uint8_t data[300];
    tu_fill_random(data, sizeof data, 1);
    h.data_crc = gmtf_crc32c(0, data, sizeof data);
    size_t hl = tu_write_header(buf, &h);
    memcpy(buf + hl, data, sizeof data);
    assert_int_equal(decode_guarded(buf, hl + 300, 300, data, 300), 300);

    /* A RUN frame of the largest block, written by hand. */
    uint8_t *big = tu_malloc(GMTF_BLOCK_MAX);
    memset(big, 0x42, GMTF_BLOCK_MAX);
    tu_header r = {.version = 1,
                   .method = GMTF_METHOD_RUN,
                   .orig_len = GMTF_BLOCK_MAX,
                   .payload_len = 1,
                   .data_crc = gmtf_crc32c(0, big, GMTF_BLOCK_MAX)};
    hl = tu_write_header(buf, &r);
    buf[hl] = 0x42;
    assert_int_equal(decode_guarded(buf, hl + 1, GMTF_BLOCK_MAX, big, GMTF_BLOCK_MAX),
                     (long)GMTF_BLOCK_MAX);
    /* the same with one byte of output too few */
    assert_int_equal(decode_guarded(buf, hl + 1, GMTF_BLOCK_MAX - 1, NULL, 0), -ENOSPC);
    free(big);

    /* A BWT frame rebuilt from its parsed fields decodes. */
    uint8_t *src;
    size_t flen;
    tu_header b;
    uint8_t *f = real_bwt_frame(50000, 3, &src, &flen, &b);
    uint8_t *again = tu_malloc(flen);
    hl = tu_write_header(again, &b);
    memcpy(again + hl, f + hl, flen - hl);
    assert_int_equal(decode_guarded(again, flen, 50000, src, 50000), 50000);
    free(again), free(f), free(src);
}

/* Payload or frame lengths larger than the bytes given. */
static void test_lengths_past_buffer(void **state)
{
    (void)state;
    uint8_t *src;
    size_t flen;
    tu_header h;
    uint8_t *f = real_bwt_frame(40000, 5, &src, &flen, &h);
    size_t hl = hdr_len(&h);
    static const uint32_t extra[] = {1, 2, 1000, 100000, 0x7FFFFFFF, 0xFFFFFFFF};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        tu_header v = h;
        v.payload_len = h.payload_len + extra[i]; /* wraps for the last ones */
        tu_write_header(f, &v);
        long r = decode_guarded(f, flen, 40000, NULL, 0);
        assert_true(r < 0);
    }
    /* The frame cut at every length inside the header and payload. */
    tu_write_header(f, &h);
    for (size_t len = 0; len < flen; len += (len < hl + 16 ? 1 : 97))
        assert_true(decode_guarded(f, len, 40000, NULL, 0) < 0);
    assert_int_equal(decode_guarded(f, flen, 40000, src, 40000), 40000);

    /* RAW claiming more payload than exists. */
    uint8_t buf[24 + 64];
    tu_header raw = {
        .version = 1, .method = GMTF_METHOD_RAW, .orig_len = 1000, .payload_len = 1000};
    size_t rl = tu_write_header(buf, &raw);
    memset(buf + rl, 'a', 64);
    assert_int_equal(decode_guarded(buf, sizeof buf, 1000, NULL, 0), GMTF_E_TRUNCATED);
    /* and an output smaller than orig_len */
    raw.orig_len = raw.payload_len = 64;
    raw.data_crc = gmtf_crc32c(0, buf + rl, 64);
    tu_write_header(buf, &raw);
    assert_true(decode_guarded(buf, sizeof buf, 63, NULL, 0) < 0);
    assert_int_equal(decode_guarded(buf, sizeof buf, 64, buf + rl, 64), 64);
    free(f), free(src);
}

static void test_orig_len_over_max(void **state)
{
    (void)state;
    uint8_t buf[4096];
    memset(buf, 0, sizeof buf);
    static const uint32_t lens[] = {GMTF_BLOCK_MAX + 1, GMTF_BLOCK_MAX * 2, 0x7FFFFFFF, 0xFFFFFFFF};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (uint8_t m = 0; m <= GMTF_METHOD_BWT; m++) {
            tu_header h = {.version = 1, .method = m, .orig_len = lens[i]};
            h.payload_len = m == GMTF_METHOD_RUN ? 1 : m == GMTF_METHOD_BWT ? 1000 : 2000;
            if (m == GMTF_METHOD_BWT) {
                h.nidx = GMTF_BWT_MAX_INDEXES;
                for (unsigned k = 0; k < h.nidx; k++)
                    h.idx[k] = 1 + 1000 * k;
            }
            size_t hl = tu_write_header(buf, &h);
            assert_true(hl + h.payload_len <= sizeof buf || m == GMTF_METHOD_RAW);
            long r = decode_guarded(buf, sizeof buf, 1 << 20, NULL, 0);
            if (r >= 0)
                fail_msg("orig_len %u method %u accepted", lens[i], m);
            gmtf_frame_info info;
            assert_true(gmtf_frame_info_get(buf, sizeof buf, &info) < 0);
        }
    }
}

/* Every BWT index (primary and samples) set out of range, with the header
 * checksum fixed: GMTF_E_CORRUPT; set in range but wrong: an error (the
 * data checksum), never wrong bytes returned as success. */
static void test_bwt_indexes(void **state)
{
    (void)state;
    /* version 2 frames of tiny blocks are raw: its headers are longer */
    static const size_t sizes_v1[] = {20, 70000}, sizes_v2[] = {400, 70000};
    const size_t *sizes = frame_version == 2 ? sizes_v2 : sizes_v1;
    for (size_t s = 0; s < 2; s++) {
        size_t n = sizes[s];
        uint8_t *src;
        size_t flen;
        tu_header h;
        uint8_t *f = real_bwt_frame(n, 10 + s, &src, &flen, &h);
        assert_int_equal(h.version, frame_version);
        assert_int_equal(h.nidx, index_count(n));
        for (unsigned k = 0; k < h.nidx; k++) {
            const uint32_t bad[] = {0,          (uint32_t)n + 1, (uint32_t)n + 2, 0x00FFFFFF,
                                    0x01000000, 0x80000000,      0xFFFFFFFF};
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                tu_header v = h;
                v.idx[k] = bad[b];
                tu_write_header(f, &v);
                long r = decode_guarded(f, flen, n, NULL, 0);
                if (r != GMTF_E_CORRUPT)
                    fail_msg("n=%zu idx[%u]=%u: got %ld, want GMTF_E_CORRUPT", n, k, bad[b], r);
            }
            for (uint32_t d = 1; d <= 3; d++) {
                tu_header v = h;
                v.idx[k] = h.idx[k] > d ? h.idx[k] - d : h.idx[k] + d;
                tu_write_header(f, &v);
                long r = decode_guarded(f, flen, n, src, n);
                assert_true(r < 0); /* a wrong walk: caught by the data checksum */
            }
        }
        /* Index count that disagrees with orig_len (version 1 has it in the
         * header; version 2 derives it from orig_len). */
        for (unsigned k = 0; frame_version == 1 && k <= GMTF_BWT_MAX_INDEXES + 1; k++) {
            if (k == h.nidx)
                continue;
            tu_header v = h;
            v.nidx = (uint8_t)k;
            for (unsigned i = h.nidx; i < k; i++)
                v.idx[i] = 1;
            uint8_t *g = tu_malloc(flen + 4 * 20);
            size_t hl = tu_write_header(g, &v), ohl = 24 + 4 * (size_t)h.nidx;
            memcpy(g + hl, f + ohl, flen - ohl);
            assert_true(decode_guarded(g, hl + flen - ohl, n, NULL, 0) < 0);
            free(g);
        }
        tu_write_header(f, &h);
        assert_int_equal(decode_guarded(f, flen, n, src, n), (long)n);
        free(f), free(src);
    }
}

/* Valid headers over payloads that are not what the encoder wrote. */
static void test_hostile_payloads(void **state)
{
    (void)state;
    static const size_t sizes_v1[] = {20, 33, 1000, 65536, 1000000},
                        sizes_v2[] = {300, 333, 1000, 65536, 1100000};
    const size_t *sizes = frame_version == 2 ? sizes_v2 : sizes_v1;
    uint64_t seed = 1;
    for (size_t s = 0; s < 5; s++) {
        size_t n = sizes[s];
        uint8_t *src;
        size_t flen;
        tu_header h;
        uint8_t *f = real_bwt_frame(n, 20 + s, &src, &flen, &h);
        size_t hl = hdr_len(&h), plen = flen - hl;
        uint8_t *orig_payload = tu_malloc(plen);
        memcpy(orig_payload, f + hl, plen);

        /* Version 2: each payload first under the header's payload
         * checksum (caught there), then with the checksum made to match (so
         * the entropy decoder's own checks are reached). */
        for (int t = -2; t < 20; t++) {
            if (t == -2)
                memset(f + hl, 0, plen);
            else if (t == -1)
                memset(f + hl, 0xFF, plen);
            else
                tu_fill_random(f + hl, plen, seed++);
            tu_write_header(f, &h);
            long r = decode_guarded(f, flen, n, NULL, 0);
            if (frame_version == 2)
                assert_int_equal(r, GMTF_E_CHECKSUM);
            assert_true(r < 0);
            if (tu_fix_payload_crc(f, flen))
                assert_true(decode_guarded(f, flen, n, NULL, 0) < 0);
        }
        /* The payload of another block of the same size. */
        uint8_t *src2;
        size_t flen2;
        tu_header h2;
        uint8_t *f2 = real_bwt_frame(n, 99 + s, &src2, &flen2, &h2);
        tu_header v = h;
        v.payload_len = h2.payload_len;
        v.payload_crc = h2.payload_crc; /* version 2: the other payload's, so it is decoded */
        uint8_t *mix = tu_malloc(hl + h2.payload_len);
        tu_write_header(mix, &v);
        memcpy(mix + hl, f2 + hl, h2.payload_len);
        long r = decode_guarded(mix, hl + h2.payload_len, n, src, n);
        if (memcmp(src, src2, n) != 0) /* tiny blocks may have equal data */
            assert_true(r < 0);
        free(mix), free(f2), free(src2);

        /* The payload cut short, or followed by extra bytes (header fixed). */
        memcpy(f + hl, orig_payload, plen);
        for (size_t cut = 1; cut < plen && cut <= 64; cut *= 2) {
            v = h;
            v.payload_len = (uint32_t)(plen - cut);
            tu_write_header(f, &v);
            assert_true(decode_guarded(f, flen - cut, n, NULL, 0) < 0);
            if (tu_fix_payload_crc(f, flen - cut))
                assert_true(decode_guarded(f, flen - cut, n, NULL, 0) < 0);
        }
        if (plen + 8 < n) {
            uint8_t *pad = tu_malloc(flen + 8);
            memcpy(pad, f, flen);
            memset(pad + flen, 0x5C, 8);
            v = h;
            v.payload_len = (uint32_t)plen + 8;
            tu_write_header(pad, &v);
            long r = decode_guarded(pad, flen + 8, n, src, n);
            assert_true(r < 0 || r == (long)n);
            if (tu_fix_payload_crc(pad, flen + 8)) {
                r = decode_guarded(pad, flen + 8, n, src, n);
                assert_true(r < 0 || r == (long)n);
            }
            free(pad);
        }
        tu_write_header(f, &h);
        assert_int_equal(decode_guarded(f, flen, n, src, n), (long)n);
        free(orig_payload), free(f), free(src);
    }
}

/* Headers that claim big blocks over tiny payloads of zeros or garbage:
 * the decoder must stop (and fail) rather than run on. */
static void test_big_claims_small_payloads(void **state)
{
    (void)state;
    static const uint32_t lens[] = {100000, 1u << 20, GMTF_BLOCK_MAX};
    static const uint32_t plens[] = {1, 2, 7, 64, 4096};
    uint8_t *buf = tu_malloc(32 + 3 * TU_MAX_SAMPLES + 4096);
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (size_t p = 0; p < sizeof plens / sizeof plens[0]; p++) {
            for (int garbage = 0; garbage < 2; garbage++) {
                tu_header h = {.version = (uint8_t)frame_version,
                               .method = GMTF_METHOD_BWT,
                               .orig_len = lens[i],
                               .payload_len = plens[p]};
                h.nidx = index_count(lens[i]);
                for (unsigned k = 0; k < h.nidx; k++)
                    h.idx[k] = 1 + (uint32_t)(k * (lens[i] / h.nidx));
                size_t hl = tu_write_header(buf, &h);
                if (garbage)
                    tu_fill_random(buf + hl, plens[p], i * 100 + p);
                else
                    memset(buf + hl, 0, plens[p]);
                tu_fix_payload_crc(buf, hl + plens[p]); /* version 2: to the decoder */
                long r = decode_guarded(buf, hl + plens[p], lens[i], NULL, 0);
                if (r >= 0)
                    fail_msg("claim of %u bytes over %u payload bytes decoded", lens[i], plens[p]);
            }
        }
    }
    free(buf);
}

/* A RUN frame with a payload other than one byte, a RAW frame with BWT
 * indexes, the empty frame with a payload. */
static void test_method_field_mismatches(void **state)
{
    (void)state;
    uint8_t buf[256];
    memset(buf, 'z', sizeof buf);
    const tu_header cases[] = {
        {.version = 1, .method = GMTF_METHOD_RUN, .orig_len = 100, .payload_len = 0},
        {.version = 1, .method = GMTF_METHOD_RUN, .orig_len = 100, .payload_len = 2},
        {.version = 1, .method = GMTF_METHOD_RUN, .orig_len = 0, .payload_len = 1},
        {.version = 1,
         .method = GMTF_METHOD_RAW,
         .orig_len = 100,
         .payload_len = 100,
         .nidx = 1,
         .idx = {1}},
        {.version = 1, .method = GMTF_METHOD_RAW, .orig_len = 0, .payload_len = 1},
        {.version = 1,
         .method = GMTF_METHOD_BWT,
         .orig_len = 0,
         .payload_len = 0,
         .nidx = 1,
         .idx = {1}},
        {.version = 1,
         .method = GMTF_METHOD_BWT,
         .orig_len = 100,
         .payload_len = 100,
         .nidx = 1,
         .idx = {1}},
        {.version = 1,
         .method = GMTF_METHOD_BWT,
         .orig_len = 100,
         .payload_len = 0,
         .nidx = 1,
         .idx = {1}},
        {.version = 1, .method = GMTF_METHOD_BWT, .orig_len = 100, .payload_len = 10, .nidx = 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_header h = cases[i];
        h.data_crc = gmtf_crc32c(0, buf + 100, h.orig_len < 100 ? h.orig_len : 100);
        uint8_t frame[512];
        memset(frame, 'z', sizeof frame);
        size_t hl = tu_write_header(frame, &h);
        long r = decode_guarded(frame, hl + h.payload_len, 200, NULL, 0);
        if (r >= 0)
            fail_msg("case %zu (method %u, orig %u, payload %u, K %u) decoded", i, h.method,
                     h.orig_len, h.payload_len, h.nidx);
    }
}

/* The same hostile frames through gmtf_batch_decode, among good ones. */
static void test_batch_with_crafted(void **state)
{
    (void)state;
    uint8_t *src;
    size_t flen;
    tu_header h;
    uint8_t *good = real_bwt_frame(30000, 7, &src, &flen, &h);
    size_t hl = hdr_len(&h);
    /* frames: good, zero payload, bad primary index, good */
    uint8_t *frames = tu_malloc(4 * flen);
    uint64_t foff[5], doff[5];
    for (int i = 0; i < 4; i++) {
        memcpy(frames + (size_t)i * flen, good, flen);
        foff[i] = (uint64_t)i * flen;
        doff[i] = (uint64_t)i * 30000;
    }
    foff[4] = 4 * (uint64_t)flen;
    doff[4] = 4 * 30000;
    memset(frames + flen + hl, 0, flen - hl);
    tu_header v = h;
    v.idx[0] = 0xFFFFFFFF;
    tu_write_header(frames + 2 * flen, &v);
    tu_guarded out = tu_guarded_alloc(4 * 30000);
    int status[4];
    gmtf_codec *c4 = NULL;
    gmtf_codec_options o = {.threads = 4, .mtf = "scalar"};
    assert_int_equal(gmtf_codec_create(&c4, &o), 0);
    int r = gmtf_batch_decode(c4, frames, foff, 4, out.buf, doff, status);
    assert_true(r < 0);
    assert_int_equal(status[0], 0);
    assert_true(status[1] < 0);
    assert_int_equal(status[2], GMTF_E_CORRUPT);
    assert_int_equal(status[3], 0);
    assert_memory_equal(out.buf, src, 30000);
    assert_memory_equal(out.buf + 3 * 30000, src, 30000);
    assert_true(tu_guard_ok(&out));
    /* output slots smaller than the blocks */
    doff[1] = doff[0] + 29999;
    r = gmtf_batch_decode(c4, frames, foff, 4, out.buf, doff, status);
    assert_true(r < 0);
    assert_true(status[0] < 0);
    assert_true(tu_guard_ok(&out));
    gmtf_codec_destroy(c4);
    tu_guarded_free(&out);
    free(frames), free(good), free(src);
}

/* A frame whose block is larger than the decoding codec's max_block (as a
 * hostile image can hold: orig_len up to 16 MiB is valid), with an output
 * slot big enough for it: every backend, per-block and batch paths
 * (backends with batch hooks take the staged path), must refuse it or
 * decode it right, without touching workspace memory sized for max_block. */
static void test_block_over_max_block(void **state)
{
    (void)state;
    size_t n = 100000;
    uint8_t *src = tu_malloc(n), *frame = tu_malloc(gmtf_frame_bound(n));
    tu_fill_text_like(src, n, 42);
    long flen = gmtf_frame_encode(codec, src, n, frame, gmtf_frame_bound(n));
    assert_true(flen > 0);
    gmtf_frame_info info;
    assert_int_equal(gmtf_frame_info_get(frame, (size_t)flen, &info), 0);
    assert_int_equal(info.method, GMTF_METHOD_BWT);

    const gmtf_mtf_backend *const *list;
    size_t count = gmtf_mtf_backends(&list);
    for (size_t i = 0; i < count; i++) {
        if (!list[i]->available(list[i]))
            continue;
        for (unsigned threads = 1; threads <= 2; threads++) {
            gmtf_codec *c = NULL;
            gmtf_codec_options o = {.threads = threads, .mtf = list[i]->name, .max_block = 65536};
            assert_int_equal(gmtf_codec_create(&c, &o), 0);
            tu_guarded out = tu_guarded_alloc(n);
            long r = gmtf_frame_decode(c, frame, (size_t)flen, out.buf, n);
            assert_true(r < 0 || (r == (long)n && memcmp(out.buf, src, n) == 0));
            assert_true(tu_guard_ok(&out));
            uint64_t foff[2] = {0, (uint64_t)flen}, doff[2] = {0, n};
            int status = 12345;
            int br = gmtf_batch_decode(c, frame, foff, 1, out.buf, doff, &status);
            if (br == 0)
                assert_memory_equal(out.buf, src, n);
            else
                assert_int_equal(status, br);
            assert_true(tu_guard_ok(&out));
            tu_guarded_free(&out);
            gmtf_codec_destroy(c);
        }
    }
    free(src), free(frame);
}

/* Inputs the fuzzer (tests/fuzz) found, kept so the normal suite checks
 * them: each is decoded as found and with its header checksum recomputed,
 * per-block and through the batch path. */
static const uint8_t fuzz_div_by_zero[] = {
    /* BWT frame, n = 70000, K = 4, 17 payload bytes of which most 0xFF:
     * the range decoder's direct bits divided by a zero range
     * (entropy.c dec_direct), SIGFPE in a release build. */
    0x47, 0x4d, 0x54, 0x46, 0x01, 0x02, 0x04, 0x00, 0x70, 0x11, 0x01, 0x00, 0x11, 0x00, 0x00,
    0x00, 0x07, 0x5e, 0xf1, 0x23, 0x60, 0x6d, 0x00, 0x00, 0xb4, 0x5f, 0x00, 0x00, 0x08, 0x52,
    0x00, 0x00, 0x5c, 0x44, 0x00, 0x00, 0xc5, 0x8d, 0xe4, 0x20, 0x4c, 0x7e, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

static void test_fuzzer_findings(void **state)
{
    (void)state;
    static const struct {
        const uint8_t *bytes;
        size_t len;
    } findings[] = {
        {fuzz_div_by_zero, sizeof fuzz_div_by_zero},
    };
    for (size_t i = 0; i < sizeof findings / sizeof findings[0]; i++) {
        uint8_t *f = tu_malloc(findings[i].len);
        memcpy(f, findings[i].bytes, findings[i].len);
        for (int fix = 0; fix < 2; fix++) {
            if (fix)
                tu_fix_header_crc(f);
            gmtf_frame_info info;
            size_t cap =
                gmtf_frame_info_get(f, findings[i].len, &info) == 0 && info.orig_len <= (1u << 20)
                    ? info.orig_len
                    : 1u << 20;
            assert_true(decode_guarded(f, findings[i].len, cap, NULL, 0) < 0);
            uint64_t foff[2] = {0, findings[i].len}, doff[2] = {0, cap};
            int status;
            tu_guarded out = tu_guarded_alloc(cap);
            assert_true(gmtf_batch_decode(codec, f, foff, 1, out.buf, doff, &status) < 0);
            assert_true(tu_guard_ok(&out));
            tu_guarded_free(&out);
        }
        free(f);
    }
}

/* Version 2 headers: the first 24 bytes are a valid version 1 header with
 * no index (so a version 1 decoder says GMTF_E_VERSION), byte 6 must be 0,
 * the sample block has its own checksum and is covered by the length
 * checks; a newer version is GMTF_E_VERSION, an older unknown one an
 * error. */
static void test_v2_headers(void **state)
{
    (void)state;
    uint8_t *src;
    size_t flen;
    tu_header h;
    uint8_t *f = real_bwt_frame(300000, 31, &src, &flen, &h);
    size_t hl = hdr_len(&h);
    assert_int_equal(h.version, 2);
    assert_int_equal(f[6], 0);
    assert_int_equal(tu_crc32c_ref(0, f, 20), (uint32_t)f[20] | (uint32_t)f[21] << 8 |
                                                  (uint32_t)f[22] << 16 | (uint32_t)f[23] << 24);
    assert_int_equal(h.nidx, tu_v2_sample_count(300000)); /* 10 samples of 32 KiB */
    assert_int_equal(h.nidx, 10);
    assert_int_equal(decode_guarded(f, flen, 300000, src, 300000), 300000);
    /* byte 6 set, both checksums fixed */
    for (unsigned b6 = 1; b6 < 256; b6 *= 2) {
        tu_header v = h;
        v.byte6 = (uint8_t)b6;
        tu_write_header(f, &v);
        /* byte 6 is version 1's K: the base checksum no longer matches
         * (K <= 16) or K is out of range */
        assert_true(decode_guarded(f, flen, 300000, NULL, 0) < 0);
    }
    /* every byte of the sample block damaged: a checksum error */
    tu_write_header(f, &h);
    for (size_t i = 24; i < hl; i++) {
        f[i] ^= 0x10;
        long r = decode_guarded(f, flen, 300000, NULL, 0);
        if (r != GMTF_E_CHECKSUM)
            fail_msg("sample block byte %zu damaged: %ld", i, r);
        f[i] ^= 0x10;
    }
    /* cut inside the sample block */
    for (size_t len = 24; len < hl; len++)
        assert_int_equal(decode_guarded(f, len, 300000, NULL, 0), GMTF_E_TRUNCATED);
    /* versions around 2 */
    for (unsigned ver = 0; ver < 8; ver++) {
        if (ver == 1 || ver == 2)
            continue;
        tu_header v = h;
        v.version = (uint8_t)ver;
        tu_write_header(f, &v);
        long r = decode_guarded(f, flen, 300000, NULL, 0);
        if (ver > 2)
            assert_int_equal(r, GMTF_E_VERSION);
        else
            assert_true(r < 0);
    }
    /* the same header read as version 1: its 24 bytes say K = 0, so the
     * rest is a (short) payload of the wrong kind */
    tu_header v = h;
    v.version = 1;
    uint8_t *g = tu_malloc(flen);
    memcpy(g, f, flen);
    g[4] = 1;
    {
        uint32_t c = tu_crc32c_ref(0, g, 20);
        g[20] = (uint8_t)c, g[21] = (uint8_t)(c >> 8), g[22] = (uint8_t)(c >> 16),
        g[23] = (uint8_t)(c >> 24);
    }
    assert_true(decode_guarded(g, flen, 300000, NULL, 0) < 0);
    (void)v;
    free(g), free(f), free(src);
}

/* Raw and run frames of version 2 have no sample block; a RAW or RUN
 * frame with the BWT method's fields, and the reverse, are refused. */
static void test_v2_method_fields(void **state)
{
    (void)state;
    uint8_t buf[512];
    memset(buf, 'z', sizeof buf);
    tu_header raw = {.version = 2, .method = GMTF_METHOD_RAW, .orig_len = 100, .payload_len = 100};
    raw.data_crc = gmtf_crc32c(0, buf + 100, 100);
    uint8_t frame[512];
    memset(frame, 'z', sizeof frame);
    size_t hl = tu_write_header(frame, &raw);
    assert_int_equal(hl, 24);
    assert_int_equal(decode_guarded(frame, hl + 100, 200, buf + 100, 100), 100);
    const tu_header cases[] = {
        {.version = 2, .method = GMTF_METHOD_RUN, .orig_len = 100, .payload_len = 0},
        {.version = 2, .method = GMTF_METHOD_RUN, .orig_len = 0, .payload_len = 1},
        {.version = 2, .method = GMTF_METHOD_RAW, .orig_len = 100, .payload_len = 99},
        {.version = 2, .method = GMTF_METHOD_BWT, .orig_len = 100, .payload_len = 100, .nidx = 1},
        {.version = 2, .method = GMTF_METHOD_BWT, .orig_len = 100, .payload_len = 0, .nidx = 1},
        {.version = 2, .method = GMTF_METHOD_BWT, .orig_len = 0, .payload_len = 5, .nidx = 0},
        {.version = 2, .method = 3, .orig_len = 100, .payload_len = 10, .nidx = 0},
        {.version = 2, .method = GMTF_METHOD_RAW, .orig_len = 100, .payload_len = 100, .flags = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tu_header h = cases[i];
        for (unsigned k = 0; k < h.nidx; k++)
            h.idx[k] = 1;
        memset(frame, 'z', sizeof frame);
        hl = tu_write_header(frame, &h);
        long r = decode_guarded(frame, hl + h.payload_len, 200, NULL, 0);
        if (r >= 0)
            fail_msg("case %zu (method %u, orig %u, payload %u) decoded", i, h.method, h.orig_len,
                     h.payload_len);
    }
}

/* One flipped bit of a version 2 payload, at offset `at`: a range decode
 * on rc (whose table for the good frame is kept: the check runs on every
 * call, not only when the table is made), the whole decode and the batch
 * decode (on batch, when given) all report GMTF_E_CHECKSUM and write
 * nothing past their output. */
static void check_payload_flip(uint8_t *f, size_t flen, size_t hl, const uint8_t *src, size_t n,
                               size_t at, gmtf_codec *rc, gmtf_codec *batch)
{
    size_t off = (at * 7919) % n, cnt = n - off < 3000 ? n - off : 3000;
    tu_guarded g = tu_guarded_alloc(n);
    tu_guard_set(&g, cnt);
    assert_int_equal(gmtf_frame_decode_range(rc, f, flen, off, cnt, g.buf), (long)cnt);
    assert_memory_equal(g.buf, src + off, cnt);
    uint8_t bit = (uint8_t)(1u << (at % 8));
    f[hl + at] ^= bit;
    long r = gmtf_frame_decode_range(rc, f, flen, off, cnt, g.buf);
    if (r != GMTF_E_CHECKSUM)
        fail_msg("n=%zu payload byte %zu flipped: range [%zu, +%zu) gave %ld", n, at, off, cnt, r);
    assert_true(tu_guard_ok(&g));
    r = decode_guarded(f, flen, n, NULL, 0);
    if (r != GMTF_E_CHECKSUM)
        fail_msg("n=%zu payload byte %zu of %zu flipped: whole decode gave %ld", n, at, flen - hl,
                 r);
    if (batch) {
        uint64_t foff[2] = {0, flen}, doff[2] = {0, n};
        int status = 0;
        tu_guard_set(&g, n);
        assert_int_equal(gmtf_batch_decode(batch, f, foff, 1, g.buf, doff, &status),
                         GMTF_E_CHECKSUM);
        assert_int_equal(status, GMTF_E_CHECKSUM);
        assert_true(tu_guard_ok(&g));
    }
    f[hl + at] ^= bit;
    tu_guarded_free(&g);
}

/* The payload bytes the sweep below damages: every one (sweep), else the
 * first and last 64 and every 997th between. */
static size_t next_payload_pos(size_t at, size_t plen, int sweep)
{
    if (sweep || at < 64 || at + 64 >= plen)
        return at + 1;
    return at + 997 < plen - 64 ? at + 997 : plen - 64;
}

/* Version 2's payload checksum: every byte of a small frame's payload
 * (method 3) and sampled bytes of a large method 2 frame, each with one
 * bit flipped, are reported by the range decode, the whole decode and the
 * batch decode (staged path, 2 threads); the good frame decodes after. */
static void test_v2_payload_damage(void **state)
{
    (void)state;
    gmtf_codec *batch = NULL, *rc = NULL;
    gmtf_codec_options o = {.threads = 2, .mtf = "scalar-batch"};
    assert_int_equal(gmtf_codec_create(&batch, &o), 0);
    o.threads = 1;
    assert_int_equal(gmtf_codec_create(&rc, &o), 0);
    static const size_t sizes[] = {3000, 1200000};
    for (size_t s = 0; s < 2; s++) {
        size_t n = sizes[s], flen;
        uint8_t *src;
        tu_header h;
        uint8_t *f = real_bwt_frame(n, 60 + s, &src, &flen, &h);
        size_t hl = hdr_len(&h), plen = flen - hl, tried = 0;
        assert_int_equal(h.version, 2);
        assert_int_equal(h.payload_crc, tu_crc32c_ref(0, f + hl, plen));
        assert_int_equal(f[hl], s ? 2 : 3); /* QLFC method: lanes from 900 KiB, else adaptive */
        for (size_t at = 0; at < plen; at = next_payload_pos(at, plen, s == 0), tried++)
            check_payload_flip(f, flen, hl, src, n, at, rc,
                               s == 0 || tried % 8 == 0 ? batch : NULL);
        assert_true(tried >= (s ? 128 + (plen - 128) / 997 : plen));
        assert_int_equal(decode_guarded(f, flen, n, src, n), (long)n);
        free(f), free(src);
    }
    gmtf_codec_destroy(batch);
    gmtf_codec_destroy(rc);
}

int main(void)
{
    const struct CMUnitTest v2_tests[] = {
        cmocka_unit_test(test_positive_controls),
        cmocka_unit_test(test_lengths_past_buffer),
        cmocka_unit_test(test_bwt_indexes),
        cmocka_unit_test(test_hostile_payloads),
        cmocka_unit_test(test_big_claims_small_payloads),
        cmocka_unit_test(test_batch_with_crafted),
        cmocka_unit_test(test_block_over_max_block),
        cmocka_unit_test(test_v2_headers),
        cmocka_unit_test(test_v2_method_fields),
        cmocka_unit_test(test_v2_payload_damage),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positive_controls),
        cmocka_unit_test(test_lengths_past_buffer),
        cmocka_unit_test(test_orig_len_over_max),
        cmocka_unit_test(test_bwt_indexes),
        cmocka_unit_test(test_hostile_payloads),
        cmocka_unit_test(test_big_claims_small_payloads),
        cmocka_unit_test(test_method_field_mismatches),
        cmocka_unit_test(test_batch_with_crafted),
        cmocka_unit_test(test_block_over_max_block),
        cmocka_unit_test(test_fuzzer_findings),
    };
    int fails = cmocka_run_group_tests_name("crafted, frame version 1", tests, setup_v1, teardown);
    fails += cmocka_run_group_tests_name("crafted, frame version 2", v2_tests, setup_v2, teardown);
    return fails;
}
