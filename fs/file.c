/* Regular files: read (with read-ahead), write into the write-back cache,
 * truncate, holes (lseek SEEK_DATA/SEEK_HOLE, fallocate). A file is cut
 * into blocks of fs->bs bytes (blockmap.c); changed blocks wait in the
 * write-back cache (dirty.c) until a flush (flush.c). The writer throttle
 * is sync.c's. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_internal.h"

/* Starts decoding the frames of blocks first..last and a few after; 1 when
 * it did (more than one frame), 0 when the read is left to itself. Ahead:
 * readahead_blocks packs' worth of blocks, at least one (with a pack size
 * below the block size, the same bytes ahead as at a block of a pack). */
static int read_ahead(gmtf_fs *fs, struct inode *in, uint32_t first, uint32_t last)
{
    uint32_t ids[64];
    size_t k = 0;
    uint64_t ahead = (uint64_t)fs->opt.readahead_blocks * fs->ps / fs->bs;
    uint64_t end = last + (ahead ? ahead : 1);
    uint32_t i = blockmap_lower(in, first);
    for (; i < in->u.ext.n && in->u.ext.v[i].blk <= end && k < 64; i++)
        if (!dirty_find(fs, in->ino, in->u.ext.v[i].blk))
            ids[k++] = in->u.ext.v[i].frame;
    if (k < 2)
        return 0;
    frames_prefetch(fs, ids, k);
    return 1;
}

static long read_locked(gmtf_fs *fs, struct inode *in, uint8_t *buf, size_t n, uint64_t off)
{
    if (off >= in->size)
        return 0;
    if (n > in->size - off)
        n = (size_t)(in->size - off);
    if (n == 0)
        return 0;
    uint32_t first = (uint32_t)(off / fs->bs), last = (uint32_t)((off + n - 1) / fs->bs);
    uint32_t prev = __atomic_load_n(&in->last_read, __ATOMIC_RELAXED);
    /* Not covered by read-ahead: a cold frame may be decoded by range. */
    int random = !(fs->opt.readahead_blocks && (prev == first || prev == first + 1 || off == 0) &&
                   read_ahead(fs, in, first, last));
    size_t done = 0;
    while (done < n) {
        uint64_t pos = off + done;
        uint32_t blk = (uint32_t)(pos / fs->bs), boff = (uint32_t)(pos % fs->bs);
        uint32_t len = fs->bs - boff;
        if (len > n - done)
            len = (uint32_t)(n - done);
        struct dblock *d = dirty_find(fs, in->ino, blk);
        if (d) {
            uint32_t have = boff < d->cap ? d->cap - boff : 0;
            if (have > len)
                have = len;
            memcpy(buf + done, d->buf + boff, have);
            memset(buf + done + have, 0, len - have);
        } else {
            struct fref *e = blockmap_find(in, blk);
            uint32_t have = e && boff < e->len ? e->len - boff : 0;
            if (have > len)
                have = len;
            if (have) {
                int rc =
                    frame_copy(fs, e->frame, in->ino, blk, e->off + boff, have, buf + done, random);
                if (rc)
                    return done ? (long)done : rc;
            }
            memset(buf + done + have, 0, len - have);
        }
        done += len;
    }
    __atomic_store_n(&in->last_read, last + 1, __ATOMIC_RELAXED);
    return (long)done;
}

long gmtf_fs_read(gmtf_fs *fs, uint64_t ino, void *buf, size_t n, uint64_t off)
{
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    long rc;
    if (!in)
        rc = -ENOENT;
    else if (S_ISDIR(in->mode))
        rc = -EISDIR;
    else if (!S_ISREG(in->mode))
        rc = -EINVAL;
    else
        rc = read_locked(fs, in, buf, n, off);
    FS_UNLOCK(fs);
    return rc;
}

