/* When data and metadata become durable: the one place that decides when
 * to commit the journal and when to checkpoint. fsync and syncfs, the
 * background flusher, and the writer throttle (a write that finds the
 * write-back cache full flushes and commits first). A commit that finds
 * the journal region full checkpoints instead (fs_commit). */
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

int fs_commit(gmtf_fs *fs)
{
    int rc = journal_commit(fs);
    if (rc != JOURNAL_FULL)
        return rc;
    /* A checkpoint holds everything the journal would, in a journal region
     * big enough for what waits. */
    uint64_t jb = fs->opt.journal_bytes;
    if (jb < fs->jbuf.len * 2)
        jb = fs->jbuf.len * 2;
    return fs_checkpoint(fs, jb);
}

long gmtf_fs_write(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off)
{
    return gmtf_fs_write_flags(fs, ino, buf, n, off, 0);
}

/* Frees retired space: two checkpoints that need no room for data (the
 * dirty blocks that hold no staged bytes stay dirty). */
static int reclaim(gmtf_fs *fs)
{
    if (!alloc_retired_bytes(fs))
        return -ENOSPC;
    int rc = fs_commit(fs);
    if (!rc)
        rc = fs_checkpoint_meta(fs, fs->opt.journal_bytes);
    if (!rc)
        rc = fs_checkpoint_meta(fs, fs->opt.journal_bytes);
    return rc;
}

/* Room for n more dirty bytes: within the write-back limit (a quarter of
 * the cache flushed at a time keeps the stall short; mkfs flushes all, for
 * the widest packing window), and within the space the data can take once
 * stored (-ENOSPC now, to the writer, rather than later at a flush nobody
 * waits for). May drop the lock while encoding. */
static long make_room(gmtf_fs *fs, size_t n)
{
    long rc = 0;
    if (fs->dirty_bytes + n > fs->dirty_limit) {
        rc = fs->opt.no_flush ? flush_some(fs, 0, 0, FLUSH_ASYNC)
                              : flush_some(fs, 0, fs->dirty_limit / 4, FLUSH_UNLOCKED);
        int rc2 = fs_commit(fs); /* what could be stored is committed, whatever failed */
        if (!rc)
            rc = rc2;
        if (rc && rc != -ENOSPC && fs->dirty_bytes + n <= fs->dirty_limit)
            rc = 0; /* the cache still has room: report at fsync */
    }
    /* Uncompressed, the dirty data takes at most its bytes (and a frame
     * header a block): measured against the room only when it may not fit. */
    uint64_t want = fs->dirty_bytes + n + (fs->dirty_bytes + n) / fs->bs * 64 + 4096;
    /* A flush encoding on its thread has not taken its room yet: stored
     * first when the room might be short with it taken. */
    if (!rc && fs->pend && want + flush_pending_bound(fs) > fs->room)
        rc = flush_join(fs);
    if (!rc && want > fs->room && want > alloc_room(fs)) {
        rc = flush_some(fs, 0, 0, 0); /* the real sizes, compressed */
        int rc2 = fs_commit(fs);
        if (!rc)
            rc = rc2;
        want = fs->dirty_bytes + n + n / fs->bs * 64 + 4096;
        if ((!rc || rc == -ENOSPC) && want > alloc_room(fs) && alloc_retired_bytes(fs))
            rc = reclaim(fs);
        if (!rc && want > alloc_room(fs))
            rc = -ENOSPC;
    }
    return rc;
}

