/* Base images, the oracle of committed states, the walk, the bounded runner
 * (hwork.h). */
#include "hwork.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs_test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

#ifdef HAVE_ASAN
/* Under ASan the memory bound is on single allocations (RLIMIT_AS cannot be
 * used beside ASan's shadow); a failed allocation returns NULL, as it would
 * under the limit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

/* Undefined behaviour fails the case (the child stops) instead of a line in
 * the log. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}
#endif

/* ---- base images ------------------------------------------------------------ */

typedef struct work {
    gmtf_fs *fs;
    hfacts *oracle;
    uint64_t inos[64]; /* every inode made: their times are set before commits */
    int n;
} work;

static uint64_t made(work *w, uint64_t ino)
{
    if (w->n < 64)
        w->inos[w->n++] = ino;
    return ino;
}

int hwork_cheap;

/* File contents: words (fs_test_util.c), or in the cheap images a sector
 * (512 bytes) of them over and over, each sector tagged with the seed and
 * its offset (the same sizes, blocks and frames; the frames are small and
 * decode fast, and a block or sector read from the wrong place still
 * differs from every committed state). */
static void fill(uint8_t *b, size_t n, uint32_t seed)
{
    if (!hwork_cheap || n <= 512) {
        fill_words(b, n, seed);
        return;
    }
    fill_words(b, 512, seed);
    tag_sectors(b, n, seed, 8);
}

static uint64_t mk(work *w, uint64_t dir, const char *name, size_t size, uint32_t seed)
{
    gmtf_entry e;
    if (gmtf_fs_create(w->fs, dir, name, 0644, 1000, 1000, 0, &e))
        abort();
    if (size) {
        uint8_t *b = malloc(size);
        fill(b, size, seed);
        if (gmtf_fs_write(w->fs, e.attr.st_ino, b, size, 0) != (long)size)
            abort();
        free(b);
    }
    gmtf_fs_release(w->fs, e.attr.st_ino);
    return made(w, e.attr.st_ino);
}

static void put(work *w, uint64_t ino, uint64_t off, size_t n, uint32_t seed)
{
    uint8_t *b = malloc(n);
    fill(b, n, seed);
    if (gmtf_fs_write(w->fs, ino, b, n, off) != (long)n)
        abort();
    free(b);
}

/* A commit point: everything durable, and what the tree holds is a state a
 * damaged image may fall back to. */
static void commit(work *w, uint64_t fsync_ino)
{
    /* Fixed times: the same seed gives the same image bytes on every run. */
    struct stat t = {
        .st_atim = {1700000000, 1}, .st_mtim = {1700000000, 2}, .st_ctim = {1700000000, 3}};
    unsigned set = GMTF_SET_ATIME | GMTF_SET_MTIME | GMTF_SET_CTIME;
    gmtf_fs_setattr(w->fs, GMTF_ROOT_INO, &t, set, NULL);
    for (int i = 0; i < w->n; i++)
        gmtf_fs_setattr(w->fs, w->inos[i], &t, set, NULL); /* -ENOENT once unlinked */
    int rc = fsync_ino ? gmtf_fs_fsync(w->fs, fsync_ino, 0) : gmtf_fs_syncfs(w->fs);
    if (rc)
        abort();
    hwalk_stats st;
    hwalk(w->fs, w->oracle, &st);
}

