/* mkfs.gmtf's import (mkfs_import.h): a directory walk and a libarchive
 * walk, both into the filesystem library's calls. */
#include "mkfs_import.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "gmtfc.h"

#define COPY_BUF (1u << 20)

struct mkfs_dir_attr {
    uint64_t ino;
    unsigned set; /* GMTF_SET_* */
    struct stat st;
};

/* A hard-linked source inode and its inode in the image (0: a free slot). */
struct mkfs_link {
    dev_t dev;
    ino_t ino;
    uint64_t gino;
};

/* ---- messages and progress ---------------------------------------------------------- */

static void warnx_(mkfs_import *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnx_(mkfs_import *c, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_progress_printf(&c->line, "%s: %s\n", c->prog, msg);
    c->errors++;
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* What the progress thread shows, published by the import as it goes:
 * the thread never calls into libarchive or the library itself. The
 * stored bytes come from gmtf_fs_get_info, which walks every inode: at
 * most every two seconds. */
static void note_progress(mkfs_import *c)
{
    if (c->line.mode == CLI_PROGRESS_OFF)
        return;
    STORE(c->pub.entries, c->files + c->dirs + c->symlinks + c->others + c->links);
    STORE(c->pub.bytes, c->bytes_in);
    if (LOAD(c->gmz_pos)) /* the position in the compressed file */
        STORE(c->pub.src_pos, LOAD(c->gmz_pos));
    else if (c->ar)
        STORE(c->pub.src_pos, (uint64_t)archive_filter_bytes(c->ar, -1));
    double now = cli_now();
    if (now - c->info_at >= 2) {
        gmtf_fs_info info;
        gmtf_fs_get_info(c->fs, &info);
        c->info_at = cli_now();
        STORE(c->pub.stored, info.stored_bytes);
        STORE(c->pub.flushed, c->bytes_in > info.dirty_bytes ? c->bytes_in - info.dirty_bytes : 0);
    }
}

/* A write that stays in the library long is a flush compressing what
 * waited in the write-back cache: the line says so. */
static long fs_write_noted(mkfs_import *c, uint64_t ino, const void *buf, size_t n, uint64_t off)
{
    STORE(c->pub.write_since_ms, (uint64_t)(cli_now() * 1000));
    long w = gmtf_fs_write(c->fs, ino, buf, n, off);
    STORE(c->pub.write_since_ms, 0);
    return w;
}

static void progress_tick(void *arg, int final)
{
    mkfs_import *c = arg;
    uint64_t since = LOAD(c->pub.write_since_ms), stored = LOAD(c->pub.stored);
    uint64_t flushed = LOAD(c->pub.flushed);
    cli_work w = {
        .files = LOAD(c->pub.entries), .bytes = LOAD(c->pub.bytes), .bytes_total = c->src_bytes};
    if (c->src_total) { /* an archive: how far into it */
        w.done = LOAD(c->pub.src_pos);
        w.total = c->src_total;
    } else if (c->src_bytes) { /* a directory: how much of its data */
        w.done = w.bytes;
        w.total = c->src_bytes;
        w.files_total = c->src_entries;
    }
    if (final) {
        w.done = w.total;
        w.note = NULL;
    } else if (since && cli_now() * 1000 - (double)since > 1000) {
        w.note = "compressing";
    }
    /* the ratio of what is stored so far: the bytes flushed over their frames */
    if (stored && flushed) {
        w.stored = stored;
        w.stored_of = flushed;
    }
    cli_progress_work(&c->line, &w, final);
}

static char **dir_names(const char *path, size_t *count);

/* Files and data bytes under path (for the percentage and the ETA): the
 * allocated bytes of regular files, as the import reads no holes. */
static void count_tree(mkfs_import *c, const char *path, int depth)
{
    size_t n = 0;
    char **names = depth < 4096 ? dir_names(path, &n) : NULL;
    for (size_t i = 0; names && i < n; i++) {
        size_t len = strlen(path) + strlen(names[i]) + 2;
        char *p = malloc(len);
        struct stat st;
        if (p) {
            snprintf(p, len, "%s/%s", path, names[i]);
            if (!lstat(p, &st)) {
                c->src_entries++;
                if (S_ISREG(st.st_mode)) {
                    uint64_t alloc = (uint64_t)st.st_blocks * 512;
                    c->src_bytes += alloc < (uint64_t)st.st_size ? alloc : (uint64_t)st.st_size;
                } else if (S_ISDIR(st.st_mode)) {
                    count_tree(c, p, depth + 1);
                }
            }
            free(p);
        }
        free(names[i]);
    }
    free(names);
}

/* ---- attributes ----------------------------------------------------------------- */

#define SET_ALL_TIMES (GMTF_SET_ATIME | GMTF_SET_MTIME | GMTF_SET_CTIME)
#define SET_ALL (GMTF_SET_UID | GMTF_SET_GID | GMTF_SET_MODE | SET_ALL_TIMES)

/* With SOURCE_DATE_EPOCH, no time after it (reproducible-builds.org's
 * clamping): a copy of a tree has new ctimes and atimes at every run. */
static void clamp_time(const mkfs_import *c, struct timespec *t)
{
    if (c->epoch >= 0 && t->tv_sec >= c->epoch) {
        t->tv_sec = (time_t)c->epoch;
        t->tv_nsec = 0;
    }
}

static void set_attrs_mask(mkfs_import *c, uint64_t ino, const struct stat *st, unsigned set,
                           const char *path)
{
    struct stat cs = *st;
    clamp_time(c, &cs.st_atim);
    clamp_time(c, &cs.st_mtim);
    clamp_time(c, &cs.st_ctim);
    if (S_ISLNK(st->st_mode))
        set &= ~(unsigned)GMTF_SET_MODE;
    int rc = gmtf_fs_setattr(c->fs, ino, &cs, set, NULL);
    if (rc)
        warnx_(c, "%s: setting attributes: %s", path, strerror(-rc));
}

static void set_attrs(mkfs_import *c, uint64_t ino, const struct stat *st, const char *path)
{
    set_attrs_mask(c, ino, st, SET_ALL, path);
}

/* Directories get their attributes at the end, in the order they were
 * named: children change a directory's times, and of two entries for one
 * directory (an archive may name it twice, or after a member made it) the
 * later wins. */
static void defer_dir_mask(mkfs_import *c, uint64_t ino, const struct stat *st, unsigned set)
{
    for (size_t i = c->ndattr; i-- > 0 && i + 64 > c->ndattr;)
        if (c->dattr[i].ino == ino && c->dattr[i].set == set) {
            c->dattr[i].st = *st;
            return;
        }
    if (c->ndattr == c->dattr_cap) {
        c->dattr_cap = c->dattr_cap ? c->dattr_cap * 2 : 256;
        c->dattr = realloc(c->dattr, c->dattr_cap * sizeof *c->dattr);
        if (!c->dattr) {
            fprintf(stderr, "%s: out of memory\n", c->prog);
            exit(CLI_EXIT_OPERATIONAL);
        }
    }
    c->dattr[c->ndattr++] = (struct mkfs_dir_attr){ino, set, *st};
}

static void defer_dir(mkfs_import *c, uint64_t ino, const struct stat *st)
{
    defer_dir_mask(c, ino, st, SET_ALL);
}

/* A directory mkfs makes without a source entry (the root of an archive
 * without one, a member's missing parents): with SOURCE_DATE_EPOCH it
 * gets that time instead of now. */
static void implied_dir(mkfs_import *c, uint64_t ino)
{
    if (c->epoch < 0)
        return;
    struct stat st = {.st_mode = S_IFDIR | 0755};
    st.st_atim.tv_sec = st.st_mtim.tv_sec = st.st_ctim.tv_sec = (time_t)c->epoch;
    defer_dir_mask(c, ino, &st, SET_ALL_TIMES);
}

/* ---- hard links: (device, inode) of the source -> inode in the image --------------- */

static size_t link_slot(const mkfs_import *c, dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31; /* splitmix64's finish: every bit reaches the low ones */
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    size_t i = (size_t)h & (c->lk_cap - 1);
    while (c->lk[i].gino && (c->lk[i].dev != dev || c->lk[i].ino != ino))
        i = (i + 1) & (c->lk_cap - 1);
    return i;
}

static uint64_t link_find(mkfs_import *c, dev_t dev, ino_t ino)
{
    return c->lk_cap ? c->lk[link_slot(c, dev, ino)].gino : 0;
}

static void link_add(mkfs_import *c, dev_t dev, ino_t ino, uint64_t gino)
{
    if (2 * (c->nlk + 1) > c->lk_cap) { /* at most half full */
        struct mkfs_link *old = c->lk;
        size_t n = c->lk_cap;
        c->lk_cap = n ? 2 * n : 256;
        c->lk = calloc(c->lk_cap, sizeof *c->lk);
        if (!c->lk) {
            fprintf(stderr, "%s: out of memory\n", c->prog);
            exit(CLI_EXIT_OPERATIONAL);
        }
        for (size_t i = 0; i < n; i++)
            if (old[i].gino)
                c->lk[link_slot(c, old[i].dev, old[i].ino)] = old[i];
        free(old);
    }
    size_t i = link_slot(c, dev, ino);
    c->nlk += !c->lk[i].gino;
    c->lk[i] = (struct mkfs_link){dev, ino, gino};
}

/* gmtf_fs_link sets the target's ctime to now: the link keeps the one the
 * source gave it. */
static int link_keep_times(mkfs_import *c, uint64_t target, uint64_t parent, const char *name,
                           gmtf_entry *e)
{
    struct stat before;
    int have = gmtf_fs_getattr(c->fs, target, &before) == 0;
    int rc = gmtf_fs_link(c->fs, target, parent, name, e);
    if (!rc && have)
        gmtf_fs_setattr(c->fs, target, &before, GMTF_SET_CTIME, NULL);
    return rc;
}

/* Removes name in dir if present and not a directory (archives may repeat
 * an entry; the last one wins). Returns the existing inode when it is a
 * directory and want_dir. */
static uint64_t replace_name(mkfs_import *c, uint64_t dir, const char *name, int want_dir)
{
    gmtf_entry e;
    if (gmtf_fs_lookup(c->fs, dir, name, &e))
        return 0;
    if (S_ISDIR(e.attr.st_mode)) {
        if (want_dir)
            return e.attr.st_ino;
        gmtf_fs_rmdir(c->fs, dir, name);
    } else {
        gmtf_fs_unlink(c->fs, dir, name);
    }
    return 0;
}

/* ---- directory source --------------------------------------------------------------- */

static void copy_xattrs_fd(mkfs_import *c, const char *path, uint64_t ino)
{
    char list[65536];
    ssize_t n = llistxattr(path, list, sizeof list);
    if (n <= 0)
        return;
    for (char *k = list; k < list + n; k += strlen(k) + 1) {
        ssize_t v = lgetxattr(path, k, c->buf, COPY_BUF);
        if (v < 0) {
            warnx_(c, "%s: xattr %s: %s", path, k, strerror(errno));
            continue;
        }
        int rc = gmtf_fs_setxattr(c->fs, ino, k, c->buf, (size_t)v, 0);
        if (rc)
            warnx_(c, "%s: xattr %s: %s", path, k, strerror(-rc));
    }
}

static int copy_file_data(mkfs_import *c, int fd, uint64_t ino, uint64_t size, const char *path)
{
    uint64_t off = 0;
    while (off < size) {
        /* Skip holes of sparse files. */
        off_t d = lseek(fd, (off_t)off, SEEK_DATA);
        if (d < 0)
            break; /* no more data: the rest is a hole */
        off_t h = lseek(fd, d, SEEK_HOLE);
        if (h < 0)
            h = (off_t)size;
        off = (uint64_t)d;
        while (off < (uint64_t)h) {
            size_t want = (uint64_t)h - off < COPY_BUF ? (size_t)((uint64_t)h - off) : COPY_BUF;
            ssize_t r = pread(fd, c->buf, want, (off_t)off);
            if (r < 0) {
                warnx_(c, "%s: read at %" PRIu64 ": %s", path, off, strerror(errno));
                return -1;
            }
            if (r == 0)
                break;
            long w = fs_write_noted(c, ino, c->buf, (size_t)r, off);
            if (w < 0) {
                warnx_(c, "%s: writing to the image: %s", path, strerror((int)-w));
                return (int)w == -ENOSPC ? -2 : -1;
            }
            off += (uint64_t)r;
            c->bytes_in += (uint64_t)r;
            note_progress(c);
        }
    }
    struct stat ns = {.st_size = (off_t)size};
    gmtf_fs_setattr(c->fs, ino, &ns, GMTF_SET_SIZE, NULL); /* trailing hole */
    return 0;
}

static int add_tree(mkfs_import *c, const char *path, uint64_t dir_ino);

static int add_path(mkfs_import *c, const char *path, const char *name, uint64_t parent)
{
    struct stat st;
    if (lstat(path, &st)) {
        warnx_(c, "%s: %s", path, strerror(errno));
        return 0;
    }
    gmtf_entry e;
    int rc = 0;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
        uint64_t g = link_find(c, st.st_dev, st.st_ino);
        if (g) {
            rc = link_keep_times(c, g, parent, name, &e);
            if (rc)
                warnx_(c, "%s: hard link: %s", path, strerror(-rc));
            c->links++;
            return 0;
        }
    }
    if (S_ISDIR(st.st_mode)) {
        rc = gmtf_fs_mkdir(c->fs, parent, name, st.st_mode & 07777, st.st_uid, st.st_gid, &e);
        if (rc) {
            warnx_(c, "%s: %s", path, strerror(-rc));
            return rc == -ENOSPC ? -2 : 0;
        }
        c->dirs++;
        copy_xattrs_fd(c, path, e.attr.st_ino);
        int r = add_tree(c, path, e.attr.st_ino);
        defer_dir(c, e.attr.st_ino, &st);
        return r;
    }
    if (S_ISLNK(st.st_mode)) {
        char t[4097];
        ssize_t n = readlink(path, t, sizeof t - 1);
        if (n < 0) {
            warnx_(c, "%s: %s", path, strerror(errno));
            return 0;
        }
        t[n] = 0;
        rc = gmtf_fs_symlink(c->fs, parent, name, t, st.st_uid, st.st_gid, &e);
        c->symlinks++;
    } else if (S_ISREG(st.st_mode)) {
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            warnx_(c, "%s: %s", path, strerror(errno));
            return 0;
        }
        rc = gmtf_fs_create(c->fs, parent, name, st.st_mode & 07777, st.st_uid, st.st_gid, 0, &e);
        if (!rc) {
            int r = copy_file_data(c, fd, e.attr.st_ino, (uint64_t)st.st_size, path);
            gmtf_fs_release(c->fs, e.attr.st_ino);
            if (r == -2) {
                close(fd);
                return -2;
            }
            if (st.st_nlink > 1)
                link_add(c, st.st_dev, st.st_ino, e.attr.st_ino);
        }
        close(fd);
        c->files++;
    } else {
        rc = gmtf_fs_mknod(c->fs, parent, name, st.st_mode, st.st_rdev, st.st_uid, st.st_gid, &e);
        c->others++;
    }
    if (rc) {
        warnx_(c, "%s: %s", path, strerror(-rc));
        return rc == -ENOSPC ? -2 : 0;
    }
    copy_xattrs_fd(c, path, e.attr.st_ino);
    set_attrs(c, e.attr.st_ino, &st, path);
    note_progress(c);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of directory path but . and .., sorted by their bytes: the
 * image never depends on the order readdir gives (reproducible images).
 * NULL with errno set on failure. */
static char **dir_names(const char *path, size_t *count)
{
    DIR *d = opendir(path);
    if (!d)
        return NULL;
    char **v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nv = realloc(v, cap * sizeof *v);
            if (!nv)
                goto fail;
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name)))
            goto fail;
        n++;
        errno = 0;
    }
    if (errno)
        goto fail;
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, name_cmp);
    *count = n;
    return v ? v : calloc(1, sizeof *v);
