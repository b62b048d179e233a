/* Operations through the public API on memory images: names, data,
 * attributes, xattrs, holes, persistence across unmount and mount. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs_test_util.h"

#define ROOT GMTF_ROOT_INO
#define BS (64u << 10)

static uint64_t mkfile(gmtf_fs *fs, uint64_t dir, const char *name, const void *data, size_t n)
{
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, dir, name, 0644, 0, 0, 0, &e), 0);
    if (n)
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, data, n, 0), (long)n);
    assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    return e.attr.st_ino;
}

static uint64_t ino_of(gmtf_fs *fs, uint64_t dir, const char *name)
{
    gmtf_entry e;
    int rc = gmtf_fs_lookup(fs, dir, name, &e);
    return rc ? 0 : e.attr.st_ino;
}

static void check_file(gmtf_fs *fs, uint64_t ino, const uint8_t *want, size_t n)
{
    struct stat st;
    assert_int_equal(gmtf_fs_getattr(fs, ino, &st), 0);
    assert_int_equal((size_t)st.st_size, n);
    uint8_t *got = malloc(n + 10);
    assert_int_equal(gmtf_fs_read(fs, ino, got, n + 10, 0), (long)n);
    assert_memory_equal(got, want, n);
    free(got);
}

static void test_data_persists(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    assert_non_null(r);
    gmtf_fs *fs = mount_rec(r, 0);
    assert_non_null(fs);
    size_t big = 5 * BS + 1234;
    uint8_t *a = malloc(big), *b = malloc(300);
    fill_pattern(a, big, 1);
    fill_pattern(b, 300, 2);
    uint64_t ia = mkfile(fs, ROOT, "big.txt", a, big);
    uint64_t ib = mkfile(fs, ROOT, "small.c", b, 300);
    mkfile(fs, ROOT, "empty", NULL, 0);
    check_file(fs, ia, a, big); /* from the write-back cache */
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    check_file(fs, ia, a, big); /* from frames */
    check_file(fs, ib, b, 300);
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    fs = mount_rec(r, 1);
    assert_non_null(fs);
    check_file(fs, ino_of(fs, ROOT, "big.txt"), a, big);
    check_file(fs, ino_of(fs, ROOT, "small.c"), b, 300);
    assert_int_not_equal(ino_of(fs, ROOT, "empty"), 0);
    assert_int_equal(gmtf_fs_write(fs, ia, a, 1, 0), -EROFS);
    gmtf_fs_info info;
    gmtf_fs_get_info(fs, &info);
    assert_int_equal(info.files, 3);
    assert_true(info.stored_bytes < big / 2); /* the pattern compresses */
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(a);
    free(b);
    rec_image_free(r);
}

static void test_overwrite_offsets(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    size_t n = 3 * BS;
    uint8_t *m = calloc(1, n), *p = malloc(BS);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "f", 0600, 0, 0, 0, &e), 0);
    uint64_t ino = e.attr.st_ino;
    /* unaligned writes across block edges, with syncs in between */
    for (int i = 0; i < 40; i++) {
        size_t off = (size_t)(i * 7919) % (n - 5000), len = 1 + (size_t)(i * 104729) % 5000;
        fill_pattern(p, len, (uint32_t)i + 10);
        memcpy(m + off, p, len);
        assert_int_equal(gmtf_fs_write(fs, ino, p, len, off), (long)len);
        if (i % 7 == 0)
            assert_int_equal(gmtf_fs_fsync(fs, ino, i & 1), 0);
        if (i % 13 == 0)
            assert_int_equal(gmtf_fs_syncfs(fs), 0);
    }
    struct stat st;
    gmtf_fs_getattr(fs, ino, &st);
    size_t size = (size_t)st.st_size;
    check_file(fs, ino, m, size);
    gmtf_fs_release(fs, ino);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 0);
    check_file(fs, ino, m, size);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(m);
    free(p);
    rec_image_free(r);
}

/* Writes that leave gaps in a dirty block, before and after the bytes
 * already there, and that grow its buffer: the gaps read as zeros (the
 * buffer's new bytes are zeroed but for the write's own), from the cache
 * and once flushed. */
static void test_write_gaps_zero(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "gaps", 0644, 0, 0, 0, &e), 0);
    uint64_t ino = e.attr.st_ino;
    uint8_t x[64], *buf = malloc(BS);
    assert_non_null(buf);
    memset(x, 'x', sizeof x);
    const uint32_t at[] = {5000, 40000, 100, 20000, BS - 64}; /* new, grows, under, gaps */
    for (int pass = 0; pass < 2; pass++) {
        if (pass) /* the last writes into a fresh block of the flushed file */
            assert_int_equal(gmtf_fs_syncfs(fs), 0);
        for (size_t k = 0; k < sizeof at / sizeof *at; k++)
            assert_int_equal(gmtf_fs_write(fs, ino, x, sizeof x, (uint64_t)pass * BS + at[k]),
                             (long)sizeof x);
        assert_int_equal(gmtf_fs_read(fs, ino, buf, BS, (uint64_t)pass * BS), (long)BS);
        for (uint32_t i = 0; i < BS; i++) {
            int in = 0;
            for (size_t k = 0; k < sizeof at / sizeof *at; k++)
                in |= i >= at[k] && i < at[k] + sizeof x;
            assert_int_equal(buf[i], in ? 'x' : 0);
        }
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    assert_int_equal(gmtf_fs_read(fs, ino, buf, BS, 0), (long)BS);
    for (uint32_t i = 0; i < 5000; i++)
        assert_int_equal(buf[i], i >= 100 && i < 164 ? 'x' : 0);
    free(buf);
    gmtf_fs_release(fs, ino);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    rec_image_free(r);
}

