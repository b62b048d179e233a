/* POSIX ACLs: their xattr encoding (the kernel's: a little-endian u32
 * version (2), then entries of { u16 tag, u16 perm, u32 id }) and the
 * policy the filesystem applies when a mount has ACLs on
 * (gmtf_fs_options.posix_acl; the kernel enforces them, FUSE_CAP_POSIX_ACL):
 * a new node inherits its parent's default ACL in the same locked call that
 * makes it, chmod keeps the access ACL's base entries equal to the mode,
 * and setting an access ACL sets the mode's rwx bits (an ACL that says no
 * more than the mode is not stored, as ext4 does). */
#include <sys/stat.h>

#include "fs_internal.h"

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

int acl_valid(const void *acl, size_t size)
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

static int acl_to_mode(const void *acl, size_t size, mode_t *perm)
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

static void acl_chmod(void *acl, size_t size, mode_t mode)
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

static int acl_inherit(const void *dflt, size_t size, mode_t *mode, void **access,
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

/* ---- policy ------------------------------------------------------------------ */

int gmtf_fs_set_posix_acl(gmtf_fs *fs, int on)
{
    FS_WRLOCK(fs);
    fs->opt.posix_acl = on != 0;
    FS_UNLOCK(fs);
    return 0;
}

int acl_is_name(const char *name)
{
    return !strcmp(name, GMTF_FS_ACL_ACCESS) || !strcmp(name, GMTF_FS_ACL_DEFAULT);
}

int acl_new_node(gmtf_fs *fs, struct inode *dir, gmtf_make_req *r, uint8_t **access,
                 size_t *access_len, uint8_t **dflt, size_t *dflt_len)
{
    *access = *dflt = NULL;
    *access_len = *dflt_len = 0;
    if (dir->mode & S_ISGID) { /* setgid directories pass their group on */
        r->gid = dir->gid;
        if (S_ISDIR(r->mode))
            r->mode |= S_ISGID;
    }
    if (S_ISLNK(r->mode))
        return 0;
    uint32_t n = 0;
    const uint8_t *d = fs->opt.posix_acl ? xblob_value(dir, GMTF_FS_ACL_DEFAULT, &n) : NULL;
    if (!d || acl_valid(d, n)) {
        r->mode &= ~r->umask;
        return 0;
    }
    mode_t perm = r->mode & 0777;
    void *acc;
    size_t alen;
    int rc = acl_inherit(d, n, &perm, &acc, &alen);
    if (rc < 0)
        return rc;
    r->mode = (r->mode & ~(mode_t)0777) | perm;
    *access = acc;
    *access_len = alen;
    if (S_ISDIR(r->mode)) {
        *dflt = malloc(n);
        if (!*dflt) {
            free(*access);
            *access = NULL;
            return -ENOMEM;
        }
        memcpy(*dflt, d, n);
        *dflt_len = n;
    }
    return 0;
}

int acl_follow_chmod(gmtf_fs *fs, struct inode *in)
{
    uint32_t n;
    const uint8_t *a = fs->opt.posix_acl ? xblob_value(in, GMTF_FS_ACL_ACCESS, &n) : NULL;
    if (!a || acl_valid(a, n))
        return 0;
    uint8_t *copy = malloc(n);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, a, n);
    acl_chmod(copy, n, in->mode & 07777);
    int rc = xblob_set(fs, in, GMTF_FS_ACL_ACCESS, copy, n, 0);
    free(copy);
    return rc;
}

int acl_set(gmtf_fs *fs, struct inode *in, const char *name, const void *value, size_t size,
            int flags)
{
    if (acl_valid(value, size))
        return -EINVAL;
    if (strcmp(name, GMTF_FS_ACL_ACCESS))
        return xblob_set(fs, in, name, value, size, flags);
    mode_t perm;
    int rc;
    if (acl_to_mode(value, size, &perm)) { /* no more than the mode: not stored */
        uint32_t n;
        if ((flags & GMTF_XATTR_REPLACE) && !xblob_value(in, name, &n))
            return -ENODATA;
        rc = xblob_remove(fs, in, name);
        if (rc == -ENODATA)
            rc = 0;
    } else {
        rc = xblob_set(fs, in, name, value, size, flags);
    }
    if (rc)
        return rc;
    in->mode = (in->mode & ~(uint32_t)0777) | (perm & 0777);
    now_ts(&in->ct_s, &in->ct_ns);
    return rec_inode(fs, in);
}
