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
    /* the pack size: 0 (a block) or a power of two from 64 KiB to the block size */
    const uint32_t good_ps[] = {0, 64u << 10, 256u << 10, 1u << 20};
    for (size_t i = 0; i < sizeof good_ps / sizeof *good_ps; i++) {
        a.pack_size = good_ps[i];
        sb_encode(&a, buf);
        assert_int_equal(load_le32(buf + 200), good_ps[i]);
        assert_int_equal(sb_decode(buf, &b), 0);
        assert_int_equal(b.pack_size, good_ps[i]);
    }
    const uint32_t bad_ps[] = {1,        4096,     32u << 10, 65535,      65537,
                               3u << 18, 2u << 20, 1u << 31,  0xffffffffu};
    for (size_t i = 0; i < sizeof bad_ps / sizeof *bad_ps; i++) {
        a.pack_size = bad_ps[i];
        sb_encode(&a, buf);
        assert_int_equal(sb_decode(buf, &b), -EUCLEAN);
    }
    a.pack_size = 0;
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
                noted |= fs->range_recent[k].reads && fs->range_recent[k].id == id;
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

/* A filesystem made with a pack size below its block size. */
static rec_img *mkfs_pack(uint32_t bs, uint32_t ps)
{
    rec_img *r = rec_image_new(NULL, 0);
    gmtf_image *img = rec_image_attach(r);
    gmtf_mkfs_options mo = {.block_size = bs, .pack_size = ps};
    assert_int_equal(gmtf_fs_mkfs(img, &mo), 0);
    gmtf_image_close(img);
    return r;
}

static uint64_t put_file(gmtf_fs *fs, const char *name, const uint8_t *data, size_t len)
{
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, name, 0644, 0, 0, 0, &e), 0);
    for (size_t off = 0; off < len;) { /* in pieces, as a writer does */
        size_t n = len - off < (300u << 10) ? len - off : 300u << 10;
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data + off, n, off), (long)n);
        off += n;
    }
    gmtf_fs_release(fs, e.attr.st_ino);
    return e.attr.st_ino;
}

static void check_file(gmtf_fs *fs, uint64_t ino, const uint8_t *data, size_t len)
{
    uint8_t *b = malloc(len + 1);
    assert_non_null(b);
    size_t got = 0;
    for (long n; got < len + 1; got += (size_t)n) { /* one byte more: none comes */
        n = gmtf_fs_read(fs, ino, b + got, len + 1 - got, got);
        assert_true(n >= 0);
        if (n == 0)
            break;
    }
    assert_int_equal(got, len);
    assert_memory_equal(b, data, len);
    free(b);
}

static void patch_slots_pack(uint8_t *img, size_t len, uint32_t v)
{
    for (size_t s = 0; s < SB_SLOTS && (s + 1) * SB_SLOT_SIZE <= len; s++) {
        uint8_t *b = img + s * SB_SLOT_SIZE;
        if (memcmp(b, SB_MAGIC, 8))
            continue;
        store_le32(b + 200, v);
        store_le32(b + SB_SLOT_SIZE - 4, gmtf_crc32c(0, b, SB_SLOT_SIZE - 4));
    }
}

/* A pack size below the block size (docs/format.md, "Block size"): pieces
 * of at most the pack size share frames of at most the pack size (in write
 * order: up to a block, cut by their cost, test_pack_cost); longer
 * pieces (files shorter than a block, tails) share frames of at most a
 * block among themselves; whole blocks have their own. Reads, truncation
 * and extension across blocks, remounts, fsck; the field kept by every
 * checkpoint; hostile values of it refused. */
