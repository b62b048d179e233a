/* The flush: turns dirty blocks into frames. Whole blocks become one frame
 * each; small files and file tails are sorted (extension, then name) and
 * packed together into shared frames of up to the pack size (longer
 * pieces alone, or for mkfs among themselves up to a block); identical
 * pieces are stored once (dedup). All frames of one flush are encoded as
 * one codec batch, written copy-on-write into free space and flushed
 * before the records that point at them are appended to the journal
 * buffer. */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "fs_internal.h"

#define BATCH_BYTES FLUSH_BATCH_BYTES

/* The dedup table grows with what is flushed, from DEDUP_FIRST slots (a
 * mount of a small image, or a test's hundreds of mounts, does not clear
 * 6 MiB each time) to DEDUP_SLOTS. */
#define DEDUP_FIRST (1u << 12)
#define DEDUP_SLOTS (1u << 18)

struct piece {
    struct dblock *d;
    struct inode *in;
    uint64_t hash, key;
    uint32_t len;
    int32_t group;          /* index of its frame in this flush, -1: deduplicated */
    int32_t dup_of;         /* piece whose frame it shares, -1: none */
    uint32_t goff;          /* offset inside the frame */
    uint32_t dframe;        /* frame of an earlier flush holding the same bytes */
    uint64_t ino, gen, ver; /* to recheck after an unlocked encode */
    uint32_t blk;
    struct frame dsnap; /* dframe as it was then, to recheck it */
    int valid;
    int hashed; /* hash made ahead of the cut (cut_ahead) */
};

struct group {
    uint64_t raw_off; /* in the batch source */
    uint32_t len;
    uint32_t id, clen, crc;
    uint64_t img_off;
    int used;     /* some valid piece maps it */
    int big;      /* holds pieces longer than the pack size */
    int adaptive; /* its frame takes method 3 (mkfs: long pieces, flush_pack_adaptive) */
};

static int piece_cmp(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    int xs = x->len == 0, ys = y->len == 0;
    if (xs != ys)
        return xs - ys;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->in->ino != y->in->ino)
        return x->in->ino < y->in->ino ? -1 : 1;
    return x->d->blk < y->d->blk ? -1 : x->d->blk > y->d->blk;
}

/* mkfs's order (pack_write_order): a small piece whose lines mostly match
 * an earlier one's of this flush goes right after it (fs_similar_roots),
 * the others stay as written. GMTF_PACK_SIMILAR=0: as written alone
 * (measurements). Out of memory: as written. */
static void similar_keys(struct piece *p, size_t n, unsigned threads)
{
    const char *env = getenv("GMTF_PACK_SIMILAR");
    if (env && strcmp(env, "0") == 0)
        return;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += p[i].key >= 2;
    const uint8_t **buf = malloc(m * sizeof *buf + 1);
    uint32_t *len = malloc(m * sizeof *len + 1), *idx = malloc(m * sizeof *idx + 1);
    uint32_t *root = malloc(m * sizeof *root + 1);
    if (buf && len && idx && root) {
        size_t j = 0;
        for (size_t i = 0; i < n; i++)
            if (p[i].key >= 2) {
                buf[j] = p[i].d->buf;
                len[j] = p[i].len;
                idx[j++] = (uint32_t)i;
            }
        if (fs_similar_roots(buf, len, m, threads, root) == 0)
            for (j = 0; j < m; j++)
                p[idx[j]].key = (((uint64_t)idx[root[j]] + 1) << 32) + idx[j];
    }
    free(buf);
    free(len);
    free(idx);
    free(root);
}

static int all_zero(const uint8_t *p, size_t n)
{
    static const uint8_t z[256];
    while (n >= sizeof z) {
        if (memcmp(p, z, sizeof z))
            return 0;
        p += sizeof z;
        n -= sizeof z;
    }
    return memcmp(p, z, n) == 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* An earlier frame holding exactly these bytes (verified byte by byte).
 * Not one of busy[0..nbusy) (sorted): frames that blocks of this flush map
 * now, which its records may free before the record that would use them. */
static int dedup_lookup(gmtf_fs *fs, const uint8_t *data, uint32_t len, uint64_t hash,
                        const uint32_t *busy, size_t nbusy, uint32_t *frame, uint32_t *off)
{
    if (!fs->dedup)
        return 0;
    struct dedup_ent *e = &fs->dedup[hash & (fs->dedup_cap - 1)];
    if (e->hash != hash || e->len != len || !frame_valid(fs, e->frame) ||
        bsearch(&e->frame, busy, nbusy, sizeof *busy, u32_cmp) ||
        fs->frames[e->frame].live * 2 < fs->frames[e->frame].dlen || /* being compacted */
        (uint64_t)e->off + len > fs->frames[e->frame].dlen)
        return 0;
    uint8_t *tmp = malloc(len);
    if (!tmp)
        return 0;
    int same = frame_copy(fs, e->frame, 0, 0, e->off, len, tmp, 0) == 0 && !memcmp(tmp, data, len);
    free(tmp);
    if (same) {
        *frame = e->frame;
        *off = e->off;
    }
    return same;
}

/* Makes the table cap slots, keeping what it holds. */
static void dedup_grow(gmtf_fs *fs, size_t cap)
{
    struct dedup_ent *t = calloc(cap, sizeof *t);
    if (!t)
        return; /* the old table (if any) goes on */
    for (size_t i = 0; i < fs->dedup_cap; i++)
        if (fs->dedup[i].len)
            t[fs->dedup[i].hash & (cap - 1)] = fs->dedup[i];
    free(fs->dedup);
    fs->dedup = t;
    fs->dedup_cap = cap;
    fs->dedup_n = 0;
}

static void dedup_insert(gmtf_fs *fs, uint64_t hash, uint32_t frame, uint32_t off, uint32_t len)
{
    if (!fs->dedup)
        dedup_grow(fs, DEDUP_FIRST);
    else if (fs->dedup_n >= fs->dedup_cap / 2 && fs->dedup_cap < DEDUP_SLOTS)
        dedup_grow(fs, fs->dedup_cap * 4);
    if (!fs->dedup)
        return;
    fs->dedup[hash & (fs->dedup_cap - 1)] = (struct dedup_ent){hash, frame, off, len};
    fs->dedup_n++;
}

/* Encodes groups g[0..n) whose bytes lie back to back in src, on codec
 * c (NULL: the filesystem's, under its lock). */
static int encode_groups(gmtf_fs *fs, gmtf_codec *c, struct group *g, size_t n, const uint8_t *src,
                         uint8_t **dstp, uint64_t **doffp)
{
    uint64_t *off = malloc((n + 1) * sizeof *off), *doff = malloc((n + 1) * sizeof *doff);
    uint32_t *crc = malloc(n * sizeof *crc);
    uint8_t *adaptive = malloc(n), *dst = NULL;
    int rc = -ENOMEM;
    if (!off || !doff || !crc || !adaptive)
        goto out;
    uint64_t base = g[0].raw_off;
    for (size_t i = 0; i < n; i++) {
        off[i] = g[i].raw_off - base;
        adaptive[i] = (uint8_t)g[i].adaptive;
    }
    off[n] = g[n - 1].raw_off + g[n - 1].len - base;
    rc = c ? codec_encode_on(fs, c, src, off, n, &dst, doff, crc, adaptive)
           : codec_encode(fs, src, off, n, &dst, doff, crc, adaptive);
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        g[i].clen = (uint32_t)(doff[i + 1] - doff[i]);
        g[i].crc = crc[i];
    }
out:
    free(off);
    free(crc);
    free(adaptive);
    if (rc) {
        free(doff);
        free(dst);
        return rc;
    }
    *dstp = dst;
    *doffp = doff;
    return 0;
}

