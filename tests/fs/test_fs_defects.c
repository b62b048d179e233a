/* Regression tests of the integrity defects (issue "Integrity"): each
 * reproduces one deterministically through the public API, the image ops
 * (crash_dev.h) and allocation faults (alloc_fault.h).
 * - defect 10: a crash during what a read-write mount writes (v1: its
 *   checkpoint) must leave an image that fsck finds clean and that holds
 *   every synced byte: frames only the journal's STAGE records still need
 *   must not be overwritten before the journal is dropped.
 * - defect 14: error paths must not leave half-done state: attributes stay
 *   dirty when their record cannot be made; a rename that fails changes
 *   nothing; frames written by a flush whose device flush failed are
 *   released.
 * - crash12 (seed 491696 of test_fs_crash_states): an inode's (number,
 *   generation) must never repeat, across unmounts and crashes; fsck -y
 *   must converge when a crash interrupts a repair of superblock damage. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_fault.h"
#include "crash_dev.h"
#include "crash_model.h"
#include "fs_internal.h" /* sb_decode: what a failure report shows */
#include "fs_test_util.h"

#define BS (64u << 10)

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static const gmtf_fs_options stage_opts = {.threads = 1,
                                           .journal_bytes = 256u << 10,
                                           .dirty_bytes = 1u << 20,
                                           .cache_bytes = 4u << 20,
                                           .log = quiet};

static cdev *mkfs_dev(void)
{
    cdev *d = cdev_new(NULL, 0);
    gmtf_image *img = cdev_attach(d);
    gmtf_mkfs_options mo = {.block_size = BS, .label = "defects"};
    assert_int_equal(gmtf_fs_mkfs(img, &mo), 0);
    gmtf_image_close(img);
    return d;
}

static void write_data(cm_model *m, int node, uint64_t off, size_t len, uint64_t seed, int random)
{
    uint8_t *b = malloc(len);
    cm_fill(b, len, seed, random);
    assert_int_equal(cm_write(m, node, off, b, len), (long)len);
    free(b);
}

typedef struct crun {
    cm_model *m;
} crun;

static int check_cb(void *arg, const uint8_t *img, size_t len, size_t pos, const char *desc)
{
    crun *r = arg;
    return cm_check_state(r->m, img, len, pos, desc, 0);
}

/* Every crash state of the log from op `from` on (prefixes at each flush,
 * subsets and tears of the writes in flight): the number that failed. */
static size_t explore_from(cm_model *m, const uint8_t *base, size_t blen, size_t from)
{
    crun r = {m};
    if (getenv("GMTF_CRASH_LOG"))
        cd_print_log(cm_dev(m), 0, cm_dev(m)->n);
    cd_explore_opts o = {.target = 300 / test_scale() + 1, .seed = 1, .from_op = from, .only = -1};
    cd_explore_stats st;
    cd_explore(cm_dev(m), base, blen, &o, check_cb, &r, &st);
    printf("# %zu windows, %zu distinct states checked, %zu failed\n", st.windows, st.distinct,
           st.failed);
    return st.failed;
}

/* ---- defect 10 ------------------------------------------------------------------------ */

/* Small fsync'ed writes are staged in the journal over the block's frame;
 * the blocks then move to new frames (syncfs) and the machine crashes. The
 * mount after the crash replays the journal: the old frames are free in
 * the state it loads, but the old superblock's journal still reads them
 * (its STAGE records apply over them). Whatever that mount, and the next
 * checkpoint, write: a crash at any point must leave a clean image. */
