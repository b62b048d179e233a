/* The frame table: frames by id (0 = a hole, never a frame). A frame is
 * one codec frame in the image holding up to one block of decoded bytes:
 * one file block, or several small files packed together. Block maps hold
 * references; the last one gone frees the frame's space (after the next
 * commit) and its id.
 *
 * The table is dense. Ids in the image may not be (an image claims any id
 * up to 2^32 - 1), so while loading, the image's ids are mapped to table
 * ids handed out in order of first appearance: the table grows with the
 * frames the image holds, never with the numbers it names. A frame that
 * lies past the end of the image or its capacity is kept (its blocks read
 * as errors, not as holes) but marked outside: its space is never free
 * space, so nothing is ever written there because an image said so. */
#include <stdio.h>

#include "fs_internal.h"

struct frame_idmap { /* while loading: image id -> table id (open addressing) */
    uint32_t *key, *val;
    size_t cap, n;
    uint32_t next;  /* the next table id to try for an id past ident */
    uint32_t ident; /* ids up to this keep their number */
    uint64_t limit; /* frames must end at or below: image size, capacity */
};
#define IDMAP_IDENT_MIN 65536u

static size_t idmap_slot(uint32_t key, size_t cap)
{
    return (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static uint32_t *idmap_find(struct frame_idmap *m, uint32_t key)
{
    if (!m || !m->cap)
        return NULL;
    for (size_t i = idmap_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->key[i] == key)
            return &m->val[i];
        if (!m->key[i])
            return NULL;
    }
}

static int idmap_add(struct frame_idmap *m, uint32_t key, uint32_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        uint32_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t s = idmap_slot(m->key[i], cap);
                while (k[s])
                    s = (s + 1) & (cap - 1);
                k[s] = m->key[i];
                v[s] = m->val[i];
            }
        free(m->key);
        free(m->val);
        m->key = k;
        m->val = v;
        m->cap = cap;
    }
    size_t s = idmap_slot(key, m->cap);
    while (m->key[s])
        s = (s + 1) & (m->cap - 1);
    m->key[s] = key;
    m->val[s] = val;
    m->n++;
    return 0;
}

static struct frame_idmap *idmap_get(gmtf_fs *fs)
{
    if (fs->idmap)
        return fs->idmap;
    struct frame_idmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    uint64_t size;
    m->limit = img_size(fs, &size) ? UINT64_MAX : size;
    if (fs->sb.capacity && fs->sb.capacity < m->limit)
        m->limit = fs->sb.capacity;
    /* Ids kept as they are: a frame id is handed out only past the highest
     * in use, so a sound image's ids stay near its frame count; one frame
     * per KiB of image (at least 65,536) bounds the table to 4% of the
     * image's size whatever ids it claims. */
    uint64_t ident = (m->limit == UINT64_MAX ? 0 : m->limit) / 1024;
    m->ident = (uint32_t)(ident < IDMAP_IDENT_MIN ? IDMAP_IDENT_MIN
                          : ident > (1u << 30)    ? (1u << 30)
                                                  : ident);
    m->next = m->ident + 1;
    fs->idmap = m;
    return m;
}

uint32_t frame_load_id(gmtf_fs *fs, uint32_t image_id)
{
    uint32_t *v = image_id ? idmap_find(fs->idmap, image_id) : NULL;
    return v ? *v : 0;
}

void frame_load_end(gmtf_fs *fs)
{
    struct frame_idmap *m = fs->idmap;
    if (!m)
        return;
    free(m->key);
    free(m->val);
    free(m);
    fs->idmap = NULL;
}

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

void frame_table_free(gmtf_fs *fs)
{
    free(fs->frames);
    fs->frames = NULL;
    fs->nframes = 0;
    free(fs->frame_free);
    fs->frame_free = NULL;
    fs->nframe_free = fs->frame_free_cap = 0;
    fs->live_frames = fs->stored_bytes = 0;
    frame_load_end(fs);
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

/* Loading: the table id for the image's id (a new one the first time).
 * Ids up to m->ident keep their number, so the ids of records written after
 * this load (table ids) mean what the image's records mean when both meet
 * in one journal: a remount without a checkpoint must not renumber. Only an
 * id past that bound (which a sound image does not reach: see idmap_get)
 * gets a table id above it, and fs->frames_renumbered then tells a
 * read-write mount to checkpoint before it writes a record. */
static int frame_load_set_id(gmtf_fs *fs, uint32_t *id, int *outside, uint64_t end)
{
    struct frame_idmap *m = idmap_get(fs);
    if (!m)
        return -ENOMEM;
    *outside = end > m->limit;
    uint32_t *v = idmap_find(m, *id);
    if (v) {
        *id = *v;
        return 0;
    }
    uint32_t t = *id;
    if (t > m->ident) {
        t = m->next > m->ident ? m->next : m->ident + 1;
        while (t < fs->nframes && fs->frames[t].clen)
            t++;
        m->next = t + 1;
        fs->frames_renumbered = 1;
    }
    int rc = frame_table_grow(fs, t);
    if (!rc)
        rc = idmap_add(m, *id, t);
    if (rc)
        return rc;
    *id = t;
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
        off < fs->data_start || off + clen < off)
        return -EUCLEAN;
    int outside = 0, rc;
    if (fs->loading)
        rc = frame_load_set_id(fs, &id, &outside, off + clen);
    else if (fs->sb.capacity && off + clen > fs->sb.capacity)
        rc = -EUCLEAN;
    else
        rc = frame_table_grow(fs, id);
    if (rc)
        return rc;
    /* A journal's FRAME record names an id the live filesystem had free, so
     * a frame that holds it unreferenced while the journal replays is one
     * whose last reference the loaded state never had: the snapshot keeps
     * every frame, but not the inodes unlinked while open that used them;
     * their release freed the id live, and a later FRAME took it (seed 4 of
     * test_fs_crash_states, posix: the record refused, a file's extent then
     * named the old frame: another file's bytes). It goes, as live. */
    if (fs->loading == LOADING_JOURNAL && fs->frames[id].clen && !fs->frames[id].refs)
        frame_unref(fs, id);
    if (fs->frames[id].clen)
        return -EUCLEAN;
    /* From the snapshot: made before the generation began. */
    uint32_t flags = fs->loading == LOADING_SNAPSHOT ? 0 : FRAME_FRESH;
    if (outside)
        flags |= FRAME_OUTSIDE;
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
     * is free once the record freeing it is committed. A frame outside the
     * image frees nothing. */
    if (f->flags & FRAME_OUTSIDE)
        ;
    else if (!(f->flags & FRAME_FRESH) || (f->flags & FRAME_PINNED))
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
