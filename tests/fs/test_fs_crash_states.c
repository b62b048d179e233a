/* Crash states at scale (crash_dev.h, crash_model.h): each workload runs on
 * a disk that records every op; then distinct crash states of the whole
 * log (flush-delimited windows, subsets of the writes in flight, writes
 * torn at 512-byte sectors) are rebuilt and each is checked: fsck -n finds
 * no error, a read-only mount writes nothing, every fsync'ed, fdatasync'ed
 * and syncfs'ed byte and attribute is there, no file holds bytes never
 * written to it, a read-write mount, fsck -y and a second look agree.
 *
 * Counts: GMTF_CRASH_STATES (default 900) distinct states over all the
 * workloads (GMTF_CRASH_STATES=12000 is the full run); GMTF_CRASH_SEED
 * (default 1) seeds workloads and states; GMTF_CRASH_ONLY=N checks only
 * state N of each workload (a failure report names it), GMTF_CRASH_CASE
 * selects one workload by name, GMTF_CRASH_DUMP=DIR keeps failing images.
 * tests/README.md, "Crash states and faults". */
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

static uint64_t g_seed = 1;
static size_t g_total = 900;
static long g_only = -1;

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A fresh filesystem on a new disk (not recorded). */
static cdev *mkfs_dev(void)
{
    cdev *d = cdev_new(NULL, 0);
    gmtf_image *img = cdev_attach(d);
    gmtf_mkfs_options mo = {.block_size = BS, .label = "crash"};
    assert_int_equal(gmtf_fs_mkfs(img, &mo), 0);
    gmtf_image_close(img);
    return d;
}

typedef struct run {
    const char *name;
    cm_model *m;
    cdev *d;
    uint8_t *base;
    size_t base_len;
    unsigned flags;
    double t0;
} run;

static void run_begin(run *r, const char *name, cdev *d, const gmtf_fs_options *opt)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    r->d = d;
    r->base_len = d->len;
    r->base = malloc(d->len ? d->len : 1);
    if (d->len)
        memcpy(r->base, d->p, d->len);
    r->m = cm_new(d, opt);
    cm_set_name(r->m, name);
    r->t0 = now_s();
    d->recording = 1;
}

static int check_cb(void *arg, const uint8_t *img, size_t len, size_t pos, const char *desc)
{
    run *r = arg;
    return cm_check_state(r->m, img, len, pos, desc, r->flags);
}

static int count_only_cb(void *arg, const uint8_t *img, size_t len, size_t pos, const char *desc)
{
    (void)arg, (void)img, (void)len, (void)pos, (void)desc;
    return 0;
}

static size_t share(double weight)
{
    size_t n = (size_t)(g_total * weight + 0.5);
    return n ? n : 1;
}

/* Explores the crash states of the recorded log; asserts none failed and
 * that the log had at least want distinct states to give. */
static void run_explore(run *r, size_t target, size_t want, cd_check_fn fn, void *arg)
{
    r->d->recording = 0;
    if (getenv("GMTF_CRASH_LOG")) /* the recorded ops, for a failure's analysis */
        cd_print_log(r->d, 0, r->d->n);
    double t1 = now_s();
    cd_explore_opts o = {.target = target, .seed = g_seed, .only = g_only};
    cd_explore_stats st;
    if (getenv("GMTF_CRASH_COUNT_ONLY")) /* how many states the log has, unchecked */
        fn = count_only_cb;
    cd_explore(r->d, r->base, r->base_len, &o, fn ? fn : check_cb, arg ? arg : r, &st);
    size_t ops[CD_NKIND] = {0};
    for (size_t i = 0; i < r->d->n; i++)
        ops[r->d->log[i].kind]++;
    double t2 = now_s();
    printf("# %s: log %zu ops (%zu writes, %zu flushes, %zu truncates, %zu punches), %zu "
           "windows, image %zu KiB; %zu states made, %zu distinct checked (%zu with torn "
           "writes), %zu failed; workload %.1f s, states %.1f s\n",
           r->name, r->d->n, ops[CD_WRITE], ops[CD_FLUSH], ops[CD_TRUNC], ops[CD_PUNCH], st.windows,
           r->d->len >> 10, st.made, st.distinct, st.torn, st.failed, t1 - r->t0, t2 - t1);
    fflush(stdout);
    if (st.failed)
        printf("# %s: reproduce one with GMTF_CRASH_SEED=%llu GMTF_CRASH_ONLY=<state> "
               "GMTF_CRASH_CASE=%s\n",
               r->name, (unsigned long long)g_seed, r->name);
    assert_int_equal(st.failed, 0);
    if (g_only < 0)
        assert_true(st.distinct >= (want < target ? want : target));
}

