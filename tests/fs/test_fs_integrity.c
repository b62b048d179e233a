/* Integrity: damaged metadata never yields a "clean" check over lost files,
 * a fallback to an older generation is reported and never repaired over,
 * an unreadable journal is an error, and repairs converge (issue
 * "Integrity", defects 1-4 and 9). Also: a read-write mount that only reads
 * leaves the image unchanged, and an image mkfs left incomplete is refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "fs_internal.h"
#include "fs_test_util.h"

#define ROOT GMTF_ROOT_INO
#define BS (64u << 10)
#define NF 16

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    if (getenv("GMTF_DEBUG"))
        fprintf(stderr, "log: %s\n", msg);
}

/* ---- a small tree with known contents ----------------------------------- */

typedef struct tree {
    char name[NF][16];
    uint8_t *data[NF];
    size_t len[NF];
} tree;

static void tree_make(tree *t)
{
    for (int i = 0; i < NF; i++) {
        snprintf(t->name[i], sizeof t->name[i], "f%02d%s", i, i % 3 ? ".c" : ".txt");
        t->len[i] = i % 4 == 0 ? (size_t)(150000 + i * 777) : (size_t)(300 + i * 911);
        t->data[i] = malloc(t->len[i]);
        fill_words(t->data[i], t->len[i], 100 + (uint32_t)i);
    }
}

static void tree_free(tree *t)
{
    for (int i = 0; i < NF; i++)
        free(t->data[i]);
}

static uint64_t write_file(gmtf_fs *fs, uint64_t dir, const char *name, const uint8_t *p, size_t n)
{
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, dir, name, 0644, 0, 0, 0, &e), 0);
    assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, p, n, 0), (long)n);
    assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    return e.attr.st_ino;
}

/* Files [from, to) in the root and in a subdirectory (made with the
 * first), a symlink, an xattr. */
static void tree_write_part(gmtf_fs *fs, const tree *t, int from, int to)
{
    gmtf_entry d;
    if (from == 0) {
        assert_int_equal(gmtf_fs_mkdir(fs, ROOT, "sub", 0755, 0, 0, &d), 0);
        gmtf_entry l;
        assert_int_equal(gmtf_fs_symlink(fs, ROOT, "link", "sub/f01.c", 0, 0, &l), 0);
        assert_int_equal(gmtf_fs_setxattr(fs, d.attr.st_ino, "user.k", "v", 1, 0), 0);
    } else {
        assert_int_equal(gmtf_fs_lookup(fs, ROOT, "sub", &d), 0);
    }
    for (int i = from; i < to; i++)
        write_file(fs, i % 2 ? d.attr.st_ino : ROOT, t->name[i], t->data[i], t->len[i]);
}

static void tree_write(gmtf_fs *fs, const tree *t)
{
    tree_write_part(fs, t, 0, NF);
}

typedef struct verdict {
    int present, exact, eio, wrong, missing;
} verdict;

/* Reads every file: present with exactly its bytes, or an I/O error (a
 * damaged data frame); never other bytes. */
static verdict tree_check(gmtf_fs *fs, const tree *t)
{
    verdict v = {0};
    gmtf_entry d;
    int sub = gmtf_fs_lookup(fs, ROOT, "sub", &d) == 0;
    for (int i = 0; i < NF; i++) {
        gmtf_entry e;
        if ((i % 2 && !sub) || gmtf_fs_lookup(fs, i % 2 ? d.attr.st_ino : ROOT, t->name[i], &e)) {
            v.missing++;
            continue;
        }
        v.present++;
        /* Read to the end: a damaged frame ends the bytes with EIO (after
         * a short read of the blocks before it). */
        uint8_t *b = malloc(t->len[i] + 1);
        size_t got = 0;
        long r = 1;
        while (r > 0 && got <= t->len[i]) {
            r = gmtf_fs_read(fs, e.attr.st_ino, b + got, t->len[i] + 1 - got, got);
            if (r > 0)
                got += (size_t)r;
        }
        if (memcmp(b, t->data[i], got < t->len[i] ? got : t->len[i]) || got > t->len[i] ||
            (r == 0 && got != t->len[i]) || (r < 0 && r != -EIO))
            v.wrong++;
        else if (r == -EIO)
            v.eio++;
        else
            v.exact++;
        free(b);
    }
    return v;
}

