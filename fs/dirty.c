/* The write-back cache: dirty blocks by (inode, block), each a buffer of up
 * to one block (bytes past its capacity read as zeros), a bitmap of the
 * 4 KiB pages written since the last stage or flush, and a version that an
 * unlocked flush rechecks. */

#include "fs_internal.h"

static size_t dirty_slot(gmtf_fs *fs, uint64_t ino, uint32_t blk)
{
    uint64_t h = (ino * 0x9e3779b97f4a7c15ull) ^ (blk * 0xbf58476d1ce4e5b9ull);
    return (size_t)(h ^ (h >> 29)) & (fs->dirty_cap - 1);
}

struct dblock *dirty_find(gmtf_fs *fs, uint64_t ino, uint32_t blk)
{
    if (!fs->dirty_cap)
        return NULL;
    for (struct dblock *d = fs->dirty_tab[dirty_slot(fs, ino, blk)]; d; d = d->hnext)
        if (d->ino == ino && d->blk == blk)
            return d;
    return NULL;
}

/* Grows d's buffer to hold need bytes; the new bytes read as zeros but
 * those of [skip, need), which the caller writes at once (none when skip
 * >= need): a block written whole is not zeroed first. */
static int dirty_grow(gmtf_fs *fs, struct dblock *d, uint32_t need, uint32_t skip)
{
    if (need <= d->cap)
        return 0;
    uint32_t cap = (need + 4095) & ~4095u;
    if (cap < d->cap * 2)
        cap = d->cap * 2;
    if (cap > fs->bs)
        cap = fs->bs;
    uint8_t *b = realloc(d->buf, cap);
    if (!b)
        return -ENOMEM;
    if (skip < d->cap)
        skip = d->cap;
    if (skip >= need) {
        memset(b + d->cap, 0, cap - d->cap);
    } else {
        memset(b + d->cap, 0, skip - d->cap);
        memset(b + need, 0, cap - need);
    }
    fs->dirty_bytes += cap - d->cap;
    d->buf = b;
    d->cap = cap;
    return 0;
}

static int dirty_get_(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t need, uint32_t skip,
                      struct dblock **out)
{
    struct dblock *d = dirty_find(fs, in->ino, blk);
    if (d) {
        *out = d;
        return dirty_grow(fs, d, need, skip);
    }
    if (!fs->dirty_cap) {
        fs->dirty_tab = calloc(8192, sizeof *fs->dirty_tab);
        if (!fs->dirty_tab)
            return -ENOMEM;
        fs->dirty_cap = 8192;
    }
    d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->ino = in->ino;
    d->blk = blk;
    d->ver = ++fs->dver;
    /* A block that a flush encoding on its thread took reads as what that
     * flush will map it to (its bytes are the piece's), as it would once
     * stored: a file written on across the flush's cut. */
    uint32_t plen = 0;
    const uint8_t *pend = fs->pend ? fs->pend_block(fs, in->ino, blk, &plen) : NULL;
    struct fref *e = pend ? NULL : blockmap_find(in, blk);
    uint32_t base = pend ? plen : e ? e->len : 0;
    /* the bytes under base are copied in below: only past them may the
     * caller's write go unzeroed */
    int rc = dirty_grow(fs, d, need > base ? need : base, skip > base ? skip : base);
    if (!rc && pend)
        memcpy(d->buf, pend, plen);
    else if (!rc && e)
        rc = frame_copy(fs, e->frame, in->ino, blk, e->off, e->len, d->buf, 0);
    if (rc) {
        fs->dirty_bytes -= d->cap;
        free(d->buf);
        free(d);
        return rc;
    }
    size_t s = dirty_slot(fs, in->ino, blk);
    d->hnext = fs->dirty_tab[s];
    fs->dirty_tab[s] = d;
    d->inext = in->dirty;
    in->dirty = d;
    d->gnext = fs->dlist;
    if (fs->dlist)
        fs->dlist->gprev = d;
    fs->dlist = d;
    *out = d;
    return 0;
}

int dirty_get(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t need, struct dblock **out)
{
    return dirty_get_(fs, in, blk, need, need, out);
}

int dirty_get_write(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t off, uint32_t len,
                    struct dblock **out)
{
    return dirty_get_(fs, in, blk, off + len, off, out);
}

void dirty_drop(gmtf_fs *fs, struct dblock *d)
{
    dirty_detach(fs, d);
    dirty_free(d);
}

void dirty_free(struct dblock *d)
{
    free(d->pages);
    free(d->buf);
    free(d);
}

void dirty_detach(gmtf_fs *fs, struct dblock *d)
{
    struct dblock **pp = &fs->dirty_tab[dirty_slot(fs, d->ino, d->blk)];
    while (*pp != d)
        pp = &(*pp)->hnext;
    *pp = d->hnext;
    struct inode *in = inode_get(fs, d->ino);
    if (in) {
        pp = &in->dirty;
        while (*pp && *pp != d)
            pp = &(*pp)->inext;
        if (*pp)
            *pp = d->inext;
    }
    if (d->gprev)
        d->gprev->gnext = d->gnext;
    else
        fs->dlist = d->gnext;
    if (d->gnext)
        d->gnext->gprev = d->gprev;
    fs->dirty_bytes -= d->cap;
    d->hnext = d->inext = d->gprev = d->gnext = NULL;
}

void dirty_drop_inode(gmtf_fs *fs, struct inode *in, uint32_t from_blk)
{
    struct dblock *d = in->dirty;
    while (d) {
        struct dblock *next = d->inext;
        if (d->blk >= from_blk)
            dirty_drop(fs, d);
        d = next;
    }
}

int dirty_stage_apply(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t off,
                      const uint8_t *data, uint32_t len)
{
    struct dblock *d;
    int rc = dirty_get_write(fs, in, blk, off, len, &d);
    if (rc)
        return rc;
    memcpy(d->buf + off, data, len);
    d->ver = ++fs->dver;
    d->staged = 1; /* the journal being replayed holds these bytes */
    return 0;
}

void dirty_truncate(gmtf_fs *fs, struct inode *in, uint64_t size)
{
    uint64_t first = (size + fs->bs - 1) / fs->bs; /* first block wholly past */
    dirty_drop_inode(fs, in, first > FILE_BLOCKS_MAX ? (uint32_t)FILE_BLOCKS_MAX : (uint32_t)first);
    uint32_t part = (uint32_t)(size % fs->bs);
    struct dblock *d = part ? dirty_find(fs, in->ino, (uint32_t)(size / fs->bs)) : NULL;
    if (d) {
        if (d->cap > part)
            memset(d->buf + part, 0, d->cap - part);
        d->ver = ++fs->dver;
    }
}
