/* fsck: loads the image read-only, checks every structure the metadata
 * holds, optionally decodes every frame, and with repair fixes what it can
 * in memory and writes one clean checkpoint. A repair writes nothing unless
 * it can complete: a problem it cannot fix, or no room for the checkpoint,
 * and the image is left as it was (report.unrepairable: fsck exit 8).
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
    int hold_snap, hold_jrnl; /* the image's snapshot or journal overlaps: never freed */
    /* per inode, by index in inos (sorted numbers) */
    uint64_t *inos;
    size_t n;
} checker;

/* A repair that cannot be made safely: nothing is written (fsck exit 8). */
static void unrepairable(checker *c, const char *why)
{
    if (!c->opt->repair || c->rep->unrepairable)
        return;
    c->rep->unrepairable = 1;
    char line[460];
    snprintf(line, sizeof line, "cannot repair: %s; the image is left unchanged", why);
    if (c->opt->log)
        c->opt->log(c->opt->log_arg, line);
}

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
    else
        unrepairable(c, msg);
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

enum { SP_FRAME, SP_SNAPSHOT, SP_JOURNAL, SP_RETIRED_PREV, SP_RETIRED_CUR };

struct sp {
    uint64_t off, len;
    uint32_t id; /* frame id, or index in the retired list */
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
    static const char *kind[] = {"frame", "the snapshot", "the journal", "retired space",
                                 "retired space"};
    if (s->kind == SP_FRAME)
        snprintf(buf, n, "frame %u at %llu (%llu bytes)", s->id, (unsigned long long)s->off,
                 (unsigned long long)s->len);
    else
        snprintf(buf, n, "%s at %llu (%llu bytes)", kind[s->kind], (unsigned long long)s->off,
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
 * repair's checkpoint must not retire them (they may be a kept frame's). */
static void hold_region(checker *c, const struct sp *s)
{
    if (s->kind == SP_SNAPSHOT)
        c->hold_snap = 1;
    else if (s->kind == SP_JOURNAL)
        c->hold_jrnl = 1;
}

static int is_retired(const struct sp *s)
{
    return s->kind == SP_RETIRED_PREV || s->kind == SP_RETIRED_CUR;
}

/* Two extents overlap: decide what loses. A frame loses its blocks (bad) or
 * maps the other (same) when it is unsound, or when two sound frames share
 * bytes (the one further on); retired space (to be freed later) is dropped
 * from its list (drop); the image's snapshot and journal are replaced by the
 * repair, and not freed by it (hold). */
static void overlap(checker *c, const struct sp *a, const struct sp *b, uint8_t *bad,
                    uint32_t *same, uint8_t *drop[2])
{
    gmtf_fs *fs = c->fs;
    char na[96], nb[96];
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
    const struct sp *x[2] = {a, b};
    int sound[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        if (x[k]->kind == SP_FRAME && (sound[k] = frame_sound(fs, x[k]->id)))
            bad[x[k]->id] = 1;
        if (is_retired(x[k]))
            drop[x[k]->kind == SP_RETIRED_CUR][x[k]->id] = 1;
        hold_region(c, x[k]);
    }
    /* Two sound frames sharing bytes: the one further on loses. */
    if (a->kind == SP_FRAME && b->kind == SP_FRAME && !sound[0] && !sound[1])
        bad[b->id] = 1;
}

/* The image's snapshot and journal copies (as alloc.c counts them). */
static size_t regions(gmtf_fs *fs, struct sp out[4])
{
    const sb_info *sb = &fs->sb;
    int v2 = sb->version >= FMT_VERSION;
    uint64_t sl = v2 ? alloc_meta_len(fs, sb->snap_len) : sb->snap_len;
    uint64_t jl = v2 ? alloc_meta_len(fs, sb->jrnl_len) : sb->jrnl_len;
    size_t n = 0;
    if (sl)
        out[n++] = (struct sp){sb->snap_off, sl, 0, SP_SNAPSHOT};
    if (sl && sb->snap2_off)
        out[n++] = (struct sp){sb->snap2_off, sl, 0, SP_SNAPSHOT};
    if (jl)
        out[n++] = (struct sp){sb->jrnl_off, jl, 0, SP_JOURNAL};
    if (jl && sb->jrnl2_off)
        out[n++] = (struct sp){sb->jrnl2_off, jl, 0, SP_JOURNAL};
    return n;
}

/* Ranges of a retired list not marked in drop, kept in order. */
static void retired_keep(extvec *e, const uint8_t *drop)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++)
        if (!drop[i])
            e->v[k++] = e->v[i];
    e->n = k;
}