static void run_end(run *r)
{
    cm_free(r->m);
    cdev_free(r->d);
    free(r->base);
}

static int skip_case(const char *name)
{
    const char *c = getenv("GMTF_CRASH_CASE");
    return c && *c && strcmp(c, name);
}

/* ---- helpers for workloads --------------------------------------------------------- */

#define MAXE 512

typedef struct pick {
    int dirs[MAXE], nodes[MAXE];
    char names[MAXE][64];
    size_t n;
} pick;

static void pick_load(cm_model *m, pick *p)
{
    p->n = cm_entries(m, p->dirs, p->names, p->nodes, MAXE);
}

/* A random entry whose node satisfies want (0 any, 1 file, 2 dir): index or -1. */
static long pick_one(cm_model *m, pick *p, uint64_t *rng, int want)
{
    if (!p->n)
        return -1;
    size_t start = (size_t)(cm_rand(rng) % p->n);
    for (size_t k = 0; k < p->n; k++) {
        size_t i = (start + k) % p->n;
        int ni = p->nodes[i];
        if (ni < 0)
            continue;
        if (want == 1 && !cm_node_is_file(m, ni))
            continue;
        if (want == 2 && !cm_node_is_dir(m, ni))
            continue;
        return (long)i;
    }
    return -1;
}

static int pick_dir(cm_model *m, pick *p, uint64_t *rng)
{
    if (cm_rand(rng) % 3 == 0)
        return CM_ROOT;
    long i = pick_one(m, p, rng, 2);
    return i < 0 ? CM_ROOT : p->nodes[i];
}

static void write_data(cm_model *m, int node, uint64_t off, size_t len, uint64_t seed, int random)
{
    uint8_t *b = malloc(len ? len : 1);
    cm_fill(b, len, seed, random);
    assert_int_equal(cm_write(m, node, off, b, len), (long)len);
    free(b);
}

/* ---- workload 1: a POSIX mix ---------------------------------------------------------- */

