/* Reading frames: a frame's decoded bytes come from the cache (cache.c) or
 * are read from the image and decoded (codec_pool.c), one frame for a read
 * or a batch for read-ahead and verification. A frame read by several
 * threads at once is decoded once (pending cache entries). A cold read
 * that read-ahead does not cover, of a small part of a large frame, decodes
 * that part only (gmtf_frame_decode_range: the entropy decoding and the
 * inverse BWT's rank counts, then only the chains of 32 KiB that cover it),
 * uncached; a later such read of the same frame soon after decodes it
 * whole into the cache, reusing that decode, when it goes on from the read
 * before or is the third (a walk through a pack of small files, a file
 * read in pieces), else by range again (range_whole). */
#include <stdio.h>

#include "fs_internal.h"

static int frame_check_header(gmtf_fs *fs, uint32_t id, const uint8_t *src)
{
    struct frame *f = &fs->frames[id];
    gmtf_frame_info fi;
    int rc = gmtf_frame_info_get(src, f->clen, &fi);
    if (rc)
        return rc;
    if (fi.frame_len != f->clen || fi.orig_len != f->dlen || fi.data_crc != f->crc)
        return GMTF_E_CORRUPT;
    return 0;
}

/* Reads and decodes frames ids[0..n) in one batch. out[i] may hold a
 * buffer of frame i's size to decode into, else NULL; on return it holds
 * the decoded bytes, or NULL with status[i] saying why (a buffer given is
 * freed). A batch (n > 1) decodes into scratch when given (the sum of the
 * sizes), then is copied out. Returns 0, or -ENOMEM for the whole batch. */
static int frames_decode(gmtf_fs *fs, const uint32_t *ids, size_t n, uint8_t **out, int *status,
                         uint8_t *scratch)
{
    uint64_t *foff = malloc((n + 1) * sizeof *foff), *doff = malloc((n + 1) * sizeof *doff);
    int *st2 = calloc(n, sizeof *st2);
    uint8_t *src = NULL, *dst = NULL, *own = NULL;
    int rc = 0;
    if (!foff || !doff || !st2) {
        rc = -ENOMEM;
        goto out;
    }
    foff[0] = doff[0] = 0;
    for (size_t i = 0; i < n; i++) {
        foff[i + 1] = foff[i] + fs->frames[ids[i]].clen;
        doff[i + 1] = doff[i] + fs->frames[ids[i]].dlen;
    }
    src = malloc(foff[n] ? foff[n] : 1);
    if (n == 1 && !out[0])
        out[0] =
            malloc(cache_buf_cap(fs, (uint32_t)doff[1]) ? cache_buf_cap(fs, (uint32_t)doff[1]) : 1);
    dst = n == 1 ? out[0] : scratch ? scratch : (own = malloc(doff[n] ? doff[n] : 1));
    if (!src || !dst) {
        rc = -ENOMEM;
        goto out;
    }
    memset(src, 0, foff[n]); /* every byte is then read from the image or zeroed */
    for (size_t i = 0; i < n; i++) {
        struct frame *f = &fs->frames[ids[i]];
        status[i] = f->flags & FRAME_OUTSIDE ? -EIO : img_read(fs, src + foff[i], f->clen, f->off);
        if (!status[i])
            status[i] = frame_check_header(fs, ids[i], src + foff[i]);
        if (status[i]) /* keep the batch decodable: an empty frame stands in */
            memset(src + foff[i], 0, f->clen);
    }
    codec_decode_batch(fs, n, src, foff, dst, doff, st2);
    __atomic_add_fetch(&fs->frames_decoded, n, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) {
        if (!status[i])
            status[i] = st2[i];
        if (status[i] || n == 1)
            continue;
        if (!out[i])
            out[i] = malloc(cache_buf_cap(fs, (uint32_t)(doff[i + 1] - doff[i])));
        if (out[i])
            memcpy(out[i], dst + doff[i], doff[i + 1] - doff[i]);
        else
            status[i] = -ENOMEM;
    }
out:
    for (size_t i = 0; i < n; i++) {
        if (rc)
            status[i] = rc;
        if (status[i]) {
            free(out[i]);
            out[i] = NULL;
        }
    }
    free(foff);
    free(doff);
    free(st2);
    free(src);
    free(own);
    return rc;
}