static void test_holes_truncate_seek(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t x[100];
    memset(x, 'x', sizeof x);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "sparse", 0644, 0, 0, 0, &e), 0);
    uint64_t ino = e.attr.st_ino;
    uint64_t far = 5ull << 30; /* past 4 GiB */
    assert_int_equal(gmtf_fs_write(fs, ino, x, 100, far), 100);
    assert_int_equal(gmtf_fs_write(fs, ino, x, 100, 10), 100);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    assert_int_equal(gmtf_fs_lseek(fs, ino, 0, SEEK_DATA), 0);
    assert_int_equal(gmtf_fs_lseek(fs, ino, 0, SEEK_HOLE), BS);
    assert_int_equal(gmtf_fs_lseek(fs, ino, BS, SEEK_DATA), (int64_t)(far / BS * BS));
    assert_int_equal(gmtf_fs_lseek(fs, ino, (int64_t)far + 100, SEEK_DATA), -ENXIO);
    uint8_t buf[300];
    assert_int_equal(gmtf_fs_read(fs, ino, buf, 300, far - 100), 200);
    for (int i = 0; i < 100; i++)
        assert_int_equal(buf[i], 0);
    assert_memory_equal(buf + 100, x, 100);
    struct stat st;
    gmtf_fs_getattr(fs, ino, &st);
    assert_int_equal(st.st_size, (off_t)far + 100);
    assert_true(st.st_blocks < 100); /* sparse: almost nothing stored */
    /* truncate inside data, extend again: the cut bytes read as zeros */
    struct stat ns = {.st_size = 50};
    assert_int_equal(gmtf_fs_setattr(fs, ino, &ns, GMTF_SET_SIZE, NULL), 0);
    ns.st_size = 200;
    assert_int_equal(gmtf_fs_setattr(fs, ino, &ns, GMTF_SET_SIZE, NULL), 0);
    assert_int_equal(gmtf_fs_read(fs, ino, buf, 300, 0), 200);
    assert_memory_equal(buf + 10, x, 40);
    for (int i = 50; i < 200; i++)
        assert_int_equal(buf[i], 0);
    /* punch a hole in a whole block and in part of one */
    uint8_t *blk = malloc(3 * BS);
    memset(blk, 'y', 3 * BS);
    assert_int_equal(gmtf_fs_write(fs, ino, blk, 3 * BS, 0), 3 * BS);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    assert_int_equal(gmtf_fs_fallocate(fs, ino, GMTF_FALLOC_PUNCH_HOLE | GMTF_FALLOC_KEEP_SIZE,
                                       BS - 10, BS + 20),
                     0);
    assert_int_equal(gmtf_fs_read(fs, ino, blk, 3 * BS, 0), 3 * BS);
    for (size_t i = 0; i < 3 * BS; i++)
        assert_int_equal(blk[i], (i >= BS - 10 && i < 2 * BS + 10) ? 0 : 'y');
    assert_int_equal(gmtf_fs_lseek(fs, ino, BS, SEEK_DATA), 2 * BS); /* block 1 is a hole */
    assert_int_equal(gmtf_fs_fallocate(fs, ino, 0, 0, 10 * BS), 0);
    gmtf_fs_getattr(fs, ino, &st);
    assert_int_equal(st.st_size, 10 * BS);
    gmtf_fs_release(fs, ino);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 1);
    assert_int_equal(gmtf_fs_read(fs, ino, blk, 3 * BS, 0), 3 * BS);
    for (size_t i = 0; i < 3 * BS; i++)
        assert_int_equal(blk[i], (i >= BS - 10 && i < 2 * BS + 10) ? 0 : 'y');
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(blk);
    rec_image_free(r);
}

struct dl {
    char names[64][32];
    uint64_t offs[64];
    int n, max;
};

static int collect(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)st;
    struct dl *d = arg;
    if (d->n >= d->max)
        return 1;
    snprintf(d->names[d->n], 32, "%s", name);
    d->offs[d->n++] = next;
    return 0;
}

static int listed(struct dl *d, const char *name)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->names[i], name))
            return 1;
    return 0;
}