/* Allocates space for the encoded groups and writes them: dst holds the
 * frame of g[0] first, doff their offsets (from any base). */
static int store_groups(gmtf_fs *fs, struct group *g, size_t n, const uint8_t *dst,
                        const uint64_t *doff)
{
    int rc;
    const uint64_t base = doff[0], total = doff[n] - base;
    /* One contiguous extent when possible: one write, frames read in order. */
    uint64_t at;
    if (alloc_space(fs, total, &at) == 0) {
        rc = img_write(fs, dst, total, at);
        if (rc)
            alloc_release_now(fs, at, total);
        for (size_t i = 0; i < n && !rc; i++)
            g[i].img_off = at + doff[i] - base;
        return rc;
    }
    size_t i;
    rc = 0;
    for (i = 0; i < n; i++) {
        rc = alloc_space(fs, g[i].clen, &g[i].img_off);
        if (!rc) {
            rc = img_write(fs, dst + doff[i] - base, g[i].clen, g[i].img_off);
            if (rc)
                alloc_release_now(fs, g[i].img_off, g[i].clen);
        }
        if (rc)
            break;
    }
    for (size_t k = 0; rc && k < i; k++)
        alloc_release_now(fs, g[k].img_off, g[k].clen);
    return rc;
}

/* Is frame id still the frame snapshotted before the lock was dropped? Its
 * id may have been freed and handed to a new frame meanwhile, even one at
 * the same offset (first fit reuses freed space): compare all it is. */
static int frame_unchanged(gmtf_fs *fs, uint32_t id, const struct frame *then)
{
    if (!frame_valid(fs, id))
        return 0;
    const struct frame *f = &fs->frames[id];
    return f->off == then->off && f->clen == then->clen && f->dlen == then->dlen &&
           f->crc == then->crc;
}

/* Is piece p still what was copied? (After an unlocked encode: the block
 * may have been written, truncated, dropped, or its inode deleted.) */
static int piece_still_valid(gmtf_fs *fs, const struct piece *p)
{
    struct inode *in = inode_get(fs, p->ino);
    struct dblock *d = dirty_find(fs, p->ino, p->blk);
    if (!in || in->gen != p->gen || !S_ISREG(in->mode) || d != p->d || d->ver != p->ver)
        return 0;
    uint64_t start = (uint64_t)p->blk * fs->bs;
    return start < in->size && p->len <= in->size - start;
}

/* Notes what each piece is now, to recheck it after an unlocked encode. */
static void pieces_note(struct piece *p, size_t np)
{
    for (size_t i = 0; i < np; i++) {
        p[i].ino = p[i].in->ino;
        p[i].gen = p[i].in->gen;
        p[i].blk = p[i].d->blk;
        p[i].ver = p[i].d->ver;
    }
}

/* The earlier frames that dedup_lookup may read to compare bytes, decoded
 * ahead in batches (on the codec's threads or its GPU) rather than one by
 * one as the pieces meet them, as many as half the cache holds. The same
 * lookups follow: only faster. */
static void dedup_prefetch(gmtf_fs *fs, const struct piece *p, size_t np, const uint32_t *busy,
                           size_t nbusy)
{
    if (!fs->dedup || np < 2)
        return;
    uint32_t *ids = malloc(np * sizeof *ids);
    if (!ids)
        return;
    size_t n = 0;
    for (size_t i = 0; i < np; i++) {
        const struct dedup_ent *e = &fs->dedup[p[i].hash & (fs->dedup_cap - 1)];
        if (e->hash == p[i].hash && e->len == p[i].len && frame_valid(fs, e->frame) &&
            !bsearch(&e->frame, busy, nbusy, sizeof *busy, u32_cmp) &&
            fs->frames[e->frame].live * 2 >= fs->frames[e->frame].dlen)
            ids[n++] = e->frame;
    }
    qsort(ids, n, sizeof *ids, u32_cmp);
    size_t u = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (u && ids[u - 1] == ids[i])
            continue;
        bytes += fs->frames[ids[i]].dlen;
        if (bytes > fs->cache_limit / 2)
            break;
        ids[u++] = ids[i];
    }
    for (size_t i = 0; u > 1 && i < u; i += 64)
        (void)frames_prefetch(fs, ids + i, u - i < 64 ? u - i : 64); /* errors: the lookup's */
    free(ids);
}

/* Finds pieces stored already: inside this flush (dup_of), then in earlier
 * frames (group -1, dframe), but not in a frame that a block of this flush
 * maps now: the records go out in piece order, and the one remapping that
 * block may drop the frame's last reference before the one that would take
 * a new one (replay would then meet a freed frame too). */
static int pieces_dedup(gmtf_fs *fs, struct piece *p, size_t np)
{
    uint32_t *busy = malloc((np + 1) * sizeof *busy);
    if (!busy)
        return -ENOMEM;
    size_t nbusy = 0;
    for (size_t i = 0; i < np; i++) {
        struct fref *e = blockmap_find(p[i].in, p[i].d->blk);
        if (e && e->frame)
            busy[nbusy++] = e->frame;
    }
    qsort(busy, nbusy, sizeof *busy, u32_cmp);
    /* Inside the flush: the nearest of the 4096 pieces before that is
     * stored itself (not a duplicate, not in an earlier frame) and holds
     * the same bytes. Such pieces are chained by hash slot, latest first,
     * so the first match on a chain is that nearest one. */
    size_t cap = 64;
    while (cap < 2 * np)
        cap *= 2;
    int32_t *head = malloc(cap * sizeof *head), *next = malloc((np + 1) * sizeof *next);
    if (!head || !next) {
        free(head);
        free(next);
        free(busy);
        return -ENOMEM;
    }
    memset(head, 0xff, cap * sizeof *head);
    for (size_t i = 0; i < np; i++)
        if (!p[i].hashed)
            p[i].hash = hash_bytes(p[i].d->buf, p[i].len, 0);
    dedup_prefetch(fs, p, np, busy, nbusy);
    for (size_t i = 0; i < np; i++) {
        size_t slot = (size_t)(p[i].hash ^ p[i].hash >> 32) & (cap - 1);
        for (int32_t j = head[slot]; j >= 0 && i - (size_t)j < 4096; j = next[j])
            if (p[j].hash == p[i].hash && p[j].len == p[i].len &&
                !memcmp(p[j].d->buf, p[i].d->buf, p[i].len)) {
                p[i].dup_of = j;
                break;
            }
        if (p[i].dup_of < 0 && dedup_lookup(fs, p[i].d->buf, p[i].len, p[i].hash, busy, nbusy,
                                            &p[i].dframe, &p[i].goff)) {
            p[i].group = -1;
            p[i].dsnap = fs->frames[p[i].dframe];
        }
        if (p[i].dup_of < 0 && p[i].group != -1) {
            next[i] = head[slot];
            head[slot] = (int32_t)i;
        }
    }
    free(head);
    free(next);
    free(busy);
    return 0;
}