static void posix_mix(cm_model *m, uint64_t seed, int nops)
{
    uint64_t rng = seed * 7919 + 17;
    int open_files[64], nopen = 0, fileno = 0;
    int a, b;
    assert_int_equal(cm_mkdir(m, CM_ROOT, "a", 0755, &a), 0);
    assert_int_equal(cm_mkdir(m, a, "b", 0700, &b), 0);
    pick p;
    for (int op = 0; op < nops; op++) {
        pick_load(m, &p);
        unsigned r = (unsigned)(cm_rand(&rng) % 100);
        char nm[64];
        long i;
        if (r < 12 || p.n < 4) { /* create, write, maybe keep open */
            int dir = pick_dir(m, &p, &rng), node;
            snprintf(nm, sizeof nm, "f%03d%s", fileno++, cm_rand(&rng) % 2 ? ".txt" : ".bin");
            if (cm_create(m, dir, nm, 0644, &node))
                continue;
            size_t len =
                (size_t)(cm_rand(&rng) % 5 == 0 ? cm_rand(&rng) % (2 * BS) : cm_rand(&rng) % 6000);
            if (len)
                write_data(m, node, 0, len, rng, cm_rand(&rng) % 6 == 0);
            if (nopen < 64 && cm_rand(&rng) % 3 == 0)
                open_files[nopen++] = node;
            else
                cm_release(m, node);
        } else if (r < 30) { /* write into a file: overwrite, extend, past the end */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            int node = p.nodes[i];
            uint64_t size = cm_size(m, node);
            uint64_t off = cm_rand(&rng) % (size + 3000);
            size_t len = (size_t)(cm_rand(&rng) % 6 == 0 ? cm_rand(&rng) % (BS + BS / 2)
                                                         : 1 + cm_rand(&rng) % 3000);
            write_data(m, node, off, len, rng, cm_rand(&rng) % 6 == 0);
        } else if (r < 36) { /* truncate up or down */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            uint64_t size = cm_size(m, p.nodes[i]);
            uint64_t ns = cm_rand(&rng) % 2 ? size / 2 + cm_rand(&rng) % 100
                                            : size + cm_rand(&rng) % (BS + 500);
            assert_int_equal(cm_truncate(m, p.nodes[i], ns), 0);
        } else if (r < 43) { /* rename, replace, exchange, across directories */
            if ((i = pick_one(m, &p, &rng, 0)) < 0)
                continue;
            unsigned fl = cm_rand(&rng) % 4 == 0   ? GMTF_RENAME_EXCHANGE
                          : cm_rand(&rng) % 4 == 0 ? GMTF_RENAME_NOREPLACE
                                                   : 0;
            long j = pick_one(m, &p, &rng, 0);
            if (j >= 0 && cm_rand(&rng) % 2) {
                cm_rename(m, p.dirs[i], p.names[i], p.dirs[j], p.names[j], fl);
            } else {
                snprintf(nm, sizeof nm, "r%03d", fileno++);
                cm_rename(m, p.dirs[i], p.names[i], pick_dir(m, &p, &rng), nm, fl);
            }
        } else if (r < 47) { /* hard link */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            snprintf(nm, sizeof nm, "l%03d", fileno++);
            assert_int_equal(cm_link(m, p.nodes[i], pick_dir(m, &p, &rng), nm), 0);
        } else if (r < 53) { /* unlink, sometimes while open (written after) */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            int node = p.nodes[i];
            int keep = nopen < 64 && cm_rand(&rng) % 3 == 0;
            if (keep)
                assert_int_equal(cm_open(m, node, 0), 0);
            assert_int_equal(cm_unlink(m, p.dirs[i], p.names[i]), 0);
            if (keep) {
                write_data(m, node, cm_rand(&rng) % 5000, 700, rng, 0);
                open_files[nopen++] = node;
            }
        } else if (r < 56) { /* mkdir, rmdir */
            if (cm_rand(&rng) % 2) {
                snprintf(nm, sizeof nm, "d%03d", fileno++);
                assert_int_equal(cm_mkdir(m, pick_dir(m, &p, &rng), nm, 0755, NULL), 0);
            } else if ((i = pick_one(m, &p, &rng, 2)) >= 0) {
                cm_rmdir(m, p.dirs[i], p.names[i]); /* may be non-empty */
            }
        } else if (r < 61) { /* xattrs */
            if ((i = pick_one(m, &p, &rng, 0)) < 0)
                continue;
            char key[32], val[300];
            snprintf(key, sizeof key, "user.k%u", (unsigned)(cm_rand(&rng) % 4));
            size_t vl = (size_t)(cm_rand(&rng) % sizeof val);
            cm_fill((uint8_t *)val, vl, rng, 1);
            if (cm_rand(&rng) % 4 == 0)
                cm_removexattr(m, p.nodes[i], key);
            else
                assert_int_equal(cm_setxattr(m, p.nodes[i], key, val, vl), 0);
        } else if (r < 63) { /* symlink */
            snprintf(nm, sizeof nm, "s%03d", fileno++);
            char t[80];
            snprintf(t, sizeof t, "../target/%llu", (unsigned long long)(cm_rand(&rng) % 1000));
            assert_int_equal(cm_symlink(m, pick_dir(m, &p, &rng), nm, t, NULL), 0);
        } else if (r < 65) { /* chmod */
            if ((i = pick_one(m, &p, &rng, 0)) < 0)
                continue;
            assert_int_equal(cm_chmod(m, p.nodes[i], (mode_t)(0600 | cm_rand(&rng) % 0100)), 0);
        } else if (r < 69) { /* punch a hole */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            uint64_t size = cm_size(m, p.nodes[i]);
            if (!size)
                continue;
            uint64_t off = cm_rand(&rng) % size;
            uint64_t len = 1 + cm_rand(&rng) % (cm_rand(&rng) % 2 ? 2 * BS : 5000);
            assert_int_equal(cm_punch(m, p.nodes[i], off, len), 0);
        } else if (r < 81) { /* fsync / fdatasync */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            assert_int_equal(cm_fsync(m, p.nodes[i], (int)(cm_rand(&rng) % 2)), 0);
        } else if (r < 85) {
            assert_int_equal(cm_syncfs(m), 0);
        } else if (r < 89) { /* close an open file */
            if (!nopen)
                continue;
            int k = (int)(cm_rand(&rng) % (uint64_t)nopen);
            cm_release(m, open_files[k]);
            open_files[k] = open_files[--nopen];
        } else if (r < 91) { /* extend with fallocate */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            assert_int_equal(cm_extend(m, p.nodes[i], cm_size(m, p.nodes[i]), 1 + 4000), 0);
        } else if (r < 92) { /* open with O_TRUNC */
            if ((i = pick_one(m, &p, &rng, 1)) < 0)
                continue;
            assert_int_equal(cm_open(m, p.nodes[i], 1), 0);
            cm_release(m, p.nodes[i]);
        } else if (r < 93) { /* a clean remount */
            while (nopen)
                cm_release(m, open_files[--nopen]);
            assert_int_equal(cm_unmount(m), 0);
            assert_int_equal(cm_mount(m), 0);
        } else if (r < 94) { /* a crash, and the mount after it */
            nopen = 0;
            assert_int_equal(cm_crash_and_mount(m), 0);
        } else { /* a database-like small record, fdatasync'ed */
            int node = cm_lookup(m, CM_ROOT, "db");
            if (node >= 0 && !cm_node_is_file(m, node))
                continue; /* renamed over by something else */
            if (node < 0) {
                assert_int_equal(cm_create(m, CM_ROOT, "db", 0644, &node), 0);
                cm_release(m, node);
            }
            write_data(m, node, (cm_rand(&rng) % 64) * 512, 512, rng, 1);
            assert_int_equal(cm_fsync(m, node, 1), 0);
        }
    }
    while (nopen)
        cm_release(m, open_files[--nopen]);
    assert_int_equal(cm_verify_live(m), 0);
    assert_int_equal(cm_unmount(m), 0);
}