/* mkfs, the tree, a clean unmount: the image's bytes (caller frees). */
static uint8_t *tree_image(const tree *t, size_t *len)
{
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    tree_write(fs, t);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    const uint8_t *p = rec_image_data(r, len);
    uint8_t *copy = malloc(*len);
    memcpy(copy, p, *len);
    rec_image_free(r);
    return copy;
}

static int check_mem(const uint8_t *img, size_t len, int repair, gmtf_fs_check_report *rep,
                     uint8_t **after, size_t *after_len)
{
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(img, len, &mi), 0);
    gmtf_fs_check_options o = {.repair = repair, .threads = 1, .log = quiet};
    int rc = gmtf_fs_check(mi, &o, rep);
    if (after) {
        const uint8_t *p = gmtf_image_mem_data(mi, after_len);
        *after = malloc(*after_len ? *after_len : 1);
        memcpy(*after, p, *after_len);
    }
    gmtf_image_close(mi);
    return rc;
}

static int mount_mem_opts(const uint8_t *img, size_t len, int ro, gmtf_fs **fs)
{
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(img, len, &mi), 0);
    gmtf_fs_options o = {.read_only = ro, .threads = 1, .log = quiet};
    return gmtf_fs_mount(mi, &o, fs);
}

/* Half the tree in one session, the rest in a second that ends in a crash
 * right after syncfs: the newest state is a snapshot plus a journal, and
 * the generation before it holds only the first half. */
static uint8_t *tree_image_crashed(const tree *t, size_t *len)
{
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    tree_write_part(fs, t, 0, NF / 2);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 0);
    tree_write_part(fs, t, NF / 2, NF);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    const uint8_t *p = rec_image_data(r, len);
    uint8_t *copy = malloc(*len);
    memcpy(copy, p, *len);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
    return copy;
}

/* ---- any single damaged page --------------------------------------------- */

/* Damaging any one 4 KiB page of an image never gives a "clean" check with
 * fewer files than before; a repair (or its refusal) and a mount then
 * never lose a file or return other bytes. (Defect 1: two bytes in the
 * snapshot made fsck say "clean, 0 files" and repairs truncate the image.) */
static void test_any_page_damaged(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    size_t len;
    uint8_t *img = tree_image_crashed(&t, &len);
    size_t pages = (len + 4095) / 4096, fallbacks = 0, noticed = 0;
    uint8_t *bad = malloc(len);
    /* every page (every Nth under GMTF_TEST_SCALE: the sanitizer pass) */
    for (size_t pg = 0; pg < pages; pg += test_scale()) {
        for (int pattern = 0; pattern < 2; pattern++) {
            memcpy(bad, img, len);
            size_t off = pg * 4096, n = len - off < 4096 ? len - off : 4096;
            if (pattern == 0) {
                fill_pattern(bad + off, n, (uint32_t)pg); /* the whole page */
            } else {
                size_t at = off + (pg * 37) % n; /* two bytes, as in the report */
                bad[at] ^= 0xa5;
                if (at + 1 < len)
                    bad[at + 1] ^= 0x5a;
            }
            gmtf_fs_check_report rep;
            int rc = check_mem(bad, len, 0, &rep, NULL, NULL);
            if (rc == 0 && rep.errors == 0)
                assert_int_equal(rep.info.files, NF);
            if (rc || rep.errors)
                noticed++;
            /* Repair, then look at what it left. */
            uint8_t *fixed;
            size_t flen;
            rc = check_mem(bad, len, 1, &rep, &fixed, &flen);
            if (rc == 0 && rep.unrepairable) {
                fallbacks++;
                assert_int_equal(flen, len);
                assert_memory_equal(fixed, bad, len); /* nothing written */
            } else if (rc == 0) {
                gmtf_fs *fs;
                assert_int_equal(mount_mem_opts(fixed, flen, 1, &fs), 0);
                verdict v = tree_check(fs, &t);
                if (v.missing || v.wrong)
                    fprintf(stderr, "page %zu pattern %d: %d missing, %d wrong after repair\n", pg,
                            pattern, v.missing, v.wrong);
                assert_int_equal(v.missing, 0);
                assert_int_equal(v.wrong, 0);
                gmtf_fs_unmount(fs);
                /* The repair converged: a second check is clean. */
                gmtf_fs_check_report rep2;
                assert_int_equal(check_mem(fixed, flen, 0, &rep2, NULL, NULL), 0);
                if (rep2.errors)
                    fprintf(stderr, "page %zu pattern %d: %u errors after repair\n", pg, pattern,
                            rep2.errors);
                assert_int_equal(rep2.errors, 0);
            }
            free(fixed);
            /* A read-only mount of the damaged image: no file lost, no wrong byte. */
            gmtf_fs *fs;
            if (mount_mem_opts(bad, len, 1, &fs) == 0) {
                verdict v = tree_check(fs, &t);
                assert_int_equal(v.missing, 0);
                assert_int_equal(v.wrong, 0);
                gmtf_fs_unmount(fs);
            }
        }
    }
    fprintf(stderr, "# %zu pages, each damaged two ways: %zu noticed, %zu left unrepairable\n",
            pages, noticed, fallbacks);
    assert_int_equal(fallbacks, 0); /* one page never takes both copies of anything */
    free(bad);
    free(img);
    tree_free(&t);
}

