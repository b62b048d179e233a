/* Taking an image apart and putting it back with fresh checksums (himg.h). */
#include "himg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the two chunk headers: the only layout written out here ------------ */

/* Snapshot header (docs/format.md, "Snapshot"). */
static void snap_header(uint8_t *h, uint64_t gen, uint32_t nch, uint32_t enc, uint64_t raw_len,
                        uint64_t flen, uint32_t raw_crc)
{
    memset(h, 0, SNAP_HDR_SIZE);
    store_le32(h, SNAP_MAGIC);
    store_le32(h + 4, FMT_VERSION);
    store_le64(h + 8, gen);
    store_le32(h + 16, nch);
    store_le32(h + 20, enc);
    store_le64(h + 24, raw_len);
    store_le64(h + 32, flen);
    store_le32(h + 40, raw_crc);
    store_le32(h + 60, gmtf_crc32c(0, h, 60));
}

static int snap_header_read(const uint8_t *h, uint64_t gen, uint32_t *nch, uint32_t *enc)
{
    if (load_le32(h) != SNAP_MAGIC || load_le32(h + 60) != gmtf_crc32c(0, h, 60) ||
        load_le64(h + 8) != gen)
        return -EUCLEAN;
    *nch = load_le32(h + 16);
    *enc = load_le32(h + 20);
    return 0;
}

/* Journal chunk header (docs/format.md, "Journal region"). */
static void jr_header(uint8_t *h, uint32_t plen, uint64_t id, uint64_t seq, const uint8_t *payload)
{
    store_le32(h, JR_MAGIC);
    store_le32(h + 4, plen);
    store_le64(h + 8, id);
    store_le64(h + 16, seq);
    store_le32(h + 24, gmtf_crc32c(0, payload, plen));
    store_le32(h + 28, gmtf_crc32c(0, h, 28));
}

static int jr_header_read(const uint8_t *h, uint64_t avail, uint64_t id, uint64_t seq,
                          uint32_t *plen)
{
    *plen = load_le32(h + 4);
    if (load_le32(h) != JR_MAGIC || load_le32(h + 28) != gmtf_crc32c(0, h, 28) ||
        load_le64(h + 8) != id || load_le64(h + 16) != seq || *plen > avail - JR_HDR_SIZE ||
        load_le32(h + 24) != gmtf_crc32c(0, h + JR_HDR_SIZE, *plen))
        return -EUCLEAN;
    return 0;
}

/* ---- records ---------------------------------------------------------------- */

static const hfield f_inode[] = {
    {"ino", 8, HF_INO},     {"gen", 8, HF_PLAIN},   {"mode", 4, HF_MODE},
    {"uid", 4, HF_PLAIN},   {"gid", 4, HF_PLAIN},   {"nlink", 4, HF_SIZE},
    {"rdev", 8, HF_PLAIN},  {"atime", 8, HF_PLAIN}, {"atime_ns", 4, HF_NS},
    {"mtime", 8, HF_PLAIN}, {"mtime_ns", 4, HF_NS}, {"ctime", 8, HF_PLAIN},
    {"ctime_ns", 4, HF_NS}, {"parent", 8, HF_INO},  {"sortkey", 8, HF_PLAIN},
};
static const hfield f_size[] = {{"ino", 8, HF_INO}, {"size", 8, HF_SIZE}};
static const hfield f_idel[] = {{"ino", 8, HF_INO}};
static const hfield f_dadd[] = {{"parent", 8, HF_INO},
                                {"ino", 8, HF_INO},
                                {"cookie", 8, HF_COOKIE},
                                {"name_len", 2, HF_LEN},
                                {"name", 0, HF_PLAIN}};
static const hfield f_ddel[] = {
    {"parent", 8, HF_INO}, {"name_len", 2, HF_LEN}, {"name", 0, HF_PLAIN}};
static const hfield f_link[] = {{"ino", 8, HF_INO}, {"len", 4, HF_LEN}, {"target", 0, HF_PLAIN}};
static const hfield f_xattr[] = {{"ino", 8, HF_INO}, {"len", 4, HF_LEN}, {"blob", 0, HF_PLAIN}};
static const hfield f_frame[] = {{"id", 4, HF_FRAME},
                                 {"off", 8, HF_OFF},
                                 {"clen", 4, HF_LEN},
                                 {"dlen", 4, HF_LEN},
                                 {"crc", 4, HF_PLAIN}};
