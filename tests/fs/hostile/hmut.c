/* The structure-aware mutator (hmut.h). Deterministic: everything follows
 * from the seed through splitmix64. */
#include "hmut.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "himg.h"

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(rng *r, uint64_t n)
{
    return n ? next(r) % n : 0;
}

static void say(hmut *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(hmut *m, const char *fmt, ...)
{
    size_t n = strlen(m->what);
    if (n + 4 >= sizeof m->what)
        return;
    if (n)
        n += (size_t)snprintf(m->what + n, sizeof m->what - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->what + n, sizeof m->what - n, fmt, ap);
    va_end(ap);
}

/* ---- what the image holds, for values that mean something to it ------------- */

typedef struct known {
    uint64_t inos[64], frames[64], offs[64];
    size_t ninos, nframes, noffs;
    uint32_t bs;
    uint64_t len, capacity;
} known;

static uint64_t rec_u(const hrec *r, size_t i)
{
    size_t n;
    const hfield *f = hrec_fields(hrec_type(r), &n);
    long off = hrec_field_off(r, i);
    if (!f || off < 0)
        return 0;
    const uint8_t *p = r->p + REC_HDR + off;
    switch (f[i].width) {
    case 8: return load_le64(p);
    case 4: return load_le32(p);
    case 2: return (uint64_t)(p[0] | p[1] << 8);
    default: return p[0];
    }
}

static void rec_put(hrec *r, size_t i, uint64_t v)
{
    size_t n;
    const hfield *f = hrec_fields(hrec_type(r), &n);
    long off = hrec_field_off(r, i);
    if (!f || off < 0)
        return;
    uint8_t *p = r->p + REC_HDR + off;
    switch (f[i].width) {
    case 8: store_le64(p, v); break;
    case 4: store_le32(p, (uint32_t)v); break;
    case 2:
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        break;
    default: p[0] = (uint8_t)v;
    }
}

static hchunk *chunk_at(himg *h, size_t i)
{
    return i < h->nsnap ? &h->snap[i] : i < h->nsnap + h->njr ? &h->jr[i - h->nsnap] : NULL;
}

static size_t nchunks(const himg *h)
{
    return h->nsnap + h->njr;
}

static void learn(himg *h, known *k)
{
    memset(k, 0, sizeof *k);
    k->bs = h->sb[h->cur].block_size;
    k->len = h->len;
    k->capacity = h->sb[h->cur].capacity;
    hchunk *c;
    for (size_t i = 0; (c = chunk_at(h, i)); i++)
        for (size_t j = 0; j < c->n; j++) {
            hrec *r = &c->v[j];
            uint16_t t = hrec_type(r);
            if (t == R_INODE && k->ninos < 64 && hrec_field_off(r, 0) >= 0)
                k->inos[k->ninos++] = rec_u(r, 0);
            if (t == R_FRAME && hrec_field_off(r, 4) >= 0) {
                if (k->nframes < 64)
                    k->frames[k->nframes++] = rec_u(r, 0);
                if (k->noffs < 64)
                    k->offs[k->noffs++] = rec_u(r, 1);
            }
        }
}

static uint64_t pick(rng *r, const uint64_t *v, size_t n, uint64_t dflt)
{
    return n ? v[below(r, n)] : dflt;
}

/* A value for a field with that role, that width, now holding cur. */
static uint64_t hostile(rng *r, const known *k, uint8_t role, uint8_t width, uint64_t cur,
                        const hrec *rec)
{
    uint64_t max = width == 8 ? UINT64_MAX : width == 4 ? UINT32_MAX : width == 2 ? 0xffff : 0xff;
    switch (below(r, 5)) { /* generic: small steps, extremes, a random bit */
    case 0: return (cur + 1) & max;
    case 1: return (cur - 1) & max;
    case 2: return below(r, 2) ? 0 : max;
    case 3: return (cur ^ (1ull << below(r, width * 8u))) & max;
    default: break;
    }
    switch (role) {
    case HF_INO: {
        const uint64_t v[] = {0,
                              1,
                              GMTF_ROOT_INO,
                              rec ? rec_u(rec, 0) : 2, /* itself: a directory its own parent */
                              pick(r, k->inos, k->ninos, 2),
                              pick(r, k->inos, k->ninos, 2) + 1,
                              1ull << 27,
                              1ull << 32,
                              (1ull << 40) - 1,
                              1ull << 40,
                              (1ull << 40) + 1,
                              1ull << 63};
        return v[below(r, sizeof v / sizeof v[0])] & max;
    }
    case HF_MODE: {
        const uint32_t t[] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK,
                              S_IFCHR, S_IFBLK, 0,       0xf000u};
        return (t[below(r, sizeof t / sizeof t[0])] | (cur & 07777)) ^ (below(r, 3) ? 0 : 04000);
    }
    case HF_SIZE: {
        const uint64_t v[] = {0,
                              1,
                              k->bs - 1,
                              k->bs,
                              k->bs + 1ull,
                              cur * 2,
                              cur / 2,
                              1ull << 32,
                              (uint64_t)k->bs * 0xffffffffull,
                              (uint64_t)k->bs * 0xffffffffull + 1,
                              1ull << 62};
        return v[below(r, sizeof v / sizeof v[0])] & max;
    }
    case HF_FRAME: {
        const uint64_t v[] = {0,
                              1,
                              pick(r, k->frames, k->nframes, 1),
                              pick(r, k->frames, k->nframes, 1) + 1,
                              k->nframes + 1,
                              1ull << 27,
                              (1ull << 31) - 1,
                              1ull << 31,
                              0xfffffffeu};
        return v[below(r, sizeof v / sizeof v[0])] & max;
    }
    case HF_BLOCK: {
        const uint64_t v[] = {0, 1, 2, 3, 0x7fffffffu, 0xfffffffeu, 0xffffffffu, cur + 4};
        return v[below(r, sizeof v / sizeof v[0])] & max;
    }
    case HF_OFF: {
        if (width == 8) { /* a frame's offset in the image */
            const uint64_t v[] = {0,
                                  DATA_START - 1,
                                  DATA_START,
                                  SB_SLOT_SIZE,
                                  k->len,
                                  k->len - 1,
                                  k->len - 100,
                                  pick(r, k->offs, k->noffs, DATA_START),
                                  pick(r, k->offs, k->noffs, DATA_START) + 1,
                                  k->capacity ? k->capacity : k->len + 4096,
                                  8ull << 40,
                                  UINT64_MAX - 10};
            return v[below(r, sizeof v / sizeof v[0])];
        }
        const uint64_t v[] = {0, 1, k->bs - 1, k->bs, k->bs + 1ull, cur + 4096, 0x80000000u};
        return v[below(r, sizeof v / sizeof v[0])] & max;
    }
    case HF_LEN: {
        const uint64_t v[] = {0,    1,    cur + 1, cur - 1,      255,    256,
                              4095, 4096, k->bs,   k->bs + 1ull, cur * 2};
        return v[below(r, sizeof v / sizeof v[0])] & max;
    }
    case HF_COOKIE: {
        const uint64_t v[] = {0, 1, 2, 3, 4, cur + 1, cur - 1, UINT64_MAX, UINT64_MAX - 1};
        return v[below(r, sizeof v / sizeof v[0])];
    }
    case HF_NS: {
        const uint64_t v[] = {999999999, 1000000000, 0xffffffffu};
        return v[below(r, 3)];
    }
    }
    return next(r) & max;
}