static void test_defect10_mount_after_crash(void **state)
{
    (void)state;
    cdev *d = mkfs_dev();
    cm_model *m = cm_new(d, &stage_opts);
    cm_set_name(m, "defect10");
    assert_int_equal(cm_mount(m), 0);
    int f[3];
    for (int i = 0; i < 3; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "f%d", i);
        assert_int_equal(cm_create(m, CM_ROOT, nm, 0644, &f[i]), 0);
        write_data(m, f[i], 0, (i ? 4 : 1) * BS, 10u + (unsigned)i, 0);
        assert_int_equal(cm_release(m, f[i]), 0);
        /* f0's one frame: first in the space mkfs left */
        assert_int_equal(cm_syncfs(m), 0);
    }
    uint8_t *base = malloc(d->len);
    memcpy(base, d->p, d->len);
    size_t blen = d->len;
    d->recording = 1;
    for (int i = 0; i < 3; i++) { /* staged over each file's first frames */
        assert_int_equal(cm_open(m, f[i], 0), 0);
        write_data(m, f[i], 100, 300, 20u + (unsigned)i, 1);
        if (i)
            write_data(m, f[i], BS + 100, 300, 30u + (unsigned)i, 1);
        assert_int_equal(cm_fsync(m, f[i], 0), 0);
    }
    assert_int_equal(cm_syncfs(m), 0); /* the blocks move; the old frames wait */
    write_data(m, f[0], 2 * BS + 5, 100, 40, 1);
    assert_int_equal(cm_fsync(m, f[0], 1), 0);
    size_t barrier = d->n;
    assert_int_equal(cm_crash_and_mount(m), 0);
    write_data(m, f[1], 7, 5000, 50, 0);
    assert_int_equal(cm_fsync(m, f[1], 0), 0);
    assert_int_equal(cm_unmount(m), 0);
    d->recording = 0;
    size_t failed = explore_from(m, base, blen, barrier + 1);
    free(base);
    cm_free(m);
    cdev_free(d);
    assert_int_equal(failed, 0);
}

/* ---- defect 14 -------------------------------------------------------------------------- */

/* Writes change a file's size and mtime in memory; the records come at the
 * next commit. When making them fails (no memory), the attributes must
 * stay dirty, so that a retried fsync (or syncfs) journals them: after it
 * returns 0, a crash keeps the size and every byte. Each allocation of the
 * failing call is failed in turn. */
static void attrs_after_failed_sync(int how)
{
    long n;
    int hits = 0;
    for (n = 0; n < 400; n++) {
        cdev *d = mkfs_dev();
        gmtf_fs_options o = stage_opts;
        if (how == 2)
            o.journal_bytes = 16u << 10; /* fsync compresses instead of staging */
        cm_model *m = cm_new(d, &o);
        cm_set_name(m, "defect14-attrs");
        assert_int_equal(cm_mount(m), 0);
        int f;
        assert_int_equal(cm_create(m, CM_ROOT, "f", 0644, &f), 0);
        write_data(m, f, 0, 1000, 1, 0);
        assert_int_equal(cm_fsync(m, f, 0), 0);
        /* attributes dirty (size, mtime); with how 2 too much to stage */
        write_data(m, f, 1000, how == 2 ? 3 * BS : 3000, 2, 0);
        alloc_fault_arm(n);
        int rc = how == 1 ? gmtf_fs_syncfs(cm_fs(m)) : gmtf_fs_fsync(cm_fs(m), cm_ino(m, f), 0);
        int fired = alloc_fault_fired();
        alloc_fault_disarm();
        int bad = 0;
        if (fired) {
            hits += rc != 0;
            /* the retry, once memory is back */
            if (how == 1)
                assert_int_equal(cm_syncfs(m), 0);
            else
                assert_int_equal(cm_fsync(m, f, 0), 0);
            /* a crash now: the disk as it is (the sync ended with a flush) */
            char desc[80];
            snprintf(desc, sizeof desc, "allocation %ld of the %s failed", n,
                     how == 1 ? "syncfs" : "fsync");
            bad = cm_check_state(m, d->p, d->len, SIZE_MAX, desc, CM_CHECK_NO_RW);
        }
        cm_release(m, f);
        cm_free(m);
        cdev_free(d);
        assert_int_equal(bad, 0);
        if (!fired)
            break; /* past the call's last allocation */
    }
    printf("# %s: %ld allocations failed in turn, %d of them made the call fail\n",
           how == 1   ? "syncfs"
           : how == 2 ? "fsync (compressing)"
                      : "fsync (staging)",
           n, hits);
    assert_true(n > 0 && hits > 0);
}

