/* gmtf-extract: the files of a gmtf image without mounting it, into a
 * directory, into an archive of any format libarchive writes, or listed
 * like tar -tv:
 *
 *   gmtf-extract IMAGE [-C DIR | -f FORMAT [-o FILE|-]] [-l] [PATH...]
 *
 * This file is the command line and the walk of the image (read-only,
 * through fs/gmtf_fs.h): directories in name order, hard links told
 * apart, the data of each directory's files decoded ahead in batches
 * (gmtf_fs_prefetch: the codec's threads, the GPU when present). The
 * sinks are extract_disk.c and extract_archive.c. Man page:
 * docs/gmtf-extract.1. */
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "extract.h"
#include "gmtf_codec.h"
#include "gmtf_fs.h"

#define MAX_DEPTH 4096

/* Inodes seen: the first path of a hard-linked inode; directories
 * entered (a damaged image could name one twice: a cycle). */
typedef struct seen_ent {
    uint64_t ino; /* 0: free */
    char *path;   /* first path (hard links), NULL for a directory */
} seen_ent;

typedef struct walk {
    gmtf_fs *fs;
    xsrc *x;
    xsink *sink; /* NULL: only count */
    seen_ent *seen;
    size_t nseen, cap;
    int stop;
} walk;

typedef struct dentry {
    char *name;
    uint64_t ino;
} dentry;

typedef struct dlist {
    dentry *v;
    size_t n, cap;
    int oom;
} dlist;

/* ---- inodes seen ---------------------------------------------------------------- */

static size_t seen_slot(const walk *w, uint64_t ino)
{
    uint64_t h = ino * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    size_t i = (size_t)h & (w->cap - 1);
    while (w->seen[i].ino && w->seen[i].ino != ino)
        i = (i + 1) & (w->cap - 1);
    return i;
}

static seen_ent *seen_find(walk *w, uint64_t ino)
{
    if (!w->cap)
        return NULL;
    seen_ent *e = &w->seen[seen_slot(w, ino)];
    return e->ino ? e : NULL;
}

static int seen_add(walk *w, uint64_t ino, const char *path)
{
    if (2 * (w->nseen + 1) > w->cap) {
        seen_ent *old = w->seen;
        size_t n = w->cap;
        w->cap = n ? 2 * n : 1024;
        w->seen = calloc(w->cap, sizeof *w->seen);
        if (!w->seen) {
            w->seen = old;
            w->cap = n;
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            if (old[i].ino)
                w->seen[seen_slot(w, old[i].ino)] = old[i];
        free(old);
    }
    char *p = path ? strdup(path) : NULL;
    if (path && !p)
        return -ENOMEM;
    w->seen[seen_slot(w, ino)] = (seen_ent){ino, p};
    w->nseen++;
    return 0;
}

static void seen_free(walk *w)
{
    for (size_t i = 0; i < w->cap; i++)
        free(w->seen[i].path);
    free(w->seen);
}

/* ---- directories ---------------------------------------------------------------------- */

static int collect(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
    (void)next_off;
    dlist *l = arg;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        dentry *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = 1;
            return 1;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].name = strdup(name);
    if (!l->v[l->n].name) {
        l->oom = 1;
        return 1;
    }
    l->v[l->n++].ino = (uint64_t)st->st_ino;
    return 0;
}

static int dentry_cmp(const void *a, const void *b)
{
    return strcmp(((const dentry *)a)->name, ((const dentry *)b)->name);
}

static void dlist_free(dlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
}

/* The entries of directory ino, sorted by name bytes. */
static int list_dir(walk *w, uint64_t ino, const char *path, dlist *l)
{
    memset(l, 0, sizeof *l);
    int rc = gmtf_fs_readdir(w->fs, ino, 0, collect, l); /* stops only out of memory */
    if (rc || l->oom) {
        xsrc_error(w->x, path, "listing: %s", strerror(rc ? -rc : ENOMEM));
        dlist_free(l);
        memset(l, 0, sizeof *l);
        return -1;
    }
    if (l->n)
        qsort(l->v, l->n, sizeof *l->v, dentry_cmp);
    return 0;
}

/* ---- the walk ----------------------------------------------------------------------- */

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + !!a, name, b + 1);
    }
    return p;
}

