/* Metadata records. Every change is one or more records: built here,
 * applied to memory by rec_apply, and appended to the journal buffer. The
 * snapshot is the same records describing the whole state, so mount,
 * replay and live changes run the same code. Records from the image are
 * untrusted: rec_apply checks every field. Also here: attribute changes
 * that wait for a record (writes touch mtime and size many times between
 * commits), and the deletion of an inode nobody uses. */
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

int rec_reserve(gmtf_fs *fs, size_t bytes)
{
    wbuf *j = &fs->jbuf;
    int rc = wb_reserve(j, (j->len ? 0 : JR_HDR_SIZE) + bytes);
    if (rc) {
        j->err = 0; /* the buffer is intact: a later record may find memory */
        fs_log(fs, "out of memory in the journal buffer");
    }
    return rc;
}

/* Applies a record and appends it to the journal buffer: both or neither
 * (the room is taken first), so memory and journal never disagree. */
static int rec_emit(gmtf_fs *fs, wbuf *w)
{
    if (w->err) {
        wb_free(w);
        return -ENOMEM;
    }
    store_le32(w->p + 4, (uint32_t)(w->len - REC_HDR));
    if (!fs->loading && rec_reserve(fs, w->len)) {
        wb_free(w);
        return -ENOMEM;
    }
    int rc = rec_apply(fs, w->p, w->len);
    if (rc == 0 && !fs->loading) {
        fs->changed = 1;
        wbuf *j = &fs->jbuf;
        if (j->len == 0)
            j->len = JR_HDR_SIZE;  /* room for the chunk header */
        wb_bytes(j, w->p, w->len); /* reserved above: cannot fail */
    }
    wb_free(w);
    return rc;
}

/* A record of fixed size built in buf (the caller's stack): no allocation. */
static void rec_start_small(wbuf *w, uint8_t *buf, uint16_t type)
{
    memset(w, 0, sizeof *w);
    w->p = buf;
    w->cap = REC_SMALL_MAX;
    w->ext = 1;
    wb_u16(w, type);
    wb_u16(w, 0);
    wb_u32(w, 0);
}

void rec_start(wbuf *w, uint16_t type)
{
    memset(w, 0, sizeof *w);
    wb_u16(w, type);
    wb_u16(w, 0);
    wb_u32(w, 0);
}

void rec_put_inode(wbuf *w, const struct inode *in)
{
    wb_u64(w, in->ino);
    wb_u64(w, in->gen);
    wb_u32(w, in->mode);
    wb_u32(w, in->uid);
    wb_u32(w, in->gid);
    wb_u32(w, in->nlink);
    wb_u64(w, in->rdev);
    wb_u64(w, (uint64_t)in->at_s);
    wb_u32(w, in->at_ns);
    wb_u64(w, (uint64_t)in->mt_s);
    wb_u32(w, in->mt_ns);
    wb_u64(w, (uint64_t)in->ct_s);
    wb_u32(w, in->ct_ns);
    wb_u64(w, in->parent);
    wb_u64(w, in->sortkey);
}

int rec_inode(gmtf_fs *fs, const struct inode *in)
{
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_INODE);
    rec_put_inode(&w, in);
    return rec_emit(fs, &w);
}

int rec_inode_new(gmtf_fs *fs, uint64_t ino, uint64_t gen, uint32_t mode, uint32_t uid,
                  uint32_t gid, uint64_t rdev, uint64_t parent, uint64_t sortkey)
{
    struct inode t = {.ino = ino,
                      .gen = gen,
                      .mode = mode,
                      .uid = uid,
                      .gid = gid,
                      .rdev = rdev,
                      .parent = parent,
                      .sortkey = sortkey};
    t.nlink = S_ISDIR(mode) ? 2 : 1;
    now_ts(&t.at_s, &t.at_ns);
    t.mt_s = t.ct_s = t.at_s;
    t.mt_ns = t.ct_ns = t.at_ns;
    return rec_inode(fs, &t);
}

/* A flush encoding on its thread (async_flush) is stored before a record
 * that could tell the difference: one that maps or unmaps a block, shortens
 * a file or deletes an inode, as it came after that flush's records. Its
 * failure is the next sync's to report; this record goes on. */
static void pend_first(gmtf_fs *fs)
{
    if (fs->pend && !fs->loading) {
        int rc = fs->pend_join(fs); /* flush_join: a hook, flush.c is floors above */
        if (rc && !fs->err)
            fs->err = rc;
    }
}

