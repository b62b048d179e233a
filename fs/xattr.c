/* Extended attributes: get, set, list, remove (the blob: xblob.c). With
 * POSIX ACLs on, the ACL names go through the ACL policy (acl.c). */
#include <stdio.h>

#include "fs_internal.h"

static int xname_ok(const char *name, size_t *n)
{
    if (!name)
        return -EINVAL;
    *n = strlen(name);
    if (*n == 0)
        return -EINVAL;
    if (*n > GMTF_FS_XATTR_NAME_MAX)
        return -ERANGE;
    return 0;
}

int gmtf_fs_setxattr(gmtf_fs *fs, uint64_t ino, const char *name, const void *value, size_t size,
                     int flags)
{
    size_t n;
    int rc = xname_ok(name, &n);
    if (rc)
        return rc;
    if (size > GMTF_FS_XATTR_SIZE_MAX)
        return -E2BIG;
    if (fs->ro)
        return -EROFS;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    if (!in)
        rc = -ENOENT;
    else if (fs->opt.posix_acl && acl_is_name(name))
        rc = acl_set(fs, in, name, value, size, flags); /* the mode follows it */
    else
        rc = xblob_set(fs, in, name, value, size, flags);
    FS_UNLOCK(fs);
    return rc;
}

long gmtf_fs_getxattr(gmtf_fs *fs, uint64_t ino, const char *name, void *buf, size_t size)
{
    size_t n;
    int rc = xname_ok(name, &n);
    if (rc)
        return rc;
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    const uint8_t *v;
    uint32_t vl;
    long r;
    if (!in)
        r = -ENOENT;
    else if (!(v = xblob_value(in, name, &vl)))
        r = -ENODATA;
    else if (size == 0)
        r = vl;
    else if (size < vl)
        r = -ERANGE;
    else {
        memcpy(buf, v, vl);
        r = vl;
    }
    FS_UNLOCK(fs);
    return r;
}

long gmtf_fs_listxattr(gmtf_fs *fs, uint64_t ino, char *buf, size_t size)
{
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    long r = 0;
    if (!in) {
        r = -ENOENT;
    } else {
        uint32_t p = 0;
        size_t total = 0;
        while (p < in->xlen) {
            uint32_t nl = in->xattr[p], vl = load_le32(in->xattr + p + 1);
            if (size && total + nl + 1 <= size) {
                memcpy(buf + total, in->xattr + p + 5, nl);
                buf[total + nl] = 0;
            }
            total += nl + 1;
            p += 5 + nl + vl;
        }
        r = size && total > size ? -ERANGE : (long)total;
    }
    FS_UNLOCK(fs);
    return r;
}

int gmtf_fs_removexattr(gmtf_fs *fs, uint64_t ino, const char *name)
{
    size_t n;
    int rc = xname_ok(name, &n);
    if (rc)
        return rc;
    if (fs->ro)
        return -EROFS;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    rc = in ? xblob_remove(fs, in, name) : -ENOENT;
    FS_UNLOCK(fs);
    return rc;
}
