/* Names and inodes: lookup, forget, attributes, links, new nodes, unlink,
 * rename. The library counts lookups (track_lookups), so every reply that
 * hands the kernel an inode counts one, and a reply the kernel never
 * received is forgotten again (gmtf_fuse_reply_entry). New nodes get their
 * owner, mode and ACLs from the ACL policy (gmtf_fuse_acl.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_fuse.h"

void gmtf_fuse_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    gmtf_mount *m = mount_of(req);
    gmtf_entry e;
    int rc = gmtf_fs_lookup(m->fs, parent, name, &e);
    if (rc == -ENOENT && m->entry_timeout > 0) {
        /* Negative entry: every create goes through this kernel, so the
         * name cannot appear behind its back. */
        struct fuse_entry_param fe;
        memset(&fe, 0, sizeof fe);
        fe.entry_timeout = m->entry_timeout;
        fuse_reply_entry(req, &fe);
        return;
    }
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    gmtf_fuse_reply_entry(req, &e);
}

void gmtf_fuse_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    gmtf_fs_forget(mount_of(req)->fs, ino, nlookup);
    fuse_reply_none(req);
}

void gmtf_fuse_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    gmtf_mount *m = mount_of(req);
    for (size_t i = 0; i < count; i++)
        gmtf_fs_forget(m->fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

void gmtf_fuse_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    gmtf_mount *m = mount_of(req);
    struct stat st;
    int rc = gmtf_fs_getattr(m->fs, ino, &st);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_attr(req, &st, m->attr_timeout);
}

void gmtf_fuse_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    static const struct {
        int fuse;
        unsigned gmtf;
    } map[] = {
        {FUSE_SET_ATTR_MODE, GMTF_SET_MODE},
        {FUSE_SET_ATTR_UID, GMTF_SET_UID},
        {FUSE_SET_ATTR_GID, GMTF_SET_GID},
        {FUSE_SET_ATTR_SIZE, GMTF_SET_SIZE},
        {FUSE_SET_ATTR_ATIME, GMTF_SET_ATIME},
        {FUSE_SET_ATTR_MTIME, GMTF_SET_MTIME},
        {FUSE_SET_ATTR_ATIME_NOW, GMTF_SET_ATIME_NOW},
        {FUSE_SET_ATTR_MTIME_NOW, GMTF_SET_MTIME_NOW},
        {FUSE_SET_ATTR_CTIME, GMTF_SET_CTIME},
    };
    unsigned set = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (to_set & map[i].fuse)
            set |= map[i].gmtf;
    struct stat out;
    /* With ACLs on, the access ACL follows a new mode in the same call. */
    int rc = gmtf_fs_setattr(m->fs, ino, attr, set, &out);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_attr(req, &out, m->attr_timeout);
}

void gmtf_fuse_readlink(fuse_req_t req, fuse_ino_t ino)
{
    gmtf_mount *m = mount_of(req);
    size_t cap = 4096;
    for (;;) {
        char *buf = gmtf_fuse_buffer(cap + 1);
        if (!buf) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        long n = gmtf_fs_readlink(m->fs, ino, buf, cap);
        if (n < 0) {
            reply_rc(req, n);
            return;
        }
        if ((size_t)n <= cap) {
            buf[n] = '\0';
            fuse_reply_readlink(req, buf);
            return;
        }
        cap = (size_t)n; /* longer than guessed: read it again whole */
    }
}

enum node_kind { NODE_FILE, NODE_DIR, NODE_LINK };

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
                      const char *target, enum node_kind kind)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    /* Owner, group, mode and inherited ACLs: the library's policy, in the
     * same locked call that makes the node. */
    gmtf_make_req r = {.parent = parent,
                       .name = name,
                       .mode = kind == NODE_LINK ? S_IFLNK | 0777 : mode,
                       .rdev = rdev,
                       .target = target,
                       .uid = ctx->uid,
                       .gid = ctx->gid,
                       .umask = ctx->umask};
    gmtf_entry e;
    int rc = gmtf_fs_make(m->fs, &r, &e);
    if (rc < 0)
        reply_rc(req, rc);
    else
        gmtf_fuse_reply_entry(req, &e);
}

void gmtf_fuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    make_node(req, parent, name, mode, rdev, NULL, NODE_FILE);
}

void gmtf_fuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    make_node(req, parent, name, (mode & 07777) | S_IFDIR, 0, NULL, NODE_DIR);
}

void gmtf_fuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    make_node(req, parent, name, S_IFLNK | 0777, 0, link, NODE_LINK);
}

void gmtf_fuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    REFUSE_IF_RO(req);
    gmtf_entry e;
    int rc = gmtf_fs_link(mount_of(req)->fs, ino, newparent, newname, &e);
    if (rc < 0)
        reply_rc(req, rc);
    else
        gmtf_fuse_reply_entry(req, &e);
}

void gmtf_fuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    REFUSE_IF_RO(req);
    reply_rc(req, gmtf_fs_unlink(mount_of(req)->fs, parent, name));
}

void gmtf_fuse_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    REFUSE_IF_RO(req);
    reply_rc(req, gmtf_fs_rmdir(mount_of(req)->fs, parent, name));
}

void gmtf_fuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    REFUSE_IF_RO(req);
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
        fuse_reply_err(req, EINVAL); /* RENAME_WHITEOUT: overlayfs only */
        return;
    }
    unsigned gflags = 0;
    if (flags & RENAME_NOREPLACE)
        gflags |= GMTF_RENAME_NOREPLACE;
    if (flags & RENAME_EXCHANGE)
        gflags |= GMTF_RENAME_EXCHANGE;
    reply_rc(req, gmtf_fs_rename(mount_of(req)->fs, parent, name, newparent, newname, gflags));
}
