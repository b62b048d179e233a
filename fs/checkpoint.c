/* Checkpoints. A checkpoint writes a new snapshot and an empty journal
 * region into free space, flushes, then writes the other superblock slot
 * with generation + 1 and flushes again: a crash anywhere leaves one of the
 * two slots valid. Once the new slot is durable, the old snapshot, the old
 * journal and everything freed since are free space. */
#include <time.h>

#include "fs_internal.h"

static uint64_t journal_id(const sb_info *sb, uint64_t gen)
{
    /* Unique per checkpoint and per filesystem: a stale chunk left by an
     * older journal (or an older filesystem on the device) never matches. */
    return fs_hash64(sb->uuid, 16, gen) ^ gen;
}

int fs_checkpoint(gmtf_fs *fs, uint64_t journal_bytes)
{
    if (fs->ro)
        return -EROFS;
    int rc = flush_dirty(fs, 0);
    if (rc)
        return rc;
    rc = rec_attr_emit(fs);
    if (rc)
        return rc;
    sb_info nsb = fs->sb;
    nsb.gen = fs->sb.gen + 1;
    if (journal_bytes < JOURNAL_FLOOR)
        journal_bytes = JOURNAL_FLOOR;
    rc = snapshot_write(fs, nsb.gen, &nsb.snap_off, &nsb.snap_len);
    if (rc)
        return rc;
    rc = alloc_space(fs, journal_bytes, &nsb.jrnl_off);
    if (rc) {
        alloc_release_now(fs, nsb.snap_off, nsb.snap_len);
        return rc;
    }
    nsb.jrnl_len = journal_bytes;
    nsb.jrnl_id = journal_id(&nsb, nsb.gen);
    nsb.wtime = (uint64_t)time(NULL);
    nsb.image_end = fs->end;
    uint64_t size;
    /* The journal region must exist before the superblock names it: extend
     * the file (sparse on the host) to the end of the allocated area. */
    if (!fs->img->is_blockdev && !(rc = img_size(fs, &size)) && size < fs->end)
        rc = img_truncate(fs, fs->end);
    if (!rc)
        rc = img_flush(fs); /* snapshot durable before the superblock names it */
    if (!rc)
        rc = sb_write(fs, &nsb);
    if (!rc)
        rc = img_flush(fs);
    if (rc) {
        fs_log(fs, "checkpoint %llu failed: %s", (unsigned long long)nsb.gen, strerror(-rc));
        alloc_release_now(fs, nsb.snap_off, nsb.snap_len);
        alloc_release_now(fs, nsb.jrnl_off, nsb.jrnl_len);
        return rc;
    }
    /* The new state is durable: the old snapshot, journal and everything
     * freed since are free now. */
    if (fs->sb.snap_len)
        alloc_release_now(fs, fs->sb.snap_off, fs->sb.snap_len);
    if (fs->sb.jrnl_len)
        alloc_release_now(fs, fs->sb.jrnl_off, fs->sb.jrnl_len);
    alloc_commit_pending(fs);
    /* The old journal is gone: no STAGE record needs an old frame now. */
    for (size_t i = 0; i < fs->held.n; i++)
        alloc_release_now(fs, fs->held.v[i].off, fs->held.v[i].len);
    fs->held.n = 0;
    for (uint32_t id = 1; id < fs->nframes; id++)
        fs->frames[id].pinned = 0;
    fs->sb = nsb;
    fs->jbuf.len = 0;
    fs->jpos = 0;
    fs->jseq = 0;
    alloc_trim_end(fs);
    return 0;
}