/* A name that stays where it is put: one component, not . or .. */
static int safe_name(const char *name)
{
    return *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

static void walk_node(walk *w, uint64_t ino, const char *path, const char *name, int depth);

static void walk_children(walk *w, uint64_t ino, const char *path, int depth)
{
    dlist l;
    if (list_dir(w, ino, path, &l))
        return;
    /* Decode ahead what this directory's files hold: in batches, on the
     * codec's threads; then each read copies from the cache. */
    uint64_t *files = w->sink ? malloc((l.n + 1) * sizeof *files) : NULL;
    size_t nfiles = 0, ahead = 0;
    for (size_t i = 0; files && i < l.n; i++)
        files[nfiles++] = l.v[i].ino;
    size_t f = 0;
    for (size_t i = 0; i < l.n && !w->stop; i++, f++) {
        if (files && f >= ahead) {
            long got = gmtf_fs_prefetch(w->fs, files + f, nfiles - f);
            ahead = got > 0 ? f + (size_t)got : nfiles;
        }
        if (!safe_name(l.v[i].name)) {
            char *p = join(path, l.v[i].name);
            xsrc_error(w->x, p ? p : path, "a name that is not one path component: skipped");
            free(p);
            continue;
        }
        char *p = join(path, l.v[i].name);
        if (!p) {
            xsrc_error(w->x, path, "%s", strerror(ENOMEM));
            break;
        }
        walk_node(w, l.v[i].ino, p, l.v[i].name, depth + 1);
        free(p);
    }
    free(files);
    dlist_free(&l);
}

static void walk_node(walk *w, uint64_t ino, const char *path, const char *name, int depth)
{
    xnode n = {.path = path, .name = name};
    int rc = gmtf_fs_getattr(w->fs, ino, &n.st);
    if (rc) {
        xsrc_error(w->x, path, "%s", strerror(-rc));
        return;
    }
    n.st.st_ino = (ino_t)ino;
    char target[4097];
    if (S_ISLNK(n.st.st_mode)) {
        long len = gmtf_fs_readlink(w->fs, ino, target, sizeof target - 1);
        if (len < 0 || len >= (long)sizeof target - 1) {
            xsrc_error(w->x, path, "link target: %s",
                       len < 0 ? strerror((int)-len) : "longer than 4096 bytes");
            return;
        }
        target[len] = 0;
        n.target = target;
    }
    if (S_ISDIR(n.st.st_mode)) {
        if (seen_find(w, ino) || depth > MAX_DEPTH) {
            xsrc_error(w->x, path, "a directory met twice or nested too deep: skipped");
            return;
        }
        if (seen_add(w, ino, NULL)) {
            xsrc_error(w->x, path, "%s", strerror(ENOMEM));
            w->stop = 1;
            return;
        }
    } else if (n.st.st_nlink > 1) {
        seen_ent *e = seen_find(w, ino);
        if (e)
            n.link = e->path;
        else if (seen_add(w, ino, path))
            xsrc_error(w->x, path, "%s", strerror(ENOMEM));
    }
    if (!w->sink) { /* counting */
        if (!S_ISDIR(n.st.st_mode)) {
            w->x->files_total++;
            if (S_ISREG(n.st.st_mode) && !n.link)
                w->x->bytes_total += (uint64_t)n.st.st_size;
        }
    } else if (w->sink->node(w->sink->ctx, w->x, &n)) {
        return;
    }
    if (S_ISDIR(n.st.st_mode)) {
        walk_children(w, ino, path, depth);
        if (w->sink)
            w->sink->dir_end(w->sink->ctx, w->x, &n);
    }
}

/* ---- PATH operands ------------------------------------------------------------------- */

/* Looks PATH up from the root: components split on '/', empty ones and
 * "." skipped, ".." refused. *norm gets the path as extracted. */
static int resolve(gmtf_fs *fs, const char *arg, uint64_t *ino, char **norm)
{
    char *dup = strdup(arg), *save = NULL;
    size_t cap = strlen(arg) + 1, k = 0;
    char *out = malloc(cap);
    if (!dup || !out) {
        free(dup);
        free(out);
        return -ENOMEM;
    }
    uint64_t at = GMTF_ROOT_INO;
    int rc = 0;
    for (char *c = strtok_r(dup, "/", &save); c && !rc; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            rc = -EINVAL;
            break;
        }
        gmtf_entry e;
        rc = gmtf_fs_lookup(fs, at, c, &e);
        if (!rc) {
            at = (uint64_t)e.attr.st_ino;
            k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? "/" : "", c);
        }
    }
    free(dup);
    if (rc) {
        free(out);
        return rc;
    }
    out[k] = 0;
    *ino = at;
    *norm = out;
    return 0;
}

