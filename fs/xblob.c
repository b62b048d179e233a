/* An inode's extended attributes as one blob, a sequence of
 * {u8 name_len, u32 value_len, name, value}, replaced whole by an XATTR
 * record: finding, setting and removing one attribute, the caller holding
 * the write lock. The operations (xattr.c) and the ACL policy (acl.c) both
 * work through these. */
#include <stdio.h>

#include "fs_internal.h"

int xblob_find(const struct inode *in, const char *name, size_t n, uint32_t *pos, uint32_t *rlen)
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

const uint8_t *xblob_value(const struct inode *in, const char *name, uint32_t *len)
{
    uint32_t pos, rlen;
    size_t n = strlen(name);
    if (!xblob_find(in, name, n, &pos, &rlen))
        return NULL;
    *len = rlen - 5 - (uint32_t)n;
    return in->xattr + pos + 5 + n;
}

int xblob_set(gmtf_fs *fs, struct inode *in, const char *name, const void *value, size_t size,
              int flags)
{
    size_t n = strlen(name);
    uint32_t pos = 0, rlen = 0;
    int found = xblob_find(in, name, n, &pos, &rlen);
    if ((flags & GMTF_XATTR_CREATE) && found)
        return -EEXIST;
    if ((flags & GMTF_XATTR_REPLACE) && !found)
        return -ENODATA;
    uint64_t len = in->xlen - rlen + 5 + n + size;
    if (len > XATTR_BLOB_MAX)
        return -ENOSPC;
    uint8_t *b = malloc(len);
    if (!b)
        return -ENOMEM;
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
    int rc = rec_xattr(fs, in->ino, b, (uint32_t)len);
    if (!rc)
        rc = rec_inode(fs, in);
    free(b);
    return rc;
}

int xblob_remove(gmtf_fs *fs, struct inode *in, const char *name)
{
    uint32_t pos, rlen;
    if (!xblob_find(in, name, strlen(name), &pos, &rlen))
        return -ENODATA;
    uint32_t len = in->xlen - rlen;
    uint8_t *b = len ? malloc(len) : NULL;
    if (len && !b)
        return -ENOMEM;
    if (len) {
        memcpy(b, in->xattr, pos);
        memcpy(b + pos, in->xattr + pos + rlen, in->xlen - pos - rlen);
    }
    now_ts(&in->ct_s, &in->ct_ns);
    int rc = rec_xattr(fs, in->ino, b, len);
    if (!rc)
        rc = rec_inode(fs, in);
    free(b);
    return rc;
}