/* The cost cap of mkfs's packs (docs/format.md, "Pack size"): a frame of
 * small pieces closes when its pieces times its bytes would pass this, or
 * its bytes a block. A cold read of a random file decodes its file's whole
 * frame (range reads too: the entropy decoding of the whole frame is most
 * of their CPU), so the mean over files of that cost is the mean of the
 * frames' bytes weighted by their pieces: cutting by pieces x bytes puts
 * many small files in small frames and few larger ones in larger frames,
 * which compress better, at the same mean cost. The cap: F pieces x 4 MiB
 * at 4 MiB packs (F = FLUSH_PACK_COST_DEFAULT, GMTF_PACK_COST=F for
 * measurements), scaled with the square of the pack size (a frame of the
 * same files' density then grows with the pack). 0: none, packs of at most
 * the pack size as before (a mount's writes, GMTF_PACK_COST=0, a pack as
 * large as the block). */
uint64_t flush_pack_cost_cap(const gmtf_fs *fs)
{
    if (!fs->opt.pack_write_order || fs->ps >= fs->bs)
        return 0;
    uint64_t f = FLUSH_PACK_COST_DEFAULT;
    const char *e = getenv("GMTF_PACK_COST");
    if (e && *e)
        f = strtoull(e, NULL, 10);
    return f * fs->ps * (fs->ps / 4096) / 1024;
}

/* Method 3 for mkfs's frames of long pieces (docs/format.md "Pack size",
 * "Method 3 for frames of long pieces"): with the cost cap on
 * (flush_pack_cost_cap: mkfs, packs below the block) the frames of pieces
 * longer than the pack size (a whole block, the tails and files between a
 * pack and a block, packed among themselves) take method 3 whatever the
 * method rule says (gmtf_batch_encode_hint). A cold read of a random file
 * pays for a frame's decoding once per file it holds, the image for its
 * bytes once: such a frame holds a few files of the thousands, so method
 * 3's smaller output costs the mean read almost nothing there, while in a
 * pack of hundreds of small files it costs six times the decoding for
 * each. GMTF_PACK_ADAPTIVE=0 turns it off (measurements). */
int flush_pack_adaptive(const gmtf_fs *fs)
{
    if (!flush_pack_cost_cap(fs))
        return 0;
    const char *e = getenv("GMTF_PACK_ADAPTIVE");
    return !(e && strcmp(e, "0") == 0);
}

/* Cuts the pieces to store into groups, one frame each: whole blocks
 * alone; pieces of at most the pack size packed in sort order into frames
 * of at most the pack size (a cold read of a small file decodes no more),
 * or, packing in write order (mkfs) with a pack below the block, into
 * frames of up to a block while pieces x bytes stay within the cost cap
 * (flush_pack_cost_cap); longer pieces (tails of large files, files shorter
 * than a block but longer than a pack) packed among themselves into
 * frames of at most a block when packing in write order (mkfs: an
 * archive's similar large files gain by sharing frames), else alone (a
 * live filesystem: deleting such a file frees its frame; no half-dead
 * frame of a block waits for compaction). Only the pieces' lengths and
 * order decide: images stay reproducible. Returns the group count. */
static size_t pieces_group(gmtf_fs *fs, struct piece *p, size_t np, struct group *g)
{
    size_t ng = 0;
    uint64_t raw = 0, cap = flush_pack_cost_cap(fs), n = 0; /* n: pieces of the last group */
    int adaptive = flush_pack_adaptive(fs);
    for (size_t i = 0; i < np; i++) {
        if (p[i].dup_of >= 0 || p[i].group == -1)
            continue;
        int big = p[i].len > fs->ps;
        int alone = p[i].len == fs->bs || (big && !fs->opt.pack_write_order);
        uint32_t lim = big || cap ? fs->bs : fs->ps;
        if (alone || ng == 0 || g[ng - 1].len == fs->bs || g[ng - 1].big != big ||
            g[ng - 1].len + p[i].len > lim ||
            (!big && cap && (n + 1) * (g[ng - 1].len + p[i].len) > cap)) {
            /* mkfs: every frame of long pieces or of a whole block takes
             * method 3 (flush_pack_adaptive) */
            g[ng] =
                (struct group){.raw_off = raw, .len = 0, .big = big, .adaptive = adaptive && big};
            ng++;
            n = 0;
        }
        p[i].group = (int32_t)(ng - 1);
        p[i].goff = g[ng - 1].len;
        g[ng - 1].len += p[i].len;
        raw += p[i].len;
        n++;
    }
    return ng;
}

/* The end of the sub-batch that starts at group k: groups while their
 * bytes fit BATCH_BYTES (one at least). */
static size_t sub_batch_end(const struct group *g, size_t ng, size_t k, uint64_t *bytes)
{
    size_t e = k;
    uint64_t n = 0;
    while (e < ng && (e == k || n + g[e].len <= BATCH_BYTES))
        n += g[e++].len;
    *bytes += n;
    return e;
}

/* The most bytes one codec call of a flush encodes: mkfs (no_flush)
 * encodes sub-batches together, up to FLUSH_MKFS_ENCODE_BYTES (the whole
 * flush of its 256 MiB cache: on a GPU one batch of 256 MiB codes in far
 * less time than four of 64, whose device steps each wait on their slowest
 * blocks), and stores them one by one as before: the same allocations, the
 * same image. */
static uint64_t flush_span(const gmtf_fs *fs, int unlocked)
{
    uint64_t span = !unlocked && fs->opt.no_flush ? FLUSH_MKFS_ENCODE_BYTES : BATCH_BYTES;
    const char *e = getenv("GMTF_MKFS_ENCODE_MIB"); /* measurements: 64 = as before */
    if (span != BATCH_BYTES && e && *e)
        span = (uint64_t)strtoul(e, NULL, 10) << 20;
    return span;
}

/* The end of the round (one codec call) that starts at group done: whole
 * sub-batches while the round's bytes stay within span; *bytes gets them. */
static size_t round_end(const struct group *g, size_t ng, size_t done, uint64_t span,
                        uint64_t *bytes)
{
    *bytes = 0;
    size_t k = sub_batch_end(g, ng, done, bytes);
    while (k < ng) {
        uint64_t more = *bytes;
        size_t e = sub_batch_end(g, ng, k, &more);
        if (more > span)
            break;
        *bytes = more;
        k = e;
    }
    return k;
}

/* Copies the pieces of groups [.., k) from *pi on into src (the bytes of
 * the round that starts at group done). */
static void round_copy(const struct piece *p, size_t np, size_t *pi, const struct group *g,
                       size_t done, size_t k, uint8_t *src)
{
    uint64_t base = g[done].raw_off;
    for (; *pi < np; (*pi)++) {
        const struct piece *q = &p[*pi];
        if (q->dup_of >= 0 || q->group < 0)
            continue;
        if ((size_t)q->group >= k)
            break;
        memcpy(src + g[q->group].raw_off - base + q->goff, q->d->buf, q->len);
    }
}

/* Stores a round's groups [*done, k) sub-batch by sub-batch, as they were
 * encoded before (dst and doff from encode_groups for groups from first). */
static int round_store(gmtf_fs *fs, struct group *g, size_t ng, size_t *done, size_t k,
                       size_t first, const uint8_t *dst, const uint64_t *doff)
{
    int rc = 0;
    while (!rc && *done < k) {
        uint64_t unused = 0;
        size_t e = sub_batch_end(g, ng, *done, &unused);
        rc = store_groups(fs, g + *done, e - *done, dst + doff[*done - first],
                          doff + (*done - first));
        if (!rc)
            *done = e;
    }
    return rc;
}