int rec_size(gmtf_fs *fs, uint64_t ino, uint64_t size)
{
    struct inode *in = fs->pend ? inode_get(fs, ino) : NULL;
    if (in && size < in->size)
        pend_first(fs);
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_SIZE);
    wb_u64(&w, ino);
    wb_u64(&w, size);
    return rec_emit(fs, &w);
}

int rec_idel(gmtf_fs *fs, uint64_t ino)
{
    pend_first(fs);
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_IDEL);
    wb_u64(&w, ino);
    return rec_emit(fs, &w);
}

int rec_dadd(gmtf_fs *fs, uint64_t parent, uint64_t ino, uint64_t cookie, const char *name,
             size_t n)
{
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_DADD);
    wb_u64(&w, parent);
    wb_u64(&w, ino);
    wb_u64(&w, cookie);
    wb_u16(&w, (uint16_t)n);
    wb_bytes(&w, name, n);
    return rec_emit(fs, &w);
}

int rec_ddel(gmtf_fs *fs, uint64_t parent, const char *name, size_t n)
{
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_DDEL);
    wb_u64(&w, parent);
    wb_u16(&w, (uint16_t)n);
    wb_bytes(&w, name, n);
    return rec_emit(fs, &w);
}

int rec_link(gmtf_fs *fs, uint64_t ino, const char *target, size_t n)
{
    wbuf w;
    rec_start(&w, R_LINK);
    wb_u64(&w, ino);
    wb_u32(&w, (uint32_t)n);
    wb_bytes(&w, target, n);
    return rec_emit(fs, &w);
}

int rec_xattr(gmtf_fs *fs, uint64_t ino, const uint8_t *blob, uint32_t len)
{
    wbuf w;
    rec_start(&w, R_XATTR);
    wb_u64(&w, ino);
    wb_u32(&w, len);
    wb_bytes(&w, blob, len);
    return rec_emit(fs, &w);
}

int rec_frame(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc)
{
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_FRAME);
    wb_u32(&w, id);
    wb_u64(&w, off);
    wb_u32(&w, clen);
    wb_u32(&w, dlen);
    wb_u32(&w, crc);
    return rec_emit(fs, &w);
}

int rec_ext(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t frame, uint32_t off, uint32_t len)
{
    pend_first(fs);
    wbuf w;
    uint8_t buf[REC_SMALL_MAX];
    rec_start_small(&w, buf, R_EXT);
    wb_u64(&w, ino);
    wb_u32(&w, blk);
    wb_u32(&w, frame);
    wb_u32(&w, off);
    wb_u32(&w, len);
    return rec_emit(fs, &w);
}

int rec_stage(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t off, const uint8_t *data,
              uint32_t len)
{
    wbuf w;
    rec_start(&w, R_STAGE);
    wb_u64(&w, ino);
    wb_u32(&w, blk);
    wb_u32(&w, off);
    wb_u32(&w, len);
    wb_bytes(&w, data, len);
    return rec_emit(fs, &w);
}

void rec_attr_dirty(gmtf_fs *fs, struct inode *in)
{
    if (in->attr_dirty || fs->loading)
        return;
    in->attr_dirty = 1;
    if (fs->nadirty == fs->adirty_cap) {
        size_t cap = fs->adirty_cap ? fs->adirty_cap * 2 : 256;
        uint64_t *v = realloc(fs->adirty, cap * sizeof *v);
        if (!v) { /* the next emit looks at every inode */
            fs->adirty_all = 1;
            return;
        }
        fs->adirty = v;
        fs->adirty_cap = cap;
    }
    fs->adirty[fs->nadirty++] = in->ino;
}

/* The INODE and SIZE records of in; on failure its attributes stay dirty. */
static int attr_emit_one(gmtf_fs *fs, struct inode *in)
{
    int rc = rec_reserve(fs, 2 * REC_SMALL_MAX);
    if (!rc)
        rc = rec_inode(fs, in);
    if (!rc && S_ISREG(in->mode))
        rc = rec_size(fs, in->ino, in->size);
    if (!rc)
        in->attr_dirty = 0;
    return rc;
}

/* Writes records for attributes changed by writes (size, mtime). An inode
 * whose records cannot be made (no memory) stays dirty: the next commit
 * tries again, so a sync that returns 0 has journaled them all. */
