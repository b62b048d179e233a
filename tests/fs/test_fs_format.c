/* On-disk format: superblock encoding, record checking, and images with
 * damaged bytes (mount and fsck must fail cleanly or read only what
 * checks out; never crash, never return wrong bytes silently). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fs_internal.h"
#include "fs_test_util.h"

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static void test_superblock_roundtrip(void **state)
{
    (void)state;
    sb_info a = {.gen = 7,
                 .block_size = 1u << 20,
                 .capacity = 1ull << 30,
                 .image_end = 99999,
                 .snap_off = 16384,
                 .snap_len = 500,
                 .jrnl_off = 20480,
                 .jrnl_len = 65536,
                 .snap2_off = 86016,
                 .jrnl2_off = 90112,
                 .jrnl_id = 42,
                 .ctime = 1,
                 .wtime = 2};
    memcpy(a.uuid, "0123456789abcdef", 16);
    strcpy(a.label, "data");
    uint8_t buf[SB_SLOT_SIZE];
    sb_encode(&a, buf);
    sb_info b;
    assert_int_equal(sb_decode(buf, &b), 0);
    assert_int_equal(b.gen, 7);
    assert_int_equal(b.block_size, 1u << 20);
    assert_int_equal(b.jrnl_id, 42);
    assert_int_equal(b.version, FMT_VERSION);
    assert_int_equal(b.snap2_off, 86016);
    assert_int_equal(b.jrnl2_off, 90112);
    assert_string_equal(b.label, "data");
    assert_memory_equal(b.uuid, a.uuid, 16);
    /* any flipped bit is caught */
    for (size_t i = 0; i < SB_SLOT_SIZE; i += 61) {
        buf[i] ^= 0x10;
        assert_int_not_equal(sb_decode(buf, &b), 0);
        buf[i] ^= 0x10;
    }
    /* fields out of range are refused even with a good CRC */
    a.block_size = 3000;
    sb_encode(&a, buf);
    assert_int_equal(sb_decode(buf, &b), -EUCLEAN);
    a.block_size = 1u << 20;
    a.snap_off = 100; /* inside the superblock area */
    sb_encode(&a, buf);
    assert_int_equal(sb_decode(buf, &b), -EUCLEAN);
    memset(buf, 0, sizeof buf);
    assert_int_equal(sb_decode(buf, &b), -EINVAL);
}