/* Encodes and writes the groups in rounds, copying only one round's
 * pieces at a time: memory stays at the dirty cache plus one round in and
 * out. unlocked: one sub-batch only, encoded without the lock. *stored
 * gets the number of groups written (all, unless unlocked); on failure
 * nothing stays allocated. */
static int groups_encode_store(gmtf_fs *fs, struct piece *p, size_t np, struct group *g, size_t ng,
                               int unlocked, size_t *stored)
{
    int rc = 0;
    size_t done = 0, pi = 0;
    uint64_t span = flush_span(fs, unlocked);
    while (!rc && done < ng) {
        if (unlocked && done) /* dblocks may be gone now: one round only */
            break;
        uint64_t bytes;
        size_t k = round_end(g, ng, done, span, &bytes);
        uint8_t *src = malloc(bytes);
        if (!src) {
            rc = -ENOMEM;
            break;
        }
        round_copy(p, np, &pi, g, done, k, src);
        if (unlocked) {
            /* Everything this round needs is copied: let readers and other
             * writers in while the codec works. One round = one sub-batch. */
            for (size_t i = 0; i < np; i++)
                p[i].d->inflight = 1;
            FS_UNLOCK(fs);
        }
        uint8_t *dst = NULL;
        uint64_t *doff = NULL;
        rc = encode_groups(fs, NULL, g + done, k - done, src, &dst, &doff);
        if (unlocked) {
            FS_WRLOCK(fs);
            for (size_t i = 0; i < np; i++)
                if (dirty_find(fs, p[i].ino, p[i].blk) == p[i].d)
                    p[i].d->inflight = 0;
        }
        free(src);
        if (!rc)
            rc = round_store(fs, g, ng, &done, k, done, dst, doff);
        free(dst);
        free(doff);
        if (rc) { /* give back what earlier sub-batches took */
            for (size_t i = 0; i < done; i++)
                alloc_release_now(fs, g[i].img_off, g[i].clen);
            break;
        }
    }
    *stored = rc ? 0 : done;
    return rc;
}

/* Which pieces still hold (always all, unless the lock was dropped), and
 * which stored groups a valid piece maps; the others' space is free again. */
static void pieces_recheck(gmtf_fs *fs, struct piece *p, size_t np, struct group *g, size_t ng,
                           size_t stored, int unlocked)
{
    for (size_t i = 0; i < np; i++) {
        int32_t gi = p[i].dup_of >= 0 ? p[p[i].dup_of].group : p[i].group;
        p[i].valid = (gi < 0 || (size_t)gi < stored) && (!unlocked || piece_still_valid(fs, &p[i]));
        if (p[i].valid && p[i].group == -1) /* the earlier frame must be unchanged */
            p[i].valid = frame_unchanged(fs, p[i].dframe, &p[i].dsnap);
        if (p[i].valid && p[i].dup_of >= 0) {
            struct piece *q = &p[p[i].dup_of];
            if (q->group == -1)
                p[i].valid = frame_unchanged(fs, q->dframe, &q->dsnap);
        }
    }
    for (size_t i = 0; i < ng; i++)
        g[i].used = 0;
    for (size_t i = 0; i < np; i++) {
        if (!p[i].valid)
            continue;
        int32_t gi = p[i].dup_of >= 0 ? p[p[i].dup_of].group : p[i].group;
        if (gi >= 0)
            g[gi].used = 1;
    }
    for (size_t i = 0; i < stored; i++)
        if (!g[i].used) /* written but nobody maps it now: plain free space */
            alloc_release_now(fs, g[i].img_off, g[i].clen);
}

static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* Everything the records of this flush need, taken before the first one:
 * journal buffer room, frame table room, block map room for each newly
 * mapped block. Then no record fails halfway (a FRAME record no EXT
 * follows would leave a frame that replay cannot tell from a reused id). */
static int pieces_reserve(gmtf_fs *fs, struct piece *p, size_t np, size_t nframes)
{
    int rc = rec_reserve(fs, (nframes + np) * REC_SMALL_MAX);
    if (!rc)
        rc = frame_reserve(fs, (uint32_t)nframes);
    struct inode **v = rc ? NULL : malloc((np + 1) * sizeof *v);
    if (!rc && !v)
        rc = -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; !rc && i < np; i++) {
        struct inode *in = p[i].valid ? inode_get(fs, p[i].ino) : NULL;
        if (in && !blockmap_find(in, p[i].blk))
            v[n++] = in;
    }
    if (!rc)
        qsort(v, n, sizeof *v, ptr_cmp);
    for (size_t i = 0; !rc && i < n;) {
        size_t k = i;
        while (k < n && v[k] == v[i])
            k++;
        rc = blockmap_reserve(v[i], (uint32_t)(k - i));
        i = k;
    }
    free(v);
    return rc;
}

/* Makes the stored frames durable, then records them and every valid
 * piece's new mapping; those pieces leave the write-back cache. When the
 * device flush fails (or the records' room cannot be had), nothing is
 * recorded, the pieces stay dirty and the frames' space is free again at
 * once: nothing leaks until remount. */
static int pieces_record(gmtf_fs *fs, struct piece *p, size_t np, struct group *g, size_t ng,
                         size_t stored, int detached)
{
    size_t nframes = 0;
    for (size_t i = 0; i < stored; i++)
        nframes += g[i].used;
    int rc = ng ? img_flush(fs) : 0; /* frames durable before any record names them */
    if (!rc)
        rc = pieces_reserve(fs, p, np, nframes);
    if (rc) {
        for (size_t i = 0; i < stored; i++) /* named by no record */
            if (g[i].used)
                alloc_release_now(fs, g[i].img_off, g[i].clen);
        return rc;
    }
    for (size_t i = 0; !rc && i < stored; i++) {
        if (!g[i].used)
            continue;
        rc = frame_new_id(fs, &g[i].id);
        if (!rc)
            rc = rec_frame(fs, g[i].id, g[i].img_off, g[i].clen, g[i].len, g[i].crc);
    }
    for (size_t i = 0; !rc && i < np; i++) {
        if (!p[i].valid)
            continue; /* changed meanwhile: stays dirty for the next flush */
        uint32_t frame, off = p[i].goff;
        int alone = 0;
        if (p[i].dup_of >= 0) {
            struct piece *q = &p[p[i].dup_of];
            frame = q->group >= 0 ? g[q->group].id : q->dframe;
            off = q->goff;
        } else if (p[i].group >= 0) {
            frame = g[p[i].group].id;
            dedup_insert(fs, p[i].hash, frame, off, p[i].len);
            alone = off == 0 && p[i].len == g[p[i].group].len; /* the frame holds it alone */
        } else {
            frame = p[i].dframe;
        }
        rc = rec_ext(fs, p[i].ino, p[i].blk, frame, off, p[i].len);
        /* The block's bytes go to the decoded frames' cache: its buffer
         * itself where the block leaves the write-back cache now (or left
         * it at the cut, detached), not a copy (~16 MiB a block) */
        if (alone && (detached || !rc))
            cache_put_own(fs, frame, &p[i].d->buf, p[i].d->cap, p[i].len);
        else if (alone)
            cache_put(fs, frame, p[i].d->buf, p[i].len);
        if (!rc && !detached) /* (detached: out of the cache since the cut) */
            dirty_drop(fs, p[i].d);
    }
    return rc;
}

