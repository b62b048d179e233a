/* mkfs.gmtf's import (mkfs_import.h): a directory walk and a libarchive
 * walk, both into the filesystem library's calls. */
#include "mkfs_import.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#define COPY_BUF (1u << 20)

struct mkfs_dir_attr {
    uint64_t ino;
    struct stat st;
};

struct mkfs_link {
    dev_t dev;
    ino_t ino;
    uint64_t gino;
};

/* ---- messages and progress ---------------------------------------------------------- */

static void warnx_(mkfs_import *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnx_(mkfs_import *c, const char *fmt, ...)
{
    va_list ap;
    cli_progress_clear(&c->line);
    fprintf(stderr, "%s: ", c->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    c->errors++;
}

static void draw(mkfs_import *c, int final)
{
    if (!cli_progress_due(&c->line, final))
        return;
    gmtf_fs_info info;
    gmtf_fs_get_info(c->fs, &info);
    double el = c->line.last - c->line.start, mbs = el > 0 ? c->bytes_in / el / 1e6 : 0;
    double ratio =
        info.stored_bytes ? (double)(c->bytes_in - info.dirty_bytes) / info.stored_bytes : 0;
    char eta[32] = "";
    if (c->src_total && c->ar) {
        int64_t pos = archive_filter_bytes(c->ar, -1);
        if (pos > 0 && el > 1) {
            double left = el * ((double)c->src_total / (double)pos - 1);
            snprintf(eta, sizeof eta, " ETA %02d:%02d", (int)left / 60, (int)left % 60);
        }
    }
    cli_progress_show(&c->line,
                      "%" PRIu64 " files, %.1f MB in, %.1f MB stored, ratio %.2f, %.1f MB/s%s",
                      c->files + c->dirs + c->symlinks + c->others, c->bytes_in / 1e6,
                      info.stored_bytes / 1e6, ratio, mbs, eta);
    if (final)
        cli_progress_keep(&c->line);
}

/* ---- attributes ----------------------------------------------------------------- */

static void set_attrs(mkfs_import *c, uint64_t ino, const struct stat *st, const char *path)
{
    unsigned set = GMTF_SET_UID | GMTF_SET_GID | GMTF_SET_ATIME | GMTF_SET_MTIME | GMTF_SET_CTIME;
    if (!S_ISLNK(st->st_mode))
        set |= GMTF_SET_MODE;
    int rc = gmtf_fs_setattr(c->fs, ino, st, set, NULL);
    if (rc)
        warnx_(c, "%s: setting attributes: %s", path, strerror(-rc));
}

static void defer_dir(mkfs_import *c, uint64_t ino, const struct stat *st)
{
    for (size_t i = c->ndattr; i-- > 0 && i + 64 > c->ndattr;)
        if (c->dattr[i].ino == ino) { /* an archive may name a directory twice */
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
    c->dattr[c->ndattr++] = (struct mkfs_dir_attr){ino, *st};
}

static uint64_t link_find(mkfs_import *c, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < c->nlk; i++)
        if (c->lk[i].dev == dev && c->lk[i].ino == ino)
            return c->lk[i].gino;
    return 0;
}

static void link_add(mkfs_import *c, dev_t dev, ino_t ino, uint64_t gino)
{
    if (c->nlk == c->lk_cap) {
        c->lk_cap = c->lk_cap ? c->lk_cap * 2 : 64;
        c->lk = realloc(c->lk, c->lk_cap * sizeof *c->lk);
        if (!c->lk) {
            fprintf(stderr, "%s: out of memory\n", c->prog);
            exit(CLI_EXIT_OPERATIONAL);
        }
    }
    c->lk[c->nlk++] = (struct mkfs_link){dev, ino, gino};
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
            long w = gmtf_fs_write(c->fs, ino, c->buf, (size_t)r, off);
            if (w < 0) {
                warnx_(c, "%s: writing to the image: %s", path, strerror((int)-w));
                return (int)w == -ENOSPC ? -2 : -1;
            }
            off += (uint64_t)r;
            c->bytes_in += (uint64_t)r;
            draw(c, 0);
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
            rc = gmtf_fs_link(c->fs, g, parent, name, &e);
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
    draw(c, 0);
    return 0;
}

static int add_tree(mkfs_import *c, const char *path, uint64_t dir_ino)
{
    DIR *d = opendir(path);
    if (!d) {
        warnx_(c, "%s: %s", path, strerror(errno));
        return 0;
    }
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (c->stop && *c->stop) {
            rc = -4;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        size_t n = strlen(path) + strlen(de->d_name) + 2;
        char *p = malloc(n);
        if (!p) {
            rc = -1;
            break;
        }
        snprintf(p, n, "%s/%s", path, de->d_name);
        rc = add_path(c, p, de->d_name, dir_ino);
        free(p);
    }
    closedir(d);
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
        long w = gmtf_fs_write(c->fs, ino, blk, len, (uint64_t)off);
        if (w < 0) {
            warnx_(c, "%s: writing to the image: %s", path, strerror((int)-w));
            return (int)w == -ENOSPC ? -2 : -1;
        }
        c->bytes_in += len;
        draw(c, 0);
    }
    if (r != ARCHIVE_EOF) {
        warnx_(c, "%s: %s", path, archive_error_string(c->ar));
        return r == ARCHIVE_FATAL ? -3 : -1;
    }
    return 0;
}

static int add_entry(mkfs_import *c, struct archive_entry *ae)
{
    const char *path = archive_entry_pathname(ae);
    if (!path)
        return 0;
    if (has_dotdot(path)) {
        warnx_(c, "%s: a path with '..' is not imported", path);
        return 0;
    }
    char *dup = strdup(path), *leaf;
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
        rc = target ? gmtf_fs_link(c->fs, target, parent, leaf, &e) : -ENOENT;
        if (rc) {
            /* Reported and counted; the members after it still come in. */
            warnx_(c, "%s: hard link to %s: %s", path, hl,
                   target ? strerror(-rc) : "no such member before it");
            rc = rc == -ENOSPC ? -2 : 0;
            goto out;
        }
        c->links++;
        if (archive_entry_size_is_set(ae) && archive_entry_size(ae) > 0)
            rc = archive_data(c, target, path); /* a link entry may carry the data */
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

static int fill_from_archive(mkfs_import *c, const char *src)
{
    struct archive *a = archive_read_new();
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    int r;
    if (!strcmp(src, "-")) {
        r = archive_read_open_fd(a, 0, 1 << 20);
    } else {
        struct stat st;
        if (!stat(src, &st))
            c->src_total = (uint64_t)st.st_size;
        r = archive_read_open_filename(a, src, 1 << 20);
    }
    if (r != ARCHIVE_OK) {
        fprintf(stderr, "%s: %s: %s\n", c->prog, src, archive_error_string(a));
        archive_read_free(a);
        return -1;
    }
    c->ar = a;
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
        if (r == ARCHIVE_WARN)
            warnx_(c, "%s: %s", src, archive_error_string(a));
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
    return rc;
}

/* ---- the import ----------------------------------------------------------------------- */

int mkfs_import_init(mkfs_import *im, gmtf_fs *fs, const char *prog, int quiet)
{
    memset(im, 0, sizeof *im);
    im->fs = fs;
    im->prog = prog;
    cli_progress_init(&im->line, quiet);
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
        rc = fill_from_dir(im, src);
    } else {
        rc = fill_from_archive(im, src);
    }
    for (size_t i = im->ndattr; i-- > 0;)
        set_attrs(im, im->dattr[i].ino, &im->dattr[i].st, "directory");
    return rc;
}

void mkfs_import_progress_end(mkfs_import *im)
{
    draw(im, 1);
}

void mkfs_import_free(mkfs_import *im)
{
    free(im->buf);
    free(im->dattr);
    free(im->lk);
    memset(im, 0, sizeof *im);
}