static void test_records_checked(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(64u << 10, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    assert_non_null(fs);
    fs->opt.log = quiet;
    /* an EXT naming a frame that does not exist */
    uint8_t rec[64] = {9, 0, 0, 0};
    store_le32(rec + 4, 24);
    store_le64(rec + 8, GMTF_ROOT_INO);
    store_le32(rec + 16, 0);
    store_le32(rec + 20, 77);
    assert_int_equal(rec_apply(fs, rec, 32), -EUCLEAN);
    /* body length not matching the record */
    assert_int_equal(rec_apply(fs, rec, 31), -EUCLEAN);
    /* unknown type */
    rec[0] = 200;
    assert_int_equal(rec_apply(fs, rec, 32), -EUCLEAN);
    /* random records never crash and never create a root-less tree */
    srand(1);
    for (int i = 0; i < 20000; i++) {
        uint8_t b[80];
        for (size_t k = 0; k < sizeof b; k++)
            b[k] = (uint8_t)rand();
        size_t len = 8 + (size_t)rand() % 72;
        b[0] = (uint8_t)(1 + rand() % 10);
        b[1] = 0;
        store_le32(b + 4, (uint32_t)(len - 8));
        fs->loading = LOADING_JOURNAL;
        rec_apply(fs, b, len);
        fs->loading = 0;
    }
    assert_non_null(inode_get(fs, GMTF_ROOT_INO));
    gmtf_fs_unmount(fs);
    rec_image_free(r);
}

/* Every regular file under dir read through; returns files seen. */
static int read_tree(gmtf_fs *fs, uint64_t dir, int depth);

struct walk {
    gmtf_fs *fs;
    uint64_t inos[64];
    int n;
};

static int walk_fill(void *arg, const char *name, const struct stat *st, uint64_t off)
{
    (void)off;
    struct walk *w = arg;
    if (strcmp(name, ".") && strcmp(name, "..") && w->n < 64)
        w->inos[w->n++] = st->st_ino;
    return 0;
}

static int read_tree(gmtf_fs *fs, uint64_t dir, int depth)
{
    struct walk w = {.fs = fs};
    if (depth > 8 || gmtf_fs_readdir(fs, dir, 0, walk_fill, &w))
        return 0;
    int files = 0;
    static uint8_t buf[1 << 18];
    for (int i = 0; i < w.n; i++) {
        struct stat st;
        if (gmtf_fs_getattr(fs, w.inos[i], &st))
            continue;
        if (S_ISDIR(st.st_mode))
            files += read_tree(fs, w.inos[i], depth + 1);
        else if (S_ISREG(st.st_mode)) {
            long n = gmtf_fs_read(fs, w.inos[i], buf, sizeof buf, 0);
            assert_true(n >= 0 || n == -EIO);
            files++;
        }
    }
    return files;
}

static void test_damaged_images(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(64u << 10, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e, d;
    assert_int_equal(gmtf_fs_mkdir(fs, GMTF_ROOT_INO, "dir", 0755, 0, 0, &d), 0);
    uint8_t data[100000];
    for (int i = 0; i < 6; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "f%d", i);
        fill_pattern(data, sizeof data, (uint32_t)i);
        assert_int_equal(
            gmtf_fs_create(fs, i & 1 ? d.attr.st_ino : GMTF_ROOT_INO, nm, 0644, 0, 0, 0, &e), 0);
        size_t n = (size_t)(i + 1) * 15000;
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data, n, 0), (long)n);
        gmtf_fs_setxattr(fs, e.attr.st_ino, "user.x", "v", 1, 0);
        gmtf_fs_release(fs, e.attr.st_ino);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t len;
    const uint8_t *img0 = rec_image_data(r, &len);
    uint8_t *img = malloc(len);
    srand(3);
    int mounted = 0, failed = 0;
    for (int iter = 0; iter < 150 / (int)test_scale(); iter++) {
        memcpy(img, img0, len);
        int flips = 1 + rand() % 8;
        for (int k = 0; k < flips; k++) {
            /* aim at metadata half of the time: superblocks and the tail */
            size_t at = rand() % 2 ? (size_t)rand() % 8192 : (size_t)rand() % len;
            if (rand() % 3 == 0 && len > 70000)
                at = len - 70000 + (size_t)rand() % 70000;
            img[at] ^= (uint8_t)(1u << (rand() % 8));
        }
        gmtf_image *mi;
        assert_int_equal(gmtf_image_open_mem(img, len, &mi), 0);
        gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = quiet};
        gmtf_fs *f2;
        if (gmtf_fs_mount(mi, &o, &f2) == 0) {
            mounted++;
            read_tree(f2, GMTF_ROOT_INO, 0);
            gmtf_fs_unmount(f2);
        } else {
            failed++;
        }
        gmtf_image_open_mem(img, len, &mi);
        gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = quiet};
        gmtf_fs_check_report rep;
        gmtf_fs_check(mi, &co, &rep); /* any result, but no crash */
        gmtf_image_close(mi);
    }
    assert_true(mounted > 0);
    free(img);
    rec_image_free(r);
}