static void test_namespace(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e, d1, d2;
    assert_int_equal(gmtf_fs_mkdir(fs, ROOT, "d1", 0755, 1, 2, &d1), 0);
    assert_int_equal(gmtf_fs_mkdir(fs, d1.attr.st_ino, "d2", 0700, 0, 0, &d2), 0);
    assert_int_equal(gmtf_fs_mkdir(fs, ROOT, "d1", 0755, 0, 0, &e), -EEXIST);
    uint64_t f = mkfile(fs, d1.attr.st_ino, "f", "hello", 5);
    assert_int_equal(gmtf_fs_link(fs, f, ROOT, "hard", &e), 0);
    assert_int_equal(e.attr.st_nlink, 2);
    assert_int_equal(gmtf_fs_symlink(fs, ROOT, "sym", "d1/f", 0, 0, &e), 0);
    char t[64];
    assert_int_equal(gmtf_fs_readlink(fs, e.attr.st_ino, t, sizeof t), 4);
    assert_memory_equal(t, "d1/f", 4);
    assert_int_equal(gmtf_fs_mknod(fs, ROOT, "fifo", S_IFIFO | 0600, 0, 0, 0, &e), 0);
    assert_int_equal(gmtf_fs_mknod(fs, ROOT, "null", S_IFCHR | 0666, makedev(1, 3), 0, 0, &e), 0);
    assert_int_equal(e.attr.st_rdev, makedev(1, 3));
    struct stat st;
    gmtf_fs_getattr(fs, ROOT, &st);
    assert_int_equal(st.st_nlink, 3);
    /* rename: into own subtree refused, NOREPLACE, EXCHANGE, replace */
    assert_int_equal(gmtf_fs_rename(fs, ROOT, "d1", d2.attr.st_ino, "x", 0), -EINVAL);
    assert_int_equal(gmtf_fs_rename(fs, ROOT, "hard", ROOT, "sym", GMTF_RENAME_NOREPLACE), -EEXIST);
    assert_int_equal(gmtf_fs_rename(fs, ROOT, "hard", ROOT, "sym", GMTF_RENAME_EXCHANGE), 0);
    assert_int_equal(ino_of(fs, ROOT, "sym"), f);
    assert_int_equal(gmtf_fs_rename(fs, ROOT, "hard", ROOT, "fifo", 0),
                     0); /* hard is the symlink now */
    assert_int_equal(ino_of(fs, ROOT, "hard"), 0);
    assert_int_equal(gmtf_fs_rename(fs, d1.attr.st_ino, "d2", ROOT, "d2", 0), 0);
    gmtf_fs_getattr(fs, d1.attr.st_ino, &st);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(gmtf_fs_lookup(fs, d2.attr.st_ino, "..", &e), 0);
    assert_int_equal(e.attr.st_ino, ROOT);
    assert_int_equal(gmtf_fs_rmdir(fs, ROOT, "d1"), -ENOTEMPTY);
    assert_int_equal(gmtf_fs_unlink(fs, ROOT, "d1"), -EISDIR);
    assert_int_equal(gmtf_fs_unlink(fs, d1.attr.st_ino, "f"), 0);
    assert_int_equal(gmtf_fs_rmdir(fs, ROOT, "d1"), 0);
    gmtf_fs_getattr(fs, f, &st);
    assert_int_equal(st.st_nlink, 1);
    /* readdir with offsets stable under deletes */
    for (int i = 0; i < 20; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "n%02d", i);
        mkfile(fs, d2.attr.st_ino, nm, nm, 3);
    }
    struct dl a = {.max = 7};
    assert_int_equal(gmtf_fs_readdir(fs, d2.attr.st_ino, 0, collect, &a), 0);
    assert_int_equal(a.n, 7);
    assert_string_equal(a.names[0], ".");
    assert_int_equal(gmtf_fs_unlink(fs, d2.attr.st_ino, "n03"), 0); /* already listed */
    assert_int_equal(gmtf_fs_unlink(fs, d2.attr.st_ino, "n10"), 0); /* not yet listed */
    struct dl b = {.max = 64};
    assert_int_equal(gmtf_fs_readdir(fs, d2.attr.st_ino, a.offs[6], collect, &b), 0);
    assert_int_equal(a.n + b.n, 22 - 1);
    assert_false(listed(&b, "n10"));
    assert_true(listed(&b, "n19"));
    assert_false(listed(&b, "n04")); /* no repeats */
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    fs = mount_rec(r, 1);
    assert_int_equal(ino_of(fs, ROOT, "sym"), f);
    assert_int_equal(ino_of(fs, ROOT, "d1"), 0);
    struct dl c = {.max = 64};
    assert_int_equal(gmtf_fs_readdir(fs, ino_of(fs, ROOT, "d2"), 0, collect, &c), 0);
    assert_int_equal(c.n, 20);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    rec_image_free(r);
}