/* GMTF_FLUSH_PROFILE=1: one line a flush on stderr, its phases in ms
 * (measurements, docs/gpu.md). */
static double flush_prof_ms(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("GMTF_FLUSH_PROFILE");
        on = e && *e == '1';
    }
    if (!on)
        return -1;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int job_start(gmtf_fs *fs, struct piece *p, size_t np, struct group *g, size_t ng);

/* Flushes the pieces; with async (FLUSH_ASYNC, allowed) the encode may go
 * to a thread: then *taken is set, and the job owns p. */
static int flush_pieces(gmtf_fs *fs, struct piece *p, size_t np, int unlocked, int async,
                        int *taken)
{
    double t0 = flush_prof_ms(), t1 = t0, t2 = t0;
    pieces_note(p, np);
    int rc = pieces_dedup(fs, p, np);
    if (rc)
        return rc;
    struct group *g = malloc((np + 1) * sizeof *g);
    if (!g)
        return -ENOMEM;
    size_t ng = pieces_group(fs, p, np, g), stored;
    if (t0 >= 0)
        t1 = flush_prof_ms();
    if (async && job_start(fs, p, np, g, ng)) {
        *taken = 1;
        if (t0 >= 0) {
            /* the frames' sizes: the device's lanes are as long as a frame's 32nd */
            size_t nbig = 0, npack = 0;
            uint64_t big = 0, most = 0;
            for (size_t i = 0; i < ng; i++) {
                nbig += g[i].len > fs->ps;
                big += g[i].len > fs->ps ? g[i].len : 0;
                npack += g[i].len > fs->ps / 2 && g[i].len <= fs->ps;
                most = g[i].len > most ? g[i].len : most;
            }
            fprintf(stderr,
                    "flush profile: %zu pieces, %zu frames, %llu bytes: dedup+group %.1f ms, "
                    "encoding on a thread; frames over the pack size %zu (%llu bytes), "
                    "over half a pack %zu, the longest %llu\n",
                    np, ng, ng ? (unsigned long long)(g[ng - 1].raw_off + g[ng - 1].len) : 0ull,
                    t1 - t0, nbig, (unsigned long long)big, npack, (unsigned long long)most);
        }
        return 0;
    }
    rc = groups_encode_store(fs, p, np, g, ng, unlocked, &stored);
    if (t0 >= 0)
        t2 = flush_prof_ms();
    if (!rc) {
        pieces_recheck(fs, p, np, g, ng, stored, unlocked);
        rc = pieces_record(fs, p, np, g, ng, stored, 0);
    }
    if (t0 >= 0)
        fprintf(stderr,
                "flush profile: %zu pieces, %zu frames, %llu bytes: dedup+group %.1f, "
                "copy+encode+store %.1f, record %.1f ms\n",
                np, ng, ng ? (unsigned long long)(g[ng - 1].raw_off + g[ng - 1].len) : 0ull,
                t1 - t0, t2 - t1, flush_prof_ms() - t2);
    free(g);
    return rc;
}

/* ---- async_flush (mkfs): the encode on a thread beside the writer ---- */

/* A flush cut and encoding on its thread. Its pieces' dirty blocks left
 * the write-back cache at the cut (detached, still holding their bytes);
 * flush_join stores and records it as the flush would have at the cut. */
struct flush_job {
    gmtf_fs *fs;
    struct piece *p;
    size_t np;
    struct group *g;
    size_t ng;
    struct round {
        size_t first, end; /* groups [first, end) */
        uint8_t *dst;
        uint64_t *doff;
    } * r;
    size_t nr;
    int rc, threaded;
    pthread_t th;
    uint32_t *tab; /* (ino, blk) -> piece index + 1, open addressing */
    size_t tcap;
    uint64_t span, bound;
    double enc_ms;  /* the thread's copy + encode (GMTF_FLUSH_PROFILE) */
    double copy_ms; /* its copies */
};

