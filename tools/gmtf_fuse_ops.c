/* The FUSE low-level operation table of gmtf, with the session operations
 * (init, destroy) and statfs. One function per request, each a thin call
 * into fs/gmtf_fs.h; errors from the library are negative errno codes and
 * go back as fuse_reply_err. The operations live by concern:
 * gmtf_fuse_namei.c, gmtf_fuse_file.c, gmtf_fuse_dir.c, gmtf_fuse_xattr.c;
 * the ACL policy in gmtf_fuse_acl.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gmtf_fuse.h"

/* ---- session ---------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    gmtf_mount *m = userdata;
    unsigned want = FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_READDIRPLUS |
                    FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ |
                    FUSE_CAP_ASYNC_DIO;
    if (m->writeback)
        want |= FUSE_CAP_WRITEBACK_CACHE;
    /* The kernel enforces ACLs; umask is then ours to apply, because a
     * parent's default ACL replaces it (acl(5)). */
    if (!(conn->capable & FUSE_CAP_POSIX_ACL))
        m->acl = 0;
    /* The library keeps the policy; one that keeps none says so. */
    if (m->acl && gmtf_fs_set_posix_acl(m->fs, 1) < 0)
        m->acl = 0;
    if (m->acl)
        want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    else
        gmtf_fs_set_posix_acl(m->fs, 0);
    conn->want |= want & conn->capable;
    if (!(conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        m->writeback = 0;
    /* Let the kernel clear setuid/setgid on write, truncate and chown. */
    conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
    /* Data goes through user memory for the codec anyway: a plain read of
     * the request hands its buffer straight to gmtf_fs_write, no copy. */
    conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
    if (m->max_write)
        conn->max_write = m->max_write;
    conn->time_gran = 1;
    __atomic_store_n(&m->init_done, 1, __ATOMIC_RELEASE);
}

static void op_destroy(void *userdata)
{
    gmtf_mount *m = userdata;
    /* The kernel is gone: make everything durable now; main() then
     * unmounts the library, which writes the final checkpoint. */
    if (!m->read_only) {
        int rc = gmtf_fs_syncfs(m->fs);
        if (rc < 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "sync at unmount failed: %s", strerror(-rc));
            gmtf_mount_log(m, msg);
        }
    }
}

/* ---- whole filesystem ------------------------------------------------------ */

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs st;
    int rc = gmtf_fs_statfs(mount_of(req)->fs, &st);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops gmtf_fuse_ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = gmtf_fuse_lookup,
    .forget = gmtf_fuse_forget,
    .forget_multi = gmtf_fuse_forget_multi,
    .getattr = gmtf_fuse_getattr,
    .setattr = gmtf_fuse_setattr,
    .readlink = gmtf_fuse_readlink,
    .mknod = gmtf_fuse_mknod,
    .mkdir = gmtf_fuse_mkdir,
    .unlink = gmtf_fuse_unlink,
    .rmdir = gmtf_fuse_rmdir,
    .symlink = gmtf_fuse_symlink,
    .rename = gmtf_fuse_rename,
    .link = gmtf_fuse_link,
    .open = gmtf_fuse_open,
    .read = gmtf_fuse_read,
    .write_buf = gmtf_fuse_write_buf,
    .flush = gmtf_fuse_flush,
    .release = gmtf_fuse_release,
    .fsync = gmtf_fuse_fsync,
    .opendir = gmtf_fuse_opendir,
    .readdir = gmtf_fuse_readdir,
    .readdirplus = gmtf_fuse_readdirplus,
    .releasedir = gmtf_fuse_releasedir,
    .fsyncdir = gmtf_fuse_fsyncdir,
    .statfs = op_statfs,
    .setxattr = gmtf_fuse_setxattr,
    .getxattr = gmtf_fuse_getxattr,
    .listxattr = gmtf_fuse_listxattr,
    .removexattr = gmtf_fuse_removexattr,
    .create = gmtf_fuse_create,
    .fallocate = gmtf_fuse_fallocate,
    .lseek = gmtf_fuse_lseek,
};