static void test_pack_size(void **state)
{
    (void)state;
    enum { BS = 1u << 20, PS = 64u << 10, NF = 48 };
    rec_img *r = NULL;
    gmtf_fs *fs;
    gmtf_fs_info info;
    size_t len[NF];
    uint8_t *data[NF];
    uint64_t ino[NF];
    /* written in sort order (a mount's packing: long pieces alone), then in
     * write order (mkfs's: long pieces share frames); the second image goes
     * on below */
    for (int order = 0; order <= 1; order++) {
        rec_img *ri = mkfs_pack(BS, PS);
        gmtf_fs_options wo = {.threads = 1, .journal_bytes = 1u << 20, .pack_write_order = order};
        assert_int_equal(gmtf_fs_mount(rec_image_attach(ri), &wo, &fs), 0);
        assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
        assert_int_equal(info.block_size, BS);
        assert_int_equal(info.pack_size, PS);
        /* small files (some exactly a pack), files between a pack and a block,
     * a file of two whole blocks and a long tail, one of a block and a
     * short tail */
        for (int i = 0; i < NF; i++) {
            if (i < 36)
                len[i] = i % 9 == 0 ? PS : 3000 + (size_t)i * 1711;
            else if (i < 46)
                len[i] = PS + 1 + (size_t)(i - 36) * 97001; /* 64 KiB + 1 .. 937 KiB */
            else
                len[i] = i == 46 ? 2 * BS + 700001 : BS + 5000;
            if (!order)
                data[i] = malloc(len[i]);
            fill_words(data[i], len[i], (uint32_t)i + 1);
            char nm[16];
            snprintf(nm, sizeof nm, "f%02d", i);
            ino[i] = put_file(fs, nm, data[i], len[i]);
        }
        assert_int_equal(gmtf_fs_unmount(fs), 0);

        fs = mount_rec(ri, 1);
        assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
        assert_int_equal(info.pack_size, PS);
        uint32_t nfr = fs->nframes;
        uint8_t *kind = calloc(nfr, 1); /* 1 small pieces, 2 long pieces, 4 a whole block */
        unsigned *users = calloc(nfr, sizeof *users);
        for (int i = 0; i < NF; i++) {
            check_file(fs, ino[i], data[i], len[i]);
            struct inode *in = inode_get(fs, ino[i]);
            for (uint32_t k = 0; k < in->u.ext.n; k++) {
                struct fref *e = &in->u.ext.v[k];
                assert_true(e->frame > 0 && e->frame < nfr);
                kind[e->frame] |= e->len == BS ? 4 : e->len > PS ? 2 : 1;
                users[e->frame]++;
            }
        }
        unsigned shared_small = 0, shared_long = 0, wholes = 0;
        for (uint32_t id = 1; id < nfr; id++) {
            if (!kind[id])
                continue;
            /* one kind of piece a frame */
            assert_true(kind[id] == 1 || kind[id] == 2 || kind[id] == 4);
            uint32_t dlen = fs->frames[id].dlen;
            if (kind[id] == 1) /* mkfs's packs grow up to a block by their cost */
                assert_true(dlen <= (order ? BS : PS));
            else
                assert_true(dlen <= BS && dlen > PS);
            shared_small += kind[id] == 1 && users[id] > 1;
            shared_long += kind[id] == 2 && users[id] > 1;
            wholes += kind[id] == 4;
            if (kind[id] == 4)
                assert_int_equal(users[id], 1);
        }
        assert_true(shared_small > 2);
        if (order)
            assert_true(shared_long > 0);
        else
            assert_int_equal(shared_long, 0);
        assert_int_equal(wholes, 3);
        free(kind);
        free(users);
        assert_int_equal(gmtf_fs_unmount(fs), 0);
        if (order)
            r = ri;
        else
            rec_image_free(ri);
    }

    /* truncate into the first block of the long file, extend past its old
     * end, write beyond a hole; then read through remounts */
    fs = mount_rec(r, 0);
    int L = 46;
    size_t cut = BS / 2 + 777, ext = 3 * BS + 12345, at = 3 * BS;
    struct stat ns = {.st_size = (off_t)cut};
    assert_int_equal(gmtf_fs_setattr(fs, ino[L], &ns, GMTF_SET_SIZE, NULL), 0);
    ns.st_size = (off_t)ext;
    assert_int_equal(gmtf_fs_setattr(fs, ino[L], &ns, GMTF_SET_SIZE, NULL), 0);
    assert_int_equal(gmtf_fs_write(fs, ino[L], "tail bytes", 10, at), 10);
    uint8_t *want = calloc(ext, 1);
    memcpy(want, data[L], cut);
    memcpy(want + at, "tail bytes", 10);
    check_file(fs, ino[L], want, ext);
    /* the short-tailed file: cut to a whole block, then grown by a byte */
    ns.st_size = BS;
    assert_int_equal(gmtf_fs_setattr(fs, ino[47], &ns, GMTF_SET_SIZE, NULL), 0);
    assert_int_equal(gmtf_fs_write(fs, ino[47], "z", 1, BS), 1);
    uint8_t *w47 = malloc(BS + 1);
    memcpy(w47, data[47], BS);
    w47[BS] = 'z';
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    for (int ro = 0; ro < 2; ro++) {
        fs = mount_rec(r, ro);
        assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
        assert_int_equal(info.pack_size, PS);
        check_file(fs, ino[L], want, ext);
        check_file(fs, ino[47], w47, BS + 1);
        for (int i = 0; i < 46; i++)
            check_file(fs, ino[i], data[i], len[i]);
        assert_int_equal(gmtf_fs_unmount(fs), 0);
    }
    size_t ilen;
    const uint8_t *img0 = rec_image_data(r, &ilen);
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(img0, ilen, &mi), 0);
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = quiet};
    gmtf_fs_check_report rep;
    assert_int_equal(gmtf_fs_check(mi, &co, &rep), 0);
    assert_int_equal(rep.errors, 0);
    gmtf_image_close(mi);

    /* every slot with the field 0 (an image from before it): packs of up
     * to a block, the same bytes */
    uint8_t *copy = malloc(ilen);
    memcpy(copy, img0, ilen);
    patch_slots_pack(copy, ilen, 0);
    fs = mount_mem(copy, ilen, 1);
    assert_non_null(fs);
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    assert_int_equal(info.pack_size, BS);
    check_file(fs, ino[L], want, ext);
    check_file(fs, ino[3], data[3], len[3]);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    /* hostile values in every slot: no generation loads, nothing crashes */
    const uint32_t bad[] = {1, 4096, 65535, 3u << 17, 2 * BS, 1u << 31, 0xffffffffu};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        memcpy(copy, img0, ilen);
        patch_slots_pack(copy, ilen, bad[k]);
        assert_null(mount_mem(copy, ilen, 1));
        assert_int_equal(gmtf_image_open_mem(copy, ilen, &mi), 0);
        int rc = gmtf_fs_check(mi, &co, &rep);
        assert_true(rc < 0 || rep.errors > 0);
        gmtf_image_close(mi);
    }
    free(copy);
    free(want);
    free(w47);
    for (int i = 0; i < NF; i++)
        free(data[i]);
    rec_image_free(r);
}