static void test_posix_mix(void **state)
{
    (void)state;
    if (skip_case("posix"))
        skip();
    run r;
    run_begin(&r, "posix", mkfs_dev(), NULL);
    assert_int_equal(cm_mount(r.m), 0);
    posix_mix(r.m, g_seed, 260 + (int)(g_total / 20)) /* more windows for more states */;
    run_explore(&r, share(0.3), 100, NULL, NULL);
    run_end(&r);
}

/* ---- workload 2: a database with a rollback journal ----------------------------- */

#define PAGE 4096u

static void sqlite_like(cm_model *m, uint64_t seed, int txns)
{
    uint64_t rng = seed * 104729 + 3;
    int db, dir;
    assert_int_equal(cm_mkdir(m, CM_ROOT, "data", 0755, &dir), 0);
    assert_int_equal(cm_create(m, dir, "app.db", 0644, &db), 0);
    uint32_t npages = 8;
    for (uint32_t pg = 0; pg < npages; pg++)
        write_data(m, db, (uint64_t)pg * PAGE, PAGE, rng + pg, pg % 3 == 0);
    assert_int_equal(cm_fsync(m, db, 0), 0);
    assert_int_equal(cm_fsync(m, dir, 0), 0);
    uint8_t page[PAGE], hdr[512];
    for (int t = 0; t < txns; t++) {
        /* the pages this transaction changes, some past the end (growth) */
        uint32_t pages[8], n = 1 + (uint32_t)(cm_rand(&rng) % 6);
        for (uint32_t k = 0; k < n; k++)
            pages[k] = (uint32_t)(cm_rand(&rng) % (npages + 2));
        int j;
        assert_int_equal(cm_create(m, dir, "app.db-journal", 0644, &j), 0);
        memset(hdr, 0, sizeof hdr);
        memcpy(hdr, "journal", 7);
        hdr[8] = (uint8_t)t;
        hdr[9] = (uint8_t)n;
        assert_int_equal(cm_write(m, j, 0, hdr, sizeof hdr), (long)sizeof hdr);
        uint64_t joff = sizeof hdr;
        uint64_t dbsize = cm_size(m, db);
        for (uint32_t k = 0; k < n; k++) { /* original pages into the journal */
            uint64_t off = (uint64_t)pages[k] * PAGE;
            memset(page, 0, sizeof page);
            if (off < dbsize) {
                uint64_t sz;
                uint8_t *c = cm_content(m, db, &sz);
                memcpy(page, c + off, sz - off < PAGE ? sz - off : PAGE);
                free(c);
            }
            assert_int_equal(cm_write(m, j, joff, &pages[k], 4), 4);
            assert_int_equal(cm_write(m, j, joff + 4, page, PAGE), (long)PAGE);
            joff += 4 + PAGE;
        }
        assert_int_equal(cm_fsync(m, j, (int)(t % 2)), 0);
        if (t % 3 == 0)
            assert_int_equal(cm_fsync(m, dir, 0), 0);
        for (uint32_t k = 0; k < n; k++) { /* the new pages */
            cm_fill(page, PAGE, rng + 1000 + (uint64_t)t * 16 + k, k % 2);
            assert_int_equal(cm_write(m, db, (uint64_t)pages[k] * PAGE, page, PAGE), (long)PAGE);
            if (pages[k] >= npages)
                npages = pages[k] + 1;
        }
        assert_int_equal(cm_fsync(m, db, (int)(t % 2)), 0);
        cm_release(m, j);
        assert_int_equal(cm_unlink(m, dir, "app.db-journal"), 0);
        assert_int_equal(cm_fsync(m, dir, 0), 0);
        if (t % 9 == 8) { /* a truncated, vacuumed database */
            npages -= 1;
            assert_int_equal(cm_truncate(m, db, (uint64_t)npages * PAGE), 0);
            assert_int_equal(cm_fsync(m, db, 0), 0);
        }
    }
    cm_release(m, db);
    assert_int_equal(cm_verify_live(m), 0);
    assert_int_equal(cm_unmount(m), 0);
}

