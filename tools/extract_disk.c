/* gmtf-extract into a directory (extract.h). Nothing is ever written
 * outside it, whatever the image holds or the directory held before:
 *   - every name is created relative to the descriptor of its directory
 *     (mkdirat, openat, symlinkat, mknodat, linkat), never by a path;
 *   - a directory is entered by openat(O_DIRECTORY | O_NOFOLLOW) of the
 *     name just made (or found there as a real directory), so a symbolic
 *     link, from the image or planted beforehand, is never followed;
 *   - files are made with O_CREAT | O_EXCL | O_NOFOLLOW: what stood at the
 *     name before (a symlink to elsewhere, say) is removed, not opened;
 *   - names are single components (the walk refuses '/', "." and "..").
 * Directories are made 0700 and get their mode, owner, xattrs and times
 * when left (their children change their times). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "extract.h"

struct xdisk {
    int root_fd;
    int made_root; /* the root's attributes go to it at the end */
    int same_owner;
    int *fd; /* descriptors of the directories entered: fd[depth] */
    size_t depth, cap;
};

/* ---- descriptors ----------------------------------------------------------- */

static int parent_fd(xdisk *d)
{
    return d->depth ? d->fd[d->depth - 1] : d->root_fd;
}

static int push_fd(xdisk *d, int fd)
{
    if (d->depth == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        int *v = realloc(d->fd, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        d->fd = v;
        d->cap = cap;
    }
    d->fd[d->depth++] = fd;
    return 0;
}

/* Opens the directory at rel (components under the root, each a real
 * directory: no symlink followed). -errno on failure. */
static int open_beneath(xdisk *d, const char *rel)
{
    int fd = dup(d->root_fd);
    char *dup_rel = strdup(rel), *save = NULL;
    if (fd < 0 || !dup_rel) {
        if (fd >= 0)
            close(fd);
        free(dup_rel);
        return -ENOMEM;
    }
    for (char *c = strtok_r(dup_rel, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        if (next < 0) {
            free(dup_rel);
            return -errno;
        }
        fd = next;
    }
    free(dup_rel);
    return fd;
}

/* Removes what stands at name in dir (not a non-empty directory). */
static int remove_old(int dir, const char *name)
{
    if (!unlinkat(dir, name, 0))
        return 0;
    if (errno == EISDIR || errno == EPERM)
        return unlinkat(dir, name, AT_REMOVEDIR) ? -errno : 0;
    return -errno;
}

/* ---- attributes --------------------------------------------------------------- */

/* "/proc/self/fd/DIR/NAME": for the calls that have no *at form
 * (lsetxattr); the last component is not followed. */
static void proc_path(char *buf, size_t cap, int dir, const char *name)
{
    snprintf(buf, cap, "/proc/self/fd/%d/%s", dir, name);
}

static void set_xattrs(xsrc *x, const xnode *n, int fd, int dir)
{
    xattrs a;
    int rc = xsrc_xattrs(x, n->st.st_ino, &a);
    if (rc) {
        xsrc_error(x, n->path, "reading its xattrs: %s", strerror(-rc));
        return;
    }
    char p[4200];
    if (fd < 0)
        proc_path(p, sizeof p, dir, n->name);
    for (size_t i = 0; i < a.count; i++) {
        int r = fd >= 0 ? fsetxattr(fd, a.name[i], a.value[i], a.size[i], 0)
                        : lsetxattr(p, a.name[i], a.value[i], a.size[i], 0);
        if (r)
            xsrc_error(x, n->path, "xattr %s: %s", a.name[i], strerror(errno));
    }
    xattrs_free(&a);
}

/* Owner, mode, xattrs, times: by fd when there is one, else by name in
 * dir without following a symlink. chown before chmod (it clears set-ID
 * bits), times last. */
static void set_attrs(xdisk *d, xsrc *x, const xnode *n, int fd, int dir)
{
    const struct stat *st = &n->st;
    int is_lnk = S_ISLNK(st->st_mode);
    if (d->same_owner) {
        int r = fd >= 0 ? fchown(fd, st->st_uid, st->st_gid)
                        : fchownat(dir, n->name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW);
        if (r)
            xsrc_error(x, n->path, "owner %u:%u: %s", (unsigned)st->st_uid, (unsigned)st->st_gid,
                       strerror(errno));
    }
    if (!is_lnk) {
        int r = fd >= 0 ? fchmod(fd, st->st_mode & 07777)
                        : fchmodat(dir, n->name, st->st_mode & 07777, 0);
        if (r)
            xsrc_error(x, n->path, "mode %o: %s", (unsigned)(st->st_mode & 07777), strerror(errno));
    }
    set_xattrs(x, n, fd, dir);
    struct timespec t[2] = {st->st_atim, st->st_mtim};
    int r = fd >= 0 ? futimens(fd, t) : utimensat(dir, n->name, t, AT_SYMLINK_NOFOLLOW);
    if (r)
        xsrc_error(x, n->path, "times: %s", strerror(errno));
}

/* ---- entries ------------------------------------------------------------------------ */

static int write_all(int fd, const uint8_t *p, size_t len, uint64_t off)
{
    while (len) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        off += (uint64_t)w;
        len -= (size_t)w;
    }
    return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    static const uint8_t zero[4096];
    return !memcmp(p, zero, n);
}

/* Pieces of 4 KiB that are all zeros are not written: the image finds
 * holes a block (64 KiB or more) at a time; the file gets them as holes
 * (its size is set at the end), as cp --sparse=auto does. */
static int write_piece(void *arg, const void *data, size_t len, uint64_t off)
{
    int fd = *(int *)arg;
    const uint8_t *p = data;
    size_t at = 0;
    while (at < len) {
        size_t run = 0;
        while (at + run < len) {
            size_t k = len - at - run < 4096 ? len - at - run : 4096;
            if (all_zero(p + at + run, k))
                break;
            run += k;
        }
        int rc = run ? write_all(fd, p + at, run, off + at) : 0;
        if (rc)
            return rc;
        at += run;
        while (at < len) { /* skip the zeros */
            size_t k = len - at < 4096 ? len - at : 4096;
            if (!all_zero(p + at, k))
                break;
            at += k;
        }
    }
    return 0;
}

static int make_file(xdisk *d, xsrc *x, const xnode *n, int dir)
{
    int fd = -1;
    for (int tries = 0; tries < 2 && fd < 0; tries++) {
        fd = openat(dir, n->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && (errno != EEXIST || tries || remove_old(dir, n->name)))
            break;
    }
    if (fd < 0) {
        xsrc_error(x, n->path, "%s", strerror(errno));
        return -1;
    }
    int rc = xsrc_data(x, n->st.st_ino, (uint64_t)n->st.st_size, n->path, write_piece, &fd);
    if (rc && rc != -EIO)
        xsrc_error(x, n->path, "writing: %s", strerror(-rc));
    if (ftruncate(fd, n->st.st_size)) /* a trailing hole */
        xsrc_error(x, n->path, "setting its size: %s", strerror(errno));
    set_attrs(d, x, n, fd, dir);
    if (close(fd))
        xsrc_error(x, n->path, "closing: %s", strerror(errno));
    return 0;
}

static int make_link(xdisk *d, xsrc *x, const xnode *n, int dir)
{
    (void)d;
    const char *slash = strrchr(n->link, '/');
    char *parent = slash ? strndup(n->link, (size_t)(slash - n->link)) : strdup("");
    int from = parent ? open_beneath(d, parent) : -ENOMEM;
    free(parent);
    if (from < 0) {
        xsrc_error(x, n->path, "hard link to %s: %s", n->link, strerror(-from));
        return -1;
    }
    const char *leaf = slash ? slash + 1 : n->link;
    int r = linkat(from, leaf, dir, n->name, 0);
    if (r && errno == EEXIST && !remove_old(dir, n->name))
        r = linkat(from, leaf, dir, n->name, 0);
    if (r)
        xsrc_error(x, n->path, "hard link to %s: %s", n->link, strerror(errno));
    close(from);
    return r ? -1 : 0;
}

static int make_other(xdisk *d, xsrc *x, const xnode *n, int dir)
{
    const struct stat *st = &n->st;
    int r;
    for (int tries = 0;; tries++) {
        r = S_ISLNK(st->st_mode)
                ? symlinkat(n->target ? n->target : "", dir, n->name)
                : mknodat(dir, n->name, (st->st_mode & S_IFMT) | 0600, st->st_rdev);
        if (!r || errno != EEXIST || tries || remove_old(dir, n->name))
            break;
    }
    if (r) {
        xsrc_error(x, n->path, "%s", strerror(errno));
        return -1;
    }
    set_attrs(d, x, n, -1, dir);
    return 0;
}

static int make_dir(xdisk *d, xsrc *x, const xnode *n, int dir)
{
    int fd = -1;
    for (int tries = 0; tries < 2 && fd < 0; tries++) {
        /* a PATH operand's parents as tar makes them; the rest 0700 until left */
        if (mkdirat(dir, n->name, n->implied ? 0777 : 0700) && errno != EEXIST)
            break;
        /* made now, or there before: entered only if a real directory */
        fd = openat(dir, n->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && (tries || remove_old(dir, n->name)))
            break;
    }
    if (fd < 0) {
        xsrc_error(x, n->path, "%s", strerror(errno));
        return -1;
    }
    if (push_fd(d, fd)) {
        close(fd);
        xsrc_error(x, n->path, "%s", strerror(ENOMEM));
        return -1;
    }
    return 0;
}

static int disk_node(void *ctx, xsrc *x, const xnode *n)
{
    xdisk *d = ctx;
    if (!*n->path) /* the root: dir itself */
        return push_fd(d, dup(d->root_fd)) ? -1 : 0;
    int dir = parent_fd(d);
    if (S_ISDIR(n->st.st_mode))
        return make_dir(d, x, n, dir);
    __atomic_add_fetch(&x->files, 1, __ATOMIC_RELAXED);
    if (n->link)
        return make_link(d, x, n, dir);
    if (S_ISREG(n->st.st_mode))
        return make_file(d, x, n, dir);
    return make_other(d, x, n, dir);
}

static void disk_dir_end(void *ctx, xsrc *x, const xnode *n)
{
    xdisk *d = ctx;
    if (!d->depth)
        return;
    int fd = d->fd[--d->depth];
    if (*n->path && !n->implied)
        set_attrs(d, x, n, fd, -1);
    close(fd);
}

int xdisk_open(xdisk **out, const char *dir, int same_owner, xsink *sink, const char *prog)
{
    xdisk *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->same_owner = same_owner;
    if (mkdir(dir, 0700) == 0)
        d->made_root = 1;
    else if (errno != EEXIST) {
        fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
        free(d);
        return -1;
    }
    d->root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->root_fd < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(errno));
        free(d);
        return -1;
    }
    sink->ctx = d;
    sink->node = disk_node;
    sink->dir_end = disk_dir_end;
    *out = d;
    return 0;
}

int xdisk_close(xdisk *d, xsrc *x, const xnode *root)
{
    while (d->depth)
        close(d->fd[--d->depth]);
    if (d->made_root && root)
        set_attrs(d, x, root, d->root_fd, -1);
    close(d->root_fd);
    free(d->fd);
    free(d);
    return 0;
}