static void test_defect14_attrs_fsync_staged(void **state)
{
    (void)state;
    attrs_after_failed_sync(0);
}

static void test_defect14_attrs_syncfs(void **state)
{
    (void)state;
    attrs_after_failed_sync(1);
}

static void test_defect14_attrs_fsync_compressed(void **state)
{
    (void)state;
    attrs_after_failed_sync(2);
}

/* A rename that fails (any of its allocations) changes nothing, in memory
 * or in the journal; one that succeeds is whole. kind 0: to a new name,
 * 1: over an existing file, 2: RENAME_EXCHANGE of a file and a directory. */
static void rename_with_failures(int kind)
{
    long n;
    int failed_calls = 0;
    for (n = 0; n < 400; n++) {
        cdev *d = mkfs_dev();
        cm_model *m = cm_new(d, &stage_opts);
        cm_set_name(m, "defect14-rename");
        assert_int_equal(cm_mount(m), 0);
        int d1, d2, a, b, sub;
        assert_int_equal(cm_mkdir(m, CM_ROOT, "d1", 0755, &d1), 0);
        assert_int_equal(cm_mkdir(m, CM_ROOT, "d2", 0755, &d2), 0);
        assert_int_equal(cm_create(m, d1, "a", 0644, &a), 0);
        write_data(m, a, 0, 5000, 3, 0);
        assert_int_equal(cm_release(m, a), 0);
        assert_int_equal(cm_create(m, d2, "b", 0644, &b), 0);
        write_data(m, b, 0, 7000, 4, 0);
        assert_int_equal(cm_release(m, b), 0);
        assert_int_equal(cm_mkdir(m, d2, "sub", 0755, &sub), 0);
        assert_int_equal(cm_syncfs(m), 0);
        const char *to = kind == 0 ? "new" : kind == 1 ? "b" : "sub";
        uint64_t before = cm_live_hash(m);
        alloc_fault_arm(n);
        int rc = gmtf_fs_rename(cm_fs(m), cm_ino(m, d1), "a", cm_ino(m, d2), to,
                                kind == 2 ? GMTF_RENAME_EXCHANGE : 0);
        int fired = alloc_fault_fired();
        alloc_fault_disarm();
        uint64_t after = cm_live_hash(m);
        if (rc) {
            failed_calls++;
            if (after != before)
                printf("# allocation %ld failed: rename returned %d and changed the namespace\n", n,
                       rc);
            assert_int_equal(after, before); /* nothing happened */
        } else {
            assert_int_not_equal(after, before);
        }
        /* the journal agrees with memory: a crash after the next commit
         * finds what the live filesystem shows */
        assert_int_equal(gmtf_fs_syncfs(cm_fs(m)), 0);
        cdev *c = cdev_clone(d);
        gmtf_fs_options ro = {.read_only = 1, .threads = 1, .log = quiet};
        gmtf_fs *fs2;
        assert_int_equal(gmtf_fs_mount(cdev_attach(c), &ro, &fs2), 0);
        uint64_t found = cm_fs_hash(m, fs2);
        gmtf_fs_unmount(fs2);
        unsigned errs, warns;
        char msg[1024];
        assert_int_equal(cm_fsck(c->p, c->len, 0, &errs, &warns, msg, sizeof msg), 0);
        if (errs)
            printf("# allocation %ld: fsck found %u errors\n%s", n, errs, msg);
        assert_int_equal(errs, 0);
        cdev_free(c);
        if (found != after)
            printf("# allocation %ld failed: the journal disagrees with memory\n", n);
        assert_int_equal(found, after);
        cm_free(m);
        cdev_free(d);
        if (!fired)
            break;
    }
    printf("# rename (%s): %ld allocations failed in turn, %d calls failed\n",
           kind == 0   ? "to a new name"
           : kind == 1 ? "over a file"
                       : "exchange",
           n, failed_calls);
    assert_true(n > 0);
}

static void test_defect14_rename_new(void **state)
{
    (void)state;
    rename_with_failures(0);
}

static void test_defect14_rename_replace(void **state)
{
    (void)state;
    rename_with_failures(1);
}