fail : {
    int e = errno ? errno : ENOMEM;
    while (n)
        free(v[--n]);
    free(v);
    closedir(d);
    errno = e;
    return NULL;
}
}

static int add_tree(mkfs_import *c, const char *path, uint64_t dir_ino)
{
    size_t n = 0;
    char **names = dir_names(path, &n);
    if (!names) {
        warnx_(c, "%s: %s", path, strerror(errno));
        return 0;
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (c->stop && *c->stop) {
            rc = -4;
            break;
        }
        size_t len = strlen(path) + strlen(names[i]) + 2;
        char *p = malloc(len);
        if (!p) {
            rc = -1;
            break;
        }
        snprintf(p, len, "%s/%s", path, names[i]);
        rc = add_path(c, p, names[i], dir_ino);
        free(p);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int fill_from_dir(mkfs_import *c, const char *src)
{
    struct stat st;
    if (stat(src, &st)) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, src, strerror(errno));
        return -1;
    }
    int rc = add_tree(c, src, GMTF_ROOT_INO);
    copy_xattrs_fd(c, src, GMTF_ROOT_INO);
    defer_dir(c, GMTF_ROOT_INO, &st);
    return rc;
}

/* ---- archive source ---------------------------------------------------------------------- */

/* Walks path's directories from the root, creating missing ones. Returns
 * the parent's inode and points *leaf at the last component. */