static void test_sqlite_like(void **state)
{
    (void)state;
    if (skip_case("sqlite"))
        skip();
    run r;
    run_begin(&r, "sqlite", mkfs_dev(), NULL);
    assert_int_equal(cm_mount(r.m), 0);
    sqlite_like(r.m, g_seed, 40 + (int)(g_total / 300));
    run_explore(&r, share(0.2), 100, NULL, NULL);
    run_end(&r);
}

/* ---- workload 3: what mounts write, over remounts and crashes ---------------------- */

static void remount_cycles(cm_model *m, uint64_t seed, int cycles)
{
    uint64_t rng = seed * 31 + 5;
    int files[4];
    for (int i = 0; i < 4; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "m%d.dat", i);
        assert_int_equal(cm_create(m, CM_ROOT, nm, 0644, &files[i]), 0);
        write_data(m, files[i], 0, 2 * BS + 1000 * (size_t)i, rng + (uint64_t)i, i == 1);
        cm_release(m, files[i]);
    }
    assert_int_equal(cm_syncfs(m), 0);
    for (int c = 0; c < cycles; c++) {
        for (int i = 0; i < 4; i++) { /* small fsync'ed changes: staged over mapped frames */
            assert_int_equal(cm_open(m, files[i], 0), 0);
            write_data(m, files[i], cm_rand(&rng) % (2 * BS), 300, rng, 0);
            assert_int_equal(cm_fsync(m, files[i], (int)(cm_rand(&rng) % 2)), 0);
        }
        if (c % 2 == 0)
            assert_int_equal(cm_syncfs(m), 0); /* the blocks move to new frames */
        for (int i = 0; i < 4; i += 2) {
            write_data(m, files[i], cm_rand(&rng) % (2 * BS), 200, rng + 9, 1);
            assert_int_equal(cm_fsync(m, files[i], 0), 0);
        }
        if (c % 3 == 1) { /* the staged data also superseded, then crash */
            write_data(m, files[1], 0, BS, rng + 11, 1);
            assert_int_equal(cm_fsync(m, files[1], 0), 0);
        }
        if (c % 2 == 1 || c % 5 == 0) {
            assert_int_equal(cm_crash_and_mount(m), 0);
        } else {
            for (int i = 0; i < 4; i++)
                cm_release(m, files[i]);
            assert_int_equal(cm_unmount(m), 0);
            assert_int_equal(cm_mount(m), 0);
        }
    }
    assert_int_equal(cm_verify_live(m), 0);
    assert_int_equal(cm_unmount(m), 0);
}

static void test_remount_cycles(void **state)
{
    (void)state;
    if (skip_case("remount"))
        skip();
    run r;
    /* a journal with room to stage fsync'ed pages (STAGE records) */
    gmtf_fs_options o = {.threads = 1,
                         .journal_bytes = 256u << 10,
                         .dirty_bytes = 1u << 20,
                         .cache_bytes = 4u << 20,
                         .log = quiet};
    run_begin(&r, "remount", mkfs_dev(), &o);
    assert_int_equal(cm_mount(r.m), 0);
    remount_cycles(r.m, g_seed, 8);
    run_explore(&r, share(0.2), 100, NULL, NULL);
    run_end(&r);
}

/* ---- workload 6: compaction and punching ------------------------------------------ */

