/* Extended attributes: one blob per inode, a sequence of
 * {u8 name_len, u32 value_len, name, value}, replaced whole by a record. */
#include <stdio.h>

#include "fs_internal.h"

/* Finds name in the blob: its record's position and total length. */
static int xattr_find(const struct inode *in, const char *name, size_t n, uint32_t *pos,
                      uint32_t *rlen)
{
    uint32_t p = 0;
    while (p < in->xlen) {
        uint32_t nl = in->xattr[p], vl = load_le32(in->xattr + p + 1);
        if (nl == n && !memcmp(in->xattr + p + 5, name, n)) {
            *pos = p;
            *rlen = 5 + nl + vl;
            return 1;
        }
        p += 5 + nl + vl;
    }
    return 0;
}

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
    uint32_t pos = 0, rlen = 0;
    uint8_t *b = NULL;
    if (!in) {
        rc = -ENOENT;
        goto out;
    }
    int found = xattr_find(in, name, n, &pos, &rlen);
    if ((flags & GMTF_XATTR_CREATE) && found) {
        rc = -EEXIST;
        goto out;
    }
    if ((flags & GMTF_XATTR_REPLACE) && !found) {
        rc = -ENODATA;
        goto out;
    }
    uint64_t len = in->xlen - rlen + 5 + n + size;
    if (len > XATTR_BLOB_MAX) {
        rc = -ENOSPC;
        goto out;
    }
    b = malloc(len);
    if (!b) {
        rc = -ENOMEM;
        goto out;
    }
    /* Others keep their order; the new value goes last. */
    if (in->xlen) {
        memcpy(b, in->xattr, pos);
        memcpy(b + pos, in->xattr + pos + rlen, in->xlen - pos - rlen);
    }
    uint8_t *p = b + in->xlen - rlen;
    p[0] = (uint8_t)n;
    store_le32(p + 1, (uint32_t)size);
    memcpy(p + 5, name, n);
    if (size)
        memcpy(p + 5 + n, value, size);
    now_ts(&in->ct_s, &in->ct_ns);
    rc = rec_xattr(fs, ino, b, (uint32_t)len);
    if (!rc)
        rc = rec_inode(fs, in);
out:
    free(b);
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
    uint32_t pos, rlen;
    long r;
    if (!in)
        r = -ENOENT;
    else if (!xattr_find(in, name, n, &pos, &rlen))
        r = -ENODATA;
    else {
        uint32_t vl = rlen - 5 - (uint32_t)n;
        if (size == 0)
            r = vl;
        else if (size < vl)
            r = -ERANGE;
        else {
            memcpy(buf, in->xattr + pos + 5 + n, vl);
            r = vl;
        }
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
    uint32_t pos, rlen;
    if (!in)
        rc = -ENOENT;
    else if (!xattr_find(in, name, n, &pos, &rlen))
        rc = -ENODATA;
    else {
        uint32_t len = in->xlen - rlen;
        uint8_t *b = len ? malloc(len) : NULL;
        if (len && !b)
            rc = -ENOMEM;
        else {
            if (len) {
                memcpy(b, in->xattr, pos);
                memcpy(b + pos, in->xattr + pos + rlen, in->xlen - pos - rlen);
            }
            now_ts(&in->ct_s, &in->ct_ns);
            rc = rec_xattr(fs, ino, b, len);
            if (!rc)
                rc = rec_inode(fs, in);
            free(b);
        }
    }
    FS_UNLOCK(fs);
    return rc;
}