static size_t job_slot(const struct flush_job *j, uint64_t ino, uint32_t blk)
{
    uint64_t h = (ino * 0x9e3779b97f4a7c15ull) ^ (blk * 0xbf58476d1ce4e5b9ull);
    return (size_t)(h ^ (h >> 31)) & (j->tcap - 1);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The CPU codec's part of a split round, on a thread of its own. */
struct split_part {
    gmtf_fs *fs;
    struct group *g;
    size_t n;
    const uint8_t *src;
    uint8_t *dst;
    uint64_t *doff;
    int rc;
    double ms;
};

static void *split_run(void *arg)
{
    struct split_part *s = arg;
    double t0 = now_ms();
    s->rc = encode_groups(s->fs, s->fs->split_codec, s->g, s->n, s->src, &s->dst, &s->doff);
    s->ms = now_ms() - t0;
    return NULL;
}

/* Encodes a round's groups [done, k) (bytes in src). GMTF_MKFS_SPLIT=1
 * (measurements; off by default): with the codec on a GPU the host's cores
 * code the round's last groups beside it with a CPU codec, a share of the
 * bytes by the last round's speeds; the frames are the same whichever codes
 * a block. On the H100 host it lost (docs/gpu.md, mkfs10: the whole tar in
 * 7.214 s against 6.285 s with the GPU alone; the CPU codec's 16 threads
 * beside the GPU codec's own host work and the import slowed both). */
static int job_encode(struct flush_job *j, size_t done, size_t k, const uint8_t *src, uint8_t **dst,
                      uint64_t **doff)
{
    gmtf_fs *fs = j->fs;
    const char *e = getenv("GMTF_MKFS_SPLIT");
    int split = e && *e == '1';
    if (split) {
        pthread_mutex_lock(&fs->codec_lock);
        split = gmtf_codec_batch_device(fs->codec);
        pthread_mutex_unlock(&fs->codec_lock);
    }
    if (split && !fs->split_codec) {
        gmtf_codec_options co = {.threads = gmtf_codec_threads(fs->codec),
                                 .mtf = "simd",
                                 .gpus = fs->opt.gpus,
                                 .max_block = fs->bs};
        if (gmtf_codec_create(&fs->split_codec, &co))
            fs->split_codec = NULL;
        fs->split_share = 0.15;
    }
    struct group *g = j->g;
    uint64_t total = g[k - 1].raw_off + g[k - 1].len - g[done].raw_off, cpu = 0;
    size_t m = k; /* the CPU codes [m, k) */
    while (split && fs->split_codec && m > done + 1 &&
           cpu + g[m - 1].len <= (uint64_t)(fs->split_share * (double)total)) {
        cpu += g[m - 1].len;
        m--;
    }
    if (m == k)
        return encode_groups(fs, NULL, g + done, k - done, src, dst, doff);
    struct split_part sp = {
        .fs = fs, .g = g + m, .n = k - m, .src = src + (g[m].raw_off - g[done].raw_off)};
    pthread_t th;
    int threaded = pthread_create(&th, NULL, split_run, &sp) == 0;
    double t0 = now_ms();
    uint8_t *ga = NULL;
    uint64_t *da = NULL;
    int rc = encode_groups(fs, NULL, g + done, m - done, src, &ga, &da);
    double gpu_ms = now_ms() - t0;
    if (threaded)
        pthread_join(th, NULL);
    else
        split_run(&sp);
    if (!rc)
        rc = sp.rc;
    /* one buffer and offsets for the round, as one call would give */
    size_t na = m - done, nb = k - m;
    uint64_t la = rc ? 0 : da[na] - da[0], lb = rc ? 0 : sp.doff[nb] - sp.doff[0];
    uint8_t *out = rc ? NULL : malloc(la + lb + 1);
    uint64_t *off = rc ? NULL : malloc((na + nb + 1) * sizeof *off);
    if (!rc && (!out || !off))
        rc = -ENOMEM;
    if (!rc) {
        memcpy(out, ga + da[0], la);
        memcpy(out + la, sp.dst + sp.doff[0], lb);
        for (size_t i = 0; i <= na; i++)
            off[i] = da[i] - da[0];
        for (size_t i = 1; i <= nb; i++)
            off[na + i] = la + sp.doff[i] - sp.doff[0];
        /* the next share: each side's bytes a millisecond */
        double rg = (double)(total - cpu) / (gpu_ms > 1 ? gpu_ms : 1);
        double rcpu = (double)cpu / (sp.ms > 1 ? sp.ms : 1);
        fs->split_share = rcpu / (rg + rcpu);
        if (fs->split_share > 0.5)
            fs->split_share = 0.5;
        if (getenv("GMTF_FLUSH_PROFILE"))
            fprintf(stderr,
                    "flush profile: split round: GPU %llu bytes %.1f ms, CPU %llu bytes %.1f ms; "
                    "next share %.3f\n",
                    (unsigned long long)(total - cpu), gpu_ms, (unsigned long long)cpu, sp.ms,
                    fs->split_share);
    }
    free(ga);
    free(da);
    free(sp.dst);
    free(sp.doff);
    if (rc) {
        free(out);
        free(off);
        return rc;
    }
    *dst = out;
    *doff = off;
    return 0;
}

/* A job's round buffer: the filesystem's, kept from job to job (one job
 * at a time: the next cut joins the last first), so that its pages are
 * not faulted in and zeroed again each flush (a window of ~220 MB: tens
 * of ms); NULL on -ENOMEM. */
static uint8_t *job_src(gmtf_fs *fs, uint64_t bytes)
{
    if (bytes <= fs->job_src_cap && fs->job_src)
        return fs->job_src;
    free(fs->job_src);
    fs->job_src_cap = 0;
    fs->job_src = malloc(bytes ? bytes : 1);
    if (fs->job_src) {
        fs->job_src_cap = bytes;
#ifdef MADV_HUGEPAGE
        if (bytes >= (4u << 20))
            (void)madvise((void *)(((uintptr_t)fs->job_src + 4095) & ~(uintptr_t)4095),
                          (bytes - 4096) & ~(uint64_t)4095, MADV_HUGEPAGE);
#endif
    }
    return fs->job_src;
}

/* The round's copy in parts on threads (a window of ~220 MB took ~0.1 s
 * on one): pieces [pi, pe) of groups [done, k), cut by bytes. */
#define COPY_PARTS 8
#define COPY_PART_MIN (8u << 20)

struct copy_part {
    const struct piece *p;
    size_t i0, i1;
    const struct group *g;
    size_t done, k;
    uint8_t *src;
    pthread_t th;
    int started;
};

static void *copy_part_run(void *arg)
{
    struct copy_part *c = arg;
    size_t i = c->i0;
    round_copy(c->p, c->i1, &i, c->g, c->done, c->k, c->src);
    return NULL;
}

static void round_copy_par(const struct piece *p, size_t np, size_t *pi, const struct group *g,
                           size_t done, size_t k, uint8_t *src, uint64_t bytes)
{
    size_t pe = *pi;
    while (pe < np && !(p[pe].dup_of < 0 && p[pe].group >= 0 && (size_t)p[pe].group >= k))
        pe++;
    unsigned parts = (unsigned)(bytes / COPY_PART_MIN);
    parts = parts < 1 ? 1 : parts > COPY_PARTS ? COPY_PARTS : parts;
    struct copy_part c[COPY_PARTS];
    uint64_t at = 0, per = bytes / parts + 1;
    size_t i = *pi;
    for (unsigned t = 0; t < parts; t++) {
        c[t] = (struct copy_part){.p = p, .i0 = i, .g = g, .done = done, .k = k, .src = src};
        while (i < pe && (t + 1 == parts || at < per * (t + 1))) {
            if (p[i].dup_of < 0 && p[i].group >= 0)
                at += p[i].len;
            i++;
        }
        c[t].i1 = i;
        c[t].started = t > 0 && pthread_create(&c[t].th, NULL, copy_part_run, &c[t]) == 0;
    }
    for (unsigned t = 0; t < parts; t++)
        if (!c[t].started)
            copy_part_run(&c[t]);
    for (unsigned t = 0; t < parts; t++)
        if (c[t].started)
            pthread_join(c[t].th, NULL);
    *pi = pe;
}

/* The thread: each round's pieces copied and encoded. Touches no state of
 * the filesystem but the codecs (the filesystem's under its lock), the
 * split's share and the round buffer. */
static void *job_run(void *arg)
{
    struct flush_job *j = arg;
    double t0 = flush_prof_ms(), tc = 0;
    size_t done = 0, pi = 0;
    while (!j->rc && done < j->ng) {
        uint64_t bytes;
        size_t k = round_end(j->g, j->ng, done, j->span, &bytes);
        uint8_t *src = job_src(j->fs, bytes), *dst = NULL;
        uint64_t *doff = NULL;
        if (!src) {
            j->rc = -ENOMEM;
            break;
        }
        double c0 = flush_prof_ms();
        round_copy_par(j->p, j->np, &pi, j->g, done, k, src, bytes);
        if (c0 >= 0)
            tc += flush_prof_ms() - c0;
        j->rc = job_encode(j, done, k, src, &dst, &doff);
        if (!j->rc)
            j->r[j->nr++] = (struct round){done, k, dst, doff};
        done = k;
    }
    if (t0 >= 0) {
        j->enc_ms = flush_prof_ms() - t0;
        j->copy_ms = tc;
    }
    return NULL;
}

static void job_free(gmtf_fs *fs, struct flush_job *j)
{
    (void)fs;
    for (size_t i = 0; i < j->nr; i++) {
        free(j->r[i].dst);
        free(j->r[i].doff);
    }
    for (size_t i = 0; i < j->np; i++)
        dirty_free(j->p[i].d);
    free(j->r);
    free(j->tab);
    free(j->g);
    free(j->p);
    free(j);
}

/* The bytes and length that (ino, blk) will be mapped to when the flush
 * encoding on its thread is stored, or NULL: dirty_get's read of a block
 * that flush took, through fs->pend_block. */
static const uint8_t *flush_pending_block(gmtf_fs *fs, uint64_t ino, uint32_t blk, uint32_t *len)
{
    const struct flush_job *j = fs->pend;
    if (!j)
        return NULL;
    for (size_t s = job_slot(j, ino, blk); j->tab[s]; s = (s + 1) & (j->tcap - 1)) {
        const struct piece *q = &j->p[j->tab[s] - 1];
        if (q->ino == ino && q->blk == blk) {
            *len = q->len;
            return q->d->buf;
        }
    }
    return NULL;
}

uint64_t flush_pending_bound(const gmtf_fs *fs)
{
    return fs->pend ? fs->pend->bound : 0;
}

int flush_join(gmtf_fs *fs)
{
    struct flush_job *j = fs->pend;
    if (!j)
        return 0;
    fs->pend = NULL;
    uint64_t released = fs->released;
    double t0 = flush_prof_ms(), t1 = t0;
    if (j->threaded)
        pthread_join(j->th, NULL);
    if (t0 >= 0)
        t1 = flush_prof_ms();
    int rc = j->rc;
    size_t done = 0;
    for (size_t i = 0; !rc && i < j->nr; i++)
        rc = round_store(fs, j->g, j->ng, &done, j->r[i].end, j->r[i].first, j->r[i].dst,
                         j->r[i].doff);
    if (rc) { /* nothing stays allocated */
        for (size_t i = 0; i < done; i++)
            alloc_release_now(fs, j->g[i].img_off, j->g[i].clen);
    } else {
        pieces_recheck(fs, j->p, j->np, j->g, j->ng, done, 0);
        rc = pieces_record(fs, j->p, j->np, j->g, j->ng, done, 1);
    }
    if (t0 >= 0)
        fprintf(stderr,
                "flush profile: joined %zu pieces, %zu frames: thread's copy+encode %.1f "
                "(copy %.1f), waited %.1f, store+record %.1f ms\n",
                j->np, j->ng, j->enc_ms, j->copy_ms, t1 - t0, flush_prof_ms() - t1);
    /* The pieces left the cache at the cut: lost with a failure, which
     * stays the filesystem's error (mkfs then abandons the image). */
    if (rc) {
        fs_log(fs, "flush failed: %s", strerror(-rc));
        if (!fs->err)
            fs->err = rc;
    }
    job_free(fs, j);
    fs->released = released; /* its own frees, as at the cut */
    return rc;
}

void flush_job_drop(gmtf_fs *fs)
{
    struct flush_job *j = fs->pend;
    if (!j) {
        free(fs->job_src); /* (the filesystem's end: no job after this) */
        fs->job_src = NULL;
        fs->job_src_cap = 0;
        return;
    }
    fs->pend = NULL;
    if (j->threaded)
        pthread_join(j->th, NULL);
    job_free(fs, j);
    flush_job_drop(fs); /* and the round buffer */
}

/* The cut of an async flush (pieces deduplicated and grouped): 1 when the
 * job took p (the encode started on its thread), 0 when the flush must go
 * on at once: space may be short (the store's allocations would then
 * depend on when it runs), or no memory. */
static int job_start(gmtf_fs *fs, struct piece *p, size_t np, struct group *g, size_t ng)
{
    uint64_t *off = malloc((ng + 1) * sizeof *off);
    if (!off || !ng) {
        free(off);
        return 0;
    }
    for (size_t i = 0; i < ng; i++)
        off[i] = g[i].raw_off;
    off[ng] = g[ng - 1].raw_off + g[ng - 1].len;
    uint64_t bound = gmtf_batch_bound(off, ng);
    free(off);
    if (fs->room / 4 < bound + 8 * alloc_ckpt_need(fs) || fs->room < bound + (1ull << 30))
        return 0;
    struct flush_job *j = calloc(1, sizeof *j);
    size_t tcap = 64;
    while (tcap < 2 * np)
        tcap *= 2;
    if (j) {
        j->r = calloc(ng, sizeof *j->r);
        j->tab = calloc(tcap, sizeof *j->tab);
    }
    if (!j || !j->r || !j->tab) {
        if (j) {
            free(j->r);
            free(j->tab);
        }
        free(j);
        return 0;
    }
    *j = (struct flush_job){.fs = fs,
                            .p = p,
                            .np = np,
                            .g = g,
                            .ng = ng,
                            .r = j->r,
                            .tab = j->tab,
                            .tcap = tcap,
                            .span = flush_span(fs, 0),
                            .bound = bound};
    for (size_t i = 0; i < np; i++) {
        size_t s = job_slot(j, p[i].ino, p[i].blk);
        while (j->tab[s])
            s = (s + 1) & (tcap - 1);
        j->tab[s] = (uint32_t)(i + 1);
        dirty_detach(fs, p[i].d);
    }
    fs->pend = j;
    fs->pend_join = flush_join;
    fs->pend_block = flush_pending_block;
    j->threaded = pthread_create(&j->th, NULL, job_run, j) == 0;
    if (!j->threaded)
        job_run(j); /* no thread: encoded now, stored at the join all the same */
    return 1;
}

/* What a cut's walk does with dirty block d: drop it (its file is gone,
 * or no longer reaches the block), record a hole (all zeros), take it as
 * a piece of *len bytes (*in its inode), or first materialize the zeros
 * past its cap (DB_FILL: a piece then). No side effects. */
enum { DB_DROP, DB_HOLE, DB_FILL, DB_PIECE };

static int dblock_kind(gmtf_fs *fs, const struct dblock *d, struct inode **in, uint32_t *len)
{
    *in = inode_get(fs, d->ino);
    uint64_t start = (uint64_t)d->blk * fs->bs;
    if (!*in || !S_ISREG((*in)->mode) || start >= (*in)->size)
        return DB_DROP;
    *len = (*in)->size - start < fs->bs ? (uint32_t)((*in)->size - start) : fs->bs;
    if (d->cap < *len && !all_zero(d->buf, d->cap))
        return DB_FILL;
    return all_zero(d->buf, d->cap < *len ? d->cap : *len) ? DB_HOLE : DB_PIECE;
}

/* The packing keys of a cut's pieces (p[] oldest first): whole blocks
 * first, in file order; then pieces longer than a pack, in file order;
 * then small pieces by sort key (or as written, near-duplicates together:
 * similar_keys). */
static void pieces_keys(gmtf_fs *fs, struct piece *p, size_t n, unsigned threads)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].len == fs->bs)
            p[i].key = 0;
        else if (p[i].len > fs->ps)
            p[i].key = 1;
        else if (fs->opt.pack_write_order)
            p[i].key = i + 2;
    if (fs->opt.pack_write_order)
        similar_keys(p, n, threads);
}