/* ---- both snapshot copies of the newest generation damaged ---------------- */

static void newest_sb(const uint8_t *img, sb_info *out)
{
    memset(out, 0, sizeof *out);
    for (unsigned i = 0; i < SB_SLOTS; i++) {
        sb_info s;
        if (sb_decode(img + i * SB_SLOT_SIZE, &s) == 0 && s.gen > out->gen)
            *out = s;
    }
    assert_true(out->gen > 0);
}

static void test_fallback_reported(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    size_t len;
    uint8_t *img = tree_image(&t, &len);
    sb_info sb;
    newest_sb(img, &sb);
    assert_true(sb.snap2_off > 0);
    img[sb.snap_off + SNAP_HDR_SIZE + 10] ^= 0xff;
    img[sb.snap2_off + SNAP_HDR_SIZE + 10] ^= 0xff;
    gmtf_fs_check_report rep;
    assert_int_equal(check_mem(img, len, 0, &rep, NULL, NULL), 0);
    assert_true(rep.errors > 0); /* never "clean" */
    uint8_t *after;
    size_t alen;
    assert_int_equal(check_mem(img, len, 1, &rep, &after, &alen), 0);
    assert_true(rep.unrepairable);
    assert_int_equal(alen, len);
    assert_memory_equal(after, img, len); /* the repair wrote nothing */
    free(after);
    gmtf_fs *fs;
    assert_int_equal(mount_mem_opts(img, len, 0, &fs), -EUCLEAN); /* read-write: refused */
    assert_int_equal(mount_mem_opts(img, len, 1, &fs), 0);        /* read-only: the older state */
    verdict v = tree_check(fs, &t);
    assert_int_equal(v.wrong, 0);
    gmtf_fs_unmount(fs);
    free(img);
    tree_free(&t);
}

/* ---- the journal ------------------------------------------------------------ */

/* An image that fails reads touching [bad_off, bad_off + bad_len) and
 * [bad2_off, ...). */
typedef struct holey {
    gmtf_image *inner;
    uint64_t bad_off[2], bad_len[2];
} holey;

static int h_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    holey *h = ctx;
    for (int k = 0; k < 2; k++)
        if (h->bad_len[k] && off < h->bad_off[k] + h->bad_len[k] && off + n > h->bad_off[k])
            return -EIO;
    return h->inner->ops->pread(h->inner->ctx, buf, n, off);
}

static int h_size(void *ctx, uint64_t *size)
{
    holey *h = ctx;
    return h->inner->ops->size(h->inner->ctx, size);
}

static int h_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    holey *h = ctx;
    return h->inner->ops->pwrite(h->inner->ctx, buf, n, off);
}

static int h_flush(void *ctx)
{
    (void)ctx;
    return 0;
}

static int h_truncate(void *ctx, uint64_t size)
{
    holey *h = ctx;
    return h->inner->ops->truncate(h->inner->ctx, size);
}

static void h_close(void *ctx)
{
    holey *h = ctx;
    gmtf_image_close(h->inner);
    free(h);
}

static const gmtf_image_ops holey_ops = {.pread = h_pread,
                                         .pwrite = h_pwrite,
                                         .flush = h_flush,
                                         .size = h_size,
                                         .truncate = h_truncate,
                                         .close = h_close};

