/* The snapshot's chunks packed in columns (docs/format.md, "Packed
 * chunks"): the same records, rearranged so that the codec finds what
 * repeats. Each field of each record type becomes a column of fixed-width
 * little-endian values, most of them stored as the difference from what
 * the record before predicts (inode numbers that count up, a pack's pieces
 * that follow each other, a file's last block as long as its size says);
 * directory entry names follow, each as the bytes it shares with the name
 * before, then the rest ended by a zero byte, then the bodies
 * of records of other types as they are. Unpacking gives back the records
 * byte for byte: the snapshot's checksum is over the records. A chunk
 * packs alone (nothing carries over from the chunk before), so it is
 * decoded and applied alone, as before. */
#include "fs_internal.h"

/* Record codes in a packed chunk's list of types: the record types packed
 * in columns, and 0 for any other record (its type, length and body kept
 * as they are). */
#define PK_OTHER 0
#define PK_CODES 12

/* Body lengths of the record types packed in columns (docs/format.md,
 * Records); a record of such a type with another length is packed as an
 * "other" one. */
#define INODE_BODY 92u
#define DADD_FIXED 26u
/* Offsets in an INODE body: ino 0, generation 8, mode 16, uid 20, gid 24,
 * nlink 28, rdev 32, then the times, the parent and the sort key. */
#define I_ATS 40
#define I_ATNS 48
#define I_MTS 52
#define I_MTNS 60
#define I_CTS 64
#define I_CTNS 72
#define I_PARENT 76
#define I_KEY 84

enum { /* columns, in their order in a packed chunk */
       C_R_OFF,
       C_R_LEN,
       C_F_ID,
       C_F_OFF,
       C_F_CLEN,
       C_F_DLEN,
       C_F_CRC,
       C_I_INO,
       C_I_GEN,
       C_I_MODE,
       C_I_UID,
       C_I_GID,
       C_I_NLINK,
       C_I_RDEV,
       C_I_MTS,
       C_I_MTNS,
       C_I_ATS,
       C_I_ATNS,
       C_I_CTS,
       C_I_CTNS,
       C_I_PARENT,
       C_I_KEY,
       C_S_INO,
       C_S_SIZE,
       C_E_INO,
       C_E_BLK,
       C_E_FRAME,
       C_E_OFF,
       C_E_LEN,
       C_D_PARENT,
       C_D_INO,
       C_D_COOKIE,
       C_O_TYPE,
       C_O_LEN,
       NCOL
};

static const struct {
    uint8_t code, width;
} col[NCOL] = {
    [C_R_OFF] = {R_RETIRE, 8},  [C_R_LEN] = {R_RETIRE, 8},  [C_F_ID] = {R_FRAME, 4},
    [C_F_OFF] = {R_FRAME, 8},   [C_F_CLEN] = {R_FRAME, 4},  [C_F_DLEN] = {R_FRAME, 4},
    [C_F_CRC] = {R_FRAME, 4},   [C_I_INO] = {R_INODE, 8},   [C_I_GEN] = {R_INODE, 8},
    [C_I_MODE] = {R_INODE, 4},  [C_I_UID] = {R_INODE, 4},   [C_I_GID] = {R_INODE, 4},
    [C_I_NLINK] = {R_INODE, 4}, [C_I_RDEV] = {R_INODE, 8},  [C_I_MTS] = {R_INODE, 8},
    [C_I_MTNS] = {R_INODE, 4},  [C_I_ATS] = {R_INODE, 8},   [C_I_ATNS] = {R_INODE, 4},
    [C_I_CTS] = {R_INODE, 8},   [C_I_CTNS] = {R_INODE, 4},  [C_I_PARENT] = {R_INODE, 8},
    [C_I_KEY] = {R_INODE, 8},   [C_S_INO] = {R_SIZE, 8},    [C_S_SIZE] = {R_SIZE, 8},
    [C_E_INO] = {R_EXT, 8},     [C_E_BLK] = {R_EXT, 4},     [C_E_FRAME] = {R_EXT, 4},
    [C_E_OFF] = {R_EXT, 4},     [C_E_LEN] = {R_EXT, 4},     [C_D_PARENT] = {R_DADD, 8},
    [C_D_INO] = {R_DADD, 8},    [C_D_COOKIE] = {R_DADD, 8}, [C_O_TYPE] = {PK_OTHER, 2},
    [C_O_LEN] = {PK_OTHER, 4},
};