static const hfield f_ext[] = {{"ino", 8, HF_INO},
                               {"block", 4, HF_BLOCK},
                               {"frame", 4, HF_FRAME},
                               {"off", 4, HF_OFF},
                               {"len", 4, HF_LEN}};
static const hfield f_stage[] = {{"ino", 8, HF_INO},
                                 {"block", 4, HF_BLOCK},
                                 {"off", 4, HF_OFF},
                                 {"len", 4, HF_LEN},
                                 {"data", 0, HF_PLAIN}};

static const hfield f_retire[] = {{"off", 8, HF_OFF}, {"len", 8, HF_SIZE}};

#define FIELDS(a) (*n = sizeof a / sizeof a[0], a)

const hfield *hrec_fields(uint16_t type, size_t *n)
{
    switch (type) {
    case R_INODE: return FIELDS(f_inode);
    case R_SIZE: return FIELDS(f_size);
    case R_IDEL: return FIELDS(f_idel);
    case R_DADD: return FIELDS(f_dadd);
    case R_DDEL: return FIELDS(f_ddel);
    case R_LINK: return FIELDS(f_link);
    case R_XATTR: return FIELDS(f_xattr);
    case R_FRAME: return FIELDS(f_frame);
    case R_EXT: return FIELDS(f_ext);
    case R_STAGE: return FIELDS(f_stage);
    case R_RETIRE: return FIELDS(f_retire);
    }
    *n = 0;
    return NULL;
}

long hrec_field_off(const hrec *r, size_t i)
{
    size_t n;
    const hfield *f = hrec_fields(hrec_type(r), &n);
    if (!f || i >= n)
        return -1;
    long off = 0;
    for (size_t k = 0; k < i; k++)
        off += f[k].width;
    if (REC_HDR + (size_t)off + f[i].width > r->len)
        return -1;
    return off;
}

uint16_t hrec_type(const hrec *r)
{
    return r->len >= 2 ? (uint16_t)(r->p[0] | r->p[1] << 8) : 0;
}

int hrec_make(hrec *r, uint16_t type, const uint8_t *body, uint32_t blen)
{
    /* The fs's record header: rec_start, then the body length. */
    wbuf w;
    rec_start(&w, type);
    wb_bytes(&w, body, blen);
    if (w.err) {
        wb_free(&w);
        return -ENOMEM;
    }
    store_le32(w.p + 4, blen);
    r->p = w.p;
    r->len = (uint32_t)w.len;
    return 0;
}

int hchunk_insert(hchunk *c, size_t at, const uint8_t *rec, uint32_t len)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        hrec *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        c->v = v;
        c->cap = cap;
    }
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return -ENOMEM;
    memcpy(p, rec, len);
    if (at > c->n)
        at = c->n;
    memmove(c->v + at + 1, c->v + at, (c->n - at) * sizeof *c->v);
    c->v[at] = (hrec){p, len};
    c->n++;
    return 0;
}

void hchunk_remove(hchunk *c, size_t at)
{
    if (at >= c->n)
        return;
    free(c->v[at].p);
    memmove(c->v + at, c->v + at + 1, (c->n - at - 1) * sizeof *c->v);
    c->n--;
}

static void hchunk_free(hchunk *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].p);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* Splits raw chunk bytes into records (a torn tail is kept as one record). */
static int split_records(hchunk *c, const uint8_t *p, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        size_t rl = len - pos;
        if (rl >= REC_HDR && REC_HDR + (size_t)load_le32(p + pos + 4) <= rl)
            rl = REC_HDR + load_le32(p + pos + 4);
        if (hchunk_insert(c, c->n, p + pos, (uint32_t)rl))
            return -ENOMEM;
        pos += rl;
    }
    return 0;
}

static int add_chunk(hchunk **v, size_t *n)
{
    hchunk *t = realloc(*v, (*n + 1) * sizeof *t);
    if (!t)
        return -ENOMEM;
    memset(t + *n, 0, sizeof *t);
    *v = t;
    (*n)++;
    return 0;
}

/* One codec for the process (tests run one case at a time): chunks up to
 * HIMG_CHUNK_MAX bytes, twice what the fs writes. */