static int u32_order(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The frames of inos[0..n) as far as half the cache holds them, decoded
 * 64 at a time (frames_prefetch skips those cached or being decoded). */
long gmtf_fs_prefetch(gmtf_fs *fs, const uint64_t *inos, size_t n)
{
    size_t cap = 256, k = 0, done = 0;
    uint32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return -ENOMEM;
    uint64_t bytes = 0, budget = fs->cache_limit / 2;
    long rc = 0;
    FS_RDLOCK(fs);
    for (; done < n; done++) {
        struct inode *in = inode_get(fs, inos[done]);
        if (!in || !S_ISREG(in->mode))
            continue;
        size_t k0 = k;
        uint64_t b0 = bytes;
        for (uint32_t i = 0; i < in->u.ext.n; i++) {
            uint32_t id = in->u.ext.v[i].frame;
            if (!frame_valid(fs, id) || (k && ids[k - 1] == id))
                continue;
            if (k == cap) {
                uint32_t *more = realloc(ids, 2 * cap * sizeof *ids);
                if (!more) {
                    rc = -ENOMEM;
                    goto out;
                }
                ids = more;
                cap *= 2;
            }
            ids[k++] = id;
            bytes += fs->frames[id].dlen;
        }
        if (bytes - b0 > budget) { /* larger than the cache: read-ahead serves it */
            k = k0;
            bytes = b0;
        } else if (bytes > budget) { /* this one waits for the next call */
            k = k0;
            bytes = b0;
            break;
        }
    }
    if (k)
        qsort(ids, k, sizeof *ids, u32_order);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) /* shared frames: once */
        if (!u || ids[u - 1] != ids[i])
            ids[u++] = ids[i];
    for (size_t i = 0; i < u && !rc; i += 64)
        rc = frames_prefetch(fs, ids + i, u - i < 64 ? u - i : 64);
out:
    FS_UNLOCK(fs);
    free(ids);
    return rc ? rc : (long)done;
}

/* Copies data (or zeros when data is NULL) into dirty blocks. */
static int write_blocks(gmtf_fs *fs, struct inode *in, const uint8_t *data, size_t n, uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        uint64_t pos = off + done;
        uint32_t blk = (uint32_t)(pos / fs->bs), boff = (uint32_t)(pos % fs->bs);
        uint32_t len = fs->bs - boff;
        if (len > n - done)
            len = (uint32_t)(n - done);
        struct dblock *d;
        int rc = dirty_get_write(fs, in, blk, boff, len, &d);
        if (rc)
            return rc;
        if (data)
            memcpy(d->buf + boff, data + done, len);
        else
            memset(d->buf + boff, 0, len);
        d->ver = ++fs->dver;
        if (!d->pages)
            d->pages = calloc((fs->bs / STAGE_PAGE + 63) / 64, 8);
        if (d->pages) /* without the bitmap fsync compresses the block instead */
            for (uint32_t pg = boff / STAGE_PAGE; pg <= (boff + len - 1) / STAGE_PAGE; pg++)
                d->pages[pg / 64] |= 1ull << (pg % 64);
        done += len;
    }
    return 0;
}

static uint64_t max_file_size(const gmtf_fs *fs)
{
    return (uint64_t)fs->bs * FILE_BLOCKS_MAX;
}

int file_write_check(gmtf_fs *fs, const struct inode *in, size_t n, uint64_t off)
{
    if (!in)
        return -ENOENT;
    if (S_ISDIR(in->mode))
        return -EISDIR;
    if (!S_ISREG(in->mode))
        return -EINVAL;
    if (off > max_file_size(fs) || n > max_file_size(fs) - off)
        return -EFBIG;
    return 0;
}

long file_write_locked(gmtf_fs *fs, struct inode *in, const void *buf, size_t n, uint64_t off,
                       unsigned flags)
{
    int rc = write_blocks(fs, in, buf, n, off);
    if (rc)
        return rc;
    if (off + n > in->size)
        in->size = off + n;
    if (!(flags & GMTF_WRITE_KEEP_ATTRS)) {
        now_ts(&in->mt_s, &in->mt_ns);
        in->ct_s = in->mt_s;
        in->ct_ns = in->mt_ns;
        /* Writing clears set-user-ID and set-group-ID, as on ext4. */
        if (in->mode & (S_ISUID | S_ISGID)) {
            in->mode &= ~(uint32_t)S_ISUID;
            if (in->mode & S_IXGRP)
                in->mode &= ~(uint32_t)S_ISGID;
        }
    }
    rec_attr_dirty(fs, in);
    return (long)n;
}

int file_truncate_locked(gmtf_fs *fs, struct inode *in, uint64_t size)
{
    if (size > max_file_size(fs))
        return -EFBIG;
    rec_attr_emit(fs); /* earlier size records must precede this one */
    return rec_size(fs, in->ino, size);
}

static int is_data_block(gmtf_fs *fs, struct inode *in, uint32_t blk)
{
    return blockmap_find(in, blk) || dirty_find(fs, in->ino, blk);
}

/* The first block at or after b holding data (mapped or dirty), or nblk.
 * Bounded by the blocks the file has, not by its size (a sparse file may
 * claim 2^32 blocks). */
