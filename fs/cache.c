/* The cache of decoded frames: a hash by frame id and an LRU list, bounded
 * by cache_limit bytes (buffers counted by what they take: a frame of more
 * than half a block takes a whole block, so buffers can be recycled). */

#include "fs_internal.h"

/* A frame being decoded sits in the hash as a pending entry (buf NULL, off
 * the LRU list): another reader of it waits instead of decoding it again
 * (the kernel sends several read-ahead requests of one file at once, each
 * on its own thread), which saves the CPU time and the buffers. Its decoder
 * sets `finished` once the frame is in the cache; refs counts the decoder and
 * the waiters (under cache_lock). A pending entry dropped from the cache
 * gets frame 0, so that its bytes stay out. (A condition variable, not a
 * lock held across the decode: a lock used as an event is what
 * ThreadSanitizer reports as lock-order inversions.) */
struct pending {
    struct cblock c; /* first: the hash holds &c */
    int finished;    /* under cache_lock; waiters sleep on fs->cache_cond */
    unsigned refs;
};

static size_t cache_slot(gmtf_fs *fs, uint32_t id)
{
    return (id * 2654435761u) & (fs->cache_cap - 1);
}

struct cblock *cache_find(gmtf_fs *fs, uint32_t id)
{
    if (!fs->cache_cap)
        return NULL;
    for (struct cblock *c = fs->cache_tab[cache_slot(fs, id)]; c; c = c->hnext)
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
 * than half a block gets a whole block, one of more than half a pack and
 * at most a pack (with a pack size below the block size: nearly all
 * packs) a whole pack, so that any of them can take over another's buffer
 * of the same size (cache_recycle). The cache counts these. */
size_t cache_buf_cap(const gmtf_fs *fs, uint32_t len)
{
    if (len > fs->bs / 2)
        return fs->bs;
    return len > fs->ps / 2 && len <= fs->ps ? fs->ps : len;
}

static void cache_unhash(gmtf_fs *fs, struct cblock *c)
{
    struct cblock **pp = &fs->cache_tab[cache_slot(fs, c->frame)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
}

static void cache_remove(gmtf_fs *fs, struct cblock *c)
{
    cache_unhash(fs, c);
    lru_unlink(fs, c);
    fs->cache_bytes -= cache_buf_cap(fs, c->len);
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
    for (size_t i = 0; i < fs->cache_cap; i++)
        for (struct cblock *c = fs->cache_tab[i], *next; c; c = next) {
            next = c->hnext;
            if (!c->buf)
                cache_drop_locked(fs, c);
        }
    while (fs->lru_head)
        cache_remove(fs, fs->lru_head);
    free(fs->cache_tab);
    fs->cache_tab = NULL;
    fs->cache_cap = 0;
}

static int cache_tab_init(gmtf_fs *fs)
{
    if (fs->cache_cap)
        return 0;
    fs->cache_tab = calloc(4096, sizeof *fs->cache_tab);
    if (!fs->cache_tab)
        return -ENOMEM;
    fs->cache_cap = 4096;
    return 0;
}

/* Takes ownership of buf. Caller holds cache_lock. */
static void cache_insert(gmtf_fs *fs, uint32_t id, uint8_t *buf, uint32_t len)
{
    if (cache_tab_init(fs)) {
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
    size_t s = cache_slot(fs, id);
    c->hnext = fs->cache_tab[s];
    fs->cache_tab[s] = c;
    lru_push(fs, c);
    fs->cache_bytes += cache_buf_cap(fs, len);
    while (fs->cache_bytes > fs->cache_limit && fs->lru_tail && fs->lru_tail != c)
        cache_remove(fs, fs->lru_tail);
}

void cache_put(gmtf_fs *fs, uint32_t id, const uint8_t *data, uint32_t len)
{
    if (!len || cache_buf_cap(fs, len) > fs->cache_limit)
        return;
    uint8_t *buf = malloc(cache_buf_cap(fs, len));
    if (!buf)
        return; /* only a cache: the frame decodes when read */
    memcpy(buf, data, len);
    pthread_mutex_lock(&fs->cache_lock);
    cache_insert(fs, id, buf, len);
    pthread_mutex_unlock(&fs->cache_lock);
}

void cache_put_own(gmtf_fs *fs, uint32_t id, uint8_t **buf, size_t cap, uint32_t len)
{
    size_t want = cache_buf_cap(fs, len);
    if (!len || want > fs->cache_limit || !*buf)
        return;
    uint8_t *b = *buf;
    if (cap < want && !(b = realloc(b, want)))
        return; /* *buf still the caller's */
    *buf = NULL;
    pthread_mutex_lock(&fs->cache_lock);
    cache_insert(fs, id, b, len);
    pthread_mutex_unlock(&fs->cache_lock);
}

/* Marks frame id (not in the cache) as being decoded by the caller; NULL
 * when out of memory (the caller then decodes unannounced). Caller holds
 * cache_lock. */
struct pending *pending_begin(gmtf_fs *fs, uint32_t id)
{
    struct pending *p = cache_tab_init(fs) ? NULL : calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->refs = 1;
    p->c.frame = id;
    size_t s = cache_slot(fs, id);
    p->c.hnext = fs->cache_tab[s];
    fs->cache_tab[s] = &p->c;
    return p;
}

static void pending_put(struct pending *p)
{
    if (--p->refs)
        return;
    free(p);
}

/* Ends the decoding of frame id: its bytes (buf, owned, NULL on failure)
 * go to the cache, and the waiters on p (may be NULL) wake up. Caller
 * holds cache_lock. */
void pending_end(gmtf_fs *fs, struct pending *p, uint32_t id, uint8_t *buf, uint32_t len)
{
    int dropped = p && p->c.frame == 0;
    if (p && !dropped)
        cache_unhash(fs, &p->c);
    if (buf && !dropped)
        cache_insert(fs, id, buf, len);
    else
        free(buf);
    if (p) {
        p->finished = 1;
        pthread_cond_broadcast(&fs->cache_cond);
        pending_put(p);
    }
}

/* Waits until the pending entry c is decoded. Caller holds cache_lock,
 * which is dropped meanwhile. */
static void pending_wait(gmtf_fs *fs, struct cblock *c)
{
    struct pending *p = (struct pending *)c;
    p->refs++;
    while (!p->finished)
        pthread_cond_wait(&fs->cache_cond, &fs->cache_lock);
    pending_put(p);
}

const uint8_t *cache_get(gmtf_fs *fs, uint32_t id)
{
    struct cblock *c;
    while ((c = cache_find(fs, id)) && !c->buf)
        pending_wait(fs, c);
    if (!c)
        return NULL;
    lru_unlink(fs, c);
    lru_push(fs, c);
    return c->buf;
}

/* A buffer for a frame of len decoded bytes: that of the least recently
 * used frame when the cache is full and both take a whole block, or both a
 * whole pack, else NULL (the caller allocates one). Steady reading then decodes into
 * buffers it already has: the page faults of fresh ones cost a tree walk
 * 15% more CPU time here. Caller holds cache_lock. */
uint8_t *cache_recycle(gmtf_fs *fs, uint32_t len)
{
    struct cblock *t = fs->lru_tail;
    size_t cap = cache_buf_cap(fs, len);
    if (!t || (cap != fs->bs && cap != fs->ps) || cache_buf_cap(fs, t->len) != cap ||
        fs->cache_bytes + cap <= fs->cache_limit)
        return NULL;
    uint8_t *buf = t->buf;
    t->buf = NULL;
    cache_remove(fs, t);
    return buf;
}
