/* fsck: loads the image read-only, checks every structure the metadata
 * holds, optionally decodes every frame, and with repair fixes what it can
 * in memory and writes one clean checkpoint. A repair writes nothing unless
 * it can complete: a problem it cannot fix, or no room for the checkpoint,
 * and the image is left as it was (-ENOTRECOVERABLE, -ENOSPC).
 *
 * Order: space (frames past the end, overlaps), inode contents, names
 * (dangling entries, second names of directories), reachability (lost+found),
 * link counts, then frame contents. Each phase sees the repairs of the ones
 * before, so one repair leaves nothing for the next check to find. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

typedef struct checker {
    gmtf_fs *fs;
    const gmtf_fs_check_options *opt;
    gmtf_fs_check_report *rep;
    int repair;
    int unfixable;            /* a problem the repair cannot fix: nothing may be written */
    int hold_snap, hold_jrnl; /* the image's snapshot or journal overlaps: never freed */
    /* per inode, by index in inos (sorted numbers) */
    uint64_t *inos;
    size_t n;
} checker;

static void problem(checker *c, int fixed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(checker *c, int fixed, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->rep->errors++;
    if (fixed)
        c->rep->fixed++;
    else if (c->repair)
        c->unfixable = 1;
    char line[460];
    snprintf(line, sizeof line, "%s%s", msg,
             fixed       ? " (fixed)"
             : c->repair ? " (cannot be repaired)"
                         : "");
    if (c->opt->log)
        c->opt->log(c->opt->log_arg, line);
}

static void note(checker *c, const char *msg)
{
    c->rep->warnings++;
    if (c->opt->log)
        c->opt->log(c->opt->log_arg, msg);
}

static void quiet_log(void *arg, const char *msg)
{
    checker *c = arg;
    char line[600];
    snprintf(line, sizeof line, "note: %s", msg);
    note(c, line);
}

/* ---- the inode index: arrays per inode, sized by the inodes there are ------- */

static int index_inodes(checker *c)
{
    free(c->inos);
    c->n = 0;
    c->inos = malloc((c->fs->ninodes ? c->fs->ninodes : 1) * sizeof *c->inos);
    if (!c->inos)
        return -ENOMEM;
    uint64_t ino = 0;
    while (c->n < c->fs->ninodes && inode_next(c->fs, &ino))
        c->inos[c->n++] = ino;
    return 0;
}

static size_t ix(const checker *c, uint64_t ino)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->inos[mid] < ino)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->n && c->inos[lo] == ino ? lo : SIZE_MAX;
}

/* ---- frames: blocks of bad frames become holes, duplicates are merged ----- */

/* bad[id]: the frame's blocks become holes; same[id] (may be NULL): they map
 * that frame instead. One pass over every block map. */
static void remap_blocks(checker *c, const uint8_t *bad, const uint32_t *same, const char *why)
{
    gmtf_fs *fs = c->fs;
    uint64_t ino = 0;
    for (struct inode *in; (in = inode_next(fs, &ino));) {
        if (!S_ISREG(in->mode))
            continue;
        for (uint32_t i = 0; i < in->u.ext.n; i++) {
            struct fref e = in->u.ext.v[i];
            if (same && same[e.frame]) {
                if (c->repair)
                    rec_ext(fs, ino, e.blk, same[e.frame], e.off, e.len);
                continue;
            }
            if (!bad[e.frame])
                continue;
            char msg[200];
            snprintf(msg, sizeof msg, "inode %llu block %u: data lost (%s)%s",
                     (unsigned long long)ino, e.blk, why, c->repair ? ", now a hole" : "");
            note(c, msg);
            if (c->repair && !rec_ext(fs, ino, e.blk, 0, 0, 0))
                i--; /* the array shifted */
        }
    }
}

static const char *verify_error(int st)
{
    return st < -1000 ? gmtf_strerror(st) : strerror(-st);
}

/* ---- space: frames past the end, anything referenced twice ------------------ */

enum { SP_FRAME, SP_SNAPSHOT, SP_JOURNAL };

struct sp {
    uint64_t off, len;
    uint32_t id;
    int kind;
};