static uint64_t next_data(struct inode *in, uint64_t b, uint64_t nblk)
{
    uint64_t best = nblk;
    uint32_t i = blockmap_lower(in, (uint32_t)b);
    if (i < in->u.ext.n && in->u.ext.v[i].blk < best)
        best = in->u.ext.v[i].blk;
    for (struct dblock *d = in->dirty; d; d = d->inext)
        if (d->blk >= b && d->blk < best)
            best = d->blk;
    return best;
}

/* The first block at or after b holding no data: steps over data blocks
 * only. */
static uint64_t next_hole(gmtf_fs *fs, struct inode *in, uint64_t b, uint64_t nblk)
{
    while (b < nblk && is_data_block(fs, in, (uint32_t)b))
        b++;
    return b;
}

int64_t gmtf_fs_lseek(gmtf_fs *fs, uint64_t ino, int64_t off, int whence)
{
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    int64_t rc;
    if (!in) {
        rc = -ENOENT;
    } else if (whence == SEEK_SET || whence == SEEK_CUR) {
        rc = off < 0 ? -EINVAL : off;
    } else if (whence == SEEK_END) {
        rc = (int64_t)in->size + off < 0 ? -EINVAL : (int64_t)in->size + off;
    } else if (whence == SEEK_DATA || whence == SEEK_HOLE) {
        if (off < 0)
            rc = -EINVAL;
        else if ((uint64_t)off >= in->size || !S_ISREG(in->mode))
            rc = (uint64_t)off >= in->size ? -ENXIO
                                           : (whence == SEEK_DATA ? off : (int64_t)in->size);
        else {
            uint64_t nblk = (in->size + fs->bs - 1) / fs->bs;
            uint64_t b = (uint64_t)off / fs->bs;
            int want = whence == SEEK_DATA;
            b = want ? next_data(in, b, nblk) : next_hole(fs, in, b, nblk);
            if (b >= nblk)
                rc = want ? -ENXIO : (int64_t)in->size;
            else {
                uint64_t p = b * fs->bs;
                rc = (int64_t)(p > (uint64_t)off ? p : (uint64_t)off);
            }
        }
    } else {
        rc = -EINVAL;
    }
    FS_UNLOCK(fs);
    return rc;
}

int gmtf_fs_fallocate(gmtf_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
    if (fs->ro)
        return -EROFS;
    if (mode & ~(GMTF_FALLOC_KEEP_SIZE | GMTF_FALLOC_PUNCH_HOLE))
        return -EOPNOTSUPP;
    if ((mode & GMTF_FALLOC_PUNCH_HOLE) && !(mode & GMTF_FALLOC_KEEP_SIZE))
        return -EOPNOTSUPP;
    if (len == 0 || off + len < off)
        return -EINVAL;
    FS_WRLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    int rc = 0;
    if (!in)
        rc = -ENOENT;
    else if (!S_ISREG(in->mode))
        rc = S_ISDIR(in->mode) ? -EISDIR : -ENODEV;
    else if (off + len > max_file_size(fs))
        rc = -EFBIG;
    else if (!(mode & GMTF_FALLOC_PUNCH_HOLE)) {
        if (!(mode & GMTF_FALLOC_KEEP_SIZE) && off + len > in->size)
            rc = file_truncate_locked(fs, in, off + len);
    } else {
        uint64_t end = off + len < in->size ? off + len : in->size;
        uint64_t p = off;
        while (!rc && p < end) {
            uint32_t blk = (uint32_t)(p / fs->bs), boff = (uint32_t)(p % fs->bs);
            uint64_t n = fs->bs - boff;
            if (n > end - p)
                n = end - p;
            if (n == fs->bs) { /* a whole block: unmap it */
                struct dblock *d = dirty_find(fs, in->ino, blk);
                int had = d || blockmap_find(in, blk);
                if (d)
                    dirty_drop(fs, d);
                if (had) /* also cancels data staged for this block */
                    rc = rec_ext(fs, in->ino, blk, 0, 0, 0);
            } else if (is_data_block(fs, in, blk)) {
                rc = write_blocks(fs, in, NULL, (size_t)n, p);
            }
            p += n;
        }
    }
    if (!rc) {
        now_ts(&in->mt_s, &in->mt_ns);
        in->ct_s = in->mt_s;
        in->ct_ns = in->mt_ns;
        rec_attr_dirty(fs, in);
    }
    FS_UNLOCK(fs);
    return rc;
}