static void test_attrs_xattrs(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint64_t f = mkfile(fs, ROOT, "f", "abc", 3);
    struct stat st = {.st_mode = 04711, .st_uid = 1000, .st_gid = 100};
    st.st_atim.tv_sec = 1000000000;
    st.st_atim.tv_nsec = 123456789;
    st.st_mtim.tv_sec = -5; /* before 1970 */
    st.st_mtim.tv_nsec = 999999999;
    assert_int_equal(gmtf_fs_setattr(fs, f, &st,
                                     GMTF_SET_MODE | GMTF_SET_UID | GMTF_SET_GID | GMTF_SET_ATIME |
                                         GMTF_SET_MTIME,
                                     NULL),
                     0);
    assert_int_equal(gmtf_fs_setxattr(fs, f, "user.a", "1", 1, 0), 0);
    assert_int_equal(gmtf_fs_setxattr(fs, f, "user.b", "", 0, 0), 0);
    assert_int_equal(gmtf_fs_setxattr(fs, f, "user.a", "2", 1, GMTF_XATTR_CREATE), -EEXIST);
    assert_int_equal(gmtf_fs_setxattr(fs, f, "user.c", "2", 1, GMTF_XATTR_REPLACE), -ENODATA);
    assert_int_equal(gmtf_fs_setxattr(fs, f, "security.selinux", "ctx", 3, 0), 0);
    assert_int_equal(gmtf_fs_setxattr(fs, f, "user.a", "22", 2, GMTF_XATTR_REPLACE), 0);
    assert_int_equal(gmtf_fs_removexattr(fs, f, "user.b"), 0);
    assert_int_equal(gmtf_fs_removexattr(fs, f, "user.b"), -ENODATA);
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    fs = mount_rec(r, 1);
    assert_int_equal(gmtf_fs_getattr(fs, f, &st), 0);
    assert_int_equal(st.st_mode, S_IFREG | 04711);
    assert_int_equal(st.st_uid, 1000);
    assert_int_equal(st.st_gid, 100);
    assert_int_equal(st.st_atim.tv_sec, 1000000000);
    assert_int_equal(st.st_atim.tv_nsec, 123456789);
    assert_int_equal(st.st_mtim.tv_sec, -5);
    assert_int_equal(st.st_mtim.tv_nsec, 999999999);
    char v[16], list[64];
    assert_int_equal(gmtf_fs_getxattr(fs, f, "user.a", NULL, 0), 2);
    assert_int_equal(gmtf_fs_getxattr(fs, f, "user.a", v, 1), -ERANGE);
    assert_int_equal(gmtf_fs_getxattr(fs, f, "user.a", v, sizeof v), 2);
    assert_memory_equal(v, "22", 2);
    long n = gmtf_fs_listxattr(fs, f, list, sizeof list);
    assert_int_equal(n, (long)(strlen("security.selinux") + 1 + strlen("user.a") + 1));
    assert_int_equal(gmtf_fs_getxattr(fs, f, "user.b", v, sizeof v), -ENODATA);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    rec_image_free(r);
}

/* A plain write stamps mtime/ctime and drops setuid/setgid; with
 * GMTF_WRITE_KEEP_ATTRS (the FUSE writeback cache's deferred writes) only
 * the size moves. Both survive a remount. */
static void test_write_keep_attrs(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint64_t f = mkfile(fs, ROOT, "f", "abc", 3), g = mkfile(fs, ROOT, "g", "abc", 3);
    struct stat st = {.st_mode = 06755};
    st.st_mtim.tv_sec = 1000;
    st.st_mtim.tv_nsec = 5;
    st.st_ctim = st.st_mtim;
    unsigned set = GMTF_SET_MODE | GMTF_SET_MTIME | GMTF_SET_CTIME;
    assert_int_equal(gmtf_fs_setattr(fs, f, &st, set, NULL), 0);
    assert_int_equal(gmtf_fs_setattr(fs, g, &st, set, NULL), 0);
    assert_int_equal(gmtf_fs_write_flags(fs, f, "xyzw", 4, 2, GMTF_WRITE_KEEP_ATTRS), 4);
    assert_int_equal(gmtf_fs_write_flags(fs, g, "xyzw", 4, 2, 0), 4);
    assert_int_equal(gmtf_fs_write_flags(fs, g, "x", 1, 0, 0x80), -EINVAL);
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    fs = mount_rec(r, 1);
    assert_int_equal(gmtf_fs_getattr(fs, f, &st), 0);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(st.st_mode, S_IFREG | 06755);
    assert_int_equal(st.st_mtim.tv_sec, 1000);
    assert_int_equal(st.st_mtim.tv_nsec, 5);
    assert_int_equal(st.st_ctim.tv_sec, 1000);
    check_file(fs, f, (const uint8_t *)"abxyzw", 6);
    assert_int_equal(gmtf_fs_getattr(fs, g, &st), 0);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(st.st_mode, S_IFREG | 0755);
    assert_true(st.st_mtim.tv_sec > 1000);
    assert_true(st.st_ctim.tv_sec > 1000);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    rec_image_free(r);
}

static void test_unlinked_open(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "tmp", 0600, 0, 0, 0, &e), 0);
    uint64_t ino = e.attr.st_ino;
    assert_int_equal(gmtf_fs_write(fs, ino, "data", 4, 0), 4);
    assert_int_equal(gmtf_fs_unlink(fs, ROOT, "tmp"), 0);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    char b[8];
    assert_int_equal(gmtf_fs_read(fs, ino, b, 8, 0), 4); /* still readable while open */
    assert_memory_equal(b, "data", 4);
    assert_int_equal(gmtf_fs_release(fs, ino), 0);
    struct stat st;
    assert_int_equal(gmtf_fs_getattr(fs, ino, &st), -ENOENT);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    rec_image_free(r);
}