static void test_defect14_rename_exchange(void **state)
{
    (void)state;
    rename_with_failures(2);
}

/* A flush writes its frames, then flushes the device; when that fails, the
 * frames are named by no record: their space must be free again at once,
 * not only after a remount. Same workload with and without the fault: the
 * space in use after the retry is the same. */
static uint64_t used_after_sync(int fault)
{
    cdev *d = mkfs_dev();
    gmtf_fs_options o = stage_opts;
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(cdev_attach(d), &o, &fs), 0);
    for (int i = 0; i < 6; i++) {
        char nm[8];
        gmtf_entry e;
        snprintf(nm, sizeof nm, "f%d", i);
        assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, nm, 0644, 0, 0, 0, &e), 0);
        uint8_t *b = malloc(3 * BS);
        cm_fill(b, 3 * BS, 60u + (unsigned)i, i % 2);
        assert_int_equal(gmtf_fs_write(fs, e.attr.st_ino, b, 3 * BS, 0), (long)(3 * BS));
        free(b);
        gmtf_fs_release(fs, e.attr.st_ino);
    }
    if (fault) {
        cdev_fault_arm(d, CD_FLUSH, 0, -EIO, CD_FAULT_ONCE);
        assert_int_not_equal(gmtf_fs_syncfs(fs), 0);
        assert_int_equal(d->fault_hits, 1);
    }
    assert_int_equal(gmtf_fs_syncfs(fs), 0);
    gmtf_fs_info info;
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    unsigned errs, warns;
    assert_int_equal(cm_fsck(d->p, d->len, 1, &errs, &warns, NULL, 0), 0);
    assert_int_equal(errs, 0);
    cdev_free(d);
    return info.used_bytes;
}

static void test_defect14_flush_failure_frees_frames(void **state)
{
    (void)state;
    uint64_t clean = used_after_sync(0), faulted = used_after_sync(1);
    printf("# bytes in use after syncfs: %llu; after a failed device flush and a retry: %llu\n",
           (unsigned long long)clean, (unsigned long long)faulted);
    /* the snapshot's size varies by a few bytes (times); a leak is frames */
    assert_true(faulted <= clean + 1024);
}

/* ---- crash12: an inode's (number, generation) given out again ------------------ */

/* (number, generation) never repeats (gmtf_fs.h). Seed 491696 of
 * test_fs_crash_states (posix): the mkdirs of a and a/b (inodes 2 and 3)
 * and the writes after them were lost in a crash before anything reached
 * the disk; the mount after it made files 2 and 3 with the lost
 * directories' generations, the oracle (matching both) took them for the
 * directories and its link into "2/" failed with -ENOTDIR. The generation
 * came from the records alone (one above the largest loaded). */
static void gen_differs(const gmtf_entry *e, const gmtf_entry *old, const char *what)
{
    if (e->attr.st_ino == old->attr.st_ino && e->generation == old->generation)
        fail_msg("inode %llu generation %llu given out again (%s)",
                 (unsigned long long)e->attr.st_ino, (unsigned long long)e->generation, what);
}

static const gmtf_fs_options gen_opts = {.threads = 1,
                                         .journal_bytes = 16u << 10,
                                         .dirty_bytes = 256u << 10,
                                         .cache_bytes = 4u << 20,
                                         .log = quiet};

static void put(gmtf_fs *fs, uint64_t ino, uint64_t off, size_t len, uint64_t seed)
{
    uint8_t *b = malloc(len);
    cm_fill(b, len, seed, 0);
    assert_int_equal(gmtf_fs_write(fs, ino, b, len, off), (long)len);
    free(b);
}