static int mount_holey(const uint8_t *img, size_t len, const uint64_t bad[2][2], int ro,
                       gmtf_fs **fs)
{
    holey *h = calloc(1, sizeof *h);
    assert_int_equal(gmtf_image_open_mem(img, len, &h->inner), 0);
    for (int k = 0; k < 2; k++) {
        h->bad_off[k] = bad[k][0];
        h->bad_len[k] = bad[k][1];
    }
    gmtf_image *gi = calloc(1, sizeof *gi);
    gi->ops = &holey_ops;
    gi->ctx = h;
    gmtf_fs_options o = {.read_only = ro, .threads = 1, .log = quiet};
    int rc = gmtf_fs_mount(gi, &o, fs);
    return rc;
}

/* Defect 2: a journal that cannot be read was skipped ("not replayed") and
 * the read-write mount then checkpointed: fsync'ed records gone. Now one
 * unreadable copy is served by the other, and both unreadable is an error. */
static void test_journal_unreadable(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t data[5000];
    fill_pattern(data, sizeof data, 9);
    uint64_t ino = write_file(fs, ROOT, "synced", data, sizeof data);
    assert_int_equal(gmtf_fs_fsync(fs, ino, 0), 0);
    /* The crash: the image as it is now, the records in the journal only. */
    size_t len;
    const uint8_t *p = rec_image_data(r, &len);
    uint8_t *img = malloc(len);
    memcpy(img, p, len);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
    sb_info sb;
    newest_sb(img, &sb);
    assert_true(sb.jrnl2_off > 0);
    uint64_t one[2][2] = {{sb.jrnl_off, sb.jrnl_len}, {0, 0}};
    uint64_t both[2][2] = {{sb.jrnl_off, sb.jrnl_len}, {sb.jrnl2_off, sb.jrnl_len}};
    /* One copy unreadable: the other has every record. */
    assert_int_equal(mount_holey(img, len, one, 1, &fs), 0);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "synced", &e), 0);
    uint8_t back[5000];
    assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, back, sizeof back, 0), (long)sizeof back);
    assert_memory_equal(back, data, sizeof data);
    gmtf_fs_unmount(fs);
    /* Both unreadable: never a read-write mount without the records (it
     * would checkpoint over them); read-only shows the generation before. */
    assert_int_not_equal(mount_holey(img, len, both, 0, &fs), 0);
    assert_int_equal(mount_holey(img, len, both, 1, &fs), 0);
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "synced", &e), -ENOENT);
    gmtf_fs_unmount(fs);
    free(img);
}

/* ---- crafted states --------------------------------------------------------- */

/* Runs change(fs) on a fresh filesystem with the tree, commits it, and
 * returns the image as a crash right then leaves it. */
static uint8_t *crashed_after(const tree *t, void (*change)(gmtf_fs *), size_t *len)
{
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    tree_write(fs, t);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    FS_WRLOCK(fs);
    change(fs);
    FS_UNLOCK(fs);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    const uint8_t *p = rec_image_data(r, len);
    uint8_t *img = malloc(*len);
    memcpy(img, p, *len);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
    return img;
}

/* Repairs img (-y), then checks that a second check is clean. */
static uint8_t *repair_converges(const uint8_t *img, size_t len, size_t *flen)
{
    gmtf_fs_check_report rep;
    uint8_t *fixed;
    assert_int_equal(check_mem(img, len, 1, &rep, &fixed, flen), 0);
    assert_false(rep.unrepairable);
    assert_true(rep.errors > 0);
    assert_int_equal(rep.fixed, rep.errors);
    assert_int_equal(check_mem(fixed, *flen, 0, &rep, NULL, NULL), 0);
    assert_int_equal(rep.errors, 0);
    return fixed;
}

static void root_nlink0(gmtf_fs *fs)
{
    struct inode *root = inode_get(fs, ROOT);
    root->nlink = 0;
    assert_int_equal(rec_inode(fs, root), 0);
}

/* Defect 3: root with link count 0 in the journal: fsck -y died (NULL
 * root), a read-write mount mounted a root that did not exist. */