/* r (mkfs_pack's) mounted in write order, as mkfs packs, with ns files of
 * small bytes then nl of lng bytes (fill_words, seed seed + i), f000,
 * f001, ...; their inodes in ino[]. Left mounted: the unmount packs them. */
static gmtf_fs *mount_filled(rec_img *r, uint64_t *ino, int ns, size_t small, int nl, size_t lng,
                             uint32_t seed)
{
    gmtf_fs_options wo = {.threads = 1, .journal_bytes = 1u << 20, .pack_write_order = 1};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &wo, &fs), 0);
    uint8_t *data = malloc(small > lng ? small : lng);
    assert_non_null(data);
    for (int i = 0; i < ns + nl; i++) {
        size_t len = i < ns ? small : lng;
        fill_words(data, len, seed + (uint32_t)i);
        char nm[16];
        snprintf(nm, sizeof nm, "f%03d", i);
        ino[i] = put_file(fs, nm, data, len);
    }
    free(data);
    return fs;
}

/* mkfs's packs (write order, a pack below the block) are cut by their
 * cost to a cold read of a random file (docs/format.md, "Pack size"): a
 * frame of small pieces closes when its pieces x bytes would pass the cap,
 * or its bytes a block. Many tiny pieces make small frames, a few larger
 * ones frames larger than the pack; none is over a block, and each closed
 * where the next piece would have broken the rule. */
