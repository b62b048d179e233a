/* Regular files: block map, write-back cache of dirty blocks, read and
 * write, truncate, holes. A file is cut into blocks of fs->bs bytes; block
 * blk maps to bytes [off, off+len) of a frame, bytes past len read as
 * zeros, an unmapped block is a hole. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_internal.h"

#define MAX_BLOCKS 0xffffffffull

/* ---- block map ------------------------------------------------------------- */

static uint32_t ext_lower(const struct inode *in, uint32_t blk)
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

struct fref *file_find_ext(struct inode *in, uint32_t blk)
{
    uint32_t i = ext_lower(in, blk);
    if (i < in->u.ext.n && in->u.ext.v[i].blk == blk)
        return &in->u.ext.v[i];
    return NULL;
}

static uint64_t share_of(gmtf_fs *fs, uint32_t frame, uint32_t len)
{
    struct frame *f = &fs->frames[frame];
    return f->dlen ? (uint64_t)f->clen * len / f->dlen : 0;
}

int file_set_ext(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t frame, uint32_t off,
                 uint32_t len)
{
    uint32_t i = ext_lower(in, blk);
    int found = i < in->u.ext.n && in->u.ext.v[i].blk == blk;
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
        if (in->u.ext.n == in->u.ext.cap) {
            uint32_t cap = in->u.ext.cap ? in->u.ext.cap * 2 : 1;
            struct fref *v = realloc(in->u.ext.v, cap * sizeof *v);
            if (!v) {
                frame_unref(fs, frame);
                return -ENOMEM;
            }
            in->u.ext.v = v;
            in->u.ext.cap = cap;
        }
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

void file_free_exts(gmtf_fs *fs, struct inode *in)
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

/* ---- dirty blocks ------------------------------------------------------------ */

static size_t dslot(gmtf_fs *fs, uint64_t ino, uint32_t blk)
{
    uint64_t h = (ino * 0x9e3779b97f4a7c15ull) ^ (blk * 0xbf58476d1ce4e5b9ull);
    return (size_t)(h ^ (h >> 29)) & (fs->dhash_cap - 1);
}

struct dblock *dirty_find(gmtf_fs *fs, uint64_t ino, uint32_t blk)
{
    if (!fs->dhash_cap)
        return NULL;
    for (struct dblock *d = fs->dhash[dslot(fs, ino, blk)]; d; d = d->hnext)
        if (d->ino == ino && d->blk == blk)
            return d;
    return NULL;
}

static int dirty_grow(gmtf_fs *fs, struct dblock *d, uint32_t need)
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
    memset(b + d->cap, 0, cap - d->cap);
    fs->dirty_bytes += cap - d->cap;
    d->buf = b;
    d->cap = cap;
    return 0;
}

int dirty_get(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t need, struct dblock **out)
{
    struct dblock *d = dirty_find(fs, in->ino, blk);
    if (d) {
        *out = d;
        return dirty_grow(fs, d, need);
    }
    if (!fs->dhash_cap) {
        fs->dhash = calloc(8192, sizeof *fs->dhash);
        if (!fs->dhash)
            return -ENOMEM;
        fs->dhash_cap = 8192;
    }
    d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->ino = in->ino;
    d->blk = blk;
    d->ver = ++fs->dver;
    struct fref *e = file_find_ext(in, blk);
    uint32_t base = e ? e->len : 0;
    int rc = dirty_grow(fs, d, need > base ? need : base);
    if (!rc && e)
        rc = frame_copy(fs, e->frame, in->ino, blk, e->off, e->len, d->buf);
    if (rc) {
        fs->dirty_bytes -= d->cap;
        free(d->buf);
        free(d);
        return rc;
    }
    size_t s = dslot(fs, in->ino, blk);
    d->hnext = fs->dhash[s];
    fs->dhash[s] = d;
    d->inext = in->dirty;
    in->dirty = d;
    d->gnext = fs->dlist;
    if (fs->dlist)
        fs->dlist->gprev = d;
    fs->dlist = d;
    *out = d;
    return 0;
}

void dirty_drop(gmtf_fs *fs, struct dblock *d)
{
    struct dblock **pp = &fs->dhash[dslot(fs, d->ino, d->blk)];
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
    free(d->pages);
    free(d->buf);
    free(d);
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
    int rc = dirty_get(fs, in, blk, off + len, &d);
    if (rc)
        return rc;
    memcpy(d->buf + off, data, len);
    d->ver = ++fs->dver;
    return 0;
}

int file_set_size(gmtf_fs *fs, struct inode *in, uint64_t size)
{
    if (size < in->size) {
        uint64_t first = (size + fs->bs - 1) / fs->bs; /* first block wholly past */
        while (in->u.ext.n && in->u.ext.v[in->u.ext.n - 1].blk >= first)
            file_set_ext(fs, in, in->u.ext.v[in->u.ext.n - 1].blk, 0, 0, 0);
        dirty_drop_inode(fs, in, first > MAX_BLOCKS ? (uint32_t)MAX_BLOCKS : (uint32_t)first);
        uint32_t part = (uint32_t)(size % fs->bs);
        if (part) {
            uint32_t blk = (uint32_t)(size / fs->bs);
            struct fref *e = file_find_ext(in, blk);
            if (e && e->len > part) /* bytes past len read as zeros */
                file_set_ext(fs, in, blk, e->frame, e->off, part);
            struct dblock *d = dirty_find(fs, in->ino, blk);
            if (d && d->cap > part)
                memset(d->buf + part, 0, d->cap - part);
            if (d)
                d->ver = ++fs->dver;
        }
    }
    in->size = size;
    return 0;
}

