/* gmtf_frame_decode_range: every range of a frame equals the same bytes of
 * the whole decode (random, text-like, run and real data; both methods of
 * version 2, both sample steps, version 1, raw and run frames), the codec's
 * kept table never leaks from one frame into another, ranges outside the
 * block are refused, and damaged frames give an error or the range's
 * length, never a crash (ASan). */
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

typedef struct frame {
    uint8_t *data, *frame;
    size_t n, flen;
} frame;

static gmtf_codec *new_codec(unsigned version)
{
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {.threads = 1, .mtf = "scalar", .frame_version = version};
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    return c;
}

static frame make_frame(gmtf_codec *c, uint8_t *data, size_t n)
{
    frame f = {.data = data, .n = n};
    size_t bound = gmtf_frame_bound(n);
    f.frame = tu_malloc(bound);
    long r = gmtf_frame_encode(c, data, n, f.frame, bound);
    if (r < 0)
        fail_msg("encode of %zu bytes: %s", n, gmtf_strerror((int)r));
    f.flen = (size_t)r;
    return f;
}

static void frame_free(frame *f)
{
    free(f->data);
    free(f->frame);
}

/* Real data: the corpus when present, else files every machine has. */
static uint8_t *real_data(size_t n)
{
    tu_files fl = tu_corpus_files();
    if (!fl.count)
        fl = tu_system_files(200, 1u << 20);
    uint8_t *d = tu_concat(&fl, n);
    tu_files_free(&fl);
    if (!d) { /* nothing readable at all: text-like bytes instead */
        d = tu_malloc(n);
        tu_fill_text_like(d, n, 7);
    }
    return d;
}

/* One range, checked against the source bytes and a guard after it. */
static void check_range(gmtf_codec *c, const frame *f, size_t off, size_t cnt, tu_guarded *g)
{
    tu_guard_set(g, cnt);
    long r = gmtf_frame_decode_range(c, f->frame, f->flen, off, cnt, g->buf);
    if (r != (long)cnt)
        fail_msg("range [%zu, +%zu) of %zu: %ld (%s)", off, cnt, f->n, r,
                 r < 0 ? gmtf_strerror((int)r) : "short");
    if (cnt && memcmp(g->buf, f->data + off, cnt))
        fail_msg("range [%zu, +%zu) of %zu differs", off, cnt, f->n);
    assert_true(tu_guard_ok(g));
}

/* Ranges at every chain boundary (16 and 32 KiB steps, +-1; a sweep of
 * lengths at the first ones), random ones, the whole block and random
 * ones again (blocks of GMTF_BWT_RANK_MIN or more: ranks walked, then the
 * table). few: a
 * version 1 frame, decoded whole for each range. */
static void check_ranges(gmtf_codec *c, const frame *f, uint64_t seed, int few)
{
    size_t n = f->n;
    tu_guarded g = tu_guarded_alloc(n ? n : 1);
    static const size_t lens[] = {1, 4096, 32769, 2, 17, 16383, 16384, 16385, 32767, 32768, 100000};
    /* GMTF_TEST_SCALE (the sanitizer pass) past the first 64 KiB: every
     * scale-th boundary, still on 32 KiB chain boundaries (version 1: on
     * 64 KiB steps, each range a whole decode) */
    size_t step = few ? 65536 : 16384, far_step = step * tu_scale();
    for (size_t b = 0; b <= n; b += b < 65536 ? step : far_step)
        for (int d = -1; d <= 1; d++)
            for (size_t li = 0; li < (b < 65536 ? sizeof lens / sizeof *lens : 3); li++) {
                if ((d < 0 && b == 0) || b + (size_t)(d + 1) > n + 1)
                    continue;
                size_t off = b + (size_t)d;
                if (off > n)
                    continue;
                size_t cnt = lens[li] < n - off ? lens[li] : n - off;
                check_range(c, f, off, cnt, &g);
            }
    uint64_t st = seed;
    for (int i = 0; i < (few ? 10 : 200 / (int)tu_scale()) && n; i++) {
        size_t off = (size_t)tu_rand_below(&st, n);
        size_t cnt = (size_t)tu_rand_below(&st, (n - off < 70000 ? n - off : 70000) + 1);
        check_range(c, f, off, cnt, &g);
    }
    check_range(c, f, 0, n, &g);
    /* ranges again: from the table the whole block left (a block of 64 KiB
     * or more walked ranks before it) */
    for (int i = 0; i < (few ? 2 : 20) && n; i++) {
        size_t off = (size_t)tu_rand_below(&st, n);
        size_t cnt = (size_t)tu_rand_below(&st, (n - off < 40000 ? n - off : 40000) + 1);
        check_range(c, f, off, cnt, &g);
    }
    check_range(c, f, n, 0, &g);
    tu_guarded_free(&g);
}