static void test_bad_frame_is_eio(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(64u << 10, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e;
    uint8_t data[50000];
    fill_pattern(data, sizeof data, 5);
    assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, "f", 0644, 0, 0, 0, &e), 0);
    assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data, sizeof data, 0), (long)sizeof data);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    uint64_t off = 0;
    struct inode *in = inode_get(fs, e.attr.st_ino);
    off = fs->frames[in->u.ext.v[0].frame].off;
    gmtf_fs_release(fs, e.attr.st_ino);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t len;
    const uint8_t *img0 = rec_image_data(r, &len);
    uint8_t *img = malloc(len);
    memcpy(img, img0, len);
    img[off + 40] ^= 1; /* inside the frame payload */
    gmtf_image *mi;
    gmtf_image_open_mem(img, len, &mi);
    gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = quiet};
    assert_int_equal(gmtf_fs_mount(mi, &o, &fs), 0);
    uint8_t got[50000];
    assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, got, sizeof got, 0), -EIO);
    gmtf_fs_unmount(fs);
    /* fsck --verify-data finds it; -y turns the block into a hole */
    gmtf_image_open_mem(img, len, &mi);
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = quiet};
    gmtf_fs_check_report rep;
    assert_int_equal(gmtf_fs_check(mi, &co, &rep), 0);
    assert_true(rep.errors > 0);
    co.repair = 1;
    assert_int_equal(gmtf_fs_check(mi, &co, &rep), 0);
    co.repair = 0;
    assert_int_equal(gmtf_fs_check(mi, &co, &rep), 0);
    assert_int_equal(rep.errors, 0);
    gmtf_image_close(mi);
    free(img);
    rec_image_free(r);
}

/* Log lines kept for a test to look at. */
typedef struct log_lines {
    char text[4096];
    size_t len;
} log_lines;

static void keep_log(void *arg, const char *msg)
{
    log_lines *l = arg;
    int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s\n", msg);
    if (n > 0)
        l->len += (size_t)n < sizeof l->text - l->len ? (size_t)n : sizeof l->text - l->len - 1;
}

/* Text of small file i (compressible: its pack is a BWT frame). */
static void small_text(uint8_t *p, size_t n, unsigned i)
{
    static const char *w[] = {"pack", "frame", "payload", "range", "chain", "tail", "block"};
    size_t k = 0;
    for (unsigned j = 0; k < n; j++) {
        char line[80];
        int m = snprintf(line, sizeof line, "%u %s %s %u\n", i, w[(i + j) % 7], w[j * 3 % 7],
                         j * (i + 1) % 977);
        for (int q = 0; q < m && k < n; q++)
            p[k++] = (uint8_t)line[q];
    }
}

/* The image img (ilen bytes) with one bit of frame `id` (v) flipped at
 * offset at of the frame, mounted read-only with range reads on: every
 * file of the frame (in_victim) reads -EIO, the first by range, with a log
 * line naming the frame and "checksum"; every other file reads right. */
static void read_damaged(const uint8_t *img0, size_t ilen, uint32_t id, const struct frame *v,
                         size_t at, const uint64_t *ino, uint8_t *const *data, const int *in_victim,
                         int nfiles)
{
    uint8_t *img = malloc(ilen);
    memcpy(img, img0, ilen);
    img[v->off + at] ^= 0x08;
    log_lines log = {.len = 0};
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(img, ilen, &mi), 0);
    gmtf_fs_options o = {
        .read_only = 1, .threads = 1, .log = keep_log, .log_arg = &log, .range_reads = 1};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(mi, &o, &fs), 0);
    uint8_t buf[200];
    int first = 1;
    char want[64];
    snprintf(want, sizeof want, "frame %u at offset %llu", id, (unsigned long long)v->off);
    for (int i = 0; i < nfiles; i++) {
        long got = gmtf_fs_read(fs, ino[i], buf, 100, 37);
        if (!in_victim[i]) {
            assert_int_equal(got, 100);
            assert_memory_equal(buf, data[i] + 37, 100);
            continue;
        }
        if (got != -EIO)
            fail_msg("byte %zu of frame %u (%u bytes) damaged: file %d read %ld (%s), want -EIO",
                     at, id, v->clen, i, got,
                     got == 100 && memcmp(buf, data[i] + 37, 100) ? "wrong bytes" : "");
        if (first) { /* that read was by range: the frame is noted as such */
            int noted = 0;
            for (size_t k = 0; k < sizeof fs->range_recent / sizeof *fs->range_recent; k++)
                noted |= fs->range_recent[k] == id;
            assert_true(noted);
            if (!strstr(log.text, want) || !strstr(log.text, "checksum"))
                fail_msg("byte %zu of frame %u damaged: log '%s'", at, id, log.text);
            first = 0;
        }
    }
    assert_false(first);
    gmtf_fs_unmount(fs);
    free(img);
}