static int sp_cmp(const void *a, const void *b)
{
    const struct sp *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

static const char *sp_name(const struct sp *s, char *buf, size_t n)
{
    if (s->kind == SP_FRAME)
        snprintf(buf, n, "frame %u at %llu (%llu bytes)", s->id, (unsigned long long)s->off,
                 (unsigned long long)s->len);
    else
        snprintf(buf, n, "the %s at %llu (%llu bytes)",
                 s->kind == SP_SNAPSHOT ? "snapshot" : "journal", (unsigned long long)s->off,
                 (unsigned long long)s->len);
    return buf;
}

/* Decodes frame id alone: 0 when it is sound. */
static int frame_sound(gmtf_fs *fs, uint32_t id)
{
    int st;
    return frames_verify(fs, &id, 1, &st) ? -ENOMEM : st;
}

/* The image's snapshot or journal shares bytes with something else: the
 * repair's checkpoint must not free them (they may be a kept frame's). */
static void hold_region(checker *c, const struct sp *s)
{
    if (s->kind == SP_SNAPSHOT)
        c->hold_snap = 1;
    else if (s->kind == SP_JOURNAL)
        c->hold_jrnl = 1;
}

/* Two extents overlap: decide which frame loses its blocks (bad) or maps
 * the other (same). The snapshot and journal of the image are replaced by
 * a repair, so an overlap with them costs a frame only when it is unsound. */
static void overlap(checker *c, const struct sp *a, const struct sp *b, uint8_t *bad,
                    uint32_t *same)
{
    gmtf_fs *fs = c->fs;
    char na[96], nb[96];
    if (a->kind != SP_FRAME && b->kind != SP_FRAME) {
        problem(c, c->repair, "%s overlaps %s", sp_name(a, na, sizeof na),
                sp_name(b, nb, sizeof nb));
        hold_region(c, a);
        hold_region(c, b);
        return;
    }
    if (a->kind == SP_FRAME && b->kind == SP_FRAME) {
        const struct frame *fa = &fs->frames[a->id], *fb = &fs->frames[b->id];
        if (fa->off == fb->off && fa->clen == fb->clen && fa->dlen == fb->dlen &&
            fa->crc == fb->crc) {
            problem(c, c->repair, "frames %u and %u are the same frame at %llu", a->id, b->id,
                    (unsigned long long)fa->off);
            same[b->id] = a->id;
            return;
        }
    }
    problem(c, c->repair, "%s overlaps %s", sp_name(a, na, sizeof na), sp_name(b, nb, sizeof nb));
    int sa = a->kind == SP_FRAME ? frame_sound(fs, a->id) : 0;
    int sb = b->kind == SP_FRAME ? frame_sound(fs, b->id) : 0;
    if (a->kind == SP_FRAME && sa)
        bad[a->id] = 1;
    if (b->kind == SP_FRAME && sb)
        bad[b->id] = 1;
    /* Two sound frames sharing bytes: the one further on loses. */
    if (a->kind == SP_FRAME && b->kind == SP_FRAME && !sa && !sb)
        bad[b->id] = 1;
    hold_region(c, a);
    hold_region(c, b);
}

static void check_space(checker *c)
{
    gmtf_fs *fs = c->fs;
    uint64_t size = UINT64_MAX;
    if (img_size(fs, &size))
        size = UINT64_MAX;
    uint8_t *bad = calloc(fs->nframes ? fs->nframes : 1, 1);
    uint32_t *same = calloc(fs->nframes ? fs->nframes : 1, sizeof *same);
    struct sp *v = malloc((fs->live_frames + 2) * sizeof *v);
    size_t n = 0, nbad = 0, nsame = 0;
    if (!bad || !same || !v) {
        problem(c, 0, "out of memory checking the space of %llu frames",
                (unsigned long long)fs->live_frames);
        goto out;
    }
    for (uint32_t id = 1; id < fs->nframes && n < fs->live_frames; id++) {
        const struct frame *f = &fs->frames[id];
        if (!f->clen)
            continue;
        if (f->outside) {
            problem(c, c->repair, "frame %u at %llu (%u bytes) lies past the %s (%llu bytes)", id,
                    (unsigned long long)f->off, f->clen,
                    fs->sb.capacity && f->off + f->clen > fs->sb.capacity ? "capacity"
                                                                          : "end of the image",
                    (unsigned long long)(fs->sb.capacity && fs->sb.capacity < size ? fs->sb.capacity
                                                                                   : size));
            bad[id] = 1;
            continue;
        }
        v[n++] = (struct sp){f->off, f->clen, id, SP_FRAME};
    }
    v[n++] = (struct sp){fs->sb.snap_off, fs->sb.snap_len, 0, SP_SNAPSHOT};
    if (fs->sb.jrnl_len && fs->sb.jrnl_off < size) /* a journal cut short: what is there */
        v[n++] = (struct sp){fs->sb.jrnl_off,
                             fs->sb.jrnl_len < size - fs->sb.jrnl_off ? fs->sb.jrnl_len
                                                                      : size - fs->sb.jrnl_off,
                             0, SP_JOURNAL};
    qsort(v, n, sizeof *v, sp_cmp);
    size_t last = 0; /* the extent reaching furthest so far */
    for (size_t i = 1; i < n; i++) {
        if (v[i].off < v[last].off + v[last].len)
            overlap(c, &v[last], &v[i], bad, same);
        if (v[i].off + v[i].len > v[last].off + v[last].len &&
            !(v[i].kind == SP_FRAME && (bad[v[i].id] || same[v[i].id])))
            last = i;
    }
    for (uint32_t id = 1; id < fs->nframes; id++) {
        nbad += bad[id];
        nsame += same[id] != 0;
    }
    /* Their bytes may be a kept frame's (or not this image's): once their
     * blocks are gone, nothing may free them. */
    for (uint32_t id = 1; id < fs->nframes; id++)
        if (bad[id] || same[id])
            fs->frames[id].outside = 1;
    if (nbad || nsame)
        remap_blocks(c, bad, nsame ? same : NULL, "its frame lies past the end or overlaps");
out:
    free(bad);
    free(same);
    free(v);
}

/* ---- inode contents ------------------------------------------------------------ */

static void check_contents(checker *c)
{
    gmtf_fs *fs = c->fs;
    uint64_t ino = 0;
    for (struct inode *in; (in = inode_next(fs, &ino));) {
        if (S_ISLNK(in->mode) && !in->u.target) {
            /* Its names go with it (dangling entries, below). */
            problem(c, c->repair, "symlink %llu has no target%s", (unsigned long long)ino,
                    c->repair ? ": removed" : "");
            if (c->repair)
                rec_idel(fs, ino);
            continue;
        }
        if (S_ISREG(in->mode) && in->u.ext.n) {
            struct fref *last = &in->u.ext.v[in->u.ext.n - 1];
            if ((uint64_t)last->blk * fs->bs >= in->size) {
                problem(c, c->repair, "inode %llu: block %u mapped past the size %llu%s",
                        (unsigned long long)ino, last->blk, (unsigned long long)in->size,
                        c->repair ? ": unmapped" : "");
                while (c->repair && in->u.ext.n &&
                       (uint64_t)in->u.ext.v[in->u.ext.n - 1].blk * fs->bs >= in->size &&
                       !rec_ext(fs, ino, in->u.ext.v[in->u.ext.n - 1].blk, 0, 0, 0))
                    ;
            }
        }
    }
}

/* ---- names: every entry names an inode; a directory has one name ----------- */

static void check_names(checker *c, uint8_t *named)
{
    gmtf_fs *fs = c->fs;
    /* primary[X]: directory X's parent field names a directory holding X */
    uint8_t *primary = calloc(c->n ? c->n : 1, 1);
    if (!primary) {
        problem(c, 0, "out of memory checking %zu inodes", c->n);
        return;
    }
    for (size_t k = 0; k < c->n; k++) {
        struct inode *dir = inode_get(fs, c->inos[k]);
        if (!dir || !S_ISDIR(dir->mode))
            continue;
        for (uint32_t i = 0; i < dir->u.dir.n; i++) {
            struct dent *d = dir->u.dir.v[i];
            struct inode *in = d ? inode_get(fs, d->ino) : NULL;
            if (in && S_ISDIR(in->mode) && in->parent == dir->ino && d->ino != dir->ino)
                primary[ix(c, d->ino)] = 1;
        }
    }
    for (size_t k = 0; k < c->n; k++) {
        uint64_t dino = c->inos[k];
        struct inode *dir = inode_get(fs, dino);
        if (!dir || !S_ISDIR(dir->mode))
            continue;
        for (uint32_t i = 0; i < dir->u.dir.n; i++) {
            struct dent *d = dir->u.dir.v[i];
            if (!d)
                continue;
            struct inode *in = inode_get(fs, d->ino);
            size_t t = in ? ix(c, d->ino) : SIZE_MAX;
            const char *why = NULL;
            if (!in || t == SIZE_MAX)
                why = "a missing inode";
            else if (d->ino == dino || d->ino == GMTF_ROOT_INO)
                why = d->ino == dino ? "its own directory" : "the root";
            else if (S_ISDIR(in->mode) && named[t])
                why = "a directory named elsewhere";
            else if (S_ISDIR(in->mode) && primary[t] && in->parent != dino)
                why = "a directory whose parent is elsewhere";
            if (why) {
                problem(c, c->repair, "directory %llu: entry '%s' names %s (%llu)",
                        (unsigned long long)dino, d->name, why, (unsigned long long)d->ino);
                if (c->repair)
                    rec_ddel(fs, dino, d->name, d->namelen);
                continue;
            }
            named[t] = 1;
            if (S_ISDIR(in->mode) && in->parent != dino) {
                problem(c, c->repair, "directory %llu: parent is %llu, found in %llu",
                        (unsigned long long)d->ino, (unsigned long long)in->parent,
                        (unsigned long long)dino);
                if (c->repair) {
                    in->parent = dino;
                    rec_inode(fs, in);
                }
            }
        }
    }
    free(primary);
}

/* ---- reachability: lost+found ------------------------------------------------- */

/* Marks everything reachable from dir (seen[] by index). */
static int mark_from(checker *c, uint64_t dir, uint8_t *seen)
{
    size_t n = 0, cap = 1024;
    uint64_t *stack = malloc(cap * sizeof *stack);
    if (!stack)
        return -ENOMEM;
    stack[n++] = dir;
    seen[ix(c, dir)] = 1;
    while (n) {
        struct inode *d = inode_get(c->fs, stack[--n]);
        if (!d || !S_ISDIR(d->mode))
            continue;
        for (uint32_t i = 0; i < d->u.dir.n; i++) {
            struct dent *e = d->u.dir.v[i];
            size_t t = e ? ix(c, e->ino) : SIZE_MAX;
            if (t == SIZE_MAX || seen[t])
                continue;
            seen[t] = 1;
            if (n == cap) {
                uint64_t *s = realloc(stack, 2 * cap * sizeof *s);
                if (!s) {
                    free(stack);
                    return -ENOMEM;
                }
                stack = s;
                cap *= 2;
            }
            stack[n++] = e->ino;
        }
    }
    free(stack);
    return 0;
}

/* The lost+found directory (made in the root when missing): 0 if none can be. */
static uint64_t lost_found(checker *c)
{
    gmtf_fs *fs = c->fs;
    struct inode *root = inode_get(fs, GMTF_ROOT_INO);
    char name[32] = "lost+found";
    for (int k = 1; k < 100; k++) {
        struct dent *d = dent_find(fs, GMTF_ROOT_INO, name, strlen(name));
        if (!d)
            break;
        struct inode *in = inode_get(fs, d->ino);
        if (in && S_ISDIR(in->mode))
            return d->ino;
        snprintf(name, sizeof name, "lost+found.%d", k); /* the name is taken by a non-directory */
    }
    uint64_t ino;
    if (!root || inode_alloc_ino(fs, &ino) ||
        rec_inode_new(fs, ino, fs->next_gen, S_IFDIR | 0700, 0, 0, 0, GMTF_ROOT_INO, 0) ||
        rec_dadd(fs, GMTF_ROOT_INO, ino, root->u.dir.next, name, strlen(name)))
        return 0;
    return ino;
}

/* Links ino into lost+found as #ino. */
static int adopt(checker *c, uint64_t ino)
{
    gmtf_fs *fs = c->fs;
    uint64_t lf = lost_found(c);
    struct inode *dir = inode_get(fs, lf), *in = inode_get(fs, ino);
    char name[32];
    snprintf(name, sizeof name, "#%llu", (unsigned long long)ino);
    if (!dir || !in || rec_dadd(fs, lf, ino, dir->u.dir.next, name, strlen(name)))
        return -1;
    if (S_ISDIR(in->mode)) {
        in->parent = lf;
        rec_inode(fs, in);
    }
    return 0;
}

/* The entry naming ino in dir (directories have one name after check_names). */
static struct dent *name_in(gmtf_fs *fs, uint64_t dir, uint64_t ino)
{
    struct inode *d = inode_get(fs, dir);
    if (!d || !S_ISDIR(d->mode))
        return NULL;
    for (uint32_t i = 0; i < d->u.dir.n; i++)
        if (d->u.dir.v[i] && d->u.dir.v[i]->ino == ino)
            return d->u.dir.v[i];
    return NULL;
}

static void check_reach(checker *c, const uint8_t *named_in)
{
    gmtf_fs *fs = c->fs;
    size_t n0 = c->n;
    uint8_t *seen = calloc(n0 ? n0 : 1, 1), *named = malloc(n0 ? n0 : 1);
    uint32_t *climb = calloc(n0 ? n0 : 1, sizeof *climb);
    if (!seen || !named || !climb || mark_from(c, GMTF_ROOT_INO, seen)) {
        problem(c, 0, "out of memory checking %zu inodes", n0);
        goto out;
    }
    memcpy(named, named_in, n0);
    /* Directories first: only the head of an unreachable chain (no name, or
     * on a cycle) goes to lost+found, the rest comes along with it. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < n0; k++) {
            struct inode *in = inode_get(fs, c->inos[k]);
            if (seen[k] || !in || S_ISDIR(in->mode) != (pass == 0))
                continue;
            uint64_t head = c->inos[k];
            size_t h = k;
            while (pass == 0 && named[h]) {
                climb[h] = (uint32_t)k + 1;
                struct inode *hd = inode_get(fs, head);
                size_t p = hd ? ix(c, hd->parent) : SIZE_MAX;
                if (p == SIZE_MAX || seen[p])
                    break;
                if (climb[p] == (uint32_t)k + 1) { /* a cycle: cut it here */
                    struct dent *d = name_in(fs, hd->parent, head);
                    if (c->repair && d)
                        rec_ddel(fs, hd->parent, d->name, d->namelen);
                    named[h] = 0;
                    break;
                }
                head = hd->parent;
                h = p;
            }
            if (seen[h])
                continue;
            struct inode *hd = inode_get(fs, head);
            problem(c, c->repair, "inode %llu (mode %o) is not reachable from the root",
                    (unsigned long long)head, hd ? hd->mode : 0);
            if (c->repair && adopt(c, head))
                problem(c, 0, "inode %llu: no lost+found to put it in", (unsigned long long)head);
            if (mark_from(c, head, seen)) {
                problem(c, 0, "out of memory checking %zu inodes", n0);
                goto out;
            }
        }