static void compaction(cm_model *m, uint64_t seed, int rounds)
{
    uint64_t rng = seed * 131 + 9;
    for (int r = 0; r < rounds; r++) {
        int small[48], big;
        char nm[32];
        for (int i = 0; i < 48; i++) { /* packed together into shared frames */
            snprintf(nm, sizeof nm, "s%d_%02d.c", r, i);
            assert_int_equal(cm_create(m, CM_ROOT, nm, 0644, &small[i]), 0);
            write_data(m, small[i], 0, 1000 + (size_t)(cm_rand(&rng) % 5000), rng, 0);
            cm_release(m, small[i]);
        }
        snprintf(nm, sizeof nm, "big%d", r);
        assert_int_equal(cm_create(m, CM_ROOT, nm, 0644, &big), 0);
        write_data(m, big, 0, 1200u << 10, rng + 1, 1); /* over 1 MiB stored: punched */
        cm_release(m, big);
        assert_int_equal(cm_syncfs(m), 0);
        for (int i = 0; i < 48; i++)
            if (i % 5) {
                snprintf(nm, sizeof nm, "s%d_%02d.c", r, i);
                assert_int_equal(cm_unlink(m, CM_ROOT, nm), 0);
            }
        snprintf(nm, sizeof nm, "big%d", r);
        assert_int_equal(cm_unlink(m, CM_ROOT, nm), 0);
        assert_int_equal(cm_fsync(m, small[0], 0), 0);
        if (r % 2) { /* the unmount compacts and checkpoints */
            assert_int_equal(cm_unmount(m), 0);
            assert_int_equal(cm_mount(m), 0);
        } else {
            assert_int_equal(cm_syncfs(m), 0);
        }
    }
    assert_int_equal(cm_verify_live(m), 0);
    assert_int_equal(cm_unmount(m), 0);
}

static void test_compaction_punch(void **state)
{
    (void)state;
    if (skip_case("compact"))
        skip();
    run r;
    run_begin(&r, "compact", mkfs_dev(), NULL);
    assert_int_equal(cm_mount(r.m), 0);
    compaction(r.m, g_seed, 4);
    size_t punches = 0;
    for (size_t i = 0; i < r.d->n; i++)
        punches += r.d->log[i].kind == CD_PUNCH;
    assert_true(punches > 0); /* the workload did give space back */
    run_explore(&r, share(0.1), 50, NULL, NULL);
    run_end(&r);
}

/* ---- workload 5: mkfs from a tree --------------------------------------------------- */

/* What mkfs.gmtf --from does (tools/mkfs_gmtf.c): mkfs marking the image
 * incomplete, a mount without device flushes that fills it and, at its
 * unmount, marks it complete. A crash anywhere must leave an image that
 * mount and fsck refuse, or the whole tree: never a clean part of it. */
static void mkfs_tree(cm_model *m, uint64_t seed)
{
    uint64_t rng = seed * 2654435761u + 1;
    int dirs[8], nd = 1;
    dirs[0] = CM_ROOT;
    for (int i = 0; i < 7; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "dir%d", i);
        assert_int_equal(cm_mkdir(m, dirs[cm_rand(&rng) % (uint64_t)nd], nm, 0755, &dirs[nd]), 0);
        nd++;
    }
    int files[160];
    for (int i = 0; i < 160; i++) {
        char nm[32];
        static const char *ext[] = {".c", ".h", ".txt", "", ".S"};
        snprintf(nm, sizeof nm, "file%03d%s", i, ext[i % 5]);
        int dir = dirs[cm_rand(&rng) % (uint64_t)nd];
        assert_int_equal(cm_create(m, dir, nm, 0644, &files[i]), 0);
        size_t len = (size_t)(i % 23 == 0 ? BS + cm_rand(&rng) % (2 * BS) : cm_rand(&rng) % 9000);
        if (len)
            write_data(m, files[i], 0, len, rng + (uint64_t)i, i % 17 == 0);
        if (i % 11 == 0)
            assert_int_equal(cm_setxattr(m, files[i], "user.origin", nm, strlen(nm)), 0);
        cm_release(m, files[i]);
        if (i % 13 == 0) {
            char t[40];
            snprintf(t, sizeof t, "link%03d", i);
            assert_int_equal(cm_symlink(m, dir, t, nm, NULL), 0);
        }
        if (i % 29 == 7) {
            char l[40];
            snprintf(l, sizeof l, "hard%03d", i);
            assert_int_equal(cm_link(m, files[i], dirs[0], l), 0);
        }
    }
    assert_int_equal(cm_mknod(m, dirs[1], "fifo", S_IFIFO | 0644, NULL), 0);
    for (int i = nd; i-- > 1;) /* directory attributes last, as mkfs sets them */
        assert_int_equal(cm_chmod(m, dirs[i], 0750), 0);
    assert_int_equal(cm_syncfs(m), 0);
    assert_int_equal(cm_unmount(m), 0);
}

typedef struct mkfs_check {
    run *r;
    size_t refused, complete;
} mkfs_check;