/* The parents of path, as implied directories the disk sink makes (their
 * attributes are not the image's: only what is named is extracted). */
static void walk_operand(walk *w, uint64_t ino, const char *path)
{
    if (!*path) {
        walk_node(w, GMTF_ROOT_INO, "", "", 0);
        return;
    }
    char *p = strdup(path);
    if (!p)
        return;
    xnode *parents = NULL;
    size_t np = 0;
    for (char *s = p; w->sink && (s = strchr(s, '/')); s++)
        np++;
    parents = np ? calloc(np, sizeof *parents) : NULL;
    size_t k = 0;
    for (char *s = p; parents && (s = strchr(s, '/')); s++) {
        *s = 0;
        xnode *n = &parents[k];
        n->path = strdup(p);
        const char *slash = strrchr(n->path ? n->path : "", '/');
        n->name = n->path ? (slash ? slash + 1 : n->path) : "";
        n->st.st_mode = S_IFDIR | 0755;
        n->implied = 1;
        *s = '/';
        if (!n->path || w->sink->node(w->sink->ctx, w->x, n))
            break;
        k++;
    }
    const char *slash = strrchr(path, '/');
    if (k == np)
        walk_node(w, ino, path, slash ? slash + 1 : path, 0);
    while (k--) {
        w->sink->dir_end(w->sink->ctx, w->x, &parents[k]);
        free((char *)parents[k].path);
    }
    free(parents);
    free(p);
}

/* ---- main ------------------------------------------------------------------------------- */

static void tick(void *arg, int final)
{
    xsrc *x = arg;
    cli_work w = {.files = __atomic_load_n(&x->files, __ATOMIC_RELAXED),
                  .files_total = x->files_total,
                  .bytes = __atomic_load_n(&x->bytes, __ATOMIC_RELAXED),
                  .bytes_total = x->bytes_total};
    w.done = w.bytes + w.files * 4096; /* every file costs, empty ones too */
    w.total = w.bytes_total + w.files_total * 4096;
    cli_progress_work(&x->line, &w, final);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s [OPTIONS] IMAGE [PATH...]\n"
            "Extract the files of a gmtf image (all, or the PATHs named) without mounting it:\n"
            "into a directory, into an archive, or as a listing.\n\n"
            "  -C, --directory=DIR    extract into DIR (default: the current directory;\n"
            "                         made when missing, and then given the root's attributes)\n"
            "  -f, --format=FORMAT    write an archive instead: pax, ustar, gnutar, cpio,\n"
            "                         newc, zip, 7zip, ... (any format libarchive writes)\n"
            "  -o, --output=FILE      the archive's file (default -: standard output); a\n"
            "                         suffix .gz .bz2 .xz .zst .lz4 ... compresses it\n"
            "      --filter=NAME      compress the archive with NAME (gzip, bzip2, xz, zstd...)\n"
            "  -l, --list             list the files like tar -tv (with -q: names only)\n"
            "      --same-owner       give files the image's owners (default as root)\n"
            "      --no-same-owner    leave files to the user running gmtf-extract\n"
            "  -j, --threads=N        decoding threads (default: all CPUs)\n"
            "      --mtf=NAME         MTF backend of the codec (default: auto)\n"
            "  -q, --quiet            no progress line\n"
            "  -v, --verbose          a summary at the end (files, bytes, time, frames decoded)\n"
            "  -h, --help             show this help and exit\n"
            "  -V, --version          show the version and exit\n"
            "Exit status: 0 when everything was extracted, 1 otherwise (see the messages).\n",
            prog);
}

enum { OPT_FILTER = 256, OPT_SAME_OWNER, OPT_NO_SAME_OWNER, OPT_MTF };

typedef struct args {
    const char *dir, *format, *output, *filter, *mtf, *image;
    int list, quiet, verbose, same_owner;
    unsigned threads;
} args;

