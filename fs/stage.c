/* Staging for fsync: a small change to a file is written to the journal
 * uncompressed (STAGE records of the written 4 KiB pages) instead of
 * recompressing whole blocks; the blocks stay dirty and are compressed by
 * a later flush. */

#include "fs_internal.h"

/* Appends STAGE records for each run of written pages of d. */
static int stage_block(gmtf_fs *fs, struct inode *in, struct dblock *d)
{
    uint32_t npages = fs->bs / STAGE_PAGE, pg = 0;
    int rc = 0;
    /* Replay applies the staged bytes over the block's frame as mapped now:
     * that frame must outlive this journal and the next (a load may fall
     * back to it), even if a later EXT of it unmaps it: retired, not freed. */
    struct fref *e = blockmap_find(in, d->blk);
    if (e && e->frame)
        fs->frames[e->frame].flags |= FRAME_PINNED;
    while (!rc && pg < npages) {
        if (!(d->pages[pg / 64] >> (pg % 64) & 1)) {
            pg++;
            continue;
        }
        uint32_t start = pg;
        while (pg < npages && (d->pages[pg / 64] >> (pg % 64) & 1))
            pg++;
        uint32_t off = start * STAGE_PAGE, end = pg * STAGE_PAGE;
        if (end > d->cap)
            end = d->cap; /* past cap the block reads as zeros: nothing to stage */
        if (end > off)
            rc = rec_stage(fs, in->ino, d->blk, off, d->buf + off, end - off);
    }
    if (!rc) {
        memset(d->pages, 0, (npages + 63) / 64 * 8);
        d->staged = 1;
    }
    return rc;
}

uint64_t stage_bytes(const gmtf_fs *fs, const struct inode *in)
{
    /* A block written without a bitmap (out of memory) counts as whole,
     * and more than STAGE_MAX. */
    uint64_t staged = 0;
    uint32_t words = (fs->bs / STAGE_PAGE + 63) / 64;
    for (struct dblock *d = in->dirty; d; d = d->inext)
        if (!d->pages)
            staged += fs->bs + 1;
        else
            for (uint32_t w = 0; w < words; w++)
                staged += (uint64_t)__builtin_popcountll(d->pages[w]) * STAGE_PAGE;
    return staged;
}

int stage_inode(gmtf_fs *fs, struct inode *in)
{
    rec_attr_emit(fs); /* the size first: staged bytes may extend it */
    int rc = 0;
    for (struct dblock *d = in->dirty; d && !rc; d = d->inext)
        rc = stage_block(fs, in, d);
    return rc;
}
