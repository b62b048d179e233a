/* Snapshot chunks packed in columns (fs/snappack.c): records come back byte
 * for byte, whatever they hold; the real snapshot of a tree packs to a
 * fraction of its records' compressed size; hostile packed bytes never
 * crash the unpacker, never make it write past what it allocated or
 * allocate over a chunk's limit, and garbage is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cmocka.h>

#include "fs_internal.h"
#include "fs_test_util.h"
#include "hostile/himg.h"

#define BS (64u << 10)
#define ROOT GMTF_ROOT_INO

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A value of w bytes that is often small, often like the last one. */
static uint64_t pick(uint64_t *s, uint64_t last)
{
    switch (rng_next(s) % 5) {
    case 0: return 0;
    case 1: return last + 1;
    case 2: return rng_next(s) % 300;
    case 3: return last;
    default: return rng_next(s);
    }
}

/* A record of type t with a body of its usual length (or, once in a while,
 * another one), fields drawn by pick. */
static void rand_record(wbuf *w, uint64_t *s, uint64_t *last)
{
    static const uint16_t types[] = {R_INODE, R_SIZE,  R_EXT,  R_DADD, R_FRAME, R_RETIRE,
                                     R_LINK,  R_XATTR, R_IDEL, R_DDEL, R_STAGE, 77};
    uint16_t t = types[rng_next(s) % (sizeof types / sizeof types[0])];
    uint32_t blen;
    switch (t) {
    case R_INODE: blen = 92; break;
    case R_SIZE:
    case R_RETIRE: blen = 16; break;
    case R_EXT:
    case R_FRAME: blen = 24; break;
    case R_DADD: blen = 26 + (uint32_t)(rng_next(s) % 40); break;
    default: blen = (uint32_t)(rng_next(s) % 60); break;
    }
    if (rng_next(s) % 16 == 0)
        blen = (uint32_t)(rng_next(s) % 100); /* not the type's length */
    wb_u16(w, t);
    wb_u16(w, 0);
    wb_u32(w, blen);
    size_t at = w->len;
    for (uint32_t i = 0; i + 8 <= blen; i += 8) {
        *last = pick(s, *last);
        wb_u64(w, *last);
    }
    while (w->len - at < blen)
        wb_u8(w, (uint8_t)(rng_next(s) % 3 ? 'a' + rng_next(s) % 26 : rng_next(s)));
    if (t == R_DADD && blen >= 26 && rng_next(s) % 4) { /* a well-formed name, mostly */
        store_le16(w->p + at + 24, (uint16_t)(blen - 26));
        for (uint32_t i = 26; i < blen; i++)
            if (!w->p[at + i])
                w->p[at + i] = 'z';
    }
}

static void roundtrip(const uint8_t *rec, size_t len, uint32_t bs)
{
    wbuf p = {0}, u = {0};
    assert_int_equal(snap_pack(rec, len, bs, &p), 0);
    assert_true(p.len <= len + 4);
    assert_int_equal(snap_unpack(p.p, p.len, bs, &u), 0);
    assert_int_equal(u.len, len);
    assert_memory_equal(u.p, rec, len);
    wb_free(&p);
    wb_free(&u);
}

static void test_roundtrip_random(void **state)
{
    (void)state;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 300; round++) {
        wbuf w = {0};
        uint64_t last = 0;
        int n = (int)(rng_next(&s) % 200);
        for (int i = 0; i < n; i++)
            rand_record(&w, &s, &last);
        assert_false(w.err);
        roundtrip(w.p, w.len, round % 2 ? BS : 2u << 20);
        wb_free(&w);
    }
    roundtrip((const uint8_t *)"", 0, BS); /* no record at all */
}

/* A record cut short, or with its zero field set, is not packed: the
 * snapshot then goes as records. */
static void test_refuses_broken(void **state)
{
    (void)state;
    wbuf w = {0}, p = {0};
    wb_u16(&w, R_SIZE);
    wb_u16(&w, 0);
    wb_u32(&w, 16);
    wb_u64(&w, 5);
    assert_int_equal(snap_pack(w.p, w.len, BS, &p), -EINVAL); /* 8 bytes short */
    wb_u64(&w, 1000);
    assert_int_equal(snap_pack(w.p, w.len, BS, &p), 0);
    p.len = 0;
    w.p[2] = 1;
    assert_int_equal(snap_pack(w.p, w.len, BS, &p), -EINVAL);
    wb_free(&w);
    wb_free(&p);
}

/* The snapshot of a tree: small files packed together, a file of several
 * blocks, directories; packed, its chunks come back, and they compress to
 * well under half of what the records do. */