/* The directory that holds path's last component (made when missing), and
 * *leaf that component; 0 (and *leaf untouched) when a parent is not a
 * directory. */
static uint64_t walk_parent(mkfs_import *c, char *path, char **leaf)
{
    uint64_t dir = GMTF_ROOT_INO;
    char *p = path, *slash;
    while (*p == '/')
        p++;
    while ((slash = strchr(p, '/'))) {
        *slash = 0;
        if (*p && strcmp(p, ".")) {
            gmtf_entry e;
            int rc = gmtf_fs_lookup(c->fs, dir, p, &e);
            if (rc == -ENOENT) {
                rc = gmtf_fs_mkdir(c->fs, dir, p, 0755, 0, 0, &e);
                c->dirs += rc == 0; /* the archive names only its files */
                if (rc == 0)
                    implied_dir(c, e.attr.st_ino);
            }
            if (rc || !S_ISDIR(e.attr.st_mode)) {
                *slash = '/';
                return 0;
            }
            dir = e.attr.st_ino;
        }
        *slash = '/';
        p = slash + 1;
        while (*p == '/')
            p++;
    }
    *leaf = p;
    return dir;
}

/* Does path have a ".." component? Such members are not imported: they
 * would name something outside the tree (or the root itself). */
static int has_dotdot(const char *path)
{
    for (const char *p = path; (p = strstr(p, "..")); p += 2)
        if ((p == path || p[-1] == '/') && (p[2] == 0 || p[2] == '/'))
            return 1;
    return 0;
}