#define HIMG_CHUNK_MAX (2u * SNAP_CHUNK)

gmtf_codec *himg_codec(void)
{
    static gmtf_codec *codec;
    gmtf_codec_options co = {.threads = 1, .max_block = HIMG_CHUNK_MAX};
    if (!codec && gmtf_codec_create(&codec, &co))
        codec = NULL;
    return codec;
}

/* ---- parse ------------------------------------------------------------------ */

static int parse_snapshot(himg *h, gmtf_codec *codec)
{
    const sb_info *sb = &h->sb[h->cur];
    const uint8_t *s = NULL;
    uint32_t nch = 0;
    uint64_t offs[2] = {sb->snap_off, sb->snap2_off};
    for (int k = 0; k < 2 && !s; k++)
        if (offs[k] && offs[k] <= h->len && sb->snap_len <= h->len - offs[k] &&
            sb->snap_len >= SNAP_HDR_SIZE &&
            !snap_header_read(h->p + offs[k], sb->gen, &nch, &h->snap_enc))
            s = h->p + offs[k];
    if (!s || (h->snap_enc != SNAP_RECORDS && h->snap_enc != SNAP_PACKED))
        return -EUCLEAN;
    uint64_t pos = SNAP_HDR_SIZE;
    uint8_t *raw = NULL;
    wbuf recs = {0};
    int rc = 0;
    for (uint32_t i = 0; i < nch && !rc; i++) {
        gmtf_frame_info fi;
        rc = gmtf_frame_info_get(s + pos, sb->snap_len - pos, &fi);
        if (rc || fi.orig_len > HIMG_CHUNK_MAX) {
            rc = -EUCLEAN;
            break;
        }
        uint8_t *r2 = realloc(raw, fi.orig_len ? fi.orig_len : 1);
        if (!r2) {
            rc = -ENOMEM;
            break;
        }
        raw = r2;
        long got = gmtf_frame_decode(codec, s + pos, fi.frame_len, raw, fi.orig_len);
        if (got != (long)fi.orig_len)
            rc = -EUCLEAN;
        recs.len = 0;
        if (!rc && h->snap_enc == SNAP_PACKED)
            rc = snap_unpack(raw, fi.orig_len, sb->block_size, &recs);
        if (!rc)
            rc = add_chunk(&h->snap, &h->nsnap);
        if (!rc && h->snap_enc == SNAP_PACKED)
            rc = split_records(&h->snap[h->nsnap - 1], recs.p, recs.len);
        else if (!rc)
            rc = split_records(&h->snap[h->nsnap - 1], raw, fi.orig_len);
        pos += fi.frame_len;
    }
    free(raw);
    wb_free(&recs);
    return rc;
}

static int parse_journal(himg *h)
{
    const sb_info *sb = &h->sb[h->cur];
    h->jr_used = 0;
    if (!sb->jrnl_len || sb->jrnl_off > h->len || sb->jrnl_len > h->len - sb->jrnl_off)
        return 0;
    const uint8_t *j = h->p + sb->jrnl_off;
    uint64_t pos = 0, seq = 0;
    uint32_t plen;
    while (sb->jrnl_len - pos >= JR_HDR_SIZE &&
           !jr_header_read(j + pos, sb->jrnl_len - pos, sb->jrnl_id, seq, &plen)) {
        int rc = add_chunk(&h->jr, &h->njr);
        if (!rc)
            rc = split_records(&h->jr[h->njr - 1], j + pos + JR_HDR_SIZE, plen);
        if (rc)
            return rc;
        pos += JR_HDR_SIZE + plen;
        seq++;
    }
    h->jr_used = pos;
    return 0;
}

int himg_parse(himg *h, const uint8_t *img, size_t len)
{
    memset(h, 0, sizeof *h);
    h->cur = -1;
    h->snap_nch = h->snap_raw_len = h->snap_gen = h->snap_enc_say = h->jr_seq_skip = -1;
    h->p = malloc(len ? len : 1);
    if (!h->p)
        return -ENOMEM;
    memcpy(h->p, img, len);
    h->len = len;
    for (int i = 0; i < (int)SB_SLOTS; i++) {
        h->res[i] = len >= (size_t)(i + 1) * SB_SLOT_SIZE
                        ? sb_decode(h->p + (size_t)i * SB_SLOT_SIZE, &h->sb[i])
                        : -EINVAL;
        if (!h->res[i] && (h->cur < 0 || h->sb[i].gen > h->sb[h->cur].gen))
            h->cur = i;
    }
    if (h->cur < 0)
        return -EUCLEAN;
    gmtf_codec *codec = himg_codec();
    if (!codec)
        return -ENOMEM;
    int rc = parse_snapshot(h, codec);
    if (!rc)
        rc = parse_journal(h);
    return rc;
}

