/* POSIX ACLs in the kernel's xattr encoding: a little-endian u32 version
 * (2) then entries of { u16 tag, u16 perm, u32 id }. With FUSE_CAP_POSIX_ACL
 * the kernel enforces ACLs but leaves to the filesystem keeping the mode in
 * step and inheriting default ACLs; these helpers do that arithmetic. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static unsigned ent_tag(const uint8_t *e)
{
    uint16_t v;
    memcpy(&v, e, 2);
    return le16toh(v);
}
static unsigned ent_perm(const uint8_t *e)
{
    uint16_t v;
    memcpy(&v, e + 2, 2);
    return le16toh(v);
}
static void ent_set_perm(uint8_t *e, unsigned perm)
{
    uint16_t v = htole16((uint16_t)(perm & 7u));
    memcpy(e + 2, &v, 2);
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
    uint32_t ver;
    memcpy(&ver, p, 4);
    if (le32toh(ver) != ACL_XATTR_VERSION)
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
