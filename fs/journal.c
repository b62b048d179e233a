/* Metadata records. Every change is one or more records: built here,
 * applied to memory by rec_apply, and appended to the journal buffer. The
 * snapshot is the same records describing the whole state, so mount,
 * replay and live changes run the same code. Records from the image are
 * untrusted: rec_apply checks every field. */
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

#define REC_HDR 8u

static int rec_emit(gmtf_fs *fs, wbuf *w)
{
    if (w->err) {
        wb_free(w);
        return -ENOMEM;
    }
    put_le32(w->p + 4, (uint32_t)(w->len - REC_HDR));
    int rc = rec_apply(fs, w->p, w->len);
    if (rc == 0 && !fs->replaying) {
        wbuf *j = &fs->jbuf;
        if (j->len == 0 && !wb_reserve(j, JR_HDR_SIZE))
            j->len = JR_HDR_SIZE; /* room for the chunk header */
        wb_bytes(j, w->p, w->len);
        if (j->err) {
            fs_log(fs, "out of memory in the journal buffer");
            rc = -ENOMEM;
        }
    }
    wb_free(w);
    return rc;
}

static void rec_start(wbuf *w, uint16_t type)
{
    memset(w, 0, sizeof *w);
    wb_u16(w, type);
    wb_u16(w, 0);
    wb_u32(w, 0);
}

static void put_inode_body(wbuf *w, const struct inode *in)
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

int jr_inode(gmtf_fs *fs, const struct inode *in)
{
    wbuf w;
    rec_start(&w, R_INODE);
    put_inode_body(&w, in);
    return rec_emit(fs, &w);
}

int jr_inode_new(gmtf_fs *fs, uint64_t ino, uint64_t gen, uint32_t mode, uint32_t uid, uint32_t gid,
                 uint64_t rdev, uint64_t parent, uint64_t sortkey)
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
    return jr_inode(fs, &t);
}

int jr_size(gmtf_fs *fs, uint64_t ino, uint64_t size)
{
    wbuf w;
    rec_start(&w, R_SIZE);
    wb_u64(&w, ino);
    wb_u64(&w, size);
    return rec_emit(fs, &w);
}

int jr_idel(gmtf_fs *fs, uint64_t ino)
{
    wbuf w;
    rec_start(&w, R_IDEL);
    wb_u64(&w, ino);
    return rec_emit(fs, &w);
}

int jr_dadd(gmtf_fs *fs, uint64_t parent, uint64_t ino, uint64_t cookie, const char *name, size_t n)
{
    wbuf w;
    rec_start(&w, R_DADD);
    wb_u64(&w, parent);
    wb_u64(&w, ino);
    wb_u64(&w, cookie);
    wb_u16(&w, (uint16_t)n);
    wb_bytes(&w, name, n);
    return rec_emit(fs, &w);
}

int jr_ddel(gmtf_fs *fs, uint64_t parent, const char *name, size_t n)
{
    wbuf w;
    rec_start(&w, R_DDEL);
    wb_u64(&w, parent);
    wb_u16(&w, (uint16_t)n);
    wb_bytes(&w, name, n);
    return rec_emit(fs, &w);
}

int jr_link(gmtf_fs *fs, uint64_t ino, const char *target, size_t n)
{
    wbuf w;
    rec_start(&w, R_LINK);
    wb_u64(&w, ino);
    wb_u32(&w, (uint32_t)n);
    wb_bytes(&w, target, n);
    return rec_emit(fs, &w);
}

int jr_xattr(gmtf_fs *fs, uint64_t ino, const uint8_t *blob, uint32_t len)
{
    wbuf w;
    rec_start(&w, R_XATTR);
    wb_u64(&w, ino);
    wb_u32(&w, len);
    wb_bytes(&w, blob, len);
    return rec_emit(fs, &w);
}