/* A read of part of a frame: decoded by range when the frame is at least
 * RANGE_MIN bytes and the part at most a RANGE_DIV-th of it. */
#define RANGE_MIN (256u << 10)
#define RANGE_DIV 4

/* Bytes [off, off+len) of frame id into dst by range (the whole frame when
 * that is the range: then checked as a whole decode is). */
static int frame_range(gmtf_fs *fs, uint32_t id, uint32_t off, uint32_t len, uint8_t *dst)
{
    struct frame *f = &fs->frames[id];
    if (f->flags & FRAME_OUTSIDE)
        return -EIO;
    uint8_t *src = malloc(f->clen ? f->clen : 1);
    if (!src)
        return -ENOMEM;
    int rc = img_read(fs, src, f->clen, f->off);
    if (!rc)
        rc = frame_check_header(fs, id, src);
    if (!rc)
        rc = codec_decode_range(fs, id, src, f->clen, off, len, dst);
    free(src);
    __atomic_add_fetch(&fs->frames_decoded, 1, __ATOMIC_RELAXED);
    return rc;
}

/* A read that begins at most this far past where the last read of the
 * same frame ended goes on through it (the next file of a pack, the next
 * piece of a file). */
#define RANGE_SEQ_GAP (128u << 10)

/* Whether a part [off, off + len) of frame id, cold, is decoded whole into
 * the cache (1) or by range (0); notes the read. The first read of a frame
 * goes by range; a later one while the frame is among the last few read by
 * range goes whole when it goes on from the one before or is the third:
 * reads walking through a pack then come from the cache, and random reads
 * that land in a frame read before take a range again (from what the
 * codec's workspace kept of the first when it still holds it: the chains
 * of the range only), not a walk of the whole frame. Caller holds
 * cache_lock. */
static int range_whole(gmtf_fs *fs, uint32_t id, uint32_t off, uint32_t len)
{
    unsigned n = sizeof fs->range_recent / sizeof *fs->range_recent;
    for (unsigned i = 0; i < n; i++) {
        struct range_note *r = &fs->range_recent[i];
        if (!r->reads || r->id != id)
            continue;
        int next = off >= r->end && off - r->end <= RANGE_SEQ_GAP;
        r->end = off + len;
        return next || ++r->reads >= 3;
    }
    fs->range_recent[fs->range_pos++ % n] = (struct range_note){id, off + len, 1};
    return 0;
}

static int frame_unreadable(gmtf_fs *fs, uint32_t id, uint64_t ino, uint32_t blk, int rc)
{
    fs_log(fs, "inode %llu block %u: frame %u at offset %llu (%u bytes) unreadable: %s",
           (unsigned long long)ino, blk, id, (unsigned long long)fs->frames[id].off,
           fs->frames[id].clen, rc < -1000 ? gmtf_strerror(rc) : strerror(-rc));
    return rc == -ENOMEM ? rc : -EIO;
}