/* ---- edits ------------------------------------------------------------------ */

/* A record chosen over all chunks: (chunk, index), weighted by count. */
static int pick_record(rng *r, himg *h, hchunk **c, size_t *i)
{
    size_t total = 0;
    hchunk *x;
    for (size_t k = 0; (x = chunk_at(h, k)); k++)
        total += x->n;
    if (!total)
        return -1;
    size_t want = below(r, total);
    for (size_t k = 0; (x = chunk_at(h, k)); k++) {
        if (want < x->n) {
            *c = x;
            *i = want;
            return 0;
        }
        want -= x->n;
    }
    return -1;
}

static const char *type_name(uint16_t t)
{
    static const char *n[] = {"?",    "INODE", "SIZE",  "IDEL", "DADD", "DDEL",
                              "LINK", "XATTR", "FRAME", "EXT",  "STAGE"};
    return t < sizeof n / sizeof n[0] ? n[t] : "?";
}

static const char *chunk_name(himg *h, hchunk *c, char *buf, size_t n)
{
    size_t k = (size_t)(c - h->snap);
    if (c >= h->snap && k < h->nsnap)
        snprintf(buf, n, "snapshot chunk %zu", k);
    else
        snprintf(buf, n, "journal chunk %zu", (size_t)(c - h->jr));
    return buf;
}

