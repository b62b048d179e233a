/* POSIX ACLs: the daemon's whole ACL policy, and the arithmetic on the
 * kernel's xattr encoding it needs (a little-endian u32 version (2), then
 * entries of { u16 tag, u16 perm, u32 id }). With FUSE_CAP_POSIX_ACL the
 * kernel enforces ACLs but leaves to the filesystem keeping the mode in
 * step, inheriting default ACLs and the owner and mode of new nodes: the
 * operations ask here (gmtf_fuse.h, "the daemon's ACL policy"). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "gmtf_fuse.h"

#define ACL_XATTR_VERSION 2u
#define ACL_HDR 4u
#define ACL_ENT 8u
enum {
    TAG_USER_OBJ = 0x01,
    TAG_USER = 0x02,
    TAG_GROUP_OBJ = 0x04,
    TAG_GROUP = 0x08,
    TAG_MASK = 0x10,
    TAG_OTHER = 0x20
};

/* ---- the xattr encoding --------------------------------------------------- */

static unsigned ent_tag(const uint8_t *e)
{
    return load_le16(e);
}

static unsigned ent_perm(const uint8_t *e)
{
    return load_le16(e + 2);
}

static void ent_set_perm(uint8_t *e, unsigned perm)
{
    store_le16(e + 2, (uint16_t)(perm & 7u));
}

static size_t acl_count(size_t size)
{
    return (size - ACL_HDR) / ACL_ENT;
}

int gmtf_acl_valid(const void *acl, size_t size)
{
    const uint8_t *p = acl;
    if (!acl || size < ACL_HDR + 3 * ACL_ENT || (size - ACL_HDR) % ACL_ENT)
        return -EINVAL;
    if (load_le32(p) != ACL_XATTR_VERSION)
        return -EINVAL;
    unsigned seen = 0, prev = 0;
    for (size_t i = 0; i < acl_count(size); i++) {
        unsigned tag = ent_tag(p + ACL_HDR + i * ACL_ENT);
        if (tag < prev || (tag & (tag - 1)) || tag > TAG_OTHER || !tag)
            return -EINVAL; /* unknown tag or out of order */
        if (tag != TAG_USER && tag != TAG_GROUP && (seen & tag))
            return -EINVAL; /* base entries appear once */
        if (ent_perm(p + ACL_HDR + i * ACL_ENT) & ~7u)
            return -EINVAL;
        seen |= tag;
        prev = tag;
    }
    unsigned base = TAG_USER_OBJ | TAG_GROUP_OBJ | TAG_OTHER;
    if ((seen & base) != base)
        return -EINVAL;
    if ((seen & (TAG_USER | TAG_GROUP)) && !(seen & TAG_MASK))
        return -EINVAL;
    return 0;
}

int gmtf_acl_to_mode(const void *acl, size_t size, mode_t *perm)
{
    const uint8_t *p = acl;
    unsigned u = 0, g = 0, m = 0, o = 0;
    int have_mask = 0, extended = 0;
    for (size_t i = 0; i < acl_count(size); i++) {
        const uint8_t *e = p + ACL_HDR + i * ACL_ENT;
        switch (ent_tag(e)) {
        case TAG_USER_OBJ: u = ent_perm(e); break;
        case TAG_GROUP_OBJ: g = ent_perm(e); break;
        case TAG_MASK:
            m = ent_perm(e);
            have_mask = 1;
            extended = 1;
            break;
        case TAG_OTHER: o = ent_perm(e); break;
        default: extended = 1; break;
        }
    }
    *perm = (mode_t)((u << 6) | ((have_mask ? m : g) << 3) | o);
    return !extended;
}

void gmtf_acl_chmod(void *acl, size_t size, mode_t mode)
{
    uint8_t *p = acl;
    uint8_t *group_obj = NULL, *mask = NULL;
    for (size_t i = 0; i < acl_count(size); i++) {
        uint8_t *e = p + ACL_HDR + i * ACL_ENT;
        switch (ent_tag(e)) {
        case TAG_USER_OBJ: ent_set_perm(e, (mode >> 6) & 7u); break;
        case TAG_GROUP_OBJ: group_obj = e; break;
        case TAG_MASK: mask = e; break;
        case TAG_OTHER: ent_set_perm(e, mode & 7u); break;
        default: break;
        }
    }
    /* With a mask the group bits of the mode are the mask (acl(5)). */
    if (mask)
        ent_set_perm(mask, (mode >> 3) & 7u);
    else if (group_obj)
        ent_set_perm(group_obj, (mode >> 3) & 7u);
}