int rec_attr_emit(gmtf_fs *fs)
{
    int rc = 0;
    size_t keep = 0;
    for (size_t i = 0; i < fs->nadirty; i++) {
        struct inode *in = inode_get(fs, fs->adirty[i]);
        if (!in || !in->attr_dirty)
            continue;
        if (!rc && !(rc = attr_emit_one(fs, in)))
            continue;
        fs->adirty[keep++] = fs->adirty[i];
    }
    fs->nadirty = keep;
    if (!rc && fs->adirty_all) {
        uint64_t pos = 0;
        for (struct inode *in; !rc && (in = inode_scan(fs, &pos));)
            if (in->attr_dirty)
                rc = attr_emit_one(fs, in);
        fs->adirty_all = rc != 0;
    }
    return rc;
}

/* Frees an inode that has no links, opens or kernel references. */
void rec_idel_unused(gmtf_fs *fs, struct inode *in)
{
    if (in->nlink || in->nopen || in->nlookup)
        return;
    rec_idel(fs, in->ino);
}

/* Frees an inode and everything it holds (dirty blocks, block map,
 * directory entries, target, xattrs). No record: the caller's IDEL record
 * (or the load's cleanup) is why. */
void inode_drop(gmtf_fs *fs, struct inode *in)
{
    dirty_drop_inode(fs, in, 0);
    if (S_ISREG(in->mode)) {
        blockmap_free(fs, in);
    } else if (S_ISDIR(in->mode)) {
        for (uint32_t i = 0; i < in->u.dir.n; i++)
            if (in->u.dir.v[i])
                dent_remove(fs, in, in->u.dir.v[i]);
        free(in->u.dir.v);
    } else if (S_ISLNK(in->mode)) {
        free(in->u.target);
    }
    free(in->xattr);
    inode_table_remove(fs, in);
}

int xattr_blob_check(const uint8_t *b, uint32_t len)
{
    uint32_t pos = 0;
    if (len > XATTR_BLOB_MAX)
        return -EUCLEAN;
    while (pos < len) {
        if (len - pos < 5)
            return -EUCLEAN;
        uint32_t nl = b[pos], vl = load_le32(b + pos + 1);
        if (nl == 0 || vl > GMTF_FS_XATTR_SIZE_MAX || len - pos - 5 < nl + (uint64_t)vl ||
            memchr(b + pos + 5, 0, nl))
            return -EUCLEAN;
        pos += 5 + nl + vl;
    }
    return 0;
}