out:
    free(seen);
    free(named);
    free(climb);
}

/* ---- link counts ----------------------------------------------------------------- */

static void check_links(checker *c)
{
    gmtf_fs *fs = c->fs;
    uint32_t *links = calloc(c->n ? c->n : 1, sizeof *links);
    if (!links) {
        problem(c, 0, "out of memory checking %zu inodes", c->n);
        return;
    }
    for (size_t k = 0; k < c->n; k++) {
        struct inode *dir = inode_get(fs, c->inos[k]);
        if (!dir || !S_ISDIR(dir->mode))
            continue;
        for (uint32_t i = 0; i < dir->u.dir.n; i++) {
            struct dent *d = dir->u.dir.v[i];
            size_t t = d ? ix(c, d->ino) : SIZE_MAX;
            if (t == SIZE_MAX)
                continue;
            struct inode *in = inode_get(fs, d->ino);
            if (in && S_ISDIR(in->mode))
                links[k]++; /* a subdirectory's ".." */
            else
                links[t]++;
        }
    }
    for (size_t k = 0; k < c->n; k++) {
        struct inode *in = inode_get(fs, c->inos[k]);
        if (!in)
            continue;
        uint32_t want = S_ISDIR(in->mode) ? 2 + links[k] : links[k];
        if (in->nlink != want) {
            problem(c, c->repair, "inode %llu: link count %u, should be %u",
                    (unsigned long long)c->inos[k], in->nlink, want);
            if (c->repair) {
                in->nlink = want;
                rec_inode(fs, in);
            }
        }
    }
    free(links);
}