static int mkfs_check_cb(void *arg, const uint8_t *img, size_t len, size_t pos, const char *desc)
{
    mkfs_check *c = arg;
    (void)pos;
    unsigned errs, warns;
    char msg[1024];
    int rc = cm_fsck(img, len, 0, &errs, &warns, msg, sizeof msg);
    cdev *d = cdev_new(img, len);
    gmtf_fs_options o = {.threads = 1, .journal_bytes = 64u << 10, .log = quiet};
    gmtf_fs *fs;
    int mrc = gmtf_fs_mount(cdev_attach(d), &o, &fs);
    if (!mrc)
        gmtf_fs_unmount(fs);
    cdev_free(d);
    if (rc || errs) { /* refused by fsck: a mount must refuse it too */
        if (!mrc) {
            fprintf(stderr, "  [mkfs] %s: fsck finds it bad (rc %d, %u errors), a mount takes it\n",
                    desc, rc, errs);
            return 1;
        }
        c->refused++;
        return 0;
    }
    if (mrc) {
        fprintf(stderr, "  [mkfs] %s: fsck finds it clean, a mount refuses it (%d)\n", desc, mrc);
        return 1;
    }
    /* clean: then it is the whole tree (every ack applies: crash_pos max) */
    c->complete++;
    return cm_check_state(c->r->m, img, len, SIZE_MAX, desc, 0);
}

static void test_mkfs_from_tree(void **state)
{
    (void)state;
    if (skip_case("mkfs"))
        skip();
    run r;
    gmtf_fs_options o = {.threads = 1,
                         .journal_bytes = 64u << 10,
                         .dirty_bytes = 512u << 10,
                         .cache_bytes = 4u << 20,
                         .no_flush = 1,
                         .mkfs_finish = 1,
                         .log = quiet};
    run_begin(&r, "mkfs", cdev_new(NULL, 0), &o);
    gmtf_image *img = cdev_attach(r.d);
    gmtf_mkfs_options mo = {.block_size = BS, .label = "tree", .incomplete = 1};
    assert_int_equal(gmtf_fs_mkfs(img, &mo), 0);
    gmtf_image_close(img);
    assert_int_equal(cm_mount(r.m), 0);
    mkfs_tree(r.m, g_seed);
    mkfs_check c = {.r = &r};
    run_explore(&r, share(0.1), 50, mkfs_check_cb, &c);
    printf("# mkfs: %zu states refused, %zu complete\n", c.refused, c.complete);
    assert_true(c.refused > 0 && c.complete > 0);
    run_end(&r);
}

/* ---- workload 4: fsck -y repairing a damaged image --------------------------------- */

/* A byte flipped where fsck -n finds it and fsck -y repairs it: the search
 * knows nothing of the layout, it tries offsets until one qualifies. */
static int find_damage(uint8_t *img, size_t len, uint64_t *rng, size_t *where)
{
    for (int tries = 0; tries < 400; tries++) {
        size_t off = (size_t)(cm_rand(rng) % len);
        img[off] ^= 0x5a;
        unsigned errs, warns;
        int rc = cm_fsck(img, len, 1, &errs, &warns, NULL, 0);
        if (!rc && errs) {
            cdev *t = cdev_new(img, len);
            gmtf_fs_check_report rep;
            int r1 = cm_fsck_rep(t, 1, 1, &rep, NULL, 0);
            unsigned e2 = 1;
            int r2 = r1 || rep.unrepairable ? -1 : cm_fsck(t->p, t->len, 1, &e2, &warns, NULL, 0);
            cdev_free(t);
            if (!r2 && !e2) {
                *where = off;
                return 0;
            }
        }
        img[off] ^= 0x5a;
    }
    return -1;
}

#define REPAIR_ROUNDS 4

typedef struct repair_check {
    run *r;
    size_t start[REPAIR_ROUNDS];  /* log position where each round's repair starts */
    uint64_t want[REPAIR_ROUNDS]; /* what its uninterrupted repair leaves (cm_content_hash) */
    size_t repaired, pending;
} repair_check;

static uint64_t content_of(cdev *d)
{
    gmtf_fs_options o = {.read_only = 1, .threads = 1, .log = quiet};
    gmtf_fs *fs;
    if (gmtf_fs_mount(cdev_attach(d), &o, &fs))
        return 0;
    uint64_t h = cm_content_hash(fs);
    gmtf_fs_unmount(fs);
    return h;
}

/* A crash during fsck -y: the image is still readable, fsck -n finds the
 * damage or nothing, a second fsck -y converges to a clean image holding
 * what an uninterrupted repair leaves. */