static void test_root_link_count_zero(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    size_t len, flen;
    uint8_t *img = crashed_after(&t, root_nlink0, &len);
    gmtf_fs *fs;
    assert_int_equal(mount_mem_opts(img, len, 0, &fs), 0);
    struct stat st;
    assert_int_equal(gmtf_fs_getattr(fs, ROOT, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    verdict v = tree_check(fs, &t);
    assert_int_equal(v.exact, NF);
    gmtf_fs_unmount(fs);
    uint8_t *fixed = repair_converges(img, len, &flen);
    assert_int_equal(mount_mem_opts(fixed, flen, 1, &fs), 0);
    assert_int_equal(gmtf_fs_getattr(fs, ROOT, &st), 0);
    assert_true(st.st_nlink >= 2);
    v = tree_check(fs, &t);
    assert_int_equal(v.exact, NF);
    gmtf_fs_unmount(fs);
    free(fixed);
    free(img);
    tree_free(&t);
}

static void orphan_f00(gmtf_fs *fs)
{
    /* The name goes, the inode stays: unreachable from the root. */
    assert_int_equal(rec_ddel(fs, ROOT, "f00.txt", 7), 0);
}

/* Defect 4: fsck -y linked lost+found into itself (reachability was
 * computed before lost+found was made). */
static void test_orphan_to_lost_found(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    size_t len, flen;
    uint8_t *img = crashed_after(&t, orphan_f00, &len);
    uint8_t *fixed = repair_converges(img, len, &flen);
    gmtf_fs *fs;
    assert_int_equal(mount_mem_opts(fixed, flen, 1, &fs), 0);
    gmtf_entry lf, e;
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "lost+found", &lf), 0);
    char name[32];
    int found = 0;
    for (uint64_t ino = 2; ino < 64 && !found; ino++) {
        snprintf(name, sizeof name, "#%llu", (unsigned long long)ino);
        if (gmtf_fs_lookup(fs, lf.attr.st_ino, name, &e) == 0) {
            assert_int_not_equal(ino, lf.attr.st_ino); /* not itself */
            uint8_t *b = malloc(t.len[0]);
            assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, b, t.len[0], 0), (long)t.len[0]);
            assert_memory_equal(b, t.data[0], t.len[0]);
            free(b);
            found = 1;
        }
    }
    assert_true(found);
    snprintf(name, sizeof name, "#%llu", (unsigned long long)lf.attr.st_ino);
    assert_int_equal(gmtf_fs_lookup(fs, lf.attr.st_ino, name, &e), -ENOENT);
    gmtf_fs_unmount(fs);
    free(fixed);
    free(img);
    tree_free(&t);
}

static void map_past_size(gmtf_fs *fs)
{
    /* f04.c is 153108 bytes: 3 blocks of 64 KiB. Map its block 0's frame
     * again at block 5, past the size, and let its last block map a whole
     * block where the size leaves 22036 bytes. */
    gmtf_entry e;
    FS_UNLOCK(fs);
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "f04.c", &e), 0);
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, e.attr.st_ino);
    struct fref *b0 = blockmap_find(in, 0);
    assert_non_null(b0);
    struct fref f = *b0;
    assert_int_equal(rec_ext(fs, in->ino, 5, f.frame, f.off, f.len), 0);
    assert_int_equal(rec_ext(fs, in->ino, 2, f.frame, f.off, f.len), 0);
}

/* Defect 9: fsck -y reported "block mapped past the size (fixed)" and
 * changed nothing; growing the file later showed the stale bytes. */
static void test_mapped_past_size(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    size_t len, flen;
    uint8_t *img = crashed_after(&t, map_past_size, &len);
    uint8_t *fixed = repair_converges(img, len, &flen);
    rec_img *r = rec_image_new(fixed, flen);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, t.name[4], &e), 0);
    size_t n = t.len[4], big = 6 * BS;
    struct stat st = {.st_size = (off_t)big};
    assert_int_equal(gmtf_fs_setattr(fs, e.attr.st_ino, &st, GMTF_SET_SIZE, NULL), 0);
    uint8_t *b = malloc(big);
    assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, b, big, 0), (long)big);
    assert_memory_equal(b, t.data[4], 2 * BS); /* the first two blocks as written */
    for (size_t i = n; i < big; i++)
        if (b[i]) {
            fprintf(stderr, "byte %zu past the old size is %u\n", i, b[i]);
            fail();
        }
    free(b);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
    free(fixed);
    free(img);
    tree_free(&t);
}

/* ---- writes only when it must ------------------------------------------------ */