int hwork_build(int variant, uint8_t **img, size_t *len, hfacts *oracle)
{
    rec_img *r = rec_image_new(NULL, 0);
    gmtf_image *mi = rec_image_attach(r);
    gmtf_mkfs_options mo = {.block_size = 64u << 10, .label = "hostile"};
    if (variant == 2)
        mo.capacity = 8u << 20;
    uint8_t uuid[16] = "hostile-uuid-01";
    mo.uuid = uuid;
    if (gmtf_fs_mkfs(mi, &mo))
        abort();
    gmtf_image_close(mi);
    work w = {.oracle = oracle};
    gmtf_fs_options o = {.threads = 1, .journal_bytes = 64u << 10};
    if (gmtf_fs_mount(rec_image_attach(r), &o, &w.fs))
        abort();
    commit(&w, 0); /* the empty tree (mkfs's state) */
    gmtf_fs *fs = w.fs;
    gmtf_entry d1, d2, e;
    if (gmtf_fs_mkdir(fs, GMTF_ROOT_INO, "d1", 0755, 0, 0, &d1) ||
        gmtf_fs_mkdir(fs, d1.attr.st_ino, "d2", 0700, 0, 0, &d2))
        abort();
    uint64_t d1i = made(&w, d1.attr.st_ino), d2i = made(&w, d2.attr.st_ino);
    mk(&w, GMTF_ROOT_INO, "empty", 0, 0);
    uint64_t f1 = mk(&w, GMTF_ROOT_INO, "small", 100, 1);
    mk(&w, d1i, "f2.txt", 5000, 2);
    uint64_t f3 = mk(&w, d2i, "f3.c", 70000, 3);
    uint64_t big = mk(&w, GMTF_ROOT_INO, "big", 140000, 4);
    for (int i = 0; i < 6; i++) { /* small files packed into shared frames */
        char nm[16];
        snprintf(nm, sizeof nm, "p%d.h", i);
        mk(&w, d1i, nm, 300 + 700 * (size_t)i, 10 + (uint32_t)i);
    }
    uint64_t sp = mk(&w, GMTF_ROOT_INO, "sparse", 1000, 5);
    put(&w, sp, 3u * (64u << 10) + 10, 1000, 6);
    char longt[301];
    memset(longt, 'x', 300);
    longt[300] = 0;
    if (gmtf_fs_symlink(fs, GMTF_ROOT_INO, "l1", "d1/f2.txt", 0, 0, &e) ||
        gmtf_fs_symlink(fs, d1i, "l2", longt, 0, 0, &e) || gmtf_fs_link(fs, f1, d2i, "hard", &e) ||
        gmtf_fs_mknod(fs, GMTF_ROOT_INO, "fifo", S_IFIFO | 0600, 0, 0, 0, &e) ||
        gmtf_fs_mknod(fs, d1i, "dev", S_IFCHR | 0600, makedev(1, 3), 0, 0, &e))
        abort();
    uint8_t xv[200];
    memset(xv, 'v', sizeof xv);
    if (gmtf_fs_setxattr(fs, f1, "user.a", "x", 1, 0) ||
        gmtf_fs_setxattr(fs, d1i, "user.b", xv, sizeof xv, 0) ||
        gmtf_fs_setxattr(fs, GMTF_ROOT_INO, "trusted.r", "root", 4, 0))
        abort();
    commit(&w, 0);
    /* Changes: overwrite, truncate, rename, unlink, xattr, append. */
    put(&w, big, 70000, 3000, 7);
    struct stat st = {.st_size = 30000};
    if (gmtf_fs_setattr(fs, f3, &st, GMTF_SET_SIZE, NULL) ||
        gmtf_fs_rename(fs, GMTF_ROOT_INO, "empty", d1i, "g0", 0) || gmtf_fs_unlink(fs, d1i, "l2") ||
        gmtf_fs_setxattr(fs, f1, "user.a", "yy", 2, 0) || gmtf_fs_unlink(fs, d1i, "p3.h"))
        abort();
    put(&w, f1, 100, 400, 8);
    commit(&w, 0);
    /* A small fsync: bytes staged in the journal. */
    put(&w, big, 5000, 100, 9);
    commit(&w, big);
    size_t n;
    const uint8_t *p;
    if (variant == 1) {
        if (gmtf_fs_unmount(fs))
            abort();
        p = rec_image_data(r, &n);
    } else {
        p = rec_image_data(r, &n);
    }
    *img = malloc(n);
    memcpy(*img, p, n);
    *len = n;
    if (variant != 1)
        gmtf_fs_unmount(fs); /* after the copy: the image stays as of the last commit */
    rec_image_free(r);
    if (oracle)
        hfacts_sort(oracle);
    return 0;
}

#define SESSION_N 70000 /* the new file: two blocks */

/* What new-dir/moved holds after a session. */
static uint8_t *session_bytes(void)
{
    uint8_t *b = malloc(SESSION_N);
    fill(b, SESSION_N, 77);
    memmove(b + 7, b, 100); /* the second write: b[0..100) at 7 */
    return b;
}

/* A failed operation, other than for want of space (a full filesystem is
 * no fault of the image). */
static int failed(long rc)
{
    return rc < 0 && rc != -ENOSPC;
}