/* ---- read ------------------------------------------------------------------------ */

static void read_ahead(gmtf_fs *fs, struct inode *in, uint32_t first, uint32_t last)
{
    uint32_t ids[64];
    size_t k = 0;
    uint64_t end = last + (uint64_t)fs->opt.readahead_blocks;
    uint32_t i = ext_lower(in, first);
    for (; i < in->u.ext.n && in->u.ext.v[i].blk <= end && k < 64; i++)
        if (!dirty_find(fs, in->ino, in->u.ext.v[i].blk))
            ids[k++] = in->u.ext.v[i].frame;
    if (k > 1)
        frames_prefetch(fs, ids, k);
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
    if (fs->opt.readahead_blocks && (prev == first || prev == first + 1 || off == 0))
        read_ahead(fs, in, first, last);
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
            struct fref *e = file_find_ext(in, blk);
            uint32_t have = e && boff < e->len ? e->len - boff : 0;
            if (have > len)
                have = len;
            if (have) {
                int rc = frame_copy(fs, e->frame, in->ino, blk, e->off + boff, have, buf + done);
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

/* ---- write ------------------------------------------------------------------------- */

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
        int rc = dirty_get(fs, in, blk, boff + len, &d);
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

static uint64_t max_file_size(gmtf_fs *fs)
{
    return (uint64_t)fs->bs * MAX_BLOCKS;
}

long gmtf_fs_write(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off)
{
    return gmtf_fs_write_flags(fs, ino, buf, n, off, 0);
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
    long rc = 0;
    if (!in)
        rc = -ENOENT;
    else if (S_ISDIR(in->mode))
        rc = -EISDIR;
    else if (!S_ISREG(in->mode))
        rc = -EINVAL;
    else if (off > max_file_size(fs) || n > max_file_size(fs) - off)
        rc = -EFBIG;
    if (!rc && n && fs->dirty_bytes + n > fs->dirty_limit) {
        /* Make room first, so a failure leaves the file unchanged. A quarter
         * of the cache at a time keeps the stall short; mkfs flushes all at
         * once, for the widest packing window. */
        rc = fs->opt.no_flush ? flush_some(fs, 0, 0, 0) : flush_some(fs, 0, fs->dirty_limit / 4, 1);
        if (!rc)
            rc = jr_commit(fs);
        if (rc && fs->dirty_bytes + n <= fs->dirty_limit)
            rc = 0; /* the cache still has room: report at fsync */
        /* The lock was dropped while encoding: look the inode up again. */
        in = inode_get(fs, ino);
        if (!rc && (!in || !S_ISREG(in->mode)))
            rc = -ENOENT;
    }
    if (!rc && n) {
        rc = write_blocks(fs, in, buf, n, off);
        if (!rc) {
            if (off + n > in->size)
                in->size = off + n;
            if (!(flags & GMTF_WRITE_KEEP_ATTRS)) {
                now_ts(&in->mt_s, &in->mt_ns);
                in->ct_s = in->mt_s;
                in->ct_ns = in->mt_ns;
            }
            /* Writing clears set-user-ID and set-group-ID, as on ext4. */
            if (!(flags & GMTF_WRITE_KEEP_ATTRS) && (in->mode & (S_ISUID | S_ISGID))) {
                in->mode &= ~(uint32_t)S_ISUID;
                if (in->mode & S_IXGRP)
                    in->mode &= ~(uint32_t)S_ISGID;
            }
            inode_mark_dirty(fs, in);
            rc = (long)n;
        }
    }
    FS_UNLOCK(fs);
    return rc;
}

/* ---- size, holes ------------------------------------------------------------------ */

int file_truncate_locked(gmtf_fs *fs, struct inode *in, uint64_t size)
{
    if (size > max_file_size(fs))
        return -EFBIG;
    inode_emit_dirty(fs); /* earlier size records must precede this one */
    return jr_size(fs, in->ino, size);
}

static int is_data_block(gmtf_fs *fs, struct inode *in, uint32_t blk)
{
    return file_find_ext(in, blk) || dirty_find(fs, in->ino, blk);
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
            while (b < nblk && is_data_block(fs, in, (uint32_t)b) != want)
                b++;
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
                int had = d || file_find_ext(in, blk);
                if (d)
                    dirty_drop(fs, d);
                if (had) /* also cancels data staged for this block */
                    rc = jr_ext(fs, in->ino, blk, 0, 0, 0);
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
        inode_mark_dirty(fs, in);
    }
    FS_UNLOCK(fs);
    return rc;
}