static void test_rw_mount_reading_changes_nothing(void **state)
{
    (void)state;
    tree t;
    tree_make(&t);
    size_t len;
    uint8_t *img = tree_image(&t, &len);
    rec_img *r = rec_image_new(img, len);
    gmtf_fs_options o = {.threads = 1, .flush_interval_ms = 20, .log = quiet};
    gmtf_fs *fs;
    r->recording = 1;
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &o, &fs), 0);
    verdict v = tree_check(fs, &t);
    assert_int_equal(v.exact, NF);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL); /* a few flusher rounds */
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t n;
    const uint8_t *after = rec_image_data(r, &n);
    assert_int_equal(n, len);
    assert_memory_equal(after, img, len);
    size_t writes = 0;
    for (size_t i = 0; i < r->n; i++)
        writes += r->log[i].data != NULL;
    assert_int_equal(writes, 0);
    rec_image_free(r);
    free(img);
    tree_free(&t);
}

/* Frame ids with gaps (a file deleted before a checkpoint) survive a
 * remount that writes no checkpoint: records written by the second session
 * name frames by the ids of the first. Found by test_fs_faults after the
 * merge of the dense frame table (ids were renumbered in order of
 * appearance at load, so a frame made after the remount took an id the
 * image already used: "2 metadata records could not be applied" and synced
 * files read as other files' bytes after a crash). */
static void test_remount_keeps_frame_ids(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    enum { N = 6, LEN = 5 * BS + 100 }; /* six frames a file */
    static uint8_t data[N + 1][LEN];
    _Static_assert(LEN > STAGE_MAX, "the new file must be flushed, not staged");
    uint64_t ino[N];
    char name[16];
    for (int i = 0; i < N; i++) { /* frames of their own */
        fill_pattern(data[i], LEN, 300 + (uint32_t)i);
        snprintf(name, sizeof name, "f%d", i);
        ino[i] = write_file(fs, ROOT, name, data[i], LEN);
        assert_int_equal(gmtf_fs_fsync(fs, ino[i], 0), 0);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 0);
    for (int i = 0; i < N - 1; i += 2) { /* gaps in the ids */
        snprintf(name, sizeof name, "f%d", i);
        assert_int_equal(gmtf_fs_unlink(fs, ROOT, name), 0);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    /* The second session: no replay, so no checkpoint at mount. Its new
     * frames take ids past the highest in use (the image's ids of f3 when
     * loading renumbered). */
    fs = mount_rec(r, 0);
    fill_pattern(data[N], LEN, 399);
    uint64_t n = write_file(fs, ROOT, "new", data[N], LEN);
    assert_int_equal(gmtf_fs_fsync(fs, n, 0), 0); /* over STAGE_MAX: frames */
    size_t len;
    const uint8_t *p = rec_image_data(r, &len);
    uint8_t *img = malloc(len);
    memcpy(img, p, len);
    gmtf_fs_unmount(fs);
    rec_image_free(r);
    /* The crash: the image as the fsync left it. */
    gmtf_fs_check_report rep;
    assert_int_equal(check_mem(img, len, 0, &rep, NULL, NULL), 0);
    assert_int_equal(rep.errors, 0);
    assert_int_equal(mount_mem_opts(img, len, 1, &fs), 0);
    uint8_t back[LEN];
    for (int i = 0; i <= N; i++) {
        if (i < N && i % 2 == 0)
            continue;
        gmtf_entry e;
        snprintf(name, sizeof name, i < N ? "f%d" : "new", i);
        assert_int_equal(gmtf_fs_lookup(fs, ROOT, name, &e), 0);
        assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, back, LEN, 0), LEN);
        assert_memory_equal(back, data[i], LEN);
    }
    gmtf_fs_unmount(fs);
    free(img);
}

/* An image mkfs marked incomplete is refused until mkfs_finish completes it. */
static void test_incomplete_image(void **state)
{
    (void)state;
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(NULL, 0, &mi), 0);
    gmtf_mkfs_options mo = {.block_size = BS, .incomplete = 1};
    assert_int_equal(gmtf_fs_mkfs(mi, &mo), 0);
    size_t len;
    const uint8_t *p = gmtf_image_mem_data(mi, &len);
    uint8_t *img = malloc(len);
    memcpy(img, p, len);
    gmtf_image_close(mi);
    gmtf_fs *fs;
    assert_int_equal(mount_mem_opts(img, len, 1, &fs), -EUCLEAN);
    gmtf_fs_check_report rep;
    assert_int_equal(check_mem(img, len, 0, &rep, NULL, NULL), 0);
    assert_true(rep.errors > 0);
    uint8_t *after;
    size_t alen;
    assert_int_equal(check_mem(img, len, 1, &rep, &after, &alen), 0);
    assert_true(rep.unrepairable);
    assert_memory_equal(after, img, len);
    free(after);
    /* mkfs --from finishes it. */
    rec_img *r = rec_image_new(img, len);
    gmtf_fs_options o = {.threads = 1, .mkfs_finish = 1, .log = quiet};
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &o, &fs), 0);
    write_file(fs, ROOT, "x", (const uint8_t *)"x", 1);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    p = rec_image_data(r, &len);
    assert_int_equal(mount_mem_opts(p, len, 1, &fs), 0);
    gmtf_fs_unmount(fs);
    assert_int_equal(check_mem(p, len, 0, &rep, NULL, NULL), 0);
    assert_int_equal(rep.errors, 0);
    rec_image_free(r);
    free(img);
}