/* Whether the filesystem is (nearly) full: what failed may have failed for it. */
static int full(gmtf_fs *fs)
{
    struct statvfs sv;
    return gmtf_fs_statfs(fs, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < (4u << 20);
}

int hwork_session(gmtf_fs *fs, int *durable)
{
    int bad = 0, ok = 0;
    size_t n;
    hdirent *l = hwalk_list(fs, GMTF_ROOT_INO, &n);
    uint64_t files[2] = {0, 0}, dir = 0;
    int nf = 0;
    for (size_t i = 0; i < n; i++) {
        gmtf_entry e;
        if (gmtf_fs_lookup(fs, GMTF_ROOT_INO, l[i].name, &e))
            continue;
        if (S_ISREG(e.attr.st_mode) && nf < 2) {
            files[nf++] = e.attr.st_ino;
            if (nf == 2)
                bad += failed(gmtf_fs_unlink(fs, GMTF_ROOT_INO, l[i].name));
        } else if (S_ISDIR(e.attr.st_mode) && !dir)
            dir = e.attr.st_ino;
    }
    free(l);
    uint8_t *b = malloc(SESSION_N);
    fill(b, SESSION_N, 77);
    gmtf_entry e, d;
    if (gmtf_fs_create(fs, GMTF_ROOT_INO, "new-file", 0644, 0, 0, 0, &e) == 0) {
        ok = gmtf_fs_write(fs, e.attr.st_ino, b, SESSION_N, 0) == SESSION_N &&
             !gmtf_fs_fsync(fs, e.attr.st_ino, 0) &&
             gmtf_fs_write(fs, e.attr.st_ino, b, 100, 7) == 100 &&
             !gmtf_fs_fsync(fs, e.attr.st_ino, 0); /* staged */
        gmtf_fs_release(fs, e.attr.st_ino);
        ok = ok && !gmtf_fs_mkdir(fs, GMTF_ROOT_INO, "new-dir", 0755, 0, 0, &d) &&
             !gmtf_fs_rename(fs, GMTF_ROOT_INO, "new-file", d.attr.st_ino, "moved", 0);
    }
    bad += !ok && !full(fs);
    if (dir && gmtf_fs_create(fs, dir, "another", 0600, 0, 0, 0, &e) == 0) {
        bad += failed(gmtf_fs_write(fs, e.attr.st_ino, b, 3000, 0));
        gmtf_fs_release(fs, e.attr.st_ino);
    }
    if (files[0]) {
        struct stat st = {.st_size = 3000};
        bad += failed(gmtf_fs_write(fs, files[0], b, 5000, 1000));
        bad += failed(gmtf_fs_setattr(fs, files[0], &st, GMTF_SET_SIZE, NULL));
    }
    bad += failed(gmtf_fs_setxattr(fs, GMTF_ROOT_INO, "user.session", "s", 1, 0));
    int rc = gmtf_fs_syncfs(fs), synced = rc == 0;
    bad += failed(rc);
    *durable = ok && synced;
    free(b);
    return bad;
}

int hwork_session_check(gmtf_fs *fs)
{
    gmtf_entry d, e;
    if (gmtf_fs_lookup(fs, GMTF_ROOT_INO, "new-dir", &d) ||
        gmtf_fs_lookup(fs, d.attr.st_ino, "moved", &e))
        return -ENOENT;
    uint8_t *want = session_bytes(), *got = malloc(SESSION_N + 1);
    long n = gmtf_fs_read(fs, e.attr.st_ino, got, SESSION_N + 1, 0);
    int rc = n < 0 ? (int)n : n != SESSION_N || memcmp(got, want, SESSION_N) ? -EBADMSG : 0;
    free(want);
    free(got);
    return rc;
}

gmtf_image *himage_mem(const uint8_t *p, size_t len)
{
    gmtf_image *img;
    return gmtf_image_open_mem(p, len, &img) ? NULL : img;
}

/* ---- the bounded runner ------------------------------------------------------ */

int hbound_run(int (*fn)(void *arg), void *arg, unsigned seconds, uint64_t mem, char *why,
               size_t whylen)
{
#ifdef HAVE_ASAN
    seconds *= 6; /* ASan+UBSan: several times slower, more on a loaded machine */
#endif
    const char *scale = getenv("GMTF_HOSTILE_TIME_SCALE");
    if (scale && atoi(scale) > 0)
        seconds *= (unsigned)atoi(scale);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
#ifndef HAVE_ASAN
        struct rlimit rl = {mem, mem};
        setrlimit(RLIMIT_AS, &rl);
#else
        (void)mem; /* ASan: max_allocation_size_mb and the RSS limit instead */
#endif
        alarm(seconds);
        _exit(fn(arg) & 0xff);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, whylen, "waitpid: %s", strerror(errno));
            return -1;
        }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
        snprintf(why, whylen, "timeout (%u s)", seconds);
    else
        snprintf(why, whylen, "killed by signal %d (%s)", sig, strsignal(sig));
    return -1;
}
