/* gmtf FUSE daemon internals: the filesystem-wide mount struct, the
 * low-level operations (one file per concern, as in fs/), the ACL policy.
 * The daemon is a thin layer over fs/gmtf_fs.h; everything that touches the
 * image lives there. Calls between the files run one way: gmtf_mount.c ->
 * gmtf_fuse_ops.c (the table) -> gmtf_fuse_{namei,file,dir,xattr}.c ->
 * gmtf_fuse_acl.c -> gmtf_fuse_common.c. */
#ifndef GMTF_FUSE_H
#define GMTF_FUSE_H

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse_lowlevel.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gmtf_fs.h"

/* One per mounted filesystem; reached through fuse_req_userdata(req). */
typedef struct gmtf_mount {
    gmtf_fs *fs;
    const char *image;    /* absolute path, for messages */
    double entry_timeout; /* seconds the kernel may cache a name */
    double attr_timeout;  /* seconds the kernel may cache attributes */
    int read_only;
    int acl;            /* POSIX ACLs on (kernel checks them) */
    int writeback;      /* FUSE writeback cache wanted */
    unsigned max_write; /* bytes per WRITE/READ request */
    int debug;
    int daemonized; /* stderr is gone: log to syslog */
    int init_done;  /* op_init ran (atomic) */
} gmtf_mount;

static inline gmtf_mount *mount_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static inline void reply_rc(fuse_req_t req, long rc)
{
    fuse_reply_err(req, rc < 0 ? (int)-rc : 0);
}

#define REFUSE_IF_RO(req)                                                                          \
    do {                                                                                           \
        if (mount_of(req)->read_only) {                                                            \
            fuse_reply_err(req, EROFS);                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- gmtf -u (gmtf_umount.c) ---------------------------------------------- */

/* Unmounts the gmtf filesystem at mountpoint (umount2 as root, else
 * fusermount3 -u) and returns once no program holds the image's lock: the
 * daemon has stored everything and closed the image. quiet: no "still
 * storing" lines. Returns the exit status (0 or 1, with a message). */
int gmtf_unmount_main(const char *mountpoint, int quiet);

/* ---- what every operation uses (gmtf_fuse_common.c) ------------------------ */

/* One line naming the image: on stderr, or in syslog once daemonized. */
void gmtf_mount_log(void *mount, const char *msg);
/* A per-thread buffer of at least n bytes for reads, gathered writes and
 * xattr values: replies copy it out before the thread takes its next
 * request. NULL on -ENOMEM. */
void *gmtf_fuse_buffer(size_t n);
void gmtf_fuse_fill_entry(const gmtf_mount *m, const gmtf_entry *e, struct fuse_entry_param *fe);
/* Replies with a new entry; the lookup the library counted is dropped
 * again when the kernel did not get the reply (interrupted request). */
void gmtf_fuse_reply_entry(fuse_req_t req, const gmtf_entry *e);
/* fsync and fsyncdir: nothing to do on a read-only mount. */
void gmtf_fuse_reply_fsync(fuse_req_t req, fuse_ino_t ino, int datasync);

/* ---- the operations, one file per concern ---------------------------------- */

/* The operation table handed to fuse_session_new (gmtf_fuse_ops.c, with
 * the session and statfs operations). */
extern const struct fuse_lowlevel_ops gmtf_fuse_ops;

/* Names and inodes (gmtf_fuse_namei.c). */
void gmtf_fuse_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void gmtf_fuse_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void gmtf_fuse_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void gmtf_fuse_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gmtf_fuse_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi);
void gmtf_fuse_readlink(fuse_req_t req, fuse_ino_t ino);
void gmtf_fuse_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void gmtf_fuse_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void gmtf_fuse_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void gmtf_fuse_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void gmtf_fuse_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void gmtf_fuse_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void gmtf_fuse_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags);

/* File data (gmtf_fuse_file.c). */
void gmtf_fuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gmtf_fuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi);
void gmtf_fuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi);
void gmtf_fuse_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
                         struct fuse_file_info *fi);
void gmtf_fuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gmtf_fuse_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gmtf_fuse_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void gmtf_fuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi);
void gmtf_fuse_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi);

/* Directory listing (gmtf_fuse_dir.c). */
void gmtf_fuse_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gmtf_fuse_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void gmtf_fuse_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void gmtf_fuse_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi);
void gmtf_fuse_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi);

/* Extended attributes (gmtf_fuse_xattr.c). */
void gmtf_fuse_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags);
void gmtf_fuse_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void gmtf_fuse_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void gmtf_fuse_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ---- POSIX ACLs (gmtf_fuse_acl.c) ---------------------------------------------
 * The library keeps them (fs/acl.c) when the mount passes posix_acl; here
 * only: the ACL xattr names are refused (-EOPNOTSUPP) on a mount without
 * ACLs, else 0. */
int gmtf_acl_xattr_allowed(const gmtf_mount *m, const char *name);

#endif