static void test_real_snapshot(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t *data = malloc(3 * BS + 77);
    fill_pattern(data, 3 * BS + 77, 5);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_mkdir(fs, ROOT, "dir", 0755, 0, 0, &e), 0);
    uint64_t dir = e.attr.st_ino;
    for (int i = 0; i < 400; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "file%03d.%s", i, i % 3 ? "c" : "h");
        assert_int_equal(gmtf_fs_create(fs, i % 2 ? dir : ROOT, nm, S_IFREG | 0644, 0, 0, 0, &e),
                         0);
        size_t n = i == 7 ? 3 * BS + 77 : 100 + (size_t)i * 13;
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data, n, 0), (long)n);
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    wbuf w = {0}, p = {0};
    uint32_t *ends;
    size_t nch;
    assert_int_equal(snapshot_serialize(fs, NULL, &w, SNAP_CHUNK, &ends, &nch), 0);
    assert_int_equal(nch, 1);
    roundtrip(w.p, w.len, BS);
    assert_int_equal(snap_pack(w.p, w.len, BS, &p), 0);
    /* compressed by the codec as the snapshot is */
    gmtf_codec *c;
    gmtf_codec_options co = {.threads = 1, .max_block = SNAP_CHUNK};
    assert_int_equal(gmtf_codec_create(&c, &co), 0);
    size_t cap = gmtf_frame_bound(w.len);
    uint8_t *f = malloc(cap);
    long plain = gmtf_frame_encode(c, w.p, w.len, f, cap);
    long packed = gmtf_frame_encode(c, p.p, p.len, f, cap);
    assert_true(plain > 0 && packed > 0);
    printf("# 401 inodes: records %zu bytes -> %ld compressed; packed %zu -> %ld\n", w.len, plain,
           p.len, packed);
    assert_true(packed * 3 < plain * 2); /* a third smaller at least (half, measured) */
    gmtf_codec_destroy(c);
    free(f);
    free(ends);
    wb_free(&w);
    wb_free(&p);
    free(data);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    /* and the image mounts again from it, every file there */
    fs = mount_rec(r, 1);
    struct statvfs sv;
    assert_int_equal(gmtf_fs_statfs(fs, &sv), 0);
    gmtf_fs_info info;
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    assert_int_equal(info.files, 400);
    assert_int_equal(info.dirs, 2);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
}

/* Version 2 images written before packing hold their chunks as records
 * (encoding 0): still read, and a read-write mount writes them packed. */
static void test_records_still_read(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t data[5000];
    fill_pattern(data, sizeof data, 9);
    gmtf_entry e;
    for (int i = 0; i < 50; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "f%d", i);
        assert_int_equal(gmtf_fs_create(fs, ROOT, nm, S_IFREG | 0644, 0, 0, 0, &e), 0);
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data, 100 + (size_t)i * 90, 0),
                         (long)(100 + i * 90));
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t len;
    const uint8_t *img = rec_image_data(r, &len);
    himg h;
    assert_int_equal(himg_parse(&h, img, len), 0);
    assert_int_equal(h.snap_enc, SNAP_PACKED);
    h.snap_enc = SNAP_RECORDS;
    assert_int_equal(himg_build(&h), 0);
    assert_int_equal(load_le32(h.p + h.sb[h.cur].snap_off + 20), SNAP_RECORDS);
    rec_img *r2 = rec_image_new(h.p, h.len);
    himg_free(&h);
    for (int rw = 0; rw < 2; rw++) {
        fs = mount_rec(r2, !rw);
        assert_non_null(fs);
        for (int i = 0; i < 50; i += 7) {
            char nm[16];
            uint8_t back[5000];
            snprintf(nm, sizeof nm, "f%d", i);
            assert_int_equal(gmtf_fs_lookup(fs, ROOT, nm, &e), 0);
            size_t n = 100 + (size_t)i * 90;
            assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, back, sizeof back, 0), (long)n);
            assert_memory_equal(back, data, n);
        }
        if (rw) { /* a change: the unmount writes the snapshot packed */
            assert_int_equal(gmtf_fs_unlink(fs, ROOT, "f3"), 0);
            assert_int_equal(gmtf_fs_unmount(fs), 0);
            img = rec_image_data(r2, &len);
            assert_int_equal(himg_parse(&h, img, len), 0);
            assert_int_equal(h.snap_enc, SNAP_PACKED);
            himg_free(&h);
        } else {
            gmtf_fs_unmount(fs);
        }
    }
    gmtf_image *im = rec_image_attach(r2);
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1};
    gmtf_fs_check_report rep;
    assert_int_equal(gmtf_fs_check(im, &co, &rep), 0);
    assert_int_equal(rep.errors, 0);
    assert_int_equal(rep.info.files, 49);
    gmtf_image_close(im);
    rec_image_free(r);
    rec_image_free(r2);
}

/* Hostile packed bytes: random ones, and a real packed chunk cut short or
 * with bytes changed. Never a crash (the sanitizer run checks the reads
 * and writes); when unpacking succeeds the output is bounded by the input. */
static void test_unpack_hostile(void **state)
{
    (void)state;
    uint64_t s = 12345;
    wbuf w = {0}, p = {0}, u = {0};
    uint64_t last = 0;
    for (int i = 0; i < 300; i++)
        rand_record(&w, &s, &last);
    assert_int_equal(snap_pack(w.p, w.len, BS, &p), 0);
    uint8_t *b = malloc(p.len);
    size_t refused = 0;
    for (int round = 0; round < 3000; round++) {
        size_t n = p.len;
        memcpy(b, p.p, n);
        switch (round % 3) {
        case 0: n = rng_next(&s) % (p.len + 1); break; /* cut short */
        case 1:
            for (int k = 0; k < 1 + round % 5; k++)
                b[rng_next(&s) % n] ^= (uint8_t)(1 + rng_next(&s) % 255);
            break;
        default:
            n = rng_next(&s) % 600;
            for (size_t k = 0; k < n; k++)
                b[k] = (uint8_t)(round % 2 ? rng_next(&s) : rng_next(&s) % 12);
            break;
        }
        u.len = 0;
        int rc = snap_unpack(b, n, BS, &u);
        if (rc) {
            assert_int_equal(rc, -EUCLEAN);
            refused++;
        } else {
            assert_true(u.len <= GMTF_FS_BLOCK_MAX);
        }
    }
    assert_true(refused > 1000);
    free(b);
    wb_free(&w);
    wb_free(&p);
    wb_free(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_random), cmocka_unit_test(test_refuses_broken),
        cmocka_unit_test(test_real_snapshot),    cmocka_unit_test(test_records_still_read),
        cmocka_unit_test(test_unpack_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
