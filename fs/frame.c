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
        off < DATA_START || off + clen < off || (fs->sb.capacity && off + clen > fs->sb.capacity))
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
    /* The encoder's scratch (7.25 blocks per codec thread) would otherwise
     * stay resident between flushes; making it again costs far less than
     * a batch's encoding. */
    gmtf_codec_trim(fs->codec);
    pthread_mutex_unlock(&fs->codec_lock);
    if (rc) {
        free(out);
        fs_log(fs, "encoding %zu blocks failed: %s", n, gmtf_strerror(rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    *dst = out;
    return 0;
}

/* A single-threaded codec of the pool that is free, or a new one; -1 when
 * the pool is full and busy. Caller holds dpool_mtx. The pool has one
 * codec less than the big one has threads: when all are busy, a single
 * frame takes the big codec if it is free, so as many frames as there are
 * threads still decode at once; each decoder keeps a few blocks of
 * workspace resident, and batches have the big codec's too. */
static int dpool_take(gmtf_fs *fs)
{
    for (unsigned i = 0; i < fs->ndpool; i++)
        if (!(fs->dpool_busy >> i & 1))
            return (int)i;
    unsigned cap = fs->pool_max > 1 ? fs->pool_max - 1 : 1;
    if (fs->ndpool < sizeof fs->dpool / sizeof *fs->dpool && fs->ndpool < cap) {
        gmtf_codec_options co = {.threads = 1,
                                 .mtf = fs->opt.mtf,
                                 .max_block = fs->bs > SNAP_CHUNK ? fs->bs : SNAP_CHUNK};
        if (gmtf_codec_create(&fs->dpool[fs->ndpool], &co) == 0)
            return (int)fs->ndpool++;
    }
    return -1;
}

static int decode_on_big(gmtf_fs *fs, size_t n, const uint8_t *src, const uint64_t *foff,
                         uint8_t *dst, const uint64_t *doff, int *status)
{
    int rc = gmtf_batch_decode(fs->codec, src, foff, n, dst, doff, status);
    pthread_mutex_unlock(&fs->codec_lock);
    return rc;
}

/* Decodes on the big codec when the batch has several frames and it is
 * free, else on a single-threaded codec of the pool. */
static int decoder_run(gmtf_fs *fs, size_t n, const uint8_t *src, const uint64_t *foff,
                       uint8_t *dst, const uint64_t *doff, int *status)
{
    if (n > 1 && pthread_mutex_trylock(&fs->codec_lock) == 0)
        return decode_on_big(fs, n, src, foff, dst, doff, status);
    pthread_mutex_lock(&fs->dpool_mtx);
    int slot;
    while ((slot = dpool_take(fs)) < 0) {
        if (pthread_mutex_trylock(&fs->codec_lock) == 0) {
            pthread_mutex_unlock(&fs->dpool_mtx);
            return decode_on_big(fs, n, src, foff, dst, doff, status);
        }
        if (fs->ndpool == 0) { /* no pool codec at all: wait for the big one */
            pthread_mutex_unlock(&fs->dpool_mtx);
            pthread_mutex_lock(&fs->codec_lock);
            return decode_on_big(fs, n, src, foff, dst, doff, status);
        }
        pthread_cond_wait(&fs->dpool_cond, &fs->dpool_mtx);
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

/* A frame being decoded sits in the hash as a pending entry (buf NULL, off
 * the LRU list): another reader of it waits instead of decoding it again
 * (the kernel sends several read-ahead requests of one file at once, each
 * on its own thread), which saves the CPU time and the buffers. Its decoder
 * holds `done` until the frame is in the cache; refs counts the decoder and
 * the waiters (under cache_lock). A pending entry dropped from the cache
 * gets frame 0, so that its bytes stay out. */
struct pending {
    struct cblock c; /* first: the hash holds &c */
    pthread_mutex_t done;
    unsigned refs;
};

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

/* Bytes the buffer of a decoded frame of len bytes takes: a frame of more
 * than half a block (nearly all) gets a whole block, so that any of them
 * can take over another's buffer (cache_recycle). The cache counts these. */
static size_t buf_cap(const gmtf_fs *fs, uint32_t len)
{
    return len > fs->bs / 2 ? fs->bs : len;
}

static void cache_unhash(gmtf_fs *fs, struct cblock *c)
{
    struct cblock **pp = &fs->chash[chash_slot(fs, c->frame)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
}

static void cache_remove(gmtf_fs *fs, struct cblock *c)
{
    cache_unhash(fs, c);
    lru_unlink(fs, c);
    fs->cache_bytes -= buf_cap(fs, c->len);
    free(c->buf);
    free(c);
}

/* Caller holds cache_lock. */
static void cache_drop_locked(gmtf_fs *fs, struct cblock *c)
{
    if (c->buf) {
        cache_remove(fs, c);
    } else { /* pending: its decoder frees it */
        cache_unhash(fs, c);
        c->frame = 0;
    }
}

void cache_drop(gmtf_fs *fs, uint32_t id)
{
    pthread_mutex_lock(&fs->cache_lock);
    struct cblock *c = cache_find(fs, id);
    if (c)
        cache_drop_locked(fs, c);
    pthread_mutex_unlock(&fs->cache_lock);
}

void cache_free_all(gmtf_fs *fs)
{
    for (size_t i = 0; i < fs->chash_cap; i++)
        for (struct cblock *c = fs->chash[i], *next; c; c = next) {
            next = c->hnext;
            if (!c->buf)
                cache_drop_locked(fs, c);
        }
    while (fs->lru_head)
        cache_remove(fs, fs->lru_head);
    free(fs->chash);
    fs->chash = NULL;
    fs->chash_cap = 0;
}

static int chash_init(gmtf_fs *fs)
{
    if (fs->chash_cap)
        return 0;
    fs->chash = calloc(4096, sizeof *fs->chash);
    if (!fs->chash)
        return -ENOMEM;
    fs->chash_cap = 4096;
    return 0;
}

/* Takes ownership of buf. Caller holds cache_lock. */
static void cache_insert(gmtf_fs *fs, uint32_t id, uint8_t *buf, uint32_t len)
{
    if (chash_init(fs)) {
        free(buf);
        return;
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
    fs->cache_bytes += buf_cap(fs, len);
    while (fs->cache_bytes > fs->cache_limit && fs->lru_tail && fs->lru_tail != c)
        cache_remove(fs, fs->lru_tail);
}

/* Marks frame id (not in the cache) as being decoded by the caller; NULL
 * when out of memory (the caller then decodes unannounced). Caller holds
 * cache_lock. */
static struct pending *pending_begin(gmtf_fs *fs, uint32_t id)
{
    struct pending *p = chash_init(fs) ? NULL : calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->done, NULL);
    pthread_mutex_lock(&p->done);
    p->refs = 1;
    p->c.frame = id;
    size_t s = chash_slot(fs, id);
    p->c.hnext = fs->chash[s];
    fs->chash[s] = &p->c;
    return p;
}

static void pending_put(struct pending *p)
{
    if (--p->refs)
        return;
    pthread_mutex_destroy(&p->done);
    free(p);
}

/* Ends the decoding of frame id: its bytes (buf, owned, NULL on failure)
 * go to the cache, and the waiters on p (may be NULL) wake up. Caller
 * holds cache_lock. */
static void pending_end(gmtf_fs *fs, struct pending *p, uint32_t id, uint8_t *buf, uint32_t len)
{
    int dropped = p && p->c.frame == 0;
    if (p && !dropped)
        cache_unhash(fs, &p->c);
    if (buf && !dropped)
        cache_insert(fs, id, buf, len);
    else
        free(buf);
    if (p) {
        pthread_mutex_unlock(&p->done);
        pending_put(p);
    }
}

/* Waits until the pending entry c is decoded. Caller holds cache_lock,
 * which is dropped meanwhile. */
static void pending_wait(gmtf_fs *fs, struct cblock *c)
{
    struct pending *p = (struct pending *)c;
    p->refs++;
    pthread_mutex_unlock(&fs->cache_lock);
    pthread_mutex_lock(&p->done);
    pthread_mutex_unlock(&p->done);
    pthread_mutex_lock(&fs->cache_lock);
    pending_put(p);
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

/* A buffer for a frame of len decoded bytes: that of the least recently
 * used frame when the cache is full and both take a whole block, else
 * NULL (the caller allocates one). Steady reading then decodes into
 * buffers it already has: the page faults of fresh ones cost a tree walk
 * 15% more CPU time here. Caller holds cache_lock. */
static uint8_t *cache_recycle(gmtf_fs *fs, uint32_t len)
{
    struct cblock *t = fs->lru_tail;
    if (!t || buf_cap(fs, len) != fs->bs || buf_cap(fs, t->len) != fs->bs ||
        fs->cache_bytes + fs->bs <= fs->cache_limit)
        return NULL;
    uint8_t *buf = t->buf;
    t->buf = NULL;
    cache_remove(fs, t);
    return buf;
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
        out[0] = malloc(buf_cap(fs, (uint32_t)doff[1]) ? buf_cap(fs, (uint32_t)doff[1]) : 1);
    dst = n == 1 ? out[0] : scratch ? scratch : (own = malloc(doff[n] ? doff[n] : 1));
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
    decoder_run(fs, n, src, foff, dst, doff, st2);
    __atomic_add_fetch(&fs->frames_decoded, n, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) {
        if (!status[i])
            status[i] = st2[i];
        if (status[i] || n == 1)
            continue;
        if (!out[i])
            out[i] = malloc(buf_cap(fs, (uint32_t)(doff[i + 1] - doff[i])));
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

int frame_copy(gmtf_fs *fs, uint32_t id, uint64_t ino, uint32_t blk, uint32_t off, uint32_t len,
               void *dst)
{
    if (!frame_valid(fs, id) || (uint64_t)off + len > fs->frames[id].dlen)
        return -EIO;
    pthread_mutex_lock(&fs->cache_lock);
    struct cblock *c;
    while ((c = cache_find(fs, id)) && !c->buf)
        pending_wait(fs, c);
    if (c) {
        lru_unlink(fs, c);
        lru_push(fs, c);
        memcpy(dst, c->buf + off, len);
        pthread_mutex_unlock(&fs->cache_lock);
        return 0;
    }
    struct pending *p = pending_begin(fs, id);
    uint8_t *buf = cache_recycle(fs, fs->frames[id].dlen);
    pthread_mutex_unlock(&fs->cache_lock);
    int status;
    int rc = frames_decode(fs, &id, 1, &buf, &status, NULL);
    if (!rc)
        rc = status;
    if (rc) {
        pthread_mutex_lock(&fs->cache_lock);
        pending_end(fs, p, id, NULL, 0);
        pthread_mutex_unlock(&fs->cache_lock);
        fs_log(fs, "inode %llu block %u: frame %u at offset %llu (%u bytes) unreadable: %s",
               (unsigned long long)ino, blk, id, (unsigned long long)fs->frames[id].off,
               fs->frames[id].clen, rc < -1000 ? gmtf_strerror(rc) : strerror(-rc));
        return rc == -ENOMEM ? rc : -EIO;
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
    int rc = frames_decode(fs, ids, n, bufs, status, NULL);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    return rc;
}