/* A field of a record gets a hostile value, or its tail bytes change. */
static int edit_field(rng *r, himg *h, const known *k, hmut *m)
{
    hchunk *c;
    size_t i;
    if (pick_record(r, h, &c, &i))
        return -1;
    hrec *rec = &c->v[i];
    size_t nf;
    const hfield *f = hrec_fields(hrec_type(rec), &nf);
    char cn[40];
    if (!f)
        return -1;
    size_t fi = below(r, nf);
    if (f[fi].width == 0) { /* the tail: a name, target, blob or data */
        long off = 0;
        for (size_t q = 0; q < fi; q++)
            off += f[q].width;
        size_t tail = rec->len - REC_HDR - (size_t)off;
        if (!tail)
            return -1;
        uint8_t *p = rec->p + REC_HDR + off + below(r, tail);
        const uint8_t v[] = {'/', 0, '.', 0xff, (uint8_t)(*p ^ 0x20)};
        *p = v[below(r, sizeof v)];
        say(m, "%s record %zu (%s): a byte of its %s set to 0x%02x", chunk_name(h, c, cn, 40), i,
            type_name(hrec_type(rec)), f[fi].name, *p);
        return 0;
    }
    if (hrec_field_off(rec, fi) < 0)
        return -1;
    uint64_t cur = rec_u(rec, fi), v = hostile(r, k, f[fi].role, f[fi].width, cur, rec);
    rec_put(rec, fi, v);
    say(m, "%s record %zu (%s): %s %llu -> %llu", chunk_name(h, c, cn, 40), i,
        type_name(hrec_type(rec)), f[fi].name, (unsigned long long)cur, (unsigned long long)v);
    return 0;
}

/* A record of any type made up of hostile fields. */
static int make_record(rng *r, const known *k, hrec *out)
{
    uint16_t type = (uint16_t)(1 + below(r, R_RETIRE));
    size_t nf;
    const hfield *f = hrec_fields(type, &nf);
    uint8_t body[512];
    size_t n = 0;
    for (size_t i = 0; i < nf; i++) {
        if (f[i].width == 0) {
            size_t tail = 1 + below(r, 40);
            for (size_t q = 0; q < tail; q++)
                body[n + q] = (uint8_t)('a' + below(r, 26));
            n += tail;
            break;
        }
        uint64_t v = below(r, 2) ? hostile(r, k, f[i].role, f[i].width, 0, NULL) : below(r, 8);
        if (f[i].role == HF_INO && below(r, 2))
            v = pick(r, k->inos, k->ninos, 2);
        for (unsigned b = 0; b < f[i].width; b++)
            body[n + b] = (uint8_t)(v >> (8 * b));
        n += f[i].width;
    }
    return hrec_make(out, type, body, (uint32_t)n);
}

