/* POSIX ACLs on the daemon's side: whether this mount offers them. The
 * policy itself (inheritance, chmod, access ACL and mode) is the library's
 * (fs/acl.c, gmtf_fs_options.posix_acl), applied in the same locked call
 * as the change it belongs to. */
#include <errno.h>
#include <string.h>

#include "gmtf_fuse.h"

int gmtf_acl_xattr_allowed(const gmtf_mount *m, const char *name)
{
    int acl_name = !strcmp(name, GMTF_FS_ACL_ACCESS) || !strcmp(name, GMTF_FS_ACL_DEFAULT);
    return acl_name && !m->acl ? -EOPNOTSUPP : 0;
}