int frame_copy(gmtf_fs *fs, uint32_t id, uint64_t ino, uint32_t blk, uint32_t off, uint32_t len,
               void *dst, int random)
{
    if (!frame_valid(fs, id) || (uint64_t)off + len > fs->frames[id].dlen)
        return -EIO;
    uint32_t dlen = fs->frames[id].dlen;
    pthread_mutex_lock(&fs->cache_lock);
    const uint8_t *hit = cache_get(fs, id);
    if (hit) {
        memcpy(dst, hit + off, len);
        pthread_mutex_unlock(&fs->cache_lock);
        return 0;
    }
    /* range_reads: 0 is the default, on; < 0 off */
    int part = fs->opt.range_reads >= 0 && random && dlen >= RANGE_MIN && len <= dlen / RANGE_DIV;
    int again = part && range_whole(fs, id, off, len);
    if (part && !again) {
        pthread_mutex_unlock(&fs->cache_lock);
        __atomic_add_fetch(&fs->range_decodes, 1, __ATOMIC_RELAXED);
        int rc = frame_range(fs, id, off, len, dst);
        return rc ? frame_unreadable(fs, id, ino, blk, rc) : 0;
    }
    struct pending *p = pending_begin(fs, id);
    uint8_t *buf = cache_recycle(fs, dlen);
    pthread_mutex_unlock(&fs->cache_lock);
    int status, rc;
    if (again) { /* whole, from what the first range left where it can */
        rc = buf || (buf = malloc(cache_buf_cap(fs, dlen))) ? 0 : -ENOMEM;
        if (!rc)
            rc = frame_range(fs, id, 0, dlen, buf);
        if (rc) {
            free(buf);
            buf = NULL;
        }
    } else {
        rc = frames_decode(fs, &id, 1, &buf, &status, NULL);
        if (!rc)
            rc = status;
    }
    if (rc) {
        pthread_mutex_lock(&fs->cache_lock);
        pending_end(fs, p, id, NULL, 0);
        pthread_mutex_unlock(&fs->cache_lock);
        return frame_unreadable(fs, id, ino, blk, rc);
    }
    memcpy(dst, buf + off, len);
    pthread_mutex_lock(&fs->cache_lock);
    pending_end(fs, p, id, buf, fs->frames[id].dlen);
    pthread_mutex_unlock(&fs->cache_lock);
    return 0;
}

int frames_prefetch(gmtf_fs *fs, const uint32_t *ids, size_t n)
{
    uint32_t want[64];
    struct pending *pend[64];
    size_t k = 0;
    pthread_mutex_lock(&fs->cache_lock);
    for (size_t i = 0; i < n && k < 64; i++) {
        /* cached, pending (here too: a repeated id) or gone: not ours */
        if (!frame_valid(fs, ids[i]) || cache_find(fs, ids[i]))
            continue;
        pend[k] = pending_begin(fs, ids[i]);
        if (pend[k])
            want[k++] = ids[i];
    }
    pthread_mutex_unlock(&fs->cache_lock);
    /* As many frames at a time as the codec has threads: the decode runs
     * as parallel as one big batch, each group is readable as soon as it
     * is done, and the buffers in flight stay a few blocks. */
    size_t step = fs->pool_max ? fs->pool_max : 1; /* the codec's threads, at most 16 */
    uint8_t *scratch = k > 1 && step > 1 ? malloc(step * (size_t)fs->bs) : NULL;
    int rc = 0;
    for (size_t s = 0; s < k; s += step) {
        size_t m = k - s < step ? k - s : step;
        uint8_t *bufs[64];
        int status[64];
        pthread_mutex_lock(&fs->cache_lock);
        for (size_t i = 0; i < m; i++)
            bufs[i] = cache_recycle(fs, fs->frames[want[s + i]].dlen);
        pthread_mutex_unlock(&fs->cache_lock);
        if (rc) {
            for (size_t i = 0; i < m; i++) {
                free(bufs[i]);
                bufs[i] = NULL;
            }
        } else {
            rc = frames_decode(fs, want + s, m, bufs, status, scratch);
        }
        pthread_mutex_lock(&fs->cache_lock);
        for (size_t i = 0; i < m; i++)
            pending_end(fs, pend[s + i], want[s + i], bufs[i], fs->frames[want[s + i]].dlen);
        pthread_mutex_unlock(&fs->cache_lock);
    }
    free(scratch);
    return rc; /* errors of single frames are reported by the read that needs it */
}

int frames_verify(gmtf_fs *fs, const uint32_t *ids, size_t n, int *status)
{
    uint8_t **bufs = calloc(n, sizeof *bufs);
    if (!bufs)
        return -ENOMEM;
    int rc = frames_decode(fs, ids, n, bufs, status, NULL);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    return rc;
}