/* ---- mkfs: the next cut's own work while the last flush encodes ----
 *
 * With async_flush the import thread cuts when the cache is full and first
 * waits for the flush still encoding (flush_join): on a GPU a window of
 * large frames (method 3 blocks coded on the host) takes longer than the
 * import of the next one, and then the cut's pure work (hashes for dedup,
 * the near-duplicate order's signatures of every small piece: tens of ms
 * a window) would start only after that wait and hold the next encode
 * back. So before waiting, the cut's pieces are found as flush_some will
 * find them (without its side effects), and their hashes and packing keys
 * made; after the wait, when the walk finds exactly those pieces, it takes
 * them. They are functions of the pieces' bytes and order alone: the same
 * image either way (GMTF_MKFS_CUT_AHEAD=0: at the cut, for measurements). */
#define CUT_AHEAD_THREADS 4 /* beside the flush's own encode on the pool */

struct cut_ahead {
    size_t n;
    struct dblock **d;
    uint32_t *len;
    uint64_t *hash, *key;
};

static void cut_ahead_free(struct cut_ahead *a)
{
    free(a->d);
    free(a->len);
    free(a->hash);
    free(a->key);
    memset(a, 0, sizeof *a);
}

/* Fills a (n = 0: nothing ahead) for an async cut whose walk has no side
 * effects to make: a block whose bytes would be materialized gives up. */