/* Records of chunks added, removed, repeated, reordered, moved, cut. */
static int edit_chunks(rng *r, himg *h, const known *k, hmut *m)
{
    hchunk *c, *c2;
    size_t i, j;
    char cn[40], cn2[40];
    switch (below(r, 9)) {
    case 0: /* remove */
        if (pick_record(r, h, &c, &i))
            return -1;
        say(m, "%s: record %zu (%s) removed", chunk_name(h, c, cn, 40), i,
            type_name(hrec_type(&c->v[i])));
        hchunk_remove(c, i);
        return 0;
    case 1: /* repeat, here or elsewhere */
        if (pick_record(r, h, &c, &i))
            return -1;
        c2 = chunk_at(h, below(r, nchunks(h)));
        j = below(r, c2->n + 1);
        say(m, "%s record %zu (%s) repeated in %s at %zu", chunk_name(h, c, cn, 40), i,
            type_name(hrec_type(&c->v[i])), chunk_name(h, c2, cn2, 40), j);
        {
            hrec x = c->v[i];
            uint8_t *copy = malloc(x.len);
            memcpy(copy, x.p, x.len);
            int rc = hchunk_insert(c2, j, copy, x.len);
            free(copy);
            return rc;
        }
    case 2: /* swap two */
        if (pick_record(r, h, &c, &i) || pick_record(r, h, &c2, &j))
            return -1;
        say(m, "%s record %zu (%s) swapped with %s record %zu (%s)", chunk_name(h, c, cn, 40), i,
            type_name(hrec_type(&c->v[i])), chunk_name(h, c2, cn2, 40), j,
            type_name(hrec_type(&c2->v[j])));
        {
            hrec t = c->v[i];
            c->v[i] = c2->v[j];
            c2->v[j] = t;
        }
        return 0;
    case 3: { /* a made-up record */
        hrec x;
        c = chunk_at(h, below(r, nchunks(h)));
        if (!c || make_record(r, k, &x))
            return -1;
        i = below(r, c->n + 1);
        say(m, "%s: made-up %s record inserted at %zu", chunk_name(h, c, cn, 40),
            type_name(hrec_type(&x)), i);
        int rc = hchunk_insert(c, i, x.p, x.len);
        free(x.p);
        return rc;
    }
    case 4: /* cut or pad a body, the length following */
        if (pick_record(r, h, &c, &i))
            return -1;
        {
            hrec *x = &c->v[i];
            uint32_t blen = x->len - REC_HDR, nl;
            nl = below(r, 2) && blen ? (uint32_t)below(r, blen) : blen + 1 + (uint32_t)below(r, 8);
            uint8_t *p = calloc(1, REC_HDR + nl);
            memcpy(p, x->p, REC_HDR + (nl < blen ? nl : blen));
            store_le32(p + 4, nl);
            free(x->p);
            x->p = p;
            x->len = REC_HDR + nl;
            say(m, "%s record %zu (%s): body %u -> %u bytes", chunk_name(h, c, cn, 40), i,
                type_name(hrec_type(x)), blen, nl);
        }
        return 0;
    case 5: /* the header: type or length */
        if (pick_record(r, h, &c, &i))
            return -1;
        {
            hrec *x = &c->v[i];
            if (below(r, 2)) {
                uint16_t t = (uint16_t)(below(r, 4) ? 1 + below(r, R_RETIRE) : below(r, 65536));
                say(m, "%s record %zu: type %s -> %u", chunk_name(h, c, cn, 40), i,
                    type_name(hrec_type(x)), t);
                x->p[0] = (uint8_t)t;
                x->p[1] = (uint8_t)(t >> 8);
            } else {
                uint32_t l = load_le32(x->p + 4), nl = (uint32_t)hostile(r, k, HF_LEN, 4, l, x);
                say(m, "%s record %zu (%s): length field %u -> %u (bytes unchanged)",
                    chunk_name(h, c, cn, 40), i, type_name(hrec_type(x)), l, nl);
                store_le32(x->p + 4, nl);
            }
        }
        return 0;
    case 6: /* reverse a chunk */
        c = chunk_at(h, below(r, nchunks(h)));
        if (!c || c->n < 2)
            return -1;
        for (size_t a = 0, b = c->n - 1; a < b; a++, b--) {
            hrec t = c->v[a];
            c->v[a] = c->v[b];
            c->v[b] = t;
        }
        say(m, "%s: records in reverse order", chunk_name(h, c, cn, 40));
        return 0;
    case 7: { /* journal chunks: drop, repeat, swap, merge, split */
        if (!h->njr)
            return -1;
        size_t a = below(r, h->njr), b = below(r, h->njr);
        switch (below(r, 4)) {
        case 0:
            say(m, "journal chunk %zu dropped", a);
            for (size_t q = 0; q < h->jr[a].n; q++)
                free(h->jr[a].v[q].p);
            free(h->jr[a].v);
            memmove(h->jr + a, h->jr + a + 1, (h->njr - a - 1) * sizeof *h->jr);
            h->njr--;
            return 0;
        case 1: {
            say(m, "journal chunk %zu repeated after chunk %zu", a, b);
            hchunk copy = {0};
            for (size_t q = 0; q < h->jr[a].n; q++)
                hchunk_insert(&copy, q, h->jr[a].v[q].p, h->jr[a].v[q].len);
            hchunk *t = realloc(h->jr, (h->njr + 1) * sizeof *t);
            if (!t)
                return -1;
            h->jr = t;
            memmove(h->jr + b + 2, h->jr + b + 1, (h->njr - b - 1) * sizeof *h->jr);
            h->jr[b + 1] = copy;
            h->njr++;
            return 0;
        }
        case 2: {
            say(m, "journal chunks %zu and %zu swapped", a, b);
            hchunk t = h->jr[a];
            h->jr[a] = h->jr[b];
            h->jr[b] = t;
            return 0;
        }
        default:
            if (a + 1 >= h->njr)
                return -1;
            say(m, "journal chunks %zu and %zu merged", a, a + 1);
            for (size_t q = 0; q < h->jr[a + 1].n; q++)
                hchunk_insert(&h->jr[a], h->jr[a].n, h->jr[a + 1].v[q].p, h->jr[a + 1].v[q].len);
            for (size_t q = 0; q < h->jr[a + 1].n; q++)
                free(h->jr[a + 1].v[q].p);
            free(h->jr[a + 1].v);
            memmove(h->jr + a + 1, h->jr + a + 2, (h->njr - a - 2) * sizeof *h->jr);
            h->njr--;
            return 0;
        }
    }
    default: { /* a snapshot chunk: split or emptied */
        if (!h->nsnap)
            return -1;
        size_t a = below(r, h->nsnap);
        hchunk *t = realloc(h->snap, (h->nsnap + 1) * sizeof *t);
        if (!t)
            return -1;
        h->snap = t;
        size_t cut = below(r, h->snap[a].n + 1);
        hchunk tail = {0};
        for (size_t q = cut; q < h->snap[a].n; q++)
            hchunk_insert(&tail, tail.n, h->snap[a].v[q].p, h->snap[a].v[q].len);
        while (h->snap[a].n > cut)
            hchunk_remove(&h->snap[a], h->snap[a].n - 1);
        memmove(h->snap + a + 2, h->snap + a + 1, (h->nsnap - a - 1) * sizeof *h->snap);
        h->snap[a + 1] = tail;
        h->nsnap++;
        say(m, "snapshot chunk %zu split at record %zu", a, cut);
        return 0;
    }
    }
}

