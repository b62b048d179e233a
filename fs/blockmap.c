/* Block maps: block blk of a regular file maps to bytes [off, off+len) of a
 * frame; bytes past len read as zeros, an unmapped block is a hole. The map
 * is an array sorted by block; each mapping holds one reference on its
 * frame and counts len bytes of it live. */

#include "fs_internal.h"

uint32_t blockmap_lower(const struct inode *in, uint32_t blk)
{
    uint32_t lo = 0, hi = in->u.ext.n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (in->u.ext.v[mid].blk < blk)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct fref *blockmap_find(struct inode *in, uint32_t blk)
{
    uint32_t i = blockmap_lower(in, blk);
    if (i < in->u.ext.n && in->u.ext.v[i].blk == blk)
        return &in->u.ext.v[i];
    return NULL;
}

int blockmap_reserve(struct inode *in, uint32_t k)
{
    if (in->u.ext.cap - in->u.ext.n >= k)
        return 0;
    uint32_t cap = in->u.ext.cap ? in->u.ext.cap * 2 : 1;
    if (cap < in->u.ext.n + k)
        cap = in->u.ext.n + k;
    struct fref *v = realloc(in->u.ext.v, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    in->u.ext.v = v;
    in->u.ext.cap = cap;
    return 0;
}

static uint64_t share_of(gmtf_fs *fs, uint32_t frame, uint32_t len)
{
    struct frame *f = &fs->frames[frame];
    return f->dlen ? (uint64_t)f->clen * len / f->dlen : 0;
}

int blockmap_set(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t frame, uint32_t off,
                 uint32_t len)
{
    uint32_t i = blockmap_lower(in, blk);
    int found = i < in->u.ext.n && in->u.ext.v[i].blk == blk;
    /* Grow first: a failure must leave no trace (a reference taken and
     * dropped again would free a frame a journaled record names). */
    if (!found && frame && blockmap_reserve(in, 1))
        return -ENOMEM;
    if (frame)
        frame_ref(fs, frame); /* before the unref: the same frame may be set again */
    if (found) {
        struct fref *e = &in->u.ext.v[i];
        uint64_t s = share_of(fs, e->frame, e->len);
        in->stored -= s < in->stored ? s : in->stored;
        fs->frames[e->frame].live -= e->len;
        uint32_t old = e->frame;
        if (!frame) {
            memmove(e, e + 1, (in->u.ext.n - i - 1) * sizeof *e);
            in->u.ext.n--;
        } else {
            *e = (struct fref){blk, frame, off, len};
        }
        frame_unref(fs, old);
    } else if (frame) {
        struct fref *e = &in->u.ext.v[i];
        memmove(e + 1, e, (in->u.ext.n - i) * sizeof *e);
        *e = (struct fref){blk, frame, off, len};
        in->u.ext.n++;
    }
    if (frame) {
        in->stored += share_of(fs, frame, len);
        fs->frames[frame].live += len;
    }
    return 0;
}

void blockmap_free(gmtf_fs *fs, struct inode *in)
{
    for (uint32_t i = 0; i < in->u.ext.n; i++) {
        fs->frames[in->u.ext.v[i].frame].live -= in->u.ext.v[i].len;
        frame_unref(fs, in->u.ext.v[i].frame);
    }
    free(in->u.ext.v);
    in->u.ext.v = NULL;
    in->u.ext.n = in->u.ext.cap = 0;
    in->stored = 0;
}

void blockmap_truncate(gmtf_fs *fs, struct inode *in, uint64_t size)
{
    uint64_t first = (size + fs->bs - 1) / fs->bs; /* first block wholly past */
    while (in->u.ext.n && in->u.ext.v[in->u.ext.n - 1].blk >= first)
        blockmap_set(fs, in, in->u.ext.v[in->u.ext.n - 1].blk, 0, 0, 0);
    uint32_t part = (uint32_t)(size % fs->bs);
    if (part) {
        struct fref *e = blockmap_find(in, (uint32_t)(size / fs->bs));
        if (e && e->len > part) /* bytes past len read as zeros */
            blockmap_set(fs, in, e->blk, e->frame, e->off, part);
    }
}