/* A byte damaged inside a pack of small files (1 MiB blocks: a frame of
 * version 2, method 2), read with range reads on: the cold read of a small
 * file is a range read (the frame is at least 256 KiB, the read a sliver of
 * it), which cannot check the data checksum, so the payload checksum is
 * what reports it: -EIO for every file of that frame (the first read by
 * range, the second whole), the log naming the frame and "checksum"; every
 * other file reads right. Bits across the payload (its first and last
 * bytes: the coder's tables and the lanes' final states). fsck's
 * --verify-data reports the frame. */
static void test_damaged_pack_range_read(void **state)
{
    (void)state;
    enum { NSMALL = 500 };
    rec_img *r = mkfs_rec(1u << 20, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t *data[NSMALL];
    size_t len[NSMALL];
    uint64_t ino[NSMALL];
    for (int i = 0; i < NSMALL; i++) {
        len[i] = 1500 + (size_t)i * 29;
        data[i] = malloc(len[i]);
        small_text(data[i], len[i], (unsigned)i);
        char nm[16];
        snprintf(nm, sizeof nm, "s%03d.txt", i);
        gmtf_entry e;
        assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, nm, 0644, 0, 0, 0, &e), 0);
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data[i], len[i], 0), (long)len[i]);
        gmtf_fs_release(fs, e.attr.st_ino);
        ino[i] = e.attr.st_ino;
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    /* the frame of file NSMALL / 2: a large shared BWT frame */
    fs = mount_rec(r, 1);
    uint32_t id = inode_get(fs, ino[NSMALL / 2])->u.ext.v[0].frame;
    struct frame victim = fs->frames[id];
    int in_victim[NSMALL], shared = 0;
    for (int i = 0; i < NSMALL; i++) {
        in_victim[i] = inode_get(fs, ino[i])->u.ext.v[0].frame == id;
        shared += in_victim[i];
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    assert_true(shared > 10);
    assert_true(victim.dlen >= (256u << 10));
    size_t ilen;
    const uint8_t *img = rec_image_data(r, &ilen);
    const uint8_t *fr = img + victim.off;
    assert_int_equal(fr[4], 2); /* frame version 2 */
    assert_int_equal(fr[5], GMTF_METHOD_BWT);
    size_t hl = 32 + 3 * (size_t)((victim.dlen + 32767) / 32768); /* docs/codec.md */
    assert_int_equal(fr[hl], 2);                                  /* the payload: method 2 */
    const size_t at[] = {hl,
                         hl + 1,
                         hl + 100,
                         victim.clen / 3,
                         victim.clen / 2,
                         victim.clen - 60,
                         victim.clen - 5,
                         victim.clen - 1};
    for (size_t k = 0; k < sizeof at / sizeof *at; k++)
        read_damaged(img, ilen, id, &victim, at[k], ino, data, in_victim, NSMALL);

    /* fsck --verify-data: the frame, named, is an error */
    uint8_t *bad = malloc(ilen);
    memcpy(bad, img, ilen);
    bad[victim.off + victim.clen / 2] ^= 0x08;
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(bad, ilen, &mi), 0);
    log_lines log = {.len = 0};
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = keep_log, .log_arg = &log};
    gmtf_fs_check_report rep;
    assert_int_equal(gmtf_fs_check(mi, &co, &rep), 0);
    assert_true(rep.errors > 0);
    char want[64];
    snprintf(want, sizeof want, "frame %u at offset %llu", id, (unsigned long long)victim.off);
    assert_non_null(strstr(log.text, want));
    gmtf_image_close(mi);
    for (int i = 0; i < NSMALL; i++)
        free(data[i]);
    free(bad);
    rec_image_free(r);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test by name (glob) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_superblock_roundtrip),    cmocka_unit_test(test_records_checked),
        cmocka_unit_test(test_damaged_images),          cmocka_unit_test(test_bad_frame_is_eio),
        cmocka_unit_test(test_damaged_pack_range_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
