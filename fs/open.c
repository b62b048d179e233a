/* Open counts and kernel references: an unlinked inode lives while it is
 * open or (with track_lookups) looked up, and goes when the last one ends. */
#include <fcntl.h>
#include <sys/stat.h>

#include "fs_internal.h"

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
                attr_touch(in, 1);
                rec_attr_dirty(fs, in);
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
            rec_idel_unused(fs, in);
    }
    FS_UNLOCK(fs);
    return in ? 0 : -ENOENT;
}

void gmtf_fs_forget(gmtf_fs *fs, uint64_t ino, uint64_t nlookup)
{
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    if (in) {
        in->nlookup -= nlookup < in->nlookup ? nlookup : in->nlookup;
        if (!fs->ro && !in->nlink)
            rec_idel_unused(fs, in);
    }
    FS_UNLOCK(fs);
}
