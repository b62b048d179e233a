/* Faults at every I/O (crash_dev.h, crash_model.h): a long workload runs
 * once without faults, counting the writes, device flushes, truncates,
 * punches, reserves and reads it issues; then once per op number k of each
 * kind with op k failing (EIO, ENOSPC, a short write, or EIO until the
 * call returns). For each run:
 * - the call during which the op failed returns an error, or logs it and
 *   loses nothing (the crash checks below hold);
 * - the image stays consistent: a crash right after that call (the disk as
 *   of its last flush, and as it is) passes the crash-state checks, every
 *   acknowledged byte included;
 * - once the fault clears, every later call returns what it returns
 *   without faults (a failed unmount: the next mount finds the synced data)
 *   and the unmount succeeds; fsck -n finds the image clean and a mount
 *   shows exactly what the workload made.
 * GMTF_FAULT_RUNS: runs in all (default 48, spread over the kinds and op
 * numbers); GMTF_FAULT_RUNS=all: every op of every kind (the full run).
 * GMTF_FAULT_ONLY=kind:k:mode runs one (a failure report names it). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "crash_dev.h"
#include "crash_model.h"

#define BS (64u << 10)
#define MAX_STEPS 400

static const char *kind_name[CD_NKIND] = {"write", "flush", "truncate", "punch", "read", "reserve"};
static const char *mode_name[4] = {"EIO once", "ENOSPC once", "short write (others: EIO once)",
                                   "EIO until the call returns"};

typedef struct logbuf {
    int lines;
} logbuf;

static void count_log(void *arg, const char *msg)
{
    (void)msg;
    ((logbuf *)arg)->lines++;
}

/* One run of the workload. */
typedef struct frun {
    cm_model *m;
    cdev *d;
    logbuf log;
    int step;           /* calls made */
    long rc[MAX_STEPS]; /* each call's result */
    const long *ref;    /* the fault-free run's results (NULL: this is it) */
    int fault_step;     /* the call during which the fault fired, or -1 */
    long fault_rc;
    int absorbed; /* it returned success (and logged) */
    int failures;
    const char *what; /* description of the run, for messages */
    int kind;         /* of the fault */
    uint8_t *base;    /* the disk when recording began */
    size_t base_len;
} frun;

