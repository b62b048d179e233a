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
 *   released. */
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
    cd_explore_opts o = {.target = 300, .seed = 1, .from_op = from, .only = -1};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defect10_mount_after_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
