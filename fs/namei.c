/* Names: lookup, create, link, unlink, rename, readdir, attributes, open
 * counts. Each change is a few records (journal.c) applied at once. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

static int name_ok(const char *name, size_t *n)
{
    if (!name)
        return -EINVAL;
    *n = strlen(name);
    if (*n == 0)
        return -ENOENT;
    if (*n > GMTF_FS_NAME_MAX)
        return -ENAMETOOLONG;
    if (memchr(name, '/', *n))
        return -EINVAL;
    return 0;
}

static int is_dot(const char *name, size_t n)
{
    return (n == 1 && name[0] == '.') || (n == 2 && name[0] == '.' && name[1] == '.');
}

static void fill_entry(gmtf_fs *fs, struct inode *in, gmtf_entry *e, int count)
{
    if (fs->opt.track_lookups && count)
        __atomic_add_fetch(&in->nlookup, 1, __ATOMIC_RELAXED);
    if (!e)
        return;
    inode_to_stat(fs, in, &e->attr);
    e->generation = in->gen;
}

static struct inode *dir_get(gmtf_fs *fs, uint64_t ino, int *rc)
{
    struct inode *d = inode_get(fs, ino);
    if (!d)
        *rc = -ENOENT;
    else if (!S_ISDIR(d->mode))
        *rc = -ENOTDIR;
    else if (d->nlink == 0)
        *rc = -ENOENT; /* removed, still open */
    else
        return d;
    return NULL;
}

static void touch(struct inode *in, int mtime)
{
    now_ts(&in->ct_s, &in->ct_ns);
    if (mtime) {
        in->mt_s = in->ct_s;
        in->mt_ns = in->ct_ns;
    }
}

int gmtf_fs_lookup(gmtf_fs *fs, uint64_t parent, const char *name, gmtf_entry *e)
{
    size_t n;
    int rc = name_ok(name, &n);
    if (rc)
        return rc;
    FS_RDLOCK(fs);
    struct inode *dir = dir_get(fs, parent, &rc), *in = NULL;
    if (dir) {
        if (n == 1 && name[0] == '.')
            in = dir;
        else if (n == 2 && name[0] == '.' && name[1] == '.')
            in = inode_get(fs, dir->parent);
        else {
            struct dent *d = dent_find(fs, parent, name, n);
            in = d ? inode_get(fs, d->ino) : NULL;
            if (d && !in) {
                fs_log(fs, "directory %llu: entry '%s' names missing inode %llu",
                       (unsigned long long)parent, name, (unsigned long long)d->ino);
                rc = -EIO;
            }
        }
        if (in)
            fill_entry(fs, in, e, 1);
        else if (!rc)
            rc = -ENOENT;
    }
    FS_UNLOCK(fs);
    return rc;
}

void gmtf_fs_forget(gmtf_fs *fs, uint64_t ino, uint64_t nlookup)
{
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    if (in) {
        in->nlookup -= nlookup < in->nlookup ? nlookup : in->nlookup;
        if (!fs->ro && !in->nlink)
            inode_maybe_delete(fs, in);
    }
    FS_UNLOCK(fs);
}

int gmtf_fs_getattr(gmtf_fs *fs, uint64_t ino, struct stat *st)
{
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    if (in)
        inode_to_stat(fs, in, st);
    FS_UNLOCK(fs);
    return in ? 0 : -ENOENT;
}