void himg_free(himg *h)
{
    for (size_t i = 0; i < h->nsnap; i++)
        hchunk_free(&h->snap[i]);
    for (size_t i = 0; i < h->njr; i++)
        hchunk_free(&h->jr[i]);
    free(h->snap);
    free(h->jr);
    free(h->p);
    memset(h, 0, sizeof *h);
}

/* ---- build ------------------------------------------------------------------ */

/* Metadata copies take whole pages in version 2 (alloc_meta_len). */
static uint64_t meta_len(const sb_info *sb, uint64_t len)
{
    return sb->version >= FMT_VERSION ? (len + META_ALIGN - 1) / META_ALIGN * META_ALIGN : len;
}

/* Writes n bytes at off, growing the image as needed. */
static int put_bytes(himg *h, uint64_t off, const void *src, size_t n)
{
    if (off + n > h->len) {
        uint8_t *p = realloc(h->p, off + n);
        if (!p)
            return -ENOMEM;
        memset(p + h->len, 0, off + n - h->len);
        h->p = p;
        h->len = off + n;
    }
    memcpy(h->p + off, src, n);
    return 0;
}

static int chunk_bytes(const hchunk *c, wbuf *w)
{
    w->len = 0;
    for (size_t i = 0; i < c->n; i++)
        wb_bytes(w, c->v[i].p, c->v[i].len);
    return w->err ? -ENOMEM : 0;
}

static int build_snapshot(himg *h, gmtf_codec *codec)
{
    sb_info *sb = &h->sb[h->cur];
    wbuf frames = {0}, raw = {0}, packed = {0};
    uint64_t raw_len = 0;
    uint32_t crc = 0, enc = h->snap_enc;
    uint8_t *dst = NULL;
    int rc = wb_reserve(&frames, SNAP_HDR_SIZE);
    if (rc)
        return rc;
    frames.len = SNAP_HDR_SIZE;
    /* Packed as the fs packs, when every chunk's records still pack. */
    for (size_t i = 0; i < h->nsnap && !rc && enc == SNAP_PACKED; i++) {
        rc = chunk_bytes(&h->snap[i], &raw);
        packed.len = 0;
        if (!rc && snap_pack(raw.p, raw.len, sb->block_size, &packed))
            enc = SNAP_RECORDS;
    }
    for (size_t i = 0; i < h->nsnap && !rc; i++) {
        rc = chunk_bytes(&h->snap[i], &raw);
        packed.len = 0;
        if (!rc && enc == SNAP_PACKED)
            rc = snap_pack(raw.p, raw.len, sb->block_size, &packed);
        if (rc)
            break;
        const wbuf *in = enc == SNAP_PACKED ? &packed : &raw;
        size_t cap = gmtf_frame_bound(in->len);
        uint8_t *d2 = realloc(dst, cap);
        if (!d2) {
            rc = -ENOMEM;
            break;
        }
        dst = d2;
        long fl = gmtf_frame_encode(codec, in->p, in->len, dst, cap);
        if (fl < 0) {
            rc = (int)fl;
            break;
        }
        wb_bytes(&frames, dst, (size_t)fl);
        crc = gmtf_crc32c(crc, raw.p, raw.len);
        raw_len += raw.len;
    }
    if (!rc && frames.err)
        rc = -ENOMEM;
    if (!rc) {
        uint64_t gen = h->snap_gen >= 0 ? (uint64_t)h->snap_gen : sb->gen;
        uint32_t nch = h->snap_nch >= 0 ? (uint32_t)h->snap_nch : (uint32_t)h->nsnap;
        uint64_t rl = h->snap_raw_len >= 0 ? (uint64_t)h->snap_raw_len : raw_len;
        uint32_t say = h->snap_enc_say >= 0 ? (uint32_t)h->snap_enc_say : enc;
        snap_header(frames.p, gen, nch, say, rl, frames.len - SNAP_HDR_SIZE, crc);
        uint64_t *offs[2] = {&sb->snap_off, &sb->snap2_off};
        uint64_t room = meta_len(sb, sb->snap_len);
        for (int k = 0; k < 2 && !rc; k++) {
            if (!*offs[k] || (h->copies && h->copies != k + 1))
                continue; /* version 1: one copy; or the other copy left as it was */
            uint64_t off = *offs[k];
            if (frames.len > room || off + frames.len > h->len)
                off = meta_len(sb, h->len); /* does not fit where it was: at the end */
            rc = put_bytes(h, off, frames.p, frames.len);
            *offs[k] = off;
        }
        sb->snap_len = frames.len;
    }
    free(dst);
    wb_free(&raw);
    wb_free(&packed);
    wb_free(&frames);
    return rc;
}