/* What the record before predicts: both directions keep the same state,
 * updated record by record in the chunk's order. */
typedef struct pstate {
    uint64_t r_end, f_end, i_ino, i_gen, s_ino, e_ino, d_parent, d_ino, d_cookie;
    uint32_t f_id, e_frame, e_end;
    uint64_t size_ino, size; /* the last SIZE record */
} pstate;

/* The length an EXT record of block blk of inode ino is expected to have:
 * what the last SIZE record says is left of the file, up to a block. */
static uint32_t ext_expect(const pstate *s, uint64_t ino, uint32_t blk, uint32_t bs)
{
    if (s->size_ino != ino)
        return 0;
    uint64_t start = (uint64_t)blk * bs;
    uint64_t rem = s->size > start ? s->size - start : 0;
    return (uint32_t)(rem < bs ? rem : bs);
}

/* The code a record is packed under. */
static int code_of(uint16_t type, const uint8_t *body, uint32_t len)
{
    switch (type) {
    case R_INODE: return len == INODE_BODY ? R_INODE : PK_OTHER;
    case R_SIZE: return len == 16 ? R_SIZE : PK_OTHER;
    case R_FRAME: return len == 24 ? R_FRAME : PK_OTHER;
    case R_EXT: return len == 24 ? R_EXT : PK_OTHER;
    case R_RETIRE: return len == 16 ? R_RETIRE : PK_OTHER;
    case R_DADD:
        /* the name ends at a zero byte when packed: it must hold none */
        if (len >= DADD_FIXED && load_le16(body + 24) == len - DADD_FIXED &&
            !memchr(body + DADD_FIXED, 0, len - DADD_FIXED))
            return R_DADD;
        return PK_OTHER;
    default: return PK_OTHER;
    }
}

/* Bytes a name shares with the one before at its start (at most 255). */
static size_t shared(const uint8_t *prev, size_t pl, const uint8_t *name, size_t nl)
{
    size_t k = 0, max = pl < nl ? pl : nl;
    while (k < max && k < 255 && prev[k] == name[k])
        k++;
    return k;
}

static void put(uint8_t **cur, int c, uint64_t v)
{
    uint8_t *p = cur[c];
    switch (col[c].width) {
    case 2: store_le16(p, (uint16_t)v); break;
    case 4: store_le32(p, (uint32_t)v); break;
    default: store_le64(p, v); break;
    }
    cur[c] = p + col[c].width;
}

static uint64_t get(const uint8_t **cur, int c)
{
    const uint8_t *p = cur[c];
    cur[c] = p + col[c].width;
    switch (col[c].width) {
    case 2: return load_le16(p);
    case 4: return load_le32(p);
    default: return load_le64(p);
    }
}