int gmtf_acl_inherit(const void *dflt, size_t size, mode_t *mode, void **access,
                     size_t *access_size)
{
    uint8_t *p = malloc(size);
    if (!p)
        return -ENOMEM;
    memcpy(p, dflt, size);
    mode_t m = *mode;
    uint8_t *group_obj = NULL, *mask = NULL;
    int extended = 0;
    for (size_t i = 0; i < acl_count(size); i++) {
        uint8_t *e = p + ACL_HDR + i * ACL_ENT;
        unsigned perm = ent_perm(e);
        switch (ent_tag(e)) {
        case TAG_USER_OBJ:
            perm &= (m >> 6) & 7u;
            ent_set_perm(e, perm);
            m &= (mode_t)((perm << 6) | ~(mode_t)S_IRWXU);
            break;
        case TAG_GROUP_OBJ: group_obj = e; break;
        case TAG_MASK:
            mask = e;
            extended = 1;
            break;
        case TAG_OTHER:
            perm &= m & 7u;
            ent_set_perm(e, perm);
            m &= (mode_t)(perm | ~(mode_t)S_IRWXO);
            break;
        default: extended = 1; break;
        }
    }
    uint8_t *g = mask ? mask : group_obj;
    if (g) {
        unsigned perm = ent_perm(g) & ((m >> 3) & 7u);
        ent_set_perm(g, perm);
        m &= (mode_t)((perm << 3) | ~(mode_t)S_IRWXG);
    }
    *mode = m;
    if (!extended) {
        free(p);
        *access = NULL;
        *access_size = 0;
        return 1;
    }
    *access = p;
    *access_size = size;
    return 0;
}

/* ---- policy: new nodes ------------------------------------------------------ */

void gmtf_node_init_free(gmtf_node_init *ni)
{
    free(ni->access);
    free(ni->dflt);
}

static long read_xattr_alloc(gmtf_fs *fs, uint64_t ino, const char *name, void **out)
{
    *out = NULL;
    for (int tries = 0; tries < 4; tries++) {
        long n = gmtf_fs_getxattr(fs, ino, name, NULL, 0);
        if (n <= 0)
            return n;
        void *buf = malloc((size_t)n);
        if (!buf)
            return -ENOMEM;
        long got = gmtf_fs_getxattr(fs, ino, name, buf, (size_t)n);
        if (got >= 0) {
            *out = buf;
            return got;
        }
        free(buf);
        if (got != -ERANGE) /* -ERANGE: it grew meanwhile, ask again */
            return got;
    }
    return -EAGAIN;
}

int gmtf_node_init_prepare(gmtf_mount *m, const struct fuse_ctx *ctx, uint64_t parent, mode_t mode,
                           int is_dir, int is_link, gmtf_node_init *ni)
{
    memset(ni, 0, sizeof *ni);
    struct stat pst;
    int rc = gmtf_fs_getattr(m->fs, parent, &pst);
    if (rc < 0)
        return rc;
    if (!S_ISDIR(pst.st_mode))
        return -ENOTDIR;
    ni->uid = ctx->uid;
    ni->gid = ctx->gid;
    if (pst.st_mode & S_ISGID) {
        ni->gid = pst.st_gid;
        if (is_dir)
            mode |= S_ISGID;
    }
    if (is_link) {
        ni->mode = mode;
        return 0;
    }
    int inherited = 0;
    if (m->acl) {
        void *dflt;
        long n = read_xattr_alloc(m->fs, parent, GMTF_ACL_DEFAULT, &dflt);
        if (n < 0 && n != -ENODATA)
            return (int)n;
        if (n > 0 && gmtf_acl_valid(dflt, (size_t)n) == 0) {
            mode_t perm = mode & 0777;
            rc = gmtf_acl_inherit(dflt, (size_t)n, &perm, &ni->access, &ni->access_size);
            if (rc < 0) {
                free(dflt);
                return rc;
            }
            mode = (mode & ~(mode_t)0777) | perm;
            inherited = 1;
            if (is_dir) {
                ni->dflt = dflt;
                ni->dflt_size = (size_t)n;
                dflt = NULL;
            }
        }
        free(dflt);
    }
    if (!inherited)
        mode &= ~ctx->umask;
    ni->mode = mode;
    return 0;
}