static int repair_check_cb(void *arg, const uint8_t *img, size_t len, size_t pos, const char *desc)
{
    repair_check *c = arg;
    int round = 0;
    while (round + 1 < REPAIR_ROUNDS && pos >= c->start[round + 1])
        round++;
    unsigned errs, warns;
    char msg[1024];
    int rc = cm_fsck(img, len, 1, &errs, &warns, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "  [repair] %s: fsck -n cannot read the image (%d)\n%s", desc, rc, msg);
        return 1;
    }
    cdev *d = cdev_new(img, len);
    int bad = 0;
    if (errs) {
        c->pending++;
        gmtf_fs_check_report rep;
        rc = cm_fsck_rep(d, 1, 1, &rep, msg, sizeof msg);
        if (rc || rep.unrepairable) {
            fprintf(stderr, "  [repair] %s: fsck -y again: rc %d, unrepairable %d\n%s", desc, rc,
                    rep.unrepairable, msg);
            bad = 1;
        } else if ((rc = cm_fsck(d->p, d->len, 1, &errs, &warns, msg, sizeof msg)) || errs) {
            fprintf(stderr, "  [repair] %s: after fsck -y again, fsck -n: rc %d, %u errors\n%s",
                    desc, rc, errs, msg);
            bad = 1;
        }
    } else {
        c->repaired++;
    }
    if (!bad && content_of(d) != c->want[round]) {
        fprintf(stderr,
                "  [repair] %s: the repaired image holds other data than an "
                "uninterrupted repair leaves\n",
                desc);
        bad = 1;
    }
    cdev_free(d);
    return bad;
}

static void test_fsck_repair(void **state)
{
    (void)state;
    if (skip_case("repair"))
        skip();
    cdev *d = mkfs_dev();
    cm_model *m = cm_new(d, NULL);
    assert_int_equal(cm_mount(m), 0);
    uint64_t rng = g_seed * 977 + 5;
    int dir;
    assert_int_equal(cm_mkdir(m, CM_ROOT, "src", 0755, &dir), 0);
    for (int i = 0; i < 24; i++) {
        char nm[16];
        int f;
        snprintf(nm, sizeof nm, "r%02d.%s", i, i % 3 ? "c" : "dat");
        assert_int_equal(cm_create(m, i % 2 ? dir : CM_ROOT, nm, 0644, &f), 0);
        write_data(m, f, 0, i % 3 ? 500 + (size_t)(cm_rand(&rng) % 8000) : BS + 777, rng, 0);
        cm_release(m, f);
    }
    assert_int_equal(cm_syncfs(m), 0);
    assert_int_equal(cm_unmount(m), 0);
    cm_free(m);
    /* rounds: two damages that fsck -y repairs (written through the disk,
     * so that later crash states hold them), then the repair, recorded */
    run r;
    run_begin(&r, "repair", d, NULL);
    repair_check c = {.r = &r};
    for (int round = 0; round < REPAIR_ROUNDS; round++) {
        uint8_t *img = malloc(d->len);
        memcpy(img, d->p, d->len);
        size_t at[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(find_damage(img, d->len, &rng, &at[k]), 0);
            cdev_inject(d, at[k], img + at[k], 1);
        }
        free(img);
        cdev *t = cdev_clone(d);
        gmtf_fs_check_report rep;
        assert_int_equal(cm_fsck_rep(t, 1, 1, &rep, NULL, 0), 0);
        c.want[round] = content_of(t);
        cdev_free(t);
        assert_true(c.want[round] != 0);
        c.start[round] = d->n;
        assert_int_equal(cm_fsck_rep(d, 1, 1, &rep, NULL, 0), 0);
        printf("# repair %d: damage at offsets %zu and %zu; fsck -y: %u errors, %u fixed\n", round,
               at[0], at[1], rep.errors, rep.fixed);
        assert_true(rep.errors > 0 && !rep.unrepairable);
    }
    run_explore(&r, share(0.05), 40, repair_check_cb, &c);
    printf("# repair: %zu states already repaired, %zu repaired by a second fsck -y\n", c.repaired,
           c.pending);
    assert_true(c.pending > 0);
    run_end(&r);
}

static int setup(void **state)
{
    (void)state;
    g_seed = cd_env_count("GMTF_CRASH_SEED", 1);
    g_total = cd_env_count("GMTF_CRASH_STATES", 900);
    const char *o = getenv("GMTF_CRASH_ONLY");
    g_only = o && *o ? atol(o) : -1;
    printf("# crash states: GMTF_CRASH_STATES=%zu GMTF_CRASH_SEED=%llu\n", g_total,
           (unsigned long long)g_seed);
    return 0;
}

int main(void)
{
    (void)quiet;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_posix_mix),      cmocka_unit_test(test_sqlite_like),
        cmocka_unit_test(test_remount_cycles), cmocka_unit_test(test_compaction_punch),
        cmocka_unit_test(test_fsck_repair),    cmocka_unit_test(test_mkfs_from_tree),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