static void check_space(checker *c)
{
    gmtf_fs *fs = c->fs;
    uint64_t size = UINT64_MAX;
    if (img_size(fs, &size))
        size = UINT64_MAX;
    size_t np = fs->retired_prev.n, nc = fs->retired_cur.n;
    uint8_t *bad = calloc(fs->nframes ? fs->nframes : 1, 1);
    uint32_t *same = calloc(fs->nframes ? fs->nframes : 1, sizeof *same);
    uint8_t *drop[2] = {calloc(np + 1, 1), calloc(nc + 1, 1)};
    struct sp *v = malloc((fs->live_frames + 4 + np + nc) * sizeof *v);
    size_t n = 0, nbad = 0, nsame = 0;
    if (!bad || !same || !v || !drop[0] || !drop[1]) {
        problem(c, 0, "out of memory checking the space of %llu frames",
                (unsigned long long)fs->live_frames);
        goto out;
    }
    for (uint32_t id = 1; id < fs->nframes && n < fs->live_frames; id++) {
        const struct frame *f = &fs->frames[id];
        if (!f->clen)
            continue;
        if (f->flags & FRAME_OUTSIDE) {
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
    n += regions(fs, v + n);
    for (size_t i = 0; i < np; i++)
        v[n++] = (struct sp){fs->retired_prev.v[i].off, fs->retired_prev.v[i].len, (uint32_t)i,
                             SP_RETIRED_PREV};
    for (size_t i = 0; i < nc; i++)
        v[n++] = (struct sp){fs->retired_cur.v[i].off, fs->retired_cur.v[i].len, (uint32_t)i,
                             SP_RETIRED_CUR};
    /* Past the end of the image nothing is there to share (loading counts
     * only what is there, alloc.c). */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].off < size) {
            v[k] = v[i];
            if (v[k].len > size - v[k].off)
                v[k].len = size - v[k].off;
            k++;
        }
    n = k;
    qsort(v, n, sizeof *v, sp_cmp);
    size_t last = 0; /* the extent reaching furthest so far */
    for (size_t i = 1; i < n; i++) {
        if (v[i].off < v[last].off + v[last].len)
            overlap(c, &v[last], &v[i], bad, same, drop);
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
            fs->frames[id].flags |= FRAME_OUTSIDE;
    if (nbad || nsame)
        remap_blocks(c, bad, nsame ? same : NULL, "its frame lies past the end or overlaps");
    if (c->repair) {
        retired_keep(&fs->retired_prev, drop[0]);
        retired_keep(&fs->retired_cur, drop[1]);
    }
out:
    free(bad);
    free(same);
    free(drop[0]);
    free(drop[1]);
    free(v);
}

/* ---- inode contents ------------------------------------------------------------ */

static void check_mapped_past_size(checker *c, struct inode *in)
{
    gmtf_fs *fs = c->fs;
    uint64_t nblk = (in->size + fs->bs - 1) / fs->bs;
    uint32_t part = (uint32_t)(in->size % fs->bs);
    for (uint32_t i = in->u.ext.n; i-- > 0;) {
        struct fref e = in->u.ext.v[i];
        if (e.blk < nblk && !(e.blk == nblk - 1 && part && e.len > part))
            break; /* sorted by block: the rest lie below */
        problem(c, c->repair, "inode %llu: block %u maps %u bytes, past the size %llu",
                (unsigned long long)in->ino, e.blk, e.len, (unsigned long long)in->size);
        if (!c->repair)
            continue;
        if (e.blk >= nblk)
            rec_ext(fs, in->ino, e.blk, 0, 0, 0);
        else
            rec_ext(fs, in->ino, e.blk, e.frame, e.off, part);
    }
}

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
        if (S_ISREG(in->mode))
            check_mapped_past_size(c, in);
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
    size_t d0 = ix(c, dir);
    if (d0 == SIZE_MAX) { /* not an inode (a root dropped at load): nothing below */
        free(stack);
        return 0;
    }
    stack[n++] = dir;
    seen[d0] = 1;
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
        rec_inode_new(fs, ino, inode_alloc_gen(fs), S_IFDIR | 0700, 0, 0, 0, GMTF_ROOT_INO, 0) ||
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

/* A copy of the allocator's state, to try allocations and undo them. */
typedef struct alloc_state {
    extvec free, punched;
    uint64_t end, used, room;
    struct ext spare;
} alloc_state;

static int ev_copy(extvec *dst, const extvec *src)
{
    memset(dst, 0, sizeof *dst);
    if (!src->n)
        return 0;
    dst->v = malloc(src->n * sizeof *dst->v);
    if (!dst->v)
        return -ENOMEM;
    memcpy(dst->v, src->v, src->n * sizeof *dst->v);
    dst->n = dst->cap = src->n;
    return 0;
}

/* With a capacity, the checkpoint must find room for the snapshot (at most
 * the frames' bound of its chunks) and a journal, two copies of each in a
 * version 2 image, before it writes anything: tried, then undone. */
static int repair_fits(gmtf_fs *fs)
{
    if (!fs->sb.capacity)
        return 0; /* growable: the host's space, found out by writing */
    extvec retire;
    int rc = alloc_retire_list(fs, &retire);
    if (rc)
        return rc;
    wbuf w = {0};
    uint32_t *ends = NULL;
    size_t nch = 0;
    rc = snapshot_serialize(fs, &retire, &w, SNAP_CHUNK, &ends, &nch);
    ev_free(&retire);
    if (rc)
        return rc;
    uint64_t need = SNAP_HDR_SIZE + 4096, prev = 0;
    for (size_t i = 0; i < nch; i++) {
        need += gmtf_frame_bound(ends[i] - prev);
        prev = ends[i];
    }
    wb_free(&w);
    free(ends);
    alloc_state st = {.end = fs->end, .used = fs->used, .room = fs->room, .spare = fs->spare};
    if (ev_copy(&st.free, &fs->free) || ev_copy(&st.punched, &fs->punched)) {
        ev_free(&st.free);
        return -ENOMEM;
    }
    int copies = fs->sb.version >= FMT_VERSION ? 2 : 1;
    uint64_t off;
    for (int k = 0; k < copies && !rc; k++)
        rc = alloc_meta(fs, need, &off);
    for (int k = 0; k < copies && !rc; k++)
        rc = alloc_meta(fs, JOURNAL_MIN, &off);
    ev_free(&fs->free);
    ev_free(&fs->punched);
    fs->free = st.free;
    fs->punched = st.punched;
    fs->end = st.end;
    fs->used = st.used;
    fs->room = st.room;
    fs->spare = st.spare;
    return rc;
}

/* ---- fsck ------------------------------------------------------------------------- */

/* Version 2: the generation after the loaded one, when both of its slots
 * are damaged (the magic there, the checksum wrong) and name it: a crash
 * never does that (the primary is flushed before the secondary is written),
 * damage does, and a repair would write over the newest state. 0: none.
 * A damaged slot that is an older generation's copy (its generation below
 * the loaded one, and its journal id that generation's: two fields that
 * agree) is not a copy of the newer one: its secondary was never written,
 * so the newer primary is what a crash tore while writing it. That is what
 * a crash leaves when a slot was already damaged (a repair leaves the
 * damaged copy of the generation it builds on in place): fsck -y of an
 * image with both older slots damaged, its checkpoint's primary torn (seed
 * 491696 of test_fs_crash_states, repair), was refused by a second fsck -y
 * that a mount accepted (the older pair lost: it writes them again). */
static uint64_t newer_damaged(gmtf_fs *fs)
{
    if (fs->sb.version < FMT_VERSION)
        return 0; /* version 1: a torn slot is what a crash leaves */
    uint8_t *b = malloc(SB_SLOTS * SB_SLOT_SIZE);
    if (!b || img_read(fs, b, SB_SLOTS * SB_SLOT_SIZE, 0)) {
        free(b);
        return 0;
    }
    unsigned q = (unsigned)((fs->sb.gen + 1) & 1); /* the pair generation + 1 goes to */
    uint64_t newer = 0;
    int damaged = 0, older = 0;
    for (unsigned i = q; i < SB_SLOTS; i += 2) {
        sb_info x;
        const uint8_t *slot = b + (size_t)i * SB_SLOT_SIZE;
        if (sb_decode(slot, &x) != -EUCLEAN || memcmp(slot, SB_MAGIC, 8))
            break;
        damaged++;
        uint64_t g = load_le64(slot + 16); /* unchecked: as the slot has it */
        if (g > fs->sb.gen && (!newer || g < newer))
            newer = g;
        older += g < fs->sb.gen && load_le64(slot + 160) == sb_journal_id(fs->sb.uuid, g);
    }
    free(b);
    return damaged == 2 && !older ? newer : 0;
}

static void check_superblocks(checker *c)
{
    gmtf_fs *fs = c->fs;
    int repair = c->repair;
    if (fs->sb.incompat & SB_INCOMPLETE) {
        problem(c, 0, "the image is incomplete: the mkfs that made it did not finish");
        unrepairable(c, "an incomplete image holds nothing to repair; make it again");
    }
    if (fs->fell_back) {
        char why[200];
        snprintf(why, sizeof why,
                 "generation %llu is damaged beyond its copies; generation %llu (read-only "
                 "mounts show it) would lose what changed after it",
                 (unsigned long long)fs->lost_gen, (unsigned long long)fs->sb.gen);
        problem(c, 0, "%s", why);
        unrepairable(c, why);
        return;
    }
    uint64_t newer = newer_damaged(fs);
    if (newer) {
        char why[200];
        snprintf(why, sizeof why,
                 "both superblock copies of a newer generation (%llu) are damaged: its state "
                 "cannot be read, and generation %llu (read-only mounts show it) would lose "
                 "what changed after it",
                 (unsigned long long)newer, (unsigned long long)fs->sb.gen);
        problem(c, 0, "%s", why);
        unrepairable(c, why);
        return;
    }
    if (fs->sb_twin_bad)
        problem(c, repair, "one copy of the superblock of generation %llu is damaged",
                (unsigned long long)fs->sb.gen);
    if (fs->sb_pair_lost)
        problem(c, repair, "both superblock slots of the older generation are unreadable");
    if (fs->root_nlink_bad)
        problem(c, repair, "the root directory had link count %u", fs->root_nlink_bad - 1);
    if (fs->meta_damaged)
        problem(c, repair, "%d damaged piece(s) of metadata copies (the other copy served)",
                fs->meta_damaged);
}

/* What loading found beside: records that did not apply, space past the end. */
static void check_load(checker *c)
{
    gmtf_fs *fs = c->fs;
    if (fs->corrupt_records)
        problem(c, c->repair, "%d metadata records could not be applied%s", fs->corrupt_records,
                c->repair ? ": left out" : "");
    uint64_t size = 0;
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
    fs->ro = 1; /* load without writing, even to repair */
    rc = fs_load(fs);
    if (!rc && fs->bs > SNAP_CHUNK && fs->bs != GMTF_FS_BLOCK_DEFAULT)
        rc = codec_resize(fs);
    /* fs_load gives -EUCLEAN only when no generation loads (space
     * referenced twice is loaded read-only, and check_space says where):
     * what a failed generation left behind (inodes, but no allocator state:
     * its end at 0) is no state to repair. Taken for one, it had the
     * repair's checkpoint write its snapshot and journals over the
     * superblock slots (mutator seed 4915 of 10,000). */
    if (rc) {
        fs_destroy(fs, 0);
        return rc;
    }
    check_superblocks(&c);
    if (fs->replayed && fs->sb.jrnl_len) {
        char msg[100];
        snprintf(msg, sizeof msg, "journal replayed: %llu records",
                 (unsigned long long)fs->replayed);
        note(&c, msg); /* normal after a crash: not a problem */
    }
    check_load(&c);
    rc = check_all(&c);
    /* A repair writes only when there is something to write, only when it
     * fixed every problem, and never over a state it could not read whole. */
    if (!rc && o.repair && !rep->unrepairable && (rep->errors || fs->replayed)) {
        int room = repair_fits(fs);
        if (room) {
            char why[120];
            snprintf(why, sizeof why, "no room for the repaired metadata (%s)", strerror(-room));
            problem(&c, 0, "%s", why);
        } else {
            fs->ro = 0;
            if (c.hold_snap) /* the checkpoint retires the old regions: not these */
                fs->sb.snap_len = 0;
            if (c.hold_jrnl)
                fs->sb.jrnl_len = 0;
            rc = fs_checkpoint(fs, JOURNAL_MIN);
            if (rc)
                problem(&c, 0, "writing the repaired metadata failed: %s", strerror(-rc));
            rep->written = !rc;
            rc = 0;
        }
    }
    if (!rc)
        gmtf_fs_get_info(fs, &rep->info);
    free(c.inos);
    fs_destroy(fs, 0);
    return rc;
}