static void test_crash12_generation_after_crash(void **state)
{
    (void)state;
    cdev *d = mkfs_dev();
    gmtf_fs *fs;
    gmtf_entry a, b, f0, f1, e;
    assert_int_equal(gmtf_fs_mount(cdev_attach(d), &gen_opts, &fs), 0);
    assert_int_equal(gmtf_fs_mkdir(fs, GMTF_ROOT_INO, "a", 0755, 0, 0, &a), 0);
    assert_int_equal(gmtf_fs_mkdir(fs, a.attr.st_ino, "b", 0700, 0, 0, &b), 0);
    assert_int_equal(gmtf_fs_create(fs, a.attr.st_ino, "f000.txt", 0644, 0, 0, 0, &f0), 0);
    put(fs, f0.attr.st_ino, 0, 4108, 1);
    assert_int_equal(gmtf_fs_release(fs, f0.attr.st_ino), 0);
    assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, "f001.txt", 0644, 0, 0, 0, &f1), 0);
    put(fs, f1.attr.st_ino, 0, 2593, 2);
    assert_int_equal(gmtf_fs_release(fs, f1.attr.st_ino), 0);
    put(fs, f0.attr.st_ino, 3953, 36991, 3);
    cdev_power_cut(d); /* the crash: nothing of it was written */
    gmtf_fs_unmount(fs);
    cdev_power_on(d);
    assert_int_equal(gmtf_fs_mount(cdev_attach(d), &gen_opts, &fs), 0);
    assert_int_equal(gmtf_fs_lookup(fs, GMTF_ROOT_INO, "a", &e), -ENOENT);
    const gmtf_entry *lost[] = {&a, &b, &f0, &f1};
    for (int i = 0; i < 4; i++) { /* inodes 2 .. 5 again */
        char nm[16];
        snprintf(nm, sizeof nm, "f%03d", i + 2);
        assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, nm, 0644, 0, 0, 0, &e), 0);
        assert_int_equal(e.attr.st_ino, lost[i]->attr.st_ino);
        for (int k = 0; k < 4; k++)
            gen_differs(&e, lost[k], "after a crash that lost the first");
        assert_int_equal(gmtf_fs_release(fs, e.attr.st_ino), 0);
    }
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    cdev_free(d);
}

/* The same without a crash: a file made and deleted, a clean unmount and a
 * mount; the next file takes the number again, and took its generation. */
static void test_crash12_generation_after_unmount(void **state)
{
    (void)state;
    cdev *d = mkfs_dev();
    gmtf_fs *fs;
    gmtf_entry f, g;
    for (int round = 0; round < 3; round++) {
        assert_int_equal(gmtf_fs_mount(cdev_attach(d), &gen_opts, &fs), 0);
        assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, "f", 0644, 0, 0, 0, &g), 0);
        if (round)
            gen_differs(&g, &f, "after a clean unmount");
        f = g;
        assert_int_equal(gmtf_fs_release(fs, f.attr.st_ino), 0);
        assert_int_equal(gmtf_fs_unlink(fs, GMTF_ROOT_INO, "f"), 0);
        assert_int_equal(gmtf_fs_unmount(fs), 0);
    }
    cdev_free(d);
}

/* ---- crash12: fsck -y converges over superblock damage ------------------------ */

/* A repair of a damaged superblock copy checkpoints into the other slot
 * pair and leaves the damaged copy in place, as the older generation's.
 * Seed 491696 of test_fs_crash_states (repair): damage in slot 0, fsck -y
 * (generation 5 into slots 1 and 3); in slot 1, fsck -y (6 into 0 and 2); in
 * slot 3: both older slots unreadable, which fsck -y accepts and repairs by
 * writing 7 into 1 and 3. A crash tearing slot 1's write left both slots of
 * that pair damaged, slot 1 naming 7: a second fsck -y took that for a newer
 * generation whose two copies are damaged and refused the image (a mount
 * took it). Every state a crash leaves in such a repair: fsck -y accepts it
 * (or it is clean already), fsck -n then finds it clean, and it mounts. */
static uint8_t *g_small_img;
static size_t g_small_len;
static uint64_t g_small_hash; /* what it holds (cm_content_hash) */

