/* Extended attributes: set, get, list, remove, straight to the library
 * (which applies the ACL policy to the ACL names when the mount has ACLs
 * on); on a mount without ACLs the ACL names are refused here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "gmtf_fuse.h"

void gmtf_fuse_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    int gflags = 0;
    if (flags & XATTR_CREATE)
        gflags |= GMTF_XATTR_CREATE;
    if (flags & XATTR_REPLACE)
        gflags |= GMTF_XATTR_REPLACE;
    int rc = gmtf_acl_xattr_allowed(m, name);
    if (!rc)
        rc = gmtf_fs_setxattr(m->fs, ino, name, value, size, gflags);
    reply_rc(req, rc);
}

void gmtf_fuse_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    gmtf_mount *m = mount_of(req);
    int rc = gmtf_acl_xattr_allowed(m, name);
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    if (size == 0) {
        long n = gmtf_fs_getxattr(m->fs, ino, name, NULL, 0);
        if (n < 0)
            reply_rc(req, n);
        else
            fuse_reply_xattr(req, (size_t)n);
        return;
    }
    char *buf = gmtf_fuse_buffer(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    long n = gmtf_fs_getxattr(m->fs, ino, name, buf, size);
    if (n < 0)
        reply_rc(req, n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
}

void gmtf_fuse_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    gmtf_mount *m = mount_of(req);
    if (size == 0) {
        long n = gmtf_fs_listxattr(m->fs, ino, NULL, 0);
        if (n < 0)
            reply_rc(req, n);
        else
            fuse_reply_xattr(req, (size_t)n);
        return;
    }
    char *buf = gmtf_fuse_buffer(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    long n = gmtf_fs_listxattr(m->fs, ino, buf, size);
    if (n < 0)
        reply_rc(req, n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
}

void gmtf_fuse_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    int rc = gmtf_acl_xattr_allowed(m, name);
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    reply_rc(req, gmtf_fs_removexattr(m->fs, ino, name));
}