/* ---- a full host -------------------------------------------------------------- */

/* A file image on a host of cap bytes: writes, growth and reservations past
 * it fail with ENOSPC, as on a full tmpfs (punching gives nothing back). */
typedef struct host {
    gmtf_image *inner;
    uint64_t cap;
} host;

static int c_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    host *h = ctx;
    uint64_t size;
    h->inner->ops->size(h->inner->ctx, &size);
    if (off + n > size && off + n > h->cap)
        return -ENOSPC;
    return h->inner->ops->pwrite(h->inner->ctx, buf, n, off);
}

static int c_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    host *h = ctx;
    return h->inner->ops->pread(h->inner->ctx, buf, n, off);
}

static int c_flush(void *ctx)
{
    (void)ctx;
    return 0;
}

static int c_size(void *ctx, uint64_t *size)
{
    host *h = ctx;
    return h->inner->ops->size(h->inner->ctx, size);
}

static int c_truncate(void *ctx, uint64_t size)
{
    host *h = ctx;
    if (size > h->cap)
        return -ENOSPC;
    return h->inner->ops->truncate(h->inner->ctx, size);
}

static int c_host_free(void *ctx, uint64_t *bytes)
{
    host *h = ctx;
    uint64_t size;
    h->inner->ops->size(h->inner->ctx, &size);
    *bytes = size < h->cap ? h->cap - size : 0;
    return 0;
}

static int c_reserve(void *ctx, uint64_t off, uint64_t len)
{
    host *h = ctx;
    if (off + len > h->cap)
        return -ENOSPC;
    return h->inner->ops->reserve(h->inner->ctx, off, len);
}

static void c_close(void *ctx)
{
    (void)ctx; /* the test owns the disk */
}

static const gmtf_image_ops host_ops = {.pread = c_pread,
                                        .pwrite = c_pwrite,
                                        .flush = c_flush,
                                        .size = c_size,
                                        .truncate = c_truncate,
                                        .host_free = c_host_free,
                                        .close = c_close,
                                        .reserve = c_reserve};

static gmtf_fs *host_mount(host *h, int ro)
{
    gmtf_image *gi = calloc(1, sizeof *gi);
    gi->ops = &host_ops;
    gi->ctx = h;
    gmtf_fs_options o = {.read_only = ro, .threads = 1, .log = quiet};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(gi, &o, &fs), 0);
    return fs;
}

static host *host_new(uint64_t cap)
{
    host *h = calloc(1, sizeof *h);
    h->cap = cap;
    assert_int_equal(gmtf_image_open_mem(NULL, 0, &h->inner), 0);
    gmtf_image gi = {.ops = &host_ops, .ctx = h};
    gmtf_mkfs_options mo = {.block_size = BS};
    assert_int_equal(gmtf_fs_mkfs(&gi, &mo), 0);
    return h;
}

static int host_check_clean(host *h)
{
    size_t len;
    const uint8_t *p = gmtf_image_mem_data(h->inner, &len);
    gmtf_fs_check_report rep;
    assert_int_equal(check_mem(p, len, 0, &rep, NULL, NULL), 0);
    return (int)rep.errors;
}

/* Defect 7: on a full host, fsync returned ENOSPC (right), but after
 * deleting every file even a 1000-byte fsync failed, unmount failed and
 * the deletes came back (the journal was a sparse hole on the host, and
 * commits waited on the data flush). */

