/* Checkpoints. A checkpoint writes the new snapshot (two copies) and an
 * empty journal region (two copies, allocated on the host) into free
 * space, flushes, then writes the generation's primary superblock slot,
 * flushes, its secondary slot, and flushes again: a crash anywhere leaves a
 * loadable generation. The generation before stays whole until the next
 * checkpoint is durable (alloc.c, retirement): a damaged newest state
 * falls back to it, never to an empty one. */
#include <stdio.h>
#include <time.h>

#include "fs_internal.h"

/* Two journal copies of len bytes, allocated on the host. */
static int journal_alloc(gmtf_fs *fs, uint64_t len, sb_info *nsb)
{
    uint64_t at[2];
    int rc = alloc_meta(fs, len, &at[0]);
    if (rc)
        return rc;
    rc = alloc_meta(fs, len, &at[1]);
    if (rc) {
        alloc_release_now(fs, at[0], alloc_meta_len(fs, len));
        return rc;
    }
    /* No sparse hole: commits must not fail for space on a full host. */
    for (int k = 0; k < 2 && !rc; k++) {
        rc = img_reserve(fs, at[k], len);
        if (rc == -EOPNOTSUPP) { /* a host without fallocate: extend at least */
            uint64_t size;
            rc = img_size(fs, &size);
            if (!rc && !fs->img->is_blockdev && size < at[k] + len)
                rc = img_truncate(fs, at[k] + len);
        }
    }
    if (rc) {
        alloc_release_now(fs, at[0], alloc_meta_len(fs, len));
        alloc_release_now(fs, at[1], alloc_meta_len(fs, len));
        return rc;
    }
    nsb->jrnl_off = at[0];
    nsb->jrnl2_off = at[1];
    nsb->jrnl_len = len;
    return 0;
}

/* Space of the new generation that failed: free when its slot cannot have
 * reached the disk, else retired (the slot may be there). */
static void checkpoint_undo(gmtf_fs *fs, const sb_info *nsb, int slot_written)
{
    uint64_t sl = alloc_meta_len(fs, nsb->snap_len), jl = alloc_meta_len(fs, nsb->jrnl_len);
    uint64_t r[4][2] = {
        {nsb->snap_off, sl}, {nsb->snap2_off, sl}, {nsb->jrnl_off, jl}, {nsb->jrnl2_off, jl}};
    for (int i = 0; i < 4; i++) {
        if (!r[i][1] || !r[i][0])
            continue;
        if (slot_written)
            alloc_retire(fs, r[i][0], r[i][1]);
        else
            alloc_release_now(fs, r[i][0], r[i][1]);
    }
}

static int checkpoint(gmtf_fs *fs, uint64_t journal_bytes, unsigned flush_flags)
{
    if (fs->ro)
        return -EROFS;
    /* The dirty blocks holding staged bytes at least: the new journal will
     * not have their STAGE records. */
    int rc = flush_some(fs, 0, 0, flush_flags);
    if (rc)
        return rc;
    rc = rec_attr_emit(fs);
    if (rc)
        return rc;
    sb_info nsb = fs->sb;
    nsb.version = FMT_VERSION;
    nsb.gen = fs->sb.gen + 1;
    nsb.ino_gen = inode_gen_floor(fs);
    nsb.snap_len = nsb.jrnl_len = 0;
    nsb.jrnl_off = nsb.jrnl2_off = 0;                   /* none, unless allocated below */
    if (journal_bytes && journal_bytes < JOURNAL_FLOOR) /* 0: none (mkfs's incomplete state) */
        journal_bytes = JOURNAL_FLOOR;
    journal_bytes = (journal_bytes + META_ALIGN - 1) / META_ALIGN * META_ALIGN;
    if (fs->mkfs_fill) /* every durable state is incomplete: no frame of it matters */
        alloc_commit_pending(fs);
    extvec retire;
    rc = alloc_retire_list(fs, &retire);
    if (rc)
        return rc;
    rc = snapshot_write(fs, nsb.gen, &retire, &nsb);
    if (!rc && journal_bytes) {
        rc = journal_alloc(fs, journal_bytes, &nsb);
        if (rc == -ENOSPC && journal_bytes > JOURNAL_MIN) /* tight: a small one */
            rc = journal_alloc(fs, JOURNAL_MIN, &nsb);
        if (rc)
            checkpoint_undo(fs, &nsb, 0);
    }
    if (rc) {
        ev_free(&retire);
        return rc;
    }
    nsb.jrnl_id = sb_journal_id(nsb.uuid, nsb.gen);
    nsb.wtime = fs->opt.write_time ? (uint64_t)fs->opt.write_time : (uint64_t)time(NULL);
    nsb.image_end = fs->end;
    rc = img_flush(fs); /* snapshot durable before a slot names it */
    int slot_written = 0;
    if (!rc) {
        slot_written = 1;
        rc = sb_write(fs, &nsb, 0);
    }
    if (!rc)
        rc = img_flush(fs);
    if (rc) {
        fs_log(fs, "checkpoint %llu failed: %s", (unsigned long long)nsb.gen, strerror(-rc));
        checkpoint_undo(fs, &nsb, slot_written);
        ev_free(&retire);
        return rc;
    }
    /* Generation nsb.gen is durable. Its second slot copy only guards
     * against later damage: a failure here is reported, not fatal. */
    if (fs->upgrading) {
        /* A version 1 image's first version 2 checkpoint: the secondary
         * slots lie where the old generation's data may still be. */
    } else {
        int r2 = sb_write(fs, &nsb, 1);
        if (!r2)
            r2 = img_flush(fs);
        if (r2)
            fs_log(fs, "checkpoint %llu: the second superblock copy was not written: %s",
                   (unsigned long long)nsb.gen, strerror(-r2));
    }
    alloc_generation_done(fs, &retire);
    for (uint32_t id = 1; id < fs->nframes; id++) /* a generation begins */
        fs->frames[id].flags &= FRAME_OUTSIDE;    /* (outside stays: frame.c) */
    fs->sb = nsb;
    fs->sb_load_size = 0; /* its regions were given out by this mount */
    if (!(nsb.incompat & SB_INCOMPLETE))
        fs->mkfs_fill = 0; /* a complete state is durable: its frames matter */
    fs->data_start = DATA_START;
    fs->jbuf.len = 0;
    fs->jpos = 0;
    fs->jseq = 0;
    fs->meta_damaged = fs->sb_twin_bad = fs->sb_pair_lost = 0;
    fs->root_nlink_bad = 0;
    for (struct dblock *d = fs->dlist; d; d = d->gnext)
        d->staged = 0; /* their STAGE records went with the old journal */
    alloc_trim_end(fs);
    alloc_spare_ensure(fs); /* space for the next one, when tight (else logged) */
    return 0;
}

int fs_checkpoint(gmtf_fs *fs, uint64_t journal_bytes)
{
    return checkpoint(fs, journal_bytes, 0);
}

int fs_checkpoint_meta(gmtf_fs *fs, uint64_t journal_bytes)
{
    return checkpoint(fs, journal_bytes, FLUSH_STAGED);
}