static uint64_t lookup_path(mkfs_import *c, const char *path)
{
    char *dup = strdup(path), *leaf;
    uint64_t dir = walk_parent(c, dup, &leaf), ino = 0;
    gmtf_entry e;
    if (dir && *leaf && strcmp(leaf, ".") && !gmtf_fs_lookup(c->fs, dir, leaf, &e))
        ino = e.attr.st_ino;
    else if (dir && (!*leaf || !strcmp(leaf, ".")))
        ino = dir;
    free(dup);
    return ino;
}

static void entry_stat(struct archive_entry *ae, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_mode = archive_entry_mode(ae);
    st->st_uid = (uid_t)archive_entry_uid(ae);
    st->st_gid = (gid_t)archive_entry_gid(ae);
    st->st_rdev = archive_entry_rdev(ae);
    st->st_size = archive_entry_size(ae);
    st->st_mtim.tv_sec = archive_entry_mtime(ae);
    st->st_mtim.tv_nsec = archive_entry_mtime_nsec(ae);
    if (archive_entry_atime_is_set(ae)) {
        st->st_atim.tv_sec = archive_entry_atime(ae);
        st->st_atim.tv_nsec = archive_entry_atime_nsec(ae);
    } else {
        st->st_atim = st->st_mtim;
    }
    if (archive_entry_ctime_is_set(ae)) {
        st->st_ctim.tv_sec = archive_entry_ctime(ae);
        st->st_ctim.tv_nsec = archive_entry_ctime_nsec(ae);
    } else {
        st->st_ctim = st->st_mtim;
    }
}