static int parse(int argc, char **argv, const char *prog, args *a)
{
    static const struct option longs[] = {{"directory", required_argument, 0, 'C'},
                                          {"format", required_argument, 0, 'f'},
                                          {"output", required_argument, 0, 'o'},
                                          {"filter", required_argument, 0, OPT_FILTER},
                                          {"list", no_argument, 0, 'l'},
                                          {"same-owner", no_argument, 0, OPT_SAME_OWNER},
                                          {"no-same-owner", no_argument, 0, OPT_NO_SAME_OWNER},
                                          {"threads", required_argument, 0, 'j'},
                                          {"mtf", required_argument, 0, OPT_MTF},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"verbose", no_argument, 0, 'v'},
                                          {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},
                                          {0, 0, 0, 0}};
    int opt;
    a->same_owner = geteuid() == 0;
    while ((opt = getopt_long(argc, argv, "C:f:o:lj:qvhV", longs, NULL)) != -1) {
        switch (opt) {
        case 'C': a->dir = optarg; break;
        case 'f': a->format = optarg; break;
        case 'o': a->output = optarg; break;
        case OPT_FILTER: a->filter = optarg; break;
        case 'l': a->list = 1; break;
        case OPT_SAME_OWNER: a->same_owner = 1; break;
        case OPT_NO_SAME_OWNER: a->same_owner = 0; break;
        case 'j':
            if (cli_parse_threads(prog, optarg, &a->threads) < 0) {
                return -1;
            }
            break;
        case OPT_MTF: a->mtf = optarg; break;
        case 'q': a->quiet = 1; break;
        case 'v': a->verbose = 1; break;
        case 'h': usage(stdout, prog); return 0;
        case 'V': cli_version(prog, NULL); return 0;
        default: cli_try_help(prog); return -1;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no IMAGE given\n", prog);
        cli_try_help(prog);
        return -1;
    }
    if (a->list + !!a->format + !!a->dir > 1 || (a->output && !a->format) ||
        (a->filter && !a->format)) {
        fprintf(stderr, "%s: -C, -f and -l exclude each other; -o and --filter go with -f\n", prog);
        cli_try_help(prog);
        return -1;
    }
    a->image = argv[optind++];
    return optind;
}

/* What the library says about the image (damage it met loading the
 * metadata, frames that do not decode): each line on stderr, counted, so
 * that an extraction from a damaged image does not exit 0. */
typedef struct xlog {
    const char *prog, *image;
    cli_progress *line; /* once the progress line exists */
    unsigned long count;
} xlog;

static void log_line(void *arg, const char *msg)
{
    xlog *l = arg;
    __atomic_add_fetch(&l->count, 1, __ATOMIC_RELAXED);
    cli_progress *line = __atomic_load_n(&l->line, __ATOMIC_ACQUIRE);
    if (line)
        cli_progress_printf(line, "%s: %s: %s\n", l->prog, l->image, msg);
    else
        fprintf(stderr, "%s: %s: %s\n", l->prog, l->image, msg);
}