/* ---- frame contents ---------------------------------------------------------------- */

/* Decodes every frame in batches; a bad frame's blocks become holes on repair. */
static void verify_frames(checker *c)
{
    gmtf_fs *fs = c->fs;
    enum { BATCH = 32 };
    uint32_t ids[BATCH];
    int status[BATCH];
    uint64_t done = 0, total = fs->live_frames;
    uint8_t *bad = calloc(fs->nframes ? fs->nframes : 1, 1);
    size_t nbad = 0;
    if (!bad) {
        problem(c, 0, "out of memory verifying frames");
        return;
    }
    uint32_t id = 1;
    while (id < fs->nframes) {
        size_t n = 0;
        uint64_t bytes = 0;
        for (; id < fs->nframes && n < BATCH && bytes < (64u << 20); id++)
            if (fs->frames[id].clen) {
                ids[n++] = id;
                bytes += fs->frames[id].dlen;
            }
        if (!n)
            break;
        if (frames_verify(fs, ids, n, status)) {
            problem(c, 0, "out of memory verifying frames");
            break;
        }
        for (size_t i = 0; i < n; i++)
            if (status[i]) {
                struct frame *f = &fs->frames[ids[i]];
                problem(c, c->repair, "frame %u at offset %llu (%u bytes): %s", ids[i],
                        (unsigned long long)f->off, f->clen, verify_error(status[i]));
                bad[ids[i]] = 1;
                nbad++;
            }
        done += n;
        if (c->opt->progress)
            c->opt->progress(c->opt->progress_arg, done, total);
    }
    if (nbad)
        remap_blocks(c, bad, NULL, "its frame does not decode");
    free(bad);
}