int snap_pack(const uint8_t *rec, size_t len, uint32_t bs, wbuf *out)
{
    /* Pass 1: every record whole, how many of each code, the variable
     * bytes. */
    size_t n = 0, cnt[PK_CODES] = {0}, nbytes = 0, obytes = 0, plen = 0;
    const uint8_t *prev = NULL;
    for (size_t pos = 0; pos < len; n++) {
        if (len - pos < REC_HDR || load_le16(rec + pos + 2) != 0)
            return -EINVAL;
        uint32_t bl = load_le32(rec + pos + 4);
        if (bl > len - pos - REC_HDR)
            return -EINVAL;
        const uint8_t *body = rec + pos + REC_HDR;
        int code = code_of(load_le16(rec + pos), body, bl);
        cnt[code]++;
        if (code == R_DADD) {
            size_t nl = bl - DADD_FIXED;
            nbytes += 1 + nl - shared(prev, plen, body + DADD_FIXED, nl) + 1;
            prev = body + DADD_FIXED;
            plen = nl;
        } else if (code == PK_OTHER)
            obytes += bl;
        pos += REC_HDR + (size_t)bl;
    }
    if (n > UINT32_MAX)
        return -EINVAL;
    size_t size = 4 + n + nbytes + obytes;
    for (int c = 0; c < NCOL; c++)
        size += cnt[col[c].code] * col[c].width;
    if (wb_reserve(out, size))
        return -ENOMEM;
    uint8_t *base = out->p + out->len, *types = base + 4, *cur[NCOL];
    store_le32(base, (uint32_t)n);
    uint8_t *p = types + n;
    for (int c = 0; c < NCOL; c++) {
        cur[c] = p;
        p += cnt[col[c].code] * col[c].width;
    }
    uint8_t *names = p, *other = p + nbytes;
    /* Pass 2: the columns. */
    pstate s = {0};
    size_t i = 0;
    prev = NULL;
    plen = 0;
    for (size_t pos = 0; pos < len; i++) {
        uint16_t type = load_le16(rec + pos);
        uint32_t bl = load_le32(rec + pos + 4);
        const uint8_t *b = rec + pos + REC_HDR;
        int code = code_of(type, b, bl);
        types[i] = (uint8_t)code;
        switch (code) {
        case R_RETIRE: {
            uint64_t off = load_le64(b), l = load_le64(b + 8);
            put(cur, C_R_OFF, off - s.r_end);
            put(cur, C_R_LEN, l);
            s.r_end = off + l;
            break;
        }
        case R_FRAME: {
            uint32_t id = load_le32(b), clen = load_le32(b + 12);
            uint64_t off = load_le64(b + 4);
            put(cur, C_F_ID, id - s.f_id);
            put(cur, C_F_OFF, off - s.f_end);
            put(cur, C_F_CLEN, clen);
            put(cur, C_F_DLEN, load_le32(b + 16));
            put(cur, C_F_CRC, load_le32(b + 20));
            s.f_id = id;
            s.f_end = off + clen;
            break;
        }
        case R_INODE: {
            uint64_t ino = load_le64(b), gen = load_le64(b + 8), mt = load_le64(b + I_MTS);
            uint32_t mtn = load_le32(b + I_MTNS);
            put(cur, C_I_INO, ino - s.i_ino);
            put(cur, C_I_GEN, gen - s.i_gen);
            put(cur, C_I_MODE, load_le32(b + 16));
            put(cur, C_I_UID, load_le32(b + 20));
            put(cur, C_I_GID, load_le32(b + 24));
            put(cur, C_I_NLINK, load_le32(b + 28));
            put(cur, C_I_RDEV, load_le64(b + 32));
            put(cur, C_I_MTS, mt);
            put(cur, C_I_MTNS, mtn);
            put(cur, C_I_ATS, load_le64(b + I_ATS) - mt);
            put(cur, C_I_ATNS, load_le32(b + I_ATNS) - mtn);
            put(cur, C_I_CTS, load_le64(b + I_CTS) - mt);
            put(cur, C_I_CTNS, load_le32(b + I_CTNS) - mtn);
            put(cur, C_I_PARENT, load_le64(b + I_PARENT));
            put(cur, C_I_KEY, load_le64(b + I_KEY));
            s.i_ino = ino;
            s.i_gen = gen;
            break;
        }
        case R_SIZE: {
            uint64_t ino = load_le64(b), size = load_le64(b + 8);
            put(cur, C_S_INO, ino - s.s_ino);
            put(cur, C_S_SIZE, size);
            s.s_ino = s.size_ino = ino;
            s.size = size;
            break;
        }
        case R_EXT: {
            uint64_t ino = load_le64(b);
            uint32_t blk = load_le32(b + 8), frame = load_le32(b + 12);
            uint32_t off = load_le32(b + 16), l = load_le32(b + 20);
            put(cur, C_E_INO, ino - s.e_ino);
            put(cur, C_E_BLK, blk);
            put(cur, C_E_FRAME, frame - s.e_frame);
            put(cur, C_E_OFF, off - (frame == s.e_frame ? s.e_end : 0));
            put(cur, C_E_LEN, l - ext_expect(&s, ino, blk, bs));
            s.e_ino = ino;
            s.e_frame = frame;
            s.e_end = off + l;
            break;
        }
        case R_DADD: {
            uint64_t parent = load_le64(b), ino = load_le64(b + 8), cookie = load_le64(b + 16);
            put(cur, C_D_PARENT, parent - s.d_parent);
            put(cur, C_D_INO, ino - s.d_ino);
            put(cur, C_D_COOKIE, cookie - (parent == s.d_parent ? s.d_cookie : 0));
            s.d_parent = parent;
            s.d_ino = ino;
            s.d_cookie = cookie;
            size_t nl = bl - DADD_FIXED, k = shared(prev, plen, b + DADD_FIXED, nl);
            *names++ = (uint8_t)k;
            memcpy(names, b + DADD_FIXED + k, nl - k);
            names += nl - k;
            *names++ = 0;
            prev = b + DADD_FIXED;
            plen = nl;
            break;
        }
        default:
            put(cur, C_O_TYPE, type);
            put(cur, C_O_LEN, bl);
            memcpy(other, b, bl);
            other += bl;
            break;
        }
        pos += REC_HDR + (size_t)bl;
    }
    out->len += size;
    return 0;
}