/* A snapshot header field or a journal chunk's sequence number. */
static int edit_headers(rng *r, himg *h, hmut *m)
{
    switch (below(r, 5)) {
    case 0: {
        int64_t v[] = {0, 1, (int64_t)h->nsnap + 1, (int64_t)h->nsnap - 1, 0xffffffff};
        h->snap_nch = v[below(r, 5)] & 0xffffffff;
        say(m, "snapshot header: chunk count %lld (has %zu)", (long long)h->snap_nch, h->nsnap);
        return 0;
    }
    case 1: {
        int64_t v[] = {0, 1, 1 << 20, (int64_t)1 << 40, INT64_MAX};
        h->snap_raw_len = v[below(r, 5)];
        say(m, "snapshot header: raw length %lld", (long long)h->snap_raw_len);
        return 0;
    }
    case 2: {
        uint64_t g = h->sb[h->cur].gen;
        int64_t v[] = {(int64_t)g + 1, (int64_t)g - 1, 0};
        h->snap_gen = v[below(r, 3)];
        say(m, "snapshot header: generation %lld (superblock %llu)", (long long)h->snap_gen,
            (unsigned long long)g);
        return 0;
    }
    case 3: { /* the chunks say another encoding than they have */
        int64_t v[] = {SNAP_RECORDS, SNAP_PACKED, 2, 0xffffffff};
        h->snap_enc_say = v[below(r, 4)];
        say(m, "snapshot header: encoding %lld (chunks %u)", (long long)h->snap_enc_say,
            h->snap_enc);
        return 0;
    }
    default:
        if (!h->njr)
            return -1;
        h->jr_seq_skip = (int64_t)below(r, h->njr);
        say(m, "journal chunk %lld: sequence number off by one", (long long)h->jr_seq_skip);
        return 0;
    }
}

