/* The metadata snapshot: the whole state as records (record.c), cut into
 * chunks of at most SNAP_CHUNK bytes that never split a record, each chunk
 * one codec frame, behind a checksummed header (docs/format.md). Loading
 * applies the records as the journal's are applied. */
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

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
    store_le32(rec->p + 4, (uint32_t)(rec->len - REC_HDR));
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

int snapshot_serialize(gmtf_fs *fs, const extvec *retire, wbuf *w, size_t chunk,
                       uint32_t **chunk_ends, size_t *nchunks)
{
    snapw s = {.w = w, .chunk = chunk};
    wbuf r;
    for (size_t i = 0; retire && i < retire->n; i++) {
        rec_start(&r, R_RETIRE);
        wb_u64(&r, retire->v[i].off);
        wb_u64(&r, retire->v[i].len);
        snap_add(&s, &r);
    }
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
    uint64_t ino = 0;
    for (struct inode *in; (in = inode_next(fs, &ino));) {
        if (in->nlink == 0)
            continue; /* unlinked but open: not part of the durable tree */
        rec_start(&r, R_INODE);
        rec_put_inode(&r, in);
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
    ino = 0;
    for (struct inode *in; (in = inode_next(fs, &ino));) {
        if (!S_ISDIR(in->mode) || in->nlink == 0)
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

/* The chunks as they go into frames: packed in columns (snappack.c) into
 * *packed, with their bounds in pk[0..nch]; 0 and *packed empty when a
 * chunk does not pack (the records then go as they are). */
static int snapshot_pack(const gmtf_fs *fs, const wbuf *w, const uint32_t *ends, size_t nch,
                         wbuf *packed, uint64_t *pk)
{
    pk[0] = 0;
    for (size_t i = 0; i < nch; i++) {
        uint32_t start = i ? ends[i - 1] : 0;
        int rc = snap_pack(w->p + start, ends[i] - start, fs->bs, packed);
        if (rc == -EINVAL) { /* not from snapshot_serialize: never */
            packed->len = 0;
            return 0;
        }
        if (rc)
            return rc;
        pk[i + 1] = packed->len;
    }
    return 0;
}

/* The snapshot as it goes on disk: header and chunk frames. */
static int snapshot_build(gmtf_fs *fs, uint64_t gen, const extvec *retire, uint8_t **out,
                          uint64_t *len, uint64_t *raw)
{
    wbuf w = {0}, packed = {0};
    uint32_t *ends = NULL;
    size_t nch = 0;
    int rc = snapshot_serialize(fs, retire, &w, SNAP_CHUNK, &ends, &nch);
    if (rc)
        return rc;
    uint64_t *coff = malloc((nch + 1) * sizeof *coff), *doff = malloc((nch + 1) * sizeof *doff);
    uint8_t *dst = NULL, *img = NULL;
    if (!coff || !doff) {
        rc = -ENOMEM;
        goto out;
    }
    rc = snapshot_pack(fs, &w, ends, nch, &packed, coff);
    if (rc)
        goto out;
    uint32_t enc = nch && packed.len ? SNAP_PACKED : SNAP_RECORDS;
    if (enc == SNAP_RECORDS) {
        coff[0] = 0;
        for (size_t i = 0; i < nch; i++)
            coff[i + 1] = ends[i];
    }
    if (nch) {
        rc = codec_encode(fs, enc == SNAP_PACKED ? packed.p : w.p, coff, nch, &dst, doff, NULL,
                          NULL);
        if (rc)
            goto out;
    } else {
        doff[0] = 0;
    }
    uint64_t total = SNAP_HDR_SIZE + doff[nch];
    /* Zeros up to the end of the last page: the copy covers what it takes. */
    img = calloc(1, alloc_meta_len(fs, total));
    if (!img) {
        rc = -ENOMEM;
        goto out;
    }
    store_le32(img, SNAP_MAGIC);
    store_le32(img + 4, FMT_VERSION);
    store_le64(img + 8, gen);
    store_le32(img + 16, (uint32_t)nch);
    store_le32(img + 20, enc);
    store_le64(img + 24, w.len);
    store_le64(img + 32, doff[nch]);
    store_le32(img + 40, gmtf_crc32c(0, w.p, w.len)); /* of the records */
    store_le32(img + 60, gmtf_crc32c(0, img, 60));
    if (nch)
        memcpy(img + SNAP_HDR_SIZE, dst, doff[nch]);
    *out = img;
    *len = total;
    *raw = w.len;
    img = NULL;
out:
    wb_free(&w);
    wb_free(&packed);
    free(ends);
    free(coff);
    free(doff);
    free(dst);
    free(img);
    return rc;
}

int snapshot_write(gmtf_fs *fs, uint64_t gen, const extvec *retire, sb_info *nsb)
{
    uint8_t *img = NULL;
    uint64_t total = 0, raw = 0;
    int rc = snapshot_build(fs, gen, retire, &img, &total, &raw);
    if (rc)
        return rc;
    /* Two copies, each in pages of its own. */
    uint64_t at[2] = {0, 0};
    int k = 0;
    for (; k < 2 && !rc; k++) {
        rc = alloc_meta(fs, total, &at[k]);
        if (!rc) {
            rc = img_write(fs, img, alloc_meta_len(fs, total), at[k]);
            if (rc)
                alloc_release_now(fs, at[k], alloc_meta_len(fs, total));
        }
    }
    if (rc && k == 2) /* the second copy failed: give back the first */
        alloc_release_now(fs, at[0], alloc_meta_len(fs, total));
    free(img);
    if (rc)
        return rc;
    nsb->snap_off = at[0];
    nsb->snap2_off = at[1];
    nsb->snap_len = total;
    nsb->snap_raw = raw;
    return 0;
}

/* One copy of the snapshot, read whole (NULL when unreadable: noted). */
static uint8_t *snapshot_read_copy(gmtf_fs *fs, uint64_t off, uint64_t len, uint64_t size)
{
    if (off > size || len > size - off) {
        fs_log(fs, "snapshot copy at %llu (%llu bytes) lies past the end of the image (%llu bytes)",
               (unsigned long long)off, (unsigned long long)len, (unsigned long long)size);
        return NULL;
    }
    uint8_t *img = malloc(len);
    if (!img)
        return NULL;
    int rc = img_read(fs, img, len, off);
    if (rc) {
        fs_log(fs, "snapshot copy at %llu (%llu bytes) unreadable: %s", (unsigned long long)off,
               (unsigned long long)len, strerror(-rc));
        free(img);
        return NULL;
    }
    return img;
}

static int snapshot_header_ok(const gmtf_fs *fs, const uint8_t *h)
{
    const sb_info *sb = &fs->sb;
    uint32_t nch = load_le32(h + 16);
    uint64_t raw_len = load_le64(h + 24), flen = load_le64(h + 32);
    uint32_t enc = load_le32(h + 20);
    return load_le32(h) == SNAP_MAGIC && load_le32(h + 60) == gmtf_crc32c(0, h, 60) &&
           load_le32(h + 4) == sb->version && load_le64(h + 8) == sb->gen &&
           flen == sb->snap_len - SNAP_HDR_SIZE && raw_len <= (uint64_t)nch * GMTF_BLOCK_MAX &&
           (enc == SNAP_RECORDS || (enc == SNAP_PACKED && sb->version >= FMT_VERSION));
}

/* Decodes the chunk at pos of copy c into *raw (grown as needed); its
 * frame length in *flen. 0 or a negative code. */
static int snapshot_chunk(gmtf_fs *fs, const uint8_t *c, uint64_t pos, uint8_t **raw,
                          size_t *raw_cap, gmtf_frame_info *fi)
{
    uint64_t len = fs->sb.snap_len;
    int rc = gmtf_frame_info_get(c + pos, len - pos, fi);
    if (!rc && (fi->orig_len > GMTF_FS_BLOCK_MAX || fi->frame_len > len - pos))
        rc = GMTF_E_CORRUPT;
    if (!rc && fi->orig_len > *raw_cap) {
        uint8_t *r2 = realloc(*raw, fi->orig_len);
        if (!r2)
            return -ENOMEM;
        *raw = r2;
        *raw_cap = fi->orig_len;
    }
    if (!rc)
        rc = codec_decode_one(fs, c + pos, fi->frame_len, *raw, fi->orig_len);
    return rc;
}

int snapshot_load(gmtf_fs *fs)
{
    const sb_info *sb = &fs->sb;
    uint64_t size = UINT64_MAX;
    img_size(fs, &size);
    /* Both copies are the same bytes: a damaged piece of one (header or
     * chunk) is read from the other. */
    uint64_t offs[2] = {sb->snap_off, sb->snap2_off};
    int ncopies = sb->snap2_off ? 2 : 1;
    uint8_t *copy[2] = {NULL, NULL}, *raw = NULL;
    for (int k = 0; k < ncopies; k++)
        if (!(copy[k] = snapshot_read_copy(fs, offs[k], sb->snap_len, size)))
            fs->meta_damaged++;
    int hdr = -1;
    for (int k = ncopies; k-- > 0;)
        if (copy[k] && snapshot_header_ok(fs, copy[k]))
            hdr = k;
        else if (copy[k]) {
            fs_log(fs, "snapshot copy at %llu: header damaged", (unsigned long long)offs[k]);
            fs->meta_damaged++;
        }
    if (hdr < 0) {
        fs_log(fs, "snapshot of generation %llu: no readable header", (unsigned long long)sb->gen);
        free(copy[0]);
        free(copy[1]);
        return -EUCLEAN;
    }
    const uint8_t *h = copy[hdr];
    uint32_t nch = load_le32(h + 16), want_crc = load_le32(h + 40);
    int packed = load_le32(h + 20) == SNAP_PACKED;
    wbuf recs = {0}; /* a packed chunk's records */
    uint64_t raw_len = load_le64(h + 24);
    size_t raw_cap = 0; /* grown to the largest chunk seen */
    uint64_t pos = SNAP_HDR_SIZE, got = 0;
    uint32_t crc = 0;
    int rc = 0;
    fs->loading = LOADING_SNAPSHOT;
    for (uint32_t i = 0; i < nch && !rc; i++) {
        gmtf_frame_info fi;
        int k = 0;
        rc = -EUCLEAN;
        for (; k < ncopies && rc; k++) {
            if (!copy[k])
                continue;
            rc = snapshot_chunk(fs, copy[k], pos, &raw, &raw_cap, &fi);
            if (!rc && packed) {
                recs.len = 0;
                rc = snap_unpack(raw, fi.orig_len, fs->bs, &recs);
            }
            if (rc == -ENOMEM)
                break;
            if (rc) {
                fs_log(fs, "snapshot copy at %llu: chunk %u at %llu: %s",
                       (unsigned long long)offs[k], i, (unsigned long long)(offs[k] + pos),
                       gmtf_strerror(rc));
                fs->meta_damaged++;
            }
        }
        if (rc) {
            rc = rc == -ENOMEM ? rc : -EUCLEAN;
            break;
        }
        const uint8_t *rp = packed ? recs.p : raw;
        size_t rl = packed ? recs.len : fi.orig_len;
        crc = gmtf_crc32c(crc, rp, rl);
        got += rl;
        int r = rec_apply_all(fs, rp, rl);
        if (r == -ENOMEM)
            rc = r;
        else if (r)
            fs_log(fs, "snapshot chunk %u: a record does not apply (%s)", i, strerror(-r));
        pos += fi.frame_len;
    }
    fs->loading = 0;
    fs->sb.snap_raw = got;
    if (!rc && (got != raw_len || crc != want_crc)) {
        fs_log(fs, "snapshot of generation %llu: content checksum mismatch",
               (unsigned long long)sb->gen);
        rc = -EUCLEAN;
    }
    free(raw);
    wb_free(&recs);
    free(copy[0]);
    free(copy[1]);
    return rc;
}