static void cut_ahead_make(gmtf_fs *fs, struct cut_ahead *a)
{
    memset(a, 0, sizeof *a);
    const char *e = getenv("GMTF_MKFS_CUT_AHEAD");
    if (!fs->pend || (e && strcmp(e, "0") == 0))
        return;
    size_t cap = 0;
    struct dblock *tail = NULL;
    for (struct dblock *d = fs->dlist; d; d = d->gnext) {
        cap++;
        tail = d;
    }
    struct piece *p = cap ? malloc(cap * sizeof *p) : NULL;
    if (!p)
        return;
    size_t n = 0;
    for (struct dblock *d = tail; d; d = d->gprev) {
        struct inode *in;
        uint32_t len;
        int kind = dblock_kind(fs, d, &in, &len);
        if (kind == DB_FILL) {
            free(p); /* its zeros would be materialized: the walk's to do */
            return;
        }
        if (kind != DB_PIECE)
            continue; /* dropped by the walk, or a hole */
        p[n++] = (struct piece){
            .d = d, .in = in, .len = len, .key = in->sortkey, .group = 0, .dup_of = -1};
    }
    a->d = malloc((n + 1) * sizeof *a->d);
    a->len = malloc((n + 1) * sizeof *a->len);
    a->hash = malloc((n + 1) * sizeof *a->hash);
    a->key = malloc((n + 1) * sizeof *a->key);
    if (!a->d || !a->len || !a->hash || !a->key) {
        cut_ahead_free(a);
        free(p);
        return;
    }
    unsigned threads = fs->pool_max < CUT_AHEAD_THREADS ? fs->pool_max : CUT_AHEAD_THREADS;
    pieces_keys(fs, p, n, threads ? threads : 1);
    for (size_t i = 0; i < n; i++) {
        a->d[i] = p[i].d;
        a->len[i] = p[i].len;
        a->key[i] = p[i].key;
        a->hash[i] = hash_bytes(p[i].d->buf, p[i].len, 0);
    }
    a->n = n;
    free(p);
}

/* 1 when the walk found exactly the pieces made ahead: their keys and
 * hashes taken. */
static int cut_ahead_take(const struct cut_ahead *a, struct piece *p, size_t n)
{
    if (!a->n || a->n != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].d != a->d[i] || p[i].len != a->len[i])
            return 0;
    for (size_t i = 0; i < n; i++) {
        p[i].key = a->key[i];
        p[i].hash = a->hash[i];
        p[i].hashed = 1;
    }
    return 1;
}

int flush_dirty(gmtf_fs *fs, uint64_t only_ino)
{
    return flush_some(fs, only_ino, 0, 0);
}

int flush_some(gmtf_fs *fs, uint64_t only_ino, uint64_t max_bytes, unsigned flags)
{
    int unlocked = (flags & FLUSH_UNLOCKED) != 0;
    if (unlocked && (!max_bytes || max_bytes > BATCH_BYTES - fs->bs))
        max_bytes = BATCH_BYTES - fs->bs; /* one sub-batch: see flush_pieces */
    if (fs->ro)
        return 0;
    struct cut_ahead ahead = {0};
    double a0 = flush_prof_ms();
    if ((flags & FLUSH_ASYNC) && fs->opt.async_flush && fs->opt.no_flush && !only_ino &&
        !max_bytes && !unlocked && !(flags & FLUSH_STAGED))
        cut_ahead_make(fs, &ahead);
    if (a0 >= 0 && ahead.n)
        fprintf(stderr, "flush profile: cut ahead of the join: %zu pieces, %.1f ms\n", ahead.n,
                flush_prof_ms() - a0);
    /* A flush still encoding on its thread came first: stored first. */
    int rc = flush_join(fs);
    if (rc) {
        cut_ahead_free(&ahead);
        return rc;
    }
    double c0 = flush_prof_ms();
    size_t n = 0, cap = 0;
    struct dblock *tail = NULL;
    for (struct dblock *d = fs->dlist; d; d = d->gnext) {
        cap++;
        tail = d;
    }
    if (!cap) {
        cut_ahead_free(&ahead);
        fs->released_flushed = fs->released;
        return 0;
    }
    struct piece *p = malloc(cap * sizeof *p);
    if (!p) {
        cut_ahead_free(&ahead);
        return -ENOMEM;
    }
    uint64_t taken = 0;
    /* Oldest first (the list grows at its head). */
    struct dblock *d = tail;
    while (d && !(max_bytes && taken >= max_bytes)) {
        struct dblock *next = d->gprev;
        if ((only_ino && d->ino != only_ino) || (unlocked && d->inflight) ||
            ((flags & FLUSH_STAGED) && !d->staged)) {
            d = next;
            continue;
        }
        struct inode *in;
        uint32_t len;
        int kind = dblock_kind(fs, d, &in, &len);
        if (kind == DB_DROP) {
            dirty_drop(fs, d);
            d = next;
            continue;
        }
        if (kind == DB_FILL) {
            /* Bytes past cap are zeros; materialize them for the encoder. */
            uint8_t *b = realloc(d->buf, len);
            if (!b) {
                rc = -ENOMEM;
                break;
            }
            memset(b + d->cap, 0, len - d->cap);
            fs->dirty_bytes += len - d->cap;
            d->buf = b;
            d->cap = len;
        }
        if (kind == DB_HOLE) {
            /* All zeros: a hole costs nothing. */
            uint32_t blk = d->blk; /* d is freed by the drop */
            dirty_drop(fs, d);
            /* Recorded even when unmapped: it cancels data staged for the block. */
            rc = rec_ext(fs, in->ino, blk, 0, 0, 0);
            if (rc)
                break;
            d = next;
            continue;
        }
        p[n++] = (struct piece){
            .d = d, .in = in, .len = len, .key = in->sortkey, .group = 0, .dup_of = -1};
        taken += len;
        d = next;
    }
    if (!rc && n) {
        /* p[] is oldest first: the keys (pieces_keys), made ahead of the
         * join when the walk found the same pieces */
        double s0 = flush_prof_ms();
        int took = cut_ahead_take(&ahead, p, n);
        if (!took)
            pieces_keys(fs, p, n, fs->pool_max);
        qsort(p, n, sizeof *p, piece_cmp);
        if (s0 >= 0)
            fprintf(stderr, "flush profile: cut of %zu pieces: walked %.1f, ordered %.1f ms%s\n", n,
                    s0 - c0, flush_prof_ms() - s0, took ? " (keys and hashes made ahead)" : "");
        /* The encode may go to a thread (mkfs) unless space was freed
         * since the last flush (outside its records): the next commit
         * would free it, and this flush's store, later than the commit
         * then, could take it, which the flush at once could not. */
        int async = (flags & FLUSH_ASYNC) && fs->opt.async_flush && fs->opt.no_flush && !only_ino &&
                    !max_bytes && !unlocked && fs->released == fs->released_flushed;
        int owned = 0;
        rc = flush_pieces(fs, p, n, unlocked, async, &owned);
        if (owned)
            p = NULL;
    }
    fs->released_flushed = fs->released;
    free(p);
    cut_ahead_free(&ahead);
    if (rc)
        fs_log(fs, "flush failed: %s", strerror(-rc));
    return rc;
}