/* ---- the repair's room ------------------------------------------------------------ */

/* With a capacity, the checkpoint must find room for the snapshot (at most
 * the frames' bound of its chunks) and a journal before it writes anything. */
static int repair_fits(gmtf_fs *fs)
{
    if (!fs->sb.capacity)
        return 0; /* growable: the host's space, found out by writing */
    wbuf w = {0};
    uint32_t *ends = NULL;
    size_t nch = 0;
    int rc = snapshot_serialize(fs, &w, SNAP_CHUNK, &ends, &nch);
    if (rc)
        return rc;
    uint64_t need = SNAP_HDR_SIZE, prev = 0;
    for (size_t i = 0; i < nch; i++) {
        need += gmtf_frame_bound(ends[i] - prev);
        prev = ends[i];
    }
    wb_free(&w);
    free(ends);
    uint64_t a, b, end = fs->end;
    rc = alloc_space(fs, need, &a);
    if (!rc) {
        rc = alloc_space(fs, JOURNAL_MIN, &b);
        if (!rc)
            alloc_release_now(fs, b, JOURNAL_MIN);
        alloc_release_now(fs, a, need);
    }
    if (fs->end > end) { /* give the tail back as it was */
        while (fs->free.n && fs->free.v[fs->free.n - 1].off >= end)
            fs->free.n--;
        if (fs->free.n && fs->free.v[fs->free.n - 1].off + fs->free.v[fs->free.n - 1].len > end)
            fs->free.v[fs->free.n - 1].len = end - fs->free.v[fs->free.n - 1].off;
        fs->end = end;
    }
    return rc;
}