/* A small image with a directory, files and a few generations. */
static cdev *small_dev(void)
{
    if (g_small_img)
        return cdev_new(g_small_img, g_small_len);
    cdev *d = mkfs_dev();
    cm_model *m = cm_new(d, &gen_opts);
    assert_int_equal(cm_mount(m), 0);
    int dir, f;
    assert_int_equal(cm_mkdir(m, CM_ROOT, "src", 0755, &dir), 0);
    for (int i = 0; i < 6; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "r%02d.c", i);
        assert_int_equal(cm_create(m, i % 2 ? dir : CM_ROOT, nm, 0644, &f), 0);
        write_data(m, f, 0, 700u + 900u * (unsigned)i, 60u + (unsigned)i, 0);
        assert_int_equal(cm_release(m, f), 0);
        assert_int_equal(cm_syncfs(m), 0);
    }
    assert_int_equal(cm_unmount(m), 0);
    cm_free(m);
    gmtf_fs *fs;
    assert_int_equal(gmtf_fs_mount(cdev_attach(d), &gen_opts, &fs), 0);
    g_small_hash = cm_content_hash(fs);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    g_small_img = malloc(d->len);
    memcpy(g_small_img, d->p, d->len);
    g_small_len = d->len;
    return d;
}

/* What the slots hold: generation, and valid or damaged. */
static void print_slots(const uint8_t *p)
{
    printf("#   slots:");
    for (int i = 0; i < 4; i++) {
        sb_info x;
        int r = sb_decode(p + (size_t)i * 4096, &x);
        printf(" %d: generation %llu %s", i,
               (unsigned long long)load_le64(p + (size_t)i * 4096 + 16),
               r == 0          ? "valid"
               : r == -EUCLEAN ? "damaged"
                               : "other");
    }
    printf("\n");
}

/* 0, or 1 with the reason printed: fsck -y of d (unless clean) accepted,
 * then fsck -n clean, then a read-write mount shows every file as it was
 * (superblock damage loses nothing while a generation holding it all is
 * left), and its unmount works. */
static int converges(cdev *d, const char *desc)
{
    char msg[1024];
    unsigned errs, warns;
    int rc = cm_fsck_dev(d, 0, 0, &errs, &warns, msg, sizeof msg);
    if (rc) {
        printf("# %s: fsck -n: %d\n%s", desc, rc, msg);
        return 1;
    }
    if (errs) {
        gmtf_fs_check_report rep;
        rc = cm_fsck_rep(d, 1, 0, &rep, msg, sizeof msg);
        if (rc || rep.unrepairable) {
            printf("# %s: fsck -y: rc %d, unrepairable %d\n%s", desc, rc, rep.unrepairable, msg);
            return 1;
        }
        rc = cm_fsck_dev(d, 0, 0, &errs, &warns, msg, sizeof msg);
        if (rc || errs) {
            printf("# %s: fsck -n after fsck -y: rc %d, %u errors\n%s", desc, rc, errs, msg);
            return 1;
        }
    }
    gmtf_fs *fs;
    rc = gmtf_fs_mount(cdev_attach(d), &gen_opts, &fs);
    int same = !rc && cm_content_hash(fs) == g_small_hash;
    if (!rc)
        rc = gmtf_fs_unmount(fs);
    if (rc)
        printf("# %s: the mount after the repair: %d\n", desc, rc);
    else if (!same)
        printf("# %s: fsck finds it clean, but files differ from the image's before\n", desc);
    return rc != 0 || !same;
}

static int converges_cb(void *arg, const uint8_t *img, size_t len, size_t pos, const char *desc)
{
    (void)arg, (void)pos;
    cdev *d = cdev_new(img, len);
    int bad = converges(d, desc);
    if (bad)
        print_slots(img);
    cdev_free(d);
    return bad;
}

/* Flips byte k of superblock slot s's zero area (the checksum fails, the
 * fields stay as they were; k apart: a second flip does not undo a first). */
static void damage_slot(cdev *d, int s, int k)
{
    uint64_t at = (uint64_t)s * 4096 + 3000 + (uint64_t)k;
    uint8_t b = d->p[at] ^ 0x5a;
    cdev_inject(d, at, &b, 1);
}

/* fsck -y over damage in slots[0 .. n) in turn, the last repair recorded:
 * the number of its crash states (and of the other checks) that failed. */