static void test_space_reuse(void **state)
{
    (void)state;
    /* capacity just above one copy of the data: deleting must make room */
    rec_img *r = mkfs_rec(BS, 6u << 20);
    gmtf_fs *fs = mount_rec(r, 0);
    size_t n = 3u << 20;
    uint8_t *p = malloc(n);
    srand(7);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rand(); /* incompressible */
    for (int round = 0; round < 4; round++) {
        uint64_t ino = mkfile(fs, ROOT, "blob", p, n);
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
        check_file(fs, ino, p, n);
        struct statvfs sv;
        gmtf_fs_statfs(fs, &sv);
        assert_true(sv.f_bfree * sv.f_frsize < (3u << 20));
        assert_int_equal(gmtf_fs_unlink(fs, ROOT, "blob"), 0);
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
        gmtf_fs_statfs(fs, &sv);
        assert_true(sv.f_bfree * sv.f_frsize > (4u << 20));
    }
    /* too much data: ENOSPC to the writer (or at the latest at sync), and
     * the fs stays usable */
    uint64_t a = mkfile(fs, ROOT, "a", p, n);
    (void)a;
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, "b", 0644, 0, 0, 0, &e), 0);
    long w = gmtf_fs_write(fs, e.attr.st_ino, p + 1, n - 1, 0); /* not a duplicate */
    assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    if (w >= 0) {
        assert_int_equal(w, n - 1);
        assert_int_equal(gmtf_fs_syncfs(fs), -ENOSPC);
    } else {
        assert_int_equal(w, -ENOSPC);
    }
    assert_int_equal(gmtf_fs_unlink(fs, ROOT, "b"), 0);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 1);
    check_file(fs, ino_of(fs, ROOT, "a"), p, n);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(p);
    rec_image_free(r);
}

static void test_dedup_and_packing(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t *p = malloc(2 * BS);
    srand(9);
    for (size_t i = 0; i < 2 * BS; i++)
        p[i] = (uint8_t)rand();
    uint64_t a = mkfile(fs, ROOT, "a", p, 2 * BS);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    gmtf_fs_info i1, i2;
    gmtf_fs_get_info(fs, &i1);
    uint64_t b = mkfile(fs, ROOT, "b", p, 2 * BS); /* identical content */
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    gmtf_fs_get_info(fs, &i2);
    assert_int_equal(i2.stored_bytes, i1.stored_bytes); /* stored once */
    /* writing one copy leaves the other intact */
    assert_int_equal(gmtf_fs_write(fs, b, "zz", 2, 5), 2);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    check_file(fs, a, p, 2 * BS);
    /* many small files share frames */
    gmtf_fs_get_info(fs, &i1);
    for (int i = 0; i < 50; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "s%d.txt", i);
        mkfile(fs, ROOT, nm, p + i * 100, 100 + (size_t)i);
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    gmtf_fs_get_info(fs, &i2);
    assert_true(i2.frames - i1.frames <= 2);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 1);
    for (int i = 0; i < 50; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "s%d.txt", i);
        check_file(fs, ino_of(fs, ROOT, nm), p + i * 100, 100 + (size_t)i);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(p);
    rec_image_free(r);
}

/* gmtf_fs_get_stats and gmtf_fs_stored_share (gmtf-stat): a second copy of
 * a file counts as deduplicated, whole; the shares of all files add up to
 * the stored bytes (within rounding) while nothing is dead; deleting one of
 * the small files packed in a shared frame makes its bytes dead; every
 * frame is listed with its lengths. */