static void test_full_host_deletes_commit(void **state)
{
    (void)state;
    host *h = host_new(24u << 20);
    gmtf_fs *fs = host_mount(h, 0);
    size_t n = 1u << 20;
    uint8_t *p = malloc(n);
    int made = 0, refused = 0;
    /* until the host is full and three writers more were refused */
    for (int i = 0; i < 60 && refused < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "big%02d", i);
        gmtf_entry e;
        assert_int_equal(gmtf_fs_create(fs, ROOT, name, 0644, 0, 0, 0, &e), 0);
        fill_noise(p, n, 500 + (uint64_t)i); /* incompressible: stored raw */
        long w = gmtf_fs_write(fs, e.attr.st_ino, p, n, 0);
        int rc = w == (long)n ? gmtf_fs_fsync(fs, e.attr.st_ino, 0) : (int)w;
        assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
        if (rc == 0) {
            made++;
        } else {
            assert_int_equal(rc, -ENOSPC);
            refused++;
        }
    }
    fprintf(stderr, "# 24 MiB host: %d files of 1 MiB stored, %d refused (ENOSPC)\n", made,
            refused);
    assert_true(made > 5 && refused > 0);
    for (int i = 0; i < 60; i++) {
        char name[16];
        snprintf(name, sizeof name, "big%02d", i);
        int rc = gmtf_fs_unlink(fs, ROOT, name);
        assert_true(rc == 0 || rc == -ENOENT);
    }
    uint8_t small[1000];
    fill_pattern(small, sizeof small, 7);
    uint64_t ino = write_file(fs, ROOT, "small", small, sizeof small);
    assert_int_equal(gmtf_fs_fsync(fs, ino, 0), 0);
    /* Space comes back: a file as large as the ones refused fits again. */
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "again", 0644, 0, 0, 0, &e), 0);
    assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, p, n, 0), (long)n);
    assert_int_equal(gmtf_fs_fsync(fs, e.attr.st_ino, 0), 0);
    assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = host_mount(h, 1);
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "big00", &e), -ENOENT); /* deletes stayed */
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "small", &e), 0);
    uint8_t back[1000];
    assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, back, sizeof back, 0), (long)sizeof back);
    assert_memory_equal(back, small, sizeof small);
    gmtf_fs_unmount(fs);
    assert_int_equal(host_check_clean(h), 0);
    free(p);
    gmtf_image_close(h->inner);
    free(h);
}

/* Defect 8: a copy of 20 MiB onto a host with 3 MiB: every write was
 * accepted (cp exited 0), and after unmount the file read as zeros or was
 * gone, fsck clean. Now the writer gets ENOSPC, and what it was told is
 * written is there after unmount. */
static void test_full_host_write_refused(void **state)
{
    (void)state;
    host *h = host_new(3u << 20);
    gmtf_fs *fs = host_mount(h, 0);
    size_t chunk = 128u << 10, total = 20u << 20, done = 0;
    uint8_t *p = malloc(total);
    fill_pattern(p, total, 77);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "copy", 0644, 0, 0, 0, &e), 0);
    long w = 0;
    while (done < total && (w = gmtf_fs_write(fs, e.attr.st_ino, p + done, chunk, done)) > 0)
        done += (size_t)w;
    fprintf(stderr, "# 3 MiB host: %zu of %zu bytes accepted, then %ld\n", done, total, w);
    assert_int_equal(w, -ENOSPC);
    assert_true(done > 0 && done < total);
    assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = host_mount(h, 1);
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "copy", &e), 0);
    uint8_t *b = malloc(done);
    size_t got = 0;
    long r;
    while (got < done && (r = gmtf_fs_read(fs, e.attr.st_ino, b + got, done - got, got)) > 0)
        got += (size_t)r;
    assert_int_equal(got, done); /* every accepted byte, none lost to zeros */
    assert_memory_equal(b, p, done);
    free(b);
    gmtf_fs_unmount(fs);
    assert_int_equal(host_check_clean(h), 0);
    free(p);
    gmtf_image_close(h->inner);
    free(h);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]); /* one test by name (glob) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_any_page_damaged),
        cmocka_unit_test(test_fallback_reported),
        cmocka_unit_test(test_journal_unreadable),
        cmocka_unit_test(test_root_link_count_zero),
        cmocka_unit_test(test_orphan_to_lost_found),
        cmocka_unit_test(test_mapped_past_size),
        cmocka_unit_test(test_rw_mount_reading_changes_nothing),
        cmocka_unit_test(test_remount_keeps_frame_ids),
        cmocka_unit_test(test_incomplete_image),
        cmocka_unit_test(test_full_host_deletes_commit),
        cmocka_unit_test(test_full_host_write_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