/* A superblock field of the slot in use (or the other), after the build. */
static int edit_super(rng *r, himg *h, const known *k, hmut *m)
{
    /* The newest generation's slot mostly; else any slot that is valid. */
    int slot = h->cur, other = -1;
    for (int i = 0; i < (int)SB_SLOTS; i++)
        if (!h->res[i] && h->sb[i].gen != h->sb[h->cur].gen)
            other = i; /* a slot of an older generation */
    if (!below(r, 4))
        slot = (int)below(r, SB_SLOTS);
    if (h->res[slot])
        return -1;
    sb_info *sb = &h->sb[slot];
    const sb_info *o = &h->sb[other >= 0 ? other : slot];
    uint64_t len = h->len;
    uint64_t *f;
    const char *name;
    uint64_t v;
    switch (below(r, 10)) {
    case 0: {
        f = &sb->gen, name = "generation";
        const uint64_t c[] = {*f + 1,     *f - 1, *f + 2,     o->gen,
                              o->gen + 1, 0,      UINT64_MAX, 1ull << 62};
        v = c[below(r, 8)];
        break;
    }
    case 1: {
        const uint32_t c[] = {GMTF_FS_BLOCK_MIN, 128u << 10, 1u << 20,  GMTF_FS_BLOCK_MAX,
                              k->bs * 2,         k->bs / 2,  k->bs + 1, 0};
        uint32_t b = c[below(r, 8)];
        say(m, "superblock slot %d: block size %u -> %u", slot, sb->block_size, b);
        sb->block_size = b;
        goto write;
    }
    case 2: {
        f = &sb->capacity, name = "capacity";
        const uint64_t c[] = {
            0,         len, len - 1, len / 2, sb->snap_off + sb->snap_len, DATA_START + (1u << 20),
            1ull << 50};
        v = c[below(r, 7)];
        break;
    }
    case 3: {
        f = &sb->snap_off, name = "snapshot offset";
        const uint64_t c[] = {*f + 1, *f - 1,       DATA_START, o->snap_off,
                              len,    sb->jrnl_off, 8ull << 40, 0};
        v = c[below(r, 8)];
        break;
    }
    case 4: {
        f = &sb->snap_len, name = "snapshot length";
        const uint64_t c[] = {*f + 1, *f - 1, SNAP_HDR_SIZE, len, 1ull << 40, 0};
        v = c[below(r, 6)];
        break;
    }
    case 5: {
        f = &sb->jrnl_off, name = "journal offset";
        const uint64_t c[] = {*f + 1,      *f - 32, DATA_START, sb->snap_off,
                              o->jrnl_off, len,     len - 100,  8ull << 40};
        v = c[below(r, 8)];
        break;
    }
    case 6: {
        f = &sb->jrnl_len, name = "journal length";
        const uint64_t c[] = {0, 1, JR_HDR_SIZE, *f / 2, *f * 4, 1ull << 30, (1ull << 30) + 1};
        v = c[below(r, 7)];
        break;
    }
    case 7: {
        f = &sb->jrnl_id, name = "journal id";
        const uint64_t c[] = {*f + 1, o->jrnl_id, 0};
        v = c[below(r, 3)];
        break;
    }
    case 8: { /* valid: 0, a power of two from 64 KiB to the block size */
        uint32_t bs = sb->block_size;
        const uint32_t c[] = {0,          64u << 10, 32u << 10,  bs,      bs * 2,
                              bs / 2 + 1, bs - 1,    UINT32_MAX, 1u << 31};
        uint32_t p = c[below(r, 9)];
        say(m, "superblock slot %d: pack size %u -> %u", slot, sb->pack_size, p);
        sb->pack_size = p;
        goto write;
    }
    default: {
        f = &sb->image_end, name = "image end";
        const uint64_t c[] = {0, len * 2, UINT64_MAX};
        v = c[below(r, 3)];
        break;
    }
    }
    say(m, "superblock slot %d: %s %llu -> %llu", slot, name, (unsigned long long)*f,
        (unsigned long long)v);
    *f = v;
write:;
    int twin = below(r, 2) != 0; /* both copies of the generation, or one */
    if (twin)
        say(m, "(both copies)");
    himg_put_sb(h, slot, twin);
    return 0;
}

