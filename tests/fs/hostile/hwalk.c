/* Facts and the bounded walk of a mounted image (hwork.h). No processes,
 * no test helpers: the fuzz target links it too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hwork.h"

/* ---- facts ------------------------------------------------------------------ */

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fact_key(const char *path, const char *kind, const char *extra)
{
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, path, strlen(path) + 1);
    h = hash_bytes(h, kind, strlen(kind) + 1);
    if (extra)
        h = hash_bytes(h, extra, strlen(extra) + 1);
    return h;
}

static void fact_add(hfacts *f, uint64_t key, uint64_t value)
{
    if (!f)
        return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 256;
        uint64_t(*v)[2] = realloc(f->v, cap * sizeof *v);
        if (!v)
            abort();
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n][0] = key;
    f->v[f->n][1] = value;
    f->n++;
}

void hfacts_free(hfacts *f)
{
    free(f->v);
    memset(f, 0, sizeof *f);
}

static int fact_cmp(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

void hfacts_sort(hfacts *f)
{
    if (!f->n)
        return;
    qsort(f->v, f->n, sizeof *f->v, fact_cmp);
    size_t k = 1;
    for (size_t i = 1; i < f->n; i++)
        if (fact_cmp(f->v[i], f->v[k - 1]))
            memcpy(f->v[k++], f->v[i], sizeof *f->v);
    f->n = k;
}

int hfacts_has(const hfacts *f, uint64_t key, uint64_t value)
{
    uint64_t want[2] = {key, value};
    return f->n && bsearch(want, f->v, f->n, sizeof *f->v, fact_cmp) != NULL;
}

/* ---- walk ------------------------------------------------------------------- */

#define WALK_DEPTH 64
#define WALK_ENTRIES 100000
#define WALK_BYTES (64ull << 20)
#define WALK_FULL (4ull << 20) /* files up to this size are read whole */

typedef hdirent went;

typedef struct wctx {
    gmtf_fs *fs;
    hfacts *facts;
    hwalk_stats *st;
    uint64_t *seen;
    size_t nseen, capseen;
    unsigned entries;
    uint64_t budget; /* bytes left to read */
    uint8_t *buf;
} wctx;

typedef struct wlist {
    went *v;
    size_t n, cap;
    unsigned *entries;
} wlist;

static int list_fill(void *arg, const char *name, const struct stat *st, uint64_t off)
{
    (void)off;
    wlist *l = arg;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    if (*l->entries >= WALK_ENTRIES)
        return 1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        went *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return 1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].ino = st->st_ino;
    snprintf(l->v[l->n].name, sizeof l->v[l->n].name, "%s", name);
    l->n++;
    (*l->entries)++;
    return 0;
}

static int seen_add(wctx *w, uint64_t ino)
{
    for (size_t i = 0; i < w->nseen; i++)
        if (w->seen[i] == ino)
            return 1;
    if (w->nseen == w->capseen) {
        size_t cap = w->capseen ? w->capseen * 2 : 64;
        uint64_t *v = realloc(w->seen, cap * sizeof *v);
        if (!v)
            return 1;
        w->seen = v;
        w->capseen = cap;
    }
    w->seen[w->nseen++] = ino;
    return 0;
}

hdirent *hwalk_list(gmtf_fs *fs, uint64_t dir, size_t *n)
{
    unsigned entries = 0;
    wlist l = {.entries = &entries};
    gmtf_fs_readdir(fs, dir, 0, list_fill, &l);
    *n = l.n;
    return (hdirent *)l.v;
}

static void walk_xattrs(wctx *w, uint64_t ino, const char *path)
{
    char names[4096];
    long n = gmtf_fs_listxattr(w->fs, ino, names, sizeof names);
    if (n < 0) {
        if (n != -ERANGE)
            w->st->errors++;
        return;
    }
    for (long i = 0; i < n;) {
        const char *nm = names + i;
        size_t nl = strnlen(nm, (size_t)(n - i));
        long v = gmtf_fs_getxattr(w->fs, ino, nm, w->buf, 256u << 10);
        if (v < 0)
            w->st->errors++;
        else {
            w->st->xattrs++;
            fact_add(w->facts, fact_key(path, "x", nm), hash_bytes(7, w->buf, (size_t)v));
        }
        i += (long)nl + 1;
    }
}