/* Whether [off, off+len) shares a byte with a range of e (sorted, apart). */
static int retired_overlaps(const extvec *e, uint64_t off, uint64_t len)
{
    size_t lo = 0, hi = e->n;
    while (lo < hi) { /* first range ending past off */
        size_t mid = (lo + hi) / 2;
        if (e->v[mid].off + e->v[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->n && e->v[lo].off < off + len;
}

/* Replaying STAGE records makes whole dirty blocks from a few bytes each:
 * bounded, so that memory follows what the image holds. A journal written
 * here never needs more: staged blocks are dirty blocks, which the writer
 * keeps under its dirty limit (the mount's, or STAGE_REPLAY_MIN at least). */
static int stage_replay_room(gmtf_fs *fs, struct inode *in, uint32_t blk, uint32_t need)
{
    uint64_t limit = fs->dirty_limit > STAGE_REPLAY_MIN ? fs->dirty_limit : STAGE_REPLAY_MIN;
    if (dirty_find(fs, in->ino, blk) || fs->dirty_bytes + need <= limit)
        return 0;
    if (!fs->corrupt_records)
        fs_log(fs, "journal: staged blocks past %llu MiB (the dirty cache limit): not replayed",
               (unsigned long long)(limit >> 20));
    return -EUCLEAN;
}

static int valid_type(uint32_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFIFO:
    case S_IFSOCK:
    case S_IFCHR:
    case S_IFBLK: return 1;
    }
    return 0;
}

static int apply_inode(gmtf_fs *fs, rbuf *r)
{
    struct inode t;
    t.ino = rb_u64(r);
    t.gen = rb_u64(r);
    t.mode = rb_u32(r);
    t.uid = rb_u32(r);
    t.gid = rb_u32(r);
    t.nlink = rb_u32(r);
    t.rdev = rb_u64(r);
    t.at_s = (int64_t)rb_u64(r);
    t.at_ns = rb_u32(r);
    t.mt_s = (int64_t)rb_u64(r);
    t.mt_ns = rb_u32(r);
    t.ct_s = (int64_t)rb_u64(r);
    t.ct_ns = rb_u32(r);
    t.parent = rb_u64(r);
    t.sortkey = rb_u64(r);
    if (r->err || !valid_type(t.mode) || t.at_ns >= 1000000000u || t.mt_ns >= 1000000000u ||
        t.ct_ns >= 1000000000u)
        return -EUCLEAN;
    struct inode *in = inode_get(fs, t.ino);
    if (in && (in->mode & S_IFMT) != (t.mode & S_IFMT))
        return -EUCLEAN;
    if (!in && !(in = inode_create_mem(fs, t.ino, t.mode)))
        return t.ino == 0 || t.ino > (1ull << 40) ? -EUCLEAN : -ENOMEM;
    in->gen = t.gen;
    in->mode = t.mode;
    in->uid = t.uid;
    in->gid = t.gid;
    in->nlink = t.nlink;
    in->rdev = t.rdev;
    in->at_s = t.at_s;
    in->at_ns = t.at_ns;
    in->mt_s = t.mt_s;
    in->mt_ns = t.mt_ns;
    in->ct_s = t.ct_s;
    in->ct_ns = t.ct_ns;
    in->parent = t.parent;
    in->sortkey = t.sortkey;
    if (t.gen >= fs->next_gen)
        fs->next_gen = t.gen + 1;
    return 0;
}

static int apply_size(gmtf_fs *fs, rbuf *r)
{
    uint64_t ino = rb_u64(r), size = rb_u64(r);
    struct inode *in = inode_get(fs, ino);
    if (r->err || size > (uint64_t)fs->bs * 0xffffffffull)
        return -EUCLEAN;
    if (!in && fs->loading)
        return 0;
    if (!in || !S_ISREG(in->mode))
        return -EUCLEAN;
    if (size < in->size) {
        blockmap_truncate(fs, in, size);
        dirty_truncate(fs, in, size);
    }
    in->size = size;
    return 0;
}

static int apply_dadd(gmtf_fs *fs, rbuf *r)
{
    uint64_t parent = rb_u64(r), ino = rb_u64(r), cookie = rb_u64(r);
    uint16_t n = rb_u16(r);
    const char *name = (const char *)rb_bytes(r, n);
    struct inode *dir = inode_get(fs, parent);
    if (r->err || !dir || !S_ISDIR(dir->mode) || cookie < 3 || cookie >= COOKIE_LIMIT || ino == 0)
        return -EUCLEAN;
    int rc = dent_insert(fs, dir, ino, cookie, name, n);
    return rc == -EINVAL || rc == -EEXIST ? -EUCLEAN : rc;
}

static int apply_ddel(gmtf_fs *fs, rbuf *r)
{
    uint64_t parent = rb_u64(r);
    uint16_t n = rb_u16(r);
    const char *name = (const char *)rb_bytes(r, n);
    struct inode *dir = inode_get(fs, parent);
    if (r->err || !dir || !S_ISDIR(dir->mode))
        return -EUCLEAN;
    struct dent *d = dent_find(fs, parent, name, n);
    if (!d)
        return -EUCLEAN;
    return dent_remove(fs, dir, d);
}

static int apply_link(gmtf_fs *fs, rbuf *r)
{
    uint64_t ino = rb_u64(r);
    uint32_t n = rb_u32(r);
    const uint8_t *p = rb_bytes(r, n);
    struct inode *in = inode_get(fs, ino);
    if (r->err || !in || !S_ISLNK(in->mode) || n == 0 || n > 4095 || memchr(p, 0, n))
        return -EUCLEAN;
    char *t = malloc(n + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t, p, n);
    t[n] = 0;
    free(in->u.target);
    in->u.target = t;
    return 0;
}

static int apply_xattr(gmtf_fs *fs, rbuf *r)
{
    uint64_t ino = rb_u64(r);
    uint32_t n = rb_u32(r);
    const uint8_t *p = rb_bytes(r, n);
    struct inode *in = inode_get(fs, ino);
    if (r->err || !in || xattr_blob_check(p, n))
        return -EUCLEAN;
    uint8_t *b = NULL;
    if (n && !(b = malloc(n)))
        return -ENOMEM;
    if (n)
        memcpy(b, p, n);
    free(in->xattr);
    in->xattr = b;
    in->xlen = n;
    return 0;
}

static int apply_ext(gmtf_fs *fs, rbuf *r)
{
    uint64_t ino = rb_u64(r);
    uint32_t blk = rb_u32(r), frame = rb_u32(r), off = rb_u32(r), len = rb_u32(r);
    struct inode *in = inode_get(fs, ino);
    if (r->err)
        return -EUCLEAN;
    if (!in && fs->loading)
        return 0; /* an unlinked, open file's data: gone with the crash */
    if (!in || !S_ISREG(in->mode))
        return -EUCLEAN;
    if (frame) {
        if (fs->loading && !(frame = frame_load_id(fs, frame)))
            return -EUCLEAN; /* no FRAME record named it */
        if (!frame_valid(fs, frame) || len == 0 || len > fs->bs ||
            (uint64_t)off + len > fs->frames[frame].dlen)
            return -EUCLEAN;
    } else if (off || len) {
        return -EUCLEAN;
    }
    if (fs->loading) { /* the mapping supersedes data staged for the block */
        struct dblock *d = dirty_find(fs, ino, blk);
        if (d)
            dirty_drop(fs, d);
    }
    return blockmap_set(fs, in, blk, frame, off, len);
}

int rec_apply(gmtf_fs *fs, const uint8_t *rec, size_t len)
{
    if (len < REC_HDR)
        return -EUCLEAN;
    uint16_t type = (uint16_t)(rec[0] | rec[1] << 8);
    uint32_t blen = load_le32(rec + 4);
    if (blen != len - REC_HDR)
        return -EUCLEAN;
    rbuf r = {rec + REC_HDR, blen, 0, 0};
    int rc;
    switch (type) {
    case R_INODE: rc = apply_inode(fs, &r); break;
    case R_SIZE: rc = apply_size(fs, &r); break;
    case R_IDEL: {
        struct inode *in = inode_get(fs, rb_u64(&r));
        if (r.err)
            return -EUCLEAN;
        if (in)
            inode_drop(fs, in);
        rc = 0;
        break;
    }
    case R_DADD: rc = apply_dadd(fs, &r); break;
    case R_DDEL: rc = apply_ddel(fs, &r); break;
    case R_LINK: rc = apply_link(fs, &r); break;
    case R_XATTR: rc = apply_xattr(fs, &r); break;
    case R_FRAME: {
        uint32_t id = rb_u32(&r);
        uint64_t off = rb_u64(&r);
        uint32_t clen = rb_u32(&r), dlen = rb_u32(&r), crc = rb_u32(&r);
        if (r.err)
            return -EUCLEAN;
        rc = frame_set(fs, id, off, clen, dlen, crc);
        break;
    }
    case R_EXT: rc = apply_ext(fs, &r); break;
    case R_STAGE: {
        uint64_t ino = rb_u64(&r);
        uint32_t blk = rb_u32(&r), off = rb_u32(&r), n = rb_u32(&r);
        const uint8_t *data = rb_bytes(&r, n);
        struct inode *in = inode_get(fs, ino);
        if (r.err || off > fs->bs || n > fs->bs - off)
            return -EUCLEAN;
        if (!fs->loading) /* live: the bytes are already in the dirty block */
            return 0;
        if (!in)
            return 0;
        if (!S_ISREG(in->mode))
            return -EUCLEAN;
        rc = stage_replay_room(fs, in, blk, off + n);
        if (rc)
            break;
        struct fref *e = blockmap_find(in, blk);
        if (e && e->frame) /* as stage.c marks it live: this journal reads it */
            fs->frames[e->frame].flags |= FRAME_PINNED;
        rc = dirty_stage_apply(fs, in, blk, off, data, n);
        break;
    }
    case R_RETIRE: {
        uint64_t off = rb_u64(&r), len = rb_u64(&r);
        /* Only a snapshot (being loaded) names retired space. */
        if (r.err || !fs->loading || len == 0 || off + len < off ||
            (fs->sb.capacity && off + len > fs->sb.capacity) ||
            retired_overlaps(&fs->retired_prev, off, len))
            return -EUCLEAN; /* (overlapping ranges would be freed twice) */
        rc = ev_add(&fs->retired_prev, off, len);
        break;
    }
    default: return -EUCLEAN;
    }
    if (rc == 0 && r.pos != r.len)
        rc = -EUCLEAN; /* trailing bytes: not a record we wrote */
    return rc;
}

int rec_apply_all(gmtf_fs *fs, const uint8_t *p, size_t len)
{
    size_t pos = 0;
    int first = 0;
    while (pos < len) {
        if (len - pos < REC_HDR)
            return first ? first : -EUCLEAN;
        size_t rl = REC_HDR + (size_t)load_le32(p + pos + 4);
        if (rl > len - pos)
            return first ? first : -EUCLEAN;
        int rc = rec_apply(fs, p + pos, rl);
        if (rc) {
            fs->corrupt_records++;
            if (!first)
                first = rc;
            if (rc == -ENOMEM)
                return rc;
        }
        fs->replayed++;
        pos += rl;
    }
    return first;
}