static void test_pack_cost(void **state)
{
    (void)state;
    enum { BS = 1u << 20, PS = 64u << 10, NT = 300, TINY = 256, NL = 10, LONG = 40u << 10 };
    rec_img *r = mkfs_pack(BS, PS);
    uint64_t ino[NT + NL];
    gmtf_fs *fs = mount_filled(r, ino, NT, TINY, NL, LONG, 7);
    uint64_t cap = flush_pack_cost_cap(fs);
    assert_int_equal(cap, (uint64_t)FLUSH_PACK_COST_DEFAULT * PS * PS / (4u << 20));
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    fs = mount_rec(r, 1);
    uint32_t nfr = fs->nframes;
    unsigned *tiny = calloc(nfr, sizeof *tiny), *lng = calloc(nfr, sizeof *lng);
    for (int i = 0; i < NT + NL; i++) {
        struct inode *in = inode_get(fs, ino[i]);
        assert_int_equal(in->u.ext.n, 1);
        uint32_t id = in->u.ext.v[0].frame;
        assert_true(id > 0 && id < nfr);
        (i < NT ? tiny : lng)[id]++;
    }
    unsigned ftiny = 0, flong = 0, ntiny = 0, nlong = 0;
    for (uint32_t id = 1; id < nfr; id++) {
        unsigned n = tiny[id] + lng[id];
        if (!n)
            continue;
        assert_true(!tiny[id] || !lng[id]); /* written apart, cut apart */
        uint32_t dlen = fs->frames[id].dlen, len = tiny[id] ? TINY : LONG;
        assert_int_equal(dlen, n * len);
        assert_true(dlen <= BS);
        assert_true((uint64_t)n * dlen <= cap);
        ftiny += tiny[id] > 0;
        flong += lng[id] > 0;
        ntiny += tiny[id];
        nlong += lng[id];
        /* full: one piece more would have broken the rule (all but the
         * last frame of each kind) */
        int full = (uint64_t)(n + 1) * (dlen + len) > cap || dlen + len > BS;
        if (tiny[id] && ntiny < NT)
            assert_true(full);
        if (lng[id] && nlong < NL)
            assert_true(full);
        if (tiny[id])
            assert_true(dlen < PS / 4);
        if (lng[id] && nlong < NL)
            assert_true(dlen > PS);
    }
    assert_int_equal(ntiny, NT);
    assert_int_equal(nlong, NL);
    assert_true(ftiny > 4 && flong >= 2);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(tiny);
    free(lng);
    rec_image_free(r);
}

/* Frame id's entropy method: the first payload byte of a BWT frame (its
 * header's payload length at offset 12, docs/codec.md); 0 for others. */
static unsigned frame_method(gmtf_fs *fs, uint32_t id)
{
    uint32_t clen = fs->frames[id].clen;
    uint8_t *buf = malloc(clen);
    assert_non_null(buf);
    assert_int_equal(img_read(fs, buf, clen, fs->frames[id].off), 0);
    gmtf_frame_info fi;
    assert_int_equal(gmtf_frame_info_get(buf, clen, &fi), 0);
    uint32_t plen =
        buf[12] | (uint32_t)buf[13] << 8 | (uint32_t)buf[14] << 16 | (uint32_t)buf[15] << 24;
    assert_true(plen > 0 && plen < fi.frame_len);
    unsigned m = fi.method == GMTF_METHOD_BWT ? buf[fi.frame_len - plen] : 0;
    free(buf);
    return m;
}

/* mkfs's frames of pieces longer than the pack size take method 3 whatever
 * the method rule says (flush_pack_adaptive, gmtf_batch_encode_hint), its
 * packs of small pieces the rule's method: a pack of 24 small files (960,000
 * bytes: method 2 by the rule) and a frame of two files of 600,000 bytes
 * (1.2 MB, method 2 by the rule) that is method 3. */