static void test_stats(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    size_t n = 2 * BS + 1000;
    uint8_t *p = malloc(n);
    fill_pattern(p, n, 77);
    uint64_t ino[3 + 20];
    ino[0] = mkfile(fs, ROOT, "a", p, n);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    ino[1] = mkfile(fs, ROOT, "b", p, n); /* identical content */
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    ino[2] = mkfile(fs, ROOT, "c", p + 5, 1000);
    for (int i = 0; i < 20; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "s%d.txt", i);
        ino[3 + i] = mkfile(fs, ROOT, nm, p + 4096 * i, 3000 + (size_t)i);
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    gmtf_fs_info info;
    gmtf_fs_stats st;
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    assert_int_equal(gmtf_fs_get_stats(fs, &st), 0);
    assert_int_equal(st.format_version, 2);
    assert_int_equal(st.nframes, info.frames);
    uint64_t clen = 0, mapped = 2 * n + 1000;
    for (int i = 0; i < 20; i++)
        mapped += 3000 + (uint64_t)i;
    for (size_t i = 0; i < st.nframes; i++) {
        assert_true(st.frame_clen[i] > 0 && st.frame_dlen[i] > 0);
        clen += st.frame_clen[i];
    }
    assert_int_equal(clen, info.stored_bytes);
    assert_int_equal(st.mapped_bytes, mapped);
    assert_true(st.mapped_bytes - st.unique_bytes >= n); /* b is a's bytes */
    assert_int_equal(st.dead_bytes, 0);
    /* where the bytes go: the parts add up to the end of the image */
    assert_int_equal(st.block_frame_bytes + st.pack_frame_bytes, info.stored_bytes);
    assert_true(st.block_frame_bytes >= 2 * 64 && st.pack_frame_bytes > 0); /* a's two blocks */
    assert_int_equal(st.sb_bytes, 16384);
    assert_int_equal(st.snapshot_copies, 2);
    assert_int_equal(st.journal_copies, 2);
    assert_true(st.snapshot_raw_bytes > 100 && st.snapshot_bytes % 4096 == 0); /* the root */
    assert_int_equal(st.sb_bytes + info.stored_bytes + st.snapshot_bytes * st.snapshot_copies +
                         st.journal_bytes * st.journal_copies + st.retired_bytes + st.spare_bytes +
                         st.free_bytes,
                     st.end_bytes);
    assert_int_equal(st.end_bytes, info.image_bytes);
    uint64_t shares = 0, share_a = 0, share_b = 0;
    for (int i = 0; i < 23; i++) {
        uint64_t s1;
        assert_int_equal(gmtf_fs_stored_share(fs, ino[i], &s1), 0);
        shares += s1;
        share_a = i == 0 ? s1 : share_a;
        share_b = i == 1 ? s1 : share_b;
    }
    assert_true(shares + 23 >= info.stored_bytes && shares <= info.stored_bytes + 23);
    assert_true(share_a + 1 >= share_b && share_b + 1 >= share_a); /* split evenly */
    uint64_t none;
    assert_int_equal(gmtf_fs_stored_share(fs, ROOT, &none), 0);
    assert_int_equal(none, 0);
    assert_int_equal(gmtf_fs_stored_share(fs, 999999, &none), -ENOENT);
    gmtf_fs_stats_free(&st);
    /* one small file gone: its bytes in the shared frame are dead */
    assert_int_equal(gmtf_fs_unlink(fs, ROOT, "s7.txt"), 0);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    assert_int_equal(gmtf_fs_get_stats(fs, &st), 0);
    assert_int_equal(st.dead_bytes, 3007);
    assert_int_equal(st.mapped_bytes, mapped - 3007);
    gmtf_fs_stats_free(&st);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(p);
    rec_image_free(r);
}

/* Cold reads of parts of large frames (1 MiB blocks: packs of small
 * files, whole blocks, a raw block) decode by range (frame_read.c), by
 * default: a later read of a frame read by range decodes it whole when it
 * goes on from the read before or is the third, else by range again; then
 * random small reads through a 1 MiB cache, then two passes over
 * every file, all equal to what was written. With range_reads < 0 the same
 * reads decode whole frames (none is read by range). */
static void text_file(uint8_t *p, size_t n, unsigned seed)
{
    static const char *w[] = {"frame", "block", "chain", "sample", "range", "pack", "tail"};
    size_t k = 0;
    for (unsigned i = 0; k < n; i++) {
        char line[96];
        int m = snprintf(line, sizeof line, "%u %s %s %u\n", seed, w[(seed + i) % 7],
                         w[(i * 3 + seed / 7) % 7], i * seed % 1000);
        for (int j = 0; j < m && k < n; j++)
            p[k++] = (uint8_t)line[j];
    }
}