static int build_journal(himg *h)
{
    sb_info *sb = &h->sb[h->cur];
    wbuf j = {0}, pay = {0};
    int rc = 0;
    for (size_t i = 0; i < h->njr && !rc; i++) {
        rc = chunk_bytes(&h->jr[i], &pay);
        if (rc)
            break;
        uint8_t hdr[JR_HDR_SIZE];
        uint64_t seq = i + ((int64_t)i == h->jr_seq_skip);
        jr_header(hdr, (uint32_t)pay.len, sb->jrnl_id, seq, pay.p);
        wb_bytes(&j, hdr, sizeof hdr);
        wb_bytes(&j, pay.p, pay.len);
    }
    if (!rc && j.err)
        rc = -ENOMEM;
    if (!rc && (j.len || h->jr_used)) {
        uint64_t old = h->jr_used;
        if (j.len > sb->jrnl_len || sb->jrnl_off + sb->jrnl_len > h->len ||
            (sb->jrnl2_off && sb->jrnl2_off + sb->jrnl_len > h->len)) {
            /* larger regions at the end, page-aligned in version 2 */
            uint64_t len = meta_len(sb, j.len + JOURNAL_FLOOR);
            sb->jrnl_off = meta_len(sb, h->len);
            if (sb->jrnl2_off)
                sb->jrnl2_off = sb->jrnl_off + len;
            sb->jrnl_len = len;
            old = 0;
            rc = put_bytes(h, (sb->jrnl2_off ? sb->jrnl2_off : sb->jrnl_off) + len - 1, "", 1);
        }
        uint64_t offs[2] = {sb->jrnl_off, sb->jrnl2_off};
        for (int k = 0; k < 2 && !rc; k++) {
            if (!offs[k] || (h->copies && h->copies != k + 1))
                continue;
            if (j.len)
                rc = put_bytes(h, offs[k], j.p, j.len);
            if (!rc && old > j.len) /* the old chunks' tail would not read as a chunk */
                memset(h->p + offs[k] + j.len, 0, old - j.len);
        }
        h->jr_used = j.len;
    }
    wb_free(&j);
    wb_free(&pay);
    return rc;
}

int himg_build(himg *h)
{
    if (h->cur < 0)
        return -EINVAL;
    gmtf_codec *codec = himg_codec();
    if (!codec)
        return -ENOMEM;
    int rc = build_snapshot(h, codec);
    if (!rc)
        rc = build_journal(h);
    if (!rc)
        himg_put_sb(h, h->cur, 1);
    return rc;
}

void himg_put_sb(himg *h, int slot, int twin)
{
    uint8_t b[SB_SLOT_SIZE];
    sb_info *sb = &h->sb[slot];
    sb_encode(sb, b);
    if ((uint64_t)(slot + 1) * SB_SLOT_SIZE <= h->len)
        memcpy(h->p + (size_t)slot * SB_SLOT_SIZE, b, sizeof b);
    int other = slot ^ 2; /* the generation's other slot (version 2) */
    if (twin && sb->version >= FMT_VERSION && (uint64_t)(other + 1) * SB_SLOT_SIZE <= h->len) {
        memcpy(h->p + (size_t)other * SB_SLOT_SIZE, b, sizeof b);
        h->sb[other] = *sb;
        h->res[other] = 0;
    }
}
