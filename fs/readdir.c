/* Directory listing with stable offsets: an entry's offset is its cookie,
 * given at creation and never reused in that directory; "." and ".." are
 * offsets 1 and 2. */
#include <sys/stat.h>

#include "fs_internal.h"

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