/* ---- fsck ------------------------------------------------------------------------- */

/* What loading found: a newer state that did not load, records that did
 * not apply, space past the end. */
static void check_load(checker *c, const sb_info slot[2], const int res[2])
{
    gmtf_fs *fs = c->fs;
    for (int i = 0; i < 2; i++)
        if (res[i] == 0 && slot[i].gen > fs->sb.gen)
            problem(c, c->repair,
                    "superblock slot %d (generation %llu) names metadata that does not load: "
                    "the filesystem is as of generation %llu",
                    i, (unsigned long long)slot[i].gen, (unsigned long long)fs->sb.gen);
    if (fs->corrupt_records)
        problem(c, c->repair, "%d metadata records could not be applied%s", fs->corrupt_records,
                c->repair ? ": left out" : "");
    /* The journal as the slot names it (loading keeps only what is there). */
    uint64_t size = 0;
    const sb_info *sb = &fs->sb;
    for (int i = 0; i < 2; i++)
        if (res[i] == 0 && slot[i].gen == fs->sb.gen)
            sb = &slot[i];
    if (sb->jrnl_len && !img_size(fs, &size) && sb->jrnl_off + sb->jrnl_len > size)
        problem(c, c->repair,
                "the journal at %llu (%llu bytes) lies past the end of the image (%llu bytes): "
                "what it held is lost%s",
                (unsigned long long)sb->jrnl_off, (unsigned long long)sb->jrnl_len,
                (unsigned long long)size, c->repair ? "; a new one is written" : "");
    if (!img_size(fs, &size) && size < fs->end && !fs->img->is_blockdev)
        problem(c, 0, "image is %llu bytes, but data is allocated up to %llu",
                (unsigned long long)size, (unsigned long long)fs->end);
}

