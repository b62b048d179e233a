/* gmtf FUSE daemon internals: the filesystem-wide mount struct, the
 * low-level operation table, POSIX ACL helpers. The daemon is a thin layer
 * over fs/gmtf_fs.h; everything that touches the image lives there. */
#ifndef GMTF_FUSE_H
#define GMTF_FUSE_H

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse_lowlevel.h>

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

/* One line naming the image: on stderr, or in syslog once daemonized. */
void gmtf_mount_log(void *mount, const char *msg);

/* The operation table handed to fuse_session_new. */
extern const struct fuse_lowlevel_ops gmtf_fuse_ops;

/* ---- POSIX ACLs (gmtf_fuse_acl.c) ------------------------------------------
 * ACLs are stored by the library as the system.posix_acl_access and
 * system.posix_acl_default xattrs, in the kernel's xattr encoding. With
 * FUSE_CAP_POSIX_ACL the kernel enforces them; the daemon keeps the mode in
 * step with the access ACL and makes new nodes inherit default ACLs. */
#define GMTF_ACL_ACCESS "system.posix_acl_access"
#define GMTF_ACL_DEFAULT "system.posix_acl_default"

/* Checks an ACL in xattr form. Returns 0 when well formed (version 2,
 * entries sorted by tag, one each of USER_OBJ, GROUP_OBJ, OTHER, MASK when
 * named entries exist), -EINVAL otherwise. */
int gmtf_acl_valid(const void *acl, size_t size);
/* The permission bits an access ACL implies for the mode (rwx of owner,
 * mask or group, other). Returns 1 when the ACL holds only the three base
 * entries (so it says no more than the mode), 0 when it has more. */
int gmtf_acl_to_mode(const void *acl, size_t size, mode_t *perm);
/* Rewrites the base entries of an access ACL in place from mode (chmod). */
void gmtf_acl_chmod(void *acl, size_t size, mode_t mode);
/* Inherits a parent's default ACL (as posix_acl_create): *mode is reduced
 * to what the ACL allows, access gets the new node's access ACL (a copy of
 * dflt with base entries masked by *mode, caller frees). Returns 0, 1 when
 * the access ACL is equivalent to the mode (nothing to store, *access
 * NULL), or -ENOMEM. */
int gmtf_acl_inherit(const void *dflt, size_t size, mode_t *mode, void **access,
                     size_t *access_size);

#endif