static size_t repair_steps(const int *slots, int n, size_t *states)
{
    cdev *d = small_dev();
    size_t failed = 0;
    for (int k = 0; k < n; k++) {
        damage_slot(d, slots[k], k);
        uint8_t *base = malloc(d->len);
        memcpy(base, d->p, d->len);
        size_t blen = d->len;
        cdev_clear_log(d);
        d->recording = k == n - 1;
        gmtf_fs_check_report rep;
        assert_int_equal(cm_fsck_rep(d, 1, 0, &rep, NULL, 0), 0);
        int refused = rep.unrepairable; /* then it wrote nothing: the class ends */
        d->recording = 0;
        if (!refused) { /* accepted: converges whole, and from every crash in it */
            char desc[64];
            snprintf(desc, sizeof desc, "damage %d of %d (slot %d), repaired", k + 1, n, slots[k]);
            uint8_t *before = malloc(d->len); /* converges changes d */
            memcpy(before, d->p, d->len);
            if (converges(d, desc)) {
                printf("#   seq %d %d %d, before the repair then after:\n", slots[0],
                       n > 1 ? slots[1] : -1, n > 2 ? slots[2] : -1);
                print_slots(base);
                print_slots(before);
                failed++;
            }
            free(before);
            if (k == n - 1) {
                cd_explore_opts o = {.target = 1000, .seed = 1, .only = -1};
                cd_explore_stats st;
                cd_explore(d, base, blen, &o, converges_cb, NULL, &st);
                failed += st.failed;
                *states += st.distinct;
            }
        }
        free(base);
        if (refused)
            break;
    }
    cdev_free(d);
    return failed;
}

static void test_crash12_repair_interrupted(void **state)
{
    (void)state;
    static const int seq[] = {0, 1, 3}; /* the seed's rounds 0, 1 and 2 */
    size_t states = 0;
    size_t failed = repair_steps(seq, 3, &states);
    printf("# damage in slots 0, 1, 3, each repaired: %zu crash states of the last repair, "
           "%zu failed\n",
           states, failed);
    assert_true(states > 0);
    assert_int_equal(failed, 0);
}

/* The class: damage in one slot after another, each repaired; the last
 * repair's crash states converge. GMTF_REPAIR_CLASS_ALL=1: every sequence
 * of three slots (64, 7 s here; 2026-11-25: 678 crash states, 0 failed,
 * 34 in 12 sequences before the fix); else every 16th from slots 0, 1, 3 (the
 * seed's; 0.4 s; 9 failed before), and none with GMTF_TEST_SCALE above 1 (the
 * sanitizer passes: 4 s there; the seed's sequence is the test before). */
static void test_crash12_repair_class(void **state)
{
    (void)state;
    if (test_scale() > 1 && !getenv("GMTF_REPAIR_CLASS_ALL"))
        skip();
    size_t states = 0, failed = 0, seqs = 0;
    unsigned step = getenv("GMTF_REPAIR_CLASS_ALL") ? 1 : 16;
    for (unsigned k = 7 % step; k < 64; k += step) {
        int seq[] = {(int)(k / 16), (int)(k / 4 % 4), (int)(k % 4)};
        size_t f = repair_steps(seq, 3, &states);
        if (f)
            printf("# slots %d, %d, %d: %zu failed\n", seq[0], seq[1], seq[2], f);
        failed += f;
        seqs++;
    }
    printf("# %zu sequences of damaged slots: %zu crash states of repairs, %zu failed\n", seqs,
           states, failed);
    assert_int_equal(failed, 0);
}

/* ---- crash12: a frame id reused after an inode unlinked while open ------------- */

/* Seed 4 of test_fs_crash_states (posix), found while checking other seeds:
 * a checkpoint's snapshot keeps every frame but not the inodes unlinked
 * while open, so after a load their frames are held by nothing; the
 * release of such an inode freed its frame's id live, a later FRAME record
 * took the id, and the journal's replay refused that record (the id still
 * held): the file whose extent named the id read the old frame, another
 * file's bytes (41 crash states; fsck -n reported "1 metadata records could
 * not be applied", a read-only mount returned the wrong bytes). */