static void test_pack_adaptive(void **state)
{
    (void)state;
    enum { BS = 2u << 20, PS = 512u << 10, NS = 24, SMALL = 40000, NL = 2, LONG = 600000 };
    rec_img *r = mkfs_pack(BS, PS);
    uint64_t ino[NS + NL];
    gmtf_fs *fs = mount_filled(r, ino, NS, SMALL, NL, LONG, 11);
    assert_int_equal(flush_pack_adaptive(fs), 1);
    /* the small pieces fit one pack: within the cost cap and the block */
    assert_true((uint64_t)NS * NS * SMALL <= flush_pack_cost_cap(fs) && NS * SMALL <= BS);
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    fs = mount_rec(r, 1);
    uint32_t small = inode_get(fs, ino[0])->u.ext.v[0].frame;
    uint32_t lng = inode_get(fs, ino[NS])->u.ext.v[0].frame;
    for (int i = 1; i < NS; i++)
        assert_int_equal(inode_get(fs, ino[i])->u.ext.v[0].frame, small);
    assert_int_equal(inode_get(fs, ino[NS + 1])->u.ext.v[0].frame, lng);
    assert_int_equal(fs->frames[small].dlen, NS * SMALL);
    assert_int_equal(fs->frames[lng].dlen, NL * LONG);
    assert_int_equal(frame_method(fs, small), 2);
    assert_int_equal(frame_method(fs, lng), 3);
    uint8_t *data = malloc(LONG);
    assert_non_null(data);
    fill_words(data, LONG, NS + NL - 1 + 11);
    check_file(fs, ino[NS + NL - 1], data, LONG);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(data);
    rec_image_free(r);
}

/* mkfs's pack size: the default is the smaller of GMTF_FS_PACK_DEFAULT and
 * the block size; a pack size larger than the block, or not a power of two
 * from 64 KiB, is refused. */
static void test_pack_size_options(void **state)
{
    (void)state;
    const struct {
        uint32_t bs, ps, want;
    } c[] = {{0, 0,
              GMTF_FS_PACK_DEFAULT < GMTF_FS_BLOCK_DEFAULT ? GMTF_FS_PACK_DEFAULT
                                                           : GMTF_FS_BLOCK_DEFAULT},
             {1u << 20, 0, 1u << 20},
             {GMTF_FS_BLOCK_MAX, 0, GMTF_FS_PACK_DEFAULT},
             {GMTF_FS_BLOCK_MAX, 64u << 10, 64u << 10},
             {2u << 20, 2u << 20, 2u << 20},
             {1u << 20, 2u << 20, 0},
             {1u << 20, 3u << 16, 0},
             {1u << 20, 32u << 10, 0}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        gmtf_image *img;
        assert_int_equal(gmtf_image_open_mem(NULL, 0, &img), 0);
        gmtf_mkfs_options mo = {.block_size = c[i].bs, .pack_size = c[i].ps};
        int rc = gmtf_fs_mkfs(img, &mo);
        if (!c[i].want) {
            assert_int_equal(rc, -EINVAL);
            gmtf_image_close(img);
            continue;
        }
        assert_int_equal(rc, 0);
        gmtf_fs_options o = {.read_only = 1, .threads = 1};
        gmtf_fs *fs;
        assert_int_equal(gmtf_fs_mount(img, &o, &fs), 0);
        gmtf_fs_info info;
        assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
        assert_int_equal(info.pack_size, c[i].want);
        assert_int_equal(info.block_size, c[i].bs ? c[i].bs : GMTF_FS_BLOCK_DEFAULT);
        assert_int_equal(gmtf_fs_unmount(fs), 0);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test by name (glob) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_superblock_roundtrip),    cmocka_unit_test(test_records_checked),
        cmocka_unit_test(test_damaged_images),          cmocka_unit_test(test_bad_frame_is_eio),
        cmocka_unit_test(test_damaged_pack_range_read), cmocka_unit_test(test_pack_size),
        cmocka_unit_test(test_pack_size_options),       cmocka_unit_test(test_pack_cost),
        cmocka_unit_test(test_pack_adaptive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