static void check_kinds(unsigned version, const size_t *sizes, size_t nsizes)
{
    gmtf_codec *c = new_codec(version);
    for (size_t si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        for (int kind = 0; kind < 4; kind++) {
            uint8_t *d = tu_malloc(n ? n : 1);
            if (kind == 0)
                tu_fill_random(d, n, 11 + n);
            else if (kind == 1)
                tu_fill_text_like(d, n, 13 + n);
            else if (kind == 2)
                memset(d, 'r', n);
            else {
                free(d);
                d = real_data(n ? n : 1);
            }
            frame f = make_frame(c, d, n);
            check_ranges(c, &f, 99 + n + (uint64_t)kind, version == 1);
            frame_free(&f);
        }
    }
    gmtf_codec_destroy(c);
}

/* Version 2: method 3 and both steps (16 KiB up to 256 KiB), method 2
 * (900 KiB and more), tiny and odd sizes. */
static void test_ranges_v2(void **state)
{
    (void)state;
    static const size_t sizes[] = {0,      5,      300,    16384,  16385,
                                   100000, 262144, 262145, 700001, 1u << 21};
    check_kinds(0, sizes, sizeof sizes / sizeof *sizes);
}

static void test_ranges_v1(void **state)
{
    (void)state;
    static const size_t sizes[] = {300, 100000, 1u << 20};
    check_kinds(1, sizes, sizeof sizes / sizeof *sizes);
}

/* Every range of small text-like and real blocks. */
static void test_every_range(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(0);
    for (int kind = 0; kind < 2; kind++) {
        size_t n = 257;
        uint8_t *d = kind ? real_data(n) : tu_malloc(n);
        if (!kind)
            tu_fill_text_like(d, n, 5);
        frame f = make_frame(c, d, n);
        tu_guarded g = tu_guarded_alloc(n);
        for (size_t off = 0; off <= n; off++)
            for (size_t cnt = 0; off + cnt <= n; cnt++)
                check_range(c, &f, off, cnt, &g);
        tu_guarded_free(&g);
        frame_free(&f);
    }
    gmtf_codec_destroy(c);
}

/* Ranges of two frames in turn, and of frames decoded or encoded in
 * between: the table kept for one frame never serves another. */
static void test_kept_table(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(0);
    size_t n = 600000;
    uint8_t *a = real_data(n), *b = tu_malloc(n);
    tu_fill_text_like(b, n, 21);
    frame fa = make_frame(c, a, n), fb = make_frame(c, b, n);
    tu_guarded g = tu_guarded_alloc(n);
    uint8_t *whole = tu_malloc(n);
    uint64_t st = 3;
    for (int i = 0; i < 60; i++) {
        const frame *f = (i / 2) % 2 ? &fb : &fa; /* each frame twice in a row */
        size_t off = (size_t)tu_rand_below(&st, n), cnt = (size_t)tu_rand_below(&st, 5000);
        if (cnt > n - off)
            cnt = n - off;
        check_range(c, f, off, cnt, &g);
        if (i % 7 == 3) /* a whole decode on the same codec in between */
            assert_int_equal(gmtf_frame_decode(c, fb.frame, fb.flen, whole, n), (long)n);
        if (i % 11 == 5) {
            frame t = make_frame(c, tu_malloc(1000), 1000);
            frame_free(&t);
        }
    }
    /* A frame whose header differs only in the data checksum (payload and
     * samples as fa's): decoded anew, so its whole range fails the check. */
    uint8_t *evil = tu_malloc(fa.flen);
    memcpy(evil, fa.frame, fa.flen);
    evil[16] ^= 1;
    tu_fix_header_crc(evil);
    check_range(c, &fa, 0, 100, &g);
    assert_int_equal(gmtf_frame_decode_range(c, evil, fa.flen, 0, n, g.buf), GMTF_E_CHECKSUM);
    /* The same header over a damaged payload while fa's table is kept: the
     * payload checksum is checked on every call, so it is refused, and
     * fa's ranges go on from the table. */
    check_range(c, &fa, 5000, 100, &g);
    memcpy(evil, fa.frame, fa.flen);
    evil[fa.flen - 1] ^= 0x80;
    for (size_t off = 0; off < n; off += 150001)
        assert_int_equal(gmtf_frame_decode_range(c, evil, fa.flen, off, 100, g.buf),
                         GMTF_E_CHECKSUM);
    check_range(c, &fa, 7000, 100, &g);
    tu_guarded_free(&g);
    free(whole);
    free(evil);
    frame_free(&fa);
    frame_free(&fb);
    gmtf_codec_destroy(c);
}