static void entry_xattrs(mkfs_import *c, struct archive_entry *ae, uint64_t ino, const char *path)
{
    const char *name;
    const void *val;
    size_t size;
    archive_entry_xattr_reset(ae);
    while (archive_entry_xattr_next(ae, &name, &val, &size) == ARCHIVE_OK) {
        int rc = gmtf_fs_setxattr(c->fs, ino, name, val, size, 0);
        if (rc)
            warnx_(c, "%s: xattr %s: %s", path, name, strerror(-rc));
    }
}

static int archive_data(mkfs_import *c, uint64_t ino, const char *path)
{
    const void *blk;
    size_t len;
    la_int64_t off;
    int r;
    while ((r = archive_read_data_block(c->ar, &blk, &len, &off)) == ARCHIVE_OK) {
        if (!len)
            continue;
        long w = fs_write_noted(c, ino, blk, len, (uint64_t)off);
        if (w < 0) {
            warnx_(c, "%s: writing to the image: %s", path, strerror((int)-w));
            return (int)w == -ENOSPC ? -2 : -1;
        }
        c->bytes_in += len;
        note_progress(c);
    }
    if (r != ARCHIVE_EOF) {
        warnx_(c, "%s: %s", path, archive_error_string(c->ar));
        return r == ARCHIVE_FATAL ? -3 : -1;
    }
    return 0;
}