int gmtf_fs_setattr(gmtf_fs *fs, uint64_t ino, const struct stat *st, unsigned to_set,
                    struct stat *out)
{
    if (fs->ro)
        return -EROFS;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    int rc = 0;
    if (!in) {
        rc = -ENOENT;
        goto out;
    }
    inode_emit_dirty(fs);
    if (to_set & GMTF_SET_SIZE) {
        if (S_ISDIR(in->mode))
            rc = -EISDIR;
        else if (!S_ISREG(in->mode))
            rc = -EINVAL;
        else if (st->st_size < 0)
            rc = -EINVAL;
        else if ((uint64_t)st->st_size != in->size) {
            rc = file_truncate_locked(fs, in, (uint64_t)st->st_size);
            if (!rc && !(to_set & (GMTF_SET_MTIME | GMTF_SET_MTIME_NOW)))
                touch(in, 1);
        }
        if (rc)
            goto out;
    }
    if (to_set & GMTF_SET_MODE)
        in->mode = (in->mode & S_IFMT) | (st->st_mode & 07777);
    if (to_set & GMTF_SET_UID)
        in->uid = st->st_uid;
    if (to_set & GMTF_SET_GID)
        in->gid = st->st_gid;
    int64_t s;
    uint32_t ns;
    now_ts(&s, &ns);
    if (to_set & GMTF_SET_ATIME_NOW) {
        in->at_s = s;
        in->at_ns = ns;
    } else if (to_set & GMTF_SET_ATIME) {
        in->at_s = st->st_atim.tv_sec;
        in->at_ns = (uint32_t)st->st_atim.tv_nsec % 1000000000u;
    }
    if (to_set & GMTF_SET_MTIME_NOW) {
        in->mt_s = s;
        in->mt_ns = ns;
    } else if (to_set & GMTF_SET_MTIME) {
        in->mt_s = st->st_mtim.tv_sec;
        in->mt_ns = (uint32_t)st->st_mtim.tv_nsec % 1000000000u;
    }
    if (to_set & GMTF_SET_CTIME) {
        in->ct_s = st->st_ctim.tv_sec;
        in->ct_ns = (uint32_t)st->st_ctim.tv_nsec % 1000000000u;
    } else {
        in->ct_s = s;
        in->ct_ns = ns;
    }
    rc = jr_inode(fs, in);
out:
    if (!rc && out)
        inode_to_stat(fs, in, out);
    FS_UNLOCK(fs);
    return rc;
}

/* Creates an inode named parent/name. Caller holds the write lock. */
static int make_node(gmtf_fs *fs, uint64_t parent, const char *name, uint32_t mode, dev_t rdev,
                     uid_t uid, gid_t gid, const char *target, struct inode **out)
{
    size_t n;
    int rc = name_ok(name, &n);
    if (rc)
        return rc;
    if (fs->ro)
        return -EROFS;
    struct inode *dir = dir_get(fs, parent, &rc);
    if (!dir)
        return rc;
    if (is_dot(name, n) || dent_find(fs, parent, name, n))
        return -EEXIST;
    uint64_t ino;
    if ((rc = inode_alloc_ino(fs, &ino)))
        return rc;
    uint64_t gen = fs->next_gen;
    rc = jr_inode_new(fs, ino, gen, mode, uid, gid, rdev, S_ISDIR(mode) ? parent : 0,
                      name_sortkey(name, n));
    if (rc)
        return rc;
    struct inode *in = inode_get(fs, ino);
    if (target && (rc = jr_link(fs, ino, target, strlen(target)))) {
        jr_idel(fs, ino);
        return rc;
    }
    if ((rc = jr_dadd(fs, parent, ino, dir->u.dir.next, name, n))) {
        jr_idel(fs, ino);
        return rc;
    }
    if (S_ISDIR(mode))
        dir->nlink++;
    touch(dir, 1);
    rc = jr_inode(fs, dir);
    *out = in;
    return rc;
}

