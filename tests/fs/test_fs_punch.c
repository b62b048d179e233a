/* Free space in the middle of a growable image goes back to the host: at
 * checkpoints (and unmount) free extents of 1 MiB or more are punched out
 * of the image file, once each, and only space that is free in the durable
 * state (a crash right after a punch still finds every acknowledged byte). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs_test_util.h"

#define ROOT GMTF_ROOT_INO
#define MIB (1u << 20)

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static uint64_t put_file(gmtf_fs *fs, const char *name, size_t n, uint64_t seed)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    fill_noise(b, n, seed);
    gmtf_entry e;
    assert_int_equal(gmtf_fs_create(fs, ROOT, name, 0644, 0, 0, 0, &e), 0);
    assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, b, n, 0), (long)n);
    assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    free(b);
    return e.attr.st_ino;
}

static void expect_file(gmtf_fs *fs, const char *name, size_t n, uint64_t seed)
{
    gmtf_entry e;
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, name, &e), 0);
    assert_int_equal((size_t)e.attr.st_size, n);
    uint8_t *want = malloc(n), *got = malloc(n);
    assert_non_null(want);
    assert_non_null(got);
    fill_noise(want, n, seed);
    assert_int_equal(gmtf_fs_read(fs, e.attr.st_ino, got, n, 0), (long)n);
    assert_memory_equal(got, want, n);
    free(want);
    free(got);
}

static void check_image_clean(gmtf_image *img)
{
    gmtf_fs_check_options co = {.verify_data = 1, .threads = 1, .log = quiet};
    gmtf_fs_check_report rep;
    assert_int_equal(gmtf_fs_check(img, &co, &rep), 0);
    assert_int_equal(rep.errors, 0);
}

/* Can the file system under /tmp punch holes at all? */
static int host_punches(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 0;
    static uint8_t b[65536];
    memset(b, 1, sizeof b);
    int ok = write(fd, b, sizeof b) == (ssize_t)sizeof b &&
             fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 32768) == 0;
    close(fd);
    unlink(path);
    return ok;
}

/* ~8 MiB of incompressible files in a growable image file; most of it
 * deleted; after unmount the file keeps its length (a kept file lies at
 * its end) but its allocated blocks drop to about what is still used. */
static void test_punch_file_image(void **state)
{
    (void)state;
    char path[] = "/tmp/gmtf-punch-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    if (!host_punches(path)) {
        unlink(path);
        skip();
    }
    gmtf_image *img;
    assert_int_equal(gmtf_image_open_file(path, GMTF_IMAGE_CREATE, &img), 0);
    gmtf_mkfs_options mo = {.block_size = 256u << 10};
    assert_int_equal(gmtf_fs_mkfs(img, &mo), 0);
    gmtf_image_close(img);

    assert_int_equal(gmtf_image_open_file(path, 0, &img), 0);
    gmtf_fs_options fo = {.threads = 2, .journal_bytes = 64u << 10, .log = quiet};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(img, &fo, &fs), 0);
    put_file(fs, "keep-a", MIB, 1);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    for (int i = 0; i < 6; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "del-%d", i);
        put_file(fs, nm, MIB + 4096u * (unsigned)i, 10u + (unsigned)i);
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    put_file(fs, "keep-b", MIB, 2);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    struct stat full;
    assert_int_equal(stat(path, &full), 0);
    fprintf(stderr, "# full: length %lld, allocated %lld\n", (long long)full.st_size,
            (long long)full.st_blocks * 512);
    assert_true((uint64_t)full.st_blocks * 512 >= 8ull * MIB);

    for (int i = 0; i < 6; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "del-%d", i);
        assert_int_equal(gmtf_fs_unlink(fs, ROOT, nm), 0);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);

    struct stat after;
    assert_int_equal(stat(path, &after), 0);
    fprintf(stderr, "# after rm + unmount: length %lld, allocated %lld\n", (long long)after.st_size,
            (long long)after.st_blocks * 512);
    /* 2 MiB kept + metadata and a 64 KiB journal; the 6 MiB deleted in the
     * middle are gone from the host, while keep-b holds the length. */
    assert_true((uint64_t)after.st_blocks * 512 < 3ull * MIB);
    assert_true((uint64_t)after.st_size > 7ull * MIB);

    assert_int_equal(gmtf_image_open_file(path, GMTF_IMAGE_RDONLY, &img), 0);
    check_image_clean(img);
    gmtf_image_close(img);
    assert_int_equal(gmtf_image_open_file(path, 0, &img), 0);
    assert_int_equal(gmtf_fs_mount(img, &fo, &fs), 0);
    expect_file(fs, "keep-a", MIB, 1);
    expect_file(fs, "keep-b", MIB, 2);
    /* statfs: punched space is free on the host already; counting it again
     * as free inside the image would show about 6 MiB too much. */
    struct statvfs h0, g, h1;
    assert_int_equal(statvfs(path, &h0), 0);
    assert_int_equal(gmtf_fs_statfs(fs, &g), 0);
    assert_int_equal(statvfs(path, &h1), 0);
    uint64_t host = (uint64_t)(h0.f_bavail > h1.f_bavail ? h0.f_bavail : h1.f_bavail) * h0.f_frsize;
    fprintf(stderr, "# statfs free %llu, host free %llu\n",
            (unsigned long long)g.f_bavail * g.f_frsize, (unsigned long long)host);
    assert_true((uint64_t)g.f_bavail * g.f_frsize <= host + 2ull * MIB);
    /* The punched space is reused: new data fits without growing the file. */
    put_file(fs, "new", 2 * MIB, 3);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    struct stat reused;
    assert_int_equal(stat(path, &reused), 0);
    assert_true(reused.st_size <= after.st_size); /* not grown (a checkpoint may trim it) */
    assert_true(reused.st_blocks > after.st_blocks);

    assert_int_equal(gmtf_image_open_file(path, GMTF_IMAGE_RDONLY, &img), 0);
    check_image_clean(img);
    gmtf_fs_options ro = {.read_only = 1, .threads = 1, .log = quiet};
    assert_int_equal(gmtf_fs_mount(img, &ro, &fs), 0);
    expect_file(fs, "keep-a", MIB, 1);
    expect_file(fs, "keep-b", MIB, 2);
    expect_file(fs, "new", 2 * MIB, 3);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    unlink(path);
}