static void test_bad_ranges(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(0);
    size_t n = 50000;
    uint8_t *d = tu_malloc(n);
    tu_fill_text_like(d, n, 8);
    frame f = make_frame(c, d, n);
    uint8_t out[16];
    assert_int_equal(gmtf_frame_decode_range(c, f.frame, f.flen, n + 1, 0, out), -EINVAL);
    assert_int_equal(gmtf_frame_decode_range(c, f.frame, f.flen, n - 3, 4, out), -EINVAL);
    assert_int_equal(gmtf_frame_decode_range(c, f.frame, f.flen, 1, SIZE_MAX, out), -EINVAL);
    assert_true(gmtf_frame_decode_range(c, f.frame, 10, 0, 4, out) < 0);
    assert_true(gmtf_frame_decode_range(c, f.frame, f.flen - 1, 0, 4, out) < 0);
    frame_free(&f);
    gmtf_codec_destroy(c);
}

/* Damaged frames: random byte edits (header checksums refreshed half of
 * the time, so the samples are reached, and one time in four the payload
 * checksum too, so the payload is): any range gives its length or an
 * error, a whole range never gives wrong bytes, nor does any range of a
 * payload damaged under an intact header. */
static void test_hostile(void **state)
{
    (void)state;
    gmtf_codec *c = new_codec(0);
    static const size_t sizes[] = {40000, 1u << 20};
    long rounds = tu_env_long("GMTF_RANGE_MUTATIONS", 400);
    for (size_t si = 0; si < 2; si++) {
        size_t n = sizes[si];
        uint8_t *d = real_data(n);
        frame f = make_frame(c, d, n);
        uint8_t *m = tu_malloc(f.flen);
        tu_guarded g = tu_guarded_alloc(n);
        uint64_t st = 77 + n;
        tu_header fh;
        size_t hl = tu_read_header(f.frame, f.flen, &fh);
        assert_int_equal(fh.method, GMTF_METHOD_BWT);
        for (long i = 0; i < rounds; i++) {
            memcpy(m, f.frame, f.flen);
            int edits = 1 + (int)tu_rand_below(&st, 4);
            for (int e = 0; e < edits; e++) {
                size_t at = tu_rand_below(&st, 2) ? (size_t)tu_rand_below(&st, 64 + 3 * 40)
                                                  : (size_t)tu_rand_below(&st, f.flen);
                if (at < f.flen)
                    m[at] ^= (uint8_t)(1 + tu_rand_below(&st, 255));
            }
            /* the header as it was (the payload alone damaged, if at all) */
            int same_header = memcmp(m, f.frame, hl) == 0;
            /* every other round: header checksums refreshed; one round in
             * four the payload's too, so the QLFC decoder is reached */
            int reached = i % 4 == 3 && tu_fix_payload_crc(m, f.flen);
            if (i % 2 && !reached)
                tu_fix_header_crc(m);
            size_t off = (size_t)tu_rand_below(&st, n), cnt = (size_t)tu_rand_below(&st, 9000);
            if (cnt > n - off)
                cnt = n - off;
            tu_guard_set(&g, cnt);
            long r = gmtf_frame_decode_range(c, m, f.flen, off, cnt, g.buf);
            assert_true(r == (long)cnt || r < 0);
            assert_true(tu_guard_ok(&g));
            /* a payload the header's checksum no longer matches is never
             * decoded: a partial range from it is the right bytes or an
             * error */
            if (same_header && !reached && r == (long)cnt && cnt &&
                memcmp(g.buf, d + off, cnt) != 0)
                fail_msg("round %ld: range [%zu, +%zu) of a damaged payload: wrong bytes", i, off,
                         cnt);
            tu_guard_set(&g, n);
            r = gmtf_frame_decode_range(c, m, f.flen, 0, n, g.buf);
            assert_true(r == (long)n || r < 0);
            gmtf_frame_info fi;
            if (r == (long)n && gmtf_frame_info_get(m, f.flen, &fi) == 0 && fi.orig_len == n)
                assert_memory_equal(g.buf, d, n); /* the whole block: checked */
            assert_true(tu_guard_ok(&g));
        }
        tu_guarded_free(&g);
        free(m);
        frame_free(&f);
    }
    gmtf_codec_destroy(c);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test by name (glob) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges_v2),   cmocka_unit_test(test_ranges_v1),
        cmocka_unit_test(test_every_range), cmocka_unit_test(test_kept_table),
        cmocka_unit_test(test_bad_ranges),  cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