static int add_entry_(mkfs_import *c, struct archive_entry *ae);

static int add_entry(mkfs_import *c, struct archive_entry *ae)
{
    int rc = add_entry_(c, ae);
    note_progress(c);
    return rc;
}

static int add_entry_(mkfs_import *c, struct archive_entry *ae)
{
    const char *path = archive_entry_pathname(ae);
    if (!path)
        return 0;
    if (has_dotdot(path)) {
        warnx_(c, "%s: a path with '..' is not imported", path);
        return 0;
    }
    char *dup = strdup(path), *leaf = dup;
    if (!dup) {
        warnx_(c, "%s: %s", path, strerror(ENOMEM)); /* reported and counted */
        return 0;
    }
    /* leaf stays dup when a parent is not a directory (walk_parent sets it
     * only on success; it pointed into the member before's freed copy) */
    uint64_t parent = walk_parent(c, dup, &leaf);
    size_t ll = strlen(leaf);
    while (ll && leaf[ll - 1] == '/')
        leaf[--ll] = 0;
    struct stat st;
    entry_stat(ae, &st);
    gmtf_entry e;
    int rc = 0;
    if (!parent) {
        warnx_(c, "%s: a parent is not a directory", path);
        goto out;
    }
    if (!*leaf || !strcmp(leaf, ".")) { /* the root itself */
        if (S_ISDIR(st.st_mode)) {
            entry_xattrs(c, ae, parent, path);
            defer_dir(c, parent, &st);
        }
        goto out;
    }
    const char *hl = archive_entry_hardlink(ae);
    if (hl) {
        uint64_t target = has_dotdot(hl) ? 0 : lookup_path(c, hl);
        replace_name(c, parent, leaf, 0);
        rc = target ? link_keep_times(c, target, parent, leaf, &e) : -ENOENT;
        if (rc) {
            /* Reported and counted; the members after it still come in. */
            warnx_(c, "%s: hard link to %s: %s", path, hl,
                   target ? strerror(-rc) : "no such member before it");
            rc = rc == -ENOSPC ? -2 : 0;
            goto out;
        }
        c->links++;
        if (archive_entry_size_is_set(ae) && archive_entry_size(ae) > 0) {
            rc = archive_data(c, target, path); /* a link entry may carry the data */
            set_attrs(c, target, &st, path);    /* and its attributes with it */
        }
        rc = rc <= -2 ? rc : 0;
        goto out;
    }
    switch (st.st_mode & S_IFMT) {
    case S_IFDIR: {
        uint64_t ino = replace_name(c, parent, leaf, 1);
        if (!ino) {
            rc = gmtf_fs_mkdir(c->fs, parent, leaf, st.st_mode & 07777, st.st_uid, st.st_gid, &e);
            ino = e.attr.st_ino;
            c->dirs += rc == 0;
        }
        if (!rc) {
            entry_xattrs(c, ae, ino, path);
            defer_dir(c, ino, &st);
        }
        break;
    }
    case S_IFLNK:
        replace_name(c, parent, leaf, 0);
        rc = gmtf_fs_symlink(c->fs, parent, leaf,
                             archive_entry_symlink(ae) ? archive_entry_symlink(ae) : "", st.st_uid,
                             st.st_gid, &e);
        c->symlinks += rc == 0;
        break;
    case S_IFREG:
        replace_name(c, parent, leaf, 0);
        rc = gmtf_fs_create(c->fs, parent, leaf, st.st_mode & 07777, st.st_uid, st.st_gid, 0, &e);
        if (!rc) {
            int r = archive_data(c, e.attr.st_ino, path);
            if (!r && st.st_size > 0) {
                struct stat ns = {.st_size = st.st_size}; /* a trailing hole */
                gmtf_fs_setattr(c->fs, e.attr.st_ino, &ns, GMTF_SET_SIZE, NULL);
            }
            gmtf_fs_release(c->fs, e.attr.st_ino);
            c->files++;
            if (r <= -2) {
                free(dup);
                return r;
            }
        }
        break;
    default:
        replace_name(c, parent, leaf, 0);
        rc = gmtf_fs_mknod(c->fs, parent, leaf, st.st_mode, st.st_rdev, st.st_uid, st.st_gid, &e);
        c->others += rc == 0;
    }
    if (rc) {
        warnx_(c, "%s: %s", path, strerror(-rc));
        rc = rc == -ENOSPC ? -2 : 0;
        goto out;
    }
    if (!S_ISDIR(st.st_mode)) {
        entry_xattrs(c, ae, e.attr.st_ino, path);
        set_attrs(c, e.attr.st_ino, &st, path);
    }
out:
    free(dup);
    return rc;
}