/* The FRAME record (last one) of a frame chosen at random. */
static hrec *pick_frame(rng *r, himg *h)
{
    hrec *v[256];
    size_t n = 0;
    hchunk *c;
    for (size_t k = 0; (c = chunk_at(h, k)); k++)
        for (size_t i = 0; i < c->n && n < 256; i++)
            if (hrec_type(&c->v[i]) == R_FRAME && c->v[i].len == REC_HDR + 24)
                v[n++] = &c->v[i];
    return n ? v[below(r, n)] : NULL;
}

/* A frame's decoded bytes changed and re-encoded (in place when it fits,
 * else at the end). update: its FRAME record follows (checksums recomputed);
 * else the record keeps the old lengths and CRC (raw: reads must fail). */
static int edit_frame(rng *r, himg *h, hmut *m, int update, gmtf_codec *codec)
{
    hrec *fr = pick_frame(r, h);
    if (!fr)
        return -1;
    uint64_t off = rec_u(fr, 1);
    uint32_t clen = (uint32_t)rec_u(fr, 2), dlen = (uint32_t)rec_u(fr, 3);
    if (off > h->len || clen > h->len - off || dlen > GMTF_FS_BLOCK_MAX)
        return -1;
    uint8_t *d = malloc(dlen + 4096);
    if (!d)
        return -1;
    if (gmtf_frame_decode(codec, h->p + off, clen, d, dlen) != (long)dlen) {
        free(d);
        return -1;
    }
    uint8_t first = d[0];
    uint32_t nl = dlen;
    switch (below(r, 4)) {
    case 0: d[below(r, dlen)] ^= (uint8_t)(1 + below(r, 255)); break;
    case 1: nl = dlen > 1 ? (uint32_t)(1 + below(r, dlen - 1)) : dlen + 1; break;
    case 2:
        nl = dlen + 1 + (uint32_t)below(r, 4000);
        memset(d + dlen, 'z', nl - dlen);
        break;
    default: memset(d, (int)below(r, 256), dlen); break;
    }
    if (nl == dlen && d[0] == first && gmtf_crc32c(0, d, dlen) == (uint32_t)rec_u(fr, 4))
        d[0] ^= 1; /* always a change */
    uint8_t *f = malloc(gmtf_frame_bound(nl));
    long fl = f ? gmtf_frame_encode(codec, d, nl, f, gmtf_frame_bound(nl)) : -1;
    if (fl <= 0) {
        free(d);
        free(f);
        return -1;
    }
    uint64_t at = (uint64_t)fl <= clen ? off : h->len;
    if (at == h->len) {
        uint8_t *p = realloc(h->p, h->len + (size_t)fl);
        if (!p) {
            free(d);
            free(f);
            return -1;
        }
        h->p = p;
        h->len += (size_t)fl;
    }
    memcpy(h->p + at, f, (size_t)fl);
    if (update) {
        rec_put(fr, 1, at);
        rec_put(fr, 2, (uint64_t)fl);
        rec_put(fr, 3, nl);
        rec_put(fr, 4, gmtf_crc32c(0, d, nl));
    }
    say(m, "frame %llu at %llu: decoded bytes changed (%u -> %u bytes), re-encoded at %llu%s",
        (unsigned long long)rec_u(fr, 0), (unsigned long long)off, dlen, nl, (unsigned long long)at,
        update ? ", its record updated" : ", its record left as it was");
    free(d);
    free(f);
    return 0;
}

