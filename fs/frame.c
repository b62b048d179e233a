/* The frame table: frames by id (0 = a hole, never a frame). A frame is
 * one codec frame in the image holding up to one block of decoded bytes:
 * one file block, or several small files packed together. Block maps hold
 * references; the last one gone frees the frame's space (after the next
 * commit) and its id. */
#include <stdio.h>

#include "fs_internal.h"

int frame_valid(gmtf_fs *fs, uint32_t id)
{
    return id && id < fs->nframes && fs->frames[id].clen;
}

static int frame_table_grow(gmtf_fs *fs, uint32_t need)
{
    if (need < fs->nframes)
        return 0;
    if (need >= (1u << 31))
        return -EUCLEAN;
    uint32_t n = fs->nframes ? fs->nframes : 1024;
    while (n <= need)
        n *= 2;
    struct frame *t = realloc(fs->frames, (size_t)n * sizeof *t);
    if (!t)
        return -ENOMEM;
    memset(t + fs->nframes, 0, (size_t)(n - fs->nframes) * sizeof *t);
    fs->frames = t;
    fs->nframes = n;
    return 0;
}

int frame_new_id(gmtf_fs *fs, uint32_t *id)
{
    while (fs->nframe_free) {
        uint32_t i = fs->frame_free[--fs->nframe_free];
        if (i < fs->nframes && !fs->frames[i].clen) {
            *id = i;
            return 0;
        }
    }
    /* Past the highest id in use: scan down once from the table end. */
    uint32_t i = fs->nframes;
    while (i > 1 && !fs->frames[i - 1].clen)
        i--;
    if (i == 0)
        i = 1;
    int rc = frame_table_grow(fs, i);
    if (rc)
        return rc;
    *id = i;
    return 0;
}

int frame_reserve(gmtf_fs *fs, uint32_t k)
{
    uint32_t i = fs->nframes;
    while (i > 1 && !fs->frames[i - 1].clen)
        i--;
    if (i == 0)
        i = 1;
    return k ? frame_table_grow(fs, i + k) : 0;
}

int frame_set(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc)
{
    if (id == 0 || clen == 0 || dlen == 0 || dlen > fs->bs || clen > gmtf_frame_bound(fs->bs) ||
        off < fs->data_start || off + clen < off ||
        (fs->sb.capacity && off + clen > fs->sb.capacity))
        return -EUCLEAN;
    int rc = frame_table_grow(fs, id);
    if (rc)
        return rc;
    if (fs->frames[id].clen)
        return -EUCLEAN;
    /* From the snapshot: made before the generation began. */
    uint32_t flags = fs->loading == LOADING_SNAPSHOT ? 0 : FRAME_FRESH;
    fs->frames[id] = (struct frame){off, clen, dlen, crc, 0, 0, flags};
    fs->live_frames++;
    fs->stored_bytes += clen;
    return 0;
}

void frame_ref(gmtf_fs *fs, uint32_t id)
{
    fs->frames[id].refs++;
}

void frame_unref(gmtf_fs *fs, uint32_t id)
{
    struct frame *f = &fs->frames[id];
    if (f->refs && --f->refs)
        return;
    /* Space an older durable state names (the previous generation's
     * snapshot, or a STAGE record's base in a journal) is retired until two
     * checkpoints later (alloc.c); a frame made since the last checkpoint
     * is free once the record freeing it is committed. */
    if (!(f->flags & FRAME_FRESH) || (f->flags & FRAME_PINNED))
        alloc_retire(fs, f->off, f->clen);
    else if (!fs->loading) /* (loading: free at the rebuild; later records may reuse it) */
        alloc_release(fs, f->off, f->clen);
    cache_drop(fs, id);
    fs->live_frames--;
    fs->stored_bytes -= f->clen;
    memset(f, 0, sizeof *f);
    if (fs->loading)
        return;
    if (fs->nframe_free == fs->frame_free_cap) {
        size_t cap = fs->frame_free_cap ? fs->frame_free_cap * 2 : 256;
        uint32_t *v = realloc(fs->frame_free, cap * sizeof *v);
        if (!v)
            return; /* the id is found again by a later scan */
        fs->frame_free = v;
        fs->frame_free_cap = cap;
    }
    fs->frame_free[fs->nframe_free++] = id;
}