static void ffail(frun *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ffail(frun *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  [faults] %s, call %d: ", f->what, f->step);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    f->failures++;
}

static uint64_t hits_before;
static int log_before;

static void step_begin(frun *f)
{
    hits_before = f->d->fault_hits;
    log_before = f->log.lines;
}

/* The crash checks right after the faulted call: the disk as of its last
 * flush (what a power cut leaves for sure), and the disk as it is. */
static void crash_now(frun *f)
{
    cdev *d = f->d;
    size_t lastflush = 0;
    for (size_t i = d->n; i-- > 0;)
        if (d->log[i].kind == CD_FLUSH) {
            lastflush = i + 1;
            break;
        }
    char desc[300];
    size_t len;
    uint8_t *img = cd_state_prefix(d, f->base, f->base_len, lastflush, &len);
    snprintf(desc, sizeof desc, "%s: a crash after the failed call, at its last flush", f->what);
    if (cm_check_state(f->m, img, len, lastflush, desc, 0))
        f->failures++;
    free(img);
    snprintf(desc, sizeof desc, "%s: a crash after the failed call, every write landed", f->what);
    if (cm_check_state(f->m, d->p, d->len, d->n, desc, 0))
        f->failures++;
}

/* After each call: was it the one the fault hit? Then its result is
 * checked; after it, results must match the fault-free run. */
static long step_end(frun *f, const char *call, long rc)
{
    int s = f->step;
    if (s < MAX_STEPS)
        f->rc[s] = rc;
    if (f->d->fault_hits != hits_before && f->fault_step < 0) {
        f->fault_step = s;
        f->fault_rc = rc;
        cdev_fault_clear(f->d); /* a sticky fault lasts until the call returns */
        int ok_rc = f->ref && s < MAX_STEPS && rc == f->ref[s];
        if (ok_rc) {
            f->absorbed = 1;
            /* a read may fail in read-ahead and succeed when it counts
             * (w_read_all compares the bytes); other ops must be logged */
            if (f->log.lines == log_before && f->kind != CD_READ)
                ffail(f, "%s: an op failed, the call returned %ld and logged nothing", call, rc);
        }
        crash_now(f);
    } else if (f->ref && f->fault_step >= 0 && s < MAX_STEPS && rc != f->ref[s]) {
        ffail(f, "%s after the fault cleared returned %ld (without faults: %ld)", call, rc,
              f->ref[s]);
    }
    f->step++;
    return rc;
}

/* ---- the workload's calls --------------------------------------------------------- */

static void w_write(frun *f, int node, uint64_t off, size_t len, uint64_t seed, int random)
{
    uint8_t *b = malloc(len);
    cm_fill(b, len, seed, random);
    step_begin(f);
    long rc = step_end(f, "write", cm_write(f->m, node, off, b, len));
    free(b);
    if (rc != (long)len && cm_resync_node(f->m, node))
        ffail(f, "write of %zu bytes at %llu left bytes neither old nor new", len,
              (unsigned long long)off);
}

static void w_resync_if(frun *f, int node, int rc)
{
    if (rc && cm_resync_node(f->m, node))
        ffail(f, "a failed call left bytes neither old nor new");
}

#define CALL(f, name, expr) (step_begin(f), (int)step_end(f, name, (long)(expr)))

static void w_read_all(frun *f, int node)
{
    uint64_t size = cm_size(f->m, node);
    uint8_t *b = malloc(size ? size : 1);
    step_begin(f);
    long rc = size ? gmtf_fs_read(cm_fs(f->m), cm_ino(f->m, node), b, size, 0) : 0;
    step_end(f, "read", rc == (long)size ? 0 : rc);
    if (rc == (long)size) {
        uint64_t msize;
        uint8_t *want = cm_content(f->m, node, &msize);
        if (msize != size || memcmp(want, b, size))
            ffail(f, "a read returned other bytes than were written");
        free(want);
    }
    free(b);
}

/* An unmount and a mount: two calls, whatever happens. */
static void w_unmount_mount(frun *f)
{
    int rc = CALL(f, "unmount", cm_unmount(f->m));
    if (rc) { /* the filesystem is gone: the next mount finds the synced state */
        cdev_fault_clear(f->d);
        step_begin(f);
        rc = cm_mount_after_failure(f->m);
        step_end(f, "mount", rc);
        if (rc)
            ffail(f, "after a failed unmount, the mount or the state it found failed");
        return;
    }
    rc = CALL(f, "mount", cm_mount(f->m));
    if (rc) {
        cdev_fault_clear(f->d);
        if (cm_mount(f->m))
            ffail(f, "a second mount after a failed one failed too");
    }
}

static void workload(frun *f)
{
    cm_model *m = f->m;
    int files[10], dir;
    uint64_t rng = 12345;
    CALL(f, "mkdir", cm_mkdir(m, CM_ROOT, "dir", 0755, &dir));
    for (int i = 0; i < 10; i++) { /* small, packed; whole blocks; random */
        char nm[16];
        snprintf(nm, sizeof nm, "f%d.%s", i, i % 3 ? "txt" : "bin");
        CALL(f, "create", cm_create(m, i % 2 ? dir : CM_ROOT, nm, 0644, &files[i]));
        size_t len = i % 4 == 0 ? 2 * BS + 1234 : 700 + 900 * (size_t)i;
        w_write(f, files[i], 0, len, rng + (uint64_t)i, i == 4);
        if (i % 3 == 0)
            CALL(f, "setxattr", cm_setxattr(m, files[i], "user.k", "v1", 2));
        if (i % 4 == 1)
            CALL(f, "fsync", cm_fsync(m, files[i], i % 2));
    }
    CALL(f, "syncfs", cm_syncfs(m));
    /* small changes inside blocks: the base frame is read, fsync stages */
    for (int i = 0; i < 10; i += 2) {
        w_write(f, files[i], 100 + 37 * (uint64_t)i, 300, rng + 50 + (uint64_t)i, 1);
        CALL(f, "fsync", cm_fsync(m, files[i], i % 4 == 0));
    }
    w_resync_if(f, files[0], CALL(f, "punch", cm_punch(m, files[0], 500, BS)));
    CALL(f, "truncate", cm_truncate(m, files[4], BS + 10));
    CALL(f, "truncate", cm_truncate(m, files[6], 20000));
    CALL(f, "rename", cm_rename(m, CM_ROOT, "f2.txt", dir, "moved.txt", 0));
    CALL(f, "link", cm_link(m, files[1], CM_ROOT, "hard"));
    CALL(f, "unlink", cm_unlink(m, dir, "f3.bin"));
    CALL(f, "fdatasync", cm_fsync(m, files[6], 1));
    CALL(f, "syncfs", cm_syncfs(m));
    for (int i = 0; i < 10; i++)
        if (i != 3)
            CALL(f, "release", cm_release(m, files[i]));
    w_unmount_mount(f);
    for (int i = 0; i < 10; i++) /* every frame read back */
        if (i != 3)
            w_read_all(f, files[i]);
    for (int i = 1; i < 10; i += 3) {
        CALL(f, "open", cm_open(m, files[i], 0));
        w_write(f, files[i], (uint64_t)i * 333, 5000, rng + 90 + (uint64_t)i, 0);
        CALL(f, "fsync", cm_fsync(m, files[i], 0));
        CALL(f, "release", cm_release(m, files[i]));
    }
    /* a big file comes and goes: free space the checkpoints punch */
    int big;
    CALL(f, "create", cm_create(m, CM_ROOT, "big", 0644, &big));
    w_write(f, big, 0, 1200u << 10, rng + 200, 1);
    CALL(f, "syncfs", cm_syncfs(m));
    CALL(f, "release", cm_release(m, big));
    CALL(f, "unlink", cm_unlink(m, CM_ROOT, "big"));
    CALL(f, "unlink", cm_unlink(m, CM_ROOT, "f0.bin"));
    CALL(f, "syncfs", cm_syncfs(m));
    w_unmount_mount(f);
    w_read_all(f, files[1]);
    /* another: while the first's space is still punched out */
    CALL(f, "create", cm_create(m, dir, "big2", 0644, &big));
    w_write(f, big, 0, 1100u << 10, rng + 300, 1);
    CALL(f, "fsync", cm_fsync(m, big, 0));
    CALL(f, "truncate", cm_truncate(m, big, 100000));
    CALL(f, "syncfs", cm_syncfs(m));
    CALL(f, "release", cm_release(m, big));
    w_unmount_mount(f);
    CALL(f, "unlink", cm_unlink(m, dir, "big2"));
    CALL(f, "unmount", cm_unmount(m));
}

/* ---- runs --------------------------------------------------------------------------- */

static cdev *mkfs_dev(void)
{
    cdev *d = cdev_new(NULL, 0);
    gmtf_image *img = cdev_attach(d);
    gmtf_mkfs_options mo = {.block_size = BS, .label = "faults"};
    assert_int_equal(gmtf_fs_mkfs(img, &mo), 0);
    gmtf_image_close(img);
    return d;
}

/* A run with the fault given (kind < 0: none). Returns failures. */
static int one_run(int kind, uint64_t k, int mode, const long *ref, long *rc_out, int *steps,
                   uint64_t counts[CD_NKIND], int *absorbed, const char *what)
{
    frun f = {.ref = ref, .fault_step = -1, .what = what, .kind = kind};
    f.d = mkfs_dev();
    gmtf_fs_options o = {.threads = 1,
                         .journal_bytes = 64u << 10,
                         .dirty_bytes = 256u << 10,
                         .cache_bytes = 4u << 20,
                         .log = count_log,
                         .log_arg = &f.log};
    f.m = cm_new(f.d, &o);
    cm_set_name(f.m, "faults");
    f.base_len = f.d->len;
    f.base = malloc(f.base_len);
    memcpy(f.base, f.d->p, f.base_len);
    f.d->recording = 1; /* the crash checks need the log's flushes */
    assert_int_equal(cm_mount(f.m), 0);
    uint64_t base[CD_NKIND];
    memcpy(base, f.d->count, sizeof base);
    if (kind >= 0) {
        int err = mode == 1 ? -ENOSPC : -EIO;
        int dm = mode == 2   ? (kind == CD_WRITE ? CD_FAULT_SHORT : CD_FAULT_ONCE)
                 : mode == 3 ? CD_FAULT_STICKY
                             : CD_FAULT_ONCE;
        cdev_fault_arm(f.d, kind, k, err, dm);
    }
    workload(&f);
    cdev_fault_clear(f.d);
    if (kind >= 0 && f.fault_step < 0)
        ffail(&f, "the fault never fired");
    if (counts)
        for (int i = 0; i < CD_NKIND; i++)
            counts[i] = f.d->count[i] - base[i];
    /* the end: clean, and exactly what the workload made */
    unsigned errs, warns;
    char msg[2048];
    int rc = cm_fsck(f.d->p, f.d->len, 1, &errs, &warns, msg, sizeof msg);
    if (rc || errs)
        ffail(&f, "fsck -n after the unmount: rc %d, %u errors\n%s", rc, errs, msg);
    if (!rc && !errs && cm_check_state(f.m, f.d->p, f.d->len, SIZE_MAX, what, CM_CHECK_NO_RW))
        f.failures++;
    if (rc_out)
        memcpy(rc_out, f.rc, sizeof f.rc);
    if (steps)
        *steps = f.step;
    if (absorbed)
        *absorbed = f.absorbed;
    free(f.base);
    cm_free(f.m);
    cdev_free(f.d);
    return f.failures;
}

static void test_faults(void **state)
{
    (void)state;
    long ref[MAX_STEPS];
    int steps;
    uint64_t counts[CD_NKIND];
    assert_int_equal(one_run(-1, 0, 0, NULL, ref, &steps, counts, NULL, "without faults"), 0);
    uint64_t total = 0;
    for (int i = 0; i < CD_NKIND; i++)
        total += counts[i];
    printf("# faults: the workload makes %d calls; ops: %llu writes, %llu flushes, %llu "
           "truncates, %llu punches, %llu reads, %llu reserves\n",
           steps, (unsigned long long)counts[CD_WRITE], (unsigned long long)counts[CD_FLUSH],
           (unsigned long long)counts[CD_TRUNC], (unsigned long long)counts[CD_PUNCH],
           (unsigned long long)counts[CD_READ], (unsigned long long)counts[CD_RESERVE]);
    assert_true(counts[CD_WRITE] && counts[CD_FLUSH] && counts[CD_READ] && counts[CD_PUNCH] &&
                counts[CD_TRUNC]);
    const char *env = getenv("GMTF_FAULT_RUNS");
    int all = env && !strcmp(env, "all");
    uint64_t runs = all ? total : cd_env_count("GMTF_FAULT_RUNS", 48);
    const char *only = getenv("GMTF_FAULT_ONLY");
    int okind = -1, omode = 0;
    unsigned long long ok = 0;
    if (only && *only) {
        char kn[16];
        if (sscanf(only, "%15[a-z]:%llu:%d", kn, &ok, &omode) == 3)
            for (int i = 0; i < CD_NKIND; i++)
                if (!strcmp(kn, kind_name[i]))
                    okind = i;
        assert_true(okind >= 0);
    }
    /* every op (all), or a sample spread evenly over each kind's ops */
    uint64_t stride = all || runs >= total ? 1 : (total + runs - 1) / runs;
    unsigned done = 0, failed = 0;
    uint64_t absorbed[CD_NKIND] = {0};
    uint64_t per_kind[CD_NKIND] = {0};
    for (int kind = 0; kind < CD_NKIND; kind++) {
        for (uint64_t k = 0; k < counts[kind]; k++) {
            uint64_t global = k;
            for (int j = 0; j < kind; j++)
                global += counts[j];
            int mode = (int)(global % 4);
            if (okind >= 0) {
                if (kind != okind || k != ok)
                    continue;
                mode = omode;
            } else if (k % stride != (uint64_t)kind % stride) {
                if (k || counts[kind] > (uint64_t)kind % stride)
                    continue; /* every kind's first op at least */
            }
            char what[120];
            snprintf(what, sizeof what, "%s %llu of %llu failing (%s)", kind_name[kind],
                     (unsigned long long)k, (unsigned long long)counts[kind], mode_name[mode]);
            int ab = 0;
            int bad = one_run(kind, k, mode, ref, NULL, NULL, NULL, &ab, what);
            absorbed[kind] += ab;
            if (bad)
                printf("# faults: FAILED %s: GMTF_FAULT_ONLY=%s:%llu:%d\n", what, kind_name[kind],
                       (unsigned long long)k, mode);
            failed += bad != 0;
            per_kind[kind]++;
            done++;
        }
    }
    printf("# faults: %u runs (%llu writes, %llu flushes, %llu truncates, %llu punches, %llu "
           "reads, %llu reserves failed in turn), %u failed\n",
           done, (unsigned long long)per_kind[CD_WRITE], (unsigned long long)per_kind[CD_FLUSH],
           (unsigned long long)per_kind[CD_TRUNC], (unsigned long long)per_kind[CD_PUNCH],
           (unsigned long long)per_kind[CD_READ], (unsigned long long)per_kind[CD_RESERVE], failed);
    printf("# faults: calls that returned success after an op failed (logged, nothing lost): "
           "%llu write, %llu flush, %llu truncate, %llu punch, %llu read, %llu reserve\n",
           (unsigned long long)absorbed[CD_WRITE], (unsigned long long)absorbed[CD_FLUSH],
           (unsigned long long)absorbed[CD_TRUNC], (unsigned long long)absorbed[CD_PUNCH],
           (unsigned long long)absorbed[CD_READ], (unsigned long long)absorbed[CD_RESERVE]);
    assert_int_equal(failed, 0);
    assert_true(done > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
