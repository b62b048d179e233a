/* fsck: loads the image read-only (or, to repair, writable), checks every
 * structure the metadata holds, optionally decodes every frame, and with
 * repair fixes what it can and writes a clean checkpoint. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs_internal.h"

typedef struct checker {
    gmtf_fs *fs;
    const gmtf_fs_check_options *opt;
    gmtf_fs_check_report *rep;
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
    char line[460];
    snprintf(line, sizeof line, "%s%s", msg, fixed ? " (fixed)" : "");
    if (c->opt->log)
        c->opt->log(c->opt->log_arg, line);
}

static void note(checker *c, const char *msg)
{
    c->rep->warnings++;
    if (c->opt->log)
        c->opt->log(c->opt->log_arg, msg);
}

/* A repair that cannot be made safely: nothing is written (fsck exit 8). */
static void unrepairable(checker *c, const char *why)
{
    if (!c->opt->repair || c->rep->unrepairable)
        return;
    c->rep->unrepairable = 1;
    char line[300];
    snprintf(line, sizeof line, "cannot repair: %s; the image is left unchanged", why);
    if (c->opt->log)
        c->opt->log(c->opt->log_arg, line);
}

static void quiet_log(void *arg, const char *msg)
{
    checker *c = arg;
    char line[600];
    snprintf(line, sizeof line, "note: %s", msg);
    note(c, line);
}

/* Directory entries: targets exist, directories have one name. */
static void check_dirs(checker *c, uint32_t *links, uint32_t *subdirs)
{
    gmtf_fs *fs = c->fs;
    int repair = c->opt->repair;
    for (uint64_t ino = 1; ino < fs->itab_cap; ino++) {
        struct inode *dir = fs->itab[ino];
        if (!dir || !S_ISDIR(dir->mode))
            continue;
        for (uint32_t i = 0; i < dir->u.dir.n; i++) {
            struct dent *d = dir->u.dir.v[i];
            if (!d)
                continue;
            struct inode *in = inode_get(fs, d->ino);
            if (!in) {
                problem(c, repair, "directory %llu: entry '%s' names missing inode %llu",
                        (unsigned long long)ino, d->name, (unsigned long long)d->ino);
                if (repair)
                    rec_ddel(fs, ino, d->name, d->namelen);
                continue;
            }
            if (S_ISDIR(in->mode)) {
                if (links[d->ino] || d->ino == GMTF_ROOT_INO) {
                    problem(c, repair, "directory %llu has a second name '%s' in %llu",
                            (unsigned long long)d->ino, d->name, (unsigned long long)ino);
                    if (repair)
                        rec_ddel(fs, ino, d->name, d->namelen);
                    continue;
                }
                if (in->parent != ino) {
                    problem(c, repair, "directory %llu: parent is %llu, found in %llu",
                            (unsigned long long)d->ino, (unsigned long long)in->parent,
                            (unsigned long long)ino);
                    if (repair) {
                        in->parent = ino;
                        rec_inode(fs, in);
                    }
                }
                subdirs[ino]++;
            }
            links[d->ino]++;
        }
    }
}

static int reachable_mark(gmtf_fs *fs, uint8_t *seen)
{
    /* Iterative walk from the root over directory entries. */
    uint64_t *stack = malloc(sizeof *stack * 1024), n = 0, cap = 1024;
    if (!stack)
        return -ENOMEM;
    stack[n++] = GMTF_ROOT_INO;
    seen[GMTF_ROOT_INO] = 1;
    while (n) {
        struct inode *dir = inode_get(fs, stack[--n]);
        if (!dir || !S_ISDIR(dir->mode))
            continue;
        for (uint32_t i = 0; i < dir->u.dir.n; i++) {
            struct dent *d = dir->u.dir.v[i];
            if (!d || d->ino >= fs->itab_cap || seen[d->ino])
                continue;
            seen[d->ino] = 1;
            if (n == cap) {
                uint64_t *s = realloc(stack, sizeof *s * cap * 2);
                if (!s) {
                    free(stack);
                    return -ENOMEM;
                }
                stack = s;
                cap *= 2;
            }
            stack[n++] = d->ino;
        }
    }
    free(stack);
    return 0;
}