int snap_unpack(const uint8_t *p, size_t len, uint32_t bs, wbuf *out)
{
    if (len < 4)
        return -EUCLEAN;
    size_t n = load_le32(p);
    if (n > len - 4)
        return -EUCLEAN; /* a type byte a record at least */
    const uint8_t *types = p + 4;
    size_t cnt[PK_CODES] = {0};
    for (size_t i = 0; i < n; i++) {
        uint8_t c = types[i];
        if (c >= PK_CODES || (c != PK_OTHER && c != R_INODE && c != R_SIZE && c != R_FRAME &&
                              c != R_EXT && c != R_RETIRE && c != R_DADD))
            return -EUCLEAN;
        cnt[c]++;
    }
    /* The columns, each within the chunk. */
    const uint8_t *cur[NCOL], *q = types + n, *end = p + len;
    for (int c = 0; c < NCOL; c++) {
        size_t w = cnt[col[c].code] * col[c].width;
        if (w > (size_t)(end - q))
            return -EUCLEAN;
        cur[c] = q;
        q += w;
    }
    /* The rest: the names (one per DADD: the length it shares with the
     * name before, the rest ended by a zero byte), then the other records'
     * bodies, which must fill it exactly. The records' total length is
     * known before any is written. */
    const uint8_t *names = q, *other = q;
    size_t out_len = 0, plen = 0;
    for (size_t k = 0; k < cnt[R_DADD]; k++) {
        if (other == end || *other > plen)
            return -EUCLEAN;
        size_t sh = *other++;
        const uint8_t *z = memchr(other, 0, (size_t)(end - other));
        if (!z || sh + (size_t)(z - other) > 0xffff)
            return -EUCLEAN;
        plen = sh + (size_t)(z - other);
        out_len += REC_HDR + DADD_FIXED + plen;
        other = z + 1;
    }
    const uint8_t *olen = cur[C_O_LEN];
    size_t orest = (size_t)(end - other);
    for (size_t k = 0; k < cnt[PK_OTHER]; k++) {
        uint32_t bl = load_le32(olen + 4 * k);
        if (bl > orest)
            return -EUCLEAN;
        orest -= bl;
        out_len += REC_HDR + bl;
    }
    if (orest)
        return -EUCLEAN;
    out_len += cnt[R_INODE] * (REC_HDR + INODE_BODY) +
               (cnt[R_SIZE] + cnt[R_RETIRE]) * (REC_HDR + 16) +
               (cnt[R_FRAME] + cnt[R_EXT]) * (REC_HDR + 24);
    if (out_len > GMTF_FS_BLOCK_MAX) /* a chunk's records: the writer makes 1 MiB */
        return -EUCLEAN;
    if (wb_reserve(out, out_len))
        return -ENOMEM;
    if (!out_len) /* no records: out->p may still be NULL (clang's UBSan) */
        return 0;
    uint8_t *o = out->p + out->len;
    const uint8_t *prev = NULL; /* the last DADD's name, as written */
    pstate s = {0};
    for (size_t i = 0; i < n; i++) {
        int code = types[i];
        uint16_t type = (uint16_t)code;
        uint32_t bl;
        uint8_t *b = o + REC_HDR;
        switch (code) {
        case R_RETIRE: {
            uint64_t off = s.r_end + get(cur, C_R_OFF), l = get(cur, C_R_LEN);
            store_le64(b, off);
            store_le64(b + 8, l);
            s.r_end = off + l;
            bl = 16;
            break;
        }
        case R_FRAME: {
            uint32_t id = s.f_id + (uint32_t)get(cur, C_F_ID);
            uint64_t off = s.f_end + get(cur, C_F_OFF);
            uint32_t clen = (uint32_t)get(cur, C_F_CLEN);
            store_le32(b, id);
            store_le64(b + 4, off);
            store_le32(b + 12, clen);
            store_le32(b + 16, (uint32_t)get(cur, C_F_DLEN));
            store_le32(b + 20, (uint32_t)get(cur, C_F_CRC));
            s.f_id = id;
            s.f_end = off + clen;
            bl = 24;
            break;
        }
        case R_INODE: {
            uint64_t ino = s.i_ino + get(cur, C_I_INO), gen = s.i_gen + get(cur, C_I_GEN);
            store_le64(b, ino);
            store_le64(b + 8, gen);
            store_le32(b + 16, (uint32_t)get(cur, C_I_MODE));
            store_le32(b + 20, (uint32_t)get(cur, C_I_UID));
            store_le32(b + 24, (uint32_t)get(cur, C_I_GID));
            store_le32(b + 28, (uint32_t)get(cur, C_I_NLINK));
            store_le64(b + 32, get(cur, C_I_RDEV));
            uint64_t mt = get(cur, C_I_MTS);
            uint32_t mtn = (uint32_t)get(cur, C_I_MTNS);
            store_le64(b + I_MTS, mt);
            store_le32(b + I_MTNS, mtn);
            store_le64(b + I_ATS, mt + get(cur, C_I_ATS));
            store_le32(b + I_ATNS, mtn + (uint32_t)get(cur, C_I_ATNS));
            store_le64(b + I_CTS, mt + get(cur, C_I_CTS));
            store_le32(b + I_CTNS, mtn + (uint32_t)get(cur, C_I_CTNS));
            store_le64(b + I_PARENT, get(cur, C_I_PARENT));
            store_le64(b + I_KEY, get(cur, C_I_KEY));
            s.i_ino = ino;
            s.i_gen = gen;
            bl = INODE_BODY;
            break;
        }
        case R_SIZE: {
            uint64_t ino = s.s_ino + get(cur, C_S_INO), size = get(cur, C_S_SIZE);
            store_le64(b, ino);
            store_le64(b + 8, size);
            s.s_ino = s.size_ino = ino;
            s.size = size;
            bl = 16;
            break;
        }
        case R_EXT: {
            uint64_t ino = s.e_ino + get(cur, C_E_INO);
            uint32_t blk = (uint32_t)get(cur, C_E_BLK);
            uint32_t frame = s.e_frame + (uint32_t)get(cur, C_E_FRAME);
            uint32_t off = (uint32_t)get(cur, C_E_OFF) + (frame == s.e_frame ? s.e_end : 0);
            uint32_t l = (uint32_t)get(cur, C_E_LEN) + ext_expect(&s, ino, blk, bs);
            store_le64(b, ino);
            store_le32(b + 8, blk);
            store_le32(b + 12, frame);
            store_le32(b + 16, off);
            store_le32(b + 20, l);
            s.e_ino = ino;
            s.e_frame = frame;
            s.e_end = off + l;
            bl = 24;
            break;
        }
        case R_DADD: {
            uint64_t parent = s.d_parent + get(cur, C_D_PARENT);
            uint64_t ino = s.d_ino + get(cur, C_D_INO);
            uint64_t cookie = get(cur, C_D_COOKIE) + (parent == s.d_parent ? s.d_cookie : 0);
            size_t sh = *names++; /* at most the last name's length: checked above */
            size_t sl = strlen((const char *)names); /* ends inside: checked above */
            store_le64(b, parent);
            store_le64(b + 8, ino);
            store_le64(b + 16, cookie);
            store_le16(b + 24, (uint16_t)(sh + sl));
            if (sh)
                memcpy(b + DADD_FIXED, prev, sh);
            memcpy(b + DADD_FIXED + sh, names, sl);
            names += sl + 1;
            prev = b + DADD_FIXED;
            size_t nl = sh + sl;
            s.d_parent = parent;
            s.d_ino = ino;
            s.d_cookie = cookie;
            bl = DADD_FIXED + (uint32_t)nl;
            break;
        }
        default:
            type = (uint16_t)get(cur, C_O_TYPE);
            bl = (uint32_t)get(cur, C_O_LEN);
            memcpy(b, other, bl);
            other += bl;
            break;
        }
        store_le16(o, type);
        store_le16(o + 2, 0);
        store_le32(o + 4, bl);
        o += REC_HDR + bl;
    }
    out->len += out_len;
    return 0;
}