static void test_range_reads(void **state)
{
    (void)state;
    const uint32_t bs = 1u << 20;
    enum { NSMALL = 400 };
    rec_img *r = mkfs_rec(bs, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    size_t len[NSMALL + 2];
    uint8_t *data[NSMALL + 2];
    char nm[32];
    for (int i = 0; i < NSMALL + 2; i++) {
        len[i] = i == NSMALL ? 3 * bs + 5000 : i == NSMALL + 1 ? bs + 100 : 2000 + (size_t)i * 37;
        data[i] = malloc(len[i]);
        if (i == NSMALL + 1)
            fill_pattern(data[i], len[i], 5); /* incompressible: a raw frame */
        else
            text_file(data[i], len[i], (unsigned)i + 1);
        snprintf(nm, sizeof nm, "f%d.txt", i);
        mkfile(fs, ROOT, nm, data[i], len[i]);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    for (int off = 0; off < 2; off++) {
        /* the default (0: on), then off */
        gmtf_fs_options o = {
            .read_only = 1, .threads = 1, .cache_bytes = 1u << 20, .range_reads = -off};
        assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &o, &fs), 0);
        uint64_t ino[NSMALL + 2];
        for (int i = 0; i < NSMALL + 2; i++) {
            snprintf(nm, sizeof nm, "f%d.txt", i);
            ino[i] = ino_of(fs, ROOT, nm);
            assert_true(ino[i] != 0);
        }
        uint8_t buf[9000];
        if (!off) { /* the policy (frame_read.c range_whole), by the counters */
            /* the first pack holds f0..f189, the second f190..f285 */
            static const struct {
                int file;
                uint64_t range, decoded; /* the counters after reading its first 100 bytes */
            } step[] = {
                {10, 1, 1},  /* a cold frame: by range */
                {100, 2, 2}, /* the same frame far from the read before: by range again */
                {101, 2, 3}, /* the next file after it: the whole frame into the cache */
                {150, 2, 3}, /* then from the cache */
                {260, 3, 4}, /* another frame */
                {250, 4, 5}, /* before the read before: by range */
                {240, 4, 6}, /* the third read of it: whole */
                {280, 4, 6},
            };
            for (size_t k = 0; k < sizeof step / sizeof *step; k++) {
                int i = step[k].file;
                assert_int_equal(gmtf_fs_read(fs, ino[i], buf, 100, 0), 100);
                assert_memory_equal(buf, data[i], 100);
                gmtf_fs_info info;
                assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
                assert_int_equal(info.range_decodes, step[k].range);
                assert_int_equal(info.frames_decoded, step[k].decoded);
            }
        }
        srand(17);
        for (int t = 0; t < (off ? 100 : 600) / (int)test_scale(); t++) {
            int i = t % 5 == 0 ? NSMALL + rand() % 2 : rand() % NSMALL;
            size_t at = (size_t)rand() % len[i], n = 1 + (size_t)rand() % sizeof buf;
            size_t want = n < len[i] - at ? n : len[i] - at;
            assert_int_equal(gmtf_fs_read(fs, ino[i], buf, n, at), (long)want);
            assert_memory_equal(buf, data[i] + at, want);
        }
        gmtf_fs_info info;
        assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
        if (off)
            assert_int_equal(info.range_decodes, 0);
        else
            assert_true(info.range_decodes > 0);
        for (int pass = 0; pass < 2 - off; pass++)
            for (int i = 0; i < NSMALL + 2; i++)
                check_file(fs, ino[i], data[i], len[i]);
        assert_int_equal(gmtf_fs_unmount(fs), 0);
    }
    for (int i = 0; i < NSMALL + 2; i++)
        free(data[i]);
    rec_image_free(r);
}

/* One flush rewrites block y.0 (the only user of frame F) and gives x.0
 * exactly F's old bytes. Were x.0 deduplicated against F, y's record would
 * free F before x's record maps it (y sorts first): the flush failed with
 * EUCLEAN and replay met a freed frame. Both files must come out right,
 * now, after a remount, and after a crash (journal replay). */
static void test_dedup_against_rewritten(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t *a = malloc(BS), *b = malloc(BS);
    fill_pattern(a, BS, 11);
    fill_pattern(b, BS, 12);
    uint64_t y = mkfile(fs, ROOT, "y", a, BS);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    uint64_t x = mkfile(fs, ROOT, "x", b, BS);
    assert_true(y < x);
    assert_int_equal(gmtf_fs_write(fs, y, b, BS, 0), (long)BS);
    assert_int_equal(gmtf_fs_write(fs, x, a, BS, 0), (long)BS);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    check_file(fs, y, b, BS);
    check_file(fs, x, a, BS);
    /* the image as a crash would leave it now: replay must agree */
    size_t len;
    const uint8_t *img = rec_image_data(r, &len);
    gmtf_fs *crashed = mount_mem(img, len, 1);
    check_file(crashed, y, b, BS);
    check_file(crashed, x, a, BS);
    assert_int_equal(gmtf_fs_unmount(crashed), 0);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 1);
    check_file(fs, y, b, BS);
    check_file(fs, x, a, BS);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(a);
    free(b);
    rec_image_free(r);
}

/* A block written and flushed, then changed again (a database's page at
 * every commit): the change starts from the bytes just encoded, kept in
 * the cache, instead of decoding the new frame (which doubled the CPU of
 * t_sqlite). The bytes are right before and after a remount. */
static void test_rewrite_after_flush(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    size_t n = 2 * BS + 5000;
    uint8_t *p = malloc(n);
    text_file(p, n, 5);
    uint64_t ino = mkfile(fs, ROOT, "db", p, n);
    assert_int_equal(gmtf_fs_syncfs(fs), 0); /* two whole blocks and a tail, encoded */
    gmtf_fs_info a, b;
    assert_int_equal(gmtf_fs_get_info(fs, &a), 0);
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 2; k++) {
            memcpy(p + k * BS + 100 * (size_t)round, "changed!", 8);
            assert_int_equal(gmtf_fs_write(fs, ino, p + k * BS + 100 * (size_t)round, 8,
                                           k * BS + 100 * (uint64_t)round),
                             8);
        }
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
    }
    assert_int_equal(gmtf_fs_get_info(fs, &b), 0);
    assert_int_equal(b.frames_decoded, a.frames_decoded);
    check_file(fs, ino, p, n);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 1);
    check_file(fs, ino, p, n);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(p);
    rec_image_free(r);
}