/* lost+found in the root, made when missing (subdirs counts it). */
static uint64_t lost_found(checker *c, uint32_t *subdirs)
{
    gmtf_fs *fs = c->fs;
    struct dent *d = dent_find(fs, GMTF_ROOT_INO, "lost+found", 10);
    if (d)
        return d->ino;
    uint64_t ino;
    if (inode_alloc_ino(fs, &ino))
        return 0;
    struct inode *root = inode_get(fs, GMTF_ROOT_INO);
    if (rec_inode_new(fs, ino, fs->next_gen, S_IFDIR | 0700, 0, 0, 0, GMTF_ROOT_INO, 0) ||
        rec_dadd(fs, GMTF_ROOT_INO, ino, root->u.dir.next, "lost+found", 10))
        return 0;
    root->nlink++;
    subdirs[GMTF_ROOT_INO]++;
    rec_inode(fs, root);
    return ino;
}

/* Blocks mapped at or past the size, and a last block mapping more bytes
 * than the size leaves in it: a later size increase would show them where
 * zeros belong. Repair unmaps or shortens them. */
static void check_mapped_past_size(checker *c, struct inode *in)
{
    gmtf_fs *fs = c->fs;
    uint64_t nblk = (in->size + fs->bs - 1) / fs->bs;
    uint32_t part = (uint32_t)(in->size % fs->bs);
    for (uint32_t i = in->u.ext.n; i-- > 0;) {
        struct fref e = in->u.ext.v[i];
        if (e.blk < nblk && !(e.blk == nblk - 1 && part && e.len > part))
            break; /* sorted by block: the rest lie below */
        problem(c, c->opt->repair, "inode %llu: block %u maps %u bytes, past the size %llu",
                (unsigned long long)in->ino, e.blk, e.len, (unsigned long long)in->size);
        if (!c->opt->repair)
            continue;
        if (e.blk >= nblk)
            rec_ext(fs, in->ino, e.blk, 0, 0, 0);
        else
            rec_ext(fs, in->ino, e.blk, e.frame, e.off, part);
    }
}

static void check_inodes(checker *c)
{
    gmtf_fs *fs = c->fs;
    int repair = c->opt->repair;
    uint64_t cap = fs->itab_cap;
    uint32_t *links = calloc(cap, sizeof *links), *subdirs = calloc(cap, sizeof *subdirs);
    uint8_t *seen = calloc(cap, 1);
    if (!links || !subdirs || !seen || reachable_mark(fs, seen)) {
        problem(c, 0, "out of memory checking %llu inodes", (unsigned long long)cap);
        goto out;
    }
    check_dirs(c, links, subdirs);
    for (uint64_t ino = 2; ino < cap && ino < fs->itab_cap; ino++) {
        struct inode *in = fs->itab[ino];
        if (!in || seen[ino])
            continue;
        problem(c, repair, "inode %llu (mode %o) is not reachable from the root",
                (unsigned long long)ino, in->mode);
        if (repair) {
            uint64_t lf = lost_found(c, subdirs);
            if (lf < cap)
                seen[lf] = 1; /* made just now: reachable, and no orphan of itself */
            char name[32];
            snprintf(name, sizeof name, "#%llu", (unsigned long long)ino);
            struct inode *dir = inode_get(fs, lf);
            if (dir && !rec_dadd(fs, lf, ino, dir->u.dir.next, name, strlen(name))) {
                links[ino]++;
                if (S_ISDIR(in->mode)) {
                    in->parent = lf;
                    dir->nlink++;
                    if (lf < cap)
                        subdirs[lf]++;
                    rec_inode(fs, dir);
                }
            }
        }
    }
    for (uint64_t ino = 1; ino < cap && ino < fs->itab_cap; ino++) {
        struct inode *in = fs->itab[ino];
        if (!in)
            continue;
        uint32_t want = S_ISDIR(in->mode) ? 2 + subdirs[ino] : links[ino];
        if (in->nlink != want && ino < cap) {
            problem(c, repair, "inode %llu: link count %u, should be %u", (unsigned long long)ino,
                    in->nlink, want);
            if (repair) {
                in->nlink = want;
                rec_inode(fs, in);
            }
        }
        if (S_ISREG(in->mode))
            check_mapped_past_size(c, in);
        if (S_ISLNK(in->mode) && !in->u.target)
            problem(c, 0, "symlink %llu has no target", (unsigned long long)ino);
    }
out:
    free(links);
    free(subdirs);
    free(seen);
}