int jr_frame(gmtf_fs *fs, uint32_t id, uint64_t off, uint32_t clen, uint32_t dlen, uint32_t crc)
{
    wbuf w;
    rec_start(&w, R_FRAME);
    wb_u32(&w, id);
    wb_u64(&w, off);
    wb_u32(&w, clen);
    wb_u32(&w, dlen);
    wb_u32(&w, crc);
    return rec_emit(fs, &w);
}

int jr_ext(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t frame, uint32_t off, uint32_t len)
{
    wbuf w;
    rec_start(&w, R_EXT);
    wb_u64(&w, ino);
    wb_u32(&w, blk);
    wb_u32(&w, frame);
    wb_u32(&w, off);
    wb_u32(&w, len);
    return rec_emit(fs, &w);
}

int jr_stage(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t off, const uint8_t *data,
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

/* ---- apply ------------------------------------------------------------------ */

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

static int apply_dadd(gmtf_fs *fs, rbuf *r)
{
    uint64_t parent = rb_u64(r), ino = rb_u64(r), cookie = rb_u64(r);
    uint16_t n = rb_u16(r);
    const char *name = (const char *)rb_bytes(r, n);
    struct inode *dir = inode_get(fs, parent);
    if (r->err || !dir || !S_ISDIR(dir->mode) || cookie < 3 || ino == 0)
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
    if (!in && fs->replaying)
        return 0; /* an unlinked, open file's data: gone with the crash */
    if (!in || !S_ISREG(in->mode))
        return -EUCLEAN;
    if (frame) {
        if (!frame_valid(fs, frame) || len == 0 || len > fs->bs ||
            (uint64_t)off + len > fs->frames[frame].dlen)
            return -EUCLEAN;
    } else if (off || len) {
        return -EUCLEAN;
    }
    if (fs->replaying) { /* the mapping supersedes data staged for the block */
        struct dblock *d = dirty_find(fs, ino, blk);
        if (d)
            dirty_drop(fs, d);
    }
    return file_set_ext(fs, in, blk, frame, off, len);
}

int rec_apply(gmtf_fs *fs, const uint8_t *rec, size_t len)
{
    if (len < REC_HDR)
        return -EUCLEAN;
    uint16_t type = (uint16_t)(rec[0] | rec[1] << 8);
    uint32_t blen = get_le32(rec + 4);
    if (blen != len - REC_HDR)
        return -EUCLEAN;
    rbuf r = {rec + REC_HDR, blen, 0, 0};
    int rc;
    switch (type) {
    case R_INODE: rc = apply_inode(fs, &r); break;
    case R_SIZE: {
        uint64_t ino = rb_u64(&r), size = rb_u64(&r);
        struct inode *in = inode_get(fs, ino);
        if (r.err || size > (uint64_t)fs->bs * 0xffffffffull)
            return -EUCLEAN;
        if (!in && fs->replaying)
            return 0;
        if (!in || !S_ISREG(in->mode))
            return -EUCLEAN;
        rc = file_set_size(fs, in, size);
        break;
    }
    case R_IDEL: {
        struct inode *in = inode_get(fs, rb_u64(&r));
        if (r.err)
            return -EUCLEAN;
        if (in)
            inode_free_mem(fs, in);
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
        if (!fs->replaying) /* live: the bytes are already in the dirty block */
            return 0;
        if (!in)
            return 0;
        if (!S_ISREG(in->mode))
            return -EUCLEAN;
        rc = dirty_stage_apply(fs, in, blk, off, data, n);
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
        size_t rl = REC_HDR + (size_t)get_le32(p + pos + 4);
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

/* ---- commit and replay ------------------------------------------------------- */

int jr_commit(gmtf_fs *fs)
{
    if (fs->ro)
        return 0;
    int rc = inode_emit_dirty(fs);
    if (rc)
        return rc;
    wbuf *j = &fs->jbuf;
    if (j->len == 0)
        return 0;
    if (fs->opt.no_flush && j->len < (64u << 20)) {
        /* mkfs: nothing needs to be durable before the end, so records wait
         * in memory for the final checkpoint (no journal region needed). */
        alloc_commit_pending(fs);
        return 0;
    }
    if (fs->jpos + j->len > fs->sb.jrnl_len) {
        /* The journal is full: a checkpoint holds everything it would. */
        uint64_t jb = fs->opt.journal_bytes;
        if (jb < j->len * 2)
            jb = j->len * 2;
        return fs_checkpoint(fs, jb);
    }
    uint8_t *h = j->p;
    put_le32(h, JR_MAGIC);
    put_le32(h + 4, (uint32_t)(j->len - JR_HDR_SIZE));
    put_le64(h + 8, fs->sb.jrnl_id);
    put_le64(h + 16, fs->jseq);
    put_le32(h + 24, gmtf_crc32c(0, j->p + JR_HDR_SIZE, j->len - JR_HDR_SIZE));
    put_le32(h + 28, gmtf_crc32c(0, h, 28));
    rc = img_write(fs, j->p, j->len, fs->sb.jrnl_off + fs->jpos);
    if (!rc)
        rc = img_flush(fs);
    if (rc) {
        fs_log(fs, "journal write at %llu failed: %s",
               (unsigned long long)(fs->sb.jrnl_off + fs->jpos), strerror(-rc));
        return rc; /* the buffer is kept and written again by the next commit */
    }
    fs->jpos += j->len;
    fs->jseq++;
    j->len = 0;
    alloc_commit_pending(fs);
    return 0;
}

int jr_replay(gmtf_fs *fs)
{
    uint64_t len = fs->sb.jrnl_len, pos = 0;
    fs->jpos = 0;
    fs->jseq = 0;
    if (len == 0)
        return 0;
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    int rc = img_read(fs, buf, len, fs->sb.jrnl_off);
    if (rc) {
        /* An image cut short inside the journal: replay what is there. */
        free(buf);
        fs_log(fs, "journal at %llu unreadable (%s): not replayed",
               (unsigned long long)fs->sb.jrnl_off, strerror(-rc));
        return 0;
    }
    fs->replaying = 1;
    int first = 0;
    while (len - pos >= JR_HDR_SIZE) {
        const uint8_t *h = buf + pos;
        uint32_t plen = get_le32(h + 4);
        if (get_le32(h) != JR_MAGIC || get_le32(h + 28) != gmtf_crc32c(0, h, 28) ||
            get_le64(h + 8) != fs->sb.jrnl_id || get_le64(h + 16) != fs->jseq ||
            plen > len - pos - JR_HDR_SIZE ||
            get_le32(h + 24) != gmtf_crc32c(0, h + JR_HDR_SIZE, plen))
            break; /* the end of the log (or a torn last chunk) */
        int r = rec_apply_all(fs, h + JR_HDR_SIZE, plen);
        if (r && !first) {
            first = r;
            fs_log(fs, "journal chunk %llu at %llu: %s", (unsigned long long)fs->jseq,
                   (unsigned long long)(fs->sb.jrnl_off + pos), strerror(-r));
        }
        pos += JR_HDR_SIZE + plen;
        fs->jseq++;
    }
    fs->replaying = 0;
    fs->jpos = pos;
    free(buf);
    return first == -ENOMEM ? first : 0;
}

/* ---- snapshot content ------------------------------------------------------------ */

typedef struct snapw {
    wbuf *w;
    size_t chunk, start;
    uint32_t *ends;
    size_t n, cap;
    int err;
} snapw;

static void snap_add(snapw *s, wbuf *rec)
{
    if (rec->err) {
        s->err = -ENOMEM;
        wb_free(rec);
        return;
    }
    put_le32(rec->p + 4, (uint32_t)(rec->len - REC_HDR));
    /* Records never straddle chunks: each chunk is decoded and applied alone. */
    if (s->w->len > s->start && s->w->len - s->start + rec->len > s->chunk) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 64;
            uint32_t *v = realloc(s->ends, cap * sizeof *v);
            if (!v) {
                s->err = -ENOMEM;
                wb_free(rec);
                return;
            }
            s->ends = v;
            s->cap = cap;
        }
        s->ends[s->n++] = (uint32_t)s->w->len;
        s->start = s->w->len;
    }
    wb_bytes(s->w, rec->p, rec->len);
    wb_free(rec);
}

int meta_serialize(gmtf_fs *fs, wbuf *w, size_t chunk, uint32_t **chunk_ends, size_t *nchunks)
{
    snapw s = {.w = w, .chunk = chunk};
    wbuf r;
    for (uint32_t id = 1; id < fs->nframes; id++) {
        struct frame *f = &fs->frames[id];
        if (!f->clen || !f->refs)
            continue;
        rec_start(&r, R_FRAME);
        wb_u32(&r, id);
        wb_u64(&r, f->off);
        wb_u32(&r, f->clen);
        wb_u32(&r, f->dlen);
        wb_u32(&r, f->crc);
        snap_add(&s, &r);
    }
    for (uint64_t ino = 1; ino < fs->itab_cap; ino++) {
        struct inode *in = fs->itab[ino];
        if (!in || in->nlink == 0)
            continue; /* unlinked but open: not part of the durable tree */
        rec_start(&r, R_INODE);
        put_inode_body(&r, in);
        snap_add(&s, &r);
        if (S_ISREG(in->mode)) {
            rec_start(&r, R_SIZE);
            wb_u64(&r, ino);
            wb_u64(&r, in->size);
            snap_add(&s, &r);
            for (uint32_t i = 0; i < in->u.ext.n; i++) {
                struct fref *e = &in->u.ext.v[i];
                rec_start(&r, R_EXT);
                wb_u64(&r, ino);
                wb_u32(&r, e->blk);
                wb_u32(&r, e->frame);
                wb_u32(&r, e->off);
                wb_u32(&r, e->len);
                snap_add(&s, &r);
            }
        } else if (S_ISLNK(in->mode) && in->u.target) {
            size_t n = strlen(in->u.target);
            rec_start(&r, R_LINK);
            wb_u64(&r, ino);
            wb_u32(&r, (uint32_t)n);
            wb_bytes(&r, in->u.target, n);
            snap_add(&s, &r);
        }
        if (in->xlen) {
            rec_start(&r, R_XATTR);
            wb_u64(&r, ino);
            wb_u32(&r, in->xlen);
            wb_bytes(&r, in->xattr, in->xlen);
            snap_add(&s, &r);
        }
    }
    for (uint64_t ino = 1; ino < fs->itab_cap; ino++) {
        struct inode *in = fs->itab[ino];
        if (!in || !S_ISDIR(in->mode) || in->nlink == 0)
            continue;
        for (uint32_t i = 0; i < in->u.dir.n; i++) {
            struct dent *d = in->u.dir.v[i];
            if (!d)
                continue;
            rec_start(&r, R_DADD);
            wb_u64(&r, ino);
            wb_u64(&r, d->ino);
            wb_u64(&r, d->cookie);
            wb_u16(&r, d->namelen);
            wb_bytes(&r, d->name, d->namelen);
            snap_add(&s, &r);
        }
    }
    if (!s.err && w->err)
        s.err = -ENOMEM;
    if (!s.err && w->len > s.start) {
        wbuf dummy = {0};
        (void)dummy;
        if (s.n == s.cap) {
            uint32_t *v = realloc(s.ends, (s.cap + 1) * sizeof *v);
            if (!v)
                s.err = -ENOMEM;
            else
                s.ends = v;
        }
        if (!s.err)
            s.ends[s.n++] = (uint32_t)w->len;
    }
    if (s.err) {
        free(s.ends);
        return s.err;
    }
    *chunk_ends = s.ends;
    *nchunks = s.n;
    return 0;
}