static void test_crash12_frame_of_open_unlinked(void **state)
{
    (void)state;
    cdev *d = mkfs_dev();
    gmtf_fs *fs;
    gmtf_entry x, y;
    gmtf_fs_info info;
    assert_int_equal(gmtf_fs_mount(cdev_attach(d), &gen_opts, &fs), 0);
    assert_int_equal(gmtf_fs_mkdir(fs, GMTF_ROOT_INO, "z", 0755, 0, 0, &y), 0);
    assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, "x", 0644, 0, 0, 0, &x), 0);
    uint8_t *want = malloc(BS), *got = malloc(BS);
    cm_fill(want, BS, 71, 1);
    assert_int_equal(gmtf_fs_write(fs, x.attr.st_ino, want, BS, 0), (long)BS);
    assert_int_equal(gmtf_fs_syncfs(fs), 0);                     /* x's block: a frame of its own */
    assert_int_equal(gmtf_fs_unlink(fs, GMTF_ROOT_INO, "x"), 0); /* open: kept */
    assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    uint64_t gen = info.generation;
    for (int i = 0; i < 400 && info.generation == gen; i++) { /* a checkpoint, x open */
        assert_int_equal(gmtf_fs_rename(fs, GMTF_ROOT_INO, i % 2 ? "z2" : "z", GMTF_ROOT_INO,
                                        i % 2 ? "z" : "z2", 0),
                         0);
        assert_int_equal(gmtf_fs_syncfs(fs), 0);
        assert_int_equal(gmtf_fs_get_info(fs, &info), 0);
    }
    assert_true(info.generation != gen);
    assert_int_equal(gmtf_fs_release(fs, x.attr.st_ino), 0); /* its frame id is free */
    assert_int_equal(gmtf_fs_create(fs, GMTF_ROOT_INO, "y", 0644, 0, 0, 0, &y), 0);
    cm_fill(want, BS, 72, 1);
    assert_int_equal(gmtf_fs_write(fs, y.attr.st_ino, want, BS, 0), (long)BS);
    assert_int_equal(gmtf_fs_fsync(fs, y.attr.st_ino, 0), 0); /* a frame: the id again */
    cdev_power_cut(d);
    gmtf_fs_unmount(fs);
    cdev_power_on(d);
    unsigned errs, warns;
    char msg[1024];
    assert_int_equal(cm_fsck(d->p, d->len, 1, &errs, &warns, msg, sizeof msg), 0);
    if (errs)
        printf("# fsck -n after the crash: %u errors\n%s", errs, msg);
    gmtf_fs_options ro = gen_opts;
    ro.read_only = 1;
    assert_int_equal(gmtf_fs_mount(cdev_attach(d), &ro, &fs), 0);
    assert_int_equal(gmtf_fs_lookup(fs, GMTF_ROOT_INO, "y", &y), 0);
    assert_int_equal(gmtf_fs_read(fs, y.attr.st_ino, got, BS, 0), (long)BS);
    assert_int_equal(gmtf_fs_unmount(fs), 0);
    assert_memory_equal(got, want, BS); /* y's bytes, not x's */
    assert_int_equal(errs, 0);
    free(want);
    free(got);
    cdev_free(d);
}

int main(int argc, char **argv)
{
    /* argv[1]: a cmocka test filter (meson runs defect 10 on its own) */
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defect10_mount_after_crash),
        cmocka_unit_test(test_defect14_attrs_fsync_staged),
        cmocka_unit_test(test_defect14_attrs_syncfs),
        cmocka_unit_test(test_defect14_attrs_fsync_compressed),
        cmocka_unit_test(test_defect14_rename_new),
        cmocka_unit_test(test_defect14_rename_replace),
        cmocka_unit_test(test_defect14_rename_exchange),
        cmocka_unit_test(test_defect14_flush_failure_frees_frames),
        cmocka_unit_test(test_crash12_generation_after_crash),
        cmocka_unit_test(test_crash12_generation_after_unmount),
        cmocka_unit_test(test_crash12_repair_interrupted),
        cmocka_unit_test(test_crash12_repair_class),
        cmocka_unit_test(test_crash12_frame_of_open_unlinked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