/* What loading found about the superblocks, the metadata copies and the
 * generation it could load. */
static void check_superblocks(checker *c)
{
    gmtf_fs *fs = c->fs;
    int repair = c->opt->repair;
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
    if (!bad)
        return;
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
                problem(c, 0, "frame %u at offset %llu (%u bytes): %s", ids[i],
                        (unsigned long long)f->off, f->clen,
                        status[i] < -1000 ? gmtf_strerror(status[i]) : strerror(-status[i]));
                bad[ids[i]] = 1;
                nbad++;
            }
        done += n;
        if (c->opt->progress)
            c->opt->progress(c->opt->progress_arg, done, total);
    }
    if (nbad) {
        for (uint64_t ino = 1; ino < fs->itab_cap; ino++) {
            struct inode *in = fs->itab[ino];
            if (!in || !S_ISREG(in->mode))
                continue;
            for (uint32_t i = 0; i < in->u.ext.n; i++) {
                struct fref e = in->u.ext.v[i];
                if (!bad[e.frame])
                    continue;
                char msg[200];
                snprintf(msg, sizeof msg, "inode %llu block %u: data lost (frame %u)%s",
                         (unsigned long long)ino, e.blk, e.frame,
                         c->opt->repair ? ", now a hole" : "");
                note(c, msg);
                if (c->opt->repair && !rec_ext(fs, ino, e.blk, 0, 0, 0)) {
                    c->rep->fixed++;
                    i--; /* the array shifted */
                }
            }
        }
    }
    free(bad);
}

int gmtf_fs_check(gmtf_image *img, const gmtf_fs_check_options *opt, gmtf_fs_check_report *rep)
{
    gmtf_fs_check_options o = {0};
    if (opt)
        o = *opt;
    memset(rep, 0, sizeof *rep);
    checker c = {.opt = &o, .rep = rep};
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
    if (rc) {
        if (rc == -EUCLEAN && fs->itab_cap) {
            /* Space referenced twice: reported, not repairable here. */
            problem(&c, 0, "metadata references overlapping space");
            unrepairable(&c, "metadata references overlapping space");
            rc = 0;
        } else {
            fs_destroy(fs, 0);
            return rc;
        }
    }
    check_superblocks(&c);
    if (fs->replayed && fs->sb.jrnl_len) {
        char msg[100];
        snprintf(msg, sizeof msg, "journal replayed: %llu records",
                 (unsigned long long)fs->replayed);
        note(&c, msg); /* normal after a crash: not a problem */
    }
    if (fs->corrupt_records)
        problem(&c, 0, "%d metadata records could not be applied", fs->corrupt_records);
    check_inodes(&c);
    uint64_t size = 0;
    if (!img_size(fs, &size) && size < fs->end && !img->is_blockdev)
        problem(&c, 0, "image is %llu bytes, but data is allocated up to %llu",
                (unsigned long long)size, (unsigned long long)fs->end);
    if (o.verify_data)
        verify_frames(&c);
    /* A repair writes only when there is something to write, and never
     * over a state it could not read whole. */
    if (o.repair && !rep->unrepairable && (rep->errors || fs->replayed)) {
        fs->ro = 0;
        rc = fs_checkpoint(fs, JOURNAL_MIN);
        if (rc)
            problem(&c, 0, "writing the repaired metadata failed: %s", strerror(-rc));
        rep->written = !rc;
        rc = 0;
    }
    gmtf_fs_get_info(fs, &rep->info);
    fs_destroy(fs, 0);
    return rc;
}