static void test_compaction(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    gmtf_fs *fs = mount_rec(r, 0);
    uint8_t *p = malloc(40 * 10000);
    srand(11);
    for (size_t i = 0; i < 40 * 10000; i++)
        p[i] = (uint8_t)rand();
    for (int i = 0; i < 40; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%02d.bin", i);
        mkfile(fs, ROOT, nm, p + i * 10000, 10000);
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    gmtf_fs_info before, after;
    gmtf_fs_get_info(fs, &before);
    for (int i = 0; i < 40; i++)
        if (i % 8) {
            char nm[16];
            snprintf(nm, sizeof nm, "c%02d.bin", i);
            assert_int_equal(gmtf_fs_unlink(fs, ROOT, nm), 0);
        }
    assert_int_equal(gmtf_fs_unmount(fs), 0); /* compacts */
    fs = mount_rec(r, 0);
    gmtf_fs_get_info(fs, &after);
    assert_true(after.stored_bytes * 3 < before.stored_bytes);
    for (int i = 0; i < 40; i += 8) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%02d.bin", i);
        check_file(fs, ino_of(fs, ROOT, nm), p + i * 10000, 10000);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(p);
    rec_image_free(r);
}

struct thr {
    gmtf_fs *fs;
    uint64_t ino;
    const uint8_t *want;
    size_t n;
    int id, bad;
};

static void *reader_main(void *arg)
{
    struct thr *t = arg;
    uint8_t *b = malloc(t->n);
    /* GMTF_TEST_SCALE (scripts/test's ThreadSanitizer pass: 4): fewer
     * rounds; each still reads every block past its offset beside the
     * writers' flushes */
    int rounds = 20 / (int)(test_scale() < 4 ? test_scale() : 4);
    for (int r = 0; r < rounds; r++) {
        size_t off = (size_t)(r * 7777 + t->id * 131) % t->n;
        long got = gmtf_fs_read(t->fs, t->ino, b, t->n - off, off);
        if (got != (long)(t->n - off) || memcmp(b, t->want + off, t->n - off))
            t->bad++;
    }
    free(b);
    return NULL;
}

static void *writer_main(void *arg)
{
    struct thr *t = arg;
    char nm[16];
    snprintf(nm, sizeof nm, "w%d", t->id);
    gmtf_entry e;
    if (gmtf_fs_create(t->fs, ROOT, nm, 0644, 0, 0, 0, &e)) {
        t->bad++;
        return NULL;
    }
    for (int r = 0; r < 30; r++) {
        /* a large write now and then pushes the cache over its limit */
        if (r % 10 == 9 && gmtf_fs_write(t->fs, e.attr.st_ino, t->want, 2 * BS, 100000) != 2 * BS)
            t->bad++;
        if (gmtf_fs_write(t->fs, e.attr.st_ino, t->want + r * 1000, 5000, (uint64_t)r * 1000) !=
            5000)
            t->bad++;
        if (r % 5 == 0 && gmtf_fs_fsync(t->fs, e.attr.st_ino, 0))
            t->bad++;
    }
    gmtf_fs_release(t->fs, e.attr.st_ino);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(BS, 0);
    /* a tiny dirty cache: writers flush (unlocking to encode) all the time */
    gmtf_fs_options o = {.threads = 2,
                         .flush_interval_ms = 10,
                         .cache_bytes = 2 * BS,
                         .journal_bytes = 64u << 10,
                         .dirty_bytes = 3 * BS};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &o, &fs), 0);
    size_t n = 6 * BS + 99;
    uint8_t *p = malloc(n);
    fill_pattern(p, n, 77);
    uint64_t ino = mkfile(fs, ROOT, "shared", p, n);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    struct thr t[6];
    pthread_t th[6];
    for (int i = 0; i < 6; i++) {
        t[i] = (struct thr){fs, ino, p, n, i, 0};
        pthread_create(&th[i], NULL, i < 4 ? reader_main : writer_main, &t[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].bad, 0);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    fs = mount_rec(r, 1);
    for (int i = 4; i < 6; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "w%d", i);
        uint64_t wi = ino_of(fs, ROOT, nm);
        uint8_t *got = malloc(100000 + 2 * BS);
        assert_int_equal(gmtf_fs_read(fs, wi, got, 100000 + 2 * BS, 0), 100000 + 2 * BS);
        assert_memory_equal(got, p, 29 * 1000 + 5000);
        assert_memory_equal(got + 100000, p, 2 * BS);
        free(got);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    free(p);
    rec_image_free(r);
}

/* GMTF_TEST_FILTER picks cases by cmocka's pattern (scripts/test's
 * ThreadSanitizer pass runs only the threaded one). */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_persists),
        cmocka_unit_test(test_overwrite_offsets),
        cmocka_unit_test(test_write_gaps_zero),
        cmocka_unit_test(test_holes_truncate_seek),
        cmocka_unit_test(test_namespace),
        cmocka_unit_test(test_attrs_xattrs),
        cmocka_unit_test(test_write_keep_attrs),
        cmocka_unit_test(test_unlinked_open),
        cmocka_unit_test(test_space_reuse),
        cmocka_unit_test(test_dedup_and_packing),
        cmocka_unit_test(test_dedup_against_rewritten),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_rewrite_after_flush),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_range_reads),
    };
    const char *filter = getenv("GMTF_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
