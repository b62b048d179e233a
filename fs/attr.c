/* Attributes: stat of an inode, getattr and setattr, and the helpers the
 * other operations use to answer with an entry or to touch times. */
#include <sys/stat.h>

#include "fs_internal.h"

void inode_to_stat(gmtf_fs *fs, const struct inode *in, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = in->ino;
    st->st_mode = in->mode;
    st->st_nlink = in->nlink;
    st->st_uid = in->uid;
    st->st_gid = in->gid;
    st->st_rdev = in->rdev;
    st->st_size = (off_t)in->size;
    if (S_ISLNK(in->mode) && in->u.target)
        st->st_size = (off_t)strlen(in->u.target);
    st->st_blksize = (blksize_t)fs->bs;
    uint64_t stored = in->stored;
    if (S_ISREG(in->mode)) {
        /* Dirty data counts as if stored uncompressed until it is flushed. */
        for (struct dblock *d = in->dirty; d; d = d->inext)
            stored += d->cap;
    }
    st->st_blocks = (blkcnt_t)((stored + 511) / 512);
    st->st_atim.tv_sec = in->at_s;
    st->st_atim.tv_nsec = in->at_ns;
    st->st_mtim.tv_sec = in->mt_s;
    st->st_mtim.tv_nsec = in->mt_ns;
    st->st_ctim.tv_sec = in->ct_s;
    st->st_ctim.tv_nsec = in->ct_ns;
}

void attr_fill_entry(gmtf_fs *fs, struct inode *in, gmtf_entry *e, int count)
{
    if (fs->opt.track_lookups && count)
        __atomic_add_fetch(&in->nlookup, 1, __ATOMIC_RELAXED);
    if (!e)
        return;
    inode_to_stat(fs, in, &e->attr);
    e->generation = in->gen;
}

void attr_touch(struct inode *in, int mtime)
{
    now_ts(&in->ct_s, &in->ct_ns);
    if (mtime) {
        in->mt_s = in->ct_s;
        in->mt_ns = in->ct_ns;
    }
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
    rec_attr_emit(fs);
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
                attr_touch(in, 1);
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
    rc = rec_inode(fs, in);
    if (!rc && (to_set & GMTF_SET_MODE)) /* the access ACL's base entries follow */
        rc = acl_follow_chmod(fs, in);
out:
    if (!rc && out)
        inode_to_stat(fs, in, out);
    FS_UNLOCK(fs);
    return rc;
}