/* The memory image punches by zeroing and keeps its length. */
static void test_mem_punch(void **state)
{
    (void)state;
    uint8_t b[10000];
    memset(b, 0xab, sizeof b);
    gmtf_image *img;
    assert_int_equal(gmtf_image_open_mem(b, sizeof b, &img), 0);
    assert_non_null(img->ops->punch);
    assert_int_equal(img->ops->punch(img->ctx, 4096, 4096), 0);
    assert_int_equal(img->ops->punch(img->ctx, 9000, 4096), 0); /* past the end: clipped */
    size_t len;
    const uint8_t *p = gmtf_image_mem_data(img, &len);
    assert_int_equal(len, sizeof b);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(p[i], (i >= 4096 && i < 8192) || i >= 9000 ? 0 : 0xab);
    gmtf_image_close(img);
}

static size_t sb_writes(const rec_img *r, size_t from)
{
    size_t n = 0;
    for (size_t i = from; i < r->n; i++)
        n += r->log[i].data && r->log[i].len && r->log[i].off < 8192;
    return n;
}

static uint64_t punched_bytes(const rec_img *r, size_t from, size_t to)
{
    uint64_t b = 0;
    for (size_t i = from; i < to; i++)
        if (r->log[i].punch)
            b += r->log[i].len;
    return b;
}

/* Each free range is punched once: checkpoints that free nothing new
 * punch nothing (or only the small ranges freed since). */
static void test_punch_once(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(64u << 10, 0);
    assert_non_null(r);
    gmtf_fs_options fo = {.threads = 1, .journal_bytes = 16u << 10, .log = quiet};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &fo, &fs), 0);
    put_file(fs, "big", 3 * MIB, 5);
    put_file(fs, "tail", 200000, 6);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    r->recording = 1;
    assert_int_equal(gmtf_fs_unlink(fs, ROOT, "big"), 0);
    /* Metadata changes until the 16 KiB journal fills a few times: each
     * fill is a checkpoint. */
    size_t first = 0;
    gmtf_entry t;
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "tail", &t), 0);
    static uint8_t val[3000];
    for (int i = 0; i < 400 && sb_writes(r, 0) < 8; i++) {
        memset(val, 'a' + i % 26, sizeof val);
        assert_int_equal(gmtf_fs_setxattr(fs, t.attr.st_ino, "user.v", val, sizeof val, 0), 0);
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
        if (!first && r->punches)
            first = r->n; /* the log position after the first punch */
    }
    assert_true(sb_writes(r, 0) >= 8);
    assert_true(first > 0);
    uint64_t once = punched_bytes(r, 0, first), later = punched_bytes(r, first, r->n);
    size_t later_cp = sb_writes(r, first);
    fprintf(stderr, "# first punch %llu bytes; %zu checkpoints after it punched %llu bytes\n",
            (unsigned long long)once, later_cp, (unsigned long long)later);
    assert_true(once >= 2 * MIB);
    assert_true(later_cp >= 5);
    assert_true(later < 512u << 10); /* re-punching would be >= 2 MiB per checkpoint */
    r->recording = 0;
    expect_file(fs, "tail", 200000, 6);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    size_t len;
    const uint8_t *p = rec_image_data(r, &len);
    gmtf_image *mi;
    assert_int_equal(gmtf_image_open_mem(p, len, &mi), 0);
    check_image_clean(mi);
    gmtf_image_close(mi);
    rec_image_free(r);
}