static int node_init_finish(gmtf_mount *m, uint64_t ino, const gmtf_node_init *ni)
{
    int rc = 0;
    if (ni->access)
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_ACCESS, ni->access, ni->access_size, 0);
    if (rc == 0 && ni->dflt)
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_DEFAULT, ni->dflt, ni->dflt_size, 0);
    return rc;
}

void gmtf_node_init_store(gmtf_mount *m, gmtf_entry *e, const gmtf_node_init *ni)
{
    struct stat st;
    if (!ni->access && !ni->dflt)
        return;
    if (node_init_finish(m, e->attr.st_ino, ni) == 0 &&
        gmtf_fs_getattr(m->fs, e->attr.st_ino, &st) == 0)
        e->attr = st;
}

/* ---- policy: chmod and the ACL xattrs ------------------------------------------ */

/* chmod keeps the base entries of an access ACL equal to the mode. */
int gmtf_acl_follow_chmod(gmtf_mount *m, uint64_t ino, mode_t mode)
{
    if (!m->acl)
        return 0;
    long n = gmtf_fs_getxattr(m->fs, ino, GMTF_ACL_ACCESS, NULL, 0);
    if (n == -ENODATA)
        return 0;
    if (n <= 0)
        return n < 0 ? (int)n : 0;
    void *acl = malloc((size_t)n);
    if (!acl)
        return -ENOMEM;
    long got = gmtf_fs_getxattr(m->fs, ino, GMTF_ACL_ACCESS, acl, (size_t)n);
    int rc = got < 0 ? (int)got : 0;
    if (rc == 0 && gmtf_acl_valid(acl, (size_t)got) == 0) {
        gmtf_acl_chmod(acl, (size_t)got, mode);
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_ACCESS, acl, (size_t)got, 0);
    }
    free(acl);
    return rc;
}

int gmtf_acl_is_name(const char *name)
{
    return strcmp(name, GMTF_ACL_ACCESS) == 0 || strcmp(name, GMTF_ACL_DEFAULT) == 0;
}

/* Setting an access ACL sets the mode's rwx bits from it; an ACL that says
 * no more than the mode is not stored at all (as ext4 does). */
static int set_access_acl(gmtf_mount *m, uint64_t ino, const void *value, size_t size, int flags)
{
    if (gmtf_acl_valid(value, size) < 0)
        return -EINVAL;
    struct stat st;
    int rc = gmtf_fs_getattr(m->fs, ino, &st);
    if (rc < 0)
        return rc;
    mode_t perm;
    int equiv = gmtf_acl_to_mode(value, size, &perm);
    if (equiv) {
        if (flags & GMTF_XATTR_REPLACE) {
            long n = gmtf_fs_getxattr(m->fs, ino, GMTF_ACL_ACCESS, NULL, 0);
            if (n < 0)
                return (int)n;
        }
        rc = gmtf_fs_removexattr(m->fs, ino, GMTF_ACL_ACCESS);
        if (rc < 0 && rc != -ENODATA)
            return rc;
    } else {
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_ACCESS, value, size, flags);
        if (rc < 0)
            return rc;
    }
    struct stat ns = {.st_mode = (st.st_mode & 07000) | perm};
    return gmtf_fs_setattr(m->fs, ino, &ns, GMTF_SET_MODE, NULL);
}

int gmtf_acl_xattr_allowed(const gmtf_mount *m, const char *name)
{
    return gmtf_acl_is_name(name) && !m->acl ? -EOPNOTSUPP : 0;
}

int gmtf_acl_setxattr(gmtf_mount *m, uint64_t ino, const char *name, const void *value, size_t size,
                      int flags)
{
    if (!m->acl)
        return -EOPNOTSUPP;
    if (strcmp(name, GMTF_ACL_ACCESS) == 0)
        return set_access_acl(m, ino, value, size, flags);
    if (gmtf_acl_valid(value, size) < 0)
        return -EINVAL;
    return gmtf_fs_setxattr(m->fs, ino, name, value, size, flags);
}