/* Bytes flipped without any checksum recomputed. */
static void edit_raw(rng *r, uint8_t *p, size_t len, const himg *h, hmut *m)
{
    int n = 1 + (int)below(r, 4);
    for (int i = 0; i < n; i++) {
        size_t at;
        const sb_info *sb = h->cur >= 0 ? &h->sb[h->cur] : NULL;
        switch (below(r, 4)) {
        case 0: at = below(r, SB_SLOTS * SB_SLOT_SIZE); break;
        case 1:
            at = sb && sb->snap_off < len ? sb->snap_off + below(r, sb->snap_len) : below(r, len);
            break;
        case 2:
            at =
                sb && sb->jrnl_off < len ? sb->jrnl_off + below(r, h->jr_used + 64) : below(r, len);
            break;
        default: at = below(r, len); break;
        }
        if (at >= len)
            at = below(r, len);
        uint8_t x = (uint8_t)(1u << below(r, 8));
        p[at] ^= x;
        say(m, "byte %zu ^= 0x%02x", at, x);
    }
}

void hmut_apply(const uint8_t *base, size_t len, uint64_t seed, uint8_t **out, size_t *outlen,
                hmut *m)
{
    rng r = {seed * 0x2545f4914f6cdd1dull + 7};
    memset(m, 0, sizeof *m);
    himg h;
    int parsed = himg_parse(&h, base, len) == 0;
    known k;
    if (parsed)
        learn(&h, &k);
    uint64_t kind = parsed ? below(&r, 100) : 99;
    int ok = -1;
    if (kind < 75) { /* structured edits, checksums recomputed */
        int edits = kind < 10 ? 2 + (int)below(&r, 2) : 1;
        int super = 0;
        for (int e = 0, tries = 0; e < edits && tries < 20; tries++) {
            uint64_t what = below(&r, 100);
            int rc;
            if (what < 45)
                rc = edit_field(&r, &h, &k, m);
            else if (what < 75)
                rc = edit_chunks(&r, &h, &k, m);
            else if (what < 82)
                rc = edit_headers(&r, &h, m);
            else if (what < 90)
                rc = edit_frame(&r, &h, m, 1, himg_codec());
            else {
                rc = 0;
                super++;
            }
            e += rc == 0;
        }
        if (h.sb[h.cur].version >= FMT_VERSION && below(&r, 7) == 0) {
            h.copies = 1 + (int)below(&r, 2); /* the copies differ, both valid */
            say(m, "(only copy %d of the snapshot and journal written)", h.copies);
        }
        ok = himg_build(&h);
        for (int s = 0; !ok && s < super; s++)
            if (edit_super(&r, &h, &k, m))
                say(m, "(superblock edit skipped)");
    } else if (kind < 87) { /* a frame behind the fs's back: reads must fail */
        ok = edit_frame(&r, &h, m, 0, himg_codec());
        if (!ok)
            m->raw = 1;
    }
    if (ok == 0) {
        *out = h.p;
        *outlen = h.len;
        h.p = NULL;
    } else { /* raw flips of the original */
        memset(m->what, 0, sizeof m->what);
        m->raw = 1;
        *out = malloc(len);
        memcpy(*out, base, len);
        *outlen = len;
        edit_raw(&r, *out, len, &h, m);
    }
    himg_free(&h);
}