/* A crash at any point of a workload that punches (each punch recorded as a
 * write of zeros): the image mounts, fsck is clean, fsynced data is there. */
static void test_punch_crash_states(void **state)
{
    (void)state;
    rec_img *r = mkfs_rec(64u << 10, 0);
    assert_non_null(r);
    size_t blen;
    const uint8_t *b0 = rec_image_data(r, &blen);
    uint8_t *base = malloc(blen);
    assert_non_null(base);
    memcpy(base, b0, blen);
    r->recording = 1;
    gmtf_fs_options fo = {.threads = 1, .journal_bytes = 16u << 10, .log = quiet};
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(rec_image_attach(r), &fo, &fs), 0);
    /* acks[k]: log position once step k was durable */
    size_t ack_keep = 0, ack_del = 0, ack_c = 0;
    uint64_t a = put_file(fs, "a", 3 * MIB / 2, 21);
    put_file(fs, "keep", 300000, 22);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    ack_keep = r->n;
    (void)a;
    assert_int_equal(gmtf_fs_unlink(fs, ROOT, "a"), 0);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    ack_del = r->n;
    gmtf_entry k;
    assert_int_equal(gmtf_fs_lookup(fs, ROOT, "keep", &k), 0);
    static uint8_t val[3000];
    for (int i = 0; i < 24; i++) { /* checkpoints: the freed 1.5 MiB gets punched */
        memset(val, 'a' + i % 26, sizeof val);
        assert_int_equal(gmtf_fs_setxattr(fs, k.attr.st_ino, "user.v", val, sizeof val, 0), 0);
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
    }
    uint64_t c = put_file(fs, "c", MIB, 23); /* lands in the punched space */
    assert_int_equal(gmtf_fs_fsync(fs, c, 0), 0);
    ack_c = r->n;
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    r->recording = 0;
    assert_true(r->punches > 0);

    size_t checked = 0;
    for (size_t k = 0; k <= r->n; k++) {
        /* States around every flush and every punch. */
        int edge = k == r->n || (k > 0 && (!r->log[k - 1].data || punched_bytes(r, k - 1, k) > 0));
        if (!edge)
            continue;
        size_t len;
        uint8_t *img = rec_image_state(base, blen, r, k, &len);
        gmtf_image *mi;
        assert_int_equal(gmtf_image_open_mem(img, len, &mi), 0);
        check_image_clean(mi);
        gmtf_image_close(mi);
        gmtf_fs *ro = mount_mem(img, len, 1);
        if (!ro)
            fprintf(stderr, "state %zu of %zu does not mount\n", k, r->n);
        assert_non_null(ro);
        gmtf_entry e;
        if (k >= ack_keep)
            expect_file(ro, "keep", 300000, 22);
        if (k >= ack_del)
            assert_int_equal(gmtf_fs_lookup(ro, ROOT, "a", &e), -ENOENT);
        else if (gmtf_fs_lookup(ro, ROOT, "a", &e) == 0 && k >= ack_keep)
            expect_file(ro, "a", 3 * MIB / 2, 21);
        if (k >= ack_c)
            expect_file(ro, "c", MIB, 23);
        gmtf_fs_unmount(ro);
        free(img);
        checked++;
    }
    fprintf(stderr, "# %zu crash states checked, %zu punches\n", checked, r->punches);
    assert_true(checked > 10);
    free(base);
    rec_image_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_punch),
        cmocka_unit_test(test_punch_file_image),
        cmocka_unit_test(test_punch_once),
        cmocka_unit_test(test_punch_crash_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