int gmtf_fs_mknod(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                  uid_t uid, gid_t gid, gmtf_entry *e)
{
    if (S_ISDIR(mode) || S_ISLNK(mode))
        return -EINVAL;
    if (!(mode & S_IFMT))
        mode |= S_IFREG;
    if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISCHR(mode) && !S_ISBLK(mode))
        return -EINVAL;
    FS_WRLOCK(fs);
    struct inode *in;
    int rc = make_node(fs, parent, name, mode, (S_ISCHR(mode) || S_ISBLK(mode)) ? rdev : 0, uid,
                       gid, NULL, &in);
    if (!rc)
        fill_entry(fs, in, e, 1);
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_create(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                   gid_t gid, int flags, gmtf_entry *e)
{
    (void)flags;
    FS_WRLOCK(fs);
    struct inode *in;
    int rc = make_node(fs, parent, name, S_IFREG | (mode & 07777), 0, uid, gid, NULL, &in);
    if (!rc) {
        in->nopen++;
        fill_entry(fs, in, e, 1);
    }
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_mkdir(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid, gid_t gid,
                  gmtf_entry *e)
{
    FS_WRLOCK(fs);
    struct inode *in;
    int rc = make_node(fs, parent, name, S_IFDIR | (mode & 07777), 0, uid, gid, NULL, &in);
    if (!rc)
        fill_entry(fs, in, e, 1);
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_symlink(gmtf_fs *fs, uint64_t parent, const char *name, const char *target, uid_t uid,
                    gid_t gid, gmtf_entry *e)
{
    size_t tn = target ? strlen(target) : 0;
    if (tn == 0)
        return -ENOENT;
    if (tn > 4095)
        return -ENAMETOOLONG;
    FS_WRLOCK(fs);
    struct inode *in;
    int rc = make_node(fs, parent, name, S_IFLNK | 0777, 0, uid, gid, target, &in);
    if (!rc)
        fill_entry(fs, in, e, 1);
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_link(gmtf_fs *fs, uint64_t ino, uint64_t newparent, const char *newname, gmtf_entry *e)
{
    size_t n;
    int rc = name_ok(newname, &n);
    if (rc)
        return rc;
    if (fs->ro)
        return -EROFS;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino), *dir = dir_get(fs, newparent, &rc);
    if (!dir)
        goto out;
    if (!in) {
        rc = -ENOENT;
        goto out;
    }
    if (S_ISDIR(in->mode)) {
        rc = -EPERM;
        goto out;
    }
    if (in->nlink == 0) {
        rc = -ENOENT;
        goto out;
    }
    if (in->nlink >= 65000) {
        rc = -EMLINK;
        goto out;
    }
    if (is_dot(newname, n) || dent_find(fs, newparent, newname, n)) {
        rc = -EEXIST;
        goto out;
    }
    inode_emit_dirty(fs);
    if ((rc = jr_dadd(fs, newparent, ino, dir->u.dir.next, newname, n)))
        goto out;
    in->nlink++;
    touch(in, 0);
    touch(dir, 1);
    rc = jr_inode(fs, in);
    if (!rc)
        rc = jr_inode(fs, dir);
    if (!rc)
        fill_entry(fs, in, e, 1);
out:
    FS_UNLOCK(fs);
    return rc;
}

/* Drops one link of in (a directory loses all). */
static int drop_link(gmtf_fs *fs, struct inode *dir, struct inode *in)
{
    if (S_ISDIR(in->mode)) {
        in->nlink = 0;
        if (dir->nlink > 2)
            dir->nlink--;
    } else if (in->nlink) {
        in->nlink--;
    }
    touch(in, 0);
    int rc = jr_inode(fs, in);
    if (!rc && in->nlink == 0)
        inode_maybe_delete(fs, in);
    return rc;
}

static int remove_entry(gmtf_fs *fs, uint64_t parent, const char *name, int want_dir)
{
    size_t n;
    int rc = name_ok(name, &n);
    if (rc)
        return rc;
    if (fs->ro)
        return -EROFS;
    if (is_dot(name, n))
        return want_dir ? (n == 1 ? -EINVAL : -ENOTEMPTY) : -EISDIR;
    FS_WRLOCK(fs);
    struct inode *dir = dir_get(fs, parent, &rc), *in = NULL;
    struct dent *d = dir ? dent_find(fs, parent, name, n) : NULL;
    if (!dir)
        goto out;
    if (!d || !(in = inode_get(fs, d->ino))) {
        rc = d ? -EIO : -ENOENT;
        goto out;
    }
    if (want_dir && !S_ISDIR(in->mode))
        rc = -ENOTDIR;
    else if (!want_dir && S_ISDIR(in->mode))
        rc = -EISDIR;
    else if (want_dir && in->u.dir.live)
        rc = -ENOTEMPTY;
    if (rc)
        goto out;
    inode_emit_dirty(fs);
    if ((rc = jr_ddel(fs, parent, name, n)))
        goto out;
    touch(dir, 1);
    rc = drop_link(fs, dir, in);
    if (!rc)
        rc = jr_inode(fs, dir);
out:
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_unlink(gmtf_fs *fs, uint64_t parent, const char *name)
{
    return remove_entry(fs, parent, name, 0);
}

int gmtf_fs_rmdir(gmtf_fs *fs, uint64_t parent, const char *name)
{
    return remove_entry(fs, parent, name, 1);
}

/* Is directory ino equal to or below directory top? */
static int is_below(gmtf_fs *fs, uint64_t ino, uint64_t top)
{
    for (int depth = 0; depth < 100000; depth++) {
        if (ino == top)
            return 1;
        if (ino == GMTF_ROOT_INO)
            return 0;
        struct inode *in = inode_get(fs, ino);
        if (!in)
            return 0;
        ino = in->parent;
    }
    return 1; /* a loop: refuse */
}

static int move_dir(struct inode *in, struct inode *from, struct inode *to)
{
    if (!S_ISDIR(in->mode) || from == to)
        return 0;
    in->parent = to->ino;
    if (from->nlink > 2)
        from->nlink--;
    to->nlink++;
    return 0;
}

int gmtf_fs_rename(gmtf_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
                   const char *newname, unsigned flags)
{
    size_t n, nn;
    int rc = name_ok(name, &n);
    if (!rc)
        rc = name_ok(newname, &nn);
    if (rc)
        return rc;
    if (fs->ro)
        return -EROFS;
    if (flags & ~(GMTF_RENAME_NOREPLACE | GMTF_RENAME_EXCHANGE) ||
        (flags & GMTF_RENAME_NOREPLACE && flags & GMTF_RENAME_EXCHANGE))
        return -EINVAL;
    if (is_dot(name, n) || is_dot(newname, nn))
        return -EBUSY;
    FS_WRLOCK(fs);
    struct inode *from = dir_get(fs, parent, &rc), *to = from ? dir_get(fs, newparent, &rc) : NULL;
    struct inode *src = NULL, *dst = NULL;
    struct dent *sd = NULL, *dd = NULL;
    if (!to)
        goto out;
    sd = dent_find(fs, parent, name, n);
    dd = dent_find(fs, newparent, newname, nn);
    if (!sd) {
        rc = -ENOENT;
        goto out;
    }
    src = inode_get(fs, sd->ino);
    dst = dd ? inode_get(fs, dd->ino) : NULL;
    if (!src || (dd && !dst)) {
        rc = -EIO;
        goto out;
    }
    if (sd == dd)
        goto out;
    if (flags & GMTF_RENAME_EXCHANGE) {
        if (!dd) {
            rc = -ENOENT;
            goto out;
        }
        if ((S_ISDIR(src->mode) && is_below(fs, newparent, src->ino)) ||
            (S_ISDIR(dst->mode) && is_below(fs, parent, dst->ino))) {
            rc = -EINVAL;
            goto out;
        }
        inode_emit_dirty(fs);
        uint64_t si = src->ino, di = dst->ino;
        rc = jr_ddel(fs, parent, name, n);
        if (!rc)
            rc = jr_ddel(fs, newparent, newname, nn);
        if (!rc)
            rc = jr_dadd(fs, parent, di, from->u.dir.next, name, n);
        if (!rc)
            rc = jr_dadd(fs, newparent, si, to->u.dir.next, newname, nn);
        if (rc)
            goto out;
        move_dir(src, from, to);
        move_dir(dst, to, from);
        touch(src, 0);
        touch(dst, 0);
        touch(from, 1);
        touch(to, 1);
        rc = jr_inode(fs, src);
        if (!rc)
            rc = jr_inode(fs, dst);
        if (!rc)
            rc = jr_inode(fs, from);
        if (!rc && to != from)
            rc = jr_inode(fs, to);
        goto out;
    }
    if (dd) {
        if (flags & GMTF_RENAME_NOREPLACE) {
            rc = -EEXIST;
            goto out;
        }
        if (src == dst) /* two links of one file: nothing to do */
            goto out;
        if (S_ISDIR(src->mode) && !S_ISDIR(dst->mode)) {
            rc = -ENOTDIR;
            goto out;
        }
        if (!S_ISDIR(src->mode) && S_ISDIR(dst->mode)) {
            rc = -EISDIR;
            goto out;
        }
        if (S_ISDIR(dst->mode) && dst->u.dir.live) {
            rc = -ENOTEMPTY;
            goto out;
        }
    }
    if (S_ISDIR(src->mode) && is_below(fs, newparent, src->ino)) {
        rc = -EINVAL;
        goto out;
    }
    inode_emit_dirty(fs);
    if (dd) {
        if ((rc = jr_ddel(fs, newparent, newname, nn)))
            goto out;
        if ((rc = drop_link(fs, to, dst)))
            goto out;
    }
    uint64_t si = src->ino;
    rc = jr_ddel(fs, parent, name, n);
    if (!rc)
        rc = jr_dadd(fs, newparent, si, to->u.dir.next, newname, nn);
    if (rc)
        goto out;
    move_dir(src, from, to);
    touch(src, 0);
    touch(from, 1);
    touch(to, 1);
    rc = jr_inode(fs, src);
    if (!rc)
        rc = jr_inode(fs, from);
    if (!rc && to != from)
        rc = jr_inode(fs, to);
out:
    FS_UNLOCK(fs);
    return rc;
}

long gmtf_fs_readlink(gmtf_fs *fs, uint64_t ino, char *buf, size_t cap)
{
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    long rc;
    if (!in)
        rc = -ENOENT;
    else if (!S_ISLNK(in->mode) || !in->u.target)
        rc = -EINVAL;
    else {
        size_t n = strlen(in->u.target);
        memcpy(buf, in->u.target, n < cap ? n : cap);
        rc = (long)n;
    }
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_readdir(gmtf_fs *fs, uint64_t ino, uint64_t off, gmtf_fs_filldir_fn fn, void *arg)
{
    FS_RDLOCK(fs);
    int rc = 0;
    struct inode *dir = inode_get(fs, ino);
    if (!dir) {
        rc = -ENOENT;
        goto out;
    }
    if (!S_ISDIR(dir->mode)) {
        rc = -ENOTDIR;
        goto out;
    }
    struct stat st;
    memset(&st, 0, sizeof st);
    if (off == 0) {
        st.st_ino = ino;
        st.st_mode = S_IFDIR;
        if (fn(arg, ".", &st, 1))
            goto out;
    }
    if (off <= 1) {
        st.st_ino = dir->parent ? dir->parent : ino;
        st.st_mode = S_IFDIR;
        if (fn(arg, "..", &st, 2))
            goto out;
    }
    for (uint32_t i = dir_seek(dir, off < 2 ? 0 : off + 1); i < dir->u.dir.n; i++) {
        struct dent *d = dir->u.dir.v[i];
        if (!d)
            continue;
        struct inode *c = inode_get(fs, d->ino);
        st.st_ino = d->ino;
        st.st_mode = c ? c->mode & S_IFMT : 0;
        if (fn(arg, d->name, &st, d->cookie))
            break;
    }
out:
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_open(gmtf_fs *fs, uint64_t ino, int flags)
{
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    int rc = 0;
    if (!in)
        rc = -ENOENT;
    else if ((flags & O_TRUNC) && S_ISREG(in->mode) && in->size) {
        if (fs->ro)
            rc = -EROFS;
        else {
            rc = file_truncate_locked(fs, in, 0);
            if (!rc) {
                touch(in, 1);
                inode_mark_dirty(fs, in);
            }
        }
    }
    if (!rc)
        in->nopen++;
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_release(gmtf_fs *fs, uint64_t ino)
{
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    if (in) {
        if (in->nopen)
            in->nopen--;
        if (!fs->ro && in->nlink == 0)
            inode_maybe_delete(fs, in);
    }
    FS_UNLOCK(fs);
    return in ? 0 : -ENOENT;
}