static int open_image(const char *prog, const args *a, gmtf_fs **fs, xlog *log)
{
    gmtf_image *img;
    int rc = gmtf_image_open_file(a->image, GMTF_IMAGE_RDONLY, &img);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, a->image,
                rc == -EBUSY ? "in use (mounted read-write, or mkfs/fsck running on it)"
                             : strerror(-rc));
        return -1;
    }
    gmtf_fs_options fo = {.read_only = 1,
                          .mtf = a->mtf,
                          .threads = a->threads,
                          .cache_bytes = 256u << 20,
                          .readahead_blocks = 16,
                          .log = log_line,
                          .log_arg = log};
    rc = gmtf_fs_mount(img, &fo, fs);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, a->image,
                rc == -EINVAL    ? "not a gmtf image (or a newer format version)"
                : rc == -EUCLEAN ? "the metadata is damaged or the image incomplete; run fsck.gmtf"
                : rc < -1000     ? gmtf_strerror(rc)
                                 : strerror(-rc));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *prog = "gmtf-extract";
    /* Names are bytes: libarchive converts archive names (UTF-8 in pax) to
     * the locale's charset, which C.UTF-8 leaves as they are; names that
     * are not UTF-8 travel as binary (pax hdrcharset=BINARY). */
    if (!setlocale(LC_CTYPE, "C.UTF-8"))
        setlocale(LC_CTYPE, "");
    args a = {0};
    int first = parse(argc, argv, prog, &a);
    if (first <= 0)
        return first == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    gmtf_fs *fs;
    xlog log = {.prog = prog, .image = a.image};
    if (open_image(prog, &a, &fs, &log))
        return CLI_EXIT_FAIL;
    if (log.count)
        fprintf(stderr,
                "%s: %s: the metadata is damaged (above): extracting what it still holds; "
                "fsck.gmtf -n tells more\n",
                prog, a.image);
    xsrc x = {.fs = fs, .prog = prog, .buf = malloc(XSRC_BUF)};
    cli_progress_init(&x.line, prog, a.quiet || a.list, 1);
    __atomic_store_n(&log.line, &x.line, __ATOMIC_RELEASE);
    walk w = {.fs = fs, .x = &x};
    xsink sink = {0};
    xdisk *disk = NULL;
    xarchive *ar = NULL;
    int rc = x.buf ? 0 : -1;
    if (!rc && a.list)
        rc = xarchive_list(&ar, !a.quiet, &sink);
    else if (!rc && a.format)
        rc = xarchive_open(&ar, a.format, a.filter, a.output ? a.output : "-", &sink, prog);
    else if (!rc)
        rc = xdisk_open(&disk, a.dir ? a.dir : ".", a.same_owner, &sink, prog);
    if (rc) {
        gmtf_fs_unmount(fs);
        free(x.buf);
        cli_progress_free(&x.line);
        return CLI_EXIT_FAIL;
    }
    int nops = argc - first;
    uint64_t *ino = calloc((size_t)nops + 1, sizeof *ino);
    char **norm = calloc((size_t)nops + 1, sizeof *norm);
    if (nops == 0 && norm) {
        norm[0] = strdup("");
        ino[0] = GMTF_ROOT_INO;
        nops = 1;
    } else {
        for (int i = 0; i < nops && norm; i++) {
            int r = resolve(fs, argv[first + i], &ino[i], &norm[i]);
            if (r)
                xsrc_error(&x, argv[first + i], "%s",
                           r == -EINVAL ? "a path with '..' names nothing in the image"
                                        : strerror(-r));
        }
    }
    for (int i = 0; i < nops && norm; i++) /* totals, for the progress line */
        if (norm[i] && x.line.mode != CLI_PROGRESS_OFF)
            walk_operand(&w, ino[i], norm[i]);
    seen_free(&w);
    w = (walk){.fs = fs, .x = &x, .sink = &sink};
    cli_progress_start(&x.line, tick, &x);
    for (int i = 0; i < nops && norm; i++)
        if (norm[i])
            walk_operand(&w, ino[i], norm[i]);
    cli_progress_stop(&x.line);
    if (ar && xarchive_close(ar, &x))
        rc = -1;
    if (a.verbose) {
        gmtf_fs_info fi;
        gmtf_fs_get_info(fs, &fi);
        double el = cli_now() - x.line.start;
        fprintf(stderr,
                "%s: %llu files, %llu bytes in %.1f s (%.1f MB/s); %llu frames decoded of %llu "
                "in the image; %llu errors\n",
                prog, (unsigned long long)x.files, (unsigned long long)x.bytes, el,
                el > 0 ? x.bytes / el / 1e6 : 0.0, (unsigned long long)fi.frames_decoded,
                (unsigned long long)fi.frames, (unsigned long long)x.errors);
    }
    if (disk) {
        xnode root = {.path = ".", .name = "."};
        int have = nops == 1 && norm && norm[0] && !*norm[0] &&
                   !gmtf_fs_getattr(fs, GMTF_ROOT_INO, &root.st);
        root.st.st_ino = GMTF_ROOT_INO;
        xdisk_close(disk, &x, have ? &root : NULL);
    }
    for (int i = 0; i < nops && norm; i++)
        free(norm[i]);
    free(norm);
    free(ino);
    seen_free(&w);
    free(x.buf);
    gmtf_fs_unmount(fs);
    cli_progress_free(&x.line);
    return rc || x.errors || log.count || !norm ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