static void walk_file(wctx *w, uint64_t ino, const char *path, uint64_t size)
{
    uint64_t h = 11, off = 0;
    int sparse = size > WALK_FULL;
    while (off < size && w->budget) {
        if (sparse) { /* data regions only */
            int64_t d = gmtf_fs_lseek(w->fs, ino, (int64_t)off, SEEK_DATA);
            if (d < 0 || (uint64_t)d >= size)
                break;
            off = (uint64_t)d;
        }
        size_t want = 256u << 10;
        if (want > size - off)
            want = (size_t)(size - off);
        if (want > w->budget)
            want = (size_t)w->budget;
        long n = gmtf_fs_read(w->fs, ino, w->buf, want, off);
        if (n < 0) {
            w->st->errors++;
            return;
        }
        if (n == 0)
            break;
        h = hash_bytes(h, w->buf, (size_t)n);
        off += (uint64_t)n;
        w->budget -= (uint64_t)n;
        w->st->bytes += (uint64_t)n;
    }
    w->st->files++;
    /* A file too big to read whole or cut by the budget is no committed
     * content: its fact says so. */
    fact_add(w->facts, fact_key(path, "f", NULL), sparse || off < size ? ~0ull : h);
}

static void walk_dir(wctx *w, uint64_t dir, const char *path, int depth)
{
    if (depth > WALK_DEPTH || seen_add(w, dir))
        return;
    w->st->dirs++;
    wlist l = {.entries = &w->entries};
    if (gmtf_fs_readdir(w->fs, dir, 0, list_fill, &l))
        w->st->errors++;
    char *p = malloc(strlen(path) + 300);
    if (!p) {
        free(l.v);
        return;
    }
    for (size_t i = 0; i < l.n; i++) {
        sprintf(p, "%s/%s", path, l.v[i].name);
        gmtf_entry e;
        /* by name, as a program would: the entry's inode and attributes */
        if (gmtf_fs_lookup(w->fs, dir, l.v[i].name, &e)) {
            w->st->errors++;
            continue;
        }
        struct stat *st = &e.attr;
        walk_xattrs(w, st->st_ino, p);
        if (S_ISDIR(st->st_mode)) {
            fact_add(w->facts, fact_key(p, "d", NULL), 0);
            walk_dir(w, st->st_ino, p, depth + 1);
        } else if (S_ISREG(st->st_mode)) {
            walk_file(w, st->st_ino, p, (uint64_t)st->st_size);
        } else if (S_ISLNK(st->st_mode)) {
            char t[4096];
            long n = gmtf_fs_readlink(w->fs, st->st_ino, t, sizeof t);
            if (n < 0)
                w->st->errors++;
            else {
                w->st->links++;
                fact_add(w->facts, fact_key(p, "l", NULL),
                         hash_bytes(3, t, (size_t)n < sizeof t ? (size_t)n : sizeof t));
            }
        } else {
            w->st->others++;
            fact_add(w->facts, fact_key(p, "o", NULL),
                     (uint64_t)(st->st_mode & S_IFMT) << 32 ^ (uint64_t)st->st_rdev);
        }
    }
    free(p);
    free(l.v);
}

void hwalk(gmtf_fs *fs, hfacts *facts, hwalk_stats *st)
{
    memset(st, 0, sizeof *st);
    wctx w = {.fs = fs, .facts = facts, .st = st, .budget = WALK_BYTES};
    w.buf = malloc(256u << 10);
    if (!w.buf) {
        st->errors++;
        return;
    }
    walk_xattrs(&w, GMTF_ROOT_INO, "");
    walk_dir(&w, GMTF_ROOT_INO, "", 0);
    free(w.seen);
    free(w.buf);
}
