/* Compaction of shared frames: when frames holding packed small files have
 * lost over half their bytes (files deleted or rewritten), their live
 * blocks are read back into the write-back cache and flushed anew, and the
 * old frames lose their last reference. */
#include <sys/stat.h>

#include "fs_internal.h"

static int frame_sparse(const struct frame *f)
{
    return f->clen && f->refs && f->live * 2 < f->dlen;
}

int fs_compact(gmtf_fs *fs, int force)
{
    if (fs->ro)
        return 0;
    uint64_t waste = 0;
    for (uint32_t id = 1; id < fs->nframes; id++) {
        struct frame *f = &fs->frames[id];
        if (frame_sparse(f))
            waste += (uint64_t)f->clen * (f->dlen - f->live) / f->dlen;
    }
    if (!waste || (!force && waste < (1u << 20)) || waste * 16 < fs->used)
        return 0;
    /* Pull the live blocks of sparse frames into the write-back cache; the
     * flush packs them anew and the old frames lose their last reference. */
    int rc = 0;
    uint64_t ino = 0;
    for (struct inode *in; !rc && (in = inode_next(fs, &ino));) {
        if (!S_ISREG(in->mode))
            continue;
        for (uint32_t i = 0; !rc && i < in->u.ext.n; i++) {
            struct fref *e = &in->u.ext.v[i];
            if (!frame_sparse(&fs->frames[e->frame]) || dirty_find(fs, ino, e->blk))
                continue;
            struct dblock *d;
            rc = dirty_get(fs, in, e->blk, e->len, &d);
            if (!rc && fs->dirty_bytes > fs->dirty_limit / 2)
                rc = flush_dirty(fs, 0);
        }
    }
    if (!rc)
        rc = flush_dirty(fs, 0);
    return rc;
}