static int check_all(checker *c)
{
    gmtf_fs *fs = c->fs;
    check_space(c);
    check_contents(c);
    if (index_inodes(c)) {
        problem(c, 0, "out of memory checking %llu inodes", (unsigned long long)fs->ninodes);
        return -ENOMEM;
    }
    uint8_t *named = calloc(c->n ? c->n : 1, 1);
    if (!named) {
        problem(c, 0, "out of memory checking %zu inodes", c->n);
        return -ENOMEM;
    }
    check_names(c, named);
    check_reach(c, named);
    free(named);
    if (index_inodes(c)) { /* lost+found may be new */
        problem(c, 0, "out of memory checking %llu inodes", (unsigned long long)fs->ninodes);
        return -ENOMEM;
    }
    check_links(c);
    if (c->opt->verify_data)
        verify_frames(c);
    return 0;
}

int gmtf_fs_check(gmtf_image *img, const gmtf_fs_check_options *opt, gmtf_fs_check_report *rep)
{
    gmtf_fs_check_options o = {0};
    if (opt)
        o = *opt;
    memset(rep, 0, sizeof *rep);
    checker c = {.opt = &o, .rep = rep, .repair = o.repair};
    gmtf_fs_options fo = {.read_only = !o.repair,
                          .mtf = o.mtf,
                          .threads = o.threads,
                          .log = quiet_log,
                          .log_arg = &c,
                          .cache_bytes = 1u << 20};
    int rc = fs_new(img, &fo, GMTF_FS_BLOCK_DEFAULT, &c.fs);
    if (rc)
        return rc;
    gmtf_fs *fs = c.fs;
    /* Superblock slots: one torn slot is normal after a crash. */
    sb_info slot[2];
    int res[2];
    sb_read_slots(fs, slot, res);
    for (int i = 0; i < 2; i++)
        if (res[i] == -EINVAL || res[i] == -EUCLEAN) {
            char msg[100];
            snprintf(msg, sizeof msg, "superblock slot %d at offset %d %s", i, i * SB_SLOT_SIZE,
                     res[i] == -EINVAL ? "is empty" : "is damaged");
            note(&c, msg);
        }
    fs->ro = 1; /* load without writing, even to repair */
    rc = fs_load(fs);
    if (!rc && fs->bs > SNAP_CHUNK && fs->bs != GMTF_FS_BLOCK_DEFAULT)
        rc = codec_resize(fs);
    if (rc == -EUCLEAN && fs->ninodes && inode_get(fs, GMTF_ROOT_INO))
        rc = 0; /* loaded, but space is referenced twice: check_space says where */
    if (rc) {
        fs_destroy(fs, 0);
        return rc;
    }
    if (fs->replayed && fs->sb.jrnl_len) {
        char msg[100];
        snprintf(msg, sizeof msg, "journal replayed: %llu records",
                 (unsigned long long)fs->replayed);
        note(&c, msg); /* normal after a crash: not a problem */
    }
    check_load(&c, slot, res);
    rc = check_all(&c);
    if (!rc && o.repair && rep->errors) {
        if (c.unfixable) {
            if (o.log)
                o.log(o.log_arg, "repair not written: problems remain that it cannot fix; "
                                 "the image is unchanged");
            rc = -ENOTRECOVERABLE;
        } else if ((rc = repair_fits(fs))) {
            problem(&c, 0, "no room for the repaired metadata (%s): the image is unchanged",
                    strerror(-rc));
        } else {
            fs->ro = 0;
            if (c.hold_snap) /* the checkpoint frees the old regions: not these */
                fs->sb.snap_len = 0;
            if (c.hold_jrnl)
                fs->sb.jrnl_len = 0;
            rc = fs_checkpoint(fs, JOURNAL_MIN);
            if (rc)
                problem(&c, 0, "writing the repaired metadata failed: %s", strerror(-rc));
        }
    }
    if (!rc)
        gmtf_fs_get_info(fs, &rep->info);
    free(c.inos);
    fs_destroy(fs, 0);
    return rc;
}