/* ---- .gmz sources (gmtfc's own streams, which libarchive does not know) ---- */

/* gmtfc_decompress on a thread, from the source into a pipe that
 * libarchive reads: the archive inside is read as it is decoded. */
typedef struct gmz_feed {
    mkfs_import *c;
    gmtfc_stream *s;
    int in_fd, out_fd;
    int rc;
    gmtfc_error err;
    pthread_t thread;
} gmz_feed;

static void gmz_progress(void *arg, const gmtfc_totals *t)
{
    mkfs_import *c = arg;
    STORE(c->gmz_pos, t->in_bytes ? t->in_bytes : 1);
}

static void *gmz_run(void *arg)
{
    gmz_feed *f = arg;
    /* libarchive may stop reading (a damaged archive): then the write
     * fails with EPIPE instead of the signal ending mkfs */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    gmtfc_totals t;
    f->rc = gmtfc_decompress(f->s, f->in_fd, f->out_fd, &t, &f->err);
    close(f->out_fd);
    return NULL;
}

/* 1 when the source at fd (seekable) starts as a .gmz stream; the
 * position is back at the start. 0 otherwise (or not seekable). */
static int is_gmz(int fd)
{
    char magic[GMTFC_MARKER_LEN];
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (at < 0)
        return 0;
    ssize_t n = pread(fd, magic, sizeof magic, at);
    return n == (ssize_t)sizeof magic && !memcmp(magic, GMTFC_MAGIC, sizeof magic);
}

/* Starts decoding fd; *out_fd gets the pipe's end to read. 0 or -1. */
static int gmz_start(mkfs_import *c, gmz_feed *f, int fd, const char *src, int *out_fd)
{
    int p[2];
    gmtfc_config cfg = {.block_size = 900 * 1024, .threads = 2};
    memset(f, 0, sizeof *f);
    f->c = c;
    f->in_fd = fd;
    if (gmtfc_stream_create(&f->s, &cfg)) {
        fprintf(stderr, "%s: %s: cannot start the decoder\n", c->prog, src);
        return -1;
    }
    gmtfc_stream_set_progress(f->s, gmz_progress, c);
    if (pipe2(p, O_CLOEXEC)) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, src, strerror(errno));
        gmtfc_stream_destroy(f->s);
        return -1;
    }
    f->out_fd = p[1];
    if (pthread_create(&f->thread, NULL, gmz_run, f)) {
        fprintf(stderr, "%s: %s: cannot start the decoding thread\n", c->prog, src);
        close(p[0]);
        close(p[1]);
        gmtfc_stream_destroy(f->s);
        return -1;
    }
    *out_fd = p[0];
    return 0;
}

/* Waits for the decoder (read_fd: the pipe's end, closed here first so
 * that a decoder still writing stops). -1 when the stream was damaged. */
static int gmz_end(gmz_feed *f, int read_fd, const char *src)
{
    close(read_fd);
    pthread_join(f->thread, NULL);
    int rc = 0;
    /* a write error is ours: libarchive stopped reading (at the archive's
     * end marker, or on an error it reported); damage is reported here */
    if (f->rc < 0 && f->err.kind != GMTFC_ERR_WRITE) {
        fprintf(stderr, "%s: %s: %s\n", f->c->prog, src, f->err.msg);
        rc = -1;
    }
    gmtfc_stream_destroy(f->s);
    return rc;
}

