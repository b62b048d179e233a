/* The frame table, the cache of decoded frames, and the codec calls.
 * A frame is one codec frame in the image holding up to one block of
 * decoded bytes: one file block, or several small files packed together. */
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

int frame_set(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc)
{
    if (id == 0 || clen == 0 || dlen == 0 || dlen > fs->bs || clen > gmtf_frame_bound(fs->bs) ||
        off < DATA_START || off + clen < off ||
        (fs->sb.capacity && off + clen > fs->sb.capacity))
        return -EUCLEAN;
    int rc = frame_table_grow(fs, id);
    if (rc)
        return rc;
    if (fs->frames[id].clen)
        return -EUCLEAN;
    fs->frames[id] = (struct frame){off, clen, dlen, crc, 0, 0, 0};
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
    if (f->pinned && !fs->replaying) {
        /* Replay of an earlier STAGE record of this journal decodes this
         * frame as the block's base: keep it until a checkpoint drops the
         * journal. */
        if (ev_add(&fs->held, f->off, f->clen))
            fs_log(fs, "out of memory: %llu bytes at %llu leak until remount",
                   (unsigned long long)f->clen, (unsigned long long)f->off);
    } else {
        alloc_release(fs, f->off, f->clen);
    }
    cache_drop(fs, id);
    fs->live_frames--;
    fs->stored_bytes -= f->clen;
    memset(f, 0, sizeof *f);
    if (fs->replaying)
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

/* ---- codec ------------------------------------------------------------------ */

int codec_encode(gmtf_fs *fs, const uint8_t *src, const uint64_t *off, size_t n, uint8_t **dst,
                 uint64_t *doff)
{
    uint64_t cap = gmtf_batch_bound(off, n);
    uint8_t *out = malloc(cap ? cap : 1);
    if (!out)
        return -ENOMEM;
    pthread_mutex_lock(&fs->codec_lock);
    int rc = gmtf_batch_encode(fs->codec, src, off, n, out, cap, doff);
    pthread_mutex_unlock(&fs->codec_lock);
    if (rc) {
        free(out);
        fs_log(fs, "encoding %zu blocks failed: %s", n, gmtf_strerror(rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    *dst = out;
    return 0;
}

/* Decodes on the big codec when the batch has several frames and it is
 * free, else on a single-threaded codec of the pool. */
static int decoder_run(gmtf_fs *fs, size_t n, const uint8_t *src, const uint64_t *foff,
                       uint8_t *dst, const uint64_t *doff, int *status)
{
    if (n > 1 && pthread_mutex_trylock(&fs->codec_lock) == 0) {
        int rc = gmtf_batch_decode(fs->codec, src, foff, n, dst, doff, status);
        pthread_mutex_unlock(&fs->codec_lock);
        return rc;
    }
    pthread_mutex_lock(&fs->dpool_mtx);
    int slot = -1;
    while (slot < 0) {
        for (unsigned i = 0; i < fs->ndpool; i++)
            if (!(fs->dpool_busy >> i & 1)) {
                slot = (int)i;
                break;
            }
        if (slot < 0 && fs->ndpool < sizeof fs->dpool / sizeof *fs->dpool &&
            fs->ndpool < fs->pool_max) {
            gmtf_codec_options co = {.threads = 1, .mtf = fs->opt.mtf,
                                     .max_block = fs->bs > SNAP_CHUNK ? fs->bs : SNAP_CHUNK};
            if (gmtf_codec_create(&fs->dpool[fs->ndpool], &co) == 0)
                slot = (int)fs->ndpool++;
            else if (fs->ndpool == 0)
                break;
        }
        if (slot < 0)
            pthread_cond_wait(&fs->dpool_cond, &fs->dpool_mtx);
    }
    if (slot < 0) { /* no pool codec at all: share the big one */
        pthread_mutex_unlock(&fs->dpool_mtx);
        pthread_mutex_lock(&fs->codec_lock);
        int rc = gmtf_batch_decode(fs->codec, src, foff, n, dst, doff, status);
        pthread_mutex_unlock(&fs->codec_lock);
        return rc;
    }
    fs->dpool_busy |= 1u << slot;
    pthread_mutex_unlock(&fs->dpool_mtx);
    int rc = gmtf_batch_decode(fs->dpool[slot], src, foff, n, dst, doff, status);
    pthread_mutex_lock(&fs->dpool_mtx);
    fs->dpool_busy &= ~(1u << slot);
    pthread_cond_signal(&fs->dpool_cond);
    pthread_mutex_unlock(&fs->dpool_mtx);
    return rc;
}

/* ---- decoded-frame cache ---------------------------------------------------------- */

static size_t chash_slot(gmtf_fs *fs, uint32_t id)
{
    return (id * 2654435761u) & (fs->chash_cap - 1);
}

static struct cblock *cache_find(gmtf_fs *fs, uint32_t id)
{
    if (!fs->chash_cap)
        return NULL;
    for (struct cblock *c = fs->chash[chash_slot(fs, id)]; c; c = c->hnext)
        if (c->frame == id)
            return c;
    return NULL;
}

static void lru_unlink(gmtf_fs *fs, struct cblock *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        fs->lru_head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        fs->lru_tail = c->prev;
    c->prev = c->next = NULL;
}

static void lru_push(gmtf_fs *fs, struct cblock *c)
{
    c->prev = NULL;
    c->next = fs->lru_head;
    if (fs->lru_head)
        fs->lru_head->prev = c;
    fs->lru_head = c;
    if (!fs->lru_tail)
        fs->lru_tail = c;
}

static void cache_remove(gmtf_fs *fs, struct cblock *c)
{
    struct cblock **pp = &fs->chash[chash_slot(fs, c->frame)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    lru_unlink(fs, c);
    fs->cache_bytes -= c->len;
    free(c->buf);
    free(c);
}

void cache_drop(gmtf_fs *fs, uint32_t id)
{
    pthread_mutex_lock(&fs->cache_lock);
    struct cblock *c = cache_find(fs, id);
    if (c)
        cache_remove(fs, c);
    pthread_mutex_unlock(&fs->cache_lock);
}

void cache_free_all(gmtf_fs *fs)
{
    while (fs->lru_head)
        cache_remove(fs, fs->lru_head);
    free(fs->chash);
    fs->chash = NULL;
    fs->chash_cap = 0;
}

/* Takes ownership of buf. Caller holds cache_lock. */
static void cache_insert(gmtf_fs *fs, uint32_t id, uint8_t *buf, uint32_t len)
{
    if (!fs->chash_cap) {
        fs->chash = calloc(4096, sizeof *fs->chash);
        if (!fs->chash) {
            free(buf);
            return;
        }
        fs->chash_cap = 4096;
    }
    if (cache_find(fs, id)) { /* another reader was faster */
        free(buf);
        return;
    }
    struct cblock *c = malloc(sizeof *c);
    if (!c) {
        free(buf);
        return;
    }
    c->frame = id;
    c->len = len;
    c->buf = buf;
    size_t s = chash_slot(fs, id);
    c->hnext = fs->chash[s];
    fs->chash[s] = c;
    lru_push(fs, c);
    fs->cache_bytes += len;
    while (fs->cache_bytes > fs->cache_limit && fs->lru_tail && fs->lru_tail != c)
        cache_remove(fs, fs->lru_tail);
}

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

/* Reads and decodes frames ids[0..n) in one batch into new buffers. */
static int frames_decode(gmtf_fs *fs, const uint32_t *ids, size_t n, uint8_t **out, int *status)
{
    uint64_t *foff = malloc((n + 1) * sizeof *foff), *doff = malloc((n + 1) * sizeof *doff);
    uint8_t *src = NULL, *dst = NULL;
    int rc = 0;
    if (!foff || !doff) {
        rc = -ENOMEM;
        goto out;
    }
    foff[0] = doff[0] = 0;
    for (size_t i = 0; i < n; i++) {
        foff[i + 1] = foff[i] + fs->frames[ids[i]].clen;
        doff[i + 1] = doff[i] + fs->frames[ids[i]].dlen;
    }
    src = malloc(foff[n] ? foff[n] : 1);
    dst = malloc(doff[n] ? doff[n] : 1);
    if (!src || !dst) {
        rc = -ENOMEM;
        goto out;
    }
    memset(src, 0, foff[n]); /* every byte is then read from the image or zeroed */
    for (size_t i = 0; i < n; i++) {
        struct frame *f = &fs->frames[ids[i]];
        status[i] = img_read(fs, src + foff[i], f->clen, f->off);
        if (!status[i])
            status[i] = frame_check_header(fs, ids[i], src + foff[i]);
        if (status[i]) /* keep the batch decodable: an empty frame stands in */
            memset(src + foff[i], 0, f->clen);
    }
    int *st2 = calloc(n, sizeof *st2);
    if (!st2) {
        rc = -ENOMEM;
        goto out;
    }
    decoder_run(fs, n, src, foff, dst, doff, st2);
    __atomic_add_fetch(&fs->frames_decoded, n, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) {
        if (!status[i])
            status[i] = st2[i];
        out[i] = NULL;
        if (!status[i] && n == 1) { /* one frame: hand over the buffer, no copy */
            out[0] = dst;
            dst = NULL;
        } else if (!status[i]) {
            out[i] = malloc(fs->frames[ids[i]].dlen);
            if (out[i])
                memcpy(out[i], dst + doff[i], fs->frames[ids[i]].dlen);
            else
                status[i] = -ENOMEM;
        }
    }
    free(st2);
out:
    free(foff);
    free(doff);
    free(src);
    free(dst);
    return rc;
}

int frame_copy(gmtf_fs *fs, uint32_t id, uint64_t ino, uint32_t blk, uint32_t off, uint32_t len,
               void *dst)
{
    if (!frame_valid(fs, id) || (uint64_t)off + len > fs->frames[id].dlen)
        return -EIO;
    pthread_mutex_lock(&fs->cache_lock);
    struct cblock *c = cache_find(fs, id);
    if (c) {
        lru_unlink(fs, c);
        lru_push(fs, c);
        memcpy(dst, c->buf + off, len);
        pthread_mutex_unlock(&fs->cache_lock);
        return 0;
    }
    pthread_mutex_unlock(&fs->cache_lock);
    uint8_t *buf;
    int status;
    int rc = frames_decode(fs, &id, 1, &buf, &status);
    if (!rc)
        rc = status;
    if (rc) {
        fs_log(fs, "inode %llu block %u: frame %u at offset %llu (%u bytes) unreadable: %s",
               (unsigned long long)ino, blk, id, (unsigned long long)fs->frames[id].off,
               fs->frames[id].clen, rc < -1000 ? gmtf_strerror(rc) : strerror(-rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    memcpy(dst, buf + off, len);
    pthread_mutex_lock(&fs->cache_lock);
    cache_insert(fs, id, buf, fs->frames[id].dlen);
    pthread_mutex_unlock(&fs->cache_lock);
    return 0;
}

int frames_prefetch(gmtf_fs *fs, const uint32_t *ids, size_t n)
{
    uint32_t want[64];
    size_t k = 0;
    pthread_mutex_lock(&fs->cache_lock);
    for (size_t i = 0; i < n && k < 64; i++) {
        if (!frame_valid(fs, ids[i]) || cache_find(fs, ids[i]))
            continue;
        int dup = 0;
        for (size_t j = 0; j < k; j++)
            dup |= want[j] == ids[i];
        if (!dup)
            want[k++] = ids[i];
    }
    pthread_mutex_unlock(&fs->cache_lock);
    if (!k)
        return 0;
    uint8_t *bufs[64];
    int status[64];
    int rc = frames_decode(fs, want, k, bufs, status);
    if (rc)
        return rc;
    pthread_mutex_lock(&fs->cache_lock);
    for (size_t i = 0; i < k; i++)
        if (!status[i])
            cache_insert(fs, want[i], bufs[i], fs->frames[want[i]].dlen);
    pthread_mutex_unlock(&fs->cache_lock);
    return 0; /* errors are reported by the read that needs the frame */
}

int codec_decode_one(gmtf_fs *fs, const uint8_t *src, size_t len, uint8_t *dst, size_t dlen)
{
    uint64_t foff[2] = {0, len}, doff[2] = {0, dlen};
    int st = 0;
    int rc = decoder_run(fs, 1, src, foff, dst, doff, &st);
    return rc ? rc : st;
}

int frames_verify(gmtf_fs *fs, const uint32_t *ids, size_t n, int *status)
{
    uint8_t **bufs = calloc(n, sizeof *bufs);
    if (!bufs)
        return -ENOMEM;
    int rc = frames_decode(fs, ids, n, bufs, status);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    return rc;
}