long gmtf_fs_write_flags(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off,
                         unsigned flags)
{
    if (flags & ~(unsigned)GMTF_WRITE_KEEP_ATTRS)
        return -EINVAL;
    if (fs->ro)
        return -EROFS;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    long rc = file_write_check(fs, in, n, off);
    if (!rc && n) {
        rc = make_room(fs, n);
        /* The lock may have been dropped while encoding: look again. */
        in = inode_get(fs, ino);
        if (!rc && (!in || !S_ISREG(in->mode)))
            rc = -ENOENT;
    }
    if (!rc && n)
        rc = file_write_locked(fs, in, buf, n, off, flags);
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_fsync(gmtf_fs *fs, uint64_t ino, int datasync)
{
    (void)datasync; /* attributes ride in the same journal chunk: no cheaper path */
    if (fs->ro)
        return 0;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    int rc = 0;
    if (!in) {
        rc = -ENOENT;
    } else if (S_ISREG(in->mode) && in->dirty) {
        /* Small changes go to the journal as they are; larger ones are
         * compressed, if the journal has the room. */
        uint64_t staged = stage_bytes(fs, in);
        if (staged <= STAGE_MAX &&
            fs->jpos + fs->jbuf.len + staged * 2 + 4096 + JR_HDR_SIZE <= fs->sb.jrnl_len)
            rc = stage_inode(fs, in);
        else
            rc = flush_dirty(fs, ino);
    }
    /* Commit whatever is ready (other changes, deletes), even when this
     * file's data could not be stored: the error goes to the caller. */
    int rc2 = fs_commit(fs);
    if (!rc)
        rc = rc2;
    if (!rc && fs->err) {
        rc = fs->err;
        fs->err = 0;
    }
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_syncfs(gmtf_fs *fs)
{
    if (fs->ro)
        return 0;
    FS_WRLOCK(fs);
    int rc = flush_dirty(fs, 0);
    int rc2 = fs_commit(fs); /* what could be stored, even when some could not */
    if (!rc)
        rc = rc2;
    if (!rc && fs->err) {
        rc = fs->err;
        fs->err = 0;
    }
    FS_UNLOCK(fs);
    return rc;
}

static void *flusher_main(void *arg)
{
    gmtf_fs *fs = arg;
    pthread_mutex_lock(&fs->fl_mtx);
    while (!fs->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)fs->opt.flush_interval_ms * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&fs->fl_cond, &fs->fl_mtx, &ts);
        if (fs->stop)
            break;
        pthread_mutex_unlock(&fs->fl_mtx);
        FS_WRLOCK(fs);
        int rc = fs->changed ? fs_compact(fs, 0) : 0;
        /* Rounds of one sub-batch, encoded without the lock held. */
        for (int round = 0; !rc && fs->dlist && round < 64; round++)
            rc = flush_some(fs, 0, 0, FLUSH_UNLOCKED);
        int rc2 = fs_commit(fs); /* what is stored, even if some data is not */
        if (!rc)
            rc = rc2;
        /* A checkpoint when the journal is half full, or to free retired
         * space (two checkpoints later) when there is much of it or room
         * is short. */
        uint64_t retired = fs->changed ? alloc_retired_bytes(fs) : 0;
        if (!rc && (fs->jpos > fs->sb.jrnl_len / 2 ||
                    retired > ((64u << 20) > fs->used / 4 ? (64u << 20) : fs->used / 4) ||
                    (retired && fs->room < alloc_ckpt_need(fs) * 4)))
            rc = fs_checkpoint(fs, fs->opt.journal_bytes);
        if (rc && !fs->err)
            fs->err = rc; /* reported by the next fsync or syncfs */
        FS_UNLOCK(fs);
        pthread_mutex_lock(&fs->fl_mtx);
    }
    pthread_mutex_unlock(&fs->fl_mtx);
    return NULL;
}

int flusher_start(gmtf_fs *fs)
{
    if (fs->ro || !fs->opt.flush_interval_ms)
        return 0;
    int rc = pthread_create(&fs->flusher, NULL, flusher_main, fs);
    if (rc)
        return -rc;
    fs->flusher_on = 1;
    return 0;
}

void flusher_stop(gmtf_fs *fs)
{
    if (!fs->flusher_on)
        return;
    pthread_mutex_lock(&fs->fl_mtx);
    fs->stop = 1;
    pthread_cond_signal(&fs->fl_cond);
    pthread_mutex_unlock(&fs->fl_mtx);
    pthread_join(fs->flusher, NULL);
    fs->flusher_on = 0;
}