static int fill_from_archive(mkfs_import *c, const char *src)
{
    struct archive *a = archive_read_new();
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    int r, fd = strcmp(src, "-") ? open(src, O_RDONLY | O_CLOEXEC) : 0;
    if (fd < 0) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, src, strerror(errno));
        archive_read_free(a);
        return -1;
    }
    gmz_feed gmz;
    int gmz_fd = -1;
    if (is_gmz(fd) && gmz_start(c, &gmz, fd, src, &gmz_fd)) {
        if (fd)
            close(fd);
        archive_read_free(a);
        return -1;
    }
    r = archive_read_open_fd(a, gmz_fd >= 0 ? gmz_fd : fd, 1 << 20);
    if (r != ARCHIVE_OK) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, src, archive_error_string(a));
        archive_read_free(a);
        if (gmz_fd >= 0)
            gmz_end(&gmz, gmz_fd, src);
        if (fd)
            close(fd);
        return -1;
    }
    c->ar = a;
    implied_dir(c, GMTF_ROOT_INO); /* unless the archive names it */
    struct archive_entry *ae;
    int rc = 0;
    while (!rc && (r = archive_read_next_header(a, &ae)) != ARCHIVE_EOF) {
        if (c->stop && *c->stop) {
            rc = -4;
            break;
        }
        if (r == ARCHIVE_FATAL) {
            fprintf(stderr, "%s: %s: %s\n", c->prog, src, archive_error_string(a));
            rc = -1;
            break;
        }
        const char *why = r == ARCHIVE_WARN ? archive_error_string(a) : NULL;
        if (why && strstr(why, "can't be converted")) /* a name not in UTF-8: kept as bytes */
            cli_progress_printf(&c->line,
                                "%s: note: %s: a name that is not UTF-8, kept as its "
                                "bytes\n",
                                c->prog, archive_entry_pathname(ae));
        else if (why)
            warnx_(c, "%s: %s", src, why);
        rc = add_entry(c, ae);
        if (rc == -3) {
            fprintf(stderr, "%s: %s: archive is damaged\n", c->prog, src);
            rc = -1;
        }
        if (rc == -1)
            rc = 0; /* one bad entry: reported, keep going */
    }
    c->ar = NULL;
    archive_read_free(a);
    if (gmz_fd >= 0 && gmz_end(&gmz, gmz_fd, src) && !rc)
        rc = -1;
    if (fd)
        close(fd);
    return rc;
}

/* ---- the import ----------------------------------------------------------------------- */

int mkfs_import_init(mkfs_import *im, gmtf_fs *fs, const char *prog, int quiet)
{
    memset(im, 0, sizeof *im);
    im->fs = fs;
    im->prog = prog;
    cli_progress_init(&im->line, prog, quiet, 1);
    im->epoch = -1;
    im->buf = malloc(COPY_BUF);
    return im->buf ? 0 : -ENOMEM;
}

int mkfs_import_from(mkfs_import *im, const char *src)
{
    struct stat st;
    int rc;
    if (strcmp(src, "-") && stat(src, &st)) {
        fprintf(stderr, "%s: --from %s: %s\n", im->prog, src, strerror(errno));
        rc = -1;
    } else if (strcmp(src, "-") && S_ISDIR(st.st_mode)) {
        if (im->line.mode != CLI_PROGRESS_OFF)
            count_tree(im, src, 0);
        cli_progress_start(&im->line, progress_tick, im);
        rc = fill_from_dir(im, src);
    } else {
        if (strcmp(src, "-") && S_ISREG(st.st_mode))
            im->src_total = (uint64_t)st.st_size;
        cli_progress_start(&im->line, progress_tick, im);
        rc = fill_from_archive(im, src);
    }
    for (size_t i = 0; i < im->ndattr; i++)
        set_attrs_mask(im, im->dattr[i].ino, &im->dattr[i].st, im->dattr[i].set, "directory");
    return rc;
}

int mkfs_import_sync(mkfs_import *im)
{
    STORE(im->pub.write_since_ms, (uint64_t)(cli_now() * 1000));
    int rc = gmtf_fs_syncfs(im->fs);
    STORE(im->pub.write_since_ms, 0);
    im->info_at = 0;
    note_progress(im);
    return rc;
}

void mkfs_import_progress_end(mkfs_import *im)
{
    cli_progress_stop(&im->line);
}

void mkfs_import_free(mkfs_import *im)
{
    cli_progress_free(&im->line);
    free(im->buf);
    free(im->dattr);
    free(im->lk);
    memset(im, 0, sizeof *im);
}
